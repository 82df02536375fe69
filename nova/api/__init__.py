"""Compute API v2.1 subset served over WSGI (WebOb + Routes).

``nova.api.wsgi_app.make_app`` builds the application.
"""

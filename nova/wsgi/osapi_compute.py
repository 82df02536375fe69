"""The Compute API for a WSGI server: ``nova.wsgi.osapi_compute:application``
(see :mod:`nova.wsgi`)."""

from nova import wsgi

application = wsgi.init_compute_api()

"""Sphinx configuration for the nova documentation."""

project = 'nova'
copyright = 'Nova fork developers'
extensions = []
exclude_patterns = []
html_theme = 'alabaster'

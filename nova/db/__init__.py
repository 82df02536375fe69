"""The nova database: models, migrations and the access API."""

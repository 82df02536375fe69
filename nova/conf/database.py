"""[database] options (oslo.db), SQLite under $state_path by default."""

from oslo_config import cfg
from oslo_db import options as oslo_db_options

from nova.conf import paths

_DEFAULT_CONNECTION = 'sqlite:///' + paths.state_path_def('nova.sqlite')


def register_opts(conf: cfg.ConfigOpts) -> None:
    oslo_db_options.set_defaults(conf, connection=_DEFAULT_CONNECTION)


def list_opts() -> dict:
    return {'database': oslo_db_options.database_opts}

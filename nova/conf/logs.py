"""[DEFAULT] options of service logging."""

from oslo_config import cfg

log_opts = [
    cfg.BoolOpt('debug',
                default=False,
                help='Log at DEBUG level instead of INFO; this includes the '
                     'traceback of a configuration error that stops a '
                     'service at start (the console only shows one line).'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(log_opts)


def list_opts() -> dict:
    return {'DEFAULT': log_opts}

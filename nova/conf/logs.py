"""Service logging: oslo.log's options ([DEFAULT]debug, log_file, ...).

The options and their help come from oslo.log (the sample configuration
lists them under its ``oslo.log`` namespace); nova only changes one
default: without ``log_file`` a service logs to stderr, leaving stdout to
what commands print. ``[DEFAULT]debug`` also logs the traceback of a
configuration error that stops a service at start (the console only shows
one line).
"""

from oslo_config import cfg
from oslo_log import log


def register_opts(conf: cfg.ConfigOpts) -> None:
    log.register_options(conf)
    conf.set_default('use_stderr', True)


def list_opts() -> dict:
    # Listed by oslo.log's own namespace in the generator configuration.
    return {}

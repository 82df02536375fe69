"""Console entry points of the nova services, and what they share.

Every service starts through ``run_service``: a configuration error (an
oslo.config error, or a value nova refuses, such as a bad ``[pci]`` entry)
ends the process with exit code 1 and ONE line on stderr naming the option
and the value; the traceback goes to the log at DEBUG (``[DEFAULT]debug``).

Every service stops gracefully on SIGTERM or SIGINT: it stops taking new
API requests and RPC messages, lets those in progress finish and exits 0;
one still busy after ``[DEFAULT]graceful_shutdown_timeout`` seconds exits
with status 1 (see :func:`wait_for_signal`).
"""

from collections.abc import Callable
import ipaddress
import os
import signal
import socket
import sys
import threading

from oslo_config import cfg
from oslo_log import log as logging

import nova.conf
from nova import exception
from nova import metrics_endpoint
from nova import rpc
from nova import service
from nova.conf import opts as conf_opts
from nova.db import api as db
from nova.pci import config as pci_config

LOG = logging.getLogger(__name__)

# Errors meaning "the configuration is wrong": oslo.config's (a value of
# the wrong type, a missing or unparsable file) and nova's Invalid (a value
# nova refused, e.g. PciConfigInvalidSpec or PciInvalidAlias).
CONFIG_ERRORS = (cfg.Error, exception.Invalid)


def parse_args(argv: list[str] | None = None,
               conf: cfg.ConfigOpts = nova.conf.CONF,
               log_file: str | None = None,
               configure_db: bool = True) -> cfg.ConfigOpts:
    """Load nova.conf and command-line options, set up logging and (with
    ``configure_db``; opening a SQLite database creates its file) the DB.

    Configuration files default to oslo.config's search path
    (/etc/nova/nova.conf etc.); ``--config-file`` adds more. Logging is
    oslo.log's, set up from ``[DEFAULT]`` (``debug``, ``log_file``, ...):
    to stderr by default, or to ``log_file`` (relative to ``$state_path``)
    when the caller names one and the configuration does not. Each line
    carries the request ids of the context it was logged in.
    """
    rpc.set_defaults(conf)
    _register_log_options(conf)
    conf(sys.argv[1:] if argv is None else argv, project='nova')
    if log_file is not None and not conf.log_file:
        os.makedirs(conf.state_path, exist_ok=True)
        conf.set_default('log_file', os.path.join(conf.state_path, log_file))
        conf.set_default('use_stderr', False)
    logging.setup(conf, 'nova')
    if configure_db:
        db.configure(conf)
    return conf


def _register_log_options(conf: cfg.ConfigOpts) -> None:
    """oslo.log's options (``[DEFAULT]debug``, ``log_file``, ...), before
    parsing as some are command-line options; once per ``conf``, which
    may be parsed again (tests start several services in one process),
    with nova's defaults (``nova.conf.opts.LOG_DEFAULTS``).
    """
    if 'debug' not in conf:
        logging.register_options(conf)
    for name, value in conf_opts.LOG_DEFAULTS.items():
        conf.set_default(name, value)


def run_service(binary: str, serve: Callable[[cfg.ConfigOpts], int],
                argv: list[str] | None = None,
                conf: cfg.ConfigOpts = nova.conf.CONF,
                log_file: str | None = None,
                runs_compute: bool = False,
                runs_control_plane: bool = True) -> int:
    """Read the configuration, check ``[pci]``, then ``serve(conf)``.

    ``[pci]`` is checked as a whole before anything starts (or logs), so
    that a bad value stops every service, not only the one that reads it
    first. ``runs_compute``: aliases are also checked with the rules a
    compute applies (see ResourceTracker); ``runs_control_plane`` (API,
    scheduler, conductor): with the rules those apply (see
    nova.pci.config.load). A configuration error raised at
    any point of the start ends the service as described in the module
    docstring; other errors propagate unchanged.
    """
    try:
        conf = parse_args(argv, conf, log_file)
        if runs_control_plane:
            pci_config.load(conf)
        if runs_compute:
            pci_config.load(conf, for_compute=True)
        return serve(conf)
    except CONFIG_ERRORS as err:
        LOG.debug('%s stopped by a configuration error', binary,
                  exc_info=True)
        print('%s: %s' % (binary, ' '.join(str(err).splitlines())),
              file=sys.stderr, flush=True)
        return 1


# Where the Compute API listens when [api]listen is unset: only this host
# without authentication, every interface with Keystone.
NOAUTH_LISTEN = '127.0.0.1'
KEYSTONE_LISTEN = '0.0.0.0'
# The options that set the Compute API's address, named when it cannot
# listen there.
API_LISTEN_OPTIONS = '[api]listen, [api]listen_port'


def _is_loopback(host: str) -> bool:
    """Whether every address ``host`` (an address or a name) stands for
    is a loopback one; an unknown name is not."""
    try:
        infos = socket.getaddrinfo(host, None)
    except socket.gaierror:
        return False
    # Not the builtin all(): in this package, ``all`` is nova.cmd.all.
    addresses = {ipaddress.ip_address(info[4][0].split('%')[0])
                 for info in infos}
    return bool(addresses) and min(a.is_loopback for a in addresses)


def api_listen_address(conf: cfg.ConfigOpts) -> str:
    """The address the Compute API binds to (see ``[api]listen``).

    With ``auth_strategy = noauth2`` every caller may claim to be the
    admin, so the API stays on this host: an address others reach is
    refused (InvalidConfiguration naming it and the options that allow
    it) unless ``[api]allow_remote_noauth2`` is set.
    """
    noauth = conf.api.auth_strategy == 'noauth2'
    host = conf.api.listen
    if host is None:
        return NOAUTH_LISTEN if noauth else KEYSTONE_LISTEN
    if noauth and not conf.api.allow_remote_noauth2 and \
            not _is_loopback(host):
        raise exception.InvalidConfiguration(reason=(
            '[api]listen = %s is not a loopback address, and with '
            '[api]auth_strategy = noauth2 anyone reaching it would be the '
            'admin; listen on 127.0.0.1 or ::1 (the default), use '
            'auth_strategy = keystone, or set [api]allow_remote_noauth2 = '
            'true to serve the unauthenticated API to the network' % host))
    return host


def rpc_service(manager, topic: str, server: str) -> service.Service:
    """A started service whose manager answers RPC on ``topic``."""
    svc = service.Service(manager, lambda m: rpc.get_server(
        topic, server, [m]), host=server)
    svc.start()
    return svc


def wait_for_signal(grace: float = 0) -> None:
    """Block until SIGINT or SIGTERM, then allow ``grace`` seconds (0: no
    limit) for the graceful stop the caller does next; a process still
    running after them exits with status 1."""
    received: list[int] = []
    stop = threading.Event()

    def handler(signum, _frame) -> None:
        received.append(signum)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, handler)
    stop.wait()
    LOG.info('%s received: stopping; requests and messages in progress '
             'may take %s to finish', signal.Signals(received[0]).name,
             '%ss' % grace if grace else 'as long as they need')
    if grace:
        watchdog = threading.Timer(grace, _stop_overdue, args=(grace,))
        watchdog.daemon = True
        watchdog.start()


def _stop_overdue(grace: float) -> None:
    """End a process whose graceful stop took longer than ``grace``."""
    LOG.error('Work in progress did not finish within %ss '
              '([DEFAULT]graceful_shutdown_timeout); exiting now', grace)
    for handler in logging.getLogger().logger.handlers:
        handler.flush()
    os._exit(1)


def run_rpc_service(conf: cfg.ConfigOpts, make_manager, topic: str,
                    metrics: Callable[[object], list] | None = None) -> int:
    """Serve ``make_manager()`` on ``topic`` until signalled.

    For separate-process deployments (the schema must exist: ``nova-manage
    db sync``). The manager is made once messaging is set up, because
    managers create their RPC clients when they are made. ``metrics(manager)``
    gives the Prometheus collectors the process serves when
    ``[metrics]listen_port`` is set (``nova.metrics_endpoint``).
    """
    rpc.init(conf)
    manager = make_manager()
    svc = rpc_service(manager, topic, conf.host)
    LOG.info('%s serving topic %s as %s', type(manager).__name__, topic,
             conf.host)
    endpoint = None
    try:
        if metrics is not None:
            endpoint = metrics_endpoint.serve(conf, metrics(manager))
        wait_for_signal(conf.graceful_shutdown_timeout)
    finally:
        if endpoint is not None:
            endpoint.stop()
        # RPC first stops taking messages, then waits for the handlers
        # running.
        svc.stop()
        rpc.cleanup()
    return 0

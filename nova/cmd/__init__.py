"""Console entry points of the nova services, and what they share."""

import logging
import os
import signal
import sys
import threading

from oslo_config import cfg

import nova.conf
from nova import rpc
from nova import service
from nova.db import api as db


def parse_args(argv: list[str] | None = None,
               conf: cfg.ConfigOpts = nova.conf.CONF,
               log_file: str | None = None) -> cfg.ConfigOpts:
    """Load nova.conf and command-line options, set up logging and the DB.

    Configuration files default to oslo.config's search path
    (/etc/nova/nova.conf etc.); ``--config-file`` adds more. Logs go to
    stderr, or to ``log_file`` (relative to ``$state_path``).
    """
    rpc.set_defaults(conf)
    conf(sys.argv[1:] if argv is None else argv, project='nova')
    if log_file is not None:
        os.makedirs(conf.state_path, exist_ok=True)
        log_file = os.path.join(conf.state_path, log_file)
    logging.basicConfig(
        level=logging.INFO, filename=log_file,
        format='%(asctime)s %(levelname)s %(name)s %(message)s')
    db.configure(conf)
    return conf


def rpc_service(manager, topic: str, server: str) -> service.Service:
    """A started service whose manager answers RPC on ``topic``."""
    svc = service.Service(manager, lambda m: rpc.get_server(
        topic, server, [m]))
    svc.start()
    return svc


def wait_for_signal() -> None:
    """Block until SIGINT or SIGTERM."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()


def run_rpc_service(conf: cfg.ConfigOpts, make_manager, topic: str) -> int:
    """Serve ``make_manager()`` on ``topic`` until signalled.

    For separate-process deployments (the schema must exist: ``nova-manage
    db sync``). The manager is made once messaging is set up, because
    managers create their RPC clients when they are made.
    """
    rpc.init(conf)
    manager = make_manager()
    svc = rpc_service(manager, topic, conf.host)
    logging.getLogger(__name__).info('%s serving topic %s as %s',
                                     type(manager).__name__, topic,
                                     conf.host)
    try:
        wait_for_signal()
    finally:
        svc.stop()
        rpc.cleanup()
    return 0

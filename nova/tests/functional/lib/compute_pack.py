"""Several nova-computes in one process, for benchmarks of many hosts.

Each host gets what its own ``nova-compute`` would have: its
configuration (the shared files, then the host's own file, parsed as
``nova-compute --config-file SHARED --config-file OWN`` parses them), its
libvirt driver, its compute manager with its own report client, its RPC
server and periodic tasks. They share the process: the messaging
transport, the log and the database engine (one per process, as every
host's file names the same database). A few hundred generated hosts then
fit in memory beside the rest of a deployment (one ``nova-compute`` is a
process of about 120 MB). Once every host serves, the process logs
``READY``. Usage::

    python -m nova.tests.functional.lib.compute_pack \\
        --config-file nova.conf hgx-1=hgx-1.conf hgx-2=hgx-2.conf
"""

import argparse
import concurrent.futures
import sys

from oslo_config import cfg
from oslo_log import log as logging

from nova import cmd
import nova.conf
from nova.compute import manager as compute_manager
from nova.compute import rpcapi
from nova import rpc
from nova.pci import config as pci_config
from nova.virt.libvirt import driver as libvirt_driver

LOG = logging.getLogger(__name__)
# Logged once every compute of the process serves.
READY = 'computes of this pack serve'


def _host_file(text: str) -> tuple[str, str]:
    host, sep, path = text.partition('=')
    if not sep or not host or not path:
        raise argparse.ArgumentTypeError(
            '%r is not allowed; the form is HOST=CONFIG_FILE' % text)
    return host, path


def _conf(shared: list[str], own: str, first: bool) -> cfg.ConfigOpts:
    """One host's configuration (each sets up the process's logging
    alike); the first also sets up the database for the process."""
    files = [arg for path in shared + [own]
             for arg in ('--config-file', path)]
    conf = cfg.ConfigOpts()
    nova.conf.register_all(conf)
    cmd.parse_args(files, conf, configure_db=first)
    pci_config.load(conf, for_compute=True)
    return conf


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--config-file', action='append', required=True,
                        help='a configuration file every host reads '
                             '(repeatable)')
    parser.add_argument('hosts', nargs='+', type=_host_file,
                        metavar='HOST=CONFIG_FILE',
                        help="a host and its own configuration file")
    args = parser.parse_args(argv)
    confs = []
    for index, (host, path) in enumerate(args.hosts):
        conf = _conf(args.config_file, path, first=index == 0)
        if conf.host != host:
            parser.error('%s sets [DEFAULT]host = %s, not %s' % (
                path, conf.host, host))
        confs.append(conf)
    rpc.init(confs[0])
    services = []
    try:
        for conf in confs:
            manager = compute_manager.ComputeManager(
                conf, libvirt_driver.LibvirtDriver.from_config(conf))
            services.append(cmd.rpc_service(manager, rpcapi.TOPIC,
                                            conf.host))
        LOG.info('%d %s', len(services), READY)
        cmd.wait_for_signal(confs[0].graceful_shutdown_timeout)
    finally:
        # All at once: each waits for the messages it is handling.
        with concurrent.futures.ThreadPoolExecutor(
                max(1, len(services))) as pool:
            list(pool.map(lambda svc: svc.stop(), services))
        rpc.cleanup()
    return 0


if __name__ == '__main__':
    sys.exit(main())

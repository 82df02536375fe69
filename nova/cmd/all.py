"""nova-all: every nova service plus an embedded Placement in one process.

The single-node default and the demo: SQLite under ``$state_path``,
in-process messaging (``fake:/``), the REST API on ``[api]listen_port``,
and ``--computes N`` compute hosts. A compute uses
``[libvirt]connection_uri`` if set; otherwise each gets a generated NVIDIA
HGX H200 host (8 GPUs) on libvirt's ``test:///`` driver.
"""

import argparse
import logging
import os
import sys

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

import nova.conf
from nova import cmd
from nova import embedded_placement
from nova import exception
from nova import rpc
from nova import wsgi_server
from nova.api import wsgi_app
from nova.compute import api as compute_api
from nova.compute import manager as compute_manager
from nova.compute import rpcapi as compute_rpcapi
from nova.conductor import manager as conductor_manager
from nova.conductor import rpcapi as conductor_rpcapi
from nova.db import migration
from nova.scheduler import manager as scheduler_manager
from nova.scheduler import rpcapi as scheduler_rpcapi
from nova.scheduler.client import report
from nova.virt.libvirt import driver as libvirt_driver
from nova.virt.libvirt import fakehost

LOG = logging.getLogger(__name__)

# Placement's noauth2 middleware treats this token as the admin.
PLACEMENT_TOKEN = 'admin'


def use_noauth_placement(conf: cfg.ConfigOpts, url: str) -> None:
    """Point [placement] at a noauth2 Placement at ``url``."""
    conf.register_opts(
        ks_loading.get_auth_plugin_conf_options('admin_token'),
        group='placement')
    conf.set_override('auth_type', 'admin_token', group='placement')
    conf.set_override('endpoint', url, group='placement')
    conf.set_override('token', PLACEMENT_TOKEN, group='placement')


class AllInOne:
    """API, conductor, scheduler and computes of one process.

    Placement is given by the caller (embedded for nova-all, a test
    fixture in functional tests) through the [placement] options.
    """

    def __init__(self, conf: cfg.ConfigOpts, compute_hosts: list[str],
                 api_port: int | None = None,
                 drivers: dict | None = None) -> None:
        self.conf = conf
        self.compute_hosts = compute_hosts
        # Hypervisor drivers by host; hosts not named get _compute_driver.
        self._drivers = dict(drivers or {})
        self.api_port = conf.api.listen_port if api_port is None \
            else api_port
        self.services: list = []
        self.computes: dict[str, compute_manager.ComputeManager] = {}
        self.api_server: wsgi_server.WSGIServer | None = None

    def _compute_driver(self, host: str) -> libvirt_driver.LibvirtDriver:
        uri = self.conf.libvirt.connection_uri
        if not uri:
            path = os.path.join(self.conf.state_path, 'hosts',
                                '%s.xml' % host)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            uri = fakehost.write_node_xml(path,
                                          fakehost.hgx_h200_node_xml())
        return libvirt_driver.LibvirtDriver(uri)

    def _start(self, manager, topic: str, server: str) -> None:
        self.services.append(cmd.rpc_service(manager, topic, server))

    def start(self) -> None:
        rpc.init(self.conf)
        reportclient = report.SchedulerReportClient(self.conf)
        self._start(conductor_manager.ConductorManager(self.conf,
                                                       reportclient),
                    conductor_rpcapi.TOPIC, self.conf.host)
        self._start(scheduler_manager.SchedulerManager(self.conf,
                                                       reportclient),
                    scheduler_rpcapi.TOPIC, self.conf.host)
        for host in self.compute_hosts:
            try:
                manager = compute_manager.ComputeManager(
                    self.conf,
                    self._drivers.get(host) or self._compute_driver(host),
                    reportclient, host=host)
                self._start(manager, compute_rpcapi.TOPIC, host)
            except exception.Invalid as err:
                # Name the compute: its configuration (or host) is what
                # is wrong, and nova-all then stops as a whole.
                raise exception.InvalidConfiguration(
                    reason='compute %s: %s' % (host, err.message)) from err
            self.computes[host] = manager
        app = wsgi_app.make_app(self.conf, compute_api.API(self.conf))
        self.api_server = wsgi_server.WSGIServer(
            app, host=self.conf.api.listen, port=self.api_port)
        self.api_server.start()
        LOG.info('Compute API listening at %s', self.api_url)

    @property
    def api_url(self) -> str:
        return self.api_server.url + '/v2.1'

    def stop(self) -> None:
        if self.api_server is not None:
            self.api_server.stop()
        for svc in reversed(self.services):
            svc.stop()
        self.services = []
        rpc.cleanup()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog='nova-all', description=__doc__)
    parser.add_argument('--config-file', action='append', default=[],
                        help='nova.conf to read (repeatable)')
    parser.add_argument('--computes', type=int, default=2,
                        help='number of compute hosts (default 2)')
    parser.add_argument('--demo', action='store_true',
                        help='boot a mix of GPU servers through the REST '
                             'API, print every GPU board, then exit')
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    if args.computes < 1:
        print('--computes must be at least 1, got %d' % args.computes,
              file=sys.stderr)
        return 2
    oslo_args = []
    for path in args.config_file:
        oslo_args += ['--config-file', path]
    conf = nova.conf.CONF
    if args.demo:
        from nova import demo
        demo.configure(conf)
    # The demo talks to a person: its service logs go to a file.
    return cmd.run_service(
        'nova-all', lambda parsed: _serve(parsed, args), oslo_args, conf,
        log_file='nova-all.log' if args.demo else None, runs_compute=True)


def _serve(conf: cfg.ConfigOpts, args: argparse.Namespace) -> int:
    """Run everything until signalled; whatever started is stopped again
    when a later part fails to start (a compute's configuration error
    stops the whole of nova-all, see doc/source/admin/deployment.rst)."""
    migration.db_sync()
    placement = embedded_placement.EmbeddedPlacement(
        state_path=conf.state_path)
    placement.start()
    try:
        use_noauth_placement(conf, placement.url)
        hosts = ['%s-%d' % (conf.host, i + 1) for i in range(args.computes)]
        allinone = AllInOne(conf, hosts, api_port=0 if args.demo else None)
        try:
            allinone.start()
            if args.demo:
                from nova import demo
                return demo.run(allinone)
            print('nova-all is running: Compute API %s, Placement %s' % (
                allinone.api_url, placement.url), flush=True)
            cmd.wait_for_signal()
            return 0
        finally:
            allinone.stop()
    finally:
        placement.stop()


if __name__ == '__main__':
    sys.exit(main())

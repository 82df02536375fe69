"""nova-all: every nova service plus an embedded Placement in one process,
and the real Glance in a child process.

The single-node default and the demo: SQLite under ``$state_path``,
in-process messaging (``fake:/``), the REST API on ``[api]listen_port``,
Placement on ``[all_in_one]placement_listen_port`` (8778, as a standalone
Placement), Glance on ``[all_in_one]glance_listen_port`` (9292; images and
database under ``$state_path/glance``), and
either ``--computes N`` computes sharing the configuration or one compute
per ``--compute NAME=CONFIG_FILE``, each with its own ``[pci]`` and
``[libvirt]`` on top of the shared configuration. A compute uses
``[libvirt]connection_uri`` if set; otherwise it gets a generated NVIDIA
HGX H200 host (8 GPUs) on libvirt's ``test:///`` driver. With
``[libvirt]nvlink_partitions = fabric_manager`` a generated host drives
the Fabric Manager tools ``[libvirt]fmpm_path`` and ``nvidia_smi_path``
when either is set, and otherwise a fake Fabric Manager of its own
(``nova.virt.fake.fabric_manager``) with the board's module map. With
``[metrics]listen_port`` set, one endpoint serves the metrics of every
part (see ``nova.metrics_endpoint``).
"""

import argparse
import os
import sys

from oslo_config import cfg
from oslo_log import log as logging

import nova.conf
from nova import cmd
from nova import embedded_placement
from nova import exception
from nova import metrics_endpoint
from nova import rpc
from nova import wsgi_server
from nova.api import wsgi_app
from nova.compute import api as compute_api
from nova.compute import manager as compute_manager
from nova.compute import rpcapi as compute_rpcapi
from nova.conf import libvirt as libvirt_conf
from nova.conf import per_compute
from nova.conf import placement as placement_conf
from nova.conductor import manager as conductor_manager
from nova.conductor import rpcapi as conductor_rpcapi
from nova.db import migration
from nova.fleet import metrics as fleet_metrics
from nova.cmd import glance_service
from nova.scheduler import manager as scheduler_manager
from nova.scheduler import metrics as scheduler_metrics
from nova.scheduler import rpcapi as scheduler_rpcapi
from nova.scheduler.client import report
from nova.virt.fake import fabric_manager as fake_fabric_manager
from nova.virt.fake import host as fakehost
from nova.virt.libvirt import driver as libvirt_driver
from nova.virt.libvirt import nvlink_metrics

LOG = logging.getLogger(__name__)

# The tool paths whose setting gives a generated host the configured
# Fabric Manager instead of nova-all's fake one.
_FM_TOOL_OPTS = {opt.name: opt.default for opt in libvirt_conf.libvirt_opts
                 if opt.name in ('fmpm_path', 'nvidia_smi_path')}
_SET_BY_OPERATOR = (cfg.Locations.user, cfg.Locations.command_line,
                    cfg.Locations.environment)


def _fabric_manager_tools_configured(conf: cfg.ConfigOpts) -> bool:
    """Whether [libvirt]fmpm_path or nvidia_smi_path is set: in a config
    file, on the command line or the environment, or to a value other
    than its default (an override, a compute file layered on top).

    Either one counts: a real or independent fmpm must not be paired with
    nova-all's fake nvidia-smi, or the reverse.
    """
    for name, default in _FM_TOOL_OPTS.items():
        location = conf.get_location(name, 'libvirt')
        if location is not None and location.location in _SET_BY_OPERATOR:
            return True
        if getattr(conf.libvirt, name) != default:
            return True
    return False


class AllInOne:
    """API, conductor, scheduler and computes of one process.

    Placement is given by the caller (embedded for nova-all, a test
    fixture in functional tests) through the [placement] options.
    ``compute_confs`` maps hosts to their own configuration (see
    ``nova.conf.per_compute``); other hosts use ``conf``.
    """

    def __init__(self, conf: cfg.ConfigOpts, compute_hosts: list[str],
                 api_port: int | None = None,
                 drivers: dict | None = None,
                 compute_confs: dict[str, cfg.ConfigOpts] | None = None
                 ) -> None:
        self.conf = conf
        self.compute_hosts = compute_hosts
        self.compute_confs = dict(compute_confs or {})
        # Hypervisor drivers by host; hosts not named get _compute_driver.
        self._drivers = dict(drivers or {})
        self.api_port = conf.api.listen_port if api_port is None \
            else api_port
        # Checked here, before anything starts (see cmd.api_listen_address).
        self.api_host = cmd.api_listen_address(conf)
        self.services: list = []
        self.computes: dict[str, compute_manager.ComputeManager] = {}
        self.api_server: wsgi_server.WSGIServer | None = None
        self.metrics_server: wsgi_server.WSGIServer | None = None

    def compute_conf(self, host: str) -> cfg.ConfigOpts:
        """The configuration the compute of ``host`` runs with."""
        return self.compute_confs.get(host, self.conf)

    def _compute_driver(self, host: str) -> libvirt_driver.LibvirtDriver:
        """The driver of ``host``: ``[libvirt]connection_uri`` if set,
        else a generated HGX H200 host (with its own fake Fabric Manager
        unless the tools are configured, see the module docstring)."""
        conf = self.compute_conf(host)
        if conf.libvirt.connection_uri:
            return libvirt_driver.LibvirtDriver.from_config(conf)
        path = os.path.join(conf.state_path, 'hosts', '%s.xml' % host)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        uri = fakehost.write_node_xml(path, fakehost.hgx_h200_node_xml())
        fake_paths: dict[str, str] = {}
        if conf.libvirt.nvlink_partitions == 'fabric_manager':
            if _fabric_manager_tools_configured(conf):
                LOG.info('Generated host %s uses the configured Fabric '
                         'Manager tools %s and %s', host,
                         conf.libvirt.fmpm_path, conf.libvirt.nvidia_smi_path)
            else:
                # A generated host gets its own fake Fabric Manager with
                # the generated board's module map; nova reaches it
                # through its fmpm and nvidia-smi.
                fm = fake_fabric_manager.FakeFabricManager.create(
                    os.path.join(conf.state_path, 'fabric-manager', host),
                    fakehost.H200_MODULE_IDS)
                fake_paths = {'fmpm_path': fm.fmpm_path,
                              'nvidia_smi_path': fm.nvidia_smi_path}
        return libvirt_driver.LibvirtDriver.from_config(
            conf, uri=uri, bar_reader=fakehost.bar_sizes,
            page_pools=fakehost.hugepage_pools, **fake_paths)

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
                    self.compute_conf(host),
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
            app, host=self.api_host, port=self.api_port,
            service='The Compute API', options=cmd.API_LISTEN_OPTIONS)
        self.api_server.start()
        LOG.info('Compute API listening at %s', self.api_url)
        self.metrics_server = metrics_endpoint.serve(
            self.conf, self.metrics_collectors())

    def metrics_collectors(self) -> list:
        """What nova-all's metrics endpoint serves: the fleet's boards,
        the scheduler's counters and the computes' FM partitions."""
        return [fleet_metrics.FleetCollector(), scheduler_metrics.REGISTRY,
                nvlink_metrics.PartitionCollector(
                    lambda: nvlink_metrics.of_computes(
                        self.computes.values()))]

    @property
    def api_url(self) -> str:
        return self.api_server.url + '/v2.1'

    def stop(self, timeout: float | None = 0) -> None:
        """Stop taking requests, waiting up to ``timeout`` seconds (None:
        as long as they take) for those in progress, then stop the
        services in the order work flows through them, each finishing the
        messages it is handling: a build the conductor is driving still
        reaches a scheduler and a compute that serve."""
        if self.metrics_server is not None:
            self.metrics_server.stop()
        if self.api_server is not None:
            self.api_server.stop(timeout)
        for svc in self.services:
            svc.stop()
        self.services = []
        rpc.cleanup()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog='nova-all', description=__doc__)
    parser.add_argument('--config-file', action='append', default=[],
                        help='nova.conf to read (repeatable)')
    parser.add_argument('--computes', type=int,
                        help='number of compute hosts sharing the '
                             'configuration (default 2)')
    parser.add_argument('--compute', action='append', default=[],
                        metavar='NAME=CONFIG_FILE',
                        help='a compute host NAME whose [pci], [libvirt] '
                             'and disk options come from CONFIG_FILE on '
                             'top of the shared configuration '
                             '(repeatable; instead of --computes)')
    parser.add_argument('--demo', action='store_true',
                        help='boot a mix of GPU servers through the REST '
                             'API, print every GPU board, then exit')
    return parser


def _compute_files(args: argparse.Namespace) -> dict[str, str]:
    """Host name -> config file of the ``--compute`` arguments.

    Raises ValueError with a message naming the bad argument.
    """
    files: dict[str, str] = {}
    for value in args.compute:
        name, sep, path = value.partition('=')
        if not sep or not name or not path:
            raise ValueError('--compute %r is not allowed; the form is '
                             'NAME=CONFIG_FILE' % value)
        if name in files:
            raise ValueError('--compute %s is given twice; each compute '
                             'needs its own name' % name)
        if not os.path.isfile(path):
            raise ValueError('--compute %s: config file %s does not exist'
                             % (name, path))
        files[name] = path
    if files and args.computes is not None:
        raise ValueError('--computes and --compute exclude each other; '
                         'name every compute with --compute')
    if args.computes is not None and args.computes < 1:
        raise ValueError('--computes must be at least 1, got %d' %
                         args.computes)
    return files


def osc_placement_hint(placement_url: str) -> str:
    """How to reach the embedded Placement with osc-placement.

    The admin_token environment of the Compute API sends every service's
    requests to OS_ENDPOINT, so Placement commands name their endpoint.
    """
    return ('Placement (osc-placement): openstack --os-endpoint %s '
            'resource provider list' % placement_url)


def osc_image_hint(glance_url: str) -> str:
    """How ``openstack image ...`` (and ``server create --image NAME``)
    reach nova-all's Glance with the Compute API's environment."""
    return ('Glance (openstack image ...): export '
            'OS_IMAGE_ENDPOINT_OVERRIDE=%s' % glance_url)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        compute_files = _compute_files(args)
    except ValueError as err:
        print(err, file=sys.stderr)
        return 2
    oslo_args = []
    for path in args.config_file:
        oslo_args += ['--config-file', path]
    conf = nova.conf.CONF
    if args.demo:
        from nova import demo
        demo.configure(conf)
    # The demo talks to a person: its service logs go to a file. Computes
    # with their own files are checked on their layered configuration
    # when they start; the shared file alone need not satisfy a compute.
    return cmd.run_service(
        'nova-all', lambda parsed: _serve(parsed, args, compute_files),
        oslo_args, conf,
        log_file='nova-all.log' if args.demo else None,
        runs_compute=not compute_files)


def _serve(conf: cfg.ConfigOpts, args: argparse.Namespace,
           compute_files: dict[str, str]) -> int:
    """Run everything until signalled; whatever started is stopped again
    when a later part fails to start (a compute's configuration error
    stops the whole of nova-all, see doc/source/admin/deployment.rst)."""
    compute_confs = {name: per_compute.layered(conf, path)
                     for name, path in compute_files.items()}
    hosts = list(compute_files) or [
        '%s-%d' % (conf.host, i + 1) for i in range(args.computes or 2)]
    # Made first: it refuses a bad API address before anything starts.
    allinone = AllInOne(conf, hosts, api_port=0 if args.demo else None,
                        compute_confs=compute_confs)
    migration.db_sync()
    placement = embedded_placement.EmbeddedPlacement(
        state_path=conf.state_path,
        port=0 if args.demo else conf.all_in_one.placement_listen_port,
        max_body_size=conf.api.max_request_body_size,
        options='[all_in_one]placement_listen_port')
    placement.start()
    glance = glance_service.GlanceService.for_nova_all(
        conf, port=0 if args.demo else conf.all_in_one.glance_listen_port)
    try:
        glance.start()
        for service_conf in [conf, *compute_confs.values()]:
            glance.configure_nova(service_conf)
        placement_conf.use_noauth_placement(conf, placement.url)
        try:
            allinone.start()
            if args.demo:
                from nova import demo
                return demo.run(allinone)
            print('nova-all is running: Compute API %s, Placement %s, '
                  'Glance %s' % (allinone.api_url, placement.url, glance.url))
            print(osc_placement_hint(placement.url))
            print(osc_image_hint(glance.url), flush=True)
            cmd.wait_for_signal(conf.graceful_shutdown_timeout)
            return 0
        finally:
            allinone.stop(timeout=None)
    finally:
        glance.stop()
        placement.stop(timeout=None)


if __name__ == '__main__':
    sys.exit(main())

"""nova-compute: report one host's resources and run its instances."""

import sys

from nova import cmd
from nova.compute import manager as compute_manager
from nova.compute import rpcapi
from nova.virt.libvirt import driver as libvirt_driver
from nova.virt.libvirt import nvlink_metrics


def main(argv: list[str] | None = None) -> int:
    return cmd.run_service('nova-compute', _serve, argv, runs_compute=True,
                           runs_control_plane=False)


def _serve(conf) -> int:
    return cmd.run_rpc_service(
        conf, lambda: compute_manager.ComputeManager(
            conf, libvirt_driver.LibvirtDriver.from_config(conf)),
        rpcapi.TOPIC, metrics=lambda manager: [
            nvlink_metrics.PartitionCollector(
                lambda: nvlink_metrics.of_computes([manager]))])


if __name__ == '__main__':
    sys.exit(main())

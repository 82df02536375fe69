"""[libvirt] options of the libvirt compute driver."""

from oslo_config import cfg

from nova.conf import groups

libvirt_group = cfg.OptGroup(
    'libvirt', title='Libvirt options',
    help='Options of the libvirt compute driver.')

libvirt_opts = [
    cfg.StrOpt('connection_uri',
               default='',
               help='Libvirt connection URI. Empty means qemu:///system. '
                    'The test driver works as a fake hypervisor: '
                    'test:///<absolute path to a node XML> reads the host, '
                    'its CPUs, memory and PCI devices from that file.'),
    cfg.StrOpt('nvlink_partitions',
               default='none',
               choices=[
                   ('none', 'nova does nothing about NVLink partitions'),
                   ('libvirt_hook', "NVIDIA's libvirt qemu hook activates "
                    'the partition; nova does not check it'),
                   ('fabric_manager', 'nova-compute activates and '
                    'deactivates partitions through Fabric Manager')],
               help="""
Who makes the NVLink partition of a guest's GPUs live on an NVSwitch host
(shared NVSwitch mode of NVIDIA Fabric Manager).

* ``none``: nobody; for hosts without NVSwitches.
* ``libvirt_hook``: NVIDIA's ``/etc/libvirt/hooks/qemu`` does it when
  libvirt prepares the domain. nova cannot see its failures: the hook exits
  0, and the guest boots without NVLink, when no partition matches the
  guest's GPUs, when ``fmpm -l`` fails and on any exception in the hook.
  Only an error of ``fmpm -a`` itself stops the guest start.
* ``fabric_manager``: nova-compute runs ``fmpm`` itself. After the devices
  are claimed and before the domain starts it activates the partition whose
  GPU module IDs equal the guest's GPUs (single GPUs too); a failure fails
  the build with a fault naming the partition and Fabric Manager's error,
  and the build is rescheduled. The partition is deactivated after the
  domain is destroyed. At start and periodically nova deactivates
  partitions it left active without a holder, re-activates those its
  guests need, and offers no group overlapping a partition someone else
  activated.
"""),
    cfg.StrOpt('fmpm_path',
               default='/usr/bin/fmpm',
               help='Path of the Fabric Manager partition tool ``fmpm`` '
                    '(NVIDIA/Fabric-Manager-Client), used when '
                    'nvlink_partitions = fabric_manager.'),
    cfg.StrOpt('fabric_manager_address',
               default='127.0.0.1',
               help='Address of Fabric Manager, ``ip`` or ``ip:port`` '
                    '(port 6666 when absent), passed to fmpm as '
                    '``--hostname``. A service VM owning the NVSwitches is '
                    'reached by its IP. (fmpm ignores '
                    '``--unix-domain-socket``, so only TCP works.)'),
    cfg.IntOpt('fabric_manager_timeout',
               default=30, min=1,
               help='Seconds one fmpm call may take before nova kills it '
                    'and treats the call as a Fabric Manager timeout.'),
    cfg.IntOpt('nvlink_repair_interval',
               default=20, min=0,
               help='Seconds between runs of the periodic NVLink partition '
                    'repair (nvlink_partitions = fabric_manager): '
                    'partitions active without a holder are deactivated, '
                    "held ones that are not active activated, and a Fabric "
                    'Manager restarted in resiliency mode is given the '
                    'active list; FM waits only 60 s for that list, so '
                    'keep this well below 60. 0 disables the periodic run '
                    '(the repair still runs at compute start).'),
    cfg.StrOpt('nvidia_smi_path',
               default='/usr/bin/nvidia-smi',
               help='Path of ``nvidia-smi``; ``nvidia-smi -q`` gives the '
                    'module ID of every GPU bound to the nvidia driver.'),
    cfg.StrOpt('gpu_module_map',
               default='',
               help="""
Operator-given GPU module IDs, a JSON object of PCI address to module ID,
e.g. ``{"0000:86:00.0": 1, "0000:b8:00.0": 2}``, or the absolute path of a
file holding such an object (a value starting with ``/``). Addresses listed
here override what ``nvidia-smi -q`` reported. Fabric Manager names GPUs
only by module ID on HGX H100/H200, and module order is not PCI order, so
nova needs this map to know which partition a set of GPUs is. nova saves
the map it read under ``$state_path/nvlink`` so that it survives GPUs
moving to vfio-pci (where nvidia-smi no longer lists them).
"""),
    cfg.ListOpt('hw_machine_type',
                default=['x86_64=q35'],
                help="""
Machine type of guests per host architecture, as upstream:
``<architecture>=<machine type>`` items, e.g. ``x86_64=q35``. A flavor's
``hw:machine_type`` overrides it; an architecture not listed gets the
hypervisor's default (``pc``, i440fx, on x86_64). The default is q35, the
PCIe machine: GPUs with large 64-bit BARs need PCIe root ports and a 64-bit
MMIO window, which i440fx does not have; a GPU guest on i440fx is refused
at build.
"""),
    cfg.IntOpt('num_pcie_ports',
               default=0, min=0, max=28,
               help="""
Number of ``pcie-root-port`` controllers a q35 guest gets at least, as
upstream (28 is QEMU's limit). Every passed-through device gets its own
root port, so this only adds free ports (for hotplug) when it is larger
than the guest's device count; 0 adds none and libvirt adds the ports its
own devices need.
"""),
    cfg.StrOpt('virt_type',
               default='kvm',
               choices=[
                   ('kvm', 'hardware-accelerated guests (needs /dev/kvm)'),
                   ('qemu', "QEMU's emulator (TCG): slow, but needs no "
                    '/dev/kvm; for hosts whose KVM cannot run the guest')],
               help='Domain type of the guests on a qemu:// hypervisor, as '
                    "upstream's option. libvirt's test:/// driver always "
                    "gets domain type 'test'."),
    cfg.StrOpt('guest_network',
               default='',
               help='Name of a libvirt network (``virsh net-list``) every '
                    'guest gets one virtio NIC on. Empty (the default): '
                    'guests have no NIC. nova has no networking service '
                    '(Neutron) here; this is a plain libvirt NIC, without '
                    'ports, security groups or addresses managed by nova.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    groups.register_group_opts(conf, libvirt_group, libvirt_opts)


def list_opts() -> dict:
    return {libvirt_group: libvirt_opts}

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
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    groups.register_group_opts(conf, libvirt_group, libvirt_opts)


def list_opts() -> dict:
    return {libvirt_group: libvirt_opts}

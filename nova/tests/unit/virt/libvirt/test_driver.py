"""Building the libvirt driver from configuration, and the flags guests
are undefined with (no connection made).

The driver against libvirt's test:/// driver is tested in
``nova.tests.functional.virt.libvirt.test_driver``.
"""

import fixtures
import libvirt
from oslo_config import cfg

from nova import conf as nova_conf
from nova import exception
from nova import test
from nova.virt import driver as virt_driver
from nova.virt.libvirt import driver as libvirt_driver


class FromConfigTest(test.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = cfg.ConfigOpts()
        nova_conf.register_all(self.conf)
        self.conf([], default_config_files=[])

    def test_uri_from_config(self):
        self.conf.set_override('connection_uri', 'test:///tmp/n.xml',
                               group='libvirt')
        drv = libvirt_driver.LibvirtDriver.from_config(self.conf)
        self.assertIsInstance(drv, libvirt_driver.LibvirtDriver)
        self.assertIsInstance(drv, virt_driver.ComputeDriver)
        self.assertEqual('test:///tmp/n.xml', drv.uri)

    def test_default_uri(self):
        self.assertEqual('qemu:///system', self.driver().uri)

    def test_instances_path_from_config(self):
        self.conf.set_override('instances_path', '/srv/nova/instances')
        self.assertEqual('/srv/nova/instances', self.driver().instances_path)

    def test_uri_given_wins_over_config(self):
        self.conf.set_override('connection_uri', 'test:///tmp/n.xml',
                               group='libvirt')
        self.assertEqual('test:///tmp/g.xml',
                         self.driver(uri='test:///tmp/g.xml').uri)

    def test_nvlink_mode_picks_partitions_or_module_reader(self):
        drv = self.driver()
        self.assertIsNone(drv.nvlink)
        self.assertIsNotNone(drv.module_reader)
        self.conf.set_override('nvlink_partitions', 'fabric_manager',
                               group='libvirt')
        self.conf.set_override('fmpm_path', '/opt/fm/fmpm', group='libvirt')
        drv = self.driver()
        self.assertIsNone(drv.module_reader)
        self.assertEqual('/opt/fm/fmpm', drv.nvlink.client.fmpm_path)

    def test_fabric_manager_tool_paths_given_win_over_config(self):
        self.conf.set_override('nvlink_partitions', 'fabric_manager',
                               group='libvirt')
        drv = self.driver(fmpm_path='/fake/fmpm',
                          nvidia_smi_path='/fake/nvidia-smi')
        self.assertEqual('/fake/fmpm', drv.nvlink.client.fmpm_path)
        self.assertEqual('/fake/nvidia-smi', drv.nvlink.nvidia_smi_path)

    def test_guest_options(self):
        self.assertEqual(libvirt_driver.GuestOptions({'x86_64': 'q35'}, 0),
                         self.driver().guest_options)
        self.conf.set_override('hw_machine_type',
                               ['x86_64=pc-q35-7.2', 'aarch64=virt'],
                               group='libvirt')
        self.conf.set_override('num_pcie_ports', 8, group='libvirt')
        self.assertEqual(libvirt_driver.GuestOptions(
            {'x86_64': 'pc-q35-7.2', 'aarch64': 'virt'}, 8),
            self.driver().guest_options)

    def test_bad_machine_type_option_stops_the_start(self):
        self.conf.set_override('hw_machine_type', ['q35'], group='libvirt')
        exc = self.assertRaises(exception.InvalidConfiguration, self.driver)
        self.assertIn("item 'q35' is not allowed", str(exc))

    def test_pcie_ports_without_q35_warn(self):
        logs = self.useFixture(fixtures.FakeLogger())
        self.conf.set_override('hw_machine_type', ['x86_64=pc'],
                               group='libvirt')
        self.conf.set_override('num_pcie_ports', 4, group='libvirt')
        self.driver()
        self.assertIn('num_pcie_ports = 4 only adds ports to q35 guests',
                      logs.output)

    def driver(self, **overrides) -> libvirt_driver.LibvirtDriver:
        return libvirt_driver.LibvirtDriver.from_config(self.conf,
                                                        **overrides)


def _libvirt_error(code: int) -> libvirt.libvirtError:
    err = libvirt.libvirtError('refused')
    err.err = (code, libvirt.VIR_FROM_QEMU, 'refused', 2, '', '', '', 0, 0)
    return err


class _Domain:
    """Records the flags of each undefine; refuses them per ``refuse``
    (flags -> libvirt error code)."""

    def __init__(self, refuse: dict[int, int] | None = None) -> None:
        self.refuse = refuse or {}
        self.undefines: list[int] = []

    def name(self) -> str:
        return 'instance-x'

    def undefineFlags(self, flags: int) -> None:
        self.undefines.append(flags)
        if flags in self.refuse:
            raise _libvirt_error(self.refuse[flags])


class UndefineTest(test.TestCase):
    """The flags a guest is undefined with (see
    nova.tests.functional.virt.libvirt.test_driver for the driver's
    paths that use them)."""

    def test_removed_with_its_nvram_managed_save_and_snapshots(self):
        domain = _Domain()
        libvirt_driver.undefine(domain, keep_nvram=False)
        self.assertEqual([libvirt.VIR_DOMAIN_UNDEFINE_NVRAM |
                          libvirt.VIR_DOMAIN_UNDEFINE_MANAGED_SAVE |
                          libvirt.VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA],
                         domain.undefines)

    def test_kept_nvram(self):
        domain = _Domain()
        libvirt_driver.undefine(domain, keep_nvram=True)
        self.assertEqual([libvirt.VIR_DOMAIN_UNDEFINE_KEEP_NVRAM |
                          libvirt.VIR_DOMAIN_UNDEFINE_MANAGED_SAVE],
                         domain.undefines)

    def test_hypervisor_without_nvram_flags(self):
        for keep in (False, True):
            flags = libvirt_driver.UNDEFINE_KEEP_NVRAM if keep else \
                libvirt_driver.UNDEFINE_REMOVE
            domain = _Domain({flags: libvirt.VIR_ERR_INVALID_ARG})
            libvirt_driver.undefine(domain, keep_nvram=keep)
            self.assertEqual(2, len(domain.undefines))
            self.assertFalse(domain.undefines[1] & (
                libvirt.VIR_DOMAIN_UNDEFINE_NVRAM |
                libvirt.VIR_DOMAIN_UNDEFINE_KEEP_NVRAM))
            self.assertTrue(domain.undefines[1] &
                            libvirt.VIR_DOMAIN_UNDEFINE_MANAGED_SAVE)

    def test_other_refusal_is_raised_not_retried(self):
        # QEMU's "cannot undefine domain with nvram" and the like.
        domain = _Domain({libvirt_driver.UNDEFINE_REMOVE:
                          libvirt.VIR_ERR_OPERATION_INVALID})
        err = self.assertRaises(libvirt.libvirtError, libvirt_driver.undefine,
                                domain, keep_nvram=False)
        self.assertEqual(libvirt.VIR_ERR_OPERATION_INVALID,
                         err.get_error_code())
        self.assertEqual(1, len(domain.undefines))

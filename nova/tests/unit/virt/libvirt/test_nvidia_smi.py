"""Parsing ``nvidia-smi -q`` output: the GPUs' module IDs and health."""

import fixtures

from nova import test
from nova.virt.fake import fabric_manager as fake
from nova.virt.libvirt import nvidia_smi


class ParseTest(test.TestCase):

    def test_r525_top_level_module_id_line(self):
        # Drivers up to the R525/R550 era print "Module ID" directly in
        # each GPU block.
        text = ('Attached GPUs : 3\n'
                'GPU 00000000:0F:00.0\n'
                '    Product Name                  : NVIDIA H100\n'
                '    Module ID                     : 5\n'
                'GPU 00000001:B8:00.0\n'
                '    Module ID                     : 2\n'
                'GPU 00000000:41:00.0\n'
                '    Module ID                     : N/A\n'
                'GPU 00000000:44:00.0\n'
                '    Module ID                     : 0\n')
        self.assertEqual({'0000:0f:00.0': 5, '0001:b8:00.0': 2},
                         nvidia_smi.parse_nvidia_smi(text))

    def test_565_570_platform_info_module_id(self):
        # Drivers 565 and 570 print "Module Id" inside a "Platform Info"
        # sub-block; the indentation of that block is not relied on.
        text = ('Driver Version                            : 570.133.20\n'
                'Attached GPUs                             : 4\n'
                'GPU 00000000:18:00.0\n'
                '    Product Name                          : NVIDIA H200\n'
                '    Platform Info\n'
                '        Chassis Serial Number             : N/A\n'
                '        Slot Number                       : N/A\n'
                '        Host ID                           : 1\n'
                '        Peer Type                         : Switch\n'
                '        Module Id                         : 2\n'
                '        GPU Fabric GUID                   : 0x4a1b\n'
                '    Fabric\n'
                '        CliqueId                          : 1\n'
                'GPU 00000000:3A:00.0\n'
                '\tPlatform Info\n'
                '\t\tModule Id\t: 1\n'
                'GPU 00000000:9A:00.0\n'
                '    Platform Info\n'
                '      Module Id : N/A\n'
                'GPU 00000000:AB:00.0\n'
                '    Platform Info\n'
                '        Module Id                         : 0\n')
        self.assertEqual({'0000:18:00.0': 2, '0000:3a:00.0': 1},
                         nvidia_smi.parse_nvidia_smi(text))

    def test_module_id_outside_a_gpu_block_is_ignored(self):
        text = ('Module Id : 4\n'
                'GPU 00000000:18:00.0\n'
                '    Module ID : 3\n'
                '    Module Id : 7\n')
        self.assertEqual({'0000:18:00.0': 3},
                         nvidia_smi.parse_nvidia_smi(text))


class HealthParseTest(test.TestCase):

    def test_unusable_fields(self):
        # The layout of a 570 driver's -q: sections at one indentation,
        # their fields one deeper, a nested histogram below Remapped Rows.
        text = ('Attached GPUs                             : 4\n'
                'GPU 00000000:18:00.0\n'
                '    Retired Pages\n'
                '        Single Bit ECC                    : 0\n'
                '        Pending Page Blacklist            : Yes\n'
                '    Remapped Rows\n'
                '        Pending                           : No\n'
                '        Remapping Failure Occurred        : No\n'
                '        Bank Remap Availability Histogram\n'
                '            Max                           : 640 bank(s)\n'
                '    Pending                               : Yes\n'
                'GPU 00000000:2A:00.0\n'
                '    Remapped Rows\n'
                '        Correctable Error                 : 0\n'
                '        Pending                           : Yes\n'
                'GPU 00000000:3A:00.0\n'
                '    Remapped Rows\n'
                '        Pending                           : No\n'
                '        Remapping Failure Occurred        : Yes\n'
                'GPU 00000000:5D:00.0\n'
                '    Product Name                          : NVIDIA H200\n'
                '    Retired Pages\n'
                '        Pending Page Blacklist            : N/A\n'
                '    Remapped Rows\n'
                '        Pending                           : No\n'
                '    Serial Number                         : Unable to '
                'determine the serial\n'
                'Unable to determine the device handle for GPU0000:9A:00.0:'
                ' GPU is lost.  Reboot the system to recover this GPU\n')
        report = nvidia_smi.parse_nvidia_smi_health(text)
        reasons = {a: f.reason for a, f in report.findings.items()}
        self.assertEqual({'0000:18:00.0', '0000:2a:00.0', '0000:3a:00.0',
                          '0000:5d:00.0', '0000:9a:00.0'}, set(reasons))
        self.assertIn('pending retired pages', reasons['0000:18:00.0'])
        self.assertIn('pending row remapping', reasons['0000:2a:00.0'])
        self.assertIn('row remapping failure', reasons['0000:3a:00.0'])
        self.assertIn('Unable to determine', reasons['0000:5d:00.0'])
        self.assertIn('GPU is lost', reasons['0000:9a:00.0'])
        self.assertEqual({'nvidia-smi'}, {f.source for f in
                                          report.findings.values()})
        self.assertEqual(set(reasons), report.checked['nvidia-smi'])

    def test_healthy_gpus_are_checked_without_findings(self):
        text = ('GPU 00000000:18:00.0\n'
                '    Retired Pages\n'
                '        Pending Page Blacklist            : No\n'
                '    Remapped Rows\n'
                '        Pending                           : No\n'
                '        Remapping Failure Occurred        : No\n')
        report = nvidia_smi.parse_nvidia_smi_health(text)
        self.assertEqual({}, dict(report.findings))
        self.assertEqual(frozenset({'0000:18:00.0'}),
                         report.checked['nvidia-smi'])

    def test_fake_nvidia_smi_round_trip(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        fm = fake.FakeFabricManager.create(tmp, fake.H100_WP12736_MAP)
        fm.break_gpu('0000:86:00.0', 'remap_failure')
        fm.break_gpu('0000:0f:00.0', 'lost')
        fm.bind('0000:41:00.0', 'vfio-pci')
        report = nvidia_smi.read_nvidia_smi_health(fm.nvidia_smi_path)
        self.assertEqual({'0000:86:00.0', '0000:0f:00.0'},
                         set(report.findings))
        self.assertNotIn('0000:41:00.0', report.checked['nvidia-smi'])
        self.assertIn('0000:10:00.0', report.checked['nvidia-smi'])
        # The module map is read as before from the GPUs still listed.
        fm.repair_gpu('0000:0f:00.0')
        self.assertEqual(
            7, len(nvidia_smi.read_nvidia_smi(fm.nvidia_smi_path)))
        self.assertRaises(ValueError, fm.break_gpu, '0000:86:00.0', 'bad')

    def test_nvidia_smi_that_cannot_run_checks_nothing(self):
        report = nvidia_smi.read_nvidia_smi_health('/nonexistent/nvidia-smi')
        self.assertEqual(({}, {}), (dict(report.findings),
                                    dict(report.checked)))

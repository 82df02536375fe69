"""Parsing nvidia-smi output and the GPU module map option.

The partition lifecycle, which runs the fake Fabric Manager's
executables, is tested in ``nova.tests.functional.virt.libvirt.test_nvlink``.
"""

import os

import fixtures

from nova import exception
from nova import test
from nova.virt.fake import fabric_manager as fake
from nova.virt.libvirt import nvlink


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
                         nvlink.parse_nvidia_smi(text))

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
                         nvlink.parse_nvidia_smi(text))

    def test_module_id_outside_a_gpu_block_is_ignored(self):
        text = ('Module Id : 4\n'
                'GPU 00000000:18:00.0\n'
                '    Module ID : 3\n'
                '    Module Id : 7\n')
        self.assertEqual({'0000:18:00.0': 3},
                         nvlink.parse_nvidia_smi(text))

    def test_module_map_option(self):
        self.assertEqual({'0000:86:00.0': 1, '0000:b8:00.0': 2},
                         nvlink.parse_module_map_option(
                             '{"0000:86:00.0": 1, "0000:B8:00.0": "2"}'))
        self.assertEqual({}, nvlink.parse_module_map_option(''))
        for bad in ('[1]', '{"0000:86:00.0": 0}', '{"x": 1}', 'nope',
                    '{"0000:86:00.0": true}'):
            err = self.assertRaises(exception.InvalidConfiguration,
                                    nvlink.parse_module_map_option, bad)
            self.assertIn('gpu_module_map', str(err))

    def test_module_map_file(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'modules.json')
        with open(path, 'w') as f:
            f.write('{"0000:86:00.0": 3}')
        self.assertEqual({'0000:86:00.0': 3},
                         nvlink.parse_module_map_option(path))
        with open(path, 'w') as f:
            f.write('{"0000:86:00.0": -3}')
        err = self.assertRaises(exception.InvalidConfiguration,
                                nvlink.parse_module_map_option, path)
        self.assertIn('-3', str(err))
        missing = path + '.gone'
        err = self.assertRaises(exception.InvalidConfiguration,
                                nvlink.parse_module_map_option, missing)
        self.assertIn(missing, str(err))


class HGXPartitionsTest(test.TestCase):

    def test_table_is_the_fakes(self):
        # The fake Fabric Manager stays free of nova imports, so it keeps
        # its own copy of the table; both must stay the same.
        self.assertEqual({pid: frozenset(modules) for pid, modules in
                          fake.H100_PARTITIONS.items()},
                         nvlink.HGX_PARTITIONS)

    def test_addresses_where_every_module_is_known(self):
        parts = {p.id: p for p in nvlink.hgx_partitions(
            {'0000:5d:00.0': 3, '0000:3a:00.0': 1, '0000:18:00.0': 2})}
        self.assertEqual(15, len(parts))
        self.assertEqual(('0000:3a:00.0', '0000:5d:00.0'),
                         parts[3].addresses)
        self.assertIsNone(parts[4].addresses)
        self.assertEqual(('0000:18:00.0',), parts[8].addresses)

    def test_table_only_for_8_gpus_of_an_hgx_product(self):
        for products in (['2335'] * 8, ['2330'] * 8, ['2324'] * 8):
            self.assertIsNone(nvlink.hgx_board_mismatch(products))
        # A 4-GPU A100 board, an 8-GPU A100 board (FM has another table
        # for it), a 4-GPU HGX H200 board (no NVSwitch), ten A40s, a
        # board with a foreign GPU beside seven H200s, no GPU at all.
        for products, says in (
                (['20b2'] * 4, '4 GPUs of product 10de:20b2;'),
                (['20b2'] * 8, '8 GPUs of product 10de:20b2;'),
                (['2335'] * 4, '4 GPUs of product 10de:2335 (H200 SXM '
                               '141GB);'),
                (['2235'] * 10, '10 GPUs of product 10de:2235;'),
                (['2335'] * 7 + ['20b2'], '1 GPU of product 10de:20b2 '
                 'and 7 GPUs of product 10de:2335 (H200 SXM 141GB);'),
                ([], 'it has no GPU;')):
            reason = nvlink.hgx_board_mismatch(products)
            self.assertIn(says, reason)
            self.assertIn('only for 8 GPUs of one of the products '
                          '10de:2324 (H800), 10de:2330 (H100 SXM5 80GB), '
                          '10de:2335 (H200 SXM 141GB)', reason)


class ModuleMapReaderTest(test.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def test_saved_map_and_override_without_nvidia_smi(self):
        state_dir = os.path.join(self.tmp, 'nvlink')
        os.makedirs(state_dir)
        with open(os.path.join(state_dir, 'cmp1-gpu-modules.json'),
                  'w') as f:
            f.write('{"0000:18:00.0": 2, "0000:3a:00.0": 1}')
        reader = nvlink.ModuleMapReader(
            os.path.join(self.tmp, 'no-nvidia-smi'),
            {'0000:3a:00.0': 5, '0000:5d:00.0': 2}, state_dir)
        # The override wins; a module ID two GPUs share is no answer; GPUs
        # not asked about are left out.
        self.assertEqual({'0000:3a:00.0': 5}, reader.read(
            'cmp1', ['0000:18:00.0', '0000:3a:00.0', '0000:5d:00.0']))
        self.assertEqual({}, reader.read('cmp2', ['0000:18:00.0']))


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
        report = nvlink.parse_nvidia_smi_health(text)
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
        report = nvlink.parse_nvidia_smi_health(text)
        self.assertEqual({}, dict(report.findings))
        self.assertEqual(frozenset({'0000:18:00.0'}),
                         report.checked['nvidia-smi'])

    def test_fake_nvidia_smi_round_trip(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        fm = fake.FakeFabricManager.create(tmp, fake.H100_WP12736_MAP)
        fm.break_gpu('0000:86:00.0', 'remap_failure')
        fm.break_gpu('0000:0f:00.0', 'lost')
        fm.bind('0000:41:00.0', 'vfio-pci')
        report = nvlink.read_nvidia_smi_health(fm.nvidia_smi_path)
        self.assertEqual({'0000:86:00.0', '0000:0f:00.0'},
                         set(report.findings))
        self.assertNotIn('0000:41:00.0', report.checked['nvidia-smi'])
        self.assertIn('0000:10:00.0', report.checked['nvidia-smi'])
        # The module map is read as before from the GPUs still listed.
        fm.repair_gpu('0000:0f:00.0')
        self.assertEqual(7, len(nvlink.read_nvidia_smi(fm.nvidia_smi_path)))
        self.assertRaises(ValueError, fm.break_gpu, '0000:86:00.0', 'bad')

    def test_nvidia_smi_that_cannot_run_checks_nothing(self):
        report = nvlink.read_nvidia_smi_health('/nonexistent/nvidia-smi')
        self.assertEqual(({}, {}), (dict(report.findings),
                                    dict(report.checked)))

"""The GPU module map: the option, the reader of the modes in which nova
does not drive Fabric Manager, and the HGX board's fixed partitions."""

import os

import fixtures

from nova import exception
from nova import test
from nova.virt.fake import fabric_manager as fake
from nova.virt.libvirt import gpu_modules


class ModuleMapOptionTest(test.TestCase):

    def test_module_map_option(self):
        self.assertEqual({'0000:86:00.0': 1, '0000:b8:00.0': 2},
                         gpu_modules.parse_module_map_option(
                             '{"0000:86:00.0": 1, "0000:B8:00.0": "2"}'))
        self.assertEqual({}, gpu_modules.parse_module_map_option(''))
        for bad in ('[1]', '{"0000:86:00.0": 0}', '{"x": 1}', 'nope',
                    '{"0000:86:00.0": true}'):
            err = self.assertRaises(exception.InvalidConfiguration,
                                    gpu_modules.parse_module_map_option, bad)
            self.assertIn('gpu_module_map', str(err))

    def test_module_map_file(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'modules.json')
        with open(path, 'w') as f:
            f.write('{"0000:86:00.0": 3}')
        self.assertEqual({'0000:86:00.0': 3},
                         gpu_modules.parse_module_map_option(path))
        with open(path, 'w') as f:
            f.write('{"0000:86:00.0": -3}')
        err = self.assertRaises(exception.InvalidConfiguration,
                                gpu_modules.parse_module_map_option, path)
        self.assertIn('-3', str(err))
        missing = path + '.gone'
        err = self.assertRaises(exception.InvalidConfiguration,
                                gpu_modules.parse_module_map_option, missing)
        self.assertIn(missing, str(err))


class HGXPartitionsTest(test.TestCase):

    def test_table_is_the_fakes(self):
        # The fake Fabric Manager stays free of nova imports, so it keeps
        # its own copy of the table; both must stay the same.
        self.assertEqual({pid: frozenset(modules) for pid, modules in
                          fake.H100_PARTITIONS.items()},
                         gpu_modules.HGX_PARTITIONS)

    def test_addresses_where_every_module_is_known(self):
        parts = {p.id: p for p in gpu_modules.hgx_partitions(
            {'0000:5d:00.0': 3, '0000:3a:00.0': 1, '0000:18:00.0': 2})}
        self.assertEqual(15, len(parts))
        self.assertEqual(('0000:3a:00.0', '0000:5d:00.0'),
                         parts[3].addresses)
        self.assertIsNone(parts[4].addresses)
        self.assertEqual(('0000:18:00.0',), parts[8].addresses)

    def test_table_only_for_8_gpus_of_an_hgx_product(self):
        for products in (['2335'] * 8, ['2330'] * 8, ['2324'] * 8):
            self.assertIsNone(gpu_modules.hgx_board_mismatch(products))
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
            reason = gpu_modules.hgx_board_mismatch(products)
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
        reader = gpu_modules.ModuleMapReader(
            os.path.join(self.tmp, 'no-nvidia-smi'),
            {'0000:3a:00.0': 5, '0000:5d:00.0': 2}, state_dir)
        # The override wins; a module ID two GPUs share is no answer; GPUs
        # not asked about are left out.
        self.assertEqual({'0000:3a:00.0': 5}, reader.read(
            'cmp1', ['0000:18:00.0', '0000:3a:00.0', '0000:5d:00.0']))
        self.assertEqual({}, reader.read('cmp2', ['0000:18:00.0']))

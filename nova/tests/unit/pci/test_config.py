"""Tests for loading the [pci] option group as a whole."""

import json

import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture

import nova.conf
from nova import exception
from nova import test
from nova.pci import config as pci_config
from nova.pci import groups
from nova.pci import request
from nova.tests.unit.pci import test_groups

SPEC = '{"vendor_id": "10de", "product_id": "2335", "resource_class": "PGPU"}'
GROUP = ('{"name": "p1", "type": "nvlink", "addresses": '
         '["0000:18:00.0", "0000:3a:00.0"]}')
ALIAS = '{"name": "h200", "resource_class": "PGPU", "group_type": "nvlink"}'


class TestLoad(test.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = cfg.ConfigOpts()
        nova.conf.register_all(self.conf)
        self.conf([], default_config_files=[], default_config_dirs=[])
        self.config = self.useFixture(config_fixture.Config(self.conf))

    def test_everything_parsed(self):
        self.config.config(group='pci', report_in_placement=True,
                           device_spec=[SPEC], device_group=[GROUP],
                           alias=[ALIAS])
        self.config.config(group='filter_scheduler', pci_in_placement=True)
        pci = pci_config.load(self.conf)
        self.assertEqual(1, len(pci.whitelist.specs))
        self.assertEqual(['p1'], [g.name for g in pci.group_tree.groups()])
        self.assertEqual(['h200'], list(pci.aliases))
        self.assertEqual({'PGPU'}, pci.resource_classes)

    def test_groups_need_report_in_placement(self):
        self.config.config(group='pci', device_spec=[SPEC],
                           device_group=[GROUP])
        err = self.assertRaises(exception.InvalidConfiguration,
                                pci_config.load, self.conf)
        self.assertIn('[pci]device_group is set but '
                      '[pci]report_in_placement is False', err.message)

    def test_groups_from_fabric_manager(self):
        self.config.config(group='pci', report_in_placement=True,
                           device_spec=[SPEC],
                           device_group_source='fabric_manager')
        self.config.config(group='libvirt',
                           nvlink_partitions='fabric_manager')
        self.assertEqual([], pci_config.load(self.conf).group_tree.groups())
        for group, values, expected in (
                ('pci', {'device_group': [GROUP]}, 'remove device_group'),
                ('libvirt', {'nvlink_partitions': 'libvirt_hook'},
                 'got libvirt_hook'),
                ('pci', {'report_in_placement': False},
                 'enable report_in_placement')):
            saved = {k: getattr(getattr(self.conf, group), k)
                     for k in values}
            self.config.config(group=group, **values)
            err = self.assertRaises(exception.InvalidConfiguration,
                                    pci_config.load, self.conf)
            self.assertIn(expected, str(err))
            self.assertIn('device_group_source', str(err))
            self.config.config(group=group, **saved)

    def test_aliases_need_placement_scheduling(self):
        self.config.config(group='pci', alias=[
            '{"name": "gpu", "vendor_id": "10de", "product_id": "2335"}'])
        err = self.assertRaises(exception.InvalidConfiguration,
                                pci_config.load, self.conf)
        self.assertIn('[pci]alias is set but '
                      '[filter_scheduler]pci_in_placement is False', str(err))
        self.assertIn('set [filter_scheduler]pci_in_placement = True',
                      str(err))
        self.config.config(group='filter_scheduler', pci_in_placement=True)
        self.assertEqual(['gpu'], list(pci_config.load(self.conf).aliases))

    def test_aliases_on_a_compute_need_report_in_placement(self):
        self.config.config(group='pci', alias=[ALIAS])
        self.config.config(group='filter_scheduler', pci_in_placement=True)
        err = self.assertRaises(exception.InvalidConfiguration,
                                pci_config.load, self.conf, for_compute=True)
        self.assertIn('set [pci]report_in_placement = True', str(err))
        self.config.config(group='pci', report_in_placement=True)
        self.assertEqual(['h200'], list(pci_config.load(
            self.conf, for_compute=True).aliases))

    def test_no_alias_needs_neither_option(self):
        self.config.config(group='pci', device_spec=[SPEC])
        for for_compute in (False, True):
            self.assertEqual({}, pci_config.load(
                self.conf, for_compute=for_compute).aliases)

    def test_wrong_type_names_group_option_and_value(self):
        path = self.useFixture(fixtures.TempDir()).join('nova.conf')
        with open(path, 'w') as f:
            f.write('[pci]\nreport_in_placement = maybe\n')
        conf = cfg.ConfigOpts()
        nova.conf.register_all(conf)
        conf(['--config-file', path], default_config_files=[],
             default_config_dirs=[])
        err = self.assertRaises(exception.InvalidConfiguration,
                                pci_config.load, conf)
        self.assertEqual("Invalid configuration: [pci]report_in_placement:"
                         " Unexpected boolean value 'maybe'", err.message)


def aliases(*values):
    return request.get_alias_from_config(
        [json.dumps(v) for v in values])


class TestCheckAliases(test.TestCase):

    def test_warnings(self):
        tree = groups.GroupTree.from_config(test_groups.H200_CONFIG)
        statics = [groups.StaticGroup('island', 'pcie-switch',
                                      [test_groups.NVME, '0000:c2:00.0'],
                                      'CUSTOM_PCI_GROUP_PCIE_SWITCH')]
        configured = aliases(
            {'name': 'h200', 'resource_class': 'PGPU',
             'group_type': 'nvlink'},
            {'name': 'nic', 'resource_class': 'CUSTOM_NIC'},
            {'name': 'sw', 'resource_class': 'CUSTOM_PCI_GROUP_PCIE_SWITCH',
             'group_type': 'pcie-switch'},
            {'name': 'x', 'resource_class': 'CUSTOM_MI300',
             'group_type': 'xgmi'})
        self.assertEqual(
            ['PCI alias x requests group_type xgmi, but no device group of '
             'that type is declared on this host; declared group types: '
             'nvlink, pcie-switch'],
            pci_config.check_aliases(configured, tree, statics))

    def test_no_groups(self):
        warnings = pci_config.check_aliases(
            aliases({'name': 'h200', 'resource_class': 'PGPU',
                     'group_type': 'nvlink'}),
            groups.GroupTree.from_config([]), [])
        self.assertEqual(1, len(warnings))
        self.assertIn('alias h200', warnings[0])
        self.assertIn('declared group types: none', warnings[0])

    def test_all_declared(self):
        tree = groups.GroupTree.from_config(test_groups.H200_CONFIG)
        self.assertEqual([], pci_config.check_aliases(
            aliases({'name': 'h200', 'resource_class': 'PGPU',
                     'group_type': 'nvlink'}), tree, []))

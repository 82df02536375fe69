"""Tests for the in-memory provider tree."""

import dataclasses

from nova import test
from nova.compute import provider_tree


class TestProviderTree(test.TestCase):

    def setUp(self):
        super().setUp()
        self.tree = provider_tree.ProviderTree()
        self.root = self.tree.add('cmp1', uuid='root-uuid')
        self.group = self.tree.add('cmp1_pair', parent='cmp1')
        self.dev = self.tree.add('cmp1_0000:18:00.0', parent='cmp1_pair')

    def names(self):
        return [p.name for p in self.tree.providers()]

    def test_lookup_by_name_and_uuid(self):
        self.assertEqual(self.dev, self.tree.data('cmp1_0000:18:00.0'))
        self.assertEqual(self.dev, self.tree.data(self.dev.uuid))
        self.assertEqual('cmp1_pair',
                         self.tree.data(self.dev.parent_uuid).name)
        self.assertTrue(self.tree.exists('root-uuid'))
        self.assertFalse(self.tree.exists('nope'))
        error = self.assertRaises(KeyError, self.tree.data, 'nope')
        self.assertIn("'nope'", str(error))

    def test_providers_lists_parents_first(self):
        self.assertEqual(['cmp1', 'cmp1_pair', 'cmp1_0000:18:00.0'],
                         self.names())
        self.assertEqual(['cmp1_pair', 'cmp1_0000:18:00.0'],
                         [p.name for p in self.tree.subtree('cmp1_pair')])
        self.assertEqual(['cmp1'], [p.name for p in self.tree.roots()])
        self.assertEqual(['cmp1_pair'],
                         [p.name for p in self.tree.children('root-uuid')])

    def test_duplicate_name_rejected(self):
        error = self.assertRaises(ValueError, self.tree.add, 'cmp1_pair',
                                  'cmp1')
        self.assertIn("'cmp1_pair' is already used", str(error))

    def test_duplicate_uuid_rejected(self):
        error = self.assertRaises(ValueError, self.tree.add, 'other',
                                  'cmp1', uuid='root-uuid')
        self.assertIn('root-uuid already exists', str(error))
        self.assertFalse(self.tree.exists('other'))

    def test_remove_takes_subtree(self):
        self.tree.remove('cmp1_pair')
        self.assertEqual(['cmp1'], self.names())
        self.assertFalse(self.tree.exists(self.dev.uuid))
        # The names are free again.
        self.tree.add('cmp1_pair', parent='cmp1')

    # Copies ----------------------------------------------------------------

    def test_data_is_a_copy(self):
        self.tree.update_inventory('cmp1', {'VCPU': {'total': 4}})
        self.tree.update_traits('cmp1', {'CUSTOM_A'})
        data = self.tree.data('cmp1')
        data.inventory['VCPU']['total'] = 99
        data.inventory['MEMORY_MB'] = {'total': 1}
        self.assertEqual({'VCPU': {'total': 4}},
                         self.tree.data('cmp1').inventory)
        self.assertEqual({'CUSTOM_A'}, self.tree.data('cmp1').traits)

    def test_snapshots_cannot_be_assigned_to(self):
        data = self.tree.data('cmp1_pair')
        for field, value in (('name', 'x'), ('parent_uuid', None),
                             ('generation', 3), ('traits', {'A'}),
                             ('inventory', {})):
            self.assertRaises(dataclasses.FrozenInstanceError, setattr,
                              data, field, value)
        self.assertIsInstance(data.traits, frozenset)

    def test_every_accessor_hands_out_copies(self):
        self.tree.update_inventory('cmp1_pair', {'X': {'total': 1}})
        handed_out = (self.tree.providers() + self.tree.roots() +
                      self.tree.children('cmp1') +
                      self.tree.subtree('cmp1_pair') +
                      [self.tree.add('cmp1_other', parent='cmp1')])
        for data in handed_out:
            data.inventory['X'] = {'total': 7}
        for provider in self.tree.providers():
            expected = {'X': {'total': 1}} \
                if provider.name == 'cmp1_pair' else {}
            self.assertEqual(expected, provider.inventory, provider.name)

    def test_inventory_given_is_copied_in(self):
        inventory = {'PGPU': {'total': 1}}
        self.tree.update_inventory('cmp1_0000:18:00.0', inventory)
        inventory['PGPU']['total'] = 5
        self.assertEqual(1, self.tree.data(
            'cmp1_0000:18:00.0').inventory['PGPU']['total'])

    def test_copy_is_independent(self):
        self.tree.update_traits('cmp1_pair', {'CUSTOM_A'})
        clone = self.tree.copy()
        clone.update_traits('cmp1_pair', {'CUSTOM_B'})
        clone.update_inventory('cmp1', {'VCPU': {'total': 4}})
        clone.update_generation('cmp1', 7)
        clone.rename('cmp1_pair', 'cmp1_renamed')
        clone.add('cmp1_new', parent='cmp1')
        self.assertEqual({'CUSTOM_A'}, self.tree.data('cmp1_pair').traits)
        self.assertEqual({}, self.tree.data('cmp1').inventory)
        self.assertIsNone(self.tree.data('cmp1').generation)
        self.assertEqual(['cmp1', 'cmp1_pair', 'cmp1_0000:18:00.0'],
                         self.names())

    def test_update_generation(self):
        self.tree.update_generation('cmp1_pair', 4)
        self.assertEqual(4, self.tree.data(self.group.uuid).generation)
        self.assertIsNone(self.group.generation)   # an earlier snapshot

    # Move ------------------------------------------------------------------

    def test_reparent_keeps_uuid_inventory_and_subtree(self):
        self.tree.update_inventory(self.group.uuid, {'X': {'total': 1}})
        self.tree.add('cmp1_quad', parent='cmp1')
        self.tree.reparent('cmp1_pair', 'cmp1_quad')
        moved = self.tree.data('cmp1_pair')
        self.assertEqual(self.group.uuid, moved.uuid)
        self.assertEqual(self.tree.data('cmp1_quad').uuid, moved.parent_uuid)
        self.assertEqual({'X': {'total': 1}}, moved.inventory)
        self.assertEqual(['cmp1', 'cmp1_quad', 'cmp1_pair',
                          'cmp1_0000:18:00.0'], self.names())

    def test_reparent_keeps_uuid(self):
        self.tree.reparent(self.dev.uuid, 'cmp1')
        self.assertEqual('root-uuid',
                         self.tree.data(self.dev.uuid).parent_uuid)
        self.assertEqual(2, len(self.tree.children('cmp1')))

    def test_reparent_to_none_makes_a_root(self):
        self.tree.reparent('cmp1_pair', None)
        self.assertEqual(['cmp1', 'cmp1_pair'],
                         sorted(p.name for p in self.tree.roots()))

    def test_reparent_under_own_descendant_rejected(self):
        error = self.assertRaises(ValueError, self.tree.reparent, 'cmp1',
                                  'cmp1_0000:18:00.0')
        self.assertEqual(
            "Cannot move resource provider 'cmp1' under "
            "'cmp1_0000:18:00.0': that is one of its descendants, which "
            "would make a cycle", str(error))
        self.assertIsNone(self.tree.data('cmp1').parent_uuid)

    def test_reparent_under_itself_rejected(self):
        error = self.assertRaises(ValueError, self.tree.reparent,
                                  'cmp1_pair', self.group.uuid)
        self.assertIn('the provider itself', str(error))
        self.assertEqual('root-uuid',
                         self.tree.data('cmp1_pair').parent_uuid)

    def test_reparent_to_unknown_parent_rejected(self):
        error = self.assertRaises(KeyError, self.tree.reparent, 'cmp1_pair',
                                  'cmp9')
        self.assertIn("'cmp9'", str(error))

    # Rename ----------------------------------------------------------------

    def test_rename_updates_the_name_index(self):
        self.tree.rename(self.group.uuid, 'cmp1_nvlink_pair')
        self.assertFalse(self.tree.exists('cmp1_pair'))
        renamed = self.tree.data('cmp1_nvlink_pair')
        self.assertEqual((self.group.uuid, 'root-uuid'),
                         (renamed.uuid, renamed.parent_uuid))
        # Children still hang below it, and the old name is free.
        self.assertEqual([self.dev.uuid],
                         [p.uuid for p in self.tree.children(renamed.uuid)])
        self.tree.add('cmp1_pair', parent='cmp1')

    def test_rename_to_its_own_name_is_a_no_op(self):
        self.tree.rename('cmp1_pair', 'cmp1_pair')
        self.assertEqual(self.group, self.tree.data('cmp1_pair'))

    def test_rename_to_a_name_in_use_rejected(self):
        error = self.assertRaises(ValueError, self.tree.rename, 'cmp1_pair',
                                  'cmp1_0000:18:00.0')
        self.assertEqual(
            "Resource provider name 'cmp1_0000:18:00.0' is already used by "
            "provider %s" % self.dev.uuid, str(error))
        self.assertEqual(self.group.uuid, self.tree.data('cmp1_pair').uuid)

    def test_rename_to_an_empty_name_rejected(self):
        error = self.assertRaises(ValueError, self.tree.rename, 'cmp1_pair',
                                  '')
        self.assertIn("non-empty string, got ''", str(error))
        self.assertTrue(self.tree.exists('cmp1_pair'))

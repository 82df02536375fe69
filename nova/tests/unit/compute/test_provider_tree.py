"""Tests for the in-memory provider tree."""


from nova import test
from nova.compute import provider_tree


class TestProviderTree(test.TestCase):

    def setUp(self):
        super().setUp()
        self.tree = provider_tree.ProviderTree()
        self.root = self.tree.add('cmp1', uuid='root-uuid')
        self.group = self.tree.add('cmp1_pair', parent='cmp1')
        self.dev = self.tree.add('cmp1_0000:18:00.0', parent='cmp1_pair')

    def test_lookup_by_name_and_uuid(self):
        self.assertIs(self.dev, self.tree.data('cmp1_0000:18:00.0'))
        self.assertIs(self.dev, self.tree.data(self.dev.uuid))
        self.assertTrue(self.tree.exists('root-uuid'))
        self.assertFalse(self.tree.exists('nope'))
        self.assertRaises(KeyError, self.tree.data, 'nope')

    def test_providers_lists_parents_first(self):
        names = [p.name for p in self.tree.providers()]
        self.assertEqual(['cmp1', 'cmp1_pair', 'cmp1_0000:18:00.0'], names)

    def test_duplicate_name_rejected(self):
        self.assertRaises(ValueError, self.tree.add, 'cmp1_pair', 'cmp1')

    def test_remove_takes_subtree(self):
        self.tree.remove('cmp1_pair')
        self.assertEqual(['cmp1'], [p.name for p in self.tree.providers()])

    def test_reparent_keeps_uuid(self):
        self.tree.reparent(self.dev.uuid, 'cmp1')
        self.assertEqual('root-uuid',
                         self.tree.data(self.dev.uuid).parent_uuid)
        self.assertEqual(2, len(self.tree.children('cmp1')))

    def test_reparent_under_own_descendant_rejected(self):
        self.assertRaises(ValueError, self.tree.reparent, 'cmp1_pair',
                          'cmp1_0000:18:00.0')

    def test_copy_is_independent(self):
        self.tree.update_traits('cmp1_pair', {'CUSTOM_A'})
        clone = self.tree.copy()
        clone.update_traits('cmp1_pair', {'CUSTOM_B'})
        clone.update_inventory('cmp1', {'VCPU': {'total': 4}})
        self.assertEqual({'CUSTOM_A'}, self.tree.data('cmp1_pair').traits)
        self.assertEqual({}, self.tree.data('cmp1').inventory)

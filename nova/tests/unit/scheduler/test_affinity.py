"""Server group policies in the scheduler: where members are, which hosts
a policy forbids or prefers, and the compare-and-swap that records a
placement."""

from nova import context as nova_context
from nova.db import api as db
from nova.db import records
from nova.scheduler import affinity
from nova import test
from nova.tests.fixtures import database


def _member(uuid, host=None, placed=None, task_state=None):
    return records.ServerGroupMember(instance_uuid=uuid, placed_host=placed,
                                     host=host, task_state=task_state)


def _group(policy, *members, rules=None):
    return records.ServerGroup(
        id=1, uuid='g1', name='g', project_id='p', user_id='u',
        policy=policy, rules=rules or {}, generation=4, members=members,
        created_at=None)


def _nodes(*numbers):
    """Compute node ``h<n>`` by provider UUID ``rp<n>``, for each n."""
    return {'rp%d' % n: records.ComputeNode(
        id=n, uuid='rp%d' % n, host='h%d' % n, hypervisor_hostname='h%d' % n,
        vcpus=8, memory_mb=1024, local_gb=10, hypervisor_type='QEMU',
        service_id=n, created_at=None, updated_at=None, deleted_at=None)
        for n in numbers}


def _migration(instance_uuid, source, dest):
    return records.Migration(
        id=1, uuid='m1', instance_uuid=instance_uuid, source_compute=source,
        dest_compute=dest, source_node=None, dest_node=None, dest_host=dest,
        old_instance_type_id=None, new_instance_type_id=None,
        migration_type='migration', status='migrating', project_id=None,
        user_id=None, old_flavor=None, new_flavor=None,
        old_pci_requests=None, new_pci_requests=None, created_at=None,
        updated_at=None, deleted_at=None)


class TestMemberHosts(test.TestCase):

    def test_recorded_host_only_when_settled(self):
        # A settled member is where its instance is, whatever the
        # scheduler last chose for it (a reverted resize's destination).
        self.assertEqual({'h1'}, affinity.member_hosts(
            _member('a', host='h1', placed='h2'), []))

    def test_placed_host_counts_while_a_task_is_in_flight(self):
        # A build the conductor has not recorded yet.
        self.assertEqual({'h2'}, affinity.member_hosts(
            _member('a', placed='h2', task_state='scheduling'), []))
        self.assertEqual({'h1', 'h2'}, affinity.member_hosts(
            _member('a', host='h1', placed='h2', task_state='resize_prep'),
            []))

    def test_both_ends_of_a_move_count(self):
        self.assertEqual({'h1', 'h3'}, affinity.member_hosts(
            _member('a', host='h1'), [_migration('a', 'h1', 'h3')]))

    def test_failed_build_without_host_is_nowhere(self):
        self.assertEqual(set(), affinity.member_hosts(
            _member('a', placed='h2'), []))


class TestPolicies(test.TestCase):

    def state(self, policy, *members, rules=None, migrations=()):
        return affinity.state_of(_group(policy, *members, rules=rules),
                                 'self', migrations)

    def test_anti_affinity_refuses_a_host_with_a_member(self):
        state = self.state('anti-affinity', _member('a', host='h1'),
                           _member('self', host='h2'))
        # The instance placed does not count against itself (a move).
        self.assertIsNone(state.refusal('h2'))
        self.assertIsNone(state.refusal('h3'))
        reason = state.refusal('h1')
        self.assertIn('anti-affinity server group g1', reason)
        self.assertIn('h1 holds 1 server(s)', reason)

    def test_max_server_per_host(self):
        state = self.state('anti-affinity', _member('a', host='h1'),
                           _member('b', host='h1'), _member('c', host='h2'),
                           rules={'max_server_per_host': 2})
        self.assertIn('at most 2 per host', state.refusal('h1'))
        self.assertIsNone(state.refusal('h2'))
        self.assertEqual(3, state.size)

    def test_affinity_follows_the_first_member(self):
        self.assertIsNone(self.state('affinity').refusal('h1'))
        state = self.state('affinity', _member('a', host='h1'))
        self.assertIsNone(state.refusal('h1'))
        self.assertIn('its servers are on h1', state.refusal('h2'))

    def test_a_move_in_progress_holds_both_ends(self):
        state = self.state('anti-affinity', _member('a', host='h1'),
                           migrations=[_migration('a', 'h1', 'h2')])
        self.assertIsNotNone(state.refusal('h1'))
        self.assertIsNotNone(state.refusal('h2'))

    def test_soft_policies_never_refuse_and_order_hosts(self):
        members = (_member('a', host='h1'), _member('b', host='h1'),
                   _member('c', host='h2'))
        soft = self.state('soft-affinity', *members)
        spread = self.state('soft-anti-affinity', *members)
        for host in ('h1', 'h2', 'h3'):
            self.assertIsNone(soft.refusal(host))
            self.assertIsNone(spread.refusal(host))
        self.assertEqual(['h1', 'h2', 'h3'],
                         sorted(['h3', 'h2', 'h1'], key=soft.preference))
        self.assertEqual(['h3', 'h2', 'h1'],
                         sorted(['h1', 'h2', 'h3'], key=spread.preference))

    def test_soft_policies_try_the_hosts_they_like_best_first(self):
        members = (_member('a', host='h1'), _member('b', host='h1'),
                   _member('c', host='h2'))
        nodes = _nodes(1, 2, 3)
        spread = self.state('soft-anti-affinity', *members)
        self.assertTrue(spread.prefers)
        kept, dropped = affinity.keep(spread, nodes, [],
                                      preferred_only=True)
        self.assertEqual(['rp3'], list(kept))
        self.assertIn('not preferred by soft-anti-affinity', dropped[0])
        packed = self.state('soft-affinity', *members)
        kept, _dropped = affinity.keep(packed, nodes, [],
                                       preferred_only=True)
        self.assertEqual(['rp1'], list(kept))
        # Without a member placed, or for a hard policy, no preference.
        self.assertFalse(self.state('soft-affinity').prefers)
        self.assertFalse(self.state('anti-affinity', *members).prefers)

    def test_keep_drops_forbidden_hosts_with_the_reason(self):
        state = self.state('anti-affinity', _member('a', host='h1'))
        nodes = _nodes(1, 2)
        kept, dropped = affinity.keep(state, nodes, ['h9 is disabled'])
        self.assertEqual({'rp2': nodes['rp2']}, kept)
        self.assertEqual('h9 is disabled', dropped[0])
        self.assertIn('anti-affinity', dropped[1])
        self.assertEqual((nodes, []), affinity.keep(None, nodes, []))


class TestRecord(test.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(database.Database())
        self.ctx = nova_context.get_admin_context()

    def test_only_one_of_two_decisions_on_one_generation_wins(self):
        group = db.instance_group_create(self.ctx, {
            'uuid': 'g1', 'name': 'g', 'policy': 'anti-affinity',
            'rules': {}})
        for uuid in ('a', 'b'):
            db.instance_create(self.ctx, {'uuid': uuid,
                                          'task_state': 'scheduling'})
            db.instance_group_member_add(self.ctx, 'g1', uuid)
        state_a = affinity.load(self.ctx, 'a')
        state_b = affinity.load(self.ctx, 'b')
        self.assertEqual(group.generation, state_a.generation)
        self.assertTrue(affinity.record(self.ctx, state_a, 'a', 'h1'))
        self.assertFalse(affinity.record(self.ctx, state_b, 'b', 'h1'))
        # Decided again, b sees a on h1.
        state_b = affinity.load(self.ctx, 'b')
        self.assertIsNotNone(state_b.refusal('h1'))
        self.assertTrue(affinity.record(self.ctx, state_b, 'b', 'h2'))

    def test_deleted_member_leaves_the_group(self):
        db.instance_group_create(self.ctx, {
            'uuid': 'g1', 'name': 'g', 'policy': 'affinity'})
        db.instance_create(self.ctx, {'uuid': 'a', 'host': 'h1'})
        db.instance_group_member_add(self.ctx, 'g1', 'a')
        members = db.instance_group_get(self.ctx, 'g1').members
        self.assertEqual(['a'], [m.instance_uuid for m in members])
        db.instance_destroy(self.ctx, 'a')
        self.assertEqual((), db.instance_group_get(self.ctx, 'g1').members)
        self.assertIsNone(db.instance_group_get_by_instance(self.ctx, 'a'))

"""Tests for nova.compute.instance_actions on a real database."""

from nova.compute import instance_actions
from nova import context as nova_context
from nova.db import api as db
from nova import test
from nova.tests.fixtures import database

UUID = '11111111-2222-3333-4444-555555555555'


class TestInstanceActions(test.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(database.Database())
        self.context = nova_context.RequestContext(
            user_id='alice', project_id='proj', request_id='req-a')
        self.admin = nova_context.get_admin_context()

    def test_start_records_who_and_when(self):
        action = instance_actions.start(self.context, UUID,
                                        instance_actions.STOP)
        self.assertEqual(('stop', UUID, 'req-a', 'alice', 'proj', None),
                         tuple(action[key] for key in (
                             'action', 'instance_uuid', 'request_id',
                             'user_id', 'project_id', 'message')))
        self.assertIsNotNone(action['start_time'])
        self.assertIsNone(action['finish_time'])

    def test_successful_step(self):
        instance_actions.start(self.context, UUID, instance_actions.STOP)
        with instance_actions.step(self.context, UUID,
                                   'compute_stop_instance', host='cmp1'):
            pass
        action = db.action_get_by_request_id(self.admin, UUID, 'req-a')
        [event] = db.action_events_get(self.admin, action['id'])
        self.assertEqual(('compute_stop_instance', 'Success', None, 'cmp1'),
                         (event['event'], event['result'],
                          event['traceback'], event['host']))
        self.assertIsNone(action['message'])
        self.assertEqual(event['finish_time'], action['finish_time'])

    def test_failed_step_records_the_traceback_and_reraises(self):
        instance_actions.start(self.context, UUID, instance_actions.REBOOT)

        def fail():
            with instance_actions.step(self.context, UUID,
                                       'compute_reboot_instance'):
                raise ValueError('guest exploded')
        self.assertRaises(ValueError, fail)
        action = db.action_get_by_request_id(self.admin, UUID, 'req-a')
        [event] = db.action_events_get(self.admin, action['id'])
        self.assertEqual('Error', event['result'])
        self.assertIn('ValueError: guest exploded', event['traceback'])
        self.assertEqual('Error', action['message'])

    def test_step_failed_without_raising(self):
        instance_actions.start(self.context, UUID,
                               instance_actions.UNSHELVE)
        with instance_actions.step(self.context, UUID,
                                   'conductor_unshelve_instance') as step:
            step.fail('No valid host was found')
        action = db.action_get_by_request_id(self.admin, UUID, 'req-a')
        [event] = db.action_events_get(self.admin, action['id'])
        self.assertEqual(('Error', 'No valid host was found'),
                         (event['result'], event['traceback']))
        self.assertEqual('Error', action['message'])

    def test_step_without_an_action_runs_unrecorded(self):
        ran = []
        with instance_actions.step(self.admin, UUID, 'compute_repair'):
            ran.append(True)
        self.assertEqual([True], ran)
        self.assertEqual([], db.actions_get(self.admin, UUID))

    def test_steps_belong_to_their_request(self):
        other = nova_context.RequestContext(request_id='req-b')
        instance_actions.start(self.context, UUID, instance_actions.STOP)
        instance_actions.start(other, UUID, instance_actions.START)
        with instance_actions.step(other, UUID, 'compute_start_instance'):
            pass
        listed = db.actions_get(self.admin, UUID)
        self.assertEqual(['start', 'stop'], [a['action'] for a in listed])
        start, stop = listed
        self.assertEqual(1, len(db.action_events_get(self.admin,
                                                     start['id'])))
        self.assertEqual([], db.action_events_get(self.admin, stop['id']))

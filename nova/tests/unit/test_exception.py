"""Tests of nova.exception: formatting messages and reading them back."""

from nova import exception
from nova import test


class TestSafeFormat(test.TestCase):

    def test_message_is_the_template_filled_in(self):
        exc = exception.InstanceNotFound(instance_id='abc')
        self.assertEqual('Instance abc could not be found.', exc.message)
        self.assertEqual({'instance_id': 'abc'}, exc.kwargs)

    def test_missing_kwarg_falls_back_to_template_and_kwargs(self):
        # A raise site that names the wrong kwarg must still raise the
        # exception it meant, not a KeyError from formatting it.
        exc = exception.InstanceNotFound(instance='abc')
        self.assertIn('Instance %(instance_id)s could not be found.',
                      exc.message)
        self.assertIn("'instance': 'abc'", exc.message)
        self.assertIn('could not format', self.logger.output)
        self.assertIn('InstanceNotFound', self.logger.output)

    def test_mistyped_kwarg_falls_back(self):
        class Counted(exception.NovaException):
            msg_fmt = '%(count)d devices'

        exc = Counted(count='two')
        self.assertIn('%(count)d devices', exc.message)
        self.assertIn("'count': 'two'", exc.message)

    def test_explicit_message_is_kept(self):
        exc = exception.InstanceNotFound('gone', instance_id='abc')
        self.assertEqual('gone', exc.message)


class TestReasonOf(test.TestCase):

    def test_nova_exception_gives_its_message(self):
        exc = exception.InstanceNotFound(instance_id='abc')
        self.assertEqual('Instance abc could not be found.',
                         exception.reason_of(exc))

    def test_other_exception_gives_its_text(self):
        self.assertEqual('boom', exception.reason_of(RuntimeError('boom')))

    def test_empty_message_falls_back_to_text(self):
        exc = exception.NovaException('')
        exc.message = ''
        self.assertEqual(str(exc), exception.reason_of(exc))


class TestNoValidHostCodes(test.TestCase):

    def test_codes_are_sorted_once_each_and_leave_the_message(self):
        exc = exception.NoValidHost(reason='nothing fits',
                                    codes=('spread', 'fragmentation',
                                           'spread'))
        self.assertEqual(['fragmentation', 'spread'], exc.kwargs['codes'])
        self.assertEqual('No valid host was found. There are not enough '
                         'hosts available: nothing fits', exc.message)
        self.assertEqual(exc.message, str(exc))

    def test_raisers_naming_no_code_give_none(self):
        exc = exception.NoValidHost(reason='nothing fits')
        self.assertEqual([], exc.kwargs['codes'])
        self.assertEqual('No valid host was found. There are not enough '
                         'hosts available: nothing fits', str(exc))

    def test_explicit_message_is_kept_with_the_codes(self):
        # How oslo.messaging rebuilds a remote exception: args and kwargs.
        exc = exception.NoValidHost('sent text', reason='r',
                                    codes=['fragmentation'])
        self.assertEqual('sent text', exc.message)
        self.assertEqual(['fragmentation'], exc.kwargs['codes'])

"""tools/test_summary.py: the skip reasons it prints."""

from nova import test
from nova.tests.unit import tool


class SkipLinesTest(test.TestCase):

    def test_one_line_per_reason_most_first(self):
        summary = tool.load('test_summary')
        skipped = [(None, 'no real hypervisor: /dev/kvm is missing'),
                   (None, 'RabbitMQ is not running'),
                   (None, 'no real hypervisor: /dev/kvm is missing'),
                   (None, '  ')]
        self.assertEqual(
            ['skipped (2): no real hypervisor: /dev/kvm is missing',
             'skipped (1): RabbitMQ is not running',
             'skipped (1): no reason given'],
            summary.skip_lines(skipped))

    def test_nothing_skipped(self):
        self.assertEqual([], tool.load('test_summary').skip_lines([]))

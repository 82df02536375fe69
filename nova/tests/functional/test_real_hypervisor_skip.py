"""The real-hypervisor skip: its reason, and the failure it becomes
where the real hypervisor is required."""

from unittest import mock

import fixtures
import testtools

from nova import test
from nova.tests.functional.lib import real_hypervisor


class SkipTest(test.TestCase):

    def run_probe(self) -> testtools.TestResult:
        """Run a test that calls the skip helper (defined here, so the
        test loader does not collect it)."""
        class Probe(testtools.TestCase):
            def test_it(self):
                real_hypervisor.skip_unless_real_hypervisor(self)
        result = testtools.TestResult()
        Probe('test_it').run(result)
        return result

    def test_missing_kvm_is_a_skip_with_the_reason(self):
        self.useFixture(fixtures.EnvironmentVariable(
            real_hypervisor.REQUIRE_ENV))
        with mock.patch.object(real_hypervisor, 'KVM_DEVICE',
                               '/nonexistent/kvm'):
            result = self.run_probe()
        [(reason, _tests)] = result.skip_reasons.items()
        self.assertEqual('no real hypervisor: /nonexistent/kvm is missing '
                         '(no KVM on this machine)', reason)

    def test_required_turns_the_skip_into_a_failure(self):
        self.useFixture(fixtures.EnvironmentVariable(
            real_hypervisor.REQUIRE_ENV, '1'))
        with mock.patch.object(real_hypervisor, 'KVM_DEVICE',
                               '/nonexistent/kvm'):
            result = self.run_probe()
        self.assertEqual({}, result.skip_reasons)
        [(_test, error)] = result.failures
        self.assertIn('NOVA_REQUIRE_REAL_HYPERVISOR=1', error)
        self.assertIn('/nonexistent/kvm is missing', error)


class BootDeadlinesTest(test.TestCase):
    """A boot's deadline follows the boots measured on this machine."""

    def test_first_boot_gets_the_generous_deadline(self):
        self.assertEqual(900.0, real_hypervisor.BootDeadlines().timeout())

    def test_a_slow_machine_gets_longer_deadlines(self):
        # The failure seen: a second boot under TCG on a loaded machine
        # needed more than a fixed 300 s after a first boot of 150 s.
        deadlines = real_hypervisor.BootDeadlines()
        deadlines.record(150.0)
        self.assertEqual(450.0, deadlines.timeout())
        deadlines.record(40.0)
        self.assertEqual(450.0, deadlines.timeout())

    def test_a_fast_machine_keeps_a_floor(self):
        deadlines = real_hypervisor.BootDeadlines()
        deadlines.record(3.0)
        self.assertEqual(120.0, deadlines.timeout())

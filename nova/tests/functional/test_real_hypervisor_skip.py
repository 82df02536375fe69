"""The real-hypervisor skip: its reason, and the failure it becomes
where the real hypervisor is required."""

from unittest import mock

import fixtures
import testtools

from nova import test
from nova.tests.functional import real_hypervisor


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

"""Base class for nova's tests.

Every test gets a time bound and its own log capture: service logs are
attached to a failing test instead of cluttering the run's output.
"""

import fixtures
from oslo_log import log as logging
import testtools


class TestCase(testtools.TestCase):
    """testtools.TestCase with a timeout and captured logging."""

    TIMEOUT = 120

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.Timeout(self.TIMEOUT, gentle=True))
        self.logger = self.useFixture(
            fixtures.FakeLogger(level=logging.INFO))

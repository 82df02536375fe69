"""Base class for nova's tests.

Every test gets a time bound and its own log capture: service logs are
attached to a failing test instead of cluttering the run's output.
"""

import fixtures
from oslo_config import cfg
from oslo_log import log as logging
import testtools

import nova.conf


def make_conf() -> cfg.ConfigOpts:
    """A ConfigOpts of its own with every nova option, parsed without
    command-line arguments or configuration files: defaults only."""
    conf = cfg.ConfigOpts()
    nova.conf.register_all(conf)
    conf([], project='nova', default_config_files=[],
         default_config_dirs=[])
    return conf


class TestCase(testtools.TestCase):
    """testtools.TestCase with a timeout and captured logging."""

    TIMEOUT = 120

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.Timeout(self.TIMEOUT, gentle=True))
        self.logger = self.useFixture(
            fixtures.FakeLogger(level=logging.INFO))

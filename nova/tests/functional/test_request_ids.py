"""One request id from the caller to every service and Placement.

A boot through the REST API with ``X-OpenStack-Request-ID`` must carry
that id, as the global request id, through nova-api, the conductor, the
scheduler and the compute (their log lines say so) to Placement (the
claim arrives with it).
"""

import logging
import uuid

from oslo_config import cfg
from oslo_log import formatters
from oslo_log import log

from nova.tests.functional import test_boot_gpu_groups


class _LogLines(logging.Handler):
    """Formats records as a service's log does (oslo.log's context
    formatter and default formats) and keeps the lines."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        conf = cfg.ConfigOpts()
        log.register_options(conf)
        conf([], project='nova', default_config_files=[],
             default_config_dirs=[])
        self.setFormatter(formatters.ContextFormatter(project='nova',
                                                      config=conf))
        self.lines: list[tuple[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        # Formatted now, in the thread that logs: the context of a line is
        # the current context of that thread.
        self.lines.append((record.name, self.format(record)))


class RequestIdPropagationTest(test_boot_gpu_groups.BootTestBase):

    def setUp(self):
        super().setUp()
        self.log = _LogLines()
        root = logging.getLogger('nova')
        root.addHandler(self.log)
        self.addCleanup(root.removeHandler, self.log)
        self.enable_h200_groups()
        self.start_services()

    def _line(self, logger_prefix: str, *fragments: str) -> str:
        """The one log line of a ``logger_prefix`` module containing
        every fragment."""
        found = [line for name, line in self.log.lines
                 if name.startswith(logger_prefix)
                 and all(fragment in line for fragment in fragments)]
        self.assertEqual(1, len(found), (logger_prefix, fragments, found))
        return found[0]

    def test_global_request_id_reaches_every_service_and_placement(self):
        flavor = self.flavor('gpu.1x', 'h200:1')
        global_id = 'req-%s' % uuid.uuid4()
        resp = self.session.post(
            self.allinone.api_url + '/servers',
            headers={'X-OpenStack-Request-ID': global_id},
            json={'server': {'name': 'vm', 'flavorRef': flavor,
                             'imageRef': 'none'}})
        self.assertEqual(202, resp.status_code, resp.text)
        server_id = resp.json()['server']['id']
        # The API answers with the request's own id, not the caller's.
        request_id = resp.headers['x-openstack-request-id']
        self.assertEqual(request_id, resp.headers['x-compute-request-id'])
        self.assertNotEqual(global_id, request_id)
        self.wait_for(server_id, 'ACTIVE')

        lines = {
            'conductor': self._line('nova.conductor.', 'Building instance',
                                    server_id),
            'scheduler': self._line('nova.scheduler.', server_id,
                                    'scheduled to'),
            'compute': self._line('nova.compute.', server_id, 'is running'),
        }
        for service, line in lines.items():
            # oslo.log's context format: [global_id request_id user ...].
            self.assertIn('[%s %s ' % (global_id, request_id), line,
                          service)

        claims = [rid for (method, path), rid in zip(
            self.placement.faults.requests,
            self.placement.faults.request_ids)
            if method == 'PUT' and path == '/allocations/%s' % server_id]
        self.assertEqual([global_id], claims)

        # The instance action is recorded under the request's own id.
        actions = self.api('GET', '/servers/%s/os-instance-actions' %
                           server_id)['instanceActions']
        self.assertEqual([request_id], [a['request_id'] for a in actions])

"""The Placement client sends the current context's global request id."""

import threading

from oslo_context import fixture as context_fixture

from nova import context as nova_context
from nova import test
from nova.scheduler.client import report


class _Response:
    status_code = 200

    def json(self) -> dict:
        return {'traits': ['HW_CPU_X86_AVX']}


class _RecordingAdapter:
    """Answers every request; records the keyword arguments it got."""

    # As keystoneauth's Adapter without [placement]connect_retries.
    connect_retries = None

    def __init__(self) -> None:
        self.requests: list[dict] = []

    def request(self, path, method, **kwargs):
        self.requests.append(kwargs)
        return _Response()


class TestPlacementRequestIds(test.TestCase):

    def setUp(self):
        super().setUp()
        self.adapter = _RecordingAdapter()
        self.client = report.SchedulerReportClient(adapter=self.adapter)
        self.useFixture(context_fixture.ClearRequestContext())

    def _sent_global_id(self):
        self.client.get_traits('rp-1')
        return self.adapter.requests[-1]['global_request_id']

    def test_global_request_id_of_the_current_context(self):
        context = nova_context.RequestContext(
            global_request_id='req-00000000-0000-4000-8000-000000000001')
        context.update_store()
        self.assertEqual(context.global_request_id, self._sent_global_id())

    def test_without_global_id_the_request_id_is_sent(self):
        # A request that started in nova (no caller id) or a periodic
        # task: its own id is the global one.
        context = nova_context.RequestContext()
        context.update_store()
        self.assertEqual(context.request_id, self._sent_global_id())

    def test_nothing_without_a_current_context(self):
        # A fresh thread has no current context.
        sent = []
        thread = threading.Thread(target=lambda: sent.append(
            self._sent_global_id()))
        thread.start()
        thread.join()
        self.assertEqual([None], sent)

"""Band-by-band candidate queries (nova.scheduler.fullness)."""

import json

from nova.pci import request as pci_request
from nova.scheduler import fullness
from nova.scheduler import request_builder
from nova import test
from nova.virt.fake import host as fakehost

BANDS = {'CUSTOM_PCI_FREE_PGPU_%d' % b for b in (1, 2, 4, 8)}
FLAVOR = {'vcpus': 4, 'memory_mb': 4096, 'root_gb': 0, 'extra_specs': {}}


def gpu_request(count: int) -> request_builder.ResourceRequest:
    aliases = pci_request.get_alias_from_config(
        [json.dumps(fakehost.H200_ALIAS)])
    return request_builder.build_resource_request(
        FLAVOR, pci_request.get_pci_requests_from_flavor(
            {pci_request.EXTRA_SPEC_ALIAS: 'h200:%d' % count}, aliases))


class TestAllocationCandidates(test.TestCase):

    def ask_with(self, answers: dict):
        """An ``ask`` answering one candidate for the bands in
        ``answers`` (band trait or None for no band), none otherwise;
        records the band of each query."""
        asked = []

        def ask(params):
            bands = [value for name, value in params
                     if name == 'root_required' and value in BANDS]
            band = bands[0] if bands else None
            asked.append(band)
            return {'allocation_requests': [answers[band]]
                    if band in answers else [], 'provider_summaries': {}}
        return ask, asked

    def test_fullest_band_with_a_candidate_wins(self):
        ask, asked = self.ask_with({'CUSTOM_PCI_FREE_PGPU_4': 'c4',
                                    None: 'any'})
        body = fullness.allocation_candidates(
            gpu_request(2), 1000, ask, lambda prefix: BANDS)
        self.assertEqual(['c4'], body['allocation_requests'])
        # Band 1 cannot hold 2 GPUs: not asked.
        self.assertEqual(['CUSTOM_PCI_FREE_PGPU_2',
                          'CUSTOM_PCI_FREE_PGPU_4'], asked)

    def test_no_band_last(self):
        ask, asked = self.ask_with({None: 'any'})
        known = []
        body = fullness.allocation_candidates(
            gpu_request(8), 1000, ask,
            lambda prefix: known.append(prefix) or BANDS)
        self.assertEqual(['any'], body['allocation_requests'])
        self.assertEqual(['CUSTOM_PCI_FREE_PGPU_8', None], asked)
        self.assertEqual(['CUSTOM_PCI_FREE_PGPU_'], known)

    def test_request_without_devices_is_one_query(self):
        ask, asked = self.ask_with({None: 'any'})
        plain = request_builder.build_resource_request(FLAVOR, [])
        self.assertIsNone(fullness.banded_resource(plain))
        fullness.allocation_candidates(plain, 1000, ask, lambda p: BANDS)
        self.assertEqual([None], asked)
        self.assertEqual(('PGPU', 4),
                         fullness.banded_resource(gpu_request(4)))

    def test_band_only_on_unusable_hosts_is_skipped(self):
        ask, asked = self.ask_with({'CUSTOM_PCI_FREE_PGPU_1': 'tried',
                                    'CUSTOM_PCI_FREE_PGPU_4': 'c4'})
        body = fullness.allocation_candidates(
            gpu_request(1), 1000, ask, lambda prefix: BANDS,
            lambda body: body['allocation_requests'] not in ([], ['tried']))
        self.assertEqual(['c4'], body['allocation_requests'])
        self.assertEqual(['CUSTOM_PCI_FREE_PGPU_1', 'CUSTOM_PCI_FREE_PGPU_2',
                          'CUSTOM_PCI_FREE_PGPU_4'], asked)

"""Tests for one scheduling decision (nova.scheduler.choice)."""

from nova import exception
from nova import test
from nova.scheduler import candidates as scheduler_candidates
from nova.scheduler import choice
from nova.scheduler import refusal
from nova.tests.unit.scheduler import test_candidates as fixtures

HOSTS = {'cmp1': (1,), 'cmp2': ()}


def _answer():
    """Pair candidates on cmp1 (GPU 1 busy) and on the free cmp2."""
    return fixtures._response(HOSTS, {
        host: fixtures._free_pairs(used) for host, used in HOSTS.items()})


class TestChoose(test.TestCase):

    def setUp(self):
        super().setUp()
        self.request = fixtures._request(2)
        self.answer = _answer()
        self.asked = []
        self.claimed = []
        # Hosts whose claims Placement refuses, and how many claims it
        # refuses first whatever the host (taken concurrently).
        self.refuse = set()
        self.refuse_first = 0

    def ask(self, params):
        self.asked.append(params)
        return self.answer

    def claim(self, candidate):
        self.claimed.append(candidate)
        return candidate.host not in self.refuse and \
            len(self.claimed) > self.refuse_first

    def choose(self, usable=None, refusals=list, shards=lambda: (None,),
               **kwargs):
        return choice.choose(
            self.request,
            choice.Placement(ask=self.ask, known_traits=lambda prefix: set(),
                             hosts_with=lambda trait: [],
                             claim=self.claim),
            choice.Fleet(usable=usable or (lambda body: (set(HOSTS), [])),
                         refusals=refusals, shards=shards),
            limit=1000, **kwargs)

    def by_fit(self):
        return choice.by_fit(
            scheduler_candidates.from_response(self.answer, self.request),
            self.answer['provider_summaries'], self.request)

    def test_the_best_fit_is_claimed(self):
        chosen = self.choose()
        expected = self.by_fit()[0]
        # The free pair of cmp1's broken quad: it breaks no free group.
        self.assertEqual('cmp1', expected.host)
        self.assertEqual(expected, chosen.candidate)
        self.assertEqual(self.answer['provider_summaries'], chosen.summaries)
        self.assertEqual([expected], self.claimed)
        self.assertEqual(1, len(self.asked))

    def test_a_refused_claim_moves_on_to_the_next_candidate(self):
        self.refuse_first = 1
        chosen = self.choose()
        self.assertEqual(self.by_fit()[:2], self.claimed)
        self.assertEqual(self.by_fit()[1], chosen.candidate)

    def test_the_order_given_is_used(self):
        chosen = self.choose(order=lambda found, summaries, request:
                             list(reversed(found)))
        self.assertEqual(scheduler_candidates.from_response(
            self.answer, self.request)[-1], chosen.candidate)

    def test_placement_is_asked_again_while_every_claim_is_refused(self):
        self.refuse = set(HOSTS)
        error = self.assertRaises(exception.NoValidHost, self.choose,
                                  rounds=3)
        self.assertEqual([refusal.CLAIMS_TAKEN], error.kwargs['codes'])
        self.assertEqual(3, len(self.asked))
        self.assertEqual(3 * len(self.by_fit()), len(self.claimed))
        self.assertIn('all %d candidate(s)' % (3 * len(self.by_fit())),
                      error.kwargs['reason'])

    def test_each_round_draws_its_shards_anew(self):
        # A retry after concurrent claims may find room in another shard.
        self.refuse = set(HOSTS)
        drawn = []
        self.assertRaises(exception.NoValidHost, self.choose, rounds=2,
                          shards=lambda: drawn.append(1) or (None,))
        self.assertEqual(2, len(drawn))

    def test_candidates_only_on_unusable_hosts_are_refused(self):
        error = self.assertRaises(
            exception.NoValidHost, self.choose,
            usable=lambda body: (set(), ['cmp1 is disabled',
                                         'cmp2 is disabled']))
        self.assertEqual([refusal.HOSTS_UNUSABLE], error.kwargs['codes'])
        self.assertIn('cmp1 is disabled; cmp2 is disabled',
                      error.kwargs['reason'])
        self.assertEqual([], self.claimed)

    def test_unusable_hosts_are_not_claimed(self):
        chosen = self.choose(usable=lambda body: ({'cmp2'}, ['cmp1 down']))
        self.assertEqual('cmp2', chosen.candidate.host)
        self.assertEqual({'cmp2'}, {c.host for c in self.claimed})

    def test_no_candidate_says_why(self):
        self.answer = {'allocation_requests': [], 'provider_summaries': {}}
        reasons = [refusal.Reason(refusal.SPREAD, 'no single host has all')]
        error = self.assertRaises(exception.NoValidHost, self.choose,
                                  refusals=lambda: reasons)
        self.assertEqual([refusal.SPREAD], error.kwargs['codes'])
        self.assertEqual(refusal.no_candidate(
            choice.describe_request(self.request), 'no single host has all'),
            error.kwargs['reason'])


class TestDescribeRequest(test.TestCase):

    def test_flavor_and_group(self):
        self.assertEqual(
            '4 VCPU, 4096 MEMORY_MB and a free nvlink group of 2 x PGPU',
            choice.describe_request(fixtures._request(2)))

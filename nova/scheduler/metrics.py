"""What the scheduler counts for Prometheus: decisions, refusals, claims.

The instruments live in ``REGISTRY``, this process's own registry: the
process that runs the scheduler serves it (``nova-scheduler`` and nova-all
with ``[metrics]listen_port`` set, see ``nova.metrics_endpoint``), since
counters live in the memory of the process that counts.

* ``nova_scheduler_decision_duration_seconds{devices, outcome}``: how long
  one scheduling decision took, from the request to a claim or a
  refusal, by the number of PCI devices the request asks for ("0" for
  none) and ``outcome`` (``scheduled`` or ``refused``);
* ``nova_scheduler_refusals_total{reason}``: refusals by reason, one of
  ``nova.scheduler.refusal.CODES`` (a request refused for two reasons
  counts once for each);
* ``nova_scheduler_claim_conflicts_total``: claims Placement refused
  because a concurrent request took the candidate first;
* ``nova_scheduler_claim_retries_total``: times Placement was asked again
  because every candidate of its answer was taken
  (``[scheduler]max_claim_rounds``).
"""

import collections.abc
import contextlib
import time

import prometheus_client

from nova import exception
from nova.scheduler import request_builder

REGISTRY = prometheus_client.CollectorRegistry(auto_describe=True)

# A decision takes milliseconds to a few seconds (several claim rounds
# under load, refusal reasons asked of Placement).
_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
            30.0)

SCHEDULED = 'scheduled'
REFUSED = 'refused'

DECISION_SECONDS = prometheus_client.Histogram(
    'nova_scheduler_decision_duration_seconds',
    'Time from a scheduling request to its claim or refusal, by the '
    'number of PCI devices requested and the outcome.',
    ['devices', 'outcome'], buckets=_BUCKETS, registry=REGISTRY)
REFUSALS = prometheus_client.Counter(
    'nova_scheduler_refusals', 'Scheduling requests refused '
    '(NoValidHost), by reason.', ['reason'], registry=REGISTRY)
CLAIM_CONFLICTS = prometheus_client.Counter(
    'nova_scheduler_claim_conflicts', 'Claims Placement refused because '
    'another request took the candidate first.', registry=REGISTRY)
CLAIM_RETRIES = prometheus_client.Counter(
    'nova_scheduler_claim_retries', 'Placement queries repeated because '
    'every candidate of the previous answer was taken concurrently.',
    registry=REGISTRY)


def requested_devices(request: request_builder.ResourceRequest) -> int:
    """The number of PCI devices ``request`` asks for."""
    return sum(pci_req.count for pci_req in request.pci_requests)


@contextlib.contextmanager
def decision(request: request_builder.ResourceRequest
             ) -> collections.abc.Iterator[None]:
    """Time the decision made inside the block; NoValidHost leaving it
    is a refusal (its reasons are counted where they are known, see
    ``refused``)."""
    started = time.perf_counter()

    def observe(outcome: str) -> None:
        DECISION_SECONDS.labels(
            devices=str(requested_devices(request)),
            outcome=outcome).observe(time.perf_counter() - started)

    # Any other error (Placement down, a lost build lease) is no
    # decision and is not observed.
    try:
        yield
    except exception.NoValidHost:
        observe(REFUSED)
        raise
    observe(SCHEDULED)


def refused(*codes: str) -> None:
    """Count one refusal for each reason code."""
    for code in codes:
        REFUSALS.labels(reason=code).inc()

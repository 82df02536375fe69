"""The nova-scheduler manager: choose a host and claim it in Placement.

Placement does the filtering: the request builder turns the flavor and its
PCI requests into one ``GET /allocation_candidates`` query whose candidates
all fit (for device groups, exactly one candidate per free group of the
requested size). The scheduler then drops hosts it must not use, orders
the rest (``candidates.order``: pack GPU hosts, buddy rule) and
claims the first candidate Placement still accepts. Claiming here, not on
the compute, means two concurrent boots can never be promised the same
devices: the loser gets a 409 and takes the next candidate. When every
candidate of an answer was taken concurrently (an answer may hold one
band's hosts only), Placement is asked again, fullest band first, up to
``[scheduler]max_claim_rounds`` times: the new answer shows what is still
free, so N concurrent requests onto N free partitions all get one.

A claim is made for one build attempt: the conductor driving the build
(its ``build_owner``) asks, and the scheduler claims only while the
instance is still in ``scheduling`` under that owner. An answer can come
after the conductor gave up waiting (RPC timeout) and failed the build, so
the state is checked again once the claim is made: a claim for an
instance that failed, is being deleted or is gone is given back here,
since nothing else would free it (see ``nova.conductor.manager``).

A member of a server group lands only on hosts its group's policy
allows, and its placement is recorded with the group's generation
(``nova.scheduler.affinity``): two members scheduled at once can never
both take the last host an anti-affinity group allows.
"""


from collections.abc import Iterable, Sequence
import random

from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging

from nova.compute import task_states
from nova.compute import vm_states
from nova.db import api as db
from nova.db import records
from nova import manager
from nova import exception
from nova import rpc
from nova.fleet import board
from nova.pci import placement_names
from nova.pci import request as pci_request
from nova.scheduler import affinity
from nova.scheduler import band_shards
from nova.scheduler import choice
from nova.scheduler import frees
from nova.scheduler import fullness
from nova.scheduler.client import report
from nova.scheduler import metrics as scheduler_metrics
from nova.scheduler import refusal
from nova.scheduler import request_builder
from nova.scheduler import rpcapi as scheduler_rpcapi
from nova.servicegroup import api as servicegroup

LOG = logging.getLogger(__name__)

BINARY = 'nova-scheduler'
COMPUTE_BINARY = 'nova-compute'
# What an instance or move without a flavor snapshot asks for: nothing.
_NO_FLAVOR = records.FlavorSnapshot.of_flavor({})

# The compute nodes by UUID (their root providers) and the compute
# services by host.
_Fleet = tuple[dict[str, records.ComputeNode], dict[str, records.Service]]


class SchedulerManager(manager.Manager):
    """RPC endpoint of the scheduler (topic ``scheduler``)."""

    binary = BINARY
    topic = 'scheduler'
    # The RPC API version served (history: nova.scheduler.rpcapi).
    target = rpc.endpoint_target(scheduler_rpcapi.VERSION)

    def __init__(self, conf: cfg.ConfigOpts,
                 reportclient: report.SchedulerReportClient | None = None
                 ) -> None:
        super().__init__(conf)
        # Asks Placement for candidates and claims the chosen one.
        self.reportclient = report.client_for(conf, reportclient)
        # Which shard of the fleet a request asks first
        # (nova.scheduler.band_shards).
        self._rng = random.Random()

    @oslo_messaging.expected_exceptions(exception.NoValidHost,
                                        exception.BuildLeaseLost)
    def select_destination(self, context, instance_uuid: str,
                           excluded_hosts: list[str], build_owner: str,
                           return_selection: bool = False) -> dict:
        """Choose a host for the instance and claim it in Placement.

        ``excluded_hosts`` are compute host names already tried;
        ``build_owner`` is the conductor driving the build (BuildLeaseLost
        if the build is not in ``scheduling`` under it). Returns a
        ``scheduler_rpcapi.Selection`` primitive (in the form of API 1.0
        unless ``return_selection``, see nova.scheduler.rpcapi); the
        allocation is claimed for the instance (consumer = its UUID).
        Raises NoValidHost naming what was asked for and why nothing fit
        (marked as expected for oslo.messaging, so the server does not log
        it as a crash; a direct caller gets it wrapped in
        ``oslo_messaging.ExpectedException``).
        """
        instance = db.instance_get_by_uuid(context, instance_uuid)
        self._check_lease(instance, build_owner)
        return self._schedule(
            context, instance, instance.flavor or _NO_FLAVOR,
            instance.pci_requests, set(excluded_hosts), None,
            lambda: self._confirm_claim(context, instance_uuid,
                                        build_owner)
        ).to_primitive(legacy=not return_selection)

    @oslo_messaging.expected_exceptions(exception.NoValidHost)
    def select_destination_for_move(self, context, instance_uuid: str,
                                    migration_uuid: str,
                                    excluded_hosts: list[str],
                                    requested_host: str | None,
                                    return_selection: bool = False
                                    ) -> dict:
        """Choose and claim a destination for a resize, cold migration or
        evacuation, with the migration's new flavor and PCI requests.

        The new flavor's group request goes to Placement as for a boot, so
        the destination is always one free partition of the new size. The
        claim is the instance's (consumer = instance UUID); the caller
        moved the source allocation to the migration before, so the
        instance consumer is new here. ``requested_host`` (an admin's
        target) limits the choice to that host. Same answer and errors as
        ``select_destination``.
        """
        instance = db.instance_get_by_uuid(context, instance_uuid)
        migration = db.migration_get_by_uuid(context, migration_uuid)
        return self._schedule(
            context, instance, migration.new_flavor or _NO_FLAVOR,
            migration.new_pci_requests, set(excluded_hosts),
            requested_host, None).to_primitive(legacy=not return_selection)

    def _schedule(self, context, instance: records.Instance,
                  flavor: records.FlavorSnapshot,
                  pci_requests: Sequence[pci_request.InstancePCIRequest],
                  excluded: set[str],
                  requested_host: str | None,
                  after_claim) -> scheduler_rpcapi.Selection:
        """One timed scheduling decision for ``flavor`` (see ``_choose``)."""
        request = request_builder.build_resource_request(
            flavor, pci_requests)
        with scheduler_metrics.decision(request):
            return self._choose(context, instance, request, excluded,
                                requested_host, after_claim)

    def _choose(self, context, instance: records.Instance,
                request: request_builder.ResourceRequest, excluded: set[str],
                requested_host: str | None,
                after_claim) -> scheduler_rpcapi.Selection:
        """``choice.choose`` with this scheduler's Placement client and
        the compute nodes and services of the database (read once per
        decision, not once per query): candidates on usable hosts,
        weighing, claim, asking Placement again (up to
        ``[scheduler]max_claim_rounds`` times) while every candidate it
        offered is claimed concurrently. For a member of a server group,
        the whole decision again while another member was placed
        meanwhile (``nova.scheduler.affinity``)."""
        instance_uuid = instance.uuid
        fleet = _compute_fleet(context)
        nodes = fleet[0]
        project_id = instance.project_id or context.project_id
        user_id = instance.user_id or context.user_id

        def claim(candidate: choice.Candidate) -> bool:
            if self.reportclient.claim_resources(
                    instance_uuid, candidate.allocation_request,
                    project_id, user_id):
                return True
            LOG.info('Claim for instance %s on %s refused; trying the '
                     'next candidate', instance_uuid,
                     nodes[candidate.host].host)
            return False

        # A forbidden trait no provider has yet forbids nothing, but
        # Placement refuses a query naming a trait it does not know, and
        # the shard traits of a shard no compute reported yet are unknown.
        self.reportclient.ensure_traits(
            [trait for group in request.groups
             for trait in group.forbidden_traits] +
            sorted(placement_names.SHARD_TRAITS))
        # A member of a server group is placed only if no other member
        # was placed since its group was read (nova.scheduler.affinity):
        # otherwise its claim is given back and it is decided again.
        decisions = 0
        while True:
            decisions += 1
            group = affinity.load(context, instance_uuid)
            chosen = self._decide(context, request, claim, fleet, excluded,
                                  requested_host, group,
                                  'instance %s' % instance_uuid)
            host = nodes[chosen.candidate.host].host
            if group is None or affinity.record(context, group,
                                                instance_uuid, host):
                break
            LOG.info('Instance %s: another server of its server group was '
                     'placed while it was scheduled to %s; deciding again',
                     instance_uuid, host)
            self.reportclient.delete_allocation_for_instance(instance_uuid)
            if decisions > group.size + self.conf.scheduler.max_claim_rounds:
                scheduler_metrics.refused(refusal.CLAIMS_TAKEN)
                raise exception.NoValidHost(reason=(
                    'other servers of %s server group %s were placed '
                    'concurrently during each of %d decisions' % (
                        group.policy, group.uuid, decisions)),
                    codes=[refusal.CLAIMS_TAKEN])
        if after_claim is not None:
            after_claim()
        node = nodes[chosen.candidate.host]
        LOG.info('Instance %s scheduled to %s (%s)', instance_uuid,
                 node.host, node.hypervisor_hostname)
        return scheduler_rpcapi.Selection(
            host=node.host, nodename=node.hypervisor_hostname,
            allocation_request=chosen.candidate.allocation_request,
            pci_providers=chosen.candidate.pci_providers)

    def _decide(self, context, request: request_builder.ResourceRequest,
                claim, fleet: tuple[dict, dict], excluded: set[str],
                requested_host: str | None,
                group: affinity.GroupState | None,
                label: str) -> choice.Choice:
        """The choice for a member of ``group`` (or of none): on the
        hosts its soft policy likes best if it prefers some, else (or
        when none of those fits) on every host its policy allows."""
        args = (context, request, claim, fleet, excluded, requested_host,
                group, label)
        if group is not None and group.prefers:
            try:
                return self._choose_once(*args, preferred_only=True)
            except exception.NoValidHost as exc:
                LOG.info('%s: no host %s server group %s prefers fits (%s); '
                         'trying every host', label, group.policy,
                         group.uuid, exc.message)
        return self._choose_once(*args)

    def _choose_once(self, context,
                     request: request_builder.ResourceRequest, claim,
                     fleet: tuple[dict, dict], excluded: set[str],
                     requested_host: str | None,
                     group: affinity.GroupState | None, label: str,
                     preferred_only: bool = False) -> choice.Choice:
        """One ``choice.choose`` with this scheduler's Placement client
        and ``fleet`` (compute nodes and services), on the hosts the
        server ``group``'s policy allows (``preferred_only``: likes
        best), in the order it prefers."""
        nodes = fleet[0]
        try:
            return choice.choose(
                request,
                choice.Placement(
                    ask=self._ask_placement,
                    known_traits=self.reportclient.get_trait_names,
                    hosts_with=lambda traits: self._hosts_with(
                        traits, nodes, requested_host),
                    claim=claim),
                choice.Fleet(
                    usable=lambda body: affinity.keep(
                        group, *self._usable_hosts(
                            body, fleet, excluded, self.conf,
                            requested_host), preferred_only=preferred_only),
                    # The boards name withheld groups and why.
                    refusals=lambda: refusal.reasons(
                        self.reportclient, request,
                        lambda: board.load_fleet(context, names=False)),
                    shards=lambda: self._shards(nodes.values(),
                                                requested_host)),
                self.conf.scheduler.max_placement_results,
                self.conf.scheduler.max_claim_rounds,
                order=affinity.order(group, nodes, choice.by_fit),
                label=label)
        except exception.NoValidHost as exc:
            raise _with_leaks(context, exc.kwargs['reason'],
                              exc.kwargs['codes']) from exc

    @staticmethod
    def _check_lease(instance: records.Instance, build_owner: str) -> None:
        """BuildLeaseLost unless ``build_owner`` may schedule the build."""
        waiting = task_states.WAITING_FOR_HOST.get(instance.vm_state)
        if waiting is None or instance.task_state != waiting:
            raise exception.BuildLeaseLost(
                instance_uuid=instance.uuid, owner=build_owner,
                reason='it is %s/%s, not waiting to be scheduled' % (
                    instance.vm_state, instance.task_state))
        if instance.build_owner != build_owner:
            raise exception.BuildLeaseLost(
                instance_uuid=instance.uuid, owner=build_owner,
                reason='%s drives it now' % instance.build_owner)

    def _confirm_claim(self, context, instance_uuid: str,
                       build_owner: str) -> None:
        """Check the build still wants the claim just made.

        If the instance failed (a build in ERROR, an unshelve back to
        SHELVED_OFFLOADED), is being deleted or is gone, the claim
        came too late: give it back (nobody claims for such an instance,
        so the allocation is ours) and raise BuildLeaseLost. If another
        conductor took the build over, leave the allocation: its owner
        frees before scheduling, and a claim of its own racing ours was
        refused.
        """
        try:
            instance = db.instance_get_by_uuid(context, instance_uuid)
        except exception.InstanceNotFound:
            instance = None
        try:
            if instance is None:
                raise exception.BuildLeaseLost(
                    instance_uuid=instance_uuid, owner=build_owner,
                    reason='it was deleted')
            self._check_lease(instance, build_owner)
        except exception.BuildLeaseLost as exc:
            if instance is None or \
                    instance.vm_state == vm_states.ERROR or \
                    instance.task_state == task_states.DELETING or (
                        instance.vm_state ==
                        vm_states.SHELVED_OFFLOADED and
                        instance.task_state is None):
                LOG.warning('Giving back the claim for instance %s: %s',
                            instance_uuid, exc.message)
                frees.free_allocation(context, self.reportclient,
                                      instance_uuid, None)
            raise

    def _hosts_with(self, traits: set[str],
                    nodes: dict[str, records.ComputeNode],
                    requested_host: str | None) -> list[fullness.Host]:
        """The hosts whose root provider has all ``traits``; only those of
        ``requested_host`` when the request names one (the others would
        be dropped as unusable after a query each)."""
        return [fullness.Host(uuid, name) for uuid, name in
                self.reportclient.providers(required=traits)
                if requested_host is None or (
                    uuid in nodes and nodes[uuid].host == requested_host)]

    def _shards(self, nodes: Iterable[records.ComputeNode],
                requested_host: str | None
                ) -> list[band_shards.Shard | None]:
        """The shards of the fleet of compute ``nodes`` to ask in turn
        (``band_shards.for_request``)."""
        nodes = list(nodes)
        requested = [node.hypervisor_hostname for node in nodes
                     if node.host == requested_host]
        return band_shards.for_request(
            len(nodes), self.conf.scheduler.band_shard_hosts,
            requested[0] if len(requested) == 1 else None, self._rng)

    def _ask_placement(self, params: list[tuple[str, str]]) -> dict:
        """One ``GET /allocation_candidates``.

        Placement refuses a query naming a trait it has never seen (400)
        instead of returning nothing. For the scheduler that is the same
        answer as no candidate: no compute reports such providers yet, e.g.
        no host has declared groups of the requested size, or none has a
        group on one NUMA node. The refusal reasons then say which part.
        """
        try:
            return self.reportclient.get_allocation_candidates(params)
        except exception.PlacementAPIError as exc:
            detail = exc.kwargs.get('detail')
            if not report.names_unknown_trait(exc.kwargs.get('status'),
                                              detail):
                raise
            LOG.info('No candidates: %s', detail)
            return {'allocation_requests': [], 'provider_summaries': {}}

    @staticmethod
    def _usable_hosts(response: dict, fleet: _Fleet,
                      excluded: set[str], conf,
                      requested_host: str | None = None
                      ) -> tuple[dict[str, records.ComputeNode], list[str]]:
        """Compute nodes (by UUID) the candidates may land on.

        Returns the usable nodes and a description of each root provider
        dropped: excluded host, disabled compute service, compute service
        down (no heartbeat for ``[DEFAULT]service_down_time``, or none
        registered), or a provider that is no nova compute node.
        """
        nodes, services = fleet
        roots = sorted({summary['root_provider_uuid'] for summary in
                        response.get('provider_summaries', {}).values()})
        usable, dropped = {}, []
        for root in roots:
            node = nodes.get(root)
            service = services.get(node.host) if node else None
            if node is None:
                dropped.append('provider %s is not a compute node' % root)
            elif node.host in excluded:
                dropped.append('%s already tried or the source of the '
                               'move' % node.host)
            elif requested_host is not None and \
                    node.host != requested_host:
                dropped.append('%s is not the requested host %s' % (
                    node.host, requested_host))
            elif service is not None and service.disabled:
                dropped.append('%s is disabled' % node.host)
            elif not servicegroup.is_up(service, conf):
                dropped.append(servicegroup.down_reason(service,
                                                        node.host))
            else:
                usable[root] = node
        return usable, dropped


def _compute_fleet(context) -> _Fleet:
    """Compute nodes by UUID and compute services by host, from the DB."""
    nodes = {node.uuid: node for node in db.compute_node_get_all(context)}
    services = {service.host: service
                for service in db.service_get_all(context, COMPUTE_BINARY)}
    return nodes, services


def _with_leaks(context, reason: str,
                codes: list[str]) -> exception.NoValidHost:
    """NoValidHost for ``reason`` and its ``codes``, also naming the
    capacity deleted servers still hold in Placement (frees pending since
    Placement did not answer, see ``nova.scheduler.frees``): a
    refusal then tells leaked capacity, freed shortly, from a race or a
    full fleet. The code ``refusal.LEAKED_CAPACITY`` says so to programs:
    the conductor moves no server for such a refusal, the leaked capacity
    coming back at the next resource update of its compute."""
    pending = db.pending_free_get_all(context)
    if pending:
        codes = codes + [refusal.LEAKED_CAPACITY]
        by_host: dict[str, list[str]] = {}
        for row in pending:
            by_host.setdefault(row['host'] or 'no host', []).append(
                row['consumer_uuid'])
        reason += (
            '; leaked capacity: %d deleted or offloaded server(s) still '
            'hold allocations in Placement, whose free failed while '
            'Placement did not answer and is retried at their compute\'s '
            'next resource update (%s)' % (len(pending), '; '.join(
                '%s: %s' % (host, ', '.join(uuids))
                for host, uuids in sorted(by_host.items()))))
    return exception.NoValidHost(reason=reason, codes=codes)

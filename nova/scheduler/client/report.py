"""HTTP client for the Placement API, shared by compute and scheduler.

Every request names its microversion explicitly (1.39 unless stated:
re-parenting needs >= 1.37, consumer types 1.38). Failures surface as nova
exceptions naming the method, URL, status and Placement's own error detail
so an operator can tell "Placement is down" from "Placement said no".

Provider trees: :meth:`SchedulerReportClient.get_provider_tree` reads a
compute node's whole tree and remembers a copy of it (later reads list the
tree once and re-read only providers whose generation moved);
:meth:`SchedulerReportClient.update_from_provider_tree` diffs a desired
tree against that copy (reading Placement when there is none) and sends
only the writes needed, so an unchanged tree costs no requests at all.
Generation conflicts are retried per provider with a fresh generation.

Every request carries the global request id of the thread's current
context (the API request, RPC message or periodic task being served) as
``X-OpenStack-Request-ID``, so Placement's log ties its work to the
request that caused it.
"""

import threading
import time
from typing import Callable, Iterable

from keystoneauth1 import exceptions as ks_exc
from oslo_config import cfg
from oslo_context import context as oslo_context
from oslo_log import log as logging
from oslo_utils import uuidutils

from nova.compute import provider_tree as ptree
import nova.conf
from nova.conf import ksa
from nova import exception

LOG = logging.getLogger(__name__)

MICROVERSION = '1.39'
CONF_GROUP = 'placement'
# Attempts at one provider write when its generation keeps moving.
MAX_GENERATION_TRIES = 4
CONSUMER_TYPE_INSTANCE = 'INSTANCE'
CONSUMER_TYPE_MIGRATION = 'MIGRATION'
# A claim or allocation delete that fails for a transient reason
# (Placement unreachable or answering 5xx: restarting, overloaded, a
# database hiccup) is tried this many times, TRANSIENT_DELAY seconds apart
# at first and doubling, before the error is raised.
TRANSIENT_ATTEMPTS = 5
TRANSIENT_DELAY = 0.25
# A read that failed to connect is sent again at least this many times
# (keystoneauth's connect_retries; more if [placement]connect_retries
# says so).
READ_CONNECT_RETRIES = 1
# Attempts at a claim that Placement refuses because a provider or the
# consumer changed while it was written (not because capacity is taken).
CLAIM_CONFLICT_ATTEMPTS = 5

# Placement's machine-readable error codes (placement/errors.py).
_CONCURRENT_UPDATE = 'placement.concurrent_update'
_INVENTORY_INUSE = 'placement.inventory.inuse'
# Placement refuses a query naming a trait it has never seen with a 400
# whose detail says so (in English: it has no error code for it).
_UNKNOWN_TRAIT = 'No such trait'


def _error_body(resp) -> tuple[str, str | None]:
    """Placement's error ``detail`` and ``code`` from a failed response."""
    try:
        error = resp.json()['errors'][0]
        return error.get('detail') or error.get('title', ''), error.get('code')
    except (ValueError, KeyError, IndexError, TypeError):
        return resp.text.strip() or resp.reason or '', None


def names_unknown_trait(status: int | None, detail: str | None) -> bool:
    """Whether Placement refused a query (``status``, error ``detail``)
    because it names a trait Placement has never seen: for a query, the
    same answer as nothing found."""
    return status == 400 and _UNKNOWN_TRAIT in (detail or '')


def _is_transient(error: exception.NovaException) -> bool:
    """True for a failure that may pass by itself: Placement unreachable,
    or answering with a server error."""
    if isinstance(error, exception.PlacementAPIConnectFailure):
        return True
    return isinstance(error, exception.PlacementAPIError) and \
        int(error.kwargs.get('status') or 0) >= 500


def _inventory_matches(current: dict[str, dict],
                       desired: dict[str, dict]) -> bool:
    """True if Placement already holds ``desired``.

    Only the fields nova sends are compared, so fields it leaves to
    Placement's defaults (or an operator's ``reserved``) cause no rewrite.
    """
    if set(current) != set(desired):
        return False
    return all(current[rc].get(field) == value
               for rc, record in desired.items()
               for field, value in record.items())


def client_for(conf: cfg.ConfigOpts,
               given: 'SchedulerReportClient | None' = None
               ) -> 'SchedulerReportClient':
    """The report client a service manager uses: ``given`` (nova-all
    shares one between its services; tests pass fakes) or a new one
    configured from ``conf``."""
    return given if given is not None else SchedulerReportClient(conf)


class SchedulerReportClient:
    """Placement client configured from nova's [placement] options."""

    def __init__(self, conf: cfg.ConfigOpts | None = None,
                 adapter=None) -> None:
        if adapter is None:
            conf = conf if conf is not None else nova.conf.CONF
            adapter = ksa.load_adapter(conf, CONF_GROUP)
        self._adapter = adapter
        # Root UUID -> copy of what Placement held after our last read or
        # sync of that tree.
        self._trees: dict[str, ptree.ProviderTree] = {}
        # (kind, name) of CUSTOM_ traits and resource classes known to
        # exist in Placement.
        self._custom_names: set[tuple[str, str]] = set()
        self._lock = threading.RLock()
        # Set (under _lock) while a sync made from the remembered tree
        # runs: see update_from_provider_tree.
        self._refresh_on_conflict = False

    # HTTP plumbing ---------------------------------------------------------

    def _url(self, path: str) -> str:
        """Absolute URL of ``path`` for messages; falls back to the path."""
        try:
            endpoint = self._adapter.get_endpoint()
        except ks_exc.ClientException:
            endpoint = None
        return (endpoint or '<no [placement] endpoint>').rstrip('/') + path

    def _call(self, method: str, path: str, *, json=None, params=None,
              microversion: str = MICROVERSION, allow: Iterable[int] = ()):
        """Send one request; return the response if 2xx or in ``allow``.

        Raises PlacementAPIConnectFailure when Placement cannot be reached
        and PlacementAPIError for any other status.
        """
        headers = {'OpenStack-API-Version': 'placement %s' % microversion}
        context = oslo_context.get_current()
        retries = {}
        if method == 'GET':
            # A read is safe to send again. A server closes idle keep-alive
            # connections (gunicorn after 2 s): one it closed just as the
            # client reused it from its pool fails with "connection reset"
            # and is sent once more, on a new connection.
            retries['connect_retries'] = max(
                READ_CONNECT_RETRIES, self._adapter.connect_retries or 0)
        try:
            resp = self._adapter.request(
                path, method, json=json, params=params, headers=headers,
                raise_exc=False,
                global_request_id=context.global_id if context else None,
                **retries)
        except (ks_exc.ConnectionError, ks_exc.EndpointNotFound,
                ks_exc.DiscoveryFailure, ks_exc.MissingAuthPlugin) as e:
            raise exception.PlacementAPIConnectFailure(
                url=self._url(path), error=e) from e
        if resp.status_code < 300 or resp.status_code in allow:
            return resp
        raise self._api_error(method, path, resp)

    def _retrying(self, what: str, call):
        """Return ``call()``, retried while it fails transiently."""
        delay = TRANSIENT_DELAY
        for attempt in range(1, TRANSIENT_ATTEMPTS + 1):
            try:
                return call()
            except (exception.PlacementAPIConnectFailure,
                    exception.PlacementAPIError) as error:
                if not _is_transient(error) or attempt == TRANSIENT_ATTEMPTS:
                    raise
                LOG.warning('%s failed (%s); retrying in %.2f s (%d/%d)',
                            what, error, delay, attempt, TRANSIENT_ATTEMPTS)
                time.sleep(delay)
                delay *= 2

    def _api_error(self, method: str, path: str,
                   resp) -> exception.PlacementAPIError:
        detail, code = _error_body(resp)
        return exception.PlacementAPIError(
            method=method, url=self._url(path), status=resp.status_code,
            detail=detail, code=code)

    # Simple reads ----------------------------------------------------------

    def get_provider_by_name(self, name: str) -> dict | None:
        """The provider named ``name`` as Placement returns it, or None."""
        resp = self._call('GET', '/resource_providers',
                          params={'name': name})
        providers = resp.json()['resource_providers']
        return providers[0] if providers else None

    def get_inventories(self, rp_uuid: str) -> dict[str, dict]:
        """Resource class -> inventory record of one provider."""
        resp = self._call('GET', '/resource_providers/%s/inventories' %
                          rp_uuid)
        return resp.json()['inventories']

    def get_traits(self, rp_uuid: str) -> set[str]:
        resp = self._call('GET', '/resource_providers/%s/traits' % rp_uuid)
        return set(resp.json()['traits'])

    def get_trait_names(self, prefix: str) -> set[str]:
        """Traits Placement knows whose names start with ``prefix``."""
        resp = self._call('GET', '/traits',
                          params={'name': 'startswith:' + prefix})
        return set(resp.json()['traits'])

    def get_usages(self, rp_uuid: str) -> dict[str, int]:
        """Resource class -> amount allocated from one provider."""
        resp = self._call('GET', '/resource_providers/%s/usages' % rp_uuid)
        return resp.json()['usages']

    def count_providers(self, resources: dict[str, int] | None = None,
                        required: Iterable[str] = ()) -> int:
        """How many providers have ``resources`` free and all ``required``
        traits; a trait Placement has never seen means none."""
        return len(self.provider_names(resources, required))

    def provider_names(self, resources: dict[str, int] | None = None,
                       required: Iterable[str] = ()) -> list[str]:
        """Names of the providers with ``resources`` free and all
        ``required`` traits; a trait Placement has never seen means
        none."""
        return [name for _uuid, name in self.providers(resources, required)]

    def providers(self, resources: dict[str, int] | None = None,
                  required: Iterable[str] = ()) -> list[tuple[str, str]]:
        """``(uuid, name)`` of the providers with ``resources`` free and
        all ``required`` traits; a trait Placement has never seen means
        none."""
        params = {}
        if resources:
            params['resources'] = ','.join(
                '%s:%d' % item for item in sorted(resources.items()))
        if required:
            params['required'] = ','.join(sorted(required))
        resp = self._call('GET', '/resource_providers', params=params,
                          allow=(400,))
        if resp.status_code == 400:
            detail, _code = _error_body(resp)
            if names_unknown_trait(resp.status_code, detail):
                return []
            raise self._api_error('GET', '/resource_providers', resp)
        return [(provider['uuid'], provider['name'])
                for provider in resp.json()['resource_providers']]

    def _root_uuid(self, root_name_or_uuid: str) -> str | None:
        if uuidutils.is_uuid_like(root_name_or_uuid):
            return root_name_or_uuid
        provider = self.get_provider_by_name(root_name_or_uuid)
        return provider['uuid'] if provider else None

    def _tree_listing(self, root_uuid: str) -> list[dict]:
        resp = self._call('GET', '/resource_providers',
                          params={'in_tree': root_uuid})
        return resp.json()['resource_providers']

    # Provider trees --------------------------------------------------------

    def get_provider_tree(self, root_name_or_uuid: str
                          ) -> ptree.ProviderTree | None:
        """Read the whole tree containing a provider from Placement.

        Returns None when no such provider exists. The tree carries every
        provider's parent, inventory, traits and generation. With a
        remembered copy of the tree, given by UUID, this costs one request
        (the tree listing, which carries every generation) when nothing
        changed: only providers that are new or whose generation moved
        (someone wrote to them, allocations included) are read again, so
        a change made behind nova's back is still seen at the next call.
        """
        root_uuid = self._root_uuid(root_name_or_uuid)
        if root_uuid is None:
            return None
        listing = self._tree_listing(root_uuid)
        with self._lock:
            known = self._trees.pop(root_uuid, None)
            if not listing:
                return None
            tree = self._tree_from_listing(listing, known)
            self._trees[tree.roots()[0].uuid] = tree.copy()
        return tree

    def remembered_tree(self, root_uuid: str) -> ptree.ProviderTree | None:
        """A copy of the tree of root ``root_uuid`` as this client last
        read or wrote it, without asking Placement (None if it holds no
        copy): for a writer that changes what it wrote itself and lets a
        generation conflict tell it someone else wrote meanwhile."""
        with self._lock:
            known = self._trees.get(root_uuid)
            return None if known is None else known.copy()

    def _read_tree(self, any_uuid: str) -> ptree.ProviderTree | None:
        listing = self._tree_listing(any_uuid)
        return self._tree_from_listing(listing, None) if listing else None

    def _tree_from_listing(self, listing: list[dict],
                           known: ptree.ProviderTree | None
                           ) -> ptree.ProviderTree:
        """Build a tree from an ``in_tree`` listing, taking inventory and
        traits from ``known`` for providers whose generation is the same
        and reading them from Placement for the others."""
        children: dict[str | None, list[dict]] = {}
        for rp in listing:
            children.setdefault(rp['parent_provider_uuid'], []).append(rp)
        tree = ptree.ProviderTree()
        pending = list(children.get(None, []))
        while pending:
            rp = pending.pop(0)
            tree.add(rp['name'], parent=rp['parent_provider_uuid'],
                     uuid=rp['uuid'])
            same = (known.data(rp['uuid'])
                    if known is not None and known.exists(rp['uuid'])
                    else None)
            if same is not None and same.generation == rp['generation']:
                tree.update_inventory(rp['uuid'], same.inventory)
                tree.update_traits(rp['uuid'], same.traits)
                tree.update_generation(rp['uuid'], same.generation)
            else:
                self._refresh_provider(tree, rp['uuid'])
            pending.extend(children.get(rp['uuid'], []))
        return tree

    def _refresh_provider(self, tree: ptree.ProviderTree,
                          rp_uuid: str) -> None:
        """Load inventory, traits and generation of one provider of
        ``tree`` from Placement.

        Two reads cannot be atomic; if the generation moved between them,
        read again so the three values belong together.
        """
        base = '/resource_providers/%s' % rp_uuid
        for _attempt in range(MAX_GENERATION_TRIES):
            inv = self._call('GET', base + '/inventories').json()
            traits = self._call('GET', base + '/traits').json()
            if (inv['resource_provider_generation'] ==
                    traits['resource_provider_generation']):
                break
        tree.update_inventory(rp_uuid, inv['inventories'])
        tree.update_traits(rp_uuid, traits['traits'])
        tree.update_generation(rp_uuid,
                               traits['resource_provider_generation'])

    def _generation(self, rp_uuid: str) -> int:
        resp = self._call('GET', '/resource_providers/%s' % rp_uuid)
        return resp.json()['generation']

    def update_from_provider_tree(self, desired: ptree.ProviderTree,
                                  from_memory: bool = False) -> None:
        """Make Placement hold exactly the providers of ``desired``.

        Creates missing providers (parents first, with nova's UUIDs),
        re-parents moved ones in place (UUID and allocations kept), writes
        changed inventories and traits, and deletes providers of the tree
        that ``desired`` no longer has (children first, inventory removed
        before the provider). The generations in ``desired`` are updated to
        Placement's. On an unexpected failure the remembered copy of the
        tree (and the known CUSTOM_ names) are dropped, so the next call
        starts from a fresh read.

        ``from_memory``: ``desired`` was made from :meth:`remembered_tree`,
        so a provider whose generation moved may have changed since (a
        trait another agent added): a write refused for its generation
        re-reads that provider into the remembered copy and raises
        ResourceProviderUpdateConflict for the caller to make ``desired``
        again, instead of writing over the change.
        """
        roots = desired.roots()
        if len(roots) != 1:
            raise exception.Invalid(
                reason='a provider tree to sync must have exactly one root, '
                       'got %s' % sorted(r.name for r in roots))
        root_uuid = roots[0].uuid
        with self._lock:
            current = self._trees.pop(root_uuid, None)
            if current is None:
                current = self._read_tree(root_uuid) or ptree.ProviderTree()
            self._refresh_on_conflict = from_memory
            try:
                self._sync(current, desired)
            except exception.ResourceProviderUpdateConflict:
                if from_memory:
                    # With the moved provider read again.
                    self._trees[root_uuid] = current
                raise
            except exception.NovaException:
                # A CUSTOM_ name deleted behind our back would fail every
                # later write; learn them again.
                self._custom_names.clear()
                raise
            finally:
                self._refresh_on_conflict = False
            self._trees[root_uuid] = current
        for provider in desired.providers():
            desired.update_generation(
                provider.uuid, current.data(provider.uuid).generation)

    def _sync(self, current: ptree.ProviderTree,
              desired: ptree.ProviderTree) -> None:
        """Write the differences; ``current`` follows along."""
        for want in desired.providers():
            if not current.exists(want.uuid):
                self._create_provider(current, want)
                continue
            have = current.data(want.uuid)
            if have.parent_uuid != want.parent_uuid or have.name != want.name:
                self._move_provider(current, have, want)
        # Every trait name new to the tree in one look-up, not one per
        # provider.
        self._ensure_custom_names('traits', {
            name for want in desired.providers()
            for name in want.traits - current.data(want.uuid).traits})
        for want in desired.providers():
            have = current.data(want.uuid)
            if not _inventory_matches(have.inventory, want.inventory):
                self._put_inventory(current, want.uuid, want.inventory)
            if have.traits != want.traits:
                self._put_traits(current, want.uuid, want.traits)
        for stale in reversed(current.providers()):
            if not desired.exists(stale.uuid):
                self._delete_provider(current, stale)

    def _create_provider(self, current: ptree.ProviderTree,
                         want: ptree.ProviderData) -> None:
        body = {'name': want.name, 'uuid': want.uuid}
        if want.parent_uuid is not None:
            body['parent_provider_uuid'] = want.parent_uuid
        created = self._call('POST', '/resource_providers', json=body).json()
        current.add(want.name, parent=want.parent_uuid, uuid=want.uuid,
                    generation=created['generation'])
        LOG.info('Created resource provider %s (%s)', want.name, want.uuid)

    def _move_provider(self, current: ptree.ProviderTree,
                       have: ptree.ProviderData,
                       want: ptree.ProviderData) -> None:
        """Re-parent and/or rename in place (UUID and allocations kept);
        needs microversion >= 1.37."""
        body = {'name': want.name, 'parent_provider_uuid': want.parent_uuid}
        updated = self._call('PUT', '/resource_providers/%s' % want.uuid,
                             json=body).json()
        if have.parent_uuid != want.parent_uuid:
            LOG.info('Moved resource provider %s (%s) from parent %s to %s',
                     want.name, want.uuid, have.parent_uuid,
                     want.parent_uuid)
            current.reparent(want.uuid, want.parent_uuid)
        if have.name != want.name:
            LOG.info('Renamed resource provider %s from %s to %s',
                     want.uuid, have.name, want.name)
            current.rename(want.uuid, want.name)
        current.update_generation(want.uuid, updated['generation'])

    def _put_with_generation(self, current: ptree.ProviderTree,
                             rp_uuid: str, path: str, body: dict) -> dict:
        """PUT ``body`` plus the provider generation; retry on conflicts.

        Returns the response body; the generation Placement answers with
        is recorded in ``current``.
        """
        generation = current.data(rp_uuid).generation
        for _attempt in range(MAX_GENERATION_TRIES):
            payload = dict(body, resource_provider_generation=generation)
            resp = self._call('PUT', path, json=payload, allow=(409,))
            if resp.status_code != 409:
                result = resp.json()
                current.update_generation(
                    rp_uuid, result['resource_provider_generation'])
                return result
            detail, code = _error_body(resp)
            if code == _INVENTORY_INUSE:
                raise exception.InventoryInUse(uuid=rp_uuid, error=detail)
            if code != _CONCURRENT_UPDATE:
                raise self._api_error('PUT', path, resp)
            LOG.debug('Generation of resource provider %s moved past %s; '
                      're-reading it', rp_uuid, generation)
            if self._refresh_on_conflict:
                self._refresh_provider(current, rp_uuid)
                raise exception.ResourceProviderUpdateConflict(
                    uuid=rp_uuid, generation=generation, error=detail)
            generation = self._generation(rp_uuid)
            current.update_generation(rp_uuid, generation)
        raise exception.ResourceProviderUpdateConflict(
            uuid=rp_uuid, generation=generation, error=detail)

    def _put_inventory(self, current: ptree.ProviderTree, rp_uuid: str,
                       inventory: dict[str, dict]) -> None:
        self._ensure_custom_names('resource_classes', inventory)
        result = self._put_with_generation(
            current, rp_uuid, '/resource_providers/%s/inventories' % rp_uuid,
            {'inventories': inventory})
        current.update_inventory(rp_uuid, result['inventories'])

    def _put_traits(self, current: ptree.ProviderTree, rp_uuid: str,
                    traits: frozenset[str]) -> None:
        """Write a provider's traits; the caller (``_sync``) made sure of
        the CUSTOM_ names first, for the whole tree at once."""
        result = self._put_with_generation(
            current, rp_uuid, '/resource_providers/%s/traits' % rp_uuid,
            {'traits': sorted(traits)})
        current.update_traits(rp_uuid, result['traits'])

    def set_traits(self, rp_uuid: str,
                   update: Callable[[frozenset[str]], set[str]]
                   ) -> set[str]:
        """Give provider ``rp_uuid`` the traits ``update`` makes of its
        current ones, for a change to some traits of a provider whose
        tree the caller does not hold (e.g. a tool replaying what
        computes publish, see ``pci_placement_translator.
        host_state_traits``).

        Reads the traits and generation, creates the CUSTOM_ traits
        Placement does not know and writes at the generation read; on a
        generation conflict it reads and applies ``update`` again, up to
        ``MAX_GENERATION_TRIES`` times (then
        ResourceProviderUpdateConflict). Returns the traits written.
        """
        path = '/resource_providers/%s/traits' % rp_uuid
        for _attempt in range(MAX_GENERATION_TRIES):
            current = self._call('GET', path).json()
            generation = current['resource_provider_generation']
            traits = set(update(frozenset(current['traits'])))
            self.ensure_traits(traits)
            resp = self._call('PUT', path, json={
                'traits': sorted(traits),
                'resource_provider_generation': generation}, allow=(409,))
            if resp.status_code != 409:
                return set(resp.json()['traits'])
            detail, code = _error_body(resp)
            if code != _CONCURRENT_UPDATE:
                raise self._api_error('PUT', path, resp)
            LOG.debug('Generation of resource provider %s moved past %s; '
                      're-reading its traits', rp_uuid, generation)
        raise exception.ResourceProviderUpdateConflict(
            uuid=rp_uuid, generation=generation, error=detail)

    def ensure_traits(self, names: Iterable[str]) -> None:
        """Create the CUSTOM_ traits among ``names`` that Placement may
        not know yet (once per process and name)."""
        with self._lock:
            self._ensure_custom_names('traits', names)

    def _ensure_custom_names(self, kind: str, names: Iterable[str]) -> None:
        """Create the CUSTOM_ traits or resource classes Placement may not
        know yet (``kind`` is ``traits`` or ``resource_classes``).

        Traits not known to this client are first looked up in one read
        (``name=in:``), so a new client (a compute starting, 34 trait
        names for an HGX board) writes only the names no one made yet.
        """
        unknown = sorted({name for name in names
                          if name.startswith('CUSTOM_') and
                          (kind, name) not in self._custom_names})
        if kind == 'traits' and unknown:
            known = set(self._call('GET', '/traits', params={
                'name': 'in:' + ','.join(unknown)}).json()['traits'])
            self._custom_names.update(('traits', name) for name in known)
            unknown = [name for name in unknown if name not in known]
        for name in unknown:
            self._call('PUT', '/%s/%s' % (kind, name))
            self._custom_names.add((kind, name))

    def _delete_provider(self, current: ptree.ProviderTree,
                         stale: ptree.ProviderData) -> None:
        if stale.inventory:
            # Explicit removal turns "still allocated" into InventoryInUse
            # instead of an opaque provider-delete conflict.
            self._put_inventory(current, stale.uuid, {})
        self._call('DELETE', '/resource_providers/%s' % stale.uuid,
                   allow=(404,))
        current.remove(stale.uuid)
        LOG.info('Deleted resource provider %s (%s)', stale.name, stale.uuid)

    # Allocations -----------------------------------------------------------

    def get_allocations_for_tree(self, root_uuid: str) -> dict[str, dict]:
        """Allocations of every consumer using a provider of the tree.

        consumer UUID -> {"allocations": {rp_uuid: {"resources": {...}}},
        "project_id", "user_id", "consumer_generation", "consumer_type"};
        a consumer's allocations outside the tree are included, as a
        reshape needs the whole consumer.
        """
        consumers: set[str] = set()
        for rp in self._tree_listing(root_uuid):
            resp = self._call('GET', '/resource_providers/%s/allocations' %
                              rp['uuid'])
            consumers.update(resp.json()['allocations'])
        result = {}
        for consumer in sorted(consumers):
            body = self.get_allocations_for_consumer(consumer)
            if body['allocations']:
                result[consumer] = {
                    'allocations': body['allocations'],
                    'project_id': body.get('project_id'),
                    'user_id': body.get('user_id'),
                    'consumer_generation': body.get('consumer_generation'),
                    'consumer_type': body.get('consumer_type'),
                }
        return result

    def get_allocations_for_consumer(self, consumer_uuid: str) -> dict:
        """Placement's GET /allocations/{consumer} body.

        ``allocations`` is empty for an unknown consumer.
        """
        return self._call('GET', '/allocations/%s' % consumer_uuid).json()

    def get_allocation_candidates(self, query, microversion: str =
                                  MICROVERSION) -> dict:
        """GET /allocation_candidates; ``query`` is a dict or pairs.

        Pairs allow repeating keys. Returns Placement's response body.
        """
        return self._call('GET', '/allocation_candidates', params=query,
                          microversion=microversion).json()

    def _put_allocations(self, consumer_uuid: str, allocations: dict,
                         project_id: str, user_id: str,
                         consumer_generation: int | None,
                         consumer_type: str):
        body = {'allocations': allocations, 'project_id': project_id,
                'user_id': user_id,
                'consumer_generation': consumer_generation,
                'consumer_type': consumer_type}
        return self._call('PUT', '/allocations/%s' % consumer_uuid,
                          json=body, allow=(409,))

    def put_allocations(self, consumer_uuid: str, allocations: dict,
                        project_id: str, user_id: str,
                        consumer_generation: int | None = None,
                        consumer_type: str = CONSUMER_TYPE_INSTANCE) -> None:
        """Replace a consumer's allocations; any refusal raises.

        ``consumer_generation`` is None for a new consumer, else the value
        read with its current allocations.
        """
        path = '/allocations/%s' % consumer_uuid
        resp = self._put_allocations(consumer_uuid, allocations, project_id,
                                     user_id, consumer_generation,
                                     consumer_type)
        if resp.status_code == 409:
            raise self._api_error('PUT', path, resp)

    def claim_resources(self, consumer_uuid: str, allocation_request: dict,
                        project_id: str, user_id: str,
                        consumer_generation: int | None = None) -> bool:
        """Claim one allocation candidate for an instance.

        Returns False when Placement refuses with 409 because the capacity
        is taken (or the consumer was changed by someone else), so the
        caller can try another candidate. A transient failure is retried
        and raised only if it persists; a write that conflicted with a
        concurrent one is retried, and one that went through although its
        answer was lost counts as claimed.
        """
        allocations = allocation_request['allocations']
        for _attempt in range(CLAIM_CONFLICT_ATTEMPTS):
            resp = self._retrying(
                'Claim for instance %s' % consumer_uuid,
                lambda: self._put_allocations(
                    consumer_uuid, allocations, project_id, user_id,
                    consumer_generation, CONSUMER_TYPE_INSTANCE))
            if resp.status_code != 409:
                return True
            detail, code = _error_body(resp)
            if code != _CONCURRENT_UPDATE:
                LOG.info('Placement refused the claim for %s: %s',
                         consumer_uuid, detail)
                return False
            if self._holds(consumer_uuid, allocations):
                return True
            LOG.debug('Claim for %s conflicted with a concurrent write; '
                      'retrying: %s', consumer_uuid, detail)
        LOG.info('Claim for %s kept conflicting with concurrent writes: %s',
                 consumer_uuid, detail)
        return False

    def _holds(self, consumer_uuid: str, allocations: dict) -> bool:
        """True if the consumer holds exactly ``allocations``."""
        held = self.get_allocations_for_consumer(consumer_uuid)
        return {rp: alloc['resources'] for rp, alloc in
                held['allocations'].items()} == \
            {rp: alloc['resources'] for rp, alloc in allocations.items()}

    def move_allocations(self, source_consumer: str, target_consumer: str,
                         target_type: str = CONSUMER_TYPE_INSTANCE) -> bool:
        """Give every allocation of ``source_consumer`` to
        ``target_consumer`` in one POST /allocations, as upstream does
        between an instance and its migration.

        Atomic: Placement applies both consumers or neither, and the
        consumer generations make a concurrent change of either a 409
        (retried on a fresh read). Returns False if the source holds
        nothing (nothing to move). ``target_type`` is the Placement
        consumer type of the target (``MIGRATION`` or ``INSTANCE``).
        """
        for _attempt in range(CLAIM_CONFLICT_ATTEMPTS):
            source = self.get_allocations_for_consumer(source_consumer)
            if not source['allocations']:
                return False
            target = self.get_allocations_for_consumer(target_consumer)
            merged = {rp: {'resources': dict(alloc['resources'])}
                      for rp, alloc in target['allocations'].items()}
            for rp, alloc in source['allocations'].items():
                resources = merged.setdefault(rp, {'resources': {}})[
                    'resources']
                for rc, amount in alloc['resources'].items():
                    resources[rc] = resources.get(rc, 0) + amount
            source_type = source.get('consumer_type') or \
                CONSUMER_TYPE_INSTANCE
            body = {
                target_consumer: {
                    'allocations': merged,
                    'project_id': source['project_id'],
                    'user_id': source['user_id'],
                    'consumer_generation': target.get('consumer_generation'),
                    'consumer_type': target_type},
                source_consumer: {
                    'allocations': {},
                    'project_id': source['project_id'],
                    'user_id': source['user_id'],
                    'consumer_generation': source.get('consumer_generation'),
                    'consumer_type': source_type},
            }
            resp = self._retrying(
                'Moving the allocations of %s to %s' % (source_consumer,
                                                        target_consumer),
                lambda: self._call('POST', '/allocations', json=body,
                                   allow=(409,)))
            if resp.status_code != 409:
                LOG.info('Moved the allocations of %s to %s',
                         source_consumer, target_consumer)
                return True
            detail, code = _error_body(resp)
            if code != _CONCURRENT_UPDATE:
                raise self._api_error('POST', '/allocations', resp)
            LOG.debug('Moving allocations of %s conflicted with a '
                      'concurrent write; retrying: %s', source_consumer,
                      detail)
        raise self._api_error('POST', '/allocations', resp)

    def delete_allocation_at_generation(self, consumer_uuid: str,
                                        current: dict) -> bool:
        """Drop a consumer's allocations only if they are still
        ``current`` (its GET /allocations body): False when a write
        since moved its consumer generation on (Placement's 409)."""
        body = {consumer_uuid: {
            'allocations': {},
            'project_id': current['project_id'],
            'user_id': current['user_id'],
            'consumer_generation': current.get('consumer_generation'),
            'consumer_type': current.get('consumer_type') or
            CONSUMER_TYPE_INSTANCE}}
        resp = self._retrying(
            'Deleting the allocations of %s' % consumer_uuid,
            lambda: self._call('POST', '/allocations', json=body,
                               allow=(409,)))
        if resp.status_code != 409:
            return True
        if _error_body(resp)[1] != _CONCURRENT_UPDATE:
            raise self._api_error('POST', '/allocations', resp)
        return False

    def delete_allocation_for_instance(self, consumer_uuid: str) -> None:
        """Drop every allocation of a consumer; no-op if it has none.
        Transient failures are retried."""
        self._retrying(
            'Deleting the allocations of %s' % consumer_uuid,
            lambda: self._call('DELETE', '/allocations/%s' % consumer_uuid,
                               allow=(404,)))

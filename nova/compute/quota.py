"""Quotas: the limits of a project (and of a user in it) and their usage,
counted from the servers the project has, as upstream's counting quotas.

Limits resolve in upstream's order: a user's own limit, else the
project's own limit, else the ``default`` quota class, else ``[quota]``.
Usage is counted from the instances table (servers not deleted, shelved
ones included): one instance, its flavor's vcpus (``cores``) and
memory_mb (``ram``), and the devices of each PCI alias its flavor asks
for (``pci_alias:<alias>``, this fork's GPU quota). A server in the middle
of a resize counts the larger of its two flavors per resource until the
resize is confirmed or reverted.

:func:`reserve` checks a request against the limits while holding the
project's quota lock, and records what the request creates in the same
transaction, so concurrent creates never exceed a limit.
"""

import collections
import dataclasses
from collections.abc import Callable, Iterable
from typing import TypeVar

from oslo_config import cfg

from nova.db import api as db
from nova.db import records
from nova import exception
from nova.pci import request as pci_request

T = TypeVar('T')

INSTANCES = 'instances'
CORES = 'cores'
RAM = 'ram'
METADATA_ITEMS = 'metadata_items'
# Counted from the project's servers and enforced here.
COUNTED = (INSTANCES, CORES, RAM)
# Shown as upstream shows them; their limits are kept, and of them
# metadata_items is enforced, per server (check_metadata).
KEPT = (METADATA_ITEMS, 'key_pairs', 'server_groups',
        'server_group_members')
# Shown before microversion 2.57 (personality, which this fork lacks).
INJECTED_FILES = ('injected_files', 'injected_file_content_bytes',
                  'injected_file_path_bytes')
# nova-network's, shown before microversion 2.36; always unlimited
# unless set.
NETWORK = ('fixed_ips', 'floating_ips', 'security_group_rules',
           'security_groups')
# Every upstream resource, in the order responses list them.
RESOURCES = tuple(sorted(COUNTED + KEPT + INJECTED_FILES + NETWORK))
# The [quota] option of each resource's default (none: -1).
_OPTION = dict({name: name for name in COUNTED + KEPT},
               injected_files='injected_files',
               injected_file_content_bytes='injected_file_content_bytes',
               injected_file_path_bytes='injected_file_path_length')

PCI_ALIAS_PREFIX = 'pci_alias:'
DEFAULT_CLASS = 'default'
UNLIMITED = -1


def pci_alias_resource(alias_name: str) -> str:
    """The quota resource of the devices of one [pci]alias."""
    return PCI_ALIAS_PREFIX + alias_name


def defaults(conf: cfg.ConfigOpts,
             aliases: Iterable[str] = ()) -> dict[str, int]:
    """The [quota] limits of every resource and of the PCI ``aliases``."""
    limits = {name: (conf.quota[_OPTION[name]] if name in _OPTION
                     else UNLIMITED) for name in RESOURCES}
    configured = conf.quota.pci_alias_limits
    for alias in aliases:
        limits[pci_alias_resource(alias)] = _alias_default(
            alias, configured.get(alias))
    return limits


def _alias_default(alias: str, value: str | None) -> int:
    if value is None:
        return UNLIMITED
    try:
        limit = int(value)
    except ValueError:
        limit = None
    if limit is None or limit < UNLIMITED:
        raise exception.InvalidConfiguration(
            reason='[quota]pci_alias_limits: the limit of alias %r is %r; '
                   'expected -1 (unlimited) or a non-negative integer' % (
                       alias, value))
    return limit


def _override(limits: dict[str, int], stored) -> dict[str, int]:
    """``limits`` with the stored limits of the resources it has."""
    limits = dict(limits)
    for row in stored:
        if row.resource in limits:
            limits[row.resource] = row.hard_limit
    return limits


def class_limits(context, conf: cfg.ConfigOpts, class_name: str,
                 aliases: Iterable[str] = ()) -> dict[str, int]:
    """The limits of a quota class: [quota] overridden by the class's
    stored limits (upstream reads only the ``default`` class)."""
    return _override(defaults(conf, aliases),
                     db.quota_class_get_all(context, class_name))


def project_limits(context, conf: cfg.ConfigOpts, project_id: str,
                   aliases: Iterable[str] = ()) -> dict[str, int]:
    """The limits of a project: the default class overridden by the
    project's own."""
    return _override(class_limits(context, conf, DEFAULT_CLASS, aliases),
                     db.quota_get_all(context, project_id))


def user_limits(context, conf: cfg.ConfigOpts, project_id: str,
                user_id: str, aliases: Iterable[str] = ()
                ) -> dict[str, int]:
    """The limits of a user in a project: the project's overridden by
    the user's own."""
    return _override(project_limits(context, conf, project_id, aliases),
                     db.quota_get_all(context, project_id, user_id))


def flavor_usage(flavor: records.FlavorSnapshot | None,
                 pci_requests: Iterable[pci_request.InstancePCIRequest]
                 ) -> dict[str, int]:
    """What one server of ``flavor`` (None: a server without one) with
    the PCI requests counts against quota."""
    usage: dict[str, int] = collections.Counter({
        INSTANCES: 1, CORES: flavor.vcpus if flavor else 0,
        RAM: flavor.memory_mb if flavor else 0})
    for request in pci_requests:
        usage[pci_alias_resource(request.alias_name)] += request.count
    return dict(usage)


def _larger(first: dict[str, int], second: dict[str, int]
            ) -> dict[str, int]:
    return {key: max(first.get(key, 0), second.get(key, 0))
            for key in set(first) | set(second)}


def count(context, project_id: str,
          user_id: str | None = None) -> dict[str, int]:
    """The usage of a project's servers (of one user's, with
    ``user_id``): resource -> amount, every counted resource present."""
    filters = {'project_id': project_id}
    if user_id is not None:
        filters['user_id'] = user_id
    instances = db.instance_get_all(context, filters)
    moving = {migration.instance_uuid: migration for migration in
              db.migration_get_in_progress(
                  context, [i.uuid for i in instances])
              if migration.migration_type == 'resize'}
    total: collections.Counter = collections.Counter(
        {name: 0 for name in COUNTED})
    for instance in instances:
        usage = flavor_usage(instance.flavor, instance.pci_requests)
        migration = moving.get(instance.uuid)
        if migration is not None:
            for flavor, requests in (
                    (migration.old_flavor, migration.old_pci_requests),
                    (migration.new_flavor, migration.new_pci_requests)):
                usage = _larger(usage, flavor_usage(flavor, requests))
        total.update(usage)
    return dict(total)


@dataclasses.dataclass(frozen=True)
class Over:
    """One limit a request would exceed."""

    resource: str
    requested: int
    used: int
    allowed: int


def overs(limits: dict[str, int], usage: dict[str, int],
          deltas: dict[str, int]) -> list[Over]:
    """The limits ``deltas`` (resource -> amount to add) would exceed,
    by resource name; a limit of -1 is never exceeded and a delta of 0
    or less never exceeds (shrinking is always allowed)."""
    found = []
    for resource in sorted(deltas):
        delta = deltas[resource]
        limit = limits.get(resource, UNLIMITED)
        used = usage.get(resource, 0)
        if delta > 0 and limit != UNLIMITED and used + delta > limit:
            found.append(Over(resource, delta, used, limit))
    return found


def too_many(found: list[Over]) -> exception.TooManyInstances:
    """Upstream's over-quota error (403) for the limits exceeded."""
    def join(values) -> str:
        return ', '.join(str(value) for value in values)
    return exception.TooManyInstances(
        overs=join(o.resource for o in found),
        req=join(o.requested for o in found),
        used=join(o.used for o in found),
        allowed=join(o.allowed for o in found))


def check(context, conf: cfg.ConfigOpts, project_id: str, user_id: str,
          deltas: dict[str, int]) -> None:
    """TooManyInstances (403) if adding ``deltas`` would exceed a limit
    of the user or of the project. Unlocked: see :func:`reserve`."""
    aliases = [resource[len(PCI_ALIAS_PREFIX):] for resource in deltas
               if resource.startswith(PCI_ALIAS_PREFIX)]
    project = project_limits(context, conf, project_id, aliases)
    found = overs(project, count(context, project_id), deltas)
    if not found:
        user = user_limits(context, conf, project_id, user_id, aliases)
        if user != project:
            found = overs(user, count(context, project_id, user_id),
                          deltas)
    if found:
        raise too_many(found)


def check_metadata(context, conf: cfg.ConfigOpts, project_id: str,
                   metadata: dict[str, str]) -> None:
    """MetadataLimitExceeded (403) if one server's ``metadata`` has more
    items than its project's ``metadata_items`` limit, which upstream
    applies to each server, not to a project's total."""
    allowed = project_limits(context, conf, project_id)[METADATA_ITEMS]
    if allowed != UNLIMITED and len(metadata) > allowed:
        raise exception.MetadataLimitExceeded(allowed=allowed)


def reserve(context, conf: cfg.ConfigOpts, deltas: dict[str, int],
            record: Callable[[], T]) -> T:
    """Check ``deltas`` against the limits of the caller's project and
    user, then call ``record`` (which writes what the request creates)
    in the same database transaction, under the project's quota lock;
    its result. Nothing is recorded when a limit would be exceeded."""
    project_id = context.project_id
    with db.quota_locked(context, project_id):
        check(context, conf, project_id, context.user_id, deltas)
        return record()

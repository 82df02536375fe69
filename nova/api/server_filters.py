"""The query of a server listing (``GET /servers``, ``/servers/detail``):
filters and sort keys, as upstream Nova documents them.

``ListQuery.from_request`` parses the query string once, refusing a bad
value with 400 naming it; ``apply`` filters and sorts instance dicts.
Filters upstream keeps for admins (``host``, ``node``, ``project_id``,
``user_id``, ``uuid``, ``vm_state``, ``task_state``) and admin-only sort
keys are dropped from a non-admin's query, as upstream does. This
deployment has no networking service, so servers have no addresses:
``ip`` and ``ip6`` match no server.
"""

import dataclasses
import datetime
import re

from oslo_utils import timeutils

from nova.api import validation
from nova.api import version_history
from nova.compute import utils as compute_utils
from nova.db import records
from nova import exception

# Filters a non-admin's query keeps, and the admin-only ones.
_ADMIN_FILTERS = ('host', 'node', 'project_id', 'tenant_id', 'user_id',
                  'uuid', 'vm_state', 'task_state')
# Sort keys -> the instance field they sort by; the second group is
# admin-only, as upstream.
_SORT_KEYS = {'created_at': 'created_at', 'display_name': 'display_name',
              'updated_at': 'updated_at', 'uuid': 'uuid',
              'vm_state': 'vm_state', 'task_state': 'task_state',
              'power_state': 'power_state', 'image_ref': 'image_ref'}
_ADMIN_SORT_KEYS = {'host': 'host', 'node': 'node',
                    'project_id': 'project_id', 'user_id': 'user_id'}
_SORT_DIRS = ('asc', 'desc')


@dataclasses.dataclass(frozen=True)
class ListQuery:
    """What a listing asks for; None or empty where it asks nothing."""

    name: re.Pattern | None = None
    # vm_states the listed servers may have; None: any.
    vm_states: frozenset[str] | None = None
    image: str | None = None
    flavor: str | None = None
    # The servers of one create.
    reservation_id: str | None = None
    changes_since: datetime.datetime | None = None
    changes_before: datetime.datetime | None = None
    # ip/ip6 given: no server here has an address.
    by_address: bool = False
    # locked (2.73): only locked, or only unlocked, servers.
    locked: bool | None = None
    # Admin-only filters: field -> accepted value.
    fields: tuple[tuple[str, str], ...] = ()
    # (field, descending) pairs, most significant first.
    sort: tuple[tuple[str, bool], ...] = (('created_at', True),)

    @classmethod
    def from_request(cls, req, status_names: dict[str, str],
                     is_admin: bool) -> 'ListQuery':
        """Parse ``req``'s query; ``status_names`` maps each status
        clients see to its vm_state."""
        get = req.GET
        values: dict = {}
        name = get.get('name')
        if name:
            try:
                values['name'] = re.compile(name)
            except re.error as err:
                raise exception.APIValidationError(
                    field='name', reason='%r is not a regular expression: '
                    '%s' % (name, err))
        statuses = [s for s in get.getall('status') if s]
        if statuses:
            unknown = [s for s in statuses
                       if s.upper() not in status_names]
            if unknown and req.api_version.at_least(
                    version_history.STATUS_FILTER_CHECKED):
                raise exception.APIValidationError(
                    field='status', reason='%s is not a server status; '
                    'allowed: %s' % (', '.join(map(repr, unknown)),
                                     ', '.join(sorted(status_names))))
            values['vm_states'] = frozenset(
                status_names[s.upper()] for s in statuses
                if s.upper() in status_names)
        image = get.get('image')
        if image:
            # An image id, or its URL (the id is the last segment).
            values['image'] = validation.id_of_ref(image)
        flavor = get.get('flavor')
        if flavor:
            values['flavor'] = validation.id_of_ref(flavor)
        values['reservation_id'] = req.GET.get('reservation_id') or None
        values['changes_since'] = _time(get, 'changes-since')
        if req.api_version.at_least(version_history.CHANGES_BEFORE):
            values['changes_before'] = _time(get, 'changes-before')
        values['by_address'] = bool(get.get('ip') or get.get('ip6'))
        if (req.api_version.at_least(version_history.LOCKED_REASON)
                and get.get('locked')):
            values['locked'] = validation.boolean('locked', get['locked'])
        if is_admin:
            values['fields'] = tuple(
                ('project_id' if key == 'tenant_id' else key, get[key])
                for key in _ADMIN_FILTERS if get.get(key))
        values['sort'] = _sort(get, is_admin)
        return cls(**values)

    def apply(self, instances: list[records.Instance]
              ) -> list[records.Instance]:
        """The instances this query lists, in its order."""
        if self.by_address:
            return []
        listed = [i for i in instances if self._matches(i)]
        # Stable sorts, least significant key first.
        for field, descending in reversed(self.sort):
            listed.sort(key=lambda i: _sort_value(getattr(i, field)),
                        reverse=descending)
        return listed

    def _matches(self, instance: records.Instance) -> bool:
        if self.name and not self.name.search(
                instance.display_name or ''):
            return False
        if (self.vm_states is not None
                and instance.vm_state not in self.vm_states):
            return False
        image_ref = instance.image_ref or compute_utils.NO_IMAGE
        if self.image and image_ref != self.image:
            return False
        if (self.locked is not None
                and bool(instance.locked) != self.locked):
            return False
        if self.reservation_id and \
                instance.reservation_id != self.reservation_id:
            return False
        flavorid = instance.flavor.flavorid if instance.flavor else None
        if self.flavor and flavorid != self.flavor:
            return False
        changed = instance.updated_at or instance.created_at
        if self.changes_since and (changed is None
                                   or changed < self.changes_since):
            return False
        if self.changes_before and (changed is None
                                    or changed > self.changes_before):
            return False
        return all(str(getattr(instance, field)) == value
                   for field, value in self.fields)


def _time(get, name: str) -> datetime.datetime | None:
    """An ISO 8601 time parameter as a naive UTC datetime (how the
    database stores times)."""
    value = get.get(name)
    if value is None:
        return None
    try:
        parsed = timeutils.parse_isotime(value)
    except ValueError:
        raise exception.APIValidationError(
            field=name, reason='%r is not an ISO 8601 time' % value)
    return timeutils.normalize_time(parsed)


def _sort(get, is_admin: bool) -> tuple[tuple[str, bool], ...]:
    """``sort_key``/``sort_dir`` pairs (repeatable, as upstream); the
    default is newest first."""
    keys = get.getall('sort_key')
    dirs = get.getall('sort_dir')
    if not keys:
        if dirs:
            raise exception.APIValidationError(
                field='sort_dir', reason='sort_dir needs a sort_key')
        return (('created_at', True),)
    allowed = dict(_SORT_KEYS, **(_ADMIN_SORT_KEYS if is_admin else {}))
    result = []
    for index, key in enumerate(keys):
        if key in _ADMIN_SORT_KEYS and not is_admin:
            continue
        if key not in allowed:
            raise exception.APIValidationError(
                field='sort_key', reason='%r is not a sort key; allowed: '
                '%s' % (key, ', '.join(sorted(allowed))))
        direction = dirs[index] if index < len(dirs) else (
            dirs[-1] if dirs else 'desc')
        if direction not in _SORT_DIRS:
            raise exception.APIValidationError(
                field='sort_dir', reason='%r is not a sort direction; '
                'allowed: asc, desc' % direction)
        result.append((allowed[key], direction == 'desc'))
    return tuple(result) or (('created_at', True),)


def _sort_value(value) -> tuple:
    """Sort None first, then values of one kind among themselves."""
    return (value is not None, value if value is not None else 0)

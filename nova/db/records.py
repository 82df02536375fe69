"""Typed records the database layer returns, one per table it serves
that way: callers read attributes a reader can look up here, not keys
of a row dict (see ``nova/pci/device.py`` for the devices' records)."""

import dataclasses
import datetime
from typing import Any, Self

from nova.pci import request as pci_request


class _Row:
    """A record with one field per column of its table's rows."""

    @classmethod
    def from_row(cls, row: dict) -> Self:
        """The record of a row (its dict, as the model's ``to_dict``
        gives it)."""
        return cls(**{field.name: row[field.name]
                      for field in dataclasses.fields(cls)})


@dataclasses.dataclass(frozen=True)
class Service(_Row):
    """One running nova service (a binary on a host): a ``services``
    row, as ``/os-services`` shows it and ``nova.servicegroup.api``
    judges it up or down."""

    id: int
    # The service's id in the Compute API from microversion 2.53.
    uuid: str
    host: str
    # 'nova-compute', 'nova-scheduler', 'nova-conductor'...
    binary: str
    topic: str | None
    # Disabled: the scheduler gives it no new instances.
    disabled: bool
    disabled_reason: str | None
    # Forced down by an operator: down whatever its heartbeats say.
    forced_down: bool
    report_count: int
    # The last heartbeat; None until the first one.
    last_seen_up: datetime.datetime | None
    created_at: datetime.datetime | None
    updated_at: datetime.datetime | None


@dataclasses.dataclass(frozen=True)
class ComputeNode(_Row):
    """A hypervisor a nova-compute service manages: a ``compute_nodes``
    row. Its ``uuid`` is its root resource provider in Placement."""

    id: int
    uuid: str
    # The host of the nova-compute service managing it.
    host: str
    # The hypervisor's name (upstream's nodename; an instance's ``node``).
    hypervisor_hostname: str
    # The inventory the compute last reported.
    vcpus: int
    memory_mb: int
    local_gb: int
    hypervisor_type: str | None
    service_id: int | None
    created_at: datetime.datetime | None
    updated_at: datetime.datetime | None
    deleted_at: datetime.datetime | None


@dataclasses.dataclass(frozen=True)
class KeyPair(_Row):
    """A user's public key, as ``/os-keypairs`` shows it."""

    id: int
    name: str
    user_id: str
    # 'ssh' or 'x509'.
    type: str
    fingerprint: str
    public_key: str
    created_at: datetime.datetime | None


@dataclasses.dataclass(frozen=True)
class Migration(_Row):
    """One move of an instance (resize, cold migration, evacuation): a
    ``migrations`` row.

    The JSON columns are parsed once here: the flavors into
    ``FlavorSnapshot``, the PCI requests into ``InstancePCIRequest``.
    """

    id: int
    # While a resize or cold migration is in progress, the Placement
    # consumer holding the source host's allocation.
    uuid: str
    instance_uuid: str
    source_compute: str | None
    dest_compute: str | None
    source_node: str | None
    dest_node: str | None
    dest_host: str | None
    old_instance_type_id: int | None
    new_instance_type_id: int | None
    # 'resize', 'migration' or 'evacuation'.
    migration_type: str
    status: str
    project_id: str | None
    user_id: str | None
    # Snapshots of the flavor the instance ran with before the move and
    # the one it moves to (a revert goes back to ``old_flavor``).
    old_flavor: 'FlavorSnapshot | None'
    new_flavor: 'FlavorSnapshot | None'
    # The PCI requests each side was claimed with; their request ids tell
    # the source's device claims from the destination's on one host.
    old_pci_requests: tuple[pci_request.InstancePCIRequest, ...]
    new_pci_requests: tuple[pci_request.InstancePCIRequest, ...]
    created_at: datetime.datetime | None
    updated_at: datetime.datetime | None
    deleted_at: datetime.datetime | None

    @classmethod
    def from_row(cls, row: dict) -> 'Migration':
        """The record of a ``migrations`` row (its dict), its JSON columns
        parsed."""
        values = {field.name: row[field.name]
                  for field in dataclasses.fields(cls)}
        for key in ('old_flavor', 'new_flavor'):
            values[key] = FlavorSnapshot.from_primitive(values[key])
        for key in ('old_pci_requests', 'new_pci_requests'):
            values[key] = _pci_requests(values[key])
        return cls(**values)


@dataclasses.dataclass(frozen=True)
class ServerGroupMember:
    """A live server of a server group, and where it is: what the
    scheduler reads to keep the group's policy."""

    instance_uuid: str
    # The host the scheduler last placed it on (its build's or move's
    # destination; None before the first placement).
    placed_host: str | None
    # The instance's recorded host and task state now.
    host: str | None
    task_state: str | None


@dataclasses.dataclass(frozen=True)
class ServerGroup:
    """An ``instance_groups`` row with its live members, oldest first."""

    id: int
    uuid: str
    name: str | None
    project_id: str | None
    user_id: str | None
    # One of nova.scheduler.affinity.POLICIES.
    policy: str
    # {'max_server_per_host': N} or {}.
    rules: dict
    # Moves on with every placement recorded for a member.
    generation: int
    members: tuple[ServerGroupMember, ...]
    created_at: datetime.datetime | None

    @classmethod
    def from_row(cls, row: dict,
                 members: tuple[ServerGroupMember, ...]) -> 'ServerGroup':
        """The record of an ``instance_groups`` row (its dict)."""
        values = {field.name: row[field.name]
                  for field in dataclasses.fields(cls)
                  if field.name != 'members'}
        values['rules'] = dict(values['rules'] or {})
        return cls(members=members, **values)


@dataclasses.dataclass(frozen=True)
class QuotaLimit:
    """A stored limit of one resource: a project's (``user_id`` None),
    a user's in a project, or a quota class's (``project_id`` None, the
    class in ``class_name``). -1 is unlimited."""

    resource: str
    hard_limit: int
    project_id: str | None = None
    user_id: str | None = None
    class_name: str | None = None


@dataclasses.dataclass(frozen=True)
class Flavor(_Row):
    """A ``flavors`` row with its extra specs: what ``/flavors`` shows
    and a boot or resize copies into a :class:`FlavorSnapshot`."""

    id: int
    # The public id the API takes (``flavorRef``).
    flavorid: str
    name: str
    vcpus: int
    memory_mb: int
    root_gb: int
    is_public: bool
    # A disabled flavor is listed but takes no new servers.
    disabled: bool
    extra_specs: dict[str, str]
    created_at: datetime.datetime | None
    updated_at: datetime.datetime | None

    def snapshot(self, extra_specs: dict[str, str] | None = None
                 ) -> 'FlavorSnapshot':
        """What a server built with this flavor keeps of it (with
        ``extra_specs`` instead of the stored ones, if given)."""
        return FlavorSnapshot(
            id=self.id, flavorid=self.flavorid, name=self.name,
            vcpus=self.vcpus, memory_mb=self.memory_mb,
            root_gb=self.root_gb or 0,
            extra_specs=dict(self.extra_specs if extra_specs is None
                             else extra_specs))


@dataclasses.dataclass(frozen=True)
class FlavorSnapshot:
    """The part of a flavor an instance (or a move) keeps: later flavor
    edits or deletion never change what a server was built with."""

    # The flavor row's id and its public id, as they were.
    id: int | None
    flavorid: str | None
    name: str | None
    vcpus: int
    memory_mb: int
    root_gb: int
    extra_specs: dict[str, str] = dataclasses.field(default_factory=dict)

    @classmethod
    def of_flavor(cls, flavor: dict) -> 'FlavorSnapshot':
        """The snapshot of a ``flavors`` row with its extra specs (as
        ``db.flavor_get_by_flavorid`` returns it)."""
        return cls(id=flavor.get('id'), flavorid=flavor.get('flavorid'),
                   name=flavor.get('name'),
                   vcpus=int(flavor.get('vcpus') or 0),
                   memory_mb=int(flavor.get('memory_mb') or 0),
                   root_gb=int(flavor.get('root_gb') or 0),
                   extra_specs=dict(flavor.get('extra_specs') or {}))

    @classmethod
    def from_primitive(cls, value: dict | None) -> 'FlavorSnapshot | None':
        """The snapshot stored as JSON (None: none stored)."""
        return None if value is None else cls.of_flavor(value)

    def to_primitive(self) -> dict:
        """The JSON-ready form the database stores."""
        return dataclasses.asdict(self)


def _pci_requests(value: list[dict] | None
                  ) -> tuple[pci_request.InstancePCIRequest, ...]:
    return tuple(pci_request.requests_from_primitive(value))


@dataclasses.dataclass(frozen=True)
class Instance:
    """A server: an ``instances`` row, its JSON columns parsed (the
    flavor snapshot, the PCI requests). Writers still give
    ``db.instance_update`` a dict of changed columns."""

    id: int
    uuid: str
    display_name: str | None
    project_id: str | None
    user_id: str | None
    # The flavor row's id at boot (not a foreign key) and its snapshot.
    flavor_id: int | None
    flavor: FlavorSnapshot | None
    vm_state: str | None
    task_state: str | None
    power_state: int | None
    host: str | None
    node: str | None
    fault_message: str | None
    fault_details: str | None
    # What the flavor's PCI aliases asked for, one request per item.
    pci_requests: tuple[pci_request.InstancePCIRequest, ...]
    # The image the server boots from, and that image as it was at
    # (re)build (``nova.image.glance.ImageMeta.to_primitive``).
    image_ref: str | None
    image_meta: dict | None
    server_metadata: dict | None
    locked: bool
    # 'owner' or 'admin'.
    locked_by: str | None
    locked_reason: str | None
    key_name: str | None
    key_data: str | None
    description: str | None
    access_ip_v4: str | None
    access_ip_v6: str | None
    # Base64, as the API took it.
    user_data: str | None
    # Shared by the servers of one create (upstream's ``r-`` ids).
    reservation_id: str | None
    # The conductor driving the build or move, and its last renewal.
    build_owner: str | None
    build_heartbeat: datetime.datetime | None
    created_at: datetime.datetime | None
    updated_at: datetime.datetime | None
    deleted_at: datetime.datetime | None

    @classmethod
    def from_row(cls, row: dict) -> 'Instance':
        """The record of an ``instances`` row (its dict), its JSON
        columns parsed."""
        values = {field.name: row[field.name]
                  for field in dataclasses.fields(cls)}
        values['flavor'] = FlavorSnapshot.from_primitive(values['flavor'])
        values['pci_requests'] = _pci_requests(values['pci_requests'])
        return cls(**values)


def column_values(values: dict) -> dict[str, Any]:
    """``values`` for a row's columns, typed payloads (flavor snapshots,
    PCI requests) in the JSON form the columns store."""
    result = {}
    for key, value in values.items():
        if isinstance(value, FlavorSnapshot):
            value = value.to_primitive()
        elif isinstance(value, (list, tuple)) and value and all(
                isinstance(item, pci_request.InstancePCIRequest)
                for item in value):
            value = pci_request.requests_to_primitive(list(value))
        result[key] = value
    return result

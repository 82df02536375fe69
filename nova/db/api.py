"""Database access for the nova services.

Every function takes a ``nova.context.RequestContext`` first and runs in
the enginefacade transaction kept on that context: calling several of them
inside ``with context_manager.writer.using(context):`` makes them one
transaction. They return the typed records of ``nova.db.records``
(services, compute nodes, migrations, key pairs) or plain dicts (column
name -> value, JSON columns decoded), so callers never hold ORM objects
bound to a closed session.

Missing rows raise ``nova.exception`` NotFound subclasses, duplicates
Conflict subclasses, unknown field names ``DBFieldInvalid``.
"""

import contextlib
import os
import threading
from collections.abc import Iterable
from collections.abc import Iterator
from typing import Any

from oslo_config import cfg
from oslo_db import exception as db_exc
from oslo_db.sqlalchemy import enginefacade
from oslo_utils import timeutils
from oslo_utils import uuidutils
import sqlalchemy as sa
from sqlalchemy.dialects import mysql as mysql_dialect
from sqlalchemy.dialects import postgresql as postgresql_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect

from nova import exception
from nova import states
from nova.db import models
from nova.db import records
from nova.db import sqlite

context_manager = enginefacade.transaction_context()

_configure_lock = threading.Lock()
_configured_connection: str | None = None

# Columns callers never set: keys and timestamps kept by the database.
_MANAGED_COLUMNS = frozenset(('id', 'created_at', 'updated_at'))


def configure(conf: cfg.ConfigOpts) -> None:
    """Point ``context_manager`` at ``conf.database`` (once per process).

    Calling it again with the same connection is a no-op, so every service
    of an all-in-one process may call it; a different connection is a
    configuration error. The directory of a SQLite file is created.
    """
    global _configured_connection
    connection = conf.database.connection
    with _configure_lock:
        if _configured_connection is not None:
            if connection != _configured_connection:
                raise exception.InvalidConfiguration(
                    reason='[database]connection is already %s for this '
                           'process, cannot switch to %s' % (
                               _configured_connection, connection))
            return
        _ensure_sqlite_directory(connection)
        configure_facade(context_manager, **dict(conf.database.items()))
        _configured_connection = connection


def configure_facade(manager, **options) -> None:
    """Configure an enginefacade transaction context for nova's database:
    foreign keys enforced on SQLite too, and a SQLite file safe for many
    threads (see nova.db.sqlite)."""
    sqlite.configure_facade(manager, sqlite_fk=True, **options)


def _ensure_sqlite_directory(connection: str | None) -> None:
    if sqlite.is_sqlite_file(connection):
        database = sa.engine.make_url(connection).database
        os.makedirs(os.path.dirname(os.path.abspath(database)),
                    exist_ok=True)


def get_engine() -> sa.engine.Engine:
    """Return the writer engine (starts the facade if needed)."""
    return context_manager.writer.get_engine()


# Helpers -------------------------------------------------------------------

def _check_fields(model: type[models.Base], values: Iterable[str]) -> None:
    allowed = {c.key for c in model.__table__.columns} - _MANAGED_COLUMNS
    unknown = sorted(set(values) - allowed)
    if unknown:
        raise exception.DBFieldInvalid(table=model.__tablename__,
                                       fields=', '.join(unknown),
                                       allowed=', '.join(sorted(allowed)))


def _flush(session, on_duplicate, on_missing_reference=None) -> None:
    """Flush pending changes, translating constraint errors.

    ``on_duplicate(columns)`` and ``on_missing_reference()`` build the nova
    exception to raise for a unique or foreign key violation.
    """
    try:
        session.flush()
    except db_exc.DBDuplicateEntry as error:
        raise on_duplicate(error.columns) from error
    except db_exc.DBReferenceError as error:
        if on_missing_reference is None:
            raise
        raise on_missing_reference() from error


def _update_row(session, row: models.Base, values: dict, on_duplicate,
                on_missing_reference=None) -> dict:
    _check_fields(type(row), values)
    for key, value in values.items():
        setattr(row, key, value)
    _flush(session, on_duplicate, on_missing_reference)
    return row.to_dict()


# Services ------------------------------------------------------------------

def _service_exists(values: dict):
    return lambda columns: exception.ServiceExists(
        host=values.get('host'), binary=values.get('binary'))


@context_manager.writer
def service_create(context, values: dict) -> records.Service:
    """Create a service row; ServiceExists if host+binary is taken."""
    _check_fields(models.Service, values)
    service = models.Service(**values)
    context.session.add(service)
    _flush(context.session, _service_exists(values))
    return records.Service.from_row(service.to_dict())


@context_manager.reader
def service_get_by_host_and_binary(context, host: str,
                                   binary: str) -> records.Service:
    """Return the service ``binary`` running on ``host``."""
    service = context.session.scalars(
        sa.select(models.Service).filter_by(host=host, binary=binary)
    ).first()
    if service is None:
        raise exception.ServiceHostBinaryNotFound(host=host, binary=binary)
    return records.Service.from_row(service.to_dict())


@context_manager.reader
def service_get_by_uuid(context, uuid: str) -> records.Service:
    """Return the service whose uuid is ``uuid``; ServiceNotFound if none.
    """
    service = context.session.scalars(
        sa.select(models.Service).filter_by(uuid=uuid)).first()
    if service is None:
        raise exception.ServiceNotFound(service_id=uuid)
    return records.Service.from_row(service.to_dict())


@context_manager.reader
def service_get_all(context, binary: str | None = None,
                    host: str | None = None) -> list[records.Service]:
    """Return all services (of one binary, on one host, if given),
    ordered by id."""
    query = sa.select(models.Service).order_by(models.Service.id)
    if binary is not None:
        query = query.filter_by(binary=binary)
    if host is not None:
        query = query.filter_by(host=host)
    return [records.Service.from_row(service.to_dict())
            for service in context.session.scalars(query)]


@context_manager.writer
def service_update(context, service_id: int,
                   values: dict) -> records.Service:
    """Update the service with id ``service_id`` and return it."""
    service = context.session.get(models.Service, service_id)
    if service is None:
        raise exception.ServiceNotFound(service_id=service_id)
    merged = {'host': service.host, 'binary': service.binary, **values}
    return records.Service.from_row(_update_row(
        context.session, service, values, _service_exists(merged)))


@context_manager.writer
def service_report(context, host: str, binary: str) -> bool:
    """Record one heartbeat of ``binary`` on ``host``: ``last_seen_up`` is
    now and ``report_count`` one more, in a single UPDATE (no read first,
    so a heartbeat holds the write lock for as short as possible). False
    if there is no such service."""
    result = context.session.execute(
        sa.update(models.Service)
        .where(models.Service.host == host,
               models.Service.binary == binary)
        .values(last_seen_up=timeutils.utcnow(),
                report_count=models.Service.report_count + 1)
        .execution_options(synchronize_session=False))
    return result.rowcount > 0


# Compute nodes -------------------------------------------------------------

def _compute_node_exists(values: dict):
    return lambda columns: exception.ComputeNodeExists(
        node=values.get('hypervisor_hostname'), uuid=values.get('uuid'))


def _service_missing(values: dict):
    return lambda: exception.ServiceNotFound(
        service_id=values.get('service_id'))


@context_manager.writer
def compute_node_create(context, values: dict) -> records.ComputeNode:
    """Create a compute node (a fresh uuid unless ``values`` has one)."""
    _check_fields(models.ComputeNode, values)
    values = {'uuid': uuidutils.generate_uuid(), **values}
    node = models.ComputeNode(**values)
    context.session.add(node)
    _flush(context.session, _compute_node_exists(values),
           _service_missing(values))
    return records.ComputeNode.from_row(node.to_dict())


@context_manager.reader
def compute_node_get_by_nodename(context,
                                 nodename: str) -> records.ComputeNode:
    """Return the (not deleted) compute node with this hypervisor name."""
    node = context.session.scalars(
        sa.select(models.ComputeNode).filter_by(
            hypervisor_hostname=nodename, deleted_at=None)).first()
    if node is None:
        raise exception.ComputeHostNotFound(node=nodename)
    return records.ComputeNode.from_row(node.to_dict())


@context_manager.reader
def compute_node_get_all(context) -> list[records.ComputeNode]:
    """Return every compute node that is not deleted, ordered by id."""
    nodes = context.session.scalars(
        sa.select(models.ComputeNode).filter_by(deleted_at=None)
        .order_by(models.ComputeNode.id))
    return [records.ComputeNode.from_row(node.to_dict()) for node in nodes]


@context_manager.writer
def compute_node_update(context, compute_id: int,
                        values: dict) -> records.ComputeNode:
    """Update the compute node with id ``compute_id`` and return it."""
    node = context.session.get(models.ComputeNode, compute_id)
    if node is None or node.deleted_at is not None:
        raise exception.ComputeHostNotFound(node=compute_id)
    merged = {'hypervisor_hostname': node.hypervisor_hostname,
              'uuid': node.uuid, **values}
    return records.ComputeNode.from_row(_update_row(
        context.session, node, values, _compute_node_exists(merged),
        _service_missing(values)))


# PCI devices ---------------------------------------------------------------

def _pci_device_exists(values: dict):
    return lambda columns: exception.PciDeviceExists(
        address=values.get('address'),
        compute_node_id=values.get('compute_node_id'))


@context_manager.reader
def pci_device_get_all_by_node(context, compute_node_id: int) -> list[dict]:
    """Return the PCI devices of one compute node, ordered by address."""
    devices = context.session.scalars(
        sa.select(models.PciDevice)
        .filter_by(compute_node_id=compute_node_id)
        .order_by(models.PciDevice.address))
    return [device.to_dict() for device in devices]


@context_manager.reader
def pci_device_get_all(context) -> list[dict]:
    """Return the PCI devices of every compute node, ordered by node and
    address (one query, for fleet-wide views)."""
    devices = context.session.scalars(
        sa.select(models.PciDevice)
        .order_by(models.PciDevice.compute_node_id,
                  models.PciDevice.address))
    return [device.to_dict() for device in devices]


@context_manager.writer
def pci_device_create(context, values: dict) -> dict:
    """Create a PCI device row; PciDeviceExists if node+address is taken
    and ComputeHostNotFound if the compute node does not exist."""
    _check_fields(models.PciDevice, values)
    device = models.PciDevice(**values)
    context.session.add(device)
    _flush(context.session, _pci_device_exists(values),
           lambda: exception.ComputeHostNotFound(
               node=values.get('compute_node_id')))
    return device.to_dict()


@context_manager.writer
def pci_device_update(context, device_id: int, values: dict) -> dict:
    """Update the PCI device with id ``device_id`` and return it."""
    device = context.session.get(models.PciDevice, device_id)
    if device is None:
        raise exception.PciDeviceNotFoundById(id=device_id)
    merged = {'address': device.address,
              'compute_node_id': device.compute_node_id, **values}
    return _update_row(context.session, device, values,
                       _pci_device_exists(merged),
                       lambda: exception.ComputeHostNotFound(
                           node=merged['compute_node_id']))


@context_manager.writer
def pci_device_destroy(context, device_id: int) -> None:
    """Delete the PCI device row with id ``device_id``."""
    device = context.session.get(models.PciDevice, device_id)
    if device is None:
        raise exception.PciDeviceNotFoundById(id=device_id)
    context.session.delete(device)
    context.session.flush()


@context_manager.writer
def pci_device_health_event_create(context, values: dict) -> dict:
    """Record one change of a PCI device's health (the audit trail)."""
    _check_fields(models.PciDeviceHealthEvent, values)
    event = models.PciDeviceHealthEvent(**values)
    context.session.add(event)
    context.session.flush()
    return event.to_dict()


@context_manager.reader
def pci_device_health_events_get(context, compute_node_id: int,
                                 address: str | None = None) -> list[dict]:
    """The health changes of one compute node's devices (of one device
    if ``address``), oldest first."""
    query = sa.select(models.PciDeviceHealthEvent).filter_by(
        compute_node_id=compute_node_id)
    if address is not None:
        query = query.filter_by(address=address)
    return [event.to_dict() for event in context.session.scalars(
        query.order_by(models.PciDeviceHealthEvent.id))]


# Flavors -------------------------------------------------------------------

def _flavor_exists(values: dict):
    def build(columns):
        field = next((c for c in columns if c in ('flavorid', 'name')),
                     'name')
        return exception.FlavorExists(field=field, value=values.get(field))
    return build


def _flavor_row(session, flavorid: str) -> models.Flavor:
    flavor = session.scalars(
        sa.select(models.Flavor).filter_by(flavorid=flavorid)).first()
    if flavor is None:
        raise exception.FlavorNotFound(flavor_id=flavorid)
    return flavor


def _extra_specs(session, flavor_id: int) -> dict[str, str]:
    specs = session.scalars(
        sa.select(models.FlavorExtraSpec).filter_by(flavor_id=flavor_id))
    return {spec.key: spec.value for spec in specs}


def _flavor_record(session, flavor: models.Flavor) -> records.Flavor:
    return records.Flavor.from_row(
        {**flavor.to_dict(),
         'extra_specs': _extra_specs(session, flavor.id)})


@context_manager.writer
def flavor_create(context, values: dict,
                  extra_specs: dict[str, str] | None = None
                  ) -> records.Flavor:
    """Create a flavor (a uuid ``flavorid`` unless given) with its extra
    specs; FlavorExists names the taken ``flavorid`` or ``name``."""
    _check_fields(models.Flavor, values)
    values = {'flavorid': uuidutils.generate_uuid(), **values}
    flavor = models.Flavor(**values)
    context.session.add(flavor)
    _flush(context.session, _flavor_exists(values))
    for key, value in (extra_specs or {}).items():
        context.session.add(models.FlavorExtraSpec(
            flavor_id=flavor.id, key=key, value=value))
    context.session.flush()
    return _flavor_record(context.session, flavor)


@context_manager.reader
def flavor_get_by_flavorid(context, flavorid: str) -> records.Flavor:
    """Return the flavor with public id ``flavorid``, with extra_specs."""
    return _flavor_record(context.session,
                          _flavor_row(context.session, flavorid))


@context_manager.reader
def flavor_get_all(context, is_public: bool | None = None
                   ) -> list[records.Flavor]:
    """Return all flavors (only public or private ones if ``is_public`` is
    set), ordered by creation, each with extra_specs."""
    query = sa.select(models.Flavor).order_by(models.Flavor.id)
    if is_public is not None:
        query = query.filter_by(is_public=is_public)
    return [_flavor_record(context.session, flavor)
            for flavor in context.session.scalars(query)]


@context_manager.writer
def flavor_destroy(context, flavorid: str) -> None:
    """Delete a flavor and its extra specs (instances keep snapshots)."""
    flavor = _flavor_row(context.session, flavorid)
    context.session.execute(sa.delete(models.FlavorExtraSpec).filter_by(
        flavor_id=flavor.id))
    context.session.delete(flavor)
    context.session.flush()


@context_manager.reader
def flavor_extra_specs_get(context, flavorid: str) -> dict[str, str]:
    """Return the extra specs of a flavor as a dict."""
    flavor = _flavor_row(context.session, flavorid)
    return _extra_specs(context.session, flavor.id)


@context_manager.writer
def flavor_extra_specs_update_or_create(context, flavorid: str,
                                        specs: dict[str, str]
                                        ) -> dict[str, str]:
    """Set the given extra specs (others are kept); return all of them."""
    flavor = _flavor_row(context.session, flavorid)
    existing = {spec.key: spec for spec in context.session.scalars(
        sa.select(models.FlavorExtraSpec).filter_by(flavor_id=flavor.id))}
    for key, value in specs.items():
        if key in existing:
            existing[key].value = value
        else:
            context.session.add(models.FlavorExtraSpec(
                flavor_id=flavor.id, key=key, value=value))
    context.session.flush()
    return _extra_specs(context.session, flavor.id)


@context_manager.writer
def flavor_extra_specs_delete(context, flavorid: str, key: str) -> None:
    """Delete one extra spec; FlavorExtraSpecNotFound if it is not set."""
    flavor = _flavor_row(context.session, flavorid)
    result = context.session.execute(
        sa.delete(models.FlavorExtraSpec).filter_by(flavor_id=flavor.id,
                                                    key=key))
    if result.rowcount == 0:
        raise exception.FlavorExtraSpecNotFound(flavor_id=flavorid, key=key)


# Instances -----------------------------------------------------------------

def _instance_query(uuid: str, read_deleted: bool = False):
    query = sa.select(models.Instance).filter_by(uuid=uuid)
    if not read_deleted:
        query = query.filter_by(deleted_at=None)
    return query


def _matches(column, expected: Any):
    """SQL condition: ``column`` equals ``expected`` or one of its items
    (a list or tuple); None matches NULL."""
    choices = (list(expected) if isinstance(expected, (list, tuple))
               else [expected])
    conditions = []
    if None in choices:
        conditions.append(column.is_(None))
    values = [choice for choice in choices if choice is not None]
    if values:
        conditions.append(column.in_(values))
    return sa.or_(*conditions)


@context_manager.writer
def instance_create(context, values: dict) -> records.Instance:
    """Create an instance (a fresh uuid unless given); ``values`` may
    hold a ``FlavorSnapshot`` and typed PCI requests."""
    _check_fields(models.Instance, values)
    values = {'uuid': uuidutils.generate_uuid(),
              **records.column_values(values)}
    instance = models.Instance(**values)
    context.session.add(instance)
    _flush(context.session,
           lambda columns: exception.InstanceExists(uuid=values['uuid']))
    return records.Instance.from_row(instance.to_dict())


def _instance_row(context, uuid: str, read_deleted: bool = False) -> dict:
    instance = context.session.scalars(
        _instance_query(uuid, read_deleted)).first()
    if instance is None:
        raise exception.InstanceNotFound(instance_id=uuid)
    return instance.to_dict()


@context_manager.reader
def instance_get_by_uuid(context, uuid: str,
                         read_deleted: bool = False) -> records.Instance:
    """Return one instance; deleted ones only with ``read_deleted``."""
    return records.Instance.from_row(
        _instance_row(context, uuid, read_deleted))


@context_manager.reader
def instance_get_all(context, filters: dict | None = None,
                     read_deleted: bool = False) -> list[records.Instance]:
    """Return instances, oldest first.

    ``filters`` maps column names to a value or a list of accepted values,
    e.g. ``{'project_id': 'p1', 'vm_state': ['active', 'error']}``.
    """
    filters = filters or {}
    _check_fields(models.Instance, filters)
    query = sa.select(models.Instance).order_by(models.Instance.id)
    if not read_deleted:
        query = query.filter_by(deleted_at=None)
    for key, expected in filters.items():
        query = query.where(_matches(getattr(models.Instance, key),
                                     expected))
    return [records.Instance.from_row(instance.to_dict())
            for instance in context.session.scalars(query)]


@context_manager.writer
def instance_update(context, uuid: str, values: dict,
                    expected: dict | None = None) -> records.Instance:
    """Update an instance and return it; ``values`` may hold a
    ``FlavorSnapshot`` and typed PCI requests.

    ``expected`` maps columns to the value (or list of values) they must
    have for the update to happen, e.g. ``{'task_state': [None]}``; the
    check and the update are one UPDATE statement, so concurrent callers
    cannot both win. A mismatch raises InstanceUpdateConflict.
    """
    expected = expected or {}
    _check_fields(models.Instance, values)
    _check_fields(models.Instance, expected)
    statement = sa.update(models.Instance).where(
        models.Instance.uuid == uuid,
        models.Instance.deleted_at.is_(None))
    for key, value in expected.items():
        statement = statement.where(_matches(getattr(models.Instance, key),
                                             value))
    if values:
        statement = statement.values(**records.column_values(values))
    else:
        # Nothing to change: still run the conditional statement so a
        # mismatch is detected, by touching only updated_at.
        statement = statement.values(updated_at=timeutils.utcnow())
    result = context.session.execute(
        statement.execution_options(synchronize_session=False))
    if result.rowcount == 0 and expected:
        # Not updated: either the instance is gone (NotFound) or a value
        # differed; report the differing one (or the first, if another
        # writer changed it back meanwhile).
        current = _instance_row(context, uuid)
        choices = {key: list(value) if isinstance(value, (list, tuple))
                   else [value] for key, value in expected.items()}
        field = next((key for key in choices
                      if current[key] not in choices[key]),
                     next(iter(choices)))
        raise exception.InstanceUpdateConflict(
            uuid=uuid, field=field, actual=current[field],
            expected=choices[field])
    context.session.expire_all()
    return instance_get_by_uuid(context, uuid)


@context_manager.writer
def instance_destroy(context, uuid: str) -> records.Instance:
    """Soft-delete an instance (sets ``deleted_at``; the row stays for
    ``read_deleted`` readers) and return its last state."""
    instance = context.session.scalars(_instance_query(uuid)).first()
    if instance is None:
        raise exception.InstanceNotFound(instance_id=uuid)
    instance.deleted_at = timeutils.utcnow()
    # A deleted server leaves its server group.
    context.session.execute(sa.delete(models.InstanceGroupMember).where(
        models.InstanceGroupMember.instance_uuid == uuid))
    context.session.flush()
    return records.Instance.from_row(instance.to_dict())


# Build leases ----------------------------------------------------------------

def _waiting_for_host():
    """SQL condition: a live instance waiting for a conductor to find it
    a host: a build in ``scheduling`` or an unshelve of an offloaded
    server in ``unshelving``."""
    instance = models.Instance
    return sa.and_(
        instance.deleted_at.is_(None),
        sa.or_(*(sa.and_(instance.vm_state == vm_state,
                         instance.task_state == task_state)
                 for vm_state, task_state in
                 states.WAITING_FOR_HOST.items())))


def _orphaned_build(stale_before):
    """SQL condition: a build (or unshelve) waiting for a host that
    nobody drives any more.

    Unowned and handed over before ``stale_before`` (nova-api stopped
    before it handed it over: the handover time is ``build_heartbeat``,
    which nova-api sets when it accepts an unshelve, else ``created_at``),
    or owned with a heartbeat older than it.
    """
    instance = models.Instance
    return sa.and_(
        _waiting_for_host(),
        sa.or_(
            sa.and_(instance.build_owner.is_(None),
                    sa.func.coalesce(instance.build_heartbeat,
                                     instance.created_at) < stale_before),
            sa.and_(instance.build_owner.is_not(None),
                    sa.or_(instance.build_heartbeat.is_(None),
                           instance.build_heartbeat < stale_before))))


@context_manager.writer
def instance_build_lease_take(context, uuid: str, owner: str,
                              stale_before, any_unowned: bool = False
                              ) -> bool:
    """Make ``owner`` the driver of a build; True if it won.

    A compare-and-swap in one UPDATE, so of several conductors trying at
    once exactly one wins. Only builds in ``scheduling`` (or unshelves in
    ``unshelving``) can be taken, and only if orphaned (see
    ``_orphaned_build``) or, with ``any_unowned``, not yet owned at all
    (the conductor that received the build request).
    Taking a build clears a host an earlier owner recorded: a compute
    that has not started spawning then refuses to.
    """
    condition = _orphaned_build(stale_before)
    if any_unowned:
        condition = sa.or_(condition, sa.and_(
            _waiting_for_host(), models.Instance.build_owner.is_(None)))
    result = context.session.execute(
        sa.update(models.Instance)
        .where(models.Instance.uuid == uuid, condition)
        .values(build_owner=owner, build_heartbeat=timeutils.utcnow(),
                host=None, node=None)
        .execution_options(synchronize_session=False))
    return result.rowcount == 1


@context_manager.writer
def instance_build_lease_renew(context, owner: str,
                               uuids: Iterable[str]) -> int:
    """Renew ``owner``'s leases on the given builds; how many it holds."""
    uuids = list(uuids)
    if not uuids:
        return 0
    result = context.session.execute(
        sa.update(models.Instance)
        .where(models.Instance.uuid.in_(uuids),
               models.Instance.build_owner == owner,
               models.Instance.deleted_at.is_(None))
        .values(build_heartbeat=timeutils.utcnow())
        .execution_options(synchronize_session=False))
    return result.rowcount


@context_manager.reader
def instance_get_orphaned_builds(context, stale_before) -> list[str]:
    """UUIDs of builds nobody drives (see ``_orphaned_build``), oldest
    first."""
    return list(context.session.scalars(
        sa.select(models.Instance.uuid)
        .where(_orphaned_build(stale_before))
        .order_by(models.Instance.id)))


# Instance actions ----------------------------------------------------------

@context_manager.writer
def action_start(context, values: dict) -> dict:
    """Record the start of an instance action (see
    ``nova.compute.instance_actions``) and return it."""
    _check_fields(models.InstanceAction, values)
    action = models.InstanceAction(**values)
    context.session.add(action)
    context.session.flush()
    return action.to_dict()


def _action_row(session, instance_uuid: str, request_id: str
                ) -> models.InstanceAction | None:
    """The newest action of ``instance_uuid`` made by ``request_id``."""
    return session.scalars(
        sa.select(models.InstanceAction)
        .filter_by(instance_uuid=instance_uuid, request_id=request_id)
        .order_by(models.InstanceAction.id.desc())).first()


@context_manager.reader
def action_get_by_request_id(context, instance_uuid: str,
                             request_id: str) -> dict:
    """The action ``request_id`` made on the instance;
    InstanceActionNotFound if there is none."""
    action = _action_row(context.session, instance_uuid, request_id)
    if action is None:
        raise exception.InstanceActionNotFound(
            request_id=request_id, instance_uuid=instance_uuid)
    return action.to_dict()


@context_manager.reader
def actions_get(context, instance_uuid: str) -> list[dict]:
    """Every action of an instance, newest first."""
    actions = context.session.scalars(
        sa.select(models.InstanceAction)
        .filter_by(instance_uuid=instance_uuid)
        .order_by(models.InstanceAction.start_time.desc(),
                  models.InstanceAction.id.desc()))
    return [action.to_dict() for action in actions]


@context_manager.writer
def action_event_start(context, instance_uuid: str, request_id: str,
                       values: dict) -> dict | None:
    """Record the start of one step of the action ``request_id`` made on
    the instance; None (nothing recorded) if there is no such action."""
    _check_fields(models.InstanceActionEvent, values)
    action = _action_row(context.session, instance_uuid, request_id)
    if action is None:
        return None
    event = models.InstanceActionEvent(action_id=action.id, **values)
    context.session.add(event)
    context.session.flush()
    return event.to_dict()


@context_manager.writer
def action_event_finish(context, event_id: int, values: dict,
                        failed: bool) -> dict:
    """Record the end of a step; the action then ends at the same time
    (its latest step) and, if the step ``failed``, is marked 'Error'."""
    event = context.session.get(models.InstanceActionEvent, event_id)
    if event is None:
        raise exception.InstanceActionEventNotFound(event_id=event_id)
    _update_row(context.session, event, values, None)
    action = context.session.get(models.InstanceAction, event.action_id)
    action.finish_time = values.get('finish_time', action.finish_time)
    if failed:
        action.message = 'Error'
    context.session.flush()
    return event.to_dict()


@context_manager.reader
def action_events_get(context, action_id: int) -> list[dict]:
    """The steps of one action, newest first."""
    events = context.session.scalars(
        sa.select(models.InstanceActionEvent)
        .filter_by(action_id=action_id)
        .order_by(models.InstanceActionEvent.start_time.desc(),
                  models.InstanceActionEvent.id.desc()))
    return [event.to_dict() for event in events]


# Migrations ------------------------------------------------------------------

@context_manager.writer
def migration_create(context, values: dict) -> records.Migration:
    """Create a migration record (a fresh uuid unless given)."""
    _check_fields(models.Migration, values)
    values = {'uuid': uuidutils.generate_uuid(),
              **records.column_values(values)}
    migration = models.Migration(**values)
    context.session.add(migration)
    _flush(context.session,
           lambda columns: exception.MigrationExists(uuid=values['uuid']))
    return records.Migration.from_row(migration.to_dict())


@context_manager.reader
def migration_get_by_uuid(context, uuid: str) -> records.Migration:
    """Return one migration; MigrationNotFound if there is none."""
    migration = context.session.scalars(
        sa.select(models.Migration).filter_by(uuid=uuid)).first()
    if migration is None:
        raise exception.MigrationNotFound(migration_id=uuid)
    return records.Migration.from_row(migration.to_dict())


@context_manager.reader
def migration_get_all(context, filters: dict | None = None
                      ) -> list[records.Migration]:
    """Return migrations, newest first; ``filters`` as for
    ``instance_get_all`` (a value or a list of accepted values)."""
    filters = filters or {}
    _check_fields(models.Migration, filters)
    query = sa.select(models.Migration).order_by(models.Migration.id.desc())
    for key, expected in filters.items():
        query = query.where(_matches(getattr(models.Migration, key),
                                     expected))
    return [records.Migration.from_row(migration.to_dict())
            for migration in context.session.scalars(query)]


@context_manager.reader
def migration_get_in_progress(context, instance_uuids: Iterable[str] | None
                              = None, host: str | None = None
                              ) -> list[records.Migration]:
    """Migrations not yet in a final status, newest first: of the given
    instances, and/or with ``host`` as source or destination."""
    query = sa.select(models.Migration).where(
        models.Migration.status.not_in(states.MIGRATION_FINAL_STATUSES),
        models.Migration.deleted_at.is_(None)).order_by(
            models.Migration.id.desc())
    if instance_uuids is not None:
        query = query.where(models.Migration.instance_uuid.in_(
            sorted(set(instance_uuids))))
    if host is not None:
        query = query.where(sa.or_(models.Migration.source_compute == host,
                                   models.Migration.dest_compute == host))
    return [records.Migration.from_row(migration.to_dict())
            for migration in context.session.scalars(query)]


@context_manager.writer
def migration_update(context, uuid: str, values: dict,
                     expected_status: str | list | None = None
                     ) -> records.Migration:
    """Update a migration and return it.

    With ``expected_status`` the check and the update are one statement,
    so of concurrent callers (a confirm racing a revert) exactly one wins;
    the loser gets MigrationUpdateConflict naming the actual status.
    """
    _check_fields(models.Migration, values)
    statement = sa.update(models.Migration).where(
        models.Migration.uuid == uuid)
    if expected_status is not None:
        statement = statement.where(_matches(models.Migration.status,
                                             expected_status))
    statement = statement.values(updated_at=timeutils.utcnow(),
                                 **records.column_values(values))
    result = context.session.execute(
        statement.execution_options(synchronize_session=False))
    if result.rowcount == 0:
        current = migration_get_by_uuid(context, uuid)
        raise exception.MigrationUpdateConflict(
            uuid=uuid, actual=current.status, expected=expected_status)
    context.session.expire_all()
    return migration_get_by_uuid(context, uuid)


@context_manager.writer
def instance_move_lease_take(context, uuid: str, owner: str,
                             stale_before) -> bool:
    """Make ``owner`` the conductor driving a move of the instance; True
    if it won.

    Moves use the build lease columns of an instance that is not
    building. The API hands a move over with no owner; a conductor takes
    it from there, or from an owner that stopped renewing (heartbeat
    before ``stale_before``: it died mid-move, or nobody took the move
    the API handed over). One UPDATE, so of several conductors (or a late
    message and a takeover) exactly one wins.
    """
    instance = models.Instance
    result = context.session.execute(
        sa.update(instance)
        .where(instance.uuid == uuid, instance.deleted_at.is_(None),
               instance.vm_state != states.BUILDING,
               sa.or_(instance.build_owner.is_(None),
                      instance.build_heartbeat.is_(None),
                      instance.build_heartbeat < stale_before))
        .values(build_owner=owner, build_heartbeat=timeutils.utcnow())
        .execution_options(synchronize_session=False))
    return result.rowcount == 1


@context_manager.reader
def migration_get_orphaned(context, stale_before
                           ) -> list[records.Migration]:
    """Moves a conductor was driving whose instance's lease expired
    (the conductor died mid-move), oldest first."""
    instance = models.Instance
    query = (sa.select(models.Migration)
             .join(instance, instance.uuid == models.Migration.instance_uuid)
             .where(
                 models.Migration.status.in_(
                     states.MIGRATION_DRIVEN_STATUSES),
                 instance.deleted_at.is_(None),
                 sa.or_(instance.build_heartbeat.is_(None),
                        instance.build_heartbeat < stale_before))
             .order_by(models.Migration.id))
    return [records.Migration.from_row(migration.to_dict())
            for migration in context.session.scalars(query)]


# Pending allocation frees ---------------------------------------------------

@context_manager.writer
def pending_free_add(context, consumer_uuid: str,
                     host: str | None) -> None:
    """Record that ``consumer_uuid``'s Placement allocation must still be
    deleted (by the compute of ``host``); recording it twice is fine."""
    exists = context.session.scalars(sa.select(models.PendingFree).filter_by(
        consumer_uuid=consumer_uuid)).first()
    if exists is None:
        context.session.add(models.PendingFree(consumer_uuid=consumer_uuid,
                                               host=host))


@context_manager.reader
def pending_free_get_all(context, host: str | None = None,
                         with_unhosted: bool = False) -> list[dict]:
    """Pending frees, oldest first: all of them, or those of ``host``
    (and, with ``with_unhosted``, those recorded without a host)."""
    query = sa.select(models.PendingFree).order_by(models.PendingFree.id)
    if host is not None:
        hosts = models.PendingFree.host == host
        if with_unhosted:
            hosts = hosts | models.PendingFree.host.is_(None)
        query = query.where(hosts)
    return [row.to_dict() for row in context.session.scalars(query)]


@context_manager.writer
def pending_free_delete(context, consumer_uuid: str) -> None:
    """Forget a pending free once its allocation is gone."""
    context.session.execute(sa.delete(models.PendingFree).where(
        models.PendingFree.consumer_uuid == consumer_uuid))


# Key pairs -------------------------------------------------------------------

def _key_pair_query(user_id: str, name: str | None = None):
    query = sa.select(models.KeyPair).filter_by(user_id=user_id)
    if name is not None:
        query = query.filter_by(name=name)
    return query


@context_manager.writer
def key_pair_create(context, values: dict) -> records.KeyPair:
    """Store a user's key pair; KeyPairExists if the user has the name."""
    _check_fields(models.KeyPair, values)
    row = models.KeyPair(**values)
    context.session.add(row)
    _flush(context.session,
           lambda columns: exception.KeyPairExists(key_name=values['name']))
    return records.KeyPair.from_row(row.to_dict())


@context_manager.reader
def key_pair_get(context, user_id: str, name: str) -> records.KeyPair:
    """One key pair of a user; KeypairNotFound if the user has none so
    named."""
    row = context.session.scalars(_key_pair_query(user_id, name)).first()
    if row is None:
        raise exception.KeypairNotFound(name=name, user_id=user_id)
    return records.KeyPair.from_row(row.to_dict())


@context_manager.reader
def key_pair_get_all_by_user(context,
                             user_id: str) -> list[records.KeyPair]:
    """A user's key pairs, by name."""
    rows = context.session.scalars(
        _key_pair_query(user_id).order_by(models.KeyPair.name))
    return [records.KeyPair.from_row(row.to_dict()) for row in rows]


@context_manager.writer
def key_pair_destroy(context, user_id: str, name: str) -> None:
    """Delete a user's key pair; KeypairNotFound if there is none."""
    deleted = context.session.execute(sa.delete(models.KeyPair).where(
        models.KeyPair.user_id == user_id,
        models.KeyPair.name == name)).rowcount
    if not deleted:
        raise exception.KeypairNotFound(name=name, user_id=user_id)


# Server groups ---------------------------------------------------------------

def _group_record(session, group: models.InstanceGroup
                  ) -> records.ServerGroup:
    """The group's record with its live members (deleted instances left
    out), oldest member first."""
    member, instance = models.InstanceGroupMember, models.Instance
    rows = session.execute(
        sa.select(member.instance_uuid, member.host, instance.host,
                  instance.task_state)
        .join(instance, sa.and_(instance.uuid == member.instance_uuid,
                                instance.deleted_at.is_(None)))
        .where(member.group_id == group.id)
        .order_by(member.id)).all()
    return records.ServerGroup.from_row(group.to_dict(), tuple(
        records.ServerGroupMember(instance_uuid=uuid, placed_host=placed,
                                  host=host, task_state=task_state)
        for uuid, placed, host, task_state in rows))


def _group_row(session, uuid: str) -> models.InstanceGroup:
    group = session.scalars(
        sa.select(models.InstanceGroup).filter_by(uuid=uuid)).first()
    if group is None:
        raise exception.InstanceGroupNotFound(group_uuid=uuid)
    return group


@context_manager.writer
def instance_group_create(context, values: dict) -> records.ServerGroup:
    """Create a server group (a fresh uuid unless given)."""
    _check_fields(models.InstanceGroup, values)
    group = models.InstanceGroup(**values)
    context.session.add(group)
    _flush(context.session, lambda columns: exception.Conflict(
        reason='server group %s already exists' % values.get('uuid')))
    return _group_record(context.session, group)


@context_manager.reader
def instance_group_get(context, uuid: str) -> records.ServerGroup:
    """One server group; InstanceGroupNotFound if there is none."""
    return _group_record(context.session,
                         _group_row(context.session, uuid))


@context_manager.reader
def instance_group_get_all(context, project_id: str | None = None
                           ) -> list[records.ServerGroup]:
    """Server groups, oldest first: every project's, or ``project_id``'s.
    """
    query = sa.select(models.InstanceGroup).order_by(models.InstanceGroup.id)
    if project_id is not None:
        query = query.filter_by(project_id=project_id)
    return [_group_record(context.session, group)
            for group in context.session.scalars(query)]


@context_manager.reader
def instance_group_get_by_instance(context, instance_uuid: str
                                   ) -> records.ServerGroup | None:
    """The server group the instance is a member of, or None."""
    group = context.session.scalars(
        sa.select(models.InstanceGroup)
        .join(models.InstanceGroupMember,
              models.InstanceGroupMember.group_id == models.InstanceGroup.id)
        .where(models.InstanceGroupMember.instance_uuid == instance_uuid)
    ).first()
    return None if group is None else _group_record(context.session, group)


@context_manager.writer
def instance_group_delete(context, uuid: str) -> None:
    """Delete a server group; its servers leave it and keep running.
    InstanceGroupNotFound if there is none."""
    group = _group_row(context.session, uuid)
    context.session.execute(sa.delete(models.InstanceGroupMember).where(
        models.InstanceGroupMember.group_id == group.id))
    context.session.delete(group)
    context.session.flush()


@context_manager.writer
def instance_group_member_add(context, group_uuid: str,
                              instance_uuid: str) -> None:
    """Make the instance a member of the group; InstanceGroupNotFound if
    the group is gone."""
    group = _group_row(context.session, group_uuid)
    context.session.add(models.InstanceGroupMember(
        group_id=group.id, instance_uuid=instance_uuid))
    _flush(context.session, lambda columns: exception.Conflict(
        reason='instance %s is in a server group already' % instance_uuid))


@context_manager.writer
def instance_group_place(context, group_uuid: str, generation: int,
                         instance_uuid: str, host: str) -> bool:
    """Record that the scheduler placed the member ``instance_uuid`` on
    ``host``, if the group is still at ``generation`` (what the decision
    read); True if it was recorded. A compare-and-swap in one UPDATE: of
    concurrent placements in one group decided on the same state, exactly
    one is recorded, and the others decide again on the new state."""
    group = models.InstanceGroup
    result = context.session.execute(
        sa.update(group)
        .where(group.uuid == group_uuid, group.generation == generation)
        .values(generation=generation + 1, updated_at=timeutils.utcnow())
        .execution_options(synchronize_session=False))
    if result.rowcount != 1:
        return False
    context.session.execute(
        sa.update(models.InstanceGroupMember)
        .where(models.InstanceGroupMember.instance_uuid == instance_uuid)
        .values(host=host, updated_at=timeutils.utcnow())
        .execution_options(synchronize_session=False))
    return True


# Quotas ----------------------------------------------------------------------
# A project's own limits have user_id '' in the quotas table (see
# models.Quota); callers say None.

@context_manager.reader
def quota_get_all(context, project_id: str,
                  user_id: str | None = None) -> list[records.QuotaLimit]:
    """The limits set for a project (``user_id`` None) or for one user
    in it, by resource."""
    rows = context.session.scalars(sa.select(models.Quota).where(
        models.Quota.project_id == project_id,
        models.Quota.user_id == (user_id or '')).order_by(
            models.Quota.resource))
    return [records.QuotaLimit(resource=row.resource,
                               hard_limit=row.hard_limit,
                               project_id=row.project_id,
                               user_id=row.user_id or None)
            for row in rows]


def _set_limits(session, model: type[models.Base], key: dict,
                limits: dict[str, int]) -> None:
    """Insert or update the ``limits`` (resource -> limit) rows of
    ``model`` whose ``key`` columns have the given values."""
    existing = {row.resource: row for row in session.scalars(
        sa.select(model).filter_by(**key).where(
            model.resource.in_(sorted(limits))))}
    for resource, limit in limits.items():
        row = existing.get(resource)
        if row is None:
            session.add(model(resource=resource, hard_limit=limit, **key))
        else:
            row.hard_limit = limit
    _flush(session, lambda columns: exception.Conflict(
        reason='another request set limits of %s at the same time; '
               'retry' % ', '.join(sorted(limits))))


@context_manager.writer
def quota_set(context, project_id: str, limits: dict[str, int],
              user_id: str | None = None) -> None:
    """Set limits (resource -> limit) of a project or of a user in it,
    all in one transaction."""
    _set_limits(context.session, models.Quota,
                {'project_id': project_id, 'user_id': user_id or ''}, limits)


@context_manager.writer
def quota_destroy_all(context, project_id: str,
                      user_id: str | None = None) -> None:
    """Forget the limits of a project (its users' too) or, with
    ``user_id``, of one user in it: the defaults apply again."""
    statement = sa.delete(models.Quota).where(
        models.Quota.project_id == project_id)
    if user_id is not None:
        statement = statement.where(models.Quota.user_id == user_id)
    context.session.execute(statement)


@context_manager.reader
def quota_class_get_all(context,
                        class_name: str) -> list[records.QuotaLimit]:
    """The limits set for a quota class, by resource."""
    rows = context.session.scalars(sa.select(models.QuotaClass).where(
        models.QuotaClass.class_name == class_name).order_by(
            models.QuotaClass.resource))
    return [records.QuotaLimit(resource=row.resource,
                               hard_limit=row.hard_limit,
                               class_name=row.class_name)
            for row in rows]


@context_manager.writer
def quota_class_set(context, class_name: str,
                    limits: dict[str, int]) -> None:
    """Set limits (resource -> limit) of a quota class in one
    transaction."""
    _set_limits(context.session, models.QuotaClass,
                {'class_name': class_name}, limits)


def _insert_ignoring_duplicate(session, model: type[models.Base],
                               values: dict) -> None:
    """INSERT a row unless its key exists, in the backend's words."""
    dialect = session.get_bind().dialect.name
    if dialect == 'mysql':
        statement = mysql_dialect.insert(model).values(
            **values).prefix_with('IGNORE')
    elif dialect == 'postgresql':
        statement = postgresql_dialect.insert(model).values(
            **values).on_conflict_do_nothing()
    else:
        statement = sqlite_dialect.insert(model).values(
            **values).on_conflict_do_nothing()
    session.execute(statement)


@context_manager.writer.independent
def _quota_lock_row(context, project_id: str) -> None:
    """Make sure the project's quota lock row exists (committed at once,
    in a transaction of its own, so concurrent first creators of a
    project do not deadlock on MariaDB's gap locks)."""
    _insert_ignoring_duplicate(context.session, models.QuotaLock,
                               {'project_id': project_id,
                                'created_at': timeutils.utcnow()})


@contextlib.contextmanager
def quota_locked(context, project_id: str) -> Iterator[None]:
    """A writer transaction holding the project's quota lock: concurrent
    quota checks of one project wait for each other until it ends (the
    database calls made inside join it). On SQLite the writer
    transaction holds the database's write lock already."""
    _quota_lock_row(context, project_id)
    with context_manager.writer.using(context):
        context.session.execute(sa.select(models.QuotaLock.project_id).where(
            models.QuotaLock.project_id == project_id).with_for_update())
        yield

"""SQLAlchemy models of the nova database.

The schema itself is created by the alembic migrations in
``nova/db/migrations``; these classes must describe the same tables (a unit
test compares them). Timestamps are naive UTC datetimes.
"""

import datetime

from oslo_serialization import jsonutils
from oslo_utils import timeutils
from oslo_utils import uuidutils
import sqlalchemy as sa
from sqlalchemy import orm
from sqlalchemy import types

# Every table is InnoDB/utf8mb4 on MySQL and MariaDB.
_MYSQL_ARGS = {'mysql_engine': 'InnoDB', 'mysql_charset': 'utf8mb4'}


class JSONEncoded(types.TypeDecorator):
    """A JSON document stored as text, the same way on every backend."""

    impl = sa.Text
    cache_ok = True

    def process_bind_param(self, value, dialect):
        return None if value is None else jsonutils.dumps(value)

    def process_result_value(self, value, dialect):
        return None if value is None else jsonutils.loads(value)


def _utcnow() -> datetime.datetime:
    return timeutils.utcnow()


class Base(orm.DeclarativeBase):
    """Declarative base with the created/updated timestamps of every table."""

    created_at: orm.Mapped[datetime.datetime | None] = orm.mapped_column(
        sa.DateTime, default=_utcnow)
    updated_at: orm.Mapped[datetime.datetime | None] = orm.mapped_column(
        sa.DateTime, onupdate=_utcnow)

    def to_dict(self) -> dict:
        """Return the column values as a plain dict (no ORM state)."""
        return {column.key: getattr(self, column.key)
                for column in self.__table__.columns}


class Service(Base):
    """One running nova service (binary) on one host."""

    __tablename__ = 'services'
    __table_args__ = (
        sa.UniqueConstraint('host', 'binary',
                            name='uniq_services0host0binary'),
        sa.UniqueConstraint('uuid', name='uniq_services0uuid'),
        _MYSQL_ARGS,
    )

    id: orm.Mapped[int] = orm.mapped_column(sa.Integer, primary_key=True)
    # The service's id in the Compute API from microversion 2.53.
    uuid: orm.Mapped[str] = orm.mapped_column(
        sa.String(36), default=uuidutils.generate_uuid)
    host: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    binary: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    topic: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    # Disabled: the scheduler gives it no new instances.
    disabled: orm.Mapped[bool] = orm.mapped_column(sa.Boolean,
                                                   default=False)
    disabled_reason: orm.Mapped[str | None] = orm.mapped_column(
        sa.String(255))
    # Forced down by an operator: down whatever its heartbeats say.
    forced_down: orm.Mapped[bool] = orm.mapped_column(sa.Boolean,
                                                      default=False)
    report_count: orm.Mapped[int] = orm.mapped_column(sa.Integer, default=0)
    last_seen_up: orm.Mapped[datetime.datetime | None] = orm.mapped_column(
        sa.DateTime)


class ComputeNode(Base):
    """A hypervisor managed by a nova-compute service."""

    __tablename__ = 'compute_nodes'
    __table_args__ = (
        sa.UniqueConstraint('hypervisor_hostname',
                            name='uniq_compute_nodes0hypervisor_hostname'),
        sa.UniqueConstraint('uuid', name='uniq_compute_nodes0uuid'),
        _MYSQL_ARGS,
    )

    id: orm.Mapped[int] = orm.mapped_column(sa.Integer, primary_key=True)
    uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36))
    host: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    hypervisor_hostname: orm.Mapped[str] = orm.mapped_column(
        sa.String(255))
    vcpus: orm.Mapped[int] = orm.mapped_column(sa.Integer, default=0)
    memory_mb: orm.Mapped[int] = orm.mapped_column(sa.Integer, default=0)
    local_gb: orm.Mapped[int] = orm.mapped_column(sa.Integer, default=0)
    hypervisor_type: orm.Mapped[str | None] = orm.mapped_column(
        sa.String(255))
    service_id: orm.Mapped[int | None] = orm.mapped_column(
        sa.Integer, sa.ForeignKey('services.id',
                                  name='fk_compute_nodes_service_id'))
    deleted_at: orm.Mapped[datetime.datetime | None] = orm.mapped_column(
        sa.DateTime)


class PciDevice(Base):
    """A host PCI device that a device_spec makes assignable."""

    __tablename__ = 'pci_devices'
    __table_args__ = (
        sa.UniqueConstraint('compute_node_id', 'address',
                            name='uniq_pci_devices0compute_node_id0address'),
        sa.Index('ix_pci_devices_instance_uuid', 'instance_uuid'),
        _MYSQL_ARGS,
    )

    id: orm.Mapped[int] = orm.mapped_column(sa.Integer, primary_key=True)
    compute_node_id: orm.Mapped[int] = orm.mapped_column(
        sa.Integer, sa.ForeignKey('compute_nodes.id',
                                  name='fk_pci_devices_compute_node_id'))
    address: orm.Mapped[str] = orm.mapped_column(sa.String(16))
    vendor_id: orm.Mapped[str] = orm.mapped_column(sa.String(4))
    product_id: orm.Mapped[str] = orm.mapped_column(sa.String(4))
    dev_type: orm.Mapped[str] = orm.mapped_column(sa.String(8))
    dev_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    label: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    numa_node: orm.Mapped[int | None] = orm.mapped_column(sa.Integer)
    parent_addr: orm.Mapped[str | None] = orm.mapped_column(sa.String(16))
    status: orm.Mapped[str] = orm.mapped_column(sa.String(36),
                                                default='available')
    instance_uuid: orm.Mapped[str | None] = orm.mapped_column(sa.String(36))
    request_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(36))
    group_path: orm.Mapped[str] = orm.mapped_column(sa.String(255),
                                                    default='')
    rp_uuid: orm.Mapped[str | None] = orm.mapped_column(sa.String(36))
    extra_info: orm.Mapped[dict] = orm.mapped_column(JSONEncoded,
                                                     default=dict)
    # Whether the device is usable ('healthy' or 'unhealthy'), why not,
    # since when, and what said so (nova.pci.health).
    health: orm.Mapped[str] = orm.mapped_column(
        sa.String(16), default='healthy', server_default='healthy')
    health_reason: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    health_since: orm.Mapped[datetime.datetime | None] = orm.mapped_column(
        sa.DateTime)
    health_source: orm.Mapped[str | None] = orm.mapped_column(sa.String(32))


class PciDeviceHealthEvent(Base):
    """One change of a PCI device's health: the audit trail (who or what
    set it, why, and the instance holding the device then)."""

    __tablename__ = 'pci_device_health_events'
    __table_args__ = (
        sa.Index('ix_pci_device_health_events_node_address',
                 'compute_node_id', 'address'),
        _MYSQL_ARGS,
    )

    id: orm.Mapped[int] = orm.mapped_column(sa.Integer, primary_key=True)
    compute_node_id: orm.Mapped[int] = orm.mapped_column(sa.Integer)
    address: orm.Mapped[str] = orm.mapped_column(sa.String(16))
    health: orm.Mapped[str] = orm.mapped_column(sa.String(16))
    reason: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    source: orm.Mapped[str] = orm.mapped_column(sa.String(32))
    actor: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    instance_uuid: orm.Mapped[str | None] = orm.mapped_column(sa.String(36))


class Flavor(Base):
    """A size of server that users can request."""

    __tablename__ = 'flavors'
    __table_args__ = (
        sa.UniqueConstraint('flavorid', name='uniq_flavors0flavorid'),
        sa.UniqueConstraint('name', name='uniq_flavors0name'),
        _MYSQL_ARGS,
    )

    id: orm.Mapped[int] = orm.mapped_column(sa.Integer, primary_key=True)
    flavorid: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    name: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    vcpus: orm.Mapped[int] = orm.mapped_column(sa.Integer)
    memory_mb: orm.Mapped[int] = orm.mapped_column(sa.Integer)
    root_gb: orm.Mapped[int] = orm.mapped_column(sa.Integer, default=0)
    is_public: orm.Mapped[bool] = orm.mapped_column(sa.Boolean,
                                                    default=True)
    disabled: orm.Mapped[bool] = orm.mapped_column(sa.Boolean,
                                                   default=False)


class FlavorExtraSpec(Base):
    """One key/value extra spec of a flavor (e.g. pci_passthrough:alias)."""

    __tablename__ = 'flavor_extra_specs'
    __table_args__ = (
        sa.UniqueConstraint('flavor_id', 'key',
                            name='uniq_flavor_extra_specs0flavor_id0key'),
        _MYSQL_ARGS,
    )

    id: orm.Mapped[int] = orm.mapped_column(sa.Integer, primary_key=True)
    flavor_id: orm.Mapped[int] = orm.mapped_column(
        sa.Integer, sa.ForeignKey('flavors.id', ondelete='CASCADE',
                                  name='fk_flavor_extra_specs_flavor_id'))
    key: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    value: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))


class Instance(Base):
    """A server. ``flavor`` is the flavor as it was at boot (with extra
    specs), so deleting or changing the flavor never changes the server;
    ``flavor_id`` is therefore not a foreign key."""

    __tablename__ = 'instances'
    __table_args__ = (
        sa.UniqueConstraint('uuid', name='uniq_instances0uuid'),
        sa.Index('ix_instances_project_id', 'project_id'),
        sa.Index('ix_instances_host', 'host'),
        sa.Index('ix_instances_vm_state_task_state', 'vm_state',
                 'task_state'),
        _MYSQL_ARGS,
    )

    id: orm.Mapped[int] = orm.mapped_column(sa.Integer, primary_key=True)
    uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36))
    display_name: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    project_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    user_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    flavor_id: orm.Mapped[int | None] = orm.mapped_column(sa.Integer)
    flavor: orm.Mapped[dict | None] = orm.mapped_column(JSONEncoded)
    vm_state: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    task_state: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    power_state: orm.Mapped[int | None] = orm.mapped_column(sa.Integer)
    host: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    node: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    fault_message: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    fault_details: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    pci_requests: orm.Mapped[list | None] = orm.mapped_column(JSONEncoded)
    # The image the server boots from (see nova.compute.utils.root_disk).
    image_ref: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    # The image as it was when the server was built or rebuilt
    # (nova.image.glance.ImageMeta.to_primitive); None without an image.
    image_meta: orm.Mapped[dict | None] = orm.mapped_column(JSONEncoded)
    # The server's metadata (key -> string value), as the API shows it.
    server_metadata: orm.Mapped[dict | None] = orm.mapped_column(
        JSONEncoded)
    # Locked servers refuse actions from non-admins (see
    # nova.compute.api.check_lock); locked_by is 'owner' or 'admin'.
    locked: orm.Mapped[bool] = orm.mapped_column(
        sa.Boolean, default=False, server_default=sa.false())
    locked_by: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    locked_reason: orm.Mapped[str | None] = orm.mapped_column(
        sa.String(255))
    # The key pair named at boot and its public key as it was then, kept
    # with the server as upstream keeps them for the guest's metadata.
    key_name: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    key_data: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    # What the user says of the server (2.19), the addresses it says the
    # server is reached at, and the base64 user data it booted with.
    description: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    access_ip_v4: orm.Mapped[str | None] = orm.mapped_column(sa.String(39))
    access_ip_v6: orm.Mapped[str | None] = orm.mapped_column(sa.String(39))
    user_data: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    # One id for the servers of one create (min_count/max_count).
    reservation_id: orm.Mapped[str | None] = orm.mapped_column(
        sa.String(255))
    # The conductor driving the build and when it last renewed that lease
    # (nova.conductor.manager re-drives builds whose lease expired).
    build_owner: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    build_heartbeat: orm.Mapped[datetime.datetime | None] = \
        orm.mapped_column(sa.DateTime)
    deleted_at: orm.Mapped[datetime.datetime | None] = orm.mapped_column(
        sa.DateTime)


class KeyPair(Base):
    """A user's public key (``/os-keypairs``), named uniquely per user."""

    __tablename__ = 'key_pairs'
    __table_args__ = (
        sa.UniqueConstraint('user_id', 'name',
                            name='uniq_key_pairs0user_id0name'),
        _MYSQL_ARGS,
    )

    id: orm.Mapped[int] = orm.mapped_column(sa.Integer, primary_key=True)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    user_id: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    # 'ssh' or 'x509' (microversion 2.2).
    type: orm.Mapped[str] = orm.mapped_column(sa.String(16))
    fingerprint: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    public_key: orm.Mapped[str] = orm.mapped_column(sa.Text)


class InstanceAction(Base):
    """One request that acted on a server (create, reboot, shelve, ...),
    as ``GET /servers/{id}/os-instance-actions`` lists them."""

    __tablename__ = 'instance_actions'
    __table_args__ = (
        sa.Index('ix_instance_actions_instance_uuid_request_id',
                 'instance_uuid', 'request_id'),
        _MYSQL_ARGS,
    )

    id: orm.Mapped[int] = orm.mapped_column(sa.Integer, primary_key=True)
    action: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    instance_uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36))
    request_id: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    user_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    project_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    start_time: orm.Mapped[datetime.datetime] = orm.mapped_column(
        sa.DateTime)
    finish_time: orm.Mapped[datetime.datetime | None] = orm.mapped_column(
        sa.DateTime)
    # None while every step succeeded, 'Error' once one failed (upstream).
    message: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))


class InstanceActionEvent(Base):
    """One step a service ran for an instance action, and its result."""

    __tablename__ = 'instance_actions_events'
    __table_args__ = (
        sa.Index('ix_instance_actions_events_action_id', 'action_id'),
        _MYSQL_ARGS,
    )

    id: orm.Mapped[int] = orm.mapped_column(sa.Integer, primary_key=True)
    action_id: orm.Mapped[int] = orm.mapped_column(
        sa.Integer, sa.ForeignKey(
            'instance_actions.id',
            name='fk_instance_actions_events_action_id'))
    event: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    result: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    traceback: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    start_time: orm.Mapped[datetime.datetime] = orm.mapped_column(
        sa.DateTime)
    finish_time: orm.Mapped[datetime.datetime | None] = orm.mapped_column(
        sa.DateTime)
    host: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    details: orm.Mapped[str | None] = orm.mapped_column(sa.Text)


class Migration(Base):
    """One move of an instance between hosts (or within one): a resize,
    a cold migration or an evacuation, as upstream models it.

    While a resize or cold migration is in progress the migration's
    ``uuid`` is the Placement consumer holding the source allocation, so
    a revert always finds it still there. ``old_flavor``/``new_flavor``
    and ``old_pci_requests``/``new_pci_requests`` keep what each side was
    built with (upstream keeps them on the instance); the PCI request ids
    tell the source's device claims from the destination's on one host.
    """

    __tablename__ = 'migrations'
    __table_args__ = (
        sa.UniqueConstraint('uuid', name='uniq_migrations0uuid'),
        sa.Index('ix_migrations_instance_uuid', 'instance_uuid'),
        sa.Index('ix_migrations_status', 'status'),
        _MYSQL_ARGS,
    )

    id: orm.Mapped[int] = orm.mapped_column(sa.Integer, primary_key=True)
    uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36))
    instance_uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36))
    source_compute: orm.Mapped[str | None] = orm.mapped_column(
        sa.String(255))
    dest_compute: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    source_node: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    dest_node: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    dest_host: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    old_instance_type_id: orm.Mapped[int | None] = orm.mapped_column(
        sa.Integer)
    new_instance_type_id: orm.Mapped[int | None] = orm.mapped_column(
        sa.Integer)
    migration_type: orm.Mapped[str] = orm.mapped_column(sa.String(32))
    status: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    project_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    user_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    old_flavor: orm.Mapped[dict | None] = orm.mapped_column(JSONEncoded)
    new_flavor: orm.Mapped[dict | None] = orm.mapped_column(JSONEncoded)
    old_pci_requests: orm.Mapped[list | None] = orm.mapped_column(
        JSONEncoded)
    new_pci_requests: orm.Mapped[list | None] = orm.mapped_column(
        JSONEncoded)
    deleted_at: orm.Mapped[datetime.datetime | None] = orm.mapped_column(
        sa.DateTime)


class PendingFree(Base):
    """A Placement allocation nova must still delete: its consumer (an
    instance deleted or offloaded while Placement did not answer) holds
    nothing any more. The compute of ``host`` (any compute when None)
    deletes it when Placement answers again, and the row with it; the
    scheduler names these as leaked capacity when it refuses a request.
    """

    __tablename__ = 'pending_frees'
    __table_args__ = (
        sa.UniqueConstraint('consumer_uuid',
                            name='uniq_pending_frees0consumer_uuid'),
        sa.Index('ix_pending_frees_host', 'host'),
        _MYSQL_ARGS,
    )

    id: orm.Mapped[int] = orm.mapped_column(sa.Integer, primary_key=True)
    consumer_uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36))
    host: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))


class InstanceGroup(Base):
    """A server group (``/os-server-groups``): an affinity policy its
    members' hosts follow. ``generation`` moves on with every placement
    the scheduler records for a member (``nova.scheduler.affinity``)."""

    __tablename__ = 'instance_groups'
    __table_args__ = (
        sa.UniqueConstraint('uuid', name='uniq_instance_groups0uuid'),
        sa.Index('ix_instance_groups_project_id', 'project_id'),
        _MYSQL_ARGS,
    )

    id: orm.Mapped[int] = orm.mapped_column(sa.Integer, primary_key=True)
    uuid: orm.Mapped[str] = orm.mapped_column(
        sa.String(36), default=uuidutils.generate_uuid)
    name: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    project_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    user_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    # 'affinity', 'anti-affinity', 'soft-affinity' or 'soft-anti-affinity'.
    policy: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    # {'max_server_per_host': N} for anti-affinity (microversion 2.64).
    rules: orm.Mapped[dict | None] = orm.mapped_column(JSONEncoded)
    generation: orm.Mapped[int] = orm.mapped_column(
        sa.Integer, default=0, server_default='0')


class InstanceGroupMember(Base):
    """A server in a server group (one group per server, as a boot's
    ``group`` scheduler hint names one), with the host the scheduler last
    placed it on (its build's or move's destination)."""

    __tablename__ = 'instance_group_members'
    __table_args__ = (
        sa.UniqueConstraint(
            'instance_uuid',
            name='uniq_instance_group_members0instance_uuid'),
        sa.Index('ix_instance_group_members_group_id', 'group_id'),
        _MYSQL_ARGS,
    )

    id: orm.Mapped[int] = orm.mapped_column(sa.Integer, primary_key=True)
    group_id: orm.Mapped[int] = orm.mapped_column(
        sa.Integer, sa.ForeignKey('instance_groups.id', ondelete='CASCADE',
                                  name='fk_instance_group_members_group_id'))
    instance_uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36))
    host: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))


class Quota(Base):
    """A project's own limit of one resource (``os-quota-sets``), or with
    ``user_id`` set, of one user in the project; ``user_id`` is '' for the
    project's limit (upstream keeps the two in separate tables). The
    resource is an upstream name (``cores``) or ``pci_alias:<alias>``."""

    __tablename__ = 'quotas'
    __table_args__ = (
        sa.UniqueConstraint('project_id', 'user_id', 'resource',
                            name='uniq_quotas0project_id0user_id0resource'),
        _MYSQL_ARGS,
    )

    id: orm.Mapped[int] = orm.mapped_column(sa.Integer, primary_key=True)
    project_id: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    user_id: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    resource: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    # -1: unlimited.
    hard_limit: orm.Mapped[int] = orm.mapped_column(sa.Integer)


class QuotaClass(Base):
    """A limit of a quota class (``os-quota-class-sets``); the class
    ``default`` overrides the [quota] defaults for every project."""

    __tablename__ = 'quota_classes'
    __table_args__ = (
        sa.UniqueConstraint('class_name', 'resource',
                            name='uniq_quota_classes0class_name0resource'),
        _MYSQL_ARGS,
    )

    id: orm.Mapped[int] = orm.mapped_column(sa.Integer, primary_key=True)
    class_name: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    resource: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    hard_limit: orm.Mapped[int] = orm.mapped_column(sa.Integer)


class QuotaLock(Base):
    """One row per project that has created or resized a server: the
    quota check locks it (SELECT ... FOR UPDATE) so that counting the
    project's usage and recording the new server are one step for
    concurrent requests on MariaDB and PostgreSQL (SQLite writers are
    serialized already, see nova.db.sqlite)."""

    __tablename__ = 'quota_locks'
    __table_args__ = (_MYSQL_ARGS,)

    project_id: orm.Mapped[str] = orm.mapped_column(sa.String(255),
                                                    primary_key=True)

"""Initial schema: services, compute nodes, PCI devices, flavors, instances.

Revision ID: 0001_initial
Revises:
Create Date: 2025-01-01
"""

from alembic import op
import sqlalchemy as sa

revision = '0001_initial'
down_revision = None
branch_labels = None
depends_on = None

_MYSQL_ARGS = {'mysql_engine': 'InnoDB', 'mysql_charset': 'utf8mb4'}


def _timestamps() -> list[sa.Column]:
    return [sa.Column('created_at', sa.DateTime, nullable=True),
            sa.Column('updated_at', sa.DateTime, nullable=True)]


def upgrade() -> None:
    op.create_table(
        'services',
        sa.Column('id', sa.Integer, primary_key=True),
        sa.Column('host', sa.String(255), nullable=False),
        sa.Column('binary', sa.String(255), nullable=False),
        sa.Column('topic', sa.String(255), nullable=True),
        sa.Column('disabled', sa.Boolean, nullable=False),
        sa.Column('report_count', sa.Integer, nullable=False),
        sa.Column('last_seen_up', sa.DateTime, nullable=True),
        *_timestamps(),
        sa.UniqueConstraint('host', 'binary',
                            name='uniq_services0host0binary'),
        **_MYSQL_ARGS)

    op.create_table(
        'compute_nodes',
        sa.Column('id', sa.Integer, primary_key=True),
        sa.Column('uuid', sa.String(36), nullable=False),
        sa.Column('host', sa.String(255), nullable=False),
        sa.Column('hypervisor_hostname', sa.String(255), nullable=False),
        sa.Column('vcpus', sa.Integer, nullable=False),
        sa.Column('memory_mb', sa.Integer, nullable=False),
        sa.Column('local_gb', sa.Integer, nullable=False),
        sa.Column('hypervisor_type', sa.String(255), nullable=True),
        sa.Column('service_id', sa.Integer,
                  sa.ForeignKey('services.id',
                                name='fk_compute_nodes_service_id'),
                  nullable=True),
        sa.Column('deleted_at', sa.DateTime, nullable=True),
        *_timestamps(),
        sa.UniqueConstraint('hypervisor_hostname',
                            name='uniq_compute_nodes0hypervisor_hostname'),
        sa.UniqueConstraint('uuid', name='uniq_compute_nodes0uuid'),
        **_MYSQL_ARGS)

    op.create_table(
        'pci_devices',
        sa.Column('id', sa.Integer, primary_key=True),
        sa.Column('compute_node_id', sa.Integer,
                  sa.ForeignKey('compute_nodes.id',
                                name='fk_pci_devices_compute_node_id'),
                  nullable=False),
        sa.Column('address', sa.String(16), nullable=False),
        sa.Column('vendor_id', sa.String(4), nullable=False),
        sa.Column('product_id', sa.String(4), nullable=False),
        sa.Column('dev_type', sa.String(8), nullable=False),
        sa.Column('dev_id', sa.String(255), nullable=True),
        sa.Column('label', sa.String(255), nullable=True),
        sa.Column('numa_node', sa.Integer, nullable=True),
        sa.Column('parent_addr', sa.String(16), nullable=True),
        sa.Column('status', sa.String(36), nullable=False),
        sa.Column('instance_uuid', sa.String(36), nullable=True),
        sa.Column('request_id', sa.String(36), nullable=True),
        sa.Column('group_path', sa.String(255), nullable=False),
        sa.Column('rp_uuid', sa.String(36), nullable=True),
        sa.Column('extra_info', sa.Text, nullable=False),
        *_timestamps(),
        sa.UniqueConstraint('compute_node_id', 'address',
                            name='uniq_pci_devices0compute_node_id0address'),
        sa.Index('ix_pci_devices_instance_uuid', 'instance_uuid'),
        **_MYSQL_ARGS)

    op.create_table(
        'flavors',
        sa.Column('id', sa.Integer, primary_key=True),
        sa.Column('flavorid', sa.String(255), nullable=False),
        sa.Column('name', sa.String(255), nullable=False),
        sa.Column('vcpus', sa.Integer, nullable=False),
        sa.Column('memory_mb', sa.Integer, nullable=False),
        sa.Column('root_gb', sa.Integer, nullable=False),
        sa.Column('is_public', sa.Boolean, nullable=False),
        sa.Column('disabled', sa.Boolean, nullable=False),
        *_timestamps(),
        sa.UniqueConstraint('flavorid', name='uniq_flavors0flavorid'),
        sa.UniqueConstraint('name', name='uniq_flavors0name'),
        **_MYSQL_ARGS)

    op.create_table(
        'flavor_extra_specs',
        sa.Column('id', sa.Integer, primary_key=True),
        sa.Column('flavor_id', sa.Integer,
                  sa.ForeignKey('flavors.id', ondelete='CASCADE',
                                name='fk_flavor_extra_specs_flavor_id'),
                  nullable=False),
        sa.Column('key', sa.String(255), nullable=False),
        sa.Column('value', sa.String(255), nullable=True),
        *_timestamps(),
        sa.UniqueConstraint('flavor_id', 'key',
                            name='uniq_flavor_extra_specs0flavor_id0key'),
        **_MYSQL_ARGS)

    op.create_table(
        'instances',
        sa.Column('id', sa.Integer, primary_key=True),
        sa.Column('uuid', sa.String(36), nullable=False),
        sa.Column('display_name', sa.String(255), nullable=True),
        sa.Column('project_id', sa.String(255), nullable=True),
        sa.Column('user_id', sa.String(255), nullable=True),
        sa.Column('flavor_id', sa.Integer, nullable=True),
        sa.Column('flavor', sa.Text, nullable=True),
        sa.Column('vm_state', sa.String(255), nullable=True),
        sa.Column('task_state', sa.String(255), nullable=True),
        sa.Column('power_state', sa.Integer, nullable=True),
        sa.Column('host', sa.String(255), nullable=True),
        sa.Column('node', sa.String(255), nullable=True),
        sa.Column('fault_message', sa.Text, nullable=True),
        sa.Column('fault_details', sa.Text, nullable=True),
        sa.Column('pci_requests', sa.Text, nullable=True),
        sa.Column('deleted_at', sa.DateTime, nullable=True),
        *_timestamps(),
        sa.UniqueConstraint('uuid', name='uniq_instances0uuid'),
        sa.Index('ix_instances_project_id', 'project_id'),
        sa.Index('ix_instances_host', 'host'),
        **_MYSQL_ARGS)

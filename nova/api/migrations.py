"""Migration records: ``GET /os-migrations`` (admin) and
``GET /servers/{id}/migrations[/{migration_id}]``, with upstream's bodies.

Upstream lists under a server only its live migrations in progress; this
deployment has no live migration, so a server's resizes, cold migrations
and evacuations in progress are listed there instead (same fields).
"""

from nova.api import servers
from nova.api import validation
from nova.api import version_history
from nova.db import api as db
from nova.db import records
from nova import exception
from nova import policies

# Query filters of GET /os-migrations -> migration columns.
_FILTERS = (('status', 'status'), ('instance_uuid', 'instance_uuid'),
            ('source_compute', 'source_compute'))


def _common_view(req, migration: records.Migration) -> dict:
    view = {
        'id': migration.id,
        'created_at': migration.created_at,
        'updated_at': migration.updated_at,
        'dest_compute': migration.dest_compute,
        'dest_host': migration.dest_host,
        'dest_node': migration.dest_node,
        'source_compute': migration.source_compute,
        'source_node': migration.source_node,
        'status': migration.status,
    }
    if req.api_version.at_least(version_history.MIGRATION_UUID):
        view['uuid'] = migration.uuid
    if req.api_version.at_least(version_history.MIGRATION_OWNER):
        view['user_id'] = migration.user_id
        view['project_id'] = migration.project_id
    return view


def _index_view(req, migration: records.Migration) -> dict:
    view = _common_view(req, migration)
    view.update({
        'instance_uuid': migration.instance_uuid,
        'old_instance_type_id': migration.old_instance_type_id,
        'new_instance_type_id': migration.new_instance_type_id,
    })
    if req.api_version.at_least(version_history.MIGRATION_TYPE):
        view['migration_type'] = migration.migration_type
        # Links only point at live migrations in progress upstream.
        view['links'] = []
    return view


def index(req) -> tuple:
    """GET /os-migrations: every migration, newest first, filtered by
    ``host`` (source or destination), ``status``, ``instance_uuid``,
    ``source_compute``, ``migration_type`` (2.23), ``user_id`` and
    ``project_id`` (2.80); ``limit``/``marker`` (a migration uuid) from
    2.59."""
    req.policy.authorize(req.context, policies.MIGRATIONS_INDEX)
    filters = {column: req.GET[name] for name, column in _FILTERS
               if req.GET.get(name)}
    if (req.api_version.at_least(version_history.MIGRATION_TYPE)
            and req.GET.get('migration_type')):
        filters['migration_type'] = req.GET['migration_type']
    if req.api_version.at_least(version_history.MIGRATION_OWNER):
        for name in ('user_id', 'project_id'):
            if req.GET.get(name):
                filters[name] = req.GET[name]
    migrations = db.migration_get_all(req.context, filters)
    host = req.GET.get('host')
    if host:
        migrations = [m for m in migrations
                      if host in (m.source_compute, m.dest_compute)]
    views = [_index_view(req, m) for m in migrations]
    if req.api_version.at_least(version_history.MIGRATION_UUID):
        views = validation.paginate(req, views, lambda view: view['uuid'])
    return 200, {'migrations': views}


def _server_view(req, migration: records.Migration) -> dict:
    view = _common_view(req, migration)
    view.update({
        'server_uuid': migration.instance_uuid,
        # Upstream reports live-migration progress here; a cold move has
        # no memory or disk copy to report.
        'memory_total_bytes': None, 'memory_processed_bytes': None,
        'memory_remaining_bytes': None, 'disk_total_bytes': None,
        'disk_processed_bytes': None, 'disk_remaining_bytes': None,
    })
    return view


def _server_migrations(req, server_id: str) -> list[records.Migration]:
    servers.get_instance(req, server_id, policies.SERVER_MIGRATIONS)
    if not req.api_version.at_least(version_history.MIGRATION_TYPE):
        raise exception.NotFound()
    return db.migration_get_in_progress(req.context, [server_id])


def server_index(req, server_id: str) -> tuple:
    """GET /servers/{id}/migrations (2.23): its moves in progress."""
    return 200, {'migrations': [
        _server_view(req, m) for m in _server_migrations(req, server_id)]}


def server_show(req, server_id: str, migration_id: str) -> tuple:
    """GET /servers/{id}/migrations/{migration_id} (2.23): one move in
    progress, by id (or uuid)."""
    for migration in _server_migrations(req, server_id):
        if migration_id in (str(migration.id), migration.uuid):
            return 200, {'migration': _server_view(req, migration)}
    raise exception.MigrationNotFound(migration_id=migration_id)

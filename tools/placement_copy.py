"""Copy hosts and read the fleet in Placement's own SQLite tables.

``tools/bench_fleet.py`` builds one host through nova's translator and
report client, then copies it hundreds of times here (seconds, where
Placement's API takes about 0.6 s per host), and reads which GPUs are
held and what the partitions are straight from the tables.

This module depends on Placement's PRIVATE database schema (the tables
``resource_providers``, ``inventories``, ``resource_provider_traits``,
``traits``, ``resource_classes``, ``allocations`` and ``consumers`` and
their columns as openstack-placement creates them), which is no API and
may change with any Placement release: nothing in nova uses it, and only
the benchmark may. ``nova/tests/unit/test_bench_fleet.py`` runs it
against tables of the same shape, and the benchmark's own run against
the installed Placement; a new Placement release failing there means this
module follows its schema, not that nova is broken.
"""

import dataclasses
import sqlite3
from typing import Callable

from oslo_utils import uuidutils
import sqlalchemy as sa

from nova.pci import placement_names


@dataclasses.dataclass(frozen=True)
class Provider:
    """One resource provider of the fleet, as the tables hold it."""

    uuid: str
    name: str
    parent: str | None      # parent provider UUID
    root: str               # root provider UUID
    traits: frozenset[str]
    gpu: bool               # has PGPU inventory


@dataclasses.dataclass(frozen=True)
class Held:
    """One GPU allocated to a consumer."""

    device: str             # the GPU's provider UUID
    root: str               # its host's root provider UUID
    consumer: str


def gpus_held(database: str) -> dict[str, int]:
    """Root provider UUID -> PGPU allocated on its tree."""
    db = sqlite3.connect(database)
    try:
        return dict(db.execute(
            'SELECT root.uuid, SUM(a.used) FROM allocations a '
            'JOIN resource_providers rp ON a.resource_provider_id = rp.id '
            'JOIN resource_providers root ON rp.root_provider_id = root.id '
            'JOIN resource_classes rc ON a.resource_class_id = rc.id '
            "WHERE rc.name = 'PGPU' GROUP BY root.uuid").fetchall())
    finally:
        db.close()


def copy_host(database: str, template: str, names: list[str]) -> None:
    """Copy the provider tree of host ``template``, with its
    allocations, to hosts ``names`` in Placement's SQLite ``database``,
    in one transaction. Each copy's providers get the shard bits of its
    own name, as its compute would publish them (on the root and every
    PCI provider: every provider of these hosts)."""
    db = sqlite3.connect(database)
    try:
        with db:
            providers = db.execute(
                'SELECT id, name, generation, root_provider_id, '
                'parent_provider_id FROM resource_providers '
                'WHERE root_provider_id = (SELECT id FROM resource_providers '
                'WHERE name = ?) ORDER BY id', (template,)).fetchall()
            ids = [row[0] for row in providers]
            marks = ','.join('?' * len(ids))
            inventories = db.execute(
                'SELECT resource_provider_id, resource_class_id, total, '
                'reserved, min_unit, max_unit, step_size, allocation_ratio '
                'FROM inventories WHERE resource_provider_id IN (%s)' %
                marks, ids).fetchall()
            traits = db.execute(
                'SELECT resource_provider_id, trait_id FROM '
                'resource_provider_traits WHERE resource_provider_id IN '
                '(%s)' % marks, ids).fetchall()
            allocations = db.execute(
                'SELECT resource_provider_id, consumer_id, '
                'resource_class_id, used FROM allocations WHERE '
                'resource_provider_id IN (%s)' % marks, ids).fetchall()
            consumers = db.execute(
                'SELECT uuid, project_id, user_id, consumer_type_id FROM '
                'consumers WHERE uuid IN (SELECT consumer_id FROM '
                'allocations WHERE resource_provider_id IN (%s))' % marks,
                ids).fetchall()
            shard_ids = dict(db.execute(
                'SELECT name, id FROM traits WHERE name LIKE ?',
                (placement_names.SHARD_TRAIT_PREFIX + '%',)).fetchall())
            traits = [(rp, trait) for rp, trait in traits
                      if trait not in shard_ids.values()]
            next_id = db.execute(
                'SELECT MAX(id) FROM resource_providers').fetchone()[0] + 1
            for name in names:
                new = {old: next_id + i for i, old in enumerate(ids)}
                next_id += len(ids)
                _insert(db, 'resource_providers',
                        'id, uuid, name, generation, root_provider_id, '
                        'parent_provider_id',
                        [(new[rp], uuidutils.generate_uuid(),
                          name + rp_name[len(template):], generation,
                          new[root], new.get(parent))
                         for rp, rp_name, generation, root, parent
                         in providers])
                _insert(db, 'inventories',
                        'resource_provider_id, resource_class_id, total, '
                        'reserved, min_unit, max_unit, step_size, '
                        'allocation_ratio',
                        [(new[row[0]],) + tuple(row[1:])
                         for row in inventories])
                _insert(db, 'resource_provider_traits',
                        'resource_provider_id, trait_id',
                        [(new[rp], trait) for rp, trait in traits] +
                        [(new[rp], shard_ids[trait]) for rp in ids
                         for trait in placement_names.shard_traits(name)])
                # The template's instances, as new consumers on the copy.
                renamed = {row[0]: uuidutils.generate_uuid()
                           for row in consumers}
                _insert(db, 'consumers',
                        'uuid, project_id, user_id, consumer_type_id, '
                        'generation',
                        [(renamed[row[0]],) + tuple(row[1:]) + (1,)
                         for row in consumers])
                _insert(db, 'allocations',
                        'resource_provider_id, consumer_id, '
                        'resource_class_id, used',
                        [(new[rp], renamed[consumer], rc, used)
                         for rp, consumer, rc, used in allocations])
    finally:
        db.close()


def add_shard_aggregates(database: str,
                         aggregate: Callable[[int, int], str]) -> int:
    """Make every provider of Placement's SQLite ``database`` a member of
    the aggregate of each shard of its host (one per level, ``aggregate(
    level, index)`` its UUID), as shard traits are on every provider;
    the number of memberships written."""
    db = sqlite3.connect(database)
    try:
        with db:
            ids = {}
            for level in range(1, placement_names.SHARD_BITS + 1):
                for index in range(1 << level):
                    ids[level, index] = db.execute(
                        'INSERT INTO placement_aggregates (uuid, '
                        'created_at) VALUES (?, CURRENT_TIMESTAMP)',
                        (aggregate(level, index),)).lastrowid
            rows = [(rp, ids[level, number % (1 << level)])
                    for rp, number in (
                        (rp, placement_names.shard_number(root))
                        for rp, root in db.execute(
                            'SELECT rp.id, root.name FROM '
                            'resource_providers rp JOIN resource_providers '
                            'root ON rp.root_provider_id = root.id'))
                    for level in range(1, placement_names.SHARD_BITS + 1)]
            _insert(db, 'resource_provider_aggregates',
                    'resource_provider_id, aggregate_id', rows)
        return len(rows)
    finally:
        db.close()


def _insert(db: sqlite3.Connection, table: str, columns: str,
            rows: list[tuple]) -> None:
    """Insert ``rows`` (values of ``columns``) into ``table``, created
    now."""
    if rows:
        db.executemany('INSERT INTO %s (%s, created_at) VALUES (%s, '
                       'CURRENT_TIMESTAMP)' % (
                           table, columns, ', '.join('?' * len(rows[0]))),
                       rows)


def read_fleet(database: str) -> tuple[list[Provider], list[Held]]:
    """Every provider of Placement's SQLite ``database`` and every GPU
    held, in the tables' order."""
    db = sqlite3.connect(database)
    try:
        providers = db.execute(
            'SELECT rp.id, rp.uuid, rp.name, parent.uuid, root.uuid FROM '
            'resource_providers rp JOIN resource_providers root ON '
            'rp.root_provider_id = root.id LEFT JOIN resource_providers '
            'parent ON rp.parent_provider_id = parent.id ORDER BY rp.id'
        ).fetchall()
        traits = db.execute(
            'SELECT rpt.resource_provider_id, t.name FROM '
            'resource_provider_traits rpt JOIN traits t ON '
            'rpt.trait_id = t.id').fetchall()
        gpus = {row[0] for row in db.execute(
            'SELECT i.resource_provider_id FROM inventories i JOIN '
            'resource_classes rc ON i.resource_class_id = rc.id '
            "WHERE rc.name = 'PGPU'")}
        held = db.execute(
            'SELECT rp.uuid, root.uuid, a.consumer_id FROM allocations '
            'a JOIN resource_providers rp ON a.resource_provider_id = '
            'rp.id JOIN resource_providers root ON rp.root_provider_id '
            '= root.id JOIN resource_classes rc ON a.resource_class_id '
            "= rc.id WHERE rc.name = 'PGPU'").fetchall()
    finally:
        db.close()
    traits_of: dict[int, set[str]] = {}
    for rp_id, name in traits:
        traits_of.setdefault(rp_id, set()).add(name)
    return ([Provider(uuid, name, parent, root,
                      frozenset(traits_of.get(rp_id, ())), rp_id in gpus)
             for rp_id, uuid, name, parent, root in providers],
            [Held(*row) for row in held])


def to_server(database: str, connection: str) -> dict[str, int]:
    """Copy every row of the SQLite ``database`` into the server database
    at ``connection`` (a SQLAlchemy URL, e.g. MariaDB), whose tables
    Placement created, replacing what they hold (the standard resource
    classes and traits Placement writes at start); rows copied per
    table.

    So the same fleet can be measured on the database a deployment runs
    Placement on, whose query planner differs from SQLite's. On MariaDB
    the tables are analyzed after the copy.
    """
    source = sqlite3.connect(database)
    engine = sa.create_engine(connection)
    copied = {}
    try:
        target = sa.MetaData()
        target.reflect(engine)
        with engine.begin() as conn:
            if engine.dialect.name == 'mysql':
                conn.exec_driver_sql('SET FOREIGN_KEY_CHECKS = 0')
                # Resource class 0 (VCPU) keeps its id.
                conn.exec_driver_sql(
                    "SET SESSION sql_mode = CONCAT(@@sql_mode, "
                    "',NO_AUTO_VALUE_ON_ZERO')")
            for table in target.sorted_tables:
                if table.name == 'alembic_version':
                    continue
                conn.execute(table.delete())
                cursor = source.execute('SELECT * FROM %s' % table.name)
                columns = [column[0] for column in cursor.description]
                count = 0
                while rows := cursor.fetchmany(20000):
                    conn.execute(table.insert(), [dict(zip(columns, row))
                                                  for row in rows])
                    count += len(rows)
                copied[table.name] = count
            if engine.dialect.name == 'mysql':
                conn.exec_driver_sql('SET FOREIGN_KEY_CHECKS = 1')
                # Index statistics of the tables as filled, which a
                # database that grew row by row would have.
                conn.exec_driver_sql('ANALYZE TABLE %s' % ', '.join(
                    copied))
    finally:
        source.close()
        engine.dispose()
    return copied

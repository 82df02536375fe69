"""Let many threads of one process share a SQLite database file.

nova-all keeps nova's database and the embedded Placement's in SQLite
files and serves concurrent requests from threads. SQLite as oslo.db sets
it up by default fails them with ``database is locked``: its rollback
journal makes readers and writers block each other, and a transaction
that read first and then wants to write is refused at once (a lock
upgrade that could deadlock is not waited for). So for a SQLite file:

- WAL journal: readers never wait for the writer, nor the writer for them;
- a busy timeout: a writer waits for the write lock instead of failing;
- writer transactions start with ``BEGIN IMMEDIATE``: they take the write
  lock before their first read, so the capacity checks Placement makes
  inside them see the latest data and no write lock is ever upgraded;
  if the lock stays taken past the busy timeout, BEGIN is retried (nothing
  has run in the transaction yet) until :data:`LOCK_WAIT` has passed;
- reader transactions use a second engine on the same file (oslo.db's
  reader engine, ``synchronous_reader=False``) with a plain deferred
  BEGIN, so a reader opened while a writer is running (Placement reads
  providers in an independent transaction while retrying a write) never
  waits for the write lock.

Other databases are left as they are.
"""

import time

from oslo_db import exception as db_exc
from oslo_log import log as logging
import sqlalchemy as sa

LOG = logging.getLogger(__name__)

# How long one attempt at the write lock waits (milliseconds).
BUSY_TIMEOUT_MS = 10000
# How long a writer keeps retrying BEGIN IMMEDIATE in all (seconds).
LOCK_WAIT = 120


def is_sqlite_file(connection: str | None) -> bool:
    """True for a SQLite URL naming a file (not ``:memory:``)."""
    if not connection:
        return False
    url = sa.engine.make_url(connection)
    return url.get_backend_name() == 'sqlite' and url.database not in (
        None, '', ':memory:')


def configure_facade(manager, **options) -> None:
    """``manager.configure(**options)`` (an oslo.db enginefacade transaction
    context), then start it; on a SQLite file, with the settings above."""
    connection = options.get('connection')
    if not is_sqlite_file(connection):
        manager.configure(**options)
        return
    # oslo.db uses no connection pool for SQLite files, so a pool timeout
    # (set for server databases) does not apply.
    options.pop('pool_timeout', None)
    manager.configure(**dict(options, slave_connection=connection,
                             synchronous_reader=False))
    writer = manager.writer.get_engine()
    reader = manager.reader.get_engine()
    for engine in {writer, reader}:
        sa.event.listen(engine, 'connect', _set_pragmas)
        # Connections opened while the engine was created lack the pragmas
        # (oslo.db uses no pool for SQLite files; this is for safety).
        engine.dispose()
    # Ours must run before oslo.db's, which then sees the transaction
    # begun and emits no BEGIN of its own (``insert=True`` does not order
    # listeners of an engine instance, so re-add the others after ours).
    others = list(writer.dispatch.begin)
    for listener in others:
        sa.event.remove(writer, 'begin', listener)
    sa.event.listen(writer, 'begin', _begin_immediate)
    for listener in others:
        sa.event.listen(writer, 'begin', listener)


def _set_pragmas(dbapi_connection, _record) -> None:
    dbapi_connection.execute('PRAGMA busy_timeout = %d' % BUSY_TIMEOUT_MS)
    dbapi_connection.execute('PRAGMA journal_mode = WAL')


def _is_locked(error: Exception) -> bool:
    return 'database is locked' in str(error) or \
        'database is busy' in str(error)


def _begin_immediate(connection) -> None:
    if 'in_transaction' in connection.info:
        return
    deadline = time.monotonic() + LOCK_WAIT
    while True:
        try:
            connection.exec_driver_sql('BEGIN IMMEDIATE')
            break
        except (sa.exc.OperationalError, db_exc.DBError) as error:
            if not _is_locked(error) or time.monotonic() > deadline:
                raise
            LOG.info('SQLite database %s still locked after %d ms; '
                     'retrying', connection.engine.url.database,
                     BUSY_TIMEOUT_MS)
    # oslo.db's listeners end the transaction on commit or rollback.
    connection.info['in_transaction'] = True

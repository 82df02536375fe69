"""A SQLite file configured by nova.db.sqlite under concurrent threads."""

import os
import sqlite3
import threading

import fixtures
from oslo_context import context as oslo_context
from oslo_db.sqlalchemy import enginefacade
import sqlalchemy as sa

from nova.db import sqlite
from nova import test


@enginefacade.transaction_context_provider
class _Context(oslo_context.RequestContext):
    pass


class SQLiteTestCase(test.TestCase):

    def setUp(self):
        super().setUp()
        self.path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                 'test.sqlite')
        self.manager = enginefacade.transaction_context()
        sqlite.configure_facade(self.manager,
                                connection='sqlite:///' + self.path)
        self.addCleanup(self.manager.dispose_pool)
        with self.manager.writer.using(_Context()) as session:
            session.execute(sa.text('CREATE TABLE t (n INTEGER)'))

    def count(self) -> int:
        with self.manager.reader.using(_Context()) as session:
            return session.execute(sa.text('SELECT count(*) FROM t')
                                   ).scalar()

    def test_wal_and_separate_reader_engine(self):
        self.assertEqual('wal', sqlite3.connect(self.path).execute(
            'PRAGMA journal_mode').fetchone()[0])
        self.assertIsNot(self.manager.writer.get_engine(),
                         self.manager.reader.get_engine())

    def test_reader_is_not_blocked_by_a_writer(self):
        inside, release = threading.Event(), threading.Event()

        def write():
            with self.manager.writer.using(_Context()) as session:
                session.execute(sa.text('INSERT INTO t VALUES (1)'))
                inside.set()
                release.wait(10)
        writer = threading.Thread(target=write)
        writer.start()
        self.assertTrue(inside.wait(10))
        try:
            # Sees the last committed state while the writer is open.
            self.assertEqual(0, self.count())
        finally:
            release.set()
            writer.join(10)
        self.assertEqual(1, self.count())

    def test_writers_read_then_write_without_lock_errors(self):
        # Each writer reads the count, then writes count + 1: only correct
        # if writers are serialised from their first read, and without
        # BEGIN IMMEDIATE SQLite refuses such lock upgrades at once.
        errors = []
        barrier = threading.Barrier(10)

        def increment():
            barrier.wait()
            try:
                for _ in range(5):
                    with self.manager.writer.using(_Context()) as session:
                        n = session.execute(sa.text(
                            'SELECT count(*) FROM t')).scalar()
                        session.execute(sa.text('INSERT INTO t VALUES (:n)'),
                                        {'n': n + 1})
            except Exception as error:
                errors.append(error)
        threads = [threading.Thread(target=increment) for _ in range(10)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        self.assertEqual([], errors)
        with self.manager.reader.using(_Context()) as session:
            values = session.execute(sa.text('SELECT n FROM t')).scalars()
            self.assertEqual(list(range(1, 51)), sorted(values))

    def test_begin_is_retried_while_another_process_holds_the_lock(self):
        self.useFixture(fixtures.MockPatchObject(sqlite, 'BUSY_TIMEOUT_MS',
                                                 50))
        other = sqlite3.connect(self.path, isolation_level=None,
                                check_same_thread=False)
        other.execute('BEGIN IMMEDIATE')
        timer = threading.Timer(0.5, other.execute, ('COMMIT',))
        timer.start()
        self.addCleanup(timer.cancel)
        with self.manager.writer.using(_Context()) as session:
            session.execute(sa.text('INSERT INTO t VALUES (1)'))
        self.assertEqual(1, self.count())
        self.assertIn('still locked', self.logger.output)

    def test_lock_held_too_long_fails(self):
        self.useFixture(fixtures.MockPatchObject(sqlite, 'BUSY_TIMEOUT_MS',
                                                 50))
        self.useFixture(fixtures.MockPatchObject(sqlite, 'LOCK_WAIT', 0.2))
        other = sqlite3.connect(self.path, isolation_level=None,
                                check_same_thread=False)
        other.execute('BEGIN IMMEDIATE')
        self.addCleanup(other.execute, 'ROLLBACK')

        def write():
            with self.manager.writer.using(_Context()) as session:
                session.execute(sa.text('INSERT INTO t VALUES (1)'))
        error = self.assertRaises(Exception, write)
        self.assertIn('database is locked', str(error))

    def test_server_urls_are_left_alone(self):
        self.assertFalse(sqlite.is_sqlite_file(
            'mysql+pymysql://root@127.0.0.1/nova'))
        self.assertFalse(sqlite.is_sqlite_file('sqlite://'))
        self.assertTrue(sqlite.is_sqlite_file('sqlite:////tmp/x.sqlite'))

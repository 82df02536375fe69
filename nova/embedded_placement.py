"""Run the real OpenStack Placement WSGI app inside a nova process.

The all-in-one service (``nova-all``) and the demo need a Placement
without deploying ``placement-api``. This builds Placement's own
configuration on a private ``ConfigOpts`` (so it never mixes with nova's
options), points it at a database (a SQLite file under ``state_path`` by
default), disables keystone (``noauth2``: clients send ``x-auth-token:
admin``) and serves the app with :class:`nova.wsgi_server.WSGIServer`,
refusing request bodies over a limit (``[api]max_request_body_size`` in
nova-all) with 413 as nova-api does, in Placement's error format.

Placement keeps one database engine per process (its module-level
``placement_context_manager``), so a process can host one embedded
Placement database; asking for a second one is an error. That engine is
set up here rather than by ``placement.db_api.configure`` so a SQLite file
gets the settings of :mod:`nova.db.sqlite` (many threads write to it), and
:func:`build_conf` makes allocation claims exclusive on every database
(see the comment on ``allocation_conflict_retry_count``).
"""

import http
import os

from oslo_config import cfg
from placement import conf as placement_conf
from placement import db_api as placement_db_api
from placement import deploy as placement_deploy
import webob

from nova import body_limit
from nova.conf import api as api_conf
from nova.db import sqlite
from nova import exception
from nova import wsgi_server

# Requests served at once; more connections wait in the listen backlog.
MAX_CONCURRENT_REQUESTS = 32
# Seconds a request waits for a database connection from the pool.
POOL_TIMEOUT = 120
# The connection the process-wide Placement engine was configured with.
_configured_connection: str | None = None


def default_connection(state_path: str) -> str:
    """SQLite URL of the embedded Placement database under ``state_path``."""
    return 'sqlite:///%s' % os.path.join(os.path.abspath(state_path),
                                         'placement.sqlite')


# The settings of nova's Placement: the embedded one, and what a Placement
# deployed on its own needs in its placement.conf (see
# doc/source/admin/deployment.rst and :func:`config_file`).
SETTINGS: dict[str, dict[str, object]] = {
    'api': {'auth_strategy': 'noauth2'},
    # Nova's device RPs make wide trees (one child per GPU, many same-RC
    # siblings); without these Placement enumerates permutations and a
    # multi-device query can take minutes.
    'workarounds': {'optimize_for_wide_provider_trees': True},
    'placement': {
        'allocation_candidates_generation_strategy': 'breadth-first',
        # Placement 16.0.0 retries a conflicting allocation write inside
        # the request's still-open transaction: the failed attempt's
        # allocation rows are not rolled back, so the retry counts them as
        # usage that was already there, its "over capacity but no worse
        # than before" rule lets the claim through, and a provider of
        # total 1 ends up used several times over (MariaDB, PostgreSQL).
        # One attempt per request makes a conflict roll the whole
        # transaction back and answer 409 placement.concurrent_update;
        # the client retries from scratch.
        'allocation_conflict_retry_count': 1,
    },
    # A request holds up to two database connections at once (its write
    # transaction and, when Placement retries a conflicting allocation
    # write, an independent read), so the pool has room for two per
    # request served at once; a request waits for a connection rather
    # than failing with a pool timeout.
    'placement_database': {
        'max_pool_size': MAX_CONCURRENT_REQUESTS,
        'max_overflow': MAX_CONCURRENT_REQUESTS,
        'pool_timeout': POOL_TIMEOUT,
    },
}


def build_conf(connection: str) -> cfg.ConfigOpts:
    """A private Placement ``ConfigOpts`` for an embedded deployment."""
    conf = cfg.ConfigOpts()
    placement_conf.register_opts(conf)
    for group, options in SETTINGS.items():
        for name, value in options.items():
            conf.set_override(name, value, group=group)
    conf.set_override('connection', connection, group='placement_database')
    conf.set_override('sync_on_startup', True, group='placement_database')
    # Parse no files: everything Placement needs is set above.
    conf([], project='placement', default_config_files=[],
         default_config_dirs=[])
    return conf


def config_file(connection: str,
                extra: dict[str, dict[str, object]] | None = None) -> str:
    """The text of a placement.conf with :data:`SETTINGS` and the database
    ``connection``, for Placement's own WSGI application
    (``placement.wsgi.api:application``) under a multi-process server.

    The schema is not synced on start-up (every worker process would
    race to do it): run ``placement-manage db sync`` first. ``extra``
    adds or overrides options by group.
    """
    sections: dict[str, dict[str, object]] = {
        group: dict(options) for group, options in SETTINGS.items()}
    if connection.startswith('sqlite'):
        # SQLAlchemy refuses pool options for SQLite (no pool to size).
        sections['placement_database'] = {}
    sections['placement_database'].update(
        connection=connection, sync_on_startup=False)
    for group, options in (extra or {}).items():
        sections.setdefault(group, {}).update(options)
    lines = []
    for group, options in sections.items():
        lines.append('[%s]' % group)
        lines += ['%s = %s' % (name, value)
                  for name, value in options.items()]
        lines.append('')
    return '\n'.join(lines)


def configure_facade(manager, conf: cfg.ConfigOpts) -> None:
    """Configure an oslo.db enginefacade transaction context for the
    Placement database of ``conf`` (built by :func:`build_conf`)."""
    options = dict(conf.placement_database.items())
    # A Placement option, not an enginefacade one.
    options.pop('sync_on_startup', None)
    sqlite.configure_facade(manager, **options)


def _configure_database(conf: cfg.ConfigOpts, connection: str) -> None:
    """Point Placement's process-wide engine at ``connection`` (once)."""
    global _configured_connection
    if _configured_connection is not None:
        if _configured_connection != connection:
            raise exception.InvalidConfiguration(
                reason='this process already runs a Placement database '
                       '(%s); an embedded Placement can only use that one, '
                       'not %s' % (_configured_connection or 'unknown',
                                   connection))
        return
    configure_facade(placement_db_api.placement_context_manager, conf)
    _configured_connection = connection


def placement_error(status: int, message: str) -> webob.Response:
    """An error response with Placement's body shape."""
    return webob.Response(status=status, json_body={'errors': [{
        'status': status, 'title': http.HTTPStatus(status).phrase,
        'detail': message}]})


class EmbeddedPlacement:
    """Placement served in-process on a loopback port.

    ``connection`` is a SQLAlchemy URL; None means a SQLite file under
    ``state_path``. ``url`` is the endpoint to give nova's [placement]
    ``endpoint`` once started. A request body over ``max_body_size``
    bytes is refused with 413. ``options`` name the options that set
    ``port`` when it cannot be bound.
    """

    def __init__(self, connection: str | None = None,
                 state_path: str | None = None, host: str = '127.0.0.1',
                 port: int = 0,
                 max_body_size: int =
                 api_conf.DEFAULT_MAX_REQUEST_BODY_SIZE,
                 options: str = '') -> None:
        if connection is None:
            if state_path is None:
                raise exception.InvalidConfiguration(
                    reason='EmbeddedPlacement needs a database connection '
                           'or a state_path to keep a SQLite file in')
            os.makedirs(state_path, exist_ok=True)
            connection = default_connection(state_path)
        self.connection = connection
        self.conf = build_conf(connection)
        self.max_body_size = max_body_size
        self._server = wsgi_server.WSGIServer(
            None, host=host, port=port, max_requests=MAX_CONCURRENT_REQUESTS,
            service='Placement', options=options)

    @property
    def url(self) -> str:
        return self._server.url

    @property
    def app(self):
        """The WSGI application served (None before :meth:`start`)."""
        return self._server.app

    def start(self) -> None:
        """Create or upgrade the schema, load the app and start serving."""
        _configure_database(self.conf, self.connection)
        self._server.app = body_limit.BodyLimit(
            placement_deploy.loadapp(self.conf), self.max_body_size,
            placement_error)
        self._server.start()

    def stop(self, timeout: float | None = 0) -> None:
        """Stop serving; wait up to ``timeout`` seconds (None: as long as
        they take) for the requests in progress."""
        self._server.stop(timeout)

"""Run the real Glance API (the ``glance`` package) for nova-all and tests.

Glance keeps its configuration in oslo.config's global ``CONF``, which
nova's own services must not share, so it runs as a child process::

    OS_GLANCE_CONFIG_DIR=CONFIG_DIR \\
        python -m nova.wsgi_server glance.wsgi.api:application HOST PORT Glance

:class:`GlanceService` writes a glance-api.conf and its paste file in
``CONFIG_DIR`` (a file store and a SQLite database under the state
directory; no authentication, or keystonemiddleware's ``auth_token`` when
nova runs with Keystone), syncs the schema with ``glance-manage db sync``,
as an operator would, and starts the child. The child
(:func:`nova.wsgi_server.serve_child`) serves Glance's application with
cheroot, prints its URL on one line of stdout and serves until it is
terminated or its stdin closes (it never outlives nova-all); it imports
nothing of nova but the server.

It is a helper of nova-all's (and of the tests'), so it lives with the
commands, above the services, and not in the image client
(``nova.image``), which every service imports.
"""

import os
import subprocess
import sys

from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from oslo_config import cfg
from oslo_log import log as logging

from nova import exception

LOG = logging.getLogger(__name__)

# The WSGI application the child serves.
GLANCE_APP = 'glance.wsgi.api:application'
# Seconds glance-manage may take to create the schema; the child to serve.
SYNC_TIMEOUT = 120
START_TIMEOUT = 120
# Without authentication every request is Glance's admin; its new
# default policies want roles no request then has, so the deprecated
# (owner-based) rules apply instead.
_NOAUTH_POLICY = {'enforce_new_defaults': False, 'enforce_scope': False}

# Where an option's value came from when nova.conf (its files, the
# command line, the environment) or nova itself set it.
_SET_LOCATIONS = (cfg.Locations.user, cfg.Locations.command_line,
                  cfg.Locations.environment, cfg.Locations.set_override)
AUTHTOKEN_GROUP = 'keystone_authtoken'

_PASTE = """\
[pipeline:glance-api]
pipeline = cors http_proxy_to_wsgi versionnegotiation unauthenticated-context rootapp

[pipeline:glance-api-keystone]
pipeline = cors http_proxy_to_wsgi versionnegotiation authtoken context rootapp

[composite:rootapp]
paste.composite_factory = glance.api:root_app_factory
/: apiversions
/v2: apiv2app

[app:apiversions]
paste.app_factory = glance.api.versions:create_resource

[app:apiv2app]
paste.app_factory = glance.api.v2.router:API.factory

[filter:versionnegotiation]
paste.filter_factory = glance.api.middleware.version_negotiation:VersionNegotiationFilter.factory

[filter:context]
paste.filter_factory = glance.api.middleware.context:ContextMiddleware.factory

[filter:unauthenticated-context]
paste.filter_factory = glance.api.middleware.context:UnauthenticatedContextMiddleware.factory

[filter:authtoken]
paste.filter_factory = keystonemiddleware.auth_token:filter_factory
delay_auth_decision = true

[filter:cors]
paste.filter_factory = oslo_middleware.cors:filter_factory
oslo_config_project = glance
oslo_config_program = glance-api

[filter:http_proxy_to_wsgi]
paste.filter_factory = oslo_middleware:HTTPProxyToWSGI.factory
"""  # noqa: E501


def config_sections(state_dir: str,
                    keystone_authtoken: dict[str, object] | None = None
                    ) -> dict[str, dict[str, object]]:
    """glance-api.conf by section: images and the SQLite database under
    ``state_dir``; Keystone when ``keystone_authtoken`` (the options of
    keystonemiddleware's section) is given, else no authentication."""
    sections: dict[str, dict[str, object]] = {
        'DEFAULT': {'log_file': os.path.join(state_dir, 'glance-api.log'),
                    'enabled_backends': 'local:file'},
        'database': {'connection': 'sqlite:///%s' % os.path.join(
            state_dir, 'glance.sqlite')},
        'glance_store': {'default_backend': 'local'},
        'local': {'filesystem_store_datadir': os.path.join(
            state_dir, 'images')},
        'os_glance_staging_store': {'filesystem_store_datadir':
                                    os.path.join(state_dir, 'staging')},
        'os_glance_tasks_store': {'filesystem_store_datadir':
                                  os.path.join(state_dir, 'tasks')},
        'paste_deploy': {'config_file': os.path.join(
            state_dir, 'etc', 'glance-api-paste.ini')},
    }
    if keystone_authtoken:
        sections['paste_deploy']['flavor'] = 'keystone'
        sections['keystone_authtoken'] = dict(keystone_authtoken)
    else:
        sections['oslo_policy'] = dict(_NOAUTH_POLICY)
    return sections


def keystone_authtoken(conf: cfg.ConfigOpts) -> dict[str, object]:
    """Every option of ``conf``'s ``[keystone_authtoken]`` that nova.conf
    sets, for a Glance that validates tokens as nova-api does.

    keystonemiddleware registers its options, and those of the auth
    plugin ``auth_type`` names (``auth_url``, the service user's
    credentials), only when nova-api's pipeline is built; they are
    registered here first so that their values in nova.conf are read.
    """
    from keystonemiddleware import auth_token
    for group, opts in auth_token.list_opts():
        conf.register_opts(opts, group=group)
    section = conf[AUTHTOKEN_GROUP]
    if section.auth_type:
        try:
            plugin = ks_loading.get_plugin_loader(section.auth_type)
        except ks_exc.NoMatchingPlugin as err:
            raise exception.InvalidConfiguration(reason=(
                '[%s]auth_type = %s: %s' % (AUTHTOKEN_GROUP,
                                            section.auth_type, err))) from err
        conf.register_opts(ks_loading.get_auth_plugin_conf_options(plugin),
                           group=AUTHTOKEN_GROUP)
    options = {}
    for name, value in section.items():
        location = conf.get_location(name, AUTHTOKEN_GROUP)
        if value is not None and location is not None and \
                location.location in _SET_LOCATIONS:
            options[name] = value
    return options


def _ini_value(value: object) -> str:
    """An option's value as oslo.config reads it back from a file."""
    if isinstance(value, (list, tuple)):
        return ','.join(str(item) for item in value)
    return str(value)


def _ini(sections: dict[str, dict[str, object]]) -> str:
    lines = []
    for name, options in sections.items():
        lines.append('[%s]' % name)
        lines += ['%s = %s' % (key, _ini_value(value))
                  for key, value in options.items()]
        lines.append('')
    return '\n'.join(lines)


class GlanceService:
    """Glance in a child process; ``url`` is its endpoint once started.

    Its images and database live in ``state_dir`` (kept across restarts,
    so a restarted Glance has the same images). ``options`` name the
    options that set ``port``, for the error when Glance cannot start.
    """

    def __init__(self, state_dir: str, host: str = '127.0.0.1',
                 port: int = 0,
                 keystone_authtoken: dict[str, object] | None = None,
                 options: str = '') -> None:
        self.state_dir = os.path.abspath(state_dir)
        self.config_dir = os.path.join(self.state_dir, 'etc')
        self.host = host
        self.port = port
        self.options = options
        self.keystone_authtoken = keystone_authtoken
        self.url: str | None = None
        self._process: subprocess.Popen | None = None

    @classmethod
    def for_nova_all(cls, conf: cfg.ConfigOpts,
                     port: int) -> 'GlanceService':
        """nova-all's Glance: under ``$state_path/glance``, with Keystone
        (nova's ``[keystone_authtoken]``) when nova-api uses it."""
        authtoken = None
        if conf.api.auth_strategy == 'keystone':
            authtoken = keystone_authtoken(conf)
        return cls(os.path.join(conf.state_path, 'glance'), port=port,
                   keystone_authtoken=authtoken,
                   options='[all_in_one]glance_listen_port')

    def configure_nova(self, conf) -> None:
        """Point ``conf``'s ``[glance]`` at this Glance: no credentials
        unless Glance uses Keystone (then ``[glance]``'s own)."""
        if self.keystone_authtoken is None:
            conf.set_override('auth_type', 'none', group='glance')
        conf.set_override('endpoint_override', self.url, group='glance')

    @property
    def config_file(self) -> str:
        return os.path.join(self.config_dir, 'glance-api.conf')

    def _write_config(self) -> None:
        for name in ('etc', 'images', 'staging', 'tasks'):
            os.makedirs(os.path.join(self.state_dir, name), exist_ok=True)
        with open(os.path.join(self.config_dir, 'glance-api-paste.ini'),
                  'w') as f:
            f.write(_PASTE)
        with open(os.open(self.config_file,
                          os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
                  'w') as f:
            f.write(_ini(config_sections(self.state_dir,
                                         self.keystone_authtoken)))

    def _db_sync(self) -> None:
        """``glance-manage db sync``, as an operator runs it first."""
        cmd = [sys.executable, '-c',
               'import sys; from glance.cmd.manage import main; '
               'sys.exit(main())',
               '--config-file', self.config_file, 'db', 'sync']
        try:
            subprocess.run(cmd, check=True, capture_output=True, text=True,
                           timeout=SYNC_TIMEOUT)
        except subprocess.CalledProcessError as err:
            raise exception.InvalidConfiguration(
                reason='glance-manage db sync failed: %s' %
                err.stderr.strip()[-2000:]) from err
        except subprocess.TimeoutExpired as err:
            raise exception.InvalidConfiguration(
                reason='glance-manage db sync took over %d s' %
                SYNC_TIMEOUT) from err

    def start(self) -> None:
        """Write the configuration, sync the schema, start serving.

        Raises InvalidConfiguration naming Glance's address, the options
        that set it, the child's exit status and its own error (the last
        line it wrote) when the child does not serve.
        """
        self._write_config()
        self._db_sync()
        errors = os.path.join(self.state_dir, 'glance-api.stderr')
        with open(errors, 'w') as stderr:
            # Glance reads glance-api.conf from the directory named by
            # OS_GLANCE_CONFIG_DIR.
            self._process = subprocess.Popen(
                [sys.executable, '-m', 'nova.wsgi_server', GLANCE_APP,
                 self.host, str(self.port), 'Glance'],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=stderr, text=True,
                env=dict(os.environ, OS_GLANCE_CONFIG_DIR=self.config_dir))
        line = self._process.stdout.readline().strip()
        if not line.startswith('http://'):
            # No URL: the child ended (or closed its stdout) before it
            # served.
            try:
                status = self._process.wait(timeout=START_TIMEOUT)
            except subprocess.TimeoutExpired:
                self._process.kill()
                status = self._process.wait()
            self._close()
            raise exception.InvalidConfiguration(reason=(
                'Glance did not start on %s:%s%s (exit %s): %s; its '
                'output is in %s' % (
                    self.host, self.port,
                    ', set by %s' % self.options if self.options else '',
                    status, _last_line(errors), errors)))
        self.url = line
        LOG.info('Glance listening at %s', self.url)

    def stop(self) -> None:
        """Stop the child (its requests in progress are cut)."""
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._close()

    def _close(self) -> None:
        for stream in (self._process.stdin, self._process.stdout):
            if stream is not None:
                stream.close()
        self._process = None


def _last_line(path: str) -> str:
    """The last non-blank line of the file at ``path`` (a traceback's
    is the error itself), or a note that there is none."""
    with open(path, errors='replace') as f:
        lines = [line.strip() for line in f if line.strip()]
    return lines[-1] if lines else 'it wrote no error'

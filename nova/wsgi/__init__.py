"""WSGI applications of nova's HTTP services, for any WSGI server.

Operators run the Compute API as upstream nova's, a module exposing
``application`` (:mod:`nova.wsgi.osapi_compute`), under gunicorn, uWSGI
or mod_wsgi with several worker processes; Placement runs the same way
from its own package (``placement.wsgi.api:application``). See
doc/source/admin/deployment.rst for the commands. ``nova-api`` serves the
same application in one process (:mod:`nova.cmd.api`).

The configuration files come from the environment, as upstream reads
them: ``OS_NOVA_CONFIG_FILES`` (files separated by ``;``), else
``nova.conf`` in ``OS_NOVA_CONFIG_DIR``, else oslo.config's search path
(/etc/nova/nova.conf ...). A configuration error raises: the WSGI server
logs it and its worker does not start.
"""

from collections.abc import Mapping
import os

from oslo_config import cfg

from nova import cmd
from nova import rpc
import nova.conf
from nova.api import wsgi_app
from nova.compute import api as compute_api
from nova.pci import config as pci_config

CONFIG_FILES_ENV = 'OS_NOVA_CONFIG_FILES'
CONFIG_DIR_ENV = 'OS_NOVA_CONFIG_DIR'
CONFIG_FILE = 'nova.conf'


def config_args(environ: Mapping[str, str]) -> list[str]:
    """The ``--config-file`` arguments the environment names (none: the
    oslo.config search path)."""
    files = [path.strip() for path in
             environ.get(CONFIG_FILES_ENV, '').split(';') if path.strip()]
    if not files and environ.get(CONFIG_DIR_ENV, '').strip():
        files = [os.path.join(environ[CONFIG_DIR_ENV].strip(), CONFIG_FILE)]
    args = []
    for path in files:
        args += ['--config-file', path]
    return args


def compute_api_app(conf: cfg.ConfigOpts):
    """The Compute API application of a parsed ``conf``, with messaging
    set up (both nova-api and the WSGI entry point serve this)."""
    rpc.init(conf)
    return wsgi_app.make_app(conf, compute_api.API(conf))


def init_compute_api(environ: Mapping[str, str] = os.environ,
                     conf: cfg.ConfigOpts = nova.conf.CONF):
    """Read the configuration the environment names, set up logging and
    the database, check ``[pci]`` as nova-api does, and return the
    Compute API application."""
    conf = cmd.parse_args(config_args(environ), conf)
    pci_config.load(conf)
    return compute_api_app(conf)

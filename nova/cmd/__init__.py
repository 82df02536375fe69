"""Console entry points of the nova services."""

import logging
import sys

from oslo_config import cfg

import nova.conf
from nova.db import api as db


def parse_args(argv: list[str] | None = None,
               conf: cfg.ConfigOpts = nova.conf.CONF) -> cfg.ConfigOpts:
    """Load nova.conf and command-line options, set up logging and the DB.

    Configuration files default to oslo.config's search path
    (/etc/nova/nova.conf etc.); ``--config-file`` adds more.
    """
    conf(sys.argv[1:] if argv is None else argv, project='nova')
    logging.basicConfig(
        level=logging.INFO,
        format='%(asctime)s %(levelname)s %(name)s %(message)s')
    db.configure(conf)
    return conf

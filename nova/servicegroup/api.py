"""Service liveness: heartbeats in the ``services`` table.

Every running service reports every ``[DEFAULT]report_interval`` seconds
by setting ``last_seen_up`` to the current time and counting the report in
``report_count`` (see ``nova.service.Service``). A service is up while its
last report is at most ``[DEFAULT]service_down_time`` seconds old; a row
that never reported counts from its creation, as upstream Nova does, so a
service registered a moment ago is up. Clocks of the hosts must agree to
well within ``service_down_time`` (NTP), as for upstream Nova.

An operator may force a service down (``forced_down``, through
``PUT /os-services``): it is then down whatever its heartbeats say, so its
instances can be evacuated at once instead of after
``service_down_time``. That is the operator's promise that the host is
really dead (fenced); nova cannot check it.
"""

import datetime

from oslo_config import cfg
from oslo_log import log as logging
from oslo_utils import timeutils

from nova.db import api as db
from nova.db import records
from nova import exception

LOG = logging.getLogger(__name__)


def register(context, host: str, binary: str,
             topic: str | None) -> records.Service:
    """The services row of ``binary`` on ``host``, created if missing."""
    try:
        return db.service_get_by_host_and_binary(context, host, binary)
    except exception.ServiceHostBinaryNotFound:
        pass
    try:
        service = db.service_create(
            context, {'host': host, 'binary': binary, 'topic': topic})
    except exception.ServiceExists:
        # Another process with the same host and binary won the race.
        return db.service_get_by_host_and_binary(context, host, binary)
    LOG.info('Registered service %s on host %s', binary, host)
    return service


def report_state(context, host: str, binary: str,
                 topic: str | None) -> None:
    """Record that ``binary`` on ``host`` is up now (one heartbeat).

    The row is created first if missing (first start, or an operator
    removed it meanwhile).
    """
    if not db.service_report(context, host, binary):
        register(context, host, binary, topic)
        db.service_report(context, host, binary)


def last_seen(service: records.Service) -> datetime.datetime | None:
    """When the service was last known up: its last report, else creation.
    """
    return service.last_seen_up or service.created_at


def is_up(service: records.Service | None, conf: cfg.ConfigOpts,
          now: datetime.datetime | None = None) -> bool:
    """True if ``service`` reported within ``[DEFAULT]service_down_time``
    and is not forced down.

    A missing row (None) is down: nothing there ever reported.
    """
    if service is None or service.forced_down:
        return False
    seen = last_seen(service)
    if seen is None:
        return False
    now = now or timeutils.utcnow()
    return (now - seen).total_seconds() <= conf.service_down_time


def down_reason(service: records.Service | None, host: str,
                now: datetime.datetime | None = None) -> str:
    """Why ``host`` counts as down, for logs and NoValidHost reasons,
    e.g. ``hgx-2 is down (last seen 73s ago)``."""
    if service is not None and service.forced_down:
        return '%s is down (forced down by an operator)' % host
    seen = last_seen(service) if service is not None else None
    if seen is None:
        return '%s is down (no service has ever reported from it)' % host
    age = int(((now or timeutils.utcnow()) - seen).total_seconds())
    return '%s is down (last seen %ds ago, at %s UTC)' % (
        host, age, seen.strftime('%Y-%m-%d %H:%M:%S'))

"""Instance actions: the record of what was asked of a server and how each
step of it went (``GET /servers/{id}/os-instance-actions``).

Two calls, as upstream Nova splits the work:

* nova-api records the request when it accepts it::

      instance_actions.start(context, instance_uuid, instance_actions.STOP)

* every service that runs a step of it wraps the step::

      with instance_actions.step(context, instance_uuid,
                                 'compute_stop_instance', host=self.host):
          ...

  The step is found by the request id the context carries over RPC. It
  ends with result ``Success``, or ``Error`` (and its traceback, which
  only admins see) if the block raised (the exception propagates) or
  called ``fail(reason)`` on the yielded ``Step``. A
  failed step marks the whole action ``message: Error``; the action's
  ``finish_time`` is the end of its latest step. A step with no action
  to belong to (a periodic task, a start-up repair, a request that was
  not recorded) runs unrecorded.

Recording never fails the operation it records: a database error while
recording is logged and the operation goes on.
"""

import contextlib
import traceback
from collections.abc import Iterator

from oslo_log import log as logging
from oslo_utils import timeutils

from nova.db import api as db

LOG = logging.getLogger(__name__)

# Action names, as upstream Nova records them.
CREATE = 'create'
DELETE = 'delete'
REBOOT = 'reboot'
STOP = 'stop'
START = 'start'
REBUILD = 'rebuild'
SHELVE = 'shelve'
SHELVE_OFFLOAD = 'shelveOffload'
UNSHELVE = 'unshelve'
RESIZE = 'resize'
MIGRATE = 'migrate'
EVACUATE = 'evacuate'
CONFIRM_RESIZE = 'confirmResize'
REVERT_RESIZE = 'revertResize'
CREATE_IMAGE = 'createImage'
CREATE_BACKUP = 'createBackup'
LOCK = 'lock'
UNLOCK = 'unlock'
# Started by the compute, not a user: a device the server holds broke.
PCI_DEVICE_UNHEALTHY = 'pciDeviceUnhealthy'

SUCCESS = 'Success'
ERROR = 'Error'


def start(context, instance_uuid: str, action: str) -> dict | None:
    """Record that the caller of ``context`` started ``action`` on the
    instance now; return the record (None if it could not be written)."""
    try:
        return db.action_start(context, {
            'action': action, 'instance_uuid': instance_uuid,
            'request_id': context.request_id,
            'user_id': context.user_id, 'project_id': context.project_id,
            'start_time': timeutils.utcnow()})
    except Exception:
        LOG.exception('Could not record action %s of instance %s',
                      action, instance_uuid)
        return None


class Step:
    """The step being recorded; ``fail(reason)`` marks it ``Error`` with
    ``reason`` as its traceback, for steps that end a failed action
    without raising (e.g. an unshelve that found no host)."""

    def __init__(self) -> None:
        self.failure: str | None = None

    def fail(self, reason: str) -> None:
        self.failure = reason


@contextlib.contextmanager
def step(context, instance_uuid: str, event: str,
         host: str | None = None) -> Iterator[Step]:
    """Record the block as step ``event`` of the action the request of
    ``context`` made on the instance (see the module docstring)."""
    record = _event_start(context, instance_uuid, event, host)
    outcome = Step()
    try:
        yield outcome
    except BaseException:
        _event_finish(context, record, ERROR, traceback.format_exc())
        raise
    if outcome.failure is not None:
        _event_finish(context, record, ERROR, outcome.failure)
    else:
        _event_finish(context, record, SUCCESS, None)


def _event_start(context, instance_uuid: str, event: str,
                 host: str | None) -> dict | None:
    try:
        return db.action_event_start(
            context, instance_uuid, context.request_id,
            {'event': event, 'host': host,
             'start_time': timeutils.utcnow()})
    except Exception:
        LOG.exception('Could not record step %s of instance %s', event,
                      instance_uuid)
        return None


def _event_finish(context, record: dict | None, result: str,
                  trace: str | None) -> None:
    if record is None:
        return
    try:
        db.action_event_finish(
            context, record['id'],
            {'result': result, 'traceback': trace,
             'finish_time': timeutils.utcnow()},
            failed=result == ERROR)
    except Exception:
        LOG.exception('Could not record the end of step %s', record['event'])

"""The compute's reaction to device health: tell the servers holding a
device that became unhealthy, and stop them if the operator asks to.

The resource tracker observes health at each update (the driver's
findings, and operators' marks with ``nova-manage pci device set``) and
hands the changes to :func:`react`. Each server holding a device that
became unhealthy gets an instance action with a failed event and a fault
naming the device; with ``[pci]unhealthy_device_action = stop`` it is
stopped too, in a thread of its own if a build or action holds its lock
(perhaps the very update that found the fault), and keeps the device as
any stopped server does.

:class:`Compute` lists what this uses of the compute manager, as
``nova.compute.repair.Compute`` does for the repairs.
"""

from __future__ import annotations

import threading
from typing import Protocol, TYPE_CHECKING

from oslo_log import log as logging

from nova import context as nova_context
from nova import exception
from nova.compute import instance_actions
from nova.compute import task_states
from nova.compute import utils as compute_utils
from nova.compute import vm_states
from nova.db import api as db

if TYPE_CHECKING:
    from oslo_config import cfg

    from nova.pci import health as pci_health
    from nova.virt import driver as virt_driver

LOG = logging.getLogger(__name__)


class Compute(Protocol):
    """What the health reaction needs of the compute whose devices
    changed (``nova.compute.manager.ComputeManager``): its host and
    hypervisor, and the steps that let a stop for health wait for, and
    end like, any other action on the server."""

    #: The host whose devices changed.
    host: str
    #: Read for ``[pci]unhealthy_device_action``.
    conf: cfg.ConfigOpts
    #: Powers off the servers stopped for their devices.
    driver: virt_driver.ComputeDriver

    def instance_lock(self, instance_uuid: str) -> threading.Lock:
        """Serializes the stop with builds, actions and deletes of the
        same instance on this host."""

    def finish_action(self, context, instance_uuid: str, task_state: str,
                      values: dict) -> bool:
        """Store the outcome of the stop unless a delete took over."""


def react(compute: Compute, changes: list[pci_health.HealthChange]) -> None:
    """Tell each server holding a device that became unhealthy: an
    instance action with a failed event and a fault naming the device;
    with ``[pci]unhealthy_device_action = stop`` the server is stopped
    too (it keeps the device, as any stopped server)."""
    broken: dict[str, list[pci_health.HealthChange]] = {}
    for change in changes:
        if not change.healthy and change.instance_uuid:
            broken.setdefault(change.instance_uuid, []).append(change)
    for instance_uuid, held in sorted(broken.items()):
        reason = '; '.join(
            'PCI device %s is unhealthy (%s): %s' % (
                c.address, c.source, c.reason) for c in held)
        context = nova_context.get_admin_context()
        instance_actions.start(context, instance_uuid,
                               instance_actions.PCI_DEVICE_UNHEALTHY)
        with instance_actions.step(context, instance_uuid,
                                   'compute_pci_device_unhealthy',
                                   host=compute.host) as step:
            step.fail(reason)
        try:
            db.instance_update(context, instance_uuid,
                               {'fault_message': reason})
        except exception.InstanceNotFound:
            continue
        if compute.conf.pci.unhealthy_device_action == 'stop':
            _stop_for_health(compute, instance_uuid, reason)


def _stop_for_health(compute: Compute, instance_uuid: str,
                     reason: str) -> None:
    """Stop an active server whose device broke (recorded as a ``stop``
    action); at once, or once a build or action running on it (holding
    its lock, maybe the very update that found the fault) is done."""
    lock = compute.instance_lock(instance_uuid)
    if lock.acquire(blocking=False):
        try:
            _stop_unhealthy(compute, instance_uuid, reason)
        finally:
            lock.release()
        return

    def later():
        with lock:
            _stop_unhealthy(compute, instance_uuid, reason)
    threading.Thread(target=later, daemon=True,
                     name='stop-%s' % instance_uuid).start()


def _stop_unhealthy(compute: Compute, instance_uuid: str,
                    reason: str) -> None:
    """Stop the server (its lock held) if it is active and idle here."""
    context = nova_context.get_admin_context()
    try:
        db.instance_update(
            context, instance_uuid,
            {'task_state': task_states.POWERING_OFF},
            expected={'vm_state': vm_states.ACTIVE, 'task_state': None,
                      'host': compute.host})
    except (exception.InstanceUpdateConflict,
            exception.InstanceNotFound):
        LOG.info('Instance %s is not active and idle on %s; not '
                 'stopping it for its unhealthy device', instance_uuid,
                 compute.host)
        return
    LOG.warning('Stopping instance %s ([pci]unhealthy_device_action = '
                'stop): %s', instance_uuid, reason)
    instance_actions.start(context, instance_uuid, instance_actions.STOP)
    values = dict(compute_utils.SETTLED_STOPPED, task_state=None)
    with instance_actions.step(context, instance_uuid,
                               'compute_stop_instance',
                               host=compute.host) as step:
        try:
            compute.driver.power_off(instance_uuid)
        except Exception as exc:
            LOG.error('Could not stop instance %s: %s', instance_uuid,
                      exc)
            step.fail(exception.reason_of(exc))
            values = {'task_state': None,
                      'power_state': compute.driver.get_power_state(
                          instance_uuid)}
    compute.finish_action(context, instance_uuid,
                          task_states.POWERING_OFF, values)

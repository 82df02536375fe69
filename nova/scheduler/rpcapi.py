"""Client side of the nova-scheduler RPC API (topic ``scheduler``), and
the scheduler's answer, :class:`Selection`.

API versions (the SchedulerManager serves VERSION; each method is sent at
the version that introduced it, see nova.rpc):

* 1.0: select_destination
* 1.1: select_destination_for_move
* 1.2: both take ``return_selection=True`` and then answer with a
  Selection whose per-PCI-request providers are named ``pci_providers``;
  without it (a 1.0 / 1.1 caller) the same answer names them
  ``mappings``, as before. Under an ``[upgrade_levels]scheduler`` cap
  below 1.2 the methods are sent in their older form and that answer is
  read as a Selection too.
"""

import dataclasses

from oslo_config import cfg

import nova.conf
from nova import rpc

TOPIC = 'scheduler'
VERSION = '1.2'
# The version whose answers name the PCI providers ``pci_providers``.
_SELECTION = '1.2'
# A decision waits for Placement and for concurrent decisions' claims;
# under a burst of boots that takes longer than [DEFAULT]
# rpc_response_timeout, and a build that then failed would have GPUs
# free. The scheduler heartbeats while it decides, so one that died is
# still noticed after rpc.CALL_MONITOR_TIMEOUT.
SELECT_TIMEOUT = 1800


@dataclasses.dataclass(frozen=True)
class Selection:
    """Where the scheduler put an instance and what it claimed there.

    ``allocation_request`` is the Placement candidate claimed for the
    instance, as Placement returned it: its own ``mappings`` are request
    group suffix -> providers. ``pci_providers`` is PCI request id -> the
    device provider UUIDs chosen for that request, in device order (what
    the compute claims devices by).
    """

    host: str
    nodename: str
    allocation_request: dict
    pci_providers: dict[str, list[str]]

    def to_primitive(self, legacy: bool = False) -> dict:
        """The answer as sent over RPC; ``legacy``: as a 1.0 / 1.1 caller
        reads it (``mappings`` for the PCI providers)."""
        return {'host': self.host, 'nodename': self.nodename,
                'allocation_request': self.allocation_request,
                'mappings' if legacy else 'pci_providers':
                    self.pci_providers}

    @classmethod
    def from_primitive(cls, data: dict) -> 'Selection':
        """A Selection from ``to_primitive`` output of either form."""
        providers = data['pci_providers'] if 'pci_providers' in data \
            else data['mappings']
        return cls(host=data['host'], nodename=data['nodename'],
                   allocation_request=data['allocation_request'],
                   pci_providers=providers)


class SchedulerAPI:
    """Asks any scheduler for a destination."""

    def __init__(self, conf: cfg.ConfigOpts | None = None) -> None:
        self.client = rpc.VersionedClient(
            conf if conf is not None else nova.conf.CONF, TOPIC)

    def _select(self, context, method: str, introduced: str,
                **kwargs) -> Selection:
        """Call ``method`` at 1.2 asking for the Selection form, or at
        ``introduced`` (where a cap stops 1.2) in the older form."""
        waits = {'timeout': SELECT_TIMEOUT,
                 'call_monitor_timeout': rpc.CALL_MONITOR_TIMEOUT}
        if self.client.can_send_version(_SELECTION):
            cctxt = self.client.prepare(method, _SELECTION, **waits)
            kwargs['return_selection'] = True
        else:
            cctxt = self.client.prepare(method, introduced, **waits)
        return Selection.from_primitive(cctxt.call(context, method,
                                                   **kwargs))

    def select_destination(self, context, instance_uuid: str,
                           excluded_hosts: list[str],
                           build_owner: str) -> Selection:
        """Pick a host for the instance and claim its resources, for the
        build ``build_owner`` (a conductor) drives.

        Raises NoValidHost, or BuildLeaseLost if the build is no longer
        ``build_owner``'s to schedule.
        """
        return self._select(context, 'select_destination', '1.0',
                            instance_uuid=instance_uuid,
                            excluded_hosts=list(excluded_hosts),
                            build_owner=build_owner)

    def select_destination_for_move(self, context, instance_uuid: str,
                                    migration_uuid: str,
                                    excluded_hosts: list[str],
                                    requested_host: str | None
                                    ) -> Selection:
        """Pick and claim a destination for the migration's new flavor
        (the instance is the consumer); raises NoValidHost."""
        return self._select(context, 'select_destination_for_move', '1.1',
                            instance_uuid=instance_uuid,
                            migration_uuid=migration_uuid,
                            excluded_hosts=list(excluded_hosts),
                            requested_host=requested_host)

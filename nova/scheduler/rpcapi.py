"""Client side of the nova-scheduler RPC API (topic ``scheduler``).

API versions (the SchedulerManager serves VERSION; each method is sent at
the version that introduced it, see nova.rpc):

* 1.0: select_destination
* 1.1: select_destination_for_move
"""

from oslo_config import cfg

import nova.conf
from nova import rpc

TOPIC = 'scheduler'
VERSION = '1.1'


class SchedulerAPI:
    """Asks any scheduler for a destination."""

    def __init__(self, conf: cfg.ConfigOpts | None = None) -> None:
        self.client = rpc.VersionedClient(
            conf if conf is not None else nova.conf.CONF, TOPIC)

    def select_destination(self, context, instance_uuid: str,
                           excluded_hosts: list[str],
                           build_owner: str) -> dict:
        """Pick a host for the instance and claim its resources, for the
        build ``build_owner`` (a conductor) drives.

        Returns ``{"host", "nodename", "allocation_request", "mappings"}``;
        raises NoValidHost, or BuildLeaseLost if the build is no longer
        ``build_owner``'s to schedule.
        """
        cctxt = self.client.prepare('select_destination', '1.0')
        return cctxt.call(context, 'select_destination',
                          instance_uuid=instance_uuid,
                          excluded_hosts=list(excluded_hosts),
                          build_owner=build_owner)

    def select_destination_for_move(self, context, instance_uuid: str,
                                    migration_uuid: str,
                                    excluded_hosts: list[str],
                                    requested_host: str | None) -> dict:
        """Pick and claim a destination for the migration's new flavor
        (the instance is the consumer); raises NoValidHost."""
        cctxt = self.client.prepare('select_destination_for_move', '1.1')
        return cctxt.call(context, 'select_destination_for_move',
                          instance_uuid=instance_uuid,
                          migration_uuid=migration_uuid,
                          excluded_hosts=list(excluded_hosts),
                          requested_host=requested_host)

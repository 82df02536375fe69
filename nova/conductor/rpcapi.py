"""Client side of the nova-conductor RPC API (topic ``conductor``).

API versions (the ConductorManager serves VERSION; each method is sent at
the version that introduced it, see nova.rpc):

* 1.0: build_instance
* 1.1: unshelve_instance
* 1.2: migrate_server, confirm_resize, revert_resize
"""

from oslo_config import cfg

import nova.conf
from nova import rpc

TOPIC = 'conductor'
VERSION = '1.2'
_MOVES = '1.2'


class ConductorAPI:
    """Hands long-running workflows to any conductor."""

    def __init__(self, conf: cfg.ConfigOpts | None = None) -> None:
        self.client = rpc.VersionedClient(
            conf if conf is not None else nova.conf.CONF, TOPIC)

    def _cast(self, context, method: str, version: str, **kwargs) -> None:
        self.client.prepare(method, version).cast(context, method, **kwargs)

    def build_instance(self, context, instance_uuid: str) -> None:
        """Start building the instance; returns at once (a cast)."""
        self._cast(context, 'build_instance', '1.0',
                   instance_uuid=instance_uuid)

    def unshelve_instance(self, context, instance_uuid: str) -> None:
        """Schedule a SHELVED_OFFLOADED server again and start it there;
        returns at once (a cast)."""
        self._cast(context, 'unshelve_instance', '1.1',
                   instance_uuid=instance_uuid)

    def migrate_server(self, context, instance_uuid: str,
                       migration_uuid: str,
                       requested_host: str | None) -> None:
        """Run a resize or cold migration recorded by the API (a cast)."""
        self._cast(context, 'migrate_server', _MOVES,
                   instance_uuid=instance_uuid,
                   migration_uuid=migration_uuid,
                   requested_host=requested_host)

    def confirm_resize(self, context, instance_uuid: str,
                       migration_uuid: str, wait: bool = False) -> None:
        """Confirm a finished move; ``wait`` makes it a call (a delete
        confirms first)."""
        cctxt = self.client.prepare('confirm_resize', _MOVES)
        send = cctxt.call if wait else cctxt.cast
        send(context, 'confirm_resize', instance_uuid=instance_uuid,
             migration_uuid=migration_uuid)

    def revert_resize(self, context, instance_uuid: str,
                      migration_uuid: str) -> None:
        """Revert a finished move (a cast)."""
        self._cast(context, 'revert_resize', _MOVES,
                   instance_uuid=instance_uuid,
                   migration_uuid=migration_uuid)

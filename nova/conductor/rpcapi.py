"""Client side of the nova-conductor RPC API (topic ``conductor``)."""

from nova import rpc

TOPIC = 'conductor'


class ConductorAPI:
    """Hands long-running workflows to any conductor."""

    def __init__(self) -> None:
        self.client = rpc.get_client(TOPIC)

    def build_instance(self, context, instance_uuid: str) -> None:
        """Start building the instance; returns at once (a cast)."""
        self.client.cast(context, 'build_instance',
                         instance_uuid=instance_uuid)

    def unshelve_instance(self, context, instance_uuid: str) -> None:
        """Schedule a SHELVED_OFFLOADED server again and start it there;
        returns at once (a cast)."""
        self.client.cast(context, 'unshelve_instance',
                         instance_uuid=instance_uuid)

    def migrate_server(self, context, instance_uuid: str,
                       migration_uuid: str,
                       requested_host: str | None) -> None:
        """Run a resize or cold migration recorded by the API (a cast)."""
        self.client.cast(context, 'migrate_server',
                         instance_uuid=instance_uuid,
                         migration_uuid=migration_uuid,
                         requested_host=requested_host)

    def confirm_resize(self, context, instance_uuid: str,
                       migration_uuid: str, wait: bool = False) -> None:
        """Confirm a finished move; ``wait`` makes it a call (a delete
        confirms first)."""
        if wait:
            self.client.call(context, 'confirm_resize',
                             instance_uuid=instance_uuid,
                             migration_uuid=migration_uuid)
        else:
            self.client.cast(context, 'confirm_resize',
                             instance_uuid=instance_uuid,
                             migration_uuid=migration_uuid)

    def revert_resize(self, context, instance_uuid: str,
                      migration_uuid: str) -> None:
        """Revert a finished move (a cast)."""
        self.client.cast(context, 'revert_resize',
                         instance_uuid=instance_uuid,
                         migration_uuid=migration_uuid)

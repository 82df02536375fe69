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

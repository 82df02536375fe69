"""Base class of the service managers (the RPC endpoints of services)."""

from oslo_config import cfg


class Manager:
    """What nova.service.Service expects of a manager, with defaults.

    ``init_host`` runs before the RPC server starts; ``periodic_tasks``
    returns ``[(name, callable, interval seconds)]``. A manager that sets
    ``binary`` (e.g. ``nova-compute``) and ``topic`` is registered in the
    services table by ``nova.service.Service``, which reports it up.
    Managers that talk to Placement build their own report client: the
    base class stays below the scheduler layer.
    """

    binary: str | None = None
    topic: str | None = None

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self.conf = conf

    def init_host(self) -> None:
        """Prepare before serving; nothing by default."""

    def periodic_tasks(self) -> list:
        return []

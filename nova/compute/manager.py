"""The nova-compute manager: owns the hypervisor driver of one host and
keeps its resources reported."""

import logging

from oslo_config import cfg

from nova import context as nova_context
from nova.compute import resource_tracker
from nova.db import api as db

LOG = logging.getLogger(__name__)

BINARY = 'nova-compute'
TOPIC = 'compute'


class ComputeManager:
    """Manages the instances and resources of one compute host."""

    def __init__(self, conf: cfg.ConfigOpts, driver, reportclient,
                 host: str | None = None) -> None:
        self.conf = conf
        self.host = host or conf.host
        self.driver = driver
        self.reportclient = reportclient
        # Built here so bad [pci] config stops the service at start.
        self.rt = resource_tracker.ResourceTracker(
            conf, self.host, driver, reportclient)

    def init_host(self) -> None:
        """Connect to the hypervisor, register and report resources."""
        context = nova_context.get_admin_context()
        self.driver.init_host(self.host)
        self._register_service(context)
        self.rt.update_available_resource(context)
        LOG.info('Compute %s started with %d PCI devices tracked',
                 self.host, len(self.rt.pci_tracker.pci_devs))

    def _register_service(self, context) -> None:
        try:
            db.service_get_by_host_and_binary(context, self.host, BINARY)
        except Exception:
            db.service_create(context, {'host': self.host, 'binary': BINARY,
                                        'topic': TOPIC})

    def update_available_resource(self) -> None:
        """Periodic task: refresh and report this host's resources."""
        self.rt.update_available_resource(nova_context.get_admin_context())

    def periodic_tasks(self) -> list:
        return [('update_available_resource', self.update_available_resource,
                 self.conf.update_resources_interval)]

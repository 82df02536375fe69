"""Fakes of what a compute talks to, for the compute unit tests: a
hypervisor driver, Placement as the report client shows it, and a
conductor. Each test module gives the driver its own host (devices,
resources, NUMA topology)."""

from nova.compute import provider_tree as ptree
from nova import exception
from nova.pci import device as pci_device
from nova.pci import health as pci_health
from nova.virt import driver as virt_driver
from nova.virt import hardware


class FakeDriver(virt_driver.ComputeDriver):
    """A hypervisor with the given host, whose guests are a dict: uuid ->
    power state. Calls that change guests are recorded in ``calls``,
    the root disk each spawn or rebuild got in ``root_disks``,
    ``console`` is every guest's console output, and ``observations``
    counts the looks at the host."""

    def __init__(self, devices: list[pci_device.HostDevice],
                 resources: dict,
                 topology: hardware.HostNUMATopology | None = None
                 ) -> None:
        self.devices = devices
        self.resources = resources
        self.topology = topology or hardware.HostNUMATopology()
        self.guests: dict[str, int] = {}
        self.spawned: list[tuple[str, list[str]]] = []
        self.calls: list[tuple[str, str]] = []
        self.fail_spawn: Exception | None = None
        self.root_disks: list[tuple[str, object, bool]] = []
        # Every GuestSpec spawn and rebuild were given, in order.
        self.specs: list[virt_driver.GuestSpec] = []
        self.console = ''
        # How many times the host was observed (observe_host).
        self.observations = 0

    def init_host(self, host):
        self.calls.append(('init_host', host))

    def observe_host(self) -> virt_driver.HostObservation:
        self.observations += 1
        return virt_driver.HostObservation(
            resources=self.resources, devices=self.devices,
            numa=self.topology,
            health=pci_health.from_host_devices(self.devices))

    def spawn(self, spec):
        instance_uuid = spec.instance_uuid
        self.calls.append(('spawn', instance_uuid))
        self.specs.append(spec)
        self.root_disks.append((instance_uuid, spec.root_disk, False))
        # The guest exists when the failure hits: the manager must
        # destroy it.
        self.guests[instance_uuid] = virt_driver.RUNNING
        if self.fail_spawn is not None:
            raise self.fail_spawn
        self.spawned.append((instance_uuid, sorted(spec.addresses)))

    def destroy(self, instance_uuid):
        self.calls.append(('destroy', instance_uuid))
        self.guests.pop(instance_uuid, None)

    def power_off(self, instance_uuid):
        # As the interface says: a guest that is gone is off already.
        self.calls.append(('power_off', instance_uuid))
        if instance_uuid in self.guests:
            self.guests[instance_uuid] = virt_driver.SHUTDOWN

    def power_on(self, instance_uuid):
        self.calls.append(('power_on', instance_uuid))
        self._existing(instance_uuid)
        self.guests[instance_uuid] = virt_driver.RUNNING

    def reboot(self, instance_uuid, hard):
        self.calls.append(('reboot_hard' if hard else 'reboot',
                           instance_uuid))
        self._existing(instance_uuid)
        self.guests[instance_uuid] = virt_driver.RUNNING

    def rebuild(self, spec, power_on, keep_disk=False):
        instance_uuid = spec.instance_uuid
        self.calls.append(('rebuild', instance_uuid))
        self.specs.append(spec)
        self.root_disks.append((instance_uuid, spec.root_disk, keep_disk))
        self.guests[instance_uuid] = (virt_driver.RUNNING if power_on
                                      else virt_driver.SHUTDOWN)

    def get_power_state(self, instance_uuid):
        return self.guests.get(instance_uuid, virt_driver.NOSTATE)

    def list_instance_uuids(self):
        return sorted(self.guests)

    def get_console_output(self, instance_uuid):
        return self.console

    def _existing(self, instance_uuid):
        if instance_uuid not in self.guests:
            raise exception.NovaException('no guest %s' % instance_uuid)


class FakeReportClient:
    """Placement as a compute sees it: the last provider tree sent
    (``placement``), every tree sent, the allocations on it, and a
    record of what was asked and deleted."""

    def __init__(self) -> None:
        self.placement: ptree.ProviderTree | None = None
        self.sent: list[ptree.ProviderTree] = []
        self.allocations: dict = {}
        self.allocation_reads = 0
        # Trees taken from the client's memory instead of Placement.
        self.remembered_reads = 0
        self.deleted: list[str] = []
        # Conflicts to raise before accepting an update.
        self.conflicts = 0

    def get_provider_by_name(self, name: str) -> dict | None:
        if self.placement is None or not self.placement.exists(name):
            return None
        return {'uuid': self.placement.data(name).uuid}

    def get_provider_tree(self, root_uuid: str) -> ptree.ProviderTree | None:
        if self.placement is None or not self.placement.exists(root_uuid):
            return None
        return self.placement.copy()

    def remembered_tree(self, root_uuid: str) -> ptree.ProviderTree | None:
        self.remembered_reads += 1
        return self.get_provider_tree(root_uuid)

    def get_allocations_for_tree(self, root_uuid: str) -> dict:
        self.allocation_reads += 1
        return self.allocations

    def update_from_provider_tree(self, tree: ptree.ProviderTree,
                                  from_memory: bool = False) -> None:
        if self.conflicts:
            self.conflicts -= 1
            raise exception.ResourceProviderUpdateConflict(
                uuid=tree.roots()[0].uuid, generation=1, error='test')
        self.sent.append(tree.copy())
        self.placement = tree.copy()

    def delete_allocation_for_instance(self, consumer_uuid: str) -> None:
        self.deleted.append(consumer_uuid)


class FakeConductorAPI:
    """Records the casts a compute makes to a conductor."""

    def __init__(self) -> None:
        self.confirmed: list[tuple[str, str]] = []

    def confirm_resize(self, context, instance_uuid, migration_uuid):
        self.confirmed.append((instance_uuid, migration_uuid))

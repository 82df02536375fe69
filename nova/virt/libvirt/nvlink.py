"""NVLink partitions of a shared-NVSwitch host, driven by nova-compute.

With the GPU module map (nova.virt.libvirt.gpu_modules: Fabric Manager
names GPUs only by module ID on HGX H100/H200) this module activates the
partition whose module IDs equal an instance's GPUs, deactivates it when
the instance is gone, and repairs what crashes and Fabric Manager restarts
leave.

"Nova's records" of which instance holds which partition
(nova.virt.libvirt.nvlink_records) are a JSON file per host next to the
module map; a partition is recorded before it is activated and forgotten
after it is deactivated, so a crash in between leaves a record that the
start-up repair settles. Partitions nova may have left active (a
deactivation or activation that failed, an instance gone while the compute
was down) are recorded as orphans, which the repair deactivates. Any other
active partition was activated behind nova's back: nova leaves it alone
and offers none of its devices.

A partition whose activation fails for a hardware reason (FM's
NVLINK_ERROR: link training failed) ``[pci]partition_quarantine_failures``
times in a row is quarantined: recorded with the error in the same file,
its devices not offered, until a re-probe by the periodic repair
(activate, then deactivate at once, while no active partition overlaps
it) succeeds, or the compute finds the broken GPU or NVSwitch healthy
again (``release_quarantined``). Errors that say nothing about the
partition itself (timeouts, FM not running or still initializing, wrong
mode, GENERIC_ERROR, IN_USE) never quarantine.

``observe`` is the compute's one look at the fabric per resource update:
one Fabric Manager snapshot (its partitions and its NVLink failed
devices, read together) and what ``nvidia-smi -q`` says of the GPUs'
health.
"""

from collections.abc import Sequence
import os
import threading

from oslo_log import log as logging

from nova import exception
from nova.pci import health as pci_health
from nova.pci import partitions as pci_partitions
from nova.virt.libvirt import fabric_manager
from nova.virt.libvirt import gpu_modules
from nova.virt.libvirt import nvidia_smi
from nova.virt.libvirt import nvlink_records

LOG = logging.getLogger(__name__)

# FM errors that say the partition's hardware failed, not FM or the call:
# only link training failure is documented as such
# (doc/source/reference/nvidia-facts.rst, section 2).
HARDWARE_ERRORS = (exception.FabricManagerNVLinkError,)


class NVLinkPartitions:
    """Fabric Manager partitions of one host and the instances holding them.
    """

    def __init__(self, client: fabric_manager.FabricManagerClient,
                 nvidia_smi_path: str, module_override: dict[str, int],
                 state_dir: str, quarantine_failures: int = 1) -> None:
        self.client = client
        # Hardware failures in a row that quarantine a partition.
        self.quarantine_failures = quarantine_failures
        self.nvidia_smi_path = nvidia_smi_path
        self.module_override = dict(module_override)
        self.state_dir = state_dir
        # The host's NVIDIA GPUs, and the module ID of each that has one.
        self.gpu_addresses: frozenset[str] = frozenset()
        self.module_map: dict[str, int] = {}
        # address -> why nova cannot tell its module ID
        self.unmapped: dict[str, str] = {}
        # Nova's records of the partitions (loaded by ``load``).
        self.records = nvlink_records.PartitionRecords('')
        self._lock = threading.Lock()

    # Start ------------------------------------------------------------------

    def start(self, host: str, gpu_addresses: list[str]) -> None:
        """Learn module IDs from nvidia-smi, then load ``host``'s state.

        ``gpu_addresses`` are the host's NVIDIA GPUs; the ones whose module
        ID is missing or shared with another GPU are named in a warning
        and kept in ``unmapped``.
        """
        os.makedirs(self.state_dir, exist_ok=True)
        map_path = self._path(host, 'gpu-modules')
        saved = nvlink_records.read_json(map_path)
        # What nvidia-smi sees now wins over what it saw earlier; GPUs on
        # vfio-pci are not listed and keep their saved module ID.
        learned = {**saved, **nvidia_smi.read_nvidia_smi(self.nvidia_smi_path)}
        if learned != saved:
            nvlink_records.write_json(map_path, learned)
        self.load(host, gpu_addresses)
        if self.unmapped:
            LOG.warning(
                'Cannot place GPUs %s in NVLink partitions: %s. They get no '
                'multi-GPU group; set [libvirt]gpu_module_map or bind them '
                'to the nvidia driver once so nvidia-smi shows their module '
                'IDs', ', '.join(sorted(self.unmapped)), '; '.join(
                    '%s %s' % item for item in sorted(self.unmapped.items())))

    def load(self, host: str, gpu_addresses: list[str]) -> None:
        """Read ``host``'s saved module map and records (no nvidia-smi).
        """
        merged = {
            **nvlink_records.read_json(self._path(host, 'gpu-modules')),
            **self.module_override}
        self.gpu_addresses = frozenset(gpu_addresses)
        self.module_map, self.unmapped = gpu_modules.check_map(
            merged, gpu_addresses)
        self.records = nvlink_records.PartitionRecords.load(
            self._path(host, 'partitions'))

    def _path(self, host: str, what: str) -> str:
        return nvlink_records.state_file(self.state_dir, host, what)

    # Partitions by address --------------------------------------------------

    def partitions(self) -> list[fabric_manager.Partition]:
        return self.client.list_partitions()

    def addresses_of(self, partition: fabric_manager.Partition
                     ) -> list[str] | None:
        """PCI addresses of a partition's GPUs; None if any is unmapped."""
        by_module = {m: a for a, m in self.module_map.items()}
        if not partition.module_ids <= set(by_module):
            return None
        return sorted(by_module[m] for m in partition.module_ids)

    def hardware_partitions(self) -> list[pci_partitions.HardwarePartition]:
        """FM's partitions with the PCI addresses of their GPUs.

        Partitions activated behind nova's back are marked ``foreign``,
        quarantined ones carry the reason.
        """
        partitions = self.partitions()
        foreign = {p.id for p in self.foreign(partitions)}
        quarantined = self.quarantined()
        result = []
        for partition in partitions:
            addresses = self.addresses_of(partition)
            result.append(pci_partitions.HardwarePartition(
                partition.id, partition.module_ids,
                tuple(addresses) if addresses is not None else None,
                foreign=partition.id in foreign,
                quarantined=quarantined.get(partition.id)))
        return result

    def fabric_partitions(self) -> pci_partitions.FabricPartitions:
        """FM's partitions (``hardware_partitions``), the GPU module map
        and the GPUs without a module ID."""
        return pci_partitions.FabricPartitions(
            tuple(self.hardware_partitions()), dict(self.module_map),
            dict(self.unmapped))

    def quarantined(self) -> dict[int, str]:
        """Partition ID -> why nova keeps it out of use."""
        with self._lock:
            return dict(self.records.quarantined)

    def modules_of(self, addresses: list[str]) -> dict[str, int | None]:
        return {a: self.module_map.get(a) for a in addresses}

    def _partition_for(self, instance_uuid: str, addresses: list[str]
                       ) -> fabric_manager.Partition:
        modules = self.modules_of(addresses)
        missing = sorted(a for a, m in modules.items() if m is None)
        if missing:
            raise exception.NVLinkPartitionFailed(
                partition='(none)', uuid=instance_uuid, error=(
                    'GPUs %s have no known module ID (%s)' % (
                        ', '.join(missing), '; '.join(
                            self.unmapped.get(a, 'not a GPU nvidia-smi '
                                              'listed') for a in missing))))
        wanted = frozenset(m for m in modules.values() if m is not None)
        partitions = self.partitions()
        for partition in partitions:
            if partition.module_ids == wanted:
                return partition
        raise exception.NVLinkPartitionFailed(
            partition='(none)', uuid=instance_uuid, error=(
                'no Fabric Manager partition has exactly the modules %s of '
                'GPUs %s; partitions: %s' % (
                    sorted(wanted), ', '.join(sorted(addresses)),
                    ', '.join(p.describe() for p in partitions))))

    # Instance lifecycle -----------------------------------------------------

    def activate(self, instance_uuid: str, addresses: list[str]
                 ) -> int | None:
        """Make the partition of exactly the GPUs among ``addresses`` live.

        "Already active" is success only if the records give that
        partition to this instance, or nova left it active with no
        holder (an orphan not yet deactivated, e.g. of a guest lost at a
        restart), which the instance then holds. Returns the partition
        ID, None when the guest gets no GPU.
        Raises NVLinkPartitionFailed naming the partition and FM's error.
        """
        addresses = sorted(set(addresses) & self.gpu_addresses)
        if not addresses:
            return None
        with self._lock:
            partition = self._partition_for(instance_uuid, addresses)
            held_by = self.records.holder(partition.id)
            if partition.active:
                if held_by == instance_uuid:
                    return partition.id
                if held_by is None and partition.id in self.records.orphans:
                    # Left active by nova (e.g. its guest was lost at a
                    # restart) and not yet deactivated by the repair: the
                    # instance that holds these GPUs takes it over.
                    self.records.held[instance_uuid] = partition.id
                    self.records.orphans.discard(partition.id)
                    self.records.save()
                    LOG.info('NVLink partition %s, left active, is held '
                             'by instance %s again',
                             partition.describe(), instance_uuid)
                    return partition.id
                raise exception.NVLinkPartitionFailed(
                    partition=partition.describe(), uuid=instance_uuid,
                    error='Fabric Manager reports it already active and '
                    'nova records it as held by %s' % (
                        held_by or 'no instance'))
            self.records.held[instance_uuid] = partition.id
            self.records.orphans.discard(partition.id)
            self.records.save()
            try:
                self.client.activate(partition.id)
            except exception.FabricManagerError as err:
                del self.records.held[instance_uuid]
                if not isinstance(err, (exception.FabricManagerInUse,
                                        exception.FabricManagerBadParam)):
                    # FM may have activated it anyway (a timeout, FM dying
                    # mid-call): the repair checks.
                    self.records.orphans.add(partition.id)
                if isinstance(err, HARDWARE_ERRORS):
                    self.records.count_hardware_failure(
                        partition.id, partition.describe(), err.message,
                        self.quarantine_failures)
                self.records.save()
                raise exception.NVLinkPartitionFailed(
                    partition=partition.describe(), uuid=instance_uuid,
                    error=err.message) from err
            if self.records.failures.pop(partition.id, None):
                self.records.save()
            LOG.info('Activated NVLink partition %s for instance %s',
                     partition.describe(), instance_uuid)
            return partition.id

    def release(self, instance_uuid: str) -> None:
        """Deactivate the instance's partition once its guest is gone.

        A failure is logged and the partition becomes an orphan, which the
        periodic repair deactivates.
        """
        with self._lock:
            partition_id = self.records.held.pop(instance_uuid, None)
            if partition_id is None:
                return
            try:
                self.client.deactivate(partition_id)
            except exception.FabricManagerNotActive:
                pass
            except exception.FabricManagerError as err:
                self.records.orphans.add(partition_id)
                LOG.error('Could not deactivate NVLink partition %d of '
                          'deleted instance %s: %s; the periodic repair '
                          'retries', partition_id, instance_uuid,
                          err.message)
            else:
                LOG.info('Deactivated NVLink partition %d of instance %s',
                         partition_id, instance_uuid)
            self.records.save()

    def holders(self) -> dict[int, str]:
        """Partition ID -> instance uuid, as nova's records say."""
        with self._lock:
            return {pid: uuid for uuid, pid in self.records.held.items()}

    def release_quarantined(
            self, partitions: Sequence[pci_partitions.HardwarePartition]
            ) -> list[int]:
        """Offer again the quarantined ``partitions``, whose broken GPU
        or NVSwitch the compute found healthy again (see
        ``FabricView.to_release``); returns the IDs of those that were
        still quarantined. Only nova's records change: Fabric Manager is
        not asked."""
        with self._lock:
            released = []
            for partition in partitions:
                if partition.id not in self.records.quarantined:
                    continue
                LOG.warning('NVLink partition %s is no longer quarantined: '
                            'its hardware is healthy again (was: %s)',
                            partition.describe(),
                            self.records.quarantined.pop(partition.id))
                self.records.failures.pop(partition.id, None)
                released.append(partition.id)
            if released:
                self.records.save()
            return released

    def observe(self) -> tuple[pci_partitions.FabricView,
                               pci_health.HealthReport]:
        """The fabric as the compute sees it once per resource update:
        one Fabric Manager snapshot, its NVLink failed devices and its
        partitions read one right after the other, and the GPUs' and
        NVSwitches' health as ``nvidia-smi -q`` (the GPUs it lists) and
        those failed devices (every GPU and NVSwitch, when FM answers)
        show it. A Fabric Manager that cannot list its partitions makes a
        view with only the ``error``."""
        report = nvidia_smi.read_nvidia_smi_health(self.nvidia_smi_path)
        try:
            failed = self.client.failed_devices()
        except exception.FabricManagerError as err:
            LOG.debug('No NVLink failed devices from Fabric Manager: %s',
                      err.message)
        else:
            report = report.merge(_failed_devices_report(
                failed, self.gpu_addresses))
        try:
            fabric = pci_partitions.FabricView(
                fabric=self.fabric_partitions())
        except exception.FabricManagerError as err:
            fabric = pci_partitions.FabricView(error=err.message)
        return fabric, report

    def foreign(self, partitions: list[fabric_manager.Partition]
                ) -> list[fabric_manager.Partition]:
        """Active partitions nova neither holds nor left behind."""
        with self._lock:
            ours = set(self.records.held.values()) | self.records.orphans
        return [p for p in partitions if p.active and p.id not in ours]

    # Repair -----------------------------------------------------------------

    def forget_missing(self, guests: set[str]) -> None:
        """At compute start: drop records of instances without a domain.

        Their partitions become holder-less and the repair deactivates
        them (the compute died while deleting or failing a build).
        """
        with self._lock:
            for uuid in sorted(set(self.records.held) - guests):
                partition_id = self.records.held.pop(uuid)
                self.records.orphans.add(partition_id)
                LOG.warning('Instance %s holds NVLink partition %d in nova '
                            'records but has no guest; releasing it', uuid,
                            partition_id)
            self.records.save()

    def repair(self) -> dict[str, str]:
        """Make Fabric Manager's active set match nova's records.

        Orphans (active partitions nova left without a holder) are
        deactivated, and after that held ones that are inactive are
        activated again; partitions activated behind nova's back are left
        alone (``hardware_partitions`` marks them). Quarantined partitions
        are re-probed last. A Fabric
        Manager waiting in restart mode is given the recorded set
        (set-activated-list). Returns instance uuid -> why its partition
        could not be made active again.
        """
        with self._lock:
            try:
                partitions = self.partitions()
            except exception.FabricManagerNotConfigured as err:
                self._replay(err)
                return {}
            except exception.FabricManagerError as err:
                LOG.error('NVLink partition repair skipped: %s', err.message)
                return {}
            held = {pid: uuid for uuid, pid in self.records.held.items()}
            for partition in partitions:
                if partition.id not in self.records.orphans or \
                        partition.id in held:
                    continue
                if partition.active:
                    LOG.warning('NVLink partition %s is active but no '
                                'instance holds it; deactivating it',
                                partition.describe())
                    try:
                        self.client.deactivate(partition.id)
                    except exception.FabricManagerError as err:
                        LOG.error('Could not deactivate NVLink partition '
                                  '%s: %s', partition.describe(),
                                  err.message)
                        continue
                self.records.orphans.discard(partition.id)
            self.records.orphans &= {p.id for p in partitions}
            self.records.save()
            failed = {}
            for partition in partitions:
                owner = held.get(partition.id)
                if owner is None or partition.active:
                    continue
                LOG.warning('NVLink partition %s of instance %s is not '
                            'active; activating it again',
                            partition.describe(), owner)
                try:
                    self.client.activate(partition.id)
                except exception.FabricManagerError as err:
                    failed[owner] = exception.NVLinkPartitionFailed(
                        partition=partition.describe(), uuid=owner,
                        error='the guest runs without it: %s' %
                        err.message).message
                    LOG.error('%s', failed[owner])
            self._probe_quarantined(partitions)
            return failed

    def _probe_quarantined(self, partitions: list[fabric_manager.Partition]
                           ) -> None:
        """Activate and at once deactivate each quarantined partition that
        no active partition overlaps; one that passes is offered again.
        Called with the lock held, so no build's activation interleaves.
        """
        busy: set[int] = set()
        for partition in partitions:
            if partition.active:
                busy |= partition.module_ids
        for partition in partitions:
            if partition.id not in self.records.quarantined or \
                    partition.module_ids & busy:
                continue
            try:
                self.client.activate(partition.id)
            except exception.FabricManagerError as err:
                if not isinstance(err, HARDWARE_ERRORS):
                    # FM is not answering properly: also a failed probe
                    # would say nothing.
                    LOG.info('Re-probe of quarantined NVLink partition %s '
                             'not done: %s', partition.describe(),
                             err.message)
                continue
            try:
                self.client.deactivate(partition.id)
            except exception.FabricManagerError as err:
                # Left active without a holder: the next repair
                # deactivates it.
                self.records.orphans.add(partition.id)
                LOG.error('Could not deactivate NVLink partition %s after '
                          'its re-probe: %s', partition.describe(),
                          err.message)
            LOG.warning('NVLink partition %s passed its re-probe and is '
                        'no longer quarantined (was: %s)',
                        partition.describe(),
                        self.records.quarantined.pop(partition.id))
            self.records.save()

    def _replay(self, cause: exception.FabricManagerError) -> None:
        ids = sorted(set(self.records.held.values()))
        try:
            self.client.set_activated_list(ids)
        except exception.FabricManagerError as err:
            LOG.error('Fabric Manager is not ready (%s) and did not take '
                      'the active partition list %s: %s', cause.message,
                      ids, err.message)
            return
        LOG.warning('Fabric Manager was waiting after a restart; replayed '
                    'the active NVLink partitions %s from nova records',
                    ids)


def from_config(conf, fmpm_path: str | None = None,
                nvidia_smi_path: str | None = None
                ) -> NVLinkPartitions | None:
    """The partition driver [libvirt]nvlink_partitions asks for, if any.

    The paths override the options (nova-all's fake hosts).
    """
    opts = conf.libvirt
    if opts.nvlink_partitions != 'fabric_manager':
        return None
    client = fabric_manager.FabricManagerClient(
        fmpm_path or opts.fmpm_path, opts.fabric_manager_address,
        opts.fabric_manager_timeout)
    return NVLinkPartitions(
        client, nvidia_smi_path or opts.nvidia_smi_path,
        gpu_modules.parse_module_map_option(opts.gpu_module_map),
        os.path.join(conf.state_path, 'nvlink'),
        conf.pci.partition_quarantine_failures)


def _failed_devices_report(failed: fabric_manager.FailedDevices,
                           gpu_addresses: frozenset[str]
                           ) -> pci_health.HealthReport:
    """What Fabric Manager's NVLink failed devices say: each GPU and
    NVSwitch listed is broken, every GPU of the host is checked."""
    def finding(ports: list[int]) -> pci_health.Finding:
        return pci_health.Finding(
            'Fabric Manager reports NVLink failures on ports %s' % (
                ','.join(map(str, ports)) or '?'),
            pci_health.SOURCE_FABRIC_MANAGER)

    return pci_health.HealthReport(
        findings={address: finding(ports)
                  for address, ports in failed.gpus.items()},
        checked={pci_health.SOURCE_FABRIC_MANAGER: frozenset(gpu_addresses)},
        switches_down={address: finding(ports)
                       for address, ports in failed.switches.items()},
        switches_checked=True)

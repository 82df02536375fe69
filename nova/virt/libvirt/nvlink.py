"""NVLink partitions of a shared-NVSwitch host, driven by nova-compute.

Fabric Manager names GPUs only by module ID on HGX H100/H200, so this
module first joins module IDs to PCI addresses (``nvidia-smi -q`` while the
GPUs are on the nvidia driver, saved under ``$state_path/nvlink`` so the
map survives vfio-pci binding, and an operator map on top). With that map
it activates the partition whose module IDs equal an instance's GPUs,
deactivates it when the instance is gone, and repairs what crashes and
Fabric Manager restarts leave.

"Nova's records" of which instance holds which partition are a JSON file
per host next to the module map; a partition is recorded before it is
activated and forgotten after it is deactivated, so a crash in between
leaves a record that the start-up repair settles. Partitions nova may have
left active (a deactivation or activation that failed, an instance gone
while the compute was down) are recorded as orphans, which the repair
deactivates. Any other active partition was activated behind nova's back:
nova leaves it alone and offers none of its devices.

A partition whose activation fails for a hardware reason (FM's
NVLINK_ERROR: link training failed) ``[pci]partition_quarantine_failures``
times in a row is quarantined: recorded with the error in the same file,
its devices not offered, until a re-probe by the periodic repair
(activate, then deactivate at once, while no active partition overlaps
it) succeeds, or the compute finds the broken GPU or NVSwitch healthy
again (``release_quarantined``). Errors that say nothing about the
partition itself (timeouts, FM not running or still initializing, wrong
mode, GENERIC_ERROR, IN_USE) never quarantine.

``observe_health`` reports what ``nvidia-smi -q`` and Fabric Manager's
NVLink failed devices say of the GPUs' and NVSwitches' health.
"""

import collections
import json
import os
import re
import subprocess
import threading

from oslo_log import log as logging
from oslo_utils import timeutils

from nova import exception
from nova.pci import health as pci_health
from nova.pci import partitions as pci_partitions
from nova.pci import utils as pci_utils
from nova.virt.libvirt import fabric_manager

LOG = logging.getLogger(__name__)

# FM errors that say the partition's hardware failed, not FM or the call:
# only link training failure is documented as such
# (doc/source/reference/nvidia-facts.rst, section 2).
HARDWARE_ERRORS = (exception.FabricManagerNVLinkError,)

NVIDIA_VENDOR_ID = '10de'

# Fabric Manager's fixed NVLink partitions of HGX H100/H200 (H800, H20)
# boards by GPU module ID (doc/source/reference/nvidia-facts.rst,
# section 4): the board, two quartets, four pairs, then each GPU alone as
# partition 6 + module.
HGX_PARTITIONS = {0: frozenset(range(1, 9)), 1: frozenset({1, 2, 3, 4}),
                  2: frozenset({5, 6, 7, 8}), 3: frozenset({1, 3}),
                  4: frozenset({2, 4}), 5: frozenset({5, 7}),
                  6: frozenset({6, 8})}
HGX_PARTITIONS.update({6 + m: frozenset({m}) for m in range(1, 9)})
# The boards that table is Fabric Manager's for: HGX 8-GPU NVSwitch
# baseboards of these GPUs (NVIDIA PCI product IDs, nvidia-facts.rst
# section 6, and pci.ids; H20's ID is not known here). Other boards print
# module IDs too (a 4-GPU A100 board 3, 7, 5, 6; both GPUs of an H100 NVL
# pair 4) that say nothing about this table; A100 and B200 HGX boards
# have tables of their own, not this one.
HGX_BOARD_PRODUCTS = {'2330': 'H100 SXM5 80GB', '2324': 'H800',
                      '2335': 'H200 SXM 141GB'}
HGX_BOARD_GPUS = 8
_GPU_LINE = re.compile(r'^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:'
                       r'[0-9A-Fa-f]{2}\.[0-7])\s*$')
# R525-era drivers print "Module ID : N" directly in a GPU block; 565 and
# 570 print "Module Id : N" inside its "Platform Info" sub-block. Both are
# accepted at any indentation.
_MODULE_LINE = re.compile(r'^\s*Module I[Dd]\s*:\s*(\S+)\s*$')


def parse_nvidia_smi(text: str) -> dict[str, int]:
    """Address -> module ID from ``nvidia-smi -q`` output.

    Each "GPU 00000000:BB:DD.F" block may hold a module ID line in any
    layout NVIDIA has shipped (see _MODULE_LINE); the first one of a block
    counts. Module ID 0 (NVML's "not a baseboard GPU") and "N/A" mean
    unknown and are left out.
    """
    found: dict[str, int] = {}
    address = None
    for line in text.splitlines():
        gpu = _GPU_LINE.match(line)
        if gpu:
            domain, rest = gpu.group(1).split(':', 1)
            address = pci_utils.normalize_address(
                '%04x:%s' % (int(domain, 16), rest))
            continue
        module = _MODULE_LINE.match(line)
        if module and address is not None:
            if module.group(1).isdigit() and int(module.group(1)) > 0:
                found[address] = int(module.group(1))
            address = None
    return found


# ``nvidia-smi -q`` lines that mean a GPU is unusable
# (doc/source/reference/nvidia-facts.rst, section 7: the Retired Pages
# and Remapped Rows sections; NVML's "GPU is lost" and "Unable to
# determine the device handle" answers for a GPU that fell off the bus).
_LOST_LINE = re.compile(
    r'Unable to determine the device handle for GPU\s*'
    r'([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*:\s*(.*)$')
_FIELD_LINE = re.compile(r'^(\s*)([^:]+?)\s*:\s*(.*?)\s*$')
# (section, field) -> what a "Yes" there means.
_UNUSABLE_FIELDS = {
    ('Retired Pages', 'Pending Page Blacklist'):
        'pending retired pages (reset the GPU to retire them)',
    ('Retired Pages', 'Pending Page Retirement'):
        'pending retired pages (reset the GPU to retire them)',
    ('Remapped Rows', 'Pending'):
        'pending row remapping (reset the GPU to remap)',
    ('Remapped Rows', 'Remapping Failure Occurred'):
        'row remapping failure (the GPU needs service)',
}
_LOST_VALUES = ('GPU is lost', 'Unable to determine')


def _gpu_address(bus_id: str) -> str:
    domain, rest = bus_id.split(':', 1)
    return pci_utils.normalize_address('%04x:%s' % (int(domain, 16), rest))


def parse_nvidia_smi_health(text: str) -> pci_health.HealthReport:
    """What ``nvidia-smi -q`` output (stdout and stderr) says of the
    listed GPUs' health: a GPU it cannot reach ("Unable to determine the
    device handle", "GPU is lost"), pending retired pages, pending row
    remapping or a row remapping failure makes it unhealthy. Every GPU
    it names is ``checked``; the others (bound to vfio-pci) are not.
    """
    findings: dict[str, pci_health.Finding] = {}
    listed: set[str] = set()
    address = None
    section: str | None = None
    section_indent = 0

    def found(where: str, why: str) -> None:
        findings.setdefault(where, pci_health.Finding(
            'nvidia-smi: %s' % why, pci_health.SOURCE_NVIDIA_SMI))

    for line in text.splitlines():
        lost = _LOST_LINE.search(line)
        if lost:
            where = _gpu_address(lost.group(1))
            listed.add(where)
            found(where, 'GPU is lost: %s' % (lost.group(2).strip() or
                                              'unknown error'))
            continue
        gpu = _GPU_LINE.match(line)
        if gpu:
            address = _gpu_address(gpu.group(1))
            listed.add(address)
            section = None
            continue
        if address is None or not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        field = _FIELD_LINE.match(line)
        if field is None:
            # A section header; one nested in the current section (e.g.
            # Remapped Rows' histogram) keeps it.
            if section is None or indent <= section_indent:
                section, section_indent = line.strip(), indent
            continue
        if section is not None and indent <= section_indent:
            section = None
        name, value = field.group(2).strip(), field.group(3)
        if value.startswith(_LOST_VALUES):
            found(address, 'GPU is lost: %s %s' % (name, value))
        elif value == 'Yes' and (section, name) in _UNUSABLE_FIELDS:
            found(address, _UNUSABLE_FIELDS[(section, name)])
    return pci_health.HealthReport(
        findings=findings,
        checked={pci_health.SOURCE_NVIDIA_SMI: frozenset(listed)})


def _run_nvidia_smi(path: str, purpose: str
                    ) -> subprocess.CompletedProcess | None:
    """``path -q`` run to completion, None (with a warning naming the
    ``purpose`` fallback) when it cannot run."""
    try:
        return subprocess.run([path, '-q'], capture_output=True, text=True,
                              timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        LOG.warning('Cannot run %s -q: %s; %s', path, err, purpose)
        return None


def read_nvidia_smi_health(path: str) -> pci_health.HealthReport:
    """The GPUs' health from running ``path -q`` (whatever its exit
    status: it exits non-zero when a GPU is lost); nothing checked when
    it cannot run."""
    proc = _run_nvidia_smi(path, 'GPU health is not checked by it now')
    if proc is None:
        return pci_health.HealthReport()
    return parse_nvidia_smi_health(proc.stdout + '\n' + proc.stderr)


def read_nvidia_smi(path: str) -> dict[str, int]:
    """Address -> module ID from running ``path -q``; {} (with a warning)
    when it cannot run or fails."""
    proc = _run_nvidia_smi(path, 'using the saved GPU module map')
    if proc is None:
        return {}
    if proc.returncode != 0:
        LOG.warning('%s -q exited with status %d: %s; using the saved '
                    'GPU module map', path, proc.returncode,
                    proc.stderr.strip())
        return {}
    return parse_nvidia_smi(proc.stdout)


def _read_module_map_file(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError as err:
        raise exception.InvalidConfiguration(reason=(
            '[libvirt]gpu_module_map names the file %s, which cannot be '
            'read (%s); give a readable JSON file or an inline JSON object'
            % (path, err.strerror or err)))


def parse_module_map_option(value: str) -> dict[str, int]:
    """Parse ``[libvirt]gpu_module_map``: a JSON object of PCI address to
    module ID, inline or in the file an absolute path names."""
    if not value:
        return {}
    text = (_read_module_map_file(value) if value.startswith('/')
            else value)
    try:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError('not a JSON object')
        result = {}
        for address, module in data.items():
            if isinstance(module, str) and module.isdigit():
                module = int(module)
            if isinstance(module, bool) or not isinstance(module, int) or \
                    module < 1:
                raise ValueError('module ID %r of %s is not a positive '
                                 'integer' % (module, address))
            result[pci_utils.normalize_address(address)] = module
        return result
    except (ValueError, exception.PciDeviceWrongAddressFormat) as err:
        raise exception.InvalidConfiguration(reason=(
            '[libvirt]gpu_module_map %r is not allowed (%s); give a JSON '
            'object of PCI address to module ID, e.g. {"0000:86:00.0": 1}'
            % (value, exception.reason_of(err))))


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
        self._records: dict[str, int] = {}
        # Partitions nova activated and may have left active.
        self._orphans: set[int] = set()
        # Partition ID -> why it is quarantined (see the module doc).
        self._quarantined: dict[int, str] = {}
        # Partition ID -> hardware failures of its activation in a row.
        self._failures: dict[int, int] = {}
        self._records_path: str | None = None
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
        saved = _read_json(map_path)
        # What nvidia-smi sees now wins over what it saw earlier; GPUs on
        # vfio-pci are not listed and keep their saved module ID.
        learned = {**saved, **read_nvidia_smi(self.nvidia_smi_path)}
        if learned != saved:
            _write_json(map_path, learned)
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
        merged = {**_read_json(self._path(host, 'gpu-modules')),
                  **self.module_override}
        self.gpu_addresses = frozenset(gpu_addresses)
        self.module_map, self.unmapped = _check_map(merged, gpu_addresses)
        self._records_path = self._path(host, 'partitions')
        saved = _read_json(self._records_path)
        self._records = {uuid: int(pid) for uuid, pid in
                         saved.get('held', {}).items()}
        self._orphans = {int(pid) for pid in saved.get('orphans', [])}
        self._quarantined = {int(pid): why for pid, why in
                             saved.get('quarantined', {}).items()}
        self._failures = {int(pid): int(count) for pid, count in
                          saved.get('failures', {}).items()}

    def _path(self, host: str, what: str) -> str:
        return _state_file(self.state_dir, host, what)

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

    def quarantined(self) -> dict[int, str]:
        """Partition ID -> why nova keeps it out of use."""
        with self._lock:
            return dict(self._quarantined)

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
            held_by = self._holder(partition.id)
            if partition.active:
                if held_by == instance_uuid:
                    return partition.id
                if held_by is None and partition.id in self._orphans:
                    # Left active by nova (e.g. its guest was lost at a
                    # restart) and not yet deactivated by the repair: the
                    # instance that holds these GPUs takes it over.
                    self._records[instance_uuid] = partition.id
                    self._orphans.discard(partition.id)
                    self._save_records()
                    LOG.info('NVLink partition %s, left active, is held '
                             'by instance %s again',
                             partition.describe(), instance_uuid)
                    return partition.id
                raise exception.NVLinkPartitionFailed(
                    partition=partition.describe(), uuid=instance_uuid,
                    error='Fabric Manager reports it already active and '
                    'nova records it as held by %s' % (
                        held_by or 'no instance'))
            self._records[instance_uuid] = partition.id
            self._orphans.discard(partition.id)
            self._save_records()
            try:
                self.client.activate(partition.id)
            except exception.FabricManagerError as err:
                del self._records[instance_uuid]
                if not isinstance(err, (exception.FabricManagerInUse,
                                        exception.FabricManagerBadParam)):
                    # FM may have activated it anyway (a timeout, FM dying
                    # mid-call): the repair checks.
                    self._orphans.add(partition.id)
                if isinstance(err, HARDWARE_ERRORS):
                    self._hardware_failure(partition, err)
                self._save_records()
                raise exception.NVLinkPartitionFailed(
                    partition=partition.describe(), uuid=instance_uuid,
                    error=err.message) from err
            if self._failures.pop(partition.id, None):
                self._save_records()
            LOG.info('Activated NVLink partition %s for instance %s',
                     partition.describe(), instance_uuid)
            return partition.id

    def _hardware_failure(self, partition: fabric_manager.Partition,
                          err: exception.FabricManagerError) -> None:
        """Count a hardware failure of the partition's activation;
        quarantine it at ``quarantine_failures`` in a row."""
        count = self._failures.get(partition.id, 0) + 1
        if count < self.quarantine_failures:
            self._failures[partition.id] = count
            LOG.warning('NVLink partition %s failed to activate for a '
                        'hardware reason (%s), %d of %d failures before '
                        'it is quarantined', partition.describe(),
                        err.message, count, self.quarantine_failures)
            return
        self._failures.pop(partition.id, None)
        self._quarantined[partition.id] = '%s (%s)' % (
            err.message, timeutils.utcnow().isoformat(timespec='seconds'))
        LOG.error('NVLink partition %s is quarantined: its activation '
                  'failed for a hardware reason (%s). Its GPUs are not '
                  'offered until the periodic repair re-probes it '
                  'successfully', partition.describe(), err.message)

    def release(self, instance_uuid: str) -> None:
        """Deactivate the instance's partition once its guest is gone.

        A failure is logged and the partition becomes an orphan, which the
        periodic repair deactivates.
        """
        with self._lock:
            partition_id = self._records.pop(instance_uuid, None)
            if partition_id is None:
                return
            try:
                self.client.deactivate(partition_id)
            except exception.FabricManagerNotActive:
                pass
            except exception.FabricManagerError as err:
                self._orphans.add(partition_id)
                LOG.error('Could not deactivate NVLink partition %d of '
                          'deleted instance %s: %s; the periodic repair '
                          'retries', partition_id, instance_uuid,
                          err.message)
            else:
                LOG.info('Deactivated NVLink partition %d of instance %s',
                         partition_id, instance_uuid)
            self._save_records()

    def holders(self) -> dict[int, str]:
        """Partition ID -> instance uuid, as nova's records say."""
        with self._lock:
            return {pid: uuid for uuid, pid in self._records.items()}

    def _holder(self, partition_id: int) -> str | None:
        for uuid, pid in self._records.items():
            if pid == partition_id:
                return uuid
        return None

    def _save_records(self) -> None:
        _write_json(self._records_path, {
            'held': self._records, 'orphans': sorted(self._orphans),
            'quarantined': {str(pid): why for pid, why in
                            sorted(self._quarantined.items())},
            'failures': {str(pid): count for pid, count in
                         sorted(self._failures.items())}})

    def release_quarantined(self, addresses: set[str] | None
                            ) -> list[int]:
        """Offer again the quarantined partitions holding any GPU of
        ``addresses`` (every one when None: an NVSwitch came back), whose
        broken hardware the compute found healthy again; returns their
        IDs (none when Fabric Manager cannot list its partitions)."""
        with self._lock:
            if not self._quarantined:
                return []
            try:
                partitions = self.partitions()
            except exception.FabricManagerError as err:
                LOG.info('Quarantined NVLink partitions not released now '
                         '(the repair re-probes them): %s', err.message)
                return []
            released = []
            for partition in partitions:
                if partition.id not in self._quarantined:
                    continue
                if addresses is not None and not set(
                        self.addresses_of(partition) or ()) & addresses:
                    continue
                LOG.warning('NVLink partition %s is no longer quarantined: '
                            'its hardware is healthy again (was: %s)',
                            partition.describe(),
                            self._quarantined.pop(partition.id))
                self._failures.pop(partition.id, None)
                released.append(partition.id)
            if released:
                self._save_records()
            return released

    def observe_health(self) -> pci_health.HealthReport:
        """The GPUs' and NVSwitches' health as ``nvidia-smi -q`` (the
        GPUs it lists) and Fabric Manager's NVLink failed devices (every
        GPU and NVSwitch, when FM answers) show it now."""
        report = read_nvidia_smi_health(self.nvidia_smi_path)
        try:
            failed = self.client.failed_devices()
        except exception.FabricManagerError as err:
            LOG.debug('No NVLink failed devices from Fabric Manager: %s',
                      err.message)
            return report
        return report.merge(pci_health.HealthReport(
            findings={address: pci_health.Finding(
                'Fabric Manager reports NVLink failures on ports %s' % (
                    ','.join(map(str, ports)) or '?'),
                pci_health.SOURCE_FABRIC_MANAGER)
                for address, ports in failed.gpus.items()},
            checked={pci_health.SOURCE_FABRIC_MANAGER:
                     frozenset(self.gpu_addresses)},
            switches_down={address: pci_health.Finding(
                'Fabric Manager reports NVLink failures on ports %s' % (
                    ','.join(map(str, ports)) or '?'),
                pci_health.SOURCE_FABRIC_MANAGER)
                for address, ports in failed.switches.items()},
            switches_checked=True))

    def foreign(self, partitions: list[fabric_manager.Partition]
                ) -> list[fabric_manager.Partition]:
        """Active partitions nova neither holds nor left behind."""
        with self._lock:
            ours = set(self._records.values()) | self._orphans
        return [p for p in partitions if p.active and p.id not in ours]

    # Repair -----------------------------------------------------------------

    def forget_missing(self, guests: set[str]) -> None:
        """At compute start: drop records of instances without a domain.

        Their partitions become holder-less and the repair deactivates
        them (the compute died while deleting or failing a build).
        """
        with self._lock:
            for uuid in sorted(set(self._records) - guests):
                partition_id = self._records.pop(uuid)
                self._orphans.add(partition_id)
                LOG.warning('Instance %s holds NVLink partition %d in nova '
                            'records but has no guest; releasing it', uuid,
                            partition_id)
            self._save_records()

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
            held = {pid: uuid for uuid, pid in self._records.items()}
            for partition in partitions:
                if partition.id not in self._orphans or \
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
                self._orphans.discard(partition.id)
            self._orphans &= {p.id for p in partitions}
            self._save_records()
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
            if partition.id not in self._quarantined or \
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
                self._orphans.add(partition.id)
                LOG.error('Could not deactivate NVLink partition %s after '
                          'its re-probe: %s', partition.describe(),
                          err.message)
            LOG.warning('NVLink partition %s passed its re-probe and is '
                        'no longer quarantined (was: %s)',
                        partition.describe(),
                        self._quarantined.pop(partition.id))
            self._save_records()

    def _replay(self, cause: exception.FabricManagerError) -> None:
        ids = sorted(set(self._records.values()))
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
    return NVLinkPartitions(client, nvidia_smi_path or opts.nvidia_smi_path,
                            parse_module_map_option(opts.gpu_module_map),
                            os.path.join(conf.state_path, 'nvlink'),
                            conf.pci.partition_quarantine_failures)


class ModuleMapReader:
    """GPU module IDs of a host whose partitions nova does not drive.

    With ``[libvirt]nvlink_partitions`` ``none`` or ``libvirt_hook`` nova
    activates nothing, but a declared nvlink group that is no partition
    still hands out GPUs without NVLink between them; the module IDs the
    host offers let the compute warn about that. They come from what a
    fabric_manager-mode compute saved, ``nvidia-smi -q`` when it is
    installed, and ``[libvirt]gpu_module_map`` on top.
    """

    def __init__(self, nvidia_smi_path: str, module_override: dict[str, int],
                 state_dir: str) -> None:
        self.nvidia_smi_path = nvidia_smi_path
        self.module_override = dict(module_override)
        self.state_dir = state_dir

    def read(self, host: str, gpu_addresses: list[str]) -> dict[str, int]:
        """Address -> module ID of those of ``gpu_addresses`` with a
        known, unshared one (nothing is saved: this is only a check)."""
        saved = _read_json(_state_file(self.state_dir, host,
                                       'gpu-modules'))
        # No nvidia-smi is normal on a host without NVIDIA's driver.
        seen = read_nvidia_smi(self.nvidia_smi_path) if os.access(
            self.nvidia_smi_path, os.X_OK) else {}
        mapped, _unmapped = _check_map(
            {**saved, **seen, **self.module_override}, gpu_addresses)
        return mapped


def _product(product_id: str) -> str:
    name = HGX_BOARD_PRODUCTS.get(product_id)
    return '%s:%s%s' % (NVIDIA_VENDOR_ID, product_id,
                        ' (%s)' % name if name else '')


def hgx_board_mismatch(product_ids: list[str]) -> str | None:
    """Why a host whose NVIDIA GPUs have these PCI product IDs (one per
    GPU) is no HGX 8-GPU board HGX_PARTITIONS holds for; None if it is
    one: exactly HGX_BOARD_GPUS GPUs, all of one HGX_BOARD_PRODUCTS."""
    counts = collections.Counter(product_ids)
    if len(counts) == 1 and HGX_BOARD_GPUS in counts.values() and \
            set(counts) <= set(HGX_BOARD_PRODUCTS):
        return None
    return 'it has %s; the HGX partition table holds only for %d GPUs ' \
        'of one of the products %s' % (
            ' and '.join('%d GPU%s of product %s' % (
                n, '' if n == 1 else 's', _product(p))
                         for p, n in sorted(counts.items())) or 'no GPU',
            HGX_BOARD_GPUS,
            ', '.join(_product(p) for p in sorted(HGX_BOARD_PRODUCTS)))


def hgx_partitions(module_ids: dict[str, int]
                   ) -> list[pci_partitions.HardwarePartition]:
    """The fixed HGX partitions, with the addresses of their GPUs where
    ``module_ids`` (address -> module ID) knows them all."""
    by_module = {m: a for a, m in module_ids.items()}
    return [pci_partitions.HardwarePartition(
        pid, modules, tuple(sorted(by_module[m] for m in modules))
        if modules <= set(by_module) else None)
        for pid, modules in sorted(HGX_PARTITIONS.items())]


def module_reader_from_config(conf) -> ModuleMapReader | None:
    """The module map reader for the modes in which nova does not drive
    Fabric Manager (from_config's NVLinkPartitions reads it there)."""
    opts = conf.libvirt
    if opts.nvlink_partitions == 'fabric_manager':
        return None
    return ModuleMapReader(opts.nvidia_smi_path,
                           parse_module_map_option(opts.gpu_module_map),
                           os.path.join(conf.state_path, 'nvlink'))


def _state_file(state_dir: str, host: str, what: str) -> str:
    return os.path.join(state_dir, '%s-%s.json' % (host, what))


def _check_map(module_map: dict[str, int], gpu_addresses: list[str]
               ) -> tuple[dict[str, int], dict[str, str]]:
    """Split the host's GPUs into mapped ones and why others are not."""
    by_module: dict[int, list[str]] = {}
    for address in gpu_addresses:
        if address in module_map:
            by_module.setdefault(module_map[address], []).append(address)
    mapped, unmapped = {}, {}
    for address in gpu_addresses:
        module = module_map.get(address)
        if module is None:
            unmapped[address] = 'has no module ID'
        elif len(by_module[module]) > 1:
            unmapped[address] = 'shares module ID %d with %s' % (
                module, ', '.join(a for a in by_module[module]
                                  if a != address))
        else:
            mapped[address] = module
    return mapped, unmapped


def _read_json(path: str) -> dict:
    try:
        with open(path, encoding='utf-8') as src:
            data = json.load(src)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        raise exception.InvalidConfiguration(reason=(
            'NVLink state file %s is unreadable: %s; fix or remove it' % (
                path, err)))
    return data if isinstance(data, dict) else {}


def _write_json(path: str, data: dict) -> None:
    tmp = path + '.tmp'
    with open(tmp, 'w', encoding='utf-8') as out:
        json.dump(data, out, indent=1, sort_keys=True)
    os.replace(tmp, path)

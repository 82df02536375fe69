"""Client of NVIDIA Fabric Manager over its ``fmpm`` command.

``fmpm`` (NVIDIA/Fabric-Manager-Client) lists the NVLink partitions of a
shared-NVSwitch host as JSON and activates or deactivates them. It returns
Fabric Manager's raw ``fmReturn_t``, so the shell sees 256 + code for a
negative code (IN_USE -7 is status 249), and it prints FM-side failures on
stdout. This module turns those statuses into typed exceptions and the
JSON into ``Partition`` values. It knows nothing about instances.
"""

from collections.abc import Mapping
import dataclasses
import json
import subprocess

from nova import exception
from nova.pci import utils as pci_utils

# fmpm refuses partition IDs from 64 on (FM_MAX_FABRIC_PARTITIONS).
MAX_PARTITIONS = 64

# fmReturn_t code -> exception class; unknown codes are FabricManagerError.
_ERRORS = {
    -1: exception.FabricManagerBadParam,
    -3: exception.FabricManagerNotSupported,
    -4: exception.FabricManagerNotActive,
    -5: exception.FabricManagerTimeout,
    -7: exception.FabricManagerInUse,
    -8: exception.FabricManagerNotConfigured,
    -9: exception.FabricManagerConnectionInvalid,
    -10: exception.FabricManagerNVLinkError,
}


@dataclasses.dataclass(frozen=True)
class Partition:
    """One entry of Fabric Manager's static partition table."""

    id: int
    # GPU module IDs (``physicalId``; on H100+ FM gives no PCI address).
    module_ids: frozenset[int]
    active: bool

    def describe(self) -> str:
        return '%d (modules %s)' % (
            self.id, ','.join(str(m) for m in sorted(self.module_ids)))


def parse_partitions(text: str) -> list[Partition]:
    """Parse ``fmpm -l`` output; FabricManagerError if it is malformed."""
    try:
        data = json.loads(text)
        partitions = []
        for info in data['partitionInfo']:
            partitions.append(Partition(
                id=int(info['partitionId']),
                module_ids=frozenset(int(gpu['physicalId'])
                                     for gpu in info['gpuInfo']),
                active=bool(info['isActive'])))
    except (ValueError, TypeError, KeyError) as err:
        raise exception.FabricManagerError(
            operation='list', error='unreadable fmpm -l output (%s: %s): '
            '%r' % (type(err).__name__, err, text[:200]))
    ids = [p.id for p in partitions]
    if len(set(ids)) != len(ids):
        raise exception.FabricManagerError(
            operation='list', error='partition IDs repeat in %s' % ids)
    return sorted(partitions, key=lambda p: p.id)


@dataclasses.dataclass(frozen=True)
class FailedDevices:
    """Fabric Manager's NVLink failed devices: the PCI addresses of the
    GPUs and of the NVSwitches it names, each with its failed ports."""

    gpus: Mapping[str, tuple[int, ...]] = dataclasses.field(
        default_factory=dict)
    switches: Mapping[str, tuple[int, ...]] = dataclasses.field(
        default_factory=dict)


def _bus_address(bus_id: str) -> str:
    domain, rest = bus_id.split(':', 1)
    return pci_utils.normalize_address('%04x:%s' % (int(domain, 16), rest))


def parse_failed_devices(text: str) -> FailedDevices:
    """Parse ``fmpm --get-nvlink-failed-devices`` output (``gpuInfo``
    and ``switchInfo`` lists of {``pciBusId``, ``portNum``, ...});
    FabricManagerError if it is malformed."""
    try:
        data = json.loads(text)
        found = []
        for key in ('gpuInfo', 'switchInfo'):
            found.append({
                _bus_address(info['pciBusId']):
                    tuple(int(p) for p in info.get('portNum') or ())
                for info in data.get(key) or ()})
    except (ValueError, TypeError, KeyError, AttributeError,
            exception.PciDeviceWrongAddressFormat) as err:
        raise exception.FabricManagerError(
            operation='get-nvlink-failed-devices', error='unreadable fmpm '
            'output (%s: %s): %r' % (type(err).__name__, err, text[:200]))
    return FailedDevices(gpus=found[0], switches=found[1])


def _check_id(partition_id: int, operation: str) -> int:
    if isinstance(partition_id, bool) or not isinstance(partition_id, int) \
            or not 0 <= partition_id < MAX_PARTITIONS:
        raise exception.FabricManagerBadParam(
            operation=operation, error='partition ID %r is not an integer '
            'from 0 to %d' % (partition_id, MAX_PARTITIONS - 1))
    return partition_id


class FabricManagerClient:
    """Runs ``fmpm`` against one Fabric Manager.

    Each call is its own fmpm process with its own connection, so a
    Fabric Manager restart between calls is survived.
    """

    def __init__(self, fmpm_path: str, address: str = '127.0.0.1',
                 timeout: float = 30) -> None:
        self.fmpm_path = fmpm_path
        self.address = address
        self.timeout = timeout

    def _run(self, operation: str, args: list[str]) -> str:
        argv = [self.fmpm_path] + args + ['--hostname', self.address]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True,
                                  timeout=self.timeout, check=False)
        except subprocess.TimeoutExpired:
            raise exception.FabricManagerTimeout(
                operation=operation, error='fmpm did not answer within '
                '%ss' % self.timeout)
        except OSError as err:
            raise exception.FabricManagerError(
                operation=operation, error='cannot run %s: %s' % (
                    self.fmpm_path, err))
        if proc.returncode == 0:
            return proc.stdout
        output = ' '.join((proc.stdout + ' ' + proc.stderr).split())
        error = 'fmpm %s exited with status %d: %s' % (
            ' '.join(args), proc.returncode, output or 'no output')
        if proc.returncode < 0:
            raise exception.FabricManagerError(operation=operation,
                                               error=error)
        code = proc.returncode - 256 if proc.returncode >= 128 else None
        raise _ERRORS.get(code, exception.FabricManagerError)(
            operation=operation, error=error)

    def list_partitions(self) -> list[Partition]:
        """All partitions FM supports, with their active flags."""
        return parse_partitions(self._run('list', ['-l']))

    def failed_devices(self) -> FailedDevices:
        """The GPUs and NVSwitches Fabric Manager reports NVLink
        failures on."""
        return parse_failed_devices(self._run(
            'get-nvlink-failed-devices', ['--get-nvlink-failed-devices']))

    def activate(self, partition_id: int) -> None:
        _check_id(partition_id, 'activate')
        self._run('activate of partition %d' % partition_id,
                  ['-a', str(partition_id)])

    def deactivate(self, partition_id: int) -> None:
        _check_id(partition_id, 'deactivate')
        self._run('deactivate of partition %d' % partition_id,
                  ['-d', str(partition_id)])

    def set_activated_list(self, partition_ids: list[int]) -> None:
        """Tell a Fabric Manager restarted with ``--restart`` what is active.

        Must be called even with no partition. fmpm loops forever on a
        repeated ID, so repeats are refused here.
        """
        ids = [_check_id(i, 'set-activated-list') for i in partition_ids]
        if len(set(ids)) != len(ids):
            raise exception.FabricManagerBadParam(
                operation='set-activated-list',
                error='partition IDs repeat in %s' % ids)
        # No partition is an empty value; how the real fmpm parses "" is
        # not confirmed by any source (the fake takes it as no partition).
        self._run('set-activated-list',
                  ['--set-activated-list', ','.join(map(str, sorted(ids)))])

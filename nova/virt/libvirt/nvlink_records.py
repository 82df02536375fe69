"""Nova's records of one host's NVLink partitions, kept in JSON files.

Per host, under ``$state_path/nvlink``: ``HOST-gpu-modules.json`` (the GPU
module map nvidia-smi showed, see nova.virt.libvirt.gpu_modules) and
``HOST-partitions.json`` (``PartitionRecords``): which instance holds
which partition, the partitions nova may have left active (orphans), the
quarantined ones with why, and the hardware failures of each partition's
activation in a row, which quarantine it at a threshold. The lifecycle
that changes these records is nova.virt.libvirt.nvlink.
"""

import dataclasses
import json
import os

from oslo_log import log as logging
from oslo_utils import timeutils

from nova import exception

LOG = logging.getLogger(__name__)


@dataclasses.dataclass
class PartitionRecords:
    """What nova recorded of a host's partitions (see the module doc).

    ``held``: instance uuid -> partition ID. ``orphans``: partitions nova
    activated and may have left active. ``quarantined``: partition ID ->
    why nova keeps it out of use. ``failures``: partition ID -> hardware
    failures of its activation in a row.
    """

    path: str
    held: dict[str, int] = dataclasses.field(default_factory=dict)
    orphans: set[int] = dataclasses.field(default_factory=set)
    quarantined: dict[int, str] = dataclasses.field(default_factory=dict)
    failures: dict[int, int] = dataclasses.field(default_factory=dict)

    @classmethod
    def load(cls, path: str) -> 'PartitionRecords':
        """The records saved at ``path`` (none when there is no file)."""
        saved = read_json(path)
        return cls(
            path,
            held={uuid: int(pid) for uuid, pid in
                  saved.get('held', {}).items()},
            orphans={int(pid) for pid in saved.get('orphans', [])},
            quarantined={int(pid): why for pid, why in
                         saved.get('quarantined', {}).items()},
            failures={int(pid): int(count) for pid, count in
                      saved.get('failures', {}).items()})

    def save(self) -> None:
        write_json(self.path, {
            'held': self.held, 'orphans': sorted(self.orphans),
            'quarantined': {str(pid): why for pid, why in
                            sorted(self.quarantined.items())},
            'failures': {str(pid): count for pid, count in
                         sorted(self.failures.items())}})

    def holder(self, partition_id: int) -> str | None:
        """The instance recorded as holding ``partition_id``, if any."""
        for uuid, pid in self.held.items():
            if pid == partition_id:
                return uuid
        return None

    def count_hardware_failure(self, partition_id: int, described: str,
                               error: str, threshold: int) -> None:
        """Count a hardware failure of the activation of partition
        ``partition_id`` (``described`` for the logs); quarantine it at
        ``threshold`` failures in a row. The caller saves."""
        count = self.failures.get(partition_id, 0) + 1
        if count < threshold:
            self.failures[partition_id] = count
            LOG.warning('NVLink partition %s failed to activate for a '
                        'hardware reason (%s), %d of %d failures before '
                        'it is quarantined', described, error, count,
                        threshold)
            return
        self.failures.pop(partition_id, None)
        self.quarantined[partition_id] = '%s (%s)' % (
            error, timeutils.utcnow().isoformat(timespec='seconds'))
        LOG.error('NVLink partition %s is quarantined: its activation '
                  'failed for a hardware reason (%s). Its GPUs are not '
                  'offered until the periodic repair re-probes it '
                  'successfully', described, error)


def state_file(state_dir: str, host: str, what: str) -> str:
    """The path of ``host``'s ``what`` record under ``state_dir``."""
    return os.path.join(state_dir, '%s-%s.json' % (host, what))


def read_json(path: str) -> dict:
    """The JSON object saved at ``path``; {} when there is none.
    InvalidConfiguration naming the file when it cannot be read."""
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


def write_json(path: str, data: dict) -> None:
    """Replace ``path`` with ``data`` at once (a crash leaves the old or
    the new file, never half of one)."""
    tmp = path + '.tmp'
    with open(tmp, 'w', encoding='utf-8') as out:
        json.dump(data, out, indent=1, sort_keys=True)
    os.replace(tmp, path)

"""``nvidia-smi -q``: the GPUs' module IDs and health as NVIDIA's tool
prints them, and running it.

Both parsers read the same per-GPU blocks ("GPU 00000000:BB:DD.F"); the
module IDs join Fabric Manager's partitions to PCI addresses
(nova.virt.libvirt.gpu_modules), the health fields feed the device health
rules (nova.pci.health).
"""

import re
import subprocess

from oslo_log import log as logging

from nova.pci import health as pci_health
from nova.pci import utils as pci_utils

LOG = logging.getLogger(__name__)

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
            address = _gpu_address(gpu.group(1))
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


def _run(path: str, purpose: str) -> subprocess.CompletedProcess | None:
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
    proc = _run(path, 'GPU health is not checked by it now')
    if proc is None:
        return pci_health.HealthReport()
    return parse_nvidia_smi_health(proc.stdout + '\n' + proc.stderr)


def read_nvidia_smi(path: str) -> dict[str, int]:
    """Address -> module ID from running ``path -q``; {} (with a warning)
    when it cannot run or fails."""
    proc = _run(path, 'using the saved GPU module map')
    if proc is None:
        return {}
    if proc.returncode != 0:
        LOG.warning('%s -q exited with status %d: %s; using the saved '
                    'GPU module map', path, proc.returncode,
                    proc.stderr.strip())
        return {}
    return parse_nvidia_smi(proc.stdout)

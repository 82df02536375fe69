"""A guest's virtual hardware: machine type, firmware, NUMA cell count.

Upstream nova reads the machine type and firmware from the image
properties ``hw_machine_type`` and ``hw_firmware_type`` and the NUMA cell
count from the flavor's ``hw:numa_nodes``. This fork also lets the flavor
carry the first two, spelt the way upstream spells flavor-side ``hw``
options: ``hw:machine_type``, ``hw:firmware_type``. ``resolve`` is the one
place they are combined: the flavor first, then the image's properties,
then ``[libvirt]hw_machine_type``.

The API checks the values (``check_extra_specs``, ``check_flavor``) so a
bad one is refused when written, not when a guest is built.
"""

import dataclasses
import re
from collections.abc import Iterable, Mapping

from nova.db import records
from nova import exception
from nova.virt import hugepages

MACHINE_TYPE_SPEC = 'hw:machine_type'
FIRMWARE_TYPE_SPEC = 'hw:firmware_type'
NUMA_NODES_SPEC = 'hw:numa_nodes'
# The image properties of the same meaning, as upstream names them.
MACHINE_TYPE_PROP = 'hw_machine_type'
FIRMWARE_TYPE_PROP = 'hw_firmware_type'

BIOS = 'bios'
UEFI = 'uefi'
FIRMWARE_TYPES = (BIOS, UEFI)

# The largest hw:numa_nodes accepted; no host of this kind has more NUMA
# nodes, and each guest cell is bound to one host node.
MAX_NUMA_NODES = 8

# QEMU machine type names: "q35", "pc-q35-7.2", "pc-i440fx-7.2", "virt".
_MACHINE_RE = re.compile(r'^[a-z0-9][a-z0-9._-]{0,63}$')
_ARCH_RE = re.compile(r'^[a-z0-9_]{1,32}$')


@dataclasses.dataclass(frozen=True)
class GuestHardware:
    """What a guest's domain is built on.

    ``machine_type`` None leaves the choice to the hypervisor;
    ``firmware_type`` None means no explicit choice (the builder picks,
    see nova.virt.libvirt.pcie.firmware_for); ``numa_cells`` None means
    no ``hw:numa_nodes`` (one cell when the guest is NUMA-confined).
    """

    machine_type: str | None = None
    firmware_type: str | None = None
    numa_cells: int | None = None

    @property
    def is_q35(self) -> bool:
        """True for a PCIe (q35) machine."""
        return bool(self.machine_type) and 'q35' in self.machine_type


def _machine_type(value: str, what: str) -> str:
    if not _MACHINE_RE.match(value):
        raise exception.Invalid(reason=(
            '%s %r is not allowed; a QEMU machine type name such as q35, '
            'pc-q35-7.2 or pc is required' % (what, value)))
    return value


def parse_machine_types(values: Iterable[str]) -> dict[str, str]:
    """``[libvirt]hw_machine_type`` items (``x86_64=q35``, upstream's
    format) as architecture -> machine type; Invalid naming a bad item."""
    result: dict[str, str] = {}
    for item in values:
        arch, sep, machine = (part.strip() for part in item.partition('='))
        if not sep or not _ARCH_RE.match(arch):
            raise exception.Invalid(reason=(
                '[libvirt]hw_machine_type item %r is not allowed; '
                '<architecture>=<machine type> is required, e.g. '
                'x86_64=q35' % (item,)))
        if arch in result:
            raise exception.Invalid(reason=(
                '[libvirt]hw_machine_type names architecture %s twice' %
                arch))
        result[arch] = _machine_type(
            machine, '[libvirt]hw_machine_type for %s' % arch)
    return result


def _spec_error(key: str, value: object, allowed: str
                ) -> exception.FlavorExtraSpecInvalid:
    return exception.FlavorExtraSpecInvalid(key=key, value=value,
                                            reason=allowed)


def numa_cells_of(extra_specs: Mapping[str, object] | None) -> int | None:
    """The ``hw:numa_nodes`` of a flavor, None when absent;
    FlavorExtraSpecInvalid for a value that is not 1..MAX_NUMA_NODES."""
    value = (extra_specs or {}).get(NUMA_NODES_SPEC)
    if value is None:
        return None
    try:
        count = int(str(value))
    except ValueError:
        count = 0
    if not 1 <= count <= MAX_NUMA_NODES:
        raise _spec_error(NUMA_NODES_SPEC, value, (
            'an integer from 1 to %d is required' % MAX_NUMA_NODES))
    return count


def check_extra_specs(extra_specs: Mapping[str, object]) -> None:
    """Refuse a bad ``hw:machine_type``, ``hw:firmware_type``,
    ``hw:numa_nodes`` or ``hw:mem_page_size`` (see nova.virt.hugepages),
    naming the value and what is allowed."""
    machine = extra_specs.get(MACHINE_TYPE_SPEC)
    if machine is not None and not _MACHINE_RE.match(str(machine)):
        raise _spec_error(MACHINE_TYPE_SPEC, machine, (
            'a QEMU machine type name such as q35, pc-q35-7.2 or pc is '
            'required'))
    firmware = extra_specs.get(FIRMWARE_TYPE_SPEC)
    if firmware is not None and firmware not in FIRMWARE_TYPES:
        raise _spec_error(FIRMWARE_TYPE_SPEC, firmware, (
            'allowed values are %s' % ', '.join(FIRMWARE_TYPES)))
    numa_cells_of(extra_specs)
    hugepages.check_extra_specs(extra_specs)


def check_flavor(flavor: records.FlavorSnapshot,
                 image_properties: Mapping[str, str] | None = None) -> None:
    """``check_extra_specs`` plus what needs the flavor's size: with
    ``hw:numa_nodes`` the vCPUs and memory must split evenly over the
    cells (as upstream, which refuses an asymmetric split without an
    explicit per-cell layout); an exact ``hw:mem_page_size`` must divide
    each cell's memory; the image (``image_properties``, at a server
    create) may set a page size only where the flavor lets it."""
    extra_specs = flavor.extra_specs
    check_extra_specs(extra_specs)
    hugepages.request_of(extra_specs, image_properties)
    cells = numa_cells_of(extra_specs)
    if cells is None:
        hugepages.check_flavor(extra_specs, flavor.memory_mb, 1)
        return
    if flavor.vcpus % cells or flavor.memory_mb % cells:
        raise _spec_error(NUMA_NODES_SPEC, extra_specs[NUMA_NODES_SPEC], (
            'the flavor\'s %d vCPUs and %d MiB of memory must divide '
            'evenly by the number of NUMA nodes' % (
                flavor.vcpus, flavor.memory_mb)))
    hugepages.check_flavor(extra_specs, flavor.memory_mb, cells)


def check_image_properties(properties: Mapping[str, str]) -> None:
    """Refuse a bad ``hw_machine_type``, ``hw_firmware_type`` or
    ``hw_mem_page_size`` image property, naming the value and what is
    allowed."""
    machine = properties.get(MACHINE_TYPE_PROP)
    if machine is not None:
        _machine_type(machine, 'image property %s' % MACHINE_TYPE_PROP)
    firmware = properties.get(FIRMWARE_TYPE_PROP)
    if firmware is not None and firmware not in FIRMWARE_TYPES:
        raise exception.Invalid(reason=(
            'image property %s %r is not allowed; allowed values are %s' %
            (FIRMWARE_TYPE_PROP, firmware, ', '.join(FIRMWARE_TYPES))))
    hugepages.check_image_properties(properties)


def resolve(machine_types: Mapping[str, str], arch: str,
            extra_specs: Mapping[str, object] | None,
            image_properties: Mapping[str, str] | None = None
            ) -> GuestHardware:
    """The guest hardware of a flavor and image on a host of ``arch``:
    the flavor's ``hw:machine_type``, else the image's
    ``hw_machine_type``, else ``machine_types[arch]`` (from
    ``[libvirt]hw_machine_type``), else the hypervisor's default; the
    flavor's ``hw:firmware_type``, else the image's ``hw_firmware_type``;
    the flavor's ``hw:numa_nodes``. Values are checked again (a flavor
    written before this check existed)."""
    extra_specs = extra_specs or {}
    image_properties = image_properties or {}
    check_extra_specs(extra_specs)
    check_image_properties(image_properties)
    machine = extra_specs.get(MACHINE_TYPE_SPEC) or \
        image_properties.get(MACHINE_TYPE_PROP)
    firmware = extra_specs.get(FIRMWARE_TYPE_SPEC) or \
        image_properties.get(FIRMWARE_TYPE_PROP)
    return GuestHardware(
        machine_type=str(machine) if machine else machine_types.get(arch),
        firmware_type=str(firmware) if firmware else None,
        numa_cells=numa_cells_of(extra_specs))


def split_evenly(total: int, cells: int) -> list[int]:
    """``total`` (vCPUs or MiB) split over ``cells``, equal parts; the
    API refused flavors where this leaves a remainder."""
    if cells < 1 or total % cells:
        raise exception.Invalid(reason=(
            '%d cannot be split evenly over %d NUMA cells' % (
                total, cells)))
    return [total // cells] * cells

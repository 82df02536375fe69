"""Which GPU sits in which NVLink module: the module map and the HGX
board's fixed partitions.

Fabric Manager names GPUs only by module ID on HGX H100/H200, so nova joins
module IDs to PCI addresses: ``nvidia-smi -q`` while the GPUs are on the
nvidia driver (saved under ``$state_path/nvlink`` so the map survives
vfio-pci binding, see nova.virt.libvirt.nvlink) and
``[libvirt]gpu_module_map`` on top. Where nova does not drive Fabric
Manager, ``ModuleMapReader`` reads the same sources for a check of the
declared groups against the board's fixed partitions (``hgx_partitions``).
"""

import collections
import json
import os

from nova import exception
from nova.pci import partitions as pci_partitions
from nova.pci import utils as pci_utils
from nova.virt.libvirt import nvidia_smi
from nova.virt.libvirt import nvlink_records

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
        saved = nvlink_records.read_json(nvlink_records.state_file(
            self.state_dir, host, 'gpu-modules'))
        # No nvidia-smi is normal on a host without NVIDIA's driver.
        seen = nvidia_smi.read_nvidia_smi(self.nvidia_smi_path) if os.access(
            self.nvidia_smi_path, os.X_OK) else {}
        mapped, _unmapped = check_map(
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


def check_map(module_map: dict[str, int], gpu_addresses: list[str]
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

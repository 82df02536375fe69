"""A device's fields are read by name only in ``nova/pci/device.py``,
a migration's only in ``nova/db``.

The device records (``HostDevice``, ``TrackedDevice``, ``Passthrough``)
are the typed seam; their wire forms (the ``pci_devices`` row and its
``extra_info`` JSON) are converted in that module alone. This scan fails
when production code reads a device field by string key again:

* a subscript or ``.get()`` with a key only devices have (``parent_addr``,
  ``numa_node``, ``extra_info``, ``capabilities``...), on anything;
* a subscript or ``.get()`` with any device key (also ``address``,
  ``status``, ``instance_uuid``... which other records share) on a
  variable named like a device (``dev``, ``device``, ``d``, ``parent``,
  ``*_dev``, ``*_device``);
* any string-key read of an ``extra_info`` attribute.

Migrations are ``nova.db.records.Migration`` records outside the
database layer; the scan fails likewise on a subscript or ``.get()`` with
a key only migrations have (``source_compute``, ``new_pci_requests``,
``old_flavor``...), on anything, or with any migration key on a variable
named like a migration (``migration``, ``mig``, ``m``, ``*_migration``).

The database layer (``nova/db``) stores rows of every table and is the
other side of the edge; it is not scanned.
"""

import ast
import dataclasses
import pathlib
import re

import nova
from nova.db import records
from nova.pci import device as pci_device
from nova import test

ROOT = pathlib.Path(nova.__file__).parent
TOOLS = ROOT.parent / 'tools'

# Module and package allowed to read rows by key.
OWNER = pathlib.Path('pci', 'device.py')
EXEMPT_PACKAGES = (pathlib.Path('db'), pathlib.Path('tests'))

# Every name a device field has, as a record field or in a wire form
# (upstream's driver dicts: ``class``, ``capabilities``).
DEVICE_KEYS = frozenset(
    field.name
    for record in (pci_device.HostDevice, pci_device.TrackedDevice,
                   pci_device.Passthrough)
    for field in dataclasses.fields(record)
) | {'class', 'capabilities', 'withheld', 'withheld_partition',
     'withheld_partition_state'}
# Device keys other records (migrations, PCI requests, alias and device
# specs, services, XML attributes) also have.
SHARED_KEYS = frozenset({
    'id', 'address', 'vendor_id', 'product_id', 'dev_type', 'status',
    'instance_uuid', 'request_id', 'compute_node_id', 'driver', 'managed',
    'created_at', 'updated_at',
})
DEVICE_ONLY_KEYS = DEVICE_KEYS - SHARED_KEYS

_DEVICE_NAME = re.compile(r'^(d|dev|device|devs|devices|parent|\w+_dev|'
                          r'\w+_device)$')

MIGRATION_KEYS = frozenset(
    field.name for field in dataclasses.fields(records.Migration))
# Migration keys other records (instances, actions, services) also have.
MIGRATION_SHARED_KEYS = frozenset({
    'id', 'uuid', 'instance_uuid', 'status', 'project_id', 'user_id',
    'created_at', 'updated_at', 'deleted_at',
})
MIGRATION_ONLY_KEYS = MIGRATION_KEYS - MIGRATION_SHARED_KEYS

_MIGRATION_NAME = re.compile(r'^(m|migration|mig|\w+_migration)$')


def _key_read(node: ast.AST) -> tuple[ast.AST, str] | None:
    """(receiver, key) of ``x['key']`` or ``x.get('key', ...)``."""
    if isinstance(node, ast.Subscript) and \
            isinstance(node.slice, ast.Constant) and \
            isinstance(node.slice.value, str):
        return node.value, node.slice.value
    if isinstance(node, ast.Call) and \
            isinstance(node.func, ast.Attribute) and \
            node.func.attr == 'get' and node.args and \
            isinstance(node.args[0], ast.Constant) and \
            isinstance(node.args[0].value, str):
        return node.func.value, node.args[0].value
    return None


def _is_device_name(receiver: ast.AST) -> bool:
    return isinstance(receiver, ast.Name) and \
        bool(_DEVICE_NAME.match(receiver.id))


def _is_extra_info(receiver: ast.AST) -> bool:
    return isinstance(receiver, ast.Attribute) and \
        receiver.attr == 'extra_info'


def key_reads(source: str) -> list[str]:
    """``line: receiver[key]`` for each device key read in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        read = _key_read(node)
        if read is None:
            continue
        receiver, key = read
        if key in DEVICE_ONLY_KEYS or _is_extra_info(receiver) or (
                key in DEVICE_KEYS and _is_device_name(receiver)):
            found.append('%d: %s[%r]' % (node.lineno,
                                         ast.unparse(receiver), key))
    return found


def _is_migration_name(receiver: ast.AST) -> bool:
    if isinstance(receiver, ast.Subscript):
        # ``migrations[0]['uuid']``
        receiver = receiver.value
        return isinstance(receiver, ast.Name) and \
            receiver.id == 'migrations'
    return isinstance(receiver, ast.Name) and \
        bool(_MIGRATION_NAME.match(receiver.id))


def migration_key_reads(source: str) -> list[str]:
    """``line: receiver[key]`` for each migration key read in
    ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        read = _key_read(node)
        if read is None:
            continue
        receiver, key = read
        if getattr(node, 'ctx', None) is not None and \
                not isinstance(node.ctx, ast.Load):
            # Setting a key (of a view being built) reads no migration.
            continue
        if isinstance(receiver, ast.Attribute) and receiver.attr == 'GET':
            # Query parameters named like the columns they filter.
            continue
        if key in MIGRATION_ONLY_KEYS or (
                key in MIGRATION_KEYS and _is_migration_name(receiver)):
            found.append('%d: %s[%r]' % (node.lineno,
                                         ast.unparse(receiver), key))
    return found


def violations(root: pathlib.Path = ROOT,
               tools: pathlib.Path | None = TOOLS) -> list[str]:
    """Each device or migration key read in the production code under
    ``root`` (the ``nova`` package directory) and ``tools``."""
    found = []
    paths = sorted(root.rglob('*.py'))
    if tools is not None and tools.is_dir():
        paths += sorted(tools.rglob('*.py'))
    for path in paths:
        owns_devices = False
        if path.is_relative_to(root):
            relative = path.relative_to(root)
            if any(relative.is_relative_to(p) for p in EXEMPT_PACKAGES):
                continue
            owns_devices = relative == OWNER
        source = path.read_text()
        reads = migration_key_reads(source)
        if not owns_devices:
            reads = key_reads(source) + reads
        found += ['%s:%s' % (path, read) for read in reads]
    return found


class DeviceKeysTest(test.TestCase):

    def test_no_device_key_read_outside_device_module(self):
        self.assertEqual([], violations())

    def test_scan_finds_the_reads_of_migration_dicts(self):
        source = '\n'.join([
            "a = migration['dest_compute']",
            "b = row.get('new_pci_requests')",
            "c = m['old_flavor']",
            "e = migration['uuid']",
            "f = migrations[0]['status']",
            "g = source_migration.get('instance_uuid')",
            "lambda i, m: m['status'] == 'finished'",
            # Not migrations: another record's shared key.
            "h = instance['uuid']",
            "i = server.get('status')",
            "j = migration.dest_compute",
            "view['dest_compute'] = migration.dest_compute",
            "k = req.GET.get('migration_type')",
        ])
        self.assertEqual(
            ["1: migration['dest_compute']", "2: row['new_pci_requests']",
             "3: m['old_flavor']", "4: migration['uuid']",
             "5: migrations[0]['status']",
             "6: source_migration['instance_uuid']", "7: m['status']"],
            migration_key_reads(source))

    def test_scan_covers_every_migration_field(self):
        for field in dataclasses.fields(records.Migration):
            self.assertEqual(
                ["1: migration[%r]" % field.name],
                migration_key_reads("x = migration[%r]" % field.name))

    def test_scan_finds_the_reads_of_device_dicts(self):
        source = '\n'.join([
            "a = dev['address']",
            "b = device.get('status')",
            "c = row['parent_addr']",
            "e = dev.extra_info.get('managed', 'true')",
            "f = d.get('numa_node')",
            # Not devices: another record's shared key, a spec tag, an
            # XML attribute.
            "g = migration['instance_uuid']",
            "h = spec.tags.get('managed', 'true')",
            "i = hostdev.get('managed', 'no')",
        ])
        self.assertEqual(
            ["1: dev['address']", "2: device['status']",
             "3: row['parent_addr']", "4: dev.extra_info['managed']",
             "5: d['numa_node']"],
            key_reads(source))

    def test_scan_covers_every_record_field(self):
        for record in (pci_device.HostDevice, pci_device.TrackedDevice,
                       pci_device.Passthrough):
            for field in dataclasses.fields(record):
                self.assertEqual(
                    ["1: dev[%r]" % field.name],
                    key_reads("x = dev[%r]" % field.name))

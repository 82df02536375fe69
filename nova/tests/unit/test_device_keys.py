"""A device's fields are read by name only in ``nova/pci/device.py``,
a migration's and an instance's only in ``nova/db``.

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

Instances are ``nova.db.records.Instance`` records, their flavor a
``FlavorSnapshot``: the scan fails on a subscript or ``.get()`` with a
key only instances have (``vm_state``, ``task_state``, ``power_state``,
``pci_requests``, ``image_ref``...), on anything but the ``values`` a
writer gives ``db.instance_update``; with any instance key on a variable
named like an instance (``instance``, ``inst``, ``*_instance``,
``instances[i]``); and with a flavor field on a record's ``flavor``,
``old_flavor`` or ``new_flavor``.

The database layer (``nova/db``) stores rows of every table and is the
other side of the edge; it is not scanned.
"""

import ast
import dataclasses
import pathlib
import re

import fixtures

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

INSTANCE_KEYS = frozenset(
    field.name for field in dataclasses.fields(records.Instance))
# Instance keys other records, API bodies and query parameters also have
# (``body['key_name']``, ``?locked=``, a flavor's ``description``).
INSTANCE_SHARED_KEYS = frozenset({
    'id', 'uuid', 'display_name', 'project_id', 'user_id', 'host', 'node',
    'flavor', 'description', 'key_name', 'user_data', 'locked',
    'locked_reason', 'created_at', 'updated_at', 'deleted_at',
})
INSTANCE_ONLY_KEYS = INSTANCE_KEYS - INSTANCE_SHARED_KEYS
FLAVOR_SNAPSHOT_KEYS = frozenset(
    field.name for field in dataclasses.fields(records.FlavorSnapshot))

_INSTANCE_NAME = re.compile(r'^(inst|instance|\w+_instance)$')


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


def _is_named(receiver: ast.AST, pattern: re.Pattern,
              plural: str) -> bool:
    """Whether ``receiver`` is a variable named like a record, or an
    item of a list named ``plural`` (``migrations[0]``)."""
    if isinstance(receiver, ast.Subscript):
        receiver = receiver.value
        return isinstance(receiver, ast.Name) and receiver.id == plural
    return isinstance(receiver, ast.Name) and bool(pattern.match(receiver.id))


def _is_migration_name(receiver: ast.AST) -> bool:
    return _is_named(receiver, _MIGRATION_NAME, 'migrations')


def _is_instance_name(receiver: ast.AST) -> bool:
    return _is_named(receiver, _INSTANCE_NAME, 'instances')


def _record_key_reads(source: str, keys: frozenset[str],
                      only_keys: frozenset[str], is_named) -> list[str]:
    """``line: receiver[key]`` for each read of a record's key in
    ``source``: a key in ``only_keys`` on anything, or one of ``keys``
    on a receiver ``is_named`` says is named like the record."""
    found = []
    for node in ast.walk(ast.parse(source)):
        read = _key_read(node)
        if read is None:
            continue
        receiver, key = read
        if getattr(node, 'ctx', None) is not None and \
                not isinstance(node.ctx, ast.Load):
            # Setting a key (of a view being built) reads no record.
            continue
        if isinstance(receiver, ast.Attribute) and receiver.attr == 'GET':
            # Query parameters named like the columns they filter.
            continue
        if isinstance(receiver, ast.Name) and receiver.id == 'values':
            # The columns a writer gives db.api (read back to log them).
            continue
        if key in only_keys or (key in keys and is_named(receiver)):
            found.append('%d: %s[%r]' % (node.lineno,
                                         ast.unparse(receiver), key))
    return found


def migration_key_reads(source: str) -> list[str]:
    """``line: receiver[key]`` for each migration key read in
    ``source``."""
    return _record_key_reads(source, MIGRATION_KEYS, MIGRATION_ONLY_KEYS,
                             _is_migration_name)


def _is_flavor_snapshot(receiver: ast.AST) -> bool:
    """``x.flavor``, ``x.old_flavor``, ``x.new_flavor``: a record's
    flavor snapshot."""
    return isinstance(receiver, ast.Attribute) and \
        receiver.attr in ('flavor', 'old_flavor', 'new_flavor')


def instance_key_reads(source: str) -> list[str]:
    """``line: receiver[key]`` for each instance key read in ``source``,
    and each read of a flavor snapshot's field by key."""
    found = _record_key_reads(source, INSTANCE_KEYS, INSTANCE_ONLY_KEYS,
                              _is_instance_name)
    for node in ast.walk(ast.parse(source)):
        read = _key_read(node)
        if read is not None and read[1] in FLAVOR_SNAPSHOT_KEYS and \
                _is_flavor_snapshot(read[0]):
            found.append('%d: %s[%r]' % (node.lineno,
                                         ast.unparse(read[0]), read[1]))
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
        reads = migration_key_reads(source) + instance_key_reads(source)
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

    def test_scan_finds_the_reads_of_instance_dicts(self):
        source = '\n'.join([
            "a = instance['vm_state']",
            "b = row.get('task_state')",
            "c = inst['host']",
            "e = instances[0]['uuid']",
            "f = moved_instance.get('node')",
            "g = current['pci_requests']",
            "h = migration.new_flavor['vcpus']",
            "i = instance.flavor.get('extra_specs')",
            # Not instances: shared keys elsewhere, a view being built,
            # query parameters, the columns a writer gives db.api, a
            # flavor row.
            "j = body['key_name']",
            "k = service['host']",
            "view['OS-EXT-STS:vm_state'] = instance.vm_state",
            "l = req.GET.get('image_ref')",
            "m = values['vm_state']",
            "n = flavor['vcpus']",
            "o = instance.vm_state",
        ])
        self.assertEqual(
            ["1: instance['vm_state']", "2: row['task_state']",
             "3: inst['host']", "4: instances[0]['uuid']",
             "5: moved_instance['node']", "6: current['pci_requests']",
             "7: migration.new_flavor['vcpus']",
             "8: instance.flavor['extra_specs']"],
            sorted(instance_key_reads(source)))

    def test_scan_covers_every_instance_field(self):
        for field in dataclasses.fields(records.Instance):
            self.assertEqual(
                ["1: instance[%r]" % field.name],
                instance_key_reads("x = instance[%r]" % field.name))
        for field in dataclasses.fields(records.FlavorSnapshot):
            self.assertEqual(
                ["1: instance.flavor[%r]" % field.name],
                instance_key_reads("x = instance.flavor[%r]" % field.name))

    def test_scan_fails_on_a_planted_instance_read(self):
        root = self.useFixture(fixtures.TempDir()).path
        package = pathlib.Path(root, 'nova')
        (package / 'compute').mkdir(parents=True)
        (package / 'db').mkdir()
        (package / 'compute' / 'api.py').write_text(
            "def stop(instance):\n    return instance['power_state']\n")
        # The database layer reads its rows by key.
        (package / 'db' / 'api.py').write_text(
            "def get(row):\n    return row['power_state']\n")
        self.assertEqual(
            ["%s:2: instance['power_state']" % (
                package / 'compute' / 'api.py')],
            violations(package, None))

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

"""A device's fields are read by name only in ``nova/pci/device.py``;
a migration's, an instance's, a compute node's and a service's only in
``nova/db``.

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

Migrations, instances, compute nodes, services and flavors are
``nova.db.records`` records outside the database layer (``Migration``,
``Instance``, ``ComputeNode``, ``Service``, ``Flavor``); the scan fails
likewise on a subscript or ``.get()``:

* with a key only that record has, on anything (``source_compute``,
  ``old_flavor``; ``vm_state``, ``pci_requests``, ``image_ref``;
  ``hypervisor_hostname``, ``local_gb``; ``binary``, ``forced_down``,
  ``last_seen_up``; ``flavorid``, ``is_public``...);
* with any of its keys (also ``id``, ``uuid``, ``host``...) on a variable
  named like it (``migration``, ``mig``, ``m``, ``*_migration``;
  ``instance``, ``inst``, ``*_instance``; ``node``, ``cn``,
  ``compute_node``, ``*_node``; ``service``, ``svc``, ``*_service``;
  ``flavor``, ``*_flavor``), on
  an item of a collection of them (``nodes[uuid]['host']``) or on a loop
  variable over one (``for n in nodes``,
  ``sorted(nodes, key=lambda n: n['host'])``,
  ``for s in db.service_get_all(...)``);
* with a flavor field on a record's ``flavor``, ``old_flavor`` or
  ``new_flavor`` (a ``FlavorSnapshot``).

Setting a key (of a view being built), query parameters (``req.GET``),
request bodies (``body``), the columns a writer gives ``db.api``
(``values``) and the virt driver's ``resources`` are no reads of a
record.

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


@dataclasses.dataclass(frozen=True)
class RecordKeys:
    """The keys of one kind of ``nova.db.records`` record, and how the
    variables holding one are named."""

    record: type
    # Its keys other records, request bodies or views also have: a read
    # of one counts only on a variable named like the record.
    shared: frozenset[str]
    # Names of a variable (or attribute) holding one record...
    name: re.Pattern
    # ...and of a list or dict of them (``migrations[0]['uuid']``); a
    # loop variable over one (``for n in nodes``, ``key=lambda n: ...``)
    # holds a record too.
    plural: frozenset[str]
    # The ``nova.db.api`` functions returning a list of them, whose loop
    # variables hold one as well.
    getters: frozenset[str]

    @property
    def keys(self) -> frozenset[str]:
        return frozenset(field.name
                         for field in dataclasses.fields(self.record))

    @property
    def only_keys(self) -> frozenset[str]:
        return self.keys - self.shared

    def is_many(self, node: ast.AST) -> bool:
        """True if ``node`` is a collection of these records: a plural
        name, a getter's result, or either sorted or listed."""
        if isinstance(node, ast.Call):
            function = _name_of(node.func)
            if function in self.getters:
                return True
            return function in ('sorted', 'list', 'reversed') and \
                bool(node.args) and self.is_many(node.args[0])
        return _name_of(node) in self.plural

    def loop_names(self, tree: ast.AST) -> frozenset[str]:
        """The loop and key-function variables of ``tree`` going over a
        collection of these records."""
        names = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.For, ast.comprehension)) and \
                    isinstance(node.target, ast.Name) and \
                    self.is_many(node.iter):
                names.add(node.target.id)
            if isinstance(node, ast.Call) and node.args and \
                    self.is_many(node.args[0]):
                names.update(
                    keyword.value.args.args[0].arg
                    for keyword in node.keywords
                    if isinstance(keyword.value, ast.Lambda) and
                    keyword.value.args.args)
        return frozenset(names)

    def names(self, receiver: ast.AST, loop_names: frozenset[str]) -> bool:
        """True if ``receiver`` is named like one of these records."""
        if isinstance(receiver, ast.Subscript):
            return self.is_many(receiver.value)
        name = _name_of(receiver)
        return name is not None and (name in loop_names or
                                     bool(self.name.match(name)))


# Keys other records (instances, actions, services) also have.
MIGRATION = RecordKeys(
    records.Migration,
    shared=frozenset({
        'id', 'uuid', 'instance_uuid', 'status', 'project_id', 'user_id',
        'created_at', 'updated_at', 'deleted_at',
    }),
    name=re.compile(r'^(m|migration|mig|\w+_migration)$'),
    plural=frozenset({'migrations'}),
    getters=frozenset({'migration_get_all', 'migration_get_in_progress',
                       'migration_get_orphaned'}))
# Keys instances (host, node), flavors (vcpus, memory_mb), devices and
# migrations also have.
COMPUTE_NODE = RecordKeys(
    records.ComputeNode,
    shared=frozenset({
        'id', 'uuid', 'host', 'vcpus', 'memory_mb', 'created_at',
        'updated_at', 'deleted_at',
    }),
    name=re.compile(r'^(cn|node|compute_node|\w+_node)$'),
    plural=frozenset({'nodes', 'compute_nodes'}),
    getters=frozenset({'compute_node_get_all'}))
# Keys every record has, and flavors (disabled) too.
SERVICE = RecordKeys(
    records.Service,
    shared=frozenset({'id', 'uuid', 'host', 'disabled', 'created_at',
                      'updated_at'}),
    name=re.compile(r'^(svc|service|\w+_service)$'),
    plural=frozenset({'services'}),
    getters=frozenset({'service_get_all'}))
# Keys other records, API bodies and query parameters also have
# (``body['key_name']``, ``?locked=``, a flavor's ``description``).
INSTANCE = RecordKeys(
    records.Instance,
    shared=frozenset({
        'id', 'uuid', 'display_name', 'project_id', 'user_id', 'host',
        'node', 'flavor', 'description', 'key_name', 'user_data', 'locked',
        'locked_reason', 'created_at', 'updated_at', 'deleted_at',
    }),
    name=re.compile(r'^(inst|instance|\w+_instance)$'),
    plural=frozenset({'instances'}),
    getters=frozenset({'instance_get_all'}))
# Keys flavor snapshots, instances and compute nodes (sizes), and API
# views also have.
FLAVOR = RecordKeys(
    records.Flavor,
    shared=frozenset({
        'id', 'name', 'vcpus', 'memory_mb', 'disabled', 'extra_specs',
        'created_at', 'updated_at',
    }),
    name=re.compile(r'^(flavor|\w+_flavor)$'),
    plural=frozenset({'flavors'}),
    getters=frozenset({'flavor_get_all'}))
RECORDS = (MIGRATION, INSTANCE, COMPUTE_NODE, SERVICE, FLAVOR)
FLAVOR_SNAPSHOT_KEYS = frozenset(
    field.name for field in dataclasses.fields(records.FlavorSnapshot))
# Wire forms named like the columns they carry: request bodies, the
# columns a writer gives db.api, and the virt driver's resources a
# compute node is synced from.
_WIRE_NAMES = frozenset({'body', 'values', 'resources'})


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


def _name_of(receiver: ast.AST) -> str | None:
    """``x`` of ``x`` or of ``self.x`` (leading underscores dropped)."""
    if isinstance(receiver, ast.Name):
        return receiver.id.lstrip('_')
    if isinstance(receiver, ast.Attribute):
        return receiver.attr.lstrip('_')
    return None


def record_key_reads(source: str, kind: RecordKeys) -> list[str]:
    """``line: receiver[key]`` for each read of a key of a ``kind``
    record in ``source``."""
    found = []
    tree = ast.parse(source)
    loop_names = kind.loop_names(tree)
    for node in ast.walk(tree):
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
        if _name_of(receiver) in _WIRE_NAMES:
            continue
        if key in kind.only_keys or (key in kind.keys and
                                     kind.names(receiver, loop_names)):
            found.append('%d: %s[%r]' % (node.lineno,
                                         ast.unparse(receiver), key))
    return found


def flavor_key_reads(source: str) -> list[str]:
    """``line: receiver[key]`` for each read of a flavor snapshot's
    field by key on a record's ``flavor``, ``old_flavor`` or
    ``new_flavor``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        read = _key_read(node)
        if read is None:
            continue
        receiver, key = read
        if key in FLAVOR_SNAPSHOT_KEYS and \
                isinstance(receiver, ast.Attribute) and \
                receiver.attr in ('flavor', 'old_flavor', 'new_flavor'):
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
        reads = [read for kind in RECORDS
                 for read in record_key_reads(source, kind)]
        reads += flavor_key_reads(source)
        if not owns_devices:
            reads = key_reads(source) + reads
        found += ['%s:%s' % (path, read) for read in reads]
    return found


def _by_line(reads: list[str]) -> list[str]:
    """``reads`` (``line: read``) in line order (the scan walks the tree
    breadth first)."""
    return sorted(reads, key=lambda read: int(read.split(':')[0]))


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
            record_key_reads(source, MIGRATION))

    def test_scan_finds_the_reads_of_instance_dicts(self):
        source = '\n'.join([
            "a = instance['vm_state']",
            "b = row.get('task_state')",
            "c = inst['host']",
            "e = instances[0]['uuid']",
            "f = moved_instance.get('node')",
            "g = current['pci_requests']",
            "h = [i['display_name'] for i in db.instance_get_all(ctx)]",
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
             "7: i['display_name']"],
            _by_line(record_key_reads(source, INSTANCE)))

    def test_scan_finds_the_reads_of_flavor_snapshots(self):
        source = '\n'.join([
            "h = migration.new_flavor['vcpus']",
            "i = instance.flavor.get('extra_specs')",
            "j = self.old_flavor['root_gb']",
            # Not a snapshot: a flavor row, an attribute read.
            "n = flavor['vcpus']",
            "o = instance.flavor.vcpus",
        ])
        self.assertEqual(
            ["1: migration.new_flavor['vcpus']",
             "2: instance.flavor['extra_specs']",
             "3: self.old_flavor['root_gb']"],
            _by_line(flavor_key_reads(source)))
        for field in dataclasses.fields(records.FlavorSnapshot):
            self.assertEqual(
                ["1: instance.flavor[%r]" % field.name],
                flavor_key_reads("x = instance.flavor[%r]" % field.name))

    def test_scan_covers_every_record_kind_field(self):
        for kind, name in ((MIGRATION, 'migration'), (INSTANCE, 'instance'),
                           (COMPUTE_NODE, 'node'), (SERVICE, 'service'),
                           (FLAVOR, 'flavor')):
            for field in dataclasses.fields(kind.record):
                self.assertEqual(
                    ["1: %s[%r]" % (name, field.name)],
                    record_key_reads("x = %s[%r]" % (name, field.name),
                                     kind))

    def test_scan_finds_the_reads_of_compute_node_dicts(self):
        source = '\n'.join([
            "a = row['hypervisor_hostname']",
            "b = node.get('local_gb', 0)",
            "c = compute_node['id']",
            "e = self.rt.compute_node['uuid']",
            "f = nodes[candidate.host]['host']",
            "g = sorted(nodes, key=lambda n: n['host'])",
            "h = [n['uuid'] for n in db.compute_node_get_all(ctx)]",
            "for each in nodes:",
            "    i = each.get('vcpus')",
            "j = cn['service_id']",
            # Not compute nodes: an instance's and a flavor's shared keys,
            # the virt driver's resources, a view being built.
            "k = instance['host']",
            "l = flavor['memory_mb']",
            "o = resources.get('hypervisor_type')",
            "view['local_gb'] = node.local_gb",
            "p = [s['uuid'] for s in servers]",
        ])
        self.assertEqual(
            ["1: row['hypervisor_hostname']", "2: node['local_gb']",
             "3: compute_node['id']", "4: self.rt.compute_node['uuid']",
             "5: nodes[candidate.host]['host']", "6: n['host']",
             "7: n['uuid']", "9: each['vcpus']", "10: cn['service_id']"],
            _by_line(record_key_reads(source, COMPUTE_NODE)))

    def test_scan_finds_the_reads_of_service_dicts(self):
        source = '\n'.join([
            "a = row['binary']",
            "b = service.get('forced_down')",
            "c = svc['last_seen_up'] or svc['created_at']",
            "e = services[node.host]['disabled']",
            "f = {s['host']: s for s in db.service_get_all(ctx, BINARY)}",
            "g = target_service['uuid']",
            "h = x.get('disabled_reason')",
            # Not services: a flavor's shared key, a request body, query
            # parameters.
            "i = flavor['disabled']",
            "j = body['binary']",
            "k = req.GET.get('binary')",
        ])
        self.assertEqual(
            ["1: row['binary']", "2: service['forced_down']",
             "3: svc['last_seen_up']", "3: svc['created_at']",
             "4: services[node.host]['disabled']", "5: s['host']",
             "6: target_service['uuid']", "7: x['disabled_reason']"],
            _by_line(record_key_reads(source, SERVICE)))

    def test_violations_name_planted_reads_outside_the_db_layer(self):
        root = pathlib.Path(self.useFixture(fixtures.TempDir()).path)
        planted = ("x = node['hypervisor_hostname']\ny = svc['binary']\n"
                   "def stop(instance):\n    return instance['power_state']\n")
        (root / 'api').mkdir()
        (root / 'api' / 'planted.py').write_text(planted)
        (root / 'db').mkdir()
        (root / 'db' / 'api.py').write_text(planted)
        self.assertEqual(
            sorted(["%s:1: node['hypervisor_hostname']" % (
                root / 'api' / 'planted.py'),
             "%s:2: svc['binary']" % (root / 'api' / 'planted.py'),
             "%s:4: instance['power_state']" % (
                 root / 'api' / 'planted.py')]),
            sorted(violations(root, tools=None)))

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

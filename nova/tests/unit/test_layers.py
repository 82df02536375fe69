"""Data flows one way: no module imports from a layer above its own.

Test code sits above every layer: no module outside ``nova.tests`` may
import ``nova.tests``. The fakes production code ships (the generated GPU
hosts, nova-all's fake Fabric Manager) live in ``nova.virt.fake``, which
only nova-all, the demo and the tests may import (tools outside ``nova``
may too): a service never runs on a fake. And no module imports, even
from inside a function, a module that imports it back.

The layers, lowest first: the state vocabulary (``nova.states``, which
imports nothing from nova); the shared base (configuration, database,
context, RPC plumbing, the PCI device model, config parsing and tracker
``nova.pci``, virt hardware helpers, the image service client
``nova.image``, the in-process HTTP plumbing ``nova.wsgi_server``,
``nova.body_limit`` and ``nova.embedded_placement``); the fleet views
and plans (``nova.fleet``: board, picture, gauges, defrag planner) and
the virt drivers, side by side; the compute service and the scheduler,
side by side; the conductor, which drives both; the REST API; the
console commands and the WSGI entry points (``nova.wsgi``).

Inside the base, ``nova.pci`` is the device model every service imports:
of its modules only the tracker (``nova.pci.manager``) reads or writes
the database, and none reads which services are up; reading many hosts
at once is ``nova.fleet``'s job. The image client serves nothing
(nova-all's Glance process is ``nova.cmd.glance_service``), and the
Placement client (``nova.scheduler.client``) talks to Placement only,
never to the database.

A service reaches a layer above, or its sibling, only through that layer's
RPC stub (``rpcapi``) or the Placement client (``nova.scheduler.client``,
upstream's home for it), never by importing its code. ``nova.compute.api``
sits in the compute package but is the REST API's side of it: the
conductor never imports it (moves the conductor starts by itself go
through ``nova.conductor.migrate``, which the Compute API uses too).

A module given a service through a typed seam (a ``typing.Protocol``,
e.g. ``nova.compute.repair.Compute``) uses only its public names: it
never reads a private attribute (``compute._cleanup``) of what it is
given. The compute manager and those modules use the host's devices
through the resource tracker (``rt.claim``, ``rt.held_by``), never
through its PCI tracker.

The scripts of ``tools/`` (benchmarks, soak, image builder) drive nova
through its public entry points, as a deployment would: they never read a
private name (``client._call``) nor import the console commands
(``nova.cmd``), except a tool whose subject is a command (``CMD_TOOLS``).
"""

import ast
import pathlib

import fixtures

import nova
from nova import test

ROOT = pathlib.Path(nova.__file__).parent

# What a service (compute, scheduler, conductor, API) may import from
# another's package: RPC stubs, the Placement client, the names of a
# compute's states and the one policy for giving an allocation back
# (``nova.scheduler.frees``). The base layer imports none of them.
SHARED = (
    'nova.compute.rpcapi', 'nova.conductor.rpcapi', 'nova.scheduler.rpcapi',
    'nova.scheduler.client', 'nova.compute.provider_tree',
    'nova.compute.task_states', 'nova.compute.vm_states',
    'nova.scheduler.frees',
)

ABOVE_SERVICES = ('nova.conductor', 'nova.api', 'nova.cmd', 'nova.wsgi')

# What the shared base imports from none of: the layers above it.
ABOVE_BASE = ('nova.fleet', 'nova.virt', 'nova.compute',
              'nova.scheduler') + ABOVE_SERVICES

# (package, packages it must not import from). ``nova.compute.api`` is
# the REST API's side of the compute service and counts as API layer.
RULES = [
    # The ground floor: nothing of nova below it.
    ('nova.states', ('nova',)),
    # The PCI model reads no database and no service's liveness (only
    # its tracker may write devices, see ALLOWED).
    ('nova.pci', ('nova.db', 'nova.servicegroup') + ABOVE_BASE),
    ('nova.db', ('nova.pci',) + ABOVE_BASE),
    ('nova.conf', ABOVE_BASE),
    ('nova.image', ('nova.pci', 'nova.wsgi_server') + ABOVE_BASE),
    ('nova.wsgi_server', ABOVE_BASE),
    ('nova.body_limit', ABOVE_BASE),
    ('nova.embedded_placement', ('nova.pci',) + ABOVE_BASE),
    ('nova.manager', ABOVE_BASE),
    ('nova.service', ABOVE_BASE),
    ('nova.rpc', ABOVE_BASE),
    ('nova.context', ABOVE_BASE),
    # The fleet views and the virt drivers: side by side above the base.
    ('nova.fleet', ('nova.virt', 'nova.compute', 'nova.scheduler')
     + ABOVE_SERVICES),
    ('nova.virt', ('nova.fleet', 'nova.compute', 'nova.scheduler')
     + ABOVE_SERVICES),
    ('nova.compute', ('nova.scheduler',) + ABOVE_SERVICES),
    ('nova.scheduler', ('nova.compute',) + ABOVE_SERVICES),
    ('nova.scheduler.client', ('nova.db', 'nova.servicegroup')),
    ('nova.conductor', ('nova.compute.api', 'nova.api', 'nova.cmd',
                        'nova.wsgi')),
    ('nova.api', ('nova.cmd', 'nova.wsgi')),
]

# (importer, imported package): edges a rule above forbids that the
# design allows, each for its reason.
ALLOWED = (
    # The PCI tracker keeps the host's devices in the database.
    ('nova.pci.manager', 'nova.db'),
    # The instance and migration records carry their PCI requests parsed
    # (the PCI model's request type reads no database).
    ('nova.db.records', 'nova.pci.request'),
)

# Test code, which no production module may import.
TESTS = 'nova.tests'

# The demo and test fakes, and the only modules that may import them.
FAKES = 'nova.virt.fake'
FAKE_IMPORTERS = ('nova.cmd.all', 'nova.demo', TESTS, FAKES)

EXEMPT = ('nova.compute.api',)

SERVICES = ('nova.compute', 'nova.scheduler', 'nova.conductor', 'nova.api')

# Modules that use the compute manager through a Protocol, and so only
# by its public names.
SEAMS = ('nova.compute.repair', 'nova.compute.moves', 'nova.compute.health')

# Modules that use the host's devices through the resource tracker's
# methods, never its ``pci_tracker``.
TRACKER_CLIENTS = ('nova.compute.manager',) + SEAMS


# The scripts outside the package, and those that start a console
# command because it is what they measure: bench_wsgi serves nova-all's
# API to compare HTTP servers.
TOOLS = ROOT.parent / 'tools'
CMD_TOOLS = ('bench_wsgi',)


def _module_name(path: pathlib.Path, root: pathlib.Path) -> str:
    parts = path.relative_to(root.parent).with_suffix('').parts
    if parts[-1] == '__init__':
        parts = parts[:-1]
    return '.'.join(parts)


def _type_only(tree: ast.AST) -> set[int]:
    """Ids of the nodes under ``if TYPE_CHECKING:``: imports for
    annotations that never run."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and (
                getattr(node.test, 'id', None) == 'TYPE_CHECKING' or
                getattr(node.test, 'attr', None) == 'TYPE_CHECKING'):
            for child in node.body:
                found.update(id(n) for n in ast.walk(child))
    return found


def _imports(path: pathlib.Path, runtime_only: bool = False) -> set[str]:
    """Every nova module ``path`` imports, at any depth of its code (with
    ``runtime_only``, not the imports for annotations only)."""
    found: set[str] = set()
    tree = ast.parse(path.read_text())
    skipped = _type_only(tree) if runtime_only else set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.update('%s.%s' % (node.module, a.name)
                         for a in node.names)
    return {name for name in found if name.startswith('nova.')}


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + '.')


def violations(root: pathlib.Path = ROOT) -> list[str]:
    """``importer -> imported`` for each import under ``root`` (the
    ``nova`` package directory) that breaks a rule."""
    found = []
    for path in sorted(root.rglob('*.py')):
        importer = _module_name(path, root)
        if _within(importer, TESTS):
            continue
        imports = _imports(path)
        found += ['%s -> %s' % (importer, imported)
                  for imported in sorted(imports)
                  if _within(imported, TESTS)]
        if not any(_within(importer, f) for f in FAKE_IMPORTERS):
            found += ['%s -> %s' % (importer, imported)
                      for imported in sorted(imports)
                      if _within(imported, FAKES)]
        if any(_within(importer, e) for e in EXEMPT):
            continue
        for package, forbidden in RULES:
            if not _within(importer, package):
                continue
            is_service = any(_within(importer, s) for s in SERVICES)
            for imported in sorted(imports):
                if is_service and any(_within(imported, s) for s in SHARED):
                    continue
                if _within(imported, package):
                    continue
                if any(importer == allowed and _within(imported, target)
                       for allowed, target in ALLOWED):
                    continue
                if any(_within(imported, f) for f in forbidden):
                    found.append('%s -> %s' % (importer, imported))
    return found


def _private(name: str) -> bool:
    return name.startswith('_') and not name.endswith('__')


def _nodes(root: pathlib.Path, modules: tuple[str, ...]):
    """(module, node) for every AST node of each of ``modules``."""
    for module in modules:
        path = root.parent.joinpath(*module.split('.')).with_suffix('.py')
        for node in ast.walk(ast.parse(path.read_text())):
            yield module, node


def private_reaches(root: pathlib.Path = ROOT) -> list[str]:
    """``module:line expression`` for each private attribute a seam module
    (``SEAMS``) reads on another object than ``self`` or ``cls``, by dot
    or by ``getattr``."""
    found = []
    for module in SEAMS:
        path = root.parent.joinpath(*module.split('.')).with_suffix('.py')
        found += ['%s:%d %s' % (module, line, expression) for line, expression
                  in _private_reads(ast.parse(path.read_text()))]
    return found


def _private_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, expression) of each private attribute read in ``tree`` on
    another object than ``self`` or ``cls``, by dot or by ``getattr``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            owner, name = node.value, node.attr
        elif isinstance(node, ast.Call) and \
                getattr(node.func, 'id', None) == 'getattr' and \
                len(node.args) > 1 and \
                isinstance(node.args[1], ast.Constant) and \
                isinstance(node.args[1].value, str):
            owner, name = node.args[0], node.args[1].value
        else:
            continue
        if _private(name) and \
                getattr(owner, 'id', None) not in ('self', 'cls'):
            found.append((node.lineno, ast.unparse(node)))
    return found


def tool_reaches(tools: pathlib.Path = TOOLS) -> list[str]:
    """``tool:line what`` for each place a script of ``tools`` goes
    around nova's public entry points: a private attribute it reads
    (``_private_reads``), a private name it imports, or an import of
    ``nova.cmd`` (unless the tool is one of ``CMD_TOOLS``)."""
    found = []
    for path in sorted(tools.glob('*.py')):
        tree = ast.parse(path.read_text())
        found += ['%s:%d %s' % (path.stem, line, expression)
                  for line, expression in _private_reads(tree)]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = ['%s.%s' % (node.module, alias.name)
                         for alias in node.names]
            else:
                continue
            for name in names:
                if any(_private(part) for part in name.split('.')):
                    found.append('%s:%d import %s' % (path.stem,
                                                      node.lineno, name))
                elif _within(name, 'nova.cmd') and \
                        path.stem not in CMD_TOOLS:
                    found.append('%s:%d import %s' % (path.stem,
                                                      node.lineno, name))
    return found


def tracker_reaches(root: pathlib.Path = ROOT) -> list[str]:
    """``module:line expression`` for each use of a ``pci_tracker``
    attribute in ``TRACKER_CLIENTS``: they get devices from the resource
    tracker's methods, so how it keeps them stays its own business."""
    return ['%s:%d %s' % (module, node.lineno, ast.unparse(node))
            for module, node in _nodes(root, TRACKER_CLIENTS)
            if isinstance(node, ast.Attribute) and
            node.attr == 'pci_tracker']


def _import_graph(root: pathlib.Path) -> dict[str, set[str]]:
    """Module -> the nova modules it imports when it runs (``from m
    import name`` counts as importing ``m`` when ``name`` is not a
    module; an import under ``if TYPE_CHECKING:`` names a type for an
    annotation and is no edge)."""
    paths = {_module_name(path, root): path
             for path in sorted(root.rglob('*.py'))}
    graph = {}
    for importer, path in paths.items():
        graph[importer] = set()
        for imported in _imports(path, runtime_only=True):
            while imported and imported not in paths:
                imported = imported.rpartition('.')[0]
            if imported and imported != importer:
                graph[importer].add(imported)
    return graph


def circles(root: pathlib.Path = ROOT) -> list[list[str]]:
    """The import circles under ``root``: each a sorted list of modules
    that all reach each other by imports (a strongly connected component
    of more than one module, Tarjan's algorithm)."""
    graph = _import_graph(root)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph[module]):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(found)


class TestLayers(test.TestCase):

    def test_no_module_imports_from_a_layer_above(self):
        self.assertEqual([], violations())

    def test_the_check_sees_a_forbidden_import(self):
        # The rule table must catch the edge issue 12 removed: compute
        # code re-deriving scheduler request suffixes.
        tmp = self.useFixture(fixtures.TempDir()).path
        root = pathlib.Path(tmp, 'nova')
        (root / 'compute').mkdir(parents=True)
        (root / 'compute' / 'probe.py').write_text(
            'from nova.scheduler import request_builder\n'
            'from nova.scheduler.client import report\n')
        self.assertEqual(
            ['nova.compute.probe -> nova.scheduler.request_builder'],
            violations(root))

    def test_the_check_sees_the_conductor_importing_the_compute_api(self):
        # The arrow issue 34 removed: the conductor's automatic defrag
        # moving servers through the REST API's compute layer. The
        # Compute API may use the conductor's move entry points.
        tmp = self.useFixture(fixtures.TempDir()).path
        root = pathlib.Path(tmp, 'nova')
        for package in ('compute', 'conductor'):
            (root / package).mkdir(parents=True)
        (root / 'conductor' / 'defrag.py').write_text(
            'from nova.compute import api as compute_api\n'
            'from nova.compute import instance_actions\n'
            'from nova.conductor import migrate\n')
        (root / 'conductor' / 'probe.py').write_text(
            'import nova.api.openstack\n')
        (root / 'compute' / 'api.py').write_text(
            'from nova.conductor import migrate\n')
        self.assertEqual(
            ['nova.conductor.defrag -> nova.compute.api',
             'nova.conductor.probe -> nova.api.openstack'],
            violations(root))

    def test_the_check_sees_the_pci_and_fleet_layers(self):
        # What issue 34 moved out of nova.pci: a planner reading the
        # database and which computes are up. Only the PCI tracker keeps
        # devices in the database; the model never reaches up to the
        # fleet views, nor they to the services above them.
        tmp = self.useFixture(fixtures.TempDir()).path
        root = pathlib.Path(tmp, 'nova')
        for package in ('pci', 'fleet', 'db', 'virt'):
            (root / package).mkdir(parents=True)
        (root / 'pci' / 'manager.py').write_text(
            'from nova.db import api as db\n')
        (root / 'pci' / 'defrag.py').write_text(
            'from nova.db import api as db\n'
            'from nova.servicegroup import api as servicegroup\n'
            'from nova.pci import manager\n')
        (root / 'pci' / 'groups.py').write_text(
            'def board():\n'
            '    from nova.fleet import board\n')
        (root / 'fleet' / 'board.py').write_text(
            'from nova.db import api as db\n'
            'from nova.pci import manager\n'
            'from nova.servicegroup import api as servicegroup\n'
            'from nova.scheduler import refusal\n')
        (root / 'fleet' / 'defrag.py').write_text(
            'from nova.conductor import defrag\n')
        (root / 'db' / 'api.py').write_text('from nova.fleet import board\n')
        (root / 'virt' / 'driver.py').write_text(
            'import nova.fleet.metrics\n')
        self.assertEqual(
            ['nova.db.api -> nova.fleet.board',
             'nova.fleet.board -> nova.scheduler.refusal',
             'nova.fleet.defrag -> nova.conductor.defrag',
             'nova.pci.defrag -> nova.db.api',
             'nova.pci.defrag -> nova.servicegroup.api',
             'nova.pci.groups -> nova.fleet.board',
             'nova.virt.driver -> nova.fleet.metrics'],
            violations(root))

    def test_the_check_sees_the_arrows_issue_34_removed(self):
        # The embedded Placement borrowing the API's body limit, the image
        # client hosting nova-all's Glance process, and a database-backed
        # queue inside the Placement client.
        tmp = self.useFixture(fixtures.TempDir()).path
        root = pathlib.Path(tmp, 'nova')
        for package in ('image', 'scheduler/client'):
            (root / package).mkdir(parents=True)
        (root / 'embedded_placement.py').write_text(
            'from nova.api import request_guard\n'
            'from nova import body_limit\n'
            'from nova import wsgi_server\n')
        (root / 'image' / 'glance_service.py').write_text(
            'def serve():\n'
            '    from nova import wsgi_server\n')
        (root / 'scheduler' / 'client' / 'frees.py').write_text(
            'from nova.db import api as db\n'
            'from nova.compute import vm_states\n')
        (root / 'scheduler' / 'frees.py').write_text(
            'from nova.db import api as db\n')
        (root / 'scheduler' / 'client' / 'report.py').write_text(
            'from nova.compute import provider_tree\n')
        self.assertEqual(
            ['nova.embedded_placement -> nova.api.request_guard',
             'nova.image.glance_service -> nova.wsgi_server',
             'nova.scheduler.client.frees -> nova.db.api'],
            violations(root))

    def test_the_check_sees_production_code_importing_tests(self):
        # The edge issue 25 removed: nova-all importing the fake Fabric
        # Manager from the test fixtures. Tests may import each other.
        tmp = self.useFixture(fixtures.TempDir()).path
        root = pathlib.Path(tmp, 'nova')
        for package in ('cmd', 'compute', 'tests/fixtures'):
            (root / package).mkdir(parents=True)
        (root / 'cmd' / 'probe.py').write_text(
            'def driver():\n'
            '    from nova.tests.fixtures import fake_fabric_manager\n')
        (root / 'compute' / 'api.py').write_text(
            'import nova.tests.fixtures.database\n')
        (root / 'tests' / 'fixtures' / 'probe.py').write_text(
            'from nova.tests.fixtures import database\n')
        self.assertEqual(
            ['nova.cmd.probe -> nova.tests.fixtures.fake_fabric_manager',
             'nova.compute.api -> nova.tests.fixtures.database'],
            violations(root))

    def test_only_the_demo_nova_all_and_tests_import_the_fakes(self):
        # A service importing a fake would run on it; nova-all, the demo
        # and the tests (and the fakes among themselves) may.
        tmp = self.useFixture(fixtures.TempDir()).path
        root = pathlib.Path(tmp, 'nova')
        for package in ('cmd', 'virt/libvirt', 'virt/fake', 'tests'):
            (root / package).mkdir(parents=True)
        (root / 'cmd' / 'compute.py').write_text(
            'def driver():\n'
            '    from nova.virt.fake import host\n')
        (root / 'virt' / 'libvirt' / 'driver.py').write_text(
            'import nova.virt.fake.fabric_manager\n')
        (root / 'cmd' / 'all.py').write_text(
            'from nova.virt.fake import fabric_manager\n')
        (root / 'demo.py').write_text('from nova.virt.fake import host\n')
        (root / 'virt' / 'fake' / 'probe.py').write_text(
            'from nova.virt.fake import host\n')
        (root / 'tests' / 'probe.py').write_text(
            'from nova.virt.fake import host\n')
        self.assertEqual(
            ['nova.cmd.compute -> nova.virt.fake.host',
             'nova.virt.libvirt.driver -> nova.virt.fake.fabric_manager'],
            violations(root))

    def test_no_import_circle(self):
        self.assertEqual([], circles())

    def test_the_check_sees_an_import_circle(self):
        # The circle issue 19 removed: the base driver module building the
        # libvirt driver (inside a function) that subclasses it.
        tmp = self.useFixture(fixtures.TempDir()).path
        root = pathlib.Path(tmp, 'nova')
        (root / 'virt' / 'libvirt').mkdir(parents=True)
        (root / 'virt' / '__init__.py').write_text('')
        (root / 'virt' / 'hardware.py').write_text('')
        (root / 'virt' / 'driver.py').write_text(
            'from nova.virt import hardware\n'
            'def load_driver():\n'
            '    from nova.virt.libvirt import driver\n')
        (root / 'virt' / 'libvirt' / 'driver.py').write_text(
            'from nova.virt import driver\n'
            'from nova.virt.driver import load_driver\n')
        (root / 'virt' / 'libvirt' / 'nvlink.py').write_text(
            'from nova.virt.libvirt import driver\n')
        self.assertEqual(
            [['nova.virt.driver', 'nova.virt.libvirt.driver']],
            circles(root))

    def test_an_annotation_only_import_is_no_circle(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        root = pathlib.Path(tmp, 'nova')
        root.mkdir()
        (root / 'manager.py').write_text('from nova import repair\n')
        (root / 'repair.py').write_text(
            'from typing import TYPE_CHECKING\n'
            'if TYPE_CHECKING:\n'
            '    from nova.manager import Manager\n')
        self.assertEqual([], circles(root))
        (root / 'repair.py').write_text('from nova.manager import Manager\n')
        self.assertEqual([['nova.manager', 'nova.repair']], circles(root))

    def test_seams_use_only_public_names(self):
        self.assertEqual([], private_reaches())

    def test_the_check_sees_a_private_reach(self):
        # What nova.compute.repair did before repair.Compute: call the
        # manager's private steps.
        tmp = self.useFixture(fixtures.TempDir()).path
        root = pathlib.Path(tmp, 'nova')
        (root / 'compute').mkdir(parents=True)
        (root / 'compute' / 'repair.py').write_text(
            'def at_start(compute, uuid):\n'
            '    compute._cleanup(uuid)\n'
            '    getattr(compute, "_hand_back")(uuid)\n'
            '    compute.tear_down(uuid)\n'
            '    compute.__class__\n'
            'class Mine:\n'
            '    def run(self):\n'
            '        self._step()\n')
        # What moves and health would do by calling the manager's
        # private build steps, as they were before they had a seam.
        (root / 'compute' / 'moves.py').write_text(
            'def prep_resize(compute, uuid):\n'
            '    compute._claim_devices(uuid)\n')
        (root / 'compute' / 'health.py').write_text(
            'def react(compute, changes):\n'
            '    compute.finish_action(changes)\n')
        self.assertEqual(
            ['nova.compute.repair:2 compute._cleanup',
             "nova.compute.repair:3 getattr(compute, '_hand_back')",
             'nova.compute.moves:2 compute._claim_devices'],
            private_reaches(root))

    def test_the_compute_uses_devices_through_the_resource_tracker(self):
        self.assertEqual([], tracker_reaches())

    def test_the_check_sees_a_reach_into_the_pci_tracker(self):
        # What the manager did before ResourceTracker.claim and held_by.
        tmp = self.useFixture(fixtures.TempDir()).path
        root = pathlib.Path(tmp, 'nova')
        (root / 'compute').mkdir(parents=True)
        (root / 'compute' / 'manager.py').write_text(
            'class ComputeManager:\n'
            '    def claim(self, uuid, request_id, addresses):\n'
            '        self.rt.pci_tracker.claim(uuid, request_id, addresses)\n'
            '        self.rt.claim(uuid, request_id, addresses)\n')
        (root / 'compute' / 'moves.py').write_text(
            'def held(compute):\n'
            '    return compute.rt.held_by("uuid")\n')
        (root / 'compute' / 'health.py').write_text('')
        (root / 'compute' / 'repair.py').write_text(
            'def holders(compute):\n'
            '    return compute.rt.pci_tracker.pci_devs\n')
        self.assertEqual(
            ['nova.compute.manager:3 self.rt.pci_tracker',
             'nova.compute.repair:2 compute.rt.pci_tracker'],
            tracker_reaches(root))


class TestTools(test.TestCase):
    """The scripts of tools/ use nova's public entry points only."""

    def test_tools_use_only_public_names_and_no_command(self):
        self.assertEqual([], tool_reaches())

    def test_the_check_sees_a_tool_going_around_the_seams(self):
        # What tools/bench_fleet.py did before issue 34: the report
        # client's private calls, and nova-all for its Placement options.
        tools = pathlib.Path(self.useFixture(fixtures.TempDir()).path)
        (tools / 'bench_probe.py').write_text(
            'from nova.cmd import all as nova_all\n'
            'from nova.scheduler.client import report\n'
            'from nova.compute.translator import _publish\n'
            'import nova.cmd.manage\n'
            'def run(client):\n'
            '    client._call("GET", "/traits")\n'
            '    getattr(client, "_ensure_custom_names")("traits", [])\n'
            '    client.set_traits("rp", set)\n')
        (tools / 'bench_wsgi.py').write_text(
            'from nova.cmd import all as nova_all\n')
        self.assertEqual(
            ['bench_probe:6 client._call',
             "bench_probe:7 getattr(client, '_ensure_custom_names')",
             'bench_probe:1 import nova.cmd.all',
             'bench_probe:3 import nova.compute.translator._publish',
             'bench_probe:4 import nova.cmd.manage'],
            tool_reaches(tools))

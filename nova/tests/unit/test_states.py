"""States are named, never retyped: production code takes vm, task, power
and migration states from ``nova.states`` (or upstream's re-exporting
modules), so a grep for a state finds every transition and a typo is an
AttributeError rather than a silent bug.

The check reads the syntax tree of every production module and reports a
literal equal to a state value where it can only mean that state:

* compared with, or stored as, a state (``instance['vm_state'] ==
  'error'``, ``{'status': 'done'}``, ``values['vm_state'] = 'error'``,
  ``status in ('a', 'b')``, ``expected_status='finished'``);
* a tuple, list or set made only of state values;
* a conditional choosing between two state values.

Literals elsewhere (log text, a fake Fabric Manager's daemon state, an
image's ``status``) are not states and are left alone.
"""

import ast
import pathlib

import fixtures

import nova
from nova import states
from nova import test

ROOT = pathlib.Path(nova.__file__).parent

VM_STATES = {states.BUILDING, states.ACTIVE, states.STOPPED, states.ERROR,
             states.SHELVED, states.SHELVED_OFFLOADED, states.RESIZED,
             states.DELETED, states.PAUSED, states.SUSPENDED,
             states.SOFT_DELETED}
TASK_STATES = {value for name, value in vars(states).items()
               if name.isupper() and isinstance(value, str)
               and not name.startswith('MIGRATION_')} - VM_STATES
MIGRATION_STATUSES = {value for name, value in vars(states).items()
                      if name.startswith('MIGRATION_')
                      and isinstance(value, str)}
POWER_STATES = {states.NOSTATE, states.RUNNING, states.SHUTDOWN}

# What a value of each state field may be: the key of a dict entry, the
# name of a keyword argument, subscript, variable or attribute.
BY_FIELD = {
    'vm_state': VM_STATES,
    'task_state': TASK_STATES,
    'power_state': POWER_STATES,
    'status': MIGRATION_STATUSES,
    'expected_status': MIGRATION_STATUSES,
}
ANY_STATE = VM_STATES | TASK_STATES | MIGRATION_STATUSES

# The modules that define the vocabulary.
DEFINING = ('nova/states.py',)


def _field(node: ast.AST) -> str | None:
    """The state field ``node`` reads (``x['status']``, ``status``,
    ``model.vm_state``, ``x.get('task_state')``), or None."""
    if isinstance(node, ast.Subscript) and \
            isinstance(node.slice, ast.Constant):
        name = node.slice.value
    elif isinstance(node, ast.Name):
        name = node.id
    elif isinstance(node, ast.Attribute):
        name = node.attr
    elif isinstance(node, ast.Call) and \
            isinstance(node.func, ast.Attribute) and \
            node.func.attr == 'get' and node.args and \
            isinstance(node.args[0], ast.Constant):
        name = node.args[0].value
    else:
        return None
    return name if name in BY_FIELD else None


def _literals(node: ast.AST) -> list[ast.Constant]:
    """The constants ``node`` is made of: itself, the items of a tuple,
    list or set, the branches of a conditional."""
    if isinstance(node, ast.Constant) and \
            not isinstance(node.value, bool):
        return [node]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [c for item in node.elts for c in _literals(item)]
    if isinstance(node, ast.IfExp):
        return _literals(node.body) + _literals(node.orelse)
    return []


def _states_in(node: ast.AST, allowed: set) -> list[ast.Constant]:
    return [c for c in _literals(node) if c.value in allowed]


def _retyped(tree: ast.AST) -> list[ast.Constant]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left] + node.comparators
            for side in sides:
                field = _field(side)
                if field:
                    for other in sides:
                        if other is not side:
                            found += _states_in(other, BY_FIELD[field])
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value in BY_FIELD:
                    found += _states_in(value, BY_FIELD[key.value])
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                field = _field(target)
                if field:
                    found += _states_in(node.value, BY_FIELD[field])
        elif isinstance(node, ast.keyword) and node.arg in BY_FIELD:
            found += _states_in(node.value, BY_FIELD[node.arg])
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)) and \
                len(node.elts) > 1 and all(
                    isinstance(e, ast.Constant) and e.value in ANY_STATE
                    for e in node.elts):
            found += node.elts
        elif isinstance(node, ast.IfExp) and all(
                isinstance(b, ast.Constant) and b.value in ANY_STATE
                for b in (node.body, node.orelse)):
            found += [node.body, node.orelse]
    return found


def retyped_states(root: pathlib.Path = ROOT) -> list[str]:
    """``path:line: value`` of each state retyped as a literal in the
    production modules under ``root`` (the ``nova`` package)."""
    found = set()
    for path in sorted(root.rglob('*.py')):
        relative = path.relative_to(root.parent).as_posix()
        if relative.startswith('nova/tests/') or relative in DEFINING:
            continue
        for constant in _retyped(ast.parse(path.read_text())):
            found.add((relative, constant.lineno, constant.value))
    return ['%s:%d: %r' % item for item in sorted(found)]


class TestStateLiterals(test.TestCase):

    def test_production_code_names_its_states(self):
        self.assertEqual([], retyped_states())

    def test_the_check_sees_retyped_states(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        root = pathlib.Path(tmp, 'nova')
        root.mkdir()
        (root / 'probe.py').write_text(
            "def f(instance, migration, status, db):\n"
            "    if instance['vm_state'] == 'error':\n"
            "        db.update({'task_state': 'spawning',\n"
            "                   'power_state': 1})\n"
            "    if status in ('migrating', 'post-migrating'):\n"
            "        db.update(expected_status='finished')\n"
            "    migration['status'] = 'done'\n"
            "    return 'failed' if migration else 'error'\n")
        # Not states: log text, another record's status, a daemon state.
        (root / 'fine.py').write_text(
            "def g(image, state, log):\n"
            "    log('instance is active')\n"
            "    if state['daemon'] == 'stopped':\n"
            "        return {'status': 'active', 'name': image}\n"
            "    return 'active' if image else 'inactive'\n")
        self.assertEqual(
            ["nova/probe.py:2: 'error'", "nova/probe.py:3: 'spawning'",
             "nova/probe.py:4: 1", "nova/probe.py:5: 'migrating'",
             "nova/probe.py:5: 'post-migrating'",
             "nova/probe.py:6: 'finished'", "nova/probe.py:7: 'done'",
             "nova/probe.py:8: 'error'", "nova/probe.py:8: 'failed'"],
            retyped_states(root))

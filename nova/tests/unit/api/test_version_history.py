"""The microversion table is the one place handlers compare versions
with: a bare ``'2.NN'`` in a handler, or an entry nothing uses, fails."""

import ast
import pathlib

from nova.api import microversion
from nova.api import version_history
from nova import test

API = pathlib.Path(version_history.__file__).parent
# The modules that parse and name versions; every other module asks
# with a named change.
OWNERS = {'microversion.py', 'version_history.py'}


def _bare_comparisons(source: str) -> list[int]:
    """Lines calling ``at_least`` (or passing a version to a helper)
    with a string literal that looks like a microversion."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        for arg in node.args:
            if (isinstance(arg, ast.Constant) and isinstance(arg.value, str)
                    and arg.value.startswith('2.')
                    and arg.value[2:].isdigit()):
                lines.append(node.lineno)
    return lines


class TestVersionHistory(test.TestCase):

    def modules(self):
        return sorted(p for p in API.glob('*.py') if p.name not in OWNERS)

    def test_handlers_name_the_change(self):
        found = {p.name: _bare_comparisons(p.read_text())
                 for p in self.modules()}
        self.assertEqual({}, {k: v for k, v in found.items() if v})

    def test_probe_catches_a_bare_comparison(self):
        self.assertEqual([2], _bare_comparisons(
            'x = 1\nif req.api_version.at_least("2.53"):\n    pass\n'))

    def test_every_change_is_used(self):
        names = {name for name, value in vars(version_history).items()
                 if isinstance(value, version_history.Change)}
        source = '\n'.join(p.read_text() for p in self.modules())
        unused = {name for name in names
                  if 'version_history.%s' % name not in source}
        self.assertEqual(set(), unused)

    def test_history_is_in_order_within_the_advertised_range(self):
        versions = [microversion.APIVersion.parse(c.version)
                    for c in version_history.HISTORY]
        # One microversion may change several things (2.75 did).
        self.assertEqual(sorted(versions), versions)
        for version in versions:
            self.assertTrue(version.matches(microversion.MIN,
                                            microversion.MAX), version)

    def test_a_change_compares_as_its_version(self):
        at = microversion.APIVersion.parse
        self.assertTrue(at('2.53').at_least(version_history.UUID_IDS))
        self.assertFalse(at('2.52').at_least(version_history.UUID_IDS))

"""Import a script of ``tools/`` (not a package) for its tests."""

import importlib.util
import os
import sys
import types

_TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..',
                      '..', '..', 'tools')


def load(name: str) -> types.ModuleType:
    """The module ``tools/<name>.py``, freshly executed.

    ``tools/`` goes on ``sys.path`` as when the tool runs as a script, so
    that a tool can import its sibling (``bench_fleet`` imports
    ``placement_copy``).
    """
    tools = os.path.abspath(_TOOLS)
    if tools not in sys.path:
        sys.path.append(tools)
    spec = importlib.util.spec_from_file_location(
        name, os.path.abspath(os.path.join(_TOOLS, name + '.py')))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

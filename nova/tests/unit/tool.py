"""Import a script of ``tools/`` (not a package) for its tests."""

import importlib.util
import os
import types

_TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..',
                      '..', '..', 'tools')


def load(name: str) -> types.ModuleType:
    """The module ``tools/<name>.py``, freshly executed."""
    spec = importlib.util.spec_from_file_location(
        name, os.path.abspath(os.path.join(_TOOLS, name + '.py')))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

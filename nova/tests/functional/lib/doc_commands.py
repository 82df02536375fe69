"""The console commands of the project's documents, as written there.

Tests run what the README and the operator guide tell a person to type,
so the documents cannot drift from what works.
"""

import os
import re

# The repository: nova/tests/functional/lib/ is four levels below it.
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__),
                                    *[os.pardir] * 4))
PCI_GROUPS_GUIDE = os.path.join(ROOT, 'doc', 'source', 'admin',
                                'pci-groups.rst')
DEPLOYMENT_GUIDE = os.path.join(ROOT, 'doc', 'source', 'admin',
                                'deployment.rst')
DEFRAG_GUIDE = os.path.join(ROOT, 'doc', 'source', 'admin', 'defrag.rst')
README = os.path.join(ROOT, 'README.rst')

_PROMPT = re.compile(r'^\s*\$ (.*)$')


def commands(path: str, section: str | None = None) -> list[str]:
    """Every ``$ command`` of ``path`` (of one section if given).

    Continuation lines (a trailing backslash) are joined, and a trailing
    ``# comment`` is dropped. ``section`` is a title as written.
    """
    with open(path, encoding='utf-8') as doc:
        lines = doc.read().splitlines()
    if section is not None:
        start = lines.index(section)
        end = next((i for i in range(start + 2, len(lines) - 1)
                    if lines[i + 1] and set(lines[i + 1]) <= set('=-~')
                    and len(lines[i + 1]) == len(lines[i])), len(lines))
        lines = lines[start:end]
    found = []
    pending = None
    for line in lines:
        if pending is not None:
            pending += ' ' + line.strip().rstrip('\\').strip()
            if not line.rstrip().endswith('\\'):
                found.append(pending)
                pending = None
            continue
        match = _PROMPT.match(line)
        if not match:
            continue
        command = match.group(1).split('  #')[0].rstrip()
        if command.endswith('\\'):
            pending = command.rstrip('\\').strip()
        else:
            found.append(command)
    return found


def sample_output(path: str) -> list[str]:
    """The output the document shows: every line right after a ``$
    command`` (and its continuation lines) in the same literal block,
    up to the next command or the block's end, without indentation."""
    with open(path, encoding='utf-8') as doc:
        lines = doc.read().splitlines()
    found = []
    in_output = continued = False
    for line in lines:
        if _PROMPT.match(line):
            in_output = True
            continued = line.rstrip().endswith('\\')
        elif continued:
            continued = line.rstrip().endswith('\\')
        elif in_output and line.startswith('    ') and line.strip():
            found.append(line.strip())
        else:
            in_output = False
    return found

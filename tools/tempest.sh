#!/usr/bin/env bash
# Run Tempest's compute API tests against nova-all on generated hosts
# under a real Keystone (see tools/tempest_env.py and
# doc/source/admin/tempest.rst). After tools/install.sh:
#
#   tools/tempest.sh            # all of tempest.api.compute, less
#                               # tools/tempest-exclusions.txt
#   tools/tempest.sh --subset   # tools/tempest-subset.txt (CI)
#
# Prints "tempest: N passed, N failed, N skipped"; exits 1 on a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# The virtualenv of tools/install.sh unless PYTHON names another.
exec "${PYTHON:-.venv/bin/python}" tools/tempest_env.py "$@"

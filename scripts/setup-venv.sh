#!/usr/bin/env bash
# Creates .venv with the Python peers the tests use (ansible-core, ansible-runner, dumb-init,
# oslo.config), from PyPI.
# Idempotent: an existing venv with the pinned versions is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
req=.ci/requirements.txt
stamp=.venv/.requirements
if [ -x .venv/bin/python ] && [ -f "$stamp" ] && cmp -s "$req" "$stamp"; then
  exit 0
fi
echo "setup-venv: creating .venv with $(grep -c "^[^#[:space:]]" "$req") Python packages from PyPI ($req)"
python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check -r "$req"
cp "$req" "$stamp"

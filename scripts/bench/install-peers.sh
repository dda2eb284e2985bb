#!/usr/bin/env bash
# Installs the two PyPI peers `verify-worker bench receipts` compares against, in a virtualenv.
# Usage: scripts/bench/install-peers.sh [VENV_DIR]   (default: .build-bench-venv, ignored by git via .build*/)
# Then: verify-worker bench receipts --python VENV_DIR/bin/python
set -euo pipefail
venv="${1:-.build-bench-venv}"
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --upgrade pip
"$venv/bin/pip" install --quiet "app-store-server-library>=1.5" "apple-purchase-receipt-verifier"
"$venv/bin/python" - <<'PY'
import importlib.metadata as m
for name in ("app-store-server-library", "apple-purchase-receipt-verifier"):
    print(name, m.version(name))
PY

#!/usr/bin/env bash
# Installs the two PyPI peers `verify-worker bench receipts --peers` compares against, in a virtualenv
# beside the package (.venv-bench, git-ignored by the .build*/ rule? no: add it to your own ignore list).
# Usage: scripts/bench/install-peers.sh [VENV_DIR]   (default: .venv-bench)
set -euo pipefail
venv="${1:-.venv-bench}"
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --upgrade pip
"$venv/bin/pip" install --quiet "app-store-server-library>=1.5" "apple-purchase-receipt-verifier"
"$venv/bin/python" - <<'PY'
import importlib.metadata as m
for name in ("app-store-server-library", "apple-purchase-receipt-verifier"):
    print(name, m.version(name))
PY

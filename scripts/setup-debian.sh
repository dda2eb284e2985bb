#!/usr/bin/env bash
# Installs what verify-worker needs on a fresh Debian 12 machine (run as root, or with sudo available):
# the C libraries it links (librdkafka, libcurl, SQLite), PostgreSQL for the ledger tests, kcat and openssl for
# interoperability tests, headless Chromium and its WebDriver for the entitlement console's browser test, and the
# Python packages the tests and benchmarks use as independent peers.
# Idempotent: a second run installs nothing new. The Swift toolchain (6.1 or later) must already be on PATH.
set -euo pipefail

packages=(librdkafka-dev libcurl4-openssl-dev zlib1g-dev libsqlite3-dev pkg-config postgresql kafkacat openssl ca-certificates
    python3 python3-pip binutils chromium chromium-driver)
sudo_cmd=()
if [ "$(id -u)" != 0 ]; then sudo_cmd=(sudo); fi

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}" >&2
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Python peers: jsonschema checks the message schemas; Apple's official library checks the simulator's receipts.
python_packages=(jsonschema rfc3339-validator pyyaml app-store-server-library)
if ! python3 -c "import jsonschema, rfc3339_validator, yaml, appstoreserverlibrary" 2>/dev/null; then
    echo "setup: installing Python packages ${python_packages[*]}" >&2
    python3 -m pip install --quiet --disable-pip-version-check "${python_packages[@]}" 2>/dev/null \
        || python3 -m pip install --quiet --disable-pip-version-check --break-system-packages "${python_packages[@]}"
fi

if ! command -v swift >/dev/null; then
    echo "setup: no Swift toolchain on PATH; install Swift 6.1 or later from swift.org" >&2
    exit 1
fi
echo "setup: ready" >&2

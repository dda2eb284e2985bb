#!/usr/bin/env bash
# Sets up a fresh Debian machine and runs verify-worker's main job on its embedded default: `verify-worker demo`
# (mock Kafka cluster, Apple and Google Play simulators and SQLite ledger in one process). Extra arguments go to the
# demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-debian.sh
swift build -c release --product verify-worker
exec .build/release/verify-worker demo "$@"

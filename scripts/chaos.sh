#!/usr/bin/env bash
# The chaos harness of issue 8 (docs/RELIABILITY.md), built in release mode.
#
#   scripts/chaos.sh                 short mode: 2,000 jobs, every fault once
#   scripts/chaos.sh --long          long mode: 100,000 jobs, the fault schedule cycled
#   scripts/chaos.sh --jobs 20000 --fuzz 5000 --duration 600 --work-dir /tmp/chaos-run
#   scripts/chaos.sh --live-fuzz 1000000   1,000,000 adversarial inputs through live workers (no faults)
#
# Needs PostgreSQL 15 (a private server is started with scripts/test-postgres.sh; or pass --ledger-url).
# Prints the JSON summary on stdout and exits 1 when an invariant was broken (state and logs are then kept).
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product verify-worker >&2
exec .build/release/verify-worker chaos --pg-script scripts/test-postgres.sh "$@"

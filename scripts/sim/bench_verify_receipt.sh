#!/usr/bin/env bash
# Measures verifyReceipt answers per second of the Apple simulator with wrk (one run).
# Usage: scripts/sim/bench_verify_receipt.sh [BINARY] [DURATION] [CONNECTIONS] [THREADS]
# Needs: a release build (swift build -c release --product verify-worker), wrk, curl, python3.
set -euo pipefail
binary=${1:-.build/release/verify-worker}
duration=${2:-10s}
connections=${3:-64}
threads=${4:-2}
workdir=$(mktemp -d)
trap 'kill "$sim_pid" 2>/dev/null || true; wait "$sim_pid" 2>/dev/null || true; rm -rf "$workdir"' EXIT

"$binary" apple-sim --port 0 >"$workdir/sim.out" 2>"$workdir/sim.err" &
sim_pid=$!
for _ in $(seq 1 100); do
  grep -q '^listening=' "$workdir/sim.out" 2>/dev/null && break
  sleep 0.1
done
base=$(sed -n 's/^listening=//p' "$workdir/sim.out")
[ -n "$base" ] || { echo "the simulator did not start" >&2; cat "$workdir/sim.err" >&2; exit 1; }

curl -sf -X POST "$base/sim/mint" -H 'Content-Type: application/json' \
  -d '{"bundle_id":"com.example.app","product_id":"com.example.app.monthly","format":"app_receipt","environment":"Production","expires_at":"2099-01-01T00:00:00Z"}' \
  | python3 -c 'import json,sys; print(json.dumps({"receipt-data": json.load(sys.stdin)["receipt"]}))' >"$workdir/body.json"
echo "receipt body: $(wc -c <"$workdir/body.json") bytes"

RECEIPT_BODY_FILE="$workdir/body.json" wrk -t"$threads" -c"$connections" -d"$duration" --latency \
  -s "$(dirname "$0")/verify_receipt.lua" "$base/verifyReceipt"
curl -sf "$base/sim/stats"; echo

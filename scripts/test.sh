#!/usr/bin/env bash
# Sets up a fresh Debian machine and runs every test: formatting lint, then the whole Swift Testing suite with a
# real PostgreSQL started in a temporary directory. Fails on any failed test, and on any skipped test under CI.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup-debian.sh

echo "test: checking formatting" >&2
swift format lint --strict --recursive Sources Tests

pg_started=""
if [ -z "${VERIFY_TEST_POSTGRES_URL:-}" ]; then
    echo "test: starting PostgreSQL in a temporary directory" >&2
    bash scripts/test-postgres.sh start >&2
    pg_started=1
    eval "$(bash scripts/test-postgres.sh env)"
fi
cleanup() { if [ -n "$pg_started" ]; then bash scripts/test-postgres.sh stop || true; fi; }
trap cleanup EXIT

echo "test: building" >&2
set +e
swift build --build-tests 2>&1 | grep -vE '^\[[0-9]+/[0-9]+\] (Compiling|Emitting|Wrapping|Write|Linking)'
status=${PIPESTATUS[0]}
set -e
if [ "$status" != 0 ]; then echo "test: FAILED (build exited $status)" >&2; exit "$status"; fi

log=$(mktemp)
echo "test: running" >&2
set +e
# A whole run takes 2-5 minutes here; a test that hangs (a wait that ignores its time limit's cancellation) would
# otherwise hold CI until its own limit with nothing printed. VERIFY_TEST_TIMEOUT_S overrides the bound.
# The output goes to a file, followed by `tail --pid`, not through a pipe: a child process left running by a crashed
# test run would hold a pipe open, and the script would wait for it for ever.
# Swift Testing starts every test at once unless told otherwise (its default width is unbounded). Hundreds of tests,
# each with its own mock cluster, simulator or database schema, then share two cores: a fresh-clone run on this
# machine had a run queue of ~20 and dozens of tests past their time limits in its first two minutes, while the same
# tests at four per core all passed, and sooner (220 s against 295 s). VERIFY_TEST_WIDTH overrides the width.
width="${VERIFY_TEST_WIDTH:-$(( $(nproc) * 4 ))}"
echo "test: running at most $width tests at a time" >&2
SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="$width" \
    timeout --signal=TERM --kill-after=30 "${VERIFY_TEST_TIMEOUT_S:-1500}" swift test --skip-build >"$log" 2>&1 &
test_pid=$!
tail -n +1 -f --pid="$test_pid" "$log" &
tail_pid=$!
wait "$test_pid"
status=$?
wait "$tail_pid"
set -e
if [ "$status" != 0 ]; then
    # The broker tests log a lot; repeat what failed at the end so that the tail of a CI log names it.
    echo "test: what failed:" >&2
    grep -E -A4 '(✘|recorded an issue|Fatal error|error: )' "$log" | grep -v 'kafka.facility=' | tail -n 80 >&2 || true
    if [ "$status" = 124 ] || [ "$status" = 137 ]; then
        echo "test: the run exceeded ${VERIFY_TEST_TIMEOUT_S:-1500} s; tests started and never finished:" >&2
        sed -nE 's/^.* Test "(.*)" started\.$/\1/p' "$log" | sort -u >"$log.started"
        sed -nE -e 's/^.* Test "(.*)" (passed|failed) (after|with) .*$/\1/p' \
            -e 's/^.* Test "(.*)" with [0-9]+ test cases? (passed|failed) .*$/\1/p' "$log" | sort -u >"$log.ended"
        comm -23 "$log.started" "$log.ended" >&2 || true
    fi
    echo "test: FAILED (swift test exited $status)" >&2
    exit "$status"
fi
if ! grep -qE 'Test run with [1-9][0-9]* tests? .*passed' "$log"; then
    echo "test: FAILED (no Swift Testing run with passing tests found)" >&2
    exit 1
fi
if grep -qE '^[^ ]* Test (".*"|[^ "]+) skipped' "$log"; then
    echo "test: skipped tests found:" >&2
    grep -E '^[^ ]* Test (".*"|[^ "]+) skipped' "$log" >&2
    if [ "${CI:-}" = true ]; then exit 1; fi
fi
echo "test: all passed" >&2

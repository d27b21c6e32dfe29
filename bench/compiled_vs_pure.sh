#!/bin/bash
# What the mypyc build (setup.py) gives: NSQ's own bench tools against Go's
# nsqd, our nsqd pure (NSQPY_PURE=1) and our nsqd compiled, alternating in one
# run so the shared machine's noise falls on all three alike. Prints each
# step's msgs/s and the CPU cores nsqd used meanwhile.
#
#   bench/compiled_vs_pure.sh [rounds]      # default 2; RUNFOR (default 5s) per step
#
# Needs NSQ's reference binaries and bench_pair.sh (REFERENCE, default
# ../shared/reference) and the fixed ports 4150/4151; on a busy machine run it
# in a private network namespace:
#   unshare -n bash -c 'ip link set lo up; bench/compiled_vs_pure.sh'
set -eu
cd "$(dirname "$0")/.."
REFERENCE=${REFERENCE:-../shared/reference}
ROUNDS=${1:-2}
export RUNFOR=${RUNFOR:-5s}
if [ ! -f "$REFERENCE/bench_pair.sh" ]; then
  echo "no $REFERENCE/bench_pair.sh: set REFERENCE to the folder holding NSQ's reference binaries" >&2
  exit 2
fi
if ! .venv/bin/python -c 'import sys, nsqpy.nsqd.channel as m; sys.exit(m.__file__.endswith(".py"))'; then
  echo "nsqd is not compiled here: run 'make .venv/.installed-test' (or pip install -e .) with a C compiler" >&2
  exit 2
fi
nsqd="$PWD/.venv/bin/nsqd"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for round in $(seq "$ROUNDS"); do
  for side in go pure compiled; do
    case $side in
      go) bash "$REFERENCE/bench_pair.sh" >"$log" 2>&1 || true ;;
      pure) NSQPY_PURE=1 NSQD_CMD="$nsqd" bash "$REFERENCE/bench_pair.sh" >"$log" 2>&1 || true ;;
      compiled) env -u NSQPY_PURE NSQD_CMD="$nsqd" bash "$REFERENCE/bench_pair.sh" >"$log" 2>&1 || true ;;
    esac
    if grep -q '^SUMMARY' "$log"; then  # each step: msgs/s and the cores nsqd used
      echo "round $round $side: $(sed -nE 's/^([a-z0-9_]+): +([0-9]+) msgs\/s.*nsqd=([0-9.]+).*/\1 \2 (\3 cores)/p' "$log" | paste -sd ';' | sed 's/;/; /g')"
    else
      echo "round $round $side: bench_pair.sh failed:" >&2; tail -5 "$log" >&2; exit 1
    fi
  done
done

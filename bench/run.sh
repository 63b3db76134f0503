#!/usr/bin/env bash
# Runs the peer benchmarks of the bench module, keeps the raw output in
# bench/results/, and prints a benchstat table (libraries side by side) and
# the ratio retrykit / best peer per workload.
#
#   bash bench/run.sh                 # -count 6, every workload
#   COUNT=10 BENCH=Success bash bench/run.sh
#   BENCHTIME=100ms COUNT=5 bash bench/run.sh
#
# COUNT (default 6, at least 5), BENCH (a -bench regexp, default .),
# BENCHTIME (default: go test's own, 1s).
set -euo pipefail
cd "$(dirname "$0")"
count=${COUNT:-6}
if [ "$count" -lt 5 ]; then
	echo "run.sh: COUNT must be at least 5 (got $count)" >&2
	exit 2
fi
mkdir -p results
out=results/bench-$(date -u +%Y%m%dT%H%M%SZ).txt
args=(-run '^$' -bench "${BENCH:-.}" -benchmem -count "$count")
if [ -n "${BENCHTIME:-}" ]; then
	args+=(-benchtime "$BENCHTIME")
fi
{
	echo "# go test ${args[*]} ."
	echo "# $(go version); GOARCH=$(go env GOARCH); nproc=$(nproc); cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
} >"$out"
echo "run.sh: writing $out" >&2
go test "${args[@]}" . | tee -a "$out" >&2
echo
go tool benchstat -col /lib "$out"
echo
go run ./cmd/ratio "$out"

#!/usr/bin/env bash
# Runs the peer benchmarks of the bench module, keeps the raw output in
# bench/results/ (gitignored), and prints benchstat tables (libraries side by
# side, retrykit as the base column) and the ratio retrykit / best peer per
# workload.
#
#   bash bench/run.sh                       # 6 rounds, every workload
#   COUNT=10 BENCH=Success bash bench/run.sh
#   COUNT=5 BENCHTIME=100ms bash bench/run.sh
#
# COUNT: rounds (default 6, at least 5). Each round runs every selected
# benchmark once, so on a shared, noisy machine a burst of load hits all
# libraries alike instead of one library's consecutive samples.
# BENCH: a -bench regexp (default .). BENCHTIME: -benchtime (default 1s).
set -euo pipefail
cd "$(dirname "$0")"
count=${COUNT:-6}
case $count in
'' | *[!0-9]*) echo "run.sh: COUNT must be a number, got '$count'" >&2; exit 2 ;;
esac
if [ "$count" -lt 5 ]; then
	echo "run.sh: COUNT must be at least 5, got $count" >&2
	exit 2
fi
mkdir -p results
stamp=$(date -u +%Y%m%dT%H%M%SZ)
out=results/bench-$stamp.txt
bin=results/bench-$stamp.test
trap 'rm -f "$bin"' EXIT
go test -c -o "$bin" .
args=(-test.run '^$' -test.bench "${BENCH:-.}" -test.benchmem -test.count 1)
if [ -n "${BENCHTIME:-}" ]; then
	args+=(-test.benchtime "$BENCHTIME")
fi
{
	echo "# bash bench/run.sh: COUNT=$count rounds of: go test ${args[*]//test./}"
	echo "# $(go version); GOARCH=$(go env GOARCH); nproc=$(nproc); cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
} >"$out"
echo "run.sh: writing $out" >&2
for i in $(seq "$count"); do
	echo "run.sh: round $i of $count" >&2
	"./$bin" "${args[@]}" | tee -a "$out" >&2
done
echo
go tool benchstat -filter '-.name:/^HTTP/' -col '/lib@(retrykit cenkalti avast sethvargo failsafe retryablehttp floor)' "$out"
echo
if grep -q '^BenchmarkHTTP' "$out"; then
	go tool benchstat -filter '.name:/^HTTP/' -col '/lib@(retrykit nethttp retryablehttp failsafe)' "$out"
	echo
fi
echo "ratio = retrykit / best peer, medians of time per op (below 1: retrykit faster); nethttp and floor are baselines, not peers"
go run ./cmd/ratio "$out"

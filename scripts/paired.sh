#!/usr/bin/env bash
# Runs every paired benchmark (internal/paired: blocks of calls through two
# setups, interleaved ABBA BAAB, median ratio with a 95 % interval) and
# prints one line per comparison: what retrykit adds to a whole call over
# loopback, next to a control that compares a setup with itself (the
# first run of each benchmark, of 10 rounds, is a warm-up). Needs
# redis-server and postgres. About 10 minutes on 2 cores.
#
#   bash scripts/paired.sh
#   ROUNDS=200 bash scripts/paired.sh   # quicker, wider intervals
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-600}
case $rounds in
'' | *[!0-9]*) echo "paired.sh: ROUNDS must be a number, got '$rounds'" >&2; exit 2 ;;
esac
if [ "$rounds" -le 10 ]; then
	# 10 rounds is the warm-up run of every benchmark, which the output skips.
	echo "paired.sh: ROUNDS must be more than 10, got $rounds" >&2
	exit 2
fi
echo "# $(date -u +%FT%TZ); $(go version); nproc=$(nproc); load $(cut -d' ' -f1-3 /proc/loadavg)"
run() { # dir bench-regexp
	(cd "$1" && RETRYKIT_REQUIRE_REDIS=1 RETRYKIT_REQUIRE_POSTGRES=1 go test -run '^$' -bench "$2" -benchtime "${rounds}x" -v . 2>&1) |
		awk -v dir="$1" -v r="; $rounds rounds of" '/^Benchmark[^ ]*\/vs=[^ ]*$/ { name = $1 } index($0, r) && name != "" { sub(/^ *paired.go:[0-9]+: /, ""); printf "%-12s %-48s %s\n", dir, name, $0; name = "" }'
}
run retryredis GetPaired
run retryvalkey GetPaired
run retrygrpc UnaryPaired
run retrysql TxPaired
run bench Paired
echo "# done $(date -u +%FT%TZ); load $(cut -d' ' -f1-3 /proc/loadavg)"

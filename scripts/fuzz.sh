#!/usr/bin/env bash
# fuzz.sh: run every Fuzz* target of every module for a fixed number of
# executions each, so the step always takes the same work and ends by itself
# (a time-based -fuzztime can fail spuriously with "context deadline exceeded"
# when the deadline lands inside the fuzzing engine's own shutdown).
# scripts/test-all.sh calls it; it also runs alone: bash scripts/fuzz.sh
# Environment: FUZZTIME, the -fuzztime of each target (default 2000x, that is
# 2000 executions; a duration such as 30s also works, for longer local runs).
# With -race, as every test here (about 10 s per target on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."

fuzztime=${FUZZTIME:-2000x}
echo "fuzz targets (-fuzztime $fuzztime each)"
while IFS= read -r f; do
  dir=$(dirname "$f")
  for name in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$f" | sed 's/^func //'); do
    echo "--- $dir $name"
    (cd "$dir" && go test -race -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" .)
  done
done < <(git ls-files -co --exclude-standard '*_test.go' | xargs -r grep -l '^func Fuzz' || true)

#!/usr/bin/env bash
# test-all.sh: the whole test suite of every module, as CI runs it.
#   gofmt check, go vet (also for darwin and windows), all tests with -race, each fuzz target for a fixed
#   number of executions (scripts/fuzz.sh), and the nginx end-to-end test
#   (needs nginx; installed here when missing and we are root on a Debian-like
#   machine, as are redis-server and postgresql).
# Environment: FUZZTIME, the -fuzztime of each fuzz target (default 2000x).
set -euo pipefail
cd "$(dirname "$0")/.."

# Every module in the tree (root first), found from the go.mod files git knows.
mods=(.)
while IFS= read -r m; do
  d=$(dirname "$m"); [ "$d" = . ] || mods+=("./$d")
done < <(git ls-files -co --exclude-standard '*go.mod' | sort)

step() { printf '\n=== %s\n' "$*"; }

if ! command -v nginx >/dev/null && [ ! -x /usr/sbin/nginx ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    step "installing nginx (for the rate-limiter end-to-end test)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null
  else
    echo "nginx not installed: the nginx end-to-end test will be skipped"
  fi
fi

if ! command -v redis-server >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    step "installing redis-server (for the Redis/Valkey tests)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
  else
    echo "redis-server not installed: the Redis and Valkey tests will be skipped"
  fi
fi
# The Debian package starts a system-wide server on 6379; the tests start their own.
if [ "$(id -u)" = 0 ] && command -v systemctl >/dev/null; then systemctl stop redis-server >/dev/null 2>&1 || true; fi

# initdb and postgres live in /usr/lib/postgresql/<version>/bin, off PATH.
if ! command -v initdb >/dev/null && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    step "installing postgresql (for the retrysql tests)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    # The package starts a cluster on 5432; the tests start their own.
    systemctl stop postgresql >/dev/null 2>&1 || service postgresql stop >/dev/null 2>&1 || true
  else
    echo "postgresql not installed: the retrysql tests will be skipped"
  fi
fi

step "gofmt"
unformatted=$(git ls-files -co --exclude-standard '*.go' | xargs -r gofmt -l)
if [ -n "$unformatted" ]; then echo "not gofmt'ed:"; echo "$unformatted"; exit 1; fi

step "go vet"
for m in "${mods[@]}"; do (cd "$m" && go vet ./...); done

step "go vet for darwin and windows (platform-specific files build)"
for m in "${mods[@]}"; do (cd "$m" && GOOS=darwin go vet ./... && GOOS=windows go vet ./...); done

step "go test -race (all modules)"
for m in "${mods[@]}"; do
  echo "--- $m"
  (cd "$m" && go test -race -count=1 -timeout 15m ./...)
done

step "examples/gcloud: the transport under the generated Cloud Storage client (local fake)"
(cd examples/gcloud && go run .)

step "examples/memorystore: retrygax/retrygrpc under the generated Memorystore client (gRPC and REST fakes)"
(cd examples/memorystore && go run .)

step "examples/aws: retryaws under the generated S3 and DynamoDB clients (loopback fakes; fails if a row is not as documented)"
(cd examples/aws && go run .)

step "retrygrpc: allocations of a successful call (needs a run without -race: sync.Pool drops items under it)"
(cd retrygrpc && go test -count=1 -run 'NoExtraAllocs' .)

step "sim and retry simulate: the full-scale open-model runs (Huang's published outcomes; skipped under -race, where each takes half a minute)"
go test -count=1 -run 'Open|Huang' ./sim/
(cd cmd/retry && go test -count=1 -run 'SimulateOpen' .)

step "retrysql: the whole contention workload (16 workers × 200 transfers, four ways side by side), 500 transfers with lost COMMIT replies, deadlocks beside an immediate loop (without -race)"
(cd retrysql && RETRYKIT_SQL_FULL=1 go test -count=1 -timeout 15m -run 'TestContention$|TestLostCommitReplies|TestDeadlocks' -v . | grep -E '^(---|ok|FAIL|PASS)|_test.go:')

step "examples/sql: transfers under SERIALIZABLE on a real postgres, with no retry and through retrysql (fails unless every transfer commits once)"
(cd examples/sql && go run .)

step "examples/metastable: a metastable retry storm over loopback, next to sim's prediction (fails unless plain resends stay stuck, Budget and Throttle recover, and each verdict matches the simulator's)"
(cd examples/metastable && go run .)

step "examples/otel: retry metrics through the OpenTelemetry Prometheus exporter (loopback; fails without the retry series)"
(cd examples/otel && go run .)

step "fuzz targets"
bash scripts/fuzz.sh

step "all tests passed"

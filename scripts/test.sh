#!/usr/bin/env bash
# The test command of README.md (`make test`): finds or starts PostgreSQL and
# MariaDB, then runs the whole Go test suite with SQLite, PostgreSQL and
# MariaDB/MySQL all required: a missing server fails the run, it never skips.
# Chromium (the dashboard's browser test) and PgBouncer (a throwaway one in
# transaction pooling mode in front of the test PostgreSQL, for the tests
# that run the engine through a connection pooler) likewise.
# Oracle tests run only when LOANQ_TEST_ORACLE_DSN is set.
#
# Extra arguments go to `go test`, e.g. scripts/test.sh -run TestCap ./e2e/
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/test-servers.sh
trap stop_test_servers EXIT

# -trimpath for every build of the run (go test, go vet, the e2e tests' own
# go build): without it Go's build cache keys each of loanq's packages on
# its directory too, so a clean clone at a new path (as CI makes) compiled
# and vetted every package again, about 100 s of this machine's 2 cores.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath"

check_requirements
ensure_postgres
ensure_mysql
ensure_chromium
ensure_nft
ensure_pgbouncer
export LOANQ_TEST_REQUIRE=sqlite,postgres,mysql,chromium,pgbouncer

if [ -n "${LOANQ_TEST_ORACLE_DSN:-}" ]; then
	say "Oracle: LOANQ_TEST_ORACLE_DSN is set, the Oracle conformance tests run"
else
	say "Oracle: LOANQ_TEST_ORACLE_DSN is not set, the Oracle server tests are skipped (exact-SQL tests still run)"
fi

if [ $# -eq 0 ]; then
	set -- ./...
fi
# Vet once per CI: .ci/run runs `make vet` (vet and gofmt) first and sets
# LOANQ_VETTED=1; a direct run of this script vets here.
if [ "${LOANQ_VETTED:-}" != 1 ]; then
	go vet ./...
fi
# Every test's time is kept (go test -json) in LOANQ_TEST_TIMINGS, and the
# slowest are listed at the end; scripts/testtimes prints the rest as plain
# go test would (a line per package, the output of failed tests).
timings=${LOANQ_TEST_TIMINGS:-${TMPDIR:-/tmp}/loanq-test-timings.json}
go build -o "$LOANQ_THROWAWAY_DIR/testtimes" ./scripts/testtimes
testtimes=$LOANQ_THROWAWAY_DIR/testtimes
# -parallel: the dialects of a test run at once (testdb.Each), and they wait
# on the servers more than on the CPU, so more of them than cores: 4, and 8
# for the e2e package, whose tests wait longest (query delays, timers,
# processes; measured alone on 2 cores: 298 s with 4, 267 s with 8).
gotest() { go test -count=1 -timeout 40m -parallel "${LOANQ_TEST_PARALLEL:-4}" -json "$@"; }
gotest_e2e() { go test -count=1 -timeout 40m -parallel "${LOANQ_TEST_PARALLEL_E2E:-8}" -json "$@" ./e2e/; }

# The fuzz runs, after the other packages' tests (which ran the committed
# corpora in testdata/fuzz as regular tests). The budget is a count of
# executions, not a duration: with a duration, Go 1.26's fuzz coordinator can
# report "context deadline exceeded" as a failure when the time runs out while
# a worker is mid-call (golang/go#75804, fixed in Go 1.27) — a red run with no
# failing input. A count has no deadline to race.
fuzz() {
	for target in dsn:FuzzParseDSN dsn:FuzzDSNPassword internal/flagvalue:FuzzReturnAfter internal/flagvalue:FuzzBackoff; do
		go test -run '^$' -fuzz "^${target#*:}\$" -fuzztime "${LOANQ_FUZZEXECS:-60000}x" "./${target%%:*}" || return
	done
}

# The static build without cgo: it compiles, and its Oracle driver explains
# how to rebuild instead of connecting (drivers/oracle/open_nocgo_test.go).
static() {
	CGO_ENABLED=0 go build -o /dev/null . && CGO_ENABLED=0 go test -count=1 ./drivers/oracle/
}

if [ "$*" != "./..." ]; then
	# Packages or tests picked by the caller: those alone, no fuzz runs.
	gotest "$@" | tee "$timings" | "$testtimes" -top 15
	say "every test's time (go test -json): $timings"
	static
	exit 0
fi

# The whole suite. The e2e package is the longest by far (about 300 s on 2
# cores, half of it tests that must run alone: ARCHITECTURE.md, Tests), so it
# starts at once in a go test of its own, and everything else — the other
# packages, the static build, the fuzz runs — runs beside it instead of
# before and after it. The e2e tests that run alone did so beside the other
# packages before too (go test runs two packages at a time on 2 cores).
#
# The history checks (TestHistoryMatrix, TestHistoryServerRestart: 128
# callers per run, docs/reliability.md) load both cores for minutes, which
# made the timing tests beside them fail (a get during a prune waited past
# its bound): they run last, alone. TestHistoryScale is scripts/scale-check.
# TestHistoryMillionRows (a million history events written, then exported
# by the binary: docs/retention.md) writes for a minute or more, so it runs
# there too.
e2e_json=$timings.e2e rest_json=$timings.rest history_json=$timings.history
gotest_e2e -skip '^TestHistory' > "$e2e_json" 2>&1 &
e2e_pid=$!
# Stopped with the script: its test binary, then go test itself.
trap 'pkill -TERM -P "$e2e_pid" 2>/dev/null || true; kill "$e2e_pid" 2>/dev/null || true; stop_test_servers' EXIT
status=0
gotest $(go list ./... | grep -v '/e2e$') | tee "$rest_json" | "$testtimes" -top 0 || status=1
static || status=1
fuzz || status=1
if ! wait "$e2e_pid"; then
	status=1
fi
"$testtimes" -top 0 < "$e2e_json" || status=1
gotest_e2e -run '^TestHistory(Matrix|ServerRestart|MillionRows)$' > "$history_json" 2>&1 || status=1
"$testtimes" -top 0 < "$history_json" || status=1
cat "$rest_json" "$e2e_json" "$history_json" > "$timings" && rm -f "$rest_json" "$e2e_json" "$history_json"
"$testtimes" -only-slowest -top 15 < "$timings" || status=1
say "every test's time (go test -json): $timings"
exit "$status"

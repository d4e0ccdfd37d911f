#!/usr/bin/env bash
# The SQL ceiling of the engine benchmark on PostgreSQL (BENCHMARKS.md, the
# SQL ceiling; docs/benchmarks-history.md, (c4) and (c8)): pgbench runs, with no Go and no loanq process in the way, (1) the
# raw single-row claim of the item table, (2) the raw claim with an
# acknowledgement (claim and done in two commits, raw-ack.sql), (3) one loop
# of the rows strategy as loanq sends it, (4) the same records written in the
# fewest statements, each on a fresh database, alternating, and prints each
# one's rate and ratio to the raw claim of its round (for (3), also to (2)). What (2)/(1) is here, loanq's engine cannot beat
# on this server; (3)/(1) is what no statement layout could.
#
#   scripts/pgbench-ceiling/run.sh [ROUNDS] [SECONDS] [CLIENTS]
#
# Needs pgbench and psql, a PostgreSQL reachable as PGHOST/PGPORT/PGUSER
# (default 127.0.0.1:5432, postgres) that may create and drop the database
# loanq_ceiling, and a loanq binary ($LOANQ, default: go run .).
set -euo pipefail
cd "$(dirname "$0")"
rounds=${1:-3} seconds=${2:-10} clients=${3:-32}
export PGHOST=${PGHOST:-127.0.0.1} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
export PGOPTIONS="-c client_min_messages=warning"
db=loanq_ceiling
dsn="postgres://$PGUSER@$PGHOST:$PGPORT/$db?sslmode=disable"
loanq=${LOANQ:-}
if [ -z "$loanq" ]; then
	loanq=$(mktemp -d)/loanq
	(cd ../.. && go build -o "$loanq" .)
fi
for tool in pgbench psql; do
	command -v "$tool" >/dev/null || { echo "run.sh: $tool not found: apt-get install postgresql-client" >&2; exit 1; }
done

fresh() {
	psql -qX -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
	"$loanq" --db "$dsn" migrate up >/dev/null
	# The bench's item table is no part of loanq's schema (migration 00014):
	# made here as `loanq bench` makes it (bench/dialects.go, postgresCreate).
	psql -qX -d "$db" -c "CREATE TABLE loanq_bench_item (id BIGINT NOT NULL PRIMARY KEY,
		status VARCHAR(10) NOT NULL DEFAULT 'ready', owner VARCHAR(100), claimed_at TIMESTAMPTZ,
		lease_expires_at TIMESTAMPTZ, processed_at TIMESTAMPTZ, processed INTEGER NOT NULL DEFAULT 0,
		CONSTRAINT loanq_bench_item_status_ck CHECK (status IN ('ready', 'claimed', 'done')))" \
		-c "CREATE INDEX loanq_bench_item_status_ix ON loanq_bench_item (status, id)" \
		-c "CREATE INDEX loanq_bench_item_ready_ix ON loanq_bench_item (id) WHERE status = 'ready'" >/dev/null
	psql -qX -d "$db" -c "INSERT INTO loanq_bench_item (id, status, processed) SELECT g, 'ready', 0 FROM generate_series(1, 400000) g" \
		-c "VACUUM ANALYZE loanq_bench_item"
	"$loanq" --db "$dsn" task create ceiling --source loanq_bench_item --where "status = 'ready'" --lock rows >/dev/null
	psql -qXAt -d "$db" -c "SELECT id FROM loanq_task WHERE name = 'ceiling'"
}

tps() { # script task
	pgbench -n -M prepared -c "$clients" -j 2 -T "$seconds" -D task="$2" -f "$1" "$db" 2>&1 |
		awk '/aborted/ {bad=1} /^tps/ {print $3} END {if (bad) print "pgbench: a client aborted" > "/dev/stderr"}'
}

audit() { # duplicates must be 0: an item done twice, or a loan with two active rows
	psql -qXAt -d "$db" -c "SELECT (SELECT COUNT(*) FROM loanq_bench_item WHERE processed > 1)
	  + (SELECT COUNT(*) FROM (SELECT loan_id FROM loanq_work WHERE disposition IS NULL GROUP BY task_id, loan_id HAVING COUNT(*) > 1) d)"
}

echo "PostgreSQL $(psql -qXAt -d postgres -c 'SHOW server_version'), $clients clients, ${seconds}s each, $(nproc) CPUs"
printf '%-6s %10s %10s %12s %7s %7s %14s %7s  %s\n' round raw raw+ack engine-rows /raw /ack one-statement /raw duplicates
pct() { echo "100*$1/$2" | bc -l; }
for r in $(seq "$rounds"); do
	task=$(fresh); raw=$(tps raw.sql "$task"); d1=$(audit)
	task=$(fresh); ack=$(tps raw-ack.sql "$task"); d2=$(audit)
	task=$(fresh); eng=$(tps engine-rows.sql "$task"); d3=$(audit)
	task=$(fresh); one=$(tps one-statement.sql "$task"); d4=$(audit)
	printf '%-6s %10.0f %10.0f %12.0f %6.1f%% %6.1f%% %14.0f %6.1f%%  %s\n' "$r" "$raw" "$ack" "$eng" "$(pct "$eng" "$raw")" \
		"$(pct "$eng" "$ack")" "$one" "$(pct "$one" "$raw")" "$d1/$d2/$d3/$d4"
done
psql -qX -d postgres -c "DROP DATABASE IF EXISTS $db" >/dev/null

package postgres_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/postgres"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// openBrief opens dsn as a command-line call does (schema.Options.Brief).
func openBrief(ctx context.Context, dsn string) (*sql.DB, error) {
	d, target, err := drivers.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	return d.(drivers.BriefOpener).OpenBrief(ctx, target)
}

// A brief process on the server itself: pgx's exec mode, so nothing is
// prepared on the server (each statement is one round trip), and the
// values loanq binds (integers, strings, and NULL through sql.Null*) go
// in and come back as they are; the server-side TCP keepalives stay.
func TestBriefSendsStatementsUnprepared(t *testing.T) {
	ctx := context.Background()
	db, err := openBrief(ctx, testdb.Fresh(t, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if got := execMode(t, db); got != pgx.QueryExecModeExec {
		t.Fatalf("exec mode of a brief process: %s, want exec", got)
	}
	var (
		n    int64
		s    string
		ni   sql.NullInt64
		ns   sql.NullString
		when time.Time
	)
	err = db.QueryRowContext(ctx, "SELECT $1::bigint + 1, $2 || '!', $3::bigint, $4::text, clock_timestamp()",
		int64(41), "it's", sql.NullInt64{}, sql.NullString{String: "x", Valid: true}).Scan(&n, &s, &ni, &ns, &when)
	if err != nil || n != 42 || s != "it's!" || ni.Valid || ns.String != "x" || time.Since(when) > time.Minute || time.Since(when) < -time.Minute {
		t.Fatalf("values through a brief connection: %d %q %v %v %v, %v", n, s, ni, ns, when, err)
	}
	var prepared int64
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM pg_prepared_statements").Scan(&prepared); err != nil || prepared != 0 {
		t.Fatalf("%d prepared statements on a brief connection (%v), want none", prepared, err)
	}
	var idle string
	if err := db.QueryRowContext(ctx, "SELECT current_setting('tcp_keepalives_idle')").Scan(&idle); err != nil || idle != "30" {
		t.Fatalf("server-side tcp_keepalives_idle %q (%v), want 30", idle, err)
	}
}

// A brief process behind PgBouncer in transaction pooling mode needs no
// question about the pooler: its unnamed statements live within one
// message sequence, which PgBouncer keeps on one server connection, so
// statements from many clients at once, in and out of transactions, never
// meet another client's (hammer; TestPlainDSNBehindPgBouncer shows that
// this PgBouncer does pass server connections between clients).
func TestBriefBehindPgBouncer(t *testing.T) {
	ctx := context.Background()
	dsn := testdb.Fresh(t, testdb.PgBouncer)
	db, err := openBrief(ctx, dsn)
	if err != nil {
		t.Fatalf("a brief process through PgBouncer: %v", err)
	}
	defer db.Close()
	if got := execMode(t, db); got != pgx.QueryExecModeExec {
		t.Fatalf("exec mode of a brief process behind PgBouncer: %s, want exec", got)
	}
	if err := hammerWith(ctx, func(ctx context.Context) (*sql.DB, error) { return openBrief(ctx, dsn) }); err != nil {
		t.Fatalf("brief statements from 8 clients through PgBouncer: %v", err)
	}
}

// A DSN that names the exec mode keeps it in a brief process too.
func TestBriefKeepsTheDSNsExecMode(t *testing.T) {
	ctx := context.Background()
	db, err := openBrief(ctx, testdb.Fresh(t, "postgres")+"&default_query_exec_mode=cache_describe")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got := execMode(t, db); got != pgx.QueryExecModeCacheDescribe {
		t.Fatalf("exec mode: %s, want cache describe as the DSN says", got)
	}
}

// A pooled connection is pinged before reuse after more than a second
// idle, counted from its opening as well as from its last reuse: not at
// the first reuse of a connection opened just before (a round trip each
// command-line call paid), but after a second of either.
func TestNoPingRightAfterOpening(t *testing.T) {
	ctx := context.Background()
	db, err := openBrief(ctx, testdb.Fresh(t, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	err = conn.Raw(func(dc any) error {
		pc := dc.(*stdlib.Conn).Conn()
		opened, ok := pc.PgConn().CustomData()[postgres.OpenedKey].(time.Time)
		if !ok || time.Since(opened) > time.Minute {
			t.Errorf("the connection's opening time: %v, %v", opened, ok)
		}
		never := 1000 * time.Hour // pgx's idle time of a connection never reused
		for _, c := range []struct {
			openedAgo, idle time.Duration
			want            bool
		}{
			{0, never, false},
			{2 * time.Second, never, true},
			{2 * time.Second, 500 * time.Millisecond, false},
			{10 * time.Millisecond, 2 * time.Second, false},
		} {
			pc.PgConn().CustomData()[postgres.OpenedKey] = time.Now().Add(-c.openedAgo)
			if got := postgres.ShouldPing(ctx, stdlib.ShouldPingParams{Conn: pc, IdleDuration: c.idle}); got != c.want {
				t.Errorf("opened %s ago, idle %s: ping %v, want %v", c.openedAgo, c.idle, got, c.want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

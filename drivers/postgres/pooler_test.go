package postgres_test

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/drivers/postgres"
	"github.com/loanq/loanq/internal/testkit/testdb"
	"github.com/loanq/loanq/problem"

	// The features' statement catalogues (drivers.Catalogue), linked in so
	// that TestNoSessionStateInStatements checks every statement loanq
	// sends, not the engine's alone (the list of drivers/oracle's
	// catalogues_test.go, which TestCatalogues in commands/ keeps whole).
	_ "github.com/loanq/loanq/dashboard"
	_ "github.com/loanq/loanq/dispatch"
	_ "github.com/loanq/loanq/namedlock"
)

// execMode is the exec mode pgx uses on one of the pool's connections.
func execMode(t *testing.T, db *sql.DB) pgx.QueryExecMode {
	t.Helper()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var mode pgx.QueryExecMode
	if err := conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("driver connection %T, want *stdlib.Conn", dc)
		}
		mode = sc.Conn().Config().DefaultQueryExecMode
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return mode
}

// hammer runs the same statements from several pools at once, each caller on
// its own connection, in and out of transactions: behind a transaction
// pooler, consecutive statements of one client land on different server
// connections, and server connections pass between clients. It returns the
// first error.
func hammer(ctx context.Context, dsn string) error {
	return hammerWith(ctx, func(ctx context.Context) (*sql.DB, error) {
		_, db, _, err := drivers.Connect(ctx, dsn)
		return db, err
	})
}

// prepareOneAfterTheOther runs one statement on a client, then the same
// statement on a second client. PgBouncer hands a query the server
// connection released last (LIFO, its default), so the second client's
// named prepared statement (pgx names it after its text) meets the first
// one's on that connection: without the concurrency hammer needs, which
// some runs got through without a collision.
func prepareOneAfterTheOther(ctx context.Context, dsn string) error {
	var dbs []*sql.DB
	defer func() {
		for _, db := range dbs {
			db.Close()
		}
	}()
	for range 2 {
		_, db, _, err := drivers.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		db.SetMaxOpenConns(1)
		dbs = append(dbs, db)
		var n int64
		if err := db.QueryRowContext(ctx, "SELECT $1::bigint + 41", 1).Scan(&n); err != nil {
			return err
		}
	}
	return nil
}

// hammerWith is hammer with each client's pool opened by open.
func hammerWith(ctx context.Context, open func(context.Context) (*sql.DB, error)) error {
	const clients, rounds = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := open(ctx)
			if err != nil {
				errs <- err
				return
			}
			defer db.Close()
			db.SetMaxOpenConns(1)
			for r := 0; r < rounds; r++ {
				var n int64
				if err := db.QueryRowContext(ctx, "SELECT $1::bigint + 1", r).Scan(&n); err != nil || n != int64(r+1) {
					errs <- fmt.Errorf("autocommit statement: %d, %w", n, err)
					return
				}
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					errs <- err
					return
				}
				if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM pg_class WHERE relpages >= $1", r).Scan(&n); err != nil {
					tx.Rollback()
					errs <- fmt.Errorf("statement in a transaction: %w", err)
					return
				}
				if err := tx.Commit(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// A plain DSN works behind PgBouncer in transaction pooling mode (a stock
// configuration: no ignore_startup_parameters, no prepared-statement
// support): the connection opens although loanq asks for server-side TCP
// keepalives, which PgBouncer refuses; the pool finds that it reached a
// pooler and uses pgx's describe cache; statements run from many clients at
// once never meet another client's prepared statement. The same DSN with
// pgx's default exec mode forced fails under the same load: the check that
// this PgBouncer really passes server connections between clients.
func TestPlainDSNBehindPgBouncer(t *testing.T) {
	ctx := context.Background()
	dsn := testdb.Fresh(t, testdb.PgBouncer)
	_, db, _, err := drivers.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("a plain DSN through PgBouncer: %v", err)
	}
	defer db.Close()
	if got := execMode(t, db); got != pgx.QueryExecModeCacheDescribe {
		t.Fatalf("exec mode behind PgBouncer: %s, want cache describe", got)
	}
	// application_name is the startup parameter loanq keeps: PgBouncer
	// tracks it and sets it on whichever server connection serves the client.
	var app string
	if err := db.QueryRowContext(ctx, "SELECT current_setting('application_name')").Scan(&app); err != nil || app != "loanq" {
		t.Fatalf("application_name behind PgBouncer: %q, %v", app, err)
	}
	if err := hammer(ctx, dsn); err != nil {
		t.Fatalf("statements from 8 clients through PgBouncer: %v", err)
	}
	forced := dsn + "&default_query_exec_mode=cache_statement"
	how := "one client after the other"
	err = prepareOneAfterTheOther(ctx, forced)
	if err == nil {
		// The two clients were given different server connections: the
		// same clients at once, many times, meet one another's.
		how = "8 clients at once"
		err = hammer(ctx, forced)
	}
	if err == nil || !(strings.Contains(err.Error(), "42P05") || strings.Contains(err.Error(), "26000")) {
		t.Fatalf("with pgx's named prepared statements forced through PgBouncer: %v; want 42P05 (already exists) or 26000 (does not exist): "+
			"without it this test cannot tell whether PgBouncer shares server connections", err)
	}
	t.Logf("control, named prepared statements through PgBouncer, %s: %v", how, err)
}

// On the server itself nothing changes: pgx's prepared statements (the
// server's plans reused; docs/postgres.md has what the describe cache would
// cost) and the server-side TCP keepalives.
func TestDirectKeepsPreparedStatements(t *testing.T) {
	ctx := context.Background()
	_, db, _, err := drivers.Connect(ctx, testdb.Fresh(t, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if got := execMode(t, db); got != pgx.QueryExecModeCacheStatement {
		t.Fatalf("exec mode on the server itself: %s, want cache statement (pgx's default)", got)
	}
	var n, prepared int64
	if err := db.QueryRowContext(ctx, "SELECT $1::bigint", 1).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'stmtcache_%'").Scan(&prepared); err != nil || prepared == 0 {
		t.Fatalf("%d named prepared statements on the connection (%v), want pgx's", prepared, err)
	}
	var idle string
	if err := db.QueryRowContext(ctx, "SELECT current_setting('tcp_keepalives_idle')").Scan(&idle); err != nil || idle != "30" {
		t.Fatalf("server-side tcp_keepalives_idle %q (%v), want 30", idle, err)
	}
}

// A DSN that names the exec mode keeps it, behind a pooler too; nothing is
// asked at connect.
func TestExecModeFromDSN(t *testing.T) {
	ctx := context.Background()
	_, db, _, err := drivers.Connect(ctx, testdb.Fresh(t, testdb.PgBouncer)+"&default_query_exec_mode=exec")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got := execMode(t, db); got != pgx.QueryExecModeExec {
		t.Fatalf("exec mode: %s, want exec as the DSN says", got)
	}
}

// A run-time parameter the DSN sets itself (here lock_timeout) is a startup
// parameter PgBouncer refuses. loanq does not drop it (the user asked for
// it): the connection fails as bad input (exit 2) saying what to do instead,
// with no password in the message.
func TestPgBouncerRefusesDSNParameter(t *testing.T) {
	dsn := testdb.Fresh(t, testdb.PgBouncer)
	withPassword := strings.Replace(dsn, "://postgres@", "://postgres:s3cret-pw@", 1)
	_, db, _, err := drivers.Connect(context.Background(), withPassword+"&lock_timeout=5s")
	if err == nil {
		db.Close()
		t.Fatal("PgBouncer accepted lock_timeout as a startup parameter: this test needs a stock PgBouncer")
	}
	msg := err.Error() // the hint included
	if problem.ExitCode(err) != problem.ExitUsage {
		t.Errorf("exit code %d, want %d: %s", problem.ExitCode(err), problem.ExitUsage, msg)
	}
	for _, want := range []string{"lock_timeout", "ALTER ROLE", "Behind PgBouncer"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the message does not say %q: %s", want, msg)
		}
	}
	if strings.Contains(msg, "s3cret-pw") {
		t.Errorf("the message shows the password: %s", msg)
	}
}

// Nothing loanq sets on PostgreSQL outlives its transaction, so nothing can
// leak to another client of a pooler's server connection: the wait bound and
// the hold limit, sent by the driver's own statements inside a transaction
// through PgBouncer, are gone for the next client that PgBouncer gives the
// same server connection (its last used, so the very next one when nothing
// else runs; the backend's process id shows it is the same).
func TestNothingLeaksToTheNextClient(t *testing.T) {
	ctx := context.Background()
	dsn := testdb.Fresh(t, testdb.PgBouncer)
	d := &postgres.Driver{}
	_, a, _, err := drivers.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	_, b, _, err := drivers.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	settings := func(q drivers.Querier) (pid int64, vals string) {
		t.Helper()
		if err := q.QueryRowContext(ctx, `SELECT pg_backend_pid(), current_setting('lock_timeout') || ' ' ||
  current_setting('idle_in_transaction_session_timeout') || ' ' || current_setting('statement_timeout')`).Scan(&pid, &vals); err != nil {
			t.Fatal(err)
		}
		return pid, vals
	}
	_, defaults := settings(b)
	for try := 0; try < 20; try++ {
		tx, err := a.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Statements().WaitLockSet.Exec(ctx, tx, engineio.MillisParams{MS: 1500}); err != nil {
			t.Fatal(err)
		}
		if set, err := drivers.LimitHold(ctx, d, tx, 2500*time.Millisecond, 7*time.Second); err != nil || !set {
			t.Fatalf("LimitHold: %v %v", set, err)
		}
		pid, inside := settings(tx)
		if inside != "1500ms 2500ms 7s" {
			t.Fatalf("inside the transaction: %s, want 1500ms 2500ms 7s", inside)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		next, after := settings(b)
		if next != pid {
			continue // PgBouncer gave b another server connection: again
		}
		if after != defaults {
			t.Fatalf("the next client on the same server connection sees %s, want the defaults %s", after, defaults)
		}
		return
	}
	t.Fatal("PgBouncer never gave the next client the server connection just used: nothing was checked")
}

// The statements loanq sends PostgreSQL set nothing at session level:
// set_config(…, true) only (SET LOCAL), no SET, no session advisory lock, no
// LISTEN, no temporary table, no named PREPARE, no cursor held past its
// transaction. Any of them would stay on a pooler's server connection for
// the next client, or be missing from the next server connection.
func TestNoSessionStateInStatements(t *testing.T) {
	sessionLevel := []*regexp.Regexp{
		regexp.MustCompile(`(?is)^\s*(SET|RESET|DISCARD|LISTEN|UNLISTEN|PREPARE|DEALLOCATE)\b`),
		regexp.MustCompile(`(?is)set_config\s*\((?:[^()]|\([^()]*\))*,\s*false\s*\)`),
		regexp.MustCompile(`(?i)pg_(try_)?advisory_lock(_shared)?\s*\(`),
		regexp.MustCompile(`(?i)\bCREATE\s+(GLOBAL\s+|LOCAL\s+)?(TEMP|TEMPORARY)\b`),
		regexp.MustCompile(`(?i)\bWITH\s+HOLD\b`),
	}
	// The checks themselves catch what they are for.
	for _, bad := range []string{"SET lock_timeout = '5s'", "SELECT set_config('lock_timeout', '5s', false)",
		"SELECT pg_advisory_lock(1)", "CREATE TEMP TABLE x (id int)", "LISTEN loanq"} {
		caught := false
		for _, re := range sessionLevel {
			caught = caught || re.MatchString(bad)
		}
		if !caught {
			t.Fatalf("the check misses %q", bad)
		}
	}
	d := &postgres.Driver{}
	list := d.Statements().List()
	if len(list) < 50 {
		t.Fatalf("%d statements listed: the list is not the driver's", len(list))
	}
	for _, c := range drivers.Catalogues() {
		cat, err := c.Compiled(d)
		if err != nil {
			t.Fatal(err)
		}
		list = append(list, drivers.ListCatalogue(cat)...)
	}
	for _, st := range list {
		for _, re := range sessionLevel {
			if re.MatchString(st.SQL) {
				t.Errorf("%s sets session state (%s):\n%s", st.Field, re, st.SQL)
			}
		}
	}
}

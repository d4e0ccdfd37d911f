// Command api-load is the API load run of BENCHMARKS.md: it prepares a
// database (loanq's schema, a table of --loans loans, a skip task over it,
// one processor token per client), starts one `loanq serve --api` process
// with a bounded pool (--max-conns), drives it with --clients concurrent API
// clients for --duration (internal/testkit/apiload: ask for a loan, long-poll while
// pending, complete it), and prints requests per second, latency
// percentiles, the answers by status (anything but 200 and 202 is an error)
// and the node's goroutines and memory before and after the load.
//
//	go run ./scripts/api-load --db postgres://postgres@127.0.0.1:5432/apiload --clients 200 --duration 60s --max-conns 16
//
// The database must exist (PostgreSQL or MySQL/MariaDB; it gets a table
// apiload_loan and a task api-load-UNIXTIME). The tokens it issues are
// revoked at the end. Exit status 1 when any call failed.
package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	_ "github.com/loanq/loanq/drivers/all" // the database drivers
	"github.com/loanq/loanq/internal/testkit/apiload"
	"github.com/loanq/loanq/schema"
)

func main() {
	db := flag.String("db", "", "database DSN (postgres://… or mysql://…); required")
	clients := flag.Int("clients", 200, "concurrent API clients, one user each")
	duration := flag.Duration("duration", 60*time.Second, "how long the clients ask")
	maxConns := flag.Int("max-conns", 16, "serve --max-conns: the node's database pool")
	loans := flag.Int("loans", 200000, "loans in the task")
	binary := flag.String("loanq", "", "the loanq binary (default: go build it from this repository)")
	asJSON := flag.Bool("json", false, "print the result as JSON")
	flag.Parse()
	if *db == "" {
		fmt.Fprintln(os.Stderr, "api-load: give --db DSN (an existing PostgreSQL or MySQL/MariaDB database)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *db, *binary, *clients, *maxConns, *loans, *duration, *asJSON); err != nil {
		fmt.Fprintln(os.Stderr, "api-load:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dsn, binary string, clients, maxConns, loans int, duration time.Duration, asJSON bool) error {
	d, db, _, err := drivers.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer db.Close()
	if _, err := schema.Up(ctx, d, db); err != nil {
		return fmt.Errorf("migrate up: %w", err)
	}
	fmt.Fprintf(os.Stderr, "api-load: filling apiload_loan with %d loans…\n", loans)
	if err := fillLoans(ctx, d, db, loans); err != nil {
		return err
	}
	e := dispatch.New(db, d)
	task := fmt.Sprintf("api-load-%d", time.Now().Unix())
	if _, _, err := e.Admin().CreateTask(ctx, dispatch.TaskSpec{Name: task, Source: "apiload_loan", Key: "id", Where: "eligible = 1",
		Order: "priority", Lock: drivers.Skip, CreatedBy: "api-load"}); err != nil {
		return fmt.Errorf("creating the task: %w", err)
	}
	tokens := make([]string, clients)
	var ids []int64
	for i := range tokens {
		tok, err := e.Admin().CreateToken(ctx, fmt.Sprintf("load%04d", i), "processor", "api-load", 0)
		if err != nil {
			return err
		}
		tokens[i], ids = tok.Token, append(ids, tok.ID)
	}
	defer func() {
		for _, id := range ids {
			_ = e.Admin().RevokeToken(context.Background(), id, "api-load")
		}
	}()

	if binary == "" {
		dir, err := os.MkdirTemp("", "api-load-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		binary = filepath.Join(dir, "loanq")
		_, self, _, _ := runtime.Caller(0)
		build := exec.CommandContext(ctx, "go", "build", "-o", binary, ".")
		build.Dir = filepath.Join(filepath.Dir(self), "..", "..")
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building loanq: %w", err)
		}
	}
	serve := exec.Command(binary, "--db", dsn, "serve", "--api", "--listen", "127.0.0.1:0", "--max-conns", fmt.Sprint(maxConns))
	serve.Stderr = os.Stderr
	out, err := serve.StdoutPipe()
	if err != nil {
		return err
	}
	if err := serve.Start(); err != nil {
		return fmt.Errorf("starting loanq serve: %w", err)
	}
	defer func() { _ = serve.Process.Signal(os.Interrupt); _ = serve.Wait() }()
	line, _ := bufio.NewReader(out).ReadString('\n')
	m := regexp.MustCompile(`http://(127\.0\.0\.1:\d+)/`).FindStringSubmatch(line)
	if m == nil {
		return fmt.Errorf("loanq serve did not print its address: %q", line)
	}
	url := "http://" + m[1]

	before, err := apiload.Scrape(ctx, url, "")
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "api-load: %d clients for %s against %s (task %s, --max-conns %d)…\n", clients, duration, url, task, maxConns)
	r, err := apiload.Run(ctx, apiload.Options{URL: url, Task: task, Tokens: tokens, Duration: duration})
	if err != nil {
		return err
	}
	during, _ := apiload.Scrape(ctx, url, "")
	after, err := apiload.Settle(ctx, url, "", before.Goroutines, maxConns+10, 30*time.Second)
	if err != nil {
		return err
	}
	var pending int64
	if err := db.QueryRowContext(ctx, drivers.Rebind(d.Dialect(), `SELECT COUNT(*) FROM loanq_work_request r JOIN loanq_task t ON t.id = r.task_id
		WHERE t.name = ? AND r.status = 'pending'`), task).Scan(&pending); err != nil {
		return err
	}
	if asJSON {
		b, _ := json.MarshalIndent(map[string]any{"result": r, "before": before, "right_after": during, "settled": after, "pending_left": pending}, "", "  ")
		fmt.Println(string(b))
	} else {
		mib := func(b float64) float64 { return b / (1 << 20) }
		fmt.Printf("database        %s\n", d.Name())
		fmt.Printf("clients         %d for %.1f s, serve --max-conns %d\n", r.Clients, r.ElapsedS, maxConns)
		fmt.Printf("calls           %d (%.0f/s): %d gets, %d long polls, %d completes\n", r.Calls, r.CallsPerSec, r.Requests, r.Polls, r.Loans)
		fmt.Printf("loans completed %d (%.0f/s), empty answers %d\n", r.Loans, r.LoansPerSec, r.Empty)
		fmt.Printf("latency         p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", r.P50ms, r.P99ms, r.MaxMs)
		fmt.Printf("answers         %v; errors (not 200/202) %d\n", r.Status, r.Errors)
		fmt.Printf("pending left    %d\n", pending)
		fmt.Printf("goroutines      %d before, %d right after, %d settled\n", before.Goroutines, during.Goroutines, after.Goroutines)
		fmt.Printf("heap in use     %.1f MiB before, %.1f right after, %.1f settled (Go sys %.1f → %.1f MiB)\n",
			mib(before.HeapInuse), mib(during.HeapInuse), mib(after.HeapInuse), mib(before.Sys), mib(after.Sys))
		fmt.Printf("pool            %d connections open, %.0f waits for a free one\n", after.ConnsOpen, after.ConnWaits)
		for _, s := range r.Samples {
			fmt.Printf("error sample    %s\n", s)
		}
	}
	if r.Errors != 0 || pending != 0 {
		return errors.New(strings.TrimSpace(fmt.Sprintf("%d errors, %d requests left pending", r.Errors, pending)))
	}
	return nil
}

// fillLoans (re)creates apiload_loan (id, eligible, priority) with n rows,
// in batches of 500.
func fillLoans(ctx context.Context, d drivers.Driver, db *sql.DB, n int) error {
	tables := d.Tables()
	_, _ = db.ExecContext(ctx, "DROP TABLE apiload_loan")
	if _, err := db.ExecContext(ctx, fmt.Sprintf("CREATE TABLE apiload_loan (id %s PRIMARY KEY, eligible INTEGER NOT NULL, priority INTEGER NOT NULL)", tables.BigInt)); err != nil {
		return fmt.Errorf("creating apiload_loan: %w", err)
	}
	if _, err := db.ExecContext(ctx, "CREATE INDEX apiload_loan_ix ON apiload_loan (eligible, priority, id)"); err != nil {
		return fmt.Errorf("indexing apiload_loan: %w", err)
	}
	const batch = 500
	for from := 1; from <= n; from += batch {
		var b strings.Builder
		var args []any
		b.WriteString("INSERT INTO apiload_loan (id, eligible, priority) VALUES ")
		for i := from; i < from+batch && i <= n; i++ {
			if i > from {
				b.WriteString(", ")
			}
			b.WriteString("(?, 1, ?)")
			args = append(args, i, i)
		}
		if _, err := db.ExecContext(ctx, drivers.Rebind(d.Dialect(), b.String()), args...); err != nil {
			return fmt.Errorf("filling apiload_loan: %w", err)
		}
	}
	return nil
}

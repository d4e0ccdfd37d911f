package e2e

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loanq/loanq/internal/testkit/testdb"
)

// historyLine is one record of `loanq history --output json`.
type historyLine struct {
	ID          int64           `json:"id"`
	Event       string          `json:"event"`
	At          string          `json:"at"`
	Task        string          `json:"task"`
	Loan        json.RawMessage `json:"loan"`
	User        string          `json:"user"`
	WorkID      int64           `json:"work_id"`
	Disposition *string         `json:"disposition"`
	Note        *string         `json:"note"`
	ReturnAt    *string         `json:"return_at"`
}

func historyLines(t *testing.T, out string) []historyLine {
	t.Helper()
	var recs []historyLine
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if l == "" {
			continue
		}
		var h historyLine
		if err := json.Unmarshal([]byte(l), &h); err != nil {
			t.Fatalf("not one JSON object per line: %v\n%s", err, l)
		}
		recs = append(recs, h)
	}
	return recs
}

// `loanq history` as a user runs it: the events of work got and disposed
// through the binary, as JSON lines (the same with the global -o json),
// CSV that a CSV reader reads back (a note with a comma, quotes and a
// newline), and text that names the cursor on stderr; an export resumed
// after the last id writes only what came since.
func TestExportHistoryCommand(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		mustOK(t, dsn, "admin", "migrate", "up")
		mustOK(t, dsn, "admin", "demo", "seed", "--loans", "40")
		req := decode(t, mustOK(t, dsn, "ana", "-o", "json", "work", "get", "verify-bank", "--count", "3"))
		note := "called, \"twice\"\nno answer"
		mustOK(t, dsn, "ana", "disposition", "verify-bank", itoa64(req.Loans[0]), "complete", "--note", note)
		mustOK(t, dsn, "ana", "disposition", "verify-bank", itoa64(req.Loans[1]), "return", "--after", "2h")
		time.Sleep(5 * time.Millisecond) // past the events' millisecond: --settle 0s takes them

		js := mustOK(t, dsn, "admin", "history", "--output", "json", "--settle", "0s")
		recs := historyLines(t, js.stdout)
		if len(recs) != 5 || js.stderr != "" {
			t.Fatalf("history --output json: %d records (want 3 assignments, 2 dispositions), stderr %q\n%s", len(recs), js.stderr, js.stdout)
		}
		for i, r := range recs {
			if i > 0 && r.ID <= recs[i-1].ID {
				t.Errorf("ids not increasing: %d after %d", r.ID, recs[i-1].ID)
			}
			if !timestamp.MatchString(r.At) || r.Task != "verify-bank" || r.User != "ana" || string(r.Loan) == "" || string(r.Loan)[0] == '"' {
				t.Errorf("record %+v (an integer task's loan is a JSON number)", r)
			}
		}
		if d := recs[3]; d.Event != "disposed" || d.Disposition == nil || *d.Disposition != "complete" || d.Note == nil || *d.Note != note {
			t.Errorf("the complete's record: %+v", d)
		}
		if d := recs[4]; d.Event != "disposed" || d.ReturnAt == nil || !timestamp.MatchString(*d.ReturnAt) {
			t.Errorf("the return's record: %+v", d)
		}
		if a := recs[0]; a.Event != "assigned" || a.Disposition != nil || a.Note != nil {
			t.Errorf("an assignment's record carries a disposition: %+v", a)
		}
		if g := mustOK(t, dsn, "admin", "-o", "json", "history", "--settle", "0s"); g.stdout != js.stdout {
			t.Errorf("loanq -o json history differs from loanq history --output json:\n%s\n%s", g.stdout, js.stdout)
		}

		cs := mustOK(t, dsn, "admin", "history", "--output", "csv", "--settle", "0s")
		rows, err := csv.NewReader(strings.NewReader(cs.stdout)).ReadAll()
		if err != nil {
			t.Fatalf("history --output csv is not CSV: %v\n%s", err, cs.stdout)
		}
		if len(rows) != 6 || strings.Join(rows[0], ",") != "id,event,at,task,loan,user,request_id,work_id,assigned_at,disposition,disposed_at,disposed_by,reason,note,return_at" {
			t.Fatalf("history --output csv: %d rows\n%s", len(rows), cs.stdout)
		}
		if rows[4][1] != "disposed" || rows[4][9] != "complete" || rows[4][13] != note || rows[4][0] != itoa64(recs[3].ID) {
			t.Errorf("the complete's CSV row: %q", rows[4])
		}
		if rows[1][9] != "" || rows[1][13] != "" {
			t.Errorf("an assignment's CSV row carries a disposition: %q", rows[1])
		}

		last := recs[len(recs)-1].ID
		txt := mustOK(t, dsn, "admin", "history", "--settle", "0s", "--task", "verify-bank")
		if n := strings.Count(txt.stdout, "\n"); n != 5 || !strings.Contains(txt.stderr, fmt.Sprintf("resume with --after-id %d", last)) {
			t.Errorf("text: %d lines, stderr %q\n%s", n, txt.stderr, txt.stdout)
		}
		// Resumed after the last id: only what came since.
		mustOK(t, dsn, "ana", "disposition", "verify-bank", itoa64(req.Loans[2]), "never")
		time.Sleep(5 * time.Millisecond)
		more := historyLines(t, mustOK(t, dsn, "admin", "history", "-o", "json", "--settle", "0s", "--after-id", itoa64(last)).stdout)
		if len(more) != 1 || more[0].ID <= last || more[0].Disposition == nil || *more[0].Disposition != "never" {
			t.Errorf("resumed after %d: %+v, want the never alone", last, more)
		}
		// The settle window: the never, seconds old, is still settling.
		if r := mustOK(t, dsn, "admin", "history", "--after-id", itoa64(last), "--settle", "1h"); r.stdout != "" || !strings.Contains(r.stderr, "later export") {
			t.Errorf("--settle 1h on fresh events: %q %q", r.stdout, r.stderr)
		}
		// Filters: nobody's, another task's.
		if r := mustOK(t, dsn, "admin", "history", "-o", "json", "--settle", "0s", "--user", "zed"); r.stdout != "" {
			t.Errorf("--user zed: %q", r.stdout)
		}
		if r := loanq(t, dsn, "admin", "history", "--task", "nope"); r.code != 2 || !strings.Contains(r.stderr, "unknown task") {
			t.Errorf("--task nope: exit %d %s", r.code, r.stderr)
		}
	})
}

// historyMillion is the size of the constant-memory test.
const historyMillion = 1_000_000

// TestHistoryMillionRows exports a history of a million events (MariaDB:
// 100,000) as CSV
// through the binary, reading its output as a stream: every event once, ids
// strictly increasing, and the child's peak RSS under historyRSSBound
// (docs/retention.md). Serial: the bulk insert and the export load
// both cores, and the RSS is measured alone.
func TestHistoryMillionRows(t *testing.T) {
	testdb.EachSerial(t, func(t *testing.T, dsn string) {
		d, db := testdb.Migrated(t, dsn)
		testdb.CreateLoans(t, d, db, 1)
		mustOK(t, dsn, "admin", "task", "create", "bulk", "--where", "eligible = 1")
		task := testdb.Int(t, d, db, "SELECT id FROM loanq_task WHERE name = 'bulk'")
		now := d.Dialect().Now()
		testdb.Exec(t, d, db, "INSERT INTO loanq_work_request (task_id, user_name, requested, assigned, status, created_at, served_at) VALUES (?, 'bulk', 1, 1, 'assigned', "+now+", "+now+")", task)
		req := testdb.Int(t, d, db, "SELECT MAX(id) FROM loanq_work_request")
		// 900,000 work rows, every ninth disposed, and their events (an
		// assignment per row, a disposition per disposed row): a million,
		// written set-based with the triggers on loanq_work dropped (this
		// throwaway database's only: row by row they took minutes on this
		// shared 2-core machine; what they write is tested elsewhere).
		// MariaDB a tenth of it: a million took 3 min to write and 38 s to
		// export there (PostgreSQL 70 s and 13 s, SQLite 123 s and 39 s, on
		// this machine, shared and loaded); the memory of the export does
		// not grow with the count, which the other two show at a million.
		events := historyMillion
		if d.Name() == "mysql" {
			events = historyMillion / 10
		}
		rows := events * 9 / 10
		start := time.Now()
		var triggers string
		switch d.Name() {
		case "postgres":
			triggers = "SELECT tgname FROM pg_trigger WHERE tgrelid = 'loanq_work'::regclass AND NOT tgisinternal"
		case "mysql":
			triggers = "SELECT trigger_name FROM information_schema.triggers WHERE event_object_schema = DATABASE() AND event_object_table = 'loanq_work'"
		default:
			triggers = "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'loanq_work'"
		}
		var names []string
		list, err := db.Query(triggers)
		if err != nil {
			t.Fatal(err)
		}
		for list.Next() {
			var n string
			if err := list.Scan(&n); err != nil {
				t.Fatal(err)
			}
			names = append(names, n)
		}
		list.Close()
		if len(names) < 2 {
			t.Fatalf("triggers on loanq_work: %v", names)
		}
		for _, name := range names {
			drop := "DROP TRIGGER " + name
			if d.Name() == "postgres" {
				drop += " ON loanq_work"
			}
			testdb.Exec(t, d, db, drop)
		}
		var ins string
		switch d.Name() {
		case "postgres":
			ins = fmt.Sprintf(`INSERT INTO loanq_work (task_id, loan_id, user_name, request_id, assigned_at)
SELECT %d, n::text, 'u' || (n %% 50), %d, clock_timestamp() FROM generate_series(1, %d) n`, task, req, rows)
		case "mysql":
			ins = fmt.Sprintf(`INSERT INTO loanq_work (task_id, loan_id, user_name, request_id, assigned_at)
SELECT %d, CAST(seq AS CHAR), CONCAT('u', seq %% 50), %d, UTC_TIMESTAMP(6) FROM seq_1_to_%d`, task, req, rows)
		default:
			ins = fmt.Sprintf(`INSERT INTO loanq_work (task_id, loan_id, user_name, request_id, assigned_at)
WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < %d)
SELECT %d, CAST(n AS TEXT), 'u' || (n %% 50), %d, %s FROM s`, rows, task, req, now)
		}
		testdb.Exec(t, d, db, ins)
		testdb.Exec(t, d, db, "UPDATE loanq_work SET disposition = 'complete', disposed_at = "+now+" WHERE request_id = ? AND "+d.Dialect().Integer("loan_id")+" % 9 = 0", req)
		testdb.Exec(t, d, db, "INSERT INTO loanq_history (work_id, event, event_at) SELECT id, 'assigned', assigned_at FROM loanq_work ORDER BY id")
		testdb.Exec(t, d, db, "INSERT INTO loanq_history (work_id, event, event_at) SELECT id, 'disposed', disposed_at FROM loanq_work WHERE disposition IS NOT NULL ORDER BY id")
		if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_history"); n != int64(events) {
			t.Fatalf("%d events, want %d", n, events)
		}
		t.Logf("%s: %d events written in %v", d.Name(), events, time.Since(start).Round(time.Millisecond))
		time.Sleep(5 * time.Millisecond)

		start = time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := command(ctx, dsn, "admin", "history", "--output", "csv", "--settle", "0s")
		var errb strings.Builder
		cmd.Stderr = &errb
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The child's peak RSS is its VmHWM, read while it runs: the rusage
		// that Wait returns is no measure on Linux, as a child started by Go
		// (vfork, then exec) carries the parent's high-water mark in its
		// ru_maxrss (a child `true` of a process holding 200 MiB reports
		// 202 MiB).
		peak := make(chan int64, 1)
		go func() {
			var hwm int64
			for {
				b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
				if err != nil {
					break
				}
				_, v, ok := strings.Cut(string(b), "VmHWM:")
				if !ok {
					break // a zombie: it has exited
				}
				var kib int64
				fmt.Sscan(v, &kib)
				hwm = max(hwm, kib<<10)
				time.Sleep(20 * time.Millisecond)
			}
			peak <- hwm
		}()
		sc := bufio.NewScanner(out)
		lines, prev, disposed := 0, int64(0), 0
		for sc.Scan() {
			lines++
			if lines == 1 {
				if !strings.HasPrefix(sc.Text(), "id,event,") {
					t.Fatalf("no CSV header: %q", sc.Text())
				}
				continue
			}
			f := strings.SplitN(sc.Text(), ",", 3)
			id, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil || id <= prev {
				t.Fatalf("line %d: id %q after %d", lines, f[0], prev)
			}
			prev = id
			if f[1] == "disposed" {
				disposed++
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, out)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("loanq history: %v\n%s", err, errb.String())
		}
		took := time.Since(start)
		if lines != events+1 || disposed != events/10 {
			t.Errorf("%d lines (%d dispositions), want a header and %d events (%d dispositions)", lines, disposed, events, events/10)
		}
		rss := <-peak
		if rss == 0 {
			t.Fatal("no VmHWM read from /proc while loanq history ran")
		}
		t.Logf("%s: %d events exported as CSV in %v, peak RSS %.1f MiB", d.Name(), lines-1, took.Round(time.Millisecond), float64(rss)/(1<<20))
		if rss > historyRSSBound {
			t.Errorf("loanq history's peak RSS %.1f MiB, over the bound %d MiB: it holds more than a batch", float64(rss)/(1<<20), historyRSSBound>>20)
		}
	})
}

// historyRSSBound is the most a history export may take, whatever the
// number of events: measured about 20 MiB (docs/retention.md).
const historyRSSBound = 64 << 20

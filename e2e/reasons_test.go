package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/loanq/loanq/internal/testkit/testdb"
)

// Reasons and notes (docs/reasons.md): a task's codes per action, a
// required reason, a note; bad input is exit 2 and changes nothing; the
// database refuses a code outside the task's list whoever writes it.
func TestDispositionReasons(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, e := prepare(t, dsn, 10)
		mustOK(t, dsn, "admin", "task", "create", "rv", "--where", "eligible = 1",
			"--reasons", "never=duplicate,fraud,withdrawn;return=waiting-docs", "--require-reason", "never,return")
		var shown struct {
			Task struct {
				Reasons map[string][]string `json:"reasons"`
				Require []string            `json:"require_reason"`
			} `json:"task"`
		}
		if err := json.Unmarshal([]byte(mustOK(t, dsn, "admin", "-o", "json", "task", "show", "rv").stdout), &shown); err != nil {
			t.Fatal(err)
		}
		if strings.Join(shown.Task.Reasons["never"], ",") != "duplicate,fraud,withdrawn" || strings.Join(shown.Task.Require, ",") != "return,never" {
			t.Fatalf("task show -o json: %+v", shown.Task)
		}
		if out := mustOK(t, dsn, "admin", "task", "show", "rv").stdout; !strings.Contains(out, "return=waiting-docs; never=duplicate,fraud,withdrawn (required for return, never)") {
			t.Fatalf("task show:\n%s", out)
		}
		got := decode(t, mustOK(t, dsn, "ana", "-o", "json", "work", "get", "rv", "--count", "3"))
		if got.Assigned != 3 {
			t.Fatalf("work get: %+v", got)
		}
		loan := func(i int) string { return itoa64(got.Loans[i]) }

		before := snapshot(t, e.DB)
		for _, c := range []struct {
			args []string
			want []string
		}{
			{[]string{"disposition", "rv", loan(0), "never"}, []string{"requires a reason for never", "duplicate, fraud, withdrawn"}},
			{[]string{"disposition", "rv", loan(0), "never", "--reason", "spam"}, []string{`"spam" is not one of task rv's codes for never`, "duplicate, fraud, withdrawn"}},
			{[]string{"disposition", "rv", loan(0), "never", "--reason", "waiting-docs"}, []string{"duplicate, fraud, withdrawn"}},
			{[]string{"disposition", "rv", loan(0), "never", "--reason", "Dup licate"}, []string{"invalid --reason"}},
			{[]string{"disposition", "rv", loan(0), "never", "--reason", "fraud", "--note", strings.Repeat("x", 1001)}, []string{"at most 1000"}},
			{[]string{"disposition", "rv", loan(0), "never", "--reason", "fraud", "--note", "a\x1bb"}, []string{"invalid --note"}},
			{[]string{"disposition", "rv", loan(1), "return", "--after", "0s"}, []string{"requires a reason for return", "waiting-docs"}},
		} {
			r := loanq(t, dsn, "ana", c.args...)
			if r.code != 2 {
				t.Errorf("%v: exit %d, want 2\n%s", c.args, r.code, r.stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("%v: stderr lacks %q:\n%s", c.args, w, r.stderr)
				}
			}
		}
		for _, args := range [][]string{
			{"task", "create", "rv2", "--where", "eligible = 1", "--require-reason", "never"},
			{"task", "create", "rv2", "--where", "eligible = 1", "--reasons", "nope=x"},
			{"task", "create", "rv2", "--where", "eligible = 1", "--reasons", "never=a,a"},
			{"task", "update", "rv", "--reasons", "return=waiting-docs"}, // never still required, without codes
		} {
			if r := loanq(t, dsn, "admin", args...); r.code != 2 {
				t.Errorf("%v: exit %d, want 2\n%s", args, r.code, r.stderr)
			}
		}
		if after := snapshot(t, e.DB); after != before {
			t.Fatalf("bad input changed the database:\nbefore %s\nafter  %s", before, after)
		}

		note := `same borrower as <b>loan</b> & "788"`
		r := mustOK(t, dsn, "ana", "-o", "json", "disposition", "rv", loan(0), "never", "--reason", "duplicate", "--note", note)
		var disp struct{ Reason, Note string }
		if err := json.Unmarshal([]byte(r.stdout), &disp); err != nil || disp.Reason != "duplicate" || disp.Note != note {
			t.Fatalf("disposition -o json: %v %s", err, r.stdout)
		}
		mustOK(t, dsn, "ana", "disposition", "rv", loan(1), "return", "--after", "0s", "--reason", "waiting-docs")
		mustOK(t, dsn, "ana", "disposition", "rv", loan(2), "complete", "--reason", "any-code") // complete declares no codes
		stored := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work WHERE reason = 'duplicate' AND note = ?", note)
		if stored != 1 {
			t.Fatalf("the reason and note of loan %s: %d rows hold them", loan(0), stored)
		}

		// The database's own rule, for every account: a hand-written
		// disposition with a code the task does not declare is refused.
		got = decode(t, mustOK(t, dsn, "ana", "-o", "json", "work", "get", "rv", "--count", "1"))
		for _, q := range []string{
			"UPDATE loanq_work SET disposition = 'never', disposed_at = " + d.Dialect().Now() + ", reason = 'spam' WHERE loan_id = '" + loan(0) + "' AND disposition IS NULL",
			"UPDATE loanq_work SET disposition = 'never', disposed_at = " + d.Dialect().Now() + ", reason = 'fraud,spam' WHERE loan_id = '" + loan(0) + "' AND disposition IS NULL",
			"UPDATE loanq_work SET disposition = 'never', disposed_at = " + d.Dialect().Now() + " WHERE loan_id = '" + loan(0) + "' AND disposition IS NULL",
		} {
			q = strings.ReplaceAll(q, "'"+loan(0)+"'", "'"+itoa64(got.Loans[0])+"'")
			if _, err := e.DB.ExecContext(context.Background(), q); err == nil || !strings.Contains(err.Error(), "docs/reasons.md") {
				t.Errorf("%s: %v, want the database's refusal", q, err)
			}
		}
		q := "UPDATE loanq_work SET disposition = 'never', disposed_at = " + d.Dialect().Now() + ", reason = 'fraud' WHERE loan_id = '" + itoa64(got.Loans[0]) + "' AND disposition IS NULL"
		if _, err := e.DB.ExecContext(context.Background(), q); err != nil {
			t.Errorf("%s: %v", q, err)
		}

		// Clearing: the task takes any code or none again.
		mustOK(t, dsn, "admin", "task", "update", "rv", "--reasons", "off", "--require-reason", "off")
		if out := mustOK(t, dsn, "admin", "task", "show", "rv").stdout; !strings.Contains(out, "reasons:      - (any reason code or none") {
			t.Fatalf("task show after clearing:\n%s", out)
		}
		got = decode(t, mustOK(t, dsn, "ana", "-o", "json", "work", "get", "rv", "--count", "1"))
		mustOK(t, dsn, "ana", "disposition", "rv", itoa64(got.Loans[0]), "never")
	})
}

// A new task without --max-hold gets the default (docs/abandoned-work.md);
// "off" is never; --if-not-exists accepts a task created before the default
// with its own setting, which it keeps.
func TestNewTaskMaxHoldDefault(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, e := prepare(t, dsn, 3)
		r := mustOK(t, dsn, "admin", "-o", "json", "task", "create", "dflt", "--where", "eligible = 1")
		if !strings.Contains(r.stdout, `"max_hold_ms": 259200000`) {
			t.Fatalf("task create without --max-hold:\n%s", r.stdout)
		}
		if out := mustOK(t, dsn, "admin", "task", "show", "dflt").stdout; !strings.Contains(out, "max hold:     72h0m0s") {
			t.Fatalf("task show:\n%s", out)
		}
		r = mustOK(t, dsn, "admin", "-o", "json", "task", "create", "never", "--where", "eligible = 1", "--max-hold", "off")
		if !strings.Contains(r.stdout, `"max_hold_ms": null`) {
			t.Fatalf("task create --max-hold off:\n%s", r.stdout)
		}
		if out := mustOK(t, dsn, "admin", "task", "show", "never").stdout; !strings.Contains(out, "active work never expires") {
			t.Fatalf("task show of a task without max hold:\n%s", out)
		}
		// A task from before the default: its NULL is kept by a script's
		// create --if-not-exists.
		testdb.Exec(t, d, e.DB, "UPDATE loanq_task SET max_hold_ms = NULL WHERE name = 'dflt'")
		r = mustOK(t, dsn, "admin", "task", "create", "dflt", "--where", "eligible = 1", "--if-not-exists")
		if !strings.Contains(r.stdout, "already exists") {
			t.Fatalf("create --if-not-exists of the older task: %s", r.stdout)
		}
		if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_task WHERE name = 'dflt' AND max_hold_ms IS NULL"); n != 1 {
			t.Fatal("create --if-not-exists changed the older task's max hold")
		}
		if r := loanq(t, dsn, "admin", "task", "create", "bad", "--where", "eligible = 1", "--max-hold", "0s"); r.code != 2 {
			t.Fatalf("--max-hold 0s: exit %d", r.code)
		}
	})
}

// work run gives --reason ACTION=CODE with its dispositions, and refuses to
// start without one for an action the task requires it for.
func TestWorkRunReasons(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, e := prepare(t, dsn, 3)
		mustOK(t, dsn, "admin", "task", "create", "wr", "--where", "eligible = 1",
			"--reasons", "never=duplicate;return=waiting-docs", "--require-reason", "return")
		before := snapshot(t, e.DB)
		for _, args := range [][]string{
			{"work", "run", "wr", "--until-empty", "--", "true"},                                                           // return required, no --reason
			{"work", "run", "wr", "--until-empty", "--reason", "return=nope", "--", "true"},                                // not a code of return
			{"work", "run", "wr", "--until-empty", "--reason", "sideways=x", "--", "true"},                                 // not an action
			{"work", "run", "wr", "--until-empty", "--reason", "return=waiting-docs", "--reason", "never=x", "--", "true"}, // not a code of never
		} {
			if r := loanq(t, dsn, "robot", args...); r.code != 2 {
				t.Errorf("%v: exit %d, want 2\n%s", args, r.code, r.stderr)
			}
		}
		if after := snapshot(t, e.DB); after != before {
			t.Fatalf("a refused work run changed the database")
		}
		mustOK(t, dsn, "robot", "work", "run", "wr", "--until-empty", "--reason", "return=waiting-docs", "--reason", "never=duplicate", "--", "sh", "-c", "exit 65")
		if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work WHERE disposition = 'never' AND reason = 'duplicate'"); n != 3 {
			t.Fatalf("%d never dispositions with reason duplicate, want 3", n)
		}
	})
}

// A processor's own account, by hand: the database refuses a disposition
// whose reason is not one of the task's codes, or without a required one
// (docs/reasons.md, "What the database enforces").
func TestReasonsByHand(t *testing.T) {
	t.Parallel()
	for _, dialect := range []string{"postgres", "mysql"} {
		t.Run(dialect, func(t *testing.T) {
			ctx := context.Background()
			owner := testdb.Fresh(t, dialect)
			d, db := testdb.Migrated(t, owner)
			testdb.CreateLoans(t, d, db, 5)
			mustOK(t, owner, "admin0", "task", "create", "rh", "--where", "eligible = 1", "--reasons", "never=fraud", "--require-reason", "never")
			acc := newAccounts(t, dialect, owner, d, db)
			proc := acc.create("processor", "proc", "ana")
			got := decode(t, runAs(t, proc, "", 0, "-o", "json", "work", "get", "rh", "--count", "1"))
			procDB := acc.open(proc)
			key := itoa64(got.Loans[0])
			for _, set := range []string{"reason = 'spam'", "reason = NULL", "reason = 'fraud,x'"} {
				q := "UPDATE loanq_work SET disposition = 'never', disposed_at = " + d.Dialect().Now() + ", " + set + " WHERE loan_id = '" + key + "' AND disposition IS NULL"
				if _, err := procDB.ExecContext(ctx, q); err == nil || !strings.Contains(err.Error(), "docs/reasons.md") {
					t.Errorf("processor by hand: %s: %v, want the database's refusal", q, err)
				}
			}
			q := "UPDATE loanq_work SET disposition = 'never', disposed_at = " + d.Dialect().Now() + ", reason = 'fraud', note = 'by hand' WHERE loan_id = '" + key + "' AND disposition IS NULL"
			if _, err := procDB.ExecContext(ctx, q); err != nil {
				t.Fatalf("processor by hand, a declared code: %s: %v", q, err)
			}
			// Finished history keeps its reason (00017: not changed by an untrusted account).
			if _, err := procDB.ExecContext(ctx, "UPDATE loanq_work SET reason = 'other', note = 'rewritten' WHERE loan_id = '"+key+"'"); err == nil {
				t.Error("a processor rewrote a finished disposition's reason")
			}
		})
	}
}

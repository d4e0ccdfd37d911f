package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/loanq/loanq/internal/testkit/testdb"
)

// A task keyed by text (LN-2024-000123) and one keyed by UUID (the native
// type on PostgreSQL and MariaDB), through the binary: several OS processes
// claim at once and no loan is handed out twice (checked on the final
// table); JSON shows the keys as strings; a disposition takes the key as
// text, and `work run` passes it in {} and LOANQ_LOAN_ID.
func TestTextAndUUIDKeysCLI(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, e := prepare(t, dsn, 0)
		const loans = 30
		for _, kind := range []struct{ table, col string }{{"kt_text", "VARCHAR(40)"}, {"kt_uuid", "UUID"}} {
			testdb.Exec(t, d, e.DB, "CREATE TABLE "+kind.table+" (ref "+kind.col+" NOT NULL PRIMARY KEY, prio INTEGER NOT NULL, eligible INTEGER NOT NULL)")
			var keys []string
			for i := 1; i <= loans; i++ {
				k := fmt.Sprintf("LN-2024-%06d", 100+i)
				if kind.table == "kt_uuid" {
					k = fmt.Sprintf("%08x-5c1d-4f2a-9e7b-%012x", 0xb0000000+i, i)
				}
				keys = append(keys, k)
				testdb.Exec(t, d, e.DB, "INSERT INTO "+kind.table+" (ref, prio, eligible) VALUES (?, ?, 1)", k, i)
			}
			name := strings.TrimPrefix(kind.table, "kt_")
			r := mustOK(t, dsn, "admin", "--output", "json", "task", "create", name, "--source", kind.table, "--key", "ref",
				"--where", "eligible = 1", "--order", "prio")
			wantKind := map[string]string{"kt_text": "text", "kt_uuid": "uuid"}[kind.table]
			if !strings.Contains(r.stdout, `"key_kind": "`+wantKind+`"`) {
				t.Fatalf("%s: task create printed %s; want key_kind %s", name, r.stdout, wantKind)
			}
			// Several processes at once, each until the task is empty.
			var mu sync.Mutex
			got := map[string]int{}
			var wg sync.WaitGroup
			for p := 0; p < 4; p++ {
				wg.Add(1)
				go func(user string) {
					defer wg.Done()
					for {
						r := loanq(t, dsn, user, "--output", "json", "work", "get", name, "--count", "3")
						var a struct {
							Loans []any `json:"loans"`
						}
						if r.code != 0 || json.Unmarshal([]byte(r.stdout), &a) != nil {
							t.Errorf("%s %s: exit %d %s %s", name, user, r.code, r.stdout, r.stderr)
							return
						}
						mu.Lock()
						for _, l := range a.Loans {
							s, ok := l.(string)
							if !ok {
								t.Errorf("%s: loan %v is a %T in JSON, want a string", name, l, l)
							}
							got[s]++
						}
						mu.Unlock()
						if len(a.Loans) == 0 {
							return
						}
					}
				}(fmt.Sprintf("p%d", p))
			}
			wg.Wait()
			for k, n := range got {
				if n != 1 {
					t.Errorf("%s: loan %s handed out %d times", name, k, n)
				}
			}
			if len(got) != loans {
				t.Errorf("%s: %d loans handed out, want %d", name, len(got), loans)
			}
			id := taskID(t, e, name)
			if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) - COUNT(DISTINCT loan_id) FROM loanq_work WHERE task_id = ?", id); n != 0 {
				t.Errorf("%s: %d loans active twice", name, n)
			}
			// The first key was p0's, p1's or …: its holder disposes of it.
			var holder string
			if err := e.DB.QueryRow(testdb.Rebind(d, "SELECT user_name FROM loanq_work WHERE task_id = ? AND loan_id = ?"), id, keys[0]).Scan(&holder); err != nil {
				t.Fatal(err)
			}
			r = mustOK(t, dsn, holder, "--output", "json", "disposition", name, keys[0], "complete")
			if !strings.Contains(r.stdout, `"loan_id": "`+keys[0]+`"`) {
				t.Errorf("%s: disposition printed %s; want the key as a string", name, r.stdout)
			}
			// Completed and still matching: back at once, to work run.
			r = loanq(t, dsn, "runner", "--output", "json", "work", "run", name, "--max-loans", "1", "--",
				"sh", "-c", `test "$1" = "$LOANQ_LOAN_ID" && test "$1" = "`+keys[0]+`"`, "sh", "{}")
			if r.code != 0 || !strings.Contains(r.stdout, `"loan_id":"`+keys[0]+`"`) || !strings.Contains(r.stdout, `"exit_code":0`) {
				t.Errorf("%s: work run: exit %d\n%s\n%s", name, r.code, r.stdout, r.stderr)
			}
		}
		audit(t, e)
	})
}

// Work rows whose loan_id is no key of their integer task (docs/security.md: a
// hand-written row; text, 007, digits past 64 bits) stop nobody: the
// criteria query compares loan ids as text, so gets go on, and every JSON
// answer that lists them stays valid JSON — `work list`, the status of the
// request they name, the pipeline of their user, `explain`, `task stats`.
// Before, 007 was written as the JSON number 007, and each of these failed
// with exit 1 for everybody who asked.
func TestWorkRowsOfAnotherKeyTypeKeepJSON(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, db := testdb.Migrated(t, dsn)
		testdb.CreateLoans(t, d, db, 20)
		mustOK(t, dsn, "admin", "task", "create", "ik", "--where", "eligible = 1", "--order", "priority", "--prefetch", "5")
		req := decode(t, mustOK(t, dsn, "mallory", "-o", "json", "work", "get", "ik", "--count", "1"))
		if fmt.Sprint(req.Loans) != "[1]" {
			t.Fatalf("first get: %+v", req)
		}
		for _, key := range []string{"zz'); SELECT pg_sleep(5)--", "007", "99999999999999999999", " 12", "-0"} {
			testdb.Exec(t, d, db, `INSERT INTO loanq_work (task_id, loan_id, user_name, request_id, assigned_at)
SELECT task_id, ?, user_name, request_id, assigned_at FROM loanq_work WHERE request_id = ? AND loan_id = '1'`, key, req.RequestID)
		}
		for _, c := range []struct {
			user string
			args []string
		}{
			{"admin", []string{"work", "list"}},
			{"mallory", []string{"work", "status", fmt.Sprint(req.RequestID)}},
			{"mallory", []string{"pipeline"}},
			{"admin", []string{"task", "stats", "ik"}},
			{"admin", []string{"explain", "ik"}},
			{"admin", []string{"work", "get", "ik", "--count", "2"}},
			{"ana", []string{"work", "get", "ik", "--count", "10"}}, // more than the pool: a criteria run
		} {
			r := loanq(t, dsn, c.user, append([]string{"-o", "json"}, c.args...)...)
			if r.code != 0 || !json.Valid([]byte(r.stdout)) {
				t.Errorf("%s %v with bad work rows: exit %d, valid JSON %v\n%s%s", c.user, c.args, r.code, json.Valid([]byte(r.stdout)), r.stdout, r.stderr)
			}
		}
		if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work WHERE task_id = (SELECT id FROM loanq_task WHERE name = 'ik') AND user_name IN ('admin', 'ana')"); n != 12 {
			t.Errorf("%d loans handed out beside the bad work rows, want 12", n)
		}
	})
}

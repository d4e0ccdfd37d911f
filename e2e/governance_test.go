package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/loanq/loanq/internal/testkit/testdb"
)

// Entitlements through the command line and the API (docs/governance.md):
// a user a task's allow list leaves out gets exit 2 with the fix from work
// get, 403 from the API, and does not see the task in /api/v1/tasks (what
// /work lists); group changes and --allow-clear take effect at once; task
// show and group list say who may.
func TestEntitlementsCLIAndAPI(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		_, _ = prepare(t, dsn, 20)
		mustOK(t, dsn, "admin", "task", "create", "open", "--where", "eligible = 1", "--order", "priority")
		mustOK(t, dsn, "admin", "task", "create", "big", "--where", "eligible = 1", "--order", "priority", "--allow", "@seniors")
		mustOK(t, dsn, "admin", "group", "add", "seniors", "carl")

		refused := func(user string) {
			t.Helper()
			r := loanq(t, dsn, user, "work", "get", "big")
			want := "not allowed to work task big; ask an admin: loanq task update big --allow " + user
			if r.code != 2 || !strings.Contains(r.stderr, want) {
				t.Errorf("%s's work get of big: exit %d, %q; want 2 and %q", user, r.code, r.stderr, want)
			}
		}
		refused("ana")
		if r := loanq(t, dsn, "ana", "work", "run", "big", "--until-empty", "--", "true"); r.code != 2 || !strings.Contains(r.stderr, "not allowed to work task big") {
			t.Errorf("ana's work run of big: exit %d, %q; want 2", r.code, r.stderr)
		}
		if got := decode(t, mustOK(t, dsn, "carl", "-o", "json", "work", "get", "big")); got.Assigned != 1 {
			t.Errorf("carl (in seniors): %+v", got)
		}
		mustOK(t, dsn, "admin", "group", "add", "seniors", "ana")
		if got := decode(t, mustOK(t, dsn, "ana", "-o", "json", "work", "get", "big")); got.Assigned != 1 {
			t.Errorf("ana once in seniors: %+v", got)
		}
		mustOK(t, dsn, "admin", "group", "remove", "seniors", "ana")
		refused("ana")

		var groups struct {
			Groups []struct {
				Group, User, Source string
			} `json:"groups"`
		}
		if err := json.Unmarshal([]byte(mustOK(t, dsn, "admin", "-o", "json", "group", "list").stdout), &groups); err != nil {
			t.Fatal(err)
		}
		if len(groups.Groups) != 1 || groups.Groups[0].Group != "seniors" || groups.Groups[0].User != "carl" || groups.Groups[0].Source != "admin" {
			t.Errorf("group list: %+v, want seniors: carl (admin)", groups.Groups)
		}
		if out := mustOK(t, dsn, "admin", "task", "show", "big").stdout; !strings.Contains(out, "allowed:      @seniors") {
			t.Errorf("task show big does not say who may work it:\n%s", out)
		}
		for _, bad := range [][]string{
			{"group", "add", "seniors"},
			{"group", "add", "bad group", "ana"},
			{"task", "update", "big", "--allow", "@no such"},
			{"task", "update", "big", "--not-worked-in", "nope"},
			{"task", "update", "big", "--not-worked-in", "big"},
		} {
			if r := loanq(t, dsn, "admin", bad...); r.code != 2 || !strings.Contains(r.stderr, "loanq: ") {
				t.Errorf("loanq %v: exit %d, want 2 with a message\n%s", bad, r.code, r.stderr)
			}
		}

		// The API: a processor's token.
		var tok struct {
			Token string `json:"token"`
		}
		if err := json.Unmarshal([]byte(mustOK(t, dsn, "admin", "-o", "json", "token", "create", "--user", "ana", "--role", "processor").stdout), &tok); err != nil {
			t.Fatal(err)
		}
		url := startServe(t, dsn, "--api", "--auth", "token").url
		call := func(method, path, body string) (int, string, map[string]any) {
			t.Helper()
			req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+tok.Token)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			raw, _ := io.ReadAll(res.Body)
			var doc map[string]any
			_ = json.Unmarshal(raw, &doc)
			return res.StatusCode, res.Header.Get("Content-Type"), doc
		}
		taskNames := func() []string {
			t.Helper()
			code, _, doc := call("GET", "/api/v1/tasks", "")
			if code != 200 {
				t.Fatalf("GET /api/v1/tasks: %d %v", code, doc)
			}
			var names []string
			for _, x := range doc["tasks"].([]any) {
				names = append(names, x.(map[string]any)["name"].(string))
			}
			return names
		}
		if got := taskNames(); !slices.Equal(got, []string{"open"}) {
			t.Errorf("ana's /api/v1/tasks (what /work lists): %v, want [open]", got)
		}
		code, ctype, doc := call("POST", "/api/v1/tasks/big/requests", `{"count": 1}`)
		if code != 403 || ctype != "application/problem+json" || !strings.Contains(fmt.Sprint(doc["detail"]), "not allowed to work task big") {
			t.Errorf("ana's API request in big: %d %s %v, want 403 problem+json", code, ctype, doc)
		}
		mustOK(t, dsn, "admin", "task", "update", "big", "--allow-clear")
		if got := taskNames(); !slices.Equal(got, []string{"big", "open"}) {
			t.Errorf("after --allow-clear ana's /api/v1/tasks: %v, want [big open]", got)
		}
		if code, _, doc := call("POST", "/api/v1/tasks/big/requests", `{"count": 1}`); code != 200 || doc["status"] != "assigned" {
			t.Errorf("after --allow-clear ana's API request: %d %v", code, doc)
		}
		if out := mustOK(t, dsn, "admin", "task", "show", "big").stdout; !strings.Contains(out, "allowed:      everyone") {
			t.Errorf("task show big after --allow-clear:\n%s", out)
		}
	})
}

// Four eyes on the command line (docs/governance.md): task show says the
// rule; a loan ana verified goes to someone else in the second look; a
// task named by a rule is not deleted; prune removes history, and with it
// what the rule reads: a pruned maker's loan may come back to them (the
// documented trade-off).
func TestFourEyesCLI(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, e := prepare(t, dsn, 3)
		mustOK(t, dsn, "admin", "task", "create", "verify", "--where", "eligible = 1", "--order", "priority")
		mustOK(t, dsn, "admin", "task", "create", "second-look", "--where", "eligible = 1", "--order", "priority", "--not-worked-in", "verify")
		if out := mustOK(t, dsn, "admin", "task", "show", "second-look").stdout; !strings.Contains(out, "four eyes:    never to a user who worked the loan in verify") {
			t.Errorf("task show does not say the rule:\n%s", out)
		}
		var show struct {
			Task struct {
				NotWorkedIn []string `json:"not_worked_in"`
				Allow       []string `json:"allow"`
			} `json:"task"`
		}
		if err := json.Unmarshal([]byte(mustOK(t, dsn, "admin", "-o", "json", "task", "show", "second-look").stdout), &show); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(show.Task.NotWorkedIn, []string{"verify"}) || show.Task.Allow == nil || len(show.Task.Allow) != 0 {
			t.Errorf("task show -o json: not_worked_in %v, allow %v", show.Task.NotWorkedIn, show.Task.Allow)
		}
		v := decode(t, mustOK(t, dsn, "ana", "-o", "json", "work", "get", "verify", "--count", "3"))
		for _, l := range v.Loans {
			mustOK(t, dsn, "ana", "disposition", "verify", fmt.Sprint(l), "complete")
		}
		if got := decode(t, mustOK(t, dsn, "ana", "-o", "json", "work", "get", "second-look")); got.Assigned != 0 || got.Status != "empty" {
			t.Errorf("ana, who verified every loan, got %+v in second-look; want empty", got)
		}
		if got := decode(t, mustOK(t, dsn, "bob", "-o", "json", "work", "get", "second-look")); !slices.Equal(got.Loans, []int64{1}) {
			t.Errorf("bob got %v in second-look, want [1]", got.Loans)
		}
		if r := loanq(t, dsn, "admin", "task", "delete", "verify"); r.code != 2 || !strings.Contains(r.stderr, "named by the four-eyes rule") {
			t.Errorf("deleting verify, which second-look's rule reads: exit %d, %q", r.code, r.stderr)
		}

		old := d.Dialect().NowMinusMillis("17280000000") // 200 days
		testdb.Exec(t, d, e.DB, "UPDATE loanq_work_request SET created_at = "+old+", served_at = "+old+" WHERE task_id = (SELECT id FROM loanq_task WHERE name = 'verify')")
		testdb.Exec(t, d, e.DB, "UPDATE loanq_work SET assigned_at = "+old+", disposed_at = "+old+" WHERE task_id = (SELECT id FROM loanq_task WHERE name = 'verify')")
		mustOK(t, dsn, "admin", "prune", "--task", "verify")
		if got := decode(t, mustOK(t, dsn, "ana", "-o", "json", "work", "get", "second-look")); !slices.Equal(got.Loans, []int64{2}) {
			t.Errorf("after the prune of verify's history ana got %v in second-look, want [2] (docs/governance.md: pruned history no longer blocks)", got.Loans)
		}
	})
}

// serve --auth proxy --proxy-groups-header: the groups a trusted proxy
// names become the user's memberships (source proxy), so a task that
// allows one of them is listed and served; once the header no longer
// names it, the membership is gone and the API answers 403.
func TestProxyGroupsHeader(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		_, _ = prepare(t, dsn, 10)
		mustOK(t, dsn, "admin", "task", "create", "big", "--where", "eligible = 1", "--order", "priority", "--allow", "@seniors")
		url := startServe(t, dsn, "--api", "--auth", "proxy", "--trusted-proxy", "127.0.0.1",
			"--groups-header", "X-Groups", "--proxy-groups-header", "X-Groups").url
		call := func(groups, method, path, body string) (int, map[string]any) {
			t.Helper()
			req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
			req.Header.Set("X-Forwarded-User", "ana")
			if groups != "" {
				req.Header.Set("X-Groups", groups)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			var doc map[string]any
			_ = json.NewDecoder(res.Body).Decode(&doc)
			return res.StatusCode, doc
		}
		if code, doc := call("staff, seniors", "POST", "/api/v1/tasks/big/requests", `{"count": 1}`); code != 200 || doc["status"] != "assigned" {
			t.Errorf("ana through the proxy, in seniors: %d %v", code, doc)
		}
		if out := mustOK(t, dsn, "admin", "group", "list").stdout; !strings.Contains(out, "seniors  ana   proxy") {
			t.Errorf("group list does not show ana in seniors from the proxy:\n%s", out)
		}
		if code, doc := call("staff", "POST", "/api/v1/tasks/big/requests", `{"count": 1}`); code != 403 {
			t.Errorf("ana through the proxy, no longer in seniors: %d %v, want 403", code, doc)
		}
		if out := mustOK(t, dsn, "admin", "group", "list").stdout; strings.Contains(out, "seniors") {
			t.Errorf("ana's proxy membership of seniors outlived the header:\n%s", out)
		}
	})
}

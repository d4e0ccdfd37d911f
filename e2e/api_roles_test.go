package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/loanq/loanq/internal/testkit/testdb"
)

// The roles of `loanq grants` cover the API. An admin account
// issues, lists and revokes tokens; a processor account may not issue one;
// `loanq serve --api` running under a serve account (a real process) serves
// a processor's token as that user, and refuses a revoked token.
func TestAPITokensUnderRoles(t *testing.T) {
	t.Parallel()
	for _, dialect := range []string{"postgres", "mysql"} {
		t.Run(dialect, func(t *testing.T) {
			owner := testdb.Fresh(t, dialect)
			d, db := testdb.Migrated(t, owner)
			testdb.CreateLoans(t, d, db, 20)
			mustOK(t, owner, "admin0", "task", "create", "skip-t", "--where", "eligible = 1", "--order", "priority DESC")
			acc := newAccounts(t, dialect, owner, d, db)
			adm := acc.create("admin", "adm", "")
			proc := acc.create("processor", "proc", "ana")
			srvAcct := acc.create("serve", "srv", "")

			var ana, old struct {
				ID    int64  `json:"id"`
				Token string `json:"token"`
			}
			if err := json.Unmarshal([]byte(runAs(t, adm, "", 0, "-o", "json", "token", "create", "--user", "ana", "--role", "processor").stdout), &ana); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(runAs(t, adm, "", 0, "-o", "json", "token", "create", "--user", "ana").stdout), &old); err != nil {
				t.Fatal(err)
			}
			runAs(t, adm, "", 0, "token", "revoke", fmt.Sprint(old.ID))
			if out := runAs(t, adm, "", 0, "token", "list").stdout; !strings.Contains(out, "revoked") || !strings.Contains(out, "active") {
				t.Fatalf("token list:\n%s", out)
			}
			if r := runAs(t, proc, "", 2, "token", "create", "--user", "ana"); !strings.Contains(r.stderr, "refused by the database") {
				t.Errorf("a processor issued a token: %q", r.stderr)
			}

			url := startServe(t, srvAcct, "--api", "--auth", "token").url
			call := func(token, method, path, body string) (int, map[string]any) {
				req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+token)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				var doc map[string]any
				if err := json.NewDecoder(res.Body).Decode(&doc); err != nil {
					t.Fatal(err)
				}
				return res.StatusCode, doc
			}
			code, doc := call(ana.Token, "POST", "/api/v1/tasks/skip-t/requests", `{"count": 2}`)
			if code != 200 || doc["user"] != "ana" || doc["status"] != "assigned" {
				t.Fatalf("get through the serve account: %d %v", code, doc)
			}
			loan := int64(doc["loans"].([]any)[0].(float64))
			if code, doc = call(ana.Token, "POST", fmt.Sprintf("/api/v1/tasks/skip-t/loans/%d/disposition", loan), `{"action": "complete"}`); code != 200 {
				t.Fatalf("disposition: %d %v", code, doc)
			}
			if code, doc = call(old.Token, "GET", "/api/v1/pipeline", ""); code != 401 {
				t.Fatalf("revoked token: %d %v", code, doc)
			}
			if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work WHERE user_name = 'ana' AND disposition = 'complete'"); n != 1 {
				t.Fatalf("%d completed loans of ana", n)
			}
		})
	}
}

// Bad input to `loanq token`: exit 2, one line saying what to fix, no token
// stored.
func TestTokenBadInput(t *testing.T) {
	t.Parallel()
	dsn := testdb.Fresh(t, "sqlite")
	d, db := testdb.Migrated(t, dsn)
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"token", "create"}, "--user"},
		{[]string{"token", "create", "--user", "ana", "--role", "admin"}, "--role"},
		{[]string{"token", "create", "--user", "ana", "--expires", "10s"}, "--expires"},
		{[]string{"token", "create", "--user", "ana", "--expires", "soon"}, "--expires"},
		{[]string{"token", "create", "--user", " ana"}, "white space"},
		{[]string{"token", "revoke"}, "ID"},
		{[]string{"token", "revoke", "abc"}, "token id"},
		{[]string{"token", "revoke", "7"}, "no active token 7"},
	} {
		r := loanq(t, dsn, "admin", c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.says) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line naming %q", c.args, r.code, r.stderr, c.says)
		}
	}
	if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_api_token"); n != 0 {
		t.Errorf("%d tokens stored by bad input", n)
	}
}

// token create and token revoke record who issued and who revoked a token as
// the database knows it (docs/security.md; the OS user was recorded before): the
// connection's account, and "ACCOUNT (as NAME)" when a trusted account acted
// as NAME (--user). SQLite has no accounts: the acting user.
func TestTokenIssuerIsTheAccount(t *testing.T) {
	t.Parallel()
	type info struct {
		CreatedBy string `json:"created_by"`
		RevokedBy string `json:"revoked_by"`
	}
	created := func(t *testing.T, r result) string {
		t.Helper()
		var tok struct {
			ID int64 `json:"id"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &tok); err != nil {
			t.Fatalf("token create: %v\n%s", err, r.stdout)
		}
		return fmt.Sprint(tok.ID)
	}
	byID := func(t *testing.T, r result) map[string]info {
		t.Helper()
		var doc struct {
			Tokens []struct {
				ID int64 `json:"id"`
				info
			} `json:"tokens"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
			t.Fatalf("token list: %v\n%s", err, r.stdout)
		}
		m := map[string]info{}
		for _, tok := range doc.Tokens {
			m[fmt.Sprint(tok.ID)] = tok.info
		}
		return m
	}
	want := func(t *testing.T, got map[string]info, id string, w info) {
		t.Helper()
		if got[id] != w {
			t.Errorf("token %s: created_by %q, revoked_by %q; want %q, %q", id, got[id].CreatedBy, got[id].RevokedBy, w.CreatedBy, w.RevokedBy)
		}
	}

	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		dsn := testdb.Fresh(t, "sqlite")
		testdb.Migrated(t, dsn)
		id := created(t, mustOK(t, dsn, "lead", "-o", "json", "token", "create", "--user", "ana"))
		mustOK(t, dsn, "chief", "token", "revoke", id)
		want(t, byID(t, mustOK(t, dsn, "x", "-o", "json", "token", "list")), id, info{"lead", "chief"})
	})
	for _, dialect := range []string{"postgres", "mysql"} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			owner := testdb.Fresh(t, dialect)
			d, db := testdb.Migrated(t, owner)
			testdb.CreateLoans(t, d, db, 1) // the roles' grants name the loan table
			acc := newAccounts(t, dialect, owner, d, db)
			adm := acc.create("admin", "adm", "")
			account := acc.name("adm")
			// No --user: the account alone, whatever the OS user is.
			plain := created(t, runAs(t, adm, "", 0, "-o", "json", "token", "create", "--user", "ana"))
			// The admin account is trusted: it may act as anyone, and says so.
			as := created(t, runAs(t, adm, "lead", 0, "-o", "json", "token", "create", "--user", "ana"))
			self := created(t, runAs(t, adm, account, 0, "-o", "json", "token", "create", "--user", "ana"))
			runAs(t, adm, "chief", 0, "token", "revoke", plain)
			runAs(t, adm, "", 0, "token", "revoke", self)
			got := byID(t, runAs(t, adm, "", 0, "-o", "json", "token", "list"))
			want(t, got, plain, info{account, account + " (as chief)"})
			want(t, got, as, info{account + " (as lead)", ""})
			want(t, got, self, info{account, account})
			// A processor account acts only as its own name: refused before
			// anything is written, naming the account.
			proc := acc.create("processor", "proc", "")
			if r := runAs(t, proc, "lead", 2, "token", "create", "--user", "ana"); !strings.Contains(r.stderr, acc.name("proc")) {
				t.Errorf("a processor account acting as lead: %s", r.stderr)
			}
		})
	}
}

package dispatch_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/testkit/testdb"
	"github.com/loanq/loanq/problem"
)

// An API token authenticates as its user and role until it is revoked or
// expires (database clock); only its SHA-256 is stored.
func TestAPITokenLifecycle(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 0)
		ctx := context.Background()
		ana, err := f.e.Admin().CreateToken(ctx, "ana", "processor", "admin", 0)
		if err != nil {
			t.Fatal(err)
		}
		sam, err := f.e.Admin().CreateToken(ctx, "sam", "Supervisor", "admin", 24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if ana.Token == sam.Token || !strings.HasPrefix(ana.Token, "lqt_") || len(ana.Token) < 40 {
			t.Fatalf("tokens %q %q", ana.Token, sam.Token)
		}
		// The token is not stored, its hash is.
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_api_token WHERE token_hash = ?", ana.Token); n != 0 {
			t.Fatal("the token itself is stored")
		}
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_api_token WHERE token_hash = ?", dispatch.HashToken(ana.Token)); n != 1 {
			t.Fatalf("hash rows %d", n)
		}
		p, err := f.e.Admin().Authenticate(ctx, ana.Token)
		if err != nil || p == nil || p.User != "ana" || p.Role != "processor" || p.Supervisor() {
			t.Fatalf("ana: %+v %v", p, err)
		}
		p, err = f.e.Admin().Authenticate(ctx, sam.Token)
		if err != nil || p == nil || p.User != "sam" || !p.Supervisor() {
			t.Fatalf("sam: %+v %v", p, err)
		}
		for _, bad := range []string{"", "lqt_", ana.Token + "x", strings.TrimPrefix(ana.Token, "lqt_"), dispatch.HashToken(ana.Token)} {
			if p, err := f.e.Admin().Authenticate(ctx, bad); err != nil || p != nil {
				t.Errorf("token %q: %+v %v", bad, p, err)
			}
		}
		list, err := f.e.Admin().ListTokens(ctx)
		if err != nil || len(list) != 2 || list[0].State != "active" || list[0].ExpiresS != nil ||
			list[1].ExpiresS == nil || *list[1].ExpiresS < 23*3600 || *list[1].ExpiresS > 24*3600 {
			t.Fatalf("list %+v %v", list, err)
		}

		if err := f.e.Admin().RevokeToken(ctx, ana.ID, "admin"); err != nil {
			t.Fatal(err)
		}
		if p, err := f.e.Admin().Authenticate(ctx, ana.Token); err != nil || p != nil {
			t.Fatalf("revoked token accepted: %+v %v", p, err)
		}
		if err := f.e.Admin().RevokeToken(ctx, ana.ID, "admin"); problem.KindOf(err) != problem.Usage {
			t.Fatalf("second revoke: %v", err)
		}
		if err := f.e.Admin().RevokeToken(ctx, 999, "admin"); problem.KindOf(err) != problem.Usage {
			t.Fatalf("unknown revoke: %v", err)
		}

		// Time passing: sam's token expires once its expiry is behind the
		// database clock.
		testdb.Exec(t, f.d, f.db, "UPDATE loanq_api_token SET expires_at = created_at WHERE id = ?", sam.ID)
		if p, err := f.e.Admin().Authenticate(ctx, sam.Token); err != nil || p != nil {
			t.Fatalf("expired token accepted: %+v %v", p, err)
		}
		list, err = f.e.Admin().ListTokens(ctx)
		if err != nil || list[0].State != "revoked" || list[0].RevokedBy != "admin" || list[1].State != "expired" || list[1].ExpiresS != nil {
			t.Fatalf("list after: %+v %v", list, err)
		}

		// Bad input changes nothing.
		for _, c := range []struct {
			user, role string
			exp        time.Duration
		}{
			{"", "processor", 0}, {" ana", "processor", 0}, {"ana", "admin", 0}, {"ana", "processor", time.Second},
		} {
			if _, err := f.e.Admin().CreateToken(ctx, c.user, c.role, "admin", c.exp); problem.KindOf(err) != problem.Usage {
				t.Errorf("%+v: %v", c, err)
			}
		}
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_api_token"); n != 2 {
			t.Fatalf("%d tokens", n)
		}
	})
}

// Issuer, who token create and revoke record: the database account (never
// the OS user, fallback), "ACCOUNT (as NAME)" when a trusted account acts as
// NAME; on SQLite, which has no accounts, the acting user.
func TestTokenIssuer(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 0)
		ctx := context.Background()
		long := strings.Repeat("u", dispatch.MaxUserChars)
		account := ""
		if id, err := f.e.Identity(ctx, ""); err == nil {
			account = id.Account
		}
		for _, c := range []struct{ requested, want string }{
			{"", "os-user"},
			{"lead", "lead"},
			{long, long},
		} {
			if account != "" {
				switch c.requested {
				case "":
					c.want = account
				case long:
					c.want = "" // "ACCOUNT (as uuu…)" is too long for created_by: bad input
				default:
					c.want = account + " (as " + c.requested + ")"
				}
			}
			by, err := f.e.Admin().Issuer(ctx, c.requested, "os-user")
			switch {
			case c.want == "" && problem.KindOf(err) != problem.Usage:
				t.Errorf("Issuer(%.10q…): %q, %v; want bad input", c.requested, by, err)
			case c.want != "" && (err != nil || by != c.want):
				t.Errorf("Issuer(%q): %q, %v; want %q", c.requested, by, err, c.want)
			}
		}
	})
}

package web

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/loanq/loanq/internal/testkit/testdb"
)

// The session cookie of a ?token= link expires: Max-Age and Expires say
// --session-ttl, and the server refuses the value itself once it is past
// its expiry, when it claims to live longer than the TTL, or when tampered.
func TestSessionCookieExpires(t *testing.T) {
	src := seeded(t, testdb.Fresh(t, "sqlite"))
	h, err := Handler(Config{Figures: src, Token: "tok", SessionTTL: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/?token=tok", nil)
	r.Host = "localhost:8080"
	h.ServeHTTP(rec, r)
	cookies := rec.Result().Cookies()
	if rec.Code != http.StatusSeeOther || len(cookies) != 1 {
		t.Fatalf("/?token=tok: %d %v", rec.Code, cookies)
	}
	c := cookies[0]
	if c.MaxAge != 7200 || time.Until(c.Expires) < 119*time.Minute || time.Until(c.Expires) > 121*time.Minute || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
		t.Fatalf("session cookie %+v: want Max-Age 7200, Expires in 2h, HttpOnly, SameSite=Strict", c)
	}
	status := func(value string) int {
		rec := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/api/dashboard", nil)
		r.Host = "localhost:8080"
		r.AddCookie(&http.Cookie{Name: dashboardCookie, Value: value})
		h.ServeHTTP(rec, r)
		return rec.Code
	}
	now := time.Now()
	auth := dashboardAuth{token: "tok", ttl: 2 * time.Hour}
	cases := map[string]int{
		c.Value: 200,
		auth.cookieValue(now.Add(time.Minute).Unix()):    200,
		auth.cookieValue(now.Add(-time.Second).Unix()):   401, // expired
		auth.cookieValue(now.Add(30 * time.Hour).Unix()): 401, // longer than the TTL in force
		tampered(c.Value): 401,
		"9999999999.00":   401,
		"garbage":         401,
	}
	other := dashboardAuth{token: "another", ttl: 2 * time.Hour}
	cases[other.cookieValue(now.Add(time.Hour).Unix())] = 401 // made with another token
	for v, want := range cases {
		if got := status(v); got != want {
			t.Errorf("cookie %q: %d, want %d", v, got, want)
		}
	}
}

// tampered changes the last character of a cookie value to another one (a
// fixed replacement would leave a value that already ends with it intact).
func tampered(v string) string {
	last := "0"
	if strings.HasSuffix(v, "0") {
		last = "1"
	}
	return v[:len(v)-1] + last
}

package web

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/loanq/loanq/dashboard"
	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// pageNode is one serve --api with the processor's page, as serve builds it,
// on its own connection pool (a node).
func pageNode(t *testing.T, dsn string, d drivers.Driver, proxy *ProxyAuth) string {
	t.Helper()
	_, pool := testdb.Open(t, dsn)
	e := dispatch.New(pool, d)
	h, err := Handler(Config{Figures: &dashboard.Source{DB: pool, Driver: d, Admin: e.Admin(), TTL: time.Second},
		Engine: e, Proxy: proxy, SessionTTL: time.Hour, Log: func(s string) { t.Log(s) }})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}

// browser is a cookie-carrying client of the page: what a browser sends.
type browser struct {
	t       *testing.T
	cookies map[string]*http.Cookie
	csrf    string
}

type pageAnswer struct {
	status int
	body   string
	header http.Header
	doc    map[string]any
}

// do sends method url+path; hdr adds headers ("Origin": "" sends none;
// without an Origin entry the request's own origin is sent). An answer of
// the API is checked against the OpenAPI document.
func (b *browser) do(base, method, path, body string, hdr map[string]string) pageAnswer {
	b.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		b.t.Fatal(err)
	}
	for _, c := range b.cookies {
		req.AddCookie(c)
	}
	if _, ok := hdr["Origin"]; !ok && method != "GET" {
		req.Header.Set("Origin", base)
	}
	if strings.HasPrefix(body, "{") {
		req.Header.Set("Content-Type", "application/json") // as work.js sends it
	}
	for k, v := range hdr {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if strings.HasPrefix(path, "/api/v1/") {
		var sent []byte
		if body != "" {
			sent = []byte(body)
		}
		checkSpec(b.t, req, sent, res, raw)
	}
	for _, c := range res.Cookies() {
		if c.MaxAge < 0 {
			delete(b.cookies, c.Name)
			continue
		}
		b.cookies[c.Name] = c
	}
	a := pageAnswer{status: res.StatusCode, body: string(raw), header: res.Header}
	_ = json.Unmarshal(raw, &a.doc)
	if m := regexp.MustCompile(`<meta name="loanq-csrf" content="([^"]+)">`).FindStringSubmatch(a.body); m != nil {
		b.csrf = m[1]
	}
	return a
}

// signIn opens /work and signs in with token; the browser then holds the
// session cookie and the page's CSRF token.
func (b *browser) signIn(base, token string) {
	b.t.Helper()
	if a := b.do(base, "GET", "/work", "", nil); a.status != 200 || !strings.Contains(a.body, `id="login"`) {
		b.t.Fatalf("GET /work without a session: %d, want the sign-in form:\n%s", a.status, a.body)
	}
	if a := b.do(base, "POST", "/work/login", fmt.Sprintf(`{"token": %q}`, token), map[string]string{csrfHeader: b.csrf}); a.status != 204 {
		b.t.Fatalf("sign-in: %d %s", a.status, a.body)
	}
	if a := b.do(base, "GET", "/work", "", nil); a.status != 200 || !strings.Contains(a.body, "Signed in as") {
		b.t.Fatalf("GET /work after sign-in: %d\n%s", a.status, a.body)
	}
}

func newBrowser(t *testing.T) *browser { return &browser{t: t, cookies: map[string]*http.Cookie{}} }

// The page's sign-in and session rules, on two nodes of one database: the
// session cookie is HttpOnly, SameSite=Strict and expiring, kept hashed in
// the database and accepted by the other node; every POST/DELETE needs the
// same Origin and the CSRF token; another user's request or loan is 403; a
// revoked token, an expired session and a sign-out end the session.
func TestWorkPageSessions(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := newAPIFixture(t, dsn, "")
		db := f.db
		n1, n2 := pageNode(t, dsn, f.d, nil), pageNode(t, dsn, f.d, nil)

		// The sign-in form's own CSRF (double submit) and Origin rules.
		ana := newBrowser(t)
		if a := ana.do(n1, "GET", "/work", "", nil); a.status != 200 || ana.cookies[loginCookie] == nil {
			t.Fatalf("GET /work: %d, cookies %v", a.status, ana.cookies)
		}
		// A wrong method on one of the page's routes: 405 with Allow.
		for _, c := range []struct{ method, path, allow string }{
			{"GET", "/work/login", "POST"},
			{"DELETE", "/work/logout", "POST"},
			{"POST", "/work/assets/work.js", "GET, HEAD"},
			{"POST", "/work", "GET, HEAD"},
		} {
			if a := ana.do(n1, c.method, c.path, "", nil); a.status != 405 || a.header.Get("Allow") != c.allow {
				t.Errorf("%s %s: %d, Allow %q; want 405, Allow %q", c.method, c.path, a.status, a.header.Get("Allow"), c.allow)
			}
		}
		if a := ana.do(n1, "GET", "/work/nope", "", nil); a.status != 404 {
			t.Errorf("GET /work/nope: %d, want 404", a.status)
		}
		login := fmt.Sprintf(`{"token": %q}`, f.tokens["ana"].Token)
		for name, hdr := range map[string]map[string]string{
			"no CSRF token":    {},
			"a wrong one":      {csrfHeader: "x" + ana.csrf},
			"a foreign Origin": {csrfHeader: ana.csrf, "Origin": "http://evil.example"},
			"no Origin":        {csrfHeader: ana.csrf, "Origin": ""},
		} {
			if a := ana.do(n1, "POST", "/work/login", login, hdr); a.status != 403 {
				t.Errorf("sign-in with %s: %d, want 403", name, a.status)
			}
		}
		if a := ana.do(n1, "POST", "/work/login", `{"token": "lqt_nonsense"}`, map[string]string{csrfHeader: ana.csrf}); a.status != 401 {
			t.Errorf("sign-in with an unknown token: %d %s", a.status, a.body)
		}
		ana.signIn(n1, f.tokens["ana"].Token)
		c := ana.cookies[sessionCookie]
		if c == nil || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.MaxAge <= 0 || c.MaxAge > 3600 || c.Path != "/" {
			t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, Max-Age 1h, Path /", c)
		}
		if n := testdb.Int(t, f.d, db, "SELECT COUNT(*) FROM loanq_session WHERE user_name = 'ana' AND session_hash = ?", dispatch.HashToken(c.Value)); n != 1 {
			t.Fatalf("%d sessions of ana stored by the hash of the cookie", n)
		}
		if n := testdb.Int(t, f.d, db, "SELECT COUNT(*) FROM loanq_session WHERE session_hash = ? OR csrf = ?", c.Value, c.Value); n != 0 {
			t.Fatalf("the session id itself is stored")
		}

		// The page's calls: reads with the cookie alone; changes need the
		// same Origin and the CSRF token; the other node accepts the session.
		csrf := map[string]string{csrfHeader: ana.csrf}
		if a := ana.do(n2, "GET", "/api/v1/pipeline", "", nil); a.status != 200 || a.doc["user"] != "ana" {
			t.Fatalf("pipeline on the other node: %d %s", a.status, a.body)
		}
		get := `{"count": 2, "wait_ms": 5000}`
		for name, hdr := range map[string]map[string]string{
			"no CSRF token":    {},
			"a wrong one":      {csrfHeader: "nope"},
			"a foreign Origin": {csrfHeader: ana.csrf, "Origin": "http://evil.example"},
			"no Origin":        {csrfHeader: ana.csrf, "Origin": ""},
		} {
			if a := ana.do(n1, "POST", "/api/v1/tasks/t/requests", get, hdr); a.status != 403 {
				t.Errorf("POST with the cookie and %s: %d, want 403", name, a.status)
			}
		}
		if n := testdb.Int(t, f.d, db, "SELECT COUNT(*) FROM loanq_work_request WHERE user_name = 'ana'"); n != 0 {
			t.Fatalf("%d requests logged by refused calls", n)
		}
		a := ana.do(n2, "POST", "/api/v1/tasks/t/requests", get, csrf)
		if a.status != 200 || a.doc["user"] != "ana" || len(loansOf(a.doc)) != 2 {
			t.Fatalf("get through the page's session: %d %s", a.status, a.body)
		}
		anaLoans, anaReq := loansOf(a.doc), int64(a.doc["request_id"].(float64))

		// bob, on the other node: ana's request and loans are not his.
		bob := newBrowser(t)
		bob.signIn(n2, f.tokens["bob"].Token)
		bcsrf := map[string]string{csrfHeader: bob.csrf}
		for _, x := range []struct{ method, path, body string }{
			{"GET", fmt.Sprintf("/api/v1/requests/%d", anaReq), ""},
			{"DELETE", fmt.Sprintf("/api/v1/requests/%d", anaReq), ""},
			{"POST", fmt.Sprintf("/api/v1/tasks/t/loans/%d/disposition", anaLoans[0]), `{"action": "complete"}`},
			{"GET", "/api/v1/work", ""},
		} {
			if a := bob.do(n2, x.method, x.path, x.body, bcsrf); a.status != 403 {
				t.Errorf("bob: %s %s: %d, want 403: %s", x.method, x.path, a.status, a.body)
			}
		}
		// bob's CSRF token is not ana's.
		if a := ana.do(n1, "POST", fmt.Sprintf("/api/v1/tasks/t/loans/%d/disposition", anaLoans[0]), `{"action": "complete"}`,
			map[string]string{csrfHeader: bob.csrf}); a.status != 403 {
			t.Errorf("ana's session with bob's CSRF token: %d", a.status)
		}
		if a := ana.do(n1, "POST", fmt.Sprintf("/api/v1/tasks/t/loans/%d/disposition", anaLoans[0]), `{"action": "complete"}`, csrf); a.status != 200 {
			t.Fatalf("ana completes her loan: %d %s", a.status, a.body)
		}
		if a := ana.do(n2, "GET", "/api/v1/history", "", nil); a.status != 200 || len(a.doc["history"].([]any)) != 1 ||
			a.doc["history"].([]any)[0].(map[string]any)["disposition"] != "complete" {
			t.Fatalf("history: %d %s", a.status, a.body)
		}

		// An expired session: 401 on the API, the sign-in form on /work.
		testdb.Exec(t, f.d, db, "UPDATE loanq_session SET expires_at = created_at WHERE user_name = 'bob'")
		if a := bob.do(n1, "GET", "/api/v1/pipeline", "", nil); a.status != 401 {
			t.Errorf("expired session: %d, want 401", a.status)
		}
		if a := bob.do(n2, "GET", "/work", "", nil); !strings.Contains(a.body, `id="login"`) {
			t.Errorf("/work with an expired session does not ask to sign in again")
		}
		bob.signIn(n2, f.tokens["bob"].Token)

		// Revoking ana's token ends her session on every node.
		if err := f.e.Admin().RevokeToken(context.Background(), f.tokens["ana"].ID, "admin"); err != nil {
			t.Fatal(err)
		}
		if a := ana.do(n1, "GET", "/api/v1/pipeline", "", nil); a.status != 401 {
			t.Errorf("session of a revoked token: %d, want 401", a.status)
		}

		// Sign-out: needs the CSRF token, then the session is gone everywhere.
		if a := bob.do(n1, "POST", "/work/logout", "", nil); a.status != 403 {
			t.Errorf("sign-out without the CSRF token: %d", a.status)
		}
		if a := bob.do(n1, "POST", "/work/logout", "", map[string]string{csrfHeader: bob.csrf}); a.status != 204 {
			t.Fatalf("sign-out: %d %s", a.status, a.body)
		}
		if n := testdb.Int(t, f.d, db, "SELECT COUNT(*) FROM loanq_session WHERE user_name = 'bob' AND expires_at > created_at"); n != 0 {
			t.Errorf("%d live sessions of bob after sign-out", n)
		}

		// The page, its script and style: no external assets.
		for _, p := range []string{"/work", "/work/assets/work.js", "/work/assets/work.css"} {
			a := newBrowser(t).do(n1, "GET", p, "", nil)
			if a.status != 200 || regexp.MustCompile(`(src|href)="(https?:)?//`).MatchString(a.body) || strings.Contains(a.body, "innerHTML") {
				t.Errorf("%s: %d, or it loads something from elsewhere or uses innerHTML", p, a.status)
			}
		}
		// The dashboard links to the page; a supervisor's page links back.
		if a := newBrowser(t).do(n1, "GET", "/", "", nil); a.status != 200 || !strings.Contains(a.body, `href="/work"`) {
			t.Errorf("the dashboard does not link to /work: %d", a.status)
		}
		sam := newBrowser(t)
		sam.signIn(n2, f.tokens["sam"].Token)
		if a := sam.do(n2, "GET", "/work", "", nil); !strings.Contains(a.body, `<a href="/">Dashboard</a>`) {
			t.Errorf("a supervisor's page does not link to the dashboard")
		}
		if a := newBrowser(t).do(n1, "GET", "/work/assets/work.html", "", nil); a.status != 404 {
			t.Errorf("the template is served as an asset: %d", a.status)
		}
	})
}

// --auth proxy: the user the trusted proxy names opens a session on the
// first visit of /work; the proxy naming someone else later ends it for
// that browser; an untrusted address gets no session.
func TestWorkPageProxy(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := newAPIFixture(t, dsn, "")
		proxy := func(cidr string) *ProxyAuth {
			_, n, err := net.ParseCIDR(cidr)
			if err != nil {
				t.Fatal(err)
			}
			return &ProxyAuth{Trusted: []*net.IPNet{n}, UserHeader: "X-Forwarded-User"}
		}
		trusted, untrusted := pageNode(t, dsn, f.d, proxy("127.0.0.0/8")), pageNode(t, dsn, f.d, proxy("10.0.0.0/8"))
		carl := newBrowser(t)
		as := map[string]string{"X-Forwarded-User": "carl"}
		if a := carl.do(trusted, "GET", "/work", "", as); a.status != 200 || !strings.Contains(a.body, "Signed in as <strong id=\"user\">carl</strong>") || carl.cookies[sessionCookie] == nil {
			t.Fatalf("/work through the proxy: %d\n%s", a.status, a.body)
		}
		as[csrfHeader] = carl.csrf
		if a := carl.do(trusted, "POST", "/api/v1/tasks/t/requests", `{"count": 1}`, as); a.status != 200 || a.doc["user"] != "carl" {
			t.Fatalf("carl's get: %d %s", a.status, a.body)
		}
		if a := carl.do(trusted, "POST", "/work/login", `{"token": "x"}`, as); a.status != 404 {
			t.Errorf("sign-in form under --auth proxy: %d", a.status)
		}
		if a := carl.do(trusted, "GET", "/api/v1/pipeline", "", map[string]string{"X-Forwarded-User": "dora"}); a.status != 401 {
			t.Errorf("carl's cookie with the proxy naming dora: %d, want 401", a.status)
		}
		stranger := newBrowser(t)
		if a := stranger.do(untrusted, "GET", "/work", "", map[string]string{"X-Forwarded-User": "carl"}); a.status != 401 || stranger.cookies[sessionCookie] != nil {
			t.Errorf("/work from an untrusted address: %d, cookie %v", a.status, stranger.cookies[sessionCookie])
		}
		var n sql.NullInt64
		if err := f.db.QueryRow("SELECT COUNT(*) FROM loanq_session WHERE token_id IS NULL").Scan(&n); err != nil || n.Int64 != 1 {
			t.Errorf("%v proxy sessions (want 1), %v", n, err)
		}
	})
}

// Markup in what the page shows renders as text. A user named with markup
// (a token's --user, or the proxy's header) is escaped in the HTML the
// server renders; a loan key holding markup (a task keyed by a VARCHAR
// column) reaches the page only in JSON (application/json, nosniff) as the
// exact string, and the page's script puts values on the page with
// textContent only: none of the ways to insert HTML appears in it. A task
// name cannot hold markup: task create refuses it.
// e2e TestWorkPageInBrowser checks in chromium that no element is injected.
func TestWorkPageEscapesMarkup(t *testing.T) {
	const markupUser = `<img src=x onerror=alert(1)>`
	const markupKey = `<img src=x onerror=alert(2)>`
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := newAPIFixture(t, dsn, "")
		ctx := context.Background()
		testdb.Exec(t, f.d, f.db, "CREATE TABLE markup_loans (ref VARCHAR(200) NOT NULL PRIMARY KEY, prio INTEGER NOT NULL)")
		testdb.Exec(t, f.d, f.db, "INSERT INTO markup_loans (ref, prio) VALUES (?, 1)", markupKey)
		if _, _, err := f.e.Admin().CreateTask(ctx, dispatch.TaskSpec{Name: "markup", Source: "markup_loans", Key: "ref", Where: "prio = 1",
			Order: "prio", CreatedBy: "admin"}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := f.e.Admin().CreateTask(ctx, dispatch.TaskSpec{Name: `<img src=x onerror=alert(3)>`, Where: "eligible = 1", CreatedBy: "admin"}); err == nil {
			t.Errorf("a task named with markup was created")
		}
		tok, err := f.e.Admin().CreateToken(ctx, markupUser, "processor", "admin", 0)
		if err != nil {
			t.Fatal(err)
		}
		node := pageNode(t, dsn, f.d, nil)
		eve := newBrowser(t)
		eve.signIn(node, tok.Token)

		page := eve.do(node, "GET", "/work", "", nil)
		if !strings.Contains(page.body, `<strong id="user">&lt;img src=x onerror=alert(1)&gt;</strong>`) || strings.Contains(page.body, "<img") {
			t.Errorf("the page does not show the user name escaped:\n%s", page.body)
		}
		get := eve.do(node, "POST", "/api/v1/tasks/markup/requests", `{"count": 1, "wait_ms": 5000}`, map[string]string{csrfHeader: eve.csrf})
		pipe := eve.do(node, "GET", "/api/v1/pipeline", "", nil)
		for _, a := range []pageAnswer{get, pipe} {
			if a.status != 200 || a.header.Get("Content-Type") != "application/json" || a.header.Get("X-Content-Type-Options") != "nosniff" {
				t.Fatalf("%d %s %q: want 200 application/json, nosniff", a.status, a.header.Get("Content-Type"), a.header.Get("X-Content-Type-Options"))
			}
		}
		if l, _ := get.doc["loans"].([]any); len(l) != 1 || l[0] != markupKey || get.doc["user"] != markupUser {
			t.Errorf("the answer does not carry the key and user as they are: %s", get.body)
		}
		if w, _ := pipe.doc["work"].([]any); len(w) != 1 || w[0].(map[string]any)["loan_id"] != markupKey {
			t.Errorf("the pipeline does not carry the key as it is: %s", pipe.body)
		}

		js := newBrowser(t).do(node, "GET", "/work/assets/work.js", "", nil).body
		for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "createContextualFragment", "DOMParser"} {
			if strings.Contains(js, sink) {
				t.Errorf("work.js uses %s: values must reach the page by textContent", sink)
			}
		}
		if n := strings.Count(js, ".textContent ="); n < 10 {
			t.Errorf("work.js sets textContent %d times; expected every value to go through it", n)
		}
	})
}

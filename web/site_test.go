package web

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/loanq/loanq/internal/testkit/testdb"
)

// The Host check refuses a name that is not the server's (a DNS-rebinding
// page), answers IP addresses, localhost and --allowed-hosts on any port,
// and /healthz whatever the Host; a cross-origin request other than GET is
// refused before routing.
func TestHostAndOrigin(t *testing.T) {
	src := seeded(t, testdb.Fresh(t, "sqlite"))
	h, err := Handler(Config{Figures: src, AllowedHosts: []string{"Dash.Example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, path, host string, header ...string) int {
		r := httptest.NewRequest(method, path, nil)
		r.Host = host
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec.Code
	}
	for host, want := range map[string]int{
		"127.0.0.1:8080": 200, "localhost:8080": 200, "LOCALHOST": 200, "[::1]:8080": 200, "10.1.2.3:8080": 200,
		"dash.example.com": 200, "dash.example.com.:443": 200,
		"evil.example:8080": 403, "127.0.0.1.nip.io:8080": 403, "dash.example.com.evil.example": 403, "": 403,
	} {
		for _, path := range []string{"/", "/api/dashboard", "/metrics", "/tasks/alpha", "/static/app.js"} {
			if got := do("GET", path, host); got != want {
				t.Errorf("GET %s with Host %q: %d, want %d", path, host, got, want)
			}
		}
		if got := do("GET", "/healthz", host); got != 200 {
			t.Errorf("GET /healthz with Host %q: %d, want 200 (exempt)", host, got)
		}
	}
	if got := do("POST", "/api/dashboard", "127.0.0.1:8080", "Origin", "http://evil.example"); got != 403 {
		t.Errorf("POST from another origin: %d, want 403", got)
	}
	if got := do("POST", "/api/dashboard", "127.0.0.1:8080", "Origin", "null"); got != 403 {
		t.Errorf("POST from an opaque origin: %d, want 403", got)
	}
	if got := do("POST", "/api/dashboard", "127.0.0.1:8080", "Sec-Fetch-Site", "cross-site"); got != 403 {
		t.Errorf("POST marked cross-site: %d, want 403", got)
	}
	if got := do("POST", "/api/dashboard", "127.0.0.1:8080", "Origin", "http://127.0.0.1:8080"); got != http.StatusMethodNotAllowed {
		t.Errorf("POST from the same origin: %d, want 405 (past the origin check, no such route)", got)
	}
}

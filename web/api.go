package web

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/jsondoc"
	"github.com/loanq/loanq/problem"
)

// The JSON API of `loanq serve --api` (docs/api.md): processors without
// database accounts use loanq over HTTP; the serve process's account (the
// serve role of `loanq grants`) does the work, acting as the user the
// caller authenticates as (auth.go). Every answer is the document the
// matching command prints with -o json (package jsondoc); every error is
// application/problem+json (problem.go).
//
// Adding an endpoint: a route in routes (its method, path, who may call
// it), its handler in the api_*.go file of its kind, the path in
// openapi.json (TestAPIOpenAPIMatchesRoutes holds the two together), and
// docs/api.md.

//go:embed openapi.json
var openAPIDoc []byte

// DefaultAPIConns is the database connections serve --api opens unless
// --max-conns says otherwise: API callers wait for their requests, and a
// row-lock waiter holds a connection while it queues on the task row
// (dispatch/wake.go), so the dashboard's 4 would make callers queue in the
// pool behind each other.
const DefaultAPIConns = 16

const (
	// apiDefaultWait and apiMaxWait bound how long one call waits for its
	// request to be served before answering 202 (pending; ask again).
	apiDefaultWait = 10 * time.Second
	apiMaxWait     = 60 * time.Second
	apiMaxBody     = 64 << 10
	// apiMaxBatchBody bounds the body of POST …/dispositions: 1000 keys of
	// up to 200 characters (4 bytes each in UTF-8) and a note.
	apiMaxBatchBody = 1 << 20
)

// api serves /api/v1/, and the sessions of the processor's page (/work).
type api struct {
	e *dispatch.Engine
	// admin is the engine's admin surface: sessions, tokens, the
	// supervisor's reads, the proxy's groups.
	admin *dispatch.Admin
	log   func(string)
	// proxy, when set, is --auth proxy: the caller is the user a trusted
	// reverse proxy names in a header; nil is --auth token.
	proxy *ProxyAuth
	// sessionTTL is how long a session of the processor's page lasts.
	sessionTTL time.Duration
	// methods are the routes' methods by path, for a 405's Allow.
	methods *methodSet
}

// apiRoute is one endpoint; supervisor: only supervisors may call it;
// public: anyone may, unauthenticated.
type apiRoute struct {
	method, path string
	supervisor   bool
	public       bool
	h            func(w http.ResponseWriter, r *http.Request, p *dispatch.Principal)
}

// routes are the API's endpoints, each authenticated by authed (auth.go).
func (a *api) routes() []apiRoute {
	return []apiRoute{
		{method: "GET", path: "/api/v1/openapi.json", public: true, h: a.openapi},
		{method: "GET", path: "/api/v1/tasks", h: a.tasks},
		{method: "POST", path: "/api/v1/tasks/{task}/requests", h: a.get},
		{method: "GET", path: "/api/v1/requests/{id}", h: a.status},
		{method: "DELETE", path: "/api/v1/requests/{id}", h: a.cancel},
		{method: "POST", path: "/api/v1/tasks/{task}/loans/{loan}/disposition", h: a.dispose},
		{method: "POST", path: "/api/v1/tasks/{task}/dispositions", h: a.disposeMany},
		{method: "GET", path: "/api/v1/pipeline", h: a.pipeline},
		{method: "POST", path: "/api/v1/next", h: a.next},
		{method: "GET", path: "/api/v1/history", h: a.history},
		{method: "GET", path: "/api/v1/work", supervisor: true, h: a.work},
		{method: "POST", path: "/api/v1/tasks/{task}/reclaim", supervisor: true, h: a.reclaim},
	}
}

// notFound answers anything else under /api/v1/: a path of the API with
// another method is 405 with Allow (RFC 9110, section 15.5.6), any other
// path 404.
func (a *api) notFound(w http.ResponseWriter, r *http.Request) {
	if allow := a.methods.allow(r); allow != "" {
		w.Header().Set("Allow", allow)
		writeProblem(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s: this path answers %s", r.Method, r.URL.Path, allow))
		return
	}
	writeProblem(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s %s: GET /api/v1/openapi.json lists them", r.Method, r.URL.Path))
}

// methodSet says which methods a set of "METHOD /path" patterns has for a
// request's path. A catch-all ("/api/v1/", "/work/") takes every method
// the routes do not, so net/http's own 405 never answers there: the
// catch-all asks this instead.
type methodSet struct {
	mux     *http.ServeMux // the patterns alone
	methods []string       // every method of the patterns, sorted
}

func newMethodSet(patterns ...string) *methodSet {
	m := &methodSet{mux: http.NewServeMux()}
	seen := map[string]bool{}
	for _, p := range patterns {
		m.mux.HandleFunc(p, func(http.ResponseWriter, *http.Request) {})
		method, _, _ := strings.Cut(p, " ")
		if !seen[method] {
			seen[method] = true
			m.methods = append(m.methods, method)
			if method == http.MethodGet {
				// net/http serves HEAD with a GET pattern.
				seen[http.MethodHead] = true
				m.methods = append(m.methods, http.MethodHead)
			}
		}
	}
	sort.Strings(m.methods)
	return m
}

// allow is the Allow header for r's path: the methods a pattern has for
// it, sorted and comma-separated; "" when no pattern has the path.
func (m *methodSet) allow(r *http.Request) string {
	var ok []string
	for _, method := range m.methods {
		probe := r.Clone(r.Context())
		probe.Method = method
		if _, pattern := m.mux.Handler(probe); pattern != "" {
			ok = append(ok, method)
		}
	}
	return strings.Join(ok, ", ")
}

func (a *api) openapi(w http.ResponseWriter, r *http.Request, _ *dispatch.Principal) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPIDoc)
}

// decode reads a JSON body into v; unknown fields are bad input, so a typo
// is not silently ignored. An empty body leaves v as it is.
func decode(r *http.Request, v any) error {
	return decodeUpTo(r, v, apiMaxBody)
}

// decodeUpTo is decode with a body of at most limit bytes.
func decodeUpTo(r *http.Request, v any, limit int64) error {
	body := http.MaxBytesReader(nil, r.Body, limit)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return problem.Usagef("invalid JSON body: %v", err)
	}
	return nil
}

// writeDoc writes v as the CLI's -o json does (docs/json.md).
func (a *api) writeDoc(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	if err := jsondoc.Write(&b, v); err != nil {
		a.fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

package commands

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/flagvalue"
	"github.com/loanq/loanq/jsondoc"
	"github.com/loanq/loanq/problem"
)

// The JSON API of `loanq serve --api --auth token` (docs/api.md): processors
// without database accounts use loanq over HTTP; the serve process's account
// (the serve role of `loanq grants`) does the work, acting as the user its
// token names. Every answer is the document the matching command prints with
// -o json; every error is application/problem+json (RFC 9457).

//go:embed openapi.json
var openAPIDoc []byte

const (
	// apiDefaultWait and apiMaxWait bound how long one call waits for its
	// request to be served before answering 202 (pending; ask again).
	apiDefaultWait = 10 * time.Second
	apiMaxWait     = 60 * time.Second
	apiMaxBody     = 64 << 10
	// apiDefaultConns is serve --api's --max-conns unless given.
	apiDefaultConns = 16
)

// apiBackoff: the engine waits for the holder's commit (dispatch/wake.go),
// so these are only the bounds of one wait, kept short so that a call ends
// near its wait_ms.
var apiBackoff = []time.Duration{250 * time.Millisecond, time.Second, 2 * time.Second}

type apiServer struct {
	e   *dispatch.Engine
	log func(string)
	// proxy, when set, is --auth proxy: the caller is the user a trusted
	// reverse proxy names in a header; nil is --auth token.
	proxy *proxyAuth
}

// proxyAuth is `serve --api --auth proxy`: a reverse proxy in front of
// serve authenticates users and names them in a header. The header is
// honoured only from the --trusted-proxy addresses: from anywhere else the
// call is unauthenticated, whatever it says.
type proxyAuth struct {
	trusted         []*net.IPNet
	userHeader      string
	groupsHeader    string // "" : no groups, every user a processor
	supervisorGroup string
}

// principal reads the user a trusted proxy names; nil when the call did not
// come from a trusted address or names nobody.
func (pa *proxyAuth) principal(r *http.Request) (*dispatch.Principal, string) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	ip := net.ParseIP(host)
	if err != nil || ip == nil || !slices.ContainsFunc(pa.trusted, func(n *net.IPNet) bool { return n.Contains(ip) }) {
		return nil, "this call did not come from a --trusted-proxy address: send it through the proxy"
	}
	user := r.Header.Get(pa.userHeader)
	if user == "" || strings.TrimSpace(user) != user || len(r.Header.Values(pa.userHeader)) != 1 {
		return nil, "the proxy named no user (one " + pa.userHeader + " header)"
	}
	p := &dispatch.Principal{User: user, Role: dispatch.TokenProcessor}
	if pa.groupsHeader != "" {
		for _, v := range r.Header.Values(pa.groupsHeader) {
			for _, g := range strings.Split(v, ",") {
				if strings.TrimSpace(g) == pa.supervisorGroup {
					p.Role = dispatch.TokenSupervisor
				}
			}
		}
	}
	return p, ""
}

// apiRoute is one endpoint; supervisor: only supervisor tokens may call it.
type apiRoute struct {
	method, path string
	supervisor   bool
	public       bool
	h            func(w http.ResponseWriter, r *http.Request, p *dispatch.Principal)
}

func (a *apiServer) routes() []apiRoute {
	return []apiRoute{
		{method: "GET", path: "/api/v1/openapi.json", public: true, h: a.openapi},
		{method: "GET", path: "/api/v1/tasks", h: a.tasks},
		{method: "POST", path: "/api/v1/tasks/{task}/requests", h: a.get},
		{method: "GET", path: "/api/v1/requests/{id}", h: a.status},
		{method: "DELETE", path: "/api/v1/requests/{id}", h: a.cancel},
		{method: "POST", path: "/api/v1/tasks/{task}/loans/{loan}/disposition", h: a.dispose},
		{method: "GET", path: "/api/v1/pipeline", h: a.pipeline},
		{method: "GET", path: "/api/v1/history", h: a.history},
		{method: "GET", path: "/api/v1/work", supervisor: true, h: a.work},
		{method: "POST", path: "/api/v1/tasks/{task}/reclaim", supervisor: true, h: a.reclaim},
	}
}

// handler serves /api/v1/; anything else under it is a 404 problem.
func (a *apiServer) handler() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range a.routes() {
		mux.Handle(rt.method+" "+rt.path, a.authed(rt))
	}
	mux.HandleFunc("/api/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s %s: GET /api/v1/openapi.json lists them", r.Method, r.URL.Path))
	})
	return mux
}

// authed authenticates the call by its bearer token, on every call: a
// revoked or expired token is refused at once by every serve process.
func (a *apiServer) authed(rt apiRoute) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rt.public {
			rt.h(w, r, nil)
			return
		}
		var p *dispatch.Principal
		if c, err := r.Cookie(sessionCookie); err == nil && r.Header.Get("Authorization") == "" {
			// The processor's page (/work): its session cookie, and on
			// anything but GET the CSRF token and a same-origin Origin.
			s, err := a.e.SessionOf(r.Context(), c.Value)
			switch {
			case err != nil:
				a.fail(w, err)
				return
			case s == nil:
				writeProblem(w, http.StatusUnauthorized, "your session has expired or ended: sign in again at /work")
				return
			case a.proxy != nil && !a.proxy.sameUser(r, s.User):
				writeProblem(w, http.StatusUnauthorized, "the proxy names another user than this session's: sign in again at /work")
				return
			}
			if why := csrfRefused(r, s.CSRF); why != "" {
				writeProblem(w, http.StatusForbidden, why)
				return
			}
			p = &s.Principal
		} else if a.proxy != nil {
			var why string
			if p, why = a.proxy.principal(r); p == nil {
				writeProblem(w, http.StatusUnauthorized, why)
				return
			}
		} else {
			token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if ok && token != "" {
				var err error
				if p, err = a.e.Authenticate(r.Context(), strings.TrimSpace(token)); err != nil {
					a.fail(w, err)
					return
				}
			}
			if p == nil {
				w.Header().Set("WWW-Authenticate", `Bearer realm="loanq"`)
				writeProblem(w, http.StatusUnauthorized, "give an API token as `Authorization: Bearer TOKEN` (`loanq token create` issues one); a revoked or expired token is refused")
				return
			}
		}
		if rt.supervisor && !p.Supervisor() {
			writeProblem(w, http.StatusForbidden, fmt.Sprintf("%s %s is for supervisors; %s is a processor here", rt.method, rt.path, p.User))
			return
		}
		rt.h(w, r, p)
	})
}

// problemDoc is an RFC 9457 problem document.
type problemDoc struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
}

func writeProblem(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	var b bytes.Buffer
	_ = jsondoc.Write(&b, problemDoc{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail})
	_, _ = w.Write(b.Bytes())
}

// writeDoc writes v as the CLI's -o json does (docs/json.md).
func (a *apiServer) writeDoc(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	if err := jsondoc.Write(&b, v); err != nil {
		a.fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// fail maps an engine error to its problem: bad input 400 (an unknown task
// or request 404), anything else 503 with the cause logged, never shown:
// a driver's text names hosts, ports and accounts.
func (a *apiServer) fail(w http.ResponseWriter, err error) {
	switch problem.KindOf(err) {
	case problem.Usage:
		status := http.StatusBadRequest
		var pe *problem.Error
		// The engine's words for an id or name that is not there
		// (dispatch: Task, Request); an unknown disposition stays 400.
		if errors.As(err, &pe) && (strings.HasPrefix(pe.Msg, "unknown task ") || strings.HasPrefix(pe.Msg, "unknown request id ")) {
			status = http.StatusNotFound
		}
		writeProblem(w, status, err.Error())
	case problem.Busy:
		// Not a request's pending state (answer gives that 202): the task
		// is busy for this operation. Retrying later is right.
		w.Header().Set("Retry-After", "1")
		writeProblem(w, http.StatusServiceUnavailable, err.Error())
	default:
		if a.log != nil {
			a.log("api: " + err.Error())
		}
		writeProblem(w, http.StatusServiceUnavailable, "the database is unreachable or failed (loanq serve logs why); try again later")
	}
}

// decode reads a JSON body into v; unknown fields are bad input, so a typo
// is not silently ignored. An empty body leaves v as it is.
func decode(r *http.Request, v any) error {
	body := http.MaxBytesReader(nil, r.Body, apiMaxBody)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return problem.Usagef("invalid JSON body: %v", err)
	}
	return nil
}

// waitOf reads wait_ms: 0 answers at once, default apiDefaultWait, at most
// apiMaxWait.
func waitOf(ms *int64) (time.Duration, error) {
	if ms == nil {
		return apiDefaultWait, nil
	}
	if *ms < 0 || time.Duration(*ms)*time.Millisecond > apiMaxWait {
		return 0, problem.Usagef("invalid wait_ms %d: give 0 (answer at once) to %d", *ms, apiMaxWait.Milliseconds())
	}
	return time.Duration(*ms) * time.Millisecond, nil
}

// answer writes a request: 200 once it is answered, 202 with Retry-After
// while it is pending (ask again: GET /api/v1/requests/ID).
func (a *apiServer) answer(w http.ResponseWriter, req *dispatch.Request, err error) {
	if req != nil && req.Status == dispatch.StatusPending && (err == nil || problem.KindOf(err) == problem.Busy) {
		w.Header().Set("Retry-After", "1")
		w.Header().Set("Location", "/api/v1/requests/"+strconv.FormatInt(req.ID, 10))
		a.writeDoc(w, http.StatusAccepted, req)
		return
	}
	if err != nil {
		a.fail(w, err)
		return
	}
	a.writeDoc(w, http.StatusOK, req)
}

func options(wait time.Duration) dispatch.GetOptions {
	return dispatch.GetOptions{NoWait: wait == 0, Timeout: wait, Backoff: apiBackoff}
}

func (a *apiServer) get(w http.ResponseWriter, r *http.Request, p *dispatch.Principal) {
	var body struct {
		Count  *int   `json:"count"`
		WaitMs *int64 `json:"wait_ms"`
	}
	if err := decode(r, &body); err != nil {
		a.fail(w, err)
		return
	}
	count := 1
	if body.Count != nil {
		count = *body.Count
	}
	wait, err := waitOf(body.WaitMs)
	if err != nil {
		a.fail(w, err)
		return
	}
	// A client that goes away while its call waits (its connection closed:
	// the request's context ends) cancels its request, as Ctrl-C does for
	// `work get`: nobody would take the loans a later round gave it
	// (docs/algorithm.md, "Abandoned requests").
	opt := options(wait)
	opt.CancelAs = p.User
	req, err := a.e.Get(r.Context(), r.PathValue("task"), p.User, count, opt)
	a.answer(w, req, err)
}

// own reads request id and checks the caller may see it (its user, or a
// supervisor) or act on it (its user only).
func (a *apiServer) own(w http.ResponseWriter, r *http.Request, p *dispatch.Principal, act bool) (*dispatch.Request, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		a.fail(w, problem.Usagef("invalid request id %q: give the request_id a POST …/requests answered", r.PathValue("id")))
		return nil, false
	}
	req, err := a.e.Request(r.Context(), id)
	if err != nil {
		a.fail(w, err)
		return nil, false
	}
	if req.User != p.User && (act || !p.Supervisor()) {
		writeProblem(w, http.StatusForbidden, fmt.Sprintf("request %d is not yours (%s's token): only its user can %s it", id, p.User, map[bool]string{true: "cancel", false: "read"}[act]))
		return nil, false
	}
	return req, true
}

func (a *apiServer) status(w http.ResponseWriter, r *http.Request, p *dispatch.Principal) {
	var ms *int64
	if v := r.URL.Query().Get("wait_ms"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			a.fail(w, problem.Usagef("invalid wait_ms %q: give milliseconds, 0 to %d", v, apiMaxWait.Milliseconds()))
			return
		}
		ms = &n
	} else {
		zero := int64(0) // a plain GET looks once
		ms = &zero
	}
	wait, err := waitOf(ms)
	if err != nil {
		a.fail(w, err)
		return
	}
	req, ok := a.own(w, r, p, false)
	if !ok {
		return
	}
	// The requester's look is a sign of life on its request, and a client
	// of the requester that goes away while it waits cancels it (as for
	// POST); a supervisor's look (CancelAs someone else) does neither.
	opt := options(wait)
	opt.CancelAs = p.User
	req, err = a.e.Status(r.Context(), req.ID, wait > 0, opt)
	a.answer(w, req, err)
}

func (a *apiServer) cancel(w http.ResponseWriter, r *http.Request, p *dispatch.Principal) {
	req, ok := a.own(w, r, p, true)
	if !ok {
		return
	}
	req, err := a.e.Cancel(r.Context(), req.ID, p.User)
	if err != nil {
		a.fail(w, err)
		return
	}
	if req.Notice != "" {
		// What the CLI says on stderr: why the request was not cancelled.
		w.Header().Set("Loanq-Notice", req.Notice)
	}
	a.writeDoc(w, http.StatusOK, req)
}

func (a *apiServer) dispose(w http.ResponseWriter, r *http.Request, p *dispatch.Principal) {
	var body struct {
		Action string  `json:"action"`
		After  *string `json:"after"`
	}
	if err := decode(r, &body); err != nil {
		a.fail(w, err)
		return
	}
	action, err := dispatch.ParseAction(body.Action)
	if err != nil {
		a.fail(w, err)
		return
	}
	var after time.Duration
	if body.After != nil {
		if after, err = dispatch.ParseReturnAfter(*body.After); err != nil {
			a.fail(w, err)
			return
		}
	}
	if err := dispatch.CheckReturnTime(action, body.After != nil, `"after"`); err != nil {
		a.fail(w, err)
		return
	}
	// Someone else's loan is 403, not 400, and the API does not say whose
	// it is: the caller may not learn who holds another's loan.
	d, err := a.e.Dispose(r.Context(), r.PathValue("task"), r.PathValue("loan"), p.User, action, after, body.After != nil)
	var na *dispatch.NotAssigneeError
	if errors.As(err, &na) {
		writeProblem(w, http.StatusForbidden, fmt.Sprintf("loan %s in task %s is not yours: it is assigned to someone else", na.Loan, na.Task))
		return
	}
	if err != nil {
		a.fail(w, err)
		return
	}
	a.writeDoc(w, http.StatusOK, d)
}

func (a *apiServer) pipeline(w http.ResponseWriter, r *http.Request, p *dispatch.Principal) {
	items, err := a.e.Pipeline(r.Context(), p.User, r.URL.Query().Get("task"))
	if err != nil {
		a.fail(w, err)
		return
	}
	a.writeDoc(w, http.StatusOK, map[string]any{"user": p.User, "work": items})
}

// history is the page's "today": the caller's dispositions since midnight
// (this server's time zone).
func (a *apiServer) history(w http.ResponseWriter, r *http.Request, p *dispatch.Principal) {
	now := time.Now()
	midnight := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, now.Location())
	items, err := a.e.History(r.Context(), p.User, now.Sub(midnight))
	if err != nil {
		a.fail(w, err)
		return
	}
	a.writeDoc(w, http.StatusOK, map[string]any{"user": p.User, "history": items})
}

func (a *apiServer) tasks(w http.ResponseWriter, r *http.Request, p *dispatch.Principal) {
	ts, err := a.e.Tasks(r.Context())
	if err != nil {
		a.fail(w, err)
		return
	}
	list := []map[string]any{}
	for _, t := range ts {
		list = append(list, jsondoc.Task(t))
	}
	a.writeDoc(w, http.StatusOK, map[string]any{"tasks": list})
}

func (a *apiServer) work(w http.ResponseWriter, r *http.Request, p *dispatch.Principal) {
	q := r.URL.Query()
	f := dispatch.WorkFilter{Task: q.Get("task"), User: q.Get("user")}
	if v := q.Get("older_than"); v != "" {
		d, err := flagvalue.Duration("older_than", v)
		if err != nil || d < 0 {
			a.fail(w, problem.Usagef("invalid older_than %q: give 0s or a positive duration such as 4h", v))
			return
		}
		f.OlderThan = d
	}
	items, err := a.e.WorkList(r.Context(), f)
	if err != nil {
		a.fail(w, err)
		return
	}
	a.writeDoc(w, http.StatusOK, map[string]any{"work": items})
}

func (a *apiServer) reclaim(w http.ResponseWriter, r *http.Request, p *dispatch.Principal) {
	var body struct {
		Of        string `json:"of"`
		OlderThan string `json:"older_than"`
		DryRun    bool   `json:"dry_run"`
	}
	if err := decode(r, &body); err != nil {
		a.fail(w, err)
		return
	}
	var older time.Duration
	if body.OlderThan != "" {
		d, err := flagvalue.Duration("older_than", body.OlderThan)
		if err != nil || d < 0 {
			a.fail(w, problem.Usagef("invalid older_than %q: give 0s or a positive duration such as 4h", body.OlderThan))
			return
		}
		older = d
	}
	task := r.PathValue("task")
	items, err := a.e.Reclaim(r.Context(), task, p.User, body.Of, older, body.DryRun)
	if err != nil {
		a.fail(w, err)
		return
	}
	a.writeDoc(w, http.StatusOK, jsondoc.Reclaim(task, p.User, body.DryRun, items))
}

func (a *apiServer) openapi(w http.ResponseWriter, r *http.Request, _ *dispatch.Principal) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPIDoc)
}

// parseProxyAuth reads --trusted-proxy, --user-header, --groups-header and
// --supervisor-group for --auth proxy.
func parseProxyAuth(cidrs []string, userHeader, groupsHeader, supervisorGroup string) (*proxyAuth, error) {
	pa := &proxyAuth{userHeader: http.CanonicalHeaderKey(strings.TrimSpace(userHeader)),
		groupsHeader: http.CanonicalHeaderKey(strings.TrimSpace(groupsHeader)), supervisorGroup: strings.TrimSpace(supervisorGroup)}
	for _, c := range cidrs {
		for _, part := range strings.Split(c, ",") {
			if part = strings.TrimSpace(part); part == "" {
				continue
			}
			if !strings.Contains(part, "/") {
				if ip := net.ParseIP(part); ip != nil && ip.To4() != nil {
					part += "/32"
				} else {
					part += "/128"
				}
			}
			_, n, err := net.ParseCIDR(part)
			if err != nil {
				return nil, problem.Usagef("invalid --trusted-proxy %q: give the proxy's address or network, such as 10.0.0.5 or 10.0.0.0/24", part)
			}
			pa.trusted = append(pa.trusted, n)
		}
	}
	switch {
	case len(pa.trusted) == 0:
		return nil, problem.Usagef("--auth proxy needs --trusted-proxy CIDR: the addresses whose user header is believed (the reverse proxy's)")
	case pa.userHeader == "":
		return nil, problem.Usagef("--user-header is empty: name the header the proxy puts the user in, such as X-Forwarded-User")
	case pa.groupsHeader != "" && pa.supervisorGroup == "":
		return nil, problem.Usagef("--supervisor-group is empty: name the group whose members are supervisors")
	}
	return pa, nil
}

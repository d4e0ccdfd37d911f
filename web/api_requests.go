package web

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/problem"
)

// Asking for work and following the request: POST …/requests,
// GET and DELETE /api/v1/requests/{id}.

// apiBackoff: the engine waits for the holder's commit (dispatch/wake.go),
// so these are only the bounds of one wait, kept short so that a call ends
// near its wait_ms.
var apiBackoff = []time.Duration{250 * time.Millisecond, time.Second, 2 * time.Second}

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
func (a *api) answer(w http.ResponseWriter, req *dispatch.Request, err error) {
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

// askBody is what a call asking for work sends (POST …/requests, POST
// /api/v1/next): how many loans (default 1) and how long to wait.
type askBody struct {
	Count  *int   `json:"count"`
	WaitMs *int64 `json:"wait_ms"`
}

// parse is the count and the wait asked for; a wait out of bounds is bad
// input (waitOf), a count is checked by the engine.
func (b askBody) parse() (int, time.Duration, error) {
	count := 1
	if b.Count != nil {
		count = *b.Count
	}
	wait, err := waitOf(b.WaitMs)
	return count, wait, err
}

func (a *api) get(w http.ResponseWriter, r *http.Request, p *dispatch.Principal) {
	var body askBody
	if err := decode(r, &body); err != nil {
		a.fail(w, err)
		return
	}
	count, wait, err := body.parse()
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
func (a *api) own(w http.ResponseWriter, r *http.Request, p *dispatch.Principal, act bool) (*dispatch.Request, bool) {
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

func (a *api) status(w http.ResponseWriter, r *http.Request, p *dispatch.Principal) {
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

func (a *api) cancel(w http.ResponseWriter, r *http.Request, p *dispatch.Principal) {
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

package web

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/loankey"
)

// The caller's loans: dispose of one, the pipeline, today's history.

// dispositionBody is what a disposition call sends besides its loans
// (POST …/loans/{loan}/disposition, POST …/dispositions).
type dispositionBody struct {
	Action string  `json:"action"`
	After  *string `json:"after"`
	Reason string  `json:"reason"` // one of the task's codes (docs/reasons.md)
	Note   string  `json:"note"`   // at most dispatch.MaxNote characters
}

// parse checks the action, its return time and the reason and note, in
// the API's words; the task's own rules are the engine's.
func (b dispositionBody) parse() (action string, after time.Duration, note dispatch.DispositionNote, err error) {
	if action, err = dispatch.ParseAction(b.Action); err != nil {
		return "", 0, note, err
	}
	if b.After != nil {
		if after, err = dispatch.ParseReturnAfter(*b.After); err != nil {
			return "", 0, note, err
		}
	}
	if err = dispatch.CheckReturnTime(action, b.After != nil, `"after"`); err != nil {
		return "", 0, note, err
	}
	if err = dispatch.CheckReasonAndNote(b.Reason, b.Note); err != nil {
		return "", 0, note, err
	}
	return action, after, dispatch.DispositionNote{Reason: b.Reason, Note: b.Note}, nil
}

func (a *api) dispose(w http.ResponseWriter, r *http.Request, p *dispatch.Principal) {
	var body dispositionBody
	if err := decode(r, &body); err != nil {
		a.fail(w, err)
		return
	}
	action, after, note, err := body.parse()
	if err != nil {
		a.fail(w, err)
		return
	}
	// Someone else's loan is 403, not 400, and the API does not say whose
	// it is: the caller may not learn who holds another's loan.
	d, err := a.e.DisposeNoted(r.Context(), r.PathValue("task"), r.PathValue("loan"), p.User, action, after, body.After != nil, note)
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

// disposeMany disposes of several loans of a task in one call, all or
// nothing (dispatch.DisposeMany): the body of dispose with "loans". A loan
// of the list that is someone else's makes it 403, as for one loan, and
// the answer does not say whose.
func (a *api) disposeMany(w http.ResponseWriter, r *http.Request, p *dispatch.Principal) {
	var body struct {
		Loans []loankey.Key `json:"loans"` // numbers or strings, as the task's keys are
		dispositionBody
	}
	if err := decodeUpTo(r, &body, apiMaxBatchBody); err != nil {
		a.fail(w, err)
		return
	}
	action, after, note, err := body.parse()
	if err != nil {
		a.fail(w, err)
		return
	}
	loans := make([]string, len(body.Loans))
	for i, k := range body.Loans {
		loans[i] = k.Text
	}
	d, err := a.e.DisposeMany(r.Context(), r.PathValue("task"), loans, p.User, action, after, body.After != nil, note)
	var nd *dispatch.NotDisposedError
	if errors.As(err, &nd) && nd.Others() {
		writeProblem(w, http.StatusForbidden, nd.APIText())
		return
	}
	if err != nil {
		a.fail(w, err)
		return
	}
	a.writeDoc(w, http.StatusOK, d)
}

func (a *api) pipeline(w http.ResponseWriter, r *http.Request, p *dispatch.Principal) {
	items, err := a.e.Pipeline(r.Context(), p.User, r.URL.Query().Get("task"))
	if err != nil {
		a.fail(w, err)
		return
	}
	a.writeDoc(w, http.StatusOK, map[string]any{"user": p.User, "work": items})
}

// history is the page's "today": the caller's dispositions since midnight
// (this server's time zone).
func (a *api) history(w http.ResponseWriter, r *http.Request, p *dispatch.Principal) {
	now := time.Now()
	midnight := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, now.Location())
	items, err := a.e.History(r.Context(), p.User, now.Sub(midnight))
	if err != nil {
		a.fail(w, err)
		return
	}
	a.writeDoc(w, http.StatusOK, map[string]any{"user": p.User, "history": items})
}

package web

import (
	"bytes"
	"errors"
	"net/http"
	"strings"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/jsondoc"
	"github.com/loanq/loanq/problem"
)

// Every error of /api/v1/, of the sign-in and sign-out of the processor's
// page, and of the Host and Origin checks under /api/v1/ is an RFC 9457
// problem document, written here: writeProblem for a status and a detail,
// (*api).fail for an error of the engine.

// problemDoc is an RFC 9457 problem document.
type problemDoc struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
}

// writeProblem answers status with detail as an application/problem+json
// document.
func writeProblem(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	var b bytes.Buffer
	_ = jsondoc.Write(&b, problemDoc{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail})
	_, _ = w.Write(b.Bytes())
}

// cliAdvice is advice of the engine's errors that names a command, and
// what the API says instead, for errors that carry no API text of their
// own (problem.Error.API).
var cliAdvice = strings.NewReplacer(
	"`loanq task list` shows the tasks", "GET /api/v1/tasks lists the tasks",
)

// apiWords is err as the API says it: the request's fields and the
// endpoints, not the command line's flags and commands.
func apiWords(err error) string {
	return cliAdvice.Replace(problem.APIText(err))
}

// fail maps an engine error to its problem: bad input 400 (an unknown task
// or request 404, a task the caller may not work 403), busy 503 with Retry-After, anything else 503 with the
// cause logged, never shown: a driver's text names hosts, ports and
// accounts.
func (a *api) fail(w http.ResponseWriter, err error) {
	switch problem.KindOf(err) {
	case problem.Usage:
		status := http.StatusBadRequest
		var pe *problem.Error
		// The engine's words for an id or name that is not there
		// (dispatch: Task, Request); an unknown disposition stays 400.
		if errors.As(err, &pe) && (strings.HasPrefix(pe.Msg, "unknown task ") || strings.HasPrefix(pe.Msg, "unknown request id ")) {
			status = http.StatusNotFound
		}
		if dispatch.IsNotAllowed(err) { // the task's allow list leaves the caller out (docs/governance.md)
			status = http.StatusForbidden
		}
		writeProblem(w, status, apiWords(err))
	case problem.Busy:
		// Not a request's pending state (answer gives that 202): the task
		// is busy for this operation. Retrying later is right.
		w.Header().Set("Retry-After", "1")
		writeProblem(w, http.StatusServiceUnavailable, apiWords(err))
	default:
		if a.log != nil {
			a.log("api: " + err.Error())
		}
		writeProblem(w, http.StatusServiceUnavailable, "the database is unreachable or failed (loanq serve logs why); try again later")
	}
}

package web

import (
	"bytes"
	"net/http"

	"github.com/loanq/loanq/jsondoc"
)

// problemDoc is an RFC 9457 problem document: every error of /api/v1/ and
// of the processor's page's calls (/work/login, /work/logout) is one.
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

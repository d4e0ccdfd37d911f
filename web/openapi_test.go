package web

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/loanq/loanq/internal/testkit/apispec"
)

// apiSpec is web/openapi.json, loaded once: every answer the tests
// receive is checked against it (internal/testkit/apispec).
var apiSpec = sync.OnceValues(func() (*apispec.Doc, error) { return apispec.Load(openAPIDoc) })

// checkSpec fails the test when a call is not one the OpenAPI document
// allows: the request req with its body reqBody (nil: not checked), and the
// answer res with its body (apispec.CheckCall, with kin-openapi).
func checkSpec(t *testing.T, req *http.Request, reqBody []byte, res *http.Response, body []byte) {
	t.Helper()
	doc, err := apiSpec()
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.CheckCall(req, reqBody, res.StatusCode, res.Header, body); err != nil {
		t.Errorf("against web/openapi.json: %v", err)
	}
}

// The document served is valid by kin-openapi's strictest checks
// (apispec.Load: examples and defaults against their schemas, unknown
// formats refused), and a generated client can type every value of it:
// every list item and object has properties, every required name is among
// them (Redocly's no-required-schema-properties-undefined), every array
// has items (apispec.Lint).
func TestAPIOpenAPIDocumentIsValid(t *testing.T) {
	doc, err := apiSpec()
	if err != nil {
		t.Fatal(err)
	}
	if problems := doc.Lint(); len(problems) > 0 {
		t.Errorf("web/openapi.json:\n%s", strings.Join(problems, "\n"))
	}
	// What every answer may carry is declared: a wrong method's 405 with
	// Allow on every operation, a 401's WWW-Authenticate on every one that
	// needs a caller, Retry-After on every 503.
	for _, rt := range (&api{}).routes() {
		op := doc.T.Paths.Find(rt.path).GetOperation(rt.method)
		if op == nil {
			continue // TestAPIOpenAPIMatchesRoutes says so
		}
		for code, header := range map[int]string{405: "Allow", 401: "WWW-Authenticate", 503: "Retry-After"} {
			if code == 401 && rt.public || code == 503 && rt.public {
				continue
			}
			r := op.Responses.Status(code)
			if r == nil || r.Value.Headers[header] == nil {
				t.Errorf("%s %s: its %d declares no %s", rt.method, rt.path, code, header)
			}
		}
	}
}

// The OpenAPI document and the handlers agree: every route is in the
// document and every path and method of the document is a route; every
// operation says its answers; the document is the one served.
func TestAPIOpenAPIMatchesRoutes(t *testing.T) {
	var doc struct {
		OpenAPI string                               `json:"openapi"`
		Paths   map[string]map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	var inDoc, inCode []string
	for p, ops := range doc.Paths {
		for m, op := range ops {
			inDoc = append(inDoc, strings.ToUpper(m)+" "+p)
			if _, ok := op["responses"].(map[string]any); !ok {
				t.Errorf("%s %s: no responses", m, p)
			}
		}
	}
	for _, rt := range (&api{}).routes() {
		inCode = append(inCode, rt.method+" "+rt.path)
		op := doc.Paths[rt.path][strings.ToLower(rt.method)]
		if op == nil {
			continue
		}
		resp := op["responses"].(map[string]any)
		_, has403 := resp["403"]
		if rt.supervisor && !has403 {
			t.Errorf("%s %s is for supervisors but documents no 403", rt.method, rt.path)
		}
		if _, has401 := resp["401"]; !rt.public && !has401 {
			t.Errorf("%s %s documents no 401", rt.method, rt.path)
		}
	}
	sort.Strings(inDoc)
	sort.Strings(inCode)
	if strings.Join(inDoc, "\n") != strings.Join(inCode, "\n") {
		t.Fatalf("document:\n%s\nhandlers:\n%s", strings.Join(inDoc, "\n"), strings.Join(inCode, "\n"))
	}
}

// Every curl call in docs/api.md names a route of the API with its method
// (-X METHOD, else POST with -d, else GET), so the examples cannot drift
// from the handlers. (e2e TestAPIDocsCurlExamples runs them with curl.)
func TestAPIDocsCurlCallsAreRoutes(t *testing.T) {
	b, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for _, rt := range (&api{}).routes() {
		mux.HandleFunc(rt.method+" "+rt.path, func(http.ResponseWriter, *http.Request) {})
	}
	urlRe := regexp.MustCompile(`https?://[^\s'"]+`)
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "$ curl") && !strings.HasPrefix(strings.TrimSpace(line), "curl ") {
			continue
		}
		u := urlRe.FindString(line)
		if u == "" {
			continue
		}
		method := "GET"
		if m := regexp.MustCompile(`-X (\w+)`).FindStringSubmatch(line); m != nil {
			method = m[1]
		} else if strings.Contains(line, " -d ") {
			method = "POST"
		}
		req := httptest.NewRequest(method, u, nil)
		if _, pattern := mux.Handler(req); pattern == "" {
			t.Errorf("docs/api.md: %s %s is not a route", method, u)
		}
		n++
	}
	if n < 5 {
		t.Fatalf("found only %d curl calls in docs/api.md", n)
	}
}

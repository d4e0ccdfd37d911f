// Package apispec checks loanq's JSON API against its OpenAPI 3.1 document
// (web/openapi.json) with github.com/getkin/kin-openapi, a maintained
// OpenAPI library: Load parses the document and validates it with the
// library's strictest options; Check and CheckCall validate one answer
// (status documented for the operation, Content-Type, headers, body against
// the schema; with CheckCall the request too) as openapi3filter does for a
// server's middleware. Lint adds the rules the library leaves to linters
// (Redocly's no-required-schema-properties-undefined, typed list items).
//
// What the library does not say, Check adds: a header the server sends must
// be declared for that answer (but for the few every answer carries:
// generalHeaders); a problem document's status is the HTTP status; a path
// the document does not have answers a 404 problem; a method the path does
// not have answers 405 with Allow naming the path's methods.
package apispec

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// Doc is a loaded, validated OpenAPI document.
type Doc struct {
	T      *openapi3.T
	router routers.Router
}

// StrictOptions are the document checks Load runs: every check of the
// library on, examples and defaults validated against their schemas,
// unknown formats refused, every error reported at once.
func StrictOptions() []openapi3.ValidationOption {
	return []openapi3.ValidationOption{
		openapi3.EnableSchemaFormatValidation(),
		openapi3.EnableSchemaPatternValidation(),
		openapi3.EnableSchemaDefaultsValidation(),
		openapi3.EnableExamplesValidation(),
		openapi3.ProhibitExtensionsWithRef(),
		openapi3.EnableMultiError(),
	}
}

// Load parses an OpenAPI document (no external references) and validates
// it with StrictOptions.
func Load(b []byte) (*Doc, error) {
	loader := openapi3.NewLoader()
	loader.IsExternalRefsAllowed = false
	t, err := loader.LoadFromData(b)
	if err != nil {
		return nil, fmt.Errorf("loading the OpenAPI document: %w", err)
	}
	if err := t.Validate(loader.Context, StrictOptions()...); err != nil {
		return nil, fmt.Errorf("the OpenAPI document is not valid: %w", err)
	}
	r, err := legacy.NewRouter(t, StrictOptions()...)
	if err != nil {
		return nil, err
	}
	return &Doc{T: t, router: r}, nil
}

// Operations lists the document's operations as "METHOD /path/{template}".
func (d *Doc) Operations() []string {
	var out []string
	for path, item := range d.T.Paths.Map() {
		for m := range item.Operations() {
			out = append(out, m+" "+path)
		}
	}
	sort.Strings(out)
	return out
}

// Operation finds the documented path template and operation of method on
// urlPath (with or without a query); ok false when the document has none.
func (d *Doc) Operation(method, urlPath string) (template string, op *openapi3.Operation, ok bool) {
	route, _, err := d.route(method, urlPath)
	if err != nil {
		return "", nil, false
	}
	return route.Path, route.Operation, true
}

func (d *Doc) route(method, urlPath string) (*routers.Route, map[string]string, error) {
	return d.router.FindRoute(httptest.NewRequest(method, urlPath, nil))
}

// Allow is what the Allow header of a 405 on urlPath must say: the methods
// the document has for its path, and HEAD with GET (net/http answers HEAD
// with the GET handler).
func (d *Doc) Allow(urlPath string) (string, bool) {
	for _, m := range []string{"GET", "POST", "DELETE", "PUT", "PATCH"} {
		route, _, err := d.route(m, urlPath)
		if err != nil {
			continue
		}
		var ms []string
		for m := range route.PathItem.Operations() {
			ms = append(ms, m)
			if m == "GET" {
				ms = append(ms, "HEAD")
			}
		}
		sort.Strings(ms)
		return strings.Join(ms, ", "), true
	}
	return "", false
}

// generalHeaders are the headers of every answer (HTTP's own, and the
// security headers of every route of loanq serve, web/site.go), which the
// document does not repeat on each response. Any other header must be
// declared by the response it comes with.
var generalHeaders = []string{
	"Content-Type", "Content-Length", "Content-Encoding", "Transfer-Encoding", "Date", "Vary", "Connection", "Keep-Alive",
	"Content-Security-Policy", "X-Content-Type-Options", "Referrer-Policy", "Cache-Control",
}

// Check checks one answer to method urlPath (urlPath may carry a query):
// as CheckCall, but for the request's body, which is not known.
func (d *Doc) Check(method, urlPath string, status int, header http.Header, body []byte) error {
	return d.CheckCall(httptest.NewRequest(method, urlPath, nil), nil, status, header, body)
}

// CheckCall checks one call: the request req with body reqBody (nil: not
// known, not checked) answered with status, header and body. A request the
// document refuses (a body or parameter outside its schema) must be
// answered with a 4xx. An error's problem document must speak the API's
// words (cliWords).
func (d *Doc) CheckCall(req *http.Request, reqBody []byte, status int, header http.Header, body []byte) error {
	// The document's server is "/": the path and query are matched, not
	// the host a client called.
	req = req.Clone(context.Background())
	req.URL = &url.URL{Path: req.URL.Path, RawPath: req.URL.RawPath, RawQuery: req.URL.RawQuery}
	what := req.Method + " " + req.URL.RequestURI()
	route, params, err := d.router.FindRoute(req)
	if err != nil {
		// The library's router says "method not allowed" only for paths
		// without parameters: ask it for the path's other methods.
		allow, pathKnown := d.Allow(req.URL.Path)
		if !pathKnown {
			if status != http.StatusNotFound {
				return fmt.Errorf("%s: not an operation of the document, yet answered %d (want a 404 problem)", what, status)
			}
			return problemBody(what, status, header, body)
		}
		if status != http.StatusMethodNotAllowed || header.Get("Allow") != allow {
			return fmt.Errorf("%s: the path has no such method, yet answered %d with Allow %q (want 405 with Allow %q)", what, status, header.Get("Allow"), allow)
		}
		// The answer is the 405 the path's operations document.
		m, _, _ := strings.Cut(allow, ", ")
		return d.CheckCall(httptest.NewRequest(m, req.URL.RequestURI(), nil), nil, status, header, body)
	}
	what = fmt.Sprintf("%s (%s %s)", what, route.Method, route.Path)
	in := &openapi3filter.RequestValidationInput{
		Request:    req,
		PathParams: params,
		Route:      route,
		Options: &openapi3filter.Options{
			AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
			MultiError:         true,
			ExcludeRequestBody: reqBody == nil,
		},
	}
	if reqBody != nil {
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	if reqErr := openapi3filter.ValidateRequest(context.Background(), in); reqErr != nil && (status < 400 || status >= 500) {
		return fmt.Errorf("%s: the document refuses this request (%v), yet it was answered %d", what, reqErr, status)
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 status,
		Header:                 header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	out.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		return fmt.Errorf("%s: answered %d against the document: %v\n%s", what, status, err, body)
	}
	resp := route.Operation.Responses.Status(status)
	if resp == nil {
		resp = route.Operation.Responses.Default()
	}
	for name := range header {
		if slices.ContainsFunc(generalHeaders, func(g string) bool { return strings.EqualFold(g, name) }) {
			continue
		}
		if _, ok := declared(resp.Value.Headers, name); !ok {
			return fmt.Errorf("%s: %d sends the header %s, which its response does not declare", what, status, name)
		}
	}
	if status >= 400 {
		return problemBody(what, status, header, body)
	}
	return nil
}

func declared(hs openapi3.Headers, name string) (*openapi3.HeaderRef, bool) {
	for k, h := range hs {
		if strings.EqualFold(k, name) {
			return h, true
		}
	}
	return nil, false
}

// problemBody checks an error answer is an RFC 9457 problem document whose
// status is the HTTP status.
func problemBody(what string, status int, header http.Header, body []byte) error {
	if ct := header.Get("Content-Type"); ct != "application/problem+json" {
		return fmt.Errorf("%s: %d with Content-Type %q, want application/problem+json", what, status, ct)
	}
	var p struct {
		Type   *string      `json:"type"`
		Title  *string      `json:"title"`
		Status *json.Number `json:"status"`
		Detail *string      `json:"detail"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return fmt.Errorf("%s: %d body is not a problem document: %v: %q", what, status, err, body)
	}
	if p.Type == nil || p.Title == nil || p.Detail == nil || p.Status == nil {
		return fmt.Errorf("%s: %d problem lacks type, title, status or detail: %s", what, status, body)
	}
	if p.Status.String() != strconv.Itoa(status) {
		return fmt.Errorf("%s: problem status %s in a %d answer", what, p.Status, status)
	}
	if w := cliWords.FindString(*p.Detail); w != "" {
		return fmt.Errorf("%s: the problem speaks the command line (%q), not the API's fields and endpoints: %s", what, w, *p.Detail)
	}
	return nil
}

// cliWords are the command line's names in an API answer: a flag of the
// commands the API stands for (the API's field is count, not --count), or
// one of those commands to run, which the API has an endpoint for. (An
// administrator's command, such as `loanq token create`, which no endpoint
// stands for, may be named.)
var cliWords = regexp.MustCompile("--(count|after|of|older-than|user|wait|task|action|reason|note)\\b|`loanq (work|disposition|pipeline|task list|history)")

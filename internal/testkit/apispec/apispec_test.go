package apispec

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const small = `{"openapi": "3.1.0", "info": {"title": "t", "version": "1"},
 "paths": {
  "/r/{id}": {
   "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer", "minimum": 1}}],
   "get": {"responses": {
    "200": {"description": "r", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/R"}}}},
    "202": {"$ref": "#/components/responses/Pending"},
    "400": {"$ref": "#/components/responses/Problem"},
    "404": {"$ref": "#/components/responses/Problem"},
    "405": {"description": "m", "headers": {"Allow": {"required": true, "schema": {"type": "string"}}},
     "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}}}},
   "post": {"requestBody": {"content": {"application/json": {"schema": {"type": "object", "additionalProperties": false,
     "properties": {"n": {"type": "integer", "maximum": 3}}}}}},
    "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/R"}}}},
     "400": {"$ref": "#/components/responses/Problem"}}}}
 },
 "components": {
  "responses": {
   "Pending": {"description": "p", "headers": {"Retry-After": {"required": true, "schema": {"type": "integer"}}},
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/R"}}}},
   "Problem": {"description": "p", "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}}},
  "schemas": {
   "Problem": {"type": "object", "required": ["type", "title", "status", "detail"], "properties": {
     "type": {"type": "string"}, "title": {"type": "string"}, "status": {"type": "integer"}, "detail": {"type": "string"}}},
   "R": {"type": "object", "required": ["id", "state"], "additionalProperties": false,
    "properties": {"id": {"type": "integer", "minimum": 1}, "state": {"enum": ["a", "b"]},
     "key": {"type": ["integer", "string"]},
     "at": {"type": ["string", "null"], "format": "date-time"},
     "tags": {"type": "array", "items": {"type": "string"}}}}}}}`

// Check and CheckCall refuse what the document does not allow, with the
// library's validation and the rules apispec adds.
func TestCheck(t *testing.T) {
	d, err := Load([]byte(small))
	if err != nil {
		t.Fatal(err)
	}
	js := http.Header{"Content-Type": {"application/json"}}
	pj := http.Header{"Content-Type": {"application/problem+json"}}
	pending := http.Header{"Content-Type": {"application/json"}, "Retry-After": {"1"}}
	undeclared := http.Header{"Content-Type": {"application/json"}, "Loanq-Notice": {"x"}}
	notAllowed := http.Header{"Content-Type": {"application/problem+json"}, "Allow": {"GET, HEAD, POST"}}
	const prob404 = `{"type": "about:blank", "title": "Not Found", "status": 404, "detail": "d"}`
	for _, c := range []struct {
		method, path string
		status       int
		h            http.Header
		body         string
		want         string // "" : valid; else a part of the error
	}{
		{"GET", "/r/1", 200, js, `{"id": 1, "state": "a", "key": "x", "at": null, "tags": ["t"]}`, ""},
		{"GET", "/r/1?wait=1", 200, js, `{"id": 1, "state": "b", "key": 7, "at": "2026-11-25T03:00:00.000Z"}`, ""},
		{"GET", "/r/1", 202, pending, `{"id": 1, "state": "a"}`, ""},
		{"GET", "/r/1", 202, js, `{"id": 1, "state": "a"}`, "Retry-After"},
		{"GET", "/r/1", 200, undeclared, `{"id": 1, "state": "a"}`, "Loanq-Notice, which its response does not declare"},
		{"GET", "/r/1", 201, js, `{"id": 1, "state": "a"}`, "status is not supported"},
		{"GET", "/r/1", 200, pj, `{"id": 1, "state": "a"}`, "application/problem+json"},
		{"GET", "/r/1", 200, js, `{"id": 1}`, `"state"`},
		{"GET", "/r/1", 200, js, `{"id": 1, "state": "c"}`, "enum"},
		{"GET", "/r/1", 200, js, `{"id": 0, "state": "a"}`, "minimum"},
		{"GET", "/r/1", 200, js, `{"id": "1", "state": "a"}`, "integer"},
		{"GET", "/r/1", 200, js, `{"id": 1, "state": "a", "extra": 1}`, "extra"},
		{"GET", "/r/1", 200, js, `{"id": 1, "state": "a", "key": true}`, "key"},
		{"GET", "/r/1", 200, js, `{"id": 1, "state": "a", "at": "yesterday"}`, "date-time"},
		{"GET", "/r/1", 200, js, `not json`, "decode"},
		{"GET", "/r/1", 404, pj, prob404, ""},
		{"GET", "/r/1", 404, pj, `{"type": "about:blank", "title": "Not Found", "status": 400, "detail": "d"}`, "problem status 400"},
		{"GET", "/nope", 404, pj, prob404, ""},
		{"GET", "/r/1", 404, pj, "{\"type\": \"about:blank\", \"title\": \"Not Found\", \"status\": 404, \"detail\": \"give the id `loanq work get` printed\"}", "speaks the command line"},
		{"GET", "/r/0", 400, pj, `{"type": "about:blank", "title": "Bad Request", "status": 400, "detail": "invalid --count 0"}`, `"--count"`},
		{"GET", "/nope", 200, js, `{}`, "not an operation"},
		// A wrong method: 405 with the path's methods in Allow, as the
		// path's operations document it.
		{"PUT", "/r/1", 405, notAllowed, `{"type": "about:blank", "title": "Method Not Allowed", "status": 405, "detail": "d"}`, ""},
		{"PUT", "/r/1", 405, http.Header{"Content-Type": {"application/problem+json"}, "Allow": {"GET"}}, `{}`, `want 405 with Allow "GET, HEAD, POST"`},
		{"PUT", "/r/1", 404, pj, prob404, `want 405 with Allow "GET, HEAD, POST"`},
		// The document refuses the request (id below its minimum): a 2xx is wrong.
		{"GET", "/r/0", 200, js, `{"id": 1, "state": "a"}`, "refuses this request"},
		{"GET", "/r/0", 400, pj, `{"type": "about:blank", "title": "Bad Request", "status": 400, "detail": "d"}`, ""},
	} {
		err := d.Check(c.method, c.path, c.status, c.h, []byte(c.body))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s %s %d %s: %v", c.method, c.path, c.status, c.body, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s %s %d %s: error %v, want one saying %q", c.method, c.path, c.status, c.body, err, c.want)
		}
	}
	// A request body the document refuses must not be answered 200.
	req := httptest.NewRequest("POST", "/r/1", nil)
	req.Header.Set("Content-Type", "application/json")
	if err := d.CheckCall(req, []byte(`{"n": 4}`), 200, js, []byte(`{"id": 1, "state": "a"}`)); err == nil || !strings.Contains(err.Error(), "refuses this request") {
		t.Errorf("a body above the maximum answered 200: %v", err)
	}
	req = httptest.NewRequest("POST", "/r/1", nil)
	req.Header.Set("Content-Type", "application/json")
	if err := d.CheckCall(req, []byte(`{"n": 3}`), 200, js, []byte(`{"id": 1, "state": "a"}`)); err != nil {
		t.Errorf("a valid call: %v", err)
	}
}

// Load refuses a document the library finds invalid, and Lint finds what a
// generated client could not type.
func TestLoadAndLint(t *testing.T) {
	bad := strings.Replace(small, `"format": "date-time"`, `"format": "date-time", "default": 7`, 1)
	if _, err := Load([]byte(bad)); err == nil {
		t.Errorf("a default outside its schema was accepted")
	}
	untyped := strings.Replace(small, `"tags": {"type": "array", "items": {"type": "string"}}`,
		`"tags": {"type": "array", "items": {"type": "object", "required": ["name"]}}, "raw": {"type": "array"}`, 1)
	d, err := Load([]byte(untyped))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(d.Lint(), "\n")
	for _, want := range []string{
		`#/components/schemas/R/properties/tags/items: an object without properties`,
		`#/components/schemas/R/properties/tags/items: required "name" is not among its properties`,
		`#/components/schemas/R/properties/raw: an array without items`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Lint:\n%s\nwant a line %q", got, want)
		}
	}
}

package apispec

import (
	"net/http"
	"os"
	"strings"
	"testing"
)

const small = `{"openapi": "3.1.0",
 "paths": {
  "/r/{id}": {"get": {"responses": {
    "200": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/R"}}}},
    "202": {"$ref": "#/components/responses/Pending"},
    "404": {"content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}}}}},
  "/r/all": {"get": {"responses": {"200": {"content": {"application/json": {"schema": {"type": "array", "items": {"type": "integer"}}}}}}}}
 },
 "components": {
  "responses": {"Pending": {"headers": {"Retry-After": {"required": true, "schema": {"type": "string"}}},
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/R"}}}}},
  "schemas": {
   "Problem": {"type": "object", "required": ["status"], "properties": {"status": {"type": "integer"}}},
   "R": {"type": "object", "required": ["id", "state"], "additionalProperties": false,
    "properties": {"id": {"type": "integer", "minimum": 1}, "state": {"enum": ["a", "b"]},
     "key": {"oneOf": [{"type": "integer"}, {"type": "string"}]},
     "at": {"type": ["string", "null"], "format": "date-time"},
     "tags": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "boolean"}]}}}}}}}`

func TestCheck(t *testing.T) {
	d, err := Load([]byte(small))
	if err != nil {
		t.Fatal(err)
	}
	js := http.Header{"Content-Type": {"application/json"}}
	pj := http.Header{"Content-Type": {"application/problem+json"}}
	pending := http.Header{"Content-Type": {"application/json; charset=utf-8"}, "Retry-After": {"1"}}
	for _, c := range []struct {
		path   string
		status int
		h      http.Header
		body   string
		want   string // "" : valid; else a part of the error
	}{
		{"/r/1", 200, js, `{"id": 1, "state": "a", "key": "x", "at": null, "tags": ["t", true]}`, ""},
		{"/r/1?wait=1", 200, js, `{"id": 1, "state": "b", "key": 7, "at": "2026-11-25T03:00:00.000Z"}`, ""},
		{"/r/all", 200, js, `[1, 2]`, ""},
		{"/r/all", 200, js, `[1, 2.5]`, "want type integer"},
		{"/r/1", 202, pending, `{"id": 1, "state": "a"}`, ""},
		{"/r/1", 202, js, `{"id": 1, "state": "a"}`, "header Retry-After"},
		{"/r/1", 201, js, `{"id": 1, "state": "a"}`, "status 201 is not documented"},
		{"/r/1", 200, pj, `{"id": 1, "state": "a"}`, `Content-Type "application/problem+json"`},
		{"/r/1", 200, js, `{"id": 1}`, `required key "state"`},
		{"/r/1", 200, js, `{"id": 1, "state": "c"}`, "not one of"},
		{"/r/1", 200, js, `{"id": 0, "state": "a"}`, "below the minimum"},
		{"/r/1", 200, js, `{"id": "1", "state": "a"}`, "want type integer"},
		{"/r/1", 200, js, `{"id": 1, "state": "a", "extra": 1}`, `key "extra" is not documented`},
		{"/r/1", 200, js, `{"id": 1, "state": "a", "key": true}`, "matches 0 of oneOf"},
		{"/r/1", 200, js, `{"id": 1, "state": "a", "at": "yesterday"}`, "not an RFC 3339"},
		{"/r/1", 200, js, `{"id": 1, "state": "a", "tags": [1]}`, "matches none of anyOf"},
		{"/r/1", 200, js, `{"id": 1, "state": "a"} {}`, "more than one JSON value"},
		{"/r/1", 200, js, `not json`, "not JSON"},
		{"/r/1", 404, pj, `{"status": 404}`, ""},
		{"/r/1", 404, pj, `{"status": 400}`, "problem status 400"},
		{"/nope", 404, pj, `{"status": 404}`, ""},
		{"/nope", 200, js, `{}`, "not an operation"},
		{"/r/", 404, pj, `{"status": 404}`, ""},
	} {
		err := d.Check("GET", c.path, c.status, c.h, []byte(c.body))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s %d %s: %v", c.path, c.status, c.body, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s %d %s: error %v, want one saying %q", c.path, c.status, c.body, err, c.want)
		}
	}
	if err := d.Check("POST", "/r/1", 200, js, []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "not an operation") {
		t.Errorf("an undocumented method: %v", err)
	}
	if _, err := Load([]byte(`{"paths": {"/x": {"get": {"responses": {"200": {"content": {"application/json": {"schema": {"type": "string", "pattern": "^a"}}}}}}}}}`)); err == nil || !strings.Contains(err.Error(), `"pattern"`) {
		t.Errorf("a keyword apispec does not check was accepted: %v", err)
	}
}

// loanq's own document loads: its schemas use only what Check validates.
func TestLoanqDocumentLoads(t *testing.T) {
	b, err := os.ReadFile("../../../web/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load(b); err != nil {
		t.Fatal(err)
	}
}

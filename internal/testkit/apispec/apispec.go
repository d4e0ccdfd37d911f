// Package apispec checks an HTTP answer of loanq's JSON API against its
// OpenAPI 3.1 document (web/openapi.json): the status is one the
// operation (method and path template) documents, the Content-Type is the
// documented media type, the headers the response marks required are there,
// and the body validates against the documented schema.
//
// The validator knows the part of JSON Schema the document uses: type (one
// or a list), properties, required, additionalProperties, items, enum,
// const, oneOf, anyOf, allOf, $ref to the document's components, minimum,
// maximum and format date-time. Load refuses a document whose schemas use
// any other keyword, so a keyword added to the document cannot be silently
// ignored by the check.
package apispec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Doc is a loaded OpenAPI document.
type Doc struct {
	root  map[string]any
	paths []pathItem
}

type pathItem struct {
	template string
	segs     []string
	ops      map[string]any // lower-case method → operation
}

// schemaWords are the schema keywords Check understands or may ignore
// (annotations).
var schemaWords = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true, "items": true,
	"enum": true, "const": true, "oneOf": true, "anyOf": true, "allOf": true, "$ref": true,
	"minimum": true, "maximum": true, "format": true,
	// annotations: no effect on validity
	"description": true, "default": true, "example": true, "examples": true, "title": true,
}

// Load reads an OpenAPI document and checks that its schemas use only the
// keywords this package validates.
func Load(b []byte) (*Doc, error) {
	var root map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("the OpenAPI document is not JSON: %w", err)
	}
	d := &Doc{root: root}
	paths, _ := root["paths"].(map[string]any)
	for tpl, v := range paths {
		ops, _ := v.(map[string]any)
		d.paths = append(d.paths, pathItem{template: tpl, segs: strings.Split(tpl, "/"), ops: ops})
	}
	// Literal segments before templated ones: /a/b wins over /a/{x}.
	sort.Slice(d.paths, func(i, j int) bool {
		return strings.Count(d.paths[i].template, "{") < strings.Count(d.paths[j].template, "{")
	})
	var errs []string
	walkSchemas(root, "#", false, func(where string, s map[string]any) {
		for k := range s {
			if !schemaWords[k] {
				errs = append(errs, fmt.Sprintf("%s: schema keyword %q is not checked by apispec (add it there)", where, k))
			}
		}
	})
	if len(errs) > 0 {
		sort.Strings(errs)
		return nil, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return d, nil
}

// walkSchemas calls f on every schema object under v: the values of
// "schema" keys, components.schemas, and the subschemas of those.
func walkSchemas(v any, where string, isSchema bool, f func(string, map[string]any)) {
	switch x := v.(type) {
	case map[string]any:
		if isSchema {
			f(where, x)
			for _, k := range []string{"items", "additionalProperties"} {
				if sub, ok := x[k].(map[string]any); ok {
					walkSchemas(sub, where+"/"+k, true, f)
				}
			}
			if props, ok := x["properties"].(map[string]any); ok {
				for name, sub := range props {
					walkSchemas(sub, where+"/properties/"+name, true, f)
				}
			}
			for _, k := range []string{"oneOf", "anyOf", "allOf"} {
				if list, ok := x[k].([]any); ok {
					for i, sub := range list {
						walkSchemas(sub, fmt.Sprintf("%s/%s/%d", where, k, i), true, f)
					}
				}
			}
			return
		}
		for k, sub := range x {
			switch {
			case k == "schema":
				walkSchemas(sub, where+"/"+k, true, f)
			case k == "schemas" && where == "#/components":
				for name, s := range sub.(map[string]any) {
					walkSchemas(s, where+"/schemas/"+name, true, f)
				}
			case k == "example" || k == "examples":
			default:
				walkSchemas(sub, where+"/"+k, false, f)
			}
		}
	case []any:
		for i, sub := range x {
			walkSchemas(sub, fmt.Sprintf("%s/%d", where, i), false, f)
		}
	}
}

// Operations lists the document's operations as "METHOD /path/{template}".
func (d *Doc) Operations() []string {
	var out []string
	for _, p := range d.paths {
		for m := range p.ops {
			switch m {
			case "get", "put", "post", "delete", "patch", "head", "options", "trace":
				out = append(out, strings.ToUpper(m)+" "+p.template)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Operation finds the documented path template and operation of method on
// urlPath (a query is ignored); ok false when the document has none.
func (d *Doc) Operation(method, urlPath string) (template string, op map[string]any, ok bool) {
	urlPath, _, _ = strings.Cut(urlPath, "?")
	segs := strings.Split(urlPath, "/")
	for _, p := range d.paths {
		if !matches(p.segs, segs) {
			continue
		}
		if op, ok := p.ops[strings.ToLower(method)].(map[string]any); ok {
			return p.template, op, true
		}
	}
	return "", nil, false
}

func matches(tpl, segs []string) bool {
	if len(tpl) != len(segs) {
		return false
	}
	for i, t := range tpl {
		if strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}") {
			if segs[i] == "" {
				return false
			}
			continue
		}
		if t != segs[i] {
			return false
		}
	}
	return true
}

// Check checks one answer to method urlPath. A call the document has no
// operation for must be a 404 problem (the API's answer to an unknown
// endpoint).
func (d *Doc) Check(method, urlPath string, status int, header http.Header, body []byte) error {
	template, op, ok := d.Operation(method, urlPath)
	what := method + " " + urlPath
	var resp map[string]any
	if ok {
		what = fmt.Sprintf("%s %s (%s %s)", method, urlPath, method, template)
		responses, _ := op["responses"].(map[string]any)
		r := responses[strconv.Itoa(status)]
		if r == nil {
			r = responses[fmt.Sprintf("%dXX", status/100)]
		}
		if r == nil {
			r = responses["default"]
		}
		if r == nil {
			return fmt.Errorf("%s: status %d is not documented (documented: %s)", what, status, strings.Join(keys(responses), ", "))
		}
		var err error
		if resp, err = d.deref(r); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	} else {
		if status != http.StatusNotFound {
			return fmt.Errorf("%s: not an operation of the document, yet answered %d (want a 404 problem)", what, status)
		}
		resp = map[string]any{"content": map[string]any{"application/problem+json": map[string]any{
			"schema": map[string]any{"$ref": "#/components/schemas/Problem"}}}}
	}
	for name, h := range mapOf(resp["headers"]) {
		hv, err := d.deref(h)
		if err != nil {
			return fmt.Errorf("%s: header %s: %w", what, name, err)
		}
		if hv["required"] == true && header.Get(name) == "" {
			return fmt.Errorf("%s: %d without its documented header %s", what, status, name)
		}
	}
	content := mapOf(resp["content"])
	ct := header.Get("Content-Type")
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.TrimSpace(strings.ToLower(mt))
	if len(content) == 0 {
		if len(bytes.TrimSpace(body)) != 0 {
			return fmt.Errorf("%s: %d documents no body, got %q", what, status, body)
		}
		return nil
	}
	media, ok := content[mt].(map[string]any)
	if !ok {
		return fmt.Errorf("%s: %d with Content-Type %q, documented %s", what, status, ct, strings.Join(keys(content), " or "))
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("%s: %d body is not JSON: %v: %q", what, status, err, body)
	}
	if dec.More() {
		return fmt.Errorf("%s: %d body holds more than one JSON value: %q", what, status, body)
	}
	if schema, ok := media["schema"]; ok {
		if err := d.validate(schema, v, "body"); err != nil {
			return fmt.Errorf("%s: %d body does not match the documented schema: %v\n%s", what, status, err, body)
		}
	}
	if mt == "application/problem+json" {
		if s, _ := v.(map[string]any)["status"].(json.Number); s.String() != strconv.Itoa(status) {
			return fmt.Errorf("%s: problem status %v in a %d answer", what, s, status)
		}
	}
	return nil
}

// deref follows a "$ref" (to this document only) until an object.
func (d *Doc) deref(v any) (map[string]any, error) {
	for range 20 {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("not an object: %v", v)
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return m, nil
		}
		if v, ok = d.resolve(ref); !ok {
			return nil, fmt.Errorf("$ref %q names nothing in the document", ref)
		}
	}
	return nil, fmt.Errorf("$ref chain too long")
}

func (d *Doc) resolve(ref string) (any, bool) {
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, false
	}
	var cur any = d.root
	for _, p := range strings.Split(rest, "/") {
		p = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[p]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// validate checks v (decoded with UseNumber) against schema; at names the
// place in the body for the error.
func (d *Doc) validate(schema any, v any, at string) error {
	if b, ok := schema.(bool); ok {
		if !b {
			return fmt.Errorf("%s: no value is allowed here", at)
		}
		return nil
	}
	s, ok := schema.(map[string]any)
	if !ok {
		return fmt.Errorf("%s: the schema is not an object: %v", at, schema)
	}
	if ref, ok := s["$ref"].(string); ok {
		target, ok := d.resolve(ref)
		if !ok {
			return fmt.Errorf("%s: $ref %q names nothing in the document", at, ref)
		}
		if err := d.validate(target, v, at); err != nil {
			return err
		}
	}
	if t, ok := s["type"]; ok {
		var types []string
		switch tv := t.(type) {
		case string:
			types = []string{tv}
		case []any:
			for _, x := range tv {
				types = append(types, fmt.Sprint(x))
			}
		}
		matched := false
		for _, ty := range types {
			if isType(ty, v) {
				matched = true
			}
		}
		if !matched {
			return fmt.Errorf("%s: %s, want type %s", at, show(v), strings.Join(types, " or "))
		}
	}
	if enum, ok := s["enum"].([]any); ok {
		found := false
		for _, e := range enum {
			if same(e, v) {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("%s: %s is not one of %v", at, show(v), enum)
		}
	}
	if c, ok := s["const"]; ok && !same(c, v) {
		return fmt.Errorf("%s: %s, want %v", at, show(v), c)
	}
	if n, ok := v.(json.Number); ok {
		f, _ := n.Float64()
		if m, ok := s["minimum"].(json.Number); ok {
			if lo, _ := m.Float64(); f < lo {
				return fmt.Errorf("%s: %s is below the minimum %s", at, n, m)
			}
		}
		if m, ok := s["maximum"].(json.Number); ok {
			if hi, _ := m.Float64(); f > hi {
				return fmt.Errorf("%s: %s is above the maximum %s", at, n, m)
			}
		}
	}
	if str, ok := v.(string); ok && s["format"] == "date-time" {
		if _, err := time.Parse(time.RFC3339Nano, str); err != nil {
			return fmt.Errorf("%s: %q is not an RFC 3339 date-time", at, str)
		}
	}
	if obj, ok := v.(map[string]any); ok {
		for _, r := range listOf(s["required"]) {
			if _, ok := obj[fmt.Sprint(r)]; !ok {
				return fmt.Errorf("%s: the required key %q is missing", at, r)
			}
		}
		props := mapOf(s["properties"])
		for _, k := range keys(obj) {
			if sub, ok := props[k]; ok {
				if err := d.validate(sub, obj[k], at+"."+k); err != nil {
					return err
				}
			} else if extra, ok := s["additionalProperties"]; ok {
				if err := d.validate(extra, obj[k], at+"."+k); err != nil {
					return fmt.Errorf("%s: key %q is not documented: %w", at, k, err)
				}
			}
		}
	}
	if arr, ok := v.([]any); ok {
		if items, ok := s["items"]; ok {
			for i, x := range arr {
				if err := d.validate(items, x, fmt.Sprintf("%s[%d]", at, i)); err != nil {
					return err
				}
			}
		}
	}
	if all := listOf(s["allOf"]); all != nil {
		for _, sub := range all {
			if err := d.validate(sub, v, at); err != nil {
				return err
			}
		}
	}
	if alts := listOf(s["anyOf"]); alts != nil {
		var errs []string
		for _, sub := range alts {
			err := d.validate(sub, v, at)
			if err == nil {
				errs = nil
				break
			}
			errs = append(errs, err.Error())
		}
		if errs != nil {
			return fmt.Errorf("%s: matches none of anyOf: %s", at, strings.Join(errs, "; "))
		}
	}
	if one := listOf(s["oneOf"]); one != nil {
		n := 0
		var errs []string
		for _, sub := range one {
			if err := d.validate(sub, v, at); err == nil {
				n++
			} else {
				errs = append(errs, err.Error())
			}
		}
		if n != 1 {
			return fmt.Errorf("%s: matches %d of oneOf, want exactly 1 (%s)", at, n, strings.Join(errs, "; "))
		}
	}
	return nil
}

func isType(ty string, v any) bool {
	switch x := v.(type) {
	case nil:
		return ty == "null"
	case bool:
		return ty == "boolean"
	case string:
		return ty == "string"
	case []any:
		return ty == "array"
	case map[string]any:
		return ty == "object"
	case json.Number:
		if ty == "number" {
			return true
		}
		if ty == "integer" {
			_, err := strconv.ParseInt(x.String(), 10, 64)
			return err == nil
		}
	}
	return false
}

// same compares two decoded JSON values (numbers by their value).
func same(a, b any) bool {
	an, aok := a.(json.Number)
	bn, bok := b.(json.Number)
	if aok && bok {
		af, _ := an.Float64()
		bf, _ := bn.Float64()
		return af == bf
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

func show(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 80 {
		b = append(b[:77], "..."...)
	}
	return string(b)
}

func mapOf(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func listOf(v any) []any {
	l, _ := v.([]any)
	return l
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

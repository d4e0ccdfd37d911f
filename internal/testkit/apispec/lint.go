package apispec

import (
	"fmt"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// Lint lists what the document leaves a generated client without, beyond
// what the library's validation refuses; nil when nothing:
//
//   - a name in a schema's required that its properties do not define
//     (Redocly's no-required-schema-properties-undefined): a generated
//     client has no field for it;
//   - an object schema with neither properties nor additionalProperties
//     (a schema, or true: a map on purpose), and an array without items:
//     its values are untyped;
//   - a schema that says neither type, $ref, enum, const nor a
//     combination (allOf, oneOf, anyOf): anything goes.
//
// Every schema is walked: the components' and every parameter's, request
// body's, response's and header's, and the subschemas of those.
func (d *Doc) Lint() []string {
	var out []string
	seen := map[*openapi3.Schema]bool{}
	var walk func(where string, ref *openapi3.SchemaRef)
	walk = func(where string, ref *openapi3.SchemaRef) {
		if ref == nil || ref.Value == nil {
			out = append(out, where+": no schema")
			return
		}
		if ref.Ref != "" {
			where = ref.Ref
		}
		s := ref.Value
		if seen[s] {
			return
		}
		seen[s] = true
		combined := len(s.AllOf)+len(s.OneOf)+len(s.AnyOf) > 0
		typed := s.Type != nil && !s.Type.IsEmpty()
		if !typed && ref.Ref == "" && s.Enum == nil && s.Const == nil && !combined {
			out = append(out, where+": no type")
		}
		// An object says its properties, or that it is a map
		// (additionalProperties: a schema, or true on purpose).
		isMap := s.AdditionalProperties.Schema != nil || (s.AdditionalProperties.Has != nil && *s.AdditionalProperties.Has)
		if typed && s.Type.Includes("object") && len(s.Properties) == 0 && !isMap && !combined {
			out = append(out, where+": an object without properties")
		}
		if typed && s.Type.Includes("array") && s.Items == nil {
			out = append(out, where+": an array without items")
		}
		defined := map[string]bool{}
		for name := range s.Properties {
			defined[name] = true
		}
		for _, sub := range s.AllOf {
			if sub.Value != nil {
				for name := range sub.Value.Properties {
					defined[name] = true
				}
			}
		}
		for _, name := range s.Required {
			if !defined[name] {
				out = append(out, fmt.Sprintf("%s: required %q is not among its properties", where, name))
			}
		}
		for _, name := range sortedKeys(s.Properties) {
			walk(where+"/properties/"+name, s.Properties[name])
		}
		if s.Items != nil {
			walk(where+"/items", s.Items)
		}
		if s.AdditionalProperties.Schema != nil {
			walk(where+"/additionalProperties", s.AdditionalProperties.Schema)
		}
		for k, list := range map[string]openapi3.SchemaRefs{"allOf": s.AllOf, "oneOf": s.OneOf, "anyOf": s.AnyOf} {
			for i, sub := range list {
				walk(fmt.Sprintf("%s/%s/%d", where, k, i), sub)
			}
		}
	}
	for _, name := range sortedKeys(d.T.Components.Schemas) {
		walk("#/components/schemas/"+name, d.T.Components.Schemas[name])
	}
	content := func(where string, c openapi3.Content) {
		for mt, m := range c {
			walk(where+"/content/"+mt+"/schema", m.Schema)
		}
	}
	headers := func(where string, hs openapi3.Headers) {
		for name, h := range hs {
			walk(where+"/headers/"+name+"/schema", h.Value.Schema)
		}
	}
	for _, op := range d.Operations() {
		method, path, _ := strings.Cut(op, " ")
		o := d.T.Paths.Find(path).GetOperation(method)
		where := "#/paths/" + path + "/" + strings.ToLower(method)
		for _, p := range o.Parameters {
			walk(where+"/parameters/"+p.Value.Name, p.Value.Schema)
		}
		if o.RequestBody != nil {
			content(where+"/requestBody", o.RequestBody.Value.Content)
		}
		for code, r := range o.Responses.Map() {
			content(where+"/responses/"+code, r.Value.Content)
			headers(where+"/responses/"+code, r.Value.Headers)
		}
	}
	sort.Strings(out)
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

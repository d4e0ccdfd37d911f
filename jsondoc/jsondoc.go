// Package jsondoc writes loanq's JSON documents (docs/json.md): the one
// encoder behind every command's -o json and every answer of the HTTP API
// (web/), and the documents both print, so that an API answer is the
// document the matching command prints.
package jsondoc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// TimestampLayout is how every timestamp is printed in JSON: RFC 3339 in UTC
// with milliseconds, whatever the database stored (docs/json.md).
const TimestampLayout = "2006-01-02T15:04:05.000Z"

// Write prints v as one indented JSON document following the conventions
// of docs/json.md: keys in the order of the value (struct fields as declared,
// map keys sorted), no HTML escaping (">" stays ">"), and every value of a key
// ending in "_at" that is a time printed with TimestampLayout, so the same
// instant reads the same on every database.
func Write(w io.Writer, v any) error {
	var raw bytes.Buffer
	enc := json.NewEncoder(&raw)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	var out bytes.Buffer
	dec := json.NewDecoder(&raw)
	dec.UseNumber()
	if err := rewrite(dec, &out, ""); err != nil {
		return err
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, out.Bytes(), "", "  "); err != nil {
		return err
	}
	pretty.WriteByte('\n')
	_, err := w.Write(pretty.Bytes())
	return err
}

// rewrite copies one JSON value from dec to out, keeping key order; key is
// the object key the value belongs to.
func rewrite(dec *json.Decoder, out *bytes.Buffer, key string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		out.WriteString(t.String())
		end := map[json.Delim]json.Delim{'{': '}', '[': ']'}[t]
		for i := 0; dec.More(); i++ {
			if i > 0 {
				out.WriteByte(',')
			}
			childKey := ""
			if t == '{' {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				childKey = k.(string)
				writeString(out, childKey)
				out.WriteByte(':')
			}
			if err := rewrite(dec, out, childKey); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return err
		}
		out.WriteString(end.String())
	case string:
		if strings.HasSuffix(key, "_at") {
			if ts, err := time.Parse(time.RFC3339Nano, t); err == nil {
				t = ts.UTC().Format(TimestampLayout)
			}
		}
		writeString(out, t)
	case json.Number:
		out.WriteString(t.String())
	case bool:
		fmt.Fprint(out, t)
	case nil:
		out.WriteString("null")
	}
	return nil
}

func writeString(out *bytes.Buffer, s string) {
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	out.Truncate(out.Len() - 1) // Encode's newline
}

package loankey

import (
	"encoding/json"
	"strings"
	"testing"
)

// A key read back from loanq's own tables fits its task only in the form
// loanq writes (docs/security.md: a hand-written pool row failed every claim of an
// integer task on PostgreSQL); what KeyAsText gives for each kind fits.
func TestKeyFits(t *testing.T) {
	for _, c := range []struct {
		kind Kind
		key  string
		want bool
	}{
		{Integer, "7", true},
		{Integer, "-7", true},
		{Integer, "0", true},
		{Integer, "9223372036854775807", true},
		{Integer, "-9223372036854775808", true},
		{Integer, "9223372036854775808", false}, // past int64: PostgreSQL's bigint cast fails
		{Integer, "99999999999999999999", false},
		{Integer, "zz'); SELECT pg_sleep(5)--", false},
		{Integer, "", false},
		{Integer, "007", false}, // no JSON number: the whole list fails to parse
		{Integer, "+7", false},  // a JSON string PostgreSQL would cast to 7
		{Integer, " 12", false},
		{Integer, "-0", false},
		{Integer, "1e3", false},
		{UUID, "0b6f8a3e-5c1d-4f2a-9e7b-1c2d3e4f5a6b", true},
		{UUID, "0B6F8A3E-5C1D-4F2A-9E7B-1C2D3E4F5A6B", true},
		{UUID, "0b6f8a3e5c1d4f2a9e7b1c2d3e4f5a6b", false},
		{UUID, "zz", false},
		{UUID, "7", false},
		{Text, "LN-2024-000123", true},
		{Text, "007", true},
		{Text, " ", true}, // a source's text key may be anything it holds
		{Text, strings.Repeat("é", MaxLength), true},
		{Text, strings.Repeat("é", MaxLength+1), false},
		{Text, "\xff", false},
	} {
		if got := Fits(c.kind, c.key); got != c.want {
			t.Errorf("Fits(%s, %q) = %v, want %v", c.kind, c.key, got, c.want)
		}
	}
}

// An integer task's keys are JSON numbers only when the text is one, so
// that a key loanq did not write (007, text) cannot make an answer or a
// list invalid JSON: it is written as a string.
func TestKeyJSONStaysValid(t *testing.T) {
	for _, c := range []struct{ key, want string }{
		{"7", `7`}, {"-7", `-7`}, {"0", `0`}, {"-0", `-0`},
		{"99999999999999999999", `99999999999999999999`},
		{"007", `"007"`}, {"-01", `"-01"`}, {"-", `"-"`}, {" 12", `" 12"`}, {"+7", `"+7"`}, {"", `""`},
		{"zz'); SELECT pg_sleep(5)--", `"zz'); SELECT pg_sleep(5)--"`},
	} {
		b, err := json.Marshal(New(Integer, c.key))
		if err != nil || string(b) != c.want {
			t.Errorf("key %q as JSON: %s, %v; want %s", c.key, b, err, c.want)
		}
		if list := JSON(Integer, []string{c.key, "1"}); list != "["+c.want+",1]" || !json.Valid([]byte(list)) {
			t.Errorf("JSON with %q: %s; want [%s,1]", c.key, list, c.want)
		}
	}
}

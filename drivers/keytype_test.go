package drivers

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
		kind KeyKind
		key  string
		want bool
	}{
		{KeyInteger, "7", true},
		{KeyInteger, "-7", true},
		{KeyInteger, "0", true},
		{KeyInteger, "9223372036854775807", true},
		{KeyInteger, "-9223372036854775808", true},
		{KeyInteger, "9223372036854775808", false}, // past int64: PostgreSQL's bigint cast fails
		{KeyInteger, "99999999999999999999", false},
		{KeyInteger, "zz'); SELECT pg_sleep(5)--", false},
		{KeyInteger, "", false},
		{KeyInteger, "007", false}, // no JSON number: the whole list fails to parse
		{KeyInteger, "+7", false},  // a JSON string PostgreSQL would cast to 7
		{KeyInteger, " 12", false},
		{KeyInteger, "-0", false},
		{KeyInteger, "1e3", false},
		{KeyUUID, "0b6f8a3e-5c1d-4f2a-9e7b-1c2d3e4f5a6b", true},
		{KeyUUID, "0B6F8A3E-5C1D-4F2A-9E7B-1C2D3E4F5A6B", true},
		{KeyUUID, "0b6f8a3e5c1d4f2a9e7b1c2d3e4f5a6b", false},
		{KeyUUID, "zz", false},
		{KeyUUID, "7", false},
		{KeyText, "LN-2024-000123", true},
		{KeyText, "007", true},
		{KeyText, " ", true}, // a source's text key may be anything it holds
		{KeyText, strings.Repeat("é", MaxKeyLength), true},
		{KeyText, strings.Repeat("é", MaxKeyLength+1), false},
		{KeyText, "\xff", false},
	} {
		if got := KeyFits(c.kind, c.key); got != c.want {
			t.Errorf("KeyFits(%s, %q) = %v, want %v", c.kind, c.key, got, c.want)
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
		b, err := json.Marshal(NewKey(KeyInteger, c.key))
		if err != nil || string(b) != c.want {
			t.Errorf("key %q as JSON: %s, %v; want %s", c.key, b, err, c.want)
		}
		if list := KeysJSON(KeyInteger, []string{c.key, "1"}); list != "["+c.want+",1]" || !json.Valid([]byte(list)) {
			t.Errorf("KeysJSON with %q: %s; want [%s,1]", c.key, list, c.want)
		}
	}
}

package dispatch

import (
	"encoding/json"
	"github.com/loanq/loanq/loankey"
	"strconv"
	"strings"
	"testing"
)

// The work rows of a round are sent as JSON lists under Oracle's 4,000-byte
// bind limit, in order, none lost, whatever the user names hold.
func TestAssignmentsJSONChunks(t *testing.T) {
	var work []assignment
	for i := range 500 {
		user := "ann"
		if i%3 == 0 {
			user = strings.Repeat("Ü\"<", 33) // 99 characters, every one escaped or multi-byte
		}
		loan := strconv.FormatInt(int64(1)<<62+int64(i), 10)
		if i%5 == 0 {
			loan = strings.Repeat("é\\", 100) + strconv.Itoa(i) // a long text key, escaped and multi-byte
		}
		work = append(work, assignment{loan: loan, request: int64(1)<<61 + int64(i/7), user: user})
	}
	var got []assignment
	for rest := work; len(rest) > 0; {
		text, n, err := assignmentsJSON(rest)
		if err != nil {
			t.Fatal(err)
		}
		if n < 1 || len(text) > maxAssignmentsJSON {
			t.Fatalf("a list of %d assignments in %d bytes; want at least one, at most %d bytes", n, len(text), maxAssignmentsJSON)
		}
		var list [][]any
		dec := json.NewDecoder(strings.NewReader(text))
		dec.UseNumber()
		if err := dec.Decode(&list); err != nil || len(list) != n {
			t.Fatalf("%d of %d decoded (%v) from %s", len(list), n, err, text)
		}
		for _, x := range list {
			loan, _ := x[0].(string)
			req, _ := x[1].(json.Number).Int64()
			got = append(got, assignment{loan: loan, request: req, user: x[2].(string)})
		}
		rest = rest[n:]
	}
	if len(got) != len(work) {
		t.Fatalf("%d assignments sent, want %d", len(got), len(work))
	}
	for i := range work {
		if got[i] != work[i] {
			t.Fatalf("assignment %d sent as %+v, want %+v", i, got[i], work[i])
		}
	}
}

// Key lists (claims, pool drops, rechecks) go in runs under Oracle's bind
// limit too, in order, none lost, each run's JSON list the keys in the
// column's own JSON type.
func TestKeyChunks(t *testing.T) {
	var keys []string
	for i := range 300 {
		keys = append(keys, strings.Repeat("Ü\"", 100)[:150]+strconv.Itoa(i))
	}
	for _, kind := range []loankey.Kind{loankey.Text, loankey.Integer} {
		list := keys
		if kind == loankey.Integer {
			list = nil
			for i := range 2000 {
				list = append(list, strconv.FormatInt(int64(1)<<62+int64(i), 10))
			}
		}
		var got []string
		for _, run := range keyChunks(kind, list) {
			text := loankey.JSON(kind, run)
			if len(run) == 0 || len(text) > maxAssignmentsJSON {
				t.Fatalf("%s: a run of %d keys in %d bytes; want at least one, at most %d", kind, len(run), len(text), maxAssignmentsJSON)
			}
			var back []any
			if err := json.Unmarshal([]byte(text), &back); err != nil || len(back) != len(run) {
				t.Fatalf("%s: %v decoding %s", kind, err, text)
			}
			if _, isNum := back[0].(float64); isNum != (kind == loankey.Integer) {
				t.Fatalf("%s: keys sent as %T", kind, back[0])
			}
			got = append(got, run...)
		}
		if strings.Join(got, "|") != strings.Join(list, "|") {
			t.Fatalf("%s: %d keys sent, want the %d in order", kind, len(got), len(list))
		}
	}
}

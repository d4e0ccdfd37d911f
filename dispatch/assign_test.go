package dispatch

import (
	"encoding/json"
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
		work = append(work, assignment{loan: int64(1)<<62 + int64(i), request: int64(1)<<61 + int64(i/7), user: user})
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
			loan, _ := x[0].(json.Number).Int64()
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

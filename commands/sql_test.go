package commands_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/loanq/loanq/drivers"
)

// `loanq sql` prints the dialect's capabilities, one line each, above the
// statements, in text and in JSON.
func TestSQLPrintsCapabilities(t *testing.T) {
	for _, name := range drivers.Names() {
		d, err := drivers.ByName(name)
		if err != nil {
			t.Fatal(err)
		}
		out, errs, code := run(t, "sql", "--dialect", name)
		if code != 0 {
			t.Fatalf("sql --dialect %s: exit %d\n%s", name, code, errs)
		}
		first := strings.Index(out, "\n-- Now: ")
		caps := d.Capabilities().List()
		for _, x := range caps {
			line := fmt.Sprintf("\n-- capability: %s = %s (%s)\n", x.Name, x.Value, x.Meaning)
			if i := strings.Index(out, line); i < 0 || i > first {
				t.Errorf("%s: %q missing or not above the statements", name, line)
			}
		}
		out, errs, code = run(t, "sql", "--dialect", name, "--output", "json")
		if code != 0 {
			t.Fatalf("sql --dialect %s --output json: exit %d\n%s", name, code, errs)
		}
		var doc struct {
			Capabilities []drivers.Capability `json:"capabilities"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil || fmt.Sprint(doc.Capabilities) != fmt.Sprint(caps) {
			t.Errorf("%s: JSON capabilities %v (%v), want %v", name, doc.Capabilities, err, caps)
		}
	}
	out, _, _ := run(t, "sql", "--dialect", "oracle")
	for _, want := range []string{
		"-- capability: wait mode = queue-exclusive (",
		"-- capability: wait bound = in-statement (",
		"-- capability: pool claim = procedure (",
		"-- capability: hold limit = dba (",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("sql --dialect oracle lacks %q", want)
		}
	}
}

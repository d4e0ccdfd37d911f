package commands_test

import (
	"encoding/json"
	"fmt"
	"os"
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

// The features' statement catalogues (drivers.Catalogue), which loanq
// links every one of: each compiles and checks on every dialect; a driver
// overrides statements of declared catalogues only (a misspelt name would
// leave the portable text in use, unnoticed); no statement name is used
// twice (`loanq sql` and the overrides name statements by field); `loanq
// sql` prints every one; and Oracle's golden file pins every catalogue
// (drivers/oracle/catalogues_test.go links them in).
func TestCatalogues(t *testing.T) {
	declared := map[string]bool{}
	for _, c := range drivers.Catalogues() {
		declared[c.Name()] = true
	}
	if len(declared) < 9 {
		t.Fatalf("only %d statement catalogues declared", len(declared))
	}
	golden, err := os.ReadFile("../testdata/oracle/statements.sql")
	if err != nil {
		t.Fatal(err)
	}
	for name := range declared {
		if !strings.Contains(string(golden), "\n-- catalogue "+name+"\n") {
			t.Errorf("testdata/oracle/statements.sql lacks the catalogue %s: import its package in drivers/oracle/catalogues_test.go and run `go test ./drivers/oracle -run Golden -update`", name)
		}
	}
	for _, name := range drivers.Names() {
		d, err := drivers.ByName(name)
		if err != nil {
			t.Fatal(err)
		}
		for c := range d.CatalogueSQL() {
			if !declared[c] {
				t.Errorf("%s overrides statements of a catalogue %q nothing declares", name, c)
			}
		}
		out, errs, code := run(t, "sql", "--dialect", name)
		if code != 0 {
			t.Fatalf("sql --dialect %s: exit %d\n%s", name, code, errs)
		}
		seen := map[string]bool{}
		for _, n := range d.Statements().List() {
			seen[n.Field] = true
		}
		for _, c := range drivers.Catalogues() {
			cat, err := c.Compiled(d)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			for _, n := range drivers.ListCatalogue(cat) {
				if seen[n.Field] {
					t.Errorf("%s: statement name %s used twice", name, n.Field)
				}
				seen[n.Field] = true
				if !strings.Contains(out, fmt.Sprintf("\n-- %s: %s\n%s\n", n.Field, n.Purpose, n.SQL)) {
					t.Errorf("sql --dialect %s does not print %s (catalogue %s)", name, n.Field, c.Name())
				}
			}
		}
	}
}

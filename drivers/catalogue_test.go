package drivers

import (
	"github.com/loanq/loanq/drivers/engineio"
	"strings"
	"testing"
)

// catalogueDriver is the part of a Driver a catalogue reads: its name, its
// dialect and its overrides.
type catalogueDriver struct {
	Driver
	name      string
	overrides Overrides
}

func (d catalogueDriver) Name() string            { return d.name }
func (d catalogueDriver) Dialect() Dialect        { return dollar }
func (d catalogueDriver) CatalogueSQL() Overrides { return d.overrides }

type testCatalogue struct {
	Count Query[engineio.TaskParams, engineio.Count] `purpose:"count"`
	Touch Stmt[engineio.IDParams]                    `purpose:"touch"`
}

func portableTestCatalogue() *testCatalogue {
	return &testCatalogue{
		Count: Query[engineio.TaskParams, engineio.Count]{SQL: `SELECT COUNT(*) AS n FROM loanq_work WHERE task_id = :task_id`},
		Touch: Stmt[engineio.IDParams]{SQL: `UPDATE loanq_task SET name = name WHERE id = :id`},
	}
}

// A feature catalogue is compiled per driver with the driver's overrides,
// once; an override of a field it lacks, a read that is not a Query and a
// bind without a parameter field are errors naming the catalogue.
func TestCatalogue(t *testing.T) {
	c := NewCatalogue("test", portableTestCatalogue)
	plain := catalogueDriver{name: "plain"}
	st := c.For(plain)
	if st.Count.Text() != `SELECT COUNT(*) AS n FROM loanq_work WHERE task_id = $1` || c.For(plain) != st {
		t.Errorf("For: %q (compiled once: %v)", st.Count.Text(), c.For(plain) == st)
	}
	own := catalogueDriver{name: "own", overrides: Overrides{"test": {"Touch": `UPDATE loanq_task SET id = id WHERE id = :id`}}}
	if got := c.For(own).Touch.Text(); got != `UPDATE loanq_task SET id = id WHERE id = $1` {
		t.Errorf("overridden Touch: %q", got)
	}
	found := false
	for _, l := range Catalogues() {
		found = found || l == Listing(c)
	}
	if !found {
		t.Error("Catalogues does not list the declared catalogue")
	}
	for _, bad := range []struct {
		name, field, text, want string
	}{
		{"unknown field", "Nope", `SELECT 1`, "Nope"},
		{"untyped read", "Touch", `SELECT id FROM loanq_task WHERE id = :id`, "not a drivers.Query"},
		{"unknown bind", "Touch", `UPDATE loanq_task SET name = :name WHERE id = :id`, ":name"},
		{"column", "Count", `SELECT COUNT(*) FROM loanq_work WHERE task_id = :task_id`, "Count"},
	} {
		d := catalogueDriver{name: bad.name, overrides: Overrides{"test": {bad.field: bad.text}}}
		if _, err := c.Compiled(d); err == nil || !strings.Contains(err.Error(), bad.want) || !strings.Contains(err.Error(), "catalogue test") {
			t.Errorf("%s: %v, want an error about %s", bad.name, err, bad.want)
		}
	}
	defer func() {
		if r := recover(); r == nil {
			t.Error("a second catalogue named test was declared")
		}
	}()
	NewCatalogue("test", portableTestCatalogue)
}

package all

import (
	"reflect"
	"strings"
	"testing"

	"github.com/loanq/loanq/drivers"
)

// sentForEffect are the statements that are a SELECT on some dialect but
// are run for what they do, never read: PostgreSQL sets its transaction's
// settings with SELECT set_config(…).
var sentForEffect = map[string]bool{"WaitLockSet": true, "WaitLockRestore": true, "HoldLimitSet": true}

// Every statement a dialect reads rows from is a drivers.Query, whose
// columns the driver's build checked against its row type: loading the
// drivers (this package's import) panics, failing every test, when an
// override names, drops or moves a column. A SELECT left a plain Stmt
// would be read without that check. (A feature's catalogue, drivers.Catalogue,
// refuses a read that is not a Query when it is compiled.)
func TestEveryReadIsTyped(t *testing.T) {
	st := reflect.TypeOf(drivers.Statements{})
	for _, name := range drivers.Names() {
		d, err := drivers.ByName(name)
		if err != nil {
			t.Fatal(err)
		}
		typed := 0
		for i, n := range d.Statements().List() {
			isQuery := strings.HasPrefix(st.Field(i).Type.Name(), "Query[")
			verb := strings.ToUpper(strings.Fields(n.SQL + " x")[0])
			switch {
			case n.SQL == "":
			case isQuery:
				typed++
				if _, err := drivers.SelectColumns(n.SQL); err != nil {
					t.Errorf("%s %s: %v", name, n.Field, err)
				}
			case (verb == "SELECT" || verb == "WITH") && !sentForEffect[n.Field]:
				t.Errorf("%s %s returns rows but is a %s, not a drivers.Query with a row type", name, n.Field, st.Field(i).Type.Name())
			}
		}
		if typed < 25 {
			t.Errorf("%s: only %d typed reads", name, typed)
		}
	}
}

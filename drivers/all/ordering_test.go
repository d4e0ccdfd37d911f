package all

import (
	"strings"
	"testing"

	"github.com/loanq/loanq/drivers"
)

// "Oldest first" and "latest" mean by time, then id, on every dialect: Oracle
// identity columns are NOORDER by default, so on RAC each instance hands out
// ids from its own cached range and id order is not arrival order.
func TestOldestFirstIsByTimeThenID(t *testing.T) {
	want := map[string]string{
		"RequestsPending": "ORDER BY created_at, id",
		"LastWork":        "ORDER BY assigned_at DESC, id DESC",
		"Pipeline":        "ORDER BY",
	}
	for _, name := range drivers.Names() {
		d, err := drivers.ByName(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range d.Statements().List() {
			w, ok := want[n.Field]
			if !ok {
				continue
			}
			if !strings.Contains(n.SQL, w) {
				t.Errorf("%s %s does not order by time then id (%q):\n%s", name, n.Field, w, n.SQL)
			}
			if strings.Contains(n.SQL, "ORDER BY id") || strings.Contains(n.SQL, "ORDER BY w.id") {
				t.Errorf("%s %s orders by id alone:\n%s", name, n.Field, n.SQL)
			}
		}
	}
}

package oracle

import (
	"testing"

	"github.com/loanq/loanq/drivers"

	// The features' statement catalogues (drivers.Catalogue), linked in so
	// that the golden file and the statement rules cover every statement
	// loanq sends to Oracle, not the engine's alone. TestCatalogues
	// (commands/) checks that testdata/oracle/statements.sql holds every
	// catalogue loanq declares.
	_ "github.com/loanq/loanq/dashboard"
	_ "github.com/loanq/loanq/dispatch"
	_ "github.com/loanq/loanq/namedlock"
)

// catalogues returns each feature catalogue's statements as Oracle
// receives them, by catalogue.
func catalogues(t *testing.T) map[string][]drivers.Named {
	t.Helper()
	out := map[string][]drivers.Named{}
	for _, c := range drivers.Catalogues() {
		cat, err := c.Compiled(&Driver{})
		if err != nil {
			t.Fatal(err)
		}
		out[c.Name()] = drivers.ListCatalogue(cat)
	}
	return out
}

// everyStatement is the engine's statements, then every catalogue's.
func everyStatement(t *testing.T) []drivers.Named {
	t.Helper()
	list := (&Driver{}).Statements().List()
	byName := catalogues(t)
	for _, c := range drivers.Catalogues() {
		list = append(list, byName[c.Name()]...)
	}
	return list
}

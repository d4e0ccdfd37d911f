package roles

import (
	"slices"
	"testing"
)

// What a role is granted is one of LoanqTables, the list every grant script
// revokes on first: a table granted but not revoked would outlive a re-grant.
func TestGrantedTablesAreRevokedFirst(t *testing.T) {
	for _, role := range All {
		p, err := PlanGrants(Request{Role: role, Account: "acct"})
		if err != nil {
			t.Fatal(err)
		}
		for _, tg := range p.Tables {
			if !slices.Contains(LoanqTables, tg.Table) {
				t.Errorf("role %s is granted %s, which LoanqTables (the revoke list) does not name", role, tg.Table)
			}
		}
	}
}

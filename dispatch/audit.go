package dispatch

import (
	"context"
	"fmt"

	"github.com/loanq/loanq/drivers"
)

// Finding is the outcome of one audit query.
type Finding struct {
	Check   string `json:"check"`
	Purpose string `json:"purpose"`
	Count   int64  `json:"count"`
}

// Audit runs the audit statements (auditsql.go) and returns one finding
// per check; a healthy database has every count at 0 (AuditPending only
// once no caller is still running).
func (a *Admin) Audit(ctx context.Context) ([]Finding, error) {
	audits := drivers.ListCatalogue(auditCatalogue.For(a.driver))
	out := make([]Finding, 0, len(audits))
	for _, q := range audits {
		var n int64
		if err := a.db.QueryRowContext(ctx, q.SQL).Scan(&n); err != nil {
			return nil, fmt.Errorf("audit %s: %w", q.Field, err)
		}
		out = append(out, Finding{Check: q.Field, Purpose: q.Purpose, Count: n})
	}
	return out, nil
}

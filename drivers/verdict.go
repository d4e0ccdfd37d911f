package drivers

import "database/sql"

// TaskVerdictParams binds TaskVerdictSet.
type TaskVerdictParams struct {
	ID      int64          `bind:"id"`
	Verdict sql.NullString `bind:"verdict"` // NULL: not probed
}

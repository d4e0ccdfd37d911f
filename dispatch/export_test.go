package dispatch

// SetBeforeCommit lets tests act inside the assignment transaction, just
// before it commits (to place a request in the race window of SPEC §3 step 7).
func (e *Engine) SetBeforeCommit(f func()) { e.beforeCommit = f }

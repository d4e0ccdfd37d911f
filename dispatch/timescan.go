package dispatch

import "time"

// AsTime converts a timestamp column as any driver returns it (time.Time, or
// ISO text from SQLite) to UTC time; nil gives the zero time. For the
// packages beside the engine (locks) that read loanq's own tables.
func AsTime(v any) (time.Time, error) { return asTime(v) }

package jsondoc

import (
	"encoding/json"
	"io"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/loankey"
)

// HistoryRecord is one event of `loanq history --output json`
// (docs/json.md, "history"): one JSON object per line, every key on every
// line, in this order; the disposition's keys are null for an assignment.
type HistoryRecord struct {
	ID          int64       `json:"id"`
	Event       string      `json:"event"`
	At          string      `json:"at"`
	Task        string      `json:"task"`
	Loan        loankey.Key `json:"loan"`
	User        string      `json:"user"`
	RequestID   int64       `json:"request_id"`
	WorkID      int64       `json:"work_id"`
	AssignedAt  string      `json:"assigned_at"`
	Disposition *string     `json:"disposition"`
	DisposedAt  *string     `json:"disposed_at"`
	DisposedBy  *string     `json:"disposed_by"`
	Reason      *string     `json:"reason"`
	Note        *string     `json:"note"`
	ReturnAt    *string     `json:"return_at"`
}

// History is an event's record.
func History(ev *dispatch.HistoryEvent) HistoryRecord {
	r := HistoryRecord{ID: ev.ID, Event: ev.Event, At: Timestamp(ev.At), Task: ev.Task, Loan: ev.Loan, User: ev.User,
		RequestID: ev.RequestID, WorkID: ev.WorkID, AssignedAt: Timestamp(ev.AssignedAt)}
	if ev.Event == "disposed" {
		r.Disposition, r.DisposedAt, r.DisposedBy = orNull(ev.Disposition), timeOrNull(ev.DisposedAt), orNull(ev.DisposedBy)
		r.Reason, r.Note, r.ReturnAt = orNull(ev.Reason), orNull(ev.Note), timeOrNull(ev.ReturnAt)
	}
	return r
}

// LineWriter writes documents one per line, compact (JSON Lines), with the
// conventions of Write: no HTML escaping, times already formatted by
// Timestamp.
type LineWriter struct{ enc *json.Encoder }

// NewLineWriter writes to w.
func NewLineWriter(w io.Writer) *LineWriter {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &LineWriter{enc: enc}
}

// Write writes v and a newline.
func (l *LineWriter) Write(v any) error { return l.enc.Encode(v) }

// Timestamp is a time as every JSON document prints it (TimestampLayout);
// "" for the zero time.
func Timestamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(TimestampLayout)
}

func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func timeOrNull(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(TimestampLayout)
	return &s
}

package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/loanq/loanq/loankey"
	"github.com/loanq/loanq/problem"
)

// The history export (`loanq history`, docs/retention.md "Export, then
// prune"): loanq_history's events in id order, each with its work row and
// task, streamed batch by batch; the caller writes each event as it comes
// and keeps nothing, so memory stays one batch however long the history.
// The id of the last event written is the cursor a later export resumes
// after (--after-id).
//
// Commit order. An event's id is taken when its trigger runs, but the
// event is seen only once its transaction commits, so an event with a lower
// id may appear after a reader went past it. The export therefore ends at
// the first event written less than Settle before the export started (the
// settle horizon): every event older than that whose transaction committed
// within Settle of writing it is visible, in id order, when it is read. An
// event whose transaction stays open longer than Settle after writing it
// may be passed by a reader and is then missed by the exports that resume
// after it (docs/retention.md says the guarantee and its limit).

// History limits and defaults.
const (
	DefaultHistorySettle = 10 * time.Second
	DefaultHistoryBatch  = 1000
	MaxHistoryBatch      = 10000
)

// HistoryOptions says which events an export writes.
type HistoryOptions struct {
	Task    string // "" for every task
	User    string // "" for every assignee
	AfterID int64  // only events with a greater id (the cursor)
	// SinceAge, when positive, keeps the events written at or after the
	// database's clock minus SinceAge, at the start of the export.
	SinceAge time.Duration
	// SinceTime, when not zero, keeps the events written at or after it.
	SinceTime time.Time
	// Settle is the settle window: the export ends at the first event
	// written less than Settle before it started.
	Settle time.Duration
	Batch  int // events per statement
}

// HistoryEvent is one event: an assignment or a disposition of a work row.
// For an assignment the disposition's fields are empty (zero), whatever the
// work row holds now.
type HistoryEvent struct {
	ID          int64
	Event       string // "assigned" or "disposed"
	At          time.Time
	Task        string
	Loan        loankey.Key
	User        string
	RequestID   int64
	WorkID      int64
	AssignedAt  time.Time
	Disposition string
	DisposedAt  time.Time
	DisposedBy  string
	Reason      string
	Note        string
	ReturnAt    time.Time
}

// HistoryResult is how an export ended.
type HistoryResult struct {
	Events int64 // events written
	// LastID is the id of the last event written: the cursor to resume
	// after; AfterID when none was.
	LastID int64
	// Settling is true when the export stopped at an event younger than
	// the settle window (more may follow once it is older).
	Settling bool
}

// ValidateHistory checks an export's options before the database is
// touched.
func ValidateHistory(o HistoryOptions) error {
	if o.AfterID < 0 {
		return problem.Usagef("invalid --after-id %d: give 0 (from the start) or the id of the last event an export wrote", o.AfterID)
	}
	if o.Settle < 0 {
		return problem.Usagef("invalid --settle %s: give 0s or a positive duration such as 10s", o.Settle)
	}
	if o.SinceAge < 0 {
		return problem.Usagef("invalid --since %s: give a positive duration such as 24h, or a time such as 2024-05-01T00:00:00Z", o.SinceAge)
	}
	if o.Batch < 1 || o.Batch > MaxHistoryBatch {
		return problem.Usagef("invalid --batch %d: give 1 to %d (events per statement)", o.Batch, MaxHistoryBatch)
	}
	if o.Task != "" {
		if err := ValidateTaskName(o.Task); err != nil {
			return err
		}
	}
	if o.User != "" {
		return validateUser(o.User)
	}
	return nil
}

// errSettling stops a batch's reading at the first event younger than the
// settle window.
var errSettling = errors.New("settling")

// ExportHistory writes the events after o.AfterID that match o, in id order,
// calling emit with each; an error of emit stops the export and is
// returned. The event passed to emit is reused for the next one.
func (a *Admin) ExportHistory(ctx context.Context, o HistoryOptions, emit func(*HistoryEvent) error) (*HistoryResult, error) {
	if err := ValidateHistory(o); err != nil {
		return nil, err
	}
	p := historyBatchParams{After: o.AfterID, AnyUser: 1, AnySince: 1, Limit: o.Batch, User: o.User}
	if o.Task != "" {
		t, err := a.Task(ctx, o.Task)
		if err != nil {
			return nil, err
		}
		p.TaskID = t.ID
	}
	if o.User != "" {
		p.AnyUser = 0
	}
	// The horizons are instants of the database clock, bound as ages from
	// "now" (every dialect's clock arithmetic, no time value bound): each
	// batch adds the time elapsed since the start, measured here with a
	// monotonic clock, so that every batch names the same instants.
	start := time.Now()
	var sinceMS int64
	switch {
	case !o.SinceTime.IsZero():
		now, err := a.dbNow(ctx)
		if err != nil {
			return nil, err
		}
		sinceMS, p.AnySince = now.Sub(o.SinceTime).Milliseconds(), 0
	case o.SinceAge > 0:
		sinceMS, p.AnySince = o.SinceAge.Milliseconds(), 0
	}
	res := &HistoryResult{LastID: o.AfterID}
	var ev HistoryEvent
	st := a.historySQL()
	for {
		elapsed := time.Since(start).Milliseconds()
		p.SettleMS, p.SinceMS = o.Settle.Milliseconds()+elapsed, sinceMS+elapsed
		n := 0
		err := st.HistoryBatch.Each(ctx, a.db, p, func(r eventRow) error {
			if r.Young != 0 {
				return errSettling
			}
			n++
			r.fill(&ev)
			if err := emit(&ev); err != nil {
				return err
			}
			res.Events++
			res.LastID, p.After = r.ID, r.ID
			return nil
		})
		if errors.Is(err, errSettling) {
			res.Settling = true
			return res, nil
		}
		if err != nil {
			return res, fmt.Errorf("reading the history after event %d: %w", p.After, err)
		}
		if n < o.Batch {
			return res, nil
		}
	}
}

// fill sets ev from the row; an assignment's disposition fields are empty.
func (r *eventRow) fill(ev *HistoryEvent) {
	*ev = HistoryEvent{
		ID: r.ID, Event: r.Event, At: r.At.T, Task: r.Task, Loan: loankey.New(loankey.ParseKind(r.KeyKind), r.LoanID),
		User: r.User, RequestID: r.RequestID, WorkID: r.WorkID, AssignedAt: r.AssignedAt.T,
	}
	if r.Event == "disposed" {
		ev.Disposition, ev.DisposedAt, ev.DisposedBy = r.Disposition.String, r.DisposedAt.T, r.DisposedBy.String
		ev.Reason, ev.Note, ev.ReturnAt = r.Reason.String, r.Note.String, r.ReturnAt.T
	}
}

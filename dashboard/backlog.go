package dashboard

import (
	"context"
	"time"

	"github.com/loanq/loanq/dispatch"
)

// DefaultBacklogEvery is how often `loanq serve` counts every task's backlog
// by default (--backlog-every): a count reads every eligible row, so it runs
// on its own schedule, never at the dashboard's refreshes (every few seconds).
const DefaultBacklogEvery = time.Minute

// CountBacklogs counts the backlog of every task once, one statement after
// another on one connection, and keeps the figures for the snapshots. A task
// whose count fails keeps no figure (shown as unknown, with the time of the
// failure); the failure goes to Log, the driver's text being for the
// operator's log only.
func (s *Source) CountBacklogs(ctx context.Context) {
	tasks, err := s.Admin.Tasks(ctx)
	if err != nil {
		if s.Log != nil && ctx.Err() == nil {
			s.Log("backlog count: reading the tasks: " + err.Error())
		}
		return
	}
	for _, t := range tasks {
		b, err := s.Admin.CountBacklog(ctx, t)
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		if s.backlogs == nil {
			s.backlogs = map[int64]*dispatch.Backlog{}
		}
		if s.backlogErr == nil {
			s.backlogErr = map[int64]string{}
		}
		// A failure is logged when it first happens, not at every round:
		// an account without SELECT on the source fails every minute.
		logIt := ""
		if err != nil {
			delete(s.backlogs, t.ID)
			if s.backlogErr[t.ID] != err.Error() {
				logIt = "backlog count: " + err.Error()
			}
			s.backlogErr[t.ID] = err.Error()
		} else {
			s.backlogs[t.ID] = b
			delete(s.backlogErr, t.ID)
		}
		s.mu.Unlock()
		if logIt != "" && s.Log != nil {
			s.Log(logIt)
		}
	}
}

// RunBacklog counts the backlogs at once, then every every, until ctx ends.
func (s *Source) RunBacklog(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		s.CountBacklogs(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// backlog returns task id's latest backlog count, aged now (nil: none yet,
// or the latest count failed).
func (s *Source) backlog(id int64, now time.Time) *dispatch.Backlog {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.backlogs[id].Aged(now)
}

package dispatch_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/testkit/testdb"
	"github.com/loanq/loanq/problem"
)

// export runs an export to its end and returns its events (copies).
func export(t *testing.T, e *dispatch.Engine, o dispatch.HistoryOptions) ([]dispatch.HistoryEvent, *dispatch.HistoryResult) {
	t.Helper()
	if o.Batch == 0 {
		o.Batch = dispatch.DefaultHistoryBatch
	}
	// With no settle window, an event of the export's very millisecond
	// (SQLite's clock) is still younger than the horizon.
	time.Sleep(2 * time.Millisecond)
	var out []dispatch.HistoryEvent
	res, err := e.Admin().ExportHistory(context.Background(), o, func(ev *dispatch.HistoryEvent) error {
		out = append(out, *ev)
		return nil
	})
	if err != nil {
		t.Fatalf("export %+v: %v", o, err)
	}
	return out, res
}

func eventIDs(evs []dispatch.HistoryEvent) []int64 {
	ids := make([]int64, len(evs))
	for i, ev := range evs {
		ids[i] = ev.ID
	}
	return ids
}

// tableEvents is loanq_history as the database holds it: "id work_id
// event" per row, in id order.
func tableEvents(t *testing.T, f *fixture) []string {
	t.Helper()
	rows, err := f.db.Query("SELECT id, work_id, event FROM loanq_history ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, work int64
		var ev string
		if err := rows.Scan(&id, &work, &ev); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%d %d %s", id, work, ev))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func exportedEvents(evs []dispatch.HistoryEvent) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = fmt.Sprintf("%d %d %s", ev.ID, ev.WorkID, ev.Event)
	}
	return out
}

// Every writer of loanq_work records its events, through the database's
// triggers: serving rounds and claims of every strategy the driver offers,
// a pool claim, each disposition (with a reason and a note), reclaim,
// expiry past the max hold, and SQL written by hand. The export writes
// each work row's assignment and, once disposed, its disposition, with
// the work row's fields, in id order; the table holds exactly those events.
func TestHistoryEventsOfEveryWriter(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 200)
		ctx := context.Background()
		never := dispatch.Reasons{Codes: map[string][]string{dispatch.Never: {"fraud", "duplicate"}}}
		var tasks []string
		for _, s := range f.d.Capabilities().Strategies {
			name := "h-" + string(s)
			f.task(t, dispatch.TaskSpec{Name: name, Lock: s, Reasons: never})
			tasks = append(tasks, name)
		}
		f.task(t, dispatch.TaskSpec{Name: "h-pool", Prefetch: 10, Reasons: never})
		f.task(t, dispatch.TaskSpec{Name: "h-hold", MaxHold: time.Second})
		tasks = append(tasks, "h-pool")
		for _, name := range tasks {
			r, err := f.e.Get(ctx, name, "ana", 5, fast)
			if err != nil || r.Assigned != 5 {
				t.Fatalf("%s: get %+v %v", name, r, err)
			}
			dispose := func(i int, action string, after time.Duration, note dispatch.DispositionNote) {
				t.Helper()
				if _, err := f.e.DisposeNoted(ctx, name, r.Loans[i].Text, "ana", action, after, after > 0, note); err != nil {
					t.Fatalf("%s: dispose %s %s: %v", name, r.Loans[i], action, err)
				}
			}
			dispose(0, dispatch.Complete, 0, dispatch.DispositionNote{Note: `checked, "all" fine` + "\nsecond line"})
			dispose(1, dispatch.Return, time.Hour, dispatch.DispositionNote{})
			dispose(2, dispatch.Never, 0, dispatch.DispositionNote{Reason: "fraud"})
			// 3 and 4 are reclaimed by a supervisor.
			if _, err := f.e.Reclaim(ctx, name, "sam", "ana", 0, false); err != nil {
				t.Fatal(err)
			}
		}
		// Expiry: bob's loan of h-hold is past its max hold when carl asks.
		if r, err := f.e.Get(ctx, "h-hold", "bob", 1, fast); err != nil || r.Assigned != 1 {
			t.Fatalf("h-hold: %+v %v", r, err)
		}
		time.Sleep(1200 * time.Millisecond)
		if r, err := f.e.Get(ctx, "h-hold", "carl", 1, fast); err != nil || r.Assigned != 1 {
			t.Fatalf("h-hold: %+v %v", r, err)
		}
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_work WHERE user_name = 'bob' AND disposition = 'expired'"); n != 1 {
			t.Fatalf("bob's work did not expire (%d)", n)
		}
		// By hand: a work row inserted and disposed with plain SQL (the
		// owner's account), and a later update of a disposed row, which is
		// no event.
		hold := f.count(t, "SELECT id FROM loanq_task WHERE name = 'h-hold'")
		now := f.d.Dialect().Now()
		testdb.Exec(t, f.d, f.db, "INSERT INTO loanq_work_request (task_id, user_name, requested, assigned, status, created_at, served_at) VALUES (?, 'dan', 1, 1, 'assigned', "+now+", "+now+")", hold)
		req := f.count(t, "SELECT MAX(id) FROM loanq_work_request WHERE task_id = ?", hold)
		testdb.Exec(t, f.d, f.db, "INSERT INTO loanq_work (task_id, loan_id, user_name, request_id, assigned_at) VALUES (?, '199', 'dan', ?, "+now+")", hold, req)
		testdb.Exec(t, f.d, f.db, "UPDATE loanq_work SET disposition = 'complete', disposed_at = "+f.d.Dialect().Now()+" WHERE loan_id = '199'")
		testdb.Exec(t, f.d, f.db, "UPDATE loanq_work SET note = 'later' WHERE loan_id = '199'")

		evs, res := export(t, f.e, dispatch.HistoryOptions{Batch: 7})
		if res.Settling || int64(len(evs)) != res.Events || (len(evs) > 0 && res.LastID != evs[len(evs)-1].ID) {
			t.Errorf("result %+v for %d events", res, len(evs))
		}
		if got, want := strings.Join(exportedEvents(evs), "\n"), strings.Join(tableEvents(t, f), "\n"); got != want {
			t.Fatalf("export:\n%s\nwant the table:\n%s", got, want)
		}
		// One assignment per work row, one disposition per disposed row.
		work := f.count(t, "SELECT COUNT(*) FROM loanq_work")
		disposed := f.count(t, "SELECT COUNT(*) FROM loanq_work WHERE disposition IS NOT NULL")
		byKind := map[string]int64{}
		seen := map[string]bool{}
		for i, ev := range evs {
			byKind[ev.Event]++
			key := fmt.Sprint(ev.WorkID, ev.Event)
			if seen[key] {
				t.Errorf("work row %d has two %s events", ev.WorkID, ev.Event)
			}
			seen[key] = true
			if i > 0 && ev.ID <= evs[i-1].ID {
				t.Errorf("ids not increasing: %d after %d", ev.ID, evs[i-1].ID)
			}
			if ev.Event == "disposed" && !seen[fmt.Sprint(ev.WorkID, "assigned")] {
				t.Errorf("work row %d: disposed before its assignment", ev.WorkID)
			}
			if ev.At.IsZero() || ev.AssignedAt.IsZero() || ev.Task == "" || ev.User == "" || ev.RequestID == 0 || ev.Loan.Text == "" {
				t.Errorf("event %d lacks a field: %+v", ev.ID, ev)
			}
		}
		if byKind["assigned"] != work || byKind["disposed"] != disposed {
			t.Errorf("events %v; want %d assigned (work rows), %d disposed", byKind, work, disposed)
		}
		// The fields: each disposition as written, nothing on an assignment.
		kinds := map[string]int{}
		for _, ev := range evs {
			if ev.Event == "assigned" {
				if ev.Disposition != "" || !ev.DisposedAt.IsZero() || ev.Note != "" || ev.Reason != "" || ev.DisposedBy != "" || !ev.ReturnAt.IsZero() {
					t.Errorf("assignment %d carries its row's disposition: %+v", ev.ID, ev)
				}
				continue
			}
			kinds[ev.Disposition]++
			if ev.DisposedAt.IsZero() || ev.DisposedAt.Before(ev.AssignedAt) {
				t.Errorf("disposition %d: disposed_at %v, assigned_at %v", ev.ID, ev.DisposedAt, ev.AssignedAt)
			}
			switch ev.Disposition {
			case dispatch.Complete:
				if ev.User == "ana" && ev.Note != "checked, \"all\" fine\nsecond line" {
					t.Errorf("complete %d: note %q", ev.ID, ev.Note)
				}
			case dispatch.Return:
				if !ev.ReturnAt.After(ev.DisposedAt.Add(59 * time.Minute)) {
					t.Errorf("return %d: return_at %v, disposed %v", ev.ID, ev.ReturnAt, ev.DisposedAt)
				}
			case dispatch.Never:
				if ev.Reason != "fraud" {
					t.Errorf("never %d: reason %q", ev.ID, ev.Reason)
				}
			case "reclaimed":
				if ev.DisposedBy != "sam" {
					t.Errorf("reclaimed %d: disposed_by %q", ev.ID, ev.DisposedBy)
				}
			}
		}
		n := len(tasks)
		if want := fmt.Sprint(map[string]int{"complete": n + 1, "return": n, "never": n, "reclaimed": 2 * n, "expired": 1}); fmt.Sprint(kinds) != want {
			t.Errorf("dispositions %v, want %s", kinds, want)
		}
		f.audit(t)
	})
}

// Filters, batches and resumption: --task, --user and --since keep the
// matching events in id order; any batch size gives the same stream; an
// export resumed after each id it wrote writes the rest exactly once.
func TestHistoryFiltersAndResume(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 40)
		ctx := context.Background()
		f.task(t, dispatch.TaskSpec{Name: "fa"})
		f.task(t, dispatch.TaskSpec{Name: "fb"})
		for _, u := range []string{"ann", "bob"} {
			for _, task := range []string{"fa", "fb"} {
				r, err := f.e.Get(ctx, task, u, 3, fast)
				if err != nil || r.Assigned != 3 {
					t.Fatalf("get %s %s: %+v %v", task, u, r, err)
				}
				if _, err := f.e.Dispose(ctx, task, r.Loans[0].Text, u, dispatch.Complete, 0, false); err != nil {
					t.Fatal(err)
				}
			}
		}
		all, _ := export(t, f.e, dispatch.HistoryOptions{})
		if len(all) != 16 {
			t.Fatalf("%d events, want 16 (12 assignments, 4 dispositions)", len(all))
		}
		for _, batch := range []int{1, 2, 5, dispatch.MaxHistoryBatch} {
			got, _ := export(t, f.e, dispatch.HistoryOptions{Batch: batch})
			if fmt.Sprint(eventIDs(got)) != fmt.Sprint(eventIDs(all)) {
				t.Errorf("batch %d: %v, want %v", batch, eventIDs(got), eventIDs(all))
			}
		}
		match := func(keep func(ev dispatch.HistoryEvent) bool) []int64 {
			var ids []int64
			for _, ev := range all {
				if keep(ev) {
					ids = append(ids, ev.ID)
				}
			}
			return ids
		}
		for _, c := range []struct {
			o    dispatch.HistoryOptions
			keep func(ev dispatch.HistoryEvent) bool
		}{
			{dispatch.HistoryOptions{Task: "fb", Batch: 2}, func(ev dispatch.HistoryEvent) bool { return ev.Task == "fb" }},
			{dispatch.HistoryOptions{User: "bob", Batch: 2}, func(ev dispatch.HistoryEvent) bool { return ev.User == "bob" }},
			{dispatch.HistoryOptions{Task: "fa", User: "ann", Batch: 1}, func(ev dispatch.HistoryEvent) bool { return ev.Task == "fa" && ev.User == "ann" }},
			{dispatch.HistoryOptions{User: "nobody"}, func(ev dispatch.HistoryEvent) bool { return false }},
			{dispatch.HistoryOptions{AfterID: all[9].ID, Task: "fa"}, func(ev dispatch.HistoryEvent) bool { return ev.ID > all[9].ID && ev.Task == "fa" }},
		} {
			got, res := export(t, f.e, c.o)
			want := match(c.keep)
			if fmt.Sprint(eventIDs(got)) != fmt.Sprint(want) {
				t.Errorf("%+v: %v, want %v", c.o, eventIDs(got), want)
			}
			if wantLast := c.o.AfterID; len(want) > 0 {
				wantLast = want[len(want)-1]
				if res.LastID != wantLast {
					t.Errorf("%+v: last id %d, want %d", c.o, res.LastID, wantLast)
				}
			} else if res.LastID != wantLast {
				t.Errorf("%+v: last id %d, want the cursor %d", c.o, res.LastID, wantLast)
			}
		}
		// Resumed after every id: each event once.
		var resumed []int64
		cursor := int64(0)
		for {
			got, res := export(t, f.e, dispatch.HistoryOptions{AfterID: cursor, Batch: 1})
			if len(got) == 0 {
				break
			}
			resumed = append(resumed, got[0].ID)
			if res.LastID != got[len(got)-1].ID {
				t.Fatalf("last id %d, last event %d", res.LastID, got[len(got)-1].ID)
			}
			cursor = got[0].ID // as if the reader had stopped after one event
		}
		if fmt.Sprint(resumed) != fmt.Sprint(eventIDs(all)) {
			t.Errorf("resumed one by one: %v, want %v", resumed, eventIDs(all))
		}
		// --since: the events of the last hour are all of them; moved 3 days
		// back, the first 10 fall out, by age and by time.
		if got, _ := export(t, f.e, dispatch.HistoryOptions{SinceAge: time.Hour}); len(got) != 16 {
			t.Errorf("--since 1h: %d events, want 16", len(got))
		}
		testdb.Exec(t, f.d, f.db, "UPDATE loanq_history SET event_at = "+ago(f, 72*time.Hour)+" WHERE id <= ?", all[9].ID)
		if got, _ := export(t, f.e, dispatch.HistoryOptions{SinceAge: 48 * time.Hour}); fmt.Sprint(eventIDs(got)) != fmt.Sprint(eventIDs(all[10:])) {
			t.Errorf("--since 48h: %v, want %v", eventIDs(got), eventIDs(all[10:]))
		}
		if got, _ := export(t, f.e, dispatch.HistoryOptions{SinceTime: time.Now().Add(-48 * time.Hour)}); fmt.Sprint(eventIDs(got)) != fmt.Sprint(eventIDs(all[10:])) {
			t.Errorf("--since a time 48h ago: %v, want %v", eventIDs(got), eventIDs(all[10:]))
		}
		if got, _ := export(t, f.e, dispatch.HistoryOptions{SinceTime: time.Now().Add(-100 * time.Hour)}); len(got) != 16 {
			t.Errorf("--since a time 100h ago: %d events, want 16", len(got))
		}
		// A task deleted goes with its events; the others' stay.
		fa := match(func(ev dispatch.HistoryEvent) bool { return ev.Task == "fa" })
		if _, err := f.e.Admin().DeleteTask(ctx, "fb", true); err != nil {
			t.Fatal(err)
		}
		if got, _ := export(t, f.e, dispatch.HistoryOptions{}); fmt.Sprint(eventIDs(got)) != fmt.Sprint(fa) || f.count(t, "SELECT COUNT(*) FROM loanq_history") != int64(len(fa)) {
			t.Errorf("after task delete fb: %v, want task fa's %v and nothing else in the table", eventIDs(got), fa)
		}
		// An unknown task is bad input, after connecting.
		_, err := f.e.Admin().ExportHistory(ctx, dispatch.HistoryOptions{Task: "nope", Batch: 10}, func(*dispatch.HistoryEvent) error { return nil })
		if problem.KindOf(err) != problem.Usage {
			t.Errorf("unknown task: %v, want a usage error", err)
		}
	})
}

// The settle window: an export ends at the first event younger than it,
// even when older events follow (ids are taken before commit, so id order
// and time order can differ), and says so; once the window has passed, a
// resumed export writes the rest.
func TestHistorySettle(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 10)
		ctx := context.Background()
		f.task(t, dispatch.TaskSpec{Name: "st"})
		if r, err := f.e.Get(ctx, "st", "ann", 6, fast); err != nil || r.Assigned != 6 {
			t.Fatalf("get: %+v %v", r, err)
		}
		ids := tableEvents(t, f)
		if len(ids) != 6 {
			t.Fatalf("%d events, want 6", len(ids))
		}
		first := f.count(t, "SELECT MIN(id) FROM loanq_history")
		// Everything is younger than an hour: nothing yet.
		got, res := export(t, f.e, dispatch.HistoryOptions{Settle: time.Hour})
		if len(got) != 0 || !res.Settling || res.LastID != 0 {
			t.Fatalf("settle 1h on fresh events: %v %+v, want none, settling", eventIDs(got), res)
		}
		// Events 1, 2, 4, 5, 6 two hours old, 3 fresh: the export stops at 3.
		testdb.Exec(t, f.d, f.db, "UPDATE loanq_history SET event_at = "+ago(f, 2*time.Hour)+" WHERE id <> ?", first+2)
		got, res = export(t, f.e, dispatch.HistoryOptions{Settle: time.Hour, Batch: 2})
		if fmt.Sprint(eventIDs(got)) != fmt.Sprint([]int64{first, first + 1}) || !res.Settling || res.LastID != first+1 {
			t.Fatalf("settle 1h with event %d fresh: %v %+v, want %d and %d, settling", first+2, eventIDs(got), res, first, first+1)
		}
		// Filtered to other users, the fresh event is not theirs: nothing, no stop needed.
		if got, res := export(t, f.e, dispatch.HistoryOptions{Settle: time.Hour, User: "zed"}); len(got) != 0 || res.Settling {
			t.Errorf("settle 1h, user zed: %v %+v", eventIDs(got), res)
		}
		// Once 3 is older than the window, the resumed export writes the rest.
		testdb.Exec(t, f.d, f.db, "UPDATE loanq_history SET event_at = "+ago(f, 2*time.Hour)+" WHERE id = ?", first+2)
		got, res = export(t, f.e, dispatch.HistoryOptions{Settle: time.Hour, AfterID: res.LastID})
		if fmt.Sprint(eventIDs(got)) != fmt.Sprint([]int64{first + 2, first + 3, first + 4, first + 5}) || res.Settling {
			t.Fatalf("resumed: %v %+v", eventIDs(got), res)
		}
	})
}

// Exports resumed with the last id while processors claim and dispose on
// other connections: together they write every event of the final table
// exactly once, in id order (the settle window covers the commits that
// follow an event's id).
func TestHistoryResumedDuringWork(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 400)
		ctx := context.Background()
		for _, s := range f.d.Capabilities().Strategies {
			f.task(t, dispatch.TaskSpec{Name: "c-" + string(s), Lock: s})
		}
		var tasks []string
		for _, s := range f.d.Capabilities().Strategies {
			tasks = append(tasks, "c-"+string(s))
		}
		// Loanq's own transactions commit within milliseconds of their
		// events; 2s leaves room for a loaded machine.
		const settle = 2 * time.Second
		stop := make(chan struct{})
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for w := 0; w < 4; w++ {
			wg.Add(1)
			e := f.engine(t)
			go func(w int) {
				defer wg.Done()
				user := fmt.Sprintf("w%d", w)
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					task := tasks[(w+i)%len(tasks)]
					r, err := e.Get(ctx, task, user, 2, fast)
					if err != nil {
						errs <- err
						return
					}
					for _, l := range r.Loans {
						if _, err := e.Dispose(ctx, task, l.Text, user, dispatch.Complete, 0, false); err != nil {
							errs <- err
							return
						}
					}
				}
			}(w)
		}
		reader := f.engine(t)
		var got []int64
		cursor := int64(0)
		deadline := time.Now().Add(4 * time.Second)
		for time.Now().Before(deadline) {
			evs, res := export(t, reader, dispatch.HistoryOptions{AfterID: cursor, Settle: settle, Batch: 50})
			got = append(got, eventIDs(evs)...)
			cursor = res.LastID
			time.Sleep(30 * time.Millisecond)
		}
		close(stop)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		time.Sleep(settle + 100*time.Millisecond)
		evs, _ := export(t, reader, dispatch.HistoryOptions{AfterID: cursor, Settle: settle})
		got = append(got, eventIDs(evs)...)
		var want []int64
		for _, s := range tableEvents(t, f) {
			var id int64
			fmt.Sscan(s, &id)
			want = append(want, id)
		}
		if len(want) < 50 {
			t.Fatalf("only %d events were written: the workers did little", len(want))
		}
		if !sort.SliceIsSorted(got, func(i, j int) bool { return got[i] < got[j] }) {
			t.Errorf("resumed exports are not in id order")
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("resumed exports wrote %d events, the table holds %d:\n got %v\nwant %v", len(got), len(want), got, want)
		}
		t.Logf("%d events, every one exported once", len(got))
	})
}

// Bad options are refused before the database is asked.
func TestHistoryRefusesBadInput(t *testing.T) {
	for _, o := range []dispatch.HistoryOptions{
		{AfterID: -1, Batch: 10},
		{Settle: -time.Second, Batch: 10},
		{SinceAge: -time.Hour, Batch: 10},
		{Batch: 0},
		{Batch: dispatch.MaxHistoryBatch + 1},
		{Task: "bad name;", Batch: 10},
		{User: " padded ", Batch: 10},
	} {
		err := dispatch.ValidateHistory(o)
		if problem.KindOf(err) != problem.Usage {
			t.Errorf("%+v: %v, want a usage error", o, err)
		}
		var a *dispatch.Admin // no database: a nil admin would panic if asked
		if _, err := a.ExportHistory(context.Background(), o, nil); problem.KindOf(err) != problem.Usage {
			t.Errorf("ExportHistory %+v: %v, want a usage error before any query", o, err)
		}
	}
}

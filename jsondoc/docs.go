package jsondoc

import "github.com/loanq/loanq/dispatch"

// Task is a task's document: in `task create`, `task update`, `task list`
// and `task show`, and in the API's GET /api/v1/tasks.
func Task(t *dispatch.Task) map[string]any {
	m := map[string]any{"name": t.Name, "source": t.Source, "key": t.Key, "key_kind": t.KeyKind.String(), "where": t.Where, "order": t.Order,
		"max_active": t.MaxActive, "lock": t.Lock, "query_delay_ms": t.QueryDelay.Milliseconds(),
		"lease_ttl_ms": t.LeaseTTL.Milliseconds(), "created_by": t.CreatedBy, "created_at": t.CreatedAt.UTC().Format(TimestampLayout)}
	// null: the default, derived from the measured criteria-query time.
	m["hold_limit_ms"] = nil
	if t.HoldLimit > 0 {
		m["hold_limit_ms"] = t.HoldLimit.Milliseconds()
	}
	// null: active work never expires.
	m["max_hold_ms"] = nil
	if t.MaxHold > 0 {
		m["max_hold_ms"] = t.MaxHold.Milliseconds()
	}
	// 0: no candidate pool.
	m["prefetch"] = t.Prefetch
	if t.Prefetch > 0 {
		m["prefetch_ttl_ms"] = t.PrefetchTTL.Milliseconds()
		m["prefetch_low"] = t.PrefetchLow
	}
	// Priority orders work next; show and link: what each loan shows
	// (docs/json.md). null link: none.
	m["priority"] = t.Priority
	m["show"] = append([]string{}, t.Show...)
	m["link"] = nil
	if t.Link != "" {
		m["link"] = t.Link
	}
	return m
}

// Reclaim is the document of `work reclaim` and of the API's
// POST /api/v1/tasks/{task}/reclaim.
func Reclaim(task, by string, dry bool, items []dispatch.ReclaimItem) map[string]any {
	out := make([]map[string]any, len(items))
	for i, it := range items {
		out[i] = map[string]any{"loan_id": it.LoanID, "user": it.User,
			"assigned_at": it.AssignedAt.UTC().Format(TimestampLayout), "age_ms": it.AgeMS}
	}
	return map[string]any{"task": task, "dry_run": dry, "reclaimed_by": by, "work": out}
}

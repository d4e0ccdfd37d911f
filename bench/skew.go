package bench

import (
	"math"
	"slices"
)

// Priority skew: how far the order in which callers got their items strays
// from the queue's priority order.
//
// Every bench queue hands its items out in id order (the claim's and the
// engine task's ORDER BY id), so an item's id is its priority rank. A caller
// that got item 120 before another caller got item 80 started on a
// lower-priority item first: the pair is out of order. A single caller
// claiming one item at a time makes no such pair; concurrent callers do,
// because SKIP LOCKED passes over the rows others hold, because one round
// answers its waiters after its holder, and because a claim that commits
// later may hold a higher item. This is the price of spreading callers over
// the head of a queue (docs/scaling.md, "Priority skew"), measured from what
// the callers were told and when, not from the database.
//
// The moment an item is "got" is Mark.ClaimedMS: for the raw claim, when the
// locked rows came back; for the engine, when work get returned. All items
// of one claim or get share it, so a batch is never out of order within
// itself. Marks are relative to one process's start, so the skew is measured
// only for callers that ran in one process.

// PrioritySkew is the bench's measure of it (JSON: priority_skew).
type PrioritySkew struct {
	// Items is how many items the measure covers (every item got).
	Items int64 `json:"items"`
	// OutOfOrder counts the items got before some higher-priority item was:
	// items with a displacement above 0.
	OutOfOrder int64 `json:"out_of_order"`
	// OutOfOrderShare is OutOfOrder / Items.
	OutOfOrderShare float64 `json:"out_of_order_share"`
	// Displacement of an item: how many higher-priority items were got
	// after it. 0 for every item in a strictly ordered queue.
	DisplacementP50 int64 `json:"displacement_p50"`
	DisplacementP99 int64 `json:"displacement_p99"`
	DisplacementMax int64 `json:"displacement_max"`
	// Lag of an item: how long after it the last higher-priority item was
	// got, ms (0 when none was later).
	LagP99MS float64 `json:"lag_p99_ms"`
	LagMaxMS float64 `json:"lag_max_ms"`
}

// prioritySkew measures the skew of the items in marks (by worker). It
// returns nil when there is nothing to measure.
func prioritySkew(marks map[int][]Mark) *PrioritySkew {
	type got struct {
		id int64
		at float64
	}
	var all []got
	for _, ms := range marks {
		for _, m := range ms {
			for _, id := range m.Items {
				all = append(all, got{id, m.ClaimedMS})
			}
		}
	}
	if len(all) == 0 {
		return nil
	}
	// The times, ranked, index a Fenwick tree of the items seen so far: in
	// priority order, an item's displacement is how many of the
	// higher-priority items already seen were got strictly after it.
	times := make([]float64, len(all))
	for i, g := range all {
		times[i] = g.at
	}
	slices.Sort(times)
	times = slices.Compact(times)
	slices.SortFunc(all, func(a, b got) int {
		if a.id != b.id {
			if a.id < b.id {
				return -1
			}
			return 1
		}
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return 0
	})
	tree := make([]int64, len(times)+1)
	add := func(i int) {
		for i++; i < len(tree); i += i & -i {
			tree[i]++
		}
	}
	atOrBefore := func(i int) (n int64) {
		for i++; i > 0; i -= i & -i {
			n += tree[i]
		}
		return n
	}
	s := &PrioritySkew{Items: int64(len(all))}
	displacement := make([]int64, len(all))
	lagsUS := make([]int64, len(all))
	latest := math.Inf(-1)
	for i, g := range all {
		rank, _ := slices.BinarySearch(times, g.at)
		displacement[i] = int64(i) - atOrBefore(rank)
		if displacement[i] > 0 {
			s.OutOfOrder++
		}
		if latest > g.at {
			lagsUS[i] = int64(math.Round((latest - g.at) * 1000))
		}
		latest = max(latest, g.at)
		add(rank)
	}
	s.OutOfOrderShare = round3(float64(s.OutOfOrder) / float64(len(all)))
	slices.Sort(displacement)
	slices.Sort(lagsUS)
	s.DisplacementP50 = percentile(displacement, 0.50)
	s.DisplacementP99 = percentile(displacement, 0.99)
	s.DisplacementMax = displacement[len(displacement)-1]
	s.LagP99MS = float64(percentile(lagsUS, 0.99)) / 1000
	s.LagMaxMS = float64(lagsUS[len(lagsUS)-1]) / 1000
	return s
}

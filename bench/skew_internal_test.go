package bench

import "testing"

func TestPrioritySkewOfOrderedClaimsIsNone(t *testing.T) {
	for name, marks := range map[string]map[int][]Mark{
		"one caller, one item at a time": {1: {{Items: []int64{1}, ClaimedMS: 1}, {Items: []int64{2}, ClaimedMS: 2}, {Items: []int64{3}, ClaimedMS: 3}}},
		"batches in order":               {1: {{Items: []int64{1, 2, 3}, ClaimedMS: 1}}, 2: {{Items: []int64{4, 5}, ClaimedMS: 2}}},
		// A batch is got at one instant: the order within it is not skew,
		// and neither is another caller's item got at the same instant.
		"a batch got at once, listed out of order": {1: {{Items: []int64{3, 1, 2}, ClaimedMS: 1}}, 2: {{Items: []int64{4}, ClaimedMS: 1}}},
	} {
		s := prioritySkew(marks)
		if s == nil || s.OutOfOrder != 0 || s.DisplacementMax != 0 || s.LagMaxMS != 0 {
			t.Errorf("%s: skew %+v, want none", name, s)
		}
	}
	if s := prioritySkew(map[int][]Mark{1: {{ClaimedMS: 1}}}); s != nil {
		t.Errorf("no item got: skew %+v, want nil", s)
	}
}

func TestPrioritySkewCountsHigherItemsGotLater(t *testing.T) {
	// Caller 1 got item 1 at 5 ms; caller 2 got items 2 and 3 before it,
	// item 4 after it. Items 2 and 3 each went out before one
	// higher-priority item (1), 4 ms and 3 ms before it.
	s := prioritySkew(map[int][]Mark{
		1: {{Items: []int64{1}, ClaimedMS: 5}},
		2: {{Items: []int64{2}, ClaimedMS: 1}, {Items: []int64{3}, ClaimedMS: 2}, {Items: []int64{4}, ClaimedMS: 6}},
	})
	want := PrioritySkew{Items: 4, OutOfOrder: 2, OutOfOrderShare: 0.5, DisplacementP50: 0, DisplacementP99: 1, DisplacementMax: 1, LagP99MS: 4, LagMaxMS: 4}
	if s == nil || *s != want {
		t.Fatalf("skew %+v, want %+v", s, want)
	}

	// A late batch of the top three items: the ten items got before it are
	// each displaced by all three.
	marks := map[int][]Mark{1: {{Items: []int64{1, 2, 3}, ClaimedMS: 100}}}
	for id := int64(4); id <= 13; id++ {
		marks[2] = append(marks[2], Mark{Items: []int64{id}, ClaimedMS: float64(id)})
	}
	s = prioritySkew(marks)
	if s.Items != 13 || s.OutOfOrder != 10 || s.DisplacementMax != 3 || s.DisplacementP50 != 3 || s.LagMaxMS != 96 {
		t.Fatalf("late batch: skew %+v, want 10 of 13 items displaced by 3, the first by 96 ms", s)
	}
}

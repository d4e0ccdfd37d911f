package namedlock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	_ "github.com/loanq/loanq/drivers/all"
	"github.com/loanq/loanq/internal/testkit/testdb"
	"github.com/loanq/loanq/namedlock"
)

// Many goroutines, each its own holder, race for one name in rounds: in
// every round exactly one takes it, the token grows by one at every take, a
// holder with a stale token can neither renew nor release, and the row is
// created once although every goroutine tries to create it.
func TestTakeRaceOneWinner(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, db := testdb.Migrated(t, dsn)
		s := &namedlock.Store{DB: db, Driver: d}
		ctx := context.Background()
		const racers, rounds = 12, 5
		var prev *namedlock.Lease
		for round := 1; round <= rounds; round++ {
			var wg sync.WaitGroup
			won := make(chan *namedlock.Lease, racers)
			errs := make(chan error, racers)
			for i := 0; i < racers; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					l, info, err := s.Take(ctx, "race", fmt.Sprintf("h%d-%d", round, i), time.Minute)
					switch {
					case err != nil:
						errs <- err
					case l != nil:
						won <- l
					case info == nil || info.State != "held":
						errs <- fmt.Errorf("a loser read %+v, want the lock held", info)
					}
				}(i)
			}
			wg.Wait()
			close(won)
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			var winners []*namedlock.Lease
			for l := range won {
				winners = append(winners, l)
			}
			if len(winners) != 1 {
				t.Fatalf("round %d: %d winners", round, len(winners))
			}
			w := winners[0]
			if w.Token != int64(round) || !w.ExpiresAt.After(w.TakenAt) {
				t.Fatalf("round %d: lease %+v, want token %d", round, w, round)
			}
			if prev != nil {
				if ok, err := s.Renew(ctx, prev, time.Minute); err != nil || ok {
					t.Fatalf("a stale holder renewed: %v, %v", ok, err)
				}
				if ok, err := s.Release(ctx, prev); err != nil || ok {
					t.Fatalf("a stale holder released: %v, %v", ok, err)
				}
			}
			if ok, err := s.Renew(ctx, w, time.Minute); err != nil || !ok {
				t.Fatalf("the holder could not renew: %v, %v", ok, err)
			}
			if ok, err := s.Release(ctx, w); err != nil || !ok {
				t.Fatalf("the holder could not release: %v, %v", ok, err)
			}
			prev = w
		}
		list, err := s.List(ctx)
		if err != nil || len(list) != 1 || list[0].State != "free" || list[0].Token != rounds {
			t.Fatalf("List: %+v, %v", list, err)
		}
	})
}

// An expired lease is taken over (database clock), with a larger token.
func TestExpiredLeaseIsTakenOver(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, db := testdb.Migrated(t, dsn)
		s := &namedlock.Store{DB: db, Driver: d}
		ctx := context.Background()
		a, _, err := s.Take(ctx, "exp", "a", time.Second)
		if err != nil || a == nil {
			t.Fatalf("take: %v, %v", a, err)
		}
		if b, _, err := s.Take(ctx, "exp", "b", time.Second); err != nil || b != nil {
			t.Fatalf("b took a lease that is not expired: %v, %v", b, err)
		}
		deadline := time.Now().Add(time.Minute)
		for {
			b, info, err := s.Take(ctx, "exp", "b", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if b != nil {
				if b.Token != a.Token+1 {
					t.Fatalf("take-over token %d after %d", b.Token, a.Token)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the expired lease was never taken over: %+v", info)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if ok, err := s.Renew(ctx, a, time.Minute); err != nil || ok {
			t.Fatalf("the expired holder renewed after the take-over: %v, %v", ok, err)
		}
	})
}

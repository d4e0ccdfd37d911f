package bench

import (
	"database/sql"
	"fmt"
	"sync"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
)

// The bench's statements. They are not part of drivers.Statements (the
// engine's contract): the item table belongs to `loanq bench`, which creates
// it before a run and drops it after (tables.go), so a production schema
// never holds it. They are written the same way, though: typed Stmt[P] with
// named binds (Query[P, R] for the reads, with a row type), portable text
// with per-dialect overrides, compiled per dialect by
// drivers.CompileCatalogue, which refuses a bind without a parameter field
// (and a field never bound), or a read whose columns are not its row type's,
// exactly as drivers.Build does. The claims (ClaimSkip, ClaimNoWait,
// ClaimWait, LeaseClaim) stay Stmt[P]: they return the ids on some databases
// and nothing on others (ClaimRead, LeaseRead read them there), and claim.go
// reads their rows with drivers.ScanIDs. `loanq sql` prints them after the
// engine's.

// Statements holds every statement `loanq bench` sends to its item table.
// The claim path is run by claimItems (claim.go) with these statements only,
// the same way on every database.
type Statements struct {
	// Reset empties the item table before a run.
	Reset drivers.Stmt[engineio.NoParams] `purpose:"bench: empty the item table"`
	// Fill takes: first id, count. Inserts ids first … first+count-1 as
	// ready; called in chunks of at most 1000 (MySQL's default
	// cte_max_recursion_depth).
	Fill drivers.Stmt[fillParams] `purpose:"bench: insert ready items"`
	// Analyze binds nothing. Sent once the table is filled, outside the
	// fill's transaction: without it the planner plans the claims with the
	// statistics of the table before the fill (PostgreSQL took a bitmap scan
	// and a sort of all 83,000 ready items for a LIMIT 60 read: 47 ms
	// instead of 0.1), and the run measures stale statistics, not locking.
	Analyze drivers.Stmt[engineio.NoParams] `purpose:"bench: refresh the planner's statistics of the filled item table"`
	// Begin binds nothing. Sent on the worker's connection right before
	// each claim transaction begins, where the dialect's default isolation
	// would make claims collide: InnoDB's REPEATABLE READ takes next-key (gap)
	// locks on the scanned index range, and finishing an item — its index
	// entry moves from (ready, id) to (done, id), into a gap another worker
	// has locked — then deadlocks against the other claimers.
	Begin drivers.Stmt[engineio.NoParams] `purpose:"bench: before each claim transaction" empty:"the default isolation, READ COMMITTED, takes no gap locks"`
	// ClaimSkip, ClaimNoWait, ClaimWait bind: limit. Each locks up to limit
	// ready items, in id order, until the caller's transaction ends and,
	// unless ClaimRead is set, returns their ids. Only the lock clause
	// differs: skip passes over rows other transactions hold, nowait fails on
	// the first held row, wait queues behind it.
	ClaimSkip   drivers.Stmt[limitParams] `purpose:"bench claim, strategy skip: lock up to K ready items, passing over held ones" empty:"row-lock strategies are not available; the bench runs lease"`
	ClaimNoWait drivers.Stmt[limitParams] `purpose:"bench claim, strategy nowait: lock up to K ready items or fail at once" empty:"row-lock strategies are not available; the bench runs lease"`
	ClaimWait   drivers.Stmt[limitParams] `purpose:"bench claim, strategy wait: lock up to K ready items, queueing behind holders" empty:"row-lock strategies are not available; the bench runs lease"`
	// ClaimRead is set where a claim statement returns no rows (Oracle's
	// procedure call): it reads the ids the caller's transaction has just
	// claimed.
	ClaimRead drivers.Query[engineio.NoParams, engineio.IDRow] `purpose:"bench claim: read the ids the transaction just locked" empty:"the claim statements return the ids themselves"`
	// LeaseClaim takes: owner, ttl ms, limit. Marks up to limit ready items
	// claimed by owner until now + ttl, and returns their ids unless
	// LeaseRead is set. Run in its own short transaction, which is committed
	// at once: the lease, not a lock, keeps others off the items while they
	// are worked on.
	LeaseClaim drivers.Stmt[leaseClaimParams] `purpose:"bench claim, strategy lease: mark up to K ready items claimed, with an expiry"`
	// LeaseRead reads the items owner holds a lease on (MySQL and Oracle,
	// which have no UPDATE … RETURNING of several rows).
	LeaseRead drivers.Query[ownerParams, engineio.IDRow] `purpose:"bench claim, strategy lease: read the ids just leased" empty:"the lease claim returns the ids itself (UPDATE … RETURNING)"`
	// Done takes: owner, id. Finishes an item claimed with a row lock, in
	// the claim's transaction. It matches the id alone and counts, so an item
	// finished twice shows up as processed > 1 instead of being hidden.
	Done drivers.Stmt[itemParams] `purpose:"bench: finish an item held by a row lock"`
	// LeaseDone takes: id, owner. Finishes a leased item, fenced: one row
	// only while owner still holds an unexpired lease; 0 rows means the lease
	// was lost and the work must not count.
	LeaseDone drivers.Stmt[itemParams] `purpose:"bench: finish a leased item (fencing check)"`
	// LeaseExpire binds nothing. Puts items whose lease ran out back to
	// ready (their holder died or overran); run when no ready item is left.
	LeaseExpire drivers.Stmt[engineio.NoParams] `purpose:"bench: put items with expired leases back"`
	// Ready counts the items still ready.
	Ready drivers.Query[engineio.NoParams, engineio.Count] `purpose:"bench: count ready items"`
	// Summary audits the table after a run.
	Summary drivers.Query[engineio.NoParams, summaryRow] `purpose:"bench: audit the run (duplicates, missed items)"`
	// ByOwner counts the items each worker finished.
	ByOwner drivers.Query[engineio.NoParams, ownerCountRow] `purpose:"bench: items finished per worker"`
	// DoneMany takes: owner, the ids as a JSON array text ("[3,7,9]").
	// Finishes every item of a batch claim with one statement, in the claim's
	// transaction. Like Done it matches the ids alone and counts, so an item
	// finished twice still shows up as processed > 1.
	DoneMany drivers.Stmt[itemsParams] `purpose:"bench: finish a batch of items held by row locks, one statement"`
	// LeaseDoneMany takes: owner, the ids as a JSON array text. The fenced
	// finish of a batch of leased items: only the items owner still holds an
	// unexpired lease on change; fewer rows than ids means leases were lost.
	LeaseDoneMany drivers.Stmt[itemsParams] `purpose:"bench: finish a batch of leased items (fencing check), one statement"`
	// ClaimDone takes: owner, limit. The raw limit of a batched claim: one
	// statement, in autocommit, that claims up to limit ready items passing
	// over locked ones and finishes them; rows affected is how many.
	// Measured beside `bench --batch K` with no work time, as what a batch
	// could reach.
	ClaimDone drivers.Stmt[claimDoneParams] `purpose:"bench: raw limit, claim and finish up to K items in one statement" empty:"not measured on this database (no single-statement skip-locked claim)"`
	// ServerVersion reads the server's product and version as the server
	// itself reports it (so a MariaDB behind a mysql:// DSN is named
	// MariaDB), printed in bench results.
	ServerVersion drivers.Query[engineio.NoParams, versionRow] `purpose:"bench: name the server product and version"`
}

// The bench's row types (col tags as in drivers/rows.go).
type (
	// summaryRow is the audit of the item table: items, items done, items
	// processed more than once, processings in all, items never processed.
	summaryRow struct {
		Items      int64 `col:"items"`
		Done       int64 `col:"done"`
		Duplicates int64 `col:"duplicates"`
		Total      int64 `col:"total"`
		Missed     int64 `col:"missed"`
	}
	// ownerCountRow is the items one worker finished.
	ownerCountRow struct {
		Owner sql.NullString `col:"owner"`
		N     int64          `col:"n"`
	}
	// versionRow is the server's product and version.
	versionRow struct {
		Version string `col:"version"`
	}
)

// The bench's parameter types (bind tags as in drivers/params.go).
type (
	// fillParams inserts count ready items from id first.
	fillParams struct {
		First int64 `bind:"first"`
		Count int64 `bind:"count"`
	}
	// limitParams is a row count.
	limitParams struct {
		Limit int `bind:"limit"`
	}
	// ownerParams is a worker's owner name.
	ownerParams struct {
		Owner string `bind:"owner"`
	}
	// leaseClaimParams leases up to limit items to owner for ttl_ms.
	leaseClaimParams struct {
		Owner string `bind:"owner"`
		TTLMS int64  `bind:"ttl_ms"`
		Limit int    `bind:"limit"`
	}
	// itemParams is one item and the worker finishing it.
	itemParams struct {
		ID    int64  `bind:"id"`
		Owner string `bind:"owner"`
	}
	// itemsParams is a batch of items (a JSON array text) and the worker
	// finishing them.
	itemsParams struct {
		IDs   string `bind:"ids"`
		Owner string `bind:"owner"`
	}
	// claimDoneParams claims and finishes up to limit items for owner.
	claimDoneParams struct {
		Owner string `bind:"owner"`
		Limit int    `bind:"limit"`
	}
)

// Claim returns the claim statement of a row-lock strategy (nil for lease).
func (s *Statements) Claim(st drivers.Strategy) *drivers.Stmt[limitParams] {
	switch st {
	case drivers.Skip, drivers.Rows: // on the item table, claiming straight from it is what skip does
		return &s.ClaimSkip
	case drivers.NoWait:
		return &s.ClaimNoWait
	case drivers.Wait:
		return &s.ClaimWait
	}
	return nil
}

// List returns the statements in declaration order, as the dialect
// receives them (for `loanq sql` and the Oracle golden file).
func (s *Statements) List() []drivers.Named { return drivers.ListCatalogue(s) }

// portable is the text written once; each dialect overrides what its
// database says differently (dialects.go). The claims read the (status, id)
// index in claim order; the row limit stops the locking read after K rows.
func portable() *Statements {
	return &Statements{
		Reset:       drivers.Stmt[engineio.NoParams]{SQL: `DELETE FROM loanq_bench_item`},
		Analyze:     drivers.Stmt[engineio.NoParams]{SQL: `ANALYZE loanq_bench_item`},
		ClaimSkip:   drivers.Stmt[limitParams]{SQL: `SELECT id FROM loanq_bench_item WHERE status = 'ready' ORDER BY id LIMIT :limit FOR UPDATE SKIP LOCKED`},
		ClaimNoWait: drivers.Stmt[limitParams]{SQL: `SELECT id FROM loanq_bench_item WHERE status = 'ready' ORDER BY id LIMIT :limit FOR UPDATE NOWAIT`},
		ClaimWait:   drivers.Stmt[limitParams]{SQL: `SELECT id FROM loanq_bench_item WHERE status = 'ready' ORDER BY id LIMIT :limit FOR UPDATE`},
		Done: drivers.Stmt[itemParams]{SQL: `UPDATE loanq_bench_item
SET status = 'done', owner = :owner, processed = processed + 1, processed_at = {{now}}
WHERE id = :id`},
		LeaseDone: drivers.Stmt[itemParams]{SQL: `UPDATE loanq_bench_item
SET status = 'done', processed = processed + 1, processed_at = {{now}}
WHERE id = :id AND owner = :owner AND status = 'claimed' AND lease_expires_at > {{now}}`},
		LeaseExpire: drivers.Stmt[engineio.NoParams]{SQL: `UPDATE loanq_bench_item
SET status = 'ready', owner = NULL, claimed_at = NULL, lease_expires_at = NULL
WHERE status = 'claimed' AND lease_expires_at <= {{now}}`},
		Ready: drivers.Query[engineio.NoParams, engineio.Count]{SQL: `SELECT COUNT(*) AS n FROM loanq_bench_item WHERE status = 'ready'`},
		Summary: drivers.Query[engineio.NoParams, summaryRow]{SQL: `SELECT COUNT(*) AS items,
       COALESCE(SUM(CASE WHEN status = 'done' THEN 1 ELSE 0 END), 0) AS done,
       COALESCE(SUM(CASE WHEN processed > 1 THEN 1 ELSE 0 END), 0) AS duplicates,
       COALESCE(SUM(processed), 0) AS total,
       COALESCE(SUM(CASE WHEN processed = 0 THEN 1 ELSE 0 END), 0) AS missed
FROM loanq_bench_item`},
		ByOwner: drivers.Query[engineio.NoParams, ownerCountRow]{SQL: `SELECT owner, COUNT(*) AS n FROM loanq_bench_item WHERE status = 'done' GROUP BY owner ORDER BY owner`},
		// One bind for the whole batch, whatever its size: no placeholder
		// list to build, one round trip.
		DoneMany: drivers.Stmt[itemsParams]{SQL: `UPDATE loanq_bench_item
SET status = 'done', owner = :owner, processed = processed + 1, processed_at = {{now}}
WHERE {{inIDs "id" ":ids"}}`},
		LeaseDoneMany: drivers.Stmt[itemsParams]{SQL: `UPDATE loanq_bench_item
SET status = 'done', processed = processed + 1, processed_at = {{now}}
WHERE owner = :owner AND {{inIDs "id" ":ids"}}
  AND status = 'claimed' AND lease_expires_at > {{now}}`},
	}
}

// Catalogue is the bench's statements and tables for one dialect.
type Catalogue struct {
	Statements
	// Create makes the bench's objects (the item table, its indexes and,
	// on Oracle, the claim procedure), in order; Drop removes them, in
	// order, and succeeds when they do not exist. Neither binds anything.
	Create, Drop []string
}

var (
	catalogues  = map[string]*Catalogue{}
	cataloguesM sync.Mutex
)

// For returns the bench catalogue of d's dialect, compiled once per process.
// A dialect the bench does not know, or a statement that does not compile
// for it, is an error (a programming error: TestCatalogues builds all four).
func For(d drivers.Driver) (*Catalogue, error) {
	cataloguesM.Lock()
	defer cataloguesM.Unlock()
	if c, ok := catalogues[d.Name()]; ok {
		return c, nil
	}
	dialect, ok := dialects[d.Name()]
	if !ok {
		return nil, fmt.Errorf("loanq bench does not know the %s dialect (bench/dialects.go)", d.Name())
	}
	c := &Catalogue{Statements: *portable()}
	dialect.statements(&c.Statements)
	if err := drivers.CompileCatalogue(d.Dialect(), &c.Statements); err != nil {
		return nil, fmt.Errorf("bench statements for %s: %w", d.Name(), err)
	}
	c.Create, c.Drop = dialect.create, dialect.drop
	catalogues[d.Name()] = c
	return c, nil
}

package bench

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/loanq/loanq/drivers"
	_ "github.com/loanq/loanq/drivers/sqlite"
)

// A lease's fenced finish that meets a busy database (SQLite's one writer,
// past its busy timeout) is tried again until it runs: giving up would leave
// the items leased to a worker that goes on to a new claim, and the audit
// would count them missed. The busy error is SQLite's own, made by a second
// writer with no busy timeout; any other error ends the finish at once.
func TestLeaseFinishRetriesWhileBusy(t *testing.T) {
	ctx := context.Background()
	d, err := drivers.ByName("sqlite")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "busy.db")
	open := func() *sql.DB {
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(0)&_txlock=immediate")
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		t.Cleanup(func() { db.Close() })
		return db
	}
	holder, other := open(), open()
	if _, err := holder.ExecContext(ctx, "CREATE TABLE item (id INTEGER PRIMARY KEY, done INTEGER NOT NULL DEFAULT 0)"); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.ExecContext(ctx, "INSERT INTO item (id) VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	tx, err := holder.BeginTx(ctx, nil) // BEGIN IMMEDIATE: the write lock
	if err != nil {
		t.Fatal(err)
	}
	_, busy := other.ExecContext(ctx, "UPDATE item SET done = 1 WHERE id = 1")
	if !d.IsLockBusy(busy) {
		t.Fatalf("a second writer got %v, want SQLITE_BUSY", busy)
	}

	w := &worker{d: d, start: time.Now()}
	calls := 0
	res, err := w.finishLeased(ctx, func() (sql.Result, error) {
		calls++
		if calls == 3 {
			if err := tx.Rollback(); err != nil { // the writer ends: the finish can run
				return nil, err
			}
		}
		return other.ExecContext(ctx, "UPDATE item SET done = 1 WHERE id = 1")
	})
	if err != nil {
		t.Fatalf("finish: %v", err)
	}
	if n, _ := res.RowsAffected(); n != 1 || calls != 3 || w.res.LockErrors != 2 || len(w.res.ErrorsAtMS) != 2 {
		t.Fatalf("finish changed %d rows in %d tries with %d busy answers counted, want 1 row, 3 tries, 2 busy", n, calls, w.res.LockErrors)
	}
	var done int
	if err := holder.QueryRowContext(ctx, "SELECT done FROM item WHERE id = 1").Scan(&done); err != nil || done != 1 {
		t.Fatalf("item done = %d (%v), want 1", done, err)
	}

	other2 := errors.New("connection reset")
	calls = 0
	if _, err := w.finishLeased(ctx, func() (sql.Result, error) { calls++; return nil, other2 }); !errors.Is(err, other2) || calls != 1 {
		t.Fatalf("a non-busy error: %v after %d tries, want it returned after 1", err, calls)
	}
}

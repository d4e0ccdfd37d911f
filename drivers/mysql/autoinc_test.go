package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/loanq/loanq/internal/testkit/testdb"
)

// A deadlock whose victim waits for InnoDB's AUTO-INC table lock: MariaDB
// reports it as 1467 ER_AUTOINC_READ_FAILED, not 1213, having rolled the
// victim's whole transaction back — and the driver must take it for a
// deadlock, whose transaction the engine runs again (docs/mysql.md; IsDeadlock,
// docs/mysql.md). The shape of the bench's failure, made on purpose:
//
//   - the victim (light) inserts key 1 and keeps it, uncommitted;
//   - the other (heavy: more undo, so InnoDB keeps it) runs an INSERT …
//     SELECT of key 1: it takes the AUTO-INC table lock (lock mode 1, a
//     bulk insert) and waits on the unique index for the victim;
//   - the victim inserts again: it waits for the AUTO-INC lock. A cycle.
func TestAutoIncDeadlockIsADeadlock(t *testing.T) {
	ctx := context.Background()
	d, db := openFresh(t)
	var mode int
	if err := db.QueryRowContext(ctx, "SELECT @@innodb_autoinc_lock_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode == 2 {
		t.Skip("innodb_autoinc_lock_mode = 2 (MySQL 8's default): no AUTO-INC table lock, no such cycle")
	}
	for _, s := range []string{
		"CREATE TABLE ai_t (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, k INT NOT NULL, UNIQUE KEY ai_t_k (k)) ENGINE = InnoDB",
		"CREATE TABLE ai_h (x INT NOT NULL PRIMARY KEY) ENGINE = InnoDB",
	} {
		if _, err := db.ExecContext(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	victim, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Rollback()
	for _, s := range []string{"INSERT INTO ai_h VALUES (100)", "INSERT INTO ai_t (k) VALUES (1)"} {
		if _, err := victim.ExecContext(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	heavy, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer heavy.Rollback()
	var heavyID int64
	if err := heavy.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&heavyID); err != nil {
		t.Fatal(err)
	}
	// On a failure below, end the bulk insert before heavy's rollback
	// (deferred above, so run after this), which would otherwise wait out
	// the bulk insert's hour-long lock wait.
	defer db.ExecContext(context.WithoutCancel(ctx), fmt.Sprintf("KILL QUERY %d", heavyID))
	rows := make([]string, 50)
	for i := range rows {
		rows[i] = fmt.Sprintf("(%d)", i+1)
	}
	if _, err := heavy.ExecContext(ctx, "INSERT INTO ai_h VALUES "+strings.Join(rows, ",")); err != nil {
		t.Fatal(err)
	}
	// The bulk insert must still be waiting when the victim closes the
	// cycle, however loaded the machine: its lock wait may not run out.
	if _, err := heavy.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 3600"); err != nil {
		t.Fatal(err)
	}
	bulk := make(chan error, 1)
	go func() {
		_, err := heavy.ExecContext(ctx, "INSERT INTO ai_t (k) SELECT 1 FROM DUAL")
		bulk <- err
	}()
	// Wait until the bulk insert waits on the victim's key, AUTO-INC held.
	for deadline := time.Now().Add(60 * time.Second); ; {
		// Through FreshInnoDBTrx: InnoDB refreshes innodb_trx only after
		// 0.1 s unread, and this loop polling every 10 ms once kept showing
		// the bulk insert RUNNING for its whole 60 s while it waited.
		var waiting int
		var err error
		testdb.FreshInnoDBTrx(func() {
			err = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_mysql_thread_id = ? AND trx_state = 'LOCK WAIT'", heavyID).Scan(&waiting)
		})
		if err != nil {
			t.Fatal(err)
		}
		if waiting == 1 {
			break
		}
		select {
		case err := <-bulk:
			t.Fatalf("the INSERT … SELECT ended before the victim closed the cycle (%v); it should wait for the victim's key", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the INSERT … SELECT never waited for the victim's key in 60 s; its transaction: %s", trxState(ctx, db, heavyID))
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, err = victim.ExecContext(ctx, "INSERT INTO ai_t (k) VALUES (2)")
	var me *gomysql.MySQLError
	if !errors.As(err, &me) || (me.Number != 1467 && me.Number != 1213) {
		t.Fatalf("the victim's insert: %v; want the deadlock, as 1467 (MariaDB) or 1213", err)
	}
	t.Logf("the victim's insert: %v", err)
	if !d.IsDeadlock(err) {
		t.Errorf("IsDeadlock(%v) = false: the engine would not run the victim's transaction again", err)
	}
	// Its whole transaction was rolled back (not only the statement): its
	// first row is gone, to itself too.
	var own int
	if err := victim.QueryRowContext(ctx, "SELECT COUNT(*) FROM ai_h WHERE x = 100").Scan(&own); err != nil {
		t.Fatal(err)
	}
	if own != 0 {
		t.Errorf("the victim still sees its own earlier row: only its statement was rolled back, not a deadlock victim")
	}
	if err := <-bulk; err != nil {
		t.Errorf("the INSERT … SELECT the victim made way for: %v", err)
	}
}

// trxState says what InnoDB shows of a session's transaction, for a failure
// message.
func trxState(ctx context.Context, db *sql.DB, id int64) string {
	var state, query sql.NullString
	err := db.QueryRowContext(ctx, "SELECT trx_state, trx_query FROM information_schema.innodb_trx WHERE trx_mysql_thread_id = ?", id).Scan(&state, &query)
	if errors.Is(err, sql.ErrNoRows) {
		return "none"
	}
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%s, running %q", state.String, query.String)
}

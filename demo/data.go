package demo

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/loanq/loanq/drivers"
)

// loanTableDDL is the sample application table, in the dialect's column
// types (drivers.Tables): the types differ (no BIGINT/VARCHAR2 on every side,
// TEXT times on SQLite), the table does not. The yes/no columns are small
// integers 0/1 rather than BOOLEAN so that the same task criteria
// ("statements_verified = 0") run unchanged everywhere, Oracle (no boolean
// column type before 23ai) included. No trailing ';' (Oracle refuses it).
func loanTableDDL(t drivers.Tables) string {
	return fmt.Sprintf(`CREATE TABLE loan (
    id                   %-13s PRIMARY KEY,
    borrower             %-13s NOT NULL,
    amount               %-13s NOT NULL,
    region               %-13s NOT NULL,
    priority             %-13s NOT NULL,
    submitted_at         %-13s NOT NULL,
    statements_submitted %-13s NOT NULL,
    statements_verified  %-13s NOT NULL,
    senior_reviewed      %-13s NOT NULL,
    borrower_contacted   %-13s NOT NULL)%s`,
		t.BigInt, t.TextOf(100), t.BigInt, t.TextOf(20), t.SmallInt, t.Time, t.Flag, t.Flag, t.Flag, t.Flag, t.Options)
}

// loanIndexes serve the demo tasks' criteria and order; plain SQL on every dialect.
var loanIndexes = []string{
	"CREATE INDEX loan_statements_ix ON loan (statements_submitted, statements_verified, submitted_at)",
	"CREATE INDEX loan_amount_ix ON loan (amount)",
}

// loanColumns in insert order. Selecting exactly these is also how the demo
// recognises a `loan` table as its own before it drops it.
const loanColumns = "id, borrower, amount, region, priority, submitted_at, statements_submitted, statements_verified, senior_reviewed, borrower_contacted"

// loanColumnCount is how many columns loanColumns names.
var loanColumnCount = strings.Count(loanColumns, ",") + 1

type loanRow struct {
	id                  int64
	borrower            string
	amount              int64
	region              string
	priority            int
	submittedAt         time.Time
	submitted, verified int
	seniorReviewed      int
	contacted           int
}

var (
	firstNames = []string{"Amara", "Bruno", "Chen", "Dalia", "Emeka", "Freya", "Goran", "Hiroko", "Ines", "Jonas",
		"Kavya", "Luca", "Maya", "Nikolai", "Olga", "Pedro", "Quinn", "Rosa", "Sami", "Tara", "Umar", "Vera", "Wen", "Yusuf", "Zoe"}
	lastNames = []string{"Adeyemi", "Berg", "Costa", "Dubois", "Eriksen", "Fischer", "Garcia", "Haddad", "Ivanova", "Jensen",
		"Kowalski", "Lindqvist", "Moreau", "Novak", "Okafor", "Petrov", "Rossi", "Schmidt", "Tanaka", "Varga", "Weber", "Yilmaz"}
	regions = []string{"north", "south", "east", "west", "central"}
)

// seedEpoch anchors the generated submission times, so that reruns produce
// identical rows whatever the day.
var seedEpoch = time.Date(2026, 1, 5, 17, 0, 0, 0, time.UTC)

// generateLoans returns n deterministic pseudo-random loans: the same seed
// gives the same rows on every run and every machine (PCG is specified).
func generateLoans(n int, seed uint64) []loanRow {
	rng := rand.New(rand.NewPCG(seed, 0x6c6f616e71))
	out := make([]loanRow, n)
	for i := range out {
		r := loanRow{id: int64(i + 1)}
		r.borrower = firstNames[rng.IntN(len(firstNames))] + " " + lastNames[rng.IntN(len(lastNames))]
		// Log-normal amounts, median about 100 000, so that a "big loans"
		// queue over 250 000 holds roughly one loan in ten.
		a := math.Exp(11.5 + 0.8*rng.NormFloat64())
		r.amount = min(max(int64(a/100)*100, 1000), 5_000_000)
		r.region = regions[rng.IntN(len(regions))]
		switch p := rng.IntN(10); {
		case p < 1:
			r.priority = 1 // urgent
		case p < 3:
			r.priority = 2
		case p < 7:
			r.priority = 3
		case p < 9:
			r.priority = 4
		default:
			r.priority = 5
		}
		r.submittedAt = seedEpoch.Add(-time.Duration(rng.IntN(60*24*60)) * time.Minute)
		if rng.Float64() < 0.75 {
			r.submitted = 1
			if rng.Float64() < 0.35 {
				r.verified = 1
			}
		} else if rng.Float64() < 0.3 {
			r.contacted = 1
		}
		if rng.Float64() < 0.2 {
			r.seniorReviewed = 1
		}
		out[i] = r
	}
	return out
}

// createLoanTable creates the table and its indexes and fills it with n loans.
func createLoanTable(ctx context.Context, d drivers.Driver, db *sql.DB, n int, seed uint64) error {
	tables := d.Tables()
	for _, stmt := range append([]string{loanTableDDL(tables)}, loanIndexes...) {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("creating the sample table loan: %w", err)
		}
	}
	rows := generateLoans(n, seed)
	// Multi-row VALUES in batches inside one transaction: one statement per
	// row would make SQLite seeding slow. A dialect without multi-row VALUES
	// (Oracle before 23ai) gets one row per statement, still in one
	// transaction.
	batch := 100
	if !tables.MultiRowValues {
		batch = 1
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("filling the sample table loan: %w", err)
	}
	defer tx.Rollback()
	for start := 0; start < len(rows); start += batch {
		part := rows[start:min(start+batch, len(rows))]
		query := "INSERT INTO loan (" + loanColumns + ") VALUES " + loanValues(d.Dialect(), len(part))
		args := make([]any, 0, loanColumnCount*len(part))
		for _, r := range part {
			args = append(args, r.id, r.borrower, r.amount, r.region, r.priority, tables.TimeArg(r.submittedAt),
				r.submitted, r.verified, r.seniorReviewed, r.contacted)
		}
		if _, err := tx.ExecContext(ctx, query, args...); err != nil {
			return fmt.Errorf("filling the sample table loan: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("filling the sample table loan: %w", err)
	}
	return nil
}

// loanValues is the VALUES list of an INSERT of n loan rows, in the
// dialect's placeholders, numbered across the rows.
func loanValues(d drivers.Dialect, n int) string {
	var b strings.Builder
	for i := 0; i < n*loanColumnCount; i++ {
		switch {
		case i == 0:
			b.WriteString("(")
		case i%loanColumnCount == 0:
			b.WriteString("), (")
		default:
			b.WriteString(", ")
		}
		b.WriteString(d.Placeholder(i + 1))
	}
	b.WriteString(")")
	return b.String()
}

// loanTableState says whether a table named loan exists and whether it has
// the demo's columns (so it is the demo's and may be dropped).
func loanTableState(ctx context.Context, db *sql.DB) (exists, ours bool) {
	var n int64
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM loan").Scan(&n); err != nil {
		return false, false
	}
	rows, err := db.QueryContext(ctx, "SELECT "+loanColumns+" FROM loan WHERE 1 = 0")
	if err != nil {
		return true, false
	}
	rows.Close()
	return true, true
}

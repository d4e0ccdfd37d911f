package drivers

import (
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// ReadTxOptioner is implemented by a driver whose database should not be
// asked for a read-only transaction (SQLite: see its ReadTxOptions).
type ReadTxOptioner interface {
	// ReadTxOptions are the options of a transaction that only reads.
	ReadTxOptions() *sql.TxOptions
}

// ReadTxOptions are the options of a transaction that only reads on d's
// database: read-only, unless the driver says otherwise.
func ReadTxOptions(d Driver) *sql.TxOptions {
	if r, ok := d.(ReadTxOptioner); ok {
		return r.ReadTxOptions()
	}
	return &sql.TxOptions{ReadOnly: true}
}

// TableMaker is implemented by the drivers whose database can hold the
// application-side tables loanq creates outside its migrations: the demo's
// sample loan table and the tests' tables. Those are written once, in terms
// of Tables; loanq's own tables come from the migrations. Every driver should
// implement it (`loanq demo` needs it; drivertest checks it).
type TableMaker interface {
	Tables() Tables
}

// Tables is what a portable CREATE TABLE and INSERT need from a dialect.
type Tables struct {
	BigInt   string // a 64-bit integer (ids, amounts); on SQLite INTEGER, so an id primary key is the rowid
	SmallInt string // a small integer (a priority from 1 to 5)
	Flag     string // a 0/1 yes-or-no column: not every dialect has a boolean column type
	Text     string // a string of at most %d characters (VARCHAR(%d)); a type without a length may leave %d out
	Time     string // a UTC time without zone
	Options  string // what follows CREATE TABLE's closing parenthesis, or ""
	// TimeLayout, when not "", says Time columns hold text: a time is bound
	// formatted with this fixed-width layout (to the second), so that text
	// order is time order.
	TimeLayout string
	// MultiRowValues: one INSERT … VALUES (…), (…) may carry several rows.
	MultiRowValues bool
}

// TextOf is the type of a string of at most n characters.
func (t Tables) TextOf(n int) string {
	if strings.Contains(t.Text, "%d") {
		return fmt.Sprintf(t.Text, n)
	}
	return t.Text
}

// TimeArg is how a time is bound to a column of type Time.
func (t Tables) TimeArg(at time.Time) any {
	if t.TimeLayout != "" {
		return at.UTC().Format(t.TimeLayout)
	}
	return at
}

// TablesOf returns d's Tables, or an error naming what to implement.
func TablesOf(d Driver) (Tables, error) {
	if m, ok := d.(TableMaker); ok {
		return m.Tables(), nil
	}
	return Tables{}, fmt.Errorf("the %s driver cannot create application tables: implement drivers.TableMaker", d.Name())
}

// PasswordEnver is implemented by a driver whose client library reads the
// password from an environment variable when the DSN holds none (pgx reads
// PGPASSWORD, as libpq does). That variable is then loanq's secret: the
// commands loanq runs (lock run, work run) do not get it.
type PasswordEnver interface {
	PasswordEnv() []string
}

// PasswordEnv lists the environment variables d's client reads a password
// from, or none.
func PasswordEnv(d Driver) []string {
	if p, ok := d.(PasswordEnver); ok {
		return p.PasswordEnv()
	}
	return nil
}

package roles

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/loanq/loanq/problem"
)

// Role is one of the kinds of database account loanq is used through
// (docs/security.md, `loanq grants`).
type Role string

const (
	// Admin defines tasks (task create, update, delete) and may act for
	// anyone. It does not run migrations: the tables' owner does.
	Admin Role = "admin"
	// Processor gets, waits for, cancels, disposes of and lists its own
	// work, on every strategy, and runs `lock run`. It acts only as itself.
	Processor Role = "processor"
	// Supervisor is a processor that may also act for others: work
	// reclaim, and a processor's work on someone's behalf.
	Supervisor Role = "supervisor"
	// Dashboard only reads: loanq's own tables (`loanq serve` without
	// the API; task list, show and stats; work list; lock list), and the
	// --source tables named, for serve's backlog counts.
	Dashboard Role = "dashboard"
	// Refresher refills candidate pools (task refill, serve --refill):
	// criteria queries under the task lock or lease, which serve the
	// requests pending at that moment as any round does.
	Refresher Role = "refresher"
	// Serve is the account of `loanq serve` when it serves processors
	// who have no database account: a supervisor's rights, trusted to act
	// as the users it authenticates.
	Serve Role = "serve"
)

// LoanqTables are all of loanq's tables, its version table included. A role is
// granted some of them; every grant script first revokes on all of them
// (and on the --source tables it names), so an account given another role
// keeps nothing of the one before. A table a migration adds belongs here:
// each driver's grants test compares its revoke list with the tables its
// migrations create.
var LoanqTables = []string{"loanq_schema_version", "loanq_account", "loanq_task", "loanq_work_request", "loanq_work",
	"loanq_query_run", "loanq_task_user", "loanq_pool", "loanq_lock", "loanq_api_token", "loanq_session",
	"loanq_group", "loanq_task_allow", "loanq_task_not_worked_in", "loanq_history"}

// All lists the roles in the order `loanq grants --help` gives them.
var All = []Role{Admin, Processor, Supervisor, Dashboard, Refresher, Serve}

// Parse checks a --role value.
func Parse(s string) (Role, error) {
	for _, r := range All {
		if string(r) == strings.ToLower(strings.TrimSpace(s)) {
			return r, nil
		}
	}
	names := make([]string, len(All))
	for i, r := range All {
		names[i] = string(r)
	}
	return "", problem.Usagef("unknown role %q: use one of %s", s, strings.Join(names, ", "))
}

// Trusted reports whether accounts of the role may act as any user.
func (r Role) Trusted() bool { return r == Admin || r == Supervisor || r == Serve }

// Source is a table or view of loans a role reads, with the task's key
// column (the one PostgreSQL's row locks need an UPDATE privilege on).
type Source struct {
	Table string
	Key   string
}

// Request is what `loanq grants` was asked for.
type Request struct {
	Role    Role
	Account string   // the database account (MySQL: user or user@host)
	ActsAs  string   // a user name the account acts as, mapped by an admin ("": its own name)
	Sources []Source // the loan tables or views its tasks read
}

// TableGrant is one table's privileges for a role. Columns, when set, limit
// the UPDATE privilege to them.
type TableGrant struct {
	Table   string
	Privs   []string // SELECT, INSERT, UPDATE, DELETE
	Columns []string // for UPDATE: only these columns ("" all)
	Why     string   // one line: what the role does with it
}

// PrivilegeList is the table's privileges as one GRANT lists them, UPDATE
// limited to its columns: "SELECT, INSERT, UPDATE (a, b)".
func (t TableGrant) PrivilegeList() string {
	privs := make([]string, len(t.Privs))
	for i, pr := range t.Privs {
		if pr == "UPDATE" && len(t.Columns) > 0 {
			pr = "UPDATE (" + strings.Join(t.Columns, ", ") + ")"
		}
		privs[i] = pr
	}
	return strings.Join(privs, ", ")
}

// Plan is what a role needs, said once for every dialect; each driver's
// GrantWriter renders it in its own SQL.
type Plan struct {
	Request
	Tables   []TableGrant
	Function bool // may call loanq_may_act_as (the identity check)
	// LockSources: the role locks source rows (strategy rows) and must not
	// change them.
	LockSources bool
}

var (
	accountRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$.\-]{0,127}(@[A-Za-z0-9_.%:\-]{1,255})?$`)
	})
	tableRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]{0,127}(\.[A-Za-z_][A-Za-z0-9_$]{0,127})?$`)
	})
	columnRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]{0,127}$`) })
)

// ParseSource reads a --source value: TABLE or TABLE:KEY (key default id).
func ParseSource(s string) (Source, error) {
	table, key, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		key = "id"
	}
	if !tableRe().MatchString(table) || !columnRe().MatchString(key) {
		return Source{}, problem.Usagef("invalid --source %q: give TABLE or TABLE:KEY_COLUMN with plain identifiers (schema.table allowed), e.g. --source loan or --source acc_loan:loan_no", s)
	}
	return Source{Table: table, Key: key}, nil
}

// PlanGrants checks a request and lists what its role needs.
func PlanGrants(req Request) (*Plan, error) {
	if !accountRe().MatchString(req.Account) {
		return nil, problem.Usagef("invalid --to %q: give the database account's name (letters, digits, _ $ . -; MySQL may add @HOST)", req.Account)
	}
	if req.ActsAs != "" && !columnRe().MatchString(req.ActsAs) && !accountRe().MatchString(req.ActsAs) {
		return nil, problem.Usagef("invalid --as %q: give the loanq user name the account acts as (letters, digits, _ $ . -)", req.ActsAs)
	}
	if req.ActsAs != "" && req.Role.Trusted() {
		return nil, problem.Usagef("--as is for accounts that act as one user: a %s account may act as anyone", req.Role)
	}
	p := &Plan{Request: req, Function: true}
	version := TableGrant{Table: "loanq_schema_version", Privs: []string{"SELECT"}, Why: "every command checks the schema version first"}
	account := TableGrant{Table: "loanq_account", Privs: []string{"SELECT"}, Why: "who may act as whom (read by the identity check)"}
	read := func(t, why string) TableGrant { return TableGrant{Table: t, Privs: []string{"SELECT"}, Why: why} }
	processor := []TableGrant{
		version, account,
		{Table: "loanq_task", Privs: []string{"SELECT", "UPDATE"}, Columns: []string{"lease_owner", "lease_token", "lease_expires_at"},
			Why: "read tasks; take the task lock or lease (not change a definition)"},
		{Table: "loanq_work_request", Privs: []string{"SELECT", "INSERT", "UPDATE"}, Columns: []string{"assigned", "status", "served_at", "pooled", "alive_at"},
			Why: "log, serve and cancel requests; show a waiter's sign of life, end abandoned ones"},
		{Table: "loanq_work", Privs: []string{"SELECT", "INSERT", "UPDATE"}, Columns: []string{"disposition", "disposed_at", "return_at", "disposed_by", "reason", "note"},
			Why: "assign loans; dispose of them"},
		{Table: "loanq_query_run", Privs: []string{"SELECT", "INSERT"}, Why: "log criteria-query runs"},
		{Table: "loanq_task_user", Privs: []string{"SELECT", "INSERT", "UPDATE"}, Columns: []string{"task_id"},
			Why: "the per-user cap's lock rows (strategy rows); UPDATE only to lock them"},
		{Table: "loanq_pool", Privs: []string{"SELECT", "INSERT", "UPDATE", "DELETE"},
			Why: "candidate pools: claim, drop and refill candidates (nothing in a pool is trusted: each is rechecked by key)"},
		// Who may work which task, and four eyes (docs/governance.md):
		// read by every serving round and claim, and by the database's
		// own checks of this account's writes; changed by admins only.
		read("loanq_group", "who is in which group (allow lists name groups)"),
		read("loanq_task_allow", "who may work which task"),
		read("loanq_task_not_worked_in", "four eyes: the tasks whose workers of a loan may not work it in another"),
		// Named locks coordinate farm jobs (prune, export, refill), not a
		// person's work: any lock an account may take is one it can hold
		// hostage, so processors only read them (docs/security.md).
		read("loanq_lock", "lock list"),
	}
	// The event stream (`loanq history`, docs/retention.md) is written by
	// the database's triggers as their owner: nobody is granted a write.
	// It is read by those who read everyone's work for a living
	// (supervisors, admins, the read-only dashboard account), not by a
	// processor, whose commands read their own work.
	history := read("loanq_history", "history export: the stream of assignments and dispositions")
	lockRun := TableGrant{Table: "loanq_lock", Privs: []string{"SELECT", "INSERT", "UPDATE"}, Columns: []string{"name", "holder", "token", "taken_at", "expires_at"},
		Why: "lock run: named leases (MySQL names the key column in its insert-or-keep)"}
	switch req.Role {
	case Processor:
		p.Tables = processor
		p.LockSources = true
	case Supervisor:
		p.Tables = append(processor[:len(processor)-1:len(processor)-1], lockRun, history)
		p.LockSources = true
	case Serve:
		// Also reads the API tokens (serve --api --auth token): only their
		// hashes, never a way to issue or revoke one.
		p.Tables = append(processor[:len(processor):len(processor)], read("loanq_api_token", "authenticate API calls by token hash"),
			TableGrant{Table: "loanq_session", Privs: []string{"SELECT", "INSERT", "DELETE"}, Why: "sessions of the processor's page (/work): sign in, check, sign out"})
		// --proxy-groups-header: the groups a trusted proxy names.
		for i, t := range p.Tables {
			if t.Table == "loanq_group" {
				p.Tables[i] = TableGrant{Table: "loanq_group", Privs: []string{"SELECT", "INSERT", "DELETE"}, Why: "who is in which group; serve --proxy-groups-header keeps the groups a trusted proxy names"}
			}
		}
		p.LockSources = true
	case Admin:
		p.Tables = []TableGrant{version, account,
			{Table: "loanq_task", Privs: []string{"SELECT", "INSERT", "UPDATE", "DELETE"}, Why: "define, change and delete tasks"},
			{Table: "loanq_work_request", Privs: []string{"SELECT", "INSERT", "UPDATE", "DELETE"}, Why: "task delete and prune remove history"},
			{Table: "loanq_work", Privs: []string{"SELECT", "INSERT", "UPDATE", "DELETE"}, Why: "task delete and prune remove history"},
			{Table: "loanq_query_run", Privs: []string{"SELECT", "INSERT", "DELETE"}, Why: "task delete and prune remove history"},
			{Table: "loanq_task_user", Privs: []string{"SELECT", "INSERT", "UPDATE", "DELETE"}, Why: "task delete removes the cap's lock rows"},
			{Table: "loanq_pool", Privs: []string{"SELECT", "INSERT", "UPDATE", "DELETE"}, Why: "candidate pools"},
			{Table: "loanq_lock", Privs: []string{"SELECT", "INSERT", "UPDATE"}, Why: "lock run: named leases"},
			{Table: "loanq_api_token", Privs: []string{"SELECT", "INSERT", "UPDATE"}, Why: "token create, list and revoke (serve --api)"},
			{Table: "loanq_group", Privs: []string{"SELECT", "INSERT", "DELETE"}, Why: "group add, remove and list"},
			{Table: "loanq_task_allow", Privs: []string{"SELECT", "INSERT", "DELETE"}, Why: "task create|update --allow, --allow-clear; task delete"},
			{Table: "loanq_task_not_worked_in", Privs: []string{"SELECT", "INSERT", "DELETE"}, Why: "task create|update --not-worked-in; task delete"},
			{Table: "loanq_history", Privs: []string{"SELECT", "DELETE"}, Why: "history export; task delete and prune remove events with their work rows"},
		}
		p.LockSources = true
	case Dashboard:
		p.Tables = []TableGrant{version, account,
			read("loanq_task", "tasks"), read("loanq_work_request", "pending requests"), read("loanq_work", "active work and dispositions"),
			read("loanq_query_run", "criteria-query runs"), read("loanq_lock", "lock list"), read("loanq_pool", "candidate pools"),
			read("loanq_task_allow", "who may work each task"), read("loanq_group", "who is in which group"),
			read("loanq_task_not_worked_in", "each task's four-eyes rule"), history,
		}
		// serve counts each task's backlog every --backlog-every with the
		// task's criteria, a COUNT over its source: the dashboard reads
		// the --source tables named (never locking a row). Without
		// --source it reads loanq's tables only, and serve runs with
		// --backlog-every 0s (docs/security.md).
	case Refresher:
		// A refill is a serving round: it serves the requests pending at
		// that moment, as any round does, so it writes what a processor's
		// round writes (for nobody in particular: it never logs requests).
		p.Tables = append(processor[:len(processor)-1:len(processor)-1], lockRun) // refill loops run under lock run
		p.LockSources = true
	default:
		return nil, problem.Usagef("unknown role %q", req.Role)
	}
	for _, s := range req.Sources {
		if !tableRe().MatchString(s.Table) || !columnRe().MatchString(s.Key) {
			return nil, problem.Usagef("invalid source %s:%s", s.Table, s.Key)
		}
	}
	return p, nil
}

// Comment is a one-line SQL comment for a grant script.
func Comment(format string, args ...any) string { return "-- " + fmt.Sprintf(format, args...) }

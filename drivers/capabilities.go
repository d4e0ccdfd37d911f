package drivers

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// Capabilities say, once per driver, what its database can do wherever
// databases differ in how the engine works: the engine (package dispatch)
// switches on these values, never on whether a statement is empty. A
// statement a capability governs (CapabilityStatements) is sent exactly when
// the capabilities say so: Build refuses a driver whose statements disagree
// (one needed and empty, or one given that is never sent), and Register one
// whose optional interfaces (RowLocker, PoolLocker, …) disagree. `loanq sql`
// prints them above the statements.
//
// Every field must be set: the zero value of each is no valid choice.
type Capabilities struct {
	// Strategies are the lock strategies the database supports; the first
	// is the default. Skip, NoWait and Wait need their Lock… statement;
	// Rows needs WorkInsertRows and a RowLocker driver.
	Strategies []Strategy
	// PasswordEnv names the environment variables the database's client
	// library reads a password from when the DSN holds none (pgx reads
	// PGPASSWORD, as libpq does). They are loanq's secret then: the
	// commands loanq runs (lock run, work run) do not get them.
	PasswordEnv []string
	// Wait is how a caller whose request is pending waits for the holder of
	// the task's row lock to commit (docs/algorithm.md, "Waiting").
	Wait WaitMode
	// WaitBound is how that queued wait (and a rows caller's wait for a
	// held loan, RowWaiter) is bounded.
	WaitBound WaitBound
	// RoundFinish is how a serving round sets the outcome of its requests.
	RoundFinish RoundFinish
	// UserCap is how a claim without the task lock (strategy rows, the
	// candidate pool) keeps two claims of one user from passing its
	// max_active together.
	UserCap UserCapLock
	// PoolClaim is how the first fresh candidates of a task's pool are
	// locked.
	PoolClaim PoolClaimMode
	// RowsFinish is how a rows claim of a new request writes its outcome
	// once it holds its rows: the work rows, the request's finish, the run
	// log and the answer, in separate statements or in one.
	RowsFinish RowsFinishMode
	// HoldLimit is how the server is made to end a task-lock holder's
	// session that holds its transaction too long (docs/reliability.md).
	HoldLimit HoldLimit
	// Accounts says whether database accounts decide who may act as whom
	// (docs/security.md).
	Accounts Accounts
	// RoundReads is where a serving round reads the requests pending after
	// its criteria query, those logged while the query ran included
	// (docs/algorithm.md, step 5).
	RoundReads RoundReadMode
	// DDL says whether a migration's schema changes roll back with its
	// transaction, which decides whether `migrate up` may run a migration
	// again after the server chose it as a deadlock victim.
	DDL DDLMode
}

// DDLMode is whether schema changes are transactional.
type DDLMode string

const (
	// DDLTransactional: a migration runs in one transaction, its CREATE and
	// ALTER statements included (PostgreSQL, SQLite); a deadlock victim's
	// migration was undone whole and can run again.
	DDLTransactional DDLMode = "transactional"
	// DDLAutocommit: each CREATE or ALTER commits by itself (MySQL/MariaDB,
	// Oracle); a migration that failed part-way may have left its first
	// statements applied, so it is never run again by itself.
	DDLAutocommit DDLMode = "autocommit"
)

// WaitMode is how a waiting caller learns of the lock holder's commit.
type WaitMode string

const (
	// WaitPoll: no row lock to queue on (the lease only): the caller polls
	// its request (RequestWake).
	WaitPoll WaitMode = "poll"
	// WaitQueueExclusive: the caller queues on the task row with a bounded
	// FOR UPDATE (LockWaitBounded); waiters are granted one after the other.
	WaitQueueExclusive WaitMode = "queue-exclusive"
	// WaitQueueShared: the caller first queues in share mode
	// (LockShareBounded), so every waiter is granted at the holder's commit
	// at once; only one whose request is still pending then queues
	// exclusively (LockWaitBounded) to serve.
	WaitQueueShared WaitMode = "queue-shared"
)

// WaitBound is how a queued lock wait is bounded.
type WaitBound string

const (
	// BoundNone: nothing queues (WaitPoll): nothing to bound.
	BoundNone WaitBound = "none"
	// BoundInStatement: the statement carries the bound ({wait_s} in
	// LockWaitBounded: Oracle's FOR UPDATE WAIT n); no setting is changed.
	BoundInStatement WaitBound = "in-statement"
	// BoundTransactionLocal: a setting of the waiter's transaction
	// (WaitLockSet), put back when the lock is granted (WaitLockRestore);
	// it ends with the transaction, so nothing is saved before.
	BoundTransactionLocal WaitBound = "transaction-local"
	// BoundSessionSetting: a setting of the session, which outlives the
	// transaction: read first (WaitLockSave), set (WaitLockSet), and put
	// back when granted and on the same connection after (WaitLockRestore).
	BoundSessionSetting WaitBound = "session-setting"
)

// RoundFinish is how a serving round sets its requests' outcomes.
type RoundFinish string

const (
	// FinishEach: one RequestFinish per request.
	FinishEach RoundFinish = "each"
	// FinishMany: one RequestFinishMany for the round's requests.
	FinishMany RoundFinish = "many"
)

// UserCapLock is how a claim without the task lock serialises the
// max_active check of one user.
type UserCapLock string

const (
	// UserCapOneWriter: the database has one writer at a time; the claim's
	// transaction serialises the check by itself.
	UserCapOneWriter UserCapLock = "one-writer"
	// UserCapRowLock: the claim locks the user's loanq_task_user row first
	// (UserLockEnsure, UserLock).
	UserCapRowLock UserCapLock = "row-lock"
)

// PoolClaimMode is how the candidate pool is claimed.
type PoolClaimMode string

const (
	// PoolClaimStatement: one locking read with a row limit (PoolClaim).
	PoolClaimStatement PoolClaimMode = "statement"
	// PoolClaimProcedure: a row limit cannot go with the locking read; the
	// driver locks the candidates one by one (PoolLocker).
	PoolClaimProcedure PoolClaimMode = "procedure"
)

// RowsFinishMode is how a rows claim of a new request ends.
type RowsFinishMode string

const (
	// RowsFinishStatements: the work rows (CriteriaClaim), the request's
	// finish (RequestFinish) and the run (QueryRunInsert) are written one
	// statement after the other, and the answer is read back after the
	// commit (RequestWithLoans).
	RowsFinishStatements RowsFinishMode = "statements"
	// RowsFinishOneStatement: one statement writes the work rows, finishes
	// the request, logs the run and returns the answer (FinishingClaimer:
	// PostgreSQL's data-modifying WITH): three round trips fewer per get.
	RowsFinishOneStatement RowsFinishMode = "one-statement"
)

// HoldLimit is how a stalled task-lock holder's session is ended.
type HoldLimit string

const (
	// HoldLimitNone: no session holds a task row lock (the lease only,
	// whose TTL bounds a holder).
	HoldLimitNone HoldLimit = "none"
	// HoldLimitByDBA: the session cannot bound its own idle time; a DBA
	// configures the bound on the server (docs/oracle.md). loanq sets none.
	HoldLimitByDBA HoldLimit = "dba"
	// HoldLimitTransactionLocal: settings of the lock transaction
	// (HoldLimitSet), ended with it.
	HoldLimitTransactionLocal HoldLimit = "transaction-local"
	// HoldLimitSessionSetting: settings of the session (HoldLimitSet), put
	// back before the pooled connection is reused (HoldLimitReset).
	HoldLimitSessionSetting HoldLimit = "session-setting"
)

// Accounts says whether the database has accounts.
type Accounts string

const (
	// AccountsNone: no accounts (SQLite): the file's permissions are the
	// boundary, and any user name is used as given.
	AccountsNone Accounts = "none"
	// AccountsDatabase: the database's accounts and loanq_may_act_as decide
	// who may act as whom (Identity).
	AccountsDatabase Accounts = "database"
)

// RoundReadMode is where a serving round reads the requests pending after
// its query.
type RoundReadMode string

const (
	// RoundReadsTransaction: in the round's own transaction, whose every
	// statement sees what committed before it (READ COMMITTED: PostgreSQL's
	// default; MySQL/MariaDB's rounds ask for it): no other connection is
	// needed while the round holds the task lock, which a command-line call
	// would open for this one read, and which a bounded pool (serve
	// --max-conns) may not have free while its callers queue on that lock.
	RoundReadsTransaction RoundReadMode = "transaction"
	// RoundReadsPool: through another connection of the pool, where the
	// round's transaction may read a snapshot taken before the query ran
	// (REPEATABLE READ dates it from the first read) and would not see the
	// requests logged since. MySQL/MariaDB's rounds run at READ COMMITTED
	// (RowsTxOptions) and read in the transaction.
	RoundReadsPool RoundReadMode = "pool"
)

// IsSetting reports whether the bound is a setting: WaitLockSet bounds the
// wait, WaitLockRestore puts the setting back.
func (b WaitBound) IsSetting() bool { return b == BoundTransactionLocal || b == BoundSessionSetting }

// IsSetting reports whether loanq sets the limit (HoldLimitSet).
func (h HoldLimit) IsSetting() bool {
	return h == HoldLimitTransactionLocal || h == HoldLimitSessionSetting
}

// Supports reports whether strategy s is among c's strategies.
func (c Capabilities) Supports(s Strategy) bool { return slices.Contains(c.Strategies, s) }

// rowLockStrategies reports whether c has a strategy that holds the task's
// row lock (skip, nowait, wait).
func (c Capabilities) rowLockStrategies() bool {
	return c.Supports(Skip) || c.Supports(NoWait) || c.Supports(Wait)
}

// Capability is one capability with its value, as `loanq sql` prints it.
type Capability struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	// Meaning says what the value means, in a phrase.
	Meaning string `json:"meaning"`
}

// List returns c's capabilities in declaration order.
func (c Capabilities) List() []Capability {
	names := make([]string, len(c.Strategies))
	for i, s := range c.Strategies {
		names[i] = string(s)
	}
	return []Capability{
		{"strategies", strings.Join(names, ", "), "the lock strategies; the first is the default"},
		{"wait mode", string(c.Wait), map[WaitMode]string{
			WaitPoll:           "waiters poll their request (no row lock to queue on)",
			WaitQueueExclusive: "waiters queue on the task row with a bounded FOR UPDATE",
			WaitQueueShared:    "waiters queue on the task row in share mode, all granted at the holder's commit",
		}[c.Wait]},
		{"wait bound", string(c.WaitBound), map[WaitBound]string{
			BoundNone:             "nothing queues",
			BoundInStatement:      "the bound is written in the locking statement",
			BoundTransactionLocal: "a setting of the waiter's transaction, put back once granted",
			BoundSessionSetting:   "a session setting, saved before and put back after",
		}[c.WaitBound]},
		{"round finish", string(c.RoundFinish), map[RoundFinish]string{
			FinishEach: "a serving round finishes each request with its own statement",
			FinishMany: "a serving round finishes its requests in one statement",
		}[c.RoundFinish]},
		{"user cap", string(c.UserCap), map[UserCapLock]string{
			UserCapOneWriter: "one writer at a time serialises a claim's max_active check",
			UserCapRowLock:   "a claim locks the user's loanq_task_user row for its max_active check",
		}[c.UserCap]},
		{"pool claim", string(c.PoolClaim), map[PoolClaimMode]string{
			PoolClaimStatement: "one locking read with a row limit",
			PoolClaimProcedure: "the driver locks candidates one by one (a row limit cannot go with FOR UPDATE)",
		}[c.PoolClaim]},
		{"rows finish", string(c.RowsFinish), map[RowsFinishMode]string{
			RowsFinishStatements:   "a rows claim writes its work rows, request outcome and run log one statement after the other, then reads its answer",
			RowsFinishOneStatement: "a rows claim writes its work rows, request outcome and run log, and returns its answer, in one statement",
		}[c.RowsFinish]},
		{"hold limit", string(c.HoldLimit), map[HoldLimit]string{
			HoldLimitNone:             "no session holds a task row lock (the lease TTL bounds a holder)",
			HoldLimitByDBA:            "a DBA configures the bound on the server; loanq sets none",
			HoldLimitTransactionLocal: "settings of the lock transaction, ended with it",
			HoldLimitSessionSetting:   "session settings, put back before the connection is reused",
		}[c.HoldLimit]},
		{"accounts", string(c.Accounts), map[Accounts]string{
			AccountsNone:     "no database accounts: any user name is used as given",
			AccountsDatabase: "database accounts decide who may act as whom",
		}[c.Accounts]},
		{"round reads", string(c.RoundReads), map[RoundReadMode]string{
			RoundReadsTransaction: "a round reads the requests pending after its query in its own transaction, which sees every commit (READ COMMITTED)",
			RoundReadsPool:        "a round reads the requests pending after its query through another connection (its transaction's snapshot predates the query)",
		}[c.RoundReads]},
		{"ddl", string(c.DDL), map[DDLMode]string{
			DDLTransactional: "a migration's schema changes roll back with it: migrate up runs a deadlock victim's migration again",
			DDLAutocommit:    "each schema change commits by itself: a migration that failed part-way is not run again by itself",
		}[c.DDL]},
		{"password from", passwordEnvValue(c.PasswordEnv), "environment variables the client reads a password from; the commands of work run and lock run do not get them"},
	}
}

func passwordEnvValue(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// Check reports whether c is complete and consistent in itself.
func (c Capabilities) Check() error {
	var errs []string
	if len(c.Strategies) == 0 {
		errs = append(errs, "no lock strategy")
	}
	for i, s := range c.Strategies {
		if !slices.Contains(AllStrategies, s) {
			errs = append(errs, fmt.Sprintf("unknown strategy %q", s))
		}
		if slices.Contains(c.Strategies[:i], s) {
			errs = append(errs, fmt.Sprintf("strategy %s listed twice", s))
		}
	}
	for _, x := range c.List()[1:] {
		if x.Meaning == "" {
			errs = append(errs, fmt.Sprintf("%s %q is not one of its values", x.Name, x.Value))
		}
	}
	if (c.Wait == WaitPoll) != (c.WaitBound == BoundNone) {
		errs = append(errs, fmt.Sprintf("wait mode %s with wait bound %s: only polling waiters need no bound", c.Wait, c.WaitBound))
	}
	if c.Wait != WaitPoll && !c.rowLockStrategies() {
		errs = append(errs, fmt.Sprintf("wait mode %s without a row-lock strategy (skip, nowait, wait) to queue on", c.Wait))
	}
	if c.Wait == WaitPoll && c.rowLockStrategies() {
		errs = append(errs, "wait mode poll with a row-lock strategy: waiters would poll a lock they could queue on")
	}
	if c.Supports(Rows) && c.WaitBound == BoundNone {
		errs = append(errs, "strategy rows with wait bound none: a rows caller's wait for a held loan must be bounded")
	}
	if c.Supports(Rows) && c.UserCap != UserCapRowLock {
		errs = append(errs, fmt.Sprintf("strategy rows with user cap %s: its claims lock the user's row", c.UserCap))
	}
	if c.RowsFinish == RowsFinishOneStatement && !c.Supports(Rows) {
		errs = append(errs, "rows finish one-statement without strategy rows")
	}
	if (c.HoldLimit == HoldLimitNone) == c.rowLockStrategies() {
		errs = append(errs, fmt.Sprintf("hold limit %s with strategies %v: none means no session holds a task row lock", c.HoldLimit, c.Strategies))
	}
	if len(errs) > 0 {
		return fmt.Errorf("capabilities: %s", strings.Join(errs, "; "))
	}
	return nil
}

// CapabilityStatement is a statement a capability governs: whether the
// capabilities say the dialect sends it, and which capability decides.
type CapabilityStatement struct {
	Field string
	Sent  bool
	// Because names the capability and its value.
	Because string
}

// CapabilityStatements lists every statement of Statements whose sending a
// capability decides (each has an `empty` tag; no other has), with whether
// c sends it.
func (c Capabilities) CapabilityStatements() []CapabilityStatement {
	strategy := func(field string, s Strategy) CapabilityStatement {
		return CapabilityStatement{field, c.Supports(s), fmt.Sprintf("strategies %v", c.Strategies)}
	}
	wait := "wait mode " + string(c.Wait)
	bound := "wait bound " + string(c.WaitBound)
	setting := c.WaitBound.IsSetting()
	userCap := "user cap " + string(c.UserCap)
	hold := "hold limit " + string(c.HoldLimit)
	return []CapabilityStatement{
		{"RequestFinishMany", c.RoundFinish == FinishMany, "round finish " + string(c.RoundFinish)},
		strategy("LockSkip", Skip),
		strategy("LockNoWait", NoWait),
		strategy("LockWait", Wait),
		{"WaitLockSave", c.WaitBound == BoundSessionSetting, bound},
		{"WaitLockSet", setting, bound},
		{"WaitLockRestore", setting, bound},
		{"LockWaitBounded", c.Wait != WaitPoll, wait},
		{"LockShareBounded", c.Wait == WaitQueueShared, wait},
		{"UserLockEnsure", c.UserCap == UserCapRowLock, userCap},
		{"UserLock", c.UserCap == UserCapRowLock, userCap},
		strategy("WorkInsertRows", Rows),
		{"HoldLimitSet", c.HoldLimit.IsSetting(), hold},
		{"HoldLimitReset", c.HoldLimit == HoldLimitSessionSetting, hold},
		{"PoolClaim", c.PoolClaim == PoolClaimStatement, "pool claim " + string(c.PoolClaim)},
		{"Identity", c.Accounts == AccountsDatabase, "accounts " + string(c.Accounts)},
	}
}

// CheckStatements reports whether st sends exactly the statements c says:
// c is consistent in itself, every statement a capability needs is there,
// none it says is never sent is, and the bound of LockWaitBounded is
// written in it exactly when c says the statement carries it.
func (c Capabilities) CheckStatements(st *Statements) error {
	if err := c.Check(); err != nil {
		return err
	}
	texts := map[string]string{}
	tagged := map[string]bool{}
	_ = st.each(func(f reflect.StructField, s statement) error {
		texts[f.Name] = s.Text()
		tagged[f.Name] = f.Tag.Get("empty") != ""
		return nil
	})
	var errs []string
	governed := map[string]bool{}
	for _, u := range c.CapabilityStatements() {
		governed[u.Field] = true
		text, ok := texts[u.Field]
		switch {
		case !ok:
			errs = append(errs, fmt.Sprintf("%s is no statement", u.Field))
		case !tagged[u.Field]:
			errs = append(errs, fmt.Sprintf("%s is governed by a capability but has no `empty` tag", u.Field))
		case u.Sent && text == "":
			errs = append(errs, fmt.Sprintf("%s is empty, but %s needs it", u.Field, u.Because))
		case !u.Sent && text != "":
			errs = append(errs, fmt.Sprintf("%s is given, but %s never sends it", u.Field, u.Because))
		}
	}
	for name, t := range tagged {
		if t && !governed[name] {
			errs = append(errs, fmt.Sprintf("%s has an `empty` tag but no capability decides whether it is sent", name))
		}
	}
	if lw := texts["LockWaitBounded"]; lw != "" && strings.Contains(lw, "{wait_s}") != (c.WaitBound == BoundInStatement) {
		errs = append(errs, fmt.Sprintf("LockWaitBounded with wait bound %s: {wait_s} must be in its text exactly when the bound is in the statement", c.WaitBound))
	}
	if len(errs) > 0 {
		slices.Sort(errs)
		return fmt.Errorf("capabilities and statements disagree: %s", strings.Join(errs, "; "))
	}
	return nil
}

// CheckDriver reports whether d's Capabilities agree with its statements,
// its Strategies and the optional interfaces it implements. Register checks
// all but the statements (checkInterfaces), which would build the catalogue
// at every process's start; Build checks those when the catalogue is first
// used (BuildOnce).
func CheckDriver(d Driver) error {
	if err := d.Capabilities().CheckStatements(d.Statements()); err != nil {
		return fmt.Errorf("driver %s: %w", d.Name(), err)
	}
	return checkInterfaces(d)
}

// checkInterfaces reports whether d's Capabilities agree with its Strategies
// and the optional interfaces it implements.
func checkInterfaces(d Driver) error {
	c := d.Capabilities()
	var errs []string
	implements := func(ok bool, iface string, want bool, because string) {
		switch {
		case want && !ok:
			errs = append(errs, fmt.Sprintf("%s needs drivers.%s", because, iface))
		case !want && ok:
			errs = append(errs, fmt.Sprintf("the driver is a drivers.%s, which %s never uses", iface, because))
		}
	}
	_, rowLocker := d.(RowLocker)
	_, rowWaiter := d.(RowWaiter)
	_, poolLocker := d.(PoolLocker)
	_, finishing := d.(FinishingClaimer)
	_, holdLimiter := d.(HoldLimiter)
	_, grants := d.(GrantWriter)
	implements(rowLocker, "RowLocker", c.Supports(Rows), fmt.Sprintf("strategies %v", c.Strategies))
	implements(rowWaiter, "RowWaiter", c.Supports(Rows), fmt.Sprintf("strategies %v", c.Strategies))
	implements(poolLocker, "PoolLocker", c.PoolClaim == PoolClaimProcedure, "pool claim "+string(c.PoolClaim))
	implements(finishing, "FinishingClaimer", c.RowsFinish == RowsFinishOneStatement, "rows finish "+string(c.RowsFinish))
	if holdLimiter && !c.HoldLimit.IsSetting() {
		errs = append(errs, fmt.Sprintf("the driver is a drivers.HoldLimiter, which hold limit %s never uses", c.HoldLimit))
	}
	implements(grants, "GrantWriter", c.Accounts == AccountsDatabase, "accounts "+string(c.Accounts))
	if len(errs) > 0 {
		return fmt.Errorf("driver %s: capabilities disagree with the driver: %s", d.Name(), strings.Join(errs, "; "))
	}
	return nil
}

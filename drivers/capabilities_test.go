package drivers

import (
	"reflect"
	"strings"
	"testing"
)

// testCaps are capabilities the portable statements fit once testOverride
// has given the statements portable.go leaves to the dialects.
var testCaps = Capabilities{
	Strategies:  []Strategy{Skip, NoWait, Wait, Lease, Rows},
	Wait:        WaitQueueExclusive,
	WaitBound:   BoundTransactionLocal,
	RoundFinish: FinishEach,
	UserCap:     UserCapRowLock,
	PoolClaim:   PoolClaimStatement,
	RowsFinish:  RowsFinishStatements,
	HoldLimit:   HoldLimitTransactionLocal,
	Accounts:    AccountsDatabase,
	RoundReads:  RoundReadsPool,
	DDL:         DDLTransactional,
}

func testOverride(s *Statements) {
	s.WaitLockSet.SQL = `SET LOCAL lock_timeout = :ms`
	s.WaitLockRestore.SQL = `SET LOCAL lock_timeout = :value`
	s.HoldLimitSet.SQL = `SET LOCAL idle = :idle_ms, stmt = :statement_ms`
	s.Identity.SQL = `SELECT current_user AS account_name, :user AS may_act, NULL AS mapped`
}

// Build refuses statements that disagree with the capabilities, both ways:
// a statement a capability needs left empty, and one it never sends given.
func TestBuildChecksCapabilities(t *testing.T) {
	if err := testCaps.CheckStatements(Build(dollar, testCaps, testOverride)); err != nil {
		t.Fatalf("the test capabilities: %v", err)
	}
	for _, c := range []struct {
		name     string
		caps     func(*Capabilities)
		override func(*Statements)
		want     string
	}{
		{"a strategy without its lock", nil, func(s *Statements) { s.LockNoWait.SQL = "" },
			"LockNoWait is empty, but strategies [skip nowait wait lease rows] needs it"},
		{"a lock without its strategy", func(c *Capabilities) { c.Strategies = []Strategy{Skip, Wait, Lease, Rows} }, nil,
			"LockNoWait is given, but strategies [skip wait lease rows] never sends it"},
		{"finish many without its statement", func(c *Capabilities) { c.RoundFinish = FinishMany }, nil,
			"RequestFinishMany is empty, but round finish many needs it"},
		{"finish each with a batch statement", nil, func(s *Statements) {
			s.RequestFinishMany.SQL = `UPDATE r SET x = :outcomes WHERE t = :task_id`
		}, "RequestFinishMany is given, but round finish each never sends it"},
		{"a session bound without its save", func(c *Capabilities) { c.WaitBound = BoundSessionSetting }, nil,
			"WaitLockSave is empty, but wait bound session-setting needs it"},
		{"a bound in the statement with settings", func(c *Capabilities) { c.WaitBound = BoundInStatement }, nil,
			"WaitLockSet is given, but wait bound in-statement never sends it"},
		{"a bound in the statement without {wait_s}", func(c *Capabilities) { c.WaitBound = BoundInStatement },
			func(s *Statements) { s.WaitLockSet.SQL, s.WaitLockRestore.SQL = "", "" },
			"{wait_s} must be in its text exactly when the bound is in the statement"},
		{"shared waits without the share lock", func(c *Capabilities) { c.Wait = WaitQueueShared }, nil,
			"LockShareBounded is empty, but wait mode queue-shared needs it"},
		{"a session hold limit without its reset", func(c *Capabilities) { c.HoldLimit = HoldLimitSessionSetting }, nil,
			"HoldLimitReset is empty, but hold limit session-setting needs it"},
		{"a DBA's hold limit with a setting", func(c *Capabilities) { c.HoldLimit = HoldLimitByDBA }, nil,
			"HoldLimitSet is given, but hold limit dba never sends it"},
		{"a procedure's pool claim with a statement", func(c *Capabilities) { c.PoolClaim = PoolClaimProcedure }, nil,
			"PoolClaim is given, but pool claim procedure never sends it"},
		{"no accounts with an identity", func(c *Capabilities) { c.Accounts = AccountsNone }, nil,
			"Identity is given, but accounts none never sends it"},
		{"accounts without an identity", nil, func(s *Statements) { s.Identity.SQL = "" },
			"Identity is empty, but accounts database needs it"},
		{"an unset capability", func(c *Capabilities) { c.PoolClaim = "" }, nil, `pool claim "" is not one of its values`},
		{"an unset rows finish", func(c *Capabilities) { c.RowsFinish = "" }, nil, `rows finish "" is not one of its values`},
		{"a one-statement rows finish without rows", func(c *Capabilities) {
			c.Strategies, c.RowsFinish = []Strategy{Skip, NoWait, Wait, Lease}, RowsFinishOneStatement
		}, func(s *Statements) { s.WorkInsertRows.SQL = "" }, "rows finish one-statement without strategy rows"},
		{"polling with a bound", func(c *Capabilities) { c.Wait = WaitPoll }, nil,
			"wait mode poll with wait bound transaction-local"},
		{"rows without the user's row lock", func(c *Capabilities) { c.UserCap = UserCapOneWriter }, nil,
			"strategy rows with user cap one-writer"},
		{"no hold limit with a task row lock", func(c *Capabilities) { c.HoldLimit = HoldLimitNone }, nil,
			"hold limit none with strategies"},
		{"a strategy twice", func(c *Capabilities) { c.Strategies = []Strategy{Lease, Skip, NoWait, Wait, Rows, Lease} }, nil,
			"strategy lease listed twice"},
	} {
		caps := testCaps
		caps.Strategies = append([]Strategy(nil), testCaps.Strategies...)
		if c.caps != nil {
			c.caps(&caps)
		}
		err := func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = &buildPanic{r.(string)}
				}
			}()
			Build(dollar, caps, func(s *Statements) {
				testOverride(s)
				if c.override != nil {
					c.override(s)
				}
			})
			return nil
		}()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Build gave %v, want a panic with %q", c.name, err, c.want)
		}
	}
}

type buildPanic struct{ msg string }

func (p *buildPanic) Error() string { return p.msg }

// The statements a capability governs are exactly those with an `empty`
// tag: an empty statement means only "this dialect never sends it".
func TestEmptyTagsAreCapabilities(t *testing.T) {
	governed := map[string]bool{}
	for _, u := range testCaps.CapabilityStatements() {
		governed[u.Field] = true
	}
	for _, n := range Portable().List() {
		if (n.Empty != "") != governed[n.Field] {
			t.Errorf("%s: empty tag %q, governed by a capability: %v", n.Field, n.Empty, governed[n.Field])
		}
	}
	if len(governed) != len(testCaps.CapabilityStatements()) {
		t.Error("a statement is listed twice in CapabilityStatements")
	}
}

// Every capability is listed with a meaning for `loanq sql`.
func TestCapabilitiesList(t *testing.T) {
	l := testCaps.List()
	if len(l) != reflect.TypeOf(Capabilities{}).NumField() || l[0].Value != "skip, nowait, wait, lease, rows" || l[1].Name != "wait mode" || l[1].Value != "queue-exclusive" {
		t.Errorf("List: %+v", l)
	}
	for _, x := range l {
		if x.Meaning == "" {
			t.Errorf("%s has no meaning", x.Name)
		}
	}
}

package dispatch

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/loanq/loanq/loankey"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/problem"
)

// Who may work a task, and four eyes (docs/governance.md).
//
// Entitlements: a task with an allow list (task create|update --allow
// USER|@GROUP) may be worked only by the users it names and the members of
// the groups it names (loanq group add); a task without one by everyone.
// The engine asks first (MayWork, at every get and every recheck that would
// serve), so a user gets a clear answer; the database refuses the same for
// an untrusted account's hand-written request or work row (migration
// 00018).
//
// Four eyes: a task that names other tasks with --not-worked-in never
// hands a loan to a user who has a work row for it, active or disposed and
// still retained, in one of them. It is part of eligibility: a round's one
// criteria query stays the same for all its requesters, and the allocation
// gives a loan one of them worked to another (planAllocation, blocked);
// a claim for one user (rows, pool) runs the criteria with the rule for
// that user in it (criteriaFor).

// NotAllowedError is a user asking to work a task whose allow list does
// not name them or a group of theirs. Commands answer it with exit 2
// (it is a problem.Usage error), the API with 403.
type NotAllowedError struct {
	Task string
	User string
}

func (e *NotAllowedError) Error() string { return e.problem().Error() }

// Unwrap gives the problem.Error that decides the exit code (2).
func (e *NotAllowedError) Unwrap() error { return e.problem() }

func (e *NotAllowedError) problem() *problem.Error {
	return &problem.Error{Kind: problem.Usage,
		Msg: fmt.Sprintf("user %s is not allowed to work task %s; ask an admin: loanq task update %s --allow %s (or to add you to a group the task allows: loanq task show %s lists them)",
			e.User, e.Task, e.Task, e.User, e.Task)}
}

// IsNotAllowed reports whether err says a user may not work a task.
func IsNotAllowed(err error) bool {
	var na *NotAllowedError
	return errors.As(err, &na)
}

// MayWork answers whether user may work the task named taskName: nil, a
// *NotAllowedError, or another error (an unknown task: problem.Usage).
func (st *store) MayWork(ctx context.Context, taskName, user string) error {
	task, err := st.Task(ctx, taskName)
	if err != nil {
		return err
	}
	return st.mayWorkTask(ctx, task, user)
}

// mayWorkTask is MayWork for a task already read: no statement for a task
// without an allow list (TaskRow's allow_n).
func (st *store) mayWorkTask(ctx context.Context, task *Task, user string) error {
	if !task.Restricted {
		return nil
	}
	n, err := st.governanceSQL().MayWork.One(ctx, st.db, taskUserParams{TaskID: task.ID, User: user})
	if err != nil {
		return fmt.Errorf("reading who may work task %s: %w", task.Name, err)
	}
	if n.N == 0 {
		return &NotAllowedError{Task: task.Name, User: user}
	}
	return nil
}

// WorkableTasks lists, by name, the tasks user may work.
func (st *store) WorkableTasks(ctx context.Context, user string) ([]*Task, error) {
	tasks, err := st.Tasks(ctx)
	if err != nil {
		return nil, err
	}
	ids, err := st.governanceSQL().Workable.All(ctx, st.db, engineio.UserParams{User: user})
	if err != nil {
		return nil, fmt.Errorf("listing the tasks %s may work: %w", user, err)
	}
	ok := make(map[int64]bool, len(ids))
	for _, r := range ids {
		ok[r.ID] = true
	}
	return slices.DeleteFunc(tasks, func(t *Task) bool { return !ok[t.ID] }), nil
}

// Governance is what task show says of who may work a task and of its
// four-eyes rule.
type Governance struct {
	// Allow: user names and @groups; empty: everyone may work the task.
	Allow []string
	// NotWorkedIn: the tasks whose workers of a loan may not work it here.
	NotWorkedIn []string
}

// TaskGovernance reads a task's allow list and four-eyes rule.
func (a *Admin) TaskGovernance(ctx context.Context, t *Task) (Governance, error) {
	var g Governance
	if t.Restricted {
		rows, err := a.governanceSQL().AllowList.All(ctx, a.db, engineio.TaskParams{TaskID: t.ID})
		if err != nil {
			return g, fmt.Errorf("reading who may work task %s: %w", t.Name, err)
		}
		for _, r := range rows {
			g.Allow = append(g.Allow, allowEntry(r.IsGroup == 1, r.Principal))
		}
	}
	if t.FourEyes {
		rows, err := a.governanceSQL().NotWorkedInList.All(ctx, a.db, engineio.TaskParams{TaskID: t.ID})
		if err != nil {
			return g, fmt.Errorf("reading the four-eyes rule of task %s: %w", t.Name, err)
		}
		for _, r := range rows {
			g.NotWorkedIn = append(g.NotWorkedIn, r.Name)
		}
	}
	return g, nil
}

func allowEntry(group bool, name string) string {
	if group {
		return "@" + name
	}
	return name
}

// GovernanceChange is what task create|update changes of a task's allow
// list and four-eyes rule: the clears first, then the additions (an
// --allow adds to the list; --allow-clear --allow X replaces it).
type GovernanceChange struct {
	Allow            []string // USER or @GROUP
	AllowClear       bool
	NotWorkedIn      []string // task names
	NotWorkedInClear bool
}

func (c GovernanceChange) empty() bool {
	return len(c.Allow) == 0 && !c.AllowClear && len(c.NotWorkedIn) == 0 && !c.NotWorkedInClear
}

var groupNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`) })

// ValidateGroupName checks a group name (loanq group, --allow @GROUP).
func ValidateGroupName(name string) error {
	if !groupNameRE().MatchString(name) {
		return problem.Usagef("invalid group name %s: use 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit (e.g. senior-review)", quote(name))
	}
	return nil
}

// parseAllow reads an --allow value: USER or @GROUP.
func parseAllow(v string) (group bool, name string, err error) {
	if g, ok := strings.CutPrefix(v, "@"); ok {
		if err := ValidateGroupName(g); err != nil {
			return false, "", problem.Usagef("invalid --allow %s: after '@' give a group name (1-100 letters, digits, '.', '_' or '-'); loanq group list shows the groups", quote(v))
		}
		return true, g, nil
	}
	if err := validateUser(v); err != nil {
		return false, "", problem.Usagef("invalid --allow %s: give a user name or @GROUP (e.g. --allow ana --allow @senior-review)", quote(v))
	}
	return false, v, nil
}

// Check checks the change without a database.
func (c GovernanceChange) Check() error {
	for _, v := range c.Allow {
		if _, _, err := parseAllow(v); err != nil {
			return err
		}
	}
	for _, n := range c.NotWorkedIn {
		if err := ValidateTaskName(n); err != nil {
			return problem.Usagef("invalid --not-worked-in %s: give the name of another task (loanq task list shows them)", quote(n))
		}
	}
	return nil
}

// applyGovernance writes the change for task (id, name) in tx.
func (a *Admin) applyGovernance(ctx context.Context, tx drivers.Querier, id int64, name string, c GovernanceChange) error {
	if c.empty() {
		return nil
	}
	if err := c.Check(); err != nil {
		return err
	}
	g := a.governanceSQL()
	if c.AllowClear {
		if _, err := g.AllowClear.Exec(ctx, tx, engineio.TaskParams{TaskID: id}); err != nil {
			return fmt.Errorf("clearing who may work task %s: %w", name, err)
		}
	}
	if len(c.Allow) > 0 {
		have, err := g.AllowList.All(ctx, tx, engineio.TaskParams{TaskID: id})
		if err != nil {
			return fmt.Errorf("reading who may work task %s: %w", name, err)
		}
		seen := map[string]bool{}
		for _, r := range have {
			seen[allowEntry(r.IsGroup == 1, r.Principal)] = true
		}
		for _, v := range c.Allow {
			group, who, _ := parseAllow(v)
			if seen[allowEntry(group, who)] {
				continue
			}
			seen[allowEntry(group, who)] = true
			isGroup := 0
			if group {
				isGroup = 1
			}
			if _, err := g.AllowAdd.Exec(ctx, tx, allowParams{TaskID: id, IsGroup: isGroup, Principal: who}); err != nil {
				return fmt.Errorf("letting %s work task %s: %w", v, name, err)
			}
		}
	}
	if c.NotWorkedInClear {
		if _, err := g.NotWorkedInClear.Exec(ctx, tx, engineio.TaskParams{TaskID: id}); err != nil {
			return fmt.Errorf("clearing the four-eyes rule of task %s: %w", name, err)
		}
	}
	if len(c.NotWorkedIn) > 0 {
		have, err := g.NotWorkedInList.All(ctx, tx, engineio.TaskParams{TaskID: id})
		if err != nil {
			return fmt.Errorf("reading the four-eyes rule of task %s: %w", name, err)
		}
		seen := map[string]bool{}
		for _, r := range have {
			seen[r.Name] = true
		}
		for _, other := range c.NotWorkedIn {
			if other == name {
				return problem.Usagef("invalid --not-worked-in %s: a task cannot name itself (a loan is never assigned twice at once in one task anyway); name the task whose workers must not work the loan here", other)
			}
			if seen[other] {
				continue
			}
			seen[other] = true
			o, err := a.scanTask(a.sql().TaskByName.One(ctx, tx, engineio.NameParams{Name: other}))
			if errors.Is(err, sql.ErrNoRows) {
				return &problem.Error{Kind: problem.Usage, Msg: fmt.Sprintf("invalid --not-worked-in %s: unknown task", quote(other)), Hint: a.taskHint(ctx, other)}
			}
			if err != nil {
				return fmt.Errorf("reading task %s: %w", other, err)
			}
			if _, err := g.NotWorkedInAdd.Exec(ctx, tx, notWorkedInParams{TaskID: id, OtherTaskID: o.ID}); err != nil {
				return fmt.Errorf("adding the four-eyes rule of task %s against %s: %w", name, other, err)
			}
		}
	}
	return nil
}

// GroupMember is one membership (group list).
type GroupMember struct {
	Group   string
	User    string
	Source  string // admin (group add) or proxy (serve's groups header)
	AddedBy string
}

// checkGroupArgs checks group add|remove's arguments.
func checkGroupArgs(group string, users []string) error {
	if err := ValidateGroupName(group); err != nil {
		return err
	}
	if len(users) == 0 {
		return problem.Usagef("name at least one user: loanq group add %s USER…", group)
	}
	for _, u := range users {
		if err := validateUser(u); err != nil {
			return err
		}
	}
	return nil
}

// CheckGroupArgs is checkGroupArgs for the command line, before it
// connects.
func CheckGroupArgs(group string, users []string) error { return checkGroupArgs(group, users) }

// GroupAdd adds users to group; it returns how many were not members yet.
func (a *Admin) GroupAdd(ctx context.Context, group string, users []string, by string) (int, error) {
	return a.groupAdd(ctx, group, users, by, "admin")
}

func (a *Admin) groupAdd(ctx context.Context, group string, users []string, by, source string) (int, error) {
	if err := checkGroupArgs(group, users); err != nil {
		return 0, err
	}
	added := 0
	for _, u := range users {
		_, err := a.governanceSQL().GroupAdd.Exec(ctx, a.db, groupParams{Group: group, User: u, Source: source, By: truncate(by, 128)})
		if err != nil && a.driver.IsUniqueViolation(err) {
			continue // a member already: nothing to do
		}
		if err != nil {
			return added, fmt.Errorf("adding %s to group %s: %w", u, group, err)
		}
		added++
	}
	return added, nil
}

// GroupRemove removes users from group; it returns how many were members.
func (a *Admin) GroupRemove(ctx context.Context, group string, users []string) (int, error) {
	if err := checkGroupArgs(group, users); err != nil {
		return 0, err
	}
	removed := 0
	for _, u := range users {
		res, err := a.governanceSQL().GroupRemove.Exec(ctx, a.db, memberParams{Group: group, User: u})
		if err != nil {
			return removed, fmt.Errorf("removing %s from group %s: %w", u, group, err)
		}
		if n, _ := res.RowsAffected(); n > 0 {
			removed++
		}
	}
	return removed, nil
}

// Groups lists every membership by group and user.
func (a *Admin) Groups(ctx context.Context) ([]GroupMember, error) {
	rows, err := a.governanceSQL().GroupList.All(ctx, a.db, engineio.NoParams{})
	if err != nil {
		return nil, fmt.Errorf("listing groups: %w", err)
	}
	out := make([]GroupMember, len(rows))
	for i, r := range rows {
		out[i] = GroupMember{Group: r.Group, User: r.User, Source: r.Source, AddedBy: r.AddedBy}
	}
	return out, nil
}

// SyncProxyGroups makes user's memberships of source proxy the groups a
// trusted proxy's header names (serve --auth proxy --proxy-groups-header):
// groups it no longer names are left, new ones joined. A membership an
// admin added stays whatever the header says. Names that are not valid
// group names are ignored (a proxy may send groups loanq does not use).
func (a *Admin) SyncProxyGroups(ctx context.Context, user string, groups []string) error {
	want := map[string]bool{}
	for _, g := range groups {
		if g = strings.TrimSpace(g); ValidateGroupName(g) == nil {
			want[g] = true
		}
	}
	have, err := a.governanceSQL().UserGroups.All(ctx, a.db, engineio.UserParams{User: user})
	if err != nil {
		return fmt.Errorf("reading the groups of %s: %w", user, err)
	}
	for _, h := range have {
		if want[h.Group] {
			delete(want, h.Group)
			continue
		}
		if h.Source == "proxy" {
			if _, err := a.governanceSQL().GroupDropProxy.Exec(ctx, a.db, memberParams{Group: h.Group, User: user}); err != nil {
				return fmt.Errorf("removing %s from group %s (no longer in the proxy's header): %w", user, h.Group, err)
			}
		}
	}
	for g := range want {
		if _, err := a.groupAdd(ctx, g, []string{user}, "proxy", "proxy"); err != nil {
			return err
		}
	}
	return nil
}

// notAllowedPending is, for a round of a restricted task, the users with
// a pending request who may no longer work the task (their entry removed
// after they asked): the round answers them empty (governance.go's rule;
// the database would refuse their work rows).
func (e *Engine) notAllowedPending(ctx context.Context, q drivers.Querier, task *Task) (map[string]bool, error) {
	if !task.Restricted {
		return nil, nil
	}
	rows, err := e.governanceSQL().PendingNotAllowed.All(ctx, q, engineio.TaskParams{TaskID: task.ID})
	if err != nil {
		return nil, fmt.Errorf("reading who may work task %s: %w", task.Name, err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	out := make(map[string]bool, len(rows))
	for _, r := range rows {
		out[r.User] = true
	}
	return out, nil
}

// fourEyesBlocked reads which of loans each user worked in a task the
// four-eyes rule of task names: user → loan → true. Nil when the task has
// no such rule.
func (e *Engine) fourEyesBlocked(ctx context.Context, q drivers.Querier, task *Task, loans []string) (map[string]map[string]bool, error) {
	if !task.FourEyes || len(loans) == 0 {
		return nil, nil
	}
	var out map[string]map[string]bool
	for _, run := range keyChunks(loankey.Text, loans) {
		rows, err := e.governanceSQL().FourEyesBlocked.All(ctx, q, engineio.PoolIDsParams{TaskID: task.ID, IDs: loankey.TextJSON(run)})
		if err != nil {
			return nil, fmt.Errorf("reading the four-eyes rule's history for task %s: %w", task.Name, err)
		}
		for _, r := range rows {
			if out == nil {
				out = map[string]map[string]bool{}
			}
			if out[r.User] == nil {
				out[r.User] = map[string]bool{}
			}
			out[r.User][r.LoanID] = true
		}
	}
	return out, nil
}

// criteriaFor is the task's criteria for a claim by user (rows, pool): on
// a task with a four-eyes rule, less the loans user worked in a task it
// names. The rule goes into the criteria's condition, so every statement
// built from them (the locking read, the claim's insert, the rows
// strategy's look for held loans) applies it. The user is written as a
// literal of the dialect (Dialect.TextLiteral), the task id as a number.
func (st *store) criteriaFor(task *Task, user string) drivers.CriteriaSource {
	src := task.criteria()
	if !task.FourEyes {
		return src
	}
	d := st.driver.Dialect()
	src.Where = fmt.Sprintf(`(%s)
  AND NOT EXISTS (
    SELECT 1 FROM loanq_task_not_worked_in loanq_f JOIN loanq_work loanq_w4 ON loanq_w4.task_id = loanq_f.other_task_id
    WHERE loanq_f.task_id = %d AND loanq_w4.loan_id = %s AND loanq_w4.user_name = %s)`,
		src.Where, task.ID, d.KeyAsText("src."+src.Key), d.TextLiteral(user))
	return src
}

// deleteGovernance is task delete's part: a task whose history another
// task's four-eyes rule reads is not deleted (its history is what keeps
// the rule); the task's own allow list and rule go with it.
func (a *Admin) deleteGovernance(ctx context.Context, tx drivers.Querier, task *Task) error {
	g := a.governanceSQL()
	by, err := g.NamedBy.All(ctx, tx, engineio.TaskParams{TaskID: task.ID})
	if err != nil {
		return fmt.Errorf("reading the four-eyes rules that name task %s: %w", task.Name, err)
	}
	if len(by) > 0 {
		names := make([]string, len(by))
		for i, r := range by {
			names[i] = r.Name
		}
		return &problem.Error{Kind: problem.Usage,
			Msg:  fmt.Sprintf("task %s is named by the four-eyes rule (--not-worked-in) of task %s: deleting it would delete the history that rule reads", task.Name, strings.Join(names, ", ")),
			Hint: fmt.Sprintf("first: loanq task update %s --not-worked-in-clear (and name the other tasks again)", names[0])}
	}
	if _, err := g.AllowClear.Exec(ctx, tx, engineio.TaskParams{TaskID: task.ID}); err != nil {
		return fmt.Errorf("deleting who may work task %s: %w", task.Name, err)
	}
	if _, err := g.NotWorkedInClear.Exec(ctx, tx, engineio.TaskParams{TaskID: task.ID}); err != nil {
		return fmt.Errorf("deleting the four-eyes rule of task %s: %w", task.Name, err)
	}
	return nil
}

// UntrustedUser is, for a command that lists what its caller may work
// (task list), the user an untrusted database account (a processor) acts
// as, and "" for a trusted account or a database without accounts
// (SQLite), which see every task. requested and fallback are as for
// ActingUser.
func (e *Engine) UntrustedUser(ctx context.Context, requested, fallback string) (string, error) {
	if e.caps().Accounts == drivers.AccountsNone {
		return "", nil
	}
	// No user name is "" (validateUser): only a trusted account may act as
	// it.
	id, err := e.Identity(ctx, "")
	if err != nil {
		return "", err
	}
	if id.MayActAs {
		return "", nil
	}
	return e.ActingUser(ctx, requested, fallback)
}

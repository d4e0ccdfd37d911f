package dispatch

import (
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
)

// The statements of entitlements and four eyes (governance.go;
// docs/governance.md): a catalogue of their own (drivers.Catalogue
// "governance"), not part of the engine's drivers.Statements; `loanq sql`
// prints them after the engine's. Every dialect sends the portable text.
// The checks the database makes of an untrusted account's writes are the
// same rules, in migration 00018 of each dialect.
type governanceStatements struct {
	GroupAdd    drivers.Stmt[groupParams]                        `purpose:"group add: a user joins a group"`
	GroupRemove drivers.Stmt[memberParams]                       `purpose:"group remove: a user leaves a group"`
	GroupList   drivers.Query[engineio.NoParams, groupRow]       `purpose:"group list: every group's members"`
	UserGroups  drivers.Query[engineio.UserParams, userGroupRow] `purpose:"the groups of one user (serve --proxy-groups-header keeps its own in step)"`
	// GroupDropProxy removes a membership only a proxy's header gave.
	GroupDropProxy drivers.Stmt[memberParams] `purpose:"serve --proxy-groups-header: a group the proxy no longer names"`

	AllowList  drivers.Query[engineio.TaskParams, allowRow] `purpose:"task show: who may work the task (--allow)"`
	AllowAdd   drivers.Stmt[allowParams]                    `purpose:"task create|update --allow: a user or group may work the task"`
	AllowClear drivers.Stmt[engineio.TaskParams]            `purpose:"task update --allow-clear (and before a new --allow list): everyone may work the task"`
	// MayWork counts the allow entries that let the user work the task: by
	// name, or through a group the user is in.
	MayWork drivers.Query[taskUserParams, engineio.Count] `purpose:"may a user work a task: allow entries naming the user or a group of the user"`
	// Workable lists the tasks a user may work: no allow list, or one that
	// names the user or a group of the user.
	Workable drivers.Query[engineio.UserParams, idRow] `purpose:"the tasks a user may work (task list, /work)"`
	// PendingNotAllowed: users with a request pending in the task who may
	// not work it (their allow entry removed after they asked); a round
	// answers those requests empty instead of assigning (governance.go).
	PendingNotAllowed drivers.Query[engineio.TaskParams, userRow] `purpose:"a round of a restricted task: pending users who may no longer work it"`

	NotWorkedInList  drivers.Query[engineio.TaskParams, nameRow] `purpose:"task show: the tasks named by --not-worked-in"`
	NotWorkedInAdd   drivers.Stmt[notWorkedInParams]             `purpose:"task create|update --not-worked-in: four eyes against another task"`
	NotWorkedInClear drivers.Stmt[engineio.TaskParams]           `purpose:"task update --not-worked-in-clear (and before a new list)"`
	// NamedBy: the tasks whose four-eyes rule names this task (task delete
	// refuses to remove the history they rely on).
	NamedBy drivers.Query[engineio.TaskParams, nameRow] `purpose:"task delete: tasks whose --not-worked-in names this one"`
	// FourEyesBlocked: which of a round's candidates a waiting user worked
	// in a task this task names: the allocation gives those loans to the
	// other requesters (allocate.go). By (task_id, loan_id), the prefix of
	// the work table's eligibility index.
	FourEyesBlocked drivers.Query[engineio.PoolIDsParams, blockedRow] `purpose:"a round of a four-eyes task: candidates a waiting user worked in a named task"`
}

var governanceCatalogue = drivers.NewCatalogue("governance", portableGovernance)

// governanceSQL is the governance catalogue compiled for the engine's
// driver.
func (st *store) governanceSQL() *governanceStatements { return governanceCatalogue.For(st.driver) }

// allowedBy is the condition "allow entry a lets user :user work its task".
const allowedBy = `((a.is_group = 0 AND a.principal = :user)
       OR (a.is_group = 1 AND EXISTS (SELECT 1 FROM loanq_group g WHERE g.group_name = a.principal AND g.user_name = :user)))`

func portableGovernance() *governanceStatements {
	return &governanceStatements{
		GroupAdd: drivers.Stmt[groupParams]{SQL: `INSERT INTO loanq_group (group_name, user_name, source, added_by, added_at)
VALUES (:group_name, :user, :source, :by, {{now}})`},
		GroupRemove: drivers.Stmt[memberParams]{SQL: `DELETE FROM loanq_group WHERE group_name = :group_name AND user_name = :user`},
		GroupList: drivers.Query[engineio.NoParams, groupRow]{SQL: `SELECT group_name, user_name, source, added_by, added_at
FROM loanq_group ORDER BY group_name, user_name`},
		UserGroups:     drivers.Query[engineio.UserParams, userGroupRow]{SQL: `SELECT group_name, source FROM loanq_group WHERE user_name = :user ORDER BY group_name`},
		GroupDropProxy: drivers.Stmt[memberParams]{SQL: `DELETE FROM loanq_group WHERE group_name = :group_name AND user_name = :user AND source = 'proxy'`},

		AllowList:  drivers.Query[engineio.TaskParams, allowRow]{SQL: `SELECT is_group, principal FROM loanq_task_allow WHERE task_id = :task_id ORDER BY is_group, principal`},
		AllowAdd:   drivers.Stmt[allowParams]{SQL: `INSERT INTO loanq_task_allow (task_id, is_group, principal) VALUES (:task_id, :is_group, :principal)`},
		AllowClear: drivers.Stmt[engineio.TaskParams]{SQL: `DELETE FROM loanq_task_allow WHERE task_id = :task_id`},
		MayWork: drivers.Query[taskUserParams, engineio.Count]{SQL: `SELECT COUNT(*) AS n FROM loanq_task_allow a
WHERE a.task_id = :task_id
  AND ` + allowedBy},
		Workable: drivers.Query[engineio.UserParams, idRow]{SQL: `SELECT t.id FROM loanq_task t
WHERE NOT EXISTS (SELECT 1 FROM loanq_task_allow a WHERE a.task_id = t.id)
   OR EXISTS (SELECT 1 FROM loanq_task_allow a WHERE a.task_id = t.id
      AND ` + allowedBy + `)
ORDER BY t.id`},
		PendingNotAllowed: drivers.Query[engineio.TaskParams, userRow]{SQL: `SELECT DISTINCT r.user_name FROM loanq_work_request r
WHERE r.task_id = :task_id AND r.status = 'pending'
  AND NOT EXISTS (SELECT 1 FROM loanq_task_allow a WHERE a.task_id = r.task_id
      AND ((a.is_group = 0 AND a.principal = r.user_name)
       OR (a.is_group = 1 AND EXISTS (SELECT 1 FROM loanq_group g WHERE g.group_name = a.principal AND g.user_name = r.user_name))))`},

		NotWorkedInList: drivers.Query[engineio.TaskParams, nameRow]{SQL: `SELECT o.name FROM loanq_task_not_worked_in f JOIN loanq_task o ON o.id = f.other_task_id
WHERE f.task_id = :task_id ORDER BY o.name`},
		NotWorkedInAdd:   drivers.Stmt[notWorkedInParams]{SQL: `INSERT INTO loanq_task_not_worked_in (task_id, other_task_id) VALUES (:task_id, :other_task_id)`},
		NotWorkedInClear: drivers.Stmt[engineio.TaskParams]{SQL: `DELETE FROM loanq_task_not_worked_in WHERE task_id = :task_id`},
		NamedBy: drivers.Query[engineio.TaskParams, nameRow]{SQL: `SELECT t.name FROM loanq_task_not_worked_in f JOIN loanq_task t ON t.id = f.task_id
WHERE f.other_task_id = :task_id ORDER BY t.name`},
		FourEyesBlocked: drivers.Query[engineio.PoolIDsParams, blockedRow]{SQL: `SELECT DISTINCT w.user_name, w.loan_id
FROM loanq_task_not_worked_in f JOIN loanq_work w ON w.task_id = f.other_task_id
WHERE f.task_id = :task_id AND {{inLoanIDs "w.loan_id" ":ids"}}`},
	}
}

// The parameters and rows (bind and col tags as in drivers/params.go and
// drivers/rows.go).
type (
	groupParams struct {
		Group  string `bind:"group_name"`
		User   string `bind:"user"`
		Source string `bind:"source"` // 'admin' (group add) or 'proxy' (serve's header)
		By     string `bind:"by"`
	}
	memberParams struct {
		Group string `bind:"group_name"`
		User  string `bind:"user"`
	}
	allowParams struct {
		TaskID    int64  `bind:"task_id"`
		IsGroup   int    `bind:"is_group"`
		Principal string `bind:"principal"`
	}
	taskUserParams struct {
		TaskID int64  `bind:"task_id"`
		User   string `bind:"user"`
	}
	notWorkedInParams struct {
		TaskID      int64 `bind:"task_id"`
		OtherTaskID int64 `bind:"other_task_id"`
	}

	groupRow struct {
		Group   string        `col:"group_name"`
		User    string        `col:"user_name"`
		Source  string        `col:"source"`
		AddedBy string        `col:"added_by"`
		AddedAt engineio.Time `col:"added_at"`
	}
	userGroupRow struct {
		Group  string `col:"group_name"`
		Source string `col:"source"`
	}
	allowRow struct {
		IsGroup   int64  `col:"is_group"`
		Principal string `col:"principal"`
	}
	idRow struct {
		ID int64 `col:"id"`
	}
	userRow struct {
		User string `col:"user_name"`
	}
	nameRow struct {
		Name string `col:"name"`
	}
	blockedRow struct {
		User   string `col:"user_name"`
		LoanID string `col:"loan_id"`
	}
)

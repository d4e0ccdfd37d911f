package mysql

import (
	"fmt"
	"github.com/loanq/loanq/roles"
	"strings"
)

// GrantSQL renders a role's plan for MySQL/MariaDB. Run it as the account
// that ran `loanq migrate up`, in loanq's database (the tables are not
// qualified). An account is user@host; without @host it is user@'%'.
// It revokes first, so that an account given another role keeps nothing of
// the one before. MySQL's REVOKE fails on a table the account holds nothing
// on (error 1147), so each REVOKE ALL follows a GRANT REFERENCES on that
// table: something to revoke whatever the account held (REVOKE ALL on a
// table also removes its column privileges).
func (*Driver) GrantSQL(p *roles.Plan) []string {
	user, host, ok := strings.Cut(p.Account, "@")
	if !ok {
		host = "%"
	}
	acct := quote(user) + "@" + quote(host)
	out := []string{
		roles.Comment("loanq grants: role %s for account %s (MySQL/MariaDB); run in loanq's database as the account that migrated it", p.Role, acct),
		roles.Comment("never grant CREATE TEMPORARY TABLES on this database to it: a temporary loanq_account would shadow the real one"),
		roles.Comment("revoke first: the account keeps nothing an earlier role gave it on loanq's tables or on the"),
		roles.Comment("source tables named here (also what was granted there for other uses: grant that again after);"),
		roles.Comment("MySQL refuses to REVOKE on a table the account holds nothing on, so each REVOKE follows a GRANT REFERENCES"),
	}
	tables := revokeTables()
	for _, s := range p.Sources {
		tables = append(tables[:len(tables):len(tables)], s.Table)
	}
	for _, t := range tables {
		out = append(out, fmt.Sprintf("GRANT REFERENCES ON %s TO %s;", t, acct),
			fmt.Sprintf("REVOKE ALL ON %s FROM %s;", t, acct))
	}
	for _, t := range p.Tables {
		out = append(out, roles.Comment("%s", t.Why))
		out = append(out, fmt.Sprintf("GRANT %s ON %s TO %s;", t.PrivilegeList(), t.Table, acct))
	}
	out = append(out, roles.Comment("who the account may act as (docs/security.md)"),
		fmt.Sprintf("GRANT EXECUTE ON FUNCTION loanq_may_act_as TO %s;", acct))
	if p.Role == roles.Dashboard || p.Role == roles.Refresher {
		out = append(out, fmt.Sprintf("DELETE FROM loanq_account WHERE account = %s;", quote(user)))
	} else {
		out = append(out, fmt.Sprintf(`INSERT INTO loanq_account (account, user_name, trusted, granted_by, granted_at)
VALUES (%s, %s, %t, SUBSTRING(USER(), 1, CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1), UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE user_name = VALUES(user_name), trusted = VALUES(trusted),
    granted_by = VALUES(granted_by), granted_at = VALUES(granted_at);`, quote(user), literalOrNull(p.ActsAs), p.Role.Trusted()))
	}
	for _, s := range p.Sources {
		why := roles.Comment("source %s (key %s): InnoDB locks rows (FOR UPDATE SKIP LOCKED) with SELECT alone", s.Table, s.Key)
		if !p.LockSources {
			why = roles.Comment("source %s: serve's backlog count reads it (--backlog-every)", s.Table)
		}
		out = append(out, why, fmt.Sprintf("GRANT SELECT ON %s TO %s;", s.Table, acct))
	}
	if p.LockSources {
		out = append(out, roles.Comment("MySQL 8.0 may refuse a locking read (FOR UPDATE) to an account with SELECT alone; if it does, add"),
			roles.Comment("GRANT LOCK TABLES ON <database>.* TO %s;  (not run here: no MySQL 8 server runs loanq's tests)", acct))
	}
	return out
}

// revokeTables are the tables a script revokes on first: all of loanq's.
func revokeTables() []string { return roles.LoanqTables }

func quote(s string) string { return `'` + strings.ReplaceAll(s, `'`, `''`) + `'` }
func literalOrNull(s string) string {
	if s == "" {
		return "NULL"
	}
	return quote(s)
}

package oracle

import (
	"fmt"
	"github.com/loanq/loanq/roles"
	"strings"
)

// GrantSQL renders a role's plan for Oracle. Run it as the owner of loanq's
// tables (the schema that ran `loanq migrate up`); the grantee's sessions
// find the tables through CURRENT_SCHEMA or synonyms (docs/oracle.md).
// Names are upper case, as Oracle stores unquoted names. Statements carry
// no trailing ';' (each line is sent as it is; '/' runs it in SQL*Plus).
// Only the exact text is tested: no Oracle server runs loanq's tests.
func (*Driver) GrantSQL(p *roles.Plan) []string {
	acct := strings.ToUpper(p.Account)
	out := []string{
		roles.Comment("loanq grants: role %s for account %s (Oracle); run as the owner of loanq's tables", p.Role, acct),
	}
	out = append(out, roles.Comment("revoke first: the account keeps nothing an earlier role gave it on loanq's objects or on the"),
		roles.Comment("source tables named here (also what was granted there for other uses: grant that again after);"),
		roles.Comment("Oracle refuses to REVOKE what was never granted, so the block revokes what ALL_TAB_PRIVS and"),
		roles.Comment("ALL_COL_PRIVS list as granted by this account (REVOKE ALL also removes column privileges)"),
		revokeBlock(p, acct))
	for _, t := range p.Tables {
		out = append(out, roles.Comment("%s", t.Why))
		out = append(out, fmt.Sprintf("GRANT %s ON %s TO %s", t.PrivilegeList(), t.Table, acct))
	}
	out = append(out, roles.Comment("who the account may act as (docs/security.md)"),
		fmt.Sprintf("GRANT EXECUTE ON loanq_may_act_as TO %s", acct))
	if p.Role == roles.Dashboard || p.Role == roles.Refresher {
		out = append(out, fmt.Sprintf("DELETE FROM loanq_account WHERE account = %s", quote(acct)))
	} else {
		trusted := 0
		if p.Role.Trusted() {
			trusted = 1
		}
		out = append(out, fmt.Sprintf(`MERGE INTO loanq_account a
USING (SELECT %s AS account, %s AS user_name, %d AS trusted FROM dual) s ON (a.account = s.account)
WHEN MATCHED THEN UPDATE SET a.user_name = s.user_name, a.trusted = s.trusted,
    a.granted_by = SYS_CONTEXT('USERENV', 'SESSION_USER'), a.granted_at = SYS_EXTRACT_UTC(SYSTIMESTAMP)
WHEN NOT MATCHED THEN INSERT (account, user_name, trusted, granted_by, granted_at)
    VALUES (s.account, s.user_name, s.trusted, SYS_CONTEXT('USERENV', 'SESSION_USER'), SYS_EXTRACT_UTC(SYSTIMESTAMP))`,
			quote(acct), literalOrNull(p.ActsAs), trusted))
	}
	if p.LockSources {
		out = append(out, roles.Comment("strategy rows: the claim calls the owner's cursor procedure and reads the keys it locked"),
			fmt.Sprintf("GRANT EXECUTE ON loanq_lock_rows TO %s", acct),
			fmt.Sprintf("GRANT SELECT ON loanq_rows_locked TO %s", acct))
	}
	for _, s := range p.Sources {
		if !p.LockSources {
			out = append(out, roles.Comment("source %s: serve's backlog count reads it (--backlog-every); READ, unlike SELECT, locks no row", s.Table),
				fmt.Sprintf("GRANT READ ON %s TO %s", s.Table, acct))
			continue
		}
		out = append(out, roles.Comment("source %s (key %s): SELECT lets Oracle lock rows (FOR UPDATE SKIP LOCKED); READ would not", s.Table, s.Key),
			fmt.Sprintf("GRANT SELECT ON %s TO %s", s.Table, acct))
	}
	return out
}

// revokeTables are the tables a script revokes on first: all of loanq's,
// and the temporary table of the rows strategy's claim.
func revokeTables() []string {
	return append(roles.LoanqTables[:len(roles.LoanqTables):len(roles.LoanqTables)], "loanq_rows_locked")
}

// revokeRoutines are the routines a role may be granted EXECUTE on.
var revokeRoutines = []string{"loanq_may_act_as", "loanq_lock_rows"}

// revokeBlock is the PL/SQL block that revokes what this account (the
// owner) granted acct on loanq's objects and on the plan's sources.
func revokeBlock(p *roles.Plan, acct string) string {
	var objs []string
	for _, t := range append(revokeTables(), revokeRoutines...) {
		objs = append(objs, fmt.Sprintf("(USER, %s)", quote(strings.ToUpper(t))))
	}
	for _, s := range p.Sources {
		schema, table, ok := strings.Cut(strings.ToUpper(s.Table), ".")
		if ok {
			objs = append(objs, fmt.Sprintf("(%s, %s)", quote(schema), quote(table)))
		} else {
			objs = append(objs, fmt.Sprintf("(USER, %s)", quote(schema)))
		}
	}
	var in strings.Builder
	for i, o := range objs {
		switch {
		case i == 0:
		case i%3 == 0:
			in.WriteString(",\n    ")
		default:
			in.WriteString(", ")
		}
		in.WriteString(o)
	}
	return fmt.Sprintf(`BEGIN
  FOR o IN (SELECT DISTINCT table_schema, table_name FROM (
      SELECT table_schema, table_name FROM all_tab_privs WHERE grantor = USER AND grantee = %[1]s
      UNION SELECT table_schema, table_name FROM all_col_privs WHERE grantor = USER AND grantee = %[1]s)
    WHERE (table_schema, table_name) IN (%[2]s)) LOOP
    EXECUTE IMMEDIATE 'REVOKE ALL ON "' || o.table_schema || '"."' || o.table_name || '" FROM %[3]s';
  END LOOP;
END;`, quote(acct), in.String(), acct)
}

func quote(s string) string { return `'` + strings.ReplaceAll(s, `'`, `''`) + `'` }
func literalOrNull(s string) string {
	if s == "" {
		return "NULL"
	}
	return quote(s)
}

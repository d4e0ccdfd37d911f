package postgres

import (
	"fmt"
	"github.com/loanq/loanq/roles"
	"strings"
)

// GrantSQL renders a role's plan for PostgreSQL. Run it as the owner of
// loanq's tables. REVOKE first, so that running it again for another role
// leaves exactly that role's privileges. Identifiers are quoted: give the
// account's name as PostgreSQL stores it (lower case unless it was quoted).
func (*Driver) GrantSQL(p *roles.Plan) []string {
	acct := quoteIdent(p.Account)
	out := []string{
		roles.Comment("loanq grants: role %s for account %s (PostgreSQL); run as the owner of loanq's tables", p.Role, p.Account),
		roles.Comment("tables in a schema other than public also need: GRANT USAGE ON SCHEMA <schema> TO %s;", acct),
	}
	out = append(out, roles.Comment("revoke first: the account keeps nothing an earlier role gave it on loanq's tables or on the"),
		roles.Comment("source tables named here (also what was granted there for other uses: grant that again after)"))
	for _, t := range revokeTables() {
		out = append(out, fmt.Sprintf("REVOKE ALL ON %s FROM %s;", t, acct))
	}
	for _, s := range p.Sources {
		out = append(out, fmt.Sprintf("REVOKE ALL ON %s FROM %s;", s.Table, acct))
	}
	for _, t := range p.Tables {
		out = append(out, roles.Comment("%s", t.Why))
		var whole, cols []string
		for _, pr := range t.Privs {
			if pr == "UPDATE" && len(t.Columns) > 0 {
				cols = append(cols, pr)
				continue
			}
			whole = append(whole, pr)
		}
		if len(whole) > 0 {
			out = append(out, fmt.Sprintf("GRANT %s ON %s TO %s;", strings.Join(whole, ", "), t.Table, acct))
		}
		if len(cols) > 0 {
			out = append(out, fmt.Sprintf("GRANT UPDATE (%s) ON %s TO %s;", strings.Join(t.Columns, ", "), t.Table, acct))
		}
	}
	out = append(out, roles.Comment("who the account may act as (docs/security.md)"))
	if p.Role == roles.Dashboard || p.Role == roles.Refresher {
		out = append(out, fmt.Sprintf("DELETE FROM loanq_account WHERE account = %s;", quoteLiteral(p.Account)))
	} else {
		out = append(out, fmt.Sprintf(`INSERT INTO loanq_account (account, user_name, trusted) VALUES (%s, %s, %t)
ON CONFLICT (account) DO UPDATE SET user_name = EXCLUDED.user_name, trusted = EXCLUDED.trusted,
    granted_by = current_user, granted_at = clock_timestamp();`, quoteLiteral(p.Account), literalOrNull(p.ActsAs), p.Role.Trusted()))
	}
	for _, s := range p.Sources {
		if !p.LockSources {
			out = append(out, roles.Comment("source %s: serve's backlog count reads it (--backlog-every)", s.Table),
				fmt.Sprintf("GRANT SELECT ON %s TO %s;", s.Table, acct))
			continue
		}
		out = append(out, roles.Comment("source %s (key %s)", s.Table, s.Key),
			fmt.Sprintf("GRANT SELECT ON %s TO %s;", s.Table, acct))
		if p.LockSources {
			trig := quoteIdent(truncate("loanq_guard_"+s.Key, 63))
			out = append(out,
				roles.Comment("PostgreSQL locks a row (the rows strategy's FOR NO KEY UPDATE) only for an account with an UPDATE"),
				roles.Comment("privilege on its table: UPDATE of the key column only, and the trigger refuses that update"),
				roles.Comment("from untrusted loanq accounts (a view cannot carry the trigger: grant on its base table)"),
				fmt.Sprintf("GRANT UPDATE (%s) ON %s TO %s;", s.Key, s.Table, acct),
				fmt.Sprintf("DROP TRIGGER IF EXISTS %s ON %s;", trig, s.Table),
				fmt.Sprintf("CREATE TRIGGER %s BEFORE UPDATE OF %s ON %s FOR EACH ROW EXECUTE FUNCTION loanq_guard_source_update();", trig, s.Key, s.Table))
		}
	}
	return out
}

// revokeTables are the tables a script revokes on first: all of loanq's.
func revokeTables() []string { return roles.LoanqTables }

func quoteIdent(s string) string   { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
func quoteLiteral(s string) string { return `'` + strings.ReplaceAll(s, `'`, `''`) + `'` }
func literalOrNull(s string) string {
	if s == "" {
		return "NULL"
	}
	return quoteLiteral(s)
}
func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

package mysql

import "testing"

// MySQL 8 cannot run on the project's machines: its hold-limit statements
// are pinned by their exact text (MariaDB's run in TestHoldLimitSession).
func TestHoldLimitMySQL8Text(t *testing.T) {
	if got := holdLimitSetMySQL8.Text(); got != `SET SESSION wait_timeout = CEIL(? / 1000), max_execution_time = ?` {
		t.Errorf("MySQL 8 hold limit: %s", got)
	}
	if got := holdLimitResetMySQL8.Text(); got != `SET SESSION wait_timeout = DEFAULT, max_execution_time = DEFAULT` {
		t.Errorf("MySQL 8 hold limit reset: %s", got)
	}
	if holdReset(holdLimitSetMySQL8.Text()) != holdLimitResetMySQL8.Text() || holdReset(statements().HoldLimitSet.Text()) != statements().HoldLimitReset.Text() {
		t.Error("a hold limit statement is not undone by its reset")
	}
	if holdReset(statements().LockSkip.Text()) != "" {
		t.Error("an ordinary statement marks the session for a reset")
	}
}

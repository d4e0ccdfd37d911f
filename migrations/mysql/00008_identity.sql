-- Who may act as whom (docs/security.md). The database, not loanq's code,
-- decides which user names an account may write rows for, so that SQL sent
-- by hand through a processor's account is refused the same way.
--
-- loanq_account lists the accounts an admin has set up (`loanq grants`
-- prints the rows), by the user part of the account ('ana' for
-- 'ana'@'%'): an account acts as its own name, as the user_name an admin
-- mapped to it, or, when trusted (admins, supervisors, `loanq serve`), as
-- anyone. The account that runs this migration is trusted.
--
-- MySQL and MariaDB have no row-level security: triggers refuse the rows an
-- account may not write. They and loanq_may_act_as run with their definer's
-- rights (the migrating account), so they read loanq_account whatever the
-- caller may read; USER() inside them is still the caller's account.
-- A temporary table named loanq_account would shadow the real one inside
-- them: never grant CREATE TEMPORARY TABLES on this database to processors
-- (`loanq grants` does not).
--
-- The rules (the same as PostgreSQL's policies): a request is
-- logged only as pending for a user the account may act as; it is finished
-- only from pending, cancelled only by an account that may act as its user; a
-- work row names a request of its user in its task; a work row is ended
-- only by an account that may act as its assignee, or as 'expired' once
-- older than its task's max hold; nobody changes a row's owner or task.

-- +goose Up
CREATE TABLE loanq_account (
    account    VARCHAR(128) NOT NULL PRIMARY KEY,
    user_name  VARCHAR(100),
    trusted    BOOLEAN      NOT NULL DEFAULT FALSE,
    granted_by VARCHAR(128) NOT NULL,
    granted_at DATETIME(6)  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
INSERT INTO loanq_account (account, trusted, granted_by, granted_at)
VALUES (SUBSTRING_INDEX(USER(), '@', 1), TRUE, SUBSTRING_INDEX(USER(), '@', 1), UTC_TIMESTAMP(6));

ALTER TABLE loanq_task ADD COLUMN updated_by VARCHAR(100), ADD COLUMN updated_at DATETIME(6);

-- +goose StatementBegin
CREATE FUNCTION loanq_may_act_as(acting VARCHAR(100)) RETURNS BOOLEAN
    READS SQL DATA SQL SECURITY DEFINER
RETURN acting = SUBSTRING_INDEX(USER(), '@', 1)
    OR EXISTS (SELECT 1 FROM loanq_account a
               WHERE a.account = SUBSTRING_INDEX(USER(), '@', 1) AND (a.trusted OR a.user_name = acting))
-- +goose StatementEnd

-- Trusted accounts (the owner, admins, supervisors, serve) are not checked by
-- the triggers, as the owner of PostgreSQL's tables is not by its policies:
-- they run migrations, task deletes, audits and repairs.
-- +goose StatementBegin
CREATE FUNCTION loanq_trusted() RETURNS BOOLEAN
    READS SQL DATA SQL SECURITY DEFINER
RETURN EXISTS (SELECT 1 FROM loanq_account a
               WHERE a.account = SUBSTRING_INDEX(USER(), '@', 1) AND a.trusted)
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER loanq_work_request_log BEFORE INSERT ON loanq_work_request FOR EACH ROW
BEGIN
    IF NOT loanq_trusted() AND (NEW.status <> 'pending' OR NEW.assigned <> 0 OR NOT loanq_may_act_as(NEW.user_name)) THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'loanq: this database account may not log a request for that user (docs/security.md)';
    END IF;
END
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER loanq_work_request_finish BEFORE UPDATE ON loanq_work_request FOR EACH ROW
BEGIN
    IF NOT loanq_trusted() AND (NOT (NEW.user_name <=> OLD.user_name AND NEW.task_id <=> OLD.task_id AND NEW.requested <=> OLD.requested)
       OR NOT ((NEW.status = 'cancelled' AND loanq_may_act_as(OLD.user_name))
               OR (OLD.status = 'pending' AND NEW.status IN ('assigned', 'partial', 'empty')))) THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'loanq: this database account may not change that request (docs/security.md)';
    END IF;
END
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER loanq_work_assign BEFORE INSERT ON loanq_work FOR EACH ROW
BEGIN
    IF NOT loanq_trusted() AND (NEW.disposition IS NOT NULL OR NOT EXISTS (
        SELECT 1 FROM loanq_work_request r
        WHERE r.id = NEW.request_id AND r.task_id = NEW.task_id AND r.user_name = NEW.user_name)) THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'loanq: a work row must serve a request of its user in its task (docs/security.md)';
    END IF;
END
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER loanq_work_dispose BEFORE UPDATE ON loanq_work FOR EACH ROW
BEGIN
    IF NOT loanq_trusted() AND (NOT (NEW.user_name <=> OLD.user_name AND NEW.task_id <=> OLD.task_id
            AND NEW.loan_id <=> OLD.loan_id AND NEW.request_id <=> OLD.request_id)
       OR NOT ((loanq_may_act_as(OLD.user_name) AND (NEW.disposed_by IS NULL OR loanq_may_act_as(NEW.disposed_by)))
               OR (NEW.disposition = 'expired' AND NEW.disposed_by IS NULL AND EXISTS (
                   SELECT 1 FROM loanq_task t
                   WHERE t.id = OLD.task_id AND t.max_hold_ms IS NOT NULL
                     AND OLD.assigned_at <= UTC_TIMESTAMP(6) - INTERVAL t.max_hold_ms * 1000 MICROSECOND)))) THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'loanq: this database account may not end that assignment (docs/security.md)';
    END IF;
END
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER loanq_task_user_own BEFORE INSERT ON loanq_task_user FOR EACH ROW
BEGIN
    IF NOT loanq_trusted() AND (NOT loanq_may_act_as(NEW.user_name)) THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'loanq: this database account may not act as that user (docs/security.md)';
    END IF;
END
-- +goose StatementEnd

-- Nobody changes a cap lock row (the UPDATE privilege on it is only what a
-- locking read may need).
-- +goose StatementBegin
CREATE TRIGGER loanq_task_user_fixed BEFORE UPDATE ON loanq_task_user FOR EACH ROW
BEGIN
    IF NOT loanq_trusted() THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'loanq: cap lock rows are not changed (docs/security.md)';
    END IF;
END
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER loanq_task_user_fixed;
DROP TRIGGER loanq_task_user_own;
DROP TRIGGER loanq_work_dispose;
DROP TRIGGER loanq_work_assign;
DROP TRIGGER loanq_work_request_finish;
DROP TRIGGER loanq_work_request_log;
DROP FUNCTION loanq_trusted;
DROP FUNCTION loanq_may_act_as;
ALTER TABLE loanq_task DROP COLUMN updated_at, DROP COLUMN updated_by;
DROP TABLE loanq_account;

-- What an untrusted account (processor, refresher) writes is checked column
-- by column, not only by whose name it carries: the same rules as
-- PostgreSQL's 00017 (docs/security.md, "What the database enforces").
--
-- * An account's loanq name is USER() without its host: the text before the
--   LAST '@' (loanq_acts_as, loanq_is_trusted; the expression is written
--   out, because a stored function called from a stored function costs
--   MariaDB a routine call per row). 00008 took the text before the first '@', so an account named
--   'ana@x'@'%' counted as 'ana'.
-- * A work row serves a request that is pending, or that this connection
--   finished (served_conn, stamped by the request's trigger when it leaves
--   pending; MySQL has no cheap transaction id), and no request gets more
--   work rows than it asked for (pending) or was finished with (assigned):
--   the engine inserts a finished request's rows in the transaction that
--   finished it, so the count closes it then. The user's active work stays
--   within the task's max_active; the key fits the task's key type;
--   assigned_at is the database's clock and assigned_by the writing account.
-- * Finished history is not changed: a work row is updated only while
--   active (disposed_at: the clock); a request only while pending (00008
--   let a served request be cancelled), finished with at most what it asked
--   for (served_at: the clock); logged with the clock (created_at, alive_at).
-- * A pool candidate's key fits the task's key type; a task's lease token
--   never goes down and a lease lasts at most the task's lease_ttl_ms (plus
--   a minute) from now.
-- * Named locks, for every account: created free; taken only when free or
--   expired, token one higher, taken_by the account; renewed or released
--   only through that account; at most 24 h (namedlock.MaxTTL) plus a
--   minute. Processors have no write privilege on loanq_lock (`loanq grants`).
--
-- Trusted accounts skip the per-row checks except the named locks', as in
-- 00008. MySQL 8 has no CREATE OR REPLACE TRIGGER: triggers are dropped and
-- created again (DDL; the table's metadata lock covers both).

-- +goose Up
ALTER TABLE loanq_work ADD COLUMN assigned_by VARCHAR(128) NULL;
ALTER TABLE loanq_work_request ADD COLUMN served_conn BIGINT NULL;
ALTER TABLE loanq_lock ADD COLUMN taken_by VARCHAR(128) NULL;

-- The rules' functions under new names: loanq_acts_as and loanq_is_trusted
-- (the last '@'). 00008's loanq_may_act_as and loanq_trusted stay as they
-- were: a previous version still running calls them through its triggers
-- and its identity check, and MySQL 8 cannot replace a function in one
-- statement (a DROP then CREATE would fail every write in between:
-- TestPreviousVersionAcrossTheMigration). The new triggers call the new
-- functions; loanq's identity check keeps loanq_may_act_as, which every
-- account was granted, as the command line's first question only (the
-- triggers decide).
-- +goose StatementBegin
CREATE FUNCTION loanq_acts_as(acting VARCHAR(100)) RETURNS BOOLEAN
    READS SQL DATA SQL SECURITY DEFINER
RETURN acting = SUBSTRING(USER(), 1, CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1)
    OR EXISTS (SELECT 1 FROM loanq_account a
               WHERE a.account = SUBSTRING(USER(), 1, CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1) AND (a.trusted OR a.user_name = acting))
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION loanq_is_trusted() RETURNS BOOLEAN
    READS SQL DATA SQL SECURITY DEFINER
RETURN EXISTS (SELECT 1 FROM loanq_account a
               WHERE a.account = SUBSTRING(USER(), 1, CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1) AND a.trusted)
-- +goose StatementEnd

-- A key fits its task's key type as loanq writes keys (drivers.KeyFits).
-- MariaDB's PCRE and MySQL 8's ICU let '$' match before a final newline:
-- a key holding one is refused outright.
-- +goose StatementBegin
CREATE FUNCTION loanq_key_fits(kind VARCHAR(10), k VARCHAR(200)) RETURNS BOOLEAN
    DETERMINISTIC NO SQL
RETURN CASE kind
    WHEN 'integer' THEN k REGEXP '^(0|-?[1-9][0-9]{0,18})$' AND INSTR(k, CHAR(10)) = 0
    WHEN 'uuid' THEN k REGEXP '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$' AND INSTR(k, CHAR(10)) = 0
    ELSE k IS NOT NULL END
-- +goose StatementEnd

DROP TRIGGER loanq_work_request_log;
-- +goose StatementBegin
CREATE TRIGGER loanq_work_request_log BEFORE INSERT ON loanq_work_request FOR EACH ROW
BEGIN
    IF NOT loanq_is_trusted() THEN
        IF NEW.status <> 'pending' OR NEW.assigned <> 0 OR NOT loanq_acts_as(NEW.user_name) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'loanq: this database account may not log a request for that user (docs/security.md)';
        END IF;
        SET NEW.created_at = UTC_TIMESTAMP(6), NEW.alive_at = NEW.created_at, NEW.served_at = NULL, NEW.served_conn = NULL;
    END IF;
END
-- +goose StatementEnd

DROP TRIGGER loanq_work_request_finish;
-- +goose StatementBegin
CREATE TRIGGER loanq_work_request_finish BEFORE UPDATE ON loanq_work_request FOR EACH ROW
BEGIN
    IF OLD.status = 'pending' AND NEW.status <> 'pending' THEN
        SET NEW.served_conn = CONNECTION_ID();
    END IF;
    IF NOT loanq_is_trusted() THEN
        IF NOT (NEW.user_name <=> OLD.user_name AND NEW.task_id <=> OLD.task_id AND NEW.requested <=> OLD.requested
                AND NEW.created_at <=> OLD.created_at)
           OR OLD.status <> 'pending' OR NEW.assigned > OLD.requested OR NEW.assigned < 0
           OR NOT ((NEW.status = 'cancelled' AND loanq_acts_as(OLD.user_name))
                   OR NEW.status IN ('assigned', 'partial', 'empty')
                   OR (NEW.status = 'pending' AND loanq_acts_as(OLD.user_name) AND NEW.alive_at <= UTC_TIMESTAMP(6))
                   OR (NEW.status = 'expired'
                       AND (OLD.alive_at IS NULL OR OLD.alive_at <= UTC_TIMESTAMP(6) - INTERVAL 60 SECOND))) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'loanq: this database account may not change that request (docs/security.md)';
        END IF;
        IF NEW.status <> 'pending' THEN
            SET NEW.served_at = UTC_TIMESTAMP(6);
        END IF;
    END IF;
END
-- +goose StatementEnd

DROP TRIGGER loanq_work_assign;
-- +goose StatementBegin
CREATE TRIGGER loanq_work_assign BEFORE INSERT ON loanq_work FOR EACH ROW
BEGIN
    DECLARE req_status VARCHAR(10);
    DECLARE req_limit INT;
    DECLARE req_mine BOOLEAN;
    DECLARE cap INT;
    DECLARE kind VARCHAR(10);
    DECLARE n BIGINT;
    SET NEW.assigned_by = SUBSTRING(USER(), 1, CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1);
    IF NOT loanq_is_trusted() THEN
        SET NEW.assigned_at = UTC_TIMESTAMP(6);
        IF NEW.disposition IS NOT NULL THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'loanq: a work row is written active (docs/security.md)';
        END IF;
        SELECT r.status, CASE WHEN r.status = 'pending' THEN r.requested ELSE r.assigned END, r.served_conn <=> CONNECTION_ID()
          INTO req_status, req_limit, req_mine
          FROM loanq_work_request r
         WHERE r.id = NEW.request_id AND r.task_id = NEW.task_id AND r.user_name = NEW.user_name;
        IF req_status IS NULL THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'loanq: a work row must serve a request of its user in its task (docs/security.md)';
        END IF;
        IF req_status <> 'pending' AND NOT req_mine THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'loanq: a work row may serve only a pending request, or one this connection served (docs/security.md)';
        END IF;
        SELECT COUNT(*) INTO n FROM loanq_work WHERE request_id = NEW.request_id;
        IF n + 1 > req_limit THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'loanq: that request has all the work rows it asked for (docs/security.md)';
        END IF;
        SELECT t.max_active, t.key_kind INTO cap, kind FROM loanq_task t WHERE t.id = NEW.task_id;
        IF NOT loanq_key_fits(kind, NEW.loan_id) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'loanq: the loan key does not fit the task''s key type (docs/security.md)';
        END IF;
        IF cap IS NOT NULL THEN
            SELECT COUNT(*) INTO n FROM loanq_work
             WHERE task_id = NEW.task_id AND user_name = NEW.user_name AND disposition IS NULL;
            IF n + 1 > cap THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'loanq: the user would hold more than the task''s max-active (docs/security.md)';
            END IF;
        END IF;
    END IF;
END
-- +goose StatementEnd

DROP TRIGGER loanq_work_dispose;
-- +goose StatementBegin
CREATE TRIGGER loanq_work_dispose BEFORE UPDATE ON loanq_work FOR EACH ROW
BEGIN
    IF NOT loanq_is_trusted() THEN
        IF OLD.disposition IS NOT NULL THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'loanq: finished work is history and is not changed (docs/security.md)';
        END IF;
        IF NOT (NEW.user_name <=> OLD.user_name AND NEW.task_id <=> OLD.task_id
                AND NEW.loan_id <=> OLD.loan_id AND NEW.request_id <=> OLD.request_id
                AND NEW.assigned_at <=> OLD.assigned_at AND NEW.assigned_by <=> OLD.assigned_by)
           OR NOT ((loanq_acts_as(OLD.user_name) AND (NEW.disposed_by IS NULL OR loanq_acts_as(NEW.disposed_by)))
                   OR (NEW.disposition = 'expired' AND NEW.disposed_by IS NULL AND EXISTS (
                       SELECT 1 FROM loanq_task t
                       WHERE t.id = OLD.task_id AND t.max_hold_ms IS NOT NULL
                         AND OLD.assigned_at <= UTC_TIMESTAMP(6) - INTERVAL t.max_hold_ms * 1000 MICROSECOND))) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'loanq: this database account may not end that assignment (docs/security.md)';
        END IF;
        IF NEW.disposition IS NOT NULL THEN
            SET NEW.disposed_at = UTC_TIMESTAMP(6);
        END IF;
    END IF;
END
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER loanq_pool_fill BEFORE INSERT ON loanq_pool FOR EACH ROW
BEGIN
    -- loanq_key_fits written out: a refill writes hundreds of rows, and a
    -- stored function call per row cost MariaDB's pool 10 % of its speed.
    DECLARE kind VARCHAR(10);
    SELECT t.key_kind INTO kind FROM loanq_task t WHERE t.id = NEW.task_id;
    IF kind <> 'text' AND (INSTR(NEW.loan_id, CHAR(10)) > 0 OR NOT (CASE kind
            WHEN 'integer' THEN NEW.loan_id REGEXP '^(0|-?[1-9][0-9]{0,18})$'
            ELSE NEW.loan_id REGEXP '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$' END))
       AND NOT loanq_is_trusted() THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'loanq: a pool candidate''s key must fit the task''s key type (docs/security.md)';
    END IF;
END
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER loanq_pool_change BEFORE UPDATE ON loanq_pool FOR EACH ROW
BEGIN
    -- loanq_key_fits written out: a refill writes hundreds of rows, and a
    -- stored function call per row cost MariaDB's pool 10 % of its speed.
    DECLARE kind VARCHAR(10);
    SELECT t.key_kind INTO kind FROM loanq_task t WHERE t.id = NEW.task_id;
    IF kind <> 'text' AND (INSTR(NEW.loan_id, CHAR(10)) > 0 OR NOT (CASE kind
            WHEN 'integer' THEN NEW.loan_id REGEXP '^(0|-?[1-9][0-9]{0,18})$'
            ELSE NEW.loan_id REGEXP '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$' END))
       AND NOT loanq_is_trusted() THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'loanq: a pool candidate''s key must fit the task''s key type (docs/security.md)';
    END IF;
END
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER loanq_task_lease BEFORE UPDATE ON loanq_task FOR EACH ROW
BEGIN
    IF NOT loanq_is_trusted() AND (NEW.lease_token < OLD.lease_token
            OR NEW.lease_expires_at > UTC_TIMESTAMP(6) + INTERVAL (NEW.lease_ttl_ms + 60000) * 1000 MICROSECOND) THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'loanq: a task''s lease token never goes down, and a lease lasts at most its lease-ttl (docs/security.md)';
    END IF;
END
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER loanq_lock_create BEFORE INSERT ON loanq_lock FOR EACH ROW
BEGIN
    IF NEW.holder IS NOT NULL OR NEW.token <> 0 OR NEW.taken_at IS NOT NULL OR NEW.expires_at IS NOT NULL THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'loanq: a named lock is created free, with token 0 (docs/security.md)';
    END IF;
END
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER loanq_lock_change BEFORE UPDATE ON loanq_lock FOR EACH ROW
BEGIN
    IF NOT (NEW.name <=> OLD.name) OR NEW.token < OLD.token
       OR NEW.expires_at > UTC_TIMESTAMP(6) + INTERVAL 1441 MINUTE THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'loanq: a named lock keeps its name, its token never goes down, and it is held at most 24 h at a time (docs/security.md)';
    ELSEIF NEW.token = OLD.token + 1 AND NEW.holder IS NOT NULL THEN
        -- a take: only of a free or expired lock
        IF OLD.holder IS NOT NULL AND OLD.expires_at > UTC_TIMESTAMP(6) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'loanq: a named lock is taken only once free or expired (docs/security.md)';
        END IF;
        SET NEW.taken_by = SUBSTRING(USER(), 1, CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1);
    ELSEIF NOT (NEW.token = OLD.token AND NEW.holder <=> OLD.holder AND NEW.taken_at <=> OLD.taken_at
                AND NEW.expires_at <=> OLD.expires_at AND NEW.taken_by <=> OLD.taken_by)
       AND NOT (NEW.token = OLD.token AND OLD.holder IS NOT NULL AND (NEW.holder IS NULL OR NEW.holder = OLD.holder)
                AND NEW.taken_by <=> OLD.taken_by AND (OLD.taken_by IS NULL OR OLD.taken_by = SUBSTRING(USER(), 1, CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1))) THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'loanq: a named lock is renewed or released only by its holder, taken only with the next token (docs/security.md)';
    END IF;
END
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER loanq_lock_change;
DROP TRIGGER loanq_lock_create;
DROP TRIGGER loanq_task_lease;
DROP TRIGGER loanq_pool_change;
DROP TRIGGER loanq_pool_fill;
DROP TRIGGER loanq_work_dispose;
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
DROP TRIGGER loanq_work_assign;
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
DROP TRIGGER loanq_work_request_finish;
-- +goose StatementBegin
CREATE TRIGGER loanq_work_request_finish BEFORE UPDATE ON loanq_work_request FOR EACH ROW
BEGIN
    IF NOT loanq_trusted() AND (NOT (NEW.user_name <=> OLD.user_name AND NEW.task_id <=> OLD.task_id AND NEW.requested <=> OLD.requested)
       OR NOT ((NEW.status = 'cancelled' AND loanq_may_act_as(OLD.user_name))
               OR (OLD.status = 'pending' AND NEW.status IN ('assigned', 'partial', 'empty'))
               OR (OLD.status = 'pending' AND NEW.status = 'pending' AND loanq_may_act_as(OLD.user_name)
                   AND NEW.alive_at <= UTC_TIMESTAMP(6))
               OR (OLD.status = 'pending' AND NEW.status = 'expired'
                   AND (OLD.alive_at IS NULL OR OLD.alive_at <= UTC_TIMESTAMP(6) - INTERVAL 60 SECOND)))) THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'loanq: this database account may not change that request (docs/security.md)';
    END IF;
END
-- +goose StatementEnd
DROP TRIGGER loanq_work_request_log;
-- +goose StatementBegin
CREATE TRIGGER loanq_work_request_log BEFORE INSERT ON loanq_work_request FOR EACH ROW
BEGIN
    IF NOT loanq_trusted() AND (NEW.status <> 'pending' OR NEW.assigned <> 0 OR NOT loanq_may_act_as(NEW.user_name)) THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'loanq: this database account may not log a request for that user (docs/security.md)';
    END IF;
END
-- +goose StatementEnd
DROP FUNCTION loanq_key_fits;
DROP FUNCTION loanq_is_trusted;
DROP FUNCTION loanq_acts_as;
ALTER TABLE loanq_lock DROP COLUMN taken_by;
ALTER TABLE loanq_work_request DROP COLUMN served_conn;
ALTER TABLE loanq_work DROP COLUMN assigned_by;

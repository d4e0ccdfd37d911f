-- The history of loans as a stream of events (`loanq history`,
-- docs/retention.md "Export, then prune"): the table and triggers of
-- PostgreSQL's 00021. A trigger runs with its definer's privileges (the
-- account running this migration), so processors are granted nothing on
-- loanq_history (`loanq grants`).
--
-- event_at is the time the event was written: UTC_TIMESTAMP(6) and NOW(6)
-- are the start of the statement that fired the trigger, which may be long
-- before the row is written (a disposition's UPDATE waiting for a row
-- lock), and the export's settle window measures the time from an event to
-- its commit. SYSDATE(6) is the time of the call, in the session's time
-- zone: UTC_TIMESTAMP(6) plus the time elapsed since the statement started
-- (SYSDATE(6) - NOW(6), both in the session's zone) is UTC at the call,
-- whatever the session's zone. A server run with --sysdate-is-now gives the
-- statement's start. (SYSDATE is unsafe for statement-based binary logs: a
-- row-based or mixed log, MySQL's and MariaDB's default, logs the row.)
--
-- No foreign key to loanq_work: InnoDB's check would lock the work row
-- again at every event. Prune and task delete remove a work row's events
-- with it (dispatch/prunesql.go, dispatch/taskdeletesql.go).

-- +goose Up
CREATE TABLE loanq_history (
    id       BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
    work_id  BIGINT      NOT NULL,
    event    VARCHAR(10) NOT NULL,
    event_at DATETIME(6) NOT NULL,
    CONSTRAINT loanq_history_event_ck CHECK (event IN ('assigned', 'disposed')),
    INDEX loanq_history_work_ix (work_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose StatementBegin
CREATE TRIGGER loanq_work_history_assigned AFTER INSERT ON loanq_work FOR EACH ROW
    INSERT INTO loanq_history (work_id, event, event_at)
    VALUES (NEW.id, 'assigned', UTC_TIMESTAMP(6) + INTERVAL TIMESTAMPDIFF(MICROSECOND, NOW(6), SYSDATE(6)) MICROSECOND)
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER loanq_work_history_disposed AFTER UPDATE ON loanq_work FOR EACH ROW
BEGIN
    IF OLD.disposition IS NULL AND NEW.disposition IS NOT NULL THEN
        INSERT INTO loanq_history (work_id, event, event_at)
        VALUES (NEW.id, 'disposed', UTC_TIMESTAMP(6) + INTERVAL TIMESTAMPDIFF(MICROSECOND, NOW(6), SYSDATE(6)) MICROSECOND);
    END IF;
END
-- +goose StatementEnd

-- The history so far, after the triggers (CREATE TRIGGER waits for the
-- transactions in flight on loanq_work), in time order; NOT EXISTS: an event
-- a trigger wrote meanwhile is not written twice.
--
-- At READ COMMITTED, the default REPEATABLE READ's INSERT … SELECT would
-- take shared locks on every loanq_work row it reads while it holds
-- loanq_history's AUTO-INC lock (a bulk insert holds it to the statement's
-- end); a running processor that holds a work row and whose trigger waits
-- for that AUTO-INC lock closes a cycle, and InnoDB may end this migration
-- as the deadlock victim, after the DDL above committed (seen in the
-- rolling-upgrade test). At READ COMMITTED the SELECT is a consistent read
-- that locks no work row: the processors only wait for the AUTO-INC lock.
-- SET TRANSACTION (no SESSION) is for the next transaction only, and the
-- DDL above committed goose's, so that transaction is this statement.
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
INSERT INTO loanq_history (work_id, event, event_at)
SELECT e.work_id, e.event, e.event_at FROM (
    SELECT w.id AS work_id, 'assigned' AS event, w.assigned_at AS event_at FROM loanq_work w
    UNION ALL
    SELECT w.id, 'disposed', w.disposed_at FROM loanq_work w WHERE w.disposed_at IS NOT NULL) e
WHERE NOT EXISTS (SELECT 1 FROM loanq_history h WHERE h.work_id = e.work_id AND h.event = e.event)
ORDER BY e.event_at, e.event, e.work_id;

-- +goose Down
DROP TRIGGER loanq_work_history_disposed;
DROP TRIGGER loanq_work_history_assigned;
DROP TABLE loanq_history;

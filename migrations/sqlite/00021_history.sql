-- The history of loans as a stream of events (`loanq history`,
-- docs/retention.md "Export, then prune"): the table and triggers of the
-- other dialects' 00021. AUTOINCREMENT: an id is never used twice, even
-- after the highest rows were deleted, so an export's cursor never passes
-- an event written later. event_at is the clock of the statement that fired
-- the trigger ('now' is fixed for a statement); SQLite has one writer at a
-- time, so ids are also commit order.

-- +goose Up
CREATE TABLE loanq_history (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    work_id  INTEGER NOT NULL,
    event    TEXT    NOT NULL,
    event_at TEXT    NOT NULL,
    CONSTRAINT loanq_history_event_ck CHECK (event IN ('assigned', 'disposed'))
);
CREATE INDEX loanq_history_work_ix ON loanq_history (work_id);

-- +goose StatementBegin
CREATE TRIGGER loanq_work_history_assigned AFTER INSERT ON loanq_work
FOR EACH ROW
BEGIN
    INSERT INTO loanq_history (work_id, event, event_at)
    VALUES (NEW.id, 'assigned', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER loanq_work_history_disposed AFTER UPDATE OF disposition ON loanq_work
FOR EACH ROW WHEN OLD.disposition IS NULL AND NEW.disposition IS NOT NULL
BEGIN
    INSERT INTO loanq_history (work_id, event, event_at)
    VALUES (NEW.id, 'disposed', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));
END;
-- +goose StatementEnd

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

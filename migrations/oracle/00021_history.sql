-- The history of loans as a stream of events (`loanq history`,
-- docs/retention.md "Export, then prune"): the table and triggers of
-- PostgreSQL's 00021. Triggers run with their owner's rights, so processors
-- are granted nothing on loanq_history (`loanq grants`). event_at is the
-- time the event was written, SYSTIMESTAMP at the insert, in UTC. The
-- identity is ORDER: on RAC, an unordered sequence's instances hand out
-- ids from caches of their own, and the export's cursor (--after-id) needs
-- ids in the order the events were written. No foreign key to loanq_work
-- (its check locks the work row at every event): prune and task delete
-- remove a work row's events with it. Same statement rules as
-- 00001_schema.sql.

-- +goose Up
-- +goose StatementBegin
CREATE TABLE loanq_history (
    id       NUMBER(19)   GENERATED ALWAYS AS IDENTITY (ORDER),
    work_id  NUMBER(19)   NOT NULL,
    event    VARCHAR2(10) NOT NULL,
    event_at TIMESTAMP(6) NOT NULL,
    CONSTRAINT loanq_history_pk PRIMARY KEY (id),
    CONSTRAINT loanq_history_event_ck CHECK (event IN ('assigned', 'disposed'))
)
-- +goose StatementEnd
-- +goose StatementBegin
CREATE INDEX loanq_history_work_ix ON loanq_history (work_id)
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE TRIGGER loanq_work_history_assigned
AFTER INSERT ON loanq_work FOR EACH ROW
BEGIN
    INSERT INTO loanq_history (work_id, event, event_at)
    VALUES (:NEW.id, 'assigned', SYS_EXTRACT_UTC(SYSTIMESTAMP));
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE TRIGGER loanq_work_history_disposed
AFTER UPDATE OF disposition ON loanq_work FOR EACH ROW
WHEN (OLD.disposition IS NULL AND NEW.disposition IS NOT NULL)
BEGIN
    INSERT INTO loanq_history (work_id, event, event_at)
    VALUES (:NEW.id, 'disposed', SYS_EXTRACT_UTC(SYSTIMESTAMP));
END;
-- +goose StatementEnd

-- +goose StatementBegin
INSERT INTO loanq_history (work_id, event, event_at)
SELECT e.work_id, e.event, e.event_at FROM (
    SELECT w.id AS work_id, 'assigned' AS event, w.assigned_at AS event_at FROM loanq_work w
    UNION ALL
    SELECT w.id, 'disposed', w.disposed_at FROM loanq_work w WHERE w.disposed_at IS NOT NULL) e
WHERE NOT EXISTS (SELECT 1 FROM loanq_history h WHERE h.work_id = e.work_id AND h.event = e.event)
ORDER BY e.event_at, e.event, e.work_id
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TRIGGER loanq_work_history_disposed
-- +goose StatementEnd
-- +goose StatementBegin
DROP TRIGGER loanq_work_history_assigned
-- +goose StatementEnd
-- +goose StatementBegin
DROP TABLE loanq_history
-- +goose StatementEnd

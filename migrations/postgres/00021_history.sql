-- The history of loans as a stream of events (`loanq history`,
-- docs/retention.md "Export, then prune"): one row per assignment
-- ('assigned') and per disposition ('disposed') of a loanq_work row, in the
-- order the events were written. A work row is updated in place when it is
-- disposed, so its id orders assignments but not dispositions, and an active
-- row would stall a reader walking work ids; this table is append-only and
-- its id is the export's cursor (--after-id).
--
-- The events are written by the database, by AFTER triggers on loanq_work,
-- so every writer records them: serving rounds, pool and rows claims,
-- dispositions, expiry and reclaim, cancels, SQL sent by hand. at is the
-- time the event was written (clock_timestamp(), not now(), which is the
-- start of the transaction; the export's settle window measures from it).
--
-- The trigger functions run as the owner (SECURITY DEFINER): processors are
-- granted nothing on loanq_history, neither to write nor to read it. A
-- definer's function runs under the caller's search_path, so they name
-- every table and function with its schema (pg_catalog's too, as an
-- explicit search_path may put another schema before pg_catalog) and use no
-- operator, whose lookup would follow the caller's path; pg_temp is never
-- searched for functions. No SET search_path: it is paid at every call
-- (00017 says why).
--
-- No foreign key to loanq_work: its check locks the work row (FOR KEY
-- SHARE) at every event. The events of a work row go with it: prune and
-- task delete remove them first, in the same transaction
-- (dispatch/prunesql.go, dispatch/taskdeletesql.go); loanq_history_work_ix
-- finds them.

-- +goose Up
CREATE TABLE loanq_history (
    id       BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    work_id  BIGINT      NOT NULL,
    event    VARCHAR(10) NOT NULL,
    event_at TIMESTAMPTZ NOT NULL,
    CONSTRAINT loanq_history_event_ck CHECK (event IN ('assigned', 'disposed'))
);
CREATE INDEX loanq_history_work_ix ON loanq_history (work_id);

-- +goose StatementBegin
DO $do$
BEGIN
    EXECUTE format($f$
CREATE FUNCTION loanq_history_assigned() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
AS $body$
BEGIN
    INSERT INTO %1$I.loanq_history (work_id, event, event_at) VALUES (NEW.id, 'assigned', pg_catalog.clock_timestamp());
    RETURN NULL;
END
$body$
$f$, current_schema());

    EXECUTE format($f$
CREATE FUNCTION loanq_history_disposed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
AS $body$
BEGIN
    INSERT INTO %1$I.loanq_history (work_id, event, event_at) VALUES (NEW.id, 'disposed', pg_catalog.clock_timestamp());
    RETURN NULL;
END
$body$
$f$, current_schema());
END
$do$;
-- +goose StatementEnd
-- Nobody but the owner calls them directly (a trigger function cannot be
-- called outside a trigger anyway).
REVOKE ALL ON FUNCTION loanq_history_assigned() FROM PUBLIC;
REVOKE ALL ON FUNCTION loanq_history_disposed() FROM PUBLIC;

CREATE TRIGGER loanq_work_history_assigned AFTER INSERT ON loanq_work
    FOR EACH ROW EXECUTE FUNCTION loanq_history_assigned();
CREATE TRIGGER loanq_work_history_disposed AFTER UPDATE OF disposition ON loanq_work
    FOR EACH ROW WHEN (OLD.disposition IS NULL AND NEW.disposition IS NOT NULL)
    EXECUTE FUNCTION loanq_history_disposed();

-- The history so far, after the triggers (their lock waits for the writers
-- in flight, and holds off new ones until this migration commits), in time
-- order: the assignments at assigned_at, the dispositions at disposed_at.
-- NOT EXISTS: an event a trigger already wrote is not written twice.
INSERT INTO loanq_history (work_id, event, event_at)
SELECT e.work_id, e.event, e.event_at FROM (
    SELECT w.id AS work_id, 'assigned' AS event, w.assigned_at AS event_at FROM loanq_work w
    UNION ALL
    SELECT w.id, 'disposed', w.disposed_at FROM loanq_work w WHERE w.disposed_at IS NOT NULL) e
WHERE NOT EXISTS (SELECT 1 FROM loanq_history h WHERE h.work_id = e.work_id AND h.event = e.event)
ORDER BY e.event_at, e.event, e.work_id;

-- +goose Down
DROP TRIGGER loanq_work_history_disposed ON loanq_work;
DROP TRIGGER loanq_work_history_assigned ON loanq_work;
DROP FUNCTION loanq_history_disposed();
DROP FUNCTION loanq_history_assigned();
DROP TABLE loanq_history;

-- The history events and the reason check once per statement, not once per
-- row (docs/write-amplification.md, "Triggers per statement"). A batch
-- disposition (`loanq disposition TASK LOAN… ACTION`, one UPDATE of up to
-- 1,000 work rows) and a round's work rows (one INSERT … SELECT) ran
-- 00019's and 00021's PL/pgSQL functions once per row: with a profile of
-- `bench --count 50 --dispose batch`, 0.09 ms per disposed row in the
-- disposed event, 0.04 in the assigned event and 0.03 in the reason check,
-- a third of the disposition's UPDATE. A statement trigger with transition
-- tables runs its function once and writes every row's event in one
-- INSERT … SELECT.
--
-- What stays the same:
-- * the events: one 'assigned' per work row inserted, one 'disposed' per
--   work row whose disposition goes from NULL to a value, in the work rows'
--   order within a statement; event_at is still the time the event was
--   written (clock_timestamp(), now once per statement, after its rows);
-- * the reason rule, for every account: a statement whose rows break it
--   fails whole with the same SQLSTATE (23514) and message, naming the
--   first such row (by work id). An AFTER trigger's error rolls the
--   statement back as a BEFORE trigger's did.
-- A transition table may not go with a column list (UPDATE OF
-- disposition), so the UPDATE triggers fire for every UPDATE of loanq_work
-- and find the rows whose disposition was set by joining OLD and NEW on id.

-- +goose Up
DROP TRIGGER loanq_work_history_assigned ON loanq_work;
DROP TRIGGER loanq_work_history_disposed ON loanq_work;
DROP TRIGGER loanq_work_reason_check ON loanq_work;
DROP FUNCTION loanq_history_assigned();
DROP FUNCTION loanq_history_disposed();
DROP FUNCTION loanq_work_reason_check();

-- +goose StatementBegin
DO $do$
BEGIN
    EXECUTE format($f$
CREATE FUNCTION loanq_history_assigned() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
AS $body$
BEGIN
    INSERT INTO %1$I.loanq_history (work_id, event, event_at)
    SELECT n.id, 'assigned', pg_catalog.clock_timestamp() FROM loanq_new n ORDER BY n.id;
    RETURN NULL;
END
$body$
$f$, current_schema());

    EXECUTE format($f$
CREATE FUNCTION loanq_history_disposed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
AS $body$
BEGIN
    INSERT INTO %1$I.loanq_history (work_id, event, event_at)
    SELECT n.id, 'disposed', pg_catalog.clock_timestamp()
    FROM loanq_old o JOIN loanq_new n ON n.id = o.id
    WHERE o.disposition IS NULL AND n.disposition IS NOT NULL
    ORDER BY n.id;
    RETURN NULL;
END
$body$
$f$, current_schema());

    EXECUTE format($f$
CREATE FUNCTION loanq_work_reason_check() RETURNS trigger
LANGUAGE plpgsql
AS $body$
DECLARE
    bad RECORD;
BEGIN
    -- The first disposed row that breaks its task's rule, with the rule.
    SELECT n.disposition, n.reason, t.reasons, t.require_reason,
           substring(';' || t.reasons || ';' from ';' || n.disposition || '=([^;]*);') AS allowed
    INTO bad
    FROM loanq_old o
    JOIN loanq_new n ON n.id = o.id
    JOIN %1$I.loanq_task t ON t.id = n.task_id
    WHERE o.disposition IS NULL AND n.disposition IS NOT NULL
      AND ((n.reason IS NOT NULL
            AND substring(';' || t.reasons || ';' from ';' || n.disposition || '=([^;]*);') IS NOT NULL
            AND (position(',' || n.reason || ',' in ',' || substring(';' || t.reasons || ';' from ';' || n.disposition || '=([^;]*);') || ',') = 0
                 OR n.reason ~ '[,;]'))
        OR (n.reason IS NULL AND position(',' || n.disposition || ',' in ',' || coalesce(t.require_reason, '') || ',') > 0))
    ORDER BY n.id
    LIMIT 1;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF bad.reason IS NOT NULL THEN
        RAISE EXCEPTION 'loanq: reason %% is not one of task''s codes for %%: %% (docs/reasons.md)', bad.reason, bad.disposition, bad.allowed
            USING ERRCODE = '23514';
    END IF;
    RAISE EXCEPTION 'loanq: the task requires a reason for %% (docs/reasons.md)', bad.disposition
        USING ERRCODE = '23514';
END
$body$
$f$, current_schema());
END
$do$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION loanq_history_assigned() FROM PUBLIC;
REVOKE ALL ON FUNCTION loanq_history_disposed() FROM PUBLIC;

CREATE TRIGGER loanq_work_history_assigned AFTER INSERT ON loanq_work
    REFERENCING NEW TABLE AS loanq_new
    FOR EACH STATEMENT EXECUTE FUNCTION loanq_history_assigned();
CREATE TRIGGER loanq_work_history_disposed AFTER UPDATE ON loanq_work
    REFERENCING OLD TABLE AS loanq_old NEW TABLE AS loanq_new
    FOR EACH STATEMENT EXECUTE FUNCTION loanq_history_disposed();
CREATE TRIGGER loanq_work_reason_check AFTER UPDATE ON loanq_work
    REFERENCING OLD TABLE AS loanq_old NEW TABLE AS loanq_new
    FOR EACH STATEMENT EXECUTE FUNCTION loanq_work_reason_check();

-- +goose Down
DROP TRIGGER loanq_work_reason_check ON loanq_work;
DROP TRIGGER loanq_work_history_disposed ON loanq_work;
DROP TRIGGER loanq_work_history_assigned ON loanq_work;
DROP FUNCTION loanq_work_reason_check();
DROP FUNCTION loanq_history_disposed();
DROP FUNCTION loanq_history_assigned();

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

    EXECUTE format($f$
CREATE FUNCTION loanq_work_reason_check() RETURNS trigger
LANGUAGE plpgsql
AS $body$
DECLARE
    codes   VARCHAR;
    req     VARCHAR;
    allowed VARCHAR;
BEGIN
    SELECT t.reasons, t.require_reason INTO codes, req FROM %1$I.loanq_task t WHERE t.id = NEW.task_id;
    allowed := substring(';' || codes || ';' from ';' || NEW.disposition || '=([^;]*);');
    IF NEW.reason IS NOT NULL AND allowed IS NOT NULL
       AND (position(',' || NEW.reason || ',' in ',' || allowed || ',') = 0 OR NEW.reason ~ '[,;]') THEN
        RAISE EXCEPTION 'loanq: reason %% is not one of task''s codes for %%: %% (docs/reasons.md)', NEW.reason, NEW.disposition, allowed
            USING ERRCODE = '23514';
    END IF;
    IF NEW.reason IS NULL AND position(',' || NEW.disposition || ',' in ',' || coalesce(req, '') || ',') > 0 THEN
        RAISE EXCEPTION 'loanq: the task requires a reason for %% (docs/reasons.md)', NEW.disposition
            USING ERRCODE = '23514';
    END IF;
    RETURN NEW;
END
$body$
$f$, current_schema());
END
$do$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION loanq_history_assigned() FROM PUBLIC;
REVOKE ALL ON FUNCTION loanq_history_disposed() FROM PUBLIC;

CREATE TRIGGER loanq_work_history_assigned AFTER INSERT ON loanq_work
    FOR EACH ROW EXECUTE FUNCTION loanq_history_assigned();
CREATE TRIGGER loanq_work_history_disposed AFTER UPDATE OF disposition ON loanq_work
    FOR EACH ROW WHEN (OLD.disposition IS NULL AND NEW.disposition IS NOT NULL)
    EXECUTE FUNCTION loanq_history_disposed();
CREATE TRIGGER loanq_work_reason_check BEFORE UPDATE ON loanq_work
    FOR EACH ROW WHEN (OLD.disposition IS NULL AND NEW.disposition IS NOT NULL)
    EXECUTE FUNCTION loanq_work_reason_check();

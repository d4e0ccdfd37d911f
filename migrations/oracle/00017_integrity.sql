-- What an untrusted account (processor, refresher) writes is checked column
-- by column, not only by whose name it carries: the same rules as
-- PostgreSQL's and MySQL's 00017 (docs/security.md, "What the database
-- enforces"). Oracle's account name is SESSION_USER, which has no host part:
-- MySQL's first-'@' identity bug has no counterpart here.
--
-- * A work row serves a request of its user in its task that is pending, or
--   that this very transaction finished: served_tx is the transaction that
--   took the request out of 'pending' (DBMS_TRANSACTION.LOCAL_TRANSACTION_ID,
--   stamped by the request's update trigger and written by nothing else),
--   exact where MySQL's served_conn is per connection. No request gets more
--   work rows than it asked for (pending) or was finished with (assigned);
--   the user's active work in the task stays within max_active; the key
--   fits the task's key type; assigned_at is the database's clock and
--   assigned_by the writing account (recorded for every account).
-- * Finished history is not changed: a work row is updated only while
--   active (disposed_at: the clock; assigned_at, assigned_by kept); a
--   request only while pending (00008 and 00016 let a served request be
--   cancelled), finished with at most what it asked for (served_at: the
--   clock); logged with the clock (created_at, alive_at).
-- * A pool candidate's key fits the task's key type (filled_at never in the
--   future); a task's lease token never goes down and a lease lasts at most
--   the task's lease_ttl_ms plus a minute from now.
-- * Named locks, for every account: created free; taken only when free or
--   expired, token one higher, taken_by the account; renewed or released
--   only through that account, token unchanged; at most 24 h
--   (namedlock.MaxTTL) plus a minute. Processors have no write privilege on
--   loanq_lock (`loanq grants`).
--
-- Why the work insert check is a COMPOUND trigger: loanq inserts work rows
-- with INSERT ... SELECT (a round's JSON list, the rows claim), and a row
-- trigger that queries loanq_work during a multi-row insert fails with
-- ORA-04091 (mutating table). The row section checks each row (its request,
-- its key) and notes its request and its (task, user); the AFTER STATEMENT
-- section, where the table is no longer mutating, counts the rows per
-- request and the active rows per user. The notes are keyed maps, so a row
-- seen twice (a restarted statement) is still counted once, by the query.
--
-- A key fits as drivers.KeyFits says: integer keys are a 64-bit decimal text,
-- uuid keys the canonical 8-4-4-4-12 form, text keys anything. The classes
-- list their characters and the match is 'c' (case- and accent-sensitive)
-- because a range such as [0-9] and the default sensitivity follow the
-- session's NLS_SORT, which the caller sets; a key with a newline is refused
-- outright, as '$' may match before a final one.
--
-- An IF whose condition is unknown (a comparison with NULL) does nothing.
-- So the conditions that allow compare nullable columns with IS NULL or
-- through same_text/same_time, never with a bare '=' (unknown must not
-- count as equal); in those that refuse, unknown lets the row through only
-- where NULL means what the rule allows: no expiry, no lease, or (in the
-- request clauses kept from 00016) a sign of life set to none.
--
-- Trusted accounts skip the per-row checks except the named locks', as in
-- 00008. Triggers and loanq_key_fits run with the owner's rights
-- (definer rights, the default), as in 00008; DBMS_TRANSACTION is granted to
-- PUBLIC by a standard install. Same statement rules as 00001_schema.sql;
-- PL/SQL blocks keep their END;. Only the exact text is tested: no Oracle
-- server runs loanq's tests.

-- +goose Up
-- +goose StatementBegin
ALTER TABLE loanq_work ADD (assigned_by VARCHAR2(128 CHAR))
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_work_request ADD (served_tx VARCHAR2(64))
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_lock ADD (taken_by VARCHAR2(128 CHAR))
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION loanq_key_fits(kind IN VARCHAR2, k IN VARCHAR2) RETURN NUMBER
AUTHID DEFINER DETERMINISTIC IS
BEGIN
    IF k IS NULL THEN
        RETURN 0;
    ELSIF INSTR(k, CHR(10)) > 0 AND kind IN ('integer', 'uuid') THEN
        RETURN 0;
    ELSIF kind = 'integer' THEN
        IF REGEXP_LIKE(k, '^(0|-?[123456789][0123456789]{0,18})$', 'c') THEN
            RETURN 1;
        END IF;
        RETURN 0;
    ELSIF kind = 'uuid' THEN
        IF REGEXP_LIKE(k, '^[0123456789abcdefABCDEF]{8}-[0123456789abcdefABCDEF]{4}-[0123456789abcdefABCDEF]{4}-[0123456789abcdefABCDEF]{4}-[0123456789abcdefABCDEF]{12}$', 'c') THEN
            RETURN 1;
        END IF;
        RETURN 0;
    END IF;
    RETURN 1;
END;
-- +goose StatementEnd

-- A request is logged pending, with the database's clock. served_tx is the
-- finish trigger's alone, for every account.
-- +goose StatementBegin
CREATE OR REPLACE TRIGGER loanq_work_request_log
BEFORE INSERT ON loanq_work_request FOR EACH ROW
BEGIN
    :NEW.served_tx := NULL;
    IF loanq_trusted() = 1 THEN
        RETURN;
    END IF;
    IF :NEW.status <> 'pending' OR :NEW.assigned <> 0 OR loanq_may_act_as(:NEW.user_name) = 0 THEN
        RAISE_APPLICATION_ERROR(-20401, 'loanq: this database account may not log a request for that user (docs/security.md)');
    END IF;
    :NEW.created_at := SYS_EXTRACT_UTC(SYSTIMESTAMP);
    :NEW.alive_at := :NEW.created_at;
    :NEW.served_at := NULL;
END;
-- +goose StatementEnd

-- The rules of 00016, now only while the request is pending, plus the
-- stamp: LOCAL_TRANSACTION_ID(TRUE) starts the transaction if this update
-- is its first change, so the id is the one the update commits in.
-- +goose StatementBegin
CREATE OR REPLACE TRIGGER loanq_work_request_finish
BEFORE UPDATE ON loanq_work_request FOR EACH ROW
BEGIN
    IF :OLD.status = 'pending' AND :NEW.status <> 'pending' THEN
        :NEW.served_tx := DBMS_TRANSACTION.LOCAL_TRANSACTION_ID(TRUE);
    ELSE
        :NEW.served_tx := :OLD.served_tx;
    END IF;
    IF loanq_trusted() = 1 THEN
        RETURN;
    END IF;
    IF :OLD.status <> 'pending' THEN
        RAISE_APPLICATION_ERROR(-20401, 'loanq: a finished request is history and is not changed (docs/security.md)');
    END IF;
    IF :NEW.assigned > :OLD.requested OR :NEW.assigned < 0 THEN
        RAISE_APPLICATION_ERROR(-20401, 'loanq: a request is finished with at most the loans it asked for (docs/security.md)');
    END IF;
    IF :NEW.user_name <> :OLD.user_name OR :NEW.task_id <> :OLD.task_id OR :NEW.requested <> :OLD.requested
       OR :NEW.created_at <> :OLD.created_at
       OR NOT ((:NEW.status = 'cancelled' AND loanq_may_act_as(:OLD.user_name) = 1)
               OR :NEW.status IN ('assigned', 'partial', 'empty')
               OR (:NEW.status = 'pending' AND loanq_may_act_as(:OLD.user_name) = 1
                   AND :NEW.alive_at <= SYS_EXTRACT_UTC(SYSTIMESTAMP))
               OR (:NEW.status = 'expired'
                   AND (:OLD.alive_at IS NULL OR :OLD.alive_at <= SYS_EXTRACT_UTC(SYSTIMESTAMP) - NUMTODSINTERVAL(60, 'SECOND')))) THEN
        RAISE_APPLICATION_ERROR(-20401, 'loanq: this database account may not change that request (docs/security.md)');
    END IF;
    IF :NEW.status <> 'pending' THEN
        :NEW.served_at := SYS_EXTRACT_UTC(SYSTIMESTAMP);
    END IF;
END;
-- +goose StatementEnd

-- Replaces 00008's row trigger of the same name (see the head of this file
-- for why it is a compound trigger). Whether the account is trusted, its
-- name and the transaction id are read once per statement.
-- +goose StatementBegin
CREATE OR REPLACE TRIGGER loanq_work_assign
FOR INSERT ON loanq_work
COMPOUND TRIGGER
    -- What the rows of this statement were checked against: per request
    -- (keyed by its id) the most work rows it may have, per (task, user) of
    -- a capped task the cap (keyed 'task/user': up to 400 bytes in UTF-8).
    TYPE request_note IS RECORD (id NUMBER(19), most NUMBER(10));
    TYPE request_notes IS TABLE OF request_note INDEX BY VARCHAR2(40);
    TYPE user_note_t IS RECORD (task_id NUMBER(19), user_name VARCHAR2(100 CHAR), cap NUMBER(10));
    TYPE user_notes IS TABLE OF user_note_t INDEX BY VARCHAR2(1000);
    who        VARCHAR2(128 CHAR);
    untrusted  BOOLEAN := FALSE;
    this_tx    VARCHAR2(200);
    requests   request_notes;
    users      user_notes;
    req_note   request_note;
    user_note  user_note_t;
    req_status VARCHAR2(10);
    req_mine   NUMBER;
    cap        NUMBER(10);
    kind       VARCHAR2(10);
    n          NUMBER;
    k          VARCHAR2(1000);

BEFORE STATEMENT IS
BEGIN
    who := SYS_CONTEXT('USERENV', 'SESSION_USER');
    untrusted := loanq_trusted() = 0;
    IF untrusted THEN
        this_tx := DBMS_TRANSACTION.LOCAL_TRANSACTION_ID(TRUE);
    END IF;
END BEFORE STATEMENT;

BEFORE EACH ROW IS
BEGIN
    :NEW.assigned_by := who;
    IF untrusted THEN
        :NEW.assigned_at := SYS_EXTRACT_UTC(SYSTIMESTAMP);
        IF :NEW.disposition IS NOT NULL THEN
            RAISE_APPLICATION_ERROR(-20401, 'loanq: a work row is written active (docs/security.md)');
        END IF;
        BEGIN
            SELECT r.status, CASE WHEN r.status = 'pending' THEN r.requested ELSE r.assigned END,
                   CASE WHEN r.served_tx = this_tx THEN 1 ELSE 0 END
              INTO req_status, req_note.most, req_mine
              FROM loanq_work_request r
             WHERE r.id = :NEW.request_id AND r.task_id = :NEW.task_id AND r.user_name = :NEW.user_name;
        EXCEPTION WHEN NO_DATA_FOUND THEN
            RAISE_APPLICATION_ERROR(-20401, 'loanq: a work row must serve a request of its user in its task (docs/security.md)');
        END;
        IF req_status <> 'pending' AND req_mine = 0 THEN
            RAISE_APPLICATION_ERROR(-20401, 'loanq: a work row may serve only a pending request, or one this transaction served (docs/security.md)');
        END IF;
        req_note.id := :NEW.request_id;
        requests(TO_CHAR(:NEW.request_id)) := req_note;
        SELECT t.max_active, t.key_kind INTO cap, kind FROM loanq_task t WHERE t.id = :NEW.task_id;
        IF loanq_key_fits(kind, :NEW.loan_id) = 0 THEN
            RAISE_APPLICATION_ERROR(-20401, 'loanq: loan key does not fit the task''s key type ' || kind || ' (docs/security.md)');
        END IF;
        IF cap IS NOT NULL THEN
            user_note.task_id := :NEW.task_id;
            user_note.user_name := :NEW.user_name;
            user_note.cap := cap;
            users(TO_CHAR(:NEW.task_id) || '/' || :NEW.user_name) := user_note;
        END IF;
    END IF;
END BEFORE EACH ROW;

AFTER STATEMENT IS
BEGIN
    IF untrusted THEN
        k := requests.FIRST;
        WHILE k IS NOT NULL LOOP
            req_note := requests(k);
            SELECT COUNT(*) INTO n FROM loanq_work w WHERE w.request_id = req_note.id;
            IF n > req_note.most THEN
                RAISE_APPLICATION_ERROR(-20401, 'loanq: request ' || k || ' has all the work rows it asked for (docs/security.md)');
            END IF;
            k := requests.NEXT(k);
        END LOOP;
        k := users.FIRST;
        WHILE k IS NOT NULL LOOP
            user_note := users(k);
            SELECT COUNT(*) INTO n FROM loanq_work w
             WHERE w.user_name = user_note.user_name AND w.task_id = user_note.task_id AND w.disposition IS NULL;
            IF n > user_note.cap THEN
                RAISE_APPLICATION_ERROR(-20401, 'loanq: user ' || user_note.user_name || ' would hold more than the task''s max-active '
                    || TO_CHAR(user_note.cap) || ' (docs/security.md)');
            END IF;
            k := users.NEXT(k);
        END LOOP;
    END IF;
END AFTER STATEMENT;
END loanq_work_assign;
-- +goose StatementEnd

-- 00008's rules, checked before its early answer for the work's own user,
-- plus: finished work is history, an assignment's time and writer are kept,
-- disposed_at is the clock.
-- +goose StatementBegin
CREATE OR REPLACE TRIGGER loanq_work_dispose
BEFORE UPDATE ON loanq_work FOR EACH ROW
DECLARE
    n NUMBER := 0;
BEGIN
    IF loanq_trusted() = 1 THEN
        RETURN;
    END IF;
    IF :OLD.disposition IS NOT NULL THEN
        RAISE_APPLICATION_ERROR(-20401, 'loanq: finished work is history and is not changed (docs/security.md)');
    END IF;
    IF :NEW.assigned_at <> :OLD.assigned_at
       OR (:NEW.assigned_by IS NULL AND :OLD.assigned_by IS NOT NULL)
       OR (:NEW.assigned_by IS NOT NULL AND :OLD.assigned_by IS NULL)
       OR :NEW.assigned_by <> :OLD.assigned_by THEN
        RAISE_APPLICATION_ERROR(-20401, 'loanq: an assignment''s time and writer are not changed (docs/security.md)');
    END IF;
    IF :NEW.user_name <> :OLD.user_name OR :NEW.task_id <> :OLD.task_id
       OR :NEW.loan_id <> :OLD.loan_id OR :NEW.request_id <> :OLD.request_id THEN
        RAISE_APPLICATION_ERROR(-20401, 'loanq: this database account may not end that assignment (docs/security.md)');
    END IF;
    IF NOT (loanq_may_act_as(:OLD.user_name) = 1 AND (:NEW.disposed_by IS NULL OR loanq_may_act_as(:NEW.disposed_by) = 1)) THEN
        IF :NEW.disposition = 'expired' AND :NEW.disposed_by IS NULL THEN
            SELECT COUNT(*) INTO n FROM loanq_task t
            WHERE t.id = :OLD.task_id AND t.max_hold_ms IS NOT NULL
              AND :OLD.assigned_at <= SYS_EXTRACT_UTC(SYSTIMESTAMP) - NUMTODSINTERVAL(t.max_hold_ms / 1000, 'SECOND');
        END IF;
        IF n = 0 THEN
            RAISE_APPLICATION_ERROR(-20401, 'loanq: this database account may not end that assignment (docs/security.md)');
        END IF;
    END IF;
    IF :NEW.disposition IS NOT NULL THEN
        :NEW.disposed_at := SYS_EXTRACT_UTC(SYSTIMESTAMP);
    END IF;
END;
-- +goose StatementEnd

-- MAX: a task that does not exist gives no kind (any non-empty key fits)
-- and the foreign key refuses the row, rather than ORA-01403 from here.
-- +goose StatementBegin
CREATE OR REPLACE TRIGGER loanq_pool_check
BEFORE INSERT OR UPDATE ON loanq_pool FOR EACH ROW
DECLARE
    kind VARCHAR2(10);
BEGIN
    IF loanq_trusted() = 1 THEN
        RETURN;
    END IF;
    SELECT MAX(t.key_kind) INTO kind FROM loanq_task t WHERE t.id = :NEW.task_id;
    IF loanq_key_fits(kind, :NEW.loan_id) = 0 THEN
        RAISE_APPLICATION_ERROR(-20401, 'loanq: a pool candidate''s key must fit the task''s key type (docs/security.md)');
    END IF;
    :NEW.filled_at := LEAST(:NEW.filled_at, SYS_EXTRACT_UTC(SYSTIMESTAMP));
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE TRIGGER loanq_task_lease
BEFORE UPDATE OF lease_owner, lease_token, lease_expires_at ON loanq_task FOR EACH ROW
BEGIN
    IF loanq_trusted() = 1 THEN
        RETURN;
    END IF;
    IF :NEW.lease_token < :OLD.lease_token THEN
        RAISE_APPLICATION_ERROR(-20401, 'loanq: a task''s lease token never goes down (docs/security.md)');
    END IF;
    IF :NEW.lease_expires_at > SYS_EXTRACT_UTC(SYSTIMESTAMP) + NUMTODSINTERVAL((:NEW.lease_ttl_ms + 60000) / 1000, 'SECOND') THEN
        RAISE_APPLICATION_ERROR(-20401, 'loanq: a task''s lease lasts at most its lease-ttl (docs/security.md)');
    END IF;
END;
-- +goose StatementEnd

-- Named locks, for every account, trusted or not.
-- +goose StatementBegin
CREATE OR REPLACE TRIGGER loanq_lock_create
BEFORE INSERT ON loanq_lock FOR EACH ROW
BEGIN
    IF :NEW.holder IS NOT NULL OR :NEW.token <> 0 OR :NEW.taken_at IS NOT NULL OR :NEW.expires_at IS NOT NULL THEN
        RAISE_APPLICATION_ERROR(-20401, 'loanq: a named lock is created free, with token 0 (docs/security.md)');
    END IF;
    :NEW.taken_by := NULL;
END;
-- +goose StatementEnd

-- A held lock without an expiry (only a renew written by hand leaves one)
-- counts as expired, as on PostgreSQL and MySQL: nobody holds a lock for
-- ever. taken_by NULL: taken before this migration, renewed by anyone.
-- +goose StatementBegin
CREATE OR REPLACE TRIGGER loanq_lock_change
BEFORE UPDATE ON loanq_lock FOR EACH ROW
DECLARE
    now_ts TIMESTAMP(6) := SYS_EXTRACT_UTC(SYSTIMESTAMP);
    who    VARCHAR2(128 CHAR) := SYS_CONTEXT('USERENV', 'SESSION_USER');
    FUNCTION same_text(a IN VARCHAR2, b IN VARCHAR2) RETURN BOOLEAN IS
    BEGIN
        RETURN (a IS NULL AND b IS NULL) OR (a IS NOT NULL AND b IS NOT NULL AND a = b);
    END same_text;
    FUNCTION same_time(a IN TIMESTAMP, b IN TIMESTAMP) RETURN BOOLEAN IS
    BEGIN
        RETURN (a IS NULL AND b IS NULL) OR (a IS NOT NULL AND b IS NOT NULL AND a = b);
    END same_time;
BEGIN
    IF :NEW.name <> :OLD.name OR :NEW.token < :OLD.token THEN
        RAISE_APPLICATION_ERROR(-20401, 'loanq: a named lock keeps its name, and its token never goes down (docs/security.md)');
    END IF;
    IF :NEW.expires_at > now_ts + NUMTODSINTERVAL(1441, 'MINUTE') THEN
        RAISE_APPLICATION_ERROR(-20401, 'loanq: a named lock is held at most 24 h at a time (docs/security.md)');
    END IF;
    IF :NEW.token = :OLD.token + 1 AND :NEW.holder IS NOT NULL THEN
        IF :OLD.holder IS NOT NULL AND :OLD.expires_at > now_ts THEN
            RAISE_APPLICATION_ERROR(-20401, 'loanq: named lock ' || :OLD.name || ' is held by ' || :OLD.holder
                || ': it is taken only once free or expired (docs/security.md)');
        END IF;
        :NEW.taken_by := who;
    ELSIF :NEW.token = :OLD.token AND same_text(:NEW.holder, :OLD.holder) AND same_time(:NEW.taken_at, :OLD.taken_at)
          AND same_time(:NEW.expires_at, :OLD.expires_at) AND same_text(:NEW.taken_by, :OLD.taken_by) THEN
        NULL; -- nothing changes
    ELSIF :NEW.token = :OLD.token AND :OLD.holder IS NOT NULL
          AND (:NEW.holder IS NULL OR :NEW.holder = :OLD.holder) AND same_text(:NEW.taken_by, :OLD.taken_by)
          AND (:OLD.taken_by IS NULL OR :OLD.taken_by = who) THEN
        NULL; -- the account that took it renews or releases it
    ELSE
        RAISE_APPLICATION_ERROR(-20401, 'loanq: named lock ' || :OLD.name
            || ' is renewed or released only by its holder, taken only with the next token (docs/security.md)');
    END IF;
END;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TRIGGER loanq_lock_change
-- +goose StatementEnd

-- +goose StatementBegin
DROP TRIGGER loanq_lock_create
-- +goose StatementEnd

-- +goose StatementBegin
DROP TRIGGER loanq_task_lease
-- +goose StatementEnd

-- +goose StatementBegin
DROP TRIGGER loanq_pool_check
-- +goose StatementEnd

-- 00008's triggers and 00016's, as they were.
-- +goose StatementBegin
CREATE OR REPLACE TRIGGER loanq_work_dispose
BEFORE UPDATE ON loanq_work FOR EACH ROW
DECLARE
    n NUMBER := 0;
BEGIN
    IF loanq_trusted() = 1 THEN
        RETURN;
    END IF;
    IF :NEW.user_name <> :OLD.user_name OR :NEW.task_id <> :OLD.task_id
       OR :NEW.loan_id <> :OLD.loan_id OR :NEW.request_id <> :OLD.request_id THEN
        RAISE_APPLICATION_ERROR(-20401, 'loanq: this database account may not end that assignment (docs/security.md)');
    END IF;
    IF loanq_may_act_as(:OLD.user_name) = 1 AND (:NEW.disposed_by IS NULL OR loanq_may_act_as(:NEW.disposed_by) = 1) THEN
        RETURN;
    END IF;
    IF :NEW.disposition = 'expired' AND :NEW.disposed_by IS NULL THEN
        SELECT COUNT(*) INTO n FROM loanq_task t
        WHERE t.id = :OLD.task_id AND t.max_hold_ms IS NOT NULL
          AND :OLD.assigned_at <= SYS_EXTRACT_UTC(SYSTIMESTAMP) - NUMTODSINTERVAL(t.max_hold_ms / 1000, 'SECOND');
    END IF;
    IF n = 0 THEN
        RAISE_APPLICATION_ERROR(-20401, 'loanq: this database account may not end that assignment (docs/security.md)');
    END IF;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE TRIGGER loanq_work_assign
BEFORE INSERT ON loanq_work FOR EACH ROW
DECLARE
    n NUMBER;
BEGIN
    IF loanq_trusted() = 1 THEN
        RETURN;
    END IF;
    SELECT COUNT(*) INTO n FROM loanq_work_request r
    WHERE r.id = :NEW.request_id AND r.task_id = :NEW.task_id AND r.user_name = :NEW.user_name;
    IF :NEW.disposition IS NOT NULL OR n = 0 THEN
        RAISE_APPLICATION_ERROR(-20401, 'loanq: a work row must serve a request of its user in its task (docs/security.md)');
    END IF;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE TRIGGER loanq_work_request_finish
BEFORE UPDATE ON loanq_work_request FOR EACH ROW
BEGIN
    IF loanq_trusted() = 1 THEN
        RETURN;
    END IF;
    IF :NEW.user_name <> :OLD.user_name OR :NEW.task_id <> :OLD.task_id OR :NEW.requested <> :OLD.requested
       OR NOT ((:NEW.status = 'cancelled' AND loanq_may_act_as(:OLD.user_name) = 1)
               OR (:OLD.status = 'pending' AND :NEW.status IN ('assigned', 'partial', 'empty'))
               OR (:OLD.status = 'pending' AND :NEW.status = 'pending' AND loanq_may_act_as(:OLD.user_name) = 1
                   AND :NEW.alive_at <= SYS_EXTRACT_UTC(SYSTIMESTAMP))
               OR (:OLD.status = 'pending' AND :NEW.status = 'expired'
                   AND (:OLD.alive_at IS NULL OR :OLD.alive_at <= SYS_EXTRACT_UTC(SYSTIMESTAMP) - NUMTODSINTERVAL(60, 'SECOND')))) THEN
        RAISE_APPLICATION_ERROR(-20401, 'loanq: this database account may not change that request (docs/security.md)');
    END IF;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE TRIGGER loanq_work_request_log
BEFORE INSERT ON loanq_work_request FOR EACH ROW
BEGIN
    IF loanq_trusted() = 1 THEN
        RETURN;
    END IF;
    IF :NEW.status <> 'pending' OR :NEW.assigned <> 0 OR loanq_may_act_as(:NEW.user_name) = 0 THEN
        RAISE_APPLICATION_ERROR(-20401, 'loanq: this database account may not log a request for that user (docs/security.md)');
    END IF;
END;
-- +goose StatementEnd

-- +goose StatementBegin
DROP FUNCTION loanq_key_fits
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_lock DROP (taken_by)
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_work_request DROP (served_tx)
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_work DROP (assigned_by)
-- +goose StatementEnd

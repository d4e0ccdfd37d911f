-- The bench's item table and its claim procedure leave the schema: `loanq
-- bench` now creates them for a run and drops them after
-- (bench/dialects.go), so a production schema holds loanq's own objects
-- only. This drops the copies that 00002 created in databases migrated
-- before; in a new database 00002 creates them and this drops them in the
-- same `migrate up`. Each drop ignores only "does not exist" (ORA-04043,
-- ORA-00942; Oracle has no DROP … IF EXISTS before 23ai): a bench run may
-- have dropped them already. Same rules as 00001_schema.sql: every statement
-- is wrapped in StatementBegin/End, the PL/SQL blocks keep their END;.
--
-- Down recreates nothing: the bench makes its objects when it needs them.

-- +goose Up
-- +goose StatementBegin
BEGIN
    EXECUTE IMMEDIATE 'DROP PROCEDURE loanq_bench_claim';
EXCEPTION WHEN OTHERS THEN
    IF SQLCODE != -4043 THEN RAISE; END IF;
END;
-- +goose StatementEnd

-- +goose StatementBegin
BEGIN
    EXECUTE IMMEDIATE 'DROP TABLE loanq_bench_item PURGE';
EXCEPTION WHEN OTHERS THEN
    IF SQLCODE != -942 THEN RAISE; END IF;
END;
-- +goose StatementEnd

-- +goose Down

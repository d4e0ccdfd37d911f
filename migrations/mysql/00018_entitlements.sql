-- Entitlements and four eyes: the tables and rules of PostgreSQL's 00018
-- (docs/governance.md). The checks are triggers of their own, after 00017's
-- on the same tables (FOLLOWS), written out as 00017's are (no stored
-- function called per row). They skip trusted accounts; the engine checks
-- the same before it writes (dispatch/governance.go).

-- +goose Up
CREATE TABLE loanq_group (
    group_name VARCHAR(100) NOT NULL,
    user_name  VARCHAR(100) NOT NULL,
    source     VARCHAR(10)  NOT NULL DEFAULT 'admin',
    added_by   VARCHAR(128) NOT NULL,
    added_at   DATETIME(6)  NOT NULL,
    CONSTRAINT loanq_group_pk PRIMARY KEY (group_name, user_name),
    CONSTRAINT loanq_group_source_ck CHECK (source IN ('admin', 'proxy')),
    INDEX loanq_group_user_ix (user_name, group_name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE loanq_task_allow (
    task_id   BIGINT       NOT NULL,
    is_group  SMALLINT     NOT NULL,
    principal VARCHAR(100) NOT NULL,
    CONSTRAINT loanq_task_allow_pk PRIMARY KEY (task_id, is_group, principal),
    CONSTRAINT loanq_task_allow_kind_ck CHECK (is_group IN (0, 1)),
    CONSTRAINT loanq_task_allow_task_fk FOREIGN KEY (task_id) REFERENCES loanq_task (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE loanq_task_not_worked_in (
    task_id       BIGINT NOT NULL,
    other_task_id BIGINT NOT NULL,
    CONSTRAINT loanq_task_not_worked_in_pk PRIMARY KEY (task_id, other_task_id),
    CONSTRAINT loanq_task_not_worked_in_ck CHECK (task_id <> other_task_id),
    CONSTRAINT loanq_task_not_worked_in_task_fk FOREIGN KEY (task_id) REFERENCES loanq_task (id),
    CONSTRAINT loanq_task_not_worked_in_other_fk FOREIGN KEY (other_task_id) REFERENCES loanq_task (id),
    INDEX loanq_task_not_worked_in_ix (other_task_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose StatementBegin
CREATE TRIGGER loanq_work_request_governance BEFORE INSERT ON loanq_work_request FOR EACH ROW FOLLOWS loanq_work_request_log
BEGIN
    DECLARE msg VARCHAR(255);
    -- The task's rules first: a task without any (most, and the bench's)
    -- pays two index probes and no stored-function call.
    IF EXISTS (SELECT 1 FROM loanq_task_allow a WHERE a.task_id = NEW.task_id)
       AND NOT loanq_is_trusted()
       AND NOT EXISTS (SELECT 1 FROM loanq_task_allow a WHERE a.task_id = NEW.task_id AND a.is_group = 0 AND a.principal = NEW.user_name)
       AND NOT EXISTS (SELECT 1 FROM loanq_task_allow a JOIN loanq_group g ON g.group_name = a.principal
                       WHERE a.task_id = NEW.task_id AND a.is_group = 1 AND g.user_name = NEW.user_name) THEN
        SET msg = LEFT(CONCAT('loanq: user ', NEW.user_name, ' is not allowed to work task ',
                              (SELECT t.name FROM loanq_task t WHERE t.id = NEW.task_id), ' (docs/governance.md)'), 255);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
    END IF;
END
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER loanq_work_governance BEFORE INSERT ON loanq_work FOR EACH ROW FOLLOWS loanq_work_assign
BEGIN
    DECLARE msg VARCHAR(255);
    IF (EXISTS (SELECT 1 FROM loanq_task_allow a WHERE a.task_id = NEW.task_id)
        OR EXISTS (SELECT 1 FROM loanq_task_not_worked_in f WHERE f.task_id = NEW.task_id))
       AND NOT loanq_is_trusted() THEN
        IF EXISTS (SELECT 1 FROM loanq_task_allow a WHERE a.task_id = NEW.task_id)
           AND NOT EXISTS (SELECT 1 FROM loanq_task_allow a WHERE a.task_id = NEW.task_id AND a.is_group = 0 AND a.principal = NEW.user_name)
           AND NOT EXISTS (SELECT 1 FROM loanq_task_allow a JOIN loanq_group g ON g.group_name = a.principal
                           WHERE a.task_id = NEW.task_id AND a.is_group = 1 AND g.user_name = NEW.user_name) THEN
            SET msg = LEFT(CONCAT('loanq: user ', NEW.user_name, ' is not allowed to work task ',
                                  (SELECT t.name FROM loanq_task t WHERE t.id = NEW.task_id), ' (docs/governance.md)'), 255);
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
        END IF;
        IF EXISTS (SELECT 1 FROM loanq_task_not_worked_in f JOIN loanq_work w ON w.task_id = f.other_task_id
                   WHERE f.task_id = NEW.task_id AND w.loan_id = NEW.loan_id AND w.user_name = NEW.user_name) THEN
            SET msg = LEFT(CONCAT('loanq: four eyes: user ', NEW.user_name, ' worked loan ', NEW.loan_id,
                                  ' in a task that this task names with --not-worked-in (docs/governance.md)'), 255);
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
        END IF;
    END IF;
END
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER loanq_work_governance;
DROP TRIGGER loanq_work_request_governance;
DROP TABLE loanq_task_not_worked_in;
DROP TABLE loanq_task_allow;
DROP TABLE loanq_group;

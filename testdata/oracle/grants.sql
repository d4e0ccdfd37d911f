-- loanq grants for Oracle, every role (go test ./drivers/oracle -run Golden -update).

-- role admin
-- loanq grants: role admin for account LOANQ_ADMIN (Oracle); run as the owner of loanq's tables
-- revoke first: the account keeps nothing an earlier role gave it on loanq's objects or on the
-- source tables named here (also what was granted there for other uses: grant that again after);
-- Oracle refuses to REVOKE what was never granted, so the block revokes what ALL_TAB_PRIVS and
-- ALL_COL_PRIVS list as granted by this account (REVOKE ALL also removes column privileges)
BEGIN
  FOR o IN (SELECT DISTINCT table_schema, table_name FROM (
      SELECT table_schema, table_name FROM all_tab_privs WHERE grantor = USER AND grantee = 'LOANQ_ADMIN'
      UNION SELECT table_schema, table_name FROM all_col_privs WHERE grantor = USER AND grantee = 'LOANQ_ADMIN')
    WHERE (table_schema, table_name) IN ((USER, 'LOANQ_SCHEMA_VERSION'), (USER, 'LOANQ_ACCOUNT'), (USER, 'LOANQ_TASK'),
    (USER, 'LOANQ_WORK_REQUEST'), (USER, 'LOANQ_WORK'), (USER, 'LOANQ_QUERY_RUN'),
    (USER, 'LOANQ_TASK_USER'), (USER, 'LOANQ_POOL'), (USER, 'LOANQ_LOCK'),
    (USER, 'LOANQ_API_TOKEN'), (USER, 'LOANQ_SESSION'), (USER, 'LOANQ_GROUP'),
    (USER, 'LOANQ_TASK_ALLOW'), (USER, 'LOANQ_TASK_NOT_WORKED_IN'), (USER, 'LOANQ_HISTORY'),
    (USER, 'LOANQ_ROWS_LOCKED'), (USER, 'LOANQ_MAY_ACT_AS'), (USER, 'LOANQ_LOCK_ROWS'),
    (USER, 'ACC_LOAN'))) LOOP
    EXECUTE IMMEDIATE 'REVOKE ALL ON "' || o.table_schema || '"."' || o.table_name || '" FROM LOANQ_ADMIN';
  END LOOP;
END;
-- every command checks the schema version first
GRANT SELECT ON loanq_schema_version TO LOANQ_ADMIN
-- who may act as whom (read by the identity check)
GRANT SELECT ON loanq_account TO LOANQ_ADMIN
-- define, change and delete tasks
GRANT SELECT, INSERT, UPDATE, DELETE ON loanq_task TO LOANQ_ADMIN
-- task delete and prune remove history
GRANT SELECT, INSERT, UPDATE, DELETE ON loanq_work_request TO LOANQ_ADMIN
-- task delete and prune remove history
GRANT SELECT, INSERT, UPDATE, DELETE ON loanq_work TO LOANQ_ADMIN
-- task delete and prune remove history
GRANT SELECT, INSERT, DELETE ON loanq_query_run TO LOANQ_ADMIN
-- task delete removes the cap's lock rows
GRANT SELECT, INSERT, UPDATE, DELETE ON loanq_task_user TO LOANQ_ADMIN
-- candidate pools
GRANT SELECT, INSERT, UPDATE, DELETE ON loanq_pool TO LOANQ_ADMIN
-- lock run: named leases
GRANT SELECT, INSERT, UPDATE ON loanq_lock TO LOANQ_ADMIN
-- token create, list and revoke (serve --api)
GRANT SELECT, INSERT, UPDATE ON loanq_api_token TO LOANQ_ADMIN
-- group add, remove and list
GRANT SELECT, INSERT, DELETE ON loanq_group TO LOANQ_ADMIN
-- task create|update --allow, --allow-clear; task delete
GRANT SELECT, INSERT, DELETE ON loanq_task_allow TO LOANQ_ADMIN
-- task create|update --not-worked-in; task delete
GRANT SELECT, INSERT, DELETE ON loanq_task_not_worked_in TO LOANQ_ADMIN
-- history export; task delete and prune remove events with their work rows
GRANT SELECT, DELETE ON loanq_history TO LOANQ_ADMIN
-- who the account may act as (docs/security.md)
GRANT EXECUTE ON loanq_may_act_as TO LOANQ_ADMIN
MERGE INTO loanq_account a
USING (SELECT 'LOANQ_ADMIN' AS account, NULL AS user_name, 1 AS trusted FROM dual) s ON (a.account = s.account)
WHEN MATCHED THEN UPDATE SET a.user_name = s.user_name, a.trusted = s.trusted,
    a.granted_by = SYS_CONTEXT('USERENV', 'SESSION_USER'), a.granted_at = SYS_EXTRACT_UTC(SYSTIMESTAMP)
WHEN NOT MATCHED THEN INSERT (account, user_name, trusted, granted_by, granted_at)
    VALUES (s.account, s.user_name, s.trusted, SYS_CONTEXT('USERENV', 'SESSION_USER'), SYS_EXTRACT_UTC(SYSTIMESTAMP))
-- strategy rows: the claim calls the owner's cursor procedure and reads the keys it locked
GRANT EXECUTE ON loanq_lock_rows TO LOANQ_ADMIN
GRANT SELECT ON loanq_rows_locked TO LOANQ_ADMIN
-- source acc_loan (key loan_no): SELECT lets Oracle lock rows (FOR UPDATE SKIP LOCKED); READ would not
GRANT SELECT ON acc_loan TO LOANQ_ADMIN

-- role processor
-- loanq grants: role processor for account LOANQ_PROCESSOR (Oracle); run as the owner of loanq's tables
-- revoke first: the account keeps nothing an earlier role gave it on loanq's objects or on the
-- source tables named here (also what was granted there for other uses: grant that again after);
-- Oracle refuses to REVOKE what was never granted, so the block revokes what ALL_TAB_PRIVS and
-- ALL_COL_PRIVS list as granted by this account (REVOKE ALL also removes column privileges)
BEGIN
  FOR o IN (SELECT DISTINCT table_schema, table_name FROM (
      SELECT table_schema, table_name FROM all_tab_privs WHERE grantor = USER AND grantee = 'LOANQ_PROCESSOR'
      UNION SELECT table_schema, table_name FROM all_col_privs WHERE grantor = USER AND grantee = 'LOANQ_PROCESSOR')
    WHERE (table_schema, table_name) IN ((USER, 'LOANQ_SCHEMA_VERSION'), (USER, 'LOANQ_ACCOUNT'), (USER, 'LOANQ_TASK'),
    (USER, 'LOANQ_WORK_REQUEST'), (USER, 'LOANQ_WORK'), (USER, 'LOANQ_QUERY_RUN'),
    (USER, 'LOANQ_TASK_USER'), (USER, 'LOANQ_POOL'), (USER, 'LOANQ_LOCK'),
    (USER, 'LOANQ_API_TOKEN'), (USER, 'LOANQ_SESSION'), (USER, 'LOANQ_GROUP'),
    (USER, 'LOANQ_TASK_ALLOW'), (USER, 'LOANQ_TASK_NOT_WORKED_IN'), (USER, 'LOANQ_HISTORY'),
    (USER, 'LOANQ_ROWS_LOCKED'), (USER, 'LOANQ_MAY_ACT_AS'), (USER, 'LOANQ_LOCK_ROWS'),
    (USER, 'ACC_LOAN'))) LOOP
    EXECUTE IMMEDIATE 'REVOKE ALL ON "' || o.table_schema || '"."' || o.table_name || '" FROM LOANQ_PROCESSOR';
  END LOOP;
END;
-- every command checks the schema version first
GRANT SELECT ON loanq_schema_version TO LOANQ_PROCESSOR
-- who may act as whom (read by the identity check)
GRANT SELECT ON loanq_account TO LOANQ_PROCESSOR
-- read tasks; take the task lock or lease (not change a definition)
GRANT SELECT, UPDATE (lease_owner, lease_token, lease_expires_at) ON loanq_task TO LOANQ_PROCESSOR
-- log, serve and cancel requests; show a waiter's sign of life, end abandoned ones
GRANT SELECT, INSERT, UPDATE (assigned, status, served_at, pooled, alive_at) ON loanq_work_request TO LOANQ_PROCESSOR
-- assign loans; dispose of them
GRANT SELECT, INSERT, UPDATE (disposition, disposed_at, return_at, disposed_by, reason, note) ON loanq_work TO LOANQ_PROCESSOR
-- log criteria-query runs
GRANT SELECT, INSERT ON loanq_query_run TO LOANQ_PROCESSOR
-- the per-user cap's lock rows (strategy rows); UPDATE only to lock them
GRANT SELECT, INSERT, UPDATE (task_id) ON loanq_task_user TO LOANQ_PROCESSOR
-- candidate pools: claim, drop and refill candidates (nothing in a pool is trusted: each is rechecked by key)
GRANT SELECT, INSERT, UPDATE, DELETE ON loanq_pool TO LOANQ_PROCESSOR
-- who is in which group (allow lists name groups)
GRANT SELECT ON loanq_group TO LOANQ_PROCESSOR
-- who may work which task
GRANT SELECT ON loanq_task_allow TO LOANQ_PROCESSOR
-- four eyes: the tasks whose workers of a loan may not work it in another
GRANT SELECT ON loanq_task_not_worked_in TO LOANQ_PROCESSOR
-- lock list
GRANT SELECT ON loanq_lock TO LOANQ_PROCESSOR
-- who the account may act as (docs/security.md)
GRANT EXECUTE ON loanq_may_act_as TO LOANQ_PROCESSOR
MERGE INTO loanq_account a
USING (SELECT 'LOANQ_PROCESSOR' AS account, 'ana' AS user_name, 0 AS trusted FROM dual) s ON (a.account = s.account)
WHEN MATCHED THEN UPDATE SET a.user_name = s.user_name, a.trusted = s.trusted,
    a.granted_by = SYS_CONTEXT('USERENV', 'SESSION_USER'), a.granted_at = SYS_EXTRACT_UTC(SYSTIMESTAMP)
WHEN NOT MATCHED THEN INSERT (account, user_name, trusted, granted_by, granted_at)
    VALUES (s.account, s.user_name, s.trusted, SYS_CONTEXT('USERENV', 'SESSION_USER'), SYS_EXTRACT_UTC(SYSTIMESTAMP))
-- strategy rows: the claim calls the owner's cursor procedure and reads the keys it locked
GRANT EXECUTE ON loanq_lock_rows TO LOANQ_PROCESSOR
GRANT SELECT ON loanq_rows_locked TO LOANQ_PROCESSOR
-- source acc_loan (key loan_no): SELECT lets Oracle lock rows (FOR UPDATE SKIP LOCKED); READ would not
GRANT SELECT ON acc_loan TO LOANQ_PROCESSOR

-- role supervisor
-- loanq grants: role supervisor for account LOANQ_SUPERVISOR (Oracle); run as the owner of loanq's tables
-- revoke first: the account keeps nothing an earlier role gave it on loanq's objects or on the
-- source tables named here (also what was granted there for other uses: grant that again after);
-- Oracle refuses to REVOKE what was never granted, so the block revokes what ALL_TAB_PRIVS and
-- ALL_COL_PRIVS list as granted by this account (REVOKE ALL also removes column privileges)
BEGIN
  FOR o IN (SELECT DISTINCT table_schema, table_name FROM (
      SELECT table_schema, table_name FROM all_tab_privs WHERE grantor = USER AND grantee = 'LOANQ_SUPERVISOR'
      UNION SELECT table_schema, table_name FROM all_col_privs WHERE grantor = USER AND grantee = 'LOANQ_SUPERVISOR')
    WHERE (table_schema, table_name) IN ((USER, 'LOANQ_SCHEMA_VERSION'), (USER, 'LOANQ_ACCOUNT'), (USER, 'LOANQ_TASK'),
    (USER, 'LOANQ_WORK_REQUEST'), (USER, 'LOANQ_WORK'), (USER, 'LOANQ_QUERY_RUN'),
    (USER, 'LOANQ_TASK_USER'), (USER, 'LOANQ_POOL'), (USER, 'LOANQ_LOCK'),
    (USER, 'LOANQ_API_TOKEN'), (USER, 'LOANQ_SESSION'), (USER, 'LOANQ_GROUP'),
    (USER, 'LOANQ_TASK_ALLOW'), (USER, 'LOANQ_TASK_NOT_WORKED_IN'), (USER, 'LOANQ_HISTORY'),
    (USER, 'LOANQ_ROWS_LOCKED'), (USER, 'LOANQ_MAY_ACT_AS'), (USER, 'LOANQ_LOCK_ROWS'),
    (USER, 'ACC_LOAN'))) LOOP
    EXECUTE IMMEDIATE 'REVOKE ALL ON "' || o.table_schema || '"."' || o.table_name || '" FROM LOANQ_SUPERVISOR';
  END LOOP;
END;
-- every command checks the schema version first
GRANT SELECT ON loanq_schema_version TO LOANQ_SUPERVISOR
-- who may act as whom (read by the identity check)
GRANT SELECT ON loanq_account TO LOANQ_SUPERVISOR
-- read tasks; take the task lock or lease (not change a definition)
GRANT SELECT, UPDATE (lease_owner, lease_token, lease_expires_at) ON loanq_task TO LOANQ_SUPERVISOR
-- log, serve and cancel requests; show a waiter's sign of life, end abandoned ones
GRANT SELECT, INSERT, UPDATE (assigned, status, served_at, pooled, alive_at) ON loanq_work_request TO LOANQ_SUPERVISOR
-- assign loans; dispose of them
GRANT SELECT, INSERT, UPDATE (disposition, disposed_at, return_at, disposed_by, reason, note) ON loanq_work TO LOANQ_SUPERVISOR
-- log criteria-query runs
GRANT SELECT, INSERT ON loanq_query_run TO LOANQ_SUPERVISOR
-- the per-user cap's lock rows (strategy rows); UPDATE only to lock them
GRANT SELECT, INSERT, UPDATE (task_id) ON loanq_task_user TO LOANQ_SUPERVISOR
-- candidate pools: claim, drop and refill candidates (nothing in a pool is trusted: each is rechecked by key)
GRANT SELECT, INSERT, UPDATE, DELETE ON loanq_pool TO LOANQ_SUPERVISOR
-- who is in which group (allow lists name groups)
GRANT SELECT ON loanq_group TO LOANQ_SUPERVISOR
-- who may work which task
GRANT SELECT ON loanq_task_allow TO LOANQ_SUPERVISOR
-- four eyes: the tasks whose workers of a loan may not work it in another
GRANT SELECT ON loanq_task_not_worked_in TO LOANQ_SUPERVISOR
-- lock run: named leases (MySQL names the key column in its insert-or-keep)
GRANT SELECT, INSERT, UPDATE (name, holder, token, taken_at, expires_at) ON loanq_lock TO LOANQ_SUPERVISOR
-- history export: the stream of assignments and dispositions
GRANT SELECT ON loanq_history TO LOANQ_SUPERVISOR
-- who the account may act as (docs/security.md)
GRANT EXECUTE ON loanq_may_act_as TO LOANQ_SUPERVISOR
MERGE INTO loanq_account a
USING (SELECT 'LOANQ_SUPERVISOR' AS account, NULL AS user_name, 1 AS trusted FROM dual) s ON (a.account = s.account)
WHEN MATCHED THEN UPDATE SET a.user_name = s.user_name, a.trusted = s.trusted,
    a.granted_by = SYS_CONTEXT('USERENV', 'SESSION_USER'), a.granted_at = SYS_EXTRACT_UTC(SYSTIMESTAMP)
WHEN NOT MATCHED THEN INSERT (account, user_name, trusted, granted_by, granted_at)
    VALUES (s.account, s.user_name, s.trusted, SYS_CONTEXT('USERENV', 'SESSION_USER'), SYS_EXTRACT_UTC(SYSTIMESTAMP))
-- strategy rows: the claim calls the owner's cursor procedure and reads the keys it locked
GRANT EXECUTE ON loanq_lock_rows TO LOANQ_SUPERVISOR
GRANT SELECT ON loanq_rows_locked TO LOANQ_SUPERVISOR
-- source acc_loan (key loan_no): SELECT lets Oracle lock rows (FOR UPDATE SKIP LOCKED); READ would not
GRANT SELECT ON acc_loan TO LOANQ_SUPERVISOR

-- role dashboard
-- loanq grants: role dashboard for account LOANQ_DASHBOARD (Oracle); run as the owner of loanq's tables
-- revoke first: the account keeps nothing an earlier role gave it on loanq's objects or on the
-- source tables named here (also what was granted there for other uses: grant that again after);
-- Oracle refuses to REVOKE what was never granted, so the block revokes what ALL_TAB_PRIVS and
-- ALL_COL_PRIVS list as granted by this account (REVOKE ALL also removes column privileges)
BEGIN
  FOR o IN (SELECT DISTINCT table_schema, table_name FROM (
      SELECT table_schema, table_name FROM all_tab_privs WHERE grantor = USER AND grantee = 'LOANQ_DASHBOARD'
      UNION SELECT table_schema, table_name FROM all_col_privs WHERE grantor = USER AND grantee = 'LOANQ_DASHBOARD')
    WHERE (table_schema, table_name) IN ((USER, 'LOANQ_SCHEMA_VERSION'), (USER, 'LOANQ_ACCOUNT'), (USER, 'LOANQ_TASK'),
    (USER, 'LOANQ_WORK_REQUEST'), (USER, 'LOANQ_WORK'), (USER, 'LOANQ_QUERY_RUN'),
    (USER, 'LOANQ_TASK_USER'), (USER, 'LOANQ_POOL'), (USER, 'LOANQ_LOCK'),
    (USER, 'LOANQ_API_TOKEN'), (USER, 'LOANQ_SESSION'), (USER, 'LOANQ_GROUP'),
    (USER, 'LOANQ_TASK_ALLOW'), (USER, 'LOANQ_TASK_NOT_WORKED_IN'), (USER, 'LOANQ_HISTORY'),
    (USER, 'LOANQ_ROWS_LOCKED'), (USER, 'LOANQ_MAY_ACT_AS'), (USER, 'LOANQ_LOCK_ROWS'),
    (USER, 'ACC_LOAN'))) LOOP
    EXECUTE IMMEDIATE 'REVOKE ALL ON "' || o.table_schema || '"."' || o.table_name || '" FROM LOANQ_DASHBOARD';
  END LOOP;
END;
-- every command checks the schema version first
GRANT SELECT ON loanq_schema_version TO LOANQ_DASHBOARD
-- who may act as whom (read by the identity check)
GRANT SELECT ON loanq_account TO LOANQ_DASHBOARD
-- tasks
GRANT SELECT ON loanq_task TO LOANQ_DASHBOARD
-- pending requests
GRANT SELECT ON loanq_work_request TO LOANQ_DASHBOARD
-- active work and dispositions
GRANT SELECT ON loanq_work TO LOANQ_DASHBOARD
-- criteria-query runs
GRANT SELECT ON loanq_query_run TO LOANQ_DASHBOARD
-- lock list
GRANT SELECT ON loanq_lock TO LOANQ_DASHBOARD
-- candidate pools
GRANT SELECT ON loanq_pool TO LOANQ_DASHBOARD
-- who may work each task
GRANT SELECT ON loanq_task_allow TO LOANQ_DASHBOARD
-- who is in which group
GRANT SELECT ON loanq_group TO LOANQ_DASHBOARD
-- each task's four-eyes rule
GRANT SELECT ON loanq_task_not_worked_in TO LOANQ_DASHBOARD
-- history export: the stream of assignments and dispositions
GRANT SELECT ON loanq_history TO LOANQ_DASHBOARD
-- who the account may act as (docs/security.md)
GRANT EXECUTE ON loanq_may_act_as TO LOANQ_DASHBOARD
DELETE FROM loanq_account WHERE account = 'LOANQ_DASHBOARD'
-- source acc_loan: serve's backlog count reads it (--backlog-every); READ, unlike SELECT, locks no row
GRANT READ ON acc_loan TO LOANQ_DASHBOARD

-- role refresher
-- loanq grants: role refresher for account LOANQ_REFRESHER (Oracle); run as the owner of loanq's tables
-- revoke first: the account keeps nothing an earlier role gave it on loanq's objects or on the
-- source tables named here (also what was granted there for other uses: grant that again after);
-- Oracle refuses to REVOKE what was never granted, so the block revokes what ALL_TAB_PRIVS and
-- ALL_COL_PRIVS list as granted by this account (REVOKE ALL also removes column privileges)
BEGIN
  FOR o IN (SELECT DISTINCT table_schema, table_name FROM (
      SELECT table_schema, table_name FROM all_tab_privs WHERE grantor = USER AND grantee = 'LOANQ_REFRESHER'
      UNION SELECT table_schema, table_name FROM all_col_privs WHERE grantor = USER AND grantee = 'LOANQ_REFRESHER')
    WHERE (table_schema, table_name) IN ((USER, 'LOANQ_SCHEMA_VERSION'), (USER, 'LOANQ_ACCOUNT'), (USER, 'LOANQ_TASK'),
    (USER, 'LOANQ_WORK_REQUEST'), (USER, 'LOANQ_WORK'), (USER, 'LOANQ_QUERY_RUN'),
    (USER, 'LOANQ_TASK_USER'), (USER, 'LOANQ_POOL'), (USER, 'LOANQ_LOCK'),
    (USER, 'LOANQ_API_TOKEN'), (USER, 'LOANQ_SESSION'), (USER, 'LOANQ_GROUP'),
    (USER, 'LOANQ_TASK_ALLOW'), (USER, 'LOANQ_TASK_NOT_WORKED_IN'), (USER, 'LOANQ_HISTORY'),
    (USER, 'LOANQ_ROWS_LOCKED'), (USER, 'LOANQ_MAY_ACT_AS'), (USER, 'LOANQ_LOCK_ROWS'),
    (USER, 'ACC_LOAN'))) LOOP
    EXECUTE IMMEDIATE 'REVOKE ALL ON "' || o.table_schema || '"."' || o.table_name || '" FROM LOANQ_REFRESHER';
  END LOOP;
END;
-- every command checks the schema version first
GRANT SELECT ON loanq_schema_version TO LOANQ_REFRESHER
-- who may act as whom (read by the identity check)
GRANT SELECT ON loanq_account TO LOANQ_REFRESHER
-- read tasks; take the task lock or lease (not change a definition)
GRANT SELECT, UPDATE (lease_owner, lease_token, lease_expires_at) ON loanq_task TO LOANQ_REFRESHER
-- log, serve and cancel requests; show a waiter's sign of life, end abandoned ones
GRANT SELECT, INSERT, UPDATE (assigned, status, served_at, pooled, alive_at) ON loanq_work_request TO LOANQ_REFRESHER
-- assign loans; dispose of them
GRANT SELECT, INSERT, UPDATE (disposition, disposed_at, return_at, disposed_by, reason, note) ON loanq_work TO LOANQ_REFRESHER
-- log criteria-query runs
GRANT SELECT, INSERT ON loanq_query_run TO LOANQ_REFRESHER
-- the per-user cap's lock rows (strategy rows); UPDATE only to lock them
GRANT SELECT, INSERT, UPDATE (task_id) ON loanq_task_user TO LOANQ_REFRESHER
-- candidate pools: claim, drop and refill candidates (nothing in a pool is trusted: each is rechecked by key)
GRANT SELECT, INSERT, UPDATE, DELETE ON loanq_pool TO LOANQ_REFRESHER
-- who is in which group (allow lists name groups)
GRANT SELECT ON loanq_group TO LOANQ_REFRESHER
-- who may work which task
GRANT SELECT ON loanq_task_allow TO LOANQ_REFRESHER
-- four eyes: the tasks whose workers of a loan may not work it in another
GRANT SELECT ON loanq_task_not_worked_in TO LOANQ_REFRESHER
-- lock run: named leases (MySQL names the key column in its insert-or-keep)
GRANT SELECT, INSERT, UPDATE (name, holder, token, taken_at, expires_at) ON loanq_lock TO LOANQ_REFRESHER
-- who the account may act as (docs/security.md)
GRANT EXECUTE ON loanq_may_act_as TO LOANQ_REFRESHER
DELETE FROM loanq_account WHERE account = 'LOANQ_REFRESHER'
-- strategy rows: the claim calls the owner's cursor procedure and reads the keys it locked
GRANT EXECUTE ON loanq_lock_rows TO LOANQ_REFRESHER
GRANT SELECT ON loanq_rows_locked TO LOANQ_REFRESHER
-- source acc_loan (key loan_no): SELECT lets Oracle lock rows (FOR UPDATE SKIP LOCKED); READ would not
GRANT SELECT ON acc_loan TO LOANQ_REFRESHER

-- role serve
-- loanq grants: role serve for account LOANQ_SERVE (Oracle); run as the owner of loanq's tables
-- revoke first: the account keeps nothing an earlier role gave it on loanq's objects or on the
-- source tables named here (also what was granted there for other uses: grant that again after);
-- Oracle refuses to REVOKE what was never granted, so the block revokes what ALL_TAB_PRIVS and
-- ALL_COL_PRIVS list as granted by this account (REVOKE ALL also removes column privileges)
BEGIN
  FOR o IN (SELECT DISTINCT table_schema, table_name FROM (
      SELECT table_schema, table_name FROM all_tab_privs WHERE grantor = USER AND grantee = 'LOANQ_SERVE'
      UNION SELECT table_schema, table_name FROM all_col_privs WHERE grantor = USER AND grantee = 'LOANQ_SERVE')
    WHERE (table_schema, table_name) IN ((USER, 'LOANQ_SCHEMA_VERSION'), (USER, 'LOANQ_ACCOUNT'), (USER, 'LOANQ_TASK'),
    (USER, 'LOANQ_WORK_REQUEST'), (USER, 'LOANQ_WORK'), (USER, 'LOANQ_QUERY_RUN'),
    (USER, 'LOANQ_TASK_USER'), (USER, 'LOANQ_POOL'), (USER, 'LOANQ_LOCK'),
    (USER, 'LOANQ_API_TOKEN'), (USER, 'LOANQ_SESSION'), (USER, 'LOANQ_GROUP'),
    (USER, 'LOANQ_TASK_ALLOW'), (USER, 'LOANQ_TASK_NOT_WORKED_IN'), (USER, 'LOANQ_HISTORY'),
    (USER, 'LOANQ_ROWS_LOCKED'), (USER, 'LOANQ_MAY_ACT_AS'), (USER, 'LOANQ_LOCK_ROWS'),
    (USER, 'ACC_LOAN'))) LOOP
    EXECUTE IMMEDIATE 'REVOKE ALL ON "' || o.table_schema || '"."' || o.table_name || '" FROM LOANQ_SERVE';
  END LOOP;
END;
-- every command checks the schema version first
GRANT SELECT ON loanq_schema_version TO LOANQ_SERVE
-- who may act as whom (read by the identity check)
GRANT SELECT ON loanq_account TO LOANQ_SERVE
-- read tasks; take the task lock or lease (not change a definition)
GRANT SELECT, UPDATE (lease_owner, lease_token, lease_expires_at) ON loanq_task TO LOANQ_SERVE
-- log, serve and cancel requests; show a waiter's sign of life, end abandoned ones
GRANT SELECT, INSERT, UPDATE (assigned, status, served_at, pooled, alive_at) ON loanq_work_request TO LOANQ_SERVE
-- assign loans; dispose of them
GRANT SELECT, INSERT, UPDATE (disposition, disposed_at, return_at, disposed_by, reason, note) ON loanq_work TO LOANQ_SERVE
-- log criteria-query runs
GRANT SELECT, INSERT ON loanq_query_run TO LOANQ_SERVE
-- the per-user cap's lock rows (strategy rows); UPDATE only to lock them
GRANT SELECT, INSERT, UPDATE (task_id) ON loanq_task_user TO LOANQ_SERVE
-- candidate pools: claim, drop and refill candidates (nothing in a pool is trusted: each is rechecked by key)
GRANT SELECT, INSERT, UPDATE, DELETE ON loanq_pool TO LOANQ_SERVE
-- who is in which group; serve --proxy-groups-header keeps the groups a trusted proxy names
GRANT SELECT, INSERT, DELETE ON loanq_group TO LOANQ_SERVE
-- who may work which task
GRANT SELECT ON loanq_task_allow TO LOANQ_SERVE
-- four eyes: the tasks whose workers of a loan may not work it in another
GRANT SELECT ON loanq_task_not_worked_in TO LOANQ_SERVE
-- lock list
GRANT SELECT ON loanq_lock TO LOANQ_SERVE
-- authenticate API calls by token hash
GRANT SELECT ON loanq_api_token TO LOANQ_SERVE
-- sessions of the processor's page (/work): sign in, check, sign out
GRANT SELECT, INSERT, DELETE ON loanq_session TO LOANQ_SERVE
-- who the account may act as (docs/security.md)
GRANT EXECUTE ON loanq_may_act_as TO LOANQ_SERVE
MERGE INTO loanq_account a
USING (SELECT 'LOANQ_SERVE' AS account, NULL AS user_name, 1 AS trusted FROM dual) s ON (a.account = s.account)
WHEN MATCHED THEN UPDATE SET a.user_name = s.user_name, a.trusted = s.trusted,
    a.granted_by = SYS_CONTEXT('USERENV', 'SESSION_USER'), a.granted_at = SYS_EXTRACT_UTC(SYSTIMESTAMP)
WHEN NOT MATCHED THEN INSERT (account, user_name, trusted, granted_by, granted_at)
    VALUES (s.account, s.user_name, s.trusted, SYS_CONTEXT('USERENV', 'SESSION_USER'), SYS_EXTRACT_UTC(SYSTIMESTAMP))
-- strategy rows: the claim calls the owner's cursor procedure and reads the keys it locked
GRANT EXECUTE ON loanq_lock_rows TO LOANQ_SERVE
GRANT SELECT ON loanq_rows_locked TO LOANQ_SERVE
-- source acc_loan (key loan_no): SELECT lets Oracle lock rows (FOR UPDATE SKIP LOCKED); READ would not
GRANT SELECT ON acc_loan TO LOANQ_SERVE

-- Sessions of the processor's page of `loanq serve --api` (/work, docs/api.md).
-- A browser signs in once (an API token pasted into the page, or the user a
-- trusted reverse proxy names) and then carries an HttpOnly, SameSite=Strict
-- cookie holding a random session id. The session lives here, not in a serve
-- process, so any node behind a load balancer accepts it and a sign-out or
-- expiry holds on every node at once. Only the SHA-256 of the session id is
-- kept (hex): a copy of this table lets nobody act as a session. csrf is the
-- token every POST/DELETE of the page must echo (X-CSRF-Token). token_id is
-- the API token the session was opened with (NULL under --auth proxy): a
-- revoked or expired token ends its sessions too.
--
-- Oracle: same statement rules as 00001_schema.sql. Only the exact text is
-- tested: no Oracle server runs loanq's tests.

-- +goose Up
-- +goose StatementBegin
CREATE TABLE loanq_session (
    session_hash CHAR(64)           NOT NULL,
    user_name    VARCHAR2(100 CHAR) NOT NULL,
    role         VARCHAR2(20 CHAR)  NOT NULL,
    csrf         VARCHAR2(64 CHAR)  NOT NULL,
    token_id     NUMBER(19),
    created_at   TIMESTAMP(6)       NOT NULL,
    expires_at   TIMESTAMP(6)       NOT NULL,
    CONSTRAINT loanq_session_pk PRIMARY KEY (session_hash),
    CONSTRAINT loanq_session_role_ck CHECK (role IN ('processor', 'supervisor'))
)
-- +goose StatementEnd
-- +goose StatementBegin
CREATE INDEX loanq_session_expires_ix ON loanq_session (expires_at)
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TABLE loanq_session PURGE
-- +goose StatementEnd

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

-- +goose Up
CREATE TABLE loanq_session (
    session_hash CHAR(64)     NOT NULL PRIMARY KEY,
    user_name    VARCHAR(100) NOT NULL,
    role         VARCHAR(20)  NOT NULL,
    csrf         VARCHAR(64)  NOT NULL,
    token_id     BIGINT       NULL,
    created_at   DATETIME(6)  NOT NULL,
    expires_at   DATETIME(6)  NOT NULL,
    CONSTRAINT loanq_session_role_ck CHECK (role IN ('processor', 'supervisor')),
    INDEX loanq_session_expires_ix (expires_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE loanq_session;

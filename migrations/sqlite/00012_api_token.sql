-- API tokens of `loanq serve --api --auth token`: see
-- migrations/postgres/00012_api_token.sql for what each column means.

-- +goose Up
CREATE TABLE loanq_api_token (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    user_name  TEXT NOT NULL,
    role       TEXT NOT NULL CHECK (role IN ('processor', 'supervisor')),
    token_hash TEXT NOT NULL UNIQUE,
    created_by TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT,
    revoked_at TEXT,
    revoked_by TEXT
);

-- +goose Down
DROP TABLE loanq_api_token;

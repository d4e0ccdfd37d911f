-- API tokens of `loanq serve --api --auth token`: see
-- migrations/postgres/00012_api_token.sql for what each column means.

-- +goose Up
CREATE TABLE loanq_api_token (
    id         BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    user_name  VARCHAR(100) NOT NULL,
    role       VARCHAR(20)  NOT NULL,
    token_hash CHAR(64)     NOT NULL,
    created_by VARCHAR(100) NOT NULL,
    created_at DATETIME(6)  NOT NULL,
    expires_at DATETIME(6)  NULL,
    revoked_at DATETIME(6)  NULL,
    revoked_by VARCHAR(100) NULL,
    CONSTRAINT loanq_api_token_role_ck CHECK (role IN ('processor', 'supervisor')),
    CONSTRAINT loanq_api_token_hash_uq UNIQUE (token_hash)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE loanq_api_token;

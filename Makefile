# loanq — make help lists the targets.
.PHONY: help build build-static test test-oracle vet fmt clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

# `make build VERSION=v1.2.0` stamps a release; loanq version prints it with
# the commit (from Go's build information) and the build date.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS = -X github.com/loanq/loanq/commands.Version=$(VERSION) -X github.com/loanq/loanq/commands.BuildDate=$(shell date -u +%Y-%m-%dT%H:%M:%SZ) -X github.com/loanq/loanq/commands.Commit=$(shell git rev-parse HEAD 2>/dev/null)

build: ## build ./loanq (with Oracle support when cgo is on), version stamped
	go build -ldflags "$(LDFLAGS)" -o loanq .

build-static: ## build a static ./loanq without cgo (no Oracle), version stamped
	CGO_ENABLED=0 go build -ldflags "$(LDFLAGS)" -o loanq .

test: ## run every test on SQLite, PostgreSQL and MariaDB (finds or starts the servers)
	scripts/test.sh

vet: ## go vet and gofmt check
	go vet ./...
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo 'gofmt needed'; exit 1; }

clean: ## remove the built binary
	rm -f loanq

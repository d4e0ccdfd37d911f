# loanq — make help lists the targets.
.PHONY: help build build-static test test-oracle vet fmt clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

build: ## build ./loanq (with Oracle support when cgo is on)
	go build -o loanq .

build-static: ## build a static ./loanq without cgo (no Oracle)
	CGO_ENABLED=0 go build -o loanq .

test: ## run every test on SQLite, PostgreSQL and MariaDB (finds or starts the servers)
	scripts/test.sh

vet: ## go vet and gofmt check
	go vet ./...
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo 'gofmt needed'; exit 1; }

clean: ## remove the built binary
	rm -f loanq

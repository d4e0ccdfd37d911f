# loanq — make help lists the targets.
.PHONY: help build build-static release test test-oracle vet fmt clean

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

# `make release VERSION=v1.2.3` cross-compiles static binaries (CGO_ENABLED=0:
# no Oracle, which needs cgo and Instant Client; docs/install.md) into
# dist/VERSION/: one archive per platform (.tar.gz, .zip for Windows) holding
# the binary, README.md, LICENSE and docs/ (install.md, commands.md: the pages
# README.md links to for installing and for the command reference), and a SHA-256 checksum file that
# is verified at once. Not part of `make test`: it builds five binaries.
RELEASE_PLATFORMS = linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64
DIST = dist/$(VERSION)

release: ## static archives for linux+darwin (amd64, arm64) and windows/amd64 with checksums, in dist/ (VERSION=vX.Y.Z)
	@echo '$(VERSION)' | grep -Eq '^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$$' || \
		{ echo 'make release: give VERSION=vX.Y.Z (got "$(VERSION)")' >&2; exit 2; }
	rm -rf $(DIST) && mkdir -p $(DIST)
	set -e; for p in $(RELEASE_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; name=loanq_$(VERSION)_$${os}_$${arch}; exe=loanq; \
		if [ $$os = windows ]; then exe=loanq.exe; fi; \
		mkdir -p $(DIST)/$$name; \
		echo "building $$name"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build -trimpath -ldflags "-s -w $(LDFLAGS)" -o $(DIST)/$$name/$$exe .; \
		mkdir -p $(DIST)/$$name/docs; \
		cp README.md LICENSE $(DIST)/$$name/; cp docs/install.md docs/commands.md $(DIST)/$$name/docs/; \
		if [ $$os = windows ]; then (cd $(DIST) && zip -qr $$name.zip $$name); \
		else tar -C $(DIST) -czf $(DIST)/$$name.tar.gz $$name; fi; \
		rm -rf $(DIST)/$$name; \
	done
	cd $(DIST) && sha256sum loanq_$(VERSION)_*.tar.gz loanq_$(VERSION)_*.zip > loanq_$(VERSION)_checksums.txt
	cd $(DIST) && sha256sum -c loanq_$(VERSION)_checksums.txt
	@echo "release $(VERSION): $(DIST)/"

test: ## run every test on SQLite, PostgreSQL and MariaDB (finds or starts the servers); lists the 15 slowest, keeps every time in $TMPDIR/loanq-test-timings.json
	scripts/test.sh

vet: ## go vet and gofmt check (-trimpath: as scripts/test.sh, so a clean clone reuses the cache)
	go vet -trimpath ./...
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo 'gofmt needed'; exit 1; }

clean: ## remove the built binary and the release archives
	rm -rf loanq dist

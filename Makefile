# pooldriver: `make test` runs every test this machine can run, under -race.
# The integration tests need a PostgreSQL and a MySQL/MariaDB server: see
# README.md ("Testing") for the environment variables that point at them.

SHELL   := /bin/bash
GO      ?= go
GOFLAGS_TEST := -race -count=1 -timeout 20m

# The repository is a Go workspace (go.work): the modules require each other
# at their next release version, which go.work resolves to the local
# directories (RELEASING.md). Every target uses it, whatever GOWORK the
# environment sets. MODULES is every module go.work lists ("." for the root):
# a module added there is linted and tested without an edit here.
export GOWORK := $(CURDIR)/go.work
MODULES := $(shell GOWORK=$(GOWORK) $(GO) list -m -f '{{.Dir}}' | sed 's|^$(CURDIR)/||; s|^$(CURDIR)$$|.|')
# Modules with targets of their own below; the others (the root, otelpool,
# promcollector) are unit-tested alike, against the servers of the DSN
# variables below where they need one.
UNIT_MODULES := $(filter-out integration bench dialects/odbc,$(MODULES))

# When the DSN variables are unset and a server answers on its standard local
# port, the integration tests use it (the local servers of a development
# machine); otherwise they fall back to Docker (testcontainers), or skip.
port_open = $(shell (exec 3<>/dev/tcp/127.0.0.1/$(1)) 2>/dev/null && echo yes)
ifeq ($(POOLDRIVER_POSTGRES_DSN),)
ifeq ($(call port_open,5432),yes)
export POOLDRIVER_POSTGRES_DSN := postgres://postgres@127.0.0.1:5432/test?sslmode=disable
endif
endif
ifeq ($(POOLDRIVER_MYSQL_DSN),)
ifeq ($(call port_open,3306),yes)
export POOLDRIVER_MYSQL_DSN := mysql://root@tcp(127.0.0.1:3306)/test
endif
endif

# ODBC needs cgo and unixODBC (Debian: unixodbc-dev odbc-postgresql
# odbc-mariadb); dialects/odbc is a module of its own so that nothing else
# needs them. Its tests, and the integration tests tagged odbc, run when
# they are installed; under CI they must be.
HAVE_ODBC := $(shell command -v odbcinst >/dev/null 2>&1 && test -f /usr/include/sql.h && echo yes)
ifeq ($(CI),true)
HAVE_ODBC := yes
endif
ifeq ($(HAVE_ODBC),yes)
ODBC_TAGS := -tags odbc
LINT_TAGS := --build-tags odbc
endif
ifeq ($(POOLDRIVER_ODBC_POSTGRES_DSN),)
ifeq ($(call port_open,5432),yes)
export POOLDRIVER_ODBC_POSTGRES_DSN := odbc://Driver={PostgreSQL Unicode};Server=127.0.0.1;Port=5432;Database=test;UID=postgres;
endif
endif
ifeq ($(POOLDRIVER_ODBC_MYSQL_DSN),)
ifeq ($(call port_open,3306),yes)
export POOLDRIVER_ODBC_MYSQL_DSN := odbc://Driver={MariaDB Unicode};Server=127.0.0.1;Port=3306;Database=test;UID=root;
endif
endif

# golangci-lint (.golangci.yml: errcheck, govet, ineffassign, staticcheck,
# unused), at one pinned version: .ci/run installs it with go install into
# GOBIN (default $(go env GOPATH)/bin), where lint looks for it.
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := $(or $(shell $(GO) env GOBIN),$(firstword $(subst :, ,$(shell $(GO) env GOPATH)))/bin)/golangci-lint

.PHONY: all test test-unit test-odbc test-integration bench loadtest loadtest-quick lint fmt tidy release-check golangci-lint-version

all: lint test

test: test-unit test-odbc test-integration

test-unit:
	@for m in $(UNIT_MODULES); do \
		echo "go test ($$m)"; (cd $$m && $(GO) test $(GOFLAGS_TEST) ./...) || exit 1; \
	done

test-odbc:
	@if [ "$(HAVE_ODBC)" = yes ]; then cd dialects/odbc && $(GO) test $(GOFLAGS_TEST) ./...; \
	else echo "dialects/odbc skipped: apt-get install unixodbc-dev odbc-postgresql odbc-mariadb"; fi

test-integration:
	cd integration && $(GO) test $(GOFLAGS_TEST) $(ODBC_TAGS) ./...

# The integration tests with every server in a container that testcontainers
# starts from local images built from Debian's packages, none from the
# environment (the DSNs set above are unset): integration/docker/test.sh.
.PHONY: test-docker
test-docker:
	GO="$(GO)" GOFLAGS_TEST="$(GOFLAGS_TEST)" GOTAGS="$(ODBC_TAGS)" bash integration/docker/test.sh

# Benchmarks: pooldriver side by side with the alternatives, in one run.
BENCHTIME ?= 1s
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count 1 .
	cd bench && $(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count 1 ./...

# The load test of bench/cmd/loadtest (about 13 minutes; loadtest-quick: 2).
loadtest:
	cd bench && $(GO) run ./cmd/loadtest -out results/

loadtest-quick:
	cd bench && $(GO) run ./cmd/loadtest -quick -out /tmp/pooldriver-loadtest

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@v=$$($(GOLANGCI_LINT) version --short 2>/dev/null); if [ "v$$v" != $(GOLANGCI_LINT_VERSION) ]; then \
		echo "lint needs golangci-lint $(GOLANGCI_LINT_VERSION) at $(GOLANGCI_LINT) (found: $${v:-none}):"; \
		echo "  go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)"; exit 1; fi
	@for m in $(MODULES); do \
		if [ $$m = dialects/odbc ] && [ "$(HAVE_ODBC)" != yes ]; then echo "go vet, golangci-lint ($$m) skipped: no unixODBC"; continue; fi; \
		echo "go vet ($$m)"; (cd $$m && $(GO) vet ./...) || exit 1; \
		echo "golangci-lint ($$m)"; (cd $$m && $(GOLANGCI_LINT) run --allow-parallel-runners $(LINT_TAGS) ./...) || exit 1; \
	done
	@if [ "$(HAVE_ODBC)" = yes ]; then echo "go vet (integration, odbc)"; cd integration && $(GO) vet $(ODBC_TAGS) ./...; fi

fmt:
	gofmt -w $$(git ls-files '*.go')

# go mod tidy in every module, with the workspace's modules found locally.
tidy:
	bash .ci/tidy

# Rehearse the release: go get of the released modules, from a module proxy
# built from the working tree (RELEASING.md).
release-check:
	bash .ci/release-check

golangci-lint-version:
	@echo $(GOLANGCI_LINT_VERSION)

# pooldriver: `make test` runs the tests that check a change, in a few
# minutes; `make test-all` runs every test this machine can run (CI runs
# it: .ci/run). Both under -race, with a line per package as it starts and
# ends and a summary (internal/cmd/testreport).
# The integration tests need a PostgreSQL and a MySQL/MariaDB server: see
# README.md ("Testing") for the environment variables that point at them.

SHELL   := /bin/bash
GO      ?= go
# -timeout: the integration package runs 13 minutes in CI and over 20
# beside stress-ng --cpu 4 on 2 cores; the limit is there to end a hang.
GOFLAGS_TEST := -race -count=1 -timeout 40m
# Extra go test flags for test and test-all, e.g. TESTFLAGS='-run TestFault'.
TESTFLAGS ?=

# The repository is a Go workspace (go.work): the modules require each other
# at their next release version, which go.work resolves to the local
# directories (RELEASING.md). Every target uses it, whatever GOWORK the
# environment sets. MODULES is every module go.work lists ("." for the root):
# a module added there is linted and tested without an edit here.
export GOWORK := $(CURDIR)/go.work
MODULES := $(shell GOWORK=$(GOWORK) $(GO) list -m -f '{{.Dir}}' | sed 's|^$(CURDIR)/||; s|^$(CURDIR)$$|.|')
# The modules whose tests make test and test-all run: all but bench (its
# targets are bench and loadtest), and dialects/odbc only where unixODBC is
# installed (HAVE_ODBC below).
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
ODBC_TAG := odbc
endif

# The integration tests start a server in a container (testcontainers) only
# when built with the docker tag: testcontainers and Docker's client, 95
# packages make test would compile under -race with an empty build cache
# (docs/testing.md), for nothing where the local servers answer. make test and test-all set it where a server's DSN
# is still unset (no local server answered: containers stand in, as before),
# make test-docker always, lint always (so that its files are checked).
DOCKER_TAG := $(if $(and $(POOLDRIVER_POSTGRES_DSN),$(POOLDRIVER_MYSQL_DSN)),,docker)
empty :=
space := $(empty) $(empty)
comma := ,
taglist = $(subst $(space),$(comma),$(strip $(1)))
TEST_TAGS := $(if $(strip $(ODBC_TAG) $(DOCKER_TAG)),-tags $(call taglist,$(ODBC_TAG) $(DOCKER_TAG)))
LINT_TAGS := --build-tags $(call taglist,$(ODBC_TAG) docker)
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

.PHONY: all test test-all test-unit test-integration bench loadtest loadtest-quick lint fmt tidy release-check golangci-lint-version example-tasks example-service

all: lint test-all

# One go test for every module, so that packages build and run side by side
# (-p, one per core), through testreport: first every test binary is built
# (the same go test with -exec true), a line per package as its binary is
# ready; then the tests, a line per package as it starts and as it ends
# with its time, a line every 30s naming the tests under way (or saying it
# builds), the output of every failure, and `N passed, N failed, N skipped`
# at the end. V=1: a line for every top-level test.
TEST_MODULES := $(UNIT_MODULES) integration $(if $(filter yes,$(HAVE_ODBC)),dialects/odbc)
pkgs = $(foreach m,$(1),$(if $(filter .,$(m)),./...,./$(m)/...))
# testreport is built into a temporary directory for the run (go run would
# add a line of its own, "exit status 1", after the summary). REPORT_BUILD:
# the build pass first (a line per test binary as it is ready); make test
# goes without it, since every go test over these modules costs some 20 s
# of CPU even with every binary cached (hashing the inputs of hundreds of
# packages), a minute or more of wall time at load 20.
REPORT_BUILD := -build
gotest = @d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && $(GO) build -o "$$d/testreport" ./internal/cmd/testreport && \
	"$$d/testreport" $(REPORT_BUILD) $(if $(V),-v) $(GO) test -json $(GOFLAGS_TEST) $(1) $(TESTFLAGS) $(2)
odbc_note = @if [ "$(HAVE_ODBC)" != yes ]; then echo "dialects/odbc and the ODBC integration tests skipped: apt-get install unixodbc-dev odbc-postgresql odbc-mariadb"; fi

# make test: -short, under which the long suites skip (integration/:
# faults, PgBouncer, ORMs, migrations; the unit stress tests run shorter).
# integration comes first: it takes longest, and go test starts packages
# in the order given, so the unit packages run beside it rather than
# before it. -parallel 8: most of integration's short tests wait on the
# servers (170 s of wall time, 47 s of CPU at -parallel 2 on 2 cores), so
# they overlap well. -p 4: a package's test run holds one of go test's -p
# slots for as long as it runs, integration's for minutes; with two slots
# on two cores the unit packages queued one by one in the other. The long
# suites (make test-all) compare throughput side by side and keep the
# defaults and the order: with the unit packages' stress tests beside it,
# TestBreakerAtConnectionLimit measured the machine's CPU (0.61x).
test: REPORT_BUILD :=
test:
	$(odbc_note)
	@echo "make test: go test compiles the test binaries first, under -race: with an empty build cache some 3 CPU-minutes (2 minutes or more on 2 cores), seconds once cached; then the tests"
	$(call gotest,-short -p 4 -parallel 8 $(TEST_TAGS),$(call pkgs,integration $(filter-out integration,$(TEST_MODULES))))

# make test-all: everything make test runs, and the long suites.
test-all:
	$(odbc_note)
	$(call gotest,$(TEST_TAGS),$(call pkgs,$(TEST_MODULES)))
	GO="$(GO)" bash integration/upstream/run.sh

# go-sql-driver/mysql's and pgx stdlib's own tests through pooldriver,
# beside the plain driver (about 2 minutes; part of test-all).
.PHONY: test-upstream
test-upstream:
	GO="$(GO)" bash integration/upstream/run.sh

# Parts of test-all: the modules' own tests, or the integration tests.
test-unit:
	$(odbc_note)
	$(call gotest,,$(call pkgs,$(filter-out integration,$(TEST_MODULES))))

test-integration:
	$(odbc_note)
	$(call gotest,$(TEST_TAGS),./integration/...)

# The integration tests with every server in a container that testcontainers
# starts from local images built from Debian's packages, none from the
# environment (the DSNs set above are unset): integration/docker/test.sh.
.PHONY: test-docker
test-docker:
	GO="$(GO)" GOFLAGS_TEST="$(GOFLAGS_TEST)" TAGS="$(ODBC_TAG)" bash integration/docker/test.sh

# The examples of README.md ("Run it, test it"), each with a line before
# go run compiles it, which it does without a word: with an empty build
# cache examples/tasks is some 50 CPU-seconds, examples/service 80 (go build
# with GOCACHE=$$(mktemp -d): 53 s and 80 s of user+system time).
# ARGS: the example's flags, e.g. ARGS='-dsn postgres://…'.
example-tasks:
	@echo "compiling examples/tasks: with an empty build cache some 50 CPU-seconds (half a minute or more on 2 cores), then it runs"
	@$(GO) run ./examples/tasks $(ARGS)

example-service:
	@echo "compiling examples/service: with an empty build cache some 80 CPU-seconds (40 s or more on 2 cores), then it runs"
	@$(GO) run ./examples/service/cmd/service $(ARGS)

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

# golangci-lint once over every module (go.work makes them one build), so
# that packages shared by several modules are loaded and analysed once, on
# every core; its cache (~/.cache/golangci-lint) keeps the results of
# packages that did not change. No go vet besides: golangci-lint's govet
# runs the analyzers go vet runs (every one of cmd/vet's suite), on the
# same packages and tests, with the odbc tag where unixODBC is installed.
LINT_MODULES := $(if $(filter yes,$(HAVE_ODBC)),$(MODULES),$(filter-out dialects/odbc,$(MODULES)))

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@v=$$($(GOLANGCI_LINT) version --short 2>/dev/null); if [ "v$$v" != $(GOLANGCI_LINT_VERSION) ]; then \
		echo "lint needs golangci-lint $(GOLANGCI_LINT_VERSION) at $(GOLANGCI_LINT) (found: $${v:-none}):"; \
		echo "  go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)"; exit 1; fi
	@if [ "$(HAVE_ODBC)" != yes ]; then echo "golangci-lint (dialects/odbc) skipped: no unixODBC"; fi
	@echo "golangci-lint ($(LINT_MODULES))"
	@$(GOLANGCI_LINT) run --allow-parallel-runners $(LINT_TAGS) $(call pkgs,$(LINT_MODULES))
	@echo "layering (.ci/layering: the root's floors, sets of files that reach each other)"
	@bash .ci/layering '$(ROOT_FLOORS)' $(call pkgs,$(LINT_MODULES))

fmt:
	gofmt -w $$(git ls-files '*.go')

# go mod tidy in every module, with the workspace's modules found locally;
# then go.work.sum written afresh, as the go command writes it: the sums of
# the workspace's module graph that no module's go.sum holds. go list -m all
# loads that graph, as go doc and the other commands that load it do (they
# rewrote the tracked file when it held less); written from nothing, it
# keeps no sum the modules stopped needing.
tidy:
	bash .ci/tidy
	rm -f go.work.sum && $(GO) list -m all >/dev/null

# Rehearse the release: go get of the released modules, from a module proxy
# built from the working tree (RELEASING.md).
release-check:
	bash .ci/release-check

# The root package's structure, for a refactoring's before and after: its
# files in floors from the face down, the arrows between them (how many run
# upward) and its longest, most complex functions; and the files one db.Exec
# outside a task runs code in (coverage of BenchmarkExec, N and 2N times).
# internal/phys, the physical connection, is a package under the root's
# floors: the compiler keeps it from naming them.
ROOT_FLOORS := raw.go,middleware.go,driver.go,stats.go,shutdown.go;conn.go,hold.go,rows.go,stmt.go,tx.go;reads.go;task.go;open.go,replicas.go,readwait.go;dial.go,trace.go,hooks.go,reset.go,lostcommit.go;connector.go,hosts.go,log.go,catalogwatch.go,options.go;parse.go,plan.go;settings.go;config.go;doc.go,errors.go,leak.go,loglimit.go,mode.go,nest.go,readmark.go,share.go,taskctx.go,tracer.go
PHYS := github.com/pooldriver/pooldriver/internal/phys
.PHONY: arch
arch:
	$(GO) run ./internal/cmd/archstat -layers '$(ROOT_FLOORS)' -uses $(PHYS) .
	@echo && $(GO) run ./internal/cmd/archstat ./internal/phys
	@echo && $(GO) run ./internal/cmd/archstat ./pool
	@d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && for n in 1000 2000; do \
		$(GO) test -count=1 -run '^$$' -bench '^BenchmarkExec$$/^pooldriver$$' -benchtime=$${n}x -covermode=count \
			-coverpkg=github.com/pooldriver/pooldriver -coverprofile=$$d/exec$$n.out . >/dev/null || exit 1; done && \
		echo && echo "files one db.Exec outside a task runs code in:" && $(GO) run ./internal/cmd/archstat -covdiff $$d/exec1000.out $$d/exec2000.out
	@echo && echo "docs/design.md's table of the structure (make lint holds the page to it):" && \
		$(GO) run ./internal/cmd/archstat -row root -layers '$(ROOT_FLOORS)' -uses $(PHYS) . && \
		$(GO) run ./internal/cmd/archstat -row internal/phys ./internal/phys && \
		$(GO) run ./internal/cmd/archstat -row pool ./pool

golangci-lint-version:
	@echo $(GOLANGCI_LINT_VERSION)

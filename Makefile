# pooldriver: `make test` runs every test this machine can run, under -race.
# The integration tests need a PostgreSQL and a MySQL/MariaDB server: see
# README.md ("Testing") for the environment variables that point at them.

SHELL   := /bin/bash
GO      ?= go
MODULES := . integration bench
GOFLAGS_TEST := -race -count=1 -timeout 20m

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

.PHONY: all test test-unit test-integration bench bench-pool lint fmt

all: lint test

test: test-unit test-integration

test-unit:
	$(GO) test $(GOFLAGS_TEST) ./...

test-integration:
	@if [ -f integration/go.mod ]; then cd integration && $(GO) test $(GOFLAGS_TEST) ./...; fi

# Benchmarks: pooldriver side by side with the alternatives, in one run.
BENCHTIME ?= 1s
bench:
	cd bench && $(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count 1 ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@for m in $(MODULES); do if [ -f $$m/go.mod ]; then echo "go vet ($$m)"; (cd $$m && $(GO) vet ./...) || exit 1; fi; done

fmt:
	gofmt -w $$(git ls-files '*.go')

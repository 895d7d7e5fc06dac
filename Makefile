# pooldriver: `make test` runs every test this machine can run, under -race.
# The integration tests need a PostgreSQL and a MySQL/MariaDB server: see
# README.md ("Testing") for the environment variables that point at them.

GO      ?= go
MODULES := . integration bench
GOFLAGS_TEST := -race -count=1 -timeout 20m

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

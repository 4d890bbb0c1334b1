# baton — common tasks. `make demo` needs nothing but Go; `make test` needs
# redis-server installed (the tests start their own on free ports).

GO       ?= go
TIMEOUT  ?= 15m

.PHONY: all build test test-short demo bench chaos lint clean

all: build test

build:
	$(GO) build -o bin/ ./cmd/...

# The whole suite: unit tests on miniredis, integration and fault tests on
# real redis-server processes, the race detector on.
test:
	$(GO) vet ./...
	BATON_REQUIRE_REDIS=1 $(GO) test -race -count=1 -timeout $(TIMEOUT) ./...
	cd examples/eino && BATON_REQUIRE_REDIS=1 $(GO) test -race -count=1 -timeout $(TIMEOUT) ./...

# Unit tests only (no redis-server): what skips without one is skipped.
test-short:
	$(GO) test -short -count=1 ./...

# Embedded Redis, three workers in one process, one paused past its lease.
demo:
	$(GO) run ./examples/demo

# baton against bare Asynq on the same Redis, in one run.
bench:
	$(GO) run ./cmd/bench $(BENCH_FLAGS)

# The fault harness: real runners, Redis and the fenced downstream under a
# seeded schedule of kills, pauses, network faults and Redis restarts, then
# a check of every protocol history. Five minutes by default; exit 1 on a
# violation. E.g. make chaos CHAOS_FLAGS="-seed 7 -duration 1m".
chaos:
	$(GO) run ./cmd/chaos $(CHAOS_FLAGS)

lint:
	gofmt -l . | (! grep .)
	$(GO) vet ./...

clean:
	rm -rf bin

# baton — common tasks. `make demo` needs nothing but Go; `make test` needs
# redis-server installed (the tests start their own on free ports).

GO       ?= go
TIMEOUT  ?= 15m

.PHONY: all build test test-short test-js demo bench chaos lint clean

all: build test

build:
	$(GO) build -o bin/ ./cmd/...

# The whole suite: unit tests on miniredis, integration and fault tests on
# real redis-server processes, the race detector on.
test:
	@$(MAKE) --no-print-directory test-js
	$(GO) vet ./...
	BATON_REQUIRE_REDIS=1 $(GO) test -race -count=1 -timeout $(TIMEOUT) ./...
	cd examples/eino && BATON_REQUIRE_REDIS=1 $(GO) test -race -count=1 -timeout $(TIMEOUT) ./...

# Unit tests only (no redis-server): what skips without one is skipped.
test-short:
	$(GO) test -short -count=1 ./...

# The LangGraph.js saver (examples/langgraph-js): LangGraph's conformance
# suite and baton's own tests, on a redis-server they start. Needs node >= 20
# and npm; without them it says so and skips (fails if BATON_REQUIRE_NODE is
# set, as in CI). Installs the package's locked dependencies when missing.
JS_DIR := examples/langgraph-js
test-js:
	@if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then \
		echo "test-js: SKIPPED: node (>= 20) and npm are not both installed; the LangGraph.js tests did not run"; \
		if [ -n "$$BATON_REQUIRE_NODE" ]; then echo "test-js: BATON_REQUIRE_NODE is set: failing" >&2; exit 1; fi; \
	elif [ "$$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ]; then \
		echo "test-js: node $$(node --version) is too old: $(JS_DIR) needs node >= 20 (Debian 12's nodejs package is 18; use a Node 20 build)" >&2; \
		exit 1; \
	else \
		cd $(JS_DIR) && \
		if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then \
			npm ci --no-audit --no-fund; \
		fi && \
		npm test; \
	fi

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

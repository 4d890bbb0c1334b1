# baton — common tasks. `make demo` needs nothing but Go; `make test` installs
# what else it needs (tools/setup) or says what to install.

GO       ?= go
TIMEOUT  ?= 15m

.PHONY: all build test test-short test-js test-py test-agentapi api-tools demo bench bench-agent chaos lint clean

all: build test

# -buildvcs=auto stamps the commit (runner --version, enqueue --version)
# even where GOFLAGS turns it off. The binaries are built as they ship:
# without the symbol table and DWARF (-s -w: a panic's stack trace still
# names every function) and without this machine's paths (-trimpath).
# enqueue, a command that runs once and exits, is built without inlining
# too (-gcflags=all=-l): 11.64 MB instead of 12.55 MB (over issue 32's
# 12.53 MB), for about 3.5 ms more per call (docs/performance.md, "The
# size of the enqueue binary").
BUILD := $(GO) build -buildvcs=auto -trimpath -ldflags='-s -w'
build:
	$(BUILD) -o bin/ $$($(GO) list ./cmd/... | grep -v /cmd/enqueue$$)
	$(BUILD) -gcflags=all=-l -o bin/ ./cmd/enqueue

# The whole suite: unit tests on miniredis, integration and fault tests on
# real redis-server processes, the race detector on. tools/setup first
# installs what is missing (apt packages as root, locked npm and pip
# packages), or says in one line what to install.
test:
	@./tools/setup
	@$(MAKE) --no-print-directory test-js
	@$(MAKE) --no-print-directory test-py
	$(GO) vet ./...
	BATON_REQUIRE_REDIS=1 $(GO) test -race -count=1 -timeout $(TIMEOUT) ./...
	cd examples/eino && BATON_REQUIRE_REDIS=1 $(GO) test -race -count=1 -timeout $(TIMEOUT) ./...

# Unit tests only (no redis-server): what skips without one is skipped.
test-short:
	$(GO) test -short -count=1 ./...

# The LangGraph.js saver (js): LangGraph's conformance
# suite and baton's own tests, on a redis-server they start. Needs node >= 20
# and npm; without them it says so and skips (fails if BATON_REQUIRE_NODE is
# set, as in CI). Installs the package's locked dependencies when missing.
JS_DIR := js
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

# The LangGraph Python package (python): LangGraph's
# conformance suite, the saver's fencing, run_node and an end-to-end test on
# real runners, all on a redis-server they start. Needs python3 >= 3.11;
# without it it says so and skips (fails if BATON_REQUIRE_PYTHON is set, as
# in CI). Installs the locked dependencies (with their hashes) into
# python/.venv when missing or older than the lock.
PY_DIR := python
PYTHON ?= python3
test-py:
	@if ! command -v $(PYTHON) >/dev/null 2>&1 || ! $(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then \
		echo "test-py: SKIPPED: python3 >= 3.11 is missing; the LangGraph Python tests did not run"; \
		if [ -n "$$BATON_REQUIRE_PYTHON" ]; then echo "test-py: BATON_REQUIRE_PYTHON is set: failing" >&2; exit 1; fi; \
	else \
		cd $(PY_DIR) && \
		if [ ! -f .venv/.installed ] || [ requirements.lock -nt .venv/.installed ]; then \
			$(PYTHON) -m venv .venv && \
			.venv/bin/pip install -q --require-hashes --no-deps -r requirements.lock && \
			touch .venv/.installed; \
		fi && \
		.venv/bin/python -m pytest -q; \
	fi

# LangGraph's official clients (Python SDK sync and async, JS SDK) against
# LangGraph's reference server and a baton runner, side by side
# (internal/agentapitest). make test runs it with the rest; this target
# runs it alone, installing its locked npm and pip packages (and the JS
# worker's, in js) when missing or older than their locks.
AGENTAPI_DIR := internal/agentapitest
test-agentapi:
	@for dir in js $(AGENTAPI_DIR); do \
		if [ ! -f $$dir/node_modules/.package-lock.json ] || [ $$dir/package-lock.json -nt $$dir/node_modules/.package-lock.json ]; then \
			(cd $$dir && npm ci --no-audit --no-fund) || exit 1; \
		fi; \
	done
	@cd $(AGENTAPI_DIR) && \
	if [ ! -f .venv/.installed ] || [ requirements.lock -nt .venv/.installed ]; then \
		$(PYTHON) -m venv .venv && \
		.venv/bin/pip install -q --require-hashes --no-deps -r requirements.lock && \
		touch .venv/.installed; \
	fi
	$(GO) test -count=1 -run 'TestOfficialClientsSideBySide|TestDifferencesAreDocumented' -v ./$(AGENTAPI_DIR)/

# What internal/apicheck needs: schemathesis, run against the OpenAPI
# document a real runner serves, and the npm packages that generate a
# TypeScript client from it (internal/apicheck/ts, locked). schemathesis
# is installed from PyPI with the hashes in requirements.lock into
# internal/apicheck/.venv when missing or older than the lock. Without
# python3 >= 3.11, or npm, the test needing it skips (fails if
# BATON_REQUIRE_PYTHON, or BATON_REQUIRE_NODE, is set, as in CI).
API_DIR := internal/apicheck
api-tools:
	@if command -v $(PYTHON) >/dev/null 2>&1 && $(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then \
		cd $(API_DIR) && \
		if [ ! -f .venv/.installed ] || [ requirements.lock -nt .venv/.installed ]; then \
			$(PYTHON) -m venv .venv && \
			.venv/bin/pip install -q --require-hashes --no-deps -r requirements.lock && \
			touch .venv/.installed; \
		fi; \
	else \
		echo "api-tools: SKIPPED: python3 >= 3.11 is missing; the schemathesis run will skip"; \
	fi
	@if command -v npm >/dev/null 2>&1; then \
		cd $(API_DIR)/ts && \
		if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then \
			npm ci --no-audit --no-fund; \
		fi; \
	else \
		echo "api-tools: SKIPPED: npm is missing; the generated TypeScript client's test will skip"; \
	fi

# Embedded Redis, three workers in one process, one paused past its lease.
demo:
	$(GO) run ./examples/demo

# baton against bare Asynq and BullMQ on the same Redis, in one run. BullMQ
# runs in node from cmd/bench/bullmq, whose locked dependencies are
# installed here when node and npm are present; without them the bench
# says BullMQ was skipped and measures the other two.
BULLMQ_DIR := cmd/bench/bullmq
bench:
	@if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then \
		cd $(BULLMQ_DIR) && \
		if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then \
			npm ci --no-audit --no-fund || echo "bench: npm ci failed in $(BULLMQ_DIR): BullMQ will be skipped"; \
		fi; \
	else \
		echo "bench: node and npm are not both installed: BullMQ will be skipped"; \
	fi
	$(GO) run ./cmd/bench $(BENCH_FLAGS)
	@case "$(BENCH_FLAGS)" in \
		*-sections*) echo "bench: agent turns not run (-sections was given; make bench-agent runs them)";; \
		*) $(MAKE) --no-print-directory bench-agent;; \
	esac

# The "agent turns" section (issue 43), in one run: baton's Python and JS
# graph workers, the exec path, the in-process floor, baton's Agent Server
# API and LangGraph's `langgraph dev`, which is installed from
# python/bench/requirements.lock (hashes) into python/bench/.venv, never
# into python/.venv. Without python3 >= 3.11 it says so and skips; without
# node, or js/node_modules (make test-js), its JS column says skipped.
# AGENT_BENCH_N turns per latency figure (30).
BENCH_VENV := $(PY_DIR)/bench/.venv
AGENT_BENCH_N ?= 30
bench-agent:
	@if ! command -v $(PYTHON) >/dev/null 2>&1 || ! $(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then \
		echo "bench: agent turns SKIPPED: python3 >= 3.11 is missing"; \
	else \
		cd $(PY_DIR) && \
		if [ ! -f .venv/.installed ] || [ requirements.lock -nt .venv/.installed ]; then \
			$(PYTHON) -m venv .venv && \
			.venv/bin/pip install -q --require-hashes --no-deps -r requirements.lock && \
			touch .venv/.installed; \
		fi && cd .. && \
		if [ ! -f $(BENCH_VENV)/.installed ] || [ $(PY_DIR)/bench/requirements.lock -nt $(BENCH_VENV)/.installed ]; then \
			{ $(PYTHON) -m venv $(BENCH_VENV) && \
			$(BENCH_VENV)/bin/pip install -q --require-hashes --no-deps -r $(PY_DIR)/bench/requirements.lock && \
			touch $(BENCH_VENV)/.installed; } || echo "bench: langgraph dev could not be installed: its column will say skipped"; \
		fi; \
		$(PY_DIR)/.venv/bin/python $(PY_DIR)/bench/agent_turns.py $(AGENT_BENCH_N); \
	fi

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

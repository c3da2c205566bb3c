# Two README commands: `make run` and `make test`. Without DATABASE_URL / REDIS_URL they use
# an embedded PostgreSQL and Redis (data in .steward/); see console/dev/services.py. There
# the application connects as `steward_app` and migrations run as `steward_owner`, the two
# roles docs/deploy.md prescribes; the tests and benches also get the server's superuser
# (--tests: STEWARD_TEST_DATABASE_URL) to create their databases with.
# The tiers (docs/testing.md): `make check` (lint and every test that starts no process,
# the inner loop), `make test` (everything but the many-trial runs), `make stress` (those).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
SERVICES := $(PY) -m console.dev.services run --
TEST_SERVICES := $(PY) -m console.dev.services run --tests --
# Debug (this install's own random secrets in .steward/secrets.env, demo logins) only for
# what the Makefile runs: a deploy that sets nothing runs with STEWARD_DEBUG off and
# refuses to start without a key.
DEV := STEWARD_DEBUG=1 STEWARD_AGENT_MODULES=$${STEWARD_AGENT_MODULES-console.dev.demo.agents}
# Python may keep compiled (and pytest's assertion-rewritten) modules: a shell that sets
# PYTHONDONTWRITEBYTECODE made every run and every xdist worker compile the 500 test and
# source modules again, 10 to 20 s each before the first test.
TESTENV := env -u PYTHONDONTWRITEBYTECODE $(DEV)

# `make check` runs the tests that start no process of their own (the `process` marker:
# tests/conftest.py); `make test` runs those (as `make check` does) and then the rest but
# the many-trial fault runs, each test once; `make stress` runs only those.
TEST_MARKERS ?= process and not stress
CHECK_MARKERS ?= not process and not stress
PYTEST_ARGS ?=
# `make test` and `make test-integration` run the tests in this many pytest-xdist worker
# processes at once, a test module to a worker (--dist loadfile, in the order
# tests/conftest.py gives them: the modules that start processes first), on the same PostgreSQL
# and Redis: each worker has its own test database, Celery queue, loopback ports and temp
# folders (tests/conftest.py). Most tests wait on real processes, so two workers use the
# second core. TEST_WORKERS=0 runs them in this one process, as before.
TEST_WORKERS ?= 2
# `make stress` stays in one process: its figures (docs/faults.md) are recovery times,
# which a second worker's load on the same cores would stretch.
STRESS_WORKERS ?= 0
# `make fuzz`: schemathesis with every check against a live server (tests/api/test_fuzz.py),
# FUZZ_EXAMPLES generated cases a route beside its coverage cases, the routes shared out
# among FUZZ_WORKERS processes (--dist load: each has its own server and database).
# `make test` runs the same module at 25 examples a route; FUZZ_SEED draws other cases.
FUZZ_EXAMPLES ?= 100
FUZZ_WORKERS ?= 2
FUZZ_SEED ?= 17

# The README promises that `make test` migrates the database it uses; pytest-django then
# builds its own test database next to it (one per worker). Two pytest sessions: the
# tests in $(2) workers, then the ones marked `serial` (pyproject.toml) in one process
# with nothing beside them. Exit 5 (nothing selected) from one of them is no failure.
define pytest
$(TESTENV) $(TEST_SERVICES) sh -c '$(PY) manage.py migrate --noinput || exit; \
	$(PY) -m pytest -n $(2) --dist loadfile --no-loadscope-reorder -m "($(1)) and not serial" $(PYTEST_ARGS); workers=$$?; \
	$(PY) -m pytest -p no:xdist -m "($(1)) and serial" $(PYTEST_ARGS); alone=$$?; \
	for code in $$workers $$alone; do case $$code in 0|5) ;; *) exit $$code ;; esac; done; \
	[ $$workers = 5 ] && [ $$alone = 5 ] && exit 5; exit 0'
endef

.PHONY: venv run check lint test test-integration stress fuzz coverage bench bench-dense bench-scale bench-lifecycle lint-imports clean handoff handoff-stress

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -e '.[test,bench,pydantic-ai,openai-agents]'
	touch $@

run: venv
	$(DEV) $(SERVICES) $(PY) -m console.dev.run

# The inner loop: lint, format, import contracts, template lint, then every test that
# starts no process (in-process, on the harness: runtime/testing.py), in TEST_WORKERS
# workers, test by test (--dist load: no module here starts anything worth keeping).
# (No migrate of the database itself: pytest-django makes and migrates its own.)
CHECK_PYTEST = $(TESTENV) $(TEST_SERVICES) $(PY) -m pytest -n $(TEST_WORKERS) --dist load -m "$(CHECK_MARKERS)" $(PYTEST_ARGS)

check: lint
	$(CHECK_PYTEST)

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/djlint templates --lint
	$(VENV)/bin/mypy

# The check tier first (it fails fast), then the tests that start processes: every test
# but `stress`, each once (CI ran the in-process ones twice, in `make check` and again
# here: 7 of its 30 minutes). Exit 5 (nothing selected) from either part is no failure:
# PYTEST_ARGS may name tests of one tier only.
test: lint
	$(CHECK_PYTEST) || [ $$? = 5 ]
	$(call pytest,$(TEST_MARKERS),$(TEST_WORKERS)) || [ $$? = 5 ]

test-integration: venv
	$(call pytest,integration and not stress,$(TEST_WORKERS))

stress: venv
	$(call pytest,stress,$(STRESS_WORKERS))

fuzz: venv
	STEWARD_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) STEWARD_FUZZ_SEED=$(FUZZ_SEED) $(TESTENV) $(TEST_SERVICES) sh -c '$(PY) manage.py migrate --noinput || exit; \
	$(PY) -m pytest -n $(FUZZ_WORKERS) --dist load tests/api/test_fuzz.py $(PYTEST_ARGS)'

bench: venv
	@$(DEV) $(TEST_SERVICES) $(PY) -m tests.bench

# A million finished tasks beside an empty database (tests/bench_scale.py). The first run
# loads for several minutes and about 8 GB; later runs reuse the load.
bench-scale: venv
	$(DEV) $(TEST_SERVICES) $(PY) -m tests.bench_scale

# Line coverage of runtime/ and console/ over `make test` (COVERAGE_TARGET=check: over
# `make check`), worker and web processes included: docs/testing.md has the figures.
COVERAGE_TARGET ?= test
coverage: venv
	$(VENV)/bin/pip install -q "coverage>=7.6"
	echo 'import os; os.environ.get("COVERAGE_PROCESS_START") and __import__("coverage").process_startup()' > "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/steward-coverage.pth"
	rm -rf .steward/coverage && mkdir -p .steward/coverage
	COVERAGE_PROCESS_START=$(CURDIR)/pyproject.toml $(MAKE) --no-print-directory $(COVERAGE_TARGET); \
	status=$$?; $(VENV)/bin/coverage combine -q; $(VENV)/bin/coverage report | tail -1; exit $$status

lint-imports: venv
	$(VENV)/bin/lint-imports

clean:
	rm -rf $(VENV) .steward

# A thousand agents on one host (issue 19): the gateway's 1,000 streams, the workers'
# scaling table, DBOS beside them, sleepers (tests/bench_dense.py); about 20 minutes.
bench-dense: venv
	@$(DEV) $(TEST_SERVICES) $(PY) -m tests.bench_dense

# Bounded growth (issue 25, tests/bench_lifecycle.py): 90 simulated days of 1,000 tasks a
# day with 30-day retention on the harness's clock: growth, the daily retention's cost,
# a tree's erasure, audit verify each day, console pages; a few minutes.
bench-lifecycle: venv
	@$(DEV) $(TEST_SERVICES) $(PY) -m tests.bench_lifecycle

# The cross-runtime handoff fixtures (issue 24, docs/handoff.md): the three fixtures against
# Steward and DBOS on the embedded services, HANDOFF_TRIALS trials a race, the traces kept
# in HANDOFF_OUT and the results table written into HANDOFF_DOC from this run's verdicts.
# `make handoff-stress`: 200 trials a race, its traces and table under .steward/.
HANDOFF_TRIALS ?= 20
HANDOFF_SEED ?= 24
HANDOFF_OUT ?= docs/handoff/traces
HANDOFF_DOC ?= docs/handoff.md
handoff: venv
	rm -rf $(HANDOFF_OUT) && mkdir -p $(HANDOFF_OUT)
	HANDOFF_OUT=$(abspath $(HANDOFF_OUT)) HANDOFF_TRIALS=$(HANDOFF_TRIALS) HANDOFF_SEED=$(HANDOFF_SEED) \
	$(TESTENV) $(TEST_SERVICES) sh -c '$(PY) manage.py migrate --noinput || exit; \
	$(PY) -m pytest -p no:xdist -m handoff tests/handoff $(PYTEST_ARGS)'; status=$$?; \
	$(PY) -m tests.handoff.results $(HANDOFF_OUT) $(HANDOFF_DOC) && exit $$status

handoff-stress: venv
	$(MAKE) --no-print-directory handoff HANDOFF_TRIALS=200 HANDOFF_OUT=.steward/handoff-stress HANDOFF_DOC=.steward/handoff-stress/results.md

# kompakt developer entry points. Every target creates .venv itself, so a fresh clone needs only
# `make run` or `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DATA_DIR ?= ./kompakt-data
PORT ?= 9092
ADMIN_PORT ?= 9192

.PHONY: run install test fuzz lint bench docs clean system-deps js-deps native

# Install steps into the one .venv, each on top of the one before: `make run` needs only kompakt and
# its runtime dependencies (RUN_STAMP); `make native` adds setuptools, which numba's pycc links the
# precompiled kernels with (NATIVE_STAMP); `make test` adds the test extra (STAMP: pytest, linters,
# client libraries, moto, duckdb, mkdocs, quixstreams...). So the first `make run` on a fresh clone
# installs neither the test suite nor a compile step before the broker is ready.
RUN_STAMP := $(VENV)/.installed-run
NATIVE_STAMP := $(VENV)/.installed-native

# The kernels compiled ahead of time into the source tree (a wheel install gets them from its
# build hook, hatch_build.py; an editable install does not), rebuilt when a kernel source changed.
native: $(NATIVE_STAMP)
	env -u KOMPAKT_KERNELS $(PY) -m kompakt.aot_build --inplace --if-stale

# `make install`: the run install step alone (tests/test_makefile.py builds a fresh clone with it).
install: $(RUN_STAMP)

$(RUN_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -e .
	touch $(RUN_STAMP)

$(NATIVE_STAMP): pyproject.toml $(RUN_STAMP)
	$(PY) -m pip install --quiet -e '.[native]'
	touch $(NATIVE_STAMP)

$(STAMP): pyproject.toml $(NATIVE_STAMP)
	$(PY) -m pip install --quiet -e '.[test]'
	# quixstreams (the exactly-once e2e test) pins confluent-kafka<2.13; its other dependencies are
	# in the test extra, so it is installed alone on top of kompakt's confluent-kafka 2.16.1.
	$(PY) -m pip install --quiet --no-deps quixstreams==3.28.1
	touch $(STAMP)

# Debian packages and npm modules used by the tests: kcat (client compatibility), chromium (the
# log map in a headless browser), openssl (throwaway TLS certificates, tests/support/tls.py), kafkajs and playwright-core from npm.
system-deps:
	@if ! command -v kcat >/dev/null 2>&1 || [ ! -x /usr/bin/chromium ] || ! command -v openssl >/dev/null 2>&1; then \
		if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat chromium openssl >/dev/null; \
		else echo "kcat/chromium/openssl not installed and cannot apt-get; their tests will fail"; fi; \
	fi

js-deps:
	@if command -v npm >/dev/null 2>&1 && [ ! -d tests/e2e/js/node_modules/kafkajs ]; then \
		cd tests/e2e/js && npm ci --silent --no-audit --no-fund; \
	fi
	@if command -v npm >/dev/null 2>&1 && [ ! -d tests/e2e/web/js/node_modules/playwright-core ]; then \
		cd tests/e2e/web/js && npm ci --silent --no-audit --no-fund; \
	fi

# `make run PORT=19092 ADMIN_PORT=19192 DATA_DIR=/tmp/k` for other ports or another directory.
# Byte-compile first: an editable install has no cached bytecode, and where PYTHONDONTWRITEBYTECODE
# is set (CI images, this project's sandboxes) every start would compile ~150 modules (0.16 s).
# No ahead-of-time kernel build here (about a minute on 2 cores): without one, `kompakt serve`
# compiles the kernels with numba's JIT in a background process that does not delay ready (the
# first compaction waits for it; the result is cached on disk). A fresh `make native` build in the
# tree (`make test` makes one) is used as it is.
run: $(RUN_STAMP)
	$(PY) -m compileall -q src/kompakt
	$(VENV)/bin/kompakt serve --data-dir $(DATA_DIR) --port $(PORT) --admin-port $(ADMIN_PORT)

# The documentation site (mkdocs.yml, docs/): strict, so a broken link or anchor fails the build;
# the CLI reference and the config tables are rendered from the code by docs/hooks.py.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench tools hatch_build.py
	$(VENV)/bin/ruff format --check src tests bench tools hatch_build.py
	$(VENV)/bin/mypy src/kompakt
	$(VENV)/bin/lint-imports

# The suite runs the precompiled kernels, as an install does; the JIT cache is warmed too, for the
# tests that compare the two and those that run with KOMPAKT_KERNELS=jit.
test: native $(STAMP) system-deps js-deps lint docs
	$(PY) -m compileall -q src/kompakt
	KOMPAKT_KERNELS=jit $(PY) -m kompakt.cleaner.warmup
	KOMPAKT_KERNELS=jit $(PY) -m kompakt.table.warmup
	$(PY) -m pytest -q -n 2 --dist loadgroup tests

# The property tests (hypothesis's own ``hypothesis`` mark) under the long "fuzz" profile of
# tests/support/profiles.py: fresh random examples, FUZZ_EXAMPLES per unsized test and proportionally
# more for sized ones, PROTOCOL_FUZZ_EXAMPLES per served protocol version, no per-test timeout.
FUZZ_EXAMPLES ?= 1000
PROTOCOL_FUZZ_EXAMPLES ?= 200
fuzz: native $(STAMP)
	$(PY) -m compileall -q src/kompakt
	KOMPAKT_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) KOMPAKT_PROTOCOL_FUZZ_EXAMPLES=$(PROTOCOL_FUZZ_EXAMPLES) \
		$(PY) -m pytest -q -n 2 --hypothesis-profile=fuzz --timeout=0 -m hypothesis tests

bench: native $(STAMP)
	$(PY) -m compileall -q src/kompakt
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache site

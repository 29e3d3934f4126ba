# rocketstore: build, lint and test entry points.
#
#   make demo    set everything up, then run the demo job on an embedded default
#   make test    set everything up, then run every lint and every test except `slow`
#   make wheel   build and check dist/: a manylinux_2_28 abi3 wheel and an sdist
#   make help    list all targets
#
# Everything is installed into .venv/ (never system-wide). Targets are safe with CI=true
# and no terminal. With CI=true, cargo runs with --locked: a stale Cargo.lock is an error.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
.DELETE_ON_ERROR:
MAKEFLAGS += --no-builtin-rules --no-print-directory

# ---- knobs (override on the command line: `make test PYTEST_ARGS="-k put -x"`) ----------
PYTHON      ?= python3
VENV        ?= .venv
CARGO       ?= cargo
PYTEST_ARGS ?=
# pytest worker processes for `make test` / `make test-all` (pytest-xdist; each worker that runs a
# Spark test starts its own local[2] session). PYTEST_WORKERS=0 runs everything in one process.
PYTEST_WORKERS ?= 2
# Extra arguments for `rocketstore demo`, e.g. DEMO_ARGS="--messages 100_000" or "--no-spark".
DEMO_ARGS   ?=
# Extra arguments for `cargo nextest run` / `cargo test`, e.g. CARGO_TEST_ARGS="-p rocketstore".
CARGO_TEST_ARGS ?=

VENV_BIN := $(VENV)/bin
PY       := $(VENV_BIN)/python
IS_CI    := $(filter 1 true TRUE True yes,$(CI))
LOCKED   := $(if $(IS_CI),--locked)

# Stamp files live inside the venv, so deleting .venv resets them.
DEPS_STAMP   := $(VENV)/.deps.stamp
NATIVE_STAMP := $(VENV)/.native.stamp

# The extension is rebuilt when any Rust source, manifest or the lock file changes.
RUST_INPUTS := Cargo.toml $(wildcard Cargo.lock) \
	$(shell find crates -type f \( -name '*.rs' -o -name Cargo.toml \) 2>/dev/null)
# ... or when the compiled module is missing (e.g. after `git clean`).
ifeq ($(wildcard python/rocketstore/_native*.so),)
NATIVE_FORCE := FORCE
endif

export PIP_DISABLE_PIP_VERSION_CHECK := 1
export PIP_NO_INPUT := 1
ifneq ($(IS_CI),)
export PIP_PROGRESS_BAR := off
export CARGO_TERM_PROGRESS_WHEN := never
endif
# The PyO3 crate's test binaries link libpython; cargo does not put the interpreter's lib
# directory on the loader path by itself, so add it (no-op for a static Python).
PY_LIBDIR := $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR") or "")' 2>/dev/null)
ifneq ($(PY_LIBDIR),)
export LD_LIBRARY_PATH := $(PY_LIBDIR)$(if $(LD_LIBRARY_PATH),:$(LD_LIBRARY_PATH))
endif

# Each section says when it started (UTC), so a CI log shows where the time goes.
say = @printf '\n==> [%s] %s\n' "$$(date -u +%H:%M:%S)" "$(1)"

.PHONY: help venv build jvm wheel lint lint-rust lint-python fmt-check clippy rustdoc ruff mypy stubtest py-import-cycles layering shared-builds \
	test test-all test-rust test-rust-all rust-tests rust-doctests rust-crash-tests \
	rust-failpoint-tests rust-powerloss-tests bench-check test-rust-in-order test-python test-python-all java-check \
	demo bench fmt clean clean-py FORCE

help: ## Show this list
	@echo "rocketstore make targets (the two you need: 'make demo' and 'make test'):"
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) \
		| awk -F':.*## ' '{ printf "  make %-12s %s\n", $$1, $$2 }'

# ---- set-up ---------------------------------------------------------------------------

$(DEPS_STAMP): requirements-dev.txt
	$(call say,Checking for Python >= 3.11 ($(PYTHON)))
	@$(PYTHON) -c 'import sys; v = sys.version_info; sys.exit(0 if v >= (3, 11) else f"rocketstore needs Python >= 3.11 but $(PYTHON) is {v.major}.{v.minor}; run: make PYTHON=/path/to/python3.11 ...")'
	@if ! $(PY) -c 'import sys' >/dev/null 2>&1; then \
		printf '\n==> Creating the virtual environment %s/\n' "$(VENV)"; \
		rm -rf "$(VENV)"; \
		echo "$(PYTHON) -m venv $(VENV)"; \
		$(PYTHON) -m venv "$(VENV)"; \
	fi
	$(call say,Installing Python dependencies from requirements-dev.txt into $(VENV)/ (the first time downloads several hundred MB: pyspark, pyarrow, ...))
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -r requirements-dev.txt
	@touch $@

venv: $(DEPS_STAMP) ## Create .venv and install the Python tools and libraries (no Rust build)

# ---- release builds: one target, one linker --------------------------------------------
# Every release build of the workspace (the extension installed into .venv, the JVM connector's
# library, the wheel, the benches) compiles for $(RUST_TRIPLE) with zig (the `ziglang` package,
# run through maturin's `maturin zig cc`/`zig ar`) as C compiler and linker, against glibc 2.28's
# symbols. The libraries made by `make build` are then the ones the wheel ships, they run on
# RHEL 8, Debian 11, Ubuntu 20.04 and newer whatever glibc this machine has, and the engine and
# its dependencies are compiled once for all of them (the same target directory, the same
# compiler environment, the same features: tests/check_shared_builds.py).
ARCH         := $(shell uname -m)
CARGO_TARGET := $(or $(CARGO_TARGET_DIR),target)
ZIG_TRIPLE   := $(ARCH)-linux-gnu.2.28
RUST_TRIPLE  := $(ARCH)-unknown-linux-gnu
RUST_TRIPLE_ENV := $(subst -,_,$(RUST_TRIPLE))
RUST_TRIPLE_UPPER := $(shell echo $(RUST_TRIPLE_ENV) | tr a-z A-Z)
RELEASE_DIR  := $(CARGO_TARGET)/$(RUST_TRIPLE)/release
ZIG_WRAPPERS := $(abspath $(VENV))/zig
ZIG_STAMP    := $(ZIG_WRAPPERS)/.stamp
ZIG_ENV      := PATH="$(abspath $(VENV_BIN)):$$PATH" CC_$(RUST_TRIPLE_ENV)=$(ZIG_WRAPPERS)/cc \
	AR_$(RUST_TRIPLE_ENV)=$(ZIG_WRAPPERS)/ar CARGO_TARGET_$(RUST_TRIPLE_UPPER)_LINKER=$(ZIG_WRAPPERS)/cc

$(ZIG_STAMP): $(DEPS_STAMP)
	@mkdir -p $(ZIG_WRAPPERS)
	@printf '#!/bin/sh\nexec "%s" zig cc -- -g -fno-sanitize=all -target $(ZIG_TRIPLE) "$$@"\n' "$(abspath $(VENV_BIN))/maturin" > $(ZIG_WRAPPERS)/cc
	@printf '#!/bin/sh\nexec "%s" zig ar -- "$$@"\n' "$(abspath $(VENV_BIN))/maturin" > $(ZIG_WRAPPERS)/ar
	@chmod +x $(ZIG_WRAPPERS)/cc $(ZIG_WRAPPERS)/ar
	@touch $@

$(NATIVE_STAMP): $(DEPS_STAMP) $(ZIG_STAMP) $(RUST_INPUTS) pyproject.toml $(NATIVE_FORCE)
	$(call say,Resolving Rust dependencies (Cargo.lock$(if $(IS_CI), must be up to date in CI, is refreshed if a manifest changed)))
	$(CARGO) fetch $(LOCKED)
	$(call say,Building the Rust extension rocketstore._native (release, $(RUST_TRIPLE) linked by zig against glibc 2.28) and installing the package into $(VENV)/ (editable: python/ is used in place))
	VIRTUAL_ENV="$(abspath $(VENV))" $(ZIG_ENV) \
		$(VENV_BIN)/maturin develop --release --locked --target $(RUST_TRIPLE)
	@touch $@

# ---- the JVM Spark connector: jvm/ (Java, javac) + crates/rocketstore-jni (the .so) ---------
# One jar, python/rocketstore/spark/jvm/rocketstore-spark.jar (gitignored; the wheel ships it),
# holding the classes and, as the resource rocketstore/spark/native/linux-<arch>/ (glibc; a musl
# build's is linux-<arch>-musl/), the native library, which every JVM that has the jar (the
# driver's and each executor's) loads from it. jvm/build.py is the recipe, here and in the
# release workflow. The library is linked by zig against glibc 2.28's symbols, as the extension
# is, for `make jvm` and `make wheel` alike. Without javac the jar is skipped (with a
# note) and Spark jobs use the Python data source.
JVM_DIR      := python/rocketstore/spark/jvm
JVM_JAR      := $(JVM_DIR)/rocketstore-spark.jar
JVM_SOURCES  := $(shell find jvm/src -type f 2>/dev/null)
JVM_LIB      := $(VENV)/jni/librocketstore_jni.so

$(JVM_LIB): $(DEPS_STAMP) $(ZIG_STAMP) $(RUST_INPUTS) jvm/build.py
	$(call say,Building the JVM connector's native library (crates/rocketstore-jni, release, $(RUST_TRIPLE) linked by zig against glibc 2.28))
	@# jvm/build.py (shared with the release workflow) builds it as maturin builds the extension:
	@# the library alone, as a cdylib, in the same target and environment. Its dependencies are
	@# then compiled as for the extension (bitcode only, for the cdylib's LTO), so the build reuses
	@# them (tests/check_shared_builds.py); with the crate's rlib as well they would be compiled
	@# again.
	$(ZIG_ENV) CARGO="$(CARGO)" $(PY) jvm/build.py jni $(LOCKED) --target $(RUST_TRIPLE) --out $@

# pack-jar LIB: compiles jvm/ against PySpark's jars and writes $(JVM_JAR) with LIB inside
# (jvm/build.py, the recipe the release workflow runs too).
define pack-jar
	@javac="$${JAVA_HOME:+$$JAVA_HOME/bin/}javac"; \
	if ! command -v "$$javac" >/dev/null 2>&1; then \
		echo "NOTE: no javac: the JVM Spark connector is not built; Spark jobs use the Python data source."; \
		exit 0; \
	fi; \
	printf '\n==> %s\n' "Compiling the JVM Spark connector (jvm/) against PySpark's jars into $(JVM_JAR), with $(1)"; \
	out="$$(mktemp -d)"; trap 'rm -rf "$$out"' EXIT; \
	$(PY) jvm/build.py classes --out "$$out/classes"; \
	rm -f $(JVM_DIR)/librocketstore_jni.so; \
	$(PY) jvm/build.py jar --classes "$$out/classes" --lib $(1) --target $(RUST_TRIPLE) --out $(JVM_JAR)
endef

$(JVM_JAR): $(DEPS_STAMP) $(JVM_SOURCES) $(JVM_LIB) jvm/build.py
	$(call pack-jar,$(JVM_LIB))

jvm: $(JVM_JAR) ## Build the JVM Spark connector (one jar, the native library inside) into python/rocketstore/spark/jvm/

build: $(NATIVE_STAMP) jvm ## Create .venv and build + install the extension and the JVM reader (then use .venv/bin/python)
	@$(PY) -c 'import rocketstore._native as n; print(f"\n==> Ready: rocketstore._native {n.__version__} imports in $(VENV)/bin/python")'

# ---- packaging ------------------------------------------------------------------------

# The release wheel: abi3 (one wheel for CPython 3.11+), linked by zig (the `ziglang` package
# in requirements-dev.txt) against glibc 2.28's symbols, so pip installs it on RHEL 8, Debian 11,
# Ubuntu 20.04 and newer, whatever glibc this machine has. tests/check_wheel.py checks the tags,
# the ELF's libraries and GLIBC_ symbol versions, and prints `auditwheel show`.
DIST         := dist
WHEEL_COMPAT := manylinux_2_28
WHEEL_STAMP  := $(DIST)/.wheel.stamp
PY_INPUTS    := $(shell find python -type f \( -name '*.py' -o -name '*.pyi' -o -name py.typed \) 2>/dev/null)

# The wheel ships the jar `make build` made (its JNI library linked by zig like the extension).
# maturin builds the extension in the target and environment of the other release builds (not
# with its own --zig, whose compiler wrappers differ and would recompile every C dependency and
# everything above it), then checks the result against the manylinux_2_28 policy.
$(WHEEL_STAMP): $(DEPS_STAMP) $(ZIG_STAMP) $(JVM_JAR) $(RUST_INPUTS) $(PY_INPUTS) pyproject.toml README.md tests/check_wheel.py
	$(call say,Building the release wheel into $(DIST)/: $(WHEEL_COMPAT) abi3, $(RUST_TRIPLE) linked by zig (cargo --locked), with the JVM connector's jar)
	rm -rf "$(DIST)"
	VIRTUAL_ENV="$(abspath $(VENV))" $(ZIG_ENV) \
		$(VENV_BIN)/maturin build --release --locked --strip --target $(RUST_TRIPLE) \
		--compatibility $(WHEEL_COMPAT) --interpreter $(PY) --out $(DIST)
	$(call say,Building the sdist into $(DIST)/)
	$(VENV_BIN)/maturin sdist --out $(DIST)
	$(call say,Checking $(DIST)/ (tests/check_wheel.py): tags; ELF libraries and GLIBC_ versions <= 2.28 (the extension and the jar's JNI library); auditwheel show; sdist files)
	$(PY) tests/check_wheel.py --max-glibc 2.28 --require-sdist --require-jvm $(DIST)
	@touch $@

wheel: $(WHEEL_STAMP) ## Build and check dist/: a manylinux_2_28 abi3 wheel (linked by zig) and an sdist

java-check: ## Check that Java 17+ is available (Spark and the Java test fixtures need it)
	$(call say,Checking for Java 17 or newer (PySpark starts a JVM))
	@java="$${JAVA_HOME:+$$JAVA_HOME/bin/}java"; \
	if ! command -v "$$java" >/dev/null 2>&1; then \
		echo "ERROR: no Java found ($$java). Spark 4 needs Java 17 or newer." >&2; \
		echo "       Debian/Ubuntu: sudo apt-get install -y openjdk-17-jdk-headless" >&2; \
		echo "       or point JAVA_HOME at a JDK 17+." >&2; \
		exit 1; \
	fi; \
	"$$java" -version 2>&1 | sed 's/^/    /'; \
	spec=$$("$$java" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java\.specification\.version = //p'); \
	major=$${spec#1.}; major=$${major%%.*}; \
	if ! [[ "$$major" =~ ^[0-9]+$$ ]] || (( major < 17 )); then \
		echo "ERROR: $$java is Java '$$spec'; Spark 4 needs Java 17 or newer (set JAVA_HOME or install openjdk-17-jdk-headless)." >&2; \
		exit 1; \
	fi; \
	echo "    OK: Java $$major"
ifneq ($(wildcard tests/fixtures/java/*.java),)
	@javac="$${JAVA_HOME:+$$JAVA_HOME/bin/}javac"; \
	if ! command -v "$$javac" >/dev/null 2>&1; then \
		echo "ERROR: no javac found ($$javac). The test fixtures in tests/fixtures/java/ are compiled" >&2; \
		echo "       at test time, so a JDK (not only a JRE) is needed: sudo apt-get install -y openjdk-17-jdk-headless" >&2; \
		exit 1; \
	fi; \
	echo "    OK: $$("$$javac" -version 2>&1) (compiles the Java fixtures in tests/fixtures/java/)"
endif

# ---- lint (CI is the style guide) ------------------------------------------------------

lint: lint-rust lint-python ## All style checks: rustfmt, clippy, rustdoc, ruff, mypy, stubtest, import circles

lint-rust: fmt-check layering shared-builds clippy rustdoc
lint-python: ruff mypy stubtest py-import-cycles

fmt-check:
	$(call say,Rust formatting: cargo fmt --check (fix with 'make fmt'))
	$(CARGO) fmt --all --check

layering:
	$(call say,Rust layering: no import circle in any crate, no upward import (tests/check_layering.py))
	$(PYTHON) tests/check_layering.py

shared-builds:
	$(call say,Shared release builds: the extension + the JVM library + the benches ask for the same dependency features (tests/check_shared_builds.py))
	$(PYTHON) tests/check_shared_builds.py

clippy:
	$(call say,Rust lints: clippy with warnings as errors)
	$(CARGO) clippy $(LOCKED) --workspace --all-targets --all-features -- -D warnings

rustdoc:
	$(call say,Rust docs: rustdoc with warnings as errors)
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc $(LOCKED) --workspace --no-deps

ruff: $(DEPS_STAMP)
	$(call say,Python lint and formatting: ruff (fix with 'make fmt'))
	$(VENV_BIN)/ruff check
	$(VENV_BIN)/ruff format --check

mypy: $(DEPS_STAMP)
	$(call say,Python types: mypy --strict (python/ and tests/))
	$(VENV_BIN)/mypy

py-import-cycles: $(DEPS_STAMP)
	$(call say,Python import circles: no two modules of python/rocketstore import each other (tests/check_python_imports.py))
	$(PY) tests/check_python_imports.py python/rocketstore

STUBTEST_ALLOWLIST := $(if $(wildcard stubtest-allowlist.txt),--allowlist stubtest-allowlist.txt)

stubtest: build
	$(call say,Stub check: python/rocketstore/_native.pyi against the compiled module)
	@# stubtest passes silently when there is no stub at all, so check for it first.
	@[ -f python/rocketstore/_native.pyi ] || { echo "ERROR: python/rocketstore/_native.pyi is missing (the hand-written stub for rocketstore._native)" >&2; exit 1; }
	$(PY) -m mypy.stubtest rocketstore._native --mypy-config-file pyproject.toml $(STUBTEST_ALLOWLIST)

fmt: $(DEPS_STAMP) ## Reformat Rust and Python code and apply safe ruff fixes
	$(call say,Formatting Rust (cargo fmt) and Python (ruff); what cannot be fixed automatically is listed)
	$(CARGO) fmt --all
	$(VENV_BIN)/ruff check --fix --exit-zero
	$(VENV_BIN)/ruff format

# ---- tests ---------------------------------------------------------------------------

# `make -k` (as in .ci/run): whether to go on after a failed step, to report every failure.
KEEP_GOING := $(findstring k,$(filter-out --%,$(firstword -$(MAKEFLAGS))))

# Three phases, each started only if the ones before passed (or with -k), each running two jobs
# at once with every step's output kept together: the virtualenv (pip, mostly waiting on the
# network) beside the Rust lints; ruff and mypy beside the release build of the extension that
# stubtest checks; the Rust tests one after another (the kill -9 harness keeps about one core
# busy) beside the release wheel (it reuses the release build: only the extension crate is
# compiled again, stripped) and then the Python tests. The result is the same as running the
# steps in order.
TEST_PHASES := "-j2 --output-sync=target java-check venv lint-rust" \
	"-j2 --output-sync=target lint-python" \
	"-j2 --output-sync=target test-rust-in-order test-python"

test: ## Lints + Rust tests + Python tests (all but `slow`)
	@st=0; \
	for phase in $(TEST_PHASES); do \
		if [ $$st -eq 0 ] || [ -n "$(KEEP_GOING)" ]; then $(MAKE) $$phase || st=$$?; fi; \
	done; \
	if [ $$st -eq 0 ]; then printf '\n==> %s\n' "All checks passed"; fi; \
	exit $$st

# test-rust's steps one at a time, as a single job of a parallel make: the kill -9 harness first,
# so that the wheel's compile (the other job) overlaps the harness's waits more than the compile
# of the other test binaries.
test-rust-in-order:
	@$(MAKE) -j1 $(TEST_RUST_STEPS)

test-all: java-check lint test-rust-all test-python-all ## Like `test`, plus slow tests and #[ignore]d Rust tests
	$(call say,All checks passed (including slow tests))

# Conventions the engine crate follows (see README, "Development"):
#   crates/rocketstore/tests/failpoints{.rs,/main.rs}  [[test]] failpoints, required-features =
#       ["failpoints"]; run alone with one thread (the failpoint registry is process-global)
#   crates/rocketstore/tests/crash{.rs,/main.rs}       [[test]] crash, harness = false; it is run
#       with `cargo test --test crash` because nextest needs the libtest --list protocol
# Slow Rust tests are #[ignore]d; `make test-all` runs them.
CRASH_TEST     := $(wildcard crates/rocketstore/tests/crash.rs crates/rocketstore/tests/crash/main.rs)
FAILPOINT_TEST := $(wildcard crates/rocketstore/tests/failpoints.rs crates/rocketstore/tests/failpoints/main.rs)
HAVE_NEXTEST   := $(shell $(CARGO) nextest --version >/dev/null 2>&1 && echo yes)

test-rust-all: NEXTEST_EXTRA := --run-ignored all
test-rust-all: LIBTEST_EXTRA := --include-ignored
# The slow crash sweep (400 SYNC/ASYNC kill -9 runs + 30 crashes during recovery).
test-rust-all: CRASH_ENV := ROCKETSTORE_CRASH_SLOW=1

# Separate steps, so that `make -k` (as in .ci/run) still runs the others after a failure.
# The benches are type-checked by clippy (--all-targets) in `make test`; linking their release
# binaries (bench-check, ~3 minutes on 2 cores) is left to `make test-all` and `make bench`.
TEST_RUST_STEPS := rust-crash-tests rust-tests rust-doctests rust-failpoint-tests rust-powerloss-tests
test-rust: $(TEST_RUST_STEPS) ## Rust tests: nextest (or cargo test), doctests, crash, failpoint and power-loss tests
test-rust-all: $(TEST_RUST_STEPS) bench-check

rust-tests:
	$(call say,Rust tests$(if $(LIBTEST_EXTRA), including ignored ones))
ifneq ($(HAVE_NEXTEST),)
	$(CARGO) nextest run $(LOCKED) --workspace --no-tests=warn $(if $(IS_CI),--profile ci) $(if $(CRASH_TEST),-E 'not binary(=crash)') $(NEXTEST_EXTRA) $(CARGO_TEST_ARGS)
else
	@echo "(cargo-nextest is not installed; using cargo test)"
	$(CARGO) test $(LOCKED) --workspace --lib --bins --tests $(CARGO_TEST_ARGS) -- $(LIBTEST_EXTRA)
endif

rust-doctests:
	$(call say,Rust doctests)
	$(CARGO) test $(LOCKED) --workspace --doc $(CARGO_TEST_ARGS)

rust-crash-tests:
ifneq ($(and $(CRASH_TEST),$(HAVE_NEXTEST)),)
	$(call say,Rust crash tests (harness = false: run by cargo test; the harness kills its own child processes))
	$(CRASH_ENV) $(CARGO) test $(LOCKED) -p rocketstore --test crash
endif

bench-check: $(ZIG_STAMP)
ifneq ($(wildcard benches/Cargo.toml),)
	$(call say,Rust benchmarks compile: cargo bench --no-run)
	$(ZIG_ENV) $(CARGO) bench $(LOCKED) --target $(RUST_TRIPLE) -p rocketstore-benches --no-run
endif

rust-failpoint-tests:
ifneq ($(FAILPOINT_TEST),)
	$(call say,Rust failpoint tests (feature failpoints, one test thread))
	$(CARGO) test $(LOCKED) -p rocketstore --features failpoints --test failpoints -- --test-threads 1 $(LIBTEST_EXTRA)
ifneq ($(CRASH_TEST),)
	$(call say,Rust crash harness at every failpoint (feature failpoints: a SYNC writer aborts at each I/O call site; the kill -9 sections run in rust-crash-tests))
	ROCKETSTORE_CRASH_RUNS=0 ROCKETSTORE_RECOVERY_CRASH_RUNS=0 ROCKETSTORE_CRASH_PAUSED=0 \
		$(CARGO) test $(LOCKED) -p rocketstore --features failpoints --test crash
endif
endif

POWERLOSS_TEST := $(wildcard crates/rocketstore/tests/powerloss.rs)

rust-powerloss-tests:
ifneq ($(POWERLOSS_TEST),)
	$(call say,Rust power-loss image tests (feature powerloss: a simulated disk under the mapped files))
	$(CARGO) test $(LOCKED) -p rocketstore --features powerloss --test powerloss -- --nocapture $(LIBTEST_EXTRA)
endif

# The wheel is built first: tests/test_wheel.py installs it into a new virtualenv.
test-python: build wheel java-check ## Python tests: pytest -m 'not slow' (builds dist/ first)
	$(call say,Python tests: pytest -m 'not slow' in $(PYTEST_WORKERS) worker processes)
	$(PY) -m pytest -m "not slow" -n $(PYTEST_WORKERS) --dist worksteal --durations 15 $(PYTEST_ARGS)

test-python-all: build wheel java-check
	$(call say,Python tests: pytest (all markers, including slow))
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

# ---- run -----------------------------------------------------------------------------

# The `rocketstore` command is [project.scripts] in pyproject.toml -> rocketstore.cli:main.
CLI_CHECK = @$(PY) -c 'import rocketstore.cli' 2>/dev/null || { \
	echo "ERROR: rocketstore.cli cannot be imported: python/rocketstore/cli/ (with main()) is missing or broken." >&2; \
	$(PY) -c 'import rocketstore.cli' >&2 || true; exit 1; }

demo: build java-check ## Run the main job on generated data: Spark ingest of 1,000,000 messages into ./demo-store, then verify
	$(CLI_CHECK)
	$(call say,Running the demo job with Spark local[*]: $(VENV_BIN)/rocketstore demo $(DEMO_ARGS) (report in demo-store/_report/))
	$(VENV_BIN)/rocketstore demo $(DEMO_ARGS)

# `make bench`: the criterion benches, then the suite BENCHMARKS.md is made from; the page's
# tables (between its <!-- BEGIN bench:NAME --> markers), benches/peers.png and the raw figures
# (benches/bench.json) are written from this one run. ~15-20 minutes on 2 cores.
BENCH_ARGS ?= --sizes 100,1024 --peers --spark --remote --scale --follow
bench: build ## Run the criterion benches and `rocketstore bench` (peers, Spark, scale); write BENCHMARKS.md's tables
	$(CLI_CHECK)
	@start=$$(date +%s); summary="$$(mktemp)"; trap 'rm -f "$$summary"' EXIT; \
	if [ -f benches/Cargo.toml ]; then \
		printf '\n==> %s\n' "Rust benchmarks: cargo bench -p rocketstore-benches (ROCKETSTORE_BENCH_DIR picks the disk)"; \
		ROCKETSTORE_BENCH_SUMMARY="$$summary" $(ZIG_ENV) $(CARGO) bench $(LOCKED) --target $(RUST_TRIPLE) -p rocketstore-benches || exit $$?; \
	fi; \
	printf '\n==> %s\n' "The suite: $(VENV_BIN)/rocketstore bench $(BENCH_ARGS) (writes BENCHMARKS.md's tables)"; \
	$(VENV_BIN)/rocketstore bench $(BENCH_ARGS) --json benches/bench.json \
		--markdown BENCHMARKS.md --plot benches/peers.png \
		--criterion $(CARGO_TARGET)/criterion --criterion-summary "$$summary" --since $$start

# ---- clean-up ------------------------------------------------------------------------

clean-py: ## Remove .venv, the built extension and Python caches (keeps the Rust target/ dir)
	rm -rf "$(VENV)" .pytest_cache .mypy_cache .ruff_cache .hypothesis dist demo-store
	rm -f python/rocketstore/_native*.so
	rm -rf $(JVM_DIR)
	find python tests -type d -name __pycache__ -prune -exec rm -rf {} + 2>/dev/null || true

clean: clean-py ## Remove everything built (clean-py + cargo clean); next build starts from scratch
	$(CARGO) clean

FORCE:

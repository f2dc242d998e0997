# The two commands a newcomer runs: `make demo` and `make test`.
# Both install what is missing (scripts/install-deps.sh), configure, build with
# two jobs, then run. Re-running them installs nothing twice. `make demo`
# installs only what the C++ build needs (deps-cxx); `make test` and
# `make build` install everything the tests use (deps).

BUILD_DIR   ?= build
SAN_DIR     ?= build-asan
TSAN_DIR    ?= build-tsan
JOBS        ?= 2
PYTHON      ?= python3
CMAKE       ?= cmake
CTEST       ?= ctest
CMAKE_FLAGS ?=
# The build tree's build type and -Werror; the wheel (deps) compiles its
# engine with the same two, so ccache serves it from the build tree's objects.
BUILD_TYPE  ?= RelWithDebInfo
WERROR      ?= ON


# The AOTInductor packages the serving benchmarks run (exported by the
# aoti_packages target, as for the tests).
AOTI_ENV = TENSORDICT_AOTI_PACKAGES=$(abspath $(BUILD_DIR))/tests/python/aoti_packages

TORCH_PREFIX = $(shell $(PYTHON) -c 'import torch;print(torch.utils.cmake_prefix_path)')

.PHONY: all deps deps-cxx configure build demo test test-sanitize bench install clean \
        format format-check stress fuzz test-tsan docs

all: build

# What configuring and compiling the C++ project needs: the Debian packages
# of the build and torch==2.13.0; no Python package of ours, no TorchRL.
deps-cxx:
	@CXX_ONLY=1 ./scripts/install-deps.sh

# Everything the tests use besides: the tools (clang-format, valgrind,
# clang-14, doxygen), tensordict and the other Python packages of the interop
# tests, the project's package python/ (built in $(BUILD_DIR)/wheel, its
# engine in $(BUILD_DIR)-wheel-engine with the build tree's compile commands,
# so ccache serves the engine from the build tree's objects instead of
# compiling it twice) and TorchRL's virtual environment. Cheap when everything
# is present: the script only checks dpkg and pip metadata, and hashes the
# sources of the Python package. The stamp .deps-complete marks a build tree
# whose deps are complete (see `build`).
deps: deps-cxx
	@TORCHRL_VENV=$(abspath $(BUILD_DIR))/torchrl-venv \
	  WHEEL_BUILD_DIR=$(abspath $(BUILD_DIR))/wheel \
	  WHEEL_ENGINE_DIR=$(abspath $(BUILD_DIR))-wheel-engine \
	  WHEEL_BUILD_TYPE=$(BUILD_TYPE) WHEEL_WERROR=$(WERROR) JOBS=$(JOBS) ./scripts/install-deps.sh
	@mkdir -p $(BUILD_DIR) && { [ -e $(BUILD_DIR)/.deps-complete ] || touch $(BUILD_DIR)/.deps-complete; }

$(BUILD_DIR)/CMakeCache.txt: | deps-cxx
	$(CMAKE) -S . -B $(BUILD_DIR) -DCMAKE_PREFIX_PATH="$(TORCH_PREFIX)" \
	  -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DTENSORDICT_WERROR=$(WERROR) $(CMAKE_FLAGS)
	@[ ! -e $(BUILD_DIR)/.deps-complete ] || touch $(BUILD_DIR)/.configured-complete

configure: $(BUILD_DIR)/CMakeCache.txt

# tests/rl and tests/wheel add their tests at configure time only when
# TorchRL's venv and the wheel's Python packages exist. A tree configured by
# `make demo` (deps-cxx only) is configured once more after the full deps;
# .configured-complete marks a tree configured with them.
build: deps configure
	@if [ ! -e $(BUILD_DIR)/.configured-complete ]; then \
	  echo "build: configuring again, now with the test dependencies"; \
	  $(CMAKE) -S . -B $(BUILD_DIR) && touch $(BUILD_DIR)/.configured-complete; \
	fi
	$(CMAKE) --build $(BUILD_DIR) -j $(JOBS)

# Only the library and the example: a newcomer waits for nothing else, and
# installs nothing the C++ build does not need (deps-cxx).
demo: deps-cxx configure
	$(CMAKE) --build $(BUILD_DIR) -j $(JOBS) --target quickstart
	./$(BUILD_DIR)/bin/quickstart

test: build
	cd $(BUILD_DIR) && $(CTEST) --output-on-failure -j $(JOBS)

# Google Benchmark of the C++ ops against their raw baselines, then each
# benchmarks/python_*.py times Python on the same work; instructions.py
# counts the per-leaf ops' instructions under callgrind (load-independent);
# report.py prints a table and writes build/bench/report.json and report.png.
bench: build
	$(CMAKE) --build $(BUILD_DIR) -j $(JOBS) --target tensor_dict_benchmark aoti_packages \
	  python_casters point_mass_env
	rm -rf $(BUILD_DIR)/bench && mkdir -p $(BUILD_DIR)/bench
	$(AOTI_ENV) ./$(BUILD_DIR)/bin/tensor_dict_benchmark --benchmark_format=console \
	  --benchmark_out=$(BUILD_DIR)/bench/cpp.json --benchmark_out_format=json
	$(PYTHON) benchmarks/instructions.py ./$(BUILD_DIR)/bin/tensor_dict_benchmark \
	  $(BUILD_DIR)/bench/instructions.json
	set -e; for script in benchmarks/python_*.py; do \
	  TENSORDICT_BUILD_DIR=$(abspath $(BUILD_DIR)) $(AOTI_ENV) $(PYTHON) $$script $(BUILD_DIR)/bench/$$(basename $$script .py).json; \
	done
	$(PYTHON) benchmarks/report.py $(BUILD_DIR)/bench $(BUILD_DIR)/bench/cpp.json \
	  $(BUILD_DIR)/bench/python_*.json

# The long kill test: KILL_ROUNDS kills of each writing operation (fresh
# save, overwrite, threaded overwrite, memmap_, make_memmap, consolidate to a
# file, append_memmap), each followed by a load that must give the old data
# or the new.
KILL_ROUNDS ?= 100
stress: deps configure
	$(CMAKE) --build $(BUILD_DIR) -j $(JOBS) --target unit_tests
	TENSORDICT_KILL_ROUNDS=$(KILL_ROUNDS) ./$(BUILD_DIR)/bin/unit_tests \
	  --gtest_filter='CrashSafetyStressTest.*'

# One instrumented tree for the sanitizer pass and the fuzzers: clang, ASan +
# UBSan, and libFuzzer's coverage instrumentation (TENSORDICT_FUZZ), so the
# library and the CLI's library compile once for both.
$(SAN_DIR)/CMakeCache.txt: | deps
	CC=clang-14 CXX=clang++-14 $(CMAKE) -S . -B $(SAN_DIR) \
	  -DCMAKE_PREFIX_PATH="$(TORCH_PREFIX)" -DCMAKE_BUILD_TYPE=Debug \
	  -DTENSORDICT_SANITIZE=ON -DTENSORDICT_FUZZ=ON \
	  -DTENSORDICT_BUILD_EXAMPLES=OFF -DTENSORDICT_BUILD_BENCHMARKS=OFF \
	  $(CMAKE_FLAGS)

# The gtest binaries (unit_tests, rl_tests) under AddressSanitizer +
# UndefinedBehaviorSanitizer, one process per core (ctest's process per test
# would spend most of the run starting the instrumented binary). Both run
# even when the first fails, each ending with its own summary line; the
# target fails if either does.
SAN_TESTS = unit_tests rl_tests
test-sanitize: deps $(SAN_DIR)/CMakeCache.txt
	$(CMAKE) --build $(SAN_DIR) -j $(JOBS) --target $(SAN_TESTS)
	status=0; for binary in $(SAN_TESTS); do \
	  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
	    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	    ./scripts/run-gtest-shards.sh $(SAN_DIR)/bin/$$binary $(JOBS) || status=1; \
	done; exit $$status

# libFuzzer (clang, ASan + UBSan) over every reader of untrusted input: each
# target runs FUZZ_SECONDS seconds from a corpus seeded with real trees,
# JOBS targets at a time. Built in the sanitizer pass's tree.
fuzz: deps $(SAN_DIR)/CMakeCache.txt
	$(CMAKE) --build $(SAN_DIR) -j $(JOBS) --target fuzz_targets tensordict_cli
	$(PYTHON) fuzz/make_corpus.py $(SAN_DIR)
	FUZZ_JOBS=$(JOBS) ./fuzz/run.sh $(SAN_DIR) $(or $(FUZZ_SECONDS),60)

$(TSAN_DIR)/CMakeCache.txt: | deps
	$(CMAKE) -S . -B $(TSAN_DIR) -DCMAKE_PREFIX_PATH="$(TORCH_PREFIX)" \
	  -DCMAKE_BUILD_TYPE=Debug -DTENSORDICT_TSAN=ON \
	  -DTENSORDICT_BUILD_EXAMPLES=OFF -DTENSORDICT_BUILD_BENCHMARKS=OFF \
	  $(CMAKE_FLAGS)

# The unit tests and rl_tests (among them every test that starts threads
# of ours, the collector's pool included) and distributed_test (ranks as
# processes and as threads) under ThreadSanitizer; fails on any report
# (scripts/run-tsan.sh).
test-tsan: deps $(TSAN_DIR)/CMakeCache.txt
	$(CMAKE) --build $(TSAN_DIR) -j $(JOBS) --target unit_tests rl_tests distributed_test
	./scripts/run-tsan.sh $(TSAN_DIR) $(JOBS)

install: build
	$(CMAKE) --install $(BUILD_DIR) --prefix $(or $(PREFIX),$(BUILD_DIR)/install)

# clang-format over every C++ file git tracks (.clang-format: STYLE.md's).
FORMAT_FILES = $(shell git ls-files '*.h' '*.cpp')
format:
	clang-format -i $(FORMAT_FILES)

# Also refuses issue numbers in code: comments say why, not which ticket.
format-check: deps
	clang-format --dry-run --Werror $(FORMAT_FILES)
	@! git grep -nwE 'issue [0-9]+' -- $(FORMAT_FILES) || \
	  { echo "format-check: issue numbers in code comments (above)"; exit 1; }

# The API reference and the pages of docs/: doxygen over the public headers
# and docs/*.md, docs/index.md the main page (docs/Doxyfile). Any warning fails it, an undocumented public
# declaration among them. It reads headers only, so it installs only the
# Debian packages (APT_ONLY) and builds nothing.
docs:
	@APT_ONLY=1 ./scripts/install-deps.sh
	mkdir -p $(BUILD_DIR)/docs
	{ cat docs/Doxyfile; echo 'OUTPUT_DIRECTORY = $(BUILD_DIR)/docs'; } | doxygen -
	@echo "docs: open $(BUILD_DIR)/docs/html/index.html"

clean:
	rm -rf $(BUILD_DIR) $(BUILD_DIR)-wheel-engine $(SAN_DIR) $(TSAN_DIR)
	@# The sanitizer and fuzz trees of earlier layouts.
	rm -rf build-sanitize build-fuzz

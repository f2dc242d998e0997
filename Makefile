# The two commands a newcomer runs: `make demo` and `make test`.
# Both install what is missing (scripts/install-deps.sh), configure, build with
# two jobs, then run. Re-running them installs nothing twice.

BUILD_DIR   ?= build
SAN_DIR     ?= build-sanitize
JOBS        ?= 2
PYTHON      ?= python3
CMAKE       ?= cmake
CTEST       ?= ctest
CMAKE_FLAGS ?=


TORCH_PREFIX = $(shell $(PYTHON) -c 'import torch;print(torch.utils.cmake_prefix_path)')

.PHONY: all deps configure build demo test test-sanitize bench install clean

all: build

# Cheap when everything is present: the script only checks dpkg and pip metadata.
deps:
	@./scripts/install-deps.sh

$(BUILD_DIR)/CMakeCache.txt: | deps
	$(CMAKE) -S . -B $(BUILD_DIR) -DCMAKE_PREFIX_PATH="$(TORCH_PREFIX)" \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTENSORDICT_WERROR=ON $(CMAKE_FLAGS)

configure: $(BUILD_DIR)/CMakeCache.txt

build: deps configure
	$(CMAKE) --build $(BUILD_DIR) -j $(JOBS)

demo: build
	./$(BUILD_DIR)/bin/quickstart

test: build
	cd $(BUILD_DIR) && $(CTEST) --output-on-failure -j $(JOBS)

# Google Benchmark of the C++ ops against raw ATen loops, then Python
# tensordict on the same work; prints a table and writes build/bench/.
bench: build
	$(CMAKE) --build $(BUILD_DIR) -j $(JOBS) --target tensor_dict_benchmark
	mkdir -p $(BUILD_DIR)/bench
	./$(BUILD_DIR)/bin/tensor_dict_benchmark --benchmark_format=console \
	  --benchmark_out=$(BUILD_DIR)/bench/cpp.json --benchmark_out_format=json
	$(PYTHON) benchmarks/python_bench.py $(BUILD_DIR)/bench/python.json
	$(PYTHON) benchmarks/report.py $(BUILD_DIR)/bench/cpp.json \
	  $(BUILD_DIR)/bench/python.json $(BUILD_DIR)/bench

$(SAN_DIR)/CMakeCache.txt: | deps
	$(CMAKE) -S . -B $(SAN_DIR) -DCMAKE_PREFIX_PATH="$(TORCH_PREFIX)" \
	  -DCMAKE_BUILD_TYPE=Debug -DTENSORDICT_SANITIZE=ON \
	  -DTENSORDICT_BUILD_EXAMPLES=OFF $(CMAKE_FLAGS)

# The unit tests under AddressSanitizer + UndefinedBehaviorSanitizer.
test-sanitize: deps $(SAN_DIR)/CMakeCache.txt
	$(CMAKE) --build $(SAN_DIR) -j $(JOBS)
	cd $(SAN_DIR) && ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  $(CTEST) --output-on-failure -j $(JOBS) -L unit

install: build
	$(CMAKE) --install $(BUILD_DIR) --prefix $(or $(PREFIX),$(BUILD_DIR)/install)

clean:
	rm -rf $(BUILD_DIR) $(SAN_DIR)

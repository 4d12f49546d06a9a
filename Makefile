# The two set-up commands of the README: `make run` and `make test`. Both install what is missing
# from Debian's packages first (scripts/install-deps.sh), then build in ./build. `make test` then
# builds the tests again under AddressSanitizer + UBSan in ./build-asan and runs them there.
BUILD_DIR ?= build
ASAN_BUILD_DIR ?= build-asan
CMAKE_FLAGS ?=
JOBS ?= $(shell nproc)

.PHONY: deps configure build run test clean

deps:
	@scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD_DIR) -G Ninja $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

run: build
	@scripts/run.sh $(BUILD_DIR)

# The whole suite; then the unit and integration tests under ASan + UBSan (no CUDA), without the
# deploy checks, the fuzz run (its own sanitizer build), the soak and the attack tests (RSS under
# ASan's quarantine is not ours).
test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)
	@cmake -S . -B $(ASAN_BUILD_DIR) -G Ninja -DPK_SANITIZE=address -DPK_WITH_CUDA=OFF \
	  $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(ASAN_BUILD_DIR) -j $(JOBS)
	@cd $(ASAN_BUILD_DIR) && ctest --output-on-failure -j $(JOBS) -LE '^(deploy|fuzz|soak)$$' \
	  -E '^reliability\.(AttackTest|MetricsPortTest|CompressionBombTest|FdExhaustionTest)\.'

clean:
	rm -rf $(BUILD_DIR) $(ASAN_BUILD_DIR) build-fuzz

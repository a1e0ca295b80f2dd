# DeepInfer: `make` builds, `make test` runs every test, `make run` chats with the default model.
# Each target first installs whatever system packages are missing (scripts/install_deps.sh).
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
GENERATOR := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")
CMAKE_FLAGS ?=
ifeq ($(CI),true)
  CMAKE_FLAGS += -DDEEPINFER_WERROR=ON
endif
DEEPINFER := $(BUILD_DIR)/bin/deepinfer
ARGS ?=

.PHONY: all build deps deps-test test run clean

all: build

deps:
	@scripts/install_deps.sh

deps-test:
	@scripts/install_deps.sh --test

build: deps
	@test -f $(BUILD_DIR)/CMakeCache.txt || cmake -S . -B $(BUILD_DIR) $(GENERATOR) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS)

test: deps-test build
	@$(DEEPINFER) pull smollm2-135m-instruct --if-missing
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)
	@# ctest does not print why a test was skipped: say it once for the GPU tests.
	@if [ -x $(BUILD_DIR)/bin/test_cuda ]; then $(BUILD_DIR)/bin/test_cuda 2>&1 | \
	  awk '/: Skipped$$/{getline; if (!seen[$$0]++) print "GPU tests skipped: " $$0}'; fi
	@# The Python package builds in the same build folder, so only its bindings compile (a
	@# separate folder would compile the whole engine a second time).
	@python3 -m pip install -q -C build-dir=$(BUILD_DIR) . 2>/dev/null || \
	  python3 -m pip install -q --break-system-packages -C build-dir=$(BUILD_DIR) .
	python3 -m pytest -q --durations=25 tests/python

run: build
ifeq ($(strip $(ARGS)),)
	@$(DEEPINFER) pull smollm2-135m-instruct --if-missing
	$(DEEPINFER) generate --prompt "What is the capital of France? Answer in one sentence." --max-tokens 64
else
	$(DEEPINFER) $(ARGS)
endif

clean:
	rm -rf $(BUILD_DIR)

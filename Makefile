# ReactorServer — `make run` and `make test` work on a fresh Debian machine with Swift.
SHELL := /bin/bash
SWIFT ?= swift
HOST ?= 127.0.0.1
PORT ?= 8080
VENV := .venv
PY := $(VENV)/bin/python
## What building and serving needs (`make run`).
APT_PACKAGES := libmicrohttpd-dev libsqlite3-dev pkg-config curl
## What the tests need besides: postgresql, nginx and haproxy serve the multi-node tests
## (Tests/python/cluster.py), which start their own PostgreSQL, nginx and HAProxy on free ports as
## the test user (a system cluster the package may start on 5432 is neither used nor disturbed,
## and the haproxy package's own service listens nowhere as Debian configures it); chromium
## and chromium-driver run the inspector pages in Tests/python/test_inspector.py.
TEST_APT_PACKAGES := python3-venv postgresql nginx haproxy chromium chromium-driver
## What `make container-test` needs besides: podman with runc (Tests/containers/containers.conf
## says why not crun), mmdebstrap to make base images from Debian when no registry can be
## reached, podman-compose for the compose files, and iproute2's `ip` for the cluster test's
## bridge address (Tests/containers/test_compose_cluster.py says why).
CONTAINER_APT_PACKAGES := podman runc mmdebstrap uidmap fuse-overlayfs slirp4netns podman-compose iproute2
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run test test-build test-starter-docs build deps test-deps venv clean fuzz sanitize cluster-test otlp-check starter api-check docs format lint container-test

## The Swift files `swift format` keeps in the shape `.swift-format` says.
SWIFT_FILES := Sources Tests Fuzz/Sources Fuzz/Package.swift Templates Package.swift

## The products a user imports, each with a DocC catalog (Sources/NAME/NAME.docc).
DOCC_TARGETS := ReactorCore ReactorTesting ReactorClient ReactorServerKit

## The starter package a team copies (Templates/starter), built against this checkout rather than
## a release (REACTOR_SERVER_CHECKOUT: a path, not the network). It builds in this checkout's
## .build, where the modules it shares with it are already built: seconds instead of minutes.
STARTER := Templates/starter
STARTER_SWIFT := REACTOR_SERVER_CHECKOUT=$(CURDIR) $(SWIFT)
STARTER_BUILD := --package-path $(STARTER) --scratch-path $(CURDIR)/.build

## What `reactor-server --version` and the reactor_server_build_info metric report: read from git
## at each build and handed to Package.swift through the environment (nothing is generated or
## committed); outside a git checkout, or with a bare `swift build`, both are "unknown", and
## `--version` names the release the source is (BuildInfo.release) instead.
export REACTOR_SERVER_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo unknown)
export REACTOR_SERVER_COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)

## Seconds of fuzzing in `make fuzz` and in `make test`.
FUZZ_SECONDS ?= 60

## Processes running the end-to-end tests in `make test` (pytest-xdist). A file's tests stay in one
## process, in order (`--dist loadfile`): the servers and clusters a file starts are its own. Most
## of those tests wait on servers, streams and timers, so two halve their time on two cores.
PYTEST_WORKERS ?= 2

## Installs the Debian packages of $(1) that are missing.
define install_missing
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
endef

## Install missing system packages (libmicrohttpd and friends).
deps:
	$(call install_missing,$(APT_PACKAGES))

## Install those and the ones the tests need.
test-deps:
	$(call install_missing,$(APT_PACKAGES) $(TEST_APT_PACKAGES))

## Python test tools in a local virtual environment.
venv: $(VENV)/.installed
$(VENV)/.installed: requirements-test.txt | test-deps
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-test.txt
	touch $@

build: deps
	$(SWIFT) build -c release --product reactor-server

run: build
	.build/release/reactor-server --host $(HOST) --port $(PORT)

## The Swift tests, already built, beside a PostgreSQL server of their own whose URL they read
## from REACTOR_TEST_POSTGRES (in `make test` and, sanitized, in `make sanitize`).
SWIFT_TEST_WITH_POSTGRES = PYTHON=$(abspath $(PY)) $(PY) Tests/python/cluster.py with-postgres -- $(SWIFT) test --skip-build

test: test-deps
	$(MAKE) lint
	$(MAKE) -j2 test-build venv
	api/check
	$(SWIFT_TEST_WITH_POSTGRES)
	$(MAKE) -j2 --output-sync=target fuzz test-starter-docs
	REACTOR_SERVER_BIN=$${REACTOR_SERVER_BIN:-$(abspath .build/debug/reactor-server)} \
	  STARTER_BIN=$(abspath .build/debug/my-service) $(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile --durations=10 Tests/python

## Everything `swift test` runs, built: in `make test`, beside the Python virtual environment, whose
## downloads and unpacking (about 30 s) would otherwise wait for the build or the build for them.
test-build: deps
	$(SWIFT) build --build-tests

## The documentation, warnings treated as errors (in `make test` after the starter, which then
## finds the modules it shares built as it builds them); each catalog lands in
## .build/plugins/Swift-DocC/outputs/NAME.doccarchive. One run of the plugin for every catalog:
## a run per catalog built the plugin's tools and planned the build again each time (about 35 s
## more in all, and more from cold).
docs: deps
	REACTOR_SERVER_DOCS=1 $(SWIFT) package --disable-sandbox generate-documentation $(addprefix --target ,$(DOCC_TARGETS)) --warnings-as-errors

## Formats every Swift file in place; `make lint` (in `make test`) checks that nothing is left to do.
format:
	$(SWIFT) format --in-place --recursive $(SWIFT_FILES)

lint:
	$(SWIFT) format lint --strict --recursive $(SWIFT_FILES)
	@# Every module locks with Locked: ThreadSanitizer does not model Synchronization.Mutex's futex on
	@# Linux (Tests/faults/README.md). PublishedVersion's encoded JSON is the one Mutex kept, on purpose.
	@if grep -rnE --include='*.swift' '\bMutex *[<(]' Sources | grep -v '^Sources/ReactorHosting/Store/PendingVersion.swift:'; then \
		echo "lint: lock with Locked (module Locking), not Synchronization.Mutex: see Tests/faults/README.md" >&2; exit 1; fi

## The public API against the last release's (api/README.md).
api-check:
	api/check

## Builds the starter package against this checkout and runs its tests; the end-to-end tests
## (Tests/python/test_service_app.py) then serve its executable.
starter: deps
	$(STARTER_SWIFT) build $(STARTER_BUILD) --build-tests
	$(STARTER_SWIFT) test $(STARTER_BUILD) --skip-build

## Only the multi-node tests (pytest -m cluster), their longer variants (CLUSTER_FULL=1). The nodes
## share PostgreSQL; CLUSTER_STORE=sqlite gives each node a SQLite file of its own instead.
## `make test` runs the short variants with the other end-to-end tests.
cluster-test: test-deps venv
	$(SWIFT) build --product reactor-server
	CLUSTER_FULL=1 REACTOR_SERVER_BIN=$${REACTOR_SERVER_BIN:-$(abspath .build/debug/reactor-server)} $(PY) -m pytest -q -m cluster Tests/python

## docker/Dockerfile and the starter's Dockerfile built with podman, unmodified, and their images
## run: health, sessions across container replacement, stop and kill, a hardened runtime, cgroup
## limits, backup and restore, compose, the image's size budget (Tests/containers/run says how).
## Runs as root (podman's image store and cgroups); not in `make test`: `.ci/run` runs it after.
container-test: venv
	$(call install_missing,$(CONTAINER_APT_PACKAGES))
	PYTHON=$(abspath $(PY)) Tests/containers/run

## reactor-server with the OTLP trait (`--traces otlp`, through swift-otel) in its own scratch path,
## then the test that its spans reach a collector on 127.0.0.1. Not in `make test`: swift-otel
## and what it needs add minutes to a cold build.
otlp-check: test-deps venv
	$(SWIFT) build -c release --product reactor-server --traits OTLP --scratch-path .build-otlp
	REACTOR_SERVER_OTLP_BIN=$(abspath .build-otlp/release/reactor-server) $(PY) -m pytest -q Tests/python/test_otlp_export.py

## The starter's tests, then the documentation: in `make test`, beside `make fuzz`, which builds in
## a scratch path of its own and fuzzes on one core for most of its run, while these two run one
## after the other in this checkout's .build. Each one's output is printed whole when it ends.
test-starter-docs:
	$(MAKE) starter
	$(MAKE) docs

clean:
	rm -rf .build .build-otlp $(VENV)

## libFuzzer over action decoding and request routing for FUZZ_SECONDS (see Tests/faults/README.md).
fuzz: deps
	Fuzz/run $(FUZZ_SECONDS)

## The Swift test suite under ThreadSanitizer, then AddressSanitizer, each in its own scratch path;
## both always run, and the target fails if either does. Servers the tests start are built with
## the same sanitizer; ServerProcess.stop() fails a test whose server did not exit 0. Under
## AddressSanitizer the test runner and each server it starts are also checked for memory they
## lost by the time they exit (LeakSanitizer, with Tests/leak-suppressions.txt). As in `make test`,
## a PostgreSQL server of their own runs beside them, so the PostgreSQL store's tests run under
## both sanitizers too. About 17 minutes from a clean clone on 2 cores (each sanitizer's build
## about 6 of them); not in `make test`: `.ci/run` runs it last.
sanitize: deps venv
	@status=0; \
	$(SWIFT) build --build-tests --sanitize=thread --scratch-path .build-tsan && \
	  $(SWIFT_TEST_WITH_POSTGRES) --sanitize=thread --scratch-path .build-tsan || status=1; \
	$(SWIFT) build --build-tests --sanitize=address --scratch-path .build-asan && \
	  ASAN_OPTIONS=detect_leaks=1 \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/Tests/leak-suppressions.txt:print_suppressions=0 \
	  $(SWIFT_TEST_WITH_POSTGRES) --sanitize=address --scratch-path .build-asan || status=1; \
	exit $$status

## Benchmarks against raw libmicrohttpd and Hummingbird (not part of `make test`); BENCH_ARGS=--quick for a short run.
.PHONY: bench
bench:
	Benchmarks/run $(BENCH_ARGS)

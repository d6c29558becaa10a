# receipts — `make help` lists the targets. The two that matter:
#   make run    the whole pipeline locally, with a demo load
#   make test   every test (unit, integration, end-to-end); what CI runs
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO        ?= go
# Whole-suite bound: generous for a loaded 2-core machine, far below the
# 10-minute default of a single hung test binary going unnoticed for long.
TEST_TIMEOUT ?= 15m
TEST_FLAGS   ?=
FUZZTIME     ?= 10s
BENCHTIME    ?= 1s
BENCH        ?= .
PKGS         ?= ./...

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-13s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo
	@echo "  Variables: TEST_TIMEOUT=$(TEST_TIMEOUT) TEST_FLAGS= PKGS=$(PKGS) FUZZTIME=$(FUZZTIME) BENCH=$(BENCH) BENCHTIME=$(BENCHTIME)"

.PHONY: build
build: ## build every binary into bin/
	$(GO) build -o bin/ ./cmd/...

.PHONY: run
run: ## start devbroker + kafkagate + persister + dlt-reconciler on local Postgres/Redis, run a demo load; Ctrl-C stops all
	scripts/run.sh

.PHONY: demo
demo: ## like run, but exit after the demo (smoke test)
	RUN_DEMO_ONLY=1 scripts/run.sh

.PHONY: services
services: ## make sure local Postgres and Redis are up (start or install them)
	scripts/services.sh

# The tests -short skips: the end-to-end package and the drain benchmark's
# (they build and run the binaries), and these two load tests. make test
# runs every other test once, under the race detector, then these without
# it; a new -short skip elsewhere fails make test until it is listed here.
LONG_PKGS  := ./e2e/... ./internal/bench/drainbench/
LONG_TESTS := ^(TestBoundedUnderAbuse|TestPostgresTLS)$$
LONG_TESTS_PKGS := ./pkg/gate/ ./pkg/pgstore/

.PHONY: test
test: services chart-test promtool ## every test: unit and integration (real Postgres, Redis, kfake) under the race detector, then end-to-end (binaries) and the load tests, and the chart's; the fault suite is make faults
	@unlisted=$$(git grep -l 'testing.Short()' -- '*_test.go' ':!e2e/' ':!internal/bench/drainbench/' ':!pkg/gate/abuse_test.go' ':!pkg/pgstore/tls_test.go' || true); \
	  if [ -n "$$unlisted" ]; then echo "tests skipped by -short outside LONG_PKGS/LONG_TESTS (list them in the Makefile): $$unlisted" >&2; exit 1; fi
	$(GO) test -race -short -count=1 -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) $(PKGS)
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -skip '^(TestFaults|TestSoak)$$' $(TEST_FLAGS) $(LONG_PKGS)
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run '$(LONG_TESTS)' $(TEST_FLAGS) $(LONG_TESTS_PKGS)

.PHONY: test-short
test-short: services ## unit and integration tests only (skips the end-to-end binaries)
	$(GO) test -count=1 -short -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) $(PKGS)

.PHONY: test-race
test-race: services promtool ## the end-to-end pipeline with binaries built with -race (make test runs every other test under the race detector)
	RECEIPTS_E2E_RACE=1 $(GO) test -count=1 -timeout 30m -run '^(TestPipeline|TestSampler|TestRace)' $(TEST_FLAGS) ./e2e/...

.PHONY: test-clients
test-clients: ## the TypeScript client (clients/ts) against a stack of its own, and in headless Chromium (scripts/clients-test.sh: builds bin/, starts what it needs, installs chromium as root when missing)
	scripts/clients-test.sh

.PHONY: promtool
promtool: ## promtool into .cache/bin (Debian's prometheus package, unpacked): the end-to-end metrics check fails without it
	scripts/promtool.sh >/dev/null

.PHONY: e2e
e2e: services promtool ## end-to-end tests only: the binaries against Postgres, Redis and devbroker
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) ./e2e/...

.PHONY: faults
faults: services ## fault-injection suite, every scenario, then a 90-second soak, binaries built with -race (each stack on Postgres and Redis servers of its own: the machine's are never stopped)
	RECEIPTS_E2E_RACE=1 $(GO) test -count=1 -run '^(TestFaults|TestSoak)$$' -parallel 3 -timeout 30m -v $(TEST_FLAGS) ./e2e/

SOAK_DURATION     ?= 30m
SOAK_FAULT_EVERY  ?= 3m
SOAK_SAMPLE_EVERY ?= 5s
SOAK_TIMEOUT      ?= 60m

.PHONY: soak
soak: services ## SOAK_DURATION (30m) of mixed load, a fault every SOAK_FAULT_EVERY (3m); the checker's verdict and memory/goroutines every SOAK_SAMPLE_EVERY (5s), report in .run/ (not in make ci)
	SOAK_DURATION=$(SOAK_DURATION) SOAK_FAULT_EVERY=$(SOAK_FAULT_EVERY) SOAK_SAMPLE_EVERY=$(SOAK_SAMPLE_EVERY) $(GO) test -count=1 -run '^TestSoak$$' -timeout $(SOAK_TIMEOUT) -v $(TEST_FLAGS) ./e2e/

.PHONY: faults-doc
faults-doc: services ## run the fault suite and write its results table, with the commit, into docs/faults.md (commit first)
	RECEIPTS_E2E_RACE=1 $(GO) test -count=1 -run '^TestFaults$$' -timeout 30m -v $(TEST_FLAGS) ./e2e/ -update-doc

.PHONY: bench
bench: services ## benchmarks (BENCH=regexp, BENCHTIME=1s)
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchtime $(BENCHTIME) -benchmem -count=1 $(PKGS)

.PHONY: bench-stack
bench-stack: ## measure the whole pipeline and, in the same run, Redis and Postgres COPY bounds (scripts/bench.sh; see BENCHMARKS.md)
	scripts/bench.sh

.PHONY: bench-persister
bench-persister: services ## drain 1M zipf events with bin/persister from a cold start, beside same-run COPY and naive baselines (BENCH_PERSISTER_FLAGS="--runs 3 --persister-args '--writers 4'"; see BENCHMARKS.md)
	$(GO) build -o bin/ ./cmd/devbroker ./cmd/persister ./cmd/receiptsbench
	bin/receiptsbench persister $(BENCH_PERSISTER_FLAGS)

.PHONY: pgo
pgo: ## CPU profiles of kafkagate and persister under load on a local stack, for a profile-guided build (scripts/pgo.sh; not used by default)
	scripts/pgo.sh

.PHONY: fuzz
fuzz: ## run every fuzz target for FUZZTIME (10s) each
	@for f in $$(grep -rl --include='*_test.go' '^func Fuzz' cmd pkg e2e 2>/dev/null); do \
	  dir=./$$(dirname $$f); \
	  for t in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
	    echo "$(GO) test -run '^$$' -fuzz '^$$t\$$' -fuzztime $(FUZZTIME) $$dir"; \
	    $(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) $$dir; \
	  done; \
	done

.PHONY: generate
generate: ## regenerate the protobuf stubs and the OpenAPI document api/openapi.json (scripts/generate.sh)
	scripts/generate.sh

.PHONY: verify
verify: generate ## fail when generated code (stubs, api/openapi.json, clients/ts/src/gen) or go.mod/go.sum is stale, or the proto fails buf lint or buf breaking
	@git diff --exit-code --stat -- api/ clients/ts/src/gen/ || { echo "generated code is stale: run make generate and commit the result" >&2; exit 1; }
	@untracked=$$(git ls-files --others --exclude-standard -- api/ clients/ts/src/gen/); [ -z "$$untracked" ] || { echo "generated files not committed: $$untracked" >&2; exit 1; }
	scripts/proto-check.sh
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy and commit the result" >&2; exit 1; }

.PHONY: lint
lint: ## gofmt, golangci-lint (pinned in tools/lint/go.mod; .golangci.yml: go vet, layering, errcheck, no global metrics), planted layering violations refused (scripts/layering-test.sh) and goreleaser check of .goreleaser.yaml
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:" >&2; echo "$$out" >&2; exit 1; fi
	$(GO) tool -modfile=tools/lint/go.mod golangci-lint run --allow-serial-runners ./...
	scripts/layering-test.sh
	scripts/release.sh check

.PHONY: ci
CI_TARGETS := verify lint test test-clients test-race faults
ci: $(CI_TARGETS) ## what .ci/run runs: verify, lint, every test (make test), the TypeScript client's, the pipeline with race-built binaries, every fault scenario

.PHONY: ci-targets
ci-targets: ## the targets of make ci, in order (.ci/run times each)
	@echo $(CI_TARGETS)

.PHONY: clean
clean: ## remove binaries and run logs (keeps .devdata/, the dev broker's data)
	rm -rf bin .run

.PHONY: clean-data
clean-data: ## remove the dev broker's data directory (.devdata/)
	rm -rf .devdata

# --- deployment: image, Helm chart, alerts (docs/operations.md) -------------
IMAGE   ?= receipts
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# The commit the image is built from: cli.Revision (the Dockerfile's ARG REVISION).
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
IMAGE_BUILD_ARGS = --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION)

.PHONY: image
image: ## build the container image IMAGE:VERSION with docker build, VERSION and REVISION stamped (says so and exits 0 where no builder runs)
	@if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then \
	  echo "docker build -t $(IMAGE):$(VERSION) $(IMAGE_BUILD_ARGS) ."; \
	  docker build -t $(IMAGE):$(VERSION) $(IMAGE_BUILD_ARGS) .; \
	else \
	  echo "make image: no container builder available here (docker info fails): image not built."; \
	  echo "make image: build it where Docker or BuildKit runs: docker build -t $(IMAGE):$(VERSION) $(IMAGE_BUILD_ARGS) ."; \
	  echo "make image: checking the build stage's command locally instead (CGO_ENABLED=0 -trimpath, cli.Version=$(VERSION), cli.Revision=$(REVISION)) into .cache/image/"; \
	  rm -rf .cache/image && mkdir -p .cache/image/src && \
	  tar --exclude-from=.dockerignore --exclude=./.git -cf - . | tar -xf - -C .cache/image/src && \
	  (cd .cache/image/src && CGO_ENABLED=0 GOFLAGS=-buildvcs=false $(GO) build -trimpath -ldflags "-X github.com/readstate/receipts/cmd/internal/cli.Version=$(VERSION) -X github.com/readstate/receipts/cmd/internal/cli.Revision=$(REVISION)" -o ../bin/ ./cmd/...) && \
	  ls -l .cache/image/bin/ && \
	  for b in .cache/image/bin/*; do $(GO) version -m $$b | grep -q 'CGO_ENABLED=0' || { echo "$$b is not static" >&2; exit 1; }; done && \
	  .cache/image/bin/receiptsctl --version | tee /dev/stderr | grep -qF -- "$(REVISION)" || { echo "receiptsctl --version does not show the revision $(REVISION)" >&2; exit 1; } && \
	  echo "make image: the build stage works; the image itself was not built (exit 0)."; \
	fi

.PHONY: release-snapshot
release-snapshot: ## the release build without publishing (scripts/release.sh, .goreleaser.yaml): linux amd64/arm64 archives of every binary, CycloneDX SBOMs, checksums, into dist/; offline once the pinned goreleaser and cyclonedx-gomod are in .cache/bin
	scripts/release.sh snapshot

.PHONY: chart-test
chart-test: ## the Helm chart, alerts and dashboard: lint, kubeconform, bad values, promtool tests (scripts/chart-test.sh)
	scripts/chart-test.sh

.PHONY: k8s-check
k8s-check: ## the rendered chart against a real kube-apiserver + etcd on loopback (builds kube-apiserver once: ~7 min)
	scripts/k8s-check.sh

# Copyright The kbind Authors.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

# kbind — see README.md. Every target works on a machine with only Go.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

MODULES := api flagconfig engine konnector backend cli e2e tools
# Modules that hold Go packages (tools only pins `go tool` dependencies).
CODE_MODULES := api flagconfig engine konnector backend cli e2e
# Tools with code of their own, modules outside go.work (GOWORK=off: their
# dependencies never mix with kbind's): formatted, linted, tidied and
# tested like the modules above.
TOOL_MODULES := tools/apicompat tools/release tools/testreport
BINARIES := konnector backend
GO ?= go
# Test timeout per module; the e2e suites are the long ones.
TEST_TIMEOUT ?= 20m
TEST_FLAGS ?=

CONTROLGEN := $(GO) tool controller-gen

.PHONY: help
help: ## Show the targets.
	@grep -hE '^[a-zA-Z0-9_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-14s %s\n", $$1, $$2}'

.PHONY: controlplane
controlplane: ## Build (once) etcd, kube-apiserver and kubectl for tests; prints their directory.
	@tools/controlplane/build.sh

.PHONY: generate
generate: ## Generate deepcopy code and CRD YAML from the API types.
	$(CONTROLGEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(CONTROLGEN) crd:crdVersions=v1 paths=./api/core/... output:crd:artifacts:config=api/crds
	rm -f charts/konnector/files/crds/*.yaml && cp api/crds/*.yaml charts/konnector/files/crds/

.PHONY: fmt
fmt: ## gofmt every module.
	gofmt -w $(MODULES) tools/controlplane $(TOOL_MODULES)

.PHONY: verify
verify: generate lint ## Regenerate and fail on any diff; gofmt, golangci-lint (go vet among its linters), go mod tidy on every module; the Apache-2.0 header on every source file; the api compatibility gate.
	@hack/license/license.sh check
	@if [ -n "$$(git status --porcelain -- api charts)" ]; then \
	  echo "generated files are out of date; run 'make generate' and commit:"; git status --porcelain -- api charts; git --no-pager diff --stat -- api charts; exit 1; fi
	@for m in $(MODULES); do (cd $$m && $(GO) mod tidy -diff >/dev/null) || { echo "go.mod/go.sum of $$m are not tidy; run 'cd $$m && go mod tidy'"; exit 1; }; done
	@for m in tools/controlplane/etcd tools/controlplane/kubernetes tools/golangci-lint tools/gotestsum tools/prometheus $(TOOL_MODULES); do (cd $$m && GOWORK=off $(GO) mod tidy -diff >/dev/null) || { echo "$$m is not tidy; run 'cd $$m && GOWORK=off go mod tidy'"; exit 1; }; done
	@$(MAKE) --no-print-directory api-compat

.PHONY: license
license: ## Add the Apache-2.0 header (hack/boilerplate.go.txt) to every source file that lacks it; make verify checks it.
	@hack/license/license.sh fix

.PHONY: api-compat
api-compat: ## The api module's compatibility gate: its Go API and CRD schemas against the baseline release (docs/versioning.md#the-compatibility-gate).
	@cd tools/apicompat && GOWORK=off $(GO) run . -C ../..

.PHONY: lint
lint: ## Static checks: gofmt, and golangci-lint (pinned in tools/golangci-lint, see .golangci.yml) on every module.
	@unformatted=$$(gofmt -l $(MODULES) tools/controlplane $(TOOL_MODULES)); if [ -n "$$unformatted" ]; then \
	  echo "gofmt needed on:"; echo "$$unformatted"; exit 1; fi
	@lint=$$(tools/golangci-lint/build.sh); for m in $(CODE_MODULES); do echo "golangci-lint ./$$m/..."; (cd $$m && $$lint run ./...); done; \
	  for m in $(TOOL_MODULES); do echo "golangci-lint ./$$m/..."; (cd $$m && GOWORK=off $$lint run --config ../../.golangci.yml ./...); done

# The release version: the charts' appVersion, which is also the images' tag
# (a chart test keeps the two charts' appVersions equal). REVISION is the
# commit. Both are stamped into the binaries (--version, kbind_build_info).
VERSION ?= $(shell sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}/\1/p' charts/konnector/Chart.yaml)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
BUILDINFO := github.com/kbind/kbind/flagconfig/buildinfo
LDFLAGS := -X $(BUILDINFO).version=$(VERSION) -X $(BUILDINFO).revision=$(REVISION)

.PHONY: build
build: ## Build the binaries into bin/.
	@mkdir -p bin
	@for b in $(BINARIES); do echo "go build -o bin/$$b ./$$b/cmd/$$b"; (cd $$b && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o ../bin/$$b ./cmd/$$b); done
	@echo "go build -o bin/kubectl-kbind ./cli/cmd/kubectl-kbind"; cd cli && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o ../bin/kubectl-kbind ./cmd/kubectl-kbind
	@echo "go build -o bin/quickstart ./e2e/cmd/quickstart"; cd e2e && CGO_ENABLED=0 $(GO) build -trimpath -o ../bin/quickstart ./cmd/quickstart

QUICKSTART_FLAGS ?=

.PHONY: quickstart
quickstart: build ## Run the demo: provider + consumer clusters, the konnector, a Widget synced both ways (QUICKSTART_FLAGS=--check|--detach).
	@assets=$$(tools/controlplane/build.sh); KUBEBUILDER_ASSETS=$$assets bin/quickstart $(QUICKSTART_FLAGS)

.PHONY: quickstart-down
quickstart-down: ## Stop what `make quickstart QUICKSTART_FLAGS=--detach` left running.
	@if [ -x bin/quickstart ]; then bin/quickstart --down; else echo "quickstart: nothing is running"; fi

.PHONY: build-all
build-all: ## go build ./... in every module.
	@for m in $(CODE_MODULES); do echo "go build ./$$m/..."; (cd $$m && $(GO) build ./...); done

# make test runs the packages of these modules and the e2e suites in one
# `go test`, so that both of its parallel slots (-p, GOMAXPROCS) stay busy
# to the end; the longest packages come first (go test starts packages in
# the order given), so none of them runs alone at the tail.
UNIT_MODULES := $(filter-out e2e,$(CODE_MODULES))
LONGEST_TESTS := ./engine/test/hostile ./engine/connection ./e2e/cli ./e2e/suite ./engine/syncer ./backend ./engine/binding \
  ./e2e/backend ./e2e/attack ./engine/related ./e2e/chart ./engine/test/isolationtest ./e2e/konnector ./e2e/scale
E2E_TIMEOUT ?= 25m
E2E_FLAGS ?=
# A subset of packages through make test's own path (gotestsum, the JSON,
# the report, the built binaries), e.g. TEST_PKGS="./engine/ownership
# ./e2e/cli"; set, make test runs only those (no tools' tests, fuzz or
# quickstart).
TEST_PKGS ?=

# make test runs go test through gotestsum (pinned in tools/gotestsum):
# one line per package on the console, each failing test's whole output
# (and the failures' names again at the end), every event in TEST_JSON;
# the tools modules' tests go to TEST_JSON's siblings (<name>-<tool>.json).
# The report at the end (make test-report) reads them: the 20 slowest tests
# and each package's wall time. .ci/run keeps the files.
TEST_REPORT_DIR ?= $(CURDIR)/bin/test-report
override TEST_REPORT_DIR := $(abspath $(TEST_REPORT_DIR))
TEST_JSON ?= $(TEST_REPORT_DIR)/test.json
TEST_JSON_ABS = $(abspath $(TEST_JSON))
GOTESTSUM_FLAGS ?= --format pkgname-and-test-fails --format-icons text --format-hide-empty-pkg --hide-summary=skipped,output
# The single-suite targets (test-faults, test-monitoring, test-upgrade,
# test-images) print go test -v's output as before, and keep their JSON in
# TEST_REPORT_DIR too (<suite>.json).
GOTESTSUM_VERBOSE ?= --format standard-verbose --hide-summary=skipped,output
# The binaries `make build` wrote: the e2e TestMains and harness.Build use
# them instead of compiling their own (e2e/harness: Prebuilt).
BIN_DIR_ENV := KBIND_BIN_DIR=$(CURDIR)/bin

# Go fuzz targets (package:function); their seed corpora run with every
# `go test`, `make fuzz` also fuzzes each for FUZZTIME.
FUZZ_TARGETS := engine/ownership:FuzzOwnership engine/schema:FuzzOpenAPIDocument engine/schema:FuzzUpdated \
  engine/isolation:FuzzMapping engine/isolation:FuzzConsumer engine/kubeconfig:FuzzParse cli/access:FuzzDerivedNames engine/mutation:FuzzCompile
FUZZTIME ?= 5s
FUZZMINIMIZETIME ?= 60s
# make test fuzzes by count and without minimizing: a timed run whose
# deadline falls while Go's fuzzer minimizes a new input (tens of seconds
# for a large OpenAPI document) fails with "context deadline exceeded" and
# no crasher. A crasher is still written, unminimized.
TEST_FUZZTIME ?= 20000x
# make fuzz compiles each target's package once, instrumented as
# `go test -fuzz` does (go test -c -fuzz), FUZZ_JOBS packages at a time,
# into FUZZ_BIN_DIR; then runs each target's binary in its package's
# directory (its testdata/fuzz corpus, where a crasher is written) with
# go test's cache of generated inputs ($GOCACHE/fuzz/<import path>).
FUZZ_JOBS ?= 2
FUZZ_BIN_DIR ?= $(CURDIR)/bin/fuzz
MODULE_PATH := github.com/kbind/kbind

.PHONY: fuzz
fuzz: ## Fuzz each target in FUZZ_TARGETS for FUZZTIME (make test runs it briefly); the packages are compiled in parallel first.
	@mkdir -p $(FUZZ_BIN_DIR); pkgs=$$(for t in $(FUZZ_TARGETS); do echo "$${t%%:*}"; done | sort -u); \
	  echo "== go test -c -fuzz: $$(echo $$pkgs) ($(FUZZ_JOBS) at a time)"; \
	  printf '%s\n' $$pkgs | xargs -P $(FUZZ_JOBS) -I{} $(SHELL) -euo pipefail -c \
	    'b=$(FUZZ_BIN_DIR)/$$(echo {} | tr / -).test; $(GO) test -c -fuzz . -o "$$b" ./{} >"$$b.log" 2>&1 || { cat "$$b.log"; echo "building the fuzz test binary of ./{} failed"; exit 255; }; rm -f "$$b.log"'; \
	  cache=$$($(GO) env GOCACHE)/fuzz; \
	  for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; name=$${t#*:}; \
	    echo "== fuzz $$name in ./$$pkg ($(FUZZTIME))"; \
	    (cd $$pkg && $(FUZZ_BIN_DIR)/$$(echo $$pkg | tr / -).test -test.run '^$$' -test.fuzz "^$$name\$$" \
	      -test.fuzztime $(FUZZTIME) -test.fuzzminimizetime $(FUZZMINIMIZETIME) -test.fuzzcachedir "$$cache/$(MODULE_PATH)/$$pkg") || exit 1; done

.PHONY: test
test: build-all build ## Every module's tests (unit, envtest) and the e2e suites of `make e2e` in one go test (gotestsum; TEST_PKGS=... for a subset), the tools' tests, a brief `make fuzz`, the quickstart --check, then the report (20 slowest tests, each package's time).
	@mkdir -p $(dir $(TEST_JSON_ABS)); rm -f $(TEST_JSON_ABS) $(basename $(TEST_JSON_ABS))-*.json
	@rc=0; $(MAKE) --no-print-directory test-run || rc=$$?; \
	  $(MAKE) --no-print-directory test-report || true; exit $$rc

# test-run is make test without its prerequisites and report. The tools'
# tests, the brief fuzz and the quickstart --check (test-side) run beside
# the main go test (test-main), at the lowest CPU priority: they fill what
# the main run leaves idle (its package starts, its tail) and yield to it
# otherwise, so its timings are unchanged. Their output is kept in
# $(SIDE_LOG) and shown once the main go test ends.
SIDE_LOG = $(dir $(TEST_JSON_ABS))side.log
.PHONY: test-run
test-run:
	@if [ -n "$(TEST_PKGS)" ]; then exec $(MAKE) --no-print-directory test-main; fi; \
	  mkdir -p $(dir $(TEST_JSON_ABS)); tools/controlplane/build.sh >/dev/null && tools/gotestsum/build.sh >/dev/null || exit 1; \
	  echo "== beside the go test (nice 19, output in $(SIDE_LOG) shown after it): the tools' tests, fuzz, quickstart --check"; \
	  ( start=$$(date +%s); rc=0; nice -n 19 $(MAKE) --no-print-directory test-side || rc=$$?; \
	    echo "== beside the go test: took $$(( $$(date +%s) - start )) s"; exit $$rc ) >$(SIDE_LOG) 2>&1 & side=$$!; \
	  rc=0; $(MAKE) --no-print-directory test-main || rc=$$?; \
	  side_rc=0; wait $$side || side_rc=$$?; \
	  echo "== the tools' tests, fuzz and quickstart --check (ran beside the go test)"; cat $(SIDE_LOG); \
	  if [ "$$side_rc" != 0 ]; then echo "make test: the tools' tests, fuzz or the quickstart --check failed (above)"; rc=1; fi; exit $$rc

# test-main: the one go test of every module's packages and the e2e suites
# (or TEST_PKGS).
.PHONY: test-main
test-main:
	@assets=$$(tools/controlplane/build.sh); export KUBEBUILDER_ASSETS=$$assets $(BIN_DIR_ENV); \
	  echo "control plane binaries: $$assets"; gotestsum=$$(tools/gotestsum/build.sh); \
	  if [ -n "$(TEST_PKGS)" ]; then pkgs="$(TEST_PKGS)"; echo "== go test $$pkgs"; \
	  else pkgs="$(LONGEST_TESTS) $(UNIT_MODULES:%=./%/...) $$($(GO) list ./e2e/... | grep -v -e '/e2e/faults$$' -e '/e2e/upgrade$$')"; \
	  echo "== go test $(UNIT_MODULES:%=./%/...) ./e2e/... (but e2e/faults and e2e/upgrade; clusters: $${KBIND_E2E_CLUSTERS:-auto})"; fi; \
	  $$gotestsum $(GOTESTSUM_FLAGS) --jsonfile $(TEST_JSON_ABS) -- \
	    -count=1 -timeout $(E2E_TIMEOUT) -skip '^$(MONITORING_TEST)$$' $(TEST_FLAGS) $(E2E_FLAGS) $$pkgs

# test-side: what make test runs beside the main go test.
.PHONY: test-side
test-side:
	@gotestsum=$$(tools/gotestsum/build.sh); rc=0; \
	  for m in $(TOOL_MODULES); do echo "== go test ./$$m/..."; \
	    (cd $$m && GOWORK=off $$gotestsum $(GOTESTSUM_FLAGS) --jsonfile $(basename $(TEST_JSON_ABS))-$$(basename $$m).json -- \
	      -count=1 -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) ./...) || rc=1; done; exit $$rc
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(TEST_FUZZTIME) FUZZMINIMIZETIME=0
	@echo "== quickstart --check"; assets=$$(tools/controlplane/build.sh); KUBEBUILDER_ASSETS=$$assets bin/quickstart --check

SLOWEST ?= 20

.PHONY: test-report
test-report: ## Report of the last make test from its JSON (TEST_JSON and its siblings): the SLOWEST (20) slowest tests, each package's wall time, slowest first, and its test counts.
	@files=$$(ls $(TEST_JSON_ABS) $(basename $(TEST_JSON_ABS))-*.json 2>/dev/null || true); \
	  if [ -z "$$files" ]; then echo "test report: no $(TEST_JSON_ABS) (run make test first)"; exit 1; fi; \
	  echo "== the $(SLOWEST) slowest tests (gotestsum tool slowest; subtests included)"; \
	  cat $$files | $$(tools/gotestsum/build.sh) tool slowest --threshold 0s --num $(SLOWEST); \
	  echo "== each package's wall time (tools/testreport $$(echo $$files | sed 's|$(CURDIR)/||g'))"; \
	  cd tools/testreport && GOWORK=off $(GO) run . $$files

# The tests that take minutes to prove one property call testenv.Long and
# run only here: found by a grep for `testenv.Long(` in *_test.go files,
# each attributed to the top-level Test function it is written in (call it
# there, not in a helper), so a new one is picked up without a list.
LONG_TIMEOUT ?= 30m
LONG_FLAGS ?=
LP := (
LONG_TESTS = $(shell grep -rl --include='*_test.go' 'testenv\.Long$(LP)' $(CODE_MODULES) 2>/dev/null | sort | xargs -r awk \
  'FNR == 1 { name = "" } /^func / { name = ""; if ($$2 ~ /^Test/) { name = $$2; sub(/[^A-Za-z0-9_].*/, "", name) } } \
   /testenv\.Long[$(LP)]/ && name != "" { d = FILENAME; sub(/\/[^\/]*$$/, "", d); print d ":" name }' | sort -u)

.PHONY: test-long
test-long: build ## The long tests (those calling testenv.Long; make test skips them) with KBIND_TEST_LONG=1, each package with -run of exactly its long tests (LONG_FLAGS=...).
	@if [ -z "$(strip $(LONG_TESTS))" ]; then echo "test-long: no test calls testenv.Long"; exit 0; fi; \
	  assets=$$(tools/controlplane/build.sh); export KUBEBUILDER_ASSETS=$$assets KBIND_TEST_LONG=1 $(BIN_DIR_ENV); \
	  gotestsum=$$(tools/gotestsum/build.sh); mkdir -p $(TEST_REPORT_DIR); rc=0; \
	  for dir in $$(printf '%s\n' $(LONG_TESTS) | cut -d: -f1 | sort -u); do \
	    names=$$(printf '%s\n' $(LONG_TESTS) | awk -F: -v d="$$dir" '$$1 == d { print $$2 }' | paste -sd'|'); \
	    echo "== go test ./$$dir -run '^($$names)\$$' (KBIND_TEST_LONG=1)"; \
	    $$gotestsum $(GOTESTSUM_FLAGS) --jsonfile $(TEST_REPORT_DIR)/long-$$(echo $$dir | tr / -).json -- \
	      -count=1 -timeout $(LONG_TIMEOUT) -run "^($$names)\$$" $(LONG_FLAGS) ./$$dir || rc=1; done; \
	  exit $$rc

# make test-flakes: the flake rehearsal. A CPU hog keeps one of the
# machine's cores busy (a shell loop; stopped by the trap whatever happens,
# and it stops by itself once the recipe's shell is gone) while make test
# runs twice and the fault suite once; every run runs, and the target fails
# if any of them failed. Each make test run keeps its own JSON.
.PHONY: test-flakes
test-flakes: ## Flake rehearsal: make test twice and make test-faults once, with a CPU hog keeping one core busy; fails if any run fails.
	@( while kill -0 $$$$ 2>/dev/null; do for _ in $$(seq 1 20000); do :; done; done ) & hog=$$!; \
	  trap 'kill $$hog 2>/dev/null || true' EXIT; trap 'exit 130' INT TERM; \
	  echo "== test-flakes: a CPU hog (pid $$hog) keeps one core busy"; rc=0; failed=; \
	  for run in 1 2; do start=$$(date +%s); echo "== test-flakes: make test, run $$run of 2"; \
	    $(MAKE) --no-print-directory test TEST_JSON=$(TEST_REPORT_DIR)/flakes-$$run.json || { rc=1; failed="$$failed test#$$run"; }; \
	    echo "== test-flakes: make test run $$run took $$(( $$(date +%s) - start )) s"; done; \
	  start=$$(date +%s); echo "== test-flakes: make test-faults"; \
	  $(MAKE) --no-print-directory test-faults || { rc=1; failed="$$failed test-faults"; }; \
	  echo "== test-flakes: make test-faults took $$(( $$(date +%s) - start )) s"; \
	  if [ "$$rc" != 0 ]; then echo "test-flakes: failed:$$failed"; else echo "test-flakes: every run passed"; fi; exit $$rc

.PHONY: e2e
e2e: build ## The e2e module but the fault suite: e2e-framework suites, binary, chart, backend and alert-rule (promtool) tests (KBIND_E2E_CLUSTERS=local|kind|auto, E2E_FLAGS=-run ...).
	@assets=$$(tools/controlplane/build.sh); export KUBEBUILDER_ASSETS=$$assets; \
	  export $(BIN_DIR_ENV); echo "== go test ./e2e/... (clusters: $${KBIND_E2E_CLUSTERS:-auto})"; \
	  cd e2e && $(GO) test -count=1 -timeout $(E2E_TIMEOUT) -skip '^$(MONITORING_TEST)$$' $(E2E_FLAGS) $$($(GO) list ./... | grep -v -e '/e2e/faults$$' -e '/e2e/upgrade$$')

# The real-Prometheus test runs apart (make test-monitoring, in .ci/run):
# make e2e skips it, and runs the rest of e2e/monitoring.
MONITORING_TEST := TestDashboardsAndAlertsAgainstPrometheus
MONITORING_TIMEOUT ?= 15m
MONITORING_FLAGS ?=

.PHONY: test-monitoring
test-monitoring: build ## The real-Prometheus test (e2e/monitoring): a real konnector and backend scraped; every dashboard query returns data, every alert fires in its scenario and resolves (MONITORING_FLAGS=...).
	@assets=$$(tools/controlplane/build.sh); export KUBEBUILDER_ASSETS=$$assets $(BIN_DIR_ENV); \
	  tools/prometheus/build.sh >/dev/null; \
	  echo "== go test ./e2e/monitoring -run $(MONITORING_TEST)"; gotestsum=$$(tools/gotestsum/build.sh); mkdir -p $(TEST_REPORT_DIR); \
	  cd e2e && $$gotestsum $(GOTESTSUM_VERBOSE) --jsonfile $(TEST_REPORT_DIR)/monitoring.json -- \
	    -count=1 -timeout $(MONITORING_TIMEOUT) -run '^$(MONITORING_TEST)$$' $(MONITORING_FLAGS) ./monitoring/

FAULTS_TIMEOUT ?= 20m
FAULTS_FLAGS ?=

.PHONY: test-faults
test-faults: build ## The fault suite (e2e/faults): provider unreachable, resets, latency, API server/etcd restarts, watch expiry, konnector kills, CRD and Secret faults, leader failover, under load; Connection and credential churn (FAULTS_FLAGS=-run ...).
	@assets=$$(tools/controlplane/build.sh); export KUBEBUILDER_ASSETS=$$assets $(BIN_DIR_ENV); \
	  echo "== go test ./e2e/faults"; gotestsum=$$(tools/gotestsum/build.sh); mkdir -p $(TEST_REPORT_DIR); \
	  cd e2e && $$gotestsum $(GOTESTSUM_VERBOSE) --jsonfile $(TEST_REPORT_DIR)/faults.json -- \
	    -count=1 -timeout $(FAULTS_TIMEOUT) $(FAULTS_FLAGS) ./faults/

UPGRADE_TIMEOUT ?= 20m

.PHONY: test-upgrade
test-upgrade: build ## The upgrade test (e2e/upgrade): the previous release's konnector and CRDs sync 1000 objects with related Secrets and Events under Namespace isolation, then CRDs and binary are upgraded to this tree's; every object still synced, none re-created, no write beyond e2e/upgrade/exceptions.yaml, deletions complete.
	@assets=$$(tools/controlplane/build.sh); export KUBEBUILDER_ASSETS=$$assets $(BIN_DIR_ENV); \
	  echo "== go test ./e2e/upgrade"; gotestsum=$$(tools/gotestsum/build.sh); mkdir -p $(TEST_REPORT_DIR); \
	  cd e2e && $$gotestsum $(GOTESTSUM_VERBOSE) --jsonfile $(TEST_REPORT_DIR)/upgrade.json -- \
	    -count=1 -timeout $(UPGRADE_TIMEOUT) ./upgrade/

BENCH_FLAGS ?=

.PHONY: bench
bench: build ## Measure latency, throughput vs. the direct-create limit, idle/restart writes, RSS, deletion (BENCH_FLAGS="--n 1000 --json out.json"); --consumers 10,100,1000: the provider's cost per consumer and its restart herd; --import 10000: provider objects imported at connect time.
	@echo "go build -tags kbindbench -o bin/konnector-bench ./konnector/cmd/konnector"; cd konnector && CGO_ENABLED=0 $(GO) build -tags kbindbench -trimpath -ldflags "$(LDFLAGS)" -o ../bin/konnector-bench ./cmd/konnector
	@assets=$$(tools/controlplane/build.sh); cd e2e && KUBEBUILDER_ASSETS=$$assets $(GO) run ./cmd/bench --konnector ../bin/konnector \
	  --konnector-bench ../bin/konnector-bench --plugin ../bin/kubectl-kbind $(BENCH_FLAGS)

REGISTRY ?= ghcr.io/kbind
ARCH ?= amd64
# The base of both images; `make base-image` builds a local stand-in from
# scratch where no registry is reachable (make test-images uses it).
BASE_IMAGE ?= gcr.io/distroless/static-debian12:nonroot
LOCAL_BASE_IMAGE := kbind.local/static:nonroot

.PHONY: image-binaries
image-binaries: ## Static, version-stamped linux/$(ARCH) binaries for the images, in bin/linux_$(ARCH)/.
	@mkdir -p bin/linux_$(ARCH)
	@for b in $(BINARIES); do echo "go build -o bin/linux_$(ARCH)/$$b ./$$b/cmd/$$b ($(VERSION))"; \
	  (cd $$b && CGO_ENABLED=0 GOOS=linux GOARCH=$(ARCH) $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" -o ../bin/linux_$(ARCH)/$$b ./cmd/$$b); done

.PHONY: image
image: image-binaries ## Build both images, $(REGISTRY)/konnector:$(VERSION) and $(REGISTRY)/backend:$(VERSION) (needs Docker; BASE_IMAGE=... to substitute the base).
	@command -v docker >/dev/null && docker info >/dev/null 2>&1 || { echo "make image needs a running Docker engine"; exit 1; }
	@for b in $(BINARIES); do echo "docker build --target $$b -t $(REGISTRY)/$$b:$(VERSION) (base $(BASE_IMAGE))"; \
	  docker build -q --target $$b --build-arg BASE_IMAGE=$(BASE_IMAGE) --build-arg ARCH=$(ARCH) \
	    --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t $(REGISTRY)/$$b:$(VERSION) . >/dev/null || exit 1; done
	@docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E '^$(REGISTRY)/(konnector|backend):$(VERSION) '

.PHONY: base-image
base-image: ## Build $(LOCAL_BASE_IMAGE), a from-scratch stand-in for the distroless base (needs Docker, no registry).
	@hack/base-image/build.sh $(LOCAL_BASE_IMAGE)

.PHONY: test-images
test-images: base-image ## Build both images on the local base and run each chart's Deployment in Docker as a kubelet would (needs Docker).
	@$(MAKE) --no-print-directory image BASE_IMAGE=$(LOCAL_BASE_IMAGE)
	@assets=$$(tools/controlplane/build.sh); export KUBEBUILDER_ASSETS=$$assets; \
	  gotestsum=$$(tools/gotestsum/build.sh); mkdir -p $(TEST_REPORT_DIR); \
	  cd e2e && KBIND_TEST_IMAGES=1 KBIND_IMAGE_REGISTRY=$(REGISTRY) KBIND_IMAGE_TAG=$(VERSION) \
	  $$gotestsum $(GOTESTSUM_VERBOSE) --jsonfile $(TEST_REPORT_DIR)/images.json -- -count=1 -timeout 20m -run . ./images/...

# make release: VERSION given on the command line or in the environment
# is the release; without one an untagged build is 0.0.0-dev+<short sha>.
# A tagged HEAD (v<version>) must be released as its tag's version.
RELEASE_VERSION = $(if $(filter command line environment environment override,$(origin VERSION)),$(VERSION),0.0.0-dev+$(shell git rev-parse --short HEAD 2>/dev/null || echo unknown))
RELEASE_TAG = $(shell git tag --points-at HEAD 2>/dev/null | grep -E '^v[0-9]' | sort -V | tail -1)
# Every timestamp of the release: the commit's time unless given.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 1)
DIST_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64
# Where the krew manifest says the plugin archives are downloaded from.
KREW_BASE_URL ?= https://github.com/kbind/kbind/releases/download/v$(RELEASE_VERSION)
# The images' base: the local stand-in built from files (hack/base-image),
# or an OCI image layout holding the published base, pinned by digest
# (RELEASE_BASE_LAYOUT=dir RELEASE_BASE_DIGEST=sha256:...; docs/releasing.md).
RELEASE_BASE_LAYOUT ?=
RELEASE_BASE_DIGEST ?=

.PHONY: release
release: ## Build release VERSION=x.y.z (default 0.0.0-dev+<sha>) into dist/: images (OCI archives, digests), charts, plugin archives, krew manifest, SBOMs, changelog, SHA256SUMS (docs/releasing.md).
	@work=$$(mktemp -d); trap 'rm -rf "$$work"' EXIT; \
	  if [ -n "$(RELEASE_BASE_LAYOUT)" ]; then base="--base-layout $(abspath $(RELEASE_BASE_LAYOUT)) --base-digest $(RELEASE_BASE_DIGEST)"; \
	  else hack/base-image/build.sh --rootfs "$$work/rootfs" >/dev/null; base="--base-rootfs $$work/rootfs"; fi; \
	  cd tools/release && GOWORK=off $(GO) run . --repo ../.. --out ../../dist --version '$(RELEASE_VERSION)' --tag '$(RELEASE_TAG)' \
	    --revision '$(REVISION)' --source-date-epoch '$(SOURCE_DATE_EPOCH)' --registry '$(REGISTRY)' --arch '$(ARCH)' \
	    --platforms '$(DIST_PLATFORMS)' --krew-base-url '$(KREW_BASE_URL)' $$base

.PHONY: clean
clean: ## Remove build outputs (the control plane cache stays).
	rm -rf bin dist

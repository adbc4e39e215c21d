# kbind — see README.md. Every target works on a machine with only Go.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

MODULES := api flagconfig engine konnector backend cli e2e tools
# Modules that hold Go packages (tools only pins `go tool` dependencies).
CODE_MODULES := api flagconfig engine konnector backend cli e2e
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
	gofmt -w $(MODULES) tools/controlplane

.PHONY: verify
verify: generate lint ## Regenerate and fail on any diff; gofmt, golangci-lint (go vet among its linters), go mod tidy on every module.
	@if [ -n "$$(git status --porcelain -- api charts)" ]; then \
	  echo "generated files are out of date; run 'make generate' and commit:"; git status --porcelain -- api charts; git --no-pager diff --stat -- api charts; exit 1; fi
	@for m in $(MODULES); do (cd $$m && $(GO) mod tidy -diff >/dev/null) || { echo "go.mod/go.sum of $$m are not tidy; run 'cd $$m && go mod tidy'"; exit 1; }; done
	@for m in tools/controlplane/etcd tools/controlplane/kubernetes tools/golangci-lint; do (cd $$m && GOWORK=off $(GO) mod tidy -diff >/dev/null) || { echo "$$m is not tidy; run 'cd $$m && GOWORK=off go mod tidy'"; exit 1; }; done

.PHONY: lint
lint: ## Static checks: gofmt, and golangci-lint (pinned in tools/golangci-lint, see .golangci.yml) on every module.
	@unformatted=$$(gofmt -l $(MODULES) tools/controlplane); if [ -n "$$unformatted" ]; then \
	  echo "gofmt needed on:"; echo "$$unformatted"; exit 1; fi
	@lint=$$(tools/golangci-lint/build.sh); for m in $(CODE_MODULES); do echo "golangci-lint ./$$m/..."; (cd $$m && $$lint run ./...); done

.PHONY: build
build: ## Build the binaries into bin/.
	@mkdir -p bin
	@for b in $(BINARIES); do echo "go build -o bin/$$b ./$$b/cmd/$$b"; (cd $$b && CGO_ENABLED=0 $(GO) build -trimpath -o ../bin/$$b ./cmd/$$b); done
	@echo "go build -o bin/kubectl-kbind ./cli/cmd/kubectl-kbind"; cd cli && CGO_ENABLED=0 $(GO) build -trimpath -o ../bin/kubectl-kbind ./cmd/kubectl-kbind
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

# Modules whose tests run before the e2e suites.
UNIT_MODULES := $(filter-out e2e,$(CODE_MODULES))
E2E_TIMEOUT ?= 25m
E2E_FLAGS ?=

.PHONY: test
test: build-all build ## Every module's tests (unit, envtest), then `make e2e`, then the quickstart --check.
	@assets=$$(tools/controlplane/build.sh); export KUBEBUILDER_ASSETS=$$assets; \
	  echo "control plane binaries: $$assets"; \
	  for m in $(UNIT_MODULES); do echo "== go test ./$$m/..."; (cd $$m && $(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) ./...); done
	@$(MAKE) --no-print-directory e2e
	@echo "== quickstart --check"; assets=$$(tools/controlplane/build.sh); KUBEBUILDER_ASSETS=$$assets bin/quickstart --check

.PHONY: e2e
e2e: ## The e2e module but the fault suite: e2e-framework suites, binary, chart and backend tests (KBIND_E2E_CLUSTERS=local|kind|auto, E2E_FLAGS=-run ...).
	@assets=$$(tools/controlplane/build.sh); export KUBEBUILDER_ASSETS=$$assets; \
	  echo "== go test ./e2e/... (clusters: $${KBIND_E2E_CLUSTERS:-auto})"; \
	  cd e2e && $(GO) test -count=1 -timeout $(E2E_TIMEOUT) $(E2E_FLAGS) $$($(GO) list ./... | grep -v '/e2e/faults$$')

FAULTS_TIMEOUT ?= 20m
FAULTS_FLAGS ?=

.PHONY: test-faults
test-faults: ## The fault suite (e2e/faults): provider unreachable, resets, latency, API server/etcd restarts, watch expiry, konnector kills, under load (FAULTS_FLAGS=-run ...).
	@assets=$$(tools/controlplane/build.sh); export KUBEBUILDER_ASSETS=$$assets; \
	  echo "== go test ./e2e/faults"; \
	  cd e2e && $(GO) test -count=1 -v -timeout $(FAULTS_TIMEOUT) $(FAULTS_FLAGS) ./faults/

BENCH_FLAGS ?=

.PHONY: bench
bench: build ## Measure latency, throughput vs. the direct-create limit, idle/restart writes, RSS, deletion (BENCH_FLAGS="--n 1000 --json out.json").
	@assets=$$(tools/controlplane/build.sh); cd e2e && KUBEBUILDER_ASSETS=$$assets $(GO) run ./cmd/bench --konnector ../bin/konnector $(BENCH_FLAGS)

IMAGE ?= ghcr.io/kbind/konnector:dev

.PHONY: image
image: ## Build the konnector image with Docker (IMAGE=...). Docker is optional; nothing else needs it.
	@command -v docker >/dev/null && docker info >/dev/null 2>&1 || { echo "make image needs a running Docker engine"; exit 1; }
	docker build -t $(IMAGE) .

DIST_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64

.PHONY: dist
dist: ## Release archives of the kubectl-kbind plugin per platform (DIST_PLATFORMS) and SHA256SUMS in dist/.
	@rm -rf dist && mkdir -p dist
	@for p in $(DIST_PLATFORMS); do os=$${p%/*}; arch=$${p#*/}; ext=; if [ $$os = windows ]; then ext=.exe; fi; \
	  d=dist/kubectl-kbind_$${os}_$${arch}; mkdir -p $$d; echo "go build kubectl-kbind for $$os/$$arch"; \
	  (cd cli && CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "-s -w" -o ../$$d/kubectl-kbind$$ext ./cmd/kubectl-kbind) || exit 1; \
	  cp README.md docs/cli.md $$d/ && tar -C $$d -czf $$d.tar.gz . && rm -rf $$d; done
	@cd dist && sha256sum *.tar.gz > SHA256SUMS && cat SHA256SUMS

.PHONY: clean
clean: ## Remove build outputs (the control plane cache stays).
	rm -rf bin dist

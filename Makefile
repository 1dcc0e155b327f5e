# burnlab: `make help` lists the verbs.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO      ?= go
MODULES := ./gateway/... ./loadgen/...
BIN     := bin
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: help
help: ## list the verbs
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

.PHONY: build
build: ## build every binary (both gateway variants) into bin/
	@mkdir -p $(BIN)
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/gateway-baseline ./gateway/cmd/gateway
	$(GO) build -trimpath -tags fixed -ldflags "$(LDFLAGS)" -o $(BIN)/gateway-fixed ./gateway/cmd/gateway
	$(GO) build -trimpath -o $(BIN)/slo-burn-demo ./gateway/cmd/slo-burn-demo
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/upstream ./loadgen/cmd/upstream
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/loadgen ./loadgen/cmd/loadgen

.PHONY: test
test: ## every test: vet, unit and integration tests with -race, the fixed build's tests
	$(GO) version
	$(GO) vet $(MODULES)
	$(GO) vet -tags fixed ./gateway/cmd/gateway
	$(GO) test -race -count=1 $(MODULES)
	$(GO) test -race -count=1 -tags fixed ./gateway/cmd/gateway

.PHONY: bench
bench: ## parser and end-to-end stream benchmarks (figures, not assertions)
	$(GO) test -run '^$$' -bench . -benchtime 3x ./gateway/internal/transcript
	$(GO) test -run '^$$' -bench . -benchtime 5x ./gateway/internal/proxy
	$(GO) test -run '^$$' -bench . -benchtime 20x ./loadgen/internal/load

.PHONY: fuzz
fuzz: ## run each fuzz target for FUZZTIME (default 30s)
	$(GO) test -run '^$$' -fuzz FuzzReadLine -fuzztime $${FUZZTIME:-30s} ./gateway/internal/sse
	$(GO) test -run '^$$' -fuzz FuzzRedactor -fuzztime $${FUZZTIME:-30s} ./gateway/internal/redact

.PHONY: demo
demo: ## the write-up's standalone repro (under 3 minutes)
	$(GO) run ./gateway/cmd/slo-burn-demo

.PHONY: demo-profile
demo-profile: ## the write-up's profiling recipe on the repro
	$(GO) build -o $(BIN)/slo-burn-demo ./gateway/cmd/slo-burn-demo
	$(BIN)/slo-burn-demo -profile-only -workers=1 -memprofile=$(BIN)/baseline.pprof
	$(GO) tool pprof -top -sample_index=alloc_space $(BIN)/slo-burn-demo $(BIN)/baseline.pprof | head -15

.PHONY: profile
profile: ## top alloc_space of a running gateway (GATEWAY_ADMIN_URL, default http://127.0.0.1:6060)
	$(GO) tool pprof -top -sample_index=alloc_space $${GATEWAY_ADMIN_URL:-http://127.0.0.1:6060}/debug/pprof/allocs | head -15

# burnlab: `make help` lists the verbs.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO      ?= go
# Every go command builds with -trimpath. Without it Go keys each of this
# repository's compiled packages by the checkout's directory, so a fresh
# clone (CI's, or a clean-clone make test) recompiles every one of them,
# in every configuration (-race, both gateway builds, lint's export data),
# with nothing changed; with it a clone reuses the build cache. Commands
# that do not take the flag ignore it. Flags of your own (the environment,
# the command line or go env -w) are kept after it.
override GOFLAGS := -trimpath $(filter-out -trimpath,$(or $(GOFLAGS),$(shell $(GO) env GOFLAGS)))
export GOFLAGS
MODULES := ./shared/... ./gateway/... ./loadgen/... ./pager/... ./grafana/... ./grafana/plugin/... ./prometheus/rulegen/... ./stack/... ./tools/benchproxy/... ./tools/standins/...
BIN     := bin
# COUNT runs each unit test that many times: `make unit check-compose
# check-kubernetes check-strategies COUNT=20` is the hunt for tests that
# fail by chance (docs/tests.md).
COUNT   ?= 1
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: help
help: ## list the verbs
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

.PHONY: build
build: ## build every binary (both gateway variants) into bin/
	@mkdir -p $(BIN)
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/gateway-baseline ./gateway/cmd/gateway
	$(GO) build -trimpath -tags fixed -ldflags "$(LDFLAGS)" -o $(BIN)/gateway-fixed ./gateway/cmd/gateway
	$(GO) build -trimpath -o $(BIN)/slo-burn-demo ./gateway/cmd/slo-burn-demo
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/upstream ./loadgen/cmd/upstream
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/loadgen ./loadgen/cmd/loadgen
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/pager ./pager/cmd/pager

.PHONY: check
check: lint unit ## the inner loop: lint (govet among its linters) and every unit test (-race, both gateway builds), no e2e

.PHONY: unit
unit: chromium ## every unit test with -race, the gateway's in both builds (make check's half that is not lint)
	$(GO) version
	@# golangci-lint's govet vets every module (make lint); only the
	@# fixed build's files, which it does not see, are vetted here.
	$(GO) vet -tags fixed ./gateway/cmd/gateway
	$(GO) test -race -count=$(COUNT) $(MODULES)
	$(GO) test -race -count=$(COUNT) -tags fixed ./gateway/cmd/gateway

# make test's steps, in order (tools/steps.sh): a+b runs a and b side by
# side, two at a time, for work that times nothing; the load checks and
# the e2e, which calibrate load and time alerts, each have the machine to
# themselves. It ends with a table of each step's seconds (TIMINGS=file:
# JSON too).
# make check's two halves, lint and unit, are steps of their own, so the
# two slots stay evenly loaded: unit takes one slot for most of the half,
# and the other slot takes the rest longest first, except lint, which goes
# early because a cold machine builds golangci-lint in it (each step's
# seconds are in docs/results/make-test.md).
TEST_STEPS := tools unit+check-rules+lint+plugin+check-strategies+check-kubernetes+check-compose+check-config load e2e e2e-compose
.PHONY: test
test: ## every test: make check, the load checks, SLO rules (drift, promtool), configs, compose, the e2e; ends with each step's seconds
	@MAKE="$(MAKE)" bash tools/steps.sh $(TEST_STEPS)

# golangci-lint builds in its own module, out of go.work, as Sloth does; the
# first build takes a few minutes, later ones come from the build cache.
LINT := $(BIN)/golangci-lint
.PHONY: lint
lint: ## golangci-lint (.golangci.yml) over every module, the compose and Kubernetes checks' too
	@mkdir -p $(BIN)
	GOWORK=off $(GO) -C tools/lint build -o $(abspath $(LINT)) github.com/golangci/golangci-lint/v2/cmd/golangci-lint
	$(LINT) run $(MODULES)
	for m in stack/compose stack/kubernetes tools/strategies; do (cd $$m && GOWORK=off $(abspath $(LINT)) run ./...) || exit 1; done

.PHONY: load
load: ## load and abuse checks on the fixed gateway (~2 min; no race detector, so the figures are the gateway's)
	$(GO) test -count=1 -v -tags 'fixed load' -run 'TestLoad|TestSlowClients' ./gateway/cmd/gateway

# The pinned Prometheus v3.16.0, promtool, Alertmanager v0.35.0 and amtool,
# built from their Go modules (tools/prometheus, tools/alertmanager) into
# bin/, which goes first on the PATH of every recipe here: the native lab,
# the rule and config checks and compose's stand-ins run one version. The
# first build takes about 6 minutes; a changed go.mod or go.sum rebuilds.
# Chromium, for the pager web UI's browser test (stack/pagerweb). nginx, for
# bench-proxy's smoke test (tools/benchproxy); Debian puts it in /usr/sbin,
# which is not on every user's PATH.
export PATH := $(abspath $(BIN)):$(PATH)
PROM_BINS := $(addprefix $(BIN)/,prometheus promtool alertmanager amtool)
PROM_PINS := $(wildcard tools/prometheus/go.* tools/alertmanager/go.*)
.PHONY: tools
tools: compose-plugin busybox chromium $(PROM_BINS) ## install what the tests need: Prometheus and Alertmanager (pinned, into bin/), Compose v2, Chromium, nginx, busybox-static
	@command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || $(call apt,nginx)
	@promtool --version | head -1

# apt installs Debian packages ($1), with sudo unless root.
apt = { echo "installing $1 (missing)"; \
	command -v apt-get >/dev/null || { echo "no apt-get: install $1 yourself" >&2; exit 1; }; \
	SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $1 >/dev/null; }

# make check runs the pager UI's browser test (stack/pagerweb), so even the
# inner loop needs Chromium on a fresh clone.
.PHONY: chromium
chromium: ## install Debian's Chromium, for the pager web UI's browser test, when missing
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || $(call apt,chromium)

# One recipe makes all four (&:), once, whichever is asked for.
$(PROM_BINS) &: $(PROM_PINS)
	$(GO) run ./tools/standins/cmd/standins -tools $(BIN)
	@touch $(PROM_BINS)

# Compose v2, the docker CLI plugin behind `docker compose`, builds in its own
# module (tools/compose), out of go.work, as golangci-lint does; Debian's
# docker-compose is v1, which rejects the compose file's `name:`. Nothing is
# built when `docker compose version` works; a plugin built here carries
# the hash of tools/compose/go.sum in its version, so a changed go.sum
# rebuilds it, and someone else's Compose is left alone. The cold build
# takes about 5 minutes; Go's build cache keeps later ones to seconds.
COMPOSE_PLUGINS := $(or $(DOCKER_CONFIG),$(HOME)/.docker)/cli-plugins
.PHONY: compose-plugin
compose-plugin: ## install Compose v2 (tools/compose) as the docker CLI's compose plugin, when missing or stale
	@command -v docker >/dev/null || { echo "compose-plugin: no docker CLI here, so no Compose plugin"; exit 0; }; \
	mod=$$(GOWORK=off $(GO) -C tools/compose list -m -f '{{.Version}}' github.com/docker/compose/v2); \
	want=$$mod+burnlab.$$(sha256sum tools/compose/go.sum | cut -c1-12); \
	have=v$$(docker compose version --short 2>/dev/null | sed 's/^v//') || true; \
	if [ "$$have" = "$$want" ]; then echo "docker compose $$have"; exit 0; fi; \
	case $$have in v|*+burnlab.*) ;; *) echo "docker compose $$have is not burnlab's: leaving it (tools/compose pins $$mod)"; exit 0;; esac; \
	echo "building Compose $$want into $(COMPOSE_PLUGINS)/docker-compose (was: $${have#v})"; mkdir -p $(COMPOSE_PLUGINS); \
	GOWORK=off CGO_ENABLED=0 $(GO) -C tools/compose build -trimpath -ldflags "-w -X github.com/docker/compose/v2/internal.Version=$$want" \
		-o $(COMPOSE_PLUGINS)/docker-compose github.com/docker/compose/v2/cmd; \
	docker compose version

# Sloth builds in its own module, out of go.work, so its large dependency
# graph cannot move the services' versions.
SLOTH      := GOWORK=off $(GO) -C prometheus/tools tool sloth
# Each service's Sloth spec; Sloth reads them as one file of YAML documents,
# one per service, and writes one rule file per window table, so Prometheus
# loads a single rules/slo.yml wherever it runs.
SLO_SPECS  := prometheus/slo/llm-gateway.yml prometheus/slo/llm-provider.yml
SLO_SPEC   := $(abspath $(BIN))/slo-specs.yml
LAB_WINDOWS := --slo-period-windows-path=../slo/windows/lab --default-slo-period=10h

# The rule generators live in prometheus/rulegen, each package saying why.
# Sloth writes no alert for an SLI with no data; nodata-rules appends one to
# each file Sloth generates.
NODATA := $(GO) run ./prometheus/rulegen/cmd/nodata-rules
# Sloth's alerts say neither the burn of the pair that fired nor the budget
# left; burnfacts-rules annotates each.
BURNFACTS := $(GO) run ./prometheus/rulegen/cmd/burnfacts-rules
# Sloth's pairs fire on one bad event in a window too empty to hold the
# evidence; guard-rules adds a minimum-traffic guard to each pair, before
# burnfacts-rules reads the pairs.
GUARD := $(GO) run ./prometheus/rulegen/cmd/guard-rules -spec $(SLO_SPEC)
# Sloth writes a document per service, and Prometheus reads a rule file's
# first only; join-rules makes one of them, straight after Sloth.
JOIN := $(GO) run ./prometheus/rulegen/cmd/join-rules

# The specs joined, for Sloth and guard-rules (under bin/, not committed).
.PHONY: slo-spec
slo-spec:
	@mkdir -p $(BIN); for f in $(SLO_SPECS); do echo "---"; cat $$f; done > $(SLO_SPEC)

.PHONY: rules
rules: slo-spec ## regenerate prometheus/rules/ from the Sloth specs
	$(SLOTH) generate -i $(SLO_SPEC) -o ../rules/slo-production.yml 2>/dev/null
	$(SLOTH) generate -i $(SLO_SPEC) -o ../rules/slo-lab.yml $(LAB_WINDOWS) 2>/dev/null
	$(JOIN) -in prometheus/rules/slo-production.yml
	$(JOIN) -in prometheus/rules/slo-lab.yml
	$(GUARD) -in prometheus/rules/slo-production.yml
	$(GUARD) -in prometheus/rules/slo-lab.yml
	$(BURNFACTS) -in prometheus/rules/slo-production.yml
	$(BURNFACTS) -in prometheus/rules/slo-lab.yml
	$(NODATA) -in prometheus/rules/slo-production.yml
	$(NODATA) -in prometheus/rules/slo-lab.yml

.PHONY: check-rules
check-rules: slo-spec ## fail when the committed rules differ from a regeneration; run the promtool suites
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	($(SLOTH) generate -i $(SLO_SPEC) -o $$tmp/slo-production.yml 2>$$tmp/log && \
	 $(SLOTH) generate -i $(SLO_SPEC) -o $$tmp/slo-lab.yml $(LAB_WINDOWS) 2>>$$tmp/log && \
	 $(JOIN) -in $$tmp/slo-production.yml && $(JOIN) -in $$tmp/slo-lab.yml && \
	 $(GUARD) -in $$tmp/slo-production.yml && $(GUARD) -in $$tmp/slo-lab.yml && \
	 $(BURNFACTS) -in $$tmp/slo-production.yml && $(BURNFACTS) -in $$tmp/slo-lab.yml && \
	 $(NODATA) -in $$tmp/slo-production.yml && $(NODATA) -in $$tmp/slo-lab.yml) || { cat $$tmp/log; exit 1; }; \
	for f in slo-production.yml slo-lab.yml; do \
		diff -u prometheus/rules/$$f $$tmp/$$f || { echo "prometheus/rules/$$f is stale: run make rules" >&2; exit 1; }; \
	done; echo "rules: committed = generated"
	promtool check rules prometheus/rules/slo-production.yml prometheus/rules/slo-lab.yml
	promtool test rules prometheus/tests/slo-lab.test.yml prometheus/tests/slo-production.test.yml

# The strategies backtest (tools/strategies, out of go.work: it links the
# pinned Prometheus's rule engine) runs the pinned Sloth CLI for each window
# table; the binary is rebuilt only when prometheus/tools' pins change.
# Sloth's Go library cannot be linked next to Prometheus v0.316's packages.
SLOTH_BIN := $(BIN)/sloth
$(SLOTH_BIN): prometheus/tools/go.mod prometheus/tools/go.sum
	@mkdir -p $(BIN)
	GOWORK=off $(GO) -C prometheus/tools build -o $(abspath $@) github.com/slok/sloth/cmd/sloth

STRATEGIES := cd tools/strategies && GOWORK=off $(GO) run ./cmd/strategies -root ../.. -sloth $(abspath $(SLOTH_BIN))
.PHONY: strategies
strategies: $(SLOTH_BIN) ## backtest the SRE workbook's six alerting strategies and two naive ones on every incident (~3 min); SAVE=1 writes docs/results/strategies.md and its pictures
	$(STRATEGIES) $(STRATEGIES_FLAGS) $(if $(SAVE),-save $(abspath docs/results/strategies.md) -table $(abspath docs/strategies.md) -pictures $(abspath docs/results/strategies))

.PHONY: check-strategies
check-strategies: $(SLOTH_BIN) ## the strategies' tests (engine against arithmetic, each rule matters) and a short run: the regression on the lab's windows
	cd tools/strategies && SLOTH=$(abspath $(SLOTH_BIN)) GOWORK=off $(GO) test -count=$(COUNT) ./...
	$(STRATEGIES) -windows prometheus/slo/windows/lab -incidents regression >/dev/null

.PHONY: dashboards
dashboards: ## regenerate grafana/dashboards/ from the Go source (make test fails on drift)
	$(GO) run ./grafana/cmd/dashgen -o grafana/dashboards/llm-gateway-slo.json

PLUGIN_ID := burnlab-pager-datasource
.PHONY: plugin
plugin: ## build the Grafana backend plugin (linux/amd64 and linux/arm64) into grafana/plugin/dist
	@for arch in amd64 arm64; do \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -o grafana/plugin/dist/gpx_$(PLUGIN_ID)_linux_$$arch ./grafana/plugin/cmd/pager-datasource || exit 1; \
	done; ls grafana/plugin/dist

.PHONY: check-config
check-config: ## promtool check config (with each rule set) and amtool check-config
	@for windows in lab production; do \
		tmp=$$(mktemp -d); mkdir $$tmp/rules; cp prometheus/prometheus.yml $$tmp/; \
		cp prometheus/rules/slo-$$windows.yml $$tmp/rules/slo.yml; \
		promtool check config $$tmp/prometheus.yml || exit 1; rm -rf $$tmp; \
	done
	amtool check-config alertmanager/alertmanager.yml

# The compose checks' module stays out of go.work (GOWORK=off), as Sloth's
# does: compose-go and buildkit would otherwise raise versions the services
# build with.
.PHONY: check-compose
check-compose: ## load docker-compose.yml with compose-go, lint the Dockerfile with buildkit, hold both to the lab
	cd stack/compose && GOWORK=off $(GO) test -count=$(COUNT) ./...

# The Kubernetes checks' module stays out of go.work too: kustomize,
# k8s.io/api and the Prometheus Operator's types would move the services'
# versions. promtool (make tools) checks the PrometheusRules' groups.
.PHONY: check-kubernetes
check-kubernetes: tools ## build every deploy/kubernetes overlay with kustomize's Go API, decode strictly, hold it to compose, the lab and the rules
	cd stack/kubernetes && GOWORK=off $(GO) test -count=$(COUNT) ./...

.PHONY: k8s
k8s: ## regenerate deploy/kubernetes's PrometheusRules and dashboard copy from prometheus/rules/ and grafana/dashboards/
	cd stack/kubernetes && GOWORK=off $(GO) run ./cmd/k8sgen -root ../..

.PHONY: bench
bench: ## parser and end-to-end stream benchmarks (figures, not assertions)
	$(GO) test -run '^$$' -bench . -benchtime 3x ./gateway/internal/transcript
	$(GO) test -run '^$$' -bench . -benchtime 5x ./gateway/internal/proxy
	$(GO) test -run '^$$' -bench . -benchtime 20x ./loadgen/internal/load

# The side-by-side proxy benchmark (issue 16), each server its own process;
# not in make test (a smoke run of it is, in tools/benchproxy). It checks
# for nginx itself rather than through make tools, so a benchmark does not
# install Prometheus and Chromium too. BENCH_PROXY_FLAGS: e.g. -streams 100,
# -targets direct,reverseproxy,gateway-fixed, -o bench-proxy.json. SAVE=1
# writes the run to docs/results/bench-proxy.md. PREVIOUS, a git revision,
# adds the fixed gateway of that revision as a row of the same run, so a
# change's gain is one run's ratio. By default it is the gateway before its
# latest change: HEAD while gateway/ has uncommitted changes, else the
# parent of the last commit that changed gateway/ outside its tests; none
# outside a git checkout. PREVIOUS= leaves it out.
PREVIOUS ?= $(shell if ! git diff --quiet HEAD -- gateway 2>/dev/null; then git rev-parse --short HEAD 2>/dev/null; \
	else c=$$(git log -1 --format=%h -- gateway ':(exclude,glob)**/*_test.go' 2>/dev/null) && [ -n "$$c" ] && git rev-parse --short --verify -q "$$c^"; fi)
.PHONY: bench-proxy
bench-proxy: ## CPU/stream, streams/s, p50/p99, heap/stream, first event and gaps: direct, ReverseProxy, nginx, both gateways and the previous fixed one (~3 min; installs nginx)
	@command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || $(call apt,nginx)
	$(GO) run ./tools/benchproxy/cmd/bench-proxy $(if $(PREVIOUS),-previous '$(PREVIOUS)') $(BENCH_PROXY_FLAGS) $(if $(SAVE),-save docs/results/bench-proxy.md)

# The complexity gate (issue 34): streams of 1,000 to 16,000 events through
# each gateway build, and the power law its bytes and CPU per stream grow
# by; it fails when the fixed build's bytes grow faster than n^1.2. make
# test runs a shorter gate (tools/benchproxy's TestScalingGate). SAVE=1
# writes docs/results/scaling.md and scaling.svg; JSON=file one object per
# build.
.PHONY: scaling
scaling: ## the complexity gate: bytes and CPU per stream against its length, each build, fitted as n^k (~1 min)
	$(GO) run ./tools/benchproxy/cmd/scaling $(if $(SAVE),-save docs/results/scaling.md -picture docs/results/scaling.svg) $(if $(JSON),-json $(JSON))

# -fuzzminimizetime: minimizing a large new input otherwise takes up to a
# minute of the budget with no new executions.
FUZZ := -run '^$$' -fuzztime $${FUZZTIME:-30s} -fuzzminimizetime 5s -parallel 1
.PHONY: fuzz
fuzz: ## run each fuzz target for FUZZTIME (default 30s)
	$(GO) test $(FUZZ) -fuzz FuzzReadLine ./gateway/internal/sse
	$(GO) test $(FUZZ) -fuzz FuzzRedactor ./gateway/internal/redact
	$(GO) test $(FUZZ) -fuzz FuzzScan ./gateway/internal/chunk
	$(GO) test $(FUZZ) -fuzz FuzzRewriter ./gateway/internal/proxy
	$(GO) test $(FUZZ) -fuzz FuzzWebhookPayload ./pager/internal/webhook

.PHONY: demo
demo: ## the write-up's standalone repro, calibrated to this machine (~1 min); SAVE=1 writes docs/results/demo.md
	$(GO) build -o $(BIN)/slo-burn-demo ./gateway/cmd/slo-burn-demo
	$(BIN)/slo-burn-demo $(DEMO_FLAGS) $(if $(SAVE),$(DEMO_SAVE))

# The demo's output, kept under SAVE=1 with its header (stack/cmd/save-result).
DEMO_SAVE = 2>&1 | tee /dev/stderr | $(GO) run ./stack/cmd/save-result -o docs/results/demo.md \
	-title "The write-up's standalone repro, calibrated" -by "\`make demo SAVE=1\` (gateway/cmd/slo-burn-demo)" \
	-note "one process: the baseline parser, then the fixed one, over the same 100 seeded streams; the first table is this run's, the second the write-up's"

.PHONY: demo-profile
demo-profile: ## the write-up's profiling recipe on the repro
	$(GO) build -o $(BIN)/slo-burn-demo ./gateway/cmd/slo-burn-demo
	$(BIN)/slo-burn-demo -profile-only -workers=1 -memprofile=$(BIN)/baseline.pprof
	$(GO) tool pprof -top -sample_index=alloc_space $(BIN)/slo-burn-demo $(BIN)/baseline.pprof | head -15

.PHONY: profile
profile: ## top alloc_space of the running gateway, compose or lab (GATEWAY_ADMIN_URL, default http://127.0.0.1:6060)
	$(GO) tool pprof -top -sample_index=alloc_space $${GATEWAY_ADMIN_URL:-http://127.0.0.1:6060}/debug/pprof/allocs | head -15

GATEWAY_TAG ?= baseline
SLO_WINDOWS ?= lab

.PHONY: lab
lab: tools ## run the stack natively on 127.0.0.1 (real Prometheus and Alertmanager); Ctrl-C stops it
	$(GO) run ./stack/cmd/lab up -variant $(GATEWAY_TAG) -windows $(SLO_WINDOWS)

# The write-up's three days, live (issue 34): the loadgen's long
# generations grow over an hour, the lab's compressed three days, so the
# baseline's O(n²) transcript burns by itself; it must ticket, then page,
# each naming (*Baseline).Append's quadratic growth, and VARIANT=fixed must
# stay silent. Runs beside a lab with FREE_PORTS=1.
.PHONY: timeline
timeline: tools ## the write-up's three days on the native lab (~1 h): ticket, then page, each with its verdict (VARIANT=fixed stays silent; DURATION=, JSON=file, SAVE=1)
	$(GO) run ./stack/cmd/timeline -variant $(or $(VARIANT),baseline) $(if $(DURATION),-duration $(DURATION)) $(if $(FREE_PORTS),-free-ports) \
		$(if $(JSON),-json $(JSON)) $(if $(SAVE),-save docs/results/timeline-$(or $(VARIANT),baseline).md)

.PHONY: lab-switch
lab-switch: ## switch a running lab's gateway: make lab-switch GATEWAY_TAG=fixed
	$(GO) run ./stack/cmd/lab switch -variant $(GATEWAY_TAG)

# The scenario matrix runs its fixed-build labs side by side, and the
# baseline's regression row once all but the creep's have ended
# (docs/scenarios.md says why); SCENARIOS=a,b keeps only those rows. SAVE=1
# writes docs/results/lab-e2e.md and scenarios-e2e.md from a passing run.
.PHONY: e2e
e2e: tools $(SLOTH_BIN) ## the end-to-end proof on the native lab: every scenario's alerts, the baseline's page and make lab-switch's resolve among them (SCENARIOS=a,b for some), and a two-replica service profiled and merged
	$(if $(SAVE),BURNLAB_RESULTS=$(abspath docs/results)) $(GO) test -tags e2e -run 'TestScenarios|TestEveryReplicaOfAServiceIsProfiled' -count=1 -timeout 35m -v ./stack/lab

# The compose e2e runs docker-compose.yml on this machine's engine under
# the project name burnlab-e2e, on the stand-ins where the engine has no
# registry; it needs the contract's ports free (make down first). With no
# engine it is skipped, loudly, except under CI=true. SAVE=1 writes its
# timeline to docs/results/compose-e2e.md.
.PHONY: e2e-compose
e2e-compose: compose-plugin busybox $(PROM_BINS) ## the end-to-end proof on docker compose: build, healthy, page, make fixed, resolve, the monitoring path's faults, restart, down -v (~15 min warm)
	cd stack/compose && BUSYBOX=$(BUSYBOX) $(if $(SAVE),BURNLAB_RESULTS=$(abspath docs/results)) GOWORK=off \
		$(GO) test -tags e2e -run TestComposeEndToEnd -count=1 -timeout 45m -v .

.PHONY: scenario
scenario: ## inject a fault into the running lab or compose stack: make scenario S=upstream-tail (S=none clears it; no S lists them; SHARE=0.03 runs a one-step fault harder)
	@$(GO) run ./stack/cmd/lab scenario -name "$(S)" -compose "$(COMPOSE)" $(if $(SHARE),-share $(SHARE))

# docker compose: the same stack in containers. BURNLAB_VERSION stamps the
# images' binaries (gateway_build_info{version}). Once `make up-offline`
# has written its override (.offline/compose.yml), every compose verb here
# uses it too, so `make fixed` and `make down` act on that stack; remove
# .offline/ to go back to docker-compose.yml alone. STAGE re-stages the
# build context first, so a verb that builds builds today's files.
OFFLINE         := .offline
OFFLINE_COMPOSE := docker compose -f docker-compose.yml -f $(OFFLINE)/compose.yml
ifneq ($(wildcard $(OFFLINE)/compose.yml),)
COMPOSE ?= $(OFFLINE_COMPOSE)
STAGE   := standins
else
COMPOSE ?= docker compose
STAGE   :=
endif
export BURNLAB_VERSION := $(VERSION)

.PHONY: up
up: $(STAGE) ## docker compose: build and start the stack in the background (the baseline gateway pages in minutes)
	$(COMPOSE) up --build --detach
	@echo "Grafana      http://127.0.0.1:3000 (the SLO dashboard is the home page)"
	@echo "Prometheus   http://127.0.0.1:9090/alerts   Alertmanager http://127.0.0.1:9093"
	@echo "Pages        make pages    Logs  make logs    The fix  make fixed"

# An engine with no registry (this project's machines) pulls nothing: the
# stand-ins are built here instead (tools/standins: the Go image from the
# host's Go, the distroless runtime, Prometheus and Alertmanager from their
# Go modules), tagged by the hash of their inputs and built again only when
# those change. The build context is a staged copy of the repo with its
# modules vendored, as a build container here cannot reach the module proxy.
# BUSYBOX: a static busybox, the stand-ins' shell (Debian's busybox-static).
BUSYBOX ?= /bin/busybox
.PHONY: busybox
busybox: ## install Debian's busybox-static (the stand-ins' shell) unless BUSYBOX names another
	@[ "$(BUSYBOX)" != /bin/busybox ] || dpkg-query -W -f='$${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' || $(call apt,busybox-static)

.PHONY: standins
standins: busybox ## build the stand-in images an engine with no registry lacks; stage the build context and compose override in .offline/
	$(GO) run ./tools/standins/cmd/standins -out $(OFFLINE) -busybox $(BUSYBOX)

.PHONY: up-offline
up-offline: compose-plugin standins ## docker compose on an engine with no registry: the stack on stand-ins, Grafana left out (make down stops it)
	$(OFFLINE_COMPOSE) up --build --detach
	@echo "Grafana is left out: no registry here gives grafana/grafana, and burnlab never fakes it (.offline/compose.yml)."
	@echo "Prometheus   http://127.0.0.1:9090/api/v1/alerts (the stand-in has no web UI)   Alertmanager http://127.0.0.1:9093/api/v2/alerts"
	@echo "Pages        make pages    Logs  make logs    The fix  make fixed    Stop  make down"

.PHONY: down
down: ## docker compose: stop the stack, keeping its volumes (docker compose down -v forgets them)
	$(COMPOSE) down

.PHONY: fixed
fixed: $(STAGE) ## docker compose: switch the gateway to burnlab/gateway:fixed, recreating only the gateway
	GATEWAY_TAG=fixed $(COMPOSE) up --build --detach --no-deps gateway

.PHONY: baseline
baseline: $(STAGE) ## docker compose: switch the gateway back to burnlab/gateway:baseline
	GATEWAY_TAG=baseline $(COMPOSE) up --build --detach --no-deps gateway

.PHONY: images
images: $(STAGE) ## docker compose: build every image, the gateway as both :baseline and :fixed
	GATEWAY_TAG=baseline $(COMPOSE) build
	GATEWAY_TAG=fixed $(COMPOSE) build gateway

.PHONY: pages
pages: ## what the pager received, pages and tickets apart (the newest 50 of each), each with its page in the web UI (compose or lab; PAGER_URL, default http://127.0.0.1:5001)
	@pager=$${PAGER_URL:-http://127.0.0.1:5001}; \
	if command -v jq >/dev/null; then \
		for sev in page ticket; do echo "$${sev}s:"; \
			curl -fsS "$$pager/api/incidents?severity=$$sev" | jq -r 'if length == 0 then "  none" else .[] | "  \(.status)  \(.slo)  \(.startsAt)  \(.url)\n    burn at firing: \(.burn_rate // "?")\n    budget: \(.annotations.budget // "?")\n    top alloc_space: \(.profile.top[0].function // "none")\n    heap: \(.facts.heap.words // "no verdict yet")\n    growth: \(.facts.heap.growth.words // .facts.heap.growth.error // "not fitted")\n    gc: \(.facts.gc.words // "not read yet")\n    slowest in the flight recorder: \(.profile.trace.requests[0] // null | if . == null or .seconds <= 0 then "none" else "\(.request_id) \(.seconds*1000|round) ms = \(100*.running_seconds/.seconds|round) % running, \(100*.assist_seconds/.seconds|round) % mark assist, \(100*.runnable_seconds/.seconds|round) % waiting for a CPU, \(100*.network_seconds/.seconds|round) % network" end)" end'; \
		done; \
	else curl -fsS $$pager/api/incidents; echo; echo "(install jq for pages and tickets apart)"; fi; echo "pager web UI: $$pager/ (older ones: ?page=2 and on)"

.PHONY: logs
logs: ## docker compose: follow the logs (SERVICE=gateway for one)
	$(COMPOSE) logs --follow --tail=50 $(SERVICE)

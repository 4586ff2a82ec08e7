# sandgate: `make run` starts sandgate, `make test` runs every check CI runs.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c

GO       ?= go
OPA      := $(GO) tool opa
LINT     := $(GO) tool -modfile=tools/go.mod golangci-lint
BUNDLE   := policies/
# opa test coverage floor for the Rego bundle, in percent; below it `make test` fails.
REGO_COVERAGE_THRESHOLD := 90
BUILD    := .build

.PHONY: system-deps docs all test run run-nomad build image vet lint gofmt-check policy policy-fmt policy-check policy-test policy-lint go-test bench bench-latency fuzz soak clean

all: test

## run: the gateway on 127.0.0.1:8080 (a real Nomad at NOMAD_ADDR, else the simulator; see README)
run: build
	$(BUILD)/sandgate dev $(RUN_ARGS)

## run-nomad: the gateway on a REAL local Nomad: a server-only and a client-only agent from NOMAD_BIN,
## a local busybox image (no registry is reached), the bundle's data overlaid for them; needs root and Docker
NOMAD_BIN   ?= ../shared/nomad/nomad
LOCAL_IMAGE ?= sandgate-local/busybox:1
run-nomad: build
	./deploy/images/build.sh busybox=$(LOCAL_IMAGE)
	$(BUILD)/sandgate dev --nomad-agent $(NOMAD_BIN) --image $(LOCAL_IMAGE) $(RUN_ARGS)

# VERSION and the git commit are stamped into the binary (`sandgate version`);
# the commit is left to Go's vcs stamp when git cannot say.
VERSION ?= dev
COMMIT  := $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X main.version=$(VERSION)$(if $(COMMIT), -X main.commit=$(COMMIT))

build:
	@mkdir -p $(BUILD)
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BUILD)/sandgate ./cmd/sandgate

## image: the container image $(IMAGE):$(VERSION) and $(IMAGE):dev, built locally with no registry:
## the static binary (CGO_ENABLED=0, -trimpath) FROM scratch, user 65532, this host's CA bundle; needs Docker
IMAGE ?= sandgate
image:
	@mkdir -p $(BUILD)/image
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BUILD)/image/sandgate ./cmd/sandgate
	./deploy/image/build.sh $(BUILD)/image/sandgate "$(VERSION)" "$(COMMIT)" $(IMAGE):$(VERSION) $(IMAGE):dev

## test: everything CI checks; fails on the first failing step
test: system-deps gofmt-check vet policy lint go-test
	@echo "make test: all checks passed"

## system-deps: the Debian packages of the real-system tests (iptables, iproute2, shellcheck, busybox-static, chromium, nodejs)
system-deps:
	@./.ci/system-deps

gofmt-check:
	@bad=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.build/*')); \
	if [ -n "$$bad" ]; then echo "gofmt would change: $$bad"; exit 1; fi

# The test hooks (gateway/testhook) are compiled only with their build tag:
# vet, lint and test that build of the package too.
HOOK_TAGS := -tags sandgate_testhooks

vet:
	$(GO) vet ./...
	$(GO) vet $(HOOK_TAGS) ./gateway/testhook/

lint:
	$(LINT) run ./...
	$(LINT) run --build-tags sandgate_testhooks ./gateway/testhook/

## policy: the Rego bundle checks (format, strict compile, tests with coverage floor, annotations)
policy: policy-fmt policy-check policy-test policy-lint

policy-fmt:
	$(OPA) fmt --list --fail $(BUNDLE)

policy-check:
	$(OPA) check --strict -b $(BUNDLE)

policy-test:
	@mkdir -p $(BUILD)
	$(OPA) test -b $(BUNDLE) --fail-on-empty --coverage --threshold $(REGO_COVERAGE_THRESHOLD) > $(BUILD)/rego-coverage.json || \
		{ echo "opa test failed or Rego coverage is below $(REGO_COVERAGE_THRESHOLD)%:"; $(OPA) test -b $(BUNDLE) --fail-on-empty; \
		  grep -o '"coverage": *[0-9.]*' $(BUILD)/rego-coverage.json | tail -1; exit 1; }
	@echo "opa test: pass; Rego coverage $$(grep -o '"coverage": *[0-9.]*' $(BUILD)/rego-coverage.json | tail -1 | grep -o '[0-9.]*$$')% (floor $(REGO_COVERAGE_THRESHOLD)%)"
	$(OPA) test -b $(BUNDLE) --fail-on-empty

## policy-lint: every rule that can deny carries title, description, custom.id, custom.severity
## (the engine refuses a bundle that does not; this loads the bundle from disk like an operator would)
policy-lint: build
	$(BUILD)/sandgate policy info --policy-dir $(BUNDLE) > /dev/null
	@echo "policy annotations: ok"

# The real-Nomad suite (test/e2e) is part of ./...: it starts its own Nomad
# agents from NOMAD_BIN (default ../shared/nomad/nomad) and skips, saying
# why, without that binary, Docker or root; SANDGATE_E2E=require (.ci/run)
# makes that a failure. Every benchmark of the tree runs once after its
# package's tests (-bench . -benchtime 1x), so none can rot unnoticed; the
# e2e benchmarks share the suite's TestMain and agents (docs/benchmarks.md).
# test/pgrun starts a PostgreSQL server of its own (Debian's, as the
# postgres user, on a free loopback port) for the run and exports its
# address as SANDGATE_TEST_PG_DSN; each test package makes its databases
# there. Without the server binaries the PostgreSQL tests skip, saying so;
# SANDGATE_PG=require (.ci/run) makes that a failure. .ci/go-test runs
# test/e2e beside the other packages (it mostly waits on its agents).
go-test:
	GO=$(GO) $(GO) run ./test/pgrun -- ./.ci/go-test
	$(GO) test -race -count=1 $(HOOK_TAGS) ./gateway/testhook/

## bench: the policy decision benchmarks (see docs/benchmarks.md)
## (bench-latency: the authz and admission decisions against the baseline revision, through benchstat)
bench:
	$(GO) test -run='^$$' -bench=. -benchmem -count=5 ./policies/
	$(GO) test -run='^$$' -bench=Gateway -benchmem -count=5 ./gateway/
	$(GO) test -run='^$$' -bench=. -benchmem -count=5 ./gateway/token/ ./store/bolt/

## fuzz: every fuzz target for FUZZTIME each (go test -fuzz takes one package and one
## target per run); first fails if a Fuzz function of the tree is not listed in FUZZ_TARGETS
FUZZTIME ?= 20s
FUZZ_TARGETS := \
	./render:FuzzJob \
	./render/isolation:FuzzConfig \
	./render/execwrap:FuzzCommandRoundTrip \
	./render/fileops:FuzzParseAnswer \
	./policies:FuzzParseInput \
	./gateway/token:FuzzVerify \
	./gateway/token:FuzzParseBearer \
	./gateway/client:FuzzReadProblem \
	./gateway/client:FuzzRetryAfter \
	./nomad:FuzzReadTail \
	./gateway:FuzzDecodeCreateRequest \
	./gateway:FuzzDecodeExecRequest \
	./gateway:FuzzDecodeMintRequest \
	./gateway:FuzzDecodeEnrollRequest \
	./gateway:FuzzDecodeStateRequest \
	./gateway:FuzzAuthorizeCreate \
	./gateway:FuzzAuthorizeExec \
	./gateway:FuzzAuthorizeMint \
	./gateway:FuzzAuthorizeExtend \
	./gateway:FuzzLogsQuery \
	./gateway:FuzzFilesQuery \
	./gateway:FuzzQueryParams \
	./gateway:FuzzSandboxPathID \
	./gateway:FuzzAuthorizationHeader \
	./internal/clip:FuzzString
fuzz:
	@found=$$(grep -rHoE '^func Fuzz[A-Za-z0-9_]+' --include='*_test.go' --exclude-dir=tools --exclude-dir=.build . | \
		sed -E 's|^(.*)/[^/]*\.go:func (Fuzz.*)$$|\1:\2|' | sort -u); \
	listed=$$(printf '%s\n' $(FUZZ_TARGETS) | sort -u); \
	missing=$$(comm -23 <(echo "$$found") <(echo "$$listed")); stale=$$(comm -13 <(echo "$$found") <(echo "$$listed")); \
	if [ -n "$$missing$$stale" ]; then echo "FUZZ_TARGETS lacks: $$missing; lists what does not exist: $$stale"; exit 1; fi
	@for t in $(FUZZ_TARGETS); do \
		echo "== $${t##*:} ($${t%%:*}) for $(FUZZTIME)"; \
		$(GO) test "$${t%%:*}" -run='^$$' -fuzz="^$${t##*:}\$$" -fuzztime=$(FUZZTIME) || exit 1; \
	done

## soak: the load tests at full size, without the race detector (not part of make test):
## 10,000 racing creates, then TestSoak, mixed traffic of 50 agents for SANDGATE_SOAK_DURATION
SANDGATE_SOAK_DURATION ?= 5m
soak:
	SANDGATE_SOAK=1 SANDGATE_SOAK_DURATION=$(SANDGATE_SOAK_DURATION) $(GO) test ./test/load/ -count=1 -v -timeout 60m \
		-run '^(TestRacingCreatesNeverOverrun|TestSoak)$$'

clean:
	rm -rf $(BUILD)

## docs: regenerate the rule table in docs/policies.md from the bundle's annotations
docs: build
	$(BUILD)/sandgate policy info --format markdown > $(BUILD)/rules.md
	awk -v f=$(BUILD)/rules.md '/<!-- rule-table:begin -->/{print; while ((getline l < f) > 0) print l; skip=1; next} /<!-- rule-table:end -->/{skip=0} !skip' docs/policies.md > $(BUILD)/policies.md
	mv $(BUILD)/policies.md docs/policies.md

## bench-latency: authz and admission decision latency, baseline revision vs the current bundle (docs/benchmarks.md)
bench-latency:
	@mkdir -p $(BUILD)
	$(GO) test -run='^$$' -bench='DecisionLatency' -benchmem -count=$${COUNT:-10} ./policies/ | tee $(BUILD)/latency.txt
	$(GO) tool -modfile=tools/go.mod benchstat -col /bundle $(BUILD)/latency.txt

# mosaic: the two commands of the README are `make demo` and `make test`.
GO        ?= go
BIN       := $(CURDIR)/.build/bin
PI_DIR    ?= $(CURDIR)/.build/pi
SANDBOX   := $(CURDIR)/contrib/sandbox/exec
FUZZTIME  ?=
STATICCHECK ?= $(shell command -v staticcheck 2>/dev/null || echo $(HOME)/go/bin/staticcheck)

export MOSAIC_BIN_DIR := $(BIN)

.PHONY: all build demo test check unit fuzz bench pi mutants clean

all: build

# Project binaries the integration tests run (built from this tree, so the
# sandbox never builds anything).
build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./cmd/mosaicctl ./contrib/fakepi/cmd/fakepi ./contrib/stubmodel/cmd/stubmodel

# The pinned Pi 0.85.1 and its Node 22, from the npm registry, into .build/pi.
pi:
	@bash contrib/pi/install.sh $(PI_DIR) >/dev/null

# The main job: a real conversation with the pinned Pi under a real systemd
# (stub model; DEMO_ARGS="--provider P --model M --agent-dir DIR" for a real one).
demo: build pi
	@bash contrib/demo/demo.sh $(DEMO_ARGS)

# Every test: static checks, then every package with the race detector, each
# test binary inside a fresh systemd sandbox (as root; elsewhere the
# integration tests skip and say why), then short fuzz runs.
test: check build pi
	MOSAIC_PI=$$(bash contrib/pi/install.sh $(PI_DIR)) \
		$(GO) test -race -count=1 -exec $(SANDBOX) ./...
	$(MAKE) --no-print-directory fuzz

check:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet ./...
	$(STATICCHECK) ./...

# Counts, not durations: a duration -fuzztime can fail with a spurious
# "context deadline exceeded" on Go 1.26 (golang/go#75804, fixed in 1.27),
# mostly on a loaded machine. Each count is about 5-10 s here; FUZZTIME=30s
# overrides all four.
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzLineReader$$' -fuzztime $(or $(FUZZTIME),5000x) ./engine/
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(or $(FUZZTIME),100000x) ./engine/
	$(GO) test -run '^$$' -fuzz '^FuzzParser$$' -fuzztime $(or $(FUZZTIME),200000x) ./terminal/
	$(GO) test -run '^$$' -fuzz '^FuzzTranscript$$' -fuzztime $(or $(FUZZTIME),50000x) ./terminal/

# Benchmarks print ratios against a baseline measured in the same run.
bench: build pi
	MOSAIC_PI=$$(bash contrib/pi/install.sh $(PI_DIR)) \
		$(GO) test -run '^$$' -bench . -benchtime 2x -exec $(SANDBOX) ./...

clean:
	rm -rf .build

# The brief's mutation list: every mutant must make a test fail.
mutants: pi
	MOSAIC_PI=$$(bash contrib/pi/install.sh $(PI_DIR)) $(GO) run ./contrib/mutants/runner

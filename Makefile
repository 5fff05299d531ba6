# mosaic: the two commands of the README are `make demo` and `make test`.
GO        ?= go
BIN       := $(CURDIR)/.build/bin
PI_DIR    ?= $(CURDIR)/.build/pi
CLAUDE_DIR ?= $(CURDIR)/.build/claude
SANDBOX   := $(CURDIR)/contrib/sandbox/exec
FUZZTIME  ?=
# The pinned staticcheck, run by version: `go run` fetches it into the
# module cache once (checked against the checksum database) and builds it
# into the build cache, so nothing is installed and the README's
# prerequisites are the whole list. Not a `tool` directive: that would put
# staticcheck's dependencies (golang.org/x/tools, ...) into go.mod, where
# they could raise the versions the project itself builds with.
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
# `make install PREFIX=~/.local` puts mosaicctl in PREFIX/bin; DESTDIR
# stages it for packaging.
PREFIX    ?= /usr/local
DESTDIR   ?=
# Every recipe line runs in bash with pipefail, so a test run piped
# through its progress printer still fails when a test fails.
SHELL     := /bin/bash
.SHELLFLAGS := -o pipefail -c

export MOSAIC_BIN_DIR := $(BIN)
# urfave_cli_no_docs leaves out urfave/cli's Markdown and man page
# generators (mosaicctl writes its own roff, cmd/mosaicctl/gen_man.go) and
# with them go-md2man and blackfriday, whose package initialisation cost
# every mosaicctl process, a socket-activated controller before its first
# welcome included, 0.5 ms and 214 KB (docs/benchmarks.md, cold connect).
# packaging/build.sh builds with the same tag.
GOTAGS    := urfave_cli_no_docs

.PHONY: all build demo test check unit fuzz bench pi claude mutants clean install uninstall deb test-deb soak

all: build

# Project binaries the integration tests run (built from this tree, so the
# sandbox never builds anything).
build:
	@mkdir -p $(BIN)
	$(GO) build -tags $(GOTAGS) -o $(BIN)/ ./cmd/mosaicctl ./contrib/fakepi/cmd/fakepi ./contrib/stubmodel/cmd/stubmodel ./contrib/coldecho

# The pinned Pi 0.85.1 and its Node 22, from the npm registry, into .build/pi.
pi:
	@bash contrib/pi/install.sh $(PI_DIR) >/dev/null

# The pinned Claude Code 2.1.328 native binary, from the npm registry, into
# .build/claude, its SHA-256 checked (contrib/claude/install.sh). Never run
# by hand without the traffic-disabling environment engine/claude seals.
claude:
	@bash contrib/claude/install.sh $(CLAUDE_DIR) >/dev/null

# mosaicctl on PATH, at a path that outlives the checkout: the units that
# `mosaicctl install` writes name the binary they were written by, so run
# the installed one (`$(PREFIX)/bin/mosaicctl install`), not .build/bin's.
install: build
	install -D -m 0755 $(BIN)/mosaicctl $(DESTDIR)$(PREFIX)/bin/mosaicctl
	@echo "installed $(DESTDIR)$(PREFIX)/bin/mosaicctl; next: $(PREFIX)/bin/mosaicctl install (writes the user units that run it)"

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/mosaicctl

# The Debian package, .build/deb/mosaic_<version>_<arch>.deb: mosaicctl, the
# user units, man pages, completions and the journal catalog, all generated
# by the binary being packaged (packaging/build.sh; version in
# cmd/mosaicctl/version.txt).
deb:
	@bash packaging/build.sh $(CURDIR)/.build/deb

# The package's tests: metadata, contents, man pages, then installed in a
# systemd sandbox as root and driven as a user (packaging/test/run.sh).
test-deb: build pi
	@echo "==> the Debian package: contents, man pages, installed in a sandbox"
	MOSAIC_PI=$$(bash contrib/pi/install.sh $(PI_DIR)) \
		bash packaging/test/run.sh $$(bash packaging/build.sh $(CURDIR)/.build/deb)

# The reliability campaign (docs/recovery.md "Soak"): random SIGKILLs of
# controller and engine across launch, prompt, interrupt, stop and recover
# with the invariants after each, then SIGKILLs of the controller at random
# points of one long turn. `make test` runs both with small counts.
SOAK_RUNS  ?= 200
SOAK_TIME  ?= 15m
SOAK_KILLS ?= 100
soak: build pi
	MOSAIC_PI=$$(bash contrib/pi/install.sh $(PI_DIR)) MOSAIC_SOAK_RUNS=$(SOAK_RUNS) MOSAIC_SOAK_TIME=$(SOAK_TIME) \
		MOSAIC_RESTART_KILLS=$(SOAK_KILLS) $(GO) test -count=1 -timeout 60m -exec $(SANDBOX) ./cmd/mosaicctl \
		-run '^(TestSoak|TestControllerKilledAtRandom)$$' -v | grep -E '^(soak:|---|ok|FAIL|PASS)|SIGKILLs'

# The main job: a real conversation with the pinned Pi under a real systemd
# (stub model; DEMO_ARGS="--provider P --model M --agent-dir DIR" for a real one).
# It prints the tmux command that watches its attached pane live, and keeps
# the stop's proof and a copy of the session file in .build/demo.
demo: build pi
	@bash contrib/demo/demo.sh $(DEMO_ARGS)

# Every test: static checks, then every package with the race detector, each
# test binary inside a fresh systemd sandbox (as root; elsewhere the
# integration tests skip and say why), then short fuzz runs.
# Progress: each top-level test prints one line as it ends (a package
# in the sandbox runs for minutes), and a failing test its whole output
# (contrib/testprogress reads `go test -json`).
test: check build pi claude
	@echo "==> go test -race, every package, each test binary in a fresh systemd sandbox"
	MOSAIC_PI=$$(bash contrib/pi/install.sh $(PI_DIR)) \
	MOSAIC_CLAUDE=$$(bash contrib/claude/install.sh $(CLAUDE_DIR)) \
		$(GO) test -json -race -count=1 -timeout 30m -exec $(SANDBOX) ./... | $(GO) run ./contrib/testprogress
	$(MAKE) --no-print-directory test-deb
	$(MAKE) --no-print-directory fuzz

check:
	@echo "==> gofmt"
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	@echo "==> go vet"
	$(GO) vet ./...
	@echo "==> staticcheck v0.8.2 (the first run downloads and builds it)"
	$(STATICCHECK) ./...
	@echo "==> a 32-bit build (packaging makes i386 packages; an int is 32 bits there): every package builds, its tests compile (scopes' test-only FUSE library does not), and the decoders' tests pass"
	GOARCH=386 $(GO) build -tags $(GOTAGS) ./...
	GOARCH=386 $(GO) vet $$($(GO) list ./... | grep -v '/scopes$$')
	GOARCH=386 $(GO) test -count=1 ./client/ ./protocol/
	@echo "==> allocation counts, without the race detector (its instrumentation allocates)"
	$(GO) test -count=1 -run 'StaysOnStack' ./internal/procfs/

# Counts, not durations: a duration -fuzztime can fail with a spurious
# "context deadline exceeded" on Go 1.26 (golang/go#75804, fixed in 1.27),
# mostly on a loaded machine. Each count is about 5-10 s here; FUZZTIME=30s
# overrides them all.
fuzz:
	@echo "==> short fuzz runs (six targets)"
	$(GO) test -run '^$$' -fuzz '^FuzzLineReader$$' -fuzztime $(or $(FUZZTIME),5000x) ./engine/pi/
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(or $(FUZZTIME),100000x) ./engine/pi/
	$(GO) test -run '^$$' -fuzz '^FuzzParser$$' -fuzztime $(or $(FUZZTIME),200000x) ./terminal/
	$(GO) test -run '^$$' -fuzz '^FuzzTranscript$$' -fuzztime $(or $(FUZZTIME),50000x) ./terminal/
	$(GO) test -run '^$$' -fuzz '^FuzzLight$$' -fuzztime $(or $(FUZZTIME),200000x) ./history/
	$(GO) test -run '^$$' -fuzz '^FuzzFlatLine$$' -fuzztime $(or $(FUZZTIME),200000x) ./client/

# Benchmarks print ratios against a baseline measured in the same run.
# Benchmarks, then the one summary table of the performance goals
# (contrib/benchtable). A missed goal is reported, not fatal: the exit
# status is the benchmarks' own, non-zero only when one broke. One package
# at a time (-p 1): two packages' benchmarks on the same CPUs would each
# measure the other.
bench: build pi
	rc=0; MOSAIC_PI=$$(bash contrib/pi/install.sh $(PI_DIR)) \
		$(GO) test -p 1 -run '^$$' -bench . -benchtime 2x -exec $(SANDBOX) ./... 2>&1 | tee .build/bench.out || rc=$$?; \
	$(GO) run ./contrib/benchtable .build/bench.out; exit $$rc

clean:
	rm -rf .build

# The brief's mutation list: every mutant must make a test fail.
mutants: pi claude
	MOSAIC_PI=$$(bash contrib/pi/install.sh $(PI_DIR)) \
	MOSAIC_CLAUDE=$$(bash contrib/claude/install.sh $(CLAUDE_DIR)) $(GO) run ./contrib/mutants/runner

# gshare — one non-recursive Makefile.
#
# Each component directory contributes a fragment, <dir>/module.mk, that
# appends to the variables below; this file owns the flags and the targets.
#
#   BINS          programs built by `make` (paths under $(B))
#   LIBS          libraries built by `make`
#   UNIT_TESTS    cmocka test binaries, each run by `make test`
#   INTEG_TESTS   integration scripts (run after the units, in order)
#   BENCHES       commands run by `make bench`
#   FUZZERS       libFuzzer binaries built by `make fuzz`
#   DEB_PKGS      Debian packages the build and tests need
#   INSTALL_RULES make targets that `make install` runs
#   SAN_TEST_BINS programs built with ASan+UBSan under build/san for the
#                 integration tests that run them (paths under build/san)

B        ?= build
PREFIX   ?= /usr/local
LIBDIR   ?= $(PREFIX)/lib
# the project's version (packages, image tag, gshare.pc)
GS_VERSION := $(shell cat VERSION)
DESTDIR  ?=
SYSCONFDIR ?= /etc
# the config file gshared reads without -f (gsacct finds the store by it)
GSHARED_CONFIG ?= $(SYSCONFDIR)/gshare/gshare.yaml
CC       ?= gcc
CLANG    ?= clang

WARN     := -Wall -Wextra -Wshadow -Wformat=2 -Wconversion -Wno-sign-conversion \
	    -Wstrict-prototypes -Wmissing-prototypes -Wpointer-arith -Wvla
HARDEN   := -D_FORTIFY_SOURCE=2 -fstack-protector-strong -fPIC
CSTD     := -std=gnu11 -D_GNU_SOURCE
OPT      ?= -O2 -g
CFLAGS   ?=
CFLAGS   += $(CSTD) $(OPT) $(WARN) $(HARDEN) -MMD -MP -Icommon $(EXTRA_CFLAGS)
LDFLAGS  += -Wl,-z,relro,-z,now $(EXTRA_LDFLAGS)

BINS        :=
LIBS        :=
UNIT_TESTS  :=
INTEG_TESTS :=
BENCHES     :=
FUZZERS     :=
DEB_PKGS    := build-essential pkg-config libcmocka-dev libyaml-dev clang \
	       python3
INSTALL_RULES :=
SAN_TEST_BINS :=

.PHONY: all test test-units test-integ check-units bench fuzz sanitize san-tests FORCE \
	install demo deps clean
all:

PATHS_STAMP := $(B)/build-paths
BUILD_PATHS :=
include $(sort $(wildcard */module.mk */*/module.mk))

all: $(BINS) $(LIBS)

# Object rule: build/<dir>/<file>.o from <dir>/<file>.c
$(B)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c -o $@ $<

deps:
	@tests/deps.sh $(sort $(DEB_PKGS))

# Paths compiled into programs (BUILD_PATHS, added to by the modules):
# objects that embed one depend on $(PATHS_STAMP), which is rewritten only
# when a value changes, so `make install SYSCONFDIR=...` after a plain
# `make` rebuilds them.
$(PATHS_STAMP): FORCE
	@mkdir -p $(@D)
	@echo '$(BUILD_PATHS)' | cmp -s - $@ || echo '$(BUILD_PATHS)' > $@
FORCE:

# `make test` installs what it needs (as root), then builds and runs
# every unit test (plain, then under ASan+UBSan) and every integration
# test (some of them against sanitized programs).
test: deps
	@$(MAKE) --no-print-directory all-tests
	@$(SAN_MAKE) san-tests $(SAN_TEST_BINS)
	@tests/run.sh units $(UNIT_TESTS)
	@$(SAN_UNITS)
	@tests/run.sh integ $(INTEG_TESTS)

test-units: deps
	@$(MAKE) --no-print-directory all-tests
	@tests/run.sh units $(UNIT_TESTS)

all-tests: all $(UNIT_TESTS) $(TEST_HELPERS)

# What the sanitized tree needs: the unit test programs (the libFuzzer
# targets carry their own sanitizers and stay in $(B)).
san-tests: $(filter $(B)/%,$(UNIT_TESTS))

bench: deps
	@$(MAKE) --no-print-directory all-tests
	@tests/run.sh bench $(BENCHES)

fuzz: deps
	@$(MAKE) --no-print-directory $(FUZZERS)

# ASan+UBSan build of everything the unit tests need, in its own tree.
SAN_MAKE := $(MAKE) --no-print-directory B=build/san \
	    OPT='-O1 -g -fno-omit-frame-pointer' \
	    EXTRA_CFLAGS='-fsanitize=address,undefined -fno-sanitize-recover=undefined -U_FORTIFY_SOURCE' \
	    EXTRA_LDFLAGS='-fsanitize=address,undefined'
SAN_UNITS := ASAN_OPTIONS=detect_leaks=1 tests/run.sh san \
	    $(patsubst $(B)/%,build/san/%,$(filter $(B)/%,$(UNIT_TESTS)))
sanitize: deps
	@$(SAN_MAKE) san-tests $(SAN_TEST_BINS)
	@$(SAN_UNITS)

install: all $(INSTALL_RULES)

# Like test: installs missing packages first, so it works on a fresh machine.
demo: deps
	@$(MAKE) --no-print-directory all
	@tests/demo.sh

clean:
	rm -rf $(B) build

-include $(shell find $(B) -name '*.d' 2>/dev/null)

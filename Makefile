# spd — the one build entry.  Plain GNU make.
#   make            build build/spd, build/sandboxd, build/spctl
#   make demo       build, start a real spd and run commands in the sandbox
#   make check      build and run every test (unit, integration, escape, nvim)
#   make asan       the same under ASan+UBSan, in build-asan/
#   make fuzz       build the libFuzzer targets (clang) and run each briefly
#   make fuzz-long  run each an hour; record CPU time and corpus size
#   make bench      run the benchmarks side by side with their baselines
#   make format     reformat the tree; make format-check fails on a diff
#   make install PREFIX=/usr/local DESTDIR=   (make uninstall: the same)
#   V=1 prints full command lines; CI=true or WERROR=1 makes warnings errors.

BUILD ?= build
PREFIX ?= /usr/local
CC ?= cc
PKG_CONFIG ?= pkg-config

DAEMON_PKGS := libuv jansson sqlite3 libgit2 libsodium libcurl openssl
SBX_PKGS := libseccomp libcap-ng
TEST_PKGS := check
ALL_PKGS := $(DAEMON_PKGS) $(SBX_PKGS) $(TEST_PKGS)

# A fresh machine needs no other step: install what pkg-config cannot find.
ifeq ($(filter clean format format-check help uninstall,$(MAKECMDGOALS)),)
# (musl-gcc and jansson's source: spctl's musl build, below.)
ifneq ($(shell $(PKG_CONFIG) --exists $(ALL_PKGS) 2>/dev/null && command -v musl-gcc >/dev/null && test -f third_party/jansson_2.14.orig.tar.gz && echo ok),ok)
$(info scripts/deps: installing missing dependencies)
DEPS_RESULT := $(shell ./scripts/deps >&2 && echo ok)
ifneq ($(DEPS_RESULT),ok)
$(error scripts/deps failed; install the packages it names and retry)
endif
endif
endif

# Builds use every core unless -j was given (a serial build of the tree
# and its tests took 83 s of CI's make check, twice that under ASan).
ifeq ($(filter -j%,$(MAKEFLAGS)),)
MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 1)
endif

ifeq ($(V),1)
Q :=
else
Q := @
endif

WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
	-Wformat=2 -Wimplicit-fallthrough -Wcast-qual -Wpointer-arith \
	-Wno-unused-parameter
ifneq ($(filter true 1,$(CI) $(WERROR)),)
WARN += -Werror
endif

HARDEN := -fstack-protector-strong -fPIE
HARDEN_LD := -pie -Wl,-z,relro,-z,now,-z,noexecstack
ifeq ($(SANITIZE),1)
OPT := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
	-fno-sanitize-recover=undefined
SAN_LD := -fsanitize=address,undefined
else
OPT := -O2 -g -D_FORTIFY_SOURCE=3
SAN_LD :=
endif

BASE_CFLAGS := -std=gnu11 -D_GNU_SOURCE $(OPT) $(WARN) $(HARDEN) -MMD -MP
DAEMON_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(DAEMON_PKGS) 2>/dev/null)
# http-parser (Debian libhttp-parser-dev) ships no .pc file.
# libcurl is compiled against but not linked: the broker loads it at its
# first provider call (daemon/broker/gw_curl.h), so an idle spd maps none
# of the twenty libraries it brings.  bench/curlcost links it itself.
DAEMON_LIBS := $(shell $(PKG_CONFIG) --libs $(filter-out libcurl,$(DAEMON_PKGS)) 2>/dev/null) -lhttp_parser -lpthread -ldl
CURL_LIBS := $(shell $(PKG_CONFIG) --libs libcurl 2>/dev/null)
SBX_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(SBX_PKGS) 2>/dev/null)
SBX_LIBS := $(shell $(PKG_CONFIG) --libs $(SBX_PKGS) 2>/dev/null)
TEST_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(TEST_PKGS) 2>/dev/null)
TEST_LIBS := $(shell $(PKG_CONFIG) --libs $(TEST_PKGS) 2>/dev/null)

ALL_CFLAGS = $(BASE_CFLAGS) $(DAEMON_CFLAGS) $(SBX_CFLAGS) $(TEST_CFLAGS) $(CFLAGS)
# Each program's objects see only their own folders and common/ and
# proto/ (an include root of symlinks under $(BUILD)/inc/PROGRAM), and
# only their own libraries' headers: sandboxd cannot include a daemon
# header even by mistake.  Tests, benchmarks and fuzz targets see all.
PROG_ROOTS_common := common proto
PROG_ROOTS_daemon := common proto daemon
PROG_ROOTS_sandboxd := common proto sandboxd
PROG_ROOTS_client := common proto client
$(foreach p,common daemon sandboxd client,$(shell mkdir -p $(BUILD)/inc/$(p) && \
	for d in $(PROG_ROOTS_$(p)); do ln -sfn $(CURDIR)/$$d $(BUILD)/inc/$(p)/$$d; done))
OBJ_INC = -I.
OBJ_PKG_CFLAGS = $(DAEMON_CFLAGS) $(SBX_CFLAGS) $(TEST_CFLAGS)
# sandboxd-init (sandboxd/linux/init.h): freestanding, a few pages, never
# sanitized; its image is linked into sandboxd.
INIT_CFLAGS := -std=gnu11 -I. -O2 $(WARN) -ffreestanding -fno-builtin \
	-fno-stack-protector -fno-asynchronous-unwind-tables -fno-pie \
	-nostdlib -static -Wl,-z,noexecstack -Wl,--build-id=none
ALL_LDFLAGS = $(HARDEN_LD) $(SAN_LD) $(LDFLAGS)

# Sources.  Each folder is one library; main.c holds the program's main().
COMMON_SRC := $(wildcard common/*.c) $(wildcard proto/*.c)
DAEMON_SRC := $(filter-out daemon/main.c,$(wildcard daemon/*.c daemon/*/*.c))
SBX_SRC := $(filter-out sandboxd/main.c,$(wildcard sandboxd/*.c sandboxd/linux/*.c))
CLIENT_SRC := $(filter-out client/main.c,$(wildcard client/*.c))
UNIT_SRC := $(wildcard tests/unit/test_*.c tests/integration/test_*.c)
TESTLIB_SRC := $(wildcard tests/lib/*.c)
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
BENCH_SRC := $(wildcard bench/*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

LIBCOMMON := $(BUILD)/libcommon.a
LIBDAEMON := $(BUILD)/libdaemon.a
LIBSBX := $(BUILD)/libsandboxd.a
LIBCLIENT := $(BUILD)/libclient.a
LIBTEST := $(BUILD)/libtest.a

PROGS := $(BUILD)/spd $(BUILD)/sandboxd $(BUILD)/spctl
UNIT_BINS := $(patsubst %.c,$(BUILD)/tests/%,$(notdir $(UNIT_SRC)))
BENCH_BINS := $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRC))

.PHONY: all check unit asan fuzz fuzz-long bench format format-check install uninstall clean help deps demo
all: $(PROGS)

# Flag changes trigger a rebuild: the flags are written to a stamp file
# that every object depends on, rewritten only when they differ.
FLAGS_STAMP := $(BUILD)/.flags
FLAGS_NOW := $(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) $(INIT_CFLAGS)
$(shell mkdir -p $(BUILD); [ "$$(cat $(FLAGS_STAMP) 2>/dev/null)" = '$(FLAGS_NOW)' ] || printf '%s' '$(FLAGS_NOW)' > $(FLAGS_STAMP))

$(BUILD)/obj/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  CC      $<")
	$(Q)$(CC) $(BASE_CFLAGS) $(OBJ_INC) $(OBJ_PKG_CFLAGS) $(CFLAGS) -c $< -o $@

$(call obj,$(COMMON_SRC)): OBJ_INC = -I$(BUILD)/inc/common
$(call obj,$(COMMON_SRC)): OBJ_PKG_CFLAGS = $(shell $(PKG_CONFIG) --cflags jansson 2>/dev/null)
$(call obj,daemon/main.c $(DAEMON_SRC)): OBJ_INC = -I$(BUILD)/inc/daemon
$(call obj,daemon/main.c $(DAEMON_SRC)): OBJ_PKG_CFLAGS = $(DAEMON_CFLAGS)
$(call obj,sandboxd/main.c $(SBX_SRC)): OBJ_INC = -I$(BUILD)/inc/sandboxd
$(call obj,sandboxd/main.c $(SBX_SRC)): OBJ_PKG_CFLAGS = $(SBX_CFLAGS)
$(call obj,client/main.c $(CLIENT_SRC)): OBJ_INC = -I$(BUILD)/inc/client
$(call obj,client/main.c $(CLIENT_SRC)): OBJ_PKG_CFLAGS = $(shell $(PKG_CONFIG) --cflags jansson 2>/dev/null)

define ARCHIVE
$(1): $(call obj,$(2))
	@mkdir -p $$(dir $$@)
	$$(if $$(Q),@echo "  AR      $$@")
	$$(Q)rm -f $$@ && ar rcs $$@ $$^
endef
$(eval $(call ARCHIVE,$(LIBCOMMON),$(COMMON_SRC)))
$(eval $(call ARCHIVE,$(LIBDAEMON),$(DAEMON_SRC)))
$(eval $(call ARCHIVE,$(LIBSBX),$(SBX_SRC)))
$(LIBSBX): $(BUILD)/obj/sandboxd/linux/init_blob.o

# A run's init after setup (sandboxd/linux/init.h); INIT_CFLAGS above.
$(BUILD)/sandboxd-init: sandboxd/linux/init/init.c sandboxd/linux/init.h $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  LD      $@")
	$(Q)$(CC) $(INIT_CFLAGS) -o $@ $<

$(BUILD)/obj/sandboxd/linux/init_blob.o: sandboxd/linux/init_blob.S $(BUILD)/sandboxd-init
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  AS      $<")
	$(Q)$(CC) -c -DSBX_INIT_PATH='"$(BUILD)/sandboxd-init"' -o $@ $<
$(eval $(call ARCHIVE,$(LIBCLIENT),$(CLIENT_SRC)))
$(eval $(call ARCHIVE,$(LIBTEST),$(TESTLIB_SRC)))

$(BUILD)/spd: $(call obj,daemon/main.c) $(LIBDAEMON) $(LIBCOMMON)
	$(if $(Q),@echo "  LD      $@")
	$(Q)$(CC) -o $@ $^ $(ALL_LDFLAGS) $(DAEMON_LIBS)

# sandboxd links libc, libseccomp and libcap-ng only (docs/design.md).
$(BUILD)/sandboxd: $(call obj,sandboxd/main.c) $(LIBSBX) $(LIBCOMMON)
	$(if $(Q),@echo "  LD      $@")
	$(Q)$(CC) -o $@ $^ $(ALL_LDFLAGS) $(SBX_LIBS)

# spctl starts once per command an agent runs, so its start is kept
# short.  It is linked statically (static-pie, so no loader maps and
# relocates libraries), and against musl where musl-gcc and jansson's
# source are at hand (scripts/deps provides both): a glibc program spends
# about 0.45 ms of its start in CPUID instructions (cache and feature
# probing), each one an exit to the hypervisor on a virtual machine, where
# many people run agents; a musl spctl starts in 0.15 ms against 0.65
# (bench/README.md).  jansson is built from Debian's source of the version
# Debian ships (third_party/); base64 is spctl's own (client/b64.h).
# The musl build also takes malloc from client/alloc.c, which keeps the
# memory it takes: musl's own gives it back with munmap calls, whose TLB
# flushes cost a virtual machine about 0.3 ms per command.
# SPCTL_LIBC=glibc forces the glibc build; the sanitizers need the dynamic
# loader, so make asan links spctl against glibc, dynamically.
MUSL_CC ?= musl-gcc
JANSSON_TGZ := third_party/jansson_2.14.orig.tar.gz
ifeq ($(SANITIZE),1)
SPCTL_LIBC := glibc
endif
ifeq ($(SPCTL_LIBC),)
SPCTL_LIBC := $(if $(and $(shell command -v $(MUSL_CC) 2>/dev/null),$(shell command -v cmake 2>/dev/null),$(wildcard $(JANSSON_TGZ))),musl,glibc)
endif
ifeq ($(SANITIZE),1)
SPCTL_LD := -Wl,-Bstatic $(shell $(PKG_CONFIG) --libs jansson 2>/dev/null) -Wl,-Bdynamic
else
SPCTL_LD := -static-pie $(shell $(PKG_CONFIG) --libs jansson 2>/dev/null)
endif

ifeq ($(SPCTL_LIBC),musl)
MUSL := $(BUILD)/musl
# musl-gcc's specs cannot link static-pie: the same specs with musl's
# rcrt1.o and no program interpreter when -static-pie is given.
MUSL_SPECS_SYS := $(shell sed -n 's/.*-specs "\([^"]*\)".*/\1/p' "$$(command -v $(MUSL_CC))")
MUSL_LIBDIR := $(dir $(MUSL_SPECS_SYS))
MUSL_CFLAGS := -specs $(MUSL)/musl.specs -std=gnu11 -D_GNU_SOURCE -I$(BUILD)/inc/client \
	-DSPCTL_OWN_MALLOC \
	-I$(MUSL)/include -O2 -g $(WARN) -fstack-protector-strong -fPIE -MMD -MP
MUSL_CLIENT_OBJ := $(patsubst %.c,$(MUSL)/obj/%.o,client/main.c $(CLIENT_SRC) \
	$(filter-out common/paths_pw.c,$(COMMON_SRC)))

$(MUSL)/musl.specs: $(MUSL_SPECS_SYS)
	@mkdir -p $(dir $@)
	sed -e 's#%{!shared: *\([^ ]*\)Scrt1.o}#%{static-pie:\1rcrt1.o;!shared:\1Scrt1.o}#' \
	    -e 's#^-dynamic-linker \([^ ]*\)#%{static-pie:-static -pie --no-dynamic-linker -z text;:-dynamic-linker \1}#' \
	    $< > $@.tmp
	grep -q rcrt1.o $@.tmp && grep -q no-dynamic-linker $@.tmp
	mv $@.tmp $@

$(MUSL)/lib/libjansson.a: $(JANSSON_TGZ) $(MUSL)/musl.specs
	$(if $(Q),@echo "  JANSSON $@ (musl)")
	$(Q)rm -rf $(MUSL)/jansson && mkdir -p $(MUSL)/jansson
	$(Q)tar -xzf $< -C $(MUSL)/jansson --strip-components=1
	$(Q)cmake -S $(MUSL)/jansson -B $(MUSL)/jansson/b -DCMAKE_BUILD_TYPE=Release \
		-DCMAKE_C_COMPILER=gcc -DCMAKE_C_FLAGS="-specs $(abspath $(MUSL))/musl.specs -fstack-protector-strong" \
		-DCMAKE_POSITION_INDEPENDENT_CODE=ON -DJANSSON_BUILD_DOCS=OFF \
		-DJANSSON_WITHOUT_TESTS=ON -DJANSSON_EXAMPLES=OFF \
		-DJANSSON_BUILD_SHARED_LIBS=OFF \
		-DCMAKE_INSTALL_PREFIX=$(abspath $(MUSL)) > $(MUSL)/jansson.log 2>&1 || { cat $(MUSL)/jansson.log; exit 1; }
	$(Q)cmake --build $(MUSL)/jansson/b -j2 >> $(MUSL)/jansson.log 2>&1 || { cat $(MUSL)/jansson.log; exit 1; }
	$(Q)cmake --install $(MUSL)/jansson/b >> $(MUSL)/jansson.log 2>&1

$(MUSL)/obj/%.o: %.c $(MUSL)/lib/libjansson.a $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  CC      $< (musl)")
	$(Q)gcc $(MUSL_CFLAGS) -c $< -o $@

$(BUILD)/spctl: $(MUSL_CLIENT_OBJ) $(MUSL)/lib/libjansson.a
	$(if $(Q),@echo "  LD      $@ (musl)")
	$(Q)gcc -specs $(MUSL)/musl.specs -static-pie -o $@ $(MUSL_CLIENT_OBJ) \
		-Wl,-z,relro,-z,now,-z,noexecstack $(MUSL)/lib/libjansson.a
	@# musl's own malloc (mallocng) must not be linked beside ours: a
	@# block of one freed by the other would corrupt both.
	$(Q)if nm $@ | grep -q __malloc_alloc_meta; then \
		echo "$@: musl's malloc linked beside client/alloc.c" >&2; \
		rm -f $@; exit 1; fi
else
$(BUILD)/spctl: $(call obj,client/main.c) $(LIBCLIENT) $(LIBCOMMON)
	$(if $(Q),@echo "  LD      $@")
	$(Q)$(CC) -o $@ $^ $(ALL_LDFLAGS) $(SPCTL_LD)
endif

TEST_LINK = $(LIBTEST) $(LIBDAEMON) $(LIBSBX) $(LIBCLIENT) $(LIBCOMMON)
define TESTBIN
$(BUILD)/tests/$(basename $(notdir $(1))): $(call obj,$(1)) $(TEST_LINK)
	@mkdir -p $$(dir $$@)
	$$(if $$(Q),@echo "  LD      $$@")
	$$(Q)$$(CC) -o $$@ $$^ $$(ALL_LDFLAGS) $$(DAEMON_LIBS) $$(SBX_LIBS) $$(TEST_LIBS)
endef
$(foreach t,$(UNIT_SRC),$(eval $(call TESTBIN,$(t))))

$(BUILD)/bench/%: $(call obj,bench/%.c) $(TEST_LINK)
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  LD      $@")
	$(Q)$(CC) -o $@ $^ $(ALL_LDFLAGS) $(DAEMON_LIBS) $(SBX_LIBS) $(TEST_LIBS) -lm \
		$(if $(filter curlcost,$*),$(CURL_LIBS))

deps:
	./scripts/deps

# The README's first command: a real spd, real requests, sandboxed runs.
demo: $(PROGS)
	BUILD=$(BUILD) ./scripts/demo

# The whole suite: unit suites, integration tests against a real spd,
# the escape suite.  tests/run prints one closing "N passed, N failed" line.
check: deps $(PROGS) $(UNIT_BINS)
	BUILD=$(BUILD) ./tests/run

unit: $(UNIT_BINS)
	BUILD=$(BUILD) ./tests/run unit

# The integration suites in the default layout only (tests/run,
# TEST_LAYOUTS), and as uid 65534 only the sandbox's suites (TEST_UNPRIV):
# under ASan, each layout's run costs minutes.
asan:
	$(MAKE) BUILD=build-asan SANITIZE=1 TEST_LAYOUTS=default \
		TEST_UNPRIV=sandbox check

# libFuzzer targets need clang; each is run for a short while on its corpus.
# make fuzz-long runs each for an hour and appends its CPU time and corpus
# size to tests/fuzz/README.md.
FUZZ_TIME ?= 20
fuzz:
	./tests/fuzz/run $(FUZZ_TIME)
fuzz-long: FUZZ_TIME = 3600
fuzz-long:
	FUZZ_RECORD=tests/fuzz/README.md ./tests/fuzz/run $(FUZZ_TIME)

bench: $(PROGS) $(BENCH_BINS)
	BUILD=$(BUILD) ./bench/run

FORMAT_FILES = $(shell git ls-files '*.c' '*.h' 2>/dev/null)
format:
	clang-format -i $(FORMAT_FILES)
format-check:
	clang-format --dry-run --Werror $(FORMAT_FILES)

# What a package ships.  uninstall removes exactly these files and the
# directories that are spd's alone (libexec/spd, share/spd).
BINDIR := $(PREFIX)/bin
LIBEXECDIR := $(PREFIX)/libexec/spd
MANDIR := $(PREFIX)/share/man
# systemctl --user finds a user's own units in ~/.local/share/systemd/user
# ($XDG_DATA_HOME), never in ~/.local/lib/systemd/user; a system prefix's
# user units go in PREFIX/lib/systemd/user (/usr/lib, /usr/local/lib).
ifneq ($(filter $(HOME)/%,$(abspath $(PREFIX))),)
UNITDIR := $(PREFIX)/share/systemd/user
else
UNITDIR := $(PREFIX)/lib/systemd/user
endif
DATADIR := $(PREFIX)/share/spd
BASHCOMPDIR := $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR := $(PREFIX)/share/zsh/site-functions
FISHCOMPDIR := $(PREFIX)/share/fish/vendor_completions.d
# A start package on Neovim's packpath: ~/.local/share/nvim/site is on it
# for PREFIX=~/.local, /usr/local/share/nvim/site and /usr/share/nvim/site
# (XDG_DATA_DIRS) for the system prefixes.
NVIMPACK := $(PREFIX)/share/nvim/site/pack/spd
NVIMDIR := $(NVIMPACK)/start/spd
NVIM_FILES := $(patsubst editors/nvim/%,%,$(wildcard editors/nvim/plugin/*.lua \
	editors/nvim/lua/spd/*.lua editors/nvim/doc/*.txt))
MAN_PAGES := $(wildcard man/*.[1-8])
INSTALLED := $(BINDIR)/spd $(BINDIR)/spctl $(LIBEXECDIR)/sandboxd \
	$(foreach m,$(MAN_PAGES),$(MANDIR)/man$(subst .,,$(suffix $(m)))/$(notdir $(m))) \
	$(UNITDIR)/spd.service $(UNITDIR)/spd.socket \
	$(DATADIR)/spd.conf $(DATADIR)/launchd/org.spd.spd.plist \
	$(BASHCOMPDIR)/spctl $(ZSHCOMPDIR)/_spctl $(FISHCOMPDIR)/spctl.fish \
	$(addprefix $(NVIMDIR)/,$(NVIM_FILES))

install: $(PROGS)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBEXECDIR) $(DESTDIR)$(UNITDIR) \
		$(DESTDIR)$(DATADIR)/launchd $(DESTDIR)$(BASHCOMPDIR) \
		$(DESTDIR)$(ZSHCOMPDIR) $(DESTDIR)$(FISHCOMPDIR) \
		$(sort $(foreach m,$(MAN_PAGES),$(DESTDIR)$(MANDIR)/man$(subst .,,$(suffix $(m)))))
	install -m 0755 $(BUILD)/spd $(BUILD)/spctl $(DESTDIR)$(BINDIR)/
	install -m 0755 $(BUILD)/sandboxd $(DESTDIR)$(LIBEXECDIR)/
	$(foreach m,$(MAN_PAGES),install -m 0644 $(m) $(DESTDIR)$(MANDIR)/man$(subst .,,$(suffix $(m)))/ &&) true
	sed 's|/usr/local|$(PREFIX)|g' systemd/spd.service > $(DESTDIR)$(UNITDIR)/spd.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/spd.service
	install -m 0644 systemd/spd.socket $(DESTDIR)$(UNITDIR)/
	install -m 0644 spd.conf.example $(DESTDIR)$(DATADIR)/spd.conf
	sed 's|/usr/local|$(PREFIX)|g' launchd/org.spd.spd.plist > $(DESTDIR)$(DATADIR)/launchd/org.spd.spd.plist
	chmod 0644 $(DESTDIR)$(DATADIR)/launchd/org.spd.spd.plist
	install -m 0644 completions/spctl.bash $(DESTDIR)$(BASHCOMPDIR)/spctl
	install -m 0644 completions/_spctl $(DESTDIR)$(ZSHCOMPDIR)/_spctl
	install -m 0644 completions/spctl.fish $(DESTDIR)$(FISHCOMPDIR)/spctl.fish
	$(foreach f,$(NVIM_FILES),install -D -m 0644 editors/nvim/$(f) $(DESTDIR)$(NVIMDIR)/$(f) &&) true

uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	-rmdir $(DESTDIR)$(LIBEXECDIR) $(DESTDIR)$(DATADIR)/launchd $(DESTDIR)$(DATADIR) 2>/dev/null
	-rmdir $(addprefix $(DESTDIR)$(NVIMDIR)/,plugin lua/spd lua doc) \
		$(DESTDIR)$(NVIMDIR) $(DESTDIR)$(NVIMPACK)/start $(DESTDIR)$(NVIMPACK) 2>/dev/null

clean:
	rm -rf build build-asan build-fuzz

help:
	@sed -n '2,11p' Makefile

-include $(shell find $(BUILD)/obj $(BUILD)/musl/obj -name '*.d' 2>/dev/null)

/*
 * The sandbox suites' fixture (tests/unit/test_sandbox_*.c): sandboxd
 * through spd's supervisor (daemon/sandbox/sbx.c), on a real uv loop with
 * the built build/sandboxd, a workspace and a directory outside it; and
 * the workspaces of hard links into a store (pnpm's, uv's) that both the
 * sandboxd check's suite and spd's watch's run.  Each test asserts what a
 * user cares about on the host: the output, the exit code, the file
 * outside left alone, the canary not read, the marker never created.
 */
#ifndef SPD_TESTS_SBXTEST_H
#define SPD_TESTS_SBXTEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>
#include <uv.h>

#include "common/buf.h"
#include "daemon/sandbox/sbx.h"
#include "tests/lib/testlib.h"

/* What a run gave (sbxt_cbs): its output, status and error. */
struct sbxt_outcome {
	struct buf out, err;
	bool done;
	int exit_code, term_signal;
	bool timed_out, cancelled;
	int ended; /* enum sbxp_ended */
	uint64_t dropped[2];
	char *error_code, *error_msg;
	int nwarn;
	char warnings[1024]; /* joined by "; " */
};

struct sbxt_fixture {
	uv_loop_t loop;
	struct sbx *s;
	char *ws;
	char *outside; /* a directory under sbxt_outside_base(), mode 0777 */
	bool closed;
};

/*
 * Where files that must lie outside the run's writable and private
 * areas go: the root bind makes them read-only there, which is what the
 * tests check.  Not /tmp or /var/tmp, which runs get privately.  As root
 * /var; otherwise SPD_TEST_OUTSIDE (a directory the user may write, on
 * the root file system), else /var/tmp, where the tests that need a
 * visible outside say they are skipped.
 */
const char *sbxt_outside_base(void);
/* Whether sbxt_outside_base() is /var/tmp, which every run has privately. */
bool sbxt_outside_is_private(void);

/* The callbacks that fill a struct sbxt_outcome (sbx_run's data). */
extern const struct sbx_cbs sbxt_cbs;
void sbxt_outcome_free(struct sbxt_outcome *o);
/* sandboxd makes the next run's spare 1 ms after a run's EXITED
 * (sandboxd/main.c, SBXD_SPARE_DELAY_NS): a run started after this pause
 * takes the spare instead of a clone of its own.  The pause is ample and
 * nothing is timed by it. */
void sbxt_wait_for_spare(void);
/* /proc/<pid>/status when that process (pid: a name in /proc) is
 * sandboxd's child executing sandboxd-init (a run's or a spare's init),
 * else NULL (malloc'd). */
char *sbxt_init_status(const char *pid, pid_t sandboxd);
/* Whether sandboxd has such a child. */
bool sbxt_has_init(pid_t sandboxd);

/* A sandboxd (the program at sandboxd, NULL: the build's) under spd's
 * supervisor on f's loop, a fresh workspace and a fresh directory
 * outside; sbxt_teardown closes and removes them all. */
void sbxt_setup(struct sbxt_fixture *f, const char *sandboxd);
void sbxt_teardown(struct sbxt_fixture *f);
/* A run of argv in f's workspace, HOME the directory outside, a plain
 * PATH and LANG, a 20 s deadline. */
void sbxt_spec_init(struct sbxt_fixture *f, struct sbx_spec *sp,
		    char *const *argv);
/* Run sp and wait for its result in *o. */
void sbxt_run(struct sbxt_fixture *f, const struct sbx_spec *sp,
	      struct sbxt_outcome *o);
/* Run sh -c script in the workspace. */
void sbxt_run_sh(struct sbxt_fixture *f, char *script, struct sbxt_outcome *o);
/* The host refuses what sandboxd needs entirely (no user namespaces as a
 * non-root user): the other tests cannot run, say so. */
bool sbxt_unavailable(const struct sbxt_outcome *o);

#define SBXT_REQUIRE_SANDBOX(o)                                                \
	do {                                                                   \
		if (sbxt_unavailable(o))                                       \
			TEST_SKIP_LAYER("sandbox",                             \
					"sandbox unavailable here: %s",        \
					(o)->error_msg);                       \
	} while (0)

/* Monotonic milliseconds, for a test's deadlines. */
long long sbxt_mono_ms(void);
/* The file at path holds exactly want. */
void sbxt_assert_file(const char *path, const char *want);

/*
 * A store's files hard-linked into the workspace by the thousand, as pnpm
 * links node_modules and uv a .venv (docs/sandbox.md, "Hard links"):
 * npkg packages of 24 files each, in the package's directory and its
 * lib/, each linked from outside/store, in node_modules/.pnpm as pnpm
 * lays them out, with a dependency's symlink beside each.  Beside them,
 * as pnpm leaves them: its lock file and a hoisted shim in .pnpm, its
 * .modules.yaml and a shim in node_modules (all of one link), a package
 * whose own node_modules/.bin holds a shim it wrote, one with a file its
 * package manager wrote (uv's INSTALLER) among the linked ones.  Package
 * 3 is in vendor/ instead, with more files its install script built (one
 * link) than linked ones.  And a .git whose objects are linked from
 * outside (git clone --local), and two names of one file inside the
 * workspace.
 */
void sbxt_store_tree(struct sbxt_fixture *f, int npkg);
/* What the run may and may not do in sbxt_store_tree's workspace. */
extern char sbxt_store_script[];
/* What it prints, n the number of linked names it found. */
#define SBXT_STORE_WANT(n)                                                     \
	"linked:" #n                                                           \
	"\nmodules\nbin\nbuilt\np3new\nobjnew\ninside\nvite\ns1.1\n"
/* Each file of outside/store as it was made, mode and all. */
void sbxt_store_unchanged(struct sbxt_fixture *f, int npkg);

/* Mount in a mount namespace of the test's own: as root, a new one; as
 * another user, in a new user namespace too, mapping only that user
 * (sandboxd, started after, runs in it as that user). */
void sbxt_own_mount_ns(void);
/* Packages enough for 1,080 names with a link outside: past
 * LINKS_EACH_MAX, sandboxd binds directories whole. */
#define SBXT_VOLUMES_NPKG 45
/*
 * Mounts of the host's below the workspace (a container's volumes), in
 * sbxt_store_tree's workspace: a directory of the host's bound into
 * package 8's directory (into sub, named there), holding a name of a file
 * linked from outside (outside/vol/secret), and a file linked from
 * outside (outside/onefile) bound over package 9's f1 (into one).  Root,
 * or a user in a user namespace of the test's own (sbxt_own_mount_ns).
 */
void sbxt_volumes_mount(struct sbxt_fixture *f, char *sub, char *one,
			size_t len);
/* What the run may not do to them: neither file outside can be written
 * through the workspace, nor package 8's own file. */
extern char sbxt_volumes_script[];
/* Not as root, sandboxd binds the workspace with the mounts below it as
 * they are, and both show in the run; as root the workspace is one
 * idmapped mount, which carries none: the run sees what is under them. */
#define SBXT_VOLUMES_WANT (geteuid() == 0 ? "s9.1\n" : "VOLUME\nONEFILE\n")
/* Unmounted, and each file outside as it was. */
void sbxt_volumes_unchanged(struct sbxt_fixture *f, const char *sub,
			    const char *one);

/*
 * pnpm's layout of npkg packages of one file each, linked from
 * outside/store: more packages than the mounts a run may have
 * (MOUNTPLAN_LINKS_MAX), were each package's directory bound on its own.
 * Its lock file in node_modules/.pnpm, its .modules.yaml beside it.
 */
void sbxt_store_many(struct sbxt_fixture *f, int npkg);
/* What the run may and may not do in sbxt_store_many's workspace, and
 * what it prints. */
extern char sbxt_store_many_script[];
#define SBXT_STORE_MANY_WANT "written:0\nmodules\nm7\n"
/* Each file of outside/store as sbxt_store_many made it. */
void sbxt_store_many_unchanged(struct sbxt_fixture *f, int npkg);
/* The packages of the suites' large monorepo. */
#define SBXT_STORE_MANY 1100

#endif

/*
 * The spares sandboxd makes ahead of runs (sandboxd/linux/spare.c,
 * spawn.h): a cold spare fresh for each run and seeing the mounts made
 * since, and a hot one, set up ahead for a run like the last, taken only
 * by a run it fits and never when the host changed what it covers.
 */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/trace.h"
#include "common/util.h"
#include "daemon/sandbox/sbx.h"
#include "proto/sandbox.h"
#include "sandboxd/linux/child.h"
#include "sandboxd/linux/spawn.h"
#include "tests/lib/sbxtest.h"
#include "tests/lib/testlib.h"

/*
 * Each run after the first is served by the spare sandboxd clones ahead
 * (sandboxd/linux/spawn.h): nothing one run leaves (a file in its /tmp, a
 * process, its hostname) is seen by the next.  (Namespace inode numbers
 * are reused once freed, so they cannot tell runs apart.)
 */
START_TEST(spare_fresh_each_run)
{
	struct sbxt_fixture f;
	struct sbxt_outcome o;
	char s[] = "cat /tmp/left 2>/dev/null && echo LEAKED-TMP; "
		   "[ \"$(hostname)\" = sandbox ] || echo LEAKED-HOSTNAME; "
		   "pgrep -x sleep >/dev/null && echo LEAKED-PROCESS; "
		   "echo left > /tmp/left; hostname other 2>/dev/null; "
		   "(sleep 30 &); echo ran";

	sbxt_setup(&f, NULL);
	for (int i = 0; i < 3; i++) {
		sbxt_run_sh(&f, s, &o);
		SBXT_REQUIRE_SANDBOX(&o);
		ck_assert_msg(o.error_code == NULL, "%s: %s", o.error_code,
			      o.error_msg);
		ck_assert_str_eq(o.out.data ? o.out.data : "", "ran\n");
		sbxt_outcome_free(&o);
		sbxt_wait_for_spare();
	}
	sbxt_teardown(&f);
}
END_TEST

/*
 * A spare's mounts are a copy of sandboxd's from when it was made: a file
 * system mounted after that, where no propagation brings it over
 * (sandboxd's mounts all private here), is still seen by the next run,
 * which must then not take that spare.  Root: the test mounts.
 */
START_TEST(spare_sees_later_mounts)
{
	struct sbxt_fixture f;
	struct sbxt_outcome o;
	char dir[PATH_MAX], file[PATH_MAX + 16], s[PATH_MAX + 32];

	if (geteuid() != 0)
		TEST_SKIP("needs root to mount a file system");
	ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
	ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	sbxt_setup(&f, NULL);
	sbxt_run_sh(&f, "true", &o);
	SBXT_REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
	sbxt_outcome_free(&o);
	/* Now, after the run: sandboxd has made its spare. */
	sbxt_wait_for_spare();
	snprintf(dir, sizeof(dir), "%s/later", f.outside);
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	ck_assert_int_eq(mount("tmpfs", dir, "tmpfs", 0, "mode=0755"), 0);
	snprintf(file, sizeof(file), "%s/marker", dir);
	test_write_file(file, "MOUNTED-LATER\n");
	chmod(file, 0644);
	snprintf(s, sizeof(s), "cat %s", file);
	sbxt_run_sh(&f, s, &o);
	ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
	ck_assert_msg(o.out.data && strstr(o.out.data, "MOUNTED-LATER"),
		      "the run missed a mount made before it started: %s",
		      o.err.data ? o.err.data : "");
	sbxt_outcome_free(&o);
	umount2(dir, MNT_DETACH);
	sbxt_teardown(&f);
}
END_TEST

/*
 * The hot spare (sandboxd/linux/spawn.h): after a run whose link check
 * spd's list decides, the spare is set up ahead for a run like it (its
 * mounts, directory and confinement), and a run that is the same but for
 * its command, environment and descriptors only executes there.  These
 * tests read sandboxd's step trace for "heated" (the spare was set up)
 * and "hot" (a run took it), so that each can tell which way a run went.
 */
static const char *const hot_no_links[] = {NULL};

struct hot_fx {
	struct sbxt_fixture f;
	char trace[PATH_MAX];
	char *tdir;
};

/* Why the hot tests cannot run here, for hot_setup. */
enum hot_why { HOT_OK, HOT_NO_SPARES, HOT_NO_SANDBOX };

/* A fixture whose sandboxd writes the step trace to h->trace, once a
 * sandboxd of its own has run a command here.  HOT_OK, or why not (the
 * fixture then not made). */
static enum hot_why hot_try_setup(struct hot_fx *h)
{
	struct sbxt_fixture probe;
	struct sbxt_outcome o;
	bool no;

	if (!SPAWN_SHARED_VM)
		return HOT_NO_SPARES;
	sbxt_setup(&probe, NULL);
	sbxt_run_sh(&probe, "true", &o);
	no = sbxt_unavailable(&o);
	sbxt_outcome_free(&o);
	sbxt_teardown(&probe);
	if (no)
		return HOT_NO_SANDBOX;
	h->tdir = test_tmpdir("hot");
	snprintf(h->trace, sizeof(h->trace), "%s/trace", h->tdir);
	setenv(TRACE_ENV, h->trace, 1);
	ck_assert_int_eq(trace_open_env("test"), 0);
	sbxt_setup(&h->f, NULL);
	return HOT_OK;
}

/* hot_try_setup, or the test skipped and why (in the test itself: the
 * skip returns from the function it is in). */
#define hot_setup(h)                                                           \
	do {                                                                   \
		enum hot_why why_ = hot_try_setup(h);                          \
		if (why_ == HOT_NO_SPARES)                                     \
			TEST_SKIP("no spare is used under AddressSanitizer "   \
				  "(sandboxd/linux/child.h, "                  \
				  "SPAWN_SHARED_VM)");                         \
		if (why_ == HOT_NO_SANDBOX)                                    \
			TEST_SKIP_LAYER("sandbox", "sandbox unavailable "      \
						   "here");                    \
	} while (0)

static void hot_teardown(struct hot_fx *h)
{
	sbxt_teardown(&h->f);
	trace_close();
	unsetenv(TRACE_ENV);
	test_rmrf(h->tdir);
	free(h->tdir);
}

/* Lines of sandboxd's trace whose step is step. */
static int hot_count(const struct hot_fx *h, const char *step)
{
	char *t = test_read_file(h->trace), want[64];
	int n = 0;

	snprintf(want, sizeof(want), " sandboxd %s\n", step);
	for (char *p = t; p && (p = strstr(p, want)); p += strlen(want))
		n++;
	free(t);
	return n;
}

/* Waits (10 s at most) until sandboxd has heated its spare n times in
 * all: the spare is made 1 ms after a run and heated once ready. */
static void hot_wait_heated(const struct hot_fx *h, int n)
{
	for (int i = 0; i < 1000 && hot_count(h, "heated") < n; i++)
		usleep(10 * 1000);
	ck_assert_int_eq(hot_count(h, "heated"), n);
}

/* sh -c script with spd's link list names, from cwd (NULL: the
 * workspace), with FOO=foo in the environment and nofile as
 * RLIMIT_NOFILE (0: the default). */
static void hot_run_links(struct hot_fx *h, char *script, const char *cwd,
			  const char *foo, uint64_t nofile,
			  const char *const *names, struct sbxt_outcome *o)
{
	char env_foo[64];
	char *argv[] = {"/bin/sh", "-c", script, NULL};
	char *envp[] = {"PATH=/usr/bin:/bin", env_foo, NULL};
	struct sbx_spec sp;

	snprintf(env_foo, sizeof(env_foo), "FOO=%s", foo);
	sbxt_spec_init(&h->f, &sp, argv);
	sp.envp = envp;
	sp.cwd = cwd;
	sp.link_names = names;
	sp.rlimits[SBXP_RLIM_NOFILE] = nofile;
	sbxt_run(&h->f, &sp, o);
	ck_assert_msg(o->error_code == NULL, "%s: %s", o->error_code,
		      o->error_msg);
}

/* The same, with an empty list: nothing in the workspace is multi-linked. */
static void hot_run(struct hot_fx *h, char *script, const char *cwd,
		    const char *foo, uint64_t nofile, struct sbxt_outcome *o)
{
	hot_run_links(h, script, cwd, foo, nofile, hot_no_links, o);
}

/* Each run on a hot spare is its own command: its argv, environment,
 * output and status.  A run with another directory or limit than the
 * spare was heated for is not served by it, and gets what it asked. */
START_TEST(hot_spare_runs_each_command)
{
	struct hot_fx h;
	struct sbxt_outcome o;
	char sub[PATH_MAX], want[PATH_MAX + 16];
	char script[] = "echo \"$FOO\"; pwd; ulimit -n; exit 3";

	hot_setup(&h);
	snprintf(sub, sizeof(sub), "%s/sub", h.f.ws);
	ck_assert_int_eq(mkdir(sub, 0755), 0);
	/* cwd, FOO, nofile; hot: whether the run finds the spare heated for
	 * it (the one before had the same directory and limit). */
	struct {
		const char *cwd, *foo;
		uint64_t nofile;
		bool hot;
	} runs[] = {
	    {NULL, "one", 0, false},   {NULL, "two", 0, true},
	    {sub, "three", 0, false},  {sub, "four", 0, true},
	    {sub, "five", 200, false}, {sub, "six", 200, true},
	};
	int hot = 0;
	struct rlimit rl;

	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	for (size_t i = 0; i < ARRAY_SIZE(runs); i++) {
		if (i > 0)
			hot_wait_heated(&h, (int)i);
		hot_run(&h, script, runs[i].cwd, runs[i].foo, runs[i].nofile,
			&o);
		uint64_t nofile =
		    runs[i].nofile ? runs[i].nofile : SPAWN_RLIM_NOFILE;

		/* Kept or lowered, never raised (child.c). */
		if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < nofile)
			nofile = rl.rlim_max;
		snprintf(want, sizeof(want), "%s\n%s\n%llu\n", runs[i].foo,
			 runs[i].cwd ? runs[i].cwd : h.f.ws,
			 (unsigned long long)nofile);
		ck_assert_str_eq(o.out.data ? o.out.data : "", want);
		ck_assert_int_eq(o.exit_code, 3);
		hot += runs[i].hot;
		ck_assert_int_eq(hot_count(&h, "hot"), hot);
		sbxt_outcome_free(&o);
	}
	hot_teardown(&h);
}
END_TEST

/*
 * Four sessions' commands in turns (parallel agents, each in its own
 * worktree), each in its own workspace: after the first of each, each
 * run finds a spare heated for its own, and a run that fits no hot spare
 * (the first in each other workspace) takes the cold one instead of a
 * clone of its own.
 */
#define HOT_TURN_WS 4
START_TEST(hot_spares_for_four_workspaces_in_turns)
{
	struct hot_fx h;
	struct sbxt_outcome o;
	char *ws[HOT_TURN_WS], want[PATH_MAX + 8];
	char script[] = "pwd";

	hot_setup(&h);
	ws[0] = h.f.ws;
	for (int w = 1; w < HOT_TURN_WS; w++) {
		char name[16];

		snprintf(name, sizeof(name), "hot%d", w);
		ws[w] = test_tmpdir(name);
	}
	for (int i = 0; i < 3 * HOT_TURN_WS; i++) {
		char *argv[] = {"/bin/sh", "-c", script, NULL};
		struct sbx_spec sp;

		if (i > 0)
			hot_wait_heated(&h, i);
		sbxt_spec_init(&h.f, &sp, argv);
		sp.workspace = ws[i % HOT_TURN_WS];
		sp.link_names = hot_no_links;
		sbxt_run(&h.f, &sp, &o);
		SBXT_REQUIRE_SANDBOX(&o);
		ck_assert_msg(o.error_code == NULL, "%s: %s", o.error_code,
			      o.error_msg);
		snprintf(want, sizeof(want), "%s\n", ws[i % HOT_TURN_WS]);
		ck_assert_str_eq(o.out.data ? o.out.data : "", want);
		sbxt_outcome_free(&o);
		/* Run 0: cloned; 1 to 3, each the first in its workspace:
		 * the cold spare; from 4 on: hot. */
		ck_assert_int_eq(hot_count(&h, "hot"),
				 i < HOT_TURN_WS ? 0 : i - (HOT_TURN_WS - 1));
		ck_assert_int_eq(hot_count(&h, "spare"),
				 i < HOT_TURN_WS ? i : HOT_TURN_WS - 1);
	}
	hot_teardown(&h);
	for (int w = 1; w < HOT_TURN_WS; w++) {
		test_rmrf(ws[w]);
		free(ws[w]);
	}
}
END_TEST

/* The host swaps a covered credential directory for another between the
 * spare's heat and the run: the plan reads the same (~/.ssh covered), but
 * the spare's cover sits on the old one.  The run must not take it. */
static void hot_swap_ssh(struct hot_fx *h, bool rename_away)
{
	char ssh[PATH_MAX], old[PATH_MAX + 8], key[PATH_MAX + 16];
	char script[PATH_MAX + 32];
	struct sbxt_outcome o;

	snprintf(ssh, sizeof(ssh), "%s/.ssh", h->f.outside);
	snprintf(old, sizeof(old), "%s.old", ssh);
	snprintf(key, sizeof(key), "%s/id_test", ssh);
	snprintf(script, sizeof(script), "cat %s", key);
	ck_assert_int_eq(mkdir(ssh, 0755), 0);
	hot_run(h, "true", NULL, "x", 0, &o);
	sbxt_outcome_free(&o);
	hot_wait_heated(h, 1);
	if (rename_away)
		ck_assert_int_eq(rename(ssh, old), 0);
	else
		ck_assert_int_eq(rmdir(ssh), 0);
	ck_assert_int_eq(mkdir(ssh, 0755), 0);
	test_write_file(key, "CANARY-hot-7d1\n");
	chmod(key, 0644);
	/* The spare reads the same: it was heated for this plan. */
	hot_run(h, script, NULL, "x", 0, &o);
	ck_assert_ptr_null(strstr(o.out.data ? o.out.data : "", "CANARY"));
	ck_assert_msg(o.err.data && strstr(o.err.data, "id_test"),
		      "cat said nothing of the key: %s",
		      o.err.data ? o.err.data : "");
	ck_assert_int_eq(hot_count(h, "hot"), 0);
	sbxt_outcome_free(&o);
}

/*
 * Two names of one file in the workspace (spd lists both): no link
 * outside, nothing bound, and the spare heated so.  Then the host links
 * the file out as well.  spd's list is the same two names, but the file
 * has a link outside now: the run must find its names read-only, and the
 * outside file unchanged.
 */
START_TEST(hot_spare_sees_a_link_made_outside)
{
	static const char *const names[] = {"sub/a", "sub/b", NULL};
	struct hot_fx h;
	struct sbxt_outcome o;
	char a[PATH_MAX], b[PATH_MAX], out[PATH_MAX], *c;
	char script[] = "echo planted >> sub/a 2>/dev/null && echo WROTE; "
			"echo planted >> sub/b 2>/dev/null && echo WROTE; "
			"cat sub/a";

	hot_setup(&h);
	snprintf(a, sizeof(a), "%s/sub", h.f.ws);
	ck_assert_int_eq(mkdir(a, 0755), 0);
	snprintf(a, sizeof(a), "%s/sub/a", h.f.ws);
	snprintf(b, sizeof(b), "%s/sub/b", h.f.ws);
	snprintf(out, sizeof(out), "%s/out.txt", h.f.outside);
	test_write_file(a, "original\n");
	ck_assert_int_eq(link(a, b), 0);
	hot_run_links(&h, "true", NULL, "x", 0, names, &o);
	sbxt_outcome_free(&o);
	hot_wait_heated(&h, 1);
	if (link(a, out) < 0)
		TEST_SKIP("cannot hard-link %s out of the workspace: %s", a,
			  strerror(errno));
	hot_run_links(&h, script, NULL, "x", 0, names, &o);
	ck_assert_str_eq(o.out.data ? o.out.data : "", "original\n");
	ck_assert_ptr_nonnull(c = test_read_file(out));
	ck_assert_str_eq(c, "original\n");
	free(c);
	ck_assert_int_eq(hot_count(&h, "hot"), 0);
	sbxt_outcome_free(&o);
	hot_teardown(&h);
}
END_TEST

/* Both ways, each on a fixture of its own: renamed away, then removed
 * (its inode number free to come back). */
START_TEST(hot_spare_sees_swapped_credentials)
{
	/* A home in /tmp is out of the run's sight whole: no cover to
	 * swap. */
	if (sbxt_outside_is_private())
		TEST_SKIP("no writable directory outside /tmp and /var/tmp; "
			  "set SPD_TEST_OUTSIDE");
	for (int pass = 0; pass < 2; pass++) {
		struct hot_fx h;

		hot_setup(&h);
		hot_swap_ssh(&h, pass == 0);
		hot_teardown(&h);
	}
}
END_TEST

static void probe_done(void *data, const struct sbx_layers *l)
{
	(void)l;
	*(bool *)data = true;
}

/* spd's probe when sandboxd starts (daemon/modules.c), with the runs'
 * uid and gid; then waits (10 s at most) for the spare sandboxd makes
 * once idle after it. */
static void hot_probe(struct hot_fx *h, uint32_t uid, uint32_t gid)
{
	bool done = false;

	ck_assert_int_eq(sbx_probe(h->f.s, uid, gid, probe_done, &done), 0);
	while (!done)
		uv_run(&h->f.loop, UV_RUN_ONCE);
	for (int i = 0; i < 1000 && !sbxt_has_init(sbx_pid(h->f.s)); i++)
		usleep(10 * 1000);
	ck_assert_msg(sbxt_has_init(sbx_pid(h->f.s)),
		      "sandboxd made no spare after the probe");
}

/* The run o ran, wrote out and exited 0. */
static void ran_ok(const struct sbxt_outcome *o, const char *out)
{
	ck_assert_msg(o->error_code == NULL, "%s: %s", o->error_code,
		      o->error_msg);
	ck_assert_str_eq(o->out.data ? o->out.data : "", out);
	ck_assert_int_eq(o->exit_code, 0);
}

/*
 * After spd's probe sandboxd makes ahead what the first run would have
 * made (spawn_prepare): its filters, as root the run uid's user
 * namespaces, and a spare.  The first run after sandboxd starts (after a
 * restart of spd) takes that spare, and is the run it asked for.
 */
START_TEST(probe_readies_the_first_run)
{
	struct hot_fx h;
	struct sbxt_outcome o;
	char want[32];

	hot_setup(&h);
	hot_probe(&h, 0, 0);
	sbxt_run_sh(&h.f, "id -u; echo x > made; cat made", &o);
	SBXT_REQUIRE_SANDBOX(&o);
	snprintf(want, sizeof(want), "%u\nx\n",
		 geteuid() == 0 ? SPAWN_RUN_UID_DEFAULT : geteuid());
	ran_ok(&o, want);
	/* Taken from the spare made after the probe, not cloned. */
	ck_assert_int_eq(hot_count(&h, "spare"), 1);
	sbxt_outcome_free(&o);
	hot_teardown(&h);
}
END_TEST

/* A probe that named another uid than the run has (spd.conf's
 * sandbox.user changed since): the run still gets its own uid. */
START_TEST(probe_for_another_uid_runs_as_asked)
{
	struct hot_fx h;
	struct sbxt_outcome o;
	char want[32];

	if (geteuid() != 0)
		TEST_SKIP("the run uid is spd's choice only when sandboxd "
			  "runs as root");
	hot_setup(&h);
	hot_probe(&h, 4321, 4321);
	sbxt_run_sh(&h.f, "id -u; id -g", &o);
	SBXT_REQUIRE_SANDBOX(&o);
	snprintf(want, sizeof(want), "%u\n%u\n", SPAWN_RUN_UID_DEFAULT,
		 SPAWN_RUN_GID_DEFAULT);
	ran_ok(&o, want);
	sbxt_outcome_free(&o);
	hot_teardown(&h);
}
END_TEST

static Suite *sandbox_spare_suite(void)
{
	Suite *s = suite_create("sandbox_spare");
	TCase *tc = tcase_create("spare");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, spare_fresh_each_run);
	tcase_add_test(tc, spare_sees_later_mounts);
	tcase_add_test(tc, hot_spare_runs_each_command);
	tcase_add_test(tc, hot_spare_sees_swapped_credentials);
	tcase_add_test(tc, hot_spare_sees_a_link_made_outside);
	tcase_add_test(tc, hot_spares_for_four_workspaces_in_turns);
	tcase_add_test(tc, probe_readies_the_first_run);
	tcase_add_test(tc, probe_for_another_uid_runs_as_asked);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(sandbox_spare_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

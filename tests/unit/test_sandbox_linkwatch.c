/*
 * spd's watch of a workspace's hard links (daemon/session/linkwatch.c) and
 * sandboxd's check from the list it gives (SBXP_RUN_LINKS_LISTED): the
 * list follows what happens to the workspace (renames, saves, trees made
 * and removed, links planted in and made out), is dropped for a walk
 * when it cannot, and the run given it is confined as by sandboxd's own
 * walk.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "common/util.h"
#include "daemon/sandbox/sbx.h"
#include "daemon/session/linkwatch.h"
#include "proto/sandbox.h"
#include "tests/lib/benchutil.h"
#include "tests/lib/sbxtest.h"
#include "tests/lib/testlib.h"

/*
 * The hard-link check from spd's watch of the workspace (linkwatch.h):
 * after the workspace is watched (the first run's walk), a link planted
 * into it from the host and one made from the host to a file of it are
 * both in the list the next run gets, and sandboxd binds both names
 * read-only from the list: neither file outside changes.
 */
/* The last list linkwatch_names gave (lw_names): its names go to a run
 * with its directories (lw_spec_links). */
static struct linkwatch_list lw_last;

static int lw_names(struct linkwatch *lw, const char *ws,
		    const char *const **names)
{
	int r = linkwatch_names(lw, ws, &lw_last);

	*names = r == 1 ? lw_last.names : NULL;
	return r;
}

static void lw_spec_links(struct sbx_spec *sp, const char *const *names)
{
	sp->link_names = names;
	if (names && names == lw_last.names)
		sp->link_ro_dirs = lw_last.ro_dirs;
}

static bool lw_list(struct sbxt_fixture *f, struct linkwatch *lw,
		    const char *const **names)
{
	int r;

	/* The first call starts the walk; wait for it. */
	while ((r = lw_names(lw, f->ws, names)) == 0 &&
	       linkwatch_walking(lw, f->ws))
		while (linkwatch_walking(lw, f->ws))
			uv_run(&f->loop, UV_RUN_ONCE);
	return r == 1;
}

static bool listed(const char *const *names, const char *name)
{
	for (size_t i = 0; names && names[i]; i++)
		if (!strcmp(names[i], name))
			return true;
	return false;
}

static char lw_script[] =
    "for h in planted sub/shared; do"
    " cat $h >/dev/null && echo read;"
    " (echo appended >> $h) 2>/dev/null && echo append:$h;"
    " (echo written > $h) 2>/dev/null && echo write:$h;"
    " truncate -s 0 $h 2>/dev/null && echo truncate:$h;"
    " done; echo ok >> mine; exit 0";

/* Plant both links: outside/in.txt into the workspace as "planted", and
 * the workspace's sub/shared out as outside/out.txt. */
static void lw_plant(struct sbxt_fixture *f, char *in, char *out, size_t len)
{
	char path[PATH_MAX + 32];

	snprintf(in, len, "%s/in.txt", f->outside);
	snprintf(out, len, "%s/out.txt", f->outside);
	test_write_file(in, "original\n");
	snprintf(path, sizeof(path), "%s/planted", f->ws);
	if (link(in, path) < 0)
		TEST_SKIP("cannot hard-link %s into the workspace: %s", in,
			  strerror(errno));
	snprintf(path, sizeof(path), "%s/sub/shared", f->ws);
	if (link(path, out) < 0)
		TEST_SKIP("cannot hard-link %s out of the workspace: %s", path,
			  strerror(errno));
}

static void lw_setup(struct sbxt_fixture *f, struct linkwatch **lw)
{
	char path[PATH_MAX + 32];

	sbxt_setup(f, NULL);
	snprintf(path, sizeof(path), "%s/sub", f->ws);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/sub/shared", f->ws);
	test_write_file(path, "original\n");
	for (int i = 0; i < 50; i++) {
		snprintf(path, sizeof(path), "%s/sub/f%d", f->ws, i);
		test_write_file(path, "x\n");
	}
	ck_assert_int_eq(linkwatch_new(&f->loop, lw), 0);
}

static void lw_check(struct sbxt_fixture *f, const char *const *names,
		     const char *in, const char *out)
{
	char *argv[] = {"/bin/sh", "-c", lw_script, NULL};
	struct sbx_spec sp;
	struct sbxt_outcome o;
	char *c;

	sbxt_spec_init(f, &sp, argv);
	lw_spec_links(&sp, names);
	sbxt_run(f, &sp, &o);
	SBXT_REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s: %s", o.error_code,
		      o.error_msg);
	ck_assert_str_eq(o.out.data ? o.out.data : "", "read\nread\n");
	ck_assert_ptr_nonnull(c = test_read_file(in));
	ck_assert_str_eq(c, "original\n");
	free(c);
	ck_assert_ptr_nonnull(c = test_read_file(out));
	ck_assert_str_eq(c, "original\n");
	free(c);
	sbxt_outcome_free(&o);
}

START_TEST(linkwatch_planted_after_watch)
{
	struct sbxt_fixture f;
	struct linkwatch *lw;
	const char *const *names;
	char in[PATH_MAX], out[PATH_MAX];

	lw_setup(&f, &lw);
	/* The first run's list: the workspace is watched, nothing in it
	 * is multi-linked. */
	ck_assert(lw_list(&f, lw, &names));
	ck_assert_ptr_null(names[0]);
	lw_plant(&f, in, out, sizeof(in));
	/* The watched path: both names come from events, not a walk. */
	ck_assert(lw_list(&f, lw, &names));
	ck_assert_uint_eq(linkwatch_walks(lw), 1);
	ck_assert(listed(names, "planted"));
	ck_assert(listed(names, "sub/shared"));
	lw_check(&f, names, in, out);
	/* The run's own new file did not cost the list. */
	ck_assert(lw_list(&f, lw, &names));
	ck_assert_uint_eq(linkwatch_walks(lw), 1);
	linkwatch_free(lw);
	sbxt_teardown(&f);
}
END_TEST

/* An editor's save of path: a new file written beside it and renamed
 * over it (the rename the list must follow). */
static void lw_save(const char *path)
{
	char tmp[PATH_MAX + 300];

	snprintf(tmp, sizeof(tmp), "%s.swp", path);
	test_write_file(tmp, "saved\n");
	ck_assert_int_eq(rename(tmp, path), 0);
}

/* Runs sh -c script in the workspace with spd's list names and checks
 * that it printed want. */
static void lw_run(struct sbxt_fixture *f, const char *const *names,
		   char *script, const char *want)
{
	char *argv[] = {"/bin/sh", "-c", script, NULL};
	struct sbx_spec sp;
	struct sbxt_outcome o;

	sbxt_spec_init(f, &sp, argv);
	lw_spec_links(&sp, names);
	sbxt_run(f, &sp, &o);
	SBXT_REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s: %s", o.error_code,
		      o.error_msg);
	ck_assert_str_eq(o.out.data ? o.out.data : "", want);
	sbxt_outcome_free(&o);
}

/* Entries of a NULL-terminated list (NULL: none). */
static size_t lw_count(const char *const *v)
{
	size_t n = 0;

	while (v && v[n])
		n++;
	return n;
}

/* The loop run for ms milliseconds of real time, as spd's runs between
 * its clients' requests: the watch reads its queues in the background. */
static void lw_spin(struct sbxt_fixture *f, long ms)
{
	struct timespec ts = {0, 1000000};

	for (long long end = sbxt_mono_ms() + ms; sbxt_mono_ms() < end;) {
		uv_run(&f->loop, UV_RUN_NOWAIT);
		nanosleep(&ts, NULL);
	}
}

/*
 * Until lw has started n walks, without a run asking: a walk dropped in
 * the background may be put off by 4 times the last walk's length
 * (LW_BG_REWALK_RATIO), and that walk ran at nice 19.  The bound is that
 * and a minute more, so that a loaded machine (ASan, CI) does not fail it.
 */
static void lw_wait_walks(struct sbxt_fixture *f, struct linkwatch *lw,
			  unsigned long n, long long walk_ms)
{
	long long end = sbxt_mono_ms() + 4 * walk_ms + 60000;

	while (linkwatch_walks(lw) < n && sbxt_mono_ms() < end)
		lw_spin(f, 50);
}

/* Until no walk of the workspace runs (at most 10,000 turns of lw_spin). */
static void lw_idle(struct sbxt_fixture *f, struct linkwatch *lw)
{
	for (int i = 0; i < 10000 && linkwatch_walking(lw, f->ws); i++)
		lw_spin(f, 1);
}

/* Directories of 4,000 files each named in dirs (NULL-ended) made in the
 * workspace, big enough that a walk takes some ms (and so the window of
 * LW_BG_REWALK_RATIO), then its first walk: that walk's length in ms. */
static long long lw_walk_big(struct sbxt_fixture *f, struct linkwatch *lw,
			     const char *const *dirs)
{
	const char *const *names;
	char a[PATH_MAX + 16];
	long long t0;

	for (size_t i = 0; dirs[i]; i++) {
		snprintf(a, sizeof(a), "%s/%s", f->ws, dirs[i]);
		ck_assert_int_eq(mkdir(a, 0755), 0);
		ck_assert_int_eq(bench_make_files(a, 4000, 40), 0);
	}
	t0 = sbxt_mono_ms();
	ck_assert(lw_list(f, lw, &names));
	ck_assert_uint_eq(linkwatch_walks(lw), 1);
	return sbxt_mono_ms() - t0;
}

/* The workspace's entry name moved out of it (its state is dropped). */
static void lw_move_out(struct sbxt_fixture *f, const char *name)
{
	char a[PATH_MAX + 16], b[PATH_MAX + 16];

	snprintf(a, sizeof(a), "%s/%s", f->ws, name);
	snprintf(b, sizeof(b), "%s/%s", f->outside, name);
	ck_assert_int_eq(rename(a, b), 0);
}

/*
 * spd's list of a store-linked workspace (sbxt_store_tree, 30 packages: 725
 * names): past SBXP_LINKS_EACH_MAX names with a link outside, the list
 * carries the directories to bind whole, as sandboxd's walk would bind
 * them, instead of the names below them: node_modules/.pnpm, most of
 * which is packages' directories bound whole, and vendor/p3/lib (p3
 * itself has more files of its own); and the names left (p3's, git's
 * objects, src's two).  The run given that list is confined exactly as
 * by the walk.
 */
START_TEST(linkwatch_store_links_by_directory)
{
	struct sbxt_fixture f;
	struct linkwatch *lw;
	const char *const *names;

	sbxt_setup(&f, NULL);
	sbxt_store_tree(&f, 30);
	ck_assert_int_eq(linkwatch_new(&f.loop, &lw), 0);
	ck_assert(lw_list(&f, lw, &names));
	ck_assert_uint_eq(lw_count(lw_last.ro_dirs), 2);
	ck_assert(listed(lw_last.ro_dirs, "node_modules/.pnpm"));
	ck_assert(listed(lw_last.ro_dirs, "vendor/p3/lib"));
	ck_assert_uint_eq(lw_count(names), 12 + 3 + 2);
	ck_assert(listed(names, "vendor/p3/f1"));
	ck_assert(listed(names, ".git/objects/ab/o1"));
	ck_assert(listed(names, "src/b"));
	lw_run(&f, names, sbxt_store_script, SBXT_STORE_WANT(723));
	sbxt_store_unchanged(&f, 30);
	linkwatch_free(lw);
	sbxt_teardown(&f);
}
END_TEST

/* The same from spd's list (store_many_packages_one_bind): one directory,
 * node_modules/.pnpm, and no name. */
START_TEST(linkwatch_store_many_packages)
{
	struct sbxt_fixture f;
	struct linkwatch *lw;
	const char *const *names;

	sbxt_setup(&f, NULL);
	sbxt_store_many(&f, SBXT_STORE_MANY);
	ck_assert_int_eq(linkwatch_new(&f.loop, &lw), 0);
	ck_assert(lw_list(&f, lw, &names));
	ck_assert_uint_eq(lw_count(lw_last.ro_dirs), 1);
	ck_assert(listed(lw_last.ro_dirs, "node_modules/.pnpm"));
	ck_assert_uint_eq(lw_count(names), 0);
	lw_run(&f, names, sbxt_store_many_script, SBXT_STORE_MANY_WANT);
	sbxt_store_many_unchanged(&f, SBXT_STORE_MANY);
	linkwatch_free(lw);
	sbxt_teardown(&f);
}
END_TEST

/* The same from spd's list (mount_below_whole_bound_dir): the names below
 * the host's mounts are spd's to list, or the run's to walk. */
START_TEST(linkwatch_mount_below_whole_bound_dir)
{
	struct sbxt_fixture f;
	struct linkwatch *lw;
	const char *const *names;
	char sub[PATH_MAX + 64], one[PATH_MAX + 64];

	sbxt_own_mount_ns();
	sbxt_setup(&f, NULL);
	sbxt_store_tree(&f, SBXT_VOLUMES_NPKG);
	sbxt_volumes_mount(&f, sub, one, sizeof(sub));
	ck_assert_int_eq(linkwatch_new(&f.loop, &lw), 0);
	ck_assert(lw_list(&f, lw, &names));
	lw_run(&f, names, sbxt_volumes_script, SBXT_VOLUMES_WANT);
	sbxt_volumes_unchanged(&f, sub, one);
	linkwatch_free(lw);
	sbxt_teardown(&f);
}
END_TEST

/*
 * Renames inside the workspace keep spd's list (an editor's save, git's
 * lock files, mv): no new walk, and the list follows them.  A file
 * renamed, then linked from outside, is listed under its new name; a
 * directory renamed takes its listed names along; sandboxd, given that
 * list, binds them read-only: the files outside do not change.  A
 * directory moved out, one of its files linked to from outside while it
 * is out there, and moved back in under another name, drops the list (it
 * was beyond the watch): the next walk lists the link, and the run
 * protects it.
 */
START_TEST(linkwatch_renames_kept)
{
	struct sbxt_fixture f;
	struct linkwatch *lw;
	const char *const *names;
	char in[PATH_MAX], out[PATH_MAX];
	char a[PATH_MAX + 32], b[PATH_MAX + 32], f2out[PATH_MAX + 32],
	    f3out[PATH_MAX + 32];
	static char write_all[] =
	    "for h in planted moved/shared moved/f2.renamed; do"
	    " (echo written > $h) 2>/dev/null && echo write:$h;"
	    " done; echo done";
	static char write_back[] =
	    "(echo written > back/f3) 2>/dev/null && echo write; echo done";

	lw_setup(&f, &lw);
	ck_assert(lw_list(&f, lw, &names));
	lw_plant(&f, in, out, sizeof(in));
	ck_assert(lw_list(&f, lw, &names));
	/* An editor's save: a new file renamed over sub/f1. */
	snprintf(b, sizeof(b), "%s/sub/f1", f.ws);
	lw_save(b);
	/* A file renamed, then linked from outside under its new name. */
	snprintf(a, sizeof(a), "%s/sub/f2", f.ws);
	snprintf(b, sizeof(b), "%s/sub/f2.renamed", f.ws);
	ck_assert_int_eq(rename(a, b), 0);
	snprintf(f2out, sizeof(f2out), "%s/f2.out", f.outside);
	ck_assert_int_eq(link(b, f2out), 0);
	/* The directory renamed, with its listed names. */
	snprintf(a, sizeof(a), "%s/sub", f.ws);
	snprintf(b, sizeof(b), "%s/moved", f.ws);
	ck_assert_int_eq(rename(a, b), 0);
	ck_assert(lw_list(&f, lw, &names));
	ck_assert_uint_eq(linkwatch_walks(lw), 1);
	ck_assert(listed(names, "planted"));
	ck_assert(listed(names, "moved/shared"));
	ck_assert(listed(names, "moved/f2.renamed"));
	ck_assert(!listed(names, "sub/shared"));
	lw_run(&f, names, write_all, "done\n");
	sbxt_assert_file(in, "original\n");
	sbxt_assert_file(out, "original\n");
	sbxt_assert_file(f2out, "x\n");
	/* Many saves read at once, and a directory deleted whole: the
	 * list is kept through both. */
	for (int i = 0; i < 40; i++) {
		snprintf(b, sizeof(b), "%s/moved/f%d", f.ws, 10 + i % 10);
		lw_save(b);
	}
	snprintf(a, sizeof(a), "%s/moved/build", f.ws);
	ck_assert_int_eq(mkdir(a, 0755), 0);
	ck_assert_int_eq(bench_make_files(a, 30, 3), 0);
	ck_assert(lw_list(&f, lw, &names));
	test_rmrf(a);
	ck_assert(lw_list(&f, lw, &names));
	ck_assert_uint_eq(linkwatch_walks(lw), 1);
	ck_assert(listed(names, "moved/shared"));

	/* Out, linked to while out there, back in elsewhere. */
	snprintf(a, sizeof(a), "%s/moved", f.ws);
	snprintf(b, sizeof(b), "%s/away", f.outside);
	ck_assert_int_eq(rename(a, b), 0);
	snprintf(a, sizeof(a), "%s/away/f3", f.outside);
	snprintf(f3out, sizeof(f3out), "%s/f3.out", f.outside);
	ck_assert_int_eq(link(a, f3out), 0);
	snprintf(a, sizeof(a), "%s/back", f.ws);
	ck_assert_int_eq(rename(b, a), 0);
	ck_assert_int_eq(lw_names(lw, f.ws, &names), 0);
	ck_assert(lw_list(&f, lw, &names));
	ck_assert_uint_eq(linkwatch_walks(lw), 2);
	ck_assert(listed(names, "back/f3"));
	lw_run(&f, names, write_back, "done\n");
	sbxt_assert_file(f3out, "x\n");
	linkwatch_free(lw);
	sbxt_teardown(&f);
}
END_TEST

/*
 * A directory arriving in the workspace is walked as the queue is read,
 * on spd's loop: a small one there (the list kept, a link planted in it
 * listed), one past LW_EVENT_WALK_MAX entries (npm install, a tree moved
 * in) on the thread pool from scratch instead, and its link listed then.
 */
START_TEST(linkwatch_big_arrival_walked_aside)
{
	struct sbxt_fixture f;
	struct linkwatch *lw;
	const char *const *names;
	char a[PATH_MAX + 32], b[PATH_MAX + 64], in[PATH_MAX + 32];

	lw_setup(&f, &lw);
	ck_assert(lw_list(&f, lw, &names));
	snprintf(in, sizeof(in), "%s/in.txt", f.outside);
	test_write_file(in, "original\n");
	for (int i = 0; i < 2; i++) {
		long files = i ? 5000 : 10;

		snprintf(a, sizeof(a), "%s/tree%d", f.outside, i);
		ck_assert_int_eq(mkdir(a, 0755), 0);
		ck_assert_int_eq(bench_make_files(a, files, 50), 0);
		snprintf(b, sizeof(b), "%s/d000/linked", a);
		ck_assert_int_eq(link(in, b), 0);
		snprintf(b, sizeof(b), "%s/tree%d", f.ws, i);
		ck_assert_int_eq(rename(a, b), 0);
		ck_assert_int_eq(lw_names(lw, f.ws, &names), !i);
		ck_assert(lw_list(&f, lw, &names));
		ck_assert_uint_eq(linkwatch_walks(lw), i ? 2 : 1);
		snprintf(b, sizeof(b), "tree%d/d000/linked", i);
		ck_assert_msg(listed(names, b), "%s not listed", b);
	}
	linkwatch_free(lw);
	sbxt_teardown(&f);
}
END_TEST

/*
 * A tree removed whole (rm -rf of a build's output, node_modules) keeps
 * the list: each file's IN_ATTRIB comes with its directory already gone
 * when the queue is read, and used to wait for the queue's end, past the
 * room for such events, which dropped the state (a full walk in sandboxd
 * at the next run: 17-99 ms after 20,000 files here).  A link planted
 * afterwards is still seen.  Since the IN_ATTRIBs wait apart (applied
 * once per file at a read's end), the events that wait so are the names
 * made in directories removed before the read: a build's temporary
 * directories, below.
 */
START_TEST(linkwatch_tree_removed_kept)
{
	struct sbxt_fixture f;
	struct linkwatch *lw;
	const char *const *names;
	char a[PATH_MAX + 64], in[PATH_MAX], out[PATH_MAX];

	lw_setup(&f, &lw);
	ck_assert(lw_list(&f, lw, &names));
	snprintf(a, sizeof(a), "%s/build", f.ws);
	ck_assert_int_eq(mkdir(a, 0755), 0);
	ck_assert_int_eq(bench_make_files(a, 2000, 20), 0);
	ck_assert(lw_list(&f, lw, &names));
	ck_assert_uint_gt(linkwatch_watches(lw), 2000);
	test_rmrf(a);
	lw_plant(&f, in, out, sizeof(in));
	ck_assert_int_eq(lw_names(lw, f.ws, &names), 1);
	ck_assert_uint_eq(linkwatch_walks(lw), 1);
	/* Their watches went with them, and a walk of another workspace
	 * may have them (its budget counts the watches held). */
	ck_assert_uint_lt(linkwatch_watches(lw), 100);
	ck_assert(listed(names, "planted"));
	ck_assert(listed(names, "sub/shared"));
	lw_check(&f, names, in, out);
	/* A build's temporary directories, watched, each given files and
	 * removed before the next read: the names made in each wait for the
	 * queue's end (their directory is gone when read) until its
	 * IN_IGNORED, 800 of them in all, more than the 256 that may wait
	 * at once. */
	snprintf(a, sizeof(a), "%s/build", f.ws);
	ck_assert_int_eq(mkdir(a, 0755), 0);
	for (int i = 0; i < 400; i++) {
		snprintf(a, sizeof(a), "%s/build/t%d", f.ws, i);
		ck_assert_int_eq(mkdir(a, 0755), 0);
	}
	ck_assert(lw_list(&f, lw, &names));
	for (int i = 0; i < 400; i++) {
		char b[PATH_MAX + 96];

		for (int k = 0; k < 2; k++) {
			snprintf(b, sizeof(b), "%s/build/t%d/o%d", f.ws, i, k);
			test_write_file(b, "x\n");
		}
		snprintf(a, sizeof(a), "%s/build/t%d", f.ws, i);
		test_rmrf(a);
	}
	ck_assert_int_eq(lw_names(lw, f.ws, &names), 1);
	ck_assert_uint_eq(linkwatch_walks(lw), 1);
	ck_assert(listed(names, "planted"));
	linkwatch_free(lw);
	sbxt_teardown(&f);
}
END_TEST

/*
 * spd's walk of a workspace where rm -rf is running: names vanish under
 * it, directories too.  It completes (what went needs nothing), and the
 * run after it has the list: a walk that failed leaves the next 64 runs
 * to sandboxd's walk.  Each round races a fresh watch's first walk with
 * the removal of 4,000 files (about 12,500 events: under the queue's
 * 16,384, which the walk's own state has to hold until it is installed).
 * Six rounds: most of the test's time is the files' creation, which ext4
 * without a journal (the CI machines' root) makes slow after many
 * deletions (about 1 ms a file: its allocator skips, one by one, each
 * inode deleted in the last minute or more).
 */
START_TEST(linkwatch_walk_races_rm)
{
	struct sbxt_fixture f;
	struct linkwatch *lw;
	const char *const *names;
	char a[PATH_MAX + 64];

	lw_setup(&f, &lw);
	linkwatch_free(lw);
	for (int round = 0; round < 6; round++) {
		pid_t pid;
		int st;

		ck_assert_int_eq(linkwatch_new(&f.loop, &lw), 0);
		snprintf(a, sizeof(a), "%s/tree%d", f.ws, round);
		ck_assert_int_eq(mkdir(a, 0755), 0);
		ck_assert_int_eq(bench_make_files(a, 4000, 400), 0);
		pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			execlp("rm", "rm", "-rf", a, (char *)NULL);
			_exit(127);
		}
		ck_assert_int_eq(lw_names(lw, f.ws, &names), 0);
		while (linkwatch_walking(lw, f.ws))
			uv_run(&f.loop, UV_RUN_ONCE);
		ck_assert_int_eq(waitpid(pid, &st, 0), pid);
		ck_assert_msg(lw_names(lw, f.ws, &names) == 1,
			      "round %d: the walk racing rm -rf failed", round);
		/* Its handles close on the loop's next turns. */
		linkwatch_free(lw);
		for (int i = 0; i < 3; i++)
			uv_run(&f.loop, UV_RUN_NOWAIT);
	}
	sbxt_teardown(&f);
}
END_TEST

/*
 * A workspace where files are made and deleted by the ten thousand (a
 * build all day) keeps a bounded state: past LW_DEAD_SLACK nodes of
 * deleted entries beyond twice the live ones, a read in the background
 * drops it for a fresh walk, and the next run has the new list.  Six
 * rounds of 3,030 entries: 18,180 dead, past the 16,384 and twice the
 * hundred or so live ones.
 */
START_TEST(linkwatch_dead_nodes_bounded)
{
	struct sbxt_fixture f;
	struct linkwatch *lw;
	const char *const *names;
	char a[PATH_MAX + 64];
	long long t0, walk_ms;

	lw_setup(&f, &lw);
	t0 = sbxt_mono_ms();
	ck_assert(lw_list(&f, lw, &names));
	walk_ms = sbxt_mono_ms() - t0;
	for (int i = 0; i < 6; i++) {
		snprintf(a, sizeof(a), "%s/tmp%d", f.ws, i);
		ck_assert_int_eq(mkdir(a, 0755), 0);
		ck_assert_int_eq(bench_make_files(a, 3000, 30), 0);
		ck_assert(lw_list(&f, lw, &names));
		test_rmrf(a);
		ck_assert(lw_list(&f, lw, &names));
		if (i != 2)
			continue;
		/* 9,000 dead: kept, and no walk. */
		lw_spin(&f, 50);
		ck_assert_uint_eq(linkwatch_walks(lw), 1);
	}
	/* 18,180: the background read drops the state and walks again. */
	snprintf(a, sizeof(a), "%s/last", f.ws);
	test_write_file(a, "x\n");
	lw_wait_walks(&f, lw, 2, walk_ms);
	lw_idle(&f, lw);
	ck_assert_uint_eq(linkwatch_walks(lw), 2);
	ck_assert_int_eq(lw_names(lw, f.ws, &names), 1);
	linkwatch_free(lw);
	sbxt_teardown(&f);
}
END_TEST

/*
 * The queue is read on the loop shortly after events come, without a run
 * asking: a run after a commit's or a build's worth of changes reads
 * nothing itself, and finds both links planted since listed (and
 * protected).  A directory moved out of the workspace drops the state in
 * the background and the new walk starts then, so that the run after it
 * has a list again, with a link made below that directory while it was
 * out.
 */
START_TEST(linkwatch_read_in_background)
{
	struct sbxt_fixture f;
	struct linkwatch *lw;
	const char *const *names;
	char a[PATH_MAX + 128], b[PATH_MAX + 64], in[PATH_MAX], out[PATH_MAX];
	long long t0, walk_ms;
	unsigned long run_events;

	lw_setup(&f, &lw);
	t0 = sbxt_mono_ms();
	ck_assert(lw_list(&f, lw, &names));
	walk_ms = sbxt_mono_ms() - t0;
	run_events = linkwatch_events(lw, true);
	snprintf(a, sizeof(a), "%s/gen", f.ws);
	ck_assert_int_eq(mkdir(a, 0755), 0);
	ck_assert_int_eq(bench_make_files(a, 300, 10), 0);
	lw_plant(&f, in, out, sizeof(in));
	/* Until the background reads settle (150 ms without one), or 10 s
	 * (under ASan, on a loaded machine, 150 ms was not always enough). */
	for (unsigned long seen = 0, i = 0;
	     i < 100 && (!seen || seen != linkwatch_events(lw, false)); i++) {
		seen = linkwatch_events(lw, false);
		lw_spin(&f, 150);
	}
	/* (The directory's files came before its watch: its walk found
	 * them, not events.) */
	ck_assert_uint_gt(linkwatch_events(lw, false), 0);
	ck_assert(lw_list(&f, lw, &names));
	ck_assert_uint_eq(linkwatch_events(lw, true), run_events);
	ck_assert_uint_eq(linkwatch_walks(lw), 1);
	ck_assert(listed(names, "planted"));
	ck_assert(listed(names, "sub/shared"));
	lw_check(&f, names, in, out);
	/* Out, and nothing else happens until the walk is over. */
	snprintf(b, sizeof(b), "%s/gen", f.outside);
	ck_assert_int_eq(rename(a, b), 0);
	lw_wait_walks(&f, lw, 2, walk_ms);
	ck_assert_uint_eq(linkwatch_walks(lw), 2);
	lw_idle(&f, lw);
	ck_assert(!linkwatch_walking(lw, f.ws));
	snprintf(a, sizeof(a), "%s/d000/f0000000", b);
	snprintf(in, sizeof(in), "%s/genlink", f.outside);
	ck_assert_int_eq(link(a, in), 0);
	snprintf(a, sizeof(a), "%s/back", f.ws);
	ck_assert_int_eq(rename(b, a), 0);
	ck_assert_int_eq(lw_names(lw, f.ws, &names), 1);
	ck_assert_uint_eq(linkwatch_walks(lw), 2);
	ck_assert_msg(listed(names, "back/d000/f0000000"),
		      "a link made out there is not listed");
	linkwatch_free(lw);
	sbxt_teardown(&f);
}
END_TEST

/*
 * A state dropped in the background soon after its walk (within
 * LW_BG_REWALK_RATIO times the walk's length: a burst of new files, an
 * install) is walked again once that time has come, without a run
 * asking: the run after it finds a list, instead of being the one that
 * finds it gone and pays sandboxd's walk (bench/README.md, note 4).
 */
START_TEST(linkwatch_rewalk_put_off)
{
	struct sbxt_fixture f;
	struct linkwatch *lw;
	const char *const *names;
	char in[PATH_MAX], out[PATH_MAX];
	const char *big[] = {"big", NULL};
	long long walk_ms;

	lw_setup(&f, &lw);
	lw_plant(&f, in, out, sizeof(in));
	walk_ms = lw_walk_big(&f, lw, big);
	/* At once after the walk: out of the workspace, the state goes. */
	lw_move_out(&f, "big");
	/* Put off by at most 4 times the walk's length (at nice 19,
	 * with a watch on each file). */
	lw_wait_walks(&f, lw, 2, walk_ms);
	ck_assert_msg(linkwatch_walks(lw) == 2,
		      "the state dropped was not walked again without a run");
	lw_idle(&f, lw);
	ck_assert_int_eq(lw_names(lw, f.ws, &names), 1);
	ck_assert_uint_eq(linkwatch_walks(lw), 2);
	ck_assert(listed(names, "planted"));
	ck_assert(listed(names, "sub/shared"));
	lw_check(&f, names, in, out);
	linkwatch_free(lw);
	sbxt_teardown(&f);
}
END_TEST

/*
 * A burst (an install) drops the list while its files come, and again
 * from the events that came during the walk that followed: the second
 * drop, right after that walk, is walked again at once rather than put
 * off for 4 times the walk's length, which left the runs just after a
 * burst without a list (bench/README.md, note 4).  Only once: dropped
 * right after that retry, the next walk is put off (4 times both walks'
 * length, so a workspace dropped again and again still costs spd at most
 * a fifth of a CPU), and still comes without a run asking.
 */
START_TEST(linkwatch_rewalk_retry_once)
{
	struct sbxt_fixture f;
	struct linkwatch *lw;
	const char *const *names;
	char in[PATH_MAX], out[PATH_MAX];
	const char *big[] = {"big0", "big1", NULL};
	long long walk_ms;

	lw_setup(&f, &lw);
	lw_plant(&f, in, out, sizeof(in));
	walk_ms = lw_walk_big(&f, lw, big);
	/* Dropped at once after the walk: walked again at once. */
	lw_move_out(&f, "big0");
	for (int i = 0; i < 30000 && linkwatch_walks(lw) < 2 &&
			!linkwatch_put_off(lw, f.ws);
	     i++)
		lw_spin(&f, 1);
	ck_assert_msg(!linkwatch_put_off(lw, f.ws),
		      "the list dropped at once after its walk was put off");
	ck_assert_uint_eq(linkwatch_walks(lw), 2);
	if (!linkwatch_retried(lw, f.ws))
		TEST_SKIP("the drop was read later than 4 times the walk's "
			  "length (%lld ms) after it: a walk in its time, not "
			  "a retry (a loaded machine)",
			  walk_ms);
	lw_idle(&f, lw);
	ck_assert(!linkwatch_walking(lw, f.ws));
	/* Dropped at once after the retry: put off, no walk yet. */
	lw_move_out(&f, "big1");
	for (int i = 0; i < 30000 && linkwatch_walks(lw) < 3 &&
			!linkwatch_put_off(lw, f.ws);
	     i++)
		lw_spin(&f, 1);
	if (linkwatch_walks(lw) == 2)
		ck_assert(linkwatch_put_off(lw, f.ws));
	else
		/* The drop read after the 4 times both walks' length (a
		 * loaded machine): a walk in its time, never a second
		 * retry. */
		ck_assert_msg(!linkwatch_retried(lw, f.ws),
			      "walked again at once twice in a row");
	/* It comes without a run asking. */
	lw_wait_walks(&f, lw, 3, 2 * walk_ms);
	ck_assert_uint_eq(linkwatch_walks(lw), 3);
	lw_idle(&f, lw);
	ck_assert_int_eq(lw_names(lw, f.ws, &names), 1);
	ck_assert(listed(names, "planted"));
	lw_check(&f, names, in, out);
	linkwatch_free(lw);
	sbxt_teardown(&f);
}
END_TEST

/* Whether a thread of this process runs at nice value nice (field 19 of
 * /proc/self/task/TID/stat). */
static bool thread_at_nice(long nice)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	bool found = false;

	while (d && !found && (de = readdir(d))) {
		char path[300], buf[1024], *p;
		long v = 0;
		FILE *fp;
		int field = 2;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/stat",
			 de->d_name);
		if (!(fp = fopen(path, "re")))
			continue;
		p = fgets(buf, sizeof(buf), fp) ? strrchr(buf, ')') : NULL;
		fclose(fp);
		/* Fields 3 on follow the name's closing parenthesis. */
		for (char *tok = p ? strtok(p + 1, " ") : NULL; tok;
		     tok = strtok(NULL, " "))
			if (++field == 19) {
				v = strtol(tok, NULL, 10);
				found = v == nice;
				break;
			}
	}
	if (d)
		closedir(d);
	return found;
}

/*
 * spd's walks of workspaces: at most two at once (each holds a thread of
 * libuv's pool, which journal queries need too); a third workspace asked
 * for meanwhile is walked when one of them ends, without being asked
 * again; and each walk runs at nice 19, so that it never takes a CPU from
 * a run (the first run of a big workspace waited for one).
 */
START_TEST(linkwatch_walks_bounded)
{
	struct sbxt_fixture f;
	struct linkwatch *lw;
	const char *const *names;
	char w[3][PATH_MAX];
	bool saw_nice = false;
	/* Run under nice 19 already (nice make check), every thread is:
	 * the walk's cannot be told apart, and that half is not checked. */
	bool niced;

	errno = 0;
	niced = getpriority(PRIO_PROCESS, 0) >= 19 && errno == 0;
	if (niced)
		fprintf(stderr,
			"linkwatch_walks_bounded: the process runs at "
			"nice 19: the walk's own nice is not checked\n");
	lw_setup(&f, &lw);
	for (int i = 0; i < 3; i++) {
		snprintf(w[i], sizeof(w[i]), "%s/w%d", f.ws, i);
		ck_assert_int_eq(mkdir(w[i], 0755), 0);
		ck_assert_int_eq(bench_make_files(w[i], i ? 10 : 5000, 50), 0);
	}
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(lw_names(lw, w[i], &names), 0);
	ck_assert_uint_eq(linkwatch_walks(lw), 2);
	ck_assert(linkwatch_walking(lw, w[0]));
	ck_assert(!linkwatch_walking(lw, w[2]));
	while (linkwatch_walking(lw, w[0]) || linkwatch_walking(lw, w[1]) ||
	       linkwatch_walking(lw, w[2])) {
		saw_nice = saw_nice || thread_at_nice(19);
		uv_run(&f.loop, UV_RUN_NOWAIT);
	}
	ck_assert_msg(saw_nice || niced, "no walk ran at nice 19");
	ck_assert(niced || !thread_at_nice(19));
	ck_assert_uint_eq(linkwatch_walks(lw), 3);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(lw_names(lw, w[i], &names), 1);
	linkwatch_free(lw);
	sbxt_teardown(&f);
}
END_TEST

/* What is under the workspace, for the random test: relative paths of
 * its regular files and directories ("" is the workspace). */
struct lw_tree {
	char files[512][256], dirs[128][256];
	size_t nfiles, ndirs;
	/* Files with more than one link, which the list must hold. */
	char multi[512][256];
	size_t nmulti;
};

static void lw_tree_walk(const char *root, const char *rel, struct lw_tree *t)
{
	char path[PATH_MAX + 300], sub[256];
	struct dirent *d;
	struct stat sb;
	DIR *dir;

	snprintf(path, sizeof(path), "%s%s%s", root, rel[0] ? "/" : "", rel);
	if (!(dir = opendir(path)))
		return;
	if (t->ndirs < ARRAY_SIZE(t->dirs))
		snprintf(t->dirs[t->ndirs++], sizeof(t->dirs[0]), "%s", rel);
	while ((d = readdir(dir))) {
		if (d->d_name[0] == '.' &&
		    (!d->d_name[1] || (d->d_name[1] == '.' && !d->d_name[2])))
			continue;
		if (strlen(rel) + strlen(d->d_name) + 2 > sizeof(sub))
			continue;
		strcpy(sub, rel);
		if (rel[0])
			strcat(sub, "/");
		strcat(sub, d->d_name);
		snprintf(path, sizeof(path), "%s/%s", root, sub);
		if (lstat(path, &sb) < 0)
			continue;
		if (S_ISDIR(sb.st_mode)) {
			lw_tree_walk(root, sub, t);
		} else if (S_ISREG(sb.st_mode)) {
			if (t->nfiles < ARRAY_SIZE(t->files))
				snprintf(t->files[t->nfiles++],
					 sizeof(t->files[0]), "%s", sub);
			if (sb.st_nlink > 1 && t->nmulti < ARRAY_SIZE(t->multi))
				snprintf(t->multi[t->nmulti++],
					 sizeof(t->multi[0]), "%s", sub);
		}
	}
	closedir(dir);
}

/* A step that may fail (its name taken, its file gone): the test goes on
 * with whatever happened. */
static void lw_try(int r)
{
	(void)r;
}

static uint32_t lw_rand(uint32_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 17;
	*x ^= *x << 5;
	return *x;
}

/*
 * The list against the truth, over random sequences of what happens to a
 * workspace: files made, saved over, renamed inside, deleted; links
 * planted from outside and made out; directories made, renamed, moved
 * out and back (one linked to while out there).  After every few steps, every file of the workspace with
 * more than one link must be in spd's list (after a new walk when the
 * list was dropped): a name missing there is a file a run could change
 * outside.  Extra names are allowed (sandboxd judges each at run time).
 */
START_TEST(linkwatch_random_ops_match_walk)
{
	struct sbxt_fixture f;
	struct linkwatch *lw;
	const char *const *names;
	static struct lw_tree t;
	char a[PATH_MAX + 300], b[PATH_MAX + 300], c[PATH_MAX + 300];
	unsigned long drops = 0, checks = 0;

	lw_setup(&f, &lw);
	ck_assert(lw_list(&f, lw, &names));
	for (uint32_t seed = 1; seed <= 3; seed++) {
		uint32_t x = 2463534242u * seed;

		for (int step = 0; step < 200; step++) {
			uint32_t op = lw_rand(&x) % 10;
			const char *fl, *dr;

			memset(&t, 0, sizeof(t));
			lw_tree_walk(f.ws, "", &t);
			fl = t.nfiles ? t.files[lw_rand(&x) % t.nfiles] : NULL;
			dr = t.dirs[lw_rand(&x) % t.ndirs];
			snprintf(b, sizeof(b), "%s/%s%sn%u-%d", f.ws, dr,
				 dr[0] ? "/" : "", seed, step);
			switch (op) {
			case 0: /* a new file */
				test_write_file(b, "x\n");
				break;
			case 1: /* a link planted from outside */
				snprintf(a, sizeof(a), "%s/o%u-%d", f.outside,
					 seed, step);
				test_write_file(a, "outside\n");
				lw_try(link(a, b));
				break;
			case 2: /* a link made out of a file inside */
				if (!fl)
					break;
				snprintf(a, sizeof(a), "%s/%s", f.ws, fl);
				snprintf(b, sizeof(b), "%s/out%u-%d", f.outside,
					 seed, step);
				lw_try(link(a, b));
				break;
			case 3: /* a file renamed inside */
				if (!fl)
					break;
				snprintf(a, sizeof(a), "%s/%s", f.ws, fl);
				(void)rename(a, b);
				break;
			case 4: /* an editor's save over a file */
				if (!fl)
					break;
				snprintf(b, sizeof(b), "%s/%s", f.ws, fl);
				lw_save(b);
				break;
			case 5: /* a file deleted */
				if (!fl)
					break;
				snprintf(a, sizeof(a), "%s/%s", f.ws, fl);
				(void)unlink(a);
				break;
			case 6: /* a new directory */
				(void)mkdir(b, 0755);
				break;
			case 7: /* a directory renamed to the top */
				if (!dr[0])
					break;
				snprintf(a, sizeof(a), "%s/%s", f.ws, dr);
				snprintf(b, sizeof(b), "%s/d%u-%d", f.ws, seed,
					 step);
				(void)rename(a, b);
				break;
			case 8: /* a file moved out, sometimes back */
				if (!fl)
					break;
				snprintf(a, sizeof(a), "%s/%s", f.ws, fl);
				snprintf(b, sizeof(b), "%s/away%u-%d",
					 f.outside, seed, step);
				if (rename(a, b) == 0 && lw_rand(&x) % 2)
					(void)rename(b, a);
				break;
			case 9: /* a directory out, a link made below it
				 * out there, back in elsewhere */
				/* A file there already (watched, so only its
				 * own event can tell of the link). */
				fl = NULL;
				for (size_t k = 0; dr[0] && k < t.nfiles; k++)
					if (!strncmp(t.files[k], dr,
						     strlen(dr)) &&
					    t.files[k][strlen(dr)] == '/')
						fl = t.files[k];
				if (!fl)
					break;
				snprintf(a, sizeof(a), "%s/%.255s", f.ws, dr);
				snprintf(b, sizeof(b), "%s/dir%u-%d", f.outside,
					 seed, step);
				if (rename(a, b) < 0)
					break;
				if (snprintf(a, sizeof(a), "%.4000s/%s", b,
					     fl + strlen(dr) + 1) >=
				    (int)sizeof(a))
					break;
				snprintf(c, sizeof(c), "%s/dout%u-%d",
					 f.outside, seed, step);
				lw_try(link(a, c));
				snprintf(a, sizeof(a), "%s/back%u-%d", f.ws,
					 seed, step);
				(void)rename(b, a);
				break;
			}
			/* Now and then the loop runs as between two
			 * requests, and the background reads apply what
			 * came (a rename out and back: after the delay). */
			if (lw_rand(&x) % 3 == 0)
				lw_spin(&f, 1 + lw_rand(&x) % 25);
			if (step % 5 != 4)
				continue;
			if (lw_names(lw, f.ws, &names) == 0) {
				drops++;
				ck_assert(lw_list(&f, lw, &names));
			}
			checks++;
			memset(&t, 0, sizeof(t));
			lw_tree_walk(f.ws, "", &t);
			for (size_t k = 0; k < t.nmulti; k++)
				ck_assert_msg(listed(names, t.multi[k]),
					      "seed %u step %d: %s has more "
					      "than one link and is not listed",
					      seed, step, t.multi[k]);
		}
	}
	fprintf(stderr,
		"linkwatch_random_ops_match_walk: %lu checks, %lu walks "
		"again\n",
		checks, drops);
	linkwatch_free(lw);
	sbxt_teardown(&f);
}
END_TEST

/* The link list on the wire: only canonical, strictly ordered names, and
 * only with SBXP_RUN_LINKS_LISTED, so that sandboxd can never be made to
 * count one name twice (which would hide a link outside). */
START_TEST(linkwatch_list_decoding)
{
	static char buf[SBXP_MSG_MAX];
	struct sbxp_run *m = (struct sbxp_run *)(void *)buf;
	const char *argv[] = {"/bin/true", NULL}, *none[] = {NULL};
	const char *good[] = {"a", "b/c", "b/d", NULL};
	const char *const bad[][3] = {
	    {"b", "a", NULL},	    {"a", "a", NULL},	 {"/a", NULL, NULL},
	    {"a/../b", NULL, NULL}, {"./a", NULL, NULL}, {"a//b", NULL, NULL},
	    {"a/", NULL, NULL},	    {"", NULL, NULL},
	};
	const char *const *lists[SBXP_L__COUNT] = {argv, none, none, none,
						   none, none, none, good};
	struct sbxp_run_view v;
	long len;
	char *p;

	memset(buf, 0, sizeof(buf));
	ck_assert_int_eq(sbxp_run_encode(m, "/ws", NULL, NULL, lists), -EINVAL);
	m->flags = SBXP_RUN_LINKS_LISTED;
	len = sbxp_run_encode(m, "/ws", NULL, NULL, lists);
	ck_assert_int_gt(len, 0);
	ck_assert_int_eq(sbxp_run_decode(buf, (size_t)len, &v), 0);
	ck_assert_str_eq(v.lists[SBXP_L_LINKS][2], "b/d");
	ck_assert_ptr_null(v.lists[SBXP_L_LINKS][3]);
	sbxp_run_view_free(&v);
	/* Made a duplicate on the wire ("b/d" -> "b/c"). */
	p = (char *)memmem(m->strtab, m->strtab_len, "b/d", 4);
	ck_assert_ptr_nonnull(p);
	p[2] = 'c';
	ck_assert_int_eq(sbxp_run_decode(buf, (size_t)len, &v), -SPD_EPROTO);
	p[2] = 'd';
	m->flags = 0;
	ck_assert_int_eq(sbxp_run_decode(buf, (size_t)len, &v), -SPD_EPROTO);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		lists[SBXP_L_LINKS] = bad[i];
		m->flags = SBXP_RUN_LINKS_LISTED;
		ck_assert_int_eq(sbxp_run_encode(m, "/ws", NULL, NULL, lists),
				 -EINVAL);
	}
}
END_TEST

/* The fallback: events the watch cannot account for (a queue that
 * overflowed, a rename) give no list, and the run gets sandboxd's full
 * walk, which binds both names as before. */
START_TEST(linkwatch_fallback_walks)
{
	struct sbxt_fixture f;
	struct linkwatch *lw;
	const char *const *names;
	char in[PATH_MAX], out[PATH_MAX], a[PATH_MAX + 8], b[PATH_MAX + 8];
	unsigned long max = 16384;
	FILE *fp;

	lw_setup(&f, &lw);
	ck_assert(lw_list(&f, lw, &names));
	lw_plant(&f, in, out, sizeof(in));
	/* More events than the queue holds (alternating between two
	 * files, so that the kernel cannot merge them). */
	if ((fp = fopen("/proc/sys/fs/inotify/max_queued_events", "re"))) {
		if (fscanf(fp, "%lu", &max) != 1)
			max = 16384;
		fclose(fp);
	}
	snprintf(a, sizeof(a), "%s/sub/f1", f.ws);
	snprintf(b, sizeof(b), "%s/sub/f2", f.ws);
	for (unsigned long i = 0; i <= max + 2; i++)
		ck_assert_int_eq(chmod(i % 2 ? a : b, i % 4 < 2 ? 0644 : 0600),
				 0);
	ck_assert_int_eq(lw_names(lw, f.ws, &names), 0);
	lw_check(&f, NULL, in, out);
	/* Watched again after a new walk; then a file moved out of the
	 * workspace drops the list. */
	ck_assert(lw_list(&f, lw, &names));
	ck_assert_uint_eq(linkwatch_walks(lw), 2);
	snprintf(a, sizeof(a), "%s/sub/f3", f.ws);
	snprintf(b, sizeof(b), "%s/f3", f.outside);
	ck_assert_int_eq(rename(a, b), 0);
	ck_assert_int_eq(lw_names(lw, f.ws, &names), 0);
	lw_check(&f, NULL, in, out);
	linkwatch_free(lw);
	sbxt_teardown(&f);
}
END_TEST

static Suite *sandbox_linkwatch_suite(void)
{
	Suite *s = suite_create("sandbox_linkwatch");
	TCase *tc = tcase_create("linkwatch");

	/* A bound on a hang, not on speed: linkwatch_walk_races_rm makes and
	 * removes 64,000 files, which took over 60 s beside a loaded CI run
	 * (load 7). */
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, linkwatch_list_decoding);
	tcase_add_test(tc, linkwatch_planted_after_watch);
	tcase_add_test(tc, linkwatch_fallback_walks);
	tcase_add_test(tc, linkwatch_walks_bounded);
	tcase_add_test(tc, linkwatch_rewalk_put_off);
	tcase_add_test(tc, linkwatch_rewalk_retry_once);
	tcase_add_test(tc, linkwatch_renames_kept);
	tcase_add_test(tc, linkwatch_big_arrival_walked_aside);
	tcase_add_test(tc, linkwatch_random_ops_match_walk);
	tcase_add_test(tc, linkwatch_read_in_background);
	tcase_add_test(tc, linkwatch_tree_removed_kept);
	tcase_add_test(tc, linkwatch_dead_nodes_bounded);
	tcase_add_test(tc, linkwatch_walk_races_rm);
	tcase_add_test(tc, linkwatch_store_links_by_directory);
	tcase_add_test(tc, linkwatch_store_many_packages);
	tcase_add_test(tc, linkwatch_mount_below_whole_bound_dir);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(sandbox_linkwatch_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

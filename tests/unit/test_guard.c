/*
 * Unit tests for daemon/guard: every guarded change is found and named,
 * spd's own branch moving is not, and a scan with nothing changed is
 * clean.  Real repositories made with the git CLI in temporary dirs.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/lib/testlib.h"
#include "common/paths.h"
#include "daemon/session/guard.h"
#include "daemon/policy/policy.h"
#include "daemon/policy/protected.h"

static char *const git_env[] = {
    "GIT_AUTHOR_NAME=t",
    "GIT_AUTHOR_EMAIL=t@example.org",
    "GIT_COMMITTER_NAME=t",
    "GIT_COMMITTER_EMAIL=t@example.org",
    "GIT_CONFIG_NOSYSTEM=1",
    "GIT_CONFIG_GLOBAL=/dev/null",
    NULL,
};

/* Run a shell command in dir; fails the test when it fails. */
static void sh(const char *dir, const char *fmt, ...)
{
	char cmd[4096], full[4400];
	char *err = NULL;
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	snprintf(full, sizeof(full), "cd '%s' && %s", dir, cmd);
	char *argv[] = {"sh", "-c", full, NULL};
	st = test_run(argv, git_env, NULL, &err);
	ck_assert_msg(st == 0, "%s: %s", cmd, err ? err : "");
	free(err);
}

/* A repository with two commits, branches main, other and spd/feat, a
 * tag, a .spd.conf and a hook directory. */
static char *make_repo(void)
{
	char *d = test_tmpdir("guard");

	sh(d, "git init -q -b main . && echo one > a.txt && "
	      "printf '[check \"unit\"]\\n\\trun = true\\n' > .spd.conf && "
	      "git add -A && git commit -qm one && echo two > a.txt && "
	      "git commit -qam two && git branch other && git tag v1 && "
	      "git branch spd/feat && mkdir -p .git/hooks");
	return d;
}

static struct guard *guard_for_mode(const char *repo, bool stat_only)
{
	char *gitdir = paths_join(repo, ".git");
	struct guard_config cfg = {
	    .gitdir = gitdir,
	    .workdir = repo,
	    .own_ref = "refs/heads/spd/feat",
	    .stat_only = stat_only,
	};
	struct guard *g = NULL;

	ck_assert_int_eq(guard_new(&cfg, &g), 0);
	ck_assert_ptr_nonnull(g);
	free(gitdir);
	return g;
}

static struct guard *guard_for(const char *repo)
{
	return guard_for_mode(repo, false);
}

/* Whether this kernel gives the test an inotify instance at all. */
static bool have_inotify(void)
{
	int fd = inotify_init1(IN_CLOEXEC);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* Assert that the next scan finds exactly set/path. */
static void expect(struct guard *g, enum guard_set set, const char *path)
{
	struct guard_finding f;

	memset(&f, 0, sizeof(f));
	ck_assert_int_eq(guard_check(g, &f), 1);
	ck_assert_int_eq(f.set, set);
	ck_assert_str_eq(f.path, path);
	/* The snapshot is kept: the change is found again. */
	ck_assert_int_eq(guard_check(g, NULL), 1);
}

START_TEST(test_clean_and_touch)
{
	char *d = make_repo();
	struct guard *g = guard_for(d);

	ck_assert_int_eq(guard_check(g, NULL), 0);
	ck_assert_uint_gt(guard_count(g), 5);
	/* New metadata, same content: not a change. */
	sh(d, "touch .git/config .spd.conf .git/refs/heads/main");
	ck_assert_int_eq(guard_check(g, NULL), 0);
	ck_assert_int_eq(guard_check(g, NULL), 0);
	guard_free(g);
	test_rmrf(d);
	free(d);
}
END_TEST

START_TEST(test_config_edit)
{
	char *d = make_repo();
	struct guard *g = guard_for(d);

	sh(d, "git config core.hooksPath /tmp/evil");
	expect(g, GUARD_SET_GIT, ".git/config");
	guard_free(g);
	test_rmrf(d);
	free(d);
}
END_TEST

START_TEST(test_hook_added)
{
	char *d = make_repo();
	struct guard *g = guard_for(d);

	sh(d, "printf '#!/bin/sh\\ncurl evil\\n' > .git/hooks/pre-commit && "
	      "chmod +x .git/hooks/pre-commit");
	expect(g, GUARD_SET_GIT, ".git/hooks/pre-commit");
	guard_free(g);
	test_rmrf(d);
	free(d);
}
END_TEST

START_TEST(test_info_added)
{
	char *d = make_repo();
	struct guard *g = guard_for(d);

	sh(d, "mkdir -p .git/info && echo '* filter=x' > .git/info/attributes");
	expect(g, GUARD_SET_GIT, ".git/info/attributes");
	guard_free(g);
	test_rmrf(d);
	free(d);
}
END_TEST

/*
 * .git/info/refs is git's own (update-server-info, which a repack by
 * gc --auto after an agent's commit runs): written or rewritten, with
 * its temporary file, it is no change; anything else new in .git/info
 * is, next to it.
 */
START_TEST(test_info_refs_not_guarded)
{
	char *d = make_repo();
	struct guard *g = guard_for(d);

	sh(d, "git update-server-info && echo x > .git/info/refs_Ab3dE9");
	ck_assert_int_eq(guard_check(g, NULL), 0);
	sh(d, "rm .git/info/refs_Ab3dE9 && git update-server-info -f");
	ck_assert_int_eq(guard_check(g, NULL), 0);
	sh(d, "echo '*.c' > .git/info/refs_x");
	expect(g, GUARD_SET_GIT, ".git/info/refs_x");
	guard_free(g);
	test_rmrf(d);
	free(d);
}
END_TEST

START_TEST(test_branch_moved)
{
	char *d = make_repo();
	struct guard *g = guard_for(d);

	sh(d, "git branch -f other HEAD~1");
	expect(g, GUARD_SET_GIT, ".git/refs/heads/other");
	guard_free(g);
	test_rmrf(d);
	free(d);
}
END_TEST

START_TEST(test_branch_created)
{
	char *d = make_repo();
	struct guard *g = guard_for(d);

	sh(d, "git branch sneaky");
	expect(g, GUARD_SET_GIT, ".git/refs/heads/sneaky");
	guard_free(g);
	test_rmrf(d);
	free(d);
}
END_TEST

START_TEST(test_tag_moved)
{
	char *d = make_repo();
	struct guard *g = guard_for(d);

	sh(d, "git tag -f v1 HEAD~1");
	expect(g, GUARD_SET_GIT, ".git/refs/tags/v1");
	guard_free(g);
	test_rmrf(d);
	free(d);
}
END_TEST

/* With the refs packed, a move by rewriting packed-refs names the ref. */
START_TEST(test_packed_tag_moved)
{
	char *d = make_repo();
	struct guard *g;

	sh(d, "git pack-refs --all");
	g = guard_for(d);
	ck_assert_int_eq(guard_check(g, NULL), 0);
	sh(d, "old=$(git rev-parse v1) new=$(git rev-parse HEAD~1) && "
	      "sed -i \"s/^$old refs\\/tags\\/v1$/$new refs\\/tags\\/v1/\" "
	      ".git/packed-refs && git rev-parse v1 | grep -q $new");
	expect(g, GUARD_SET_GIT, ".git/packed-refs:refs/tags/v1");
	guard_free(g);
	test_rmrf(d);
	free(d);
}
END_TEST

START_TEST(test_spd_conf_edited)
{
	char *d = make_repo();
	struct guard *g = guard_for(d);

	sh(d, "printf '[check \"unit\"]\\n\\trun = false\\n' > .spd.conf");
	expect(g, GUARD_SET_PROTECTED, ".spd.conf");
	guard_free(g);
	test_rmrf(d);
	free(d);
}
END_TEST

START_TEST(test_ci_added)
{
	char *d = make_repo();
	struct guard *g = guard_for(d);

	sh(d, "mkdir -p .github/workflows && echo x > .github/workflows/a.yml");
	expect(g, GUARD_SET_PROTECTED, ".github/workflows/a.yml");
	guard_free(g);
	test_rmrf(d);
	free(d);
}
END_TEST

START_TEST(test_spd_conf_removed)
{
	char *d = make_repo();
	struct guard *g = guard_for(d);
	struct guard_finding f;

	sh(d, "rm .spd.conf");
	ck_assert_int_eq(guard_check(g, &f), 1);
	ck_assert_str_eq(f.path, ".spd.conf");
	ck_assert_str_eq(f.what, "removed");
	guard_free(g);
	test_rmrf(d);
	free(d);
}
END_TEST

/* spd's own branch moving (loose, then packed) is never a finding. */
START_TEST(test_own_branch_moves)
{
	char *d = make_repo();
	struct guard *g = guard_for(d);

	sh(d, "git update-ref refs/heads/spd/feat HEAD~1");
	ck_assert_int_eq(guard_check(g, NULL), 0);
	sh(d, "git pack-refs --all");
	/* Packing moved every loose ref into packed-refs: values are the
	 * same but the loose files are gone.  That is a real on-disk
	 * change of the guarded set, so start a fresh guard after it. */
	guard_free(g);
	g = guard_for(d);
	sh(d, "git update-ref refs/heads/spd/feat HEAD && "
	      "git pack-refs --all");
	ck_assert_int_eq(guard_check(g, NULL), 0);
	sh(d, "git update-ref -d refs/heads/spd/feat");
	ck_assert_int_eq(guard_check(g, NULL), 0);
	/* ... while the same edit to another branch is. */
	sh(d, "git update-ref refs/heads/other HEAD~1");
	ck_assert_int_eq(guard_check(g, NULL), 1);
	guard_free(g);
	test_rmrf(d);
	free(d);
}
END_TEST

/* A worktree's .git is a file; the guard is given the main git dir. */
START_TEST(test_worktree_guards_main_gitdir)
{
	char *d = make_repo();
	char *wt = test_tmpdir("guardwt");
	char *gitdir = paths_join(d, ".git");
	struct guard_finding f;
	struct guard *g = NULL;

	sh(d, "git worktree add -q '%s/w' spd/feat", wt);
	char *w = paths_join(wt, "w");
	struct guard_config cfg = {
	    .gitdir = gitdir,
	    .workdir = w,
	    .own_ref = "refs/heads/spd/feat",
	};
	ck_assert_int_eq(guard_new(&cfg, &g), 0);
	/* A commit in the worktree moves only the session's own branch. */
	sh(w, "echo three > a.txt && git commit -qam three");
	ck_assert_int_eq(guard_check(g, NULL), 0);
	/* A hook planted through the worktree lands in the main .git. */
	sh(w,
	   "echo x > \"$(git rev-parse --git-common-dir)/hooks/post-commit\"");
	ck_assert_int_eq(guard_check(g, &f), 1);
	ck_assert_str_eq(f.path, ".git/hooks/post-commit");
	/* The worktree's own protected files are guarded. */
	guard_free(g);
	sh(d, "rm .git/hooks/post-commit");
	ck_assert_int_eq(guard_new(&cfg, &g), 0);
	sh(w, "echo '[verify]' >> .spd.conf");
	ck_assert_int_eq(guard_check(g, &f), 1);
	ck_assert_int_eq(f.set, GUARD_SET_PROTECTED);
	ck_assert_str_eq(f.path, ".spd.conf");
	guard_free(g);
	test_rmrf(d);
	test_rmrf(wt);
	free(w);
	free(gitdir);
	free(wt);
	free(d);
}
END_TEST

/*
 * The stat shortcut: with every guarded file older than the racy window,
 * a scan compares stat keys only; a same-size rewrite of a ref and of
 * .spd.conf must still be found (their ctime moves).
 */
START_TEST(test_fast_path)
{
	char *d = make_repo();
	struct guard *g;
	struct guard_finding f;

	sh(d, "git branch b2 && git tag t2");
	sleep(3); /* older than the guard's racy window */
	g = guard_for(d);
	ck_assert_int_eq(guard_check(g, NULL), 0);
	ck_assert_int_eq(guard_check(g, NULL), 0);
	/* Same size, new content: the oid of another commit. */
	sh(d, "git rev-parse HEAD~1 > .git/refs/heads/b2.new && "
	      "cat .git/refs/heads/b2.new > .git/refs/heads/b2 && "
	      "rm .git/refs/heads/b2.new");
	ck_assert_int_eq(guard_check(g, &f), 1);
	ck_assert_str_eq(f.path, ".git/refs/heads/b2");
	guard_free(g);
	sh(d, "git branch -f b2 HEAD");
	sleep(3);
	g = guard_for(d);
	ck_assert_int_eq(guard_check(g, NULL), 0);
	sh(d, "sed -i 's/run = true/run = fals/' .spd.conf");
	ck_assert_int_eq(guard_check(g, &f), 1);
	ck_assert_str_eq(f.path, ".spd.conf");
	guard_free(g);
	test_rmrf(d);
	free(d);
}
END_TEST

/*
 * The inotify path: with every guarded file older than the racy window,
 * clean checks do no full scan (nothing moved, no event), and a change
 * made right after a clean check is found by the very next check.  Each
 * case gets a fresh guard over the repository as it is then.
 */
static const struct {
	const char *prep; /* before the files age; NULL: nothing */
	const char *cmd;
	enum guard_set set;
	const char *path;
} event_cases[] = {
    {NULL, "git branch -f other HEAD~1", GUARD_SET_GIT,
     ".git/refs/heads/other"},
    {NULL, "printf '#!/bin/sh\\n' > .git/hooks/post-merge", GUARD_SET_GIT,
     ".git/hooks/post-merge"},
    {NULL, "git config core.fsmonitor /tmp/evil", GUARD_SET_GIT, ".git/config"},
    {NULL, "git tag x/y/t1", GUARD_SET_GIT, ".git/refs/tags/x/y/t1"},
    {NULL, "mkdir -p .git/info && echo x > .git/info/exclude", GUARD_SET_GIT,
     ".git/info/exclude"},
    /* packed-refs rewritten by sed -i (a rename over it).  The own
     * branch is made loose again first: creating refs/heads/spd/ is an
     * event, as it must be (a new directory may hold new refs). */
    {"git pack-refs --all && git update-ref refs/heads/spd/feat HEAD",
     "old=$(git rev-parse v1) new=$(git rev-parse HEAD~1) && "
     "sed -i \"s/^$old refs\\/tags\\/v1$/$new refs\\/tags\\/v1/\" "
     ".git/packed-refs",
     GUARD_SET_GIT, ".git/packed-refs:refs/tags/v1"},
    {NULL, "echo '[verify]' >> .spd.conf", GUARD_SET_PROTECTED, ".spd.conf"},
    {NULL, "mkdir -p .github/workflows && echo x > .github/workflows/b.yml",
     GUARD_SET_PROTECTED, ".github/workflows/b.yml"},
    /* A write through a second hard link made outside every watched
     * directory: only the watch on the file's inode sees it. */
    {NULL, "ln .spd.conf linked && echo '[x]' >> linked", GUARD_SET_PROTECTED,
     ".spd.conf"},
};

START_TEST(test_events)
{
	enum { N = sizeof(event_cases) / sizeof(event_cases[0]) };
	char *d[N];
	struct guard *g;

	if (!have_inotify())
		TEST_SKIP("inotify_init1: %s", strerror(errno));
	for (size_t i = 0; i < N; i++) {
		d[i] = make_repo();
		if (event_cases[i].prep)
			sh(d[i], "%s", event_cases[i].prep);
	}
	sleep(3); /* older than the guard's racy window */
	for (size_t i = 0; i < N; i++) {
		g = guard_for(d[i]);
		ck_assert(guard_watching(g));
		ck_assert_int_eq(guard_check(g, NULL), 0);
		ck_assert_int_eq(guard_check(g, NULL), 0);
		ck_assert_int_eq(guard_check(g, NULL), 0);
		/* Nothing moved and nothing is racy: no full scan. */
		ck_assert_uint_eq(guard_full_scans(g), 0);
		/* Unrelated work next to the guarded files (the agent's
		 * files, the index, objects, the session's own branch) is
		 * no event worth a scan. */
		sh(d[i], "echo y > a.txt && git add a.txt && echo z > n.md && "
			 "git update-ref refs/heads/spd/feat HEAD~1");
		ck_assert_int_eq(guard_check(g, NULL), 0);
		ck_assert_uint_eq(guard_full_scans(g), 0);
		sh(d[i], "%s", event_cases[i].cmd);
		expect(g, event_cases[i].set, event_cases[i].path);
		guard_free(g);
		test_rmrf(d[i]);
		free(d[i]);
	}
}
END_TEST

/*
 * The racy case: a same-size rewrite made right after the snapshot (the
 * same clock tick, so the stat key may not move) is found, with inotify
 * and without.
 */
START_TEST(test_racy_same_size)
{
	for (int stat_only = 0; stat_only < 2; stat_only++) {
		char *d = make_repo();
		struct guard *g = guard_for_mode(d, stat_only);
		struct guard_finding f;

		ck_assert(guard_watching(g) == (!stat_only && have_inotify()));
		/* In place (same inode), same size: another commit's oid. */
		sh(d, "git rev-parse HEAD~1 > oid && "
		      "cat oid > .git/refs/heads/other && rm oid && "
		      "git rev-parse other | grep -q $(git rev-parse HEAD~1)");
		memset(&f, 0, sizeof(f));
		ck_assert_int_eq(guard_check(g, &f), 1);
		ck_assert_str_eq(f.path, ".git/refs/heads/other");
		guard_free(g);
		test_rmrf(d);
		free(d);
	}
}
END_TEST

/* Without inotify (forced), every change is still found: each check is
 * a full scan. */
START_TEST(test_stat_only)
{
	static const struct {
		const char *cmd;
		const char *path;
	} cases[] = {
	    {"git branch -f other HEAD~1", ".git/refs/heads/other"},
	    {"echo x > .git/hooks/pre-push", ".git/hooks/pre-push"},
	    {"git tag x/y/t1", ".git/refs/tags/x/y/t1"},
	    {"echo '[x]' >> .spd.conf", ".spd.conf"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *d = make_repo();
		struct guard *g = guard_for_mode(d, true);

		ck_assert(!guard_watching(g));
		ck_assert_int_eq(guard_check(g, NULL), 0);
		ck_assert_uint_eq(guard_full_scans(g), 1);
		sh(d, "%s", cases[i].cmd);
		expect(g, GUARD_SET_GIT + (i == 3), cases[i].path);
		guard_free(g);
		test_rmrf(d);
		free(d);
	}
}
END_TEST

/*
 * The digest stays the same across full scans while nothing changes,
 * absent guarded paths included (most of the protected roots are absent
 * in a given checkout).  A rescan used to give absent entries a zero hash
 * where the first scan gave them the absent one, and the digest stored
 * after a command then differed from a restarted spd's: INTEGRITY.
 */
START_TEST(test_digest_stable)
{
	char *d = make_repo();
	struct guard *g = guard_for_mode(d, true);
	uint8_t a[GUARD_DIGEST_LEN], b[GUARD_DIGEST_LEN], c[GUARD_DIGEST_LEN];

	guard_digest(g, a);
	/* There are absent entries, or this would prove nothing. */
	guard_digest_legacy(g, c);
	ck_assert(memcmp(a, c, sizeof(a)) != 0);
	for (int k = 0; k < 2; k++) {
		ck_assert_int_eq(guard_check(g, NULL), 0);
		guard_digest(g, b);
		ck_assert_msg(memcmp(a, b, sizeof(a)) == 0,
			      "the digest moved after full scan %d", k + 1);
	}
	ck_assert_uint_eq(guard_full_scans(g), 2);
	guard_free(g);
	test_rmrf(d);
	free(d);
}
END_TEST

/*
 * Stores through a shared mapping raise no inotify event while the
 * mapping is held.  The slices still stat every entry within
 * GUARD_FULL_SCAN_CHECKS checks, so the change is found by then (the
 * mapping stays open throughout, as in a process that outlives the
 * command).
 */
START_TEST(test_mmap_store)
{
	char *d = make_repo();
	char *ref = paths_join(d, ".git/refs/heads/other");
	struct guard_finding f;
	struct guard *g;
	char *p, *old = NULL, *now;
	int fd, r = 0;
	size_t n;

	sleep(3); /* older than the racy window: only the stat key tells */
	g = guard_for(d);
	if (!guard_watching(g))
		TEST_SKIP("no inotify here: every check is a full scan");
	ck_assert_int_eq(guard_check(g, NULL), 0);
	ck_assert_uint_eq(guard_full_scans(g), 0);
	old = test_read_file(ref);
	ck_assert_ptr_nonnull(old);
	n = strlen(old);
	ck_assert_uint_eq(n, 41);
	fd = open(ref, O_RDWR | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(p, MAP_FAILED);
	/* Another oid of the same length. */
	p[0] = p[0] == 'a' ? 'b' : 'a';
	memset(&f, 0, sizeof(f));
	for (int i = 0; i < GUARD_FULL_SCAN_CHECKS && r == 0; i++)
		r = guard_check(g, &f);
	ck_assert_int_eq(r, 1);
	now = test_read_file(ref);
	ck_assert_str_ne(now, old); /* the store did reach the file */
	free(now);
	ck_assert_str_eq(f.path, ".git/refs/heads/other");
	/* Found again while the mapping is still held. */
	ck_assert_int_eq(guard_check(g, NULL), 1);
	munmap(p, n);
	close(fd);
	guard_free(g);
	free(old);
	free(ref);
	test_rmrf(d);
	free(d);
}
END_TEST

static int count_fds(void)
{
	char *argv[] = {"sh", "-c", "ls /proc/$PPID/fd | wc -l", NULL};
	char *out = NULL;
	int n;

	ck_assert_int_eq(test_run(argv, NULL, &out, NULL), 0);
	n = atoi(out);
	free(out);
	return n;
}

/*
 * Many guards: past the instance limit a guard falls back to full scans
 * (and still finds changes); freeing guards closes their inotify fds, so
 * the fd count returns to where it was and new guards watch again.
 */
START_TEST(test_instance_limit)
{
	enum { MANY = 200 };
	static struct guard *gs[MANY];
	char *d;
	int fds0, n = 0;

	if (!have_inotify())
		TEST_SKIP("inotify_init1: %s", strerror(errno));
	d = make_repo();
	fds0 = count_fds();
	for (n = 0; n < MANY; n++) {
		gs[n] = guard_for(d);
		if (!guard_watching(gs[n]))
			break;
	}
	ck_assert_int_lt(n, MANY); /* the limit was reached */
	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(count_fds(), fds0 + n);
	sh(d, "git branch -f other HEAD~1");
	expect(gs[n], GUARD_SET_GIT, ".git/refs/heads/other");
	for (int i = 0; i <= n; i++)
		guard_free(gs[i]);
	ck_assert_int_eq(count_fds(), fds0);
	gs[0] = guard_for(d);
	ck_assert(guard_watching(gs[0]));
	guard_free(gs[0]);
	test_rmrf(d);
	free(d);
}
END_TEST

/*
 * A file that stands for pattern: each wildcard becomes "x", a directory
 * pattern gets a file "f" inside.  With odd set, the letters alternate
 * in case, as a case-insensitive file system (or an agent probing one)
 * would spell it.
 */
static void instance(const char *pattern, bool odd, char *buf, size_t n)
{
	size_t o = 0;

	for (const char *p = pattern; *p && o + 2 < n; p++) {
		char ch = *p;

		if (ch == '*' || ch == '?') {
			buf[o++] = 'x';
			continue;
		}
		if (odd && ch >= 'a' && ch <= 'z' && o % 2)
			ch = (char)(ch - 'a' + 'A');
		else if (odd && ch >= 'A' && ch <= 'Z' && o % 2 == 0)
			ch = (char)(ch - 'A' + 'a');
		buf[o++] = ch;
	}
	buf[o] = '\0';
	if (o && buf[o - 1] == '/')
		snprintf(buf + o, n - o, "f");
}

static void write_rel(const char *dir, const char *rel, const char *content)
{
	char *p = paths_join(dir, rel);
	char *slash = strrchr(p, '/');

	*slash = '\0';
	sh(dir, "mkdir -p '%s'", p);
	*slash = '/';
	test_write_file(p, content);
	free(p);
}

/*
 * The policy and the guard read one table: for every entry whose class
 * the guard re-hashes, the policy denies a write (fs.write) and the
 * guard, built with its default list, finds a change made behind spd's
 * back, in the canonical spelling and in odd letter case.
 */
START_TEST(test_table_agreement)
{
	const struct protected_pattern *pats;
	size_t np = protected_patterns(&pats), checked = 0;
	bool odd = _i == 1;
	char *d = make_repo();
	char rel[GUARD_PATH_MAX];
	struct guard *g;

	for (size_t i = 0; i < np; i++) {
		if (!protected_class_guarded(pats[i].cls) ||
		    strcmp(pats[i].pattern, ".git/") == 0)
			continue;
		instance(pats[i].pattern, odd, rel, sizeof(rel));
		write_rel(d, rel, "original\n");
	}
	g = guard_for(d);
	for (size_t i = 0; i < np; i++) {
		struct policy_context ctx = {.workspace = d};
		struct policy_call call = {.kind = POLICY_CALL_WRITE,
					   .path = rel};
		struct policy_result r;
		struct guard_finding f;
		char *p;

		if (!protected_class_guarded(pats[i].cls) ||
		    strcmp(pats[i].pattern, ".git/") == 0)
			continue;
		instance(pats[i].pattern, odd, rel, sizeof(rel));
		ck_assert_int_eq(policy_classify(NULL, &ctx, &call, &r), 0);
		ck_assert_msg(r.decision == POLICY_DENY &&
				  strncmp(r.rule, "deny.write.", 11) == 0,
			      "%s (%s): policy says %s %s", rel,
			      pats[i].pattern, policy_decision_name(r.decision),
			      r.rule);
		policy_result_free(&r);

		p = paths_join(d, rel);
		test_write_file(p, "changed behind spd's back\n");
		memset(&f, 0, sizeof(f));
		ck_assert_msg(guard_check(g, &f) == 1,
			      "%s (%s): the guard saw no change", rel,
			      pats[i].pattern);
		ck_assert_int_eq(f.set, GUARD_SET_PROTECTED);
		ck_assert_str_eq(f.path, rel);
		/* The same bytes again: the guard is clean once more. */
		test_write_file(p, "original\n");
		ck_assert_int_eq(guard_check(g, NULL), 0);
		free(p);
		checked++;
	}
	ck_assert_uint_gt(checked, 50);
	guard_free(g);
	test_rmrf(d);
	free(d);
}
END_TEST

START_TEST(test_bad_gitdir)
{
	struct guard_config cfg = {.gitdir = "/nonexistent/.git"};
	struct guard *g = NULL;

	ck_assert_int_eq(guard_new(&cfg, &g), -ENOENT);
	ck_assert_ptr_null(g);
	guard_free(NULL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("guard");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_clean_and_touch);
	tcase_add_test(tc, test_config_edit);
	tcase_add_test(tc, test_hook_added);
	tcase_add_test(tc, test_info_added);
	tcase_add_test(tc, test_info_refs_not_guarded);
	tcase_add_test(tc, test_branch_moved);
	tcase_add_test(tc, test_branch_created);
	tcase_add_test(tc, test_tag_moved);
	tcase_add_test(tc, test_packed_tag_moved);
	tcase_add_test(tc, test_spd_conf_edited);
	tcase_add_test(tc, test_ci_added);
	tcase_add_test(tc, test_spd_conf_removed);
	tcase_add_test(tc, test_own_branch_moves);
	tcase_add_test(tc, test_worktree_guards_main_gitdir);
	tcase_add_test(tc, test_fast_path);
	tcase_add_test(tc, test_events);
	tcase_add_test(tc, test_racy_same_size);
	tcase_add_test(tc, test_stat_only);
	tcase_add_test(tc, test_digest_stable);
	tcase_add_test(tc, test_mmap_store);
	tcase_add_test(tc, test_instance_limit);
	tcase_add_test(tc, test_bad_gitdir);
	tcase_add_loop_test(tc, test_table_agreement, 0, 2);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

/*
 * Unit tests for daemon/session: start, work, diff and end with a real
 * repository; feature names; in-place refusal of a dirty checkout; the
 * guard ending the attempt; held-out files; tokens; the verification
 * gates.  sbx has not landed, so the gates are evaluated with check exit
 * codes supplied directly, as the handler will after running the checks.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tests/lib/fakecall.h"
#include "tests/lib/testlib.h"
#include "common/paths.h"
#include "common/strv.h"
#include "common/util.h"
#include "daemon/methods/agent.h"
#include "daemon/transport/call.h"
#include "daemon/journal/journal.h"
#include "daemon/session/linkwatch.h"
#include "daemon/sandbox/sbx.h"
#include "daemon/session/session.h"
#include "daemon/session/session_priv.h"
#include "daemon/spd.h"
#include "daemon/transport/handlers.h"

static char *const git_env[] = {
    "GIT_AUTHOR_NAME=t",
    "GIT_AUTHOR_EMAIL=t@example.org",
    "GIT_COMMITTER_NAME=t",
    "GIT_COMMITTER_EMAIL=t@example.org",
    "GIT_CONFIG_NOSYSTEM=1",
    "GIT_CONFIG_GLOBAL=/dev/null",
    NULL,
};

/* Run a shell command in dir; returns its output (malloc'd) and fails
 * the test when it fails. */
static char *sh(const char *dir, const char *fmt, ...)
{
	char cmd[4096], full[4400];
	char *out = NULL, *err = NULL;
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	snprintf(full, sizeof(full), "cd '%s' && %s", dir, cmd);
	char *argv[] = {"sh", "-c", full, NULL};
	st = test_run(argv, git_env, &out, &err);
	ck_assert_msg(st == 0, "%s: %s", cmd, err ? err : "");
	free(err);
	return out;
}

struct fx {
	char *root;
	char *repo;
	char *state;
	struct session_store *s;
	int journaled;
	char last_kind[64];
};

static void jhook(void *data, const char *id, const char *kind,
		  const char *summary, const char *detail)
{
	struct fx *f = data;

	f->journaled++;
	snprintf(f->last_kind, sizeof(f->last_kind), "%s", kind);
}

static void fx_init(struct fx *f, const char *conf)
{
	memset(f, 0, sizeof(*f));
	f->root = test_tmpdir("session");
	f->repo = paths_join(f->root, "repo");
	f->state = paths_join(f->root, "state");
	mkdir(f->repo, 0700);
	if (conf) {
		char *p = paths_join(f->repo, ".spd.conf");
		test_write_file(p, conf);
		free(p);
	}
	free(sh(f->repo,
		"git init -q -b main . && echo one > a.txt && "
		"mkdir -p src && echo 'int x;' > src/x.c && "
		"echo '*.log' > .gitignore && touch .spd.conf && git add -A && "
		"git commit -qm one && git tag v1"));
	ck_assert_int_eq(session_store_open(f->state, &f->s), 0);
	session_store_set_journal(f->s, jhook, f);
}

static void fx_done(struct fx *f)
{
	session_store_free(f->s);
	test_rmrf(f->root);
	free(f->root);
	free(f->repo);
	free(f->state);
}

static struct session_info *start(struct fx *f, const char *feature,
				  bool in_place, char *token)
{
	struct session_info *i = NULL;
	char tok[SESSION_TOKEN_LEN + 1];
	int r = session_start(f->s, f->repo, feature, in_place, &i,
			      token ? token : tok);

	ck_assert_msg(r == 0, "session_start: %d %s", r,
		      session_store_error(f->s));
	return i;
}

static bool exists(const char *p)
{
	struct stat st;

	return lstat(p, &st) == 0;
}

START_TEST(test_start_diff_end)
{
	struct fx f;
	char token[SESSION_TOKEN_LEN + 1];
	struct session_info *i;
	char *out, *diff = NULL, *p;
	bool trunc = true;

	fx_init(&f, NULL);
	i = start(&f, "add-b", false, token);
	ck_assert_uint_eq(strlen(token), SESSION_TOKEN_LEN);
	ck_assert_uint_eq(strlen(i->id), SESSION_ID_LEN);
	ck_assert_str_eq(i->branch, "spd/add-b");
	/* The worktree sits under the state dir, on the new branch, at the
	 * repository's HEAD. */
	p = paths_join(f.state, "worktrees");
	ck_assert(strncmp(i->worktree, p, strlen(p)) == 0);
	free(p);
	out = sh(i->worktree, "git rev-parse --abbrev-ref HEAD");
	ck_assert_str_eq(out, "spd/add-b\n");
	free(out);
	out = sh(f.repo, "git rev-parse HEAD");
	ck_assert(strncmp(out, i->base, 40) == 0);
	free(out);
	p = paths_join(i->worktree, "a.txt");
	ck_assert(exists(p));
	free(p);
	struct session_run_paths rp;
	ck_assert_int_eq(session_run_paths(f.s, i->id, &rp, NULL), 0);
	ck_assert(!rp.in_place);
	ck_assert_str_eq(rp.workspace, i->worktree);
	/* The repository's git dir, read-only (git works in the run). */
	ck_assert_str_eq(rp.readonly[0], i->gitdir);
	ck_assert_ptr_null(rp.readonly[1]);
	ck_assert_ptr_null(rp.empty_files[0]);
	session_run_paths_free(&rp);

	/* Work: edit, add, commit one change and leave one uncommitted;
	 * an ignored file does not show. */
	free(sh(i->worktree, "echo two >> a.txt && git commit -qam two && "
			     "echo brand-new > b.txt && echo noise > x.log && "
			     "echo 'int y;' >> src/x.c"));
	ck_assert_int_eq(session_diff(f.s, i->id, &diff, &trunc), 0);
	ck_assert(!trunc);
	ck_assert_ptr_nonnull(strstr(diff, "+two"));
	ck_assert_ptr_nonnull(strstr(diff, "b/b.txt"));
	ck_assert_ptr_nonnull(strstr(diff, "+brand-new"));
	ck_assert_ptr_nonnull(strstr(diff, "+int y;"));
	ck_assert_ptr_null(strstr(diff, "x.log"));
	free(diff);

	/* The operator's checkout is untouched. */
	out = sh(f.repo, "git status --porcelain && cat a.txt");
	ck_assert_str_eq(out, "one\n");
	free(out);

	ck_assert_int_eq(session_end(f.s, i->id, false, NULL), 0);
	ck_assert(!exists(i->worktree));
	out = sh(f.repo, "git rev-parse --verify -q spd/add-b >/dev/null && "
			 "git show spd/add-b:a.txt && git worktree list | "
			 "wc -l");
	ck_assert_str_eq(out, "one\ntwo\n1\n");
	free(out);
	/* What was left uncommitted, at the top and in a directory, was
	 * committed whole (spd's index keeps a cache of its trees from the
	 * start: a directory changed since must not come from it). */
	out = sh(f.repo, "git show spd/add-b:b.txt && git show "
			 "spd/add-b:src/x.c | tail -n 1");
	ck_assert_str_eq(out, "brand-new\nint y;\n");
	free(out);
	ck_assert_int_eq(session_end(f.s, i->id, false, NULL), -EALREADY);
	ck_assert_int_eq(session_usable(f.s, i->id), -ESHUTDOWN);
	ck_assert_str_eq(f.last_kind, "session.end");
	/* The same feature again: the kept branch is not clobbered. */
	struct session_info *j = NULL;
	ck_assert_int_eq(session_start(f.s, f.repo, "add-b", false, &j, token),
			 -EEXIST);
	ck_assert_ptr_nonnull(strstr(session_store_error(f.s), "spd/add-b"));
	session_info_free(i);
	fx_done(&f);
}
END_TEST

/*
 * The checkout skips libgit2's filters only where none could change a
 * byte: with a .gitattributes asking for CRLF (or core.autocrlf) the
 * worktree has CRLF, exactly as git's own checkout; without, the files
 * are the blobs.
 */
START_TEST(test_checkout_filters)
{
	struct fx f;
	struct session_info *i;
	char *out;

	fx_init(&f, NULL);
	free(sh(f.repo, "printf 'x\\ny\\n' > crlf.txt && "
			"printf 'x\\ny\\n' > plain.dat && "
			"git add -A && git commit -qm lines"));
	i = start(&f, "no-attributes", false, NULL);
	out = sh(i->worktree, "od -An -c crlf.txt | tr -s ' '");
	ck_assert_str_eq(out, " x \\n y \\n\n");
	free(out);
	session_info_free(i);

	/* An attribute in the tree: filters apply. */
	free(sh(f.repo, "echo '*.txt eol=crlf' > .gitattributes && "
			"git add -A && git commit -qm attributes"));
	i = start(&f, "attributes", false, NULL);
	out = sh(i->worktree, "od -An -c crlf.txt | tr -s ' '");
	ck_assert_str_eq(out, " x \\r \\n y \\r \\n\n");
	free(out);
	out = sh(i->worktree, "od -An -c plain.dat | tr -s ' '");
	ck_assert_str_eq(out, " x \\n y \\n\n");
	free(out);
	/* ... as git's own checkout has them. */
	out = sh(f.repo,
		 "git worktree add -q ../gitwt HEAD && "
		 "cmp ../gitwt/crlf.txt %s/crlf.txt && echo same",
		 i->worktree);
	ck_assert_str_eq(out, "same\n");
	free(out);
	session_info_free(i);

	/* No attribute file but core.autocrlf=true: filters apply too. */
	free(sh(f.repo, "git rm -q .gitattributes && git commit -qm no-attr && "
			"git config core.autocrlf true"));
	i = start(&f, "autocrlf", false, NULL);
	out = sh(i->worktree, "od -An -c crlf.txt | tr -s ' '");
	ck_assert_str_eq(out, " x \\r \\n y \\r \\n\n");
	free(out);
	session_info_free(i);
	fx_done(&f);
}
END_TEST

START_TEST(test_feature_names)
{
	static const char *const bad[] = {
	    "",
	    "-x",
	    ".x",
	    "a/b",
	    "a..b",
	    "x.lock",
	    "a b",
	    "a~1",
	    "a^",
	    "a:b",
	    "a?",
	    "a*",
	    "a[",
	    "@{x",
	    "x.",
	    "a\\b",
	    "\xc3\xa9",
	    "a\nb",
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
	};
	struct fx f;
	char token[SESSION_TOKEN_LEN + 1];
	struct session_info *i = NULL;

	ck_assert(session_feature_valid("fix-1.2_x"));
	ck_assert(session_feature_valid("A"));
	for (size_t k = 0; k < ARRAY_SIZE(bad); k++)
		ck_assert_msg(!session_feature_valid(bad[k]), "accepted %s",
			      bad[k]);
	ck_assert(!session_feature_valid(NULL));
	fx_init(&f, NULL);
	ck_assert_int_eq(
	    session_start(f.s, f.repo, "../../x", false, &i, token), -EINVAL);
	ck_assert_ptr_null(i);
	/* Nothing was created. */
	char *out = sh(f.repo, "git branch --list 'spd/*' | wc -l");
	ck_assert_str_eq(out, "0\n");
	free(out);
	fx_done(&f);
}
END_TEST

/* Whether the run's hidden list holds repo + rel. */
static bool hides(const struct session_run_paths *rp, const char *repo,
		  const char *rel)
{
	size_t n = strlen(repo);

	for (size_t i = 0; rp->hidden && rp->hidden[i]; i++)
		if (strncmp(rp->hidden[i], repo, n) == 0 &&
		    strcmp(rp->hidden[i] + n, rel) == 0)
			return true;
	return false;
}

START_TEST(test_in_place_dirty)
{
	struct fx f;
	char token[SESSION_TOKEN_LEN + 1];
	struct session_info *i = NULL;
	char *p;

	fx_init(&f, NULL);
	free(sh(f.repo, "echo junk > junk.txt"));
	ck_assert_int_eq(session_start(f.s, f.repo, "ip", true, &i, token),
			 -EBUSY);
	ck_assert_ptr_nonnull(strstr(session_store_error(f.s), "junk.txt"));
	ck_assert_ptr_nonnull(strstr(session_store_error(f.s), "untracked"));
	free(sh(f.repo, "rm junk.txt && echo changed > a.txt"));
	ck_assert_int_eq(session_start(f.s, f.repo, "ip", true, &i, token),
			 -EBUSY);
	ck_assert_ptr_nonnull(strstr(session_store_error(f.s), "a.txt"));
	free(sh(f.repo, "git checkout -q a.txt && echo s > s.txt && "
			"git add s.txt"));
	ck_assert_int_eq(session_start(f.s, f.repo, "ip", true, &i, token),
			 -EBUSY);
	ck_assert_ptr_nonnull(
	    strstr(session_store_error(f.s), "s.txt (staged)"));
	/* Only ignored files: clean. */
	free(sh(f.repo, "git rm -q --cached s.txt && rm s.txt && "
			"echo x > debug.log && "
			"printf '.env\\nkeys/\\n' >> .gitignore && "
			"mkdir -p keys conf && echo SECRET=1 > .env && "
			"echo k > keys/server.pem && echo t > conf/app.key && "
			"git add .gitignore conf/app.key && "
			"git commit -qm ignore"));
	i = start(&f, "ip", true, token);
	/* A command in place: .git read-only, the ignored credential files
	 * read as empty, a tracked key file left alone. */
	struct session_run_paths rp;
	ck_assert_int_eq(session_run_paths(f.s, i->id, &rp, NULL), 0);
	ck_assert(rp.in_place);
	ck_assert_str_eq(rp.workspace, f.repo);
	ck_assert_str_eq(rp.readonly[0], i->gitdir);
	ck_assert_ptr_null(rp.readonly[1]);
	size_t ne = 0;
	bool env = false, pem = false;
	for (; rp.empty_files[ne]; ne++) {
		char *e = rp.empty_files[ne];
		env = env || strcmp(e + strlen(f.repo), "/.env") == 0;
		pem =
		    pem || strcmp(e + strlen(f.repo), "/keys/server.pem") == 0;
		ck_assert_ptr_null(strstr(e, "app.key"));
	}
	/* keys/server.pem lies in an ignored directory, which the run
	 * hides whole: it needs no empty file of its own. */
	ck_assert_uint_eq(ne, 1);
	ck_assert(env && !pem);
	ck_assert(hides(&rp, f.repo, "/keys"));
	session_run_paths_free(&rp);
	ck_assert_int_eq(i->mode, SESSION_MODE_IN_PLACE);
	ck_assert_str_eq(i->worktree, f.repo);
	ck_assert_str_eq(i->branch, "main");
	/* Ending an in-place session removes nothing. */
	ck_assert_int_eq(session_end(f.s, i->id, false, NULL), 0);
	p = paths_join(f.repo, "a.txt");
	ck_assert(exists(p));
	free(p);
	session_info_free(i);
	fx_done(&f);
}
END_TEST

/* The walks so far after one more run's paths; *rp filled. */
static unsigned long paths_again(struct fx *f, const char *id,
				 struct session_run_paths *rp)
{
	session_run_paths_free(rp);
	ck_assert_int_eq(session_run_paths(f->s, id, rp, NULL), 0);
	return session_ignored_walks();
}

/*
 * In place, the checkout is walked for its ignored entries once.  After
 * that a name made or removed in a walked directory is one ignore check
 * (a file, or a directory git ignores), and only what the list cannot
 * follow walks again: a .gitignore rewritten in place (no name changes)
 * or made, .git/info/exclude, a walked directory gone.  A new directory
 * git does not ignore is walked alone.
 * A file's content changing is nothing.  Each check fails if the kept
 * list were used regardless, or if every change walked.
 */
START_TEST(test_in_place_hidden_kept)
{
	struct fx f;
	char token[SESSION_TOKEN_LEN + 1];
	struct session_info *i;
	struct session_run_paths rp = {0};
	unsigned long w;

	fx_init(&f, NULL);
	free(sh(f.repo, "printf '*.log\\ncache/\\n#padding-padding\\n' > "
			".gitignore && mkdir -p sub && echo s > sub/t.md && "
			"git add .gitignore sub && git commit -qm ignore && "
			"echo x > debug.log"));
	w = session_ignored_walks();
	i = start(&f, "kept", true, token);
	/* One walk at the start, whose watch the first run uses. */
	ck_assert_uint_eq(session_ignored_walks(), w + 1);
	ck_assert_uint_eq(paths_again(&f, i->id, &rp), w + 1);
	w++;
	ck_assert(hides(&rp, f.repo, "/debug.log"));
	ck_assert(!hides(&rp, f.repo, "/sub/t.md"));
	/* Nothing changed: no walk. */
	ck_assert_uint_eq(paths_again(&f, i->id, &rp), w);
	free(sh(f.repo, "echo more >> debug.log && echo t >> sub/t.md"));
	ck_assert_uint_eq(paths_again(&f, i->id, &rp), w);
	/* A new ignored file, deep; a new plain file; an ignored directory
	 * made: no walk, each seen. */
	free(sh(f.repo, "echo n > sub/new.log && echo k > keep.md && "
			"mkdir -p cache/x && echo c > cache/x/blob"));
	ck_assert_uint_eq(paths_again(&f, i->id, &rp), w);
	ck_assert(hides(&rp, f.repo, "/sub/new.log"));
	ck_assert(hides(&rp, f.repo, "/cache"));
	ck_assert(!hides(&rp, f.repo, "/cache/x"));
	ck_assert(!hides(&rp, f.repo, "/keep.md"));
	/* A name gone, and one moved: no walk. */
	free(sh(f.repo, "rm sub/new.log && mv keep.md sub/moved.log"));
	ck_assert_uint_eq(paths_again(&f, i->id, &rp), w);
	ck_assert(!hides(&rp, f.repo, "/sub/new.log"));
	ck_assert(hides(&rp, f.repo, "/sub/moved.log"));
	free(sh(f.repo, "mv sub/moved.log keep.md"));
	ck_assert_uint_eq(paths_again(&f, i->id, &rp), w);
	ck_assert(!hides(&rp, f.repo, "/sub/moved.log"));
	/* A .gitignore rewritten in place, the same size: keep.md becomes
	 * ignored; a walk. */
	free(sh(f.repo, "printf '*.log\\ncache/\\nkeep.md\\n#paddin\\n' > "
			".gitignore"));
	ck_assert_uint_eq(paths_again(&f, i->id, &rp), w + 1);
	ck_assert(hides(&rp, f.repo, "/keep.md"));
	/* .git/info/exclude: a walk. */
	free(sh(f.repo, "echo e > extra.txt"));
	ck_assert_uint_eq(paths_again(&f, i->id, &rp), w + 1);
	ck_assert(!hides(&rp, f.repo, "/extra.txt"));
	free(sh(f.repo, "mkdir -p .git/info && echo extra.txt >> "
			".git/info/exclude"));
	ck_assert_uint_eq(paths_again(&f, i->id, &rp), w + 2);
	ck_assert(hides(&rp, f.repo, "/extra.txt"));
	/* A directory git does not ignore, with ignored entries in it and
	 * below: walked alone, not the checkout, and each is hidden; then
	 * its own new files are seen, and so are a directory's moved in. */
	free(sh(f.repo, "mkdir -p fresh/deep/er && echo a > fresh/a.log && "
			"echo p > fresh/plain.md && echo z > "
			"fresh/deep/er/z.log && mkdir fresh/cache"));
	ck_assert_uint_eq(paths_again(&f, i->id, &rp), w + 2);
	ck_assert(hides(&rp, f.repo, "/fresh/a.log"));
	ck_assert(hides(&rp, f.repo, "/fresh/deep/er/z.log"));
	ck_assert(hides(&rp, f.repo, "/fresh/cache"));
	ck_assert(!hides(&rp, f.repo, "/fresh/plain.md"));
	free(sh(f.repo, "echo b > fresh/b.log && echo y > fresh/deep/y.log"));
	ck_assert_uint_eq(paths_again(&f, i->id, &rp), w + 2);
	ck_assert(hides(&rp, f.repo, "/fresh/b.log"));
	ck_assert(hides(&rp, f.repo, "/fresh/deep/y.log"));
	free(sh(f.repo,
		"mkdir -p ../outside/in && echo m > ../outside/in/m.log "
		"&& mv ../outside/in sub/in"));
	ck_assert_uint_eq(paths_again(&f, i->id, &rp), w + 2);
	ck_assert(hides(&rp, f.repo, "/sub/in/m.log"));
	/* A new directory with its own .gitignore: a walk of the checkout
	 * (its patterns are read afresh), which hides what it ignores. */
	free(sh(f.repo, "mkdir own && echo '*.md' > own/.gitignore && "
			"echo o > own/o.md"));
	ck_assert_uint_eq(paths_again(&f, i->id, &rp), w + 3);
	ck_assert(hides(&rp, f.repo, "/own/o.md"));
	/* A directory removed: a walk, and its entries are gone. */
	free(sh(f.repo, "rm -r fresh"));
	ck_assert_uint_eq(paths_again(&f, i->id, &rp), w + 4);
	ck_assert(!hides(&rp, f.repo, "/fresh/b.log"));
	session_run_paths_free(&rp);
	ck_assert_int_eq(session_end(f.s, i->id, false, NULL), 0);
	session_info_free(i);
	fx_done(&f);
}
END_TEST

/* fn(arg) on a thread of its own, as on spd's thread pool. */
static void on_thread(void *(*fn)(void *), void *arg)
{
	pthread_t t;

	ck_assert_int_eq(pthread_create(&t, NULL, fn, arg), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
}

static void *walk_thread(void *wk)
{
	session_walk_work(wk);
	return NULL;
}

static void walk_aside(struct session_walk *wk)
{
	on_thread(walk_thread, wk);
}

/*
 * In place, the walk a run's hidden list needs is done on another thread
 * (session_walk_begin/_work/_end, as cmd.run does on the thread pool):
 * none is asked for while the kept list serves; after a .gitignore is
 * rewritten one is, and session_run_paths after it walks nothing and
 * hides what the new pattern ignores.  What changes while the walk is
 * out is not lost: a second rewrite made then walks again at the run.
 * A session ended while its walk is out keeps nothing of it, and a store
 * closed meanwhile is freed by the walk's end (ASan: no leak, no use
 * after free).
 */
START_TEST(test_in_place_walk_aside)
{
	struct fx f;
	char token[SESSION_TOKEN_LEN + 1];
	struct session_info *i;
	struct session_run_paths rp = {0};
	struct session_walk *wk = NULL;
	unsigned long w;

	fx_init(&f, NULL);
	free(sh(f.repo,
		"printf '*.log\\n' > .gitignore && echo k > keep.md "
		"&& echo o > other.md && git add . && git commit -qm i"));
	i = start(&f, "aside", true, token);
	w = paths_again(&f, i->id, &rp);
	ck_assert_int_eq(session_walk_begin(f.s, i->id, &wk), 0);
	ck_assert(!hides(&rp, f.repo, "/keep.md"));
	free(sh(f.repo, "printf '*.log\\nkeep.md\\n' > .gitignore"));
	ck_assert_int_eq(session_walk_begin(f.s, i->id, &wk), 1);
	ck_assert_uint_eq(session_ignored_walks(), w);
	walk_aside(wk);
	ck_assert_uint_eq(session_ignored_walks(), w + 1);
	session_walk_end(wk, false);
	ck_assert_uint_eq(paths_again(&f, i->id, &rp), w + 1);
	ck_assert(hides(&rp, f.repo, "/keep.md"));
	ck_assert(!hides(&rp, f.repo, "/other.md"));
	/* A new directory git does not ignore (1,200 entries, made after
	 * the list was kept): walked alone on the other thread, not on the
	 * loop (session_walk_begin says 1) and not the whole checkout (no
	 * walk counted); what git ignores in it is hidden all the same. */
	free(sh(f.repo, "mkdir -p big/deep && cd big && seq 1200 | "
			"sed 's/.*/echo & > f&.md/' | sh && echo s > "
			"deep/s.log"));
	ck_assert_int_eq(session_walk_begin(f.s, i->id, &wk), 1);
	walk_aside(wk);
	session_walk_end(wk, false);
	ck_assert_uint_eq(paths_again(&f, i->id, &rp), w + 1);
	ck_assert(hides(&rp, f.repo, "/big/deep/s.log"));
	ck_assert(!hides(&rp, f.repo, "/big/f1.md"));
	/* Made while its walk is out: seen by the list's watch after, and
	 * walked alone in turn (a directory in it too). */
	free(sh(f.repo, "mkdir -p big2 && cd big2 && seq 400 | "
			"sed 's/.*/echo & > f&.md/' | sh && echo t > t.log"));
	ck_assert_int_eq(session_walk_begin(f.s, i->id, &wk), 1);
	free(sh(f.repo, "echo u > big/deep/u.log && mkdir big3 && echo v > "
			"big3/v.log && mkdir -p big4/sub && echo x > "
			"big4/sub/x.log"));
	walk_aside(wk);
	session_walk_end(wk, false);
	ck_assert_int_eq(session_walk_begin(f.s, i->id, &wk), 1);
	walk_aside(wk);
	session_walk_end(wk, false);
	ck_assert_uint_eq(paths_again(&f, i->id, &rp), w + 1);
	ck_assert(hides(&rp, f.repo, "/big2/t.log"));
	ck_assert(hides(&rp, f.repo, "/big/deep/u.log"));
	ck_assert(hides(&rp, f.repo, "/big3/v.log"));
	ck_assert(hides(&rp, f.repo, "/big4/sub/x.log"));
	free(sh(f.repo, "rm -r big2 big3 big4"));
	ck_assert_int_eq(session_walk_begin(f.s, i->id, &wk), 1);
	walk_aside(wk);
	session_walk_end(wk, false);
	w++; /* a walked directory gone: the checkout's walk */
	free(sh(f.repo, "git add big && git commit -qm big"));
	/* Rewritten again while the walk is out: seen by its watch. */
	free(sh(f.repo, "printf '*.log\\n' > .gitignore"));
	ck_assert_int_eq(session_walk_begin(f.s, i->id, &wk), 1);
	walk_aside(wk);
	free(sh(f.repo, "printf '*.log\\nother.md\\n' > .gitignore"));
	session_walk_end(wk, false);
	ck_assert_uint_eq(paths_again(&f, i->id, &rp), w + 3);
	ck_assert(hides(&rp, f.repo, "/other.md"));
	/* Ignored only later, it stops being so with its pattern. */
	ck_assert(!hides(&rp, f.repo, "/keep.md"));
	/* Ended while a walk is out: nothing kept, nothing run. */
	free(sh(f.repo, "printf '*.log\\nx\\n' > .gitignore"));
	ck_assert_int_eq(session_walk_begin(f.s, i->id, &wk), 1);
	ck_assert_int_eq(session_end(f.s, i->id, false, NULL), 0);
	walk_aside(wk);
	session_walk_end(wk, false);
	ck_assert_int_eq(session_walk_begin(f.s, i->id, &wk), 0);
	session_info_free(i);
	/* The store closed while a walk is out: its end frees the store. */
	free(sh(f.repo, "git checkout -q .gitignore"));
	i = start(&f, "aside2", true, token);
	free(sh(f.repo, "printf '*.log\\ny\\n' > .gitignore"));
	ck_assert_int_eq(session_walk_begin(f.s, i->id, &wk), 1);
	session_store_free(f.s);
	walk_aside(wk);
	session_walk_end(wk, false);
	f.s = NULL;
	session_run_paths_free(&rp);
	session_info_free(i);
	fx_done(&f);
}
END_TEST

/*
 * A .gitignore rewritten during each walk on the other thread: the last
 * walk a run may wait for (session_walk_end's serve, agent.c's
 * RUN_WALKS_MAX) serves that run with its list, and session_run_paths
 * walks nothing on the loop; the list is kept, and the next run, which
 * the rewrite made during the walk is not lost on, walks again and
 * hides what the newest pattern ignores.  Without serve the run's paths
 * walk on the loop (the check before it), as they did for every run.
 */
START_TEST(test_in_place_walk_served)
{
	struct fx f;
	char token[SESSION_TOKEN_LEN + 1];
	struct session_info *i;
	struct session_run_paths rp = {0};
	struct session_walk *wk = NULL;
	unsigned long w;

	fx_init(&f, NULL);
	free(sh(f.repo, "printf '*.log\\n' > .gitignore && echo k > keep.md "
			"&& echo o > other.md && git add . && git commit -qm i "
			"&& echo x > x.log"));
	i = start(&f, "served", true, token);
	w = paths_again(&f, i->id, &rp);
	/* Not served: the run's paths walk on the loop. */
	free(sh(f.repo, "printf '*.log\\nkeep.md\\n' > .gitignore"));
	ck_assert_int_eq(session_walk_begin(f.s, i->id, &wk), 1);
	walk_aside(wk);
	free(sh(f.repo, "printf '*.log\\nother.md\\n' > .gitignore"));
	session_walk_end(wk, false);
	ck_assert_uint_eq(paths_again(&f, i->id, &rp), w + 2);
	ck_assert(hides(&rp, f.repo, "/other.md"));
	w += 2;
	/* Served: the walk's list, no walk on the loop. */
	free(sh(f.repo, "printf '*.log\\nkeep.md\\n' > .gitignore"));
	ck_assert_int_eq(session_walk_begin(f.s, i->id, &wk), 1);
	walk_aside(wk);
	ck_assert_uint_eq(session_ignored_walks(), w + 1);
	free(sh(f.repo, "printf '*.log\\nother.md\\n' > .gitignore"));
	session_walk_end(wk, true);
	ck_assert_int_eq(session_walk_begin(f.s, i->id, &wk), 0);
	ck_assert_uint_eq(paths_again(&f, i->id, &rp), w + 1);
	ck_assert(hides(&rp, f.repo, "/keep.md"));
	ck_assert(!hides(&rp, f.repo, "/other.md"));
	ck_assert(hides(&rp, f.repo, "/x.log"));
	session_walk_forget(f.s, i->id);
	/* The rewrite during the walk is not lost: the next run walks. */
	ck_assert_int_eq(session_walk_begin(f.s, i->id, &wk), 1);
	walk_aside(wk);
	session_walk_end(wk, false);
	ck_assert_uint_eq(paths_again(&f, i->id, &rp), w + 2);
	ck_assert(hides(&rp, f.repo, "/other.md"));
	ck_assert(!hides(&rp, f.repo, "/keep.md"));
	/* A served list a run did not take is not served to a later one. */
	free(sh(f.repo, "printf '*.log\\nkeep.md\\n' > .gitignore"));
	ck_assert_int_eq(session_walk_begin(f.s, i->id, &wk), 1);
	walk_aside(wk);
	free(sh(f.repo, "printf '*.log\\nother.md\\n' > .gitignore"));
	session_walk_end(wk, true);
	session_walk_forget(f.s, i->id);
	ck_assert_uint_eq(paths_again(&f, i->id, &rp), w + 4);
	ck_assert(hides(&rp, f.repo, "/other.md"));
	session_run_paths_free(&rp);
	session_info_free(i);
	fx_done(&f);
}
END_TEST

/*
 * In place, a .gitignore that is a link (to a file outside the
 * checkout here) cannot be followed by any watch, so no list is kept:
 * each run walks.  That walk is on the other thread all the same, and
 * the run that asked for it gets its list (session_run_paths walks
 * nothing more, and hides what the link's patterns ignore); a later run
 * walks again, and a list left by a run that did not take it is
 * forgotten.  Before, the walk on the other thread was lost and
 * session_run_paths walked again on the loop, every run.
 */
START_TEST(test_in_place_linked_gitignore)
{
	struct fx f;
	char token[SESSION_TOKEN_LEN + 1];
	struct session_info *i;
	struct session_run_paths rp = {0};
	struct session_walk *wk = NULL;
	unsigned long w;

	fx_init(&f, NULL);
	free(sh(f.repo,
		"git rm -q .gitignore && printf '*.log\\n' > "
		"../patterns && ln -s "
		"\"$PWD/../patterns\" .gitignore && echo k > keep.md && "
		"echo l > l.log && git add .gitignore keep.md && "
		"git commit -qm i"));
	i = start(&f, "linked", true, token);
	for (int run = 0; run < 2; run++) {
		ck_assert_int_eq(session_walk_begin(f.s, i->id, &wk), 1);
		w = session_ignored_walks();
		walk_aside(wk);
		ck_assert_uint_eq(session_ignored_walks(), w + 1);
		session_walk_end(wk, false);
		/* Its list waits for this run: no other walk is asked for. */
		ck_assert_int_eq(session_walk_begin(f.s, i->id, &wk), 0);
		ck_assert_uint_eq(paths_again(&f, i->id, &rp), w + 1);
		ck_assert(hides(&rp, f.repo, "/l.log"));
		ck_assert(!hides(&rp, f.repo, "/keep.md"));
		session_walk_forget(f.s, i->id);
	}
	/* A list no run took is not served to a later one. */
	ck_assert_int_eq(session_walk_begin(f.s, i->id, &wk), 1);
	walk_aside(wk);
	session_walk_end(wk, false);
	session_walk_forget(f.s, i->id);
	ck_assert_int_eq(session_walk_begin(f.s, i->id, &wk), 1);
	walk_aside(wk);
	session_walk_end(wk, false);
	session_walk_forget(f.s, i->id);
	w = session_ignored_walks();
	ck_assert_uint_eq(paths_again(&f, i->id, &rp), w + 1);
	session_run_paths_free(&rp);
	session_info_free(i);
	fx_done(&f);
}
END_TEST

/* A secret scan as spd's (session_store_set_scanner): what it holds is
 * counted, so that every hold is seen released. */
static int scan_holds;

static void *scan_hold(void *data)
{
	scan_holds++;
	return data;
}

static void scan_release(void *held)
{
	(void)held;
	scan_holds--;
}

static int scan_secret(void *held, const char *diff, char *where, size_t wlen)
{
	const char *p = strstr(diff, "\n+SECRETVALUE");

	ck_assert_str_eq(held, "set");
	if (!p)
		return 0;
	snprintf(where, wlen, "s.txt:1");
	return 1;
}

static void *sync_thread(void *j)
{
	session_sync_work(j);
	return NULL;
}

static void sync_aside(struct session_syncjob *j)
{
	on_thread(sync_thread, j);
}

static char *branch_tip(struct fx *f, const char *branch)
{
	char *out = sh(f->repo, "git rev-parse %s", branch);

	out[strcspn(out, "\n")] = '\0';
	return out;
}

/*
 * At a run's end the agent's commits are taken on another thread
 * (session_sync_begin/_work/_end, as agent.c does on the thread pool):
 * nothing is begun when the agent did not commit; while one is out a
 * second is refused (-EBUSY: the run waits) and session_sync takes
 * nothing, the branch staying where it was until the end moves it to
 * the agent's tip and journals it.  A secret in a commit ends the
 * attempt and its object never reaches the operator's repository; a
 * store closed while a sync is out is freed by its end (ASan: no leak,
 * no use after free).  The scan's state is held for the sync and let
 * go of every time.
 */
START_TEST(test_sync_aside)
{
	struct fx f;
	struct session_info *i, *k;
	struct session_syncjob *j = NULL, *j2 = NULL;
	char where[1100] = "", *base, *tip, *now, *blob, *out;

	fx_init(&f, NULL);
	session_store_set_scanner(f.s, scan_secret, scan_hold, scan_release,
				  "set");
	i = start(&f, "sync", false, NULL);
	base = branch_tip(&f, "spd/sync");
	/* Nothing committed: nothing goes to a thread. */
	ck_assert_int_eq(session_sync_begin(f.s, i->id, &j), 0);
	ck_assert_ptr_null(j);
	free(sh(i->worktree, "echo b > b.txt && git add b.txt && "
			     "git commit -qm b"));
	tip = sh(i->worktree, "git rev-parse HEAD");
	tip[strcspn(tip, "\n")] = '\0';
	ck_assert_int_eq(session_sync_begin(f.s, i->id, &j), 1);
	ck_assert_int_eq(session_sync_begin(f.s, i->id, &j2), -EBUSY);
	ck_assert_int_eq(session_sync(f.s, i->id, where, sizeof(where)), 0);
	now = branch_tip(&f, "spd/sync");
	ck_assert_str_eq(now, base);
	free(now);
	sync_aside(j);
	now = branch_tip(&f, "spd/sync");
	ck_assert_str_eq(now, base); /* the loop moves it */
	free(now);
	ck_assert_int_eq(session_sync_end(j, where, sizeof(where)), 1);
	now = branch_tip(&f, "spd/sync");
	ck_assert_str_eq(now, tip);
	free(now);
	ck_assert_str_eq(f.last_kind, "session.commit");
	ck_assert_int_eq(session_sync_begin(f.s, i->id, &j), 0);

	/* A secret: the attempt ends, the blob stays out. */
	free(sh(i->worktree, "echo SECRETVALUE > s.txt && git add s.txt && "
			     "git commit -qm s"));
	blob = sh(i->worktree, "git rev-parse HEAD:s.txt");
	blob[strcspn(blob, "\n")] = '\0';
	ck_assert_int_eq(session_sync_begin(f.s, i->id, &j), 1);
	sync_aside(j);
	ck_assert_int_eq(session_sync_end(j, where, sizeof(where)), -EACCES);
	ck_assert_ptr_nonnull(strstr(where, "s.txt:1"));
	ck_assert_int_eq(session_usable(f.s, i->id), -ECANCELED);
	now = branch_tip(&f, "spd/sync");
	ck_assert_str_eq(now, tip);
	free(now);
	out = sh(f.repo, "git cat-file -e %s 2>/dev/null || echo absent", blob);
	ck_assert_str_eq(out, "absent\n");
	free(out);
	ck_assert_int_eq(scan_holds, 0);

	/* The store closed while a sync is out: its end frees it. */
	k = start(&f, "sync2", false, NULL);
	free(sh(k->worktree, "echo c > c.txt && git add c.txt && "
			     "git commit -qm c"));
	ck_assert_int_eq(session_sync_begin(f.s, k->id, &j), 1);
	session_store_free(f.s);
	sync_aside(j);
	ck_assert_int_eq(session_sync_end(j, where, sizeof(where)), -ESHUTDOWN);
	f.s = NULL;
	ck_assert_int_eq(scan_holds, 0);
	free(base);
	free(tip);
	free(blob);
	session_info_free(i);
	session_info_free(k);
	fx_done(&f);
}
END_TEST

/*
 * In place, what was ignored when the session started stays hidden from
 * runs and refused by fs.read whatever .gitignore says later (an agent
 * can write .gitignore: a line taken out, or a nested one saying
 * "!x.log"), also after a restart of spd; what is ignored only later is
 * hidden too, and stops being so with its pattern.
 */
START_TEST(test_in_place_ignored_at_start)
{
	struct fx f;
	char token[SESSION_TOKEN_LEN + 1];
	struct session_info *i;
	struct session_run_paths rp = {0};
	char **then;

	fx_init(&f, NULL);
	free(sh(f.repo, "mkdir -p keys.log && echo k > keys.log/server.pem && "
			"echo x > secret.log && mkdir -p src/deep && "
			"echo y > src/deep/inner.log"));
	i = start(&f, "then", true, token);
	then = session_hidden_at_start(f.s, i->id);
	ck_assert_ptr_nonnull(then);
	ck_assert_ptr_nonnull(then[0]);
	strv_free_array(then);
	paths_again(&f, i->id, &rp);
	ck_assert(hides(&rp, f.repo, "/secret.log"));
	ck_assert(hides(&rp, f.repo, "/src/deep/inner.log"));
	/* .gitignore emptied; a nested one un-ignores the rest; a file made
	 * now under a pattern added now. */
	free(sh(f.repo, "echo '*.tmp' > .gitignore && printf '!*.log\\n' > "
			"src/.gitignore && echo t > now.tmp"));
	paths_again(&f, i->id, &rp);
	ck_assert(hides(&rp, f.repo, "/secret.log"));
	ck_assert(hides(&rp, f.repo, "/src/deep/inner.log"));
	ck_assert(hides(&rp, f.repo, "/now.tmp"));
	/* After a restart, from the record. */
	session_run_paths_free(&rp);
	session_store_free(f.s);
	ck_assert_int_eq(session_store_open(f.state, &f.s), 0);
	session_store_set_journal(f.s, jhook, &f);
	ck_assert_int_eq(session_usable(f.s, i->id), 0);
	paths_again(&f, i->id, &rp);
	ck_assert(hides(&rp, f.repo, "/secret.log"));
	ck_assert(hides(&rp, f.repo, "/src/deep/inner.log"));
	ck_assert(hides(&rp, f.repo, "/now.tmp"));
	/* A credential file in an ignored directory is covered by the
	 * directory's cover, not given an empty file of its own. */
	ck_assert(hides(&rp, f.repo, "/keys.log"));
	for (size_t k = 0; rp.empty_files[k]; k++)
		ck_assert_msg(!strstr(rp.empty_files[k], "/keys.log/"), "%s",
			      rp.empty_files[k]);
	/* A pattern of now taken away again: not hidden any more. */
	free(sh(f.repo, "echo '' > .gitignore"));
	paths_again(&f, i->id, &rp);
	ck_assert(!hides(&rp, f.repo, "/now.tmp"));
	ck_assert(hides(&rp, f.repo, "/secret.log"));
	/* One recorded at the start and gone since is not in the list:
	 * sandboxd would make it (as an empty directory) on the host. */
	free(sh(f.repo, "rm secret.log"));
	paths_again(&f, i->id, &rp);
	ck_assert(!hides(&rp, f.repo, "/secret.log"));
	ck_assert(hides(&rp, f.repo, "/src/deep/inner.log"));
	session_run_paths_free(&rp);
	ck_assert_int_eq(session_end(f.s, i->id, false, NULL), 0);
	session_info_free(i);
	fx_done(&f);
}
END_TEST

/* In place, a checkout with more top-most ignored entries than a run can
 * hide is refused at the start, with what to do instead; nothing of the
 * session is left behind. */
START_TEST(test_in_place_too_many_ignored)
{
	struct fx f;
	char token[SESSION_TOKEN_LEN + 1];
	struct session_info *i = NULL, **list = NULL;
	size_t n = 9;

	fx_init(&f, NULL);
	free(sh(f.repo, "for k in $(seq 1 60); do echo x > f$k.log; done"));
	ck_assert_int_eq(session_start(f.s, f.repo, "many", true, &i, token),
			 -E2BIG);
	ck_assert_ptr_nonnull(strstr(session_store_error(f.s), "top-most"));
	ck_assert_ptr_nonnull(strstr(session_store_error(f.s), "worktree"));
	ck_assert_int_eq(session_list(f.s, &list, &n), 0);
	ck_assert_uint_eq(n, 0);
	session_info_list_free(list, n);
	free(sh(f.repo, "rm f*.log && mkdir logs && for k in $(seq 1 60); do "
			"echo x > logs/f$k.log; done && echo 'logs/' >> "
			".gitignore && git commit -qam logs"));
	i = start(&f, "many", true, token);
	session_info_free(i);
	/* More credential-looking files than SESSION_EMPTY_FILES_MAX inside
	 * an ignored directory (a package's test keys in node_modules/):
	 * the directory is hidden whole, so the start is not refused. */
	free(sh(f.repo, "mkdir -p node_modules/pkg/keys && for k in $(seq 1 "
			"60); do echo k > node_modules/pkg/keys/k$k.pem; done "
			"&& echo 'node_modules/' >> .gitignore && git commit "
			"-qam nm"));
	i = start(&f, "pems", true, token);
	{
		struct session_run_paths rp;

		ck_assert_int_eq(session_run_paths(f.s, i->id, &rp, NULL), 0);
		ck_assert(hides(&rp, f.repo, "/node_modules"));
		ck_assert_ptr_null(rp.empty_files[0]);
		session_run_paths_free(&rp);
	}
	session_info_free(i);
	fx_done(&f);
}
END_TEST

/* As root, CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH out of the effective
 * set (on false) or back: a directory of mode 000 is then unreadable to
 * this process, as it is to spd running as its owner. */
static void dac_caps(bool on)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	uint32_t bits = (1u << CAP_DAC_OVERRIDE) | (1u << CAP_DAC_READ_SEARCH);

	if (geteuid() != 0)
		return;
	ck_assert_int_eq(syscall(SYS_capget, &h, d), 0);
	if (on)
		d[0].effective |= bits & d[0].permitted;
	else
		d[0].effective &= ~bits;
	ck_assert_int_eq(syscall(SYS_capset, &h, d), 0);
}

/* Whether rp's empty files hold repo/rel. */
static bool empties(const struct session_run_paths *rp, const char *repo,
		    const char *rel)
{
	size_t n = strlen(repo);

	for (size_t i = 0; rp->empty_files && rp->empty_files[i]; i++)
		if (strncmp(rp->empty_files[i], repo, n) == 0 &&
		    strcmp(rp->empty_files[i] + n, rel) == 0)
			return true;
	return false;
}

/*
 * In place, the scan for ignored credential files fails closed.  One 40
 * directories down is found and reads as empty in runs (the scan used to
 * stop at 32 and skip it silently).  A tree deeper than the scan goes, a
 * directory it cannot read and a path longer than it reads each refuse
 * the start, naming the place and why (each was skipped, the start let
 * go on with whatever was there unsearched); nothing of the session is
 * left.
 */
START_TEST(test_in_place_secret_scan_fails_closed)
{
	struct fx f;
	char token[SESSION_TOKEN_LEN + 1];
	struct session_info *i = NULL, **list = NULL;
	struct session_run_paths rp = {0};
	char deep[256] = "", deeper[256] = "", name[201];
	const char *err;
	int dfd;
	size_t n = 9;

	for (int k = 0; k < 40; k++)
		strcat(deep, "d/");
	for (int k = 0; k < 70; k++)
		strcat(deeper, "e/");
	fx_init(&f, NULL);
	free(sh(f.repo,
		"printf '.env\\n' >> .gitignore && git commit -qam "
		"env && mkdir -p %s && echo SECRET=1 > %s.env",
		deep, deep));
	i = start(&f, "deep", true, token);
	ck_assert_int_eq(session_run_paths(f.s, i->id, &rp, NULL), 0);
	deep[strlen(deep) - 1] = '\0';
	{
		char rel[300];

		snprintf(rel, sizeof(rel), "/%s/.env", deep);
		ck_assert_msg(empties(&rp, f.repo, rel),
			      "the credential file 40 directories down is "
			      "not made empty");
	}
	session_run_paths_free(&rp);
	ck_assert_int_eq(session_end(f.s, i->id, false, NULL), 0);
	session_info_free(i);
	free(sh(f.repo, "rm -rf d"));

	/* Deeper than the scan goes. */
	free(sh(f.repo, "mkdir -p %s && echo SECRET=1 > %s.env", deeper,
		deeper));
	ck_assert_int_eq(session_start(f.s, f.repo, "deeper", true, &i, token),
			 -E2BIG);
	err = session_store_error(f.s);
	ck_assert_msg(strstr(err, "deeper than 64 directories") &&
			  strstr(err, "/e/e/e/") && strstr(err, "worktree"),
		      "%s", err);
	free(sh(f.repo, "rm -rf e"));

	/* A directory the scan cannot read. */
	free(sh(f.repo, "mkdir -p conf/locked && echo SECRET=1 > "
			"conf/locked/.env && chmod 000 conf/locked"));
	dac_caps(false);
	int r = session_start(f.s, f.repo, "locked", true, &i, token);
	dac_caps(true);
	ck_assert_int_eq(r, -EACCES);
	err = session_store_error(f.s);
	ck_assert_msg(strstr(err, "/conf/locked: ") &&
			  strstr(err, strerror(EACCES)),
		      "%s", err);
	free(sh(f.repo, "chmod 755 conf/locked && rm -rf conf"));

	/* A path longer than the scan reads (GUARD_PATH_MAX). */
	memset(name, '0', 200);
	name[200] = '\0';
	dfd = open(f.repo, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (int k = 0; k < 21; k++) {
		int next;

		ck_assert_int_eq(mkdirat(dfd, name, 0755), 0);
		next = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		ck_assert_int_ge(next, 0);
		close(dfd);
		dfd = next;
	}
	r = openat(dfd, ".env", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	ck_assert_int_ge(r, 0);
	close(r);
	close(dfd);
	r = session_start(f.s, f.repo, "long", true, &i, token);
	ck_assert_int_eq(r, -ENAMETOOLONG);
	err = session_store_error(f.s);
	ck_assert_msg(strstr(err, "cannot look for credential files in") &&
			  strstr(err, "0000/0000"),
		      "%s", err);
	ck_assert_int_eq(session_list(f.s, &list, &n), 0);
	ck_assert_uint_eq(n, 1); /* the first, ended */
	session_info_list_free(list, n);
	fx_done(&f);
}
END_TEST

/*
 * In place, an entry ignored at the start by an anchored pattern
 * ("/config/secrets.yml") that is moved out from under it with its
 * directory ("config" renamed "cfg", which a run can do: only the entry
 * itself is a mount point) stays hidden where it went, and after a
 * restart too; a file put back at the old path is hidden as well.  Fails
 * if the record only knew paths.
 */
START_TEST(test_in_place_ignored_moved)
{
	struct fx f;
	char token[SESSION_TOKEN_LEN + 1];
	struct session_info *i;
	struct session_run_paths rp = {0};

	fx_init(&f, NULL);
	free(sh(f.repo, "printf '/config/secrets.yml\\n' >> .gitignore && "
			"mkdir -p config && echo 'name: x' > config/app.yml && "
			"git add .gitignore config && git commit -qm conf && "
			"echo 'password: s3cret' > config/secrets.yml"));
	i = start(&f, "moved", true, token);
	paths_again(&f, i->id, &rp);
	ck_assert(hides(&rp, f.repo, "/config/secrets.yml"));
	free(sh(f.repo, "mv config cfg"));
	paths_again(&f, i->id, &rp);
	ck_assert(hides(&rp, f.repo, "/cfg/secrets.yml"));
	ck_assert(!hides(&rp, f.repo, "/config/secrets.yml"));
	ck_assert_str_eq(f.last_kind, "session.ignored-moved");
	/* What fs.read refuses follows it too. */
	{
		char **then = session_hidden_at_start(f.s, i->id);
		bool moved = false;

		ck_assert_ptr_nonnull(then);
		for (size_t k = 0; then[k]; k++)
			moved = moved || strstr(then[k], "/cfg/secrets.yml");
		ck_assert(moved);
		strv_free_array(then);
	}
	/* After a restart, from the rewritten record. */
	session_run_paths_free(&rp);
	session_store_free(f.s);
	ck_assert_int_eq(session_store_open(f.state, &f.s), 0);
	session_store_set_journal(f.s, jhook, &f);
	paths_again(&f, i->id, &rp);
	ck_assert(hides(&rp, f.repo, "/cfg/secrets.yml"));
	/* Moved back, and something new put where it was: both hidden. */
	free(sh(f.repo, "mkdir -p config && mv cfg/secrets.yml config/ && "
			"echo new > cfg/secrets.yml"));
	paths_again(&f, i->id, &rp);
	ck_assert(hides(&rp, f.repo, "/config/secrets.yml"));
	ck_assert(hides(&rp, f.repo, "/cfg/secrets.yml"));
	session_run_paths_free(&rp);
	ck_assert_int_eq(session_end(f.s, i->id, false, NULL), 0);
	session_info_free(i);
	fx_done(&f);
}
END_TEST

START_TEST(test_guard_ends_attempt)
{
	static const char *const argv[] = {"sh", "-c", "x", NULL};
	struct fx f;
	struct guard_finding gf;
	struct session_info *i, *j, *k;
	char token[SESSION_TOKEN_LEN + 1], id[SESSION_ID_LEN + 1];

	fx_init(&f, NULL);
	i = start(&f, "g1", false, token);
	j = start(&f, "g2", false, NULL);
	k = start(&f, "g3", false, NULL);
	/* The agent commits on its own branch: not a finding. */
	free(sh(i->worktree, "echo more >> a.txt && git commit -qam more"));
	memset(&gf, 0, sizeof(gf));
	ck_assert_msg(session_record_command(f.s, i->id, argv, 0, &gf) == 0,
		      "finding %s %s", gf.path, gf.what);
	/* ... and adds a hook to the main repository: GIT-CHANGED. */
	free(sh(f.repo, "echo evil > .git/hooks/pre-commit"));
	ck_assert_int_eq(session_record_command(f.s, i->id, argv, 0, &gf), 1);
	ck_assert_int_eq(gf.set, GUARD_SET_GIT);
	ck_assert_str_eq(gf.path, ".git/hooks/pre-commit");
	ck_assert_str_eq(f.last_kind, "session.finding");
	struct session_info *now = NULL;
	ck_assert_int_eq(session_get(f.s, i->id, &now), 0);
	ck_assert_int_eq(now->state, SESSION_ATTEMPT_ENDED);
	ck_assert_str_eq(now->finding_code, "GIT-CHANGED");
	ck_assert_str_eq(now->finding_path, ".git/hooks/pre-commit");
	session_info_free(now);
	/* Every later call of that session is refused. */
	ck_assert_int_eq(session_record_command(f.s, i->id, argv, 0, NULL),
			 -ECANCELED);
	ck_assert_int_eq(session_usable(f.s, i->id), -ECANCELED);
	struct session_verify_plan *plan = NULL;
	ck_assert_int_eq(session_verify_plan(f.s, i->id, &plan), -ECANCELED);
	/* Its token still names it, so the refusal can say ATTEMPT-ENDED. */
	ck_assert_int_eq(session_authenticate(f.s, token, id), 0);
	ck_assert_str_eq(id, i->id);

	/* The other sessions see the same hook too (it is in their guarded
	 * set), and .spd.conf edited in a worktree is INTEGRITY. */
	free(sh(k->worktree, "echo '[verify]' >> .spd.conf"));
	ck_assert_int_eq(session_record_command(f.s, k->id, argv, 0, &gf), 1);
	ck_assert_int_eq(gf.set, GUARD_SET_GIT);
	free(sh(f.repo, "rm .git/hooks/pre-commit"));
	ck_assert_int_eq(session_end(f.s, j->id, false, NULL), 0);
	session_info_free(j);
	j = start(&f, "g4", false, NULL);
	free(sh(j->worktree, "echo '[verify]' >> .spd.conf"));
	ck_assert_int_eq(session_record_command(f.s, j->id, argv, 0, &gf), 1);
	ck_assert_int_eq(gf.set, GUARD_SET_PROTECTED);
	ck_assert_str_eq(gf.path, ".spd.conf");
	ck_assert_int_eq(session_get(f.s, j->id, &now), 0);
	ck_assert_str_eq(now->finding_code, "INTEGRITY");
	session_info_free(now);
	session_info_free(i);
	session_info_free(j);
	session_info_free(k);
	fx_done(&f);
}
END_TEST

START_TEST(test_guard_branch_moved)
{
	static const char *const argv[] = {"true", NULL};
	struct fx f;
	struct guard_finding gf;
	struct session_info *i;

	fx_init(&f, NULL);
	i = start(&f, "b", false, NULL);
	free(sh(f.repo, "git tag -f v1 HEAD && git commit -q --allow-empty "
			"-m x && git tag -f v1 HEAD"));
	ck_assert_int_eq(session_record_command(f.s, i->id, argv, 0, &gf), 1);
	ck_assert_int_eq(gf.set, GUARD_SET_GIT);
	/* main moved first in path order, then the tag. */
	ck_assert_str_eq(gf.path, ".git/refs/heads/main");
	session_info_free(i);
	fx_done(&f);
}
END_TEST

START_TEST(test_heldout)
{
	struct fx f;
	struct session_info *i;
	char *src, *dst, *hd, *p, *out;

	fx_init(&f, NULL);
	i = start(&f, "h", false, NULL);
	hd = paths_join(f.root, "hidden");
	mkdir(hd, 0700);
	p = paths_join(hd, "secret_test.sh");
	test_write_file(p, "#!/bin/sh\nexit 0\n");
	chmod(p, 0755);
	free(p);
	p = paths_join(hd, "sub");
	mkdir(p, 0700);
	free(p);
	p = paths_join(hd, "sub/data.txt");
	test_write_file(p, "expected\n");
	free(p);
	ck_assert_int_eq(session_heldout(f.s, i->id, hd), 2);
	ck_assert_int_eq(session_heldout_overlay(f.s, i->id, &src, &dst), 0);
	p = paths_join(f.state, "heldout");
	ck_assert(strncmp(src, p, strlen(p)) == 0);
	free(p);
	p = paths_join(src, "sub/data.txt");
	char *txt = test_read_file(p);
	ck_assert_str_eq(txt, "expected\n");
	free(txt);
	free(p);
	struct stat st;
	ck_assert_int_eq(stat(src, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0700);
	/* The mount point is inside the worktree, but nothing was written
	 * there: no file of the sealed set exists anywhere in it. */
	ck_assert(strncmp(dst, i->worktree, strlen(i->worktree)) == 0);
	ck_assert(!exists(dst));
	out = sh(i->worktree, "find . -name 'secret_test*' -o -name "
			      "data.txt | wc -l && git status --porcelain");
	ck_assert_str_eq(out, "0\n");
	free(out);
	/* A symlink in the sealed dir could lead anywhere: refused. */
	p = paths_join(hd, "link");
	ck_assert_int_eq(symlink("/etc/passwd", p), 0);
	free(p);
	ck_assert_int_eq(session_heldout(f.s, i->id, hd), -EINVAL);
	/* ... and the earlier set is kept. */
	p = paths_join(src, "secret_test.sh");
	ck_assert(exists(p));
	free(p);
	ck_assert_int_eq(session_end(f.s, i->id, false, NULL), 0);
	ck_assert(!exists(src));
	free(src);
	free(dst);
	free(hd);
	session_info_free(i);
	fx_done(&f);
}
END_TEST

START_TEST(test_tokens)
{
	struct fx f;
	struct session_info *a, *b;
	char ta[SESSION_TOKEN_LEN + 1], tb[SESSION_TOKEN_LEN + 1];
	char id[SESSION_ID_LEN + 1], wrong[SESSION_TOKEN_LEN + 1];

	fx_init(&f, NULL);
	a = start(&f, "ta", false, ta);
	b = start(&f, "tb", false, tb);
	ck_assert_str_ne(ta, tb);
	ck_assert_int_eq(session_authenticate(f.s, ta, id), 0);
	ck_assert_str_eq(id, a->id);
	ck_assert_int_eq(session_authenticate(f.s, tb, id), 0);
	ck_assert_str_eq(id, b->id);
	memcpy(wrong, ta, sizeof(wrong));
	wrong[10] = wrong[10] == 'a' ? 'b' : 'a';
	ck_assert_int_eq(session_authenticate(f.s, wrong, id), -SPD_EPERM);
	ck_assert_int_eq(session_authenticate(f.s, "short", id), -SPD_EPERM);
	ck_assert_int_eq(session_authenticate(f.s, NULL, id), -SPD_EPERM);
	ck_assert_int_eq(session_authenticate(f.s, "", id), -SPD_EPERM);
	/* The token is not stored anywhere in the state dir. */
	char *out = sh(f.state, "grep -r -l -a '%s' . | wc -l", ta);
	ck_assert_str_eq(out, "0\n");
	free(out);
	/* It survives a restart of the store; an ended session's does
	 * not authenticate. */
	session_store_free(f.s);
	ck_assert_int_eq(session_store_open(f.state, &f.s), 0);
	ck_assert_int_eq(session_authenticate(f.s, ta, id), 0);
	ck_assert_str_eq(id, a->id);
	ck_assert_int_eq(session_end(f.s, a->id, false, NULL), 0);
	ck_assert_int_eq(session_authenticate(f.s, ta, id), -SPD_EPERM);
	ck_assert_int_eq(session_authenticate(f.s, tb, id), 0);
	session_info_free(a);
	session_info_free(b);
	fx_done(&f);
}
END_TEST

/* Runs sql on the store's database beside the store (as another process
 * would). */
static void db_sql(const struct fx *f, const char *sql)
{
	sqlite3 *db;
	char *path = paths_join(f->state, "sessions.db");

	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	ck_assert_msg(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK,
		      "%s: %s", sql, sqlite3_errmsg(db));
	sqlite3_close(db);
	free(path);
}

/* A guarded input changed while the store was closed: on reopen the
 * session is attempt-ended, and the finding reaches the journal once the
 * store has one (spd sets it after the store opened). */
START_TEST(test_changed_while_stopped)
{
	struct fx f;
	struct session_info *i, *now = NULL;

	fx_init(&f, NULL);
	i = start(&f, "r", false, NULL);
	session_store_free(f.s);
	free(sh(f.repo, "git config user.name evil"));
	ck_assert_int_eq(session_store_open(f.state, &f.s), 0);
	ck_assert_int_eq(session_get(f.s, i->id, &now), 0);
	ck_assert_int_eq(now->state, SESSION_ATTEMPT_ENDED);
	ck_assert_str_eq(now->finding_code, "INTEGRITY");
	f.journaled = 0;
	session_store_set_journal(f.s, jhook, &f);
	ck_assert_int_eq(f.journaled, 1);
	ck_assert_str_eq(f.last_kind, "session.finding");
	session_info_free(now);
	session_info_free(i);
	fx_done(&f);
}
END_TEST

/*
 * Nothing changed while the store was closed: the session stays active,
 * also when its checks since the start rescanned the guarded inputs (a
 * checkout just made is "racy": every check rescans it) and some of the
 * guarded paths are absent (most projects have no .gitlab-ci.yml).  A
 * rescan gave absent entries another hash than the start did, and every
 * restart of spd after a command ended such sessions with INTEGRITY.
 */
START_TEST(test_restart_after_commands)
{
	struct fx f;
	struct session_info *i, *now = NULL;
	const char *argv[] = {"true", NULL};
	struct guard_finding gf;

	fx_init(&f, NULL);
	i = start(&f, "r", false, NULL);
	for (int k = 0; k < 3; k++)
		ck_assert_int_eq(
		    session_record_command(f.s, i->id, argv, 0, &gf), 0);
	session_store_free(f.s);
	f.journaled = 0;
	ck_assert_int_eq(session_store_open(f.state, &f.s), 0);
	session_store_set_journal(f.s, jhook, &f);
	ck_assert_int_eq(session_get(f.s, i->id, &now), 0);
	ck_assert_msg(now->state == SESSION_ACTIVE, "ended: %s %s",
		      now->finding_code ? now->finding_code : "-",
		      now->finding_path ? now->finding_path : "-");
	ck_assert_int_eq(f.journaled, 0);
	session_info_free(now);
	session_info_free(i);
	fx_done(&f);
}
END_TEST

/*
 * A digest stored by an spd from before absent entries kept their hash
 * across scans (guard_digest_legacy) is accepted at the restart after
 * the upgrade, instead of ending the session with INTEGRITY.
 */
START_TEST(test_restart_legacy_digest)
{
	struct fx f;
	struct session_info *i, *now = NULL;
	uint8_t leg[GUARD_DIGEST_LEN], cur[GUARD_DIGEST_LEN];
	char sql[256 + 2 * GUARD_DIGEST_LEN];
	struct sess *x;
	int n;

	fx_init(&f, NULL);
	i = start(&f, "r", false, NULL);
	for (x = f.s->list; x && strcmp(x->info.id, i->id); x = x->next)
		;
	ck_assert_ptr_nonnull(x);
	ck_assert_ptr_nonnull(x->guard);
	guard_digest(x->guard, cur);
	guard_digest_legacy(x->guard, leg);
	ck_assert(memcmp(cur, leg, sizeof(cur)) != 0);
	session_store_free(f.s);
	n = snprintf(sql, sizeof(sql), "UPDATE sessions SET guard_digest = X'");
	for (size_t k = 0; k < sizeof(leg); k++)
		n += snprintf(sql + n, sizeof(sql) - (size_t)n, "%02x", leg[k]);
	snprintf(sql + n, sizeof(sql) - (size_t)n, "' WHERE id = '%s'", i->id);
	db_sql(&f, sql);
	ck_assert_int_eq(session_store_open(f.state, &f.s), 0);
	ck_assert_int_eq(session_get(f.s, i->id, &now), 0);
	ck_assert_int_eq(now->state, SESSION_ACTIVE);
	session_info_free(now);
	session_info_free(i);
	fx_done(&f);
}
END_TEST

START_TEST(test_split_words)
{
	char **v = NULL;

	ck_assert_int_eq(session_split_words("make check", &v), 2);
	ck_assert_str_eq(v[0], "make");
	ck_assert_str_eq(v[1], "check");
	ck_assert_ptr_null(v[2]);
	session_argv_free(v);
	ck_assert_int_eq(
	    session_split_words("sh -c 'exit 3'  \"a \\\"b\\\"\" c\\ d", &v),
	    5);
	ck_assert_str_eq(v[2], "exit 3");
	ck_assert_str_eq(v[3], "a \"b\"");
	ck_assert_str_eq(v[4], "c d");
	session_argv_free(v);
	v = NULL;
	ck_assert_int_eq(session_split_words("make && rm -rf /", &v), -EINVAL);
	ck_assert_int_eq(session_split_words("echo $HOME", &v), -EINVAL);
	ck_assert_int_eq(session_split_words("echo \"$HOME\"", &v), -EINVAL);
	ck_assert_int_eq(session_split_words("a > b", &v), -EINVAL);
	ck_assert_int_eq(session_split_words("'unterminated", &v), -EINVAL);
	ck_assert_int_eq(session_split_words("   ", &v), -EINVAL);
	ck_assert_ptr_null(v);
}
END_TEST

START_TEST(test_verify_gates)
{
	static const char conf[] =
	    "[check \"unit\"]\n\trun = make check\n"
	    "[check \"Lint\"]\n\trun = sh -c 'exit 0'\n"
	    "[verify]\n\trequire = make check\n\tagent = true\n";
	static const char *const mc[] = {"make", "check", NULL};
	struct fx f;
	struct session_info *i;
	struct session_verify_plan *plan = NULL;
	struct session_verdict v;
	int ok[2] = {0, 0}, bad[2] = {0, 2};

	fx_init(&f, conf);
	i = start(&f, "v", false, NULL);
	ck_assert_int_eq(session_verify_plan(f.s, i->id, &plan), 0);
	ck_assert_uint_eq(plan->n_checks, 2);
	ck_assert_str_eq(plan->checks[0].name, "unit");
	ck_assert_str_eq(plan->checks[1].name, "Lint");
	ck_assert_str_eq(plan->checks[1].argv[2], "exit 0");
	ck_assert_str_eq(plan->workspace, i->worktree);
	ck_assert(plan->agent_may_verify);
	ck_assert_ptr_null(plan->heldout_src);
	ck_assert_str_eq(plan->readonly[0], i->gitdir);
	ck_assert_ptr_null(plan->readonly[1]);

	/* Checks pass but "make check" never ran in the session. */
	ck_assert_int_eq(session_verify_evaluate(f.s, plan, ok, &v), 0);
	ck_assert(!v.pass);
	ck_assert(v.gates[SESSION_GATE_CHECKS].pass);
	ck_assert(!v.gates[SESSION_GATE_REQUIRED].pass);
	ck_assert_str_eq(f.last_kind, "session.verify");

	ck_assert_int_eq(session_record_command(f.s, i->id, mc, 2, NULL), 0);
	ck_assert_int_eq(session_verify_evaluate(f.s, plan, ok, &v), 0);
	ck_assert_msg(v.pass, "%s", v.gates[SESSION_GATE_REQUIRED].detail);

	/* A failing check fails the verdict, naming it. */
	ck_assert_int_eq(session_verify_evaluate(f.s, plan, bad, &v), 0);
	ck_assert(!v.pass);
	ck_assert(!v.gates[SESSION_GATE_CHECKS].pass);
	ck_assert_ptr_nonnull(
	    strstr(v.gates[SESSION_GATE_CHECKS].detail, "\"Lint\" exited 2"));
	json_t *j = session_verdict_json(&v, plan, bad);
	ck_assert(json_is_false(json_object_get(j, "pass")));
	ck_assert_int_eq(json_array_size(json_object_get(j, "gates")),
			 SESSION_GATES);
	json_decref(j);

	/* Ending the attempt for a policy reason refuses what follows. */
	struct session_info *other = start(&f, "v2", false, NULL), *now = NULL;
	ck_assert_int_eq(session_end_attempt(f.s, other->id, "POLICY-DENIED",
					     "three denied calls in a row"),
			 0);
	ck_assert_int_eq(session_usable(f.s, other->id), -ECANCELED);
	ck_assert_int_eq(session_record_command(f.s, other->id, mc, 0, NULL),
			 -ECANCELED);
	ck_assert_int_eq(session_end_attempt(f.s, other->id, "X", "y"),
			 -ECANCELED);
	ck_assert_int_eq(session_get(f.s, other->id, &now), 0);
	ck_assert_str_eq(now->finding_code, "POLICY-DENIED");
	ck_assert_str_eq(now->finding_path, "three denied calls in a row");
	session_info_free(now);
	session_info_free(other);

	/* A policy block fails the verdict even with every check green. */
	ck_assert_int_eq(session_note_policy_block(f.s, i->id, "rm -rf /"), 0);
	ck_assert_int_eq(session_verify_evaluate(f.s, plan, ok, &v), 0);
	ck_assert(!v.pass);
	ck_assert(!v.gates[SESSION_GATE_POLICY].pass);
	ck_assert(v.gates[SESSION_GATE_CHECKS].pass);

	/* A guard finding fails integrity (and ends the attempt). */
	free(sh(f.repo, "git config core.fsmonitor evil"));
	ck_assert_int_eq(session_verify_evaluate(f.s, plan, ok, &v), 0);
	ck_assert(!v.gates[SESSION_GATE_INTEGRITY].pass);
	ck_assert_ptr_nonnull(
	    strstr(v.gates[SESSION_GATE_INTEGRITY].detail, ".git/config"));
	session_verify_plan_free(plan);
	session_info_free(i);
	fx_done(&f);
}
END_TEST

/* No .spd.conf checks: the checks gate fails rather than pass vacuously;
 * an outside change fails its gate. */
START_TEST(test_verify_no_checks)
{
	struct fx f;
	struct session_info *i;
	struct session_verify_plan *plan = NULL;
	struct session_verdict v;

	fx_init(&f, NULL);
	i = start(&f, "n", false, NULL);
	ck_assert_int_eq(session_verify_plan(f.s, i->id, &plan), 0);
	ck_assert_uint_eq(plan->n_checks, 0);
	ck_assert(!plan->agent_may_verify);
	ck_assert_int_eq(session_note_outside_change(f.s, i->id, "/etc/x"), 0);
	ck_assert_int_eq(session_verify_evaluate(f.s, plan, NULL, &v), 0);
	ck_assert(!v.pass);
	ck_assert(!v.gates[SESSION_GATE_CHECKS].pass);
	ck_assert(!v.gates[SESSION_GATE_OUTSIDE].pass);
	ck_assert(v.gates[SESSION_GATE_INTEGRITY].pass);
	session_verify_plan_free(plan);
	session_info_free(i);
	fx_done(&f);
}
END_TEST

START_TEST(test_list_show)
{
	struct fx f;
	struct session_info *a, *b, **v = NULL;
	size_t n = 0;

	fx_init(&f, NULL);
	a = start(&f, "la", false, NULL);
	b = start(&f, "lb", false, NULL);
	ck_assert_int_eq(session_list(f.s, &v, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(v[0]->id, b->id);
	json_t *j = session_info_json(v[1]);
	ck_assert_str_eq(json_string_value(json_object_get(j, "feature")),
			 "la");
	ck_assert_str_eq(json_string_value(json_object_get(j, "state")),
			 "active");
	ck_assert_ptr_null(json_object_get(j, "token"));
	json_decref(j);
	session_info_list_free(v, n);
	struct session_info *x = NULL;
	ck_assert_int_eq(session_get(f.s, "nope", &x), -ENOENT);
	session_info_free(a);
	session_info_free(b);
	fx_done(&f);
}
END_TEST

/* Run handler h with params (taken) as the operator (agent_of NULL) or as
 * the agent of session agent_of; the call must finish before it returns.
 * Returns true for a reply, false for an error. */
static bool call(struct call *c, struct fx *f, call_handler h, json_t *params,
		 const char *agent_of)
{
	static struct spd spd;
	static uv_loop_t loop;

	ck_assert_ptr_nonnull(params);
	/* session.start finishes on the loop, after the thread pool. */
	if (!spd.loop) {
		ck_assert_int_eq(uv_loop_init(&loop), 0);
		spd.loop = &loop;
	}
	spd.sessions = f->s;
	fakecall_init(c, &spd, params, agent_of);
	h(c);
	while (!c->done && uv_run(spd.loop, UV_RUN_ONCE))
		;
	ck_assert(c->done);
	json_decref(c->params);
	c->params = NULL;
	return c->result != NULL;
}

static void call_free(struct call *c)
{
	json_decref(c->result);
	json_decref(c->err_data);
	c->result = c->err_data = NULL;
}

/* agent_stop's continuation: how many times it was called. */
static void stopped(void *data)
{
	(*(int *)data)++;
}

/*
 * What an earlier spd left to remove (session_removals_left): ended
 * worktrees, the merges' checkouts (put aside under a name of their
 * own), and the held-out sets an end or a seal left (heldout/<id>.ended,
 * .old, .new); never a live session's set, never . or .. (found: ..
 * of heldout/, the state directory itself, was handed to the remover at
 * a start, and CI's nested layout lost its runtime directory).
 */
START_TEST(test_removals_left)
{
	struct fx f;
	char **left;
	size_t n = 0;
	bool ended = false, old = false, merge = false;

	fx_init(&f, NULL);
	free(sh(
	    f.state,
	    "mkdir -p heldout/0123456789abcdef heldout/0123456789abcdef.ended "
	    "heldout/fedcba9876543210.old merge/0123456789abcdef/d"));
	left = session_removals_left(f.s);
	for (size_t i = 0; left && left[i]; i++, n++) {
		const char *b = strrchr(left[i], '/') + 1;

		ck_assert_msg(strcmp(b, ".") && strcmp(b, ".."),
			      "%s handed to the remover", left[i]);
		ck_assert_msg(strcmp(b, "0123456789abcdef") != 0 ||
				  strstr(left[i], "/heldout/") == NULL,
			      "a live session's set: %s", left[i]);
		ended |= strcmp(b, "0123456789abcdef.ended") == 0;
		old |= strcmp(b, "fedcba9876543210.old") == 0;
		merge |= strncmp(b, ".merge-left-", 12) == 0;
		free(left[i]);
	}
	free(left);
	ck_assert(ended && old && merge);
	ck_assert_uint_eq(n, 3);
	fx_done(&f);
}
END_TEST

/*
 * At spd's start (agent_start, agent_prime_recent), the workspaces of the
 * active sessions used in the last day are walked ahead, as session start
 * walks a new one: after a restart, their agents' first commands get the
 * list.  Not an ended session's, nor one untouched for longer (a forgotten
 * session holds no watches), unless a command ran in it since.
 */
START_TEST(test_restart_walks_recent)
{
	static struct spd spd;
	struct fx f;
	int stops = 0;
	uv_loop_t loop;
	struct session_info *i[4];
	char tok[SESSION_TOKEN_LEN + 1], sql[256];
	const char *feat[4] = {"recent", "old", "ended", "oldbutused"};
	const char *argv[] = {"true", NULL};

	fx_init(&f, NULL);
	for (int k = 0; k < 4; k++)
		ck_assert_int_eq(
		    session_start(f.s, f.repo, feat[k], false, &i[k], tok), 0);
	ck_assert_int_eq(session_end(f.s, i[2]->id, false, NULL), 0);
	for (int k = 1; k < 4; k += 2) {
		snprintf(sql, sizeof(sql),
			 "UPDATE sessions SET created = created - %d "
			 "WHERE id = '%s'",
			 AGENT_PRIME_RECENT_S + 60, i[k]->id);
		db_sql(&f, sql);
	}
	ck_assert_int_eq(session_log_command(f.s, i[3]->id, argv, 0), 0);

	ck_assert_int_eq(uv_loop_init(&loop), 0);
	memset(&spd, 0, sizeof(spd));
	spd.paths.state_dir = f.state;
	spd.loop = &loop;
	/* spd's start: a store of its own on the same sessions.db. */
	ck_assert_int_eq(agent_start(&spd), 0);
	ck_assert_ptr_nonnull(spd.linkwatch);
	ck_assert_uint_eq(linkwatch_walks(spd.linkwatch), 2);
	ck_assert(linkwatch_walking(spd.linkwatch, i[0]->worktree));
	ck_assert(linkwatch_walking(spd.linkwatch, i[3]->worktree));
	ck_assert(!linkwatch_walking(spd.linkwatch, i[1]->worktree));
	while (linkwatch_walking(spd.linkwatch, i[0]->worktree) ||
	       linkwatch_walking(spd.linkwatch, i[3]->worktree))
		uv_run(&loop, UV_RUN_ONCE);
	/* Nothing was left waiting for a free walk either. */
	ck_assert_uint_eq(linkwatch_walks(spd.linkwatch), 2);
	for (int k = 0; k < 4; k++)
		session_info_free(i[k]);
	agent_stop(&spd, stopped, &stops);
	ck_assert_int_eq(stops, 1);
	linkwatch_free(spd.linkwatch);
	while (uv_run(&loop, UV_RUN_NOWAIT))
		;
	ck_assert_int_eq(uv_loop_close(&loop), 0);
	fx_done(&f);
}
END_TEST

/*
 * session.start walks the new workspace's hard-link list on the thread
 * pool (linkwatch.h) right away, so that the agent's first command gets
 * the list instead of a full walk in sandboxd.
 */
START_TEST(test_start_walks_links_ahead)
{
	static struct spd spd;
	struct fx f;
	struct call c;
	uv_loop_t loop;
	struct linkwatch_list names;
	char ws[4096];

	fx_init(&f, NULL);
	ck_assert_int_eq(uv_loop_init(&loop), 0);
	memset(&spd, 0, sizeof(spd));
	spd.sessions = f.s;
	spd.loop = &loop;
	fakecall_init(&c, &spd,
		      json_pack("{s:s, s:s}", "repo", f.repo, "feature", "lw"),
		      NULL);
	m_session_start(&c);
	while (!c.done && uv_run(&loop, UV_RUN_ONCE))
		;
	ck_assert_msg(c.result, "session.start: %s", c.msg);
	snprintf(ws, sizeof(ws), "%s",
		 json_string_value(json_object_get(c.result, "worktree")));
	ck_assert_ptr_nonnull(spd.linkwatch);
	ck_assert_uint_eq(linkwatch_walks(spd.linkwatch), 1);
	while (linkwatch_walking(spd.linkwatch, ws))
		uv_run(&loop, UV_RUN_ONCE);
	/* The first run's question has its answer, and no second walk. */
	ck_assert_int_eq(linkwatch_names(spd.linkwatch, ws, &names), 1);
	ck_assert_uint_eq(linkwatch_walks(spd.linkwatch), 1);
	ck_assert_int_eq(
	    session_end(f.s, json_string_value(json_object_get(c.result, "id")),
			false, NULL),
	    0);
	fakecall_free(&c);
	linkwatch_free(spd.linkwatch);
	while (uv_run(&loop, UV_RUN_NOWAIT))
		;
	ck_assert_int_eq(uv_loop_close(&loop), 0);
	fx_done(&f);
}
END_TEST

/* A stand-in for the sandbox: check i exits with fake_exits[i]. */
static int fake_exits[4];
static int fake_runs;

static int fake_runner(void *data, const struct session_verify_plan *plan,
		       size_t i, session_check_done_fn done, void *ctx)
{
	fake_runs++;
	done(ctx, fake_exits[i], NULL);
	return 0;
}

/* The runner of test_heldout_held: while the verification's check
 * runs, a new set is sealed; the check still sees its own, whole. */
static struct fx *held_f;
static const char *held_id, *held_new;
static int held_then_r = -1000, held_checked;

static void held_then(void *data, int r, const char *why)
{
	(void)data;
	(void)why;
	held_then_r = r;
}

static char *held_text(const struct session_verify_plan *plan)
{
	char *p = paths_join(plan->heldout_src, "t.txt");
	char *t = test_read_file(p);

	free(p);
	return t;
}

static int held_runner(void *data, const struct session_verify_plan *plan,
		       size_t i, session_check_done_fn done, void *ctx)
{
	struct session_verify_plan *other = NULL;
	struct session_sealing *j = NULL;
	char *t;

	(void)data;
	ck_assert_ptr_nonnull(plan->heldout_src);
	t = held_text(plan);
	ck_assert_str_eq(t, "OLD\n");
	free(t);
	/* Sealed while the check runs: the copy waits beside the set. */
	ck_assert_int_eq(
	    session_heldout_begin(held_f->s, held_id, held_new, &j), 0);
	session_heldout_work(j);
	ck_assert_int_eq(session_heldout_end(j, held_then, NULL), -EINPROGRESS);
	t = held_text(plan);
	ck_assert_msg(strcmp(t, "OLD\n") == 0,
		      "the running check's held-out set changed under it: %s",
		      t);
	free(t);
	ck_assert_int_eq(held_then_r, -1000);
	/* No new verification starts on the set about to go, and why. */
	ck_assert_int_eq(session_verify_plan(held_f->s, held_id, &other),
			 -EALREADY);
	ck_assert_ptr_nonnull(
	    strstr(session_store_error(held_f->s), "verification"));
	/* Nor a second seal. */
	ck_assert_int_eq(session_heldout(held_f->s, held_id, held_new), -EBUSY);
	held_checked++;
	done(ctx, i == 0 ? 0 : 1, NULL);
	return 0;
}

/*
 * A seal while a verification runs (issue 39 put the seal's copy on the
 * thread pool): the running check keeps the set it began with, whole,
 * and the new set takes its place once the verification's plan is
 * freed; a stop before then says the new set was not put in place.
 */
START_TEST(test_heldout_held)
{
	static const char conf[] = "[check \"unit\"]\n\trun = make check\n";
	struct fx f;
	struct call c;
	struct session_info *i;
	struct session_verify_plan *plan = NULL;
	struct session_sealing *j = NULL;
	char *old, *nw, *p, *src, *dst, *t;

	fx_init(&f, conf);
	i = start(&f, "hh", false, NULL);
	old = paths_join(f.root, "old");
	nw = paths_join(f.root, "new");
	mkdir(old, 0700);
	mkdir(nw, 0700);
	p = paths_join(old, "t.txt");
	test_write_file(p, "OLD\n");
	free(p);
	p = paths_join(nw, "t.txt");
	test_write_file(p, "NEW\n");
	free(p);
	ck_assert_int_eq(session_heldout(f.s, i->id, old), 1);

	held_f = &f;
	held_id = i->id;
	held_new = nw;
	session_store_set_check_runner(f.s, held_runner, NULL);
	ck_assert(call(&c, &f, m_session_verify,
		       json_pack("{s:s}", "id", i->id), NULL));
	ck_assert(json_is_true(json_object_get(c.result, "pass")));
	call_free(&c);
	ck_assert_int_eq(held_checked, 1);
	/* The verification's plan was freed: the new set is in place. */
	ck_assert_int_eq(held_then_r, 1);
	ck_assert_int_eq(session_heldout_overlay(f.s, i->id, &src, &dst), 0);
	p = paths_join(src, "t.txt");
	t = test_read_file(p);
	ck_assert_str_eq(t, "NEW\n");
	free(t);
	free(p);
	ck_assert_str_eq(f.last_kind, "session.heldout");

	/* An end while a seal waits is refused, not ended without its
	 * checks; once the plan holding the set goes, it ends verified. */
	ck_assert_int_eq(session_verify_plan(f.s, i->id, &plan), 0);
	held_then_r = -1000;
	ck_assert_int_eq(session_heldout(f.s, i->id, old), -EINPROGRESS);
	session_store_set_check_runner(f.s, fake_runner, NULL);
	fake_exits[0] = 0;
	ck_assert(!call(&c, &f, m_session_end, json_pack("{s:s}", "id", i->id),
			NULL));
	ck_assert_int_eq(c.err, RPC_E_BAD_REQUEST);
	call_free(&c);
	{
		struct session_info *now = NULL;

		ck_assert_int_eq(session_get(f.s, i->id, &now), 0);
		ck_assert_int_eq(now->state, SESSION_ACTIVE);
		session_info_free(now);
	}
	session_verify_plan_free(plan);
	plan = NULL;
	p = paths_join(src, "t.txt");
	t = test_read_file(p);
	ck_assert_str_eq(t, "OLD\n");
	free(t);
	free(p);

	/* spd stops while a seal waits: it is answered, the earlier set
	 * stays, and the plan freed after the store is harmless. */
	ck_assert_int_eq(session_verify_plan(f.s, i->id, &plan), 0);
	held_then_r = -1000;
	ck_assert_int_eq(session_heldout_begin(f.s, i->id, nw, &j), 0);
	session_heldout_work(j);
	ck_assert_int_eq(session_heldout_end(j, held_then, NULL), -EINPROGRESS);
	session_store_free(f.s);
	f.s = NULL;
	ck_assert_int_eq(held_then_r, -ESHUTDOWN);
	session_verify_plan_free(plan);
	p = paths_join(src, "t.txt");
	t = test_read_file(p);
	ck_assert_str_eq(t, "OLD\n");
	free(t);
	free(p);
	p = test_fmt("%s.new", src);
	ck_assert_msg(!exists(p), "the waiting copy was left: %s", p);
	free(p);
	free(src);
	free(dst);
	free(old);
	free(nw);
	session_info_free(i);
	fx_done(&f);
}
END_TEST

START_TEST(test_handlers)
{
	static const char conf[] = "[check \"unit\"]\n\trun = make check\n";
	struct fx f;
	struct call c;
	char a_id[SESSION_ID_LEN + 1], b_id[SESSION_ID_LEN + 1];
	const char *tok;

	fx_init(&f, conf);
	/* session.start as the operator: the token is in the reply once. */
	ck_assert(call(&c, &f, m_session_start,
		       json_pack("{s:s, s:s}", "repo", f.repo, "feature", "ha"),
		       NULL));
	tok = json_string_value(json_object_get(c.result, "token"));
	ck_assert_uint_eq(strlen(tok), SESSION_TOKEN_LEN);
	snprintf(a_id, sizeof(a_id), "%s",
		 json_string_value(json_object_get(c.result, "id")));
	call_free(&c);
	ck_assert(call(&c, &f, m_session_start,
		       json_pack("{s:s, s:s}", "repo", f.repo, "feature", "hb"),
		       NULL));
	snprintf(b_id, sizeof(b_id), "%s",
		 json_string_value(json_object_get(c.result, "id")));
	call_free(&c);
	/* A relative repository would be resolved against spd's cwd. */
	ck_assert(!call(
	    &c, &f, m_session_start,
	    json_pack("{s:s, s:s}", "repo", "repo", "feature", "rel"), NULL));
	ck_assert_int_eq(c.err, RPC_E_BAD_PARAMS);
	call_free(&c);
	/* A bad feature is BAD-REQUEST with the reason. */
	ck_assert(!call(
	    &c, &f, m_session_start,
	    json_pack("{s:s, s:s}", "repo", f.repo, "feature", "-rf"), NULL));
	ck_assert_int_eq(c.err, RPC_E_BAD_REQUEST);
	ck_assert_ptr_nonnull(strstr(c.msg, "invalid feature"));
	call_free(&c);

	/* The agent of A: its own status, without the repo path. */
	ck_assert(call(&c, &f, m_session_status, json_object(), a_id));
	ck_assert_str_eq(json_string_value(json_object_get(c.result, "id")),
			 a_id);
	ck_assert_ptr_null(json_object_get(c.result, "repo"));
	call_free(&c);
	/* ... never B's. */
	ck_assert(!call(&c, &f, m_session_status,
			json_pack("{s:s}", "id", b_id), a_id));
	ck_assert_int_eq(c.err, RPC_E_UNAUTHORIZED);
	call_free(&c);
	ck_assert(!call(&c, &f, m_session_verify,
			json_pack("{s:s}", "id", b_id), a_id));
	ck_assert_int_eq(c.err, RPC_E_UNAUTHORIZED);
	call_free(&c);
	/* The project does not allow the agent to verify. */
	ck_assert(!call(&c, &f, m_session_verify, json_object(), a_id));
	ck_assert_int_eq(c.err, RPC_E_UNAUTHORIZED);
	call_free(&c);

	/* The operator verifies: no sandbox → SANDBOX-UNAVAILABLE, never
	 * an unconfined run. */
	ck_assert(!call(&c, &f, m_session_verify,
			json_pack("{s:s}", "id", a_id), NULL));
	ck_assert_int_eq(c.err, RPC_E_SANDBOX_UNAVAILABLE);
	call_free(&c);
	session_store_set_check_runner(f.s, fake_runner, NULL);
	fake_exits[0] = 1;
	fake_runs = 0;
	ck_assert(call(&c, &f, m_session_verify, json_pack("{s:s}", "id", a_id),
		       NULL));
	ck_assert_int_eq(fake_runs, 1);
	ck_assert(json_is_false(json_object_get(c.result, "pass")));
	call_free(&c);
	fake_exits[0] = 0;
	ck_assert(call(&c, &f, m_session_verify, json_pack("{s:s}", "id", a_id),
		       NULL));
	ck_assert(json_is_true(json_object_get(c.result, "pass")));
	call_free(&c);

	/* Held-out checks sealed through the handler; with them the
	 * default runner would refuse to verify without the overlay, so
	 * the stand-in runner is what runs here. */
	char *hd = paths_join(f.root, "ho");
	mkdir(hd, 0700);
	char *hf = paths_join(hd, "t.sh");
	test_write_file(hf, "exit 0\n");
	ck_assert(call(&c, &f, m_session_heldout,
		       json_pack("{s:s, s:s}", "id", b_id, "dir", hd), NULL));
	ck_assert_int_eq(json_integer_value(json_object_get(c.result, "files")),
			 1);
	call_free(&c);
	free(hf);
	free(hd);

	/* diff prints the merge command. */
	struct session_info *i = NULL;
	ck_assert_int_eq(session_get(f.s, a_id, &i), 0);
	free(sh(i->worktree, "echo x > new.txt"));
	ck_assert(
	    call(&c, &f, m_session_diff, json_pack("{s:s}", "id", a_id), NULL));
	ck_assert_ptr_nonnull(
	    strstr(json_string_value(json_object_get(c.result, "diff")), "+x"));
	/* Uncommitted work is listed; with no commit on the branch yet,
	 * there is no merge command. */
	ck_assert_ptr_null(json_object_get(c.result, "merge"));
	ck_assert_int_eq(
	    json_integer_value(json_object_get(c.result, "uncommitted_count")),
	    1);
	call_free(&c);

	/* After a finding, the agent's calls are ATTEMPT-ENDED, naming it;
	 * the operator can still look. */
	static const char *const argv[] = {"true", NULL};
	free(sh(f.repo, "git config core.hooksPath /tmp"));
	ck_assert_int_eq(session_record_command(f.s, a_id, argv, 0, NULL), 1);
	ck_assert(!call(&c, &f, m_session_status, json_object(), a_id));
	ck_assert_int_eq(c.err, RPC_E_ATTEMPT_ENDED);
	ck_assert_str_eq(json_string_value(json_object_get(c.err_data, "path")),
			 ".git/config");
	call_free(&c);
	ck_assert(!call(&c, &f, m_session_verify,
			json_pack("{s:s}", "id", a_id), NULL));
	ck_assert_int_eq(c.err, RPC_E_ATTEMPT_ENDED);
	call_free(&c);
	ck_assert(
	    call(&c, &f, m_session_show, json_pack("{s:s}", "id", a_id), NULL));
	call_free(&c);
	ck_assert(call(&c, &f, m_session_list, json_object(), NULL));
	ck_assert_uint_eq(
	    json_array_size(json_object_get(c.result, "sessions")), 2);
	call_free(&c);
	ck_assert(
	    call(&c, &f, m_session_end, json_pack("{s:s}", "id", a_id), NULL));
	ck_assert_str_eq(json_string_value(json_object_get(c.result, "state")),
			 "ended");
	call_free(&c);
	ck_assert(!exists(i->worktree));
	session_info_free(i);
	fx_done(&f);
}
END_TEST

static void on_probe_done(void *data, const struct sbx_result *r)
{
	int *st = data;

	*st = r->error == SBXP_ERR_UNAVAILABLE ? 2 : 1;
}

/* session.verify as the operator, running the loop until it replies. */
static void verify_async(struct call *c, struct spd *spd, uv_loop_t *loop,
			 const char *id)
{
	memset(c, 0, sizeof(*c));
	c->spd = spd;
	c->params = json_pack("{s:s}", "id", id);
	c->who.operator= true;
	m_session_verify(c);
	while (!c->done)
		uv_run(loop, UV_RUN_ONCE);
	json_decref(c->params);
	c->params = NULL;
}

static void on_sbx_closed(void *data)
{
	*(bool *)data = true;
}

/*
 * session.verify through the real sandbox (agent.c's runner, as in spd): the
 * held-out files are seen at .spd-heldout by the checks, spd's state dir
 * is not, and the host's worktree never gets the held-out entry.
 */
START_TEST(test_verify_in_sandbox)
{
	struct fx f;
	struct call c;
	static struct spd spd;
	uv_loop_t loop;
	char *prog = test_prog("sandboxd");
	char conf[2048];
	struct session_info *i;
	bool closed = false;
	int probe = 0;

	fx_init(&f, NULL);
	memset(&spd, 0, sizeof(spd));
	ck_assert_int_eq(uv_loop_init(&loop), 0);
	if (access(prog, X_OK) < 0) {
		free(prog);
		uv_loop_close(&loop);
		fx_done(&f);
		TEST_SKIP("build the sandboxd program first (make)");
	}
	ck_assert_int_eq(sbx_start(&loop, prog, &spd.sbx), 0);
	free(prog);
	spd.loop = &loop;
	spd.sessions = f.s;
	session_store_set_check_runner(f.s, agent_check_runner, &spd);
	spd.paths.state_dir = f.state;
	spd.paths.config_dir = paths_join(f.root, "config");
	spd.paths.runtime_dir = paths_join(f.root, "run");
	mkdir(spd.paths.config_dir, 0700);
	mkdir(spd.paths.runtime_dir, 0700);
	spd.config.default_timeout_ms = 30000;

	/* Is a sandbox available at all here? */
	{
		char *argv[] = {"/bin/true", NULL};
		char *env[] = {"PATH=/usr/bin:/bin", NULL};
		struct sbx_spec sp;

		memset(&sp, 0, sizeof(sp));
		sp.argv = argv;
		sp.envp = env;
		sp.workspace = f.repo;
		sp.home = f.root;
		ck_assert_int_eq(
		    sbx_run(spd.sbx, &sp,
			    &(struct sbx_cbs){.on_done = on_probe_done}, &probe,
			    NULL),
		    0);
		while (!probe)
			uv_run(&loop, UV_RUN_ONCE);
	}
	if (probe == 2) {
		sbx_close(spd.sbx, on_sbx_closed, &closed);
		while (!closed)
			uv_run(&loop, UV_RUN_ONCE);
		uv_run(&loop, UV_RUN_DEFAULT);
		uv_loop_close(&loop);
		fx_done(&f);
		TEST_SKIP_LAYER("sandbox", "the sandbox is unavailable here");
	}

	snprintf(
	    conf, sizeof(conf),
	    "[check \"heldout\"]\n\trun = grep -q SEALED "
	    ".spd-heldout/t.txt\n"
	    "[check \"state-hidden\"]\n\trun = sh -c '! cat %s/sessions.db "
	    ">/dev/null 2>&1'\n",
	    f.state);
	char *cp = paths_join(f.repo, ".spd.conf");
	test_write_file(cp, conf);
	free(cp);
	free(sh(f.repo, "git commit -qam conf"));
	i = start(&f, "sbx", false, NULL);

	/* Without the sealed files the held-out check fails. */
	verify_async(&c, &spd, &loop, i->id);
	ck_assert_ptr_nonnull(c.result);
	ck_assert(json_is_false(json_object_get(c.result, "pass")));
	call_free(&c);

	char *hd = paths_join(f.root, "sealed");
	mkdir(hd, 0700);
	char *hf = paths_join(hd, "t.txt");
	test_write_file(hf, "SEALED\n");
	free(hf);
	ck_assert_int_eq(session_heldout(f.s, i->id, hd), 1);
	free(hd);
	verify_async(&c, &spd, &loop, i->id);
	ck_assert_ptr_nonnull(c.result);
	char *dump = json_dumps(c.result, 0);
	ck_assert_msg(json_is_true(json_object_get(c.result, "pass")), "%s",
		      dump);
	free(dump);
	call_free(&c);
	/* The host's worktree never got the held-out files. */
	char *dst = paths_join(i->worktree, SESSION_HELDOUT_MOUNT);
	ck_assert(!exists(dst));
	free(dst);

	sbx_close(spd.sbx, on_sbx_closed, &closed);
	while (!closed)
		uv_run(&loop, UV_RUN_ONCE);
	uv_run(&loop, UV_RUN_DEFAULT);
	ck_assert_int_eq(uv_loop_close(&loop), 0);
	free(spd.paths.config_dir);
	free(spd.paths.runtime_dir);
	session_info_free(i);
	fx_done(&f);
}
END_TEST

static void on_journal_closed(void *data, int err)
{
	*(int *)data = err == 0 ? 1 : 2;
}

static void count_kinds(void *data, int err, const struct journal_event *evs,
			size_t n)
{
	int *found = data;

	ck_assert_int_eq(err, 0);
	for (size_t k = 0; k < n; k++)
		if (!strcmp(evs[k].kind, "session.finding") && evs[k].detail &&
		    strstr(evs[k].detail, ".git/config"))
			found[0]++;
	found[1] = 1;
}

/* Session events reach the real journal: the finding names its path. */
START_TEST(test_journal)
{
	static const char *const argv[] = {"true", NULL};
	struct fx f;
	struct journal *j = NULL;
	struct session_info *i;
	uv_loop_t loop;
	int closed = 0, found[2] = {0, 0};

	fx_init(&f, NULL);
	ck_assert_int_eq(uv_loop_init(&loop), 0);
	char *jp = paths_join(f.state, "journal.db");
	ck_assert_int_eq(journal_open(&loop, jp, &j), 0);
	free(jp);
	session_store_use_journal(f.s, j);
	int64_t before = journal_count(j);
	i = start(&f, "jr", false, NULL);
	free(sh(f.repo, "git config core.editor evil"));
	ck_assert_int_eq(session_record_command(f.s, i->id, argv, 0, NULL), 1);
	ck_assert_int_ge(journal_count(j), before + 2);
	ck_assert_int_eq(journal_flush(j), 0);
	struct journal_filter jf = {.since = 0, .session = i->id};
	ck_assert_int_eq(journal_query(j, &jf, count_kinds, found), 0);
	while (!found[1])
		uv_run(&loop, UV_RUN_ONCE);
	ck_assert_int_eq(found[0], 1);
	session_store_use_journal(f.s, NULL);
	journal_close(j, on_journal_closed, &closed);
	while (!closed)
		uv_run(&loop, UV_RUN_ONCE);
	ck_assert_int_eq(closed, 1);
	uv_run(&loop, UV_RUN_DEFAULT);
	ck_assert_int_eq(uv_loop_close(&loop), 0);
	session_info_free(i);
	fx_done(&f);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("session");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_start_diff_end);
	tcase_add_test(tc, test_checkout_filters);
	tcase_add_test(tc, test_feature_names);
	tcase_add_test(tc, test_in_place_dirty);
	tcase_add_test(tc, test_in_place_hidden_kept);
	tcase_add_test(tc, test_in_place_walk_aside);
	tcase_add_test(tc, test_removals_left);
	tcase_add_test(tc, test_in_place_walk_served);
	tcase_add_test(tc, test_in_place_linked_gitignore);
	tcase_add_test(tc, test_sync_aside);
	tcase_add_test(tc, test_in_place_ignored_at_start);
	tcase_add_test(tc, test_in_place_too_many_ignored);
	tcase_add_test(tc, test_in_place_ignored_moved);
	tcase_add_test(tc, test_in_place_secret_scan_fails_closed);
	tcase_add_test(tc, test_guard_ends_attempt);
	tcase_add_test(tc, test_guard_branch_moved);
	tcase_add_test(tc, test_heldout);
	tcase_add_test(tc, test_tokens);
	tcase_add_test(tc, test_changed_while_stopped);
	tcase_add_test(tc, test_restart_after_commands);
	tcase_add_test(tc, test_restart_legacy_digest);
	tcase_add_test(tc, test_split_words);
	tcase_add_test(tc, test_verify_gates);
	tcase_add_test(tc, test_verify_no_checks);
	tcase_add_test(tc, test_list_show);
	tcase_add_test(tc, test_handlers);
	tcase_add_test(tc, test_heldout_held);
	tcase_add_test(tc, test_start_walks_links_ahead);
	tcase_add_test(tc, test_restart_walks_recent);
	tcase_add_test(tc, test_journal);
	tcase_add_test(tc, test_verify_in_sandbox);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

/*
 * The session loop end to end (issue 35): the agent commits the way it
 * always does inside its runs and the commits land on spd/<feature> and
 * nowhere else; every run that changed the worktree is a checkpoint that
 * can be put back; ending a session never loses work (spd commits what is
 * uncommitted, refuses on a secret, --discard says what it drops; a
 * SIGKILL of spd loses nothing); the operator merges into the checkout,
 * and the merge refuses a dirty checkout and failing checks.  A real spd
 * and sandboxd, a real repository made with the git CLI, the outcome read
 * with git from the operator's repository.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/paths.h"
#include "tests/lib/spdproc.h"
#include "tests/lib/testlib.h"

static struct test_spd T;
static char *REPO;

/* One check: passes once the agent made done.txt. */
#define PROJECT_CONF "[check \"unit\"]\n\trun = test -f done.txt\n"

static bool has(const char *hay, const char *needle)
{
	return hay && strstr(hay, needle) != NULL;
}

static void setup(void)
{
	char *files;

	test_spd_prepare(&T, NULL);
	test_spd_start(&T);
	REPO = paths_join(T.dir, "src/project");
	files =
	    test_fmt("echo original > a.txt; printf '*.log\\n' > .gitignore; "
		     "printf '%%s' '%s' > .spd.conf",
		     PROJECT_CONF);
	test_make_repo(REPO, files);
	free(files);
}

static void teardown(void)
{
	free(REPO);
	REPO = NULL;
	test_spd_stop_clean(&T);
}

static char *rpcf(const char *token, const char *method, const char *f, ...)
    __attribute__((format(printf, 3, 4)));
static char *rpcf(const char *token, const char *method, const char *f, ...)
{
	va_list ap;
	char *params = NULL, *r;
	int fd;

	va_start(ap, f);
	ck_assert(vasprintf(&params, f, ap) >= 0);
	va_end(ap);
	fd = test_spd_connect(&T);
	r = test_rpc_on(&T, fd, token, method, params, 60000);
	close(fd);
	ck_assert_msg(r != NULL, "no response to %s", method);
	free(params);
	return r;
}

struct sess {
	char id[17], token[65];
	char *wt;
};

static void start(const char *feature, bool in_place, struct sess *s)
{
	char *p = test_fmt("{\"repo\":\"%s\",\"feature\":\"%s\"%s}", REPO,
			   feature, in_place ? ",\"in_place\":true" : "");

	test_session_start(&T, p, s->id, s->token);
	s->wt = in_place ? strdup(REPO)
			 : test_fmt("%s/worktrees/%s", T.state, s->id);
	free(p);
}

/* The agent's run of a shell line in its session (the operator's token
 * with the session named, so that no person is asked); the reply. */
static char *run_sh(const struct sess *s, const char *line)
{
	json_t *argv = json_pack("[s, s, s]", "sh", "-c", line);
	char *a = json_dumps(argv, JSON_COMPACT), *r;

	r = rpcf(NULL, "cmd.run",
		 "{\"session\":\"%s\",\"yes\":true,\"argv\":%s}", s->id, a);
	free(a);
	json_decref(argv);
	return r;
}

/* run_sh that must exit 0. */
/* Until the session's last checkpoint is taken: one that waits for
 * the workspace's watch (a new session's first run) is taken once the
 * watch is made (session.log "pending"); at most 30 s, a bound on a
 * failure, never a timed assertion. */
static void settle(const char *id)
{
	char *r = NULL;

	for (int i = 0; i < 300; i++) {
		free(r);
		r = rpcf(NULL, "session.log", "{\"id\":\"%s\"}", id);
		if (!has(r, "\"pending\":true"))
			break;
		usleep(100 * 1000);
	}
	ck_assert_msg(!has(r, "\"pending\":true"),
		      "a checkpoint still waits: %s", r);
	free(r);
}

static void run_ok(const struct sess *s, const char *line)
{
	char *r = run_sh(s, line);

	ck_assert_msg(has(r, "\"exit_code\":0"), "%s: %s", line, r);
	free(r);
	settle(s->id);
}

/* git in the operator's repository: its output (trailing newline cut). */
static char *git(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *git(const char *f, ...)
{
	va_list ap;
	char *args = NULL, *out = NULL;
	size_t n;

	va_start(ap, f);
	ck_assert(vasprintf(&args, f, ap) >= 0);
	va_end(ap);
	test_sh(&out, "git -C '%s' %s 2>&1", REPO, args);
	free(args);
	if (!out)
		out = strdup("");
	n = strlen(out);
	while (n && out[n - 1] == '\n')
		out[--n] = '\0';
	return out;
}

static void check_git(const char *want, const char *f, ...)
    __attribute__((format(printf, 2, 3)));
static void check_git(const char *want, const char *f, ...)
{
	va_list ap;
	char *args = NULL, *out;

	va_start(ap, f);
	ck_assert(vasprintf(&args, f, ap) >= 0);
	va_end(ap);
	out = git("%s", args);
	ck_assert_msg(strcmp(out, want) == 0, "git %s: \"%s\", want \"%s\"",
		      args, out, want);
	free(out);
	free(args);
}

/* ---- the agent commits ---------------------------------------------- */

/*
 * git add and git commit in the agent's runs (no person asked, no setup:
 * the identity is spd's) land on spd/<feature>, with the agent's
 * message, and the operator's other refs, config, hooks and checkout are
 * as they were; an amend of the agent's own commit moves the branch too.
 */
START_TEST(test_agent_commits_land_on_branch)
{
	struct sess s = {0};
	char *refs_before, *refs_after, *cfg_before, *cfg_after, *r, *p;

	start("feat", false, &s);
	refs_before = git("for-each-ref --format='%%(refname) %%(objectname)' "
			  "refs/heads/main refs/tags");
	p = paths_join(REPO, ".git/config");
	cfg_before = test_read_file(p);
	/* Plain argv, the agent's own token: allowed by the policy. */
	run_ok(&s, "echo new > b.txt");
	r = rpcf(s.token, "cmd.run", "{\"argv\":[\"git\",\"add\",\"-A\"]}");
	ck_assert_msg(has(r, "\"exit_code\":0"), "git add: %s", r);
	free(r);
	r = rpcf(s.token, "cmd.run",
		 "{\"argv\":[\"git\",\"commit\",\"-m\",\"agent adds b\"]}");
	ck_assert_msg(has(r, "\"exit_code\":0"), "git commit: %s", r);
	free(r);
	check_git("agent adds b", "log -1 --format=%%s spd/feat");
	check_git("new", "show spd/feat:b.txt");
	{
		char *want = test_fmt("agent %s", s.id);

		check_git(want, "log -1 --format=%%an spd/feat");
		free(want);
	}
	/* Nothing else moved, the checkout did not change. */
	refs_after = git("for-each-ref --format='%%(refname) %%(objectname)' "
			 "refs/heads/main refs/tags");
	ck_assert_str_eq(refs_before, refs_after);
	cfg_after = test_read_file(p);
	ck_assert_str_eq(cfg_before, cfg_after);
	ck_assert_int_eq(test_sh(NULL, "test ! -e '%s/b.txt'", REPO), 0);
	check_git("", "status --porcelain");

	/* An amend of its own commit, then git status and git log. */
	run_ok(&s, "echo newer > b.txt && git commit -qa --amend -m "
		   "'agent adds b, amended' && git status --short && git log "
		   "--oneline");
	check_git("agent adds b, amended", "log -1 --format=%%s spd/feat");
	check_git("1", "rev-list --count main..spd/feat");
	/* The session is not ended: nothing the guard saw. */
	r = rpcf(s.token, "session.status", "{}");
	ck_assert_msg(has(r, "\"state\":\"active\"") &&
			  has(r, "agent adds b, amended"),
		      "status: %s", r);
	free(r);
	free(refs_before);
	free(refs_after);
	free(cfg_before);
	free(cfg_after);
	free(p);
	free(s.wt);
}
END_TEST

/* A session an older spd started (libgit2's ".git" file in its
 * worktree) gets the agent's repository at its next run. */
START_TEST(test_older_session_upgraded)
{
	struct sess s = {0};
	char *p, *line;

	start("old", false, &s);
	p = paths_join(s.wt, ".git");
	test_rmrf(p);
	line = test_fmt("gitdir: %s/.git/worktrees/%s\n", REPO, s.id);
	test_write_file(p, line);
	run_ok(&s, "echo o > o.txt && git add o.txt && git commit -qm old");
	check_git("old", "log -1 --format=%%s spd/old");
	free(line);
	free(p);
	free(s.wt);
}
END_TEST

/*
 * The agent's commits cannot reach below the session's base, and a
 * commit that adds a known secret never lands: the branch stays and the
 * attempt ends with SECRET-IN-DIFF.
 */
START_TEST(test_agent_commit_secret_refused)
{
	const char *key = "sk-ant-loopLEAK0123456789abcdefXYZ";
	char *envf = paths_join(T.config, "environment"), *line, *r, *before;
	struct sess s = {0};

	ck_assert_int_eq(test_spd_stop(&T), 0);
	line = test_fmt("ANTHROPIC_API_KEY=%s\n", key);
	test_write_file(envf, line);
	test_spd_start(&T);
	start("leak", false, &s);
	before = git("rev-parse spd/leak");
	free(line);
	line = test_fmt(
	    "echo %s > k.txt && git add k.txt && git commit -qm key", key);
	r = run_sh(&s, line);
	TEST_ASSERT_CODE(r, "SECRET-IN-DIFF");
	ck_assert_msg(has(r, "k.txt:1") && !has(r, "loopLEAK"), "%s", r);
	free(r);
	r = git("rev-parse spd/leak");
	ck_assert_str_eq(before, r);
	free(r);
	r = git("log --all --format=%%H -1 --grep=^key$");
	ck_assert_msg(strcmp(r, "") == 0, "the commit reached the repository");
	free(r);
	free(before);
	free(line);
	free(envf);
	free(s.wt);
}
END_TEST

/* ---- checkpoints ---------------------------------------------------- */

/* Each run that changed the worktree is a checkpoint tied to its journal
 * row; restore puts the worktree back (and keeps what was there). */
START_TEST(test_checkpoints_and_restore)
{
	struct sess s = {0};
	char *r, *p, *c;
	json_t *j, *cps;

	start("ckpt", false, &s);
	run_ok(&s, "echo one > f.txt");
	run_ok(&s, "true"); /* changes nothing: no checkpoint */
	run_ok(&s, "echo two > f.txt && echo x > g.txt");
	r = rpcf(NULL, "session.log", "{\"id\":\"%s\"}", s.id);
	j = json_loads(r, 0, NULL);
	cps = json_object_get(json_object_get(j, "result"), "checkpoints");
	ck_assert_msg(json_array_size(cps) == 2, "checkpoints: %s", r);
	ck_assert_int_gt(json_integer_value(json_object_get(
			     json_array_get(cps, 0), "journal_row")),
			 0);
	ck_assert_msg(has(json_string_value(
			      json_object_get(json_array_get(cps, 1), "what")),
			  "echo two"),
		      "%s", r);
	json_decref(j);
	free(r);
	/* Back to checkpoint 1: f.txt says one, g.txt is gone. */
	r = rpcf(NULL, "session.restore", "{\"id\":\"%s\",\"n\":1}", s.id);
	ck_assert_msg(has(r, "\"result\""), "restore: %s", r);
	free(r);
	p = paths_join(s.wt, "f.txt");
	c = test_read_file(p);
	ck_assert_str_eq(c, "one\n");
	free(c);
	free(p);
	p = paths_join(s.wt, "g.txt");
	ck_assert_int_ne(access(p, F_OK), 0);
	free(p);
	/* The state before the restore is a checkpoint too. */
	r = rpcf(NULL, "session.restore", "{\"id\":\"%s\",\"n\":2}", s.id);
	ck_assert_msg(has(r, "\"result\""), "restore 2: %s", r);
	free(r);
	p = paths_join(s.wt, "g.txt");
	c = test_read_file(p);
	ck_assert_msg(c && strcmp(c, "x\n") == 0, "g.txt: %s", c);
	free(c);
	free(p);
	/* Never on the agent's branch. */
	check_git("0", "rev-list --count main..spd/ckpt");
	free(s.wt);
}
END_TEST

/* A new session of a big worktree: its first run ends before spd's
 * watch of the worktree is made, and the checkpoint of what it changed
 * waits for the watch (session.log "pending") instead of being dropped
 * until another run. */
START_TEST(test_first_checkpoint_waits_for_the_watch)
{
	char *repo = test_fmt("%s/big", T.dir), *p, *r, *out = NULL;
	struct sess s = {0};
	json_t *j, *cps;

	ck_assert_int_eq(
	    test_sh(NULL,
		    "mkdir -p '%s' && cd '%s' && git init -q -b main && "
		    "python3 -c 'import os\n"
		    "for d in range(100):\n"
		    " os.mkdir(\"d%%d\" %% d)\n"
		    " for f in range(300):\n"
		    "  open(\"d%%d/f%%d\" %% (d, f), \"w\").write(str(f))' && "
		    "git add -A && git -c user.name=o -c user.email=o@o commit "
		    "-qm big",
		    repo, repo),
	    0);
	p = test_fmt("{\"repo\":\"%s\",\"feature\":\"big\"}", repo);
	test_session_start(&T, p, s.id, s.token);
	free(p);
	s.wt = test_fmt("%s/worktrees/%s", T.state, s.id);
	r = run_sh(&s, "echo deferred > zz.txt");
	ck_assert_msg(has(r, "\"exit_code\":0"), "%s", r);
	free(r);
	settle(s.id);
	r = rpcf(NULL, "session.log", "{\"id\":\"%s\"}", s.id);
	j = json_loads(r, 0, NULL);
	cps = json_object_get(json_object_get(j, "result"), "checkpoints");
	ck_assert_msg(json_array_size(cps) == 1, "checkpoints: %s", r);
	json_decref(j);
	free(r);
	test_sh(&out, "git -C '%s' show refs/spd/checkpoints/%s:zz.txt", repo,
		s.id);
	ck_assert_msg(out && strcmp(out, "deferred\n") == 0,
		      "zz.txt in the checkpoint: %s", out);
	free(out);
	free(s.wt);
	free(repo);
}
END_TEST

/* A run of line in s, then its checkpoint's tree against the tree git
 * itself makes of the worktree (the same ignore rules, an index of its
 * own). */
static void run_and_compare(const struct sess *s, const char *line)
{
	char *r, *want = NULL, *got;

	run_ok(s, line);
	r = rpcf(NULL, "session.log", "{\"id\":\"%s\"}", s->id);
	got = git("rev-parse refs/spd/checkpoints/%s^{tree}", s->id);
	test_sh(&want,
		"cd '%s' && GIT_INDEX_FILE='%s/git-oracle.idx' git "
		"--git-dir='%s/.git' --work-tree=. add -A && "
		"GIT_INDEX_FILE='%s/git-oracle.idx' git --git-dir='%s/.git' "
		"write-tree",
		s->wt, T.dir, REPO, T.dir, REPO);
	ck_assert_ptr_nonnull(want);
	want[strcspn(want, "\n")] = '\0';
	ck_assert_msg(strcmp(want, got) == 0,
		      "after \"%s\": checkpoint tree %s, git's %s\n%s", line,
		      got, want, r);
	free(want);
	free(got);
	free(r);
}

/*
 * A run at once after the start, while the watch's first walk may still
 * be under way: what the walk found stamped since it began, and what its
 * watches saw after, make the same tree as git's, deletions and a
 * directory moved in whole included.  cc/ beside cc.conf (which sorts
 * before cc/x): a new entry of the top directory the walk may log as
 * "/", and cc/ must not then be taken for gone.
 */
START_TEST(test_checkpoint_tree_at_once)
{
	struct sess s = {0};
	char *files = NULL;

	/* Enough files that the walk takes a while. */
	test_sh(NULL,
		"cd '%s' && for d in $(seq 1 30); do mkdir -p d$d; for f in "
		"$(seq 1 30); do echo $d $f > d$d/f$f; done; done && mkdir cc "
		"&& echo c > cc/x && echo c > cc.conf && git add -A && git -c "
		"user.name=o -c user.email=o@o commit -qm many",
		REPO);
	start("now", false, &s);
	run_and_compare(&s, "echo r > top && echo x > d1/f1 && rm d2/f2 && rm "
			    "-rf d3 && mkdir "
			    "-p /tmp/m/n && echo m > /tmp/m/n/o && mv /tmp/m "
			    "d4/m && echo new > d5/new");
	run_and_compare(&s, "echo y > d6/f6 && rm -rf d7 && mv d8 d9/d8");
	free(files);
	free(s.wt);
}
END_TEST

/*
 * What the workspace's watch tells a checkpoint (only the names that
 * changed are read) gives the tree git itself makes of the worktree,
 * through new directories, renames, deletions, mode changes, an ignored
 * file, a symlink, a file replacing a directory, and files whose blobs
 * the repository has already.
 */
START_TEST(test_checkpoint_tree_is_gits)
{
	static const char *const steps[] = {
	    "mkdir -p x/y && echo a > x/y/z.txt && echo b > x/b.txt",
	    "mv x w",
	    "chmod +x a.txt",
	    "echo more >> a.txt && rm -rf w/y && echo i > ign.log",
	    "mkdir -p q && echo 1 > q/r && ln -s a.txt link",
	    "rm -rf q && echo file > q",
	    "echo '*.tmp' >> .gitignore && echo t > t.tmp",
	    "chmod -x a.txt && printf x > run.sh && chmod 755 run.sh",
	    /* Blobs the repository has: committed by the agent (its sync
	     * copies them before the checkpoint reads them), and copies. */
	    "echo c > c.txt && git add c.txt && git commit -qm c && cp "
	    "c.txt c3.txt && cp a.txt a2.txt && echo c2 >> c.txt",
	};
	struct sess s = {0};
	char *rows, *sql;

	start("ck", false, &s);
	/* The watch's first walk, then a run to start its log. */
	run_ok(&s, "echo 0 > zero.txt");
	usleep(300000);
	run_ok(&s, "echo 00 > zero.txt");
	for (size_t i = 0; i < sizeof(steps) / sizeof(*steps); i++)
		run_and_compare(&s, steps[i]);
	/* The watch told most of them. */
	sql = test_fmt("select detail from events where session='%s' and "
		       "kind='session.checkpoint'",
		       s.id);
	rows = test_journal_until(&T, sql, "\"read\":\"changes\"");
	ck_assert_msg(has(rows, "\"read\":\"changes\""),
		      "no checkpoint read only the changes: %s", rows);
	free(rows);
	free(sql);
	free(s.wt);
}
END_TEST

/*
 * After spd restarts (stopped, then killed), the first checkpoint reads
 * what changed since spd's index of the worktree was written, from what
 * the restart's walk found stamped since then (checkpoints/<id>.known),
 * not the whole worktree on spd's loop; and what changed while spd was
 * not running (a file changed, one deleted, a directory removed, one
 * made, a mode changed) is in it: the same tree as git's.
 */
START_TEST(test_checkpoint_after_restart_reads_changes)
{
	struct sess s = {0};
	char *rows, *sql;

	test_sh(NULL,
		"cd '%s' && for d in $(seq 1 20); do mkdir -p d$d; for f in "
		"$(seq 1 20); do echo $d $f > d$d/f$f; done; done && git add "
		"-A && git -c user.name=o -c user.email=o@o commit -qm many",
		REPO);
	start("rst", false, &s);
	run_and_compare(&s, "echo 0 > zero.txt");
	for (int round = 0; round < 2; round++) {
		if (round == 0)
			ck_assert_int_eq(test_spd_stop(&T), 0);
		else
			test_spd_kill(&T);
		/* While spd is not running: the operator's hands, or a
		 * process left behind. */
		ck_assert_int_eq(
		    test_sh(
			NULL,
			"cd '%s' && k=%d && echo down >> d$((k+1))/f1 && "
			"rm d$((k+2))/f2 && rm -rf d$((k+3)) && mkdir -p "
			"n$k/m && echo n > n$k/m/o && chmod +x d$((k+4))/f4 "
			"&& mv d$((k+5))/f5 d$((k+6))/moved",
			s.wt, round * 10),
		    0);
		/* Older than the start of the walk's log by more than a
		 * clock tick. */
		usleep(50 * 1000);
		test_spd_start(&T);
		run_and_compare(&s, round == 0 ? "echo after > after.txt"
					       : "echo again >> after.txt");
	}
	sql = test_fmt("select detail from events where session='%s' and "
		       "kind='session.checkpoint' order by id",
		       s.id);
	rows = test_journal_until(&T, sql, "\"n\":3");
	/* Checkpoints 2 and 3 came after the restarts. */
	ck_assert_msg(has(rows, "\"n\":3"), "checkpoints: %s", rows);
	for (int n = 2; n <= 3; n++) {
		char *key = test_fmt("\"n\":%d,", n), *row = strstr(rows, key);
		size_t len = row ? strcspn(row, "\n") : 0;

		ck_assert_msg(row && memmem(row, len, "\"read\":\"changes\"",
					    strlen("\"read\":\"changes\"")),
			      "checkpoint %d read the whole worktree: %s", n,
			      rows);
		free(key);
	}
	free(rows);
	free(sql);
	free(s.wt);
}
END_TEST

/* ---- the end -------------------------------------------------------- */

/* Uncommitted work at the end is committed on the branch (untracked
 * files too); the end names it and the merge command. */
START_TEST(test_end_commits_uncommitted_work)
{
	struct sess s = {0};
	char *r;

	start("wip", false, &s);
	run_ok(&s, "echo changed > a.txt && mkdir -p src && echo n > src/n.c");
	r = rpcf(NULL, "session.end", "{\"id\":\"%s\"}", s.id);
	ck_assert_msg(has(r, "\"committed\"") && has(r, "src/n.c") &&
			  has(r, "merge spd/wip"),
		      "end: %s", r);
	free(r);
	ck_assert_int_ne(access(s.wt, F_OK), 0);
	check_git("changed", "show spd/wip:a.txt");
	check_git("n", "show spd/wip:src/n.c");
	check_git("spd", "log -1 --format=%%cn spd/wip");
	free(s.wt);
}
END_TEST

/* What the agent stashed is kept at the end, under refs/spd/stash. */
START_TEST(test_end_keeps_stash)
{
	struct sess s = {0};
	char *r, *ref;

	start("st", false, &s);
	run_ok(&s, "echo stashed > a.txt && git stash -q");
	r = rpcf(NULL, "session.end", "{\"id\":\"%s\"}", s.id);
	ref = test_fmt("refs/spd/stash/%s/0", s.id);
	ck_assert_msg(has(r, ref), "end: %s", r);
	free(r);
	check_git("stashed", "show %s:a.txt", ref);
	free(ref);
	free(s.wt);
}
END_TEST

/* A secret in the uncommitted work: the end refuses, names the file and
 * keeps the worktree; --discard then drops it, listing what. */
START_TEST(test_end_secret_refused_then_discard)
{
	const char *key = "sk-ant-endLEAK0123456789abcdefXYZ";
	char *envf = paths_join(T.config, "environment"), *line, *r, *p;
	struct sess s = {0};

	ck_assert_int_eq(test_spd_stop(&T), 0);
	line = test_fmt("ANTHROPIC_API_KEY=%s\n", key);
	test_write_file(envf, line);
	test_spd_start(&T);
	start("endleak", false, &s);
	free(line);
	/* Written by the operator's hand, not a run: the scan at the end
	 * is what must find it. */
	p = paths_join(s.wt, "notes.txt");
	line = test_fmt("fine\n%s\n", key);
	test_write_file(p, line);
	r = rpcf(NULL, "session.end", "{\"id\":\"%s\"}", s.id);
	TEST_ASSERT_CODE(r, "SECRET-IN-DIFF");
	ck_assert_msg(has(r, "notes.txt:2") && !has(r, "endLEAK"), "%s", r);
	free(r);
	ck_assert_int_eq(access(p, F_OK), 0);
	check_git("0", "rev-list --count main..spd/endleak");
	r = rpcf(NULL, "session.end", "{\"id\":\"%s\",\"discard\":true}", s.id);
	ck_assert_msg(has(r, "\"discarded\"") && has(r, "notes.txt") &&
			  !has(r, "\"merge\""),
		      "end --discard: %s", r);
	free(r);
	ck_assert_int_ne(access(s.wt, F_OK), 0);
	check_git("0", "rev-list --count main..spd/endleak");
	free(p);
	free(line);
	free(envf);
	free(s.wt);
}
END_TEST

/* spd killed with SIGKILL while a run writes; restarted, the session
 * ends with the work on its branch. */
START_TEST(test_sigkill_loses_nothing)
{
	struct sess s = {0};
	char *r, *p;
	pid_t child;

	start("crash", false, &s);
	run_ok(&s, "echo committed > c1.txt && git add c1.txt && git commit "
		   "-qm c1");
	p = paths_join(s.wt, "c2.txt");
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		char *x = run_sh(&s, "echo uncommitted > c2.txt; sleep 30");
		free(x);
		_exit(0);
	}
	for (int i = 0; i < 600 && access(p, F_OK) != 0; i++)
		usleep(50000);
	ck_assert_int_eq(access(p, F_OK), 0);
	test_spd_kill(&T);
	waitpid(child, NULL, 0);
	test_spd_start(&T);
	r = rpcf(NULL, "session.end", "{\"id\":\"%s\"}", s.id);
	ck_assert_msg(has(r, "\"committed\"") && has(r, "c2.txt"), "end: %s",
		      r);
	free(r);
	check_git("committed", "show spd/crash:c1.txt");
	check_git("uncommitted", "show spd/crash:c2.txt");
	free(p);
	free(s.wt);
}
END_TEST

/* In place: nothing to merge, and the end says so. */
START_TEST(test_end_in_place_says_nothing_to_merge)
{
	struct sess s = {0};
	char *r;

	start("here", true, &s);
	r = rpcf(NULL, "session.end", "{\"id\":\"%s\"}", s.id);
	ck_assert_msg(has(r, "nothing to merge") && !has(r, "\"merge\""),
		      "end: %s", r);
	free(r);
	free(s.wt);
}
END_TEST

/* ---- the merge ------------------------------------------------------ */

START_TEST(test_merge)
{
	struct sess s = {0};
	char *r, *p;

	start("m", false, &s);
	run_ok(&s, "echo work > w.txt && git add w.txt && git commit -qm "
		   "'agent work'");
	/* The check fails (no done.txt): refused, nothing merged. */
	r = rpcf(NULL, "session.merge", "{\"id\":\"%s\"}", s.id);
	ck_assert_msg(has(r, "\"error\"") && has(r, "checks failed"), "%s", r);
	free(r);
	ck_assert_int_eq(test_sh(NULL, "test ! -e '%s/w.txt'", REPO), 0);
	/* done.txt only in the worktree, not committed: the checks run on
	 * the branch's tree, which lacks it, so they fail. */
	run_ok(&s, "touch done.txt");
	r = rpcf(NULL, "session.merge", "{\"id\":\"%s\"}", s.id);
	ck_assert_msg(has(r, "\"error\"") && has(r, "checks failed"), "%s", r);
	free(r);
	run_ok(&s, "git add done.txt && git commit -qm done");
	/* A dirty checkout: refused, saying so. */
	p = paths_join(REPO, "a.txt");
	test_write_file(p, "operator's edit\n");
	r = rpcf(NULL, "session.merge", "{\"id\":\"%s\"}", s.id);
	ck_assert_msg(has(r, "\"error\"") && has(r, "a.txt"), "%s", r);
	free(r);
	test_sh(NULL, "git -C '%s' checkout -q a.txt", REPO);
	/* Clean: merged, the file on the operator's branch and in the
	 * checkout, the agent's message in its history. */
	r = rpcf(NULL, "session.merge", "{\"id\":\"%s\"}", s.id);
	ck_assert_msg(has(r, "\"fast_forward\":true") &&
			  has(r, "\"into\":\"main\""),
		      "merge: %s", r);
	free(r);
	check_git("work", "show main:w.txt");
	check_git("agent work", "log -1 --skip=1 --format=%%s main");
	ck_assert_int_eq(test_sh(NULL, "test -f '%s/w.txt'", REPO), 0);
	check_git("", "status --porcelain");
	/* Again: nothing to merge; the end says it is merged already and
	 * gives no merge command. */
	r = rpcf(NULL, "session.merge", "{\"id\":\"%s\"}", s.id);
	ck_assert_msg(has(r, "nothing"), "%s", r);
	free(r);
	r = rpcf(NULL, "session.end", "{\"id\":\"%s\"}", s.id);
	ck_assert_msg(has(r, "merged into main already") &&
			  !has(r, "\"merge\""),
		      "%s", r);
	free(r);
	free(p);
	free(s.wt);
}
END_TEST

/* The operator's branch moved on: a merge commit; --force merges past a
 * failing check and says so. */
START_TEST(test_merge_commit_and_force)
{
	struct sess s = {0};
	char *r;

	start("mc", false, &s);
	run_ok(&s, "echo w > w.txt && git add w.txt && git commit -qm w");
	test_sh(NULL,
		"cd '%s' && echo o > o.txt && git add o.txt && git -c "
		"user.name=o -c user.email=o@o commit -qm operator",
		REPO);
	r = rpcf(NULL, "session.merge", "{\"id\":\"%s\",\"force\":true}", s.id);
	ck_assert_msg(has(r, "\"fast_forward\":false") &&
			  has(r, "\"forced\":true"),
		      "merge: %s", r);
	free(r);
	check_git("2", "log -1 --format=%%p main | wc -w");
	check_git("w", "show main:w.txt");
	check_git("o", "show main:o.txt");
	free(s.wt);
}
END_TEST

/* A commit the agent makes while the merge's checks run is not merged
 * unchecked: the merge refuses, saying the branch moved. */
START_TEST(test_merge_commit_during_checks)
{
	struct sess s = {0};
	char *r, *marker;
	pid_t child;
	int st;

	marker = paths_join(REPO, ".spd.conf");
	test_write_file(marker,
			"[check \"slow\"]\n"
			"\trun = \"sh -c 'touch started.log; sleep 3'\"\n");
	free(marker);
	test_sh(NULL,
		"cd '%s' && git add .spd.conf && git -c user.name=o -c "
		"user.email=o@o commit -qm slow",
		REPO);
	start("race", false, &s);
	run_ok(&s, "echo a > a2.txt && git add a2.txt && git commit -qm a2");
	marker = test_fmt("%s/merge/%s/started.log", T.state, s.id);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		r = rpcf(NULL, "session.merge", "{\"id\":\"%s\"}", s.id);
		_exit(strstr(r, "moved while the checks ran") ? 0 : 1);
	}
	for (int i = 0; i < 400 && access(marker, F_OK) != 0; i++)
		usleep(25000);
	ck_assert_msg(access(marker, F_OK) == 0, "the check never started");
	run_ok(&s, "echo b > b2.txt && git add b2.txt && git commit -qm b2");
	ck_assert_int_eq(waitpid(child, &st, 0), child);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "the merge did not refuse a branch that moved");
	ck_assert_int_eq(test_sh(NULL, "test ! -e '%s/a2.txt'", REPO), 0);
	check_git("1", "rev-list --count main..spd/race^");
	free(marker);
	free(s.wt);
}
END_TEST

/* A project with no checks: nothing failed, the merge goes ahead. */
START_TEST(test_merge_without_checks)
{
	struct sess s = {0};
	char *r;

	test_sh(NULL,
		"cd '%s' && git rm -q .spd.conf && git -c user.name=o -c "
		"user.email=o@o commit -qm 'no checks'",
		REPO);
	start("nc", false, &s);
	run_ok(&s, "echo n > n.txt && git add n.txt && git commit -qm n");
	r = rpcf(NULL, "session.merge", "{\"id\":\"%s\"}", s.id);
	ck_assert_msg(has(r, "\"forced\":false") &&
			  has(r, "\"fast_forward\":true"),
		      "%s", r);
	free(r);
	check_git("n", "show main:n.txt");
	free(s.wt);
}
END_TEST

/* After the end the checks cannot run: merge refuses without --force,
 * and with it merges the branch and says it was forced. */
START_TEST(test_merge_after_end)
{
	struct sess s = {0};
	char *r;

	start("late", false, &s);
	run_ok(&s, "echo l > l.txt");
	r = rpcf(NULL, "session.end", "{\"id\":\"%s\"}", s.id);
	ck_assert_msg(has(r, "\"committed\""), "end: %s", r);
	free(r);
	r = rpcf(NULL, "session.merge", "{\"id\":\"%s\"}", s.id);
	ck_assert_msg(has(r, "\"error\"") && has(r, "checks cannot run"), "%s",
		      r);
	free(r);
	ck_assert_int_eq(test_sh(NULL, "test ! -e '%s/l.txt'", REPO), 0);
	r = rpcf(NULL, "session.merge", "{\"id\":\"%s\",\"force\":true}", s.id);
	ck_assert_msg(has(r, "\"forced\":true"), "%s", r);
	free(r);
	check_git("l", "show main:l.txt");
	ck_assert_int_eq(test_sh(NULL, "test -f '%s/l.txt'", REPO), 0);
	free(s.wt);
}
END_TEST

/* ---- the agent's commits are taken off spd's loop ------------------- */

/* Whether fd has bytes to read now. */
static bool readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, 0) == 1;
}

/* The agent's HEAD in its worktree ("" when unreadable). */
static char *agent_head(const struct sess *s)
{
	char *out = NULL;

	test_sh(&out, "git -C '%s' rev-parse HEAD 2>/dev/null", s->wt);
	if (!out)
		out = strdup("");
	out[strcspn(out, "\n")] = '\0';
	return out;
}

/*
 * Send the agent's run of a commit of n new files, each of its own
 * content (n objects to stage, scan and copy), on a connection of
 * its own, and return that connection once the commit is made in the
 * worktree and 50 ms more have passed: the command has exited by then,
 * and spd is taking the commit.
 */
/* The agent's run of the shell line in s sent on a connection of its
 * own (the reply left to read there): the connection. */
static int send_run(const struct sess *s, const char *sh_line)
{
	json_t *argv = json_pack("[s, s, s]", "sh", "-c", sh_line);
	char *a = json_dumps(argv, JSON_COMPACT), *line;
	int fd;

	line = test_fmt("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"cmd.run\","
			"\"params\":{\"token\":\"%s\",\"session\":\"%s\","
			"\"yes\":true,\"argv\":%s}}\n",
			T.token, s->id, a);
	fd = test_spd_connect(&T);
	test_send(fd, line, strlen(line));
	free(line);
	free(a);
	json_decref(argv);
	return fd;
}

/* The operator's call of method (on session id, or none: NULL; more
 * params after, each with its leading comma) sent on a connection of its
 * own, the reply left to read there: the connection. */
static int send_call_more(const char *method, const char *id, const char *more)
{
	char *line = test_fmt("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
			      "\"%s\",\"params\":{\"token\":\"%s\"%s%s%s%s}}\n",
			      method, T.token, id ? ",\"id\":\"" : "",
			      id ? id : "", id ? "\"" : "", more);
	int fd = test_spd_connect(&T);

	test_send(fd, line, strlen(line));
	free(line);
	return fd;
}

static int send_call(const char *method, const char *id)
{
	return send_call_more(method, id, "");
}

/* The run's reply on fd: it ran and exited 0. */
static void reply_ok(int fd, const char *what)
{
	char *r = test_recv_line(fd, 60000);

	ck_assert_msg(has(r, "\"exit_code\":0"), "%s: %s", what,
		      r ? r : "no reply");
	free(r);
}

/* The session's branch is at the agent's HEAD. */
static void branch_at_head(const struct sess *s, const char *branch)
{
	char *head = agent_head(s);

	check_git(head, "rev-parse %s", branch);
	free(head);
}

static int commit_many(const struct sess *s, const char *tag, int n)
{
	char *before = agent_head(s), *now = NULL, *line;
	int fd;

	line = test_fmt("mkdir %s && cd %s && seq %d | "
			"sed 's/.*/echo %s-& > &.txt/' | sh && cd .. && "
			"git add %s && git commit -qm %s",
			tag, tag, n, tag, tag, tag);
	fd = send_run(s, line);
	free(line);
	/* A bound on a failure (60 s), never a timed assertion. */
	for (int i = 0; i < 6000; i++) {
		free(now);
		now = agent_head(s);
		if (strcmp(now, before) != 0 || readable(fd))
			break;
		usleep(10 * 1000);
	}
	ck_assert_msg(strcmp(now, before) != 0, "the agent did not commit");
	usleep(50 * 1000);
	free(now);
	free(before);
	return fd;
}

/* A ping on a connection of its own, answered. */
static void ping_own(void)
{
	int b = test_spd_connect(&T);
	char *r = test_call(&T, b, 2, "daemon.ping", NULL, true);

	ck_assert(has(r, "\"pong\":true"));
	free(r);
	close(b);
}

/*
 * A merge moves the operator's branch at its end, on spd's loop, once
 * its checkout's part is done on the thread pool: another session of the
 * same repository, whose guard watches that branch, goes on (its guard
 * is told of the move with it; a check of it in between would end its
 * attempt, GIT-CHANGED).  Its runs before, during and after the merge
 * are answered and exit 0, and both merges land on main.
 */
START_TEST(test_merge_beside_another_session)
{
	struct sess a = {0}, b = {0};
	char *r;
	int fr, fm;

	start("ma", false, &a);
	start("mb", false, &b);
	run_ok(&a, "echo a > wa.txt && touch done.txt && git add . && "
		   "git commit -qm 'a work'");
	run_ok(&b, "echo b > wb.txt && touch done.txt && git add . && "
		   "git commit -qm 'b work'");
	/* b runs while a merges. */
	fm = send_call("session.merge", a.id);
	for (int i = 0; i < 3; i++) {
		fr = send_run(&b, "echo more >> wb.txt");
		reply_ok(fr, "b's run during a's merge");
		close(fr);
	}
	r = test_recv_line(fm, 60000);
	ck_assert_msg(has(r, "\"into\":\"main\""), "a's merge: %s",
		      r ? r : "no reply");
	free(r);
	close(fm);
	check_git("a", "show main:wa.txt");
	run_ok(&b, "git commit -qam 'b more'");
	r = rpcf(NULL, "session.merge", "{\"id\":\"%s\"}", b.id);
	ck_assert_msg(has(r, "\"into\":\"main\"") &&
			  has(r, "\"fast_forward\":false"),
		      "b's merge: %s", r);
	free(r);
	check_git("b\nmore\nmore\nmore", "show main:wb.txt");
	check_git("a", "show main:wa.txt");
	free(a.wt);
	free(b.wt);
}
END_TEST

/*
 * The agent's commits are taken onto spd/<feature> on spd's thread pool:
 * with 4,000 new files committed, a ping sent on another connection once
 * the command has exited is answered before the run is (before, spd's
 * loop staged, scanned and copied the commit first, and the ping waited
 * for all of it).  The run's reply comes after its commit is on the
 * branch.  An order, not a timing, tried at most three times (a sync
 * shorter than the 50 ms the test waits cannot show it).
 */
START_TEST(test_commit_taken_off_loop)
{
	struct sess s = {0};
	bool seen = false;

	LOOP_ORDER_TEST();
	start("many", false, &s);
	for (int attempt = 0; attempt < 3 && !seen; attempt++) {
		char tag[16];
		int a;

		snprintf(tag, sizeof(tag), "m%d", attempt);
		a = commit_many(&s, tag, 4000);
		ping_own();
		seen = !readable(a);
		reply_ok(a, "the run");
		/* On the branch by the time the reply came. */
		branch_at_head(&s, "spd/many");
		close(a);
		if (seen)
			printf("test_commit_taken_off_loop: seen at attempt "
			       "%d\n",
			       attempt + 1);
	}
	ck_assert_msg(seen, "the ping's answer came after the run's, three "
			    "times");
	free(s.wt);
}
END_TEST

/*
 * Held-out checks are copied into spd's state on its thread pool: with
 * 8,000 files to seal, a ping sent on another connection just after
 * session.heldout is answered before it (before, spd's loop copied them
 * first, and the ping waited for all of it).  The seal then holds every
 * file, and a second seal replaces the first; the session's end removes
 * it.  An order, not a timing, tried at most three times.
 */
START_TEST(test_heldout_off_loop)
{
	struct sess s = {0};
	char *dir, *more, *r, *p;
	bool seen = false;

	LOOP_ORDER_TEST();
	start("seal", false, &s);
	dir = test_fmt("%s/checks", T.dir);
	ck_assert_int_eq(test_sh(NULL,
				 "mkdir -p '%s' && cd '%s' && for d in $(seq "
				 "80); do mkdir $d && (cd $d && seq 100 | "
				 "xargs touch); done && echo ok > 1/1",
				 dir, dir),
			 0);
	more = test_fmt(",\"dir\":\"%s\"", dir);
	for (int attempt = 0; attempt < 3 && !seen; attempt++) {
		int a = send_call_more("session.heldout", s.id, more);

		ping_own();
		seen = !readable(a);
		r = test_recv_line(a, 60000);
		ck_assert_msg(has(r, "\"files\":8000"), "heldout: %.300s",
			      r ? r : "no reply");
		free(r);
		close(a);
		if (seen)
			printf("test_heldout_off_loop: seen at attempt %d\n",
			       attempt + 1);
	}
	ck_assert_msg(seen, "the ping's answer came after the seal's, three "
			    "times");
	p = test_fmt("%s/heldout/%s/1/1", T.state, s.id);
	r = test_read_file(p);
	ck_assert_msg(r && strcmp(r, "ok\n") == 0, "%s: %s", p, r ? r : "none");
	free(r);
	free(p);
	/* The earlier set went: none of its .old is left (at most 30 s). */
	ck_assert_int_eq(test_sh(NULL,
				 "for i in $(seq 300); do [ -e '%s/heldout/"
				 "%s.old' ] || exit 0; sleep 0.1; done; exit 1",
				 T.state, s.id),
			 0);
	/* The end removes the set (on the remover's thread: its .ended
	 * name goes too). */
	r = rpcf(NULL, "session.end", "{\"id\":\"%s\"}", s.id);
	ck_assert_msg(has(r, "\"result\""), "end: %.300s", r);
	free(r);
	ck_assert_int_eq(
	    test_sh(NULL,
		    "for i in $(seq 300); do ls '%s/heldout' | "
		    "grep -q '%s' || exit 0; sleep 0.1; done; exit 1",
		    T.state, s.id),
	    0);
	free(more);
	free(dir);
	free(s.wt);
}
END_TEST

/*
 * A seal sent while a verification's held-out check runs (the seal's copy
 * is on the thread pool since issue 39): the check keeps the set it
 * began with, whole, and passes; the seal is answered once the
 * verification is, and then its set is the one in place.  The check is
 * seen running (its shell, by pgrep) before the seal is sent; it reads
 * the set 4 s after it began (before, the seal's copy of two files had
 * replaced and removed it by then: the check failed).
 */
START_TEST(test_heldout_waits_for_verify)
{
	struct sess s = {0};
	char *old, *nw, *more, *r, *p;
	int fv, fs;
	bool early = false;

	ck_assert_int_eq(
	    test_sh(NULL,
		    "cd '%s' && printf '[check \"held\"]\\n\\trun = sh "
		    ".spd-heldout/t.sh\\n' > .spd.conf && git commit -qam "
		    "held",
		    REPO),
	    0);
	start("held", false, &s);
	old = test_fmt("%s/old", T.dir);
	nw = test_fmt("%s/new", T.dir);
	ck_assert_int_eq(
	    test_sh(NULL,
		    "mkdir -p '%s' '%s' && echo OLD > '%s/t.txt' && echo NEW "
		    "> '%s/t.txt' && printf 'sleep 4; grep -q OLD "
		    ".spd-heldout/t.txt\\n' > "
		    "'%s/t.sh' && cp '%s/t.sh' '%s/t.sh'",
		    old, nw, old, nw, old, old, nw),
	    0);
	r = rpcf(NULL, "session.heldout", "{\"id\":\"%s\",\"dir\":\"%s\"}",
		 s.id, old);
	ck_assert_msg(has(r, "\"files\":2"), "heldout: %.300s", r);
	free(r);

	fv = send_call("session.verify", s.id);
	/* The check's shell, seen from here (a verification's workspace
	 * is read-only to it). */
	if (test_sh(NULL, "for i in $(seq 600); do pgrep -f '^sh "
			  "[.]spd-heldout/t[.]sh' >/dev/null && exit 0; "
			  "sleep 0.05; done; exit 1") != 0) {
		r = readable(fv) ? test_recv_line(fv, 1000) : NULL;
		ck_abort_msg("the held-out check did not start: %.500s",
			     r ? r : "no reply yet");
	}
	more = test_fmt(",\"dir\":\"%s\"", nw);
	fs = send_call_more("session.heldout", s.id, more);
	/* The seal must not answer (nor swap the set) before the
	 * verification has: which answer comes first. */
	for (int i = 0; i < 1200 && !readable(fv); i++) {
		if ((early = readable(fs)))
			break;
		usleep(50 * 1000);
	}
	r = test_recv_line(fv, 60000);
	ck_assert_msg(has(r, "\"result\":{\"pass\":true"),
		      "the check lost its held-out set: %.500s",
		      r ? r : "no reply");
	free(r);
	ck_assert_msg(!early, "the seal was answered while the check ran");
	r = test_recv_line(fs, 60000);
	ck_assert_msg(has(r, "\"files\":2") && has(r, "\"waited\":true"),
		      "heldout: %.300s", r ? r : "no reply");
	free(r);
	p = test_fmt("%s/heldout/%s/t.txt", T.state, s.id);
	r = test_read_file(p);
	ck_assert_msg(r && strcmp(r, "NEW\n") == 0, "%s: %s", p,
		      r ? r : "none");
	free(r);
	free(p);
	close(fv);
	close(fs);
	free(more);
	free(old);
	free(nw);
	free(s.wt);
}
END_TEST

/*
 * Two runs of one session, the second ending while spd takes the
 * first's commit of 4,000 files on the thread pool (it waits for the
 * agent's HEAD to move, then commits on top at once): it waits for that
 * sync, then spd takes its own.  Both runs are answered, exit 0, and
 * spd/<feature> ends at the agent's HEAD, both commits on it.
 */
START_TEST(test_second_run_waits_for_sync)
{
	struct sess s = {0};
	char *before, *line;
	int fa, fb;

	start("two", false, &s);
	before = agent_head(&s);
	line =
	    test_fmt("while [ \"$(git rev-parse HEAD)\" = %s ]; do "
		     "sleep 0.01; done; git commit -q --allow-empty -m second",
		     before);
	fb = send_run(&s, line);
	free(line);
	fa = commit_many(&s, "tw", 4000);
	reply_ok(fb, "the second run");
	reply_ok(fa, "the first run");
	branch_at_head(&s, "spd/two");
	check_git("second", "log -1 --format=%%s spd/two");
	check_git("tw-4000", "show spd/two:tw/4000.txt");
	close(fa);
	close(fb);
	free(before);
	free(s.wt);
}
END_TEST

/* session.log of s, parsed (the caller frees it); its checkpoints in
 * *cps (borrowed) and whether one is pending. */
static json_t *ck_log(const struct sess *s, json_t **cps, bool *pending)
{
	char *r = rpcf(NULL, "session.log", "{\"id\":\"%s\"}", s->id);
	json_t *j = json_loads(r, 0, NULL), *res;

	ck_assert_msg(j != NULL, "session.log: %s", r);
	free(r);
	res = json_object_get(j, "result");
	*cps = json_object_get(res, "checkpoints");
	*pending = json_is_true(json_object_get(res, "pending"));
	return j;
}

/*
 * A run's checkpoint is read on spd's thread pool.  Once a run that
 * wrote 4,000 files is answered, a session.log sent at once waits for
 * that checkpoint and lists it, and a ping sent after it on another
 * connection is answered first (before, spd's loop read the 4,000 files
 * and then answered both in turn).  The session's next run, sent then,
 * waits for it: the checkpoint holds the files as the first run left
 * them, and the next one the second run's change.  A status asked as a
 * checkpoint begins waits too and lists every new file.  An order, not a
 * timing, tried at most three times.
 */
START_TEST(test_checkpoint_taken_off_loop)
{
	struct sess s = {0};
	bool seen = false;

	LOOP_ORDER_TEST();
	start("ckoff", false, &s);
	run_ok(&s, "echo first > first.txt");
	for (int attempt = 0; attempt < 3 && !seen; attempt++) {
		char *r, *line, *sha;
		json_t *j, *cps, *last;
		size_t before;
		bool pending;
		int fc, fl;

		j = ck_log(&s, &cps, &pending);
		before = json_array_size(cps);
		json_decref(j);
		line = test_fmt("mkdir k%d && cd k%d && seq 4000 | "
				"sed 's/.*/echo k%d-& > &.txt/' | sh",
				attempt, attempt, attempt);
		r = run_sh(&s, line);
		free(line);
		ck_assert_msg(has(r, "\"exit_code\":0"), "the run: %s", r);
		free(r);
		/* session.log, then a ping, each on a connection of its own:
		 * the log waits for the checkpoint, the ping must not. */
		fl = send_call("session.log", s.id);
		ping_own();
		seen = !readable(fl);
		/* The next run, sent while the checkpoint may be out. */
		line = test_fmt("echo changed > k%d/1.txt", attempt);
		fc = send_run(&s, line);
		free(line);
		r = test_recv_line(fl, 60000);
		j = r ? json_loads(r, 0, NULL) : NULL;
		cps = json_object_get(json_object_get(j, "result"),
				      "checkpoints");
		ck_assert_msg(json_array_size(cps) == before + 1,
			      "the log after the run: %.300s", r);
		ck_assert_int_eq(json_integer_value(json_object_get(
				     json_array_get(cps, before), "files")),
				 4000);
		json_decref(j);
		free(r);
		close(fl);
		reply_ok(fc, "the next run");
		close(fc);
		settle(s.id);
		j = ck_log(&s, &cps, &pending);
		ck_assert_msg(json_array_size(cps) == before + 2,
			      "checkpoints: %zu, then %zu", before,
			      json_array_size(cps));
		last = json_array_get(cps, before);
		ck_assert_int_eq(
		    json_integer_value(json_object_get(last, "files")), 4000);
		sha = test_fmt("k%d-1", attempt);
		check_git(sha, "show %s:k%d/1.txt",
			  json_string_value(json_object_get(last, "commit")),
			  attempt);
		free(sha);
		last = json_array_get(cps, before + 1);
		check_git("changed", "show %s:k%d/1.txt",
			  json_string_value(json_object_get(last, "commit")),
			  attempt);
		json_decref(j);
		/* A status asked as a run's checkpoint begins waits for it
		 * (with one out it could list nothing uncommitted). */
		line = test_fmt("cd k%d && seq 400 | "
				"sed 's/.*/echo e-& > e&.txt/' | sh",
				attempt);
		r = run_sh(&s, line);
		free(line);
		ck_assert_msg(has(r, "\"exit_code\":0"), "the run: %s", r);
		free(r);
		r = rpcf(NULL, "session.status", "{\"id\":\"%s\"}", s.id);
		j = json_loads(r, 0, NULL);
		ck_assert_msg(
		    json_integer_value(json_object_get(
			json_object_get(j, "result"), "uncommitted_count")) ==
			1 + (attempt + 1) * 4400,
		    "status: %.300s", r);
		json_decref(j);
		free(r);
		settle(s.id);
		if (seen)
			printf("test_checkpoint_taken_off_loop: seen at "
			       "attempt %d\n",
			       attempt + 1);
	}
	ck_assert_msg(seen, "the checkpoint was taken before the ping's "
			    "answer, three times");
	free(s.wt);
}
END_TEST

/*
 * spd stopped just after a run of 2,000 new files is answered, while
 * their checkpoint is read on the thread pool: it waits for the read and
 * exits 0; after the restart the session's next checkpoint holds the
 * files.  Nothing is lost, and the checkpoints are numbered on.
 */
START_TEST(test_stop_while_checkpoint_taken)
{
	struct sess s = {0};
	char *r, *out = NULL;
	json_t *j, *cps, *last;
	size_t before;
	bool pending;
	int status;

	start("ckstop", false, &s);
	run_ok(&s, "echo first > first.txt");
	j = ck_log(&s, &cps, &pending);
	before = json_array_size(cps);
	json_decref(j);
	r = run_sh(&s, "mkdir cs && cd cs && seq 2000 | "
		       "sed 's/.*/echo cs-& > &.txt/' | sh");
	ck_assert_msg(has(r, "\"exit_code\":0"), "the run: %s", r);
	free(r);
	status = test_spd_stop(&T);
	if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0))
		test_sh(&out, "cat '%s'/spd.stderr.* | tail -c 3000", T.dir);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "spd's exit status %d: %s", status, out ? out : "");
	test_spd_start(&T);
	run_ok(&s, "echo after > after.txt");
	j = ck_log(&s, &cps, &pending);
	ck_assert_msg(json_array_size(cps) >= before + 1, "checkpoints: %zu",
		      json_array_size(cps));
	last = json_array_get(cps, json_array_size(cps) - 1);
	ck_assert_int_eq(json_integer_value(json_object_get(last, "n")),
			 (json_int_t)json_array_size(cps));
	check_git("cs-2000", "show %s:cs/2000.txt",
		  json_string_value(json_object_get(last, "commit")));
	check_git("after", "show %s:after.txt",
		  json_string_value(json_object_get(last, "commit")));
	json_decref(j);
	free(s.wt);
}
END_TEST

/* Which threads of process pid are in openat(2), where one waits for a
 * FIFO's writer (any other open here returns at once): IN_OPEN_ANY, and
 * IN_OPEN_LOOP when one is the process's first thread, spd's loop. */
#define IN_OPEN_ANY 1
#define IN_OPEN_LOOP 2
static int in_open(pid_t pid)
{
	char *out = NULL;
	int in = 0;

	test_sh(&out,
		"cd /proc/%d/task && for t in *; do "
		"echo \"$t $(cut -d' ' -f1 $t/syscall 2>/dev/null)\"; done",
		(int)pid);
	for (char *l = out; l && *l;) {
		char *nl = strchr(l, '\n'), *sp = strchr(l, ' ');

		if (sp && atol(sp + 1) == SYS_openat)
			in |= IN_OPEN_ANY |
			      (atol(l) == (long)pid ? IN_OPEN_LOOP : 0);
		if (!nl)
			break;
		l = nl + 1;
	}
	free(out);
	return in;
}

/* A line of patterns to whoever waits to read fifo, if anyone does (a
 * reader gone meanwhile: EPIPE, nothing to feed). */
static void feed_fifo(const char *fifo)
{
	int w = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);

	if (w >= 0) {
		ck_assert(write(w, "*.tmp\n", 6) == 6 || errno == EPIPE);
		close(w);
	}
}

/*
 * Until fd (a call's connection) has its reply, at most 60 s: each read
 * of fifo seen waiting in spd is fed a line, and only then, after a ping
 * (once) is sent on a connection of its own.  What in_open saw; *pong
 * when that ping was answered while the read waited.
 */
static int feed_waiting(int fd, const char *fifo, bool *pong)
{
	bool pinged = false;
	int in, seen = 0;

	for (int i = 0; i < 6000 && !readable(fd); i++) {
		if (!(in = in_open(T.pid))) {
			usleep(10 * 1000);
			continue;
		}
		seen |= in;
		if (!pinged) {
			int fp = send_call("daemon.ping", NULL);
			char *r = test_recv_line(fp, 10000);

			*pong = has(r, "\"pong\":true");
			pinged = true;
			free(r);
			close(fp);
		}
		feed_fifo(fifo);
	}
	return seen;
}

/*
 * In place, what a verification reads of the checkout (the diff its
 * guard scans, the walk its check's hidden list needs) is read on spd's
 * thread pool: the operator made sub/ in the checkout with a link named
 * .gitignore in it to a FIFO, and each read of it waits there until the
 * test writes a line to it.  spd's loop is never the thread that waits, and
 * a ping sent while one waits is answered.  Then the check runs and
 * passes.  Before, the diff and the walk ran on the loop: no client was
 * answered until the FIFO was written.  An order, not a timing.
 */
START_TEST(test_verify_reads_off_loop)
{
	struct sess s = {0};
	char *fifo, *line, *r;
	int fv, seen;
	bool pong = false;

	LOOP_ORDER_TEST();
	signal(SIGPIPE, SIG_IGN);
	start("ckwalk", true, &s);
	run_ok(&s, "echo x > done.txt");
	/* A link to a FIFO outside the checkout: writing to it changes no
	 * .gitignore that the session's watch sees (a write to one makes
	 * the next read walk the checkout again). */
	fifo = test_fmt("%s/fifo", T.dir);
	ck_assert(mkfifo(fifo, 0644) == 0);
	line = test_fmt("%s/sub", REPO);
	ck_assert(mkdir(line, 0755) == 0);
	free(line);
	line = test_fmt("%s/sub/.gitignore", REPO);
	ck_assert(symlink(fifo, line) == 0);
	free(line);
	fv = send_call("session.verify", s.id);
	seen = feed_waiting(fv, fifo, &pong);
	ck_assert_msg(seen & IN_OPEN_ANY, "no read of sub/.gitignore waited");
	ck_assert_msg(!(seen & IN_OPEN_LOOP),
		      "spd's loop waited on sub/.gitignore");
	ck_assert_msg(pong, "no answer to a ping while a read waited");
	r = test_recv_line(fv, 60000);
	ck_assert_msg(has(r, "\"exit\":0") && !has(r, "\"exit\":-1"),
		      "verify: %.400s", r ? r : "no reply");
	free(r);
	close(fv);
	line = test_fmt("%s/sub/.gitignore", REPO);
	ck_assert(unlink(line) == 0);
	free(line);
	free(fifo);
	free(s.wt);
}
END_TEST

/*
 * Session s's checkpoints 1 (one.txt) and 2 (two.txt) made; then, as the
 * operator, sub/ in its worktree with a link named .gitignore in it to a
 * new FIFO at fifo, and sub/kept.txt; then session.restore to checkpoint
 * 1 sent on a connection of its own, returned.
 */
static int restore_waiting(struct sess *s, const char *fifo)
{
	char *p;
	int fd;

	run_ok(s, "echo one > one.txt");
	run_ok(s, "echo two > two.txt");
	ck_assert(mkfifo(fifo, 0644) == 0);
	p = test_fmt("%s/sub", s->wt);
	ck_assert(mkdir(p, 0755) == 0);
	free(p);
	p = test_fmt("%s/sub/.gitignore", s->wt);
	ck_assert(symlink(fifo, p) == 0);
	free(p);
	p = test_fmt("%s/sub/kept.txt", s->wt);
	test_write_file(p, "kept\n");
	free(p);
	fd = send_call_more("session.restore", s->id, ",\"n\":1");
	return fd;
}

/*
 * A restore reads the worktree (the checkpoint of what is there now) and
 * checks the checkpoint out on spd's thread pool: the operator put sub/
 * in the worktree with a link named .gitignore in it to a FIFO, and a
 * file beside it, and each read of the link waits there until the test
 * writes a line to it.  spd's loop is never the thread that waits, a
 * ping sent meanwhile is answered, and the worktree is as checkpoint 1
 * had it, with what was there before a checkpoint of its own.  Before,
 * the restore ran on the loop whole (3.2 s for 10,000 files, every
 * client waiting).  An order, not a timing.
 */
START_TEST(test_restore_off_loop)
{
	struct sess s = {0};
	char *fifo, *p, *r;
	int fv, seen;
	bool pong = false;

	LOOP_ORDER_TEST();
	signal(SIGPIPE, SIG_IGN);
	start("rswalk", false, &s);
	fifo = test_fmt("%s/fifo", T.dir);
	fv = restore_waiting(&s, fifo);
	seen = feed_waiting(fv, fifo, &pong);
	ck_assert_msg(seen & IN_OPEN_ANY, "no read of sub/.gitignore waited");
	ck_assert_msg(!(seen & IN_OPEN_LOOP),
		      "spd's loop waited on sub/.gitignore");
	ck_assert_msg(pong, "no answer to a ping while a read waited");
	r = test_recv_line(fv, 60000);
	ck_assert_msg(has(r, "\"result\"") && has(r, "\"saved\":3"),
		      "restore: %.400s", r ? r : "no reply");
	free(r);
	close(fv);
	p = test_fmt("%s/two.txt", s.wt);
	ck_assert_msg(access(p, F_OK) != 0, "two.txt is still there");
	free(p);
	p = test_fmt("%s/one.txt", s.wt);
	ck_assert_msg(access(p, F_OK) == 0, "one.txt is gone");
	free(p);
	/* What was there is checkpoint 3: two.txt and the operator's file. */
	check_git("two", "show refs/spd/checkpoints/%s:two.txt", s.id);
	check_git("kept", "show refs/spd/checkpoints/%s:sub/kept.txt", s.id);
	free(fifo);
	free(s.wt);
}
END_TEST

/*
 * spd stopped while a restore reads the worktree (the read waits on the
 * FIFO as above, fed once spd was told to stop): spd waits for it and
 * exits 0.  What the worktree held is recorded as checkpoint 3, its row
 * and its journal event written (the journal closes after the session
 * store now), and nothing was restored: two.txt and the operator's file
 * are still there.  After the restart the journal is intact.
 */
START_TEST(test_stop_while_restoring)
{
	struct sess s = {0};
	char *fifo, *p, *r, *out = NULL;
	json_t *j, *cps, *last;
	bool pending;
	int fv, status = -1, waited = 0;

	LOOP_ORDER_TEST();
	signal(SIGPIPE, SIG_IGN);
	start("rsstop", false, &s);
	fifo = test_fmt("%s/fifo", T.dir);
	fv = restore_waiting(&s, fifo);
	for (int i = 0; i < 6000 && !in_open(T.pid); i++)
		usleep(10 * 1000);
	ck_assert_msg(in_open(T.pid), "no read of sub/.gitignore waited");
	ck_assert(kill(T.pid, SIGTERM) == 0);
	for (int i = 0; i < 6000 && !waited; i++) {
		feed_fifo(fifo);
		waited = waitpid(T.pid, &status, WNOHANG) == T.pid;
		if (!waited)
			usleep(10 * 1000);
	}
	ck_assert_msg(waited, "spd did not stop");
	T.pid = 0;
	close(fv);
	if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0))
		test_sh(&out, "cat '%s'/spd.stderr.* | tail -c 3000", T.dir);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "spd's exit status %d: %s", status, out ? out : "");
	/* The link goes before spd reads the worktree again. */
	p = test_fmt("%s/sub/.gitignore", s.wt);
	ck_assert(unlink(p) == 0);
	free(p);
	test_spd_start(&T);
	j = ck_log(&s, &cps, &pending);
	ck_assert_int_eq(json_array_size(cps), 3);
	last = json_array_get(cps, 2);
	ck_assert_str_eq(json_string_value(json_object_get(last, "what")),
			 "before restoring checkpoint 1");
	check_git("kept", "show %s:sub/kept.txt",
		  json_string_value(json_object_get(last, "commit")));
	json_decref(j);
	p = test_fmt("%s/two.txt", s.wt);
	ck_assert_msg(access(p, F_OK) == 0, "two.txt was restored away");
	free(p);
	r = rpcf(NULL, "journal.query",
		 "{\"session\":\"%s\",\"kind\":\"session.checkpoint\"}", s.id);
	ck_assert_msg(has(r, "\"n\":3"), "journal: %.600s", r);
	free(r);
	r = rpcf(NULL, "journal.verify", "{}");
	ck_assert_msg(has(r, "\"ok\":true"), "journal.verify: %.400s", r);
	free(r);
	free(fifo);
	free(s.wt);
}
END_TEST

/* The file the run wrote in s's workspace, its trailing newline cut. */
static char *ws_file(const struct sess *s, const char *name)
{
	char *p = test_fmt("%s/%s", s->wt, name), *c = test_read_file(p);
	size_t n;

	ck_assert_msg(c != NULL, "%s: not written", p);
	free(p);
	n = strlen(c);
	while (n && c[n - 1] == '\n')
		c[--n] = '\0';
	return c;
}

/*
 * A run cannot make a FIFO in its workspace, in place or in a worktree:
 * libgit2 opening a FIFO named .gitignore or .gitattributes waits for a
 * writer that never comes, and with it the session's checkpoint, every
 * call that waits for it, its end and spd's stop (found: an agent's
 * approved mkfifo left every later call of its session unanswered).  In
 * the run's own /tmp it may.  The session goes on: the next run, its
 * checkpoint, its status and its end.
 */
START_TEST(test_no_fifo_in_workspace)
{
	if (syscall(444 /* landlock_create_ruleset */, NULL, 0, 1UL) < 1)
		TEST_SKIP_LAYER("landlock",
				"no Landlock here: the mount plan alone "
				"cannot refuse a FIFO in the workspace");
	for (int in_place = 0; in_place < 2; in_place++) {
		struct sess s = {0};
		struct stat st;
		char *r, *c, *p;

		start(in_place ? "fifo-ip" : "fifo-wt", in_place, &s);
		run_ok(&s, "mkdir -p sub; mkfifo sub/.gitignore 2>err1.txt; "
			   "echo $? > made1.txt; mkfifo .gitattributes "
			   "2>/dev/null; echo $? > made2.txt; mkfifo /tmp/f "
			   "&& test -p /tmp/f; echo $? > tmp.txt");
		c = ws_file(&s, "made1.txt");
		ck_assert_msg(strcmp(c, "0") != 0, "mkfifo in the workspace "
						   "worked");
		free(c);
		c = ws_file(&s, "err1.txt");
		ck_assert_msg(has(c, "Permission denied"), "mkfifo: %s", c);
		free(c);
		c = ws_file(&s, "made2.txt");
		ck_assert_msg(strcmp(c, "0") != 0, "a FIFO at the top");
		free(c);
		/* Not with the workspace bound below /tmp: a FIFO there
		 * would be in it. */
		c = ws_file(&s, "tmp.txt");
		if (strncmp(s.wt, "/tmp/", 5) != 0 &&
		    strncmp(s.wt, "/var/tmp/", 9) != 0)
			ck_assert_msg(strcmp(c, "0") == 0, "mkfifo in /tmp: %s",
				      c);
		else
			ck_assert_msg(strcmp(c, "0") != 0,
				      "mkfifo in /tmp, the workspace below "
				      "it: %s",
				      c);
		free(c);
		p = test_fmt("%s/sub/.gitignore", s.wt);
		ck_assert_msg(lstat(p, &st) < 0, "%s was made", p);
		free(p);
		run_ok(&s, "echo next > next.txt");
		r = rpcf(NULL, "session.status", "{\"id\":\"%s\"}", s.id);
		/* In place, the checkout is the operator's: no list. */
		ck_assert_msg(
		    has(r, in_place ? "\"state\":\"active\"" : "next.txt"),
		    "status: %.400s", r);
		free(r);
		r = rpcf(NULL, "session.end", "{\"id\":\"%s\"}", s.id);
		ck_assert_msg(has(r, "\"result\""), "end: %.400s", r);
		free(r);
		free(s.wt);
	}
}
END_TEST

/*
 * spd stopped while it takes an agent's commit on the thread pool: it
 * waits for it and exits 0; the commit is on spd/<feature> then, or is
 * taken at the next spd's first run of the session.  Nothing is lost.
 */
START_TEST(test_stop_while_commit_taken)
{
	struct sess s = {0};
	char *r, *out = NULL;
	int a, status;

	start("stop", false, &s);
	a = commit_many(&s, "st", 1000);
	status = test_spd_stop(&T);
	if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0))
		test_sh(&out, "cat '%s'/spd.stderr.* | tail -c 3000", T.dir);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "spd's exit status %d: %s", status, out ? out : "");
	/* Answered or closed: a read ends at once either way. */
	while ((r = test_recv_line(a, 10000)))
		free(r);
	close(a);
	test_spd_start(&T);
	run_ok(&s, "true");
	branch_at_head(&s, "spd/stop");
	check_git("st-1000", "show spd/stop:st/1000.txt");
	free(s.wt);
}
END_TEST

static Suite *loop_suite(void)
{
	Suite *s = suite_create("loop");
	TCase *tc = tcase_create("e2e");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_agent_commits_land_on_branch);
	tcase_add_test(tc, test_agent_commit_secret_refused);
	tcase_add_test(tc, test_commit_taken_off_loop);
	tcase_add_test(tc, test_stop_while_commit_taken);
	tcase_add_test(tc, test_second_run_waits_for_sync);
	tcase_add_test(tc, test_checkpoint_taken_off_loop);
	tcase_add_test(tc, test_stop_while_checkpoint_taken);
	tcase_add_test(tc, test_no_fifo_in_workspace);
	tcase_add_test(tc, test_verify_reads_off_loop);
	tcase_add_test(tc, test_restore_off_loop);
	tcase_add_test(tc, test_stop_while_restoring);
	tcase_add_test(tc, test_heldout_off_loop);
	tcase_add_test(tc, test_heldout_waits_for_verify);
	tcase_add_test(tc, test_older_session_upgraded);
	tcase_add_test(tc, test_checkpoints_and_restore);
	tcase_add_test(tc, test_first_checkpoint_waits_for_the_watch);
	tcase_add_test(tc, test_checkpoint_tree_is_gits);
	tcase_add_test(tc, test_checkpoint_tree_at_once);
	tcase_add_test(tc, test_checkpoint_after_restart_reads_changes);
	tcase_add_test(tc, test_end_commits_uncommitted_work);
	tcase_add_test(tc, test_end_secret_refused_then_discard);
	tcase_add_test(tc, test_end_keeps_stash);
	tcase_add_test(tc, test_sigkill_loses_nothing);
	tcase_add_test(tc, test_end_in_place_says_nothing_to_merge);
	tcase_add_test(tc, test_merge);
	tcase_add_test(tc, test_merge_beside_another_session);
	tcase_add_test(tc, test_merge_commit_and_force);
	tcase_add_test(tc, test_merge_after_end);
	tcase_add_test(tc, test_merge_without_checks);
	tcase_add_test(tc, test_merge_commit_during_checks);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(loop_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

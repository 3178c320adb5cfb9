/*
 * End-to-end tests of sessions (issue 4) and of the policy gate and its
 * approvals (issue 5): a real spd and sandboxd in temporary directories,
 * a real git repository made with the git CLI, spoken to over spd's
 * socket and through spctl, the journal read with sqlite3 from the file.
 *
 * Tests marked "BUG:" show a defect that is still open; they fail until
 * the code is fixed.
 */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/spdproc.h"
#include "tests/lib/testlib.h"
#include "client/termsafe.h"
#include "common/paths.h"
#include "common/util.h"

static struct test_spd T;
static char *REPO; /* T.dir/repo, a fresh git repository per test */

/* The project's configuration in the test repository: one check that
 * passes only once the agent made hello.txt. */
#define PROJECT_CONF "[check \"unit\"]\n\trun = test -f hello.txt\n"

static bool has(const char *hay, const char *needle)
{
	return hay && strstr(hay, needle) != NULL;
}

/* A repository at dir with a.txt, b.txt, .gitignore and .spd.conf
 * committed. */
static void make_repo(const char *dir, const char *conf)
{
	char *files = test_fmt("echo original > a.txt; echo other > b.txt; "
			       "printf '*.log\\n.env\\n' > .gitignore; "
			       "printf '%%s' '%s' > .spd.conf",
			       conf);

	test_make_repo(dir, files);
	free(files);
}

static void setup(void)
{
	test_spd_prepare(&T, NULL);
	test_spd_start(&T);
	REPO = paths_join(T.dir, "repo");
	make_repo(REPO, PROJECT_CONF);
}

static void teardown(void)
{
	free(REPO);
	REPO = NULL;
	test_spd_stop_clean(&T);
}

/* ---- talking to spd -------------------------------------------------- */

/* Send method with params (a JSON object text) and token (NULL: the
 * operator's) on fd; return the response line (test_rpc_on). */
static char *rpc_on(int fd, const char *token, const char *method,
		    const char *params)
{
	char *r = test_rpc_on(&T, fd, token, method, params, 30000);

	ck_assert_msg(r != NULL, "no response to %s", method);
	return r;
}

static char *rpc(const char *token, const char *method, const char *params)
{
	int fd = test_spd_connect(&T);
	char *r = rpc_on(fd, token, method, params);

	close(fd);
	return r;
}

/* rpc with params built from a format. */
static char *rpcf(const char *token, const char *method, const char *f, ...)
    __attribute__((format(printf, 3, 4)));
static char *rpcf(const char *token, const char *method, const char *f, ...)
{
	va_list ap;
	char *params = NULL, *r;

	va_start(ap, f);
	ck_assert(vasprintf(&params, f, ap) >= 0);
	va_end(ap);
	r = rpc(token, method, params);
	free(params);
	return r;
}

struct session {
	char id[17];
	char token[65];
	char *worktree;
};

static void session_free(struct session *s)
{
	free(s->worktree);
	s->worktree = NULL;
}

/* session.start over the socket; aborts the test on failure. */
static void start_session(const char *repo, const char *feature, bool in_place,
			  struct session *s)
{
	char *params = test_fmt("{\"repo\":\"%s\",\"feature\":\"%s\"%s}", repo,
				feature, in_place ? ",\"in_place\":true" : "");

	test_session_start(&T, params, s->id, s->token);
	/* The reply's worktree path may be redacted (issue 6 hides the
	 * state dir's value); where it is, is known from the layout. */
	s->worktree = in_place ? strdup(repo)
			       : test_fmt("%s/worktrees/%s", T.state, s->id);
	free(params);
}

/* spctl with the agent's token; returns the exit code. */
static int agent_spctl(const struct session *s, char *const args[],
		       char **ret_out, char **ret_err)
{
	char *tok = test_fmt("SPD_SESSION_TOKEN=%s", s->token);
	char *env[] = {tok, NULL};
	int st = test_spctl(&T, args, env, ret_out, ret_err);

	free(tok);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int op_spctl(char *const args[], char **ret_out, char **ret_err)
{
	int st = test_spctl(&T, args, NULL, ret_out, ret_err);

	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *wt_file(const struct session *s, const char *rel)
{
	char *p = paths_join(s->worktree, rel);
	char *c = test_read_file(p);

	free(p);
	return c;
}

static bool wt_exists(const struct session *s, const char *rel)
{
	char *p = paths_join(s->worktree, rel);
	struct stat st;
	bool e = lstat(p, &st) == 0;

	free(p);
	return e;
}

/* The agent's run in a thread: it blocks until a person decides. */
struct agent_run {
	struct session *s;
	char *argv[8];
	int rc;
	char *out, *err;
};

static void *agent_run_thread(void *data)
{
	struct agent_run *a = data;

	a->rc = agent_spctl(a->s, a->argv, &a->out, &a->err);
	return NULL;
}

/* Poll approval.list until an ask of session id appears; its id. */
static long wait_for_ask(const char *sid)
{
	for (int i = 0; i < 1000; i++) {
		char *r = rpc(NULL, "approval.list", NULL);
		json_t *j = json_loads(r, 0, NULL);
		json_t *pend =
		    json_object_get(json_object_get(j, "result"), "pending");
		long id = -1;

		for (size_t k = 0; k < json_array_size(pend); k++) {
			json_t *e = json_array_get(pend, k);
			if (json_is_true(json_object_get(e, "waiting")) &&
			    !strcmp(
				json_string_value(json_object_get(e, "session"))
				    ?: "",
				sid))
				id = (long)json_integer_value(
				    json_object_get(e, "id"));
		}
		json_decref(j);
		free(r);
		if (id > 0)
			return id;
		usleep(10000);
	}
	ck_abort_msg("no ask appeared");
	return -1;
}

/* The agent runs argv (NULL-terminated, at most 5 words) through spctl;
 * the operator approves its ask.  Returns spctl's exit code. */
static int agent_run_approved(struct session *s, char *const argv[],
			      char **ret_out, char **ret_err)
{
	struct agent_run a = {0};
	pthread_t th;
	long aid;
	char *r;

	a.s = s;
	a.argv[0] = "run";
	a.argv[1] = "--";
	for (size_t i = 0; argv[i] && i < 5; i++)
		a.argv[2 + i] = argv[i];
	ck_assert_int_eq(pthread_create(&th, NULL, agent_run_thread, &a), 0);
	aid = wait_for_ask(s->id);
	r = rpcf(NULL, "approval.decide", "{\"id\":%ld,\"approve\":true}", aid);
	TEST_ASSERT_CODE(r, "ok");
	free(r);
	pthread_join(th, NULL);
	*ret_out = a.out;
	*ret_err = a.err;
	return a.rc;
}

/* ---- sessions -------------------------------------------------------- */

/* Start, work as the agent, diff, verify (fail then pass), end. */
START_TEST(test_session_lifecycle)
{
	char *out = NULL, *err = NULL, *id, *tok, *wt;
	struct session s = {0};
	int rc;

	rc = op_spctl(
	    (char *[]){"session", "start", "feat", "--repo", REPO, NULL}, &out,
	    &err);
	ck_assert_msg(rc == 0, "session start: %d %s", rc, err);
	id = strstr(out, "id:");
	tok = strstr(out, "SPD_SESSION_TOKEN=");
	ck_assert_msg(id && tok, "no id or token in: %s", out);
	ck_assert(sscanf(id, "id: %16s", s.id) == 1);
	ck_assert(sscanf(tok, "SPD_SESSION_TOKEN=%64s", s.token) == 1);
	ck_assert(has(out, "spd/feat"));
	s.worktree = test_fmt("%s/worktrees/%s", T.state, s.id);
	free(out);
	free(err);
	ck_assert(wt_exists(&s, "a.txt"));

	/* Before the agent made hello.txt the check fails: exit 1. */
	rc = op_spctl((char *[]){"session", "verify", s.id, NULL}, &out, &err);
	ck_assert_msg(rc == 1, "verify before the work: %d\n%s%s", rc, out,
		      err);
	ck_assert(has(out, "FAIL"));
	free(out);
	free(err);

	/* The agent edits files with allowed commands. */
	rc =
	    agent_spctl(&s, (char *[]){"run", "--", "touch", "hello.txt", NULL},
			NULL, &err);
	ck_assert_msg(rc == 0, "touch: %d %s", rc, err);
	free(err);
	rc = agent_spctl(&s, (char *[]){"run", "--", "mkdir", "src", NULL},
			 NULL, NULL);
	ck_assert_int_eq(rc, 0);
	rc = agent_spctl(
	    &s, (char *[]){"run", "--", "cp", "a.txt", "src/copy.txt", NULL},
	    NULL, NULL);
	ck_assert_int_eq(rc, 0);
	ck_assert(wt_exists(&s, "hello.txt"));
	wt = wt_file(&s, "src/copy.txt");
	ck_assert_str_eq(wt, "original\n");
	free(wt);
	/* Nothing landed in the operator's checkout. */
	ck_assert_int_eq(test_sh(NULL, "test ! -e '%s/hello.txt'", REPO), 0);

	rc = op_spctl((char *[]){"session", "diff", s.id, NULL}, &out, &err);
	ck_assert_int_eq(rc, 0);
	ck_assert_msg(has(out, "+++ b/hello.txt") &&
			  has(out, "+++ b/src/copy.txt") &&
			  has(out, "+original"),
		      "diff: %s", out);
	/* Nothing committed yet: no merge command. */
	ck_assert_msg(!has(out, "merge spd/feat") &&
			  !has(err, "merge spd/feat"),
		      "a merge command for an empty branch: %s / %s", out, err);
	free(out);
	free(err);

	rc = op_spctl((char *[]){"session", "verify", s.id, NULL}, &out, &err);
	ck_assert_msg(rc == 0, "verify after the work: %d\n%s%s", rc, out, err);
	ck_assert(has(out, "PASS"));
	free(out);
	free(err);

	rc = op_spctl((char *[]){"session", "end", s.id, NULL}, &out, &err);
	ck_assert_msg(rc == 0, "end: %d %s", rc, err);
	free(out);
	free(err);
	ck_assert_msg(access(s.worktree, F_OK) != 0, "worktree still there");
	ck_assert_int_eq(
	    test_sh(&out, "git -C '%s' branch --list spd/feat", REPO), 0);
	ck_assert_msg(has(out, "spd/feat"), "branch gone: '%s'", out);
	free(out);
	/* The agent's uncommitted work is on the branch, not lost with the
	 * worktree. */
	ck_assert_int_eq(
	    test_sh(&out, "git -C '%s' show spd/feat:src/copy.txt", REPO), 0);
	ck_assert_str_eq(out, "original\n");
	free(out);
	/* The ended session's token no longer works. */
	rc = agent_spctl(&s, (char *[]){"run", "--", "touch", "x", NULL}, NULL,
			 NULL);
	ck_assert_int_ne(rc, 0);
	ck_assert(!wt_exists(&s, "x"));
	session_free(&s);
}
END_TEST

/* Every operator method and every other session: refused to an agent
 * with UNAUTHORIZED, and each refusal journaled. */
START_TEST(test_agent_unauthorized)
{
	struct session a = {0}, b = {0};
	struct {
		const char *method;
		char *params;
	} calls[32];
	size_t n = 0;
	char *r, *rows;

	start_session(REPO, "alpha", false, &a);
	start_session(REPO, "beta", false, &b);

	calls[n].method = "session.start";
	calls[n++].params =
	    test_fmt("{\"repo\":\"%s\",\"feature\":\"gamma\"}", REPO);
	calls[n].method = "session.list";
	calls[n++].params = test_fmt("{}");
	calls[n].method = "session.show";
	calls[n++].params = test_fmt("{\"id\":\"%s\"}", a.id);
	calls[n].method = "session.end";
	calls[n++].params = test_fmt("{\"id\":\"%s\"}", a.id);
	calls[n].method = "session.heldout";
	calls[n++].params =
	    test_fmt("{\"id\":\"%s\",\"dir\":\"%s\"}", a.id, REPO);
	calls[n].method = "session.diff";
	calls[n++].params = test_fmt("{\"id\":\"%s\"}", a.id);
	calls[n].method = "journal.follow";
	calls[n++].params = test_fmt("{}");
	calls[n].method = "journal.verify";
	calls[n++].params = test_fmt("{}");
	calls[n].method = "approval.list";
	calls[n++].params = test_fmt("{}");
	calls[n].method = "approval.decide";
	calls[n++].params = test_fmt("{\"id\":1,\"approve\":true}");
	calls[n].method = "cmd.run";
	calls[n++].params =
	    test_fmt("{\"argv\":[\"true\"],\"writable\":[\"%s\"]}", T.dir);
	calls[n].method = "cmd.run";
	calls[n++].params = test_fmt("{\"argv\":[\"sh\",\"-c\",\"true\"],"
				     "\"yes\":true}");
	calls[n].method = "session.status";
	calls[n++].params = test_fmt("{\"id\":\"%s\"}", b.id);
	calls[n].method = "session.verify";
	calls[n++].params = test_fmt("{\"id\":\"%s\"}", b.id);
	calls[n].method = "fs.read";
	calls[n++].params =
	    test_fmt("{\"path\":\"a.txt\",\"session\":\"%s\"}", b.id);
	calls[n].method = "fs.write";
	calls[n++].params = test_fmt(
	    "{\"path\":\"pwn.txt\",\"content\":\"x\",\"session\":\"%s\"}",
	    b.id);
	calls[n].method = "fs.list";
	calls[n++].params = test_fmt("{\"session\":\"%s\"}", b.id);
	calls[n].method = "cmd.run";
	calls[n++].params = test_fmt(
	    "{\"argv\":[\"touch\",\"pwn.txt\"],\"session\":\"%s\"}", b.id);

	for (size_t i = 0; i < n; i++) {
		r = rpc(a.token, calls[i].method, calls[i].params);
		ck_assert_msg(strcmp(test_reply_code(r), "UNAUTHORIZED") == 0,
			      "%s %s as the agent: %s", calls[i].method,
			      calls[i].params, r);
		free(r);
	}
	/* Nothing of it happened. */
	ck_assert(!wt_exists(&b, "pwn.txt"));
	ck_assert(!wt_exists(&a, "pwn.txt"));
	ck_assert_int_eq(test_sh(NULL, "test ! -e '%s/pwn.txt'", REPO), 0);
	ck_assert_int_eq(test_sh(NULL,
				 "git -C '%s' branch --list spd/gamma "
				 "| grep -q .",
				 REPO),
			 1);
	r = rpcf(NULL, "session.show", "{\"id\":\"%s\"}", a.id);
	ck_assert(has(r, "\"state\":\"active\""));
	free(r);

	/* The host network: refused too.  The brief asked for
	 * UNAUTHORIZED; daemon/methods/m_run.c answers POLICY-DENIED ("the host
	 * network is for the operator only"), which issue 5 also allows
	 * (host network is a policy matter for agents).  Either way
	 * nothing runs. */
	r = rpc(a.token, "cmd.run",
		"{\"argv\":[\"touch\",\"net.txt\"],\"net\":\"host\"}");
	ck_assert_msg(strcmp(test_reply_code(r), "UNAUTHORIZED") == 0 ||
			  strcmp(test_reply_code(r), "POLICY-DENIED") == 0,
		      "net host as the agent: %s", r);
	free(r);
	ck_assert(!wt_exists(&a, "net.txt"));

	/* Naming another workspace: an agent always runs in its own
	 * worktree (PROTOCOL.md); spd currently ignores the parameter
	 * rather than refusing it, so only the outcome is asserted. */
	r = rpcf(a.token, "cmd.run",
		 "{\"argv\":[\"touch\",\"ws.txt\"],\"workspace\":\"%s\"}",
		 REPO);
	ck_assert_int_eq(test_sh(NULL, "test ! -e '%s/ws.txt'", REPO), 0);
	free(r);

	/* The agent cannot pass --yes either. */
	ck_assert_int_ne(agent_spctl(&a,
				     (char *[]){"run", "--yes", "--", "sh",
						"-c", "touch pwn.txt", NULL},
				     NULL, NULL),
			 0);
	ck_assert(!wt_exists(&a, "pwn.txt"));

	/* Each refusal is in the journal, under the agent's session. */
	char *sql =
	    test_fmt("select summary from events where session='%s' and "
		     "actor='agent' and summary like '%%UNAUTHORIZED%%'",
		     a.id);
	{
		char *last = test_fmt("%s UNAUTHORIZED", calls[n - 1].method);

		rows = test_journal_until(&T, sql, last);
		free(last);
	}
	free(sql);
	for (size_t i = 0; i < n; i++) {
		char *want = test_fmt("%s UNAUTHORIZED", calls[i].method);
		ck_assert_msg(has(rows, want), "not journaled: %s\n%s", want,
			      rows);
		free(want);
	}
	size_t lines = 0;
	for (char *p = rows; p && *p; p++)
		lines += *p == '\n';
	ck_assert_msg(lines >= n, "%zu refusals journaled for %zu calls:\n%s",
		      lines, n, rows);
	free(rows);

	/* journal.query as the agent: only its own session's rows, even
	 * when it names the other session. */
	r = rpc(b.token, "cmd.run", "{\"argv\":[\"touch\",\"bee.txt\"]}");
	TEST_ASSERT_CODE(r, "ok");
	free(r);
	char *qs[] = {strdup("{\"limit\":1000}"),
		      test_fmt("{\"limit\":1000,\"session\":\"%s\"}", b.id)};
	for (size_t q = 0; q < 2; q++) {
		json_t *j, *ev;
		size_t k;
		r = rpc(a.token, "journal.query", qs[q]);
		j = json_loads(r, 0, NULL);
		ev = json_object_get(json_object_get(j, "result"), "events");
		if (q == 0)
			ck_assert_msg(json_array_size(ev) > 0, "%s", r);
		for (k = 0; k < json_array_size(ev); k++) {
			const char *sid = json_string_value(
			    json_object_get(json_array_get(ev, k), "session"));
			ck_assert_msg(sid && strcmp(sid, a.id) == 0,
				      "agent %s sees event of %s: %s", a.id,
				      sid ? sid : "(none)", r);
		}
		ck_assert(!has(r, b.id) && !has(r, "bee.txt"));
		json_decref(j);
		free(r);
	}
	free(qs[0]);
	free(qs[1]);
	for (size_t i = 0; i < n; i++)
		free(calls[i].params);
	session_free(&a);
	session_free(&b);
}
END_TEST

/* ---- in place -------------------------------------------------------- */

START_TEST(test_in_place_dirty_refused)
{
	char *out = NULL, *err = NULL;
	int rc;

	char *dirty = paths_join(REPO, "scratch-notes.txt");

	test_write_file(dirty, "wip\n");
	free(dirty);
	rc = op_spctl((char *[]){"session", "start", "fix", "--repo", REPO,
				 "--in-place", NULL},
		      &out, &err);
	ck_assert_msg(rc != 0, "a dirty checkout was accepted: %s", out);
	ck_assert_msg(
	    has(err, "scratch-notes.txt") || has(out, "scratch-notes.txt"),
	    "the refusal does not name the dirty file: %s %s", out, err);
	free(out);
	free(err);
	/* An unstaged edit of a tracked file too. */
	ck_assert_int_eq(test_sh(NULL,
				 "rm '%s/scratch-notes.txt'; echo x >> "
				 "'%s/b.txt'",
				 REPO, REPO),
			 0);
	rc = op_spctl((char *[]){"session", "start", "fix", "--repo", REPO,
				 "--in-place", NULL},
		      &out, &err);
	ck_assert_int_ne(rc, 0);
	ck_assert_msg(has(err, "b.txt") || has(out, "b.txt"), "%s %s", out,
		      err);
	free(out);
	free(err);
	/* An ignored file does not make it dirty. */
	ck_assert_int_eq(test_sh(NULL,
				 "cd '%s' && git checkout -q b.txt && echo l > "
				 "x.log",
				 REPO),
			 0);
	rc = op_spctl((char *[]){"session", "start", "fix", "--repo", REPO,
				 "--in-place", NULL},
		      &out, &err);
	ck_assert_msg(rc == 0, "clean checkout refused: %s", err);
	free(out);
	free(err);
}
END_TEST

START_TEST(test_in_place_sandbox)
{
	struct session s = {0};
	char *cfg_before, *cfg_after, *r, *p, *out = NULL;
	int rc;

	/* An ignored credential file, present before the session. */
	p = paths_join(REPO, ".env");
	test_write_file(p, "API_KEY=hunter2-in-place\n");
	free(p);
	start_session(REPO, "inplace", true, &s);
	p = paths_join(REPO, ".git/config");
	cfg_before = test_read_file(p);

	/* .git is read-only inside the sandbox, even for the operator's
	 * approved run in the session. */
	r = rpcf(NULL, "cmd.run",
		 "{\"session\":\"%s\",\"yes\":true,\"argv\":[\"sh\",\"-c\","
		 "\"echo '[x]' >> .git/config\"]}",
		 s.id);
	ck_assert_msg(has(r, "\"result\"") && !has(r, "\"exit_code\":0"),
		      "writing .git/config did not fail: %s", r);
	free(r);
	cfg_after = test_read_file(p);
	ck_assert_str_eq(cfg_before, cfg_after);
	free(p);
	free(cfg_after);
	free(cfg_before);

	/* The ignored .env reads as empty. */
	rc = agent_spctl(&s, (char *[]){"run", "--", "cat", ".env", NULL}, &out,
			 NULL);
	ck_assert_msg(!has(out, "hunter2"), "the .env leaked: %s", out);
	ck_assert_msg(out && out[0] == '\0', "cat .env printed '%s' (%d)", out,
		      rc);
	free(out);
	/* Its content on the host is untouched. */
	p = paths_join(REPO, ".env");
	out = test_read_file(p);
	ck_assert_str_eq(out, "API_KEY=hunter2-in-place\n");
	free(out);
	free(p);

	/* A tracked file stays editable. */
	rc = agent_spctl(&s,
			 (char *[]){"run", "--", "cp", "b.txt", "a.txt", NULL},
			 NULL, &out);
	ck_assert_msg(rc == 0, "cp: %d %s", rc, out);
	free(out);
	p = paths_join(REPO, "a.txt");
	out = test_read_file(p);
	ck_assert_str_eq(out, "other\n");
	free(out);
	free(p);
	r = rpcf(NULL, "session.show", "{\"id\":\"%s\"}", s.id);
	ck_assert_msg(has(r, "\"state\":\"active\""), "%s", r);
	free(r);
	session_free(&s);
}
END_TEST

/*
 * git works in a worktree session's run: the worktree's .git file names
 * its admin dir in the repository's git dir, outside the workspace, which
 * spd made under its umask 077.  As root the run's uid is unprivileged and
 * could not read it ("not a git repository") until the git dir was bound
 * idmapped for it; it stays read-only all the same.
 */
START_TEST(test_worktree_git_in_run)
{
	struct session s = {0};
	char *r, *p, *cfg_before, *cfg_after, *out = NULL, *err = NULL;
	int rc;

	start_session(REPO, "gitrun", false, &s);
	rc = agent_spctl(&s, (char *[]){"run", "--", "git", "status", NULL},
			 &out, &err);
	ck_assert_msg(rc == 0 && has(out, "On branch spd/gitrun"),
		      "git status in the run: %d\n%s\n%s", rc, out, err);
	free(out);
	free(err);
	rc = agent_spctl(
	    &s, (char *[]){"run", "--", "git", "log", "--oneline", "-1", NULL},
	    &out, &err);
	ck_assert_msg(rc == 0 && out && out[0],
		      "git log in the run: %d\n%s\n%s", rc, out, err);
	free(out);
	free(err);
	/* Read-only: the repository's config stays as it was. */
	p = paths_join(REPO, ".git/config");
	cfg_before = test_read_file(p);
	r = rpcf(NULL, "cmd.run",
		 "{\"session\":\"%s\",\"yes\":true,\"argv\":[\"sh\",\"-c\","
		 "\"echo '[x]' >> %s\"]}",
		 s.id, p);
	ck_assert_msg(has(r, "\"result\"") && !has(r, "\"exit_code\":0"),
		      "writing the repository's .git/config did not fail: %s",
		      r);
	free(r);
	cfg_after = test_read_file(p);
	ck_assert_str_eq(cfg_before, cfg_after);
	free(cfg_before);
	free(cfg_after);
	free(p);
	session_free(&s);
}
END_TEST

/*
 * In place, what fs.read refuses as git-ignored (deny.fs.ignored) is not
 * readable by an allowed command either: not by naming it (cat), not by
 * walking the tree (grep -r), not inside an ignored directory.  A file
 * git does not ignore still reads as it is.
 */
START_TEST(test_in_place_ignored_hidden)
{
	struct session s = {0};
	char *r, *p, *out = NULL, *err = NULL;
	int rc;

	ck_assert_int_eq(
	    test_sh(NULL,
		    "set -e; cd '%s'; printf '*.txt\ncache/\n' >> .gitignore; "
		    "echo 'see the docs' > notes.md; git add -A; "
		    "git commit -qm ignore; "
		    "echo 'token CANARY-plain-7d1' > plain.txt; "
		    "mkdir -p cache/deep; "
		    "echo 'CANARY-cache-7d1' > cache/deep/blob; "
		    /* A credential file inside an ignored directory (a
		     * package's .env in node_modules/): every run was
		     * refused, its empty file having nowhere to go. */
		    "echo 'KEY=CANARY-env-7d1' > cache/deep/.env; "
		    "chmod -R a+rX plain.txt cache notes.md",
		    REPO),
	    0);
	start_session(REPO, "ignored", true, &s);

	r = rpc(s.token, "fs.read", "{\"path\":\"plain.txt\"}");
	ck_assert_msg(has(r, "deny.fs.ignored"), "fs.read: %s", r);
	free(r);

	rc = agent_spctl(&s, (char *[]){"run", "--", "cat", "plain.txt", NULL},
			 &out, &err);
	ck_assert_msg(!has(out, "CANARY"), "cat printed the ignored file: %s",
		      out);
	free(out);
	free(err);
	rc = agent_spctl(
	    &s, (char *[]){"run", "--", "grep", "-r", "CANARY", ".", NULL},
	    &out, &err);
	ck_assert_msg(!has(out, "CANARY-"),
		      "grep -r found ignored content (%d): %s", rc, out);
	free(out);
	free(err);
	rc = agent_spctl(
	    &s, (char *[]){"run", "--", "cat", "cache/deep/blob", NULL}, &out,
	    &err);
	ck_assert_msg(!has(out, "CANARY"), "cat read the ignored dir: %s", out);
	free(out);
	free(err);

	rc = agent_spctl(&s, (char *[]){"run", "--", "cat", "notes.md", NULL},
			 &out, &err);
	ck_assert_msg(rc == 0 && out && !strcmp(out, "see the docs\n"),
		      "notes.md (%d): '%s' %s", rc, out, err);
	free(out);
	free(err);

	/* The list is kept between runs (session_inplace.c), but an ignored
	 * file made since the last run, and a file that a rewritten
	 * .gitignore (no name made) now ignores, are hidden too. */
	ck_assert_int_eq(
	    test_sh(NULL,
		    "set -e; cd '%s'; echo 'CANARY-later-7d1' > later.txt; "
		    "echo 'CANARY-notes-7d1' > scratch.md; chmod a+r later.txt "
		    "scratch.md",
		    REPO),
	    0);
	rc = agent_spctl(
	    &s, (char *[]){"run", "--", "cat", "later.txt", "scratch.md", NULL},
	    &out, &err);
	ck_assert_msg(!has(out, "CANARY-later"),
		      "cat printed an ignored file made after the last run: %s",
		      out);
	ck_assert_msg(has(out, "CANARY-notes"), "scratch.md (%d): %s %s", rc,
		      out, err);
	free(out);
	free(err);
	ck_assert_int_eq(
	    test_sh(NULL, "set -e; cd '%s'; echo scratch.md >> .gitignore",
		    REPO),
	    0);
	rc = agent_spctl(&s, (char *[]){"run", "--", "cat", "scratch.md", NULL},
			 &out, &err);
	ck_assert_msg(!has(out, "CANARY"),
		      "cat printed a file .gitignore now ignores: %s", out);
	free(out);
	free(err);

	/* The agent rewrites .gitignore (fs.write may: it is not protected)
	 * so that plain.txt, ignored when the session started, no longer
	 * is: fs.read still refuses it and a run still cannot read it. */
	r = rpc(s.token, "fs.write",
		"{\"path\":\".gitignore\",\"content\":\"other/\\n\"}");
	TEST_ASSERT_CODE(r, "ok");
	free(r);
	r = rpc(s.token, "fs.read", "{\"path\":\"plain.txt\"}");
	ck_assert_msg(has(r, "deny.fs.ignored") && !has(r, "CANARY"),
		      "fs.read after .gitignore changed: %s", r);
	free(r);
	rc = agent_spctl(&s, (char *[]){"run", "--", "cat", "plain.txt", NULL},
			 &out, &err);
	ck_assert_msg(!has(out, "CANARY"),
		      "cat read a file ignored at the start after .gitignore "
		      "changed: %s",
		      out);
	free(out);
	free(err);

	/* Hidden from the run, untouched on the host. */
	p = paths_join(REPO, "plain.txt");
	out = test_read_file(p);
	ck_assert_str_eq(out, "token CANARY-plain-7d1\n");
	free(out);
	free(p);
	session_free(&s);
}
END_TEST

/*
 * In place, an ignored file whose directory the agent renames, out from
 * under an anchored pattern, is still not readable: not by cat in the
 * next run, not by fs.read at its new path.  Fails if spd followed only
 * paths.
 */
START_TEST(test_in_place_ignored_moved)
{
	struct session s = {0};
	char *r, *out = NULL, *err = NULL;
	int rc;

	ck_assert_int_eq(
	    test_sh(NULL,
		    "set -e; cd '%s'; printf '/config/secrets.yml\n' >> "
		    ".gitignore; mkdir -p config; echo 'name: x' > "
		    "config/app.yml; git add -A; git commit -qm conf; "
		    "echo 'password: CANARY-moved-7d1' > config/secrets.yml; "
		    "chmod -R a+rX config",
		    REPO),
	    0);
	start_session(REPO, "moved", true, &s);
	rc = agent_spctl(&s,
			 (char *[]){"run", "--", "mv", "config", "cfg", NULL},
			 &out, &err);
	ck_assert_msg(rc == 0, "mv (%d): %s %s", rc, out, err);
	free(out);
	free(err);
	rc = agent_spctl(
	    &s, (char *[]){"run", "--", "cat", "cfg/secrets.yml", NULL}, &out,
	    &err);
	ck_assert_msg(!has(out, "CANARY"),
		      "cat read the moved ignored file: %s", out);
	free(out);
	free(err);
	r = rpc(s.token, "fs.read", "{\"path\":\"cfg/secrets.yml\"}");
	ck_assert_msg(has(r, "deny.fs.ignored") && !has(r, "CANARY"),
		      "fs.read of the moved ignored file: %s", r);
	free(r);
	/* It did move on the host, with its content. */
	{
		char *hp = paths_join(REPO, "cfg/secrets.yml");

		out = test_read_file(hp);
		ck_assert_msg(has(out, "CANARY-moved"), "host: %s", out);
		free(out);
		free(hp);
	}
	session_free(&s);
}
END_TEST

/* ---- the git guard --------------------------------------------------- */

/* The operator's approved run in a session, with the repository's .git
 * writable: the kind of change an agent must never get away with. */
static char *op_run_in(const struct session *s, const char *shell)
{
	json_t *argv = json_pack("[s,s,s]", "sh", "-c", shell);
	char *a = json_dumps(argv, JSON_COMPACT);
	char *params = test_fmt("{\"session\":\"%s\",\"yes\":true,\"writable\":"
				"[\"%s/.git\"],\"argv\":%s}",
				s->id, REPO, a);
	char *r = rpc(NULL, "cmd.run", params);

	free(params);
	free(a);
	json_decref(argv);
	return r;
}

static void expect_attempt_ended(const struct session *s)
{
	char *r =
	    rpc(s->token, "cmd.run", "{\"argv\":[\"touch\",\"late.txt\"]}");

	TEST_ASSERT_CODE(r, "ATTEMPT-ENDED");
	free(r);
	ck_assert(!wt_exists(s, "late.txt"));
	r = rpc(s->token, "fs.write",
		"{\"path\":\"late.txt\",\"content\":\"x\"}");
	TEST_ASSERT_CODE(r, "ATTEMPT-ENDED");
	free(r);
	ck_assert(!wt_exists(s, "late.txt"));
	r = rpc(s->token, "session.status", NULL);
	TEST_ASSERT_CODE(r, "ATTEMPT-ENDED");
	free(r);
}

START_TEST(test_guard_git_config)
{
	struct session s = {0};
	char *r, *rows;

	start_session(REPO, "guard", false, &s);
	/* The worktree's .git is the agent's own repository: the
	 * operator's is named outright, writable for this run. */
	char *line = test_fmt("git -c safe.directory='*' --git-dir='%s/.git' "
			      "config user.name evil",
			      REPO);
	r = op_run_in(&s, line);
	free(line);
	TEST_ASSERT_CODE(r, "GIT-CHANGED");
	ck_assert_msg(has(r, ".git/config"), "finding names no path: %s", r);
	free(r);
	expect_attempt_ended(&s);
	r = rpcf(NULL, "session.show", "{\"id\":\"%s\"}", s.id);
	ck_assert_msg(has(r, "attempt-ended") && has(r, "GIT-CHANGED"), "%s",
		      r);
	/* The command that ended the attempt is in the session's history
	 * all the same (written after its reply); the one refused after
	 * it is not. */
	ck_assert_msg(has(r, "\"commands\":1"), "not recorded once: %s", r);
	free(r);
	char *sql =
	    test_fmt("select kind, summary from events where session='%s' "
		     "and kind='session.finding'",
		     s.id);
	rows = test_journal_until(&T, sql, ".git/config");
	ck_assert_msg(has(rows, "GIT-CHANGED") && has(rows, ".git/config"),
		      "finding not journaled: %s", rows);
	free(rows);
	free(sql);
	session_free(&s);
}
END_TEST

START_TEST(test_guard_hook)
{
	struct session s = {0};
	char *r;

	start_session(REPO, "hook", false, &s);
	char *line = test_fmt("printf '#!/bin/sh\\necho pwned\\n' > "
			      "'%s/.git/hooks/post-commit'",
			      REPO);
	r = op_run_in(&s, line);
	free(line);
	TEST_ASSERT_CODE(r, "GIT-CHANGED");
	ck_assert_msg(has(r, "hooks"), "finding names no hook path: %s", r);
	free(r);
	expect_attempt_ended(&s);
	session_free(&s);
}
END_TEST

/* Moving another branch (main) is a finding; the session's own branch
 * moving (a commit in the worktree) is not. */
START_TEST(test_guard_own_branch_and_other_branch)
{
	struct session s = {0};
	char *r, *out = NULL;

	char *line;

	start_session(REPO, "own", false, &s);
	ck_assert_int_eq(
	    agent_spctl(&s, (char *[]){"run", "--", "touch", "hello.txt", NULL},
			NULL, NULL),
	    0);
	/* The agent commits in its own repository (the worktree's .git);
	 * spd moves spd/own to the commit. */
	r = op_run_in(&s, "git add -A && git commit -qm wip");
	ck_assert_msg(strcmp(test_reply_code(r), "ok") == 0 &&
			  has(r, "\"exit_code\":0"),
		      "commit on the session's own branch: %s", r);
	free(r);
	ck_assert_int_eq(
	    test_sh(&out, "git -C '%s' log --format=%%s spd/own", REPO), 0);
	ck_assert_msg(has(out, "wip"), "no commit on spd/own: %s", out);
	free(out);
	r = rpc(s.token, "session.status", NULL);
	ck_assert_msg(has(r, "\"state\":\"active\""),
		      "own branch moving was a finding: %s", r);
	free(r);
	r = rpc(s.token, "cmd.run", "{\"argv\":[\"touch\",\"after.txt\"]}");
	TEST_ASSERT_CODE(r, "ok");
	free(r);

	/* Moving main is. */
	line = test_fmt("git -c safe.directory='*' --git-dir='%s/.git' "
			"update-ref refs/heads/main refs/heads/spd/own",
			REPO);
	r = op_run_in(&s, line);
	free(line);
	TEST_ASSERT_CODE(r, "GIT-CHANGED");
	ck_assert_msg(has(r, "main"), "finding names no ref: %s", r);
	free(r);
	expect_attempt_ended(&s);
	session_free(&s);
}
END_TEST

START_TEST(test_guard_integrity_spd_conf)
{
	struct session s = {0};
	char *r;

	start_session(REPO, "integ", false, &s);
	r = op_run_in(&s,
		      "printf '[verify]\\n\\tagent = true\\n' >> .spd.conf");
	TEST_ASSERT_CODE(r, "INTEGRITY");
	ck_assert_msg(has(r, ".spd.conf"), "finding names no path: %s", r);
	free(r);
	expect_attempt_ended(&s);
	session_free(&s);
}
END_TEST

/* ---- held-out checks ------------------------------------------------- */

#define HELDOUT_NAME "zz-heldout-probe-7q.txt"
#define HELDOUT_TEXT "HELDOUT-CONTENT-do-not-leak-41"

START_TEST(test_heldout)
{
	struct session s = {0};
	/* The operator's own copy of the held-out tests lies where no run
	 * sees it (every run has a private /tmp): what is tested is that
	 * the sealed copy in spd's state dir stays out of reach, in any
	 * layout. */
	char *ho = strdup("/tmp/spd-test-heldout-XXXXXX"), *p, *r, *out = NULL,
	     *err = NULL;
	int rc;

	/* A project whose second check reads the sealed file. */
	ck_assert_int_eq(
	    test_sh(NULL,
		    "cd '%s' && printf '[check \"held\"]\\n\\trun "
		    "= grep -q HELDOUT-CONTENT .spd-heldout/%s\\n' "
		    ">> .spd.conf && git commit -qam held",
		    REPO, HELDOUT_NAME),
	    0);
	ck_assert_ptr_nonnull(mkdtemp(ho));
	p = paths_join(ho, HELDOUT_NAME);
	test_write_file(p, HELDOUT_TEXT "\n");
	free(p);
	start_session(REPO, "held", false, &s);
	/* Control: before sealing, the "held" check cannot pass. */
	r = rpcf(NULL, "session.verify", "{\"id\":\"%s\"}", s.id);
	ck_assert_msg(has(r, "\"pass\":false"), "verify unsealed: %s", r);
	free(r);
	rc = op_spctl((char *[]){"session", "heldout", s.id, ho, NULL}, &out,
		      &err);
	ck_assert_msg(rc == 0, "heldout: %d %s", rc, err);
	free(out);
	free(err);
	ck_assert(!wt_exists(&s, ".spd-heldout"));

	/* No agent-facing call lists or reads them. */
	const char *fs_calls[][2] = {
	    {"fs.list", "{}"},
	    {"fs.list", "{\"path\":\".spd-heldout\"}"},
	    {"fs.read", "{\"path\":\".spd-heldout/" HELDOUT_NAME "\"}"},
	    {"fs.stat", "{\"path\":\".spd-heldout/" HELDOUT_NAME "\"}"},
	    {"fs.read", "{\"path\":\"" HELDOUT_NAME "\"}"},
	    {"session.status", "{}"},
	};
	for (size_t i = 0; i < sizeof(fs_calls) / sizeof(fs_calls[0]); i++) {
		r = rpc(s.token, fs_calls[i][0], fs_calls[i][1]);
		ck_assert_msg(!has(r, HELDOUT_NAME) || has(r, "\"error\""),
			      "%s %s: %s", fs_calls[i][0], fs_calls[i][1], r);
		ck_assert_msg(!has(r, HELDOUT_TEXT), "%s leaked: %s",
			      fs_calls[i][0], r);
		if (strcmp(fs_calls[i][0], "fs.list") != 0 &&
		    strcmp(fs_calls[i][0], "session.status") != 0)
			ck_assert_msg(strcmp(test_reply_code(r), "ok") != 0,
				      "%s: %s", fs_calls[i][1], r);
		free(r);
	}
	/* An absolute path to the sealed copy: outside the workspace. */
	p = test_fmt("{\"path\":\"%s/heldout/%s/%s\"}", T.state, s.id,
		     HELDOUT_NAME);
	r = rpc(s.token, "fs.read", p);
	ck_assert_msg(strcmp(test_reply_code(r), "ok") != 0 &&
			  !has(r, HELDOUT_TEXT),
		      "%s", r);
	free(r);
	free(p);

	/* A run sees neither name nor content. */
	rc = agent_spctl(&s, (char *[]){"run", "--", "ls", "-laR", NULL}, &out,
			 &err);
	ck_assert_msg(rc == 0, "ls -R: %d %s", rc, err);
	ck_assert(!has(out, HELDOUT_NAME) && !has(out, HELDOUT_TEXT));
	free(out);
	free(err);
	/* Where the sealed copy lives on the host, and the temporary
	 * directories it sits under, as seen from inside the sandbox (the
	 * whole of / takes too long to walk in a test). */
	p = test_fmt("%s/heldout/%s/%s", T.state, s.id, HELDOUT_NAME);
	rc = agent_run_approved(&s, (char *[]){"cat", p, NULL}, &out, &err);
	ck_assert_msg(rc != 0 && !has(out, HELDOUT_TEXT),
		      "the sealed file reads from a run: %d %s", rc, out);
	free(out);
	free(err);
	free(p);
	rc = agent_run_approved(&s, (char *[]){"find", T.dir, "/tmp", NULL},
				&out, &err);
	ck_assert_msg(!has(out, HELDOUT_NAME) && !has(err, HELDOUT_NAME),
		      "find shows the sealed file: %s", out);
	free(out);
	free(err);
	rc = agent_run_approved(
	    &s, (char *[]){"grep", "-rIl", "HELDOUT-CONTENT", "/tmp", NULL},
	    &out, &err);
	ck_assert_msg(!has(out, HELDOUT_NAME), "grep finds it: %s", out);
	free(out);
	free(err);

	/* Verification sees them: the "held" check passes only if the
	 * overlay is there. */
	ck_assert_int_eq(
	    agent_spctl(&s, (char *[]){"run", "--", "touch", "hello.txt", NULL},
			NULL, NULL),
	    0);
	r = rpcf(NULL, "session.verify", "{\"id\":\"%s\"}", s.id);
	ck_assert_msg(strcmp(test_reply_code(r), "ok") == 0, "verify: %s", r);
	ck_assert_msg(!has(r, HELDOUT_TEXT), "verify leaks content: %s", r);
	/* Both checks ran to exit 0: "held" read the sealed file through
	 * the verification-only overlay. */
	ck_assert_msg(has(r, "\"result\":{\"pass\":true") &&
			  has(r, "\"name\":\"held\"") &&
			  !has(r, "\"exit\":1") && !has(r, "\"exit\":-1"),
		      "verify with held-out checks: %s", r);
	free(r);
	ck_assert(!wt_exists(&s, ".spd-heldout"));
	test_rmrf(ho);
	free(ho);
	session_free(&s);
}
END_TEST

/*
 * In place, the agent rewrites the script a check runs so that it copies
 * the ignored credential file and another ignored file into the checkout,
 * and asks for the verification itself ([verify] agent = true).  The
 * check runs under the session's hiding, as the agent's own runs do: what
 * it copied is empty or missing, and nothing the agent can read holds the
 * secrets.
 */
START_TEST(test_check_hiding_in_place)
{
	struct session s = {0};
	char *repo = paths_join(T.dir, "repo-check"), *p, *r, *out;

	make_repo(repo, "[check \"script\"]\n\trun = sh check.sh\n"
			"[verify]\n\tagent = true\n");
	ck_assert_int_eq(test_sh(NULL,
				 "cd '%s' && echo true > check.sh && "
				 "git add check.sh && git commit -qm check",
				 repo),
			 0);
	p = paths_join(repo, ".env");
	test_write_file(p, "API_KEY=hunter2-check-env\n");
	free(p);
	p = paths_join(repo, "db.log");
	test_write_file(p, "password=hunter2-check-log\n");
	free(p);
	start_session(repo, "checkhide", true, &s);
	/* Control: the agent's own run sees neither. */
	out = NULL;
	agent_spctl(&s, (char *[]){"run", "--", "cat", ".env", "db.log", NULL},
		    &out, NULL);
	ck_assert_msg(!has(out, "hunter2"), "a run sees: %s", out);
	free(out);

	r = rpc(s.token, "fs.write",
		"{\"path\":\"check.sh\",\"content\":\"cat .env db.log > "
		"leak.txt; ls -la > listing.txt; exit 0\\n\"}");
	TEST_ASSERT_CODE(r, "ok");
	free(r);
	r = rpc(s.token, "session.verify", "{}");
	TEST_ASSERT_CODE(r, "ok");
	ck_assert_msg(!has(r, "hunter2"), "verify leaks: %s", r);
	free(r);
	/* The check ran (it wrote its listing), and saw no secret. */
	out = wt_file(&s, "listing.txt");
	ck_assert_msg(out && has(out, "check.sh"), "listing: %s", out);
	free(out);
	out = wt_file(&s, "leak.txt");
	ck_assert_msg(out && !has(out, "hunter2"), "the check leaked: %s", out);
	free(out);
	r = rpc(s.token, "fs.read", "{\"path\":\"leak.txt\"}");
	ck_assert_msg(!has(r, "hunter2"), "fs.read leak.txt: %s", r);
	free(r);
	/* The files themselves are untouched. */
	p = paths_join(repo, ".env");
	out = test_read_file(p);
	ck_assert_str_eq(out, "API_KEY=hunter2-check-env\n");
	free(out);
	free(p);
	session_free(&s);
	free(repo);
}
END_TEST

/*
 * Held-out checks are visible only to a check whose command the operator
 * wrote to name them; the agent learns a held-out check's pass or fail,
 * never its exit code.  The agent rewrites the script of an ordinary
 * check to read the sealed files and exit with their first byte, and
 * puts a hook the held-out check runs that does the same.
 */
START_TEST(test_heldout_not_for_agent_code)
{
	struct session s = {0};
	char *repo = paths_join(T.dir, "repo-held"), *ho, *p, *r, *out;
	int rc;

	make_repo(repo, "[check \"mine\"]\n\trun = sh check.sh\n"
			"[check \"held\"]\n\trun = sh .spd-heldout/t.sh\n"
			"[verify]\n\tagent = true\n");
	ck_assert_int_eq(test_sh(NULL,
				 "cd '%s' && echo true > check.sh && "
				 "echo true > hook.sh && git add check.sh "
				 "hook.sh && git commit -qm check",
				 repo),
			 0);
	ho = paths_join(T.dir, "heldout-src");
	ck_assert_int_eq(mkdir(ho, 0700), 0);
	p = paths_join(ho, HELDOUT_NAME);
	test_write_file(p, HELDOUT_TEXT "\n");
	free(p);
	p = paths_join(ho, "t.sh");
	/* The operator's held-out check runs the agent's code (as a test
	 * of it would) and passes on its exit status. */
	test_write_file(p, "sh hook.sh; exit $?\n");
	free(p);
	start_session(repo, "heldagent", false, &s);
	rc = op_spctl((char *[]){"session", "heldout", s.id, ho, NULL}, &out,
		      NULL);
	ck_assert_int_eq(rc, 0);
	free(out);

	/* 'H' is 72: an exit of 72 would be the held-out file's first
	 * byte. */
	r = rpc(s.token, "fs.write",
		"{\"path\":\"check.sh\",\"content\":\"cat .spd-heldout/* "
		"> leak.txt; ls -la .spd-heldout > listing.txt; exit $(od "
		"-An -tu1 -N1 .spd-heldout/" HELDOUT_NAME ")\\n\"}");
	TEST_ASSERT_CODE(r, "ok");
	free(r);
	r = rpc(s.token, "fs.write",
		"{\"path\":\"hook.sh\",\"content\":\"exit $(od -An -tu1 "
		"-N1 .spd-heldout/" HELDOUT_NAME ")\\n\"}");
	TEST_ASSERT_CODE(r, "ok");
	free(r);
	r = rpc(s.token, "session.verify", "{}");
	TEST_ASSERT_CODE(r, "ok");
	ck_assert_msg(!has(r, HELDOUT_TEXT) && !has(r, "\"exit\":72"),
		      "verify shows the held-out file: %s", r);
	/* The held-out check ran and failed (the hook exited 72): the
	 * agent learns that much. */
	ck_assert_msg(has(r, "{\"name\":\"held\",\"argv\":[\"sh\",\".spd-"
			     "heldout/t.sh\"],\"exit\":1,\"heldout\":true}"),
		      "no held-out failure: %s", r);
	free(r);
	out = wt_file(&s, "leak.txt");
	ck_assert_msg(!out || !has(out, HELDOUT_TEXT),
		      "the agent's check read the held-out file: %s", out);
	free(out);
	out = wt_file(&s, "listing.txt");
	ck_assert_msg(!out || !has(out, HELDOUT_NAME),
		      "the agent's check listed the held-out files: %s", out);
	free(out);
	/* The operator's journal keeps the real exit code; the agent's
	 * view of its session's journal does not have it. */
	r = rpc(NULL, "journal.query", "{\"kind\":\"session.check.heldout\"}");
	ck_assert_msg(has(r, s.id) && has(r, "\"exit\":72"), "journal: %s", r);
	free(r);
	r = rpc(s.token, "journal.query", "{\"limit\":1000}");
	ck_assert_msg(has(r, "session.verify") && !has(r, "\"exit\":72") &&
			  !has(r, HELDOUT_TEXT),
		      "the agent's journal: %s", r);
	free(r);
	test_rmrf(ho);
	free(ho);
	session_free(&s);
	free(repo);
}
END_TEST

/* ---- policy ---------------------------------------------------------- */

START_TEST(test_policy_check_cli)
{
	char *out = NULL, *err = NULL;
	int rc;

	rc = op_spctl((char *[]){"policy", "check", "--workspace", REPO, "--",
				 "git", "push", "origin", "main", NULL},
		      &out, &err);
	ck_assert_msg(rc == 0, "policy check: %d %s", rc, err);
	ck_assert_msg(has(out, "deny") && has(out, "deny.git"), "%s", out);
	free(out);
	free(err);
	rc = op_spctl((char *[]){"policy", "check", "--workspace", REPO,
				 "--write", ".github/workflows/x.yml", NULL},
		      &out, &err);
	ck_assert_int_eq(rc, 0);
	ck_assert_msg(has(out, "deny") && has(out, "deny."), "%s", out);
	free(out);
	free(err);
	rc = op_spctl((char *[]){"policy", "check", "--workspace", REPO,
				 "--read", "src/a.c", NULL},
		      &out, &err);
	ck_assert_int_eq(rc, 0);
	ck_assert_msg(has(out, "allow") && !has(out, "deny"), "%s", out);
	free(out);
	free(err);
}
END_TEST

START_TEST(test_approval_end_to_end)
{
	struct session s = {0};
	struct agent_run a = {0};
	pthread_t th;
	long aid;
	char *r, *p, *c;

	start_session(REPO, "appr", false, &s);
	a.s = &s;
	a.argv[0] = "run";
	a.argv[1] = "--";
	a.argv[2] = "sh";
	a.argv[3] = "-c";
	a.argv[4] = "echo hi > out.txt";
	ck_assert_int_eq(pthread_create(&th, NULL, agent_run_thread, &a), 0);
	aid = wait_for_ask(s.id);
	/* Nothing ran before the decision. */
	ck_assert(!wt_exists(&s, "out.txt"));
	p = test_fmt("{\"id\":%ld,\"approve\":true}", aid);
	r = rpc(NULL, "approval.decide", p);
	TEST_ASSERT_CODE(r, "ok");
	free(r);
	free(p);
	pthread_join(th, NULL);
	ck_assert_msg(a.rc == 0, "approved run: %d %s", a.rc, a.err);
	c = wt_file(&s, "out.txt");
	ck_assert_msg(c && !strcmp(c, "hi\n"), "out.txt: %s", c);
	free(c);
	free(a.out);
	free(a.err);

	/* The grant was used once: the same call asks again. */
	r = rpc(s.token, "cmd.run",
		"{\"argv\":[\"sh\",\"-c\",\"echo again > out2.txt\"],"
		"\"wait\":false}");
	TEST_ASSERT_CODE(r, "NEEDS-APPROVAL");
	free(r);
	r = rpc(
	    s.token, "cmd.run",
	    "{\"argv\":[\"sh\",\"-c\",\"echo hi > out.txt\"],\"wait\":false}");
	TEST_ASSERT_CODE(r, "NEEDS-APPROVAL");
	ck_assert(has(r, "ask.shell"));
	/* Approve the pending one: the grant waits for that exact call. */
	json_t *j = json_loads(r, 0, NULL);
	aid = (long)json_integer_value(json_object_get(
	    json_object_get(json_object_get(j, "error"), "data"), "approval"));
	json_decref(j);
	free(r);
	ck_assert(aid > 0);
	p = test_fmt("{\"id\":%ld,\"approve\":true}", aid);
	r = rpc(NULL, "approval.decide", p);
	TEST_ASSERT_CODE(r, "ok");
	free(r);
	free(p);
	/* A different call does not ride on it. */
	r = rpc(s.token, "cmd.run",
		"{\"argv\":[\"sh\",\"-c\",\"echo hi > other.txt\"],"
		"\"wait\":false}");
	TEST_ASSERT_CODE(r, "NEEDS-APPROVAL");
	free(r);
	ck_assert(!wt_exists(&s, "other.txt"));
	c = paths_join(s.worktree, "out.txt");
	ck_assert_int_eq(unlink(c), 0);
	free(c);
	r = rpc(
	    s.token, "cmd.run",
	    "{\"argv\":[\"sh\",\"-c\",\"echo hi > out.txt\"],\"wait\":false}");
	ck_assert_msg(strcmp(test_reply_code(r), "ok") == 0, "granted call: %s",
		      r);
	free(r);
	ck_assert(wt_exists(&s, "out.txt"));
	r = rpc(
	    s.token, "cmd.run",
	    "{\"argv\":[\"sh\",\"-c\",\"echo hi > out.txt\"],\"wait\":false}");
	TEST_ASSERT_CODE(r, "NEEDS-APPROVAL");
	free(r);

	/* A refusal with a reason reaches the waiting agent. */
	int fd = test_spd_connect(&T);
	char *line =
	    test_fmt("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"cmd.run\","
		     "\"params\":{\"token\":\"%s\",\"argv\":[\"sh\",\"-c\","
		     "\"echo no > refused.txt\"]}}\n",
		     s.token);
	test_send(fd, line, strlen(line));
	free(line);
	aid = wait_for_ask(s.id);
	p = test_fmt(
	    "{\"id\":%ld,\"approve\":false,\"why\":\"no shells today\"}", aid);
	r = rpc(NULL, "approval.decide", p);
	TEST_ASSERT_CODE(r, "ok");
	free(r);
	free(p);
	/* The waiting call first hears of its own ask (its id is what
	 * `spctl approve` takes), then gets the answer. */
	r = test_recv_line(fd, 10000);
	ck_assert_msg(r && has(r, "\"method\":\"approval.requested\"") &&
			  has(r, "\"waiting\":true"),
		      "%s", r ? r : "(nothing)");
	free(r);
	r = test_recv_line(fd, 10000);
	ck_assert_ptr_nonnull(r);
	TEST_ASSERT_CODE(r, "APPROVAL-REFUSED");
	ck_assert_msg(has(r, "no shells today"), "%s", r);
	free(r);
	close(fd);
	ck_assert(!wt_exists(&s, "refused.txt"));

	/* All of it journaled with the rule id. */
	char *sql = test_fmt("select kind || ' ' || summary from events where "
			     "session='%s' and kind like 'approval.%%'",
			     s.id);
	r = test_journal_until(&T, sql, "no shells today");
	ck_assert_msg(has(r, "approval.requested ask.shell") &&
			  has(r, "approval.granted ask.shell") &&
			  has(r, "approval.used ask.shell") &&
			  has(r, "approval.refused ask.shell") &&
			  has(r, "no shells today"),
		      "journal: %s", r);
	free(r);
	free(sql);
	session_free(&s);
}
END_TEST

/* The approval id of a NEEDS-APPROVAL reply. */
static long approval_of(const char *reply)
{
	json_t *j = json_loads(reply, 0, NULL);
	long aid = (long)json_integer_value(json_object_get(
	    json_object_get(json_object_get(j, "error"), "data"), "approval"));

	json_decref(j);
	ck_assert_msg(aid > 0, "no approval id in %s", reply);
	return aid;
}

static void approve(long aid)
{
	char *r =
	    rpcf(NULL, "approval.decide", "{\"id\":%ld,\"approve\":true}", aid);

	TEST_ASSERT_CODE(r, "ok");
	free(r);
}

/*
 * A grant a person gave ahead of its call (the agent did not wait) is
 * usable for [limits] grant-lifetime seconds: used in time it runs the
 * call once; unused past it, the same call is asked again and nothing
 * runs, and the journal says the grant expired.
 */
START_TEST(test_grant_expires)
{
	struct session s = {0};
	char *conf = paths_join(T.config, "spd.conf"), *r, *sql;
	const char *late = "{\"argv\":[\"sh\",\"-c\",\"echo late > "
			   "late.txt\"],\"wait\":false}";
	const char *soon = "{\"argv\":[\"sh\",\"-c\",\"echo soon > "
			   "soon.txt\"],\"wait\":false}";

	ck_assert_int_eq(test_spd_stop(&T), 0);
	test_write_file(conf, "[limits]\n\tgrant-lifetime = 1\n");
	test_spd_start(&T);
	start_session(REPO, "grantlife", false, &s);

	/* Used in time: runs. */
	r = rpc(s.token, "cmd.run", soon);
	TEST_ASSERT_CODE(r, "NEEDS-APPROVAL");
	approve(approval_of(r));
	free(r);
	r = rpc(s.token, "cmd.run", soon);
	ck_assert_msg(strcmp(test_reply_code(r), "ok") == 0, "in time: %s", r);
	free(r);
	ck_assert(wt_exists(&s, "soon.txt"));

	/* Unused past its lifetime: asked again, nothing ran. */
	r = rpc(s.token, "cmd.run", late);
	TEST_ASSERT_CODE(r, "NEEDS-APPROVAL");
	approve(approval_of(r));
	free(r);
	usleep(1500 * 1000);
	r = rpc(s.token, "cmd.run", late);
	TEST_ASSERT_CODE(r, "NEEDS-APPROVAL");
	free(r);
	ck_assert(!wt_exists(&s, "late.txt"));
	sql =
	    test_fmt("select kind from events where session='%s' and kind like "
		     "'approval.%%'",
		     s.id);
	r = test_journal_until(&T, sql, "approval.expired");
	ck_assert_msg(has(r, "approval.expired") && has(r, "approval.used"),
		      "journal: %s", r);
	free(r);
	free(sql);
	session_free(&s);
	unlink(conf);
	free(conf);
}
END_TEST

/* What the operator reads is what would run: an agent's argv that
 * reorders itself with RLO/PDF or hides the command after 5,000 spaces is
 * shown escaped by spctl approvals and spctl journal. */
START_TEST(test_approvals_show_hidden_characters)
{
	struct session s = {0};
	char spaces[5001], *p, *r, *out = NULL, *err = NULL;
	int rc;

	memset(spaces, ' ', 5000);
	spaces[5000] = 0;
	start_session(REPO, "bidi", false, &s);
	p = test_fmt("{\"argv\":[\"sh\",\"-c\",\"echo \\u202e)dab(lanoitnetni"
		     "\\u202c safe\",\"%s; rm -rf ~\"],\"wait\":false}",
		     spaces);
	r = rpc(s.token, "cmd.run", p);
	TEST_ASSERT_CODE(r, "NEEDS-APPROVAL");
	free(r);
	free(p);
	rc = op_spctl((char *[]){"approvals", NULL}, &out, &err);
	ck_assert_msg(rc == 0, "approvals: %d %s", rc, err);
	ck_assert_msg(has(out, "$'echo \\u202e)dab(lanoitnetni\\u202c safe'"),
		      "%.300s", out);
	ck_assert_msg(has(out, "\\{4984 blanks elided}; rm -rf ~'"), "%.300s",
		      out);
	ck_assert(!has(out, "\xe2\x80\xae") && !has(out, "\xe2\x80\xac"));
	ck_assert(!has(out, spaces + 5000 - TS_FIELD_BLANKS_MAX - 1));
	free(out);
	free(err);
	rc = op_spctl((char *[]){"journal", NULL}, &out, &err);
	ck_assert_msg(rc == 0, "journal: %d %s", rc, err);
	ck_assert_msg(has(out, "approval.requested"), "%.300s", out);
	ck_assert(!has(out, "\xe2\x80\xae") && !has(out, "\xe2\x80\xac"));
	ck_assert(!has(out, spaces + 5000 - TS_FIELD_BLANKS_MAX - 1));
	free(out);
	free(err);
	session_free(&s);
}
END_TEST

/* Three denied calls in a row end the attempt. */
START_TEST(test_three_denials)
{
	struct session s = {0};
	const char *denied =
	    "{\"argv\":[\"git\",\"push\",\"origin\",\"main\"]}";
	char *r;

	start_session(REPO, "deny3", false, &s);
	r = rpc(s.token, "cmd.run", denied);
	TEST_ASSERT_CODE(r, "POLICY-DENIED");
	free(r);
	r = rpc(s.token, "cmd.run", denied);
	TEST_ASSERT_CODE(r, "POLICY-DENIED");
	free(r);
	r = rpc(s.token, "cmd.run", denied);
	TEST_ASSERT_CODE(r, "ATTEMPT-ENDED");
	free(r);
	/*
	 * BUG (TODO(session_end_attempt), daemon/methods/gate.c gate_end_attempt):
	 * the third denial answers ATTEMPT-ENDED but the session store is
	 * never told, so the attempt goes on: the next allowed call runs
	 * and session.status still says "active".
	 */
	r = rpc(s.token, "cmd.run", "{\"argv\":[\"touch\",\"after.txt\"]}");
	ck_assert_msg(strcmp(test_reply_code(r), "ATTEMPT-ENDED") == 0,
		      "BUG: a call after three denials was not refused: %s", r);
	free(r);
	ck_assert_msg(!wt_exists(&s, "after.txt"),
		      "BUG: a command ran after the attempt ended");
	r = rpcf(NULL, "session.show", "{\"id\":\"%s\"}", s.id);
	ck_assert_msg(has(r, "attempt-ended"),
		      "BUG: the session store was not told: %s", r);
	free(r);
	session_free(&s);
}
END_TEST

/* A person's refusals count as denials too. */
START_TEST(test_three_refusals)
{
	struct session s = {0};
	char *r;

	start_session(REPO, "refuse3", false, &s);
	for (int i = 0; i < 3; i++) {
		char *p = test_fmt("{\"argv\":[\"sh\",\"-c\",\"echo %d\"],"
				   "\"wait\":false}",
				   i);
		json_t *j;
		long aid;

		r = rpc(s.token, "cmd.run", p);
		TEST_ASSERT_CODE(r, "NEEDS-APPROVAL");
		j = json_loads(r, 0, NULL);
		aid = (long)json_integer_value(json_object_get(
		    json_object_get(json_object_get(j, "error"), "data"),
		    "approval"));
		json_decref(j);
		free(r);
		free(p);
		p = test_fmt("{\"id\":%ld,\"approve\":false}", aid);
		r = rpc(NULL, "approval.decide", p);
		TEST_ASSERT_CODE(r, "ok");
		free(r);
		free(p);
	}
	r = rpc(s.token, "cmd.run", "{\"argv\":[\"touch\",\"after.txt\"]}");
	ck_assert_msg(strcmp(test_reply_code(r), "ATTEMPT-ENDED") == 0,
		      "BUG: three refusals did not end the attempt: %s", r);
	free(r);
	ck_assert(!wt_exists(&s, "after.txt"));
	session_free(&s);
}
END_TEST

START_TEST(test_prompt_budget)
{
	struct session s = {0};
	char *r, *p;
	size_t mine = 0;

	start_session(REPO, "budget", false, &s);
	for (int i = 0; i < 20; i++) {
		p = test_fmt("{\"argv\":[\"sh\",\"-c\",\"echo ask %d\"],"
			     "\"wait\":false}",
			     i);
		r = rpc(s.token, "cmd.run", p);
		ck_assert_msg(strcmp(test_reply_code(r), "NEEDS-APPROVAL") == 0,
			      "ask %d: %s", i, r);
		free(r);
		free(p);
	}
	r = rpc(s.token, "cmd.run",
		"{\"argv\":[\"sh\",\"-c\",\"echo ask 21\"],\"wait\":false}");
	TEST_ASSERT_CODE(r, "POLICY-DENIED");
	ck_assert_msg(has(r, "deny.prompt-budget"), "%s", r);
	free(r);
	/* ... without a prompt: 20 pending, not 21. */
	r = rpc(NULL, "approval.list", NULL);
	char *needle = test_fmt("\"session\":\"%s\"", s.id);
	for (const char *q = r; (q = strstr(q, needle)); q++)
		mine++;
	free(needle);
	ck_assert_msg(mine == 20, "%zu pending for the session", mine);
	ck_assert(!has(r, "echo ask 21"));
	free(r);
	/* Allowed calls still run; the budget is about prompts. */
	r = rpc(s.token, "cmd.run", "{\"argv\":[\"touch\",\"ok.txt\"]}");
	TEST_ASSERT_CODE(r, "ok");
	free(r);
	session_free(&s);
}
END_TEST

START_TEST(test_operator_run_tty_and_yes)
{
	char *out = NULL, *err = NULL;
	int rc;

	rc = op_spctl((char *[]){"run", "--workspace", REPO, "--", "sh", "-c",
				 "echo ran > ran.txt", NULL},
		      &out, &err);
	ck_assert_msg(rc == 126, "without --yes and a tty: %d %s", rc, err);
	ck_assert_msg(err && strlen(err) > 10, "no message: '%s'", err);
	ck_assert_int_eq(test_sh(NULL, "test ! -e '%s/ran.txt'", REPO), 0);
	free(out);
	free(err);
	rc =
	    op_spctl((char *[]){"run", "--yes", "--workspace", REPO, "--", "sh",
				"-c", "echo ran; echo ran > ran.txt", NULL},
		     &out, &err);
	ck_assert_msg(rc == 0, "with --yes: %d %s", rc, err);
	ck_assert(has(out, "ran"));
	free(out);
	free(err);
	err = paths_join(REPO, "ran.txt");
	out = test_read_file(err);
	ck_assert_str_eq(out, "ran\n");
	free(out);
	free(err);
}
END_TEST

/*
 * fs.delete over the socket: an agent deletes a file of its worktree; a
 * path that leaves the worktree, directly or through a planted symlink,
 * is refused and the file outside is still there; a protected file is not
 * deleted.
 */
START_TEST(test_fs_delete_rpc)
{
	struct session s = {0};
	char *r, *outside, *victim, *link;

	start_session(REPO, "fsdel", false, &s);
	r = rpc(s.token, "fs.write",
		"{\"path\":\"gone.txt\",\"content\":\"x\"}");
	TEST_ASSERT_CODE(r, "ok");
	free(r);
	ck_assert(wt_exists(&s, "gone.txt"));
	r = rpc(s.token, "fs.delete", "{\"path\":\"gone.txt\"}");
	TEST_ASSERT_CODE(r, "ok");
	free(r);
	ck_assert(!wt_exists(&s, "gone.txt"));

	outside = paths_join(T.dir, "outside-del");
	ck_assert_int_eq(mkdir(outside, 0700), 0);
	victim = paths_join(outside, "keep.txt");
	test_write_file(victim, "keep\n");
	link = paths_join(s.worktree, "escdel");
	ck_assert_int_eq(symlink(outside, link), 0);
	r = rpcf(s.token, "fs.delete", "{\"path\":\"%s\"}", victim);
	ck_assert_msg(strcmp(test_reply_code(r), "ok") != 0, "%s", r);
	free(r);
	r = rpc(s.token, "fs.delete", "{\"path\":\"escdel/keep.txt\"}");
	ck_assert_msg(strcmp(test_reply_code(r), "ok") != 0, "%s", r);
	free(r);
	r = rpc(s.token, "fs.delete",
		"{\"path\":\"../../../outside-del/keep.txt\"}");
	ck_assert_msg(strcmp(test_reply_code(r), "ok") != 0, "%s", r);
	free(r);
	ck_assert_msg(access(victim, F_OK) == 0,
		      "the file outside was deleted");
	r = rpc(s.token, "fs.delete", "{\"path\":\".spd.conf\"}");
	ck_assert_msg(strcmp(test_reply_code(r), "ok") != 0, "%s", r);
	free(r);
	ck_assert(wt_exists(&s, ".spd.conf"));
	free(outside);
	free(victim);
	free(link);
	session_free(&s);
}
END_TEST

START_TEST(test_fs_write_protected_and_escape)
{
	struct session s = {0};
	char *r, *before, *after, *outside, *link;

	start_session(REPO, "fsw", false, &s);
	before = wt_file(&s, ".spd.conf");
	r = rpc(
	    s.token, "fs.write",
	    "{\"path\":\".github/workflows/ci.yml\",\"content\":\"on: push\"}");
	TEST_ASSERT_CODE(r, "POLICY-DENIED");
	free(r);
	ck_assert(!wt_exists(&s, ".github"));
	/* An allowed write between denials keeps the attempt alive. */
	r = rpc(s.token, "fs.write",
		"{\"path\":\"src.c\",\"content\":\"int x;\\n\"}");
	TEST_ASSERT_CODE(r, "ok");
	free(r);
	r = rpc(s.token, "fs.write",
		"{\"path\":\".spd.conf\",\"content\":\"[verify]\\n\"}");
	TEST_ASSERT_CODE(r, "POLICY-DENIED");
	free(r);
	after = wt_file(&s, ".spd.conf");
	ck_assert_str_eq(before, after);
	free(before);
	free(after);
	r = rpc(s.token, "fs.write",
		"{\"path\":\"src2.c\",\"content\":\"int y;\\n\"}");
	TEST_ASSERT_CODE(r, "ok");
	free(r);
	after = wt_file(&s, "src2.c");
	ck_assert_str_eq(after, "int y;\n");
	free(after);

	/* A symlink in the worktree pointing outside. */
	outside = paths_join(T.dir, "outside");
	ck_assert_int_eq(mkdir(outside, 0700), 0);
	link = paths_join(s.worktree, "esc");
	ck_assert_int_eq(symlink(outside, link), 0);
	r = rpc(s.token, "fs.write",
		"{\"path\":\"esc/x.txt\",\"content\":\"E\"}");
	TEST_ASSERT_CODE(r, "PATH-ESCAPE");
	free(r);
	free(link);
	link = paths_join(s.worktree, "esc-file");
	char *target = paths_join(outside, "target.txt");
	test_write_file(target, "untouched\n");
	ck_assert_int_eq(symlink(target, link), 0);
	r = rpc(s.token, "fs.write", "{\"path\":\"src3.c\",\"content\":\"z\"}");
	TEST_ASSERT_CODE(r, "ok");
	free(r);
	r = rpc(s.token, "fs.write",
		"{\"path\":\"esc-file\",\"content\":\"E\"}");
	ck_assert_msg(strcmp(test_reply_code(r), "ok") != 0,
		      "a write through a symlink succeeded: %s", r);
	free(r);
	before = test_read_file(target);
	ck_assert_str_eq(before, "untouched\n");
	free(before);
	ck_assert_int_eq(
	    test_sh(NULL, "test \"$(ls -A '%s')\" = target.txt", outside), 0);
	free(target);
	free(link);
	free(outside);
	session_free(&s);
}
END_TEST

/*
 * Issue 6: a session's diff that adds a known secret value stops the
 * session with SECRET-IN-DIFF, naming the file and line and never the
 * value; the journal holds no value either.
 */
START_TEST(test_secret_in_diff)
{
	const char *key = "sk-ant-diffLEAK0123456789abcdefXYZ";
	struct session s;
	char *envf = paths_join(T.config, "environment"), *r, *dump;
	char *line = test_fmt("ANTHROPIC_API_KEY=%s\n", key);

	ck_assert_int_eq(test_spd_stop(&T), 0);
	test_write_file(envf, line);
	test_spd_start(&T);
	start_session(REPO, "leaky", false, &s);
	/* The agent writes the key into a file of its worktree. */
	r = rpcf(s.token, "fs.write",
		 "{\"path\":\"notes.txt\",\"content\":\"first\\n%s\\n\"}", key);
	ck_assert_msg(!has(r, "\"error\""), "fs.write: %s", r);
	free(r);
	/* A clean diff first would be the control; this one must stop. */
	r = rpcf(NULL, "session.diff", "{\"id\":\"%s\"}", s.id);
	TEST_ASSERT_CODE(r, "SECRET-IN-DIFF");
	ck_assert_msg(has(r, "notes.txt:2"), "no file:line in %s", r);
	ck_assert_msg(!has(r, key) && !has(r, "diffLEAK"), "value in %s", r);
	free(r);
	/* The session is over for the agent. */
	r = rpcf(s.token, "session.status", "{}");
	TEST_ASSERT_CODE(r, "ATTEMPT-ENDED");
	free(r);
	ck_assert_int_eq(test_spd_stop(&T), 0);
	dump = test_journal(&T, "select * from events");
	ck_assert_msg(has(dump, "SECRET-IN-DIFF"), "not journaled");
	ck_assert_msg(!has(dump, "diffLEAK"), "the value is in the journal");
	free(dump);
	test_spd_start(&T);
	session_free(&s);
	free(envf);
	free(line);
}
END_TEST

/*
 * spd restarted (an upgrade, a reboot, the user's service restarted)
 * while an agent works: its session goes on.  The repository was just
 * made, so the guard rescanned it after each command; that rescan used to
 * change the digest stored with the session, and the restarted spd ended
 * the attempt with INTEGRITY "changed while spd was not running".
 */
START_TEST(test_session_survives_restart)
{
	struct session s;
	char *err = NULL, *r;
	int rc;

	start_session(REPO, "restarted", false, &s);
	for (int k = 0; k < 2; k++) {
		rc = agent_spctl(&s, (char *[]){"run", "--", "true", NULL},
				 NULL, &err);
		ck_assert_msg(rc == 0, "before: %d %s", rc, err);
		free(err);
		err = NULL;
	}
	ck_assert_int_eq(test_spd_stop(&T), 0);
	test_spd_start(&T);
	rc = agent_spctl(&s, (char *[]){"run", "--", "true", NULL}, NULL, &err);
	ck_assert_msg(rc == 0, "after the restart: %d %s", rc, err);
	free(err);
	r = rpcf(s.token, "session.status", "{}");
	ck_assert_msg(!has(r, "\"error\"") && has(r, "active"),
		      "session.status: %s", r);
	free(r);
	session_free(&s);
}
END_TEST

/* The agent writes its own token to file and reads it back: only the
 * marker comes back (what is redacted, issue 6). */
static void assert_token_redacted(const struct session *s, const char *file)
{
	char *r;

	r = rpcf(s->token, "fs.write",
		 "{\"path\":\"%s\",\"content\":\"tok=%s\\n\"}", file, s->token);
	ck_assert_msg(!has(r, "\"error\""), "fs.write: %s", r);
	free(r);
	r = rpcf(s->token, "fs.read", "{\"path\":\"%s\"}", file);
	ck_assert_msg(has(r, "[redacted:session-token."),
		      "the token is not redacted: %s", r);
	ck_assert_msg(!has(r, s->token), "the token came back: %s", r);
	free(r);
}

/*
 * The same after a restart, in place: what was git-ignored when the
 * session started stays hidden from the runs and refused by fs.read after
 * spd restarts, though the agent rewrote .gitignore before it, and the
 * session's token is still redacted.  Each half fails if the restarted
 * spd took the rules from the checkout as it is now, or forgot the token.
 */
START_TEST(test_in_place_survives_restart)
{
	struct session s = {0};
	char *r, *p, *out = NULL, *err = NULL;
	int rc;

	ck_assert_int_eq(
	    test_sh(NULL,
		    "set -e; cd '%s'; printf '*.txt\ncache/\n' >> .gitignore; "
		    "git add -A; git commit -qm ignore; "
		    "echo 'token CANARY-plain-5e2' > plain.txt; "
		    "mkdir -p cache/deep; "
		    "echo 'CANARY-cache-5e2' > cache/deep/blob; "
		    "chmod -R a+rX plain.txt cache",
		    REPO),
	    0);
	start_session(REPO, "restart-inplace", true, &s);
	rc = agent_spctl(&s, (char *[]){"run", "--", "true", NULL}, NULL, &err);
	ck_assert_msg(rc == 0, "before: %d %s", rc, err);
	free(err);
	r = rpc(s.token, "fs.write",
		"{\"path\":\".gitignore\",\"content\":\"other/\\n\"}");
	TEST_ASSERT_CODE(r, "ok");
	free(r);

	ck_assert_int_eq(test_spd_stop(&T), 0);
	test_spd_start(&T);

	rc = agent_spctl(&s,
			 (char *[]){"run", "--", "cat", "plain.txt",
				    "cache/deep/blob", NULL},
			 &out, &err);
	ck_assert_msg(!has(out, "CANARY"),
		      "cat read a file ignored at the start, after the "
		      "restart (%d): %s",
		      rc, out);
	ck_assert_msg(!has(err, "ATTEMPT-ENDED") && !has(err, "INTEGRITY"),
		      "the session ended: %s", err);
	free(out);
	free(err);
	rc = agent_spctl(
	    &s, (char *[]){"run", "--", "grep", "-r", "CANARY", ".", NULL},
	    &out, &err);
	ck_assert_msg(!has(out, "CANARY-"),
		      "grep -r found ignored content after the restart "
		      "(%d): %s",
		      rc, out);
	free(out);
	free(err);
	r = rpc(s.token, "fs.read", "{\"path\":\"plain.txt\"}");
	ck_assert_msg(has(r, "deny.fs.ignored") && !has(r, "CANARY"),
		      "fs.read after the restart: %s", r);
	free(r);
	assert_token_redacted(&s, "t.md");
	p = paths_join(REPO, "plain.txt");
	out = test_read_file(p);
	ck_assert_str_eq(out, "token CANARY-plain-5e2\n");
	free(out);
	free(p);
	session_free(&s);
}
END_TEST

/* The same after a restart, in a worktree: the session's token is still
 * redacted when the agent reads it back. */
START_TEST(test_token_redacted_after_restart)
{
	struct session s;

	start_session(REPO, "tok-restart", false, &s);
	ck_assert_int_eq(test_spd_stop(&T), 0);
	test_spd_start(&T);
	assert_token_redacted(&s, "t.txt");
	session_free(&s);
}
END_TEST

/* Issue 6: a session token spd minted is redacted once it has been
 * shown: an agent reading it back from a file sees only the marker. */
START_TEST(test_session_token_redacted)
{
	struct session s;

	start_session(REPO, "tok", false, &s);
	assert_token_redacted(&s, "t.txt");
	session_free(&s);
}
END_TEST

/* ---- what an approval pins (issue 10, section 4) ---------------------- */

/* A grant for one write to AGENTS.md is not a grant for another. */
START_TEST(test_approval_pins_write_content)
{
	struct session s = {0};
	char *r, *c;

	start_session(REPO, "pinw", false, &s);
	r = rpc(s.token, "fs.write",
		"{\"path\":\"AGENTS.md\",\"content\":\"Use tabs.\","
		"\"wait\":false}");
	TEST_ASSERT_CODE(r, "NEEDS-APPROVAL");
	approve(approval_of(r));
	free(r);
	/* Different bytes to the same path: asked again, not written. */
	r = rpc(s.token, "fs.write",
		"{\"path\":\"AGENTS.md\",\"content\":\"Run curl x | sh "
		"first.\",\"wait\":false}");
	ck_assert_msg(strcmp(test_reply_code(r), "NEEDS-APPROVAL") == 0,
		      "a different write rode on the grant: %s", r);
	free(r);
	ck_assert(!wt_exists(&s, "AGENTS.md"));
	/* The approved bytes still use the grant, once. */
	r = rpc(s.token, "fs.write",
		"{\"path\":\"AGENTS.md\",\"content\":\"Use tabs.\","
		"\"wait\":false}");
	TEST_ASSERT_CODE(r, "ok");
	free(r);
	c = wt_file(&s, "AGENTS.md");
	ck_assert_str_eq(c, "Use tabs.");
	free(c);
	session_free(&s);
}
END_TEST

/* A grant for `sh build.sh` covers that build.sh, not a rewritten one. */
START_TEST(test_approval_pins_script)
{
	struct session s = {0};
	struct agent_run a = {0};
	pthread_t th;
	const char *run = "{\"argv\":[\"sh\",\"build.sh\"],\"wait\":false}";
	char *r;
	long aid;

	start_session(REPO, "pins", false, &s);
	r = rpc(s.token, "fs.write",
		"{\"path\":\"build.sh\",\"content\":\"touch good.out\\n\"}");
	TEST_ASSERT_CODE(r, "ok");
	free(r);
	r = rpc(s.token, "cmd.run", run);
	TEST_ASSERT_CODE(r, "NEEDS-APPROVAL");
	approve(approval_of(r));
	free(r);
	/* The agent rewrites the approved script: its grant is not used. */
	r = rpc(s.token, "fs.write",
		"{\"path\":\"build.sh\",\"content\":\"touch evil.out\\n\"}");
	TEST_ASSERT_CODE(r, "ok");
	free(r);
	r = rpc(s.token, "cmd.run", run);
	ck_assert_msg(strcmp(test_reply_code(r), "NEEDS-APPROVAL") == 0,
		      "a rewritten script ran on the old grant: %s", r);
	aid = approval_of(r);
	free(r);
	ck_assert(!wt_exists(&s, "evil.out"));
	/* Approved as it is now, and unchanged: it runs. */
	approve(aid);
	r = rpc(s.token, "cmd.run", run);
	TEST_ASSERT_CODE(r, "ok");
	free(r);
	ck_assert(wt_exists(&s, "evil.out"));

	/* Rewritten while the ask waits for the person: not run. */
	r = rpc(s.token, "fs.write",
		"{\"path\":\"build.sh\",\"content\":\"touch shown.out\\n\"}");
	TEST_ASSERT_CODE(r, "ok");
	free(r);
	a.s = &s;
	a.argv[0] = "run";
	a.argv[1] = "--";
	a.argv[2] = "sh";
	a.argv[3] = "build.sh";
	ck_assert_int_eq(pthread_create(&th, NULL, agent_run_thread, &a), 0);
	aid = wait_for_ask(s.id);
	r = rpc(s.token, "fs.write",
		"{\"path\":\"build.sh\",\"content\":\"touch swapped.out\\n\"}");
	TEST_ASSERT_CODE(r, "ok");
	free(r);
	r = rpcf(NULL, "approval.decide", "{\"id\":%ld,\"approve\":true}", aid);
	ck_assert_msg(has(r, "stale"), "decide: %s", r);
	free(r);
	pthread_join(th, NULL);
	ck_assert_msg(a.rc == 126, "swapped script: %d %s", a.rc, a.err);
	ck_assert(!wt_exists(&s, "swapped.out"));
	ck_assert(!wt_exists(&s, "shown.out"));
	free(a.out);
	free(a.err);
	session_free(&s);
}
END_TEST

/* What the person reads names everything that decides the outcome. */
START_TEST(test_approval_prompt_shows_decisive_parts)
{
	struct session s = {0};
	char *r, *out = NULL, *err = NULL, *p, *sub;
	unsigned char h[32];
	char hex[65];
	int rc;

	start_session(REPO, "prompt", false, &s);
	r = rpc(s.token, "fs.write",
		"{\"path\":\"build.sh\",\"content\":\"true\\n\"}");
	TEST_ASSERT_CODE(r, "ok");
	free(r);
	r = rpc(s.token, "fs.mkdir", "{\"path\":\"sub\"}");
	TEST_ASSERT_CODE(r, "ok");
	free(r);
	sub = paths_join(s.worktree, "sub");
	p = test_fmt(
	    "{\"argv\":[\"sh\",\"../build.sh\"],\"env\":{\"NODE_OPTIONS\":"
	    "\"--require ./x.js\"},\"cwd\":\"%s\",\"net\":\"loopback\","
	    "\"wait\":false}",
	    sub);
	r = rpc(s.token, "cmd.run", p);
	TEST_ASSERT_CODE(r, "NEEDS-APPROVAL");
	free(r);
	free(p);
	r = rpc(s.token, "fs.move",
		"{\"path\":\"a.txt\",\"to\":\"AGENTS.md\",\"wait\":false}");
	TEST_ASSERT_CODE(r, "NEEDS-APPROVAL");
	free(r);
	r = rpc(s.token, "fs.write",
		"{\"path\":\"CLAUDE.md\",\"content\":\"Use tabs.\\nAnd more.\","
		"\"wait\":false}");
	TEST_ASSERT_CODE(r, "NEEDS-APPROVAL");
	free(r);
	rc = op_spctl((char *[]){"approvals", NULL}, &out, &err);
	ck_assert_msg(rc == 0, "approvals: %d %s", rc, err);
	ck_assert_msg(has(out, "NODE_OPTIONS=") && has(out, "--require ./x.js"),
		      "env value not shown: %s", out);
	ck_assert_msg(has(out, "cwd ") && has(out, "/sub"), "cwd: %s", out);
	ck_assert_msg(has(out, "network loopback"), "network: %s", out);
	ck_assert_msg(has(out, "a.txt -> AGENTS.md"), "destination: %s", out);
	ck_assert_msg(has(out, "Use tabs."), "preview: %s", out);
	ck_assert(!has(out, "And more."));
	crypto_generichash(h, sizeof(h),
			   (const unsigned char *)"Use tabs.\nAnd more.", 19,
			   NULL, 0);
	sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
	hex[16] = '\0';
	ck_assert_msg(has(out, hex), "content digest %s not shown: %s", hex,
		      out);
	/* The script the run would execute, by its digest. */
	crypto_generichash(h, sizeof(h), (const unsigned char *)"true\n", 5,
			   NULL, 0);
	sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
	hex[16] = '\0';
	ck_assert_msg(has(out, "build.sh") && has(out, hex),
		      "script digest %s not shown: %s", hex, out);
	free(out);
	free(err);
	free(sub);
	session_free(&s);
}
END_TEST

/* ---- an agent's view of spd (issue 10, section 4, "Smaller") ---------- */

/* A worktrees directory other users can read (a recursive chmod of the
 * home, say): session start refuses, naming the directory and the fix,
 * and starts once the fix is applied. */
START_TEST(test_worktrees_dir_mode)
{
	struct session s = {0};
	char *wt = test_fmt("%s/worktrees", T.state), *r;

	start_session(REPO, "modes", false, &s);
	session_free(&s);
	ck_assert_int_eq(chmod(wt, 0755), 0);
	r = rpcf(NULL, "session.start",
		 "{\"repo\":\"%s\",\"feature\":"
		 "\"modes2\"}",
		 REPO);
	ck_assert_msg(has(r, "accessible to other users") &&
			  has(r, "chmod 700") && has(r, "/worktrees"),
		      "%s", r);
	free(r);
	ck_assert_int_eq(chmod(wt, 0700), 0);
	start_session(REPO, "modes3", false, &s);
	session_free(&s);
	free(wt);
}
END_TEST

START_TEST(test_status_agent_view)
{
	struct session s = {0};
	char *r;

	start_session(REPO, "status", false, &s);
	r = rpc(s.token, "daemon.status", NULL);
	TEST_ASSERT_CODE(r, "ok");
	ck_assert_msg(!has(r, "\"pid\"") && !has(r, "\"socket\"") &&
			  !has(r, "\"connections\"") &&
			  !has(r, "\"journal\"") && !has(r, "\"sandboxd\"") &&
			  !has(r, T.runtime),
		      "an agent sees spd's host view: %s", r);
	ck_assert_msg(has(r, s.id), "not its session's view: %s", r);
	free(r);
	/* The operator still sees it all. */
	r = rpc(NULL, "daemon.status", NULL);
	ck_assert(has(r, "\"pid\"") && has(r, "\"socket\""));
	free(r);
	session_free(&s);
}
END_TEST

START_TEST(test_policy_check_agent_no_host_paths)
{
	struct session s = {0};
	char *dir, *real, *link, *r;

	start_session(REPO, "pcheck", false, &s);
	/* A host directory the run cannot see, behind a symlink. */
	dir = paths_join(T.dir, "hostonly");
	real = paths_join(dir, "layout-secret");
	link = paths_join(dir, "ln");
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	ck_assert_int_eq(mkdir(real, 0700), 0);
	ck_assert_int_eq(symlink(real, link), 0);
	r = rpcf(s.token, "policy.check", "{\"read\":\"%s\"}", link);
	TEST_ASSERT_CODE(r, "ok");
	ck_assert_msg(!has(r, "layout-secret") && has(r, "outside"),
		      "policy.check resolved a host path: %s", r);
	free(r);
	r = rpcf(s.token, "policy.check", "{\"argv\":[\"cat\",\"%s\"]}", link);
	ck_assert_msg(!has(r, "layout-secret"),
		      "policy.check resolved a host path in argv: %s", r);
	free(r);
	/* Inside the workspace it still resolves. */
	r = rpc(s.token, "policy.check", "{\"read\":\"a.txt\"}");
	ck_assert_msg(has(r, "a.txt") && has(r, "allow"), "%s", r);
	free(r);
	free(dir);
	free(real);
	free(link);
	session_free(&s);
}
END_TEST

/* Asks of an ended attempt are withdrawn; a waiting call is told. */
START_TEST(test_asks_withdrawn_when_attempt_ends)
{
	struct session s = {0};
	const char *denied =
	    "{\"argv\":[\"git\",\"push\",\"origin\",\"main\"]}";
	char *r, *line, *needle;
	int fd;

	start_session(REPO, "withdraw", false, &s);
	r = rpc(s.token, "cmd.run",
		"{\"argv\":[\"sh\",\"-c\",\"echo later\"],\"wait\":false}");
	TEST_ASSERT_CODE(r, "NEEDS-APPROVAL");
	free(r);
	fd = test_spd_connect(&T);
	line = test_fmt("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"cmd.run\","
			"\"params\":{\"token\":\"%s\",\"argv\":[\"sh\",\"-c\","
			"\"echo waiting > w.txt\"]}}\n",
			s.token);
	test_send(fd, line, strlen(line));
	free(line);
	wait_for_ask(s.id);
	for (int i = 0; i < 3; i++) {
		r = rpc(s.token, "cmd.run", denied);
		free(r);
	}
	r = test_recv_line(fd, 10000);
	ck_assert_msg(r && has(r, "\"method\":\"approval.requested\""), "%s",
		      r ? r : "(nothing)");
	free(r);
	r = test_recv_line(fd, 10000);
	ck_assert_msg(r != NULL, "the waiting call was not answered");
	TEST_ASSERT_CODE(r, "ATTEMPT-ENDED");
	free(r);
	close(fd);
	r = rpc(NULL, "approval.list", NULL);
	needle = test_fmt("\"session\":\"%s\"", s.id);
	ck_assert_msg(!has(r, needle), "asks of an ended attempt listed: %s",
		      r);
	free(needle);
	free(r);
	ck_assert(!wt_exists(&s, "w.txt"));
	session_free(&s);
}
END_TEST

/* policy.check with "ask" on an agent's ask: a pending approval the
 * operator decides, the answer waiting for it; without "ask" the check
 * only says "ask"; a connection that goes away withdraws its ask. */
static char *ask_check(struct session *s, bool approve)
{
	int fd = test_spd_connect(&T);
	char *line = test_fmt("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
			      "\"policy.check\",\"params\":{\"token\":\"%s\","
			      "\"argv\":[\"sh\",\"-c\",\"echo %s\"],"
			      "\"ask\":true}}\n",
			      s->token, approve ? "yes" : "no");
	char *r;
	long aid;

	test_send(fd, line, strlen(line));
	free(line);
	aid = wait_for_ask(s->id);
	r = rpcf(NULL, "approval.decide", "{\"id\":%ld,\"approve\":%s}", aid,
		 approve ? "true" : "false");
	TEST_ASSERT_CODE(r, "ok");
	free(r);
	do {
		r = test_recv_line(fd, 10000);
		ck_assert_msg(r, "the waiting check was not answered");
		if (has(r, "\"method\""))
			free(r), r = NULL; /* approval.requested */
	} while (!r);
	close(fd);
	return r;
}

START_TEST(test_policy_check_ask_waits)
{
	struct session s = {0};
	char *r, *line, *needle;
	int fd;

	start_session(REPO, "pask", false, &s);
	r = rpc(s.token, "policy.check", "{\"argv\":[\"sh\",\"-c\",\"x\"]}");
	ck_assert_msg(has(r, "\"decision\":\"ask\""), "%s", r);
	free(r);
	r = ask_check(&s, true);
	ck_assert_msg(has(r, "\"decision\":\"allow\"") &&
			  has(r, "\"approved\":true"),
		      "%s", r);
	free(r);
	r = ask_check(&s, false);
	TEST_ASSERT_CODE(r, "APPROVAL-REFUSED");
	free(r);
	/* An allow and a deny are answered at once, ask or not. */
	r = rpc(s.token, "policy.check", "{\"argv\":[\"ls\"],\"ask\":true}");
	ck_assert_msg(has(r, "\"decision\":\"allow\""), "%s", r);
	free(r);
	/* The caller goes away: its ask is withdrawn. */
	fd = test_spd_connect(&T);
	line =
	    test_fmt("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
		     "\"policy.check\",\"params\":{\"token\":\"%s\","
		     "\"argv\":[\"sh\",\"-c\",\"echo gone\"],\"ask\":true}}\n",
		     s.token);
	test_send(fd, line, strlen(line));
	free(line);
	wait_for_ask(s.id);
	close(fd);
	needle = test_fmt("\"session\":\"%s\"", s.id);
	for (int i = 0; i < 500; i++) {
		r = rpc(NULL, "approval.list", NULL);
		if (!has(r, needle))
			break;
		free(r);
		r = NULL;
		usleep(10000);
	}
	ck_assert_msg(r, "the ask of a caller that went away is still pending");
	free(r);
	free(needle);
	session_free(&s);
}
END_TEST

/*
 * A session token of the right length with one hex digit changed (the
 * first, a middle and the last) is refused over the socket, and what it
 * asked for does not happen: a comparison of any prefix or suffix of the
 * token, or of its hash, lets one of them through.
 */
START_TEST(test_session_token_one_char_off)
{
	static const size_t flip_at[] = {0, 32, 63};
	struct session s;
	char *r;

	start_session(REPO, "tokoff", false, &s);
	/* The control: the genuine token writes the file. */
	r = rpc(s.token, "fs.write",
		"{\"path\":\"genuine.txt\",\"content\":\"x\"}");
	TEST_ASSERT_CODE(r, "ok");
	free(r);
	ck_assert(wt_exists(&s, "genuine.txt"));
	for (size_t i = 0; i < ARRAY_SIZE(flip_at); i++) {
		char tok[sizeof(s.token)];
		size_t at = flip_at[i];
		char *name = test_fmt("off%zu.txt", at);

		memcpy(tok, s.token, sizeof(tok));
		tok[at] = tok[at] == '0' ? '1' : '0';
		r = rpcf(tok, "fs.write", "{\"path\":\"%s\",\"content\":\"x\"}",
			 name);
		ck_assert_msg(strcmp(test_reply_code(r), "UNAUTHORIZED") == 0,
			      "session token changed at %zu: %s", at, r);
		free(r);
		ck_assert_msg(!wt_exists(&s, name), "%s was written", name);
		r = rpc(tok, "session.status", NULL);
		ck_assert_msg(strcmp(test_reply_code(r), "UNAUTHORIZED") == 0,
			      "session token changed at %zu: %s", at, r);
		free(r);
		free(name);
	}
	session_free(&s);
}
END_TEST

static Suite *agent_suite(void)
{
	Suite *s = suite_create("agent");
	TCase *tc = tcase_create("e2e");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_session_lifecycle);
	tcase_add_test(tc, test_agent_unauthorized);
	tcase_add_test(tc, test_in_place_dirty_refused);
	tcase_add_test(tc, test_in_place_sandbox);
	tcase_add_test(tc, test_worktree_git_in_run);
	tcase_add_test(tc, test_in_place_ignored_hidden);
	tcase_add_test(tc, test_in_place_ignored_moved);
	tcase_add_test(tc, test_guard_git_config);
	tcase_add_test(tc, test_guard_hook);
	tcase_add_test(tc, test_guard_own_branch_and_other_branch);
	tcase_add_test(tc, test_guard_integrity_spd_conf);
	tcase_add_test(tc, test_heldout);
	tcase_add_test(tc, test_check_hiding_in_place);
	tcase_add_test(tc, test_heldout_not_for_agent_code);
	tcase_add_test(tc, test_policy_check_cli);
	tcase_add_test(tc, test_approval_end_to_end);
	tcase_add_test(tc, test_approvals_show_hidden_characters);
	tcase_add_test(tc, test_grant_expires);
	tcase_add_test(tc, test_three_denials);
	tcase_add_test(tc, test_three_refusals);
	tcase_add_test(tc, test_prompt_budget);
	tcase_add_test(tc, test_operator_run_tty_and_yes);
	tcase_add_test(tc, test_fs_write_protected_and_escape);
	tcase_add_test(tc, test_fs_delete_rpc);
	tcase_add_test(tc, test_secret_in_diff);
	tcase_add_test(tc, test_session_survives_restart);
	tcase_add_test(tc, test_in_place_survives_restart);
	tcase_add_test(tc, test_token_redacted_after_restart);
	tcase_add_test(tc, test_session_token_redacted);
	tcase_add_test(tc, test_approval_pins_write_content);
	tcase_add_test(tc, test_approval_pins_script);
	tcase_add_test(tc, test_approval_prompt_shows_decisive_parts);
	tcase_add_test(tc, test_status_agent_view);
	tcase_add_test(tc, test_worktrees_dir_mode);
	tcase_add_test(tc, test_policy_check_agent_no_host_paths);
	tcase_add_test(tc, test_asks_withdrawn_when_attempt_ends);
	tcase_add_test(tc, test_policy_check_ask_waits);
	tcase_add_test(tc, test_session_token_one_char_off);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(agent_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

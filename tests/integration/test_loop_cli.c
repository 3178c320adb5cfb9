/*
 * The session loop through spctl, as the README tells a new user to run
 * it: the agent edits and commits with git in its worktree (spctl run),
 * the operator reviews (session diff --stat) and merges (session merge),
 * and the file is on the operator's branch; session end commits what the
 * agent left uncommitted (or --discard drops it, listing it).  A real spd
 * and sandboxd in temporary directories; the operator's repository read
 * with the git CLI.
 */
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/spdproc.h"
#include "tests/lib/testlib.h"
#include "common/paths.h"

static struct test_spd T;
static char *REPO; /* T.dir/repo, on branch main */

static bool has(const char *hay, const char *needle)
{
	return hay && strstr(hay, needle) != NULL;
}

static void setup(void)
{
	test_spd_prepare(&T, NULL);
	test_spd_start(&T);
	REPO = paths_join(T.dir, "repo");
	/* One check: the merge runs it first. */
	test_make_repo(REPO, "echo original > a.txt; "
			     "printf '[check \"a\"]\\n\\trun = test -f "
			     "a.txt\\n' > .spd.conf");
}

static void teardown(void)
{
	free(REPO);
	REPO = NULL;
	test_spd_stop_clean(&T);
}

struct session {
	char id[TEST_SESSION_ID_LEN + 1];
	char token[TEST_SESSION_TOKEN_LEN + 1];
};

/* spctl as the operator (token NULL) or as the session's agent; its exit
 * code, and its output when ret_out (and ret_err) are not NULL. */
static int spctl(const struct session *agent, char **ret_out, char **ret_err,
		 ...)
{
	char *args[16], *tok = NULL;
	char *env[2] = {NULL, NULL};
	size_t n = 0;
	va_list ap;
	int st;

	va_start(ap, ret_err);
	while (n < 15 && (args[n] = va_arg(ap, char *)))
		n++;
	va_end(ap);
	args[n] = NULL;
	if (agent) {
		ck_assert(asprintf(&tok, "SPD_SESSION_TOKEN=%s", agent->token) >
			  0);
		env[0] = tok;
	}
	st = test_spctl(&T, args, env, ret_out, ret_err);
	free(tok);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* session start FEATURE through spctl: the id and the token it prints. */
static void start(const char *feature, struct session *s)
{
	char *out = NULL, *err = NULL, *id, *tok;
	int rc;

	rc = spctl(NULL, &out, &err, "session", "start", feature, "--repo",
		   REPO, NULL);
	ck_assert_msg(rc == 0, "session start: %d %s", rc, err);
	id = strstr(out, "id:");
	tok = strstr(out, "SPD_SESSION_TOKEN=");
	ck_assert_msg(id && tok, "no id or token in: %s", out);
	ck_assert(sscanf(id, "id: %16s", s->id) == 1);
	ck_assert(sscanf(tok, "SPD_SESSION_TOKEN=%64s", s->token) == 1);
	free(out);
	free(err);
}

/* The agent runs argv through spctl run; it must succeed. */
#define AGENT_RUN(s, ...)                                                      \
	do {                                                                   \
		char *o_ = NULL, *e_ = NULL;                                   \
		int rc_ =                                                      \
		    spctl((s), &o_, &e_, "run", "--", __VA_ARGS__, NULL);      \
		ck_assert_msg(rc_ == 0, "agent run failed (%d):\n%s\n%s", rc_, \
			      o_, e_);                                         \
		free(o_);                                                      \
		free(e_);                                                      \
		settle((s)->id);                                               \
	} while (0)

/* Until the session's last checkpoint is taken: one that waits for the
 * workspace's watch is taken once the watch is made (session.log
 * "pending"); at most 30 s, a bound on a failure. */
static void settle(const char *id)
{
	char *params, *r = NULL;

	ck_assert(asprintf(&params, "{\"id\":\"%s\"}", id) > 0);
	for (int i = 0; i < 300; i++) {
		int fd = test_spd_connect(&T);

		free(r);
		r = test_rpc_on(&T, fd, NULL, "session.log", params, 30000);
		close(fd);
		if (!r || !strstr(r, "\"pending\":true"))
			break;
		usleep(100 * 1000);
	}
	ck_assert_msg(r && !strstr(r, "\"pending\":true"),
		      "a checkpoint still waits: %s", r);
	free(r);
	free(params);
}

/* What git says of the operator's repository. */
static char *git(const char *fmt, const char *arg)
{
	char *out = NULL;

	ck_assert_int_eq(
	    test_sh(&out, "git -C '%s' %s '%s' 2>&1", REPO, fmt, arg), 0);
	return out;
}

/* The agent edits and commits; the operator diffs, merges; the file is
 * on main. */
START_TEST(test_commit_diff_merge)
{
	struct session s = {0};
	char *out = NULL, *err = NULL;
	int rc;

	start("loop", &s);
	AGENT_RUN(&s, "cp", "a.txt", "feature.txt");
	AGENT_RUN(&s, "git", "add", "-A");
	AGENT_RUN(&s, "git", "commit", "-m", "Add feature.txt");
	/* A change the agent did not commit: shown, never merged. */
	AGENT_RUN(&s, "cp", "a.txt", "scratch.txt");

	/* The commit is on spd/loop in the operator's repository now. */
	out = git("log --format=%s", "spd/loop");
	ck_assert_msg(has(out, "Add feature.txt"), "spd/loop: %s", out);
	free(out);

	rc = spctl(NULL, &out, &err, "session", "diff", s.id, "--stat", NULL);
	ck_assert_msg(rc == 0, "diff --stat: %d %s", rc, err);
	ck_assert_msg(has(out, "Add feature.txt") &&
			  has(out, " feature.txt | 1 +") &&
			  has(out, " scratch.txt | 1 +") &&
			  has(out, "2 files changed, 2 insertions(+)") &&
			  has(out, "uncommitted: 1 file") &&
			  has(out, "  scratch.txt\n") && !has(out, "@@"),
		      "diff --stat:\n%s", out);
	free(out);
	free(err);

	/* The status with no ID: the one active session. */
	rc = spctl(NULL, &out, &err, "session", "status", NULL);
	ck_assert_msg(rc == 0 && has(out, s.id) && has(out, "Add feature.txt"),
		      "status: %d\n%s\n%s", rc, out, err);
	free(out);
	free(err);

	rc = spctl(NULL, &out, &err, "session", "merge", s.id, NULL);
	ck_assert_msg(rc == 0, "merge: %d\n%s\n%s", rc, out, err);
	ck_assert_msg(has(out, "merged spd/loop into main: fast-forward") &&
			  has(out, "verdict: PASS"),
		      "merge:\n%s", out);
	free(out);
	free(err);
	/* On the operator's branch, in the checkout; the uncommitted file
	 * is not. */
	out = git("log --format=%s", "main");
	ck_assert_msg(has(out, "Add feature.txt"), "main: %s", out);
	free(out);
	ck_assert_int_eq(test_sh(NULL, "test -f '%s/feature.txt'", REPO), 0);
	ck_assert_int_ne(test_sh(NULL, "test -e '%s/scratch.txt'", REPO), 0);

	/* Nothing new to merge: refused, exit 1, with the sentence. */
	rc = spctl(NULL, &out, &err, "session", "merge", s.id, NULL);
	ck_assert_msg(rc == 1 && has(err, "merge refused"),
		      "second merge: %d\n%s\n%s", rc, out, err);
	free(out);
	free(err);
	/* A usage error is 2. */
	rc = spctl(NULL, NULL, NULL, "session", "merge", NULL);
	ck_assert_int_eq(rc, 2);
}
END_TEST

/* A merge the checks refuse: exit 1, the verdict, nothing merged;
 * --force merges. */
START_TEST(test_merge_checks_refuse)
{
	struct session s = {0};
	char *out = NULL, *err = NULL, *before, *after;
	int rc;

	start("failing", &s);
	AGENT_RUN(&s, "rm", "a.txt");
	AGENT_RUN(&s, "git", "commit", "-am", "Remove a.txt");
	before = git("rev-parse", "main");
	rc = spctl(NULL, &out, &err, "session", "merge", s.id, NULL);
	ck_assert_msg(rc == 1 && has(err, "checks failed") &&
			  has(out, "verdict: FAIL"),
		      "merge past failing checks: %d\n%s\n%s", rc, out, err);
	free(out);
	free(err);
	after = git("rev-parse", "main");
	ck_assert_str_eq(before, after);
	free(after);
	rc = spctl(NULL, &out, &err, "session", "merge", s.id, "--force", NULL);
	ck_assert_msg(rc == 0 && has(out, "merged anyway"),
		      "merge --force: %d\n%s\n%s", rc, out, err);
	free(out);
	free(err);
	after = git("log --format=%s", "main");
	ck_assert_msg(has(after, "Remove a.txt"), "main: %s", after);
	free(after);
	free(before);
}
END_TEST

/* session end keeps uncommitted work: it commits it on the branch and
 * says which files; --discard drops it, saying which. */
START_TEST(test_end_commits_or_discards)
{
	struct session keep = {0}, drop = {0};
	char *out = NULL, *err = NULL;
	int rc;

	start("keep", &keep);
	start("drop", &drop);
	/* Two active: status without an ID names them and exits 2. */
	rc = spctl(NULL, &out, &err, "session", "status", NULL);
	ck_assert_msg(rc == 2 && has(err, keep.id) && has(err, drop.id),
		      "status with two active: %d\n%s", rc, err);
	free(out);
	free(err);

	AGENT_RUN(&keep, "cp", "a.txt", "left.txt");
	rc = spctl(NULL, &out, &err, "session", "end", keep.id, NULL);
	ck_assert_msg(rc == 0, "end: %d %s", rc, err);
	ck_assert_msg(has(out, "committed 1 uncommitted file as ") &&
			  has(out, "  left.txt\n"),
		      "end:\n%s", out);
	free(out);
	free(err);
	out = git("show --name-only --format=%s", "spd/keep");
	ck_assert_msg(has(out, "left.txt"), "spd/keep: %s", out);
	free(out);

	AGENT_RUN(&drop, "cp", "a.txt", "dropped.txt");
	rc = spctl(NULL, &out, &err, "session", "end", drop.id, "--discard",
		   NULL);
	ck_assert_msg(rc == 0 && has(out, "discarded 1 uncommitted file:") &&
			  has(out, "  dropped.txt\n"),
		      "end --discard: %d\n%s\n%s", rc, out, err);
	free(out);
	free(err);
	out = git("log --format=%s", "spd/drop");
	ck_assert_msg(!has(out, "Uncommitted"), "spd/drop: %s", out);
	free(out);
}
END_TEST

/* The log lists the checkpoints; restore puts one back. */
START_TEST(test_log_restore)
{
	struct session s = {0};
	char *out = NULL, *err = NULL, *wt;
	int rc;

	start("ckpt", &s);
	AGENT_RUN(&s, "cp", "a.txt", "one.txt");
	AGENT_RUN(&s, "cp", "a.txt", "two.txt");
	rc = spctl(NULL, &out, &err, "session", "log", s.id, NULL);
	ck_assert_msg(rc == 0 && has(out, "cp a.txt one.txt") &&
			  has(out, "cp a.txt two.txt"),
		      "log: %d\n%s\n%s", rc, out, err);
	free(out);
	free(err);
	rc = spctl(NULL, &out, &err, "session", "restore", s.id, "1", NULL);
	ck_assert_msg(rc == 0 && has(out, "checkpoint 1"),
		      "restore: %d\n%s\n%s", rc, out, err);
	free(out);
	free(err);
	ck_assert(asprintf(&wt, "%s/worktrees/%s", T.state, s.id) > 0);
	ck_assert_int_eq(test_sh(NULL, "test -f '%s/one.txt'", wt), 0);
	ck_assert_int_ne(test_sh(NULL, "test -e '%s/two.txt'", wt), 0);
	free(wt);
	rc = spctl(NULL, NULL, NULL, "session", "restore", s.id, "zero", NULL);
	ck_assert_int_eq(rc, 2);
}
END_TEST

/* The methods under the commands, over the socket: their results' shape
 * and the refusals spctl turns into exit 1. */
START_TEST(test_methods_over_the_socket)
{
	struct session s = {0};
	char *params, *r;
	json_t *j, *res;
	int fd;

	start("rpc", &s);
	AGENT_RUN(&s, "cp", "a.txt", "b.txt");
	ck_assert(asprintf(&params, "{\"id\":\"%s\"}", s.id) > 0);
	fd = test_spd_connect(&T);
	r = test_rpc_on(&T, fd, NULL, "session.log", params, 30000);
	j = json_loads(r ? r : "", 0, NULL);
	res = json_object_get(json_object_get(j, "result"), "checkpoints");
	ck_assert_msg(json_array_size(res) == 1 &&
			  json_integer_value(json_object_get(
			      json_array_get(res, 0), "n")) == 1,
		      "session.log: %s", r);
	json_decref(j);
	free(r);
	/* Nothing committed: nothing to merge, a sentence. */
	r = test_rpc_on(&T, fd, NULL, "session.merge", params, 30000);
	TEST_ASSERT_CODE(r, "BAD-REQUEST");
	free(r);
	free(params);
	ck_assert(asprintf(&params, "{\"id\":\"%s\",\"n\":1}", s.id) > 0);
	r = test_rpc_on(&T, fd, NULL, "session.restore", params, 30000);
	TEST_ASSERT_CODE(r, "ok");
	ck_assert_msg(has(r, "\"saved\":0"), "session.restore: %s", r);
	free(r);
	free(params);
	close(fd);
}
END_TEST

static Suite *loop_suite(void)
{
	Suite *s = suite_create("loop_cli");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_commit_diff_merge);
	tcase_add_test(tc, test_merge_checks_refuse);
	tcase_add_test(tc, test_end_commits_or_discards);
	tcase_add_test(tc, test_log_restore);
	tcase_add_test(tc, test_methods_over_the_socket);
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

/*
 * What a new user trips over in spd.conf and .spd.conf, against a real
 * spd: a misspelt section or key (a restriction that would silently not
 * be there) is refused with the file, the line and a suggestion; a
 * correct file still starts; the ask timeout is the operator's to set;
 * `spctl session verify` without checks says how to add one.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/paths.h"
#include "tests/lib/spdproc.h"
#include "tests/lib/testlib.h"

static struct test_spd T;

static bool has(const char *hay, const char *needle)
{
	return hay && needle && strstr(hay, needle) != NULL;
}

static void teardown(void)
{
	test_spd_stop_clean(&T);
}

/* Each typo makes spd refuse to start, naming the line and the fix. */
START_TEST(test_typos_refused)
{
	static const struct {
		const char *conf, *want;
	} bad[] = {
	    {"[sandbox]\n\tmode = required\n[netwrok]\n\tdeny-host = "
	     "evil.example\n",
	     "spd.conf:3: unknown section [netwrok]; did you mean "
	     "[network]?"},
	    {"[sandbox]\n\ttiemout = 5\n",
	     "spd.conf:2: unknown key \"tiemout\" in [sandbox]; did you "
	     "mean \"timeout\"?"},
	    {"# hosts\n[network]\n\tallow-host = pypi.org\n"
	     "\tallow-host = https://pypi.org/\n",
	     "spd.conf:4: allow-host takes a host name: pypi.org"},
	    {"[network]\n\tdeny-host = evil.example:443\n",
	     "spd.conf:2: deny-host takes a host name: evil.example"},
	    {"[network]\n\task-host = github.com/org\n",
	     "spd.conf:2: ask-host takes a host name: github.com"},
	    {"[provider \"mine\"]\n\turl = https://llm.example\n"
	     "\tkye = MINE_KEY\n",
	     "spd.conf:3: unknown key \"kye\" in [provider \"mine\"]; did "
	     "you mean \"key\"?"},
	    {"[model \"m\"]\n\tinptu = 3\n",
	     "spd.conf:2: unknown key \"inptu\" in [model \"m\"]; did you "
	     "mean \"input\"?"},
	    {"[policy]\n\tallow = make\n\tdney = curl\n",
	     "spd.conf:3: unknown key \"dney\" in [policy]; did you mean "
	     "\"deny\"?"},
	    {"[broker]\n\tcap-max = 5\n[aprovals]\n\ttimeout = 5\n",
	     "spd.conf:3: unknown section [aprovals]; did you mean "
	     "[approvals]?"},
	    {"[verify]\n\tagent = true\n",
	     "spd.conf:1: [verify] is read from a project's .spd.conf"},
	    {"[approvals]\n\ttimeout = 0\n", "approvals.timeout must be 1.."},
	    /* The key, the value and the range (the table's). */
	    {"[limits]\n\tsession-runs = 999\n",
	     "spd.conf: limits.session-runs must be 1..256, not \"999\""},
	    {"[broker]\n\tcap-max = lots\n",
	     "broker.cap-max must be USD, a plain decimal such as 2.50, more "
	     "than 0, at most 1000000 USD; not \"lots\""},
	    {"[sandbox]\n\tmode = maybe\n",
	     "sandbox.mode must be required|best-effort, not \"maybe\""},
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *err = test_spd_refuses(&T, bad[i].conf);

		ck_assert_msg(has(err, bad[i].want), "%s\nwanted: %s\ngot: %s",
			      bad[i].conf, bad[i].want, err);
		free(err);
		test_spd_cleanup(&T);
		memset(&T, 0, sizeof(T));
	}
}
END_TEST

/* A file with every section, in any letter case, still starts. */
START_TEST(test_correct_conf_starts)
{
	int fd;
	char *r;

	test_spd_prepare(&T,
			 "[Sandbox]\n\tTimeout = 300\n\toutput-cap = "
			 "65536\n"
			 "[network]\n\tallow-host = pypi.org\n"
			 "\tdeny-host = *.evil.example\n"
			 "\task-host = github.com.\n\tallow = \"cargo "
			 "fetch\"\n"
			 "[policy]\n\tdeny = curl\n\tprotected = Makefile\n"
			 "[check \"lint\"]\n\trun = make lint\n"
			 "[journal]\n\tqueue-max = 67108864\n"
			 "[limits]\n\tauth-timeout = 5\n"
			 "[approvals]\n\ttimeout = 600\n"
			 "[broker]\n\tcap-default = 1.00\n\tlisten = none\n"
			 "[provider \"anthropic\"]\n\turl = "
			 "https://api.anthropic.com\n\tkey = "
			 "ANTHROPIC_API_KEY\n"
			 "[model \"claude-x\"]\n\tinput = 3\n\toutput = 15\n"
			 "\tmax-output = 8192\n");
	test_spd_start(&T);
	fd = test_spd_connect(&T);
	r = test_rpc_on(&T, fd, NULL, "daemon.ping", NULL, 10000);
	TEST_ASSERT_CODE(r, "ok");
	free(r);
	close(fd);
}
END_TEST

/* spctl doctor lists every key of the table with the value in force,
 * its default, range and meaning; after a reload that changes a key
 * that needs a restart, the value in force is still the old one and the
 * key is named as waiting for a restart. */
START_TEST(test_doctor_lists_keys)
{
	char *out = NULL, *err = NULL, *conf;

	test_spd_prepare(&T, "[limits]\n\tsession-runs = 7\n"
			     "[journal]\n\tqueue-max = 1048576\n"
			     "[policy]\n\tdeny = curl\n");
	test_spd_start(&T);
	test_spctl(&T, (char *const[]){"doctor", NULL}, NULL, &out, &err);
	ck_assert_msg(has(out, "limits.session-runs = 7") &&
			  has(out, "(default 16, 1..256) runs one session may "
				   "have in flight"),
		      "%s%s", out, err);
	ck_assert_msg(has(out, "broker.cap-default = 1.000000") &&
			  has(out, "policy.deny = curl") &&
			  has(out, "provider.NAME.url = -"),
		      "%s", out);
	free(out);
	free(err);
	conf = paths_join(T.config, "spd.conf");
	test_write_file(conf, "[limits]\n\tsession-runs = 9\n"
			      "[journal]\n\tqueue-max = 2097152\n");
	free(conf);
	test_spctl(&T, (char *const[]){"reload", NULL}, NULL, &out, &err);
	ck_assert_msg(has(out, "needs restart (old value kept): "
			       "journal.queue-max"),
		      "%s%s", out, err);
	free(out);
	free(err);
	test_spctl(&T, (char *const[]){"doctor", NULL}, NULL, &out, &err);
	ck_assert_msg(
	    has(out, "limits.session-runs = 9") &&
		has(out, "journal.queue-max = 1048576") &&
		has(out, "waiting for a restart: journal.queue-max") &&
		!has(out, "policy.deny = curl"),
	    "%s%s", out, err);
	free(out);
	free(err);
}
END_TEST

/* A run in a workspace whose .spd.conf has argv's reply. */
static char *run_in(const char *ws, const char *argv_json)
{
	int fd = test_spd_connect(&T);
	char *params, *r;

	ck_assert(asprintf(&params, "{\"workspace\":\"%s\",\"argv\":%s}", ws,
			   argv_json) > 0);
	r = test_rpc_on(&T, fd, NULL, "cmd.run", params, 60000);
	free(params);
	close(fd);
	return r;
}

/* The project's file is checked by the same table: the run is refused
 * with BAD-REQUEST naming .spd.conf, the line and the fix, and nothing
 * runs; mended, the same run goes. */
START_TEST(test_project_typo_refused)
{
	char *ws = test_tmpdir("ws"), *conf = paths_join(ws, ".spd.conf");
	char *r;

	test_spd_prepare(&T, NULL);
	test_spd_start(&T);
	test_write_file(conf, "[policy]\n\tallow = touch\n[netwrok]\n"
			      "\tallow-host = pypi.org\n");
	r = run_in(ws, "[\"touch\",\"MARKER\"]");
	TEST_ASSERT_CODE(r, "BAD-REQUEST");
	ck_assert_msg(has(r, ".spd.conf:3: unknown section [netwrok]; did "
			     "you mean [network]?"),
		      "%s", r);
	free(r);
	test_write_file(conf, "[policy]\n\tallow = touch\n[network]\n"
			      "\task-host = https://github.com\n");
	r = run_in(ws, "[\"touch\",\"MARKER\"]");
	TEST_ASSERT_CODE(r, "BAD-REQUEST");
	ck_assert_msg(has(r, ".spd.conf:4: ask-host takes a host name: "
			     "github.com"),
		      "%s", r);
	free(r);
	ck_assert_int_eq(test_sh(NULL, "test ! -e '%s/MARKER'", ws), 0);

	/* Control: the mended file lets the same run go. */
	test_write_file(conf, "[policy]\n\tallow = touch\n[network]\n"
			      "\tallow-host = pypi.org\n");
	r = run_in(ws, "[\"touch\",\"MARKER\"]");
	ck_assert_msg(has(r, "\"exit_code\":0"), "%s", r);
	free(r);
	ck_assert_int_eq(test_sh(NULL, "test -e '%s/MARKER'", ws), 0);
	free(conf);
	test_rmrf(ws);
	free(ws);
}
END_TEST

/* The gate keeps spd.conf and .spd.conf parsed between calls, and an
 * edit still holds on the very next call: even one that keeps the file's
 * size and inode, made right after the call that read it. */
START_TEST(test_conf_edit_holds_next_call)
{
	char *ws = test_tmpdir("ws"), *proj = paths_join(ws, ".spd.conf");
	char *op, *r;

	test_spd_prepare(&T, "[policy]\n\tdeny = touch\n");
	op = paths_join(T.config, "spd.conf");
	test_write_file(proj, "[policy]\n\task  = chmod\n");
	test_spd_start(&T);
	/* Quiet for longer than GATE_CONF_QUIET_S: the gate keeps both
	 * files parsed from the first call on. */
	sleep(3);
	for (int i = 0; i < 2; i++) {
		r = run_in(ws, "[\"touch\",\"MARKER\"]");
		TEST_ASSERT_CODE(r, "POLICY-DENIED");
		free(r);
	}
	/* The operator's edit, same size, same inode: the next call. */
	test_write_file(op, "[policy]\n\tallow= touch\n");
	r = run_in(ws, "[\"touch\",\"MARKER\"]");
	ck_assert_msg(has(r, "\"exit_code\":0"), "after spd.conf's edit: %s",
		      r);
	free(r);
	sleep(3);
	r = run_in(ws, "[\"touch\",\"MARKER\"]");
	ck_assert_msg(has(r, "\"exit_code\":0"), "kept: %s", r);
	free(r);
	/* The project's edit, the same. */
	test_write_file(proj, "[policy]\n\tdeny = touch\n");
	r = run_in(ws, "[\"touch\",\"MARKER\"]");
	TEST_ASSERT_CODE(r, "POLICY-DENIED");
	free(r);
	/* And an edit right after a call read the file (within a tick). */
	test_write_file(proj, "[policy]\n\task  = chmod\n");
	r = run_in(ws, "[\"touch\",\"MARKER\"]");
	ck_assert_msg(has(r, "\"exit_code\":0"), "after .spd.conf's edit: %s",
		      r);
	free(r);
	test_write_file(proj, "[policy]\n\tdeny = touch\n");
	r = run_in(ws, "[\"touch\",\"MARKER\"]");
	TEST_ASSERT_CODE(r, "POLICY-DENIED");
	free(r);
	free(op);
	free(proj);
	test_rmrf(ws);
	free(ws);
}
END_TEST

/* A session over a fresh repository whose committed .spd.conf is conf
 * (NULL: none); its id into id. */
static char *session_over(const char *conf, char *id)
{
	char *repo = paths_join(T.dir, "repo"), *files, *params;
	char token[TEST_SESSION_TOKEN_LEN + 1];

	if (conf)
		ck_assert(asprintf(&files,
				   "echo a > a.txt; printf '%%s' '%s' > "
				   ".spd.conf",
				   conf) > 0);
	else
		files = strdup("echo a > a.txt");
	test_make_repo(repo, files);
	free(files);
	ck_assert(
	    asprintf(&params, "{\"repo\":\"%s\",\"feature\":\"f\"}", repo) > 0);
	test_session_start(&T, params, id, token);
	free(params);
	return repo;
}

/* A misspelt check is not quietly no check: verify is refused with the
 * line and the fix. */
START_TEST(test_verify_typo_refused)
{
	char id[TEST_SESSION_ID_LEN + 1], *repo, *params, *r;
	int fd;

	test_spd_prepare(&T, NULL);
	test_spd_start(&T);
	repo = session_over("[check \"unit\"]\n\trnu = true\n", id);
	fd = test_spd_connect(&T);
	ck_assert(asprintf(&params, "{\"id\":\"%s\"}", id) > 0);
	r = test_rpc_on(&T, fd, NULL, "session.verify", params, 60000);
	TEST_ASSERT_CODE(r, "BAD-REQUEST");
	ck_assert_msg(has(r, ".spd.conf:2: unknown key \\\"rnu\\\" in [check "
			     "\\\"unit\\\"]; did you mean \\\"run\\\"?"),
		      "%s", r);
	free(r);
	free(params);
	close(fd);
	free(repo);
}
END_TEST

/* Without checks, verify says so and how to add one, not "FAIL". */
START_TEST(test_verify_without_checks_says_how)
{
	char id[TEST_SESSION_ID_LEN + 1], *repo, *out = NULL, *err = NULL;
	int st;

	test_spd_prepare(&T, NULL);
	test_spd_start(&T);
	repo = session_over("[policy]\n\tallow = make\n", id);
	st = test_spctl(&T, (char *[]){"session", "verify", id, NULL}, NULL,
			&out, &err);
	/* Not a pass: nothing was verified. */
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "%d %s %s", st,
		      out, err);
	ck_assert_msg(has(out, "no checks are configured") &&
			  has(out, "[check \"test\"]") &&
			  has(out, "run = make test") &&
			  !has(out, "verdict: FAIL"),
		      "%s", out);
	free(out);
	free(err);
	free(repo);
}
END_TEST

/* An ask nobody answers is refused after spd.conf's [approvals] timeout,
 * and what was asked about does not run. */
START_TEST(test_ask_timeout)
{
	char *ws = test_tmpdir("ws"), *r;

	test_spd_prepare(&T, "[approvals]\n\ttimeout = 1\n");
	test_spd_start(&T);
	/* A shell is an ask; the call waits for a person (the default). */
	r = run_in(ws, "[\"sh\",\"-c\",\"touch MARKER\"]");
	ck_assert_msg(r != NULL, "the ask was not refused within 60 s");
	TEST_ASSERT_CODE(r, "APPROVAL-REFUSED");
	ck_assert_msg(has(r, "no decision in 1 s"), "%s", r);
	free(r);
	ck_assert_int_eq(test_sh(NULL, "test ! -e '%s/MARKER'", ws), 0);
	test_rmrf(ws);
	free(ws);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("conf");
	TCase *tc = tcase_create("conf");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test_typos_refused);
	tcase_add_test(tc, test_correct_conf_starts);
	tcase_add_test(tc, test_doctor_lists_keys);
	tcase_add_test(tc, test_project_typo_refused);
	tcase_add_test(tc, test_conf_edit_holds_next_call);
	tcase_add_test(tc, test_verify_typo_refused);
	tcase_add_test(tc, test_verify_without_checks_says_how);
	tcase_add_test(tc, test_ask_timeout);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

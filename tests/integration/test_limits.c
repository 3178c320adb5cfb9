/*
 * Quotas and the operator's reserve (issue 10, "One agent can lock the
 * operator out"): a real spd and sandboxd in temporary directories, raw
 * connections to its socket opened by this process, the journal read
 * with sqlite3 from the file.  Small limits come from spd.conf so that
 * the tests stay fast; one test floods at the default limits.
 */
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/lib/spdproc.h"
#include "tests/lib/testlib.h"
#include "common/paths.h"

/* How long any single wait may take before the test gives up: generous,
 * so that a slow CI host never fails a test that is right. */
#define WAIT_MS 60000

static struct test_spd T;
static char *REPO;

static bool has(const char *hay, const char *needle)
{
	return hay && strstr(hay, needle) != NULL;
}

static void start(const char *conf)
{
	test_spd_prepare(&T, conf);
	test_spd_start(&T);
}

/* spd must stop cleanly after a flood or a quota: a leak (a quota entry,
 * a connection's session) or a handle left open (the auth timer) shows
 * under ASan as a non-zero exit (test_spd_stop_clean). */
static void teardown(void)
{
	free(REPO);
	REPO = NULL;
	test_spd_stop_clean(&T);
}

/* A git repository with a.txt committed, for sessions. */
static void make_repo(void)
{
	REPO = paths_join(T.dir, "repo");
	test_make_repo(REPO, "echo original > a.txt");
}

/* A connection that will never send anything, or -1 once spd refuses
 * to take more (the listen backlog is full). */
static int raw_connect(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert(fd >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", T.sock);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Read and discard until end of file.  Returns true at end of file,
 * false if none came within WAIT_MS. */
static bool wait_eof(int fd)
{
	char buf[512];

	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (poll(&p, 1, WAIT_MS) <= 0)
			return false;
		n = read(fd, buf, sizeof(buf));
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return true;
		if (n < 0 && errno != EINTR)
			return false;
	}
}

/* Send method with params (JSON object text or NULL) and token (NULL: the
 * operator's) on fd; return the response, skipping notifications, or NULL
 * when the connection closed first. */
static char *rpc_on(int fd, const char *token, const char *method,
		    const char *params)
{
	return test_rpc_on(&T, fd, token, method, params, WAIT_MS);
}

static char *rpc(const char *token, const char *method, const char *params)
{
	int fd = test_spd_connect(&T);
	char *r = rpc_on(fd, token, method, params);

	close(fd);
	return r;
}

struct session {
	char id[17];
	char token[65];
};

static void start_session(const char *feature, struct session *s)
{
	char *params =
	    test_fmt("{\"repo\":\"%s\",\"feature\":\"%s\"}", REPO, feature);

	test_session_start(&T, params, s->id, s->token);
	free(params);
}

/* One number from the journal file, once it is at least min or 10 s have
 * passed: spd answers before its writer thread commits the rows (group
 * commit), so a count read right after a reply can be early. */
static long journal_count(long min, const char *where_fmt, ...)
    __attribute__((format(printf, 2, 3)));
static long journal_count(long min, const char *where_fmt, ...)
{
	va_list ap;
	char *where = NULL, *sql, *out = NULL;
	long n = 0;

	va_start(ap, where_fmt);
	ck_assert(vasprintf(&where, where_fmt, ap) >= 0);
	va_end(ap);
	sql = test_fmt("select count(*) from events where %s", where);
	for (int i = 0; i < 100; i++) {
		if (i)
			nanosleep(&(struct timespec){0, 100000000}, NULL);
		test_run((char *[]){"sqlite3", T.journal, sql, NULL}, NULL,
			 &out, NULL);
		ck_assert_msg(out && out[0], "sqlite3 gave nothing for %s",
			      sql);
		n = strtol(out, NULL, 10);
		free(out);
		out = NULL;
		if (n >= min)
			break;
	}
	free(sql);
	free(where);
	return n;
}

/* ---- connections ------------------------------------------------------ */

/*
 * At the default limits: more idle connections than spd's connection
 * limit, none of which ever sends a token.  The operator still connects
 * and is answered while they are open, and every idle one is closed.
 */
START_TEST(test_idle_flood_default_limits)
{
	enum { N = 2100 };
	static int fds[N];
	struct rlimit rl;
	int n = 0, fd;
	char *r;

	/* The flood needs N descriptors of this process. */
	ck_assert(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	if (rl.rlim_max < N + 64)
		TEST_SKIP("RLIMIT_NOFILE hard limit %llu is below %d",
			  (unsigned long long)rl.rlim_max, N + 64);
	rl.rlim_cur = rl.rlim_max;
	ck_assert(setrlimit(RLIMIT_NOFILE, &rl) == 0);
	start(NULL);
	for (int i = 0; i < N; i++)
		if ((fds[n] = raw_connect()) >= 0)
			n++;
	ck_assert_int_ge(n, 2048);

	fd = test_spd_connect(&T);
	r = rpc_on(fd, NULL, "daemon.ping", NULL);
	TEST_ASSERT_CODE(r, "ok");
	free(r);

	for (int i = 0; i < n; i++) {
		ck_assert_msg(wait_eof(fds[i]),
			      "idle connection %d of %d was never closed", i,
			      n);
		close(fds[i]);
	}
	/* The operator's connection outlived them all. */
	r = rpc_on(fd, NULL, "daemon.ping", NULL);
	TEST_ASSERT_CODE(r, "ok");
	free(r);
	close(fd);
}
END_TEST

/* A connection that sends no valid token is closed after the deadline;
 * one that authenticated stays. */
START_TEST(test_auth_deadline)
{
	int idle, wrong, op;
	char *r;

	start("[limits]\n\tauth-timeout = 1\n");
	idle = test_spd_connect(&T);
	wrong = test_spd_connect(&T);
	op = test_spd_connect(&T);
	r = rpc_on(wrong,
		   "0123456789abcdef0123456789abcdef0123456789abcdef"
		   "0123456789abcdef",
		   "daemon.ping", NULL);
	TEST_ASSERT_CODE(r, "UNAUTHORIZED");
	free(r);
	r = rpc_on(op, NULL, "auth", NULL);
	TEST_ASSERT_CODE(r, "ok");
	free(r);

	ck_assert_msg(wait_eof(idle), "an idle connection was never closed");
	ck_assert_msg(wait_eof(wrong),
		      "a connection with a wrong token was never closed");
	r = rpc_on(op, NULL, "daemon.ping", NULL);
	TEST_ASSERT_CODE(r, "ok");
	free(r);
	close(idle);
	close(wrong);
	close(op);
}
END_TEST

/*
 * Sessions fill every connection slot they may use; the operator's
 * reserve still lets the operator in, and a session connection beyond
 * the shared slots is refused.
 */
START_TEST(test_operator_connection_reserve)
{
	enum { SHARED = 4 };
	int fds[SHARED], extra, op;
	struct session a;
	char *r;

	/* 2044 of 2048 slots held for the operator: 4 shared. */
	start("[limits]\n\toperator-connections = 2044\n");
	make_repo();
	start_session("a", &a);
	for (int i = 0; i < SHARED; i++) {
		fds[i] = test_spd_connect(&T);
		r = rpc_on(fds[i], a.token, "auth", NULL);
		TEST_ASSERT_CODE(r, "ok");
		free(r);
	}
	extra = test_spd_connect(&T);
	r = rpc_on(extra, a.token, "daemon.ping", NULL);
	TEST_ASSERT_CODE(r, "LIMIT");
	free(r);
	ck_assert(wait_eof(extra));
	close(extra);

	op = test_spd_connect(&T);
	r = rpc_on(op, NULL, "daemon.ping", NULL);
	TEST_ASSERT_CODE(r, "ok");
	free(r);
	close(op);
	for (int i = 0; i < SHARED; i++)
		close(fds[i]);
}
END_TEST

/* One session at its connection quota is refused (journaled once); another
 * session is not affected; a closed connection gives its slot back. */
START_TEST(test_session_connection_quota)
{
	struct session a, b;
	int fa[2], more[2], fb;
	char *r;

	start("[limits]\n\tsession-connections = 2\n");
	make_repo();
	start_session("a", &a);
	start_session("b", &b);
	for (int i = 0; i < 2; i++) {
		fa[i] = test_spd_connect(&T);
		r = rpc_on(fa[i], a.token, "daemon.ping", NULL);
		TEST_ASSERT_CODE(r, "ok");
		free(r);
	}
	for (int i = 0; i < 2; i++) {
		more[i] = test_spd_connect(&T);
		r = rpc_on(more[i], a.token, "daemon.ping", NULL);
		TEST_ASSERT_CODE(r, "LIMIT");
		ck_assert_msg(has(r, "\"quota\":\"connections\""), "%s", r);
		free(r);
		ck_assert(wait_eof(more[i]));
		close(more[i]);
	}
	fb = test_spd_connect(&T);
	r = rpc_on(fb, b.token, "daemon.ping", NULL);
	TEST_ASSERT_CODE(r, "ok");
	free(r);

	close(fa[0]);
	/* spd sees the close asynchronously: the slot comes back soon. */
	for (int tries = 0;; tries++) {
		int fd = test_spd_connect(&T);
		r = rpc_on(fd, a.token, "daemon.ping", NULL);
		close(fd);
		if (strcmp(test_reply_code(r), "ok") == 0) {
			free(r);
			break;
		}
		free(r);
		ck_assert_msg(tries < 600, "a closed connection's slot never "
					   "came back");
		nanosleep(&(struct timespec){0, 10000000}, NULL);
	}
	ck_assert_int_eq(journal_count(1,
				       "kind = 'quota.exceeded' and session = "
				       "'%s'",
				       a.id),
			 1);
	ck_assert_int_eq(
	    journal_count(0, "kind = 'quota.exceeded' and session = '%s'",
			  b.id),
	    0);
	close(fa[1]);
	close(fb);
}
END_TEST

/* ---- runs --------------------------------------------------------------- */

/* Start a long run for token on a fresh connection; returns the
 * connection once the run has printed its first line (it is running). */
static int long_run(const char *token)
{
	int fd = test_spd_connect(&T);
	char *line =
	    test_fmt("{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"cmd.run\","
		     "\"params\":{\"token\":\"%s\",\"argv\":[\"tail\","
		     "\"-f\",\"a.txt\"],\"timeout\":86400}}\n",
		     test_next_id(), token);

	test_send(fd, line, strlen(line));
	free(line);
	for (;;) {
		char *r = test_recv_line(fd, WAIT_MS);
		ck_assert_msg(r != NULL, "the long run never started");
		ck_assert_msg(!has(r, "\"error\""), "long run refused: %s", r);
		if (has(r, "run.output") && has(r, "original")) {
			free(r);
			return fd;
		}
		free(r);
	}
}

static char *agent_run_true(const char *token)
{
	return rpc(token, "cmd.run", "{\"argv\":[\"true\"]}");
}

/*
 * Agents fill their run quotas and every shared run slot with long runs:
 * a session at its quota is refused, another session still runs until
 * the shared slots are full, and the operator's `run -- true` succeeds.
 */
START_TEST(test_run_quota_and_operator_reserve)
{
	struct session s[4];
	int fds[6], nfds = 0;
	char *r, *params;

	/* 2 runs per session; 250 of sandboxd's 256 slots held for the
	 * operator, so 6 are shared. */
	start("[limits]\n\tsession-runs = 2\n\toperator-runs = 250\n");
	make_repo();
	for (int i = 0; i < 4; i++)
		start_session((const char *[]){"a", "b", "c", "d"}[i], &s[i]);

	r = agent_run_true(s[0].token);
	if (strcmp(test_reply_code(r), "SANDBOX-UNAVAILABLE") == 0) {
		free(r);
		TEST_SKIP("this host cannot sandbox a run");
	}
	TEST_ASSERT_CODE(r, "ok");
	free(r);

	fds[nfds++] = long_run(s[0].token);
	fds[nfds++] = long_run(s[0].token);
	/* Session a is at its quota... */
	r = agent_run_true(s[0].token);
	TEST_ASSERT_CODE(r, "LIMIT");
	ck_assert_msg(has(r, "\"quota\":\"runs\""), "%s", r);
	free(r);
	r = agent_run_true(s[0].token);
	TEST_ASSERT_CODE(r, "LIMIT");
	free(r);
	/* ...which does not stop session b. */
	r = agent_run_true(s[1].token);
	TEST_ASSERT_CODE(r, "ok");
	free(r);

	/* b and c take the rest of the shared slots. */
	for (int i = 1; i <= 2; i++) {
		fds[nfds++] = long_run(s[i].token);
		fds[nfds++] = long_run(s[i].token);
	}
	r = agent_run_true(s[3].token);
	TEST_ASSERT_CODE(r, "LIMIT");
	free(r);

	/* The operator's run takes a held-back slot. */
	params = test_fmt("{\"workspace\":\"%s\",\"argv\":[\"true\"]}", REPO);
	r = rpc(NULL, "cmd.run", params);
	TEST_ASSERT_CODE(r, "ok");
	ck_assert_msg(has(r, "\"exit_code\":0"), "%s", r);
	free(r);
	free(params);

	ck_assert_int_eq(
	    journal_count(1, "kind = 'quota.exceeded' and session = '%s'",
			  s[0].id),
	    1);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
}
END_TEST

/* ---- journal rate --------------------------------------------------------- */

/* A session past its journaled requests a minute is refused; the refusal
 * is journaled once, not per refused request; another session goes on. */
START_TEST(test_journal_rate_quota)
{
	enum { RATE = 5, TRIES = 20 };
	struct session a, b;
	int fd, ok = 0, limited = 0;
	char *r;

	start("[limits]\n\tsession-journal-rate = 5\n");
	make_repo();
	start_session("a", &a);
	start_session("b", &b);
	fd = test_spd_connect(&T);
	for (int i = 0; i < TRIES; i++) {
		r = rpc_on(fd, a.token, "daemon.ping", NULL);
		if (strcmp(test_reply_code(r), "ok") == 0)
			ok++;
		else if (strcmp(test_reply_code(r), "LIMIT") == 0 &&
			 has(r, "\"quota\":\"journal-rate\""))
			limited++;
		free(r);
	}
	ck_assert_int_eq(ok, RATE);
	ck_assert_int_eq(limited, TRIES - RATE);
	close(fd);

	r = rpc(b.token, "daemon.ping", NULL);
	TEST_ASSERT_CODE(r, "ok");
	free(r);

	ck_assert_int_eq(
	    journal_count(1, "kind = 'quota.exceeded' and session = '%s'",
			  a.id),
	    1);
	/* The refused requests left no rows of their own. */
	ck_assert_int_eq(
	    journal_count(RATE, "kind = 'request' and session = '%s'", a.id),
	    RATE);
}
END_TEST

/* A limit out of range (no slot left for sessions, or none for the
 * operator) or not a number makes spd refuse to start, saying which. */
START_TEST(test_limits_config_refused)
{
	const char *bad[] = {"[limits]\n\toperator-runs = 256\n",
			     "[limits]\n\toperator-connections = 0\n",
			     "[limits]\n\tsession-runs = many\n",
			     "[limits]\n\tgrant-lifetime = 0\n",
			     "[limits]\n\tgrant-lifetime = 86401\n"};
	const char *key[] = {"limits.operator-runs",
			     "limits.operator-connections",
			     "limits.session-runs", "limits.grant-lifetime",
			     "limits.grant-lifetime"};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *err = test_spd_refuses(&T, bad[i]);

		ck_assert_msg(has(err, key[i]), "%s: %s", key[i], err);
		free(err);
		test_spd_cleanup(&T);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("limits");
	TCase *tc = tcase_create("limits");
	SRunner *sr;
	int failed;

	signal(SIGPIPE, SIG_IGN);
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, test_idle_flood_default_limits);
	tcase_add_test(tc, test_auth_deadline);
	tcase_add_test(tc, test_operator_connection_reserve);
	tcase_add_test(tc, test_session_connection_quota);
	tcase_add_test(tc, test_run_quota_and_operator_reserve);
	tcase_add_test(tc, test_journal_rate_quota);
	tcase_add_test(tc, test_limits_config_refused);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

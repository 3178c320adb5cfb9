/*
 * Benchmark (issue 13): what `spctl mcp` adds to a call.  The same two
 * calls, as an agent of one session in its worktree, timed from request
 * to answer:
 *   - read_file: MCP tools/call read_file, against fs.read on spd's socket;
 *   - run_command true: MCP tools/call run_command, against cmd.run.
 * Over spd's socket both on one connection and on a connection per call
 * (what spctl mcp does for each tool call); through one long-lived
 * `spctl mcp` on pipes, as an MCP client drives it.  Prints p50 and p99.
 *
 *   build/bench/mcp            BENCH_RUNS=N (default 200) calls of each
 *
 * Runs a real spd --foreground and sandboxd in temporary directories.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/lib/benchutil.h"
#include "tests/lib/spdproc.h"
#include "tests/lib/testlib.h"

/* How long one call may take before the benchmark calls it hung. */
#define CALL_TIMEOUT_MS 30000

#define INITIALIZED                                                            \
	"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"

static struct test_spd T;
static char sid[TEST_SESSION_ID_LEN + 1], token[TEST_SESSION_TOKEN_LEN + 1];

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void report(const char *what, double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), bench_cmp_double);
	printf("%-50s p50 %8.3f ms   p99 %8.3f ms   (n=%d)\n", what, v[n / 2],
	       v[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1], n);
}

/* One call on spd's socket as the session's agent; the answer must be a
 * result.  fd < 0: a connection of its own. */
static double direct_call(int fd, const char *method, const char *params)
{
	int own = fd < 0 ? test_spd_connect(&T) : fd;
	double t0 = now_ms();
	char *r = test_rpc_on(&T, own, token, method, params, CALL_TIMEOUT_MS);
	double dt = now_ms() - t0;

	ck_assert_msg(r && strcmp(test_reply_code(r), "ok") == 0, "%s: %s",
		      method, r ? r : "no answer");
	free(r);
	if (fd < 0)
		close(own);
	return dt;
}

/* Write all of s to a pipe (test_send is for sockets). */
static void pipe_send(int fd, const char *s, size_t n)
{
	while (n) {
		ssize_t w = write(fd, s, n);

		if (w < 0 && errno == EINTR)
			continue;
		ck_assert_msg(w > 0, "write to spctl mcp: %s", strerror(errno));
		s += w;
		n -= (size_t)w;
	}
}

struct mcp {
	pid_t pid;
	int in, out; /* its stdin (we write), its stdout (we read) */
	int next_id;
};

static void mcp_start(struct mcp *m, const char *wt)
{
	int a[2], b[2];
	char *spctl = test_prog("spctl");

	ck_assert(pipe(a) == 0 && pipe(b) == 0);
	m->pid = fork();
	ck_assert(m->pid >= 0);
	if (m->pid == 0) {
		dup2(a[0], 0);
		dup2(b[1], 1);
		close(a[1]);
		close(b[0]);
		for (int i = 0; T.env[i]; i++)
			putenv(T.env[i]);
		setenv("SPD_SESSION_TOKEN", token, 1);
		if (chdir(wt) < 0)
			_exit(126);
		int null = open("/dev/null", O_WRONLY);
		if (null >= 0)
			dup2(null, 2);
		execl(spctl, "spctl", "mcp", (char *)NULL);
		_exit(127);
	}
	close(a[0]);
	close(b[1]);
	m->in = a[1];
	m->out = b[0];
	free(spctl);
}

/* Send one request and wait for its response (notifications skipped);
 * the milliseconds it took.  The response must carry no error and, for a
 * tool, no isError. */
static double mcp_call(struct mcp *m, const char *method, const char *params)
{
	char *line = NULL, want[32];
	int id = ++m->next_id, n;
	double t0, dt;

	n = asprintf(&line,
		     "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"%s\","
		     "\"params\":%s}\n",
		     id, method, params);
	ck_assert(n > 0);
	snprintf(want, sizeof(want), "\"id\":%d", id);
	t0 = now_ms();
	pipe_send(m->in, line, (size_t)n);
	free(line);
	for (;;) {
		char *r = test_recv_line(m->out, CALL_TIMEOUT_MS);

		ck_assert_msg(r, "spctl mcp did not answer %s", method);
		if (strstr(r, want) && !strstr(r, "\"method\"")) {
			dt = now_ms() - t0;
			ck_assert_msg(!strstr(r, "\"error\"") &&
					  !strstr(r, "\"isError\":true"),
				      "%s: %s", method, r);
			free(r);
			return dt;
		}
		free(r);
	}
}

static void mcp_stop(struct mcp *m)
{
	int st;

	close(m->in);
	close(m->out);
	if (waitpid(m->pid, &st, 0) < 0)
		kill(m->pid, SIGKILL);
}

START_TEST(bench_mcp)
{
	const char *e = getenv("BENCH_RUNS");
	int runs = e && atoi(e) >= 10 ? atoi(e) : 200, fd;
	char *repo, *params, wt[4096];
	double *v = calloc((size_t)runs, sizeof(double));
	struct mcp m = {0};
	char *st;

	ck_assert(v);
	/* The calls come faster than an agent's default quota of journal
	 * rows a minute allows: raised, so that none is refused. */
	test_spd_prepare(&T, "[limits]\n\tsession-journal-rate = 100000\n");
	test_spd_start(&T);
	ck_assert(asprintf(&repo, "%s/repo", T.dir) > 0);
	test_make_repo(repo, "echo 'hello from the workspace' > hello.txt");
	ck_assert(asprintf(&params, "{\"repo\":\"%s\",\"feature\":\"bench\"}",
			   repo) > 0);
	test_session_start(&T, params, sid, token);
	free(params);
	fd = test_spd_connect(&T);
	st = test_rpc_on(&T, fd, token, "session.status", NULL, 10000);
	ck_assert_msg(st && strstr(st, "\"worktree\":\""), "%s", st);
	snprintf(wt, sizeof(wt), "%s", strstr(st, "\"worktree\":\"") + 12);
	*strchr(wt, '"') = '\0';
	free(st);

	printf("read_file (fs.read of a 25-byte file) and run_command true "
	       "(cmd.run in the sandbox), as a session's agent\n");
	for (int i = 0; i < runs; i++)
		v[i] = direct_call(fd, "fs.read", "{\"path\":\"hello.txt\"}");
	report("fs.read, spd's socket, one connection", v, runs);
	for (int i = 0; i < runs; i++)
		v[i] = direct_call(-1, "fs.read", "{\"path\":\"hello.txt\"}");
	report("fs.read, spd's socket, a connection per call", v, runs);
	mcp_start(&m, wt);
	mcp_call(&m, "initialize",
		 "{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},"
		 "\"clientInfo\":{\"name\":\"bench\",\"version\":\"1\"}}");
	pipe_send(m.in, INITIALIZED, strlen(INITIALIZED));
	for (int i = 0; i < runs; i++)
		v[i] = mcp_call(&m, "tools/call",
				"{\"name\":\"read_file\",\"arguments\":"
				"{\"path\":\"hello.txt\"}}");
	report("tools/call read_file, through spctl mcp", v, runs);
	for (int i = 0; i < runs; i++)
		v[i] = direct_call(fd, "cmd.run", "{\"argv\":[\"true\"]}");
	report("cmd.run true, spd's socket, one connection", v, runs);
	for (int i = 0; i < runs; i++)
		v[i] = direct_call(-1, "cmd.run", "{\"argv\":[\"true\"]}");
	report("cmd.run true, spd's socket, a connection per call", v, runs);
	for (int i = 0; i < runs; i++)
		v[i] = mcp_call(&m, "tools/call",
				"{\"name\":\"run_command\",\"arguments\":"
				"{\"argv\":[\"true\"]}}");
	report("tools/call run_command true, through spctl mcp", v, runs);
	mcp_stop(&m);
	close(fd);
	test_spd_stop(&T);
	test_spd_cleanup(&T);
	free(repo);
	free(v);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("bench");
	TCase *tc = tcase_create("mcp");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, bench_mcp);
	tcase_set_timeout(tc, 1200);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

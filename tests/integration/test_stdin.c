/*
 * A run with a stdin pipe (issue 13, spctl acp's channel to its agent):
 * cmd.run {"stdin": true} announces run.started, run.input on the same
 * connection feeds the command's stdin and closes it; nobody else can
 * write to it.  A real spd and sandboxd, raw connections to the socket.
 */
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "common/paths.h"
#include "tests/lib/spdproc.h"
#include "tests/lib/testlib.h"

/* How long a reply may take before the test gives up: generous, since
 * the machine is shared; nothing is asserted about time. */
#define REPLY_WAIT_MS 20000

static struct test_spd T;
static char *WS;

static bool has(const char *hay, const char *needle)
{
	return hay && needle && strstr(hay, needle) != NULL;
}

static void setup(void)
{
	test_spd_prepare(&T, NULL);
	test_spd_start(&T);
	WS = test_tmpdir("ws");
}

static void teardown(void)
{
	test_spd_cleanup(&T);
	if (WS)
		test_rmrf(WS);
	free(WS);
	WS = NULL;
}

/* Send one request with the operator token and params p (taken). */
static void send_call(int fd, int id, const char *method, json_t *p)
{
	char *line;

	json_object_set_new(p, "token", json_string(T.token));
	json_t *req = json_pack("{s:s, s:i, s:s, s:o}", "jsonrpc", "2.0", "id",
				id, "method", method, "params", p);
	char *text = json_dumps(req, JSON_COMPACT);

	ck_assert(text && asprintf(&line, "%s\n", text) > 0);
	test_send(fd, line, strlen(line));
	free(line);
	free(text);
	json_decref(req);
}

/* Read lines until one contains want; returns it (NULL on timeout),
 * gathering every line read into *all when all is not NULL. */
static char *read_until(int fd, const char *want, char **all)
{
	for (;;) {
		char *l = test_recv_line(fd, REPLY_WAIT_MS);

		if (!l)
			return NULL;
		if (all) {
			char *n = NULL;
			ck_assert(asprintf(&n, "%s%s", *all ? *all : "", l) >
				  0);
			free(*all);
			*all = n;
		}
		if (has(l, want))
			return l;
		free(l);
	}
}

static int start_stdin_run(const char *script)
{
	int fd = test_spd_connect(&T);

	send_call(fd, 1, "cmd.run",
		  json_pack("{s:s, s:[s,s,s], s:b, s:b}", "workspace", WS,
			    "argv", "sh", "-c", script, "yes", 1, "stdin", 1));
	return fd;
}

/* What is written with run.input reaches the command, in order, and
 * closing its stdin lets it see end of file and finish. */
START_TEST(test_input_reaches_command)
{
	int fd = start_stdin_run(
	    "read a; echo \"got:$a\"; cat > copy.txt; echo finished");
	char *l, *all = NULL, *copy, *p;

	l = read_until(fd, "run.started", NULL);
	ck_assert_msg(l, "no run.started");
	free(l);
	send_call(fd, 2, "run.input", json_pack("{s:s}", "data", "hello\n"));
	l = read_until(fd, "got:hello", &all);
	ck_assert_msg(l, "the command never read its input: %s",
		      all ? all : "");
	free(l);
	send_call(fd, 3, "run.input",
		  json_pack("{s:s, s:b}", "data", "rest of it", "close", 1));
	l = read_until(fd, "\"id\":1,", &all);
	ck_assert_msg(has(l, "\"exit_code\":0") && has(all, "finished"), "%s",
		      all ? all : "(nothing)");
	free(l);
	p = paths_join(WS, "copy.txt");
	copy = test_read_file(p);
	ck_assert_str_eq(copy, "rest of it");
	free(copy);
	free(p);
	free(all);
	close(fd);
}
END_TEST

/* run.input finds only a stdin run started on its own connection: from
 * another connection it is refused and the command reads nothing; a run
 * without "stdin" reads end of file at once. */
START_TEST(test_input_only_from_its_connection)
{
	int fd = start_stdin_run("cat > seen.txt");
	int other = test_spd_connect(&T);
	char *l, *seen, *p;

	l = read_until(fd, "run.started", NULL);
	ck_assert_msg(l, "no run.started");
	free(l);
	send_call(other, 7, "run.input",
		  json_pack("{s:s, s:b}", "data", "intruder", "close", 1));
	l = read_until(other, "\"id\":7", NULL);
	ck_assert_msg(has(l, "\"error\"") && has(l, "no run with"), "%s",
		      l ? l : "(none)");
	free(l);
	send_call(fd, 2, "run.input", json_pack("{s:b}", "close", 1));
	l = read_until(fd, "\"id\":1,", NULL);
	ck_assert_msg(has(l, "\"exit_code\":0"), "%s", l ? l : "(none)");
	free(l);
	p = paths_join(WS, "seen.txt");
	seen = test_read_file(p);
	ck_assert_str_eq(seen, "");
	free(seen);
	free(p);
	close(other);
	close(fd);

	/* Without "stdin" the command's stdin is /dev/null. */
	fd = test_spd_connect(&T);
	send_call(fd, 1, "cmd.run",
		  json_pack("{s:s, s:[s,s,s], s:b}", "workspace", WS, "argv",
			    "sh", "-c", "cat; echo eof-at-once", "yes", 1));
	l = read_until(fd, "\"id\":1,", NULL);
	ck_assert_msg(has(l, "\"exit_code\":0"), "%s", l ? l : "(none)");
	free(l);
	close(fd);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("stdin");
	TCase *tc = tcase_create("stdin");
	SRunner *sr;
	int failed;

	signal(SIGPIPE, SIG_IGN);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_input_reaches_command);
	tcase_add_test(tc, test_input_only_from_its_connection);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

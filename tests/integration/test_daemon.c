/*
 * Integration tests for spd's foundation: a real spd in temporary
 * directories, spoken to over its socket and through spctl.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <jansson.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/spdproc.h"
#include "tests/lib/testlib.h"
#include "common/paths.h"
#include "common/util.h"

static struct test_spd T;

static void setup(void)
{
	test_spd_prepare(&T, NULL);
	test_spd_start(&T);
}

static void teardown(void)
{
	test_spd_cleanup(&T);
}

static bool has(const char *hay, const char *needle)
{
	return hay && strstr(hay, needle) != NULL;
}

/* The journal as text, read with the sqlite3 CLI straight from the file:
 * what spd wrote, not what it says it wrote. */
static char *journal_dump(void)
{
	char *argv[] = {"sqlite3", T.journal,
			"select id, actor, kind, summary, detail from events "
			"order by id",
			NULL};
	char *out = NULL;

	test_run(argv, NULL, &out, NULL);
	return out;
}

START_TEST(test_ping_and_status)
{
	int fd = test_spd_connect(&T);
	char *r = test_call(&T, fd, 7, "daemon.ping", NULL, true);

	ck_assert_str_eq(
	    r, "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"pong\":true}}");
	free(r);
	r = test_call(&T, fd, 8, "daemon.status", NULL, true);
	ck_assert(has(r, "\"version\":\"0.1.0\""));
	ck_assert(has(r, "\"connections\":1"));
	ck_assert(has(r, "\"journal\":{"));
	free(r);
	close(fd);
}
END_TEST

/*
 * spd reads spd.conf at start only: once the file is written (or made,
 * or removed) daemon.status says config_changed, and spctl status tells
 * the operator to restart; unchanged, it says neither.
 */
START_TEST(test_status_config_changed)
{
	char *conf = paths_join(T.config, "spd.conf"), *out = NULL;
	int fd = test_spd_connect(&T), st;
	char *r = test_call(&T, fd, 1, "daemon.status", NULL, true);

	ck_assert_msg(has(r, "\"config_changed\":false"), "%s", r);
	free(r);
	st = test_spctl(&T, (char *[]){"status", NULL}, NULL, &out, NULL);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
			  !has(out, "spd.conf changed"),
		      "%s", out);
	free(out);
	test_write_file(conf, "[sandbox]\n\ttimeout = 30\n");
	r = test_call(&T, fd, 2, "daemon.status", NULL, true);
	ck_assert_msg(has(r, "\"config_changed\":true"), "%s", r);
	free(r);
	st = test_spctl(&T, (char *[]){"status", NULL}, NULL, &out, NULL);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
			  has(out, "spd.conf changed since spd read it; "
				   "spctl reload applies it"),
		      "%s", out);
	free(out);
	/* What status tells the operator to do is enough: after the
	 * reload spd holds the file it has. */
	st = test_spctl(&T, (char *[]){"reload", NULL}, NULL, &out, NULL);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", out);
	free(out);
	st = test_spctl(&T, (char *[]){"status", NULL}, NULL, &out, NULL);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
			  !has(out, "spd.conf changed"),
		      "%s", out);
	free(out);
	unlink(conf);
	close(fd);
	free(conf);
}
END_TEST

/* A request split at every byte boundary is one request. */
START_TEST(test_split_every_byte)
{
	char req[256];
	int n = snprintf(req, sizeof(req),
			 "{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":"
			 "\"daemon.ping\",\"params\":{\"token\":\"%s\"}}\n",
			 T.token);

	for (int cut = 1; cut < n; cut++) {
		int fd = test_spd_connect(&T);
		char *r;

		test_send(fd, req, (size_t)cut);
		usleep(cut % 16 == 0 ? 2000 : 0);
		test_send(fd, req + cut, (size_t)(n - cut));
		r = test_recv_line(fd, 5000);
		ck_assert_msg(has(r, "\"id\":\"x\",\"result\":{\"pong\":true}"),
			      "cut %d: %s", cut, r ? r : "(none)");
		free(r);
		close(fd);
	}
}
END_TEST

/* Several requests in one write, and pipelining: every id answered. */
START_TEST(test_many_in_one_write)
{
	char buf[16384];
	size_t off = 0;
	int fd = test_spd_connect(&T);
	bool seen[50] = {0};

	for (int i = 0; i < 50; i++)
		off += (size_t)snprintf(
		    buf + off, sizeof(buf) - off,
		    "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":"
		    "\"daemon.ping\",\"params\":{\"token\":"
		    "\"%s\"}}\n",
		    i, T.token);
	test_send(fd, buf, off);
	for (int i = 0; i < 50; i++) {
		char *r = test_recv_line(fd, 5000);
		int id = -1;
		ck_assert_ptr_nonnull(r);
		ck_assert(sscanf(strstr(r, "\"id\":"), "\"id\":%d", &id) == 1);
		ck_assert(id >= 0 && id < 50 && !seen[id]);
		ck_assert(has(r, "\"pong\":true"));
		seen[id] = true;
		free(r);
	}
	close(fd);
}
END_TEST

static void expect_error(const char *frame, const char *num, const char *code)
{
	int fd = test_spd_connect(&T);
	char *r;

	test_send(fd, frame, strlen(frame));
	r = test_recv_line(fd, 5000);
	ck_assert_msg(r && has(r, num) && has(r, code), "frame %s got %s",
		      frame, r ? r : "(nothing)");
	free(r);
	/* The connection stays usable after a bad frame. */
	free(r = test_call(&T, fd, 99, "daemon.ping", NULL, true));
	close(fd);
}

START_TEST(test_bad_frames)
{
	expect_error("this is not json\n", "-32700", "BAD-REQUEST");
	expect_error(
	    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"daemon.ping\"\n",
	    "-32700", "BAD-REQUEST");
	expect_error(
	    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"daemon.p\xc3\x28\"}\n",
	    "-32700", "invalid UTF-8");
	expect_error(
	    "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"daemon.ping\"}]\n",
	    "-32600", "BAD-REQUEST");
	expect_error("42\n", "-32600", "BAD-REQUEST");
	expect_error(
	    "{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"daemon.ping\"}\n",
	    "-32600", "\"id\":1");
	expect_error("{\"id\":1,\"method\":\"daemon.ping\"}\n", "-32600",
		     "jsonrpc");
	expect_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"no.such\"}\n",
		     "-32601", "BAD-REQUEST");
	expect_error(
	    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"journal.query\","
	    "\"params\":{\"limit\":\"ten\"}}\n",
	    "-32602", "BAD-REQUEST");
	expect_error(
	    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"journal.query\","
	    "\"params\":{\"bogus\":1}}\n",
	    "-32602", "BAD-REQUEST");
	expect_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"daemon.ping\","
		     "\"params\":[1]}\n",
		     "-32602", "BAD-REQUEST");
	expect_error(
	    "{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"daemon.ping\"}\n",
	    "-32600", "BAD-REQUEST");
}
END_TEST

/* A notification (no id) gets no response; the next request does. */
START_TEST(test_notification_no_reply)
{
	int fd = test_spd_connect(&T);
	char line[256];
	char *r;

	snprintf(line, sizeof(line),
		 "{\"jsonrpc\":\"2.0\",\"method\":\"daemon.ping\",\"params\":"
		 "{\"token\":\"%s\"}}\n",
		 T.token);
	test_send(fd, line, strlen(line));
	r = test_call(&T, fd, 5, "daemon.ping", NULL, true);
	ck_assert(has(r, "\"id\":5"));
	free(r);
	close(fd);
}
END_TEST

START_TEST(test_frame_too_large)
{
	int fd = test_spd_connect(&T);
	size_t n = 1024 * 1024 + 4096;
	char *big = malloc(n);
	char *r;

	memset(big, 'a', n);
	big[0] = '{';
	/* No newline: spd must not buffer without bound waiting for one. */
	test_send(fd, big, n);
	r = test_recv_line(fd, 5000);
	ck_assert_msg(has(r, "FRAME-TOO-LARGE"), "got %s", r ? r : "(none)");
	free(r);
	/* ... and closes the connection. */
	ck_assert_ptr_null(test_recv_line(fd, 5000));
	close(fd);
	free(big);
	/* Others are unaffected. */
	fd = test_spd_connect(&T);
	free(r = test_call(&T, fd, 1, "daemon.ping", NULL, true));
	close(fd);
}
END_TEST

START_TEST(test_auth_refused_and_journaled)
{
	int fd = test_spd_connect(&T);
	char *r, *dump;

	r = test_call(&T, fd, 1, "daemon.ping", NULL, false);
	ck_assert(has(r, "UNAUTHORIZED") && has(r, "-32002"));
	free(r);
	r = test_call(&T, fd, 2, "daemon.ping",
		      "{\"token\":\"00000000000000000000000000000000000000000"
		      "00000000000000000000000\"}",
		      false);
	ck_assert(has(r, "UNAUTHORIZED"));
	free(r);
	/* The right token prefix is not enough. */
	char partial[128];
	snprintf(partial, sizeof(partial), "{\"token\":\"%.63s\"}", T.token);
	r = test_call(&T, fd, 3, "daemon.ping", partial, false);
	ck_assert(has(r, "UNAUTHORIZED"));
	free(r);
	/* auth once per connection, then no token needed. */
	free(test_call(&T, fd, 4, "auth", NULL, true));
	r = test_call(&T, fd, 5, "daemon.ping", NULL, false);
	ck_assert(has(r, "\"pong\":true"));
	free(r);
	close(fd);
	/* Flush the journal by stopping spd, then read the file. */
	ck_assert_int_eq(test_spd_stop(&T), 0);
	dump = journal_dump();
	ck_assert_msg(
	    has(dump,
		"auth.refused|daemon.ping UNAUTHORIZED: a token is required"),
	    "%s", dump);
	ck_assert(
	    has(dump, "auth.refused|daemon.ping UNAUTHORIZED: invalid token"));
	/* The token never reaches the journal. */
	ck_assert_msg(!has(dump, T.token), "token in journal");
	char prefix[40];
	snprintf(prefix, sizeof(prefix), "%.32s", T.token);
	ck_assert(!has(dump, prefix));
	free(dump);
}
END_TEST

/* Positions of the one character changed in a token of the right length:
 * the first, the middle and the last, so that a comparison of any prefix
 * or suffix, or of the length alone, lets one of them through. */
static const size_t token_flip_at[] = {0, 32, 63};

/* The operator token with one hex digit changed at each of those
 * positions is refused, each on a fresh connection (a connection that
 * authenticated once would need no token at all). */
START_TEST(test_operator_token_one_char_off)
{
	size_t n = strlen(T.token);
	char *r;
	int fd;

	ck_assert_int_eq(n, 64);
	/* The control: the genuine token is accepted the same way. */
	fd = test_spd_connect(&T);
	r = test_call(&T, fd, 1, "daemon.ping", NULL, true);
	ck_assert_msg(has(r, "\"pong\":true"), "%s", r);
	free(r);
	close(fd);
	for (size_t i = 0; i < ARRAY_SIZE(token_flip_at); i++) {
		char tok[80], params[128];
		size_t at = token_flip_at[i];

		snprintf(tok, sizeof(tok), "%s", T.token);
		tok[at] = tok[at] == '0' ? '1' : '0';
		snprintf(params, sizeof(params), "{\"token\":\"%s\"}", tok);
		fd = test_spd_connect(&T);
		r = test_call(&T, fd, 2, "daemon.ping", params, false);
		ck_assert_msg(has(r, "UNAUTHORIZED") && !has(r, "pong"),
			      "operator token changed at %zu: %s", at, r);
		free(r);
		/* Nor did the attempt authenticate the connection. */
		r = test_call(&T, fd, 3, "daemon.ping", NULL, false);
		ck_assert_msg(has(r, "UNAUTHORIZED"), "after %zu: %s", at, r);
		free(r);
		close(fd);
	}
}
END_TEST

/* A client of another uid is refused even if it can reach the socket. */
START_TEST(test_other_uid_refused)
{
	struct passwd *pw = getpwnam("nobody");
	int p[2], status, rtfd;
	char buf[512] = "";
	char *dump;
	pid_t pid;

	if (geteuid() != 0)
		TEST_SKIP("needs root to act as another uid");
	ck_assert_ptr_nonnull(pw);
	/* Open the way through the file modes: the uid check must hold by
	 * itself. */
	chmod(T.runtime, 0755);
	chmod(T.sock, 0777);
	/* The runtime dir's ancestors (0700, /run/user/0 among them) are
	 * passed through a descriptor opened while still root. */
	rtfd = open(T.runtime, O_PATH | O_CLOEXEC);
	ck_assert_int_ge(rtfd, 0);
	ck_assert_int_eq(pipe(p), 0);
	pid = fork();
	if (pid == 0) {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		char line[256];
		ssize_t n;
		int fd;

		close(p[0]);
		if (setgid(pw->pw_gid) < 0 || setuid(pw->pw_uid) < 0)
			_exit(3);
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		snprintf(sa.sun_path, sizeof(sa.sun_path),
			 "/proc/self/fd/%d/spd.sock", rtfd);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
			_exit(4);
		snprintf(line, sizeof(line),
			 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
			 "\"daemon.ping\",\"params\":{\"token\":\"%s\"}}\n",
			 T.token);
		n = write(fd, line, strlen(line));
		(void)n;
		n = read(fd, line, sizeof(line) - 1);
		if (n > 0)
			n = write(p[1], line, (size_t)n);
		_exit(0);
	}
	close(p[1]);
	ssize_t n = read(p[0], buf, sizeof(buf) - 1);
	(void)n;
	waitpid(pid, &status, 0);
	close(p[0]);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "child status %d", status);
	ck_assert_msg(has(buf, "UNAUTHORIZED") && !has(buf, "pong"), "got %s",
		      buf);
	ck_assert_int_eq(test_spd_stop(&T), 0);
	dump = journal_dump();
	ck_assert_msg(has(dump, "peer of another uid"), "%s", dump);
	free(dump);
}
END_TEST

struct pinger {
	int ok;
};

static void *ping_thread(void *arg)
{
	struct pinger *pg = arg;
	int fd = test_spd_connect(&T);
	char line[256];

	for (int i = 0; i < 50; i++) {
		char *r;
		snprintf(line, sizeof(line),
			 "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":"
			 "\"daemon.ping\",\"params\":{\"token\":\"%s\"}}\n",
			 i, T.token);
		test_send(fd, line, strlen(line));
		r = test_recv_line(fd, 20000);
		snprintf(line, sizeof(line),
			 "\"id\":%d,\"result\":{\"pong\":true}", i);
		if (r && strstr(r, line))
			pg->ok++;
		free(r);
	}
	close(fd);
	return NULL;
}

START_TEST(test_200_clients)
{
	enum { N = 200 };
	pthread_t th[N];
	struct pinger pg[N];
	int total = 0;

	memset(pg, 0, sizeof(pg));
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(
		    pthread_create(&th[i], NULL, ping_thread, &pg[i]), 0);
	for (int i = 0; i < N; i++) {
		pthread_join(th[i], NULL);
		total += pg[i].ok;
	}
	ck_assert_int_eq(total, N * 50);
}
END_TEST

/* A client that never reads does not block others. */
START_TEST(test_stalled_client)
{
	int slow = test_spd_connect(&T), fd;
	char line[256];
	char *r;
	int n = snprintf(line, sizeof(line),
			 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
			 "\"daemon.status\",\"params\":{\"token\":\"%s\"}}\n",
			 T.token);
	int flags = fcntl(slow, F_GETFL);

	fcntl(slow, F_SETFL, flags | O_NONBLOCK);
	for (int i = 0; i < 20000; i++)
		if (send(slow, line, (size_t)n, MSG_NOSIGNAL) < 0)
			break;
	fd = test_spd_connect(&T);
	r = test_call(&T, fd, 2, "daemon.ping", NULL, true);
	ck_assert(has(r, "\"pong\":true"));
	free(r);
	close(fd);
	close(slow);
}
END_TEST

START_TEST(test_second_spd_refused)
{
	char *err = NULL;
	int st;

	/* Same directories, second process. */
	st = test_spd_expect_exit(&T, &err);
	ck_assert_msg(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) != 0,
		      "second spd not refused");
	char pidtxt[32];
	snprintf(pidtxt, sizeof(pidtxt), "pid %d", (int)T.pid);
	ck_assert_msg(has(err, "already running") && has(err, pidtxt), "%s",
		      err);
	free(err);
	/* The first still answers. */
	int fd = test_spd_connect(&T);
	free(test_call(&T, fd, 1, "daemon.ping", NULL, true));
	close(fd);
}
END_TEST

/*
 * A second spd with the same state but another runtime directory (a
 * shell where XDG_RUNTIME_DIR is unset starts one for spctl) is refused
 * by the journal's lock, and says which spd holds it and where that one
 * listens, instead of a bare "Device or resource busy".
 */
START_TEST(test_second_spd_other_runtime_dir)
{
	struct test_spd u = T;
	char *err = NULL, *entry = NULL, run2[4096], pidtxt[32];
	int st, k = -1;

	snprintf(run2, sizeof(run2), "%s/run2", T.dir);
	ck_assert_int_eq(mkdir(run2, 0700), 0);
	for (int i = 0; u.env[i]; i++)
		if (!strncmp(u.env[i], "SPD_RUNTIME_DIR=", 16) ||
		    !strncmp(u.env[i], "XDG_RUNTIME_DIR=", 16))
			k = i;
	ck_assert_msg(k >= 0, "the layout names no runtime directory");
	ck_assert(asprintf(&entry, "%.16s%s", u.env[k], run2) > 0);
	u.env[k] = entry;
	st = test_spd_expect_exit(&u, &err);
	ck_assert_msg(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) != 0,
		      "second spd not refused");
	snprintf(pidtxt, sizeof(pidtxt), "pid %d", (int)T.pid);
	ck_assert_msg(has(err, "already keeps the journal") &&
			  has(err, pidtxt) && has(err, T.sock) &&
			  has(err, "XDG_RUNTIME_DIR") &&
			  !has(err, "Device or resource busy"),
		      "%s", err);
	free(err);
	free(entry);
	/* The first still answers, its socket untouched. */
	int fd = test_spd_connect(&T);
	free(test_call(&T, fd, 1, "daemon.ping", NULL, true));
	close(fd);
}
END_TEST

START_TEST(test_sigterm_clean_exit)
{
	struct stat st;
	int status = test_spd_stop(&T);

	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_int_eq(stat(T.sock, &st), -1);
	char *dump = journal_dump();
	ck_assert_msg(has(dump, "daemon.stop"), "%s", dump);
	free(dump);
}
END_TEST

START_TEST(test_stale_socket_and_modes)
{
	struct stat st;
	char *tok;

	test_spd_kill(&T); /* leaves a stale socket behind */
	ck_assert_int_eq(stat(T.sock, &st), 0);
	test_spd_start(&T);
	ck_assert_int_eq(stat(T.sock, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0600);
	ck_assert_int_eq(stat(T.runtime, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0700);
	tok = paths_join(T.config, "operator.token");
	ck_assert_int_eq(stat(tok, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0600);
	free(tok);
	/* A runtime dir with loose modes is refused. */
	test_spd_stop(&T);
	chmod(T.runtime, 0755);
	char *err = NULL;
	int s = test_spd_try_start(&T, &err);
	ck_assert(s >= 0 && WEXITSTATUS(s) != 0);
	ck_assert_msg(has(err, "0700"), "%s", err);
	free(err);
	chmod(T.runtime, 0700);
}
END_TEST

/* spctl: the commands a user types. */
/* What a front end refused from its own client is a journal row, its text
 * kept to one short printable line. */
START_TEST(test_client_refused_journaled)
{
	int fd = test_spd_connect(&T);
	char *r = test_call(&T, fd, 1, "client.refused",
			    "{\"front\":\"mcp\",\"what\":\"malformed-json\","
			    "\"detail\":\"near \\u001b[31mgarbage\"}",
			    true);
	char *dump;

	ck_assert_msg(has(r, "\"journaled\":true"), "%s", r);
	free(r);
	close(fd);
	/* The row is committed by the writer thread: ask until it is. */
	for (int i = 0; i < 100; i++) {
		dump = journal_dump();
		if (has(dump, "mcp refused malformed-json"))
			break;
		free(dump);
		dump = NULL;
		usleep(50 * 1000);
	}
	ck_assert_msg(dump, "no journal row for client.refused");
	ck_assert_msg(has(dump, "near ?[31mgarbage") && !has(dump, "\x1b"),
		      "%s", dump);
	free(dump);
	/* client.note: what a front end saw, a row of the same shape. */
	fd = test_spd_connect(&T);
	r = test_call(&T, fd, 2, "client.note",
		      "{\"front\":\"acp\",\"what\":\"update\","
		      "\"detail\":\"plan, 3 entries\"}",
		      true);
	ck_assert_msg(has(r, "\"journaled\":true"), "%s", r);
	free(r);
	close(fd);
	for (int i = 0; i < 100; i++) {
		dump = journal_dump();
		if (has(dump, "acp noted update"))
			break;
		free(dump);
		dump = NULL;
		usleep(50 * 1000);
	}
	ck_assert_msg(dump && has(dump, "plan, 3 entries"),
		      "no journal row for client.note");
	free(dump);
}
END_TEST

START_TEST(test_spctl_commands)
{
	char *out = NULL, *err = NULL;
	int st;

	st = test_spctl(&T, (char *[]){"ping", NULL}, NULL, &out, &err);
	ck_assert_msg(WEXITSTATUS(st) == 0 && has(out, "pong"), "%s%s", out,
		      err);
	free(out), free(err);
	st = test_spctl(&T, (char *[]){"--json", "status", NULL}, NULL, &out,
			&err);
	ck_assert(WEXITSTATUS(st) == 0 && has(out, "\"version\""));
	free(out), free(err);
	st = test_spctl(&T, (char *[]){"journal", "--kind", "request", NULL},
			NULL, &out, &err);
	ck_assert(WEXITSTATUS(st) == 0 && has(out, "daemon.ping ok"));
	free(out), free(err);
	st = test_spctl(&T, (char *[]){"journal", "verify", NULL}, NULL, &out,
			&err);
	ck_assert_msg(WEXITSTATUS(st) == 0 && has(out, "intact"), "%s%s", out,
		      err);
	free(out), free(err);
	st = test_spctl(&T, (char *[]){"bogus", NULL}, NULL, &out, &err);
	ck_assert_int_eq(WEXITSTATUS(st), 2);
	free(out), free(err);
	/* A wrong session token: refused with the symbolic code, exit 125. */
	st = test_spctl(&T, (char *[]){"ping", NULL},
			(char *[]){"SPD_SESSION_TOKEN=deadbeef", NULL}, &out,
			&err);
	ck_assert_int_eq(WEXITSTATUS(st), 125);
	ck_assert_msg(has(err, "UNAUTHORIZED"), "%s", err);
	free(out), free(err);
}
END_TEST

static int follow_count(const char *out)
{
	int n = 0;
	for (const char *p = out; (p = strstr(p, "journal.event")); p++)
		n++;
	return n;
}

/* journal.follow: history, then live events, until the client goes. */
START_TEST(test_journal_follow)
{
	int fd = test_spd_connect(&T), fd2 = test_spd_connect(&T);
	char *r;
	int seen_live = 0;

	free(test_call(&T, fd2, 1, "daemon.ping", NULL, true));
	char line[256];
	snprintf(line, sizeof(line),
		 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"journal.follow\","
		 "\"params\":{\"token\":\"%s\",\"since\":0}}\n",
		 T.token);
	test_send(fd, line, strlen(line));
	r = test_recv_line(fd, 5000);
	ck_assert_msg(has(r, "journal.event") && has(r, "\"id\":1,"), "%s", r);
	free(r);
	/* Live: a ping elsewhere shows up here. */
	free(test_call(&T, fd2, 77, "daemon.status", NULL, true));
	for (int i = 0; i < 50 && !seen_live; i++) {
		r = test_recv_line(fd, 5000);
		ck_assert_ptr_nonnull(r);
		if (has(r, "daemon.status ok"))
			seen_live = 1;
		ck_assert_int_eq(follow_count(r), 1);
		free(r);
	}
	ck_assert(seen_live);
	close(fd);
	close(fd2);
}
END_TEST

/* Tampering, made with sqlite3 on the file, is named by journal verify. */
static void tamper_and_verify(const char *sql, const char *reason)
{
	char *out = NULL, *err = NULL;
	int st, fd;

	fd = test_spd_connect(&T);
	for (int i = 0; i < 20; i++)
		free(test_call(&T, fd, i, "daemon.ping", NULL, true));
	close(fd);
	ck_assert_int_eq(test_spd_stop(&T), 0);
	char *sqlcopy = strdup(sql);
	char *argv[] = {"sqlite3", T.journal, sqlcopy, NULL};
	st = test_run(argv, NULL, NULL, &err);
	free(sqlcopy);
	ck_assert_msg(st == 0, "sqlite3: %s", err);
	free(err);
	char *spd_err = NULL;
	st = test_spd_try_start(&T, &spd_err);
	if (st >= 0) {
		/* spd refuses to continue a chain whose head was cut off
		 * (continuing would bury the evidence); the offline check
		 * names the bad row. */
		char *spd = test_prog("spd");
		char *vargv[] = {spd, "--verify-journal", NULL};
		ck_assert_msg(has(spd_err, "journal"), "%s", spd_err);
		free(spd_err);
		st = test_run(vargv, T.env, &out, &err);
		free(spd);
		ck_assert_msg(WEXITSTATUS(st) == 1 && has(out, "BROKEN") &&
				  has(out, reason),
			      "offline verify: %s %s", out, err);
		free(out), free(err);
		return;
	}
	free(spd_err);
	st = test_spctl(&T, (char *[]){"journal", "verify", NULL}, NULL, &out,
			&err);
	ck_assert_msg(WEXITSTATUS(st) == 1, "verify passed after %s: %s", sql,
		      out);
	ck_assert_msg(has(out, "BROKEN") && has(out, reason), "%s", out);
	free(out), free(err);
}

/*
 * A journal that cannot keep up (its disk stalled: here its write lock is
 * held by a sqlite3 shell) makes spd refuse requests rather than carry
 * them out unjournaled; ping still answers; once the journal catches up,
 * requests work again and the journal verifies.
 */
/* spctl journal shows the newest events (the last --limit N), oldest
 * first, and --since ID those after ID: a long journal does not open on
 * its first day. */
static void journal_ids(char *const args[], long long *ids, size_t *n)
{
	char *out = NULL, *err = NULL, *line, *save = NULL;
	int st = test_spctl(&T, args, NULL, &out, &err);

	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", err);
	*n = 0;
	for (line = strtok_r(out, "\n", &save); line && *n < 8;
	     line = strtok_r(NULL, "\n", &save)) {
		json_t *ev = json_loads(line, 0, NULL);

		ck_assert_msg(ev, "not JSON: %s", line);
		ids[(*n)++] = json_integer_value(json_object_get(ev, "id"));
		json_decref(ev);
	}
	free(out);
	free(err);
}

START_TEST(test_journal_cli_newest)
{
	long long ids[8];
	size_t n;
	int fd = test_spd_connect(&T);

	for (int i = 0; i < 150; i++)
		free(test_call(&T, fd, i, "daemon.ping", NULL, true));
	close(fd);
	journal_ids((char *[]){"journal", "--json", "--limit", "2", NULL}, ids,
		    &n);
	ck_assert_uint_eq(n, 2);
	ck_assert_msg(ids[0] >= 150 && ids[1] == ids[0] + 1,
		      "not the newest two, oldest first: %lld %lld", ids[0],
		      ids[1]);
	journal_ids((char *[]){"journal", "--json", "--since", "0", "--limit",
			       "2", NULL},
		    ids, &n);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(ids[0], 1);
	ck_assert_int_eq(ids[1], 2);
}
END_TEST

/* A config directory other users can read: spd refuses to start, naming
 * the directory, its mode and the fix. */
START_TEST(test_config_dir_mode_refused)
{
	char *err;

	ck_assert_int_eq(test_spd_stop(&T), 0);
	ck_assert_int_eq(chmod(T.config, 0755), 0);
	ck_assert_int_ne(test_spd_expect_exit(&T, &err), -1);
	ck_assert_msg(err && strstr(err, T.config) &&
			  strstr(err, "mode 0755") && strstr(err, "chmod 700"),
		      "%s", err ? err : "(nothing said)");
	free(err);
	ck_assert_int_eq(chmod(T.config, 0700), 0);
	test_spd_start(&T);
}
END_TEST

START_TEST(test_journal_stall_refuses)
{
	int in[2], out[2], fd, st;
	char conf[4200], buf[64] = "";
	char *r = NULL;
	bool refused = false;
	pid_t sq;
	FILE *f;

	ck_assert_int_eq(test_spd_stop(&T), 0);
	snprintf(conf, sizeof(conf), "%s/spd.conf", T.config);
	f = fopen(conf, "w");
	ck_assert_ptr_nonnull(f);
	fputs("[journal]\n\tqueue-max = 65536\n", f);
	fclose(f);
	test_spd_start(&T);

	ck_assert_int_eq(pipe(in), 0);
	ck_assert_int_eq(pipe(out), 0);
	sq = fork();
	if (sq == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		execlp("sqlite3", "sqlite3", T.journal, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	{
		/* spd may be committing a row: wait for the lock. */
		const char cmd[] =
		    ".timeout 10000\nBEGIN EXCLUSIVE;\n.print locked\n";
		ck_assert_int_eq(write(in[1], cmd, strlen(cmd)),
				 (ssize_t)strlen(cmd));
	}
	ck_assert_int_gt(read(out[0], buf, sizeof(buf) - 1), 0);
	ck_assert_msg(strstr(buf, "locked"), "sqlite3 said: %s", buf);

	fd = test_spd_connect(&T);
	/* Every request is journaled: pings fill the queue. */
	for (int i = 0; i < 4000 && !refused; i++) {
		free(r);
		r = test_call(&T, fd, i, "daemon.ping", NULL, true);
		ck_assert_msg(has(r, "\"pong\":true"), "%s", r);
		if (i % 50 == 49) {
			free(r);
			r = test_call(&T, fd, i, "journal.query", NULL, true);
			refused = has(r, "the journal cannot keep up");
		}
	}
	ck_assert_msg(refused, "journal.query still answered: %s", r);
	free(r);
	/* Refused: a run is not started (the marker is not made). */
	{
		char params[4400], marker[4200];

		snprintf(marker, sizeof(marker), "%s/ran", T.dir);
		snprintf(params, sizeof(params),
			 "{\"argv\":[\"/usr/bin/touch\",\"%s\"],"
			 "\"workspace\":\"%s\"}",
			 marker, T.dir);
		r = test_call(&T, fd, 9000, "cmd.run", params, true);
		ck_assert_msg(has(r, "the journal cannot keep up"), "%s", r);
		free(r);
		ck_assert(access(marker, F_OK) < 0);
	}
	r = test_call(&T, fd, 9001, "daemon.status", NULL, true);
	ck_assert_msg(has(r, "\"version\""), "%s", r);
	free(r);

	/* The disk is back: the journal catches up, requests work. */
	close(in[1]);
	waitpid(sq, &st, 0);
	close(out[0]);
	refused = true;
	for (int i = 0; i < 300 && refused; i++) {
		r = test_call(&T, fd, 9100 + i, "journal.query", NULL, true);
		refused = has(r, "the journal cannot keep up");
		if (refused)
			usleep(100 * 1000);
		free(r);
	}
	ck_assert_msg(!refused, "still refusing 30 s after the lock went");
	r = test_call(&T, fd, 9500, "journal.verify", NULL, true);
	ck_assert_msg(has(r, "\"ok\":true"), "%s", r);
	free(r);
	close(fd);
}
END_TEST

START_TEST(test_tamper_edit)
{
	tamper_and_verify("update events set summary='nothing here' where id=5",
			  "at event 5 (edited)");
}
END_TEST

START_TEST(test_tamper_delete)
{
	tamper_and_verify("delete from events where id=6", "at event 6");
}
END_TEST

START_TEST(test_tamper_insert)
{
	tamper_and_verify(
	    "update events set id=id+1000 where id>7;"
	    "insert into events select 8,time,session,actor,kind,"
	    "'forged',detail,prev_hash,hash from events where id=7;"
	    "update events set id=id-999 where id>1000",
	    "BROKEN");
}
END_TEST

START_TEST(test_tamper_reorder)
{
	tamper_and_verify("update events set id=-1 where id=4;"
			  "update events set id=4 where id=5;"
			  "update events set id=5 where id=-1",
			  "at event 4");
}
END_TEST

START_TEST(test_tamper_truncate)
{
	tamper_and_verify("delete from events where id > 10", "truncated");
}
END_TEST

/* SIGKILL during a burst: the journal still verifies and a restart
 * continues the chain. */
START_TEST(test_kill_during_burst)
{
	int fd = test_spd_connect(&T);
	char line[256];
	char *out = NULL, *err = NULL;
	int n, st;

	n = snprintf(line, sizeof(line),
		     "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"daemon.ping\","
		     "\"params\":{\"token\":\"%s\"}}\n",
		     T.token);
	for (int i = 0; i < 3000; i++)
		test_send(fd, line, (size_t)n);
	usleep(20000);
	test_spd_kill(&T);
	close(fd);
	char *argv[] = {"sqlite3", T.journal, "select count(*) from events",
			NULL};
	char *before = NULL;
	test_run(argv, NULL, &before, NULL);
	test_spd_start(&T);
	fd = test_spd_connect(&T);
	free(test_call(&T, fd, 1, "daemon.ping", NULL, true));
	close(fd);
	st = test_spctl(&T, (char *[]){"journal", "verify", NULL}, NULL, &out,
			&err);
	ck_assert_msg(WEXITSTATUS(st) == 0 && has(out, "intact"),
		      "after SIGKILL (%s rows): %s %s", before, out, err);
	free(out), free(err), free(before);
}
END_TEST

/*
 * spctl starts spd on demand for a script, an editor or a harness that
 * captures its output: $(spctl ping 2>&1) must return.  spd, and the
 * sandboxd it starts, let go of the caller's stdout and stderr and of any
 * descriptor the caller left open; a refusal still reaches the caller.
 */
static char *autostart_env[10];

static void autostart_env_init(struct test_spd *t)
{
	int n = 0;

	for (int i = 0; t->env[i]; i++)
		if (strncmp(t->env[i], "SPD_NO_AUTOSTART=", 17))
			autostart_env[n++] = t->env[i];
	autostart_env[n++] = "SPD_NO_AUTOSTART=0";
	autostart_env[n] = NULL;
}

static void stop_by_pidfile(struct test_spd *t)
{
	char *p = paths_join(t->runtime, "spd.pid");
	char *s = test_read_file(p);
	pid_t pid = s ? (pid_t)atoi(s) : 0;

	free(p);
	free(s);
	ck_assert_msg(pid > 1, "spd wrote no pid file");
	kill(pid, SIGTERM);
	for (int i = 0; i < 100 && kill(pid, 0) == 0; i++)
		usleep(100 * 1000);
	ck_assert_msg(kill(pid, 0) < 0, "spd did not stop on SIGTERM");
}

START_TEST(test_autostart_lets_go_of_caller)
{
	struct test_spd t;
	char *spctl = test_prog("spctl");
	char *argv[] = {spctl, "ping", NULL};
	char *out = NULL, *err = NULL, c;
	int keep[2], st;
	struct pollfd pfd;

	test_spd_prepare(&t, NULL);
	autostart_env_init(&t);
	/* A descriptor the caller left open (not close-on-exec), as a
	 * shell or an editor's job control does. */
	ck_assert_int_eq(pipe(keep), 0);
	fcntl(keep[0], F_SETFD, FD_CLOEXEC);
	st = test_run(argv, autostart_env, &out, &err);
	close(keep[1]);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 && has(out, "pong"),
		      "spctl ping: %d %s %s", st, out, err);
	pfd = (struct pollfd){keep[0], POLLIN, 0};
	ck_assert_msg(poll(&pfd, 1, 5000) == 1 && read(keep[0], &c, 1) == 0,
		      "spd kept a descriptor its caller left open");
	close(keep[0]);
	free(out), free(err);
	/* Started, it answers the next client without a second start. */
	st = test_run(argv, autostart_env, &out, &err);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 && has(out, "pong"),
		      "second ping: %s %s", out, err);
	free(out), free(err);
	stop_by_pidfile(&t);
	free(spctl);
	test_spd_cleanup(&t);
}
END_TEST

START_TEST(test_autostart_refusal_reaches_caller)
{
	struct test_spd t;
	char *spctl = test_prog("spctl");
	char *argv[] = {spctl, "ping", NULL};
	char *out = NULL, *err = NULL;
	int st;

	test_spd_prepare(&t, "[sandbox]\n\tmode = sometimes\n");
	autostart_env_init(&t);
	st = test_run(argv, autostart_env, &out, &err);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 125,
		      "spctl ping with a broken spd.conf: %d %s %s", st, out,
		      err);
	ck_assert_msg(has(err, "sometimes"),
		      "spd's own reason did not reach the caller: %s", err);
	free(out), free(err);
	free(spctl);
	test_spd_cleanup(&t);
}
END_TEST

/* A checkout of 5,000 files in 50 directories: its start takes a
 * thousand times a ping's round trip. */

static char *big_repo(const char *name)
{
	char *repo = paths_join(T.dir, name);

	test_make_repo(repo, "for d in $(seq 50); do mkdir d$d; "
			     "(cd d$d && seq 100 | sed 's/$/.txt/' | "
			     "xargs touch); done");
	return repo;
}

static void send_start(int fd, int id, const char *repo, const char *feature,
		       bool in_place)
{
	char *line;

	ck_assert(asprintf(&line,
			   "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":"
			   "\"session.start\",\"params\":{\"token\":\"%s\","
			   "\"repo\":\"%s\",\"feature\":\"%s\"%s}}\n",
			   id, T.token, repo, feature,
			   in_place ? ",\"in_place\":true" : "") > 0);
	test_send(fd, line, strlen(line));
	free(line);
}

/* Whether fd has bytes to read now. */
static bool readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, 0) == 1;
}

/* End the session of feature (in place: the checkout is free again). */
static void end_feature(int fd, const char *feature)
{
	char *r = test_call(&T, fd, 3, "session.list", NULL, true), *p, *q;
	json_t *j = json_loads(r, 0, NULL), *e;
	json_t *v = json_object_get(json_object_get(j, "result"), "sessions");
	size_t i;

	json_array_foreach(v, i, e)
	{
		const char *f =
		    json_string_value(json_object_get(e, "feature"));

		if (!f || strcmp(f, feature) != 0)
			continue;
		ck_assert(
		    asprintf(&p, "{\"id\":\"%s\"}",
			     json_string_value(json_object_get(e, "id"))) > 0);
		q = test_call(&T, fd, 4, "session.end", p, true);
		ck_assert_msg(has(q, "\"result\""), "%s", q);
		free(p);
		free(q);
	}
	json_decref(j);
	free(r);
}

/*
 * A session's start does its checkout and walks off spd's loop: a ping
 * sent on another connection just after a start of 5,000 files is
 * answered while that start is still going (on spd before, the loop did
 * the start first, so the ping's answer always came after it).  Not a
 * timing: an order.  A start that ended before the ping was read (a test
 * held off the CPU that long) is tried again, at most thrice.  Both
 * kinds: a worktree's checkout, and the in-place clean check and walks.
 */
START_TEST(test_start_blocks_no_one)
{
	char *repo;

	LOOP_ORDER_TEST();
	repo = big_repo("src/big");

	for (int kind = 0; kind < 2; kind++) {
		bool seen = false;

		for (int attempt = 0; attempt < 3 && !seen; attempt++) {
			int a = test_spd_connect(&T), b = test_spd_connect(&T);
			char feature[32], *r;

			snprintf(feature, sizeof(feature), "big-%d-%d", kind,
				 attempt);
			send_start(a, 1, repo, feature, kind == 1);
			r = test_call(&T, b, 2, "daemon.ping", NULL, true);
			ck_assert(has(r, "\"pong\":true"));
			free(r);
			seen = !readable(a);
			r = test_recv_line(a, 60000);
			ck_assert_msg(r && has(r, "\"token\":"), "%s",
				      r ? r : "no reply to session.start");
			free(r);
			/* The in-place session ends before the next try. */
			if (kind == 1)
				end_feature(b, feature);
			close(a);
			close(b);
		}
		ck_assert_msg(seen,
			      "%s: the ping's answer came after the start's, "
			      "three times",
			      kind ? "in place" : "worktree");
	}
	free(repo);
}
END_TEST

/* Stop spd and check that it exits 0 (its stderr's tail when not). */
static void stop_clean(void)
{
	char *out = NULL;
	int status = test_spd_stop(&T);

	if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0))
		test_sh(&out, "cat '%s'/spd.stderr.* | tail -c 3000", T.dir);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "spd's exit status %d: %s", status, out ? out : "");
	free(out);
}

/*
 * Stop spd once it has read the request just sent on fd (a ping on the
 * same connection is answered after it was begun), and check that it
 * exits 0.
 */
static void stop_after(int fd)
{
	char *r = test_call(&T, fd, 2, "daemon.ping", NULL, true);

	if (!has(r, "\"pong\":true")) {
		/* The request's reply came first: read the ping's. */
		free(r);
		r = test_recv_line(fd, 60000);
		ck_assert(has(r, "\"pong\":true"));
	}
	free(r);
	stop_clean();
}

/*
 * spd stopped while a start is on the thread pool: it waits for the
 * start, which is then undone (no branch, no worktree) unless it had
 * ended first, in which case the session is whole; spd exits 0 either
 * way and nothing is half made.
 */
START_TEST(test_stop_during_start)
{
	char *repo, *out = NULL, *wts;
	int a, branch, trees, dirs, index;

	LOOP_ORDER_TEST();
	repo = big_repo("src/big2");
	wts = paths_join(T.state, "worktrees");
	a = test_spd_connect(&T);
	send_start(a, 1, repo, "stopped", false);
	stop_after(a);
	test_sh(&out, "git -C '%s' branch --list 'spd/stopped' | wc -l", repo);
	branch = atoi(out);
	free(out);
	test_sh(&out, "git -C '%s' worktree list | wc -l", repo);
	trees = atoi(out);
	free(out);
	test_sh(&out, "ls -A '%s' 2>/dev/null | wc -l", wts);
	dirs = atoi(out);
	free(out);
	test_sh(&out, "ls -A '%s/checkpoints' 2>/dev/null | wc -l", T.state);
	index = atoi(out);
	/* Whole (the start ended first) or not there at all. */
	ck_assert_msg(
	    (branch == 1 && trees == 2 && dirs == 1) ||
		(branch == 0 && trees == 1 && dirs == 0 && index == 0),
	    "half a session left: branch %d, worktrees %d, "
	    "directories %d, spd's index files %d",
	    branch, trees, dirs, index);
	free(out);
	close(a);
	free(wts);
	free(repo);
}
END_TEST

/* Whether path exists, waiting up to timeout_ms for it to be gone. */
static bool still_there(const char *path, int timeout_ms)
{
	struct stat st;

	for (int waited = 0; waited < timeout_ms; waited += 20) {
		if (lstat(path, &st) < 0)
			return false;
		usleep(20000);
	}
	return lstat(path, &st) == 0;
}

/* A worktree session of feature in repo started: its worktree's path
 * (the caller's to free), id and token. */
static char *start_worktree(const char *repo, const char *feature, char *id,
			    char *tok)
{
	char *p =
	    test_fmt("{\"repo\":\"%s\",\"feature\":\"%s\"}", repo, feature);

	test_session_start(&T, p, id, tok);
	free(p);
	return test_fmt("%s/worktrees/%s", T.state, id);
}

/*
 * An ended worktree session's files are removed off spd's loop: the end
 * answers once they are out of the worktree's path (gone at once), and
 * a ping just after that is answered while they are still being removed
 * (before, the loop removed them first: nothing was ever left to see).
 * They are gone soon after; the branch stays.  What an earlier spd left
 * half removed goes at the next start, and so do the checkouts for a
 * merge's checks it left (a stop during a merge), under a name no merge
 * of the new spd uses, and the held-out sets an end or a seal left.
 */
START_TEST(test_end_removes_off_loop)
{
	char *repo, *stale, *file, *mstale, *mdone, *hended;
	bool seen = false;

	LOOP_ORDER_TEST();
	repo = big_repo("src/endme");

	for (int attempt = 0; attempt < 3 && !seen; attempt++) {
		char id[TEST_SESSION_ID_LEN + 1],
		    tok[TEST_SESSION_TOKEN_LEN + 1];
		char *p, *r, *wt, *away, *out = NULL;
		int a, b;

		p = test_fmt("end-%d", attempt);
		wt = start_worktree(repo, p, id, tok);
		free(p);
		/* Connected after the start: spd drops a connection that
		 * has not authenticated within 5 s. */
		a = test_spd_connect(&T);
		b = test_spd_connect(&T);
		away = test_fmt("%s/worktrees/.ended-%s", T.state, id);
		ck_assert(asprintf(&p, "{\"id\":\"%s\"}", id) > 0);
		r = test_call(&T, a, 1, "session.end", p, true);
		ck_assert_msg(has(r, "\"result\""), "%s", r);
		free(r);
		free(p);
		r = test_call(&T, b, 2, "daemon.ping", NULL, true);
		ck_assert(has(r, "\"pong\":true"));
		free(r);
		seen = access(away, F_OK) == 0;
		ck_assert_msg(access(wt, F_OK) < 0, "%s is still there", wt);
		ck_assert_msg(!still_there(away, 30000), "%s was not removed",
			      away);
		test_sh(&out, "git -C '%s' branch --list 'spd/end-%d' | wc -l",
			repo, attempt);
		ck_assert_int_eq(atoi(out), 1);
		free(out);
		free(wt);
		free(away);
		close(a);
		close(b);
	}
	ck_assert_msg(seen, "the files were gone before the next call was "
			    "answered, three times");
	/* Left half removed by an earlier spd. */
	stale = test_fmt("%s/worktrees/.ended-0123456789abcdef", T.state);
	file = test_fmt("%s/d/f", stale);
	ck_assert_int_eq(test_sh(NULL, "mkdir -p '%s/d'", stale), 0);
	test_write_file(file, "x");
	/* A merge's checkout for its checks, left by a stop during the
	 * merge, and one whose removal a stop cut short. */
	mstale = test_fmt("%s/merge/0123456789abcdef", T.state);
	mdone = test_fmt("%s/merge/.done-0123456789abcdef", T.state);
	hended = test_fmt("%s/heldout/0123456789abcdef.ended", T.state);
	ck_assert_int_eq(
	    test_sh(NULL,
		    "mkdir -p '%s/d' '%s/d' '%s/d' && echo x > '%s/d/f' && "
		    "echo y > '%s/d/f' && echo z > '%s/d/f'",
		    mstale, mdone, hended, mstale, mdone, hended),
	    0);
	test_spd_stop(&T);
	test_spd_start(&T);
	ck_assert_msg(!still_there(stale, 30000), "%s was not removed", stale);
	ck_assert_msg(!still_there(mstale, 30000), "%s was not removed",
		      mstale);
	ck_assert_msg(!still_there(mdone, 30000), "%s was not removed", mdone);
	ck_assert_msg(!still_there(hended, 30000), "%s was not removed",
		      hended);
	/* Nothing else went with them: spd's state (its journal, its
	 * sessions) is whole, a second after (the remover's queue). */
	usleep(1000 * 1000);
	for (int k = 0; k < 2; k++) {
		char *keep = test_fmt("%s/%s", T.state,
				      k ? "sessions.db" : "journal.db");

		ck_assert_msg(access(keep, F_OK) == 0, "%s was removed", keep);
		free(keep);
	}
	{
		int fd = test_spd_connect(&T);
		char *r = test_call(&T, fd, 9, "journal.verify", "{}", true);

		ck_assert_msg(has(r, "\"ok\":true"), "journal.verify: %s", r);
		free(r);
		close(fd);
	}
	/* The name they were put aside under goes too (at most 30 s). */
	ck_assert_int_eq(
	    test_sh(NULL,
		    "for i in $(seq 300); do ls -a '%s' | grep -q "
		    "merge-left || exit 0; sleep 0.1; done; exit 1",
		    T.state),
	    0);
	free(mstale);
	free(mdone);
	free(hended);
	free(stale);
	free(file);
	free(repo);
}
END_TEST

/* Every file of the worktree wt rewritten to hold text (each to be read
 * and hashed by the end), then session.end of id sent (id 1) on a new
 * connection, returned. */
static int rewrite_and_end(const char *wt, const char *text, const char *id)
{
	char *line;
	int fd;

	ck_assert_int_eq(
	    test_sh(NULL,
		    "cd '%s' && find d* -name '*.txt' | "
		    "xargs sh -c 'for f; do echo %s > \"$f\"; done' _",
		    wt, text),
	    0);
	ck_assert(asprintf(&line,
			   "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
			   "\"session.end\",\"params\":{\"token\":\"%s\","
			   "\"id\":\"%s\"}}\n",
			   T.token, id) > 0);
	/* Connected only now: spd drops a connection that has not
	 * authenticated within 5 s, and the rewrite can take longer. */
	fd = test_spd_connect(&T);
	test_send(fd, line, strlen(line));
	free(line);
	return fd;
}

/*
 * An end reads the whole worktree off spd's loop: with every one of
 * 5,000 files rewritten (each read and hashed), a ping sent on another
 * connection just after the end is answered before it (before, the loop
 * read the worktree first).  An order, not a timing, tried at most
 * thrice.  Meanwhile the session takes no file write (what it wrote
 * could be lost with the worktree): one sent just after the end is
 * refused, whether the end is still reading or has ended.  Nothing of
 * the rewritten work is lost: the branch holds it.
 */
START_TEST(test_end_read_blocks_no_one)
{
	char *repo;
	bool seen = false;

	LOOP_ORDER_TEST();
	repo = big_repo("src/endread");

	for (int attempt = 0; attempt < 3 && !seen; attempt++) {
		char id[TEST_SESSION_ID_LEN + 1],
		    tok[TEST_SESSION_TOKEN_LEN + 1];
		char *p, *r, *w, *wt, *text, *out = NULL;
		int a, b, c;

		p = test_fmt("er-%d", attempt);
		wt = start_worktree(repo, p, id, tok);
		free(p);
		text = test_fmt("w%d", attempt);
		a = rewrite_and_end(wt, text, id);
		b = test_spd_connect(&T);
		c = test_spd_connect(&T);
		free(wt);
		free(text);
		w = test_rpc_on(&T, c, tok, "fs.write",
				"{\"path\":\"late.txt\",\"content\":\"x\"}",
				30000);
		r = test_call(&T, b, 2, "daemon.ping", NULL, true);
		ck_assert(has(r, "\"pong\":true"));
		free(r);
		seen = !readable(a);
		ck_assert_msg(w && has(w, "\"error\"") && !has(w, "\"result\""),
			      "a write during the end: %s", w ? w : "no reply");
		free(w);
		r = test_recv_line(a, 60000);
		ck_assert_msg(r && has(r, "\"committed\""), "%s",
			      r ? r : "no reply to session.end");
		free(r);
		test_sh(&out, "git -C '%s' show 'spd/er-%d:d50/100.txt'", repo,
			attempt);
		ck_assert_msg(out && atoi(out + 1) == attempt && out[0] == 'w',
			      "the branch holds \"%s\"", out ? out : "");
		free(out);
		test_sh(&out,
			"git -C '%s' ls-tree -r 'spd/er-%d' | grep -c late.txt",
			repo, attempt);
		ck_assert_int_eq(atoi(out), 0);
		free(out);
		close(a);
		close(b);
		close(c);
	}
	ck_assert_msg(seen, "the ping's answer came after the end's, three "
			    "times");
	free(repo);
}
END_TEST

/*
 * spd stopped while an end reads the worktree on the thread pool: it
 * waits for the read and exits 0, and the session either ended whole
 * (its work on the branch) or did not end at all (its worktree and its
 * work still there); in the second case the next spd ends it with the
 * work on the branch.  Nothing is lost either way.
 */
START_TEST(test_stop_during_end_read)
{
	char *repo, *out = NULL, *r, *wt, *p;
	char id[TEST_SESSION_ID_LEN + 1], tok[TEST_SESSION_TOKEN_LEN + 1];
	int a;

	LOOP_ORDER_TEST();
	repo = big_repo("src/endstop");
	wt = start_worktree(repo, "es", id, tok);
	a = rewrite_and_end(wt, "kept", id);
	stop_after(a);
	close(a);
	printf("test_stop_during_end_read: the end %s\n",
	       access(wt, F_OK) == 0 ? "was cut short (ended by the next spd)"
				     : "ended before spd stopped");
	if (access(wt, F_OK) == 0) {
		/* Not ended: the work is still in the worktree, and the next
		 * spd ends the session with it. */
		test_sh(&out, "cat '%s/d50/100.txt'", wt);
		ck_assert_str_eq(out, "kept\n");
		free(out);
		test_spd_start(&T);
		a = test_spd_connect(&T);
		p = test_fmt("{\"id\":\"%s\"}", id);
		r = test_call(&T, a, 3, "session.end", p, true);
		ck_assert_msg(has(r, "\"committed\""), "%s", r);
		free(r);
		free(p);
		close(a);
	}
	test_sh(&out, "git -C '%s' show spd/es:d50/100.txt", repo);
	ck_assert_msg(out && strcmp(out, "kept\n") == 0,
		      "the branch holds \"%s\"", out ? out : "");
	free(out);
	free(wt);
	free(repo);
}
END_TEST

/*
 * spd stopped while an agent's run in place waits for its walk of the
 * checkout on the thread pool (a .gitignore made just before): spd waits
 * for the walk and exits 0; the run's call is answered or its connection
 * closed (a stop closes every connection), never left hanging.  Nothing
 * of the session is lost: the next spd runs the agent's command with the
 * entry the new .gitignore ignores hidden.
 */
START_TEST(test_stop_during_run_walk)
{
	char *repo, *p, *line;
	char id[TEST_SESSION_ID_LEN + 1], tok[TEST_SESSION_TOKEN_LEN + 1];
	bool pong = false;
	const char *what = "was cut off by the stop";
	int a;

	LOOP_ORDER_TEST();
	repo = big_repo("src/walkstop");
	p = test_fmt("{\"repo\":\"%s\",\"feature\":\"ws\","
		     "\"in_place\":true}",
		     repo);
	test_session_start(&T, p, id, tok);
	free(p);
	test_sh(NULL, "echo 'd7/' >> '%s/.gitignore'", repo);
	a = test_spd_connect(&T);
	line = test_fmt("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
			"\"cmd.run\",\"params\":{\"token\":\"%s\","
			"\"argv\":[\"/bin/true\"]}}\n"
			"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":"
			"\"daemon.ping\"}\n",
			tok);
	test_send(a, line, strlen(line));
	free(line);
	/* The ping's answer, then the stop. */
	while (!pong && (line = test_recv_line(a, 60000))) {
		pong = has(line, "\"id\":2");
		if (has(line, "\"id\":1"))
			what = has(line, "\"result\"") ? "ran" : "was refused";
		free(line);
	}
	ck_assert_msg(pong, "no answer to the ping");
	stop_clean();
	/* Answered or closed: a read ends at once either way. */
	while ((line = test_recv_line(a, 10000))) {
		if (has(line, "\"id\":1"))
			what = has(line, "\"result\"") ? "ran" : "was refused";
		free(line);
	}
	close(a);
	printf("test_stop_during_run_walk: the run %s\n", what);
	test_spd_start(&T);
	a = test_spd_connect(&T);
	/* d6 there, d7 hidden (test(1) fails on it). */
	line = test_rpc_on(&T, a, tok, "cmd.run",
			   "{\"argv\":[\"test\",\"-e\",\"d6/1.txt\"]}", 60000);
	ck_assert_msg(line && has(line, "\"exit_code\":0"),
		      "d6/1.txt is not there: %s", line ? line : "no answer");
	free(line);
	line = test_rpc_on(&T, a, tok, "cmd.run",
			   "{\"argv\":[\"test\",\"-e\",\"d7/1.txt\"]}", 60000);
	ck_assert_msg(line && has(line, "\"exit_code\":1"),
		      "d7/1.txt, ignored now, is not hidden: %s",
		      line ? line : "no answer");
	free(line);
	close(a);
	free(repo);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("daemon");
	TCase *tc = tcase_create("daemon");
	SRunner *sr;
	int failed;

	signal(SIGPIPE, SIG_IGN);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_ping_and_status);
	tcase_add_test(tc, test_status_config_changed);
	tcase_add_test(tc, test_split_every_byte);
	tcase_add_test(tc, test_many_in_one_write);
	tcase_add_test(tc, test_bad_frames);
	tcase_add_test(tc, test_notification_no_reply);
	tcase_add_test(tc, test_frame_too_large);
	tcase_add_test(tc, test_auth_refused_and_journaled);
	tcase_add_test(tc, test_operator_token_one_char_off);
	tcase_add_test(tc, test_other_uid_refused);
	tcase_add_test(tc, test_200_clients);
	tcase_add_test(tc, test_stalled_client);
	tcase_add_test(tc, test_second_spd_refused);
	tcase_add_test(tc, test_second_spd_other_runtime_dir);
	tcase_add_test(tc, test_sigterm_clean_exit);
	tcase_add_test(tc, test_stale_socket_and_modes);
	tcase_add_test(tc, test_spctl_commands);
	tcase_add_test(tc, test_client_refused_journaled);
	tcase_add_test(tc, test_journal_follow);
	tcase_add_test(tc, test_journal_stall_refuses);
	tcase_add_test(tc, test_config_dir_mode_refused);
	tcase_add_test(tc, test_journal_cli_newest);
	tcase_add_test(tc, test_tamper_edit);
	tcase_add_test(tc, test_tamper_delete);
	tcase_add_test(tc, test_tamper_insert);
	tcase_add_test(tc, test_tamper_reorder);
	tcase_add_test(tc, test_tamper_truncate);
	tcase_add_test(tc, test_kill_during_burst);
	tcase_add_test(tc, test_start_blocks_no_one);
	tcase_add_test(tc, test_stop_during_start);
	tcase_add_test(tc, test_end_removes_off_loop);
	tcase_add_test(tc, test_end_read_blocks_no_one);
	tcase_add_test(tc, test_stop_during_end_read);
	tcase_add_test(tc, test_stop_during_run_walk);
	TCase *ta = tcase_create("autostart");
	tcase_set_timeout(ta, 120);
	tcase_add_test(ta, test_autostart_lets_go_of_caller);
	tcase_add_test(ta, test_autostart_refusal_reaches_caller);
	suite_add_tcase(s, ta);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

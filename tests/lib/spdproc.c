/*
 * A real spd for integration tests (tests/lib/spdproc.h), in the layout
 * SPD_TEST_LAYOUT names, and the socket helpers that talk to it.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "spdproc.h"
#include "testlib.h"
#include "common/buf.h"
#include "common/paths.h"

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static void mkdir_p_private(const char *path)
{
	char *copy = strdup(path);

	for (char *c = copy + 1; *c; c++) {
		if (*c != '/')
			continue;
		*c = '\0';
		if (mkdir(copy, 0700) < 0)
			ck_assert_msg(errno == EEXIST, "mkdir %s: %s", copy,
				      strerror(errno));
		*c = '/';
	}
	if (mkdir(copy, 0700) < 0)
		ck_assert_msg(errno == EEXIST, "mkdir %s: %s", copy,
			      strerror(errno));
	free(copy);
}

/* The login session's runtime dir, /run/user/UID, as pam_systemd makes
 * it; a private one per spd below it.  Where it cannot be made (no
 * /run/user and not root), one under HOME. */
static char *xdg_runtime_dir(const char *home)
{
	char *base = NULL, *tmpl = NULL;

	ck_assert(asprintf(&base, "/run/user/%u", (unsigned)getuid()) > 0);
	if (mkdir(base, 0700) < 0 && errno != EEXIST) {
		free(base);
		base = paths_join(home, ".run");
		ck_assert_int_eq(mkdir(base, 0700), 0);
	}
	ck_assert(asprintf(&tmpl, "%s/spd-test-XXXXXX", base) > 0);
	free(base);
	ck_assert_msg(mkdtemp(tmpl) != NULL, "mkdtemp %s: %s", tmpl,
		      strerror(errno));
	return tmpl;
}

bool test_layout_default(void)
{
	const char *layout = getenv("SPD_TEST_LAYOUT");

	return layout && strcmp(layout, "default") == 0;
}

void test_spd_prepare(struct test_spd *t, const char *conf)
{
	const char *layout = getenv("SPD_TEST_LAYOUT");
	int e = 0;

	memset(t, 0, sizeof(*t));
	t->dir = test_tmpdir("spd");
	if (!layout || !*layout || !strcmp(layout, "tmp")) {
		t->config = paths_join(t->dir, "config");
		t->state = paths_join(t->dir, "state");
		t->runtime = paths_join(t->dir, "run");
		ck_assert(
		    asprintf(&t->env[e++], "SPD_CONFIG_DIR=%s", t->config) > 0);
		ck_assert(asprintf(&t->env[e++], "SPD_STATE_DIR=%s", t->state) >
			  0);
		ck_assert(asprintf(&t->env[e++], "SPD_RUNTIME_DIR=%s",
				   t->runtime) > 0);
	} else {
		/* Where a user's spd lives: no SPD_* overrides, HOME this
		 * test's directory (outside /tmp: tests/run points TMPDIR
		 * elsewhere), the directories spd derives from it. */
		ck_assert_msg(
		    !strcmp(layout, "default") || !strcmp(layout, "nested"),
		    "SPD_TEST_LAYOUT=%s: tmp, default or nested", layout);
		for (const char *const *v =
			 (const char *const[]){
			     "SPD_CONFIG_DIR", "SPD_STATE_DIR",
			     "SPD_RUNTIME_DIR", "XDG_CONFIG_HOME",
			     "XDG_STATE_HOME", "XDG_RUNTIME_DIR", NULL};
		     *v; v++)
			unsetenv(*v);
		ck_assert(asprintf(&t->env[e++], "HOME=%s", t->dir) > 0);
		if (!strcmp(layout, "default")) {
			t->config = paths_join(t->dir, ".config/spd");
			t->state = paths_join(t->dir, ".local/state/spd");
			t->xdg_runtime = xdg_runtime_dir(t->dir);
		} else {
			/* Each of spd's directories inside the one before:
			 * the state dir in the config dir, the runtime dir
			 * in the state dir. */
			t->config = paths_join(t->dir, ".config/spd");
			t->state = paths_join(t->config, "state/spd");
			t->xdg_runtime = paths_join(t->state, "rt");
			ck_assert(asprintf(&t->env[e++],
					   "XDG_CONFIG_HOME=%s/.config",
					   t->dir) > 0);
			ck_assert(asprintf(&t->env[e++],
					   "XDG_STATE_HOME=%s/state",
					   t->config) > 0);
		}
		t->runtime = paths_join(t->xdg_runtime, "spd");
		ck_assert(asprintf(&t->env[e++], "XDG_RUNTIME_DIR=%s",
				   t->xdg_runtime) > 0);
	}
	t->sock = paths_join(t->runtime, "spd.sock");
	t->journal = paths_join(t->state, "journal.db");
	mkdir_p_private(t->config);
	if (t->xdg_runtime)
		mkdir_p_private(t->xdg_runtime);
	if (conf) {
		char *p = paths_join(t->config, "spd.conf");
		test_write_file(p, conf);
		free(p);
	}
	t->env[e++] = strdup("SPD_NO_AUTOSTART=1");
	t->env[e] = NULL;
}

static pid_t spawn_spd(struct test_spd *t, int errfd)
{
	char *spd = test_prog("spd");
	pid_t pid = fork();

	ck_assert(pid >= 0);
	if (pid == 0) {
		for (int i = 0; t->env[i]; i++)
			putenv(t->env[i]);
		if (errfd >= 0)
			dup2(errfd, 2);
		execl(spd, spd, "--foreground", (char *)NULL);
		_exit(127);
	}
	free(spd);
	return pid;
}

static bool sock_answers(struct test_spd *t)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", t->sock);
	ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

static void read_token(struct test_spd *t)
{
	char *p = paths_join(t->config, "operator.token");
	char *tok = test_read_file(p);

	ck_assert_msg(tok != NULL, "no operator token at %s", p);
	tok[strcspn(tok, "\n")] = '\0';
	snprintf(t->token, sizeof(t->token), "%s", tok);
	free(tok);
	free(p);
}

int test_spd_try_start(struct test_spd *t, char **ret_err)
{
	char errpath[4096];
	int errfd, status;

	snprintf(errpath, sizeof(errpath), "%s/spd.stderr.%d", t->dir,
		 (int)time(NULL));
	errfd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
	t->pid = spawn_spd(t, errfd);
	close(errfd);
	for (int i = 0; i < 1000; i++) {
		pid_t w = waitpid(t->pid, &status, WNOHANG);
		if (w == t->pid) {
			t->pid = 0;
			if (ret_err)
				*ret_err = test_read_file(errpath);
			return status;
		}
		if (sock_answers(t)) {
			read_token(t);
			if (ret_err)
				*ret_err = test_read_file(errpath);
			return -1;
		}
		sleep_ms(10);
	}
	ck_abort_msg("spd neither answered nor exited within 10 s");
	return -1;
}

int test_spd_expect_exit(struct test_spd *t, char **ret_err)
{
	char errpath[4096];
	int errfd, status;
	pid_t pid;

	snprintf(errpath, sizeof(errpath), "%s/spd.stderr.x", t->dir);
	errfd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
	pid = spawn_spd(t, errfd);
	close(errfd);
	for (int i = 0; i < 1000; i++) {
		if (waitpid(pid, &status, WNOHANG) == pid) {
			if (ret_err)
				*ret_err = test_read_file(errpath);
			return status;
		}
		sleep_ms(10);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	ck_abort_msg("spd kept running where it should have refused");
	return -1;
}

char *test_spd_refuses(struct test_spd *t, const char *conf)
{
	char *err = NULL;
	int st;

	test_spd_prepare(t, conf);
	st = test_spd_expect_exit(t, &err);
	/* A refusal is an exit with a status, not a crash. */
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) != 0,
		      "spd did not refuse (status %d) %s: %s", st, conf,
		      err ? err : "");
	return err ? err : strdup("");
}

void test_spd_start(struct test_spd *t)
{
	char *err = NULL;
	int st = test_spd_try_start(t, &err);

	ck_assert_msg(st == -1, "spd exited with status %d: %s", st,
		      err ? err : "");
	free(err);
}

int test_spd_stop(struct test_spd *t)
{
	int status = -1;

	if (t->pid <= 0)
		return -1;
	kill(t->pid, SIGTERM);
	waitpid(t->pid, &status, 0);
	t->pid = 0;
	return status;
}

void test_spd_stop_clean(struct test_spd *t)
{
	char *err = NULL;
	int st = t->pid > 0 ? test_spd_stop(t) : 0;

	if (!t->dir)
		return;
	if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
		test_sh(&err, "cat '%s'/spd.stderr.* | tail -c 3000", t->dir);
	test_spd_cleanup(t);
	ck_assert_msg(err == NULL, "spd did not stop cleanly (status %d): %s",
		      st, err);
}

void test_spd_kill(struct test_spd *t)
{
	if (t->pid <= 0)
		return;
	kill(t->pid, SIGKILL);
	waitpid(t->pid, NULL, 0);
	t->pid = 0;
}

void test_spd_cleanup(struct test_spd *t)
{
	if (t->pid > 0)
		test_spd_stop(t);
	if (t->dir)
		test_rmrf(t->dir);
	if (t->xdg_runtime)
		test_rmrf(t->xdg_runtime);
	free(t->dir);
	free(t->xdg_runtime);
	free(t->config);
	free(t->state);
	free(t->runtime);
	free(t->sock);
	free(t->journal);
	for (int i = 0; t->env[i]; i++)
		free(t->env[i]);
	memset(t, 0, sizeof(*t));
}

int test_spd_connect(struct test_spd *t)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", t->sock);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno, st = 0;
		pid_t w = t->pid > 0 ? waitpid(t->pid, &st, WNOHANG) : -1;
		char *log = NULL;

		/* What spd said, and whether it is still there: its stderr
		 * goes with the test's directory at teardown. */
		test_sh(&log, "tail -c 1500 '%s'/spd.stderr.* 2>&1", t->dir);
		ck_abort_msg("connect %s: %s (spd pid %d %s, status %d); its "
			     "stderr: %s",
			     t->sock, strerror(e), (int)t->pid,
			     w == 0  ? "running"
			     : w > 0 ? "exited"
				     : "unknown",
			     st, log ? log : "");
	}
	return fd;
}

void test_send(int fd, const char *s, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		ck_assert_msg(w > 0, "send: %s", strerror(errno));
		s += w;
		n -= (size_t)w;
	}
}

char *test_recv_line(int fd, int timeout_ms)
{
	struct buf b = BUF_INIT;
	char c;

	for (;;) {
		struct pollfd p = {fd, POLLIN, 0};
		int r = poll(&p, 1, timeout_ms);
		ssize_t n;

		if (r <= 0) {
			buf_free(&b);
			return NULL;
		}
		/* One byte at a time keeps pipelined lines for the next
		 * call; tests are not about speed. */
		n = read(fd, &c, 1);
		if (n <= 0) {
			buf_free(&b);
			return NULL;
		}
		if (c == '\n')
			return b.data ? b.data : strdup("");
		buf_append(&b, &c, 1);
	}
}

char *test_call(struct test_spd *t, int fd, int id, const char *method,
		const char *params_json, bool with_token)
{
	char *line;
	char *resp;
	const char *p = params_json ? params_json : "{}";
	char tokpart[128] = "";

	if (with_token)
		snprintf(tokpart, sizeof(tokpart), "\"token\":\"%s\"%s",
			 t->token, strcmp(p, "{}") ? "," : "");
	ck_assert(asprintf(&line,
			   "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"%s\","
			   "\"params\":{%s%s}\n",
			   id, method, tokpart, p + 1) > 0);
	test_send(fd, line, strlen(line));
	free(line);
	resp = test_recv_line(fd, 10000);
	ck_assert_msg(resp != NULL, "no response to %s", method);
	return resp;
}

static int next_id = 100;

int test_next_id(void)
{
	return next_id++;
}

char *test_rpc_on(struct test_spd *t, int fd, const char *token,
		  const char *method, const char *params, int timeout_ms)
{
	const char *p = params ? params : "{}";
	bool more = strcmp(p, "{}") != 0;
	int id = test_next_id();
	char *line, want[32];

	ck_assert(asprintf(&line,
			   "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"%s\","
			   "\"params\":{\"token\":\"%s\"%s%s}\n",
			   id, method, token ? token : t->token,
			   more ? "," : "", more ? p + 1 : "}") > 0);
	test_send(fd, line, strlen(line));
	free(line);
	snprintf(want, sizeof(want), "\"id\":%d,", id);
	for (;;) {
		char *r = test_recv_line(fd, timeout_ms);

		if (!r || strstr(r, want))
			return r;
		free(r);
	}
}

const char *test_reply_code(const char *reply)
{
	static char code[64];
	json_t *j;
	const char *c;

	if (!reply)
		return "closed";
	j = json_loads(reply, 0, NULL);
	ck_assert_msg(j != NULL, "not JSON: %s", reply);
	if (json_object_get(j, "result"))
		c = "ok";
	else
		c = json_string_value(json_object_get(
		    json_object_get(json_object_get(j, "error"), "data"),
		    "code"));
	snprintf(code, sizeof(code), "%s", c ? c : "?");
	json_decref(j);
	return code;
}

void test_session_start(struct test_spd *t, const char *params, char *id,
			char *token)
{
	int fd = test_spd_connect(t);
	char *r = test_rpc_on(t, fd, NULL, "session.start", params, 60000);
	json_t *j = r ? json_loads(r, 0, NULL) : NULL, *res = NULL;

	close(fd);
	ck_assert_msg(j && (res = json_object_get(j, "result")),
		      "session.start: %s", r ? r : "(no reply)");
	snprintf(id, TEST_SESSION_ID_LEN + 1, "%s",
		 json_string_value(json_object_get(res, "id")));
	snprintf(token, TEST_SESSION_TOKEN_LEN + 1, "%s",
		 json_string_value(json_object_get(res, "token")));
	ck_assert_int_eq(strlen(id), TEST_SESSION_ID_LEN);
	ck_assert_int_eq(strlen(token), TEST_SESSION_TOKEN_LEN);
	json_decref(j);
	free(r);
}

char *test_journal(struct test_spd *t, const char *sql)
{
	char *q = strdup(sql);
	char *argv[] = {"sqlite3", t->journal, q, NULL};
	char *out = NULL;

	test_run(argv, NULL, &out, NULL);
	free(q);
	return out;
}

char *test_journal_until(struct test_spd *t, const char *sql,
			 const char *needle)
{
	char *out = test_journal(t, sql);

	for (int i = 0; i < 100 && !(out && strstr(out, needle)); i++) {
		sleep_ms(100);
		free(out);
		out = test_journal(t, sql);
	}
	return out;
}

int test_spctl(struct test_spd *t, char *const args[], char *const extra_env[],
	       char **ret_out, char **ret_err)
{
	char *argv[64];
	char *env[32];
	size_t n = 0, e = 0;
	int st;

	argv[n++] = test_prog("spctl");
	for (size_t i = 0; args[i] && n < 63; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	for (size_t i = 0; t->env[i] && e < 16; i++)
		env[e++] = t->env[i];
	for (size_t i = 0; extra_env && extra_env[i] && e < 31; i++)
		env[e++] = extra_env[i];
	env[e] = NULL;
	st = test_run(argv, env, ret_out, ret_err);
	free(argv[0]);
	return st;
}

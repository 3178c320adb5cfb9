/*
 * Helpers for the Check suites (tests/lib/testlib.h): temporary
 * directories, files, running a program with its output captured and a
 * deadline, and strict mode's layer check.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <check.h>

#include "testlib.h"
#include "common/buf.h"
#include "common/paths.h"

bool test_host_has_layer(const char *layer)
{
	const char *strict = getenv("SPD_TEST_STRICT");
	const char *have = getenv("SPD_TEST_HOST_LAYERS");
	char *copy, *save = NULL;
	bool found = false;
	long need = -1;

	if (!strict || strcmp(strict, "1") != 0 || !have)
		return false;
	if (!strncmp(layer, "landlock_abi>=", 14))
		need = strtol(layer + 14, NULL, 10);
	copy = strdup(have);
	for (char *t = strtok_r(copy, " ,", &save); t && !found;
	     t = strtok_r(NULL, " ,", &save)) {
		if (need >= 0)
			found = !strncmp(t, "landlock_abi=", 13) &&
				strtol(t + 13, NULL, 10) >= need;
		else
			found = !strcmp(t, layer);
	}
	free(copy);
	return found;
}

char *test_tmpdir(const char *tag)
{
	const char *base = getenv("TMPDIR");
	char *tmpl;

	if (!base || !*base)
		base = "/tmp";
	if (asprintf(&tmpl, "%s/spd-test-%s-XXXXXX", base, tag) < 0)
		ck_abort_msg("asprintf");
	if (!mkdtemp(tmpl))
		ck_abort_msg("mkdtemp: %s", strerror(errno));
	return tmpl;
}

char *test_visible_tmpdir(const char *tag)
{
	const char *base = getenv("TMPDIR");
	char *tmpl;

	if (!base || base[0] != '/' || strncmp(base, "/tmp", 4) == 0 ||
	    strncmp(base, "/var/tmp", 8) == 0)
		base = test_build_dir();
	if (asprintf(&tmpl, "%s/spd-test-%s-XXXXXX", base, tag) < 0)
		ck_abort_msg("asprintf");
	if (!mkdtemp(tmpl))
		ck_abort_msg("mkdtemp: %s", strerror(errno));
	return tmpl;
}

void test_rmrf(const char *path)
{
	char *copy = strdup(path);
	char *argv[] = {"rm", "-rf", copy, NULL};
	pid_t pid = fork();

	if (pid == 0) {
		execvp("rm", argv);
		_exit(127);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
	free(copy);
}

void test_write_file(const char *path, const char *content)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	size_t n = strlen(content);

	ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
	ck_assert_int_eq(write(fd, content, n), (ssize_t)n);
	close(fd);
}

char *test_read_file(const char *path)
{
	struct buf b = BUF_INIT;
	char tmp[4096];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	while ((n = read(fd, tmp, sizeof(tmp))) > 0)
		buf_append(&b, tmp, (size_t)n);
	close(fd);
	if (!b.data)
		return strdup("");
	return b.data;
}

int test_run(char *const argv[], char *const extra_env[], char **ret_out,
	     char **ret_err)
{
	int po[2], pe[2], status;
	struct buf out = BUF_INIT, err = BUF_INIT;
	pid_t pid;

	if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		dup2(po[1], 1);
		dup2(pe[1], 2);
		if (extra_env)
			for (size_t i = 0; extra_env[i]; i++)
				putenv(extra_env[i]);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	struct pollfd pfd[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
	int open_fds = 2, waited_ms = 0, exited_ms = -1;
	bool exited = false;
	while (open_fds > 0) {
		int r = poll(pfd, 2, TEST_RUN_TICK_MS);

		if (r < 0 && errno != EINTR)
			break;
		if (r == 0) {
			waited_ms += TEST_RUN_TICK_MS;
			/* The command itself exited, yet something it started
			 * (a daemon, a spawner) still holds its output: a
			 * script capturing $(spctl ...) would wait forever. */
			if (!exited && waitpid(pid, &status, WNOHANG) == pid) {
				exited = true;
				exited_ms = waited_ms;
			}
			ck_assert_msg(!exited || waited_ms - exited_ms <
						     TEST_RUN_LINGER_MS,
				      "%s exited but a process it started "
				      "still holds its stdout or stderr",
				      argv[0]);
			if (waited_ms >= TEST_RUN_DEADLINE_MS) {
				kill(pid, SIGKILL);
				ck_abort_msg("%s did not finish within %d s",
					     argv[0],
					     TEST_RUN_DEADLINE_MS / 1000);
			}
			continue;
		}
		if (r < 0)
			continue;
		for (int i = 0; i < 2; i++) {
			char tmp[8192];
			ssize_t n;

			if (pfd[i].fd < 0 || !pfd[i].revents)
				continue;
			n = read(pfd[i].fd, tmp, sizeof(tmp));
			if (n <= 0) {
				close(pfd[i].fd);
				pfd[i].fd = -1;
				open_fds--;
				continue;
			}
			buf_append(i == 0 ? &out : &err, tmp, (size_t)n);
		}
	}
	if (!exited && waitpid(pid, &status, 0) < 0)
		status = -1;
	if (ret_out)
		*ret_out = out.data ? out.data : strdup("");
	else
		buf_free(&out);
	if (ret_err)
		*ret_err = err.data ? err.data : strdup("");
	else
		buf_free(&err);
	return status;
}

int test_sh(char **ret_out, const char *fmt, ...)
{
	va_list ap;
	char *line = NULL, *err = NULL;
	int st;

	va_start(ap, fmt);
	ck_assert(vasprintf(&line, fmt, ap) >= 0);
	va_end(ap);
	char *argv[] = {"sh", "-c", line, NULL};
	st = test_run(argv, NULL, ret_out, &err);
	free(line);
	free(err);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

char *test_fmt(const char *f, ...)
{
	va_list ap;
	char *s = NULL;

	va_start(ap, f);
	ck_assert(vasprintf(&s, f, ap) >= 0);
	va_end(ap);
	return s;
}

void test_make_repo(const char *dir, const char *files)
{
	ck_assert_msg(test_sh(NULL,
			      "set -e; mkdir -p '%s'; cd '%s'; "
			      "git init -q -b main; "
			      "git config user.email t@example.org; "
			      "git config user.name tester; %s; "
			      "git add -A; git commit -qm init",
			      dir, dir, files) == 0,
		      "making the repository %s failed", dir);
}

const char *test_build_dir(void)
{
	static char dir[PATH_MAX];
	const char *b;

	if (dir[0])
		return dir;
	b = getenv("BUILD");
	if (!b || !*b)
		b = "build";
	if (!realpath(b, dir))
		snprintf(dir, sizeof(dir), "%s", b);
	return dir;
}

char *test_prog(const char *name)
{
	return paths_join(test_build_dir(), name);
}

int test_listen_loopback(int *ret_port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(fd, 512) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &al) < 0) {
		close(fd);
		return -1;
	}
	*ret_port = ntohs(a.sin_port);
	return fd;
}

pid_t test_python_standin(char *const args[], int *ret_port)
{
	char *av[16] = {"python3"};
	char buf[32] = "";
	int p[2];
	ssize_t n = 0;
	pid_t pid;

	for (size_t i = 0; args[i] && i + 2 < sizeof(av) / sizeof(av[0]); i++)
		av[i + 1] = args[i];
	ck_assert_int_eq(pipe(p), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		execvp("python3", av);
		_exit(127);
	}
	close(p[1]);
	/* Up to the line's end: print() may write the number and its
	 * newline apart, and a read end closed between the two kills the
	 * stand-in (EPIPE). */
	for (size_t got = 0; got < sizeof(buf) - 1 && !strchr(buf, '\n');
	     got += (size_t)n) {
		n = read(p[0], buf + got, sizeof(buf) - 1 - got);
		if (n <= 0)
			break;
	}
	close(p[0]);
	ck_assert_msg(strchr(buf, '\n'), "the stand-in did not start");
	*ret_port = atoi(buf);
	ck_assert_int_gt(*ret_port, 0);
	return pid;
}

pid_t test_provider_standin(const char *log, const char *keys, int *ret_port)
{
	char *script = NULL, *port_file = NULL, *text = NULL;
	pid_t pid;

	ck_assert(asprintf(&script, "%s/../tests/lib/provider_standin.py",
			   test_build_dir()) > 0);
	ck_assert(asprintf(&port_file, "%s.port", log) > 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);

		dup2(null, 0);
		dup2(null, 1);
		setenv("STANDIN_LOG", log, 1);
		setenv("STANDIN_PORT_FILE", port_file, 1);
		setenv("STANDIN_KEYS", keys, 1);
		execlp("python3", "python3", script, (char *)NULL);
		_exit(127);
	}
	/* Written once, by rename: whole when it appears. */
	for (int i = 0; i < 200 && !(text = test_read_file(port_file)); i++)
		usleep(100 * 1000);
	ck_assert_msg(text && sscanf(text, "PORT %d", ret_port) == 1,
		      "the provider stand-in did not start");
	free(text);
	free(port_file);
	free(script);
	return pid;
}

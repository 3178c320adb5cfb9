/* Unit tests for daemon/transport/service.c: taking the socket a service manager
 * passes (LISTEN_PID, LISTEN_FDS, LISTEN_FDNAMES) and notifying it
 * (NOTIFY_SOCKET).  Each hand-over runs in a child process whose
 * descriptors 3 and 4 are set up as a service manager would leave them:
 * Check's own descriptors must not be overwritten. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/testlib.h"
#include "daemon/transport/service.h"

/* Where the child reports: far above the descriptors under test. */
#define REPORT_FD 40

struct outcome {
	int r;
	int fd;
	int open3, open4;	/* still open after the call */
	int cloexec3, cloexec4; /* FD_CLOEXEC set */
	int env_left;		/* any LISTEN_* variable still set */
	char why[256];
};

enum fd_kind { FD_NONE, FD_LISTENER, FD_PIPE, FD_DGRAM };

static int make_fd(enum fd_kind k, const char *dir, const char *name)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int fd = -1, p[2];

	switch (k) {
	case FD_NONE:
		return -1;
	case FD_PIPE:
		if (pipe(p) < 0)
			return -1;
		return p[0];
	case FD_DGRAM:
		return socket(AF_UNIX, SOCK_DGRAM, 0);
	case FD_LISTENER:
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		snprintf(a.sun_path, sizeof(a.sun_path), "%s/%s", dir, name);
		if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
		    listen(fd, 4) < 0)
			return -1;
		return fd;
	}
	return -1;
}

static int fd_flag(int fd, int *cloexec)
{
	int fl = fcntl(fd, F_GETFD);

	*cloexec = fl >= 0 && (fl & FD_CLOEXEC);
	return fl >= 0;
}

/* In a child: descriptors 3 and 4 of the given kinds, the variables
 * given ("SELF" as LISTEN_PID is the child's pid), then the call. */
static struct outcome hand_over(enum fd_kind k3, enum fd_kind k4,
				const char *pid, const char *fds,
				const char *names)
{
	struct outcome o;
	char *dir = test_tmpdir("service");
	int p[2], st;
	pid_t child;

	ck_assert_int_eq(pipe(p), 0);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		int a = make_fd(k3, dir, "a.sock"),
		    b = make_fd(k4, dir, "b.sock");
		char self[32];

		memset(&o, 0, sizeof(o));
		if (dup2(p[1], REPORT_FD) < 0)
			_exit(3);
		/* Everything between stderr and the report descriptor goes,
		 * as in a freshly exec'd spd. */
		for (int fd = 3; fd < REPORT_FD; fd++)
			if (fd != a && fd != b)
				close(fd);
		if (a >= 0 && a != 3 && (dup2(a, 3) < 0 || close(a) < 0))
			_exit(3);
		if (b >= 0 && b != 4 && (dup2(b, 4) < 0 || close(b) < 0))
			_exit(3);
		snprintf(self, sizeof(self), "%d", (int)getpid());
		if (pid)
			setenv("LISTEN_PID", strcmp(pid, "SELF") ? pid : self,
			       1);
		if (fds)
			setenv("LISTEN_FDS", fds, 1);
		if (names)
			setenv("LISTEN_FDNAMES", names, 1);
		o.r = service_listen_socket(&o.fd, o.why, sizeof(o.why));
		o.open3 = fd_flag(3, &o.cloexec3);
		o.open4 = fd_flag(4, &o.cloexec4);
		o.env_left = getenv("LISTEN_PID") || getenv("LISTEN_FDS") ||
			     getenv("LISTEN_FDNAMES");
		_exit(write(REPORT_FD, &o, sizeof(o)) == sizeof(o) ? 0 : 3);
	}
	close(p[1]);
	ck_assert_int_eq(read(p[0], &o, sizeof(o)), (ssize_t)sizeof(o));
	close(p[0]);
	ck_assert_int_eq(waitpid(child, &st, 0), child);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	test_rmrf(dir);
	free(dir);
	return o;
}

/* The socket systemd passes is used, close-on-exec (no run inherits it),
 * and the variables are gone. */
START_TEST(test_takes_passed_socket)
{
	struct outcome o = hand_over(FD_LISTENER, FD_NONE, "SELF", "1", NULL);

	ck_assert_int_eq(o.r, 0);
	ck_assert_int_eq(o.fd, 3);
	ck_assert(o.open3 && o.cloexec3);
	ck_assert(!o.env_left);

	o = hand_over(FD_LISTENER, FD_NONE, "SELF", "1", "spd.socket");
	ck_assert_int_eq(o.r, 0);
	ck_assert_int_eq(o.fd, 3);
	ck_assert(!o.env_left);
}
END_TEST

/* With two, the one named after spd's socket unit is used and the other
 * closed. */
START_TEST(test_picks_named_socket)
{
	struct outcome o = hand_over(FD_LISTENER, FD_LISTENER, "SELF", "2",
				     "other:spd.socket");

	ck_assert_int_eq(o.r, 0);
	ck_assert_int_eq(o.fd, 4);
	ck_assert(o.open4 && o.cloexec4);
	ck_assert(!o.open3);
	ck_assert(!o.env_left);
}
END_TEST

/* Variables meant for another process are nothing to spd: no socket,
 * nothing touched, but the variables do not live on in what spd
 * starts. */
START_TEST(test_other_pid_ignored)
{
	struct outcome o = hand_over(FD_LISTENER, FD_NONE, "1", "1", NULL);

	ck_assert_int_eq(o.r, 0);
	ck_assert_int_eq(o.fd, -1);
	ck_assert(o.open3 && !o.cloexec3);
	ck_assert(!o.env_left);
	o = hand_over(FD_LISTENER, FD_NONE, NULL, "1", NULL);
	ck_assert_int_eq(o.r, 0);
	ck_assert_int_eq(o.fd, -1);
}
END_TEST

/* A malformed LISTEN_FDS (or LISTEN_PID, or a name count that does not
 * match) is refused with a reason, the descriptors left alone, and spd
 * binds its own socket. */
START_TEST(test_malformed_refused)
{
	static const char *bad_fds[] = {
	    "", "x", "1x", " 1", "+1", "-1", "0", "17", "99999999999999999999"};
	struct outcome o;

	for (size_t i = 0; i < sizeof(bad_fds) / sizeof(bad_fds[0]); i++) {
		o = hand_over(FD_LISTENER, FD_NONE, "SELF", bad_fds[i], NULL);
		ck_assert_msg(o.r == -EINVAL, "LISTEN_FDS=\"%s\": %d",
			      bad_fds[i], o.r);
		ck_assert_int_eq(o.fd, -1);
		ck_assert(o.open3 && !o.cloexec3);
		ck_assert(strstr(o.why, "LISTEN_FDS"));
		ck_assert(!o.env_left);
	}
	o = hand_over(FD_LISTENER, FD_NONE, "12ab", "1", NULL);
	ck_assert_int_eq(o.r, -EINVAL);
	ck_assert(strstr(o.why, "LISTEN_PID"));
	/* Two names for one descriptor, and none for one. */
	o = hand_over(FD_LISTENER, FD_NONE, "SELF", "1", "a:b");
	ck_assert_int_eq(o.r, -EINVAL);
	ck_assert(strstr(o.why, "LISTEN_FDNAMES"));
	o = hand_over(FD_LISTENER, FD_NONE, "SELF", "1", "");
	ck_assert_int_eq(o.r, -EINVAL);
	/* Two said, one open. */
	o = hand_over(FD_LISTENER, FD_NONE, "SELF", "2", NULL);
	ck_assert_int_eq(o.r, -EINVAL);
	ck_assert(o.open3 && !o.cloexec3);
	ck_assert(!o.env_left);
}
END_TEST

/* A descriptor that is not a listening Unix stream socket is not served
 * on. */
START_TEST(test_not_a_listener)
{
	struct outcome o = hand_over(FD_PIPE, FD_NONE, "SELF", "1", NULL);

	ck_assert_int_eq(o.r, -ENOTSOCK);
	ck_assert_int_eq(o.fd, -1);
	o = hand_over(FD_DGRAM, FD_NONE, "SELF", "1", NULL);
	ck_assert_int_eq(o.r, -ENOTSOCK);
	ck_assert(!o.env_left);
}
END_TEST

/* Receive one datagram from s (bounded wait: the message was sent
 * before this is called). */
static void expect_datagram(int s, const char *want)
{
	char buf[64];
	ssize_t n = recv(s, buf, sizeof(buf) - 1, MSG_DONTWAIT);

	ck_assert_int_ge(n, 0);
	buf[n] = '\0';
	ck_assert_str_eq(buf, want);
}

/* READY=1 and STOPPING=1 reach a path and an abstract NOTIFY_SOCKET, and
 * the variable is gone from the environment. */
START_TEST(test_notify)
{
	char *dir = test_tmpdir("notify");
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	char abs_name[64];
	int s = socket(AF_UNIX, SOCK_DGRAM, 0);

	snprintf(a.sun_path, sizeof(a.sun_path), "%s/notify", dir);
	ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	setenv("NOTIFY_SOCKET", a.sun_path, 1);
	ck_assert_int_eq(service_notify_init(), 1);
	ck_assert_ptr_null(getenv("NOTIFY_SOCKET"));
	ck_assert_int_eq(service_notify("READY=1"), 0);
	ck_assert_int_eq(service_notify("STOPPING=1"), 0);
	expect_datagram(s, "READY=1");
	expect_datagram(s, "STOPPING=1");
	close(s);

	s = socket(AF_UNIX, SOCK_DGRAM, 0);
	snprintf(abs_name, sizeof(abs_name), "spd-test-notify-%d",
		 (int)getpid());
	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	memcpy(a.sun_path + 1, abs_name, strlen(abs_name));
	ck_assert_int_eq(
	    bind(s, (struct sockaddr *)&a,
		 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			     strlen(abs_name))),
	    0);
	setenv("NOTIFY_SOCKET", "@", 1);
	ck_assert_int_eq(service_notify_init(), -EINVAL);
	ck_assert_int_eq(service_notify("READY=1"), 0); /* nowhere: no-op */
	{
		char v[80];

		snprintf(v, sizeof(v), "@%s", abs_name);
		setenv("NOTIFY_SOCKET", v, 1);
	}
	ck_assert_int_eq(service_notify_init(), 1);
	ck_assert_int_eq(service_notify("READY=1"), 0);
	expect_datagram(s, "READY=1");
	close(s);

	/* Relative paths are not a socket systemd made. */
	setenv("NOTIFY_SOCKET", "notify", 1);
	ck_assert_int_eq(service_notify_init(), -EINVAL);
	ck_assert_ptr_null(getenv("NOTIFY_SOCKET"));
	unsetenv("NOTIFY_SOCKET");
	ck_assert_int_eq(service_notify_init(), 0);
	test_rmrf(dir);
	free(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("service");
	TCase *tc = tcase_create("service");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_takes_passed_socket);
	tcase_add_test(tc, test_picks_named_socket);
	tcase_add_test(tc, test_other_pid_ignored);
	tcase_add_test(tc, test_malformed_refused);
	tcase_add_test(tc, test_not_a_listener);
	tcase_add_test(tc, test_notify);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

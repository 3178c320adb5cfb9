/*
 * The run's network (--net none, loopback, host) and the host's Unix
 * sockets (sandboxd/linux/mount.c covers the pathname sockets a run could
 * otherwise reach): real listeners on the host that no run may reach, and
 * the run's own that it may.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/util.h"
#include "daemon/sandbox/sbx.h"
#include "sandboxd/linux/mount.h"
#include "tests/lib/sbxtest.h"
#include "tests/lib/testlib.h"

START_TEST(network_none_and_loopback)
{
	struct sbxt_fixture f;
	struct sbxt_outcome o;
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	char code[1024];
	int lfd, cfd;

	if (access("/usr/bin/python3", X_OK) < 0)
		TEST_SKIP("needs /usr/bin/python3");
	sbxt_setup(&f, NULL);
	char *none[] = {"/usr/bin/python3", "-c",
			"import socket\n"
			"try:\n"
			"  socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
			"  print('inet-allowed')\n"
			"except OSError as e:\n"
			"  print('refused', e.errno)\n",
			NULL};
	struct sbx_spec sp;
	sbxt_spec_init(&f, &sp, none);
	sbxt_run(&f, &sp, &o);
	SBXT_REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
	ck_assert_msg(strstr(o.out.data, "refused"), "out: %s err: %s",
		      o.out.data, o.err.data);
	sbxt_outcome_free(&o);

	/* A listener on the host's loopback that the run must not reach. */
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(lfd, 0);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(lfd, 4), 0);
	ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&sa, &sl), 0);
	snprintf(code, sizeof(code),
		 "import socket\n"
		 "s = socket.socket(); s.bind(('127.0.0.1', 0))\n"
		 "if s.getsockname()[1] == %d:\n"
		 "  s = socket.socket(); s.bind(('127.0.0.1', 0))\n"
		 "s.listen(1)\n"
		 "c = socket.create_connection(s.getsockname())\n"
		 "a, _ = s.accept(); c.sendall(b'ping')\n"
		 "print('loop', a.recv(4).decode())\n"
		 "try:\n"
		 "  socket.create_connection(('127.0.0.1', %d), timeout=2)\n"
		 "  print('host-reached')\n"
		 "except OSError as e:\n"
		 "  print('host-unreachable', e.errno)\n",
		 ntohs(sa.sin_port), ntohs(sa.sin_port));
	char *loop[] = {"/usr/bin/python3", "-c", code, NULL};
	sbxt_spec_init(&f, &sp, loop);
	sp.net = SBX_NET_LOOPBACK;
	sbxt_run(&f, &sp, &o);
	ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
	ck_assert_msg(strstr(o.out.data, "loop ping"), "out: %s err: %s",
		      o.out.data, o.err.data);
	/* The run's own listener never takes the host listener's port (it
	 * would answer the probe inside the run's namespace). */
	cfd = accept(lfd, NULL, NULL);
	ck_assert_msg(cfd < 0 && errno == EAGAIN,
		      "the host's listener got a connection: %s", o.out.data);
	ck_assert_msg(!strstr(o.out.data, "host-reached"),
		      "the run reached 127.0.0.1:%d: %s", ntohs(sa.sin_port),
		      o.out.data);
	close(lfd);
	sbxt_outcome_free(&o);
	sbxt_teardown(&f);
}
END_TEST

/* A listening pathname socket at path that anyone may connect to (so that
 * DAC, which refuses nobody most real daemons' sockets, is not what
 * stops the run).  Returns the listening descriptor. */
static int listen_unix(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_uint_lt(strlen(path), sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path) + 1);
	unlink(path);
	ck_assert_msg(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0,
		      "bind %s: %s", path, strerror(errno));
	ck_assert_int_eq(listen(fd, 8), 0);
	chmod(path, 0777);
	return fd;
}

/* Whether this process can connect to the socket at path. */
static bool can_connect(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	ck_assert_int_ge(fd, 0);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

/* Run python3 connecting to path in net mode net; returns its output
 * ("connected" or "refused ERRNO"), malloc'd. */
static char *run_connect(struct sbxt_fixture *f, const char *path, int net)
{
	char code[PATH_MAX + 256];
	struct sbxt_outcome o;
	struct sbx_spec sp;
	char *out;

	snprintf(code, sizeof(code),
		 "import socket\n"
		 "s = socket.socket(socket.AF_UNIX)\n"
		 "try:\n"
		 "  s.connect('%s')\n"
		 "  print('connected')\n"
		 "except OSError as e:\n"
		 "  print('refused', e.errno)\n",
		 path);
	char *argv[] = {"/usr/bin/python3", "-c", code, NULL};
	sbxt_spec_init(f, &sp, argv);
	sp.net = net;
	sbxt_run(f, &sp, &o);
	ck_assert_msg(o.error_code == NULL, "%s: %s", o.error_code,
		      o.error_msg);
	out = strdup(o.out.data ? o.out.data : "");
	ck_assert_msg(strstr(out, "connected") || strstr(out, "refused"),
		      "out: %s err: %s", out, o.err.data);
	sbxt_outcome_free(&o);
	return out;
}

/*
 * --net host keeps the host's network, not its /run: the Docker daemon's
 * socket, the system bus and /run/user/<uid> (spd's own socket, the
 * ssh-agent) live there.  A real listener in the host's /run must be
 * unreachable, while the resolver's configuration still reads the same.
 */
START_TEST(host_mode_hides_run_sockets)
{
	struct sbxt_fixture f;
	struct sbxt_outcome o;
	char path[64], *out, *host_resolv;
	int lfd;

	if (geteuid() != 0)
		TEST_SKIP("needs root to plant a socket in the host's /run");
	if (access("/usr/bin/python3", X_OK) < 0)
		TEST_SKIP("needs /usr/bin/python3");
	sbxt_setup(&f, NULL);
	char probe[] = "true";
	sbxt_run_sh(&f, probe, &o);
	SBXT_REQUIRE_SANDBOX(&o);
	sbxt_outcome_free(&o);
	snprintf(path, sizeof(path), "/run/spd-test-%d.sock", (int)getpid());
	lfd = listen_unix(path);
	/* The control: outside the sandbox the socket answers. */
	ck_assert(can_connect(path));
	out = run_connect(&f, path, SBX_NET_HOST);
	ck_assert_msg(strstr(out, "connected") == NULL,
		      "a host-mode run reached %s", path);
	free(out);

	/* Name resolution still has its configuration. */
	host_resolv = test_read_file("/etc/resolv.conf");
	if (host_resolv) {
		char *argv[] = {"/bin/cat", "/etc/resolv.conf", NULL};
		struct sbx_spec sp;

		sbxt_spec_init(&f, &sp, argv);
		sp.net = SBX_NET_HOST;
		sbxt_run(&f, &sp, &o);
		ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
		ck_assert_str_eq(o.out.data ? o.out.data : "", host_resolv);
		sbxt_outcome_free(&o);
		free(host_resolv);
	}
	close(lfd);
	unlink(path);
	sbxt_teardown(&f);
}
END_TEST

/*
 * A pathname socket outside the writable paths, in no known socket
 * directory (an ssh-agent or a daemon someone started by hand): the run
 * must not reach it, while a socket inside the workspace is the run's.
 */
START_TEST(stray_unix_socket_covered)
{
	struct sbxt_fixture f;
	struct sbxt_outcome o;
	char dir[PATH_MAX], path[PATH_MAX + 16], inside[PATH_MAX + 16];
	char *out;
	int lfd, ifd;

	if (access("/usr/bin/python3", X_OK) < 0)
		TEST_SKIP("needs /usr/bin/python3");
	if (sbxt_outside_is_private())
		TEST_SKIP("no writable directory outside /tmp and /var/tmp; "
			  "set SPD_TEST_OUTSIDE");
	sbxt_setup(&f, NULL);
	char probe[] = "true";
	sbxt_run_sh(&f, probe, &o);
	SBXT_REQUIRE_SANDBOX(&o);
	sbxt_outcome_free(&o);
	snprintf(dir, sizeof(dir), "%s/agent-dir", f.outside);
	ck_assert_int_eq(mkdir(dir, 0777), 0);
	chmod(dir, 0777);
	snprintf(path, sizeof(path), "%s/agent.sock", dir);
	lfd = listen_unix(path);
	ck_assert(can_connect(path));
	snprintf(inside, sizeof(inside), "%s/ws.sock", f.ws);
	ifd = listen_unix(inside);

	for (int net = SBX_NET_NONE; net <= SBX_NET_LOOPBACK; net++) {
		out = run_connect(&f, path, net);
		ck_assert_msg(strstr(out, "connected") == NULL,
			      "a run (net %d) reached %s", net, path);
		free(out);
	}
	/* The positive control: the same client reaches the workspace's. */
	out = run_connect(&f, inside, SBX_NET_NONE);
	ck_assert_msg(strstr(out, "connected") != NULL,
		      "the workspace's socket was refused: %s", out);
	free(out);
	close(lfd);
	close(ifd);
	sbxt_teardown(&f);
}
END_TEST

/* More stray sockets than a plan covers: the run is refused, never run
 * with some left open. */
START_TEST(too_many_sockets_refused)
{
	struct sbxt_fixture f;
	struct sbxt_outcome o;
	char path[PATH_MAX + 32], marker[PATH_MAX + 16], script[PATH_MAX + 32];
	int fds[MOUNTPLAN_SOCKETS_MAX + 1];

	if (sbxt_outside_is_private())
		TEST_SKIP("no writable directory outside /tmp and /var/tmp; "
			  "set SPD_TEST_OUTSIDE");
	sbxt_setup(&f, NULL);
	char probe[] = "true";
	sbxt_run_sh(&f, probe, &o);
	SBXT_REQUIRE_SANDBOX(&o);
	sbxt_outcome_free(&o);
	for (size_t i = 0; i < ARRAY_SIZE(fds); i++) {
		snprintf(path, sizeof(path), "%s/s%zu.sock", f.outside, i);
		fds[i] = listen_unix(path);
	}
	snprintf(marker, sizeof(marker), "%s/ran", f.ws);
	snprintf(script, sizeof(script), "touch %s", marker);
	sbxt_run_sh(&f, script, &o);
	ck_assert_ptr_nonnull(o.error_code);
	ck_assert_str_eq(o.error_code, "SANDBOX-UNAVAILABLE");
	ck_assert_ptr_nonnull(strstr(o.error_msg, "Unix sockets"));
	ck_assert_msg(access(marker, F_OK) < 0, "the command ran");
	sbxt_outcome_free(&o);
	for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
		close(fds[i]);
	sbxt_teardown(&f);
}
END_TEST

static Suite *sandbox_net_suite(void)
{
	Suite *s = suite_create("sandbox_net");
	TCase *tc = tcase_create("net");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, network_none_and_loopback);
	tcase_add_test(tc, host_mode_hides_run_sockets);
	tcase_add_test(tc, stray_unix_socket_covered);
	tcase_add_test(tc, too_many_sockets_refused);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(sandbox_net_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

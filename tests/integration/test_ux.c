/*
 * What a new user trips over, seen from spctl: stopping spd, a stale pid
 * file, a runtime directory removed under spd, the exit codes and hints of
 * a user's mistakes, the help text, and the live views of approvals.  Each
 * test asserts what the user sees: the message, the exit code, the
 * process gone.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/spdproc.h"
#include "tests/lib/testlib.h"
#include "common/paths.h"
#include "common/util.h"

static bool has(const char *hay, const char *needle)
{
	return hay && strstr(hay, needle);
}

/* spctl with autostart on (the test harness's environment turns it off). */
static char *const autostart[] = {"SPD_NO_AUTOSTART=0", NULL};

static int exit_of(int st)
{
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Whether pid has exited: reaped, or a zombie (an autostarted spd's
 * parent may be a subreaper that has not reaped it yet). */
static bool gone(pid_t pid)
{
	char path[64], *stat, *p;
	bool z;
	int st;

	if (waitpid(pid, &st, WNOHANG) == pid)
		return true;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	stat = test_read_file(path);
	p = stat ? strrchr(stat, ')') : NULL;
	z = !p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X';
	free(stat);
	return z;
}

static pid_t pidfile_pid(struct test_spd *t)
{
	char *p = paths_join(t->runtime, "spd.pid");
	char *s = test_read_file(p);
	pid_t pid = s ? (pid_t)atoi(s) : 0;

	free(p);
	free(s);
	return pid;
}

START_TEST(test_stop_stops_spd)
{
	struct test_spd t;
	char *out = NULL, *err = NULL, *reply;
	pid_t pid;
	int st, fd;

	test_spd_prepare(&t, NULL);
	test_spd_start(&t);
	pid = t.pid;
	/* Only the operator stops spd. */
	fd = test_spd_connect(&t);
	reply = test_rpc_on(&t, fd,
			    "0000000000000000000000000000000000000000000000000"
			    "000000000000000",
			    "daemon.stop", NULL, 5000);
	TEST_ASSERT_CODE(reply, "UNAUTHORIZED");
	free(reply);
	close(fd);
	ck_assert_msg(!gone(pid), "spd stopped for a wrong token");
	st = test_spctl(&t, (char *[]){"stop", NULL}, NULL, &out, &err);
	ck_assert_msg(exit_of(st) == 0 && has(out, "stopped"),
		      "spctl stop: %d %s %s", st, out, err);
	ck_assert_msg(gone(pid), "spctl stop returned but spd %d runs",
		      (int)pid);
	t.pid = 0;
	free(out), free(err);
	/* A second stop: nothing runs, and spctl did not start one. */
	st = test_spctl(&t, (char *[]){"stop", NULL}, autostart, &out, &err);
	ck_assert_msg(exit_of(st) == 0 && has(out, "spd is not running"),
		      "second spctl stop: %d %s %s", st, out, err);
	ck_assert_msg(pidfile_pid(&t) == 0, "spctl stop started spd");
	free(out), free(err);
	test_spd_cleanup(&t);
}
END_TEST

/* A pid file naming a live process that is not spd (here a sleep) never
 * reads as a running spd, and neither spd nor spctl touches it. */
START_TEST(test_stale_pidfile_not_spd)
{
	struct test_spd t;
	char *out = NULL, *err = NULL, *p, txt[32];
	pid_t other, pid;
	int st;

	test_spd_prepare(&t, NULL);
	other = fork();
	ck_assert_int_ge(other, 0);
	if (other == 0) {
		execlp("sleep", "sleep", "60", (char *)NULL);
		_exit(127);
	}
	ck_assert_int_eq(mkdir(t.runtime, 0700) == 0 || errno == EEXIST, 1);
	p = paths_join(t.runtime, "spd.pid");
	snprintf(txt, sizeof(txt), "%d\n", (int)other);
	test_write_file(p, txt);
	free(p);
	st = test_spctl(&t, (char *[]){"stop", NULL}, NULL, &out, &err);
	ck_assert_msg(exit_of(st) == 0 && has(out, "spd is not running") &&
			  has(out, "not spd"),
		      "spctl stop with a stale pid file: %d %s %s", st, out,
		      err);
	ck_assert_msg(!gone(other), "spctl stop killed a process not spd");
	free(out), free(err);
	/* spctl's autostart is not misled either: spd starts. */
	st = test_spctl(&t, (char *[]){"ping", NULL}, autostart, &out, &err);
	ck_assert_msg(exit_of(st) == 0 && has(out, "pong"),
		      "autostart with a stale pid file: %d %s %s", st, out,
		      err);
	free(out), free(err);
	pid = pidfile_pid(&t);
	ck_assert_msg(pid > 0 && pid != other, "spd did not write its pid");
	st = test_spctl(&t, (char *[]){"stop", NULL}, NULL, &out, &err);
	ck_assert_msg(exit_of(st) == 0 && has(out, "stopped"),
		      "spctl stop: %d %s %s", st, out, err);
	ck_assert_msg(gone(pid), "spd %d still runs", (int)pid);
	ck_assert_msg(!gone(other), "stopping spd killed another process");
	free(out), free(err);
	kill(other, SIGKILL);
	waitpid(other, NULL, 0);
	test_spd_cleanup(&t);
}
END_TEST

/*
 * The runtime directory removed under a running spd (a logout's clean-up,
 * rm -rf): the next spctl gets an spd that answers, not a refusal naming
 * one socket path as both spds', and the old spd is gone.
 */
START_TEST(test_runtime_dir_removed)
{
	struct test_spd t;
	char *out = NULL, *err = NULL;
	pid_t old, pid;
	int st;

	test_spd_prepare(&t, NULL);
	test_spd_start(&t);
	old = t.pid;
	test_rmrf(t.runtime);
	st = test_spctl(&t, (char *[]){"ping", NULL}, autostart, &out, &err);
	ck_assert_msg(exit_of(st) == 0 && has(out, "pong"),
		      "spctl after the runtime dir was removed: %d %s %s", st,
		      out, err);
	free(out), free(err);
	for (int i = 0; i < 100 && !gone(old); i++)
		usleep(100 * 1000);
	ck_assert_msg(gone(old), "the spd that lost its socket still runs");
	t.pid = 0;
	pid = pidfile_pid(&t);
	ck_assert_msg(pid > 0 && pid != old, "no new spd");
	st = test_spctl(&t, (char *[]){"stop", NULL}, NULL, &out, &err);
	ck_assert_msg(exit_of(st) == 0 && gone(pid), "spctl stop: %d %s %s", st,
		      out, err);
	free(out), free(err);
	test_spd_cleanup(&t);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ux");
	TCase *tc = tcase_create("stop");
	SRunner *sr;
	int failed;

	signal(SIGPIPE, SIG_IGN);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_stop_stops_spd);
	tcase_add_test(tc, test_stale_pidfile_not_spd);
	tcase_add_test(tc, test_runtime_dir_removed);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

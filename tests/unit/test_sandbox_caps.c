/*
 * What a run's command holds (sandboxd/linux/caps.c, spawn.c): securebits
 * set and locked, and a process limit of its own, counted in a user
 * namespace of the run's, owned by the run's uid.
 */
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/nsfs.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "daemon/sandbox/sbx.h"
#include "proto/sandbox.h"
#include "tests/lib/sbxtest.h"
#include "tests/lib/testlib.h"

/*
 * The run's securebits are set and locked (NOROOT, NO_CAP_AMBIENT_RAISE,
 * KEEP_CAPS and NO_SETUID_FIXUP locked off), also when sandboxd is root
 * and switches the run to an unprivileged uid.  /proc/self/status does
 * not show them, so the run asks prctl itself.
 */
START_TEST(securebits_locked)
{
	struct sbxt_fixture f;
	struct sbxt_outcome o;
	char *argv[] = {"/usr/bin/python3", "-c",
			"import ctypes\n"
			"print(ctypes.CDLL(None).prctl(27, 0, 0, 0, 0))\n",
			NULL};
	struct sbx_spec sp;
	long bits;

	if (access("/usr/bin/python3", X_OK) < 0)
		TEST_SKIP("needs /usr/bin/python3");
	sbxt_setup(&f, NULL);
	sbxt_spec_init(&f, &sp, argv);
	sbxt_run(&f, &sp, &o);
	SBXT_REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
	ck_assert_msg(o.out.data, "no output: %s", o.err.data);
	bits = strtol(o.out.data, NULL, 10);
	/* SECBIT_NOROOT|_LOCKED, NO_SETUID_FIXUP_LOCKED, KEEP_CAPS_LOCKED,
	 * NO_CAP_AMBIENT_RAISE|_LOCKED (linux/securebits.h). */
	ck_assert_msg((bits & 0xeb) == 0xeb, "securebits 0x%lx", bits);
	sbxt_outcome_free(&o);
	sbxt_teardown(&f);
}
END_TEST

/*
 * A run's process limit is its own.  The kernel counts RLIMIT_NPROC per
 * user namespace and uid: were a run's command left in the host's user
 * namespace as root's run uid (nobody), its limit would count every
 * process of that uid on the host and of every other run, and a fork
 * bomb in one run, or a host service running as nobody, would leave the
 * next run unable to start (exec: EAGAIN).  Here the host holds more
 * processes of the run's uid (40) than either run's limit, a first run
 * forks up to its limit (30) and holds its children, and a second run
 * with a lower limit (20) still starts: the kernel refuses a process
 * only once its count is already above the limit, so in one shared
 * count either would have been refused.  The limit still stops the
 * first.
 */
#define NPROC_LIMIT_A 30
#define NPROC_LIMIT_B 20
#define NPROC_HOST 40

static char nproc_fill[] = "import os, time\n"
			   "n = 0\n"
			   "while n < 200:\n"
			   "    try:\n"
			   "        p = os.fork()\n"
			   "    except OSError:\n"
			   "        break\n"
			   "    if p == 0:\n"
			   "        time.sleep(60)\n"
			   "        os._exit(0)\n"
			   "    n += 1\n"
			   "print('full', n, flush=True)\n"
			   "time.sleep(2)\n";

/* NPROC_HOST processes of uid on the host, paused; their pids in pids. */
static void nproc_host_fill(uid_t uid, pid_t *pids)
{
	int p[2];
	char c;

	ck_assert_int_eq(pipe(p), 0);
	for (int i = 0; i < NPROC_HOST; i++) {
		pids[i] = fork();
		ck_assert_int_ge(pids[i], 0);
		if (pids[i] == 0) {
			close(p[0]);
			if (getuid() != uid && (setgroups(0, NULL) < 0 ||
						setresgid(uid, uid, uid) < 0 ||
						setresuid(uid, uid, uid) < 0))
				_exit(1);
			if (write(p[1], "x", 1) != 1)
				_exit(1);
			for (;;)
				pause();
		}
	}
	close(p[1]);
	for (int i = 0; i < NPROC_HOST; i++)
		ck_assert_int_eq(read(p[0], &c, 1), 1);
	close(p[0]);
}

/* The owner of the user namespace of a process whose command line holds
 * tag, or -1 when none is found. */
static long userns_owner_of(const char *tag)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	long owner = -1;

	ck_assert_ptr_nonnull(d);
	while (owner < 0 && (e = readdir(d))) {
		char path[300], buf[4096];
		uid_t uid;
		ssize_t n;
		int fd;

		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		for (ssize_t i = 0; i < n; i++)
			if (!buf[i])
				buf[i] = ' ';
		buf[n] = 0;
		if (!strstr(buf, tag))
			continue;
		snprintf(path, sizeof(path), "/proc/%s/ns/user", e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (ioctl(fd, NS_GET_OWNER_UID, &uid) == 0)
			owner = uid;
		close(fd);
	}
	closedir(d);
	return owner;
}

START_TEST(process_limit_per_run)
{
	struct sbxt_fixture f;
	struct sbxt_outcome a, b;
	char tag[64];
	char *argv_a[] = {"/usr/bin/python3", "-c", nproc_fill, tag, NULL};
	char *argv_b[] = {"/bin/echo", "second run", NULL};
	struct sbx_spec sp;
	pid_t host[NPROC_HOST];
	long n = -1;

	if (access("/usr/bin/python3", X_OK) < 0)
		TEST_SKIP("needs /usr/bin/python3");
	/* As root a run is uid 65534 on the host; else the user's own. */
	uid_t run_uid = geteuid() == 0 ? 65534 : geteuid();
	long owner;

	snprintf(tag, sizeof(tag), "nproc-%d-%ld", (int)getpid(),
		 (long)time(NULL));
	nproc_host_fill(run_uid, host);
	sbxt_setup(&f, NULL);
	sbxt_spec_init(&f, &sp, argv_a);
	sp.rlimits[SBXP_RLIM_NPROC] = NPROC_LIMIT_A;
	memset(&a, 0, sizeof(a));
	ck_assert_int_eq(sbx_run(f.s, &sp, &sbxt_cbs, &a, NULL), 0);
	while (!a.done && !(a.out.data && strchr(a.out.data, '\n')))
		uv_run(&f.loop, UV_RUN_ONCE);
	if (a.done)
		SBXT_REQUIRE_SANDBOX(&a);
	ck_assert_msg(a.out.data, "the first run did not start: %s %s (%s)",
		      a.error_code ? a.error_code : "",
		      a.error_msg ? a.error_msg : "", a.err.data);
	ck_assert_int_eq(sscanf(a.out.data, "full %ld", &n), 1);
	ck_assert_msg(n > 0 && n < NPROC_LIMIT_A,
		      "the first run forked %ld processes under a limit of %d",
		      n, NPROC_LIMIT_A);
	/* Its user namespace is owned by the run uid, so that what the
	 * kernel counts per uid up the namespaces (inotify instances and
	 * the like) is charged to that uid on the host, never to root's. */
	owner = userns_owner_of(tag);
	ck_assert_msg(owner == (long)run_uid,
		      "the run's user namespace is owned by uid %ld, not %u",
		      owner, (unsigned)run_uid);
	/* The first run holds its limit's worth of processes meanwhile. */
	sbxt_spec_init(&f, &sp, argv_b);
	sp.rlimits[SBXP_RLIM_NPROC] = NPROC_LIMIT_B;
	sbxt_run(&f, &sp, &b);
	ck_assert_msg(b.error_code == NULL, "%s: %s", b.error_code,
		      b.error_msg);
	ck_assert_msg(b.exit_code == 0 && b.out.data &&
			  !strcmp(b.out.data, "second run\n"),
		      "the second run: exit %d, %s", b.exit_code,
		      b.err.data ? b.err.data : "(no stderr)");
	while (!a.done)
		uv_run(&f.loop, UV_RUN_ONCE);
	ck_assert_int_eq(a.exit_code, 0);
	sbxt_outcome_free(&a);
	sbxt_outcome_free(&b);
	sbxt_teardown(&f);
	for (int i = 0; i < NPROC_HOST; i++) {
		kill(host[i], SIGKILL);
		waitpid(host[i], NULL, 0);
	}
}
END_TEST

static Suite *sandbox_caps_suite(void)
{
	Suite *s = suite_create("sandbox_caps");
	TCase *tc = tcase_create("caps");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, securebits_locked);
	tcase_add_test(tc, process_limit_per_run);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(sandbox_caps_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

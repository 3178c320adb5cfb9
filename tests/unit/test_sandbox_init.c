/*
 * sandboxd-init (sandboxd/linux/init.h), the run's pid 1 after its setup:
 * run alone under a harness (its record of an empty run, its wait for
 * release, a spare's init ready only once it holds nothing), and in
 * sandboxd's runs through spd's client (inits let go after EXITED, no
 * capability, default signal dispositions for the command).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "daemon/sandbox/sbx.h"
#include "sandboxd/linux/init.h"
#include "tests/lib/sbxtest.h"
#include "tests/lib/testlib.h"

/*
 * sandboxd-init (sandboxd/linux/init.h) with script as its command, under
 * a harness, *outer, that waits for it and exits 0 when init did; with
 * pidns, init is pid 1 of a pid namespace of its own.  Returns the read
 * end of init's status pipe; *init is init's pid here.
 */
static int init_start(const char *script, bool pidns, pid_t *outer, pid_t *init)
{
	int p[2], pp[2];

	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(pp, O_CLOEXEC), 0);
	*outer = fork();
	ck_assert_int_ge(*outer, 0);
	if (*outer == 0) {
		pid_t ipid;
		int st;

		if (pidns && geteuid() != 0 && unshare(CLONE_NEWUSER) < 0)
			_exit(90);
		if (pidns && unshare(CLONE_NEWPID) < 0)
			_exit(91);
		ipid = fork();
		if (ipid == 0) {
			size_t n = (size_t)(sbx_init_elf_end - sbx_init_elf);
			int mfd = memfd_create("sandboxd-init", MFD_CLOEXEC);
			char arg[24], *av[] = {"sandboxd-init", arg, NULL};
			char *ev[] = {NULL};
			pid_t cmd = fork();

			if (cmd == 0) {
				execl("/bin/sh", "sh", "-c", script, NULL);
				_exit(127);
			}
			if (mfd < 0 ||
			    write(mfd, sbx_init_elf, n) != (ssize_t)n ||
			    dup2(p[1], FD_STATUS) < 0)
				_exit(92);
			snprintf(arg, sizeof(arg), "%d", (int)cmd);
			syscall(SYS_execveat, mfd, "", av, ev, AT_EMPTY_PATH);
			_exit(93);
		}
		/* The status pipe's reader is the caller alone: its close
		 * is what lets an empty run's init go. */
		close(p[0]);
		if (ipid < 0 ||
		    write(pp[1], &ipid, sizeof(ipid)) != sizeof(ipid) ||
		    waitpid(ipid, &st, 0) < 0)
			_exit(94);
		_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 95);
	}
	close(p[1]);
	close(pp[1]);
	ck_assert_int_eq(read(pp[0], init, sizeof(*init)), sizeof(*init));
	close(pp[0]);
	return p[0];
}

/* init_start's harness has ended, and init with it, exiting 0. */
static void init_harness_ended(pid_t outer)
{
	int st;

	ck_assert_int_eq(waitpid(outer, &st, 0), outer);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "init's harness ended with status %d", st);
}

/*
 * sandboxd-init's record: the command's wait status, and REC_STATUS_EMPTY
 * only when init, pid 1 of a pid namespace, was alone once the command
 * ended, for sandboxd then sends EXITED without waiting for init's exit.
 * script runs as init's child; with pidns false init is not pid 1.
 * Returns the record (kind 0: none).
 */
static struct rec init_record(const char *script, bool pidns)
{
	struct rec r = {0, 0, 0, 0};
	pid_t outer, init;
	int fd = init_start(script, pidns, &outer, &init);

	if (read(fd, &r, sizeof(r)) != sizeof(r))
		r.kind = 0;
	close(fd);
	init_harness_ended(outer);
	return r;
}

/*
 * An empty run's init waits, after its record, until its reader closes
 * the status pipe (init.h, INIT_LINGER_MS: sandboxd does 1 ms after the
 * run's EXITED, and the run's namespaces come down then): seen blocked in ppoll, its
 * harness still waiting for it, then gone once the pipe is closed.  A
 * run that is not empty ends at once (leftover_gone_at_exit).
 */
START_TEST(empty_run_init_waits_for_its_release)
{
	pid_t outer, init;
	int fd = init_start("exit 0", true, &outer, &init), st;
	struct rec r = {0, 0, 0, 0};
	char path[64], *t;

	ck_assert_int_eq(read(fd, &r, sizeof(r)), sizeof(r));
	ck_assert_int_eq(r.kind, REC_STATUS);
	ck_assert_int_eq(r.layer, REC_STATUS_EMPTY);
	/* Still there a while after its record, its harness waiting for
	 * it, and (where this user may read it) blocked in its ppoll. */
	usleep(100 * 1000);
	ck_assert_msg(waitpid(outer, &st, WNOHANG) == 0,
		      "init did not wait after an empty run's record");
	snprintf(path, sizeof(path), "/proc/%d/syscall", (int)init);
	if ((t = test_read_file(path)) != NULL)
		ck_assert_msg(atol(t) == SYS_ppoll, "init in system call %s",
			      t);
	free(t);
	close(fd);
	/* Let go: gone well before it would have ended on its own. */
	for (long long t0 = sbxt_mono_ms();
	     sbxt_mono_ms() - t0 < INIT_LINGER_MS / 2;) {
		if (waitpid(outer, &st, WNOHANG) == outer)
			break;
		usleep(1000);
	}
	ck_assert_msg(kill(outer, 0) < 0 && errno == ESRCH,
		      "init still there %d ms after its release",
		      INIT_LINGER_MS / 2);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "init's harness ended with status %d", st);
}
END_TEST

/* Not let go, the same init still ends on its own (INIT_LINGER_MS): a
 * sandboxd that lost the pipe's end leaves no init behind. */
START_TEST(empty_run_init_ends_unreleased)
{
	pid_t outer, init;
	int fd = init_start("exit 0", true, &outer, &init);
	struct rec r = {0, 0, 0, 0};

	ck_assert_int_eq(read(fd, &r, sizeof(r)), sizeof(r));
	ck_assert_int_eq(r.layer, REC_STATUS_EMPTY);
	init_harness_ended(outer);
	close(fd);
}
END_TEST

START_TEST(init_says_when_the_run_is_empty)
{
	struct rec r;

	r = init_record("exit 3", true);
	ck_assert_int_eq(r.kind, REC_STATUS);
	ck_assert(WIFEXITED(r.info) && WEXITSTATUS(r.info) == 3);
	ck_assert_int_eq(r.layer, REC_STATUS_EMPTY);

	/* A child that ended before the command: reaped, and still empty. */
	r = init_record("(exit 0) & sleep 0.2; exit 5", true);
	ck_assert_int_eq(r.kind, REC_STATUS);
	ck_assert(WIFEXITED(r.info) && WEXITSTATUS(r.info) == 5);
	ck_assert_int_eq(r.layer, REC_STATUS_EMPTY);

	/* A process left running: not empty (init's exit kills it). */
	r = init_record("sleep 30 & exit 0", true);
	ck_assert_int_eq(r.kind, REC_STATUS);
	ck_assert(WIFEXITED(r.info) && WEXITSTATUS(r.info) == 0);
	ck_assert_int_eq(r.layer, 0);

	/* Not pid 1: what the command leaves is no child of init's. */
	r = init_record("exit 0", false);
	ck_assert_int_eq(r.kind, REC_STATUS);
	ck_assert_int_eq(r.layer, 0);
}
END_TEST

/*
 * A spare's init (init.h, FD_READY) says it is ready only once it holds
 * nothing: the command's process beside it waits for that byte before
 * it takes a run, so no command runs beside an init that still holds
 * privileges.  Here the ready pipe is full, so that init blocks in its
 * write of the byte: it must have dropped every capability and set
 * no_new_privs by then.  Then it reports the command's status as ever.
 */
START_TEST(spare_init_ready_after_drop)
{
	int rp[2], st[2], pp[2], fl;
	pid_t outer, init = 0;
	char path[64], *status = NULL, buf[4096], last = 0;
	struct rec r = {0, 0, 0, 0};
	ssize_t n;

	memset(buf, 'x', sizeof(buf));
	ck_assert_int_eq(pipe2(rp, O_CLOEXEC | O_NONBLOCK), 0);
	while (write(rp[1], buf, sizeof(buf)) > 0)
		;
	ck_assert_int_eq(errno, EAGAIN);
	/* Blocking again, both ends: init's write waits for room. */
	for (int i = 0; i < 2; i++) {
		fl = fcntl(rp[i], F_GETFL);
		ck_assert_int_eq(fcntl(rp[i], F_SETFL, fl & ~O_NONBLOCK), 0);
	}
	ck_assert_int_eq(pipe2(st, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(pp, O_CLOEXEC), 0);
	outer = fork();
	ck_assert_int_ge(outer, 0);
	if (outer == 0) {
		int s2;

		/* Unprivileged: init holds every capability of a user
		 * namespace of its own, as a spare's does. */
		if (geteuid() != 0 && unshare(CLONE_NEWUSER) < 0)
			_exit(90);
		init = fork();
		if (init == 0) {
			size_t len = (size_t)(sbx_init_elf_end - sbx_init_elf);
			int mfd = memfd_create("sandboxd-init", MFD_CLOEXEC);
			char arg[24], *av[] = {"sandboxd-init", arg,
					       INIT_ARG_READY, NULL};
			char *ev[] = {NULL};
			pid_t cmd = fork();

			if (cmd == 0)
				_exit(7);
			if (mfd < 0 ||
			    write(mfd, sbx_init_elf, len) != (ssize_t)len ||
			    dup2(rp[1], FD_READY) < 0 ||
			    dup2(st[1], FD_STATUS) < 0)
				_exit(92);
			snprintf(arg, sizeof(arg), "%d", (int)cmd);
			syscall(SYS_execveat, mfd, "", av, ev, AT_EMPTY_PATH);
			_exit(93);
		}
		if (init < 0 ||
		    write(pp[1], &init, sizeof(init)) != sizeof(init) ||
		    waitpid(init, &s2, 0) < 0)
			_exit(94);
		_exit(WIFEXITED(s2) ? WEXITSTATUS(s2) : 95);
	}
	close(rp[1]);
	close(st[1]);
	close(pp[1]);
	ck_assert_int_eq(read(pp[0], &init, sizeof(init)), sizeof(init));
	close(pp[0]);
	/* Until init is blocked in the write of its byte.  A user who may
	 * not read its system call (it is not dumpable) sees it asleep once
	 * executed: nothing it does before that write can block. */
	snprintf(path, sizeof(path), "/proc/%d/syscall", (int)init);
	for (int i = 0; i < 10000; i++) {
		char *sc = test_read_file(path), *txt = NULL, sp[64];
		bool in_write = sc && atol(sc) == SYS_write;

		if (!sc) {
			snprintf(sp, sizeof(sp), "/proc/%d/status", (int)init);
			txt = test_read_file(sp);
			in_write =
			    txt &&
			    strncmp(txt, "Name:\tmemfd:sandboxd", 20) == 0 &&
			    strstr(txt, "\nState:\tS");
		}
		free(sc);
		free(txt);
		if (in_write)
			break;
		usleep(1000);
	}
	snprintf(path, sizeof(path), "/proc/%d/status", (int)init);
	status = test_read_file(path);
	ck_assert_ptr_nonnull(status);
	ck_assert_msg(strstr(status, "State:\tS") &&
			  strstr(status, "CapEff:\t0000000000000000\n") &&
			  strstr(status, "CapPrm:\t0000000000000000\n") &&
			  strstr(status, "NoNewPrivs:\t1\n"),
		      "init ready before it dropped its privileges: %s",
		      status);
	free(status);
	/* Its byte comes last, after what filled the pipe (EOF: init and
	 * its harness are gone). */
	while ((n = read(rp[0], buf, sizeof(buf))) > 0)
		last = buf[n - 1];
	ck_assert_int_eq(last, INIT_READY_BYTE);
	close(rp[0]);
	ck_assert_int_eq(read(st[0], &r, sizeof(r)), sizeof(r));
	close(st[0]);
	ck_assert_int_eq(r.kind, REC_STATUS);
	ck_assert(WIFEXITED(r.info) && WEXITSTATUS(r.info) == 7);
	init_harness_ended(outer);
}
END_TEST

/* The /proc status of the run's init on the host: sandboxd's child that
 * has executed sandboxd-init and dropped what it holds (no_new_privs set
 * is the last step), or NULL (malloc'd). */
static char *init_status_of(pid_t sandboxd)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	char *found = NULL, *st;

	if (!d || sandboxd <= 0) {
		if (d)
			closedir(d);
		return NULL;
	}
	while (!found && (e = readdir(d))) {
		st = sbxt_init_status(e->d_name, sandboxd);
		if (st && strstr(st, "NoNewPrivs:\t1\n"))
			found = st;
		else
			free(st);
	}
	closedir(d);
	return found;
}

/* sandboxd's children that run sandboxd-init and have no child of their
 * own: the inits of empty runs that are over, not yet let go (init.h,
 * INIT_LINGER_MS).  A spare's init has the process that will become its
 * command, a run's init its command until that ends. */
static int lone_inits(pid_t sandboxd)
{
	char path[600], *st, *kids;
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d))) {
		if (!(st = sbxt_init_status(e->d_name, sandboxd)))
			continue;
		free(st);
		snprintf(path, sizeof(path), "/proc/%s/task/%s/children",
			 e->d_name, e->d_name);
		kids = test_read_file(path);
		/* Gone since (NULL): not there any more. */
		n += kids && !kids[0];
		free(kids);
	}
	closedir(d);
	return n;
}

/*
 * An empty run's init outlives the run's EXITED by 1 ms, until spd has
 * answered (sandboxd/main.c, release_inits): then it exits and the run's
 * namespaces come down.
 * Looked for over half the time that init would wait on its own: a
 * sandboxd that never let its inits go fails here.
 */
START_TEST(empty_runs_inits_let_go_after_exited)
{
	struct sbxt_fixture f;
	struct sbxt_outcome o;
	int n = -1;

	sbxt_setup(&f, NULL);
	for (int i = 0; i < 3; i++) {
		char s1[] = "true";

		sbxt_run_sh(&f, s1, &o);
		SBXT_REQUIRE_SANDBOX(&o);
		ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
		ck_assert_int_eq(o.exit_code, 0);
		sbxt_outcome_free(&o);
	}
	for (long long t0 = sbxt_mono_ms();
	     sbxt_mono_ms() - t0 < INIT_LINGER_MS / 2;) {
		if ((n = lone_inits(sbx_pid(f.s))) == 0)
			break;
		usleep(10 * 1000);
	}
	ck_assert_msg(n == 0,
		      "%d inits of runs that are over still there %d ms after",
		      n, INIT_LINGER_MS / 2);
	sbxt_teardown(&f);
}
END_TEST

/* The command starts with default signal dispositions (sandboxd ignores
 * SIGPIPE), and the run's init holds no capability but CAP_KILL, which
 * reaches only the run's own pid namespace, and no_new_privs. */
START_TEST(signals_default_init_unprivileged)
{
	struct sbxt_fixture f;
	struct sbxt_outcome o;
	char script[] = "grep -E '^(SigIgn|SigBlk):' /proc/self/status; "
			"yes | head -n 1; sleep 1";

	/* A real-time signal ignored here stays ignored in sandboxd (libuv
	 * resets only the first 31 when it spawns it): sandboxd must not
	 * pass it on. */
	signal(SIGRTMIN + 5, SIG_IGN);
	sbxt_setup(&f, NULL);
	signal(SIGRTMIN + 5, SIG_DFL);
	{
		/* The init's state, read from the host while the run lasts
		 * (the run itself no longer sees its pid 1). */
		char *argv[] = {"/bin/sh", "-c", script, NULL};
		struct sbx_spec sp;
		char *init = NULL;

		sbxt_spec_init(&f, &sp, argv);
		memset(&o, 0, sizeof(o));
		ck_assert_int_eq(sbx_run(f.s, &sp, &sbxt_cbs, &o, NULL), 0);
		/* The last state read while the run lasts: a read at its
		 * very start may come before init has set its handler. */
		while (!o.done) {
			char *now;

			uv_run(&f.loop, UV_RUN_NOWAIT);
			if ((now = init_status_of(sbx_pid(f.s)))) {
				free(init);
				init = now;
			}
			usleep(2000);
		}
		SBXT_REQUIRE_SANDBOX(&o);
		ck_assert_msg(init, "no sandboxd-init seen on the host");
		/* As root CAP_KILL alone (1 << 5), to pass SIGTERM on to the
		 * command, whose uid is another (init.c, drop_privileges);
		 * else none.  SIGTERM (1 << 14 in SigCgt) is the one signal
		 * it catches. */
		const char *caps = geteuid() == 0 ? "0000000000000020\n"
						  : "0000000000000000\n";
		char prm[64], eff[64];

		snprintf(prm, sizeof(prm), "CapPrm:\t%s", caps);
		snprintf(eff, sizeof(eff), "CapEff:\t%s", caps);
		ck_assert_msg(strstr(init, prm) && strstr(init, eff) &&
				  strstr(init, "CapInh:\t0000000000000000\n") &&
				  strstr(init, "SigCgt:\t0000000000004000\n") &&
				  strstr(init, "NoNewPrivs:\t1\n"),
			      "init: %s", init);
		free(init);
	}
	ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
	ck_assert_ptr_nonnull(o.out.data);
	ck_assert_msg(strstr(o.out.data, "SigIgn:\t0000000000000000\n") &&
			  strstr(o.out.data, "SigBlk:\t0000000000000000\n"),
		      "%s", o.out.data);
	/* `yes` died of SIGPIPE quietly rather than seeing EPIPE. */
	ck_assert_msg(!o.err.data || !strstr(o.err.data, "Broken pipe"), "%s",
		      o.err.data);
	ck_assert_int_eq(o.exit_code, 0);
	sbxt_outcome_free(&o);
	sbxt_teardown(&f);
}
END_TEST

static Suite *sandbox_init_suite(void)
{
	Suite *s = suite_create("sandbox_init");
	TCase *tc = tcase_create("init");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, init_says_when_the_run_is_empty);
	tcase_add_test(tc, empty_run_init_waits_for_its_release);
	tcase_add_test(tc, empty_run_init_ends_unreleased);
	tcase_add_test(tc, spare_init_ready_after_drop);
	tcase_add_test(tc, signals_default_init_unprivileged);
	tcase_add_test(tc, empty_runs_inits_let_go_after_exited);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(sandbox_init_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/*
 * sandboxd through spd's supervisor (daemon/sandbox/sbx.c), on a real uv loop
 * with the built build/sandboxd.  Each test asserts what a user cares
 * about on the host: the output, the exit code, the file outside left
 * alone, the canary not read, the marker never created.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/nsfs.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "common/buf.h"
#include "common/trace.h"
#include "common/util.h"
#include "daemon/session/linkwatch.h"
#include "daemon/sandbox/sbx.h"
#include "proto/sandbox.h"
#include "sandboxd/linux/child.h"
#include "sandboxd/linux/init.h"
#include "sandboxd/linux/mount.h"
#include "sandboxd/linux/spawn.h"
#include "tests/lib/benchutil.h"
#include "tests/lib/testlib.h"

/*
 * Where files that must lie outside the run's writable and private
 * areas go: the root bind makes them read-only there, which is what the
 * tests check.  Not /tmp or /var/tmp, which runs get privately.  As root
 * /var; otherwise SPD_TEST_OUTSIDE (a directory the user may write, on
 * the root file system), else /var/tmp, where the tests that need a
 * visible outside say they are skipped.
 */
static const char *outside_base(void)
{
	const char *e = getenv("SPD_TEST_OUTSIDE");

	if (e && e[0] == '/')
		return e;
	return geteuid() == 0 ? "/var" : "/var/tmp";
}

static bool outside_is_private(void)
{
	return !strcmp(outside_base(), "/var/tmp");
}

struct outcome {
	struct buf out, err;
	bool done;
	int exit_code, term_signal;
	bool timed_out, cancelled;
	uint64_t dropped[2];
	char *error_code, *error_msg;
	int nwarn;
	char warnings[1024]; /* joined by "; " */
};

struct fixture {
	uv_loop_t loop;
	struct sbx *s;
	char *ws;
	char *outside; /* a directory under OUTSIDE_BASE, mode 0777 */
	bool closed;
};

static void on_output(void *data, int stream, const char *buf, size_t len)
{
	struct outcome *o = data;

	buf_append(stream == 1 ? &o->out : &o->err, buf, len);
}

static void on_done(void *data, const struct sbx_result *r)
{
	struct outcome *o = data;

	o->done = true;
	o->exit_code = r->exit_code;
	o->term_signal = r->term_signal;
	o->timed_out = r->timed_out;
	o->cancelled = r->cancelled;
	o->dropped[0] = r->bytes_dropped[0];
	o->dropped[1] = r->bytes_dropped[1];
	o->error_code = r->error ? strdup(sbxp_err_code(r->error)) : NULL;
	o->error_msg = r->error_msg ? strdup(r->error_msg) : NULL;
	for (o->nwarn = 0; r->warnings[o->nwarn]; o->nwarn++) {
		size_t n = strlen(o->warnings);

		snprintf(o->warnings + n, sizeof(o->warnings) - n, "%s%s",
			 n ? "; " : "", r->warnings[o->nwarn]);
	}
}

static const struct sbx_cbs cbs = {on_output, on_done, NULL};

static void outcome_free(struct outcome *o)
{
	buf_free(&o->out);
	buf_free(&o->err);
	free(o->error_code);
	free(o->error_msg);
}

/* sandboxd makes the next run's spare 1 ms after a run's EXITED
 * (sandboxd/main.c, SBXD_SPARE_DELAY_NS): a run started after this pause
 * takes the spare instead of a clone of its own.  The pause is ample and
 * nothing is timed by it. */
static void wait_for_spare(void)
{
	usleep(100 * 1000);
}

static void fx_setup(struct fixture *f, const char *sandboxd)
{
	char *prog = sandboxd ? strdup(sandboxd) : test_prog("sandboxd");
	char tmpl[PATH_MAX];

	snprintf(tmpl, sizeof(tmpl), "%s/spd-test-sbx-XXXXXX", outside_base());
	memset(f, 0, sizeof(*f));
	ck_assert_int_eq(uv_loop_init(&f->loop), 0);
	ck_assert_int_eq(sbx_start(&f->loop, prog, &f->s), 0);
	free(prog);
	f->ws = test_tmpdir("sbx");
	ck_assert_ptr_nonnull(mkdtemp(tmpl));
	f->outside = strdup(tmpl);
	chmod(f->outside, 0777);
}

static void on_closed(void *data)
{
	*(bool *)data = true;
}

static void fx_teardown(struct fixture *f)
{
	sbx_close(f->s, on_closed, &f->closed);
	while (!f->closed)
		uv_run(&f->loop, UV_RUN_ONCE);
	uv_run(&f->loop, UV_RUN_DEFAULT);
	ck_assert_int_eq(uv_loop_close(&f->loop), 0);
	test_rmrf(f->ws);
	test_rmrf(f->outside);
	free(f->ws);
	free(f->outside);
}

static char *default_env[] = {"PATH=/usr/local/bin:/usr/bin:/bin",
			      "LANG=C.UTF-8", NULL};

static void spec_init(struct fixture *f, struct sbx_spec *sp, char *const *argv)
{
	memset(sp, 0, sizeof(*sp));
	sp->argv = argv;
	sp->envp = default_env;
	sp->workspace = f->ws;
	sp->home = f->outside; /* never the operator's real home */
	sp->timeout_ms = 20000;
}

static void run(struct fixture *f, const struct sbx_spec *sp, struct outcome *o)
{
	memset(o, 0, sizeof(*o));
	ck_assert_int_eq(sbx_run(f->s, sp, &cbs, o, NULL), 0);
	while (!o->done)
		uv_run(&f->loop, UV_RUN_ONCE);
}

/* Run sh -c script in the workspace. */
static void run_sh(struct fixture *f, char *script, struct outcome *o)
{
	char *argv[] = {"/bin/sh", "-c", script, NULL};
	struct sbx_spec sp;

	spec_init(f, &sp, argv);
	run(f, &sp, o);
}

/* The host refuses what sandboxd needs entirely (no user namespaces as a
 * non-root user): the other tests cannot run, say so. */
static bool unavailable(const struct outcome *o)
{
	if (!o->error_code || strcmp(o->error_code, "SANDBOX-UNAVAILABLE"))
		return false;
	return !strncmp(o->error_msg, "user namespaces:", 16) ||
	       layer_landlock_abi() <= 0;
}

#define REQUIRE_SANDBOX(o)                                                     \
	do {                                                                   \
		if (unavailable(o))                                            \
			TEST_SKIP_LAYER("sandbox",                             \
					"sandbox unavailable here: %s",        \
					(o)->error_msg);                       \
	} while (0)

START_TEST(output_and_exit_codes)
{
	struct fixture f;
	struct outcome o;

	fx_setup(&f, NULL);
	char s1[] = "echo hello; echo oops >&2; exit 3";
	run_sh(&f, s1, &o);
	REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s: %s", o.error_code,
		      o.error_msg);
	ck_assert_str_eq(o.out.data, "hello\n");
	ck_assert_str_eq(o.err.data, "oops\n");
	ck_assert_int_eq(o.exit_code, 3);
	ck_assert(!o.timed_out);
	outcome_free(&o);

	char *missing[] = {"no-such-command-spd", NULL};
	struct sbx_spec sp;
	spec_init(&f, &sp, missing);
	run(&f, &sp, &o);
	ck_assert_int_eq(o.exit_code, 127);
	ck_assert_ptr_null(o.error_code);
	outcome_free(&o);
	fx_teardown(&f);
}
END_TEST

/*
 * merge_stderr: the command's stdout and stderr are one pipe, so lines it
 * writes to each back to back arrive as stream 1 in the order written;
 * with a stdin pipe beside it (spctl acp's terminals) the third descriptor
 * is still the command's stdin.  Without it the same run's streams come
 * apart, each in order (so the first half can fail).
 */
START_TEST(merged_output_with_stdin)
{
	char script[] = "read x; echo \"$x\"; i=1; while [ $i -le 100 ]; do "
			"echo o$i; echo e$i >&2; i=$((i+1)); done; exit 4";
	char *argv[] = {"/bin/sh", "-c", script, NULL};
	struct buf want = {0}, want_o = {0}, want_e = {0};
	struct fixture f;
	struct outcome o;
	struct sbx_spec sp;
	struct sbx_run *h = NULL;
	char line[32];

	buf_append(&want, "in\n", 3);
	buf_append(&want_o, "in\n", 3);
	for (int i = 1; i <= 100; i++) {
		int n = snprintf(line, sizeof(line), "o%d\n", i);

		buf_append(&want, line, (size_t)n);
		buf_append(&want_o, line, (size_t)n);
		n = snprintf(line, sizeof(line), "e%d\n", i);
		buf_append(&want, line, (size_t)n);
		buf_append(&want_e, line, (size_t)n);
	}
	buf_append(&want, "", 1);
	buf_append(&want_o, "", 1);
	buf_append(&want_e, "", 1);
	fx_setup(&f, NULL);
	for (int merged = 1; merged >= 0; merged--) {
		spec_init(&f, &sp, argv);
		sp.stdin_pipe = true;
		sp.merge_stderr = merged;
		memset(&o, 0, sizeof(o));
		ck_assert_int_eq(sbx_run(f.s, &sp, &cbs, &o, &h), 0);
		ck_assert_int_eq(sbx_run_input(h, "in\n", 3), 0);
		sbx_run_input_close(h);
		while (!o.done)
			uv_run(&f.loop, UV_RUN_ONCE);
		REQUIRE_SANDBOX(&o);
		ck_assert_msg(o.error_code == NULL, "%s: %s", o.error_code,
			      o.error_msg);
		ck_assert_int_eq(o.exit_code, 4);
		buf_append(&o.out, "", 1);
		buf_append(&o.err, "", 1);
		if (merged) {
			ck_assert_str_eq(o.out.data, want.data);
			ck_assert_str_eq(o.err.data, "");
		} else {
			ck_assert_str_eq(o.out.data, want_o.data);
			ck_assert_str_eq(o.err.data, want_e.data);
		}
		ck_assert(o.dropped[0] == 0 && o.dropped[1] == 0);
		outcome_free(&o);
	}
	fx_teardown(&f);
	buf_free(&want);
	buf_free(&want_o);
	buf_free(&want_e);
}
END_TEST

/* The descriptors a RUN carries follow its flags, and the decoder takes
 * SBXP_RUN_MERGED with any other flag but no bit it does not know. */
START_TEST(run_flags_decoding)
{
	static char buf[SBXP_MSG_MAX];
	struct sbxp_run *m = (struct sbxp_run *)(void *)buf;
	const char *argv[] = {"/bin/true", NULL}, *none[] = {NULL};
	const char *const *lists[SBXP_L__COUNT] = {argv, none, none, none,
						   none, none, none, none};
	struct sbxp_run_view v;
	long len;

	ck_assert_uint_eq(sbxp_run_nfds(0), 2);
	ck_assert_uint_eq(sbxp_run_nfds(SBXP_RUN_STDIN), 3);
	ck_assert_uint_eq(sbxp_run_nfds(SBXP_RUN_MERGED), 1);
	ck_assert_uint_eq(sbxp_run_nfds(SBXP_RUN_MERGED | SBXP_RUN_STDIN), 2);
	memset(buf, 0, sizeof(buf));
	m->flags = SBXP_RUN__FLAGS & ~SBXP_RUN_LINKS_LISTED;
	len = sbxp_run_encode(m, "/ws", NULL, NULL, lists);
	ck_assert_int_gt(len, 0);
	ck_assert_int_eq(sbxp_run_decode(buf, (size_t)len, &v), 0);
	ck_assert_uint_eq(v.msg->flags & SBXP_RUN_MERGED, SBXP_RUN_MERGED);
	sbxp_run_view_free(&v);
	m->flags = SBXP_RUN_MERGED | (SBXP_RUN__FLAGS + 1);
	ck_assert_int_eq(sbxp_run_decode(buf, (size_t)len, &v), -SPD_EPROTO);
}
END_TEST

START_TEST(deadline_kills_everything)
{
	struct fixture f;
	struct outcome o;
	char script[PATH_MAX + 128], marker[PATH_MAX];

	fx_setup(&f, NULL);
	snprintf(marker, sizeof(marker), "%s/marker", f.ws);
	/* A background process that ignores SIGTERM and detaches, then
	 * would create the marker after the deadline. */
	snprintf(script, sizeof(script),
		 "(trap '' TERM HUP; setsid sh -c 'sleep 1; touch %s' &) ;"
		 " sleep 60",
		 marker);
	char *argv[] = {"/bin/sh", "-c", script, NULL};
	struct sbx_spec sp;
	spec_init(&f, &sp, argv);
	sp.timeout_ms = 300;
	run(&f, &sp, &o);
	REQUIRE_SANDBOX(&o);
	ck_assert(o.timed_out);
	ck_assert_int_eq(o.term_signal, SIGKILL);
	/* Well past the background process's sleep. */
	usleep(1600 * 1000);
	ck_assert_msg(access(marker, F_OK) < 0,
		      "a process outlived its run and made the marker");
	outcome_free(&o);
	fx_teardown(&f);
}
END_TEST

/* Monotonic milliseconds, for a test's deadlines. */
static long long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

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
	for (long long t0 = mono_ms(); mono_ms() - t0 < INIT_LINGER_MS / 2;) {
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

/*
 * A process the command leaves running, with its output elsewhere, so
 * that only EXITED ends the run for spd: it is gone by the time the run's
 * result arrives, and changes nothing after.
 */
START_TEST(leftover_gone_at_exit)
{
	struct fixture f;
	struct outcome o;
	char script[2 * PATH_MAX + 256], file[PATH_MAX];
	struct stat a, b;

	fx_setup(&f, NULL);
	snprintf(file, sizeof(file), "%s/ticks", f.ws);
	snprintf(script, sizeof(script),
		 "(setsid sh -c 'while :; do echo x >> %s; sleep 0.01; done' "
		 "</dev/null >/dev/null 2>&1 &); "
		 "while [ ! -s %s ]; do sleep 0.01; done; exit 4",
		 file, file);
	char *argv[] = {"/bin/sh", "-c", script, NULL};
	struct sbx_spec sp;
	spec_init(&f, &sp, argv);
	run(&f, &sp, &o);
	REQUIRE_SANDBOX(&o);
	ck_assert_int_eq(o.exit_code, 4);
	ck_assert_int_eq(stat(file, &a), 0);
	usleep(300 * 1000);
	ck_assert_int_eq(stat(file, &b), 0);
	ck_assert_msg(a.st_size > 0 && a.st_size == b.st_size,
		      "the leftover still wrote after EXITED (%lld, then %lld "
		      "bytes)",
		      (long long)a.st_size, (long long)b.st_size);
	outcome_free(&o);
	fx_teardown(&f);
}
END_TEST

START_TEST(files_outside_and_inside)
{
	struct fixture f;
	struct outcome o;
	char script[4 * PATH_MAX + 128], outside[PATH_MAX], inside[PATH_MAX];
	struct stat st;

	fx_setup(&f, NULL);
	snprintf(outside, sizeof(outside), "%s/outside.txt", f.outside);
	snprintf(inside, sizeof(inside), "%s/new.txt", f.ws);
	test_write_file(outside, "original\n");
	chmod(outside, 0666);
	snprintf(script, sizeof(script),
		 "echo changed > %s; rm -f %s; echo made > %s; "
		 "mkdir %s/sub && echo x > %s/sub/y",
		 outside, outside, inside, f.ws, f.ws);
	run_sh(&f, script, &o);
	REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
	char *c = test_read_file(outside);
	ck_assert_ptr_nonnull(c);
	ck_assert_str_eq(c, "original\n");
	free(c);
	c = test_read_file(inside);
	ck_assert_ptr_nonnull(c);
	ck_assert_str_eq(c, "made\n");
	free(c);
	/* Owned by the operator (us) on the host, whatever uid ran it. */
	ck_assert_int_eq(stat(inside, &st), 0);
	ck_assert_int_eq(st.st_uid, geteuid());
	char sub[PATH_MAX];
	snprintf(sub, sizeof(sub), "%s/sub/y", f.ws);
	ck_assert_int_eq(stat(sub, &st), 0);
	ck_assert_int_eq(st.st_uid, geteuid());
	outcome_free(&o);
	fx_teardown(&f);
}
END_TEST

/*
 * A workspace below a directory others cannot search (a root shell's
 * /root/project): as root the run's uid must still reach and write it,
 * and what it writes comes back owned by the operator.
 */
START_TEST(workspace_below_private_dir)
{
	struct fixture f;
	struct outcome o;
	char tmpl[PATH_MAX], ws[PATH_MAX + 8];
	char path[PATH_MAX + 32], script[] = "echo made > made.txt && pwd";
	char *argv[] = {"/bin/sh", "-c", script, NULL};
	struct sbx_spec sp;
	struct stat st;

	fx_setup(&f, NULL);
	snprintf(tmpl, sizeof(tmpl), "%s/spd-test-priv-XXXXXX", outside_base());
	ck_assert_ptr_nonnull(mkdtemp(tmpl));
	chmod(tmpl, 0700);
	snprintf(ws, sizeof(ws), "%s/ws", tmpl);
	ck_assert_int_eq(mkdir(ws, 0700), 0);
	spec_init(&f, &sp, argv);
	sp.workspace = ws;
	run(&f, &sp, &o);
	REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
	ck_assert_msg(o.exit_code == 0, "err: %s", o.err.data);
	snprintf(path, sizeof(path), "%s/made.txt", ws);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_uid, geteuid());
	outcome_free(&o);
	test_rmrf(tmpl);
	fx_teardown(&f);
}
END_TEST

/*
 * spd hides its own state dir, config dir and runtime dir from every run,
 * yet a session's workspace lives in the state dir (worktrees/ID) and a
 * state dir may sit inside the config dir.  The run must get its
 * workspace, writable, and nothing else of the hidden directories: not
 * the journal, not another session's worktree, not the token.
 */
static void hidden_parent_case(const char *parent)
{
	struct fixture f;
	struct outcome o;
	char base[PATH_MAX], cfg[PATH_MAX + 16], state[PATH_MAX + 32];
	char ws[PATH_MAX + 64], other[PATH_MAX + 64], path[PATH_MAX + 96];
	char script[8 * PATH_MAX + 512];
	char *argv[] = {"/bin/sh", "-c", script, NULL};
	char *hidden[3];
	struct sbx_spec sp;
	struct stat st;

	fx_setup(&f, NULL);
	snprintf(base, sizeof(base), "%s/spd-test-veil-XXXXXX", parent);
	ck_assert_ptr_nonnull(mkdtemp(base));
	/* config/ holds state/, which holds worktrees/ws and another
	 * session's worktree; all 0700 as spd makes them. */
	snprintf(cfg, sizeof(cfg), "%s/cfg", base);
	snprintf(state, sizeof(state), "%s/state", cfg);
	snprintf(ws, sizeof(ws), "%s/worktrees/mine", state);
	snprintf(other, sizeof(other), "%s/worktrees/other", state);
	ck_assert_int_eq(mkdir(cfg, 0700), 0);
	ck_assert_int_eq(mkdir(state, 0700), 0);
	snprintf(path, sizeof(path), "%s/worktrees", state);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	ck_assert_int_eq(mkdir(ws, 0700), 0);
	ck_assert_int_eq(mkdir(other, 0700), 0);
	snprintf(path, sizeof(path), "%s/operator.token", cfg);
	test_write_file(path, "CANARY-token-51c2\n");
	snprintf(path, sizeof(path), "%s/journal.db", state);
	test_write_file(path, "CANARY-journal-51c2\n");
	snprintf(path, sizeof(path), "%s/secret.txt", other);
	test_write_file(path, "CANARY-other-51c2\n");
	snprintf(path, sizeof(path), "%s/mine.txt", ws);
	test_write_file(path, "mine-51c2\n");
	snprintf(script, sizeof(script),
		 "cat mine.txt; echo made > made.txt; "
		 "cat %s/operator.token %s/journal.db %s/secret.txt; "
		 "ls -a %s %s/worktrees; touch %s/planted",
		 cfg, state, other, cfg, state, state);
	hidden[0] = cfg;
	hidden[1] = state;
	hidden[2] = NULL;
	spec_init(&f, &sp, argv);
	sp.workspace = ws;
	sp.hidden = hidden;
	run(&f, &sp, &o);
	REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "refused: %s", o.error_msg);
	ck_assert_msg(o.out.data && strstr(o.out.data, "mine-51c2"),
		      "the workspace was not readable: %s / %s", o.out.data,
		      o.err.data);
	ck_assert_ptr_null(strstr(o.out.data, "CANARY"));
	ck_assert_ptr_null(strstr(o.out.data, "other"));
	ck_assert_ptr_null(strstr(o.out.data, "operator.token"));
	ck_assert_ptr_null(strstr(o.err.data ? o.err.data : "", "CANARY"));
	snprintf(path, sizeof(path), "%s/made.txt", ws);
	ck_assert_msg(stat(path, &st) == 0, "the workspace was not writable");
	ck_assert_int_eq(st.st_uid, geteuid());
	snprintf(path, sizeof(path), "%s/planted", state);
	ck_assert_msg(access(path, F_OK) < 0, "the run wrote the state dir");
	outcome_free(&o);
	test_rmrf(base);
	fx_teardown(&f);
}

START_TEST(workspace_inside_hidden_dir)
{
	/* On the host's file system, and in /tmp, which the run gets
	 * privately (the way down is made there, nothing to cover). */
	hidden_parent_case(outside_base());
	hidden_parent_case("/tmp");
}
END_TEST

START_TEST(credentials_hidden)
{
	struct fixture f;
	struct outcome o;
	char path[PATH_MAX], script[9 * PATH_MAX + 256];
	/* Coding agents' logins (an uncapped provider key or OAuth token). */
	static const char *const agent_logins[] = {
	    ".claude/.credentials.json", ".claude.json", ".codex/auth.json"};

	fx_setup(&f, NULL);
	/* HOME is f.outside: a .ssh with a readable canary, no .aws. */
	snprintf(path, sizeof(path), "%s/.ssh", f.outside);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/.ssh/id_rsa", f.outside);
	test_write_file(path, "CANARY-7f3e\n");
	chmod(path, 0644);
	snprintf(path, sizeof(path), "%s/.claude", f.outside);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/.codex", f.outside);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	for (size_t i = 0; i < ARRAY_SIZE(agent_logins); i++) {
		snprintf(path, sizeof(path), "%s/%s", f.outside,
			 agent_logins[i]);
		test_write_file(path, "{\"key\": \"CANARY-agent-login\"}\n");
		chmod(path, 0644);
	}
	snprintf(script, sizeof(script),
		 "cat %s/.ssh/id_rsa; ls -a %s/.ssh; mkdir -p %s/.aws; "
		 "echo k > %s/.aws/credentials; cat %s/.netrc; "
		 "cat %s/%s %s/%s %s/%s",
		 f.outside, f.outside, f.outside, f.outside, f.outside,
		 f.outside, agent_logins[0], f.outside, agent_logins[1],
		 f.outside, agent_logins[2]);
	run_sh(&f, script, &o);
	REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
	ck_assert_ptr_null(strstr(o.out.data ? o.out.data : "", "CANARY"));
	ck_assert_ptr_null(strstr(o.err.data ? o.err.data : "", "CANARY"));
	ck_assert_ptr_null(strstr(o.out.data ? o.out.data : "", "id_rsa"));
	snprintf(path, sizeof(path), "%s/.aws", f.outside);
	ck_assert_msg(access(path, F_OK) < 0, "the run created ~/.aws");
	outcome_free(&o);

	/* The workspace is the home directory: a missing credential dir
	 * cannot be planted either. */
	char *argv[] = {
	    "/bin/sh", "-c",
	    "mkdir -p .ssh; echo key > .ssh/authorized_keys; "
	    "echo token > .git-credentials; cat .ssh/authorized_keys",
	    NULL};
	struct sbx_spec sp;
	spec_init(&f, &sp, argv);
	sp.home = f.ws;
	run(&f, &sp, &o);
	ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
	snprintf(path, sizeof(path), "%s/.ssh/authorized_keys", f.ws);
	ck_assert_msg(access(path, F_OK) < 0,
		      "authorized_keys was planted: %s / %s", o.out.data,
		      o.err.data);
	snprintf(path, sizeof(path), "%s/.git-credentials", f.ws);
	char *c = test_read_file(path);
	ck_assert(c == NULL || strstr(c, "token") == NULL);
	free(c);
	/* What was made on the host to be covered has the kind the owner's
	 * tools expect: ~/.netrc or ~/.bash_history made a directory would
	 * break git, curl or the shell outside the sandbox. */
	static const char *const files[] = {
	    ".git-credentials", ".netrc", ".bash_history",
	    ".config/git/credentials", ".claude.json"};
	static const char *const dirs[] = {".ssh", ".aws", ".config/gh",
					   ".claude", ".codex"};
	struct stat st;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", f.ws, files[i]);
		ck_assert_msg(lstat(path, &st) == 0 && S_ISREG(st.st_mode) &&
				  st.st_size == 0,
			      "%s is not an empty file", files[i]);
	}
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", f.ws, dirs[i]);
		ck_assert_msg(lstat(path, &st) == 0 && S_ISDIR(st.st_mode),
			      "%s is not a directory", dirs[i]);
	}
	outcome_free(&o);
	fx_teardown(&f);
}
END_TEST

START_TEST(proc_shows_only_the_run)
{
	struct fixture f;
	struct outcome o;
	char script[256];

	fx_setup(&f, NULL);
	snprintf(script, sizeof(script),
		 "n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo $n; "
		 "test -e /proc/%d && echo host-visible",
		 (int)getpid());
	run_sh(&f, script, &o);
	REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
	/* init and the shell (and maybe a short-lived child). */
	ck_assert_msg(atoi(o.out.data) <= 3, "processes seen: %s", o.out.data);
	ck_assert_ptr_null(strstr(o.out.data, "host-visible"));
	outcome_free(&o);
	/* The run's pid 1 (a copy of sandboxd, then its init) is covered:
	 * its descriptors and status are not the command's to read, even
	 * in the moment before it makes itself undumpable. */
	run_sh(&f, "ls /proc/1/fd 2>&1; cat /proc/1/status 2>&1; echo end", &o);
	ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
	ck_assert_msg(o.out.data && strstr(o.out.data, "end"), "%s",
		      o.out.data);
	ck_assert_msg(!strstr(o.out.data, "socket:") &&
			  !strstr(o.out.data, "Name:"),
		      "pid 1 is visible: %s", o.out.data);
	outcome_free(&o);
	fx_teardown(&f);
}
END_TEST

START_TEST(network_none_and_loopback)
{
	struct fixture f;
	struct outcome o;
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	char code[1024];
	int lfd, cfd;

	if (access("/usr/bin/python3", X_OK) < 0)
		TEST_SKIP("needs /usr/bin/python3");
	fx_setup(&f, NULL);
	char *none[] = {"/usr/bin/python3", "-c",
			"import socket\n"
			"try:\n"
			"  socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
			"  print('inet-allowed')\n"
			"except OSError as e:\n"
			"  print('refused', e.errno)\n",
			NULL};
	struct sbx_spec sp;
	spec_init(&f, &sp, none);
	run(&f, &sp, &o);
	REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
	ck_assert_msg(strstr(o.out.data, "refused"), "out: %s err: %s",
		      o.out.data, o.err.data);
	outcome_free(&o);

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
	spec_init(&f, &sp, loop);
	sp.net = SBX_NET_LOOPBACK;
	run(&f, &sp, &o);
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
	outcome_free(&o);
	fx_teardown(&f);
}
END_TEST

START_TEST(environment_scrubbed)
{
	struct fixture f;
	struct outcome o;
	char *env[] = {"PATH=/usr/bin:/bin",
		       "FOO_API_KEY=sekrit-0a1b2c",
		       "GITHUB_TOKEN=ghp-secret-value",
		       "KEEP_ME=yes",
		       "NO_COLOR=0",
		       NULL};
	char *argv[] = {"env", NULL};
	struct sbx_spec sp;

	fx_setup(&f, NULL);
	spec_init(&f, &sp, argv);
	sp.envp = env;
	run(&f, &sp, &o);
	REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
	ck_assert_ptr_null(strstr(o.out.data, "sekrit"));
	ck_assert_ptr_null(strstr(o.out.data, "ghp-secret"));
	ck_assert_ptr_nonnull(strstr(o.out.data, "KEEP_ME=yes"));
	ck_assert_ptr_nonnull(strstr(o.out.data, "NO_COLOR=1"));
	ck_assert_ptr_null(strstr(o.out.data, "NO_COLOR=0"));
	outcome_free(&o);
	fx_teardown(&f);
}
END_TEST

START_TEST(output_cap)
{
	struct fixture f;
	struct outcome o;
	char *argv[] = {"/bin/sh", "-c",
			"head -c 5000 /dev/zero | tr '\\0' a; "
			"head -c 10 /dev/zero | tr '\\0' b >&2",
			NULL};
	struct sbx_spec sp;

	fx_setup(&f, NULL);
	spec_init(&f, &sp, argv);
	sp.output_cap = 1000;
	run(&f, &sp, &o);
	REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
	ck_assert_int_eq(o.dropped[0], 4000);
	ck_assert_int_eq(o.dropped[1], 0);
	ck_assert_ptr_nonnull(strstr(o.out.data, "the rest is dropped"));
	/* 1000 bytes kept, then the marker line. */
	ck_assert_int_eq(strspn(o.out.data, "a"), 1000);
	ck_assert_uint_lt(o.out.len, 1100);
	ck_assert_str_eq(o.err.data, "bbbbbbbbbb");
	outcome_free(&o);
	fx_teardown(&f);
}
END_TEST

/* True while a process whose command line is exactly argv0 arg runs. */
static bool process_running(const char *argv0, const char *arg)
{
	char want[256];
	size_t wlen;
	DIR *d = opendir("/proc");
	struct dirent *e;
	bool found = false;

	wlen =
	    (size_t)snprintf(want, sizeof(want), "%s%c%s", argv0, 0, arg) + 1;
	ck_assert_ptr_nonnull(d);
	while (!found && (e = readdir(d))) {
		char path[300], buf[256];
		ssize_t n;
		int fd;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, buf, sizeof(buf));
		close(fd);
		found = n == (ssize_t)wlen && !memcmp(buf, want, wlen);
	}
	closedir(d);
	return found;
}

struct kill_mid_run {
	struct sbx *s;
	const char *arg;
	bool seen; /* the command ran just before sandboxd was killed */
};

static void kill_sandboxd_mid_run(uv_timer_t *t)
{
	struct kill_mid_run *k = t->data;

	k->seen = process_running("sleep", k->arg);
	kill(sbx_pid(k->s), SIGKILL);
}

/* sandboxd killed mid-run: the run ends INTERNAL, its init and command
 * die with sandboxd (the parent-death signal survives init's exec into
 * sandboxd-init), and the next run gets a new sandboxd. */
START_TEST(sandboxd_restarts)
{
	struct fixture f;
	struct outcome o;
	uv_timer_t t;
	struct sbx_spec sp;
	char arg[32];
	char *argv[] = {"sleep", arg, NULL};
	struct kill_mid_run k = {.arg = arg};
	bool alive = true;

	/* A unique duration names the run's process on the host. */
	snprintf(arg, sizeof(arg), "30.%d", (int)getpid());
	fx_setup(&f, NULL);
	char s1[] = "true";
	run_sh(&f, s1, &o);
	REQUIRE_SANDBOX(&o);
	outcome_free(&o);

	spec_init(&f, &sp, argv);
	memset(&o, 0, sizeof(o));
	ck_assert_int_eq(sbx_run(f.s, &sp, &cbs, &o, NULL), 0);
	ck_assert_int_gt(sbx_pid(f.s), 0);
	uv_timer_init(&f.loop, &t);
	k.s = f.s;
	t.data = &k;
	uv_timer_start(&t, kill_sandboxd_mid_run, 500, 0);
	while (!o.done)
		uv_run(&f.loop, UV_RUN_ONCE);
	uv_close((uv_handle_t *)&t, NULL);
	ck_assert_ptr_nonnull(o.error_code);
	ck_assert_str_eq(o.error_code, "INTERNAL");
	ck_assert_ptr_nonnull(strstr(o.error_msg, "sandboxd died"));
	/* Control: the command was running when sandboxd was killed. */
	ck_assert_msg(k.seen, "`sleep %s` was not running after 500 ms", arg);
	for (int i = 0; i < 100 && (alive = process_running("sleep", arg)); i++)
		usleep(20 * 1000);
	ck_assert_msg(!alive, "`sleep %s` outlived sandboxd", arg);
	outcome_free(&o);

	char s2[] = "echo again";
	run_sh(&f, s2, &o);
	ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
	ck_assert_str_eq(o.out.data, "again\n");
	outcome_free(&o);
	fx_teardown(&f);
}
END_TEST

/* /proc/<pid>/status when that process is sandboxd's child executing
 * sandboxd-init, else NULL (malloc'd). */
static char *sandboxd_init_status(const char *pid, pid_t sandboxd)
{
	char path[300], *st, *ppid;

	if (pid[0] < '1' || pid[0] > '9')
		return NULL;
	snprintf(path, sizeof(path), "/proc/%s/status", pid);
	st = test_read_file(path);
	ppid = st ? strstr(st, "\nPPid:\t") : NULL;
	/* Executed from its memfd: named "memfd:sandboxd-init", cut to the
	 * 15 bytes a comm holds. */
	if (st && strncmp(st, "Name:\tmemfd:sandboxd", 20) == 0 && ppid &&
	    atoi(ppid + 7) == (int)sandboxd)
		return st;
	free(st);
	return NULL;
}

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
		st = sandboxd_init_status(e->d_name, sandboxd);
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
		if (!(st = sandboxd_init_status(e->d_name, sandboxd)))
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
	struct fixture f;
	struct outcome o;
	int n = -1;

	fx_setup(&f, NULL);
	for (int i = 0; i < 3; i++) {
		char s1[] = "true";

		run_sh(&f, s1, &o);
		REQUIRE_SANDBOX(&o);
		ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
		ck_assert_int_eq(o.exit_code, 0);
		outcome_free(&o);
	}
	for (long long t0 = mono_ms(); mono_ms() - t0 < INIT_LINGER_MS / 2;) {
		if ((n = lone_inits(sbx_pid(f.s))) == 0)
			break;
		usleep(10 * 1000);
	}
	ck_assert_msg(n == 0,
		      "%d inits of runs that are over still there %d ms after",
		      n, INIT_LINGER_MS / 2);
	fx_teardown(&f);
}
END_TEST

/* The command starts with default signal dispositions (sandboxd ignores
 * SIGPIPE), and the run's init holds no capability and no_new_privs. */
START_TEST(signals_default_init_unprivileged)
{
	struct fixture f;
	struct outcome o;
	char script[] = "grep -E '^(SigIgn|SigBlk):' /proc/self/status; "
			"yes | head -n 1; sleep 1";

	/* A real-time signal ignored here stays ignored in sandboxd (libuv
	 * resets only the first 31 when it spawns it): sandboxd must not
	 * pass it on. */
	signal(SIGRTMIN + 5, SIG_IGN);
	fx_setup(&f, NULL);
	signal(SIGRTMIN + 5, SIG_DFL);
	{
		/* The init's state, read from the host while the run lasts
		 * (the run itself no longer sees its pid 1). */
		char *argv[] = {"/bin/sh", "-c", script, NULL};
		struct sbx_spec sp;
		char *init = NULL;

		spec_init(&f, &sp, argv);
		memset(&o, 0, sizeof(o));
		ck_assert_int_eq(sbx_run(f.s, &sp, &cbs, &o, NULL), 0);
		while (!o.done) {
			uv_run(&f.loop, UV_RUN_NOWAIT);
			if (!init)
				init = init_status_of(sbx_pid(f.s));
			usleep(2000);
		}
		REQUIRE_SANDBOX(&o);
		ck_assert_msg(init, "no sandboxd-init seen on the host");
		ck_assert_msg(strstr(init, "CapPrm:\t0000000000000000\n") &&
				  strstr(init, "CapEff:\t0000000000000000\n") &&
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
	outcome_free(&o);
	fx_teardown(&f);
}
END_TEST

START_TEST(cancel_kills_the_run)
{
	struct fixture f;
	struct outcome o;
	struct sbx_spec sp;
	struct sbx_run *r;
	char *argv[] = {"sleep", "30", NULL};

	fx_setup(&f, NULL);
	spec_init(&f, &sp, argv);
	memset(&o, 0, sizeof(o));
	ck_assert_int_eq(sbx_run(f.s, &sp, &cbs, &o, &r), 0);
	sbx_run_cancel(r);
	while (!o.done)
		uv_run(&f.loop, UV_RUN_ONCE);
	REQUIRE_SANDBOX(&o);
	ck_assert(o.cancelled);
	ck_assert_int_eq(o.term_signal, SIGKILL);
	outcome_free(&o);
	fx_teardown(&f);
}
END_TEST

/*
 * Fail closed: a sandboxd started where it cannot create the namespaces
 * it needs (user namespaces capped at 0 in its own user namespace) must
 * refuse with SANDBOX-UNAVAILABLE, never run the command unconfined.
 */
START_TEST(fail_closed)
{
	struct fixture f;
	struct outcome o;
	char *tmp = test_tmpdir("sbxwrap"), wrapper[PATH_MAX], marker[PATH_MAX];
	char *prog = test_prog("sandboxd"), *script = NULL;
	char *probe[] = {"unshare", "--user", "--map-root-user", "true", NULL};

	if (test_run(probe, NULL, NULL, NULL) != 0) {
		test_rmrf(tmp);
		TEST_SKIP_LAYER("user_namespaces",
				"unshare --user is not allowed here");
	}
	snprintf(wrapper, sizeof(wrapper), "%s/sandboxd", tmp);
	ck_assert_int_ge(
	    asprintf(&script,
		     "#!/bin/sh\nexec unshare --user --map-root-user sh -c "
		     "'echo 0 > /proc/sys/user/max_user_namespaces && "
		     "exec %s'\n",
		     prog),
	    0);
	test_write_file(wrapper, script);
	chmod(wrapper, 0755);
	chmod(tmp, 0755);
	fx_setup(&f, wrapper);
	snprintf(marker, sizeof(marker), "%s/ran", f.ws);
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "touch %s", marker);
	run_sh(&f, cmd, &o);
	ck_assert_ptr_nonnull(o.error_code);
	ck_assert_str_eq(o.error_code, "SANDBOX-UNAVAILABLE");
	ck_assert_ptr_nonnull(o.error_msg);
	ck_assert_msg(access(marker, F_OK) < 0, "the command ran");
	outcome_free(&o);
	fx_teardown(&f);
	test_rmrf(tmp);
	free(tmp);
	free(prog);
	free(script);
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
static char *run_connect(struct fixture *f, const char *path, int net)
{
	char code[PATH_MAX + 256];
	struct outcome o;
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
	spec_init(f, &sp, argv);
	sp.net = net;
	run(f, &sp, &o);
	ck_assert_msg(o.error_code == NULL, "%s: %s", o.error_code,
		      o.error_msg);
	out = strdup(o.out.data ? o.out.data : "");
	ck_assert_msg(strstr(out, "connected") || strstr(out, "refused"),
		      "out: %s err: %s", out, o.err.data);
	outcome_free(&o);
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
	struct fixture f;
	struct outcome o;
	char path[64], *out, *host_resolv;
	int lfd;

	if (geteuid() != 0)
		TEST_SKIP("needs root to plant a socket in the host's /run");
	if (access("/usr/bin/python3", X_OK) < 0)
		TEST_SKIP("needs /usr/bin/python3");
	fx_setup(&f, NULL);
	char probe[] = "true";
	run_sh(&f, probe, &o);
	REQUIRE_SANDBOX(&o);
	outcome_free(&o);
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

		spec_init(&f, &sp, argv);
		sp.net = SBX_NET_HOST;
		run(&f, &sp, &o);
		ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
		ck_assert_str_eq(o.out.data ? o.out.data : "", host_resolv);
		outcome_free(&o);
		free(host_resolv);
	}
	close(lfd);
	unlink(path);
	fx_teardown(&f);
}
END_TEST

/*
 * A pathname socket outside the writable paths, in no known socket
 * directory (an ssh-agent or a daemon someone started by hand): the run
 * must not reach it, while a socket inside the workspace is the run's.
 */
START_TEST(stray_unix_socket_covered)
{
	struct fixture f;
	struct outcome o;
	char dir[PATH_MAX], path[PATH_MAX + 16], inside[PATH_MAX + 16];
	char *out;
	int lfd, ifd;

	if (access("/usr/bin/python3", X_OK) < 0)
		TEST_SKIP("needs /usr/bin/python3");
	if (outside_is_private())
		TEST_SKIP("no writable directory outside /tmp and /var/tmp; "
			  "set SPD_TEST_OUTSIDE");
	fx_setup(&f, NULL);
	char probe[] = "true";
	run_sh(&f, probe, &o);
	REQUIRE_SANDBOX(&o);
	outcome_free(&o);
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
	fx_teardown(&f);
}
END_TEST

/* More stray sockets than a plan covers: the run is refused, never run
 * with some left open. */
START_TEST(too_many_sockets_refused)
{
	struct fixture f;
	struct outcome o;
	char path[PATH_MAX + 32], marker[PATH_MAX + 16], script[PATH_MAX + 32];
	int fds[MOUNTPLAN_SOCKETS_MAX + 1];

	if (outside_is_private())
		TEST_SKIP("no writable directory outside /tmp and /var/tmp; "
			  "set SPD_TEST_OUTSIDE");
	fx_setup(&f, NULL);
	char probe[] = "true";
	run_sh(&f, probe, &o);
	REQUIRE_SANDBOX(&o);
	outcome_free(&o);
	for (size_t i = 0; i < ARRAY_SIZE(fds); i++) {
		snprintf(path, sizeof(path), "%s/s%zu.sock", f.outside, i);
		fds[i] = listen_unix(path);
	}
	snprintf(marker, sizeof(marker), "%s/ran", f.ws);
	snprintf(script, sizeof(script), "touch %s", marker);
	run_sh(&f, script, &o);
	ck_assert_ptr_nonnull(o.error_code);
	ck_assert_str_eq(o.error_code, "SANDBOX-UNAVAILABLE");
	ck_assert_ptr_nonnull(strstr(o.error_msg, "Unix sockets"));
	ck_assert_msg(access(marker, F_OK) < 0, "the command ran");
	outcome_free(&o);
	for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
		close(fds[i]);
	fx_teardown(&f);
}
END_TEST

/*
 * The held-out overlay: a host directory seen read-only inside the
 * workspace at a path the workspace does not have.  The run reads it,
 * cannot change it, can still write the workspace; the host's workspace
 * never gets the entry.
 */
START_TEST(ro_binds_overlay)
{
	struct fixture f;
	struct outcome o;
	char src[PATH_MAX], dst[PATH_MAX + 16], path[PATH_MAX + 32];
	char script[4 * PATH_MAX];
	struct sbx_spec sp;
	char *c;

	fx_setup(&f, NULL);
	snprintf(src, sizeof(src), "%s/sealed", f.outside);
	ck_assert_int_eq(mkdir(src, 0700), 0);
	snprintf(path, sizeof(path), "%s/check.txt", src);
	test_write_file(path, "HELDOUT-42\n");
	snprintf(path, sizeof(path), "%s/a.txt", f.ws);
	test_write_file(path, "A-FILE\n");
	snprintf(path, sizeof(path), "%s/sub", f.ws);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/link", f.ws);
	ck_assert_int_eq(symlink("a.txt", path), 0);
	snprintf(dst, sizeof(dst), "%s/.spd-heldout", f.ws);
	char *binds[] = {src, dst, NULL};
	snprintf(script, sizeof(script),
		 "cat %s/check.txt; "
		 "echo x > %s/check.txt && echo wrote-heldout; "
		 "echo y > %s/new && echo created-heldout; "
		 "cat link; echo z > sub/z.txt && echo wrote-sub; "
		 "echo changed > a.txt && echo wrote-a; "
		 "touch newtop 2>/dev/null && echo created-top; true",
		 dst, dst, dst);
	char *argv[] = {"/bin/sh", "-c", script, NULL};
	spec_init(&f, &sp, argv);
	sp.ro_binds = binds;
	run(&f, &sp, &o);
	REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s: %s", o.error_code,
		      o.error_msg);
	ck_assert_msg(strstr(o.out.data, "HELDOUT-42"), "out: %s err: %s",
		      o.out.data, o.err.data);
	ck_assert_ptr_null(strstr(o.out.data, "wrote-heldout"));
	ck_assert_ptr_null(strstr(o.out.data, "created-heldout"));
	/* The rest of the workspace is as before: readable, writable. */
	ck_assert_ptr_nonnull(strstr(o.out.data, "A-FILE"));
	ck_assert_ptr_nonnull(strstr(o.out.data, "wrote-sub"));
	ck_assert_ptr_nonnull(strstr(o.out.data, "wrote-a"));
	outcome_free(&o);
	ck_assert_msg(access(dst, F_OK) < 0 && errno == ENOENT,
		      "the host's workspace got %s", dst);
	snprintf(path, sizeof(path), "%s/check.txt", src);
	c = test_read_file(path);
	ck_assert_str_eq(c, "HELDOUT-42\n");
	free(c);
	snprintf(path, sizeof(path), "%s/sub/z.txt", f.ws);
	c = test_read_file(path);
	ck_assert_ptr_nonnull(c);
	ck_assert_str_eq(c, "z\n");
	free(c);
	snprintf(path, sizeof(path), "%s/a.txt", f.ws);
	c = test_read_file(path);
	ck_assert_str_eq(c, "changed\n");
	free(c);
	snprintf(path, sizeof(path), "%s/newtop", f.ws);
	ck_assert(access(path, F_OK) < 0);

	/* An existing directory is covered, and left as it was. */
	snprintf(dst, sizeof(dst), "%s/sub", f.ws);
	snprintf(script, sizeof(script),
		 "cat %s/check.txt; ls %s; echo q > %s/q && echo wrote", dst,
		 dst, dst);
	run(&f, &sp, &o);
	ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
	ck_assert_ptr_nonnull(strstr(o.out.data, "HELDOUT-42"));
	ck_assert_ptr_null(strstr(o.out.data, "z.txt"));
	ck_assert_ptr_null(strstr(o.out.data, "wrote"));
	outcome_free(&o);
	snprintf(path, sizeof(path), "%s/sub/q", f.ws);
	ck_assert(access(path, F_OK) < 0);

	/* A destination outside the workspace, or through a symlink the
	 * workspace holds, is refused. */
	snprintf(dst, sizeof(dst), "%s/elsewhere", f.outside);
	run(&f, &sp, &o);
	ck_assert_ptr_nonnull(o.error_code);
	ck_assert_str_eq(o.error_code, "BAD-REQUEST");
	outcome_free(&o);
	snprintf(path, sizeof(path), "%s/evil", f.ws);
	ck_assert_int_eq(symlink(f.outside, path), 0);
	snprintf(dst, sizeof(dst), "%s/evil/x", f.ws);
	run(&f, &sp, &o);
	ck_assert_ptr_nonnull(o.error_code);
	ck_assert_str_eq(o.error_code, "BAD-REQUEST");
	outcome_free(&o);
	snprintf(path, sizeof(path), "%s/x", f.outside);
	ck_assert(access(path, F_OK) < 0);
	fx_teardown(&f);
}
END_TEST

/*
 * The run's securebits are set and locked (NOROOT, NO_CAP_AMBIENT_RAISE,
 * KEEP_CAPS and NO_SETUID_FIXUP locked off), also when sandboxd is root
 * and switches the run to an unprivileged uid.  /proc/self/status does
 * not show them, so the run asks prctl itself.
 */
START_TEST(securebits_locked)
{
	struct fixture f;
	struct outcome o;
	char *argv[] = {"/usr/bin/python3", "-c",
			"import ctypes\n"
			"print(ctypes.CDLL(None).prctl(27, 0, 0, 0, 0))\n",
			NULL};
	struct sbx_spec sp;
	long bits;

	if (access("/usr/bin/python3", X_OK) < 0)
		TEST_SKIP("needs /usr/bin/python3");
	fx_setup(&f, NULL);
	spec_init(&f, &sp, argv);
	run(&f, &sp, &o);
	REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
	ck_assert_msg(o.out.data, "no output: %s", o.err.data);
	bits = strtol(o.out.data, NULL, 10);
	/* SECBIT_NOROOT|_LOCKED, NO_SETUID_FIXUP_LOCKED, KEEP_CAPS_LOCKED,
	 * NO_CAP_AMBIENT_RAISE|_LOCKED (linux/securebits.h). */
	ck_assert_msg((bits & 0xeb) == 0xeb, "securebits 0x%lx", bits);
	outcome_free(&o);
	fx_teardown(&f);
}
END_TEST

/* A read-only bind that would rebuild a directory with more entries than
 * a plan re-binds is refused, and nothing runs. */
START_TEST(ro_binds_too_many_entries)
{
	struct fixture f;
	struct outcome o;
	char src[PATH_MAX], dst[PATH_MAX + 16], path[PATH_MAX + 32];
	char *argv[] = {"/bin/sh", "-c", "touch ran", NULL};
	struct sbx_spec sp;

	fx_setup(&f, NULL);
	snprintf(src, sizeof(src), "%s/sealed", f.outside);
	ck_assert_int_eq(mkdir(src, 0700), 0);
	for (int i = 0; i <= MOUNTPLAN_REBIND_MAX; i++) {
		snprintf(path, sizeof(path), "%s/f%d", f.ws, i);
		test_write_file(path, "x");
	}
	snprintf(dst, sizeof(dst), "%s/.spd-heldout", f.ws);
	char *binds[] = {src, dst, NULL};
	spec_init(&f, &sp, argv);
	sp.ro_binds = binds;
	run(&f, &sp, &o);
	REQUIRE_SANDBOX(&o);
	ck_assert_ptr_nonnull(o.error_code);
	ck_assert_str_eq(o.error_code, "BAD-REQUEST");
	snprintf(path, sizeof(path), "%s/ran", f.ws);
	ck_assert(access(path, F_OK) < 0);
	ck_assert(access(dst, F_OK) < 0);
	outcome_free(&o);
	fx_teardown(&f);
}
END_TEST

/*
 * A hard link planted in the workspace from the host to a file outside
 * it (ln outside/f ws/h before the run): writing through the link would
 * change the file outside.  The run can still read it, but no write,
 * append, truncation or chmod through any of its names in the workspace
 * (top level or a subdirectory) reaches the file outside.
 */
START_TEST(planted_hardlink_protected)
{
	struct fixture f;
	struct outcome o;
	char outside[PATH_MAX], h1[PATH_MAX + 8], h2[PATH_MAX + 16];
	char sub[PATH_MAX + 8], h3[PATH_MAX + 16], script[1024];
	struct stat st;

	fx_setup(&f, NULL);
	snprintf(outside, sizeof(outside), "%s/hl.txt", f.outside);
	snprintf(h1, sizeof(h1), "%s/h-outside", f.ws);
	snprintf(sub, sizeof(sub), "%s/sub", f.ws);
	snprintf(h2, sizeof(h2), "%s/sub/h2", f.ws);
	/* Two directories down, with nothing multi-linked between (pass 2
	 * walks only where pass 1 saw one below). */
	snprintf(h3, sizeof(h3), "%s/deep/er/h3", f.ws);
	test_write_file(outside, "original\n");
	chmod(outside, 0644);
	ck_assert_int_eq(mkdir(sub, 0755), 0);
	snprintf(sub, sizeof(sub), "%s/deep", f.ws);
	ck_assert_int_eq(mkdir(sub, 0755), 0);
	snprintf(sub, sizeof(sub), "%s/deep/er", f.ws);
	ck_assert_int_eq(mkdir(sub, 0755), 0);
	if (link(outside, h1) < 0 || link(outside, h2) < 0 ||
	    link(outside, h3) < 0)
		TEST_SKIP("cannot hard-link %s into the workspace: %s", outside,
			  strerror(errno));
	/* Each attempt prints its name when it succeeds; the run can read
	 * the file. */
	snprintf(script, sizeof(script),
		 "for h in h-outside sub/h2 deep/er/h3; do"
		 " cat $h >/dev/null && echo read;"
		 " (echo appended >> $h) 2>/dev/null && echo append:$h;"
		 " (echo written > $h) 2>/dev/null && echo write:$h;"
		 " truncate -s 0 $h 2>/dev/null && echo truncate:$h;"
		 " chmod 0666 $h 2>/dev/null && echo chmod:$h;"
		 " done; exit 0");
	run_sh(&f, script, &o);
	REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s: %s", o.error_code,
		      o.error_msg);
	ck_assert_str_eq(o.out.data ? o.out.data : "", "read\nread\nread\n");
	char *c = test_read_file(outside);
	ck_assert_ptr_nonnull(c);
	ck_assert_str_eq(c, "original\n");
	free(c);
	ck_assert_int_eq(stat(outside, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0644);
	ck_assert_int_eq(st.st_nlink, 4);
	outcome_free(&o);
	fx_teardown(&f);
}
END_TEST

/* The positive control: a file whose links are all inside the workspace
 * stays writable through each of them. */
START_TEST(inside_hardlinks_writable)
{
	struct fixture f;
	struct outcome o;
	char a[PATH_MAX], b[PATH_MAX + 8], sub[PATH_MAX + 8];

	fx_setup(&f, NULL);
	snprintf(a, sizeof(a), "%s/a", f.ws);
	snprintf(sub, sizeof(sub), "%s/sub", f.ws);
	snprintf(b, sizeof(b), "%s/sub/b", f.ws);
	test_write_file(a, "one\n");
	ck_assert_int_eq(mkdir(sub, 0755), 0);
	if (link(a, b) < 0)
		TEST_SKIP("cannot hard-link in the workspace: %s",
			  strerror(errno));
	char script[] = "echo two >> sub/b && echo three >> a";
	run_sh(&f, script, &o);
	REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s: %s", o.error_code,
		      o.error_msg);
	ck_assert_int_eq(o.exit_code, 0);
	char *c = test_read_file(a);
	ck_assert_ptr_nonnull(c);
	ck_assert_str_eq(c, "one\ntwo\nthree\n");
	free(c);
	outcome_free(&o);
	fx_teardown(&f);
}
END_TEST

/* More names of outside files than the plan binds read-only: the run is
 * refused, naming the limit, and the command never runs.  Twice: the
 * first run is sandboxd's first, cloned anew; the second is set up by
 * the spare's command process (spawn.h), whose failing step must be
 * reported the same way. */
START_TEST(too_many_hardlinks_refused)
{
	struct fixture f;
	struct outcome o;
	char outside[PATH_MAX], path[PATH_MAX + 32], marker[PATH_MAX + 8];
	char script[PATH_MAX + 32];

	fx_setup(&f, NULL);
	snprintf(outside, sizeof(outside), "%s/many.txt", f.outside);
	test_write_file(outside, "original\n");
	for (int i = 0; i <= MOUNTPLAN_LINKS_MAX; i++) {
		snprintf(path, sizeof(path), "%s/l%d", f.ws, i);
		if (link(outside, path) < 0)
			TEST_SKIP("cannot hard-link %s into the workspace: %s",
				  outside, strerror(errno));
	}
	snprintf(marker, sizeof(marker), "%s/ran", f.ws);
	snprintf(script, sizeof(script), "touch %s", marker);
	for (int pass = 0; pass < 2; pass++) {
		run_sh(&f, script, &o);
		REQUIRE_SANDBOX(&o);
		ck_assert_ptr_nonnull(o.error_code);
		ck_assert_str_eq(o.error_code, "SANDBOX-UNAVAILABLE");
		ck_assert_msg(strstr(o.error_msg, "hard link") != NULL, "%s",
			      o.error_msg);
		/* Whole, with what to do (pnpm's store links node_modules,
		 * uv's cache a project's .venv, git clone --local a
		 * repository's objects). */
		ck_assert_msg(strstr(o.error_msg, "UV_LINK_MODE=copy;"), "%s",
			      o.error_msg);
		ck_assert_msg(strstr(o.error_msg, "git repack -a -d)"), "%s",
			      o.error_msg);
		ck_assert_msg(access(marker, F_OK) < 0, "the command ran");
		outcome_free(&o);
		wait_for_spare();
	}
	fx_teardown(&f);
}
END_TEST

/*
 * A store's files hard-linked into the workspace by the thousand, as pnpm
 * links node_modules and uv a .venv (docs/sandbox.md, "Hard links"):
 * npkg packages of 24 files each, in the package's directory and its
 * lib/, each linked from outside/store, in node_modules/.pnpm as pnpm
 * lays them out, with a dependency's symlink beside each.  Beside them,
 * as pnpm leaves them: its lock file and a hoisted shim in .pnpm, its
 * .modules.yaml and a shim in node_modules (all of one link), a package
 * whose own node_modules/.bin holds a shim it wrote, one with a file its
 * package manager wrote (uv's INSTALLER) among the linked ones.  Package
 * 3 is in vendor/ instead, with more files its install script built (one
 * link) than linked ones.  And a .git whose objects are linked from
 * outside (git clone --local), and two names of one file inside the
 * workspace.
 */
static void lw_assert_file(const char *path, const char *want);

/* mkdir -p of path (PATH_MAX at most), each directory mode 0755. */
static void store_mkdirs(const char *path)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s", path);
	for (char *c = p + 1; *c; c++) {
		if (*c != '/')
			continue;
		*c = '\0';
		ck_assert_msg(mkdir(p, 0755) == 0 || errno == EEXIST,
			      "mkdir %s: %s", p, strerror(errno));
		*c = '/';
	}
	ck_assert_msg(mkdir(p, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", p,
		      strerror(errno));
}

/* The store's file S/REL, of content WANT, mode 0644, linked to D/REL. */
static void store_link(const char *s, const char *d, const char *rel,
		       const char *want)
{
	char a[PATH_MAX], b[PATH_MAX];

	snprintf(a, sizeof(a), "%s/%s", s, rel);
	snprintf(b, sizeof(b), "%s/%s", d, rel);
	test_write_file(a, want);
	ck_assert_int_eq(chmod(a, 0644), 0);
	if (link(a, b) < 0)
		TEST_SKIP("cannot hard-link %s into the workspace: %s", a,
			  strerror(errno));
}

static void store_tree(struct fixture *f, int npkg)
{
	char cmd[2048], s[PATH_MAX], d[PATH_MAX], rel[32], want[32];

	/* The packages without a process for each file: 1,440 of them
	 * take seconds to link from the shell on a loaded machine. */
	for (int i = 1; i <= npkg; i++) {
		snprintf(s, sizeof(s), "%s/store/p%d/lib", f->outside, i);
		store_mkdirs(s);
		s[strlen(s) - 4] = '\0';
		if (i == 3) {
			snprintf(d, sizeof(d), "%s/vendor/p3/lib", f->ws);
		} else {
			snprintf(
			    d, sizeof(d),
			    "%s/node_modules/.pnpm/p%d/node_modules/p%d/lib",
			    f->ws, i, i);
		}
		store_mkdirs(d);
		d[strlen(d) - 4] = '\0';
		if (i != 3) {
			char dep[PATH_MAX + 8];

			snprintf(dep, sizeof(dep), "%s/../dep", d);
			ck_assert_int_eq(
			    symlink("../../p1/node_modules/p1", dep), 0);
		}
		for (int j = 1; j <= 12; j++) {
			snprintf(rel, sizeof(rel), "f%d", j);
			snprintf(want, sizeof(want), "s%d.%d\n", i, j);
			store_link(s, d, rel, want);
			snprintf(rel, sizeof(rel), "lib/g%d", j);
			snprintf(want, sizeof(want), "l%d.%d\n", i, j);
			store_link(s, d, rel, want);
		}
	}
	snprintf(cmd, sizeof(cmd),
		 "set -e; cd '%s'; S='%s/store'; P=node_modules/.pnpm;"
		 " echo lock > $P/lock.yaml;"
		 " mkdir -p $P/node_modules/.bin node_modules/.bin;"
		 " echo hoisted > $P/node_modules/.bin/h;"
		 " echo m > node_modules/.modules.yaml;"
		 " echo shim > node_modules/.bin/vite;"
		 " mkdir -p $P/p2/node_modules/p2/node_modules/.bin;"
		 " echo shim > $P/p2/node_modules/p2/node_modules/.bin/shim;"
		 " echo uv > $P/p4/node_modules/p4/INSTALLER;"
		 " for k in $(seq 1 13); do"
		 "  echo built > vendor/p3/built$k.node; done;"
		 " mkdir -p .git/objects/ab $S/git;"
		 " for j in 1 2 3; do echo o$j > $S/git/o$j;"
		 "  ln $S/git/o$j .git/objects/ab/o$j; done;"
		 " mkdir src; echo a > src/a; ln src/a src/b",
		 f->ws, f->outside);
	if (system(cmd) != 0)
		TEST_SKIP("cannot build the linked store tree in %s", f->ws);
}

/* What the run may and may not do in store_tree's workspace. */
static char store_script[] =
    "P=node_modules/.pnpm; n=0;"
    " for h in $(find node_modules vendor .git -type f -links +1); do"
    "  { echo x >> $h; } 2>/dev/null && echo append:$h;"
    "  n=$((n+1)); done; echo linked:$n;"
    /* Without a process for each name: thousands of them take seconds
     * on a loaded machine. */
    " for h in $(find node_modules vendor .git -type f -links +1"
    "  \\( -name f1 -o -name g1 -o -name o1 \\)); do"
    "  truncate -s 0 $h 2>/dev/null && echo truncate:$h;"
    "  chmod 0666 $h 2>/dev/null && echo chmod:$h; done;"
    " (echo y >> $P/lock.yaml) 2>/dev/null && echo lock;"
    " (echo y >> $P/node_modules/.bin/h) 2>/dev/null && echo hoisted;"
    " mkdir $P/new 2>/dev/null && echo pnpmnew;"
    " echo y >> node_modules/.modules.yaml && echo modules;"
    " echo y >> node_modules/.bin/vite && echo bin;"
    " (echo y >> $P/p2/node_modules/p2/node_modules/.bin/shim) 2>/dev/null"
    "  && echo shim;"
    " touch $P/p2/node_modules/p2/node_modules/.bin/new 2>/dev/null"
    "  && echo binnew;"
    " echo y >> vendor/p3/built1.node && echo built;"
    " touch vendor/p3/new && echo p3new;"
    " touch vendor/p3/lib/new 2>/dev/null && echo p3libnew;"
    " touch $P/p4/node_modules/p4/new 2>/dev/null && echo p4new;"
    " (echo y >> $P/p4/node_modules/p4/INSTALLER) 2>/dev/null && echo inst;"
    " rm -rf $P/p5 2>/dev/null && echo rm;"
    " touch .git/objects/ab/new && echo objnew;"
    " echo y >> src/b && echo inside;"
    " mkdir -p node_modules/.vite && touch node_modules/.vite/x && echo vite;"
    " cat $P/p6/node_modules/dep/f1";

/* A store's file as it was made: its content, mode 0644, and its two
 * links (the store's and the workspace's). */
static void store_file_intact(const char *path, const char *want)
{
	struct stat st;

	lw_assert_file(path, want);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0644);
	ck_assert_int_eq(st.st_nlink, 2);
}

/* Each file of outside/store as it was made, mode and all. */
static void store_unchanged(struct fixture *f, int npkg)
{
	char path[PATH_MAX + 64], want[64];

	for (int i = 1; i <= npkg; i++)
		for (int j = 1; j <= 12; j++)
			for (int k = 0; k < 2; k++) {
				snprintf(path, sizeof(path),
					 "%s/store/p%d/%s%d", f->outside, i,
					 k ? "lib/g" : "f", j);
				snprintf(want, sizeof(want), "%c%d.%d\n",
					 k ? 'l' : 's', i, j);
				store_file_intact(path, want);
			}
	for (int j = 1; j <= 3; j++) {
		snprintf(path, sizeof(path), "%s/store/git/o%d", f->outside, j);
		snprintf(want, sizeof(want), "o%d\n", j);
		lw_assert_file(path, want);
	}
}

#define STORE_WANT(n)                                                          \
	"linked:" #n                                                           \
	"\nmodules\nbin\nbuilt\np3new\nobjnew\ninside\nvite\ns1.1\n"

/*
 * Past LINKS_EACH_MAX names to bind (here 1,440, past the 1,024 mounts a
 * run may have), sandboxd binds whole, with all below them, the
 * directories most of whose files have a link outside, and those most of
 * what is in which is so (node_modules/.pnpm): no linked name can be
 * written, appended to, truncated or chmod'ed (the store is unchanged);
 * nor can a file be made in a package's directory or one removed, nor
 * the shim below a package or the file written beside its linked ones,
 * nor pnpm's lock file and hoisted shim in .pnpm.  What is not linked
 * and not below such a directory stays the run's: pnpm's files in
 * node_modules, the files built beside fewer linked ones (their
 * directory bound name by name), a cache directory made beside the
 * packages, git's object directories (never bound whole), two names of
 * one file inside.
 */
START_TEST(store_links_bound_by_directory)
{
	struct fixture f;
	struct outcome o;

	fx_setup(&f, NULL);
	store_tree(&f, 60);
	run_sh(&f, store_script, &o);
	REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s: %s", o.error_code,
		      o.error_msg);
	ck_assert_str_eq(o.out.data ? o.out.data : "", STORE_WANT(1443));
	store_unchanged(&f, 60);
	outcome_free(&o);
	fx_teardown(&f);
}
END_TEST

/* Mount in a mount namespace of the test's own: as root, a new one; as
 * another user, in a new user namespace too, mapping only that user
 * (sandboxd, started after, runs in it as that user). */
static void own_mount_ns(void)
{
	char map[64];
	uid_t uid = geteuid();
	gid_t gid = getegid();

	if (uid != 0) {
		if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
			TEST_SKIP("cannot make a user namespace to mount in: "
				  "%s",
				  strerror(errno));
		snprintf(map, sizeof(map), "%u %u 1", (unsigned)uid,
			 (unsigned)uid);
		test_write_file("/proc/self/uid_map", map);
		test_write_file("/proc/self/setgroups", "deny");
		snprintf(map, sizeof(map), "%u %u 1", (unsigned)gid,
			 (unsigned)gid);
		test_write_file("/proc/self/gid_map", map);
	} else {
		ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
	}
	ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
}

/* Packages enough for 1,080 names with a link outside: past
 * LINKS_EACH_MAX, sandboxd binds directories whole. */
#define VOLUMES_NPKG 45

/* outside/NAME holding want, mode 0644, with a second name outside/NAME2
 * (outside what is mounted in the workspace); its path in path. */
static void outside_linked(struct fixture *f, const char *name,
			   const char *name2, const char *want, char *path,
			   size_t len)
{
	char b[PATH_MAX + 64];

	snprintf(path, len, "%s/%s", f->outside, name);
	test_write_file(path, want);
	ck_assert_int_eq(chmod(path, 0644), 0);
	snprintf(b, sizeof(b), "%s/%s", f->outside, name2);
	ck_assert_int_eq(link(path, b), 0);
}

/*
 * Mounts of the host's below the workspace (a container's volumes), in
 * store_tree's workspace: a directory of the host's bound into package
 * 8's directory (into sub, named there), holding a name of a file linked
 * from outside (outside/vol/secret), and a file linked from outside
 * (outside/onefile) bound over package 9's f1 (into one).  Root, or a
 * user in a user namespace of the test's own (own_mount_ns).
 */
static void volumes_mount(struct fixture *f, char *sub, char *one, size_t len)
{
	char a[PATH_MAX + 64];

	snprintf(a, sizeof(a), "%s/vol", f->outside);
	ck_assert_int_eq(mkdir(a, 0755), 0);
	outside_linked(f, "vol/secret", "secret2", "VOLUME\n", a, sizeof(a));
	snprintf(sub, len, "%s/node_modules/.pnpm/p8/node_modules/p8/sub",
		 f->ws);
	ck_assert_int_eq(mkdir(sub, 0755), 0);
	snprintf(a, sizeof(a), "%s/vol", f->outside);
	ck_assert_int_eq(mount(a, sub, NULL, MS_BIND, NULL), 0);
	outside_linked(f, "onefile", "onefile2", "ONEFILE\n", a, sizeof(a));
	snprintf(one, len, "%s/node_modules/.pnpm/p9/node_modules/p9/f1",
		 f->ws);
	ck_assert_int_eq(mount(a, one, NULL, MS_BIND, NULL), 0);
}

/* What the run may not do to them: neither file outside can be written
 * through the workspace, nor package 8's own file. */
static char volumes_script[] =
    "P=node_modules/.pnpm;"
    " (echo x >> $P/p8/node_modules/p8/sub/secret) 2>/dev/null && echo sub;"
    " (echo x >> $P/p9/node_modules/p9/f1) 2>/dev/null && echo file;"
    " (echo x >> $P/p8/node_modules/p8/f1) 2>/dev/null && echo pkg;"
    " cat $P/p8/node_modules/p8/sub/secret $P/p9/node_modules/p9/f1"
    "  2>/dev/null";

/* Not as root, sandboxd binds the workspace with the mounts below it as
 * they are, and both show in the run; as root the workspace is one
 * idmapped mount, which carries none: the run sees what is under them. */
#define VOLUMES_WANT (geteuid() == 0 ? "s9.1\n" : "VOLUME\nONEFILE\n")

/* Unmounted, and each file outside as it was. */
static void volumes_unchanged(struct fixture *f, const char *sub,
			      const char *one)
{
	char a[PATH_MAX + 64];

	ck_assert_int_eq(umount2(one, MNT_DETACH), 0);
	ck_assert_int_eq(umount2(sub, MNT_DETACH), 0);
	snprintf(a, sizeof(a), "%s/vol/secret", f->outside);
	lw_assert_file(a, "VOLUME\n");
	snprintf(a, sizeof(a), "%s/onefile", f->outside);
	lw_assert_file(a, "ONEFILE\n");
	store_unchanged(f, VOLUMES_NPKG);
}

/*
 * The host's mounts below a directory sandboxd binds read-only whole
 * (volumes_mount): its bind carries them as they are, writable, so
 * sandboxd must still walk below such a directory (LS_DEEP).
 */
START_TEST(mount_below_whole_bound_dir)
{
	struct fixture f;
	struct outcome o;
	char sub[PATH_MAX + 64], one[PATH_MAX + 64];

	own_mount_ns();
	fx_setup(&f, NULL);
	store_tree(&f, VOLUMES_NPKG);
	volumes_mount(&f, sub, one, sizeof(sub));
	run_sh(&f, volumes_script, &o);
	REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s: %s", o.error_code,
		      o.error_msg);
	ck_assert_str_eq(o.out.data ? o.out.data : "", VOLUMES_WANT);
	outcome_free(&o);
	volumes_unchanged(&f, sub, one);
	fx_teardown(&f);
}
END_TEST

/*
 * pnpm's layout of npkg packages of one file each, linked from
 * outside/store: more packages than the mounts a run may have
 * (MOUNTPLAN_LINKS_MAX), were each package's directory bound on its own.
 * Its lock file in node_modules/.pnpm, its .modules.yaml beside it.
 */
static void store_many(struct fixture *f, int npkg)
{
	char a[PATH_MAX + 64], b[PATH_MAX + 64];

	snprintf(a, sizeof(a), "%s/store", f->outside);
	ck_assert_int_eq(mkdir(a, 0755), 0);
	snprintf(b, sizeof(b), "%s/node_modules", f->ws);
	ck_assert_int_eq(mkdir(b, 0755), 0);
	snprintf(b, sizeof(b), "%s/node_modules/.pnpm", f->ws);
	ck_assert_int_eq(mkdir(b, 0755), 0);
	for (int i = 1; i <= npkg; i++) {
		char want[32];
		int n;

		n = snprintf(b, sizeof(b), "%s/node_modules/.pnpm/p%d", f->ws,
			     i);
		ck_assert_int_eq(mkdir(b, 0755), 0);
		n += snprintf(b + n, sizeof(b) - (size_t)n, "/node_modules");
		ck_assert_int_eq(mkdir(b, 0755), 0);
		n += snprintf(b + n, sizeof(b) - (size_t)n, "/p%d", i);
		ck_assert_int_eq(mkdir(b, 0755), 0);
		snprintf(b + n, sizeof(b) - (size_t)n, "/index.js");
		snprintf(a, sizeof(a), "%s/store/m%d", f->outside, i);
		snprintf(want, sizeof(want), "m%d\n", i);
		test_write_file(a, want);
		ck_assert_int_eq(chmod(a, 0644), 0);
		if (link(a, b) < 0)
			TEST_SKIP("cannot hard-link %s into the workspace: %s",
				  a, strerror(errno));
	}
	snprintf(b, sizeof(b), "%s/node_modules/.pnpm/lock.yaml", f->ws);
	test_write_file(b, "lock\n");
	snprintf(b, sizeof(b), "%s/node_modules/.modules.yaml", f->ws);
	test_write_file(b, "m\n");
}

/* What the run may and may not do in store_many's workspace. */
static char store_many_script[] =
    "P=node_modules/.pnpm; n=0;"
    " for h in $P/p*/node_modules/p*/index.js; do"
    "  { echo x >> $h; } 2>/dev/null && n=$((n+1)); done; echo written:$n;"
    " touch $P/p7/node_modules/p7/new 2>/dev/null && echo new;"
    " mkdir $P/p0 2>/dev/null && echo p0;"
    " (echo y >> $P/lock.yaml) 2>/dev/null && echo lock;"
    " echo y >> node_modules/.modules.yaml && echo modules;"
    " cat $P/p7/node_modules/p7/index.js";

#define STORE_MANY_WANT "written:0\nmodules\nm7\n"

static void store_many_unchanged(struct fixture *f, int npkg)
{
	char path[PATH_MAX + 64], want[32];

	for (int i = 1; i <= npkg; i++) {
		snprintf(path, sizeof(path), "%s/store/m%d", f->outside, i);
		snprintf(want, sizeof(want), "m%d\n", i);
		store_file_intact(path, want);
	}
}

#define STORE_MANY 1100

/*
 * More packages linked from a store than a run may have mounts (a large
 * pnpm monorepo): node_modules/.pnpm is bound read-only whole, one mount,
 * since most of what it holds is packages' directories that would each be
 * bound whole.  The run is not refused; no package's file can be written
 * nor one made there, nor the lock file written; the .modules.yaml beside
 * it can.
 */
START_TEST(store_many_packages_one_bind)
{
	struct fixture f;
	struct outcome o;

	fx_setup(&f, NULL);
	store_many(&f, STORE_MANY);
	run_sh(&f, store_many_script, &o);
	REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s: %s", o.error_code,
		      o.error_msg);
	ck_assert_str_eq(o.out.data ? o.out.data : "", STORE_MANY_WANT);
	store_many_unchanged(&f, STORE_MANY);
	outcome_free(&o);
	fx_teardown(&f);
}
END_TEST

/*
 * The hard-link check from spd's watch of the workspace (linkwatch.h):
 * after the workspace is watched (the first run's walk), a link planted
 * into it from the host and one made from the host to a file of it are
 * both in the list the next run gets, and sandboxd binds both names
 * read-only from the list: neither file outside changes.
 */
/* The last list linkwatch_names gave (lw_names): its names go to a run
 * with its directories (lw_spec_links). */
static struct linkwatch_list lw_last;

static int lw_names(struct linkwatch *lw, const char *ws,
		    const char *const **names)
{
	int r = linkwatch_names(lw, ws, &lw_last);

	*names = r == 1 ? lw_last.names : NULL;
	return r;
}

static void lw_spec_links(struct sbx_spec *sp, const char *const *names)
{
	sp->link_names = names;
	if (names && names == lw_last.names)
		sp->link_ro_dirs = lw_last.ro_dirs;
}

static bool lw_list(struct fixture *f, struct linkwatch *lw,
		    const char *const **names)
{
	int r;

	/* The first call starts the walk; wait for it. */
	while ((r = lw_names(lw, f->ws, names)) == 0 &&
	       linkwatch_walking(lw, f->ws))
		while (linkwatch_walking(lw, f->ws))
			uv_run(&f->loop, UV_RUN_ONCE);
	return r == 1;
}

static bool listed(const char *const *names, const char *name)
{
	for (size_t i = 0; names && names[i]; i++)
		if (!strcmp(names[i], name))
			return true;
	return false;
}

static char lw_script[] =
    "for h in planted sub/shared; do"
    " cat $h >/dev/null && echo read;"
    " (echo appended >> $h) 2>/dev/null && echo append:$h;"
    " (echo written > $h) 2>/dev/null && echo write:$h;"
    " truncate -s 0 $h 2>/dev/null && echo truncate:$h;"
    " done; echo ok >> mine; exit 0";

/* Plant both links: outside/in.txt into the workspace as "planted", and
 * the workspace's sub/shared out as outside/out.txt. */
static void lw_plant(struct fixture *f, char *in, char *out, size_t len)
{
	char path[PATH_MAX + 32];

	snprintf(in, len, "%s/in.txt", f->outside);
	snprintf(out, len, "%s/out.txt", f->outside);
	test_write_file(in, "original\n");
	snprintf(path, sizeof(path), "%s/planted", f->ws);
	if (link(in, path) < 0)
		TEST_SKIP("cannot hard-link %s into the workspace: %s", in,
			  strerror(errno));
	snprintf(path, sizeof(path), "%s/sub/shared", f->ws);
	if (link(path, out) < 0)
		TEST_SKIP("cannot hard-link %s out of the workspace: %s", path,
			  strerror(errno));
}

static void lw_setup(struct fixture *f, struct linkwatch **lw)
{
	char path[PATH_MAX + 32];

	fx_setup(f, NULL);
	snprintf(path, sizeof(path), "%s/sub", f->ws);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/sub/shared", f->ws);
	test_write_file(path, "original\n");
	for (int i = 0; i < 50; i++) {
		snprintf(path, sizeof(path), "%s/sub/f%d", f->ws, i);
		test_write_file(path, "x\n");
	}
	ck_assert_int_eq(linkwatch_new(&f->loop, lw), 0);
}

static void lw_check(struct fixture *f, const char *const *names,
		     const char *in, const char *out)
{
	char *argv[] = {"/bin/sh", "-c", lw_script, NULL};
	struct sbx_spec sp;
	struct outcome o;
	char *c;

	spec_init(f, &sp, argv);
	lw_spec_links(&sp, names);
	run(f, &sp, &o);
	REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s: %s", o.error_code,
		      o.error_msg);
	ck_assert_str_eq(o.out.data ? o.out.data : "", "read\nread\n");
	ck_assert_ptr_nonnull(c = test_read_file(in));
	ck_assert_str_eq(c, "original\n");
	free(c);
	ck_assert_ptr_nonnull(c = test_read_file(out));
	ck_assert_str_eq(c, "original\n");
	free(c);
	outcome_free(&o);
}

START_TEST(linkwatch_planted_after_watch)
{
	struct fixture f;
	struct linkwatch *lw;
	const char *const *names;
	char in[PATH_MAX], out[PATH_MAX];

	lw_setup(&f, &lw);
	/* The first run's list: the workspace is watched, nothing in it
	 * is multi-linked. */
	ck_assert(lw_list(&f, lw, &names));
	ck_assert_ptr_null(names[0]);
	lw_plant(&f, in, out, sizeof(in));
	/* The watched path: both names come from events, not a walk. */
	ck_assert(lw_list(&f, lw, &names));
	ck_assert_uint_eq(linkwatch_walks(lw), 1);
	ck_assert(listed(names, "planted"));
	ck_assert(listed(names, "sub/shared"));
	lw_check(&f, names, in, out);
	/* The run's own new file did not cost the list. */
	ck_assert(lw_list(&f, lw, &names));
	ck_assert_uint_eq(linkwatch_walks(lw), 1);
	linkwatch_free(lw);
	fx_teardown(&f);
}
END_TEST

/* An editor's save of path: a new file written beside it and renamed
 * over it (the rename the list must follow). */
static void lw_save(const char *path)
{
	char tmp[PATH_MAX + 300];

	snprintf(tmp, sizeof(tmp), "%s.swp", path);
	test_write_file(tmp, "saved\n");
	ck_assert_int_eq(rename(tmp, path), 0);
}

/* Runs sh -c script in the workspace with spd's list names and checks
 * that it printed want. */
static void lw_run(struct fixture *f, const char *const *names, char *script,
		   const char *want)
{
	char *argv[] = {"/bin/sh", "-c", script, NULL};
	struct sbx_spec sp;
	struct outcome o;

	spec_init(f, &sp, argv);
	lw_spec_links(&sp, names);
	run(f, &sp, &o);
	REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s: %s", o.error_code,
		      o.error_msg);
	ck_assert_str_eq(o.out.data ? o.out.data : "", want);
	outcome_free(&o);
}

static void lw_assert_file(const char *path, const char *want)
{
	char *c = test_read_file(path);

	ck_assert_ptr_nonnull(c);
	ck_assert_str_eq(c, want);
	free(c);
}

/* Entries of a NULL-terminated list (NULL: none). */
static size_t lw_count(const char *const *v)
{
	size_t n = 0;

	while (v && v[n])
		n++;
	return n;
}

/*
 * spd's list of a store-linked workspace (store_tree, 30 packages: 725
 * names): past SBXP_LINKS_EACH_MAX names with a link outside, the list
 * carries the directories to bind whole, as sandboxd's walk would bind
 * them, instead of the names below them: node_modules/.pnpm, most of
 * which is packages' directories bound whole, and vendor/p3/lib (p3
 * itself has more files of its own); and the names left (p3's, git's
 * objects, src's two).  The run given that list is confined exactly as
 * by the walk.
 */
START_TEST(linkwatch_store_links_by_directory)
{
	struct fixture f;
	struct linkwatch *lw;
	const char *const *names;

	fx_setup(&f, NULL);
	store_tree(&f, 30);
	ck_assert_int_eq(linkwatch_new(&f.loop, &lw), 0);
	ck_assert(lw_list(&f, lw, &names));
	ck_assert_uint_eq(lw_count(lw_last.ro_dirs), 2);
	ck_assert(listed(lw_last.ro_dirs, "node_modules/.pnpm"));
	ck_assert(listed(lw_last.ro_dirs, "vendor/p3/lib"));
	ck_assert_uint_eq(lw_count(names), 12 + 3 + 2);
	ck_assert(listed(names, "vendor/p3/f1"));
	ck_assert(listed(names, ".git/objects/ab/o1"));
	ck_assert(listed(names, "src/b"));
	lw_run(&f, names, store_script, STORE_WANT(723));
	store_unchanged(&f, 30);
	linkwatch_free(lw);
	fx_teardown(&f);
}
END_TEST

/* The same from spd's list (store_many_packages_one_bind): one directory,
 * node_modules/.pnpm, and no name. */
START_TEST(linkwatch_store_many_packages)
{
	struct fixture f;
	struct linkwatch *lw;
	const char *const *names;

	fx_setup(&f, NULL);
	store_many(&f, STORE_MANY);
	ck_assert_int_eq(linkwatch_new(&f.loop, &lw), 0);
	ck_assert(lw_list(&f, lw, &names));
	ck_assert_uint_eq(lw_count(lw_last.ro_dirs), 1);
	ck_assert(listed(lw_last.ro_dirs, "node_modules/.pnpm"));
	ck_assert_uint_eq(lw_count(names), 0);
	lw_run(&f, names, store_many_script, STORE_MANY_WANT);
	store_many_unchanged(&f, STORE_MANY);
	linkwatch_free(lw);
	fx_teardown(&f);
}
END_TEST

/* The same from spd's list (mount_below_whole_bound_dir): the names below
 * the host's mounts are spd's to list, or the run's to walk. */
START_TEST(linkwatch_mount_below_whole_bound_dir)
{
	struct fixture f;
	struct linkwatch *lw;
	const char *const *names;
	char sub[PATH_MAX + 64], one[PATH_MAX + 64];

	own_mount_ns();
	fx_setup(&f, NULL);
	store_tree(&f, VOLUMES_NPKG);
	volumes_mount(&f, sub, one, sizeof(sub));
	ck_assert_int_eq(linkwatch_new(&f.loop, &lw), 0);
	ck_assert(lw_list(&f, lw, &names));
	lw_run(&f, names, volumes_script, VOLUMES_WANT);
	volumes_unchanged(&f, sub, one);
	linkwatch_free(lw);
	fx_teardown(&f);
}
END_TEST

/*
 * sandboxd binds the list's directories as the list says, whatever a walk
 * would have done: src/pkg read-only whole (its own file of one link
 * too), src/ not; and the listed names, each linked from outside,
 * read-only too, the one below src/pkg with it.
 */
START_TEST(link_dirs_from_list)
{
	struct fixture f;
	char path[PATH_MAX + 32], out[2][PATH_MAX];
	const char *names[] = {"src/h", "src/pkg/sub/h2", NULL};
	const char *ro[] = {"src/pkg", NULL};
	char script[] = "echo x >> src/a && echo a;"
			" touch src/new && echo new;"
			" (echo x >> src/h) 2>/dev/null && echo h;"
			" (echo x >> src/pkg/x) 2>/dev/null && echo x;"
			" touch src/pkg/new 2>/dev/null && echo pkgnew;"
			" (echo x >> src/pkg/sub/h2) 2>/dev/null && echo h2;"
			" cat src/h src/pkg/sub/h2";
	char *argv[] = {"/bin/sh", "-c", script, NULL};
	struct sbx_spec sp;
	struct outcome o;

	fx_setup(&f, NULL);
	snprintf(path, sizeof(path), "%s/src", f.ws);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/src/pkg", f.ws);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/src/pkg/sub", f.ws);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/src/a", f.ws);
	test_write_file(path, "a\n");
	snprintf(path, sizeof(path), "%s/src/pkg/x", f.ws);
	test_write_file(path, "x\n");
	for (int i = 0; i < 2; i++) {
		snprintf(out[i], sizeof(out[i]), "%s/h%d", f.outside, i);
		test_write_file(out[i], "original\n");
		snprintf(path, sizeof(path), "%s/%s", f.ws, names[i]);
		if (link(out[i], path) < 0)
			TEST_SKIP("cannot hard-link %s into the workspace: %s",
				  out[i], strerror(errno));
	}
	spec_init(&f, &sp, argv);
	sp.link_names = names;
	sp.link_ro_dirs = ro;
	run(&f, &sp, &o);
	REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s: %s", o.error_code,
		      o.error_msg);
	ck_assert_str_eq(o.out.data ? o.out.data : "",
			 "a\nnew\noriginal\noriginal\n");
	lw_assert_file(out[0], "original\n");
	lw_assert_file(out[1], "original\n");
	snprintf(path, sizeof(path), "%s/src/pkg/x", f.ws);
	lw_assert_file(path, "x\n");
	outcome_free(&o);
	fx_teardown(&f);
}
END_TEST

/*
 * Renames inside the workspace keep spd's list (an editor's save, git's
 * lock files, mv): no new walk, and the list follows them.  A file
 * renamed, then linked from outside, is listed under its new name; a
 * directory renamed takes its listed names along; sandboxd, given that
 * list, binds them read-only: the files outside do not change.  A
 * directory moved out, one of its files linked to from outside while it
 * is out there, and moved back in under another name, drops the list (it
 * was beyond the watch): the next walk lists the link, and the run
 * protects it.
 */
START_TEST(linkwatch_renames_kept)
{
	struct fixture f;
	struct linkwatch *lw;
	const char *const *names;
	char in[PATH_MAX], out[PATH_MAX];
	char a[PATH_MAX + 32], b[PATH_MAX + 32], f2out[PATH_MAX + 32],
	    f3out[PATH_MAX + 32];
	static char write_all[] =
	    "for h in planted moved/shared moved/f2.renamed; do"
	    " (echo written > $h) 2>/dev/null && echo write:$h;"
	    " done; echo done";
	static char write_back[] =
	    "(echo written > back/f3) 2>/dev/null && echo write; echo done";

	lw_setup(&f, &lw);
	ck_assert(lw_list(&f, lw, &names));
	lw_plant(&f, in, out, sizeof(in));
	ck_assert(lw_list(&f, lw, &names));
	/* An editor's save: a new file renamed over sub/f1. */
	snprintf(b, sizeof(b), "%s/sub/f1", f.ws);
	lw_save(b);
	/* A file renamed, then linked from outside under its new name. */
	snprintf(a, sizeof(a), "%s/sub/f2", f.ws);
	snprintf(b, sizeof(b), "%s/sub/f2.renamed", f.ws);
	ck_assert_int_eq(rename(a, b), 0);
	snprintf(f2out, sizeof(f2out), "%s/f2.out", f.outside);
	ck_assert_int_eq(link(b, f2out), 0);
	/* The directory renamed, with its listed names. */
	snprintf(a, sizeof(a), "%s/sub", f.ws);
	snprintf(b, sizeof(b), "%s/moved", f.ws);
	ck_assert_int_eq(rename(a, b), 0);
	ck_assert(lw_list(&f, lw, &names));
	ck_assert_uint_eq(linkwatch_walks(lw), 1);
	ck_assert(listed(names, "planted"));
	ck_assert(listed(names, "moved/shared"));
	ck_assert(listed(names, "moved/f2.renamed"));
	ck_assert(!listed(names, "sub/shared"));
	lw_run(&f, names, write_all, "done\n");
	lw_assert_file(in, "original\n");
	lw_assert_file(out, "original\n");
	lw_assert_file(f2out, "x\n");
	/* Many saves read at once, and a directory deleted whole: the
	 * list is kept through both. */
	for (int i = 0; i < 40; i++) {
		snprintf(b, sizeof(b), "%s/moved/f%d", f.ws, 10 + i % 10);
		lw_save(b);
	}
	snprintf(a, sizeof(a), "%s/moved/build", f.ws);
	ck_assert_int_eq(mkdir(a, 0755), 0);
	ck_assert_int_eq(bench_make_files(a, 30, 3), 0);
	ck_assert(lw_list(&f, lw, &names));
	test_rmrf(a);
	ck_assert(lw_list(&f, lw, &names));
	ck_assert_uint_eq(linkwatch_walks(lw), 1);
	ck_assert(listed(names, "moved/shared"));

	/* Out, linked to while out there, back in elsewhere. */
	snprintf(a, sizeof(a), "%s/moved", f.ws);
	snprintf(b, sizeof(b), "%s/away", f.outside);
	ck_assert_int_eq(rename(a, b), 0);
	snprintf(a, sizeof(a), "%s/away/f3", f.outside);
	snprintf(f3out, sizeof(f3out), "%s/f3.out", f.outside);
	ck_assert_int_eq(link(a, f3out), 0);
	snprintf(a, sizeof(a), "%s/back", f.ws);
	ck_assert_int_eq(rename(b, a), 0);
	ck_assert_int_eq(lw_names(lw, f.ws, &names), 0);
	ck_assert(lw_list(&f, lw, &names));
	ck_assert_uint_eq(linkwatch_walks(lw), 2);
	ck_assert(listed(names, "back/f3"));
	lw_run(&f, names, write_back, "done\n");
	lw_assert_file(f3out, "x\n");
	linkwatch_free(lw);
	fx_teardown(&f);
}
END_TEST

/*
 * A directory arriving in the workspace is walked as the queue is read,
 * on spd's loop: a small one there (the list kept, a link planted in it
 * listed), one past LW_EVENT_WALK_MAX entries (npm install, a tree moved
 * in) on the thread pool from scratch instead, and its link listed then.
 */
START_TEST(linkwatch_big_arrival_walked_aside)
{
	struct fixture f;
	struct linkwatch *lw;
	const char *const *names;
	char a[PATH_MAX + 32], b[PATH_MAX + 64], in[PATH_MAX + 32];

	lw_setup(&f, &lw);
	ck_assert(lw_list(&f, lw, &names));
	snprintf(in, sizeof(in), "%s/in.txt", f.outside);
	test_write_file(in, "original\n");
	for (int i = 0; i < 2; i++) {
		long files = i ? 5000 : 10;

		snprintf(a, sizeof(a), "%s/tree%d", f.outside, i);
		ck_assert_int_eq(mkdir(a, 0755), 0);
		ck_assert_int_eq(bench_make_files(a, files, 50), 0);
		snprintf(b, sizeof(b), "%s/d000/linked", a);
		ck_assert_int_eq(link(in, b), 0);
		snprintf(b, sizeof(b), "%s/tree%d", f.ws, i);
		ck_assert_int_eq(rename(a, b), 0);
		ck_assert_int_eq(lw_names(lw, f.ws, &names), !i);
		ck_assert(lw_list(&f, lw, &names));
		ck_assert_uint_eq(linkwatch_walks(lw), i ? 2 : 1);
		snprintf(b, sizeof(b), "tree%d/d000/linked", i);
		ck_assert_msg(listed(names, b), "%s not listed", b);
	}
	linkwatch_free(lw);
	fx_teardown(&f);
}
END_TEST

/*
 * A tree removed whole (rm -rf of a build's output, node_modules) keeps
 * the list: each file's IN_ATTRIB comes with its directory already gone
 * when the queue is read, and used to wait for the queue's end, past the
 * room for such events, which dropped the state (a full walk in sandboxd
 * at the next run: 17-99 ms after 20,000 files here).  A link planted
 * afterwards is still seen.  Since the IN_ATTRIBs wait apart (applied
 * once per file at a read's end), the events that wait so are the names
 * made in directories removed before the read: a build's temporary
 * directories, below.
 */
START_TEST(linkwatch_tree_removed_kept)
{
	struct fixture f;
	struct linkwatch *lw;
	const char *const *names;
	char a[PATH_MAX + 64], in[PATH_MAX], out[PATH_MAX];

	lw_setup(&f, &lw);
	ck_assert(lw_list(&f, lw, &names));
	snprintf(a, sizeof(a), "%s/build", f.ws);
	ck_assert_int_eq(mkdir(a, 0755), 0);
	ck_assert_int_eq(bench_make_files(a, 2000, 20), 0);
	ck_assert(lw_list(&f, lw, &names));
	ck_assert_uint_gt(linkwatch_watches(lw), 2000);
	test_rmrf(a);
	lw_plant(&f, in, out, sizeof(in));
	ck_assert_int_eq(lw_names(lw, f.ws, &names), 1);
	ck_assert_uint_eq(linkwatch_walks(lw), 1);
	/* Their watches went with them, and a walk of another workspace
	 * may have them (its budget counts the watches held). */
	ck_assert_uint_lt(linkwatch_watches(lw), 100);
	ck_assert(listed(names, "planted"));
	ck_assert(listed(names, "sub/shared"));
	lw_check(&f, names, in, out);
	/* A build's temporary directories, watched, each given files and
	 * removed before the next read: the names made in each wait for the
	 * queue's end (their directory is gone when read) until its
	 * IN_IGNORED, 800 of them in all, more than the 256 that may wait
	 * at once. */
	snprintf(a, sizeof(a), "%s/build", f.ws);
	ck_assert_int_eq(mkdir(a, 0755), 0);
	for (int i = 0; i < 400; i++) {
		snprintf(a, sizeof(a), "%s/build/t%d", f.ws, i);
		ck_assert_int_eq(mkdir(a, 0755), 0);
	}
	ck_assert(lw_list(&f, lw, &names));
	for (int i = 0; i < 400; i++) {
		char b[PATH_MAX + 96];

		for (int k = 0; k < 2; k++) {
			snprintf(b, sizeof(b), "%s/build/t%d/o%d", f.ws, i, k);
			test_write_file(b, "x\n");
		}
		snprintf(a, sizeof(a), "%s/build/t%d", f.ws, i);
		test_rmrf(a);
	}
	ck_assert_int_eq(lw_names(lw, f.ws, &names), 1);
	ck_assert_uint_eq(linkwatch_walks(lw), 1);
	ck_assert(listed(names, "planted"));
	linkwatch_free(lw);
	fx_teardown(&f);
}
END_TEST

static void lw_spin(struct fixture *f, long ms);

/*
 * spd's walk of a workspace where rm -rf is running: names vanish under
 * it, directories too.  It completes (what went needs nothing), and the
 * run after it has the list: a walk that failed leaves the next 64 runs
 * to sandboxd's walk.  Each round races a fresh watch's first walk with
 * the removal of 4,000 files (about 12,500 events: under the queue's
 * 16,384, which the walk's own state has to hold until it is installed).
 */
START_TEST(linkwatch_walk_races_rm)
{
	struct fixture f;
	struct linkwatch *lw;
	const char *const *names;
	char a[PATH_MAX + 64];

	lw_setup(&f, &lw);
	linkwatch_free(lw);
	for (int round = 0; round < 16; round++) {
		pid_t pid;
		int st;

		ck_assert_int_eq(linkwatch_new(&f.loop, &lw), 0);
		snprintf(a, sizeof(a), "%s/tree%d", f.ws, round);
		ck_assert_int_eq(mkdir(a, 0755), 0);
		ck_assert_int_eq(bench_make_files(a, 4000, 400), 0);
		pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			execlp("rm", "rm", "-rf", a, (char *)NULL);
			_exit(127);
		}
		ck_assert_int_eq(lw_names(lw, f.ws, &names), 0);
		while (linkwatch_walking(lw, f.ws))
			uv_run(&f.loop, UV_RUN_ONCE);
		ck_assert_int_eq(waitpid(pid, &st, 0), pid);
		ck_assert_msg(lw_names(lw, f.ws, &names) == 1,
			      "round %d: the walk racing rm -rf failed", round);
		/* Its handles close on the loop's next turns. */
		linkwatch_free(lw);
		for (int i = 0; i < 3; i++)
			uv_run(&f.loop, UV_RUN_NOWAIT);
	}
	fx_teardown(&f);
}
END_TEST

/*
 * A workspace where files are made and deleted by the ten thousand (a
 * build all day) keeps a bounded state: past LW_DEAD_SLACK nodes of
 * deleted entries beyond twice the live ones, a read in the background
 * drops it for a fresh walk, and the next run has the new list.
 */
START_TEST(linkwatch_dead_nodes_bounded)
{
	struct fixture f;
	struct linkwatch *lw;
	const char *const *names;
	char a[PATH_MAX + 64];

	lw_setup(&f, &lw);
	ck_assert(lw_list(&f, lw, &names));
	for (int i = 0; i < 9; i++) {
		snprintf(a, sizeof(a), "%s/tmp%d", f.ws, i);
		ck_assert_int_eq(mkdir(a, 0755), 0);
		ck_assert_int_eq(bench_make_files(a, 3000, 30), 0);
		ck_assert(lw_list(&f, lw, &names));
		test_rmrf(a);
		ck_assert(lw_list(&f, lw, &names));
		if (i != 2)
			continue;
		/* 9,000 dead: kept, and no walk. */
		lw_spin(&f, 50);
		ck_assert_uint_eq(linkwatch_walks(lw), 1);
	}
	/* 27,000: the background read drops the state and walks again. */
	snprintf(a, sizeof(a), "%s/last", f.ws);
	test_write_file(a, "x\n");
	lw_spin(&f, 200);
	for (int i = 0; i < 10000 && linkwatch_walking(lw, f.ws); i++)
		lw_spin(&f, 1);
	ck_assert_uint_eq(linkwatch_walks(lw), 2);
	ck_assert_int_eq(lw_names(lw, f.ws, &names), 1);
	linkwatch_free(lw);
	fx_teardown(&f);
}
END_TEST

/* The loop run for ms milliseconds of real time, as spd's runs between
 * its clients' requests: the watch reads its queues in the background. */
static void lw_spin(struct fixture *f, long ms)
{
	struct timespec ts = {0, 1000000};

	for (long long end = mono_ms() + ms; mono_ms() < end;) {
		uv_run(&f->loop, UV_RUN_NOWAIT);
		nanosleep(&ts, NULL);
	}
}

/*
 * The queue is read on the loop shortly after events come, without a run
 * asking: a run after a commit's or a build's worth of changes reads
 * nothing itself, and finds both links planted since listed (and
 * protected).  A directory moved out of the workspace drops the state in
 * the background and the new walk starts then, so that the run after it
 * has a list again, with a link made below that directory while it was
 * out.
 */
START_TEST(linkwatch_read_in_background)
{
	struct fixture f;
	struct linkwatch *lw;
	const char *const *names;
	char a[PATH_MAX + 128], b[PATH_MAX + 64], in[PATH_MAX], out[PATH_MAX];
	unsigned long run_events;

	lw_setup(&f, &lw);
	ck_assert(lw_list(&f, lw, &names));
	run_events = linkwatch_events(lw, true);
	snprintf(a, sizeof(a), "%s/gen", f.ws);
	ck_assert_int_eq(mkdir(a, 0755), 0);
	ck_assert_int_eq(bench_make_files(a, 300, 10), 0);
	lw_plant(&f, in, out, sizeof(in));
	lw_spin(&f, 150);
	/* (The directory's files came before its watch: its walk found
	 * them, not events.) */
	ck_assert_uint_gt(linkwatch_events(lw, false), 0);
	ck_assert(lw_list(&f, lw, &names));
	ck_assert_uint_eq(linkwatch_events(lw, true), run_events);
	ck_assert_uint_eq(linkwatch_walks(lw), 1);
	ck_assert(listed(names, "planted"));
	ck_assert(listed(names, "sub/shared"));
	lw_check(&f, names, in, out);
	/* Out, and nothing else happens until the walk is over. */
	snprintf(b, sizeof(b), "%s/gen", f.outside);
	ck_assert_int_eq(rename(a, b), 0);
	lw_spin(&f, 200);
	ck_assert_uint_eq(linkwatch_walks(lw), 2);
	for (int i = 0; i < 10000 && linkwatch_walking(lw, f.ws); i++)
		lw_spin(&f, 1);
	ck_assert(!linkwatch_walking(lw, f.ws));
	snprintf(a, sizeof(a), "%s/d000/f0000000", b);
	snprintf(in, sizeof(in), "%s/genlink", f.outside);
	ck_assert_int_eq(link(a, in), 0);
	snprintf(a, sizeof(a), "%s/back", f.ws);
	ck_assert_int_eq(rename(b, a), 0);
	ck_assert_int_eq(lw_names(lw, f.ws, &names), 1);
	ck_assert_uint_eq(linkwatch_walks(lw), 2);
	ck_assert_msg(listed(names, "back/d000/f0000000"),
		      "a link made out there is not listed");
	linkwatch_free(lw);
	fx_teardown(&f);
}
END_TEST

/* Whether a thread of this process runs at nice value nice (field 19 of
 * /proc/self/task/TID/stat). */
static bool thread_at_nice(long nice)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	bool found = false;

	while (d && !found && (de = readdir(d))) {
		char path[300], buf[1024], *p;
		long v = 0;
		FILE *fp;
		int field = 2;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/stat",
			 de->d_name);
		if (!(fp = fopen(path, "re")))
			continue;
		p = fgets(buf, sizeof(buf), fp) ? strrchr(buf, ')') : NULL;
		fclose(fp);
		/* Fields 3 on follow the name's closing parenthesis. */
		for (char *tok = p ? strtok(p + 1, " ") : NULL; tok;
		     tok = strtok(NULL, " "))
			if (++field == 19) {
				v = strtol(tok, NULL, 10);
				found = v == nice;
				break;
			}
	}
	if (d)
		closedir(d);
	return found;
}

/*
 * spd's walks of workspaces: at most two at once (each holds a thread of
 * libuv's pool, which journal queries need too); a third workspace asked
 * for meanwhile is walked when one of them ends, without being asked
 * again; and each walk runs at nice 19, so that it never takes a CPU from
 * a run (the first run of a big workspace waited for one).
 */
START_TEST(linkwatch_walks_bounded)
{
	struct fixture f;
	struct linkwatch *lw;
	const char *const *names;
	char w[3][PATH_MAX];
	bool saw_nice = false;
	/* Run under nice 19 already (nice make check), every thread is:
	 * the walk's cannot be told apart, and that half is not checked. */
	bool niced;

	errno = 0;
	niced = getpriority(PRIO_PROCESS, 0) >= 19 && errno == 0;
	if (niced)
		fprintf(stderr,
			"linkwatch_walks_bounded: the process runs at "
			"nice 19: the walk's own nice is not checked\n");
	lw_setup(&f, &lw);
	for (int i = 0; i < 3; i++) {
		snprintf(w[i], sizeof(w[i]), "%s/w%d", f.ws, i);
		ck_assert_int_eq(mkdir(w[i], 0755), 0);
		ck_assert_int_eq(bench_make_files(w[i], i ? 10 : 5000, 50), 0);
	}
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(lw_names(lw, w[i], &names), 0);
	ck_assert_uint_eq(linkwatch_walks(lw), 2);
	ck_assert(linkwatch_walking(lw, w[0]));
	ck_assert(!linkwatch_walking(lw, w[2]));
	while (linkwatch_walking(lw, w[0]) || linkwatch_walking(lw, w[1]) ||
	       linkwatch_walking(lw, w[2])) {
		saw_nice = saw_nice || thread_at_nice(19);
		uv_run(&f.loop, UV_RUN_NOWAIT);
	}
	ck_assert_msg(saw_nice || niced, "no walk ran at nice 19");
	ck_assert(niced || !thread_at_nice(19));
	ck_assert_uint_eq(linkwatch_walks(lw), 3);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(lw_names(lw, w[i], &names), 1);
	linkwatch_free(lw);
	fx_teardown(&f);
}
END_TEST

/* What is under the workspace, for the random test: relative paths of
 * its regular files and directories ("" is the workspace). */
struct lw_tree {
	char files[512][256], dirs[128][256];
	size_t nfiles, ndirs;
	/* Files with more than one link, which the list must hold. */
	char multi[512][256];
	size_t nmulti;
};

static void lw_tree_walk(const char *root, const char *rel, struct lw_tree *t)
{
	char path[PATH_MAX + 300], sub[256];
	struct dirent *d;
	struct stat sb;
	DIR *dir;

	snprintf(path, sizeof(path), "%s%s%s", root, rel[0] ? "/" : "", rel);
	if (!(dir = opendir(path)))
		return;
	if (t->ndirs < ARRAY_SIZE(t->dirs))
		snprintf(t->dirs[t->ndirs++], sizeof(t->dirs[0]), "%s", rel);
	while ((d = readdir(dir))) {
		if (d->d_name[0] == '.' &&
		    (!d->d_name[1] || (d->d_name[1] == '.' && !d->d_name[2])))
			continue;
		if (strlen(rel) + strlen(d->d_name) + 2 > sizeof(sub))
			continue;
		strcpy(sub, rel);
		if (rel[0])
			strcat(sub, "/");
		strcat(sub, d->d_name);
		snprintf(path, sizeof(path), "%s/%s", root, sub);
		if (lstat(path, &sb) < 0)
			continue;
		if (S_ISDIR(sb.st_mode)) {
			lw_tree_walk(root, sub, t);
		} else if (S_ISREG(sb.st_mode)) {
			if (t->nfiles < ARRAY_SIZE(t->files))
				snprintf(t->files[t->nfiles++],
					 sizeof(t->files[0]), "%s", sub);
			if (sb.st_nlink > 1 && t->nmulti < ARRAY_SIZE(t->multi))
				snprintf(t->multi[t->nmulti++],
					 sizeof(t->multi[0]), "%s", sub);
		}
	}
	closedir(dir);
}

/* A step that may fail (its name taken, its file gone): the test goes on
 * with whatever happened. */
static void lw_try(int r)
{
	(void)r;
}

static uint32_t lw_rand(uint32_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 17;
	*x ^= *x << 5;
	return *x;
}

/*
 * The list against the truth, over random sequences of what happens to a
 * workspace: files made, saved over, renamed inside, deleted; links
 * planted from outside and made out; directories made, renamed, moved
 * out and back (one linked to while out there).  After every few steps, every file of the workspace with
 * more than one link must be in spd's list (after a new walk when the
 * list was dropped): a name missing there is a file a run could change
 * outside.  Extra names are allowed (sandboxd judges each at run time).
 */
START_TEST(linkwatch_random_ops_match_walk)
{
	struct fixture f;
	struct linkwatch *lw;
	const char *const *names;
	static struct lw_tree t;
	char a[PATH_MAX + 300], b[PATH_MAX + 300], c[PATH_MAX + 300];
	unsigned long drops = 0, checks = 0;

	lw_setup(&f, &lw);
	ck_assert(lw_list(&f, lw, &names));
	for (uint32_t seed = 1; seed <= 3; seed++) {
		uint32_t x = 2463534242u * seed;

		for (int step = 0; step < 200; step++) {
			uint32_t op = lw_rand(&x) % 10;
			const char *fl, *dr;

			memset(&t, 0, sizeof(t));
			lw_tree_walk(f.ws, "", &t);
			fl = t.nfiles ? t.files[lw_rand(&x) % t.nfiles] : NULL;
			dr = t.dirs[lw_rand(&x) % t.ndirs];
			snprintf(b, sizeof(b), "%s/%s%sn%u-%d", f.ws, dr,
				 dr[0] ? "/" : "", seed, step);
			switch (op) {
			case 0: /* a new file */
				test_write_file(b, "x\n");
				break;
			case 1: /* a link planted from outside */
				snprintf(a, sizeof(a), "%s/o%u-%d", f.outside,
					 seed, step);
				test_write_file(a, "outside\n");
				lw_try(link(a, b));
				break;
			case 2: /* a link made out of a file inside */
				if (!fl)
					break;
				snprintf(a, sizeof(a), "%s/%s", f.ws, fl);
				snprintf(b, sizeof(b), "%s/out%u-%d", f.outside,
					 seed, step);
				lw_try(link(a, b));
				break;
			case 3: /* a file renamed inside */
				if (!fl)
					break;
				snprintf(a, sizeof(a), "%s/%s", f.ws, fl);
				(void)rename(a, b);
				break;
			case 4: /* an editor's save over a file */
				if (!fl)
					break;
				snprintf(b, sizeof(b), "%s/%s", f.ws, fl);
				lw_save(b);
				break;
			case 5: /* a file deleted */
				if (!fl)
					break;
				snprintf(a, sizeof(a), "%s/%s", f.ws, fl);
				(void)unlink(a);
				break;
			case 6: /* a new directory */
				(void)mkdir(b, 0755);
				break;
			case 7: /* a directory renamed to the top */
				if (!dr[0])
					break;
				snprintf(a, sizeof(a), "%s/%s", f.ws, dr);
				snprintf(b, sizeof(b), "%s/d%u-%d", f.ws, seed,
					 step);
				(void)rename(a, b);
				break;
			case 8: /* a file moved out, sometimes back */
				if (!fl)
					break;
				snprintf(a, sizeof(a), "%s/%s", f.ws, fl);
				snprintf(b, sizeof(b), "%s/away%u-%d",
					 f.outside, seed, step);
				if (rename(a, b) == 0 && lw_rand(&x) % 2)
					(void)rename(b, a);
				break;
			case 9: /* a directory out, a link made below it
				 * out there, back in elsewhere */
				/* A file there already (watched, so only its
				 * own event can tell of the link). */
				fl = NULL;
				for (size_t k = 0; dr[0] && k < t.nfiles; k++)
					if (!strncmp(t.files[k], dr,
						     strlen(dr)) &&
					    t.files[k][strlen(dr)] == '/')
						fl = t.files[k];
				if (!fl)
					break;
				snprintf(a, sizeof(a), "%s/%.255s", f.ws, dr);
				snprintf(b, sizeof(b), "%s/dir%u-%d", f.outside,
					 seed, step);
				if (rename(a, b) < 0)
					break;
				if (snprintf(a, sizeof(a), "%.4000s/%s", b,
					     fl + strlen(dr) + 1) >=
				    (int)sizeof(a))
					break;
				snprintf(c, sizeof(c), "%s/dout%u-%d",
					 f.outside, seed, step);
				lw_try(link(a, c));
				snprintf(a, sizeof(a), "%s/back%u-%d", f.ws,
					 seed, step);
				(void)rename(b, a);
				break;
			}
			/* Now and then the loop runs as between two
			 * requests, and the background reads apply what
			 * came (a rename out and back: after the delay). */
			if (lw_rand(&x) % 3 == 0)
				lw_spin(&f, 1 + lw_rand(&x) % 25);
			if (step % 5 != 4)
				continue;
			if (lw_names(lw, f.ws, &names) == 0) {
				drops++;
				ck_assert(lw_list(&f, lw, &names));
			}
			checks++;
			memset(&t, 0, sizeof(t));
			lw_tree_walk(f.ws, "", &t);
			for (size_t k = 0; k < t.nmulti; k++)
				ck_assert_msg(listed(names, t.multi[k]),
					      "seed %u step %d: %s has more "
					      "than one link and is not listed",
					      seed, step, t.multi[k]);
		}
	}
	fprintf(stderr,
		"linkwatch_random_ops_match_walk: %lu checks, %lu walks "
		"again\n",
		checks, drops);
	linkwatch_free(lw);
	fx_teardown(&f);
}
END_TEST

/* The link list on the wire: only canonical, strictly ordered names, and
 * only with SBXP_RUN_LINKS_LISTED, so that sandboxd can never be made to
 * count one name twice (which would hide a link outside). */
START_TEST(linkwatch_list_decoding)
{
	static char buf[SBXP_MSG_MAX];
	struct sbxp_run *m = (struct sbxp_run *)(void *)buf;
	const char *argv[] = {"/bin/true", NULL}, *none[] = {NULL};
	const char *good[] = {"a", "b/c", "b/d", NULL};
	const char *const bad[][3] = {
	    {"b", "a", NULL},	    {"a", "a", NULL},	 {"/a", NULL, NULL},
	    {"a/../b", NULL, NULL}, {"./a", NULL, NULL}, {"a//b", NULL, NULL},
	    {"a/", NULL, NULL},	    {"", NULL, NULL},
	};
	const char *const *lists[SBXP_L__COUNT] = {argv, none, none, none,
						   none, none, none, good};
	struct sbxp_run_view v;
	long len;
	char *p;

	memset(buf, 0, sizeof(buf));
	ck_assert_int_eq(sbxp_run_encode(m, "/ws", NULL, NULL, lists), -EINVAL);
	m->flags = SBXP_RUN_LINKS_LISTED;
	len = sbxp_run_encode(m, "/ws", NULL, NULL, lists);
	ck_assert_int_gt(len, 0);
	ck_assert_int_eq(sbxp_run_decode(buf, (size_t)len, &v), 0);
	ck_assert_str_eq(v.lists[SBXP_L_LINKS][2], "b/d");
	ck_assert_ptr_null(v.lists[SBXP_L_LINKS][3]);
	sbxp_run_view_free(&v);
	/* Made a duplicate on the wire ("b/d" -> "b/c"). */
	p = (char *)memmem(m->strtab, m->strtab_len, "b/d", 4);
	ck_assert_ptr_nonnull(p);
	p[2] = 'c';
	ck_assert_int_eq(sbxp_run_decode(buf, (size_t)len, &v), -SPD_EPROTO);
	p[2] = 'd';
	m->flags = 0;
	ck_assert_int_eq(sbxp_run_decode(buf, (size_t)len, &v), -SPD_EPROTO);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		lists[SBXP_L_LINKS] = bad[i];
		m->flags = SBXP_RUN_LINKS_LISTED;
		ck_assert_int_eq(sbxp_run_encode(m, "/ws", NULL, NULL, lists),
				 -EINVAL);
	}
}
END_TEST

/* The fallback: events the watch cannot account for (a queue that
 * overflowed, a rename) give no list, and the run gets sandboxd's full
 * walk, which binds both names as before. */
START_TEST(linkwatch_fallback_walks)
{
	struct fixture f;
	struct linkwatch *lw;
	const char *const *names;
	char in[PATH_MAX], out[PATH_MAX], a[PATH_MAX + 8], b[PATH_MAX + 8];
	unsigned long max = 16384;
	FILE *fp;

	lw_setup(&f, &lw);
	ck_assert(lw_list(&f, lw, &names));
	lw_plant(&f, in, out, sizeof(in));
	/* More events than the queue holds (alternating between two
	 * files, so that the kernel cannot merge them). */
	if ((fp = fopen("/proc/sys/fs/inotify/max_queued_events", "re"))) {
		if (fscanf(fp, "%lu", &max) != 1)
			max = 16384;
		fclose(fp);
	}
	snprintf(a, sizeof(a), "%s/sub/f1", f.ws);
	snprintf(b, sizeof(b), "%s/sub/f2", f.ws);
	for (unsigned long i = 0; i <= max + 2; i++)
		ck_assert_int_eq(chmod(i % 2 ? a : b, i % 4 < 2 ? 0644 : 0600),
				 0);
	ck_assert_int_eq(lw_names(lw, f.ws, &names), 0);
	lw_check(&f, NULL, in, out);
	/* Watched again after a new walk; then a file moved out of the
	 * workspace drops the list. */
	ck_assert(lw_list(&f, lw, &names));
	ck_assert_uint_eq(linkwatch_walks(lw), 2);
	snprintf(a, sizeof(a), "%s/sub/f3", f.ws);
	snprintf(b, sizeof(b), "%s/f3", f.outside);
	ck_assert_int_eq(rename(a, b), 0);
	ck_assert_int_eq(lw_names(lw, f.ws, &names), 0);
	lw_check(&f, NULL, in, out);
	linkwatch_free(lw);
	fx_teardown(&f);
}
END_TEST

/* /var/tmp is the run's own: what the host keeps there is not visible,
 * and what the run writes there does not reach the host. */
START_TEST(var_tmp_private)
{
	struct fixture f;
	struct outcome o;
	char tmpl[] = "/var/tmp/spd-test-vt-XXXXXX", script[PATH_MAX * 2 + 64];
	char path[PATH_MAX];

	fx_setup(&f, NULL);
	ck_assert_ptr_nonnull(mkdtemp(tmpl));
	chmod(tmpl, 0777);
	snprintf(path, sizeof(path), "%s/host.txt", tmpl);
	test_write_file(path, "HOST-ONLY\n");
	chmod(path, 0644);
	snprintf(script, sizeof(script),
		 "cat %s; mkdir -p %s && echo run > %s/run.txt && echo wrote",
		 path, tmpl, tmpl);
	run_sh(&f, script, &o);
	REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
	ck_assert_ptr_null(strstr(o.out.data ? o.out.data : "", "HOST-ONLY"));
	ck_assert_msg(strstr(o.out.data ? o.out.data : "", "wrote"),
		      "/var/tmp is not writable in a run: %s", o.err.data);
	snprintf(path, sizeof(path), "%s/run.txt", tmpl);
	ck_assert_msg(access(path, F_OK) < 0,
		      "the run wrote the host's /var/tmp");
	outcome_free(&o);
	test_rmrf(tmpl);
	fx_teardown(&f);
}
END_TEST

/*
 * A best-effort run where a layer is missing: sandboxd as uid 1000 in a
 * user namespace that may not create more (max_user_namespaces=0).  It
 * runs, without namespaces, and the result names what it went without.
 * The wrapper maps uids 0-65535 one to one, which needs root.
 */
static const char best_effort_wrapper[] =
    "#!/usr/bin/python3\n"
    "import ctypes, os\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "r, w = os.pipe(); r2, w2 = os.pipe()\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    os.close(w); os.close(r2)\n"
    "    if libc.unshare(0x10000000) != 0: os._exit(90)\n"
    "    os.write(w2, b'x'); os.close(w2); os.read(r, 1)\n"
    "    open('/proc/sys/user/max_user_namespaces', 'w').write('0')\n"
    "    os.setgroups([]); os.setresgid(%d, %d, %d)\n"
    "    os.setresuid(%d, %d, %d)\n"
    "    os.execv('%s', ['sandboxd'])\n"
    "os.close(r); os.close(w2); os.read(r2, 1)\n"
    "for f in ('uid_map', 'gid_map'):\n"
    "    open('/proc/%%d/%%s' %% (pid, f), 'w').write('0 0 65536\\n')\n"
    "os.write(w, b'x')\n"
    "os.waitpid(pid, 0)\n";

/* A best-effort run under the crippled sandboxd as uid (1000, or 0: as
 * root in its user namespace) runs, with a warning holding want; the same
 * run in required mode is refused. */
static void best_effort_case(int uid, const char *want)
{
	struct fixture f;
	struct outcome o;
	char *tmp, wrapper[PATH_MAX], *prog, *script = NULL;
	char *argv[] = {"/bin/sh", "-c", "echo ran", NULL};
	struct sbx_spec sp;

	if (geteuid() != 0)
		TEST_SKIP("needs root to map a whole uid range for a "
			  "crippled sandboxd");
	if (access("/usr/bin/python3", X_OK) < 0)
		TEST_SKIP("needs /usr/bin/python3");
	tmp = test_tmpdir("sbxwrap");
	prog = test_prog("sandboxd");
	snprintf(wrapper, sizeof(wrapper), "%s/sandboxd", tmp);
	ck_assert_int_ge(asprintf(&script, best_effort_wrapper, uid, uid, uid,
				  uid, uid, uid, prog),
			 0);
	test_write_file(wrapper, script);
	chmod(wrapper, 0755);
	chmod(tmp, 0755);
	fx_setup(&f, wrapper);
	/* uid 1000 must reach its working directory. */
	chmod(f.ws, 0777);
	spec_init(&f, &sp, argv);
	sp.best_effort = true;
	run(&f, &sp, &o);
	ck_assert_msg(o.error_code == NULL, "%s: %s", o.error_code,
		      o.error_msg);
	ck_assert_msg(o.nwarn > 0, "a best-effort run without a layer said "
				   "nothing");
	ck_assert_msg(strstr(o.warnings, want), "no warning of \"%s\": %s",
		      want, o.warnings);
	ck_assert_str_eq(o.out.data ? o.out.data : "", "ran\n");
	outcome_free(&o);

	/* The control: the same sandboxd refuses a required-mode run. */
	spec_init(&f, &sp, argv);
	run(&f, &sp, &o);
	ck_assert_ptr_nonnull(o.error_code);
	ck_assert_str_eq(o.error_code, "SANDBOX-UNAVAILABLE");
	ck_assert_ptr_null(o.out.data);
	outcome_free(&o);
	fx_teardown(&f);
	test_rmrf(tmp);
	free(tmp);
	free(prog);
	free(script);
}

START_TEST(best_effort_warns)
{
	best_effort_case(1000, "user namespaces");
}
END_TEST

/* As root where no user namespace can be made: the run's own (for its
 * process limit) is missing too, and said so; required mode refuses. */
START_TEST(best_effort_root_warns)
{
	best_effort_case(0, "process limit: a user namespace of the run's own");
}
END_TEST

struct probe_out {
	bool done, got;
	struct sbx_layers l;
};

static void on_probe(void *data, const struct sbx_layers *l)
{
	struct probe_out *p = data;

	p->done = true;
	if (l) {
		p->got = true;
		p->l = *l;
	}
}

/* spctl doctor's source: the layers as sandboxd sees them. */
START_TEST(probe_reports_layers)
{
	struct fixture f;
	struct probe_out p = {0};

	fx_setup(&f, NULL);
	ck_assert_int_eq(sbx_probe(f.s, on_probe, &p), 0);
	while (!p.done)
		uv_run(&f.loop, UV_RUN_ONCE);
	ck_assert(p.got);
	ck_assert_int_eq(p.l.landlock_abi, layer_landlock_abi());
	if (!p.l.userns)
		ck_assert_msg(p.l.userns_why[0], "a missing layer says why");
	/* Every run executes sandboxd-init: were it refused here, every
	 * other test of this suite would fail, so say why first. */
	ck_assert_msg(p.l.run_init, "run init: %s", p.l.run_init_why);
	fx_teardown(&f);
}
END_TEST

/*
 * Each run after the first is served by the spare sandboxd clones ahead
 * (sandboxd/linux/spawn.h): nothing one run leaves (a file in its /tmp, a
 * process, its hostname) is seen by the next.  (Namespace inode numbers
 * are reused once freed, so they cannot tell runs apart.)
 */
START_TEST(spare_fresh_each_run)
{
	struct fixture f;
	struct outcome o;
	char s[] = "cat /tmp/left 2>/dev/null && echo LEAKED-TMP; "
		   "[ \"$(hostname)\" = sandbox ] || echo LEAKED-HOSTNAME; "
		   "pgrep -x sleep >/dev/null && echo LEAKED-PROCESS; "
		   "echo left > /tmp/left; hostname other 2>/dev/null; "
		   "(sleep 30 &); echo ran";

	fx_setup(&f, NULL);
	for (int i = 0; i < 3; i++) {
		run_sh(&f, s, &o);
		REQUIRE_SANDBOX(&o);
		ck_assert_msg(o.error_code == NULL, "%s: %s", o.error_code,
			      o.error_msg);
		ck_assert_str_eq(o.out.data ? o.out.data : "", "ran\n");
		outcome_free(&o);
		wait_for_spare();
	}
	fx_teardown(&f);
}
END_TEST

/*
 * A spare's mounts are a copy of sandboxd's from when it was made: a file
 * system mounted after that, where no propagation brings it over
 * (sandboxd's mounts all private here), is still seen by the next run,
 * which must then not take that spare.  Root: the test mounts.
 */
START_TEST(spare_sees_later_mounts)
{
	struct fixture f;
	struct outcome o;
	char dir[PATH_MAX], file[PATH_MAX + 16], s[PATH_MAX + 32];

	if (geteuid() != 0)
		TEST_SKIP("needs root to mount a file system");
	ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
	ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	fx_setup(&f, NULL);
	run_sh(&f, "true", &o);
	REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
	outcome_free(&o);
	/* Now, after the run: sandboxd has made its spare. */
	wait_for_spare();
	snprintf(dir, sizeof(dir), "%s/later", f.outside);
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	ck_assert_int_eq(mount("tmpfs", dir, "tmpfs", 0, "mode=0755"), 0);
	snprintf(file, sizeof(file), "%s/marker", dir);
	test_write_file(file, "MOUNTED-LATER\n");
	chmod(file, 0644);
	snprintf(s, sizeof(s), "cat %s", file);
	run_sh(&f, s, &o);
	ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
	ck_assert_msg(o.out.data && strstr(o.out.data, "MOUNTED-LATER"),
		      "the run missed a mount made before it started: %s",
		      o.err.data ? o.err.data : "");
	outcome_free(&o);
	umount2(dir, MNT_DETACH);
	fx_teardown(&f);
}
END_TEST

/*
 * The hot spare (sandboxd/linux/spawn.h): after a run whose link check
 * spd's list decides, the spare is set up ahead for a run like it (its
 * mounts, directory and confinement), and a run that is the same but for
 * its command, environment and descriptors only executes there.  These
 * tests read sandboxd's step trace for "heated" (the spare was set up)
 * and "hot" (a run took it), so that each can tell which way a run went.
 */
static const char *const hot_no_links[] = {NULL};

struct hot_fx {
	struct fixture f;
	char trace[PATH_MAX];
	char *tdir;
};

/* Why the hot tests cannot run here, for hot_setup. */
enum hot_why { HOT_OK, HOT_NO_SPARES, HOT_NO_SANDBOX };

/* A fixture whose sandboxd writes the step trace to h->trace, once a
 * sandboxd of its own has run a command here.  HOT_OK, or why not (the
 * fixture then not made). */
static enum hot_why hot_try_setup(struct hot_fx *h)
{
	struct fixture probe;
	struct outcome o;
	bool no;

	if (!SPAWN_SHARED_VM)
		return HOT_NO_SPARES;
	fx_setup(&probe, NULL);
	run_sh(&probe, "true", &o);
	no = unavailable(&o);
	outcome_free(&o);
	fx_teardown(&probe);
	if (no)
		return HOT_NO_SANDBOX;
	h->tdir = test_tmpdir("hot");
	snprintf(h->trace, sizeof(h->trace), "%s/trace", h->tdir);
	setenv(TRACE_ENV, h->trace, 1);
	ck_assert_int_eq(trace_open_env("test"), 0);
	fx_setup(&h->f, NULL);
	return HOT_OK;
}

/* hot_try_setup, or the test skipped and why (in the test itself: the
 * skip returns from the function it is in). */
#define hot_setup(h)                                                           \
	do {                                                                   \
		enum hot_why why_ = hot_try_setup(h);                          \
		if (why_ == HOT_NO_SPARES)                                     \
			TEST_SKIP("no spare is used under AddressSanitizer "   \
				  "(sandboxd/linux/child.h, "                  \
				  "SPAWN_SHARED_VM)");                         \
		if (why_ == HOT_NO_SANDBOX)                                    \
			TEST_SKIP_LAYER("sandbox", "sandbox unavailable "      \
						   "here");                    \
	} while (0)

static void hot_teardown(struct hot_fx *h)
{
	fx_teardown(&h->f);
	trace_close();
	unsetenv(TRACE_ENV);
	test_rmrf(h->tdir);
	free(h->tdir);
}

/* Lines of sandboxd's trace whose step is step. */
static int hot_count(const struct hot_fx *h, const char *step)
{
	char *t = test_read_file(h->trace), want[64];
	int n = 0;

	snprintf(want, sizeof(want), " sandboxd %s\n", step);
	for (char *p = t; p && (p = strstr(p, want)); p += strlen(want))
		n++;
	free(t);
	return n;
}

/* Waits (10 s at most) until sandboxd has heated its spare n times in
 * all: the spare is made 1 ms after a run and heated once ready. */
static void hot_wait_heated(const struct hot_fx *h, int n)
{
	for (int i = 0; i < 1000 && hot_count(h, "heated") < n; i++)
		usleep(10 * 1000);
	ck_assert_int_eq(hot_count(h, "heated"), n);
}

/* sh -c script with spd's link list names, from cwd (NULL: the
 * workspace), with FOO=foo in the environment and nofile as
 * RLIMIT_NOFILE (0: the default). */
static void hot_run_links(struct hot_fx *h, char *script, const char *cwd,
			  const char *foo, uint64_t nofile,
			  const char *const *names, struct outcome *o)
{
	char env_foo[64];
	char *argv[] = {"/bin/sh", "-c", script, NULL};
	char *envp[] = {"PATH=/usr/bin:/bin", env_foo, NULL};
	struct sbx_spec sp;

	snprintf(env_foo, sizeof(env_foo), "FOO=%s", foo);
	spec_init(&h->f, &sp, argv);
	sp.envp = envp;
	sp.cwd = cwd;
	sp.link_names = names;
	sp.rlimits[SBXP_RLIM_NOFILE] = nofile;
	run(&h->f, &sp, o);
	ck_assert_msg(o->error_code == NULL, "%s: %s", o->error_code,
		      o->error_msg);
}

/* The same, with an empty list: nothing in the workspace is multi-linked. */
static void hot_run(struct hot_fx *h, char *script, const char *cwd,
		    const char *foo, uint64_t nofile, struct outcome *o)
{
	hot_run_links(h, script, cwd, foo, nofile, hot_no_links, o);
}

/* Each run on a hot spare is its own command: its argv, environment,
 * output and status.  A run with another directory or limit than the
 * spare was heated for is not served by it, and gets what it asked. */
START_TEST(hot_spare_runs_each_command)
{
	struct hot_fx h;
	struct outcome o;
	char sub[PATH_MAX], want[PATH_MAX + 16];
	char script[] = "echo \"$FOO\"; pwd; ulimit -n; exit 3";

	hot_setup(&h);
	snprintf(sub, sizeof(sub), "%s/sub", h.f.ws);
	ck_assert_int_eq(mkdir(sub, 0755), 0);
	/* cwd, FOO, nofile; hot: whether the run finds the spare heated for
	 * it (the one before had the same directory and limit). */
	struct {
		const char *cwd, *foo;
		uint64_t nofile;
		bool hot;
	} runs[] = {
	    {NULL, "one", 0, false},   {NULL, "two", 0, true},
	    {sub, "three", 0, false},  {sub, "four", 0, true},
	    {sub, "five", 200, false}, {sub, "six", 200, true},
	};
	int hot = 0;
	struct rlimit rl;

	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	for (size_t i = 0; i < ARRAY_SIZE(runs); i++) {
		if (i > 0)
			hot_wait_heated(&h, (int)i);
		hot_run(&h, script, runs[i].cwd, runs[i].foo, runs[i].nofile,
			&o);
		uint64_t nofile =
		    runs[i].nofile ? runs[i].nofile : SPAWN_RLIM_NOFILE;

		/* Kept or lowered, never raised (child.c). */
		if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < nofile)
			nofile = rl.rlim_max;
		snprintf(want, sizeof(want), "%s\n%s\n%llu\n", runs[i].foo,
			 runs[i].cwd ? runs[i].cwd : h.f.ws,
			 (unsigned long long)nofile);
		ck_assert_str_eq(o.out.data ? o.out.data : "", want);
		ck_assert_int_eq(o.exit_code, 3);
		hot += runs[i].hot;
		ck_assert_int_eq(hot_count(&h, "hot"), hot);
		outcome_free(&o);
	}
	hot_teardown(&h);
}
END_TEST

/*
 * Four sessions' commands in turns (parallel agents, each in its own
 * worktree), each in its own workspace: after the first of each, each
 * run finds a spare heated for its own, and a run that fits no hot spare
 * (the first in each other workspace) takes the cold one instead of a
 * clone of its own.
 */
#define HOT_TURN_WS 4
START_TEST(hot_spares_for_four_workspaces_in_turns)
{
	struct hot_fx h;
	struct outcome o;
	char *ws[HOT_TURN_WS], want[PATH_MAX + 8];
	char script[] = "pwd";

	hot_setup(&h);
	ws[0] = h.f.ws;
	for (int w = 1; w < HOT_TURN_WS; w++) {
		char name[16];

		snprintf(name, sizeof(name), "hot%d", w);
		ws[w] = test_tmpdir(name);
	}
	for (int i = 0; i < 3 * HOT_TURN_WS; i++) {
		char *argv[] = {"/bin/sh", "-c", script, NULL};
		struct sbx_spec sp;

		if (i > 0)
			hot_wait_heated(&h, i);
		spec_init(&h.f, &sp, argv);
		sp.workspace = ws[i % HOT_TURN_WS];
		sp.link_names = hot_no_links;
		run(&h.f, &sp, &o);
		REQUIRE_SANDBOX(&o);
		ck_assert_msg(o.error_code == NULL, "%s: %s", o.error_code,
			      o.error_msg);
		snprintf(want, sizeof(want), "%s\n", ws[i % HOT_TURN_WS]);
		ck_assert_str_eq(o.out.data ? o.out.data : "", want);
		outcome_free(&o);
		/* Run 0: cloned; 1 to 3, each the first in its workspace:
		 * the cold spare; from 4 on: hot. */
		ck_assert_int_eq(hot_count(&h, "hot"),
				 i < HOT_TURN_WS ? 0 : i - (HOT_TURN_WS - 1));
		ck_assert_int_eq(hot_count(&h, "spare"),
				 i < HOT_TURN_WS ? i : HOT_TURN_WS - 1);
	}
	hot_teardown(&h);
	for (int w = 1; w < HOT_TURN_WS; w++) {
		test_rmrf(ws[w]);
		free(ws[w]);
	}
}
END_TEST

/* The host swaps a covered credential directory for another between the
 * spare's heat and the run: the plan reads the same (~/.ssh covered), but
 * the spare's cover sits on the old one.  The run must not take it. */
static void hot_swap_ssh(struct hot_fx *h, bool rename_away)
{
	char ssh[PATH_MAX], old[PATH_MAX + 8], key[PATH_MAX + 16];
	char script[PATH_MAX + 32];
	struct outcome o;

	snprintf(ssh, sizeof(ssh), "%s/.ssh", h->f.outside);
	snprintf(old, sizeof(old), "%s.old", ssh);
	snprintf(key, sizeof(key), "%s/id_test", ssh);
	snprintf(script, sizeof(script), "cat %s", key);
	ck_assert_int_eq(mkdir(ssh, 0755), 0);
	hot_run(h, "true", NULL, "x", 0, &o);
	outcome_free(&o);
	hot_wait_heated(h, 1);
	if (rename_away)
		ck_assert_int_eq(rename(ssh, old), 0);
	else
		ck_assert_int_eq(rmdir(ssh), 0);
	ck_assert_int_eq(mkdir(ssh, 0755), 0);
	test_write_file(key, "CANARY-hot-7d1\n");
	chmod(key, 0644);
	/* The spare reads the same: it was heated for this plan. */
	hot_run(h, script, NULL, "x", 0, &o);
	ck_assert_ptr_null(strstr(o.out.data ? o.out.data : "", "CANARY"));
	ck_assert_msg(o.err.data && strstr(o.err.data, "id_test"),
		      "cat said nothing of the key: %s",
		      o.err.data ? o.err.data : "");
	ck_assert_int_eq(hot_count(h, "hot"), 0);
	outcome_free(&o);
}

/*
 * Two names of one file in the workspace (spd lists both): no link
 * outside, nothing bound, and the spare heated so.  Then the host links
 * the file out as well.  spd's list is the same two names, but the file
 * has a link outside now: the run must find its names read-only, and the
 * outside file unchanged.
 */
START_TEST(hot_spare_sees_a_link_made_outside)
{
	static const char *const names[] = {"sub/a", "sub/b", NULL};
	struct hot_fx h;
	struct outcome o;
	char a[PATH_MAX], b[PATH_MAX], out[PATH_MAX], *c;
	char script[] = "echo planted >> sub/a 2>/dev/null && echo WROTE; "
			"echo planted >> sub/b 2>/dev/null && echo WROTE; "
			"cat sub/a";

	hot_setup(&h);
	snprintf(a, sizeof(a), "%s/sub", h.f.ws);
	ck_assert_int_eq(mkdir(a, 0755), 0);
	snprintf(a, sizeof(a), "%s/sub/a", h.f.ws);
	snprintf(b, sizeof(b), "%s/sub/b", h.f.ws);
	snprintf(out, sizeof(out), "%s/out.txt", h.f.outside);
	test_write_file(a, "original\n");
	ck_assert_int_eq(link(a, b), 0);
	hot_run_links(&h, "true", NULL, "x", 0, names, &o);
	outcome_free(&o);
	hot_wait_heated(&h, 1);
	if (link(a, out) < 0)
		TEST_SKIP("cannot hard-link %s out of the workspace: %s", a,
			  strerror(errno));
	hot_run_links(&h, script, NULL, "x", 0, names, &o);
	ck_assert_str_eq(o.out.data ? o.out.data : "", "original\n");
	ck_assert_ptr_nonnull(c = test_read_file(out));
	ck_assert_str_eq(c, "original\n");
	free(c);
	ck_assert_int_eq(hot_count(&h, "hot"), 0);
	outcome_free(&o);
	hot_teardown(&h);
}
END_TEST

/* Both ways, each on a fixture of its own: renamed away, then removed
 * (its inode number free to come back). */
START_TEST(hot_spare_sees_swapped_credentials)
{
	/* A home in /tmp is out of the run's sight whole: no cover to
	 * swap. */
	if (outside_is_private())
		TEST_SKIP("no writable directory outside /tmp and /var/tmp; "
			  "set SPD_TEST_OUTSIDE");
	for (int pass = 0; pass < 2; pass++) {
		struct hot_fx h;

		hot_setup(&h);
		hot_swap_ssh(&h, pass == 0);
		hot_teardown(&h);
	}
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
	struct fixture f;
	struct outcome a, b;
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
	fx_setup(&f, NULL);
	spec_init(&f, &sp, argv_a);
	sp.rlimits[SBXP_RLIM_NPROC] = NPROC_LIMIT_A;
	memset(&a, 0, sizeof(a));
	ck_assert_int_eq(sbx_run(f.s, &sp, &cbs, &a, NULL), 0);
	while (!a.done && !(a.out.data && strchr(a.out.data, '\n')))
		uv_run(&f.loop, UV_RUN_ONCE);
	if (a.done)
		REQUIRE_SANDBOX(&a);
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
	spec_init(&f, &sp, argv_b);
	sp.rlimits[SBXP_RLIM_NPROC] = NPROC_LIMIT_B;
	run(&f, &sp, &b);
	ck_assert_msg(b.error_code == NULL, "%s: %s", b.error_code,
		      b.error_msg);
	ck_assert_msg(b.exit_code == 0 && b.out.data &&
			  !strcmp(b.out.data, "second run\n"),
		      "the second run: exit %d, %s", b.exit_code,
		      b.err.data ? b.err.data : "(no stderr)");
	while (!a.done)
		uv_run(&f.loop, UV_RUN_ONCE);
	ck_assert_int_eq(a.exit_code, 0);
	outcome_free(&a);
	outcome_free(&b);
	fx_teardown(&f);
	for (int i = 0; i < NPROC_HOST; i++) {
		kill(host[i], SIGKILL);
		waitpid(host[i], NULL, 0);
	}
}
END_TEST

static Suite *sandbox_suite(void)
{
	Suite *s = suite_create("sandbox");
	TCase *tc = tcase_create("sandboxd");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, output_and_exit_codes);
	tcase_add_test(tc, merged_output_with_stdin);
	tcase_add_test(tc, run_flags_decoding);
	tcase_add_test(tc, deadline_kills_everything);
	tcase_add_test(tc, init_says_when_the_run_is_empty);
	tcase_add_test(tc, empty_run_init_waits_for_its_release);
	tcase_add_test(tc, empty_run_init_ends_unreleased);
	tcase_add_test(tc, spare_init_ready_after_drop);
	tcase_add_test(tc, leftover_gone_at_exit);
	tcase_add_test(tc, files_outside_and_inside);
	tcase_add_test(tc, workspace_below_private_dir);
	tcase_add_test(tc, credentials_hidden);
	tcase_add_test(tc, workspace_inside_hidden_dir);
	tcase_add_test(tc, proc_shows_only_the_run);
	tcase_add_test(tc, network_none_and_loopback);
	tcase_add_test(tc, environment_scrubbed);
	tcase_add_test(tc, output_cap);
	tcase_add_test(tc, sandboxd_restarts);
	tcase_add_test(tc, cancel_kills_the_run);
	tcase_add_test(tc, signals_default_init_unprivileged);
	tcase_add_test(tc, empty_runs_inits_let_go_after_exited);
	tcase_add_test(tc, fail_closed);
	tcase_add_test(tc, probe_reports_layers);
	tcase_add_test(tc, host_mode_hides_run_sockets);
	tcase_add_test(tc, stray_unix_socket_covered);
	tcase_add_test(tc, var_tmp_private);
	tcase_add_test(tc, too_many_sockets_refused);
	tcase_add_test(tc, ro_binds_overlay);
	tcase_add_test(tc, ro_binds_too_many_entries);
	tcase_add_test(tc, securebits_locked);
	tcase_add_test(tc, process_limit_per_run);
	tcase_add_test(tc, best_effort_warns);
	tcase_add_test(tc, best_effort_root_warns);
	tcase_add_test(tc, planted_hardlink_protected);
	tcase_add_test(tc, inside_hardlinks_writable);
	tcase_add_test(tc, too_many_hardlinks_refused);
	tcase_add_test(tc, store_links_bound_by_directory);
	tcase_add_test(tc, store_many_packages_one_bind);
	tcase_add_test(tc, mount_below_whole_bound_dir);
	tcase_add_test(tc, spare_fresh_each_run);
	tcase_add_test(tc, spare_sees_later_mounts);
	tcase_add_test(tc, hot_spare_runs_each_command);
	tcase_add_test(tc, hot_spare_sees_swapped_credentials);
	tcase_add_test(tc, hot_spare_sees_a_link_made_outside);
	tcase_add_test(tc, hot_spares_for_four_workspaces_in_turns);
	suite_add_tcase(s, tc);
	/* spd's watch of the workspace and sandboxd's check from its list. */
	tc = tcase_create("linkwatch");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, linkwatch_list_decoding);
	tcase_add_test(tc, linkwatch_planted_after_watch);
	tcase_add_test(tc, linkwatch_fallback_walks);
	tcase_add_test(tc, linkwatch_walks_bounded);
	tcase_add_test(tc, linkwatch_renames_kept);
	tcase_add_test(tc, linkwatch_big_arrival_walked_aside);
	tcase_add_test(tc, linkwatch_random_ops_match_walk);
	tcase_add_test(tc, linkwatch_read_in_background);
	tcase_add_test(tc, linkwatch_tree_removed_kept);
	tcase_add_test(tc, linkwatch_dead_nodes_bounded);
	tcase_add_test(tc, linkwatch_walk_races_rm);
	tcase_add_test(tc, linkwatch_store_links_by_directory);
	tcase_add_test(tc, linkwatch_store_many_packages);
	tcase_add_test(tc, linkwatch_mount_below_whole_bound_dir);
	tcase_add_test(tc, link_dirs_from_list);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(sandbox_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

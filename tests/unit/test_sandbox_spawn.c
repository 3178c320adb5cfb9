/*
 * A run's life through spd's client of sandboxd (daemon/sandbox/sbx.c) and
 * sandboxd's spawn (sandboxd/linux/spawn.c), on a real uv loop with the
 * built build/sandboxd: output and exit codes, stdin and merged output,
 * the RUN message's flags (proto/sandbox.c), deadlines, cancel, a
 * sandboxd killed mid-run, the environment scrubbed and the output cap.
 * The shared fixture is tests/lib/sbxtest.h.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "common/buf.h"
#include "common/util.h"
#include "daemon/sandbox/sbx.h"
#include "proto/sandbox.h"
#include "tests/lib/sbxtest.h"
#include "tests/lib/testlib.h"

START_TEST(output_and_exit_codes)
{
	struct sbxt_fixture f;
	struct sbxt_outcome o;

	sbxt_setup(&f, NULL);
	char s1[] = "echo hello; echo oops >&2; exit 3";
	sbxt_run_sh(&f, s1, &o);
	SBXT_REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s: %s", o.error_code,
		      o.error_msg);
	ck_assert_str_eq(o.out.data, "hello\n");
	ck_assert_str_eq(o.err.data, "oops\n");
	ck_assert_int_eq(o.exit_code, 3);
	ck_assert(!o.timed_out);
	sbxt_outcome_free(&o);

	char *missing[] = {"no-such-command-spd", NULL};
	struct sbx_spec sp;
	sbxt_spec_init(&f, &sp, missing);
	sbxt_run(&f, &sp, &o);
	ck_assert_int_eq(o.exit_code, 127);
	ck_assert_ptr_null(o.error_code);
	sbxt_outcome_free(&o);
	sbxt_teardown(&f);
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
	struct sbxt_fixture f;
	struct sbxt_outcome o;
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
	sbxt_setup(&f, NULL);
	for (int merged = 1; merged >= 0; merged--) {
		sbxt_spec_init(&f, &sp, argv);
		sp.stdin_pipe = true;
		sp.merge_stderr = merged;
		memset(&o, 0, sizeof(o));
		ck_assert_int_eq(sbx_run(f.s, &sp, &sbxt_cbs, &o, &h), 0);
		ck_assert_int_eq(sbx_run_input(h, "in\n", 3), 0);
		sbx_run_input_close(h);
		while (!o.done)
			uv_run(&f.loop, UV_RUN_ONCE);
		SBXT_REQUIRE_SANDBOX(&o);
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
		sbxt_outcome_free(&o);
	}
	sbxt_teardown(&f);
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
	struct sbxt_fixture f;
	struct sbxt_outcome o;
	char script[PATH_MAX + 128], marker[PATH_MAX];

	sbxt_setup(&f, NULL);
	snprintf(marker, sizeof(marker), "%s/marker", f.ws);
	/* A background process that ignores SIGTERM and detaches, then
	 * would create the marker after the deadline. */
	snprintf(script, sizeof(script),
		 "(trap '' TERM HUP; setsid sh -c 'sleep 1; touch %s' &) ;"
		 " sleep 60",
		 marker);
	char *argv[] = {"/bin/sh", "-c", script, NULL};
	struct sbx_spec sp;
	sbxt_spec_init(&f, &sp, argv);
	sp.timeout_ms = 300;
	sbxt_run(&f, &sp, &o);
	SBXT_REQUIRE_SANDBOX(&o);
	ck_assert(o.timed_out);
	ck_assert_int_eq(o.term_signal, SIGKILL);
	/* Well past the background process's sleep. */
	usleep(1600 * 1000);
	ck_assert_msg(access(marker, F_OK) < 0,
		      "a process outlived its run and made the marker");
	sbxt_outcome_free(&o);
	sbxt_teardown(&f);
}
END_TEST

/*
 * A process the command leaves running, with its output elsewhere, so
 * that only EXITED ends the run for spd: it is gone by the time the run's
 * result arrives, and changes nothing after.
 */
START_TEST(leftover_gone_at_exit)
{
	struct sbxt_fixture f;
	struct sbxt_outcome o;
	char script[2 * PATH_MAX + 256], file[PATH_MAX];
	struct stat a, b;

	sbxt_setup(&f, NULL);
	snprintf(file, sizeof(file), "%s/ticks", f.ws);
	snprintf(script, sizeof(script),
		 "(setsid sh -c 'while :; do echo x >> %s; sleep 0.01; done' "
		 "</dev/null >/dev/null 2>&1 &); "
		 "while [ ! -s %s ]; do sleep 0.01; done; exit 4",
		 file, file);
	char *argv[] = {"/bin/sh", "-c", script, NULL};
	struct sbx_spec sp;
	sbxt_spec_init(&f, &sp, argv);
	sbxt_run(&f, &sp, &o);
	SBXT_REQUIRE_SANDBOX(&o);
	ck_assert_int_eq(o.exit_code, 4);
	ck_assert_int_eq(stat(file, &a), 0);
	usleep(300 * 1000);
	ck_assert_int_eq(stat(file, &b), 0);
	ck_assert_msg(a.st_size > 0 && a.st_size == b.st_size,
		      "the leftover still wrote after EXITED (%lld, then %lld "
		      "bytes)",
		      (long long)a.st_size, (long long)b.st_size);
	sbxt_outcome_free(&o);
	sbxt_teardown(&f);
}
END_TEST

START_TEST(environment_scrubbed)
{
	struct sbxt_fixture f;
	struct sbxt_outcome o;
	char *env[] = {"PATH=/usr/bin:/bin",
		       "FOO_API_KEY=sekrit-0a1b2c",
		       "GITHUB_TOKEN=ghp-secret-value",
		       "KEEP_ME=yes",
		       "NO_COLOR=0",
		       NULL};
	char *argv[] = {"env", NULL};
	struct sbx_spec sp;

	sbxt_setup(&f, NULL);
	sbxt_spec_init(&f, &sp, argv);
	sp.envp = env;
	sbxt_run(&f, &sp, &o);
	SBXT_REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
	ck_assert_ptr_null(strstr(o.out.data, "sekrit"));
	ck_assert_ptr_null(strstr(o.out.data, "ghp-secret"));
	ck_assert_ptr_nonnull(strstr(o.out.data, "KEEP_ME=yes"));
	ck_assert_ptr_nonnull(strstr(o.out.data, "NO_COLOR=1"));
	ck_assert_ptr_null(strstr(o.out.data, "NO_COLOR=0"));
	sbxt_outcome_free(&o);
	sbxt_teardown(&f);
}
END_TEST

START_TEST(output_cap)
{
	struct sbxt_fixture f;
	struct sbxt_outcome o;
	char *argv[] = {"/bin/sh", "-c",
			"head -c 5000 /dev/zero | tr '\\0' a; "
			"head -c 10 /dev/zero | tr '\\0' b >&2",
			NULL};
	struct sbx_spec sp;

	sbxt_setup(&f, NULL);
	sbxt_spec_init(&f, &sp, argv);
	sp.output_cap = 1000;
	sbxt_run(&f, &sp, &o);
	SBXT_REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
	ck_assert_int_eq(o.dropped[0], 4000);
	ck_assert_int_eq(o.dropped[1], 0);
	ck_assert_ptr_nonnull(strstr(o.out.data, "the rest is dropped"));
	/* 1000 bytes kept, then the marker line. */
	ck_assert_int_eq(strspn(o.out.data, "a"), 1000);
	ck_assert_uint_lt(o.out.len, 1100);
	ck_assert_str_eq(o.err.data, "bbbbbbbbbb");
	sbxt_outcome_free(&o);
	sbxt_teardown(&f);
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
	struct sbxt_fixture f;
	struct sbxt_outcome o;
	uv_timer_t t;
	struct sbx_spec sp;
	char arg[32];
	char *argv[] = {"sleep", arg, NULL};
	struct kill_mid_run k = {.arg = arg};
	bool alive = true;

	/* A unique duration names the run's process on the host. */
	snprintf(arg, sizeof(arg), "30.%d", (int)getpid());
	sbxt_setup(&f, NULL);
	char s1[] = "true";
	sbxt_run_sh(&f, s1, &o);
	SBXT_REQUIRE_SANDBOX(&o);
	sbxt_outcome_free(&o);

	sbxt_spec_init(&f, &sp, argv);
	memset(&o, 0, sizeof(o));
	ck_assert_int_eq(sbx_run(f.s, &sp, &sbxt_cbs, &o, NULL), 0);
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
	sbxt_outcome_free(&o);

	char s2[] = "echo again";
	sbxt_run_sh(&f, s2, &o);
	ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
	ck_assert_str_eq(o.out.data, "again\n");
	sbxt_outcome_free(&o);
	sbxt_teardown(&f);
}
END_TEST

START_TEST(cancel_kills_the_run)
{
	struct sbxt_fixture f;
	struct sbxt_outcome o;
	struct sbx_spec sp;
	struct sbx_run *r;
	char *argv[] = {"sleep", "30", NULL};

	sbxt_setup(&f, NULL);
	sbxt_spec_init(&f, &sp, argv);
	memset(&o, 0, sizeof(o));
	ck_assert_int_eq(sbx_run(f.s, &sp, &sbxt_cbs, &o, &r), 0);
	sbx_run_cancel(r);
	while (!o.done)
		uv_run(&f.loop, UV_RUN_ONCE);
	SBXT_REQUIRE_SANDBOX(&o);
	ck_assert(o.cancelled);
	ck_assert_int_eq(o.term_signal, SIGKILL);
	ck_assert_int_eq(o.ended, SBXP_ENDED_KILL);
	sbxt_outcome_free(&o);
	sbxt_teardown(&f);
}
END_TEST

/* Start argv with a kill grace and run the loop until its stdout holds
 * "ready" (the command's traps are set) or it ended.  Returns the run. */
static struct sbx_run *run_until_ready(struct sbxt_fixture *f,
				       char *const *argv, uint32_t grace_ms,
				       struct sbxt_outcome *o)
{
	struct sbx_spec sp;
	struct sbx_run *r;

	sbxt_spec_init(f, &sp, argv);
	sp.kill_grace_ms = grace_ms;
	sp.timeout_ms = 0;
	memset(o, 0, sizeof(*o));
	ck_assert_int_eq(sbx_run(f->s, &sp, &sbxt_cbs, o, &r), 0);
	for (;;) {
		buf_append(&o->out, "", 1);
		o->out.len--;
		if (o->done || strstr(o->out.data, "ready\n"))
			return r;
		uv_run(&f->loop, UV_RUN_ONCE);
	}
}

/* Cancel r (see run_until_ready) and wait for its end. */
static void cancel_and_wait(struct sbxt_fixture *f, struct sbx_run *r,
			    struct sbxt_outcome *o)
{
	if (!o->done)
		sbx_run_cancel(r);
	while (!o->done)
		uv_run(&f->loop, UV_RUN_ONCE);
}

/*
 * A run spd ends (its client gone) gets SIGTERM first, passed on by the
 * run's init to the command's process group, so that a command that
 * handles it finishes what it writes (an agent flushing its files): the
 * marker its trap writes into the workspace is there, and the run is
 * journaled as terminated.  Once from a freshly cloned init, once from a
 * spare's.  With SIGKILL straight away, as before, no trap could run.
 */
START_TEST(cancel_terms_first)
{
	struct sbxt_fixture f;
	struct sbxt_outcome o;
	char script[] = "trap 'echo flushed > marker; exit 3' TERM; "
			"echo ready; while :; do sleep 1; done";
	char *argv[] = {"/bin/sh", "-c", script, NULL};
	char marker[PATH_MAX];
	struct sbx_run *r;

	sbxt_setup(&f, NULL);
	snprintf(marker, sizeof(marker), "%s/marker", f.ws);
	for (int i = 0; i < 2; i++) {
		if (i == 1) {
			unlink(marker);
			sbxt_wait_for_spare();
		}
		/* The grace is long: the run ends as soon as the trap has
		 * run, and a slow machine must not make it SIGKILL. */
		r = run_until_ready(&f, argv, SBXP_CANCEL_GRACE_MAX_MS, &o);
		cancel_and_wait(&f, r, &o);
		SBXT_REQUIRE_SANDBOX(&o);
		ck_assert_msg(o.error_code == NULL, "%s: %s", o.error_code,
			      o.error_msg);
		ck_assert(o.cancelled);
		ck_assert_int_eq(o.ended, SBXP_ENDED_TERM);
		ck_assert_int_eq(o.term_signal, 0);
		ck_assert_int_eq(o.exit_code, 3);
		sbxt_assert_file(marker, "flushed\n");
		sbxt_outcome_free(&o);
	}
	sbxt_teardown(&f);
}
END_TEST

/*
 * A command that ignores SIGTERM (and a child of it that does too) is
 * killed once the grace is over: the run ends as killed, and neither
 * process is left on the host.
 */
START_TEST(cancel_kills_after_grace)
{
	struct sbxt_fixture f;
	struct sbxt_outcome o;
	char arg[32], script[256];
	char *argv[] = {"/bin/sh", "-c", script, NULL};
	struct sbx_run *r;
	bool alive = false;

	/* A unique duration names the run's process on the host. */
	snprintf(arg, sizeof(arg), "300.%d", (int)getpid());
	snprintf(script, sizeof(script),
		 "trap '' TERM; sleep %s & echo ready; while :; do wait; "
		 "done",
		 arg);
	sbxt_setup(&f, NULL);
	r = run_until_ready(&f, argv, 500, &o);
	SBXT_REQUIRE_SANDBOX(&o);
	/* Control: the child that ignores SIGTERM runs (started before
	 * "ready"; its exec may still be under way). */
	for (int i = 0; i < 1000 && !o.done && !alive; i++) {
		alive = process_running("sleep", arg);
		if (!alive)
			usleep(10 * 1000);
	}
	ck_assert_msg(alive, "`sleep %s` never ran", arg);
	cancel_and_wait(&f, r, &o);
	ck_assert_msg(o.error_code == NULL, "%s: %s", o.error_code,
		      o.error_msg);
	ck_assert(o.cancelled);
	ck_assert_int_eq(o.ended, SBXP_ENDED_KILL);
	ck_assert_int_eq(o.term_signal, SIGKILL);
	/* Every process of the run is gone once its result is in (the pid
	 * namespace ends with its init, spawn_finish). */
	alive = process_running("sleep", arg);
	ck_assert_msg(!alive, "`sleep %s` outlived its run", arg);
	sbxt_outcome_free(&o);
	sbxt_teardown(&f);
}
END_TEST

static Suite *sandbox_spawn_suite(void)
{
	Suite *s = suite_create("sandbox_spawn");
	TCase *tc = tcase_create("spawn");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, output_and_exit_codes);
	tcase_add_test(tc, merged_output_with_stdin);
	tcase_add_test(tc, run_flags_decoding);
	tcase_add_test(tc, deadline_kills_everything);
	tcase_add_test(tc, leftover_gone_at_exit);
	tcase_add_test(tc, environment_scrubbed);
	tcase_add_test(tc, output_cap);
	tcase_add_test(tc, sandboxd_restarts);
	tcase_add_test(tc, cancel_kills_the_run);
	tcase_add_test(tc, cancel_terms_first);
	tcase_add_test(tc, cancel_kills_after_grace);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(sandbox_spawn_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/*
 * What sandboxd finds this host lets it do (sandboxd/linux/probe.c,
 * spctl doctor's source) and what a run gets where a layer is missing: a
 * required-mode run refused (fail closed), a best-effort run run with a
 * warning naming what it went without.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "daemon/sandbox/sbx.h"
#include "sandboxd/linux/layers.h"
#include "tests/lib/sbxtest.h"
#include "tests/lib/testlib.h"

/*
 * Fail closed: a sandboxd started where it cannot create the namespaces
 * it needs (user namespaces capped at 0 in its own user namespace) must
 * refuse with SANDBOX-UNAVAILABLE, never run the command unconfined.
 */
START_TEST(fail_closed)
{
	struct sbxt_fixture f;
	struct sbxt_outcome o;
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
	sbxt_setup(&f, wrapper);
	snprintf(marker, sizeof(marker), "%s/ran", f.ws);
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "touch %s", marker);
	sbxt_run_sh(&f, cmd, &o);
	ck_assert_ptr_nonnull(o.error_code);
	ck_assert_str_eq(o.error_code, "SANDBOX-UNAVAILABLE");
	ck_assert_ptr_nonnull(o.error_msg);
	ck_assert_msg(access(marker, F_OK) < 0, "the command ran");
	sbxt_outcome_free(&o);
	sbxt_teardown(&f);
	test_rmrf(tmp);
	free(tmp);
	free(prog);
	free(script);
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
	struct sbxt_fixture f;
	struct sbxt_outcome o;
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
	sbxt_setup(&f, wrapper);
	/* uid 1000 must reach its working directory. */
	chmod(f.ws, 0777);
	sbxt_spec_init(&f, &sp, argv);
	sp.best_effort = true;
	sbxt_run(&f, &sp, &o);
	ck_assert_msg(o.error_code == NULL, "%s: %s", o.error_code,
		      o.error_msg);
	ck_assert_msg(o.nwarn > 0, "a best-effort run without a layer said "
				   "nothing");
	ck_assert_msg(strstr(o.warnings, want), "no warning of \"%s\": %s",
		      want, o.warnings);
	ck_assert_str_eq(o.out.data ? o.out.data : "", "ran\n");
	sbxt_outcome_free(&o);

	/* The control: the same sandboxd refuses a required-mode run. */
	sbxt_spec_init(&f, &sp, argv);
	sbxt_run(&f, &sp, &o);
	ck_assert_ptr_nonnull(o.error_code);
	ck_assert_str_eq(o.error_code, "SANDBOX-UNAVAILABLE");
	ck_assert_ptr_null(o.out.data);
	sbxt_outcome_free(&o);
	sbxt_teardown(&f);
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
	struct sbxt_fixture f;
	struct probe_out p = {0};

	sbxt_setup(&f, NULL);
	ck_assert_int_eq(sbx_probe(f.s, 0, 0, on_probe, &p), 0);
	while (!p.done)
		uv_run(&f.loop, UV_RUN_ONCE);
	ck_assert(p.got);
	ck_assert_int_eq(p.l.landlock_abi, layer_landlock_abi());
	if (!p.l.userns)
		ck_assert_msg(p.l.userns_why[0], "a missing layer says why");
	/* Every run executes sandboxd-init: were it refused here, every
	 * other test of this suite would fail, so say why first. */
	ck_assert_msg(p.l.run_init, "run init: %s", p.l.run_init_why);
	sbxt_teardown(&f);
}
END_TEST

static Suite *sandbox_probe_suite(void)
{
	Suite *s = suite_create("sandbox_probe");
	TCase *tc = tcase_create("probe");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, fail_closed);
	tcase_add_test(tc, probe_reports_layers);
	tcase_add_test(tc, best_effort_warns);
	tcase_add_test(tc, best_effort_root_warns);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(sandbox_probe_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

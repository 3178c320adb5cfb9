/*
 * The run's file system (sandboxd/linux/mount.c, mount_apply.c): the
 * system read-only and the workspace writable, files made there owned by
 * the operator, credentials and spd's own directories hidden (a session's
 * worktree inside them visible alone), /proc showing only the run, a
 * private /var/tmp, and the held-out read-only overlay (ro_binds).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "daemon/sandbox/sbx.h"
#include "sandboxd/linux/mount.h"
#include "tests/lib/sbxtest.h"
#include "tests/lib/testlib.h"

START_TEST(files_outside_and_inside)
{
	struct sbxt_fixture f;
	struct sbxt_outcome o;
	char script[4 * PATH_MAX + 128], outside[PATH_MAX], inside[PATH_MAX];
	struct stat st;

	sbxt_setup(&f, NULL);
	snprintf(outside, sizeof(outside), "%s/outside.txt", f.outside);
	snprintf(inside, sizeof(inside), "%s/new.txt", f.ws);
	test_write_file(outside, "original\n");
	chmod(outside, 0666);
	snprintf(script, sizeof(script),
		 "echo changed > %s; rm -f %s; echo made > %s; "
		 "mkdir %s/sub && echo x > %s/sub/y",
		 outside, outside, inside, f.ws, f.ws);
	sbxt_run_sh(&f, script, &o);
	SBXT_REQUIRE_SANDBOX(&o);
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
	sbxt_outcome_free(&o);
	sbxt_teardown(&f);
}
END_TEST

/*
 * A workspace below a directory others cannot search (a root shell's
 * /root/project): as root the run's uid must still reach and write it,
 * and what it writes comes back owned by the operator.
 */
START_TEST(workspace_below_private_dir)
{
	struct sbxt_fixture f;
	struct sbxt_outcome o;
	char tmpl[PATH_MAX], ws[PATH_MAX + 8];
	char path[PATH_MAX + 32], script[] = "echo made > made.txt && pwd";
	char *argv[] = {"/bin/sh", "-c", script, NULL};
	struct sbx_spec sp;
	struct stat st;

	sbxt_setup(&f, NULL);
	snprintf(tmpl, sizeof(tmpl), "%s/spd-test-priv-XXXXXX",
		 sbxt_outside_base());
	ck_assert_ptr_nonnull(mkdtemp(tmpl));
	chmod(tmpl, 0700);
	snprintf(ws, sizeof(ws), "%s/ws", tmpl);
	ck_assert_int_eq(mkdir(ws, 0700), 0);
	sbxt_spec_init(&f, &sp, argv);
	sp.workspace = ws;
	sbxt_run(&f, &sp, &o);
	SBXT_REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
	ck_assert_msg(o.exit_code == 0, "err: %s", o.err.data);
	snprintf(path, sizeof(path), "%s/made.txt", ws);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_uid, geteuid());
	sbxt_outcome_free(&o);
	test_rmrf(tmpl);
	sbxt_teardown(&f);
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
	struct sbxt_fixture f;
	struct sbxt_outcome o;
	char base[PATH_MAX], cfg[PATH_MAX + 16], state[PATH_MAX + 32];
	char ws[PATH_MAX + 64], other[PATH_MAX + 64], path[PATH_MAX + 96];
	char script[8 * PATH_MAX + 512];
	char *argv[] = {"/bin/sh", "-c", script, NULL};
	char *hidden[3];
	struct sbx_spec sp;
	struct stat st;

	sbxt_setup(&f, NULL);
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
	sbxt_spec_init(&f, &sp, argv);
	sp.workspace = ws;
	sp.hidden = hidden;
	sbxt_run(&f, &sp, &o);
	SBXT_REQUIRE_SANDBOX(&o);
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
	sbxt_outcome_free(&o);
	test_rmrf(base);
	sbxt_teardown(&f);
}

START_TEST(workspace_inside_hidden_dir)
{
	/* On the host's file system, and in /tmp, which the run gets
	 * privately (the way down is made there, nothing to cover). */
	hidden_parent_case(sbxt_outside_base());
	hidden_parent_case("/tmp");
}
END_TEST

START_TEST(credentials_hidden)
{
	struct sbxt_fixture f;
	struct sbxt_outcome o;
	char path[PATH_MAX], script[9 * PATH_MAX + 256];
	/* Coding agents' logins (an uncapped provider key or OAuth token). */
	static const char *const agent_logins[] = {
	    ".claude/.credentials.json", ".claude.json", ".codex/auth.json"};

	sbxt_setup(&f, NULL);
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
	sbxt_run_sh(&f, script, &o);
	SBXT_REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
	ck_assert_ptr_null(strstr(o.out.data ? o.out.data : "", "CANARY"));
	ck_assert_ptr_null(strstr(o.err.data ? o.err.data : "", "CANARY"));
	ck_assert_ptr_null(strstr(o.out.data ? o.out.data : "", "id_rsa"));
	snprintf(path, sizeof(path), "%s/.aws", f.outside);
	ck_assert_msg(access(path, F_OK) < 0, "the run created ~/.aws");
	sbxt_outcome_free(&o);

	/* The workspace is the home directory: a missing credential dir
	 * cannot be planted either. */
	char *argv[] = {
	    "/bin/sh", "-c",
	    "mkdir -p .ssh; echo key > .ssh/authorized_keys; "
	    "echo token > .git-credentials; cat .ssh/authorized_keys",
	    NULL};
	struct sbx_spec sp;
	sbxt_spec_init(&f, &sp, argv);
	sp.home = f.ws;
	sbxt_run(&f, &sp, &o);
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
	sbxt_outcome_free(&o);
	sbxt_teardown(&f);
}
END_TEST

START_TEST(proc_shows_only_the_run)
{
	struct sbxt_fixture f;
	struct sbxt_outcome o;
	char script[256];

	sbxt_setup(&f, NULL);
	snprintf(script, sizeof(script),
		 "n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo $n; "
		 "test -e /proc/%d && echo host-visible",
		 (int)getpid());
	sbxt_run_sh(&f, script, &o);
	SBXT_REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
	/* init and the shell (and maybe a short-lived child). */
	ck_assert_msg(atoi(o.out.data) <= 3, "processes seen: %s", o.out.data);
	ck_assert_ptr_null(strstr(o.out.data, "host-visible"));
	sbxt_outcome_free(&o);
	/* The run's pid 1 (a copy of sandboxd, then its init) is covered:
	 * its descriptors and status are not the command's to read, even
	 * in the moment before it makes itself undumpable. */
	sbxt_run_sh(&f, "ls /proc/1/fd 2>&1; cat /proc/1/status 2>&1; echo end",
		    &o);
	ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
	ck_assert_msg(o.out.data && strstr(o.out.data, "end"), "%s",
		      o.out.data);
	ck_assert_msg(!strstr(o.out.data, "socket:") &&
			  !strstr(o.out.data, "Name:"),
		      "pid 1 is visible: %s", o.out.data);
	sbxt_outcome_free(&o);
	sbxt_teardown(&f);
}
END_TEST

/* /var/tmp is the run's own: what the host keeps there is not visible,
 * and what the run writes there does not reach the host. */
START_TEST(var_tmp_private)
{
	struct sbxt_fixture f;
	struct sbxt_outcome o;
	char tmpl[] = "/var/tmp/spd-test-vt-XXXXXX", script[PATH_MAX * 2 + 64];
	char path[PATH_MAX];

	sbxt_setup(&f, NULL);
	ck_assert_ptr_nonnull(mkdtemp(tmpl));
	chmod(tmpl, 0777);
	snprintf(path, sizeof(path), "%s/host.txt", tmpl);
	test_write_file(path, "HOST-ONLY\n");
	chmod(path, 0644);
	snprintf(script, sizeof(script),
		 "cat %s; mkdir -p %s && echo run > %s/run.txt && echo wrote",
		 path, tmpl, tmpl);
	sbxt_run_sh(&f, script, &o);
	SBXT_REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
	ck_assert_ptr_null(strstr(o.out.data ? o.out.data : "", "HOST-ONLY"));
	ck_assert_msg(strstr(o.out.data ? o.out.data : "", "wrote"),
		      "/var/tmp is not writable in a run: %s", o.err.data);
	snprintf(path, sizeof(path), "%s/run.txt", tmpl);
	ck_assert_msg(access(path, F_OK) < 0,
		      "the run wrote the host's /var/tmp");
	sbxt_outcome_free(&o);
	test_rmrf(tmpl);
	sbxt_teardown(&f);
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
	struct sbxt_fixture f;
	struct sbxt_outcome o;
	char src[PATH_MAX], dst[PATH_MAX + 16], path[PATH_MAX + 32];
	char script[4 * PATH_MAX];
	struct sbx_spec sp;
	char *c;

	sbxt_setup(&f, NULL);
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
	sbxt_spec_init(&f, &sp, argv);
	sp.ro_binds = binds;
	sbxt_run(&f, &sp, &o);
	SBXT_REQUIRE_SANDBOX(&o);
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
	sbxt_outcome_free(&o);
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
	sbxt_run(&f, &sp, &o);
	ck_assert_msg(o.error_code == NULL, "%s", o.error_msg);
	ck_assert_ptr_nonnull(strstr(o.out.data, "HELDOUT-42"));
	ck_assert_ptr_null(strstr(o.out.data, "z.txt"));
	ck_assert_ptr_null(strstr(o.out.data, "wrote"));
	sbxt_outcome_free(&o);
	snprintf(path, sizeof(path), "%s/sub/q", f.ws);
	ck_assert(access(path, F_OK) < 0);

	/* A destination outside the workspace, or through a symlink the
	 * workspace holds, is refused. */
	snprintf(dst, sizeof(dst), "%s/elsewhere", f.outside);
	sbxt_run(&f, &sp, &o);
	ck_assert_ptr_nonnull(o.error_code);
	ck_assert_str_eq(o.error_code, "BAD-REQUEST");
	sbxt_outcome_free(&o);
	snprintf(path, sizeof(path), "%s/evil", f.ws);
	ck_assert_int_eq(symlink(f.outside, path), 0);
	snprintf(dst, sizeof(dst), "%s/evil/x", f.ws);
	sbxt_run(&f, &sp, &o);
	ck_assert_ptr_nonnull(o.error_code);
	ck_assert_str_eq(o.error_code, "BAD-REQUEST");
	sbxt_outcome_free(&o);
	snprintf(path, sizeof(path), "%s/x", f.outside);
	ck_assert(access(path, F_OK) < 0);
	sbxt_teardown(&f);
}
END_TEST

/* A read-only bind that would rebuild a directory with more entries than
 * a plan re-binds is refused, and nothing runs. */
START_TEST(ro_binds_too_many_entries)
{
	struct sbxt_fixture f;
	struct sbxt_outcome o;
	char src[PATH_MAX], dst[PATH_MAX + 16], path[PATH_MAX + 32];
	char *argv[] = {"/bin/sh", "-c", "touch ran", NULL};
	struct sbx_spec sp;

	sbxt_setup(&f, NULL);
	snprintf(src, sizeof(src), "%s/sealed", f.outside);
	ck_assert_int_eq(mkdir(src, 0700), 0);
	for (int i = 0; i <= MOUNTPLAN_REBIND_MAX; i++) {
		snprintf(path, sizeof(path), "%s/f%d", f.ws, i);
		test_write_file(path, "x");
	}
	snprintf(dst, sizeof(dst), "%s/.spd-heldout", f.ws);
	char *binds[] = {src, dst, NULL};
	sbxt_spec_init(&f, &sp, argv);
	sp.ro_binds = binds;
	sbxt_run(&f, &sp, &o);
	SBXT_REQUIRE_SANDBOX(&o);
	ck_assert_ptr_nonnull(o.error_code);
	ck_assert_str_eq(o.error_code, "BAD-REQUEST");
	snprintf(path, sizeof(path), "%s/ran", f.ws);
	ck_assert(access(path, F_OK) < 0);
	ck_assert(access(dst, F_OK) < 0);
	sbxt_outcome_free(&o);
	sbxt_teardown(&f);
}
END_TEST

static Suite *sandbox_mount_suite(void)
{
	Suite *s = suite_create("sandbox_mount");
	TCase *tc = tcase_create("mount");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, files_outside_and_inside);
	tcase_add_test(tc, workspace_below_private_dir);
	tcase_add_test(tc, credentials_hidden);
	tcase_add_test(tc, workspace_inside_hidden_dir);
	tcase_add_test(tc, proc_shows_only_the_run);
	tcase_add_test(tc, var_tmp_private);
	tcase_add_test(tc, ro_binds_overlay);
	tcase_add_test(tc, ro_binds_too_many_entries);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(sandbox_mount_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

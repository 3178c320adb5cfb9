/*
 * sandboxd's hard-link check (sandboxd/linux/links.c): a file of the
 * workspace with a link outside is bound read-only under each of its
 * names, from sandboxd's own walk or from spd's list; past the names a
 * run may bind, the directories most of whose files are so are bound
 * whole (a pnpm or uv store's links: tests/lib/sbxtest.h's store trees).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/sandbox/sbx.h"
#include "sandboxd/linux/mount.h"
#include "tests/lib/sbxtest.h"
#include "tests/lib/testlib.h"

/*
 * A hard link planted in the workspace from the host to a file outside
 * it (ln outside/f ws/h before the run): writing through the link would
 * change the file outside.  The run can still read it, but no write,
 * append, truncation or chmod through any of its names in the workspace
 * (top level or a subdirectory) reaches the file outside.
 */
START_TEST(planted_hardlink_protected)
{
	struct sbxt_fixture f;
	struct sbxt_outcome o;
	char outside[PATH_MAX], h1[PATH_MAX + 8], h2[PATH_MAX + 16];
	char sub[PATH_MAX + 8], h3[PATH_MAX + 16], script[1024];
	struct stat st;

	sbxt_setup(&f, NULL);
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
	sbxt_run_sh(&f, script, &o);
	SBXT_REQUIRE_SANDBOX(&o);
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
	sbxt_outcome_free(&o);
	sbxt_teardown(&f);
}
END_TEST

/* The positive control: a file whose links are all inside the workspace
 * stays writable through each of them. */
START_TEST(inside_hardlinks_writable)
{
	struct sbxt_fixture f;
	struct sbxt_outcome o;
	char a[PATH_MAX], b[PATH_MAX + 8], sub[PATH_MAX + 8];

	sbxt_setup(&f, NULL);
	snprintf(a, sizeof(a), "%s/a", f.ws);
	snprintf(sub, sizeof(sub), "%s/sub", f.ws);
	snprintf(b, sizeof(b), "%s/sub/b", f.ws);
	test_write_file(a, "one\n");
	ck_assert_int_eq(mkdir(sub, 0755), 0);
	if (link(a, b) < 0)
		TEST_SKIP("cannot hard-link in the workspace: %s",
			  strerror(errno));
	char script[] = "echo two >> sub/b && echo three >> a";
	sbxt_run_sh(&f, script, &o);
	SBXT_REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s: %s", o.error_code,
		      o.error_msg);
	ck_assert_int_eq(o.exit_code, 0);
	char *c = test_read_file(a);
	ck_assert_ptr_nonnull(c);
	ck_assert_str_eq(c, "one\ntwo\nthree\n");
	free(c);
	sbxt_outcome_free(&o);
	sbxt_teardown(&f);
}
END_TEST

/* More names of outside files than the plan binds read-only: the run is
 * refused, naming the limit, and the command never runs.  Twice: the
 * first run is sandboxd's first, cloned anew; the second is set up by
 * the spare's command process (spawn.h), whose failing step must be
 * reported the same way. */
START_TEST(too_many_hardlinks_refused)
{
	struct sbxt_fixture f;
	struct sbxt_outcome o;
	char outside[PATH_MAX], path[PATH_MAX + 32], marker[PATH_MAX + 8];
	char script[PATH_MAX + 32];

	sbxt_setup(&f, NULL);
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
		sbxt_run_sh(&f, script, &o);
		SBXT_REQUIRE_SANDBOX(&o);
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
		sbxt_outcome_free(&o);
		sbxt_wait_for_spare();
	}
	sbxt_teardown(&f);
}
END_TEST

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
	struct sbxt_fixture f;
	struct sbxt_outcome o;

	sbxt_setup(&f, NULL);
	sbxt_store_tree(&f, 60);
	sbxt_run_sh(&f, sbxt_store_script, &o);
	SBXT_REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s: %s", o.error_code,
		      o.error_msg);
	ck_assert_str_eq(o.out.data ? o.out.data : "", SBXT_STORE_WANT(1443));
	sbxt_store_unchanged(&f, 60);
	sbxt_outcome_free(&o);
	sbxt_teardown(&f);
}
END_TEST

/*
 * The host's mounts below a directory sandboxd binds read-only whole
 * (sbxt_volumes_mount): its bind carries them as they are, writable, so
 * sandboxd must still walk below such a directory (LS_DEEP).
 */
START_TEST(mount_below_whole_bound_dir)
{
	struct sbxt_fixture f;
	struct sbxt_outcome o;
	char sub[PATH_MAX + 64], one[PATH_MAX + 64];

	sbxt_own_mount_ns();
	sbxt_setup(&f, NULL);
	sbxt_store_tree(&f, SBXT_VOLUMES_NPKG);
	sbxt_volumes_mount(&f, sub, one, sizeof(sub));
	sbxt_run_sh(&f, sbxt_volumes_script, &o);
	SBXT_REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s: %s", o.error_code,
		      o.error_msg);
	ck_assert_str_eq(o.out.data ? o.out.data : "", SBXT_VOLUMES_WANT);
	sbxt_outcome_free(&o);
	sbxt_volumes_unchanged(&f, sub, one);
	sbxt_teardown(&f);
}
END_TEST

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
	struct sbxt_fixture f;
	struct sbxt_outcome o;

	sbxt_setup(&f, NULL);
	sbxt_store_many(&f, SBXT_STORE_MANY);
	sbxt_run_sh(&f, sbxt_store_many_script, &o);
	SBXT_REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s: %s", o.error_code,
		      o.error_msg);
	ck_assert_str_eq(o.out.data ? o.out.data : "", SBXT_STORE_MANY_WANT);
	sbxt_store_many_unchanged(&f, SBXT_STORE_MANY);
	sbxt_outcome_free(&o);
	sbxt_teardown(&f);
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
	struct sbxt_fixture f;
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
	struct sbxt_outcome o;

	sbxt_setup(&f, NULL);
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
	sbxt_spec_init(&f, &sp, argv);
	sp.link_names = names;
	sp.link_ro_dirs = ro;
	sbxt_run(&f, &sp, &o);
	SBXT_REQUIRE_SANDBOX(&o);
	ck_assert_msg(o.error_code == NULL, "%s: %s", o.error_code,
		      o.error_msg);
	ck_assert_str_eq(o.out.data ? o.out.data : "",
			 "a\nnew\noriginal\noriginal\n");
	sbxt_assert_file(out[0], "original\n");
	sbxt_assert_file(out[1], "original\n");
	snprintf(path, sizeof(path), "%s/src/pkg/x", f.ws);
	sbxt_assert_file(path, "x\n");
	sbxt_outcome_free(&o);
	sbxt_teardown(&f);
}
END_TEST

static Suite *sandbox_links_suite(void)
{
	Suite *s = suite_create("sandbox_links");
	TCase *tc = tcase_create("links");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, planted_hardlink_protected);
	tcase_add_test(tc, inside_hardlinks_writable);
	tcase_add_test(tc, too_many_hardlinks_refused);
	tcase_add_test(tc, store_links_bound_by_directory);
	tcase_add_test(tc, store_many_packages_one_bind);
	tcase_add_test(tc, mount_below_whole_bound_dir);
	tcase_add_test(tc, link_dirs_from_list);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(sandbox_links_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* Unit tests for client/diffstat.c: spctl session diff --stat counts what
 * git diff --stat would, from the diff's text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/diffstat.h"
#include "tests/lib/testlib.h"

/* Two files changed, one added, one deleted, one renamed, one binary; a
 * content line that looks like a header counts as content. */
static const char DIFF[] = "diff --git a/a.txt b/a.txt\n"
			   "index 1111111..2222222 100644\n"
			   "--- a/a.txt\n"
			   "+++ b/a.txt\n"
			   "@@ -1,3 +1,3 @@\n"
			   " keep\n"
			   "-old\n"
			   "+new\n"
			   "+++ not a header\n"
			   "--- not a header either\n"
			   "@@ -10 +10 @@\n"
			   "-x\n"
			   "+y\n"
			   "diff --git a/src/new file.c b/src/new file.c\n"
			   "new file mode 100644\n"
			   "--- /dev/null\n"
			   "+++ b/src/new file.c\n"
			   "@@ -0,0 +1,2 @@\n"
			   "+int a;\n"
			   "+int b;\n"
			   "diff --git a/gone.txt b/gone.txt\n"
			   "deleted file mode 100644\n"
			   "--- a/gone.txt\n"
			   "+++ /dev/null\n"
			   "@@ -1 +0,0 @@\n"
			   "-bye\n"
			   "\\ No newline at end of file\n"
			   "diff --git a/old.txt b/moved.txt\n"
			   "similarity index 100%\n"
			   "rename from old.txt\n"
			   "rename to moved.txt\n"
			   "diff --git a/logo.png b/logo.png\n"
			   "new file mode 100644\n"
			   "Binary files /dev/null and b/logo.png differ\n";

START_TEST(test_parse)
{
	struct diffstat d;

	ck_assert_int_eq(diffstat_parse(DIFF, &d), 0);
	ck_assert_uint_eq(d.n, 5);
	ck_assert_str_eq(d.files[0].path, "a.txt");
	ck_assert_uint_eq(d.files[0].added, 3);
	ck_assert_uint_eq(d.files[0].removed, 3);
	ck_assert_str_eq(d.files[1].path, "src/new file.c");
	ck_assert_uint_eq(d.files[1].added, 2);
	ck_assert_uint_eq(d.files[1].removed, 0);
	ck_assert_str_eq(d.files[2].path, "gone.txt");
	ck_assert_uint_eq(d.files[2].removed, 1);
	ck_assert_uint_eq(d.files[2].added, 0);
	ck_assert_str_eq(d.files[3].path, "old.txt => moved.txt");
	ck_assert_uint_eq(d.files[3].added + d.files[3].removed, 0);
	ck_assert_str_eq(d.files[4].path, "logo.png");
	ck_assert(d.files[4].binary);
	ck_assert_uint_eq(d.added, 5);
	ck_assert_uint_eq(d.removed, 4);
	diffstat_free(&d);
	diffstat_free(NULL);

	ck_assert_int_eq(diffstat_parse(NULL, &d), 0);
	ck_assert_uint_eq(d.n, 0);
	diffstat_free(&d);
	/* Cut short mid-hunk (a truncated diff): what is there counts. */
	ck_assert_int_eq(diffstat_parse("diff --git a/x b/x\n--- a/x\n+++ "
					"b/x\n@@ -1 +1,2 @@\n+a\n+b",
					&d),
			 0);
	ck_assert_uint_eq(d.n, 1);
	ck_assert_uint_eq(d.files[0].added, 2);
	diffstat_free(&d);
}
END_TEST

static char *printed(const char *diff)
{
	struct diffstat d;
	char *b = NULL;
	size_t n = 0;
	FILE *m = open_memstream(&b, &n);

	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(diffstat_parse(diff, &d), 0);
	diffstat_print(m, &d);
	fclose(m);
	diffstat_free(&d);
	return b;
}

START_TEST(test_print)
{
	char *out = printed(DIFF);

	ck_assert_str_eq(out, " a.txt                | 6 +++---\n"
			      " src/new file.c       | 2 ++\n"
			      " gone.txt             | 1 -\n"
			      " old.txt => moved.txt | 0 \n"
			      " logo.png             | Bin\n"
			      " 5 files changed, 5 insertions(+), 4 "
			      "deletions(-)\n");
	free(out);
	out = printed("");
	ck_assert_str_eq(out, "");
	free(out);
	/* A path the agent named with an escape sequence is shown, not
	 * obeyed. */
	out = printed("diff --git a/\x1b[2Jx b/\x1b[2Jx\n--- a/\x1b[2Jx\n"
		      "+++ b/\x1b[2Jx\n@@ -1 +1 @@\n-a\n+b\n");
	ck_assert_msg(!strchr(out, '\x1b'), "escape printed: %s", out);
	free(out);
}
END_TEST

/* A file of many changed lines gets a bar no wider than
 * DIFFSTAT_BAR_MAX, its halves in proportion. */
START_TEST(test_bar_scaled)
{
	char *diff = NULL, *out, *bar;
	size_t len = 0;
	FILE *m = open_memstream(&diff, &len);

	fputs("diff --git a/big b/big\n--- a/big\n+++ b/big\n@@ -1,100 "
	      "+1,300 @@\n",
	      m);
	for (int i = 0; i < 300; i++)
		fputs("+x\n", m);
	for (int i = 0; i < 100; i++)
		fputs("-y\n", m);
	fclose(m);
	out = printed(diff);
	bar = strstr(out, "400 ");
	ck_assert_ptr_nonnull(bar);
	bar += 4;
	ck_assert_uint_eq(strspn(bar, "+"), 30);
	ck_assert_uint_eq(strspn(bar + 30, "-"), 10);
	free(out);
	free(diff);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("diffstat");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_parse);
	tcase_add_test(tc, test_print);
	tcase_add_test(tc, test_bar_scaled);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* Unit tests for client/termsafe.c: what a run or an agent sends is shown
 * on the operator's terminal, never obeyed. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/termsafe.h"
#include "tests/lib/testlib.h"

/* Feed chunks through one stream into a pipe; return what came out. */
static char *stream_through(const char *const *chunks, size_t n)
{
	struct ts_stream st = {0};
	static char out[4096];
	int p[2];
	ssize_t got;

	ck_assert_int_eq(pipe(p), 0);
	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(
		    ts_stream_write(p[1], &st, chunks[i], strlen(chunks[i])),
		    0);
	ck_assert_int_eq(ts_stream_end(p[1], &st), 0);
	close(p[1]);
	got = read(p[0], out, sizeof(out) - 1);
	close(p[0]);
	ck_assert_int_ge(got, 0);
	out[got] = 0;
	return out;
}

static char *stream1(const char *s)
{
	return stream_through(&s, 1);
}

START_TEST(test_stream_escapes)
{
	/* OSC 52 (write the clipboard), a title, a title report request. */
	ck_assert_str_eq(stream1("a\x1b]52;c;cHduZWQ=\x07"
				 "b\x1b]0;T\x1b\\c\x1b[21t"),
			 "a^[]52;c;cHduZWQ=^Gb^[]0;T^[\\c^[[21t");
	/* Line discipline characters pass: progress bars, tabs. */
	ck_assert_str_eq(stream1("1\r2\n3\t4\b5"), "1\r2\n3\t4\b5");
	ck_assert_str_eq(stream1("x\x7fy\x01z"), "x^?y^Az");
	/* UTF-8 passes, including continuation bytes in 0x80..0x9f. */
	ck_assert_str_eq(stream1("\xc3\xa9t\xc3\xa9 \xc4\x81 \xe2\x82\xac"),
			 "\xc3\xa9t\xc3\xa9 \xc4\x81 \xe2\x82\xac");
	ck_assert_str_eq(stream1("\xc2\xa0nbsp"), "\xc2\xa0nbsp");
	/* C1 controls: U+009B (CSI) encoded, and a stray 8-bit CSI. */
	ck_assert_str_eq(stream1("a\xc2\x9b"
				 "31mb"),
			 "a\\u009b31mb");
	ck_assert_str_eq(stream1("a\x9b"
				 "31mb"),
			 "a\\x9b31mb");
	/* Split anywhere between chunks. */
	{
		const char *c[] = {"a\xc2", "\x9b[2J", "\x1b", "]0;t"};
		ck_assert_str_eq(stream_through(c, 4), "a\\u009b[2J^[]0;t");
	}
	{
		const char *c[] = {"\xe2", "\x82", "\xac!"};
		ck_assert_str_eq(stream_through(c, 3), "\xe2\x82\xac!");
	}
	/* A lead byte at the very end goes out as it came. */
	ck_assert_str_eq(stream1("end\xc2"), "end\xc2");
}
END_TEST

static char *field(void (*fn)(FILE *, const char *), const char *s)
{
	static char *out;
	size_t len;
	FILE *f;

	free(out);
	out = NULL;
	f = open_memstream(&out, &len);
	ck_assert_ptr_nonnull(f);
	fn(f, s);
	fclose(f);
	return out;
}

START_TEST(test_fields)
{
	ck_assert_str_eq(field(ts_fputs, "plain /path/x.c"), "plain /path/x.c");
	ck_assert_str_eq(field(ts_fputs, "a\nb\r\x1b[2Kc\\d"),
			 "a\\nb\\r\\e[2Kc\\\\d");
	ck_assert_str_eq(field(ts_fputs, "\x07\xc2\x9b\xc3\xa9"),
			 "\\x07\\u009b\xc3\xa9");
	ck_assert_str_eq(field(ts_fputs, NULL), "(null)");
}
END_TEST

START_TEST(test_args)
{
	ck_assert_str_eq(field(ts_fputs_arg, "ls"), "ls");
	ck_assert_str_eq(field(ts_fputs_arg, "--out=/tmp/a.o"),
			 "--out=/tmp/a.o");
	ck_assert_str_eq(field(ts_fputs_arg, ""), "''");
	ck_assert_str_eq(field(ts_fputs_arg, "a b"), "'a b'");
	ck_assert_str_eq(field(ts_fputs_arg, "rm -rf ~; x"), "'rm -rf ~; x'");
	ck_assert_str_eq(field(ts_fputs_arg, "it's"), "'it'\\''s'");
	/* A carriage return could make "rm -rf /" look like "ls". */
	ck_assert_str_eq(field(ts_fputs_arg, "rm -rf /\r\x1b[2Kls"),
			 "$'rm -rf /\\r\\e[2Kls'");
	ck_assert_str_eq(field(ts_fputs_arg, "x'\ny"), "$'x\\'\\ny'");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("termsafe");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_stream_escapes);
	tcase_add_test(tc, test_fields);
	tcase_add_test(tc, test_args);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

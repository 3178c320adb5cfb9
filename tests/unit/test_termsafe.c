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
	static char out[16384];
	size_t got = 0;
	ssize_t r;
	int p[2];

	ck_assert_int_eq(pipe(p), 0);
	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(
		    ts_stream_write(p[1], &st, chunks[i], strlen(chunks[i])),
		    0);
	ck_assert_int_eq(ts_stream_end(p[1], &st), 0);
	close(p[1]);
	while ((r = read(p[0], out + got, sizeof(out) - 1 - got)) > 0)
		got += (size_t)r;
	close(p[0]);
	ck_assert_int_ge(r, 0);
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

/* ck_assert_str_eq for strings too long for Check's message: the lengths
 * and where they first differ. */
#define ck_assert_long_str_eq(got, want)                                       \
	do {                                                                   \
		const char *g_ = (got), *w_ = (want);                          \
		size_t i_ = 0;                                                 \
		while (g_[i_] && g_[i_] == w_[i_])                             \
			i_++;                                                  \
		ck_assert_msg(g_[i_] == w_[i_],                                \
			      "%zu bytes, want %zu; from byte %zu: "           \
			      "\"%.40s\" want \"%.40s\"",                      \
			      strlen(g_), strlen(w_), i_, g_ + i_, w_ + i_);   \
	} while (0)

/* n spaces and then tail (n < 8192). */
static const char *blanks(size_t n, const char *tail)
{
	enum { BLANKS_BUF = 8192 + 64 };
	static char buf0[BLANKS_BUF], buf1[BLANKS_BUF];
	static bool which;
	char *b = (which = !which) ? buf1 : buf0;
	size_t t = strlen(tail);

	ck_assert_uint_lt(n + t, BLANKS_BUF);
	if (n + t >= BLANKS_BUF)
		return "";
	memset(b, ' ', n);
	memcpy(b + n, tail, t + 1);
	return b;
}

START_TEST(test_stream_bidi_and_invisible)
{
	/* The review's case: RLO ... PDF reorders "intentional bad" on
	 * screen; shown escaped, it reads as the bytes that were printed. */
	ck_assert_str_eq(stream1("echo \xe2\x80\xae)dab(lanoitnetni"
				 "\xe2\x80\xac safe"),
			 "echo \\u202e)dab(lanoitnetni\\u202c safe");
	/* Isolates, marks, the Arabic letter mark. */
	ck_assert_str_eq(stream1("\xe2\x81\xa6"
				 "a\xe2\x81\xa9"
				 "\xe2\x80\x8e\xe2\x80\x8f\xd8\x9c"),
			 "\\u2066a\\u2069\\u200e\\u200f\\u061c");
	/* Zero-width space, joiners, word joiner, BOM, a tag character. */
	ck_assert_str_eq(stream1("r\xe2\x80\x8bm\xe2\x80\x8c\xe2\x80\x8d"
				 "\xe2\x81\xa0\xef\xbb\xbf\xf3\xa0\x81\x81"),
			 "r\\u200bm\\u200c\\u200d\\u2060\\ufeff\\U000e0041");
	/* Line and paragraph separators. */
	ck_assert_str_eq(stream1("a\xe2\x80\xa8"
				 "b\xe2\x80\xa9"
				 "c"),
			 "a\\u2028b\\u2029c");
	/* What is merely not ASCII still passes: an emoji, CJK, a quote
	 * mark whose encoding shares its first bytes with RLO. */
	ck_assert_str_eq(stream1("\xf0\x9f\x98\x80\xe6\x97\xa5\xe2\x80\x9c"),
			 "\xf0\x9f\x98\x80\xe6\x97\xa5\xe2\x80\x9c");
	/* Split between chunks at every point of the sequence. */
	{
		const char *c[] = {"a\xe2", "\x80",
				   "\xae"
				   "b"};
		ck_assert_str_eq(stream_through(c, 3), "a\\u202eb");
	}
	{
		const char *c[] = {"\xf3\xa0", "\x81\x81!"};
		ck_assert_str_eq(stream_through(c, 2), "\\U000e0041!");
	}
}
END_TEST

START_TEST(test_stream_blank_runs)
{
	char want[8192];

	/* A 5,000-space flood before "rm": the first TS_STREAM_BLANKS_MAX
	 * pass, the rest is counted. */
	snprintf(want, sizeof(want), "%s\\{%d blanks elided}rm",
		 blanks(TS_STREAM_BLANKS_MAX, ""), 5000 - TS_STREAM_BLANKS_MAX);
	ck_assert_long_str_eq(stream1(blanks(5000, "rm")), want);
	/* Padding up to the limit passes byte for byte. */
	ck_assert_long_str_eq(stream1(blanks(TS_STREAM_BLANKS_MAX, "x")),
			      blanks(TS_STREAM_BLANKS_MAX, "x"));
	/* A run split across chunks is one run; its end may be the stream's. */
	snprintf(want, sizeof(want), "%s\\{144 blanks elided}",
		 blanks(TS_STREAM_BLANKS_MAX, ""));
	{
		const char *c[] = {blanks(200, ""), blanks(200, "")};
		ck_assert_long_str_eq(stream_through(c, 2), want);
	}
	/* A newline ends a run. */
	{
		char in[600];
		snprintf(in, sizeof(in), "%s\n%s", blanks(200, ""),
			 blanks(200, ""));
		ck_assert_long_str_eq(stream1(in), in);
	}
}
END_TEST

/* The same escaping into a string, for what a person reads through an
 * MCP client's elicitation. */
START_TEST(test_strdup)
{
	char *s = ts_strdup("run \xe2\x80\xae"
			    "txt.exe\x1b[2J\\ ok");

	ck_assert_ptr_nonnull(s);
	ck_assert_str_eq(s, "run \\u202etxt.exe\\e[2J\\\\ ok");
	free(s);
	s = ts_strdup(NULL);
	ck_assert_str_eq(s, "(null)");
	free(s);
}
END_TEST

START_TEST(test_fields_invisible)
{
	char want[256];

	ck_assert_long_str_eq(field(ts_fputs, "a\xe2\x80\xae"
					      "b\xe2\x80\xa8"
					      "c\xe2\x80\x8b"),
			      "a\\u202eb\\u2028c\\u200b");
	snprintf(want, sizeof(want), "%s\\{%d blanks elided}x",
		 blanks(TS_FIELD_BLANKS_MAX, ""), 5000 - TS_FIELD_BLANKS_MAX);
	ck_assert_long_str_eq(field(ts_fputs, blanks(5000, "x")), want);
	ck_assert_long_str_eq(field(ts_fputs, blanks(TS_FIELD_BLANKS_MAX, "x")),
			      blanks(TS_FIELD_BLANKS_MAX, "x"));
	/* No-break spaces are blanks too. */
	{
		char in[200] = "", *p = in;
		for (int i = 0; i < 40; i++)
			p += sprintf(p, "\xc2\xa0");
		snprintf(want, sizeof(want), "%.*s\\{24 blanks elided}",
			 2 * TS_FIELD_BLANKS_MAX, in);
		ck_assert_long_str_eq(field(ts_fputs, in), want);
	}
}
END_TEST

START_TEST(test_args_invisible)
{
	char want[256];

	/* The argv an approval shows: a reordering character makes it
	 * $'...' with the character escaped. */
	ck_assert_long_str_eq(field(ts_fputs_arg,
				    "echo \xe2\x80\xae)dab(lanoitnetni"
				    "\xe2\x80\xac safe"),
			      "$'echo \\u202e)dab(lanoitnetni\\u202c safe'");
	ck_assert_long_str_eq(field(ts_fputs_arg, "rm\xe2\x80\x8b"),
			      "$'rm\\u200b'");
	ck_assert_long_str_eq(field(ts_fputs_arg, "a\xe2\x80\xa9"
						  "b"),
			      "$'a\\u2029b'");
	/* A 5,000-space argument pushing the real command off screen. */
	snprintf(want, sizeof(want), "$'%s\\{%d blanks elided}; rm -rf ~'",
		 blanks(TS_FIELD_BLANKS_MAX, ""), 5000 - TS_FIELD_BLANKS_MAX);
	ck_assert_long_str_eq(field(ts_fputs_arg, blanks(5000, "; rm -rf ~")),
			      want);
	ck_assert_long_str_eq(field(ts_fputs_arg, "a\xc2\xa0"
						  "b"),
			      "'a\xc2\xa0"
			      "b'");
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
	tcase_add_test(tc, test_stream_bidi_and_invisible);
	tcase_add_test(tc, test_stream_blank_runs);
	tcase_add_test(tc, test_fields_invisible);
	tcase_add_test(tc, test_strdup);
	tcase_add_test(tc, test_args_invisible);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

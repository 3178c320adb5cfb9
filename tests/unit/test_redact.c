/*
 * Unit tests for common/redact: every encoding at every alignment inside
 * longer blobs, every chunk size, overlapping and prefix secrets, binary
 * input, long and empty input, and a differential test against a naive
 * matcher.  The assertion is always the exact expected output: the secret
 * in any form is replaced and every other byte is unchanged.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/testlib.h"
#include "common/buf.h"
#include "common/redact.h"

/* ---- independent encoders (not the library's) ---- */

static char *t_b64(const void *in, size_t n, int url, int pad, size_t *ret_len)
{
	const char *a = url ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuv"
			      "wxyz0123456789-_"
			    : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuv"
			      "wxyz0123456789+/";
	const unsigned char *p = in;
	char *o = malloc(n * 4 / 3 + 8);
	size_t k = 0;
	uint32_t acc = 0;
	int bits = 0;

	for (size_t i = 0; i < n; i++) {
		acc = acc << 8 | p[i];
		bits += 8;
		while (bits >= 6) {
			o[k++] = a[(acc >> (bits - 6)) & 63];
			bits -= 6;
		}
	}
	if (bits)
		o[k++] = a[(acc << (6 - bits)) & 63];
	while (pad && k % 4)
		o[k++] = '=';
	o[k] = 0;
	*ret_len = k;
	return o;
}

static char *t_hex(const void *in, size_t n, int upper)
{
	const unsigned char *p = in;
	char *o = malloc(2 * n + 1);

	for (size_t i = 0; i < n; i++)
		sprintf(o + 2 * i, upper ? "%02X" : "%02x", p[i]);
	return o;
}

/* Percent-encode: all but unreserved, or only the reserved bytes. */
static char *t_url(const char *s, int lower, int reserved_only)
{
	char *o = malloc(3 * strlen(s) + 1), *q = o;

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		int unres = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
			    (c >= '0' && c <= '9') || strchr("-._~", c);
		int res = strchr(":/?#[]@!$&'()*+,;=", c) != NULL;

		if (unres || (reserved_only && !res))
			*q++ = (char)c;
		else
			q += sprintf(q, lower ? "%%%02x" : "%%%02X", c);
	}
	*q = 0;
	return o;
}

/* JSON-escape as jansson does (uppercase \u) or as Python's ensure_ascii
 * (lowercase \u, non-ASCII escaped).  Handles the BMP only. */
static char *t_json(const char *s, int python)
{
	char *o = malloc(6 * strlen(s) + 1), *q = o;
	const unsigned char *p = (const unsigned char *)s;

	while (*p) {
		unsigned c = *p;

		if (c == '"' || c == '\\') {
			*q++ = '\\';
			*q++ = (char)c;
			p++;
		} else if (c == '\n') {
			q += sprintf(q, "\\n");
			p++;
		} else if (c < 0x20) {
			q += sprintf(q, python ? "\\u%04x" : "\\u%04X", c);
			p++;
		} else if (c >= 0x80 && python) {
			unsigned u =
			    (unsigned)(p[0] & 0x1f) << 6 | (p[1] & 0x3f);
			if (c >= 0xe0) {
				u = (unsigned)(p[0] & 0x0f) << 12 |
				    (unsigned)(p[1] & 0x3f) << 6 |
				    (p[2] & 0x3f);
				p++;
			}
			p += 2;
			q += sprintf(q, "\\u%04x", u);
		} else {
			*q++ = (char)c;
			p++;
		}
	}
	*q = 0;
	return o;
}

/* ---- helpers ---- */

static void check_every_split(const struct redact_set *s, const char *in,
			      size_t n, const char *expect, size_t elen);

static struct redact_set *mkset(const char *const *names,
				const char *const *values, const size_t *lens,
				size_t n)
{
	struct redact_builder *b;
	struct redact_set *s;

	ck_assert_int_eq(redact_builder_new(&b), 0);
	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(
		    redact_builder_add(b, names[i], values[i],
				       lens ? lens[i] : strlen(values[i])),
		    0);
	ck_assert_int_eq(redact_builder_build(b, &s), 0);
	return s;
}

static struct redact_set *mkset1(const char *name, const char *value)
{
	return mkset(&name, &value, NULL, 1);
}

/* Redact in chunks of k bytes; returns malloc'd output. */
static char *stream_k(const struct redact_set *s, const char *in, size_t n,
		      size_t k, size_t *ret_len)
{
	struct redact_stream *st;
	struct buf out = BUF_INIT;

	ck_assert_int_eq(redact_stream_new(s, &st), 0);
	for (size_t i = 0; i < n; i += k)
		ck_assert_int_eq(
		    redact_stream_feed(st, in + i, n - i < k ? n - i : k, &out),
		    0);
	ck_assert_int_eq(redact_stream_flush(st, &out), 0);
	redact_stream_free(st);
	ck_assert_int_eq(buf_append(&out, "", 0), 0);
	*ret_len = out.len;
	return out.data;
}

/* One-shot and streamed (several chunk sizes) must both give expect. */
static void check_redacts(const struct redact_set *s, const char *in, size_t n,
			  const char *expect, size_t elen)
{
	static const size_t ks[] = {1, 2, 3, 7, 64, 4096};
	char *out;
	size_t len;

	ck_assert_int_ge(redact_buf(s, in, n, &out, &len), 0);
	if (len != elen || memcmp(out, expect, elen) != 0)
		ck_abort_msg("redact_buf:\n got  \"%.*s\"\n want \"%.*s\"",
			     (int)len, out, (int)elen, expect);
	ck_assert(out[len] == '\0');
	free(out);
	for (size_t i = 0; i < sizeof(ks) / sizeof(ks[0]); i++) {
		out = stream_k(s, in, n, ks[i], &len);
		if (len != elen || memcmp(out, expect, elen) != 0)
			ck_abort_msg("stream k=%zu:\n got  \"%.*s\"\n want "
				     "\"%.*s\"",
				     ks[i], (int)len, out, (int)elen, expect);
		free(out);
	}
}

static void check_str(const struct redact_set *s, const char *in,
		      const char *expect)
{
	check_redacts(s, in, strlen(in), expect, strlen(expect));
}

static char *cat3(const char *a, const char *b, const char *c)
{
	size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
	char *o = malloc(la + lb + lc + 1);

	memcpy(o, a, la);
	memcpy(o + la, b, lb);
	memcpy(o + la + lb, c, lc + 1);
	return o;
}

/* ---- tests ---- */

/* Locked memory of this process, from /proc/self/status, in kB. */
static long vmlck_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmLck: %ld kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

/* The automaton's bytes spell out every secret: they are locked in
 * memory (out of swap) while the set lives, and unlocked after. */
START_TEST(test_automaton_locked)
{
	struct rlimit rl;
	struct redact_set *s;
	long before, during, after;

#if defined(__SANITIZE_ADDRESS__)
	TEST_SKIP("AddressSanitizer makes mlock() a no-op");
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
	TEST_SKIP("AddressSanitizer makes mlock() a no-op");
#endif
#endif
	if (getrlimit(RLIMIT_MEMLOCK, &rl) < 0 || rl.rlim_cur < 64 * 1024)
		TEST_SKIP("RLIMIT_MEMLOCK is under 64 KiB here");
	before = vmlck_kb();
	ck_assert_int_ge(before, 0);
	s = mkset1("K", "sk-a-secret-value-to-lock-0123456789");
	during = vmlck_kb();
	redact_set_free(s);
	after = vmlck_kb();
	ck_assert_msg(during > before, "VmLck %ld kB before, %ld kB with a set",
		      before, during);
	ck_assert_int_eq(after, before);
}
END_TEST

/* A set its owner let go of lives on while a stream reads it, and is
 * freed (its locked automaton released) with the last stream: a newer
 * set may replace spd's at any time (issue 36, finding 2). */
START_TEST(test_stream_keeps_set)
{
	const char *v = "sk-a-secret-value-held-by-a-stream-42";
	struct redact_set *s;
	struct redact_stream *st;
	struct buf out = BUF_INIT;
	struct rlimit rl;
	long before, held, after;
	bool lck =
	    getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur >= 64 * 1024;

#if defined(__SANITIZE_ADDRESS__)
	lck = false; /* mlock() is a no-op: VmLck says nothing */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
	lck = false;
#endif
#endif
	before = vmlck_kb();
	s = mkset1("K", v);
	ck_assert_int_eq(redact_stream_new(s, &st), 0);
	ck_assert_ptr_eq(redact_set_ref(s), s);
	redact_set_free(s);
	redact_set_free(s); /* the owner's reference and the extra one */
	held = vmlck_kb();
	ck_assert_int_eq(redact_stream_feed(st, "x ", 2, &out), 0);
	ck_assert_int_eq(redact_stream_feed(st, v, strlen(v), &out), 0);
	ck_assert_int_eq(redact_stream_flush(st, &out), 0);
	ck_assert_int_eq(buf_append(&out, "", 1), 0);
	ck_assert_str_eq(out.data, "x [redacted:K]");
	buf_free(&out);
	redact_stream_free(st);
	after = vmlck_kb();
	if (lck && before >= 0) {
		ck_assert_msg(held > before,
			      "the set was freed under its stream (VmLck %ld "
			      "kB, %ld before)",
			      held, before);
		ck_assert_int_eq(after, before);
	}
	ck_assert_ptr_null(redact_set_ref(NULL));
}
END_TEST

START_TEST(test_refuse)
{
	struct redact_builder *b;
	struct redact_set *s;
	char big[REDACT_MAX_LEN + 1];
	char *out;
	size_t len;

	memset(big, 'z', sizeof(big));
	ck_assert_int_eq(redact_builder_new(&b), 0);
	ck_assert_int_eq(redact_builder_add(b, "K", "1234567", 7), -EINVAL);
	ck_assert_int_eq(redact_builder_add(b, "K", "", 0), -EINVAL);
	ck_assert_int_eq(redact_builder_add(b, "", "12345678", 8), -EINVAL);
	ck_assert_int_eq(redact_builder_add(b, "A]B", "12345678", 8), -EINVAL);
	ck_assert_int_eq(redact_builder_add(b, "A B", "12345678", 8), -EINVAL);
	ck_assert_int_eq(redact_builder_add(b, "K", big, sizeof(big)), -E2BIG);
	ck_assert_int_eq(redact_builder_add(b, "K", big, REDACT_MAX_LEN), 0);
	ck_assert_int_eq(redact_builder_build(b, &s), 0);
	/* The refused short value is not redacted; the long one is. */
	ck_assert_int_eq(redact_buf(s, "x 1234567 y", 11, &out, &len), 0);
	ck_assert_str_eq(out, "x 1234567 y");
	free(out);
	ck_assert(redact_contains(s, big, REDACT_MAX_LEN));
	ck_assert(!redact_contains(s, big, REDACT_MAX_LEN - 1));
	redact_set_free(s);
	redact_set_free(NULL);
	redact_builder_free(NULL);
	redact_stream_free(NULL);
}
END_TEST

START_TEST(test_env)
{
	const char *env[] = {"PATH=/usr/bin:/bin",
			     "OPENAI_API_KEY=sk-env-0123456789",
			     "GITHUB_TOKEN=short",
			     "HOME=/home/op",
			     "MY_SECRET_THING=hunter2hunter2",
			     "NOEQUALS",
			     NULL};
	struct redact_builder *b;
	struct redact_set *s;

	ck_assert_int_eq(redact_builder_new(&b), 0);
	ck_assert_int_eq(redact_builder_add_env(b, env), 2);
	ck_assert_int_eq(redact_builder_build(b, &s), 0);
	/* Secret names are redacted; ordinary variables and a value too
	 * short to register are left alone. */
	check_str(
	    s, "k=sk-env-0123456789 p=hunter2hunter2 /home/op /usr/bin short",
	    "k=[redacted:OPENAI_API_KEY] p=[redacted:MY_SECRET_THING] "
	    "/home/op /usr/bin short");
	redact_set_free(s);
}
END_TEST

START_TEST(test_plain)
{
	struct redact_set *s = mkset1("OPENAI_API_KEY", "sk-proj-abc123XYZ");

	ck_assert_uint_gt(redact_set_count(s), 5);
	check_str(s, "key=sk-proj-abc123XYZ\n",
		  "key=[redacted:OPENAI_API_KEY]\n");
	/* Adjacent, not overlapping: two markers. */
	check_str(s, "sk-proj-abc123XYZsk-proj-abc123XYZ",
		  "[redacted:OPENAI_API_KEY][redacted:OPENAI_API_KEY]");
	check_str(s, "sk-proj-abc123XY is not it",
		  "sk-proj-abc123XY is not it");
	check_str(s, "", "");
	ck_assert(redact_contains(s, "..sk-proj-abc123XYZ..", 21));
	ck_assert(!redact_contains(s, "..sk-proj-abc123XY..", 20));
	redact_set_free(s);
}
END_TEST

/* base64 of pre + secret + post for every alignment and both alphabets,
 * padded and not: the characters that carry only the secret's bits, and
 * at the end of the data the padding too, become one marker. */
START_TEST(test_base64_alignments)
{
	static const char secret[] = "tok_9f8e7d6c5b4a\x01\xff~Z";
	const size_t sl = sizeof(secret) - 1;
	struct redact_set *s = mkset1("TOK", secret);
	unsigned char blob[64];

	for (size_t pre = 0; pre < 6; pre++) {
		for (size_t post = 0; post < 6; post++) {
			for (int mode = 0; mode < 4; mode++) {
				int url = mode & 1, pad = mode >> 1;
				size_t n = pre + sl + post, elen, bl;
				char *enc, *expect;
				/* Characters fixed by the secret's bits. */
				size_t first = (8 * pre + 5) / 6;
				size_t last = 8 * (pre + sl) / 6;

				for (size_t i = 0; i < pre; i++)
					blob[i] = (unsigned char)(0xa0 + i);
				memcpy(blob + pre, secret, sl);
				for (size_t i = 0; i < post; i++)
					blob[pre + sl + i] =
					    (unsigned char)(0xc1 + 7 * i);
				/* The bytes after have their high bits set, so the
				 * character shared with the secret differs from
				 * the end-of-data one (zero fill). */
				enc = t_b64(blob, n, url, pad, &bl);
				if (post == 0)
					last = bl; /* tail and padding too */
				expect = malloc(bl + 32);
				memcpy(expect, enc, first);
				elen = first;
				elen += (size_t)sprintf(expect + elen,
							"[redacted:TOK]");
				memcpy(expect + elen, enc + last, bl - last);
				elen += bl - last;
				check_redacts(s, enc, bl, expect, elen);
				/* Inside a longer line of text. */
				char *line = cat3("data: ", enc, " end");
				expect[elen] = 0;
				char *eline = cat3("data: ", expect, " end");
				check_str(s, line, eline);
				free(line);
				free(eline);
				free(enc);
				free(expect);
			}
		}
	}
	redact_set_free(s);
}
END_TEST

START_TEST(test_hex)
{
	static const char secret[] = "ghp_0123456789abcdefXYZ";
	struct redact_set *s = mkset1("GH_TOKEN", secret);

	for (int up = 0; up < 2; up++) {
		char *h = t_hex(secret, strlen(secret), up);
		/* A hex blob: a hash, the secret, another hash. */
		char *in = cat3("sha256:e3b0c44298fc1c149afbf4c8996fb924", h,
				"27ae41e4649b934ca495991b7852b855\n");
		check_str(s, in,
			  "sha256:e3b0c44298fc1c149afbf4c8996fb924"
			  "[redacted:GH_TOKEN]"
			  "27ae41e4649b934ca495991b7852b855\n");
		free(in);
		free(h);
	}
	redact_set_free(s);
}
END_TEST

START_TEST(test_url)
{
	static const char secret[] = "p@ss/w0rd+key=&x y%z";
	struct redact_set *s = mkset1("DB_PASSWORD", secret);

	for (int lower = 0; lower < 2; lower++) {
		for (int ro = 0; ro < 2; ro++) {
			char *u = t_url(secret, lower, ro);
			char *in = cat3("GET https://db.example/?pw=", u,
					"&next=1 HTTP/1.1");

			check_str(s, in,
				  "GET https://db.example/?pw="
				  "[redacted:DB_PASSWORD]&next=1 HTTP/1.1");
			free(in);
			free(u);
		}
	}
	/* Form encoding: space as '+'. */
	check_str(s, "pw=p%40ss%2Fw0rd%2Bkey%3D%26x+y%25z;",
		  "pw=[redacted:DB_PASSWORD];");
	redact_set_free(s);
}
END_TEST

START_TEST(test_json)
{
	static const char secret[] = "q\"uo\\te/\n\x01-\xc3\xa9t\xc3\xa9-key";
	struct redact_set *s = mkset1("API_KEY", secret);

	for (int py = 0; py < 2; py++) {
		char *j = t_json(secret, py);
		char *in = cat3("{\"error\":\"bad key ", j, "\",\"code\":401}");

		check_str(s, in,
			  "{\"error\":\"bad key [redacted:API_KEY]\","
			  "\"code\":401}");
		free(in);
		free(j);
	}
	/* jansson's JSON_ESCAPE_SLASH. */
	check_str(s, "\"q\\\"uo\\\\te\\/\\n\\u0001-\xc3\xa9t\xc3\xa9-key\"",
		  "\"[redacted:API_KEY]\"");
	redact_set_free(s);
}
END_TEST

struct forms {
	char **f;
	size_t *len;
	size_t n, cap;
};

static int collect(const void *form, size_t n, void *ud)
{
	struct forms *fs = ud;

	if (fs->n == fs->cap) {
		fs->cap = fs->cap ? 2 * fs->cap : 64;
		fs->f = realloc(fs->f, fs->cap * sizeof(*fs->f));
		fs->len = realloc(fs->len, fs->cap * sizeof(*fs->len));
	}
	fs->f[fs->n] = malloc(n + 1);
	memcpy(fs->f[fs->n], form, n);
	fs->len[fs->n++] = n;
	return 0;
}

static void forms_free(struct forms *fs)
{
	for (size_t i = 0; i < fs->n; i++)
		free(fs->f[i]);
	free(fs->f);
	free(fs->len);
}

static void assert_no_form(const char *out, size_t len, const struct forms *fs)
{
	for (size_t i = 0; i < fs->n; i++)
		if (memmem(out, len, fs->f[i], fs->len[i]))
			ck_abort_msg("form %zu \"%.*s\" in output", i,
				     (int)fs->len[i], fs->f[i]);
}

/* Every form, each between lines of text; fed in chunks of every size
 * from 1 byte to past the longest pattern. */
START_TEST(test_chunks_every_size)
{
	static const char secret[] = "Sup3r/Secret+Value=\"x\"&y";
	struct redact_set *s = mkset1("S", secret);
	struct forms fs = {0};
	struct buf in = BUF_INIT, expect = BUF_INIT;

	ck_assert_int_eq(redact_forms(secret, strlen(secret), collect, &fs), 0);
	ck_assert_uint_gt(fs.n, 20);
	for (size_t i = 0; i < fs.n; i++) {
		buf_printf(&in, "  CC  src/file%zu.o\n", i);
		buf_printf(&expect, "  CC  src/file%zu.o\n", i);
		buf_append(&in, fs.f[i], fs.len[i]);
		buf_puts(&expect, "[redacted:S]");
	}
	buf_puts(&in, "\ndone\n");
	buf_puts(&expect, "\ndone\n");
	check_redacts(s, in.data, in.len, expect.data, expect.len);
	for (size_t k = 1; k <= redact_set_max_len(s) + 8; k++) {
		size_t len;
		char *out = stream_k(s, in.data, in.len, k, &len);

		ck_assert_uint_eq(len, expect.len);
		ck_assert(memcmp(out, expect.data, len) == 0);
		assert_no_form(out, len, &fs);
		free(out);
	}
	forms_free(&fs);
	buf_free(&in);
	buf_free(&expect);
	redact_set_free(s);
}
END_TEST

START_TEST(test_overlap_and_prefix)
{
	const char *names[] = {"A", "B", "C", "D"};
	const char *values[] = {"abcdefgh12345678", "12345678ZYXWVUTS",
				"prefix-secret", "prefix-secret-and-more-tail"};
	struct redact_set *s = mkset(names, values, NULL, 4);

	/* The union of overlapping matches, under the leftmost name. */
	check_str(s, "xx abcdefgh12345678ZYXWVUTS yy", "xx [redacted:A] yy");
	check_str(s, "xx 12345678ZYXWVUTS yy", "xx [redacted:B] yy");
	/* The longer of two secrets sharing a prefix wins whole. */
	check_str(s, "<prefix-secret-and-more-tail>", "<[redacted:D]>");
	check_str(s, "<prefix-secret-and-more>", "<[redacted:C]-and-more>");
	check_str(s, "prefix-secret-and-more-tailprefix-secret",
		  "[redacted:D][redacted:C]");
	redact_set_free(s);

	/* Registered the other way round: the same. */
	const char *n2[] = {"D", "C"};
	const char *v2[] = {"prefix-secret-and-more-tail", "prefix-secret"};
	s = mkset(n2, v2, NULL, 2);
	check_str(s, "<prefix-secret-and-more-tail>", "<[redacted:D]>");
	check_str(s, "<prefix-secret-and-more-tai>",
		  "<[redacted:C]-and-more-tai>");
	redact_set_free(s);

	/* One secret nested inside another, and a self-overlapping one. */
	const char *n3[] = {"OUTER", "INNER", "REP"};
	const char *v3[] = {"0000-inner-secret-1111", "inner-secret",
			    "abababababab"};
	s = mkset(n3, v3, NULL, 3);
	check_str(s, "(0000-inner-secret-1111)", "([redacted:OUTER])");
	check_str(s, "(0000-inner-secret-111)", "(0000-[redacted:INNER]-111)");
	check_str(s, "(abababababababababab)", "([redacted:REP])");
	/* The reversed form, "babababababa", covers the rest. */
	check_str(s, "(ababababababa)", "([redacted:REP])");
	check_str(s, "(abababababab)", "([redacted:REP])");
	redact_set_free(s);
}
END_TEST

START_TEST(test_binary)
{
	static const char secret[] = "\0bin\0secret\0\xff\xfe";
	const size_t sl = sizeof(secret) - 1;
	const char *name = "BIN";
	const char *value = secret;
	struct redact_set *s = mkset(&name, &value, &sl, 1);
	char in[4096], expect[4096];
	size_t n = 0, e = 0;
	unsigned x = 12345;

	for (int rep = 0; rep < 20; rep++) {
		for (int i = 0; i < 100; i++) {
			x = x * 1103515245 + 12345;
			/* NULs and 'A's around the secret's own NULs. */
			in[n] = expect[e++] = (char)((x >> 16) % 3 ? 0 : 0x41);
			n++;
		}
		memcpy(in + n, secret, sl);
		n += sl;
		e += (size_t)sprintf(expect + e, "[redacted:BIN]");
	}
	check_redacts(s, in, n, expect, e);
	redact_set_free(s);
}
END_TEST

/* One line of several MiB, secrets at its start, middle and end. */
START_TEST(test_long_line)
{
	static const char secret[] = "AKIAIOSFODNN7EXAMPLEwJalrXUtnFEMI";
	const size_t n = 8u << 20, sl = strlen(secret);
	struct redact_set *s = mkset1("AWS_SECRET_ACCESS_KEY", secret);
	static const char marker[] = "[redacted:AWS_SECRET_ACCESS_KEY]";
	char *in = malloc(n), *expect = malloc(n + 3 * sizeof(marker));
	size_t e = 0, len;
	char *out;

	for (size_t i = 0; i < n; i++)
		in[i] = "abcdefghij0123456789/._-ABCDEF "[i % 31];
	memcpy(in, secret, sl);
	memcpy(in + n / 2, secret, sl);
	memcpy(in + n - sl, secret, sl);
	memcpy(expect, marker, sizeof(marker) - 1);
	e = sizeof(marker) - 1;
	memcpy(expect + e, in + sl, n / 2 - sl);
	e += n / 2 - sl;
	memcpy(expect + e, marker, sizeof(marker) - 1);
	e += sizeof(marker) - 1;
	memcpy(expect + e, in + n / 2 + sl, n - sl - (n / 2 + sl));
	e += n - sl - (n / 2 + sl);
	memcpy(expect + e, marker, sizeof(marker) - 1);
	e += sizeof(marker) - 1;

	ck_assert_int_eq(redact_buf(s, in, n, &out, &len), 3);
	ck_assert_uint_eq(len, e);
	ck_assert(memcmp(out, expect, e) == 0);
	ck_assert(!memmem(out, len, secret, sl));
	free(out);
	out = stream_k(s, in, n, 65536 + 3, &len);
	ck_assert_uint_eq(len, e);
	ck_assert(memcmp(out, expect, e) == 0);
	free(out);
	free(in);
	free(expect);
	redact_set_free(s);
}
END_TEST

START_TEST(test_empty)
{
	struct redact_builder *b;
	struct redact_set *s;
	struct redact_stream *st;
	struct buf out = BUF_INIT;
	char *o;
	size_t len;

	/* No secrets: everything passes unchanged. */
	ck_assert_int_eq(redact_builder_new(&b), 0);
	ck_assert_int_eq(redact_builder_build(b, &s), 0);
	ck_assert_uint_eq(redact_set_count(s), 0);
	check_str(s, "nothing to hide", "nothing to hide");
	ck_assert_int_eq(redact_buf(s, NULL, 0, &o, &len), 0);
	ck_assert_uint_eq(len, 0);
	ck_assert_str_eq(o, "");
	free(o);
	redact_set_free(s);

	s = mkset1("K", "0123456789");
	ck_assert_int_eq(redact_buf(s, NULL, 0, &o, &len), 0);
	ck_assert_uint_eq(len, 0);
	free(o);
	ck_assert_int_eq(redact_stream_new(s, &st), 0);
	ck_assert_int_eq(redact_stream_feed(st, NULL, 0, &out), 0);
	ck_assert_int_eq(redact_stream_flush(st, &out), 0);
	ck_assert_uint_eq(out.len, 0);
	/* A flushed stream starts over. */
	ck_assert_int_eq(redact_stream_feed(st, "01234", 5, &out), 0);
	ck_assert_int_eq(redact_stream_feed(st, "56789.", 6, &out), 0);
	ck_assert_int_eq(redact_stream_flush(st, &out), 0);
	ck_assert_str_eq(out.data, "[redacted:K].");
	redact_stream_free(st);
	buf_free(&out);
	redact_set_free(s);
}
END_TEST

/* A stream holds back only what may still be the start of a secret. */
START_TEST(test_holdback)
{
	struct redact_set *s = mkset1("K", "0123456789abcdef");
	struct redact_stream *st;
	struct buf out = BUF_INIT;
	const char *line = "compiling module; no secret on this line here\n";
	size_t fed = 0;

	ck_assert_int_eq(redact_stream_new(s, &st), 0);
	for (int i = 0; i < 100; i++) {
		ck_assert_int_eq(
		    redact_stream_feed(st, line, strlen(line), &out), 0);
		fed += strlen(line);
		ck_assert_uint_ge(out.len + redact_set_max_len(s) - 1, fed);
		/* The full line, up to a possible start of a secret and
		 * the newline that may sit inside a wrapped one. */
		ck_assert_uint_ge(out.len + 16, fed);
	}
	/* A partial secret is held until it is known not to be one. */
	ck_assert_int_eq(redact_stream_feed(st, "0123456789", 10, &out), 0);
	ck_assert(!memmem(out.data, out.len, "0123456789", 10));
	ck_assert_int_eq(redact_stream_feed(st, "abcdeX", 6, &out), 0);
	ck_assert_int_eq(redact_stream_flush(st, &out), 0);
	ck_assert_uint_eq(out.len, fed + 16);
	redact_stream_free(st);
	buf_free(&out);
	redact_set_free(s);
}
END_TEST

/* ---- differential test against a naive matcher ---- */

static uint64_t rng_state;

static uint32_t rnd(uint32_t n)
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng_state >> 33) % n;
}

struct pat {
	char *p;
	size_t n;
	size_t secret;
};

static int t_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The text with whitespace left out: c[] its bytes, at[] their offsets,
 * brk[i] set when a run longer than REDACT_WS_RUN_MAX comes before c[i].
 * Returns the length. */
static size_t t_compact(const char *in, size_t n, char *c, size_t *at,
			char *brk)
{
	size_t k = 0, run = 0;

	for (size_t i = 0; i < n; i++) {
		if (t_ws(in[i])) {
			run++;
			continue;
		}
		brk[k] = run > REDACT_WS_RUN_MAX;
		at[k] = i;
		c[k++] = in[i];
		run = 0;
	}
	return k;
}

/* Whether pattern p (whitespace left out) is at compacted offset i. */
static int t_at(const char *c, const char *brk, size_t nc, size_t i,
		const struct pat *p)
{
	size_t k = 0;

	for (size_t j = 0; j < p->n; j++) {
		if (t_ws(p->p[j]))
			continue;
		if (i + k >= nc || c[i + k] != p->p[j] || (k && brk[i + k]))
			return 0;
		k++;
	}
	return (int)k;
}

/* Expected output: union of all occurrences of all forms in the text
 * with its whitespace left out; a merged range is named after its
 * leftmost match, the longest at that start, and for equal forms the
 * first-registered secret, and spans from its first byte to its last. */
static void naive(const struct pat *pats, size_t np, char *const *names,
		  const char *in, size_t n, struct buf *out)
{
	char *c = malloc(n + 1), *brk = malloc(n + 1);
	size_t *at = malloc((n + 1) * sizeof(*at));
	size_t nc = t_compact(in, n, c, at, brk), pos = 0;

	for (size_t i = 0; i < nc;) {
		size_t best = (size_t)-1, blen = 0, end = 0;

		for (size_t j = 0; j < np; j++) {
			size_t l = (size_t)t_at(c, brk, nc, i, &pats[j]);

			if (l && (l > blen ||
				  (l == blen && pats[j].secret < best))) {
				best = pats[j].secret;
				blen = l;
			}
		}
		if (!blen) {
			i++;
			continue;
		}
		buf_append(out, in + pos, at[i] - pos);
		buf_printf(out, "[redacted:%s]", names[best]);
		/* Extend over every match that starts inside the range. */
		end = i + blen;
		for (size_t k = i + 1; k < end; k++)
			for (size_t j = 0; j < np; j++) {
				size_t l =
				    (size_t)t_at(c, brk, nc, k, &pats[j]);

				if (l && k + l > end)
					end = k + l;
			}
		pos = at[end - 1] + 1;
		i = end;
	}
	buf_append(out, in + pos, n - pos);
	free(c);
	free(brk);
	free(at);
}

struct pat_list {
	struct pat *v;
	size_t n, cap, cur;
};

static int add_pat(const void *form, size_t n, void *ud)
{
	struct pat_list *l = ud;
	char *c = malloc(n);

	memcpy(c, form, n);
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 64;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
	}
	l->v[l->n++] = (struct pat){c, n, l->cur};
	return 0;
}

START_TEST(test_differential)
{
	/* A small alphabet makes overlaps, shared prefixes and repeats. */
	static const char alpha[] = "ab/+=%\"\\\n";

	rng_state = 42;
	for (int round = 0; round < 300; round++) {
		size_t ns = 1 + rnd(4);
		char *names[4], *vals[4];
		size_t lens[4];
		struct redact_builder *b;
		struct redact_set *s;
		struct pat_list pl = {0};
		struct buf in = BUF_INIT, expect = BUF_INIT;

		ck_assert_int_eq(redact_builder_new(&b), 0);
		for (size_t i = 0; i < ns; i++) {
			/* Short values, and values past the filter's span. */
			lens[i] = round % 2 ? 8 + rnd(6) : 30 + rnd(20);
			vals[i] = malloc(lens[i]);
			/* At least 8 bytes that are not whitespace. */
			for (size_t j = 0; j < lens[i]; j++)
				vals[i][j] =
				    alpha[rnd(rnd(2) || j < 8 ? 2 : 9)];
			names[i] = malloc(24);
			snprintf(names[i], 24, "S%zu", i);
			ck_assert_int_eq(
			    redact_builder_add(b, names[i], vals[i], lens[i]),
			    0);
			pl.cur = i;
			redact_forms(vals[i], lens[i], add_pat, &pl);
		}
		ck_assert_int_eq(redact_builder_build(b, &s), 0);
		/* Text: random bytes, pieces of forms, whole forms. */
		for (int piece = 0; piece < 30; piece++) {
			const struct pat *p = &pl.v[rnd((uint32_t)pl.n)];
			size_t r = rnd(3);

			if (r == 0) {
				for (size_t k = rnd(6); k > 0; k--) {
					char c = alpha[rnd(9)];
					buf_append(&in, &c, 1);
				}
			} else if (r == 1) {
				buf_append(&in, p->p, rnd((uint32_t)p->n));
			} else {
				buf_append(&in, p->p, p->n);
			}
		}
		naive(pl.v, pl.n, names, in.data, in.len, &expect);
		check_redacts(s, in.data, in.len, expect.data, expect.len);
		size_t len;
		char *out = NULL;
		struct redact_stream *st;
		struct buf so = BUF_INIT;
		ck_assert_int_eq(redact_stream_new(s, &st), 0);
		for (size_t i = 0; i < in.len;) {
			size_t k = 1 + rnd(40);
			if (k > in.len - i)
				k = in.len - i;
			ck_assert_int_eq(
			    redact_stream_feed(st, in.data + i, k, &so), 0);
			i += k;
		}
		ck_assert_int_eq(redact_stream_flush(st, &so), 0);
		ck_assert_uint_eq(so.len, expect.len);
		ck_assert(memcmp(so.data, expect.data, so.len) == 0);
		ck_assert_int_eq(redact_contains(s, in.data, in.len),
				 expect.len != in.len ||
				     memcmp(expect.data, in.data, in.len));
		(void)out;
		(void)len;
		redact_stream_free(st);
		buf_free(&so);
		for (size_t i = 0; i < pl.n; i++)
			free(pl.v[i].p);
		free(pl.v);
		for (size_t i = 0; i < ns; i++) {
			free(names[i]);
			free(vals[i]);
		}
		buf_free(&in);
		buf_free(&expect);
		redact_set_free(s);
	}
}
END_TEST

/* ---- one set, many threads ---- */

struct thr {
	const struct redact_set *s;
	const char *in;
	size_t n;
	char *out;
	size_t len;
};

static void *thr_main(void *p)
{
	struct thr *t = p;
	struct redact_stream *st;
	struct buf out = BUF_INIT;

	if (redact_stream_new(t->s, &st) < 0)
		return NULL;
	for (size_t i = 0; i < t->n; i += 13)
		redact_stream_feed(st, t->in + i, t->n - i < 13 ? t->n - i : 13,
				   &out);
	redact_stream_flush(st, &out);
	redact_stream_free(st);
	t->out = out.data;
	t->len = out.len;
	return NULL;
}

START_TEST(test_threads)
{
	struct redact_set *s = mkset1("K", "shared-secret-value");
	struct buf in = BUF_INIT;
	struct thr t[4];
	pthread_t th[4];
	char *one;
	size_t len;

	for (int i = 0; i < 20000; i++)
		buf_printf(&in, "line %d shared-secret-value %x\n", i, i);
	ck_assert_int_eq(redact_buf(s, in.data, in.len, &one, &len), 20000);
	for (int i = 0; i < 4; i++) {
		t[i] = (struct thr){s, in.data, in.len, NULL, 0};
		ck_assert_int_eq(pthread_create(&th[i], NULL, thr_main, &t[i]),
				 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		ck_assert_uint_eq(t[i].len, len);
		ck_assert(memcmp(t[i].out, one, len) == 0);
		free(t[i].out);
	}
	ck_assert(!memmem(one, len, "shared-secret-value", 19));
	free(one);
	buf_free(&in);
	redact_set_free(s);
}
END_TEST

/*
 * A quiet source: what is held is released when it cannot be the start of
 * a secret, and kept when it can — a secret written one byte at a time
 * with pauses (an idle call after every byte) is still caught whole.
 */
START_TEST(test_idle_release)
{
	const char *secret = "sk-ant-idle-SECRET-0123456789";
	struct redact_set *set = mkset1("KEY", secret);
	struct redact_stream *st;
	struct buf out = BUF_INIT;

	ck_assert_int_eq(redact_stream_new(set, &st), 0);
	/* A prompt with no newline shows up on idle. */
	ck_assert_int_eq(redact_stream_feed(st, "Password? ", 10, &out), 0);
	ck_assert_int_eq(redact_stream_idle(st, &out), 1);
	ck_assert_uint_eq(out.len, 10);
	ck_assert(memcmp(out.data, "Password? ", 10) == 0);
	/* Byte by byte, idle after each: never a partial secret out. */
	for (size_t i = 0; secret[i]; i++) {
		ck_assert_int_eq(redact_stream_feed(st, &secret[i], 1, &out),
				 0);
		ck_assert_int_ge(redact_stream_idle(st, &out), 0);
		for (size_t k = 4; k <= i + 1; k++)
			ck_assert_msg(
			    !memmem(out.data, out.len, secret, k) || k < 4,
			    "a %zu-byte prefix of the secret leaked", k);
	}
	ck_assert_int_eq(redact_stream_feed(st, "\n", 1, &out), 0);
	ck_assert_int_eq(redact_stream_flush(st, &out), 0);
	ck_assert_ptr_nonnull(memmem(out.data, out.len, "[redacted:KEY]", 14));
	ck_assert_ptr_null(memmem(out.data, out.len, "sk-ant-idle", 11));
	redact_stream_free(st);

	/* A line whose last word could begin a secret, then silence (tail -f
	 * after printing a file): the line still shows up on idle; only a
	 * tail with no whitespace after it is held. */
	ck_assert_int_eq(redact_stream_new(set, &st), 0);
	buf_reset(&out);
	ck_assert_int_eq(redact_stream_feed(st, "original sk\n", 12, &out), 0);
	ck_assert_int_eq(redact_stream_idle(st, &out), 1);
	ck_assert_uint_eq(out.len, 12);
	ck_assert(memcmp(out.data, "original sk\n", 12) == 0);
	buf_reset(&out);
	ck_assert_int_eq(redact_stream_feed(st, "key: sk", 7, &out), 0);
	ck_assert_int_eq(redact_stream_idle(st, &out), 0);
	ck_assert(!memmem(out.data ? out.data : "", out.len, "sk", 2));
	redact_stream_free(st);
	buf_free(&out);
	redact_set_free(set);
}
END_TEST

/* ---- chains (issue 38): a long-lived set and a small one of minted keys ---- */

/* The text the chain tests read: both sets' values, plain and encoded. */
static char *chain_text(const char *env, const char *turn, size_t *ret_len)
{
	size_t lb;
	char *b64 = t_b64(turn, strlen(turn), 0, 1, &lb),
	     *hex = t_hex(env, strlen(env), 0);
	struct buf t = BUF_INIT;

	ck_assert_int_eq(buf_printf(&t,
				    "env=%s turn=%s\nb64(turn)=%s hex(env)=%s "
				    "both=%s%s end\n",
				    env, turn, b64, hex, turn, env),
			 0);
	free(b64);
	free(hex);
	*ret_len = t.len;
	return t.data;
}

START_TEST(test_chain)
{
	const char *env = "envfile-SECRET-0123456789";
	const char *turn = "spd-turn-KEY-abcdefABCDEF";
	const char *names[] = {"TURN", "MARK"};
	/* A value of the second set that is the first set's marker: the
	 * marker the first writes must still come out as it is. */
	const char *values[] = {turn, "redacted:ENVKEY"};
	struct redact_set *a = mkset1("ENVKEY", env);
	struct redact_set *b = mkset(names, values, NULL, 2);
	struct redact_set *c, *c2, *empty;
	struct redact_builder *eb;
	char *in, *o1, *o2;
	size_t n, l1, l2;

	ck_assert_int_eq(redact_set_chain(a, b, &c), 0);
	ck_assert_uint_eq(redact_set_count(c),
			  redact_set_count(a) + redact_set_count(b));
	ck_assert_uint_eq(redact_set_max_len(c),
			  redact_set_max_len(a) > redact_set_max_len(b)
			      ? redact_set_max_len(a)
			      : redact_set_max_len(b));
	/* The chain holds its own references. */
	redact_set_free(a);
	redact_set_free(b);

	ck_assert_int_eq(redact_contains(c, env, strlen(env)), 1);
	ck_assert_int_eq(redact_contains(c, turn, strlen(turn)), 1);
	ck_assert_int_eq(redact_contains(c, "nothing here", 12), 0);

	check_str(c, "a envfile-SECRET-0123456789 b", "a [redacted:ENVKEY] b");
	check_str(c, "a spd-turn-KEY-abcdefABCDEF b", "a [redacted:TURN] b");
	check_str(c, "x redacted:ENVKEY y", "x [redacted:MARK] y");
	check_str(c,
		  "envfile-SECRET-0123456789spd-turn-KEY-abcdefABCDEF"
		  "envfile-SECRET-0123456789",
		  "[redacted:ENVKEY][redacted:TURN][redacted:ENVKEY]");

	in = chain_text(env, turn, &n);
	ck_assert_int_eq(redact_buf(c, in, n, &o1, &l1), 6);
	ck_assert_ptr_null(memmem(o1, l1, env, strlen(env)));
	ck_assert_ptr_null(memmem(o1, l1, turn, strlen(turn)));
	ck_assert_ptr_null(memmem(o1, l1, "[redacted:MARK]", 15));
	ck_assert_ptr_nonnull(strstr(o1, "b64(turn)=[redacted:TURN]"));
	ck_assert_ptr_nonnull(strstr(o1, "hex(env)=[redacted:ENVKEY]"));
	ck_assert_ptr_nonnull(
	    strstr(o1, "both=[redacted:TURN][redacted:ENVKEY] end"));
	/* One byte at a time, every two-piece split, and random chunks
	 * all give what redact_buf gives. */
	check_redacts(c, in, n, o1, l1);
	check_every_split(c, in, n, o1, l1);
	rng_state = 38;
	for (int it = 0; it < 300; it++) {
		struct redact_stream *st;
		struct buf out = BUF_INIT;

		ck_assert_int_eq(redact_stream_new(c, &st), 0);
		for (size_t i = 0, k; i < n; i += k) {
			k = 1 + rnd(it % 3 == 0 ? 4 : 40);
			if (k > n - i)
				k = n - i;
			ck_assert_int_eq(
			    redact_stream_feed(st, in + i, k, &out), 0);
		}
		ck_assert_int_eq(redact_stream_flush(st, &out), 0);
		ck_assert_uint_eq(out.len, l1);
		ck_assert(memcmp(out.data, o1, l1) == 0);
		redact_stream_free(st);
		buf_free(&out);
	}

	/* An empty set in a chain changes nothing; chains nest. */
	ck_assert_int_eq(redact_builder_new(&eb), 0);
	ck_assert_int_eq(redact_builder_build(eb, &empty), 0);
	ck_assert_int_eq(redact_set_chain(c, empty, &c2), 0);
	ck_assert_uint_eq(redact_set_count(c2), redact_set_count(c));
	check_str(c2, "a spd-turn-KEY-abcdefABCDEF b", "a [redacted:TURN] b");
	redact_set_free(c2);
	/* A chain of one set that matches anything is that set. */
	a = mkset1("ONE", "only-one-secret-0000");
	ck_assert_int_eq(redact_set_chain(empty, a, &c2), 0);
	ck_assert_ptr_eq(c2, a);
	redact_set_free(c2);
	redact_set_free(a);
	a = mkset1("THIRD", "third-secret-value-XYZ");
	ck_assert_int_eq(redact_set_chain(empty, c, &b), 0);
	ck_assert_int_eq(redact_set_chain(b, a, &c2), 0);
	redact_set_free(a);
	redact_set_free(b);
	check_str(c2,
		  "third-secret-value-XYZ spd-turn-KEY-abcdefABCDEF "
		  "envfile-SECRET-0123456789",
		  "[redacted:THIRD] [redacted:TURN] [redacted:ENVKEY]");
	ck_assert_int_eq(redact_buf(c2, in, n, &o2, &l2), 6);
	ck_assert_uint_eq(l2, l1);
	ck_assert(memcmp(o2, o1, l1) == 0);
	free(o2);
	redact_set_free(c2);
	redact_set_free(empty);
	free(o1);
	free(in);
	redact_set_free(c);
}
END_TEST

/* A stream over a chain, idle after every byte: a secret of the second
 * set written slowly never comes out in part, and a prompt still does. */
START_TEST(test_chain_idle)
{
	const char *turn = "spd-turn-KEY-idle-0123456789";
	struct redact_set *a = mkset1("ENVKEY", "envfile-SECRET-0123456789");
	struct redact_set *b = mkset1("TURN", turn), *c;
	const char *text = "key: envfile-SECRET-0123456789 then ";
	struct redact_stream *st;
	struct buf out = BUF_INIT;

	ck_assert_int_eq(redact_set_chain(a, b, &c), 0);
	ck_assert_int_eq(redact_stream_new(c, &st), 0);
	ck_assert_int_eq(redact_stream_feed(st, "Password? ", 10, &out), 0);
	ck_assert_int_eq(redact_stream_idle(st, &out), 1);
	ck_assert_uint_eq(out.len, 10);
	ck_assert(memcmp(out.data, "Password? ", 10) == 0);
	for (size_t i = 0; text[i]; i++) {
		ck_assert_int_eq(redact_stream_feed(st, &text[i], 1, &out), 0);
		ck_assert_int_ge(redact_stream_idle(st, &out), 0);
	}
	for (size_t i = 0; turn[i]; i++) {
		ck_assert_int_eq(redact_stream_feed(st, &turn[i], 1, &out), 0);
		ck_assert_int_ge(redact_stream_idle(st, &out), 0);
		ck_assert_msg(!memmem(out.data, out.len, "spd-", 4),
			      "a prefix of the turn key leaked");
	}
	ck_assert_int_eq(redact_stream_feed(st, "\n", 1, &out), 0);
	ck_assert_int_eq(redact_stream_flush(st, &out), 0);
	ck_assert_int_eq(buf_append(&out, "", 0), 0);
	ck_assert_str_eq(out.data, "Password? key: [redacted:ENVKEY] then "
				   "[redacted:TURN]\n");
	redact_stream_free(st);
	buf_free(&out);
	redact_set_free(a);
	redact_set_free(b);
	redact_set_free(c);
}
END_TEST

/* ---- cheap transforms (issue 10) ---- */

/* Reversed by character, as rev(1) does. */
static char *t_rev(const char *s, size_t n)
{
	char *o = malloc(n + 1);
	size_t k = n;

	for (size_t i = 0; i < n;) {
		unsigned char c = (unsigned char)s[i];
		size_t l = c < 0xc0 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;

		k -= l;
		memcpy(o + k, s + i, l);
		i += l;
	}
	o[n] = 0;
	return o;
}

static char *t_rot13(const char *s, size_t n)
{
	char *o = malloc(n + 1);

	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (c >= 'a' && c <= 'z')
			c = (char)('a' + (c - 'a' + 13) % 26);
		else if (c >= 'A' && c <= 'Z')
			c = (char)('A' + (c - 'A' + 13) % 26);
		o[i] = c;
	}
	o[n] = 0;
	return o;
}

/* The code points of UTF-8 s; returns their number. */
static size_t t_cps(const char *s, size_t n, uint32_t *cp)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t k = 0;

	for (size_t i = 0; i < n; k++) {
		if (p[i] < 0x80) {
			cp[k] = p[i++];
		} else if (p[i] < 0xe0) {
			cp[k] =
			    (uint32_t)(p[i] & 0x1f) << 6 | (p[i + 1] & 0x3f);
			i += 2;
		} else if (p[i] < 0xf0) {
			cp[k] = (uint32_t)(p[i] & 0x0f) << 12 |
				(uint32_t)(p[i + 1] & 0x3f) << 6 |
				(p[i + 2] & 0x3f);
			i += 3;
		} else {
			cp[k] = (uint32_t)(p[i] & 0x07) << 18 |
				(uint32_t)(p[i + 1] & 0x3f) << 12 |
				(uint32_t)(p[i + 2] & 0x3f) << 6 |
				(p[i + 3] & 0x3f);
			i += 4;
		}
	}
	return k;
}

/* UTF-16 code units of UTF-8 s; returns their number. */
static size_t t_units(const char *s, size_t n, uint32_t *u)
{
	uint32_t cp[256];
	size_t nc = t_cps(s, n, cp), k = 0;

	for (size_t i = 0; i < nc; i++) {
		if (cp[i] >= 0x10000) {
			u[k++] = 0xd800 + ((cp[i] - 0x10000) >> 10);
			u[k++] = 0xdc00 + ((cp[i] - 0x10000) & 0x3ff);
		} else {
			u[k++] = cp[i];
		}
	}
	return k;
}

static char *t_utf16(const char *s, size_t n, int be, size_t *ret_len)
{
	uint32_t u[512];
	size_t nu = t_units(s, n, u);
	char *o = malloc(2 * nu + 1);

	for (size_t i = 0; i < nu; i++) {
		o[2 * i + !be] = (char)(u[i] >> 8);
		o[2 * i + be] = (char)(u[i] & 0xff);
	}
	*ret_len = 2 * nu;
	return o;
}

/* Every character as \uXXXX. */
static char *t_uesc(const char *s, size_t n, int upper)
{
	uint32_t u[512];
	size_t nu = t_units(s, n, u);
	char *o = malloc(6 * nu + 1);

	for (size_t i = 0; i < nu; i++)
		sprintf(o + 6 * i, upper ? "\\u%04X" : "\\u%04x", u[i]);
	return o;
}

/* Hex with pfx before and sep between the bytes. */
static char *t_hexsep(const char *s, size_t n, const char *pfx, const char *sep,
		      int upper)
{
	char *o = malloc(n * (strlen(pfx) + strlen(sep) + 2) + 1), *q = o;

	for (size_t i = 0; i < n; i++)
		q += sprintf(q, upper ? "%s%s%02X" : "%s%s%02x", i ? sep : "",
			     pfx, (unsigned char)s[i]);
	return o;
}

/* s with a newline (and indent) after every width characters. */
static char *t_wrap(const char *s, size_t width, const char *brk)
{
	size_t n = strlen(s);
	char *o = malloc(n + (n / width + 1) * strlen(brk) + 1), *q = o;

	for (size_t i = 0; i < n; i++) {
		if (i && i % width == 0)
			q += sprintf(q, "%s", brk);
		*q++ = s[i];
	}
	*q = 0;
	return o;
}

/* Redacted with the input split in two at every offset. */
static void check_every_split(const struct redact_set *s, const char *in,
			      size_t n, const char *expect, size_t elen)
{
	for (size_t i = 0; i <= n; i++) {
		struct redact_stream *st;
		struct buf out = BUF_INIT;

		ck_assert_int_eq(redact_stream_new(s, &st), 0);
		ck_assert_int_eq(redact_stream_feed(st, in, i, &out), 0);
		ck_assert_int_eq(redact_stream_feed(st, in + i, n - i, &out),
				 0);
		ck_assert_int_eq(redact_stream_flush(st, &out), 0);
		if (out.len != elen || memcmp(out.data, expect, elen) != 0)
			ck_abort_msg("split at %zu:\n got  \"%.*s\"\n want "
				     "\"%.*s\"",
				     i, (int)out.len, out.data, (int)elen,
				     expect);
		redact_stream_free(st);
		buf_free(&out);
	}
}

/* form (flen bytes) between two lines of text is one marker, one-shot,
 * in chunks of several sizes and split at every offset. */
static void check_form(const struct redact_set *s, const char *form,
		       size_t flen)
{
	static const char pre[] = "$ cat key.txt | transform\nout: ";
	static const char post[] = " :end\n\tnext line\n";
	static const char want[] =
	    "$ cat key.txt | transform\nout: [redacted:S] :end\n\tnext line\n";
	struct buf in = BUF_INIT;

	buf_puts(&in, pre);
	buf_append(&in, form, flen);
	buf_puts(&in, post);
	check_redacts(s, in.data, in.len, want, strlen(want));
	check_every_split(s, in.data, in.len, want, strlen(want));
	buf_free(&in);
}

static void check_transforms(const char *secret)
{
	const size_t n = strlen(secret);
	struct redact_set *s = mkset1("S", secret);
	char *f, *b64, *hex;
	size_t fl;

	f = t_rev(secret, n);
	check_form(s, f, n);
	free(f);
	f = t_rot13(secret, n);
	check_form(s, f, n);
	free(f);
	for (int be = 0; be < 2; be++) {
		f = t_utf16(secret, n, be, &fl);
		check_form(s, f, fl);
		free(f);
	}
	for (int up = 0; up < 2; up++) {
		static const char *const seps[][2] = {
		    {"", " "}, {"", ":"}, {"\\x", ""}, {"0x", ", "},
		    {"%", ""}, {"", "-"}, {"0x", " "},
		};
		for (size_t i = 0; i < sizeof(seps) / sizeof(seps[0]); i++) {
			f = t_hexsep(secret, n, seps[i][0], seps[i][1], up);
			check_form(s, f, strlen(f));
			free(f);
		}
		f = t_uesc(secret, n, up);
		check_form(s, f, strlen(f));
		free(f);
	}
	/* Wrapped base64 (base64 -w 16, PEM's 64, MIME's 76 with CRLF),
	 * wrapped hex (xxd -p), folded text (fold -w 5). */
	b64 = t_b64(secret, n, 0, 1, &fl);
	hex = t_hex(secret, n, 0);
	const struct {
		const char *text;
		size_t width;
		const char *brk;
	} wraps[] = {
	    {b64, 16, "\n"},   {b64, 4, "\r\n"},  {b64, 7, "\n    "},
	    {hex, 60, "\n"},   {hex, 2, "\n"},	  {hex, 6, " "},
	    {secret, 5, "\n"}, {secret, 1, "\n"}, {secret, 3, "\r\n  "},
	    {hex, 32, "\n\t"},
	};
	for (size_t i = 0; i < sizeof(wraps) / sizeof(wraps[0]); i++) {
		f = t_wrap(wraps[i].text, wraps[i].width, wraps[i].brk);
		check_form(s, f, strlen(f));
		free(f);
	}
	/* od -An -tx1: bytes apart, 16 to a line, each line indented. */
	f = t_hexsep(secret, n, "", " ", 0);
	char *od = t_wrap(f, 48, "\n");
	check_form(s, od, strlen(od));
	free(od);
	free(f);
	free(b64);
	free(hex);
	redact_set_free(s);
}

/* Reversed, rot13, UTF-16LE/BE, hex with separators, per-character %XX
 * and \u escapes, wrapped base64 and hex, folded text: each becomes one
 * marker, and the bytes around it are unchanged. */
START_TEST(test_transforms)
{
	check_transforms("sk-Live_Tok3n-9fQx2Zr+8w");
	/* Non-ASCII, and a character past the BMP (a surrogate pair). */
	check_transforms("p\xc3\xa4ss-w\xc3\xb6rd-\xd0\x9a\xd0\xbb\xd1\x8e"
			 "\xd1\x87-2024-\xf0\x9f\x94\x91");
}
END_TEST

/* A whitespace run longer than REDACT_WS_RUN_MAX ends a match; one at
 * the limit does not.  Whitespace around a match stays. */
START_TEST(test_whitespace_runs)
{
	struct redact_set *s = mkset1("S", "0123456789abcdef");
	char in[128], spaces[64];

	memset(spaces, ' ', sizeof(spaces));
	snprintf(in, sizeof(in), "x 01234567%.*s89abcdef y", REDACT_WS_RUN_MAX,
		 spaces);
	check_str(s, in, "x [redacted:S] y");
	snprintf(in, sizeof(in), "x 01234567%.*s89abcdef y",
		 REDACT_WS_RUN_MAX + 1, spaces);
	check_str(s, in, in);
	check_str(s, "\n\n0123 4567\t89ab\r\ncdef\n\n", "\n\n[redacted:S]\n\n");
	/* A value must have 8 bytes that are not whitespace. */
	struct redact_builder *b;
	ck_assert_int_eq(redact_builder_new(&b), 0);
	ck_assert_int_eq(redact_builder_add(b, "W", "a b c d e f g", 13),
			 -EINVAL);
	ck_assert_int_eq(redact_builder_add(b, "W", "a b c d e f g h", 15), 0);
	/* Nor a whitespace run that would end its own match. */
	snprintf(in, sizeof(in), "abcd%.*sefgh", REDACT_WS_RUN_MAX + 1, spaces);
	ck_assert_int_eq(redact_builder_add(b, "W", in, strlen(in)), -EINVAL);
	redact_builder_free(b);
	redact_set_free(s);
}
END_TEST

/* The real tools, where Debian has them: the secret through each, the
 * output through the redactor; only the marker (and whitespace, and
 * UTF-16's byte-order mark) is left. */
START_TEST(test_real_tools)
{
	static const char secret[] = "sk-Live_Tok3n-9fQx2Zr+8w/Ab";
	static const char *const cmds[] = {
	    "base64 -w 16",
	    "base64 -w 5",
	    "od -An -tx1",
	    "od -An -tx1 -w4",
	    "xxd -p",
	    "xxd -p -c 3",
	    "fold -w 5",
	    "rev",
	    "tr A-Za-z N-ZA-Mn-za-m",
	    "iconv -f UTF-8 -t UTF-16LE",
	    "iconv -f UTF-8 -t UTF-16BE",
	    "iconv -f UTF-8 -t UTF-16",
	};
	struct redact_set *s = mkset1("S", secret);
	int ran = 0;

	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		char cmd[256], raw[4096], *out;
		size_t n, len, k = 0;
		const char *tool = cmds[i];
		FILE *p;

		snprintf(cmd, sizeof(cmd), "command -v %.*s >/dev/null",
			 (int)strcspn(tool, " "), tool);
		if (system(cmd) != 0)
			continue;
		snprintf(cmd, sizeof(cmd), "printf '%%s' '%s' | %s", secret,
			 tool);
		p = popen(cmd, "r");
		ck_assert_ptr_nonnull(p);
		n = fread(raw, 1, sizeof(raw), p);
		ck_assert_int_eq(pclose(p), 0);
		ck_assert_uint_gt(n, 0);
		ran++;
		ck_assert_int_ge(redact_buf(s, raw, n, &out, &len), 1);
		for (size_t j = 0; j < len; j++)
			if (!t_ws(out[j]))
				out[k++] = out[j];
		out[k] = 0;
		if (strlen(tool) >= 6 &&
		    !strcmp(tool + strlen(tool) - 6, "UTF-16")) {
			/* The byte-order mark before the text stays. */
			ck_assert_uint_ge(k, 2);
			ck_assert_str_eq(out + 2, "[redacted:S]");
		} else {
			ck_assert_msg(!strcmp(out, "[redacted:S]"),
				      "%s: \"%s\"", tool, out);
		}
		free(out);
		/* Streamed, split at every offset: the same. */
		ck_assert_int_ge(redact_buf(s, raw, n, &out, &len), 1);
		check_every_split(s, raw, n, out, len);
		free(out);
	}
	ck_assert_int_gt(ran, 0);
	redact_set_free(s);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("redact");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_refuse);
	tcase_add_test(tc, test_automaton_locked);
	tcase_add_test(tc, test_stream_keeps_set);
	tcase_add_test(tc, test_plain);
	tcase_add_test(tc, test_env);
	tcase_add_test(tc, test_base64_alignments);
	tcase_add_test(tc, test_hex);
	tcase_add_test(tc, test_url);
	tcase_add_test(tc, test_json);
	tcase_add_test(tc, test_chunks_every_size);
	tcase_add_test(tc, test_overlap_and_prefix);
	tcase_add_test(tc, test_binary);
	tcase_add_test(tc, test_long_line);
	tcase_add_test(tc, test_empty);
	tcase_add_test(tc, test_holdback);
	tcase_add_test(tc, test_differential);
	tcase_add_test(tc, test_threads);
	tcase_add_test(tc, test_idle_release);
	tcase_add_test(tc, test_chain);
	tcase_add_test(tc, test_chain_idle);
	tcase_add_test(tc, test_transforms);
	tcase_add_test(tc, test_whitespace_runs);
	tcase_add_test(tc, test_real_tools);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

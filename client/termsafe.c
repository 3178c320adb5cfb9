/*
 * Showing untrusted text safely on a terminal (client/termsafe.h):
 * controls, C1, ESC, bidi, zero-width and separator characters escaped,
 * long runs of blanks elided, streams split anywhere handled.
 */
#include "client/termsafe.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- what is shown escaped ---------------------------------------------- */

struct cp_range {
	uint32_t lo, hi;
};

/*
 * Code points that change what a person reads without showing themselves:
 * C1 controls, bidi controls (Bidi_Control), the invisible format
 * characters (general category Cf, Unicode 15.1), the line and paragraph
 * separators, and the invisible letters and marks that render as nothing
 * (Hangul fillers, the grapheme joiner, variation selectors).  U+FE0E and
 * U+FE0F stay: they pick a text or emoji glyph for the visible character
 * before them and appear after most emoji tools print.  Sorted, disjoint.
 */
static const struct cp_range escaped_cps[] = {
    {0x0080, 0x009f},	/* C1 controls */
    {0x00ad, 0x00ad},	/* soft hyphen */
    {0x034f, 0x034f},	/* combining grapheme joiner */
    {0x0600, 0x0605},	/* Arabic number signs (Cf) */
    {0x061c, 0x061c},	/* Arabic letter mark */
    {0x06dd, 0x06dd},	/* Arabic end of ayah (Cf) */
    {0x070f, 0x070f},	/* Syriac abbreviation mark (Cf) */
    {0x0890, 0x0891},	/* Arabic pound/piastre marks above (Cf) */
    {0x08e2, 0x08e2},	/* Arabic disputed end of ayah (Cf) */
    {0x115f, 0x1160},	/* Hangul choseong/jungseong fillers */
    {0x17b4, 0x17b5},	/* Khmer inherent vowels (invisible) */
    {0x180b, 0x180f},	/* Mongolian variation selectors, vowel sep. */
    {0x200b, 0x200f},	/* zero-width space, ZWNJ, ZWJ, LRM, RLM */
    {0x2028, 0x202e},	/* line/paragraph separators, LRE..RLO */
    {0x2060, 0x206f},	/* word joiner, invisible operators, isolates */
    {0x3164, 0x3164},	/* Hangul filler */
    {0xfe00, 0xfe0d},	/* variation selectors 1..14 */
    {0xfeff, 0xfeff},	/* zero-width no-break space, BOM */
    {0xffa0, 0xffa0},	/* halfwidth Hangul filler */
    {0xfff9, 0xfffb},	/* interlinear annotation controls */
    {0x110bd, 0x110bd}, /* Kaithi number sign (Cf) */
    {0x110cd, 0x110cd}, /* Kaithi number sign above (Cf) */
    {0x13430, 0x1343f}, /* Egyptian hieroglyph format controls */
    {0x1bca0, 0x1bca3}, /* shorthand format controls */
    {0x1d173, 0x1d17a}, /* musical symbol format controls */
    {0xe0000, 0xe007f}, /* tag characters */
    {0xe0100, 0xe01ef}, /* variation selectors 17..256 */
};

/* Blanks beyond ASCII: the Unicode space separators (Zs), which a terminal
 * draws as empty cells just like U+0020. */
static const struct cp_range blank_cps[] = {
    {0x00a0, 0x00a0}, {0x1680, 0x1680}, {0x2000, 0x200a},
    {0x202f, 0x202f}, {0x205f, 0x205f}, {0x3000, 0x3000},
};

static bool in_ranges(const struct cp_range *r, size_t n, uint32_t cp)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (cp < r[mid].lo)
			hi = mid;
		else if (cp > r[mid].hi)
			lo = mid + 1;
		else
			return true;
	}
	return false;
}

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ---- UTF-8 -------------------------------------------------------------- */

/* The bytes a UTF-8 sequence starting with lead c has (0: not a lead). */
static int utf8_len(unsigned char c)
{
	return c >= 0xc2 && c <= 0xdf	? 2
	       : c >= 0xe0 && c <= 0xef ? 3
	       : c >= 0xf0 && c <= 0xf4 ? 4
					: 0;
}

/* Whether c may be byte i (>= 1) of a sequence led by lead: the ranges of
 * well-formed UTF-8 (Unicode table 3-7), which leave out overlong forms and
 * surrogates, so that no terminal decodes a character this file did not
 * see. */
static bool utf8_ok(unsigned char lead, int i, unsigned char c)
{
	if (i == 1 && lead == 0xe0)
		return c >= 0xa0 && c <= 0xbf;
	if (i == 1 && lead == 0xed)
		return c >= 0x80 && c <= 0x9f;
	if (i == 1 && lead == 0xf0)
		return c >= 0x90 && c <= 0xbf;
	if (i == 1 && lead == 0xf4)
		return c >= 0x80 && c <= 0x8f;
	return c >= 0x80 && c <= 0xbf;
}

static uint32_t utf8_decode(const unsigned char *s, int n)
{
	uint32_t cp = s[0] & (n == 2 ? 0x1f : n == 3 ? 0x0f : 0x07);

	for (int i = 1; i < n; i++)
		cp = cp << 6 | (s[i] & 0x3f);
	return cp;
}

/* ---- output ------------------------------------------------------------- */

/* Where escaped text goes: a FILE, a descriptor (buffered here), or
 * nowhere when only asking whether anything would be escaped. */
struct ts_out {
	FILE *f;
	int fd;
	int err;
	bool escaped; /* something was shown other than as it came */
	size_t n;
	char buf[4096];
};

static void out_flush(struct ts_out *o)
{
	const char *p = o->buf;
	size_t n = o->n;

	while (n > 0 && !o->err) {
		ssize_t w = write(o->fd, p, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			o->err = -errno;
			break;
		}
		p += w;
		n -= (size_t)w;
	}
	o->n = 0;
}

static void out_put(struct ts_out *o, const void *s, size_t n)
{
	if (o->f) {
		fwrite(s, 1, n, o->f);
		return;
	}
	if (o->fd < 0)
		return;
	if (o->n + n > sizeof(o->buf))
		out_flush(o);
	memcpy(o->buf + o->n, s, n);
	o->n += n;
}

static void out_str(struct ts_out *o, const char *s)
{
	out_put(o, s, strlen(s));
}

/* Print an escape: these are what the reader must see as not the text. */
__attribute__((format(printf, 2, 3))) static void out_esc(struct ts_out *o,
							  const char *fmt, ...)
{
	char b[48];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(b, sizeof(b), fmt, ap);
	va_end(ap);
	o->escaped = true;
	if (n > 0)
		out_put(o, b,
			(size_t)n < sizeof(b) ? (size_t)n : sizeof(b) - 1);
}

/* ---- the filter --------------------------------------------------------- */

/* How ASCII controls are shown: caret notation in a run's output (where
 * newline, tab, carriage return and backspace pass), C-style in a field,
 * C-style with the quote escaped inside an argument's $'...'. */
enum ts_mode { MODE_STREAM, MODE_FIELD, MODE_ARG };

static size_t blanks_max(enum ts_mode m)
{
	return m == MODE_STREAM ? TS_STREAM_BLANKS_MAX : TS_FIELD_BLANKS_MAX;
}

/* A blank: shown while its run is within the limit, counted after. */
static void put_blank(struct ts_out *o, struct ts_stream *st, enum ts_mode m,
		      const void *s, size_t n)
{
	if (++st->blanks <= blanks_max(m))
		out_put(o, s, n);
}

/* Something not a blank: first the count of what the run elided. */
static void end_blanks(struct ts_out *o, struct ts_stream *st, enum ts_mode m)
{
	if (st->blanks > blanks_max(m))
		out_esc(o, "\\{%lu blanks elided}",
			(unsigned long)(st->blanks - blanks_max(m)));
	st->blanks = 0;
}

static void put_ascii(struct ts_out *o, struct ts_stream *st, enum ts_mode m,
		      unsigned char c)
{
	static const char hex[] = "0123456789abcdef";

	if (c == ' ' || (c == '\t' && m == MODE_STREAM)) {
		put_blank(o, st, m, &c, 1);
		return;
	}
	end_blanks(o, st, m);
	if (m == MODE_STREAM) {
		if (c == '\n' || c == '\r' || c == '\b' ||
		    (c >= 0x20 && c < 0x7f)) {
			out_put(o, &c, 1);
		} else {
			char b[2] = {'^', c == 0x7f ? '?' : (char)(c + 0x40)};

			o->escaped = true;
			out_put(o, b, 2);
		}
		return;
	}
	switch (c) {
	case '\\':
		out_str(o, "\\\\");
		return;
	case '\'':
		out_str(o, m == MODE_ARG ? "\\'" : "'");
		return;
	case '\n':
		o->escaped = true;
		out_str(o, "\\n");
		return;
	case '\t':
		o->escaped = true;
		out_str(o, "\\t");
		return;
	case '\r':
		o->escaped = true;
		out_str(o, "\\r");
		return;
	case 0x1b:
		o->escaped = true;
		out_str(o, "\\e");
		return;
	}
	if (c < 0x20 || c == 0x7f) {
		char b[4] = {'\\', 'x', hex[c >> 4], hex[c & 15]};

		o->escaped = true;
		out_put(o, b, 4);
		return;
	}
	out_put(o, &c, 1);
}

/* A byte that is not part of a well-formed sequence: one in the C1 range
 * is what an 8-bit terminal obeys, the others it shows as they are. */
static void put_stray(struct ts_out *o, struct ts_stream *st, enum ts_mode m,
		      const unsigned char *s, size_t n)
{
	end_blanks(o, st, m);
	for (size_t i = 0; i < n; i++) {
		if (s[i] >= 0x80 && s[i] <= 0x9f)
			out_esc(o, "\\x%02x", s[i]);
		else
			out_put(o, &s[i], 1);
	}
}

static void put_cp(struct ts_out *o, struct ts_stream *st, enum ts_mode m,
		   const unsigned char *s, int n)
{
	uint32_t cp = utf8_decode(s, n);

	if (in_ranges(blank_cps, NELEM(blank_cps), cp)) {
		put_blank(o, st, m, s, (size_t)n);
		return;
	}
	end_blanks(o, st, m);
	if (!in_ranges(escaped_cps, NELEM(escaped_cps), cp))
		out_put(o, s, (size_t)n);
	else if (cp > 0xffff)
		out_esc(o, "\\U%08lx", (unsigned long)cp);
	else
		out_esc(o, "\\u%04lx", (unsigned long)cp);
}

/* Feed one byte: ASCII at once, a UTF-8 sequence once complete, an
 * ill-formed one as its bytes with c then starting anew. */
static void feed(struct ts_out *o, struct ts_stream *st, enum ts_mode m,
		 unsigned char c)
{
	if (st->have > 0) {
		if (utf8_ok(st->seq[0], st->have, c)) {
			st->seq[st->have++] = c;
			if (st->have == utf8_len(st->seq[0])) {
				put_cp(o, st, m, st->seq, st->have);
				st->have = 0;
			}
			return;
		}
		put_stray(o, st, m, st->seq, st->have);
		st->have = 0;
	}
	if (c < 0x80)
		put_ascii(o, st, m, c);
	else if (utf8_len(c))
		st->seq[st->have++] = c;
	else
		put_stray(o, st, m, &c, 1);
}

static void finish(struct ts_out *o, struct ts_stream *st, enum ts_mode m)
{
	if (st->have > 0)
		put_stray(o, st, m, st->seq, st->have);
	st->have = 0;
	end_blanks(o, st, m);
}

/* ---- the stream --------------------------------------------------------- */

int ts_stream_write(int fd, struct ts_stream *st, const char *buf, size_t n)
{
	struct ts_out o = {.fd = fd};

	for (size_t i = 0; i < n && !o.err; i++)
		feed(&o, st, MODE_STREAM, (unsigned char)buf[i]);
	out_flush(&o);
	return o.err;
}

int ts_stream_end(int fd, struct ts_stream *st)
{
	struct ts_out o = {.fd = fd};

	finish(&o, st, MODE_STREAM);
	out_flush(&o);
	return o.err;
}

/* ---- fields and arguments ---------------------------------------------- */

/* Print s through the filter to f (NULL: nowhere); whether anything in it
 * had to be shown other than as it came. */
static bool filter_str(FILE *f, const char *s, enum ts_mode m)
{
	struct ts_out o = {.f = f, .fd = -1};
	struct ts_stream st = {0};

	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		feed(&o, &st, m, *p);
	finish(&o, &st, m);
	return o.escaped;
}

void ts_fputs(FILE *f, const char *s)
{
	filter_str(f, s ? s : "(null)", MODE_FIELD);
}

char *ts_strdup(const char *s)
{
	char *out = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&out, &n);

	if (!f)
		return NULL;
	ts_fputs(f, s);
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}

void ts_fputs_arg(FILE *f, const char *s)
{
	static const char safe[] = "abcdefghijklmnopqrstuvwxyz"
				   "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
				   "0123456789_@%+=:,./-";

	if (!s) {
		fputs("''", f);
		return;
	}
	if (s[0] && strspn(s, safe) == strlen(s)) {
		fputs(s, f);
		return;
	}
	if (filter_str(NULL, s, MODE_ARG)) {
		fputs("$'", f);
		filter_str(f, s, MODE_ARG);
		fputc('\'', f);
		return;
	}
	fputc('\'', f);
	for (const char *p = s; *p; p++) {
		if (*p == '\'')
			fputs("'\\''", f);
		else
			fputc(*p, f);
	}
	fputc('\'', f);
}

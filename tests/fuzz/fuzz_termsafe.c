/*
 * Fuzz client/termsafe.c, which every byte a run prints (and every string
 * an agent chooses) goes through on its way to the operator's terminal.
 *
 * Checked for every input, split into chunks at points the input picks:
 *   - the stream never lets ESC, another C0 control but newline, tab,
 *     carriage return and backspace, DEL, a UTF-8 C1 control (C2 80..9F)
 *     or a stray byte 0x80..0x9F reach the output; and when the input
 *     holds none of them, the output is the input, byte for byte;
 *   - a field and an argv element printed with ts_fputs / ts_fputs_arg
 *     hold no control character at all;
 *   - no output holds a character that changes what a person reads
 *     without showing itself (bidi controls, zero-width and other
 *     invisible format characters, tags, U+2028/U+2029), as a strict
 *     UTF-8 decoder (a terminal's) reads the output, nor a run of blanks
 *     longer than TS_STREAM_BLANKS_MAX (stream) or TS_FIELD_BLANKS_MAX
 *     (field, argument);
 *   - text made only of characters that must pass (letters, CJK, emoji,
 *     punctuation) with no long run of blanks passes the stream unchanged.
 * The lists below are this oracle's own, written from the Unicode
 * properties, not taken from termsafe.c.
 */
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/termsafe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct range {
	uint32_t lo, hi;
};

/* Must never reach a terminal raw: Bidi_Control (PropList.txt), the
 * zero-width and invisible format characters, the separators. */
static const struct range hidden[] = {
    {0x061c, 0x061c}, {0x200e, 0x200f}, {0x202a, 0x202e},   {0x2066, 0x2069},
    {0x200b, 0x200d}, {0x2060, 0x2064}, {0xfeff, 0xfeff},   {0x00ad, 0x00ad},
    {0x180e, 0x180e}, {0x2028, 0x2029}, {0xe0000, 0xe007f}, {0xfff9, 0xfffb},
    {0x0080, 0x009f}, {0x206a, 0x206f}, {0xe0100, 0xe01ef},
};

/* Blanks: a terminal draws them as empty cells. */
static const struct range blank[] = {
    {0x0020, 0x0020}, {0x00a0, 0x00a0}, {0x1680, 0x1680}, {0x2000, 0x200a},
    {0x202f, 0x202f}, {0x205f, 0x205f}, {0x3000, 0x3000},
};

/* Must pass a stream unchanged: printable ASCII and the line controls,
 * Latin and Greek/Cyrillic letters, dashes and quotes, CJK, emoji. */
static const struct range plain[] = {
    {0x0020, 0x007e},	{0x00c0, 0x024f}, {0x0370, 0x04ff},
    {0x2010, 0x2027},	{0x2030, 0x205e}, {0x4e00, 0x9fff},
    {0x1f300, 0x1faff}, {'\n', '\n'},	  {'\r', '\r'},
};

static bool in(const struct range *r, size_t n, uint32_t cp)
{
	for (size_t i = 0; i < n; i++)
		if (cp >= r[i].lo && cp <= r[i].hi)
			return true;
	return false;
}

#define IN(table, cp) in(table, sizeof(table) / sizeof(table[0]), cp)

/* Decode one well-formed UTF-8 character at p (Unicode table 3-7); its
 * length, or 0 when p does not start one. */
static size_t decode(const uint8_t *p, size_t n, uint32_t *cp)
{
	size_t len;
	uint8_t lo = 0x80, hi = 0xbf;

	if (p[0] < 0x80) {
		*cp = p[0];
		return 1;
	}
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		len = 2, *cp = p[0] & 0x1f;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		len = 3, *cp = p[0] & 0x0f;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		len = 4, *cp = p[0] & 0x07;
	else
		return 0;
	if (p[0] == 0xe0)
		lo = 0xa0;
	else if (p[0] == 0xed)
		hi = 0x9f;
	else if (p[0] == 0xf0)
		lo = 0x90;
	else if (p[0] == 0xf4)
		hi = 0x8f;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if (p[i] < (i == 1 ? lo : 0x80) || p[i] > (i == 1 ? hi : 0xbf))
			return 0;
		*cp = *cp << 6 | (p[i] & 0x3f);
	}
	return len;
}

/* Whether out, read as a terminal reads it, shows a hidden character or
 * a run of more than max blanks (tabs count in a stream). */
static bool hides(const uint8_t *p, size_t n, size_t max, bool stream)
{
	size_t run = 0;

	for (size_t i = 0, k; i < n; i += k ? k : 1) {
		uint32_t cp;

		k = decode(p + i, n - i, &cp);
		if (!k) {
			run = 0;
			continue;
		}
		if (IN(hidden, cp))
			return true;
		if (IN(blank, cp) || (stream && cp == '\t')) {
			if (++run > max)
				return true;
		} else {
			run = 0;
		}
	}
	return false;
}

/* Whether the stream must pass s unchanged. */
static bool all_plain(const uint8_t *p, size_t n)
{
	size_t run = 0;

	for (size_t i = 0, k; i < n; i += k) {
		uint32_t cp;

		k = decode(p + i, n - i, &cp);
		if (!k || !IN(plain, cp))
			return false;
		run = IN(blank, cp) ? run + 1 : 0;
		if (run > TS_STREAM_BLANKS_MAX)
			return false;
	}
	return true;
}

static bool c1_or_control(const uint8_t *p, size_t n, bool stream)
{
	int cont = 0;

	for (size_t i = 0; i < n; i++) {
		uint8_t c = p[i];

		if (cont > 0 && c >= 0x80 && c <= 0xbf) {
			cont--;
			continue;
		}
		cont = 0;
		if (c == 0x1b || c == 0x7f)
			return true;
		if (c < 0x20 && !(stream && (c == '\n' || c == '\t' ||
					     c == '\r' || c == '\b')))
			return true;
		if (c == 0xc2 && i + 1 < n && p[i + 1] >= 0x80 &&
		    p[i + 1] <= 0x9f)
			return true;
		if (c >= 0x80 && c <= 0x9f)
			return true;
		cont = c >= 0xc2 && c <= 0xdf	? 1
		       : c >= 0xe0 && c <= 0xef ? 2
		       : c >= 0xf0 && c <= 0xf4 ? 3
						: 0;
	}
	return false;
}

static void check_stream(const uint8_t *data, size_t size)
{
	struct ts_stream st = {0};
	uint8_t *out = malloc(8 * size + 16);
	size_t got = 0, off = 0, step = 1 + (size ? data[0] % 7 : 0);
	int p[2];

	if (!out || pipe2(p, O_NONBLOCK) < 0)
		abort();
	/* Output may be up to 6 bytes per input byte: feed in small chunks
	 * and drain as we go, so that the pipe never fills. */
	while (off < size) {
		size_t n = size - off < step ? size - off : step;
		ssize_t r;

		if (ts_stream_write(p[1], &st, (const char *)data + off, n) < 0)
			abort();
		off += n;
		while ((r = read(p[0], out + got, 8 * size + 16 - got)) > 0)
			got += (size_t)r;
	}
	ts_stream_end(p[1], &st);
	close(p[1]);
	for (ssize_t r; (r = read(p[0], out + got, 8 * size + 16 - got)) > 0;)
		got += (size_t)r;
	close(p[0]);
	if (c1_or_control(out, got, true))
		abort();
	if (hides(out, got, TS_STREAM_BLANKS_MAX, true))
		abort();
	if (all_plain(data, size) &&
	    (got != size || memcmp(out, data, size) != 0))
		abort();
	free(out);
}

static void check_field(void (*fn)(FILE *, const char *), const char *s)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	if (!f)
		abort();
	fn(f, s);
	fclose(f);
	if (c1_or_control((const uint8_t *)out, len, false))
		abort();
	if (hides((const uint8_t *)out, len, TS_FIELD_BLANKS_MAX, false))
		abort();
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s;

	if (size > 65536)
		return 0;
	check_stream(data, size);
	s = malloc(size + 1);
	if (!s)
		abort();
	memcpy(s, data, size);
	s[size] = 0;
	check_field(ts_fputs, s);
	check_field(ts_fputs_arg, s);
	free(s);
	return 0;
}

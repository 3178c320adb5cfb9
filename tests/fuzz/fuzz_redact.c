/*
 * Fuzz target for common/redact.  The input makes up to four secrets and a
 * text of junk bytes; the byte 0x01 followed by four bytes splices in an
 * encoding of a secret, made by this file's own encoders (not
 * redact_forms(), so a form the library forgot is a failure here), wrapped
 * every few characters by a short run of whitespace.  Properties checked:
 *  - no spliced encoding survives: no stretch of output outside a marker,
 *    whitespace left out, holds one;
 *  - nothing else is lost or reordered: the output outside markers is, in
 *    order, pieces of the input;
 *  - the streamed output, in fuzzer-chosen chunks, equals the one-shot
 *    output, and redact_contains() says whether anything was redacted.
 * With the first byte's top bit set, the odd-numbered secrets go into a
 * second set and the text is redacted by the chain of the two
 * (redact_set_chain), under the same properties.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/redact.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_SECRETS 4
#define MAX_SECRET 31
#define MAX_SPLICES 64
/* The longest encoding below: \u00XX per byte. */
#define ENC_MAX (6 * MAX_SECRET + 8)

static bool ws(uint8_t c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static bool ascii(const uint8_t *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] >= 0x80)
			return false;
	return true;
}

enum {
	E_RAW,
	E_REV,
	E_ROT13,
	E_HEX,
	E_HEX_UP,
	E_HEX_COLON,
	E_PCT,
	E_BASE64,
	E_UTF16LE,
	E_UTF16BE,
	E_UESC,
	E_COUNT,
};

/* Encoding e of v into out; 0 when e does not apply to v. */
static size_t encode(int e, const uint8_t *v, size_t n, uint8_t *out)
{
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopq"
				  "rstuvwxyz0123456789+/";
	static const char hx[] = "0123456789abcdef", HX[] = "0123456789ABCDEF";
	size_t o = 0;

	/* Character-wise transforms of non-ASCII need a UTF-8 decoder;
	 * the unit test covers those. */
	if ((e == E_REV || e == E_UTF16LE || e == E_UTF16BE || e == E_UESC) &&
	    !ascii(v, n))
		return 0;
	for (size_t i = 0; i < n; i++) {
		uint8_t c = v[i];

		switch (e) {
		case E_RAW:
			out[o++] = c;
			break;
		case E_REV:
			out[o++] = v[n - 1 - i];
			break;
		case E_ROT13:
			if ((c | 32) >= 'a' && (c | 32) <= 'z')
				c = (uint8_t)(((c | 32) - 'a' + 13) % 26 + 'a' -
					      (c & 32 ? 0 : 32));
			out[o++] = c;
			break;
		case E_HEX:
		case E_HEX_UP:
		case E_HEX_COLON:
		case E_PCT:
			if (e == E_PCT)
				out[o++] = '%';
			if (e == E_HEX_COLON && i)
				out[o++] = ':';
			out[o++] = (uint8_t)(e == E_HEX_UP ? HX : hx)[c >> 4];
			out[o++] = (uint8_t)(e == E_HEX_UP ? HX : hx)[c & 15];
			break;
		case E_UTF16LE:
			out[o++] = c;
			out[o++] = 0;
			break;
		case E_UTF16BE:
			out[o++] = 0;
			out[o++] = c;
			break;
		case E_UESC:
			o += (size_t)sprintf((char *)out + o, "\\u%04x", c);
			break;
		case E_BASE64:
			if (i % 3)
				break;
			uint32_t x = (uint32_t)c << 16;
			size_t left = n - i;

			if (left > 1)
				x |= (uint32_t)v[i + 1] << 8;
			if (left > 2)
				x |= v[i + 2];
			out[o++] = (uint8_t)b64[x >> 18];
			out[o++] = (uint8_t)b64[(x >> 12) & 63];
			out[o++] = left > 1 ? (uint8_t)b64[(x >> 6) & 63] : '=';
			out[o++] = left > 2 ? (uint8_t)b64[x & 63] : '=';
			break;
		}
	}
	return o;
}

struct splice {
	uint8_t enc[ENC_MAX]; /* whitespace left out */
	size_t n;
};

/* No splice in the n bytes at s, read as the redactor reads them:
 * whitespace left out, a run longer than REDACT_WS_RUN_MAX a break. */
static void check_piece(const char *s, size_t n, const struct splice *sp,
			size_t nsp)
{
	struct buf c = BUF_INIT;
	size_t run = 0;

	for (size_t i = 0; i <= n; i++) {
		bool brk = i == n;

		if (!brk && ws((uint8_t)s[i]))
			brk = ++run == REDACT_WS_RUN_MAX + 1;
		else if (!brk)
			run = 0;
		if (brk) {
			for (size_t k = 0; k < nsp; k++)
				if (c.len &&
				    memmem(c.data, c.len, sp[k].enc, sp[k].n))
					abort();
			c.len = 0;
		} else if (!ws((uint8_t)s[i])) {
			buf_append(&c, s + i, 1);
		}
	}
	buf_free(&c);
}

/* The output outside markers, piece by piece: no splice survives in a
 * piece, and the pieces are, in order, pieces of the input. */
static void check_output(const char *out, size_t len, const char *in,
			 size_t inlen, const struct splice *sp, size_t nsp,
			 char names[][8], size_t ns)
{
	size_t from = 0, inpos = 0;

	while (from <= len) {
		size_t end = len, next = len + 1;

		for (size_t k = 0; k < ns; k++) {
			char m[32];
			int ml =
			    snprintf(m, sizeof(m), "[redacted:%s]", names[k]);
			const char *hit =
			    memmem(out + from, len - from, m, (size_t)ml);

			if (hit && (size_t)(hit - out) < end) {
				end = (size_t)(hit - out);
				next = end + (size_t)ml;
			}
		}
		const char *at;

		check_piece(out + from, end - from, sp, nsp);
		if (end > from) {
			at = memmem(in + inpos, inlen - inpos, out + from,
				    end - from);
			if (!at)
				abort();
			inpos = (size_t)(at - in) + (end - from);
		}
		from = next;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char wsk[][5] = {"\n", " ", "\r\n", "\n  ", "\t", "\n\t"};
	struct redact_builder *b = NULL, *b2 = NULL;
	struct redact_set *s = NULL, *s2 = NULL, *c = NULL;
	struct redact_stream *st = NULL;
	struct splice *sp = calloc(MAX_SPLICES, sizeof(*sp));
	struct buf text = BUF_INIT, streamed = BUF_INIT;
	char names[MAX_SECRETS][8];
	const uint8_t *val[MAX_SECRETS];
	size_t vlen[MAX_SECRETS];
	size_t i = 0, ns = 0, nwant, nsp = 0, olen;
	int r;
	char *one = NULL;
	uint32_t seed;
	bool chain;

	if (size < 2 || !sp)
		goto out;
	chain = data[i] & 0x80;
	nwant = 1 + data[i++] % MAX_SECRETS;
	if (redact_builder_new(&b) < 0 || redact_builder_new(&b2) < 0)
		goto out;
	for (size_t k = 0; k < nwant && i < size; k++) {
		size_t len = REDACT_MIN_LEN + data[i++] % (MAX_SECRET - 7);

		if (len > size - i)
			break;
		snprintf(names[ns], sizeof(names[ns]), "S%zu", k);
		r = redact_builder_add(chain && k % 2 ? b2 : b, names[ns],
				       data + i, len);
		/* Values the redactor refuses (too little that is not
		 * whitespace) are not secrets to it. */
		if (r == 0) {
			val[ns] = data + i;
			vlen[ns++] = len;
		} else if (r != -EINVAL) {
			abort();
		}
		i += len;
	}
	r = redact_builder_build(b, &s);
	b = NULL;
	if (r < 0)
		goto out;
	r = redact_builder_build(b2, &s2);
	b2 = NULL;
	if (r < 0)
		goto out;
	if (chain) {
		if (redact_set_chain(s, s2, &c) < 0)
			goto out;
		/* The chain holds its own references. */
		redact_set_free(s);
		s = c;
		c = NULL;
	}
	if (i >= size)
		goto out;
	seed = data[i++];
	while (i < size) {
		if (data[i] == 1 && i + 4 < size && ns && nsp < MAX_SPLICES) {
			size_t k = data[i + 1] % ns, w = data[i + 3] % 12;
			const char *brk = wsk[data[i + 4] % 6];
			uint8_t enc[ENC_MAX];
			size_t n =
			    encode(data[i + 2] % E_COUNT, val[k], vlen[k], enc);

			for (size_t j = 0; j < n; j++) {
				/* Not next to the value's own whitespace:
				 * a longer run would end the match. */
				if (w && j && j % w == 0 && !ws(enc[j]) &&
				    !ws(enc[j - 1]))
					buf_puts(&text, brk);
				buf_append(&text, enc + j, 1);
				if (!ws(enc[j]))
					sp[nsp].enc[sp[nsp].n++] = enc[j];
			}
			if (n)
				nsp++;
			i += 5;
		} else {
			buf_append(&text, data + i, 1);
			i++;
		}
	}

	if (redact_buf(s, text.data, text.len, &one, &olen) < 0)
		goto out;
	check_output(one, olen, text.data, text.len, sp, nsp, names, ns);
	if (redact_contains(s, text.data, text.len) !=
	    (olen != text.len || memcmp(one, text.data, olen)))
		abort();
	if (redact_stream_new(s, &st) < 0)
		goto out;
	for (size_t p = 0; p < text.len;) {
		size_t k;

		seed = seed * 1103515245u + 12345u;
		k = 1 + (seed >> 16) % 67;
		if (k > text.len - p)
			k = text.len - p;
		if (redact_stream_feed(st, text.data + p, k, &streamed) < 0)
			goto out;
		p += k;
	}
	if (redact_stream_flush(st, &streamed) < 0)
		goto out;
	if (streamed.len != olen || memcmp(streamed.data, one, olen) != 0)
		abort();
out:
	free(sp);
	free(one);
	buf_free(&text);
	buf_free(&streamed);
	redact_stream_free(st);
	redact_set_free(s);
	redact_set_free(s2);
	redact_set_free(c);
	redact_builder_free(b);
	redact_builder_free(b2);
	return 0;
}

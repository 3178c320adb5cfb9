/*
 * Fuzz target for common/redact.  The input makes up to four secrets and a
 * text; the text may splice in any form of any secret (byte 0x01 followed
 * by a form number).  The text is redacted one-shot and streamed in
 * pseudo-random chunk sizes; both must equal a naive matcher's output (the
 * union of every occurrence of every form, named after the leftmost and
 * longest match), which means no form of any value survives outside a
 * marker and every other byte is unchanged.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/redact.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_SECRETS 4
#define MAX_FORMS 512

struct form {
	uint8_t *p;
	size_t n;
	size_t secret;
};

struct forms {
	struct form v[MAX_FORMS];
	size_t n, cur;
};

static int add_form(const void *f, size_t n, void *ud)
{
	struct forms *fs = ud;

	if (fs->n == MAX_FORMS)
		return 0;
	fs->v[fs->n].p = malloc(n);
	memcpy(fs->v[fs->n].p, f, n);
	fs->v[fs->n].n = n;
	fs->v[fs->n++].secret = fs->cur;
	return 0;
}

static void naive(const struct forms *fs, char names[][8], const uint8_t *in,
		  size_t n, struct buf *out)
{
	size_t pos = 0;

	for (size_t i = 0; i < n;) {
		size_t best = SIZE_MAX, blen = 0, end;

		for (size_t j = 0; j < fs->n; j++) {
			const struct form *f = &fs->v[j];

			if (f->n <= n - i && memcmp(in + i, f->p, f->n) == 0 &&
			    (f->n > blen ||
			     (f->n == blen && f->secret < best))) {
				best = f->secret;
				blen = f->n;
			}
		}
		if (!blen) {
			i++;
			continue;
		}
		buf_append(out, in + pos, i - pos);
		buf_printf(out, "[redacted:%s]", names[best]);
		end = i + blen;
		for (size_t k = i + 1; k < end; k++)
			for (size_t j = 0; j < fs->n; j++) {
				const struct form *f = &fs->v[j];

				if (f->n <= n - k && k + f->n > end &&
				    memcmp(in + k, f->p, f->n) == 0)
					end = k + f->n;
			}
		pos = i = end;
	}
	buf_append(out, in + pos, n - pos);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct redact_builder *b = NULL;
	struct redact_set *s = NULL;
	struct redact_stream *st = NULL;
	struct forms *fs = calloc(1, sizeof(*fs));
	struct buf text = BUF_INIT, expect = BUF_INIT, streamed = BUF_INIT;
	char names[MAX_SECRETS][8];
	size_t i = 0, ns, olen;
	char *one = NULL;
	uint32_t seed;

	if (size < 2 || !fs)
		goto out;
	ns = 1 + data[i++] % MAX_SECRETS;
	if (redact_builder_new(&b) < 0)
		goto out;
	for (size_t k = 0; k < ns; k++) {
		size_t len;

		if (i >= size)
			break;
		len = REDACT_MIN_LEN + data[i++] % 24;
		if (len > size - i)
			break;
		names[k][0] = 'S';
		names[k][1] = (char)('0' + k);
		names[k][2] = 0;
		if (redact_builder_add(b, names[k], data + i, len) != 0)
			abort();
		fs->cur = k;
		redact_forms(data + i, len, add_form, fs);
		i += len;
	}
	if (redact_builder_build(b, &s) < 0)
		goto out;
	b = NULL;
	if (i >= size)
		goto out;
	seed = data[i++];
	while (i < size) {
		if (data[i] == 1 && i + 2 < size && fs->n) {
			const struct form *f =
			    &fs->v[(data[i + 1] | data[i + 2] << 8) % fs->n];

			buf_append(&text, f->p, f->n);
			i += 3;
		} else {
			buf_append(&text, data + i, 1);
			i++;
		}
	}

	naive(fs, names, (const uint8_t *)text.data, text.len, &expect);
	if (redact_buf(s, text.data, text.len, &one, &olen) < 0)
		goto out;
	if (olen != expect.len || memcmp(one, expect.data, olen) != 0)
		abort();
	if (redact_contains(s, text.data, text.len) !=
	    (expect.len != text.len ||
	     memcmp(expect.data, text.data, text.len)))
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
	if (fs)
		for (size_t k = 0; k < fs->n; k++)
			free(fs->v[k].p);
	free(fs);
	free(one);
	buf_free(&text);
	buf_free(&expect);
	buf_free(&streamed);
	redact_stream_free(st);
	redact_set_free(s);
	redact_builder_free(b);
	return 0;
}

/*
 * Base64 decoding for spctl (client/b64.h).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "client/b64.h"

/* The value of c in the standard alphabet, or -1. */
static int b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

unsigned char *b64_decode(const char *s, size_t n, size_t *ret_len)
{
	const unsigned char *in = (const unsigned char *)s;
	unsigned char *out;
	size_t o = 0;

	*ret_len = 0;
	if (n % 4)
		return NULL;
	out = malloc(n / 4 * 3 + 1);
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i += 4) {
		bool last = i + 4 == n;
		int v[4];
		size_t pad = 0;

		for (int k = 0; k < 4; k++) {
			v[k] = b64_value(in[i + k]);
			if (v[k] >= 0 && !pad)
				continue;
			/* '=' only at the end of the last group: "xx==" or
			 * "xxx=". */
			if (in[i + k] != '=' || !last || k < 2)
				goto bad;
			pad++;
			v[k] = 0;
		}
		uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 |
			     (uint32_t)v[2] << 6 | (uint32_t)v[3];
		/* The bits the padding leaves over must be zero: one
		 * encoding per byte string. */
		if ((pad == 2 && (w & 0xffff)) || (pad == 1 && (w & 0xff)))
			goto bad;
		out[o++] = (unsigned char)(w >> 16);
		if (pad < 2)
			out[o++] = (unsigned char)(w >> 8);
		if (pad < 1)
			out[o++] = (unsigned char)w;
	}
	*ret_len = o;
	return out;
bad:
	free(out);
	return NULL;
}

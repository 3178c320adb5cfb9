/*
 * UTF-8 validation (RFC 3629) for common/utf8.h: strict, no overlong
 * forms, no surrogates, nothing past U+10FFFF.
 */
#include "utf8.h"

bool utf8_valid(const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0;

	while (i < n) {
		unsigned char c = s[i];
		size_t len;
		unsigned lo = 0x80, hi = 0xbf;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			len = 2;
		} else if (c >= 0xe0 && c <= 0xef) {
			len = 3;
			if (c == 0xe0)
				lo = 0xa0;
			else if (c == 0xed)
				hi = 0x9f; /* no UTF-16 surrogates */
		} else if (c >= 0xf0 && c <= 0xf4) {
			len = 4;
			if (c == 0xf0)
				lo = 0x90;
			else if (c == 0xf4)
				hi = 0x8f; /* nothing above U+10FFFF */
		} else {
			return false;
		}
		if (n - i < len)
			return false;
		if (s[i + 1] < lo || s[i + 1] > hi)
			return false;
		for (size_t k = 2; k < len; k++)
			if (s[i + k] < 0x80 || s[i + k] > 0xbf)
				return false;
		i += len;
	}
	return true;
}

/*
 * The redactor's forms of a value: the encodings and cheap transforms a
 * secret may appear in (base64 at each offset, hex, percent-encoding,
 * JSON escaping, rev, rot13, UTF-16, hex with separators, \u escapes),
 * each reported to a callback; the list is atop redact.h.  The builder
 * (redact.c) compiles every form of every value into its matcher.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "redact.h"
#include "utf8.h"

static const char b64_std[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char b64_url[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
static const char hex_lower[] = "0123456789abcdef";
static const char hex_upper[] = "0123456789ABCDEF";

/* Padded base64 of n bytes; returns the output length. */
static size_t b64_encode(const uint8_t *in, size_t n, const char *alpha,
			 uint8_t *out)
{
	size_t o = 0, i = 0;

	for (; i + 3 <= n; i += 3) {
		uint32_t x = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 |
			     in[i + 2];
		out[o++] = (uint8_t)alpha[x >> 18];
		out[o++] = (uint8_t)alpha[(x >> 12) & 63];
		out[o++] = (uint8_t)alpha[(x >> 6) & 63];
		out[o++] = (uint8_t)alpha[x & 63];
	}
	if (n - i == 1) {
		uint32_t x = (uint32_t)in[i] << 16;
		out[o++] = (uint8_t)alpha[x >> 18];
		out[o++] = (uint8_t)alpha[(x >> 12) & 63];
		out[o++] = '=';
		out[o++] = '=';
	} else if (n - i == 2) {
		uint32_t x = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
		out[o++] = (uint8_t)alpha[x >> 18];
		out[o++] = (uint8_t)alpha[(x >> 12) & 63];
		out[o++] = (uint8_t)alpha[(x >> 6) & 63];
		out[o++] = '=';
	}
	return o;
}

static bool url_unreserved(uint8_t c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	       c == '~';
}

static bool url_reserved(uint8_t c)
{
	return c && strchr(":/?#[]@!$&'()*+,;=", c) != NULL;
}

enum {
	URL_LOWER = 1,	       /* %2f rather than %2F */
	URL_RESERVED_ONLY = 2, /* leave bytes that are neither class alone */
	URL_PLUS = 4,	       /* space as '+' (forms) */
	URL__ALL = 8,
};

static size_t url_encode(const uint8_t *v, size_t n, unsigned fl, uint8_t *out)
{
	const char *hx = (fl & URL_LOWER) ? hex_lower : hex_upper;
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		uint8_t c = v[i];

		if (c == ' ' && (fl & URL_PLUS)) {
			out[o++] = '+';
		} else if (url_unreserved(c) ||
			   ((fl & URL_RESERVED_ONLY) && !url_reserved(c))) {
			out[o++] = c;
		} else {
			out[o++] = '%';
			out[o++] = (uint8_t)hx[c >> 4];
			out[o++] = (uint8_t)hx[c & 15];
		}
	}
	return o;
}

enum {
	JSON_UPPER = 1, /* \u00E9 (jansson) rather than \u00e9 (Python) */
	JSON_ASCII = 2, /* non-ASCII as \u escapes (ensure_ascii) */
	JSON_SLASH = 4, /* "/" as "\/" (JSON_ESCAPE_SLASH, PHP) */
	JSON_HTML = 8,	/* <>& and U+2028/9 as \u escapes (Go) */
	JSON_BF_U = 16, /* \b and \f as \u0008, \u000c (older Go) */
	JSON__ALL = 32,
};

static size_t json_u(uint32_t u, const char *hx, uint8_t *out)
{
	out[0] = '\\';
	out[1] = 'u';
	out[2] = (uint8_t)hx[(u >> 12) & 15];
	out[3] = (uint8_t)hx[(u >> 8) & 15];
	out[4] = (uint8_t)hx[(u >> 4) & 15];
	out[5] = (uint8_t)hx[u & 15];
	return 6;
}

/* Decode one sequence of UTF-8 already known to be valid. */
static size_t utf8_decode(const uint8_t *s, uint32_t *ret_u)
{
	if (s[0] < 0xe0) {
		*ret_u = (uint32_t)(s[0] & 0x1f) << 6 | (s[1] & 0x3f);
		return 2;
	}
	if (s[0] < 0xf0) {
		*ret_u = (uint32_t)(s[0] & 0x0f) << 12 |
			 (uint32_t)(s[1] & 0x3f) << 6 | (s[2] & 0x3f);
		return 3;
	}
	*ret_u = (uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3f) << 12 |
		 (uint32_t)(s[2] & 0x3f) << 6 | (s[3] & 0x3f);
	return 4;
}

static size_t json_encode(const uint8_t *v, size_t n, unsigned fl, uint8_t *out)
{
	const char *hx = (fl & JSON_UPPER) ? hex_upper : hex_lower;
	size_t o = 0;

	for (size_t i = 0; i < n;) {
		uint8_t c = v[i];
		uint32_t u;

		if (c >= 0x80 && (fl & (JSON_ASCII | JSON_HTML))) {
			size_t l = utf8_decode(v + i, &u);

			if ((fl & JSON_ASCII) ||
			    ((fl & JSON_HTML) &&
			     (u == 0x2028 || u == 0x2029))) {
				if (u >= 0x10000) {
					u -= 0x10000;
					o += json_u(0xd800 + (u >> 10), hx,
						    out + o);
					u = 0xdc00 + (u & 0x3ff);
				}
				o += json_u(u, hx, out + o);
			} else {
				memcpy(out + o, v + i, l);
				o += l;
			}
			i += l;
			continue;
		}
		i++;
		if (c == '"' || c == '\\' || (c == '/' && (fl & JSON_SLASH))) {
			out[o++] = '\\';
			out[o++] = c;
		} else if (c == '\n' || c == '\r' || c == '\t' ||
			   ((c == '\b' || c == '\f') && !(fl & JSON_BF_U))) {
			out[o++] = '\\';
			out[o++] = c == '\n'   ? 'n'
				   : c == '\r' ? 'r'
				   : c == '\t' ? 't'
				   : c == '\b' ? 'b'
					       : 'f';
		} else if (c < 0x20 || ((fl & JSON_HTML) &&
					(c == '<' || c == '>' || c == '&'))) {
			o += json_u(c, hx, out + o);
		} else {
			out[o++] = c;
		}
	}
	return o;
}

/*
 * v reversed as rev(1) does it: by character, so a UTF-8 sequence stays
 * whole; by byte when v is not UTF-8.
 */
static size_t reverse_encode(const uint8_t *v, size_t n, bool utf8,
			     uint8_t *out)
{
	size_t o = n;

	for (size_t i = 0; i < n;) {
		size_t l = 1;

		if (utf8 && v[i] >= 0xc0)
			l = v[i] < 0xe0 ? 2 : v[i] < 0xf0 ? 3 : 4;
		o -= l;
		memcpy(out + o, v + i, l);
		i += l;
	}
	return n;
}

static size_t rot13_encode(const uint8_t *v, size_t n, uint8_t *out)
{
	for (size_t i = 0; i < n; i++) {
		uint8_t c = v[i];

		if ((c >= 'a' && c <= 'm') || (c >= 'A' && c <= 'M'))
			c += 13;
		else if ((c >= 'n' && c <= 'z') || (c >= 'N' && c <= 'Z'))
			c -= 13;
		out[i] = c;
	}
	return n;
}

/* The code point at s (valid UTF-8) and the length of its sequence. */
static size_t utf8_next(const uint8_t *s, uint32_t *ret_u)
{
	if (s[0] < 0x80) {
		*ret_u = s[0];
		return 1;
	}
	return utf8_decode(s, ret_u);
}

/* UTF-16 (surrogate pairs past U+FFFF) of valid UTF-8, as iconv -t
 * UTF-16LE/BE writes it; the byte-order mark of plain "UTF-16" comes
 * before the text and so does not hide it. */
static size_t utf16_encode(const uint8_t *v, size_t n, bool be, uint8_t *out)
{
	size_t o = 0;

	for (size_t i = 0; i < n;) {
		uint32_t u, unit[2];
		int nu = 1;

		i += utf8_next(v + i, &u);
		unit[0] = u;
		if (u >= 0x10000) {
			u -= 0x10000;
			unit[0] = 0xd800 + (u >> 10);
			unit[1] = 0xdc00 + (u & 0x3ff);
			nu = 2;
		}
		for (int k = 0; k < nu; k++) {
			out[o++] = (uint8_t)(be ? unit[k] >> 8 : unit[k]);
			out[o++] = (uint8_t)(be ? unit[k] : unit[k] >> 8);
		}
	}
	return o;
}

/*
 * Hex with something around each byte: "de:ad" (MAC addresses, openssl
 * -c), "\xde\xad" (printf, C strings), "0xde,0xad" (xxd -i, once
 * whitespace is gone), "%de%ad" (percent-escaping of every byte).  Hex
 * separated by whitespace (od, xxd, hexdump) is plain hex to the
 * whitespace-blind pass.
 */
static const struct {
	const char *pfx, *sep;
} hex_seps[] = {
    {"", ":"},	{"", "-"},   {"", ","}, {"\\x", ""},
    {"0x", ""}, {"0x", ","}, {"%", ""},
};

static size_t hex_sep_encode(const uint8_t *v, size_t n, const char *hx,
			     const char *pfx, const char *sep, uint8_t *out)
{
	size_t o = 0, lp = strlen(pfx), ls = strlen(sep);

	for (size_t i = 0; i < n; i++) {
		if (i) {
			memcpy(out + o, sep, ls);
			o += ls;
		}
		memcpy(out + o, pfx, lp);
		o += lp;
		out[o++] = (uint8_t)hx[v[i] >> 4];
		out[o++] = (uint8_t)hx[v[i] & 15];
	}
	return o;
}

/* Every character of valid UTF-8 as a JSON/JavaScript \u escape. */
static size_t uescape_encode(const uint8_t *v, size_t n, const char *hx,
			     uint8_t *out)
{
	size_t o = 0;

	for (size_t i = 0; i < n;) {
		uint32_t u;

		i += utf8_next(v + i, &u);
		if (u >= 0x10000) {
			u -= 0x10000;
			o += json_u(0xd800 + (u >> 10), hx, out + o);
			u = 0xdc00 + (u & 0x3ff);
		}
		o += json_u(u, hx, out + o);
	}
	return o;
}

int redact_forms(const void *value, size_t len,
		 int (*cb)(const void *form, size_t n, void *userdata),
		 void *userdata)
{
	const uint8_t *v = value;
	uint8_t *tmp = NULL, *z = NULL;
	bool utf8 = utf8_valid(value, len);
	int r;

	if (len == 0)
		return -EINVAL;
	tmp = malloc(REDACT_FORM_MAX(len));
	z = malloc(len + 2);
	if (!tmp || !z) {
		r = -ENOMEM;
		goto out;
	}
	r = cb(v, len, userdata);
	if (r)
		goto out;
	for (int up = 0; up < 2; up++) {
		const char *hx = up ? hex_upper : hex_lower;

		for (size_t i = 0; i < len; i++) {
			tmp[2 * i] = (uint8_t)hx[v[i] >> 4];
			tmp[2 * i + 1] = (uint8_t)hx[v[i] & 15];
		}
		r = cb(tmp, 2 * len, userdata);
		if (r)
			goto out;
	}
	/*
	 * base64 of v preceded by a (0, 1 or 2) unknown bytes: the
	 * characters from ceil(8a/6) to floor(8(a+len)/6) carry only v's
	 * bits whatever surrounds it.  At the end of the data the last
	 * partial character is fixed too (zero fill), with or without "=".
	 */
	for (int alph = 0; alph < 2; alph++) {
		for (size_t a = 0; a < 3; a++) {
			size_t bits = 8 * (a + len), first = (8 * a + 5) / 6;
			size_t core = bits / 6, total;

			memset(z, 0, a);
			memcpy(z + a, v, len);
			total = b64_encode(z, a + len, alph ? b64_url : b64_std,
					   tmp);
			r = cb(tmp + first, core - first, userdata);
			if (r)
				goto out;
			if (bits % 6 == 0)
				continue;
			r = cb(tmp + first, core + 1 - first, userdata);
			if (!r)
				r = cb(tmp + first, total - first, userdata);
			if (r)
				goto out;
		}
	}
	for (unsigned fl = 0; fl < URL__ALL; fl++) {
		r = cb(tmp, url_encode(v, len, fl, tmp), userdata);
		if (r)
			goto out;
	}
	for (unsigned fl = 0; fl < JSON__ALL; fl++) {
		/* Invalid UTF-8 cannot be \u-escaped; encoders refuse it. */
		if ((fl & JSON_ASCII) && !utf8)
			continue;
		if ((fl & JSON_HTML) && !utf8)
			continue;
		r = cb(tmp, json_encode(v, len, fl, tmp), userdata);
		if (r)
			goto out;
	}
	r = cb(tmp, reverse_encode(v, len, utf8, tmp), userdata);
	if (!r)
		r = cb(tmp, rot13_encode(v, len, tmp), userdata);
	if (r)
		goto out;
	for (int up = 0; up < 2; up++) {
		const char *hx = up ? hex_upper : hex_lower;

		for (size_t i = 0; i < sizeof(hex_seps) / sizeof(hex_seps[0]);
		     i++) {
			r = cb(tmp,
			       hex_sep_encode(v, len, hx, hex_seps[i].pfx,
					      hex_seps[i].sep, tmp),
			       userdata);
			if (r)
				goto out;
		}
		/* Encoders refuse to \u-escape invalid UTF-8. */
		if (utf8) {
			r = cb(tmp, uescape_encode(v, len, hx, tmp), userdata);
			if (r)
				goto out;
		}
	}
	/* iconv refuses invalid UTF-8 too. */
	for (int be = 0; utf8 && be < 2; be++) {
		r = cb(tmp, utf16_encode(v, len, be, tmp), userdata);
		if (r)
			goto out;
	}
out:
	/* Both held an encoded form of the secret. */
	if (tmp)
		explicit_bzero(tmp, REDACT_FORM_MAX(len));
	if (z)
		explicit_bzero(z, len + 2);
	free(tmp);
	free(z);
	return r;
}

#include "client/termsafe.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

/* ---- the stream --------------------------------------------------------- */

/* The continuation bytes a UTF-8 lead byte announces (0: not a lead). */
static int utf8_cont(unsigned char c)
{
	return c >= 0xc2 && c <= 0xdf	? 1
	       : c >= 0xe0 && c <= 0xef ? 2
	       : c >= 0xf0 && c <= 0xf4 ? 3
					: 0;
}

struct ts_out {
	int fd;
	int err;
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

static void out_put(struct ts_out *o, const char *s, size_t n)
{
	if (o->n + n > sizeof(o->buf))
		out_flush(o);
	memcpy(o->buf + o->n, s, n);
	o->n += n;
}

static void out_byte(struct ts_out *o, unsigned char c)
{
	char b = (char)c;

	out_put(o, &b, 1);
}

static void out_fmt_hex(struct ts_out *o, const char *prefix, unsigned c)
{
	static const char hex[] = "0123456789abcdef";
	char b[8];
	size_t n = strlen(prefix);

	memcpy(b, prefix, n);
	b[n++] = hex[(c >> 4) & 15];
	b[n++] = hex[c & 15];
	out_put(o, b, n);
}

static void stream_byte(struct ts_out *o, struct ts_stream *st, unsigned char c)
{
	if (st->held) {
		st->held = 0;
		if (c >= 0x80 && c <= 0x9f) {
			out_fmt_hex(o, "\\u00", c); /* a C1 control */
			return;
		}
		out_byte(o, 0xc2);
		if (c >= 0xa0 && c <= 0xbf) {
			out_byte(o, c);
			return;
		}
		/* Not a continuation: the 0xC2 was a stray; c starts anew. */
	}
	if (st->cont > 0) {
		if (c >= 0x80 && c <= 0xbf) {
			st->cont--;
			out_byte(o, c);
			return;
		}
		st->cont = 0;
	}
	if (c == '\n' || c == '\t' || c == '\r' || c == '\b') {
		out_byte(o, c);
	} else if (c < 0x20 || c == 0x7f) {
		char b[2] = {'^', c == 0x7f ? '?' : (char)(c + 0x40)};

		out_put(o, b, 2);
	} else if (c < 0x80) {
		out_byte(o, c);
	} else if (c == 0xc2) {
		st->held = 1;
	} else if (c <= 0x9f) {
		out_fmt_hex(o, "\\x", c); /* a stray byte in the C1 range */
	} else {
		st->cont = utf8_cont(c);
		out_byte(o, c);
	}
}

int ts_stream_write(int fd, struct ts_stream *st, const char *buf, size_t n)
{
	struct ts_out o = {.fd = fd};

	for (size_t i = 0; i < n && !o.err; i++)
		stream_byte(&o, st, (unsigned char)buf[i]);
	out_flush(&o);
	return o.err;
}

int ts_stream_end(int fd, struct ts_stream *st)
{
	struct ts_out o = {.fd = fd};

	if (st->held)
		out_byte(&o, 0xc2);
	st->held = 0;
	st->cont = 0;
	out_flush(&o);
	return o.err;
}

/* ---- fields and arguments ---------------------------------------------- */

/* The C-style escape of c, or NULL when it needs none.  buf: 5 bytes. */
static const char *c_escape(unsigned char c, bool quote, char *buf)
{
	static const char hex[] = "0123456789abcdef";

	switch (c) {
	case '\n':
		return "\\n";
	case '\t':
		return "\\t";
	case '\r':
		return "\\r";
	case 0x1b:
		return "\\e";
	case '\\':
		return "\\\\";
	case '\'':
		return quote ? "\\'" : NULL;
	}
	if (c < 0x20 || c == 0x7f) {
		buf[0] = '\\';
		buf[1] = 'x';
		buf[2] = hex[c >> 4];
		buf[3] = hex[c & 15];
		buf[4] = 0;
		return buf;
	}
	return NULL;
}

/* How p starts: 0 for a plain byte, 1 for a C1 control (U+0080..U+009F,
 * two bytes), 2 for a stray byte in 0x80..0x9F; *cont is the UTF-8
 * continuation state across calls. */
static int c1_at(const unsigned char *p, int *cont)
{
	if (*cont > 0 && *p >= 0x80 && *p <= 0xbf) {
		(*cont)--;
		return 0;
	}
	*cont = 0;
	if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
		return 1;
	if (*p >= 0x80 && *p <= 0x9f)
		return 2;
	*cont = utf8_cont(*p);
	return 0;
}

/* Print s with C-style escapes; C1 controls as \u00XX and stray bytes in
 * that range as \xXX. */
static void fputs_escaped(FILE *f, const char *s, bool quote)
{
	const unsigned char *p = (const unsigned char *)s;
	int cont = 0, k;
	char buf[5];

	for (; *p; p++) {
		const char *e = c_escape(*p, quote, buf);

		if (e) {
			cont = 0;
			fputs(e, f);
		} else if ((k = c1_at(p, &cont)) == 1) {
			fprintf(f, "\\u00%02x", p[1]);
			p++;
		} else if (k == 2) {
			fprintf(f, "\\x%02x", *p);
		} else {
			fputc(*p, f);
		}
	}
}

void ts_fputs(FILE *f, const char *s)
{
	fputs_escaped(f, s ? s : "(null)", false);
}

static bool has_control(const char *s)
{
	int cont = 0;

	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p < 0x20 || *p == 0x7f || c1_at(p, &cont))
			return true;
	return false;
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
	if (has_control(s)) {
		fputs("$'", f);
		fputs_escaped(f, s, true);
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

/*
 * The ref-update commands at the head of a git-receive-pack request
 * body (git's smart HTTP; gitprotocol-pack(5)): pkt-lines of "OLD NEW
 * REF" (the first with "\0" and the capabilities after it), possibly
 * after "shallow OID" lines, ended by a flush-pkt "0000"; the pack
 * follows.  Bytes from the run: read strictly, anything else refused.
 */
#include <stdio.h>
#include <string.h>

#include "daemon/proxy/proxy.h"

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* An object id: 40 (SHA-1) or 64 (SHA-256) lower-case hex digits. */
static size_t oid_len(const char *s, size_t n)
{
	size_t i = 0;

	while (i < n && i < 64 && hexval(s[i]) >= 0)
		i++;
	return i == 40 || i == 64 ? i : 0;
}

int proxy_pkt_commands(const char *buf, size_t len,
		       struct proxy_pkt_update *out, size_t max, size_t *ret_n,
		       const char **why)
{
	size_t off = 0, n = 0;

	*ret_n = 0;
	*why = NULL;
	for (;;) {
		size_t plen = 0, l, ol, nl;
		const char *p, *sp;

		if (len - off < 4)
			return 0;
		for (int i = 0; i < 4; i++) {
			int v = hexval(buf[off + (size_t)i]);

			if (v < 0) {
				*why = "not a pkt-line length";
				return -1;
			}
			plen = plen * 16 + (size_t)v;
		}
		if (plen == 0) {
			if (n == 0) {
				*why = "no ref update before the flush";
				return -1;
			}
			*ret_n = n;
			return 1;
		}
		if (plen < 5 || plen > 65520) {
			*why = "a pkt-line of a length git never sends";
			return -1;
		}
		if (len - off < plen)
			return 0;
		p = buf + off + 4;
		l = plen - 4;
		off += plen;
		if (l && p[l - 1] == '\n')
			l--;
		if (n == 0 && l >= 8 && memcmp(p, "shallow ", 8) == 0 &&
		    oid_len(p + 8, l - 8) == l - 8)
			continue;
		if (l >= 9 && memcmp(p, "push-cert", 9) == 0) {
			*why = "a signed push (push-cert) is not read by spd";
			return -1;
		}
		/* The first command carries the capabilities after a NUL. */
		if (n == 0 && (sp = memchr(p, '\0', l)))
			l = (size_t)(sp - p);
		if (n == max) {
			*why = "too many ref updates in one push";
			return -1;
		}
		ol = oid_len(p, l);
		if (!ol || l < 2 * ol + 3 || p[ol] != ' ' ||
		    (nl = oid_len(p + ol + 1, l - ol - 1)) != ol ||
		    p[2 * ol + 1] != ' ' || l - 2 * ol - 2 >= PROXY_REF_MAX ||
		    memchr(p + 2 * ol + 2, '\0', l - 2 * ol - 2) ||
		    memchr(p + 2 * ol + 2, ' ', l - 2 * ol - 2)) {
			*why = "not a ref update (OLD NEW REF)";
			return -1;
		}
		memcpy(out[n].old_id, p, ol);
		out[n].old_id[ol] = '\0';
		memcpy(out[n].new_id, p + ol + 1, ol);
		out[n].new_id[ol] = '\0';
		memcpy(out[n].ref, p + 2 * ol + 2, l - 2 * ol - 2);
		out[n].ref[l - 2 * ol - 2] = '\0';
		n++;
	}
}

bool proxy_oid_zero(const char *id)
{
	return id[0] && strspn(id, "0") == strlen(id);
}

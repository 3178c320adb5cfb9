/*
 * Encoding and exact-length decoding of the spd<->sandboxd messages
 * (proto/sandbox.h): both sides use these, so a message one writes is a
 * message the other accepts, and a malformed one is refused whole.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/util.h"
#include "sandbox.h"

long sbxp_body_size(uint32_t type)
{
	switch (type) {
	case SBXP_RUN:
		return (long)sizeof(struct sbxp_run);
	case SBXP_STARTED:
		return (long)sizeof(struct sbxp_started);
	case SBXP_EXITED:
		return (long)sizeof(struct sbxp_exited);
	case SBXP_CANCEL:
		return (long)sizeof(struct sbxp_cancel);
	case SBXP_PROBE:
		return (long)sizeof(struct sbxp_probe);
	case SBXP_PROBE_RESULT:
		return (long)sizeof(struct sbx_layers);
	case SBXP_LISTENER:
		return (long)sizeof(struct sbxp_listener);
	default:
		return -1;
	}
}

static bool list_is_paths(int i)
{
	return i == SBXP_L_WRITABLE || i == SBXP_L_HIDDEN ||
	       i == SBXP_L_READONLY || i == SBXP_L_EMPTY ||
	       i == SBXP_L_RO_BINDS;
}

static bool list_is_links(int i)
{
	return i == SBXP_L_LINKS || i == SBXP_L_LINK_RO_DIRS;
}

/* A link name as spd's walk makes them: relative, no empty, "." or ".."
 * component.  Together with strict strcmp order this makes two entries
 * two different names, so that sandboxd never counts one name twice (a
 * name counted twice would hide a link outside). */
static bool link_name_ok(const char *s, const char *prev)
{
	const char *c = s;

	if (!s[0] || s[0] == '/' || (prev && strcmp(prev, s) >= 0))
		return false;
	for (;;) {
		size_t n = strcspn(c, "/");

		if (n == 0 || (n == 1 && c[0] == '.') ||
		    (n == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		if (!c[n])
			return true;
		c += n + 1;
	}
}

static int put_str(struct sbxp_run *m, size_t *off, const char *s)
{
	size_t n = strlen(s) + 1;

	if (n > SBXP_STRTAB_MAX - *off)
		return -SPD_ETOOBIG;
	memcpy(m->strtab + *off, s, n);
	*off += n;
	return 0;
}

/* The string table starts where the fixed part ends: no padding byte on
 * the wire that the encoder would leave unwritten. */
_Static_assert(offsetof(struct sbxp_run, strtab) == sizeof(struct sbxp_run),
	       "struct sbxp_run has trailing padding");

long sbxp_run_encode(struct sbxp_run *m, const char *workspace, const char *cwd,
		     const char *home,
		     const char *const *const lists[SBXP_L__COUNT])
{
	size_t off = 0, npaths = 0;
	int r;

	if (!workspace || workspace[0] != '/' || !lists[SBXP_L_ARGV] ||
	    !lists[SBXP_L_ARGV][0] || !lists[SBXP_L_ARGV][0][0])
		return -EINVAL;
	if ((cwd && cwd[0] && cwd[0] != '/') ||
	    (home && home[0] && home[0] != '/'))
		return -EINVAL;
	if ((r = put_str(m, &off, workspace)) < 0 ||
	    (r = put_str(m, &off, cwd ? cwd : "")) < 0 ||
	    (r = put_str(m, &off, home ? home : "")) < 0)
		return r;
	for (int i = 0; i < SBXP_L__COUNT; i++) {
		uint32_t n = 0;

		for (; lists[i] && lists[i][n]; n++) {
			if (n >= SBXP_LIST_MAX)
				return -SPD_ETOOBIG;
			if (list_is_paths(i) && lists[i][n][0] != '/')
				return -EINVAL;
			if (list_is_links(i) &&
			    !link_name_ok(lists[i][n],
					  n ? lists[i][n - 1] : NULL))
				return -EINVAL;
			if ((r = put_str(m, &off, lists[i][n])) < 0)
				return r;
		}
		if (list_is_paths(i))
			npaths += n;
		if (i == SBXP_L_RO_BINDS &&
		    (n % 2 || n > 2 * SBXP_RO_BINDS_MAX))
			return -EINVAL;
		if (list_is_links(i) &&
		    (n > SBXP_LINKS_MAX ||
		     (n && !(m->flags & SBXP_RUN_LINKS_LISTED))))
			return -EINVAL;
		m->counts[i] = n;
	}
	if (npaths > SBXP_PATHS_MAX)
		return -SPD_ETOOBIG;
	m->strtab_len = (uint32_t)off;
	return (long)(sizeof(*m) + off);
}

size_t sbxp_run_nfds(uint32_t flags)
{
	return ((flags & SBXP_RUN_MERGED) ? 1u : 2u) +
	       ((flags & SBXP_RUN_STDIN) ? 1u : 0u);
}

int sbxp_run_decode(const void *body, size_t len, struct sbxp_run_view *ret)
{
	const struct sbxp_run *m = body;
	struct sbxp_run_view v = {.msg = m};
	size_t total = 0, npaths = 0, slot = 0;
	const char *p, *end;
	const char **storage;

	if (len < sizeof(*m) || m->strtab_len > SBXP_STRTAB_MAX ||
	    len != sizeof(*m) + m->strtab_len || m->strtab_len == 0 ||
	    m->strtab[m->strtab_len - 1] != '\0')
		return -SPD_EPROTO;
	if (m->net > SBX_NET_PROXY || (m->flags & ~SBXP_RUN__FLAGS))
		return -SPD_EPROTO;
	if (m->net == SBX_NET_BROKER || m->net == SBX_NET_PROXY
		? m->broker_port == 0 || m->broker_port > 65535
		: m->broker_port != 0)
		return -SPD_EPROTO;
	for (int i = 0; i < SBXP_L__COUNT; i++) {
		if (m->counts[i] > SBXP_LIST_MAX)
			return -SPD_EPROTO;
		total += m->counts[i];
		if (list_is_paths(i))
			npaths += m->counts[i];
	}
	if (m->counts[SBXP_L_ARGV] == 0 || npaths > SBXP_PATHS_MAX ||
	    m->counts[SBXP_L_RO_BINDS] % 2 ||
	    m->counts[SBXP_L_RO_BINDS] > 2 * SBXP_RO_BINDS_MAX ||
	    m->counts[SBXP_L_LINKS] > SBXP_LINKS_MAX ||
	    m->counts[SBXP_L_LINK_RO_DIRS] > SBXP_LINKS_MAX ||
	    (!(m->flags & SBXP_RUN_LINKS_LISTED) &&
	     (m->counts[SBXP_L_LINKS] || m->counts[SBXP_L_LINK_RO_DIRS])))
		return -SPD_EPROTO;

	storage = calloc(total + SBXP_L__COUNT, sizeof(*storage));
	if (!storage)
		return -ENOMEM;
	p = m->strtab;
	end = m->strtab + m->strtab_len;
	/* Three fixed strings, then the lists; every string must end inside
	 * the table and the table must hold nothing after the last one. */
	const char **fixed[3] = {&v.workspace, &v.cwd, &v.home};
	for (int i = 0; i < 3; i++) {
		if (p >= end)
			goto bad;
		*fixed[i] = p;
		p += strlen(p) + 1;
	}
	if (v.workspace[0] != '/' || (v.cwd[0] && v.cwd[0] != '/') ||
	    (v.home[0] && v.home[0] != '/'))
		goto bad;
	for (int i = 0; i < SBXP_L__COUNT; i++) {
		v.lists[i] = storage + slot;
		for (uint32_t n = 0; n < m->counts[i]; n++) {
			if (p >= end)
				goto bad;
			if (list_is_paths(i) && p[0] != '/')
				goto bad;
			if (list_is_links(i) &&
			    !link_name_ok(p, n ? storage[slot - 1] : NULL))
				goto bad;
			storage[slot++] = p;
			p += strlen(p) + 1;
		}
		storage[slot++] = NULL;
	}
	if (p != end || v.lists[SBXP_L_ARGV][0][0] == '\0')
		goto bad;
	v.storage = storage;
	*ret = v;
	return 0;
bad:
	free(storage);
	return -SPD_EPROTO;
}

void sbxp_run_view_free(struct sbxp_run_view *v)
{
	if (!v)
		return;
	free(v->storage);
	v->storage = NULL;
}

int sbxp_send(int sock, uint32_t type, uint32_t id, const void *body,
	      size_t len, const int *fds, size_t nfds)
{
	struct sbxp_hdr h = {.type = type, .len = (uint32_t)len, .id = id};
	struct iovec iov[2] = {{&h, sizeof(h)}, {(void *)(uintptr_t)body, len}};
	union {
		char buf[CMSG_SPACE(sizeof(int) * SBXP_RUN_FDS)];
		struct cmsghdr align;
	} u;
	struct msghdr mh = {.msg_iov = iov, .msg_iovlen = len ? 2 : 1};
	ssize_t n;

	if (len + sizeof(h) > SBXP_MSG_MAX || nfds > SBXP_RUN_FDS)
		return -SPD_ETOOBIG;
	if (nfds) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	do {
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	/* A SOCK_SEQPACKET datagram goes whole or not at all. */
	if ((size_t)n != sizeof(h) + len)
		return -EIO;
	return 0;
}

static void close_all(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

long sbxp_recv(int sock, void *buf, struct sbxp_hdr *hdr, int *fds,
	       size_t *ret_nfds)
{
	/* Room for more descriptors than allowed, so that a peer sending too
	 * many is detected (and all of them closed) rather than truncated. */
	union {
		char buf[CMSG_SPACE(sizeof(int) * (SBXP_RUN_FDS + 8))];
		struct cmsghdr align;
	} u;
	/* Header and body land apart so that the body starts aligned in
	 * buf (its structs hold 64-bit fields; the header is 12 bytes). */
	struct iovec iov[2] = {{hdr, sizeof(*hdr)},
			       {buf, SBXP_MSG_MAX - sizeof(*hdr)}};
	struct msghdr mh = {.msg_iov = iov,
			    .msg_iovlen = 2,
			    .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf)};
	int got[SBXP_RUN_FDS + 8];
	size_t ngot = 0;
	ssize_t n;
	bool bad = false;

	do {
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c;
	     c = CMSG_NXTHDR(&mh, c)) {
		size_t k;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
			bad = true;
			continue;
		}
		k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k && ngot < ARRAY_SIZE(got); i++)
			memcpy(&got[ngot++], CMSG_DATA(c) + i * sizeof(int),
			       sizeof(int));
	}
	if (n == 0 && ngot == 0)
		return -EPIPE;
	if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || ngot > SBXP_RUN_FDS ||
	    (size_t)n < sizeof(*hdr))
		bad = true;
	if (!bad && hdr->len != (size_t)n - sizeof(*hdr))
		bad = true;
	if (bad) {
		close_all(got, ngot);
		return -SPD_EPROTO;
	}
	memcpy(fds, got, ngot * sizeof(int));
	*ret_nfds = ngot;
	return (long)hdr->len;
}

const char *sbxp_err_code(enum sbxp_err e)
{
	static const char *const codes[SBXP_ERR__COUNT] = {
	    [SBXP_ERR_UNAVAILABLE] = "SANDBOX-UNAVAILABLE",
	    [SBXP_ERR_INTERNAL] = "INTERNAL",
	    [SBXP_ERR_BAD_REQUEST] = "BAD-REQUEST",
	};

	return (unsigned)e < SBXP_ERR__COUNT ? codes[e] : NULL;
}

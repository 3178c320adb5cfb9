/*
 * The broker benchmark's floor: a forwarder that only moves bytes
 * (tests/lib/fast_forward.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/lib/testlib.h"
#include "tests/lib/fast_forward.h"

#define FF_BUF 16384
#define FF_HEAD_MAX 8192
#define FF_LOOPS_MAX 8

/* Where the reply going through is: none asked for, its head, a
 * Content-Length body, a chunk's size line, its data, the CRLF after it,
 * the trailer after the last chunk, or a body that ends with the close. */
enum ff_state {
	FF_IDLE,
	FF_HEAD,
	FF_LEN,
	FF_SIZE,
	FF_DATA,
	FF_DATA_END,
	FF_TRAILER,
	FF_EOF
};

struct ff_conn;

/* What an epoll event points at: one side of a connection. */
struct ff_end {
	struct ff_conn *c;
	bool up;
};

struct ff_conn {
	int ep, cfd, ufd;
	uint32_t cmask, umask;
	struct ff_end ce, ue;
	bool dead;
	struct ff_conn *next_dead;
	/* The client's bytes, in_len of them: in[0..req) is the request
	 * going upstream (req 0: none yet), req_off of it written. */
	size_t in_len, req, req_off;
	/* The upstream's bytes read, out_off of them written to the client. */
	size_t out_len, out_off;
	/* The reply's framing. */
	enum ff_state rs;
	size_t left, size, line, head_len;
	bool ext;
	char head[FF_HEAD_MAX + 1];
	char in[FF_BUF];
	char out[FF_BUF];
};

struct ff_loop {
	int ep;
	struct ff_conn *dead;
	pthread_t th;
};

static struct ff_loop loops[FF_LOOPS_MAX];
static int nloops, upstream_port, lfd;

/* The value of header name in head (NUL-terminated), or NULL. */
static const char *ff_header(const char *head, const char *name)
{
	size_t nl = strlen(name);

	for (const char *p = strstr(head, "\r\n"); p; p = strstr(p, "\r\n")) {
		p += 2;
		if (strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
			p += nl + 1;
			while (*p == ' ')
				p++;
			return p;
		}
	}
	return NULL;
}

/* The reply's head is whole in c->head: how its body is framed. */
static void ff_head_done(struct ff_conn *c)
{
	const char *te, *cl;

	c->head[c->head_len] = 0;
	te = ff_header(c->head, "transfer-encoding");
	cl = ff_header(c->head, "content-length");
	if (te && strncasecmp(te, "chunked", 7) == 0) {
		c->rs = FF_SIZE;
		c->size = 0;
		c->ext = false;
	} else if (cl) {
		c->left = strtoul(cl, NULL, 10);
		c->rs = c->left ? FF_LEN : FF_IDLE;
	} else {
		c->rs = FF_EOF;
	}
}

/* Follows the framing over n bytes of the reply: 1 when they end it
 * (exactly), 0 when more is to come, -1 when they are not a reply. */
static int ff_reply(struct ff_conn *c, const char *p, size_t n)
{
	size_t i = 0;

	while (i < n) {
		size_t take;
		char ch;

		switch (c->rs) {
		case FF_IDLE:
			return -1;
		case FF_HEAD: {
			size_t from = c->head_len > 3 ? c->head_len - 3 : 0;
			char *e;

			take = n - i;
			if (take > FF_HEAD_MAX - c->head_len)
				take = FF_HEAD_MAX - c->head_len;
			memcpy(c->head + c->head_len, p + i, take);
			e = memmem(c->head + from, c->head_len + take - from,
				   "\r\n\r\n", 4);
			if (!e) {
				if (c->head_len + take == FF_HEAD_MAX)
					return -1;
				c->head_len += take;
				i += take;
				break;
			}
			i += (size_t)(e + 4 - c->head) - c->head_len;
			c->head_len = (size_t)(e + 4 - c->head);
			ff_head_done(c);
			break;
		}
		case FF_LEN:
		case FF_DATA:
			take = n - i < c->left ? n - i : c->left;
			c->left -= take;
			i += take;
			if (c->left == 0)
				c->rs = c->rs == FF_LEN ? FF_IDLE : FF_DATA_END;
			break;
		case FF_SIZE:
			ch = p[i++];
			if (ch == '\n') {
				c->left = c->size;
				c->line = 0;
				c->rs = c->size ? FF_DATA : FF_TRAILER;
			} else if (ch == ';') {
				c->ext = true;
			} else if (ch != '\r' && !c->ext) {
				const char *hex = "0123456789abcdef";
				const char *d = strchr(hex, ch | 0x20);

				if (!d || !*d || c->size > SIZE_MAX / 32)
					return -1;
				c->size = c->size * 16 + (size_t)(d - hex);
			}
			break;
		case FF_DATA_END:
			if (p[i++] == '\n') {
				c->rs = FF_SIZE;
				c->size = 0;
				c->ext = false;
			}
			break;
		case FF_TRAILER:
			ch = p[i++];
			if (ch == '\n') {
				if (c->line == 0)
					c->rs = FF_IDLE;
				c->line = 0;
			} else if (ch != '\r') {
				c->line++;
			}
			break;
		case FF_EOF:
			i = n;
			break;
		}
		if (c->rs == FF_IDLE)
			return i == n ? 1 : -1;
	}
	return 0;
}

/* The length of the whole request at the start of c->in, 0 while it is
 * not all there, or -1 when it cannot be. */
static long ff_request(struct ff_conn *c)
{
	char head[4096];
	const char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4), *cl;
	size_t hl, total;

	if (!end)
		return c->in_len < sizeof(head) ? 0 : -1;
	hl = (size_t)(end - c->in) + 4;
	if (hl >= sizeof(head))
		return -1;
	memcpy(head, c->in, hl);
	head[hl] = 0;
	cl = ff_header(head, "content-length");
	total = hl + (cl ? strtoul(cl, NULL, 10) : 0);
	if (total > FF_BUF)
		return -1;
	return c->in_len < total ? 0 : (long)total;
}

static int ff_connect_up(struct ff_conn *c)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)upstream_port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int one = 1;
	struct epoll_event ev = {EPOLLIN | EPOLLOUT, {.ptr = &c->ue}};

	c->ufd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->ufd < 0)
		return -1;
	setsockopt(c->ufd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(c->ufd, (struct sockaddr *)&a, sizeof(a)) < 0 &&
	    errno != EINPROGRESS)
		return -1;
	c->umask = ev.events;
	return epoll_ctl(c->ep, EPOLL_CTL_ADD, c->ufd, &ev);
}

/* Starts the next request when no reply is on its way and it is whole,
 * and writes what is left of it upstream. */
/* Writes buf[*off, len) to fd as far as it takes it (a non-blocking
 * socket); *off advances.  0 (done, or EAGAIN) or -1 (the peer went). */
static int ff_write_some(int fd, const char *buf, size_t len, size_t *off)
{
	while (*off < len) {
		ssize_t n = write(fd, buf + *off, len - *off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n <= 0)
			return -1;
		*off += (size_t)n;
	}
	return 0;
}

static int ff_send_up(struct ff_conn *c)
{
	if (c->req == 0 && c->rs == FF_IDLE) {
		long n = ff_request(c);

		if (n <= 0)
			return (int)n;
		c->req = (size_t)n;
		c->req_off = 0;
		c->rs = FF_HEAD;
		c->head_len = 0;
		if (c->ufd < 0 && ff_connect_up(c) < 0)
			return -1;
	}
	if (ff_write_some(c->ufd, c->in, c->req, &c->req_off) < 0)
		return -1;
	if (c->req_off < c->req)
		return 0;
	if (c->req) {
		memmove(c->in, c->in + c->req, c->in_len - c->req);
		c->in_len -= c->req;
		c->req = c->req_off = 0;
	}
	return 0;
}

static int ff_flush_client(struct ff_conn *c)
{
	if (ff_write_some(c->cfd, c->out, c->out_len, &c->out_off) < 0)
		return -1;
	if (c->out_off < c->out_len)
		return 0;
	c->out_len = c->out_off = 0;
	return 0;
}

static int ff_from_client(struct ff_conn *c)
{
	ssize_t n = read(c->cfd, c->in + c->in_len, FF_BUF - c->in_len);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n <= 0)
		return -1;
	c->in_len += (size_t)n;
	return 0;
}

/* What the upstream sent, straight on to the client. */
static int ff_from_up(struct ff_conn *c)
{
	ssize_t n;

	if (c->out_off < c->out_len)
		return 0;
	n = read(c->ufd, c->out, FF_BUF);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n <= 0) {
		/* Between replies: reconnect on the next request.  A reply
		 * that ends with the close ends the client's too. */
		if (n == 0 && c->rs == FF_IDLE && c->req == 0) {
			close(c->ufd);
			c->ufd = -1;
			c->umask = 0;
			return 0;
		}
		return -1;
	}
	if (ff_reply(c, c->out, (size_t)n) < 0)
		return -1;
	c->out_len = (size_t)n;
	c->out_off = 0;
	return ff_flush_client(c);
}

/* Each side's epoll interest from what waits, changed only when it must:
 * the client's requests read while there is room, the upstream's replies
 * while the client has taken all before. */
static int ff_update(struct ff_conn *c)
{
	bool pending = c->out_off < c->out_len;
	uint32_t cm = (c->in_len < FF_BUF ? EPOLLIN : 0) |
		      (pending ? EPOLLOUT : 0),
		 um = (pending ? 0 : EPOLLIN) |
		      (c->req_off < c->req ? EPOLLOUT : 0);

	if (cm != c->cmask) {
		struct epoll_event ev = {cm, {.ptr = &c->ce}};

		if (epoll_ctl(c->ep, EPOLL_CTL_MOD, c->cfd, &ev) < 0)
			return -1;
		c->cmask = cm;
	}
	if (c->ufd >= 0 && um != c->umask) {
		struct epoll_event ev = {um, {.ptr = &c->ue}};

		if (epoll_ctl(c->ep, EPOLL_CTL_MOD, c->ufd, &ev) < 0)
			return -1;
		c->umask = um;
	}
	return 0;
}

/* Closed now, freed after the events of this wait (some may be its). */
static void ff_kill(struct ff_loop *l, struct ff_conn *c)
{
	close(c->cfd);
	if (c->ufd >= 0)
		close(c->ufd);
	c->dead = true;
	c->next_dead = l->dead;
	l->dead = c;
}

/* Accepts what waits, dealing the connections to the loops in turn. */
static void ff_accept(void)
{
	static unsigned next;

	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		int one = 1;
		struct ff_conn *c;
		struct epoll_event ev = {EPOLLIN, {.ptr = NULL}};

		if (fd < 0)
			return;
		c = malloc(sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		memset(c, 0, offsetof(struct ff_conn, head));
		c->ep = loops[next++ % (unsigned)nloops].ep;
		c->cfd = fd;
		c->ufd = -1;
		c->cmask = EPOLLIN;
		c->ce = (struct ff_end){c, false};
		c->ue = (struct ff_end){c, true};
		c->rs = FF_IDLE;
		ev.data.ptr = &c->ce;
		if (epoll_ctl(c->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
			close(fd);
			free(c);
		}
	}
}

static void *ff_loop(void *p)
{
	struct ff_loop *l = p;
	struct epoll_event evs[64];

	for (;;) {
		int n = epoll_wait(l->ep, evs, 64, -1);

		for (int i = 0; i < n; i++) {
			struct ff_end *e = evs[i].data.ptr;
			uint32_t what = evs[i].events;
			struct ff_conn *c;
			int r = 0;

			if (!e) {
				ff_accept();
				continue;
			}
			c = e->c;
			if (c->dead)
				continue;
			if (e->up) {
				if (what & (EPOLLIN | EPOLLHUP | EPOLLERR))
					r = ff_from_up(c);
			} else {
				if (what & (EPOLLOUT | EPOLLERR))
					r = ff_flush_client(c);
				if (r == 0 &&
				    (what & (EPOLLIN | EPOLLHUP | EPOLLERR)))
					r = ff_from_client(c);
			}
			if (r == 0)
				r = ff_send_up(c);
			if (r == 0)
				r = ff_update(c);
			if (r < 0)
				ff_kill(l, c);
		}
		while (l->dead) {
			struct ff_conn *c = l->dead;

			l->dead = c->next_dead;
			free(c);
		}
	}
	return NULL;
}

pid_t fast_forward_start(int port, int threads, int *ret_port)
{
	pid_t pid;

	if (threads < 1 || threads > FF_LOOPS_MAX)
		return -1;
	lfd = test_listen_loopback(ret_port);
	if (lfd < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		struct epoll_event ev = {EPOLLIN, {.ptr = NULL}};

		signal(SIGPIPE, SIG_IGN);
		signal(SIGTERM, SIG_DFL);
		upstream_port = port;
		nloops = threads;
		for (int i = 0; i < threads; i++) {
			loops[i].ep = epoll_create1(EPOLL_CLOEXEC);
			if (loops[i].ep < 0)
				_exit(1);
		}
		if (epoll_ctl(loops[0].ep, EPOLL_CTL_ADD, lfd, &ev) < 0)
			_exit(1);
		for (int i = 1; i < threads; i++)
			if (pthread_create(&loops[i].th, NULL, ff_loop,
					   &loops[i]) != 0)
				_exit(1);
		ff_loop(&loops[0]);
		_exit(0);
	}
	close(lfd);
	return pid;
}

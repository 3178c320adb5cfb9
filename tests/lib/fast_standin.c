/*
 * The broker benchmark's provider stand-in (tests/lib/fast_standin.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "tests/lib/testlib.h"
#include "tests/lib/fast_standin.h"

#define FS_CONNS_MAX 1024
#define FS_IN_MAX 16384
#define FS_OUT_MAX 16384

struct fs_conn {
	int fd;
	size_t in_len, out_len, out_off;
	bool close_after;
	/* A stream held after its first event until wait exists. */
	bool held;
	size_t piece;
	char wait[256];
	char in[FS_IN_MAX];
	char out[FS_OUT_MAX];
};

static struct fs_conn *conns[FS_CONNS_MAX];

static const char *const fs_events[] = {
    "event: message_start\ndata: {\"type\": \"message_start\", \"message\": "
    "{\"id\": \"m1\", \"usage\": {\"input_tokens\": 100, \"output_tokens\": "
    "1}}}\n\n",
    "event: content_block_delta\ndata: {\"type\": \"content_block_delta\", "
    "\"index\": 0, \"delta\": {\"type\": \"text_delta\", \"text\": "
    "\"hel\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\": \"content_block_delta\", "
    "\"index\": 0, \"delta\": {\"type\": \"text_delta\", \"text\": "
    "\"lo\"}}\n\n",
    "event: message_delta\ndata: {\"type\": \"message_delta\", \"usage\": "
    "{\"output_tokens\": 20}}\n\n",
    "event: message_delta\ndata: {\"type\": \"message_delta\", \"usage\": "
    "{\"output_tokens\": 50}}\n\n",
    "event: message_stop\ndata: {\"type\": \"message_stop\"}\n\n",
};

/* A whole Anthropic message: the peer gateway the bench runs beside spd
 * (Portkey's) refuses one without its id, role and model. */
static const char fs_plain[] =
    "{\"id\": \"msg_standin\", \"type\": \"message\", \"role\": "
    "\"assistant\", \"model\": \"test-model\", \"content\": [{\"type\": "
    "\"text\", \"text\": \"hello\"}], \"stop_reason\": \"end_turn\", "
    "\"usage\": {\"input_tokens\": 100, \"output_tokens\": 50}}";

/* Writes what c holds; what the socket does not take waits for EPOLLOUT. */
static int fs_flush(int ep, struct fs_conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n =
		    write(c->fd, c->out + c->out_off, c->out_len - c->out_off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			struct epoll_event ev = {EPOLLIN | EPOLLOUT,
						 {.ptr = c}};
			return epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
		}
		if (n <= 0)
			return -1;
		c->out_off += (size_t)n;
	}
	c->out_len = c->out_off = 0;
	return 0;
}

/* Queues bytes, written at once when nothing waits (one write each, so
 * that each piece is its own segment, as a provider's events are). */
static int fs_send(int ep, struct fs_conn *c, const char *p, size_t n)
{
	if (c->out_len + n > FS_OUT_MAX)
		return -1;
	memcpy(c->out + c->out_len, p, n);
	c->out_len += n;
	if (c->out_off == 0 && c->out_len == n)
		return fs_flush(ep, c);
	return 0;
}

static int fs_chunk(int ep, struct fs_conn *c, const char *p, size_t n)
{
	char b[64 + 1024];
	int len = snprintf(b, sizeof(b), "%zx\r\n%.*s\r\n", n, (int)n, p);

	return len > 0 && (size_t)len < sizeof(b)
		   ? fs_send(ep, c, b, (size_t)len)
		   : -1;
}

/* The events from the first-th on, in pieces; the last chunk too. */
static int fs_events_from(int ep, struct fs_conn *c, size_t first)
{
	for (size_t i = first; i < sizeof(fs_events) / sizeof(fs_events[0]);
	     i++) {
		const char *e = fs_events[i];
		size_t len = strlen(e), step = c->piece ? c->piece : len;

		for (size_t j = 0; j < len; j += step)
			if (fs_chunk(ep, c, e + j,
				     len - j < step ? len - j : step) < 0)
				return -1;
		if (i == 0 && c->wait[0]) {
			c->held = true;
			return 0;
		}
	}
	return fs_send(ep, c, "0\r\n\r\n", 5);
}

/* The value of header name in head (NUL-terminated), copied to v. */
static bool fs_header(const char *head, const char *name, char *v, size_t vn)
{
	size_t nl = strlen(name);

	for (const char *p = strstr(head, "\r\n"); p; p = strstr(p, "\r\n")) {
		p += 2;
		if (strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
			const char *s = p + nl + 1, *e;

			while (*s == ' ')
				s++;
			e = strstr(s, "\r\n");
			if (!e)
				return false;
			snprintf(v, vn, "%.*s", (int)(e - s), s);
			return true;
		}
	}
	return false;
}

/* Answers every whole request c holds; -1 closes c. */
static int fs_serve(int ep, struct fs_conn *c)
{
	for (;;) {
		char *end, v[256], head[4096];
		size_t hl, body = 0, total;
		bool stream;

		if (c->held)
			return 0;
		end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
		if (!end)
			return c->in_len < FS_IN_MAX ? 0 : -1;
		hl = (size_t)(end - c->in) + 4;
		if (hl >= sizeof(head))
			return -1;
		memcpy(head, c->in, hl);
		head[hl] = 0;
		if (fs_header(head, "content-length", v, sizeof(v)))
			body = strtoul(v, NULL, 10);
		total = hl + body;
		if (total > FS_IN_MAX)
			return -1;
		if (c->in_len < total)
			return 0;
		stream = fs_header(head, "x-standin-mode", v, sizeof(v)) &&
			 strcmp(v, "stream") == 0;
		c->close_after = fs_header(head, "connection", v, sizeof(v)) &&
				 strcasecmp(v, "close") == 0;
		c->piece = 7;
		if (fs_header(head, "x-standin-piece", v, sizeof(v)))
			c->piece = strtoul(v, NULL, 10);
		c->wait[0] = 0;
		fs_header(head, "x-standin-wait", c->wait, sizeof(c->wait));
		memmove(c->in, c->in + total, c->in_len - total);
		c->in_len -= total;
		if (stream) {
			static const char h[] =
			    "HTTP/1.1 200 OK\r\ncontent-type: "
			    "text/event-stream\r\ntransfer-encoding: "
			    "chunked\r\nrequest-id: req_standin\r\n\r\n";

			if (fs_send(ep, c, h, sizeof(h) - 1) < 0 ||
			    fs_events_from(ep, c, 0) < 0)
				return -1;
		} else {
			char r[512];
			int n = snprintf(r, sizeof(r),
					 "HTTP/1.1 200 OK\r\ncontent-type: "
					 "application/json\r\ncontent-length: "
					 "%zu\r\nrequest-id: "
					 "req_standin\r\n\r\n%s",
					 sizeof(fs_plain) - 1, fs_plain);
			if (n <= 0 || (size_t)n >= sizeof(r) ||
			    fs_send(ep, c, r, (size_t)n) < 0)
				return -1;
		}
		if (c->close_after && !c->held)
			return -1;
	}
}

static void fs_close(struct fs_conn *c)
{
	for (size_t i = 0; i < FS_CONNS_MAX; i++)
		if (conns[i] == c)
			conns[i] = NULL;
	close(c->fd);
	free(c);
}

static void fs_accept(int ep, int lfd)
{
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		int one = 1;
		struct fs_conn *c;
		size_t i;

		if (fd < 0)
			return;
		for (i = 0; i < FS_CONNS_MAX && conns[i]; i++)
			;
		c = i < FS_CONNS_MAX ? calloc(1, sizeof(*c)) : NULL;
		if (!c) {
			close(fd);
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c->fd = fd;
		conns[i] = c;
		struct epoll_event ev = {EPOLLIN, {.ptr = c}};
		if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
			fs_close(c);
	}
}

/* Held streams whose file now exists get the rest of their events. */
static void fs_release(int ep)
{
	for (size_t i = 0; i < FS_CONNS_MAX; i++) {
		struct fs_conn *c = conns[i];

		if (!c || !c->held || access(c->wait, F_OK) < 0)
			continue;
		c->held = false;
		c->wait[0] = 0;
		if (fs_events_from(ep, c, 1) < 0 || c->close_after ||
		    fs_serve(ep, c) < 0)
			fs_close(c);
	}
}

static void fs_loop(int lfd)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {EPOLLIN, {.ptr = NULL}}, evs[64];

	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) < 0)
		_exit(1);
	for (;;) {
		int n = epoll_wait(ep, evs, 64, 10);

		for (int i = 0; i < n; i++) {
			struct fs_conn *c = evs[i].data.ptr;
			ssize_t r;

			if (!c) {
				fs_accept(ep, lfd);
				continue;
			}
			if ((evs[i].events & EPOLLOUT) && fs_flush(ep, c) < 0) {
				fs_close(c);
				continue;
			}
			if (!(evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
				continue;
			r = read(c->fd, c->in + c->in_len,
				 FS_IN_MAX - c->in_len);
			if (r == 0 ||
			    (r < 0 && errno != EAGAIN && errno != EINTR) ||
			    (r > 0 &&
			     (c->in_len += (size_t)r, fs_serve(ep, c) < 0)))
				fs_close(c);
		}
		fs_release(ep);
	}
}

pid_t fast_standin_start(int *ret_port)
{
	int lfd = test_listen_loopback(ret_port);
	pid_t pid;

	if (lfd < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		signal(SIGPIPE, SIG_IGN);
		signal(SIGTERM, SIG_DFL);
		fs_loop(lfd);
		_exit(0);
	}
	close(lfd);
	return pid;
}

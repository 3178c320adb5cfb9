/*
 * libcurl's multi interface on spd's loop (daemon/broker/gateway_priv.h):
 * the sockets curl asks to be watched, its timer, and the easy handles
 * kept from call to call.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "daemon/broker/gateway.h"
#include "daemon/broker/gateway_priv.h"
#include "daemon/broker/gw_curl.h"
#include "daemon/spd.h"

/* A socket of curl's (gateway_priv.h, g->socks): made at its first
 * sock_cb, closed with the socket (sock_close).  Between two calls on a
 * kept-alive provider connection curl does not watch the socket
 * (CURL_POLL_REMOVE); its handle stays as it was, so the next call on it
 * costs no epoll_ctl, and an event while unwatched (the provider closed
 * it) stops it: curl finds the connection dead at its next use. */
struct gw_sock {
	uv_poll_t poll;
	curl_socket_t fd;
	struct gateway *g;
	int events;	       /* what the handle polls for, when polling */
	bool watched, polling; /* curl watches it; the handle is started */
};

static void on_poll_closed(uv_handle_t *h)
{
	struct gw_sock *s = h->data;
	struct gateway *g = s->g;

	free(s);
	g->open_handles--;
	gw_maybe_free(g);
}

/* An easy handle done with (removed from the multi) kept for the next
 * call, or cleaned up: nothing of its call stays reachable from it (the
 * headers' list and the body are freed with the call). */
void gw_easy_put(struct gateway *g, CURL *e)
{
	if (g->stopping || g->n_easy_kept >= GATEWAY_EASY_KEPT) {
		gw_curlf.easy_cleanup(e);
		return;
	}
	gw_curlf.easy_setopt(e, CURLOPT_PRIVATE, NULL);
	gw_curlf.easy_setopt(e, CURLOPT_HTTPHEADER, NULL);
	gw_curlf.easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
	gw_curlf.easy_setopt(e, CURLOPT_POSTFIELDS, "");
	gw_curlf.easy_setopt(e, CURLOPT_WRITEDATA, NULL);
	gw_curlf.easy_setopt(e, CURLOPT_HEADERDATA, NULL);
	g->easy_kept[g->n_easy_kept++] = e;
}

/* Every kept easy handle and the multi (it closes the kept provider
 * connections, through sock_close), once no call is left. */
void gw_multi_release(struct gateway *g)
{
	while (g->n_easy_kept)
		gw_curlf.easy_cleanup(g->easy_kept[--g->n_easy_kept]);
	if (g->multi)
		gw_curlf.multi_cleanup(g->multi);
	g->multi = NULL;
	/* curl closed every socket of its own through sock_close; a
	 * handle left would keep the gateway from being freed. */
	for (size_t i = 0; i < g->n_socks; i++)
		if (g->socks[i]) {
			uv_close((uv_handle_t *)&g->socks[i]->poll,
				 on_poll_closed);
			g->socks[i] = NULL;
		}
}

/* curl acts on fd (or its timeouts), the calls it ended are settled,
 * and what the calls it read got is written. */
static void curl_act(struct gateway *g, curl_socket_t fd, int flags)
{
	int running;

	gw_curlf.multi_socket_action(g->multi, fd, flags, &running);
	gw_check_done(g);
	gw_flush_dirty(g);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
	struct gw_sock *s = h->data;
	int flags = 0;

	if (!s->watched) {
		/* A kept connection between calls: the provider closed it
		 * (or sent what nobody asked for).  Not polled any more;
		 * curl finds it dead when it next looks at it. */
		uv_poll_stop(&s->poll);
		s->polling = false;
		return;
	}
	if (status < 0)
		flags = CURL_CSELECT_ERR;
	if (events & UV_READABLE)
		flags |= CURL_CSELECT_IN;
	if (events & UV_WRITABLE)
		flags |= CURL_CSELECT_OUT;
	curl_act(s->g, s->fd, flags);
}

static int sock_cb(CURL *e, curl_socket_t fd, int what, void *userp,
		   void *socketp)
{
	struct gateway *g = userp;
	struct gw_sock *s =
	    fd >= 0 && (size_t)fd < g->n_socks ? g->socks[fd] : NULL;
	int ev = 0;

	(void)e;
	(void)socketp;
	if (what == CURL_POLL_REMOVE) {
		/* Left as it is until curl uses or closes the socket. */
		if (s)
			s->watched = false;
		return 0;
	}
	if (!s) {
		if (fd < 0)
			return -1;
		if ((size_t)fd >= g->n_socks) {
			size_t n = (size_t)fd + 16;
			struct gw_sock **t =
			    realloc(g->socks, n * sizeof(*g->socks));

			if (!t)
				return -1;
			memset(t + g->n_socks, 0,
			       (n - g->n_socks) * sizeof(*t));
			g->socks = t;
			g->n_socks = n;
		}
		s = calloc(1, sizeof(*s));
		if (!s)
			return -1;
		s->fd = fd;
		s->g = g;
		if (uv_poll_init_socket(g->spd->loop, &s->poll, fd) < 0) {
			free(s);
			return -1;
		}
		s->poll.data = s;
		g->open_handles++;
		g->socks[fd] = s;
	}
	s->watched = true;
	if (what & CURL_POLL_IN)
		ev |= UV_READABLE;
	if (what & CURL_POLL_OUT)
		ev |= UV_WRITABLE;
	/* Already polling for that: nothing to change (each start of a
	 * poll handle is two epoll_ctl calls). */
	if (s->polling && s->events == ev)
		return 0;
	if (uv_poll_start(&s->poll, ev, on_poll) < 0)
		return -1;
	s->events = ev;
	s->polling = true;
	return 0;
}

/* curl closes one of its sockets (CURLOPT_CLOSESOCKETFUNCTION): its poll
 * handle goes first, the fd then, so no event of the fd's next owner
 * ever reaches curl. */
static int sock_close(void *clientp, curl_socket_t fd)
{
	struct gateway *g = clientp;
	struct gw_sock *s =
	    fd >= 0 && (size_t)fd < g->n_socks ? g->socks[fd] : NULL;

	if (s) {
		g->socks[fd] = NULL;
		uv_close((uv_handle_t *)&s->poll, on_poll_closed);
	}
	return close(fd);
}

static void on_curl_timer(uv_timer_t *t)
{
	curl_act(t->data, CURL_SOCKET_TIMEOUT, 0);
}

static int timer_cb(CURLM *m, long timeout_ms, void *userp)
{
	struct gateway *g = userp;

	if (timeout_ms < 0)
		uv_timer_stop(&g->curl_timer);
	else
		uv_timer_start(&g->curl_timer, on_curl_timer,
			       (uint64_t)timeout_ms, 0);
	return 0;
}

/*
 * libcurl and its TLS library are loaded and started with the first call
 * to a provider, not with spd (daemon/broker/gw_curl.h): an spd that
 * brokers no call never maps their pages, and spd idles within its
 * 10 MiB.  Returns 0, -ELIBACC when libcurl cannot be loaded (why in
 * g->curl_err) or -ENOMEM.
 */
int gw_curl(struct gateway *g)
{
	if (g->multi)
		return 0;
	if (gw_curl_load(g->curl_err, sizeof(g->curl_err)) < 0)
		return -ELIBACC;
	g->multi = gw_curlf.multi_init();
	if (!g->multi)
		return -ENOMEM;
	gw_curlf.multi_setopt(g->multi, CURLMOPT_SOCKETFUNCTION, sock_cb);
	gw_curlf.multi_setopt(g->multi, CURLMOPT_SOCKETDATA, g);
	gw_curlf.multi_setopt(g->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
	gw_curlf.multi_setopt(g->multi, CURLMOPT_TIMERDATA, g);
	gw_curlf.multi_setopt(g->multi, CURLMOPT_MAXCONNECTS,
			      (long)GATEWAY_PROVIDER_CONNS_KEPT);
	return 0;
}

/* An easy handle for a call: one kept from an ended call, or a new one
 * with the options every call has; NULL on ENOMEM. */
CURL *gw_easy_get(struct gateway *g)
{
	CURL *e;

	if (g->n_easy_kept)
		return g->easy_kept[--g->n_easy_kept];
	e = gw_curlf.easy_init();
	if (!e)
		return NULL;
	gw_curlf.easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	gw_curlf.easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	gw_curlf.easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
	gw_curlf.easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
	gw_curlf.easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	gw_curlf.easy_setopt(e, CURLOPT_POST, 1L);
	gw_curlf.easy_setopt(e, CURLOPT_CONNECTTIMEOUT,
			     (long)GATEWAY_CONNECT_TIMEOUT_S);
	gw_curlf.easy_setopt(e, CURLOPT_NOPROXY, "*");
	/* Each streamed event is a small packet: no Nagle towards the
	 * provider either (curl's default, said here). */
	gw_curlf.easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
	/* Its sockets' poll handles live as long as they (sock_close). */
	gw_curlf.easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, sock_close);
	gw_curlf.easy_setopt(e, CURLOPT_CLOSESOCKETDATA, g);
	return e;
}

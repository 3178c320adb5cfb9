/*
 * The broker endpoint's HTTP/1.1 connections (daemon/broker/gateway_priv.h):
 * accepting, reading requests one after another on a kept-alive
 * connection (each parsed whole by a fresh http_request, so every
 * request passes the same checks), the timeouts, and writing replies, a
 * streamed chunk in one write.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <uv.h>

#include "daemon/broker/gateway.h"
#include "daemon/broker/gateway_priv.h"
#include "daemon/spd.h"

const char *gw_reason(int status)
{
	switch (status) {
	case 200:
		return "OK";
	case 400:
		return "Bad Request";
	case 401:
		return "Unauthorized";
	case 402:
		return "Payment Required";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 408:
		return "Request Timeout";
	case 413:
		return "Payload Too Large";
	case 431:
		return "Request Header Fields Too Large";
	case 500:
		return "Internal Server Error";
	case 501:
		return "Not Implemented";
	case 502:
		return "Bad Gateway";
	case 503:
		return "Service Unavailable";
	case 504:
		return "Gateway Timeout";
	default:
		return status < 300   ? "OK"
		       : status < 500 ? "Client Error"
				      : "Server Error";
	}
}

/* One uv_write: up to five pieces, the owned ones freed once written. */
struct gw_write {
	uv_write_t w;
	struct gw_conn *c;
	char *own[2];
	char size[24];
};

static void on_conn_handle_closed(uv_handle_t *h)
{
	struct gw_conn *c = h->data;
	struct gateway *g = c->g;

	if (--c->open_handles > 0)
		return;
	http_request_free(&c->req);
	buf_free(&c->pending);
	if (c->prev)
		c->prev->next = c->next;
	else
		g->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	g->n_conns--;
	if (!c->on_pipe)
		g->n_tcp--;
	free(c);
	gw_maybe_free(g);
}

void gw_conn_close(struct gw_conn *c)
{
	if (c->closing)
		return;
	c->closing = true;
	/* Its body's bytes and its place in its turn's quota go now: the
	 * turn may be freed before the handles' close callbacks run. */
	gw_body_account(c);
	gw_conn_attach(c, NULL);
	if (c->call) {
		/* The call goes on without its client: the provider's usage
		 * is still read and charged. */
		gw_call_detach(c->call, true);
		c->call = NULL;
	}
	uv_close((uv_handle_t *)&c->timer, on_conn_handle_closed);
	uv_close((uv_handle_t *)&c->h, on_conn_handle_closed);
}

bool gw_conn_hung_up(struct gw_conn *c)
{
	uv_os_fd_t fd;
	char b;
	ssize_t n;

	if (c->closing || uv_fileno((uv_handle_t *)&c->h, &fd) < 0)
		return false;
	n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

bool gw_conn_keeps(const struct gw_conn *c)
{
	return c->keep && !c->g->stopping;
}

static void on_written(uv_write_t *w, int status)
{
	struct gw_write *gw = (struct gw_write *)w;

	/* The client is gone (EPIPE, ECONNRESET): nothing more is written
	 * to it; the call goes on for its usage.  (Writes cancelled by the
	 * close itself come back here too.) */
	if (status < 0 && status != UV_ECANCELED && gw->c)
		gw_conn_close(gw->c);
	free(gw->own[0]);
	free(gw->own[1]);
	free(gw);
}

/* Take b's memory (b is left empty). */
static char *steal(struct buf *b, uv_buf_t *u)
{
	char *d = b->data;

	*u = uv_buf_init(d, (unsigned)b->len);
	b->data = NULL;
	b->len = b->cap = 0;
	return d;
}

int gw_conn_chunk(struct gw_conn *c, struct buf *head, struct buf *data,
		  bool last)
{
	struct gw_write *w;
	uv_buf_t b[5];
	unsigned nb = 0, no = 0;

	if (!c || c->closing || c->shut)
		return -EPIPE;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	if (head && head->len)
		w->own[no++] = steal(head, &b[nb++]);
	if (data && data->len) {
		snprintf(w->size, sizeof(w->size), "%zx\r\n", data->len);
		b[nb++] = uv_buf_init(w->size, (unsigned)strlen(w->size));
		w->own[no++] = steal(data, &b[nb++]);
		b[nb++] = uv_buf_init((char *)"\r\n", 2);
	}
	if (last)
		b[nb++] = uv_buf_init((char *)"0\r\n\r\n", 5);
	w->c = c; /* the callback never runs before uv_write returns */
	if (nb == 0 ||
	    uv_write(&w->w, (uv_stream_t *)&c->h, b, nb, on_written) < 0) {
		w->c = NULL;
		on_written(&w->w, 0);
		return nb == 0 ? 0 : -EPIPE;
	}
	return 0;
}

static void on_shutdown(uv_shutdown_t *s, int status)
{
	struct gw_conn *c = s->data;

	(void)status;
	free(s);
	gw_conn_close(c);
}

static void on_idle_timeout(uv_timer_t *t)
{
	/* Nothing of a next request came: the client's pool lets it go. */
	gw_conn_close(t->data);
}

void gw_on_request_timeout(uv_timer_t *t)
{
	struct gw_conn *c = t->data;

	if (!c->req.complete && !c->shut)
		gw_refuse(c, NULL, 408, "TIMEOUT", NULL,
			  "the request did not arrive in time");
}

/*
 * Parse what is pending into c->req; a complete request is answered
 * (gw_handle_request), the bytes after it kept for the next one.  A
 * refusal of the framing or the head ends the connection: nothing after
 * a request spd could not read can be trusted to start where it seems.
 */
static void conn_parse(struct gw_conn *c)
{
	int r;

	if (c->closing || c->shut || c->req.complete || c->req.failed ||
	    c->pending.len == 0)
		return;
	if (c->idle) {
		/* The next request has begun: it has as long as the first. */
		c->idle = false;
		uv_timer_start(&c->timer, gw_on_request_timeout,
			       GATEWAY_HEAD_TIMEOUT_MS, 0);
	}
	/* A body being read is held in memory: within its turn's share
	 * and the gateway's, or refused before it grows. */
	if (c->req.head_done && !gw_body_room(c, c->pending.len)) {
		r = -ECANCELED;
	} else {
		r = http_request_feed(&c->req, c->pending.data, c->pending.len);
		gw_body_account(c);
	}
	if (r == 0) {
		buf_reset(&c->pending);
		return;
	}
	uv_timer_stop(&c->timer);
	if (r == -ECANCELED) {
		/* Refused on its head (or its body's size): nothing more of
		 * it is read; the connection ends with the answer. */
		buf_reset(&c->pending);
		c->req.failed = true;
		gw_body_account(c);
		gw_refuse(c, c->refusal.turn, c->refusal.status,
			  c->refusal.code, NULL, c->refusal.msg);
		return;
	}
	if (r < 0) {
		buf_reset(&c->pending);
		gw_refuse(c, NULL, c->req.status, "BAD-REQUEST", NULL,
			  c->req.why);
		return;
	}
	buf_consume(&c->pending, c->req.used);
	c->keep = c->req.keep_alive;
	if (!c->keep)
		buf_reset(&c->pending); /* "Connection: close": the last */
	gw_handle_request(c);
}

static void on_resume(uv_timer_t *t)
{
	conn_parse(t->data);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
	static char slab[64 * 1024];

	(void)h;
	(void)suggested;
	*b = uv_buf_init(slab, sizeof(slab));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
	struct gw_conn *c = s->data;

	if (n < 0) {
		/* The client went away (or sent its last byte).  Between two
		 * requests that is a client done with the connection (what
		 * it pipelined before going is not answered: nobody reads
		 * it). */
		if (c->idle) {
			gw_conn_close(c);
			return;
		}
		if (c->req.complete || c->req.failed || n != UV_EOF) {
			if (!c->shut)
				gw_conn_close(c);
			return;
		}
		uv_read_stop(s);
		c->reading = false;
		gw_refuse(c, NULL, 400, "BAD-REQUEST", NULL,
			  "the connection closed before the request was "
			  "complete");
		return;
	}
	if (n == 0 || c->req.failed || c->shut || c->closing)
		return; /* after the last request: only EOF matters */
	if (c->req.complete && !c->keep)
		return;
	if (buf_append(&c->pending, b->base, (size_t)n) < 0) {
		gw_conn_close(c);
		return;
	}
	if (c->req.complete) {
		/* Pipelined while this request is answered: held, bounded. */
		if (c->pending.len >= GATEWAY_PIPELINE_MAX) {
			uv_read_stop(s);
			c->reading = false;
		}
		return;
	}
	conn_parse(c);
}

/* The reply is out and the connection kept: a fresh request, read from
 * what is pending (after this turn of the loop: the caller may be in the
 * middle of ending the last call) or from the client. */
static void conn_next(struct gw_conn *c)
{
	c->call = NULL;
	c->keep = false;
	http_request_free(&c->req);
	http_request_init(&c->req, c->body_max);
	c->req.on_head = gw_on_head;
	c->req.on_head_data = c;
	c->idle = true;
	if (c->pending.len)
		uv_timer_start(&c->timer, on_resume, 0, 0);
	else
		uv_timer_start(&c->timer, on_idle_timeout, c->idle_ms, 0);
	if (!c->reading) {
		uv_read_start((uv_stream_t *)&c->h, on_alloc, on_read);
		c->reading = true;
	}
}

void gw_conn_finish(struct gw_conn *c)
{
	uv_shutdown_t *s;

	if (!c || c->closing || c->shut)
		return;
	if (c->call) {
		gw_call_detach(c->call, false);
		c->call = NULL;
	}
	if (gw_conn_keeps(c) && c->req.complete && !c->req.failed) {
		conn_next(c);
		return;
	}
	c->shut = true;
	s = malloc(sizeof(*s));
	if (!s || uv_shutdown(s, (uv_stream_t *)&c->h, on_shutdown) < 0) {
		free(s);
		gw_conn_close(c);
		return;
	}
	s->data = c;
}

void gw_conn_respond(struct gw_conn *c, int status, const char *ctype,
		     const char *body)
{
	struct buf b = BUF_INIT;

	buf_printf(&b,
		   "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: "
		   "%zu\r\n%s\r\n%s",
		   status, gw_reason(status), ctype, strlen(body),
		   gw_conn_keeps(c) ? "" : "Connection: close\r\n", body);
	gw_conn_chunk(c, &b, NULL, false);
	buf_free(&b);
	gw_conn_finish(c);
}

void gw_on_connection(uv_stream_t *server, int status)
{
	struct gateway *g = server->data;
	struct gw_conn *c;
	const struct broker_config *cfg = broker_config(g->spd);

	if (status < 0 || g->stopping)
		return;
	c = calloc(1, sizeof(*c));
	if (!c)
		return;
	c->g = g;
	c->on_pipe = server == (uv_stream_t *)&g->pipe;
	if (server != (uv_stream_t *)&g->tcp && !c->on_pipe) {
		struct gw_listener *l = (struct gw_listener *)(void *)server;

		snprintf(c->bound_turn, sizeof(c->bound_turn), "%s", l->turn);
	}
	if (server != (uv_stream_t *)&g->pipe)
		uv_tcp_init(g->spd->loop, &c->h.tcp);
	else
		uv_pipe_init(g->spd->loop, &c->h.pipe, 0);
	uv_timer_init(g->spd->loop, &c->timer);
	c->h.tcp.data = c;
	c->timer.data = c;
	c->open_handles = 2;
	c->next = g->conns;
	if (g->conns)
		g->conns->prev = c;
	g->conns = c;
	g->n_conns++;
	if (!c->on_pipe)
		g->n_tcp++;
	c->body_max = cfg ? cfg->body_max : BROKER_BODY_MAX;
	c->idle_ms =
	    (cfg ? cfg->keepalive_timeout_s : BROKER_KEEPALIVE_TIMEOUT_S) *
	    (uint64_t)1000;
	http_request_init(&c->req, c->body_max);
	c->req.on_head = gw_on_head;
	c->req.on_head_data = c;
	if (uv_accept(server, (uv_stream_t *)&c->h) < 0) {
		gw_conn_close(c);
		return;
	}
	/* A stream's chunks are small writes: with Nagle each after the
	 * first would wait for the client's delayed ACK. */
	if (server != (uv_stream_t *)&g->pipe)
		uv_tcp_nodelay(&c->h.tcp, 1);
	/* The TCP port and the runs' ports share all but the slots held
	 * back for broker.sock, the operator's. */
	if (g->n_conns > GATEWAY_CONNS_MAX ||
	    (!c->on_pipe &&
	     g->n_tcp > GATEWAY_CONNS_MAX - GATEWAY_CONNS_RESERVED)) {
		gw_refuse(c, NULL, 503, "LIMIT", NULL,
			  "too many connections to the broker");
		return;
	}
	/* A run's port counts against its turn from the start. */
	if (c->bound_turn[0] &&
	    gw_conn_attach(c, broker_turn_by_id(g->spd, c->bound_turn)) < 0) {
		gw_refuse(c, c->refusal.turn, c->refusal.status,
			  c->refusal.code, NULL, c->refusal.msg);
		return;
	}
	uv_timer_start(&c->timer, gw_on_request_timeout,
		       GATEWAY_HEAD_TIMEOUT_MS, 0);
	uv_read_start((uv_stream_t *)&c->h, on_alloc, on_read);
	c->reading = true;
}

/* ---- checks on a request's head and the quotas ------------------- */

/* Refuse on the head: kept in c->refusal until the parser returns. */
static int head_refusal(struct gw_conn *c, const struct broker_turn *t,
			int status, const char *code, const char *msg)
{
	c->refusal.status = status;
	c->refusal.code = code;
	c->refusal.turn = t;
	snprintf(c->refusal.msg, sizeof(c->refusal.msg), "%s", msg);
	return -1;
}

/* The request's key: x-api-key, Gemini's x-goog-api-key or ?key= (in
 * *qkey, allocated, for api GEMINI), or Authorization: Bearer.  NULL for
 * none (*qkey NULL too on ENOMEM). */
static const char *request_key(const struct http_request *q,
			       enum broker_api api, char **qkey)
{
	const char *key = http_request_header(q, "x-api-key");
	const char *auth = http_request_header(q, "authorization");

	*qkey = NULL;
	if (!key && api == BROKER_API_GEMINI) {
		key = http_request_header(q, "x-goog-api-key");
		if (!key) {
			free(gw_query_take_key(q->target, qkey));
			key = *qkey;
		}
	}
	if (!key && auth && strncasecmp(auth, "Bearer ", 7) == 0)
		key = auth + 7;
	return key;
}

struct broker_turn *gw_conn_turn(struct gw_conn *c, const char *key)
{
	struct broker_turn *t =
	    key ? broker_turn_by_key(c->g->spd, key, strlen(key)) : NULL;

	if (t && c->bound_turn[0] && strcmp(t->id, c->bound_turn) != 0)
		t = NULL;
	return t;
}

int gw_conn_attach(struct gw_conn *c, struct broker_turn *t)
{
	char msg[200];

	if (c->turn == t)
		return 0;
	if (c->turn) {
		c->turn->conns--;
		c->turn = NULL;
	}
	if (!t)
		return 0;
	if (t->conns >= GATEWAY_TURN_CONNS_MAX) {
		snprintf(msg, sizeof(msg),
			 "turn %s holds %d connections to the broker, its "
			 "most",
			 t->id, GATEWAY_TURN_CONNS_MAX);
		head_refusal(c, t, 503, "LIMIT", msg);
		return -EDQUOT;
	}
	if (t->session[0] && broker_session_conns(c->g->spd, t->session) >=
				 GATEWAY_SESSION_CONNS_MAX) {
		snprintf(msg, sizeof(msg),
			 "session %.64s holds %d connections to the broker, "
			 "its most",
			 t->session, GATEWAY_SESSION_CONNS_MAX);
		head_refusal(c, t, 503, "LIMIT", msg);
		return -EDQUOT;
	}
	t->conns++;
	c->turn = t;
	return 0;
}

/* The limits of unfinished bodies: c's turn's, and the total of its
 * kind (the sessions' or the operator's). */
static size_t *body_total(struct gw_conn *c)
{
	return c->turn && c->turn->session[0] ? &c->g->body_agents
					      : &c->g->body_operator;
}

bool gw_body_room(struct gw_conn *c, size_t n)
{
	size_t max = c->body_max, held, total;
	char msg[200];

	if (!c->turn)
		return true;
	held = c->turn->body_held - c->body_acct;
	total = *body_total(c) - c->body_acct;
	if (held + c->body_acct + n > GATEWAY_BODIES_TURN * max) {
		snprintf(msg, sizeof(msg),
			 "turn %s is sending more request bytes at once than "
			 "spd holds for one turn (%d x broker.body-max)",
			 c->turn->id, GATEWAY_BODIES_TURN);
		head_refusal(c, c->turn, 503, "LIMIT", msg);
		return false;
	}
	if (c->turn->session[0] &&
	    total + c->body_acct + n > GATEWAY_BODIES_AGENTS * max) {
		snprintf(msg, sizeof(msg),
			 "the sessions' turns are sending more request bytes "
			 "at once than spd holds (%d x broker.body-max)",
			 GATEWAY_BODIES_AGENTS);
		head_refusal(c, c->turn, 503, "LIMIT", msg);
		return false;
	}
	return true;
}

void gw_body_account(struct gw_conn *c)
{
	size_t now = c->turn && !c->closing && c->req.head_done &&
			     !c->req.complete && !c->req.failed
			 ? c->req.body_len
			 : 0;
	size_t *total = body_total(c);

	if (!c->turn) {
		c->body_acct = 0;
		return;
	}
	c->turn->body_held = c->turn->body_held - c->body_acct + now;
	*total = *total - c->body_acct + now;
	c->body_acct = now;
}

int gw_on_head(struct http_request *q, void *data)
{
	struct gw_conn *c = data;
	enum broker_api api;
	bool count_only, stream, had_key;
	char path[GATEWAY_PATH_MAX], model[PRICE_MODEL_NAME_MAX + 1];
	char *qkey;
	const char *key;
	struct broker_turn *t;

	/* What needs no body is decided now: a request refused here never
	 * has its body read or held. */
	if (gw_route(q->target, &api, &count_only, &stream, path, sizeof(path),
		     model, sizeof(model)) < 0)
		return head_refusal(c, NULL, 404, "NOT-FOUND",
				    GATEWAY_ROUTES_MSG);
	if (strcmp(q->method, "POST") != 0)
		return head_refusal(c, NULL, 405, "BAD-REQUEST",
				    "only POST is served on this route");
	key = request_key(q, api, &qkey);
	t = gw_conn_turn(c, key);
	had_key = key != NULL;
	if (qkey)
		explicit_bzero(qkey, strlen(qkey));
	free(qkey);
	if (!t)
		return head_refusal(
		    c, NULL, 401, "UNAUTHORIZED",
		    had_key ? "the key is not a live turn key of this spd "
			      "(unknown, ended or expired)"
			    : "no key: send the turn key as x-api-key, "
			      "x-goog-api-key or Authorization: Bearer");
	if (gw_conn_attach(c, t) < 0)
		return -1;
	if (q->content_length && !gw_body_room(c, q->content_length))
		return -1;
	/* The body has the rest of the request's time. */
	uv_timer_start(&c->timer, gw_on_request_timeout,
		       GATEWAY_REQUEST_TIMEOUT_MS, 0);
	return 0;
}

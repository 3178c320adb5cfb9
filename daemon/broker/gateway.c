/*
 * The broker's HTTP endpoint (daemon/broker/gateway.h): turn keys
 * checked and replaced by the provider's, the worst case reserved, the
 * request forwarded with libcurl multi on spd's loop and the response
 * streamed back through the redactor, usage settled; model.call.
 */
#include <curl/curl.h>
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "daemon/transport/handlers.h"
#include "daemon/broker/broker.h"
#include "daemon/transport/call.h"
#include "daemon/transport/quota.h"
#include "daemon/broker/gateway.h"
#include "daemon/broker/gateway_priv.h"
#include "daemon/broker/http.h"
#include "daemon/domain/journal.h"
#include "daemon/log.h"
#include "daemon/spd.h"
#include "daemon/broker/usage.h"
#include "common/buf.h"
#include "common/redact.h"
#include "common/util.h"

/* Response headers passed back, at most: request ids and rate limits. */
#define GATEWAY_RESP_HEADERS_MAX 32
/* Longest provider header kept. */
#define GATEWAY_RESP_HEADER_LEN 1024

struct gw_sock {
	uv_poll_t poll;
	curl_socket_t fd;
	struct gateway *g;
};

struct gw_call {
	struct gateway *g;
	struct gw_conn *conn; /* NULL once the client went away */
	struct call *rpc;     /* model.call, or NULL */
	CURL *easy;
	struct curl_slist *hdrs;
	char *body;
	size_t body_len;
	struct broker_turn *turn;
	char session[65];
	char turn_id[BROKER_TURN_ID_LEN + 1];
	const struct price *price;
	char model[PRICE_MODEL_NAME_MAX + 1];
	char provider[64];
	char path[64];
	enum broker_api api;
	bool stream, count_only, head_sent, client_gone, rpc_overflow;
	int64_t reserved;
	/* The output limit spd wrote into the body (the budget could not
	 * cover the client's, or it named none), or 0; the completions
	 * asked for. */
	int64_t limit_set, choices;
	struct usage_parser usage;
	struct redact_stream *rs;
	char *resp_headers[GATEWAY_RESP_HEADERS_MAX];
	size_t n_resp_headers;
	struct buf rpc_body;
	/* The reply's head, made when the provider's came, sent with the
	 * first bytes of the body (one write, not two). */
	struct buf head;
	uint64_t start_ms;
	/* When the provider last sent a byte (or the call began), and how
	 * long it may then stay silent. */
	uint64_t rx_ms, stall_ms;
	char prices_hash[65];
	struct gw_call *prev, *next;
};

void gw_maybe_free(struct gateway *g)
{
	if (g->stopping && g->open_handles == 0 && !g->conns) {
		curl_multi_cleanup(g->multi);
		free(g);
	}
}

static void on_gw_handle_closed(uv_handle_t *h)
{
	struct gateway *g = h->data;

	g->open_handles--;
	gw_maybe_free(g);
}

/* ---- provider-shaped errors ---------------------------------------- */

/* An error body the client's SDK understands: Anthropic's
 * {"type":"error","error":{type,message}} or OpenAI's
 * {"error":{message,type,code}}, with spd's own symbol and numbers. */
static char *error_body(enum broker_api api, int status, const char *code,
			const char *msg, json_t *extra)
{
	const char *atype = status == 401   ? "authentication_error"
			    : status == 402 ? "billing_error"
			    : status == 404 ? "not_found_error"
			    : status == 413 ? "request_too_large"
			    : status >= 500 ? "api_error"
					    : "invalid_request_error";
	const char *otype = status == 401   ? "invalid_request_error"
			    : status == 402 ? "insufficient_quota"
			    : status >= 500 ? "server_error"
					    : "invalid_request_error";
	json_t *err, *o;
	char *s;

	if (api == BROKER_API_ANTHROPIC) {
		err = json_pack("{s:s, s:s, s:s}", "type", atype, "message",
				msg, "spd_code", code);
		o = json_pack("{s:s, s:o}", "type", "error", "error", err);
	} else {
		err = json_pack("{s:s, s:s, s:s, s:n}", "message", msg, "type",
				otype, "code", code, "param");
		o = json_pack("{s:o}", "error", err);
	}
	if (extra)
		json_object_update(err, extra);
	json_decref(extra);
	s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return s;
}

static enum broker_api api_of_path(const char *target)
{
	return target && (strncmp(target, "/v1/chat/", 9) == 0 ||
			  strncmp(target, "/v1/responses", 13) == 0)
		   ? BROKER_API_OPENAI
		   : BROKER_API_ANTHROPIC;
}

static void journal_call(struct gateway *g, const char *session, json_t *detail,
			 const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void journal_call(struct gateway *g, const char *session, json_t *detail,
			 const char *fmt, ...)
{
	char summary[512];
	char *txt = detail ? json_dumps(detail, JSON_COMPACT) : NULL;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(summary, sizeof(summary), fmt, ap);
	va_end(ap);
	if (g->spd->journal)
		journal_append(g->spd->journal,
			       session && session[0] ? session : NULL, "broker",
			       "model.call", summary, txt);
	free(txt);
	json_decref(detail);
}

static void on_refusal_timer(uv_timer_t *t);

/* The row of the refusals of r counted since its window began. */
static void refusal_flush(struct gateway *g, struct gw_refusal *r)
{
	uint64_t secs = (uv_now(g->spd->loop) - r->first_ms) / 1000;
	json_t *d;

	if (r->count == 0)
		return;
	d = json_pack("{s:s?, s:s?, s:s, s:s, s:i, s:s, s:i, s:I}", "turn",
		      r->turn[0] ? r->turn : NULL, "session",
		      r->session[0] ? r->session : NULL, "method", r->method,
		      "path", r->path, "status", r->status, "code", r->code,
		      "count", (int)r->count, "seconds", (json_int_t)secs);
	journal_call(g, r->session, d,
		     "refused %d %s %u more times in %llus: %s %s%s%s",
		     r->status, r->code, r->count, (unsigned long long)secs,
		     r->method, r->path, r->turn[0] ? " " : "", r->turn);
	r->count = 0;
}

/* Every kind whose window has passed: its count journaled, its slot
 * freed.  all: every kind now (the gateway stops: nothing is lost). */
static void refusals_sweep(struct gateway *g, bool all)
{
	uint64_t now = uv_now(g->spd->loop);
	bool pending = false;

	for (size_t i = 0; i < GATEWAY_REFUSALS_KEPT; i++) {
		struct gw_refusal *r = &g->refusals[i];

		if (!r->first_ms)
			continue;
		if (all || now - r->first_ms >= GATEWAY_REFUSAL_WINDOW_MS) {
			refusal_flush(g, r);
			r->first_ms = 0;
		} else {
			pending = true;
		}
	}
	if (pending && !g->stopping)
		uv_timer_start(&g->refusal_timer, on_refusal_timer,
			       GATEWAY_REFUSAL_WINDOW_MS, 0);
}

static void on_refusal_timer(uv_timer_t *t)
{
	refusals_sweep(t->data, false);
}

/* Whether this refusal gets a row of its own now (else it is counted in
 * its kind's, written when the window ends): the first of its kind in a
 * window, within its session's journal rate or, without a session, the
 * gateway's. */
static bool refusal_row(struct gateway *g, const char *session,
			const char *turn, const char *method, const char *path,
			int status, const char *code)
{
	uint64_t now = uv_now(g->spd->loop);
	struct gw_refusal *r = NULL, *oldest = NULL;
	bool row;

	for (size_t i = 0; i < GATEWAY_REFUSALS_KEPT; i++) {
		struct gw_refusal *x = &g->refusals[i];

		if (!x->first_ms) {
			if (!oldest || oldest->first_ms)
				oldest = x;
			continue;
		}
		if (x->status == status && strcmp(x->code, code) == 0 &&
		    strcmp(x->session, session) == 0 &&
		    strcmp(x->turn, turn) == 0 &&
		    strcmp(x->method, method) == 0 &&
		    strcmp(x->path, path) == 0) {
			r = x;
			break;
		}
		if (!oldest ||
		    (oldest->first_ms && x->first_ms < oldest->first_ms))
			oldest = x;
	}
	if (r && now - r->first_ms < GATEWAY_REFUSAL_WINDOW_MS) {
		r->count++;
		return false;
	}
	if (!r) {
		r = oldest;
		refusal_flush(g, r);
		snprintf(r->session, sizeof(r->session), "%s", session);
		snprintf(r->turn, sizeof(r->turn), "%s", turn);
		snprintf(r->method, sizeof(r->method), "%s", method);
		snprintf(r->path, sizeof(r->path), "%s", path);
		snprintf(r->code, sizeof(r->code), "%s", code);
		r->status = status;
	} else {
		refusal_flush(g, r);
	}
	r->first_ms = now ? now : 1;
	r->count = 0;
	if (!uv_is_active((uv_handle_t *)&g->refusal_timer) && !g->stopping)
		uv_timer_start(&g->refusal_timer, on_refusal_timer,
			       GATEWAY_REFUSAL_WINDOW_MS, 0);
	/* A refused client's rows count against its session's journal
	 * rate, like its requests on spd's socket. */
	if (session[0])
		row =
		    !g->spd->quota || quota_take(g->spd->quota, session,
						 QUOTA_JOURNAL_RATE, now) == 0;
	else {
		if (now - g->anon_window_ms >= GATEWAY_REFUSAL_WINDOW_MS) {
			g->anon_window_ms = now;
			g->anon_rows = 0;
		}
		row = g->anon_rows < GATEWAY_ANON_REFUSAL_ROWS;
		if (row)
			g->anon_rows++;
	}
	if (!row)
		r->count++;
	return row;
}

/* Refuse a request before any provider was asked: journaled (with the
 * method, path, turn and session presented, never the key; repeats
 * counted into one row), answered in the provider's shape; a kept-alive
 * connection goes on when the request itself was whole. */
void gw_refuse(struct gw_conn *c, const struct broker_turn *t, int status,
	       const char *code, json_t *extra, const char *msg)
{
	enum broker_api api = api_of_path(c->req.target);
	char *body = error_body(api, status, code, msg, json_incref(extra));
	const struct broker_turn *who = t;
	char path[64];
	json_t *d;

	/* No key's turn: the run's port it came on says whose it is. */
	if (!who && c->bound_turn[0])
		who = broker_turn_by_id(c->g->spd, c->bound_turn);
	snprintf(path, sizeof(path), "%.*s",
		 c->req.target ? (int)strcspn(c->req.target, "?") : 0,
		 c->req.target ? c->req.target : "");
	if (refusal_row(c->g, who ? who->session : "", who ? who->id : "",
			c->req.method, path, status, code)) {
		d = json_pack("{s:s?, s:s?, s:s, s:s, s:i, s:s, s:s}", "turn",
			      who ? who->id : NULL, "session",
			      who && who->session[0] ? who->session : NULL,
			      "method", c->req.method, "path", path, "status",
			      status, "code", code, "error", msg);
		if (extra && d)
			json_object_update(d, extra);
		journal_call(c->g, who ? who->session : NULL, d,
			     "refused %d %s: %s", status, code, msg);
	}
	json_decref(extra);
	gw_conn_respond(c, status, "application/json",
			body ? body : "{\"error\":\"refused\"}");
	free(body);
}

/* ---- forwarding ---------------------------------------------------- */

static void call_unlink_free(struct gw_call *k)
{
	struct gateway *g = k->g;

	if (k->prev)
		k->prev->next = k->next;
	else if (g->calls == k)
		g->calls = k->next;
	if (k->next)
		k->next->prev = k->prev;
	if (k->easy) {
		curl_multi_remove_handle(g->multi, k->easy);
		curl_easy_cleanup(k->easy);
	}
	curl_slist_free_all(k->hdrs);
	free(k->body);
	usage_free(&k->usage);
	redact_stream_free(k->rs);
	for (size_t i = 0; i < k->n_resp_headers; i++)
		free(k->resp_headers[i]);
	buf_free(&k->rpc_body);
	buf_free(&k->head);
	free(k);
}

void gw_call_detach(struct gw_call *k, bool gone)
{
	k->conn = NULL;
	if (gone)
		k->client_gone = true;
}

/* The reply's head, kept in k->head until the body's first bytes. */
static void make_head(struct gw_call *k)
{
	long status = 0;
	char *ctype = NULL;

	if (k->head_sent)
		return;
	k->head_sent = true;
	curl_easy_getinfo(k->easy, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_getinfo(k->easy, CURLINFO_CONTENT_TYPE, &ctype);
	if (!k->conn)
		return;
	buf_printf(&k->head, "HTTP/1.1 %ld %s\r\n", status,
		   gw_reason((int)status));
	if (ctype && !strpbrk(ctype, "\r\n"))
		buf_printf(&k->head, "Content-Type: %s\r\n", ctype);
	for (size_t i = 0; i < k->n_resp_headers; i++)
		buf_printf(&k->head, "%s\r\n", k->resp_headers[i]);
	buf_printf(&k->head,
		   "Transfer-Encoding: chunked\r\n%sCache-Control: "
		   "no-cache\r\n\r\n",
		   gw_conn_keeps(k->conn) ? "" : "Connection: close\r\n");
}

/* The head if not yet sent, out (taken) as a chunk, and the last chunk
 * when last: one write. */
static void send_chunk(struct gw_call *k, struct buf *out, bool last)
{
	if (k->conn)
		gw_conn_chunk(k->conn, &k->head, out, last);
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *ud)
{
	struct gw_call *k = ud;
	size_t n = size * nmemb, len = n;
	static const char *const keep[] = {"request-id",   "x-request-id",
					   "retry-after",  "anthropic-",
					   "x-ratelimit-", "openai-"};
	char *line, *red = NULL;
	size_t rlen;

	k->rx_ms = uv_now(k->g->spd->loop);
	if (n >= 5 && strncmp(data, "HTTP/", 5) == 0) {
		/* A new response (after a 100 Continue): start over. */
		for (size_t i = 0; i < k->n_resp_headers; i++)
			free(k->resp_headers[i]);
		k->n_resp_headers = 0;
		return n;
	}
	while (len && (data[len - 1] == '\n' || data[len - 1] == '\r'))
		len--;
	if (len == 0 || len > GATEWAY_RESP_HEADER_LEN ||
	    k->n_resp_headers >= GATEWAY_RESP_HEADERS_MAX)
		return n;
	for (size_t i = 0; i < ARRAY_SIZE(keep); i++) {
		if (strncasecmp(data, keep[i], strlen(keep[i])) != 0)
			continue;
		line = strndup(data, len);
		if (!line || memchr(line, '\r', len) ||
		    memchr(line, '\n', len) || strlen(line) != len) {
			free(line);
			return n;
		}
		if (k->g->spd->redact &&
		    redact_buf(k->g->spd->redact, line, len, &red, &rlen) > 0) {
			free(line);
			line = red;
		} else {
			free(red);
		}
		k->resp_headers[k->n_resp_headers++] = line;
		break;
	}
	return n;
}

static void pass_bytes(struct gw_call *k, const char *data, size_t n)
{
	struct buf out = BUF_INIT;

	if (k->rs) {
		if (redact_stream_feed(k->rs, data, n, &out) < 0 ||
		    redact_stream_idle(k->rs, &out) < 0) {
			/* Never pass what could not be checked. */
			buf_free(&out);
			if (k->conn)
				gw_conn_close(k->conn);
			return;
		}
	} else {
		buf_append(&out, data, n);
	}
	if (k->rpc) {
		if (k->rpc_body.len + out.len > GATEWAY_RPC_BODY_MAX)
			k->rpc_overflow = true;
		else
			buf_append(&k->rpc_body, out.data, out.len);
	} else {
		/* The head goes now even when the redactor holds every byte
		 * of these. */
		send_chunk(k, &out, false);
	}
	buf_free(&out);
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud)
{
	struct gw_call *k = ud;
	size_t n = size * nmemb;

	k->rx_ms = uv_now(k->g->spd->loop);
	if (!k->head_sent) {
		char *ctype = NULL;

		curl_easy_getinfo(k->easy, CURLINFO_CONTENT_TYPE, &ctype);
		usage_init(
		    &k->usage,
		    k->api == BROKER_API_ANTHROPIC ? USAGE_ANTHROPIC
						   : USAGE_OPENAI,
		    ctype && strncasecmp(ctype, "text/event-stream", 17) == 0);
		make_head(k);
	}
	usage_feed(&k->usage, data, n);
	pass_bytes(k, data, n);
	return n;
}

static void finish_rpc(struct gw_call *k, long status, int64_t cost,
		       const char *err)
{
	json_t *body;

	if (err) {
		call_error(k->rpc, RPC_E_INTERNAL, NULL, "%s", err);
		return;
	}
	if (k->rpc_overflow) {
		call_error(k->rpc, RPC_E_LIMIT, NULL,
			   "the provider's reply is over %d bytes: use the "
			   "HTTP endpoint",
			   GATEWAY_RPC_BODY_MAX);
		return;
	}
	body = json_loadb(k->rpc_body.data ? k->rpc_body.data : "",
			  k->rpc_body.len, 0, NULL);
	if (!body)
		body = json_stringn(k->rpc_body.data ? k->rpc_body.data : "",
				    k->rpc_body.len);
	call_set_summary(k->rpc, "%s %s %ld", k->provider, k->model, status);
	call_reply(k->rpc, json_pack("{s:i, s:o, s:f}", "status", (int)status,
				     "body", body ? body : json_null(),
				     "cost_usd", price_usd(cost)));
}

/* A transfer ended (well or not): settle the turn, journal, end the
 * response. */
static void call_done(struct gw_call *k, CURLcode res)
{
	long status = 0;
	int64_t cost;
	char costbuf[32];
	const char *outcome;
	bool charged_all = false, gone;
	uint64_t ms = uv_now(k->g->spd->loop) - k->start_ms;
	json_t *d;

	curl_easy_getinfo(k->easy, CURLINFO_RESPONSE_CODE, &status);
	if (!k->head_sent)
		usage_init(&k->usage,
			   k->api == BROKER_API_ANTHROPIC ? USAGE_ANTHROPIC
							  : USAGE_OPENAI,
			   false);
	usage_finish(&k->usage);
	if (k->count_only) {
		cost = 0;
		outcome = res == CURLE_OK ? "ok" : "failed";
	} else if (res == CURLE_OK && k->usage.complete) {
		cost = price_cost(k->price, &k->usage.u);
		outcome = "ok";
	} else if (res == CURLE_OK && status >= 400) {
		/* A provider's refusal is not billed. */
		cost = 0;
		outcome = "provider error";
	} else if (res == CURLE_COULDNT_CONNECT ||
		   res == CURLE_COULDNT_RESOLVE_HOST) {
		cost = 0; /* nothing reached the provider */
		outcome = "unreachable";
	} else {
		/* Broken before its usage: nobody can say what it cost, so
		 * the worst case stays spent. */
		cost = k->reserved;
		charged_all = true;
		outcome = res == CURLE_OPERATION_TIMEDOUT ? "stalled"
			  : res == CURLE_OK		  ? "no usage"
							  : "broken";
	}
	if (k->turn)
		broker_settle(k->turn, k->reserved, cost);
	/* A client whose end-of-file is queued behind the provider's last
	 * bytes in this turn of the loop has gone all the same. */
	if (k->conn && !k->client_gone && gw_conn_hung_up(k->conn))
		k->client_gone = true;
	gone = k->client_gone;
	/* An HTTP client first (its reply is whole once the last chunk is
	 * out), then the journal: the row is the same either way. */
	if (!k->rpc && k->conn) {
		if (res == CURLE_OK) {
			struct buf out = BUF_INIT;

			make_head(k);
			if (k->rs)
				redact_stream_flush(k->rs, &out);
			send_chunk(k, &out, true);
			buf_free(&out);
			gw_conn_finish(k->conn);
		} else if (!k->head_sent) {
			int st = res == CURLE_OPERATION_TIMEDOUT ? 504 : 502;
			char msg[256];
			char *body;

			snprintf(msg, sizeof(msg),
				 "the provider could not be reached or "
				 "failed: %s",
				 curl_easy_strerror(res));
			body = error_body(k->api, st, "PROVIDER-FAILED", msg,
					  NULL);
			gw_conn_respond(k->conn, st, "application/json",
					body ? body : "{}");
			free(body);
		} else {
			/* Mid-stream: no final chunk, so the client sees a
			 * truncated response, never a complete-looking one. */
			gw_conn_close(k->conn);
		}
	}
	price_format_usd(cost, costbuf, sizeof(costbuf));
	d = json_pack(
	    "{s:s, s:s, s:s, s:s, s:i, s:s, s:I, s:I, s:I, s:I, s:I, "
	    "s:f, s:f, s:I, s:s, s:b, s:b, s:b, s:s?}",
	    "turn", k->turn_id, "provider", k->provider, "path", k->path,
	    "model", k->model, "status", (int)status, "outcome", outcome,
	    "input_tokens", (json_int_t)k->usage.u.input, "output_tokens",
	    (json_int_t)k->usage.u.output, "cache_read_tokens",
	    (json_int_t)k->usage.u.cache_read, "cache_write_tokens",
	    (json_int_t)k->usage.u.cache_write, "cache_write_1h_tokens",
	    (json_int_t)k->usage.u.cache_write_1h, "cost_usd", price_usd(cost),
	    "reserved_usd", price_usd(k->reserved), "duration_ms",
	    (json_int_t)ms, "prices", k->prices_hash, "stream", k->stream,
	    "client_gone", gone, "charged_reservation", charged_all, "error",
	    res == CURLE_OK ? NULL : curl_easy_strerror(res));
	/* The output limit spd set is part of what the provider was
	 * asked. */
	if (d && k->limit_set > 0)
		json_object_set_new(d, "output_limit_set",
				    json_integer(k->limit_set));
	if (d && k->choices > 1)
		json_object_set_new(d, "choices", json_integer(k->choices));
	journal_call(k->g, k->session, d,
		     "%s %s %ld %s: in %lld out %lld, %s USD (%s)", k->provider,
		     k->model, status, outcome, (long long)k->usage.u.input,
		     (long long)k->usage.u.output, costbuf, k->turn_id);
	if (k->rpc)
		finish_rpc(k, status, cost,
			   res == CURLE_OK ? NULL : curl_easy_strerror(res));
	if (k->conn) {
		k->conn->call = NULL;
		k->conn = NULL;
	}
	call_unlink_free(k);
}

static void check_done(struct gateway *g)
{
	CURLMsg *m;
	int left;

	while ((m = curl_multi_info_read(g->multi, &left))) {
		struct gw_call *k = NULL;

		if (m->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &k);
		if (k)
			call_done(k, m->data.result);
	}
}

static void on_poll_closed(uv_handle_t *h)
{
	struct gw_sock *s = h->data;
	struct gateway *g = s->g;

	free(s);
	g->open_handles--;
	gw_maybe_free(g);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
	struct gw_sock *s = h->data;
	struct gateway *g = s->g;
	int flags = 0, running;

	if (status < 0)
		flags = CURL_CSELECT_ERR;
	if (events & UV_READABLE)
		flags |= CURL_CSELECT_IN;
	if (events & UV_WRITABLE)
		flags |= CURL_CSELECT_OUT;
	curl_multi_socket_action(g->multi, s->fd, flags, &running);
	check_done(g);
}

static int sock_cb(CURL *e, curl_socket_t fd, int what, void *userp,
		   void *socketp)
{
	struct gateway *g = userp;
	struct gw_sock *s = socketp;
	int ev = 0;

	if (what == CURL_POLL_REMOVE) {
		if (s) {
			uv_poll_stop(&s->poll);
			curl_multi_assign(g->multi, fd, NULL);
			uv_close((uv_handle_t *)&s->poll, on_poll_closed);
		}
		return 0;
	}
	if (!s) {
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
		curl_multi_assign(g->multi, fd, s);
	}
	if (what & CURL_POLL_IN)
		ev |= UV_READABLE;
	if (what & CURL_POLL_OUT)
		ev |= UV_WRITABLE;
	uv_poll_start(&s->poll, ev, on_poll);
	return 0;
}

static void on_curl_timer(uv_timer_t *t)
{
	struct gateway *g = t->data;
	int running;

	curl_multi_socket_action(g->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	check_done(g);
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
 * A provider that has sent nothing for broker.provider-timeout has
 * stalled: its call ends (call_done, "stalled"), the whole reservation
 * spent.  One timer for all calls, due at the earliest silence's end;
 * a byte that came since only moves that call's end later.  (curl's
 * low-speed limit would do it from an average over several seconds: a
 * provider silent for 2 s after its headers is cut after 8.)
 */
static void on_stall_timer(uv_timer_t *t)
{
	struct gateway *g = t->data;
	uint64_t now = uv_now(g->spd->loop), next;
	struct gw_call *k;

again:
	next = UINT64_MAX;
	for (k = g->calls; k; k = k->next) {
		if (!k->easy || !k->stall_ms)
			continue;
		if (now - k->rx_ms >= k->stall_ms) {
			/* Ending it may end others (its client's): look
			 * again from the start. */
			call_done(k, CURLE_OPERATION_TIMEDOUT);
			goto again;
		}
		if (k->rx_ms + k->stall_ms < next)
			next = k->rx_ms + k->stall_ms;
	}
	if (next != UINT64_MAX && !g->stopping)
		uv_timer_start(&g->stall_timer, on_stall_timer, next - now, 0);
}

/* A call's provider was just asked: its silence counts from now. */
static void stall_watch(struct gw_call *k, uint64_t stall_ms)
{
	struct gateway *g = k->g;

	k->rx_ms = uv_now(g->spd->loop);
	k->stall_ms = stall_ms;
	/* Every call's silence is as long: one due sooner is armed. */
	if (!uv_is_active((uv_handle_t *)&g->stall_timer))
		uv_timer_start(&g->stall_timer, on_stall_timer, stall_ms, 0);
}

/* Request headers not passed on: the client's key, framing and
 * connection management (curl does its own), and Accept-Encoding (a
 * compressed reply could not be read for its usage). */
static bool hop_header(const char *name)
{
	static const char *const drop[] = {"host",
					   "content-length",
					   "transfer-encoding",
					   "connection",
					   "keep-alive",
					   "proxy-authorization",
					   "proxy-connection",
					   "te",
					   "trailer",
					   "upgrade",
					   "expect",
					   "accept-encoding",
					   "x-api-key",
					   "authorization",
					   "cookie"};

	for (size_t i = 0; i < ARRAY_SIZE(drop); i++)
		if (strcmp(name, drop[i]) == 0)
			return true;
	return false;
}

static int add_header(struct curl_slist **l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int add_header(struct curl_slist **l, const char *fmt, ...)
{
	char *s = NULL;
	struct curl_slist *n;
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (r < 0)
		return -ENOMEM;
	n = curl_slist_append(*l, s);
	explicit_bzero(s, strlen(s));
	free(s);
	if (!n)
		return -ENOMEM;
	*l = n;
	return 0;
}

static int start_transfer(struct gw_call *k, const struct broker_provider *p,
			  const char *key, const char *target)
{
	const struct broker_config *cfg = broker_config(k->g->spd);
	char *url = NULL;
	int r = -ENOMEM;

	k->easy = curl_easy_init();
	if (!k->easy)
		return -ENOMEM;
	if (asprintf(&url, "%s%s", p->url, target) < 0)
		return -ENOMEM;
	if (p->api == BROKER_API_ANTHROPIC)
		r = add_header(&k->hdrs, "x-api-key: %s", key);
	else
		r = add_header(&k->hdrs, "Authorization: Bearer %s", key);
	if (r == 0)
		r = add_header(&k->hdrs, "Expect:");
	if (r < 0) {
		free(url);
		return r;
	}
	curl_easy_setopt(k->easy, CURLOPT_URL, url);
	free(url);
	curl_easy_setopt(k->easy, CURLOPT_PRIVATE, k);
	curl_easy_setopt(k->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(k->easy, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(k->easy, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(k->easy, CURLOPT_SSL_VERIFYHOST, 2L);
	curl_easy_setopt(k->easy, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(k->easy, CURLOPT_POST, 1L);
	curl_easy_setopt(k->easy, CURLOPT_POSTFIELDS, k->body);
	curl_easy_setopt(k->easy, CURLOPT_POSTFIELDSIZE_LARGE,
			 (curl_off_t)k->body_len);
	curl_easy_setopt(k->easy, CURLOPT_HTTPHEADER, k->hdrs);
	curl_easy_setopt(k->easy, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(k->easy, CURLOPT_WRITEDATA, k);
	curl_easy_setopt(k->easy, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(k->easy, CURLOPT_HEADERDATA, k);
	curl_easy_setopt(k->easy, CURLOPT_CONNECTTIMEOUT,
			 (long)GATEWAY_CONNECT_TIMEOUT_S);
	curl_easy_setopt(k->easy, CURLOPT_NOPROXY, "*");
	/* Each streamed event is a small packet: no Nagle towards the
	 * provider either (curl's default, said here). */
	curl_easy_setopt(k->easy, CURLOPT_TCP_NODELAY, 1L);
	if (curl_multi_add_handle(k->g->multi, k->easy) != CURLM_OK)
		return -EIO;
	/* A provider silent this long has stalled: the call ends. */
	stall_watch(k, (uint64_t)cfg->provider_timeout_s * 1000);
	return 0;
}

/* The routes: path (without query) to api; count_tokens is free. */
static int route(const char *target, enum broker_api *api, bool *count_only,
		 char *path, size_t plen)
{
	static const struct {
		const char *path;
		enum broker_api api;
		bool count;
	} routes[] = {
	    {"/v1/messages", BROKER_API_ANTHROPIC, false},
	    {"/v1/messages/count_tokens", BROKER_API_ANTHROPIC, true},
	    {"/v1/chat/completions", BROKER_API_OPENAI, false},
	    {"/v1/responses", BROKER_API_OPENAI, false},
	};
	size_t n = strcspn(target, "?");

	for (size_t i = 0; i < ARRAY_SIZE(routes); i++)
		if (strlen(routes[i].path) == n &&
		    strncmp(routes[i].path, target, n) == 0) {
			*api = routes[i].api;
			*count_only = routes[i].count;
			snprintf(path, plen, "%s", routes[i].path);
			return 0;
		}
	return -ENOENT;
}

/* The largest output the request allows, or 0 when it names none (the
 * model's max then bounds it).  -EINVAL for a value that is not a
 * positive integer. */
static int64_t max_tokens_of(json_t *body, enum broker_api api,
			     const char *path)
{
	static const char *const names[] = {
	    "max_tokens", "max_completion_tokens", "max_output_tokens"};
	int64_t best = 0;

	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		json_t *v = json_object_get(body, names[i]);

		if (!v || json_is_null(v))
			continue;
		if (!json_is_integer(v) || json_integer_value(v) <= 0)
			return -EINVAL;
		/* Several named: the largest bounds whichever the provider
		 * reads. */
		if (json_integer_value(v) > best)
			best = json_integer_value(v);
	}
	return best;
}

/*
 * Check and price a request body, and make the call: everything up to
 * the reservation is synchronous, so two calls never reserve the same
 * room.  Returns the call, or NULL with e (status, code, message,
 * extra data) set.
 */
struct prep {
	int status;
	const char *code;
	char msg[512];
	json_t *extra;
};

/* The bytes spd may add to a body when it sets an output limit: the
 * field's name and digits, with room to spare. */
#define GATEWAY_LIMIT_SLACK 64
/* Most completions one OpenAI chat call may ask for ("n"): each is billed
 * in full, so the reservation multiplies by it. */
#define GATEWAY_CHOICES_MAX 128

/*
 * The body the provider gets (k->body, owned): the client's bytes as they
 * came, except that an OpenAI chat stream is asked for its usage
 * (stream_options.include_usage), which it reports only when asked, and
 * that an output limit spd set (limit > 0) is written into the fields
 * the API reads.  Returns 0 or -ENOMEM.
 */
static int call_body(struct gw_call *k, json_t *o, const char *body,
		     size_t body_len, int64_t limit)
{
	bool changed = false;

	if (k->api == BROKER_API_OPENAI && k->stream &&
	    strcmp(k->path, "/v1/chat/completions") == 0) {
		json_t *so = json_object_get(o, "stream_options");

		if (!so) {
			so = json_object();
			json_object_set_new(o, "stream_options", so);
		}
		if (json_is_object(so) &&
		    !json_is_true(json_object_get(so, "include_usage"))) {
			json_object_set_new(so, "include_usage", json_true());
			changed = true;
		}
	}
	if (limit > 0) {
		static const char *const names[] = {
		    "max_tokens", "max_completion_tokens", "max_output_tokens"};
		bool set = false;

		/* Every limit the request names, else the API's own. */
		for (size_t i = 0; i < ARRAY_SIZE(names); i++)
			if (json_object_get(o, names[i]) &&
			    !json_is_null(json_object_get(o, names[i]))) {
				json_object_set_new(o, names[i],
						    json_integer(limit));
				set = true;
			}
		if (!set)
			json_object_set_new(
			    o,
			    k->api == BROKER_API_ANTHROPIC ? "max_tokens"
			    : strcmp(k->path, "/v1/responses") == 0
				? "max_output_tokens"
				: "max_completion_tokens",
			    json_integer(limit));
		changed = true;
	}
	free(k->body);
	k->body = NULL;
	if (changed) {
		k->body = json_dumps(o, JSON_COMPACT);
		if (!k->body)
			return -ENOMEM;
		k->body_len = strlen(k->body);
		return 0;
	}
	k->body = malloc(body_len + 1);
	if (!k->body)
		return -ENOMEM;
	memcpy(k->body, body, body_len);
	k->body[body_len] = '\0';
	k->body_len = body_len;
	return 0;
}

/* BUDGET-EXCEEDED (HTTP 402, not 429: clients retry a 429), naming the
 * turn (or its session, when the session's budget is the one short),
 * what it spent and reserved, its cap and what this call needed. */
static void budget_refusal(const struct broker_turn *t, int64_t worst,
			   struct prep *e)
{
	char a[32], b[32], c[32], d[32];
	int64_t spent = t->spent, reserved = t->reserved, cap = t->cap;
	bool session = false;

	broker_room(t, &session);
	if (session)
		broker_session_budget(t, &spent, &reserved, &cap);
	e->status = 402;
	e->code = "BUDGET-EXCEEDED";
	price_format_usd(spent, a, sizeof(a));
	price_format_usd(reserved, b, sizeof(b));
	price_format_usd(cap, c, sizeof(c));
	price_format_usd(worst, d, sizeof(d));
	if (session)
		snprintf(e->msg, sizeof(e->msg),
			 "session %.64s: spent %s + reserved %s + this call's "
			 "worst case %s USD would pass its budget of %s USD "
			 "across its turns (spd.conf broker.session-cap)",
			 t->session, a, b, d, c);
	else
		snprintf(e->msg, sizeof(e->msg),
			 "turn %s: spent %s + reserved %s + this call's worst "
			 "case %s USD would pass its cap of %s USD",
			 t->id, a, b, d, c);
	e->extra = json_pack("{s:s, s:f, s:f, s:f, s:f}", "turn", t->id,
			     "spent_usd", price_usd(t->spent), "reserved_usd",
			     price_usd(t->reserved), "cap_usd",
			     price_usd(t->cap), "needed_usd", price_usd(worst));
	if (session && e->extra)
		json_object_update_new(
		    e->extra,
		    json_pack("{s:s, s:f, s:f, s:f}", "session", t->session,
			      "session_spent_usd", price_usd(spent),
			      "session_reserved_usd", price_usd(reserved),
			      "session_cap_usd", price_usd(cap)));
}

/* An option spd cannot bound: refused (400 UNBOUNDED-OPTION), naming it. */
static bool unbounded(struct prep *e, const char *option, const char *why)
{
	e->status = 400;
	e->code = "UNBOUNDED-OPTION";
	snprintf(e->msg, sizeof(e->msg),
		 "%s: %s, so spd cannot bound what the call costs and does "
		 "not forward it",
		 option, why);
	e->extra = json_pack("{s:s}", "option", option);
	return false;
}

static bool has_prefix(const char *s, const char *prefix)
{
	return s && strncmp(s, prefix, strlen(prefix)) == 0;
}

/* An image URL that is not inline data ("data:..."): fetched by the
 * provider. */
static bool remote_url(json_t *v)
{
	if (json_is_object(v))
		v = json_object_get(v, "url");
	return json_is_string(v) && !has_prefix(json_string_value(v), "data:");
}

/* Anthropic content blocks (of a message, or of a tool_result): only
 * inline sources, whose bytes bound their tokens. */
static bool anthropic_blocks(json_t *content, struct prep *e)
{
	size_t i;
	json_t *b;

	json_array_foreach(content, i, b)
	{
		const char *type =
		    json_string_value(json_object_get(b, "type"));
		json_t *src = json_object_get(b, "source");
		const char *st =
		    json_string_value(json_object_get(src, "type"));

		if (json_is_object(src) && st &&
		    (strcmp(st, "url") == 0 || strcmp(st, "file") == 0 ||
		     json_object_get(src, "file_id")))
			return unbounded(
			    e,
			    strcmp(st, "url") == 0
				? "a content block with a \"url\" "
				  "source"
				: "a content block with a \"file\" "
				  "source",
			    "the provider fetches or stores what "
			    "it holds, which the request's bytes "
			    "do not bound (send it inline, "
			    "base64)");
		if (type && strcmp(type, "container_upload") == 0)
			return unbounded(
			    e, "a \"container_upload\" block",
			    "it names a file held by the provider");
		if (type && strcmp(type, "tool_result") == 0 &&
		    !anthropic_blocks(json_object_get(b, "content"), e))
			return false;
	}
	return true;
}

/* OpenAI content parts (chat messages, Responses input items). */
static bool openai_parts(json_t *content, struct prep *e)
{
	size_t i;
	json_t *p;

	json_array_foreach(content, i, p)
	{
		const char *type =
		    json_string_value(json_object_get(p, "type"));
		json_t *file = json_object_get(p, "file");

		if (json_object_get(p, "file_id") ||
		    json_object_get(file, "file_id"))
			return unbounded(e, "a \"file_id\"",
					 "it names a file held by the "
					 "provider");
		if (json_object_get(p, "file_url"))
			return unbounded(e, "a \"file_url\"",
					 "the provider fetches the file");
		if (remote_url(json_object_get(p, "image_url")))
			return unbounded(e, "an image by URL",
					 "the provider fetches the image (send "
					 "it inline as a data: URL)");
		if (type && strcmp(type, "item_reference") == 0)
			return unbounded(e, "an \"item_reference\"",
					 "it names context held by the "
					 "provider");
		if (json_is_array(json_object_get(p, "content")) &&
		    !openai_parts(json_object_get(p, "content"), e))
			return false;
		if (json_is_array(json_object_get(p, "output")) &&
		    !openai_parts(json_object_get(p, "output"), e))
			return false;
	}
	return true;
}

/* Tools whose use the provider bills beyond the tokens spd bounds
 * (server-side search, fetch, code execution, their per-use fees) are
 * refused; a provider-defined client tool adds its hidden prompt to
 * *extra. */
static bool tools_ok(json_t *tools, enum broker_api api, const char *path,
		     int64_t *extra, struct prep *e)
{
	static const char *const anthropic_client[] = {
	    "custom", "bash_", "text_editor_", "computer_", "memory_"};
	static const char *const chat_client[] = {"function", "custom"};
	static const char *const responses_client[] = {
	    "function", "custom", "local_shell", "shell", "apply_patch"};
	size_t i;
	json_t *tool;

	json_array_foreach(tools, i, tool)
	{
		const char *type =
		    json_string_value(json_object_get(tool, "type"));
		const char *const *ok;
		size_t n, j;
		char what[160];

		if (!type && api == BROKER_API_ANTHROPIC)
			continue; /* a custom tool */
		if (api == BROKER_API_ANTHROPIC) {
			ok = anthropic_client;
			n = ARRAY_SIZE(anthropic_client);
		} else if (strcmp(path, "/v1/responses") == 0) {
			ok = responses_client;
			n = ARRAY_SIZE(responses_client);
		} else {
			ok = chat_client;
			n = ARRAY_SIZE(chat_client);
		}
		for (j = 0; type && j < n; j++)
			if (api == BROKER_API_ANTHROPIC && j > 0
				? has_prefix(type, ok[j])
				: strcmp(type, ok[j]) == 0)
				break;
		if (!type || j == n) {
			snprintf(what, sizeof(what), "the tool type \"%.60s\"",
				 type ? type : "(none)");
			return unbounded(
			    e, what,
			    "a tool the provider runs itself (search, fetch, "
			    "code execution) bills per use and for what it "
			    "reads");
		}
		if (api == BROKER_API_ANTHROPIC && j > 0)
			*extra += PRICE_TOOL_HIDDEN_TOKENS;
	}
	return true;
}

/*
 * Whether spd can bound what the request may cost: every option that
 * multiplies or adds billed tokens is either counted (*choices, the
 * completions asked for; *extra, input tokens the bytes do not hold) or
 * refused with e set.  long_context: the client asked Anthropic for its
 * long-context tier (anthropic-beta context-1m-*).
 */
static bool bounded(json_t *o, enum broker_api api, const char *path,
		    bool long_context, int64_t *choices, int64_t *extra,
		    struct prep *e)
{
	json_t *v, *msg;
	size_t i;
	const char *tier;

	*choices = 1;
	*extra = 0;
	v = json_object_get(o, "service_tier");
	tier = json_string_value(v);
	if (v && !json_is_null(v) &&
	    !(tier &&
	      (strcmp(tier, "auto") == 0 ||
	       (api == BROKER_API_ANTHROPIC ? strcmp(tier, "standard_only") == 0
					    : strcmp(tier, "default") == 0 ||
						  strcmp(tier, "flex") == 0))))
		return unbounded(e, "service_tier",
				 "its price tier is not in spd's table");
	if (!tools_ok(json_object_get(o, "tools"), api, path, extra, e))
		return false;
	if (api == BROKER_API_ANTHROPIC) {
		if (long_context)
			return unbounded(e, "anthropic-beta context-1m",
					 "the long-context tier's prices are "
					 "not in spd's table");
		if (json_object_get(o, "mcp_servers"))
			return unbounded(e, "mcp_servers",
					 "the provider calls those servers "
					 "and bills what they return");
		if (json_object_get(o, "container"))
			return unbounded(e, "container",
					 "it names a code-execution container "
					 "held by the provider");
		if (!anthropic_blocks(json_object_get(o, "system"), e))
			return false;
		json_array_foreach(json_object_get(o, "messages"), i, msg)
		{
			if (!anthropic_blocks(json_object_get(msg, "content"),
					      e))
				return false;
		}
		return true;
	}
	if (strcmp(path, "/v1/responses") == 0) {
		static const char *const held[] = {"previous_response_id",
						   "conversation", "prompt"};

		for (size_t j = 0; j < ARRAY_SIZE(held); j++) {
			v = json_object_get(o, held[j]);
			if (v && !json_is_null(v))
				return unbounded(e, held[j],
						 "it brings in context held by "
						 "the provider, which the "
						 "request's bytes do not "
						 "bound");
		}
		return openai_parts(json_object_get(o, "input"), e);
	}
	/* Chat completions. */
	if (json_object_get(o, "web_search_options"))
		return unbounded(e, "web_search_options",
				 "the provider searches the web and bills "
				 "for it");
	if (json_object_get(o, "prediction"))
		return unbounded(e, "prediction",
				 "rejected predicted tokens are billed as "
				 "output");
	if (json_object_get(o, "audio"))
		return unbounded(e, "audio",
				 "audio output is priced apart, not in spd's "
				 "table");
	v = json_object_get(o, "n");
	if (v && !json_is_null(v)) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) > GATEWAY_CHOICES_MAX) {
			snprintf(e->msg, sizeof(e->msg),
				 "n must be an integer from 1 to %d",
				 GATEWAY_CHOICES_MAX);
			return false;
		}
		*choices = json_integer_value(v);
	}
	json_array_foreach(json_object_get(o, "messages"), i, msg)
	{
		if (!openai_parts(json_object_get(msg, "content"), e))
			return false;
	}
	return true;
}

static struct gw_call *prepare(struct gateway *g, struct broker_turn *t,
			       enum broker_api api, bool count_only,
			       const char *path, const char *body,
			       size_t body_len, bool long_context,
			       struct prep *e)
{
	struct spd *spd = g->spd;
	const struct broker_config *cfg = broker_config(spd);
	const struct broker_provider *p = broker_provider_for(spd, api);
	const char *key = broker_provider_key(spd, p);
	json_error_t jerr;
	json_t *o = NULL;
	const char *model;
	const struct price *pr;
	int64_t maxt, worst = 0, choices = 1, extra = 0, limit = 0;
	struct gw_call *k = NULL;

	e->status = 400;
	e->code = "BAD-REQUEST";
	e->extra = NULL;
	if (!p || !key) {
		e->status = 503;
		e->code = "NO-PROVIDER";
		snprintf(e->msg, sizeof(e->msg),
			 "spd has no %s provider key (spd.conf [provider] key, "
			 "the environment file)",
			 api == BROKER_API_ANTHROPIC ? "anthropic" : "openai");
		return NULL;
	}
	/* Duplicate keys are refused: spd and the provider must read the
	 * same model and max_tokens. */
	o = json_loadb(body ? body : "", body_len, JSON_REJECT_DUPLICATES,
		       &jerr);
	if (!json_is_object(o)) {
		snprintf(e->msg, sizeof(e->msg),
			 "the body must be one JSON object: %s", jerr.text);
		goto fail;
	}
	model = json_string_value(json_object_get(o, "model"));
	if (!model) {
		snprintf(e->msg, sizeof(e->msg), "the body names no model");
		goto fail;
	}
	pr = price_lookup(&cfg->prices, model);
	if (!pr) {
		e->code = "NO-PRICE";
		snprintf(e->msg, sizeof(e->msg),
			 "model \"%.100s\" has no price in spd's table (add "
			 "[model \"NAME\"] to spd.conf): refused, never free",
			 model);
		goto fail;
	}
	maxt = max_tokens_of(o, api, path);
	if (maxt < 0) {
		snprintf(e->msg, sizeof(e->msg),
			 "max_tokens must be a positive integer");
		goto fail;
	}
	if (!count_only &&
	    !bounded(o, api, path, long_context, &choices, &extra, e))
		goto fail;
	k = calloc(1, sizeof(*k));
	if (!k) {
		e->status = 500;
		e->code = "INTERNAL";
		snprintf(e->msg, sizeof(e->msg), "out of memory");
		goto fail;
	}
	k->g = g;
	k->api = api;
	k->count_only = count_only;
	k->price = pr;
	snprintf(k->model, sizeof(k->model), "%s", model);
	snprintf(k->provider, sizeof(k->provider), "%s", p->name);
	snprintf(k->path, sizeof(k->path), "%s", path);
	snprintf(k->prices_hash, sizeof(k->prices_hash), "%s",
		 cfg->prices.hash);
	k->stream = json_is_true(json_object_get(o, "stream"));
	if (call_body(k, o, body, body_len, 0) < 0)
		goto oom;
	if (!count_only) {
		int64_t room = broker_room(t, NULL);
		int64_t in = price_input_bound(pr, k->body_len, extra);

		worst = in + price_output_bound(pr, maxt, choices);
		if (worst > room || worst < 0) {
			/* No limit, or one the budget cannot cover: the
			 * limit is what the budget covers, down to the
			 * floor; the body gains the field. */
			int64_t floor = cfg->min_output, afford;

			in = price_input_bound(
			    pr, k->body_len + GATEWAY_LIMIT_SLACK, extra);
			afford =
			    price_output_affordable(pr, room - in, choices);
			if (floor > pr->max_output)
				floor = pr->max_output;
			if (maxt > 0 && maxt < floor)
				floor = maxt;
			if (afford < floor || afford < 1) {
				worst =
				    in + price_output_bound(pr, floor, choices);
				budget_refusal(t, worst, e);
				goto fail;
			}
			limit = afford;
			if (call_body(k, o, body, body_len, limit) < 0)
				goto oom;
			worst = price_input_bound(pr, k->body_len, extra) +
				price_output_bound(pr, limit, choices);
		}
	}
	if (broker_reserve(t, worst) < 0) {
		budget_refusal(t, worst, e);
		goto fail;
	}
	k->reserved = worst;
	k->limit_set = limit;
	k->choices = count_only ? 1 : choices;
	k->turn = t;
	snprintf(k->turn_id, sizeof(k->turn_id), "%s", t->id);
	snprintf(k->session, sizeof(k->session), "%s", t->session);
	k->start_ms = uv_now(spd->loop);
	if (spd->redact)
		redact_stream_new(spd->redact, &k->rs);
	k->next = g->calls;
	if (g->calls)
		g->calls->prev = k;
	g->calls = k;
	json_decref(o);
	return k;
oom:
	e->status = 500;
	e->code = "INTERNAL";
	snprintf(e->msg, sizeof(e->msg), "out of memory");
fail:
	if (k) {
		free(k->body);
		free(k);
	}
	json_decref(o);
	return NULL;
}

static void call_abort_start(struct gw_call *k, int r)
{
	/* Nothing was sent: give the reservation back. */
	broker_settle(k->turn, k->reserved, 0);
	k->turn = NULL;
	(void)r;
}

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

/* The request's key: x-api-key, or Authorization: Bearer. */
static const char *request_key(const struct http_request *q)
{
	const char *key = http_request_header(q, "x-api-key");
	const char *auth = http_request_header(q, "authorization");

	if (!key && auth && strncasecmp(auth, "Bearer ", 7) == 0)
		key = auth + 7;
	return key;
}

/* The live turn of key, if this connection may use it: a run's port
 * serves its own turn only (another live key, another session's leaked
 * into the run, is as good as none there). */
static struct broker_turn *conn_turn(struct gw_conn *c, const char *key)
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
	bool count_only;
	char path[64];
	const char *key;
	struct broker_turn *t;

	/* What needs no body is decided now: a request refused here never
	 * has its body read or held. */
	if (route(q->target, &api, &count_only, path, sizeof(path)) < 0)
		return head_refusal(
		    c, NULL, 404, "NOT-FOUND",
		    "spd's broker serves POST /v1/messages, "
		    "/v1/messages/count_tokens, /v1/chat/completions and "
		    "/v1/responses only");
	if (strcmp(q->method, "POST") != 0)
		return head_refusal(c, NULL, 405, "BAD-REQUEST",
				    "only POST is served on this route");
	key = request_key(q);
	t = conn_turn(c, key);
	if (!t)
		return head_refusal(
		    c, NULL, 401, "UNAUTHORIZED",
		    key ? "the key is not a live turn key of this spd "
			  "(unknown, ended or expired)"
			: "no key: send the turn key as x-api-key or "
			  "Authorization: Bearer");
	if (gw_conn_attach(c, t) < 0)
		return -1;
	if (q->content_length && !gw_body_room(c, q->content_length))
		return -1;
	/* The body has the rest of the request's time. */
	uv_timer_start(&c->timer, gw_on_request_timeout,
		       GATEWAY_REQUEST_TIMEOUT_MS, 0);
	return 0;
}

void gw_handle_request(struct gw_conn *c)
{
	struct gateway *g = c->g;
	struct http_request *q = &c->req;
	const char *key = http_request_header(q, "x-api-key");
	const char *auth = http_request_header(q, "authorization");
	const struct broker_provider *p;
	struct broker_turn *t;
	enum broker_api api;
	bool count_only, long_context = false;
	char path[64];
	struct prep e;
	struct gw_call *k;
	int r;

	if (route(q->target, &api, &count_only, path, sizeof(path)) < 0) {
		gw_refuse(c, NULL, 404, "NOT-FOUND", NULL,
			  "spd's broker serves POST /v1/messages, "
			  "/v1/messages/count_tokens, /v1/chat/completions and "
			  "/v1/responses only");
		return;
	}
	if (strcmp(q->method, "POST") != 0) {
		gw_refuse(c, NULL, 405, "BAD-REQUEST", NULL,
			  "only POST is served on this route");
		return;
	}
	if (!key && auth && strncasecmp(auth, "Bearer ", 7) == 0)
		key = auth + 7;
	/* Again now the body is in: the turn may have ended meanwhile. */
	t = conn_turn(c, key);
	if (!t) {
		gw_refuse(c, NULL, 401, "UNAUTHORIZED", NULL,
			  key ? "the key is not a live turn key of this spd "
				"(unknown, ended or expired)"
			      : "no key: send the turn key as x-api-key or "
				"Authorization: Bearer");
		return;
	}
	for (size_t i = 0; i < q->nh; i++)
		if (strcmp(q->h[i].name, "anthropic-beta") == 0 &&
		    strstr(q->h[i].value, "context-1m"))
			long_context = true;
	k = prepare(g, t, api, count_only, path, q->body, q->body_len,
		    long_context, &e);
	/* The call holds its own copy: the request's goes now. */
	free(q->body);
	q->body = NULL;
	q->body_len = q->body_cap = 0;
	if (!k) {
		gw_refuse(c, t, e.status, e.code, e.extra, e.msg);
		return;
	}
	k->conn = c;
	c->call = k;
	/* Every header but the key and the framing passes through. */
	for (size_t i = 0; i < q->nh; i++)
		if (!hop_header(q->h[i].name) &&
		    add_header(&k->hdrs, "%s: %s", q->h[i].name,
			       q->h[i].value) < 0) {
			r = -ENOMEM;
			goto fail;
		}
	p = broker_provider_for(g->spd, api);
	r = start_transfer(k, p, broker_provider_key(g->spd, p), q->target);
	if (r < 0)
		goto fail;
	return;
fail:
	call_abort_start(k, r);
	c->call = NULL;
	k->conn = NULL;
	call_unlink_free(k);
	gw_refuse(c, t, 500, "INTERNAL", NULL, "the call could not be started");
}

/* ---- start and stop ------------------------------------------------ */

static int listen_tcp(struct gateway *g, const char *spec, char *errbuf,
		      size_t errlen)
{
	char host[64];
	const char *colon = strrchr(spec, ':');
	struct sockaddr_storage ss;
	int port, r, len = sizeof(ss);

	if (!colon || (size_t)(colon - spec) >= sizeof(host))
		goto bad;
	snprintf(host, sizeof(host), "%.*s", (int)(colon - spec), spec);
	port = atoi(colon + 1);
	if (port < 0 || port > 65535)
		goto bad;
	if (uv_ip4_addr(host, port, (struct sockaddr_in *)&ss) < 0 ||
	    (ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24) != 127)
		goto bad;
	uv_tcp_init(g->spd->loop, &g->tcp);
	g->tcp.data = g;
	g->tcp_on = true;
	g->open_handles++;
	r = uv_tcp_bind(&g->tcp, (struct sockaddr *)&ss, 0);
	if (r == 0)
		r = uv_listen((uv_stream_t *)&g->tcp, 128, gw_on_connection);
	if (r == 0)
		r = uv_tcp_getsockname(&g->tcp, (struct sockaddr *)&ss, &len);
	if (r < 0) {
		snprintf(errbuf, errlen, "broker: cannot listen on %s: %s",
			 spec, uv_strerror(r));
		return r;
	}
	g->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return 0;
bad:
	snprintf(errbuf, errlen,
		 "broker.listen \"%s\" must be a loopback IPv4 address and "
		 "port, such as 127.0.0.1:0 (or none)",
		 spec);
	return -EINVAL;
}

int gateway_start(struct spd *spd, const char *listen, const char *sock_path,
		  struct gateway **ret, char *errbuf, size_t errlen)
{
	struct gateway *g = calloc(1, sizeof(*g));
	int r;

	if (!g)
		return -ENOMEM;
	g->spd = spd;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	g->multi = curl_multi_init();
	if (!g->multi) {
		free(g);
		return -ENOMEM;
	}
	curl_multi_setopt(g->multi, CURLMOPT_SOCKETFUNCTION, sock_cb);
	curl_multi_setopt(g->multi, CURLMOPT_SOCKETDATA, g);
	curl_multi_setopt(g->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
	curl_multi_setopt(g->multi, CURLMOPT_TIMERDATA, g);
	curl_multi_setopt(g->multi, CURLMOPT_MAXCONNECTS,
			  (long)GATEWAY_PROVIDER_CONNS_KEPT);
	uv_timer_init(spd->loop, &g->curl_timer);
	g->curl_timer.data = g;
	g->open_handles++;
	uv_timer_init(spd->loop, &g->stall_timer);
	g->stall_timer.data = g;
	g->open_handles++;
	uv_timer_init(spd->loop, &g->refusal_timer);
	g->refusal_timer.data = g;
	g->open_handles++;
	snprintf(g->sock_path, sizeof(g->sock_path), "%s", sock_path);
	if (listen && listen[0]) {
		r = listen_tcp(g, listen, errbuf, errlen);
		if (r < 0)
			goto fail;
	}
	uv_pipe_init(spd->loop, &g->pipe, 0);
	g->pipe.data = g;
	g->pipe_on = true;
	g->open_handles++;
	unlink(sock_path);
	{
		mode_t old = umask(0177);

		r = uv_pipe_bind(&g->pipe, sock_path);
		umask(old);
	}
	if (r == 0)
		r = uv_listen((uv_stream_t *)&g->pipe, 128, gw_on_connection);
	if (r < 0) {
		snprintf(errbuf, errlen, "broker: cannot listen on %s: %s",
			 sock_path, uv_strerror(r));
		goto fail;
	}
	*ret = g;
	return 0;
fail:
	gateway_stop(g);
	return r;
}

static void on_listener_closed(uv_handle_t *h)
{
	struct gw_listener *l = (struct gw_listener *)(void *)h;
	struct gateway *g = h->data;

	free(l);
	g->open_handles--;
	gw_maybe_free(g);
}

static void listener_close(struct gateway *g, struct gw_listener *l)
{
	if (l->prev)
		l->prev->next = l->next;
	else
		g->listeners = l->next;
	if (l->next)
		l->next->prev = l->prev;
	uv_close((uv_handle_t *)&l->tcp, on_listener_closed);
}

int gateway_adopt(struct gateway *g, int fd, const char *turn_id,
		  uint64_t *ret_id)
{
	struct gw_listener *l;
	int r;

	if (!g || g->stopping || !turn_id ||
	    strlen(turn_id) > BROKER_TURN_ID_LEN) {
		close(fd);
		return -EINVAL;
	}
	l = calloc(1, sizeof(*l));
	if (!l) {
		close(fd);
		return -ENOMEM;
	}
	uv_tcp_init(g->spd->loop, &l->tcp);
	l->tcp.data = g;
	l->id = ++g->next_listener;
	snprintf(l->turn, sizeof(l->turn), "%s", turn_id);
	g->open_handles++;
	l->next = g->listeners;
	if (g->listeners)
		g->listeners->prev = l;
	g->listeners = l;
	r = uv_tcp_open(&l->tcp, fd);
	if (r < 0)
		close(fd); /* not taken by the handle */
	else
		r = uv_listen((uv_stream_t *)&l->tcp, GATEWAY_RUN_BACKLOG,
			      gw_on_connection);
	if (r < 0) {
		listener_close(g, l);
		return r;
	}
	*ret_id = l->id;
	return 0;
}

void gateway_release(struct gateway *g, uint64_t id)
{
	if (!g)
		return;
	for (struct gw_listener *l = g->listeners; l; l = l->next)
		if (l->id == id) {
			listener_close(g, l);
			return;
		}
}

int gateway_port(struct gateway *g)
{
	return g ? g->port : 0;
}

void gateway_stop(struct gateway *g)
{
	if (!g)
		return;
	g->stopping = true;
	while (g->calls) {
		struct gw_call *k = g->calls;

		call_done(k, CURLE_ABORTED_BY_CALLBACK);
	}
	for (struct gw_conn *c = g->conns; c; c = c->next)
		gw_conn_close(c);
	while (g->listeners)
		listener_close(g, g->listeners);
	if (g->tcp_on)
		uv_close((uv_handle_t *)&g->tcp, on_gw_handle_closed);
	if (g->pipe_on) {
		uv_close((uv_handle_t *)&g->pipe, on_gw_handle_closed);
		unlink(g->sock_path);
	}
	uv_close((uv_handle_t *)&g->curl_timer, on_gw_handle_closed);
	uv_close((uv_handle_t *)&g->stall_timer, on_gw_handle_closed);
	/* Counted refusals are journaled now: nothing is lost. */
	refusals_sweep(g, true);
	uv_close((uv_handle_t *)&g->refusal_timer, on_gw_handle_closed);
}

/* ---- model.call ---------------------------------------------------- */

void m_model_call(struct call *c)
{
	struct spd *spd = call_spd(c);
	struct gateway *g = broker_gateway(spd);
	const struct call_principal *who = call_principal(c);
	json_t *params = call_params(c);
	const char *id = json_string_value(json_object_get(params, "turn"));
	const char *apis = json_string_value(json_object_get(params, "api"));
	const char *path = json_string_value(json_object_get(params, "path"));
	json_t *body = json_object_get(params, "body");
	json_t *headers = json_object_get(params, "headers"), *v;
	struct broker_turn *t = broker_turn_by_id(spd, id);
	enum broker_api api, rapi;
	bool count_only, has_version = false, long_context = false;
	char rpath[64], *text;
	const char *name;
	struct prep e;
	struct gw_call *k;

	if (!g) {
		call_error(c, RPC_E_INTERNAL, NULL,
			   "the model broker is not running");
		return;
	}
	if (t && !who->operator&&(!who->session_id ||
				  strcmp(t->session, who->session_id) != 0))
		t = NULL;
	/* An idle-expired turn is refused like an ended one (and ended
	 * now): using it does not revive it. */
	if (!t || !broker_turn_live(spd, t)) {
		call_error(c, RPC_E_UNAUTHORIZED, NULL,
			   "no live turn %s for this caller", id);
		return;
	}
	if (strcmp(apis, "anthropic") == 0)
		api = BROKER_API_ANTHROPIC;
	else if (strcmp(apis, "openai") == 0)
		api = BROKER_API_OPENAI;
	else {
		call_error(c, RPC_E_BAD_PARAMS, NULL,
			   "api must be \"anthropic\" or \"openai\"");
		return;
	}
	if (!path)
		path = api == BROKER_API_ANTHROPIC ? "/v1/messages"
						   : "/v1/chat/completions";
	if (route(path, &rapi, &count_only, rpath, sizeof(rpath)) < 0 ||
	    rapi != api || strchr(path, '?')) {
		call_error(c, RPC_E_BAD_PARAMS, NULL,
			   "path %s is not a route of the %s api", path, apis);
		return;
	}
	if (json_is_true(json_object_get(body, "stream"))) {
		call_error(c, RPC_E_BAD_PARAMS, NULL,
			   "model.call does not stream: use the HTTP "
			   "endpoint for \"stream\": true");
		return;
	}
	json_object_foreach(headers, name, v)
	{
		const char *s = json_string_value(v);

		if (!s || strpbrk(s, "\r\n") || strpbrk(name, "\r\n: ")) {
			call_error(c, RPC_E_BAD_PARAMS, NULL,
				   "headers must map names to strings "
				   "without line breaks");
			return;
		}
	}
	text = json_dumps(body, JSON_COMPACT);
	if (!text) {
		call_error(c, RPC_E_INTERNAL, NULL, "out of memory");
		return;
	}
	json_object_foreach(headers, name, v)
	{
		if (strcasecmp(name, "anthropic-beta") == 0 &&
		    strstr(json_string_value(v), "context-1m"))
			long_context = true;
	}
	k = prepare(g, t, api, count_only, rpath, text, strlen(text),
		    long_context, &e);
	free(text);
	if (!k) {
		json_t *d = e.extra;

		call_error(c,
			   e.status == 402   ? RPC_E_BUDGET_EXCEEDED
			   : e.status >= 500 ? RPC_E_INTERNAL
					     : RPC_E_BAD_PARAMS,
			   d, "%s", e.msg);
		return;
	}
	k->rpc = c;
	json_object_foreach(headers, name, v)
	{
		char lower[128];
		size_t i;

		for (i = 0; name[i] && i < sizeof(lower) - 1; i++)
			lower[i] = (char)tolower((unsigned char)name[i]);
		lower[i] = '\0';
		if (hop_header(lower) || strcmp(lower, "content-type") == 0)
			continue;
		if (strcmp(lower, "anthropic-version") == 0)
			has_version = true;
		add_header(&k->hdrs, "%s: %s", name, json_string_value(v));
	}
	add_header(&k->hdrs, "Content-Type: application/json");
	if (api == BROKER_API_ANTHROPIC && !has_version)
		add_header(&k->hdrs, "anthropic-version: 2023-06-01");
	{
		const struct broker_provider *p = broker_provider_for(spd, api);

		if (start_transfer(k, p, broker_provider_key(spd, p), rpath) <
		    0) {
			call_abort_start(k, -EIO);
			k->rpc = NULL;
			call_unlink_free(k);
			call_error(c, RPC_E_INTERNAL, NULL,
				   "the call could not be started");
		}
	}
}

/*
 * The broker's HTTP endpoint (daemon/broker/gateway.h): turn keys
 * checked and replaced by the provider's, the worst case reserved, the
 * request forwarded with libcurl multi on spd's loop and the response
 * streamed back through the redactor, usage settled; model.call.
 */
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
#include "daemon/broker/bound.h"
#include "daemon/broker/broker.h"
#include "daemon/transport/call.h"
#include "daemon/broker/gateway.h"
#include "daemon/broker/gateway_priv.h"
#include "daemon/broker/gw_curl.h"
#include "daemon/session/labels.h"
#include "daemon/broker/http.h"
#include "daemon/journal/journal.h"
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
	struct price price; /* as judged: a reload does not change it */
	char model[PRICE_MODEL_NAME_MAX + 1];
	char provider[64];
	char path[GATEWAY_PATH_MAX];
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
	/* Reply bytes (chunk data) not yet written: out at the end of the
	 * curl event that brought them (flush_dirty), with the last chunk
	 * when the reply ends in the same event; on g->dirty meanwhile. */
	struct buf pend;
	bool dirty;
	struct gw_call *next_dirty;
	uint64_t start_ms;
	/* When the provider last sent a byte (or the call began), and how
	 * long it may then stay silent. */
	uint64_t rx_ms, stall_ms;
	char prices_hash[65];
	/* The labels the conversation carries (label -> what) and the
	 * agent's own tools in it, for the row (gw_labels.c). */
	json_t *labels, *agent_tools;
	struct gw_call *prev, *next;
};

void gw_maybe_free(struct gateway *g)
{
	if (g->stopping && g->open_handles == 0 && !g->conns) {
		json_decref(g->label_cache);
		free(g->socks);
		free(g);
	}
}

static void on_gw_handle_closed(uv_handle_t *h)
{
	struct gateway *g = h->data;

	g->open_handles--;
	gw_maybe_free(g);
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
	if (k->dirty) {
		struct gw_call **pp = &g->dirty;

		while (*pp && *pp != k)
			pp = &(*pp)->next_dirty;
		if (*pp)
			*pp = k->next_dirty;
	}
	if (k->easy) {
		gw_curlf.multi_remove_handle(g->multi, k->easy);
		gw_easy_put(g, k->easy);
	}
	if (k->hdrs)
		gw_curlf.slist_free_all(k->hdrs);
	buf_free(&k->pend);
	free(k->body);
	usage_free(&k->usage);
	redact_stream_free(k->rs);
	for (size_t i = 0; i < k->n_resp_headers; i++)
		free(k->resp_headers[i]);
	buf_free(&k->rpc_body);
	buf_free(&k->head);
	json_decref(k->labels);
	json_decref(k->agent_tools);
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
	gw_curlf.easy_getinfo(k->easy, CURLINFO_RESPONSE_CODE, &status);
	gw_curlf.easy_getinfo(k->easy, CURLINFO_CONTENT_TYPE, &ctype);
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

/* The head if not yet sent, the bytes pending and then out (taken; NULL
 * for none) as a chunk, and the last chunk when last: one write. */
static void send_chunk(struct gw_call *k, struct buf *out, bool last)
{
	if (out && out->len && buf_append(&k->pend, out->data, out->len) < 0) {
		buf_free(&k->pend);
		if (k->conn)
			gw_conn_close(k->conn);
		return;
	}
	if (k->conn)
		gw_conn_chunk(k->conn, &k->head, &k->pend, last);
	buf_free(&k->pend);
}

/* What the calls' curl event brought them, out: a write a call. */
void gw_flush_dirty(struct gateway *g)
{
	while (g->dirty) {
		struct gw_call *k = g->dirty;

		g->dirty = k->next_dirty;
		k->dirty = false;
		k->next_dirty = NULL;
		send_chunk(k, NULL, false);
	}
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

static enum usage_api usage_api_of(enum broker_api api)
{
	return api == BROKER_API_ANTHROPIC ? USAGE_ANTHROPIC
	       : api == BROKER_API_GEMINI  ? USAGE_GEMINI
					   : USAGE_OPENAI;
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
		/* Out at the end of this curl event (flush_dirty), the head
		 * with them even when the redactor holds every byte of
		 * these. */
		if (k->pend.len == 0) {
			buf_free(&k->pend);
			k->pend = out;
			out = (struct buf)BUF_INIT;
		} else if (buf_append(&k->pend, out.data, out.len) < 0) {
			buf_free(&out);
			if (k->conn)
				gw_conn_close(k->conn);
			return;
		}
		if (!k->dirty) {
			k->dirty = true;
			k->next_dirty = k->g->dirty;
			k->g->dirty = k;
		}
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

		gw_curlf.easy_getinfo(k->easy, CURLINFO_CONTENT_TYPE, &ctype);
		usage_init(
		    &k->usage, usage_api_of(k->api),
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
	int64_t row;
	json_t *d;

	if (k->easy)
		gw_curlf.easy_getinfo(k->easy, CURLINFO_RESPONSE_CODE, &status);
	if (!k->head_sent)
		usage_init(&k->usage, usage_api_of(k->api), false);
	usage_finish(&k->usage);
	if (k->count_only) {
		cost = 0;
		outcome = res == CURLE_OK ? "ok" : "failed";
	} else if (res == CURLE_OK && k->usage.complete) {
		cost = price_cost(&k->price, &k->usage.u);
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
				 gw_curlf.easy_strerror(res));
			body = gw_error_body(k->api, st, "PROVIDER-FAILED", msg,
					     NULL);
			gw_conn_respond(k->conn, st, "application/json",
					body ? body : "{}");
			free(body);
		} else {
			/* Mid-stream: what came is out, with no final chunk,
			 * so the client sees a truncated response, never a
			 * complete-looking one. */
			send_chunk(k, NULL, false);
			if (k->conn)
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
	    res == CURLE_OK ? NULL : gw_curlf.easy_strerror(res));
	/* The output limit spd set is part of what the provider was
	 * asked. */
	if (d && k->limit_set > 0)
		json_object_set_new(d, "output_limit_set",
				    json_integer(k->limit_set));
	if (d && k->choices > 1)
		json_object_set_new(d, "choices", json_integer(k->choices));
	/* What the conversation carries (issue 41): its labels, and the
	 * agent's own tools that read what spd did not serve. */
	if (d) {
		json_object_set_new(d, "labels", gw_labels_names(k->labels));
		/* And the session's whole set at that moment, as every row
		 * of a session lists it. */
		if (k->session[0] && k->g->spd->sessions)
			json_object_set_new(
			    d, "session_labels",
			    session_labels_json(k->g->spd->sessions,
						k->session));
		if (json_array_size(k->agent_tools))
			json_object_set(d, "agent_tools", k->agent_tools);
	}
	row = gw_journal(
	    k->g, k->session, d, "%s %s %ld %s: in %lld out %lld, %s USD (%s)",
	    k->provider, k->model, status, outcome, (long long)k->usage.u.input,
	    (long long)k->usage.u.output, costbuf, k->turn_id);
	/* The row first: the labels new to the session entered there. */
	gw_labels_enter(k->g, k->session, k->labels, row);
	if (k->rpc)
		finish_rpc(k, status, cost,
			   res == CURLE_OK ? NULL
					   : gw_curlf.easy_strerror(res));
	if (k->conn) {
		k->conn->call = NULL;
		k->conn = NULL;
	}
	call_unlink_free(k);
}

void gw_check_done(struct gateway *g)
{
	CURLMsg *m;
	int left;

	while ((m = gw_curlf.multi_info_read(g->multi, &left))) {
		struct gw_call *k = NULL;

		if (m->msg != CURLMSG_DONE)
			continue;
		gw_curlf.easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &k);
		if (k)
			call_done(k, m->data.result);
	}
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
					   "x-goog-api-key",
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
	n = gw_curlf.slist_append(*l, s);
	explicit_bzero(s, strlen(s));
	free(s);
	if (!n)
		return -ENOMEM;
	*l = n;
	return 0;
}

/* What the client and the journal are told when a call could not be
 * started: why libcurl did not load, or the plain failure. */
static const char *start_error(struct gateway *g, int r, char *buf, size_t len)
{
	if (r != -ELIBACC)
		return "the call could not be started";
	snprintf(buf, len,
		 "the call could not be started: the provider client (%s) "
		 "did not load: %s",
		 GW_CURL_SONAME, g->curl_err);
	return buf;
}

static int start_transfer(struct gw_call *k, const struct broker_provider *p,
			  const char *key, const char *target)
{
	const struct broker_config *cfg = broker_config(k->g->spd);
	char *url = NULL;
	int r;

	r = gw_curl(k->g);
	if (r < 0)
		return r;
	k->easy = gw_easy_get(k->g);
	if (!k->easy)
		return -ENOMEM;
	if (asprintf(&url, "%s%s", p->url, target) < 0)
		return -ENOMEM;
	if (p->api == BROKER_API_ANTHROPIC)
		r = add_header(&k->hdrs, "x-api-key: %s", key);
	else if (p->api == BROKER_API_GEMINI)
		r = add_header(&k->hdrs, "x-goog-api-key: %s", key);
	else
		r = add_header(&k->hdrs, "Authorization: Bearer %s", key);
	if (r == 0)
		r = add_header(&k->hdrs, "Expect:");
	if (r < 0) {
		free(url);
		return r;
	}
	/* What differs from call to call (easy_get set the rest). */
	gw_curlf.easy_setopt(k->easy, CURLOPT_URL, url);
	free(url);
	gw_curlf.easy_setopt(k->easy, CURLOPT_PRIVATE, k);
	gw_curlf.easy_setopt(k->easy, CURLOPT_POSTFIELDS, k->body);
	gw_curlf.easy_setopt(k->easy, CURLOPT_POSTFIELDSIZE_LARGE,
			     (curl_off_t)k->body_len);
	gw_curlf.easy_setopt(k->easy, CURLOPT_HTTPHEADER, k->hdrs);
	gw_curlf.easy_setopt(k->easy, CURLOPT_WRITEFUNCTION, on_body);
	gw_curlf.easy_setopt(k->easy, CURLOPT_WRITEDATA, k);
	gw_curlf.easy_setopt(k->easy, CURLOPT_HEADERFUNCTION, on_header);
	gw_curlf.easy_setopt(k->easy, CURLOPT_HEADERDATA, k);
	if (gw_curlf.multi_add_handle(k->g->multi, k->easy) != CURLM_OK)
		return -EIO;
	/* A provider silent this long has stalled: the call ends. */
	stall_watch(k, (uint64_t)cfg->provider_timeout_s * 1000);
	return 0;
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

	(void)path;
	if (api == BROKER_API_GEMINI)
		return gw_gemini_max_output(body);
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

/* The bytes spd may add to a body when it sets an output limit: the
 * field's name and digits, with room to spare. */
#define GATEWAY_LIMIT_SLACK 64

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
	if (limit > 0 && k->api == BROKER_API_GEMINI) {
		json_t *gc = json_object_get(o, "generationConfig");

		if (!gc)
			gc = json_object_get(o, "generation_config");
		if (!json_is_object(gc)) {
			gc = json_object();
			json_object_set_new(o, "generationConfig", gc);
		}
		json_object_set_new(gc,
				    json_object_get(gc, "max_output_tokens")
					? "max_output_tokens"
					: "maxOutputTokens",
				    json_integer(limit));
		changed = true;
	} else if (limit > 0) {
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
			   struct broker_refusal *e)
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

/*
 * Check and price a request body, and make the call: everything up to
 * the reservation is synchronous, so two calls never reserve the same
 * room.  Returns the call, or NULL with e (status, code, message,
 * extra data) set.  rmodel, rstream: what the route says (gw_route()):
 * Gemini's model and streaming are in its path, not its body.
 */
static struct gw_call *prepare(struct gateway *g, struct broker_turn *t,
			       enum broker_api api, bool count_only,
			       const char *path, const char *rmodel,
			       bool rstream, const char *body, size_t body_len,
			       bool long_context, struct broker_refusal *e)
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
			 api == BROKER_API_ANTHROPIC ? "anthropic"
			 : api == BROKER_API_GEMINI  ? "gemini"
						     : "openai");
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
	model = api == BROKER_API_GEMINI
		    ? rmodel
		    : json_string_value(json_object_get(o, "model"));
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
	    !bound_request(o, api, path, long_context, &choices, &extra, e))
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
	k->price = *pr;
	snprintf(k->model, sizeof(k->model), "%s", model);
	snprintf(k->provider, sizeof(k->provider), "%s", p->name);
	snprintf(k->path, sizeof(k->path), "%s", path);
	snprintf(k->prices_hash, sizeof(k->prices_hash), "%s",
		 cfg->prices.hash);
	k->stream = rstream || json_is_true(json_object_get(o, "stream"));
	if (gw_labels_classify(g, t->session, api, path, model, o, &k->labels,
			       &k->agent_tools) < 0)
		goto oom;
	gw_labels_enter_now(g, t->session, k->labels, model);
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
	if (k)
		call_unlink_free(k); /* not linked yet: only freed */
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

void gw_handle_request(struct gw_conn *c)
{
	struct gateway *g = c->g;
	struct http_request *q = &c->req;
	const char *key = http_request_header(q, "x-api-key");
	const char *auth = http_request_header(q, "authorization");
	const struct broker_provider *p;
	struct broker_turn *t;
	enum broker_api api;
	bool count_only, rstream, routed, long_context = false;
	char path[GATEWAY_PATH_MAX], model[PRICE_MODEL_NAME_MAX + 1];
	char *target = NULL, *qkey = NULL;
	struct broker_refusal e;
	struct gw_call *k;
	char errbuf[384];
	int r;

	routed = gw_route(q->target, &api, &count_only, &rstream, path,
			  sizeof(path), model, sizeof(model)) == 0;
	if (routed && api == BROKER_API_GEMINI) {
		target = gw_query_take_key(q->target, &qkey);
		if (!target) {
			gw_refuse(c, NULL, 500, "INTERNAL", NULL,
				  "out of memory");
			return;
		}
		if (!key)
			key = http_request_header(q, "x-goog-api-key");
		if (!key)
			key = qkey;
	}
	if (!key && auth && strncasecmp(auth, "Bearer ", 7) == 0)
		key = auth + 7;
	/* Again now the body is in: the turn may have ended meanwhile. */
	t = gw_conn_turn(c, key);
	if (!routed) {
		/* The turn its key names, if any, is journaled with it. */
		gw_refuse(c, t, 404, "NOT-FOUND", NULL, GATEWAY_ROUTES_MSG);
		goto out;
	}
	if (strcmp(q->method, "POST") != 0) {
		gw_refuse(c, t, 405, "BAD-REQUEST", NULL,
			  "only POST is served on this route");
		goto out;
	}
	if (!t) {
		gw_refuse(c, NULL, 401, "UNAUTHORIZED", NULL,
			  key ? "the key is not a live turn key of this spd "
				"(unknown, ended or expired)"
			      : "no key: send the turn key as x-api-key, "
				"x-goog-api-key or Authorization: Bearer");
		goto out;
	}
	for (size_t i = 0; i < q->nh; i++)
		if (strcmp(q->h[i].name, "anthropic-beta") == 0 &&
		    strstr(q->h[i].value, "context-1m"))
			long_context = true;
	k = prepare(g, t, api, count_only, path, model, rstream, q->body,
		    q->body_len, long_context, &e);
	/* The call holds its own copy: the request's goes now. */
	free(q->body);
	q->body = NULL;
	q->body_len = q->body_cap = 0;
	if (!k) {
		gw_refuse(c, t, e.status, e.code, e.extra, e.msg);
		goto out;
	}
	k->conn = c;
	c->call = k;
	/* libcurl holds the headers' list: it is loaded first. */
	r = gw_curl(g);
	if (r < 0)
		goto fail;
	/* Every header but the key and the framing passes through. */
	for (size_t i = 0; i < q->nh; i++)
		if (!hop_header(q->h[i].name) &&
		    add_header(&k->hdrs, "%s: %s", q->h[i].name,
			       q->h[i].value) < 0) {
			r = -ENOMEM;
			goto fail;
		}
	p = broker_provider_for(g->spd, api);
	r = start_transfer(k, p, broker_provider_key(g->spd, p),
			   target ? target : q->target);
	if (r < 0)
		goto fail;
	goto out;
fail:
	call_abort_start(k, r);
	c->call = NULL;
	k->conn = NULL;
	call_unlink_free(k);
	gw_refuse(c, t, 500, "INTERNAL", NULL,
		  start_error(g, r, errbuf, sizeof(errbuf)));
out:
	if (qkey)
		explicit_bzero(qkey, strlen(qkey));
	free(qkey);
	free(target);
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
	/* The kept provider connections close, and their poll handles. */
	gw_multi_release(g);
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
	gw_refusals_sweep(g, true);
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
	bool count_only, rstream, has_version = false, long_context = false;
	char rpath[GATEWAY_PATH_MAX], rmodel[PRICE_MODEL_NAME_MAX + 1], *text;
	const char *name;
	struct broker_refusal e;
	const struct broker_provider *p;
	struct gw_call *k;
	char errbuf[384];
	int r;

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
	else if (strcmp(apis, "gemini") == 0)
		api = BROKER_API_GEMINI;
	else {
		call_error(c, RPC_E_BAD_PARAMS, NULL,
			   "api must be \"anthropic\", \"openai\" or "
			   "\"gemini\"");
		return;
	}
	/* Gemini's path names the model: no default. */
	if (!path && api != BROKER_API_GEMINI)
		path = api == BROKER_API_ANTHROPIC ? "/v1/messages"
						   : "/v1/chat/completions";
	if (!path ||
	    gw_route(path, &rapi, &count_only, &rstream, rpath, sizeof(rpath),
		     rmodel, sizeof(rmodel)) < 0 ||
	    rapi != api || strchr(path, '?')) {
		call_error(c, RPC_E_BAD_PARAMS, NULL,
			   "path %s is not a route of the %s api",
			   path ? path : "(none)", apis);
		return;
	}
	if (rstream || json_is_true(json_object_get(body, "stream"))) {
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
	k = prepare(g, t, api, count_only, rpath, rmodel, rstream, text,
		    strlen(text), long_context, &e);
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
	/* libcurl holds the headers' list: it is loaded first. */
	r = gw_curl(g);
	if (r == 0) {
		json_object_foreach(headers, name, v)
		{
			char lower[128];
			size_t i;

			for (i = 0; name[i] && i < sizeof(lower) - 1; i++)
				lower[i] =
				    (char)tolower((unsigned char)name[i]);
			lower[i] = '\0';
			if (hop_header(lower) ||
			    strcmp(lower, "content-type") == 0)
				continue;
			if (strcmp(lower, "anthropic-version") == 0)
				has_version = true;
			add_header(&k->hdrs, "%s: %s", name,
				   json_string_value(v));
		}
		add_header(&k->hdrs, "Content-Type: application/json");
		if (api == BROKER_API_ANTHROPIC && !has_version)
			add_header(&k->hdrs, "anthropic-version: 2023-06-01");
		p = broker_provider_for(spd, api);
		r = start_transfer(k, p, broker_provider_key(spd, p), rpath);
	}
	if (r < 0) {
		call_abort_start(k, r);
		k->rpc = NULL;
		call_unlink_free(k);
		call_error(c, RPC_E_INTERNAL, NULL, "%s",
			   start_error(g, r, errbuf, sizeof(errbuf)));
	}
}

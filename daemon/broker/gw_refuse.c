/*
 * The broker endpoint's refusals (daemon/broker/gateway_priv.h): answers
 * in the provider's shape (gw_api.c), the journal's rows of calls, and
 * repeated refusals counted into one row per kind and window.
 */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "daemon/broker/gateway.h"
#include "daemon/broker/gateway_priv.h"
#include "daemon/journal/journal.h"
#include "daemon/spd.h"
#include "daemon/transport/quota.h"

int64_t gw_journal(struct gateway *g, const char *session, json_t *detail,
		   const char *fmt, ...)
{
	char summary[512];
	int64_t row = 0;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(summary, sizeof(summary), fmt, ap);
	va_end(ap);
	/* Every row names its decision and the rule behind it, as a run's
	 * row names the gate's: a refusal its code, a forwarded call the
	 * turn's cap it was reserved within. */
	if (json_is_object(detail) && !json_object_get(detail, "decision")) {
		const char *code =
		    json_string_value(json_object_get(detail, "code"));
		char rule[48];
		size_t n = 0;

		if (code) {
			n = (size_t)snprintf(rule, sizeof(rule), "broker.");
			for (; *code && n + 1 < sizeof(rule); code++)
				rule[n++] = (char)(*code >= 'A' && *code <= 'Z'
						       ? *code - 'A' + 'a'
						       : *code);
			rule[n] = '\0';
		} else {
			snprintf(rule, sizeof(rule), "broker.within-cap");
		}
		json_object_set_new(detail, "decision",
				    json_string(code ? "deny" : "allow"));
		json_object_set_new(detail, "rule", json_string(rule));
	}
	if (g->spd->journal)
		row = journal_append_json(
		    g->spd->journal, session && session[0] ? session : NULL,
		    "broker", "model.call", summary, detail, 0);
	json_decref(detail);
	return row;
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
	gw_journal(g, r->session, d,
		   "refused %d %s %u more times in %llus: %s %s%s%s", r->status,
		   r->code, r->count, (unsigned long long)secs, r->method,
		   r->path, r->turn[0] ? " " : "", r->turn);
	r->count = 0;
}

void gw_refusals_sweep(struct gateway *g, bool all)
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
	gw_refusals_sweep(t->data, false);
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
	enum broker_api api = gw_api_of_path(c->req.target);
	char *body = gw_error_body(api, status, code, msg, json_incref(extra));
	const struct broker_turn *who = t;
	char path[GATEWAY_PATH_MAX];
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
		gw_journal(c->g, who ? who->session : NULL, d,
			   "refused %d %s: %s", status, code, msg);
	}
	json_decref(extra);
	gw_conn_respond(c, status, "application/json",
			body ? body : "{\"error\":\"refused\"}");
	free(body);
}

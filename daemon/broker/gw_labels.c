/*
 * The provenance labels of a model call's conversation
 * (daemon/broker/gateway_priv.h, issue 41): each tool result in it
 * carries the labels of what spd served, when spd served it
 * (session_served_match), else agent-tool or network:HOST by the tool
 * that read it (daemon/broker/convo.c); a path a tool was given that
 * [provenance] private names adds private; a conversation holding the
 * model's answers carries model.  The call's model.call row lists them,
 * and the session's set gains those it did not hold, at that row.
 *
 * Every call re-sends the whole conversation, so a result is classified
 * once: what it brought is kept in a bounded cache, least recently used
 * first out, by a digest of the session, the tool's name and input and
 * the result's text.  A later call only hashes the results it holds.
 */
#include <errno.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/broker/convo.h"
#include "daemon/broker/gateway_priv.h"
#include "daemon/journal/journal.h"
#include "daemon/log.h"
#include "daemon/session/labels.h"
#include "daemon/session/session.h"
#include "daemon/spd.h"

/* Digest of a result, for the cache: 128 bits, as hex. */
#define LABELS_DIGEST 16

struct classify {
	struct gateway *g;
	const char *session;
	/* label -> what, in order of first sight; [{name, what}]. */
	json_t *labels, *tools;
	/* The session's workspace, looked up once when [provenance]
	 * private is set and a tool was given a path. */
	struct session_info *info;
	bool info_done;
	/* Bytes of results still to be matched in this call. */
	size_t budget;
};

static int hash_dump(const char *b, size_t n, void *data)
{
	crypto_generichash_update(data, (const unsigned char *)b, n);
	return 0;
}

static void digest_of(const char *session, const struct gw_convo_result *r,
		      char hex[2 * LABELS_DIGEST + 1])
{
	crypto_generichash_state st;
	unsigned char d[LABELS_DIGEST];
	const char *name = r->name ? r->name : "";

	crypto_generichash_init(&st, NULL, 0, sizeof(d));
	crypto_generichash_update(&st, (const unsigned char *)session,
				  strlen(session) + 1);
	crypto_generichash_update(&st, (const unsigned char *)name,
				  strlen(name) + 1);
	if (r->input)
		json_dump_callback(r->input, hash_dump, &st,
				   JSON_COMPACT | JSON_ENCODE_ANY |
				       JSON_SORT_KEYS);
	crypto_generichash_update(&st, (const unsigned char *)"", 1);
	crypto_generichash_update(&st, (const unsigned char *)r->text, r->len);
	crypto_generichash_final(&st, d, sizeof(d));
	sodium_bin2hex(hex, 2 * LABELS_DIGEST + 1, d, sizeof(d));
}

/* The workspace of the session, or NULL. */
static const char *workspace(struct classify *x)
{
	if (!x->info_done) {
		x->info_done = true;
		if (!x->session[0] || !x->g->spd->sessions ||
		    session_get(x->g->spd->sessions, x->session, &x->info) < 0)
			x->info = NULL;
	}
	return x->info ? x->info->worktree : NULL;
}

/* What result r brings: {"labels": {label: what}, "tool": {name, what}}
 * (the tool only when spd did not serve r).  New reference, or NULL.
 * *ret_keep is cleared when r was not matched (the call's budget was
 * spent): what it brings is not to be kept. */
static json_t *bring(struct classify *x, const struct gw_convo_result *r,
		     bool *ret_keep)
{
	struct spd *spd = x->g->spd;
	char label[SESSION_LABEL_MAX + 1], what[SESSION_LABEL_WHAT_MAX + 1];
	json_t *served = NULL, *out = json_object(), *labels = json_object();
	const char *path = gw_convo_input_path(r->input);
	json_t *v;
	size_t i;

	if (!out || !labels || json_object_set_new(out, "labels", labels) < 0)
		goto oom;
	gw_convo_tool_label(r->name, r->input, label, sizeof(label), what,
			    sizeof(what));
	if (x->session[0] && spd->sessions && x->budget > 0) {
		size_t n =
		    r->len < GATEWAY_LABEL_SCAN ? r->len : GATEWAY_LABEL_SCAN;

		x->budget -= n < x->budget ? n : x->budget;
		served =
		    session_served_match(spd->sessions, x->session, r->text, n);
	} else if (x->session[0] && spd->sessions) {
		*ret_keep = false;
	}
	if (json_array_size(served) > 0) {
		json_array_foreach(served, i, v)
		{
			if (json_is_string(v) &&
			    json_object_set_new(labels, json_string_value(v),
						json_string(what)) < 0)
				goto oom;
		}
	} else if (json_object_set_new(labels, label, json_string(what)) < 0 ||
		   json_object_set_new(out, "tool",
				       json_pack("{s:s, s:s}", "name",
						 r->name ? r->name : "?",
						 "what", what)) < 0) {
		goto oom;
	}
	if (path && spd->config.prov_private &&
	    gw_convo_path_private(path, workspace(x), spd->config.prov_private))
		json_object_set_new(labels, "private", json_string(what));
	json_decref(served);
	return out;
oom:
	json_decref(served);
	json_decref(out);
	return NULL;
}

/* What a result brings (b, borrowed) joins the call's. */
static int merge(struct classify *x, json_t *b)
{
	json_t *tool, *v;
	const char *k;

	json_object_foreach(json_object_get(b, "labels"), k, v)
	{
		if (!json_object_get(x->labels, k) &&
		    json_object_set(x->labels, k, v) < 0)
			return -ENOMEM;
	}
	tool = json_object_get(b, "tool");
	if (tool && json_array_size(x->tools) < GATEWAY_AGENT_TOOLS_MAX &&
	    json_array_append(x->tools, tool) < 0)
		return -ENOMEM;
	return 0;
}

static int on_result(void *data, const struct gw_convo_result *r)
{
	struct classify *x = data;
	struct gateway *g = x->g;
	char key[2 * LABELS_DIGEST + 1];
	json_t *b;

	digest_of(x->session, r, key);
	b = json_object_get(g->label_cache, key);
	if (b) {
		/* Used again: to the end of the order, the newest. */
		json_incref(b);
		json_object_del(g->label_cache, key);
		g->label_hits++;
	} else {
		bool keep = true;

		b = bring(x, r, &keep);
		if (!b)
			return -ENOMEM;
		g->label_misses++;
		if (!keep) {
			int rc = merge(x, b);

			json_decref(b);
			return rc;
		}
	}
	if (json_object_set_new(g->label_cache, key, b) < 0)
		return -ENOMEM;
	while (json_object_size(g->label_cache) > GATEWAY_LABEL_CACHE) {
		/* The least recently used: the first in the object's order. */
		void *it = json_object_iter(g->label_cache);

		json_object_del(g->label_cache, json_object_iter_key(it));
	}
	return merge(x, b);
}

int gw_labels_classify(struct gateway *g, const char *session,
		       enum broker_api api, const char *path, const char *model,
		       json_t *body, json_t **ret_labels, json_t **ret_tools)
{
	struct classify x = {.g = g,
			     .session = session ? session : "",
			     .budget = GATEWAY_LABEL_BUDGET};
	bool assistant = false;
	int r = -ENOMEM;

	if (!g->label_cache && !(g->label_cache = json_object()))
		return -ENOMEM;
	x.labels = json_object();
	x.tools = json_array();
	if (!x.labels || !x.tools)
		goto out;
	r = gw_convo_walk(body, api, path, on_result, &x, &assistant);
	if (r < 0)
		goto out;
	if (assistant &&
	    json_object_set_new(x.labels, "model",
				json_string(model ? model : "")) < 0) {
		r = -ENOMEM;
		goto out;
	}
	*ret_labels = x.labels;
	*ret_tools = x.tools;
	x.labels = x.tools = NULL;
	r = 0;
out:
	json_decref(x.labels);
	json_decref(x.tools);
	session_info_free(x.info);
	return r;
}

json_t *gw_labels_names(json_t *labels)
{
	json_t *a = json_array(), *v;
	const char *k;

	if (!a)
		return NULL;
	json_object_foreach(labels, k, v)
	{
		if (json_array_append_new(a, json_string(k)) < 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

void gw_labels_enter(struct gateway *g, const char *session, json_t *labels,
		     int64_t row)
{
	struct session_store *st = g->spd->sessions;
	json_t *v;
	const char *k;

	if (!session || !session[0] || !st)
		return;
	json_object_foreach(labels, k, v)
	{
		int r;

		if (session_label_has(st, session, k))
			continue;
		r = session_label_add(st, session, k, row > 0 ? row : 0,
				      json_string_value(v));
		if (r < 0)
			log_error("session %s: label %s of a model call not "
				  "kept: %s",
				  session, k, strerror(-r));
	}
}

void gw_labels_enter_now(struct gateway *g, const char *session, json_t *labels,
			 const char *model)
{
	struct session_store *st = g->spd->sessions;
	json_t *fresh, *v, *d;
	const char *k;
	char summary[512];
	size_t n = 0;
	char *text;
	int64_t row;

	if (!session || !session[0] || !st || !g->spd->journal)
		return;
	fresh = json_array();
	json_object_foreach(labels, k, v)
	{
		if (!session_label_has(st, session, k))
			json_array_append_new(fresh, json_string(k));
	}
	if (!fresh || json_array_size(fresh) == 0) {
		json_decref(fresh);
		return;
	}
	n = (size_t)snprintf(summary, sizeof(summary),
			     "a conversation for %s brings", model);
	for (size_t i = 0; i < json_array_size(fresh) && n < sizeof(summary);
	     i++)
		n += (size_t)snprintf(
		    summary + n, sizeof(summary) - n, " %s",
		    json_string_value(json_array_get(fresh, i)));
	d = json_pack("{s:O, s:s}", "labels", fresh, "model", model);
	text = d ? json_dumps(d, JSON_COMPACT) : NULL;
	row = journal_append(g->spd->journal, session, "spd", "model.labels",
			     summary, text);
	free(text);
	json_decref(d);
	json_decref(fresh);
	gw_labels_enter(g, session, labels, row);
}

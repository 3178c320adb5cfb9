/*
 * The handlers of journal.query and journal.verify; journal.follow's
 * streaming lives with the server's followers.
 */
#include <stdlib.h>
#include <string.h>

#include "daemon/transport/call.h"
#include "daemon/journal/journal.h"
#include "daemon/transport/handlers.h"
#include "daemon/transport/server.h"
#include "daemon/spd.h"

/* What a front end may say about what it refused: short words, so that a
 * row stays one line and an agent cannot write essays into the journal
 * (its rate of rows is bounded by limits.session-journal-rate). */
#define CLIENT_REFUSED_WORD_MAX 32
#define CLIENT_REFUSED_DETAIL_MAX 200

/* Printable ASCII only, at most max bytes: the rest becomes '?' or is
 * cut. */
static json_t *plain_json(const char *s, size_t max)
{
	char out[CLIENT_REFUSED_DETAIL_MAX + 1];
	size_t n = 0;

	for (; s && s[n] && n < max && n < sizeof(out) - 1; n++)
		out[n] = s[n] >= 0x20 && s[n] < 0x7f ? s[n] : '?';
	out[n] = '\0';
	return json_string(out);
}

/* client.refused and client.note: a front end's word for the journal,
 * the call's own row (summary and detail). */
static void client_word(struct call *c, const char *verb, const char *key)
{
	json_t *p = call_params(c);
	json_t *front =
	    plain_json(json_string_value(json_object_get(p, "front")),
		       CLIENT_REFUSED_WORD_MAX);
	json_t *what = plain_json(json_string_value(json_object_get(p, "what")),
				  CLIENT_REFUSED_WORD_MAX);
	json_t *detail =
	    plain_json(json_string_value(json_object_get(p, "detail")),
		       CLIENT_REFUSED_DETAIL_MAX);

	call_set_summary(c, "%s %s %s", json_string_value(front), verb,
			 json_string_value(what));
	call_set_detail(c, json_pack("{s:o, s:o, s:o}", "front", front, "what",
				     what, key, detail));
	call_reply(c, json_pack("{s:b}", "journaled", 1));
}

void m_client_refused(struct call *c)
{
	client_word(c, "refused", "refused");
}

void m_client_note(struct call *c)
{
	client_word(c, "noted", "note");
}

static void query_done(void *data, int err, const struct journal_event *evs,
		       size_t n)
{
	struct call *c = data;
	json_t *arr;

	if (err < 0) {
		call_error(c, RPC_E_INTERNAL, NULL, "journal query failed: %s",
			   strerror(-err));
		return;
	}
	arr = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(arr, server_event_json(&evs[i]));
	call_reply(c, json_pack("{s:o}", "events", arr));
}

void m_journal_query(struct call *c)
{
	struct spd *spd = call_spd(c);
	const struct call_principal *who = call_principal(c);
	json_t *p = call_params(c);
	struct journal_filter f = {.since = 0, .limit = 100};
	json_t *v;
	int r;

	if ((v = json_object_get(p, "since")))
		f.since = json_integer_value(v);
	if ((v = json_object_get(p, "limit")))
		f.limit = (int)json_integer_value(v);
	if (f.limit <= 0 || f.limit > JOURNAL_QUERY_LIMIT_MAX)
		f.limit = JOURNAL_QUERY_LIMIT_MAX;
	if ((v = json_object_get(p, "kind")))
		f.kind = json_string_value(v);
	if ((v = json_object_get(p, "session")))
		f.session = json_string_value(v);
	/* An agent reads its own session's events and nothing else. */
	if (!who->operator) {
		if (f.session && strcmp(f.session, who->session_id) != 0) {
			call_error(c, RPC_E_UNAUTHORIZED, NULL,
				   "an agent may read only its own "
				   "session's journal");
			return;
		}
		f.session = who->session_id;
	}
	r = journal_query(spd->journal, &f, query_done, c);
	if (r < 0)
		call_error(c, RPC_E_INTERNAL, NULL, "journal query: %s",
			   strerror(-r));
}

void m_journal_follow(struct call *c)
{
	struct spd *spd = call_spd(c);
	json_t *p = call_params(c);
	json_t *v;
	int64_t since = journal_count(spd->journal);
	const char *kind = NULL;

	if ((v = json_object_get(p, "since")))
		since = json_integer_value(v);
	if ((v = json_object_get(p, "kind")))
		kind = json_string_value(v);
	if (since < 0)
		since = 0;
	call_set_summary(c, "follow since %lld", (long long)since);
	server_follow_add(spd->server, c, since, kind);
}

static void verify_done(void *data, const struct journal_verify_result *r)
{
	struct call *c = data;

	call_set_summary(c, "%s", r->ok ? "intact" : r->reason);
	call_reply(c,
		   json_pack("{s:b, s:I, s:o?, s:s?, s:s?}", "ok", r->ok,
			     "checked", (json_int_t)r->checked, "first_bad_id",
			     r->ok ? NULL : json_integer(r->first_bad_id),
			     "reason", r->ok ? NULL : r->reason, "detail",
			     r->ok ? NULL : r->detail));
}

void m_journal_verify(struct call *c)
{
	struct spd *spd = call_spd(c);
	int r = journal_verify(spd->journal, verify_done, c);

	if (r < 0)
		call_error(c, RPC_E_INTERNAL, NULL, "journal verify: %s",
			   strerror(-r));
}

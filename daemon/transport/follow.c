/*
 * journal.follow's followers: a call that streams the journal's history
 * from an id, then every event as it is committed, until the client goes
 * (daemon/methods/m_journal.c starts it with server_follow_add).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "daemon/transport/call.h"
#include "daemon/transport/conn.h"
#include "daemon/transport/rpc.h"
#include "daemon/transport/server.h"
#include "daemon/journal/journal.h"
#include "daemon/log.h"
#include "daemon/spd.h"
#include "common/util.h"

static void follower_pump(struct follower *f);

/* ---- journal.follow -------------------------------------------------- */

static void follower_gone(void *data)
{
	struct follower *f = data;
	struct server *s = f->call->spd->server;

	if (s) {
		if (f->prev)
			f->prev->next = f->next;
		else
			s->followers = f->next;
		if (f->next)
			f->next->prev = f->prev;
	}
	/* The reply goes nowhere, but the request's end is journaled. */
	call_reply(f->call, json_null());
	f->call = NULL;
	if (f->catching_up) {
		f->dead = true; /* follower_query_done frees it */
		return;
	}
	free(f->kind);
	free(f);
}

json_t *server_event_json(const struct journal_event *e)
{
	json_t *detail = NULL;

	if (e->detail)
		detail = json_loads(e->detail, 0, NULL);
	return json_pack("{s:I, s:I, s:s?, s:s?, s:s?, s:s?, s:o?, s:s, s:s}",
			 "id", (json_int_t)e->id, "time_us",
			 (json_int_t)e->time_us, "session", e->session, "actor",
			 e->actor, "kind", e->kind, "summary", e->summary,
			 "detail", detail, "prev_hash", e->prev_hash, "hash",
			 e->hash);
}

static void follower_send(struct follower *f, const struct journal_event *evs,
			  size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (evs[i].id <= f->last_sent)
			continue;
		f->last_sent = evs[i].id;
		if (f->kind && (!evs[i].kind || strcmp(f->kind, evs[i].kind)))
			continue;
		call_notify(f->call, RPC_N_JOURNAL_EVENT,
			    server_event_json(&evs[i]));
	}
}

static void follower_query_done(void *data, int err,
				const struct journal_event *evs, size_t n)
{
	struct follower *f = data;

	if (f->dead) {
		free(f->kind);
		free(f);
		return;
	}
	if (err < 0 || call_client_gone(f->call)) {
		f->catching_up = false;
		return;
	}
	follower_send(f, evs, n);
	f->catching_up = false;
	/* More history than one page, or events committed meanwhile. */
	if (n > 0)
		follower_pump(f);
}

static void follower_pump(struct follower *f)
{
	struct journal_filter jf = {.since = f->last_sent,
				    .limit = JOURNAL_QUERY_LIMIT_MAX};

	f->catching_up = true;
	if (journal_query(f->call->spd->journal, &jf, follower_query_done, f) <
	    0)
		f->catching_up = false;
}

void server_follow_add(struct server *s, struct call *c, int64_t since,
		       const char *kind)
{
	struct follower *f = calloc(1, sizeof(*f));

	if (!f) {
		call_error(c, RPC_E_INTERNAL, NULL, "out of memory");
		return;
	}
	f->call = c;
	f->last_sent = since;
	f->kind = kind ? strdup(kind) : NULL;
	f->next = s->followers;
	if (s->followers)
		s->followers->prev = f;
	s->followers = f;
	call_on_gone(c, follower_gone, f);
	follower_pump(f);
}

void server_journal_committed(struct server *s, const struct journal_event *evs,
			      size_t n)
{
	if (!s)
		return;
	for (struct follower *f = s->followers; f; f = f->next) {
		/* A follower still reading history catches these up by
		 * querying again when its page arrives. */
		if (f->catching_up)
			continue;
		if (n > 0 && evs[0].id > f->last_sent + 1) {
			follower_pump(f);
			continue;
		}
		follower_send(f, evs, n);
	}
}

/*
 * Per-session quotas and the operator's reserve (daemon/transport/quota.h):
 * connection and run counts and the per-minute request window, per
 * session token.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/transport/quota.h"
#include "daemon/journal/journal.h"

/* One session's counters.  Entries live until spd exits: there is one per
 * session token that was ever valid, which only the operator mints. */
struct quota_entry {
	struct quota_entry *next;
	char *sid;
	unsigned used[QUOTA__COUNT];
	uint64_t window_start_ms;
	bool noted[QUOTA__COUNT]; /* this episode's refusal is journaled */
};

struct quota {
	struct journal *journal;
	struct quota_limits lim;
	struct quota_entry *entries;
};

static const char *const kind_names[QUOTA__COUNT] = {
    [QUOTA_CONNS] = "connections",
    [QUOTA_RUNS] = "runs",
    [QUOTA_JOURNAL_RATE] = "journal-rate",
};

const char *quota_kind_name(enum quota_kind kind)
{
	return kind < QUOTA__COUNT ? kind_names[kind] : "?";
}

int quota_new(struct journal *j, const struct quota_limits *lim,
	      struct quota **ret)
{
	struct quota *q = calloc(1, sizeof(*q));

	if (!q)
		return -ENOMEM;
	q->journal = j;
	q->lim = *lim;
	*ret = q;
	return 0;
}

void quota_free(struct quota *q)
{
	struct quota_entry *e, *next;

	if (!q)
		return;
	for (e = q->entries; e; e = next) {
		next = e->next;
		free(e->sid);
		free(e);
	}
	free(q);
}

static struct quota_entry *entry_get(struct quota *q, const char *sid,
				     bool create)
{
	struct quota_entry *e;

	for (e = q->entries; e; e = e->next)
		if (strcmp(e->sid, sid) == 0)
			return e;
	if (!create)
		return NULL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->sid = strdup(sid);
	if (!e->sid) {
		free(e);
		return NULL;
	}
	e->next = q->entries;
	q->entries = e;
	return e;
}

static void note_refusal(struct quota *q, struct quota_entry *e,
			 enum quota_kind kind)
{
	char sum[160], detail[160];

	if (e->noted[kind])
		return;
	e->noted[kind] = true;
	if (!q->journal)
		return;
	snprintf(sum, sizeof(sum),
		 "session over its %s quota (%u); further refusals are not "
		 "journaled",
		 kind_names[kind], q->lim.max[kind]);
	snprintf(detail, sizeof(detail), "{\"quota\":\"%s\",\"limit\":%u}",
		 kind_names[kind], q->lim.max[kind]);
	journal_append(q->journal, e->sid, "spd", "quota.exceeded", sum,
		       detail);
}

int quota_take(struct quota *q, const char *sid, enum quota_kind kind,
	       uint64_t now_ms)
{
	struct quota_entry *e;

	if (!q || kind >= QUOTA__COUNT)
		return 0;
	/* Without memory for the entry the request is refused: a quota that
	 * fails open is no quota. */
	e = entry_get(q, sid, true);
	if (!e)
		return -ENOMEM;
	if (kind == QUOTA_JOURNAL_RATE &&
	    now_ms - e->window_start_ms >= QUOTA_RATE_WINDOW_MS) {
		e->window_start_ms = now_ms;
		e->used[kind] = 0;
		e->noted[kind] = false;
	}
	if (e->used[kind] >= q->lim.max[kind]) {
		note_refusal(q, e, kind);
		return -EDQUOT;
	}
	e->used[kind]++;
	if (kind != QUOTA_JOURNAL_RATE)
		e->noted[kind] = false;
	return 0;
}

void quota_put(struct quota *q, const char *sid, enum quota_kind kind)
{
	struct quota_entry *e;

	if (!q || !sid || kind >= QUOTA__COUNT || kind == QUOTA_JOURNAL_RATE)
		return;
	e = entry_get(q, sid, false);
	if (e && e->used[kind] > 0)
		e->used[kind]--;
}

unsigned quota_limit(const struct quota *q, enum quota_kind kind)
{
	return q && kind < QUOTA__COUNT ? q->lim.max[kind] : 0;
}

void quota_set_limits(struct quota *q, const struct quota_limits *lim)
{
	if (q)
		q->lim = *lim;
}

/*
 * Per-session quotas and the capacity held back for the operator (issue
 * 10, "One agent can lock the operator out").  spd's connections and
 * sandboxd's run slots are shared by everyone; without these limits one
 * agent (or any process of the operator's uid that never authenticates)
 * can take them all and lock the operator out of approvals, runs and
 * session.end.
 *
 * What is counted per session: connections bound to its token, its runs
 * in flight and its journaled requests in the current minute.  A session
 * over a quota is refused with LIMIT, and the first refusal of each
 * episode is journaled (kind "quota.exceeded"); further refusals are not,
 * so that a refused flood cannot grow the journal either.
 */
#ifndef SPD_DAEMON_QUOTA_H
#define SPD_DAEMON_QUOTA_H

#include <stdbool.h>
#include <stdint.h>

struct journal;
struct quota;

/* How long a new connection may take to present a valid token (with auth
 * or any request): a client that means to talk does so within
 * milliseconds, so a few seconds is generous, while idle connections that
 * never send a token cannot pile up to the connection limit. */
#define QUOTA_AUTH_TIMEOUT_S_DEFAULT 5
#define QUOTA_AUTH_TIMEOUT_S_MAX 600
/* Connections one session token may hold at once: an agent loop, its
 * parallel tool calls and an MCP front end need a handful; 64 leaves room
 * for them while 32 sessions still cannot fill spd's shared slots. */
#define QUOTA_SESSION_CONNS_DEFAULT 64
/* Runs of one session in flight at once: builds and test runners
 * parallelise inside one run, so an agent needs few; 16 keeps one agent
 * from taking more than a small share of sandboxd's slots. */
#define QUOTA_SESSION_RUNS_DEFAULT 16
/* Requests (each one journal row, plus a bounded few for a run) one
 * session may make per minute: a busy agent makes a few calls a second;
 * past 20 a second it is a runaway loop growing the journal by millions
 * of rows a day. */
#define QUOTA_SESSION_JOURNAL_RATE_DEFAULT 1200
/* Connection slots only the operator token may take: enough for spctl,
 * an editor and a few approval watchers when everything else is full. */
#define QUOTA_OPERATOR_CONNS_DEFAULT 64
/* sandboxd run slots only the operator's runs (cmd.run with the operator
 * token) may take: the operator can always run a command. */
#define QUOTA_OPERATOR_RUNS_DEFAULT 32
/* The length of the journal-rate window. */
#define QUOTA_RATE_WINDOW_MS (60 * 1000)

enum quota_kind {
	QUOTA_CONNS,	    /* connections bound to the session's token */
	QUOTA_RUNS,	    /* runs in flight */
	QUOTA_JOURNAL_RATE, /* journaled requests in the current minute */
	QUOTA__COUNT,
};

struct quota_limits {
	unsigned max[QUOTA__COUNT];
};

/*
 * A quota table for sessions, journaling refusals to j (may be NULL: not
 * journaled).  Returns 0 and the table in *ret, or -ENOMEM.
 */
int quota_new(struct journal *j, const struct quota_limits *lim,
	      struct quota **ret);
/* Free the table (NULL allowed). */
void quota_free(struct quota *q);

/*
 * Take one unit of kind for session sid (not NULL) at monotonic time
 * now_ms (only QUOTA_JOURNAL_RATE looks at it).  Returns 0 when within
 * the quota, or -EDQUOT when the session is at it; the first refusal of
 * an episode (until a take succeeds again, or for the rate, until the
 * next window) is journaled as "quota.exceeded" for that session.
 */
int quota_take(struct quota *q, const char *sid, enum quota_kind kind,
	       uint64_t now_ms);
/* Give back a unit of QUOTA_CONNS or QUOTA_RUNS taken by quota_take. */
void quota_put(struct quota *q, const char *sid, enum quota_kind kind);
/* New limits from the next take on (spctl reload): what each session
 * holds stays held; one above a lowered limit takes no more until it is
 * back under it.  NULL q does nothing. */
void quota_set_limits(struct quota *q, const struct quota_limits *lim);
/* The limit of kind (for messages). */
unsigned quota_limit(const struct quota *q, enum quota_kind kind);
/* The quota's name as journaled and shown ("connections", "runs",
 * "journal-rate"). */
const char *quota_kind_name(enum quota_kind kind);

#endif

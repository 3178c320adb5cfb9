/*
 * Provenance labels: where what a session's agent was handed came from.
 *
 * A label is put on content where it enters, by the part of spd that
 * handed it over, never inferred from the content:
 *   trusted        a file the operator names in [provenance] trusted, read
 *                  while it is the committed version
 *   worktree       any other file of the worktree or checkout
 *   private        a file the operator names in [provenance] private (as
 *                  well as its origin label)
 *   command        a run's output
 *   network:HOST   bytes fetched through the proxy from HOST
 *   mcp:SERVER     a front end's tool result (acp: the ACP front end's)
 *   model          the model's own answers
 *   agent-tool     what the agent's own built-in tools read, seen by the
 *                  broker in a conversation and never served by spd
 *
 * Each session keeps the set of labels it has been exposed to, each with
 * the journal row where it first entered and what brought it (a path, a
 * URL's host, a tool's name and input), in sessions.db: the set survives
 * a restart of spd.  The hosts the session's runs contacted through the
 * proxy (or that a run with the host's network could reach) are kept the
 * same way: a new destination is one the session has not contacted.
 *
 * What spd served is also remembered in memory, a bounded number of
 * entries per session (SESSION_SERVED_MAX), so that the broker can say
 * which of the tool results in a conversation were spd's and carry that
 * content's labels: session_served_match.
 *
 * Everything runs on the loop thread.
 */
#ifndef SPD_DAEMON_SESSION_LABELS_H
#define SPD_DAEMON_SESSION_LABELS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct session_store;

/* The longest label ("network:" and a host name) and what brought it. */
#define SESSION_LABEL_MAX 300
#define SESSION_LABEL_WHAT_MAX 512
/* Labels and contacted hosts kept per session: past these, a new one is
 * refused (-E2BIG), and the caller refuses the call that brought it
 * rather than lose it. */
#define SESSION_LABELS_MAX 1024
/* Served results remembered per session for the broker's matching; the
 * oldest goes first (a result no longer remembered reads as agent-tool:
 * untrusted, the closed side). */
#define SESSION_SERVED_MAX 256
/* Bytes of a served result kept to find it again in a conversation. */
#define SESSION_SERVED_PREFIX 256
/* Shorter served text is matched by a whole line of the tool result. */
#define SESSION_SERVED_SHORT 16

/* One label of a session, as found. */
struct session_label {
	char label[SESSION_LABEL_MAX + 1];
	char what[SESSION_LABEL_WHAT_MAX + 1];
	int64_t row; /* the journal row where it first entered; 0: unknown */
	int64_t at;  /* Unix seconds */
};

/* Create the table (at session_store_open). 0 or -EIO. */
int sess_labels_schema(struct session_store *s);

/*
 * Add label to session id's set, first entered at journal row (0 when no
 * row is known), brought by what (NULL allowed).  Written to sessions.db
 * before it returns.  Returns 1 when it is new, 0 when the session had it
 * already (its first row is kept), -ENOENT (no such session), -EINVAL (an
 * empty or over-long label), -E2BIG (SESSION_LABELS_MAX) or -EIO.
 */
int session_label_add(struct session_store *s, const char *id,
		      const char *label, int64_t row, const char *what);
/* True when session id has label. */
bool session_label_has(struct session_store *s, const char *id,
		       const char *label);
/*
 * The first label of session id (in order of entry) that matches one of
 * patterns (NULL-terminated; fnmatch globs such as "network:*"): true and
 * *ret, or false when none does.
 */
bool session_label_find(struct session_store *s, const char *id,
			char *const *patterns, struct session_label *ret);
/* The label names of session id in order of entry, as a JSON array (new
 * reference; an empty array for an unknown session; NULL on ENOMEM). */
json_t *session_labels_json(struct session_store *s, const char *id);
/* The same with where each entered: [{label, row, at, what}] (new
 * reference). */
json_t *session_labels_detail(struct session_store *s, const char *id);

/* A destination (host name, lower case) the session contacted at row:
 * as session_label_add. */
int session_egress_add(struct session_store *s, const char *id,
		       const char *host, int64_t row);
/* True when the session contacted host before (case-blind). */
bool session_egress_known(struct session_store *s, const char *id,
			  const char *host);
/* True when the session contacted any destination. */
bool session_egress_any(struct session_store *s, const char *id);

/*
 * Remember that spd handed session id text (len bytes) carrying labels
 * (a JSON array of label names, borrowed): a result of a run or an fs
 * call.  Empty text is not remembered.  0 or -ENOMEM/-ENOENT.
 */
int session_served_add(struct session_store *s, const char *id,
		       const char *text, size_t len, json_t *labels);
/*
 * The labels of the served result that text (a tool result in a
 * conversation) holds: a new JSON array reference, or NULL when no
 * remembered result is in it.  A served result of SESSION_SERVED_SHORT
 * bytes or more is found by its first SESSION_SERVED_PREFIX bytes
 * anywhere in text; a shorter one only as a whole line of text.
 */
json_t *session_served_match(struct session_store *s, const char *id,
			     const char *text, size_t len);

/*
 * True when relpath's content (data, len bytes) is what the session's
 * base commit holds at relpath: a [provenance] trusted file is trusted
 * only as committed, not as the agent may have changed it.  False for
 * anything else, an unknown session or an error.
 */
bool session_file_committed(struct session_store *s, const char *id,
			    const char *relpath, const char *data, size_t len);

/*
 * True when session id's work changed after journal row (a checkpoint
 * made at a later row), or when that cannot be told (row 0, no
 * checkpoint, a database error): the closed side.
 */
bool session_changed_since(struct session_store *s, const char *id,
			   int64_t row);

/* ---- the gates on labels ([provenance] in spd.conf) ---- */

struct spd_config;

/* A step that asks a person once the session carries an untrusted
 * label. */
enum session_prov_step {
	SESSION_PROV_EGRESS,	   /* a connection to host (NULL: any) */
	SESSION_PROV_PRIVATE_READ, /* reading a [provenance] private file */
	SESSION_PROV_COMMIT,	   /* git commit */
	SESSION_PROV_MERGE,	   /* session merge */
	SESSION_PROV_CONFIG,	   /* writing agent configuration or CI */
};

/*
 * Whether step of session id asks a person under cfg's [provenance]:
 *  - the lethal trifecta: a session that read private data and untrusted
 *    content asks before any egress, and one that read untrusted content
 *    and has a way out (it contacted a destination) asks before reading
 *    private data ("ask.provenance.trifecta");
 *  - once untrusted: egress to a host the session has not contacted,
 *    git commit, session merge and config writes, as [provenance] ask
 *    names them ("ask.provenance.egress", ".commit", ".merge",
 *    ".config").
 * True with *rule (static) and why (a sentence naming the label and the
 * row where it entered); false when the step goes on.  *ret_label (may
 * be NULL) gets the untrusted label found.
 */
bool session_prov_asks(struct session_store *s, const char *id,
		       const struct spd_config *cfg,
		       enum session_prov_step step, const char *host,
		       const char **rule, char *why, size_t whylen,
		       struct session_label *ret_label);
/* The first untrusted label of session id under cfg (the defaults when
 * cfg has no list): true and *ret, or false. */
bool session_prov_untrusted(struct session_store *s, const char *id,
			    const struct spd_config *cfg,
			    struct session_label *ret);
/* True when relpath (relative to the workspace) matches one of globs
 * (NULL-terminated, may be NULL): a glob without '/' matches the last
 * component as well, and "dir/" everything under dir. */
bool session_prov_path_matches(char *const *globs, const char *relpath);

#endif

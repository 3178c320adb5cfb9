/*
 * What ties an agent's calls to its session: the session-token check,
 * cmd.run in the session's worktree (its workspace) with the in-place
 * protections, the re-hash after every command, and verification checks
 * run in the sandbox.  Installs hooks into struct spd.
 */
#ifndef SPD_DAEMON_AGENT_H
#define SPD_DAEMON_AGENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct spd;

/* Open the session store and install the hooks, then agent_prime_recent.
 * Returns 0 or -errno. */
int agent_start(struct spd *spd);
/* Sessions whose last use (start, command) is older than this are not
 * walked ahead at spd's start: a forgotten session holds no watches. */
#define AGENT_PRIME_RECENT_S (24 * 3600)
/* At most this many, the most recently used first: half of the
 * workspaces spd watches at once (LINKWATCH_WORKSPACES_MAX), the rest
 * left to the operator's. */
#define AGENT_PRIME_MAX 4
/*
 * Start the hard-link walks (linkwatch_prime) of the workspaces of the
 * active sessions used in the last AGENT_PRIME_RECENT_S, at most
 * AGENT_PRIME_MAX: after a restart of spd their agents' first commands
 * get the list, as after session start, instead of sandboxd's full walk.
 * Nothing without a loop or on a failure (the runs walk, as before).
 */
void agent_prime_recent(struct spd *spd);
/* A checkpoint waits for its workspace's watch (session_checkpoint said
 * -EINPROGRESS): taken as soon as the watch is made. */
void agent_checkpoint_later(struct spd *spd);
/*
 * After a run or a file tool that may have changed session id's worktree:
 * its checkpoint (session_checkpoint_begin), the worktree read on the
 * thread pool; what waits for a watch or for another checkpoint is taken
 * later (agent_checkpoint_later).  row: the journal row that made it (0:
 * none); what: the command or the tool.
 */
void agent_checkpoint(struct spd *spd, const char *id, int64_t row,
		      const char *what);
/*
 * When session id's checkpoint is being read on the thread pool: go(data)
 * is called on the loop once it is done (or spd stopped meanwhile:
 * spd->sessions is NULL then), and true is returned; false, and nothing
 * queued, when none is out.  For calls that read or change the worktree.
 */
bool agent_after_checkpoint(struct spd *spd, const char *id,
			    void (*go)(void *data), void *data);
/*
 * Session id's token joins the redaction set, from now on redacted
 * wherever it would appear (a run echoing it, a file holding it):
 * session.start after its reply, and the auth hook after a restart of
 * spd.  Nothing when it is in the set already; a failure is logged.
 */
void agent_token_redact(struct spd *spd, const char *id, const char *token);
/*
 * Before a session's diff is shown, verified or merged: read it
 * (session_diff) and scan its added lines for known secret values in any
 * form, both on the thread pool.  On a hit, end the session's attempt
 * with SECRET-IN-DIFF (journaled, naming file and line, never the value)
 * and finish c with that error.  Otherwise then(c, 0, text, truncated)
 * on the loop (then frees text), or then(c, -errno, NULL, false) when
 * the diff could not be read (the session store's error says why).  As
 * spd stops, c is answered instead.
 */
struct call;
typedef void (*agent_diff_fn)(struct call *c, int r, char *text,
			      bool truncated);
void agent_diff_guard(struct spd *spd, struct call *c, const char *id,
		      agent_diff_fn then);
/*
 * The branch of session id checked out for a merge's or an end's checks
 * (session_merge_plan), on the thread pool: then(c, 0, plan, data) on
 * the loop, then(c, -errno, NULL, data) when it could not be (the
 * session store's error says why), -ESHUTDOWN when spd began stopping
 * meanwhile (then answers c).
 */
struct session_verify_plan;
typedef void (*agent_plan_fn)(struct call *c, int r,
			      struct session_verify_plan *plan, void *data);
void agent_merge_plan(struct spd *spd, struct call *c, const char *id,
		      agent_plan_fn then, void *data);
/*
 * session_merge, the operator's checkout read and written on the thread
 * pool: then(c, 0, result, data) on the loop once the target branch
 * moved (then owns result), then(c, -errno, NULL, data) when refused
 * (the session store's error says why, while spd runs).
 */
typedef void (*agent_merge_fn)(struct call *c, int r, json_t *result,
			       void *data);
void agent_merge(struct spd *spd, struct call *c, const char *id,
		 const char *into, bool squash, const char *expect_target,
		 const char *expect_tip, agent_merge_fn then, void *data);

/*
 * session_restore, the worktree read and checked out on the thread pool:
 * then(c, 0, saved) on the loop once restored, then(c, -errno, 0) when
 * refused or failed (the session store's error says why, while spd
 * runs).  The calls waiting for the session's checkpoint wait for it.
 */
typedef void (*agent_restore_fn)(struct call *c, int r, unsigned saved);
void agent_restore(struct spd *spd, struct call *c, const char *id, unsigned n,
		   agent_restore_fn then);

/*
 * The session store's check runner (session.h): check i of plan in the
 * sandbox, data being the struct spd, with no network, spd's directories
 * hidden, the held-out checks bound read-only for this run only, never
 * best-effort.  agent_start() installs it; the one runner there is.
 */
struct session_verify_plan;
struct session_check_output;
int agent_check_runner(void *data, const struct session_verify_plan *plan,
		       size_t i,
		       void (*done)(void *ctx, int exit_code,
				    const struct session_check_output *out),
		       void *ctx);

/* Close the session store, then done(data) once it is freed: after the
 * ends of its steps on the thread pool, which may still journal (a
 * restore's); NULL-safe on a spd without sessions. */
void agent_stop(struct spd *spd, void (*done)(void *data), void *data);

#endif

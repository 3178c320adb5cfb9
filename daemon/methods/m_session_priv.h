/*
 * What the session.* methods share between m_session.c (start, list,
 * show, status, heldout, diff, log, restore) and m_review.c (verify,
 * merge, end).  Not for other modules: they go through daemon/session.
 */
#ifndef SPD_M_SESSION_PRIV_H
#define SPD_M_SESSION_PRIV_H

#include <jansson.h>
#include <stdbool.h>

#include "daemon/methods/agent.h"
#include "daemon/transport/call.h"

struct session_info;
struct session_store;

/* spd's session store; NULL as spd stops. */
struct session_store *ms_store(struct call *c);
/* A string parameter of c, or NULL. */
const char *ms_param(struct call *c, const char *name);
/* Finish c with the error that matches r from daemon/session. */
void ms_fail(struct call *c, int r, const char *id);
/* ms_fail with why in place of the store's last error (a step that ended
 * after others may have set it since). */
void ms_fail_why(struct call *c, int r, const char *id, const char *why);
/* True when the store is there; else c is finished with an error. */
bool ms_have_store(struct call *c);
/*
 * A call that reads a session's worktree, made while the session's
 * checkpoint is read on the thread pool (agent_checkpoint), waits for it
 * and is then carried out from its start (again): true when it waits.
 * The session is the agent's own, or the "id" the operator names.
 */
bool ms_after_checkpoint(struct call *c, call_handler again);
/*
 * The same for a call that read the session's diff on the thread pool
 * (agent_diff_guard) while another checkpoint went out: it waits for it
 * with its diff, then goes on where it was (again).  When spd stops
 * meanwhile, false with c answered and text freed.
 */
bool ms_guarded_after_checkpoint(struct call *c, int r, char *text,
				 bool truncated, agent_diff_fn again);
/*
 * The session an AGENT method acts on: an agent's own (a different id is
 * UNAUTHORIZED), or the operator's "id" parameter (required).  Returns
 * the id or NULL when c was finished with an error.
 */
const char *ms_target(struct call *c);
/* "git -C REPO merge BRANCH", the repository quoted for a POSIX shell. */
json_t *ms_merge_command(const struct session_info *i);
/* Take the agent's latest commits onto the session's branch; true when a
 * secret in one finished c with SECRET-IN-DIFF (the attempt ended).
 * Other failures leave the branch as it was, for the call to go on. */
bool ms_sync_refused(struct call *c, const char *id);

#endif

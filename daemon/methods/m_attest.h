/*
 * The attestation of a session's verdict (daemon/methods/m_attest.c),
 * signed by session.verify, session.merge and session.end when their
 * checks finish.
 */
#ifndef SPD_DAEMON_M_ATTEST_H
#define SPD_DAEMON_M_ATTEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct spd;
struct session_verify_plan;

/*
 * Sign a statement of the verdict (session_verdict_json's object,
 * borrowed for the call only) about plan->commit with spd's key and
 * store it as that commit's note under refs/notes/spd in the session's
 * repository.  method is "session.verify" (the checks ran in the
 * worktree), "session.merge" or "session.end" (on a checkout of the
 * branch's tip); durations_ms holds each check's wall time and outs its
 * output's digests (either may be NULL; an entry whose digest is "" was
 * not seen).  The statement also names the session's rows in the
 * journal (their count, first and last id and hash, and the chain's
 * head) and its model calls summed from its model.call rows (providers,
 * models, tokens, spend), read on the thread pool.  done(ctx, what) is
 * called exactly once, now or later on the loop thread, with what the
 * reply says of it (a new reference, the callee's): {commit, notes_ref,
 * keyid}, or {error} (logged) when nothing was signed — a journal that
 * cannot be read signs nothing — and the verdict stands either way.
 */
struct session_check_output;
typedef void (*m_attest_done_fn)(void *ctx, json_t *attestation);
void m_attest_session(struct spd *spd, const char *method,
		      const struct session_verify_plan *plan, json_t *verdict,
		      const int64_t *durations_ms,
		      const struct session_check_output *outs,
		      m_attest_done_fn done, void *ctx);

/*
 * attest.verify's work on its params ({repo, branch, base?, trust?,
 * trust_from?}, borrowed), for the RPC and for `spd --attest-verify`
 * (spd not running): trust as the call says, else spd.conf's [attest]
 * trust and spd's own key (made first when may_make_key).  scratch is a
 * private directory of spd's for the shadow git dir.  Returns 0 and *ret
 * (attest_verify_branch's answer), or -errno and *ret_why (malloc'd, may
 * be NULL).
 */
int m_attest_verify_run(struct spd *spd, json_t *params, const char *scratch,
			bool may_make_key, json_t **ret, char **ret_why);

#endif

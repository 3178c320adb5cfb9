/*
 * Asking a person from below the RPC layer.  The approvals live in the
 * gate (daemon/methods/gate.c), above the proxy that needs to ask (a
 * connection to an ask-host waits for a person): the proxy calls these
 * three through the daemon, and the gate defines them, so no include
 * points up a layer (tests/shape/layers).
 */
#ifndef SPD_DAEMON_ASK_H
#define SPD_DAEMON_ASK_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct spd;

/*
 * A waiter inside spd, with no RPC caller (a proxy connection to an
 * ask-host): decided(data, true, NULL) when a person approves;
 * decided(data, false, why) when a person refuses, the wait times out
 * (GATE_WAIT_MS), the session's attempt ends or spd stops.  Called once,
 * unless gate_ask_cancel came first.
 */
typedef void (*gate_decided_fn)(void *data, bool approved, const char *why);

/* What a person is asked, when it is not an RPC call. */
struct gate_ask {
	const char *session_id; /* NULL: the operator's own run */
	const char *rule;	/* static storage: outlives the ask */
	const char *reason;
	json_t *object; /* what the person sees (approval.list); borrowed */
};

/*
 * Ask a person: a pending approval like an agent call's (journaled,
 * approval.requested to the followers, counted in the session's
 * prompts), decided by approval.decide.  Returns its id (> 0), or
 * -EDQUOT when the session has used its prompts, -EAGAIN when
 * GATE_PENDING_MAX are pending, -ENOMEM; each refusal is journaled.
 */
int64_t gate_ask_person(struct spd *spd, const struct gate_ask *a,
			gate_decided_fn decided, void *data);

/* Ask id as approval.list shows it (new reference), or NULL when it is
 * no longer pending. */
json_t *gate_ask_json(struct spd *spd, uint64_t id);

/* The waiter of ask id went away (its run ended): the ask is withdrawn
 * (journaled, approval.withdrawn to the followers) and decided is not
 * called.  An id no longer pending is ignored. */
void gate_ask_cancel(struct spd *spd, uint64_t id, const char *why);

#endif

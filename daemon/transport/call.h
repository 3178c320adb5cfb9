/*
 * One client request being served.  The server (daemon/transport/server.c) parses
 * and authenticates a request, then hands a struct rpc_call to the
 * method's handler (daemon/transport/dispatch.c has the table).  A handler finishes
 * the call exactly once with rpc_call_reply() or rpc_call_error(), now or
 * later from a callback; both journal the outcome and free the call.
 * Until then it may stream notifications with rpc_call_notify().
 *
 * The call outlives its connection: when the client goes away first, the
 * "gone" callback runs (so the handler can cancel a run), notifications
 * are dropped, and the final reply is discarded but still journaled.
 */
#ifndef SPD_DAEMON_CALL_H
#define SPD_DAEMON_CALL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "proto/rpc.h"

struct spd;
struct rpc_call;

/* Who made the call: the operator, or an agent holding a session token. */
struct rpc_principal {
	bool operator;		/* operator token */
	const char *session_id; /* the token's session; NULL for the operator */
	unsigned peer_uid;
	int peer_pid;
};

/* The request's params object (borrowed; never NULL — {} when absent).
 * "token" has already been removed. */
json_t *rpc_call_params(struct rpc_call *c);
/* Who is calling (borrowed, valid until the call ends). */
const struct rpc_principal *rpc_call_principal(struct rpc_call *c);
/* The daemon's state (journal, sandbox, sessions, configuration). */
struct spd *rpc_call_spd(struct rpc_call *c);
enum rpc_method rpc_call_method(struct rpc_call *c);
/* The call's connection as a number no other connection of this spd
 * ever gets (calls on one connection share it), or 0 once the client has
 * gone: run.input finds the run its own connection started with it. */
uint64_t rpc_call_conn_serial(struct rpc_call *c);
/* True once the client has gone away. */
bool rpc_call_client_gone(struct rpc_call *c);

/*
 * Finish the call with a result (ownership of result is taken; NULL means
 * JSON null).  The outcome "ok" and the duration are journaled with the
 * session (if any) and the summary set by rpc_call_set_summary.
 */
void rpc_call_reply(struct rpc_call *c, json_t *result);
/*
 * Finish the call with an error: code e, a human message (printf format;
 * redacted before it leaves spd), and optional extra data fields (ownership
 * taken; may be NULL) merged into error.data beside "code".
 */
void rpc_call_error(struct rpc_call *c, enum rpc_error e, json_t *data,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/*
 * Send the notification n (a row of proto/rpc.def's SPD_NOTIFY) as
 * {"jsonrpc":"2.0","method":NAME,"params":params} on the call's connection
 * (ownership of params taken).  Returns 0, or -EPIPE when the client is
 * gone (params is freed anyway).
 */
int rpc_call_notify(struct rpc_call *c, enum rpc_notify n, json_t *params);
/* Run cb(data) once if the client goes away before the call ends. */
void rpc_call_on_gone(struct rpc_call *c, void (*cb)(void *data), void *data);
/* A short summary for the journal row of this request (copied). Tokens
 * must never be put here. */
void rpc_call_set_summary(struct rpc_call *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Extra JSON detail for the journal row (ownership taken). */
void rpc_call_set_detail(struct rpc_call *c, json_t *detail);

/* A method handler.  It must eventually finish c. */
typedef void (*rpc_handler)(struct rpc_call *c);

#endif

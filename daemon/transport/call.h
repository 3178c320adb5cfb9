/*
 * One client request being served.  The server (daemon/transport/server.c) parses
 * and authenticates a request, then hands a struct call to the
 * method's handler (daemon/transport/dispatch.c has the table).  A handler finishes
 * the call exactly once with call_reply() or call_error(), now or
 * later from a callback; both journal the outcome and free the call.
 * Until then it may stream notifications with call_notify().
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
struct call;

/* Who made the call: the operator, or an agent holding a session token. */
struct call_principal {
	bool operator;		/* operator token */
	const char *session_id; /* the token's session; NULL for the operator */
	unsigned peer_uid;
	int peer_pid;
};

/* The request's params object (borrowed; never NULL — {} when absent).
 * "token" has already been removed. */
json_t *call_params(struct call *c);
/* Who is calling (borrowed, valid until the call ends). */
const struct call_principal *call_principal(struct call *c);
/* The daemon's state (journal, sandbox, sessions, configuration). */
struct spd *call_spd(struct call *c);
enum rpc_method call_method(struct call *c);
/* The call's connection as a number no other connection of this spd
 * ever gets (calls on one connection share it), or 0 once the client has
 * gone: run.input finds the run its own connection started with it. */
uint64_t call_conn_serial(struct call *c);
/* True once the client has gone away. */
bool call_client_gone(struct call *c);

/*
 * Finish the call with a result (ownership of result is taken; NULL means
 * JSON null).  The outcome "ok" and the duration are journaled with the
 * session (if any) and the summary set by call_set_summary.
 */
void call_reply(struct call *c, json_t *result);
/*
 * Finish the call with an error: code e, a human message (printf format;
 * redacted before it leaves spd), and optional extra data fields (ownership
 * taken; may be NULL) merged into error.data beside "code".
 */
void call_error(struct call *c, enum rpc_error e, json_t *data, const char *fmt,
		...) __attribute__((format(printf, 4, 5)));
/*
 * Send the notification n (a row of proto/rpc.def's SPD_NOTIFY) as
 * {"jsonrpc":"2.0","method":NAME,"params":params} on the call's connection
 * (ownership of params taken).  Returns 0, or -EPIPE when the client is
 * gone (params is freed anyway).
 */
int call_notify(struct call *c, enum rpc_notify n, json_t *params);
/* Run cb(data) once if the client goes away before the call ends. */
void call_on_gone(struct call *c, void (*cb)(void *data), void *data);
/* A short summary for the journal row of this request (copied). Tokens
 * must never be put here. */
void call_set_summary(struct call *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Extra JSON detail for the journal row (ownership taken). */
void call_set_detail(struct call *c, json_t *detail);
/* More detail for the journal row, merged into what is there (the gate's
 * decision, rule and approval stay beside a run's outcome); ownership
 * taken. */
void call_add_detail(struct call *c, json_t *more);

/*
 * What the call hands a session's agent carries label (a provenance label:
 * daemon/session/labels.h), brought by what (NULL allowed): the label
 * enters the session's set at the call's journal row, which lists the
 * session's labels with it.  A call of no session ignores it.
 */
void call_label(struct call *c, const char *label, const char *what);

/* A method handler.  It must eventually finish c. */
typedef void (*call_handler)(struct call *c);

#endif

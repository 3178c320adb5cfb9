/*
 * What the client socket's parts share, private to daemon/transport/:
 * server.c (connections, frames, dispatch), call.c (the call machinery of
 * call.h and the journal row of every request) and follow.c
 * (journal.follow's followers).  Handlers see only call.h.
 */
#ifndef SPD_DAEMON_TRANSPORT_CONN_H
#define SPD_DAEMON_TRANSPORT_CONN_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "common/buf.h"
#include "daemon/transport/call.h"

struct spd;
struct conn;

struct call {
	struct spd *spd;
	struct conn *conn;	  /* NULL once the client has gone */
	struct call *next, *prev; /* in conn->calls */
	enum rpc_method method;
	json_t *id; /* NULL for a notification */
	json_t *params;
	struct call_principal who;
	char *session_id; /* owned copy behind who.session_id */
	char *summary;
	json_t *detail;
	json_t *labels; /* call_label: label -> what, or NULL */
	uint64_t start_ns;
	void (*gone_cb)(void *data);
	void *gone_data;
	bool finished;
};

struct follower {
	struct follower *next, *prev;
	struct call *call;
	int64_t last_sent;
	char *kind;
	bool catching_up;
	bool dead; /* the client went away while a query was in flight */
};

struct conn {
	uv_pipe_t pipe; /* first member: handle → conn */
	struct server *srv;
	struct conn *next, *prev;
	struct buf in;
	uid_t peer_uid;
	pid_t peer_pid;
	bool authed_operator;
	char *authed_session;
	bool closing;
	unsigned inflight;
	size_t outbuf;
	struct call *calls;
	bool batching;	      /* in on_read: replies go to wbatch */
	struct buf wbatch;    /* replies gathered during one read */
	uint64_t accepted_ms; /* loop time of accept, for the auth deadline */
	bool authenticated;   /* a request has carried a valid token */
	bool in_shared;	      /* holds one of the slots everyone shares */
	/* Admitted into the slots held for the operator: the first request
	 * must carry the operator token, anything else is refused. */
	bool in_reserve;
	char *quota_sid; /* the session whose connection quota this holds */
	uint64_t serial; /* call_conn_serial: never reused */
};

struct server {
	uv_pipe_t listener;
	struct spd *spd;
	uint64_t conn_serial; /* the last connection's serial */
	struct conn *conns;
	unsigned nconns;
	unsigned nshared;      /* connections not (yet) the operator's */
	uv_timer_t auth_timer; /* closes connections past the auth deadline */
	bool auth_timer_closed;
	struct follower *followers;
	void (*close_cb)(void *data);
	void *close_data;
	bool closing;
	unsigned closing_conns; /* handles whose close callback is pending */
};

/* Queue line (malloc'd, ownership taken) on c, redacted; a client that
 * stops reading is disconnected past its cap.  Returns 0 or -errno. */
int conn_send(struct conn *c, char *line, size_t len);

/* The journal row of a request (kind "request") or of a refusal, with who
 * made it, the method, the outcome, its duration, summary and detail.
 * Returns the row's id, or < 0 when it was not journaled. */
int64_t journal_request(struct spd *spd, const struct call_principal *who,
			const char *kind, const char *method,
			const char *outcome, uint64_t dur_ns,
			const char *summary, json_t *detail);

#endif

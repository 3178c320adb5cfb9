/*
 * The client socket: accept, check the peer, frame NDJSON, authenticate,
 * dispatch to method handlers (daemon/transport/dispatch.c) and write replies.
 * Single-threaded on spd's libuv loop.
 */
#ifndef SPD_DAEMON_SERVER_H
#define SPD_DAEMON_SERVER_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct spd;
struct server;
struct call;
struct journal_event;

/* Connections served at once: past it the oldest connection that never
 * authenticated is closed to make room, or if there is none the new
 * client gets an error and is closed, so a flood of clients cannot
 * exhaust spd's descriptors.  limits.operator-connections of them are
 * held for connections that present the operator token (daemon/transport/quota.h). */
#define SERVER_MAX_CONNS 2048
/* How often connections are checked against the authentication deadline
 * (limits.auth-timeout): one is closed at most this long past it. */
#define SERVER_AUTH_SWEEP_MS 250
/* Requests a connection may have outstanding (pipelined, not yet answered).
 * Past it the client is told and disconnected: a client that never reads
 * its replies must not make spd queue work without bound. */
#define SERVER_MAX_INFLIGHT 128
/* Bytes of replies queued for a client that does not read them.  Past it
 * the client is disconnected, so a stalled reader never holds spd's
 * memory or blocks other clients. */
#define SERVER_MAX_OUTBUF (16u * 1024 * 1024)

/*
 * Listen on the socket path (unlinking a stale socket first; the caller
 * holds the pid-file lock) with mode 0600, or adopt a socket-activated
 * descriptor when listen_fd >= 0.  Returns 0 or -errno.
 */
int server_start(struct spd *spd, const char *path, int listen_fd,
		 struct server **ret);
/* Stop accepting, close every connection (ending their calls as gone),
 * then call cb.  The server is freed before cb runs. */
void server_close(struct server *s, void (*cb)(void *data), void *data);
/* Open client connections. */
unsigned server_connections(const struct server *s);
/* Deliver newly committed journal events to journal.follow subscribers. */
void server_journal_committed(struct server *s, const struct journal_event *evs,
			      size_t n);

/* A journal row as JSON (a new reference), as journal.query and
 * journal.event show it. */
json_t *server_event_json(const struct journal_event *e);

/* journal.follow support (daemon/methods/m_journal.c). */
void server_follow_add(struct server *s, struct call *c, int64_t since,
		       const char *kind);

#endif

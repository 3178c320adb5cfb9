/*
 * The model broker's HTTP/1.1 endpoint and its forwarding.  Clients (an
 * agent's SDK) connect on a loopback TCP port or on broker.sock, send
 * one provider-shaped request with their turn key where the provider key
 * would go; spd checks the key, reserves the call's worst case on the
 * turn, forwards the request to the provider with the real key (libcurl
 * multi, driven by spd's libuv loop: no thread per call) and streams the
 * response back as it arrives, redacted, reading the provider's usage on
 * the way to settle the turn.  Connections are kept alive (HTTP/1.1):
 * requests follow one another, each parsed and checked whole
 * (daemon/broker/gw_conn.c).
 *
 * Routes (POST only): Anthropic /v1/messages, /v1/messages/count_tokens;
 * OpenAI /v1/chat/completions, /v1/responses; Gemini
 * /v1beta/models/MODEL:generateContent, :streamGenerateContent and
 * :countTokens (or /v1/models/…), the key in x-goog-api-key or the
 * query's key= (taken out of the query forwarded).  A query string is
 * kept.
 */
#ifndef SPD_DAEMON_GATEWAY_H
#define SPD_DAEMON_GATEWAY_H

#include <stddef.h>
#include <stdint.h>

struct spd;
struct gateway;
struct call;

/* Most connections to the endpoint at once: each holds a buffer and,
 * while its call runs, a provider connection. */
#define GATEWAY_CONNS_MAX 1024
/* Of those, the ones only broker.sock may take: the operator's (a run
 * cannot reach broker.sock), so that connections held open on the TCP
 * port and the runs' ports never lock the operator out. */
#define GATEWAY_CONNS_RESERVED 128
/* Connections one turn may hold (an SDK's pool opens a handful; a run's
 * port is its turn's alone), and all the turns of one session together:
 * past them a connection is refused (503 LIMIT). */
#define GATEWAY_TURN_CONNS_MAX 64
#define GATEWAY_SESSION_CONNS_MAX 128
/* Request bodies still being read, in units of broker.body-max: one turn
 * may have this many in flight at once, and all the sessions' turns
 * together GATEWAY_BODIES_AGENTS (the operator's turns apart), so that
 * unfinished bodies cannot fill spd's memory. */
#define GATEWAY_BODIES_TURN 2
#define GATEWAY_BODIES_AGENTS 4
/* A client has this long to send a request's head (its key is checked
 * on the head, before any of the body is read)... */
#define GATEWAY_HEAD_TIMEOUT_MS (10 * 1000)
/* ...and this long for its whole request (slow-loris). */
#define GATEWAY_REQUEST_TIMEOUT_MS (60 * 1000)
/* Connecting to a provider takes at most this long. */
#define GATEWAY_CONNECT_TIMEOUT_S 30
/* Most bytes of a provider's reply that model.call holds for its
 * reply: it must fit in one JSON-RPC frame, escaped. */
#define GATEWAY_RPC_BODY_MAX (512 * 1024)

/*
 * Listen on listen ("HOST:PORT", a loopback address; "" for no TCP
 * port) and on the Unix socket sock_path (0600; a stale one replaced).
 * Returns 0 and *ret, or -errno with a sentence in errbuf.
 */
int gateway_start(struct spd *spd, const char *listen, const char *sock_path,
		  struct gateway **ret, char *errbuf, size_t errlen);
/* The TCP port listened on, or 0. */
int gateway_port(struct gateway *g);
/* Connections waiting on a run's listener for spd to accept them (the
 * kernel's queue; an agent opens a few at once). */
#define GATEWAY_RUN_BACKLOG 128

/*
 * Serve the listening TCP socket fd (taken: closed on failure too) with
 * the endpoint's code, accepting on it only the key of turn turn_id: a
 * sandboxed run's port to the broker (spctl agent; proto/sandbox.h,
 * SBXP_LISTENER).  Returns 0 and an id for gateway_release in *ret_id,
 * or -errno.
 */
int gateway_adopt(struct gateway *g, int fd, const char *turn_id,
		  uint64_t *ret_id);
/* Stop accepting on the listener id (connections already accepted go
 * on).  An id already released, or a NULL g, is ignored. */
void gateway_release(struct gateway *g, uint64_t id);

/* Close the listeners and connections; calls in flight end (their turns
 * keep the whole reservation, journaled).  The gateway frees itself once
 * its handles are closed.  NULL allowed. */
void gateway_stop(struct gateway *g);

#endif

/*
 * The egress proxy's connection and port state, shared by proxy.c (the
 * request head, the decision, the plain tunnel) and tls.c (a CONNECT
 * that spd terminates: a host with a credential or request rules).
 */
#ifndef SPD_DAEMON_PROXY_PRIV_H
#define SPD_DAEMON_PROXY_PRIV_H

#include <http_parser.h>
#include <netinet/in.h>
#include <uv.h>

#include "daemon/proxy/proxy.h"

struct pconn;

/* One direction of a tunnel: bytes read from `from` go to `to`. */
struct pdir {
	struct pconn *c;
	uv_stream_t *from, *to;
	uv_write_t w;
	uv_shutdown_t sh;
	bool writing, eof;
	uint64_t bytes;
	char buf[PROXY_CHUNK];
};

enum pstate { P_HEAD, P_ASKING, P_RESOLVING, P_CONNECTING, P_TUNNEL, P_DONE };

/* A host and port of an ask-host rule that a person is asked about in
 * this run; the answer holds for the rest of the run, so npm's fifteen
 * connections to one registry make one prompt, not fifteen. */
struct pask {
	struct pask *next;
	struct proxy_port *port;
	char host[PROXY_HOST_MAX + 1];
	uint16_t dport;
	enum { ASK_WAITING, ASK_GRANTED, ASK_REFUSED } state;
	uint64_t id; /* the approval, while waiting */
	char why[300];
	const char *rule; /* static: "ask.net.host", "ask.provenance.*" */
	char *said;	  /* a provenance ask's reason, or NULL */
};

struct pconn {
	struct proxy_port *port;
	struct pconn *next, *prev;
	uv_tcp_t client, upstream;
	/* The head's deadline, then in the tunnel the idle timeout. */
	uv_timer_t timer;
	uint64_t last_ms; /* uv_now() when a byte last came either way */
	bool idle;	  /* closed for passing nothing */
	uv_getaddrinfo_t gai;
	uv_connect_t conn;
	uv_write_t reply;
	http_parser p;
	enum pstate state;
	bool upstream_open, gai_pending, closing, allowed;
	int handles;
	char *head; /* the request head and any bytes after it */
	size_t head_len;
	char url[PROXY_HEAD_MAX];
	size_t url_len;
	char host[PROXY_HOST_MAX + 1];
	uint16_t dport;
	char address[INET6_ADDRSTRLEN];
	char *out; /* what goes upstream first */
	size_t out_len;
	char *reply_buf;
	struct pdir up, down; /* client->upstream, upstream->client */
	struct pask *ask;     /* P_ASKING: the answer it waits for */
	struct ptls *tls;     /* a terminated CONNECT (tls.c), or NULL */
};

/* One kind of refusal of a run's proxy (PROXY_REFUSAL_KINDS_MAX). */
struct prefusal {
	char host[PROXY_HOST_MAX + 1];
	uint16_t dport;
	int status;
	char why[300];
	uint64_t count; /* refusals of the kind not journaled yet */
};

struct proxy_port {
	struct spd *spd;
	struct prefusal *refusals; /* PROXY_REFUSAL_KINDS_MAX, or NULL */
	size_t nrefusals;
	uint64_t other_refusals; /* of kinds beyond those */
	uv_tcp_t listener;
	bool closing, listener_open;
	struct pconn *conns;
	unsigned nconns;
	char *session;
	char *workspace;
	struct proxy_project *project;
	struct pask *asks;
	void (*on_ask)(void *data, json_t *pending);
	void *on_ask_data;
	char actor[16];
	/* A session's run may push (git-receive-pack) only to its branch:
	 * "refs/heads/spd/FEATURE" (NULL: to none), fast-forwards judged on
	 * the objects of the session's worktree and of its repository.  An
	 * operator's run: push_restricted false. */
	bool push_restricted;
	char *push_ref, *push_gitdir, *push_worktree;
};

/* proxy.c, for tls.c: close c (its byte counts journaled); refuse it
 * in plain HTTP (before the tunnel); note a refusal for the journal;
 * append a row about c; charge a row to the session's rate. */
void pconn_close(struct pconn *c);
void pconn_refusal_note(struct pconn *c, int status, const char *why);
void pconn_journal(struct pconn *c, const char *kind, json_t *d);
bool pconn_journal_charge(struct proxy_port *p);
void pconn_refuse_plain(struct pconn *c, int status, const char *why);
/* Start c's idle timeout ([limits] proxy-idle-timeout). */
void pconn_idle_start(struct pconn *c);

/* ca.c: the server context presenting a certificate for host (issued
 * now or kept), or NULL; the context spd verifies host's server with;
 * whether host is a name a certificate can carry. */
struct ssl_ctx_st;
struct proxy_tls;
struct ssl_ctx_st *proxy_leaf_ctx(struct proxy_tls *t, const char *host);
struct ssl_ctx_st *proxy_upstream_ctx(struct proxy_tls *t, const char *host);
bool proxy_cert_name_ok(const char *host);
/* ca.c: write data to path through a temporary file (mode, fsynced) and
 * rename it over path; 0 or -errno. */
int proxy_write_file(const char *path, const char *data, size_t len,
		     mode_t mode);

/* tls.c: a CONNECT to a host spd terminates, upstream TCP connected:
 * verify the server, answer the CONNECT, then judge and pass each
 * request.  pconn_tls_free releases its state (c freed). */
void pconn_tls_start(struct pconn *c);
void pconn_tls_free(struct pconn *c);

#endif

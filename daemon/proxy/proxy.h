/*
 * The egress proxy of a run in network mode proxy: spd serves the
 * listening socket made inside the run's network namespace (proto/
 * sandbox.h, SBXP_LISTENER) as an HTTP proxy.  A client sends one
 * request per connection: CONNECT host:port (the TLS that follows passes
 * through untouched) or an absolute-form http:// request.  spd decides
 * by host name against spd.conf's [network] rules (deny-host always
 * wins, then allow-host, then ask-host: a person decides; anything else
 * is refused), tightened by the project's .spd.conf, resolves the name
 * itself (uv_getaddrinfo, on libuv's threadpool), refuses loopback,
 * link-local, private, shared, unique-local and unspecified addresses
 * unless [network] allow-address names them, and connects to the address
 * it resolved: there is no second lookup for a rebinding answer to slip
 * into.  Refusals are HTTP 403 with a one-line reason; every decision
 * and every connection's byte counts are journaled.
 */
#ifndef SPD_DAEMON_PROXY_H
#define SPD_DAEMON_PROXY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct spd;
struct spd_config;
struct proxy_port;

/* The port of 127.0.0.1 inside a proxy run: squid's, which tools and
 * people recognise; the namespace is the run's own, so it is free. */
#define PROXY_PORT 3128
/* Connections waiting on a run's listener for spd to accept them. */
#define PROXY_BACKLOG 128
/* Most connections of one run at once: each holds two sockets and two
 * buffers in spd; npm opens about fifteen. */
#define PROXY_CONNS_MAX 256
/* A request head (request line and headers): browsers and package
 * managers send well under 8 KiB. */
#define PROXY_HEAD_MAX (32 * 1024)
/* Bytes read at once in each direction of a tunnel. */
#define PROXY_CHUNK (64 * 1024)
/* A host name (RFC 1035's 253 and a little room). */
#define PROXY_HOST_MAX 255
/* Seconds a client has, from connecting, to send its whole request head
 * ([limits] proxy-head-timeout): a tool sends it at once, so this only
 * bounds a client that never finishes one, which would otherwise hold one
 * of the run's PROXY_CONNS_MAX connections until the run ends. */
#define PROXY_HEAD_TIMEOUT_S_DEFAULT 30
/* Seconds a connection through the proxy may pass no byte either way
 * before spd closes it ([limits] proxy-idle-timeout): longer than any
 * registry or git server keeps a quiet connection open (squid's read
 * timeout is 15 minutes too). */
#define PROXY_IDLE_TIMEOUT_S_DEFAULT 900
/* Kinds of refusal (host, port, status and reason) a run's proxy tells
 * apart.  The first refusal of each kind is journaled as it happens; the
 * repeats are counted and journaled as one row per kind, with the count,
 * when the run ends, so a run that retries a refused host in a loop adds
 * a bounded number of rows.  Kinds beyond this many share one count. */
#define PROXY_REFUSAL_KINDS_MAX 32

/* The decision for one host name, before any resolution. */
enum proxy_verdict {
	PROXY_ALLOW,
	PROXY_ASK,	     /* an ask-host rule names it: a person decides */
	PROXY_DENY_RULE,     /* a deny-host rule names it */
	PROXY_DENY_UNLISTED, /* no allow-host or ask-host rule names it */
	PROXY_DENY_ADDRESS,  /* a raw address, not named by allow-address */
	PROXY_DENY_PROJECT,  /* the project's deny-host names it */
	/* the project's allow-host list leaves it out */
	PROXY_DENY_PROJECT_UNLISTED,
};

/*
 * Decide host (a name or an address literal, without brackets or port)
 * under cfg's [network] rules.  Matching ignores case and one trailing
 * dot; "*.example.com" matches every name below example.com but not
 * example.com itself.  deny-host wins over everything, then allow-host,
 * then ask-host; a raw address is allowed only when allow-address names
 * it exactly.
 */
enum proxy_verdict proxy_decide(const struct spd_config *cfg, const char *host);

/*
 * A project's [network] rules (its .spd.conf), which may only tighten
 * spd.conf's: allow-host narrows the operator's allow and ask lists
 * (NULL: the project keeps them whole), ask-host turns an allowed host
 * into an ask, deny-host adds refusals.  Nothing in it can reach a host
 * spd.conf does not allow or ask for.
 */
struct proxy_project {
	char **allow, **deny, **ask; /* NULL-terminated, or NULL */
	/* What the project asked for that widens spd.conf, ignored:
	 * "network.KEY = VALUE" lines, NULL-terminated, or NULL. */
	char **ignored;
	/* The file could not be read: every host is refused with this. */
	char *error;
};

/*
 * Read workspace/.spd.conf's [network] keys into *ret (NULL when the
 * file has none), checked against cfg: entries that would widen it go
 * to ignored.  A file that cannot be read gives a project whose error
 * refuses every host (fail closed).  Returns 0 or -ENOMEM.
 */
int proxy_project_load(const struct spd_config *cfg, const char *workspace,
		       struct proxy_project **ret);
void proxy_project_free(struct proxy_project *p);

/* proxy_decide, then proj's tightening (NULL: none): the stricter of
 * the two. */
enum proxy_verdict proxy_decide_run(const struct spd_config *cfg,
				    const struct proxy_project *proj,
				    const char *host);
/* True when every host that pattern (a name, or "*.suffix") matches is
 * matched by one of list's patterns too. */
bool proxy_pattern_covered(char *const *list, const char *pattern);
/* True when one of the project's allow-host or ask-host patterns names
 * host (to say why such a host is refused anyway). */
bool proxy_project_names(const struct proxy_project *proj, const char *host);

/* Add to the object o (sandbox.probe's result, for spctl doctor) a
 * "proxy" object with spd.conf's allow_host, ask_host and deny_host
 * lists; returns o. */
json_t *proxy_state_add(json_t *o, const struct spd_config *cfg);

/*
 * [credential "NAME"]: host = PATTERN (one or more), and header = "Name:
 * value" or basic = "user:password", where ${VAR} is replaced by the
 * value of VAR in spd's secrets (daemon/keys/secrets.h: the environment
 * file), never known to a run.  A CONNECT to a host one names is
 * terminated by spd (tls.c), and every request on it carries the header
 * instead of whatever of that name the run sent.
 */
struct proxy_credential {
	char *name;
	char **hosts;	   /* NULL-terminated patterns */
	char *header_name; /* "Authorization" */
	char *value;	   /* the template: "Bearer ${TOKEN}", "user:${T}" */
	bool basic;	   /* value is user:password, sent as Basic */
	/* A session's git push to the credential's hosts: the refs an
	 * update may name (globs, * within a component and ** across;
	 * "session" for the session's branch; NULL-terminated, or NULL for
	 * that branch only), and whether an update that is not a
	 * fast-forward, or a deletion, may go (push-ref, push-force,
	 * push-delete). */
	char **push_refs;
	bool push_force, push_delete;
};

/* [network "HOST"] allow = METHOD /glob and deny = ..., in file order:
 * the first whose host, method and path (globs) match decides a request to a
 * terminated host; a host with rules refuses what none matches. */
struct proxy_http_rule {
	char *host;   /* the subsection: a name or *.suffix */
	char *method; /* "GET", or "*" for any */
	char *path;   /* a glob: * within a segment, ** across them */
	char *text;   /* the rule as configured: "allow = GET /repos/..." */
	bool allow;
};

/* Read the [credential "NAME"] sections, [network "HOST"] rules and
 * [network] test-ca of gc (read from path) into cfg.  A malformed one is
 * refused: -EINVAL with the reason in errbuf. */
struct git_config;
int proxy_config_load(struct git_config *gc, const char *path,
		      struct spd_config *cfg, char *errbuf, size_t errlen);
void proxy_config_free(struct spd_config *cfg);

/* The credential for host (the first whose pattern matches), or NULL. */
const struct proxy_credential *
proxy_credential_for(const struct spd_config *cfg, const char *host);
/* Whether spd terminates a CONNECT to host: a credential or a request
 * rule names it. */
bool proxy_terminates(const struct spd_config *cfg, const char *host);
/* The first of cfg's rules for host that matches method and path (the
 * path without its query), or NULL; *ret_any set when host has rules at
 * all (then no match is a refusal). */
const struct proxy_http_rule *
proxy_http_decide(const struct spd_config *cfg, const char *host,
		  const char *method, const char *path, bool *ret_any);
/* Whether a server could read path as another than it spells (dot
 * segments, "//", encoded dots, slashes or backslashes): refused for a
 * host with request rules, whose globs match the spelling. */
bool proxy_path_ambiguous(const char *path);
/* Whether glob (* within a segment, ** across segments) matches path. */
bool proxy_path_glob(const char *glob, const char *path);

/* One ref update of a git push (git-receive-pack's request body). */
#define PROXY_REF_MAX 256
#define PROXY_PUSH_UPDATES_MAX 64
struct proxy_pkt_update {
	char old_id[65], new_id[65]; /* hex; all zeros: none */
	char ref[PROXY_REF_MAX];
};
/*
 * Read the ref updates at the head of a receive-pack body (buf, len: the
 * body's first bytes, de-chunked) into out (at most max).  Returns 1 and
 * *ret_n when the flush-pkt that ends them is in buf, 0 when more bytes
 * are needed, -1 with *why when the bytes are not ref updates (a signed
 * push among them).  pktline.c.
 */
int proxy_pkt_commands(const char *buf, size_t len,
		       struct proxy_pkt_update *out, size_t max, size_t *ret_n,
		       const char **why);
/* Whether id (hex) is all zeros: a ref created, or deleted. */
bool proxy_oid_zero(const char *id);
/*
 * Whether a session's ref update u may go to a host of cr (NULL: no
 * credential, the defaults): its ref one cr's push-ref allows (by
 * default only session_ref, the session's branch "refs/heads/spd/F";
 * NULL when it has none), a deletion only with push-delete.  Returns
 * NULL, or why not in why (size n).  *ret_ff is set when the update must
 * still be shown a fast-forward (an existing ref moved, without
 * push-force).
 */
const char *proxy_push_refused(const struct proxy_credential *cr,
			       const char *session_ref,
			       const struct proxy_pkt_update *u, char *why,
			       size_t n, bool *ret_ff);

/*
 * The proxy's CA (tls.c): made in spd's state dir at first use (key
 * 0600), and a bundle of the system's CAs plus it written where a run
 * can read it.  Returns 0 and the bundle's path in *ret (borrowed, valid
 * while spd runs), or -errno with errbuf saying why.
 */
int proxy_tls_prepare(struct spd *spd, const char **ret, char *errbuf,
		      size_t errlen);
void proxy_tls_free(struct spd *spd);

/*
 * Rules a person approved for one session (policy.propose): "allow =
 * METHOD PATH" for a host, live for the session's runs from their next
 * request, kept in spd's state dir (proxy-grants.json) across restarts.
 * A grant lets through what no rule of spd.conf matches for the host,
 * never what a deny rule refuses.  proxy_grant_add returns 0, -ENOMEM
 * (not added), or another -errno when the rule is live but could not be
 * saved.  proxy_grants_load reads the saved rules at start: 0 (none is
 * 0 too), or -errno with errbuf naming the file (spd must not start
 * without an operator's decisions).
 */
int proxy_grant_add(struct spd *spd, const char *session, const char *host,
		    const char *method, const char *path);
int proxy_grants_load(struct spd *spd, char *errbuf, size_t errlen);
/*
 * Add "allow = METHOD PATH" for host to the spd.conf at conf_path (an
 * approval with --always): a new [network "HOST"] section appended after
 * everything else (after every rule the file has for host: a deny there
 * still wins), with a comment naming session; the rest of the file kept
 * byte for byte, replaced at once (a temporary file renamed over the
 * real one, a symlink's target, its mode kept).  Returns 0, or -errno
 * with errbuf saying why.
 */
int proxy_conf_add_rule(const char *conf_path, const char *session,
			const char *host, const char *method, const char *path,
			char *errbuf, size_t errlen);
bool proxy_granted(const struct spd *spd, const char *session, const char *host,
		   const char *method, const char *path);
void proxy_grants_free(struct spd *spd);
/* Whether method ("GET", or "*") and path ("/glob") make a rule. */
bool proxy_rule_ok(const char *method, const char *path);

struct sockaddr;
/* Why sa is not a public address ("loopback", "link-local", "private",
 * "shared", "unique-local", "unspecified", ...), or NULL when it is. */
const char *proxy_address_class(const struct sockaddr *sa);
/* True when a name that resolved to sa (struct sockaddr_in or _in6) may
 * be reached: a public address, or one allow-address names. */
bool proxy_address_ok(const struct spd_config *cfg, const struct sockaddr *sa);

/* The run a proxy port serves.  Every row the proxy journals for a
 * session's run counts against the session's journal rate
 * (limits.session-journal-rate, daemon/transport/quota.h): a connection
 * past it is refused, and its refusal counted as above. */
struct proxy_run {
	const char *session;   /* NULL for an operator's run; copied */
	const char *actor;     /* "operator" or "agent"; copied */
	const char *workspace; /* shown to a person asked; copied */
	/* The project's tightening (taken, freed with the port), or NULL. */
	struct proxy_project *project;
	/* Told of each ask made for the run, with the pending approval as
	 * approval.list shows it (borrowed), while the port is open; or
	 * NULL. */
	void (*on_ask)(void *data, json_t *pending);
	void *on_ask_data;
};

/*
 * Serve the listening TCP socket fd (taken: closed on failure too) as
 * the egress proxy of run, journaling under its session.  A connection
 * to an ask-host waits for a person (gate_ask_person); the answer holds
 * for that host and port for the rest of the run.  Returns 0 and the
 * port in *ret, or -errno (run->project is freed then too).
 */
int proxy_serve(struct spd *spd, int fd, const struct proxy_run *run,
		struct proxy_port **ret);

/* The run is over: stop accepting, withdraw its asks and close its
 * connections (their byte counts are journaled).  The port frees itself once its handles
 * are closed.  NULL allowed. */
void proxy_close(struct proxy_port *p);

#endif

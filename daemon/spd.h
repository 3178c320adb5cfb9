/*
 * The daemon's state: one struct spd per process, owned by main.c and
 * reachable from every call (call_spd).  Modules keep their own
 * state behind their own pointers here.
 */
#ifndef SPD_DAEMON_SPD_H
#define SPD_DAEMON_SPD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <jansson.h>
#include <uv.h>

#include "common/paths.h"

struct journal;
struct sbx;
struct server;
struct session_store;
struct redact_set;
struct approvals;
struct secrets;
struct call;
struct run_request;
struct quota;
struct broker;
struct linkwatch;
struct attest_key;

/* Sandbox mode: required refuses a run that cannot get every layer
 * (SANDBOX-UNAVAILABLE); best-effort runs it and says what is missing. */
enum spd_sandbox_mode { SPD_SANDBOX_REQUIRED, SPD_SANDBOX_BEST_EFFORT };

struct spd_config {
	enum spd_sandbox_mode sandbox_mode;
	uid_t run_uid; /* when spd runs as root: the unprivileged run uid */
	gid_t run_gid;
	char **writable;  /* extra writable paths the operator lists */
	char **key_files; /* [secrets] file = PATH: files of keys */
	/* [sandbox] hidden: absolute (~ expanded at load), normalized, at
	 * most CONFIG_HIDDEN_MAX; covered in every run and refused to the
	 * file tools and commands outside the workspace.  NULL: none. */
	char **hidden;
	/* [session] git-name, git-email: the identity of agents' commits;
	 * NULL: "agent <session id>". */
	char *git_name, *git_email;
	size_t output_cap;
	uint32_t default_timeout_ms;
	/* [sandbox] kill-grace: from SIGTERM to SIGKILL when spd ends a run
	 * (sbx_spec.kill_grace_ms); 0: SIGKILL at once. */
	uint32_t kill_grace_ms;
	/* [approvals] timeout: an ask nobody answers is refused after it
	 * (0: GATE_WAIT_MS). */
	uint32_t approval_timeout_ms;
	size_t journal_queue_max; /* 0: the journal's default */
	/* [limits] (daemon/transport/quota.h has the defaults and their reasons). */
	uint32_t auth_timeout_ms;      /* to present a valid token */
	uint32_t grant_lifetime_ms;    /* an approval ahead of its call */
	unsigned session_conns;	       /* connections per session token */
	unsigned session_runs;	       /* runs in flight per session */
	unsigned session_journal_rate; /* journaled requests a minute */
	unsigned proxy_head_timeout_s; /* daemon/proxy/proxy.h */
	unsigned proxy_idle_timeout_s;
	unsigned operator_conns; /* connection slots held back */
	unsigned operator_runs;	 /* run slots held back */
	/* [broker]'s numbers (daemon/broker/broker.h has their reasons);
	 * its providers and prices are the broker's own to read. */
	struct {
		int64_t cap_default, cap_max, session_cap; /* picodollars */
		int64_t min_output;			   /* tokens */
		unsigned idle_timeout_s, provider_timeout_s;
		unsigned keepalive_timeout_s;
		size_t body_max;
	} broker;
	/* [network] rules of the egress proxy (daemon/proxy/proxy.h), each
	 * NULL-terminated or NULL: host patterns ("name" or "*.suffix")
	 * allowed, always refused and asked about; addresses a name may
	 * resolve to although private or loopback; and the test resolver's
	 * "name:address" pairs (names under .test only). */
	char **proxy_allow_host;
	char **proxy_deny_host;
	char **proxy_ask_host;
	char **proxy_allow_address;
	char **proxy_resolve;
	/* [credential "NAME"] and [network "HOST"] allow/deny: what the
	 * proxy adds to, and decides on, the requests of the hosts it
	 * terminates (daemon/proxy/proxy.h); [network] test-ca: a CA file
	 * trusted upstream for names under .test only (a test aid); [network]
 * ca-bundle: where the bundle a run trusts is written. */
	struct proxy_credential *proxy_creds;
	size_t proxy_ncreds;
	struct proxy_http_rule *proxy_http_rules;
	size_t proxy_nhttp_rules;
	char *proxy_test_ca;
	char *proxy_ca_bundle; /* [network] ca-bundle, or NULL */
	/* [attest] trust: public keys ("ed25519:BASE64") whose attestations
	 * attest.verify accepts besides spd's own; NULL: none. */
	char **attest_trust;
	/* [provenance] (daemon/session/labels.h): the trusted and the
	 * private files (globs relative to the workspace; NULL: none), the
	 * labels that make a session untrusted (globs; never NULL once
	 * loaded: "network:*" and "agent-tool" by default), and what asks a
	 * person once a session carries one (SPD_PROV_ASK_*). */
	char **prov_trusted, **prov_private, **prov_untrusted;
	unsigned prov_ask;
};

/* [provenance] ask: the steps that ask a person once the session carries
 * an untrusted label (all by default; "none" for none). */
#define SPD_PROV_ASK_EGRESS 0x1u /* a destination it has not contacted */
#define SPD_PROV_ASK_COMMIT 0x2u /* git commit */
#define SPD_PROV_ASK_MERGE 0x4u	 /* session merge of later changes */
#define SPD_PROV_ASK_CONFIG 0x8u /* writing agent configuration or CI */
#define SPD_PROV_ASK_ALL 0xfu

/* A value spd minted and must redact (a session token). */
struct secret_minted {
	char name[65];
	char *value; /* sodium_malloc'd */
};

struct spd {
	uv_loop_t *loop;
	struct spd_paths paths;
	struct spd_config config;
	char operator_token[65]; /* hex, NUL-terminated */
	struct journal *journal;
	struct sbx *sbx;
	struct server *server;
	struct session_store *sessions;
	struct secrets *secrets; /* daemon/keys/secrets.c */
	struct secret_minted *minted;
	size_t n_minted;
	struct redact_set *redact; /* known secrets; may be NULL */
	/* The same secrets' values, NULL-terminated (never passed to a run's
	 * environment whatever the variable is called); may be NULL. */
	char **secret_values;
	/* cmd.run hook for sessions: fill req->workspace (and the in-place
	 * extras) for an agent's session and return 0, or finish c with an
	 * error and return -1, or return 1 when it goes on later (a walk on
	 * the thread pool) and calls req->prepared itself then.  NULL:
	 * operator runs only. */
	int (*run_prepare)(struct spd *spd, struct call *c,
			   struct run_request *req);
	struct approvals *approvals;
	struct quota *quota; /* per-session quotas (daemon/transport/quota.h) */
	struct broker *broker; /* the model broker (daemon/broker/broker.h) */
	/* The workspaces' hard-link lists (daemon/session/linkwatch.h); made
	 * on the first run, NULL before. */
	struct linkwatch *linkwatch;
	/* spd's signing key (daemon/keys/attest.h), loaded or made on
	 * first use; NULL before. */
	struct attest_key *attest_key;
	/* The proxy's CA and its leaf certificates (daemon/proxy/tls.c),
	 * made on the first run that needs them; NULL before. */
	struct proxy_tls *proxy_tls;
	/* Request rules approved for sessions (policy.propose). */
	struct proxy_grant *proxy_grants;
	/* Runs started with a stdin pipe, which run.input finds by the
	 * connection that started them (daemon/methods/m_run.c). */
	struct run_ctx *stdin_runs;
	/* Session-token check, set when the session store is up: stores the
	 * token's session id (malloc'd) and returns 0, or -EACCES. */
	int (*session_auth)(struct spd *spd, const char *token,
			    char **ret_session_id);
	/* Begins spd's clean shutdown (as SIGTERM does), journaling why;
	 * set by main.c, called by daemon.stop.  A second call does
	 * nothing. */
	void (*stop)(struct spd *spd, const char *why);
	/* Adds module state (the sandbox layers, sessions) to daemon.status. */
	void (*status_extra)(struct spd *spd, json_t *status);
	char *sandboxd_path;
	/* spd.conf as it was when spd read it (stat(2) taken just before;
	 * conf_present false: there was none): daemon.status's
	 * config_changed compares the file now against it. */
	bool conf_present;
	dev_t conf_dev;
	ino_t conf_ino;
	off_t conf_size;
	int64_t conf_mtime_ns;
	uint64_t started_us;
	bool foreground;
	bool stopping;
};

/* Records spd.conf's identity now (the conf_* fields above), just before
 * it is read; daemon/methods/m_daemon.c. */
void spd_conf_stamp(struct spd *spd);

#endif

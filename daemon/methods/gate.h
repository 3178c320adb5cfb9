/*
 * The gate every agent call passes before it runs: the policy decides
 * deny / ask / allow (daemon/policy/policy.h), and an ask becomes a pending
 * approval that a person decides (spctl approvals, approve, deny).
 *
 *  - A grant covers exactly the resolved object — the same kind, argv,
 *    cwd, resolved executable and paths, net and environment, and the
 *    content: the BLAKE2b of the bytes fs.write would write, and of every
 *    workspace file a run would execute or read as its script — once,
 *    within that session.  A second identical call asks again, and so
 *    does the same call once a pinned file changed.
 *  - A session has GATE_PROMPTS_MAX prompts; past it, asks are denied.
 *  - GATE_DENIALS_MAX denied calls in a row end the session's attempt
 *    (ATTEMPT-ENDED).
 *  - The operator may pre-approve an ask with "yes" (spctl run --yes).
 * All of it is journaled with the rule id.
 */
#ifndef SPD_DAEMON_GATE_H
#define SPD_DAEMON_GATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon/ask.h"
#include "daemon/policy/policy.h"
#include "daemon/session/labels.h"

struct spd;
struct call;

/* Prompts per session: a person's attention is the scarce resource, and
 * an agent that asks without end is stopped. */
#define GATE_PROMPTS_MAX 20
/* Denied calls in a row that end an attempt (docs/design.md, "Policy"). */
#define GATE_DENIALS_MAX 3
/* How long a waiting call waits for a person before APPROVAL-REFUSED,
 * unless spd.conf's [approvals] timeout says otherwise: long enough to
 * come back to the terminal, short enough that a forgotten ask does not
 * hold its call and connection for good. */
#define GATE_WAIT_MS (10 * 60 * 1000)
/* The longest [approvals] timeout: a day, as a run's own longest. */
#define GATE_WAIT_MAX_S (24 * 3600)
/* Workspaces whose policy configuration is kept parsed: spd.conf and a
 * project's .spd.conf are read again only when they change. */
#define GATE_CONF_CACHE 16
/* Seconds a file must have been unchanged before its parsed form is
 * kept (a write within one timestamp tick keeps size and times). */
#define GATE_CONF_QUIET_S 2
/* Pending approvals kept at once, over all sessions. */
#define GATE_PENDING_MAX 256
/* Workspace files a run's grant pins by content: argv holds at most a
 * few scripts worth pinning; past this many the rest are named by path
 * only, so an argv of thousands of files cannot stall the loop. */
#define GATE_PIN_FILES_MAX 32
/* The largest file hashed on the loop for a grant (a script or a built
 * program, not a data set); a larger one is pinned by size and mtime. */
#define GATE_PIN_HASH_MAX (16u << 20)
/* Bytes of fs.write's content shown to the person as a preview: one
 * line of a terminal. */
#define GATE_PREVIEW_MAX 80

/* One call to judge.  Strings and JSON are borrowed. */
struct gate_call {
	enum policy_call_kind kind;
	json_t *argv;	 /* EXEC: array of strings */
	json_t *env;	 /* EXEC: object NAME → string, or NULL */
	const char *cwd; /* EXEC: absolute or NULL (the workspace) */
	enum policy_net net;
	/* EXEC: the run's network as the person is shown it, when the
	 * policy's net does not say it: "proxy" and "broker" runs are
	 * judged as none (each host is judged when asked for) yet reach
	 * spd's proxy or broker.  NULL: the name of net. */
	const char *net_name;
	const char *path;  /* READ / WRITE */
	const char *path2; /* WRITE: fs.move's destination, or NULL */
	/* WRITE: fs.write's bytes, exactly those that will be written (the
	 * grant pins their hash), or NULL for other calls. */
	const char *content;
	size_t content_len;
	const char *workspace; /* realpath */
	bool in_place;
	const char *session_id; /* NULL: the operator's own call */
	/* policy.check {"ask": true}: the check stands for a call to come
	 * (an ACP agent asks its client's permission, then makes the call),
	 * so a person's approval also leaves a grant for this exact call,
	 * used once, which that call then takes instead of asking again. */
	bool grant_after;
};

/* The call may proceed (it was allowed or approved). */
typedef void (*gate_cont_fn)(struct call *c, void *data);
/* The gate finished the call with an error; release data. */
typedef void (*gate_drop_fn)(void *data);

/*
 * Judge a call.  Exactly one of cont(c, data) or drop(data) follows, now
 * or later (an approval).  When drop runs, c has been finished with
 * POLICY-DENIED, NEEDS-APPROVAL, APPROVAL-REFUSED, ATTEMPT-ENDED or
 * BAD-REQUEST.  The request's "wait" param (default true) says whether an
 * ask waits for the decision; "yes" (operator only) approves an ask.
 */
void gate_check(struct call *c, const struct gate_call *g, gate_cont_fn cont,
		gate_drop_fn drop, void *data);

/* gate_prov.c: turn res (the policy's allow of g) into an ask when g's
 * session's provenance labels say a person must decide. */
void gate_provenance(struct spd *spd, const struct gate_call *g,
		     struct policy_result *res);
/* gate_prov.c: the labels of a run's result (command, private, the hosts
 * its proxy fetched from since start_s) on call c, and its output's first
 * bytes (head, head_len: stdout, stderr) remembered as served. */
void prov_run_labels(struct spd *spd, struct call *c, json_t *argv,
		     const char *workspace, int64_t start_s,
		     const char head[2][SESSION_SERVED_PREFIX],
		     const size_t head_len[2]);

/* The configuration for a workspace: built-ins, the operator's spd.conf,
 * the project's .spd.conf.  Returns 0 and *ret, or -errno with *ret_what
 * naming the file that failed ("spd.conf" or ".spd.conf") and why in
 * errbuf ("FILE:LINE: ..." for an unknown key: -EINVAL). */
/* Let ctx judge a git push by the proxy's terminated hosts when the call
 * is a session's (session_id) in a run whose network is spd's proxy
 * (net_name "proxy"); otherwise ctx is left as it is (a push refused). */
struct policy_context;
void gate_push_context(struct spd *spd, struct policy_context *ctx,
		       const char *net_name, const char *session_id);

/* approval.decide {"always": true} on ask (its session, rule and
 * object): a rule a session proposed (policy.propose) is written into
 * spd.conf as well and journaled; 0, or -1 having finished c with an
 * error (another kind of ask, a host spd.conf has no rules for, a file
 * spd cannot write).  m_policy.c. */
struct json_t;
int propose_always(struct call *c, const char *session, const char *rule,
		   struct json_t *object);

int gate_policy_conf(struct spd *spd, const char *workspace,
		     struct policy_conf **ret, const char **ret_what,
		     char *errbuf, size_t errlen);

/*
 * The attempt of session_id ended (a finding, three denials, the session
 * ended): its pending asks are withdrawn — a waiting call fails with
 * ATTEMPT-ENDED (why), followers get approval.withdrawn — and its
 * unused grants are dropped.  NULL spd->approvals allowed.
 */
void gate_withdraw_session(struct spd *spd, const char *session_id,
			   const char *why);

/* Start and stop the approvals state. */
int gate_start(struct spd *spd);
void gate_stop(struct spd *spd);

#endif

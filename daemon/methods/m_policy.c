/*
 * policy.check: classify a command or a file access without running it
 * (spctl policy check).  The answer is the one a real call would get: the
 * same engine, configuration and session context.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "daemon/transport/handlers.h"
#include "common/paths.h"
#include "common/util.h"
#include "daemon/transport/call.h"
#include "daemon/ask.h"
#include "daemon/journal/journal.h"
#include "daemon/log.h"
#include "daemon/methods/gate.h"
#include "daemon/proxy/proxy.h"
#include "daemon/policy/policy.h"
#include "daemon/spd.h"

static policy_session_lookup_fn session_lookup;

void policy_set_session_lookup(policy_session_lookup_fn fn)
{
	session_lookup = fn;
}

/* What an agent is told in place of a resolved path outside its
 * workspace: that it is outside, not where the host keeps it. */
#define OUTSIDE "(outside the workspace)"

/* True when path lies in ws (or is ws). */
static bool inside(const char *path, const char *ws)
{
	size_t n = strlen(ws);

	return strncmp(path, ws, n) == 0 && (path[n] == '/' || !path[n]);
}

/*
 * True when path, taken lexically against the workspace (absolute, or
 * relative to it), leaves it: "/etc/x", "../x", "a/../../x".  Nothing
 * is resolved, so nothing about the host's layout is learnt by asking.
 */
static bool lexically_outside(const char *path, const char *ws)
{
	const char *p = path;
	long depth = 0;

	if (path[0] == '/') {
		if (!inside(path, ws))
			return true;
		p = path + strlen(ws);
	}
	while (*p) {
		size_t n;

		while (*p == '/')
			p++;
		n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			if (--depth < 0)
				return true;
		} else if (n > 0 && !(n == 1 && p[0] == '.')) {
			depth++;
		}
		p += n;
	}
	return false;
}

/*
 * The reply.  An agent (ws non-NULL) sees resolved paths only inside its
 * workspace and programs only where its runs find them (the workspace or
 * the run's PATH directories); anything else is OUTSIDE: the real paths
 * of the operator's host are not the agent's to map.
 */
static json_t *result_json(const struct policy_result *res, const char *ws)
{
	json_t *paths = json_array();
	const char *exe = res->exe;

	for (size_t i = 0; paths && i < res->n_paths; i++)
		json_array_append_new(
		    paths,
		    json_string(!ws || inside(res->paths[i], ws) ? res->paths[i]
								 : OUTSIDE));
	if (ws && exe && !inside(exe, ws) && strncmp(exe, "/usr/", 5) != 0 &&
	    strncmp(exe, "/bin/", 5) != 0 && strncmp(exe, "/sbin/", 6) != 0)
		exe = OUTSIDE;
	return json_pack("{s:s, s:s, s:s, s:{s:s?, s:o}}", "decision",
			 policy_decision_name(res->decision), "rule", res->rule,
			 "reason", res->reason, "resolved", "exe", exe, "paths",
			 paths ? paths : json_array());
}

/*
 * policy.check: params argv (array of strings) | read | write (path), and
 * session (or, for the operator, workspace).  Replies {decision, rule,
 * reason, resolved: {exe, paths[]}}; a malformed call is BAD-REQUEST.  The
 * configuration is the built-in defaults, the operator's spd.conf and the
 * workspace's .spd.conf.
 */
/* The exec call's argv and environment, as the classifier takes them
 * (borrowed strings, owned arrays). */
struct check_args {
	const char **argv, **env;
	size_t *argv_len, envc;
	char **env_owned;
};

static void check_args_free(struct check_args *a)
{
	if (a->env_owned)
		for (size_t i = 0; i < a->envc; i++)
			free(a->env_owned[i]);
	free(a->env_owned);
	free(a->env);
	free(a->argv);
	free(a->argv_len);
}

/*
 * Whose context the check is made in: an agent only ever its own session;
 * the operator a session or a workspace (made real into *ret_ws_real,
 * owned by the caller).  Fills ctx; returns 0, or -1 having answered c.
 */
static int check_context(struct call *c, struct policy_context *ctx,
			 char *session_ws, size_t session_ws_len,
			 char **ret_ws_real)
{
	json_t *params = call_params(c);
	const struct call_principal *who = call_principal(c);
	json_t *jsess = json_object_get(params, "session");
	json_t *jws = json_object_get(params, "workspace");
	const char *sid = NULL;

	if (!who->operator) {
		if (jws) {
			call_error(c, RPC_E_UNAUTHORIZED, NULL,
				   "an agent checks in its own session");
			return -1;
		}
		sid = who->session_id;
		if (jsess && (!json_is_string(jsess) || !sid ||
			      strcmp(json_string_value(jsess), sid) != 0)) {
			call_error(c, RPC_E_UNAUTHORIZED, NULL,
				   "an agent checks in its own session");
			return -1;
		}
	} else if (jsess) {
		sid = json_string_value(jsess);
	}
	if (sid) {
		if (!session_lookup) {
			call_error(c, RPC_E_INTERNAL, NULL,
				   "sessions are not available");
			return -1;
		}
		if (session_lookup(call_spd(c), sid, ctx, session_ws,
				   session_ws_len) < 0) {
			call_error(c, RPC_E_BAD_REQUEST, NULL,
				   "no such session");
			return -1;
		}
		return 0;
	}
	if (!json_is_string(jws)) {
		call_error(c, RPC_E_BAD_REQUEST, NULL,
			   "give a session or a workspace");
		return -1;
	}
	*ret_ws_real = realpath(json_string_value(jws), NULL);
	if (!*ret_ws_real) {
		call_error(c, RPC_E_BAD_REQUEST, NULL,
			   "the workspace does not exist");
		return -1;
	}
	ctx->workspace = *ret_ws_real;
	return 0;
}

/* The environment of an exec check (only string values count). */
static int check_env(struct call *c, json_t *jenv, struct check_args *a,
		     struct policy_call *call)
{
	size_t en = json_object_size(jenv);
	const char *k;
	json_t *v;

	if (en > POLICY_ENV_MAX) {
		call_error(c, RPC_E_BAD_REQUEST, NULL,
			   "too many environment entries");
		return -1;
	}
	a->env_owned = calloc(en + 1, sizeof(char *));
	a->env = calloc(en + 1, sizeof(char *));
	if (!a->env_owned || !a->env)
		return -ENOMEM;
	json_object_foreach(jenv, k, v)
	{
		if (!json_is_string(v))
			continue;
		if (asprintf(&a->env_owned[a->envc], "%s=%s", k,
			     json_string_value(v)) < 0) {
			a->env_owned[a->envc] = NULL;
			return -ENOMEM;
		}
		a->env[a->envc] = a->env_owned[a->envc];
		a->envc++;
	}
	call->env = a->env;
	call->envc = a->envc;
	return 0;
}

/* An exec check: argv, cwd, net and env from params into call.  Returns
 * 0, -1 having answered c, or -ENOMEM. */
static int check_exec(struct call *c, json_t *jargv, struct check_args *a,
		      struct policy_call *call)
{
	json_t *params = call_params(c);
	json_t *jcwd = json_object_get(params, "cwd");
	json_t *jnet = json_object_get(params, "net");
	json_t *jenv = json_object_get(params, "env");
	size_t n = json_array_size(jargv);

	if (!json_is_array(jargv) || n == 0 || n > POLICY_ARGC_MAX) {
		call_error(c, RPC_E_BAD_REQUEST, NULL,
			   "argv must be a non-empty array of at most %d "
			   "strings",
			   POLICY_ARGC_MAX);
		return -1;
	}
	a->argv = calloc(n, sizeof(*a->argv));
	a->argv_len = calloc(n, sizeof(*a->argv_len));
	if (!a->argv || !a->argv_len)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		json_t *s = json_array_get(jargv, i);

		if (!json_is_string(s)) {
			call_error(c, RPC_E_BAD_REQUEST, NULL,
				   "argv must hold strings");
			return -1;
		}
		a->argv[i] = json_string_value(s);
		a->argv_len[i] = json_string_length(s);
	}
	call->kind = POLICY_CALL_EXEC;
	call->argv = a->argv;
	call->argv_len = a->argv_len;
	call->argc = n;
	if (json_is_string(jcwd))
		call->cwd = json_string_value(jcwd);
	if (json_is_string(jnet)) {
		const char *net = json_string_value(jnet);

		call->net = strcmp(net, "host") == 0	   ? POLICY_NET_HOST
			    : strcmp(net, "loopback") == 0 ? POLICY_NET_LOOPBACK
							   : POLICY_NET_NONE;
	}
	return json_is_object(jenv) ? check_env(c, jenv, a, call) : 0;
}

/*
 * A read or write check of one path.  An agent's path that leaves its
 * workspace on its face is answered as such, unresolved: policy.check
 * must not be a way to probe the host's files as spd's user.  Returns 0
 * (classify it), or 1 having answered c, or -1 having refused it.
 */
static int check_path(struct call *c, json_t *jread, json_t *jwrite,
		      const struct policy_context *ctx,
		      struct policy_call *call)
{
	json_t *p = jread ? jread : jwrite;
	bool w;

	if (!json_is_string(p)) {
		call_error(c, RPC_E_BAD_REQUEST, NULL,
			   "the path must be a string");
		return -1;
	}
	call->kind = jread ? POLICY_CALL_READ : POLICY_CALL_WRITE;
	call->path = json_string_value(p);
	call->path_len = json_string_length(p);
	if (call_principal(c)->operator|| !lexically_outside(call->path,
							     ctx->workspace))
		return 0;
	w = call->kind == POLICY_CALL_WRITE;
	call_set_summary(c, "outside");
	/* Under a [sandbox] hidden path (lexically: nothing resolved):
	 * refused, whoever would approve it. */
	if (policy_path_hidden_lex(ctx->hidden, ctx->workspace, call->path)) {
		call_reply(c, json_pack("{s:s, s:s, s:s, s:{s:n, s:[s]}}",
					"decision", "deny", "rule",
					"deny.path.hidden", "reason",
					"the path is under a path spd.conf's "
					"[sandbox] hidden keeps from every run",
					"resolved", "exe", "paths", OUTSIDE));
		return 1;
	}
	call_reply(
	    c, json_pack("{s:s, s:s, s:s, s:{s:n, s:[s]}}", "decision",
			 w ? "deny" : "ask", "rule",
			 w ? "deny.path.outside" : "ask.read.outside", "reason",
			 w ? "the path is outside the workspace"
			   : "the path is outside the workspace: a person "
			     "decides",
			 "resolved", "exe", "paths", OUTSIDE));
	return 1;
}

/* policy.check {"ask": true} on an ask: the check becomes a pending
 * approval like a real call's, and the answer waits for the person. */
struct ask_wait {
	json_t *result;
};

static void ask_granted(struct call *c, void *data)
{
	struct ask_wait *w = data;

	json_object_set_new(w->result, "decision", json_string("allow"));
	json_object_set_new(w->result, "approved", json_true());
	call_set_summary(c, "ask approved");
	call_reply(c, w->result);
	free(w);
}

static void ask_dropped(void *data)
{
	struct ask_wait *w = data;

	json_decref(w->result);
	free(w);
}

/* Put the ask to a person through the gate (an approval, journaled, that
 * spctl approve or deny decides); the call is answered when it is. */
static void check_ask(struct call *c, const struct policy_context *ctx,
		      const struct policy_call *call, json_t *result)
{
	json_t *params = call_params(c);
	const struct call_principal *who = call_principal(c);
	const char *sid =
	    who->operator? json_string_value(json_object_get(params, "session"))
			 : who->session_id;
	json_t *jcwd = json_object_get(params, "cwd");
	const char *net = json_string_value(json_object_get(params, "net"));
	struct gate_call g = {
	    .kind = call->kind,
	    .argv = json_object_get(params, "argv"),
	    .env = json_object_get(params, "env"),
	    .cwd = json_string_value(jcwd),
	    .net = call->net,
	    /* As cmd.run names these runs' network in the ask, so that a
	     * grant left for the call to come matches it. */
	    .net_name =
		net && (strcmp(net, "proxy") == 0 || strcmp(net, "broker") == 0)
		    ? net
		    : NULL,
	    .path = call->kind == POLICY_CALL_EXEC ? NULL : call->path,
	    .workspace = ctx->workspace,
	    .in_place = ctx->in_place,
	    .session_id = sid,
	    .grant_after = true,
	};
	struct ask_wait *w;

	if (!sid) {
		json_decref(result);
		call_error(c, RPC_E_BAD_REQUEST, NULL,
			   "\"ask\" puts the check to a person in a "
			   "session: give session");
		return;
	}
	if (!(w = calloc(1, sizeof(*w)))) {
		json_decref(result);
		call_error(c, RPC_E_INTERNAL, NULL, "out of memory");
		return;
	}
	w->result = result;
	gate_check(c, &g, ask_granted, ask_dropped, w);
}

void m_policy_check(struct call *c)
{
	json_t *params = call_params(c);
	const struct call_principal *who = call_principal(c);
	json_t *jargv = json_object_get(params, "argv");
	json_t *jread = json_object_get(params, "read");
	json_t *jwrite = json_object_get(params, "write");
	struct policy_context ctx = {0};
	char session_ws[PATH_MAX];
	struct policy_call call = {0};
	struct policy_result res = {0};
	struct policy_conf *conf = NULL;
	struct check_args args = {0};
	char *ws_real = NULL;
	const char *what = "";
	char why[600];
	int r;

	if (!!jargv + !!jread + !!jwrite != 1) {
		call_error(c, RPC_E_BAD_REQUEST, NULL,
			   "give exactly one of argv, read, write");
		goto out;
	}
	if (check_context(c, &ctx, session_ws, sizeof(session_ws), &ws_real) <
	    0)
		goto out;
	ctx.hidden = (const char *const *)call_spd(c)->config.hidden;
	/* As cmd.run judges a session's proxy run: a git push to a host
	 * spd terminates is the proxy's to check. */
	gate_push_context(
	    call_spd(c), &ctx,
	    json_string_value(json_object_get(params, "net")),
	    who->operator? json_string_value(json_object_get(params, "session"))
			 : who->session_id);
	r = gate_policy_conf(call_spd(c), ctx.workspace, &conf, &what, why,
			     sizeof(why));
	if (r < 0) {
		call_error(c,
			   r == -EINVAL && strcmp(what, ".spd.conf") == 0
			       ? RPC_E_BAD_REQUEST
			       : RPC_E_INTERNAL,
			   NULL, "%s", why);
		goto out;
	}
	r = jargv ? check_exec(c, jargv, &args, &call)
		  : check_path(c, jread, jwrite, &ctx, &call);
	if (r == -ENOMEM)
		call_error(c, RPC_E_INTERNAL, NULL, "out of memory");
	if (r != 0)
		goto out;
	r = policy_classify(conf, &ctx, &call, &res);
	if (r < 0) {
		call_error(c, RPC_E_INTERNAL, NULL,
			   "the policy could not classify the call");
		goto out;
	}
	call_set_summary(c, "%s %s", policy_decision_name(res.decision),
			 res.rule);
	if (res.decision == POLICY_BAD_REQUEST) {
		call_error(c, RPC_E_BAD_REQUEST,
			   json_pack("{s:s}", "rule", res.rule), "%s",
			   res.reason);
		goto out;
	}
	if (res.decision == POLICY_ASK &&
	    json_is_true(json_object_get(params, "ask"))) {
		check_ask(
		    c, &ctx, &call,
		    result_json(&res, who->operator? NULL : ctx.workspace));
		goto out;
	}
	call_reply(c, result_json(&res, who->operator? NULL : ctx.workspace));
out:
	policy_result_free(&res);
	policy_conf_free(conf);
	check_args_free(&args);
	free(ws_real);
}

/* ---- policy.propose ------------------------------------------------- */

struct proposal {
	struct spd *spd;
	char *session, *host, *method, *path;
};

static void proposal_decided(void *data, bool approved, const char *why)
{
	struct proposal *p = data;
	char subject[300], *text = NULL;
	json_t *d;
	int r = approved ? proxy_grant_add(p->spd, p->session, p->host,
					   p->method, p->path)
			 : 0;

	if (r < 0 && r != -ENOMEM)
		log_warn("policy.propose: the rule approved for %s could not "
			 "be saved in the state dir (it holds until spd "
			 "stops): %s",
			 p->session, strerror(-r));
	d = json_pack("{s:s, s:s, s:s, s:s, s:s?, s:b}", "host", p->host,
		      "method", p->method, "path", p->path, "decision",
		      !approved	     ? "refused"
		      : r == -ENOMEM ? "out of memory"
				     : "allow",
		      "why", why, "saved", approved && r == 0);
	text = d ? json_dumps(d, JSON_COMPACT) : NULL;
	snprintf(subject, sizeof(subject), "%s allow = %s %s", p->host,
		 p->method, p->path);
	if (journal_append(p->spd->journal, p->session, "operator",
			   "net.proxy.rule", subject, text) < 0)
		log_warn("policy.propose: cannot journal the rule for %s",
			 subject);
	free(text);
	json_decref(d);
	free(p->session);
	free(p->host);
	free(p->method);
	free(p->path);
	free(p);
}

int propose_always(struct call *c, const char *session, const char *rule,
		   json_t *object)
{
	struct spd *spd = call_spd(c);
	const char *host = json_string_value(json_object_get(object, "host")),
		   *method =
		       json_string_value(json_object_get(object, "method")),
		   *path = json_string_value(json_object_get(object, "path"));
	char err[600], subject[300];
	bool any = false;
	json_t *d;
	char *text;

	if (strcmp(rule, "ask.net.rule") != 0 || !host || !method || !path) {
		call_error(c, RPC_E_BAD_PARAMS, NULL,
			   "always applies to a request rule a session "
			   "proposed (policy.propose) only");
		return -1;
	}
	/* A first rule for a host would refuse every request no rule
	 * matches, which the host's credential alone let through. */
	proxy_http_decide(&spd->config, host, method, path, &any);
	if (!any) {
		call_error(c, RPC_E_BAD_PARAMS, NULL,
			   "spd.conf has no [network \"%s\"] rules: one rule "
			   "written there would refuse every other request to "
			   "%s; approve it for the session, or write the "
			   "rules yourself",
			   host, host);
		return -1;
	}
	if (proxy_conf_add_rule(spd->paths.conf_path, session, host, method,
				path, err, sizeof(err)) < 0) {
		call_error(c, RPC_E_INTERNAL, NULL,
			   "cannot write the rule into spd.conf: %s", err);
		return -1;
	}
	snprintf(subject, sizeof(subject), "%s allow = %s %s", host, method,
		 path);
	d = json_pack("{s:s, s:s, s:s, s:s}", "host", host, "method", method,
		      "path", path, "file", spd->paths.conf_path);
	text = d ? json_dumps(d, JSON_COMPACT) : NULL;
	if (journal_append(spd->journal, session, "operator",
			   "net.proxy.rule.conf", subject, text) < 0)
		log_warn("approval: cannot journal the rule written to "
			 "spd.conf: %s",
			 subject);
	free(text);
	json_decref(d);
	return 0;
}

void m_policy_propose(struct call *c)
{
	struct spd *spd = call_spd(c);
	const struct call_principal *who = call_principal(c);
	json_t *params = call_params(c);
	const char *host = json_string_value(json_object_get(params, "host"));
	const char *method =
	    json_string_value(json_object_get(params, "method"));
	const char *path = json_string_value(json_object_get(params, "path"));
	struct proposal *p;
	char reason[1400];
	json_t *object;
	int64_t id;

	if (!who->session_id) {
		call_error(c, RPC_E_BAD_REQUEST, NULL,
			   "policy.propose is a session's: the operator writes "
			   "[network \"HOST\"] rules in spd.conf");
		return;
	}
	if (!host || !method || !path || !proxy_rule_ok(method, path) ||
	    strlen(host) > PROXY_HOST_MAX) {
		call_error(c, RPC_E_BAD_REQUEST, NULL,
			   "a rule is a method (GET, or * for any) and a path "
			   "from / (a glob: * within a segment, ** across)");
		return;
	}
	if (!proxy_terminates(&spd->config, host)) {
		call_error(c, RPC_E_BAD_REQUEST, NULL,
			   "%s has no [credential] or [network \"HOST\"] rules "
			   "in spd.conf: spd does not read its requests",
			   host);
		return;
	}
	p = calloc(1, sizeof(*p));
	if (!p || !(p->session = strdup(who->session_id)) ||
	    !(p->host = strdup(host)) || !(p->method = strdup(method)) ||
	    !(p->path = strdup(path))) {
		if (p) {
			free(p->session);
			free(p->host);
			free(p->method);
		}
		free(p);
		call_error(c, RPC_E_INTERNAL, NULL, "out of memory");
		return;
	}
	p->spd = spd;
	snprintf(reason, sizeof(reason),
		 "the session asks for a rule of its proxy: allow = %s %s for "
		 "%s (its runs' requests to that host, from the next on)",
		 method, path, host);
	object = json_pack("{s:s, s:s, s:s, s:s}", "kind", "net.rule", "host",
			   host, "method", method, "path", path);
	id = object ? gate_ask_person(spd,
				      &(struct gate_ask){who->session_id,
							 "ask.net.rule", reason,
							 object},
				      proposal_decided, p)
		    : -ENOMEM;
	json_decref(object);
	if (id < 0) {
		free(p->session);
		free(p->host);
		free(p->method);
		free(p->path);
		free(p);
		call_error(c,
			   id == -EDQUOT || id == -EAGAIN ? RPC_E_BAD_REQUEST
							  : RPC_E_INTERNAL,
			   NULL, "no person can be asked: %s",
			   id == -EDQUOT
			       ? "the session has used all its prompts"
			   : id == -EAGAIN ? "too many approvals are pending"
					   : strerror((int)-id));
		return;
	}
	call_set_summary(c, "ask %s %s %s", host, method, path);
	call_reply(c, json_pack("{s:I}", "approval", (json_int_t)id));
}

/*
 * The policy engine: see policy.h for the contract and the rule order.
 *
 * A classification collects findings at three levels -- deny, a "hard"
 * ask (paths, environment, configured asks, host network) and a
 * "command" ask (shells, wrappers, unknown programs: the ones the
 * operator's allow lists may lift) -- keeping the first of each, then
 * decides in the fixed order.  Paths are resolved component by component
 * with lstat/readlink, as the kernel would, so "link/.." and symlinked
 * directories land where the kernel would land.
 *
 * The engine's parts share policy_priv.h: this file holds the
 * configuration, the findings and the entry point; policy_path.c the
 * paths, policy_exec.c the programs and their cache, policy_opts.c the
 * options and the simple commands, policy_tools.c find, sed, awk and dd,
 * policy_git.c git, policy_level.c the levels and wrappers.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <git2.h>

#include "common/utf8.h"
#include "common/words.h"
#include "common/util.h"
#include "daemon/policy/policy.h"
#include "daemon/policy/protected.h"
#include "daemon/policy/policy_priv.h"
#include "daemon/conftab.h"

/* ---------------------------------------------------------------- */
/* Configuration                                                     */

struct policy_conf *policy_conf_new(void)
{
	struct policy_conf *conf = calloc(1, sizeof(*conf));

	if (conf)
		conf->refs = 1;
	return conf;
}

struct policy_conf *policy_conf_ref(struct policy_conf *conf)
{
	if (conf)
		conf->refs++;
	return conf;
}

void policy_conf_free(struct policy_conf *conf)
{
	if (!conf || --conf->refs > 0)
		return;
	for (size_t l = 0; l < 2; l++)
		for (size_t k = 0; k < POLICY_LIST__COUNT; k++) {
			struct elist *e = &conf->lists[l][k];

			for (size_t i = 0; i < e->n; i++)
				policy_words_free(e->v[i].words);
			free(e->v);
		}
	free(conf);
}

void policy_words_free(char **words)
{
	words_free(words);
}

int policy_split_words(const char *s, char ***ret_words)
{
	return words_split(s, POLICY_WORDS_MAX, ret_words);
}

int policy_conf_add(struct policy_conf *conf, enum policy_layer layer,
		    enum policy_list list, const char *value)
{
	struct elist *e;
	char **words;
	int n;

	if (!conf || (unsigned)layer > POLICY_LAYER_PROJECT ||
	    (unsigned)list >= POLICY_LIST__COUNT || !value)
		return -EINVAL;
	e = &conf->lists[layer][list];
	if (list == POLICY_LIST_PROTECTED || list == POLICY_LIST_READABLE) {
		words = calloc(2, sizeof(char *));
		if (!words)
			return -ENOMEM;
		words[0] = strdup(value);
		if (!words[0]) {
			free(words);
			return -ENOMEM;
		}
		n = 1;
	} else {
		n = policy_split_words(value, &words);
		if (n < 0)
			return n;
		if (n == 0) {
			policy_words_free(words);
			return -EINVAL;
		}
	}
	if (e->n == e->cap) {
		size_t cap = e->cap ? e->cap * 2 : 8;
		struct entry *v = realloc(e->v, cap * sizeof(*v));

		if (!v) {
			policy_words_free(words);
			return -ENOMEM;
		}
		e->v = v;
		e->cap = cap;
	}
	e->v[e->n].words = words;
	e->v[e->n].n = (size_t)n;
	e->n++;
	return 0;
}

const char *policy_conf_error(const struct policy_conf *conf)
{
	return conf ? conf->err : "";
}

struct load_ctx {
	struct policy_conf *conf;
	enum policy_layer layer;
	enum policy_list list;
	int err;
};

static int load_one(const git_config_entry *ent, void *data)
{
	struct load_ctx *l = data;
	int r = policy_conf_add(l->conf, l->layer, l->list, ent->value);

	if (r < 0 && !l->err)
		l->err = r;
	return 0;
}

/* libgit2 is initialised on the first configuration read (loop thread
 * only: classification of files happens there). */
int policy_conf_load(struct policy_conf *conf, enum policy_layer layer,
		     const char *path)
{
	static const struct {
		const char *key;
		enum policy_list list;
	} keys[] = {
	    {"policy.deny", POLICY_LIST_DENY},
	    {"policy.ask", POLICY_LIST_ASK},
	    {"policy.allow", POLICY_LIST_ALLOW},
	    {"policy.allow-exact", POLICY_LIST_ALLOW_EXACT},
	    {"policy.protected", POLICY_LIST_PROTECTED},
	    {"policy.readable", POLICY_LIST_READABLE},
	    {"network.allow", POLICY_LIST_NETWORK},
	};
	git_config *cfg = NULL;
	git_config_iterator *it = NULL;
	git_config_entry *ent;
	struct load_ctx l = {conf, layer, 0, 0};
	int r;

	if (!conf || !path)
		return -EINVAL;
	conf->err[0] = '\0';
	/* spd.conf's keys were checked at start, and are checked again
	 * here: the file may have changed since (the gate reads it again
	 * when it does); the project's file is the agent's to mistype. */
	r = conftab_open(
	    path, layer == POLICY_LAYER_PROJECT ? ".spd.conf" : NULL,
	    layer == POLICY_LAYER_PROJECT ? CONFTAB_PROJECT : CONFTAB_SPD_CONF,
	    &cfg, conf->err, sizeof(conf->err));
	if (r < 0)
		return r;
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
		l.list = keys[i].list;
		r = git_config_get_multivar_foreach(cfg, keys[i].key, NULL,
						    load_one, &l);
		if (r < 0 && r != GIT_ENOTFOUND) {
			r = -EINVAL;
			goto out;
		}
	}
	/* [check "NAME"] run: walked by hand, because libgit2's regex
	 * matching (git_config_foreach_match) leaks pcre2 match data. */
	l.list = POLICY_LIST_CHECK;
	r = git_config_iterator_new(&it, cfg);
	if (r < 0) {
		r = -EINVAL;
		goto out;
	}
	while (git_config_next(&ent, it) == 0) {
		size_t n = strlen(ent->name);

		if (strncasecmp(ent->name, "check.", 6) == 0 && n > 10 &&
		    strcasecmp(ent->name + n - 4, ".run") == 0)
			load_one(ent, &l);
	}
	r = l.err;
out:
	git_config_iterator_free(it);
	git_config_free(cfg);
	return r;
}

static bool readable_in(const struct elist *e, const char *relpath)
{
	for (size_t i = 0; i < e->n; i++)
		if (protected_pattern_match(e->v[i].words[0], relpath))
			return true;
	return false;
}

bool policy_conf_operator_readable(const struct policy_conf *conf,
				   const char *relpath)
{
	return conf &&
	       readable_in(
		   &conf->lists[POLICY_LAYER_OPERATOR][POLICY_LIST_READABLE],
		   relpath);
}

bool policy_conf_project_readable(const struct policy_conf *conf,
				  const char *relpath)
{
	return conf &&
	       (policy_conf_operator_readable(conf, relpath) ||
		readable_in(
		    &conf->lists[POLICY_LAYER_PROJECT][POLICY_LIST_READABLE],
		    relpath));
}

/* ---------------------------------------------------------------- */
/* Classification state                                              */

/*
 * vsnprintf into a reason buffer (n > 0), with the same result.  Nearly
 * every call ends with one reason, and most formats hold only "%s":
 * those are copied here, for a fifth of what printf's machinery costs;
 * any other conversion goes to vsnprintf.
 */
/* Append s[0..len) to dst (room bytes, room > 0), leaving room for the
 * NUL; returns the bytes written. */
static size_t reason_put(char *dst, size_t room, const char *s, size_t len)
{
	if (len > room - 1)
		len = room - 1;
	memcpy(dst, s, len);
	return len;
}

__attribute__((format(printf, 3, 0))) static void
format_reason(char *dst, size_t n, const char *fmt, va_list ap)
{
	size_t o = 0;

	for (const char *q = fmt; (q = strchr(q, '%')); q += 2)
		if (q[1] != 's') {
			vsnprintf(dst, n, fmt, ap);
			return;
		}
	for (const char *q = fmt; *q;) {
		const char *e = strchrnul(q, '%');
		const char *a = *e ? va_arg(ap, const char *) : NULL;

		o += reason_put(dst + o, n - o, q, (size_t)(e - q));
		if (!*e)
			break;
		if (!a)
			a = "(null)";
		o += reason_put(dst + o, n - o, a, strlen(a));
		q = e + 2;
	}
	dst[o] = '\0';
}

static void vnote(struct finding *f, const char *rule, const char *fmt,
		  va_list ap)
{
	if (f->rule)
		return;
	f->rule = rule;
	format_reason(f->reason, sizeof(f->reason), fmt, ap);
}

#define NOTE_FN(fn, field)                                                     \
	__attribute__((format(printf, 3, 4))) void fn(                         \
	    struct cls *c, const char *rule, const char *fmt, ...)             \
	{                                                                      \
		va_list ap;                                                    \
		va_start(ap, fmt);                                             \
		vnote(&c->field, rule, fmt, ap);                               \
		va_end(ap);                                                    \
	}
NOTE_FN(pol_deny, deny)
NOTE_FN(pol_hard_ask, hard_ask)
NOTE_FN(pol_cmd_ask, cmd_ask)

__attribute__((format(printf, 3, 4))) void
pol_allow(struct cls *c, const char *rule, const char *fmt, ...)
{
	va_list ap;

	if (c->allow_rule)
		return;
	c->allow_rule = rule;
	va_start(ap, fmt);
	format_reason(c->allow_reason, sizeof(c->allow_reason), fmt, ap);
	va_end(ap);
}

/* ---------------------------------------------------------------- */
/* The entry point                                                   */

static bool bad_string(const char *s, size_t n, size_t max, const char **rule)
{
	if (n > max) {
		*rule = "bad.too-long";
		return true;
	}
	if (memchr(s, '\0', n)) {
		*rule = "bad.nul";
		return true;
	}
	if (!utf8_valid(s, n)) {
		*rule = "bad.utf8";
		return true;
	}
	return false;
}

/* NUL bytes, invalid UTF-8 and over-long input are refused before any
 * rule: a path with a NUL means one thing to the policy and another to
 * the kernel, and invalid UTF-8 cannot be shown to a person faithfully. */
static const char *validate(const struct policy_call *call)
{
	const char *rule = NULL;
	size_t total = 0;

	if (call->kind != POLICY_CALL_EXEC) {
		size_t n = call->path_len ? call->path_len
			   : call->path	  ? strlen(call->path)
					  : 0;

		if (n == 0)
			return "bad.empty";
		if (bad_string(call->path, n, POLICY_PATH_MAX - 1, &rule))
			return rule;
		return NULL;
	}
	if (call->argc == 0 || !call->argv || !call->argv[0] ||
	    !call->argv[0][0])
		return "bad.empty";
	if (call->argc > POLICY_ARGC_MAX || call->envc > POLICY_ENV_MAX)
		return "bad.too-long";
	for (size_t i = 0; i < call->argc; i++) {
		size_t n;

		if (!call->argv[i])
			return "bad.empty";
		n = call->argv_len ? call->argv_len[i] : strlen(call->argv[i]);
		if (bad_string(call->argv[i], n, POLICY_ARG_MAX, &rule))
			return rule;
		total += n + 1;
	}
	for (size_t i = 0; i < call->envc; i++) {
		size_t n = strlen(call->env[i]);

		if (bad_string(call->env[i], n, POLICY_ARG_MAX, &rule))
			return rule;
		if (!strchr(call->env[i], '=') || call->env[i][0] == '=')
			return "bad.env";
		total += n + 1;
	}
	if (total > POLICY_ARGV_BYTES_MAX)
		return "bad.too-long";
	if (call->cwd && bad_string(call->cwd, strlen(call->cwd),
				    POLICY_PATH_MAX - 1, &rule))
		return rule;
	return NULL;
}

static void set_result(struct policy_result *r, enum policy_decision d,
		       const char *rule, const char *reason)
{
	/* Not snprintf: this runs for every call. */
	size_t n = strlen(reason);

	if (n >= sizeof(r->reason))
		n = sizeof(r->reason) - 1;

	r->decision = d;
	r->rule = rule;
	memcpy(r->reason, reason, n);
	r->reason[n] = '\0';
}

static void classify_exec(struct cls *c, char *cwd)
{
	const struct policy_call *call = c->call;
	const char *path_env =
	    c->ctx->path_env ? c->ctx->path_env : POLICY_DEFAULT_PATH;
	struct lvl l = {
	    .argv = call->argv,
	    .argc = call->argc,
	    .cwd = cwd,
	    .depth = 0,
	};

	for (size_t i = 0; i < call->envc; i++) {
		const char *eq = strchr(call->env[i], '=');

		pol_check_env_name(c, call->env[i],
				   (size_t)(eq - call->env[i]));
		if (strncmp(call->env[i], "PATH=", 5) == 0)
			path_env = eq + 1;
	}
	l.path_env = path_env;
	pol_classify_level(c, &l);
	if (!c->err && call->net == POLICY_NET_HOST &&
	    !pol_list_match(c, &l, POLICY_LAYER_OPERATOR, POLICY_LIST_NETWORK,
			    false, false))
		pol_hard_ask(
		    c, "ask.net.host",
		    "%s asks for the host network, which the operator has "
		    "not allowed for it",
		    call->argv[0]);
	/* Decide in the fixed order (policy.h). */
	if (c->deny.rule || c->hard_ask.rule)
		goto out;
	if (pol_list_match(c, &l, POLICY_LAYER_OPERATOR, POLICY_LIST_ALLOW,
			   false, false) ||
	    pol_list_match(c, &l, POLICY_LAYER_OPERATOR,
			   POLICY_LIST_ALLOW_EXACT, true, false) ||
	    pol_list_match(c, &l, POLICY_LAYER_OPERATOR, POLICY_LIST_NETWORK,
			   false, false) ||
	    pol_list_match(c, &l, POLICY_LAYER_OPERATOR, POLICY_LIST_CHECK,
			   true, false)) {
		c->allow_rule = NULL;
		pol_allow(c, "allow.conf.operator",
			  "the operator's configuration allows this command");
		c->cmd_ask.rule = NULL;
		goto out;
	}
	if (c->cmd_ask.rule)
		goto out;
	if (c->allow_rule)
		goto out;
	if (pol_list_match(c, &l, POLICY_LAYER_PROJECT, POLICY_LIST_CHECK, true,
			   false))
		pol_allow(c, "allow.check",
			  "this is one of the project's checks");
	else if (pol_list_match(c, &l, POLICY_LAYER_PROJECT, POLICY_LIST_ALLOW,
				false, false) ||
		 pol_list_match(c, &l, POLICY_LAYER_PROJECT,
				POLICY_LIST_ALLOW_EXACT, true, false))
		pol_allow(c, "allow.conf.project",
			  "the project's configuration allows this command");
out:
	free(l.exe);
}

int policy_classify(const struct policy_conf *conf,
		    const struct policy_context *ctx,
		    const struct policy_call *call, struct policy_result *ret)
{
	struct cls c = {.conf = conf, .ctx = ctx, .call = call};
	struct policy_result r = {0};
	const char *bad;
	char *cwd = NULL;
	int err = 0;

	if (!ctx || !call || !ret || !ctx->workspace ||
	    ctx->workspace[0] != '/' ||
	    (call->kind != POLICY_CALL_EXEC && call->kind != POLICY_CALL_READ &&
	     call->kind != POLICY_CALL_WRITE))
		return -EINVAL;
	bad = validate(call);
	if (bad) {
		set_result(&r, POLICY_BAD_REQUEST, bad,
			   strcmp(bad, "bad.nul") == 0
			       ? "the call contains a NUL byte"
			   : strcmp(bad, "bad.utf8") == 0
			       ? "the call contains invalid UTF-8"
			   : strcmp(bad, "bad.too-long") == 0
			       ? "the call is over a size limit"
			   : strcmp(bad, "bad.env") == 0
			       ? "an environment entry is not NAME=value"
			       : "the call is empty");
		*ret = r;
		return 0;
	}
	c.ws = ctx->workspace;
	c.wslen = strlen(c.ws);
	while (c.wslen > 1 && c.ws[c.wslen - 1] == '/')
		c.wslen--;
	if (call->kind != POLICY_CALL_EXEC) {
		bool w = call->kind == POLICY_CALL_WRITE;
		char *abs = pol_absolutize(c.ws, call->path);
		char *real = NULL;

		if (!abs) {
			err = -ENOMEM;
			goto out;
		}
		pol_check_path(&c, c.ws, call->path, w ? PM_WRITE : PM_READ,
			       w ? "fs.write" : "fs.read");
		/* The file tools work only inside the workspace. */
		if (!c.err && c.n_paths > 0 && !c.deny.rule) {
			real = c.paths[c.n_paths - 1];
			char *lex = pol_normalize(abs);

			if (!lex)
				c.err = -ENOMEM;
			else if (!pol_inside_ws(&c, real) ||
				 !pol_inside_ws(&c, lex))
				pol_deny(&c, "deny.path.outside",
					 "%s is outside the workspace",
					 call->path);
			free(lex);
		}
		free(abs);
		if (!c.err && !c.deny.rule && !c.hard_ask.rule)
			pol_allow(&c, w ? "allow.write" : "allow.read",
				  w ? "an ordinary file inside the workspace"
				    : "reading inside the workspace");
	} else {
		char *abs = pol_absolutize(c.ws, call->cwd ? call->cwd : ".");

		if (!abs) {
			err = -ENOMEM;
			goto out;
		}
		err = pol_resolve_abs(&c, abs, &cwd);
		free(abs);
		if (err == -ENOMEM)
			goto out;
		err = 0;
		if (!cwd || !pol_inside_ws(&c, cwd))
			pol_deny(
			    &c, "deny.path.outside",
			    "the working directory is outside the workspace");
		else
			classify_exec(&c, cwd);
	}
	if (c.err) {
		err = c.err;
		goto out;
	}
	if (c.deny.rule)
		set_result(&r, POLICY_DENY, c.deny.rule, c.deny.reason);
	else if (c.hard_ask.rule)
		set_result(&r, POLICY_ASK, c.hard_ask.rule, c.hard_ask.reason);
	else if (c.cmd_ask.rule)
		set_result(&r, POLICY_ASK, c.cmd_ask.rule, c.cmd_ask.reason);
	else if (c.allow_rule)
		set_result(&r, POLICY_ALLOW, c.allow_rule, c.allow_reason);
	else
		set_result(&r, POLICY_ASK, "ask.unknown",
			   "the program is not on any list");
	r.exe = steal_ptr(c.exe);
	r.paths = steal_ptr(c.paths);
	r.n_paths = c.n_paths;
	c.n_paths = 0;
	*ret = r;
out:
	free(cwd);
	free(c.path_copy);
	free(c.exe);
	for (size_t i = 0; i < c.n_paths; i++)
		free(c.paths[i]);
	free(c.paths);
	return err;
}

void policy_result_free(struct policy_result *r)
{
	if (!r)
		return;
	free(r->exe);
	for (size_t i = 0; i < r->n_paths; i++)
		free(r->paths[i]);
	free(r->paths);
	memset(r, 0, sizeof(*r));
}

const char *policy_decision_name(enum policy_decision d)
{
	switch (d) {
	case POLICY_ALLOW:
		return "allow";
	case POLICY_ASK:
		return "ask";
	case POLICY_DENY:
		return "deny";
	case POLICY_BAD_REQUEST:
		return "bad-request";
	}
	return "deny";
}

/*
 * Sessions, verification: the plan read from the .spd.conf snapshot
 * taken at the start (checks, required commands), and the verdict over
 * its five gates.  The checks themselves run elsewhere (the store's
 * check runner).  Part of the session module (session_priv.h); see
 * session.h.
 */
#include <errno.h>
#include <git2.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/strv.h"
#include "common/words.h"
#include "daemon/conftab.h"
#include "daemon/session/session.h"
#include "daemon/session/session_priv.h"

static const char *const gate_names[SESSION_GATES] = {
    "checks", "policy", "integrity", "outside", "required",
};

/* ---- verification ---- */

void session_argv_free(char **argv)
{
	words_free(argv);
}

int session_split_words(const char *line, char ***ret_argv)
{
	char **v;
	int n;

	if (!line || strlen(line) > SESSION_RUN_LINE_MAX)
		return -E2BIG;
	n = words_split(line, SESSION_ARGV_MAX, &v);
	if (n == 0) {
		words_free(v);
		return -EINVAL;
	}
	if (n > 0)
		*ret_argv = v;
	return n;
}

void session_verify_plan_free(struct session_verify_plan *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n_checks; i++) {
		free(p->checks[i].name);
		session_argv_free(p->checks[i].argv);
	}
	free(p->checks);
	strv_free_array(p->required);
	strv_free_array(p->readonly);
	free(p->workspace);
	free(p->heldout_src);
	free(p->heldout_dst);
	sess_heldout_release(p->hold);
	free(p);
}

struct req_acc {
	char **v;
	size_t n;
	int err;
};

static int req_cb(const git_config_entry *e, void *data)
{
	struct req_acc *a = data;

	if (a->n >= SESSION_CHECKS_MAX) {
		a->err = -E2BIG;
		return -1;
	}
	a->v[a->n] = strdup(e->value ? e->value : "");
	if (!a->v[a->n]) {
		a->err = -ENOMEM;
		return -1;
	}
	a->n++;
	return 0;
}

/* The branch's tip the verification stands for; left "" when it cannot
 * be read (the verdict does not depend on it, only its attestation). */
static void plan_commit(struct session_store *s, const struct sess *x,
			struct session_verify_plan *p)
{
	git_repository *repo = NULL;
	git_oid tip;

	if (x->info.branch && sess_open_bare(s, x, &repo) == 0 &&
	    sess_branch_tip(s, x, repo, &tip) == 0)
		git_oid_tostr(p->commit, sizeof(p->commit), &tip);
	git_repository_free(repo);
	s->err[0] = '\0';
}

/* The snapshot's SHA-256: which policy the checks ran under; a snapshot
 * that cannot be read leaves it "". */
static void plan_policy_hash(const char *snap, struct session_verify_plan *p)
{
	char hex[65];

	if (conftab_file_sha256(snap, hex) == 0)
		snprintf(p->policy_sha256, sizeof(p->policy_sha256), "%s", hex);
}

int session_verify_plan(struct session_store *s, const char *id,
			struct session_verify_plan **ret)
{
	struct session_verify_plan *p = NULL;
	git_config *cfg = NULL;
	git_config_iterator *it = NULL;
	git_config_entry *e;
	struct sess *x;
	char *snap = NULL, why[512];
	int r = session_usable(s, id);
	if (sess_git_up(s) < 0)
		return -EIO;

	s->err[0] = '\0';
	if (r < 0)
		return r;
	x = sess_find(s, id);
	r = -ENOMEM;
	p = calloc(1, sizeof(*p));
	if (!p)
		goto out;
	memcpy(p->id, id, sizeof(p->id));
	p->workspace = strdup(x->info.worktree);
	p->checks = calloc(SESSION_CHECKS_MAX, sizeof(*p->checks));
	p->required = calloc(SESSION_CHECKS_MAX + 1, sizeof(char *));
	p->readonly = calloc(2, sizeof(char *));
	snap = sess_conf_snapshot_path(s, id);
	if (!p->workspace || !p->checks || !p->required || !p->readonly ||
	    !snap)
		goto out;
	if (!(p->readonly[0] = strdup(x->info.gitdir)))
		goto out;
	r = session_heldout_overlay(s, id, &p->heldout_src, &p->heldout_dst);
	if (r == 0)
		r = sess_heldout_hold(s, x, &p->hold);
	if (r < 0 && r != -ENOENT)
		goto out;
	plan_commit(s, x, p);
	/* A misspelt check or requirement would verify less than the
	 * project asked for, and say PASS: the one reader checks them. */
	r = conftab_open(snap, ".spd.conf", CONFTAB_PROJECT, &cfg, why,
			 sizeof(why));
	if (r == -ENOENT) {
		/* No .spd.conf: no checks, and the checks gate fails. */
		*ret = p;
		p = NULL;
		r = 0;
		goto out;
	}
	if (r < 0) {
		sess_seterr(s, "%s", why);
		r = -EINVAL;
		goto out;
	}
	r = -EINVAL;
	plan_policy_hash(snap, p);
	/* Filtered by hand, not with a glob regex: libgit2's PCRE2 path
	 * leaks its match data. */
	if (git_config_iterator_new(&it, cfg) < 0) {
		sess_seterr(s, ".spd.conf: %s", sess_git_msg());
		goto out;
	}
	while (git_config_next(&e, it) == 0) {
		size_t full = strlen(e->name);

		if (full <= 10 || strncmp(e->name, "check.", 6) != 0 ||
		    strcmp(e->name + full - 4, ".run") != 0)
			continue;
		const char *name = e->name + 6; /* after "check." */
		size_t nl = full - 10;		/* before ".run" */
		struct session_check *ck;
		int k;

		if (p->n_checks >= SESSION_CHECKS_MAX) {
			sess_seterr(s, ".spd.conf: more than %d checks",
				    SESSION_CHECKS_MAX);
			r = -E2BIG;
			goto out;
		}
		ck = &p->checks[p->n_checks];
		ck->name = strndup(name, nl);
		if (!ck->name) {
			r = -ENOMEM;
			goto out;
		}
		p->n_checks++;
		k = session_split_words(e->value ? e->value : "", &ck->argv);
		if (k < 0) {
			sess_seterr(
			    s,
			    ".spd.conf: check \"%s\": cannot split \"%s\" "
			    "into words without a shell (write sh -c '...' "
			    "to use one)",
			    ck->name, e->value ? e->value : "");
			r = k;
			goto out;
		}
		for (size_t w = 0; ck->argv[w] && !ck->heldout; w++)
			ck->heldout =
			    strstr(ck->argv[w], SESSION_HELDOUT_MOUNT) != NULL;
	}
	struct req_acc acc = {p->required, 0, 0};
	int gr = git_config_get_multivar_foreach(cfg, "verify.require", NULL,
						 req_cb, &acc);
	if (acc.err < 0) {
		r = acc.err;
		goto out;
	}
	if (gr < 0 && gr != GIT_ENOTFOUND) {
		sess_seterr(s, ".spd.conf: %s", sess_git_msg());
		goto out;
	}
	int agent = 0;
	if (git_config_get_bool(&agent, cfg, "verify.agent") == 0)
		p->agent_may_verify = agent != 0;
	*ret = p;
	p = NULL;
	r = 0;
out:
	git_config_iterator_free(it);
	git_config_free(cfg);
	free(snap);
	session_verify_plan_free(p);
	return r;
}

/* Did the session run argv exactly? */
static bool command_ran(struct session_store *s, const char *id,
			char *const *argv)
{
	sqlite3_stmt *st = NULL;
	char *text = sess_argv_json((const char *const *)argv);
	bool found = false;

	if (!text)
		return false;
	if (sqlite3_prepare_v2(s->db,
			       "SELECT 1 FROM commands WHERE session=? AND "
			       "argv=? LIMIT 1",
			       -1, &st, NULL) == SQLITE_OK) {
		sess_bind_text(st, 1, id);
		sess_bind_text(st, 2, text);
		found = sqlite3_step(st) == SQLITE_ROW;
		sqlite3_finalize(st);
	}
	free(text);
	return found;
}

static void gate(struct session_verdict *v, enum session_gate_id g, bool pass,
		 const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void gate(struct session_verdict *v, enum session_gate_id g, bool pass,
		 const char *fmt, ...)
{
	va_list ap;

	v->gates[g].name = gate_names[g];
	v->gates[g].pass = pass;
	va_start(ap, fmt);
	vsnprintf(v->gates[g].detail, sizeof(v->gates[g].detail), fmt, ap);
	va_end(ap);
}

int session_verify_evaluate(struct session_store *s,
			    const struct session_verify_plan *plan,
			    const int *exit_codes, struct session_verdict *ret)
{
	struct sess *x = sess_find(s, plan->id);
	struct session_verdict v;
	const char *failed = NULL;
	int failed_code = 0;
	bool failed_heldout = false;

	if (!x)
		return -ENOENT;
	memset(&v, 0, sizeof(v));

	for (size_t i = 0; i < plan->n_checks && !failed; i++)
		if (!exit_codes || exit_codes[i] != 0) {
			failed = plan->checks[i].name;
			failed_code = exit_codes ? exit_codes[i] : -1;
			failed_heldout = plan->checks[i].heldout;
		}
	if (plan->n_checks == 0)
		gate(&v, SESSION_GATE_CHECKS, false,
		     "no checks configured in .spd.conf (add one: "
		     "[check \"test\"] run = make test)");
	else if (failed && failed_heldout)
		gate(&v, SESSION_GATE_CHECKS, false,
		     "held-out check \"%s\" failed", failed);
	else if (failed)
		gate(&v, SESSION_GATE_CHECKS, false,
		     failed_code < 0 ? "check \"%s\" did not run to an exit"
				     : "check \"%s\" exited %d",
		     failed, failed_code);
	else
		gate(&v, SESSION_GATE_CHECKS, true, "%zu check%s passed",
		     plan->n_checks, plan->n_checks == 1 ? "" : "s");

	gate(&v, SESSION_GATE_POLICY, x->info.policy_blocks == 0,
	     "%u policy block%s in the session", x->info.policy_blocks,
	     x->info.policy_blocks == 1 ? "" : "s");

	/* The checks themselves ran with the worktree writable: re-hash
	 * before judging. */
	if (x->info.state == SESSION_ACTIVE)
		sess_guard_step(s, x, NULL);
	if (x->info.finding_code)
		gate(&v, SESSION_GATE_INTEGRITY, false, "%s: %s",
		     x->info.finding_code,
		     x->info.finding_path ? x->info.finding_path : "");
	else
		gate(&v, SESSION_GATE_INTEGRITY, true,
		     "guarded inputs unchanged");

	gate(&v, SESSION_GATE_OUTSIDE, x->info.outside_changes == 0,
	     "%u change%s outside the worktree", x->info.outside_changes,
	     x->info.outside_changes == 1 ? "" : "s");

	const char *missing = NULL;
	bool bad_line = false;
	size_t nreq = 0;
	for (size_t i = 0; plan->required && plan->required[i]; i++) {
		char **argv = NULL;

		nreq++;
		if (session_split_words(plan->required[i], &argv) < 0) {
			bad_line = true;
			missing = plan->required[i];
			break;
		}
		bool ran = command_ran(s, plan->id, argv);
		session_argv_free(argv);
		if (!ran) {
			missing = plan->required[i];
			break;
		}
	}
	if (missing)
		gate(&v, SESSION_GATE_REQUIRED, false,
		     bad_line ? "required command \"%s\" cannot be parsed"
			      : "required command \"%s\" never ran in the "
				"session",
		     missing);
	else
		gate(&v, SESSION_GATE_REQUIRED, true,
		     nreq ? "every required command ran"
			  : "the project requires no command");

	v.pass = true;
	for (int g = 0; g < SESSION_GATES; g++)
		v.pass = v.pass && v.gates[g].pass;
	sess_journal(s, plan->id, "session.verify",
		     session_verdict_json(&v, plan, exit_codes), "verdict: %s",
		     v.pass ? "pass" : "fail");
	*ret = v;
	return 0;
}

json_t *session_verdict_json(const struct session_verdict *v,
			     const struct session_verify_plan *plan,
			     const int *exit_codes)
{
	json_t *o = json_object(), *gates = json_array(),
	       *checks = json_array();

	if (!o || !gates || !checks) {
		json_decref(o);
		json_decref(gates);
		json_decref(checks);
		return NULL;
	}
	for (int g = 0; g < SESSION_GATES; g++)
		json_array_append_new(
		    gates, json_pack("{s:s, s:b, s:s}", "name",
				     v->gates[g].name ? v->gates[g].name
						      : gate_names[g],
				     "pass", v->gates[g].pass, "detail",
				     v->gates[g].detail));
	for (size_t i = 0; plan && i < plan->n_checks; i++) {
		json_t *a = json_array();
		for (size_t k = 0; plan->checks[i].argv[k]; k++)
			json_array_append_new(
			    a, json_string(plan->checks[i].argv[k]));
		json_t *ck = json_pack("{s:s, s:o, s:i}", "name",
				       plan->checks[i].name, "argv", a, "exit",
				       exit_codes ? exit_codes[i] : -1);

		if (ck && plan->checks[i].heldout)
			json_object_set_new(ck, "heldout", json_true());
		json_array_append_new(checks, ck);
	}
	json_object_set_new(o, "pass", json_boolean(v->pass));
	json_object_set_new(o, "gates", gates);
	json_object_set_new(o, "checks", checks);
	return o;
}

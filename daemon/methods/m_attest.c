/*
 * The attest.* RPC methods (spd's signing key, showing and verifying the
 * attestations under refs/notes/spd), and the attestation of a session's
 * verdict that session.verify and session.merge sign when their checks
 * finish (m_attest.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <unistd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "daemon/broker/price.h"
#include "daemon/keys/attest.h"
#include "daemon/journal/journal.h"
#include "daemon/session/labels.h"
#include "daemon/session/session.h"
#include "daemon/log.h"
#include "daemon/methods/m_attest.h"
#include "daemon/conftab.h"
#include "daemon/spd.h"
#include "daemon/transport/call.h"
#include "daemon/transport/handlers.h"

/* The token counts summed per model (token_kinds). */
#define ATTEST_TOKEN_KINDS 5

/* The key, made on first use; NULL (logged) when it cannot be. */
static struct attest_key *key_of(struct spd *spd)
{
	int r;

	if (!spd->paths.state_dir)
		return NULL; /* a test's spd without directories */
	r = attest_key_ensure(spd->paths.state_dir, &spd->attest_key);
	if (r < 0) {
		log_error("attest: the signing key in %s: %s",
			  spd->paths.state_dir, strerror(-r));
		return NULL;
	}
	return spd->attest_key;
}

/*
 * A statement being made: the predicate so far, then the session's
 * journal rows read on the thread pool (its span, then its model calls a
 * page at a time), then the signature.
 */
struct attest_job {
	struct spd *spd;
	json_t *pred;
	char *gitdir, *branch;
	char commit[41];
	char session[SESSION_ID_LEN + 1];
	/* The model calls so far: {"provider\nmodel": {counts}}, and the
	 * totals, spend in picodollars (price.h) summed exactly. */
	json_t *models;
	int64_t calls, refused, tokens[ATTEST_TOKEN_KINDS], pusd;
	int64_t since; /* the last model.call row read */
	m_attest_done_fn done;
	void *ctx;
};

/* The token counts a model.call row carries, in the statement's order. */
static const char *const token_kinds[ATTEST_TOKEN_KINDS] = {
    "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
    "cache_write_1h_tokens"};

static void job_finish(struct attest_job *jb, json_t *res)
{
	jb->done(jb->ctx, res);
	json_decref(jb->pred);
	json_decref(jb->models);
	free(jb->gitdir);
	free(jb->branch);
	free(jb);
}

/* Nothing signed: what could not be read, and why. */
static void job_fail(struct attest_job *jb, const char *what, int err)
{
	char why[256];

	snprintf(why, sizeof(why), "%s: %s", what,
		 strerror(-err < SPD_EFIRST ? -err : EIO));
	log_error("attest: session %s: %s", jb->session, why);
	job_finish(jb,
		   json_pack("{s:s, s:s}", "commit", jb->commit, "error", why));
}

/* A non-negative integer field of a row's detail (0 otherwise). */
static int64_t count_of(json_t *d, const char *name)
{
	json_t *v = json_object_get(d, name);

	return json_is_integer(v) && json_integer_value(v) > 0
		   ? (int64_t)json_integer_value(v)
		   : 0;
}

/* One model.call row into the job's sums: a call forwarded to a
 * provider (it names one) with its usage and cost, or refusals (a code:
 * one, or the count of a window's row). */
static void add_call(struct attest_job *jb, const char *detail)
{
	json_t *d = detail ? json_loads(detail, 0, NULL) : NULL;
	const char *prov = json_string_value(json_object_get(d, "provider"));
	const char *model = json_string_value(json_object_get(d, "model"));
	json_t *cost = json_object_get(d, "cost_usd"), *m;
	int64_t pusd = 0;
	char key[2 * 256 + 2];

	if (!json_is_object(d))
		goto out;
	if (!prov) {
		if (json_object_get(d, "code"))
			jb->refused += json_object_get(d, "count")
					   ? count_of(d, "count")
					   : 1;
		goto out;
	}
	if (!model)
		model = "";
	/* The journal holds the cost in dollars as a double of the
	 * picodollars the broker charged: back to them, exactly. */
	if (json_is_number(cost) && json_number_value(cost) > 0)
		pusd = (int64_t)(json_number_value(cost) *
				     (double)PRICE_PUSD_PER_USD +
				 0.5);
	snprintf(key, sizeof(key), "%.256s\n%.256s", prov, model);
	m = json_object_get(jb->models, key);
	if (!m) {
		m = json_pack("{s:s, s:s, s:I, s:I}", "provider", prov, "model",
			      model, "calls", (json_int_t)0, "pusd",
			      (json_int_t)0);
		if (!m || json_object_set_new(jb->models, key, m) < 0)
			goto out;
	}
	json_object_set_new(
	    m, "calls",
	    json_integer(json_integer_value(json_object_get(m, "calls")) + 1));
	json_object_set_new(
	    m, "pusd",
	    json_integer(json_integer_value(json_object_get(m, "pusd")) +
			 pusd));
	for (int k = 0; k < ATTEST_TOKEN_KINDS; k++) {
		int64_t n = count_of(d, token_kinds[k]);

		json_object_set_new(
		    m, token_kinds[k],
		    json_integer(
			json_integer_value(json_object_get(m, token_kinds[k])) +
			n));
		jb->tokens[k] += n;
	}
	jb->calls++;
	jb->pusd += pusd;
out:
	json_decref(d);
}

/* The sums as the statement says them. */
static json_t *calls_json(struct attest_job *jb)
{
	json_t *o =
	    json_pack("{s:s, s:I, s:I, s:f}", "source",
		      "the session's model.call rows in the journal", "calls",
		      (json_int_t)jb->calls, "refused", (json_int_t)jb->refused,
		      "spent_usd", price_usd(jb->pusd));
	json_t *by = json_array(), *provs = json_array(), *m;
	const char *key;

	if (!o || !by || !provs) {
		json_decref(o);
		json_decref(by);
		json_decref(provs);
		return NULL;
	}
	for (int k = 0; k < ATTEST_TOKEN_KINDS; k++)
		json_object_set_new(o, token_kinds[k],
				    json_integer(jb->tokens[k]));
	json_object_foreach(jb->models, key, m)
	{
		json_t *e = json_deep_copy(m),
		       *prov = json_object_get(m, "provider");
		bool seen = false;
		size_t i;
		json_t *p;

		json_object_del(e, "pusd");
		json_object_set_new(e, "spent_usd",
				    json_real(price_usd(json_integer_value(
					json_object_get(m, "pusd")))));
		json_array_append_new(by, e);
		json_array_foreach(provs, i, p) seen =
		    seen || json_equal(p, prov);
		if (!seen)
			json_array_append(provs, prov);
	}
	json_object_set_new(o, "providers", provs);
	json_object_set_new(o, "by_model", by);
	return o;
}

static void job_sign(struct attest_job *jb)
{
	struct attest_key *k = key_of(jb->spd);
	json_t *st, *res, *calls;
	const char *why = NULL;
	char hash[65] = "";
	int64_t head = 0;

	if (!k) {
		job_finish(jb, json_pack("{s:s}", "error",
					 "no signing key (see spd's log)"));
		return;
	}
	calls = calls_json(jb);
	if (!calls) {
		job_finish(jb, json_pack("{s:s}", "error", "out of memory"));
		return;
	}
	json_object_set_new(jb->pred, "model_calls", calls);
	/* What the session's agent was handed, by origin (issue 41): its
	 * provenance labels with the rows where they entered. */
	if (jb->spd->sessions)
		json_object_set_new(
		    jb->pred, "labels",
		    session_labels_detail(jb->spd->sessions, jb->session));
	/* The chain's head as signed: every row of the session is at or
	 * below it. */
	if (jb->spd->journal)
		journal_head(jb->spd->journal, &head, hash);
	{
		json_t *j = json_object_get(jb->pred, "journal");

		json_object_set_new(j, "head_id", json_integer(head));
		json_object_set_new(j, "head_hash", json_string(hash));
	}
	st = attest_statement(jb->gitdir, jb->branch, jb->commit, jb->pred);
	jb->pred = NULL;
	if (!st) {
		job_finish(jb, json_pack("{s:s}", "error",
					 "the commit cannot be read"));
		return;
	}
	if (attest_sign_note(k, jb->gitdir, jb->commit, st, &why) < 0) {
		log_error("attest: note on %s: %s", jb->commit, why);
		res =
		    json_pack("{s:s, s:s}", "commit", jb->commit, "error", why);
	} else {
		res = json_pack("{s:s, s:s, s:s}", "commit", jb->commit,
				"notes_ref", ATTEST_NOTES_REF, "keyid",
				attest_key_fingerprint(k));
	}
	json_decref(st);
	job_finish(jb, res);
}

static void on_calls(void *data, int err, const struct journal_event *evs,
		     size_t n)
{
	struct attest_job *jb = data;
	struct journal_filter f = {0};
	int r;

	if (err < 0) {
		job_fail(jb,
			 "the session's model calls cannot be read from "
			 "the journal",
			 err);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		add_call(jb, evs[i].detail);
		jb->since = evs[i].id;
	}
	if (n < JOURNAL_QUERY_LIMIT_MAX) {
		job_sign(jb);
		return;
	}
	f.since = jb->since;
	f.kind = "model.call";
	f.session = jb->session;
	f.limit = JOURNAL_QUERY_LIMIT_MAX;
	r = journal_query(jb->spd->journal, &f, on_calls, jb);
	if (r < 0)
		job_fail(jb,
			 "the session's model calls cannot be read from "
			 "the journal",
			 r);
}

static void on_span(void *data, int err, const struct journal_span *sp)
{
	struct attest_job *jb = data;
	struct journal_filter f = {0};
	int r;

	if (err < 0) {
		job_fail(jb, "the session's journal rows cannot be read", err);
		return;
	}
	json_object_set_new(
	    json_object_get(jb->pred, "journal"), "session_rows",
	    json_pack("{s:I, s:I, s:s, s:I, s:s}", "count",
		      (json_int_t)sp->rows, "first_id",
		      (json_int_t)sp->first_id, "first_hash", sp->first_hash,
		      "last_id", (json_int_t)sp->last_id, "last_hash",
		      sp->last_hash));
	f.since = 0;
	f.kind = "model.call";
	f.session = jb->session;
	f.limit = JOURNAL_QUERY_LIMIT_MAX;
	r = journal_query(jb->spd->journal, &f, on_calls, jb);
	if (r < 0)
		job_fail(jb,
			 "the session's model calls cannot be read from "
			 "the journal",
			 r);
}

/* The predicate of a verdict, all but what the journal says. */
static json_t *predicate(struct spd *spd, const char *method,
			 const struct session_verify_plan *plan,
			 const struct session_info *i, json_t *verdict,
			 const int64_t *durations_ms,
			 const struct session_check_output *outs)
{
	json_t *pred, *checks, *work = NULL;
	char when[32];
	time_t now = time(NULL);
	struct tm tm;

	checks = json_deep_copy(json_object_get(verdict, "checks"));
	for (size_t n = 0; n < json_array_size(checks) && durations_ms; n++)
		json_object_set_new(json_array_get(checks, n), "duration_ms",
				    json_integer(durations_ms[n]));
	/* What each check printed, as digests: the output itself may hold
	 * what a reviewer should not see, and is not spd's to publish. */
	for (size_t n = 0; n < json_array_size(checks) && outs; n++)
		if (outs[n].sha256[0][0])
			json_object_set_new(
			    json_array_get(checks, n), "output",
			    json_pack("{s:{s:s, s:I, s:I}, s:{s:s, s:I, s:I}}",
				      "stdout", "sha256", outs[n].sha256[0],
				      "bytes", (json_int_t)outs[n].bytes[0],
				      "dropped", (json_int_t)outs[n].dropped[0],
				      "stderr", "sha256", outs[n].sha256[1],
				      "bytes", (json_int_t)outs[n].bytes[1],
				      "dropped",
				      (json_int_t)outs[n].dropped[1]));
	gmtime_r(&now, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	pred = json_pack(
	    "{s:s, s:s, s:s?, s:s, s:s, s:s, s:o, s:O?, s:{}, s:s}", "method",
	    method, "session", plan->id, "branch", i->branch, "base", i->base,
	    "verdict",
	    json_is_true(json_object_get(verdict, "pass")) ? "pass" : "fail",
	    "checked",
	    strcmp(method, "session.verify") == 0 ? "worktree" : "branch-tip",
	    "checks", checks ? checks : json_array(), "gates",
	    json_object_get(verdict, "gates"), "journal", "signed_at", when);
	if (!pred)
		return NULL;
	json_object_set_new(pred, "spd_version", json_string(SPD_VERSION));
	/* The commands the project required to have run (the required
	 * gate), so that a verifier can hold them to its own list. */
	{
		json_t *req = json_array();

		for (size_t n = 0; plan->required && plan->required[n]; n++)
			json_array_append_new(req,
					      json_string(plan->required[n]));
		json_object_set_new(pred, "required", req);
	}
	/* agent_diff_guard scanned the diff before the checks began; a
	 * known secret in it would have ended the attempt instead. */
	json_object_set_new(pred, "secret_scan",
			    json_pack("{s:s, s:s}", "result", "clean", "scope",
				      "lines added since the base, every "
				      "known secret in its encoded forms"));
	if (plan->policy_sha256[0])
		json_object_set_new(pred, "project_conf_sha256",
				    json_string(plan->policy_sha256));
	{
		char conf[65];

		conftab_file_sha256(spd->paths.conf_path, conf);
		json_object_set_new(pred, "spd_conf_sha256", json_string(conf));
	}
	/* The worktree's checks also saw what is not committed; the
	 * statement is about the commit, so it says whether there was any. */
	if (strcmp(method, "session.verify") == 0) {
		json_t *cnt = NULL;

		if (session_work(spd->sessions, plan->id, &work) == 0)
			cnt = json_object_get(work, "uncommitted_count");
		json_object_set_new(pred, "worktree_uncommitted",
				    json_is_integer(cnt) ? json_incref(cnt)
							 : json_null());
		json_decref(work);
	}
	return pred;
}

void m_attest_session(struct spd *spd, const char *method,
		      const struct session_verify_plan *plan, json_t *verdict,
		      const int64_t *durations_ms,
		      const struct session_check_output *outs,
		      m_attest_done_fn done, void *ctx)
{
	struct session_info *i = NULL;
	struct attest_job *jb = NULL;
	int r;

	if (!plan->commit[0]) {
		done(ctx, json_pack("{s:s}", "error",
				    "no branch to attest (in place on a "
				    "detached HEAD)"));
		return;
	}
	if (!spd->sessions || session_get(spd->sessions, plan->id, &i) < 0) {
		done(ctx, json_pack("{s:s}", "error", "no such session"));
		return;
	}
	if (!(jb = calloc(1, sizeof(*jb))) ||
	    !(jb->gitdir = strdup(i->gitdir)) ||
	    (i->branch && !(jb->branch = strdup(i->branch))) ||
	    !(jb->models = json_object()) ||
	    !(jb->pred = predicate(spd, method, plan, i, verdict, durations_ms,
				   outs))) {
		session_info_free(i);
		if (jb) {
			json_decref(jb->models);
			free(jb->gitdir);
			free(jb->branch);
			free(jb);
		}
		done(ctx, json_pack("{s:s}", "error", "out of memory"));
		return;
	}
	session_info_free(i);
	jb->spd = spd;
	jb->done = done;
	jb->ctx = ctx;
	snprintf(jb->commit, sizeof(jb->commit), "%s", plan->commit);
	snprintf(jb->session, sizeof(jb->session), "%s", plan->id);
	if (!spd->journal) {
		/* A test's spd without a journal: nothing to name. */
		job_sign(jb);
		return;
	}
	r = journal_session_span(spd->journal, jb->session, on_span, jb);
	if (r < 0)
		job_fail(jb, "the session's journal rows cannot be read", r);
}

void m_attest_key(struct call *c)
{
	struct attest_key *k = key_of(call_spd(c));

	if (!k) {
		call_error(c, RPC_E_INTERNAL, NULL,
			   "cannot read or make the signing key in the state "
			   "directory (see spd's log)");
		return;
	}
	call_reply(c, json_pack("{s:s, s:s}", "key", attest_key_public(k),
				"fingerprint", attest_key_fingerprint(k)));
}

/*
 * The keys a call of attest.show or attest.verify trusts: the call's
 * own "trust" and "trust_from" when either is given (replacing the
 * default), else spd.conf's [attest] trust and spd's own key (made when
 * may_make_key, else only when already loaded).  Returns 0 and *ret
 * (NULL-terminated, strings borrowed from params or spd's config; free
 * the array only), or -EINVAL and *ret_why (malloc'd).
 */
static int trusted(struct spd *spd, json_t *params, bool may_make_key,
		   const char ***ret, char **ret_why)
{
	json_t *t = json_object_get(params, "trust");
	struct attest_key *k;
	const char **v;
	size_t n = 0, cap;

	if (t && !json_is_array(t)) {
		*ret_why = strdup("\"trust\" is a list of keys");
		return -EINVAL;
	}
	if (t || json_object_get(params, "trust_from")) {
		cap = json_array_size(t);
		if (!(v = calloc(cap + 1, sizeof(*v))))
			return -ENOMEM;
		for (size_t i = 0; i < cap; i++) {
			const char *s = json_string_value(json_array_get(t, i));

			if (!s || attest_key_check(s) < 0) {
				free(v);
				if (asprintf(ret_why,
					     "trust[%zu] is not a key "
					     "(ed25519:BASE64)",
					     i) < 0)
					*ret_why = NULL;
				return -EINVAL;
			}
			v[n++] = s;
		}
		*ret = v;
		return 0;
	}
	cap = 1;
	for (size_t i = 0;
	     spd->config.attest_trust && spd->config.attest_trust[i]; i++)
		cap++;
	if (!(v = calloc(cap + 1, sizeof(*v))))
		return -ENOMEM;
	for (size_t i = 0;
	     spd->config.attest_trust && spd->config.attest_trust[i]; i++)
		v[n++] = spd->config.attest_trust[i];
	k = may_make_key ? key_of(spd) : spd->attest_key;
	if (k)
		v[n++] = attest_key_public(k);
	*ret = v;
	return 0;
}

static const char *pstr(struct call *c, const char *name)
{
	return json_string_value(json_object_get(call_params(c), name));
}

int m_attest_verify_run(struct spd *spd, json_t *params, const char *scratch,
			bool may_make_key, json_t **ret, char **ret_why)
{
	const char **trust = NULL;
	struct attest_verify_opts o = {0};
	const char *repo = json_string_value(json_object_get(params, "repo"));
	json_t *tf = json_object_get(params, "trust_from");
	json_t *base = json_object_get(params, "base");
	int r;

	*ret_why = NULL;
	o.branch = json_string_value(json_object_get(params, "branch"));
	o.base = json_string_value(base);
	o.trust_from = json_string_value(tf);
	if (!repo || !o.branch || (base && !o.base) || (tf && !o.trust_from)) {
		*ret_why = strdup("\"repo\" and \"branch\" are strings, "
				  "and so are \"base\" and \"trust_from\"");
		return -EINVAL;
	}
	r = trusted(spd, params, may_make_key, &trust, ret_why);
	if (r < 0)
		return r;
	o.trust = trust;
	r = attest_verify_branch(repo, scratch, &o, ret, ret_why);
	free(trust);
	return r;
}

/* Finish c with attest.show's or attest.verify's failure r. */
static void attest_fail(struct call *c, int r, char *why)
{
	call_error(c,
		   r == -EINVAL || r == -ENOENT || r == -E2BIG || r == -EPERM
		       ? RPC_E_BAD_PARAMS
		       : RPC_E_INTERNAL,
		   NULL, "%s", why ? why : strerror(-r));
	free(why);
}

void m_attest_show(struct call *c)
{
	const char **trust = NULL;
	const char *repo = pstr(c, "repo"), *commit = pstr(c, "commit");
	json_t *res = NULL;
	char *why = NULL;
	int r;

	json_t *tf = json_object_get(call_params(c), "trust_from");

	call_set_summary(c, "attest show %s", commit);
	if (tf && !json_is_string(tf)) {
		call_error(c, RPC_E_BAD_PARAMS, NULL,
			   "\"trust_from\" is REF:PATH");
		return;
	}
	r = trusted(call_spd(c), call_params(c), true, &trust, &why);
	if (r < 0) {
		attest_fail(c, r, why);
		return;
	}
	r = attest_show(repo, call_spd(c)->paths.state_dir, commit, trust,
			json_string_value(tf), &res, &why);
	free(trust);
	if (r < 0) {
		attest_fail(c, r, why);
		return;
	}
	free(why);
	call_reply(c, res);
}

void m_attest_verify(struct call *c)
{
	json_t *res = NULL;
	char *why = NULL;
	int r;

	call_set_summary(c, "attest verify %s", pstr(c, "branch"));
	r = m_attest_verify_run(call_spd(c), call_params(c),
				call_spd(c)->paths.state_dir, true, &res, &why);
	if (r < 0) {
		attest_fail(c, r, why);
		return;
	}
	free(why);
	call_reply(c, res);
}

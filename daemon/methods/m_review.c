/*
 * The session.* methods of the review: verify (the checks one after the
 * other, then the gates), merge (the checks on the branch, then the
 * merge into the operator's branch) and end (the checks when configured,
 * then the end).  What they share with the other session.* methods is
 * in m_session_priv.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "daemon/transport/handlers.h"
#include "common/util.h"
#include "daemon/methods/agent.h"
#include "daemon/methods/m_session_priv.h"
#include "daemon/transport/call.h"
#include "daemon/log.h"
#include "daemon/journal/journal.h"
#include "daemon/session/labels.h"
#include "daemon/session/session.h"
#include "daemon/methods/m_attest.h"
#include "daemon/pool.h"
#include "daemon/spd.h"

/* The branch's commits since the base, for the end and the diff; NULL
 * when there are none (or it cannot say). */
static json_t *branch_commits(struct call *c, const char *id)
{
	json_t *w = NULL, *commits;

	if (session_work(ms_store(c), id, &w) < 0)
		return NULL;
	commits = json_incref(json_object_get(w, "commits"));
	json_decref(w);
	if (json_array_size(commits) == 0) {
		json_decref(commits);
		return NULL;
	}
	return commits;
}

/*
 * Finish c with session_end's outcome r: a refusal, or the ended
 * session, what became of its work (report, taken) and its branch's
 * commits; extra (taken, may be NULL) is merged into the reply (the
 * checks' verdict and attestation of an end that ran them).
 */
static void end_reply(struct call *c, const char *id, int r, json_t *report,
		      json_t *extra)
{
	struct session_info *i = NULL;
	json_t *res, *commits;

	if (r == -EACCES || r == -EBUSY || r == -EXDEV) {
		json_decref(report);
		call_error(
		    c, r == -EACCES ? RPC_E_SECRET_IN_DIFF : RPC_E_BAD_REQUEST,
		    extra, "%s", session_store_error(ms_store(c)));
		return;
	}
	if (r < 0 && r != -EIO) {
		json_decref(report);
		json_decref(extra);
		ms_fail(c, r, id);
		return;
	}
	if (session_get(ms_store(c), id, &i) < 0) {
		json_decref(report);
		json_decref(extra);
		call_error(c, RPC_E_INTERNAL, NULL, "session vanished");
		return;
	}
	res = session_info_json(i);
	if (report)
		json_object_set_new(res, "work", report);
	if (extra) {
		json_object_update(res, extra);
		json_decref(extra);
	}
	if (i->mode == SESSION_MODE_WORKTREE && i->branch) {
		/* A merge command only for a branch with something in it. */
		char into[256];

		commits = branch_commits(c, id);
		if (commits &&
		    session_merged(ms_store(c), id, into, sizeof(into)) == 1) {
			json_object_set_new(res, "commits", commits);
			json_object_set_new(
			    res, "note",
			    json_sprintf("%s is merged into %s already",
					 i->branch, into));
		} else if (commits) {
			json_object_set_new(res, "commits", commits);
			json_object_set_new(res, "merge", ms_merge_command(i));
		} else {
			json_object_set_new(
			    res, "note",
			    json_string("the branch has no commits: nothing "
					"to merge"));
		}
	} else if (i->mode == SESSION_MODE_IN_PLACE) {
		json_object_set_new(
		    res, "note",
		    json_string("in place: the work is in the checkout "
				"itself; there is nothing to merge"));
	}
	if (r == -EIO)
		json_object_set_new(
		    res, "warning",
		    json_string(session_store_error(ms_store(c))));
	session_info_free(i);
	call_reply(c, res);
}

/* ---- verify: the checks one after the other, then the gates ---- */

struct verify_run {
	struct call *c;
	struct session_store *s;
	struct session_verify_plan *plan;
	int *exits;
	int64_t *ms; /* each check's wall time, for the attestation */
	/* each check's output digests (all zero: not seen), for the same */
	struct session_check_output *outs;
	uint64_t started; /* uv_hrtime() as the current check started */
	size_t next;
	/* The verdict and its JSON while the attestation is signed. */
	struct session_verdict verdict;
	json_t *res;
	/* session.merge, session.end: what follows a verdict instead of
	 * the reply. */
	void (*then)(struct verify_run *v, const struct session_verdict *vd,
		     json_t *verdict, json_t *attestation);
	const char *method; /* what the attestation says signed it */
	char *into;
	bool squash, force, discard;
	json_t *report; /* session.end: what became of the work */
	char target[41];
};

static void verify_step(struct verify_run *v);

static void verify_done(void *ctx, int exit_code,
			const struct session_check_output *out)
{
	struct verify_run *v = ctx;

	if (out)
		v->outs[v->next] = *out;
	v->ms[v->next] = (int64_t)((uv_hrtime() - v->started) / 1000000u);
	v->exits[v->next++] = exit_code;
	verify_step(v);
}

static void verify_run_free(struct verify_run *v)
{
	session_verify_plan_free(v->plan);
	json_decref(v->report);
	free(v->exits);
	free(v->ms);
	free(v->outs);
	free(v->into);
	free(v);
}

/* A run of plan's checks for c, which then holds plan (verify_run_free
 * frees it); NULL, out of memory, with plan still the caller's. */
static struct verify_run *verify_run_new(struct call *c,
					 struct session_verify_plan *plan)
{
	struct verify_run *v = calloc(1, sizeof(*v));
	size_t n = plan->n_checks + 1;

	if (!v || !(v->exits = calloc(n, sizeof(int))) ||
	    !(v->ms = calloc(n, sizeof(int64_t))) ||
	    !(v->outs = calloc(n, sizeof(*v->outs)))) {
		if (v)
			verify_run_free(v);
		return NULL;
	}
	v->c = c;
	v->s = ms_store(c);
	v->plan = plan;
	return v;
}

/* The attestation is signed (or not: {error}): the reply, or what
 * follows it. */
static void verify_signed(void *ctx, json_t *att)
{
	struct verify_run *v = ctx;
	json_t *res = v->res;

	v->res = NULL;
	if (v->then) {
		v->then(v, &v->verdict, res, att);
	} else {
		if (att)
			json_object_set_new(res, "attestation", att);
		call_reply(v->c, res);
	}
	verify_run_free(v);
}

static void verify_finish(struct verify_run *v)
{
	int r;

	r = session_verify_evaluate(v->s, v->plan, v->exits, &v->verdict);
	if (v->then)
		session_merge_plan_done(v->s, v->plan->id);
	if (r < 0) {
		ms_fail(v->c, r, v->plan->id);
		verify_run_free(v);
		return;
	}
	v->res = session_verdict_json(&v->verdict, v->plan, v->exits);
	if (!v->res) {
		verify_signed(v, NULL);
		return;
	}
	/* Signed before the merge (or the end), so that the note says
	 * what was checked whatever comes next. */
	m_attest_session(call_spd(v->c),
			 v->method ? v->method : "session.verify", v->plan,
			 v->res, v->ms, v->outs, verify_signed, v);
}

static void verify_step(struct verify_run *v)
{
	session_check_runner_fn run;
	void *data;

	while (v->next < v->plan->n_checks) {
		int r;

		/* m_session_verify refuses when there is no runner. */
		run = session_store_check_runner(v->s, &data);
		v->started = uv_hrtime();
		r = run ? run(data, v->plan, v->next, verify_done, v) : -ENOSYS;
		if (r == 0)
			return; /* verify_done continues */
		/* A check that cannot start fails its gate. */
		v->exits[v->next++] = -1;
	}
	verify_finish(v);
}

static void verify_guarded(struct call *c, int r, char *text, bool truncated);

void m_session_verify(struct call *c)
{
	const char *id;

	if (!ms_have_store(c) || !(id = ms_target(c)))
		return;
	if (ms_after_checkpoint(c, m_session_verify))
		return;
	call_set_summary(c, "verify %s", id);
	agent_diff_guard(call_spd(c), c, id, verify_guarded);
}

/* No secret in the diff (or none read: what follows says why). */
static void verify_guarded(struct call *c, int r, char *text, bool truncated)
{
	const struct call_principal *who = call_principal(c);
	struct session_verify_plan *plan = NULL;
	struct verify_run *v;
	void *data;
	const char *id;

	if (ms_guarded_after_checkpoint(c, r, text, truncated, verify_guarded))
		return;
	free(text);
	if (!(id = ms_target(c)))
		return;
	r = session_verify_plan(ms_store(c), id, &plan);
	if (r < 0) {
		ms_fail(c, r, id);
		return;
	}
	if (!who->operator&& !plan->agent_may_verify) {
		session_verify_plan_free(plan);
		call_error(c, RPC_E_UNAUTHORIZED, NULL,
			   "the project does not let the agent verify "
			   "([verify] agent = true in .spd.conf)");
		return;
	}
	/* The runner (agent.c, in the sandbox) is set with the sessions. */
	if (plan->n_checks && !session_store_check_runner(ms_store(c), &data)) {
		session_verify_plan_free(plan);
		call_error(c, RPC_E_SANDBOX_UNAVAILABLE, NULL,
			   "verification runs checks in the sandbox, "
			   "which is not available");
		return;
	}
	if (!(v = verify_run_new(c, plan))) {
		session_verify_plan_free(plan);
		call_error(c, RPC_E_INTERNAL, NULL, "out of memory");
		return;
	}
	verify_step(v);
}

/* Finish c with session_merge's refusal: a sentence for what the
 * operator can mend (dirty, moved, conflicts, nothing to merge). */
static void merge_refused(struct call *c, int r, const char *id)
{
	if (r == -EINVAL || r == -EBUSY || r == -ESTALE || r == -ENOTEMPTY ||
	    r == -EALREADY || r == -EXDEV)
		call_error(c, RPC_E_BAD_REQUEST, NULL, "%s",
			   session_store_error(ms_store(c)));
	else
		ms_fail(c, r, id);
}

/* What a merge answers once its branch moved: the verdict and its
 * signature, or none (an ended session's, forced). */
struct merged {
	json_t *verdict, *attestation;
	bool pass, ended;
	char id[SESSION_ID_LEN + 1];
};

static void merge_landed(struct call *c, int r, json_t *res, void *data)
{
	struct merged *m = data;

	if (r < 0) {
		json_decref(m->verdict);
		json_decref(m->attestation);
		if (ms_store(c))
			merge_refused(c, r, m->id);
		else
			call_error(c, RPC_E_INTERNAL, NULL,
				   "spd is stopping: nothing was merged");
		free(m);
		return;
	}
	json_object_set_new(res, "forced", json_boolean(!m->pass));
	json_object_set_new(res, "checks",
			    m->verdict ? m->verdict : json_null());
	if (m->attestation)
		json_object_set_new(res, "attestation", m->attestation);
	if (m->ended)
		journal_append(call_spd(c)->journal, m->id, "operator",
			       "session.merge-forced",
			       "merged an ended session without its checks "
			       "(--force)",
			       NULL);
	else if (!m->pass)
		journal_append(call_spd(c)->journal, m->id, "operator",
			       "session.merge-forced",
			       "merged past failing checks (--force)", NULL);
	call_reply(c, res);
	free(m);
}

static void merge_then(struct verify_run *v, const struct session_verdict *vd,
		       json_t *verdict, json_t *attestation)
{
	struct merged *m;

	/* No check configured: nothing failed (the verdict's checks gate
	 * says so, which is verify's business); every other gate still
	 * holds the merge. */
	bool pass = vd->pass;

	if (!pass && v->plan->n_checks == 0) {
		pass = true;
		for (int g = 0; g < SESSION_GATES; g++)
			if (g != SESSION_GATE_CHECKS && !vd->gates[g].pass)
				pass = false;
	}
	if (!pass && !v->force) {
		json_decref(attestation);
		call_error(v->c, RPC_E_BAD_REQUEST, verdict,
			   "the session's checks failed: nothing merged (see "
			   "spctl session verify %s; --force merges anyway, "
			   "and the journal says so)",
			   v->plan->id);
		return;
	}
	if (!(m = calloc(1, sizeof(*m)))) {
		json_decref(verdict);
		json_decref(attestation);
		call_error(v->c, RPC_E_INTERNAL, NULL, "out of memory");
		return;
	}
	m->verdict = verdict;
	m->attestation = attestation;
	m->pass = pass;
	snprintf(m->id, sizeof(m->id), "%s", v->plan->id);
	agent_merge(call_spd(v->c), v->c, v->plan->id, v->into, v->squash,
		    v->target, v->plan->commit[0] ? v->plan->commit : NULL,
		    merge_landed, m);
}

/* Merge an ended session's branch: no worktree is left to run the
 * checks in, so only --force merges it, and the journal says so. */
static void merge_ended(struct call *c, const char *id, const char *into,
			json_t *p)
{
	struct merged *m;

	if (!json_is_true(json_object_get(p, "force"))) {
		call_error(c, RPC_E_BAD_REQUEST, NULL,
			   "session %s has ended: its worktree is gone, so its "
			   "checks cannot run; merge before ending, or "
			   "--force merges without the checks (journaled)",
			   id);
		return;
	}
	if (!(m = calloc(1, sizeof(*m)))) {
		call_error(c, RPC_E_INTERNAL, NULL, "out of memory");
		return;
	}
	m->ended = true;
	snprintf(m->id, sizeof(m->id), "%s", id);
	agent_merge(call_spd(c), c, id, into,
		    json_is_true(json_object_get(p, "squash")), NULL, NULL,
		    merge_landed, m);
}

/*
 * [provenance]: a session that read untrusted content and changed its
 * work after it is merged only when the operator says so
 * (accept_untrusted), having been told what it read and where.  True
 * when c was finished with the refusal.
 */
static bool merge_provenance_refused(struct call *c, const char *id)
{
	struct spd *spd = call_spd(c);
	struct session_label u;
	const char *rule = NULL;
	char why[1024];

	if (!session_prov_asks(ms_store(c), id, &spd->config,
			       SESSION_PROV_MERGE, NULL, &rule, why,
			       sizeof(why), &u) ||
	    !session_changed_since(ms_store(c), id, u.row))
		return false;
	if (json_is_true(json_object_get(call_params(c), "accept_untrusted"))) {
		journal_append(spd->journal, id, "operator",
			       "session.merge-untrusted", why, NULL);
		return false;
	}
	call_error(c, RPC_E_NEEDS_APPROVAL,
		   json_pack("{s:s, s:s, s:I, s:s}", "rule", rule, "label",
			     u.label, "row", (json_int_t)u.row, "what", u.what),
		   "%s: nothing merged; review the work (spctl session diff "
		   "%s), then merge with --accept-untrusted",
		   why, id);
	return true;
}

static void merge_guarded(struct call *c, int r, char *text, bool truncated);
static void merge_planned(struct call *c, int r,
			  struct session_verify_plan *plan, void *target);

void m_session_merge(struct call *c)
{
	json_t *p = call_params(c);
	const char *id = ms_param(c, "id"), *into = ms_param(c, "into");

	if (!ms_have_store(c))
		return;
	if (ms_after_checkpoint(c, m_session_merge))
		return;
	call_set_summary(c, "merge %s%s%s", id, into ? " into " : "",
			 into ? into : "");
	if (into && !session_feature_valid(into) && strchr(into, '/') == NULL) {
		call_error(c, RPC_E_BAD_PARAMS, NULL,
			   "\"%s\" is not a branch name", into);
		return;
	}
	if (merge_provenance_refused(c, id))
		return;
	/* An ended session's worktree is gone, and its checks with it. */
	{
		struct session_info *i = NULL;
		bool ended = session_get(ms_store(c), id, &i) == 0 &&
			     i->state == SESSION_ENDED;

		session_info_free(i);
		if (ended) {
			merge_ended(c, id, into, p);
			return;
		}
	}
	agent_diff_guard(call_spd(c), c, id, merge_guarded);
}

static void merge_guarded(struct call *c, int r, char *text, bool truncated)
{
	const char *id = ms_param(c, "id"), *into = ms_param(c, "into");
	char target[41], *at;

	if (ms_guarded_after_checkpoint(c, r, text, truncated, merge_guarded))
		return;
	free(text);
	/* The target as the checks begin: a move under them refuses. */
	r = session_merge_target(ms_store(c), id, into, target);
	if (r < 0) {
		ms_fail(c, r, id);
		return;
	}
	/* The agent's latest commits, then the checks on their tree. */
	if (ms_sync_refused(c, id))
		return;
	at = malloc(sizeof(target));
	if (!at) {
		call_error(c, RPC_E_INTERNAL, NULL, "out of memory");
		return;
	}
	memcpy(at, target, sizeof(target));
	agent_merge_plan(call_spd(c), c, id, merge_planned, at);
}

/* The branch checked out for the checks (target: the merge's target as
 * they began, malloc'd). */
static void merge_planned(struct call *c, int r,
			  struct session_verify_plan *plan, void *target)
{
	json_t *p = call_params(c);
	const char *id = ms_param(c, "id"), *into = ms_param(c, "into");
	struct verify_run *v;
	void *data;

	if (r == -ESHUTDOWN) {
		free(target);
		call_error(c, RPC_E_INTERNAL, NULL,
			   "spd is stopping: nothing was merged");
		return;
	}
	if (r < 0) {
		free(target);
		ms_fail(c, r, id);
		return;
	}
	if (plan->n_checks && !session_store_check_runner(ms_store(c), &data)) {
		free(target);
		session_merge_plan_done(ms_store(c), id);
		session_verify_plan_free(plan);
		call_error(c, RPC_E_SANDBOX_UNAVAILABLE, NULL,
			   "the checks run in the sandbox, which is not "
			   "available");
		return;
	}
	if (!(v = verify_run_new(c, plan)) ||
	    (into && !(v->into = strdup(into)))) {
		free(target);
		session_merge_plan_done(ms_store(c), id);
		if (v)
			verify_run_free(v);
		else
			session_verify_plan_free(plan);
		call_error(c, RPC_E_INTERNAL, NULL, "out of memory");
		return;
	}
	v->then = merge_then;
	v->method = "session.merge";
	v->squash = json_is_true(json_object_get(p, "squash"));
	v->force = json_is_true(json_object_get(p, "force"));
	memcpy(v->target, target, sizeof(v->target));
	free(target);
	verify_step(v);
}

/* ---- end: the checks, when configured, then the end ---- */

/*
 * An end reads the whole worktree first on the thread pool
 * (session_end_read_begin: 0.1-0.3 s for 10,000 files, which no other
 * client waits for), then then(c, data, true) goes on, on the loop, the
 * read standing for the worktree until then returns.  then(c, data,
 * false) when the end does not go on (c has its reply): data is freed.
 */
typedef void (*end_then_fn)(struct call *c, void *data, bool go);
/* (then must not touch c when not go: the reply freed it.) */

struct end_read {
	struct call *c;
	struct session_read *rd;
	end_then_fn then;
	void *data;
	char id[SESSION_ID_LEN + 1];
};

static void end_read_work(void *data)
{
	struct end_read *e = data;

	session_end_read_work(e->rd);
}

static void end_read_done(void *data)
{
	struct end_read *e = data;
	struct spd *spd = call_spd(e->c);

	if (session_end_read_end(e->rd) == -ESHUTDOWN) {
		call_error(e->c, RPC_E_INTERNAL, NULL,
			   "spd is stopping: the session was not ended; its "
			   "worktree and work are kept");
		e->then(e->c, e->data, false);
	} else {
		e->then(e->c, e->data, true);
		session_end_read_drop(spd->sessions, e->id);
	}
	free(e);
}

static void end_read_then(struct call *c, const char *id, end_then_fn then,
			  void *data)
{
	struct session_read *rd = NULL;
	struct end_read *e;
	int r = session_end_read_begin(ms_store(c), id, &rd);

	if (r < 0) {
		ms_fail(c, r, id);
		then(c, data, false);
		return;
	}
	e = rd ? calloc(1, sizeof(*e)) : NULL;
	if (e) {
		e->c = c;
		e->rd = rd;
		e->then = then;
		e->data = data;
		snprintf(e->id, sizeof(e->id), "%s", id);
		pool_run(call_spd(c)->loop, end_read_work, end_read_done, e);
		return;
	}
	/* Nothing to read ahead, or no memory to do it off the loop: here.
	 * (c and its id are gone once then has replied.) */
	if (rd) {
		char keep[SESSION_ID_LEN + 1];
		struct spd *spd = call_spd(c);

		snprintf(keep, sizeof(keep), "%s", id);
		session_end_read_work(rd);
		(void)session_end_read_end(rd);
		then(c, data, true);
		session_end_read_drop(spd->sessions, keep);
		return;
	}
	then(c, data, true);
}

/* report, then more's keys (taken; either may be NULL). */
static json_t *reports_join(json_t *report, json_t *more)
{
	if (!report)
		return more;
	if (more)
		json_object_update(report, more);
	json_decref(more);
	return report;
}

/*
 * End the session without its checks having passed, and say so: the
 * reply's "verified" is false and "unverified" says why, and the journal
 * has a session.end-unverified row — an end that ran no checks is never
 * mistaken for one that did.  report is session_end_prepare's (taken),
 * extra as end_reply's.
 */
static void end_unverified(struct call *c, const char *id, bool discard,
			   json_t *report, json_t *extra, const char *why)
{
	json_t *more = NULL, *d;
	int r = session_end(ms_store(c), id, discard, &more);
	char *txt;

	report = reports_join(report, more);
	if (!extra)
		extra = json_object();
	json_object_set_new(extra, "verified", json_false());
	json_object_set_new(extra, "unverified", json_string(why));
	if (r == 0 || r == -EIO) {
		d = json_pack("{s:s}", "why", why);
		txt = d ? json_dumps(d, JSON_COMPACT) : NULL;
		if (!txt || !call_spd(c)->journal ||
		    journal_append(call_spd(c)->journal, id, "spd",
				   "session.end-unverified", why, txt) < 0)
			log_warn("session %s: its unverified end was not "
				 "journaled: %s",
				 id, why);
		free(txt);
		json_decref(d);
	}
	end_reply(c, id, r, report, extra);
}

/* Why a failing verdict failed: its first failing gate's detail. */
static void verdict_why(const struct session_verdict *vd, char *buf, size_t len)
{
	for (int g = 0; g < SESSION_GATES; g++)
		if (!vd->gates[g].pass) {
			snprintf(buf, len,
				 "the checks' verdict is fail (%s: %s)",
				 vd->gates[g].name ? vd->gates[g].name : "gate",
				 vd->gates[g].detail);
			return;
		}
	snprintf(buf, len, "the checks' verdict is fail");
}

/* What an end after its checks keeps while it reads the worktree. */
struct end_after {
	char id[SESSION_ID_LEN + 1];
	char commit[41]; /* the commit the checks stood for */
	char why[600];	 /* not "": the end is unverified, for this */
	bool discard;
	json_t *report, *extra;
};

/* The end, verified when the verdict passed, was signed, and is about
 * the branch's tip as it ended. */
static void end_after_read(struct call *c, void *data, bool go)
{
	struct end_after *a = data;
	json_t *more = NULL;
	char tip[41] = "";
	int r;

	if (!go) {
		json_decref(a->report);
		json_decref(a->extra);
		free(a);
		return;
	}
	if (a->why[0]) {
		end_unverified(c, a->id, a->discard, a->report, a->extra,
			       a->why);
		free(a);
		return;
	}
	r = session_end(ms_store(c), a->id, a->discard, &more);
	a->report = reports_join(a->report, more);
	/* The agent may have worked while the checks ran: then what ended
	 * is not what was checked. */
	if ((r == 0 || r == -EIO) &&
	    (session_branch_head(ms_store(c), a->id, tip) < 0 ||
	     strcmp(tip, a->commit) != 0)) {
		snprintf(a->why, sizeof(a->why),
			 "the branch moved while its checks ran: the attested "
			 "commit is %.12s, the branch's tip %.12s",
			 a->commit, tip[0] ? tip : "unknown");
		json_object_set_new(a->extra, "verified", json_false());
		json_object_set_new(a->extra, "unverified",
				    json_string(a->why));
		if (call_spd(c)->journal)
			journal_append(call_spd(c)->journal, a->id, "spd",
				       "session.end-unverified", a->why, NULL);
	} else {
		json_object_set_new(a->extra, "verified", json_true());
	}
	end_reply(c, a->id, r, a->report, a->extra);
	free(a);
}

/* After an end's checks: the worktree read again (the agent may have
 * worked meanwhile), then end_after_read. */
static void end_then(struct verify_run *v, const struct session_verdict *vd,
		     json_t *verdict, json_t *attestation)
{
	const char *err =
	    json_string_value(json_object_get(attestation, "error"));
	struct end_after *a = calloc(1, sizeof(*a));
	json_t *extra = json_object();

	json_object_set_new(extra, "checks", verdict ? verdict : json_null());
	json_object_set_new(extra, "attestation",
			    attestation ? attestation : json_null());
	if (!a || !extra) {
		free(a);
		json_decref(extra);
		call_error(v->c, RPC_E_INTERNAL, NULL,
			   "out of memory: the session was not ended");
		return;
	}
	snprintf(a->id, sizeof(a->id), "%s", v->plan->id);
	snprintf(a->commit, sizeof(a->commit), "%s", v->plan->commit);
	a->discard = v->discard;
	a->report = v->report;
	a->extra = extra;
	v->report = NULL;
	if (!vd->pass)
		verdict_why(vd, a->why, sizeof(a->why));
	else if (!attestation || err)
		snprintf(a->why, sizeof(a->why),
			 "the verdict was not signed: %s",
			 err ? err : "out of memory");
	end_read_then(v->c, a->id, end_after_read, a);
}

/*
 * An end with checks configured runs them first, on a checkout of the
 * branch's tip once the agent's work is on it, signs the verdict, then
 * ends (end_then).  An end that cannot run them still ends, marked
 * unverified with the reason (end_unverified).  Returns false when the
 * project configures no check (a plain end), else true: c is finished
 * or will be.
 */
struct end_at {
	json_t *report;
	bool discard;
	char base[41];
};

static void end_planned(struct call *c, int r, struct session_verify_plan *plan,
			void *data);

static bool end_checked(struct call *c, const char *id, bool discard)
{
	struct session_info *i = NULL;
	struct session_verify_plan *plan = NULL;
	struct end_at *e;
	json_t *report = NULL;
	char why[600], base[41] = "";
	bool branch;
	void *data;
	int r;

	if (session_get(ms_store(c), id, &i) < 0)
		return false;
	if (i->state == SESSION_ENDED) {
		session_info_free(i);
		return false; /* session_end says it has */
	}
	branch = i->mode == SESSION_MODE_WORKTREE && i->branch;
	snprintf(base, sizeof(base), "%s", i->base);
	session_info_free(i);
	r = session_verify_plan(ms_store(c), id, &plan);
	if (r == 0 && plan->n_checks == 0) {
		session_verify_plan_free(plan);
		return false;
	}
	session_verify_plan_free(plan);
	plan = NULL;
	/* New held-out checks wait for a verification: the end waits for
	 * them too, rather than end without its checks. */
	if (r == -EALREADY) {
		ms_fail(c, r, id);
		return true;
	}
	if (r < 0) {
		snprintf(why, sizeof(why), "the checks cannot run: %s",
			 r == -ECANCELED ? "the session's attempt ended"
			 : session_store_error(ms_store(c))[0]
			     ? session_store_error(ms_store(c))
			     : strerror(-r));
		end_unverified(c, id, discard, NULL, NULL, why);
		return true;
	}
	if (!branch) {
		end_unverified(c, id, discard, NULL, NULL,
			       "in place: there is no branch of the "
			       "session's for the checks to stand for");
		return true;
	}
	if (!session_store_check_runner(ms_store(c), &data)) {
		end_unverified(c, id, discard, NULL, NULL,
			       "the checks run in the sandbox, which is not "
			       "available");
		return true;
	}
	/* The agent's commits and uncommitted work onto the branch first:
	 * the checks stand for the branch as it ends. */
	r = session_end_prepare(ms_store(c), id, discard, &report);
	if (r < 0) {
		end_reply(c, id, r, report, NULL);
		return true;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		end_unverified(c, id, discard, report, NULL, "out of memory");
		return true;
	}
	e->report = report;
	e->discard = discard;
	snprintf(e->base, sizeof(e->base), "%s", base);
	agent_merge_plan(call_spd(c), c, id, end_planned, e);
	return true;
}

/* An end's checks once the branch is checked out for them. */
static void end_planned(struct call *c, int r, struct session_verify_plan *plan,
			void *data)
{
	struct end_at *e = data;
	const char *id = ms_param(c, "id");
	json_t *report = e->report;
	bool discard = e->discard;
	struct verify_run *v = NULL;
	char why[600], base[41];

	snprintf(base, sizeof(base), "%s", e->base);
	free(e);
	if (r == -ESHUTDOWN) {
		json_decref(report);
		call_error(c, RPC_E_INTERNAL, NULL,
			   "spd is stopping: the session was not ended; its "
			   "work is on its branch");
		return;
	}
	if (r == -EALREADY) {
		json_decref(report);
		call_error(c, RPC_E_BAD_REQUEST, NULL,
			   "%s; the session was not ended; its work is on its "
			   "branch",
			   session_store_error(ms_store(c)));
		return;
	}
	if (r < 0) {
		snprintf(why, sizeof(why),
			 "the branch cannot be checked out for the checks: %s",
			 session_store_error(ms_store(c))[0]
			     ? session_store_error(ms_store(c))
			     : strerror(-r));
		end_unverified(c, id, discard, report, NULL, why);
		return;
	}
	/* A note on the base would be about the operator's commit. */
	if (strcmp(plan->commit, base) == 0) {
		session_merge_plan_done(ms_store(c), id);
		session_verify_plan_free(plan);
		end_unverified(c, id, discard, report, NULL,
			       "the branch has no commits beyond its base: "
			       "nothing of the session's to attest");
		return;
	}
	if (!(v = verify_run_new(c, plan))) {
		session_merge_plan_done(ms_store(c), id);
		session_verify_plan_free(plan);
		end_unverified(c, id, discard, report, NULL, "out of memory");
		return;
	}
	v->then = end_then;
	v->method = "session.end";
	v->discard = discard;
	v->report = report;
	verify_step(v);
}

/* The end once its worktree is read: its checks first, or at once.
 * (Not go: c has had its reply, and is gone.) */
static void end_go(struct call *c, void *data, bool go)
{
	const char *id;
	json_t *report = NULL;
	bool discard;
	int r;

	(void)data;
	if (!go)
		return;
	id = ms_param(c, "id");
	discard = json_is_true(json_object_get(call_params(c), "discard"));
	if (end_checked(c, id, discard))
		return;
	r = session_end(ms_store(c), id, discard, &report);
	end_reply(c, id, r, report, NULL);
}

void m_session_end(struct call *c)
{
	const char *id = ms_param(c, "id");
	bool discard = json_is_true(json_object_get(call_params(c), "discard"));

	if (!ms_have_store(c))
		return;
	if (ms_after_checkpoint(c, m_session_end))
		return;
	call_set_summary(c, "end %s%s", id, discard ? " --discard" : "");
	end_read_then(c, id, end_go, NULL);
}

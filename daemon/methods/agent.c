/*
 * An agent's calls tied to its session (daemon/methods/agent.h): the session
 * token's check, where its runs happen (the worktree, or the checkout with
 * .git read-only in place), the re-hash of protected inputs after every
 * command, and the verification checks run in the sandbox.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "daemon/log.h"
#include "daemon/methods/agent.h"
#include "daemon/broker/broker.h"
#include "daemon/config.h"
#include "daemon/transport/call.h"
#include "daemon/methods/gate.h"
#include "daemon/journal/journal.h"
#include "daemon/session/linkwatch.h"
#include "daemon/policy/policy.h"
#include "daemon/methods/run.h"
#include "daemon/pool.h"
#include "daemon/sandbox/sbx.h"
#include "daemon/keys/secrets.h"
#include "daemon/session/session.h"
#include "daemon/spd.h"
#include "common/paths.h"
#include "common/redact.h"
#include "common/strv.h"
#include "common/trace.h"
#include "common/util.h"

void agent_token_redact(struct spd *spd, const char *id, const char *token)
{
	char name[64];

	if (!spd->secrets)
		return;
	snprintf(name, sizeof(name), SESSION_TOKEN_SECRET, id);
	if (!secrets_has_minted(spd, name) &&
	    secrets_add_minted(spd, name, token) < 0)
		log_warn("session token could not join the redaction set");
}

static int auth_hook(struct spd *spd, const char *token, char **ret_sid)
{
	char id[SESSION_ID_LEN + 1];

	if (!spd->sessions ||
	    session_authenticate(spd->sessions, token, id) < 0)
		return -EACCES;
	/* The store keeps only the token's hash: after spd restarts, the
	 * token joins the redaction set again here, the first time the
	 * agent presents it, before anything its call does can show it. */
	agent_token_redact(spd, id, token);
	*ret_sid = strdup(id);
	return *ret_sid ? 0 : -ENOMEM;
}

static void journal_hook(void *data, const char *session_id, const char *kind,
			 const char *summary, const char *detail_json)
{
	struct spd *spd = data;

	journal_append(spd->journal, session_id, "spd", kind, summary,
		       detail_json);
}

struct run_session {
	struct spd *spd;
	char id[SESSION_ID_LEN + 1];
	char **argv;
	struct session_run_paths paths; /* borrowed by the run's spec */
	int64_t journal_row;		/* the run's start in the journal */
	bool started;			/* counted in session_runs */
};

static void run_session_free(struct run_session *rs)
{
	if (rs->started && rs->spd->sessions)
		session_run_end(rs->spd->sessions, rs->id);
	session_argv_free(rs->argv);
	session_run_paths_free(&rs->paths);
	free(rs);
}

/* session_sync's answer as the run's: 0, or an enum rpc_error with msg. */
static int sync_answer(struct spd *spd, const char *id, int x,
		       const char *where, char *msg, size_t msglen)
{
	if (x == -EACCES) {
		snprintf(msg, msglen,
			 "%s adds a known secret value: the session's attempt "
			 "ended",
			 where);
		return RPC_E_SECRET_IN_DIFF;
	}
	if (x == -EXDEV || x == -EINVAL) {
		snprintf(msg, msglen, "%s", session_store_error(spd->sessions));
		return RPC_E_BAD_REQUEST;
	}
	if (x == -ESHUTDOWN) {
		snprintf(msg, msglen,
			 "spd is stopping: the agent's commits are taken "
			 "onto the session's branch at its next run");
		return RPC_E_INTERNAL;
	}
	if (x < 0 && x != -ENOENT)
		log_warn("session %s: the agent's commits were not taken: %s",
			 id, session_store_error(spd->sessions));
	return 0;
}

/*
 * The agent's commits onto the session's branch, before the reply: a
 * secret in one ends the attempt, and a branch moved below the base is
 * said to the agent, whose commits do not land until it is fixed.  When
 * the agent committed, that work (its objects staged and copied, a
 * patch and a scan a commit) is done on the thread pool and the reply
 * waits for it there (sync_after): other clients do not.  A run whose
 * session has a sync out waits for it in sync_waits, then syncs.  The
 * run stays counted in flight until then, so that no end or checkpoint
 * reads the worktree meanwhile.
 */
struct sync_job {
	struct run_session *rs;
	struct run_wait *w;
	struct session_syncjob *j;
};

/*
 * Calls waiting for a step of their session's on the thread pool (its
 * sync, its checkpoint): each goes on with go(data) on the loop once
 * that step is back, in the order they came (one spd per process).
 */
struct sess_wait {
	char id[SESSION_ID_LEN + 1];
	void (*go)(void *data);
	void *data;
	struct sess_wait *next;
};

/* Queue go(data) on *q for session id: false when out of memory. */
static bool wait_add(struct sess_wait **q, const char *id,
		     void (*go)(void *data), void *data)
{
	struct sess_wait *w = calloc(1, sizeof(*w));

	if (!w)
		return false;
	snprintf(w->id, sizeof(w->id), "%s", id);
	w->go = go;
	w->data = data;
	while (*q)
		q = &(*q)->next;
	*q = w;
	return true;
}

/* Session id's waiters off *q, then each goes on (one that waits again
 * is queued anew). */
static void wait_go(struct sess_wait **q, const char *id)
{
	struct sess_wait *mine = NULL, **tail = &mine;

	while (*q) {
		struct sess_wait *w = *q;

		if (strcmp(w->id, id) != 0) {
			q = &w->next;
			continue;
		}
		*q = w->next;
		w->next = NULL;
		*tail = w;
		tail = &w->next;
	}
	while (mine) {
		struct sess_wait *w = mine;

		mine = w->next;
		w->go(w->data);
		free(w);
	}
}

/* Runs whose session had a sync out. */
static struct sess_wait *sync_waits;
struct sync_parked {
	struct run_session *rs;
	struct run_wait *w;
};

static int sync_go(struct run_session *rs, struct run_wait *w, char *msg,
		   size_t msglen);

static void run_session_settle(struct run_session *rs)
{
	if (rs->started) {
		session_run_end(rs->spd->sessions, rs->id);
		rs->started = false;
	}
}

static void sync_work(void *data)
{
	struct sync_job *sj = data;

	session_sync_work(sj->j);
}

/* A parked run goes again (or is told spd stops). */
static void sync_unpark(void *data)
{
	struct sync_parked *p = data;
	char msg[512] = "";
	int e;

	if (!p->rs->spd->sessions) {
		e = RPC_E_INTERNAL;
		snprintf(msg, sizeof(msg),
			 "spd is stopping: the agent's commits are taken onto "
			 "the session's branch at its next run");
	} else {
		e = sync_go(p->rs, p->w, msg, sizeof(msg));
	}
	if (e != RUN_HOOK_LATER)
		p->w->resume(p->w, e, msg);
	free(p);
}

static void sync_after(void *data)
{
	struct sync_job *sj = data;
	struct run_session *rs = sj->rs;
	struct spd *spd = rs->spd;
	char where[1100] = "", msg[512] = "", id[SESSION_ID_LEN + 1];
	int x, e;

	snprintf(id, sizeof(id), "%s", session_sync_id(sj->j));
	/* The store's close waited for it; the last sync frees it. */
	x = session_sync_end(sj->j, where, sizeof(where));
	trace_stamp("synced");
	if (!spd->sessions)
		x = -ESHUTDOWN;
	else
		run_session_settle(rs);
	e = sync_answer(spd, id, x, where, msg, sizeof(msg));
	sj->w->resume(sj->w, e, msg);
	free(sj);
	wait_go(&sync_waits, id);
}

/* 0 or an error as after_run's; RUN_HOOK_LATER when the sync is on the
 * thread pool or waits for the one there. */
static int sync_go(struct run_session *rs, struct run_wait *w, char *msg,
		   size_t msglen)
{
	struct spd *spd = rs->spd;
	struct session_syncjob *j = NULL;
	struct sync_job *sj;
	char where[1100] = "";
	int x = session_sync_begin(spd->sessions, rs->id, &j);

	if (x == -EBUSY) {
		struct sync_parked *p = calloc(1, sizeof(*p));

		if (p) {
			p->rs = rs;
			p->w = w;
			if (wait_add(&sync_waits, rs->id, sync_unpark, p))
				return RUN_HOOK_LATER;
			free(p);
		}
		x = -ENOMEM;
	}
	if (x == 1) {
		sj = calloc(1, sizeof(*sj));
		if (sj) {
			sj->rs = rs;
			sj->w = w;
			sj->j = j;
			if (pool_queue(spd->loop, sync_work, sync_after, sj) ==
			    0)
				return RUN_HOOK_LATER;
			free(sj);
		}
		/* No job: the sync here. */
		session_sync_work(j);
		x = session_sync_end(j, where, sizeof(where));
	}
	run_session_settle(rs);
	return sync_answer(spd, rs->id, x, where, msg, msglen);
}

/* Before the reply: the guard's re-hash, whose finding ends the attempt
 * and turns the reply into that error; then the agent's commits. */
static int after_run(void *data, const struct sbx_result *r, struct run_wait *w,
		     char *msg, size_t msglen)
{
	struct run_session *rs = data;
	struct guard_finding f;
	int ret = 0, x;

	(void)r;
	x = session_guard_check(rs->spd->sessions, rs->id, &f);
	trace_stamp("guarded");
	if (x == 0)
		return sync_go(rs, w, msg, msglen);
	run_session_settle(rs);
	if (x == 1) {
		snprintf(msg, msglen, "%s %s: the session's attempt ended",
			 f.path, f.what);
		ret = f.set == GUARD_SET_GIT ? RPC_E_GIT_CHANGED
					     : RPC_E_INTEGRITY;
	} else if (x < 0 && x != -ENOENT) {
		snprintf(msg, msglen,
			 "the session's guarded inputs could not be checked "
			 "(%s): the attempt ended",
			 strerror(-x));
		ret = RPC_E_ATTEMPT_ENDED;
	}
	return ret;
}

/* argv as one line for a checkpoint's message, words joined by
 * spaces, cut at a bound. */
static char *argv_text(char *const *argv)
{
	char buf[512];
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; argv && argv[i] && used < sizeof(buf) - 1; i++) {
		int k = snprintf(buf + used, sizeof(buf) - used, "%s%s",
				 i ? " " : "", argv[i]);
		if (k < 0)
			break;
		used += (size_t)k;
	}
	return strdup(buf);
}

/* ---- checkpoints on the thread pool ---------------------------------- */

/*
 * What a run or a file tool changed is read into the session's
 * checkpoint on the thread pool (session_checkpoint_begin): for 1,000
 * changed files that was 120-150 ms every other client waited for on the
 * loop.  Meanwhile the session's next run waits to start (start_wait),
 * and the calls that read its worktree wait (agent_after_checkpoint):
 * each then goes on, in the order it came.
 */
struct ck_job {
	struct spd *spd;
	struct session_ckjob *j;
	char id[SESSION_ID_LEN + 1];
};

/* Calls whose session had a checkpoint out. */
static struct sess_wait *ck_waits;

static void ck_work(void *data)
{
	struct ck_job *k = data;

	session_checkpoint_work(k->j);
}

static void ck_after(void *data)
{
	struct ck_job *k = data;
	struct spd *spd = k->spd;
	int r;

	r = session_checkpoint_end(k->j, NULL);
	if (r < 0 && r != -ENOENT && r != -ESHUTDOWN && spd->sessions)
		log_warn("session %s: no checkpoint: %s", k->id,
			 session_store_error(spd->sessions));
	wait_go(&ck_waits, k->id);
	/* A checkpoint asked for meanwhile (a file tool's). */
	if (spd->sessions && session_checkpoint_pending(spd->sessions, k->id))
		agent_checkpoint_later(spd);
	free(k);
}

void agent_checkpoint(struct spd *spd, const char *id, int64_t row,
		      const char *what)
{
	struct session_ckjob *j = NULL;
	struct ck_job *k;
	int r;

	if (!spd->sessions)
		return;
	r = session_checkpoint_begin(spd->sessions, id, row, what, &j);
	if (r == -EINPROGRESS)
		agent_checkpoint_later(spd);
	else if (r < 0 && r != -EBUSY && r != -ENOENT)
		log_warn("session %s: no checkpoint: %s", id,
			 session_store_error(spd->sessions));
	if (r != 1)
		return;
	k = calloc(1, sizeof(*k));
	if (!k) {
		session_checkpoint_work(j);
		(void)session_checkpoint_end(j, NULL);
		return;
	}
	k->spd = spd;
	k->j = j;
	snprintf(k->id, sizeof(k->id), "%s", id);
	pool_run(spd->loop, ck_work, ck_after, k);
}

/* A restore: the checkpoint of what is there, then the checkout, each on
 * the thread pool; what waits for the session's checkpoint waits for it
 * (agent_after_checkpoint). */
struct restore_job {
	struct spd *spd;
	struct call *c;
	struct session_restorejob *j;
	agent_restore_fn then;
	char id[SESSION_ID_LEN + 1];
};

static void restore_work(void *data)
{
	struct restore_job *rj = data;

	session_restore_work(rj->j);
}

static void restore_done(void *data)
{
	struct restore_job *rj = data;
	struct spd *spd = rj->spd;
	unsigned saved = 0;
	int r = session_restore_end(rj->j, &saved);

	if (r == 1) {
		pool_run(spd->loop, restore_work, restore_done, rj);
		return;
	}
	rj->then(rj->c, r, saved);
	wait_go(&ck_waits, rj->id);
	if (spd->sessions && session_checkpoint_pending(spd->sessions, rj->id))
		agent_checkpoint_later(spd);
	free(rj);
}

void agent_restore(struct spd *spd, struct call *c, const char *id, unsigned n,
		   agent_restore_fn then)
{
	struct restore_job *rj;
	int r;

	if (!spd->sessions) {
		then(c, -ESHUTDOWN, 0);
		return;
	}
	rj = calloc(1, sizeof(*rj));
	r = rj ? session_restore_begin(spd->sessions, id, n, &rj->j) : -ENOMEM;
	if (r < 0) {
		free(rj);
		then(c, r, 0);
		return;
	}
	rj->spd = spd;
	rj->c = c;
	rj->then = then;
	snprintf(rj->id, sizeof(rj->id), "%s", id);
	pool_run(spd->loop, restore_work, restore_done, rj);
}

bool agent_after_checkpoint(struct spd *spd, const char *id,
			    void (*go)(void *data), void *data)
{
	/* Out of memory: it goes on now, and the session refuses what it
	 * must (-EBUSY). */
	return id && spd->sessions &&
	       session_checkpoint_out(spd->sessions, id) &&
	       wait_add(&ck_waits, id, go, data);
}

static bool run_start_wait(const struct run_request *req, void (*go)(void *),
			   void *data)
{
	const struct run_session *rs = req->done_data;

	return agent_after_checkpoint(rs->spd, rs->id, go, data);
}

/* After the reply: the command in the session's history (a row and a
 * counter in sessions.db, some 0.1 ms the client need not wait for). */
static void after_reply(void *data, const struct sbx_result *r)
{
	struct run_session *rs = data;
	int x;

	if (!rs->spd->sessions) {
		/* spd stopped while the agent's commits were taken. */
		run_session_free(rs);
		return;
	}
	x = session_log_command(rs->spd->sessions, rs->id,
				(const char *const *)rs->argv,
				r->error || r->term_signal ? -1 : r->exit_code);

	if (x < 0 && x != -ENOENT && x != -ESHUTDOWN)
		log_warn("session %s: the command's record was not written: "
			 "%s",
			 rs->id, strerror(-x));
	/* What the run changed, as a checkpoint (when no other run of the
	 * session is in flight: the last one to end takes it). */
	{
		char *what = argv_text(rs->argv);

		agent_checkpoint(rs->spd, rs->id, rs->journal_row, what);
		free(what);
	}
	run_session_free(rs);
}

static void run_started(void *data)
{
	struct run_session *rs = data;

	session_run_begin(rs->spd->sessions, rs->id);
	rs->started = true;
}

static void cancel_run(void *data)
{
	run_session_free(data);
}

static char **argv_copy(json_t *arr)
{
	size_t n = json_array_size(arr);
	char **v = calloc(n + 1, sizeof(*v));

	if (!v)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (!(v[i] = strdup(json_string_value(json_array_get(arr, i))
					?: ""))) {
			session_argv_free(v);
			return NULL;
		}
	return v;
}

static int run_prepare(struct spd *spd, struct call *c,
		       struct run_request *req);

/*
 * In place, the walk of the checkout a run's hidden list needs (a
 * .gitignore written, a walked directory gone) goes to the thread pool
 * (session_walk_begin), and the run is prepared again once it is back:
 * no other client waits for it (it was 55 ms for 10,000 files on the
 * loop).  Something the list cannot follow again meanwhile (a .gitignore
 * rewritten during the walk) walks again so, up to RUN_WALKS_MAX times;
 * the last walk's list serves the run whatever changed since, so that a
 * .gitignore rewritten without end never has the loop walk.
 */
#define RUN_WALKS_MAX 3

struct walk_job {
	struct spd *spd;
	struct call *c;
	struct run_request req;
	struct session_walk *wk;
	char id[SESSION_ID_LEN + 1];
};

static void walk_work(void *data)
{
	struct walk_job *j = data;

	session_walk_work(j->wk);
}

static void walk_after(void *data)
{
	struct walk_job *j = data;
	struct spd *spd = j->spd;
	struct call *c = j->c;

	/* The store's close waited for it; the last walk frees it.  The
	 * last walk allowed serves the run whatever changed meanwhile. */
	j->req.walks++;
	session_walk_end(j->wk, j->req.walks >= RUN_WALKS_MAX);
	/* spd began stopping meanwhile: sandboxd goes first, then the
	 * sessions (modules_close). */
	if (!spd->sessions || !spd->sbx)
		call_error(c, RPC_E_INTERNAL, NULL,
			   "spd is stopping: the command was not run");
	else if (run_prepare(spd, c, &j->req) == 0)
		j->req.prepared(c, &j->req);
	/* The walk's list was for this run alone. */
	if (spd->sessions)
		session_walk_forget(spd->sessions, j->id);
	free(j);
}

/* 1 when the walk is queued and the call goes on in walk_after; 0 to go
 * on now. */
static int walk_first(struct spd *spd, struct call *c,
		      const struct run_request *req, const char *id)
{
	struct session_walk *wk = NULL;
	struct walk_job *j;

	if (!req->prepared || req->walks >= RUN_WALKS_MAX ||
	    session_walk_begin(spd->sessions, id, &wk) != 1)
		return 0;
	j = calloc(1, sizeof(*j));
	if (j) {
		j->spd = spd;
		j->c = c;
		j->req = *req;
		j->wk = wk;
		snprintf(j->id, sizeof(j->id), "%s", id);
		if (pool_queue(spd->loop, walk_work, walk_after, j) == 0)
			return 1;
		free(j);
	}
	/* No job: the walk here, and the run goes on with its list. */
	session_walk_work(wk);
	session_walk_end(wk, true);
	return 0;
}

static int run_prepare(struct spd *spd, struct call *c, struct run_request *req)
{
	const struct call_principal *who = call_principal(c);
	json_t *jsid = json_object_get(call_params(c), "session");
	const char *id = who->session_id;
	struct run_session *rs = NULL;
	size_t hidden_max = 0;
	int r;

	if (who->operator)
		id = json_string_value(jsid);
	if (!id)
		return 0; /* the operator's own run: no session */
	if (!who->operator&& jsid &&
	     strcmp(json_string_value(jsid) ?: "", id) != 0) {
		call_error(c, RPC_E_UNAUTHORIZED, NULL,
			   "a session token acts in its own session only");
		return -1;
	}
	r = session_usable(spd->sessions, id);
	if (r == -ECANCELED) {
		call_error(c, RPC_E_ATTEMPT_ENDED, NULL,
			   "session %s: the attempt ended; no further "
			   "calls are accepted",
			   id);
		return -1;
	}
	if (r < 0) {
		call_error(c, RPC_E_BAD_REQUEST, NULL,
			   r == -EBUSY ? "session %s is ending (its worktree "
					 "is being read for its end): no "
					 "command runs now"
				       : "session %s is not active",
			   id);
		return -1;
	}
	if (walk_first(spd, c, req, id))
		return 1;
	rs = calloc(1, sizeof(*rs));
	if (!rs || !(rs->argv = argv_copy(req->argv))) {
		free(rs);
		session_walk_forget(spd->sessions, id);
		call_error(c, RPC_E_INTERNAL, NULL, "out of memory");
		return -1;
	}
	/* Where the session's commands run, and in place what stays
	 * read-only (.git) and what reads as empty (ignored credentials). */
	r = session_run_paths(spd->sessions, id, &rs->paths, &hidden_max);
	session_walk_forget(spd->sessions, id);
	if (r == -E2BIG) {
		/* Running with some ignored files readable would undo
		 * deny.fs.ignored through any command: refuse instead. */
		run_session_free(rs);
		call_error(c, RPC_E_SANDBOX_UNAVAILABLE, NULL,
			   "session %s: in place, more than %zu top-most "
			   "git-ignored entries (or %d entries in all) "
			   "would have to be hidden from the run; ignore "
			   "whole directories, or use a worktree session",
			   id, hidden_max, SESSION_SCAN_MAX);
		return -1;
	}
	if (r < 0) {
		run_session_free(rs);
		call_error(c, RPC_E_BAD_REQUEST, NULL, "session %s: %s", id,
			   strerror(-r));
		return -1;
	}
	rs->spd = spd;
	snprintf(rs->id, sizeof(rs->id), "%s", id);
	req->workspace = rs->paths.workspace;
	req->readonly = rs->paths.readonly;
	req->empty_files = rs->paths.empty_files;
	req->hidden = rs->paths.hidden;
	req->in_place = rs->paths.in_place;
	/* The agent's cwd is the worktree unless it names one inside. */
	if (!who->operator)
		req->cwd = NULL;
	req->done_hook = after_run;
	req->on_start = run_started;
	req->journal_row = &rs->journal_row;
	req->after_reply = after_reply;
	req->done_data = rs;
	req->done_cancel = cancel_run;
	req->start_wait = run_start_wait;
	req->session_id = rs->id;
	return 0;
}

/* ---- verification checks in the sandbox ----------------------------- */

struct check_run {
	session_check_done_fn done;
	void *ctx;
	struct spd *spd;
	bool heldout;
	char id[SESSION_ID_LEN + 1];
	char *name;
	/* The output's digests, for the attestation of the verdict. */
	crypto_hash_sha256_state h[2];
	struct session_check_output out;
};

static void check_output(void *data, int stream, const char *buf, size_t len)
{
	struct check_run *cr = data;
	int s = stream == 2 ? 1 : 0;

	crypto_hash_sha256_update(&cr->h[s], (const unsigned char *)buf, len);
	cr->out.bytes[s] += len;
}

static void check_done(void *data, const struct sbx_result *r)
{
	struct check_run *cr = data;
	int code =
	    (r->error || r->term_signal || r->timed_out) ? -1 : r->exit_code;

	/* A held-out check runs the agent's code beside the held-out
	 * files: its exit code could carry their bytes out, a few at a
	 * time.  The verdict (and so the agent, and the attestation in the
	 * repository it reads) gets pass or fail; the code itself is
	 * journaled for the operator, on a row of no session (an agent's
	 * journal.query sees its own session's rows). */
	if (cr->heldout) {
		json_t *d =
		    json_pack("{s:s, s:s, s:i, s:i, s:b}", "session", cr->id,
			      "check", cr->name, "exit", code, "signal",
			      r->term_signal, "timed_out", r->timed_out);
		char *detail = d ? json_dumps(d, JSON_COMPACT) : NULL;

		json_decref(d);
		if (!detail || !cr->spd->journal ||
		    journal_append(cr->spd->journal, NULL, "spd",
				   "session.check.heldout",
				   code == 0 ? "held-out check passed"
					     : "held-out check failed",
				   detail) < 0)
			log_warn("session %s: a held-out check's exit was "
				 "not journaled",
				 cr->id);
		free(detail);
		code = code == 0 ? 0 : 1;
	}
	for (int s = 0; s < 2; s++) {
		unsigned char d[crypto_hash_sha256_BYTES];

		crypto_hash_sha256_final(&cr->h[s], d);
		sodium_bin2hex(cr->out.sha256[s], sizeof(cr->out.sha256[s]), d,
			       sizeof(d));
		cr->out.dropped[s] = r->bytes_dropped[s];
	}
	/* A held-out check's output is the agent's code beside the held-out
	 * files: no digest of it goes into the attestation the agent can
	 * read, only its pass or fail. */
	if (cr->heldout)
		memset(&cr->out, 0, sizeof(cr->out));
	cr->done(cr->ctx, code, &cr->out);
	free(cr->name);
	free(cr);
}

/* The session's own view (session_run_paths) for a check that runs in
 * its workspace: a check runs the agent's code (its Makefile, a check
 * script it rewrote), so it must see no more than the agent's runs do —
 * in place, ignored entries hidden and credential files empty.  A merge's
 * checks run in a fresh checkout of the branch under spd's state dir
 * (nothing ignored there, and no run of the agent's sees it): the plan's
 * read-only paths only. */
static int check_paths(struct spd *spd, const struct session_verify_plan *plan,
		       struct session_run_paths *ret)
{
	int r = session_run_paths(spd->sessions, plan->id, ret, NULL);

	session_walk_forget(spd->sessions, plan->id);
	if (r < 0)
		return r;
	if (strcmp(ret->workspace, plan->workspace) != 0) {
		session_run_paths_free(ret);
		memset(ret, 0, sizeof(*ret));
	}
	return 0;
}

static int check_start(struct spd *spd, const struct session_verify_plan *plan,
		       size_t i, session_check_done_fn done, void *ctx)
{
	const struct session_check *ck = &plan->checks[i];
	struct check_run *cr = NULL;
	struct session_run_paths paths = {0};
	struct sbx_spec spec;
	struct strv hidden = {0};
	char *env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8",
		       NULL};
	char *binds[3] = {plan->heldout_src, plan->heldout_dst, NULL};
	int r;

	if (!spd->sbx)
		return -ENOTCONN;
	/* A check that cannot have the session's hiding does not run: it
	 * fails its gate. */
	r = check_paths(spd, plan, &paths);
	if (r < 0) {
		log_warn("session %s: check \"%s\" not run: %s", plan->id,
			 ck->name, strerror(-r));
		return r;
	}
	/* spd's own directories, the operator's [sandbox] hidden, and in
	 * place the session's ignored entries. */
	r = config_run_hidden_push(spd, &hidden);
	for (size_t k = 0; r == 0 && paths.hidden && paths.hidden[k]; k++)
		r = strv_push(&hidden, paths.hidden[k]);
	if (r < 0 || !(cr = calloc(1, sizeof(*cr))) ||
	    !(cr->name = strdup(ck->name))) {
		if (cr)
			free(cr);
		strv_free(&hidden);
		session_run_paths_free(&paths);
		return -ENOMEM;
	}
	cr->done = done;
	cr->ctx = ctx;
	cr->spd = spd;
	cr->heldout = ck->heldout;
	snprintf(cr->id, sizeof(cr->id), "%s", plan->id);
	crypto_hash_sha256_init(&cr->h[0]);
	crypto_hash_sha256_init(&cr->h[1]);
	memset(&spec, 0, sizeof(spec));
	spec.argv = ck->argv;
	spec.envp = env;
	spec.workspace = plan->workspace;
	spec.net = SBX_NET_NONE;
	spec.timeout_ms = spd->config.default_timeout_ms;
	spec.hidden = hidden.v;
	spec.empty_files = paths.empty_files;
	/* The held-out checks appear read-only at heldout_dst for a
	 * held-out check's run only (one whose command the operator wrote
	 * to name them), never for a check that runs only what the agent
	 * wrote; the host worktree never holds them. */
	spec.ro_binds = plan->heldout_src && ck->heldout ? binds : NULL;
	spec.readonly = plan->readonly; /* the git dir */
	spec.best_effort = false; /* checks never run with a layer missing */
	spec.run_uid = spd->config.run_uid;
	spec.run_gid = spd->config.run_gid;
	/* The plan does not say who asked for the verification: checks take
	 * shared slots only, so an agent's verifications cannot eat into
	 * the operator's reserve. */
	spec.slots_max = SBXP_RUNS_MAX - spd->config.operator_runs;
	r = sbx_run(spd->sbx, &spec,
		    &(struct sbx_cbs){check_output, check_done, NULL}, cr,
		    NULL);
	strv_free(&hidden);
	session_run_paths_free(&paths);
	if (r < 0) {
		free(cr->name);
		free(cr);
	}
	return r;
}

/*
 * In place, a check's hidden list needs the same walk as a run's
 * (walk_first): on the thread pool too, and the check starts once it is
 * back.  The plan is the verification's, which lives until its last
 * check is done.
 */
struct check_walk {
	struct spd *spd;
	const struct session_verify_plan *plan;
	size_t i;
	session_check_done_fn done;
	void *ctx;
	struct session_walk *wk;
	unsigned walks;
};

static int check_walk_first(struct check_walk *cw);

static void check_walk_work(void *data)
{
	struct check_walk *cw = data;

	session_walk_work(cw->wk);
}

static void check_walk_after(void *data)
{
	struct check_walk *cw = data;
	struct spd *spd = cw->spd;
	char id[SESSION_ID_LEN + 1];
	int r;

	/* spd began stopping meanwhile (sandboxd goes first, then the
	 * sessions): the check fails its gate, as one cut short by
	 * sandboxd's close does, before the walk's end lets the store go. */
	if (!spd->sessions || !spd->sbx) {
		cw->done(cw->ctx, -1, NULL);
		session_walk_end(cw->wk, false);
		free(cw);
		return;
	}
	cw->walks++;
	session_walk_end(cw->wk, cw->walks >= RUN_WALKS_MAX);
	cw->wk = NULL;
	if (check_walk_first(cw) == 1)
		return;
	/* The plan may be freed by the time check_start returns. */
	snprintf(id, sizeof(id), "%s", cw->plan->id);
	r = check_start(spd, cw->plan, cw->i, cw->done, cw->ctx);
	if (spd->sessions)
		session_walk_forget(spd->sessions, id);
	if (r < 0)
		cw->done(cw->ctx, -1, NULL);
	free(cw);
}

/* 1 when the walk is queued (check_walk_after goes on), 0 to start the
 * check now. */
static int check_walk_first(struct check_walk *cw)
{
	if (cw->walks >= RUN_WALKS_MAX ||
	    session_walk_begin(cw->spd->sessions, cw->plan->id, &cw->wk) != 1)
		return 0;
	if (pool_queue(cw->spd->loop, check_walk_work, check_walk_after, cw) ==
	    0)
		return 1;
	session_walk_work(cw->wk);
	session_walk_end(cw->wk, true);
	cw->wk = NULL;
	return 0;
}

int agent_check_runner(void *data, const struct session_verify_plan *plan,
		       size_t i, session_check_done_fn done, void *ctx)
{
	struct spd *spd = data;
	struct check_walk *cw;

	if (!spd->sbx)
		return -ENOTCONN;
	cw = calloc(1, sizeof(*cw));
	if (cw) {
		*cw = (struct check_walk){spd, plan, i, done, ctx, NULL, 0};
		if (check_walk_first(cw) == 1)
			return 0;
		free(cw);
	}
	return check_start(spd, plan, i, done, ctx);
}

/*
 * Find the first added line of a unified diff that holds a known secret
 * in any of its forms.  Writes "path:line" to where.  Returns 1 on a
 * hit, 0 when clean.
 */
static int diff_first_secret(const struct redact_set *set, const char *text,
			     char *where, size_t wlen)
{
	char file[1024] = "?";
	long line = 0;

	for (const char *p = text; *p;) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);

		if (n > 6 && strncmp(p, "+++ b/", 6) == 0) {
			snprintf(file, sizeof(file), "%.*s", (int)(n - 6),
				 p + 6);
		} else if (n > 2 && strncmp(p, "@@", 2) == 0) {
			const char *plus = memchr(p, '+', n);
			line = plus ? strtol(plus + 1, NULL, 10) : 0;
		} else if (n > 0 && p[0] == '+' && strncmp(p, "+++", 3) != 0) {
			if (redact_contains(set, p + 1, n - 1) == 1) {
				snprintf(where, wlen, "%s:%ld", file, line);
				return 1;
			}
			line++;
		} else if (n > 0 && p[0] == ' ') {
			line++;
		}
		p += n + (nl ? 1 : 0);
	}
	return 0;
}

/* What changed in a worktree, from its inotify watch (the checkpoint's
 * shortcut). */
static int changes_hook(void *data, const char *worktree, char ***ret,
			uint64_t *ret_since)
{
	struct spd *spd = data;
	int r;

	if (!spd->linkwatch)
		return 0;
	r = linkwatch_changes(spd->linkwatch, worktree, ret, ret_since);
	/* A watch being made will say, soon. */
	if (r == 0 && linkwatch_walking(spd->linkwatch, worktree))
		return -EAGAIN;
	return r;
}

/* An ended session's worktree, removed on the thread pool
 * (session_store_set_remover): its files are the loop's no longer. */
struct removal {
	char *path;
	int r;
};

static void removal_work(void *data)
{
	struct removal *rm = data;

	rm->r = session_remove_tree(rm->path);
}

static void removal_done(void *data)
{
	struct removal *rm = data;

	if (rm->r < 0)
		log_warn("%s: not removed (%s); spd tries again at its next "
			 "start",
			 rm->path, strerror(-rm->r));
	free(rm->path);
	free(rm);
}

static void remove_hook(void *data, char *path)
{
	struct spd *spd = data;
	struct removal *rm = calloc(1, sizeof(*rm));

	if (rm) {
		rm->path = path;
		pool_run(spd->loop, removal_work, removal_done, rm);
		return;
	}
	/* No memory for it: here, as before. */
	if (session_remove_tree(path) < 0)
		log_warn("%s: not removed; spd tries again at its next start",
			 path);
	free(path);
}

/* The session store's secret scan (session_store_set_scanner): the
 * redaction set in force, held by a reference of the scan's own, so
 * that a scan on the thread pool reads it whatever spd puts in force
 * meanwhile. */
static int scan_hook(void *held, const char *diff, char *where, size_t wlen)
{
	return diff_first_secret(held, diff, where, wlen);
}

static void *scan_hold(void *data)
{
	struct spd *spd = data;

	return redact_set_ref(spd->redact);
}

static void scan_release(void *held)
{
	redact_set_free(held);
}

/* A session's diff on the thread pool, and its scan for a secret. */
struct diff_guard {
	struct spd *spd;
	struct call *c;
	agent_diff_fn then;
	struct session_diff_job *j;
	struct redact_set *held; /* NULL: no scan */
	char id[SESSION_ID_LEN + 1];
	char *text;
	bool truncated;
	int r, hit;
	char where[1100];
};

static void guard_work(void *data)
{
	struct diff_guard *g = data;

	const char *text;

	session_diff_work(g->j);
	text = session_diff_text(g->j);
	g->hit = g->held && text ? diff_first_secret(g->held, text, g->where,
						     sizeof(g->where))
				 : 0;
}

static void guard_after(void *data)
{
	struct diff_guard *g = data;
	struct spd *spd = g->spd;
	struct call *c = g->c;

	g->r = session_diff_end(g->j, &g->text, &g->truncated);
	if (g->held)
		redact_set_free(g->held);
	if (!spd->sessions) {
		call_error(c, RPC_E_INTERNAL, NULL,
			   "spd is stopping: the session's diff was not read");
		free(g->text);
	} else if (g->r == 0 && g->hit == 1) {
		/* The value is never named; the place is. */
		session_end_attempt(spd->sessions, g->id, "SECRET-IN-DIFF",
				    g->where);
		call_error(c, RPC_E_SECRET_IN_DIFF,
			   json_pack("{s:s}", "where", g->where),
			   "%s adds a known secret value: the session's "
			   "attempt ended",
			   g->where);
		free(g->text);
	} else {
		g->then(c, g->r, g->text, g->truncated);
	}
	free(g);
}

void agent_diff_guard(struct spd *spd, struct call *c, const char *id,
		      agent_diff_fn then)
{
	struct diff_guard *g;
	int r;

	/* spd began stopping: its sessions are closed. */
	if (!spd->sessions) {
		then(c, -ESHUTDOWN, NULL, false);
		return;
	}
	g = calloc(1, sizeof(*g));
	r = g ? session_diff_begin(spd->sessions, id, &g->j) : -ENOMEM;
	if (r < 0) {
		free(g);
		then(c, r, NULL, false);
		return;
	}
	g->spd = spd;
	g->c = c;
	g->then = then;
	g->held = spd->redact ? redact_set_ref(spd->redact) : NULL;
	snprintf(g->id, sizeof(g->id), "%s", id);
	pool_run(spd->loop, guard_work, guard_after, g);
}

/* A merge's or an end's checkout of the branch, on the thread pool. */
struct plan_job {
	struct spd *spd;
	struct call *c;
	struct session_merge_job *j;
	agent_plan_fn then;
	void *data;
};

static void plan_work(void *data)
{
	struct plan_job *pj = data;

	session_merge_plan_work(pj->j);
}

static void plan_done(void *data)
{
	struct plan_job pj = *(struct plan_job *)data;
	struct session_verify_plan *plan = NULL;
	int r;

	free(data);
	r = session_merge_plan_end(pj.j, &plan);
	if (!pj.spd->sessions) {
		/* The checkout stays under state/merge until the next. */
		session_verify_plan_free(plan);
		pj.then(pj.c, -ESHUTDOWN, NULL, pj.data);
		return;
	}
	pj.then(pj.c, r, plan, pj.data);
}

void agent_merge_plan(struct spd *spd, struct call *c, const char *id,
		      agent_plan_fn then, void *data)
{
	struct plan_job *pj;
	int r;

	/* spd began stopping: its sessions are closed. */
	if (!spd->sessions) {
		then(c, -ESHUTDOWN, NULL, data);
		return;
	}
	pj = calloc(1, sizeof(*pj));
	r = pj ? session_merge_plan_begin(spd->sessions, id, &pj->j) : -ENOMEM;
	if (r < 0) {
		free(pj);
		then(c, r, NULL, data);
		return;
	}
	pj->spd = spd;
	pj->c = c;
	pj->then = then;
	pj->data = data;
	pool_run(spd->loop, plan_work, plan_done, pj);
}

/* A merge into the operator's branch, its checkout's part on the thread
 * pool. */
struct merging_job {
	struct call *c;
	struct session_merging *j;
	agent_merge_fn then;
	void *data;
};

static void merging_work(void *data)
{
	struct merging_job *mj = data;

	session_merge_work(mj->j);
}

static void merging_done(void *data)
{
	struct merging_job mj = *(struct merging_job *)data;
	json_t *res = NULL;
	int r;

	free(data);
	/* The branch moves even as spd stops: the files are there. */
	r = session_merge_end(mj.j, &res);
	mj.then(mj.c, r, res, mj.data);
}

void agent_merge(struct spd *spd, struct call *c, const char *id,
		 const char *into, bool squash, const char *expect_target,
		 const char *expect_tip, agent_merge_fn then, void *data)
{
	struct merging_job *mj;
	int r;

	/* spd began stopping: its sessions are closed. */
	if (!spd->sessions) {
		then(c, -ESHUTDOWN, NULL, data);
		return;
	}
	mj = calloc(1, sizeof(*mj));
	r = mj ? session_merge_begin(spd->sessions, id, into, squash,
				     expect_target, expect_tip, &mj->j)
	       : -ENOMEM;
	if (r < 0) {
		free(mj);
		then(c, r, NULL, data);
		return;
	}
	mj->c = c;
	mj->then = then;
	mj->data = data;
	pool_run(spd->loop, merging_work, merging_done, mj);
}

/* policy.check in a session: the session's workspace (resolved into the
 * caller's buffer) and mode. */
static int policy_lookup(struct spd *spd, const char *id,
			 struct policy_context *ret, char *ws, size_t ws_len)
{
	char path[PATH_MAX];
	struct session_info *i = NULL;

	if (!spd->sessions || session_get(spd->sessions, id, &i) < 0)
		return -ENOENT;
	if (!realpath(i->worktree, path) || strlen(path) >= ws_len) {
		session_info_free(i);
		return -ENOENT;
	}
	memcpy(ws, path, strlen(path) + 1);
	ret->workspace = ws;
	ret->in_place = i->mode == SESSION_MODE_IN_PLACE;
	ret->worktree_session = i->mode == SESSION_MODE_WORKTREE;
	ret->path_env = POLICY_DEFAULT_PATH;
	ret->writable = (const char *const *)spd->config.writable;
	session_info_free(i);
	return 0;
}

/* An ended attempt's asks are withdrawn: nobody may approve a call of
 * an attempt that can no longer run anything. */
static void on_attempt_ended(void *data, const char *id, const char *code)
{
	char why[96];

	snprintf(why, sizeof(why), "the session's attempt ended (%s)", code);
	gate_withdraw_session(data, id, why);
	broker_session_ended(data, id);
}

void agent_prime_recent(struct spd *spd)
{
	char **w = NULL;
	struct linkwatch *lw;

	if (!spd->sessions || !spd->loop ||
	    session_recent_workspaces(
		spd->sessions, (int64_t)time(NULL) - AGENT_PRIME_RECENT_S,
		AGENT_PRIME_MAX, &w) < 0)
		return;
	/* Those sessions' next runs need libgit2 (the guard, the agent's
	 * commits): started now, not in the first of them. */
	if (w[0] && session_git_warm(spd->sessions) < 0)
		log_warn("libgit2 did not start; the first run tries again");
	lw = linkwatch_get(&spd->linkwatch, spd->loop);
	/* Each walk's change log from when spd's index of the worktree was
	 * last written: the first checkpoint reads what changed since, not
	 * the whole worktree on the loop. */
	for (size_t i = 0; lw && w[i]; i++) {
		uint64_t since = session_worktree_known(spd->sessions, w[i]);

		if (since)
			linkwatch_prime_since(lw, w[i], since);
		else
			linkwatch_prime(lw, w[i]);
		session_checkpoint_warm(spd->sessions, w[i]);
	}
	strv_free_array(w);
}

/* The checkpoints waiting for their workspace's watch, tried again
 * every AGENT_DEFERRED_MS until none waits (one spd per process). */
#define AGENT_DEFERRED_MS 100
static uv_timer_t *deferred_timer;

static void deferred_take(void *data, const char *id, int64_t row,
			  const char *what)
{
	agent_checkpoint(data, id, row, what);
}

static void on_deferred(uv_timer_t *t)
{
	struct spd *spd = t->data;

	if (!spd->sessions ||
	    session_checkpoint_deferred(spd->sessions, deferred_take, spd) == 0)
		uv_timer_stop(t);
}

void agent_checkpoint_later(struct spd *spd)
{
	if (!spd->loop)
		return;
	if (!deferred_timer) {
		deferred_timer = calloc(1, sizeof(*deferred_timer));
		if (!deferred_timer)
			return;
		uv_timer_init(spd->loop, deferred_timer);
		deferred_timer->data = spd;
	}
	if (!uv_is_active((uv_handle_t *)deferred_timer))
		uv_timer_start(deferred_timer, on_deferred, AGENT_DEFERRED_MS,
			       AGENT_DEFERRED_MS);
}

static void on_deferred_closed(uv_handle_t *h)
{
	free(h);
}

int agent_start(struct spd *spd)
{
	int r = session_store_open(spd->paths.state_dir, &spd->sessions);

	if (r < 0)
		return r;
	session_store_set_journal(spd->sessions, journal_hook, spd);
	session_store_set_check_runner(spd->sessions, agent_check_runner, spd);
	session_store_set_ended_hook(spd->sessions, on_attempt_ended, spd);
	session_store_set_scanner(spd->sessions, scan_hook, scan_hold,
				  scan_release, spd);
	session_store_set_changes(spd->sessions, changes_hook, spd);
	session_store_set_remover(spd->sessions, remove_hook, spd);
	/* What an earlier spd put away and did not finish removing. */
	{
		char **left = session_removals_left(spd->sessions);

		for (size_t i = 0; left && left[i]; i++)
			remove_hook(spd, steal_ptr(left[i]));
		free(left);
	}
	session_store_set_identity(spd->sessions, spd->config.git_name,
				   spd->config.git_email);
	spd->session_auth = auth_hook;
	policy_set_session_lookup(policy_lookup);
	spd->run_prepare = run_prepare;
	agent_prime_recent(spd);
	return 0;
}

void agent_stop(struct spd *spd, void (*done)(void *data), void *data)
{
	struct session_store *s = spd->sessions;

	if (deferred_timer) {
		uv_close((uv_handle_t *)deferred_timer, on_deferred_closed);
		deferred_timer = NULL;
	}
	spd->sessions = NULL;
	spd->session_auth = NULL;
	spd->run_prepare = NULL;
	session_store_free_then(s, done, data);
}

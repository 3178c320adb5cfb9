/*
 * The session.* RPC methods over daemon/session.  The server already
 * refuses OPERATOR methods to agents; here an agent is further held to
 * its own session, and a session whose attempt ended is refused with
 * ATTEMPT-ENDED.
 */
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/transport/handlers.h"
#include "common/utf8.h"
#include "common/util.h"
#include "daemon/methods/agent.h"
#include "daemon/methods/m_session_priv.h"
#include "daemon/transport/call.h"
#include "daemon/session/linkwatch.h"
#include "daemon/session/labels.h"
#include "daemon/session/session.h"
#include "daemon/pool.h"
#include "daemon/spd.h"

struct session_store *ms_store(struct call *c)
{
	return call_spd(c)->sessions;
}

const char *ms_param(struct call *c, const char *name)
{
	return json_string_value(json_object_get(call_params(c), name));
}

void ms_fail(struct call *c, int r, const char *id)
{
	struct session_store *s = ms_store(c);

	ms_fail_why(c, r, id, s ? session_store_error(s) : "");
}

void ms_fail_why(struct call *c, int r, const char *id, const char *why)
{
	struct session_store *s = ms_store(c);

	if (!why)
		why = "";
	switch (r) {
	case -ENOENT:
		call_error(c, RPC_E_BAD_PARAMS, NULL, "%s",
			   why[0] ? why : "no such session");
		return;
	case -ECANCELED: {
		struct session_info *i = NULL;
		json_t *data = NULL;

		if (s && id && session_get(s, id, &i) == 0) {
			data =
			    json_pack("{s:s?, s:s?}", "finding",
				      i->finding_code, "path", i->finding_path);
			call_error(c, RPC_E_ATTEMPT_ENDED, data,
				   "session %s: the attempt ended (%s %s)", id,
				   i->finding_code ? i->finding_code : "",
				   i->finding_path ? i->finding_path : "");
			session_info_free(i);
			return;
		}
		call_error(c, RPC_E_ATTEMPT_ENDED, NULL,
			   "the session's attempt ended");
		return;
	}
	case -ESHUTDOWN:
		call_error(c, RPC_E_BAD_REQUEST, NULL, "%s",
			   why[0] ? why : "the session has ended");
		return;
	case -EINVAL:
	case -EBUSY:
	case -EEXIST:
	case -EALREADY:
	case -E2BIG:
		call_error(c, RPC_E_BAD_REQUEST, NULL, "%s",
			   why[0] ? why : strerror(-r));
		return;
	default:
		call_error(c, RPC_E_INTERNAL, NULL, "%s",
			   why[0] ? why : strerror(-r));
	}
}

bool ms_have_store(struct call *c)
{
	if (ms_store(c))
		return true;
	call_error(c, RPC_E_INTERNAL, NULL, "sessions are not available");
	return false;
}

/* A call waiting for its session's checkpoint (ms_after_checkpoint,
 * ms_guarded_after_checkpoint). */
struct ck_later {
	struct call *c;
	call_handler again;
	/* Or a call past its diff guard, its diff kept. */
	agent_diff_fn guarded;
	int r;
	char *text;
	bool truncated;
};

static void ck_later_go(void *data)
{
	struct ck_later l = *(struct ck_later *)data;

	free(data);
	if (l.guarded)
		l.guarded(l.c, l.r, l.text, l.truncated);
	else
		l.again(l.c);
}

static bool ck_later(struct call *c, const struct ck_later *what)
{
	const struct call_principal *who = call_principal(c);
	const char *id = who->operator? ms_param(c, "id") : who->session_id;
	struct ck_later *l;

	if (!id || !session_checkpoint_out(ms_store(c), id) ||
	    !(l = malloc(sizeof(*l))))
		return false;
	*l = *what;
	if (agent_after_checkpoint(call_spd(c), id, ck_later_go, l))
		return true;
	free(l);
	return false;
}

bool ms_after_checkpoint(struct call *c, call_handler again)
{
	return ck_later(c, &(struct ck_later){.c = c, .again = again});
}

bool ms_guarded_after_checkpoint(struct call *c, int r, char *text,
				 bool truncated, agent_diff_fn again)
{
	if (!ms_have_store(c)) {
		free(text);
		return true;
	}
	return ck_later(c, &(struct ck_later){.c = c,
					      .guarded = again,
					      .r = r,
					      .text = text,
					      .truncated = truncated});
}

const char *ms_target(struct call *c)
{
	const struct call_principal *who = call_principal(c);
	const char *id = ms_param(c, "id");

	if (!who->operator) {
		if (!who->session_id ||
		    (id && strcmp(id, who->session_id) != 0)) {
			call_error(c, RPC_E_UNAUTHORIZED, NULL,
				   "a session token acts in its own "
				   "session only");
			return NULL;
		}
		return who->session_id;
	}
	if (!id) {
		call_error(c, RPC_E_BAD_PARAMS, NULL,
			   "\"id\" is required with the operator token");
		return NULL;
	}
	return id;
}

json_t *ms_merge_command(const struct session_info *i)
{
	char *q = malloc(strlen(i->repo) * 4 + 3), *o = q, *cmd = NULL;
	json_t *j = NULL;

	if (!q)
		return NULL;
	*o++ = '\'';
	for (const char *p = i->repo; *p; p++) {
		if (*p == '\'') {
			memcpy(o, "'\\''", 4);
			o += 4;
		} else {
			*o++ = *p;
		}
	}
	*o++ = '\'';
	*o = '\0';
	if (asprintf(&cmd, "git -C %s merge %s", q, i->branch) >= 0)
		j = json_string(cmd);
	free(cmd);
	free(q);
	return j;
}

/* JSON strings must be UTF-8; a diff of a Latin-1 file is not.  Bytes of
 * an invalid text become '?' (the operator can run git diff for them). */
static json_t *text_json(char *text)
{
	if (!utf8_valid(text, strlen(text)))
		for (char *p = text; *p; p++)
			if ((unsigned char)*p >= 0x80)
				*p = '?';
	return json_string(text);
}

bool ms_sync_refused(struct call *c, const char *id)
{
	char where[1100];

	if (session_sync(ms_store(c), id, where, sizeof(where)) != -EACCES)
		return false;
	call_error(c, RPC_E_SECRET_IN_DIFF, json_pack("{s:s}", "where", where),
		   "%s adds a known secret value: the session's attempt ended",
		   where);
	return true;
}

/* A session.start in flight: its checkout and walks on the thread pool
 * (session_start_work), its two ends on the loop. */
struct start_job {
	struct call *c;
	struct session_start *st;
};

static void start_work(void *data)
{
	struct start_job *j = data;

	session_start_work(j->st);
}

static void start_reply(void *data)
{
	struct start_job *j = data;
	struct call *c = j->c;
	struct spd *spd = call_spd(c);
	char token[SESSION_TOKEN_LEN + 1];
	char id[SESSION_ID_LEN + 1];
	struct session_info *i = NULL;
	json_t *res;
	int r;

	r = session_start_end(j->st, &i, token);
	free(j);
	if (r == -ESHUTDOWN && !ms_store(c)) {
		call_error(c, RPC_E_INTERNAL, NULL,
			   "spd is stopping: the session was not started, "
			   "and what its start had made is removed");
		return;
	}
	if (r < 0) {
		ms_fail(c, r, NULL);
		return;
	}
	res = session_info_json(i);
	/* The token is shown here once; the store keeps only its hash and
	 * the summary never carries it. */
	json_object_set_new(res, "token", json_string(token));
	snprintf(id, sizeof(id), "%s", i->id);
	call_reply(c, res);
	/* The workspace's hard-link list (linkwatch.h) is walked now, on the
	 * thread pool, instead of at the agent's first command (the full
	 * walk in sandboxd then: 20-40 ms in a checkout of 10,000 files). */
	if (i->worktree && linkwatch_get(&spd->linkwatch, spd->loop))
		linkwatch_prime(spd->linkwatch, i->worktree);
	session_info_free(i);
	/* After the reply that shows it once has gone out. */
	agent_token_redact(spd, id, token);
	sodium_memzero(token, sizeof(token));
}

void m_session_start(struct call *c)
{
	json_t *p = call_params(c);
	const char *repo = ms_param(c, "repo");
	const char *feature = ms_param(c, "feature");
	bool in_place = json_is_true(json_object_get(p, "in_place"));
	struct start_job *j;
	int r;

	if (!ms_have_store(c))
		return;
	/* spd's working directory is not the client's. */
	if (!repo || repo[0] != '/') {
		call_error(c, RPC_E_BAD_PARAMS, NULL,
			   "\"repo\" must be an absolute path");
		return;
	}
	call_set_summary(c, "start %s in %s%s", feature ? feature : "",
			 repo ? repo : "", in_place ? " (in place)" : "");
	j = calloc(1, sizeof(*j));
	if (!j) {
		call_error(c, RPC_E_INTERNAL, NULL, "out of memory");
		return;
	}
	r = session_start_begin(ms_store(c), repo, feature, in_place, &j->st);
	if (r < 0) {
		free(j);
		ms_fail(c, r, NULL);
		return;
	}
	j->c = c;
	/* No thread to run it on: the start is made here. */
	pool_run(call_spd(c)->loop, start_work, start_reply, j);
}

void m_session_list(struct call *c)
{
	struct session_info **v = NULL;
	size_t n = 0;
	json_t *arr;
	int r;

	if (!ms_have_store(c))
		return;
	r = session_list(ms_store(c), &v, &n);
	if (r < 0) {
		ms_fail(c, r, NULL);
		return;
	}
	arr = json_array();
	for (size_t k = 0; k < n; k++)
		json_array_append_new(arr, session_info_json(v[k]));
	session_info_list_free(v, n);
	call_reply(c, json_pack("{s:o}", "sessions", arr));
}

void m_session_show(struct call *c)
{
	json_t *res;
	struct session_info *i = NULL;
	const char *id = ms_param(c, "id");
	int r;

	if (!ms_have_store(c))
		return;
	if (ms_after_checkpoint(c, m_session_show))
		return;
	r = session_get(ms_store(c), id, &i);
	if (r < 0) {
		ms_fail(c, r, id);
		return;
	}
	res = session_info_json(i);
	if (res)
		json_object_set_new(res, "labels",
				    session_labels_detail(ms_store(c), id));
	call_reply(c, res);
	session_info_free(i);
}

void m_session_status(struct call *c)
{
	const struct call_principal *who = call_principal(c);
	struct session_info *i = NULL;
	const char *id;
	json_t *res;
	int r;

	if (!ms_have_store(c) || !(id = ms_target(c)))
		return;
	if (ms_after_checkpoint(c, m_session_status))
		return;
	if (!who->operator) {
		r = session_usable(ms_store(c), id);
		if (r < 0) {
			ms_fail(c, r, id);
			return;
		}
	}
	r = session_get(ms_store(c), id, &i);
	if (r < 0) {
		ms_fail(c, r, id);
		return;
	}
	res = session_info_json(i);
	/* The branch's commits and what is not committed yet. */
	if (i->mode == SESSION_MODE_WORKTREE) {
		json_t *w = NULL;
		char where[1100];

		session_sync(ms_store(c), id, where, sizeof(where));
		if (session_work(ms_store(c), id, &w) == 0) {
			json_object_update(res, w);
			json_decref(w);
		}
	}
	/* An agent learns where it works, not where spd keeps things. */
	if (!who->operator) {
		json_object_del(res, "repo");
		json_object_del(res, "heldout");
	}
	session_info_free(i);
	call_reply(c, res);
}

/* A session.heldout in flight: its copy on the thread pool. */
struct seal_job {
	struct call *c;
	struct session_sealing *j;
};

static void seal_work(void *data)
{
	struct seal_job *sj = data;

	session_heldout_work(sj->j);
}

/* waited: the copy waited for a verification holding the earlier set
 * (the reply says so: the seal took that long). */
static void seal_reply(struct call *c, int r, bool waited)
{
	if (r < 0 && ms_store(c))
		ms_fail(c, r, ms_param(c, "id"));
	else if (r < 0)
		call_error(c, RPC_E_INTERNAL, NULL,
			   "spd is stopping: nothing was sealed");
	else
		call_reply(c,
			   json_pack("{s:s, s:i, s:b}", "id", ms_param(c, "id"),
				     "files", r, "waited", waited));
}

/* The copy waited for a verification holding the earlier set: the
 * answer once it is in place, or why not. */
static void seal_later(void *data, int r, const char *why)
{
	struct call *c = data;

	if (r < 0)
		ms_fail_why(c, r, ms_param(c, "id"), why);
	else
		seal_reply(c, r, true);
}

static void seal_done(void *data)
{
	struct seal_job sj = *(struct seal_job *)data;
	int r;

	free(data);
	r = session_heldout_end(sj.j, seal_later, sj.c);
	if (r != -EINPROGRESS)
		seal_reply(sj.c, r, false);
}

void m_session_heldout(struct call *c)
{
	const char *id = ms_param(c, "id");
	const char *dir = ms_param(c, "dir");
	struct seal_job *sj;
	int r;

	if (!ms_have_store(c) || ms_after_checkpoint(c, m_session_heldout))
		return;
	if (!dir || dir[0] != '/') {
		call_error(c, RPC_E_BAD_PARAMS, NULL,
			   "\"dir\" must be an absolute path");
		return;
	}
	call_set_summary(c, "seal held-out checks for %s", id);
	sj = calloc(1, sizeof(*sj));
	r = sj ? session_heldout_begin(ms_store(c), id, dir, &sj->j) : -ENOMEM;
	if (r < 0) {
		free(sj);
		ms_fail(c, r, id);
		return;
	}
	sj->c = c;
	pool_run(call_spd(c)->loop, seal_work, seal_done, sj);
}

static void diff_guarded(struct call *c, int r, char *text, bool truncated);

void m_session_diff(struct call *c)
{
	if (!ms_have_store(c))
		return;
	if (ms_after_checkpoint(c, m_session_diff))
		return;
	/* One read of the diff: the guard's scan, then the reply. */
	agent_diff_guard(call_spd(c), c, ms_param(c, "id"), diff_guarded);
}

static void diff_guarded(struct call *c, int r, char *text, bool truncated)
{
	const char *id = ms_param(c, "id");
	struct session_info *i = NULL;
	json_t *res;

	if (ms_guarded_after_checkpoint(c, r, text, truncated, diff_guarded))
		return;
	if (r < 0) {
		ms_fail(c, r, id);
		return;
	}
	if (ms_sync_refused(c, id)) {
		free(text);
		return;
	}
	if (session_get(ms_store(c), id, &i) < 0) {
		free(text);
		call_error(c, RPC_E_INTERNAL, NULL, "session vanished");
		return;
	}
	res = json_pack("{s:s, s:s, s:b, s:s?}", "id", id, "base", i->base,
			"truncated", truncated, "branch", i->branch);
	json_object_set_new(res, "diff", text_json(text));
	if (i->mode == SESSION_MODE_WORKTREE) {
		json_t *w = NULL;

		if (session_work(ms_store(c), id, &w) == 0) {
			json_object_update(res, w);
			json_decref(w);
		}
		char into[256];

		if (json_array_size(json_object_get(res, "commits")) > 0 &&
		    session_merged(ms_store(c), id, into, sizeof(into)) != 1)
			json_object_set_new(res, "merge", ms_merge_command(i));
	}
	free(text);
	session_info_free(i);
	call_reply(c, res);
}

/* ---- the loop's other half: the log of checkpoints, restore, merge ---- */

void m_session_log(struct call *c)
{
	const char *id = ms_param(c, "id");
	json_t *a;

	/* The checkpoint being read is listed, as it was when spd read it
	 * on the loop before answering anything else. */
	if (!ms_have_store(c) || ms_after_checkpoint(c, m_session_log))
		return;
	a = session_checkpoints(ms_store(c), id);
	if (!a) {
		ms_fail(c, -ENOENT, id);
		return;
	}
	call_reply(c, json_pack("{s:s, s:o, s:b}", "id", id, "checkpoints", a,
				"pending",
				session_checkpoint_pending(ms_store(c), id)));
}

/* agent_restore's answer. */
static void restored(struct call *c, int r, unsigned saved)
{
	if (r < 0 && ms_store(c))
		ms_fail(c, r, ms_param(c, "id"));
	else if (r < 0)
		call_error(c, RPC_E_INTERNAL, NULL,
			   "spd is stopping: nothing was restored");
	else
		call_reply(c,
			   json_pack("{s:s, s:O, s:i}", "id", ms_param(c, "id"),
				     "n", json_object_get(call_params(c), "n"),
				     "saved", (int)saved));
}

void m_session_restore(struct call *c)
{
	const char *id = ms_param(c, "id");
	json_int_t n = json_integer_value(json_object_get(call_params(c), "n"));

	if (!ms_have_store(c) || ms_after_checkpoint(c, m_session_restore))
		return;
	call_set_summary(c, "restore %s to checkpoint %lld", id, (long long)n);
	if (n < 1 || n > UINT32_MAX)
		call_error(c, RPC_E_BAD_PARAMS, NULL,
			   "\"n\" is a checkpoint number (1 and up)");
	else
		agent_restore(call_spd(c), c, id, (unsigned)n, restored);
}

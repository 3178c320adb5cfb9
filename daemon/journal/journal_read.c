/*
 * Reading the journal: queries and the chain's verification, on libuv's
 * thread pool over a read-only connection (journal_verify_path() also
 * runs alone, for spctl's offline check).  Part of the journal
 * (journal_priv.h); see journal.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <sqlite3.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "daemon/journal/journal.h"
#include "daemon/journal/journal_priv.h"

/* ---- reading: queries and verification ---- */

static int open_readonly(const char *path, sqlite3 **ret)
{
	sqlite3 *db = NULL;
	int r;

	if (access(path, F_OK) < 0)
		return -errno;
	r = jnl_sqlite_errno(sqlite3_open_v2(
	    path, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL));
	if (r < 0) {
		sqlite3_close(db);
		return r;
	}
	sqlite3_busy_timeout(db, BUSY_TIMEOUT_MS);
	*ret = db;
	return 0;
}

static char *column_dup(sqlite3_stmt *st, int col, bool never_null)
{
	const char *s = (const char *)sqlite3_column_text(st, col);

	if (!s)
		return never_null ? strdup("") : NULL;
	return strndup(s, (size_t)sqlite3_column_bytes(st, col));
}

static const char query_sql[] =
    "SELECT id, time, session, actor, kind, summary, detail, prev_hash, "
    "hash FROM events WHERE id > ?1 AND (?2 IS NULL OR kind = ?2) AND "
    "(?3 IS NULL OR session = ?3) ORDER BY id LIMIT ?4";
static const char tail_sql[] =
    "SELECT * FROM (SELECT id, time, session, actor, kind, summary, "
    "detail, prev_hash, hash FROM events WHERE (?2 IS NULL OR kind = ?2) "
    "AND (?3 IS NULL OR session = ?3) ORDER BY id DESC LIMIT ?4) "
    "ORDER BY id";

/* A session's rows through the index on (session, id) (schema 2): the
 * forms above, whose "?3 IS NULL OR" no index can serve, read every row. */
static const char session_query_sql[] =
    "SELECT id, time, session, actor, kind, summary, detail, prev_hash, "
    "hash FROM events WHERE session = ?3 AND id > ?1 AND (?2 IS NULL OR "
    "kind = ?2) ORDER BY id LIMIT ?4";
static const char session_tail_sql[] =
    "SELECT * FROM (SELECT id, time, session, actor, kind, summary, "
    "detail, prev_hash, hash FROM events WHERE session = ?3 AND (?2 IS "
    "NULL OR kind = ?2) ORDER BY id DESC LIMIT ?4) ORDER BY id";

static int run_query(sqlite3 *db, const struct journal_filter *f,
		     struct evvec *ret)
{
	sqlite3_stmt *st = NULL;
	struct evvec res = {0};
	int r, rc, limit = f->limit;
	const char *sql = f->since < 0 ? tail_sql : query_sql;

	if (f->session)
		sql = f->since < 0 ? session_tail_sql : session_query_sql;
	if (limit <= 0 || limit > JOURNAL_QUERY_LIMIT_MAX)
		limit = JOURNAL_QUERY_LIMIT_MAX;
	r = jnl_sqlite_errno(sqlite3_prepare_v2(db, sql, -1, &st, NULL));
	if (r < 0)
		goto out;
	sqlite3_bind_int64(st, 1, f->since);
	sqlite3_bind_text(st, 2, f->kind, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, f->session, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 4, limit);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct journal_event *e;

		r = jnl_evvec_reserve(&res, 1);
		if (r < 0)
			goto out;
		e = &res.v[res.n++];
		memset(e, 0, sizeof(*e));
		e->id = sqlite3_column_int64(st, 0);
		e->time_us = sqlite3_column_int64(st, 1);
		e->session = column_dup(st, 2, false);
		e->actor = column_dup(st, 3, false);
		e->kind = column_dup(st, 4, true);
		e->summary = column_dup(st, 5, true);
		e->detail = column_dup(st, 6, false);
		jnl_column_hash(st, 7, e->prev_hash);
		jnl_column_hash(st, 8, e->hash);
		if (!e->kind || !e->summary ||
		    (sqlite3_column_type(st, 2) != SQLITE_NULL &&
		     !e->session) ||
		    (sqlite3_column_type(st, 3) != SQLITE_NULL && !e->actor) ||
		    (sqlite3_column_type(st, 6) != SQLITE_NULL && !e->detail)) {
			r = -ENOMEM;
			goto out;
		}
	}
	r = jnl_sqlite_errno(rc);
	if (r < 0)
		goto out;
	*ret = res;
	memset(&res, 0, sizeof(res));
out:
	sqlite3_finalize(st);
	jnl_evvec_free(&res);
	return r;
}

static void verify_fail(struct journal_verify_result *r, const char *reason,
			int64_t id, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void verify_fail(struct journal_verify_result *r, const char *reason,
			int64_t id, const char *fmt, ...)
{
	va_list ap;

	r->ok = false;
	r->first_bad_id = id;
	snprintf(r->reason, sizeof(r->reason), "%s", reason);
	va_start(ap, fmt);
	vsnprintf(r->detail, sizeof(r->detail), fmt, ap);
	va_end(ap);
}

/* The id of another row whose hash is hash, or 0. */
static int64_t find_hash(sqlite3 *db, const char *hash, int64_t not_id)
{
	sqlite3_stmt *st = NULL;
	int64_t id = 0;

	if (sqlite3_prepare_v2(db,
			       "SELECT id FROM events WHERE hash = ? AND id != "
			       "? ORDER BY id LIMIT 1",
			       -1, &st, NULL) != SQLITE_OK)
		return 0;
	sqlite3_bind_text(st, 1, hash, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, not_id);
	if (sqlite3_step(st) == SQLITE_ROW)
		id = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return id;
}

/* The prev_hash of the row after id, into out ("" when there is none). */
static void next_prev_hash(sqlite3 *db, int64_t id, char out[HASH_HEX + 1])
{
	sqlite3_stmt *st = NULL;

	out[0] = '\0';
	if (sqlite3_prepare_v2(db,
			       "SELECT prev_hash FROM events WHERE id > ? "
			       "ORDER BY id LIMIT 1",
			       -1, &st, NULL) != SQLITE_OK)
		return;
	sqlite3_bind_int64(st, 1, id);
	if (sqlite3_step(st) == SQLITE_ROW)
		jnl_column_hash(st, 0, out);
	sqlite3_finalize(st);
}

/*
 * Walk the chain in id order.  Each row must carry the next id, link to
 * the previous row's hash and hash to its stored hash.  When a check
 * fails, the rows around say what most likely happened, so the reason
 * names the act (deleted, inserted, reordered, edited), not just the
 * symptom.  The head file is read before the snapshot starts: the writer
 * records a head only after its rows are committed, so the snapshot
 * always holds the head's row.
 */
/*
 * Row v (id) links to a hash other than the row before it: say what was
 * done to the chain -- a row inserted before it, rows reordered, one
 * deleted and the rest renumbered, the row before it rewritten -- from
 * where its link and its own hash lead.
 */
static void diagnose_link(sqlite3 *db, const struct row_view *v,
			  const char *prev, const char *pprev, int64_t prev_id,
			  const char *computed, const char *stored,
			  struct journal_verify_result *r)
{
	char shifted[HASH_HEX + 1];
	int64_t id = v->id, x;

	jnl_row_hash(v, id + 1, shifted);
	if (prev_id > 0 && strcmp(prev, pprev) == 0)
		verify_fail(r, "inserted", prev_id,
			    "row %" PRId64 " was inserted: row %" PRId64
			    " links to the row before it",
			    prev_id, id);
	else if ((x = find_hash(db, prev, id)) > 0)
		verify_fail(r, "reordered", id,
			    "row %" PRId64 " follows row %" PRId64
			    " in the chain, not row %" PRId64,
			    id, x, id - 1);
	else if (strcmp(shifted, stored) == 0)
		verify_fail(r, "deleted", id,
			    "row %" PRId64 " was deleted and the rows after "
			    "it renumbered",
			    id);
	else if (prev_id > 0 && strcmp(computed, stored) == 0)
		verify_fail(r, "edited", prev_id,
			    "row %" PRId64 " was rewritten: row %" PRId64
			    " links to another hash",
			    prev_id, id);
	else if (prev_id == 0)
		verify_fail(r, "edited", id,
			    "row %" PRId64 " does not start from the zero hash",
			    id);
	else
		verify_fail(r, "inserted", id,
			    "row %" PRId64 " links to no row of the journal",
			    id);
}

/* Row id's content does not match its hash: edited, or inserted when the
 * row after it links past it. */
static void diagnose_hash(sqlite3 *db, int64_t id, const char *prev,
			  struct journal_verify_result *r)
{
	char next[HASH_HEX + 1];

	next_prev_hash(db, id, next);
	if (next[0] && strcmp(next, prev) == 0)
		verify_fail(r, "inserted", id,
			    "row %" PRId64 " was inserted: the row after it "
			    "links to row %" PRId64,
			    id, id - 1);
	else
		verify_fail(r, "edited", id,
			    "row %" PRId64 " does not match its hash", id);
}

static int verify_db(sqlite3 *db, const char *head_path,
		     struct journal_verify_result *res)
{
	sqlite3_stmt *st = NULL;
	struct journal_verify_result r = {.ok = true};
	char expect_prev[HASH_HEX + 1], pprev[HASH_HEX + 1];
	char head_hash[HASH_HEX + 1], head_seen[HASH_HEX + 1] = "";
	int64_t head_id = 0, expect_id = 1, prev_id = 0;
	int hr, rc, e;

	hr = jnl_head_read(head_path, &head_id, head_hash);
	if (hr < 0 && hr != -ENOENT && hr != -SPD_ECORRUPT)
		return hr;
	memcpy(expect_prev, jnl_zero_hash, sizeof(jnl_zero_hash));
	memcpy(pprev, jnl_zero_hash, sizeof(jnl_zero_hash));

	e = jnl_exec(db, "BEGIN");
	if (e < 0)
		return e;
	if (sqlite3_prepare_v2(db,
			       "SELECT id, time, session, actor, kind, "
			       "summary, detail, prev_hash, hash FROM events "
			       "ORDER BY id",
			       -1, &st, NULL) != SQLITE_OK) {
		verify_fail(&r, "unreadable", 0, "%s", sqlite3_errmsg(db));
		goto out;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct row_view v;
		char stored[HASH_HEX + 1], prev[HASH_HEX + 1];
		char computed[HASH_HEX + 1];
		int64_t id = sqlite3_column_int64(st, 0);

		v.id = id;
		v.time_us = sqlite3_column_int64(st, 1);
		for (int i = 0; i < F_COUNT; i++) {
			v.text[i] =
			    (const char *)sqlite3_column_text(st, 2 + i);
			v.len[i] = (size_t)sqlite3_column_bytes(st, 2 + i);
		}
		jnl_column_hash(st, 7, prev);
		jnl_column_hash(st, 8, stored);
		jnl_row_hash(&v, id, computed);

		if (id < expect_id) {
			verify_fail(&r, "inserted", id,
				    "row %" PRId64
				    " lies before the chain's first row 1",
				    id);
			goto out;
		}
		if (id > expect_id) {
			if (id == expect_id + 1)
				verify_fail(&r, "deleted", expect_id,
					    "row %" PRId64 " is missing",
					    expect_id);
			else
				verify_fail(&r, "deleted", expect_id,
					    "rows %" PRId64 " to %" PRId64
					    " are missing",
					    expect_id, id - 1);
			goto out;
		}
		if (strcmp(prev, expect_prev) != 0) {
			diagnose_link(db, &v, prev, pprev, prev_id, computed,
				      stored, &r);
			goto out;
		}
		if (strcmp(computed, stored) != 0) {
			diagnose_hash(db, id, prev, &r);
			goto out;
		}
		if (id == head_id)
			memcpy(head_seen, stored, sizeof(head_seen));
		memcpy(pprev, expect_prev, sizeof(pprev));
		memcpy(expect_prev, stored, sizeof(expect_prev));
		prev_id = id;
		expect_id++;
		r.checked++;
	}
	if (rc != SQLITE_DONE) {
		verify_fail(&r, "unreadable", expect_id, "%s",
			    sqlite3_errmsg(db));
		goto out;
	}
	if (hr == -ENOENT) {
		if (r.checked > 0)
			verify_fail(&r, "head-missing", 0,
				    "the head file is missing, so a "
				    "truncation cannot be ruled out");
		goto out;
	}
	if (hr < 0) {
		verify_fail(&r, "head-missing", 0,
			    "the head file is unreadable");
		goto out;
	}
	if (head_id > prev_id) {
		verify_fail(&r, "truncated", prev_id + 1,
			    "the chain ends at row %" PRId64 " but row %" PRId64
			    " was recorded",
			    prev_id, head_id);
		goto out;
	}
	if (head_id > 0 && strcmp(head_seen, head_hash) != 0)
		verify_fail(&r, "edited", head_id,
			    "row %" PRId64
			    " differs from the recorded head: the chain was "
			    "rewritten from there",
			    head_id);
out:
	sqlite3_finalize(st);
	jnl_exec(db, "COMMIT");
	*res = r;
	return 0;
}

int journal_verify_path(const char *path, struct journal_verify_result *ret)
{
	_cleanup_free_ char *head = NULL;
	sqlite3 *db = NULL;
	int r;

	if (sodium_init() < 0)
		return -EIO;
	head = jnl_path_suffix(path, ".head");
	if (!head)
		return -ENOMEM;
	r = open_readonly(path, &db);
	if (r < 0)
		return r;
	r = verify_db(db, head, ret);
	sqlite3_close(db);
	return r;
}

/* The hash of row id into out: 0, or -SPD_ECORRUPT when it is gone. */
static int row_hash(sqlite3 *db, int64_t id, char out[HASH_HEX + 1])
{
	sqlite3_stmt *st = NULL;
	int r = jnl_sqlite_errno(sqlite3_prepare_v2(
	    db, "SELECT hash FROM events WHERE id = ?", -1, &st, NULL));

	if (r < 0)
		return r;
	sqlite3_bind_int64(st, 1, id);
	if (sqlite3_step(st) == SQLITE_ROW)
		jnl_column_hash(st, 0, out);
	else
		r = -SPD_ECORRUPT;
	sqlite3_finalize(st);
	return r < 0 || out[0] ? r : -SPD_ECORRUPT;
}

/* A session's span, in one read transaction (the count and both ends
 * from the same snapshot). */
static int run_span(sqlite3 *db, const char *session, struct journal_span *ret)
{
	sqlite3_stmt *st = NULL;
	struct journal_span s = {0};
	int r;

	r = jnl_exec(db, "BEGIN");
	if (r < 0)
		return r;
	r = jnl_sqlite_errno(sqlite3_prepare_v2(
	    db,
	    "SELECT count(*), min(id), max(id) FROM events WHERE session = ?",
	    -1, &st, NULL));
	if (r < 0)
		goto out;
	sqlite3_bind_text(st, 1, session, -1, SQLITE_STATIC);
	if (sqlite3_step(st) != SQLITE_ROW) {
		r = -EIO;
		goto out;
	}
	s.rows = sqlite3_column_int64(st, 0);
	s.first_id = sqlite3_column_int64(st, 1);
	s.last_id = sqlite3_column_int64(st, 2);
	if (s.rows > 0) {
		r = row_hash(db, s.first_id, s.first_hash);
		if (r == 0)
			r = row_hash(db, s.last_id, s.last_hash);
		if (r < 0)
			goto out;
	}
	*ret = s;
	r = 0;
out:
	sqlite3_finalize(st);
	jnl_exec(db, "COMMIT");
	return r;
}

enum work_kind { WORK_QUERY, WORK_VERIFY, WORK_SPAN };

struct work {
	uv_work_t req;
	struct journal *j;
	enum work_kind kind;
	struct journal_filter filter;
	char *kind_filter, *session_filter;
	journal_query_cb query_cb;
	journal_verify_cb verify_cb;
	journal_span_cb span_cb;
	struct journal_span span;
	void *data;
	int err;
	struct evvec res;
	struct journal_verify_result vr;
	int64_t target; /* the last row appended when it was asked */
};

/* A reader sees every row appended before it asked: the writer commits
 * them now instead of at the end of its group window (journal.h), and
 * the reader waits for that commit, unless the writer is stalled, fails
 * again, stops, or READ_WAIT_MS pass (the reader then reads what there
 * is, as before: a stalled journal still answers queries). */
static void wait_committed(struct journal *j, int64_t target)
{
	struct timespec now, deadline;
	uint64_t failures;

	clock_gettime(CLOCK_MONOTONIC, &now);
	deadline = jnl_mono_after(&now, READ_WAIT_MS);
	pthread_mutex_lock(&j->mu);
	failures = j->failures;
	while (j->committed_id < target && !j->stalled &&
	       j->failures == failures && !j->writer_exited)
		if (pthread_cond_timedwait(&j->progress, &j->mu, &deadline) ==
		    ETIMEDOUT)
			break;
	pthread_mutex_unlock(&j->mu);
}

static void work_run(uv_work_t *req)
{
	struct work *w = req->data;
	struct journal *j = w->j;

	wait_committed(j, w->target);
	if (w->kind == WORK_VERIFY) {
		w->err = journal_verify_path(j->path, &w->vr);
		return;
	}
	pthread_mutex_lock(&j->read_mu);
	if (!j->rdb)
		w->err = open_readonly(j->path, &j->rdb);
	if (w->err == 0 && w->kind == WORK_SPAN)
		w->err = run_span(j->rdb, w->session_filter, &w->span);
	else if (w->err == 0)
		w->err = run_query(j->rdb, &w->filter, &w->res);
	pthread_mutex_unlock(&j->read_mu);
}

static void work_done(uv_work_t *req, int status)
{
	struct work *w = req->data;
	struct journal *j = w->j;

	if (status < 0 && w->err == 0)
		w->err = status;
	if (w->kind == WORK_SPAN) {
		w->span_cb(w->data, w->err, w->err ? NULL : &w->span);
	} else if (w->kind == WORK_QUERY) {
		w->query_cb(w->data, w->err, w->err ? NULL : w->res.v,
			    w->err ? 0 : w->res.n);
	} else {
		if (w->err < 0)
			verify_fail(
			    &w->vr, "unreadable", 0,
			    "cannot read the journal: %s",
			    strerror(-w->err < SPD_EFIRST ? -w->err : EIO));
		w->verify_cb(w->data, &w->vr);
	}
	jnl_evvec_free(&w->res);
	free(w->kind_filter);
	free(w->session_filter);
	free(w);
	j->works--;
	jnl_maybe_finish_close(j);
}

static int work_queue(struct journal *j, struct work *w)
{
	int r;

	w->req.data = w;
	w->j = j;
	pthread_mutex_lock(&j->mu);
	w->target = j->last_id;
	if (w->target > j->commit_target) {
		j->commit_target = w->target;
		pthread_cond_signal(&j->wake);
	}
	pthread_mutex_unlock(&j->mu);
	r = uv_queue_work(j->loop, &w->req, work_run, work_done);
	if (r < 0)
		return r;
	j->works++;
	return 0;
}

int journal_query(struct journal *j, const struct journal_filter *f,
		  journal_query_cb cb, void *data)
{
	struct work *w;
	int r;

	if (j->closing)
		return -ESHUTDOWN;
	if (!f || !cb)
		return -EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->kind = WORK_QUERY;
	w->filter = *f;
	w->query_cb = cb;
	w->data = data;
	if ((f->kind && !(w->kind_filter = strdup(f->kind))) ||
	    (f->session && !(w->session_filter = strdup(f->session)))) {
		r = -ENOMEM;
		goto fail;
	}
	w->filter.kind = w->kind_filter;
	w->filter.session = w->session_filter;
	r = work_queue(j, w);
	if (r < 0)
		goto fail;
	return 0;
fail:
	free(w->kind_filter);
	free(w->session_filter);
	free(w);
	return r;
}

int journal_verify(struct journal *j, journal_verify_cb cb, void *data)
{
	struct work *w;
	int r;

	if (j->closing)
		return -ESHUTDOWN;
	if (!cb)
		return -EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->kind = WORK_VERIFY;
	w->verify_cb = cb;
	w->data = data;
	r = work_queue(j, w);
	if (r < 0)
		free(w);
	return r;
}

int journal_session_span(struct journal *j, const char *session,
			 journal_span_cb cb, void *data)
{
	struct work *w;
	int r;

	if (j->closing)
		return -ESHUTDOWN;
	if (!session || !cb)
		return -EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->kind = WORK_SPAN;
	w->span_cb = cb;
	w->data = data;
	if (!(w->session_filter = strdup(session))) {
		free(w);
		return -ENOMEM;
	}
	r = work_queue(j, w);
	if (r < 0) {
		free(w->session_filter);
		free(w);
	}
	return r;
}

/*
 * Sessions, the store: the records in sessions.db and in memory, loading
 * them at start-up (each active session's guard rebuilt and compared),
 * the hooks, tokens, queries, and what happens after every command (its
 * record, the guard's check, the notes that end an attempt).  The other
 * parts of the session module are session_worktree.c (start and end),
 * session_inplace.c, session_heldout.c, session_verify.c and
 * session_diff.c; what they share is session_priv.h.  See session.h.
 */
#include <errno.h>
#include <git2.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/strv.h"
#include "common/paths.h"
#include "common/util.h"
#include "daemon/journal/journal.h"
#include "daemon/session/session.h"
#include "daemon/session/labels.h"
#include "daemon/session/session_priv.h"

/* How long SQLite waits for a lock held by another connection (a second
 * spd is refused elsewhere; this only rides out a checkpoint). */
#define SESSION_DB_BUSY_MS 2000

int sess_git_up(struct session_store *s)
{
	if (s->git_ready)
		return 0;
	if (git_libgit2_init() < 0)
		return -EIO;
	s->git_ready = true;
	return 0;
}

int session_git_warm(struct session_store *s)
{
	return sess_git_up(s);
}

/* Where this thread's sess_seterr writes instead of the store's text:
 * set by a start's half on a worker thread (session_start_work). */
static __thread char *err_to;
static __thread size_t err_to_len;

void sess_seterr_to(char *buf, size_t len)
{
	err_to = buf;
	err_to_len = len;
	if (buf && len)
		buf[0] = '\0';
}

void sess_seterr(struct session_store *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (err_to)
		vsnprintf(err_to, err_to_len, fmt, ap);
	else
		vsnprintf(s->err, sizeof(s->err), fmt, ap);
	va_end(ap);
}

int sess_private_dir(struct session_store *s, const char *dir)
{
	char why[PATH_MAX * 2 + 128];
	int r = paths_ensure_private_dir(dir);

	if (r < 0)
		sess_seterr(s, "%s",
			    paths_private_dir_why(dir, r, why, sizeof(why)));
	return r;
}

const char *sess_git_msg(void)
{
	const git_error *e = git_error_last();

	return e && e->message ? e->message : "unknown libgit2 error";
}

/* Events kept before the store has a journal: the store opens before
 * spd's journal hook is set, and what the opening finds (a session's
 * inputs changed while spd was not running) must reach the journal. */
#define SESS_EARLY_MAX 256

static void early_free(struct sess_early *e)
{
	free(e->id);
	free(e->kind);
	free(e->summary);
	free(e->detail);
	free(e);
}

static void early_keep(struct session_store *s, const char *id,
		       const char *kind, const char *summary,
		       const char *detail)
{
	struct sess_early *e;

	if (s->nearly >= SESS_EARLY_MAX || !(e = calloc(1, sizeof(*e))))
		return;
	e->id = id ? strdup(id) : NULL;
	e->kind = strdup(kind);
	e->summary = strdup(summary);
	e->detail = detail ? strdup(detail) : NULL;
	if ((id && !e->id) || !e->kind || !e->summary ||
	    (detail && !e->detail)) {
		early_free(e);
		return;
	}
	if (!s->early_tail)
		s->early_tail = &s->early;
	*s->early_tail = e;
	s->early_tail = &e->next;
	s->nearly++;
}

void sess_journal(struct session_store *s, const char *id, const char *kind,
		  json_t *detail, const char *fmt, ...)
{
	char summary[512];
	char *text = NULL;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(summary, sizeof(summary), fmt, ap);
	va_end(ap);
	if (detail)
		text = json_dumps(detail, JSON_COMPACT | JSON_SORT_KEYS);
	if (s->jfn)
		s->jfn(s->jdata, id, kind, summary, text);
	else
		early_keep(s, id, kind, summary, text);
	free(text);
	json_decref(detail);
}

/* ---- records ---- */

static void info_clear(struct session_info *i)
{
	free(i->repo);
	free(i->gitdir);
	free(i->feature);
	free(i->worktree);
	free(i->branch);
	free(i->finding_code);
	free(i->finding_path);
	memset(i, 0, sizeof(*i));
}

void session_info_free(struct session_info *i)
{
	if (!i)
		return;
	info_clear(i);
	free(i);
}

void session_info_list_free(struct session_info **v, size_t n)
{
	if (!v)
		return;
	for (size_t i = 0; i < n; i++)
		session_info_free(v[i]);
	free(v);
}

static char *dup_or_null(const char *p, bool *fail)
{
	char *r;

	if (!p)
		return NULL;
	r = strdup(p);
	if (!r)
		*fail = true;
	return r;
}

struct session_info *sess_info_copy(const struct session_info *src)
{
	struct session_info *i = malloc(sizeof(*i));
	bool fail = false;

	if (!i)
		return NULL;
	*i = *src;
	i->repo = dup_or_null(src->repo, &fail);
	i->gitdir = dup_or_null(src->gitdir, &fail);
	i->feature = dup_or_null(src->feature, &fail);
	i->worktree = dup_or_null(src->worktree, &fail);
	i->branch = dup_or_null(src->branch, &fail);
	i->finding_code = dup_or_null(src->finding_code, &fail);
	i->finding_path = dup_or_null(src->finding_path, &fail);
	if (fail) {
		session_info_free(i);
		return NULL;
	}
	return i;
}

const char *sess_mode_name(enum session_mode m)
{
	return m == SESSION_MODE_IN_PLACE ? "in-place" : "worktree";
}

static const char *state_name(enum session_state st)
{
	switch (st) {
	case SESSION_ACTIVE:
		return "active";
	case SESSION_ENDED:
		return "ended";
	case SESSION_ATTEMPT_ENDED:
		return "attempt-ended";
	}
	return "unknown";
}

json_t *session_info_json(const struct session_info *i)
{
	json_t *o = json_pack(
	    "{s:s, s:s?, s:s?, s:s, s:s?, s:s?, s:s, s:s, s:I, s:I, s:i, "
	    "s:i, s:i, s:b}",
	    "id", i->id, "repo", i->repo, "feature", i->feature, "mode",
	    sess_mode_name(i->mode), "worktree", i->worktree, "branch",
	    i->branch, "base", i->base, "state", state_name(i->state),
	    "created", (json_int_t)i->created, "ended", (json_int_t)i->ended,
	    "policy_blocks", (int)i->policy_blocks, "outside_changes",
	    (int)i->outside_changes, "commands", (int)i->commands, "heldout",
	    i->heldout);

	if (o && i->finding_code)
		json_object_set_new(o, "finding",
				    json_pack("{s:s, s:s?}", "code",
					      i->finding_code, "path",
					      i->finding_path));
	return o;
}

/* ---- the database ---- */

static int db_exec(struct session_store *s, const char *sql)
{
	char *msg = NULL;

	if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		sess_seterr(s, "sessions.db: %s", msg ? msg : "error");
		sqlite3_free(msg);
		return -EIO;
	}
	return 0;
}

void sess_bind_text(sqlite3_stmt *st, int i, const char *v)
{
	if (v)
		sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, i);
}

static int db_step_done(struct session_store *s, sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);

	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		sess_seterr(s, "sessions.db: %s", sqlite3_errmsg(s->db));
		return -EIO;
	}
	return 0;
}

int sess_db_insert(struct session_store *s, const struct sess *x)
{
	const struct session_info *i = &x->info;
	sqlite3_stmt *st = NULL;

	if (sqlite3_prepare_v2(
		s->db,
		"INSERT INTO sessions(id, repo, gitdir, feature, mode, "
		"worktree, branch, base, state, token_hash, created) "
		"VALUES(?,?,?,?,?,?,?,?,?,?,?)",
		-1, &st, NULL) != SQLITE_OK) {
		sess_seterr(s, "sessions.db: %s", sqlite3_errmsg(s->db));
		return -EIO;
	}
	sess_bind_text(st, 1, i->id);
	sess_bind_text(st, 2, i->repo);
	sess_bind_text(st, 3, i->gitdir);
	sess_bind_text(st, 4, i->feature);
	sqlite3_bind_int(st, 5, (int)i->mode);
	sess_bind_text(st, 6, i->worktree);
	sess_bind_text(st, 7, i->branch);
	sess_bind_text(st, 8, i->base);
	sqlite3_bind_int(st, 9, (int)i->state);
	sqlite3_bind_blob(st, 10, x->token_hash, sizeof(x->token_hash),
			  SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 11, i->created);
	return db_step_done(s, st);
}

/* Write the mutable fields of a session (and the guard digest). */
int sess_db_update(struct session_store *s, const struct sess *x)
{
	const struct session_info *i = &x->info;
	uint8_t digest[GUARD_DIGEST_LEN];
	sqlite3_stmt *st = NULL;

	if (sqlite3_prepare_v2(s->db,
			       "UPDATE sessions SET state=?, finding_code=?, "
			       "finding_path=?, ended=?, policy_blocks=?, "
			       "outside_changes=?, commands=?, heldout=?, "
			       "guard_digest=? WHERE id=?",
			       -1, &st, NULL) != SQLITE_OK) {
		sess_seterr(s, "sessions.db: %s", sqlite3_errmsg(s->db));
		return -EIO;
	}
	sqlite3_bind_int(st, 1, (int)i->state);
	sess_bind_text(st, 2, i->finding_code);
	sess_bind_text(st, 3, i->finding_path);
	sqlite3_bind_int64(st, 4, i->ended);
	sqlite3_bind_int(st, 5, (int)i->policy_blocks);
	sqlite3_bind_int(st, 6, (int)i->outside_changes);
	sqlite3_bind_int(st, 7, (int)i->commands);
	sqlite3_bind_int(st, 8, i->heldout);
	if (x->guard) {
		guard_digest(x->guard, digest);
		sqlite3_bind_blob(st, 9, digest, sizeof(digest),
				  SQLITE_TRANSIENT);
	} else {
		sqlite3_bind_null(st, 9);
	}
	sess_bind_text(st, 10, i->id);
	return db_step_done(s, st);
}

static const char *col_text(sqlite3_stmt *st, int i)
{
	return (const char *)sqlite3_column_text(st, i);
}

void sess_free(struct sess *x)
{
	if (!x)
		return;
	strv_free_array(x->empty_files);
	strv_free_array(x->ign_start);
	free(x->empty_ids);
	free(x->start_ids);
	sess_ign_free(x->ign);
	sess_ign_once_drop(x);
	guard_free(x->guard);
	sess_work_close(NULL, x);
	free(x->ck_patch);
	sess_prov_free(x->prov);
	sess_heldout_free(x);
	info_clear(&x->info);
	sodium_memzero(x->token_hash, sizeof(x->token_hash));
	free(x);
}

struct sess *sess_find(struct session_store *s, const char *id)
{
	if (!id)
		return NULL;
	for (struct sess *x = s->list; x; x = x->next)
		if (strcmp(x->info.id, id) == 0)
			return x;
	return NULL;
}

/* End the attempt: record the finding, drop the guard, journal it. */
static void attempt_end(struct session_store *s, struct sess *x,
			const char *code, const char *path, const char *what)
{
	free(x->info.finding_code);
	free(x->info.finding_path);
	x->info.finding_code = strdup(code);
	x->info.finding_path = strdup(path);
	x->info.state = SESSION_ATTEMPT_ENDED;
	sess_db_update(s, x);
	guard_free(x->guard);
	x->guard = NULL;
	sess_ign_free(x->ign);
	x->ign = NULL;
	sess_ign_once_drop(x);
	sess_journal(s, x->info.id, "session.finding",
		     json_pack("{s:s, s:s, s:s}", "code", code, "path", path,
			       "what", what ? what : "changed"),
		     "%s: %s %s; the attempt is ended", code, path,
		     what ? what : "changed");
	if (s->ended)
		s->ended(s->ended_data, x->info.id, code);
}

static int load(struct session_store *s)
{
	sqlite3_stmt *st = NULL;
	struct sess *tail = NULL;
	int rc, r = 0;

	if (sqlite3_prepare_v2(
		s->db,
		"SELECT id, repo, gitdir, feature, mode, worktree, branch, "
		"base, state, finding_code, finding_path, token_hash, "
		"created, ended, policy_blocks, outside_changes, commands, "
		"heldout, guard_digest FROM sessions ORDER BY created DESC, "
		"rowid DESC",
		-1, &st, NULL) != SQLITE_OK) {
		sess_seterr(s, "sessions.db: %s", sqlite3_errmsg(s->db));
		return -EIO;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct sess *x = calloc(1, sizeof(*x));
		struct session_info *i;
		bool fail = false;

		if (!x) {
			r = -ENOMEM;
			break;
		}
		i = &x->info;
		snprintf(i->id, sizeof(i->id), "%s", col_text(st, 0));
		i->repo = dup_or_null(col_text(st, 1), &fail);
		i->gitdir = dup_or_null(col_text(st, 2), &fail);
		i->feature = dup_or_null(col_text(st, 3), &fail);
		i->mode = (enum session_mode)sqlite3_column_int(st, 4);
		i->worktree = dup_or_null(col_text(st, 5), &fail);
		i->branch = dup_or_null(col_text(st, 6), &fail);
		snprintf(i->base, sizeof(i->base), "%s",
			 col_text(st, 7) ? col_text(st, 7) : "");
		i->state = (enum session_state)sqlite3_column_int(st, 8);
		i->finding_code = dup_or_null(col_text(st, 9), &fail);
		i->finding_path = dup_or_null(col_text(st, 10), &fail);
		if (sqlite3_column_bytes(st, 11) == sizeof(x->token_hash))
			memcpy(x->token_hash, sqlite3_column_blob(st, 11),
			       sizeof(x->token_hash));
		i->created = sqlite3_column_int64(st, 12);
		i->ended = sqlite3_column_int64(st, 13);
		i->policy_blocks = (unsigned)sqlite3_column_int(st, 14);
		i->outside_changes = (unsigned)sqlite3_column_int(st, 15);
		i->commands = (unsigned)sqlite3_column_int(st, 16);
		i->heldout = sqlite3_column_int(st, 17) != 0;
		if (fail) {
			sess_free(x);
			r = -ENOMEM;
			break;
		}
		if (tail)
			tail->next = x;
		else
			s->list = x;
		tail = x;
		if (i->state != SESSION_ACTIVE)
			continue;
		/* Rebuild the guard, and compare with what it was. */
		uint8_t now[GUARD_DIGEST_LEN];
		bool had = sqlite3_column_bytes(st, 18) == GUARD_DIGEST_LEN;
		uint8_t was[GUARD_DIGEST_LEN];

		if (had)
			memcpy(was, sqlite3_column_blob(st, 18), sizeof(was));
		/* In place, what was ignored at the start comes from its
		 * record, not from .gitignore files the agent could have
		 * changed since; a session started before the record
		 * existed is walked again and recorded now. */
		if (i->mode == SESSION_MODE_IN_PLACE) {
			int k = sess_inplace_load(s, x);

			if (k == -ENOENT)
				k = sess_find_secrets(s, x) < 0
					? -EIO
					: sess_inplace_record(s, x);
			if (k < 0) {
				attempt_end(s, x, "INTEGRITY", i->worktree,
					    "in-place record unreadable at "
					    "restart");
				continue;
			}
		}
		if (sess_make_guard(s, x) < 0) {
			attempt_end(s, x, "INTEGRITY", i->worktree,
				    "unreadable at restart");
			continue;
		}
		guard_digest(x->guard, now);
		if (!had || memcmp(now, was, sizeof(now)) == 0)
			continue;
		/* Or as an older spd stored it (guard_digest_legacy). */
		guard_digest_legacy(x->guard, now);
		if (memcmp(now, was, sizeof(now)) != 0)
			attempt_end(s, x, "INTEGRITY", i->worktree,
				    "changed while spd was not running");
	}
	if (r == 0 && rc != SQLITE_DONE) {
		sess_seterr(s, "sessions.db: %s", sqlite3_errmsg(s->db));
		r = -EIO;
	}
	sqlite3_finalize(st);
	return r;
}

void session_store_free_then(struct session_store *s, void (*fn)(void *data),
			     void *data)
{
	if (!s) {
		fn(data);
		return;
	}
	s->freed = fn;
	s->freed_data = data;
	session_store_free(s);
}

void session_store_free(struct session_store *s)
{
	void (*freed)(void *data);
	void *freed_data;

	if (!s)
		return;
	/* A step on a worker thread (s->aside) reads the store: the last
	 * one to end frees it (session_start_end, after undoing what the
	 * start made; session_end_read_end; session_walk_end;
	 * session_sync_end; session_checkpoint_end). */
	if (s->aside) {
		s->closing = true;
		/* A seal waiting for a verification does not hold the stop
		 * until that verification ends: it is answered now. */
		sess_heldout_close(s);
		if (s->aside)
			return;
	}
	while (s->list) {
		struct sess *x = s->list;
		s->list = x->next;
		sess_work_close(s, x);
		sess_free(x);
	}
	while (s->early) {
		struct sess_early *e = s->early;

		s->early = e->next;
		early_free(e);
	}
	if (s->db)
		sqlite3_close(s->db);
	free(s->state_dir);
	free(s->git_name);
	free(s->git_email);
	if (s->git_ready)
		git_libgit2_shutdown();
	freed = s->freed;
	freed_data = s->freed_data;
	free(s);
	if (freed)
		freed(freed_data);
}

int session_store_open(const char *state_dir, struct session_store **ret)
{
	struct session_store *s;
	char *path = NULL;
	int r;

	if (sodium_init() < 0)
		return -EIO;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	r = -ENOMEM;
	s->state_dir = strdup(state_dir);
	path = paths_join(state_dir, "sessions.db");
	if (!s->state_dir || !path)
		goto fail;
	r = paths_ensure_private_dir(state_dir);
	if (r < 0)
		goto fail;
	if (sqlite3_open_v2(path, &s->db,
			    SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
				SQLITE_OPEN_NOMUTEX,
			    NULL) != SQLITE_OK) {
		r = -EIO;
		goto fail;
	}
	chmod(path, 0600);
	sqlite3_busy_timeout(s->db, SESSION_DB_BUSY_MS);
	/* WAL with synchronous=NORMAL: a crash of spd loses nothing, a
	 * power loss at most the last commands' records; each command then
	 * costs no fsync.  Findings are also journaled. */
	r = db_exec(s, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
		       "CREATE TABLE IF NOT EXISTS sessions("
		       " id TEXT PRIMARY KEY, repo TEXT NOT NULL,"
		       " gitdir TEXT NOT NULL, feature TEXT NOT NULL,"
		       " mode INTEGER NOT NULL, worktree TEXT NOT NULL,"
		       " branch TEXT, base TEXT NOT NULL,"
		       " state INTEGER NOT NULL, finding_code TEXT,"
		       " finding_path TEXT, token_hash BLOB NOT NULL,"
		       " created INTEGER NOT NULL, ended INTEGER DEFAULT 0,"
		       " policy_blocks INTEGER DEFAULT 0,"
		       " outside_changes INTEGER DEFAULT 0,"
		       " commands INTEGER DEFAULT 0, heldout INTEGER DEFAULT 0,"
		       " guard_digest BLOB);"
		       "CREATE TABLE IF NOT EXISTS commands("
		       " session TEXT NOT NULL, argv TEXT NOT NULL,"
		       " exit INTEGER NOT NULL, at INTEGER NOT NULL);"
		       "CREATE INDEX IF NOT EXISTS commands_session"
		       " ON commands(session);"
		       "CREATE TABLE IF NOT EXISTS findings("
		       " session TEXT NOT NULL, kind TEXT NOT NULL,"
		       " what TEXT, at INTEGER NOT NULL);");
	if (r == 0)
		r = sess_work_schema(s);
	if (r == 0)
		r = sess_labels_schema(s);
	if (r < 0)
		goto fail;
	r = load(s);
	if (r < 0)
		goto fail;
	free(path);
	*ret = s;
	return 0;
fail:
	free(path);
	session_store_free(s);
	return r;
}

void session_store_set_journal(struct session_store *s, session_journal_fn fn,
			       void *data)
{
	s->jfn = fn;
	s->jdata = data;
	while (fn && s->early) {
		struct sess_early *e = s->early;

		s->early = e->next;
		fn(data, e->id, e->kind, e->summary, e->detail);
		early_free(e);
	}
	if (!s->early) {
		s->early_tail = NULL;
		s->nearly = 0;
	}
}

void session_store_set_ended_hook(struct session_store *s, session_ended_fn fn,
				  void *data)
{
	s->ended = fn;
	s->ended_data = data;
}

void session_store_set_check_runner(struct session_store *s,
				    session_check_runner_fn fn, void *data)
{
	s->runner = fn;
	s->runner_data = data;
}

session_check_runner_fn session_store_check_runner(struct session_store *s,
						   void **ret_data)
{
	*ret_data = s->runner_data;
	return s->runner;
}

static void journal_hook(void *data, const char *id, const char *kind,
			 const char *summary, const char *detail)
{
	/* A journal that cannot take the row (-ENOBUFS) is the journal's
	 * to report; the session's own record is in sessions.db. */
	journal_append(data, id, "spd", kind, summary, detail);
}

void session_store_use_journal(struct session_store *s, struct journal *j)
{
	session_store_set_journal(s, j ? journal_hook : NULL, j);
}

const char *session_store_error(const struct session_store *s)
{
	return s->err;
}

/* ---- the guard ---- */

/* spd moved refs/heads/<branch> itself: not a finding for any session on
 * the same repository. */
void sess_note_ref(struct session_store *s, const char *gitdir,
		   const char *branch)
{
	char ref[GUARD_PATH_MAX];

	snprintf(ref, sizeof(ref), "refs/heads/%s", branch);
	for (struct sess *x = s->list; x; x = x->next)
		if (x->guard && strcmp(x->info.gitdir, gitdir) == 0 &&
		    guard_note_ref(x->guard, ref) == 0)
			sess_db_update(s, x); /* the stored digest follows */
}

int sess_make_guard(struct session_store *s, struct sess *x)
{
	char own[GUARD_PATH_MAX];
	struct guard *g = NULL;
	int r;

	if (x->info.mode == SESSION_MODE_WORKTREE)
		snprintf(own, sizeof(own), "refs/heads/%s", x->info.branch);
	struct guard_config cfg = {
	    .gitdir = x->info.gitdir,
	    .workdir = x->info.worktree,
	    .own_ref = x->info.mode == SESSION_MODE_WORKTREE ? own : NULL,
	};
	r = guard_new(&cfg, &g);
	if (r < 0) {
		sess_seterr(s, "cannot snapshot the guarded inputs: %s",
			    strerror(-r));
		return r;
	}
	guard_free(x->guard);
	x->guard = g;
	return 0;
}

/* ---- tokens ---- */

void sess_token_hash(const char *token, uint8_t out[crypto_generichash_BYTES])
{
	crypto_generichash(out, crypto_generichash_BYTES,
			   (const uint8_t *)token, strlen(token), NULL, 0);
}

int session_authenticate(struct session_store *s, const char *token,
			 char *ret_id)
{
	uint8_t h[crypto_generichash_BYTES];
	struct sess *match = NULL;

	if (!token || strlen(token) != SESSION_TOKEN_LEN)
		return -SPD_EPERM;
	sess_token_hash(token, h);
	/* Every live session is compared, with no early exit, so the time
	 * taken says nothing about which hash came closest. */
	for (struct sess *x = s->list; x; x = x->next) {
		int eq = sodium_memcmp(h, x->token_hash, sizeof(h)) == 0;
		bool live = x->info.state != SESSION_ENDED;

		if (eq && live)
			match = x;
	}
	sodium_memzero(h, sizeof(h));
	if (!match)
		return -SPD_EPERM;
	memcpy(ret_id, match->info.id, SESSION_ID_LEN + 1);
	return 0;
}

void sess_store_closed_maybe(struct session_store *s)
{
	if (s->closing && !s->aside)
		session_store_free(s);
}

int session_usable(struct session_store *s, const char *id)
{
	struct sess *x = sess_find(s, id);

	if (!x)
		return -ENOENT;
	if (x->info.state == SESSION_ENDED)
		return -ESHUTDOWN;
	if (x->info.state == SESSION_ATTEMPT_ENDED)
		return -ECANCELED;
	if (x->reading)
		return -EBUSY;
	return 0;
}

/* ---- queries ---- */

int session_get(struct session_store *s, const char *id,
		struct session_info **ret)
{
	struct sess *x = sess_find(s, id);
	struct session_info *i;

	if (!x)
		return -ENOENT;
	i = sess_info_copy(&x->info);
	if (!i)
		return -ENOMEM;
	*ret = i;
	return 0;
}

int session_list(struct session_store *s, struct session_info ***ret,
		 size_t *ret_n)
{
	struct session_info **v;
	size_t n = 0, k = 0;

	for (struct sess *x = s->list; x; x = x->next)
		n++;
	v = calloc(n ? n : 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (struct sess *x = s->list; x; x = x->next) {
		v[k] = sess_info_copy(&x->info);
		if (!v[k]) {
			session_info_list_free(v, k);
			return -ENOMEM;
		}
		k++;
	}
	*ret = v;
	*ret_n = n;
	return 0;
}

int session_recent_workspaces(struct session_store *s, int64_t since,
			      size_t max, char ***ret)
{
	sqlite3_stmt *st = NULL;
	char **v = calloc(max + 1, sizeof(*v));
	size_t n = 0;
	int r = 0;

	if (!v)
		return -ENOMEM;
	if (sqlite3_prepare_v2(
		s->db,
		"SELECT s.worktree, max(s.created, coalesce(max(c.at), 0)) "
		"AS used FROM sessions s LEFT JOIN commands c "
		"ON c.session = s.id WHERE s.state = ? GROUP BY s.id "
		"HAVING used >= ? ORDER BY used DESC LIMIT ?",
		-1, &st, NULL) != SQLITE_OK) {
		sess_seterr(s, "sessions.db: %s", sqlite3_errmsg(s->db));
		free(v);
		return -EIO;
	}
	sqlite3_bind_int(st, 1, SESSION_ACTIVE);
	sqlite3_bind_int64(st, 2, since);
	sqlite3_bind_int64(st, 3, (sqlite3_int64)max);
	while (n < max && (r = sqlite3_step(st)) == SQLITE_ROW) {
		const char *w = (const char *)sqlite3_column_text(st, 0);

		if (w && !(v[n++] = strdup(w))) {
			r = -ENOMEM;
			break;
		}
	}
	sqlite3_finalize(st);
	if (r != SQLITE_DONE && r != SQLITE_ROW) {
		strv_free_array(v);
		return r == -ENOMEM ? -ENOMEM : -EIO;
	}
	*ret = v;
	return 0;
}

/* ---- after every command ---- */

int sess_guard_step(struct session_store *s, struct sess *x,
		    struct guard_finding *ret_finding)
{
	struct guard_finding f;
	int r;

	if (!x->guard)
		return -ECANCELED;
	memset(&f, 0, sizeof(f));
	r = guard_check(x->guard, &f);
	if (r == 0)
		return 0;
	if (r < 0) {
		f.set = GUARD_SET_GIT;
		snprintf(f.path, sizeof(f.path), "%s", x->info.gitdir);
		snprintf(f.what, sizeof(f.what), "unreadable");
	}
	attempt_end(s, x, f.set == GUARD_SET_GIT ? "GIT-CHANGED" : "INTEGRITY",
		    f.path, f.what);
	if (ret_finding)
		*ret_finding = f;
	return r < 0 ? r : 1;
}

int session_guard_check(struct session_store *s, const char *id,
			struct guard_finding *ret_finding)
{
	int r = session_usable(s, id);

	if (r < 0)
		return r;
	return sess_guard_step(s, sess_find(s, id), ret_finding);
}

char *sess_argv_json(const char *const *argv)
{
	json_t *a = json_array();
	char *t;

	if (!a)
		return NULL;
	for (size_t i = 0; argv && argv[i]; i++)
		json_array_append_new(a, json_string(argv[i]));
	t = json_dumps(a, JSON_COMPACT);
	json_decref(a);
	return t;
}

int session_log_command(struct session_store *s, const char *id,
			const char *const *argv, int exit_code)
{
	struct sess *x = sess_find(s, id);
	sqlite3_stmt *st = NULL;
	char *text;
	int r;

	if (!x)
		return -ENOENT;
	if (x->info.state == SESSION_ENDED)
		return -ESHUTDOWN;
	text = sess_argv_json(argv);
	if (!text)
		return -ENOMEM;
	if (sqlite3_prepare_v2(s->db,
			       "INSERT INTO commands(session, argv, exit, at) "
			       "VALUES(?,?,?,?)",
			       -1, &st, NULL) != SQLITE_OK) {
		free(text);
		return -EIO;
	}
	sess_bind_text(st, 1, id);
	sess_bind_text(st, 2, text);
	sqlite3_bind_int(st, 3, exit_code);
	sqlite3_bind_int64(st, 4, time(NULL));
	free(text);
	/* One transaction for the record and the counter. */
	db_exec(s, "BEGIN");
	r = db_step_done(s, st);
	if (r == 0) {
		x->info.commands++;
		r = sess_db_update(s, x);
	}
	db_exec(s, r == 0 ? "COMMIT" : "ROLLBACK");
	return r;
}

int session_record_command(struct session_store *s, const char *id,
			   const char *const *argv, int exit_code,
			   struct guard_finding *ret_finding)
{
	int r = session_usable(s, id);

	if (r < 0)
		return r;
	r = session_log_command(s, id, argv, exit_code);
	if (r < 0)
		return r;
	return sess_guard_step(s, sess_find(s, id), ret_finding);
}

static int note(struct session_store *s, const char *id, const char *kind,
		const char *what)
{
	struct sess *x = sess_find(s, id);
	sqlite3_stmt *st = NULL;

	if (!x)
		return -ENOENT;
	if (strcmp(kind, "policy-block") == 0)
		x->info.policy_blocks++;
	else
		x->info.outside_changes++;
	if (sqlite3_prepare_v2(s->db,
			       "INSERT INTO findings(session, kind, what, at) "
			       "VALUES(?,?,?,?)",
			       -1, &st, NULL) == SQLITE_OK) {
		sess_bind_text(st, 1, id);
		sess_bind_text(st, 2, kind);
		sess_bind_text(st, 3, what);
		sqlite3_bind_int64(st, 4, time(NULL));
		db_step_done(s, st);
	}
	sess_db_update(s, x);
	sess_journal(s, id, "session.note",
		     json_pack("{s:s, s:s?}", "kind", kind, "what", what),
		     "%s: %s", kind, what ? what : "");
	return 0;
}

int session_note_policy_block(struct session_store *s, const char *id,
			      const char *what)
{
	return note(s, id, "policy-block", what);
}

int session_end_attempt(struct session_store *s, const char *id,
			const char *code, const char *why)
{
	int r = session_usable(s, id);

	if (r < 0)
		return r;
	attempt_end(s, sess_find(s, id), code ? code : "ATTEMPT-ENDED",
		    why ? why : "", "ended");
	return 0;
}

int session_note_outside_change(struct session_store *s, const char *id,
				const char *path)
{
	return note(s, id, "outside-change", path);
}

/*
 * Sessions: the store, worktrees, the guard after every command, held-out
 * checks, verification gates and the diff.  See session.h.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <git2.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/strv.h"
#include "common/words.h"
#include "common/paths.h"
#include "common/util.h"
#include "daemon/domain/journal.h"
#include "proto/sandbox.h"
#include "daemon/domain/protected.h"
#include "daemon/domain/session.h"

/* Deepest directory walked for ignored entries: a deeper tree is an
 * attack on the walk's stack, and is refused like a too-large one. */
#define SESSION_SCAN_DEPTH 64
/* How long SQLite waits for a lock held by another connection (a second
 * spd is refused elsewhere; this only rides out a checkpoint). */
#define SESSION_DB_BUSY_MS 2000

struct sess {
	struct session_info info;
	uint8_t token_hash[crypto_generichash_BYTES];
	struct guard *guard; /* active sessions only */
	char **empty_files;  /* in place: ignored credential files */
	struct sess *next;
};

struct session_store {
	char *state_dir;
	sqlite3 *db;
	struct sess *list; /* newest first */
	session_journal_fn jfn;
	void *jdata;
	session_check_runner_fn runner;
	void *runner_data;
	session_ended_fn ended;
	void *ended_data;
	char err[1024];
	/* libgit2 is initialised on first use: its start-up loads and
	 * touches OpenSSL, megabytes an idle spd need not hold. */
	bool git_ready;
};

static int git_up(struct session_store *s)
{
	if (s->git_ready)
		return 0;
	if (git_libgit2_init() < 0)
		return -EIO;
	s->git_ready = true;
	return 0;
}

static const char *const gate_names[SESSION_GATES] = {
    "checks", "policy", "integrity", "outside", "required",
};

static void seterr(struct session_store *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void seterr(struct session_store *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->err, sizeof(s->err), fmt, ap);
	va_end(ap);
}

static const char *git_msg(void)
{
	const git_error *e = git_error_last();

	return e && e->message ? e->message : "unknown libgit2 error";
}

static void journal(struct session_store *s, const char *id, const char *kind,
		    json_t *detail, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void journal(struct session_store *s, const char *id, const char *kind,
		    json_t *detail, const char *fmt, ...)
{
	char summary[512];
	char *text = NULL;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(summary, sizeof(summary), fmt, ap);
	va_end(ap);
	if (s->jfn) {
		if (detail)
			text =
			    json_dumps(detail, JSON_COMPACT | JSON_SORT_KEYS);
		s->jfn(s->jdata, id, kind, summary, text);
	}
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

static struct session_info *info_copy(const struct session_info *src)
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

static const char *mode_name(enum session_mode m)
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
	    mode_name(i->mode), "worktree", i->worktree, "branch", i->branch,
	    "base", i->base, "state", state_name(i->state), "created",
	    (json_int_t)i->created, "ended", (json_int_t)i->ended,
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
		seterr(s, "sessions.db: %s", msg ? msg : "error");
		sqlite3_free(msg);
		return -EIO;
	}
	return 0;
}

static void bind_text(sqlite3_stmt *st, int i, const char *v)
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
		seterr(s, "sessions.db: %s", sqlite3_errmsg(s->db));
		return -EIO;
	}
	return 0;
}

static int db_insert(struct session_store *s, const struct sess *x)
{
	const struct session_info *i = &x->info;
	sqlite3_stmt *st = NULL;

	if (sqlite3_prepare_v2(
		s->db,
		"INSERT INTO sessions(id, repo, gitdir, feature, mode, "
		"worktree, branch, base, state, token_hash, created) "
		"VALUES(?,?,?,?,?,?,?,?,?,?,?)",
		-1, &st, NULL) != SQLITE_OK) {
		seterr(s, "sessions.db: %s", sqlite3_errmsg(s->db));
		return -EIO;
	}
	bind_text(st, 1, i->id);
	bind_text(st, 2, i->repo);
	bind_text(st, 3, i->gitdir);
	bind_text(st, 4, i->feature);
	sqlite3_bind_int(st, 5, (int)i->mode);
	bind_text(st, 6, i->worktree);
	bind_text(st, 7, i->branch);
	bind_text(st, 8, i->base);
	sqlite3_bind_int(st, 9, (int)i->state);
	sqlite3_bind_blob(st, 10, x->token_hash, sizeof(x->token_hash),
			  SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 11, i->created);
	return db_step_done(s, st);
}

/* Write the mutable fields of a session (and the guard digest). */
static int db_update(struct session_store *s, const struct sess *x)
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
		seterr(s, "sessions.db: %s", sqlite3_errmsg(s->db));
		return -EIO;
	}
	sqlite3_bind_int(st, 1, (int)i->state);
	bind_text(st, 2, i->finding_code);
	bind_text(st, 3, i->finding_path);
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
	bind_text(st, 10, i->id);
	return db_step_done(s, st);
}

static const char *col_text(sqlite3_stmt *st, int i)
{
	return (const char *)sqlite3_column_text(st, i);
}

static void sess_free(struct sess *x)
{
	if (!x)
		return;
	strv_free_array(x->empty_files);
	guard_free(x->guard);
	info_clear(&x->info);
	sodium_memzero(x->token_hash, sizeof(x->token_hash));
	free(x);
}

static struct sess *find(struct session_store *s, const char *id)
{
	if (!id)
		return NULL;
	for (struct sess *x = s->list; x; x = x->next)
		if (strcmp(x->info.id, id) == 0)
			return x;
	return NULL;
}

static int make_guard(struct session_store *s, struct sess *x);
static int find_secrets(struct session_store *s, struct sess *x);

/* End the attempt: record the finding, drop the guard, journal it. */
static void attempt_end(struct session_store *s, struct sess *x,
			const char *code, const char *path, const char *what)
{
	free(x->info.finding_code);
	free(x->info.finding_path);
	x->info.finding_code = strdup(code);
	x->info.finding_path = strdup(path);
	x->info.state = SESSION_ATTEMPT_ENDED;
	db_update(s, x);
	guard_free(x->guard);
	x->guard = NULL;
	journal(s, x->info.id, "session.finding",
		json_pack("{s:s, s:s, s:s}", "code", code, "path", path, "what",
			  what ? what : "changed"),
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
		seterr(s, "sessions.db: %s", sqlite3_errmsg(s->db));
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
		if (i->mode == SESSION_MODE_IN_PLACE &&
		    find_secrets(s, x) < 0) {
			attempt_end(s, x, "INTEGRITY", i->worktree,
				    "unreadable at restart");
			continue;
		}
		if (make_guard(s, x) < 0) {
			attempt_end(s, x, "INTEGRITY", i->worktree,
				    "unreadable at restart");
			continue;
		}
		guard_digest(x->guard, now);
		if (had && memcmp(now, was, sizeof(now)) != 0)
			attempt_end(s, x, "INTEGRITY", i->worktree,
				    "changed while spd was not running");
	}
	if (r == 0 && rc != SQLITE_DONE) {
		seterr(s, "sessions.db: %s", sqlite3_errmsg(s->db));
		r = -EIO;
	}
	sqlite3_finalize(st);
	return r;
}

void session_store_free(struct session_store *s)
{
	if (!s)
		return;
	while (s->list) {
		struct sess *x = s->list;
		s->list = x->next;
		sess_free(x);
	}
	if (s->db)
		sqlite3_close(s->db);
	free(s->state_dir);
	if (s->git_ready)
		git_libgit2_shutdown();
	free(s);
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
static void note_ref(struct session_store *s, const char *gitdir,
		     const char *branch)
{
	char ref[GUARD_PATH_MAX];

	snprintf(ref, sizeof(ref), "refs/heads/%s", branch);
	for (struct sess *x = s->list; x; x = x->next)
		if (x->guard && strcmp(x->info.gitdir, gitdir) == 0 &&
		    guard_note_ref(x->guard, ref) == 0)
			db_update(s, x); /* the stored digest follows */
}

static int make_guard(struct session_store *s, struct sess *x)
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
		seterr(s, "cannot snapshot the guarded inputs: %s",
		       strerror(-r));
		return r;
	}
	guard_free(x->guard);
	x->guard = g;
	return 0;
}

/* ---- in place: ignored credential files ---- */

struct secret_scan {
	git_repository *repo;
	const char *root;
	char **v;
	size_t n;
	size_t seen;
};

static int scan_secrets(struct secret_scan *sc, const char *rel, unsigned depth)
{
	char path[GUARD_PATH_MAX], child[GUARD_PATH_MAX];
	struct dirent *de;
	DIR *d;
	int r = 0;

	if (depth > 32)
		return 0;
	snprintf(path, sizeof(path), "%s%s%s", sc->root, rel[0] ? "/" : "",
		 rel);
	d = opendir(path);
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		unsigned int flags = 0;
		struct stat st;
		int k;

		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0 ||
		    (depth == 0 && strcmp(de->d_name, ".git") == 0))
			continue;
		if (++sc->seen > SESSION_SCAN_MAX) {
			r = -E2BIG;
			break;
		}
		k = snprintf(child, sizeof(child), "%s%s%s", rel,
			     rel[0] ? "/" : "", de->d_name);
		if (k < 0 || (size_t)k >= sizeof(child))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			r = scan_secrets(sc, child, depth + 1);
			if (r < 0)
				break;
			continue;
		}
		if (protected_match(child) != PROTECTED_SECRET_FILE)
			continue;
		/* Tracked files stay as they are: they are the project's. */
		if (git_status_file(&flags, sc->repo, child) < 0 ||
		    !(flags & GIT_STATUS_IGNORED))
			continue;
		if (sc->n >= SESSION_EMPTY_FILES_MAX) {
			r = -E2BIG;
			break;
		}
		sc->v[sc->n] = paths_join(sc->root, child);
		if (!sc->v[sc->n]) {
			r = -ENOMEM;
			break;
		}
		sc->n++;
	}
	closedir(d);
	return r;
}

/*
 * The git-ignored files of an in-place checkout that look like
 * credentials, found once at session start (the agent's own later files
 * are its own).  Past SESSION_SCAN_MAX entries or SESSION_EMPTY_FILES_MAX
 * matches the start is refused rather than run with some of them
 * readable.
 */
static int find_secrets(struct session_store *s, struct sess *x)
{
	struct secret_scan sc = {0};
	int r;

	if (git_up(s) < 0)
		return -EIO;
	if (git_repository_open_ext(&sc.repo, x->info.worktree,
				    GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0) {
		seterr(s, "%s: %s", x->info.worktree, git_msg());
		return -EIO;
	}
	sc.root = x->info.worktree;
	sc.v = calloc(SESSION_EMPTY_FILES_MAX + 1, sizeof(char *));
	if (!sc.v) {
		git_repository_free(sc.repo);
		return -ENOMEM;
	}
	r = scan_secrets(&sc, "", 0);
	git_repository_free(sc.repo);
	if (r < 0) {
		if (r == -E2BIG)
			seterr(s,
			       "in place: more than %d ignored credential "
			       "files or %d entries in the checkout; use a "
			       "worktree session",
			       SESSION_EMPTY_FILES_MAX, SESSION_SCAN_MAX);
		strv_free_array(sc.v);
		return r;
	}
	strv_free_array(x->empty_files);
	x->empty_files = sc.v;
	return 0;
}

/* ---- in place: ignored entries hidden from a run ---- */

struct ignored_scan {
	git_repository *repo;
	const char *root;
	char **skip; /* already covered (the empty credential files) */
	char **v;
	size_t n, max;
	size_t seen;
};

/*
 * Collect the top-most ignored entries below rel.  The test is the one
 * fs.read applies (git_ignore_path_is_ignored on the relative path,
 * daemon/methods/m_fs.c), so a run hides exactly what the file tools refuse;
 * an error in git's ignore machinery counts as ignored there, and here.
 * An ignored directory is one entry and is not walked.
 */
static int scan_ignored(struct ignored_scan *sc, const char *rel,
			unsigned depth)
{
	char path[GUARD_PATH_MAX], child[GUARD_PATH_MAX];
	struct dirent *de;
	DIR *d;
	int r = 0;

	if (depth > SESSION_SCAN_DEPTH)
		return -E2BIG;
	snprintf(path, sizeof(path), "%s%s%s", sc->root, rel[0] ? "/" : "",
		 rel);
	d = opendir(path);
	if (!d)
		return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
	while ((de = readdir(d))) {
		bool covered = false;
		int ignored = 0, k;
		struct stat st;

		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0 ||
		    (depth == 0 && strcmp(de->d_name, ".git") == 0))
			continue;
		if (++sc->seen > SESSION_SCAN_MAX) {
			r = -E2BIG;
			break;
		}
		k = snprintf(child, sizeof(child), "%s%s%s", rel,
			     rel[0] ? "/" : "", de->d_name);
		if (k < 0 || (size_t)k >= sizeof(child)) {
			r = -ENAMETOOLONG;
			break;
		}
		if (git_ignore_path_is_ignored(&ignored, sc->repo, child) < 0)
			ignored = 1;
		if (!ignored) {
			if (fstatat(dirfd(d), de->d_name, &st,
				    AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISDIR(st.st_mode))
				r = scan_ignored(sc, child, depth + 1);
			if (r < 0)
				break;
			continue;
		}
		k = snprintf(path, sizeof(path), "%s/%s", sc->root, child);
		if (k < 0 || (size_t)k >= sizeof(path)) {
			r = -ENAMETOOLONG;
			break;
		}
		for (size_t i = 0; sc->skip && sc->skip[i] && !covered; i++)
			covered = strcmp(sc->skip[i], path) == 0;
		if (covered)
			continue;
		if (sc->n >= sc->max) {
			r = -E2BIG;
			break;
		}
		if (!(sc->v[sc->n] = strdup(path))) {
			r = -ENOMEM;
			break;
		}
		sc->n++;
	}
	closedir(d);
	return r;
}

static int find_ignored(struct session_store *s, struct sess *x, size_t max,
			char ***ret)
{
	struct ignored_scan sc = {
	    .root = x->info.worktree, .skip = x->empty_files, .max = max};
	int r;

	if (git_up(s) < 0)
		return -EIO;
	if (git_repository_open_ext(&sc.repo, x->info.worktree,
				    GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0)
		return -EIO;
	sc.v = calloc(max + 1, sizeof(char *));
	if (!sc.v) {
		git_repository_free(sc.repo);
		return -ENOMEM;
	}
	r = scan_ignored(&sc, "", 0);
	git_repository_free(sc.repo);
	if (r < 0) {
		strv_free_array(sc.v);
		return r;
	}
	*ret = sc.v;
	return 0;
}

void session_run_paths_free(struct session_run_paths *p)
{
	if (!p)
		return;
	free(p->workspace);
	strv_free_array(p->readonly);
	strv_free_array(p->empty_files);
	strv_free_array(p->hidden);
	memset(p, 0, sizeof(*p));
}

int session_run_paths(struct session_store *s, const char *id,
		      struct session_run_paths *ret, size_t *ret_hidden_max)
{
	struct session_run_paths p = {0};
	struct sess *x;
	size_t n = 0;
	int r = session_usable(s, id);

	if (r < 0)
		return r;
	x = find(s, id);
	p.in_place = x->info.mode == SESSION_MODE_IN_PLACE;
	while (x->empty_files && x->empty_files[n])
		n++;
	p.workspace = strdup(x->info.worktree);
	p.readonly = calloc(2, sizeof(char *));
	p.empty_files = calloc(n + 1, sizeof(char *));
	if (!p.workspace || !p.readonly || !p.empty_files)
		goto oom;
	if (p.in_place && !(p.readonly[0] = strdup(x->info.gitdir)))
		goto oom;
	for (size_t i = 0; i < n; i++)
		if (!(p.empty_files[i] = strdup(x->empty_files[i])))
			goto oom;
	if (p.in_place) {
		size_t max = SBXP_PATHS_MAX - SESSION_RUN_PATHS_RESERVED;

		max = n < max ? max - n : 0;
		if (ret_hidden_max)
			*ret_hidden_max = max;
		r = find_ignored(s, x, max, &p.hidden);
		if (r < 0) {
			session_run_paths_free(&p);
			return r;
		}
	}
	*ret = p;
	return 0;
oom:
	session_run_paths_free(&p);
	return -ENOMEM;
}

/* ---- tokens ---- */

static void token_hash(const char *token, uint8_t out[crypto_generichash_BYTES])
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
	token_hash(token, h);
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

int session_usable(struct session_store *s, const char *id)
{
	struct sess *x = find(s, id);

	if (!x)
		return -ENOENT;
	if (x->info.state == SESSION_ENDED)
		return -ESHUTDOWN;
	if (x->info.state == SESSION_ATTEMPT_ENDED)
		return -ECANCELED;
	return 0;
}

/* ---- start ---- */

bool session_feature_valid(const char *f)
{
	char ref[SESSION_FEATURE_MAX + 32];
	size_t n;
	int valid = 0;

	if (!f)
		return false;
	n = strlen(f);
	if (n == 0 || n > SESSION_FEATURE_MAX || f[0] == '.' || f[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = f[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		      c == '-'))
			return false;
	}
	if (strstr(f, "..") || f[n - 1] == '.' ||
	    (n >= 5 && strcmp(f + n - 5, ".lock") == 0))
		return false;
	snprintf(ref, sizeof(ref), "refs/heads/spd/%s", f);
	if (git_reference_name_is_valid(&valid, ref) < 0)
		return false;
	return valid != 0;
}

/* Refuse a dirty checkout, naming what is dirty. */
static int check_clean(struct session_store *s, git_repository *repo)
{
	git_status_options so;
	git_status_list *sl = NULL;
	char list[768] = "";
	size_t n, used = 0;

	git_status_options_init(&so, GIT_STATUS_OPTIONS_VERSION);
	so.show = GIT_STATUS_SHOW_INDEX_AND_WORKDIR;
	so.flags = GIT_STATUS_OPT_INCLUDE_UNTRACKED |
		   GIT_STATUS_OPT_RECURSE_UNTRACKED_DIRS |
		   GIT_STATUS_OPT_EXCLUDE_SUBMODULES;
	if (git_status_list_new(&sl, repo, &so) < 0) {
		seterr(s, "git status: %s", git_msg());
		return -EIO;
	}
	n = git_status_list_entrycount(sl);
	for (size_t i = 0; i < n && i < SESSION_DIRTY_SHOWN; i++) {
		const git_status_entry *e = git_status_byindex(sl, i);
		const git_diff_delta *d =
		    e->head_to_index ? e->head_to_index : e->index_to_workdir;
		const char *kind = e->status & GIT_STATUS_WT_NEW ? "untracked"
				   : e->head_to_index		 ? "staged"
								 : "modified";
		int k = snprintf(list + used, sizeof(list) - used, "%s%s (%s)",
				 i ? ", " : "", d->new_file.path, kind);
		if (k < 0 || (size_t)k >= sizeof(list) - used)
			break;
		used += (size_t)k;
	}
	git_status_list_free(sl);
	if (n == 0)
		return 0;
	seterr(s, "the checkout is not clean (%zu path%s): %s%s", n,
	       n == 1 ? "" : "s", list, n > SESSION_DIRTY_SHOWN ? ", ..." : "");
	return -EBUSY;
}

static int copy_file(const char *from, const char *to, off_t max)
{
	_cleanup_close_ int in = -1, out = -1;
	char buf[65536];
	off_t total = 0;
	ssize_t k;

	in = open(from, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (in < 0)
		return -errno;
	out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		   0600);
	if (out < 0)
		return -errno;
	while ((k = read(in, buf, sizeof(buf))) != 0) {
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		total += k;
		if (total > max)
			return -E2BIG;
		for (ssize_t w = 0; w < k;) {
			ssize_t m = write(out, buf + w, (size_t)(k - w));
			if (m < 0) {
				if (errno == EINTR)
					continue;
				return -errno;
			}
			w += m;
		}
	}
	if (fsync(out) < 0)
		return -errno;
	return 0;
}

static char *conf_snapshot_path(struct session_store *s, const char *id)
{
	char *p = NULL;

	if (asprintf(&p, "%s/conf/%s.spd.conf", s->state_dir, id) < 0)
		return NULL;
	return p;
}

static int rm_cb(const char *path, const struct stat *st, int flag,
		 struct FTW *ftw)
{
	return flag == FTW_DP ? rmdir(path) : unlink(path);
}

/* rm -rf without following symlinks; a missing path is fine. */
static int rm_tree(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlink(path) < 0 ? -errno : 0;
	if (nftw(path, rm_cb, 32, FTW_DEPTH | FTW_PHYS) < 0)
		return -errno;
	return 0;
}

int session_start(struct session_store *s, const char *repo_path,
		  const char *feature, bool in_place,
		  struct session_info **ret_info, char *ret_token)
{
	git_repository *repo = NULL;
	git_reference *head = NULL, *branch = NULL;
	git_commit *commit = NULL;
	git_worktree *wt = NULL;
	struct sess *x = NULL;
	char token[SESSION_TOKEN_LEN + 1];
	uint8_t raw[SESSION_TOKEN_LEN / 2], idraw[SESSION_ID_LEN / 2];
	char bname[SESSION_FEATURE_MAX + 8];
	char *wtdir = NULL, *conf = NULL, *snap = NULL;
	bool made_branch = false, made_wt = false;
	int r;
	if (git_up(s) < 0)
		return -EIO;

	s->err[0] = '\0';
	if (!session_feature_valid(feature)) {
		seterr(s,
		       "invalid feature name \"%s\": use 1 to %d characters "
		       "of A-Z a-z 0-9 . _ -, not starting with '.' or '-'",
		       feature ? feature : "", SESSION_FEATURE_MAX);
		return -EINVAL;
	}
	if (git_repository_open_ext(&repo, repo_path, 0, NULL) < 0) {
		seterr(s, "%s: not a git repository: %s", repo_path, git_msg());
		return -ENOENT;
	}
	r = -EINVAL;
	if (git_repository_is_bare(repo) || !git_repository_workdir(repo)) {
		seterr(s, "%s: a bare repository has no checkout", repo_path);
		goto out;
	}
	if (in_place) {
		r = check_clean(s, repo);
		if (r < 0)
			goto out;
	}
	r = -ENOENT;
	if (git_repository_head(&head, repo) < 0 ||
	    git_reference_peel((git_object **)&commit, head,
			       GIT_OBJECT_COMMIT) < 0) {
		seterr(s, "%s: HEAD names no commit: %s", repo_path, git_msg());
		goto out;
	}

	r = -ENOMEM;
	x = calloc(1, sizeof(*x));
	if (!x)
		goto out;
	randombytes_buf(idraw, sizeof(idraw));
	sodium_bin2hex(x->info.id, sizeof(x->info.id), idraw, sizeof(idraw));
	randombytes_buf(raw, sizeof(raw));
	sodium_bin2hex(token, sizeof(token), raw, sizeof(raw));
	sodium_memzero(raw, sizeof(raw));
	token_hash(token, x->token_hash);
	git_oid_tostr(x->info.base, sizeof(x->info.base),
		      git_commit_id(commit));
	x->info.mode = in_place ? SESSION_MODE_IN_PLACE : SESSION_MODE_WORKTREE;
	x->info.state = SESSION_ACTIVE;
	x->info.created = time(NULL);
	{
		char *wd = strdup(git_repository_workdir(repo));
		size_t l = wd ? strlen(wd) : 0;

		if (l > 1 && wd[l - 1] == '/')
			wd[l - 1] = '\0';
		x->info.repo = wd;
	}
	x->info.gitdir = strdup(git_repository_commondir(repo));
	x->info.feature = strdup(feature);
	if (!x->info.repo || !x->info.gitdir || !x->info.feature)
		goto out;
	{
		size_t l = strlen(x->info.gitdir);
		if (l > 1 && x->info.gitdir[l - 1] == '/')
			x->info.gitdir[l - 1] = '\0';
	}

	if (in_place) {
		x->info.worktree = strdup(x->info.repo);
		if (git_reference_is_branch(head))
			x->info.branch = strdup(git_reference_shorthand(head));
		if (!x->info.worktree)
			goto out;
	} else {
		git_worktree_add_options wo;
		char *dir = paths_join(s->state_dir, "worktrees");

		git_worktree_add_options_init(&wo,
					      GIT_WORKTREE_ADD_OPTIONS_VERSION);
		snprintf(bname, sizeof(bname), "spd/%s", feature);
		if (git_branch_lookup(&branch, repo, bname, GIT_BRANCH_LOCAL) ==
		    0) {
			free(dir);
			seterr(s,
			       "branch %s already exists: merge or delete it, "
			       "or choose another feature name",
			       bname);
			r = -EEXIST;
			goto out;
		}
		r = dir ? paths_ensure_private_dir(dir) : -ENOMEM;
		if (r < 0) {
			seterr(s, "%s: %s", dir ? dir : "worktrees",
			       strerror(-r));
			free(dir);
			goto out;
		}
		wtdir = paths_join(dir, x->info.id);
		free(dir);
		r = -ENOMEM;
		x->info.branch = strdup(bname);
		if (!wtdir || !x->info.branch)
			goto out;
		r = -EIO;
		/* spd's own ref update: it happens before the guard's
		 * snapshot, and the guard never looks at this branch. */
		if (git_branch_create(&branch, repo, bname, commit, 0) < 0) {
			seterr(s, "cannot create branch %s: %s", bname,
			       git_msg());
			goto out;
		}
		made_branch = true;
		note_ref(s, x->info.gitdir, bname);
		wo.ref = branch;
		wo.checkout_options.checkout_strategy = GIT_CHECKOUT_FORCE;
		if (git_worktree_add(&wt, repo, x->info.id, wtdir, &wo) < 0) {
			seterr(s, "cannot add the worktree: %s", git_msg());
			goto out;
		}
		made_wt = true;
		x->info.worktree = steal_ptr(wtdir);
	}

	/* The project's configuration as the session begins; verification
	 * reads this copy (session_verify_plan). */
	r = -ENOMEM;
	conf = paths_join(x->info.worktree, ".spd.conf");
	snap = conf_snapshot_path(s, x->info.id);
	char *confdir = paths_join(s->state_dir, "conf");
	if (!conf || !snap || !confdir) {
		free(confdir);
		goto out;
	}
	r = paths_ensure_private_dir(confdir);
	free(confdir);
	if (r < 0)
		goto out;
	r = copy_file(conf, snap, 1024 * 1024);
	if (r < 0 && r != -ENOENT) {
		seterr(s, "cannot read %s: %s", conf, strerror(-r));
		goto out;
	}

	if (in_place) {
		r = find_secrets(s, x);
		if (r < 0)
			goto out;
	}
	r = make_guard(s, x);
	if (r < 0)
		goto out;
	r = db_insert(s, x);
	if (r == 0)
		r = db_update(s, x);
	if (r < 0)
		goto out;
	x->next = s->list;
	s->list = x;
	*ret_info = info_copy(&x->info);
	if (!*ret_info) {
		/* The session exists; the caller sees it in the list. */
		r = -ENOMEM;
		x = NULL;
		goto out;
	}
	memcpy(ret_token, token, sizeof(token));
	journal(s, x->info.id, "session.start",
		json_pack("{s:s, s:s, s:s, s:s, s:s?, s:s}", "repo",
			  x->info.repo, "feature", feature, "mode",
			  mode_name(x->info.mode), "worktree", x->info.worktree,
			  "branch", x->info.branch, "base", x->info.base),
		"session %s started on %s (%s)", x->info.id, feature,
		mode_name(x->info.mode));
	x = NULL;
	r = 0;
out:
	sodium_memzero(token, sizeof(token));
	if (x) {
		if (made_wt && wt) {
			git_worktree_prune_options po = {
			    GIT_WORKTREE_PRUNE_OPTIONS_VERSION, 0};
			po.flags = GIT_WORKTREE_PRUNE_VALID |
				   GIT_WORKTREE_PRUNE_WORKING_TREE;
			git_worktree_prune(wt, &po);
		}
		if (made_wt)
			rm_tree(x->info.worktree);
		if (made_branch && branch && git_branch_delete(branch) == 0)
			note_ref(s, x->info.gitdir, bname);
		if (snap)
			unlink(snap);
		sess_free(x);
	}
	free(conf);
	free(snap);
	free(wtdir);
	git_worktree_free(wt);
	git_reference_free(branch);
	git_reference_free(head);
	git_commit_free(commit);
	git_repository_free(repo);
	return r;
}

/* ---- queries ---- */

int session_get(struct session_store *s, const char *id,
		struct session_info **ret)
{
	struct sess *x = find(s, id);
	struct session_info *i;

	if (!x)
		return -ENOENT;
	i = info_copy(&x->info);
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
		v[k] = info_copy(&x->info);
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

/* ---- end ---- */

static char *heldout_dir(struct session_store *s, const char *id)
{
	char *p = NULL;

	if (asprintf(&p, "%s/heldout/%s", s->state_dir, id) < 0)
		return NULL;
	return p;
}

int session_end(struct session_store *s, const char *id)
{
	struct sess *x = find(s, id);
	char *p;
	int r = 0;
	if (git_up(s) < 0)
		return -EIO;

	s->err[0] = '\0';
	if (!x)
		return -ENOENT;
	if (x->info.state == SESSION_ENDED)
		return -EALREADY;
	if (x->info.mode == SESSION_MODE_WORKTREE) {
		git_repository *repo = NULL;
		git_worktree *wt = NULL;

		if (git_repository_open_ext(&repo, x->info.gitdir,
					    GIT_REPOSITORY_OPEN_NO_SEARCH |
						GIT_REPOSITORY_OPEN_BARE,
					    NULL) == 0 &&
		    git_worktree_lookup(&wt, repo, x->info.id) == 0) {
			git_worktree_prune_options po = {
			    GIT_WORKTREE_PRUNE_OPTIONS_VERSION, 0};
			/* VALID: it is still a working worktree;
			 * WORKING_TREE: remove its files too.  The branch
			 * stays for the operator to review and merge. */
			po.flags = GIT_WORKTREE_PRUNE_VALID |
				   GIT_WORKTREE_PRUNE_WORKING_TREE;
			if (git_worktree_prune(wt, &po) < 0)
				seterr(s, "git worktree prune: %s", git_msg());
		}
		git_worktree_free(wt);
		git_repository_free(repo);
		r = rm_tree(x->info.worktree);
	}
	p = heldout_dir(s, id);
	if (p)
		rm_tree(p);
	free(p);
	p = conf_snapshot_path(s, id);
	if (p)
		unlink(p);
	free(p);
	guard_free(x->guard);
	x->guard = NULL;
	x->info.state = SESSION_ENDED;
	x->info.ended = time(NULL);
	db_update(s, x);
	journal(s, id, "session.end",
		json_pack("{s:s?, s:s?}", "branch", x->info.branch, "finding",
			  x->info.finding_code),
		"session %s ended; branch %s kept", id,
		x->info.branch ? x->info.branch : "(none)");
	if (s->ended)
		s->ended(s->ended_data, id, "ENDED");
	return r;
}

/* ---- after every command ---- */

static int guard_step(struct session_store *s, struct sess *x,
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
	return guard_step(s, find(s, id), ret_finding);
}

static char *argv_json(const char *const *argv)
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

int session_record_command(struct session_store *s, const char *id,
			   const char *const *argv, int exit_code,
			   struct guard_finding *ret_finding)
{
	struct sess *x;
	sqlite3_stmt *st = NULL;
	char *text;
	int r = session_usable(s, id);

	if (r < 0)
		return r;
	x = find(s, id);
	text = argv_json(argv);
	if (!text)
		return -ENOMEM;
	if (sqlite3_prepare_v2(s->db,
			       "INSERT INTO commands(session, argv, exit, at) "
			       "VALUES(?,?,?,?)",
			       -1, &st, NULL) != SQLITE_OK) {
		free(text);
		return -EIO;
	}
	bind_text(st, 1, id);
	bind_text(st, 2, text);
	sqlite3_bind_int(st, 3, exit_code);
	sqlite3_bind_int64(st, 4, time(NULL));
	free(text);
	/* One transaction for the record and the counter. */
	db_exec(s, "BEGIN");
	r = db_step_done(s, st);
	if (r == 0) {
		x->info.commands++;
		r = db_update(s, x);
	}
	db_exec(s, r == 0 ? "COMMIT" : "ROLLBACK");
	if (r < 0)
		return r;
	return guard_step(s, x, ret_finding);
}

static int note(struct session_store *s, const char *id, const char *kind,
		const char *what)
{
	struct sess *x = find(s, id);
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
		bind_text(st, 1, id);
		bind_text(st, 2, kind);
		bind_text(st, 3, what);
		sqlite3_bind_int64(st, 4, time(NULL));
		db_step_done(s, st);
	}
	db_update(s, x);
	journal(s, id, "session.note",
		json_pack("{s:s, s:s?}", "kind", kind, "what", what), "%s: %s",
		kind, what ? what : "");
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
	attempt_end(s, find(s, id), code ? code : "ATTEMPT-ENDED",
		    why ? why : "", "ended");
	return 0;
}

int session_note_outside_change(struct session_store *s, const char *id,
				const char *path)
{
	return note(s, id, "outside-change", path);
}

/* ---- held-out checks ---- */

struct copy_state {
	size_t files;
	off_t bytes;
};

static int copy_tree(const char *from, const char *to, struct copy_state *cs,
		     unsigned depth)
{
	struct dirent *de;
	DIR *d;
	int r = 0;

	if (depth > 32)
		return -ELOOP;
	if (mkdir(to, 0700) < 0 && errno != EEXIST)
		return -errno;
	d = opendir(from);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char *a, *b;
		struct stat st;

		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		a = paths_join(from, de->d_name);
		b = paths_join(to, de->d_name);
		if (!a || !b) {
			free(a);
			free(b);
			r = -ENOMEM;
			break;
		}
		if (lstat(a, &st) < 0)
			r = -errno;
		else if (S_ISDIR(st.st_mode))
			r = copy_tree(a, b, cs, depth + 1);
		else if (!S_ISREG(st.st_mode))
			r = -EINVAL; /* a symlink could lead anywhere */
		else if (++cs->files > SESSION_HELDOUT_FILES_MAX ||
			 (cs->bytes += st.st_size) > SESSION_HELDOUT_BYTES_MAX)
			r = -E2BIG;
		else
			r = copy_file(a, b, SESSION_HELDOUT_BYTES_MAX);
		/* Keep the executable bit: a held-out check may be a
		 * script run directly. */
		if (r == 0 && S_ISREG(st.st_mode))
			chmod(b, (st.st_mode & 0100) ? 0700 : 0600);
		free(a);
		free(b);
		if (r < 0)
			break;
	}
	closedir(d);
	return r;
}

int session_heldout(struct session_store *s, const char *id, const char *dir)
{
	struct copy_state cs = {0};
	struct stat st;
	char *top = NULL, *dst = NULL, *tmp = NULL;
	int r = session_usable(s, id);

	s->err[0] = '\0';
	if (r < 0)
		return r;
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		seterr(s, "%s: not a directory", dir);
		return -ENOENT;
	}
	r = -ENOMEM;
	top = paths_join(s->state_dir, "heldout");
	dst = heldout_dir(s, id);
	if (!top || !dst || asprintf(&tmp, "%s.new", dst) < 0)
		goto out;
	r = paths_ensure_private_dir(top);
	if (r < 0)
		goto out;
	/* Copy aside, then swap: a failed copy leaves the earlier set. */
	rm_tree(tmp);
	r = copy_tree(dir, tmp, &cs, 0);
	if (r < 0) {
		seterr(s, "cannot seal %s: %s", dir,
		       r == -EINVAL ? "symlinks and special files are refused"
				    : strerror(-r));
		rm_tree(tmp);
		goto out;
	}
	rm_tree(dst);
	if (rename(tmp, dst) < 0) {
		r = -errno;
		rm_tree(tmp);
		goto out;
	}
	struct sess *x = find(s, id);
	x->info.heldout = true;
	db_update(s, x);
	journal(s, id, "session.heldout",
		json_pack("{s:i}", "files", (int)cs.files),
		"%zu held-out file%s sealed", cs.files,
		cs.files == 1 ? "" : "s");
	r = (int)cs.files;
out:
	free(top);
	free(dst);
	free(tmp);
	return r;
}

int session_heldout_overlay(struct session_store *s, const char *id,
			    char **ret_src, char **ret_dst)
{
	struct sess *x = find(s, id);
	char *src, *dst;

	if (!x || !x->info.heldout)
		return -ENOENT;
	src = heldout_dir(s, id);
	dst = paths_join(x->info.worktree, SESSION_HELDOUT_MOUNT);
	if (!src || !dst) {
		free(src);
		free(dst);
		return -ENOMEM;
	}
	*ret_src = src;
	*ret_dst = dst;
	return 0;
}

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

int session_verify_plan(struct session_store *s, const char *id,
			struct session_verify_plan **ret)
{
	struct session_verify_plan *p = NULL;
	git_config *cfg = NULL;
	git_config_iterator *it = NULL;
	git_config_entry *e;
	struct sess *x;
	char *snap = NULL;
	int r = session_usable(s, id);
	if (git_up(s) < 0)
		return -EIO;

	s->err[0] = '\0';
	if (r < 0)
		return r;
	x = find(s, id);
	r = -ENOMEM;
	p = calloc(1, sizeof(*p));
	if (!p)
		goto out;
	memcpy(p->id, id, sizeof(p->id));
	p->workspace = strdup(x->info.worktree);
	p->checks = calloc(SESSION_CHECKS_MAX, sizeof(*p->checks));
	p->required = calloc(SESSION_CHECKS_MAX + 1, sizeof(char *));
	p->readonly = calloc(2, sizeof(char *));
	snap = conf_snapshot_path(s, id);
	if (!p->workspace || !p->checks || !p->required || !p->readonly ||
	    !snap)
		goto out;
	if (x->info.mode == SESSION_MODE_IN_PLACE &&
	    !(p->readonly[0] = strdup(x->info.gitdir)))
		goto out;
	r = session_heldout_overlay(s, id, &p->heldout_src, &p->heldout_dst);
	if (r < 0 && r != -ENOENT)
		goto out;
	if (access(snap, F_OK) < 0) {
		/* No .spd.conf: no checks, and the checks gate fails. */
		*ret = p;
		p = NULL;
		r = 0;
		goto out;
	}
	r = -EINVAL;
	if (git_config_open_ondisk(&cfg, snap) < 0) {
		seterr(s, ".spd.conf: %s", git_msg());
		goto out;
	}
	/* Filtered by hand, not with a glob regex: libgit2's PCRE2 path
	 * leaks its match data. */
	if (git_config_iterator_new(&it, cfg) < 0) {
		seterr(s, ".spd.conf: %s", git_msg());
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
			seterr(s, ".spd.conf: more than %d checks",
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
			seterr(s,
			       ".spd.conf: check \"%s\": cannot split \"%s\" "
			       "into words without a shell (write sh -c '...' "
			       "to use one)",
			       ck->name, e->value ? e->value : "");
			r = k;
			goto out;
		}
	}
	struct req_acc acc = {p->required, 0, 0};
	int gr = git_config_get_multivar_foreach(cfg, "verify.require", NULL,
						 req_cb, &acc);
	if (acc.err < 0) {
		r = acc.err;
		goto out;
	}
	if (gr < 0 && gr != GIT_ENOTFOUND) {
		seterr(s, ".spd.conf: %s", git_msg());
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
	char *text = argv_json((const char *const *)argv);
	bool found = false;

	if (!text)
		return false;
	if (sqlite3_prepare_v2(s->db,
			       "SELECT 1 FROM commands WHERE session=? AND "
			       "argv=? LIMIT 1",
			       -1, &st, NULL) == SQLITE_OK) {
		bind_text(st, 1, id);
		bind_text(st, 2, text);
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
	struct sess *x = find(s, plan->id);
	struct session_verdict v;
	const char *failed = NULL;
	int failed_code = 0;

	if (!x)
		return -ENOENT;
	memset(&v, 0, sizeof(v));

	for (size_t i = 0; i < plan->n_checks && !failed; i++)
		if (!exit_codes || exit_codes[i] != 0) {
			failed = plan->checks[i].name;
			failed_code = exit_codes ? exit_codes[i] : -1;
		}
	if (plan->n_checks == 0)
		gate(&v, SESSION_GATE_CHECKS, false,
		     "no checks configured in .spd.conf");
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
		guard_step(s, x, NULL);
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
	journal(s, plan->id, "session.verify",
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
		json_array_append_new(
		    checks, json_pack("{s:s, s:o, s:i}", "name",
				      plan->checks[i].name, "argv", a, "exit",
				      exit_codes ? exit_codes[i] : -1));
	}
	json_object_set_new(o, "pass", json_boolean(v->pass));
	json_object_set_new(o, "gates", gates);
	json_object_set_new(o, "checks", checks);
	return o;
}

/* ---- diff ---- */

struct diff_acc {
	char *buf;
	size_t len, cap;
	bool truncated;
};

static int diff_line(const git_diff_delta *d, const git_diff_hunk *h,
		     const git_diff_line *l, void *data)
{
	struct diff_acc *a = data;
	size_t need = l->content_len + 1;
	bool origin = l->origin == GIT_DIFF_LINE_CONTEXT ||
		      l->origin == GIT_DIFF_LINE_ADDITION ||
		      l->origin == GIT_DIFF_LINE_DELETION;

	if (origin)
		need++;
	if (a->len + need > SESSION_DIFF_MAX) {
		a->truncated = true;
		return 1; /* stop the walk */
	}
	if (a->len + need > a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 65536;
		char *b;

		while (cap < a->len + need)
			cap *= 2;
		b = realloc(a->buf, cap);
		if (!b)
			return -1;
		a->buf = b;
		a->cap = cap;
	}
	if (origin)
		a->buf[a->len++] = l->origin;
	memcpy(a->buf + a->len, l->content, l->content_len);
	a->len += l->content_len;
	a->buf[a->len] = '\0';
	return 0;
}

int session_diff(struct session_store *s, const char *id, char **ret_text,
		 bool *ret_truncated)
{
	struct sess *x = find(s, id);
	git_repository *repo = NULL;
	git_commit *base = NULL;
	git_tree *tree = NULL;
	git_diff *diff = NULL;
	git_oid oid;
	git_diff_options dopt;
	struct diff_acc acc = {0};
	int r = -EIO;
	if (git_up(s) < 0)
		return -EIO;

	s->err[0] = '\0';
	if (!x)
		return -ENOENT;
	if (x->info.state == SESSION_ENDED &&
	    x->info.mode == SESSION_MODE_WORKTREE) {
		seterr(s, "session %s has ended; its work is on branch %s", id,
		       x->info.branch);
		return -ESHUTDOWN;
	}
	/*
	 * Open the main repository by its git dir and point it at the
	 * worktree, rather than follow the worktree's .git file: that file
	 * is the agent's to rewrite, and it must not choose which
	 * repository spd reads.  The diff is base tree against the files on
	 * disk; it does not use the index.
	 */
	if (git_repository_open_ext(&repo, x->info.gitdir,
				    GIT_REPOSITORY_OPEN_NO_SEARCH |
					GIT_REPOSITORY_OPEN_BARE,
				    NULL) < 0 ||
	    git_repository_set_workdir(repo, x->info.worktree, 0) < 0 ||
	    git_oid_fromstr(&oid, x->info.base) < 0 ||
	    git_commit_lookup(&base, repo, &oid) < 0 ||
	    git_commit_tree(&tree, base) < 0) {
		seterr(s, "cannot open the session's repository: %s",
		       git_msg());
		goto out;
	}
	git_diff_options_init(&dopt, GIT_DIFF_OPTIONS_VERSION);
	dopt.flags = GIT_DIFF_INCLUDE_UNTRACKED |
		     GIT_DIFF_RECURSE_UNTRACKED_DIRS |
		     GIT_DIFF_SHOW_UNTRACKED_CONTENT;
	if (git_diff_tree_to_workdir(&diff, repo, tree, &dopt) < 0) {
		seterr(s, "git diff: %s", git_msg());
		goto out;
	}
	int pr = git_diff_print(diff, GIT_DIFF_FORMAT_PATCH, diff_line, &acc);
	if (pr < 0 && !acc.truncated) {
		seterr(s, "git diff: %s", git_msg());
		goto out;
	}
	if (!acc.buf && !(acc.buf = strdup(""))) {
		r = -ENOMEM;
		goto out;
	}
	*ret_text = steal_ptr(acc.buf);
	if (ret_truncated)
		*ret_truncated = acc.truncated;
	r = 0;
out:
	free(acc.buf);
	git_diff_free(diff);
	git_tree_free(tree);
	git_commit_free(base);
	git_repository_free(repo);
	return r;
}

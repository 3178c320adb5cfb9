/*
 * The hash-chained journal: rows and their hash, the head file, and the
 * loop side (open, append, flush, close).  The writer thread is
 * journal_writer.c, queries and verification journal_read.c; what the
 * three share is journal_priv.h.  See journal.h for the threads and the
 * durability promise.
 *
 * Locking: j->mu guards the chain's tip (last_id, last_hash), the queue of
 * rows waiting for the writer, the queue of committed rows waiting for the
 * loop, and the writer's progress.  The writer's sqlite connection is used
 * by journal_open() and then only by the writer thread.  The read-only
 * connection for queries is used under j->read_mu on the thread pool.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "common/paths.h"
#include "common/utf8.h"
#include "common/util.h"
#include "daemon/journal/journal.h"
#include "daemon/journal/journal_priv.h"

#define HASH_BYTES 32
/* Names the encoding, so that a future change of it cannot collide. */
#define HASH_DOMAIN "spd-journal-v1"
#define HEAD_MAGIC "spd-journal-head-v1"
/* A NULL text field, distinct from every length (and from ""). */
#define HASH_NULL UINT64_MAX

/* ---- rows and their hash ---- */

static void hash_u64(crypto_generichash_state *st, uint64_t v)
{
	unsigned char b[8];

	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(v >> (56 - 8 * i));
	crypto_generichash_update(st, b, sizeof(b));
}

static void hash_text(crypto_generichash_state *st, const char *s, size_t n)
{
	if (!s) {
		hash_u64(st, HASH_NULL);
		return;
	}
	hash_u64(st, n);
	crypto_generichash_update(st, (const unsigned char *)s, n);
}

/*
 * The canonical encoding: the domain string, then id and time as 8-byte
 * big-endian integers, then each text field as an 8-byte big-endian length
 * and its bytes (HASH_NULL for NULL).  Every field is length-prefixed, so
 * no two different rows encode the same.
 */
void jnl_row_hash(const struct row_view *r, int64_t id, char ret[HASH_HEX + 1])
{
	crypto_generichash_state st;
	unsigned char bin[HASH_BYTES];

	crypto_generichash_init(&st, NULL, 0, sizeof(bin));
	hash_text(&st, HASH_DOMAIN, strlen(HASH_DOMAIN));
	hash_u64(&st, (uint64_t)id);
	hash_u64(&st, (uint64_t)r->time_us);
	for (int i = 0; i < F_COUNT; i++)
		hash_text(&st, r->text[i], r->len[i]);
	crypto_generichash_final(&st, bin, sizeof(bin));
	sodium_bin2hex(ret, HASH_HEX + 1, bin, sizeof(bin));
}

static size_t event_bytes(const struct journal_event *e)
{
	size_t n = sizeof(*e);
	const char *s[] = {e->session, e->actor, e->kind, e->summary,
			   e->detail};

	for (size_t i = 0; i < ARRAY_SIZE(s); i++)
		if (s[i])
			n += strlen(s[i]) + 1;
	return n;
}

static void event_clear(struct journal_event *e)
{
	free(e->session);
	free(e->actor);
	free(e->kind);
	free(e->summary);
	free(e->detail);
	memset(e, 0, sizeof(*e));
}

void jnl_evvec_free(struct evvec *v)
{
	for (size_t i = 0; i < v->n; i++)
		event_clear(&v->v[i]);
	free(v->v);
	memset(v, 0, sizeof(*v));
}

int jnl_evvec_reserve(struct evvec *v, size_t more)
{
	struct journal_event *nv;
	size_t cap;

	if (v->n + more <= v->cap)
		return 0;
	cap = v->cap ? v->cap : 64;
	while (cap < v->n + more)
		cap *= 2;
	nv = reallocarray(v->v, cap, sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	v->v = nv;
	v->cap = cap;
	return 0;
}

/* Move all of src's rows to the end of dst; src is left empty. */
int jnl_evvec_move(struct evvec *dst, struct evvec *src)
{
	if (dst->n == 0) {
		free(dst->v);
		*dst = *src;
		memset(src, 0, sizeof(*src));
		return 0;
	}
	if (jnl_evvec_reserve(dst, src->n) < 0)
		return -ENOMEM;
	memcpy(dst->v + dst->n, src->v, src->n * sizeof(*src->v));
	dst->n += src->n;
	dst->bytes += src->bytes;
	free(src->v);
	memset(src, 0, sizeof(*src));
	return 0;
}

int jnl_sqlite_errno(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_ROW:
	case SQLITE_DONE:
		return 0;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_READONLY:
		return -EROFS;
	case SQLITE_PERM:
	case SQLITE_AUTH:
		return -EACCES;
	case SQLITE_CANTOPEN:
		return -ENOENT;
	case SQLITE_CONSTRAINT:
		return -EEXIST;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
	case SQLITE_SCHEMA:
		return -SPD_ECORRUPT;
	default:
		return -EIO;
	}
}

int jnl_exec(sqlite3 *db, const char *sql)
{
	return jnl_sqlite_errno(sqlite3_exec(db, sql, NULL, NULL, NULL));
}

static bool is_hex_hash(const char *s, size_t n)
{
	if (!s || n != HASH_HEX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		      (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* Copy a stored hash column into out ("" when it is not a hash). */
void jnl_column_hash(sqlite3_stmt *st, int col, char out[HASH_HEX + 1])
{
	const char *s = (const char *)sqlite3_column_text(st, col);
	size_t n = (size_t)sqlite3_column_bytes(st, col);

	out[0] = '\0';
	if (s && n == HASH_HEX) {
		memcpy(out, s, HASH_HEX);
		out[HASH_HEX] = '\0';
	}
}

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- the head file ---- */

int jnl_head_read(const char *head_path, int64_t *ret_id,
		  char ret_hash[HASH_HEX + 1])
{
	char buf[256], hash[HASH_HEX + 2];
	long long id;
	ssize_t n;
	int fd = open(head_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	if (sscanf(buf, HEAD_MAGIC " %lld %65s", &id, hash) != 2 || id < 0 ||
	    !is_hex_hash(hash, strlen(hash)))
		return -SPD_ECORRUPT;
	*ret_id = id;
	memcpy(ret_hash, hash, HASH_HEX + 1);
	return 0;
}

/* Replace the head file atomically and durably: a reader sees the old or
 * the new head, and after a power loss the head is one that was synced. */
int jnl_head_write(struct journal *j, int64_t id, const char *hash)
{
	char buf[256];
	int fd, n, r = 0;

	n = snprintf(buf, sizeof(buf), HEAD_MAGIC " %" PRId64 " %s\n", id,
		     hash);
	fd = open(j->head_tmp,
		  O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	if (write(fd, buf, (size_t)n) != n)
		r = errno ? -errno : -EIO;
	else if (fsync(fd) < 0)
		r = -errno;
	close(fd);
	if (r < 0)
		goto out;
	if (rename(j->head_tmp, j->head_path) < 0) {
		r = -errno;
		goto out;
	}
	if (fsync(j->dir_fd) < 0)
		r = -errno;
out:
	if (r < 0)
		unlink(j->head_tmp);
	return r;
}

/* ---- the loop side ---- */

static void journal_free(struct journal *j)
{
	if (!j)
		return;
	jnl_evvec_free(&j->pending);
	jnl_evvec_free(&j->done);
	sqlite3_finalize(j->insert);
	sqlite3_close(j->db);
	sqlite3_close(j->rdb);
	if (j->lock_fd >= 0)
		close(j->lock_fd);
	if (j->dir_fd >= 0)
		close(j->dir_fd);
	pthread_mutex_destroy(&j->mu);
	pthread_mutex_destroy(&j->read_mu);
	pthread_cond_destroy(&j->wake);
	pthread_cond_destroy(&j->progress);
	free(j->path);
	free(j->head_path);
	free(j->head_tmp);
	free(j->lock_path);
	free(j);
}

static void on_closed(uv_handle_t *h)
{
	struct journal *j = h->data;
	void (*cb)(void *data, int err) = j->close_cb;
	void *data = j->close_data;
	int err = j->lost_err;

	journal_free(j);
	if (cb)
		cb(data, err);
}

void jnl_maybe_finish_close(struct journal *j)
{
	bool exited;

	if (!j->closing || j->close_started || j->works > 0)
		return;
	pthread_mutex_lock(&j->mu);
	exited = j->writer_exited && j->done.n == 0;
	pthread_mutex_unlock(&j->mu);
	if (!exited)
		return;
	j->close_started = true;
	/* The writer has left its loop; this waits only for its return. */
	pthread_join(j->writer, NULL);
	uv_close((uv_handle_t *)&j->async, on_closed);
}

static void on_async(uv_async_t *h)
{
	struct journal *j = h->data;
	struct evvec done;

	pthread_mutex_lock(&j->mu);
	done = j->done;
	memset(&j->done, 0, sizeof(j->done));
	pthread_mutex_unlock(&j->mu);
	if (done.n > 0 && j->commit_cb)
		j->commit_cb(j->commit_data, done.v, done.n);
	jnl_evvec_free(&done);
	jnl_maybe_finish_close(j);
}

char *jnl_path_suffix(const char *path, const char *suffix)
{
	char *s;

	if (asprintf(&s, "%s%s", path, suffix) < 0)
		return NULL;
	return s;
}

int journal_set_holder(struct journal *j, const char *text)
{
	size_t n = strlen(text);

	if (!j || j->lock_fd < 0)
		return -EBADF;
	if (ftruncate(j->lock_fd, 0) < 0 ||
	    pwrite(j->lock_fd, text, n, 0) != (ssize_t)n)
		return -errno;
	return 0;
}

char *journal_read_holder(const char *path)
{
	_cleanup_free_ char *lock = jnl_path_suffix(path, ".lock");

	return lock ? paths_read_line(lock) : NULL;
}

static int open_dir_of(const char *path)
{
	_cleanup_free_ char *dir = strdup(path);
	char *slash;
	int fd;

	if (!dir)
		return -ENOMEM;
	slash = strrchr(dir, '/');
	if (!slash)
		strcpy(dir, ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static const char schema[] =
    "CREATE TABLE IF NOT EXISTS events("
    "id INTEGER PRIMARY KEY, time INTEGER, session TEXT, actor TEXT, "
    "kind TEXT, summary TEXT, detail TEXT, prev_hash TEXT, hash TEXT)";
/*
 * Schema 2: an index on (session, id), for a session's rows (its range
 * in a signed statement, its model calls) without a scan of the whole
 * journal.  A journal made before it gets the index when it is opened:
 * CREATE INDEX reads the rows and changes none of them, and the hash
 * chain covers the rows only, so a migrated journal verifies as before.
 */
#define SCHEMA_VERSION 2
static const char schema_session_index[] =
    "CREATE INDEX IF NOT EXISTS events_session ON events(session, id)";

/*
 * Read the chain's tip and count, and check it against the head file.
 * Rows may run past the head (committed after the last sync); ending
 * below it or disagreeing with it means rows were cut or rewritten.
 */
static int load_tip(struct journal *j)
{
	sqlite3_stmt *st = NULL;
	int64_t head_id = 0;
	char head_hash[HASH_HEX + 1];
	int r, rc;

	r = jnl_sqlite_errno(sqlite3_prepare_v2(
	    j->db, "SELECT id, hash FROM events ORDER BY id DESC LIMIT 1", -1,
	    &st, NULL));
	if (r < 0)
		goto out;
	j->last_id = 0;
	memcpy(j->last_hash, jnl_zero_hash, sizeof(jnl_zero_hash));
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		j->last_id = sqlite3_column_int64(st, 0);
		jnl_column_hash(st, 1, j->last_hash);
		if (j->last_id <= 0 || !j->last_hash[0]) {
			r = -SPD_ECORRUPT;
			goto out;
		}
	} else if ((r = jnl_sqlite_errno(rc)) < 0) {
		goto out;
	}
	sqlite3_finalize(st);
	st = NULL;

	r = jnl_sqlite_errno(sqlite3_prepare_v2(
	    j->db, "SELECT count(*) FROM events", -1, &st, NULL));
	if (r < 0)
		goto out;
	if (sqlite3_step(st) != SQLITE_ROW) {
		r = -EIO;
		goto out;
	}
	j->count = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	st = NULL;

	r = jnl_head_read(j->head_path, &head_id, head_hash);
	if (r == -ENOENT && j->last_id == 0) {
		/* A new journal: record its empty head at once, so that a
		 * head file that goes missing later is itself evidence. */
		r = jnl_head_write(j, 0, jnl_zero_hash);
		if (r < 0)
			goto out;
		memcpy(head_hash, jnl_zero_hash, sizeof(jnl_zero_hash));
	} else if (r < 0) {
		r = r == -ENOENT ? -SPD_ECORRUPT : r;
		goto out;
	}
	if (head_id > j->last_id) {
		r = -SPD_ECORRUPT;
		goto out;
	}
	if (head_id > 0) {
		char stored[HASH_HEX + 1];

		r = jnl_sqlite_errno(sqlite3_prepare_v2(
		    j->db, "SELECT hash FROM events WHERE id = ?", -1, &st,
		    NULL));
		if (r < 0)
			goto out;
		sqlite3_bind_int64(st, 1, head_id);
		if (sqlite3_step(st) != SQLITE_ROW) {
			r = -SPD_ECORRUPT;
			goto out;
		}
		jnl_column_hash(st, 0, stored);
		if (strcmp(stored, head_hash) != 0) {
			r = -SPD_ECORRUPT;
			goto out;
		}
	}
	j->committed_id = j->last_id;
	memcpy(j->committed_hash, j->last_hash, sizeof(j->last_hash));
	/* Rows past the head are synced and recorded by the writer soon. */
	j->synced_id = head_id;
	r = 0;
out:
	sqlite3_finalize(st);
	return r;
}

/* Bring an older journal's schema to SCHEMA_VERSION, in one
 * transaction (all or nothing; a journal that cannot be migrated is not
 * opened, and nothing of it is changed). */
static int migrate(sqlite3 *db)
{
	sqlite3_stmt *st = NULL;
	char sql[64];
	int version = 0, r;

	r = jnl_sqlite_errno(
	    sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL));
	if (r < 0)
		return r;
	if (sqlite3_step(st) == SQLITE_ROW)
		version = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	if (version >= SCHEMA_VERSION)
		return 0;
	r = jnl_exec(db, "BEGIN IMMEDIATE");
	if (r < 0)
		return r;
	snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", SCHEMA_VERSION);
	r = jnl_exec(db, schema_session_index);
	if (r == 0)
		r = jnl_exec(db, sql);
	if (r == 0)
		r = jnl_exec(db, "COMMIT");
	if (r < 0)
		jnl_exec(db, "ROLLBACK");
	return r;
}

static int open_db(struct journal *j)
{
	sqlite3_stmt *st = NULL;
	int r;

	r = jnl_sqlite_errno(
	    sqlite3_open_v2(j->path, &j->db,
			    SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL));
	if (r < 0)
		return r;
	sqlite3_extended_result_codes(j->db, 0);
	sqlite3_busy_timeout(j->db, BUSY_TIMEOUT_MS);
	r = jnl_sqlite_errno(sqlite3_prepare_v2(
	    j->db, "PRAGMA journal_mode=WAL", -1, &st, NULL));
	if (r < 0)
		return r;
	if (sqlite3_step(st) != SQLITE_ROW ||
	    strcmp((const char *)sqlite3_column_text(st, 0), "wal") != 0) {
		sqlite3_finalize(st);
		return -EIO;
	}
	sqlite3_finalize(st);
	r = jnl_exec(j->db, "PRAGMA synchronous=NORMAL");
	if (r < 0)
		return r;
	r = jnl_exec(j->db, schema);
	if (r < 0)
		return r;
	r = migrate(j->db);
	if (r < 0)
		return r;
	r = load_tip(j);
	if (r < 0)
		return r;
	return jnl_sqlite_errno(sqlite3_prepare_v3(
	    j->db,
	    "INSERT INTO events(id, time, session, actor, kind, summary, "
	    "detail, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
	    -1, SQLITE_PREPARE_PERSISTENT, &j->insert, NULL));
}

static int init_sync(struct journal *j)
{
	pthread_condattr_t ca;
	int r;

	r = -pthread_mutex_init(&j->mu, NULL);
	if (r < 0)
		return r;
	r = -pthread_mutex_init(&j->read_mu, NULL);
	if (r < 0)
		return r;
	r = -pthread_condattr_init(&ca);
	if (r < 0)
		return r;
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	r = -pthread_cond_init(&j->wake, &ca);
	if (r == 0)
		r = -pthread_cond_init(&j->progress, &ca);
	pthread_condattr_destroy(&ca);
	return r;
}

int journal_open(uv_loop_t *loop, const char *path, struct journal **ret)
{
	struct journal *j;
	sigset_t all, old;
	int r;

	if (sodium_init() < 0)
		return -EIO;
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->lock_fd = -1;
	j->dir_fd = -1;
	j->loop = loop;
	j->queue_max = JOURNAL_QUEUE_BYTES_MAX;
	r = init_sync(j);
	if (r < 0) {
		free(j);
		return r;
	}
	clock_gettime(CLOCK_MONOTONIC, &j->last_sync);
	j->path = strdup(path);
	j->head_path = jnl_path_suffix(path, ".head");
	j->head_tmp = jnl_path_suffix(path, ".head.tmp");
	j->lock_path = jnl_path_suffix(path, ".lock");
	if (!j->path || !j->head_path || !j->head_tmp || !j->lock_path) {
		r = -ENOMEM;
		goto fail;
	}
	r = open_dir_of(path);
	if (r < 0)
		goto fail;
	j->dir_fd = r;
	j->lock_fd =
	    open(j->lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (j->lock_fd < 0) {
		r = -errno;
		goto fail;
	}
	/* Two writers would fork the chain. */
	if (flock(j->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		r = errno == EWOULDBLOCK ? -EBUSY : -errno;
		goto fail;
	}
	/* Created here so that it is 0600 whatever the umask; no SQLite
	 * connection of ours has it open yet, so closing drops no lock. */
	r = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (r < 0) {
		r = -errno;
		goto fail;
	}
	close(r);
	r = open_db(j);
	if (r < 0)
		goto fail;
	jnl_update_size(j);

	/* Signals belong to the loop thread.  The writer starts before the
	 * async handle exists, so that a failure to start either leaves
	 * nothing for the loop to close; it signals the loop only for rows
	 * committed, and none can be queued before this returns. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = -pthread_create(&j->writer, NULL, jnl_writer_main, j);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r < 0)
		goto fail;
	r = uv_async_init(loop, &j->async, on_async);
	j->async.data = j;
	pthread_mutex_lock(&j->mu);
	if (r < 0) {
		j->stopping = true;
		pthread_cond_signal(&j->wake);
	} else {
		j->async_ready = true;
	}
	pthread_mutex_unlock(&j->mu);
	if (r < 0) {
		pthread_join(j->writer, NULL);
		goto fail;
	}
	*ret = j;
	return 0;
fail:
	journal_free(j);
	return r;
}

void journal_set_commit_cb(struct journal *j, journal_commit_cb cb, void *data)
{
	j->commit_cb = cb;
	j->commit_data = data;
}

void journal_set_filter(struct journal *j,
			char *(*fn)(void *data, const char *text), void *data)
{
	j->filter = fn;
	j->filter_data = data;
}

static int check_text(const char *s, size_t max, bool required)
{
	size_t n;

	if (!s)
		return required ? -EINVAL : 0;
	n = strnlen(s, max + 1);
	if (n > max)
		return -E2BIG;
	if (!utf8_valid(s, n))
		return -EINVAL;
	return 0;
}

/*
 * A copy of s with each byte that does not start a valid UTF-8 sequence
 * replaced by U+FFFD.  For the summary only: a caller that cut a line at
 * a byte limit inside a character must not lose the whole row.
 */
static char *utf8_repair(const char *s)
{
	size_t n = strlen(s), o = 0;
	char *out = malloc(3 * n + 1);

	if (!out)
		return NULL;
	for (size_t i = 0; i < n;) {
		unsigned char c = (unsigned char)s[i];
		size_t len = c < 0x80		  ? 1
			     : (c & 0xe0) == 0xc0 ? 2
			     : (c & 0xf0) == 0xe0 ? 3
			     : (c & 0xf8) == 0xf0 ? 4
						  : 0;

		if (len && i + len <= n && utf8_valid(s + i, len)) {
			memcpy(out + o, s + i, len);
			o += len;
			i += len;
		} else {
			memcpy(out + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		}
	}
	out[o] = '\0';
	return out;
}

/* Duplicate s, or take the filter's replacement of it. */
static int filtered_dup(struct journal *j, const char *s, char **ret)
{
	char *r = NULL;

	if (!s) {
		*ret = NULL;
		return 0;
	}
	if (j->filter)
		r = j->filter(j->filter_data, s);
	if (!r)
		r = strdup(s);
	if (!r)
		return -ENOMEM;
	*ret = r;
	return 0;
}

static int dup_or_null(const char *s, char **ret)
{
	*ret = NULL;
	if (s && !(*ret = strdup(s)))
		return -ENOMEM;
	return 0;
}

void journal_set_queue_max(struct journal *j, size_t bytes)
{
	pthread_mutex_lock(&j->mu);
	j->queue_max =
	    bytes < JOURNAL_QUEUE_BYTES_MIN ? JOURNAL_QUEUE_BYTES_MIN : bytes;
	pthread_mutex_unlock(&j->mu);
}

bool journal_accepting(struct journal *j)
{
	bool ok;

	pthread_mutex_lock(&j->mu);
	ok =
	    !j->stopping && j->pending.bytes <= j->queue_max - j->queue_max / 4;
	pthread_mutex_unlock(&j->mu);
	return ok;
}

/* journal_append; parsed: detail_json is jansson's own output, valid
 * JSON already (journal_append_json), not parsed again. */
static int64_t append_row(struct journal *j, const char *session,
			  const char *actor, const char *kind,
			  const char *summary, const char *detail_json,
			  bool parsed)
{
	struct journal_event e = {0};
	_cleanup_free_ char *repaired = NULL;
	struct row_view v;
	size_t bytes;
	int64_t id;
	int r;

	if (j->closing)
		return -ESHUTDOWN;
	if ((r = check_text(session, JOURNAL_NAME_MAX, false)) < 0 ||
	    (r = check_text(actor, JOURNAL_NAME_MAX, false)) < 0 ||
	    (r = check_text(kind, JOURNAL_NAME_MAX, true)) < 0 ||
	    (r = check_text(detail_json, JOURNAL_DETAIL_MAX, false)) < 0)
		return r;
	r = check_text(summary, JOURNAL_SUMMARY_MAX, true);
	if (r == -EINVAL && summary) {
		repaired = utf8_repair(summary);
		if (!repaired)
			return -ENOMEM;
		summary = repaired;
	} else if (r < 0) {
		return r;
	}
	if (!*kind)
		return -EINVAL;
	if (detail_json && !parsed) {
		json_t *jv = json_loads(detail_json, JSON_DECODE_ANY, NULL);

		if (!jv)
			return -EINVAL;
		json_decref(jv);
	}
	if ((r = dup_or_null(session, &e.session)) < 0 ||
	    (r = dup_or_null(actor, &e.actor)) < 0 ||
	    (r = dup_or_null(kind, &e.kind)) < 0 ||
	    (r = filtered_dup(j, summary, &e.summary)) < 0 ||
	    (r = filtered_dup(j, detail_json, &e.detail)) < 0)
		goto fail;
	e.time_us = now_us();
	bytes = event_bytes(&e);

	v.time_us = e.time_us;
	v.text[F_SESSION] = e.session;
	v.text[F_ACTOR] = e.actor;
	v.text[F_KIND] = e.kind;
	v.text[F_SUMMARY] = e.summary;
	v.text[F_DETAIL] = e.detail;
	for (int i = 0; i < F_PREV; i++)
		v.len[i] = v.text[i] ? strlen(v.text[i]) : 0;
	v.len[F_PREV] = HASH_HEX;

	pthread_mutex_lock(&j->mu);
	if (j->pending.bytes + bytes > j->queue_max) {
		r = -ENOBUFS;
		goto unlock;
	}
	r = jnl_evvec_reserve(&j->pending, 1);
	if (r < 0)
		goto unlock;
	id = j->last_id + 1;
	e.id = id;
	memcpy(e.prev_hash, j->last_hash, sizeof(e.prev_hash));
	v.id = id;
	v.text[F_PREV] = e.prev_hash;
	jnl_row_hash(&v, id, e.hash);
	j->pending.v[j->pending.n++] = e;
	j->pending.bytes += bytes;
	j->last_id = id;
	memcpy(j->last_hash, e.hash, sizeof(j->last_hash));
	if (j->pending.n == 1) {
		clock_gettime(CLOCK_MONOTONIC, &j->pending_since);
		pthread_cond_signal(&j->wake);
	}
	pthread_mutex_unlock(&j->mu);
	__atomic_add_fetch(&j->count, 1, __ATOMIC_RELAXED);
	return id;
unlock:
	pthread_mutex_unlock(&j->mu);
fail:
	event_clear(&e);
	return r;
}

int64_t journal_append(struct journal *j, const char *session,
		       const char *actor, const char *kind, const char *summary,
		       const char *detail_json)
{
	return append_row(j, session, actor, kind, summary, detail_json, false);
}

int64_t journal_append_json(struct journal *j, const char *session,
			    const char *actor, const char *kind,
			    const char *summary, const json_t *detail,
			    size_t flags)
{
	char *txt = NULL;
	int64_t r;

	if (detail) {
		txt = json_dumps(detail, JSON_COMPACT | flags);
		if (!txt)
			return -ENOMEM;
	}
	r = append_row(j, session, actor, kind, summary, txt, true);
	free(txt);
	return r;
}

int journal_flush(struct journal *j)
{
	int64_t target;
	uint64_t failures;
	int r;

	pthread_mutex_lock(&j->mu);
	target = j->last_id;
	if (target > j->flush_target)
		j->flush_target = target;
	failures = j->failures;
	pthread_cond_signal(&j->wake);
	while (j->synced_id < target && j->failures == failures &&
	       !j->writer_exited)
		pthread_cond_wait(&j->progress, &j->mu);
	if (j->synced_id >= target)
		r = 0;
	else
		r = j->last_err < 0 ? j->last_err : -EIO;
	pthread_mutex_unlock(&j->mu);
	return r;
}

int64_t journal_count(struct journal *j)
{
	return __atomic_load_n(&j->count, __ATOMIC_RELAXED);
}

void journal_head(struct journal *j, int64_t *ret_id, char ret_hash[65])
{
	pthread_mutex_lock(&j->mu);
	*ret_id = j->last_id;
	memcpy(ret_hash, j->last_hash, sizeof(j->last_hash));
	pthread_mutex_unlock(&j->mu);
}

int64_t journal_size_bytes(struct journal *j)
{
	return __atomic_load_n(&j->size, __ATOMIC_RELAXED);
}

void journal_close(struct journal *j, void (*cb)(void *data, int err),
		   void *data)
{
	if (!j || j->closing)
		return;
	j->closing = true;
	j->close_cb = cb;
	j->close_data = data;
	pthread_mutex_lock(&j->mu);
	j->stopping = true;
	pthread_cond_signal(&j->wake);
	pthread_mutex_unlock(&j->mu);
	jnl_maybe_finish_close(j);
}

/*
 * The hash-chained journal.  See journal.h for the threads and the
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
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <sqlite3.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "common/utf8.h"
#include "common/util.h"
#include "daemon/domain/journal.h"

#define HASH_HEX 64
#define HASH_BYTES 32
/* The first row's prev_hash. */
static const char zero_hash[HASH_HEX + 1] =
    "0000000000000000000000000000000000000000000000000000000000000000";
/* Names the encoding, so that a future change of it cannot collide. */
#define HASH_DOMAIN "spd-journal-v1"
#define HEAD_MAGIC "spd-journal-head-v1"
/* A NULL text field, distinct from every length (and from ""). */
#define HASH_NULL UINT64_MAX
/* How long the writer waits before retrying a failed commit or sync. */
#define WRITE_RETRY_MS 100
/*
 * Attempts at a failed commit once journal_close() was called: close must
 * end even when the disk is gone; the rows are then lost and reported.
 */
#define CLOSE_WRITE_ATTEMPTS 3
/* How long a statement waits on a lock held by another connection (an
 * operator's sqlite3 shell, a checkpoint) before failing. */
#define BUSY_TIMEOUT_MS 5000

struct evvec {
	struct journal_event *v;
	size_t n, cap;
	size_t bytes; /* heap bytes of the rows, for the queue's maximum */
};

struct journal {
	uv_loop_t *loop;
	uv_async_t async; /* writer → loop: rows committed, writer exited */
	char *path, *head_path, *head_tmp, *lock_path;
	/*
	 * "<path>.lock", flock'd: one journal per file.  A separate file
	 * because closing any descriptor of the database itself would drop
	 * SQLite's POSIX locks on it.
	 */
	int lock_fd;
	int dir_fd; /* to fsync the head file's rename */

	sqlite3 *db; /* the writer's */
	sqlite3_stmt *insert;

	pthread_mutex_t read_mu;
	sqlite3 *rdb; /* read-only, opened on the first query */

	pthread_t writer;
	pthread_mutex_t mu;
	pthread_cond_t wake;	 /* to the writer: rows queued, flush, stop */
	pthread_cond_t progress; /* from the writer: commit, sync, failure */

	/* Under mu. */
	int64_t last_id;
	char last_hash[HASH_HEX + 1];
	struct evvec pending; /* appended, not yet committed */
	size_t queue_max;     /* most bytes in pending */
	struct evvec done;    /* committed, not yet delivered */
	int64_t committed_id;
	char committed_hash[HASH_HEX + 1];
	int64_t synced_id; /* durable and recorded in the head file */
	int64_t flush_target;
	struct timespec last_sync;
	uint64_t failures;
	int last_err;
	int lost_err;
	bool stopping;
	bool writer_exited;
	bool async_ready; /* the writer may signal the loop */

	/* Atomics, read from any thread. */
	int64_t count;
	int64_t size;

	/* Loop thread only. */
	journal_commit_cb commit_cb;
	void *commit_data;
	char *(*filter)(void *data, const char *text);
	void *filter_data;
	unsigned works;
	bool closing;
	bool close_started;
	void (*close_cb)(void *data, int err);
	void *close_data;
};

/* ---- rows and their hash ---- */

/* The fields of a row as stored, as (pointer, length); NULL for SQL NULL. */
enum { F_SESSION, F_ACTOR, F_KIND, F_SUMMARY, F_DETAIL, F_PREV, F_COUNT };
struct row_view {
	int64_t id;
	int64_t time_us;
	const char *text[F_COUNT];
	size_t len[F_COUNT];
};

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
static void row_hash(const struct row_view *r, int64_t id,
		     char ret[HASH_HEX + 1])
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

static void evvec_free(struct evvec *v)
{
	for (size_t i = 0; i < v->n; i++)
		event_clear(&v->v[i]);
	free(v->v);
	memset(v, 0, sizeof(*v));
}

static int evvec_reserve(struct evvec *v, size_t more)
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
static int evvec_move(struct evvec *dst, struct evvec *src)
{
	if (dst->n == 0) {
		free(dst->v);
		*dst = *src;
		memset(src, 0, sizeof(*src));
		return 0;
	}
	if (evvec_reserve(dst, src->n) < 0)
		return -ENOMEM;
	memcpy(dst->v + dst->n, src->v, src->n * sizeof(*src->v));
	dst->n += src->n;
	dst->bytes += src->bytes;
	free(src->v);
	memset(src, 0, sizeof(*src));
	return 0;
}

static int sqlite_errno(int rc)
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

static int exec(sqlite3 *db, const char *sql)
{
	return sqlite_errno(sqlite3_exec(db, sql, NULL, NULL, NULL));
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
static void column_hash(sqlite3_stmt *st, int col, char out[HASH_HEX + 1])
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

static struct timespec mono_after(const struct timespec *t, long ms)
{
	struct timespec r = *t;

	r.tv_sec += ms / 1000;
	r.tv_nsec += (ms % 1000) * 1000000L;
	if (r.tv_nsec >= 1000000000L) {
		r.tv_sec++;
		r.tv_nsec -= 1000000000L;
	}
	return r;
}

static bool mono_reached(const struct timespec *deadline)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > deadline->tv_sec ||
	       (now.tv_sec == deadline->tv_sec &&
		now.tv_nsec >= deadline->tv_nsec);
}

/* ---- the head file ---- */

static int head_read(const char *head_path, int64_t *ret_id,
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
static int head_write(struct journal *j, int64_t id, const char *hash)
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

/* ---- the writer thread ---- */

static void update_size(struct journal *j)
{
	struct stat st;
	int64_t size = 0;
	char wal[PATH_MAX];

	if (stat(j->path, &st) == 0)
		size += st.st_size;
	if ((size_t)snprintf(wal, sizeof(wal), "%s-wal", j->path) <
		sizeof(wal) &&
	    stat(wal, &st) == 0)
		size += st.st_size;
	__atomic_store_n(&j->size, size, __ATOMIC_RELAXED);
}

/* One transaction for the whole batch: the group commit. */
static int write_batch(struct journal *j, const struct evvec *b)
{
	sqlite3_stmt *st = j->insert;
	int r;

	r = exec(j->db, "BEGIN IMMEDIATE");
	if (r < 0)
		return r;
	for (size_t i = 0; i < b->n; i++) {
		const struct journal_event *e = &b->v[i];

		sqlite3_bind_int64(st, 1, e->id);
		sqlite3_bind_int64(st, 2, e->time_us);
		sqlite3_bind_text(st, 3, e->session, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 4, e->actor, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 5, e->kind, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 6, e->summary, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 7, e->detail, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 8, e->prev_hash, HASH_HEX, SQLITE_STATIC);
		sqlite3_bind_text(st, 9, e->hash, HASH_HEX, SQLITE_STATIC);
		r = sqlite_errno(sqlite3_step(st));
		sqlite3_reset(st);
		if (r < 0)
			goto out;
	}
	sqlite3_clear_bindings(st);
	r = exec(j->db, "COMMIT");
out:
	if (r < 0) {
		sqlite3_clear_bindings(st);
		exec(j->db, "ROLLBACK");
	}
	return r;
}

/*
 * Make every committed row durable.  With synchronous=NORMAL a commit
 * only writes the WAL; syncing the WAL (through SQLite's own handle)
 * covers every frame so far, and checkpoints already synced the rest into
 * the database file.
 */
static int sync_db(struct journal *j)
{
	static const int ops[] = {SQLITE_FCNTL_JOURNAL_POINTER,
				  SQLITE_FCNTL_FILE_POINTER};

	for (size_t i = 0; i < ARRAY_SIZE(ops); i++) {
		sqlite3_file *f = NULL;
		int rc;

		if (sqlite3_file_control(j->db, "main", ops[i], &f) !=
			SQLITE_OK ||
		    !f || !f->pMethods)
			continue;
		rc = f->pMethods->xSync(f, SQLITE_SYNC_NORMAL);
		if (rc != SQLITE_OK)
			return sqlite_errno(rc);
	}
	return 0;
}

static void writer_wait(struct journal *j, long ms)
{
	struct timespec now, deadline;

	clock_gettime(CLOCK_MONOTONIC, &now);
	deadline = mono_after(&now, ms);
	pthread_cond_timedwait(&j->wake, &j->mu, &deadline);
}

/* Whether committed rows should be synced and the head recorded now. */
static bool sync_due(struct journal *j)
{
	struct timespec deadline;

	if (j->committed_id <= j->synced_id)
		return false;
	if (j->flush_target > j->synced_id || j->stopping)
		return true;
	deadline = mono_after(&j->last_sync, JOURNAL_SYNC_INTERVAL_MS);
	return mono_reached(&deadline);
}

static void *writer_main(void *arg)
{
	struct journal *j = arg;
	unsigned close_attempts = 0;
	bool async_ready;

	pthread_mutex_lock(&j->mu);
	for (;;) {
		if (j->pending.n > 0) {
			struct evvec batch = j->pending;
			int r;

			memset(&j->pending, 0, sizeof(j->pending));
			pthread_mutex_unlock(&j->mu);
			r = write_batch(j, &batch);
			if (r == 0)
				update_size(j);
			pthread_mutex_lock(&j->mu);
			if (r < 0) {
				/* Keep the rows, in order, ahead of newer ones:
				 * the chain in memory already links to them. */
				if (evvec_move(&batch, &j->pending) == 0) {
					j->pending = batch;
				} else {
					/* Out of memory: the rows are lost and
					 * verify will report the gap. */
					evvec_free(&batch);
					j->lost_err = -ENOMEM;
				}
				j->last_err = r;
				j->failures++;
				pthread_cond_broadcast(&j->progress);
				if (j->stopping &&
				    ++close_attempts >= CLOSE_WRITE_ATTEMPTS) {
					j->lost_err = r;
					evvec_free(&j->pending);
					break;
				}
				writer_wait(j, WRITE_RETRY_MS);
				continue;
			}
			j->committed_id = batch.v[batch.n - 1].id;
			memcpy(j->committed_hash, batch.v[batch.n - 1].hash,
			       HASH_HEX + 1);
			batch.bytes = 0;
			if (evvec_move(&j->done, &batch) < 0)
				evvec_free(&batch); /* nobody hears of them */
			uv_async_send(&j->async);
			pthread_cond_broadcast(&j->progress);
		}
		if (sync_due(j)) {
			int64_t id = j->committed_id;
			char hash[HASH_HEX + 1];
			int r;

			memcpy(hash, j->committed_hash, sizeof(hash));
			pthread_mutex_unlock(&j->mu);
			r = sync_db(j);
			if (r == 0)
				r = head_write(j, id, hash);
			pthread_mutex_lock(&j->mu);
			clock_gettime(CLOCK_MONOTONIC, &j->last_sync);
			if (r < 0) {
				j->last_err = r;
				j->failures++;
				pthread_cond_broadcast(&j->progress);
				if (j->stopping &&
				    ++close_attempts >= CLOSE_WRITE_ATTEMPTS) {
					j->lost_err = r;
					break;
				}
				writer_wait(j, WRITE_RETRY_MS);
				continue;
			}
			j->synced_id = id;
			pthread_cond_broadcast(&j->progress);
		}
		if (j->pending.n > 0)
			continue;
		if (j->stopping && j->committed_id <= j->synced_id)
			break;
		if (j->committed_id > j->synced_id) {
			struct timespec deadline =
			    mono_after(&j->last_sync, JOURNAL_SYNC_INTERVAL_MS);

			pthread_cond_timedwait(&j->wake, &j->mu, &deadline);
		} else {
			pthread_cond_wait(&j->wake, &j->mu);
		}
	}
	pthread_mutex_unlock(&j->mu);

	sqlite3_finalize(j->insert);
	j->insert = NULL;
	sqlite3_close(j->db);
	j->db = NULL;
	update_size(j);

	pthread_mutex_lock(&j->mu);
	j->writer_exited = true;
	async_ready = j->async_ready;
	pthread_cond_broadcast(&j->progress);
	pthread_mutex_unlock(&j->mu);
	if (async_ready)
		uv_async_send(&j->async);
	return NULL;
}

/* ---- the loop side ---- */

static void journal_free(struct journal *j)
{
	if (!j)
		return;
	evvec_free(&j->pending);
	evvec_free(&j->done);
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

static void maybe_finish_close(struct journal *j)
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
	evvec_free(&done);
	maybe_finish_close(j);
}

static char *path_suffix(const char *path, const char *suffix)
{
	char *s;

	if (asprintf(&s, "%s%s", path, suffix) < 0)
		return NULL;
	return s;
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

	r = sqlite_errno(sqlite3_prepare_v2(
	    j->db, "SELECT id, hash FROM events ORDER BY id DESC LIMIT 1", -1,
	    &st, NULL));
	if (r < 0)
		goto out;
	j->last_id = 0;
	memcpy(j->last_hash, zero_hash, sizeof(zero_hash));
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		j->last_id = sqlite3_column_int64(st, 0);
		column_hash(st, 1, j->last_hash);
		if (j->last_id <= 0 || !j->last_hash[0]) {
			r = -SPD_ECORRUPT;
			goto out;
		}
	} else if ((r = sqlite_errno(rc)) < 0) {
		goto out;
	}
	sqlite3_finalize(st);
	st = NULL;

	r = sqlite_errno(sqlite3_prepare_v2(
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

	r = head_read(j->head_path, &head_id, head_hash);
	if (r == -ENOENT && j->last_id == 0) {
		/* A new journal: record its empty head at once, so that a
		 * head file that goes missing later is itself evidence. */
		r = head_write(j, 0, zero_hash);
		if (r < 0)
			goto out;
		memcpy(head_hash, zero_hash, sizeof(zero_hash));
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

		r = sqlite_errno(sqlite3_prepare_v2(
		    j->db, "SELECT hash FROM events WHERE id = ?", -1, &st,
		    NULL));
		if (r < 0)
			goto out;
		sqlite3_bind_int64(st, 1, head_id);
		if (sqlite3_step(st) != SQLITE_ROW) {
			r = -SPD_ECORRUPT;
			goto out;
		}
		column_hash(st, 0, stored);
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

static int open_db(struct journal *j)
{
	sqlite3_stmt *st = NULL;
	int r;

	r = sqlite_errno(
	    sqlite3_open_v2(j->path, &j->db,
			    SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL));
	if (r < 0)
		return r;
	sqlite3_extended_result_codes(j->db, 0);
	sqlite3_busy_timeout(j->db, BUSY_TIMEOUT_MS);
	r = sqlite_errno(sqlite3_prepare_v2(j->db, "PRAGMA journal_mode=WAL",
					    -1, &st, NULL));
	if (r < 0)
		return r;
	if (sqlite3_step(st) != SQLITE_ROW ||
	    strcmp((const char *)sqlite3_column_text(st, 0), "wal") != 0) {
		sqlite3_finalize(st);
		return -EIO;
	}
	sqlite3_finalize(st);
	r = exec(j->db, "PRAGMA synchronous=NORMAL");
	if (r < 0)
		return r;
	r = exec(j->db, schema);
	if (r < 0)
		return r;
	r = load_tip(j);
	if (r < 0)
		return r;
	return sqlite_errno(sqlite3_prepare_v3(
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
	j->head_path = path_suffix(path, ".head");
	j->head_tmp = path_suffix(path, ".head.tmp");
	j->lock_path = path_suffix(path, ".lock");
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
	update_size(j);

	/* Signals belong to the loop thread.  The writer starts before the
	 * async handle exists, so that a failure to start either leaves
	 * nothing for the loop to close; it signals the loop only for rows
	 * committed, and none can be queued before this returns. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = -pthread_create(&j->writer, NULL, writer_main, j);
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

int64_t journal_append(struct journal *j, const char *session,
		       const char *actor, const char *kind, const char *summary,
		       const char *detail_json)
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
	if (detail_json) {
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
	r = evvec_reserve(&j->pending, 1);
	if (r < 0)
		goto unlock;
	id = j->last_id + 1;
	e.id = id;
	memcpy(e.prev_hash, j->last_hash, sizeof(e.prev_hash));
	v.id = id;
	v.text[F_PREV] = e.prev_hash;
	row_hash(&v, id, e.hash);
	j->pending.v[j->pending.n++] = e;
	j->pending.bytes += bytes;
	j->last_id = id;
	memcpy(j->last_hash, e.hash, sizeof(j->last_hash));
	if (j->pending.n == 1)
		pthread_cond_signal(&j->wake);
	pthread_mutex_unlock(&j->mu);
	__atomic_add_fetch(&j->count, 1, __ATOMIC_RELAXED);
	return id;
unlock:
	pthread_mutex_unlock(&j->mu);
fail:
	event_clear(&e);
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
	maybe_finish_close(j);
}

/* ---- reading: queries and verification ---- */

static int open_readonly(const char *path, sqlite3 **ret)
{
	sqlite3 *db = NULL;
	int r;

	if (access(path, F_OK) < 0)
		return -errno;
	r = sqlite_errno(sqlite3_open_v2(
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

static int run_query(sqlite3 *db, const struct journal_filter *f,
		     struct evvec *ret)
{
	sqlite3_stmt *st = NULL;
	struct evvec res = {0};
	int r, rc, limit = f->limit;

	if (limit <= 0 || limit > JOURNAL_QUERY_LIMIT_MAX)
		limit = JOURNAL_QUERY_LIMIT_MAX;
	r = sqlite_errno(sqlite3_prepare_v2(
	    db, f->since < 0 ? tail_sql : query_sql, -1, &st, NULL));
	if (r < 0)
		goto out;
	sqlite3_bind_int64(st, 1, f->since);
	sqlite3_bind_text(st, 2, f->kind, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, f->session, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 4, limit);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct journal_event *e;

		r = evvec_reserve(&res, 1);
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
		column_hash(st, 7, e->prev_hash);
		column_hash(st, 8, e->hash);
		if (!e->kind || !e->summary ||
		    (sqlite3_column_type(st, 2) != SQLITE_NULL &&
		     !e->session) ||
		    (sqlite3_column_type(st, 3) != SQLITE_NULL && !e->actor) ||
		    (sqlite3_column_type(st, 6) != SQLITE_NULL && !e->detail)) {
			r = -ENOMEM;
			goto out;
		}
	}
	r = sqlite_errno(rc);
	if (r < 0)
		goto out;
	*ret = res;
	memset(&res, 0, sizeof(res));
out:
	sqlite3_finalize(st);
	evvec_free(&res);
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
		column_hash(st, 0, out);
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

	row_hash(v, id + 1, shifted);
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

	hr = head_read(head_path, &head_id, head_hash);
	if (hr < 0 && hr != -ENOENT && hr != -SPD_ECORRUPT)
		return hr;
	memcpy(expect_prev, zero_hash, sizeof(zero_hash));
	memcpy(pprev, zero_hash, sizeof(zero_hash));

	e = exec(db, "BEGIN");
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
		column_hash(st, 7, prev);
		column_hash(st, 8, stored);
		row_hash(&v, id, computed);

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
	exec(db, "COMMIT");
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
	head = path_suffix(path, ".head");
	if (!head)
		return -ENOMEM;
	r = open_readonly(path, &db);
	if (r < 0)
		return r;
	r = verify_db(db, head, ret);
	sqlite3_close(db);
	return r;
}

enum work_kind { WORK_QUERY, WORK_VERIFY };

struct work {
	uv_work_t req;
	struct journal *j;
	enum work_kind kind;
	struct journal_filter filter;
	char *kind_filter, *session_filter;
	journal_query_cb query_cb;
	journal_verify_cb verify_cb;
	void *data;
	int err;
	struct evvec res;
	struct journal_verify_result vr;
};

static void work_run(uv_work_t *req)
{
	struct work *w = req->data;
	struct journal *j = w->j;

	if (w->kind == WORK_VERIFY) {
		w->err = journal_verify_path(j->path, &w->vr);
		return;
	}
	pthread_mutex_lock(&j->read_mu);
	if (!j->rdb)
		w->err = open_readonly(j->path, &j->rdb);
	if (w->err == 0)
		w->err = run_query(j->rdb, &w->filter, &w->res);
	pthread_mutex_unlock(&j->read_mu);
}

static void work_done(uv_work_t *req, int status)
{
	struct work *w = req->data;
	struct journal *j = w->j;

	if (status < 0 && w->err == 0)
		w->err = status;
	if (w->kind == WORK_QUERY) {
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
	evvec_free(&w->res);
	free(w->kind_filter);
	free(w->session_filter);
	free(w);
	j->works--;
	maybe_finish_close(j);
}

static int work_queue(struct journal *j, struct work *w)
{
	int r;

	w->req.data = w;
	w->j = j;
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

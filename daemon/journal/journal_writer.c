/*
 * The journal's writer thread: it takes the appended rows off the queue,
 * commits them in batches (group commit), syncs and records the chain's
 * durable tip in the head file, retrying what fails; the loop hears of
 * commits through an async handle.  Part of the journal (journal_priv.h;
 * the locking is described atop journal.c); see journal.h.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/util.h"
#include "daemon/journal/journal.h"
#include "daemon/journal/journal_priv.h"

/* How long the writer waits before retrying a failed commit or sync. */
#define WRITE_RETRY_MS 100
/*
 * Attempts at a failed commit once journal_close() was called: close must
 * end even when the disk is gone; the rows are then lost and reported.
 */
#define CLOSE_WRITE_ATTEMPTS 3

struct timespec jnl_mono_after(const struct timespec *t, long ms)
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

/* ---- the writer thread ---- */

void jnl_update_size(struct journal *j)
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

	r = jnl_exec(j->db, "BEGIN IMMEDIATE");
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
		r = jnl_sqlite_errno(sqlite3_step(st));
		sqlite3_reset(st);
		if (r < 0)
			goto out;
	}
	sqlite3_clear_bindings(st);
	r = jnl_exec(j->db, "COMMIT");
out:
	if (r < 0) {
		sqlite3_clear_bindings(st);
		jnl_exec(j->db, "ROLLBACK");
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
			return jnl_sqlite_errno(rc);
	}
	return 0;
}

static void writer_wait(struct journal *j, long ms)
{
	struct timespec now, deadline;

	clock_gettime(CLOCK_MONOTONIC, &now);
	deadline = jnl_mono_after(&now, ms);
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
	deadline = jnl_mono_after(&j->last_sync, JOURNAL_SYNC_INTERVAL_MS);
	return mono_reached(&deadline);
}

void *jnl_writer_main(void *arg)
{
	struct journal *j = arg;
	unsigned close_attempts = 0;
	bool async_ready;

	pthread_mutex_lock(&j->mu);
	for (;;) {
		/* The group commit's window (journal.h): a row waits up to
		 * JOURNAL_GROUP_MS for the rows after it, unless somebody
		 * waits for it (a flush, a query) or spd is stopping. */
		if (j->pending.n > 0 && !j->stopping &&
		    j->flush_target <= j->committed_id &&
		    j->commit_target <= j->committed_id &&
		    j->pending.bytes < JOURNAL_GROUP_BYTES) {
			struct timespec due =
			    jnl_mono_after(&j->pending_since, JOURNAL_GROUP_MS);

			if (!mono_reached(&due)) {
				pthread_cond_timedwait(&j->wake, &j->mu, &due);
				continue;
			}
		}
		if (j->pending.n > 0) {
			struct evvec batch = j->pending;
			int r;

			memset(&j->pending, 0, sizeof(j->pending));
			pthread_mutex_unlock(&j->mu);
			r = write_batch(j, &batch);
			if (r == 0)
				jnl_update_size(j);
			pthread_mutex_lock(&j->mu);
			if (r < 0) {
				/* Keep the rows, in order, ahead of newer ones:
				 * the chain in memory already links to them. */
				if (jnl_evvec_move(&batch, &j->pending) == 0) {
					j->pending = batch;
				} else {
					/* Out of memory: the rows are lost and
					 * verify will report the gap. */
					jnl_evvec_free(&batch);
					j->lost_err = -ENOMEM;
				}
				j->last_err = r;
				j->failures++;
				j->stalled = true;
				pthread_cond_broadcast(&j->progress);
				if (j->stopping &&
				    ++close_attempts >= CLOSE_WRITE_ATTEMPTS) {
					j->lost_err = r;
					jnl_evvec_free(&j->pending);
					break;
				}
				writer_wait(j, WRITE_RETRY_MS);
				continue;
			}
			j->stalled = false;
			j->committed_id = batch.v[batch.n - 1].id;
			memcpy(j->committed_hash, batch.v[batch.n - 1].hash,
			       HASH_HEX + 1);
			batch.bytes = 0;
			if (jnl_evvec_move(&j->done, &batch) < 0)
				jnl_evvec_free(
				    &batch); /* nobody hears of them */
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
				r = jnl_head_write(j, id, hash);
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
			struct timespec deadline = jnl_mono_after(
			    &j->last_sync, JOURNAL_SYNC_INTERVAL_MS);

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
	jnl_update_size(j);

	pthread_mutex_lock(&j->mu);
	j->writer_exited = true;
	async_ready = j->async_ready;
	pthread_cond_broadcast(&j->progress);
	pthread_mutex_unlock(&j->mu);
	if (async_ready)
		uv_async_send(&j->async);
	return NULL;
}

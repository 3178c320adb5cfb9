/*
 * What the parts of the journal share, and nothing outside them includes:
 * the journal's structure, a row as hashed, and the helpers more than one
 * part calls.  The parts are journal.c (rows and their hash, the head
 * file, the loop side), journal_writer.c (the writer thread) and
 * journal_read.c (queries and verification); the interface is journal.h,
 * the locking is described atop journal.c.
 */
#ifndef SPD_DAEMON_JOURNAL_PRIV_H
#define SPD_DAEMON_JOURNAL_PRIV_H

#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <uv.h>

#include "daemon/journal/journal.h"

#define HASH_HEX 64
/* The first row's prev_hash. */
static const char jnl_zero_hash[HASH_HEX + 1] =
    "0000000000000000000000000000000000000000000000000000000000000000";
/* How long a statement waits on a lock held by another connection (an
 * operator's sqlite3 shell, a checkpoint) before failing. */
#define BUSY_TIMEOUT_MS 5000
/* The longest a query waits for the rows queued before it (journal.h):
 * a healthy writer commits them in milliseconds; a stalled one (the
 * database locked, the disk full) is not waited for. */
#define READ_WAIT_MS 500

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
	struct evvec pending;	       /* appended, not yet committed */
	struct timespec pending_since; /* the first of them appended */
	size_t queue_max;	       /* most bytes in pending */
	struct evvec done;	       /* committed, not yet delivered */
	int64_t committed_id;
	char committed_hash[HASH_HEX + 1];
	int64_t synced_id; /* durable and recorded in the head file */
	int64_t flush_target;
	int64_t commit_target; /* a reader waits for it: commit, no sync */
	bool stalled;	       /* the last commit failed; none since */
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

/* The fields of a row as stored, as (pointer, length); NULL for SQL NULL. */
enum { F_SESSION, F_ACTOR, F_KIND, F_SUMMARY, F_DETAIL, F_PREV, F_COUNT };
struct row_view {
	int64_t id;
	int64_t time_us;
	const char *text[F_COUNT];
	size_t len[F_COUNT];
};

/* ---- journal.c ---- */

/*
 * The row's hash, in hex: the canonical encoding is the domain string,
 * then id and time as 8-byte big-endian integers, then each text field
 * as an 8-byte big-endian length and its bytes.
 */
void jnl_row_hash(const struct row_view *r, int64_t id, char ret[HASH_HEX + 1]);
/* Free every row of v and its array; v is left empty. */
void jnl_evvec_free(struct evvec *v);
/* Room for more rows in v: 0 or -ENOMEM. */
int jnl_evvec_reserve(struct evvec *v, size_t more);
/* Move all of src's rows to the end of dst; src is left empty.  0 or
 * -ENOMEM (then both are as they were). */
int jnl_evvec_move(struct evvec *dst, struct evvec *src);
/* A SQLite result code as 0 or a negative errno (-SPD_ECORRUPT for a
 * damaged database). */
int jnl_sqlite_errno(int rc);
/* Run sql on db: 0 or a negative errno (jnl_sqlite_errno). */
int jnl_exec(sqlite3 *db, const char *sql);
/* Copy a stored hash column into out ("" when it is not a hash). */
void jnl_column_hash(sqlite3_stmt *st, int col, char out[HASH_HEX + 1]);
/* Read the head file: the id and hash of the last row known durable.
 * 0, a negative errno, or -SPD_ECORRUPT when it is not a head file. */
int jnl_head_read(const char *head_path, int64_t *ret_id,
		  char ret_hash[HASH_HEX + 1]);
/* Replace the head file atomically and durably: a reader sees the old or
 * the new head, and after a power loss the head is one that was synced. */
int jnl_head_write(struct journal *j, int64_t id, const char *hash);
/* Loop thread: once journal_close() was called, no query or verification
 * is under way and the writer has exited with its rows delivered, join
 * it and close the async handle (which then frees j and calls the close
 * callback); otherwise nothing. */
void jnl_maybe_finish_close(struct journal *j);
/* path with suffix appended (a new string), or NULL. */
char *jnl_path_suffix(const char *path, const char *suffix);

/* ---- journal_writer.c ---- */

/* Record the database's size and its WAL's in j->size. */
void jnl_update_size(struct journal *j);
/* The writer thread (pthread_create's start routine, arg the journal). */
void *jnl_writer_main(void *arg);

/* t plus ms, on CLOCK_MONOTONIC (the conditions' clock). */
struct timespec jnl_mono_after(const struct timespec *t, long ms);

#endif

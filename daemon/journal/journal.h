/*
 * The journal: spd's append-only, hash-chained record of every request,
 * decision and run, in SQLite (WAL) in the state dir.
 *
 * Each row's hash is the lowercase hex of an unkeyed BLAKE2b-256
 * (libsodium crypto_generichash) over this canonical encoding, where u64
 * is 8 bytes big-endian and str(s) is u64(length of s) then its bytes, or
 * u64(2^64 - 1) alone for NULL:
 *   str("spd-journal-v1") u64(id) u64(time) str(session) str(actor)
 *   str(kind) str(summary) str(detail) str(prev_hash)
 * prev_hash is the hash of the row before (64 zeros for row 1).  Editing,
 * deleting, inserting or reordering rows therefore breaks the chain.  The
 * chain alone cannot show that its tail was cut off, so the journal also
 * keeps a recorded head (last durable id and hash) in "<path>.head",
 * replaced atomically; verify reports a chain that ends below it.  Without
 * a secret key a hash chain cannot stop someone who rewrites every row
 * from some point on and the head file too: the head file and the
 * database should be backed up or shipped elsewhere for that.
 *
 * Threads.  journal_append() never touches the disk: it assigns the id and
 * computes the hash in memory under a mutex and queues the row.  A writer
 * thread commits whatever is queued in one transaction per burst (group
 * commit).  Committed rows are then handed back on the loop thread to the
 * commit callback.  Queries and verification run on libuv's thread pool.
 * All functions except journal_verify_path() are called on the loop thread.
 *
 * The writer waits JOURNAL_GROUP_MS after the first row of a burst
 * before it commits, so that the burst goes in one transaction and the
 * commit does not compete for the CPU with what the rows are about (a
 * run's start, on a machine of two cores).  A query, a verification, a
 * flush or spd's stop has whatever is queued committed at once: a reader
 * never misses a row appended before it asked.
 *
 * Durability (WAL, synchronous=NORMAL):
 *  - A crash of spd (even SIGKILL) loses only rows still queued in memory
 *    — those appended after the writer's last commit, at most the last
 *    JOURNAL_GROUP_MS and the commit's own time.  Committed transactions are in the OS page cache and
 *    survive; a transaction is all or nothing, so the chain always verifies
 *    and the next start continues it.
 *  - A power loss or kernel crash can also lose committed rows that were
 *    not yet synced: at most JOURNAL_SYNC_INTERVAL_MS of them.  The writer
 *    fsyncs the WAL at that interval (and on journal_flush() and
 *    journal_close()) and only then records the head, so the head never
 *    claims a row the disk may not hold and a power loss never looks like
 *    tampering.  The price: truncating rows newer than the recorded head
 *    (the last sync interval) is not detected.
 */
#ifndef SPD_DAEMON_JOURNAL_H
#define SPD_DAEMON_JOURNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

/*
 * How often committed rows are made durable and the head file rewritten.
 * Bounds what a power loss can lose, and how long a truncated tail can go
 * unnoticed; one fsync of the WAL and two of the head per interval cost
 * nothing measurable.
 */
#define JOURNAL_SYNC_INTERVAL_MS 250
/* The group commit's window, and the queued bytes that end it early. */
#define JOURNAL_GROUP_MS 5
#define JOURNAL_GROUP_BYTES (256 * 1024)
/*
 * Most rows one journal_query() returns: a page of results must fit a
 * reply frame (1 MiB) with room for typical summaries; page with "since".
 */
#define JOURNAL_QUERY_LIMIT_MAX 1000
/* Longest session, actor or kind: they are names, not payloads. */
#define JOURNAL_NAME_MAX 256
/* Longest summary: one line for a human, not a transcript. */
#define JOURNAL_SUMMARY_MAX (64 * 1024)
/* Longest detail: never more than a request frame can carry. */
#define JOURNAL_DETAIL_MAX (1024 * 1024)
/*
 * Most bytes of rows waiting for the writer, by default (spd.conf
 * journal.queue-max).  When the disk stalls (full, slow), appends fail
 * with -ENOBUFS instead of growing spd without bound, and from three
 * quarters of it journal_accepting() says no: spd then refuses requests
 * rather than carry them out unjournaled.
 */
#define JOURNAL_QUEUE_BYTES_MAX (64 * 1024 * 1024)
#define JOURNAL_QUEUE_BYTES_MIN (64 * 1024)

struct journal;

/* One row.  Strings are NUL-terminated; session, actor and detail may be
 * NULL, kind and summary never are.  detail is JSON text. */
struct journal_event {
	int64_t id;
	int64_t time_us; /* microseconds since the Unix epoch */
	char *session;
	char *actor;
	char *kind;
	char *summary;
	char *detail;
	char prev_hash[65]; /* lowercase hex, NUL-terminated */
	char hash[65];
};

/*
 * Called on the loop thread after rows were committed, with the rows of
 * one or more commits in id order.  evs is owned by the journal and valid
 * only during the call.
 */
typedef void (*journal_commit_cb)(void *data, const struct journal_event *evs,
				  size_t n);

/*
 * Open (creating if needed, mode 0600) the journal database at path, its
 * head file "<path>.head", and start the writer thread.  The chain
 * continues from the last row.  Blocks on disk: call it at start-up.
 * Returns 0 and *ret, or -errno; -EBUSY when another journal (another spd)
 * has the file open; -SPD_ECORRUPT when the rows end below the recorded
 * head, the row at the head differs from it, or rows exist and the head
 * file is missing — continuing would overwrite that evidence, so the file
 * must be moved aside (journal_verify_path() says what is wrong).
 */
int journal_open(uv_loop_t *loop, const char *path, struct journal **ret);

/*
 * Who holds the journal, for the next spd that finds it taken (-EBUSY
 * from journal_open): writes text (one line, such as the pid and the
 * socket) into its lock file "<path>.lock".  Returns 0 or -errno.
 */
int journal_set_holder(struct journal *j, const char *text);

/* What journal_set_holder wrote for the journal at path, with no
 * newline (malloc'd), or NULL. */
char *journal_read_holder(const char *path);

/* The most bytes of rows waiting for the writer (default
 * JOURNAL_QUEUE_BYTES_MAX, at least JOURNAL_QUEUE_BYTES_MIN). */
void journal_set_queue_max(struct journal *j, size_t bytes);

/*
 * Whether a request may be carried out: true while the rows waiting for
 * the writer leave a quarter of the queue free, room for the rows one
 * request appends.  False when the disk has stalled (or the journal is
 * closed).  Thread-safe.
 */
bool journal_accepting(struct journal *j);

/* Set (or clear, with cb NULL) the commit callback. */
void journal_set_commit_cb(struct journal *j, journal_commit_cb cb, void *data);

/*
 * Set (or clear, with fn NULL) the filter applied to summary and detail
 * before they are hashed and stored — the redactor.  fn returns a malloc'd
 * replacement text (the journal frees it) or NULL to keep the text as is.
 * It runs on the caller's thread inside journal_append().
 */
void journal_set_filter(struct journal *j,
			char *(*fn)(void *data, const char *text), void *data);

/*
 * Append one event.  kind and summary are required; session, actor and
 * detail_json may be NULL.  All text must be valid UTF-8 and detail_json
 * valid JSON, except that invalid bytes in the summary are stored as
 * U+FFFD (a summary cut inside a character still gets its row).  The
 * filter then sees the summary and detail.  Nothing is written before
 * this returns: the
 * row is queued for the writer thread.  The strings are copied.
 * Returns the new row's id (> 0), or -EINVAL (bad text or JSON), -E2BIG (a
 * field over its limit), -ENOBUFS (the writer is behind by
 * the queue's maximum), -ESHUTDOWN (journal_close() was called) or
 * -ENOMEM.
 */
int64_t journal_append(struct journal *j, const char *session,
		       const char *actor, const char *kind, const char *summary,
		       const char *detail_json);
/* journal_append with detail (NULL allowed) as jansson writes it
 * (compact, with json_dumps's flags besides), which is valid JSON as
 * made: it is not parsed again, the cost of a row every request, run and
 * model call writes. */
int64_t journal_append_json(struct journal *j, const char *session,
			    const char *actor, const char *kind,
			    const char *summary, const json_t *detail,
			    size_t flags);

/*
 * Block until every row appended so far is committed, synced and recorded
 * in the head file.  For tests and tools; spd itself uses journal_close().
 * Returns 0, or the -errno of a failed write (the rows stay queued and the
 * writer keeps retrying).
 */
int journal_flush(struct journal *j);

/* Number of events in the journal, including rows still queued. */
int64_t journal_count(struct journal *j);
/*
 * The chain's tip: the id and hash of the last row appended (queued rows
 * included; 0 and the zero hash for an empty journal).  What a signed
 * statement names so that the journal can be matched against it.
 */
void journal_head(struct journal *j, int64_t *ret_id, char ret_hash[65]);
/* Size of the database and its WAL in bytes, as of the last commit. */
int64_t journal_size_bytes(struct journal *j);

/*
 * What journal_query() returns: rows with id > since (since < 0: the last
 * limit rows), whose kind and session equal the given strings (NULL: any),
 * in id order, at most limit rows (<= 0 or above JOURNAL_QUERY_LIMIT_MAX:
 * JOURNAL_QUERY_LIMIT_MAX).
 */
struct journal_filter {
	int64_t since;
	const char *kind;
	const char *session;
	int limit;
};

/*
 * Called on the loop thread with a query's outcome: err 0 and n rows, or
 * a -errno and no rows.  evs is owned by the journal and valid only during
 * the call.
 */
typedef void (*journal_query_cb)(void *data, int err,
				 const struct journal_event *evs, size_t n);

/*
 * Run a query on the thread pool over committed rows (not those still
 * queued) on a read-only connection.  The filter's strings are copied.
 * Returns 0 (cb will be called exactly once, before journal_close()'s
 * callback), or -ESHUTDOWN / -ENOMEM / -EINVAL (cb is not called).
 */
int journal_query(struct journal *j, const struct journal_filter *f,
		  journal_query_cb cb, void *data);

/* A session's rows: how many, and the first's and last's id and hash
 * (0 and "" when it has none). */
struct journal_span {
	int64_t rows;
	int64_t first_id, last_id;
	char first_hash[65], last_hash[65];
};

/* Called on the loop thread with a span's outcome: err 0 and span (valid
 * during the call), or a -errno and NULL. */
typedef void (*journal_span_cb)(void *data, int err,
				const struct journal_span *span);

/*
 * The span of session's rows, read on the thread pool through the index
 * on (session, id) from committed rows, after the rows appended before
 * the call are committed (as journal_query).  What a signed statement
 * names so that the journal's rows of the session can be matched
 * against it.  Returns 0 (cb will be called exactly once, before
 * journal_close()'s callback), or -ESHUTDOWN / -ENOMEM / -EINVAL (cb is
 * not called).
 */
int journal_session_span(struct journal *j, const char *session,
			 journal_span_cb cb, void *data);

/*
 * The outcome of a verification.  When ok is false, first_bad_id names
 * the first bad row (for "deleted" and "truncated": the first missing id)
 * and reason is one of "edited", "deleted", "inserted", "reordered",
 * "truncated", "head-missing", "unreadable"; detail says it in a sentence.
 */
struct journal_verify_result {
	bool ok;
	int64_t checked; /* rows whose hash and linkage were checked */
	int64_t first_bad_id;
	char reason[16];
	char detail[160];
};

typedef void (*journal_verify_cb)(void *data,
				  const struct journal_verify_result *r);

/*
 * Verify the committed chain against the head file on the thread pool; cb
 * gets the result on the loop thread (r valid during the call).  Returns 0
 * (cb will be called once, before journal_close()'s callback), or
 * -ESHUTDOWN / -ENOMEM.
 */
int journal_verify(struct journal *j, journal_verify_cb cb, void *data);

/*
 * Verify the journal at path synchronously, read-only; safe while spd runs.
 * Returns 0 and fills *ret (ok or not), or -errno when the database cannot
 * be opened at all (-ENOENT when it does not exist).
 */
int journal_verify_path(const char *path, struct journal_verify_result *ret);

/*
 * Commit everything queued, sync it and record the head, stop the writer,
 * wait for running queries and verifications (their callbacks are called
 * first; the commit callback may also still be called), close the
 * databases and the libuv handles, then call cb with 0 or the -errno of a
 * write that failed (rows lost), and free the journal.  NULL j is allowed
 * (cb is not called).  Until cb, appends, queries and verifications
 * return -ESHUTDOWN; after cb, j is gone.
 */
void journal_close(struct journal *j, void (*cb)(void *data, int err),
		   void *data);

#endif

/*
 * Unit tests for daemon/journal: group commit from a libuv loop, the
 * commit callback, every tamper case verify must name, a SIGKILL in the
 * middle of a burst, the filter hook, queries, and a clean close.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "tests/lib/testlib.h"
#include "common/util.h"
#include "daemon/journal/journal.h"

/* Rows in the tamper fixtures: enough for a middle and an end. */
#define TAMPER_ROWS 20
/* Rows appended per loop iteration in the burst tests. */
#define BURST 250

struct fixture {
	char *dir;
	char *path;
	uv_loop_t loop;
	struct journal *j;
};

static void fixture_init(struct fixture *f, const char *tag)
{
	f->dir = test_tmpdir(tag);
	ck_assert_int_ge(asprintf(&f->path, "%s/journal.db", f->dir), 0);
	ck_assert_int_eq(uv_loop_init(&f->loop), 0);
	f->j = NULL;
}

static void run_until(uv_loop_t *loop, const bool *flag)
{
	while (!*flag)
		uv_run(loop, UV_RUN_ONCE);
}

static void run_until_count(uv_loop_t *loop, const size_t *n, size_t want)
{
	while (*n < want)
		uv_run(loop, UV_RUN_ONCE);
}

static void on_closed(void *data, int err)
{
	ck_assert_int_eq(err, 0);
	*(bool *)data = true;
}

static void journal_close_wait(struct fixture *f)
{
	bool closed = false;

	journal_close(f->j, on_closed, &closed);
	run_until(&f->loop, &closed);
	f->j = NULL;
}

static void fixture_done(struct fixture *f)
{
	if (f->j)
		journal_close_wait(f);
	/* Every handle closed: the libuv rule for owners. */
	ck_assert_int_eq(uv_loop_close(&f->loop), 0);
	test_rmrf(f->dir);
	free(f->path);
	free(f->dir);
}

static void open_journal(struct fixture *f)
{
	ck_assert_int_eq(journal_open(&f->loop, f->path, &f->j), 0);
}

/* ---- query helper ---- */

struct query_result {
	bool done;
	int err;
	size_t n;
	struct journal_event *evs;
};

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

static void on_query(void *data, int err, const struct journal_event *evs,
		     size_t n)
{
	struct query_result *q = data;

	q->done = true;
	q->err = err;
	q->n = n;
	q->evs = calloc(n ? n : 1, sizeof(*evs));
	for (size_t i = 0; i < n; i++) {
		q->evs[i] = evs[i];
		q->evs[i].session = dup_or_null(evs[i].session);
		q->evs[i].actor = dup_or_null(evs[i].actor);
		q->evs[i].kind = strdup(evs[i].kind);
		q->evs[i].summary = strdup(evs[i].summary);
		q->evs[i].detail = dup_or_null(evs[i].detail);
	}
}

static void query_result_free(struct query_result *q)
{
	for (size_t i = 0; i < q->n; i++) {
		free(q->evs[i].session);
		free(q->evs[i].actor);
		free(q->evs[i].kind);
		free(q->evs[i].summary);
		free(q->evs[i].detail);
	}
	free(q->evs);
	memset(q, 0, sizeof(*q));
}

static void query(struct fixture *f, int64_t since, const char *kind,
		  const char *session, int limit, struct query_result *q)
{
	struct journal_filter flt = {since, kind, session, limit};

	memset(q, 0, sizeof(*q));
	ck_assert_int_eq(journal_query(f->j, &flt, on_query, q), 0);
	run_until(&f->loop, &q->done);
	ck_assert_int_eq(q->err, 0);
}

/* ---- append many from the loop, in bursts ---- */

struct burst {
	struct journal *j;
	uv_idle_t idle;
	int total, appended;
	int64_t expect_next; /* next id the commit callback must see */
	int committed;
	bool all_committed;
	bool in_order;
};

static void burst_idle(uv_idle_t *h)
{
	struct burst *b = h->data;

	for (int i = 0; i < BURST && b->appended < b->total; i++) {
		char summary[64];
		int64_t id;

		snprintf(summary, sizeof(summary), "request %d", b->appended);
		id = journal_append(b->j, i % 2 ? "s1" : "s2", "operator",
				    "rpc", summary, "{\"ok\":true}");
		ck_assert_int_eq(id, b->appended + 1);
		b->appended++;
	}
	if (b->appended == b->total)
		uv_idle_stop(h);
}

static void burst_committed(void *data, const struct journal_event *evs,
			    size_t n)
{
	struct burst *b = data;

	for (size_t i = 0; i < n; i++) {
		char summary[64];

		snprintf(summary, sizeof(summary), "request %d",
			 (int)(evs[i].id - 1));
		if (evs[i].id != b->expect_next ||
		    strcmp(evs[i].summary, summary) != 0 ||
		    strlen(evs[i].hash) != 64)
			b->in_order = false;
		b->expect_next++;
		b->committed++;
	}
	if (b->committed == b->total)
		b->all_committed = true;
}

static void idle_closed(uv_handle_t *h)
{
	*(bool *)h->data = true;
}

START_TEST(test_append_commit_verify)
{
	struct fixture f;
	struct burst b = {.total = 5000, .expect_next = 1, .in_order = true};
	struct journal_verify_result vr;
	struct query_result q;
	bool idle_gone = false;

	fixture_init(&f, "journal");
	open_journal(&f);
	b.j = f.j;
	journal_set_commit_cb(f.j, burst_committed, &b);
	uv_idle_init(&f.loop, &b.idle);
	b.idle.data = &b;
	uv_idle_start(&b.idle, burst_idle);
	run_until(&f.loop, &b.all_committed);
	ck_assert(b.in_order);
	ck_assert_int_eq(b.committed, 5000);
	ck_assert_int_eq(journal_count(f.j), 5000);
	ck_assert_int_gt(journal_size_bytes(f.j), 5000 * 50);

	/* What the callback saw is what is stored. */
	query(&f, 4990, NULL, NULL, 0, &q);
	ck_assert_uint_eq(q.n, 10);
	ck_assert_int_eq(q.evs[9].id, 5000);
	ck_assert_str_eq(q.evs[9].summary, "request 4999");
	ck_assert_str_eq(q.evs[9].detail, "{\"ok\":true}");
	ck_assert_str_eq(q.evs[9].prev_hash, q.evs[8].hash);
	query_result_free(&q);

	b.idle.data = &idle_gone;
	uv_close((uv_handle_t *)&b.idle, idle_closed);
	run_until(&f.loop, &idle_gone);
	journal_close_wait(&f);

	ck_assert_int_eq(journal_verify_path(f.path, &vr), 0);
	ck_assert_msg(vr.ok, "%s: %s", vr.reason, vr.detail);
	ck_assert_int_eq(vr.checked, 5000);
	fixture_done(&f);
}
END_TEST

/* journal_append_json: the detail as jansson writes it, compact, in the
 * same chain as journal_append's rows (which it is not parsed again
 * for); a NULL detail is a row without one. */
START_TEST(test_append_json_rows)
{
	struct fixture f;
	struct journal_verify_result vr;
	struct query_result q;
	json_t *d = json_pack("{s:s, s:i, s:[s,s]}", "turn", "t-1", "status",
			      200, "labels", "agent-tool", "web");

	fixture_init(&f, "journal-json");
	open_journal(&f);
	ck_assert_int_eq(journal_append(f.j, "s", "broker", "model.call", "one",
					"{\"a\": 1}"),
			 1);
	ck_assert_int_eq(
	    journal_append_json(f.j, "s", "broker", "model.call", "two", d, 0),
	    2);
	ck_assert_int_eq(journal_append_json(f.j, NULL, "broker", "model.call",
					     "three", NULL, 0),
			 3);
	/* json_dumps's flags besides compact: a request row's sorted keys. */
	ck_assert_int_eq(journal_append_json(f.j, "s", "spd", "request", "four",
					     d, JSON_SORT_KEYS),
			 4);
	ck_assert_int_eq(journal_flush(f.j), 0);
	query(&f, 0, NULL, NULL, 0, &q);
	ck_assert_uint_eq(q.n, 4);
	ck_assert_str_eq(q.evs[1].detail,
			 "{\"turn\":\"t-1\",\"status\":200,\"labels\":"
			 "[\"agent-tool\",\"web\"]}");
	ck_assert_ptr_null(q.evs[2].detail);
	ck_assert_str_eq(q.evs[2].prev_hash, q.evs[1].hash);
	ck_assert_str_eq(q.evs[3].detail,
			 "{\"labels\":[\"agent-tool\",\"web\"],\"status\":"
			 "200,\"turn\":\"t-1\"}");
	query_result_free(&q);
	journal_close_wait(&f);
	ck_assert_int_eq(journal_verify_path(f.path, &vr), 0);
	ck_assert_msg(vr.ok, "%s: %s", vr.reason, vr.detail);
	ck_assert_int_eq(vr.checked, 4);
	json_decref(d);
	fixture_done(&f);
}
END_TEST

/* ---- tamper cases ---- */

/* A closed journal of TAMPER_ROWS rows; returns the fixture with j NULL. */
static void make_journal(struct fixture *f, const char *tag)
{
	fixture_init(f, tag);
	open_journal(f);
	for (int i = 1; i <= TAMPER_ROWS; i++) {
		char summary[32];

		snprintf(summary, sizeof(summary), "event %d", i);
		ck_assert_int_eq(journal_append(f->j, "sess", "agent",
						i % 3 ? "run" : "fs.read",
						summary, NULL),
				 i);
	}
	journal_close_wait(f);
}

/* Run SQL on the closed journal, as an operator with sqlite3 would. */
static void tamper(struct fixture *f, const char *sql)
{
	sqlite3 *db;
	char *err = NULL;

	ck_assert_int_eq(sqlite3_open(f->path, &db), SQLITE_OK);
	ck_assert_msg(sqlite3_exec(db, sql, NULL, NULL, &err) == SQLITE_OK,
		      "%s: %s", sql, err);
	ck_assert_int_eq(sqlite3_changes(db) > 0, 1);
	sqlite3_close(db);
}

static void expect_bad(struct fixture *f, const char *reason, int64_t id)
{
	struct journal_verify_result vr;

	ck_assert_int_eq(journal_verify_path(f->path, &vr), 0);
	ck_assert_msg(!vr.ok, "tampering not detected");
	ck_assert_msg(strcmp(vr.reason, reason) == 0 && vr.first_bad_id == id,
		      "expected %s at %lld, got %s at %lld (%s)", reason,
		      (long long)id, vr.reason, (long long)vr.first_bad_id,
		      vr.detail);
}

START_TEST(test_untouched_verifies)
{
	struct fixture f;
	struct journal_verify_result vr;

	make_journal(&f, "journal");
	ck_assert_int_eq(journal_verify_path(f.path, &vr), 0);
	ck_assert_msg(vr.ok, "%s: %s", vr.reason, vr.detail);
	ck_assert_int_eq(vr.checked, TAMPER_ROWS);
	fixture_done(&f);
}
END_TEST

START_TEST(test_tamper_edit)
{
	struct fixture f;

	make_journal(&f, "journal");
	tamper(&f,
	       "UPDATE events SET summary = 'nothing happened' WHERE id = 7");
	expect_bad(&f, "edited", 7);
	fixture_done(&f);
}
END_TEST

START_TEST(test_tamper_delete_middle)
{
	struct fixture f;

	make_journal(&f, "journal");
	tamper(&f, "DELETE FROM events WHERE id = 7");
	expect_bad(&f, "deleted", 7);
	fixture_done(&f);
}
END_TEST

START_TEST(test_tamper_delete_renumber)
{
	struct fixture f;

	/* Hiding the gap by renumbering the rows after it. */
	make_journal(&f, "journal");
	tamper(&f, "DELETE FROM events WHERE id = 7;"
		   "UPDATE events SET id = id + 1000 WHERE id > 7;"
		   "UPDATE events SET id = id - 1001 WHERE id > 1000");
	expect_bad(&f, "deleted", 7);
	fixture_done(&f);
}
END_TEST

START_TEST(test_tamper_insert_middle)
{
	struct fixture f;

	/* Make room after row 10 and forge a row that links to it. */
	make_journal(&f, "journal");
	tamper(&f, "UPDATE events SET id = id + 1000 WHERE id > 10;"
		   "UPDATE events SET id = id - 999 WHERE id > 1000;"
		   "INSERT INTO events VALUES (11, 0, 'sess', 'agent', 'run', "
		   "'forged', NULL, (SELECT hash FROM events WHERE id = 10), "
		   "'ffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
		   "ffffff')");
	expect_bad(&f, "inserted", 11);
	fixture_done(&f);
}
END_TEST

START_TEST(test_tamper_insert_end)
{
	struct fixture f;

	make_journal(&f, "journal");
	tamper(&f, "INSERT INTO events VALUES (21, 0, NULL, NULL, 'run', "
		   "'forged', NULL, "
		   "'abababababababababababababababababababababababababababab"
		   "abababab', "
		   "'cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd"
		   "cdcdcdcd')");
	expect_bad(&f, "inserted", 21);
	fixture_done(&f);
}
END_TEST

START_TEST(test_tamper_reorder)
{
	struct fixture f;

	/* Swap the whole contents of rows 5 and 12, keeping the ids. */
	make_journal(&f, "journal");
	tamper(&f, "UPDATE events SET id = -5 WHERE id = 5;"
		   "UPDATE events SET id = 5 WHERE id = 12;"
		   "UPDATE events SET id = 12 WHERE id = -5");
	expect_bad(&f, "reordered", 5);
	fixture_done(&f);
}
END_TEST

START_TEST(test_tamper_truncate)
{
	struct fixture f;
	struct journal *j;

	make_journal(&f, "journal");
	tamper(&f, "DELETE FROM events WHERE id > 17");
	/* The chain 1..17 is intact; only the head file shows the cut. */
	expect_bad(&f, "truncated", 18);
	/* Continuing would overwrite the evidence: open refuses. */
	ck_assert_int_eq(journal_open(&f.loop, f.path, &j), -SPD_ECORRUPT);
	fixture_done(&f);
}
END_TEST

START_TEST(test_tamper_head_missing)
{
	struct fixture f;
	char *head;

	make_journal(&f, "journal");
	ck_assert_int_ge(asprintf(&head, "%s.head", f.path), 0);
	ck_assert_int_eq(unlink(head), 0);
	expect_bad(&f, "head-missing", 0);
	free(head);
	fixture_done(&f);
}
END_TEST

/*
 * The encoding journal.h documents, written again here from the header:
 * a row hashes the same way whoever computes it.
 */
static void put_u64(crypto_generichash_state *st, uint64_t v)
{
	unsigned char b[8];

	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(v >> (56 - 8 * i));
	crypto_generichash_update(st, b, 8);
}

static void put_col(crypto_generichash_state *st, sqlite3_stmt *row, int col)
{
	const unsigned char *s = sqlite3_column_text(row, col);

	if (!s) {
		put_u64(st, UINT64_MAX);
		return;
	}
	put_u64(st, (uint64_t)sqlite3_column_bytes(row, col));
	crypto_generichash_update(st, s,
				  (size_t)sqlite3_column_bytes(row, col));
}

/* Hash of row id as stored, into hex[65]. */
static void independent_hash(sqlite3 *db, int64_t id, char hex[65])
{
	sqlite3_stmt *row;
	crypto_generichash_state st;
	unsigned char bin[32];

	ck_assert_int_eq(sqlite3_prepare_v2(db,
					    "SELECT id, time, session, actor, "
					    "kind, summary, detail, prev_hash "
					    "FROM events WHERE id = ?",
					    -1, &row, NULL),
			 SQLITE_OK);
	sqlite3_bind_int64(row, 1, id);
	ck_assert_int_eq(sqlite3_step(row), SQLITE_ROW);
	crypto_generichash_init(&st, NULL, 0, 32);
	put_u64(&st, strlen("spd-journal-v1"));
	crypto_generichash_update(&st, (const unsigned char *)"spd-journal-v1",
				  strlen("spd-journal-v1"));
	put_u64(&st, (uint64_t)sqlite3_column_int64(row, 0));
	put_u64(&st, (uint64_t)sqlite3_column_int64(row, 1));
	for (int col = 2; col <= 7; col++)
		put_col(&st, row, col);
	crypto_generichash_final(&st, bin, 32);
	sodium_bin2hex(hex, 65, bin, 32);
	sqlite3_finalize(row);
}

/* Edit a row's summary and store its recomputed hash, as an attacker who
 * knows the encoding would. */
static void rewrite_row(struct fixture *f, int64_t id)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	char hex[65], *sql;

	ck_assert_int_ge(asprintf(&sql,
				  "UPDATE events SET summary = 'rewritten' "
				  "WHERE id = %lld",
				  (long long)id),
			 0);
	tamper(f, sql);
	free(sql);
	ck_assert_int_eq(sqlite3_open(f->path, &db), SQLITE_OK);
	independent_hash(db, id, hex);
	ck_assert_int_eq(sqlite3_prepare_v2(db,
					    "UPDATE events SET hash = ? WHERE "
					    "id = ?",
					    -1, &st, NULL),
			 SQLITE_OK);
	sqlite3_bind_text(st, 1, hex, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, id);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_DONE);
	sqlite3_finalize(st);
	sqlite3_close(db);
}

START_TEST(test_hash_encoding)
{
	struct fixture f;
	sqlite3 *db;
	sqlite3_stmt *st;
	char hex[65], prev[65] = "";

	make_journal(&f, "journal");
	ck_assert_int_eq(sqlite3_open(f.path, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(db,
					    "SELECT id, prev_hash, hash FROM "
					    "events ORDER BY id",
					    -1, &st, NULL),
			 SQLITE_OK);
	memset(prev, '0', 64);
	while (sqlite3_step(st) == SQLITE_ROW) {
		independent_hash(db, sqlite3_column_int64(st, 0), hex);
		ck_assert_str_eq((const char *)sqlite3_column_text(st, 2), hex);
		ck_assert_str_eq((const char *)sqlite3_column_text(st, 1),
				 prev);
		memcpy(prev, hex, sizeof(prev));
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	fixture_done(&f);
}
END_TEST

START_TEST(test_tamper_rewrite_middle)
{
	struct fixture f;

	/* A self-consistent row 7 still breaks row 8's link to it. */
	make_journal(&f, "journal");
	rewrite_row(&f, 7);
	expect_bad(&f, "edited", 7);
	fixture_done(&f);
}
END_TEST

START_TEST(test_tamper_rewrite_head)
{
	struct fixture f;

	/* The last row has no successor to betray it, but the head does. */
	make_journal(&f, "journal");
	rewrite_row(&f, TAMPER_ROWS);
	expect_bad(&f, "edited", TAMPER_ROWS);
	fixture_done(&f);
}
END_TEST

/* ---- SIGKILL in the middle of a burst ---- */

static void child_committed(void *data, const struct journal_event *evs,
			    size_t n)
{
	int fd = *(int *)data;
	int64_t last = evs[n - 1].id;

	/* Non-blocking: a full pipe must not stall the child's loop. */
	if (write(fd, &last, sizeof(last)) < 0) {
		/* The parent reads only until it has seen enough. */
	}
}

static void child_idle(uv_idle_t *h)
{
	struct journal *j = h->data;

	for (int i = 0; i < BURST; i++)
		if (journal_append(j, "sess", "agent", "run", "burst row",
				   "{\"n\":1}") < 0)
			_exit(3);
}

static void burst_child(const char *path, int fd)
{
	uv_loop_t loop;
	uv_idle_t idle;
	struct journal *j;

	if (uv_loop_init(&loop) < 0 || journal_open(&loop, path, &j) < 0)
		_exit(2);
	journal_set_commit_cb(j, child_committed, &fd);
	uv_idle_init(&loop, &idle);
	idle.data = j;
	uv_idle_start(&idle, child_idle);
	uv_run(&loop, UV_RUN_DEFAULT);
	_exit(4);
}

START_TEST(test_sigkill_mid_burst)
{
	struct fixture f;
	struct journal_verify_result vr;
	struct query_result q;
	int p[2], status;
	int64_t seen = 0, survivors;
	pid_t pid;

	fixture_init(&f, "journal");
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(p[0]);
		fcntl(p[1], F_SETFL, O_NONBLOCK);
		burst_child(f.path, p[1]);
	}
	close(p[1]);
	/* Wait until several group commits are in, then kill while the
	 * child keeps appending. */
	while (seen < 20 * BURST) {
		ssize_t n = read(p[0], &seen, sizeof(seen));

		ck_assert_int_eq(n, sizeof(seen));
	}
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	close(p[0]);

	ck_assert_int_eq(journal_verify_path(f.path, &vr), 0);
	ck_assert_msg(vr.ok, "%s at %lld: %s", vr.reason,
		      (long long)vr.first_bad_id, vr.detail);
	ck_assert_int_ge(vr.checked, seen);
	survivors = vr.checked;

	/* A restart continues the chain from the last surviving row. */
	open_journal(&f);
	ck_assert_int_eq(journal_count(f.j), survivors);
	for (int i = 0; i < 10; i++)
		ck_assert_int_eq(journal_append(f.j, NULL, "spd", "daemon",
						"after restart", NULL),
				 survivors + 1 + i);
	ck_assert_int_eq(journal_flush(f.j), 0);
	query(&f, survivors - 1, NULL, NULL, 0, &q);
	ck_assert_uint_eq(q.n, 11);
	ck_assert_int_eq(q.evs[0].id, survivors);
	ck_assert_str_eq(q.evs[0].summary, "burst row");
	ck_assert_str_eq(q.evs[1].summary, "after restart");
	ck_assert_str_eq(q.evs[1].prev_hash, q.evs[0].hash);
	query_result_free(&q);
	journal_close_wait(&f);

	ck_assert_int_eq(journal_verify_path(f.path, &vr), 0);
	ck_assert_msg(vr.ok, "%s: %s", vr.reason, vr.detail);
	ck_assert_int_eq(vr.checked, survivors + 10);
	fixture_done(&f);
}
END_TEST

/* ---- the filter hook ---- */

static char *redact_sekrit(void *data, const char *text)
{
	const char *p = strstr(text, "sekrit");
	char *out;

	++*(int *)data;
	if (!p)
		return NULL;
	ck_assert_int_ge(asprintf(&out, "%.*s[redacted]%s", (int)(p - text),
				  text, p + strlen("sekrit")),
			 0);
	return out;
}

static int count_rows(const char *path, const char *where)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	char *sql;
	int n;

	ck_assert_int_ge(
	    asprintf(&sql, "SELECT count(*) FROM events WHERE %s", where), 0);
	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
	n = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	free(sql);
	return n;
}

START_TEST(test_filter)
{
	struct fixture f;
	struct journal_verify_result vr;
	struct query_result q;
	int calls = 0;

	fixture_init(&f, "journal");
	open_journal(&f);
	journal_set_filter(f.j, redact_sekrit, &calls);
	ck_assert_int_eq(journal_append(f.j, "s", "agent", "run",
					"curl -H 'key: sekrit'",
					"{\"env\":\"KEY=sekrit\"}"),
			 1);
	ck_assert_int_eq(
	    journal_append(f.j, "s", "agent", "run", "plain", NULL), 2);
	ck_assert_int_eq(calls, 3);
	ck_assert_int_eq(journal_flush(f.j), 0);
	query(&f, 0, NULL, NULL, 0, &q);
	ck_assert_uint_eq(q.n, 2);
	ck_assert_str_eq(q.evs[0].summary, "curl -H 'key: [redacted]'");
	ck_assert_str_eq(q.evs[0].detail, "{\"env\":\"KEY=[redacted]\"}");
	ck_assert_str_eq(q.evs[1].summary, "plain");
	ck_assert_ptr_null(q.evs[1].detail);
	query_result_free(&q);
	journal_close_wait(&f);

	/* The stored row holds the replacement, and its hash covers it. */
	ck_assert_int_eq(count_rows(f.path, "summary LIKE '%sekrit%' OR "
					    "detail LIKE '%sekrit%'"),
			 0);
	ck_assert_int_eq(journal_verify_path(f.path, &vr), 0);
	ck_assert_msg(vr.ok, "%s: %s", vr.reason, vr.detail);
	ck_assert_int_eq(vr.checked, 2);
	fixture_done(&f);
}
END_TEST

/* ---- queries ---- */

START_TEST(test_query)
{
	struct fixture f;
	struct query_result q;

	fixture_init(&f, "journal");
	open_journal(&f);
	for (int i = 1; i <= 1200; i++)
		ck_assert_int_eq(
		    journal_append(f.j, i % 2 ? "odd" : "even", "agent",
				   i % 10 ? "run" : "decision", "x", NULL),
		    i);
	ck_assert_int_eq(journal_flush(f.j), 0);

	query(&f, 0, "decision", NULL, 0, &q);
	ck_assert_uint_eq(q.n, 120);
	for (size_t i = 0; i < q.n; i++) {
		ck_assert_str_eq(q.evs[i].kind, "decision");
		ck_assert_int_eq(q.evs[i].id, 10 * (int64_t)(i + 1));
	}
	query_result_free(&q);

	query(&f, 0, NULL, "odd", 5, &q);
	ck_assert_uint_eq(q.n, 5);
	for (size_t i = 0; i < q.n; i++) {
		ck_assert_str_eq(q.evs[i].session, "odd");
		ck_assert_int_eq(q.evs[i].id, 2 * (int64_t)i + 1);
	}
	query_result_free(&q);

	query(&f, 1195, "run", "even", 0, &q);
	ck_assert_uint_eq(q.n, 2);
	ck_assert_int_eq(q.evs[0].id, 1196);
	ck_assert_int_eq(q.evs[1].id, 1198);
	query_result_free(&q);

	/* The cap holds whatever the caller asks for. */
	query(&f, 0, NULL, NULL, 5000, &q);
	ck_assert_uint_eq(q.n, JOURNAL_QUERY_LIMIT_MAX);
	ck_assert_int_eq(q.evs[0].id, 1);
	query_result_free(&q);

	/* since < 0: the last rows, oldest first. */
	query(&f, -1, NULL, NULL, 3, &q);
	ck_assert_uint_eq(q.n, 3);
	ck_assert_int_eq(q.evs[0].id, 1198);
	ck_assert_int_eq(q.evs[2].id, 1200);
	query_result_free(&q);

	query(&f, 1200, NULL, NULL, 0, &q);
	ck_assert_uint_eq(q.n, 0);
	query_result_free(&q);
	fixture_done(&f);
}
END_TEST

/*
 * The group window: a row is not committed the moment it is appended (the
 * commit would compete with the run it records), yet a query asked right
 * after the append sees it, without a flush, and long before the window
 * could have ended by itself.
 */
static void count_committed(void *data, const struct journal_event *evs,
			    size_t n)
{
	(void)evs;
	*(size_t *)data += n;
}

START_TEST(test_query_sees_queued_rows)
{
	struct fixture f;
	struct query_result q;
	size_t committed = 0;

	fixture_init(&f, "journal");
	open_journal(&f);
	journal_set_commit_cb(f.j, count_committed, &committed);
	for (int round = 1; round <= 20; round++) {
		char summary[32];

		snprintf(summary, sizeof(summary), "row %d", round);
		ck_assert_int_eq(
		    journal_append(f.j, NULL, "agent", "run", summary, NULL),
		    round);
		query(&f, -1, NULL, NULL, 1, &q);
		ck_assert_uint_eq(q.n, 1);
		ck_assert_int_eq(q.evs[0].id, round);
		ck_assert_str_eq(q.evs[0].summary, summary);
		query_result_free(&q);
	}
	/* Each query asked for its row's commit: all of them are done. */
	run_until_count(&f.loop, &committed, 20);
	fixture_done(&f);
}
END_TEST

/* ---- a session's span, the index on session and its migration ---- */

struct span_result {
	bool done;
	int err;
	struct journal_span span;
};

static void on_span(void *data, int err, const struct journal_span *s)
{
	struct span_result *q = data;

	q->done = true;
	q->err = err;
	if (s)
		q->span = *s;
}

static void span(struct fixture *f, const char *session, struct span_result *q)
{
	memset(q, 0, sizeof(*q));
	ck_assert_int_eq(journal_session_span(f->j, session, on_span, q), 0);
	run_until(&f->loop, &q->done);
	ck_assert_int_eq(q->err, 0);
}

/* What SQLite plans for a session's rows (EXPLAIN QUERY PLAN's detail,
 * joined), on the closed journal at path. */
static char *session_plan(const char *path)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	char *plan = strdup("");

	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	ck_assert_int_eq(
	    sqlite3_prepare_v2(db,
			       "EXPLAIN QUERY PLAN SELECT id FROM events WHERE "
			       "session = 's' AND id > 0 ORDER BY id",
			       -1, &st, NULL),
	    SQLITE_OK);
	while (sqlite3_step(st) == SQLITE_ROW) {
		char *more = NULL;

		ck_assert_int_ge(
		    asprintf(&more, "%s%s;", plan,
			     (const char *)sqlite3_column_text(st, 3)),
		    0);
		free(plan);
		plan = more;
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	return plan;
}

/* The span names the session's first and last rows with the hashes the
 * chain has there, whatever other sessions wrote between them, and
 * counts only the session's; the queued rows are in it. */
START_TEST(test_session_span)
{
	struct fixture f;
	struct span_result q;
	struct query_result all;

	fixture_init(&f, "journal");
	open_journal(&f);
	for (int i = 1; i <= 30; i++)
		ck_assert_int_eq(journal_append(f.j,
						i % 3 == 0   ? "a"
						: i % 3 == 1 ? "b"
							     : NULL,
						"agent", "run", "x", NULL),
				 i);
	span(&f, "a", &q);
	query(&f, 0, NULL, NULL, 0, &all);
	ck_assert_uint_eq(all.n, 30);
	ck_assert_int_eq(q.span.rows, 10);
	ck_assert_int_eq(q.span.first_id, 3);
	ck_assert_int_eq(q.span.last_id, 30);
	ck_assert_str_eq(q.span.first_hash, all.evs[2].hash);
	ck_assert_str_eq(q.span.last_hash, all.evs[29].hash);
	query_result_free(&all);
	span(&f, "b", &q);
	ck_assert_int_eq(q.span.rows, 10);
	ck_assert_int_eq(q.span.first_id, 1);
	ck_assert_int_eq(q.span.last_id, 28);
	span(&f, "none", &q);
	ck_assert_int_eq(q.span.rows, 0);
	ck_assert_str_eq(q.span.last_hash, "");
	/* A session's query reads through the index and finds its rows. */
	{
		struct query_result r;

		query(&f, 10, "run", "a", 0, &r);
		ck_assert_uint_eq(r.n, 7);
		ck_assert_int_eq(r.evs[0].id, 12);
		query_result_free(&r);
		query(&f, -1, NULL, "b", 2, &r);
		ck_assert_uint_eq(r.n, 2);
		ck_assert_int_eq(r.evs[0].id, 25);
		ck_assert_int_eq(r.evs[1].id, 28);
		query_result_free(&r);
	}
	journal_close_wait(&f);
	{
		char *plan = session_plan(f.path);

		ck_assert_msg(strstr(plan, "events_session"),
			      "a session's rows are read without the index: "
			      "%s",
			      plan);
		free(plan);
	}
	fixture_done(&f);
}
END_TEST

/*
 * A journal of the schema before the index (no index, user_version 0)
 * gets it when opened: every row is kept, the chain still verifies, a
 * session's rows are read through the index, and the chain continues.
 */
START_TEST(test_migrates_old_journal)
{
	struct fixture f;
	struct journal_verify_result vr;
	struct span_result q;
	char *plan;

	make_journal(&f, "journal");
	{
		sqlite3 *db;

		ck_assert_int_eq(sqlite3_open(f.path, &db), SQLITE_OK);
		ck_assert_int_eq(sqlite3_exec(db,
					      "DROP INDEX events_session; "
					      "PRAGMA user_version = 0",
					      NULL, NULL, NULL),
				 SQLITE_OK);
		sqlite3_close(db);
	}
	plan = session_plan(f.path);
	ck_assert_msg(!strstr(plan, "events_session"), "%s", plan);
	free(plan);
	open_journal(&f);
	ck_assert_int_eq(journal_count(f.j), TAMPER_ROWS);
	ck_assert_int_eq(journal_append(f.j, "sess", "agent", "run", "y", NULL),
			 TAMPER_ROWS + 1);
	span(&f, "sess", &q);
	ck_assert_int_eq(q.span.rows, TAMPER_ROWS + 1);
	ck_assert_int_eq(q.span.first_id, 1);
	ck_assert_int_eq(q.span.last_id, TAMPER_ROWS + 1);
	journal_close_wait(&f);
	plan = session_plan(f.path);
	ck_assert_msg(strstr(plan, "events_session"), "not migrated: %s", plan);
	free(plan);
	ck_assert_int_eq(journal_verify_path(f.path, &vr), 0);
	ck_assert_msg(vr.ok, "%s: %s", vr.reason, vr.detail);
	ck_assert_int_eq(vr.checked, TAMPER_ROWS + 1);
	fixture_done(&f);
}
END_TEST

/* ---- refusals, async verify, close with work in flight ---- */

START_TEST(test_append_refusals)
{
	struct fixture f;
	struct query_result q;
	char *big;

	fixture_init(&f, "journal");
	open_journal(&f);
	ck_assert_int_eq(journal_append(f.j, NULL, NULL, NULL, "x", NULL),
			 -EINVAL);
	ck_assert_int_eq(journal_append(f.j, NULL, NULL, "", "x", NULL),
			 -EINVAL);
	ck_assert_int_eq(journal_append(f.j, NULL, "\xc3", "k", "x", NULL),
			 -EINVAL);
	ck_assert_int_eq(journal_append(f.j, NULL, NULL, "k", "x", "\"\xc3\""),
			 -EINVAL);
	ck_assert_int_eq(journal_append(f.j, NULL, NULL, "k", "x", "{bad"),
			 -EINVAL);
	big = malloc(JOURNAL_SUMMARY_MAX + 2);
	memset(big, 'a', JOURNAL_SUMMARY_MAX + 1);
	big[JOURNAL_SUMMARY_MAX + 1] = '\0';
	ck_assert_int_eq(journal_append(f.j, NULL, NULL, "k", big, NULL),
			 -E2BIG);
	free(big);
	/* Nothing refused took an id. */
	ck_assert_int_eq(journal_append(f.j, NULL, NULL, "k", "x", "[1,2]"), 1);
	/* A summary cut inside a character is kept, repaired. */
	ck_assert_int_eq(journal_append(f.j, NULL, NULL, "k", "caf\xc3", NULL),
			 2);
	ck_assert_int_eq(journal_count(f.j), 2);
	ck_assert_int_eq(journal_flush(f.j), 0);
	query(&f, 1, NULL, NULL, 0, &q);
	ck_assert_uint_eq(q.n, 1);
	ck_assert_str_eq(q.evs[0].summary, "caf\xef\xbf\xbd");
	query_result_free(&q);
	fixture_done(&f);
}
END_TEST

START_TEST(test_second_open_refused)
{
	struct fixture f;
	struct journal *j2;

	fixture_init(&f, "journal");
	open_journal(&f);
	ck_assert_int_eq(journal_open(&f.loop, f.path, &j2), -EBUSY);
	fixture_done(&f);
}
END_TEST

struct verify_wait {
	bool done;
	struct journal_verify_result r;
};

static void on_verify(void *data, const struct journal_verify_result *r)
{
	struct verify_wait *w = data;

	w->r = *r;
	w->done = true;
}

START_TEST(test_verify_async)
{
	struct fixture f;
	struct verify_wait w = {0};

	fixture_init(&f, "journal");
	open_journal(&f);
	for (int i = 0; i < 100; i++)
		ck_assert_int_gt(
		    journal_append(f.j, NULL, NULL, "k", "x", NULL), 0);
	ck_assert_int_eq(journal_flush(f.j), 0);
	ck_assert_int_eq(journal_verify(f.j, on_verify, &w), 0);
	run_until(&f.loop, &w.done);
	ck_assert_msg(w.r.ok, "%s: %s", w.r.reason, w.r.detail);
	ck_assert_int_eq(w.r.checked, 100);
	fixture_done(&f);
}
END_TEST

struct close_order {
	bool query_done, closed, query_before_close;
	int committed;
};

static void order_query(void *data, int err, const struct journal_event *evs,
			size_t n)
{
	struct close_order *o = data;

	o->query_done = true;
	o->query_before_close = !o->closed;
}

static void order_committed(void *data, const struct journal_event *evs,
			    size_t n)
{
	((struct close_order *)data)->committed += (int)n;
}

static void order_closed(void *data, int err)
{
	struct close_order *o = data;

	ck_assert_int_eq(err, 0);
	o->closed = true;
}

START_TEST(test_close_flushes)
{
	struct fixture f;
	struct close_order o = {0};
	struct journal_filter flt = {0, NULL, NULL, 0};
	struct journal_verify_result vr;

	fixture_init(&f, "journal");
	open_journal(&f);
	journal_set_commit_cb(f.j, order_committed, &o);
	for (int i = 0; i < 1000; i++)
		ck_assert_int_gt(
		    journal_append(f.j, NULL, NULL, "k", "x", NULL), 0);
	ck_assert_int_eq(journal_query(f.j, &flt, order_query, &o), 0);
	journal_close(f.j, order_closed, &o);
	ck_assert_int_eq(journal_append(f.j, NULL, NULL, "k", "x", NULL),
			 -ESHUTDOWN);
	run_until(&f.loop, &o.closed);
	f.j = NULL;
	ck_assert(o.query_done && o.query_before_close);
	/* Everything queued before close was committed and delivered. */
	ck_assert_int_eq(o.committed, 1000);
	ck_assert_int_eq(journal_verify_path(f.path, &vr), 0);
	ck_assert(vr.ok);
	ck_assert_int_eq(vr.checked, 1000);
	fixture_done(&f);
}
END_TEST

static Suite *journal_suite(void)
{
	Suite *s = suite_create("journal");
	TCase *tc = tcase_create("journal");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_append_commit_verify);
	tcase_add_test(tc, test_append_json_rows);
	tcase_add_test(tc, test_untouched_verifies);
	tcase_add_test(tc, test_tamper_edit);
	tcase_add_test(tc, test_tamper_delete_middle);
	tcase_add_test(tc, test_tamper_delete_renumber);
	tcase_add_test(tc, test_tamper_insert_middle);
	tcase_add_test(tc, test_tamper_insert_end);
	tcase_add_test(tc, test_tamper_reorder);
	tcase_add_test(tc, test_tamper_truncate);
	tcase_add_test(tc, test_tamper_head_missing);
	tcase_add_test(tc, test_hash_encoding);
	tcase_add_test(tc, test_tamper_rewrite_middle);
	tcase_add_test(tc, test_tamper_rewrite_head);
	tcase_add_test(tc, test_sigkill_mid_burst);
	tcase_add_test(tc, test_filter);
	tcase_add_test(tc, test_query);
	tcase_add_test(tc, test_query_sees_queued_rows);
	tcase_add_test(tc, test_session_span);
	tcase_add_test(tc, test_migrates_old_journal);
	tcase_add_test(tc, test_append_refusals);
	tcase_add_test(tc, test_second_open_refused);
	tcase_add_test(tc, test_verify_async);
	tcase_add_test(tc, test_close_flushes);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(journal_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/*
 * Journaled events per second: append N events from the loop thread in
 * bursts, as spd does for a stream of requests, and time until the writer
 * thread has committed them all (group commit) and the commit callback has
 * seen the last one.  Then close, which syncs, and verify the chain.
 *
 *   build/bench/journal [N]
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "daemon/journal/journal.h"

#define DEFAULT_EVENTS 200000
/* Events appended per loop iteration: a burst of requests read at once. */
#define BURST 512
/*
 * Most events appended but not yet committed before the bench waits for
 * the writer, like a server whose clients wait for their replies.
 */
#define IN_FLIGHT_MAX 50000

struct bench {
	struct journal *j;
	uv_idle_t idle;
	long total, appended, committed;
	int64_t commits;
	double append_s; /* loop thread CPU time inside journal_append() */
	bool done, closed;
};

static double clock_s(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double now_s(void)
{
	return clock_s(CLOCK_MONOTONIC);
}

/* CPU time of the calling thread: the append cost without the time other
 * processes on a busy machine take from it. */
static double cpu_s(void)
{
	return clock_s(CLOCK_THREAD_CPUTIME_ID);
}

static void on_idle(uv_idle_t *h)
{
	struct bench *b = h->data;
	double t0 = cpu_s();

	for (int i = 0; i < BURST && b->appended < b->total &&
			b->appended - b->committed < IN_FLIGHT_MAX;
	     i++) {
		char summary[64], detail[128];
		int64_t id;

		snprintf(summary, sizeof(summary), "daemon.ping ok %ld",
			 b->appended);
		snprintf(detail, sizeof(detail),
			 "{\"method\":\"daemon.ping\",\"outcome\":\"ok\","
			 "\"duration_us\":%ld}",
			 b->appended % 97);
		id = journal_append(b->j, NULL, "operator", "rpc", summary,
				    detail);
		if (id < 0) {
			fprintf(stderr, "journal_append: %s\n",
				strerror((int)-id));
			exit(1);
		}
		b->appended++;
	}
	b->append_s += cpu_s() - t0;
	if (b->appended == b->total)
		uv_idle_stop(h);
}

static void on_commit(void *data, const struct journal_event *evs, size_t n)
{
	struct bench *b = data;

	b->committed += (long)n;
	b->commits++;
	if (b->committed == b->total)
		b->done = true;
}

static void on_closed(void *data, int err)
{
	struct bench *b = data;

	if (err < 0)
		fprintf(stderr, "journal_close: %s\n", strerror(-err));
	b->closed = true;
}

static void on_idle_closed(uv_handle_t *h)
{
}

int main(int argc, char **argv)
{
	struct bench b = {0};
	struct journal_verify_result vr;
	char dir[] = "/tmp/spd-bench-journal-XXXXXX";
	char path[sizeof(dir) + 16], cmd[sizeof(dir) + 16];
	uv_loop_t loop;
	double t0, t1;
	int r;

	b.total = argc > 1 ? atol(argv[1]) : DEFAULT_EVENTS;
	if (b.total <= 0 || !mkdtemp(dir)) {
		fprintf(stderr, "usage: journal [N]\n");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/journal.db", dir);
	uv_loop_init(&loop);
	r = journal_open(&loop, path, &b.j);
	if (r < 0) {
		fprintf(stderr, "journal_open: %s\n", strerror(-r));
		return 1;
	}
	journal_set_commit_cb(b.j, on_commit, &b);
	uv_idle_init(&loop, &b.idle);
	b.idle.data = &b;

	t0 = now_s();
	uv_idle_start(&b.idle, on_idle);
	while (!b.done)
		uv_run(&loop, UV_RUN_ONCE);
	t1 = now_s();

	printf("journal: %ld events in %.2f s = %.0f events/s (group commit, "
	       "%lld transactions, %.0f events each)\n",
	       b.total, t1 - t0, (double)b.total / (t1 - t0),
	       (long long)b.commits, (double)b.total / (double)b.commits);
	printf("journal: the loop thread spent %.2f us of CPU per append\n",
	       b.append_s * 1e6 / (double)b.total);
	printf("journal: %.1f MiB on disk, %.0f bytes per event\n",
	       (double)journal_size_bytes(b.j) / (1024 * 1024),
	       (double)journal_size_bytes(b.j) / (double)b.total);

	uv_close((uv_handle_t *)&b.idle, on_idle_closed);
	journal_close(b.j, on_closed, &b);
	while (!b.closed)
		uv_run(&loop, UV_RUN_ONCE);
	uv_run(&loop, UV_RUN_DEFAULT);
	if (uv_loop_close(&loop) != 0)
		fprintf(stderr, "journal: handles left open\n");

	t0 = now_s();
	r = journal_verify_path(path, &vr);
	t1 = now_s();
	if (r < 0 || !vr.ok) {
		fprintf(stderr, "journal: verify failed: %s\n",
			r < 0 ? strerror(-r) : vr.detail);
		return 1;
	}
	printf("journal: verify %lld rows in %.2f s = %.0f rows/s\n",
	       (long long)vr.checked, t1 - t0, (double)vr.checked / (t1 - t0));
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "journal: could not remove %s\n", dir);
	return 0;
}

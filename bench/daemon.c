/*
 * Benchmarks of spd's foundation (issue 2): ping round trip over one
 * connection, requests/s with 1 and 64 concurrent connections (every
 * request journaled), journal commit rate under that load, and spd's
 * resident size idle and with 1,000 open connections.
 *
 * Runs a real spd --foreground in temporary directories.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/lib/benchutil.h"
#include "tests/lib/spdproc.h"
#include "tests/lib/testlib.h"

static struct test_spd T;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long journal_events(void)
{
	int fd = test_spd_connect(&T);
	char *r = test_call(&T, fd, 1, "daemon.status", NULL, true);
	char *p = strstr(r, "\"events\":");
	long n = p ? atol(p + 9) : -1;

	free(r);
	close(fd);
	return n;
}

#define WINDOW 16

struct load {
	int n;
	int ok;
};

/* Pipelined pings, WINDOW in flight, on one connection. */
static void *load_thread(void *arg)
{
	struct load *l = arg;
	int fd = test_spd_connect(&T);
	char line[256];
	int len = snprintf(line, sizeof(line),
			   "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
			   "\"daemon.ping\",\"params\":{\"token\":\"%s\"}}\n",
			   T.token);
	int sent = 0, got = 0;
	char rbuf[65536];
	size_t have = 0;

	while (got < l->n) {
		while (sent < l->n && sent - got < WINDOW) {
			test_send(fd, line, (size_t)len);
			sent++;
		}
		ssize_t r = read(fd, rbuf + have, sizeof(rbuf) - have);
		if (r <= 0)
			break;
		have += (size_t)r;
		char *p = rbuf, *nl;
		while ((nl = memchr(p, '\n', have - (size_t)(p - rbuf)))) {
			if (memmem(p, (size_t)(nl - p), "\"pong\":true", 11))
				l->ok++;
			got++;
			p = nl + 1;
		}
		have -= (size_t)(p - rbuf);
		memmove(rbuf, p, have);
	}
	close(fd);
	return NULL;
}

static void throughput(int conns, int per)
{
	pthread_t th[64];
	struct load l[64];
	long ev0 = journal_events(), ev1;
	double t0 = now_s(), t1, t2;
	int ok = 0;

	for (int i = 0; i < conns; i++) {
		l[i].n = per;
		l[i].ok = 0;
		pthread_create(&th[i], NULL, load_thread, &l[i]);
	}
	for (int i = 0; i < conns; i++) {
		pthread_join(th[i], NULL);
		ok += l[i].ok;
	}
	t1 = now_s();
	/* Wait until the journal has committed every request. */
	for (;;) {
		ev1 = journal_events();
		if (ev1 - ev0 >= (long)conns * per)
			break;
		usleep(1000);
	}
	t2 = now_s();
	printf(
	    "requests/s, %2d connection%s: %9.0f req/s  (%d requests, %d ok; "
	    "journaled %ld events, all committed after %.3f s = %.0f "
	    "events/s)\n",
	    conns, conns == 1 ? " " : "s", (double)(conns * per) / (t1 - t0),
	    conns * per, ok, ev1 - ev0, t2 - t0,
	    (double)(ev1 - ev0) / (t2 - t0));
}

/* One write of req and the read of a line back on fd, n times after
 * 1,000 to warm up: the round trips in us, into rtt. */
static void ping_loop(int fd, const char *req, size_t len, double *rtt, int n)
{
	char rb[512];

	for (int i = -1000; i < n; i++) {
		double a = now_s();
		size_t have = 0;

		test_send(fd, req, len);
		while (!have || rb[have - 1] != '\n') {
			ssize_t r = read(fd, rb + have, sizeof(rb) - have);

			ck_assert(r > 0);
			have += (size_t)r;
		}
		if (i >= 0)
			rtt[i] = (now_s() - a) * 1e6;
	}
}

/*
 * The floor under the ping: the same client loop against a process that
 * only reads a line and writes ping's reply back (blocking reads and
 * writes on a Unix socket pair, no parse): what this machine takes for
 * the two cross-process wake-ups alone.  p50 in us.
 */
static double ping_floor(const char *req, size_t len, double *rtt, int n)
{
	static const char reply[] =
	    "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"pong\":true}}\n";
	int sv[2];
	pid_t pid;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char b[512];
		ssize_t k;

		close(sv[0]);
		while ((k = read(sv[1], b, sizeof(b))) > 0)
			if (memchr(b, '\n', (size_t)k) &&
			    write(sv[1], reply, sizeof(reply) - 1) < 0)
				break;
		_exit(0);
	}
	close(sv[1]);
	ping_loop(sv[0], req, len, rtt, n);
	close(sv[0]);
	waitpid(pid, NULL, 0);
	qsort(rtt, (size_t)n, sizeof(double), bench_cmp_double);
	return rtt[n / 2];
}

/* Runs as one Check test (without fork) because the spd helpers of
 * tests/lib report failures through Check. */
START_TEST(bench_daemon)
{
	enum { PINGS = 20000, CONNS = 1000 };
	static double rtt[PINGS];
	struct rlimit rl;
	int fd, fds[CONNS];

	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);

	test_spd_prepare(&T, NULL);
	test_spd_start(&T);
	sleep(1);
	{
		long kib = bench_rss_kib(T.pid);

		printf("spd resident idle: %ld KiB (target < 10240 KiB: %s)\n",
		       kib, bench_met(kib >= 0 && kib < 10240));
	}

	fd = test_spd_connect(&T);
	free(test_call(&T, fd, 0, "auth", NULL, true));
	{
		/* One write and one read per ping: the client's own cost is
		 * kept out of the figure as far as a client can. */
		static const char req[] =
		    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
		    "\"daemon.ping\"}\n";
		double floor;

		ping_loop(fd, req, sizeof(req) - 1, rtt, PINGS);
		close(fd);
		qsort(rtt, PINGS, sizeof(double), bench_cmp_double);
		printf("ping round trip, one connection: p50 %.1f us, p99 "
		       "%.1f us (%d pings; target p50 < 50 us: %s)\n",
		       rtt[PINGS / 2], rtt[PINGS * 99 / 100], PINGS,
		       bench_met(rtt[PINGS / 2] < 50));
		floor = ping_floor(req, sizeof(req) - 1, rtt, PINGS);
		printf("  floor, same run: a process that only echoes ping's "
		       "reply: p50 %.1f us, p99 %.1f us\n",
		       floor, rtt[PINGS * 99 / 100]);
	}

	throughput(1, 50000);
	throughput(64, 2000);

	for (int i = 0; i < CONNS; i++) {
		fds[i] = test_spd_connect(&T);
		free(test_call(&T, fds[i], 1, "daemon.ping", NULL, true));
	}
	{
		long kib = bench_rss_kib(T.pid);

		printf("spd resident with %d open connections: %ld KiB "
		       "(target < 65536 KiB: %s)\n",
		       CONNS, kib, bench_met(kib >= 0 && kib < 65536));
	}
	for (int i = 0; i < CONNS; i++)
		close(fds[i]);
	test_spd_cleanup(&T);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("bench");
	TCase *tc = tcase_create("daemon");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, bench_daemon);
	tcase_set_timeout(tc, 600);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_SILENT);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

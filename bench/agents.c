/*
 * Many agents at once (issue 39): 8 sessions (worktrees) and the
 * operator, each running `spctl run -- /bin/true` in turn, interleaved,
 * BENCH_RUNS rounds (default 50), with `bwrap --unshare-all /bin/true`
 * run beside each of them (interleaved, the same count); then the 8
 * sessions concurrently (8 clients at once, each its runs back to back)
 * beside 8 concurrent bubblewrap loops.  Prints each kind's p50 and p99
 * against bubblewrap's and whether the targets are met: interleaved p50
 * <= 0.5x and p99 <= 1.0x bubblewrap; concurrent runs per second and p99
 * reported beside bubblewrap's at the same concurrency.  A real spd (of
 * BUILD, default build) in a directory under /var/tmp.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/lib/benchutil.h"

#define SESSIONS 8
#define KINDS (SESSIONS + 1) /* [0] the operator, [1..8] the sessions */
#define RUNS_DEFAULT 50

static char spctl[4200];
static char tokens[KINDS][300];
static char opdir[4400];
static pid_t spd = -1;

/* spd goes with the bench, on every way out. */
static void stop_spd(void)
{
	if (spd > 0) {
		kill(spd, SIGTERM);
		waitpid(spd, NULL, 0);
		spd = -1;
	}
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* One `spctl run -- /bin/true` of kind k (0: the operator, in opdir);
 * its wall time in ms, or -1. */
static double run_kind(int k)
{
	char *argv[] = {spctl, "run", "--", "/bin/true", NULL};
	double t0;

	if (k == 0)
		unsetenv("SPD_SESSION_TOKEN");
	else
		setenv("SPD_SESSION_TOKEN", tokens[k], 1);
	t0 = now_ms();
	if (bench_run_quiet(argv) < 0)
		return -1;
	return now_ms() - t0;
}

static double run_bwrap(void)
{
	char *argv[] = {"/usr/bin/bwrap", "--ro-bind", "/",	 "/",
			"--dev",	  "/dev",      "--proc", "/proc",
			"--unshare-all",  "/bin/true", NULL};
	double t0 = now_ms();

	if (bench_run_quiet(argv) < 0)
		return -1;
	return now_ms() - t0;
}

static double pct(double *v, int n, int p)
{
	qsort(v, (size_t)n, sizeof(double), bench_cmp_double);
	return n ? v[(n - 1) * p / 100] : 0;
}

/* The 8 sessions at once: child i runs kind i+1 `runs` times, writing
 * each run's time into lat[i * runs + j]; bwrap instead when bw.  Returns
 * the wall time of the whole, or -1. */
static double concurrent(double *lat, int runs, int bw)
{
	double t0 = now_ms();
	int failed = 0;

	for (int i = 0; i < SESSIONS; i++) {
		pid_t p = fork();

		if (p < 0)
			return -1;
		if (p == 0) {
			for (int j = 0; j < runs; j++)
				lat[i * runs + j] =
				    bw ? run_bwrap() : run_kind(i + 1);
			_exit(0);
		}
	}
	for (int i = 0; i < SESSIONS; i++) {
		int st;

		if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
			failed++;
	}
	return failed ? -1 : now_ms() - t0;
}

int main(void)
{
	const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
	const char *runs_env = getenv("BENCH_RUNS");
	int runs = runs_env ? atoi(runs_env) : RUNS_DEFAULT;
	char dir[4200], abs_build[4096];
	double *t[KINDS], *bw[KINDS], *clat, *blat, wall, bwall;
	bool have_bw = access("/usr/bin/bwrap", X_OK) == 0 && run_bwrap() >= 0;

	if (runs < 2 || !realpath(build, abs_build))
		return fprintf(stderr, "bench agents: bad BUILD/BENCH_RUNS\n"),
		       1;
	snprintf(spctl, sizeof(spctl), "%s/spctl", abs_build);
	/* Outside any git checkout: an operator's run in a directory of
	 * spd's own clone would take the clone for its workspace. */
	snprintf(dir, sizeof(dir), "/var/tmp/spd-bench-agents-XXXXXX");
	if (!mkdtemp(dir))
		return perror("mkdtemp"), 1;
	spd = bench_spd_start(abs_build, dir);
	atexit(stop_spd);
	if (spd < 0)
		return fprintf(stderr, "bench agents: spd did not start\n"), 1;
	for (int k = 1; k < KINDS; k++) {
		char name[16];

		snprintf(name, sizeof(name), "s%d", k);
		/* session.start is the operator's: no agent token set. */
		unsetenv("SPD_SESSION_TOKEN");
		if (bench_agent_session(dir, name, 0, 0, false) < 0) {
			fprintf(stderr, "bench agents: session %d failed\n", k);
			return 1;
		}
		snprintf(tokens[k], sizeof(tokens[k]), "%s",
			 getenv("SPD_SESSION_TOKEN"));
	}
	snprintf(opdir, sizeof(opdir), "%s/operator", dir);
	if (mkdir(opdir, 0755) < 0 || chdir(opdir) < 0)
		return perror(opdir), 1;

	for (int k = 0; k < KINDS; k++) {
		t[k] = calloc((size_t)runs, sizeof(double));
		bw[k] = calloc((size_t)runs, sizeof(double));
		if (!t[k] || !bw[k])
			return 1;
	}
	/* Warm up: each kind's first runs (the worktree's first walk). */
	for (int k = 0; k < KINDS; k++)
		for (int j = 0; j < 3; j++)
			run_kind(k);
	for (int j = 0; j < runs; j++)
		for (int k = 0; k < KINDS; k++) {
			if ((t[k][j] = run_kind(k)) < 0)
				return fprintf(stderr, "run of %d failed\n", k),
				       1;
			bw[k][j] = have_bw ? run_bwrap() : -1;
		}
	printf("%d sessions (worktrees) and the operator, interleaved, %d "
	       "runs each, `spctl run -- /bin/true` (ms)\n",
	       SESSIONS, runs);
	printf("%-12s %8s %8s %10s %10s %8s %8s  %s\n", "kind", "p50", "p99",
	       "bwrap p50", "bwrap p99", "p50 x", "p99 x",
	       "target p50 <= 0.5x, p99 <= 1.0x");
	for (int k = 0; k < KINDS; k++) {
		char kind[16];
		double p50 = pct(t[k], runs, 50), p99 = pct(t[k], runs, 99);

		snprintf(kind, sizeof(kind), k ? "session %d" : "operator", k);
		if (!have_bw) {
			printf("%-12s %8.3f %8.3f  bubblewrap not measured\n",
			       kind, p50, p99);
			continue;
		}
		double b50 = pct(bw[k], runs, 50), b99 = pct(bw[k], runs, 99);

		printf("%-12s %8.3f %8.3f %10.3f %10.3f %8.2f %8.2f  %s\n",
		       kind, p50, p99, b50, b99, p50 / b50, p99 / b99,
		       bench_met(p50 <= 0.5 * b50 && p99 <= b99));
	}

	clat = mmap(NULL, sizeof(double) * SESSIONS * (size_t)runs,
		    PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	blat = mmap(NULL, sizeof(double) * SESSIONS * (size_t)runs,
		    PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (clat == MAP_FAILED || blat == MAP_FAILED)
		return 1;
	wall = concurrent(clat, runs, 0);
	bwall = have_bw ? concurrent(blat, runs, 1) : -1;
	if (wall < 0)
		return fprintf(stderr, "concurrent runs failed\n"), 1;
	printf("%d sessions at once, %d runs each: %.0f runs/s, p50 %.3f ms, "
	       "p99 %.3f ms",
	       SESSIONS, runs, SESSIONS * runs * 1000.0 / wall,
	       pct(clat, SESSIONS * runs, 50), pct(clat, SESSIONS * runs, 99));
	if (bwall > 0)
		printf("; bubblewrap at %d at once: %.0f runs/s, p50 %.3f ms, "
		       "p99 %.3f ms (p99 %.2fx)",
		       SESSIONS, SESSIONS * runs * 1000.0 / bwall,
		       pct(blat, SESSIONS * runs, 50),
		       pct(blat, SESSIONS * runs, 99),
		       pct(clat, SESSIONS * runs, 99) /
			   pct(blat, SESSIONS * runs, 99));
	printf("\n");
	stop_spd();
	{
		char cmd[4300];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
	}
	return 0;
}

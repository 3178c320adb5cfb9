/*
 * A new session's first runs, and the first runs after spd restarts
 * (issue 39): `spctl run -- /bin/true` as an agent in a new worktree
 * session of a 10,000-file repository, its 1st, 2nd and 3rd runs, each
 * beside a `bwrap --unshare-all /bin/true` run interleaved; BENCH_RUNS
 * sessions (default 5), each started BENCH_THINK_MS (default 500) before
 * its first run, as an agent's model thinks.  Then spd is restarted as
 * many times, and the last session's 1st and 2nd runs after each
 * restart are timed the same way.  Prints each row's median, its
 * bubblewrap's median and whether it is within the target, 0.5x.
 *
 *   BUILD=build build/bench/newsession [files]
 *
 * With BENCH_TRACE set, spctl, spd and sandboxd stamp every step
 * (common/trace.h) and the median time of each step of the 1st, 2nd
 * and after-restart runs is printed beneath (as bench/trace prints).
 * A real spd (of BUILD, default build) in a directory under /var/tmp.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/trace.h"
#include "tests/lib/benchutil.h"

#define ROUNDS_DEFAULT 5
#define ROUNDS_MAX 50
#define FILES_DEFAULT 10000
#define DIRS 100
/* Between session start (or spd's start) and the first command: the
 * model's turn (seconds, in truth; bench/sandbox.c has the same). */
#define THINK_MS_DEFAULT 500
/* The rows: a new session's 1st, 2nd, 3rd run; after a restart the 1st
 * and 2nd. */
enum { NEW1, NEW2, NEW3, RST1, RST2, ROWS };
static const char *const row_name[ROWS] = {
    "new session, 1st run", "  2nd run", "  3rd run",
    "after spd's restart, 1st run", "  2nd run"};
/* Labels of one row's trace steps kept. */
#define STEPS_MAX 160

static char spctl[4200], abs_build[4096], dir[4200], tpath[4300];
static pid_t spd = -1;

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

static double timed(char *const argv[])
{
	double t0 = now_ms();

	if (bench_run_quiet(argv) < 0)
		return -1;
	return now_ms() - t0;
}

static double run_agent(int row)
{
	char *argv[] = {spctl, "run", "--", "/bin/true", NULL};
	double t;

	if (trace_on()) {
		/* trace_stamp keeps the pointer: a static string. */
		static const char *const marks[ROWS] = {"row0", "row1", "row2",
							"row3", "row4"};
		trace_stamp(marks[row]);
		trace_stamp("fork");
		trace_flush();
	}
	t = timed(argv);
	if (trace_on()) {
		trace_stamp("waited");
		trace_flush();
	}
	return t;
}

static double run_bwrap(void)
{
	char *argv[] = {"/usr/bin/bwrap", "--ro-bind", "/",	 "/",
			"--dev",	  "/dev",      "--proc", "/proc",
			"--unshare-all",  "/bin/true", NULL};

	return timed(argv);
}

struct step {
	char name[64];
	double v[ROUNDS_MAX];
	int n;
};

/* The trace's steps, per row: the median time of each since the one
 * before it, in the order they came. */
static void report_trace(void)
{
	static struct step steps[ROWS][STEPS_MAX];
	static int nsteps[ROWS];
	FILE *f = fopen(tpath, "re");
	char line[256];
	int row = -1;
	unsigned long long prev = 0;
	bool in_run = false;

	if (!f)
		return;
	/* Each process appends its own buffer: stamps are in time order
	 * within one writer only.  A run's are read after "bench fork"
	 * until "bench waited"; the others' stamps of the same run come
	 * in between because each flushes before the bench's "waited". */
	{
		struct st {
			unsigned long long ns;
			char label[64];
		} *s = NULL;
		size_t n = 0, cap = 0;

		while (fgets(line, sizeof(line), f)) {
			unsigned long long ns;
			char who[32], what[32];

			if (sscanf(line, "%llu %31s %31s", &ns, who, what) != 3)
				continue;
			if (n == cap) {
				cap = cap ? 2 * cap : 4096;
				s = realloc(s, cap * sizeof(*s));
				if (!s)
					return;
			}
			s[n].ns = ns;
			snprintf(s[n].label, sizeof(s[n].label), "%s %s", who,
				 what);
			n++;
		}
		fclose(f);
		for (size_t i = 1; i < n; i++)
			for (size_t j = i; j > 0 && s[j - 1].ns > s[j].ns;
			     j--) {
				struct st t = s[j];

				s[j] = s[j - 1];
				s[j - 1] = t;
			}
		for (size_t i = 0; i < n; i++) {
			struct step *st = NULL;

			if (strncmp(s[i].label, "bench row", 9) == 0) {
				row = atoi(s[i].label + 9);
				continue;
			}
			if (strcmp(s[i].label, "bench fork") == 0) {
				in_run = row >= 0 && row < ROWS;
				prev = s[i].ns;
				continue;
			}
			if (!in_run)
				continue;
			for (int k = 0; k < nsteps[row]; k++)
				if (strcmp(steps[row][k].name, s[i].label) == 0)
					st = &steps[row][k];
			if (!st && nsteps[row] < STEPS_MAX) {
				st = &steps[row][nsteps[row]++];
				snprintf(st->name, sizeof(st->name), "%s",
					 s[i].label);
			}
			if (st && st->n < ROUNDS_MAX)
				st->v[st->n++] = (double)(s[i].ns - prev) / 1e6;
			prev = s[i].ns;
			if (strcmp(s[i].label, "bench waited") == 0)
				in_run = false;
		}
		free(s);
	}
	for (int r = 0; r < ROWS; r++) {
		printf("trace, %s: median ms since the step before (runs)\n",
		       row_name[r]);
		for (int k = 0; k < nsteps[r]; k++) {
			struct step *st = &steps[r][k];
			double m = bench_median(st->v, st->n);

			if (m >= 0.05)
				printf("  %-28s %8.3f (%d)\n", st->name, m,
				       st->n);
		}
	}
}

int main(int argc, char **argv)
{
	const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
	const char *runs_env = getenv("BENCH_RUNS");
	const char *think_env = getenv("BENCH_THINK_MS");
	int rounds = runs_env ? atoi(runs_env) : ROUNDS_DEFAULT;
	int think_ms = think_env ? atoi(think_env) : THINK_MS_DEFAULT;
	long files = argc > 1 ? atol(argv[1]) : FILES_DEFAULT;
	static double t[ROWS][ROUNDS_MAX], bw[ROWS][ROUNDS_MAX];
	bool have_bw = access("/usr/bin/bwrap", X_OK) == 0 && run_bwrap() >= 0;
	char last_token[300] = "";

	if (rounds < 1 || rounds > ROUNDS_MAX || think_ms < 0 ||
	    !realpath(build, abs_build))
		return fprintf(stderr,
			       "bench newsession: bad BUILD/BENCH_RUNS\n"),
		       1;
	snprintf(spctl, sizeof(spctl), "%s/spctl", abs_build);
	/* Outside any git checkout (bench/agents.c). */
	snprintf(dir, sizeof(dir), "/var/tmp/spd-bench-newsession-XXXXXX");
	if (!mkdtemp(dir))
		return perror("mkdtemp"), 1;
	if (getenv("BENCH_TRACE")) {
		snprintf(tpath, sizeof(tpath), "%s/trace", dir);
		setenv(TRACE_ENV, tpath, 1);
		if (trace_open_env("bench") < 0)
			return fprintf(stderr, "cannot open %s\n", tpath), 1;
	}
	spd = bench_spd_start(abs_build, dir);
	atexit(stop_spd);
	if (spd < 0)
		return fprintf(stderr, "bench newsession: no spd\n"), 1;
	if (chdir(dir) < 0)
		return perror(dir), 1;
	for (int i = 0; i < rounds; i++) {
		char name[16];

		snprintf(name, sizeof(name), "s%d", i);
		unsetenv("SPD_SESSION_TOKEN");
		if (bench_agent_session(dir, name, files, DIRS, false) < 0)
			return fprintf(stderr, "session %d failed\n", i), 1;
		usleep((useconds_t)think_ms * 1000);
		for (int r = NEW1; r <= NEW3; r++) {
			if ((t[r][i] = run_agent(r)) < 0)
				return fprintf(stderr, "run failed\n"), 1;
			bw[r][i] = have_bw ? run_bwrap() : -1;
		}
		snprintf(last_token, sizeof(last_token), "%s",
			 getenv("SPD_SESSION_TOKEN"));
	}
	for (int i = 0; i < rounds; i++) {
		stop_spd();
		spd = bench_spd_start(abs_build, dir);
		if (spd < 0)
			return fprintf(stderr, "spd did not restart\n"), 1;
		setenv("SPD_SESSION_TOKEN", last_token, 1);
		usleep((useconds_t)think_ms * 1000);
		for (int r = RST1; r <= RST2; r++) {
			if ((t[r][i] = run_agent(r)) < 0)
				return fprintf(stderr, "run failed\n"), 1;
			bw[r][i] = have_bw ? run_bwrap() : -1;
		}
	}
	stop_spd();
	trace_close();
	printf("agent in a new worktree session of %ld files, %d sessions "
	       "and %d restarts, %d ms after the start; `spctl run -- "
	       "/bin/true`, bubblewrap interleaved (ms, medians)\n",
	       files, rounds, rounds, think_ms);
	printf("%-30s %8s %8s %8s %8s  %s\n", "row", "median", "max", "bwrap",
	       "x", "target <= 0.5x bwrap");
	for (int r = 0; r < ROWS; r++) {
		double mx = 0;

		for (int i = 0; i < rounds; i++)
			if (t[r][i] > mx)
				mx = t[r][i];
		double m = bench_median(t[r], rounds);
		if (!have_bw) {
			printf("%-30s %8.3f %8.3f  bubblewrap not measured\n",
			       row_name[r], m, mx);
			continue;
		}
		double b = bench_median(bw[r], rounds);
		printf("%-30s %8.3f %8.3f %8.3f %8.2f  %s\n", row_name[r], m,
		       mx, b, m / b, bench_met(m <= 0.5 * b));
	}
	if (tpath[0])
		report_trace();
	{
		char cmd[4300];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
	}
	return 0;
}

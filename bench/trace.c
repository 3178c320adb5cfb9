/*
 * The run path's step trace (issue 16): one `spctl run -- /bin/true`
 * after another against a real spd in temporary directories, with
 * SPD_TRACE set, so that spctl, spd and sandboxd each stamp their steps
 * (common/trace.h) into one file.  Prints, for each step, the median time
 * since the step before it and since the fork of spctl, over the runs.
 *
 *   build/bench/trace [--agent] [files]
 *
 * files (default 0) regular files in 100 directories make the workspace,
 * to see what its size costs (the hard-link check).  BENCH_SETTLE_US
 * pauses that many microseconds before each run.  With --agent the
 * runs are an agent's, in a worktree session of a repository of those
 * files (its session token, the policy, the git guard).  BENCH_RUNS
 * overrides the 100 runs; BENCH_CMD names the program run instead of
 * /bin/true (a static one shows the run path without the dynamic loader's
 * 0.5 ms).  Each stamp is a line "<ns> <who> <step>"; a run's stamps begin
 * at "bench fork" and end at "bench waited".
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/trace.h"
#include "tests/lib/benchutil.h"

/* Enough runs for a stable median of every step; few enough to take a
 * second or two. */
#define TRACE_RUNS_DEFAULT 100
/* Runs not counted: the first probes the kernel and builds the filter. */
#define TRACE_WARMUP 5
/* Distinct "who step" labels kept; a run has about 80 (one per mount
 * operation of sandboxd's plan). */
#define TRACE_LABELS_MAX 160
/* Directories the workspace's files are spread over. */
#define TRACE_DIRS 100

struct stamp {
	unsigned long long ns;
	char label[64];
};

struct label {
	char name[64];
	double *since_prev, *since_start;
	int n;
};

static int cmp_stamp(const void *a, const void *b)
{
	const struct stamp *x = a, *y = b;

	return x->ns < y->ns ? -1 : x->ns > y->ns;
}

static struct label *label_get(struct label *l, int *nl, const char *name,
			       int runs)
{
	for (int i = 0; i < *nl; i++)
		if (strcmp(l[i].name, name) == 0)
			return &l[i];
	if (*nl == TRACE_LABELS_MAX)
		return NULL;
	l += (*nl)++;
	snprintf(l->name, sizeof(l->name), "%s", name);
	l->since_prev = calloc((size_t)runs, sizeof(double));
	l->since_start = calloc((size_t)runs, sizeof(double));
	return l->since_prev && l->since_start ? l : NULL;
}

static int cmp_label(const void *a, const void *b)
{
	const struct label *x = a, *y = b;
	double mx = x->since_start[x->n / 2], my = y->since_start[y->n / 2];

	return mx < my ? -1 : mx > my;
}

/* Reads the trace, splits it into runs at "bench fork", prints the
 * table.  Returns 0 or -1. */
static int report(const char *path, int runs)
{
	static struct label labels[TRACE_LABELS_MAX];
	struct stamp *s = NULL;
	size_t n = 0, cap = 0;
	char line[256];
	int nl = 0, run = -1 - TRACE_WARMUP;
	unsigned long long start = 0, prev = 0;
	FILE *f = fopen(path, "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char who[32], step[32];
		unsigned long long ns;

		if (sscanf(line, "%llu %31s %31s", &ns, who, step) != 3)
			continue;
		if (n == cap) {
			struct stamp *t;

			cap = cap ? 2 * cap : 4096;
			t = realloc(s, cap * sizeof(*s));
			if (!t)
				return -1;
			s = t;
		}
		s[n].ns = ns;
		snprintf(s[n].label, sizeof(s[n].label), "%s %s", who, step);
		n++;
	}
	fclose(f);
	qsort(s, n, sizeof(*s), cmp_stamp);
	for (size_t i = 0; i < n; i++) {
		struct label *l;

		if (strcmp(s[i].label, "bench fork") == 0) {
			run++;
			start = prev = s[i].ns;
			continue;
		}
		if (run < 0 || run >= runs)
			continue;
		l = label_get(labels, &nl, s[i].label, runs);
		if (!l || l->n >= runs)
			continue;
		l->since_prev[l->n] = (double)(s[i].ns - prev) / 1e6;
		l->since_start[l->n] = (double)(s[i].ns - start) / 1e6;
		l->n++;
		prev = s[i].ns;
	}
	free(s);
	for (int i = 0; i < nl; i++) {
		bench_median(labels[i].since_start, labels[i].n);
		bench_median(labels[i].since_prev, labels[i].n);
	}
	qsort(labels, (size_t)nl, sizeof(labels[0]), cmp_label);
	printf("%-24s %12s %12s %6s\n", "step (who, after what)", "ms step",
	       "ms total", "runs");
	for (int i = 0; i < nl; i++) {
		struct label *l = &labels[i];

		printf("%-24s %12.3f %12.3f %6d\n", l->name,
		       l->since_prev[l->n / 2], l->since_start[l->n / 2], l->n);
		free(l->since_prev);
		free(l->since_start);
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *runs_env = getenv("BENCH_RUNS");
	const char *build = getenv("BUILD");
	int runs = runs_env ? atoi(runs_env) : TRACE_RUNS_DEFAULT;
	/* A pause before each run, as the sandbox bench's interleaved rows
	 * have (what the run before left running is done by then). */
	const char *pause_env = getenv("BENCH_SETTLE_US");
	useconds_t pause_us = pause_env ? (useconds_t)atoi(pause_env) : 0;
	char *cmd_env = getenv("BENCH_CMD"), true_path[] = "/bin/true";
	char *cmd = cmd_env && *cmd_env ? cmd_env : true_path;
	bool agent = argc > 1 && strcmp(argv[1], "--agent") == 0;
	long files = argc > 1 + agent ? atol(argv[1 + agent]) : 0;
	char dir[] = "/tmp/spd-bench-trace-XXXXXX";
	char ws[256], spctl[4200], tpath[4200];
	pid_t pid;
	int status, rc = 1;

	if (runs < 1 || !mkdtemp(dir))
		return 1;
	if (!build)
		build = "build";
	snprintf(spctl, sizeof(spctl), "%s/spctl", build);
	snprintf(ws, sizeof(ws), "%s/ws", dir);
	/* dir is a short mkdtemp name: ws always fits. */
	snprintf(tpath, sizeof(tpath), "%s/trace", dir);
	if (mkdir(ws, 0755) < 0 ||
	    bench_make_files(ws, files, TRACE_DIRS) < 0) {
		fprintf(stderr, "cannot make the workspace\n");
		goto out;
	}
	setenv(TRACE_ENV, tpath, 1);
	if (trace_open_env("bench") < 0) {
		fprintf(stderr, "cannot open the trace %s\n", tpath);
		goto out;
	}
	pid = bench_spd_start(build, dir);
	if (pid < 0)
		goto out;
	/* As an agent: a worktree session of a repository of files files,
	 * its token in SPD_SESSION_TOKEN, policy, guard and journal on. */
	if (agent &&
	    bench_agent_session(dir, "repo", files, TRACE_DIRS, false) < 0) {
		fprintf(stderr, "cannot start a session\n");
		goto stop;
	}
	/* Past the guard's 2 s in which the session's own new files are
	 * racy and every few commands check the whole snapshot (bench/sandbox.c,
	 * BENCH_AGENT_RACY_MS): an agent's commands come after its model's
	 * turn. */
	if (agent)
		usleep(2500 * 1000);
	{
		char *args_op[] = {spctl,   "run", "--workspace", ws,
				   "--yes", "--",  cmd,		  NULL};
		char *args_agent[] = {spctl, "run", "--", cmd, NULL};
		char **args = agent ? args_agent : args_op;

		for (int i = 0; i < TRACE_WARMUP + runs; i++) {
			if (pause_us)
				usleep(pause_us);
			trace_stamp("fork");
			trace_flush();
			if (bench_run_quiet(args) < 0) {
				fprintf(stderr, "spctl run failed\n");
				goto stop;
			}
			trace_stamp("waited");
			trace_flush();
		}
	}
	printf("%s: %ld files; %d runs (after %d warm-up); the "
	       "median of each step\n",
	       agent ? "agent, worktree session" : "workspace", files, runs,
	       TRACE_WARMUP);
	rc = 0;
stop:
	kill(pid, SIGTERM);
	waitpid(pid, &status, 0);
	if (rc == 0)
		rc = report(tpath, runs) < 0;
out:
	trace_close();
	{
		char *rm[] = {"rm", "-rf", dir, NULL};
		bench_run_quiet(rm);
	}
	return rc;
}

/*
 * Whether spd answers its other clients while a session starts (issue
 * 39, target 3: spd's loop never waits for a walk).  One client pings
 * spd back to back on its own connection while another starts sessions
 * on checkouts of 10,000 files: BENCH_RUNS (default 5) worktree
 * sessions, then as many in place, each on a repository of its own.
 * Per kind it prints the start's median and the pings whose wait
 * overlapped a start (how many, p50, p99, the longest), beside the same
 * pinger alone for a second before the first start.  Target: the
 * longest ping during the starts at most a tenth of a start's median
 * (while the loop did the start, a ping sent just after one waited for
 * all of it).
 *
 *   BUILD=build build/bench/startwait [files]
 *
 * Then, in the last in-place session, the agent's `spctl run --
 * /bin/true` BENCH_RUNS times after a new directory (with a file git
 * ignores) each, as many after a new directory of 3,000 files and one
 * ignored (removed after its run), as many times after a line added to
 * .gitignore, and as many times after nothing changed: the runs'
 * medians, and the pings during the first three kinds.  Target: the
 * same tenth of an in-place start for the longest ping (before, spd
 * walked the whole checkout on its loop for a new directory, and for a
 * .gitignore written; until 12-06 14:00, a new directory's own walk was
 * on the loop whatever its size).
 *
 * Then, in each worktree session, a tenth of its files rewritten, each
 * with content of its own, and a run of /bin/true in the session, after
 * whose reply spd reads the 1,000 files for the run's checkpoint; then
 * another tenth rewritten and committed in the agent's repository, and a
 * run at whose end spd takes the commit onto the session's branch (its
 * objects staged, scanned and copied) before its checkpoint: the runs'
 * medians, and the pings from each run's start until its checkpoint is
 * recorded against the tenth of a worktree start (before 12-06, spd did
 * both on its loop).
 *
 * Last, each worktree session ended (its files removed) after a tenth
 * of its files were rewritten (the agent's uncommitted work, committed
 * by the end), with the pings during the ends against the tenth of a
 * worktree start.
 *
 * A real spd (of BUILD, default build) in a directory under /var/tmp.
 */
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client/client.h"
#include "tests/lib/benchutil.h"

#define ROUNDS_DEFAULT 5
#define ROUNDS_MAX 20
#define FILES_DEFAULT 10000
#define DIRS 100
/* Pings kept (16 bytes each): the pinger runs all through, also while
 * the repositories are made (80 s on a file system slow to make files),
 * and stops keeping them past this; the rows after say so. */
#define PINGS_MAX 4000000
#define ALONE_MS 1000
enum { RUN_NEWDIR, RUN_BIGDIR, RUN_IGNORE, RUN_SAME, RUN_KINDS };

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Each ping: when it was sent and how long its answer took (ms). */
static double *sent, *took;
static atomic_size_t npings;
static atomic_bool pinging = true;
static int ping_failed;

static void *pinger(void *arg)
{
	struct client c;
	char err[256];

	(void)arg;
	if (client_open(&c, err, sizeof(err)) < 0) {
		fprintf(stderr, "bench startwait: %s\n", err);
		ping_failed = 1;
		return NULL;
	}
	while (atomic_load(&pinging)) {
		size_t i = atomic_load(&npings);
		json_t *res = NULL, *e = NULL;
		double t0 = now_ms();

		if (i >= PINGS_MAX)
			break;
		if (client_call(&c, RPC_M_DAEMON_PING, json_object(), NULL,
				NULL, &res, &e) < 0 ||
		    e) {
			ping_failed = 1;
			break;
		}
		sent[i] = t0;
		took[i] = now_ms() - t0;
		json_decref(res);
		atomic_store(&npings, i + 1);
	}
	client_close(&c);
	return NULL;
}

/* The pings that waited during one of the windows [w[k][0], w[k][1]),
 * into v (their waits, ms); returns how many. */
static size_t overlapping(double (*w)[2], int n, size_t upto, double *v)
{
	size_t k = 0;

	for (size_t i = 0; i < upto; i++)
		for (int j = 0; j < n; j++)
			if (sent[i] < w[j][1] && sent[i] + took[i] > w[j][0]) {
				v[k++] = took[i];
				break;
			}
	return k;
}

/* The params of the call timed in a session (each_worktree). */
static json_t *end_params(const char *id)
{
	return json_pack("{s:s}", "id", id);
}

/* The directory whose checks/ each session seals (main's). */
static const char *heldout_dir;

static json_t *heldout_params(const char *id)
{
	char path[4200];

	snprintf(path, sizeof(path), "%s/checks", heldout_dir);
	return json_pack("{s:s, s:s}", "id", id, "dir", path);
}

/* Back to checkpoint 2, the session's last (the runs' of the tenth
 * changed, then of the tenth committed): the tenth rewritten since is
 * checkpointed, then put back. */
static json_t *restore_params(const char *id)
{
	return json_pack("{s:s, s:i}", "id", id, "n", 2);
}

static json_t *run_params(const char *id)
{
	return json_pack("{s:s, s:b, s:[s]}", "session", id, "yes", 1, "argv",
			 "/bin/true");
}

/* Until session id's last checkpoint is recorded (session.log: no
 * longer pending); at most 60 s, a bound on a failure. */
static void checkpoint_settle(struct client *c, const char *id)
{
	for (int i = 0; i < 60000; i++) {
		json_t *r = NULL, *e = NULL;
		bool pending;

		if (client_call(c, RPC_M_SESSION_LOG,
				json_pack("{s:s}", "id", id), NULL, NULL, &r,
				&e) < 0 ||
		    e) {
			json_decref(e);
			return;
		}
		pending = json_is_true(json_object_get(r, "pending"));
		json_decref(r);
		if (!pending)
			return;
		usleep(1000);
	}
}

/*
 * In each of the first n worktree sessions, as the operator: the shell
 * line prep run in the worktree, then method called with params(id)
 * and timed (its length in len; its window in w, which for a run lasts
 * until the checkpoint of what it changed is recorded: spd reads that
 * after the reply, on its loop before 12-06 14:00).
 */
static int each_worktree(double (*w)[2], double *len, int n, const char *prep,
			 enum rpc_method method,
			 json_t *(*params)(const char *id))
{
	json_t *res = NULL, *e = NULL, *s;
	struct client c;
	char err[256];
	size_t i;
	int k = 0;

	if (client_open(&c, err, sizeof(err)) < 0 ||
	    client_call(&c, RPC_M_SESSION_LIST, json_object(), NULL, NULL, &res,
			&e) < 0 ||
	    e) {
		fprintf(stderr, "bench startwait: session.list failed\n");
		return -1;
	}
	json_array_foreach(json_object_get(res, "sessions"), i, s)
	{
		json_t *r2 = NULL, *e2 = NULL;
		const char *id = json_string_value(json_object_get(s, "id"));
		const char *mode =
		    json_string_value(json_object_get(s, "mode"));
		const char *wt =
		    json_string_value(json_object_get(s, "worktree"));
		char cmd[4600];

		if (k >= n || !id || !mode || !wt ||
		    strcmp(mode, "worktree") != 0)
			continue;
		snprintf(cmd, sizeof(cmd), "cd '%s' && %s", wt, prep);
		if (system(cmd) != 0) {
			fprintf(stderr, "bench startwait: %s failed\n", cmd);
			json_decref(res);
			client_close(&c);
			return -1;
		}
		w[k][0] = now_ms();
		if (client_call(&c, method, params(id), NULL, NULL, &r2, &e2) <
			0 ||
		    e2) {
			fprintf(stderr, "bench startwait: %s failed\n",
				rpc_method_name(method));
			json_decref(e2);
			json_decref(res);
			client_close(&c);
			return -1;
		}
		w[k][1] = now_ms();
		len[k] = w[k][1] - w[k][0];
		if (method == RPC_M_CMD_RUN) {
			checkpoint_settle(&c, id);
			w[k][1] = now_ms();
		}
		k++;
		json_decref(r2);
	}
	json_decref(res);
	client_close(&c);
	return k == n ? 0 : -1;
}

/* A tenth of a worktree's files rewritten (the agent's uncommitted work,
 * committed by the end). */
#define PREP_END                                                               \
	"find . -path ./.git -prune -o -type f -print | "                      \
	"awk 'NR % 10 == 1' | xargs sh -c 'for f; do echo changed >> "         \
	"\"$f\"; done' _"
/* Another tenth, each with content of its own, left uncommitted: the
 * run after it has spd read them for its checkpoint. */
#define PREP_CHANGE                                                            \
	"find . -path ./.git -prune -o -type f -print | "                      \
	"awk 'NR % 10 == 3' | xargs sh -c 'for f; do echo \"$f\" >> "          \
	"\"$f\"; done' _"
/* Another tenth, each with content of its own, committed by git in the
 * agent's repository there (as the agent would in a run); the run after
 * it has spd take that commit onto the session's branch. */
#define PREP_COMMIT                                                            \
	"find . -path ./.git -prune -o -type f -print | "                      \
	"awk 'NR % 10 == 2' | xargs sh -c 'for f; do echo \"$f\" >> "          \
	"\"$f\"; done' _ && git add -A && git -c user.name=b -c "              \
	"user.email=b@b.invalid commit -qm tenth"

static double pct(double *v, size_t n, double p)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), bench_cmp_double);
	return v[(size_t)((double)(n - 1) * p)];
}

/* A row: the pings whose wait overlapped the windows w against the
 * longest's target (limit); median < 0 prints none. */
static void row(const char *name, double median, double (*w)[2], int rounds,
		double *v, double limit)
{
	size_t n = overlapping(w, rounds, atomic_load(&npings), v);
	double mx = pct(v, n, 1.0);
	char m[32] = "-";

	if (median >= 0)
		snprintf(m, sizeof(m), "%.1f", median);
	printf("%-34s %8s %7zu %8.3f %8.3f %8.3f  %s\n", name, m, n,
	       pct(v, n, 0.5), pct(v, n, 0.99), mx,
	       bench_met(n > 0 && mx <= limit));
}

int main(int argc, char **argv)
{
	const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
	const char *runs_env = getenv("BENCH_RUNS");
	int rounds = runs_env ? atoi(runs_env) : ROUNDS_DEFAULT;
	long files = argc > 1 ? atol(argv[1]) : FILES_DEFAULT;
	static double win[2][ROUNDS_MAX][2], len[2][ROUNDS_MAX];
	static double runwin[RUN_KINDS][ROUNDS_MAX][2],
	    runlen[RUN_KINDS][ROUNDS_MAX];
	static double endwin[ROUNDS_MAX][2], endlen[ROUNDS_MAX];
	static double cmtwin[ROUNDS_MAX][2], cmtlen[ROUNDS_MAX];
	static double chgwin[ROUNDS_MAX][2], chglen[ROUNDS_MAX];
	static double difwin[ROUNDS_MAX][2], diflen[ROUNDS_MAX];
	static double verwin[ROUNDS_MAX][2], verlen[ROUNDS_MAX];
	static double mrgwin[ROUNDS_MAX][2], mrglen[ROUNDS_MAX];
	static double rstwin[ROUNDS_MAX][2], rstlen[ROUNDS_MAX];
	static double selwin[ROUNDS_MAX][2], sellen[ROUNDS_MAX];
	char abs_build[4096], dir[4200], cmd[8800], spctl[4200];
	size_t alone_n;
	double *v, inplace_start = 0, wt_start = 0;
	pthread_t th;
	pid_t spd;

	if (rounds < 1 || rounds > ROUNDS_MAX || !realpath(build, abs_build))
		return fprintf(stderr,
			       "bench startwait: bad BUILD/BENCH_RUNS\n"),
		       1;
	snprintf(spctl, sizeof(spctl), "%s/spctl", abs_build);
	sent = calloc(PINGS_MAX, sizeof(*sent));
	took = calloc(PINGS_MAX, sizeof(*took));
	v = calloc(PINGS_MAX, sizeof(*v));
	if (!sent || !took || !v)
		return fprintf(stderr, "bench startwait: out of memory\n"), 1;
	/* Outside any git checkout (bench/agents.c). */
	snprintf(dir, sizeof(dir), "/var/tmp/spd-bench-startwait-XXXXXX");
	if (!mkdtemp(dir))
		return perror("mkdtemp"), 1;
	spd = bench_spd_start(abs_build, dir);
	if (spd < 0)
		return fprintf(stderr, "bench startwait: no spd\n"), 1;
	if (pthread_create(&th, NULL, pinger, NULL) != 0)
		return fprintf(stderr, "bench startwait: no thread\n"), 1;
	usleep(ALONE_MS * 1000);
	alone_n = atomic_load(&npings);
	for (int kind = 0; kind < 2 && !ping_failed; kind++)
		for (int i = 0; i < rounds; i++) {
			char name[32];

			snprintf(name, sizeof(name), "%s%d",
				 kind ? "inplace" : "wt", i);
			/* The operator starts each (the last one's agent
			 * token is exported). */
			unsetenv("SPD_SESSION_TOKEN");
			if (bench_agent_session(dir, name, files, DIRS,
						kind == 1) < 0) {
				fprintf(stderr,
					"bench startwait: session %s "
					"failed\n",
					name);
				ping_failed = 1;
				break;
			}
			memcpy(win[kind][i], bench_start_window,
			       sizeof(win[kind][i]));
			len[kind][i] = win[kind][i][1] - win[kind][i][0];
		}
	/* The last in-place session's runs (its token is exported). */
	for (int i = 0; i < RUN_KINDS * rounds && !ping_failed; i++) {
		char *run[] = {spctl, "run", "--", "/bin/true", NULL};
		int k = i % RUN_KINDS;
		double t0;

		if (k == RUN_NEWDIR)
			snprintf(cmd, sizeof(cmd),
				 "mkdir '%s/inplace%d/new%d' && echo l > "
				 "'%s/inplace%d/new%d/x.log'",
				 dir, rounds - 1, i, dir, rounds - 1, i);
		else if (k == RUN_BIGDIR)
			snprintf(cmd, sizeof(cmd),
				 "mkdir '%s/inplace%d/big%d' && cd "
				 "'%s/inplace%d/big%d' && seq 3000 | sed "
				 "'s/.*/echo & > &.md/' | sh && echo l > x.log",
				 dir, rounds - 1, i, dir, rounds - 1, i);
		else if (k == RUN_IGNORE)
			snprintf(
			    cmd, sizeof(cmd),
			    "echo 'ignored%d/' >> '%s/inplace%d/.gitignore'", i,
			    dir, rounds - 1);
		if (k != RUN_SAME && system(cmd) != 0) {
			ping_failed = 1;
			break;
		}
		t0 = now_ms();
		if (bench_run_quiet(run) < 0) {
			fprintf(stderr, "bench startwait: run failed\n");
			ping_failed = 1;
			break;
		}
		runwin[k][i / RUN_KINDS][0] = t0;
		runwin[k][i / RUN_KINDS][1] = now_ms();
		runlen[k][i / RUN_KINDS] = runwin[k][i / RUN_KINDS][1] - t0;
		/* The 3,000 go again (the .gitignore's run walks anyway), so
		 * that the checkout the other kinds meet stays as it was. */
		snprintf(cmd, sizeof(cmd), "rm -rf '%s/inplace%d/big%d'", dir,
			 rounds - 1, i);
		if (k == RUN_BIGDIR && system(cmd) != 0) {
			ping_failed = 1;
			break;
		}
	}
	/* The worktree sessions' commits taken, then the sessions ended, as
	 * the operator. */
	unsetenv("SPD_SESSION_TOKEN");
	if (!ping_failed && each_worktree(chgwin, chglen, rounds, PREP_CHANGE,
					  RPC_M_CMD_RUN, run_params) < 0)
		ping_failed = 1;
	if (!ping_failed && each_worktree(cmtwin, cmtlen, rounds, PREP_COMMIT,
					  RPC_M_CMD_RUN, run_params) < 0)
		ping_failed = 1;
	/* What the operator reviews next, the tenth committed and another
	 * uncommitted: the diff, a verification, the merge (each reads the
	 * whole worktree or checks out the branch; on the loop before
	 * 12-06 17:00). */
	if (!ping_failed && each_worktree(difwin, diflen, rounds, "true",
					  RPC_M_SESSION_DIFF, end_params) < 0)
		ping_failed = 1;
	if (!ping_failed && each_worktree(verwin, verlen, rounds, "true",
					  RPC_M_SESSION_VERIFY, end_params) < 0)
		ping_failed = 1;
	if (!ping_failed && each_worktree(mrgwin, mrglen, rounds, "true",
					  RPC_M_SESSION_MERGE, end_params) < 0)
		ping_failed = 1;
	/* The operator's held-out checks sealed: a copy of 10,000 files (on
	 * the loop before 12-06 20:00). */
	snprintf(cmd, sizeof(cmd),
		 "mkdir -p '%s/checks' && cd '%s/checks' && for d in $(seq "
		 "100); do mkdir -p $d && (cd $d && seq 100 | xargs touch); "
		 "done",
		 dir, dir);
	heldout_dir = dir;
	if (!ping_failed && system(cmd) != 0)
		ping_failed = 1;
	if (!ping_failed &&
	    each_worktree(selwin, sellen, rounds, "true", RPC_M_SESSION_HELDOUT,
			  heldout_params) < 0)
		ping_failed = 1;
	/* The agent's last change undone (on the loop before 12-06 19:00). */
	if (!ping_failed &&
	    each_worktree(rstwin, rstlen, rounds, PREP_CHANGE,
			  RPC_M_SESSION_RESTORE, restore_params) < 0)
		ping_failed = 1;
	if (!ping_failed && each_worktree(endwin, endlen, rounds, PREP_END,
					  RPC_M_SESSION_END, end_params) < 0)
		ping_failed = 1;
	atomic_store(&pinging, false);
	pthread_join(th, NULL);
	kill(spd, SIGTERM);
	waitpid(spd, NULL, 0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	if (ping_failed)
		return 1;

	if (atomic_load(&npings) >= PINGS_MAX)
		printf("the pinger stopped at %d pings: the rows after that "
		       "have none (0 pings, NOT MET)\n",
		       PINGS_MAX);
	memcpy(v, took, alone_n * sizeof(*v));
	printf("pings on one connection while another starts sessions of %ld "
	       "files (%d of each kind); ping waits in ms\n",
	       files, rounds);
	printf("%-34s %8s %7s %8s %8s %8s  %s\n", "row", "start", "pings",
	       "p50", "p99", "max", "target max <= 0.1x start");
	printf("%-34s %8s %7zu %8.3f %8.3f %8.3f\n", "alone, 1 s before", "-",
	       alone_n, pct(v, alone_n, 0.5), pct(v, alone_n, 0.99),
	       pct(v, alone_n, 1.0));
	for (int kind = 0; kind < 2; kind++) {
		size_t n =
		    overlapping(win[kind], rounds, atomic_load(&npings), v);
		double start = bench_median(len[kind], rounds);
		double mx = pct(v, n, 1.0);

		printf("%-34s %8.1f %7zu %8.3f %8.3f %8.3f  %s\n",
		       kind ? "during in-place starts"
			    : "during worktree starts",
		       start, n, pct(v, n, 0.5), pct(v, n, 0.99), mx,
		       bench_met(n > 0 && mx <= 0.1 * start));
		if (kind == 1)
			inplace_start = start;
		else
			wt_start = start;
	}
	{
		row("during in-place runs, new dir", -1, runwin[RUN_NEWDIR],
		    rounds, v, 0.1 * inplace_start);
		row("during in-place runs, 3,000 new", -1, runwin[RUN_BIGDIR],
		    rounds, v, 0.1 * inplace_start);
		row("during in-place runs, .gitignore", -1, runwin[RUN_IGNORE],
		    rounds, v, 0.1 * inplace_start);
		row("during worktree runs, 1/10 changed",
		    bench_median(chglen, rounds), chgwin, rounds, v,
		    0.1 * wt_start);
		row("during worktree runs, 1/10 committed",
		    bench_median(cmtlen, rounds), cmtwin, rounds, v,
		    0.1 * wt_start);
		row("during worktree diffs", bench_median(diflen, rounds),
		    difwin, rounds, v, 0.1 * wt_start);
		row("during worktree verifies", bench_median(verlen, rounds),
		    verwin, rounds, v, 0.1 * wt_start);
		row("during worktree merges", bench_median(mrglen, rounds),
		    mrgwin, rounds, v, 0.1 * wt_start);
		row("during held-out seals, 10,000",
		    bench_median(sellen, rounds), selwin, rounds, v,
		    0.1 * wt_start);
		row("during worktree restores, 1/10",
		    bench_median(rstlen, rounds), rstwin, rounds, v,
		    0.1 * wt_start);
		row("during worktree ends, 1/10 changed",
		    bench_median(endlen, rounds), endwin, rounds, v,
		    0.1 * wt_start);
		printf("in-place `spctl run -- /bin/true`, medians: after a "
		       "new directory %.2f ms, after one of 3,000 files %.2f "
		       "ms, after .gitignore %.2f ms, after nothing %.2f ms\n",
		       bench_median(runlen[RUN_NEWDIR], rounds),
		       bench_median(runlen[RUN_BIGDIR], rounds),
		       bench_median(runlen[RUN_IGNORE], rounds),
		       bench_median(runlen[RUN_SAME], rounds));
	}
	return 0;
}

/*
 * sandboxd against its baselines, in one run on one machine: the median
 * wall time of /bin/true bare (start, exec, wait), under bubblewrap with
 * every namespace, and through spd's supervisor (daemon/sandbox/sbx.c) with every
 * layer on; sandboxd's resident size idle and per concurrent run; 50
 * concurrent `sleep 1` runs.  BENCH_RUNS overrides the run count.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include <sys/stat.h>

#include "client/client.h"
#include "common/util.h"
#include "daemon/journal/journal.h"
#include "daemon/sandbox/sbx.h"
#include "tests/lib/benchutil.h"

/* At least 200 runs each (issue 3): enough for a stable median. */
#define BENCH_RUNS_DEFAULT 200
/* Concurrent runs for the fan-out figure and the per-run memory. */
#define BENCH_CONCURRENT 50

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* bench_run_quiet, timed.  Returns the time, or -1 when the program
 * failed. */
static double time_exec(char *const argv[])
{
	double t0 = now_ms();

	if (bench_run_quiet(argv) < 0)
		return -1;
	return now_ms() - t0;
}

struct one {
	bool done;
	bool ok;
	double end;
	char err[160];
};

static void on_done(void *data, const struct sbx_result *r)
{
	struct one *o = data;

	o->done = true;
	o->end = now_ms();
	o->ok = !r->error && r->exit_code == 0;
	if (!o->ok)
		snprintf(o->err, sizeof(o->err), "%s: %s (exit %d)",
			 r->error ? sbxp_err_code(r->error) : "-",
			 r->error_msg ? r->error_msg : "-", r->exit_code);
}

static char *env[] = {"PATH=/usr/bin:/bin", NULL};

static void spec_for(struct sbx_spec *sp, char *const *argv, const char *ws)
{
	memset(sp, 0, sizeof(*sp));
	sp->argv = argv;
	sp->envp = env;
	sp->workspace = ws;
	sp->home = ws;
	sp->net = SBX_NET_NONE;
	sp->timeout_ms = 30000;
}

static void on_closed(void *data)
{
	*(bool *)data = true;
}

/* Runs in a workspace of many files, each: enough for a median of a run
 * that costs tens of milliseconds. */
#define BENCH_BIG_RUNS 20
/* Runs over one connection (the agent's case, issue 16). */
#define BENCH_CONN_RUNS 100
/* Time given to spd's walk of a big workspace after its first run
 * (about 0.2 s for 100,000 files here) before the runs measured. */
#define BENCH_LINKWATCH_SETTLE_MS 2000
/* Between session start and an agent's first command: its model's turn
 * (seconds, in truth). */
#define BENCH_AGENT_THINK_MS 500
/* The guard takes a file changed in the last 2 s for racy (guard.c,
 * GUARD_RACY_NS) and, while one in the slice it checks after a command
 * is, checks the whole snapshot; right after session start the session's
 * own files are.  An agent's commands come later, after its model's turn:
 * the agent rows wait this long after session start, and one row shows
 * the first two seconds. */
#define BENCH_AGENT_RACY_MS 2500
/* A commit's or a build's worth of new files before a run (in ten new
 * directories), and the pause after them: the agent's model reading
 * the last output (seconds, in truth). */
#define BENCH_NEW_FILES 150
#define BENCH_CHANGE_PAUSE_MS 100
/* An npm install's worth arriving in a workspace (files in directories
 * of ten), the pause before the next run, and the rounds of that. */
#define BENCH_ARRIVAL_FILES 20000
#define BENCH_ARRIVAL_PAUSE_MS 1000
/* Packages of the store-linked workspace (24 files each: a pnpm project
 * of a few hundred packages). */
#define BENCH_STORE_PKGS 300
#define BENCH_ARRIVAL_ROUNDS 3
/* Directories the big workspaces' files are spread over. */
#define BENCH_DIRS 100

/* bubblewrap's argv when it works here (main), else NULL. */
static char **bw_argv;

/* Pause around each interleaved bubblewrap run: what either side leaves
 * running in the background (sandboxd making its next spare, the kernel
 * taking a network namespace down, spd's journal committing the run's
 * rows at the end of its group window) is done before the other is
 * timed. */
#define BENCH_SETTLE_US ((JOURNAL_GROUP_MS + 3) * 1000)
/* That, or BENCH_SETTLE_US from the environment (to see what the pause
 * itself does to both sides). */
static useconds_t settle_us = BENCH_SETTLE_US;

/* A row's own baselines, each run beside its runs (beside): bubblewrap's
 * and sandboxd's own spawn, and (rows of a new spctl per run) spctl's own
 * start and exit alone; medians, or -1 when not measured. */
struct beside {
	double bw, sb, alone;
};

static const struct beside no_beside = {-1, -1, -1};

/* `spctl --version` (spctl_e2e), started as the rows' spctl is: what
 * any client process costs to start and end, beside each run of a row
 * of a new spctl per run; NULL until then. */
static char **alone_argv;

/* sandboxd driven directly (main), for the runs beside each row: paused
 * and with an (empty) list of multi-linked names as spd sends one, so
 * that each finds a spare heated for it as the rows' runs do. */
static struct sbx *sb_client;
static uv_loop_t *sb_loop;
static struct sbx_spec sb_spec;
static const char *const sb_no_links[] = {NULL};

/* One run of sandboxd's own (sb_spec), in ms, or -1. */
static double sb_once(void)
{
	struct one o;
	double t0 = now_ms();

	memset(&o, 0, sizeof(o));
	if (sbx_run(sb_client, &sb_spec, &(struct sbx_cbs){NULL, on_done, NULL},
		    &o, NULL) < 0)
		return -1;
	while (!o.done)
		uv_run(sb_loop, UV_RUN_ONCE);
	return o.ok ? o.end - t0 : -1;
}

/* One bubblewrap run and one of sandboxd's own beside each measured run,
 * and one of spctl alone (alone_argv) when alone is not NULL: each row's
 * own baselines, interleaved, so that a neighbour's burst on this shared
 * machine weighs on all alike.  Their times, or 0 for one not
 * measured. */
static void beside(double *bw, double *sb, double *alone)
{
	double v;

	*bw = *sb = 0;
	if (alone) {
		*alone = 0;
		if (alone_argv) {
			usleep(settle_us);
			v = time_exec(alone_argv);
			*alone = v < 0 ? 0 : v;
		}
	}
	if (bw_argv) {
		usleep(settle_us);
		v = time_exec(bw_argv);
		*bw = v < 0 ? 0 : v;
	}
	if (sb_client) {
		usleep(settle_us);
		v = sb_once();
		*sb = v < 0 ? 0 : v;
	}
	usleep(settle_us);
}

/* The medians of a row's runs beside (beside); alone may be NULL. */
static void beside_medians(double *bw, double *sb, double *alone, int runs,
			   struct beside *ret)
{
	ret->bw = bw_argv ? bench_median(bw, runs) : -1;
	ret->sb = sb_client ? bench_median(sb, runs) : -1;
	ret->alone = alone && alone_argv ? bench_median(alone, runs) : -1;
}

/* An editor's save in ws: a new file renamed over d000/f0000000 (as
 * bench_make_files names it).  0 or -1. */
static int save_in(const char *ws)
{
	char tmp[4200], path[4200];
	int fd;

	snprintf(tmp, sizeof(tmp), "%s/d000/.f0000000.swp", ws);
	snprintf(path, sizeof(path), "%s/d000/f0000000", ws);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	close(fd);
	return rename(tmp, path);
}

/* What comes before each run of spctl_runs_after. */
enum before { BEFORE_NOTHING, BEFORE_SAVE, BEFORE_PAUSE, BEFORE_NEW_FILES };

/* BENCH_NEW_FILES new files in ten new directories of ws (gen<n>), then
 * BENCH_CHANGE_PAUSE_MS.  0 or -1. */
static int new_files_in(const char *ws, int n)
{
	char dir[4200];

	snprintf(dir, sizeof(dir), "%s/gen%d", ws, n);
	if (mkdir(dir, 0755) < 0 ||
	    bench_make_files(dir, BENCH_NEW_FILES, 10) < 0)
		return -1;
	usleep(BENCH_CHANGE_PAUSE_MS * 1000);
	return 0;
}

/* Median of runs `spctl run [--workspace ws] --yes -- /bin/true` (no
 * workspace: an agent's, from SPD_SESSION_TOKEN), after 3 warm-ups, or
 * -1.  Each run follows what before says: an editor's save in ws
 * (save_in), a pause of BENCH_CHANGE_PAUSE_MS, new files and the same
 * pause (new_files_in). */
static double spctl_runs_after(char *spctl, const char *ws, int runs,
			       struct beside *ret, enum before before)
{
	char wsbuf[4096];
	char *argv_op[] = {spctl,   "run", "--workspace", wsbuf,
			   "--yes", "--",  "/bin/true",	  NULL};
	char *argv_agent[] = {spctl, "run", "--", "/bin/true", NULL};
	double *t = calloc((size_t)runs, sizeof(double)), m = -1;
	double *bw = calloc((size_t)runs, sizeof(double));
	double *sb = calloc((size_t)runs, sizeof(double));
	double *al = calloc((size_t)runs, sizeof(double));

	*ret = no_beside;
	if (!t || !bw || !sb || !al)
		goto out;
	snprintf(wsbuf, sizeof(wsbuf), "%s", ws ? ws : "");
	for (int i = -3; i < runs; i++) {
		double v;

		if (before == BEFORE_PAUSE)
			usleep(BENCH_CHANGE_PAUSE_MS * 1000);
		if ((before == BEFORE_SAVE && save_in(ws) < 0) ||
		    (before == BEFORE_NEW_FILES &&
		     new_files_in(ws, i + 3) < 0)) {
			fprintf(stderr, "cannot change %s\n", ws);
			goto out;
		}
		v = time_exec(ws ? argv_op : argv_agent);

		if (v < 0) {
			fprintf(stderr, "spctl run failed\n");
			goto out;
		}
		if (i >= 0) {
			t[i] = v;
			beside(&bw[i], &sb[i], &al[i]);
		}
	}
	m = bench_median(t, runs);
	beside_medians(bw, sb, al, runs, ret);
out:
	free(t);
	free(bw);
	free(sb);
	free(al);
	return m;
}

/* Median of BENCH_ARRIVAL_ROUNDS runs in ws, each BENCH_ARRIVAL_PAUSE_MS
 * after BENCH_ARRIVAL_FILES new files arrived in it (no warm-up: each run
 * is the first after its arrival), or, with removed, after `rm -rf` of
 * such a tree (the rounds' of the call before), or -1. */
static double arrival_runs(char *spctl, const char *ws, bool removed)
{
	char wsbuf[4200], dir[4300];
	char *argv[] = {spctl,	 "run", "--workspace", wsbuf,
			"--yes", "--",	"/bin/true",   NULL};
	double t[BENCH_ARRIVAL_ROUNDS];

	snprintf(wsbuf, sizeof(wsbuf), "%s", ws);
	for (int i = 0; i < BENCH_ARRIVAL_ROUNDS; i++) {
		char *rm[] = {"rm", "-rf", dir, NULL};

		snprintf(dir, sizeof(dir), "%s/arrived%d", ws, i);
		if (removed
			? bench_run_quiet(rm) < 0
			: mkdir(dir, 0755) < 0 ||
			      bench_make_files(dir, BENCH_ARRIVAL_FILES,
					       BENCH_ARRIVAL_FILES / 10) < 0)
			return -1;
		usleep(BENCH_ARRIVAL_PAUSE_MS * 1000);
		if ((t[i] = time_exec(argv)) < 0)
			return -1;
	}
	return bench_median(t, BENCH_ARRIVAL_ROUNDS);
}

/* lstat of every entry under the directory dfd (closed), as a walk
 * for the hard-link rule must: the entries counted into *n. */
static void stat_walk(int dfd, long *n)
{
	DIR *d = fdopendir(dfd);
	struct dirent *e;

	if (!d) {
		close(dfd);
		return;
	}
	while ((e = readdir(d))) {
		struct stat st;
		int fd;

		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		(*n)++;
		if (S_ISDIR(st.st_mode) &&
		    (fd = openat(dirfd(d), e->d_name,
				 O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0)
			stat_walk(fd, n);
	}
	closedir(d);
}

/*
 * A first run's floor (issue 39): no list of a workspace spd has never
 * seen can vouch for its link counts, so something must lstat every
 * entry before the run's command starts.  This is that walk alone, by
 * one thread of the bench, the files in the page cache as the run had
 * them: the median of 3, beside bubblewrap.
 */
static void print_walk_floor(const char *ws, double m_bw)
{
	double t[3];
	long n = 0;

	for (int i = 0; i < 3; i++) {
		double t0 = now_ms();
		int fd = open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		n = 0;
		if (fd < 0)
			return;
		stat_walk(fd, &n);
		t[i] = now_ms() - t0;
	}
	double m = bench_median(t, 3);
	printf("%-44s %10.3f   %ld entries, %.2f us each, %.2fx bwrap\n",
	       "    floor: an lstat of each entry, 1 thread", m, n,
	       n ? m * 1000.0 / (double)n : 0.0, m_bw > 0 ? m / m_bw : 0.0);
}

static double spctl_runs(char *spctl, const char *ws, int runs,
			 struct beside *ret)
{
	return spctl_runs_after(spctl, ws, runs, ret, BEFORE_NOTHING);
}

/* Median of runs cmd.run calls of /bin/true over one connection (ws NULL:
 * with the session token in SPD_SESSION_TOKEN), or -1. */
static double conn_runs(const char *ws, int runs, struct beside *ret)
{
	double *t = calloc((size_t)runs, sizeof(double)), m = -1;
	double *bw = calloc((size_t)runs, sizeof(double));
	double *sb = calloc((size_t)runs, sizeof(double));
	struct client c;
	char err[512];

	*ret = no_beside;
	if (!t || !bw || !sb || client_open(&c, err, sizeof(err)) < 0) {
		free(t);
		free(bw);
		free(sb);
		return -1;
	}
	for (int i = -3; i < runs; i++) {
		json_t *p = json_pack("{s:[s]}", "argv", "/bin/true");
		json_t *res = NULL, *e = NULL;
		double t0 = now_ms();

		/* Only the operator may pre-approve; an agent's /bin/true
		 * is allowed by the policy as it is. */
		if (ws) {
			json_object_set_new(p, "workspace", json_string(ws));
			json_object_set_new(p, "yes", json_true());
		}
		if (client_call(&c, RPC_M_CMD_RUN, p, NULL, NULL, &res, &e) <
			0 ||
		    json_integer_value(json_object_get(res, "exit_code"))) {
			char *s = e ? json_dumps(e, JSON_COMPACT) : NULL;

			fprintf(stderr, "cmd.run failed: %s\n", s ? s : "-");
			free(s);
			json_decref(e);
			json_decref(res);
			goto out;
		}
		if (i >= 0)
			t[i] = now_ms() - t0;
		json_decref(res);
		if (i >= 0)
			beside(&bw[i], &sb[i], NULL);
	}
	m = bench_median(t, runs);
	beside_medians(bw, sb, NULL, runs, ret);
out:
	client_close(&c);
	free(t);
	free(bw);
	free(sb);
	return m;
}

/* Which C library spctl is linked against (its --version says): a glibc
 * process's start costs 0.45 ms more on a VM (Makefile, SPCTL_LIBC). */
static void print_spctl_libc(const char *spctl)
{
	char cmd[512], line[128] = "";
	FILE *f;
	int n = snprintf(cmd, sizeof(cmd), "'%.480s' --version", spctl);

	if (n > 0 && (size_t)n < sizeof(cmd) && (f = popen(cmd, "r"))) {
		if (!fgets(line, sizeof(line), f))
			line[0] = 0;
		pclose(f);
	}
	printf("spctl: %s", line[0] ? line : "(no --version)\n");
}

/* The layers spd's sandboxd reports (sandbox.probe), one line. */
static void print_layers(void)
{
	struct client c;
	json_t *res = NULL, *e = NULL;
	const char *k;
	json_t *v;
	char err[512];

	if (client_open(&c, err, sizeof(err)) < 0)
		return;
	if (client_call(&c, RPC_M_SANDBOX_PROBE, NULL, NULL, NULL, &res, &e) ==
	    0) {
		printf("layers on:");
		json_object_foreach(res, k, v)
		{
			if (json_is_object(v))
				printf(" %s=%s", k,
				       json_is_true(json_object_get(v, "ok"))
					   ? "yes"
					   : "NO");
		}
		printf("\n");
	}
	json_decref(res);
	json_decref(e);
	client_close(&c);
}

/* A row: its median, against sandboxd's own spawn and against
 * bubblewrap, the row's own runs beside its runs (own) when it has them,
 * else the lines'. */
static void print_e2e(const char *what, double m, double m_sb, double m_bw,
		      struct beside own)
{
	if (m < 0) {
		printf("%-44s %10s\n", what, "failed");
		return;
	}
	if (own.sb > 0)
		printf("%-44s %10.3f   %+.3f over sandboxd (%.3f, beside)",
		       what, m, m - own.sb, own.sb);
	else
		printf("%-44s %10.3f   %+.3f over sandboxd", what, m, m - m_sb);
	if (own.bw > 0)
		printf(", %.2fx bwrap (%.3f, interleaved)", m / own.bw, own.bw);
	else if (m_bw > 0)
		printf(", %.2fx bwrap", m / m_bw);
	if (own.sb > 0 && own.alone > 0)
		printf("; %+.3f less spctl's start and exit (%.3f, beside)",
		       m - own.sb - own.alone, own.alone);
	printf("\n");
}

/*
 * The run path end to end (issue 16), each beside sandboxd's own spawn
 * (m_sb) and bubblewrap (m_bw): `spctl run -- /bin/true` (spctl's start,
 * the connection, the policy, the journal, sandboxd, the reply) in an
 * empty workspace and in ones of 10,000 and 100,000 files, runs over one
 * connection, and the same as an agent in a worktree session.  A real
 * spd in temporary directories.
 */
static int store_write(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -1;
}

/* mkdir -p of path (ending in '/'). */
static int store_mkdirs(char *path)
{
	for (char *c = path + 1; *c; c++)
		if (*c == '/') {
			*c = '\0';
			if (mkdir(path, 0755) < 0 && errno != EEXIST) {
				*c = '/';
				return -1;
			}
			*c = '/';
		}
	return 0;
}

/* npkg packages of 24 files (12 in the package's directory, 12 in its
 * lib/) in dir/store, each hard-linked into ws as pnpm lays them out
 * (node_modules/.pnpm/pN/node_modules/pN), beside a package.json. */
static int store_ws(const char *dir, const char *ws, int npkg)
{
	char a[4400], b[4400];

	snprintf(a, sizeof(a), "%s/package.json", ws);
	if (mkdir(ws, 0755) < 0 || store_write(a, "{}\n") < 0)
		return -1;
	for (int i = 0; i < npkg; i++)
		for (int j = 0; j < 24; j++) {
			const char *sub = j < 12 ? "" : "lib/";

			snprintf(a, sizeof(a), "%s/store/p%d/%s", dir, i, sub);
			snprintf(
			    b, sizeof(b),
			    "%s/node_modules/.pnpm/p%d/node_modules/p%d/%s", ws,
			    i, i, sub);
			if ((j == 0 || j == 12) &&
			    (store_mkdirs(a) < 0 || store_mkdirs(b) < 0))
				return -1;
			snprintf(a + strlen(a), sizeof(a) - strlen(a), "f%d.js",
				 j);
			snprintf(b + strlen(b), sizeof(b) - strlen(b), "f%d.js",
				 j);
			if (store_write(a, "module.exports = 1;\n") < 0 ||
			    link(a, b) < 0)
				return -1;
		}
	return 0;
}

static void spctl_e2e(const char *build, const char *ws, int runs, double m_sb,
		      double m_bw)
{
	char dir[] = "/tmp/spd-bench-e2e-XXXXXX", spctl[4200], big[4200];
	char *alone[] = {spctl, "--version", NULL};
	static const long sizes[] = {10000, 100000};
	double m;
	struct beside own;
	pid_t pid;
	int status;

	if (!mkdtemp(dir))
		return;
	snprintf(spctl, sizeof(spctl), "%s/spctl", build);
	pid = bench_spd_start(build, dir);
	if (pid < 0)
		return;
	print_layers();
	print_spctl_libc(spctl);
	alone_argv = alone;
	m = spctl_runs(spctl, ws, runs, &own);
	print_e2e("spctl run -- /bin/true, end to end", m, m_sb, m_bw, own);
	m = conn_runs(ws, BENCH_CONN_RUNS, &own);
	print_e2e("  the same, one connection, per run", m, m_sb, m_bw, own);
	for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
		char what[64];

		snprintf(big, sizeof(big), "%s/ws%ld", dir, sizes[i]);
		if (mkdir(big, 0755) < 0 ||
		    bench_make_files(big, sizes[i], BENCH_DIRS) < 0) {
			printf("cannot make a workspace of %ld files\n",
			       sizes[i]);
			continue;
		}
		/* The first run in a workspace has sandboxd walk it while spd
		 * walks it too, on a worker thread, to watch it
		 * (daemon/session/linkwatch.h); the runs after use spd's
		 * list.  BENCH_LINKWATCH_SETTLE_MS gives that walk time. */
		snprintf(what, sizeof(what), "  the same, %ld-file, first run",
			 sizes[i]);
		{
			char *first[] = {spctl,	  "run", "--workspace", big,
					 "--yes", "--",	 "/bin/true",	NULL};

			print_e2e(what, time_exec(first), m_sb, m_bw,
				  no_beside);
		}
		print_walk_floor(big, m_bw);
		usleep(BENCH_LINKWATCH_SETTLE_MS * 1000);
		snprintf(what, sizeof(what), "  the same, %ld-file workspace",
			 sizes[i]);
		m = spctl_runs(spctl, big, BENCH_BIG_RUNS, &own);
		print_e2e(what, m, m_sb, m_bw, own);
		/*
		 * A rename in the workspace (an editor's save, git's lock
		 * files) keeps spd's list: no walk.  A commit's or a build's
		 * new files, 0.1 s before the run: spd has read them in the
		 * background (linkwatch.h).  The pause alone costs a run
		 * something too (an idle machine's CPUs wake up slower): it
		 * has its row.
		 */
		for (int k = 0; k < 3; k++) {
			static const enum before how[] = {
			    BEFORE_SAVE, BEFORE_PAUSE, BEFORE_NEW_FILES};
			char after[32];

			if (how[k] == BEFORE_SAVE)
				snprintf(after, sizeof(after), "a save");
			else if (how[k] == BEFORE_PAUSE)
				snprintf(after, sizeof(after), "%d ms",
					 BENCH_CHANGE_PAUSE_MS);
			else
				snprintf(after, sizeof(after), "%d new files",
					 BENCH_NEW_FILES);
			snprintf(what, sizeof(what),
				 "  the same, %ld-file, after %s", sizes[i],
				 after);
			m = spctl_runs_after(spctl, big, BENCH_BIG_RUNS, &own,
					     how[k]);
			print_e2e(what, m, m_sb, m_bw, own);
		}
		/* More than spd walks on its loop (LW_EVENT_WALK_MAX): the
		 * list is dropped as it comes and walked again at once, in
		 * the background. */
		if (i == 0) {
			snprintf(what, sizeof(what),
				 "  the same, %d s after %d new files",
				 BENCH_ARRIVAL_PAUSE_MS / 1000,
				 BENCH_ARRIVAL_FILES);
			print_e2e(what, arrival_runs(spctl, big, false), m_sb,
				  m_bw, no_beside);
			print_walk_floor(big, m_bw);
			snprintf(what, sizeof(what),
				 "  the same, %d s after rm -rf of them",
				 BENCH_ARRIVAL_PAUSE_MS / 1000);
			print_e2e(what, arrival_runs(spctl, big, true), m_sb,
				  m_bw, no_beside);
		}
	}
	/* A store's files hard-linked into the workspace (pnpm, uv): past
	 * SBXP_LINKS_EACH_MAX names, each package's directory is bound
	 * read-only whole, from spd's list (docs/sandbox.md). */
	snprintf(big, sizeof(big), "%s/wsstore", dir);
	if (store_ws(dir, big, BENCH_STORE_PKGS) == 0) {
		char what[80];
		char *first[] = {spctl,	  "run", "--workspace", big,
				 "--yes", "--",	 "/bin/true",	NULL};

		snprintf(what, sizeof(what),
			 "  %d packages linked from a store, 1st run",
			 BENCH_STORE_PKGS);
		print_e2e(what, time_exec(first), m_sb, m_bw, no_beside);
		print_walk_floor(big, m_bw);
		usleep(BENCH_LINKWATCH_SETTLE_MS * 1000);
		snprintf(what, sizeof(what), "  the same, %d names, listed",
			 BENCH_STORE_PKGS * 24);
		m = spctl_runs(spctl, big, BENCH_BIG_RUNS, &own);
		print_e2e(what, m, m_sb, m_bw, own);
	} else {
		printf("cannot make a store-linked workspace\n");
	}
	if (bench_agent_session(dir, "repo", 0, BENCH_DIRS, false) == 0) {
		double first2;
		struct beside own2;

		first2 = spctl_runs(spctl, NULL, runs, &own2);
		usleep(BENCH_AGENT_RACY_MS * 1000);
		m = spctl_runs(spctl, NULL, runs, &own);
		print_e2e("agent (session token, worktree), spctl run", m, m_sb,
			  m_bw, own);
		print_e2e("  the same, in the session's first 2 s", first2,
			  m_sb, m_bw, own2);
		m = conn_runs(NULL, BENCH_CONN_RUNS, &own);
		print_e2e("  the same, one connection, per run", m, m_sb, m_bw,
			  own);
		unsetenv("SPD_SESSION_TOKEN");
	} else {
		printf("agent session: cannot start one\n");
	}
	/* An agent's first commands in a new session of a big checkout:
	 * session start walks its hard-link list ahead (linkwatch_prime),
	 * while the agent's model thinks. */
	if (bench_agent_session(dir, "wt10k", 10000, BENCH_DIRS, false) == 0) {
		char *first[] = {spctl, "run", "--", "/bin/true", NULL};

		usleep(BENCH_AGENT_THINK_MS * 1000);
		print_e2e("agent, new session of 10000 files, 1st run",
			  time_exec(first), m_sb, m_bw, no_beside);
		print_e2e("  the same, 2nd run", time_exec(first), m_sb, m_bw,
			  no_beside);
		/* spd restarted: its start walks the recent sessions'
		 * workspaces ahead (agent_prime_recent). */
		kill(pid, SIGTERM);
		waitpid(pid, NULL, 0);
		pid = bench_spd_start(build, dir);
		if (pid < 0)
			return;
		usleep(BENCH_AGENT_THINK_MS * 1000);
		print_e2e("  after spd's restart, 1st run", time_exec(first),
			  m_sb, m_bw, no_beside);
		print_e2e("  the same, 2nd run", time_exec(first), m_sb, m_bw,
			  no_beside);
		unsetenv("SPD_SESSION_TOKEN");
	} else {
		printf("session of 10000 files: cannot start one\n");
	}
	/* In place, each run hides the checkout's git-ignored entries; the
	 * walk that finds them is kept between runs (docs/sandbox.md). */
	if (bench_agent_session(dir, "inplace", 0, BENCH_DIRS, true) == 0) {
		usleep(BENCH_AGENT_RACY_MS * 1000);
		m = spctl_runs(spctl, NULL, runs, &own);
		print_e2e("agent, in-place session, spctl run", m, m_sb, m_bw,
			  own);
		unsetenv("SPD_SESSION_TOKEN");
	} else {
		printf("in-place session: cannot start one\n");
	}
	if (bench_agent_session(dir, "inplace10k", 10000, BENCH_DIRS, true) ==
	    0) {
		m = spctl_runs(spctl, NULL, BENCH_BIG_RUNS, &own);
		print_e2e("  the same, 10000-file checkout", m, m_sb, m_bw,
			  own);
		unsetenv("SPD_SESSION_TOKEN");
	} else {
		printf("in-place session, 10000 files: cannot start one\n");
	}
	alone_argv = NULL;
	kill(pid, SIGTERM);
	waitpid(pid, &status, 0);
	{
		char *rm[] = {"rm", "-rf", dir, NULL};
		bench_run_quiet(rm);
	}
}

int main(void)
{
	const char *runs_env = getenv("BENCH_RUNS");
	const char *build = getenv("BUILD");
	const char *settle_env = getenv("BENCH_SETTLE_US");
	int runs = runs_env ? atoi(runs_env) : BENCH_RUNS_DEFAULT;
	double *bare = calloc((size_t)runs, sizeof(double));
	double *bw = calloc((size_t)runs, sizeof(double));
	double *sb = calloc((size_t)runs, sizeof(double));
	char *true_argv[] = {"/bin/true", NULL};
	char *bwrap_argv[] = {"/usr/bin/bwrap", "--ro-bind", "/",      "/",
			      "--dev",		"/dev",	     "--proc", "/proc",
			      "--unshare-all",	"/bin/true", NULL};
	char sandboxd[4096], ws[] = "/tmp/spd-bench-sbx-XXXXXX";
	double m_bare, m_bw = -1, m_sb, m_sb_paused;
	struct one o;
	struct sbx_spec sp;
	struct sbx *s;
	uv_loop_t loop;
	bool closed = false;
	int nbw = 0;

	if (runs < 1 || !bare || !bw || !sb || !mkdtemp(ws))
		return 1;
	if (settle_env)
		settle_us = (useconds_t)atoi(settle_env);
	snprintf(sandboxd, sizeof(sandboxd), "%s/sandboxd",
		 build ? build : "build");

	for (int i = 0; i < runs; i++)
		if ((bare[i] = time_exec(true_argv)) < 0)
			return fprintf(stderr, "/bin/true failed\n"), 1;
	m_bare = bench_median(bare, runs);

	if (access(bwrap_argv[0], X_OK) == 0 && time_exec(bwrap_argv) >= 0) {
		for (nbw = 0; nbw < runs; nbw++)
			if ((bw[nbw] = time_exec(bwrap_argv)) < 0)
				break;
		if (nbw == runs) {
			m_bw = bench_median(bw, runs);
			bw_argv = bwrap_argv;
		}
	}

	uv_loop_init(&loop);
	if (sbx_start(&loop, sandboxd, &s) < 0)
		return fprintf(stderr, "cannot start %s\n", sandboxd), 1;
	spec_for(&sp, true_argv, ws);
	/* Warm up: the first run probes the kernel and builds the filter. */
	for (int i = 0; i < 5 + runs; i++) {
		double t0 = now_ms();

		memset(&o, 0, sizeof(o));
		sbx_run(s, &sp, &(struct sbx_cbs){NULL, on_done, NULL}, &o,
			NULL);
		while (!o.done)
			uv_run(&loop, UV_RUN_ONCE);
		if (!o.ok) {
			fprintf(stderr, "sandboxd run failed: %s\n", o.err);
			return 1;
		}
		if (i >= 5)
			sb[i - 5] = o.end - t0;
	}
	m_sb = bench_median(sb, runs);
	/* The same, each run as the rows' are: after a pause, with a list of
	 * multi-linked names (empty) as spd sends, so that a spare heated
	 * for it waits (the rows' runs beside are these). */
	sb_spec = sp;
	sb_spec.link_names = sb_no_links;
	sb_client = s;
	sb_loop = &loop;
	for (int i = 0; i < 3 + runs; i++) {
		double v;

		usleep(settle_us);
		if ((v = sb_once()) < 0) {
			fprintf(stderr, "sandboxd run failed\n");
			return 1;
		}
		if (i >= 3)
			sb[i - 3] = v;
	}
	m_sb_paused = bench_median(sb, runs);
	long rss_idle = bench_rss_kib(sbx_pid(s));

	/* 50 concurrent `sleep 1`: all should end about a second later. */
	char *sleep_argv[] = {"/bin/sleep", "1", NULL};
	struct one many[BENCH_CONCURRENT];
	double t0 = now_ms(), last = 0;
	long rss_busy = -1;
	int failed = 0;

	spec_for(&sp, sleep_argv, ws);
	memset(many, 0, sizeof(many));
	for (int i = 0; i < BENCH_CONCURRENT; i++)
		sbx_run(s, &sp, &(struct sbx_cbs){NULL, on_done, NULL},
			&many[i], NULL);
	for (;;) {
		int ndone = 0;

		uv_run(&loop, UV_RUN_NOWAIT);
		if (rss_busy < 0 && now_ms() - t0 > 500)
			rss_busy = bench_rss_kib(sbx_pid(s));
		for (int i = 0; i < BENCH_CONCURRENT; i++)
			ndone += many[i].done;
		if (ndone == BENCH_CONCURRENT)
			break;
		usleep(1000);
	}
	for (int i = 0; i < BENCH_CONCURRENT; i++) {
		failed += !many[i].ok;
		if (many[i].end - t0 > last)
			last = many[i].end - t0;
	}

	printf("%-44s %10s %10s\n", "median wall time over runs", "ms",
	       "x bare");
	printf("programs started by %s (BENCH_START=fork: by fork, as "
	       "before the fifteenth pass)\n",
	       bench_start_forks() ? "fork" : "posix_spawn");
	printf("%-44s %10.3f %10.2f\n", "/bin/true bare (start+exec+wait)",
	       m_bare, 1.0);
	if (m_bw >= 0)
		printf("%-44s %10.3f %10.2f\n", "bwrap --unshare-all /bin/true",
		       m_bw, m_bw / m_bare);
	else
		printf("%-44s %10s\n", "bwrap --unshare-all /bin/true",
		       "skipped (bwrap missing or failing)");
	printf("%-44s %10.3f %10.2f\n", "sandboxd /bin/true, every layer", m_sb,
	       m_sb / m_bare);
	printf("%-44s %10.3f %10.2f\n", "  the same, paused, a spare heated",
	       m_sb_paused, m_sb_paused / m_bare);
	printf("end to end (issue 16: within 1.5 ms of sandboxd, at most "
	       "half of bwrap; big workspaces at most +2 ms)\n");
	spctl_e2e(build ? build : "build", ws, runs, m_sb, m_bw);
	printf("runs each: %d; sandboxd overhead over bare: %.3f ms "
	       "(target <= 5 ms: %s)%s\n",
	       runs, m_sb - m_bare, bench_met(m_sb - m_bare <= 5.0),
	       m_bw >= 0 ? "" : "; bubblewrap not measured");
	if (m_bw >= 0)
		printf("sandboxd vs bubblewrap: %.2fx the time\n", m_sb / m_bw);
	printf("sandboxd resident: idle %ld KiB (target < 4096: %s); with %d "
	       "runs: %ld KiB (%.1f KiB per run)\n",
	       rss_idle, bench_met(rss_idle >= 0 && rss_idle < 4096),
	       BENCH_CONCURRENT, rss_busy,
	       (double)(rss_busy - rss_idle) / BENCH_CONCURRENT);
	printf("%d concurrent `sleep 1`: all done after %.0f ms, %d failed\n",
	       BENCH_CONCURRENT, last, failed);

	sbx_close(s, on_closed, &closed);
	while (!closed)
		uv_run(&loop, UV_RUN_ONCE);
	uv_run(&loop, UV_RUN_DEFAULT);
	uv_loop_close(&loop);
	rmdir(ws);
	free(bare);
	free(bw);
	free(sb);
	return failed ? 1 : 0;
}

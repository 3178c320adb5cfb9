/*
 * Policy classification throughput: a mixed set of 10,000 realistic calls
 * (reads and greps, git inspection, edits through sed -i and cp, file
 * tools, wrappers, the occasional push, rm -rf, shell, interpreter and
 * protected-path write) classified over and over in a real workspace with
 * files and symlinks, on one core.  Target: at least 200,000/s.
 *
 *   build/bench/policy [ROUNDS]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "daemon/policy/policy.h"
#include "tests/lib/benchutil.h"

#define NCALLS 10000
#define MAXARGS 12
#define TARGET 200000.0

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 11) % n;
}

static double cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double wall_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void put(const char *ws, const char *rel)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", ws, rel);
	for (char *p = path + strlen(ws) + 1; (p = strchr(p, '/')); p++) {
		*p = '\0';
		mkdir(path, 0755);
		*p = '/';
	}
	f = fopen(path, "w");
	if (f) {
		fputs("x\n", f);
		fclose(f);
	}
}

/* Call templates; "%F" is replaced by a source file, "%D" by a
 * directory.  The weights follow what agents do most: read and search. */
struct tmpl {
	int weight;
	enum policy_call_kind kind;
	const char *argv[MAXARGS];
};

static const struct tmpl tmpls[] = {
    {12, POLICY_CALL_EXEC, {"cat", "%F"}},
    {8, POLICY_CALL_EXEC, {"grep", "-rn", "TODO", "%D"}},
    {6, POLICY_CALL_EXEC, {"ls", "-la", "%D"}},
    {5, POLICY_CALL_EXEC, {"head", "-n", "40", "%F"}},
    {4, POLICY_CALL_EXEC, {"sed", "-n", "10,60p", "%F"}},
    {4, POLICY_CALL_EXEC, {"git", "status"}},
    {4, POLICY_CALL_EXEC, {"git", "diff", "--", "%F"}},
    {3, POLICY_CALL_EXEC, {"git", "log", "--oneline", "-n", "20"}},
    {3, POLICY_CALL_EXEC, {"find", "%D", "-name", "*.c"}},
    {3, POLICY_CALL_EXEC, {"wc", "-l", "%F", "%F"}},
    {3, POLICY_CALL_EXEC, {"sed", "-i", "s/foo/bar/g", "%F"}},
    {2, POLICY_CALL_EXEC, {"cp", "%F", "%F"}},
    {2, POLICY_CALL_EXEC, {"rm", "-rf", "build"}},
    {2, POLICY_CALL_EXEC, {"make", "-j2"}},
    {2, POLICY_CALL_EXEC, {"timeout", "60", "make", "check"}},
    {1, POLICY_CALL_EXEC, {"git", "push", "origin", "HEAD"}},
    {1, POLICY_CALL_EXEC, {"git", "-c", "core.pager=sh", "log"}},
    {1, POLICY_CALL_EXEC, {"sh", "-c", "make && ./run"}},
    {1, POLICY_CALL_EXEC, {"python3", "-c", "print(1)"}},
    {1, POLICY_CALL_EXEC, {"awk", "{print $1}", "%F"}},
    {1, POLICY_CALL_EXEC, {"env", "A=1", "git", "status"}},
    {1, POLICY_CALL_EXEC, {"cat", ".env"}},
    {1, POLICY_CALL_EXEC, {"touch", ".github/workflows/ci.yml"}},
    {1, POLICY_CALL_EXEC, {"curl", "https://example.com"}},
    {8, POLICY_CALL_READ, {"%F"}},
    {6, POLICY_CALL_WRITE, {"%F"}},
    {1, POLICY_CALL_WRITE, {"package.json"}},
    {1, POLICY_CALL_WRITE, {".spd.conf"}},
};

static const char *const files[] = {
    "src/main.c",      "src/util.c",	   "src/net/http.c",
    "src/net/http.h",  "include/api.h",	   "lib/parse/lexer.c",
    "lib/parse/ast.c", "docs/guide.md",	   "README.md",
    "srclink/main.c",  "src/new_module.c", "tests/test_parse.c",
};
static const char *const dirs[] = {"src", "lib", "docs", ".", "src/net"};

struct call {
	struct policy_call pc;
	const char *argv[MAXARGS];
};

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 20;
	char tmpl_dir[] = "/tmp/spd-bench-policy-XXXXXX";
	char *ws, *link = NULL, *cmd = NULL;
	struct call *calls = calloc(NCALLS, sizeof(*calls));
	struct policy_context ctx = {0};
	int total_w = 0;
	size_t counts[4] = {0};
	double c0, c1, w0, w1;

	if (!calls || !mkdtemp(tmpl_dir))
		return 1;
	/* Where a session's worktree really lives: a dozen components deep
	 * under the state directory. */
	if (asprintf(&cmd,
		     "mkdir -p '%s/home/user/.local/state/spd/worktrees/"
		     "feature-x'",
		     tmpl_dir) < 0 ||
	    system(cmd) != 0)
		return 1;
	free(cmd);
	cmd = NULL;
	if (asprintf(&ws, "%s/home/user/.local/state/spd/worktrees/feature-x",
		     tmpl_dir) < 0)
		return 1;
	{
		char *r = realpath(ws, NULL);

		free(ws);
		ws = r;
	}
	if (!ws)
		return 1;
	for (size_t i = 0; i < ARRAY_SIZE(files); i++)
		if (strncmp(files[i], "srclink", 7) != 0)
			put(ws, files[i]);
	put(ws, ".env");
	put(ws, ".spd.conf");
	put(ws, "package.json");
	put(ws, ".github/workflows/ci.yml");
	if (asprintf(&link, "%s/srclink", ws) < 0 || symlink("src", link) < 0)
		return 1;
	ctx.workspace = ws;
	ctx.path_env = POLICY_DEFAULT_PATH;

	for (size_t i = 0; i < ARRAY_SIZE(tmpls); i++)
		total_w += tmpls[i].weight;
	for (size_t i = 0; i < NCALLS; i++) {
		int w = (int)rnd((uint32_t)total_w);
		const struct tmpl *t = tmpls;
		size_t n = 0;

		while (w >= t->weight) {
			w -= t->weight;
			t++;
		}
		for (; n < MAXARGS && t->argv[n]; n++) {
			const char *a = t->argv[n];

			calls[i].argv[n] =
			    strcmp(a, "%F") == 0 ? files[rnd(ARRAY_SIZE(files))]
			    : strcmp(a, "%D") == 0 ? dirs[rnd(ARRAY_SIZE(dirs))]
						   : a;
		}
		calls[i].pc.kind = t->kind;
		if (t->kind == POLICY_CALL_EXEC) {
			calls[i].pc.argv = calls[i].argv;
			calls[i].pc.argc = n;
		} else {
			calls[i].pc.path = calls[i].argv[0];
		}
	}

	/* One warm-up round (page cache, dentries), counted separately. */
	for (size_t i = 0; i < NCALLS; i++) {
		struct policy_result r;

		if (policy_classify(NULL, &ctx, &calls[i].pc, &r) < 0)
			return 1;
		counts[r.decision]++;
		policy_result_free(&r);
	}
	c0 = cpu_now();
	w0 = wall_now();
	for (int k = 0; k < rounds; k++)
		for (size_t i = 0; i < NCALLS; i++) {
			struct policy_result r;

			if (policy_classify(NULL, &ctx, &calls[i].pc, &r) < 0)
				return 1;
			policy_result_free(&r);
		}
	c1 = cpu_now();
	w1 = wall_now();

	double n = (double)NCALLS * rounds;
	double rate = n / (c1 - c0);

	printf("policy: %d calls x %d rounds: allow %zu, ask %zu, deny %zu "
	       "per round\n",
	       NCALLS, rounds, counts[POLICY_ALLOW], counts[POLICY_ASK],
	       counts[POLICY_DENY]);
	printf("policy: %.0f classifications/s on one core (CPU time), "
	       "%.0f/s wall; %.2f us each; target >= %.0f/s: %s\n",
	       rate, n / (w1 - w0), 1e6 / rate, TARGET,
	       bench_met(rate >= TARGET));
	if (asprintf(&cmd, "rm -rf '%s'", tmpl_dir) >= 0 && system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpl_dir);
	free(cmd);
	free(link);
	free(ws);
	free(calls);
	return 0;
}

/*
 * Helpers the benchmarks (bench/) share: medians, resident size, a
 * workspace of many files, a program run quietly.
 */
#ifndef SPD_TESTS_BENCHUTIL_H
#define SPD_TESTS_BENCHUTIL_H

#include <stdbool.h>
#include <sys/types.h>

/* qsort comparison of doubles, ascending. */
int bench_cmp_double(const void *a, const void *b);
/* The median of v[0..n) (sorted in place); 0 when n is 0. */
double bench_median(double *v, int n);
/* pid's resident size (VmRSS) in KiB, or -1. */
long bench_rss_kib(pid_t pid);
/* "met" or "NOT MET": every bench line that prints a target says which. */
const char *bench_met(bool met);
/* files empty regular files spread over dirs directories d000, d001, ...
 * under ws (the first dirs files make them).  Returns 0 or -errno. */
int bench_make_files(const char *ws, long files, int dirs);
/*
 * Runs argv (argv[0] searched in PATH) with stdio on /dev/null and waits
 * for it.  Returns 0 when it exited 0, else -1.  The program is started
 * with posix_spawn (glibc: clone with CLONE_VM and CLONE_VFORK, no copy
 * of this process's page tables), as Python's subprocess, Rust's
 * std::process and Go start one; with BENCH_START=fork in the
 * environment, by fork and exec, as libuv (Node.js) does and as the
 * passes before the fifteenth in bench/README.md measured.
 */
int bench_run_quiet(char *const argv[]);
/* Whether BENCH_START=fork asks bench_run_quiet to fork. */
bool bench_start_forks(void);
/*
 * A real spd in dir: SPD_CONFIG_DIR, SPD_STATE_DIR and SPD_RUNTIME_DIR
 * (dir/config, dir/state, dir/run) and SPD_NO_AUTOSTART=1 set in this
 * process's environment, for it and for the spctl runs after it; then
 * build/spd --foreground, its stderr on /dev/null, waited for until its
 * socket exists (at most 5 s).  Returns its pid, or -1.
 */
pid_t bench_spd_start(const char *build, const char *dir);
/*
 * A git repository of one commit at dir/name and a session on it through
 * the spd of this process's environment (session.start, a worktree, or
 * in place); exports its agent token as SPD_SESSION_TOKEN.  With files,
 * the commit holds that many files spread over dirs directories and the
 * checkout has git-ignored entries too (node_modules/, a log file), which
 * an in-place session's runs hide.  Returns 0 or -1.
 */
int bench_agent_session(const char *dir, const char *name, long files, int dirs,
			bool in_place);
/* The last bench_agent_session's session.start call: when it was sent
 * and when its answer came (CLOCK_MONOTONIC, ms). */
extern double bench_start_window[2];

#endif

/*
 * Helpers for the Check suites: skipping with a reason, temporary
 * directories, and running a program to capture its output.
 */
#ifndef SPD_TESTLIB_H
#define SPD_TESTLIB_H

#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

/*
 * Skip the current test, saying why.  tests/run counts lines starting
 * with "SKIP: " so a missing kernel feature is reported, never silently
 * passed.  Use only at the top level of a START_TEST body.
 */
#define TEST_SKIP(...)                                                         \
	do {                                                                   \
		printf("SKIP: %s: ", __func__);                                \
		printf(__VA_ARGS__);                                           \
		printf("\n");                                                  \
		fflush(stdout);                                                \
		return;                                                        \
	} while (0)

/*
 * Skip because a sandbox layer is missing on this host.  In strict mode
 * (SPD_TEST_STRICT=1, set by .ci/run) a skip for a layer the host has is a
 * failure: tests/run lists the layers `spctl doctor` reports ok in
 * SPD_TEST_HOST_LAYERS ("sandbox" when every required one is, and
 * "landlock_abi=N").  layer is one of doctor's names, "sandbox", or
 * "landlock_abi>=N".
 */
#define TEST_SKIP_LAYER(layer, ...)                                            \
	do {                                                                   \
		if (test_host_has_layer(layer))                                \
			ck_abort_msg("strict mode: skipped although spctl "    \
				     "doctor says this host has " layer        \
				     ": " __VA_ARGS__);                        \
		TEST_SKIP(__VA_ARGS__);                                        \
	} while (0)
/* True when strict mode is on and SPD_TEST_HOST_LAYERS names layer (see
 * TEST_SKIP_LAYER). */
bool test_host_has_layer(const char *layer);

/* Make a fresh directory under $TMPDIR (or /tmp), mode 0700.  Returns a
 * malloc'd path; aborts the test on failure. */
char *test_tmpdir(const char *tag);
/* The same, in a directory a sandboxed run reads as the host has it: not
 * under /tmp or /var/tmp, which are each run's own (TMPDIR when it is
 * neither, else the build directory). */
char *test_visible_tmpdir(const char *tag);
/* rm -rf path.  Ignores errors. */
void test_rmrf(const char *path);
/* A malloc'd string made from a printf format; aborts the test on
 * failure. */
char *test_fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
/* Write a whole file (mode 0600).  Aborts the test on failure. */
void test_write_file(const char *path, const char *content);
/* Read a whole file; returns malloc'd NUL-terminated text or NULL. */
char *test_read_file(const char *path);
/*
 * Run argv (argv[0] searched in PATH) with the current environment plus
 * the NULL-terminated "NAME=value" list extra (may be NULL); capture
 * stdout and stderr into malloc'd strings (either pointer may be NULL).
 * Returns the exit status as from waitpid, or -1.
 */
int test_run(char *const argv[], char *const extra_env[], char **ret_out,
	     char **ret_err);
/*
 * Run a shell line built from a format (test set-up on the host, never the
 * thing under test); returns its exit code (-1 if it did not exit) and
 * its stdout in *ret_out (may be NULL).  Its stderr is dropped.
 */
int test_sh(char **ret_out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/*
 * A git repository at dir (made with its parents), on branch main, with a
 * committer configured and one commit "init" of what the shell line files
 * (run in dir) made.  Aborts the test on failure.
 */
void test_make_repo(const char *dir, const char *files);
/* test_run fails the test when the command runs longer than
 * TEST_RUN_DEADLINE_MS, or when its output stays open TEST_RUN_LINGER_MS
 * after it exited (a daemon it started kept the caller's pipes). */
#define TEST_RUN_DEADLINE_MS 100000
#define TEST_RUN_LINGER_MS 5000
#define TEST_RUN_TICK_MS 100
/* Directory of the build (the BUILD env var, default "build"), absolute. */
const char *test_build_dir(void);
/* Absolute path of a built program, e.g. test_prog("spd"). Static buffer
 * per call site is not used: returns malloc'd memory. */
char *test_prog(const char *name);

/* A non-blocking TCP listener on 127.0.0.1, a port the kernel picks
 * (*ret_port), backlog 512: the stand-ins' and forwarder's.  Returns the
 * descriptor or -1. */
int test_listen_loopback(int *ret_port);

/*
 * Start python3 with args (after "python3"; NULL-terminated): a stand-in
 * whose first line on stdout is the port it listens on, read into
 * *ret_port.  Returns its pid (the caller kills it); fails the test when
 * it prints no port.
 */
pid_t test_python_standin(char *const args[], int *ret_port);

/*
 * Start tests/lib/provider_standin.py, logging its calls to log and
 * accepting the comma-separated keys: its pid, its port in *ret_port.
 */
pid_t test_provider_standin(const char *log, const char *keys, int *ret_port);

#endif

/*
 * A real spd for integration tests: started in --foreground with its own
 * config, state and runtime directories under a temporary directory.
 */
#ifndef SPD_TESTS_SPDPROC_H
#define SPD_TESTS_SPDPROC_H

#include <check.h>
#include <stdbool.h>
#include <string.h>
#include <sys/types.h>

struct test_spd {
	char *dir;     /* the temporary root */
	char *config;  /* dir/config */
	char *state;   /* dir/state */
	char *runtime; /* dir/run */
	/* XDG_RUNTIME_DIR in the default and nested layouts, else NULL */
	char *xdg_runtime;
	char *sock;
	char *journal;
	pid_t pid;
	char token[80];
	char *env[8]; /* the layout's variables and SPD_NO_AUTOSTART=1 */
};

/* Whether this run is in the default layout (SPD_TEST_LAYOUT=default):
 * tests that cost much and find nothing of paths run there only, where
 * users run and where both tests/run and make asan run them. */
bool test_layout_default(void);
/*
 * The tests of what waits on spd's loop (sessions of thousands of
 * files): an order of answers, not paths, so they run in the default
 * layout only, where users run and where both tests/run and make asan
 * run them (each layout more cost 25 s of CI).
 */
#define LOOP_ORDER_TEST()                                                      \
	do {                                                                   \
		if (!test_layout_default())                                    \
			TEST_SKIP("the loop's order, not paths: runs in the "  \
				  "default layout only (SPD_TEST_LAYOUT="      \
				  "default; tests/run runs it there)");        \
	} while (0)

/*
 * Make the directories (spd.conf gets conf when not NULL) without
 * starting spd.  SPD_TEST_LAYOUT picks where they are: "tmp" (unset) the
 * SPD_*_DIR overrides below dir; "default" a user's layout, HOME=dir and
 * no overrides (~/.config/spd, ~/.local/state/spd, $XDG_RUNTIME_DIR/spd
 * under /run/user/UID); "nested" HOME=dir with the state dir inside the
 * config dir and the runtime dir inside the state dir.  t->env holds
 * what spd and spctl need of it.
 */
void test_spd_prepare(struct test_spd *t, const char *conf);
/* Start spd --foreground and wait until its socket answers; read the
 * operator token.  Aborts the test on failure. */
void test_spd_start(struct test_spd *t);
/* Try to start spd; returns its exit status if it exits within a few
 * seconds (a refusal), or -1 if it is still running (then it is left
 * running and t->pid set). stderr is stored in *ret_err if not NULL. */
int test_spd_try_start(struct test_spd *t, char **ret_err);
/* Run spd --foreground expecting it to exit (a refusal) within 10 s;
 * returns its wait status and its stderr in *ret_err (may be NULL).
 * Aborts the test if it keeps running. */
int test_spd_expect_exit(struct test_spd *t, char **ret_err);
/* Prepare t with conf and run spd, which must refuse to start (exit
 * with a status not 0): returns what it printed on stderr (free it; test_spd_cleanup t). */
char *test_spd_refuses(struct test_spd *t, const char *conf);
/* SIGTERM and wait; returns the wait status. */
int test_spd_stop(struct test_spd *t);
/* The end of a test that leaves spd running: stop it, which must be a
 * clean exit (under ASan a leak or an error in spd shows as a non-zero
 * one), then test_spd_cleanup; fails the test with the tail of spd's
 * stderr when the exit was not clean.  Does nothing when t was never
 * prepared, and finds nothing wrong when spd is no longer running. */
void test_spd_stop_clean(struct test_spd *t);
/* SIGKILL and wait. */
void test_spd_kill(struct test_spd *t);
/* Stop if running and remove the directories. */
void test_spd_cleanup(struct test_spd *t);

/* Connect to the socket; returns the fd (aborts on failure). */
int test_spd_connect(struct test_spd *t);
/* Write all bytes. */
void test_send(int fd, const char *s, size_t n);
/* Read one line (without '\n') with a timeout in ms; returns malloc'd
 * text or NULL on EOF or timeout. */
char *test_recv_line(int fd, int timeout_ms);
/* Send one request line built from method and params JSON text (params
 * may be NULL; the operator token is added when with_token) and return
 * the response line. */
char *test_call(struct test_spd *t, int fd, int id, const char *method,
		const char *params_json, bool with_token);
/* A fresh request id for test_rpc_on and for requests a test writes
 * itself. */
int test_next_id(void);
/*
 * Send method with params (a JSON object text, or NULL) and token (NULL:
 * the operator's) on fd; return the response line, skipping the lines
 * before it (notifications such as run.output), or NULL when the
 * connection closed or nothing came for timeout_ms.
 */
char *test_rpc_on(struct test_spd *t, int fd, const char *token,
		  const char *method, const char *params, int timeout_ms);
/* A reply's error symbol (error.data.code), "ok" for a result, "closed"
 * for NULL (no reply), "?" for an error without one; static storage.
 * Fails the test when the reply is not JSON. */
const char *test_reply_code(const char *reply);
#define TEST_ASSERT_CODE(reply, want)                                          \
	ck_assert_msg(strcmp(test_reply_code(reply), (want)) == 0,             \
		      "expected %s, got %s", (want), (reply))

/* A session's id and agent token are this long (hex). */
#define TEST_SESSION_ID_LEN 16
#define TEST_SESSION_TOKEN_LEN 64
/* session.start as the operator with params (a JSON object text); its
 * id and token into id[TEST_SESSION_ID_LEN + 1] and
 * token[TEST_SESSION_TOKEN_LEN + 1].  Aborts the test on failure. */
void test_session_start(struct test_spd *t, const char *params, char *id,
			char *token);

/* The output of sqlite3 on spd's journal file (what spd wrote, not what
 * it says it wrote) for sql; malloc'd, or NULL. */
char *test_journal(struct test_spd *t, const char *sql);
/* test_journal until its output holds needle or 10 s have passed: spd
 * answers a request before its writer thread has committed the rows the
 * request made (the journal's group commit), so a test reading the file
 * right after a reply can be early.  Returns the last output. */
char *test_journal_until(struct test_spd *t, const char *sql,
			 const char *needle);

/* Run build/spctl with args in this spd's environment (plus extra env
 * entries, NULL-terminated, may be NULL); returns the wait status. */
int test_spctl(struct test_spd *t, char *const args[], char *const extra_env[],
	       char **ret_out, char **ret_err);

#endif

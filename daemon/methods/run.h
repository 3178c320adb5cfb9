/*
 * Running commands for clients (daemon/methods/m_run.c): cmd.run's handler, the
 * shared start routine sessions use for their checks, and the output
 * filter the redactor plugs into.
 */
#ifndef SPD_DAEMON_RUN_H
#define SPD_DAEMON_RUN_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct call;
struct spd;
struct sbx_layers;
struct sbx_result;
/* A done_hook's answer when it goes on elsewhere (a session's commits
 * taken on the thread pool): it keeps w and calls w->resume(w, e, msg)
 * on the loop once, with what it would have returned. */
#define RUN_HOOK_LATER (-1)
struct run_wait {
	void (*resume)(struct run_wait *w, int e, const char *msg);
};

/* What to run; borrowed by run_start(), which copies what it keeps. */
struct run_request {
	json_t *argv;	  /* array of strings */
	json_t *env;	  /* object NAME → string, or NULL */
	json_t *writable; /* array of absolute paths, or NULL */
	const char *workspace;
	const char *cwd; /* NULL: the workspace */
	int net;	 /* enum sbx_net */
	uint32_t timeout_ms;
	bool best_effort;
	char *const *hidden;	  /* extra unreadable paths, or NULL */
	char *const *readonly;	  /* read-only inside the workspace, or NULL */
	char *const *empty_files; /* read as empty, or NULL */
	/* Called with the result before the reply (sessions re-hash their
	 * guarded inputs here).  Returns 0, or an enum rpc_error with a
	 * sentence in msg: the call then ends with that error instead (a
	 * guard finding ends the attempt even though the command ran), or
	 * RUN_HOOK_LATER.  r is valid during the call only. */
	int (*done_hook)(void *data, const struct sbx_result *r,
			 struct run_wait *w, char *msg, size_t msglen);
	/* Called with the result once the reply is on its way, whatever it
	 * said: work that must not hold the reply up (a session's record
	 * of the command).  Last to see done_data: it releases it. */
	void (*after_reply)(void *data, const struct sbx_result *r);
	void *done_data;
	/* Called once the run has started (may be NULL): a session counts
	 * its runs in flight from here to done_hook. */
	void (*on_start)(void *data);
	/* Where run_start writes the journal row of the run's start (may
	 * be NULL). */
	int64_t *journal_row;
	/* Releases done_data when the run never starts (refused). */
	void (*done_cancel)(void *data);
	/* spctl agent: run with a fresh turn of the session's (cap in
	 * picodollars), network mode broker, the turn's key and the
	 * broker's URLs in the environment and the session's own home;
	 * the turn ends when the command does. */
	bool agent;
	int64_t agent_cap;
	/* Give the command a stdin pipe that run.input on the same
	 * connection writes to (spctl acp); false: /dev/null. */
	bool stdin_pipe;
	/* One pipe for the command's stdout and stderr (cmd.run's
	 * merge_stderr): its output is relayed as "stdout", in order. */
	bool merge_stderr;
	bool in_place;		/* set by run_prepare for in-place sessions */
	const char *session_id; /* set by run_prepare: the session, or NULL */
	/* run_prepare's walks of an in-place checkout on the thread pool
	 * for this run so far (daemon/methods/agent.c). */
	unsigned walks;
	/* Set by cmd.run: the rest of it once spd->run_prepare has filled
	 * req later, having answered 1 (the workspace, the cwd, the policy,
	 * the start).  req is copied. */
	void (*prepared)(struct call *c, const struct run_request *req);
	/* Set by run_prepare: whether the run must wait before it starts
	 * (its session's checkpoint is being read on the thread pool):
	 * true when go(data) is called on the loop once it may start. */
	bool (*start_wait)(const struct run_request *req, void (*go)(void *),
			   void *data);
};

/* Start a run that finishes c with its result; streams run.output.
 * Returns 0, or -errno after finishing c with an error. */
int run_start(struct call *c, const struct run_request *req);

/* The layers as JSON for spctl doctor and daemon.status. */
json_t *run_layers_json(const struct sbx_layers *l);

#endif

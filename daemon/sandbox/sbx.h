/*
 * spd's side of sandboxd (docs/design.md, "Processes"): start the spawner with
 * an empty environment and a socketpair on its descriptor 3, hand it
 * runs, stream their output and deliver their results on spd's libuv
 * loop.  If sandboxd dies, every run in flight ends with INTERNAL
 * ("sandboxd died") and a new sandboxd is started for the next runs.
 *
 * Output: spd makes each run's stdout and stderr pipes (one pipe for both
 * with spec.merge_stderr) and passes their write ends with the RUN; the
 * command writes straight into them and spd reads them here, keeping at
 * most output_cap bytes per stream (the rest is counted and dropped, with
 * one marker line).  sandboxd never relays output.
 */
#ifndef SPD_DAEMON_SBX_H
#define SPD_DAEMON_SBX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "proto/sandbox.h"

/* Output kept per stream and run unless the spec says otherwise: enough
 * for any test log an agent should read, bounded so that a command
 * flooding stdout cannot grow spd (issue 3). */
#define SBX_OUTPUT_CAP_DEFAULT (1024 * 1024)
/* After a run's EXITED, how long spd still waits for its pipes to reach
 * end of file (a best-effort run without a pid namespace may leave a
 * background process holding them). */
#define SBX_DRAIN_MS 2000
/* A sandboxd that dies sooner than this after its start is restarted
 * only after this delay, so that a broken install does not spin. */
#define SBX_RESTART_DELAY_MS 1000
/* Bytes written to a run's stdin that the pipe has not taken yet: a
 * command that stops reading must not make spd buffer without end. */
#define SBX_INPUT_QUEUE_MAX (4 * 1024 * 1024)

struct sbx;
struct sbx_run;

struct sbx_spec {
	char *const *argv;	  /* required, argv[0] non-empty */
	char *const *envp;	  /* "NAME=value"; NULL: empty */
	const char *workspace;	  /* absolute, required */
	const char *cwd;	  /* absolute, NULL: the workspace */
	const char *home;	  /* the operator's HOME (caches writable,
				      credentials hidden); NULL: $HOME */
	int net;		  /* enum sbx_net */
	uint16_t broker_port;	  /* BROKER or PROXY: 1..65535 */
	uint32_t timeout_ms;	  /* 0: none */
	char *const *writable;	  /* extra writable paths, may be NULL */
	char *const *hidden;	  /* unreadable paths (spd's dirs), or NULL */
	char *const *readonly;	  /* read-only inside writable, or NULL */
	char *const *empty_files; /* files that read as empty, or NULL */
	/* Read-only binds into the workspace, or NULL: pairs src, dst, src,
	 * dst, ..., NULL.  Each src (an absolute host directory) is seen
	 * read-only at dst (absolute, strictly inside the workspace, no
	 * symlink below the workspace).  A dst that does not exist is made
	 * in the run's view only: the host's workspace never gets an entry
	 * (docs/sandbox.md, "Read-only binds"). */
	char *const *ro_binds;
	/* NULL: sandboxd walks the workspace for hard links.  Else every
	 * name below the workspace whose file has more than one link, as
	 * daemon/session/linkwatch.h gives them (relative, strcmp order); a
	 * list that is too long for the message is dropped (the walk). */
	const char *const *link_names;
	/* With link_names, NULL or directories to bind read-only whole
	 * (linkwatch_names; the names below them are not in link_names). */
	const char *const *link_ro_dirs;
	bool best_effort;	   /* run even if a layer is missing */
	uint32_t run_uid, run_gid; /* when spd is root; 0: nobody/nogroup */
	uint64_t rlimits[SBXP_RLIM__COUNT]; /* 0: sandboxd's defaults */
	size_t output_cap; /* per stream; 0: SBX_OUTPUT_CAP_DEFAULT */
	/* Give the command a stdin pipe that sbx_run_input writes to;
	 * false: its stdin is /dev/null. */
	bool stdin_pipe;
	/* One pipe for the command's stdout and stderr both (SBXP_RUN_MERGED):
	 * its output comes as stream 1 only, in the order it was written,
	 * kept up to output_cap as one stream; bytes_dropped[1] stays 0. */
	bool merge_stderr;
	/* The most runs in flight (this one included) this run may start
	 * beside: below SBXP_RUNS_MAX for anyone but the operator, so the
	 * slots above stay free for the operator.  0: SBXP_RUNS_MAX. */
	unsigned slots_max;
	/* How sbx_run_cancel ends the run: SIGTERM to the command's process
	 * group, then after this long SIGKILL to the whole run (at most
	 * SBXP_CANCEL_GRACE_MAX_MS; more is -EINVAL).  0: SIGKILL at once. */
	uint32_t kill_grace_ms;
};

struct sbx_result {
	int exit_code;	 /* -1 when killed by a signal or not run */
	int term_signal; /* 0 unless killed */
	bool timed_out;	 /* the deadline killed it */
	bool cancelled;	 /* sbx_run_cancel ended it */
	/* How sbx_run_cancel ended it: SBXP_ENDED_TERM (it exited after
	 * SIGTERM, within the grace) or SBXP_ENDED_KILL; SBXP_ENDED_ITSELF
	 * when it ended before the cancel reached it, or was not cancelled. */
	enum sbxp_ended ended;
	uint64_t duration_us;
	uint64_t bytes_dropped[2]; /* [0] stdout, [1] stderr */
	/* SBXP_ERR_NONE when it ran; why not otherwise (also when sandboxd
	 * died under it: INTERNAL). */
	enum sbxp_err error;
	const char *error_msg;	     /* NULL or a sentence */
	const char *const *warnings; /* NULL-terminated, never NULL */
};

struct sbx_cbs {
	/* A chunk of output, stream 1 or 2; buf is valid during the call.
	 * May be NULL. */
	void (*on_output)(void *data, int stream, const char *buf, size_t len);
	/* Exactly once per run, after all its output; r and its strings
	 * are valid during the call only.  The run is freed after it. */
	void (*on_done)(void *data, const struct sbx_result *r);
	/* Broker mode: the run's listening socket on 127.0.0.1:broker_port
	 * in its network namespace (proto/sandbox.h, SBXP_LISTENER), before
	 * the run is reported started.  The callee owns fd.  May be NULL
	 * (the socket is closed). */
	void (*on_listener)(void *data, int fd);
};

/*
 * Start sandboxd (the program at sandboxd_path, copied) on loop.  Returns
 * 0 and the supervisor in *ret, or -errno when the socketpair or the
 * spawn fails.
 */
int sbx_start(uv_loop_t *loop, const char *sandboxd_path, struct sbx **ret);

/*
 * Start a run.  spec and its strings are copied before this returns.
 * cbs is copied; data is passed to the callbacks.  On success returns 0
 * and, if ret is not NULL, a handle valid until on_done returns.  Returns
 * -EINVAL for a malformed spec, -SPD_ETOOBIG when it exceeds the message
 * limits, -EAGAIN when spec->slots_max runs are already in flight, -ESHUTDOWN after sbx_close, -errno for pipes.  on_done is never
 * called from within sbx_run.
 */
int sbx_run(struct sbx *s, const struct sbx_spec *spec,
	    const struct sbx_cbs *cbs, void *data, struct sbx_run **ret);

/* The client went away: end the run, SIGTERM first when its spec gave a
 * kill_grace_ms, then SIGKILL to its whole pid namespace.  on_done still
 * follows, with cancelled set and how it ended.  Idempotent. */
void sbx_run_cancel(struct sbx_run *r);

/*
 * Queue len bytes (copied) for the stdin of r, a run started with
 * spec.stdin_pipe.  Returns 0, -EPIPE when r has no stdin (never had, or
 * closed, or the run ended), -ENOBUFS when more than SBX_INPUT_QUEUE_MAX
 * bytes would wait, or -errno.  Bytes the command never reads are lost.
 */
int sbx_run_input(struct sbx_run *r, const char *buf, size_t len);
/* Close r's stdin: the command reads end of file once it has read what
 * was queued.  Accepts NULL and runs without stdin; idempotent. */
void sbx_run_input_close(struct sbx_run *r);

/*
 * Ask sandboxd what this host lets it do (spctl doctor, daemon.status),
 * saying which uid and gid the runs will have (spd.conf's sandbox.user:
 * sandboxd makes their namespaces ahead).  cb gets the layers, or NULL
 * if sandboxd died first.  Returns 0 or -errno.
 */
int sbx_probe(struct sbx *s, uint32_t run_uid, uint32_t run_gid,
	      void (*cb)(void *data, const struct sbx_layers *l), void *data);

/* sandboxd's pid, or -1 while it is being restarted (tests, bench). */
pid_t sbx_pid(const struct sbx *s);

/*
 * Kill every run (each gets on_done with INTERNAL "spd is closing"
 * unless already done), stop sandboxd, close all handles, then call cb
 * (may be NULL) and free s.  s may be NULL (cb is then called at once).
 */
void sbx_close(struct sbx *s, void (*cb)(void *data), void *data);

#endif

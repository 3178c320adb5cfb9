/*
 * Starting, watching and ending one sandboxed run (docs/design.md, "Sandbox
 * defaults"; issue 3).  sandboxd's loop owns an array of struct
 * spawn_run and polls each run's pidfd and report pipe; this module does
 * the rest:
 *
 *   sandboxd ──clone(namespaces)──▶ init (pid 1 of the run's pid ns)
 *                                    mount plan, lo up, pivot_root
 *                                    └─fork─▶ command: setsid, fds,
 *                                             rlimits, Landlock, NNP,
 *                                             caps, seccomp, exec
 *
 * init exits as soon as the command does, and the kernel then kills
 * everything else in the pid namespace: nothing outlives its run.
 * Killing init (deadline, CANCEL, sandboxd's exit) does the same.
 */
#ifndef SPD_SANDBOXD_LINUX_SPAWN_H
#define SPD_SANDBOXD_LINUX_SPAWN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto/sandbox.h"
#include "sandboxd/linux/mount.h"
#include "sandboxd/linux/layers.h"

/* Defaults of the run's rlimits, each overridable per RUN:
 * processes (a fork bomb stops here; counted per user namespace, so per
 * run unless sandboxd runs as root), open files, the largest file one
 * write may make, CPU seconds (the deadline usually ends a run first),
 * address space (generous: runtimes such as V8 and Go reserve a lot of
 * virtual memory they never touch). */
#define SPAWN_RLIM_NPROC 1024
#define SPAWN_RLIM_NOFILE 4096
#define SPAWN_RLIM_FSIZE (4ull << 30)
#define SPAWN_RLIM_CPU 3600
#define SPAWN_RLIM_AS (64ull << 30)

/* The uid/gid of a run when sandboxd runs as root and the RUN names none
 * (0 in the message): nobody/nogroup. */
#define SPAWN_RUN_UID_DEFAULT 65534
#define SPAWN_RUN_GID_DEFAULT 65534

/* Bound pathname sockets read from /proc/net/unix per run: most live
 * in /run and need no mount of their own, so this bounds only memory;
 * a host with more is refused rather than scanned in part. */
#define SPAWN_SOCKETS_SCAN_MAX 16384

/* Connections to the broker's port a run may have waiting for spd to
 * accept them: an agent makes a few at once. */
#define SPAWN_BROKER_BACKLOG 128

/* Idmap user namespaces kept open (one per run uid/gid pair). */
#define SPAWN_IDMAP_CACHE 4

struct child_spare;
struct child_args;
struct spawn_hot;

/* Spares kept at once: one cold, for any run, and four hot, so that up
 * to four sessions whose commands come in turns (agents in parallel, each
 * in its own worktree) each find one set up for it.  An idle hot spare
 * costs two processes that share sandboxd's memory, its namespaces and
 * its mounts: about 150 KiB of the kernel's here. */
#define SPAWN_SPARES 5

/* A spare (spawn_spare, spare.h): its pid 1's pid (0: none), sandboxd's
 * end of its socket, the read end of its status pipe, its two processes'
 * stacks (made at its first use), the idmap_gen and mounts_gen it was
 * made at, what it is handed at its clone; whether its 'r' was read and
 * whether it is to be heated.  Hot: what it was set up for (spawn.c's),
 * those args, its mount namespace's mountinfo (a mount of it gone since
 * is seen), the fingerprint of the files its setup looked at, and when
 * it was heated (the oldest goes first). */
struct spare_slot {
	pid_t pid;
	int sock;
	int status;
	char *stack;
	char *cmd_stack;
	unsigned int idmap_gen, mounts_gen;
	struct child_spare *cfg;
	bool said_ready;
	bool to_heat;
	struct spawn_hot *hot;
	const struct child_args *hot_args;
	int hot_mounts_fd;
	uint64_t hot_fp;
	uint64_t heated_ns;
};

struct spawn_ctx {
	bool root; /* sandboxd runs as uid 0: commands run as run_uid */
	uid_t uid; /* sandboxd's (the operator's) ids */
	gid_t gid;
	bool probed;
	struct sbx_layers layers;
	/* seccomp programs per net mode, built once; NULL filter until. */
	struct sock_fprog *filters[SBX_NET__COUNT];
	int filter_err
	    [SBX_NET__COUNT]; /* the build error, 0 when not tried or built */
	struct {
		uid_t uid;
		gid_t gid;
		int fd;
	} idmap[SPAWN_IDMAP_CACHE];
	size_t nidmap;
	/* Made once, used by every run (spawn.c): sandboxd-init in a sealed
	 * memfd (-errno when it could not be made), the stacks of a run's
	 * first two processes (their tops), the hard-link walk's memory. */
	int init_fd;
	char *init_stack;
	char *cmd_stack;
	struct mountplan_scratch *links_scratch;
	/* An idmap user namespace was made or closed: a spare made before
	 * may lack its descriptor. */
	unsigned int idmap_gen;
	/* The spares (spawn_spare): at most one cold, the others hot, each
	 * for a run it was set up for (spare.h). */
	struct spare_slot spares[SPAWN_SPARES];
	/* /proc/self/mountinfo, whose poll says when sandboxd's mounts
	 * changed, and how many times they did: a spare made before a
	 * change is not taken. */
	int mounts_fd;
	unsigned int mounts_gen;
	/* The fixed head of every mount plan, which a spare applies before
	 * its run arrives (no ops when it could not be built). */
	struct mountplan fixed_plan;
	/* The last run a spare could be set up for ahead: its RUN body
	 * (heat_len bytes), or NULL. */
	void *heat_msg;
	size_t heat_len;
	/* Root: the next run's user namespace, made ahead (userns.c,
	 * userns_run) for the last run's uid and gid, or -1. */
	int run_userns_fd;
	bool run_userns_set;
	uid_t run_userns_uid;
	gid_t run_userns_gid;
};

struct spawn_run {
	uint32_t id;
	pid_t pid;	   /* the run's init as sandboxd sees it */
	int pidfd;	   /* readable when init exits */
	int report_fd;	   /* setup records; EOF once the command exec'd */
	int status_fd;	   /* init's record of the command's wait status */
	int broker_fd;	   /* broker mode: the listener for spd, until sent */
	uint64_t start_ns; /* CLOCK_MONOTONIC */
	uint64_t deadline_ns; /* 0: none */
	bool own_pidns;	      /* false: best-effort run without namespaces */
	bool started;	      /* STARTED was sent */
	bool failed;	      /* a setup record refused the run */
	bool timed_out;
	bool cancelled;
	/* A CANCEL's SIGTERM waits for the start: until then the run's init
	 * may not handle it yet, and would drop it (init.h, FD_REPORT). */
	bool term_pending;
	bool killed; /* spawn_kill sent SIGKILL */
	/* A CANCEL's SIGTERM was sent: SIGKILL is due at this time (main.c),
	 * or 0. */
	uint64_t kill_ns;
	struct sbxp_started info;   /* pid and warnings for STARTED */
	struct sbxp_exited refusal; /* set when failed */
	int exec_errno;		    /* the command could not be exec'd */
	bool have_status;	    /* init's REC_STATUS was read */
	bool run_empty;	       /* ... and nothing else was left in the run */
	bool status_eof;       /* init closed it without one */
	bool reaped;	       /* init was waited for */
	int status;	       /* the command's wait status */
	struct mountplan plan; /* kept to name a failing mount */
	/* The run's mount namespace, held so that taking its mounts down
	 * follows EXITED instead of delaying it (spawn_finish), or -1. */
	int mntns_fd;
};

/* Fill ctx for this process (its uids).  Probing is deferred to the
 * first run or probe.  Returns 0. */
int spawn_ctx_init(struct spawn_ctx *ctx);

/* Probe the layers again (PROBE) and remember the result.  Returns a
 * pointer into ctx, never NULL. */
const struct sbx_layers *spawn_probe(struct spawn_ctx *ctx);

/* Make ahead what the first runs would make (PROBE's sbxp_probe says
 * their uid and gid, 0 the defaults): each network mode's seccomp filter
 * and, as root, the uid's idmap user namespace (both kept in ctx), and
 * have the next spare's run user namespace be that uid's.  Called after
 * the probe's reply, so that the first run after sandboxd starts pays
 * none of it.  What cannot be made is left for the run, which refuses
 * or warns as it would have. */
void spawn_prepare(struct spawn_ctx *ctx, uint32_t run_uid, uint32_t run_gid);

/*
 * Start the run described by v, its output going to the descriptors
 * out_fd and err_fd (the same one for SBXP_RUN_MERGED) and its stdin read
 * from in_fd (-1: /dev/null; all borrowed: the caller closes them
 * afterwards).  On
 * success fills *run and returns 0: the caller polls run->pidfd and
 * run->report_fd.  When the run cannot start, fills *ret_refusal (the
 * EXITED to send: SANDBOX-UNAVAILABLE naming the layer, BAD-REQUEST or
 * INTERNAL) and returns -errno.
 */
int spawn_start(struct spawn_ctx *ctx, uint32_t id,
		const struct sbxp_run_view *v, int out_fd, int err_fd,
		int in_fd, struct spawn_run *run,
		struct sbxp_exited *ret_refusal);

/*
 * Read what the run's report pipe holds.  Returns 1 when the pipe reached
 * EOF (the command was exec'd, or setup failed: check run->failed), 0
 * when more may come.  Records warnings into run->info.
 */
int spawn_read_report(struct spawn_run *run);

/*
 * The spare: a run's init cloned ahead of its run, into fresh namespaces
 * (all of them, the network's included), waiting for the next run, which
 * then pays neither the clone nor the namespaces' creation.  It is used
 * for one run only; nothing of a run exists in it before that run takes
 * it.  spawn_spare makes one when there is none and the host allows it,
 * and one to heat after a run that a spare could be heated for (call it
 * when idle: the clone takes about as long as a run's setup);
 * spawn_start takes one, or drops it and clones anew when sandboxd's
 * mounts changed since it was made, an idmap user namespace it lacks is
 * needed, or the run wants the host's network.  spawn_spare_drop kills
 * and reaps them all.
 */
void spawn_spare(struct spawn_ctx *ctx);
void spawn_spare_drop(struct spawn_ctx *ctx);

/*
 * Hot spares (docs/sandbox.md): after a run, while sandboxd is idle, a
 * second spare is made, and once ready set up for a run like that one
 * (the rest of its mount plan, its directory, its whole confinement), so
 * that a run that is the same but for its argv, environment and
 * descriptors only executes.  spawn_spare_wants_heat names the spare
 * whose socket is worth watching (a spare to heat), or -1;
 * spawn_spare_heat, once it is readable, heats it, waiting until it is
 * done, or drops it.  A run that fits no hot spare takes the cold one;
 * a hot spare whose files changed since, or one of whose mounts went
 * away, is dropped; the oldest hot one makes room for a new one.
 */
int spawn_spare_wants_heat(const struct spawn_ctx *ctx);
void spawn_spare_heat(struct spawn_ctx *ctx);
/* Frees what spawn_spare_heat made (spawn_spare_drop calls it). */
void spawn_hot_free(struct spawn_hot *h);

/* Kill the whole run (its pid namespace) now.  Idempotent. */
void spawn_kill(struct spawn_run *run);

/*
 * Ask the run to end: SIGTERM to its init, whose handler forwards it to
 * the command's process group (sandboxd-init, init.h); without a pid
 * namespace of its own (best-effort), to the run's process group
 * directly.  The caller sends spawn_kill after its grace.  Idempotent.
 */
void spawn_term(struct spawn_run *run);

/*
 * Read init's record of the command's status from run->status_fd once it
 * is readable.  Returns 1 when init also found the run empty (no process
 * left but itself: spawn_finish may follow at once), else 0.
 */
int spawn_read_status(struct spawn_run *run);

/*
 * Fill *ret with the run's EXITED: the command's exit code or signal,
 * timed_out, how a CANCEL ended it, duration, or the refusal recorded
 * during setup.  Called once
 * the run is over: its pidfd became readable (init exited), or
 * spawn_read_status returned 1.  In the first case it reaps init.
 * Every process of the run is gone when it returns, but init, which only
 * exits, in the second.
 */
void spawn_finish(struct spawn_run *run, struct sbxp_exited *ret);

/* After spawn_finish and the EXITED it filled: close the run's
 * descriptors but mntns_fd and free its plan.  Returns init's pidfd when
 * init is still to be reaped (the run was reported empty before init
 * exited), else -1.  Then *status_fd is the status pipe's read end,
 * whose close lets init exit (init.h, INIT_LINGER_MS): close it once
 * spd has answered, poll the pidfd, then spawn_reap_pidfd; else -1.  The caller
 * closes mntns_fd after (the run's mounts come down with the last
 * reference: init's, when it exits). */
int spawn_release(struct spawn_run *run, int *status_fd);

/* Wait for the init whose pidfd this is (it has exited, or is about to:
 * it only exits) and close the pidfd. */
void spawn_reap_pidfd(int pidfd);

/* Monotonic clock in nanoseconds. */
uint64_t spawn_now_ns(void);

#endif

/*
 * A run's first two processes (sandboxd/linux/spawn.h): the run's init,
 * pid 1 of its namespaces, which sets the run up and starts the command,
 * and the command, which confines itself and executes.  Both run between
 * clone and exec, sharing sandboxd's memory (SPAWN_SHARED_VM): only
 * system calls and what sandboxd prepared in struct child_args.
 */
#ifndef SPD_SANDBOXD_LINUX_CHILD_H
#define SPD_SANDBOXD_LINUX_CHILD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto/sandbox.h"
#include "sandboxd/linux/layers.h"
#include "sandboxd/linux/mount.h"

/* The layers a run can miss, named in SANDBOX-UNAVAILABLE and warnings. */
enum layer {
	L_USERNS,
	L_MOUNT,
	L_IDMAP,
	L_NETNS,
	L_LANDLOCK,
	L_NNP,
	L_CAPS,
	L_SECCOMP,
	L_RLIMIT,
	L_UID,
	L_NPROC,
	L_CWD,
	L_INIT,
	L_SETUP,
	L__COUNT,
};

/*
 * How the run's first process starts.  It shares sandboxd's memory
 * (CLONE_VM) while sandboxd waits (CLONE_VFORK) until it executes
 * sandboxd-init, as posix_spawn does: a fork would copy sandboxd's page
 * tables and then fault on every page either side writes, which on a
 * virtual machine is most of a run's cost.  The command is started the
 * same way from it.  Each runs on a stack of its own made once
 * (spawn_ctx).  AddressSanitizer cannot follow a stack it did not make:
 * under it, both are plain forks.
 */
#if defined(__SANITIZE_ADDRESS__)
#define SPAWN_SHARED_VM 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SPAWN_SHARED_VM 0
#endif
#endif
#ifndef SPAWN_SHARED_VM
#define SPAWN_SHARED_VM 1
#endif

/* Everything the child needs, prepared before clone: after it only
 * async-signal-safe calls run (no malloc, no stdio, no locks). */
struct child_args {
	const struct mountplan *plan; /* NULL: no namespaces (best-effort) */
	bool root;
	uid_t run_uid;
	gid_t run_gid;
	bool loopback;
	bool best_effort;
	/* Broker mode: the port to listen on and the child's end of the
	 * socketpair the listener goes back to sandboxd on; else -1. */
	uint16_t broker_port;
	int fd_broker;
	const char *cwd;
	char *const *argv;
	char *const *envp;
	const char *path;
	int rl_res[SBXP_RLIM__COUNT];
	uint64_t rl_val[SBXP_RLIM__COUNT];
	const struct sbx_landlock_plan *landlock; /* NULL: skipped */
	const struct sock_fprog *filter;	  /* NULL: skipped */
	/* Without root, the run's own uid and gid maps, written by init
	 * itself (sandboxd waits while it runs); "" with root. */
	char uid_map[32], gid_map[32];
	char *cmd_stack; /* the command's stack top (SPAWN_SHARED_VM) */
	struct mountplan_scratch *scratch; /* the link check's memory */
	int fd_out, fd_err, fd_report, fd_status, fd_init;
	int fd_in;   /* the command's stdin (SBXP_RUN_STDIN), or -1 */
	int fd_sync; /* forked init only: sandboxd's go-ahead, else -1 */
	/* Root: the user namespace the command enters before it drops to
	 * run_uid, the run's own (userns.c, userns_run); else -1. */
	int fd_userns;
	/* A spare applied the plan's head already (mountplan_apply_head). */
	bool plan_head_done;
};

/* Modes whose run has one listener inside its network namespace that
 * spd serves (proto/sandbox.h, SBXP_LISTENER). */
static inline bool has_door(uint32_t net)
{
	return net == SBX_NET_BROKER || net == SBX_NET_PROXY;
}

/* Writes s to the file at path (a /proc file).  Returns 0 or -errno. */
int spawn_write_file(const char *path, const char *s);

/*
 * The run's init: sets the run up, starts the command and becomes
 * sandboxd-init (init.h), which waits for it.  Never returns.
 */
__attribute__((noreturn)) void child_init(const struct child_args *a);

/* child_init as a clone() entry (arg: the struct child_args). */
int child_init_entry(void *arg);

/* Descriptors a spare keeps from sandboxd's table: sandboxd-init's memfd
 * and the idmap user namespaces (the mount plan names them by number). */
#define CHILD_SPARE_KEEP_MAX 8

/* Descriptors the run's message to a spare holds: out, err, report,
 * stdin, the broker's socket, the command's user namespace. */
#define CHILD_SPARE_FDS_MAX 6

/* What sandboxd sends a spare's command process (child_spare_entry):
 * the address of a struct child_args in the shared memory, and what it
 * is for. */
enum child_spare_kind {
	CHILD_SPARE_RUN = 1,  /* the run: take it */
	CHILD_SPARE_HEAT = 2, /* set up ahead for a run like this one */
};
struct child_spare_msg {
	const struct child_args *a;
	uint32_t kind; /* enum child_spare_kind */
};

/* What a spare init is given at its clone (spawn.c, spawn_spare). */
struct child_spare {
	int sock; /* its end of the socket the run arrives on */
	/* sandboxd-init's memfd first, then the idmap namespaces. */
	int keep[CHILD_SPARE_KEEP_MAX];
	size_t nkeep;
	int status_w;	 /* the status pipe's write end, init's */
	int ready[2];	 /* init's word to the command's process (init.h) */
	char *cmd_stack; /* the command's process's stack top */
	char uid_map[32], gid_map[32]; /* "" with root */
	/* The fixed mounts, applied before the wait (NULL: not). */
	const struct mountplan *fixed;
	/* The namespaces it creates itself after its maps (unshare). */
	unsigned long unshare_flags;
};

/*
 * A spare init as a clone() entry (arg: the struct child_spare, read
 * before anything else), pid 1 of its namespaces: writes its uid and gid
 * maps, creates the namespaces not made by its clone (unshare_flags),
 * applies the head of the mount plan that every run's starts with, and
 * closes every descriptor but its socket, the status and ready pipes and
 * the kept ones.  Then it clones the run's command process (CLONE_VM, on
 * cmd_stack) and executes sandboxd-init at once, with the status pipe,
 * for that pid (init.h, FD_READY); it exits instead when any of that
 * failed.  The command's process waits for init's ready byte, sends one
 * byte 'r' (ready) on the socket, and waits for one message: the address
 * of the run's struct child_args in the shared memory, with the run's
 * descriptors (out, err, report, then stdin, the broker's socket and the
 * command's user namespace when the args name them).  It sets the run up
 * as a run's pid 1 would (the host, the rest of the mount plan, the
 * descriptors) and becomes the command (its confinement and exec).  EOF
 * or a bad message: it exits.
 *
 * Before its run, the process may be sent one HEAT (spare.h, the hot
 * spare): args like a run's but without its descriptors (the command's
 * user namespace only).  It then applies the rest of the mount plan,
 * enters the directory and confines itself as for that run, answers 'h'
 * and waits for the run, which then brings only its descriptors, argv
 * and environment (a failure exits instead).  sandboxd waits for the
 * 'h' and does nothing else meanwhile: the process shares its errno
 * (docs/sandbox.md, "The spare"), and the setup fails calls (mkdir of
 * what exists) that sandboxd must not read as its own.
 */
int child_spare_entry(void *arg);

#endif

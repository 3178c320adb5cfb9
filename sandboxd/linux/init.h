/*
 * What sandboxd and a run's init share: the records written on the report
 * and status pipes, and the descriptor numbers they have in the run.
 *
 * A run's init is two programs in turn.  The child sandboxd clones as pid 1
 * of the run sets the run up (spawn.c) and starts the command; then it
 * executes sandboxd-init (init/init.c), a freestanding program of a few
 * pages whose only work is to wait: it writes the command's wait status on
 * the status pipe and exits, which ends every process left in the run's pid
 * namespace.  Executing a small program instead of staying a copy of
 * sandboxd is what lets that child share sandboxd's memory until then
 * (CLONE_VM | CLONE_VFORK) instead of copying it (spawn.c).  A spare's
 * pid 1 (child.h) executes sandboxd-init before its run, once it has
 * cloned the process that sets the run up and becomes the command.
 *
 * Included by freestanding code: kernel and compiler headers only.
 */
#ifndef SPD_SANDBOXD_LINUX_INIT_H
#define SPD_SANDBOXD_LINUX_INIT_H

#include <stdint.h>

/* A record the child writes on the report pipe (setup) or, from init, on
 * the status pipe (the command's wait status).  Small enough that a pipe
 * write of it is atomic. */
enum rec_kind { REC_WARN = 1, REC_FAIL, REC_EXEC, REC_STATUS };
struct rec {
	int32_t kind;
	int32_t layer;
	int32_t err;  /* positive errno */
	int32_t info; /* REC_STATUS: wait status; REC_FAIL mount: step */
};
/* REC_STATUS's layer: init, pid 1 of the run's own pid namespace, had no
 * other child left when it wrote the record.  Every process of a pid
 * namespace descends from its init, so the run was empty: sandboxd can
 * send EXITED without waiting for init's own exit. */
#define REC_STATUS_EMPTY 1
/*
 * After a REC_STATUS_EMPTY record init waits, before it exits, until
 * sandboxd closes its end of the status pipe (POLLERR on FD_STATUS), and
 * at most INIT_LINGER_MS.  init's exit sets off the kernel's teardown of
 * the run's namespaces (the network namespace's above all), about 0.2 ms
 * of two CPUs' time here; sandboxd lets it happen once spd has answered
 * its client and the client has exited, 1 ms after EXITED, as it makes
 * the next spare (main.c, SBXD_SPARE_DELAY_NS), instead of beside that
 * answer
 * (bench/README.md, sixteenth pass).  Nothing runs in the run meanwhile:
 * it is empty, and nothing outside can enter it.  A run that is not empty
 * ends at once, as its leftovers must.
 */
#define INIT_LINGER_MS 2000

/* The fixed descriptors of init and the command after the shuffle: 0 is
 * /dev/null, 1 and 2 the output pipes. */
/* FD_REPORT: the setup's records; close-on-exec in the command.  A run
 * cloned anew hands it to sandboxd-init, which closes it once it handles
 * SIGTERM: until then a pid namespace's init drops a SIGTERM sent from
 * outside, and a run cancelled that early would run on until its kill
 * grace ended (test_sandbox_spawn, cancel_terms_first, under load).  A
 * spare's init has its ready pipe there instead (FD_READY). */
#define FD_REPORT 3
#define FD_STATUS 4 /* init's REC_STATUS */
#define FD_INIT 5   /* sandboxd-init, sealed in a memfd; close-on-exec */
/* Root: the command's user namespace (child_args.fd_userns), which the
 * command enters and closes; close-on-exec in init. */
#define FD_USERNS 6

/* A spare's init (child_spare_entry) is executed before its run, as
 * "sandboxd-init PID ready": once it holds nothing (privileges dropped),
 * it writes INIT_READY_BYTE on FD_READY and closes it; only then can the
 * command's process, waiting beside it, be handed a run. */
#define INIT_ARG_READY "ready"
#define INIT_READY_BYTE 'i'
#define FD_READY 3

/* Exit codes of the child when it did not exec: like a shell's. */
#define CHILD_EXIT_REFUSED 125
#define CHILD_EXIT_NOEXEC 126
#define CHILD_EXIT_NOTFOUND 127

/* sandboxd-init's image, linked into sandboxd (init_blob.S). */
extern const unsigned char sbx_init_elf[];
extern const unsigned char sbx_init_elf_end[];

#endif

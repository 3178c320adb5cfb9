/*
 * The mount plan of a run (docs/design.md, "Sandbox defaults"): a new root on
 * which the system is read-only; writable only the workspace, a private
 * size-capped /tmp, the operator's package caches and the paths the run
 * lists; credential locations and spd's own directories covered by empty
 * read-only mounts; a fresh /proc and a minimal /dev.
 *
 * The plan is built in sandboxd before fork (it allocates, stats paths,
 * and creates placeholders on the host where a hidden path could
 * otherwise be created by the run) and applied in the child inside its
 * new mount namespace with async-signal-safe calls only.
 */
#ifndef SPD_SANDBOXD_LINUX_MOUNT_H
#define SPD_SANDBOXD_LINUX_MOUNT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Mount operations of one plan: the fixed ones (/tmp, /dev and its
 * devices, /proc, /run) plus one or two per listed path and per
 * credential location. */
#define MOUNTPLAN_OPS_MAX 512
/* Hidden directories that hold a writable path (the state dir holding a
 * session's worktree, a config dir holding the state dir): spd hides
 * three of its own and a run request lists few more. */
#define MOUNTPLAN_VEILS_MAX 8
/* The private /tmp: big enough for builds, bounded so that a run cannot
 * fill the host's memory. */
#define MOUNTPLAN_TMP_SIZE "512m"
/* /dev/shm: POSIX shared memory for tools that use it (Python
 * multiprocessing), bounded like /tmp. */
#define MOUNTPLAN_SHM_SIZE "64m"

/* Pathname Unix sockets one plan may cover one by one (an empty file
 * bound over each): the known socket directories are covered whole, so
 * only strays remain, usually a handful — but a busy developer machine
 * (editors, language servers, other agents' daemons) can hold dozens,
 * so the bound leaves room within MOUNTPLAN_OPS_MAX.  A host with more is
 * refused rather than a socket left open. */
#define MOUNTPLAN_SOCKETS_MAX 192

/* Entries of a workspace directory that a read-only bind to a missing
 * dst re-binds into a tmpfs over that directory's view (see
 * mountplan_in.ro_binds): a repository's top level has a few dozen. */
#define MOUNTPLAN_REBIND_MAX 128

/*
 * Hard links planted in a writable path from the host to a file outside
 * it (docs/sandbox.md, "Hard links"): before the pivot, the child walks
 * the workspace and the listed writable paths, and binds each name of a
 * file that has a link outside them read-only over itself.  The walk is
 * bounded so that a huge tree cannot stall every run; past a limit the
 * run is refused (SANDBOX-UNAVAILABLE), never run with a link left
 * writable.
 *
 * Entries (names) walked, all trees together: a large monorepo with its
 * dependencies has a few hundred thousand.
 */
#define MOUNTPLAN_LINKS_ENTRIES_MAX 500000
/* Names bound read-only because their file has a link outside: each is
 * a mount in the run's namespace.  Planted links are rare; a tree with
 * more than this many is refused rather than mounted over name by name. */
#define MOUNTPLAN_LINKS_MAX 1024
/* Directory depth of the walk: one descriptor and one getdents buffer
 * per level. */
#define MOUNTPLAN_LINKS_DEPTH_MAX 256
/* The step mountplan_apply reports when the hard-link check failed: its
 * error is -E2BIG past MOUNTPLAN_LINKS_ENTRIES_MAX, -EMLINK past
 * MOUNTPLAN_LINKS_MAX, -ELOOP past MOUNTPLAN_LINKS_DEPTH_MAX, -EACCES for
 * a directory the run could search but the check cannot list, else the
 * errno of the call that failed. */
#define MOUNTPLAN_STEP_LINKS (-2)

struct mountplan_op;

struct mountplan {
	struct mountplan_op *ops;
	size_t n;
	char **owned; /* strings the ops point to, and their chunks */
	size_t nowned, owned_cap;
	char *chunk; /* the chunk mp_join takes its strings from */
	size_t chunk_left;
	/* NULL-terminated writable paths as seen inside the run, for the
	 * Landlock plan (which mirrors the mount plan). */
	const char **write_paths;
	size_t nwrite;
	/* NULL-terminated paths inside the run that get a read-only bind of
	 * a host path (the resolver's files under /run in host mode, the
	 * read-only binds of mountplan_in), or NULL when none. */
	const char **read_paths;
	size_t nread;
	/* mountplan_in.link_names, when the hard-link check may use it:
	 * the workspace is the only tree it walks and no read-only bind
	 * rebuilt a directory of it.  NULL: the full walk. */
	const char *const *link_names;
	/* With link_names, the directories to bind read-only whole
	 * (mountplan_in). */
	const char *const *link_ro_dirs;
	/* The writable binds' mount points the hard-link check walks, as
	 * seen before the pivot (nlink_roots of them). */
	const char **link_roots;
	size_t nlink_roots;
	/* The first nfixed operations are the fixed ones every plan starts
	 * with (a private /tmp, /dev, /proc): mountplan_build_fixed's. */
	size_t nfixed;
	/* Set by the caller, not by mountplan_build: the hard-link check
	 * must decide from link_names, and fails (-EAGAIN) where it would
	 * walk the tree instead.  A hot spare's plan (spare.h) sets it: a
	 * walk's outcome cannot be checked again when the run arrives. */
	bool links_list_only;
};

struct mountplan_in {
	const char *workspace;	     /* absolute, must exist */
	const char *home;	     /* the operator's HOME or NULL */
	const char *const *writable; /* NULL-terminated, may be NULL */
	/* NULL-terminated, may be NULL.  Each is covered; one that holds
	 * a writable path (a worktree in spd's state dir) is covered by an
	 * empty tmpfs holding only the way down to that path. */
	const char *const *hidden;
	const char *const *readonly;	/* NULL-terminated, may be NULL */
	const char *const *empty_files; /* NULL-terminated, may be NULL */
	/* net=host: /run is still an empty tmpfs, but the resolver's
	 * configuration under it (the target of /etc/resolv.conf,
	 * /run/systemd/resolve) is bound back read-only. */
	bool net_host;
	/* NULL-terminated pathname Unix sockets bound on the host
	 * (layer_unix_sockets), or NULL.  Each one the run could otherwise
	 * reach, i.e. not under a writable path, a private area (/tmp,
	 * /var/tmp, /dev, /proc), /run or a covered directory, gets an
	 * empty read-only file bound over it. */
	const char *const *sockets;
	/* Pairs src, dst, ..., NULL, or NULL: each src (a host directory) is
	 * bound read-only at dst, a path strictly inside the workspace with
	 * no symlink below the workspace, after the workspace bind.  A dst
	 * that exists must be a directory and is covered.  One that does not
	 * is never created on the host: the deepest directory D above it
	 * that exists gets, in the run's view only, a tmpfs holding a
	 * mount point for each of D's entries (each bound back, writable,
	 * symlinks copied), the missing directories and dst; that tmpfs is
	 * then sealed read-only, so a new name directly in D fails with
	 * EROFS instead of vanishing with the run. */
	const char *const *ro_binds;
	/* NULL, or every name below the workspace (relative, canonical,
	 * distinct) whose file had more than one link when spd's watch of
	 * the workspace last looked (SBXP_L_LINKS): the hard-link check
	 * then judges these names instead of walking the workspace, and
	 * walks it in full when one of them cannot be judged. */
	const char *const *link_names;
	/* With link_names, NULL or directories (SBXP_L_LINK_RO_DIRS): each
	 * bound read-only whole, after what is below it; the names below
	 * one are not in link_names. */
	const char *const *link_ro_dirs;
	/* >= 0 when sandboxd runs as root: a user namespace whose mapping
	 * makes the operator's files the run uid's on the writable binds
	 * (MOUNT_ATTR_IDMAP).  -1 otherwise.  Borrowed. */
	int idmap_userns_fd;
};

/*
 * Build the plan for in.  Allocates; on success fills *ret (free with
 * mountplan_free) and returns 0.  Returns -ENOENT when the workspace does
 * not exist, -ENOTDIR when it is not a directory, -SPD_ETOOBIG beyond
 * MOUNTPLAN_OPS_MAX, -E2BIG when more than MOUNTPLAN_SOCKETS_MAX sockets
 * would need covering (the run must then be refused), -EINVAL for a
 * read-only bind whose dst is not inside the workspace, crosses a symlink
 * or is not a directory, or whose src is not a directory, -ENOMEM.  Paths are taken as given (absolute,
 * without "..": sandboxd's caller resolved them).  May create empty
 * directories (0700) on the host where a hidden path is missing below a
 * writable path.
 */
int mountplan_build(const struct mountplan_in *in, struct mountplan *ret);
void mountplan_free(struct mountplan *p);

/* The hard-link check's memory, made once and reused by every apply in
 * the same address space (NULL when it cannot be made). */
struct mountplan_scratch;
struct mountplan_scratch *mountplan_scratch_new(void);
void mountplan_scratch_free(struct mountplan_scratch *s);

/*
 * Apply the plan in the calling process, which must be alone in a fresh
 * mount namespace with CAP_SYS_ADMIN there, bind read-only every name in
 * the workspace and listed writable paths whose file has a hard link
 * outside them, then pivot into the new root and drop the old one.
 * Async-signal-safe: the link check works in scratch, or without it in
 * memory mmap'd and unmapped before it returns; only one apply may use a
 * scratch at a time.  Returns 0, or -errno with *ret_step set to the index
 * of the failing operation, MOUNTPLAN_STEP_LINKS for the link check, or
 * -1 for the fixed steps around the plan.
 */
int mountplan_apply(const struct mountplan *p,
		    struct mountplan_scratch *scratch, int *ret_step);

/*
 * mountplan_apply in two halves, for a run's init made ahead of its run
 * (spawn.h, the spare): the head (the namespace made private, the base,
 * the host's root bound read-only, the fixed operations) needs nothing of
 * the run; the tail does the rest.  Each as mountplan_apply.
 */
int mountplan_apply_head(const struct mountplan *p, int *ret_step);
int mountplan_apply_tail(const struct mountplan *p,
			 struct mountplan_scratch *scratch, int *ret_step);

/* A plan of the fixed operations alone (what mountplan_apply_head of any
 * plan applies).  Returns 0 or -ENOMEM; free with mountplan_free. */
int mountplan_build_fixed(struct mountplan *ret);

/* Whether a and b begin with the same fixed operations. */
bool mountplan_same_head(const struct mountplan *a, const struct mountplan *b);

/* Whether a and b are the same plan: the same operations, in the same
 * order, and the same lists (paths, the hard-link check's names). */
bool mountplan_same(const struct mountplan *a, const struct mountplan *b);
/*
 * A hash of what the host's file system holds where the plan looks
 * beyond its fixed head: for every host path an operation binds from or
 * mounts over, and every name of the hard-link check's list, its
 * lstat's device, inode, type and (not for a directory) link count, or
 * its error.  Two plans that are mountplan_same and fingerprint alike
 * were built over the same files: a plan applied at the first is what
 * one applied at the second would give, except for a file removed (and
 * its inode number reused) while a mount covered it, which detaches
 * that mount and is seen in the namespace's mountinfo instead.
 */
uint64_t mountplan_fingerprint(const struct mountplan *p);
/* h continued with one more host path's lstat, as mountplan_fingerprint
 * takes each (a hot spare's directory, spare.c). */
uint64_t mountplan_fingerprint_add(uint64_t h, const char *path);
/* A short description of operation i ("bind /work (rw)") for errors.
 * Returns a pointer into static or plan storage; never NULL. */
const char *mountplan_describe(const struct mountplan *p, int i);

#endif

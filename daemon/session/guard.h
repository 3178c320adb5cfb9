/*
 * The git guard and integrity hashing of a session's guarded inputs.
 *
 * At session start spd records the inputs an agent must not change behind
 * the operator's back, in two sets:
 *  - the git set, in the main repository's git dir (a linked worktree's
 *    .git is a file pointing into it, so the set is always the main
 *    repository's): config, HEAD, hooks/ and info/ (recursively), and every
 *    branch and tag (loose refs and packed-refs) except the session's own
 *    branch.  A change is GIT-CHANGED.
 *  - the protected files of the checkout the agent works in: the roots
 *    of the guarded classes of daemon/policy/protected.h (the project's
 *    .spd.conf, CI, agent, build and hook configuration, files that run
 *    on the host), the list the policy classifies writes by.  A change is
 *    INTEGRITY.
 *
 * After every command the sets are checked again.  A full scan lstat()s
 * the guarded entries and re-hashes (BLAKE2b)
 * only those whose stat key (inode, size, mode, mtime, ctime) moved, or
 * whose timestamps are too recent to trust (a write within the same clock
 * tick as the snapshot leaves the stat key unchanged — git's "racy" case).
 * A file whose metadata moved but whose content did not (touch) is not a
 * finding.  An entry that appears or disappears is.
 *
 * A full scan costs one lstat() per loose ref (about 3 ms for 1,000 refs
 * on a slow VM), so a check does one only when something may have
 * changed.  Each guard holds an inotify instance watching every guarded
 * file (by inode, so a write through another hard link is seen) and every
 * directory that holds guarded entries (the git dir, refs/, and every
 * directory under refs/heads/, refs/tags/, hooks/ and info/; the checkout and each directory on the
 * way to a protected path, and the protected directories' trees).  Events
 * on entries that are not guarded (the index, objects, the agent's own
 * files next to .spd.conf, the session's own ref) are ignored.  A check
 * then:
 *  - reads the queued events without blocking; any relevant event, an
 *    overflow of the queue, or a previous check that was not clean →
 *    a full scan, which also adds watches for new directories and files;
 *  - otherwise lstat()s one slice of the snapshot, a
 *    GUARD_FULL_SCAN_CHECKS-th of its entries in turn, and does the full
 *    scan only if an entry there moved or is racy.
 * A guard for which inotify is unavailable (no instance left, see
 * GUARD_INOTIFY_MAX in guard.c; a watch that cannot be added; more than
 * GUARD_WATCHES_MAX watches; cfg->stat_only) does the full scan on every
 * check, as if nothing were watched.
 *
 * The window this leaves.  A change that raises no inotify event is found
 * by the first check whose slice holds the changed entry: at most
 * GUARD_FULL_SCAN_CHECKS checks after it was made (counted in checks, not
 * time: the guard is only asked after a command, so the bound is in
 * commands), and the finding may then be reported after a later command
 * than the one that made it.  Changes without an event are:
 *  - stores through a writable MAP_SHARED mapping of a guarded file while
 *    the mapping (or any other reference to that open file) is still
 *    held.  Dropping the last reference (munmap and close, or exit of the
 *    process, which happens before its parent can reap it) raises
 *    IN_CLOSE_WRITE, so only a mapping held by a process that outlives
 *    the command opens this window.  The store moves mtime (on the first
 *    write fault of a clean page), which the slice sees — except on
 *    tmpfs, which moves no timestamp for stores through a mapping: there
 *    such a store is found only while the file is racy, as before;
 *  - renaming or mounting over a directory above the watched ones (the
 *    checkout's parent), or writes by another host on a network
 *    filesystem;
 *  - a change made with the inotify queue full is not lost: the overflow
 *    is itself an event and forces a full scan.
 *
 * No libgit2 here: reading the ref files directly is both faster and sees
 * exactly what is on disk, including a packed-refs edit.
 */
#ifndef SPD_DAEMON_GUARD_H
#define SPD_DAEMON_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest path the guard names; longer entries are refused (-ENAMETOOLONG)
 * rather than truncated, so a finding always names a real path. */
#define GUARD_PATH_MAX 4096
/*
 * Most entries one guard holds.  A repository with more refs, hooks or CI
 * files than this is refused (-E2BIG) instead of letting a planted tree of
 * millions of files make every command slow.
 */
#define GUARD_ENTRIES_MAX 200000
/*
 * A check that saw no event stats this fraction of the snapshot, so each
 * guarded entry is stat()ed at least every GUARD_FULL_SCAN_CHECKS checks:
 * the bound on how late a change without an inotify event (a store
 * through a shared mapping that is still held) is found.  10 keeps a
 * quiet check of 1,000 loose refs near 0.3 ms; the bound is in checks,
 * not seconds, because the guard is only consulted after a command and a
 * bound in time would make every check after a slow command a full scan.
 */
#define GUARD_FULL_SCAN_CHECKS 10
/* Length of a guard digest (BLAKE2b-256). */
#define GUARD_DIGEST_LEN 32

enum guard_set {
	GUARD_SET_GIT,	     /* a change here is GIT-CHANGED */
	GUARD_SET_PROTECTED, /* a change here is INTEGRITY */
};

/* What a scan found.  path is the changed path: ".git/config",
 * ".git/hooks/pre-commit", ".git/refs/heads/main",
 * ".git/packed-refs:refs/tags/v1", or relative to the checkout for a
 * protected file (".spd.conf", ".github/workflows/ci.yml"). */
struct guard_finding {
	enum guard_set set;
	char path[GUARD_PATH_MAX];
	char what[16]; /* "changed", "added" or "removed" */
};

struct guard_config {
	/* The main repository's git dir (git_repository_commondir()).
	 * Required. */
	const char *gitdir;
	/* The checkout whose protected files are guarded (the session's
	 * worktree, or the operator's checkout in place); NULL: none. */
	const char *workdir;
	/* The session's own branch as a full ref name
	 * ("refs/heads/spd/feature"); its moves are spd's own and never a
	 * finding.  NULL: none. */
	const char *own_ref;
	/* Protected paths relative to workdir (files or directories), NULL
	 * terminated; NULL: protected_roots() of workdir, the policy's
	 * list. */
	const char *const *protected_paths;
	/* Never use inotify: every check is a full lstat() scan.  For tests
	 * of the fallback, and for a git dir or checkout on a network
	 * filesystem, where another host's writes raise no event. */
	bool stat_only;
};

struct guard;

/*
 * Snapshot the guarded inputs described by cfg (its strings are copied).
 * Returns 0 and *ret (free with guard_free), -ENOENT when gitdir is not a
 * directory, -E2BIG past GUARD_ENTRIES_MAX, -ENAMETOOLONG, -ENOMEM or
 * another -errno from reading.
 */
int guard_new(const struct guard_config *cfg, struct guard **ret);

/*
 * Check again (see above for when that is a full scan) and compare with
 * the snapshot.  Returns 0 when nothing
 * guarded changed (the snapshot's stat keys are refreshed), 1 when
 * something did (*ret_finding names the first changed path in path order;
 * the snapshot is left as it was, so a later scan finds it again), or
 * -errno when the scan itself failed (treat as a finding: the guard
 * could not vouch for the inputs).  ret_finding may be NULL.
 */
int guard_check(struct guard *g, struct guard_finding *ret_finding);

/*
 * Whether g watches with inotify (false: every check is a full scan, see
 * above).  NULL is allowed (false).
 */
bool guard_watching(const struct guard *g);

/*
 * Number of guard_check() calls of g that did a full scan (for tests and
 * the benchmark).  NULL is allowed (0).
 */
size_t guard_full_scans(const struct guard *g);

/*
 * spd itself created, moved or deleted the loose ref refname (a branch of
 * another session): take its current state into the snapshot so that it
 * is not a finding.  Only that one ref is refreshed; anything else that
 * changed is still found by the next guard_check.  Returns 0, -EINVAL for
 * a refname outside refs/heads/ and refs/tags/, or -errno.
 */
int guard_note_ref(struct guard *g, const char *refname);

/*
 * A digest over every entry's path and content hash, stable across
 * scans while nothing changes.  Stored with a session so that a restarted
 * spd can tell whether the inputs moved while it was not running.
 */
void guard_digest(const struct guard *g, uint8_t ret[GUARD_DIGEST_LEN]);
/*
 * The digest as spd stored it before the absent entries' hash was kept
 * across scans (2026-12): each absent entry with a zero hash.  A session
 * whose digest was stored after a full scan by such an spd is checked
 * against this one too at the restart after the upgrade: it differs from
 * guard_digest only in what it says of absent entries, which their keys
 * and types already say.
 */
void guard_digest_legacy(const struct guard *g, uint8_t ret[GUARD_DIGEST_LEN]);

/* Number of entries guarded (for status output and the benchmark). */
size_t guard_count(const struct guard *g);

/* Free g; NULL is allowed. */
void guard_free(struct guard *g);

#endif

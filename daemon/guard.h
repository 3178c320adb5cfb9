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
 *  - the protected files of the checkout the agent works in: the project's
 *    .spd.conf, CI and agent configuration.  A change is INTEGRITY.
 *
 * After every command the sets are scanned again.  A scan is cheap on a
 * big repository: it lstat()s the guarded entries and re-hashes (BLAKE2b)
 * only those whose stat key (inode, size, mode, mtime, ctime) moved, or
 * whose timestamps are too recent to trust (a write within the same clock
 * tick as the snapshot leaves the stat key unchanged — git's "racy" case).
 * A file whose metadata moved but whose content did not (touch) is not a
 * finding.  An entry that appears or disappears is.
 *
 * No libgit2 here: reading the ref files directly is both faster and sees
 * exactly what is on disk, including a packed-refs edit.
 */
#ifndef SPD_DAEMON_GUARD_H
#define SPD_DAEMON_GUARD_H

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
	 * terminated; NULL: guard_default_protected(). */
	const char *const *protected_paths;
};

struct guard;

/*
 * The default protected paths (a NULL-terminated static list): the
 * project's .spd.conf, CI configuration and agent configuration.  Used
 * until daemon/protected.h provides the list shared with the policy.
 */
const char *const *guard_default_protected(void);

/*
 * Snapshot the guarded inputs described by cfg (its strings are copied).
 * Returns 0 and *ret (free with guard_free), -ENOENT when gitdir is not a
 * directory, -E2BIG past GUARD_ENTRIES_MAX, -ENAMETOOLONG, -ENOMEM or
 * another -errno from reading.
 */
int guard_new(const struct guard_config *cfg, struct guard **ret);

/*
 * Scan again and compare with the snapshot.  Returns 0 when nothing
 * guarded changed (the snapshot's stat keys are refreshed), 1 when
 * something did (*ret_finding names the first changed path in path order;
 * the snapshot is left as it was, so a later scan finds it again), or
 * -errno when the scan itself failed (treat as a finding: the guard
 * could not vouch for the inputs).  ret_finding may be NULL.
 */
int guard_check(struct guard *g, struct guard_finding *ret_finding);

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

/* Number of entries guarded (for status output and the benchmark). */
size_t guard_count(const struct guard *g);

/* Free g; NULL is allowed. */
void guard_free(struct guard *g);

#endif

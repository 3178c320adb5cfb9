/*
 * The hard-link check's shortcut (docs/sandbox.md, "Hard links"): spd
 * keeps, per workspace, an inotify watch on every directory and regular
 * file below it and the list of names whose file has more than one link,
 * so that a run can hand sandboxd that list instead of having it walk the
 * whole workspace (SBXP_RUN_LINKS_LISTED).
 *
 * What the watch sees.  A name planted in the workspace (link(2), rename
 * into it, a new directory) raises IN_CREATE or IN_MOVED_TO on its
 * directory; a link made elsewhere to a file of the workspace raises
 * IN_ATTRIB on the file itself (the kernel notifies the inode whose link
 * count changed, not its directories); a name moved out of the workspace
 * raises IN_MOVED_FROM with no IN_MOVED_TO of the same cookie.  So the
 * list stays complete as long as every event since the walk was one of: a
 * new regular file (its link count is read after a watch is on it, and it
 * is listed when above one), a new directory (watched, then walked), an
 * attribute change of a file (its link count is read again at the name the
 * watch knows, and the name listed when above one; a name that leads to
 * another file now was taken from it, and a file with more than one link
 * had all its names listed already), a deletion, a rename inside the
 * workspace (the entry's node takes the new name and place, listed names
 * below a directory follow it, a file's link count is read again: an
 * editor's save, git's lock files, mv).  An event whose directory the
 * watch's paths no longer lead to (a directory above it renamed later in
 * the queue) is applied again once the queue is read.  Anything else — a
 * name that left and did not arrive, an event that still does not apply,
 * the workspace itself moved, an overflowed queue — drops the state: that
 * run and the runs until a new walk (on a worker thread) has finished get
 * the full walk in sandboxd.  So does a workspace spd cannot watch: more
 * entries than the watches it may take (LINKWATCH_WATCHES_RESERVE), an
 * unreadable file, no inotify.
 *
 * When.  A watched workspace's queue is read on spd's loop a few
 * milliseconds after events come (LW_BG_DELAY_MS in linkwatch.c), as
 * well as by each run: what a git commit, a build or an editor changed is
 * applied while the agent's model thinks, and the run reads what is left.
 * A state that must go goes then, and its new walk starts at once.  A
 * read in the background may leave a rename half-read for the next one;
 * a run's may not.
 *
 * The window.  The list is as of the moment linkwatch_names() reads the
 * queue, after the request arrived; a link made between then and the
 * run's mount plan (about a millisecond) to a file the list does not hold
 * is not seen by that run.  The full walk has the same kind of window
 * (between its visit of a directory and the run's exec), and a link made
 * while the run runs is beyond both: the check is of the links that
 * exist before the run is asked for.  A link made before the request
 * returned from link(2) before spd read the queue, and inotify queues an
 * event inside the system call, so it is always seen.
 */
#ifndef SPD_DAEMON_LINKWATCH_H
#define SPD_DAEMON_LINKWATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

/* Workspaces watched at once: an agent's sessions and the operator's
 * checkouts.  The least recently used one is dropped past this (with
 * 8, eight sessions and the operator's checkout in turn dropped one at
 * every run, whose next run then had sandboxd walk it). */
#define LINKWATCH_WORKSPACES_MAX 16
/* Watches left to the operator's other programs (editors, build tools,
 * the integrity guard) out of fs.inotify.max_user_watches: a workspace
 * that would need more is not watched (the full walk, as before). */
#define LINKWATCH_WATCHES_RESERVE 16384
/* Directory depth of spd's walk (as sandboxd's, MOUNTPLAN_LINKS_DEPTH_MAX). */
#define LINKWATCH_DEPTH_MAX 256

struct linkwatch;

/*
 * A cache of watched workspaces whose walks run on loop's thread pool.
 * Returns 0 and *ret (free with linkwatch_free), or -ENOMEM.
 */
int linkwatch_new(uv_loop_t *loop, struct linkwatch **ret);

/*
 * *slot, made on loop the first time (NULL loop, or out of memory: NULL,
 * and the runs get sandboxd's walk).  spd keeps one in spd->linkwatch.
 */
struct linkwatch *linkwatch_get(struct linkwatch **slot, uv_loop_t *loop);

/*
 * Drop every watch.  A walk still running on the thread pool finishes
 * there and is freed by its completion callback on the loop, which must
 * run again for that (uv_run until no request is left).  NULL is fine.
 */
void linkwatch_free(struct linkwatch *lw);

/* What a run gets of a watched workspace (linkwatch_names): lists
 * relative to it, NULL-terminated, in strcmp order.  ro_dirs may be NULL
 * (none); the names below its directories are not in names, so the two
 * go to sandboxd together or not at all. */
struct linkwatch_list {
	const char *const *names;   /* of multi-linked files */
	const char *const *ro_dirs; /* to bind read-only whole */
};

/*
 * The names below workspace (absolute, resolved) whose file has more
 * than one link, for a run about to start; past SBXP_LINKS_EACH_MAX such
 * names with a link outside, directories to bind whole instead of the
 * names below them (docs/sandbox.md, "Hard links").  Returns 1 and *ret,
 * owned by lw and valid until the next call on lw (a list longer than
 * the message holds, SBXP_LINKS_MAX, is dropped by sbx_run: the walk); 0
 * when there is no complete list (not watched yet, something happened
 * that the watch cannot account for, more than 131,072 names listed): the
 * run must then have sandboxd walk
 * the workspace, and a walk is started so that a later run can have the
 * list (on a thread of its own at nice 19, held by one of the pool's;
 * while two other walks run, it starts when one of them ends).  Never
 * fails otherwise.
 */
int linkwatch_names(struct linkwatch *lw, const char *workspace,
		    struct linkwatch_list *ret);

/*
 * What changed in workspace: the names (files, or directories whose whole
 * tree may have changed: made, moved in, deleted) events were about since
 * *ret_since (CLOCK_MONOTONIC ns, as uv_hrtime: the last call for the
 * workspace, or when its watch was complete), relative, NULL-terminated
 * (*ret and its strings the caller's: strv_free_array), the worktree's
 * .git left out.  Returns 1 with the list, or 0 when the watch cannot say
 * (not watched yet, more than it keeps): the caller reads the whole
 * workspace, and the next call can say again.  A change made before
 * *ret_since is not in the list: the caller knows whether one can have
 * been.
 */
int linkwatch_changes(struct linkwatch *lw, const char *workspace, char ***ret,
		      uint64_t *ret_since);

/*
 * Start watching workspace ahead of its first run (a session's workspace
 * when the session starts): the walk that linkwatch_names would start,
 * on the thread pool, without a list asked for.  Nothing when it is
 * watched or being walked already.
 */
void linkwatch_prime(struct linkwatch *lw, const char *workspace);

/*
 * linkwatch_prime, with the change log (linkwatch_changes) starting at
 * since_rt (CLOCK_REALTIME ns) rather than at the walk's start: the walk
 * logs every entry stamped (ctime) since then, as it logs what changes
 * while it runs, so that what changed while spd was not watching (spd
 * stopped: the first checkpoint after a restart) is in the log and
 * *ret_since says so.  The kernel sets a ctime at every change to a
 * file's content, mode, links or name, and to a directory's entries; no
 * system call sets it back.  Nothing when the workspace is watched or
 * being walked already (that log's start stands), nor when since_rt is
 * before the boot.
 */
void linkwatch_prime_since(struct linkwatch *lw, const char *workspace,
			   uint64_t since_rt);

/* Walks started (for tests and the bench: a workspace watched from the
 * first run on is walked once). */
unsigned long linkwatch_walks(const struct linkwatch *lw);

/* Events read from the watched workspaces' queues: by the runs'
 * linkwatch_names (run), or in the background, on the loop, shortly after
 * they came (!run: what a run no longer waits for).  For tests and the
 * bench. */
unsigned long linkwatch_events(const struct linkwatch *lw, bool run);

/* The inotify watches the watched workspaces hold now (each state's
 * entries whose watch is still on: a deleted file's goes).  For tests. */
size_t linkwatch_watches(const struct linkwatch *lw);

/* Whether a walk of workspace is running on the thread pool (tests and
 * the bench wait for it to finish). */
bool linkwatch_walking(const struct linkwatch *lw, const char *workspace);

/* Whether a walk of workspace is put off (LW_BG_REWALK_RATIO): its state
 * was dropped in the background and no walk runs yet.  For tests. */
bool linkwatch_put_off(const struct linkwatch *lw, const char *workspace);

/* Whether the walk of workspace running, or else the last one done, was
 * the one walk again at once before its time (LW_BG_REWALK_RATIO).  For
 * tests. */
bool linkwatch_retried(const struct linkwatch *lw, const char *workspace);

#endif

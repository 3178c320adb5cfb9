/*
 * Sessions: an agent's unit of work on one repository and feature.
 *
 * The store keeps every session in SQLite (state_dir/sessions.db) and,
 * for the active ones, the git guard's snapshot in memory.  A session in
 * worktree mode (the default) works in a libgit2 worktree under
 * state_dir/worktrees/<id> on the new branch spd/<feature> made from the
 * repository's HEAD; in in-place mode it works in the operator's clean
 * checkout.  The agent's token is 32 random bytes shown once; the store
 * keeps only its BLAKE2b hash.
 *
 * spd's git operations here never run hooks (libgit2 has none), never
 * consult an fsmonitor (libgit2 1.5 does not implement core.fsmonitor)
 * and never name a remote.
 *
 * Everything runs on the loop thread and blocks on the disk, except a
 * start's checkout and walks (session_start_work), which spd runs on its
 * thread pool.  Error texts for a person are kept in the store:
 * session_store_error() after a failed call.
 */
#ifndef SPD_DAEMON_SESSION_H
#define SPD_DAEMON_SESSION_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/session/guard.h"

/* A session id: 8 random bytes in hex, URL- and argv-safe (never starts
 * with '-'). */
#define SESSION_ID_LEN 16
/* A session token: 32 random bytes in hex. */
#define SESSION_TOKEN_LEN 64
/* Its name in the redaction set (secrets_add_minted), with the id. */
#define SESSION_TOKEN_SECRET "session-token.%s"
/* Longest feature name: it becomes a branch and a directory name. */
#define SESSION_FEATURE_MAX 64
/* Largest diff returned: a reply must fit in a frame (RPC_FRAME_MAX)
 * with room for its JSON escaping. */
#define SESSION_DIFF_MAX (384 * 1024)
/* Most checks a project may configure: each is a sandboxed run. */
#define SESSION_CHECKS_MAX 32
/* Most words in a check's run line and the longest line. */
#define SESSION_ARGV_MAX 256
#define SESSION_RUN_LINE_MAX 4096
/* Held-out checks: most files and bytes copied into the state dir. */
#define SESSION_HELDOUT_FILES_MAX 10000
#define SESSION_HELDOUT_BYTES_MAX (256 * 1024 * 1024)
/* Where the held-out files appear inside the worktree during a
 * verification run (relative to the worktree). */
#define SESSION_HELDOUT_MOUNT ".spd-heldout"
/*
 * In place: most credential-looking ignored files made to read as empty
 * (each is a mount in the sandbox, and a run has SBXP_PATHS_MAX paths in
 * all), and most directory entries walked to find them.
 */
#define SESSION_EMPTY_FILES_MAX 48
#define SESSION_SCAN_MAX 200000
/*
 * In place: the git-ignored entries hidden from one run are each a
 * mount, and a run has SBXP_PATHS_MAX paths in all.  This many are kept
 * for the rest (spd's three directories, the read-only git dir, the
 * operator's writable paths, and CONFIG_HIDDEN_MAX (8) for the
 * operator's [sandbox] hidden ones); the credential files above take
 * theirs; the ignored entries get what is left (48 without credential
 * files).
 * An ignored directory counts once, however much it holds.  A checkout
 * with more top-most ignored entries has its runs refused rather than
 * run with some of them readable.
 */
#define SESSION_RUN_PATHS_RESERVED 16
/* Most dirty paths named when an in-place start is refused. */
#define SESSION_DIRTY_SHOWN 20

enum session_mode { SESSION_MODE_WORKTREE, SESSION_MODE_IN_PLACE };
enum session_state {
	SESSION_ACTIVE,
	SESSION_ENDED,
	SESSION_ATTEMPT_ENDED, /* a finding ended it: calls are refused */
};

/* A copy of one session's record (session_info_free). */
struct session_info {
	char id[SESSION_ID_LEN + 1];
	char *repo;   /* the repository's working directory */
	char *gitdir; /* its (common) git dir */
	char *feature;
	enum session_mode mode;
	char *worktree; /* where the agent works (the run's workspace) */
	char *branch;	/* "spd/<feature>"; in place: the checkout's branch or
			   NULL when detached */
	char base[41];	/* base commit, hex */
	enum session_state state;
	char *finding_code; /* "GIT-CHANGED", "INTEGRITY", or the code given
			       to session_end_attempt; NULL: none */
	char *finding_path; /* the path the finding names (or the why) */
	int64_t created;    /* Unix seconds */
	int64_t ended;	    /* Unix seconds; 0 while not ended */
	unsigned policy_blocks;
	unsigned outside_changes;
	unsigned commands;
	bool heldout; /* held-out checks are sealed for it */
};

struct session_store;

/*
 * Journal hook: called for every session event (start, end, finding,
 * verdict, refusal).  kind is "session.start", "session.end",
 * "session.finding", "session.verify", ...; detail_json is a JSON object
 * text.  The lead wires it to journal_append(); NULL disables it.
 */
typedef void (*session_journal_fn)(void *data, const char *session_id,
				   const char *kind, const char *summary,
				   const char *detail_json);

/*
 * Open (creating, 0600) state_dir/sessions.db and load every session.
 * The guard of each active session is rebuilt; when the guarded inputs
 * differ from the digest stored when the session was last seen (they
 * changed while spd was not running) the session ends with INTEGRITY.
 * Returns 0 and *ret, or -errno (-EIO for a database error).
 */
int session_store_open(const char *state_dir, struct session_store **ret);
/* Close the database and free everything; NULL allowed.  Worktrees are
 * left in place for the next start. */
void session_store_free(struct session_store *s);
/* session_store_free, then fn(data) once the store is freed: at once, or
 * after the last step on another thread ended (their ends still journal,
 * so spd closes its journal in fn).  s NULL: fn(data) now. */
void session_store_free_then(struct session_store *s, void (*fn)(void *data),
			     void *data);
/* Set the journal hook.  What the store journaled before it had one (the
 * findings session_store_open made) is handed to fn now, in order. */
void session_store_set_journal(struct session_store *s, session_journal_fn fn,
			       void *data);
/* Called once whenever a session's attempt ends (a finding, three
 * denials, session_end_attempt) or the session ends, after the state
 * changed: id and code ("INTEGRITY", "POLICY-DENIED", "ENDED"...) are
 * borrowed for the call.  NULL fn: none. */
typedef void (*session_ended_fn)(void *data, const char *session_id,
				 const char *code);
void session_store_set_ended_hook(struct session_store *s, session_ended_fn fn,
				  void *data);
/* Journal session events to j (journal_append with actor "spd"); NULL
 * stops journaling.  The usual way to set the hook above. */
struct journal;
void session_store_use_journal(struct session_store *s, struct journal *j);
/* A sentence saying why the last failed call failed ("" when none);
 * owned by the store, valid until the next call. */
const char *session_store_error(const struct session_store *s);

/*
 * True when feature is a safe ref component: 1..SESSION_FEATURE_MAX
 * characters of [A-Za-z0-9._-], not starting with '.' or '-', no "..",
 * not ending in ".lock" or '.', and refs/heads/spd/<feature> is a valid
 * ref name to libgit2.
 */
bool session_feature_valid(const char *feature);

/*
 * Start a session on the repository containing repo (a path inside a
 * non-bare checkout) for feature.  Worktree mode: creates branch
 * spd/<feature> at HEAD (-EEXIST when it exists) and its worktree.  In
 * place (in_place true): refuses a checkout with staged, unstaged or
 * untracked (not ignored) changes with -EBUSY, session_store_error()
 * naming them.  -EINVAL: bad feature; -ENOENT: no repository or no commit
 * at HEAD.  On success returns 0, *ret_info (caller frees) and the token
 * in ret_token (SESSION_TOKEN_LEN + 1 bytes; shown once, never stored).
 */
int session_start(struct session_store *s, const char *repo,
		  const char *feature, bool in_place,
		  struct session_info **ret_info, char *ret_token);

/*
 * The same start in three steps, so that no other call waits for its
 * checkout or its walks:
 * - session_start_begin, on the loop: the feature name, the repository,
 *   the new record and, for a worktree, its branch (so that a second
 *   start of the feature is refused at once, and the other sessions'
 *   guards know the branch is spd's).  0 and *ret, or the error as
 *   session_start's (-ESHUTDOWN once the store is closing).
 * - session_start_work, once, on any thread: the worktree's checkout, or
 *   the in-place checkout's clean check and walks; the .spd.conf
 *   snapshot; the guard's first snapshot.  It reads of the store only
 *   what stays while it is open, and touches nothing else of it.
 * - session_start_end, on the loop: the row, the list and the journal's
 *   record, and the caller's info and token as session_start gives them;
 *   or, when a step failed, what was made undone and the error (in
 *   session_store_error()).  Frees the start.  A store freed while
 *   starts are in flight waits for them: each then ends with
 *   -ESHUTDOWN, what it made undone, and the last frees the store.
 */
struct session_start;
int session_start_begin(struct session_store *s, const char *repo,
			const char *feature, bool in_place,
			struct session_start **ret);
void session_start_work(struct session_start *st);
int session_start_end(struct session_start *st, struct session_info **ret_info,
		      char *ret_token);

/* A copy of a session: 0 and *ret (caller frees) or -ENOENT. */
int session_get(struct session_store *s, const char *id,
		struct session_info **ret);
/* Every session, newest first: 0, *ret (an array of *ret_n pointers;
 * session_info_list_free) or -ENOMEM. */
int session_list(struct session_store *s, struct session_info ***ret,
		 size_t *ret_n);
void session_info_free(struct session_info *i);
void session_info_list_free(struct session_info **v, size_t n);
/*
 * Starts libgit2 now rather than at the next session's first run, which
 * would otherwise wait for it (about 11 ms of CPU here: it parses the
 * system's CA bundle).  For spd's start when recent sessions will run
 * again; an spd without sessions keeps it unstarted (and its resident
 * size 3 MiB smaller).  0 or -EIO.
 */
int session_git_warm(struct session_store *s);
/*
 * For the watch of a worktree session's workspace made at spd's start
 * (linkwatch_prime_since): the time (CLOCK_REALTIME ns, less
 * SESSION_KNOWN_MARGIN_NS) as of which spd's index of worktree on disk
 * holds its files, so that the first
 * checkpoint after a restart reads only what was stamped since; 0 when
 * unknown (no such session, no index written yet): the whole worktree is
 * read.  A clock set back while spd was stopped can hide a change made
 * after it from that checkpoint (as from git's own stat cache); the end
 * of the session reads the whole worktree.
 */
/*
 * At spd's start, for a recent worktree session (agent_prime_recent):
 * spd's index of worktree read from disk and the tree it holds made, so
 * that the first checkpoint after the restart applies the changes to
 * them instead of reading and writing them whole on a run's path (about
 * 30 ms for 10,000 files).  Nothing for any other workspace.
 */
void session_checkpoint_warm(struct session_store *s, const char *worktree);
#define SESSION_KNOWN_MARGIN_NS (1000 * 1000)
uint64_t session_worktree_known(struct session_store *s, const char *worktree);
/*
 * The workspaces of the active sessions last used (started, or a command
 * run) at or after since (Unix seconds), the most recently used first, at
 * most max: 0 and *ret (a NULL-terminated array, strv_free_array),
 * -ENOMEM or -EIO.
 */
int session_recent_workspaces(struct session_store *s, int64_t since,
			      size_t max, char ***ret);
/* The record as a JSON object (new reference; NULL on ENOMEM). */
json_t *session_info_json(const struct session_info *i);

/*
 * End a session.  In a worktree: the agent's commits are taken onto the
 * branch (session_sync), then what it left uncommitted is committed there
 * by spd (after the secret scan) unless discard, and only then is the
 * worktree pruned and removed (the branch is kept).  Its held-out files
 * are deleted, its token no longer authenticates.  An attempt-ended
 * session can be ended too.  *ret_report (may be NULL; caller frees) says
 * what became of uncommitted work: {"committed", "files"} or
 * {"discarded"}.  Returns 0; -ENOENT; -EALREADY when it had already
 * ended; -EBUSY while a run of the session is in flight; -EACCES when a
 * known secret is in the agent's commits or its uncommitted work (the
 * session stays, with its worktree; the store's error names the file);
 * -EXDEV when the agent's branch does not descend from the base (it
 * stays too); -EIO when the worktree could not be removed (ended all
 * the same).
 */
int session_end(struct session_store *s, const char *id, bool discard,
		json_t **ret_report);
/*
 * The first half of session_end, for an end whose checks run before the
 * worktree goes: in a worktree, the agent's commits and stash are taken
 * onto the branch and what it left uncommitted is committed there (or,
 * with discard, dropped), and the session stays as it was; nothing in
 * place.  session_end does the same again (finding nothing new unless
 * the agent worked meanwhile) and ends it.  Returns 0 and *ret_report
 * (as session_end's, NULL when nothing is to be said), or session_end's
 * refusals (-EBUSY, -EACCES, -EXDEV, -EALREADY, -ENOENT) with the
 * store's error.
 */
int session_end_prepare(struct session_store *s, const char *id, bool discard,
			json_t **ret_report);
/*
 * An end's read of the whole worktree (a stat of every file, and what
 * changed hashed: 0.1-0.3 s for 10,000 files), off the loop.  Begin, on
 * the loop: 0 and *ret, to be read with session_end_read_work on
 * another thread and then given to session_end_read_end on the loop; 0
 * and *ret NULL when there is nothing to read ahead (not a worktree
 * session that is live and idle: session_end says why, or reads itself);
 * -EBUSY when another end is reading it.  Meanwhile the session takes
 * no run, file tool or checkpoint (session_usable: -EBUSY).  The end
 * returns 0 (the read stands for the worktree, for the session_end or
 * session_end_prepare that follow at once, until session_end_read_drop
 * or a run or file tool; a failed read is done again by them) or
 * -ESHUTDOWN when the store closed meanwhile (it is freed now).
 */
struct session_read;
int session_end_read_begin(struct session_store *s, const char *id,
			   struct session_read **ret);
void session_end_read_work(struct session_read *rd);
int session_end_read_end(struct session_read *rd);
void session_end_read_drop(struct session_store *s, const char *id);

/* The name of the agent's own git dir in a worktree (see
 * session_git.c): the worktree's ".git". */
#define SESSION_AGENT_GIT ".git"
/*
 * The secret scan spd applies to the agent's commits and to the work it
 * commits at the end: given a unified diff, return 1 and write
 * "path:line" of the first added line holding a known secret to where,
 * or 0.  Set by the lead (agent.c); without one nothing is scanned.
 */
typedef int (*session_scan_fn)(void *held, const char *diff, char *where,
			       size_t wlen);
/* What a scan reads, as of now (hold, on the loop, given data), for a
 * scan on any thread; release (any thread) lets go of it.  A scan is
 * given what hold returned; nothing is scanned when that is NULL. */
typedef void *(*session_scan_hold_fn)(void *data);
typedef void (*session_scan_release_fn)(void *held);
void session_store_set_scanner(struct session_store *s, session_scan_fn fn,
			       session_scan_hold_fn hold,
			       session_scan_release_fn release, void *data);
/*
 * What changed in a worktree (the workspace's inotify watch,
 * linkwatch_changes): 1, *ret (relative names, NULL-terminated, the
 * caller's to free with strv_free_array) and *ret_since (CLOCK_MONOTONIC
 * ns: what changed before is not in the list), 0 when unknown (the whole
 * worktree is read), or -EAGAIN when the watch is being made and will
 * know (a checkpoint then waits for the next run).  Set by the lead;
 * without one a checkpoint reads the whole worktree.
 */
typedef int (*session_changes_fn)(void *data, const char *worktree, char ***ret,
				  uint64_t *ret_since);
void session_store_set_changes(struct session_store *s, session_changes_fn fn,
			       void *data);
/*
 * Where an ended session's worktree goes: the end renames it out of the
 * way (state_dir/worktrees/.ended-<id>) and hands fn the new path (fn
 * takes it), to remove on another thread with session_remove_tree.
 * Without one, or when the rename fails, the end removes the worktree
 * itself before it returns.  session_removals_left lists what an
 * earlier spd put away and did not finish removing, and the checkouts
 * for a merge's checks it left (state_dir/merge/: a stop during a
 * merge); a NULL-terminated array, the caller's; NULL when none or on
 * error.
 */
typedef void (*session_remove_fn)(void *data, char *path);
void session_store_set_remover(struct session_store *s, session_remove_fn fn,
			       void *data);
int session_remove_tree(const char *path);
char **session_removals_left(struct session_store *s);
/* The identity of agents' commits (spd.conf [session] git-name and
 * git-email); NULL: "agent <session id>".  Copied. */
void session_store_set_identity(struct session_store *s, const char *name,
				const char *email);

/*
 * Take the agent's new commits on refs/heads/spd/<feature> of the
 * worktree's own repository onto the session's branch in the main
 * repository: their objects are copied (read without following a
 * symlink or opening anything but a regular file), each commit's own
 * change is scanned, and the branch is moved (a force move: the agent
 * may amend its own commits, never reach below the base).  Returns 1
 * when the branch moved, 0 when there was nothing new (or the session
 * is in place or ended), -EACCES on a known secret (where gets
 * "commit X: path:line"; the attempt is ended with SECRET-IN-DIFF),
 * -EXDEV when the agent's branch does not descend from the base, or
 * another -errno; the store's error says why.
 */
int session_sync(struct session_store *s, const char *id, char *where,
		 size_t wlen);
/*
 * session_sync at a run's end, its work off the loop (the objects'
 * staging and copy, a patch and a scan a commit: seconds for a large
 * commit).  Begin, on the loop, reads the agent's tip: 0 and *ret NULL
 * when there is nothing to take (as session_sync's 0; or a negative
 * errno as session_sync's), 1 and *ret to give to session_sync_work on
 * another thread and then to session_sync_end on the loop, which moves
 * the branch and answers as session_sync does (or -ESHUTDOWN when the
 * store closed meanwhile: it is freed now; -ENOENT when the session is
 * gone); -EBUSY while another sync of
 * the session is out: begin again once it has ended.  Meanwhile
 * session_sync of the session takes nothing (0: the sync out takes the
 * commits), and the store's close waits for it.
 */
struct session_syncjob;
int session_sync_begin(struct session_store *s, const char *id,
		       struct session_syncjob **ret);
void session_sync_work(struct session_syncjob *j);
int session_sync_end(struct session_syncjob *j, char *where, size_t wlen);
/* The session a sync is of (valid until session_sync_end). */
const char *session_sync_id(const struct session_syncjob *j);

/* Runs of a session in flight: counted from their start to their end.
 * spd reads the worktree's files (checkpoints, the end) only while none
 * is, so that nothing can change them under it. */
void session_run_begin(struct session_store *s, const char *id);
void session_run_end(struct session_store *s, const char *id);
unsigned session_runs(struct session_store *s, const char *id);
/* A file tool is about to change the worktree (what runs do between
 * session_run_begin and their end): the checkpoint then knows a change
 * may predate what the watch saw. */
void session_touch(struct session_store *s, const char *id);

/*
 * After a run or file tool that may have changed the worktree: record
 * the worktree's files as checkpoint N (a commit on
 * refs/spd/checkpoints/<id>, never the agent's branch) with the journal
 * row and what made it.  Returns 1 and *ret_n (may be NULL) when taken, 0
 * when nothing changed (or not a live worktree session), -EBUSY while a
 * run is in flight (the last run's end takes it), -EINPROGRESS while the
 * workspace's watch is being made (kept, and taken by
 * session_checkpoint_deferred once it is), or -errno.
 */
int session_checkpoint(struct session_store *s, const char *id, int64_t row,
		       const char *what, unsigned *ret_n);

/*
 * session_checkpoint with the worktree's read on another thread: what
 * session_checkpoint answers when nothing is begun (0, -EBUSY,
 * -EINPROGRESS: kept, as there; also while another checkpoint of the
 * session is out, which session_checkpoint_deferred then takes), or 1
 * and *ret to give to session_checkpoint_work on another thread and then
 * to session_checkpoint_end on the loop.  That answers as
 * session_checkpoint does, or -ESHUTDOWN when the store closed meanwhile
 * (no row is written; it is freed now).  While a checkpoint is out
 * (session_checkpoint_out) the session's runs must not start, and its
 * end, restore and session_work leave its worktree alone (-EBUSY, or the
 * branch alone); the store's close waits for it.
 */
struct session_ckjob;
int session_checkpoint_begin(struct session_store *s, const char *id,
			     int64_t row, const char *what,
			     struct session_ckjob **ret);
void session_checkpoint_work(struct session_ckjob *j);
int session_checkpoint_end(struct session_ckjob *j, unsigned *ret_n);
/* The session a checkpoint is of (valid until session_checkpoint_end). */
const char *session_checkpoint_id(const struct session_ckjob *j);
bool session_checkpoint_out(struct session_store *s, const char *id);

/*
 * The checkpoints that waited for their workspace's watch or for another
 * checkpoint of the session (session_checkpoint answered -EINPROGRESS),
 * taken now where they can be: by take(data, id, row, what) (which
 * begins one, session_checkpoint_begin), or here when take is NULL.
 * Returns how many still wait.
 */
typedef void (*session_ck_take_fn)(void *data, const char *id, int64_t row,
				   const char *what);
unsigned session_checkpoint_deferred(struct session_store *s,
				     session_ck_take_fn take, void *data);
/* Whether session id has a checkpoint waiting for its watch or for the
 * one out, or being read on another thread (session_checkpoint_out). */
bool session_checkpoint_pending(struct session_store *s, const char *id);
/* The checkpoints, oldest first: [{"n","commit","journal_row","what",
 * "files","at"}] (new reference), or NULL for no such session. */
json_t *session_checkpoints(struct session_store *s, const char *id);
/* Put the worktree back as checkpoint n had it, after checkpointing what
 * is there now (*ret_saved, may be NULL: its number, 0 when it was a
 * checkpoint already).  0, -ENOENT, -EINVAL (no such checkpoint; not a
 * live worktree), -EBUSY (a run in flight) or -EIO. */
int session_restore(struct session_store *s, const char *id, unsigned n,
		    unsigned *ret_saved);
/*
 * session_restore with the worktree's read and its checkout on another
 * thread (a restore of 10,000 files held every client 3.2 s on the
 * loop).  What session_restore answers when nothing is begun (-errno),
 * or 1 and *ret: hand it to session_restore_work on another thread, then
 * to session_restore_end on the loop, which records the checkpoint of
 * what is there now and answers 1 for the checkout next (the same two
 * steps again), or as session_restore does (-ESHUTDOWN: spd stopping
 * before the checkout, nothing restored).  While it is out,
 * session_checkpoint_out is true for the session: its runs, file tools
 * and the calls that read its worktree wait for it, and its end and
 * another restore are refused (-EBUSY).
 */
struct session_restorejob;
int session_restore_begin(struct session_store *s, const char *id, unsigned n,
			  struct session_restorejob **ret);
void session_restore_work(struct session_restorejob *j);
int session_restore_end(struct session_restorejob *j, unsigned *ret_saved);
const char *session_restore_id(const struct session_restorejob *j);
/* What a worktree session holds: {"head", "commits": [{"commit",
 * "subject","author"}] newest first, "uncommitted": [paths] and
 * "uncommitted_count" (absent while a run is in flight or after the
 * end)}.  0 and *ret, -ENOENT, -EINVAL (in place) or -EIO. */
int session_work(struct session_store *s, const char *id, json_t **ret);

/*
 * Merge the session's branch into the operator's checkout (the branch
 * checked out there, or into when not NULL): fast-forward where it can,
 * else a merge commit (squash: one commit on top of the target).
 * expect_target is the target's tip when the checks began (NULL: not
 * checked): a different tip now refuses with -ESTALE, and so does a
 * branch whose tip is not expect_tip (the commit the checks stood for;
 * NULL: not checked; the caller took the agent's commits before them,
 * session_sync).  Refuses with
 * -EBUSY when the checkout has changes, -ENOTEMPTY on conflicts (the
 * store's error lists them), -EALREADY when there is nothing to merge.
 * Returns 0 and *ret ({"into","from","to","fast_forward","squash"}).
 */
int session_merge(struct session_store *s, const char *id, const char *into,
		  bool squash, const char *expect_target,
		  const char *expect_tip, json_t **ret);
/*
 * The same in three steps, the operator's checkout read and written on
 * another thread (its status, the merged tree, its files: 0.1-0.5 s for
 * 10,000 files here): session_merge_begin on the loop (what is merged
 * into what; 0, or -errno as session_merge with nothing to end),
 * session_merge_work on any thread, session_merge_end on the loop, which
 * moves the target branch (the other sessions' guards told at once) and
 * returns what session_merge would.  The store is freed after the last
 * step's end when it was closed meanwhile.
 */
struct session_merging;
int session_merge_begin(struct session_store *s, const char *id,
			const char *into, bool squash,
			const char *expect_target, const char *expect_tip,
			struct session_merging **ret);
void session_merge_work(struct session_merging *j);
int session_merge_end(struct session_merging *j, json_t **ret);
/* The checks of a merge, on a fresh checkout of the branch's tip in the
 * state dir (not the worktree: what passes is what is merged, and the
 * agent's uncommitted files are not in it).  0 and *ret, or as
 * session_verify_plan; session_merge_plan_done removes the checkout. */
struct session_verify_plan;
int session_merge_plan(struct session_store *s, const char *id,
		       struct session_verify_plan **ret);
/* The same in three steps, the checkout on another thread (3-5 s for
 * 10,000 files here, which no other client waits for): begin on the
 * loop takes the plan and the branch's tip (0, or -errno with nothing to
 * end), work on any thread checks it out, end on the loop returns what
 * session_merge_plan would.  The store is freed after the last step's
 * end when it was closed meanwhile. */
struct session_merge_job;
int session_merge_plan_begin(struct session_store *s, const char *id,
			     struct session_merge_job **ret);
void session_merge_plan_work(struct session_merge_job *j);
int session_merge_plan_end(struct session_merge_job *j,
			   struct session_verify_plan **ret);
void session_merge_plan_done(struct session_store *s, const char *id);
/* Whether the session's branch is merged into the branch checked out in
 * the operator's checkout (its tip reachable from there): 1 and that
 * branch's name in ret_into, 0 (not merged, detached, in place), or
 * -ENOENT. */
int session_merged(struct session_store *s, const char *id, char *ret_into,
		   size_t len);
/* The session's branch's tip in hex (GIT_OID_HEXSZ + 1 bytes), ended
 * or not: 0, -ENOENT, -EINVAL (no branch: in place) or -EIO. */
int session_branch_head(struct session_store *s, const char *id, char *ret_hex);
/* The target's tip for session_merge (into or the checkout's branch),
 * in hex (GIT_OID_HEXSZ + 1 bytes): 0, -EINVAL (detached HEAD, no such
 * branch; the store's error says) or -ENOENT. */
int session_merge_target(struct session_store *s, const char *id,
			 const char *into, char *ret_hex);

/*
 * Find the session whose token this is, comparing the token's hash with
 * every live session's in constant time.  Returns 0 and the id in ret_id
 * (SESSION_ID_LEN + 1 bytes), or -SPD_EPERM for no match (also for an
 * ended session's token).  An attempt-ended session still authenticates:
 * the caller then refuses with ATTEMPT-ENDED (session_usable).
 */
int session_authenticate(struct session_store *s, const char *token,
			 char *ret_id);

/*
 * Whether calls of the session may proceed: 0 when active, -ENOENT,
 * -ESHUTDOWN when ended, -ECANCELED when attempt-ended (ATTEMPT-ENDED),
 * -EBUSY while an end reads its worktree (session_end_read_begin).
 */
int session_usable(struct session_store *s, const char *id);

/*
 * After every command of the session: record argv (NULL terminated) and
 * its exit code (-1 when it did not run to an exit), then re-hash the
 * guarded inputs.  Returns 0 when clean; 1 when the guard found a change
 * (*ret_finding filled when not NULL; the session is now attempt-ended
 * and the finding journaled); -ECANCELED/-ESHUTDOWN/-ENOENT as
 * session_usable; or another -errno (the guard could not scan: the
 * session is attempt-ended too, since nothing vouches for its inputs).
 */
int session_record_command(struct session_store *s, const char *id,
			   const char *const *argv, int exit_code,
			   struct guard_finding *ret_finding);
/* Re-hash only (after a file tool wrote, or a command ran before its
 * record is written); returns as above. */
int session_guard_check(struct session_store *s, const char *id,
			struct guard_finding *ret_finding);
/* Record alone: a command of the session ran with exit_code (-1: not to
 * an exit), in the session's history and its count, also when the guard
 * ended its attempt since (the command ran before that).  Returns 0,
 * -ENOENT or -ESHUTDOWN (no such session, or it ended), or -EIO. */
int session_log_command(struct session_store *s, const char *id,
			const char *const *argv, int exit_code);
/* What a command of the session runs with (session_run_paths). */
struct session_run_paths {
	char *workspace;    /* the worktree or the in-place checkout */
	char **readonly;    /* NULL terminated: in place, the git dir */
	char **empty_files; /* NULL terminated: in place, the git-ignored
			       files that look like credentials (.env*,
			       *.pem, *.key, id_rsa*, .netrc, ...), found at
			       session start; they must read as empty */
	char **hidden;	    /* NULL terminated: in place, the top-most
			       git-ignored entries (an ignored directory as
			       one entry), found when the run starts: what
			       fs.read refuses (deny.fs.ignored) must not be
			       readable by a command either */
	bool in_place;
};

/*
 * The paths cmd.run needs for a command of session id: the workspace and,
 * in place, what is read-only, what reads as empty and what is hidden
 * (the checkout is walked for its ignored entries, up to
 * SESSION_SCAN_MAX entries).  Returns 0 and fills *ret (free with
 * session_run_paths_free), -ENOENT/-ESHUTDOWN/-ECANCELED as
 * session_usable, -E2BIG when more ignored entries than the run's mount
 * plan has room for (see SESSION_RUN_PATHS_RESERVED; *ret_hidden_max
 * says how many, when not NULL) or more than SESSION_SCAN_MAX walked ones
 * would have to be hidden,
 * -EIO when git cannot open the checkout, or -ENOMEM.
 */
int session_run_paths(struct session_store *s, const char *id,
		      struct session_run_paths *ret, size_t *ret_hidden_max);
/* Free what session_run_paths filled; a zeroed struct is fine. */
void session_run_paths_free(struct session_run_paths *p);
/*
 * In place, the walk of the checkout that session_run_paths would do on
 * the loop, on another thread instead: when the kept list cannot serve
 * the next run of session id (none yet, a .gitignore written, a walked
 * directory gone; daemon/session/session_inplace.c), or has new
 * directories git does not ignore to walk (each alone, there), returns
 * 1 and *ret,
 * to hand to session_walk_work on another thread and then to
 * session_walk_end on the loop, which keeps the walk's list for the
 * session; session_run_paths then walks nothing unless something changed
 * meanwhile that the list cannot follow.  With serve, the walk's list
 * serves the next session_run_paths of the session whatever changed
 * meanwhile (as session_walk_forget's): a caller that has walked again
 * and again, a .gitignore rewritten during each walk, stops there
 * instead of walking on the loop.  0 when no walk is needed (or
 * the session is not in place, or not usable: session_run_paths says
 * why), -ENOMEM.  The store is freed after the last walk's end when it
 * was closed meanwhile (session_store_free).
 */
struct session_walk;
int session_walk_begin(struct session_store *s, const char *id,
		       struct session_walk **ret);
void session_walk_work(struct session_walk *wk);
void session_walk_end(struct session_walk *wk, bool serve);
/* A walk whose list cannot be kept (a .gitignore that is a link, which
 * no watch follows) leaves it, at session_walk_end, for the next
 * session_run_paths of the session alone (and session_walk_begin answers
 * 0 until then): the caller asks for its paths straight after, then
 * forgets whatever its call did not take, so that no later run gets a
 * list walked before it was asked for. */
void session_walk_forget(struct session_store *s, const char *id);
/* In place: walks of a checkout for its ignored entries so far, in this
 * process (a run reuses the last walk's list while nothing that could
 * change it has changed; for tests and the bench). */
unsigned long session_ignored_walks(void);
/* In place: the top-most git-ignored entries of the checkout when session
 * id started (absolute paths, a new NULL-terminated list: free with
 * strv_free_array): they stay hidden from its runs and refused by fs.read
 * whatever the checkout's .gitignore files say later.  NULL for a session
 * not in place, an unknown one, or no memory. */
char **session_hidden_at_start(struct session_store *s, const char *id);

/* Count a policy block in the session (a hard gate of verification);
 * what is journaled with it.  Returns 0 or -ENOENT. */
int session_note_policy_block(struct session_store *s, const char *id,
			      const char *what);
/*
 * End the session's attempt for a reason other than the guard (three
 * denied calls in a row: code "POLICY-DENIED"; why says what).  Every
 * later call of the session is then refused with ATTEMPT-ENDED;
 * session.show names code and why.  Journaled.  Returns 0, -ENOENT,
 * -ESHUTDOWN for an ended session, or -ECANCELED when the attempt had
 * already ended (the first finding is kept).
 */
int session_end_attempt(struct session_store *s, const char *id,
			const char *code, const char *why);
/* Record a change made outside the worktree (path) — a failed gate.
 * Returns 0 or -ENOENT. */
int session_note_outside_change(struct session_store *s, const char *id,
				const char *path);

/*
 * Seal held-out checks: copy the regular files and directories under dir
 * into state_dir/heldout/<id>/ (0700; symlinks and special files are
 * refused with -EINVAL, so nothing outside dir is copied), replacing
 * earlier ones.  Never writes into the worktree.  Returns the number of
 * files copied, -E2BIG past the SESSION_HELDOUT_* limits, -ENOENT,
 * -EINPROGRESS while a plan holds the earlier set (the copy is put in
 * place when the last such plan is freed: session_heldout_end), or
 * -errno.
 */
int session_heldout(struct session_store *s, const char *id, const char *dir);
/*
 * session_heldout with the copy on another thread (up to
 * SESSION_HELDOUT_FILES_MAX files and _BYTES_MAX bytes, which held every
 * client on the loop): what session_heldout answers when nothing is
 * begun (-errno; -EBUSY while the session's held-out checks are being
 * sealed already), or 0 and *ret to hand to session_heldout_work on
 * another thread, then to session_heldout_end on the loop, which puts
 * the copy in place and answers as session_heldout does (-ESHUTDOWN
 * when the store closed meanwhile: the earlier set stays).
 */
struct session_sealing;
int session_heldout_begin(struct session_store *s, const char *id,
			  const char *dir, struct session_sealing **ret);
void session_heldout_work(struct session_sealing *j);
/*
 * While a verification's plan holds the session's earlier set (its
 * checks bind it; a check running sees it whole), the copy waits beside
 * it: session_heldout_end answers -EINPROGRESS, no new plan is made
 * (session_verify_plan: -EALREADY, saying why; a verify, merge or end
 * is refused, never run or ended without its checks), and once the
 * last plan holding the set is freed
 * the copy is put in place and then(data, files or -errno, why) called.
 * At the store's close before that, then is called with -ESHUTDOWN and
 * the earlier set stays.  Without then (session_heldout), nobody hears.
 */
typedef void (*session_sealed_fn)(void *data, int r, const char *why);
int session_heldout_end(struct session_sealing *j, session_sealed_fn then,
			void *data);
/*
 * The overlay for a verification run: *ret_src is the sealed directory,
 * *ret_dst the path inside the worktree where it must be bound read-only
 * (worktree/SESSION_HELDOUT_MOUNT) — for verification runs only.  Both
 * malloc'd.  Returns 0, or -ENOENT when nothing is sealed.
 */
int session_heldout_overlay(struct session_store *s, const char *id,
			    char **ret_src, char **ret_dst);

/*
 * Split a run line into words with simple shell rules, no shell:
 * blanks separate words; '...' is literal; "..." is literal except \" \\
 * \$ \`; a backslash outside quotes escapes the next character.  An
 * unquoted | & ; < > ( ) ` $ is refused (-EINVAL): the line would mean
 * something else to a shell, and spd never runs one implicitly.  Returns
 * the word count and *ret_argv (NULL terminated; free with
 * session_argv_free), -EINVAL or -E2BIG.
 */
int session_split_words(const char *line, char ***ret_argv);
void session_argv_free(char **argv);

/* One configured check: [check "NAME"] run = LINE. */
struct session_check {
	char *name;
	char **argv;
	/* A word of LINE names SESSION_HELDOUT_MOUNT: a held-out check.
	 * Only such a check sees the overlay (whatever else a check runs is
	 * the agent's code: its Makefile, its check script), and the agent
	 * learns only whether it passed; its exit code is the operator's. */
	bool heldout;
};

/* What a verification runs: the checks in order, in workspace, with the
 * held-out overlay when sealed (NULLs otherwise). */
struct session_verify_plan {
	char id[SESSION_ID_LEN + 1];
	char *workspace;
	char *heldout_src;
	char *heldout_dst;
	/* The session's hold on heldout_src (let go by
	 * session_verify_plan_free): no seal replaces the set meanwhile. */
	struct sess_hold *hold;
	struct session_check *checks;
	size_t n_checks;
	char **required; /* [verify] require lines, NULL terminated */
	/* Paths a verification run must see read-only: in place, the git
	 * dir (NULL terminated; empty in worktree mode). */
	char **readonly;
	bool agent_may_verify; /* [verify] agent = true */
	/* The commit the checks stand for, in hex: the branch's tip as the
	 * plan was made (a merge's checkout is exactly it); "" when the
	 * session has no branch (in place, detached). */
	char commit[41];
	/* SHA-256 of the project's .spd.conf snapshot in hex; "" when the
	 * project has none. */
	char policy_sha256[65];
};

/*
 * Read the project's checks from the .spd.conf snapshot taken at session
 * start (the file as the session began; the guard already ends the
 * session when the worktree's copy changes, and reading the snapshot
 * removes the race between that check and this read).  Returns 0 and
 * *ret, -ECANCELED/-ESHUTDOWN/-ENOENT as session_usable, or -EINVAL for
 * a malformed configuration (session_store_error says which check).
 */
int session_verify_plan(struct session_store *s, const char *id,
			struct session_verify_plan **ret);
void session_verify_plan_free(struct session_verify_plan *p);

enum session_gate_id {
	SESSION_GATE_CHECKS,	/* every check ran and exited 0 */
	SESSION_GATE_POLICY,	/* no policy block in the session */
	SESSION_GATE_INTEGRITY, /* no guard finding, now or before */
	SESSION_GATE_OUTSIDE,	/* no change outside the worktree */
	SESSION_GATE_REQUIRED,	/* the required commands ran */
	SESSION_GATES
};

struct session_gate {
	const char *name; /* "checks", "policy", ... (static) */
	bool pass;
	char detail[256];
};

struct session_verdict {
	bool pass; /* true only when every gate passed */
	struct session_gate gates[SESSION_GATES];
};

/*
 * Evaluate the hard gates once the plan's checks have run: exit_codes[i]
 * is check i's exit code (-1: it did not run to an exit, a failure).
 * Re-hashes the guard first.  The verdict is journaled
 * ("session.verify").  There is no override: a failed gate fails the
 * verdict.  Returns 0 and *ret, or -ENOENT.
 */
int session_verify_evaluate(struct session_store *s,
			    const struct session_verify_plan *plan,
			    const int *exit_codes, struct session_verdict *ret);
/* The verdict as JSON: {"pass":..,"gates":[{"name","pass","detail"}],
 * "checks":[{"name","argv","exit"}]} (new reference or NULL). */
json_t *session_verdict_json(const struct session_verdict *v,
			     const struct session_verify_plan *plan,
			     const int *exit_codes);

/*
 * The session's change against its base commit: the files on disk in
 * the worktree (committed or not, untracked included, ignored excluded)
 * compared with the base tree, as a unified diff.  Returns 0, *ret_text
 * (malloc'd; cut at SESSION_DIFF_MAX with *ret_truncated set) or -errno.
 */
int session_diff(struct session_store *s, const char *id, char **ret_text,
		 bool *ret_truncated);
/*
 * The same in three steps, the diff itself on another thread (for
 * 10,000 files, a tenth changed, some 0.5-1 s that no other client
 * waits for): session_diff_begin on the loop (0, or -errno with nothing
 * to end), session_diff_work on any thread, and session_diff_end back on
 * the loop, which returns what session_diff would.  The store is freed
 * after the last step's end when it was closed meanwhile
 * (session_store_free).
 */
struct session_diff_job;
int session_diff_begin(struct session_store *s, const char *id,
		       struct session_diff_job **ret);
void session_diff_work(struct session_diff_job *j);
int session_diff_end(struct session_diff_job *j, char **ret_text,
		     bool *ret_truncated);
/* After session_diff_work, on its thread: the diff read (NULL when it
 * failed), the job's own until session_diff_end. */
const char *session_diff_text(const struct session_diff_job *j);

/*
 * Running one check of a verification in the sandbox: the lead wires this
 * to sbx_run() with the plan's workspace, the held-out overlay bound
 * read-only at plan->heldout_dst (verification runs only), no network,
 * and plan->checks[i].argv.  The runner returns 0 and later calls
 * done(ctx, exit_code, out) exactly once on the loop thread (exit_code -1
 * when the check did not run to an exit: killed, timed out, refused; out
 * what it printed, or NULL when the runner did not see it), or returns
 * -errno without calling done.
 */
struct session_check_output {
	/* SHA-256 (hex) of each stream as the check wrote it, [0] stdout
	 * and [1] stderr, of the bytes kept (the run's output cap drops the
	 * rest, counted in dropped). */
	char sha256[2][65];
	uint64_t bytes[2], dropped[2];
};
typedef void (*session_check_done_fn)(void *ctx, int exit_code,
				      const struct session_check_output *out);
typedef int (*session_check_runner_fn)(void *data,
				       const struct session_verify_plan *plan,
				       size_t i, session_check_done_fn done,
				       void *ctx);
/* Set (or clear, with fn NULL) the check runner.  Without one,
 * session.verify uses its own runner over spd->sbx (m_session.c), and
 * with no sandbox at all fails with SANDBOX-UNAVAILABLE: checks never
 * run unconfined. */
void session_store_set_check_runner(struct session_store *s,
				    session_check_runner_fn fn, void *data);
/* The runner set, or NULL; *ret_data gets its data. */
session_check_runner_fn session_store_check_runner(struct session_store *s,
						   void **ret_data);

#endif

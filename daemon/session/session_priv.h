/*
 * What the parts of the session module share, and nothing outside it
 * includes: the store's structure, one session's record in memory, and
 * the helpers more than one part calls.  The parts are session.c (the
 * store), session_worktree.c, session_inplace.c, session_heldout.c,
 * session_verify.c and session_diff.c; the interface is session.h.
 *
 * Everything here runs on the loop thread, as the rest of the store.
 */
#ifndef SPD_DAEMON_SESSION_PRIV_H
#define SPD_DAEMON_SESSION_PRIV_H

#include <git2.h>
#include <jansson.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "common/strv.h"
#include "daemon/session/session.h"

/* One session as the store holds it. */
/* A file's identity: device and inode. */
struct sess_id {
	uint64_t dev, ino;
};

struct sess {
	struct session_info info;
	uint8_t token_hash[crypto_generichash_BYTES];
	struct guard *guard;  /* active sessions only */
	char **empty_files;   /* in place: ignored credential files */
	struct sess_ign *ign; /* in place: the hidden list kept between runs */
	/* In place: the list of a walk on another thread that could not be
	 * kept (a .gitignore that is a link: no watch follows it), or the
	 * last one a run may wait for, for the
	 * run or check that asked for the walk only (session_walk_end,
	 * session_walk_forget). */
	struct {
		bool set;
		int r;
		size_t max;
		char **v;
	} ign_once;
	char **ign_start; /* in place: the top-most ignored entries at the
				 start, hidden for the whole session */
	/* What each of empty_files and ign_start was when recorded (a
	 * moved one is followed: sess_inplace_follow). */
	struct sess_id *empty_ids, *start_ids;
	/* Worktree: the agent's branch tip last taken (session_sync). */
	git_oid synced;
	bool synced_set;
	bool syncing; /* a run's sync is on another thread */
	bool sealing; /* its held-out checks are copied on another thread */
	/* The plans holding its held-out set (session_verify_plan), and a
	 * sealed copy waiting for them to let it go (session_heldout_end):
	 * a check never sees its set change or go while it runs. */
	struct sess_hold *hold;
	struct session_sealing *seal_next;
	unsigned runs; /* runs in flight (session_run_begin) */
	/* Worktree: an end's read of the whole worktree is on another
	 * thread (session_end_read_begin): no run, file tool or checkpoint
	 * until it is back.  ck_fresh: that read, back, is the worktree
	 * as it is (until session_end_read_drop, a run or a file tool). */
	bool reading, ck_fresh;
	/* Worktree: a checkpoint's read is on another thread
	 * (session_checkpoint_begin): the ck_ fields below are its until
	 * session_checkpoint_end; no run starts, and no end, restore or
	 * other read of the worktree is made, meanwhile. */
	bool ck_out;
	/* That read's patch against the branch's tip then (tree ck_patch_from
	 * to ck_tree ck_patch_to), made on the read's thread for the end's
	 * secret scan (sess_patch_take); NULL when none. */
	char *ck_patch;
	git_oid ck_patch_from, ck_patch_to;
	/* Worktree: the main repository on the worktree and spd's index of
	 * it (session_work.c), open from the first checkpoint to the end. */
	git_repository *ck_repo;
	git_index *ck_idx;
	bool ck_whole; /* the last read was of the whole worktree */
	/* CLOCK_MONOTONIC ns as of which ck_idx holds the worktree (0:
	 * unknown, read it whole), and when the first run or file tool
	 * since then began (0: none): a watch's list that began before
	 * that misses nothing. */
	uint64_t ck_known_ns, ck_touch_ns;
	/* The tree of ck_idx as last made (the base for the next), when
	 * ck_tree_set. */
	git_oid ck_tree;
	bool ck_tree_set;
	/* The names the last incremental tree changed (JSON array, at most
	 * SESSION_FILES_SHOWN) and their count, for the checkpoint. */
	json_t *ck_paths;
	size_t ck_npaths;
	git_oid ck_paths_base; /* the tree they changed */
	struct strv ck_strs;   /* names tree_updated made for its updates */
	/* A checkpoint that waits for the workspace's watch to be made
	 * (session_checkpoint_deferred): the last run's row and argv. */
	bool ck_deferred;
	int64_t ck_def_row;
	char *ck_def_what;
	/* Provenance (labels.c): its labels, contacted hosts and served
	 * results, read from sessions.db at first use; NULL until then. */
	struct sess_prov *prov;
	struct sess *next;
};

/* An event journaled before the store had its journal (a finding made
 * as the store opened), handed over by session_store_set_journal. */
struct sess_early {
	char *id, *kind, *summary, *detail;
	struct sess_early *next;
};

struct session_store {
	char *state_dir;
	sqlite3 *db;
	struct sess *list; /* newest first */
	session_journal_fn jfn;
	void *jdata;
	struct sess_early *early, **early_tail;
	size_t nearly;
	session_check_runner_fn runner;
	void *runner_data;
	session_ended_fn ended;
	void *ended_data;
	session_scan_fn scan;
	session_scan_hold_fn scan_hold;
	session_scan_release_fn scan_release;
	void *scan_data;
	session_changes_fn changes;
	void *changes_data;
	session_remove_fn remove;
	void *remove_data;
	char *git_name, *git_email; /* NULL: "agent <id>" */
	char err[1024];
	/* Steps on another thread that read the store, between their begin
	 * and end: starts, ends' reads, runs' walks and syncs,
	 * checkpoints.  A close waits for the last (closing). */
	unsigned aside;
	bool closing; /* freed once the last of them ends */
	/* Called once it is freed (session_store_free_then). */
	void (*freed)(void *data);
	void *freed_data;
	/* libgit2 is initialised on first use: its start-up loads and
	 * touches OpenSSL, megabytes an idle spd need not hold. */
	bool git_ready;
};

/* Free s when its close waits for nothing on another thread any more
 * (session_store_free was called while some was). */
void sess_store_closed_maybe(struct session_store *s);
/* Drop x's ign_once, if any. */
void sess_ign_once_drop(struct sess *x);

/* ---- labels.c ---- */

void sess_prov_free(struct sess_prov *p);

/* Held-out sets (session_heldout.c): x's set held for a plan
 * (-EALREADY, said in s->err, while a new set waits to replace it; not
 * -EBUSY, which an end's own read answers), and let go (the
 * copy waiting put in place when it was the last); x's holds let go as
 * x is freed; the seals waiting at the store's close, answered
 * -ESHUTDOWN (each one s->aside less). */
int sess_heldout_hold(struct session_store *s, struct sess *x,
		      struct sess_hold **ret);
void sess_heldout_release(struct sess_hold *h);
void sess_heldout_free(struct sess *x);
void sess_heldout_close(struct session_store *s);

/* ---- session_ckapply.c ---- */

/*
 * One name the watch saw change (rel, below x's worktree), into spd's
 * index of that worktree (x->ck_idx): gone (and everything below it), a file or
 * symlink (unless ignored and not tracked), or a directory read whole,
 * counting what it visits in *visits.  0, or -EAGAIN: read the whole
 * worktree instead (an ignore file changed, a nested repository, too
 * much, a file changing while read).
 */
int sess_ck_apply(struct sess *x, const char *rel, int depth, size_t *visits);

/* ---- session_ignored.c ---- */

/* Deepest directory walked for ignored entries (and for credential
 * files, session_inplace.c): a deeper tree is an attack on the walk's
 * stack, and is refused like a too-large one. */
#define SESSION_SCAN_DEPTH 64

/* The kept hidden list and its watch (NULL is fine). */
void sess_ign_free(struct sess_ign *w);
/* The room a run has for hidden entries next to n credential files. */
size_t sess_hidden_room(size_t n);
/* In place: the run's hidden list (*ret, on 0): the kept one while its
 * watch shows nothing that could change it, else a walk of the checkout
 * (kept for the next runs).  -E2BIG past max entries or SESSION_SCAN_MAX
 * walked, -EIO, -ENOMEM. */
int sess_ign_hidden(struct session_store *s, struct sess *x, size_t max,
		    char ***ret);

/* ---- session_inplace.c ---- */

/* In place: the record of what was ignored at the start, in the state
 * dir (a new path, or NULL). */
char *sess_inplace_path(struct session_store *s, const char *id);
/* At the start: find the top-most ignored entries (after
 * sess_find_secrets) and record them with the credential files.  0, or
 * < 0 with the store's error set (-E2BIG: more than a run can hide). */
int sess_inplace_record(struct session_store *s, struct sess *x);
/* At a restart: both lists from the record.  0, -ENOENT (none: a session
 * started by an older spd), -EINVAL (damaged) or -ENOMEM. */
int sess_inplace_load(struct session_store *s, struct sess *x);
/* Before a run or an fs call: recorded entries whose path no longer holds
 * the file recorded are searched for in the checkout and hidden where
 * they went (journaled session.ignored-moved); the record is rewritten.
 * 0, or < 0 (-E2BIG past SESSION_SCAN_MAX entries or the lists' room,
 * -EACCES for a directory the search cannot read): refuse the call. */
int sess_inplace_follow(struct session_store *s, struct sess *x);

/* ---- session.c ---- */

/* Initialise libgit2 once, before the store's first git call: 0 or
 * -EIO. */
int sess_git_up(struct session_store *s);
/* Set the store's error text for a person (session_store_error). */
/* paths_ensure_private_dir(dir); on failure the store's error says
 * which directory, why, and the fix (paths_private_dir_why). */
int sess_private_dir(struct session_store *s, const char *dir);
void sess_seterr(struct session_store *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* This thread's sess_seterr writes to buf (len bytes) rather than the
 * store's text until called again with NULL. */
void sess_seterr_to(char *buf, size_t len);
/* The store's secret scan (session_store_set_scanner): what it reads as
 * of now (NULL: nothing is scanned), a scan of text with it on any
 * thread (1 and where on a hit, else 0), and its release. */
void *sess_scan_hold(struct session_store *s);
int sess_scan(const struct session_store *s, void *held, const char *text,
	      char *where, size_t wlen);
void sess_scan_release(const struct session_store *s, void *held);
/* A regular file below dirfd, opened without following a symlink (in
 * any component: openat2's RESOLVE_BENEATH and RESOLVE_NO_SYMLINKS) and
 * without blocking on a FIFO: the descriptor and *ret_st, -EINVAL for
 * anything but a regular file, or another -errno. */
int sess_open_regular(int dirfd, const char *path, struct stat *ret_st);
/* libgit2's last error message, or a stand-in: never NULL. */
const char *sess_git_msg(void);
/* Journal an event of session id with a summary; takes detail (may be
 * NULL).  Does nothing without a journal hook. */
void sess_journal(struct session_store *s, const char *id, const char *kind,
		  json_t *detail, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* A copy of a record for a caller (session_info_free), or NULL. */
struct session_info *sess_info_copy(const struct session_info *src);
/* "worktree" or "in-place". */
const char *sess_mode_name(enum session_mode m);
/* Bind a string, or SQL NULL for NULL, to parameter i of st. */
void sess_bind_text(sqlite3_stmt *st, int i, const char *v);
/* Insert a new session's row: 0 or -EIO (with the error text set). */
int sess_db_insert(struct session_store *s, const struct sess *x);
/* Write the mutable fields of a session (and the guard digest): 0 or
 * -EIO. */
int sess_db_update(struct session_store *s, const struct sess *x);
/* Free one record (its guard too); NULL is fine. */
void sess_free(struct sess *x);
/* The session id names, or NULL. */
struct sess *sess_find(struct session_store *s, const char *id);
/* spd moved refs/heads/<branch> of gitdir itself: not a finding for any
 * session on that repository. */
void sess_note_ref(struct session_store *s, const char *gitdir,
		   const char *branch);
/* Take (or take again) the guard's snapshot of x's inputs: 0 or a
 * negative errno, with the error text set. */
int sess_make_guard(struct session_store *s, struct sess *x);
/* The hash of a token the store keeps instead of the token. */
void sess_token_hash(const char *token, uint8_t out[crypto_generichash_BYTES]);
/* Re-hash x's guarded inputs: 0 unchanged, 1 changed (the attempt is
 * ended, *ret_finding says what when not NULL), a negative errno when
 * unreadable (the attempt is ended too), -ECANCELED without a guard. */
int sess_guard_step(struct session_store *s, struct sess *x,
		    struct guard_finding *ret_finding);
/* argv as a compact JSON array (the commands table's form), or NULL. */
char *sess_argv_json(const char *const *argv);

/* ---- session_worktree.c ---- */

/* Copy a regular file (not through a symlink) to a new file, 0600, at
 * most max bytes (-E2BIG past that); fsynced.  0 or a negative errno. */
int sess_copy_file(const char *from, const char *to, off_t max);
/* Where the .spd.conf snapshot of session id lives, or NULL. */
char *sess_conf_snapshot_path(struct session_store *s, const char *id);
/* rm -rf without following symlinks; a missing path is fine. */
int sess_rm_tree(const char *path);
/* path removed (a missing one is fine): renamed to away (taken, may be
 * NULL) and handed to the store's remover thread when it has one, else
 * here.  For trees of thousands of files the loop must not remove. */
void sess_remove_aside(struct session_store *s, const char *path, char *away);

/* ---- session_inplace.c ---- */

/* Find the ignored credential files of in-place session x once (its
 * empty_files): 0 or a negative errno (-E2BIG past the limits), with
 * the error text set. */
int sess_find_secrets(struct session_store *s, struct sess *x);

/* ---- session_heldout.c ---- */

/* Where session id's held-out files are sealed, or NULL. */
char *sess_heldout_dir(struct session_store *s, const char *id);
/* An ended session's held-out checks removed (on the remover's thread
 * when the store has one). */
void sess_heldout_drop(struct session_store *s, const char *id);

/* ---- session_git.c ---- */

/* The main repository opened by its git dir alone (bare): 0 or -EIO
 * with the error set (on a worker thread, where sess_seterr_to says). */
int sess_open_gitdir(struct session_store *s, const char *gitdir,
		     git_repository **ret);
/* The same for session x's. */
int sess_open_bare(struct session_store *s, const struct sess *x,
		   git_repository **ret);
/* The start of a call on a live worktree session: 0 and *ret; 1 (and
 * *ret) when the session is in place or ended; -ENOENT or -EIO. */
int sess_live_worktree(struct session_store *s, const char *id,
		       struct sess **ret);
/* The main repository opened by its git dir with the worktree as its
 * work dir (never through the worktree's .git): 0 or -EIO. */
int sess_open_worktree(struct session_store *s, const struct sess *x,
		       git_repository **ret);
/* Make the agent's repository in x's worktree (after the checkout): 0 or
 * a negative errno. */
int sess_agent_git_make(struct session_store *s, struct sess *x,
			git_repository *repo);
/* An older session's worktree (libgit2's .git file) gets the agent's
 * repository: 0 or a negative errno. */
int sess_agent_git_ensure(struct session_store *s, struct sess *x);
/* The unified diff between two trees (NULL: the empty tree): the diff
 * and/or its text (malloc'd), either pointer may be NULL. */
int sess_diff_text(git_repository *repo, git_tree *from, git_tree *to,
		   git_diff **ret_diff, char **ret_text);
/* The session branch's tip in repo: 0 or -ENOENT (error set). */
int sess_branch_tip(struct session_store *s, const struct sess *x,
		    git_repository *repo, git_oid *ret);
/* Move the session's branch from old to new_tip: 0 or -EIO. */
int sess_branch_move(struct session_store *s, struct sess *x,
		     git_repository *repo, const git_oid *old,
		     const git_oid *new_tip, const char *why);
/* At the end: the agent's stash entries copied into the main repository
 * as refs/spd/stash/<id>/<n> (scanned like its commits: -EACCES and
 * where on a secret).  1 and *ret (the refs) when there were some, 0
 * when none, or a negative errno. */
int sess_keep_stash(struct session_store *s, struct sess *x, char *where,
		    size_t wlen, json_t **ret);
/* How many stash entries the agent's repository holds. */
size_t sess_stash_count(const struct sess *x);
/* The identity of the agent's commits in name and email. */
void sess_agent_ident(const struct session_store *s, const struct sess *x,
		      char *name, size_t nlen, char *email, size_t elen);

/* ---- session_work.c ---- */

/* The checkpoints table: 0 or -EIO. */
int sess_work_schema(struct session_store *s);
/* At the end: commit what is uncommitted (1, *ret_report) after the
 * scan (-EACCES), or with discard list it (0, *ret_report); 0 and NULL
 * when nothing was uncommitted. */
int sess_end_work(struct session_store *s, struct sess *x, bool discard,
		  json_t **ret_report);
/* A new worktree: its checkout is what spd's index will hold. */
void sess_work_fresh(struct sess *x);
/* Drop spd's index of the session's worktree. */
void sess_work_forget(struct session_store *s, const char *id);
/* Open x's repository and spd's index of its worktree (seeded from the
 * checkout's index) now rather than at its first checkpoint: 0, or < 0
 * with the error set (the checkpoint tries again). */
int sess_work_open(struct session_store *s, struct sess *x);
/* Close x's repository and index (the index written out first, and as
 * of when beside it; NULL s: the index alone, which an older .known
 * still describes); a session without them is fine. */
void sess_work_close(struct session_store *s, struct sess *x);
/* Read the whole worktree into spd's index and its tree (x->ck_tree):
 * 0, or < 0 with the error set.  On another thread while x->reading. */
int sess_work_read_whole(struct session_store *s, struct sess *x);
/* The patch from tree from to tree to made by the end's read (the
 * caller's to free), or NULL when it made none for those two. */
char *sess_patch_take(struct sess *x, const git_oid *from, const git_oid *to);

/* How worktree_tree may read: what the watch says changed, falling back
 * to the whole worktree; the same, but a watch still being made means
 * "later" (-EINPROGRESS: a checkpoint waits for the watch rather than
 * read 10,000 files on the loop); or always the whole worktree. */
enum wt_read { WT_CHANGES, WT_WAIT, WT_WHOLE };

/*
 * What worktree_tree reads, decided on the loop (wt_prep: the watch's
 * list, taken with the time the index holds the worktree as of) and read
 * where the caller is (wt_read: on the loop, or on another thread while
 * the session's checkpoint is out).
 */
struct wt_plan {
	char **changed; /* what the watch says changed, when known */
	bool known;	/* read changed only; else the whole worktree */
	bool fresh;	/* an end's read, made just before: nothing to read */
};

/* The plan of a read of x's worktree (the watch's list taken, and the
 * time spd's index will hold the worktree as of), on the loop: 0, or
 * -EINPROGRESS (WT_WAIT and the watch is being made) or -errno. */
int sess_wt_prep(struct session_store *s, struct sess *x, enum wt_read how,
		 struct wt_plan *p);
/* That read, into spd's index, and its tree (*ret_repo, the session's,
 * borrowed): on the loop, or on another thread while x->ck_out.  p's
 * list is freed. */
int sess_wt_read(struct session_store *s, struct sess *x, struct wt_plan *p,
		 git_repository **ret_repo, git_oid *ret_tree);
/* Paths that differ between two trees (NULL from: the empty tree), as a
 * JSON array of at most SESSION_FILES_SHOWN; *ret_n the count. */
json_t *sess_changed_paths(git_repository *repo, git_tree *from, git_tree *to,
			   size_t *ret_n);
/* spd's own signature, now (*keep to free), or NULL. */
const git_signature *sess_spd_sig(git_signature **keep);
/* The tree of a commit: 0 or -EIO. */
int sess_tree_of(git_repository *repo, const git_oid *commit, git_tree **ret);

/* ---- session_ckpt.c ---- */

/* A checkpoint of x's worktree on the loop: 1 and *ret_n when one was
 * taken, 0 when the worktree is as the last checkpoint has it, or
 * -errno. */
int sess_checkpoint(struct session_store *s, struct sess *x, int64_t row,
		    const char *what, enum wt_read how, unsigned *ret_n);

#endif

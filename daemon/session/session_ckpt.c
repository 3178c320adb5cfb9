/*
 * Sessions, the checkpoints: after each run or file tool that changed a
 * worktree, its files as a commit on refs/spd/checkpoints/<id> with a
 * row in sessions.db and a journal event.  The worktree is read on the
 * loop (sess_checkpoint, session_checkpoint) or on another thread
 * (session_checkpoint_begin, _work, _end), through spd's index of it
 * (session_work.c).  Part of the session module (session_priv.h); see
 * session.h.
 */
#include <errno.h>
#include <git2.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/strv.h"
#include "common/util.h"
#include "daemon/session/session.h"
#include "daemon/session/session_priv.h"

/* ---- checkpoints ---- */

static int ckpt_last(struct session_store *s, const char *id, unsigned *ret_n,
		     git_oid *ret_oid)
{
	sqlite3_stmt *st = NULL;
	int r = 0;

	*ret_n = 0;
	if (sqlite3_prepare_v2(s->db,
			       "SELECT n, oid FROM checkpoints WHERE "
			       "session=? ORDER BY n DESC LIMIT 1",
			       -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	sess_bind_text(st, 1, id);
	if (sqlite3_step(st) == SQLITE_ROW) {
		*ret_n = (unsigned)sqlite3_column_int(st, 0);
		if (git_oid_fromstr(
			ret_oid, (const char *)sqlite3_column_text(st, 1)) < 0)
			r = -EIO;
	}
	sqlite3_finalize(st);
	return r;
}

static int ckpt_insert(struct session_store *s, const char *id, unsigned n,
		       const git_oid *oid, int64_t row, const char *what,
		       size_t files)
{
	sqlite3_stmt *st = NULL;
	char hex[GIT_OID_HEXSZ + 1];
	int r;

	if (sqlite3_prepare_v2(s->db,
			       "INSERT INTO checkpoints(session, n, oid, "
			       "journal_row, what, files, at) "
			       "VALUES(?,?,?,?,?,?,?)",
			       -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	git_oid_tostr(hex, sizeof(hex), oid);
	sess_bind_text(st, 1, id);
	sqlite3_bind_int(st, 2, (int)n);
	sess_bind_text(st, 3, hex);
	if (row > 0)
		sqlite3_bind_int64(st, 4, row);
	else
		sqlite3_bind_null(st, 4);
	sess_bind_text(st, 5, what);
	sqlite3_bind_int64(st, 6, (sqlite3_int64)files);
	sqlite3_bind_int64(st, 7, time(NULL));
	r = sqlite3_step(st) == SQLITE_DONE ? 0 : -EIO;
	sqlite3_finalize(st);
	return r;
}

/*
 * A checkpoint in three steps: ck_prep on the loop (the watch's list, the
 * last checkpoint's number), ck_make where the read is (the worktree
 * read, the commit and spd's ref), ck_finish on the loop (its row and
 * journal event).  checkpoint() takes the three in turn; a
 * session_ckjob makes the second on another thread.
 */
struct ck_plan {
	struct wt_plan wt;
	unsigned n;   /* the last checkpoint's number (0: none yet) */
	git_oid last; /* its commit */
	int64_t row;
	char *what;
	/* What ck_make made: the commit, and the names it changed. */
	git_oid cid;
	size_t files;
	json_t *paths;
};

static void ck_plan_free(struct ck_plan *p)
{
	strv_free_array(steal_ptr(p->wt.changed));
	free(steal_ptr(p->what));
	json_decref(steal_ptr(p->paths));
}

static int ck_prep(struct session_store *s, struct sess *x, int64_t row,
		   const char *what, enum wt_read how, struct ck_plan *p)
{
	int r;

	memset(p, 0, sizeof(*p));
	p->row = row;
	r = sess_wt_prep(s, x, how, &p->wt);
	if (r < 0)
		return r;
	r = ckpt_last(s, x->info.id, &p->n, &p->last);
	if (r == 0 && !(p->what = strdup(what ? what : "")))
		r = -ENOMEM;
	if (r < 0)
		ck_plan_free(p);
	return r;
}

/* 1 when the worktree is not as the last checkpoint has it (p->cid made,
 * spd's ref moved to it), 0 when it is, or -errno. */
static int ck_make(struct session_store *s, struct sess *x, struct ck_plan *p)
{
	git_repository *repo = NULL;
	git_tree *tree = NULL, *prev_tree = NULL;
	git_commit *prev = NULL;
	git_signature *sig = NULL;
	git_oid tid;
	char ref[96], msg[1024];
	int r;

	r = sess_wt_read(s, x, &p->wt, &repo, &tid);
	if (r < 0)
		return r;
	if (p->n > 0 && git_commit_lookup(&prev, repo, &p->last) == 0 &&
	    git_commit_tree(&prev_tree, prev) == 0 &&
	    git_oid_equal(git_tree_id(prev_tree), &tid)) {
		r = 0;
		goto out;
	}
	if (p->n == 0) {
		/* The first: against the base, so the log shows what the
		 * first run changed (and none while nothing did). */
		git_oid base;

		git_oid_fromstr(&base, x->info.base);
		if (sess_tree_of(repo, &base, &prev_tree) == 0 &&
		    git_oid_equal(git_tree_id(prev_tree), &tid)) {
			r = 0;
			goto out;
		}
	}
	r = -EIO;
	if (git_tree_lookup(&tree, repo, &tid) < 0 || !sess_spd_sig(&sig))
		goto out;
	if (x->ck_paths && !x->ck_whole && prev_tree &&
	    git_oid_equal(&x->ck_paths_base, git_tree_id(prev_tree))) {
		/* The names the watch gave, as tree_updated found them. */
		p->paths = steal_ptr(x->ck_paths);
		p->files = x->ck_npaths;
	} else {
		p->paths = sess_changed_paths(repo, prev_tree, tree, &p->files);
	}
	snprintf(msg, sizeof(msg),
		 "spd checkpoint %u of session %s\n\n%s\njournal row %lld\n",
		 p->n + 1, x->info.id, p->what, (long long)p->row);
	{
		const git_commit *parents[1] = {prev};

		if (git_commit_create(&p->cid, repo, NULL, sig, sig, NULL, msg,
				      tree, prev ? 1 : 0, parents) < 0)
			goto out;
	}
	/* A ref of spd's own keeps the checkpoints from git gc; never the
	 * agent's branch, never a branch or tag the guard watches. */
	snprintf(ref, sizeof(ref), "refs/spd/checkpoints/%s", x->info.id);
	{
		git_reference *out = NULL;

		if (git_reference_create(&out, repo, ref, &p->cid, 1,
					 "spd: checkpoint") < 0)
			goto out;
		git_reference_free(out);
	}
	r = 1;
out:
	git_signature_free(sig);
	git_tree_free(tree);
	git_tree_free(prev_tree);
	git_commit_free(prev);
	/* repo is the session's (worktree_tree). */
	return r;
}

/* ck_make's r, made a checkpoint: its row and journal event.  1 and
 * *ret_n, 0 or -errno.  p is freed. */
static int ck_finish(struct session_store *s, struct sess *x, struct ck_plan *p,
		     int r, unsigned *ret_n)
{
	if (r == 1)
		r = ckpt_insert(s, x->info.id, p->n + 1, &p->cid, p->row,
				p->what, p->files) < 0
			? -EIO
			: 2;
	if (r == 2) {
		sess_journal(s, x->info.id, "session.checkpoint",
			     json_pack("{s:i, s:s, s:I, s:o*, s:s}", "n",
				       (int)(p->n + 1), "commit",
				       git_oid_tostr_s(&p->cid), "journal_row",
				       (json_int_t)p->row, "files",
				       steal_ptr(p->paths), "read",
				       x->ck_whole ? "all" : "changes"),
			     "checkpoint %u: %zu file%s changed", p->n + 1,
			     p->files, p->files == 1 ? "" : "s");
		*ret_n = p->n + 1;
		r = 1;
	}
	ck_plan_free(p);
	return r;
}
/* A checkpoint of x's worktree on the loop: 1 and *ret_n when one was
 * taken, 0 when the worktree is as the last checkpoint has it. */
int sess_checkpoint(struct session_store *s, struct sess *x, int64_t row,
		    const char *what, enum wt_read how, unsigned *ret_n)
{
	struct ck_plan p;
	int r = ck_prep(s, x, row, what, how, &p);

	return r < 0 ? r : ck_finish(s, x, &p, ck_make(s, x, &p), ret_n);
}

/* The checkpoint asked for waits (for the watch, or for the one out):
 * -EINPROGRESS. */
static int ck_defer(struct sess *x, int64_t row, const char *what)
{
	char *w = strdup(what ? what : "");

	if (!w)
		return -ENOMEM;
	free(x->ck_def_what);
	x->ck_def_what = w;
	x->ck_def_row = row;
	x->ck_deferred = true;
	return -EINPROGRESS;
}

static void ck_def_clear(struct sess *x)
{
	free(x->ck_def_what);
	x->ck_def_what = NULL;
	x->ck_deferred = false;
}

int session_checkpoint(struct session_store *s, const char *id, int64_t row,
		       const char *what, unsigned *ret_n)
{
	struct sess *x = NULL;
	unsigned n = 0;
	int r = sess_live_worktree(s, id, &x);

	if (r != 0)
		return r < 0 ? r : 0;
	if (x->runs > 0)
		return -EBUSY; /* the last run to end takes it */
	if (x->reading)
		return -EBUSY; /* the end commits what it read */
	if (x->ck_out)
		return ck_defer(x, row, what); /* after the one out */
	r = sess_checkpoint(s, x, row, what, WT_WAIT, &n);
	/* The watch is being made: the checkpoint is taken once it is
	 * (session_checkpoint_deferred), never read whole here. */
	if (r == -EINPROGRESS)
		return ck_defer(x, row, what);
	if (r >= 0)
		ck_def_clear(x);
	if (r == 1 && ret_n)
		*ret_n = n;
	return r;
}

struct session_ckjob {
	struct session_store *s;
	struct sess *x; /* kept by x->ck_out: no end frees it meanwhile */
	struct ck_plan p;
	int r;
	char err[sizeof(((struct session_store *)0)->err)];
};

int session_checkpoint_begin(struct session_store *s, const char *id,
			     int64_t row, const char *what,
			     struct session_ckjob **ret)
{
	struct sess *x = NULL;
	struct session_ckjob *j;
	int r = sess_live_worktree(s, id, &x);

	*ret = NULL;
	if (r != 0)
		return r < 0 ? r : 0;
	if (x->runs > 0 || x->reading)
		return -EBUSY;
	if (x->ck_out || s->closing)
		return ck_defer(x, row, what);
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	r = ck_prep(s, x, row, what, WT_WAIT, &j->p);
	if (r < 0) {
		free(j);
		return r == -EINPROGRESS ? ck_defer(x, row, what) : r;
	}
	ck_def_clear(x);
	j->s = s;
	j->x = x;
	x->ck_out = true;
	s->aside++;
	*ret = j;
	return 1;
}

void session_checkpoint_work(struct session_ckjob *j)
{
	sess_seterr_to(j->err, sizeof(j->err));
	j->r = ck_make(j->s, j->x, &j->p);
	sess_seterr_to(NULL, 0);
}

const char *session_checkpoint_id(const struct session_ckjob *j)
{
	return j->x->info.id;
}

int session_checkpoint_end(struct session_ckjob *j, unsigned *ret_n)
{
	struct session_store *s = j->s;
	unsigned n = 0;
	int r;

	j->x->ck_out = false;
	if (s->closing) {
		/* spd is stopping: the commit is made and spd's ref moved,
		 * but no row is written now.  The index, kept at the close,
		 * has what was read; the next checkpoint after the start
		 * records it against the last row. */
		ck_plan_free(&j->p);
		r = -ESHUTDOWN;
	} else {
		s->err[0] = '\0';
		if (j->r < 0)
			sess_seterr(s, "%s", j->err);
		r = ck_finish(s, j->x, &j->p, j->r, &n);
		if (r == 1 && ret_n)
			*ret_n = n;
	}
	free(j);
	s->aside--;
	sess_store_closed_maybe(s);
	return r;
}

bool session_checkpoint_out(struct session_store *s, const char *id)
{
	struct sess *x = s ? sess_find(s, id) : NULL;

	return x && x->ck_out;
}

bool session_checkpoint_pending(struct session_store *s, const char *id)
{
	struct sess *x = sess_find(s, id);

	return x && (x->ck_deferred || x->ck_out);
}

unsigned session_checkpoint_deferred(struct session_store *s,
				     session_ck_take_fn take, void *data)
{
	unsigned left = 0;

	for (struct sess *x = s->list; x; x = x->next) {
		char *what;
		int r;

		if (!x->ck_deferred)
			continue;
		if (x->reading || x->ck_out) {
			left++; /* its index is on another thread */
			continue;
		}
		if (x->runs > 0 || x->info.state != SESSION_ACTIVE) {
			/* A run's end takes it; an ended session's end read
			 * the worktree whole. */
			if (x->info.state != SESSION_ACTIVE)
				ck_def_clear(x);
			continue;
		}
		what = x->ck_def_what;
		x->ck_def_what = NULL;
		x->ck_deferred = false;
		if (take) {
			take(data, x->info.id, x->ck_def_row, what);
			r = x->ck_deferred ? -EINPROGRESS : 0;
		} else {
			r = session_checkpoint(s, x->info.id, x->ck_def_row,
					       what, NULL);
		}
		free(what);
		if (r == -EINPROGRESS)
			left++;
	}
	return left;
}

/* ---- restore: what is there now checkpointed, then the checkout ---- */

struct session_restorejob {
	struct session_store *s;
	struct sess *x; /* kept by x->ck_out: no end frees it meanwhile */
	unsigned n;
	git_oid oid;	  /* checkpoint n's commit */
	struct ck_plan p; /* the checkpoint of what is there now */
	int ck, r;	  /* ck_make's answer; the checkout's */
	bool saved_done;  /* that checkpoint recorded: the checkout next */
	unsigned saved;	  /* its number, 0 when there was nothing new */
	char err[sizeof(((struct session_store *)0)->err)];
};

/* Whether x's worktree may be restored now: 0, or -errno with s->err. */
static int restore_usable(struct session_store *s, struct sess *x,
			  const char *id)
{
	if (!x)
		return -ENOENT;
	if (x->info.mode != SESSION_MODE_WORKTREE ||
	    x->info.state == SESSION_ENDED) {
		sess_seterr(s, "session %s has no worktree to restore", id);
		return -EINVAL;
	}
	if (x->runs > 0) {
		sess_seterr(s,
			    "session %s has %u run%s in flight; restore "
			    "once they end",
			    id, x->runs, x->runs == 1 ? "" : "s");
		return -EBUSY;
	}
	if (x->reading) {
		sess_seterr(s,
			    "session %s is ending: its worktree is being "
			    "read for its end",
			    id);
		return -EBUSY;
	}
	if (x->ck_out) {
		sess_seterr(s,
			    "session %s: a checkpoint of its worktree is "
			    "being taken; restore once it is",
			    id);
		return -EBUSY;
	}
	if (s->closing) {
		sess_seterr(s, "spd is stopping: nothing was restored");
		return -ESHUTDOWN;
	}
	return 0;
}

/* Checkpoint n's commit: 0, or -EINVAL with s->err. */
static int restore_oid(struct session_store *s, const char *id, unsigned n,
		       git_oid *ret)
{
	sqlite3_stmt *st = NULL;
	int r;

	if (sqlite3_prepare_v2(s->db,
			       "SELECT oid FROM checkpoints WHERE session=? "
			       "AND n=?",
			       -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	sess_bind_text(st, 1, id);
	sqlite3_bind_int(st, 2, (int)n);
	r = sqlite3_step(st) == SQLITE_ROW &&
		    git_oid_fromstr(
			ret, (const char *)sqlite3_column_text(st, 0)) == 0
		? 0
		: -ENOENT;
	sqlite3_finalize(st);
	if (r < 0)
		sess_seterr(s,
			    "session %s has no checkpoint %u (spctl "
			    "session log %s lists them)",
			    id, n, id);
	return r < 0 ? -EINVAL : 0;
}

int session_restore_begin(struct session_store *s, const char *id, unsigned n,
			  struct session_restorejob **ret)
{
	struct sess *x = sess_find(s, id);
	struct session_restorejob *j;
	char what[64];
	int r;

	*ret = NULL;
	if (sess_git_up(s) < 0)
		return -EIO;
	s->err[0] = '\0';
	r = restore_usable(s, x, id);
	if (r < 0)
		return r;
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	r = restore_oid(s, id, n, &j->oid);
	/* What is there now is a checkpoint first: a restore is undone by
	 * restoring that one. */
	snprintf(what, sizeof(what), "before restoring checkpoint %u", n);
	x->ck_fresh = false;
	if (r == 0)
		r = ck_prep(s, x, 0, what, WT_CHANGES, &j->p);
	if (r < 0) {
		free(j);
		return r;
	}
	j->s = s;
	j->x = x;
	j->n = n;
	x->ck_out = true;
	s->aside++;
	*ret = j;
	return 1;
}

/* The worktree as checkpoint j->n has it: 0 or -EIO. */
static int restore_checkout(struct session_restorejob *j)
{
	git_repository *repo = j->x->ck_repo;
	git_commit *c = NULL;
	git_index *idx = NULL;
	git_checkout_options co;
	int r = 0;

	git_checkout_options_init(&co, GIT_CHECKOUT_OPTIONS_VERSION);
	/* FORCE over spd's index, which holds every file the worktree has
	 * (the checkpoint just read it): files the checkpoint lacks go,
	 * changed ones are put back; ignored files stay. */
	co.checkout_strategy = GIT_CHECKOUT_FORCE;
	if (!repo || git_commit_lookup(&c, repo, &j->oid) < 0 ||
	    git_checkout_tree(repo, (const git_object *)c, &co) < 0) {
		sess_seterr(j->s, "cannot restore checkpoint %u: %s", j->n,
			    sess_git_msg());
		r = -EIO;
	} else if (git_repository_index(&idx, repo) == 0) {
		git_index_write(idx);
		git_index_free(idx);
	}
	git_commit_free(c);
	return r;
}

void session_restore_work(struct session_restorejob *j)
{
	sess_seterr_to(j->err, sizeof(j->err));
	if (!j->saved_done)
		j->ck = ck_make(j->s, j->x, &j->p);
	else
		j->r = restore_checkout(j);
	sess_seterr_to(NULL, 0);
}

const char *session_restore_id(const struct session_restorejob *j)
{
	return j->x->info.id;
}

/* The checkpoint of what was there, recorded: 1 for the checkout next,
 * or -errno (nothing restored). */
static int restore_saved(struct session_restorejob *j)
{
	struct session_store *s = j->s;
	int r = ck_finish(s, j->x, &j->p, j->ck, &j->saved);

	j->saved_done = true;
	if (r < 0 && j->ck < 0)
		sess_seterr(s, "%s", j->err);
	else if (r < 0)
		sess_seterr(s,
			    "cannot record what the worktree holds before the "
			    "restore: nothing was restored");
	else if (s->closing)
		sess_seterr(s, "spd is stopping: nothing was restored%s",
			    j->saved ? " (what was there is a checkpoint)"
				     : "");
	if (r < 0)
		return r;
	return s->closing ? -ESHUTDOWN : 1;
}

int session_restore_end(struct session_restorejob *j, unsigned *ret_saved)
{
	struct session_store *s = j->s;
	struct sess *x = j->x;
	int r;

	s->err[0] = '\0';
	if (!j->saved_done) {
		r = restore_saved(j);
		if (r == 1)
			return 1; /* x->ck_out still set */
	} else if (j->r < 0) {
		sess_seterr(s, "%s", j->err);
		r = j->r;
	} else {
		/* Written even as spd stops: the journal closes only after
		 * the store (agent_stop). */
		x->ck_tree_set = false; /* the index moved: write it next */
		sess_journal(s, x->info.id, "session.restore",
			     json_pack("{s:i, s:i}", "n", (int)j->n, "saved",
				       (int)j->saved),
			     "worktree restored to checkpoint %u", j->n);
		r = 0;
		if (ret_saved)
			*ret_saved = j->saved;
	}
	x->ck_out = false;
	free(j);
	s->aside--;
	sess_store_closed_maybe(s);
	return r;
}

int session_restore(struct session_store *s, const char *id, unsigned n,
		    unsigned *ret_saved)
{
	struct session_restorejob *j = NULL;
	int r = session_restore_begin(s, id, n, &j);

	while (r == 1) {
		session_restore_work(j);
		r = session_restore_end(j, ret_saved);
	}
	return r;
}

json_t *session_checkpoints(struct session_store *s, const char *id)
{
	sqlite3_stmt *st = NULL;
	json_t *a;

	if (!sess_find(s, id))
		return NULL;
	a = json_array();
	if (!a || sqlite3_prepare_v2(s->db,
				     "SELECT n, oid, journal_row, what, "
				     "files, at FROM checkpoints WHERE "
				     "session=? ORDER BY n",
				     -1, &st, NULL) != SQLITE_OK) {
		json_decref(a);
		return NULL;
	}
	sess_bind_text(st, 1, id);
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *what = (const char *)sqlite3_column_text(st, 3);

		json_array_append_new(
		    a, json_pack("{s:i, s:s, s:I, s:s, s:I, s:I}", "n",
				 sqlite3_column_int(st, 0), "commit",
				 (const char *)sqlite3_column_text(st, 1),
				 "journal_row",
				 (json_int_t)sqlite3_column_int64(st, 2),
				 "what", what ? what : "", "files",
				 (json_int_t)sqlite3_column_int64(st, 4), "at",
				 (json_int_t)sqlite3_column_int64(st, 5)));
	}
	sqlite3_finalize(st);
	return a;
}

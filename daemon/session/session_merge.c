/*
 * Sessions, the merge: the session's branch into the operator's
 * checkout, once the checks passed (daemon/methods/m_session.c runs them
 * first).  Refused, saying why, when the checkout has changes, when the
 * target moved while the checks ran, or when the merge conflicts; a
 * fast-forward where the target has not moved since the base, else a
 * merge commit, or with squash one commit on top of the target.  No hook
 * runs: libgit2 has none.  Part of the session module (session_priv.h);
 * see session.h.
 */
#include <errno.h>
#include <git2.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/paths.h"
#include "common/util.h"
#include "daemon/session/session.h"
#include "daemon/session/session_priv.h"

/* Conflicting paths named in a refusal. */
#define MERGE_CONFLICTS_SHOWN 20

/* The target branch's full ref name (into, or the branch checked out in
 * the operator's checkout) in ref. */
static int target_ref(struct session_store *s, git_repository *repo,
		      const char *into, char *ref, size_t len)
{
	git_reference *head = NULL;

	if (into) {
		snprintf(ref, len, "refs/heads/%s", into);
		return 0;
	}
	if (git_repository_head(&head, repo) < 0 ||
	    !git_reference_is_branch(head)) {
		git_reference_free(head);
		sess_seterr(s, "the checkout's HEAD is not on a branch: name "
			       "one with --into BRANCH");
		return -EINVAL;
	}
	snprintf(ref, len, "%s", git_reference_name(head));
	git_reference_free(head);
	return 0;
}

/* The operator's checkout at path (any thread: the error where
 * sess_seterr_to says). */
static int open_checkout(struct session_store *s, const char *path,
			 git_repository **ret)
{
	if (git_repository_open_ext(ret, path, GIT_REPOSITORY_OPEN_NO_SEARCH,
				    NULL) < 0) {
		sess_seterr(s, "%s: cannot open the repository: %s", path,
			    sess_git_msg());
		return -EIO;
	}
	return 0;
}

/* The start of a merge call: a worktree session.  0 and *ret, -ENOENT,
 * -EIO, or -EINVAL in place (nothing to merge). */
static int merge_enter(struct session_store *s, const char *id,
		       struct sess **ret)
{
	struct sess *x = sess_find(s, id);

	if (sess_git_up(s) < 0)
		return -EIO;
	s->err[0] = '\0';
	if (!x)
		return -ENOENT;
	if (x->info.mode != SESSION_MODE_WORKTREE) {
		sess_seterr(s,
			    "session %s works in place: its work is in the "
			    "checkout already, there is nothing to merge",
			    id);
		return -EINVAL;
	}
	*ret = x;
	return 0;
}

/* The target branch's full name in ref and its tip in *ret: 0, or
 * -EINVAL with the error set. */
static int target_tip(struct session_store *s, const struct sess *x,
		      git_repository *repo, const char *into, char *ref,
		      size_t len, git_oid *ret)
{
	int r = target_ref(s, repo, into, ref, len);

	if (r < 0)
		return r;
	if (git_reference_name_to_id(ret, repo, ref) < 0) {
		sess_seterr(s, "no branch %s in %s", ref + 11, x->info.repo);
		return -EINVAL;
	}
	return 0;
}

int session_merge_target(struct session_store *s, const char *id,
			 const char *into, char *ret_hex)
{
	struct sess *x = NULL;
	git_repository *repo = NULL;
	char ref[512];
	git_oid oid;
	int r;

	r = merge_enter(s, id, &x);
	if (r < 0)
		return r;
	r = open_checkout(s, x->info.repo, &repo);
	if (r < 0)
		return r;
	r = target_tip(s, x, repo, into, ref, sizeof(ref), &oid);
	if (r == 0)
		git_oid_tostr(ret_hex, GIT_OID_HEXSZ + 1, &oid);
	git_repository_free(repo);
	return r;
}

int session_branch_head(struct session_store *s, const char *id, char *ret_hex)
{
	struct sess *x = sess_find(s, id);
	git_repository *repo = NULL;
	git_oid tip;
	int r = -EIO;

	if (!x)
		return -ENOENT;
	if (!x->info.branch)
		return -EINVAL;
	if (sess_git_up(s) == 0 && sess_open_bare(s, x, &repo) == 0 &&
	    sess_branch_tip(s, x, repo, &tip) == 0) {
		git_oid_tostr(ret_hex, GIT_OID_HEXSZ + 1, &tip);
		r = 0;
	}
	git_repository_free(repo);
	return r;
}

/* The checkout's own changes (staged or not; untracked files are left
 * to the checkout, which refuses to overwrite one). */
static int checkout_dirty(struct session_store *s, git_repository *repo)
{
	git_status_options so;
	git_status_list *sl = NULL;
	size_t n;

	git_status_options_init(&so, GIT_STATUS_OPTIONS_VERSION);
	so.show = GIT_STATUS_SHOW_INDEX_AND_WORKDIR;
	so.flags = GIT_STATUS_OPT_EXCLUDE_SUBMODULES;
	if (git_status_list_new(&sl, repo, &so) < 0) {
		sess_seterr(s, "git status: %s", sess_git_msg());
		return -EIO;
	}
	n = git_status_list_entrycount(sl);
	if (n > 0) {
		const git_status_entry *e = git_status_byindex(sl, 0);
		const git_diff_delta *d =
		    e->head_to_index ? e->head_to_index : e->index_to_workdir;

		sess_seterr(s,
			    "the checkout has %zu changed path%s (%s%s): "
			    "commit or stash them, then merge",
			    n, n == 1 ? "" : "s", d->new_file.path,
			    n > 1 ? ", ..." : "");
	}
	git_status_list_free(sl);
	return n > 0 ? -EBUSY : 0;
}

/* The merged tree of target and tip: 0 and *ret_tree, -ENOTEMPTY on
 * conflicts (listed in the store's error). */
static int merge_tree(struct session_store *s, git_repository *repo,
		      git_commit *target, git_commit *tip, git_oid *ret_tree)
{
	git_merge_options mo;
	git_index *idx = NULL;
	int r = -EIO;

	git_merge_options_init(&mo, GIT_MERGE_OPTIONS_VERSION);
	if (git_merge_commits(&idx, repo, target, tip, &mo) < 0) {
		sess_seterr(s, "merge: %s", sess_git_msg());
		return -EIO;
	}
	if (git_index_has_conflicts(idx)) {
		git_index_conflict_iterator *it = NULL;
		const git_index_entry *a, *o, *t;
		char list[768] = "";
		size_t used = 0, n = 0;

		if (git_index_conflict_iterator_new(&it, idx) == 0)
			while (git_index_conflict_next(&a, &o, &t, it) == 0) {
				const char *p = o ? o->path : t ? t->path : "?";
				int k;

				if (n++ >= MERGE_CONFLICTS_SHOWN)
					continue;
				k = snprintf(list + used, sizeof(list) - used,
					     "%s%s", used ? ", " : "", p);
				if (k > 0 && (size_t)k < sizeof(list) - used)
					used += (size_t)k;
			}
		git_index_conflict_iterator_free(it);
		sess_seterr(s,
			    "the merge conflicts in %zu path%s (%s): merge "
			    "by hand with git merge, or end the session and "
			    "rebase its branch",
			    n, n == 1 ? "" : "s", list);
		r = -ENOTEMPTY;
		goto out;
	}
	if (git_index_write_tree_to(ret_tree, idx, repo) < 0) {
		sess_seterr(s, "merge: %s", sess_git_msg());
		goto out;
	}
	r = 0;
out:
	git_index_free(idx);
	return r;
}

/* The commit to put at the target: tip itself (fast-forward), a merge
 * commit, or a squash.  *ret_ff says which. */
static int merge_result(struct session_store *s, const char *branch,
			const char *id, git_repository *repo,
			git_commit *target, git_commit *tip, bool squash,
			git_oid *ret, bool *ret_ff)
{
	git_signature *sig = NULL;
	git_tree *tree = NULL;
	git_oid tid;
	char msg[1024];
	bool ff = git_graph_descendant_of(repo, git_commit_id(tip),
					  git_commit_id(target)) == 1;
	int r;

	*ret_ff = false;
	if (ff && !squash) {
		*ret = *git_commit_id(tip);
		*ret_ff = true;
		return 0;
	}
	if (ff)
		tid = *git_commit_tree_id(tip);
	else if ((r = merge_tree(s, repo, target, tip, &tid)) < 0)
		return r;
	/* The operator's own identity, as git would take it. */
	if (git_signature_default(&sig, repo) < 0 &&
	    git_signature_now(&sig, "spd", "spd@localhost") < 0)
		return -EIO;
	if (squash)
		snprintf(msg, sizeof(msg),
			 "%s (squashed from %s)\n\nspd session %s: the "
			 "branch's commits in one.\n",
			 git_commit_summary(tip) ?: "work", branch, id);
	else
		snprintf(msg, sizeof(msg), "Merge %s (spd session %s)\n",
			 branch, id);
	r = -EIO;
	if (git_tree_lookup(&tree, repo, &tid) == 0) {
		const git_commit *parents[2] = {target, tip};

		if (git_commit_create(ret, repo, NULL, sig, sig, NULL, msg,
				      tree, squash ? 1 : 2, parents) == 0)
			r = 0;
	}
	if (r < 0)
		sess_seterr(s, "cannot make the merge commit: %s",
			    sess_git_msg());
	git_tree_free(tree);
	git_signature_free(sig);
	return r;
}

/* The files of result, when ref is the branch checked out (first, so
 * that a refusal changes nothing); or a refusal when another worktree
 * has it checked out.  The ref itself moves after (merge_land). */
static int merge_files(struct session_store *s, git_repository *repo,
		       const char *ref, const git_oid *result)
{
	git_reference *head = NULL, *br = NULL;
	git_commit *c = NULL;
	bool checked_out = git_repository_head(&head, repo) == 0 &&
			   strcmp(git_reference_name(head), ref) == 0;
	int r = 0;

	git_reference_free(head);
	if (checked_out) {
		git_checkout_options co;

		git_checkout_options_init(&co, GIT_CHECKOUT_OPTIONS_VERSION);
		co.checkout_strategy = GIT_CHECKOUT_SAFE;
		if (git_commit_lookup(&c, repo, result) < 0 ||
		    git_checkout_tree(repo, (const git_object *)c, &co) < 0) {
			sess_seterr(s,
				    "the checkout refused the merge (a file "
				    "it would overwrite?): %s",
				    sess_git_msg());
			r = -EIO;
		}
		git_commit_free(c);
		return r;
	}
	if (git_reference_lookup(&br, repo, ref) == 0) {
		int busy = git_branch_is_checked_out(br);

		git_reference_free(br);
		if (busy == 1) {
			sess_seterr(s,
				    "%s is checked out in another worktree: "
				    "merge there",
				    ref + 11);
			return -EBUSY;
		}
	}
	return 0;
}

struct session_merging {
	struct session_store *s;
	char id[SESSION_ID_LEN + 1];
	char *repo, *gitdir, *branch;
	char ref[512];
	git_oid toid, tipoid, result;
	bool squash, ff;
	int r;
	char err[sizeof(((struct session_store *)0)->err)];
};

static void merge_do_free(struct session_merging *j)
{
	free(j->repo);
	free(j->gitdir);
	free(j->branch);
	free(j);
}

int session_merge_begin(struct session_store *s, const char *id,
			const char *into, bool squash,
			const char *expect_target, const char *expect_tip,
			struct session_merging **ret)
{
	struct session_merging *j = NULL;
	struct sess *x = NULL;
	git_repository *repo = NULL;
	int r;

	r = merge_enter(s, id, &x);
	if (r < 0)
		return r;
	/* The caller took the agent's commits before the checks; what is
	 * merged is what they checked (expect_tip), never a commit that
	 * came while they ran. */
	r = open_checkout(s, x->info.repo, &repo);
	if (r < 0)
		return r;
	r = -ENOMEM;
	if (!(j = calloc(1, sizeof(*j))) || !(j->repo = strdup(x->info.repo)) ||
	    !(j->gitdir = strdup(x->info.gitdir)) ||
	    !(j->branch = strdup(x->info.branch)))
		goto out;
	r = target_tip(s, x, repo, into, j->ref, sizeof(j->ref), &j->toid);
	if (r < 0)
		goto out;
	if (expect_target &&
	    strcmp(git_oid_tostr_s(&j->toid), expect_target) != 0) {
		sess_seterr(s,
			    "%s moved while the checks ran (from %.8s to "
			    "%.8s): merge again",
			    j->ref + 11, expect_target,
			    git_oid_tostr_s(&j->toid));
		r = -ESTALE;
		goto out;
	}
	r = sess_branch_tip(s, x, repo, &j->tipoid);
	if (r < 0)
		goto out;
	if (expect_tip && strcmp(git_oid_tostr_s(&j->tipoid), expect_tip)) {
		sess_seterr(
		    s,
		    "%s moved while the checks ran (from %.8s to %.8s): "
		    "merge again to check what it holds now",
		    x->info.branch, expect_tip, git_oid_tostr_s(&j->tipoid));
		r = -ESTALE;
		goto out;
	}
	if (git_oid_equal(&j->toid, &j->tipoid) ||
	    git_graph_descendant_of(repo, &j->toid, &j->tipoid) == 1) {
		sess_seterr(s, "%s has nothing %s lacks", x->info.branch,
			    j->ref + 11);
		r = -EALREADY;
		goto out;
	}
	snprintf(j->id, sizeof(j->id), "%s", id);
	j->s = s;
	j->squash = squash;
	r = 0;
out:
	git_repository_free(repo);
	if (r < 0) {
		if (j)
			merge_do_free(j);
		return r;
	}
	s->aside++;
	*ret = j;
	return 0;
}

void session_merge_work(struct session_merging *j)
{
	git_repository *repo = NULL;
	git_commit *target = NULL, *tip = NULL;

	sess_seterr_to(j->err, sizeof(j->err));
	j->r = open_checkout(j->s, j->repo, &repo);
	if (j->r < 0)
		goto out;
	j->r = checkout_dirty(j->s, repo);
	if (j->r < 0)
		goto out;
	j->r = -EIO;
	if (git_commit_lookup(&target, repo, &j->toid) < 0 ||
	    git_commit_lookup(&tip, repo, &j->tipoid) < 0) {
		sess_seterr(j->s, "merge: %s", sess_git_msg());
		goto out;
	}
	j->r = merge_result(j->s, j->branch, j->id, repo, target, tip,
			    j->squash, &j->result, &j->ff);
	if (j->r == 0)
		j->r = merge_files(j->s, repo, j->ref, &j->result);
out:
	git_commit_free(target);
	git_commit_free(tip);
	git_repository_free(repo);
	sess_seterr_to(NULL, 0);
}

/* The ref moved to the result, on the loop: guards of the repository's
 * other sessions are told at once (no check of theirs sees the ref
 * moved before). */
int session_merge_end(struct session_merging *j, json_t **ret)
{
	struct session_store *s = j->s;
	git_repository *repo = NULL;
	git_reference *out = NULL;
	char why[256], from[GIT_OID_HEXSZ + 1], to[GIT_OID_HEXSZ + 1];
	int r = j->r;

	if (r < 0) {
		sess_seterr(s, "%s", j->err);
		goto out;
	}
	snprintf(why, sizeof(why), "spd: merge %s (session %s)", j->branch,
		 j->id);
	r = open_checkout(s, j->repo, &repo);
	if (r < 0)
		goto out;
	r = -EIO;
	if (git_reference_create_matching(&out, repo, j->ref, &j->result, 1,
					  &j->toid, why) < 0) {
		sess_seterr(s, "cannot move %s: %s", j->ref, sess_git_msg());
		goto out;
	}
	sess_note_ref(s, j->gitdir, j->ref + 11);
	git_oid_tostr(from, sizeof(from), &j->toid);
	git_oid_tostr(to, sizeof(to), &j->result);
	*ret = json_pack("{s:s, s:s, s:s, s:s, s:b, s:b}", "into", j->ref + 11,
			 "branch", j->branch, "from", from, "to", to,
			 "fast_forward", j->ff, "squash", j->squash);
	sess_journal(s, j->id, "session.merge", json_incref(*ret),
		     "%s merged into %s (%s)", j->branch, j->ref + 11,
		     j->ff	 ? "fast-forward"
		     : j->squash ? "squash"
				 : "merge commit");
	r = 0;
out:
	git_reference_free(out);
	git_repository_free(repo);
	merge_do_free(j);
	s->aside--;
	sess_store_closed_maybe(s);
	return r;
}

int session_merge(struct session_store *s, const char *id, const char *into,
		  bool squash, const char *expect_target,
		  const char *expect_tip, json_t **ret)
{
	struct session_merging *j = NULL;
	int r = session_merge_begin(s, id, into, squash, expect_target,
				    expect_tip, &j);

	if (r < 0)
		return r;
	session_merge_work(j);
	return session_merge_end(j, ret);
}

/* ---- what the merge's checks run on ---- */

static char *merge_dir(struct session_store *s, const char *id)
{
	char *p = NULL;

	if (asprintf(&p, "%s/merge/%s", s->state_dir, id) < 0)
		return NULL;
	return p;
}

/* Where a merge's checkout goes when its checks are done, to be removed
 * on another thread: a name no session's checkout has. */
static char *merge_done_dir(struct session_store *s, const char *id)
{
	char *p = NULL;

	if (asprintf(&p, "%s/merge/.done-%s", s->state_dir, id) < 0)
		return NULL;
	return p;
}

struct session_merge_job {
	struct session_store *s;
	struct session_verify_plan *p;
	char *dir, *done, *gitdir, *branch;
	git_oid tip;
	int r;
	char err[sizeof(((struct session_store *)0)->err)];
};

static void merge_job_free(struct session_merge_job *j)
{
	session_verify_plan_free(j->p);
	free(j->dir);
	free(j->done);
	free(j->gitdir);
	free(j->branch);
	free(j);
}

int session_merge_plan_begin(struct session_store *s, const char *id,
			     struct session_merge_job **ret)
{
	struct session_merge_job *j;
	struct sess *x = sess_find(s, id);
	git_repository *repo = NULL;
	char *top = NULL;
	int r;

	if (!x)
		return -ENOENT;
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->s = s;
	r = session_verify_plan(s, id, &j->p);
	if (r < 0)
		goto out;
	r = -ENOMEM;
	if (asprintf(&top, "%s/merge", s->state_dir) < 0 ||
	    !(j->dir = merge_dir(s, id)) ||
	    !(j->done = merge_done_dir(s, id)) ||
	    !(j->gitdir = strdup(x->info.gitdir)) ||
	    !(j->branch = strdup(x->info.branch)))
		goto out;
	r = sess_private_dir(s, top);
	if (r < 0)
		goto out;
	/* The tip now, on the loop: the checks stand for it. */
	r = -EIO;
	if (sess_open_bare(s, x, &repo) < 0 ||
	    sess_branch_tip(s, x, repo, &j->tip) < 0) {
		sess_seterr(s, "cannot read %s: %s", x->info.branch,
			    sess_git_msg());
		goto out;
	}
	r = 0;
out:
	git_repository_free(repo);
	free(top);
	if (r < 0) {
		merge_job_free(j);
		return r;
	}
	s->aside++;
	*ret = j;
	return 0;
}

void session_merge_plan_work(struct session_merge_job *j)
{
	git_repository *repo = NULL;
	git_commit *c = NULL;
	git_checkout_options co;

	sess_seterr_to(j->err, sizeof(j->err));
	sess_rm_tree(j->dir);
	if (j->done)
		sess_rm_tree(j->done); /* an earlier one's, not removed */
	if (mkdir(j->dir, 0700) < 0) {
		j->r = -errno;
		sess_seterr(j->s, "%s: %s", j->dir, strerror(errno));
		sess_seterr_to(NULL, 0);
		return;
	}
	j->r = -EIO;
	if (sess_open_gitdir(j->s, j->gitdir, &repo) < 0)
		goto out;
	if (git_commit_lookup(&c, repo, &j->tip) < 0) {
		sess_seterr(j->s, "cannot read %s: %s", j->branch,
			    sess_git_msg());
		goto out;
	}
	/* Exactly the branch's tree, where no file of the agent's
	 * uncommitted work is: what the checks pass is what is merged. */
	git_checkout_options_init(&co, GIT_CHECKOUT_OPTIONS_VERSION);
	co.checkout_strategy =
	    GIT_CHECKOUT_FORCE | GIT_CHECKOUT_DONT_UPDATE_INDEX;
	co.target_directory = j->dir;
	if (git_checkout_tree(repo, (const git_object *)c, &co) < 0) {
		sess_seterr(j->s, "cannot check out %s for the checks: %s",
			    j->branch, sess_git_msg());
		goto out;
	}
	j->r = 0;
out:
	if (j->r < 0)
		sess_rm_tree(j->dir);
	git_commit_free(c);
	git_repository_free(repo);
	sess_seterr_to(NULL, 0);
}

int session_merge_plan_end(struct session_merge_job *j,
			   struct session_verify_plan **ret)
{
	struct session_store *s = j->s;
	struct session_verify_plan *p = j->p;
	int r = j->r;

	if (r < 0) {
		if (j->err[0])
			sess_seterr(s, "%s", j->err);
		goto out;
	}
	free(p->workspace);
	free(p->heldout_dst);
	p->heldout_dst = NULL;
	p->workspace = steal_ptr(j->dir);
	git_oid_tostr(p->commit, sizeof(p->commit), &j->tip);
	if (p->heldout_src && !(p->heldout_dst = paths_join(
				    p->workspace, SESSION_HELDOUT_MOUNT))) {
		sess_rm_tree(p->workspace);
		r = -ENOMEM;
		goto out;
	}
	*ret = steal_ptr(j->p);
out:
	merge_job_free(j);
	s->aside--;
	sess_store_closed_maybe(s);
	return r;
}

int session_merge_plan(struct session_store *s, const char *id,
		       struct session_verify_plan **ret)
{
	struct session_merge_job *j = NULL;
	int r = session_merge_plan_begin(s, id, &j);

	if (r < 0)
		return r;
	session_merge_plan_work(j);
	return session_merge_plan_end(j, ret);
}

void session_merge_plan_done(struct session_store *s, const char *id)
{
	char *dir = merge_dir(s, id);

	/* On the remover's thread when spd has one (10,000 files: 0.1-0.2
	 * s); one left by an earlier merge still there goes here. */
	sess_remove_aside(s, dir, merge_done_dir(s, id));
	free(dir);
}

int session_merged(struct session_store *s, const char *id, char *ret_into,
		   size_t len)
{
	struct sess *x = sess_find(s, id);
	git_repository *repo = NULL;
	git_reference *head = NULL;
	git_oid tip;
	int r = 0;

	if (!x)
		return -ENOENT;
	if (x->info.mode != SESSION_MODE_WORKTREE ||
	    open_checkout(s, x->info.repo, &repo) < 0)
		return 0;
	if (git_repository_head(&head, repo) == 0 &&
	    git_reference_is_branch(head) &&
	    sess_branch_tip(s, x, repo, &tip) == 0 &&
	    git_reference_target(head) &&
	    (git_oid_equal(git_reference_target(head), &tip) ||
	     git_graph_descendant_of(repo, git_reference_target(head), &tip) ==
		 1)) {
		snprintf(ret_into, len, "%s", git_reference_shorthand(head));
		r = 1;
	}
	git_reference_free(head);
	git_repository_free(repo);
	return r;
}

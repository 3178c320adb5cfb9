/*
 * Sessions, the diff: the session's base commit against the files on
 * disk, read through the main repository's git dir, never through the
 * worktree's .git file.  Part of the session module (session_priv.h);
 * see session.h.
 */
#include <errno.h>
#include <git2.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "daemon/session/session.h"
#include "daemon/session/session_priv.h"

/* ---- diff ---- */

struct diff_acc {
	char *buf;
	size_t len, cap;
	bool truncated;
};

static int diff_line(const git_diff_delta *d, const git_diff_hunk *h,
		     const git_diff_line *l, void *data)
{
	struct diff_acc *a = data;
	size_t need = l->content_len + 1;
	bool origin = l->origin == GIT_DIFF_LINE_CONTEXT ||
		      l->origin == GIT_DIFF_LINE_ADDITION ||
		      l->origin == GIT_DIFF_LINE_DELETION;

	if (origin)
		need++;
	if (a->len + need > SESSION_DIFF_MAX) {
		a->truncated = true;
		return 1; /* stop the walk */
	}
	if (a->len + need > a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 65536;
		char *b;

		while (cap < a->len + need)
			cap *= 2;
		b = realloc(a->buf, cap);
		if (!b)
			return -1;
		a->buf = b;
		a->cap = cap;
	}
	if (origin)
		a->buf[a->len++] = l->origin;
	memcpy(a->buf + a->len, l->content, l->content_len);
	a->len += l->content_len;
	a->buf[a->len] = '\0';
	return 0;
}

struct session_diff_job {
	struct session_store *s;
	char *gitdir, *worktree, *branch;
	char base[GIT_OID_HEXSZ + 1];
	bool ended;
	int r;
	char *text;
	bool truncated;
	char err[sizeof(((struct session_store *)0)->err)];
};

int session_diff_begin(struct session_store *s, const char *id,
		       struct session_diff_job **ret)
{
	struct sess *x = sess_find(s, id);
	struct session_diff_job *j;

	if (sess_git_up(s) < 0)
		return -EIO;
	s->err[0] = '\0';
	if (!x)
		return -ENOENT;
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->s = s;
	j->ended = x->info.state == SESSION_ENDED &&
		   x->info.mode == SESSION_MODE_WORKTREE;
	snprintf(j->base, sizeof(j->base), "%s", x->info.base);
	j->gitdir = strdup(x->info.gitdir);
	j->worktree = strdup(x->info.worktree);
	j->branch = strdup(x->info.branch);
	if (!j->gitdir || !j->worktree || !j->branch) {
		free(j->gitdir);
		free(j->worktree);
		free(j->branch);
		free(j);
		return -ENOMEM;
	}
	s->aside++;
	*ret = j;
	return 0;
}

/* The ended session's branch tip against its base (the worktree is
 * gone): what the branch holds. */
static int diff_ended(struct session_diff_job *j, git_repository *repo,
		      git_tree *tree, const git_diff_options *dopt,
		      git_diff **ret)
{
	char ref[SESSION_FEATURE_MAX + 32];
	git_oid tip;
	git_commit *c = NULL;
	git_tree *t = NULL;
	int r = 0;

	snprintf(ref, sizeof(ref), "refs/heads/%s", j->branch);
	if (git_reference_name_to_id(&tip, repo, ref) < 0) {
		sess_seterr(j->s, "branch %s is gone: %s", j->branch,
			    sess_git_msg());
		return -ENOENT;
	}
	if (git_commit_lookup(&c, repo, &tip) < 0 ||
	    git_commit_tree(&t, c) < 0 ||
	    git_diff_tree_to_tree(ret, repo, tree, t, dopt) < 0) {
		sess_seterr(j->s, "git diff: %s", sess_git_msg());
		r = -EIO;
	}
	git_commit_free(c);
	git_tree_free(t);
	return r;
}

void session_diff_work(struct session_diff_job *j)
{
	git_repository *repo = NULL;
	git_commit *base = NULL;
	git_tree *tree = NULL;
	git_diff *diff = NULL;
	git_oid oid;
	git_diff_options dopt;
	struct diff_acc acc = {0};
	int r = -EIO;

	sess_seterr_to(j->err, sizeof(j->err));
	/*
	 * Open the main repository by its git dir and point it at the
	 * worktree, rather than follow the worktree's .git file: that file
	 * is the agent's to rewrite, and it must not choose which
	 * repository spd reads.  The diff is base tree against the files on
	 * disk; it does not use the index.
	 */
	if (sess_open_gitdir(j->s, j->gitdir, &repo) < 0)
		goto out;
	if ((!j->ended &&
	     git_repository_set_workdir(repo, j->worktree, 0) < 0) ||
	    git_oid_fromstr(&oid, j->base) < 0 ||
	    git_commit_lookup(&base, repo, &oid) < 0 ||
	    git_commit_tree(&tree, base) < 0) {
		sess_seterr(j->s, "cannot open the session's repository: %s",
			    sess_git_msg());
		goto out;
	}
	git_diff_options_init(&dopt, GIT_DIFF_OPTIONS_VERSION);
	dopt.flags = GIT_DIFF_INCLUDE_UNTRACKED |
		     GIT_DIFF_RECURSE_UNTRACKED_DIRS |
		     GIT_DIFF_SHOW_UNTRACKED_CONTENT;
	if (j->ended) {
		if ((r = diff_ended(j, repo, tree, &dopt, &diff)) < 0)
			goto out;
		r = -EIO;
	} else if (git_diff_tree_to_workdir(&diff, repo, tree, &dopt) < 0) {
		sess_seterr(j->s, "git diff: %s", sess_git_msg());
		goto out;
	}
	int pr = git_diff_print(diff, GIT_DIFF_FORMAT_PATCH, diff_line, &acc);
	if (pr < 0 && !acc.truncated) {
		sess_seterr(j->s, "git diff: %s", sess_git_msg());
		goto out;
	}
	if (!acc.buf && !(acc.buf = strdup(""))) {
		r = -ENOMEM;
		goto out;
	}
	j->text = steal_ptr(acc.buf);
	j->truncated = acc.truncated;
	r = 0;
out:
	free(acc.buf);
	git_diff_free(diff);
	git_tree_free(tree);
	git_commit_free(base);
	git_repository_free(repo);
	sess_seterr_to(NULL, 0);
	j->r = r;
}

const char *session_diff_text(const struct session_diff_job *j)
{
	return j->r == 0 ? j->text : NULL;
}

int session_diff_end(struct session_diff_job *j, char **ret_text,
		     bool *ret_truncated)
{
	struct session_store *s = j->s;
	int r = j->r;

	if (r == 0) {
		*ret_text = steal_ptr(j->text);
		if (ret_truncated)
			*ret_truncated = j->truncated;
	} else if (j->err[0]) {
		sess_seterr(s, "%s", j->err);
	}
	free(j->text);
	free(j->gitdir);
	free(j->worktree);
	free(j->branch);
	free(j);
	s->aside--;
	sess_store_closed_maybe(s);
	return r;
}

int session_diff(struct session_store *s, const char *id, char **ret_text,
		 bool *ret_truncated)
{
	struct session_diff_job *j = NULL;
	int r = session_diff_begin(s, id, &j);

	if (r < 0)
		return r;
	session_diff_work(j);
	return session_diff_end(j, ret_text, ret_truncated);
}

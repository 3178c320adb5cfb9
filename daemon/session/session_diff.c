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

int session_diff(struct session_store *s, const char *id, char **ret_text,
		 bool *ret_truncated)
{
	struct sess *x = sess_find(s, id);
	git_repository *repo = NULL;
	git_commit *base = NULL;
	git_tree *tree = NULL;
	git_diff *diff = NULL;
	git_oid oid;
	git_diff_options dopt;
	struct diff_acc acc = {0};
	int r = -EIO;
	if (sess_git_up(s) < 0)
		return -EIO;

	s->err[0] = '\0';
	if (!x)
		return -ENOENT;
	bool ended = x->info.state == SESSION_ENDED &&
		     x->info.mode == SESSION_MODE_WORKTREE;
	/*
	 * Open the main repository by its git dir and point it at the
	 * worktree, rather than follow the worktree's .git file: that file
	 * is the agent's to rewrite, and it must not choose which
	 * repository spd reads.  The diff is base tree against the files on
	 * disk; it does not use the index.
	 */
	if (git_repository_open_ext(&repo, x->info.gitdir,
				    GIT_REPOSITORY_OPEN_NO_SEARCH |
					GIT_REPOSITORY_OPEN_BARE,
				    NULL) < 0 ||
	    (!ended &&
	     git_repository_set_workdir(repo, x->info.worktree, 0) < 0) ||
	    git_oid_fromstr(&oid, x->info.base) < 0 ||
	    git_commit_lookup(&base, repo, &oid) < 0 ||
	    git_commit_tree(&tree, base) < 0) {
		sess_seterr(s, "cannot open the session's repository: %s",
			    sess_git_msg());
		goto out;
	}
	git_diff_options_init(&dopt, GIT_DIFF_OPTIONS_VERSION);
	dopt.flags = GIT_DIFF_INCLUDE_UNTRACKED |
		     GIT_DIFF_RECURSE_UNTRACKED_DIRS |
		     GIT_DIFF_SHOW_UNTRACKED_CONTENT;
	if (ended) {
		/* The worktree is gone: what the branch holds. */
		git_oid tip;
		git_commit *c = NULL;
		git_tree *t = NULL;

		if (sess_branch_tip(s, x, repo, &tip) < 0 ||
		    git_commit_lookup(&c, repo, &tip) < 0 ||
		    git_commit_tree(&t, c) < 0 ||
		    git_diff_tree_to_tree(&diff, repo, tree, t, &dopt) < 0) {
			git_commit_free(c);
			git_tree_free(t);
			sess_seterr(s, "git diff: %s", sess_git_msg());
			goto out;
		}
		git_commit_free(c);
		git_tree_free(t);
	} else if (git_diff_tree_to_workdir(&diff, repo, tree, &dopt) < 0) {
		sess_seterr(s, "git diff: %s", sess_git_msg());
		goto out;
	}
	int pr = git_diff_print(diff, GIT_DIFF_FORMAT_PATCH, diff_line, &acc);
	if (pr < 0 && !acc.truncated) {
		sess_seterr(s, "git diff: %s", sess_git_msg());
		goto out;
	}
	if (!acc.buf && !(acc.buf = strdup(""))) {
		r = -ENOMEM;
		goto out;
	}
	*ret_text = steal_ptr(acc.buf);
	if (ret_truncated)
		*ret_truncated = acc.truncated;
	r = 0;
out:
	free(acc.buf);
	git_diff_free(diff);
	git_tree_free(tree);
	git_commit_free(base);
	git_repository_free(repo);
	return r;
}

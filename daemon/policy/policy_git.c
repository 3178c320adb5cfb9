/*
 * The policy's git: the subcommands that read, those that change the
 * repository's state, the destructive and remote ones, and the global
 * options and configuration that would make git run something else.
 * Part of the policy engine (policy_priv.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <git2.h>

#include "common/util.h"
#include "daemon/policy/protected.h"
#include "daemon/policy/policy.h"
#include "daemon/policy/policy_priv.h"

/* ---------------------------------------------------------------- */
/* git                                                               */

static const char *const git_remote_cmds[] = {
    "push",	      "fetch",	    "pull",	   "clone",
    "remote",	      "submodule",  "ls-remote",   "send-email",
    "fetch-pack",     "send-pack",  "upload-pack", "receive-pack",
    "http-fetch",     "http-push",  "svn",	   "p4",
    "request-pull",   "credential", "daemon",	   "instaweb",
    "upload-archive", "imap-send",  "cvsimport",   "cvsexportcommit",
    "cvsserver",      "archimport", "quiltimport",
};
static const char *const git_destructive_cmds[] = {
    "clean", "filter-branch", "filter-repo", "gc",
    "prune", "replace",	      "fast-import",
};
static const char *const git_read_cmds[] = {
    "status",
    "log",
    "diff",
    "show",
    "blame",
    "annotate",
    "ls-files",
    "ls-tree",
    "rev-parse",
    "describe",
    "shortlog",
    "grep",
    "cat-file",
    "rev-list",
    "diff-tree",
    "diff-files",
    "diff-index",
    "merge-base",
    "name-rev",
    "for-each-ref",
    "show-ref",
    "whatchanged",
    "count-objects",
    "check-ignore",
    "check-attr",
    "var",
    "version",
    "help",
    "cherry",
    "show-branch",
    "range-diff",
    "verify-commit",
    "verify-tag",
    "check-ref-format",
    "ls-remote-local",
    "get-tar-commit-id",
    "column",
    "stripspace",
    "fast-export",
};
/* Commands that move the checkout or rewrite refs: refused in in-place
 * mode, where they would act on the operator's own checkout. */
static const char *const git_inplace_cmds[] = {
    "checkout", "switch",	"reset",    "commit", "merge",
    "rebase",	"cherry-pick",	"revert",   "stash",  "branch",
    "tag",	"update-ref",	"worktree", "am",     "apply",
    "restore",	"symbolic-ref", "pull",	    "bisect", "notes",
};
static const char *const git_state_cmds[] = {
    "add",
    "commit",
    "checkout",
    "switch",
    "restore",
    "merge",
    "rebase",
    "cherry-pick",
    "revert",
    "stash",
    "branch",
    "tag",
    "mv",
    "rm",
    "am",
    "apply",
    "init",
    "worktree",
    "update-index",
    "update-ref",
    "symbolic-ref",
    "commit-tree",
    "hash-object",
    "read-tree",
    "write-tree",
    "mktag",
    "mktree",
    "bisect",
    "sparse-checkout",
    "maintenance",
    "rerere",
    "repack",
    "fsck",
    "mergetool",
    "difftool",
    "format-patch",
    "archive",
    "bundle",
    "reset",
    "pack-refs",
    "merge-file",
    "merge-tree",
    "unpack-objects",
    "index-pack",
    "pack-objects",
    "prune-packed",
    "multi-pack-index",
    "commit-graph",
    "citool",
    "gui",
    "gitk",
    "reflog",
    "config",
    "notes",
    "revert",
    "interpret-trailers",
};

/* What an agent commits with, in a worktree session: they act on its
 * own repository (the worktree's .git) and nothing else (a hard reset
 * is refused above, like every destructive command). */
static const char *const git_session_cmds[] = {
    "add", "commit", "restore", "stash", "mv", "rm", "reset",
};

/* Sub-command options that run programs or write files even in an
 * otherwise read-only command. */
static bool git_bad_subopt(const char *a)
{
	static const char *const bad[] = {
	    "--output",	  "--ext-diff",	   "--textconv",
	    "--exec",	  "--paginate",	   "--open-files-in-pager",
	    "--no-index", "--upload-pack", "--receive-pack",
	    "--tool",	  "--extcmd",	   "--run",
	    "--contents",
	};
	size_t n = strcspn(a, "=");

	if (a[0] != '-')
		return false;
	if (a[1] != '-')
		return a[1] == 'O' || (a[1] == 'x' && a[2] == '\0');
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		if (n > 2 && strncmp(a, bad[i], n) == 0)
			return true;
	return false;
}

/* "HEAD:.env", ":path", or a pathspec naming a secret file: the blob's
 * content is the secret's. */
static bool git_secret_arg(const char *a)
{
	const char *colon = strchr(a, ':');
	const char *path = colon ? colon + 1 : a;

	return *path && a[0] != '-' &&
	       protected_match(path) == PROTECTED_SECRET_FILE;
}

/*
 * git's global options before the command, from argv[1]: -C must stay in
 * the workspace (it becomes *cwd, owned when not l->cwd); options that
 * change git's configuration or repository are denied; others not on the
 * known list ask.  Stores the index of the command (or argc) in *ret_i.
 * Returns true when the call is decided (denied, or out of memory).
 */
static bool git_globals(struct cls *c, struct lvl *l, char **cwd, size_t *ret_i)
{
	static const char *const ok_global[] = {
	    "--no-pager",
	    "-P",
	    "--no-replace-objects",
	    "--literal-pathspecs",
	    "--glob-pathspecs",
	    "--noglob-pathspecs",
	    "--icase-pathspecs",
	    "--no-optional-locks",
	    "--no-lazy-fetch",
	    "--no-advice",
	    "--html-path",
	    "--man-path",
	    "--info-path",
	    "--version",
	    "--help",
	    "-v",
	    "-h",
	    "--exec-path",
	};
	size_t i = 1;

	for (; i < l->argc; i++) {
		const char *a = l->argv[i];

		if (a[0] != '-')
			break;
		if (strncmp(a, "-C", 2) == 0) {
			const char *dir = a[2]		    ? a + 2
					  : i + 1 < l->argc ? l->argv[++i]
							    : NULL;
			char *abs, *real = NULL;

			if (!dir)
				break;
			abs = pol_absolutize(*cwd, dir);
			if (!abs || pol_resolve_abs(c, abs, &real) == -ENOMEM) {
				free(abs);
				c->err = -ENOMEM;
				return true;
			}
			free(abs);
			if (!real || !pol_inside_ws(c, real)) {
				pol_deny(
				    c, "deny.git.option",
				    "git -C %s works outside the workspace",
				    dir);
				free(real);
				return true;
			}
			if (*cwd != l->cwd)
				free(*cwd);
			*cwd = real;
			continue;
		}
		if (strncmp(a, "-c", 2) == 0 ||
		    strncmp(a, "--config-env", 12) == 0 ||
		    strncmp(a, "--exec-path=", 12) == 0 ||
		    strncmp(a, "--git-dir", 9) == 0 ||
		    strncmp(a, "--work-tree", 11) == 0 ||
		    strncmp(a, "--namespace", 11) == 0 ||
		    strncmp(a, "--super-prefix", 14) == 0 ||
		    strncmp(a, "--attr-source", 13) == 0) {
			pol_deny(
			    c, "deny.git.option",
			    "git %s changes git's configuration or repository "
			    "for this command",
			    a);
			return true;
		}
		if (strcmp(a, "-p") == 0 || strcmp(a, "--paginate") == 0) {
			pol_cmd_ask(c, "ask.git.option", "git %s runs a pager",
				    a);
			continue;
		}
		if (strcmp(a, "--bare") == 0 ||
		    strncmp(a, "--list-cmds", 11) == 0) {
			pol_cmd_ask(c, "ask.git.option", "git %s", a);
			continue;
		}
		if (!IN(ok_global, a)) {
			pol_cmd_ask(c, "ask.git.option",
				    "git option %s is not on the known list",
				    a);
			continue;
		}
	}
	*ret_i = i;
	return false;
}

/* git branch or tag from argv[i]: only lists (no operand to create, no
 * option that deletes, renames or moves)? */
static bool git_branch_tag_lists(const struct lvl *l, size_t i)
{
	bool list = false, operand = false, modify = false;

	for (size_t k = i + 1; k < l->argc; k++) {
		const char *a = l->argv[k];

		if (strcmp(a, "-l") == 0 || strcmp(a, "--list") == 0 ||
		    strcmp(a, "--show-current") == 0)
			list = true;
		else if (a[0] != '-')
			operand = true;
		else if (strcmp(a, "--contains") == 0 ||
			 strcmp(a, "--merged") == 0 ||
			 strcmp(a, "--no-merged") == 0 ||
			 strcmp(a, "--points-at") == 0 ||
			 strcmp(a, "--sort") == 0 || strcmp(a, "--format") == 0)
			k++;
		else if (strcmp(a, "-a") && strcmp(a, "-r") &&
			 strcmp(a, "-v") && strcmp(a, "-vv") &&
			 strcmp(a, "--all") && strcmp(a, "--remotes") &&
			 strcmp(a, "--verbose") && strncmp(a, "--sort=", 7) &&
			 strncmp(a, "--format=", 9) &&
			 strncmp(a, "--contains=", 11) &&
			 strncmp(a, "--merged=", 9) &&
			 strncmp(a, "--color", 7) &&
			 strncmp(a, "--no-color", 10) &&
			 strcmp(a, "--column") && strcmp(a, "--no-column") &&
			 strncmp(a, "-n", 2))
			modify = true;
	}
	return !modify && (list || !operand);
}

/* git config from argv[i]: a read (get, list, or one name) is allowed,
 * anything else denied.  Returns true when it denied the call. */
static bool git_config_denied(struct cls *c, const struct lvl *l, size_t i)
{
	size_t ops = 0;
	bool get = false, set = false;

	for (size_t k = i + 1; k < l->argc; k++) {
		const char *a = l->argv[k];

		if (strncmp(a, "--get", 5) == 0 || strcmp(a, "--list") == 0 ||
		    strcmp(a, "-l") == 0 || strcmp(a, "get") == 0 ||
		    strcmp(a, "list") == 0)
			get = true;
		else if (a[0] == '-' && strcmp(a, "--show-origin") &&
			 strcmp(a, "--show-scope") && strcmp(a, "-z") &&
			 strcmp(a, "--null") && strcmp(a, "--name-only") &&
			 strcmp(a, "--local") && strcmp(a, "--bool") &&
			 strcmp(a, "--int") && strncmp(a, "--type", 6))
			set = true;
		else if (a[0] != '-')
			ops++;
	}
	if (!set && (get || ops <= 1))
		return false;
	pol_deny(c, "deny.git.config",
		 "git config would change git's configuration");
	return true;
}

void pol_run_git(struct cls *c, struct lvl *l)
{
	char *cwd = l->cwd;
	size_t i;
	const char *sub;

	if (git_globals(c, l, &cwd, &i))
		goto out;
	if (i >= l->argc) {
		pol_allow(c, "allow.git.read",
			  "git without a command only prints");
		goto out;
	}
	sub = l->argv[i];
	/* Every later argument: secret blobs and pathspecs. */
	for (size_t k = i + 1; k < l->argc; k++)
		if (git_secret_arg(l->argv[k]))
			pol_deny(c, "deny.secret.read",
				 "git %s %s would show a secret-looking file",
				 sub, l->argv[k]);
	if (IN(git_remote_cmds, sub)) {
		pol_deny(
		    c, "deny.git.remote",
		    "git %s talks to a remote repository; spd never fetches "
		    "or pushes",
		    sub);
		goto out;
	}
	if (IN(git_destructive_cmds, sub)) {
		pol_deny(c, "deny.git.destructive",
			 "git %s destroys history or untracked work", sub);
		goto out;
	}
	if (strcmp(sub, "reset") == 0)
		for (size_t k = i + 1; k < l->argc; k++)
			if (strcmp(l->argv[k], "--hard") == 0 ||
			    strcmp(l->argv[k], "--merge") == 0 ||
			    strcmp(l->argv[k], "--keep") == 0) {
				pol_deny(c, "deny.git.destructive",
					 "git reset %s discards work",
					 l->argv[k]);
				goto out;
			}
	if (strcmp(sub, "reflog") == 0 && i + 1 < l->argc &&
	    (strcmp(l->argv[i + 1], "expire") == 0 ||
	     strcmp(l->argv[i + 1], "delete") == 0)) {
		pol_deny(c, "deny.git.destructive",
			 "git reflog %s destroys history", l->argv[i + 1]);
		goto out;
	}
	if (strcmp(sub, "notes") == 0) {
		const char *op = NULL;

		for (size_t k = i + 1; k < l->argc && !op; k++)
			if (l->argv[k][0] != '-')
				op = l->argv[k];
			else if (strncmp(l->argv[k], "--ref", 5) == 0 &&
				 !strchr(l->argv[k], '='))
				k++;
		if (op && strcmp(op, "list") != 0 && strcmp(op, "show") != 0 &&
		    strcmp(op, "get-ref") != 0) {
			pol_deny(c, "deny.git.notes",
				 "git notes %s writes notes", op);
			goto out;
		}
		pol_allow(c, "allow.git.read", "git notes only lists or shows");
		goto out;
	}
	/* Read forms of commands that can also change state. */
	bool read_form = false;

	if (IN(git_read_cmds, sub)) {
		read_form = true;
	} else if (strcmp(sub, "branch") == 0 || strcmp(sub, "tag") == 0) {
		read_form = git_branch_tag_lists(l, i);
	} else if (strcmp(sub, "stash") == 0 || strcmp(sub, "worktree") == 0) {
		read_form =
		    i + 1 < l->argc && (strcmp(l->argv[i + 1], "list") == 0 ||
					(strcmp(sub, "stash") == 0 &&
					 strcmp(l->argv[i + 1], "show") == 0));
	} else if (strcmp(sub, "config") == 0) {
		if (git_config_denied(c, l, i))
			goto out;
		read_form = true;
	}
	if (read_form) {
		for (size_t k = i + 1; k < l->argc; k++)
			if (git_bad_subopt(l->argv[k]))
				pol_cmd_ask(
				    c, "ask.git.option",
				    "git %s %s runs a program or writes a "
				    "file",
				    sub, l->argv[k]);
		pol_allow(c, "allow.git.read",
			  "git %s only reads the repository", sub);
		goto out;
	}
	if (c->ctx->in_place && IN(git_inplace_cmds, sub)) {
		pol_deny(
		    c, "deny.git.inplace",
		    "git %s would move the operator's own checkout (in-place "
		    "mode)",
		    sub);
		goto out;
	}
	if (c->ctx->worktree_session && IN(git_session_cmds, sub)) {
		pol_allow(
		    c, "allow.git.session",
		    "git %s changes only the session's own repository and "
		    "worktree; spd takes its commits onto the session's "
		    "branch",
		    sub);
		goto out;
	}
	if (IN(git_state_cmds, sub)) {
		pol_cmd_ask(c, "ask.git.state", "git %s changes the repository",
			    sub);
		goto out;
	}
	pol_cmd_ask(c, "ask.git.unknown",
		    "git %s is not a known git command (it may be an alias)",
		    sub);
out:
	if (cwd != l->cwd)
		free(cwd);
}

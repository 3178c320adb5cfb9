/*
 * The policy's git: the subcommands that read, those that change the
 * repository's state, the destructive and remote ones, and the global
 * options and configuration that would make git run something else.
 * Part of the policy engine (policy_priv.h).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

/* ---- git push through spd's proxy ---- */

/* A push names at most this many repositories (--repo and the operand). */
#define PUSH_REPOS_MAX 4

/* The host of an https:// URL as git reads it, into host (size n):
 * false for another scheme (plain http is not read by the proxy, ssh
 * does not go through it), an scp-like or local path, a remote helper
 * ("x::url"), or a host spd would not match by name (an address in
 * brackets, %-encoding). */
static bool push_url_host(const char *url, char *host, size_t n)
{
	const char *a, *end, *h;
	size_t len;

	if (strncmp(url, "https://", 8) != 0)
		return false;
	a = url + 8;
	end = a + strcspn(a, "/?#\\");
	h = a;
	for (const char *p = a; p < end; p++)
		if (*p == '@')
			h = p + 1;
	len = strcspn(h, ":/?#\\");
	if (h + len > end)
		len = (size_t)(end - h);
	if (!len || len >= n)
		return false;
	for (size_t k = 0; k < len; k++)
		if (!isalnum((unsigned char)h[k]) && h[k] != '.' && h[k] != '-')
			return false;
	if (h[len] == ':')
		for (const char *p = h + len + 1; p < end; p++)
			if (!isdigit((unsigned char)*p))
				return false;
	memcpy(host, h, len);
	host[len] = '\0';
	return true;
}

static int count_value(const git_config_entry *e, void *data)
{
	(void)e;
	++*(int *)data;
	return 0;
}

/* How many values name holds in cfg (every level git reads). */
static int config_count(git_config *cfg, const char *name)
{
	int n = 0;

	if (git_config_get_multivar_foreach(cfg, name, NULL, count_value, &n) <
	    0)
		n = 0;
	git_error_clear();
	return n;
}

/* cfg's string value of name into buf (size n), or false. */
static bool config_str(git_config *cfg, const char *name, char *buf, size_t n)
{
	git_buf b = {0};
	bool ok = git_config_get_string_buf(&b, cfg, name) == 0 && b.ptr &&
		  strlen(b.ptr) < n;

	if (ok)
		memcpy(buf, b.ptr, strlen(b.ptr) + 1);
	git_buf_dispose(&b);
	git_error_clear();
	return ok;
}

/*
 * u rewritten as git rewrites a remote's URL: the longest prefix named by
 * a url.<base>.insteadOf becomes <base>; for a url pushed to (for_push:
 * the remote has no pushurl) a url.<base>.pushInsteadOf comes first.
 * The result into out (size n): 0, or -1 when it does not fit.
 */
static int url_rewrite(git_config *cfg, const char *u, bool for_push, char *out,
		       size_t n)
{
	git_config_iterator *it = NULL;
	git_config_entry *e;
	const char *best = NULL;
	size_t best_len = 0, best_base = 0;
	char base[1024];
	bool best_push = false;

	if (git_config_iterator_new(&it, cfg) == 0) {
		while (git_config_next(&e, it) == 0) {
			const char *nm = e->name, *dot;
			size_t vl = e->value ? strlen(e->value) : 0;
			bool is_push;

			if (strncmp(nm, "url.", 4) != 0 || !e->value || !vl)
				continue;
			dot = strrchr(nm, '.');
			if (dot == nm + 3)
				continue;
			is_push = strcmp(dot, ".pushinsteadof") == 0;
			if (!is_push && strcmp(dot, ".insteadof") != 0)
				continue;
			if (is_push && !for_push)
				continue;
			if (strncmp(u, e->value, vl) != 0)
				continue;
			/* pushInsteadOf wins over insteadOf, then the
			 * longest prefix. */
			if (best && (best_push && !is_push))
				continue;
			if (best && best_push == is_push && vl <= best_len)
				continue;
			if ((size_t)(dot - (nm + 4)) >= sizeof(base))
				continue;
			memcpy(base, nm + 4, (size_t)(dot - (nm + 4)));
			base[dot - (nm + 4)] = '\0';
			best = base;
			best_len = vl;
			best_base = strlen(base);
			best_push = is_push;
		}
		git_config_iterator_free(it);
	}
	git_error_clear();
	if (!best)
		return strlen(u) < n ? (memcpy(out, u, strlen(u) + 1), 0) : -1;
	if (best_base + strlen(u + best_len) >= n)
		return -1;
	memcpy(out, base, best_base);
	memcpy(out + best_base, u + best_len, strlen(u + best_len) + 1);
	return 0;
}

/*
 * The URL a push to remote name (NULL: the default git chooses: the
 * branch's pushRemote, remote.pushDefault, the branch's remote, origin)
 * goes to, from the repository at cwd: its pushurl, else its url, with
 * url.*.insteadOf and pushInsteadOf applied (libgit2's lookup applies
 * them).  Returns 0 and the URL in url (size n), or a reason the policy
 * refuses with: a remote of more than one URL (git pushes to each), or
 * one spd cannot find or read.
 */
static const char *push_remote_url(const char *cwd, const char *name, char *url,
				   size_t n)
{
	git_repository *repo = NULL;
	git_config *cfg = NULL;
	git_reference *head = NULL;
	char key[512], dflt[256], raw[2048];
	const char *why = NULL;
	int valid = 0;
	bool push = false;

	if (git_libgit2_init() < 0)
		return "spd could not read the repository's remotes";
	if (git_repository_open_ext(&repo, cwd, 0, NULL) < 0 ||
	    git_repository_config_snapshot(&cfg, repo) < 0) {
		why = "spd could not read the repository's remotes";
		goto out;
	}
	if (!name) {
		const char *br = NULL;

		/* HEAD's branch, born or not. */
		if (git_reference_lookup(&head, repo, "HEAD") == 0 &&
		    git_reference_type(head) == GIT_REFERENCE_SYMBOLIC &&
		    strncmp(git_reference_symbolic_target(head), "refs/heads/",
			    11) == 0)
			br = git_reference_symbolic_target(head) + 11;
		name = "origin";
		if (br &&
		    (size_t)snprintf(key, sizeof(key), "branch.%s.pushremote",
				     br) < sizeof(key) &&
		    config_str(cfg, key, dflt, sizeof(dflt)))
			name = dflt;
		else if (config_str(cfg, "remote.pushdefault", dflt,
				    sizeof(dflt)))
			name = dflt;
		else if (br &&
			 (size_t)snprintf(key, sizeof(key), "branch.%s.remote",
					  br) < sizeof(key) &&
			 config_str(cfg, key, dflt, sizeof(dflt)))
			name = dflt;
	}
	snprintf(key, sizeof(key), "remote.%s.url", name);
	if (git_remote_name_is_valid(&valid, name) < 0 || !valid ||
	    config_count(cfg, key) == 0) {
		why = "it names no remote of the repository";
		goto out;
	}
	snprintf(key, sizeof(key), "remote.%s.pushurl", name);
	if (config_count(cfg, key) > 1) {
		why = "the remote has more than one pushurl";
		goto out;
	}
	push = config_count(cfg, key) == 1;
	if (!push) {
		snprintf(key, sizeof(key), "remote.%s.url", name);
		if (config_count(cfg, key) != 1) {
			why = "the remote has more than one url";
			goto out;
		}
	}
	/* Read and rewritten here rather than by git_remote_lookup, whose
	 * url.*.insteadOf lookup leaks in libgit2 1.5 (its regexp match
	 * keeps the match data of every entry that does not match). */
	if (!config_str(cfg, key, raw, sizeof(raw)) ||
	    url_rewrite(cfg, raw, !push, url, n) < 0) {
		why = "spd could not read the remote's URL";
		goto out;
	}
out:
	git_reference_free(head);
	git_config_free(cfg);
	git_repository_free(repo);
	git_error_clear();
	git_libgit2_shutdown();
	return why;
}

/* Whether the repository at cwd has git push into submodules too
 * (push.recurseSubmodules on-demand or only, submodule.recurse): their
 * remotes are other hosts, pushed to unread. */
static bool push_recurses(const char *cwd)
{
	git_repository *repo = NULL;
	git_config *cfg = NULL;
	char v[32] = "";
	int b = 0;
	bool yes = false;

	if (git_libgit2_init() < 0)
		return true;
	if (git_repository_open_ext(&repo, cwd, 0, NULL) == 0 &&
	    git_repository_config_snapshot(&cfg, repo) == 0) {
		yes =
		    (config_str(cfg, "push.recursesubmodules", v, sizeof(v)) &&
		     strcasecmp(v, "no") != 0 && strcasecmp(v, "check") != 0 &&
		     strcasecmp(v, "false") != 0) ||
		    (git_config_get_bool(&b, cfg, "submodule.recurse") == 0 &&
		     b);
	}
	git_config_free(cfg);
	git_repository_free(repo);
	git_error_clear();
	git_libgit2_shutdown();
	return yes;
}

/*
 * git push from argv[i] in a session's proxy run: allowed when every
 * repository it names (the operand, --repo; none: git's default remote)
 * is an https:// URL, or a remote of one, whose host spd terminates --
 * there the proxy reads the ref updates and lets only the session's
 * branch be fast-forwarded.  Anything else is refused: a tunnel to
 * another host is passed on unread.
 */
static void git_push_judge(struct cls *c, const struct lvl *l, const char *cwd,
			   size_t i)
{
	const char *repos[PUSH_REPOS_MAX];
	size_t nrepos = 0;
	bool operand = false, dashdash = false;
	char url[2048], host[256];

	for (size_t k = i + 1; k < l->argc; k++) {
		const char *a = l->argv[k];

		if (!dashdash && strcmp(a, "--") == 0) {
			dashdash = true;
			continue;
		}
		if (dashdash || a[0] != '-' || !a[1]) {
			if (!operand && nrepos < PUSH_REPOS_MAX)
				repos[nrepos++] = a;
			operand = true; /* the rest are refspecs */
			continue;
		}
		if (strncmp(a, "--receive-pack", 14) == 0 ||
		    strncmp(a, "--exec", 6) == 0) {
			pol_deny(c, "deny.git.remote",
				 "git push %s runs a program of its choosing "
				 "on the remote side",
				 a);
			return;
		}
		if (strncmp(a, "--recurse-submodules", 20) == 0 &&
		    strcmp(a, "--recurse-submodules=no") != 0 &&
		    strcmp(a, "--recurse-submodules=check") != 0 &&
		    strcmp(a, "--no-recurse-submodules") != 0) {
			pol_deny(c, "deny.git.remote",
				 "git push %s pushes submodules to their own "
				 "remotes, which spd does not read",
				 a);
			return;
		}
		if (strncmp(a, "--repo=", 7) == 0) {
			if (nrepos < PUSH_REPOS_MAX)
				repos[nrepos++] = a + 7;
		} else if (strcmp(a, "--repo") == 0) {
			if (k + 1 < l->argc && nrepos < PUSH_REPOS_MAX)
				repos[nrepos++] = l->argv[++k];
		} else if (strcmp(a, "--push-option") == 0) {
			k++;
		} else if (a[1] != '-') {
			/* A cluster of short options: -o takes the rest, or
			 * the next argument. */
			const char *o = strchr(a + 1, 'o');

			if (o && !o[1])
				k++;
		}
	}
	if (push_recurses(cwd)) {
		pol_deny(c, "deny.git.remote",
			 "git push would push submodules too "
			 "(push.recurseSubmodules or submodule.recurse), to "
			 "remotes spd does not read");
		return;
	}
	if (nrepos == 0)
		repos[nrepos++] = NULL; /* git's default remote */
	for (size_t r = 0; r < nrepos; r++) {
		const char *dest = repos[r];
		const char *why = NULL;

		if (dest && strstr(dest, "://")) {
			snprintf(url, sizeof(url), "%s", dest);
		} else if ((why =
				push_remote_url(cwd, dest, url, sizeof(url)))) {
			pol_deny(c, "deny.git.remote",
				 "git push %s: %s; spd lets a push through "
				 "only to an https URL of a host its proxy "
				 "terminates",
				 dest ? dest : "(the default remote)", why);
			return;
		}
		if (!push_url_host(url, host, sizeof(host))) {
			pol_deny(c, "deny.git.remote",
				 "git push %s: not an https:// URL of a host "
				 "name; spd's proxy reads only a push over "
				 "https",
				 dest ? dest : "(the default remote)");
			return;
		}
		if (!c->ctx->push_inspected(c->ctx->push_inspected_data,
					    host)) {
			pol_deny(c, "deny.git.remote",
				 "git push to %s: spd's proxy does not "
				 "terminate that host (it has no "
				 "[credential]), so the push would pass "
				 "unread",
				 host);
			return;
		}
	}
	pol_allow(c, "allow.git.push",
		  "git push to %s goes through spd's proxy, which lets only "
		  "the session's branch be fast-forwarded",
		  host);
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
	if (strcmp(sub, "push") == 0 && c->ctx->push_inspected) {
		git_push_judge(c, l, cwd, i);
		goto out;
	}
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

/*
 * Sessions, start and end: the feature name, the libgit2 worktree on its
 * branch spd/<feature> (or the clean checkout, in place), the snapshot
 * of the project's .spd.conf, and at the end the worktree pruned, its
 * files and the session's state removed (the branch stays).  Part of
 * the session module (session_priv.h); see session.h.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <git2.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/paths.h"
#include "common/strv.h"
#include "common/util.h"
#include "daemon/session/session.h"
#include "daemon/session/session_priv.h"

/* ---- start ---- */

bool session_feature_valid(const char *f)
{
	char ref[SESSION_FEATURE_MAX + 32];
	size_t n;
	int valid = 0;

	if (!f)
		return false;
	n = strlen(f);
	if (n == 0 || n > SESSION_FEATURE_MAX || f[0] == '.' || f[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = f[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		      c == '-'))
			return false;
	}
	if (strstr(f, "..") || f[n - 1] == '.' ||
	    (n >= 5 && strcmp(f + n - 5, ".lock") == 0))
		return false;
	snprintf(ref, sizeof(ref), "refs/heads/spd/%s", f);
	if (git_reference_name_is_valid(&valid, ref) < 0)
		return false;
	return valid != 0;
}

/* Refuse a dirty checkout, naming what is dirty. */
static int check_clean(struct session_store *s, git_repository *repo)
{
	git_status_options so;
	git_status_list *sl = NULL;
	char list[768] = "";
	size_t n, used = 0;

	git_status_options_init(&so, GIT_STATUS_OPTIONS_VERSION);
	so.show = GIT_STATUS_SHOW_INDEX_AND_WORKDIR;
	so.flags = GIT_STATUS_OPT_INCLUDE_UNTRACKED |
		   GIT_STATUS_OPT_RECURSE_UNTRACKED_DIRS |
		   GIT_STATUS_OPT_EXCLUDE_SUBMODULES;
	if (git_status_list_new(&sl, repo, &so) < 0) {
		sess_seterr(s, "git status: %s", sess_git_msg());
		return -EIO;
	}
	n = git_status_list_entrycount(sl);
	for (size_t i = 0; i < n && i < SESSION_DIRTY_SHOWN; i++) {
		const git_status_entry *e = git_status_byindex(sl, i);
		const git_diff_delta *d =
		    e->head_to_index ? e->head_to_index : e->index_to_workdir;
		const char *kind = e->status & GIT_STATUS_WT_NEW ? "untracked"
				   : e->head_to_index		 ? "staged"
								 : "modified";
		int k = snprintf(list + used, sizeof(list) - used, "%s%s (%s)",
				 i ? ", " : "", d->new_file.path, kind);
		if (k < 0 || (size_t)k >= sizeof(list) - used)
			break;
		used += (size_t)k;
	}
	git_status_list_free(sl);
	if (n == 0)
		return 0;
	sess_seterr(s, "the checkout is not clean (%zu path%s): %s%s", n,
		    n == 1 ? "" : "s", list,
		    n > SESSION_DIRTY_SHOWN ? ", ..." : "");
	return -EBUSY;
}

int sess_copy_file(const char *from, const char *to, off_t max)
{
	_cleanup_close_ int in = -1, out = -1;
	char buf[65536];
	off_t total = 0;
	ssize_t k;

	in = open(from, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (in < 0)
		return -errno;
	out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		   0600);
	if (out < 0)
		return -errno;
	while ((k = read(in, buf, sizeof(buf))) != 0) {
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		total += k;
		if (total > max)
			return -E2BIG;
		for (ssize_t w = 0; w < k;) {
			ssize_t m = write(out, buf + w, (size_t)(k - w));
			if (m < 0) {
				if (errno == EINTR)
					continue;
				return -errno;
			}
			w += m;
		}
	}
	if (fsync(out) < 0)
		return -errno;
	return 0;
}

char *sess_conf_snapshot_path(struct session_store *s, const char *id)
{
	char *p = NULL;

	if (asprintf(&p, "%s/conf/%s.spd.conf", s->state_dir, id) < 0)
		return NULL;
	return p;
}

static int rm_cb(const char *path, const struct stat *st, int flag,
		 struct FTW *ftw)
{
	return flag == FTW_DP ? rmdir(path) : unlink(path);
}

/* state_dir/worktrees, or a name in it: a new path, or NULL. */
static char *worktrees_path(struct session_store *s, const char *name)
{
	char *p = NULL;

	if (asprintf(&p, "%s/worktrees%s%s", s->state_dir, name ? "/" : "",
		     name ? name : "") < 0)
		return NULL;
	return p;
}

int session_remove_tree(const char *path)
{
	return sess_rm_tree(path);
}

/* Where an ended session's worktree is put away (session.h). */
#define ENDED_PREFIX ".ended-"

/* The entries of dir whose names begin with prefix (with NULL: that hold
 * a '.' past their first character), pushed to v as paths; never . or
 * .. (.. is the state directory itself). */
static void left_in(const char *dir, const char *prefix, struct strv *v)
{
	struct dirent *de;
	DIR *d = dir ? opendir(dir) : NULL;

	while (d && (de = readdir(d))) {
		char *p;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    (prefix ? strncmp(de->d_name, prefix, strlen(prefix)) != 0
			    : !strchr(de->d_name + 1, '.')) ||
		    !(p = paths_join(dir, de->d_name)))
			continue;
		if (strv_push(v, p) < 0) {
			free(p);
			break;
		}
		free(p);
	}
	if (d)
		closedir(d);
}

/* Where the merges' checkouts an earlier spd left go (a name of their
 * own, for no merge of this spd to meet the remover in it). */
#define MERGE_LEFT_PREFIX ".merge-left-"

char **session_removals_left(struct session_store *s)
{
	char *dir = worktrees_path(s, NULL), *merge = NULL, *away = NULL;
	struct strv v = {0};

	left_in(dir, ENDED_PREFIX, &v);
	/* A merge's checkout for its checks lives as long as the merge
	 * call: any there at the start is one a stop cut short (one that
	 * cannot be renamed is removed by the next merge of its session). */
	if (asprintf(&merge, "%s/merge", s->state_dir) >= 0 &&
	    asprintf(&away, "%s/" MERGE_LEFT_PREFIX "%llu", s->state_dir,
		     (unsigned long long)time(NULL)) >= 0)
		(void)rename(merge, away);
	left_in(s->state_dir, MERGE_LEFT_PREFIX, &v);
	/* Held-out sets an ended session, a seal's swap or a seal's copy
	 * left (heldout/<id>.ended, .old, .new): a session's own is <id>. */
	free(merge);
	merge = NULL;
	if (asprintf(&merge, "%s/heldout", s->state_dir) >= 0)
		left_in(merge, NULL, &v);
	free(away);
	free(merge);
	free(dir);
	return v.v;
}

void sess_remove_aside(struct session_store *s, const char *path, char *away)
{
	if (path && away && s->remove && rename(path, away) == 0) {
		s->remove(s->remove_data, away);
		return;
	}
	if (path)
		sess_rm_tree(path);
	free(away);
}

/* rm -rf without following symlinks; a missing path is fine. */
int sess_rm_tree(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlink(path) < 0 ? -errno : 0;
	if (nftw(path, rm_cb, 32, FTW_DEPTH | FTW_PHYS) < 0)
		return -errno;
	return 0;
}

/* What a start holds while it builds a session, and undoes when a step
 * fails (start_done).  The worker's half (session_start_work) reads of
 * the store only what stays as it is while the store is open (state_dir,
 * the agent's identity) and writes its error text to err, not the
 * store's, which the loop's calls share. */
struct session_start {
	struct session_store *s;
	bool in_place;
	int r;		/* the steps' result so far */
	char err[1024]; /* the worker's error text */
	git_repository *repo;
	git_reference *head, *branch;
	git_commit *commit;
	git_worktree *wt;
	struct sess *x; /* until the store's list holds it */
	char token[SESSION_TOKEN_LEN + 1];
	char bname[SESSION_FEATURE_MAX + 8];
	char *wtdir, *conf, *snap;
	bool made_branch, made_wt;
};

/* The repository: a checkout with a commit at HEAD (whether it is clean,
 * for a session in place, is the worker's: git status reads it whole). */
static int start_open(struct session_store *s, struct session_start *st,
		      const char *repo_path)
{
	if (git_repository_open_ext(&st->repo, repo_path, 0, NULL) < 0) {
		sess_seterr(s, "%s: not a git repository: %s", repo_path,
			    sess_git_msg());
		return -ENOENT;
	}
	if (git_repository_is_bare(st->repo) ||
	    !git_repository_workdir(st->repo)) {
		sess_seterr(s, "%s: a bare repository has no checkout",
			    repo_path);
		return -EINVAL;
	}
	if (git_repository_head(&st->head, st->repo) < 0 ||
	    git_reference_peel((git_object **)&st->commit, st->head,
			       GIT_OBJECT_COMMIT) < 0) {
		sess_seterr(s, "%s: HEAD names no commit: %s", repo_path,
			    sess_git_msg());
		return -ENOENT;
	}
	return 0;
}

/* The new record: its id, the token (shown once, kept as a hash), the
 * base commit and the repository's paths. */
static int start_record(struct session_start *st, const char *feature,
			bool in_place)
{
	uint8_t raw[SESSION_TOKEN_LEN / 2], idraw[SESSION_ID_LEN / 2];
	struct sess *x = calloc(1, sizeof(*x));

	if (!x)
		return -ENOMEM;
	st->x = x;
	randombytes_buf(idraw, sizeof(idraw));
	sodium_bin2hex(x->info.id, sizeof(x->info.id), idraw, sizeof(idraw));
	randombytes_buf(raw, sizeof(raw));
	sodium_bin2hex(st->token, sizeof(st->token), raw, sizeof(raw));
	sodium_memzero(raw, sizeof(raw));
	sess_token_hash(st->token, x->token_hash);
	git_oid_tostr(x->info.base, sizeof(x->info.base),
		      git_commit_id(st->commit));
	x->info.mode = in_place ? SESSION_MODE_IN_PLACE : SESSION_MODE_WORKTREE;
	x->info.state = SESSION_ACTIVE;
	x->info.created = time(NULL);
	{
		char *wd = strdup(git_repository_workdir(st->repo));
		size_t l = wd ? strlen(wd) : 0;

		if (l > 1 && wd[l - 1] == '/')
			wd[l - 1] = '\0';
		x->info.repo = wd;
	}
	x->info.gitdir = strdup(git_repository_commondir(st->repo));
	x->info.feature = strdup(feature);
	if (!x->info.repo || !x->info.gitdir || !x->info.feature)
		return -ENOMEM;
	{
		size_t l = strlen(x->info.gitdir);
		if (l > 1 && x->info.gitdir[l - 1] == '/')
			x->info.gitdir[l - 1] = '\0';
	}
	return 0;
}

/* In place: the session works in the checkout, on its branch if any. */
static int start_in_place(struct session_start *st)
{
	struct sess *x = st->x;

	x->info.worktree = strdup(x->info.repo);
	if (git_reference_is_branch(st->head))
		x->info.branch = strdup(git_reference_shorthand(st->head));
	if (!x->info.worktree)
		return -ENOMEM;
	return 0;
}

/* git_tree_walk: stop at the first .gitattributes. */
static int find_attributes(const char *root, const git_tree_entry *e,
			   void *data)
{
	(void)root;
	if (strcmp(git_tree_entry_name(e), ".gitattributes") == 0) {
		*(bool *)data = true;
		return -1;
	}
	return 0;
}

/* Whether name exists in one of the directories of libgit2's search path
 * for level (a ':'-separated list). */
static bool in_search_path(git_config_level_t level, const char *name)
{
	git_buf b = {0};
	bool found = false;
	char *list, *dir, *save = NULL;

	if (git_libgit2_opts(GIT_OPT_GET_SEARCH_PATH, level, &b) < 0)
		return true; /* unknown: assume the worst */
	list = strdup(b.ptr ? b.ptr : "");
	git_buf_dispose(&b);
	if (!list)
		return true;
	for (dir = strtok_r(list, ":", &save); dir && !found;
	     dir = strtok_r(NULL, ":", &save)) {
		char *p = paths_join(dir, name);
		struct stat st;

		found = !p || lstat(p, &st) == 0;
		free(p);
	}
	free(list);
	return found;
}

/*
 * Whether a checkout filter (line endings, ident) could change a byte of
 * commit's checkout: any attributes at all (a .gitattributes in the tree,
 * info/attributes, core.attributesFile, the global or system attributes
 * file) or core.autocrlf / core.eol set.  When none can, the checkout
 * skips the per-file attribute lookups (a dozen readlink calls a file in
 * libgit2 1.5), most of what it costs beyond git's own; the files are the
 * same either way.  Any doubt answers true.
 */
static bool filters_may_apply(git_repository *repo, git_commit *commit)
{
	git_config *cfg = NULL;
	git_config_entry *e = NULL;
	git_tree *tree = NULL;
	bool found = false;
	char *info;
	struct stat st;

	if (git_repository_config_snapshot(&cfg, repo) < 0)
		return true;
	for (const char *const *k =
		 (const char *const[]){"core.autocrlf", "core.eol",
				       "core.attributesfile", NULL};
	     *k && !found; k++) {
		if (git_config_get_entry(&e, cfg, *k) == 0) {
			found = strcmp(*k, "core.autocrlf") != 0 ||
				strcasecmp(e->value, "false") != 0;
			git_config_entry_free(e);
		}
	}
	git_config_free(cfg);
	info = paths_join(git_repository_commondir(repo), "info/attributes");
	if (found || !info || lstat(info, &st) == 0 ||
	    in_search_path(GIT_CONFIG_LEVEL_XDG, "attributes") ||
	    in_search_path(GIT_CONFIG_LEVEL_SYSTEM, "gitattributes") ||
	    git_commit_tree(&tree, commit) < 0) {
		free(info);
		return true;
	}
	free(info);
	if (git_tree_walk(tree, GIT_TREEWALK_PRE, find_attributes, &found) <
		0 &&
	    !found)
		found = true;
	git_tree_free(tree);
	return found;
}

/* A worktree's branch spd/<feature> at HEAD, made on the loop: a second
 * start of the same feature is refused at once, and the other sessions'
 * guards on the repository are told of it before they look again. */
static int start_branch(struct session_store *s, struct session_start *st,
			const char *feature)
{
	struct sess *x = st->x;

	snprintf(st->bname, sizeof(st->bname), "spd/%s", feature);
	if (git_branch_lookup(&st->branch, st->repo, st->bname,
			      GIT_BRANCH_LOCAL) == 0) {
		sess_seterr(s,
			    "branch %s already exists: merge or delete it, "
			    "or choose another feature name",
			    st->bname);
		return -EEXIST;
	}
	x->info.branch = strdup(st->bname);
	if (!x->info.branch)
		return -ENOMEM;
	/* Where the worktree goes, made and checked before a branch is
	 * made for it (the worker makes the worktree there). */
	{
		char *dir = worktrees_path(s, NULL);
		int r = dir ? sess_private_dir(s, dir) : -ENOMEM;

		free(dir);
		if (r < 0)
			return r;
		st->wtdir = worktrees_path(s, x->info.id);
		if (!st->wtdir)
			return -ENOMEM;
	}
	/* spd's own ref update: it happens before the guard's
	 * snapshot, and the guard never looks at this branch. */
	if (git_branch_create(&st->branch, st->repo, st->bname, st->commit, 0) <
	    0) {
		sess_seterr(s, "cannot create branch %s: %s", st->bname,
			    sess_git_msg());
		return -EIO;
	}
	st->made_branch = true;
	sess_note_ref(s, x->info.gitdir, st->bname);
	return 0;
}

/* The worktree of that branch, checked out at st->wtdir
 * (state_dir/worktrees/<id>), and the agent's repository in it. */
static int start_worktree(struct session_store *s, struct session_start *st)
{
	struct sess *x = st->x;
	git_worktree_add_options wo;
	int r;

	git_worktree_add_options_init(&wo, GIT_WORKTREE_ADD_OPTIONS_VERSION);
	wo.ref = st->branch;
	wo.checkout_options.checkout_strategy = GIT_CHECKOUT_FORCE;
	wo.checkout_options.disable_filters =
	    !filters_may_apply(st->repo, st->commit);
	if (git_worktree_add(&st->wt, st->repo, x->info.id, st->wtdir, &wo) <
	    0) {
		sess_seterr(s, "cannot add the worktree: %s", sess_git_msg());
		return -EIO;
	}
	st->made_wt = true;
	x->info.worktree = steal_ptr(st->wtdir);
	sess_work_fresh(x);
	r = sess_agent_git_make(s, x, st->repo);
	if (r < 0) {
		sess_seterr(s, "cannot make the agent's repository in %s: %s",
			    x->info.worktree, strerror(-r));
		return r;
	}
	return 0;
}

/* The project's configuration as the session begins; verification
 * reads this copy (session_verify_plan). */
static int start_conf(struct session_store *s, struct session_start *st)
{
	struct sess *x = st->x;
	char *confdir;
	int r;

	st->conf = paths_join(x->info.worktree, ".spd.conf");
	st->snap = sess_conf_snapshot_path(s, x->info.id);
	confdir = paths_join(s->state_dir, "conf");
	if (!st->conf || !st->snap || !confdir) {
		free(confdir);
		return -ENOMEM;
	}
	r = sess_private_dir(s, confdir);
	free(confdir);
	if (r < 0)
		return r;
	r = sess_copy_file(st->conf, st->snap, 1024 * 1024);
	if (r < 0 && r != -ENOENT) {
		sess_seterr(s, "cannot read %s: %s", st->conf, strerror(-r));
		return r;
	}
	return 0;
}

/* In place: the checkout clean, its credential files and the entries
 * git ignores found and recorded; then, either way, the guard's first
 * snapshot. */
static int start_snapshot(struct session_store *s, struct session_start *st)
{
	struct sess *x = st->x;
	int r;

	if (st->in_place) {
		r = check_clean(s, st->repo);
		if (r == 0)
			r = sess_find_secrets(s, x);
		if (r == 0)
			r = sess_inplace_record(s, x);
		if (r < 0)
			return r;
	}
	return sess_make_guard(s, x);
}

/* The row in sessions.db and the store's list; then the caller's copy,
 * the token and the journal's record. */
static int start_keep(struct session_store *s, struct session_start *st,
		      struct session_info **ret_info, char *ret_token)
{
	struct sess *x = st->x;
	int r;

	r = sess_db_insert(s, x);
	if (r == 0)
		r = sess_db_update(s, x);
	if (r < 0)
		return r;
	x->next = s->list;
	s->list = x;
	st->x = NULL;
	*ret_info = sess_info_copy(&x->info);
	if (!*ret_info) {
		/* The session exists; the caller sees it in the list. */
		return -ENOMEM;
	}
	memcpy(ret_token, st->token, sizeof(st->token));
	sess_journal(s, x->info.id, "session.start",
		     json_pack("{s:s, s:s, s:s, s:s, s:s?, s:s}", "repo",
			       x->info.repo, "feature", x->info.feature, "mode",
			       sess_mode_name(x->info.mode), "worktree",
			       x->info.worktree, "branch", x->info.branch,
			       "base", x->info.base),
		     "session %s started on %s (%s)", x->info.id,
		     x->info.feature, sess_mode_name(x->info.mode));
	return 0;
}

/* Forget the token; undo what a failed start made (the worktree, the
 * branch, the snapshot); free the rest and the start. */
static void start_done(struct session_store *s, struct session_start *st)
{
	struct sess *x = st->x;
	char *p;

	sodium_memzero(st->token, sizeof(st->token));
	if (x) {
		if (st->made_wt && st->wt) {
			git_worktree_prune_options po = {
			    GIT_WORKTREE_PRUNE_OPTIONS_VERSION, 0};
			po.flags = GIT_WORKTREE_PRUNE_VALID |
				   GIT_WORKTREE_PRUNE_WORKING_TREE;
			git_worktree_prune(st->wt, &po);
		}
		if (st->made_wt)
			sess_rm_tree(x->info.worktree);
		/* The ref alone: a branch made here has no config section,
		 * and git_branch_delete's search for one leaks in libgit2
		 * 1.5 (a pcre2 match buffer an entry not matched). */
		if (st->made_branch && st->branch &&
		    git_reference_delete(st->branch) == 0)
			sess_note_ref(s, x->info.gitdir, st->bname);
		if (st->snap)
			unlink(st->snap);
		if ((p = sess_inplace_path(s, x->info.id))) {
			unlink(p);
			free(p);
		}
		/* spd's index of the worktree, opened by the worker. */
		sess_work_close(NULL, x);
		sess_work_forget(s, x->info.id);
		sess_free(x);
	}
	free(st->conf);
	free(st->snap);
	free(st->wtdir);
	git_worktree_free(st->wt);
	git_reference_free(st->branch);
	git_reference_free(st->head);
	git_commit_free(st->commit);
	git_repository_free(st->repo);
	free(st);
}

int session_start_begin(struct session_store *s, const char *repo_path,
			const char *feature, bool in_place,
			struct session_start **ret)
{
	struct session_start *st;
	int r;

	*ret = NULL;
	if (sess_git_up(s) < 0)
		return -EIO;
	s->err[0] = '\0';
	if (s->closing) {
		sess_seterr(s, "spd is stopping: no session starts now");
		return -ESHUTDOWN;
	}
	if (!session_feature_valid(feature)) {
		sess_seterr(s,
			    "invalid feature name \"%s\": use 1 to %d "
			    "characters of A-Z a-z 0-9 . _ -, not starting "
			    "with '.' or '-'",
			    feature ? feature : "", SESSION_FEATURE_MAX);
		return -EINVAL;
	}
	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->s = s;
	st->in_place = in_place;
	r = start_open(s, st, repo_path);
	if (r == 0)
		r = start_record(st, feature, in_place);
	if (r == 0)
		r = in_place ? start_in_place(st)
			     : start_branch(s, st, feature);
	if (r < 0) {
		start_done(s, st);
		return r;
	}
	s->aside++;
	*ret = st;
	return 0;
}

void session_start_work(struct session_start *st)
{
	struct session_store *s = st->s;
	int r = st->r;

	sess_seterr_to(st->err, sizeof(st->err));
	if (r == 0 && !st->in_place)
		r = start_worktree(s, st);
	if (r == 0)
		r = start_conf(s, st);
	if (r == 0)
		r = start_snapshot(s, st);
	/* The first checkpoint's copy and read of the checkout's index
	 * (18-27 ms for 10,000 files), here rather than on the loop after
	 * the first run.  Not opened, the checkpoint opens it. */
	if (r == 0 && !st->in_place)
		(void)sess_work_open(s, st->x);
	sess_seterr_to(NULL, 0);
	st->r = r;
}

int session_start_end(struct session_start *st, struct session_info **ret_info,
		      char *ret_token)
{
	struct session_store *s = st->s;
	int r = st->r;

	s->aside--;
	if (r < 0)
		snprintf(s->err, sizeof(s->err), "%s", st->err);
	else if (s->closing)
		r = -ESHUTDOWN;
	else
		r = start_keep(s, st, ret_info, ret_token);
	start_done(s, st);
	/* The store's close waited for its starts (session_store_free). */
	sess_store_closed_maybe(s);
	return r;
}

int session_start(struct session_store *s, const char *repo_path,
		  const char *feature, bool in_place,
		  struct session_info **ret_info, char *ret_token)
{
	struct session_start *st = NULL;
	int r = session_start_begin(s, repo_path, feature, in_place, &st);

	if (r < 0)
		return r;
	session_start_work(st);
	return session_start_end(st, ret_info, ret_token);
}

/* ---- end ---- */

/* Before a worktree goes: the agent's commits onto the branch, then
 * what it left uncommitted (or, with discard, the list of it).  0, or a
 * negative errno when the session must stay (the error says why). */
static int end_keep_work(struct session_store *s, struct sess *x, bool discard,
			 json_t **ret_report)
{
	char where[1100] = "";
	int r;

	if (x->runs > 0) {
		sess_seterr(s,
			    "session %s has %u run%s in flight: ending now "
			    "could lose what %s writing; end it when %s "
			    "done",
			    x->info.id, x->runs, x->runs == 1 ? "" : "s",
			    x->runs == 1 ? "it is" : "they are",
			    x->runs == 1 ? "it is" : "they are");
		return -EBUSY;
	}
	if (!discard) {
		r = session_sync(s, x->info.id, where, sizeof(where));
		if (r == -EACCES) {
			sess_seterr(s,
				    "%s adds a known secret value: the "
				    "agent's commits are not taken and the "
				    "session is not ended (its worktree is "
				    "kept: %s); remove them there, or end "
				    "with --discard",
				    where, x->info.worktree);
			return r;
		}
		if (r < 0) {
			char why[sizeof(s->err)];

			snprintf(why, sizeof(why), "%s", s->err);
			sess_seterr(s,
				    "%s; the session is not ended (its "
				    "worktree is kept: %s), or end it with "
				    "--discard",
				    why, x->info.worktree);
			return r;
		}
	}
	r = sess_end_work(s, x, discard, ret_report);
	if (r < 0)
		return r;
	if (discard) {
		size_t n = sess_stash_count(x);

		/* What --discard drops, said: the stash too. */
		if (n) {
			if (!*ret_report)
				*ret_report = json_object();
			json_object_set_new(*ret_report, "discarded_stash",
					    json_integer((json_int_t)n));
		}
		return 0;
	}
	/* What the agent stashed is work too. */
	{
		json_t *kept = NULL;

		r = sess_keep_stash(s, x, where, sizeof(where), &kept);
		if (r == -EACCES) {
			sess_seterr(s,
				    "%s (a stash entry of the agent's) adds a "
				    "known secret value: the session is not "
				    "ended (its worktree is kept: %s); drop "
				    "that entry there, or end with --discard",
				    where, x->info.worktree);
			return r;
		}
		if (r < 0)
			return r;
		if (kept) {
			if (!*ret_report)
				*ret_report = json_object();
			json_object_set_new(*ret_report, "stash", kept);
		}
	}
	return 0;
}

/* ---- an end's read of the worktree, on another thread ---- */

struct session_read {
	struct session_store *s;
	struct sess *x;
	int r;
	char err[sizeof(((struct session_store *)0)->err)];
};

/* Whether an end finds its worktree being read by another (an end, or a
 * checkpoint): -EBUSY and the error, or 0. */
static int end_reading(struct session_store *s, struct sess *x)
{
	if (x->ck_out) {
		sess_seterr(s,
			    "session %s: a checkpoint of its worktree is "
			    "being taken; end it once it is",
			    x->info.id);
		return -EBUSY;
	}
	if (!x->reading)
		return 0;
	sess_seterr(s,
		    "session %s is being ended already (its worktree is "
		    "being read for that end)",
		    x->info.id);
	return -EBUSY;
}

int session_end_read_begin(struct session_store *s, const char *id,
			   struct session_read **ret)
{
	struct sess *x = sess_find(s, id);
	struct session_read *rd;

	*ret = NULL;
	if (sess_git_up(s) < 0)
		return -EIO;
	s->err[0] = '\0';
	/* The end refuses, or reads on the loop, saying what it must. */
	if (!x || x->info.mode != SESSION_MODE_WORKTREE ||
	    x->info.state == SESSION_ENDED || x->runs > 0 || s->closing)
		return 0;
	if (end_reading(s, x) < 0)
		return -EBUSY;
	rd = calloc(1, sizeof(*rd));
	if (!rd)
		return 0;
	rd->s = s;
	rd->x = x;
	x->reading = true;
	x->ck_fresh = false;
	free(x->ck_patch);
	x->ck_patch = NULL;
	s->aside++;
	*ret = rd;
	return 0;
}

/*
 * The read's patch against the branch's tip as it is (its text is what
 * the end scans for secrets: for 1,000 changed files, 100 ms that were
 * the loop's), kept in x.  None when the tip's tree is the read's, or
 * on any error: the end then makes it.
 */
static void read_patch(struct session_store *s, struct sess *x)
{
	git_commit *c = NULL;
	git_tree *from = NULL, *to = NULL;
	git_oid tip;

	if (sess_branch_tip(s, x, x->ck_repo, &tip) == 0 &&
	    git_commit_lookup(&c, x->ck_repo, &tip) == 0 &&
	    git_commit_tree(&from, c) == 0 &&
	    !git_oid_equal(git_tree_id(from), &x->ck_tree) &&
	    git_tree_lookup(&to, x->ck_repo, &x->ck_tree) == 0 &&
	    sess_diff_text(x->ck_repo, from, to, NULL, &x->ck_patch) == 0) {
		x->ck_patch_from = *git_tree_id(from);
		x->ck_patch_to = x->ck_tree;
	}
	git_tree_free(to);
	git_tree_free(from);
	git_commit_free(c);
}

char *sess_patch_take(struct sess *x, const git_oid *from, const git_oid *to)
{
	char *p = x->ck_patch;

	if (!p || !x->ck_fresh || !git_oid_equal(&x->ck_patch_from, from) ||
	    !git_oid_equal(&x->ck_patch_to, to))
		return NULL;
	x->ck_patch = NULL;
	return p;
}

void session_end_read_work(struct session_read *rd)
{
	sess_seterr_to(rd->err, sizeof(rd->err));
	rd->r = sess_work_read_whole(rd->s, rd->x);
	if (rd->r == 0)
		read_patch(rd->s, rd->x);
	sess_seterr_to(NULL, 0);
}

int session_end_read_end(struct session_read *rd)
{
	struct session_store *s = rd->s;
	struct sess *x = rd->x;

	s->aside--;
	x->reading = false;
	/* A read that failed is done again by the end, on the loop, and
	 * its error is said then. */
	x->ck_fresh = rd->r == 0;
	free(rd);
	if (!s->closing)
		return 0;
	sess_store_closed_maybe(s);
	return -ESHUTDOWN;
}

void session_end_read_drop(struct session_store *s, const char *id)
{
	struct sess *x = s ? sess_find(s, id) : NULL;

	if (!x)
		return;
	x->ck_fresh = false;
	free(x->ck_patch);
	x->ck_patch = NULL;
}

int session_end_prepare(struct session_store *s, const char *id, bool discard,
			json_t **ret_report)
{
	struct sess *x = sess_find(s, id);

	*ret_report = NULL;
	if (sess_git_up(s) < 0)
		return -EIO;
	s->err[0] = '\0';
	if (!x)
		return -ENOENT;
	if (x->info.state == SESSION_ENDED) {
		sess_seterr(s, "session %s has already ended", id);
		return -EALREADY;
	}
	if (end_reading(s, x) < 0)
		return -EBUSY;
	if (x->info.mode != SESSION_MODE_WORKTREE)
		return 0;
	return end_keep_work(s, x, discard, ret_report);
}

int session_end(struct session_store *s, const char *id, bool discard,
		json_t **ret_report)
{
	struct sess *x = sess_find(s, id);
	json_t *report = NULL;
	char *p;
	int r = 0;
	if (sess_git_up(s) < 0)
		return -EIO;

	s->err[0] = '\0';
	if (ret_report)
		*ret_report = NULL;
	if (!x)
		return -ENOENT;
	if (x->info.state == SESSION_ENDED) {
		sess_seterr(s, "session %s has already ended", id);
		return -EALREADY;
	}
	if (end_reading(s, x) < 0)
		return -EBUSY;
	if (x->info.mode == SESSION_MODE_WORKTREE) {
		r = end_keep_work(s, x, discard, &report);
		if (r < 0)
			return r;
	}
	if (x->info.mode == SESSION_MODE_WORKTREE) {
		git_repository *repo = NULL;
		git_worktree *wt = NULL;
		char *away = NULL;
		bool moved;

		/* The files go on another thread when the lead has one for
		 * them (a checkout of 10,000 files: 0.1-0.3 s): out of the
		 * way first, under a name no session has. */
		if (s->remove) {
			char name[sizeof(ENDED_PREFIX) + SESSION_ID_LEN];

			snprintf(name, sizeof(name), ENDED_PREFIX "%s", id);
			away = worktrees_path(s, name);
		}
		moved = away && rename(x->info.worktree, away) == 0;
		if (git_repository_open_ext(&repo, x->info.gitdir,
					    GIT_REPOSITORY_OPEN_NO_SEARCH |
						GIT_REPOSITORY_OPEN_BARE,
					    NULL) == 0 &&
		    git_worktree_lookup(&wt, repo, x->info.id) == 0) {
			git_worktree_prune_options po = {
			    GIT_WORKTREE_PRUNE_OPTIONS_VERSION, 0};
			/* VALID: it is still a working worktree;
			 * WORKING_TREE: remove its files too (unless they
			 * were put away).  The branch stays for the
			 * operator to review and merge. */
			po.flags =
			    GIT_WORKTREE_PRUNE_VALID |
			    (moved ? 0 : GIT_WORKTREE_PRUNE_WORKING_TREE);
			if (git_worktree_prune(wt, &po) < 0)
				sess_seterr(s, "git worktree prune: %s",
					    sess_git_msg());
		}
		git_worktree_free(wt);
		git_repository_free(repo);
		if (moved) {
			s->remove(s->remove_data, away);
			away = NULL;
			r = 0;
		} else {
			r = sess_rm_tree(x->info.worktree);
		}
		free(away);
	}
	sess_work_forget(s, id);
	sess_heldout_drop(s, id);
	p = sess_conf_snapshot_path(s, id);
	if (p)
		unlink(p);
	free(p);
	p = sess_inplace_path(s, id);
	if (p)
		unlink(p);
	free(p);
	guard_free(x->guard);
	x->guard = NULL;
	sess_ign_free(x->ign);
	x->ign = NULL;
	sess_ign_once_drop(x);
	x->info.state = SESSION_ENDED;
	x->info.ended = time(NULL);
	sess_db_update(s, x);
	sess_journal(s, id, "session.end",
		     json_pack("{s:s?, s:s?}", "branch", x->info.branch,
			       "finding", x->info.finding_code),
		     "session %s ended; branch %s kept", id,
		     x->info.branch ? x->info.branch : "(none)");
	if (s->ended)
		s->ended(s->ended_data, id, "ENDED");
	if (ret_report)
		*ret_report = report;
	else
		json_decref(report);
	return r;
}

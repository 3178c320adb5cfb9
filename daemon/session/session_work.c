/*
 * Sessions, the work in the worktree: its files as a tree (through an
 * index of spd's own in the state dir, whose stat cache makes a tree of
 * a large worktree with one changed file cheap; the checkpoints made of
 * it are session_ckpt.c's), putting a checkpoint back, the commit
 * spd makes of uncommitted work when the session ends, and what the
 * session holds for the status and the diff.  Part of the session module
 * (session_priv.h); see session.h.
 *
 * Reading the worktree follows what the agent left there; spd reads it
 * only while no run of the session is in flight (session_runs), so that
 * nothing can swap a file for a symlink under spd's feet and have spd
 * copy a file of the operator's into objects a run can read.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <git2/sys/repository.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/paths.h"
#include "common/strv.h"
#include "common/util.h"
#include "daemon/session/session.h"
#include "daemon/session/session_priv.h"

/* Paths named in a reply (the uncommitted files, what --discard drops):
 * the rest is counted, not listed. */
#define SESSION_FILES_SHOWN 200
/* Commits listed by the status and the diff. */
#define SESSION_COMMITS_SHOWN 200

static const char *const ckpt_sql =
    "CREATE TABLE IF NOT EXISTS checkpoints("
    " session TEXT NOT NULL, n INTEGER NOT NULL, oid TEXT NOT NULL,"
    " journal_row INTEGER, what TEXT, files INTEGER NOT NULL,"
    " at INTEGER NOT NULL, PRIMARY KEY(session, n));";

int sess_work_schema(struct session_store *s)
{
	char *msg = NULL;

	if (sqlite3_exec(s->db, ckpt_sql, NULL, NULL, &msg) != SQLITE_OK) {
		sess_seterr(s, "sessions.db: %s", msg ? msg : "?");
		sqlite3_free(msg);
		return -EIO;
	}
	return 0;
}

/* ---- runs in flight ---- */

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void sess_work_fresh(struct sess *x)
{
	x->ck_known_ns = mono_ns();
	x->ck_touch_ns = 0;
}

void session_touch(struct session_store *s, const char *id)
{
	struct sess *x = sess_find(s, id);

	if (!x)
		return;
	x->ck_fresh = false;
	if (!x->ck_touch_ns)
		x->ck_touch_ns = mono_ns();
}

void session_run_begin(struct session_store *s, const char *id)
{
	struct sess *x = sess_find(s, id);

	if (!x)
		return;
	x->runs++;
	x->ck_fresh = false;
	if (!x->ck_touch_ns)
		x->ck_touch_ns = mono_ns();
}

void session_run_end(struct session_store *s, const char *id)
{
	struct sess *x = sess_find(s, id);

	if (x && x->runs > 0)
		x->runs--;
}

unsigned session_runs(struct session_store *s, const char *id)
{
	struct sess *x = sess_find(s, id);

	return x ? x->runs : 0;
}

/* ---- the worktree as a tree ---- */

static char *ckpt_index_path(struct session_store *s, const char *id)
{
	char *p = NULL;

	if (asprintf(&p, "%s/checkpoints/%s.index", s->state_dir, id) < 0)
		return NULL;
	return p;
}

/*
 * When spd's index of the worktree on disk held it (CLOCK_REALTIME ns, in
 * checkpoints/<id>.known beside the index): written after the index, so
 * that a crash between the two leaves an earlier time (a longer log to
 * apply, never a change missed), and removed before an index of unknown
 * age is written.  After a restart the first checkpoint reads what was
 * stamped since (the workspace's first walk, linkwatch_prime_since)
 * instead of the whole worktree.
 */
static char *ckpt_known_path(struct session_store *s, const char *id)
{
	char *p = NULL;

	if (asprintf(&p, "%s/checkpoints/%s.known", s->state_dir, id) < 0)
		return NULL;
	return p;
}

static uint64_t real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Before the index is written: the time it will hold (0: unknown). */
static void known_clear(struct session_store *s, struct sess *x)
{
	char *p = ckpt_known_path(s, x->info.id);

	if (p)
		(void)unlink(p);
	free(p);
}

/* After the index was written as of x->ck_known_ns. */
static void known_write(struct session_store *s, struct sess *x)
{
	char *p = ckpt_known_path(s, x->info.id), *tmp = NULL;
	uint64_t mono = mono_ns(), rt = real_ns();
	FILE *f;
	if (!p || !x->ck_known_ns || x->ck_known_ns > mono ||
	    mono - x->ck_known_ns > rt || asprintf(&tmp, "%s.tmp", p) < 0) {
		if (p)
			(void)unlink(p);
		free(p);
		return;
	}
	f = fopen(tmp, "we");
	if (f &&
	    fprintf(f, "%llu\n",
		    (unsigned long long)(rt - (mono - x->ck_known_ns))) > 0 &&
	    fclose(f) == 0) {
		f = NULL;
		if (rename(tmp, p) < 0)
			(void)unlink(tmp);
	} else {
		if (f)
			fclose(f);
		(void)unlink(tmp);
	}
	free(tmp);
	free(p);
}

/* The time checkpoints/<id>.known holds, or 0. */
static uint64_t known_read(struct session_store *s, const char *id)
{
	char *p = ckpt_known_path(s, id);
	unsigned long long v = 0;
	FILE *f = p ? fopen(p, "re") : NULL;

	if (f) {
		if (fscanf(f, "%llu", &v) != 1)
			v = 0;
		fclose(f);
	}
	free(p);
	return v;
}

uint64_t session_worktree_known(struct session_store *s, const char *worktree)
{
	for (struct sess *x = s ? s->list : NULL; x; x = x->next)
		if (x->info.mode == SESSION_MODE_WORKTREE && x->info.worktree &&
		    strcmp(x->info.worktree, worktree) == 0) {
			uint64_t rt = known_read(s, x->info.id);

			/* The log's start and ck_known_ns are each worked
			 * out from two clocks read one after the other: the
			 * log starts a little earlier, so as to be at or
			 * before it. */
			return rt > SESSION_KNOWN_MARGIN_NS
				   ? rt - SESSION_KNOWN_MARGIN_NS
				   : 0;
		}
	return 0;
}

static int ck_open(struct session_store *s, struct sess *x);

void session_checkpoint_warm(struct session_store *s, const char *worktree)
{
	for (struct sess *x = s ? s->list : NULL; x; x = x->next) {
		if (x->info.mode != SESSION_MODE_WORKTREE ||
		    x->info.state != SESSION_ACTIVE || !x->info.worktree ||
		    strcmp(x->info.worktree, worktree) != 0)
			continue;
		if (!x->ck_idx && !x->reading && !x->ck_out)
			(void)sess_work_open(s, x);
		return;
	}
}

/* Open (once per session, kept until its end) the main repository with
 * the worktree as its work dir and spd's index of it (seeded from the
 * checkout's: its stat cache spares hashing every file at first). */
static int ck_open(struct session_store *s, struct sess *x)
{
	char *dir = NULL, *path = NULL, *seed = NULL;
	struct stat st;
	int r;

	if (x->ck_idx)
		return 0;
	r = -ENOMEM;
	if (asprintf(&dir, "%s/checkpoints", s->state_dir) < 0 ||
	    !(path = ckpt_index_path(s, x->info.id)))
		goto out;
	r = sess_private_dir(s, dir);
	if (r < 0)
		goto out;
	if (lstat(path, &st) < 0 &&
	    asprintf(&seed, "%s/worktrees/%s/index", x->info.gitdir,
		     x->info.id) > 0 &&
	    sess_copy_file(seed, path, (off_t)1 << 32) == 0 && x->ck_known_ns) {
		/* A new worktree's checkout index holds the base's tree:
		 * the first tree is made from it, not written whole. */
		git_commit *c = NULL;
		git_oid base;

		x->ck_tree_set = git_oid_fromstr(&base, x->info.base) == 0 &&
				 sess_open_bare(s, x, &x->ck_repo) == 0 &&
				 git_commit_lookup(&c, x->ck_repo, &base) == 0;
		if (x->ck_tree_set)
			x->ck_tree = *git_commit_tree_id(c);
		git_commit_free(c);
		git_repository_free(x->ck_repo);
		x->ck_repo = NULL;
	}
	/* After a restart: the index on disk holds the worktree as of its
	 * .known, on this boot's monotonic clock (from before the boot:
	 * unknown, read whole). */
	if (!x->ck_known_ns && lstat(path, &st) == 0) {
		uint64_t rt = known_read(s, x->info.id), now = real_ns(),
			 mono = mono_ns();

		if (rt && rt <= now && now - rt < mono)
			x->ck_known_ns = mono - (now - rt);
	}
	r = sess_open_worktree(s, x, &x->ck_repo);
	if (r < 0)
		goto out;
	r = -EIO;
	if (git_index_open(&x->ck_idx, path) < 0 ||
	    git_repository_set_index(x->ck_repo, x->ck_idx) < 0 ||
	    git_index_read(x->ck_idx, 0) < 0) {
		sess_seterr(s, "cannot read spd's index of the worktree: %s",
			    sess_git_msg());
		x->ck_known_ns = 0;
		sess_work_close(s, x);
		goto out;
	}
	r = 0;
out:
	free(dir);
	free(path);
	free(seed);
	return r;
}

int sess_work_open(struct session_store *s, struct sess *x)
{
	git_oid tree;
	int r = ck_open(s, x);

	if (r < 0)
		return r;
	/* The tree of the index as read: the base the first checkpoint's
	 * changes are applied to (tree_updated).  Writing it also fills
	 * the index's cache of its trees (git's cache-tree), which a
	 * checkout's index lacks: a whole read (an end's) then writes only
	 * the trees of directories changed since, not every tree with a
	 * lookup of each of its blobs (116-127 ms for 10,000 files).  With
	 * no time the index is known as of, the first checkpoint reads
	 * the worktree whole and needs no base. */
	if (x->ck_known_ns && git_index_write_tree(&tree, x->ck_idx) == 0) {
		x->ck_tree = tree;
		x->ck_tree_set = true;
	}
	return 0;
}

void sess_work_close(struct session_store *s, struct sess *x)
{
	/* What the index knows (its stat cache, and as of when: .known)
	 * is kept for a restart. */
	if (x->ck_idx) {
		if (s)
			known_clear(s, x);
		if (git_index_write(x->ck_idx) == 0 && s)
			known_write(s, x);
	}
	git_index_free(x->ck_idx);
	git_repository_free(x->ck_repo);
	x->ck_idx = NULL;
	x->ck_repo = NULL;
	x->ck_tree_set = false;
	json_decref(x->ck_paths);
	x->ck_paths = NULL;
	free(x->ck_def_what);
	x->ck_def_what = NULL;
	x->ck_deferred = false;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sort a NULL-terminated list of names and drop repeats (a file written
 * twice is one change). */
static void names_unique(char **v)
{
	size_t n = 0, k = 0;

	while (v && v[n])
		n++;
	if (n < 2)
		return;
	qsort(v, n, sizeof(*v), name_cmp);
	for (size_t i = 0; i < n; i++) {
		if (k && strcmp(v[k - 1], v[i]) == 0)
			free(v[i]);
		else
			v[k++] = v[i];
	}
	v[k] = NULL;
}

static int update_cmp(const void *a, const void *b)
{
	return strcmp(((const git_tree_update *)a)->path,
		      ((const git_tree_update *)b)->path);
}

static int update_push(git_tree_update **v, size_t *n, size_t *cap,
		       git_tree_update_t action, const char *path,
		       const git_oid *id, uint32_t mode)
{
	if (*n == *cap) {
		size_t c = *cap ? 2 * *cap : 16;
		git_tree_update *nv = realloc(*v, c * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = c;
	}
	memset(&(*v)[*n], 0, sizeof(**v));
	(*v)[*n].action = action;
	(*v)[*n].path = path;
	if (id)
		(*v)[*n].id = *id;
	(*v)[*n].filemode = (git_filemode_t)mode;
	(*n)++;
	return 0;
}

/* The updates for "DIR/": each entry of DIR in base that the index has
 * neither as a file nor as a directory any more goes.  Its path strings
 * are kept in x->ck_strs until the tree is made. */
/* Whether the index holds an entry below the directory dir (its length
 * dlen): "dir/...".  Entries that only begin with its name sort first
 * (".spd.conf" before ".spd/x": '.' is below '/'), so the first entry
 * with the prefix is not enough; the scan stops past the prefix. */
static bool index_has_below(git_index *idx, const char *dir, size_t dlen)
{
	size_t pos;

	if (git_index_find_prefix(&pos, idx, dir) < 0)
		return false;
	for (; pos < git_index_entrycount(idx); pos++) {
		const git_index_entry *e = git_index_get_byindex(idx, pos);

		if (strncmp(e->path, dir, dlen) != 0)
			return false;
		if (e->path[dlen] == '/')
			return true;
	}
	return false;
}

static int prune_updates(struct sess *x, git_tree *base, const char *p,
			 git_tree_update **u, size_t *n, size_t *cap)
{
	git_tree_entry *te = NULL;
	git_tree *dir = NULL;
	size_t plen = strlen(p);
	char *d = strndup(p, plen - 1);
	int r = 0;

	if (!d)
		return -ENOMEM;
	if (!d[0]) {
		/* "/": the workspace's own entries. */
		if (git_tree_dup(&dir, base) < 0)
			goto out;
	} else if (git_tree_entry_bypath(&te, base, d) < 0 ||
		   git_tree_entry_type(te) != GIT_OBJECT_TREE ||
		   git_tree_lookup(&dir, x->ck_repo, git_tree_entry_id(te)) <
		       0) {
		goto out; /* nothing there before: the log has the rest */
	}
	for (size_t i = 0; r == 0 && i < git_tree_entrycount(dir); i++) {
		const char *name =
		    git_tree_entry_name(git_tree_entry_byindex(dir, i));
		char *child;
		size_t clen;

		if (asprintf(&child, "%s%s", d[0] ? p : "", name) < 0) {
			r = -ENOMEM;
			break;
		}
		clen = strlen(child);
		if (git_index_get_bypath(x->ck_idx, child, 0) ||
		    index_has_below(x->ck_idx, child, clen)) {
			free(child);
			continue;
		}
		r = strv_push(&x->ck_strs, child);
		free(child);
		if (r < 0)
			break;
		r = update_push(u, n, cap, GIT_TREE_UPDATE_REMOVE,
				x->ck_strs.v[x->ck_strs.n - 1], NULL, 0);
	}
out:
	git_tree_free(dir);
	git_tree_entry_free(te);
	free(d);
	return r;
}

/*
 * The tree of spd's index once the changed names are in it, made from the
 * last one (x->ck_tree) by rewriting only the trees on their way:
 * git_index_write_tree would read every tree of the worktree back to
 * rebuild its cache (2-3 ms for 10,000 files).  -EAGAIN: no last tree
 * (write the index's instead).
 */
static int tree_updated(struct sess *x, char **paths, git_oid *ret)
{
	git_tree *base = NULL;
	git_tree_update *u = NULL;
	size_t n = 0, cap = 0, k = 0;
	int r = 0;

	if (!x->ck_tree_set ||
	    git_tree_lookup(&base, x->ck_repo, &x->ck_tree) < 0)
		return -EAGAIN;
	for (size_t i = 0; r == 0 && paths && paths[i]; i++) {
		const char *p = paths[i];
		const git_index_entry *ie;
		git_tree_entry *te = NULL;
		size_t pos, plen = strlen(p);

		if (plen && p[plen - 1] == '/') {
			/* A directory's gone entries (ck_prune): what the
			 * last tree has there and the index no more. */
			r = prune_updates(x, base, p, &u, &n, &cap);
			continue;
		}
		ie = git_index_get_bypath(x->ck_idx, p, 0);
		if (ie) {
			r = update_push(&u, &n, &cap, GIT_TREE_UPDATE_UPSERT,
					ie->path, &ie->id, ie->mode);
			continue;
		}
		/* Gone, or a directory now: what was there goes, what the
		 * index has below it comes. */
		if (git_tree_entry_bypath(&te, base, p) == 0)
			r = update_push(&u, &n, &cap, GIT_TREE_UPDATE_REMOVE, p,
					NULL, 0);
		git_tree_entry_free(te);
		if (r == 0 && git_index_find_prefix(&pos, x->ck_idx, p) == 0)
			for (; r == 0 && pos < git_index_entrycount(x->ck_idx);
			     pos++) {
				const git_index_entry *e =
				    git_index_get_byindex(x->ck_idx, pos);

				if (strncmp(e->path, p, plen) != 0)
					break;
				if (e->path[plen] != '/')
					continue;
				r = update_push(&u, &n, &cap,
						GIT_TREE_UPDATE_UPSERT, e->path,
						&e->id, e->mode);
			}
	}
	if (r == 0) {
		/* One update a path (the same name can come twice: from the
		 * log and from below a directory of it). */
		if (n)
			qsort(u, n, sizeof(*u), update_cmp);
		for (size_t i = 0; i < n; i++)
			if (!k || strcmp(u[k - 1].path, u[i].path) != 0)
				u[k++] = u[i];
			else if (u[i].action == GIT_TREE_UPDATE_UPSERT)
				u[k - 1] = u[i];
		r = git_tree_create_updated(ret, x->ck_repo, base, k, u) < 0
			? -EAGAIN
			: 0;
	}
	/* What changed, as the checkpoint names it: the updates that are
	 * not what the last tree had already (no diff of the two trees). */
	json_decref(x->ck_paths);
	x->ck_paths = r == 0 ? json_array() : NULL;
	x->ck_npaths = 0;
	x->ck_paths_base = x->ck_tree;
	for (size_t i = 0; x->ck_paths && i < k; i++) {
		git_tree_entry *te = NULL;
		bool same = u[i].action == GIT_TREE_UPDATE_UPSERT &&
			    git_tree_entry_bypath(&te, base, u[i].path) == 0 &&
			    git_oid_equal(git_tree_entry_id(te), &u[i].id) &&
			    (uint32_t)git_tree_entry_filemode(te) ==
				(uint32_t)u[i].filemode;

		git_tree_entry_free(te);
		if (same)
			continue;
		if (x->ck_npaths++ < SESSION_FILES_SHOWN)
			json_array_append_new(x->ck_paths,
					      json_string(u[i].path));
	}
	free(u);
	strv_free(&x->ck_strs);
	git_tree_free(base);
	return r;
}

/*
 * The worktree's files (the ignored ones aside) as a tree written to the
 * main repository: 0, *ret_repo (the session's, borrowed: the main
 * repository with the worktree as its work dir and spd's index for it)
 * and *ret_tree.  When the workspace's watch says what changed since the
 * last call, only that is read (and the index stays in memory);
 * otherwise the whole worktree, and the index is written out.
 */

/*
 * ck_tree from spd's index of the worktree (x->ck_known_ns set), with
 * the whole worktree read into it first when whole (known 0 meanwhile,
 * so that a crash leaves no time the index does not hold).
 */
static int read_index(struct session_store *s, struct sess *x, bool whole)
{
	x->ck_whole = whole;
	json_decref(x->ck_paths);
	x->ck_paths = NULL;
	if (whole) {
		known_clear(s, x);
		if (git_index_add_all(x->ck_idx, NULL, GIT_INDEX_ADD_DEFAULT,
				      NULL, NULL) < 0 ||
		    git_index_update_all(x->ck_idx, NULL, NULL, NULL) < 0 ||
		    git_index_write(x->ck_idx) < 0) {
			sess_seterr(s, "cannot read the worktree: %s",
				    sess_git_msg());
			x->ck_known_ns = 0;
			return -EIO;
		}
		known_write(s, x);
	}
	if (git_index_write_tree(&x->ck_tree, x->ck_idx) < 0) {
		sess_seterr(s, "cannot read the worktree: %s", sess_git_msg());
		x->ck_tree_set = false;
		return -EIO;
	}
	x->ck_tree_set = true;
	return 0;
}

int sess_wt_prep(struct session_store *s, struct sess *x, enum wt_read how,
		 struct wt_plan *p)
{
	bool whole = how == WT_WHOLE;
	uint64_t since = 0, now = mono_ns();
	int r, known;

	memset(p, 0, sizeof(*p));
	/* An end's read of it, made on another thread just before. */
	if (how == WT_WHOLE && x->ck_fresh && x->ck_idx && x->ck_tree_set) {
		p->fresh = true;
		return 0;
	}
	r = ck_open(s, x);
	if (r < 0)
		return r;
	known = s->changes ? s->changes(s->changes_data, x->info.worktree,
					&p->changed, &since)
			   : 0;
	if (known == -EAGAIN && how == WT_WAIT)
		return -EINPROGRESS; /* nothing taken: the log goes on */
	/* The list holds what changed since `since`; the index holds the
	 * worktree as of ck_known_ns; between the two only runs and file
	 * tools change it, the first of them from ck_touch_ns. */
	if (known == 1 && (whole || !x->ck_known_ns ||
			   !(since <= x->ck_known_ns || !x->ck_touch_ns ||
			     since <= x->ck_touch_ns)))
		known = 0;
	x->ck_known_ns = now;
	x->ck_touch_ns = 0;
	p->known = known == 1;
	if (p->known)
		names_unique(p->changed);
	return 0;
}

int sess_wt_read(struct session_store *s, struct sess *x, struct wt_plan *p,
		 git_repository **ret_repo, git_oid *ret_tree)
{
	size_t visits = 0;
	int r = p->known ? 0 : -EAGAIN;

	if (p->fresh) {
		*ret_tree = x->ck_tree;
		*ret_repo = x->ck_repo;
		return 0;
	}
	for (size_t i = 0; r == 0 && p->changed && p->changed[i]; i++)
		r = sess_ck_apply(x, p->changed[i], 0, &visits);
	if (r == 0 && tree_updated(x, p->changed, ret_tree) == 0) {
		strv_free_array(steal_ptr(p->changed));
		x->ck_tree = *ret_tree;
		x->ck_whole = false;
		*ret_repo = x->ck_repo;
		return 0;
	}
	strv_free_array(steal_ptr(p->changed));
	if (r < 0 && r != -EAGAIN) {
		x->ck_known_ns = 0;
		return r;
	}
	r = read_index(s, x, r == -EAGAIN);
	if (r < 0)
		return r;
	*ret_tree = x->ck_tree;
	*ret_repo = x->ck_repo;
	return 0;
}

static int worktree_tree(struct session_store *s, struct sess *x,
			 git_repository **ret_repo, git_oid *ret_tree,
			 enum wt_read how)
{
	struct wt_plan p;
	int r = sess_wt_prep(s, x, how, &p);

	return r < 0 ? r : sess_wt_read(s, x, &p, ret_repo, ret_tree);
}

int sess_work_read_whole(struct session_store *s, struct sess *x)
{
	int r = ck_open(s, x);

	if (r < 0)
		return r;
	x->ck_known_ns = mono_ns();
	x->ck_touch_ns = 0;
	return read_index(s, x, true);
}

/* Paths that differ between two trees (NULL from: the empty tree), as a
 * JSON array of at most SESSION_FILES_SHOWN; *ret_n the count. */
json_t *sess_changed_paths(git_repository *repo, git_tree *from, git_tree *to,
			   size_t *ret_n)
{
	git_diff *d = NULL;
	json_t *a = json_array();
	size_t n;

	*ret_n = 0;
	if (!a || sess_diff_text(repo, from, to, &d, NULL) < 0) {
		json_decref(a);
		return NULL;
	}
	n = git_diff_num_deltas(d);
	for (size_t i = 0; i < n && i < SESSION_FILES_SHOWN; i++) {
		const git_diff_delta *e = git_diff_get_delta(d, i);

		json_array_append_new(a, json_string(e->new_file.path
							 ? e->new_file.path
							 : e->old_file.path));
	}
	*ret_n = n;
	git_diff_free(d);
	return a;
}

int sess_tree_of(git_repository *repo, const git_oid *commit, git_tree **ret)
{
	git_commit *c = NULL;
	int r = git_commit_lookup(&c, repo, commit) < 0 ||
			git_commit_tree(ret, c) < 0
		    ? -EIO
		    : 0;

	git_commit_free(c);
	return r;
}

const git_signature *sess_spd_sig(git_signature **keep)
{
	if (git_signature_now(keep, "spd", "spd@localhost") < 0)
		return NULL;
	return *keep;
}

/* ---- what the branch holds, and what is not committed ---- */

/* The branch's commits since the base, newest first. */
static json_t *branch_commits(git_repository *repo, const git_oid *tip,
			      const git_oid *base)
{
	git_revwalk *w = NULL;
	json_t *a = json_array();
	git_oid id;
	size_t n = 0;

	if (!a || git_revwalk_new(&w, repo) < 0 ||
	    git_revwalk_push(w, tip) < 0) {
		git_revwalk_free(w);
		return a;
	}
	git_revwalk_hide(w, base);
	while (n++ < SESSION_COMMITS_SHOWN && git_revwalk_next(&id, w) == 0) {
		git_commit *c = NULL;

		if (git_commit_lookup(&c, repo, &id) < 0)
			break;
		json_array_append_new(
		    a,
		    json_pack("{s:s, s:s, s:s}", "commit", git_oid_tostr_s(&id),
			      "subject", git_commit_summary(c) ?: "", "author",
			      git_commit_author(c)->name ?: ""));
		git_commit_free(c);
	}
	git_revwalk_free(w);
	return a;
}

int session_work(struct session_store *s, const char *id, json_t **ret)
{
	struct sess *x = sess_find(s, id);
	git_repository *repo = NULL;
	git_tree *head = NULL, *now = NULL;
	git_oid tip, base, tid;
	json_t *res = NULL, *files;
	size_t n = 0;
	int r;

	if (sess_git_up(s) < 0)
		return -EIO;
	s->err[0] = '\0';
	if (!x)
		return -ENOENT;
	if (x->info.mode != SESSION_MODE_WORKTREE)
		return -EINVAL;
	git_oid_fromstr(&base, x->info.base);
	if (x->info.state == SESSION_ENDED || x->runs > 0 || x->reading ||
	    x->ck_out) {
		/* The branch alone: the worktree is gone, a run may be
		 * changing it, or an end or a checkpoint is reading it on
		 * another thread. */
		if (sess_open_bare(s, x, &repo) < 0)
			return -EIO;
	} else {
		r = worktree_tree(s, x, &repo, &tid, WT_CHANGES);
		if (r < 0)
			return r;
	}
	r = sess_branch_tip(s, x, repo, &tip);
	if (r < 0)
		goto out;
	res = json_pack("{s:s, s:o}", "head", git_oid_tostr_s(&tip), "commits",
			branch_commits(repo, &tip, &base));
	if (x->info.state != SESSION_ENDED && x->runs == 0 && !x->reading &&
	    !x->ck_out) {
		r = -EIO;
		if (sess_tree_of(repo, &tip, &head) < 0 ||
		    git_tree_lookup(&now, repo, &tid) < 0)
			goto out;
		files = sess_changed_paths(repo, head, now, &n);
		json_object_set_new(res, "uncommitted",
				    files ? files : json_array());
		json_object_set_new(res, "uncommitted_count",
				    json_integer((json_int_t)n));
	}
	*ret = steal_ptr(res);
	r = 0;
out:
	json_decref(res);
	git_tree_free(head);
	git_tree_free(now);
	if (repo != x->ck_repo)
		git_repository_free(repo);
	return r;
}

/* ---- the end ---- */

int sess_end_work(struct session_store *s, struct sess *x, bool discard,
		  json_t **ret_report)
{
	git_repository *repo = NULL;
	git_tree *head = NULL, *now = NULL;
	git_commit *parent = NULL;
	git_signature *sig = NULL, *author = NULL;
	git_oid tip, tid, cid;
	json_t *files = NULL;
	char *text = NULL, where[1100], msg[512];
	void *held;
	size_t n = 0;
	int r, hit;

	*ret_report = NULL;
	r = worktree_tree(s, x, &repo, &tid, WT_WHOLE);
	if (r < 0)
		return r;
	r = sess_branch_tip(s, x, repo, &tip);
	if (r < 0)
		goto out;
	r = -EIO;
	if (sess_tree_of(repo, &tip, &head) < 0 ||
	    git_tree_lookup(&now, repo, &tid) < 0)
		goto out;
	if (git_oid_equal(git_tree_id(head), &tid)) {
		r = 0; /* nothing uncommitted */
		goto out;
	}
	files = sess_changed_paths(repo, head, now, &n);
	if (discard) {
		*ret_report = json_pack("{s:O, s:I}", "discarded",
					files ? files : json_null(),
					"discarded_count", (json_int_t)n);
		sess_journal(s, x->info.id, "session.discard",
			     json_pack("{s:O, s:I}", "files",
				       files ? files : json_null(), "count",
				       (json_int_t)n),
			     "%zu uncommitted file%s discarded", n,
			     n == 1 ? "" : "s");
		r = 0;
		goto out;
	}
	/* Made by the end's read on its thread, when it read this. */
	text = sess_patch_take(x, git_tree_id(head), &tid);
	r = text ? 0 : sess_diff_text(repo, head, now, NULL, &text);
	if (r < 0)
		goto out;
	held = sess_scan_hold(s);
	hit = sess_scan(s, held, text, where, sizeof(where));
	sess_scan_release(s, held);
	if (hit == 1) {
		sess_seterr(s,
			    "%s adds a known secret value: the uncommitted "
			    "work is not committed and the worktree is kept "
			    "(%s); remove the value and end again, or end "
			    "with --discard",
			    where, x->info.worktree);
		r = -EACCES;
		goto out;
	}
	snprintf(msg, sizeof(msg),
		 "Uncommitted work of spd session %s\n\nspd committed what "
		 "the agent left uncommitted in its worktree when the "
		 "session ended.\n",
		 x->info.id);
	r = -EIO;
	{
		char name[256], email[256];

		sess_agent_ident(s, x, name, sizeof(name), email,
				 sizeof(email));
		if (git_signature_now(&author, name, email) < 0)
			goto out;
	}
	if (!sess_spd_sig(&sig) || git_commit_lookup(&parent, repo, &tip) < 0 ||
	    git_commit_create(&cid, repo, NULL, author, sig, NULL, msg, now, 1,
			      (const git_commit *[]){parent}) < 0) {
		sess_seterr(s, "cannot commit the uncommitted work: %s",
			    sess_git_msg());
		goto out;
	}
	r = sess_branch_move(s, x, repo, &tip, &cid,
			     "spd: the session's uncommitted work");
	if (r < 0)
		goto out;
	*ret_report = json_pack(
	    "{s:s, s:O, s:I}", "committed", git_oid_tostr_s(&cid), "files",
	    files ? files : json_null(), "files_count", (json_int_t)n);
	sess_journal(s, x->info.id, "session.commit",
		     json_pack("{s:s, s:s, s:s, s:O}", "branch", x->info.branch,
			       "to", git_oid_tostr_s(&cid), "by", "spd",
			       "files", files ? files : json_null()),
		     "%s: spd committed %zu uncommitted file%s at the end",
		     x->info.branch, n, n == 1 ? "" : "s");
	r = 1;
out:
	json_decref(files);
	free(text);
	git_signature_free(sig);
	git_signature_free(author);
	git_commit_free(parent);
	git_tree_free(head);
	git_tree_free(now);
	/* repo is the session's (worktree_tree). */
	return r;
}

void sess_work_forget(struct session_store *s, const char *id)
{
	struct sess *x = sess_find(s, id);
	char *p = ckpt_index_path(s, id);

	if (x)
		sess_work_close(s, x);

	if (p)
		unlink(p);
	free(p);
	if ((p = ckpt_known_path(s, id)))
		unlink(p);
	free(p);
}

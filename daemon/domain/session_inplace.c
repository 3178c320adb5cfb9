/*
 * Sessions in place: the git-ignored files that look like credentials,
 * found once at the start and made to read as empty in every run, and
 * the git-ignored entries each run hides; session_run_paths() gathers
 * what a run of a session mounts.  Part of the session module
 * (session_priv.h); see session.h.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/strv.h"
#include "common/paths.h"
#include "daemon/domain/protected.h"
#include "proto/sandbox.h"
#include "daemon/domain/session.h"
#include "daemon/domain/session_priv.h"

/* Deepest directory walked for ignored entries: a deeper tree is an
 * attack on the walk's stack, and is refused like a too-large one. */
#define SESSION_SCAN_DEPTH 64

/* ---- in place: ignored credential files ---- */

struct secret_scan {
	git_repository *repo;
	const char *root;
	char **v;
	size_t n;
	size_t seen;
};

static int scan_secrets(struct secret_scan *sc, const char *rel, unsigned depth)
{
	char path[GUARD_PATH_MAX], child[GUARD_PATH_MAX];
	struct dirent *de;
	DIR *d;
	int r = 0;

	if (depth > 32)
		return 0;
	snprintf(path, sizeof(path), "%s%s%s", sc->root, rel[0] ? "/" : "",
		 rel);
	d = opendir(path);
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		unsigned int flags = 0;
		struct stat st;
		int k;

		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0 ||
		    (depth == 0 && strcmp(de->d_name, ".git") == 0))
			continue;
		if (++sc->seen > SESSION_SCAN_MAX) {
			r = -E2BIG;
			break;
		}
		k = snprintf(child, sizeof(child), "%s%s%s", rel,
			     rel[0] ? "/" : "", de->d_name);
		if (k < 0 || (size_t)k >= sizeof(child))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			r = scan_secrets(sc, child, depth + 1);
			if (r < 0)
				break;
			continue;
		}
		if (protected_match(child) != PROTECTED_SECRET_FILE)
			continue;
		/* Tracked files stay as they are: they are the project's. */
		if (git_status_file(&flags, sc->repo, child) < 0 ||
		    !(flags & GIT_STATUS_IGNORED))
			continue;
		if (sc->n >= SESSION_EMPTY_FILES_MAX) {
			r = -E2BIG;
			break;
		}
		sc->v[sc->n] = paths_join(sc->root, child);
		if (!sc->v[sc->n]) {
			r = -ENOMEM;
			break;
		}
		sc->n++;
	}
	closedir(d);
	return r;
}

/*
 * The git-ignored files of an in-place checkout that look like
 * credentials, found once at session start (the agent's own later files
 * are its own).  Past SESSION_SCAN_MAX entries or SESSION_EMPTY_FILES_MAX
 * matches the start is refused rather than run with some of them
 * readable.
 */
int sess_find_secrets(struct session_store *s, struct sess *x)
{
	struct secret_scan sc = {0};
	int r;

	if (sess_git_up(s) < 0)
		return -EIO;
	if (git_repository_open_ext(&sc.repo, x->info.worktree,
				    GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0) {
		sess_seterr(s, "%s: %s", x->info.worktree, sess_git_msg());
		return -EIO;
	}
	sc.root = x->info.worktree;
	sc.v = calloc(SESSION_EMPTY_FILES_MAX + 1, sizeof(char *));
	if (!sc.v) {
		git_repository_free(sc.repo);
		return -ENOMEM;
	}
	r = scan_secrets(&sc, "", 0);
	git_repository_free(sc.repo);
	if (r < 0) {
		if (r == -E2BIG)
			sess_seterr(
			    s,
			    "in place: more than %d ignored credential "
			    "files or %d entries in the checkout; use a "
			    "worktree session",
			    SESSION_EMPTY_FILES_MAX, SESSION_SCAN_MAX);
		strv_free_array(sc.v);
		return r;
	}
	strv_free_array(x->empty_files);
	x->empty_files = sc.v;
	return 0;
}

/* ---- in place: ignored entries hidden from a run ---- */

struct ignored_scan {
	git_repository *repo;
	const char *root;
	char **skip; /* already covered (the empty credential files) */
	char **v;
	size_t n, max;
	size_t seen;
};

/*
 * Collect the top-most ignored entries below rel.  The test is the one
 * fs.read applies (git_ignore_path_is_ignored on the relative path,
 * daemon/methods/m_fs.c), so a run hides exactly what the file tools refuse;
 * an error in git's ignore machinery counts as ignored there, and here.
 * An ignored directory is one entry and is not walked.
 */
static int scan_ignored(struct ignored_scan *sc, const char *rel,
			unsigned depth)
{
	char path[GUARD_PATH_MAX], child[GUARD_PATH_MAX];
	struct dirent *de;
	DIR *d;
	int r = 0;

	if (depth > SESSION_SCAN_DEPTH)
		return -E2BIG;
	snprintf(path, sizeof(path), "%s%s%s", sc->root, rel[0] ? "/" : "",
		 rel);
	d = opendir(path);
	if (!d)
		return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
	while ((de = readdir(d))) {
		bool covered = false;
		int ignored = 0, k;
		struct stat st;

		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0 ||
		    (depth == 0 && strcmp(de->d_name, ".git") == 0))
			continue;
		if (++sc->seen > SESSION_SCAN_MAX) {
			r = -E2BIG;
			break;
		}
		k = snprintf(child, sizeof(child), "%s%s%s", rel,
			     rel[0] ? "/" : "", de->d_name);
		if (k < 0 || (size_t)k >= sizeof(child)) {
			r = -ENAMETOOLONG;
			break;
		}
		if (git_ignore_path_is_ignored(&ignored, sc->repo, child) < 0)
			ignored = 1;
		if (!ignored) {
			if (fstatat(dirfd(d), de->d_name, &st,
				    AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISDIR(st.st_mode))
				r = scan_ignored(sc, child, depth + 1);
			if (r < 0)
				break;
			continue;
		}
		k = snprintf(path, sizeof(path), "%s/%s", sc->root, child);
		if (k < 0 || (size_t)k >= sizeof(path)) {
			r = -ENAMETOOLONG;
			break;
		}
		for (size_t i = 0; sc->skip && sc->skip[i] && !covered; i++)
			covered = strcmp(sc->skip[i], path) == 0;
		if (covered)
			continue;
		if (sc->n >= sc->max) {
			r = -E2BIG;
			break;
		}
		if (!(sc->v[sc->n] = strdup(path))) {
			r = -ENOMEM;
			break;
		}
		sc->n++;
	}
	closedir(d);
	return r;
}

static int find_ignored(struct session_store *s, struct sess *x, size_t max,
			char ***ret)
{
	struct ignored_scan sc = {
	    .root = x->info.worktree, .skip = x->empty_files, .max = max};
	int r;

	if (sess_git_up(s) < 0)
		return -EIO;
	if (git_repository_open_ext(&sc.repo, x->info.worktree,
				    GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0)
		return -EIO;
	sc.v = calloc(max + 1, sizeof(char *));
	if (!sc.v) {
		git_repository_free(sc.repo);
		return -ENOMEM;
	}
	r = scan_ignored(&sc, "", 0);
	git_repository_free(sc.repo);
	if (r < 0) {
		strv_free_array(sc.v);
		return r;
	}
	*ret = sc.v;
	return 0;
}

void session_run_paths_free(struct session_run_paths *p)
{
	if (!p)
		return;
	free(p->workspace);
	strv_free_array(p->readonly);
	strv_free_array(p->empty_files);
	strv_free_array(p->hidden);
	memset(p, 0, sizeof(*p));
}

int session_run_paths(struct session_store *s, const char *id,
		      struct session_run_paths *ret, size_t *ret_hidden_max)
{
	struct session_run_paths p = {0};
	struct sess *x;
	size_t n = 0;
	int r = session_usable(s, id);

	if (r < 0)
		return r;
	x = sess_find(s, id);
	p.in_place = x->info.mode == SESSION_MODE_IN_PLACE;
	while (x->empty_files && x->empty_files[n])
		n++;
	p.workspace = strdup(x->info.worktree);
	p.readonly = calloc(2, sizeof(char *));
	p.empty_files = calloc(n + 1, sizeof(char *));
	if (!p.workspace || !p.readonly || !p.empty_files)
		goto oom;
	/* The repository's git dir, read-only: in place it lies inside the
	 * checkout; a worktree's lies outside it (and as root, sandboxd binds
	 * it idmapped so that the run's uid can read it: git works). */
	if (!(p.readonly[0] = strdup(x->info.gitdir)))
		goto oom;
	for (size_t i = 0; i < n; i++)
		if (!(p.empty_files[i] = strdup(x->empty_files[i])))
			goto oom;
	if (p.in_place) {
		size_t max = SBXP_PATHS_MAX - SESSION_RUN_PATHS_RESERVED;

		max = n < max ? max - n : 0;
		if (ret_hidden_max)
			*ret_hidden_max = max;
		r = find_ignored(s, x, max, &p.hidden);
		if (r < 0) {
			session_run_paths_free(&p);
			return r;
		}
	}
	*ret = p;
	return 0;
oom:
	session_run_paths_free(&p);
	return -ENOMEM;
}

/*
 * Sessions in place: the top-most git-ignored entries a run hides, and
 * the list of them kept between runs with an inotify watch on what could
 * change it; its walk of the checkout on the loop (session_run_paths) or
 * on another thread (session_walk_begin).  Part of the session module
 * (session_priv.h); see session.h.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/strv.h"
#include "common/util.h"
#include "common/paths.h"
#include "proto/sandbox.h"
#include "daemon/session/session.h"
#include "daemon/session/session_priv.h"

/* ---- in place: the hidden list kept between runs ---- */

/*
 * The walk below costs one ignore check per entry of the non-ignored tree
 * (55 ms for a 10,000-file checkout), and its result changes only when
 * one of these does: a name in a directory it read (made, gone, moved in
 * or out), a .gitignore's content, or the files git reads its other
 * patterns from (.git/info/exclude, core.excludesFile, the config files
 * that name it).  So the walk puts an inotify watch on each directory it
 * reads, before reading it, and one on the directory of each of those
 * files (or its nearest existing parent, for one not there yet), and the
 * list is kept: a run applies what the queue holds to it (a name made or
 * gone in a walked directory is one ignore check, ign_name) and walks
 * again only for what the list cannot follow (a new directory git does
 * not ignore, a walked one gone or moved, a .gitignore written, a change
 * to git's other pattern files).  A run reads the queue first: inotify
 * queues an event inside the system call that caused it, so whatever was
 * done before the run was asked for is seen.  Anything the watch cannot account for (an overflowed queue,
 * a watched directory gone, a .gitignore that is a symbolic link, more
 * directories than IGN_WATCHES_MAX, no inotify) means a walk at every
 * run, as before.  Includes in git's config files are not followed.
 */
#define IGN_WATCHES_MAX 8192
#define IGN_FILTERS_MAX 16
/* A name made, gone or moved, a file's content, the directory itself. */
#define IGN_DIR_MASK                                                           \
	(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_MODIFY |     \
	 IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR |         \
	 IN_MASK_ADD)
#define IGN_EVBUF 4096

enum { IGN_WD_TREE = 1, IGN_WD_SOURCE = 2 };

struct ign_filter {
	int wd;
	char name[256];
};

struct sess_ign {
	int ifd;       /* -1: nothing kept */
	bool broken;   /* a watch could not be placed */
	int result;    /* the kept walk's: 0 or -E2BIG */
	char **hidden; /* the kept list, with result 0 */
	size_t nhidden;
	size_t max;    /* the room it was walked for */
	size_t seen;   /* entries the walks read (SESSION_SCAN_MAX) */
	uint8_t *kind; /* by watch descriptor: IGN_WD_* bits */
	char **wdpath; /* by watch descriptor: a walked directory,
			   relative ("" for the checkout) */
	size_t nkind;
	size_t nwatch;
	struct ign_filter filt[IGN_FILTERS_MAX];
	size_t nfilt;
	/* For the changes applied without a walk. */
	git_repository *repo;
	char *root;  /* the checkout */
	char **skip; /* the credential files */
	/* While the queue is read for a run's walk on another thread
	 * (session_walk_begin): the new directories to walk alone there,
	 * relative, instead of on the loop (ign_dir: as long as the
	 * directory, 13 ms for 1,000 entries here). */
	bool defer;
	struct strv dirs;
};

static unsigned long ign_walks;

void session_walk_forget(struct session_store *s, const char *id)
{
	struct sess *x = sess_find(s, id);

	if (x)
		sess_ign_once_drop(x);
}

unsigned long session_ignored_walks(void)
{
	return __atomic_load_n(&ign_walks, __ATOMIC_RELAXED);
}

void sess_ign_free(struct sess_ign *w)
{
	if (!w)
		return;
	if (w->ifd >= 0)
		close(w->ifd);
	strv_free_array(w->hidden);
	for (size_t i = 0; w->wdpath && i < w->nkind; i++)
		free(w->wdpath[i]);
	free(w->wdpath);
	free(w->kind);
	git_repository_free(w->repo);
	free(w->root);
	strv_free_array(w->skip);
	strv_free(&w->dirs);
	free(w);
}

static void ign_mark(struct sess_ign *w, int wd, uint8_t bit)
{
	if (wd < 0) {
		w->broken = true;
		return;
	}
	if ((size_t)wd >= w->nkind) {
		size_t n = (size_t)wd * 2 + 16;
		uint8_t *k = realloc(w->kind, n);
		char **pv;

		if (!k) {
			w->broken = true;
			return;
		}
		memset(k + w->nkind, 0, n - w->nkind);
		w->kind = k;
		pv = realloc(w->wdpath, n * sizeof(*pv));
		if (!pv) {
			w->broken = true;
			return;
		}
		memset(pv + w->nkind, 0, (n - w->nkind) * sizeof(*pv));
		w->wdpath = pv;
		w->nkind = n;
	}
	w->kind[wd] |= bit;
}

/* A directory the walk is about to read (rel, relative to the checkout),
 * as the open fd. */
static void ign_watch_fd(struct sess_ign *w, int fd, const char *rel)
{
	char proc[64];
	int wd;

	if (!w || w->broken)
		return;
	if (++w->nwatch > IGN_WATCHES_MAX) {
		w->broken = true;
		return;
	}
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	wd = inotify_add_watch(w->ifd, proc, IGN_DIR_MASK);
	ign_mark(w, wd, IGN_WD_TREE);
	if (w->broken)
		return;
	/* One directory, one watch: the same one under two names is a bind
	 * mount or a loop, which the walk's names cannot tell apart.  Under
	 * the same name it is a new directory walked again (ign_dir). */
	if (w->wdpath[wd]) {
		if (strcmp(w->wdpath[wd], rel) != 0)
			w->broken = true;
	} else if (!(w->wdpath[wd] = strdup(rel))) {
		w->broken = true;
	}
}

/* A file git reads patterns from: the watch is on its directory, or on
 * the nearest parent that exists, for events naming the next step; one
 * that is a symbolic link has its target's directory watched too. */
static void ign_watch_file(struct sess_ign *w, const char *file, int depth)
{
	char dir[GUARD_PATH_MAX];
	struct stat st;
	size_t len;

	if (!file || w->broken)
		return;
	if (file[0] != '/' || (len = strlen(file)) >= sizeof(dir)) {
		w->broken = true;
		return;
	}
	memcpy(dir, file, len + 1);
	for (;;) {
		char *slash = strrchr(dir, '/');
		bool top = slash == dir;
		const char *next, *end;
		struct ign_filter *f;
		int wd;

		if (!slash) {
			w->broken = true;
			return;
		}
		/* dir becomes its parent: "/" for a name at the top. */
		slash[top ? 1 : 0] = '\0';
		wd = inotify_add_watch(w->ifd, dir, IGN_DIR_MASK);
		if (wd < 0) {
			if ((errno != ENOENT && errno != ENOTDIR) || top) {
				w->broken = true;
				return;
			}
			continue;
		}
		if (w->nfilt >= IGN_FILTERS_MAX) {
			w->broken = true;
			return;
		}
		next = file + (top ? 1 : strlen(dir) + 1);
		end = strchr(next, '/');
		f = &w->filt[w->nfilt++];
		f->wd = wd;
		snprintf(f->name, sizeof(f->name), "%.*s",
			 (int)(end ? (size_t)(end - next) : strlen(next)),
			 next);
		ign_mark(w, wd, IGN_WD_SOURCE);
		break;
	}
	if (lstat(file, &st) == 0 && S_ISLNK(st.st_mode)) {
		char *real = realpath(file, NULL);

		if (real && depth < 1)
			ign_watch_file(w, real, depth + 1);
		else if (!real && errno != ENOENT)
			w->broken = true;
		free(real);
	}
}

/* Where the repository's ignore patterns come from, besides the
 * .gitignore files the walk sees. */
static void ign_watch_sources(struct sess_ign *w, git_repository *repo,
			      const char *gitdir)
{
	const char *home = getenv("HOME"), *xdg = getenv("XDG_CONFIG_HOME");
	git_config *cfg = NULL;
	git_buf buf = {0};
	char *p;

	if (w->broken)
		return;
	if (gitdir) {
		p = paths_join(gitdir, "config");
		ign_watch_file(w, p, 0);
		free(p);
		p = paths_join(gitdir, "info/exclude");
		ign_watch_file(w, p, 0);
		free(p);
	}
	if (home && home[0] == '/') {
		p = paths_join(home, ".gitconfig");
		ign_watch_file(w, p, 0);
		free(p);
	}
	if (xdg && xdg[0] == '/')
		p = paths_join(xdg, "git");
	else if (home && home[0] == '/')
		p = paths_join(home, ".config/git");
	else
		p = NULL;
	if (p) {
		char *q = paths_join(p, "config");

		ign_watch_file(w, q, 0);
		free(q);
		q = paths_join(p, "ignore");
		ign_watch_file(w, q, 0);
		free(q);
		free(p);
	}
	ign_watch_file(w, "/etc/gitconfig", 0);
	if (git_repository_config_snapshot(&cfg, repo) == 0) {
		if (git_config_get_path(&buf, cfg, "core.excludesfile") == 0)
			ign_watch_file(w, buf.ptr, 0);
		git_buf_dispose(&buf);
		git_config_free(cfg);
	}
}

static bool ign_source_event(const struct sess_ign *w,
			     const struct inotify_event *ev)
{
	if (!ev->len)
		return true; /* the directory itself */
	for (size_t i = 0; i < w->nfilt; i++)
		if (w->filt[i].wd == ev->wd &&
		    strcmp(w->filt[i].name, ev->name) == 0)
			return true;
	return false;
}

static int hidden_find(const struct sess_ign *w, const char *path)
{
	for (size_t i = 0; i < w->nhidden; i++)
		if (strcmp(w->hidden[i], path) == 0)
			return (int)i;
	return -1;
}

static int ign_dir(struct sess_ign *w, const char *rel);

/* path (taken) into the kept list: 0, or -ESTALE (the list full, or out
 * of memory; path freed). */
static int hidden_add(struct sess_ign *w, char *path)
{
	char **v;

	if (w->nhidden >= w->max ||
	    !(v = realloc(w->hidden, (w->nhidden + 2) * sizeof(*v)))) {
		free(path);
		return -ESTALE;
	}
	w->hidden = v;
	v[w->nhidden++] = path;
	v[w->nhidden] = NULL;
	return 0;
}

/*
 * One name made, moved in, removed or moved out of a walked directory,
 * applied to the kept list without a walk of the checkout: a file (or an
 * ignored directory) is one ignore check, as in the walk; a directory
 * git does not ignore is walked alone (ign_dir).  0, or -ESTALE when only
 * a walk will do: a .gitignore, the list full.
 */
static int ign_name(struct sess_ign *w, const struct inotify_event *ev)
{
	const char *dir = w->wdpath[ev->wd];
	char rel[GUARD_PATH_MAX], path[GUARD_PATH_MAX];
	bool gone = ev->mask & (IN_DELETE | IN_MOVED_FROM);
	int ignored = 0, k, at;
	char *copy;

	if (!dir || !ev->len || !w->repo ||
	    strcmp(ev->name, ".gitignore") == 0 ||
	    (!dir[0] && strcmp(ev->name, ".git") == 0))
		return -ESTALE;
	k = snprintf(rel, sizeof(rel), "%s%s%s", dir, dir[0] ? "/" : "",
		     ev->name);
	if (k < 0 || (size_t)k >= sizeof(rel))
		return -ESTALE;
	k = snprintf(path, sizeof(path), "%s/%s", w->root, rel);
	if (k < 0 || (size_t)k >= sizeof(path))
		return -ESTALE;
	at = hidden_find(w, path);
	if (gone) {
		/* A directory git does not ignore was walked and watched:
		 * its own watch says it went (IN_IGNORED), and that walks. */
		if (at >= 0) {
			free(w->hidden[at]);
			w->hidden[at] = w->hidden[--w->nhidden];
			w->hidden[w->nhidden] = NULL;
		}
		return 0;
	}
	if (at >= 0)
		return 0;
	if (git_ignore_path_is_ignored(&ignored, w->repo, rel) < 0)
		ignored = 1;
	if (!ignored && (ev->mask & IN_ISDIR) && w->defer)
		return strv_push(&w->dirs, rel) < 0 ? -ESTALE : 0;
	if (!ignored)
		return (ev->mask & IN_ISDIR) ? ign_dir(w, rel) : 0;
	for (size_t i = 0; w->skip && w->skip[i]; i++)
		if (strcmp(w->skip[i], path) == 0)
			return 0;
	copy = strdup(path);
	return copy ? hidden_add(w, copy) : -ESTALE;
}

/* Reads the queue and applies what it says to the kept list: 0 when the
 * list holds, -ESTALE when only a new walk will do. */
static int ign_drain(struct sess_ign *w)
{
	char buf[IGN_EVBUF]
	    __attribute__((aligned(__alignof__(struct inotify_event))));
	int stale = 0;

	for (;;) {
		ssize_t n = read(w->ifd, buf, sizeof(buf));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? 0 : -ESTALE;
		}
		if (n == 0)
			return -ESTALE;
		for (ssize_t off = 0; off < n && !stale;) {
			const struct inotify_event *ev =
			    (const struct inotify_event *)(void *)(buf + off);
			uint8_t k = ev->wd >= 0 && (size_t)ev->wd < w->nkind
					? w->kind[ev->wd]
					: 0;

			off += (ssize_t)(sizeof(*ev) + ev->len);
			if (ev->mask & (IN_Q_OVERFLOW | IN_IGNORED))
				stale = -ESTALE;
			else if ((k & IGN_WD_SOURCE) && ign_source_event(w, ev))
				stale = -ESTALE;
			else if (!(k & IGN_WD_TREE))
				continue;
			else if (ev->mask & (IN_MODIFY | IN_CLOSE_WRITE))
				stale = ev->len && strcmp(ev->name,
							  ".gitignore") == 0
					    ? -ESTALE
					    : 0;
			else if (ev->mask & (IN_CREATE | IN_MOVED_TO |
					     IN_DELETE | IN_MOVED_FROM))
				stale =
				    w->result < 0 ? -ESTALE : ign_name(w, ev);
			else
				stale = -ESTALE; /* the directory itself */
		}
		/* Stale: the rest of the queue goes with w. */
		if (stale)
			return stale;
	}
}

/* ---- in place: ignored entries hidden from a run ---- */

struct ignored_scan {
	git_repository *repo;
	const char *root;
	char **skip; /* already covered (the empty credential files) */
	char **v;
	size_t n, max;
	size_t seen;
	struct sess_ign *w; /* watches each directory read, or NULL */
	bool gitignore;	    /* a .gitignore was read */
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
	int fd, r = 0;

	if (depth > SESSION_SCAN_DEPTH)
		return -E2BIG;
	snprintf(path, sizeof(path), "%s%s%s", sc->root, rel[0] ? "/" : "",
		 rel);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
	/* The watch goes on before the directory is read, on the directory
	 * opened (not a name that could be swapped meanwhile): a name made
	 * while it is read is either read or queued. */
	ign_watch_fd(sc->w, fd, rel);
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
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
			bool dir = false;

			if (fstatat(dirfd(d), de->d_name, &st,
				    AT_SYMLINK_NOFOLLOW) == 0)
				dir = S_ISDIR(st.st_mode);
			else
				st.st_mode = 0;
			/* A .gitignore that is not a plain file (a link to
			 * one elsewhere) changes where no watch sees. */
			if (sc->w && strcmp(de->d_name, ".gitignore") == 0 &&
			    !S_ISREG(st.st_mode))
				sc->w->broken = true;
			if (strcmp(de->d_name, ".gitignore") == 0)
				sc->gitignore = true;
			if (dir)
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

/* The walk of the checkout at root (its git dir gitdir, the credential
 * files skip): no store nor session is read, for it may run on another
 * thread (session_walk_work); libgit2 is up already. */
static int find_ignored(const char *root, const char *gitdir, char *const *skip,
			size_t max, struct sess_ign *w, char ***ret)
{
	struct ignored_scan sc = {
	    .root = root, .skip = (char **)(uintptr_t)skip, .max = max, .w = w};
	int r;

	if (git_repository_open_ext(&sc.repo, root,
				    GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0)
		return -EIO;
	if (w)
		ign_watch_sources(w, sc.repo, gitdir);
	sc.v = calloc(max + 1, sizeof(char *));
	if (!sc.v) {
		git_repository_free(sc.repo);
		return -ENOMEM;
	}
	r = scan_ignored(&sc, "", 0);
	if (w)
		w->seen = sc.seen;
	if (w && !w->repo) {
		/* Kept for the changes applied without a walk. */
		w->repo = sc.repo;
		w->root = strdup(root);
		w->skip = strv_copy(skip);
		if (!w->root || !w->skip)
			w->broken = true;
	} else {
		git_repository_free(sc.repo);
	}
	if (r < 0) {
		strv_free_array(sc.v);
		return r;
	}
	*ret = sc.v;
	return 0;
}

/*
 * A directory git does not ignore, made or moved into a walked one (rel,
 * relative to the checkout): walked alone, as the checkout's walk would
 * (each directory watched before it is read), and its top-most ignored
 * entries added to the kept list.  A name made in it meanwhile is read
 * or queued; one read and queued too is found in the list the second
 * time.  0, or -ESTALE for a walk of the checkout: a .gitignore inside
 * (its patterns need the repository read afresh), past SESSION_SCAN_MAX
 * entries with the walks before, the list's room, a watch not placed.
 */
static int ign_dir(struct sess_ign *w, const char *rel)
{
	struct ignored_scan sc = {.repo = w->repo,
				  .root = w->root,
				  .skip = w->skip,
				  .seen = w->seen,
				  .w = w};
	unsigned depth = 1;
	int r;

	if (w->nhidden >= w->max)
		return -ESTALE;
	sc.max = w->max - w->nhidden;
	for (const char *p = rel; *p; p++)
		depth += *p == '/';
	sc.v = calloc(sc.max + 1, sizeof(char *));
	if (!sc.v)
		return -ESTALE;
	r = scan_ignored(&sc, rel, depth);
	w->seen = sc.seen;
	if (r == 0 && (sc.gitignore || w->broken))
		r = -ESTALE;
	for (size_t i = 0; r == 0 && i < sc.n; i++)
		if (hidden_find(w, sc.v[i]) < 0)
			r = hidden_add(w, steal_ptr(sc.v[i]));
	for (size_t i = 0; i < sc.n; i++)
		free(sc.v[i]);
	free(sc.v);
	return r < 0 ? -ESTALE : 0;
}

/* Whether x's kept list serves a run with room max: its queue applied,
 * nothing it cannot follow.  When not, it goes: to *stale when that is
 * not NULL (for another thread to free: closing an inotify instance of
 * thousands of watches waits for the kernel), else freed here. */
static bool ign_kept(struct sess *x, size_t max, struct sess_ign **stale)
{
	struct sess_ign *w = x->ign;

	if (w && w->max == max && ign_drain(w) == 0)
		return true;
	if (stale)
		*stale = w;
	else
		sess_ign_free(w);
	x->ign = NULL;
	return false;
}

/* A walk of the checkout for a new kept list (*pw, NULL when it cannot
 * be kept) and the run's list (*ret, on 0). */
static int ign_walk(const char *root, const char *gitdir, char *const *skip,
		    size_t max, struct sess_ign **pw, char ***ret)
{
	struct sess_ign *w = calloc(1, sizeof(*w));
	char **v = NULL;
	int r;

	if (w) {
		w->max = max;
		w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
		if (w->ifd < 0) {
			free(w);
			w = NULL;
		}
	}
	__atomic_add_fetch(&ign_walks, 1, __ATOMIC_RELAXED);
	r = find_ignored(root, gitdir, skip, max, w, &v);
	if (w && !w->broken && (r == 0 || r == -E2BIG) &&
	    (r < 0 || (w->hidden = strv_copy(v)))) {
		w->result = r;
		while (w->hidden && w->hidden[w->nhidden])
			w->nhidden++;
	} else {
		sess_ign_free(w);
		w = NULL;
	}
	*pw = w;
	if (r == 0)
		*ret = v;
	return r;
}

/* The run's hidden list: the kept one while the watch shows nothing that
 * could change it, a new walk (kept for the next runs) otherwise. */
void sess_ign_once_drop(struct sess *x)
{
	strv_free_array(x->ign_once.v);
	memset(&x->ign_once, 0, sizeof(x->ign_once));
}

int sess_ign_hidden(struct session_store *s, struct sess *x, size_t max,
		    char ***ret)
{
	struct sess_ign *w;
	int r;

	/* The walk made for this run on another thread, not kept. */
	if (x->ign_once.set && x->ign_once.max == max) {
		r = x->ign_once.r;
		*ret = steal_ptr(x->ign_once.v);
		sess_ign_once_drop(x);
		return r;
	}
	sess_ign_once_drop(x);
	if (ign_kept(x, max, NULL)) {
		if (x->ign->result < 0)
			return x->ign->result;
		*ret = strv_copy(x->ign->hidden);
		return *ret ? 0 : -ENOMEM;
	}
	if (sess_git_up(s) < 0)
		return -EIO;
	r = ign_walk(x->info.worktree, x->info.gitdir, x->empty_files, max, &w,
		     ret);
	x->ign = w;
	return r;
}

/* ---- in place: a run's walk on another thread ---- */

/* The room a run has for hidden entries next to n credential files. */
size_t sess_hidden_room(size_t n)
{
	size_t max = SBXP_PATHS_MAX - SESSION_RUN_PATHS_RESERVED;

	return n < max ? max - n : 0;
}

struct session_walk {
	struct session_store *s;
	char id[SESSION_ID_LEN + 1];
	/* Copies: the session's may change on the loop meanwhile. */
	char *root, *gitdir;
	char **skip;
	size_t max;
	struct sess_ign *stale; /* the list it replaces, freed there */
	/* Or the kept list, whose new directories (alone->dirs) are walked
	 * alone there (a walk of the checkout if one of them cannot be). */
	struct sess_ign *alone;
	/* The walk's, from session_walk_work. */
	struct sess_ign *w;
	char **v;
	int r;
};

static void walk_free(struct session_walk *wk)
{
	free(wk->root);
	free(wk->gitdir);
	strv_free_array(wk->skip);
	sess_ign_free(wk->stale);
	sess_ign_free(wk->alone);
	sess_ign_free(wk->w);
	strv_free_array(wk->v);
	free(wk);
}

int session_walk_begin(struct session_store *s, const char *id,
		       struct session_walk **ret)
{
	struct sess *x = sess_find(s, id);
	struct session_walk *wk;
	struct sess_ign *stale = NULL, *alone = NULL, *w;
	size_t n = 0;
	bool kept;

	if (!x || x->info.mode != SESSION_MODE_IN_PLACE ||
	    session_usable(s, id) < 0 || x->ign_once.set)
		return 0;
	while (x->empty_files && x->empty_files[n])
		n++;
	/* The queue read with the new directories' walks put aside. */
	if ((w = x->ign))
		w->defer = true;
	kept = ign_kept(x, sess_hidden_room(n), &stale);
	if (w)
		w->defer = false;
	if (kept && !w->dirs.n)
		return 0;
	if (kept)
		alone = steal_ptr(x->ign);
	else if (stale)
		strv_free(&stale->dirs);
	wk = sess_git_up(s) == 0 ? calloc(1, sizeof(*wk)) : NULL;
	if (!wk) {
		/* session_run_paths walks, and says why it cannot. */
		sess_ign_free(stale);
		sess_ign_free(alone);
		return 0;
	}
	wk->stale = stale;
	wk->alone = alone;
	wk->s = s;
	snprintf(wk->id, sizeof(wk->id), "%s", id);
	wk->max = sess_hidden_room(n);
	wk->root = strdup(x->info.worktree);
	wk->gitdir = x->info.gitdir ? strdup(x->info.gitdir) : NULL;
	wk->skip = x->empty_files ? strv_copy(x->empty_files)
				  : calloc(1, sizeof(char *));
	if (!wk->root || (x->info.gitdir && !wk->gitdir) || !wk->skip) {
		walk_free(wk);
		return -ENOMEM;
	}
	s->aside++;
	*ret = wk;
	return 1;
}

void session_walk_work(struct session_walk *wk)
{
	if (wk->alone) {
		struct sess_ign *w = wk->alone;
		int r = 0;

		for (size_t i = 0; r == 0 && i < w->dirs.n; i++)
			r = ign_dir(w, w->dirs.v[i]);
		strv_free(&w->dirs);
		wk->alone = NULL;
		if (r == 0) {
			wk->w = w; /* kept again by session_walk_end */
			return;
		}
		wk->stale = w; /* the checkout's walk instead */
	}
	sess_ign_free(wk->stale);
	wk->stale = NULL;
	wk->r =
	    ign_walk(wk->root, wk->gitdir, wk->skip, wk->max, &wk->w, &wk->v);
}

void session_walk_end(struct session_walk *wk, bool serve)
{
	struct session_store *s = wk->s;
	struct sess *x = sess_find(s, wk->id);
	int r = wk->w ? wk->w->result : wk->r;
	char **v = NULL;

	if (!x || s->closing || x->info.state != SESSION_ACTIVE)
		goto out;
	/* Kept for the runs after it (session_run_paths applies what its
	 * watch saw since). */
	if (wk->w && wk->w->max == wk->max) {
		sess_ign_free(x->ign);
		x->ign = steal_ptr(wk->w);
		if (!serve)
			goto out;
	}
	/* Not kept, or served all the same: the run that asked for it gets
	 * this list, as a walk on the loop when it was asked for would
	 * have given it. */
	if (r == 0 && wk->v)
		v = steal_ptr(wk->v);
	else if (r == 0 && x->ign)
		v = strv_copy(x->ign->hidden);
	sess_ign_once_drop(x);
	if (r == -E2BIG || (r == 0 && v)) {
		x->ign_once.set = true;
		x->ign_once.r = r;
		x->ign_once.max = wk->max;
		x->ign_once.v = steal_ptr(v);
	}
out:
	walk_free(wk);
	s->aside--;
	sess_store_closed_maybe(s);
}

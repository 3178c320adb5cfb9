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
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/strv.h"
#include "common/util.h"
#include "common/paths.h"
#include "daemon/policy/protected.h"
#include "proto/sandbox.h"
#include "daemon/session/session.h"
#include "daemon/session/session_priv.h"

/* Deepest directory walked for ignored entries: a deeper tree is an
 * attack on the walk's stack, and is refused like a too-large one. */
#define SESSION_SCAN_DEPTH 64

/* ---- in place: ignored credential files ---- */

struct secret_scan {
	struct session_store *s;
	git_repository *repo;
	const char *root;
	char **v;
	size_t n;
	size_t seen;
	bool said; /* the refusal's text is set */
};

/* The scan cannot tell what lies below rel (relative to the checkout):
 * refuse the start, saying where and why, rather than start with a
 * credential file there readable.  Returns err. */
static int scan_refuse(struct secret_scan *sc, const char *rel, int err,
		       const char *why)
{
	sess_seterr(sc->s,
		    "in place: cannot look for credential files in %s%s%s: "
		    "%s; make it readable to spd, or use a worktree session",
		    sc->root, rel[0] ? "/" : "", rel, why);
	sc->said = true;
	return err;
}

/*
 * The ignored credential files below rel, into sc.  It fails closed: a
 * directory it cannot open or list, an entry it cannot stat, a path too
 * long or a tree deeper than SESSION_SCAN_DEPTH refuses the start
 * (scan_refuse) instead of being skipped; a file whose git status cannot
 * be read is taken as ignored (it reads as empty), a directory whose
 * ignore check fails is searched.
 */
static int scan_secrets(struct secret_scan *sc, const char *rel, unsigned depth)
{
	char path[GUARD_PATH_MAX], child[GUARD_PATH_MAX], why[64];
	struct dirent *de;
	DIR *d;
	int fd, k, r = 0;

	if (depth > SESSION_SCAN_DEPTH) {
		snprintf(why, sizeof(why), "deeper than %d directories",
			 SESSION_SCAN_DEPTH);
		return scan_refuse(sc, rel, -E2BIG, why);
	}
	k = snprintf(path, sizeof(path), "%s%s%s", sc->root, rel[0] ? "/" : "",
		     rel);
	if (k < 0 || (size_t)k >= sizeof(path))
		return scan_refuse(sc, rel, -ENAMETOOLONG,
				   strerror(ENAMETOOLONG));
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	/* Gone, or made something else, since its parent was read. */
	if (fd < 0 && (errno == ENOENT || errno == ENOTDIR))
		return 0;
	if (fd < 0 || !(d = fdopendir(fd))) {
		r = -errno;
		if (fd >= 0)
			close(fd);
		return scan_refuse(sc, rel, r, strerror(-r));
	}
	for (;;) {
		unsigned int flags = 0;
		struct stat st;

		errno = 0;
		if (!(de = readdir(d))) {
			if (errno)
				r = scan_refuse(sc, rel, -errno,
						strerror(errno));
			break;
		}
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
		if (k < 0 || (size_t)k + strlen(sc->root) + 1 >= sizeof(path)) {
			r = scan_refuse(sc, rel, -ENAMETOOLONG,
					"a name in it makes a path longer than "
					"spd reads");
			break;
		}
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) <
		    0) {
			if (errno == ENOENT)
				continue;
			r = scan_refuse(sc, child, -errno, strerror(errno));
			break;
		}
		if (S_ISDIR(st.st_mode)) {
			int ignored = 0;

			/* A directory git ignores is hidden from runs whole
			 * (and recorded so): what it holds needs no empty
			 * file, and node_modules/ alone could pass the
			 * limits.  One git cannot judge is searched. */
			if (git_ignore_path_is_ignored(&ignored, sc->repo,
						       child) == 0 &&
			    ignored)
				continue;
			r = scan_secrets(sc, child, depth + 1);
			if (r < 0)
				break;
			continue;
		}
		if (protected_match(child) != PROTECTED_SECRET_FILE)
			continue;
		/* Tracked files stay as they are: they are the project's.
		 * One whose status git cannot give reads as empty. */
		if (git_status_file(&flags, sc->repo, child) == 0 &&
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
 * are its own), outside the directories git ignores (hidden whole).  Past
 * SESSION_SCAN_MAX entries or SESSION_EMPTY_FILES_MAX matches, or where
 * the scan cannot see (scan_secrets), the start is refused rather than
 * run with some of them readable.
 */
int sess_find_secrets(struct session_store *s, struct sess *x)
{
	struct secret_scan sc = {.s = s};
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
		if (r == -E2BIG && !sc.said)
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
};

static unsigned long ign_walks;

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

static int find_ignored(struct session_store *s, struct sess *x, size_t max,
			struct sess_ign *w, char ***ret)
{
	struct ignored_scan sc = {.root = x->info.worktree,
				  .skip = x->empty_files,
				  .max = max,
				  .w = w};
	int r;

	if (sess_git_up(s) < 0)
		return -EIO;
	if (git_repository_open_ext(&sc.repo, x->info.worktree,
				    GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0)
		return -EIO;
	if (w)
		ign_watch_sources(w, sc.repo, x->info.gitdir);
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
		w->root = strdup(x->info.worktree);
		w->skip = strv_copy(x->empty_files);
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

/* The run's hidden list: the kept one while the watch shows nothing that
 * could change it, a new walk (kept for the next runs) otherwise. */
static int ign_hidden(struct session_store *s, struct sess *x, size_t max,
		      char ***ret)
{
	struct sess_ign *w = x->ign;
	char **v = NULL;
	int r;

	if (w && w->max == max && ign_drain(w) == 0) {
		if (w->result < 0)
			return w->result;
		*ret = strv_copy(w->hidden);
		return *ret ? 0 : -ENOMEM;
	}
	sess_ign_free(w);
	x->ign = NULL;
	w = calloc(1, sizeof(*w));
	if (w) {
		w->max = max;
		w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
		if (w->ifd < 0) {
			free(w);
			w = NULL;
		}
	}
	__atomic_add_fetch(&ign_walks, 1, __ATOMIC_RELAXED);
	r = find_ignored(s, x, max, w, &v);
	if (w && !w->broken && (r == 0 || r == -E2BIG) &&
	    (r < 0 || (w->hidden = strv_copy(v)))) {
		w->result = r;
		while (w->hidden && w->hidden[w->nhidden])
			w->nhidden++;
		x->ign = w;
	} else {
		sess_ign_free(w);
	}
	if (r == 0)
		*ret = v;
	return r;
}

/* ---- in place: what was ignored at the start stays so ---- */

/*
 * Which files the operator's checkout ignores is read from .gitignore
 * files that lie in the workspace, where the agent can write: a line
 * taken out of .gitignore, or a nested .gitignore saying "!secret.log",
 * would make an ignored file readable by the next run and by fs.read.  So
 * the ignored entries found when the session starts (the top-most ones a
 * run hides, and the credential files that read as empty) are recorded in
 * the state dir, and stay hidden for the whole session whatever the
 * .gitignore files say later; entries ignored later are hidden as well.
 * At a restart of spd the record is read back rather than the checkout
 * walked again.  Format: "spd-in-place 2\n", then entries each ended by
 * a NUL: 'E' (reads as empty) or 'H' (hidden), the entry's device and
 * inode in decimal, each followed by ':', and its absolute path.
 */
#define INPLACE_MAGIC "spd-in-place 2\n"
#define INPLACE_RECORD_MAX (1024 * 1024)

char *sess_inplace_path(struct session_store *s, const char *id)
{
	char *p = NULL;

	if (asprintf(&p, "%s/conf/%s.in-place", s->state_dir, id) < 0)
		return NULL;
	return p;
}

static int record_write(const char *path, char *const *empty,
			const struct sess_id *eids, char *const *hidden,
			const struct sess_id *hids)
{
	char *tmp = NULL;
	FILE *f;
	int fd, r = 0;

	if (asprintf(&tmp, "%s.tmp", path) < 0)
		return -ENOMEM;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
		  0600);
	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		r = -errno;
		if (fd >= 0)
			close(fd);
		free(tmp);
		return r;
	}
	fputs(INPLACE_MAGIC, f);
	for (size_t i = 0; empty && empty[i]; i++)
		fprintf(f, "E%llu:%llu:%s%c", (unsigned long long)eids[i].dev,
			(unsigned long long)eids[i].ino, empty[i], '\0');
	for (size_t i = 0; hidden && hidden[i]; i++)
		fprintf(f, "H%llu:%llu:%s%c", (unsigned long long)hids[i].dev,
			(unsigned long long)hids[i].ino, hidden[i], '\0');
	if (fflush(f) != 0 || fsync(fileno(f)) < 0)
		r = -errno;
	if (fclose(f) != 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0)
		unlink(tmp);
	free(tmp);
	return r;
}

/* One entry's "DEV:INO:/path" after its kind: 0 and the parts, or
 * -EINVAL. */
static int record_entry(const char *ent, struct sess_id *id, const char **path)
{
	char *end;

	errno = 0;
	id->dev = strtoull(ent, &end, 10);
	if (errno || end == ent || *end != ':')
		return -EINVAL;
	ent = end + 1;
	id->ino = strtoull(ent, &end, 10);
	if (errno || end == ent || *end != ':' || end[1] != '/')
		return -EINVAL;
	*path = end + 1;
	return 0;
}

static int record_read(const char *path, char ***ret_empty,
		       struct sess_id **ret_eids, char ***ret_hidden,
		       struct sess_id **ret_hids)
{
	struct sess_id *eids =
			   calloc(SESSION_EMPTY_FILES_MAX + 1, sizeof(*eids)),
		       *hids = calloc(SBXP_PATHS_MAX + 1, sizeof(*hids));
	struct strv e = {0}, h = {0};
	size_t len = 0, off;
	char *buf = NULL;
	struct stat st;
	int fd, r = 0;

	if (!eids || !hids) {
		r = -ENOMEM;
		goto out;
	}
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		goto out;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_size > INPLACE_RECORD_MAX ||
	    !(buf = malloc((size_t)st.st_size + 1))) {
		r = -EINVAL;
		close(fd);
		goto out;
	}
	while (len < (size_t)st.st_size) {
		ssize_t k = read(fd, buf + len, (size_t)st.st_size - len);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		len += (size_t)k;
	}
	close(fd);
	if (len != (size_t)st.st_size || len < strlen(INPLACE_MAGIC) ||
	    memcmp(buf, INPLACE_MAGIC, strlen(INPLACE_MAGIC)) != 0 ||
	    (len > strlen(INPLACE_MAGIC) && buf[len - 1] != '\0')) {
		r = -EINVAL;
		goto out;
	}
	for (off = strlen(INPLACE_MAGIC); off < len && r == 0;) {
		const char *ent = buf + off, *p = NULL;
		size_t k = strlen(ent);
		struct sess_id id;

		if (k < 2 || record_entry(ent + 1, &id, &p) < 0)
			r = -EINVAL;
		else if (ent[0] == 'E' && e.n < SESSION_EMPTY_FILES_MAX) {
			eids[e.n] = id;
			r = strv_push(&e, p);
		} else if (ent[0] == 'H' && h.n < SBXP_PATHS_MAX) {
			hids[h.n] = id;
			r = strv_push(&h, p);
		} else
			r = -EINVAL;
		off += k + 1;
	}
out:
	free(buf);
	if (r < 0) {
		strv_free(&e);
		strv_free(&h);
		free(eids);
		free(hids);
		return r;
	}
	*ret_empty = e.v;
	*ret_hidden = h.v;
	*ret_eids = eids;
	*ret_hids = hids;
	return 0;
}

/* What each path is now (dev 0, ino 0 for one gone): a new array. */
static struct sess_id *ids_of(char *const *v)
{
	size_t n = 0;
	struct sess_id *ids;

	while (v && v[n])
		n++;
	ids = calloc(n + 1, sizeof(*ids));
	for (size_t i = 0; ids && i < n; i++) {
		struct stat st;

		if (lstat(v[i], &st) == 0) {
			ids[i].dev = (uint64_t)st.st_dev;
			ids[i].ino = (uint64_t)st.st_ino;
		}
	}
	return ids;
}

/* The room a run has for hidden entries next to n credential files. */
static size_t hidden_room(size_t n)
{
	size_t max = SBXP_PATHS_MAX - SESSION_RUN_PATHS_RESERVED;

	return n < max ? max - n : 0;
}

int sess_inplace_record(struct session_store *s, struct sess *x)
{
	size_t n = 0;
	char **v = NULL, *path;
	int r;

	while (x->empty_files && x->empty_files[n])
		n++;
	/* The walk leaves its watch for the first run (ign_hidden). */
	r = ign_hidden(s, x, hidden_room(n), &v);
	if (r == -E2BIG) {
		sess_seterr(s,
			    "in place: more than %zu top-most git-ignored "
			    "entries (or %d entries in all) would have to be "
			    "hidden from the runs; ignore whole directories, "
			    "or use a worktree session",
			    hidden_room(n), SESSION_SCAN_MAX);
		return r;
	}
	if (r < 0) {
		sess_seterr(s, "in place: cannot walk %s: %s", x->info.worktree,
			    strerror(-r));
		return r;
	}
	free(x->empty_ids);
	free(x->start_ids);
	x->empty_ids = ids_of(x->empty_files);
	x->start_ids = ids_of(v);
	path = sess_inplace_path(s, x->info.id);
	r = !path || !x->empty_ids || !x->start_ids
		? -ENOMEM
		: record_write(path, x->empty_files, x->empty_ids, v,
			       x->start_ids);
	if (r < 0)
		sess_seterr(s, "cannot write %s: %s", path ? path : "a record",
			    strerror(-r));
	free(path);
	if (r < 0) {
		strv_free_array(v);
		return r;
	}
	strv_free_array(x->ign_start);
	x->ign_start = v;
	return 0;
}

int sess_inplace_load(struct session_store *s, struct sess *x)
{
	char *path = sess_inplace_path(s, x->info.id), **e = NULL, **h = NULL;
	struct sess_id *eids = NULL, *hids = NULL;
	int r;

	if (!path)
		return -ENOMEM;
	r = record_read(path, &e, &eids, &h, &hids);
	free(path);
	if (r < 0)
		return r;
	strv_free_array(x->empty_files);
	strv_free_array(x->ign_start);
	free(x->empty_ids);
	free(x->start_ids);
	x->empty_files = e;
	x->ign_start = h;
	x->empty_ids = eids;
	x->start_ids = hids;
	return 0;
}

/* ---- in place: entries recorded at the start, followed where they go ----
 *
 * A recorded entry can be moved away from its path and out from under
 * the pattern that ignored it: a parent directory renamed (in a run the
 * entry itself is a mount point and cannot be renamed, its directory
 * can; fs.move refuses only ignored paths), "config/secrets.yml" under an
 * anchored "/config/secrets.yml" becoming "cfg/secrets.yml".  So each
 * entry is recorded with its device and inode, and before a run (and an
 * fs call) every recorded path is checked: one that no longer holds its
 * file has the checkout searched for it, and its new place is hidden as
 * well.  The old path stays hidden while something is there.  A
 * directory the search cannot read refuses the run rather than miss a
 * file moved into it.
 */
struct follow {
	const char *root;
	const struct sess_id *want;
	const bool *miss;
	char **found;
	size_t n, seen;
	/* Hidden directories still where they were recorded, relative:
	 * not searched (whatever was moved into one is hidden with it, and
	 * node_modules/ alone can pass SESSION_SCAN_MAX). */
	const char **covered;
	size_t ncovered;
};

static int follow_walk(struct follow *f, int dfd, const char *rel,
		       unsigned depth)
{
	struct dirent *de;
	DIR *d;
	int r = 0;

	if (depth > SESSION_SCAN_DEPTH) {
		close(dfd);
		return -E2BIG;
	}
	d = fdopendir(dfd);
	if (!d) {
		r = -errno;
		close(dfd);
		return r;
	}
	while ((de = readdir(d))) {
		char child[GUARD_PATH_MAX];
		struct stat st;
		int k, fd;

		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0 ||
		    (depth == 0 && strcmp(de->d_name, ".git") == 0))
			continue;
		if (++f->seen > SESSION_SCAN_MAX) {
			r = -E2BIG;
			break;
		}
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue; /* gone meanwhile */
		k = snprintf(child, sizeof(child), "%s%s%s", rel,
			     rel[0] ? "/" : "", de->d_name);
		if (k < 0 || (size_t)k >= sizeof(child)) {
			r = -ENAMETOOLONG;
			break;
		}
		for (size_t i = 0; i < f->n && r == 0; i++)
			if (f->miss[i] && !f->found[i] && f->want[i].ino &&
			    f->want[i].dev == (uint64_t)st.st_dev &&
			    f->want[i].ino == (uint64_t)st.st_ino &&
			    !(f->found[i] = paths_join(f->root, child)))
				r = -ENOMEM;
		if (r < 0 || !S_ISDIR(st.st_mode))
			continue;
		for (k = 0; (size_t)k < f->ncovered; k++)
			if (strcmp(f->covered[k], child) == 0)
				break;
		if ((size_t)k < f->ncovered)
			continue;
		fd = openat(dirfd(d), de->d_name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			if (errno == ENOENT)
				continue;
			r = -errno;
			break;
		}
		r = follow_walk(f, fd, child, depth + 1);
		if (r < 0)
			break;
	}
	closedir(d);
	return r;
}

/* Appends path with id to v and ids (room for it), at most max. */
static int follow_push(struct strv *v, struct sess_id *ids, size_t max,
		       const char *path, struct sess_id id)
{
	for (size_t i = 0; i < v->n; i++)
		if (strcmp(v->v[i], path) == 0)
			return 0;
	if (v->n >= max)
		return -E2BIG;
	ids[v->n] = id;
	return strv_push(v, path);
}

int sess_inplace_follow(struct session_store *s, struct sess *x)
{
	size_t ne = 0, nh = 0, n, nmiss = 0;
	struct sess_id *want = NULL, *eids = NULL, *hids = NULL;
	struct strv ev = {0}, hv = {0};
	char *rec;
	bool *miss = NULL;
	struct follow f = {0};
	int r = 0, fd;

	if (x->info.mode != SESSION_MODE_IN_PLACE || !x->empty_ids ||
	    !x->start_ids)
		return 0;
	while (x->empty_files && x->empty_files[ne])
		ne++;
	while (x->ign_start && x->ign_start[nh])
		nh++;
	n = ne + nh;
	if (!n)
		return 0;
	want = calloc(n, sizeof(*want));
	miss = calloc(n, sizeof(*miss));
	f.found = calloc(n, sizeof(*f.found));
	/* An entry keeps at most two paths: where it went, where it was. */
	eids = calloc(2 * ne + 1, sizeof(*eids));
	hids = calloc(2 * nh + 1, sizeof(*hids));
	if (!want || !miss || !f.found || !eids || !hids) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const char *p =
		    i < ne ? x->empty_files[i] : x->ign_start[i - ne];
		struct stat st;

		want[i] = i < ne ? x->empty_ids[i] : x->start_ids[i - ne];
		if (lstat(p, &st) == 0 && (uint64_t)st.st_dev == want[i].dev &&
		    (uint64_t)st.st_ino == want[i].ino)
			continue;
		miss[i] = true;
		nmiss++;
	}
	if (!nmiss)
		goto out;
	f.root = x->info.worktree;
	f.want = want;
	f.miss = miss;
	f.n = n;
	f.covered = calloc(nh + 1, sizeof(*f.covered));
	if (!f.covered) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = ne; i < n; i++) {
		size_t rl = strlen(f.root);
		const char *p = x->ign_start[i - ne];

		if (!miss[i] && strncmp(p, f.root, rl) == 0 && p[rl] == '/')
			f.covered[f.ncovered++] = p + rl + 1;
	}
	fd = open(f.root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	r = fd < 0 ? -errno : follow_walk(&f, fd, "", 0);
	if (r < 0)
		goto out;
	for (size_t i = 0; i < n && r == 0; i++) {
		const char *p =
		    i < ne ? x->empty_files[i] : x->ign_start[i - ne];
		struct strv *v = i < ne ? &ev : &hv;
		struct sess_id *ids = i < ne ? eids : hids;
		size_t max = i < ne ? SESSION_EMPTY_FILES_MAX : SBXP_PATHS_MAX;
		struct stat st;

		if (!miss[i]) {
			r = follow_push(v, ids, max, p, want[i]);
			continue;
		}
		if (f.found[i]) {
			r = follow_push(v, ids, max, f.found[i], want[i]);
			sess_journal(s, x->info.id, "session.ignored-moved",
				     json_pack("{s:s, s:s}", "from", p, "to",
					       f.found[i]),
				     "%s, ignored when the session started, "
				     "moved to %s: hidden there too",
				     p, f.found[i]);
		}
		/* Replaced where it was (an editor's save, a new build
		 * directory): that path stays hidden. */
		if (r == 0 && lstat(p, &st) == 0)
			r = follow_push(v, ids, max, p,
					(struct sess_id){(uint64_t)st.st_dev,
							 (uint64_t)st.st_ino});
	}
	if (r < 0)
		goto out;
	strv_free_array(x->empty_files);
	strv_free_array(x->ign_start);
	free(x->empty_ids);
	free(x->start_ids);
	x->empty_files = ev.v;
	x->ign_start = hv.v;
	x->empty_ids = eids;
	x->start_ids = hids;
	ev = hv = (struct strv){0};
	eids = hids = NULL;
	/* The kept walk skipped the old credential files. */
	sess_ign_free(x->ign);
	x->ign = NULL;
	rec = sess_inplace_path(s, x->info.id);
	r = rec ? record_write(rec, x->empty_files, x->empty_ids, x->ign_start,
			       x->start_ids)
		: -ENOMEM;
	free(rec);
out:
	for (size_t i = 0; f.found && i < n; i++)
		free(f.found[i]);
	free(f.found);
	free(f.covered);
	free(want);
	free(miss);
	strv_free(&ev);
	strv_free(&hv);
	free(eids);
	free(hids);
	return r;
}

/* now and then together, without an entry that another covers.  Every
 * entry of then exists (sess_inplace_follow drops the ones gone, which
 * sandboxd would otherwise make, in a writable tree, on the host). */
static int hidden_union(char *const *now, char *const *then, size_t max,
			char ***ret)
{
	struct strv all = {0}, v = {0};
	int r = 0;

	for (size_t i = 0; now && now[i] && r == 0; i++)
		r = strv_push(&all, now[i]);
	for (size_t i = 0; then && then[i] && r == 0; i++)
		r = strv_push(&all, then[i]);
	for (size_t i = 0; i < all.n && r == 0; i++) {
		bool covered = false;

		for (size_t j = 0; j < all.n && !covered; j++)
			covered = strcmp(all.v[i], all.v[j]) == 0
				      ? j < i
				      : paths_under(all.v[i], all.v[j]);
		if (covered)
			continue;
		r = v.n >= max ? -E2BIG : strv_push(&v, all.v[i]);
	}
	strv_free(&all);
	if (r == 0 && !v.v && !(v.v = calloc(1, sizeof(char *))))
		r = -ENOMEM;
	if (r < 0) {
		strv_free(&v);
		return r;
	}
	*ret = v.v;
	return 0;
}

char **session_hidden_at_start(struct session_store *s, const char *id)
{
	struct sess *x = sess_find(s, id);

	if (!x || x->info.mode != SESSION_MODE_IN_PLACE ||
	    sess_inplace_follow(s, x) < 0)
		return NULL;
	return strv_copy(x->ign_start ? x->ign_start : (char *[]){NULL});
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

/* Takes out of files those under a hidden directory: covered already,
 * and the empty file's mount would have nowhere to go inside the
 * directory's cover (a .env in node_modules/ refused every run). */
static void covered_drop(char **files, char *const *hidden)
{
	size_t k = 0;

	for (size_t i = 0; files && files[i]; i++) {
		bool covered = false;

		for (size_t j = 0; hidden && hidden[j] && !covered; j++)
			covered = strcmp(files[i], hidden[j]) != 0 &&
				  paths_under(files[i], hidden[j]);
		if (covered)
			free(files[i]);
		else
			files[k++] = files[i];
	}
	if (files)
		files[k] = NULL;
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
	/* Recorded entries moved since are hidden where they went. */
	if (p.in_place && (r = sess_inplace_follow(s, x)) < 0)
		return r;
	if (!p.in_place && sess_git_up(s) == 0 &&
	    (r = sess_agent_git_ensure(s, x)) < 0)
		return r;
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
		size_t max = hidden_room(n);
		char **now = NULL;

		if (ret_hidden_max)
			*ret_hidden_max = max;
		r = ign_hidden(s, x, max, &now);
		/* And whatever was ignored when the session started. */
		if (r == 0)
			r = hidden_union(now, x->ign_start, max, &p.hidden);
		strv_free_array(now);
		if (r < 0) {
			session_run_paths_free(&p);
			return r;
		}
		covered_drop(p.empty_files, p.hidden);
	}
	*ret = p;
	return 0;
oom:
	session_run_paths_free(&p);
	return -ENOMEM;
}

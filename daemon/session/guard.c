/*
 * The git guard: snapshot and re-scan of a session's guarded inputs.
 * See guard.h for what is guarded and why.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/strv.h"
#include "common/util.h"
#include "daemon/session/guard.h"
#include "daemon/policy/protected.h"

/*
 * A file whose timestamps lie within this window of the moment its content
 * was read cannot be trusted by its stat key alone: Linux stamps files from
 * a coarse clock (one jiffy, up to 10 ms) and some filesystems keep whole
 * seconds (ext3) or two (FAT), so a second write in the same tick with the
 * same size leaves every stat field equal.  Such entries are re-hashed on
 * every scan until they are older than this.
 */
#define GUARD_RACY_NS (2LL * 1000000000LL)
/* Read size when hashing a file. */
#define GUARD_READ_CHUNK (64 * 1024)
/*
 * Largest packed-refs file read.  Its records are kept in memory to name
 * the ref that moved; 64 MiB is about a million refs.
 */
#define GUARD_PACKED_MAX (64 * 1024 * 1024)
/*
 * What a watch reports.  IN_CLOSE_WRITE matters beyond IN_MODIFY: stores
 * through a shared mapping raise no IN_MODIFY, but dropping the last
 * reference to that open file (munmap and close, or exit) raises
 * IN_CLOSE_WRITE.  IN_DELETE_SELF/IN_MOVE_SELF see a watched directory
 * itself go; IN_Q_OVERFLOW and IN_IGNORED are always reported.
 */
#define GUARD_WATCH_MASK                                                       \
	(IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_CREATE | IN_DELETE |      \
	 IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF)
/*
 * Most inotify instances all guards of this process hold at once.  The
 * kernel's default fs.inotify.max_user_instances is 128 for every process
 * of the user together; half is left to others (and to spd's own file
 * watching).  Guards past this scan with lstat() on every check, as
 * before, which is correct and only slower.
 */
#define GUARD_INOTIFY_MAX 64
/*
 * Most watches one guard adds (one per guarded file and directory).  The
 * kernel's fs.inotify.max_user_watches (8192 on small machines) is shared
 * by the user's processes; a guard over more entries than this scans with
 * lstat() instead of taking the watches from everyone else.
 */
#define GUARD_WATCHES_MAX 8192
/* Bytes read from the inotify fd at a time (about 150 events). */
#define GUARD_EVENT_BUF 4096

enum etype {
	E_ABSENT,
	E_FILE,
	E_LINK,
	E_OTHER,
	E_PACKED,
};

struct entry {
	char *key;  /* the name a finding uses; entries are sorted by it */
	char *path; /* where it is on disk */
	uint8_t set;
	uint8_t type;
	bool hashed;
	dev_t dev;
	ino_t ino;
	mode_t mode;
	off_t size;
	int64_t mtime_ns;
	int64_t ctime_ns;
	int64_t seen_ns; /* when the content hash was taken */
	uint8_t hash[crypto_generichash_BYTES];
};

struct elist {
	struct entry *v;
	size_t n, cap;
};

/* packed-refs records ("refname oid[ ^peeled]") of branches and tags. */
struct precs {
	char **v;
	size_t n;
};

/*
 * A watched directory whose events need a filter: name NULL means every
 * entry in it is guarded (except the session's own ref); otherwise only
 * the entry called name is (the git dir holds the index, logs and
 * objects next to config and refs; the checkout holds the agent's files
 * next to .spd.conf).  A watch without a record (a guarded file's) makes
 * each of its events relevant.
 */
struct wrec {
	int wd;
	char *key; /* the directory's key (".git/refs/heads") */
	char *name;
};

struct guard {
	char *gitdir;
	char *workdir;
	char *own_key;	    /* ".git/refs/heads/spd/x" */
	char *own_lock_key; /* ".git/refs/heads/spd/x.lock" */
	char *own_ref;
	char **protected_paths;
	struct elist e;
	struct precs packed;
	int ifd;       /* inotify instance, -1: lstat() scans only */
	bool watching; /* this scan (re)adds watches */
	bool dirty;    /* the last check was not clean */
	size_t nwatch; /* watches added by this scan */
	size_t slice;  /* which slice the next quiet check stats */
	size_t full_scans;
	struct wrec *w;
	size_t nw, capw;
};

/* inotify instances held by all guards (GUARD_INOTIFY_MAX). */
static int guard_instances;

/*
 * What a scan does with each entry it finds: collect it (the snapshot and
 * the slow path), or compare it in place with the snapshot (the fast
 * path: no allocation while nothing changed).  fn returns 0 to go on, 1
 * to stop because the entry differs, or -errno.
 */
struct visitor {
	int (*fn)(struct visitor *v, uint8_t set, uint8_t type, const char *key,
		  const char *path, const struct stat *st);
	struct guard *g;
	struct elist *l;
	size_t matched;
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void precs_free(struct precs *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->v[i]);
	free(p->v);
	p->v = NULL;
	p->n = 0;
}

static void elist_free(struct elist *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].key);
		free(l->v[i].path);
	}
	free(l->v);
	l->v = NULL;
	l->n = l->cap = 0;
}

static int elist_push(struct elist *l, uint8_t set, uint8_t type,
		      const char *key, const char *path, const struct stat *st)
{
	struct entry *e;

	if (l->n >= GUARD_ENTRIES_MAX)
		return -E2BIG;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		struct entry *v = realloc(l->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	e = &l->v[l->n];
	memset(e, 0, sizeof(*e));
	e->key = strdup(key);
	e->path = strdup(path);
	if (!e->key || !e->path) {
		free(e->key);
		free(e->path);
		return -ENOMEM;
	}
	e->set = set;
	e->type = type;
	if (st) {
		e->dev = st->st_dev;
		e->ino = st->st_ino;
		e->mode = st->st_mode;
		e->size = st->st_size;
		e->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000LL +
			      st->st_mtim.tv_nsec;
		e->ctime_ns = (int64_t)st->st_ctim.tv_sec * 1000000000LL +
			      st->st_ctim.tv_nsec;
	}
	l->n++;
	return 0;
}

static uint8_t type_of(const struct stat *st)
{
	if (S_ISREG(st->st_mode))
		return E_FILE;
	if (S_ISLNK(st->st_mode))
		return E_LINK;
	return E_OTHER;
}

static int join(char *buf, const char *a, const char *b)
{
	int n = snprintf(buf, GUARD_PATH_MAX, "%s/%s", a, b);

	if (n < 0 || n >= GUARD_PATH_MAX)
		return -ENAMETOOLONG;
	return 0;
}

/*
 * .git/info/refs, and the temporary file git writes it through
 * (refs_XXXXXX): git update-server-info's list of refs for a dumb HTTP
 * server, which no git command reads for its own work.  git writes it
 * itself on an agent's ordinary commit (gc --auto repacks, and a repack
 * updates it), so guarding it ended attempts for nothing.
 */
static bool server_info_key(const char *key)
{
	static const char refs[] = ".git/info/refs";
	size_t n = sizeof(refs) - 1;

	if (strncmp(key, refs, n) != 0)
		return false;
	return key[n] == '\0' || (key[n] == '_' && strlen(key + n + 1) == 6 &&
				  !strchr(key + n + 1, '/'));
}

static bool skip_key(const struct guard *g, const char *key)
{
	return server_info_key(key) ||
	       (g->own_key && (strcmp(key, g->own_key) == 0 ||
			       strcmp(key, g->own_lock_key) == 0));
}

static void wrecs_free(struct guard *g)
{
	for (size_t i = 0; i < g->nw; i++) {
		free(g->w[i].key);
		free(g->w[i].name);
	}
	free(g->w);
	g->w = NULL;
	g->nw = g->capw = 0;
}

/*
 * Give up on inotify for this guard: every later check scans with
 * lstat().  Called when a watch cannot be added, the watch limit is
 * reached or the fd fails; correctness never depends on the watches.
 */
static void unwatch(struct guard *g)
{
	if (g->ifd >= 0) {
		close(g->ifd);
		g->ifd = -1;
		__atomic_sub_fetch(&guard_instances, 1, __ATOMIC_RELAXED);
	}
	g->watching = false;
	wrecs_free(g);
}

static int wrec_add(struct guard *g, int wd, const char *key, const char *name)
{
	struct wrec *r;

	for (size_t i = 0; i < g->nw; i++)
		if (g->w[i].wd == wd && strcmp(g->w[i].key, key) == 0 &&
		    (name ? g->w[i].name && strcmp(g->w[i].name, name) == 0
			  : !g->w[i].name))
			return 0;
	if (g->nw == g->capw) {
		size_t cap = g->capw ? g->capw * 2 : 16;
		struct wrec *v = realloc(g->w, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		g->w = v;
		g->capw = cap;
	}
	r = &g->w[g->nw];
	r->wd = wd;
	r->key = strdup(key);
	r->name = name ? strdup(name) : NULL;
	if (!r->key || (name && !r->name)) {
		free(r->key);
		free(r->name);
		return -ENOMEM;
	}
	g->nw++;
	return 0;
}

/*
 * Watch path (before it is read, so that any later write raises an
 * event).  dir: a directory whose entries are guarded (name NULL: all of
 * them; else only name); a directory that is not there any more is
 * ignored (the event in its parent reports that).  !dir: a guarded file,
 * watched by inode so that a write through another hard link is seen too.
 * A failure other than the path having gone turns inotify off.
 */
static void watch_add(struct guard *g, const char *path, const char *key,
		      const char *name, bool dir)
{
	int wd;

	if (!g->watching)
		return;
	if (++g->nwatch > GUARD_WATCHES_MAX) {
		unwatch(g);
		return;
	}
	wd = inotify_add_watch(g->ifd, path,
			       GUARD_WATCH_MASK | IN_DONT_FOLLOW |
				   (dir ? IN_ONLYDIR : 0));
	if (wd < 0) {
		if (errno != ENOENT && errno != ENOTDIR)
			unwatch(g);
		return;
	}
	if (dir && wrec_add(g, wd, key, name) < 0)
		unwatch(g);
}

/* Whether ev can mean a change of the guarded inputs. */
static bool relevant(const struct guard *g, const struct inotify_event *ev)
{
	char key[GUARD_PATH_MAX];
	bool known = false;

	if (ev->mask & (IN_Q_OVERFLOW | IN_IGNORED))
		return true;
	for (size_t i = 0; i < g->nw; i++) {
		const struct wrec *r = &g->w[i];

		if (r->wd != ev->wd)
			continue;
		known = true;
		if (ev->len == 0 || ev->name[0] == '\0')
			return true; /* the directory itself */
		if (r->name) {
			if (strcmp(r->name, ev->name) == 0)
				return true;
			continue;
		}
		if (join(key, r->key, ev->name) < 0 || !skip_key(g, key))
			return true;
	}
	return !known;
}

static void wrecs_drop(struct guard *g, int wd)
{
	size_t k = 0;

	for (size_t i = 0; i < g->nw; i++) {
		if (g->w[i].wd == wd) {
			free(g->w[i].key);
			free(g->w[i].name);
		} else {
			g->w[k++] = g->w[i];
		}
	}
	g->nw = k;
}

/*
 * Read every queued event without blocking.  Returns 1 when one of them
 * may be a change of the guarded inputs (or the queue overflowed), 0 when
 * none is, -errno when the fd failed.
 */
static int drain(struct guard *g)
{
	char buf[GUARD_EVENT_BUF]
	    __attribute__((aligned(__alignof__(struct inotify_event))));
	int rel = 0;

	for (;;) {
		ssize_t k = read(g->ifd, buf, sizeof(buf));

		if (k < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return rel;
			return -errno;
		}
		if (k == 0)
			return rel;
		for (ssize_t off = 0; off < k;) {
			const struct inotify_event *ev =
			    (const struct inotify_event *)(buf + off);

			if (relevant(g, ev))
				rel = 1;
			if (ev->mask & IN_IGNORED)
				wrecs_drop(g, ev->wd);
			off += (ssize_t)(sizeof(*ev) + ev->len);
		}
	}
}

/*
 * Record everything under the directory at path (keys under key),
 * without following symlinks.  Directories themselves are not entries:
 * what they contain is, and an empty directory guards nothing.
 */
static int walk_dir(struct guard *g, struct visitor *l, uint8_t set,
		    const char *key, const char *path, unsigned depth)
{
	char ckey[GUARD_PATH_MAX], cpath[GUARD_PATH_MAX];
	struct dirent *de;
	DIR *d;
	int r = 0;

	/* Refs and CI trees are shallow; a deep tree is an attack on the
	 * scan time and the stack. */
	if (depth > 64)
		return -ELOOP;
	watch_add(g, path, key, NULL, true);
	d = opendir(path);
	if (!d)
		return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
	while ((de = readdir(d))) {
		struct stat st;

		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		r = join(ckey, key, de->d_name);
		if (r < 0)
			break;
		r = join(cpath, path, de->d_name);
		if (r < 0)
			break;
		if (skip_key(g, ckey))
			continue;
		if (de->d_type != DT_DIR)
			watch_add(g, cpath, ckey, NULL, false);
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) <
		    0) {
			if (errno == ENOENT)
				continue; /* gone meanwhile: seen next scan */
			r = -errno;
			break;
		}
		if (S_ISDIR(st.st_mode))
			r = walk_dir(g, l, set, ckey, cpath, depth + 1);
		else
			r = l->fn(l, set, type_of(&st), ckey, cpath, &st);
		if (r != 0)
			break;
	}
	closedir(d);
	return r;
}

/* A guarded root: a file, a directory tree, or absent. */
static int add_root(struct guard *g, struct visitor *l, uint8_t set,
		    const char *key, const char *path)
{
	struct stat st;

	watch_add(g, path, key, NULL, false);
	if (lstat(path, &st) < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			return l->fn(l, set, E_ABSENT, key, path, NULL);
		return -errno;
	}
	if (S_ISDIR(st.st_mode))
		return walk_dir(g, l, set, key, path, 0);
	return l->fn(l, set, type_of(&st), key, path, &st);
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->key,
		      ((const struct entry *)b)->key);
}

/*
 * Watch each directory on the way from the checkout to the protected
 * path rel ("a/b/c": the checkout for "a", a/ for "b", a/b/ for "c"), so
 * that creating, removing or renaming any of them is an event while the
 * agent's own files next to them are not.
 */
static int watch_parents(struct guard *g, const char *rel)
{
	char path[GUARD_PATH_MAX], key[GUARD_PATH_MAX], name[GUARD_PATH_MAX];
	const char *p = rel;
	size_t klen = 0;

	if (!g->watching)
		return 0;
	key[0] = '\0';
	for (;;) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);
		int r;

		if (n >= sizeof(name))
			return -ENAMETOOLONG;
		memcpy(name, p, n);
		name[n] = '\0';
		r = snprintf(path, sizeof(path), "%s%s%.*s", g->workdir,
			     klen ? "/" : "", (int)klen, key);
		if (r < 0 || r >= (int)sizeof(path))
			return -ENAMETOOLONG;
		if (n > 0)
			watch_add(g, path, key, name, true);
		if (!slash)
			return 0;
		klen = (size_t)(slash - rel);
		if (klen >= sizeof(key))
			return -ENAMETOOLONG;
		memcpy(key, rel, klen);
		key[klen] = '\0';
		p = slash + 1;
	}
}

static int scan(struct guard *g, struct visitor *l)
{
	static const char *const git_roots[] = {
	    "config", "HEAD", "hooks", "info", "refs/heads", "refs/tags",
	};
	/* Entries of the git dir and of refs/ that hold guarded inputs. */
	static const char *const git_names[] = {
	    "config", "HEAD", "hooks", "info", "refs", "packed-refs",
	};
	char key[GUARD_PATH_MAX], path[GUARD_PATH_MAX];
	struct stat st;
	int r;

	g->nwatch = 0;
	if (g->watching) {
		for (size_t i = 0; i < ARRAY_SIZE(git_names); i++)
			watch_add(g, g->gitdir, ".git", git_names[i], true);
		r = join(path, g->gitdir, "refs");
		if (r < 0)
			return r;
		watch_add(g, path, ".git/refs", "heads", true);
		watch_add(g, path, ".git/refs", "tags", true);
	}
	for (size_t i = 0; i < ARRAY_SIZE(git_roots); i++) {
		r = join(key, ".git", git_roots[i]);
		if (r == 0)
			r = join(path, g->gitdir, git_roots[i]);
		if (r == 0)
			r = add_root(g, l, GUARD_SET_GIT, key, path);
		if (r != 0)
			return r;
	}
	r = join(path, g->gitdir, "packed-refs");
	if (r < 0)
		return r;
	watch_add(g, path, ".git/packed-refs", NULL, false);
	if (lstat(path, &st) == 0)
		r = l->fn(l, GUARD_SET_GIT, E_PACKED, ".git/packed-refs", path,
			  &st);
	else if (errno == ENOENT)
		r = l->fn(l, GUARD_SET_GIT, E_ABSENT, ".git/packed-refs", path,
			  NULL);
	else
		r = -errno;
	if (r != 0)
		return r;
	for (size_t i = 0; g->workdir && g->protected_paths[i]; i++) {
		r = watch_parents(g, g->protected_paths[i]);
		if (r == 0)
			r = join(path, g->workdir, g->protected_paths[i]);
		if (r == 0)
			r = add_root(g, l, GUARD_SET_PROTECTED,
				     g->protected_paths[i], path);
		if (r != 0)
			return r;
	}
	return 0;
}

static int collect(struct visitor *v, uint8_t set, uint8_t type,
		   const char *key, const char *path, const struct stat *st)
{
	return elist_push(v->l, set, type, key, path, st);
}

/* Scan into l, sorted by key. */
static int scan_list(struct guard *g, struct elist *l)
{
	struct visitor v = {.fn = collect, .g = g, .l = l};
	int r = scan(g, &v);

	if (r < 0)
		return r;
	qsort(l->v, l->n, sizeof(l->v[0]), cmp_entry);
	return 0;
}

static bool same_stat_st(const struct entry *a, const struct stat *st);
static bool racy(const struct entry *e);

/*
 * The fast path: every entry found must be in the snapshot with the same
 * type and stat key, and not racy; then nothing changed and the scan
 * allocated nothing.  Anything else (1) sends the caller down the slow
 * path, which names the change.
 */
static int compare(struct visitor *v, uint8_t set, uint8_t type,
		   const char *key, const char *path, const struct stat *st)
{
	const struct elist *l = &v->g->e;
	size_t lo = 0, hi = l->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(l->v[mid].key, key);

		if (c == 0) {
			const struct entry *e = &l->v[mid];

			if (e->type != type)
				return 1;
			if (type != E_ABSENT &&
			    (!same_stat_st(e, st) || racy(e)))
				return 1;
			v->matched++;
			return 0;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 1;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Parse packed-refs text into the records of branches and tags other
 * than the session's own, each "refname oid" plus " ^peeled" when the
 * next line peels it.  Remote-tracking refs are not guarded: they are
 * neither branches nor tags, and a fetch by the operator moves them.
 */
static int packed_parse(const struct guard *g, char *text, struct precs *ret)
{
	struct precs p = {0};
	size_t cap = 0;
	char *save = NULL;
	int r = 0;

	for (char *line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *name, *rec;

		if (line[0] == '^' && p.n > 0 && p.v[p.n - 1]) {
			if (asprintf(&rec, "%s %s", p.v[p.n - 1], line) < 0) {
				r = -ENOMEM;
				goto out;
			}
			free(p.v[p.n - 1]);
			p.v[p.n - 1] = rec;
			continue;
		}
		if (line[0] == '#' || line[0] == '^')
			continue;
		name = strchr(line, ' ');
		if (!name)
			continue;
		*name++ = '\0';
		/* A record that is not guarded still takes a slot (NULL) so
		 * that its peeled line is not attached to the one before. */
		rec = NULL;
		if ((strncmp(name, "refs/heads/", 11) == 0 ||
		     strncmp(name, "refs/tags/", 10) == 0) &&
		    !(g->own_ref && strcmp(name, g->own_ref) == 0)) {
			if (asprintf(&rec, "%s %s", name, line) < 0) {
				r = -ENOMEM;
				goto out;
			}
		}
		if (p.n == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			char **v = realloc(p.v, ncap * sizeof(*v));
			if (!v) {
				free(rec);
				r = -ENOMEM;
				goto out;
			}
			p.v = v;
			cap = ncap;
		}
		p.v[p.n++] = rec;
	}
	/* Drop the unguarded slots, then sort for a merge by name. */
	size_t k = 0;
	for (size_t i = 0; i < p.n; i++)
		if (p.v[i])
			p.v[k++] = p.v[i];
	p.n = k;
	qsort(p.v, p.n, sizeof(p.v[0]), cmp_str);
	*ret = p;
	p.v = NULL;
	p.n = 0;
out:
	precs_free(&p);
	return r;
}

static int read_small(const char *path, size_t max, char **ret, size_t *ret_n)
{
	_cleanup_close_ int fd = -1;
	char *buf = NULL;
	size_t n = 0, cap = 0;

	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t k;

		if (n + GUARD_READ_CHUNK + 1 > cap) {
			size_t ncap = cap ? cap * 2 : GUARD_READ_CHUNK + 1;
			char *nb;

			if (ncap > max + 1)
				ncap = max + 1;
			if (n + 1 >= ncap) {
				free(buf);
				return -E2BIG;
			}
			nb = realloc(buf, ncap);
			if (!nb) {
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
			cap = ncap;
		}
		k = read(fd, buf + n, cap - n - 1);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			free(buf);
			return -errno;
		}
		if (k == 0)
			break;
		n += (size_t)k;
	}
	buf[n] = '\0';
	*ret = buf;
	*ret_n = n;
	return 0;
}

/*
 * An absent entry's hash: one value, however the entry came to be absent
 * (found so by a scan, or gone between the scan and the hash), so that
 * guard_digest stays the same across scans while nothing changes.
 */
static void hash_absent(struct entry *e)
{
	crypto_generichash_state st;
	uint8_t tag = E_ABSENT;
	uint32_t mode = 0;

	e->type = E_ABSENT;
	e->mode = 0;
	crypto_generichash_init(&st, NULL, 0, sizeof(e->hash));
	crypto_generichash_update(&st, &tag, 1);
	crypto_generichash_update(&st, (const uint8_t *)&mode, sizeof(mode));
	crypto_generichash_final(&st, e->hash, sizeof(e->hash));
	e->hashed = true;
}

/*
 * Fill e->hash from the content on disk (and, for packed-refs, its
 * records into *ret_packed).  An entry that vanished since the scan
 * becomes E_ABSENT.
 */
static int hash_entry(const struct guard *g, struct entry *e,
		      struct precs *ret_packed)
{
	crypto_generichash_state st;
	uint8_t tag = e->type;
	int r = 0;

	if (e->type == E_ABSENT) {
		hash_absent(e);
		return 0;
	}
	crypto_generichash_init(&st, NULL, 0, sizeof(e->hash));
	if (e->type == E_FILE) {
		_cleanup_close_ int fd = -1;
		uint8_t buf[GUARD_READ_CHUNK];
		ssize_t k;

		/* O_NONBLOCK: a FIFO swapped in after the lstat must not
		 * hang spd. */
		fd = open(e->path,
			  O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
		if (fd < 0)
			goto gone;
		crypto_generichash_update(&st, &tag, 1);
		while ((k = read(fd, buf, sizeof(buf))) != 0) {
			if (k < 0) {
				if (errno == EINTR)
					continue;
				return -errno;
			}
			crypto_generichash_update(&st, buf, (size_t)k);
		}
	} else if (e->type == E_LINK) {
		char buf[GUARD_PATH_MAX];
		ssize_t k = readlink(e->path, buf, sizeof(buf));

		if (k < 0)
			goto gone;
		crypto_generichash_update(&st, &tag, 1);
		crypto_generichash_update(&st, (const uint8_t *)buf, (size_t)k);
	} else if (e->type == E_PACKED) {
		char *text = NULL;
		size_t n;

		r = read_small(e->path, GUARD_PACKED_MAX, &text, &n);
		if (r == -ENOENT || r == -ELOOP) {
			errno = -r;
			goto gone;
		}
		if (r < 0)
			return r;
		r = packed_parse(g, text, ret_packed);
		free(text);
		if (r < 0)
			return r;
		crypto_generichash_update(&st, &tag, 1);
		for (size_t i = 0; i < ret_packed->n; i++)
			crypto_generichash_update(
			    &st, (const uint8_t *)ret_packed->v[i],
			    strlen(ret_packed->v[i]) + 1);
	} else {
		uint32_t mode = (uint32_t)e->mode;

		crypto_generichash_update(&st, &tag, 1);
		crypto_generichash_update(&st, (const uint8_t *)&mode,
					  sizeof(mode));
	}
	crypto_generichash_final(&st, e->hash, sizeof(e->hash));
	e->hashed = true;
	return 0;
gone:
	if (errno != ENOENT && errno != ELOOP && errno != ENOTDIR)
		return -errno;
	hash_absent(e);
	return 0;
}

static bool same_stat(const struct entry *a, const struct entry *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->mode == b->mode &&
	       a->size == b->size && a->mtime_ns == b->mtime_ns &&
	       a->ctime_ns == b->ctime_ns;
}

static bool same_stat_st(const struct entry *a, const struct stat *st)
{
	return a->dev == st->st_dev && a->ino == st->st_ino &&
	       a->mode == st->st_mode && a->size == st->st_size &&
	       a->mtime_ns == (int64_t)st->st_mtim.tv_sec * 1000000000LL +
				  st->st_mtim.tv_nsec &&
	       a->ctime_ns == (int64_t)st->st_ctim.tv_sec * 1000000000LL +
				  st->st_ctim.tv_nsec;
}

static bool racy(const struct entry *e)
{
	return e->mtime_ns + GUARD_RACY_NS >= e->seen_ns ||
	       e->ctime_ns + GUARD_RACY_NS >= e->seen_ns;
}

void guard_free(struct guard *g)
{
	if (!g)
		return;
	unwatch(g);
	elist_free(&g->e);
	precs_free(&g->packed);
	strv_free_array(g->protected_paths);
	free(g->gitdir);
	free(g->workdir);
	free(g->own_key);
	free(g->own_lock_key);
	free(g->own_ref);
	free(g);
}

int guard_new(const struct guard_config *cfg, struct guard **ret)
{
	const char *const *prot;
	struct guard *g;
	struct stat st;
	size_t n = 0;
	int64_t t;
	int r;

	if (!cfg || !cfg->gitdir)
		return -EINVAL;
	if (stat(cfg->gitdir, &st) < 0 || !S_ISDIR(st.st_mode))
		return -ENOENT;
	if (sodium_init() < 0)
		return -EIO;
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->ifd = -1;
	r = -ENOMEM;
	g->gitdir = strdup(cfg->gitdir);
	if (!g->gitdir)
		goto fail;
	if (cfg->workdir && !(g->workdir = strdup(cfg->workdir)))
		goto fail;
	if (cfg->own_ref) {
		if (!(g->own_ref = strdup(cfg->own_ref)) ||
		    asprintf(&g->own_key, ".git/%s", cfg->own_ref) < 0 ||
		    asprintf(&g->own_lock_key, ".git/%s.lock", cfg->own_ref) <
			0)
			goto fail;
	}
	if (cfg->protected_paths) {
		prot = cfg->protected_paths;
		while (prot[n])
			n++;
		g->protected_paths = calloc(n + 1, sizeof(char *));
		if (!g->protected_paths)
			goto fail;
		for (size_t i = 0; i < n; i++)
			if (!(g->protected_paths[i] = strdup(prot[i])))
				goto fail;
	} else if (cfg->workdir) {
		/* The list the policy classifies by, so that what it
		 * refuses to write is what the guard re-hashes. */
		r = protected_roots(cfg->workdir, &g->protected_paths);
		if (r < 0)
			goto fail;
		r = -ENOMEM;
	} else if (!(g->protected_paths = calloc(1, sizeof(char *)))) {
		goto fail;
	}

	/* The watches go in before anything is read: a write after the
	 * read of a file is then an event. */
	if (!cfg->stat_only &&
	    __atomic_add_fetch(&guard_instances, 1, __ATOMIC_RELAXED) <=
		GUARD_INOTIFY_MAX) {
		g->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
		if (g->ifd < 0)
			__atomic_sub_fetch(&guard_instances, 1,
					   __ATOMIC_RELAXED);
	} else if (!cfg->stat_only) {
		__atomic_sub_fetch(&guard_instances, 1, __ATOMIC_RELAXED);
	}
	g->watching = g->ifd >= 0;
	t = now_ns();
	r = scan_list(g, &g->e);
	g->watching = false;
	if (r < 0)
		goto fail;
	for (size_t i = 0; i < g->e.n; i++) {
		struct entry *e = &g->e.v[i];
		struct precs p = {0};

		r = hash_entry(g, e, &p);
		if (r < 0)
			goto fail;
		e->seen_ns = t;
		if (e->type == E_PACKED) {
			precs_free(&g->packed);
			g->packed = p;
		} else {
			precs_free(&p);
		}
	}
	*ret = g;
	return 0;
fail:
	guard_free(g);
	return r;
}

/* Name the first branch or tag whose packed record differs. */
static void packed_name(const struct precs *a, const struct precs *b,
			struct guard_finding *f)
{
	size_t i = 0, j = 0;
	const char *name = NULL;
	size_t len = 0;

	while (i < a->n || j < b->n) {
		const char *x = i < a->n ? a->v[i] : NULL;
		const char *y = j < b->n ? b->v[j] : NULL;
		int c = !x ? 1 : !y ? -1 : strcmp(x, y);

		if (c == 0) {
			i++;
			j++;
			continue;
		}
		name = c < 0 ? x : y;
		len = strcspn(name, " ");
		break;
	}
	if (name)
		snprintf(f->path, sizeof(f->path), ".git/packed-refs:%.*s",
			 (int)len, name);
}

static void finding(struct guard_finding *f, const struct entry *e,
		    const char *what)
{
	if (!f)
		return;
	f->set = (enum guard_set)e->set;
	snprintf(f->path, sizeof(f->path), "%s", e->key);
	snprintf(f->what, sizeof(f->what), "%s", what);
}

static int check_all(struct guard *g, struct guard_finding *ret_finding)
{
	struct elist l = {0};
	struct precs packed = {0};
	bool have_packed = false;
	size_t i = 0, j = 0;
	int64_t t = now_ns();
	struct visitor fast = {.fn = compare, .g = g};
	int r;

	r = scan(g, &fast);
	if (r == 0 && fast.matched == g->e.n)
		return 0;
	r = scan_list(g, &l);
	if (r < 0)
		goto out;
	while (i < g->e.n || j < l.n) {
		struct entry *o = i < g->e.n ? &g->e.v[i] : NULL;
		struct entry *e = j < l.n ? &l.v[j] : NULL;
		int c = !o ? 1 : !e ? -1 : strcmp(o->key, e->key);

		if (c < 0) {
			/* A root that was absent and now holds files shows
			 * up as its files being added. */
			if (o->type != E_ABSENT) {
				finding(ret_finding, o, "removed");
				r = 1;
				goto out;
			}
			i++;
			continue;
		}
		if (c > 0) {
			if (e->type != E_ABSENT) {
				finding(ret_finding, e, "added");
				r = 1;
				goto out;
			}
			j++;
			continue;
		}
		if (o->type != e->type) {
			finding(ret_finding, e,
				o->type == E_ABSENT   ? "added"
				: e->type == E_ABSENT ? "removed"
						      : "changed");
			r = 1;
			goto out;
		}
		if (e->type != E_ABSENT && same_stat(o, e) && !racy(o)) {
			memcpy(e->hash, o->hash, sizeof(e->hash));
			e->hashed = true;
			e->seen_ns = o->seen_ns;
		} else if (e->type != E_ABSENT) {
			struct precs p = {0};

			r = hash_entry(g, e, &p);
			if (r < 0) {
				precs_free(&p);
				goto out;
			}
			e->seen_ns = t;
			if (memcmp(o->hash, e->hash, sizeof(e->hash)) != 0) {
				finding(ret_finding, e,
					e->type == E_ABSENT ? "removed"
							    : "changed");
				if (ret_finding && o->type == E_PACKED &&
				    e->type == E_PACKED)
					packed_name(&g->packed, &p,
						    ret_finding);
				precs_free(&p);
				r = 1;
				goto out;
			}
			if (e->type == E_PACKED) {
				precs_free(&packed);
				packed = p;
				have_packed = true;
			} else {
				precs_free(&p);
			}
		} else {
			/* Absent then and now: the fresh entry takes the hash
			 * the snapshot had, or the digest would move. */
			memcpy(e->hash, o->hash, sizeof(e->hash));
			e->hashed = true;
			e->seen_ns = t;
		}
		i++;
		j++;
	}
	/* Clean: the fresh stat keys become the snapshot. */
	elist_free(&g->e);
	g->e = l;
	l = (struct elist){0};
	if (have_packed) {
		precs_free(&g->packed);
		g->packed = packed;
		packed = (struct precs){0};
	}
	r = 0;
out:
	elist_free(&l);
	precs_free(&packed);
	return r;
}

/*
 * Stat the next slice of the snapshot (a GUARD_FULL_SCAN_CHECKS-th of
 * it, round robin): 0 when each entry there is as recorded and not racy,
 * 1 otherwise.  New entries need no look: creating one is an event.
 */
static int slice_check(struct guard *g)
{
	size_t n = g->e.n, lo, hi;

	lo = n * g->slice / GUARD_FULL_SCAN_CHECKS;
	hi = n * (g->slice + 1) / GUARD_FULL_SCAN_CHECKS;
	g->slice = (g->slice + 1) % GUARD_FULL_SCAN_CHECKS;
	for (size_t i = lo; i < hi; i++) {
		const struct entry *e = &g->e.v[i];
		struct stat st;

		if (lstat(e->path, &st) < 0) {
			if (e->type == E_ABSENT &&
			    (errno == ENOENT || errno == ENOTDIR))
				continue;
			return 1;
		}
		if (e->type == E_ABSENT || !same_stat_st(e, &st) || racy(e))
			return 1;
	}
	return 0;
}

int guard_check(struct guard *g, struct guard_finding *ret_finding)
{
	int r = 1;

	if (g->ifd >= 0) {
		r = drain(g);
		if (r < 0)
			unwatch(g);
		else if (r == 0 && !g->dirty && slice_check(g) == 0)
			return 0;
	}
	/* An event (or a check that was not clean) re-adds the watches:
	 * a new directory needs one, and a file replaced by rename is a new
	 * inode.  A slice that moved without an event needs none. */
	g->watching = g->ifd >= 0 && (r != 0 || g->dirty);
	g->full_scans++;
	r = check_all(g, ret_finding);
	g->watching = false;
	g->dirty = r != 0;
	return r;
}

bool guard_watching(const struct guard *g)
{
	return g && g->ifd >= 0;
}

size_t guard_full_scans(const struct guard *g)
{
	return g ? g->full_scans : 0;
}

int guard_note_ref(struct guard *g, const char *refname)
{
	char key[GUARD_PATH_MAX], path[GUARD_PATH_MAX];
	struct stat st;
	size_t i;
	int r;

	if ((strncmp(refname, "refs/heads/", 11) != 0 &&
	     strncmp(refname, "refs/tags/", 10) != 0) ||
	    strstr(refname, ".."))
		return -EINVAL;
	r = join(key, ".git", refname);
	if (r == 0)
		r = join(path, g->gitdir, refname);
	if (r < 0)
		return r;
	if (skip_key(g, key))
		return 0;
	for (i = 0; i < g->e.n; i++)
		if (strcmp(g->e.v[i].key, key) == 0)
			break;
	if (i < g->e.n) {
		struct entry *e = &g->e.v[i];

		free(e->key);
		free(e->path);
		memmove(e, e + 1, (g->e.n - i - 1) * sizeof(*e));
		g->e.n--;
	}
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	r = elist_push(&g->e, GUARD_SET_GIT, type_of(&st), key, path, &st);
	if (r < 0)
		return r;
	g->e.v[g->e.n - 1].seen_ns = now_ns();
	r = hash_entry(g, &g->e.v[g->e.n - 1], NULL);
	qsort(g->e.v, g->e.n, sizeof(g->e.v[0]), cmp_entry);
	return r;
}

/* Over each entry's key and hash; with legacy, an absent entry's hash
 * as zeros (guard_digest_legacy). */
static void digest(const struct guard *g, bool legacy,
		   uint8_t ret[GUARD_DIGEST_LEN])
{
	static const uint8_t zero[sizeof(((struct entry *)0)->hash)];
	crypto_generichash_state st;

	crypto_generichash_init(&st, NULL, 0, GUARD_DIGEST_LEN);
	for (size_t i = 0; i < g->e.n; i++) {
		const struct entry *e = &g->e.v[i];

		crypto_generichash_update(&st, (const uint8_t *)e->key,
					  strlen(e->key) + 1);
		crypto_generichash_update(
		    &st, legacy && e->type == E_ABSENT ? zero : e->hash,
		    sizeof(e->hash));
	}
	crypto_generichash_final(&st, ret, GUARD_DIGEST_LEN);
}

void guard_digest(const struct guard *g, uint8_t ret[GUARD_DIGEST_LEN])
{
	digest(g, false, ret);
}

void guard_digest_legacy(const struct guard *g, uint8_t ret[GUARD_DIGEST_LEN])
{
	digest(g, true, ret);
}

size_t guard_count(const struct guard *g)
{
	return g ? g->e.n : 0;
}

/*
 * The file tools, confined to a workspace with openat2.  See fsops.h for
 * the threat: the agent changes the tree concurrently, so a path is only
 * ever walked by the kernel from the workspace's descriptor, and a change
 * is made relative to the descriptor of its parent directory.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/openat2.h>

#include "common/buf.h"
#include "common/strv.h"
#include "common/utf8.h"
#include "common/util.h"
#include "daemon/sandbox/fsops.h"

/*
 * Every walk: stay under the starting directory (RESOLVE_BENEATH also
 * refuses absolute symlinks and "/"), follow no symlink at all, and never
 * a procfs magic link (/proc/PID/fd/N, /proc/PID/root), which would jump
 * anywhere in the file system.  Needs Linux 5.6; on an older kernel every
 * tool fails with -ENOSYS rather than falling back to something racy.
 */
#define FS_RESOLVE                                                             \
	(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)

/* openat2 returns -EAGAIN when a concurrent rename might have let ".."
 * escape; we never pass "..", so a few retries are plenty, and a bound
 * keeps a hostile renamer from spinning spd forever. */
#define FS_OPENAT2_RETRIES 16
/* Attempts at an unused temporary name: 64 random bits collide only when
 * someone is guessing, and then giving up is right. */
#define FS_TMP_TRIES 8
/* Passes over a directory fs_delete makes while entries keep appearing:
 * an agent creating files as fast as spd removes them gets -ENOTEMPTY. */
#define FS_DELETE_PASSES 4

struct fs_ws {
	int dirfd;
	char *root;	 /* as given to fs_ws_open */
	char *real_root; /* its realpath at open time, for absolute paths */
	fs_ignored_fn is_ignored;
	void *ignored_data;
	char **readable; /* NULL-terminated fnmatch patterns, or NULL */
};

static int openat2_beneath(int dirfd, const char *rel, int flags)
{
	struct open_how how = {
	    .flags = (uint64_t)(flags | O_CLOEXEC),
	    .resolve = FS_RESOLVE,
	};
	long fd = -1;

	for (int i = 0; i < FS_OPENAT2_RETRIES; i++) {
		fd = syscall(SYS_openat2, dirfd, *rel ? rel : ".", &how,
			     sizeof(how));
		if (fd >= 0 || (errno != EAGAIN && errno != EINTR))
			break;
	}
	return fd < 0 ? -errno : (int)fd;
}

int fs_ws_open(const char *root, struct fs_ws **ret_ws)
{
	struct fs_ws *ws = NULL;
	int r;

	if (!root || root[0] != '/')
		return -EINVAL;
	ws = calloc(1, sizeof(*ws));
	if (!ws)
		return -ENOMEM;
	ws->dirfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (ws->dirfd < 0) {
		r = -errno;
		goto out;
	}
	ws->root = strdup(root);
	ws->real_root = realpath(root, NULL);
	if (!ws->root || !ws->real_root) {
		r = -ENOMEM;
		goto out;
	}
	*ret_ws = steal_ptr(ws);
	r = 0;
out:
	fs_ws_free(ws);
	return r;
}

void fs_ws_free(struct fs_ws *ws)
{
	if (!ws)
		return;
	if (ws->dirfd >= 0)
		close(ws->dirfd);
	free(ws->root);
	free(ws->real_root);
	strv_free_array(ws->readable);
	free(ws);
}

int fs_ws_set_ignore(struct fs_ws *ws, fs_ignored_fn is_ignored, void *data,
		     const char *const *readable)
{
	char **copy = NULL;
	size_t n = 0;

	if (readable) {
		while (readable[n])
			n++;
		copy = calloc(n + 1, sizeof(*copy));
		if (!copy)
			return -ENOMEM;
		for (size_t i = 0; i < n; i++) {
			copy[i] = strdup(readable[i]);
			if (!copy[i]) {
				strv_free_array(copy);
				return -ENOMEM;
			}
		}
	}
	strv_free_array(ws->readable);
	ws->readable = copy;
	ws->is_ignored = is_ignored;
	ws->ignored_data = data;
	return 0;
}

const char *fs_ws_root(const struct fs_ws *ws)
{
	return ws->root;
}

const char *fs_type_name(enum fs_type t)
{
	switch (t) {
	case FS_TYPE_FILE:
		return "file";
	case FS_TYPE_DIR:
		return "dir";
	case FS_TYPE_SYMLINK:
		return "symlink";
	case FS_TYPE_OTHER:
		break;
	}
	return "other";
}

/* If the n bytes at p name root or something under it, store in *ret_skip
 * how many bytes to drop.  A string comparison is enough: the remainder is
 * then walked by openat2 like any relative path. */
static bool strip_root(const char *root, const char *p, size_t n,
		       size_t *ret_skip)
{
	size_t rl = strlen(root);

	while (rl > 0 && root[rl - 1] == '/')
		rl--;
	if (n < rl || memcmp(p, root, rl) != 0)
		return false;
	if (n > rl && p[rl] != '/')
		return false;
	*ret_skip = rl;
	return true;
}

int fs_path_normalize(const struct fs_ws *ws, const char *path, size_t len,
		      char **ret_rel)
{
	char *out = NULL;
	size_t o = 0, i = 0, skip = 0;
	int r;

	if (len > FS_PATH_MAX)
		return -ENAMETOOLONG;
	if (memchr(path, '\0', len))
		return -EINVAL;
	if (!utf8_valid(path, len))
		return -SPD_EUTF8;
	if (len > 0 && path[0] == '/') {
		/* An absolute path is only a spelling of a workspace path. */
		if (!ws || (!strip_root(ws->real_root, path, len, &skip) &&
			    !strip_root(ws->root, path, len, &skip)))
			return -EXDEV;
		path += skip;
		len -= skip;
	}
	out = malloc(len + 1);
	if (!out)
		return -ENOMEM;
	while (i < len) {
		while (i < len && path[i] == '/')
			i++;
		size_t s = i;
		while (i < len && path[i] != '/')
			i++;
		size_t cl = i - s;
		if (cl == 0)
			break;
		if (cl > FS_NAME_MAX) {
			r = -ENAMETOOLONG;
			goto out;
		}
		if (cl == 1 && path[s] == '.')
			continue;
		if (cl == 2 && path[s] == '.' && path[s + 1] == '.') {
			/* Folding ".." lexically is exact only because no
			 * tool ever follows a symlink: the component it
			 * cancels is a real directory or the walk fails. */
			if (o == 0) {
				r = -EXDEV;
				goto out;
			}
			while (o > 0 && out[o - 1] != '/')
				o--;
			if (o > 0)
				o--;
			continue;
		}
		if (o > 0)
			out[o++] = '/';
		memcpy(out + o, path + s, cl);
		o += cl;
	}
	out[o] = '\0';
	*ret_rel = steal_ptr(out);
	r = 0;
out:
	free(out);
	return r;
}

/* In place, git-ignored paths are refused, except for reading the ones
 * the project lists as readable.  The root itself is never ignored. */
static bool refused_ignored(const struct fs_ws *ws, const char *rel,
			    bool reading)
{
	if (!ws->is_ignored || !*rel)
		return false;
	if (!ws->is_ignored(ws->ignored_data, rel))
		return false;
	if (reading && ws->readable)
		for (char **p = ws->readable; *p; p++)
			if (fnmatch(*p, rel, FNM_PATHNAME) == 0)
				return false;
	return true;
}

/* Normalize path and apply the in-place rule.  Returns 0 and *ret_rel. */
static int prepare(const struct fs_ws *ws, const char *path, bool reading,
		   char **ret_rel)
{
	char *rel = NULL;
	int r;

	if (!path)
		return -EINVAL;
	r = fs_path_normalize(ws, path, strlen(path), &rel);
	if (r < 0)
		return r;
	if (refused_ignored(ws, rel, reading)) {
		free(rel);
		return -SPD_EPERM;
	}
	*ret_rel = rel;
	return 0;
}

/*
 * Open the directory that holds the last component of rel (not "") and
 * store its name (pointing into rel) in *ret_name.  Returns the
 * descriptor or -errno.
 */
static int open_parent(const struct fs_ws *ws, const char *rel,
		       const char **ret_name)
{
	const char *slash = strrchr(rel, '/');
	_cleanup_free_ char *parent = NULL;
	int fd;

	if (!slash) {
		fd = openat2_beneath(ws->dirfd, "", O_RDONLY | O_DIRECTORY);
		if (fd >= 0)
			*ret_name = rel;
		return fd;
	}
	parent = strndup(rel, (size_t)(slash - rel));
	if (!parent)
		return -ENOMEM;
	fd = openat2_beneath(ws->dirfd, parent, O_RDONLY | O_DIRECTORY);
	if (fd >= 0)
		*ret_name = slash + 1;
	return fd;
}

static void info_from_stat(const struct stat *st, struct fs_info *ret)
{
	if (S_ISREG(st->st_mode))
		ret->type = FS_TYPE_FILE;
	else if (S_ISDIR(st->st_mode))
		ret->type = FS_TYPE_DIR;
	else if (S_ISLNK(st->st_mode))
		ret->type = FS_TYPE_SYMLINK;
	else
		ret->type = FS_TYPE_OTHER;
	ret->size = st->st_size > 0 ? (uint64_t)st->st_size : 0;
	ret->mode = st->st_mode & 07777;
	ret->mtime_ns =
	    (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

int fs_read(const struct fs_ws *ws, const char *path, char **ret_data,
	    size_t *ret_len)
{
	_cleanup_free_ char *rel = NULL;
	_cleanup_close_ int fd = -1;
	struct buf b = BUF_INIT;
	struct stat st;
	int r;

	r = prepare(ws, path, true, &rel);
	if (r < 0)
		return r;
	/* O_NONBLOCK: a FIFO swapped in after a check must not hang spd in
	 * open(); it is then refused by the fstat below. */
	fd = openat2_beneath(ws->dirfd, rel, O_RDONLY | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if (st.st_size > (off_t)FS_READ_MAX)
		return -SPD_ETOOBIG;
	/* The size may change while reading; read to EOF but never keep
	 * more than the limit. */
	r = buf_reserve(&b, (size_t)st.st_size + 1);
	if (r < 0)
		goto out;
	for (;;) {
		if (b.cap - b.len < 2) {
			r = buf_reserve(&b, 64 * 1024);
			if (r < 0)
				goto out;
		}
		ssize_t n = read(fd, b.data + b.len, b.cap - b.len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			goto out;
		}
		if (n == 0)
			break;
		b.len += (size_t)n;
		if (b.len > FS_READ_MAX) {
			r = -SPD_ETOOBIG;
			goto out;
		}
	}
	b.data[b.len] = '\0';
	*ret_len = b.len;
	*ret_data = steal_ptr(b.data);
	b.len = b.cap = 0;
	r = 0;
out:
	buf_free(&b);
	return r;
}

static int write_all(int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Create a new temporary file in dfd; its name goes in name (32 bytes). */
static int create_tmp(int dfd, char name[static 32])
{
	for (int i = 0; i < FS_TMP_TRIES; i++) {
		uint64_t rnd;
		if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
			return -EIO;
		snprintf(name, 32, ".spd-tmp-%016llx", (unsigned long long)rnd);
		/* O_EXCL with O_CREAT never follows a symlink in the last
		 * component, and the name has no '/': the file is made in
		 * the directory dfd is, whatever happens to its path. */
		int fd = openat(
		    dfd, name,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0)
			return fd;
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

int fs_write(const struct fs_ws *ws, const char *path, const void *data,
	     size_t len)
{
	_cleanup_free_ char *rel = NULL;
	_cleanup_close_ int dfd = -1;
	_cleanup_close_ int tfd = -1;
	char tmp[32] = "";
	const char *name = NULL;
	mode_t mode = 0644;
	struct stat st;
	int r;

	if (len > FS_WRITE_MAX)
		return -SPD_ETOOBIG;
	r = prepare(ws, path, false, &rel);
	if (r < 0)
		return r;
	if (!*rel)
		return -EINVAL;
	dfd = open_parent(ws, rel, &name);
	if (dfd < 0)
		return dfd;
	/* This check only gives a clear error: safety does not depend on
	 * it, since the rename below replaces whatever entry is there. */
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISLNK(st.st_mode))
			return -ELOOP;
		if (S_ISDIR(st.st_mode))
			return -EISDIR;
		if (!S_ISREG(st.st_mode))
			return -EINVAL;
		/* Keep the permissions, but never hand set-id bits on to
		 * content the agent chose. */
		mode = st.st_mode & 0777;
	} else if (errno != ENOENT) {
		return -errno;
	}
	tfd = create_tmp(dfd, tmp);
	if (tfd < 0)
		return tfd;
	r = write_all(tfd, data, len);
	if (r < 0)
		goto out;
	if (fchmod(tfd, mode) < 0 || fsync(tfd) < 0) {
		r = -errno;
		goto out;
	}
	r = close(steal_fd(tfd)) < 0 ? -errno : 0;
	if (r < 0)
		goto out;
	if (renameat(dfd, tmp, dfd, name) < 0) {
		r = -errno;
		goto out;
	}
	tmp[0] = '\0';
	/* Make the new entry durable too; the content already is, and a
	 * failure here cannot be undone, so it is not reported. */
	(void)fsync(dfd);
	r = 0;
out:
	if (tmp[0])
		unlinkat(dfd, tmp, 0);
	return r;
}

static int entry_cmp(const void *a, const void *b)
{
	const struct fs_entry *x = a, *y = b;

	return strcmp(x->name, y->name);
}

void fs_listing_free(struct fs_listing *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++)
		free(l->entries[i].name);
	free(l->entries);
	memset(l, 0, sizeof(*l));
}

/* rel + "/" + name into b ("name" alone under the root). */
static int child_rel(struct buf *b, const char *rel, const char *name)
{
	buf_reset(b);
	if (*rel && (buf_puts(b, rel) < 0 || buf_puts(b, "/") < 0))
		return -ENOMEM;
	if (buf_puts(b, name) < 0)
		return -ENOMEM;
	return 0;
}

int fs_list(const struct fs_ws *ws, const char *path, struct fs_listing *ret)
{
	_cleanup_free_ char *rel = NULL;
	struct fs_listing l = {0};
	struct buf child = BUF_INIT;
	size_t cap = 0;
	DIR *dir = NULL;
	int fd, r;

	r = prepare(ws, path, true, &rel);
	if (r < 0)
		return r;
	fd = openat2_beneath(ws->dirfd, rel, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return fd;
	dir = fdopendir(fd);
	if (!dir) {
		r = -errno;
		close(fd);
		return r;
	}
	for (;;) {
		struct dirent *de;
		struct stat st;

		errno = 0;
		de = readdir(dir);
		if (!de) {
			r = -errno;
			if (r < 0)
				goto out;
			break;
		}
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (l.n == FS_LIST_MAX) {
			l.truncated = true;
			break;
		}
		if (!utf8_valid(de->d_name, strlen(de->d_name))) {
			l.skipped++;
			continue;
		}
		r = child_rel(&child, rel, de->d_name);
		if (r < 0)
			goto out;
		if (refused_ignored(ws, child.data, true)) {
			l.skipped++;
			continue;
		}
		if (fstatat(dirfd(dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) <
		    0) {
			if (errno == ENOENT) /* removed meanwhile */
				continue;
			r = -errno;
			goto out;
		}
		if (l.n == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			struct fs_entry *e =
			    reallocarray(l.entries, ncap, sizeof(*e));
			if (!e) {
				r = -ENOMEM;
				goto out;
			}
			l.entries = e;
			cap = ncap;
		}
		l.entries[l.n].name = strdup(de->d_name);
		if (!l.entries[l.n].name) {
			r = -ENOMEM;
			goto out;
		}
		info_from_stat(&st, &l.entries[l.n].info);
		l.n++;
	}
	if (l.n > 0)
		qsort(l.entries, l.n, sizeof(*l.entries), entry_cmp);
	*ret = l;
	memset(&l, 0, sizeof(l));
	r = 0;
out:
	closedir(dir);
	buf_free(&child);
	fs_listing_free(&l);
	return r;
}

int fs_stat(const struct fs_ws *ws, const char *path, struct fs_info *ret)
{
	_cleanup_free_ char *rel = NULL;
	_cleanup_close_ int dfd = -1;
	const char *name = NULL;
	struct stat st;
	int r;

	r = prepare(ws, path, true, &rel);
	if (r < 0)
		return r;
	if (!*rel) {
		if (fstat(ws->dirfd, &st) < 0)
			return -errno;
	} else {
		dfd = open_parent(ws, rel, &name);
		if (dfd < 0)
			return dfd;
		if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
	}
	info_from_stat(&st, ret);
	return 0;
}

int fs_mkdir(const struct fs_ws *ws, const char *path, bool parents)
{
	_cleanup_free_ char *rel = NULL;
	_cleanup_close_ int dfd = -1;
	const char *name = NULL;
	char *comp, *save = NULL;
	int r, created = 0;

	r = prepare(ws, path, false, &rel);
	if (r < 0)
		return r;
	if (!*rel)
		return parents ? 0 : -EEXIST;
	if (!parents) {
		dfd = open_parent(ws, rel, &name);
		if (dfd < 0)
			return dfd;
		return mkdirat(dfd, name, 0755) < 0 ? -errno : 1;
	}
	/* One level at a time, each opened from the level above with the
	 * same rules, so a level swapped for a symlink stops the walk. */
	dfd = openat2_beneath(ws->dirfd, "", O_RDONLY | O_DIRECTORY);
	if (dfd < 0)
		return dfd;
	for (comp = strtok_r(rel, "/", &save); comp;
	     comp = strtok_r(NULL, "/", &save)) {
		created = mkdirat(dfd, comp, 0755) == 0;
		if (!created && errno != EEXIST)
			return -errno;
		int next = openat2_beneath(dfd, comp, O_RDONLY | O_DIRECTORY);
		if (next < 0)
			return next;
		close(dfd);
		dfd = next;
	}
	return created;
}

/*
 * Remove the directory name in dfd and everything below it.  rel is its
 * workspace path (for the in-place rule), dev the file system it must be
 * on.  Adds the entries removed to *count.
 */
static int remove_tree(const struct fs_ws *ws, int dfd, const char *name,
		       const char *rel, dev_t dev, int depth, size_t *count)
{
	struct buf child = BUF_INIT;
	DIR *dir = NULL;
	struct stat st;
	int fd, r;

	if (depth >= FS_DELETE_DEPTH_MAX)
		return -SPD_ETOOBIG;
	fd = openat2_beneath(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
	if (fd == -ELOOP || fd == -ENOTDIR) {
		/* Swapped for a symlink or a file since the caller looked:
		 * remove that entry itself, never what it points to. */
		if (unlinkat(dfd, name, 0) < 0)
			return -errno;
		(*count)++;
		return 0;
	}
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	if (st.st_dev != dev) {
		/* A mount point: its contents are not the workspace's. */
		close(fd);
		return -EXDEV;
	}
	dir = fdopendir(fd);
	if (!dir) {
		r = -errno;
		close(fd);
		return r;
	}
	for (int pass = 0; pass < FS_DELETE_PASSES; pass++) {
		struct dirent *de;

		rewinddir(dir);
		while ((de = readdir(dir))) {
			if (!strcmp(de->d_name, ".") ||
			    !strcmp(de->d_name, ".."))
				continue;
			r = child_rel(&child, rel, de->d_name);
			if (r < 0)
				goto out;
			if (refused_ignored(ws, child.data, false)) {
				r = -SPD_EPERM;
				goto out;
			}
			if (fstatat(dirfd(dir), de->d_name, &st,
				    AT_SYMLINK_NOFOLLOW) < 0) {
				if (errno == ENOENT)
					continue;
				r = -errno;
				goto out;
			}
			if (S_ISDIR(st.st_mode)) {
				char *sub = strdup(child.data);
				if (!sub) {
					r = -ENOMEM;
					goto out;
				}
				r = remove_tree(ws, dirfd(dir), de->d_name, sub,
						dev, depth + 1, count);
				free(sub);
				if (r < 0)
					goto out;
			} else {
				if (unlinkat(dirfd(dir), de->d_name, 0) < 0 &&
				    errno != ENOENT) {
					r = -errno;
					goto out;
				}
				(*count)++;
			}
		}
		if (unlinkat(dfd, name, AT_REMOVEDIR) == 0) {
			(*count)++;
			r = 0;
			goto out;
		}
		if (errno != ENOTEMPTY) {
			r = -errno;
			goto out;
		}
	}
	r = -ENOTEMPTY;
out:
	closedir(dir);
	buf_free(&child);
	return r;
}

int fs_delete(const struct fs_ws *ws, const char *path, bool recursive)
{
	_cleanup_free_ char *rel = NULL;
	_cleanup_close_ int dfd = -1;
	const char *name = NULL;
	size_t count = 0;
	struct stat st;
	int r;

	r = prepare(ws, path, false, &rel);
	if (r < 0)
		return r;
	if (!*rel)
		return -EBUSY;
	dfd = open_parent(ws, rel, &name);
	if (dfd < 0)
		return dfd;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dfd, name, 0) < 0 ? -errno : 1;
	if (!recursive)
		return unlinkat(dfd, name, AT_REMOVEDIR) < 0 ? -errno : 1;
	r = remove_tree(ws, dfd, name, rel, st.st_dev, 0, &count);
	if (r < 0)
		return r;
	return count > INT32_MAX ? INT32_MAX : (int)count;
}

int fs_move(const struct fs_ws *ws, const char *from, const char *to,
	    bool overwrite)
{
	_cleanup_free_ char *frel = NULL;
	_cleanup_free_ char *trel = NULL;
	_cleanup_close_ int ffd = -1;
	_cleanup_close_ int tfd = -1;
	const char *fname = NULL, *tname = NULL;
	int r;

	r = prepare(ws, from, false, &frel);
	if (r < 0)
		return r;
	r = prepare(ws, to, false, &trel);
	if (r < 0)
		return r;
	if (!*frel || !*trel)
		return -EBUSY;
	ffd = open_parent(ws, frel, &fname);
	if (ffd < 0)
		return ffd;
	tfd = open_parent(ws, trel, &tname);
	if (tfd < 0)
		return tfd;
	/* RENAME_NOREPLACE makes "does not exist yet" the kernel's check,
	 * atomic with the rename, instead of ours before it. */
	if (renameat2(ffd, fname, tfd, tname,
		      overwrite ? 0 : RENAME_NOREPLACE) < 0)
		return -errno;
	return 0;
}

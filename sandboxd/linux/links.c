/*
 * The hard-link check of a run's writable paths (sandboxd/linux/links.h),
 * applied by mount.c after the plan's binds: the full walk, or the names
 * spd's watch lists.
 */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/util.h"
#include "sandboxd/linux/links.h"
#include "sandboxd/linux/mount.h"
#include "sandboxd/linux/steps.h"
#include "proto/sandbox.h"

/*
 * Hard links planted in a writable path from the host (docs/sandbox.md,
 * "Hard links").  A name in the workspace whose file also has a link
 * outside it would let the run change that file: the idmapped bind makes
 * a root-owned file the run uid's, and without root the run is the
 * operator.  Pass 1 counts, per (dev, ino), the names of each multi-linked
 * file on the writable mounts; a file with fewer such names than
 * st_nlink has a link elsewhere.  Pass 2 binds each name of such a file
 * read-only over itself: writes, truncation and chmod through it fail
 * with EROFS, and link(2) from it fails with EXDEV.
 * Past LINKS_EACH_MAX such names (a store's files linked into the
 * workspace by pnpm or uv), pass 2 binds directories whole instead, as
 * links_judge decides between the two passes.  Pass 2 walks only the
 * directories where pass 1 saw a multi-linked file, in them or below.
 *
 * Runs in the run's pid 1, before the pivot, with syscalls only; its
 * scratch memory is kept between runs (mountplan_scratch), or mmap'd and
 * unmapped before it returns.
 */

/* The (dev, ino) table starts at LINKS_SLOTS_MIN slots (32 KiB, kept and
 * cleared between runs) and doubles when half full: a workspace of a few
 * hundred directories never grows it, and one full of hard links (git
 * clone --local) does not fault in a large table scattered at random.  A
 * power of two. */
#define LINKS_SLOTS_MIN (1u << 10)
/* One getdents64 buffer per directory level. */
#define LINKS_DIRBUF 8192

enum {
	LS_USED = 1,
	LS_FILE = 2,	 /* a multi-linked file seen in pass 1 */
	LS_SEEN1 = 4,	 /* a directory walked in pass 1 */
	LS_SEEN2 = 8,	 /* a (mount, directory) walked in pass 2 */
	LS_MULTI = 16,	 /* a directory holding a multi-linked name (pass 1) */
	LS_SINGLE = 32,	 /* a directory holding a file of one link (pass 1) */
	LS_MNTROOT = 64, /* a directory holding a multi-linked mount point */
	/* Pass 1, of a directory: what is in it or below it, on the
	 * writable mounts it walked (links_dir), and that it was left. */
	LS_BMULTI = 128, /* a multi-linked file */
	LS_BFILES = 256, /* a file */
	LS_DONE1 = 512,
	/* Of a (mount, directory), judged before pass 2 (links_judge). */
	LS_JUDGED = 1024,
	LS_WHOLE = 2048, /* bound read-only whole */
	LS_DEEP = 4096	 /* pass 2 must walk below it (LJ_DEEP) */
};

/* At most this many names are bound one by one; past it, pass 2 binds
 * whole directories (links_judge), and spd's list carries directories. */
#define LINKS_EACH_MAX SBXP_LINKS_EACH_MAX

/* listmount(2) (Linux 6.8), which libc headers may not have yet. */
#ifndef SYS_listmount
#define SYS_listmount 458
#endif
#ifndef STATX_MNT_ID_UNIQUE
#define STATX_MNT_ID_UNIQUE 0x00004000U
#endif
struct links_mnt_id_req {
	uint32_t size, spare;
	uint64_t mnt_id, param, mnt_ns_id;
};

/* Pass 2 keys directories by mount id rather than device: a directory
 * visible through two mounts needs its names bound in each. */
#define LINKS_MNT_KEY (1ull << 63)

struct links_slot {
	uint64_t dev, ino;
	uint32_t count; /* names counted on writable mounts (pass 1) */
	uint32_t nlink; /* st_nlink when first seen */
	uint32_t flags;
};

struct links_walk {
	struct links_slot *slots;
	struct links_slot *fixed; /* the scratch table: never unmapped */
	size_t nslots, nused;
	char *bufs;
	size_t entries;
	size_t nshort; /* files with fewer names counted than links */
	size_t bound;
	int pass;
	bool dirs; /* pass 2 binds whole directories (LINKS_EACH_MAX) */
	uint64_t hide_dev, hide_ino; /* the plan's hidden directory */
	/* links_judge under the root it judges: a file's (dev, d_ino) as
	 * getdents64 gives it names the file pass 1 counted (links_by_ino),
	 * so its slot is found without a statx of the name. */
	bool by_ino;
	/* Pass 2, per depth: the directory's own names are read-only by a
	 * directory bound whole (its own or one above it on its mount), and
	 * its mount (links_judge's too). */
	bool ro[MOUNTPLAN_LINKS_DEPTH_MAX + 1];
	uint64_t mnt[MOUNTPLAN_LINKS_DEPTH_MAX + 1];
	/* Pass 1, per depth: what the directories below it held (LS_B*). */
	uint32_t below[MOUNTPLAN_LINKS_DEPTH_MAX + 1];
};

struct links_dirent {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

static void *links_map(size_t len)
{
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	return m == MAP_FAILED ? NULL : m;
}

static struct links_slot *links_find(struct links_slot *slots, size_t nslots,
				     uint64_t dev, uint64_t ino)
{
	uint64_t h = (dev * 0x9e3779b97f4a7c15ull) ^ ino;

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	for (size_t i = h & (nslots - 1);; i = (i + 1) & (nslots - 1))
		if (!(slots[i].flags & LS_USED) ||
		    (slots[i].dev == dev && slots[i].ino == ino))
			return &slots[i];
}

/* The slot of (dev, ino); with insert, a new one when absent.  NULL when
 * absent (without insert) or when the table cannot grow. */
static struct links_slot *links_slot(struct links_walk *w, uint64_t dev,
				     uint64_t ino, bool insert)
{
	struct links_slot *s = links_find(w->slots, w->nslots, dev, ino);

	if (s->flags & LS_USED)
		return s;
	if (!insert)
		return NULL;
	if (2 * (w->nused + 1) > w->nslots) {
		size_t n = 2 * w->nslots;
		struct links_slot *t = links_map(n * sizeof(*t));

		if (!t)
			return NULL;
		for (size_t i = 0; i < w->nslots; i++)
			if (w->slots[i].flags & LS_USED)
				*links_find(t, n, w->slots[i].dev,
					    w->slots[i].ino) = w->slots[i];
		if (w->slots != w->fixed)
			munmap(w->slots, w->nslots * sizeof(*t));
		w->slots = t;
		w->nslots = n;
		s = links_find(t, n, dev, ino);
	}
	w->nused++;
	s->dev = dev;
	s->ino = ino;
	s->flags = LS_USED;
	return s;
}

/* Whether the regular file (dev, ino), of nlink links now, has one the
 * walk did not count: a link outside the writable paths, or a file pass 1
 * did not see.  Pass 2 binds its names; links_judge counts them against
 * their directory's own. */
static bool links_outside(struct links_walk *w, uint64_t dev, uint64_t ino,
			  uint64_t nlink)
{
	struct links_slot *s;

	if (nlink < 2)
		return false;
	s = links_slot(w, dev, ino, false);
	return !s || !(s->flags & LS_FILE) || s->count < nlink;
}

/*
 * Bind the file open at fd read-only over itself; with below, a
 * directory, with the mounts below it (AT_RECURSIVE: the names bound one
 * by one there, each a mount of its own) as they are.  The clone keeps
 * the mount's idmapping.
 */
static int links_bind_ro(struct links_walk *w, int fd, bool below)
{
	struct mount_attr a = {.attr_set = MOUNT_ATTR_RDONLY |
					   MOUNT_ATTR_NOSUID |
					   MOUNT_ATTR_NODEV};
	int tree, r = 0;

	/* Each is a mount of the run's: at most MOUNTPLAN_LINKS_MAX. */
	if (++w->bound > MOUNTPLAN_LINKS_MAX)
		return -EMLINK;
	tree = (int)open_tree(fd, "",
			      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
				  AT_EMPTY_PATH | (below ? AT_RECURSIVE : 0));
	if (tree < 0)
		return -errno;
	if (mount_setattr(tree, "", AT_EMPTY_PATH, &a, sizeof(a)) < 0 ||
	    move_mount(tree, "", fd, "",
		       MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		r = -errno;
	close(tree);
	return r;
}

/* Pass 2: bind the name read-only when its file has a link the walk did
 * not count.  Decided on the opened file, so that a name swapped since
 * pass 1 is judged as it is now. */
static int links_protect(struct links_walk *w, int dfd, const char *name)
{
	struct stat st;
	int fd, r = 0;

	fd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto out;
	}
	if (S_ISREG(st.st_mode) &&
	    links_outside(w, st.st_dev, st.st_ino, st.st_nlink))
		r = links_bind_ro(w, fd, false);
out:
	close(fd);
	return r;
}

static int links_dir(struct links_walk *w, int dfd, unsigned depth);

/* Walk the directory name in dfd.  Returns 1 when name is not a
 * directory (any more), 0 when walked or out of the run's reach. */
static int links_subdir(struct links_walk *w, int dfd, const char *name,
			unsigned depth)
{
	int fd, r;

	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOTDIR || errno == ELOOP)
			return 1;
		if (errno == ENOENT)
			return 0;
		/* One the check cannot list but the run could search (mode
		 * --x, another owner) could hold a link it reaches by name:
		 * refuse.  One it cannot search is out of the run's reach. */
		if (errno == EACCES)
			return faccessat(dfd, name, X_OK,
					 AT_EACCESS | AT_SYMLINK_NOFOLLOW) == 0
				   ? -EACCES
				   : 0;
		return -errno;
	}
	r = links_dir(w, fd, depth + 1);
	close(fd);
	return r;
}

/* One name in a directory.  Adds to *dflags what it says of the
 * directory (LS_MULTI, LS_SINGLE, LS_MNTROOT). */
static int links_entry(struct links_walk *w, int dfd,
		       const struct links_dirent *d, unsigned depth,
		       bool writable, bool files, uint32_t *dflags)
{
	struct links_slot *s;
	struct statx sx;
	int r;

	/* A directory needs no statx: opening it with O_NOFOLLOW says
	 * whether it still is one. */
	if (d->d_type == DT_DIR &&
	    (r = links_subdir(w, dfd, d->d_name, depth)) <= 0)
		return r;
	/* Without d_type (some file systems), a name may still be a
	 * directory to walk. */
	if (!files && d->d_type != DT_UNKNOWN)
		return 0;
	if (statx(dfd, d->d_name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT,
		  STATX_TYPE | STATX_NLINK | STATX_INO, &sx) < 0)
		/* EACCES: the directory can be read but not searched, by
		 * the run either. */
		return errno == ENOENT || errno == EACCES ? 0 : -errno;
	if (S_ISDIR(sx.stx_mode)) {
		r = links_subdir(w, dfd, d->d_name, depth);
		return r < 0 ? r : 0;
	}
	if (!files || !S_ISREG(sx.stx_mode))
		return 0;
	if (sx.stx_nlink < 2) {
		*dflags |= LS_SINGLE;
		return 0;
	}
	*dflags |= LS_MULTI;
	if (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT)
		*dflags |= LS_MNTROOT;
	if (w->pass == 2) {
		/* Read-only with its directory, unless it is a mount of its
		 * own, which a directory's bind carries as it is. */
		if (w->ro[depth] &&
		    !(sx.stx_attributes & STATX_ATTR_MOUNT_ROOT))
			return 0;
		return links_protect(w, dfd, d->d_name);
	}
	s = links_slot(w, makedev(sx.stx_dev_major, sx.stx_dev_minor),
		       sx.stx_ino, true);
	if (!s)
		return -ENOMEM;
	if (!(s->flags & LS_FILE)) {
		s->flags |= LS_FILE;
		s->nlink = sx.stx_nlink;
		w->nshort++;
	}
	/* A name on a read-only mount is not the run's to write, and a
	 * name that is a mount point shows a file bound there from
	 * elsewhere: neither counts as a link inside.  Counting too few
	 * only binds more. */
	if (!writable || (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT))
		return 0;
	if (++s->count == s->nlink)
		w->nshort--;
	return 0;
}

/* The directory open at dfd: its inode and mount id in *sx, its device
 * in *dev, whether its mount is writable in *writable.  1 when the check
 * looks in it, 0 when it is not the run's to write (on a read-only mount,
 * but for the plan's own read-only tmpfs mounts: a rebuilt workspace
 * directory, mountplan_in.ro_binds, binds its entries back writable) or
 * is the plan's hidden directory (an empty one bound read-only), or
 * -errno. */
static int links_dir_stat(const struct links_walk *w, int dfd, struct statx *sx,
			  uint64_t *dev, bool *writable)
{
	struct statfs sfs;

	if (fstatfs(dfd, &sfs) < 0 ||
	    statx(dfd, "", AT_EMPTY_PATH, STATX_INO | STATX_MNT_ID, sx) < 0)
		return -errno;
	*writable = !(sfs.f_flags & ST_RDONLY);
	*dev = makedev(sx->stx_dev_major, sx->stx_dev_minor);
	if (!*writable && sfs.f_type != TMPFS_MAGIC)
		return 0;
	return *dev != w->hide_dev || sx->stx_ino != w->hide_ino;
}

/* What links_judge says of a directory to the one above it. */
enum {
	LJ_FILES = 1, /* a file in it or below */
	LJ_WHOLE = 2, /* bound read-only whole */
	LJ_DEEP = 4   /* pass 2 must walk below it even so: a multi-linked
		       * mount point, or a directory on another mount */
};

/* A file directly in a directory links_judge reads: to *nshort when it
 * has a link outside (links_outside: pass 2 would bind it), to *nown when
 * the run may write it (one link, or links all counted); multi when pass
 * 1 saw a multi-linked file there
 * (without, each is counted the run's unread).  A mount point is bound
 * on its own, and counts as neither. */
static int links_judge_file(struct links_walk *w, int dfd,
			    const struct links_dirent *d, uint64_t dev,
			    bool multi, uint32_t *nshort, uint32_t *nown)
{
	const char *name = d->d_name;
	struct links_slot *s;
	struct statx sx;

	if (!multi) {
		(*nown)++;
		return 0;
	}
	/* A multi-linked file pass 1 counted: its counts are the slot's.
	 * Decided on pass 1's link count, where the statx below reads it
	 * now: the judge only groups names into directories bound whole
	 * (more read-only, never less), and pass 2 judges each name it
	 * binds on its own as it is then (links_protect).  Pass 1's walk of
	 * the store-linked bench workspace took 37 ms and this pass 31 ms
	 * with a statx of each name (bench/README.md, note 3). */
	if (w->by_ino && (s = links_slot(w, dev, d->d_ino, false)) != NULL &&
	    (s->flags & LS_FILE)) {
		if (s->count < s->nlink)
			(*nshort)++;
		else
			(*nown)++;
		return 0;
	}
	if (statx(dfd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT,
		  STATX_TYPE | STATX_NLINK | STATX_INO, &sx) < 0)
		return errno == ENOENT || errno == EACCES ? 0 : -errno;
	if (!S_ISREG(sx.stx_mode))
		return 0;
	if (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT)
		return LJ_DEEP;
	if (links_outside(w, makedev(sx.stx_dev_major, sx.stx_dev_minor),
			  sx.stx_ino, sx.stx_nlink))
		(*nshort)++;
	else
		(*nown)++;
	return 0;
}

static int links_judge(struct links_walk *w, int dfd, unsigned depth, bool git);

/* A directory in a directory links_judge reads (at depth, on mount mnt):
 * judged, and counted to *nwhole or *nopen.  One on another mount is
 * judged on its own, and counts as open here: a bind carries it as it
 * is.  Returns LJ_DEEP or 0, or -errno. */
static int links_judge_dir(struct links_walk *w, int dfd, const char *name,
			   unsigned depth, bool git, uint64_t mnt,
			   uint32_t *nwhole, uint32_t *nopen)
{
	int fd, r;

	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP)
			return 0;
		/* Pass 2 decides (links_subdir). */
		(*nopen)++;
		return LJ_DEEP;
	}
	r = links_judge(w, fd, depth + 1, git || strcmp(name, ".git") == 0);
	close(fd);
	if (r < 0)
		return r;
	if (w->mnt[depth + 1] != mnt) {
		(*nopen)++;
		return LJ_DEEP;
	}
	if (r & LJ_WHOLE)
		(*nwhole)++;
	else if (r & LJ_FILES)
		(*nopen)++;
	return r & LJ_DEEP;
}

/*
 * Before pass 2 with directories bound whole (w->dirs), bottom-up: which
 * directories pass 2 binds read-only whole (sbxp_links_whole: a package's
 * directory that pnpm or uv linked from its store, and a directory of
 * such packages), marked LS_WHOLE on their (mount, directory) slot, and
 * below which pass 2 has nothing to do once the directory is read-only
 * (without LS_DEEP).  The files of one link an install left in or below
 * such a directory (a lock file, pnpm's .bin shims, Python's __pycache__,
 * uv's INSTALLER) are read-only with it: binding each back would cost a
 * mount, and a virtualenv whose Python compiled its modules has
 * thousands.  Only where pass 1 saw a multi-linked file below; never the
 * root of a walk, nor under .git (git adds objects to its directories),
 * nor without mount ids.  Sets w->mnt[depth].  Returns LJ_* or -errno.
 */
static int links_judge(struct links_walk *w, int dfd, unsigned depth, bool git)
{
	uint32_t f1, nshort = 0, nown = 0, nwhole = 0, nopen = 0;
	struct links_slot *s;
	struct statx sx;
	uint64_t dev, mnt;
	int deep = 0, r;
	bool whole, writable;
	char *buf;
	long n;

	w->mnt[depth] = 0;
	if ((r = links_dir_stat(w, dfd, &sx, &dev, &writable)) <= 0)
		return r;
	mnt = (sx.stx_mask & STATX_MNT_ID) ? sx.stx_mnt_id : 0;
	w->mnt[depth] = mnt;
	s = links_slot(w, dev, sx.stx_ino, false);
	/* Made since pass 1, or without mount ids, or .git: never bound
	 * whole, and walked by pass 2. */
	if (!s || !(s->flags & LS_DONE1) || !mnt || git)
		return LJ_FILES | LJ_DEEP;
	f1 = s->flags;
	if (!(f1 & LS_BMULTI))
		return f1 & LS_BFILES ? LJ_FILES : 0;
	s = links_slot(w, mnt | LINKS_MNT_KEY, sx.stx_ino, true);
	if (!s)
		return -ENOMEM;
	if (s->flags & LS_JUDGED)
		return LJ_FILES | (s->flags & LS_WHOLE ? LJ_WHOLE : 0) |
		       (s->flags & LS_DEEP ? LJ_DEEP : 0);
	s->flags |= LS_JUDGED;
	if (depth >= MOUNTPLAN_LINKS_DEPTH_MAX)
		return -ELOOP;
	if (f1 & LS_MNTROOT)
		deep = LJ_DEEP;
	buf = w->bufs + (size_t)depth * LINKS_DIRBUF;
	while ((n = syscall(SYS_getdents64, dfd, buf, LINKS_DIRBUF)) > 0) {
		for (long off = 0; off < n;) {
			const struct links_dirent *d =
			    (const struct links_dirent *)(void *)(buf + off);
			const char *name = d->d_name;
			unsigned char type = d->d_type;

			off += d->d_reclen;
			if (name[0] == '.' &&
			    (!name[1] || (name[1] == '.' && !name[2])))
				continue;
			if (type == DT_UNKNOWN) {
				if (statx(dfd, name,
					  AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT,
					  STATX_TYPE, &sx) < 0) {
					if (errno == ENOENT || errno == EACCES)
						continue;
					return -errno;
				}
				type = S_ISDIR(sx.stx_mode)   ? DT_DIR
				       : S_ISREG(sx.stx_mode) ? DT_REG
							      : DT_UNKNOWN;
			}
			if (type == DT_DIR)
				r = links_judge_dir(w, dfd, name, depth, git,
						    mnt, &nwhole, &nopen);
			else if (type == DT_REG)
				r = links_judge_file(w, dfd, d, dev,
						     f1 & LS_MULTI, &nshort,
						     &nown);
			else
				continue;
			if (r < 0)
				return r;
			deep |= r;
		}
	}
	if (n < 0)
		return -errno;
	whole = depth > 0 && sbxp_links_whole(nshort, nown, nwhole, nopen);
	/* The slot may have moved when the table grew. */
	s = links_slot(w, mnt | LINKS_MNT_KEY, sx.stx_ino, false);
	s->flags |= (whole ? LS_WHOLE : 0) | (deep ? LS_DEEP : 0);
	return LJ_FILES | (whole ? LJ_WHOLE : 0) | deep;
}

/* Pass 2, before a directory's names are walked: 1 to bind it read-only
 * whole, with all below it (links_judge's LS_WHOLE in jf, the flags of
 * its (mount, directory) slot).  Sets w->ro[depth] when its own names are
 * read-only so, by its bind or one above it on the same mount. */
static int links_mode(struct links_walk *w, unsigned depth, uint64_t mnt,
		      uint32_t jf)
{
	bool up =
	    depth > 0 && mnt && w->ro[depth - 1] && w->mnt[depth - 1] == mnt;

	w->mnt[depth] = mnt;
	w->ro[depth] = up || (jf & LS_WHOLE);
	return !up && (jf & LS_WHOLE);
}

static int links_dir(struct links_walk *w, int dfd, unsigned depth)
{
	struct statx sx;
	struct links_slot *s;
	uint64_t dev, key;
	uint32_t f1 = LS_SINGLE, dflags = 0, jf;
	bool writable, files = true;
	char *buf;
	long n;
	int r, freeze = 0;

	if ((r = links_dir_stat(w, dfd, &sx, &dev, &writable)) <= 0)
		return r;
	key = dev;
	if (w->pass == 2) {
		/* Only the files of a directory that held a multi-linked
		 * name in pass 1 need looking at again. */
		s = links_slot(w, dev, sx.stx_ino, false);
		files = !s || (s->flags & LS_MULTI);
		if (s)
			f1 = s->flags;
		if (sx.stx_mask & STATX_MNT_ID)
			key = sx.stx_mnt_id | LINKS_MNT_KEY;
	}
	/* Pass 1 walks each directory once, so that no name is counted
	 * twice (a nested writable path, a bind of it elsewhere in the
	 * tree); pass 2 once per mount that shows it. */
	s = links_slot(w, key, sx.stx_ino, true);
	if (!s)
		return -ENOMEM;
	if (s->flags & (w->pass == 1 ? LS_SEEN1 : LS_SEEN2)) {
		/* Pass 1: what is below it counts here too; all of it while
		 * it is still being walked. */
		if (w->pass == 1 && depth > 0)
			w->below[depth - 1] |=
			    s->flags & LS_DONE1
				? s->flags & (LS_BMULTI | LS_BFILES)
				: LS_BMULTI | LS_BFILES;
		return 0;
	}
	s->flags |= w->pass == 1 ? LS_SEEN1 : LS_SEEN2;
	jf = s->flags;
	if (depth >= MOUNTPLAN_LINKS_DEPTH_MAX)
		return -ELOOP;
	buf = w->bufs + (size_t)depth * LINKS_DIRBUF;
	w->below[depth] = 0;
	if (w->pass == 2) {
		/* Pass 1 saw no multi-linked file in it or below it:
		 * nothing to bind there. */
		if ((f1 & LS_DONE1) && !(f1 & LS_BMULTI))
			return 0;
		freeze = links_mode(
		    w, depth, (sx.stx_mask & STATX_MNT_ID) ? sx.stx_mnt_id : 0,
		    jf);
		/* Read-only with nothing below it to bind on its own (a
		 * mount point): its bind, if its own, carries all. */
		if (w->ro[depth] && (jf & LS_JUDGED) && !(jf & LS_DEEP))
			return freeze ? links_bind_ro(w, dfd, true) : 0;
		/* Its files are read-only with it, but for a mount point
		 * among them (links_entry). */
		if (w->ro[depth] && !(f1 & LS_MNTROOT))
			files = false;
	}
	while ((n = syscall(SYS_getdents64, dfd, buf, LINKS_DIRBUF)) > 0) {
		for (long off = 0; off < n;) {
			const struct links_dirent *d =
			    (const struct links_dirent *)(void *)(buf + off);
			const char *name = d->d_name;

			off += d->d_reclen;
			if (name[0] == '.' &&
			    (!name[1] || (name[1] == '.' && !name[2])))
				continue;
			if (++w->entries > MOUNTPLAN_LINKS_ENTRIES_MAX)
				return -E2BIG;
			if (d->d_type != DT_REG && d->d_type != DT_DIR &&
			    d->d_type != DT_UNKNOWN)
				continue;
			if ((r = links_entry(w, dfd, d, depth, writable, files,
					     &dflags)) < 0)
				return r;
		}
	}
	if (n < 0)
		return -errno;
	/* The slot may have moved when the table grew. */
	if (w->pass == 1) {
		uint32_t b = w->below[depth] |
			     (dflags & LS_MULTI ? LS_BMULTI | LS_BFILES : 0) |
			     (dflags & LS_SINGLE ? LS_BFILES : 0);

		links_slot(w, dev, sx.stx_ino, false)->flags |=
		    dflags | b | LS_DONE1;
		if (depth > 0)
			w->below[depth - 1] |= b;
	}
	/* After what is below it: its bind carries their mounts. */
	if (freeze) {
		return links_bind_ro(w, dfd, true);
	}
	return 0;
}

/* Pass 1 counts, then with w->dirs links_judge judges (LINKS_JUDGE),
 * then pass 2 binds. */
#define LINKS_JUDGE 0

static bool links_no_submounts(int root);

/*
 * Whether links_judge may find a file's slot by the d_ino getdents64
 * gives its name (w->by_ino): on a file system whose d_ino is the inode
 * statx reads (ext4, XFS, btrfs, tmpfs; not overlayfs nor FUSE), with
 * nothing mounted below root, so that no name is a mount point showing
 * another file than its d_ino.
 */
static bool links_by_ino(int root)
{
	struct statfs sfs;

	if (fstatfs(root, &sfs) < 0)
		return false;
	switch ((unsigned long)sfs.f_type) {
	case EXT4_SUPER_MAGIC:
	case XFS_SUPER_MAGIC:
	case BTRFS_SUPER_MAGIC:
	case TMPFS_MAGIC:
		break;
	default:
		return false;
	}
	return links_no_submounts(root);
}

static int links_pass(struct links_walk *w, const struct mountplan *p, int pass)
{
	int r = 0;

	w->pass = pass;
	w->entries = 0;
	for (size_t i = 0; i < p->nlink_roots && r == 0; i++) {
		int fd;

		fd = open(p->link_roots[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0) {
			/* A listed writable path that is a file is the
			 * operator's to share. */
			if (errno == ENOTDIR)
				continue;
			return -errno;
		}
		if (pass == LINKS_JUDGE)
			w->by_ino = links_by_ino(fd);
		r = pass == LINKS_JUDGE ? links_judge(w, fd, 0, false)
					: links_dir(w, fd, 0);
		close(fd);
	}
	return r < 0 ? r : 0;
}

/*
 * The check from spd's list (mountplan_in.link_names): the same two
 * passes, over the listed names instead of the tree.  The list holds
 * every name below the workspace whose file was multi-linked when spd
 * last looked, and only the names of multi-linked files count in the
 * walk, so judging exactly these names decides as the walk would.  What
 * the list cannot make worse: a name that has gone is not there to
 * write through; a name whose file now has one link needs nothing; a
 * file whose link count went up since spd looked is judged on st_nlink
 * as it is now.  Names are resolved beneath the workspace without
 * symlinks or mount crossings, and the list is canonical and strictly
 * ordered (proto/sandbox.c), so no name is counted twice.  A name on
 * another mount is skipped when that mount is read-only (the walk does
 * not count or walk those) and otherwise sends the check back to the full
 * walk (-EXDEV), as does any failure to judge a name.
 */
static int links_list_open(int root, const char *name)
{
	struct open_how how = {.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
			       .resolve =
				   RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
				   RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
	struct statfs sfs;
	long fd;

	fd = syscall(SYS_openat2, root, name, &how, sizeof(how));
	if (fd >= 0)
		return (int)fd;
	if (errno == ENOENT || errno == ENOTDIR)
		return -ENOENT;
	if (errno != EXDEV)
		return -errno;
	how.resolve &= ~(uint64_t)RESOLVE_NO_XDEV;
	fd = syscall(SYS_openat2, root, name, &how, sizeof(how));
	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR ? -ENOENT : -errno;
	if (fstatfs((int)fd, &sfs) < 0 || !(sfs.f_flags & ST_RDONLY) ||
	    sfs.f_type == TMPFS_MAGIC) {
		close((int)fd);
		return -EXDEV;
	}
	close((int)fd);
	return -ENOENT;
}

/* One listed name: counted (pass 1) or judged and bound (pass 2). */
static int links_list_one(struct links_walk *w, int root, const char *name,
			  int pass)
{
	struct links_slot *s;
	struct statx sx;
	int fd = links_list_open(root, name), r = 0;

	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return fd;
	if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW,
		  STATX_TYPE | STATX_NLINK | STATX_INO, &sx) < 0) {
		r = -errno;
		goto next;
	}
	if (!S_ISREG(sx.stx_mode) || sx.stx_nlink < 2)
		goto next;
	if (pass == 2) {
		/* Judged on the descriptor: the name cannot have
		 * been swapped since it was opened. */
		if (links_outside(w,
				  makedev(sx.stx_dev_major, sx.stx_dev_minor),
				  sx.stx_ino, sx.stx_nlink))
			r = links_bind_ro(w, fd, false);
		goto next;
	}
	s = links_slot(w, makedev(sx.stx_dev_major, sx.stx_dev_minor),
		       sx.stx_ino, true);
	if (!s) {
		r = -ENOMEM;
		goto next;
	}
	if (!(s->flags & LS_FILE)) {
		s->flags |= LS_FILE;
		s->nlink = sx.stx_nlink;
	}
	/* A name on the workspace's own mount (no crossing was
	 * allowed) that is not itself a mount point. */
	if (!(sx.stx_attributes & STATX_ATTR_MOUNT_ROOT))
		s->count++;
next:
	close(fd);
	return r;
}

static int links_list_pass(struct links_walk *w, int root,
			   const char *const *names, int pass)
{
	for (size_t i = 0; names[i]; i++) {
		int r = links_list_one(w, root, names[i], pass);

		if (r < 0)
			return r;
	}
	return 0;
}

/* Whether nothing is mounted below the mount open at root (listmount):
 * a directory of spd's list bound whole carries what is below it, and
 * the list's names on such a mount were left out with it.  Not without
 * listmount (before Linux 6.8): the walk then. */
static bool links_no_submounts(int root)
{
	struct links_mnt_id_req req = {.size = 24};
	struct statx sx;
	uint64_t child;

	if (statx(root, "", AT_EMPTY_PATH, STATX_MNT_ID_UNIQUE, &sx) < 0 ||
	    !(sx.stx_mask & STATX_MNT_ID_UNIQUE))
		return false;
	req.mnt_id = sx.stx_mnt_id;
	return syscall(SYS_listmount, &req, &child, 1, 0) == 0;
}

static size_t links_count(const char *const *v)
{
	size_t n = 0;

	while (v && v[n])
		n++;
	return n;
}

/*
 * Pass 2 over spd's list with directories: every listed name and
 * directory to bind read-only, in reverse strcmp order, so that what is
 * below a directory is bound before it (a name sorts after each
 * directory above it) and carried by its bind.
 */
static int links_list_dirs(struct links_walk *w, int root,
			   const struct mountplan *p)
{
	size_t nn = links_count(p->link_names);
	size_t nd = links_count(p->link_ro_dirs);

	while (nn || nd) {
		int fd, r;

		if (nn && (!nd || strcmp(p->link_names[nn - 1],
					 p->link_ro_dirs[nd - 1]) > 0)) {
			r = links_list_one(w, root, p->link_names[--nn], 2);
			if (r < 0)
				return r;
			continue;
		}
		fd = links_list_open(root, p->link_ro_dirs[--nd]);
		if (fd == -ENOENT)
			continue;
		if (fd < 0)
			return fd;
		r = links_bind_ro(w, fd, true);
		close(fd);
		if (r < 0)
			return r;
	}
	return 0;
}

/* The names pass 2 would bind one by one: those counted of each file with
 * a link outside (one for a file none of whose names counted). */
static size_t links_names_short(const struct links_walk *w)
{
	size_t n = 0;

	for (size_t i = 0; i < w->nslots; i++) {
		const struct links_slot *s = &w->slots[i];

		if ((s->flags & LS_FILE) && s->count < s->nlink)
			n += s->count ? s->count : 1;
	}
	return n;
}

/* 1 when the list decided, 0 when the full walk must, or -errno. */
static int links_from_list(struct links_walk *w, const struct mountplan *p)
{
	struct statfs sfs;
	int root = -1, r;

	if (p->nlink_roots == 1)
		root =
		    open(p->link_roots[0], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return 0;
	if (fstatfs(root, &sfs) < 0 || (sfs.f_flags & ST_RDONLY)) {
		r = 0;
		goto out;
	}
	r = links_list_pass(w, root, p->link_names, 1);
	/* Too many to bind one by one: the walk binds whole directories. */
	if (r == 0 && links_names_short(w) > LINKS_EACH_MAX)
		goto out;
	if (r == 0 && links_count(p->link_ro_dirs)) {
		if (!links_no_submounts(root))
			goto out;
		r = links_list_dirs(w, root, p);
	} else if (r == 0) {
		r = links_list_pass(w, root, p->link_names, 2);
	}
	r = r == 0 ? 1 : r == -EMLINK || r == -ENOMEM ? r : 0;
out:
	close(root);
	return r;
}

#define LINKS_BUFS ((size_t)MOUNTPLAN_LINKS_DEPTH_MAX * LINKS_DIRBUF)

/* The walk's memory, kept between runs: a page the walk touched once is
 * not faulted in again (each fault is dear on a virtual machine). */
struct mountplan_scratch {
	char *bufs;
	struct links_slot *slots; /* LINKS_SLOTS_MIN of them */
};

struct mountplan_scratch *mountplan_scratch_new(void)
{
	struct mountplan_scratch *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->bufs = links_map(LINKS_BUFS);
	s->slots = links_map(LINKS_SLOTS_MIN * sizeof(*s->slots));
	if (!s->bufs || !s->slots) {
		mountplan_scratch_free(s);
		return NULL;
	}
	return s;
}

void mountplan_scratch_free(struct mountplan_scratch *s)
{
	if (!s)
		return;
	if (s->bufs)
		munmap(s->bufs, LINKS_BUFS);
	if (s->slots)
		munmap(s->slots, LINKS_SLOTS_MIN * sizeof(*s->slots));
	free(s);
}

int links_check(const struct mountplan *p, const char *hide_src,
		struct mountplan_scratch *scratch)
{
	struct links_walk w = {.nslots = LINKS_SLOTS_MIN};
	struct stat st;
	int r;

	if (p->nlink_roots == 0)
		return 0;
	if (stat(hide_src, &st) < 0)
		return -errno;
	w.hide_dev = st.st_dev;
	w.hide_ino = st.st_ino;
	if (scratch) {
		w.bufs = scratch->bufs;
		w.slots = w.fixed = scratch->slots;
		memset(w.slots, 0, LINKS_SLOTS_MIN * sizeof(*w.slots));
	} else {
		w.bufs = links_map(LINKS_BUFS);
		w.slots = links_map(w.nslots * sizeof(*w.slots));
	}
	if (!w.bufs || !w.slots) {
		r = -ENOMEM;
		goto out;
	}
	r = p->link_names ? links_from_list(&w, p) : 0;
	if (r == 0 && p->links_list_only) {
		r = -EAGAIN;
	} else if (r == 0) {
		/* Counts from a list that could not decide are not the
		 * walk's: start again from an empty table. */
		if (w.nused) {
			if (w.slots != w.fixed)
				munmap(w.slots, w.nslots * sizeof(*w.slots));
			w.slots =
			    w.fixed
				? w.fixed
				: links_map(LINKS_SLOTS_MIN * sizeof(*w.slots));
			w.nslots = LINKS_SLOTS_MIN;
			w.nused = 0;
			w.bound = 0;
			if (!w.slots) {
				r = -ENOMEM;
				goto out;
			}
			memset(w.slots, 0, LINKS_SLOTS_MIN * sizeof(*w.slots));
		}
		/* Each pass a step of the trace (bench/README.md, note 3:
		 * what a first run spends past its walk). */
		r = links_pass(&w, p, 1);
		spawn_step("links.pass1");
		w.dirs = r == 0 && links_names_short(&w) > LINKS_EACH_MAX;
		if (r == 0 && w.dirs) {
			r = links_pass(&w, p, LINKS_JUDGE);
			/* Which way it found files' counts (links_by_ino). */
			spawn_step(w.by_ino ? "links.judge_ino"
					    : "links.judge");
		}
		if (r == 0 && w.nshort) {
			r = links_pass(&w, p, 2);
			spawn_step("links.pass2");
		}
	} else if (r == 1) {
		r = 0;
	}
out:
	if (w.bufs && !scratch)
		munmap(w.bufs, LINKS_BUFS);
	if (w.slots && w.slots != w.fixed)
		munmap(w.slots, w.nslots * sizeof(*w.slots));
	return r;
}

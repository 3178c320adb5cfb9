/*
 * The workspaces' hard-link lists, kept by inotify (linkwatch.h).  A walk
 * runs on the thread pool and builds a state of its own (its inotify
 * instance, the watched entries, the list); the loop only installs a
 * finished state and reads its queue when a run asks for the list.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/util.h"
#include "daemon/pool.h"
#include "daemon/session/linkwatch.h"
#include "daemon/session/linkwatch_priv.h"
#include "proto/sandbox.h"

/*
 * A directory's watch: a name made in it or moved in or out of it, and
 * the directory itself going.  A file's: its attributes (the link count:
 * link(2) and unlink(2) of any of its names, wherever that name is); its
 * going is the IN_IGNORED every watch ends with, and its own IN_MOVE_SELF
 * and IN_DELETE_SELF would add nothing but events to read (rm -rf of a
 * tree queues three per file instead of four: the queue holds 16,384 by
 * default, and overflowing it drops the state).  IN_ATTRIB on a
 * directory is left out: a directory's own link count is its
 * subdirectories'.
 */
#define LW_DIR_MASK                                                            \
	(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |                 \
	 IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)
/* The most names the change log keeps between two takes
 * (linkwatch_changes); past it the taker reads the whole workspace. */
#define LW_CHANGES_MAX 4096
#define LW_FILE_MASK IN_ATTRIB
/* Runs of a workspace whose walk failed (an unreadable file, too many
 * entries) before it is tried again: the walk costs as much as many full
 * walks in sandboxd, and what made it fail rarely goes away at once. */
#define LW_RETRY_RUNS 64
/* The walk's nice value (its own thread's): below any run's commands. */
#define LW_WALK_NICE 19
/* Walks at once: each holds one of libuv's four pool threads (journal
 * queries, the file methods, the proxy's lookups need the others). */
#define LW_WALKS_MAX 2
/* Events tried again at the queue's end (a directory above them renamed
 * later in the queue) before the state is dropped instead. */
#define LW_LATER_MAX 256
/* Entries that the events of one read of the queue may have walked on
 * spd's loop (new directories: about 3 us each), before the state is
 * dropped for a walk on the thread pool instead. */
#define LW_EVENT_WALK_MAX 4096
/* Bytes read from the inotify queue at a time (about 200 events). */
#define LW_EVBUF 4096
/* The queue of a watched workspace is read on spd's loop this long after
 * it became readable, without a run asking (bg_drain): what changed is
 * applied while the agent's model thinks, not on the next run's path,
 * and events that come together are read together. */
#define LW_BG_DELAY_MS 10
/* A background read that found this many events or more is in a burst
 * (rm -rf, an archive unpacked): the next is done as soon as the queue is
 * readable again, without the delay, so as to keep up with it. */
#define LW_BG_BURST 1024
/* Reads of the queue in the background that may end with a rename not
 * arrived or an event not applying yet (each LW_BG_DELAY_MS after the
 * last) before the state is dropped: a rename's two events are queued in
 * one system call, so one still half-read after them left the
 * workspace. */
#define LW_UNSETTLED_ROUNDS 5
/* A state dropped by a read in the background is walked again at once
 * when the workspace's last walk ended at least this many times its
 * length ago; otherwise once that time has come (lw_rewalk), or when a
 * run asks first.  Once, it is walked again at once all the same: a burst
 * (an install) drops the list while its files come, and again from the
 * events that came during the walk that followed; the burst is often
 * over by then, and a list put off for 4 times that walk's length was
 * missing for the runs just after it (bench/README.md, note 4).  The
 * walk after such a retry is put off by 4 times the length of both, so
 * something dropping the list again and again still keeps spd's walks
 * under a fifth of a CPU, at nice 19. */
#define LW_BG_REWALK_RATIO 4
/* Nodes of entries gone (deleted: their watches went) are kept, since
 * others may name them as their directory.  A read in the background
 * drops a state holding more of them than this beyond twice its live
 * ones, for a fresh walk: a workspace where a build makes and deletes
 * files all day keeps its memory bounded. */
#define LW_DEAD_SLACK 16384

#define lw_job_of(r)                                                           \
	((struct lw_job *)(void *)((char *)(r)-offsetof(struct lw_job, req)))

struct lw_job;
struct lw_bg;

struct lw_entry {
	char *workspace;
	struct lw_state *st;
	struct lw_bg *bg; /* reads st's queue in the background */
	struct lw_job *job;
	uint64_t used;
	unsigned since_failed; /* runs since a walk failed, or 0 */
	bool wanted;	       /* a walk was asked for while LW_WALKS_MAX ran */
	/* The next walk's change log starts here (CLOCK_REALTIME ns; 0:
	 * at the walk's start): linkwatch_prime_since. */
	uint64_t since_rt;
	/* The last walk's start, length and end (uv_now), for bg_drain;
	 * after a retry (below), the length is the retry's and the walk's
	 * before it. */
	uint64_t walk_start_ms, walk_ms, walk_end_ms;
	/* The next walk is bg_drain's one retry before its time
	 * (LW_BG_REWALK_RATIO); the last walk done was one. */
	bool retry_next, last_retry;
	/* When a walk put off by LW_BG_REWALK_RATIO is due (uv_now), or 0. */
	uint64_t rewalk_due_ms;
};

struct lw_job {
	uv_work_t req;
	struct linkwatch *lw; /* NULL when orphaned */
	struct lw_entry *e;
	struct lw_state *st;
	bool retry; /* bg_drain's retry before its time */
};

/*
 * An installed state's queue, read on the loop without a run asking: its
 * inotify descriptor polled, and read LW_BG_DELAY_MS after it became
 * readable.  Both handles are unreferenced (the watch does not keep a
 * loop running) and outlive the entry until their close callbacks.
 */
struct lw_bg {
	uv_poll_t poll;
	uv_timer_t timer;
	struct linkwatch *lw; /* NULL once stopped */
	struct lw_entry *e;
	int open;   /* handles not closed yet */
	bool burst; /* the last read found LW_BG_BURST events or more */
};

/* The timer of the walks put off (lw_entry's rewalk_due_ms): made at the
 * first, unreferenced, and like lw_bg's handles it outlives the
 * linkwatch until its close callback. */
struct lw_rewalk {
	uv_timer_t timer;
	struct linkwatch *lw; /* NULL once the linkwatch is freed */
};

struct linkwatch {
	uv_loop_t *loop;
	struct lw_rewalk *rewalk;
	struct lw_entry e[LINKWATCH_WORKSPACES_MAX];
	uint64_t tick;
	unsigned long walks;
	unsigned long events_bg, events_run;
};

static void later_free(struct lw_later *l);

static void state_free(struct lw_state *st)
{
	if (!st)
		return;
	later_free(&st->later);
	if (st->ifd >= 0)
		close(st->ifd);
	if (st->rootfd >= 0)
		close(st->rootfd);
	for (size_t i = 0; i < st->nnodes; i++)
		free(st->nodes[i].name);
	for (size_t i = 0; i < st->nnames; i++)
		free(st->names[i]);
	free(st->nodes);
	free(st->attrib);
	free(st->wd2node);
	free(st->names);
	free(st->meta);
	free(st->nhash);
	free(st->view);
	lw_view_clear(st);
	for (size_t i = 0; i < st->nchg; i++)
		free(st->chg[i]);
	free(st->chg);
	free(st->root);
	free(st);
}

static void changes_clear(struct lw_state *st);

/* How much earlier than the walk's start a change may be stamped: the
 * kernel stamps ctime from its coarse clock, a tick (4 ms at HZ 250)
 * behind. */
#define LW_CTIME_SLACK_NS (10 * 1000 * 1000)

static void changes_add(struct lw_state *st, const char *rel);

/*
 * The first walk's share of the change log: what changed after the walk
 * began and before it put a watch where an event would say so.  A file or
 * symlink stamped since is logged by name; a directory stamped since
 * (an entry made, removed or renamed in it) is logged as "DIR/" — its
 * entries that went are looked for, its new ones are logged by their own
 * stamps — except a directory moved in whole, which the caller reads
 * whole when it knows nothing below it.  The workspace itself is "/".
 */
static void walk_note(struct lw_state *st, const char *rel,
		      const struct stat *sb, bool dir)
{
	char buf[PATH_MAX];
	uint64_t c = (uint64_t)sb->st_ctim.tv_sec * 1000000000u +
		     (uint64_t)sb->st_ctim.tv_nsec;

	if (!st->walk_t0_rt || c + LW_CTIME_SLACK_NS <
				   (st->note_rt ? st->note_rt : st->walk_t0_rt))
		return;
	/* The workspace itself is "/". */
	if (dir && snprintf(buf, sizeof(buf), "%s/", rel) < (int)sizeof(buf))
		rel = buf;
	changes_add(st, rel);
}

static void changes_clear(struct lw_state *st)
{
	for (size_t i = 0; i < st->nchg; i++)
		free(st->chg[i]);
	st->nchg = 0;
	st->chg_lost = false;
}

/*
 * Log the name an event is about (the directory's entry, or the file
 * itself) for linkwatch_changes: whatever git would see change there.
 * The worktree's own .git is left out (git's objects and locks), and a
 * log past LW_CHANGES_MAX is dropped for "everything".
 */
static void changes_note(struct lw_state *st, uint32_t node,
			 const struct inotify_event *ev, bool named)
{
	char dir[PATH_MAX], rel[PATH_MAX];
	int n;

	if (st->chg_lost || !st->chg_taken)
		return;
	if (lw_node_path(st, node, dir, sizeof(dir)) < 0) {
		st->chg_lost = true;
		return;
	}
	if (named)
		n = dir[0] ? snprintf(rel, sizeof(rel), "%s/%s", dir, ev->name)
			   : snprintf(rel, sizeof(rel), "%s", ev->name);
	else
		n = snprintf(rel, sizeof(rel), "%s", dir);
	if (n < 0 || (size_t)n >= sizeof(rel)) {
		st->chg_lost = true;
		return;
	}
	changes_add(st, rel);
}

/* Append rel to the change log (the worktree's .git left out; past
 * LW_CHANGES_MAX the log is dropped for "everything"). */
static void changes_add(struct lw_state *st, const char *rel)
{
	if (st->chg_lost || strcmp(rel, ".git") == 0 ||
	    strcmp(rel, ".git/") == 0 || strncmp(rel, ".git/", 5) == 0 ||
	    !rel[0])
		return;
	if (st->nchg == st->capchg) {
		size_t cap = st->capchg ? 2 * st->capchg : 32;
		char **v;

		if (cap > LW_CHANGES_MAX ||
		    !(v = realloc(st->chg, cap * sizeof(*v)))) {
			changes_clear(st);
			st->chg_lost = true;
			return;
		}
		st->chg = v;
		st->capchg = cap;
	}
	if (!(st->chg[st->nchg] = strdup(rel))) {
		changes_clear(st);
		st->chg_lost = true;
		return;
	}
	st->nchg++;
}

static int walk_dir(struct lw_state *st, int dfd, uint32_t node,
		    const char *rel, unsigned depth);

/*
 * One name in the directory open at dfd (node dnode, at rel).  The watch
 * goes on before the name is looked at, so that a change after the look
 * is an event; a change between the two (the name swapped) is an event
 * on the directory, watched already.  With moved (IN_MOVED_TO), an entry
 * the watch knows already (its inode has a watch of ours) was renamed
 * inside the workspace: node_moved instead of a new node, and a directory
 * is not walked again.
 */
static int walk_entry(struct lw_state *st, int dfd, uint32_t dnode,
		      const char *rel, const char *name, unsigned char type,
		      unsigned depth, bool moved)
{
	char path[64 + NAME_MAX], sub[PATH_MAX];
	struct stat sb;
	int wd, fd, r;

	/* A directory arriving whole (npm install, a tree moved in) is
	 * walked on the thread pool from scratch rather than here, on
	 * spd's loop, past the event walk's share. */
	if (st->walk_left == 0)
		return -E2BIG;
	if (st->walk_left > 0)
		st->walk_left--;
	if ((r = lw_join(sub, sizeof(sub), rel, name)) < 0)
		return r;
	if (type == DT_UNKNOWN) {
		if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
			return errno == ENOENT ? 0 : -errno;
		type = S_ISDIR(sb.st_mode)   ? DT_DIR
		       : S_ISREG(sb.st_mode) ? DT_REG
					     : DT_LNK;
	}
	if (type == DT_DIR) {
		uint32_t me = (uint32_t)st->nnodes;

		fd = openat(dfd, name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			/* Gone or swapped for something else: an event on
			 * the directory says so. */
			return errno == ENOENT || errno == ENOTDIR ||
				       errno == ELOOP
				   ? 0
				   : -errno;
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		wd = inotify_add_watch(st->ifd, path, LW_DIR_MASK);
		if (wd < 0) {
			r = -errno;
			close(fd);
			return r;
		}
		if (fstat(fd, &sb) < 0) {
			r = -errno;
			close(fd);
			return r;
		}
		walk_note(st, sub, &sb, true);
		if ((size_t)wd < st->nwd && st->wd2node[wd] != LW_NONE) {
			me = st->wd2node[wd];
			if (moved) {
				close(fd);
				return lw_node_moved(st, me, dnode, name, &sb,
						     sub);
			}
		} else if ((r = lw_node_add(st, wd, dnode, name, true,
					    sb.st_ino)) < 0) {
			close(fd);
			return r;
		}
		r = walk_dir(st, fd, me, sub, depth + 1);
		close(fd);
		return r;
	}
	if (type != DT_REG) {
		if (type == DT_LNK && st->walk_t0_rt &&
		    fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0)
			walk_note(st, sub, &sb, false);
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d/%s", dfd, name);
	wd = inotify_add_watch(st->ifd, path, LW_FILE_MASK | IN_DONT_FOLLOW);
	if (wd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	walk_note(st, sub, &sb, false);
	if (!S_ISREG(sb.st_mode))
		return 0;
	if (moved && (size_t)wd < st->nwd && st->wd2node[wd] != LW_NONE)
		r = lw_node_moved(st, st->wd2node[wd], dnode, name, &sb, sub);
	else
		r = lw_node_add(st, wd, dnode, name, false, sb.st_ino);
	if (r < 0)
		return r;
	st->nodes[st->wd2node[wd]].nlink = (uint32_t)sb.st_nlink;
	if (sb.st_nlink < 2)
		return 0;
	struct lw_nmeta m = {sb.st_ino, (uint32_t)sb.st_nlink, dnode};
	return lw_names_add(st, sub, &m);
}

static int walk_dir(struct lw_state *st, int dfd, uint32_t node,
		    const char *rel, unsigned depth)
{
	struct dirent *d;
	DIR *dir;
	int fd, r = 0;

	if (depth >= LINKWATCH_DEPTH_MAX)
		return -ELOOP;
	if ((fd = dup(dfd)) < 0)
		return -errno;
	if (!(dir = fdopendir(fd))) {
		r = -errno;
		close(fd);
		return r;
	}
	/*
	 * errno is cleared before each readdir: walk_entry may leave it set
	 * (a name gone between readdir and its look, which it skips), and
	 * the end of the directory does not clear it.  A directory deleted
	 * while it is read (ENOENT) holds nothing any more: its deletion is
	 * an event on its parent.  Either used to fail the walk of a
	 * workspace where rm -rf was running, and the next 64 runs walked.
	 */
	while (r == 0) {
		errno = 0;
		if (!(d = readdir(dir))) {
			if (errno && errno != ENOENT)
				r = -errno;
			break;
		}
		if (d->d_name[0] == '.' &&
		    (!d->d_name[1] || (d->d_name[1] == '.' && !d->d_name[2])))
			continue;
		r = walk_entry(st, dfd, node, rel, d->d_name, d->d_type, depth,
			       false);
	}
	closedir(dir);
	return r;
}

/* The thread pool's part: a state from scratch. */
static void state_walk(struct lw_state *st)
{
	char path[32];
	int wd;

	struct timespec rt;

	/* From here on (or from when the walk was asked for, job_start) the
	 * change log holds every change: the walk's own stamps until it has
	 * a watch in place, the events after (walk_note,
	 * linkwatch_changes). */
	if (!st->walk_t0_mono) {
		clock_gettime(CLOCK_REALTIME, &rt);
		st->walk_t0_rt =
		    (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec;
		st->walk_t0_mono = uv_hrtime();
	}
	st->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (st->ifd < 0) {
		st->err = -errno;
		return;
	}
	st->rootfd = open(st->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (st->rootfd < 0) {
		st->err = -errno;
		return;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", st->rootfd);
	wd = inotify_add_watch(st->ifd, path, LW_DIR_MASK);
	if (wd < 0) {
		st->err = -errno;
		return;
	}
	if ((st->err = lw_node_add(st, wd, LW_NONE, "", true, 0)) < 0)
		return;
	st->walk_left = -1;
	st->err = walk_dir(st, st->rootfd, 0, "", 0);
	/* The workspace's own entries changed since the walk began: its
	 * log cannot say which went (walk_note). */
	{
		struct stat sb;

		if (fstat(st->rootfd, &sb) == 0)
			walk_note(st, "", &sb, true);
	}
	st->walk_t0_rt = 0;
}

/* An O_PATH or directory descriptor for rel below the workspace, with no
 * symlink on the way: a path the watch knows may have been swapped for
 * one since (an event that is still to be read). */
static int open_rel(const struct lw_state *st, const char *rel, int flags)
{
	struct open_how how = {
	    .flags = (uint64_t)flags | O_NOFOLLOW | O_CLOEXEC,
	    .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS};
	long fd;

	fd = syscall(SYS_openat2, st->rootfd, rel[0] ? rel : ".", &how,
		     sizeof(how));
	return fd < 0 ? -errno : (int)fd;
}

/*
 * The directory of node dnode, opened at the path the watch knows for it
 * (written to rel), and checked to be that directory.  -EAGAIN when the
 * path leads nowhere or elsewhere: a rename of a directory above it, read
 * later in the queue or still to be read, moved it (state_drain tries
 * the event again once the queue is read); -ENOENT when it or one above
 * it was deleted (and nothing can be in it any more); other errors as
 * they come.
 */
static int open_dir_node(const struct lw_state *st, uint32_t dnode, char *rel,
			 size_t size, int *ret_depth)
{
	struct stat sb;
	int fd, depth;

	for (uint32_t i = dnode; i != LW_NONE; i = st->nodes[i].parent)
		if (st->nodes[i].gone)
			return -ENOENT;
	if ((depth = lw_node_path(st, dnode, rel, size)) < 0)
		return depth;
	fd = open_rel(st, rel, O_RDONLY | O_DIRECTORY);
	if (fd == -ENOENT || fd == -ENOTDIR || fd == -ELOOP || fd == -EXDEV)
		return -EAGAIN;
	if (fd < 0)
		return fd;
	/* The workspace itself is rootfd: only the ones below can be
	 * another directory at the same path. */
	if (dnode != 0 &&
	    (fstat(fd, &sb) < 0 || sb.st_ino != st->nodes[dnode].ino)) {
		close(fd);
		return -EAGAIN;
	}
	*ret_depth = depth;
	return fd;
}

/*
 * The events waiting in l (state_settle) of a watch that went: each would
 * find no node for its watch when tried again, and needs nothing.  They
 * go now, so that a tree removed whole (rm -rf of a build's temporary
 * directories: the names made in each, read after it went, then its
 * IN_IGNORED) does not fill the list and drop the state.
 */
static void later_forget(struct lw_later *l, int wd)
{
	size_t kept = 0;

	for (size_t i = 0; i < l->n; i++) {
		if (l->v[i]->wd == wd) {
			free(l->v[i]);
			continue;
		}
		l->v[kept++] = l->v[i];
	}
	l->n = kept;
}

/*
 * A file's IN_ATTRIB, at the end of a read of the queue: its link count
 * read again at the name the watch knows, and that name listed when above
 * one (a link made from the host, outside, to a file of the workspace).
 * 0, -EAGAIN when its directory's path leads elsewhere now (a rename
 * above it not read yet), other errors when the state must go.
 */
static int attrib_apply(struct lw_state *st, uint32_t node)
{
	const struct lw_node *nd = &st->nodes[node];
	char rel[PATH_MAX], sub[PATH_MAX];
	struct stat sb;
	int depth, fd, r;

	fd = open_dir_node(st, nd->parent, rel, sizeof(rel), &depth);
	/* Its directory deleted: the name went with it. */
	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return fd;
	r = fstatat(fd, nd->name, &sb, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
	close(fd);
	/*
	 * The name the watch knows no longer leads to this file: gone,
	 * renamed, or another file renamed over it (an editor's save), each
	 * an event on its directory, read or to come.  Nothing to list: a
	 * file with more than one link had each of its names inside listed
	 * as it was seen (walk, IN_CREATE, IN_MOVED_TO) or as its count rose
	 * (here), and a name once listed stays listed; a name it is given
	 * later is such an event.
	 */
	if (r == -ENOENT || (r == 0 && sb.st_ino != nd->ino))
		return 0;
	if (r < 0)
		return r;
	if (!S_ISREG(sb.st_mode))
		return 0;
	if (st->nodes[node].nlink != sb.st_nlink) {
		st->nodes[node].nlink = (uint32_t)sb.st_nlink;
		st->view_stale = true;
	}
	if (sb.st_nlink < 2)
		return 0;
	if ((r = lw_join(sub, sizeof(sub), rel, nd->name)) < 0)
		return r;
	struct lw_nmeta m = {sb.st_ino, (uint32_t)sb.st_nlink, nd->parent};
	return lw_names_add(st, sub, &m);
}

/*
 * One event: 0 when the list still holds every multi-linked name, -EAGAIN
 * to try it again once the queue is read (a directory on its path was
 * renamed since), other errors when the state must go.
 */
static int state_event(struct lw_state *st, const struct inotify_event *ev)
{
	char rel[PATH_MAX];
	uint32_t node;
	int depth, fd, r;

	if (ev->mask & IN_Q_OVERFLOW)
		return -EOVERFLOW;
	if (ev->wd < 0 || (size_t)ev->wd >= st->nwd ||
	    (node = st->wd2node[ev->wd]) == LW_NONE)
		/* A watch already dropped: its inode went. */
		return 0;
	if (ev->len && st->nodes[node].dir &&
	    (ev->mask & (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |
			 IN_CLOSE_WRITE)))
		changes_note(st, node, ev, true);
	else if ((ev->mask & IN_ATTRIB) && !st->nodes[node].dir)
		changes_note(st, node, ev, false);
	/* Content written: nothing for the link list. */
	if (ev->mask & IN_CLOSE_WRITE)
		return 0;
	if (ev->mask & IN_IGNORED) {
		st->wd2node[ev->wd] = LW_NONE;
		st->nwatches--;
		st->nodes[node].attrib = false;
		st->nodes[node].dead = true;
		st->view_stale = true;
		later_forget(&st->later, ev->wd);
		return node == 0 ? -ENOENT : 0;
	}
	/*
	 * Renames.  The name leaving its directory needs nothing by itself
	 * (as a deletion: the names the file keeps inside are listed if it
	 * has more than one link, see IN_ATTRIB), but its arrival in a
	 * directory of the workspace (the same cookie) must be read before
	 * the list is used, or the state goes (state_settle).  The name
	 * arriving is a rename inside the workspace or an entry from
	 * outside (walk_entry, moved).  An entry's own IN_MOVE_SELF adds
	 * nothing to those two, but the workspace itself moving drops the
	 * state.
	 */
	if (ev->mask & IN_MOVED_FROM) {
		if (st->nfrom == LW_MOVED_MAX)
			return -ESTALE;
		st->from[st->nfrom++] = ev->cookie;
		return 0;
	}
	if (ev->mask & IN_MOVE_SELF)
		return node == 0 ? -ESTALE : 0;
	if (ev->mask & IN_DELETE_SELF) {
		st->nodes[node].gone = true;
		return node == 0 ? -ENOENT : 0;
	}
	/* A name gone takes one link and one name inside away together. */
	if (ev->mask & IN_DELETE)
		return 0;
	if ((ev->mask & (IN_CREATE | IN_MOVED_TO)) && st->nodes[node].dir &&
	    ev->len) {
		if (ev->mask & IN_MOVED_TO)
			for (size_t i = 0; i < st->nfrom; i++)
				if (st->from[i] == ev->cookie) {
					st->from[i] = st->from[--st->nfrom];
					break;
				}
		fd = open_dir_node(st, node, rel, sizeof(rel), &depth);
		/* Deleted since: what was made in it went with it. */
		if (fd == -ENOENT)
			return 0;
		if (fd < 0)
			return fd;
		r = walk_entry(st, fd, node, rel, ev->name, DT_UNKNOWN,
			       (unsigned)depth, ev->mask & IN_MOVED_TO);
		close(fd);
		return r;
	}
	/*
	 * A file's attributes (its link count): read once the read of the
	 * queue is over (attrib_apply), once per file however many came,
	 * and not at all for a file deleted by then (rm -rf: its IN_ATTRIB,
	 * then its IN_IGNORED).
	 */
	if ((ev->mask & IN_ATTRIB) && !st->nodes[node].dir) {
		if (st->nodes[node].attrib)
			return 0;
		if (st->nattrib == st->capattrib) {
			size_t cap = st->capattrib ? 2 * st->capattrib : 64;
			uint32_t *v = realloc(st->attrib, cap * sizeof(*v));

			if (!v)
				return -ENOMEM;
			st->attrib = v;
			st->capattrib = cap;
		}
		st->attrib[st->nattrib++] = node;
		st->nodes[node].attrib = true;
		return 0;
	}
	return -EINVAL;
}

static int later_add(struct lw_later *l, const struct inotify_event *ev)
{
	struct inotify_event *c, **v;
	size_t size = sizeof(*ev) + ev->len;

	if (l->n == LW_LATER_MAX)
		return -ESTALE;
	if (!(v = realloc(l->v, (l->n + 1) * sizeof(*v))))
		return -ENOMEM;
	l->v = v;
	if (!(c = malloc(size)))
		return -ENOMEM;
	memcpy(c, ev, size);
	l->v[l->n++] = c;
	return 0;
}

static void later_free(struct lw_later *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
}

/*
 * What the queue's end must leave settled before the list is used (final,
 * a run's read): every event deferred now applies (the renames above it
 * are all read), and every name that left a directory arrived in one:
 * otherwise it left the workspace, and what is done to it out there (a
 * link made to a file below it before it comes back) is beyond the
 * watch's paths, or it is still arriving.  A read in the background
 * keeps what is not settled yet for the next read, up to
 * LW_UNSETTLED_ROUNDS of them in a row.
 */
static int state_settle(struct lw_state *st, bool final)
{
	struct lw_later *l = &st->later;
	size_t kept = 0, i;
	int r = 0;

	/* The files' IN_ATTRIBs first (state_event), as events deferred to
	 * here: what waits (a rename above the file half-read) waits like
	 * them. */
	for (i = 0; i < st->nattrib && r == 0; i++) {
		uint32_t node = st->attrib[i];

		if (!st->nodes[node].attrib)
			continue;
		r = attrib_apply(st, node);
		if (r == -EAGAIN && !final) {
			st->attrib[kept++] = node;
			r = 0;
			continue;
		}
		st->nodes[node].attrib = false;
	}
	if (r < 0)
		return r == -EAGAIN ? -ESTALE : r;
	st->nattrib = kept;
	kept = 0;
	for (i = 0; i < l->n && r == 0; i++) {
		r = state_event(st, l->v[i]);
		if (r == -EAGAIN && !final) {
			l->v[kept++] = l->v[i];
			r = 0;
			continue;
		}
		free(l->v[i]);
	}
	/* After a failure, the events not tried yet go too (the state
	 * goes with them). */
	for (; i < l->n; i++)
		free(l->v[i]);
	l->n = kept;
	if (r < 0)
		return r == -EAGAIN ? -ESTALE : r;
	if (!l->n && !st->nfrom && !st->nattrib) {
		st->unsettled = 0;
		return !final && st->nnodes > 2 * st->nwatches + LW_DEAD_SLACK
			   ? -ESTALE
			   : 0;
	}
	if (final || ++st->unsettled >= LW_UNSETTLED_ROUNDS)
		return -ESTALE;
	return 0;
}

/* Read the queue until it is empty (final: for a run, see state_settle).
 * 0, or < 0 when the state must go; *ret_events: the events read. */
static int state_drain(struct lw_state *st, bool final,
		       unsigned long *ret_events)
{
	char buf[LW_EVBUF]
	    __attribute__((aligned(__alignof__(struct inotify_event))));
	int r = 0;

	st->walk_left = LW_EVENT_WALK_MAX;
	for (;;) {
		ssize_t n = read(st->ifd, buf, sizeof(buf));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = errno == EAGAIN ? state_settle(st, final) : -errno;
			break;
		}
		for (ssize_t off = 0; r == 0 && off < n;) {
			const struct inotify_event *ev =
			    (const struct inotify_event *)(void *)(buf + off);

			r = state_event(st, ev);
			if (r == -EAGAIN)
				r = later_add(&st->later, ev);
			off += (ssize_t)(sizeof(*ev) + ev->len);
			(*ret_events)++;
		}
		if (r < 0)
			break;
	}
	return r;
}

/*
 * The walk, on a thread of its own at LW_WALK_NICE.  The run that asked
 * for it does not wait for it (sandboxd walks for that run), and a walk
 * at the runs' priority took the other CPU of a small machine from them:
 * the first run in a workspace of 10,000 files here waited up to 10 ms
 * for a CPU after sandboxd's own walk, between its steps (bench/README.md,
 * "Sixth pass").  A pool thread cannot be lent at a lower priority: it
 * could not come back without CAP_SYS_NICE.  A nice value, not the idle
 * class: a loaded machine slows the walk but never stops it.
 */
static void *walk_thread(void *arg)
{
	(void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid),
			  LW_WALK_NICE);
	state_walk(arg);
	return NULL;
}

static void job_work(uv_work_t *req)
{
	struct lw_job *j = lw_job_of(req);
	pthread_t t;

	if (pthread_create(&t, NULL, walk_thread, j->st) != 0) {
		state_walk(j->st);
		return;
	}
	pthread_join(t, NULL);
}

static void walks_next(struct linkwatch *lw);
static void job_start(struct linkwatch *lw, struct lw_entry *e);

static void bg_closed(uv_handle_t *h)
{
	struct lw_bg *bg = h->data;

	if (--bg->open == 0)
		free(bg);
}

/*
 * A state's tables freed and its inotify instance closed on the thread
 * pool: the close of an instance with its watches took 6-18 ms here
 * (12-06, strace; the kernel's teardown of its marks), which the loop
 * would wait for at every run that drops one (eight sessions and the
 * operator's checkout in turn dropped one at each run).
 */
static void free_work(void *st)
{
	state_free(st);
}

static void state_free_off(uv_loop_t *loop, struct lw_state *st)
{
	if (st)
		pool_run(loop, free_work, NULL, st);
}

/* e's state goes, and its background reads with it. */
static void entry_drop(uv_loop_t *loop, struct lw_entry *e)
{
	struct lw_bg *bg = e->bg;

	if (bg) {
		e->bg = NULL;
		bg->lw = NULL;
		bg->e = NULL;
		uv_close((uv_handle_t *)&bg->poll, bg_closed);
		uv_close((uv_handle_t *)&bg->timer, bg_closed);
	}
	state_free_off(loop, e->st);
	e->st = NULL;
}

static void bg_readable(uv_poll_t *p, int status, int events);

static void rewalk_closed(uv_handle_t *h)
{
	free(h->data);
}

/* The walks put off that are due now start; the timer is set again for
 * the next. */
static void rewalk_fire(uv_timer_t *t)
{
	struct lw_rewalk *rw = t->data;
	struct linkwatch *lw = rw->lw;
	uint64_t now = uv_now(t->loop), next = 0;

	for (size_t i = 0; lw && i < ARRAY_SIZE(lw->e); i++) {
		struct lw_entry *e = &lw->e[i];

		if (!e->rewalk_due_ms)
			continue;
		/* A run started it first, or the entry went. */
		if (!e->workspace || e->st || e->job) {
			e->rewalk_due_ms = 0;
		} else if (e->rewalk_due_ms <= now) {
			e->rewalk_due_ms = 0;
			job_start(lw, e);
		} else if (!next || e->rewalk_due_ms < next) {
			next = e->rewalk_due_ms;
		}
	}
	if (next)
		uv_timer_start(t, rewalk_fire, next - now, 0);
}

/* e's walk once due (uv_now): the list comes back without a run having
 * to find it gone and pay sandboxd's walk.  Without memory for the
 * timer, a run starts it, as before. */
static void rewalk_later(struct linkwatch *lw, struct lw_entry *e, uint64_t due)
{
	struct lw_rewalk *rw = lw->rewalk;
	uint64_t now = uv_now(lw->loop);

	if (!rw) {
		if (!(rw = calloc(1, sizeof(*rw))) ||
		    uv_timer_init(lw->loop, &rw->timer) < 0) {
			free(rw);
			return;
		}
		rw->timer.data = rw;
		rw->lw = lw;
		uv_unref((uv_handle_t *)&rw->timer);
		lw->rewalk = rw;
	}
	if (e->rewalk_due_ms && e->rewalk_due_ms <= due)
		return;
	e->rewalk_due_ms = due;
	if (!uv_is_active((uv_handle_t *)&rw->timer) ||
	    uv_timer_get_due_in(&rw->timer) > due - now)
		uv_timer_start(&rw->timer, rewalk_fire, due - now, 0);
}

/*
 * The background read (LW_BG_DELAY_MS after the queue became readable):
 * the events are applied now, so that a run finds the queue empty, or
 * nearly.  A state that must go goes now, and its new walk starts at once
 * on the thread pool (LW_BG_REWALK_RATIO): the next run has a list again
 * rather than finding out.  What is not settled yet (a rename half-read)
 * is read again after the delay, whether or not more events come.
 */
static void bg_drain(uv_timer_t *t)
{
	struct lw_bg *bg = t->data;
	struct lw_entry *e = bg->e;
	struct linkwatch *lw = bg->lw;
	uint64_t now = uv_now(t->loop);
	unsigned long before;

	if (!e)
		return;
	before = lw->events_bg;
	if (state_drain(e->st, false, &lw->events_bg) < 0) {
		uint64_t due = e->walk_end_ms + LW_BG_REWALK_RATIO * e->walk_ms;

		entry_drop(t->loop, e);
		if (!e->job && (now >= due || !e->last_retry)) {
			e->retry_next = now < due;
			job_start(lw, e);
		} else if (!e->job) {
			rewalk_later(lw, e, due);
		}
		return;
	}
	bg->burst = lw->events_bg - before >= LW_BG_BURST;
	if (e->st->later.n || e->st->nfrom || e->st->nattrib)
		uv_timer_start(&bg->timer, bg_drain, LW_BG_DELAY_MS, 0);
	else if (!bg->burst && lw_view(e->st) < 0)
		/* The run's list made ahead (a pnpm project's plan); out of
		 * memory, the run tries again. */
		uv_timer_start(&bg->timer, bg_drain, LW_BG_DELAY_MS, 0);
	else if (uv_poll_start(&bg->poll, UV_READABLE, bg_readable) < 0)
		uv_timer_start(&bg->timer, bg_drain, LW_BG_DELAY_MS, 0);
}

static void bg_readable(uv_poll_t *p, int status, int events)
{
	struct lw_bg *bg = p->data;

	(void)events;
	uv_poll_stop(p);
	/* A poll that failed leaves the reads to the runs. */
	if (status == 0 && bg->e)
		uv_timer_start(&bg->timer, bg_drain,
			       bg->burst ? 0 : LW_BG_DELAY_MS, 0);
}

/* st becomes e's state, its queue read in the background (without
 * memory for that, by the runs alone). */
static void entry_install(struct linkwatch *lw, struct lw_entry *e,
			  struct lw_state *st)
{
	struct lw_bg *bg = calloc(1, sizeof(*bg));

	e->st = st;
	/* The change log holds every change from now on: the walk has a
	 * watch on every directory (what came before is the walk's, not
	 * the log's). */
	st->chg_taken = true;
	st->chg_since = st->note_mono	   ? st->note_mono
			: st->walk_t0_mono ? st->walk_t0_mono
					   : uv_hrtime();
	if (!bg)
		return;
	bg->timer.data = bg->poll.data = bg;
	if (uv_timer_init(lw->loop, &bg->timer) < 0) {
		free(bg);
		return;
	}
	bg->open = 1;
	uv_unref((uv_handle_t *)&bg->timer);
	if (uv_poll_init(lw->loop, &bg->poll, st->ifd) < 0) {
		uv_close((uv_handle_t *)&bg->timer, bg_closed);
		return;
	}
	bg->open = 2;
	uv_unref((uv_handle_t *)&bg->poll);
	bg->lw = lw;
	bg->e = e;
	e->bg = bg;
	if (uv_poll_start(&bg->poll, UV_READABLE, bg_readable) < 0)
		uv_timer_start(&bg->timer, bg_drain, LW_BG_DELAY_MS, 0);
}

static void job_done(uv_work_t *req, int status)
{
	struct lw_job *j = lw_job_of(req);

	if (j->lw && status == 0 && j->st->err == 0) {
		entry_install(j->lw, j->e, j->st);
		j->e->since_failed = 0;
		j->st = NULL;
	} else if (j->lw) {
		j->e->since_failed = 1;
	}
	if (j->lw) {
		uint64_t len;

		j->e->walk_end_ms = uv_now(j->lw->loop);
		len = j->e->walk_end_ms - j->e->walk_start_ms;
		j->e->walk_ms = j->retry ? j->e->walk_ms + len : len;
		j->e->last_retry = j->retry;
		j->e->job = NULL;
		walks_next(j->lw);
	}
	state_free_off(req->loop, j->st);
	free(j);
}

/* Watches every state of lw holds, so that a new walk leaves the
 * reserve to the operator's other programs. */
static size_t watches_held(const struct linkwatch *lw)
{
	size_t n = 0;

	for (size_t i = 0; i < ARRAY_SIZE(lw->e); i++)
		if (lw->e[i].st)
			n += lw->e[i].st->nwatches;
	return n;
}

static size_t watches_max(void)
{
	unsigned long v = 8192; /* the kernel's default on small machines */
	FILE *f = fopen("/proc/sys/fs/inotify/max_user_watches", "re");

	if (f) {
		if (fscanf(f, "%lu", &v) != 1)
			v = 8192;
		fclose(f);
	}
	return v;
}

static size_t walks_running(const struct linkwatch *lw)
{
	size_t n = 0;

	for (size_t i = 0; i < ARRAY_SIZE(lw->e); i++)
		n += lw->e[i].job != NULL;
	return n;
}

/* A walk of e, or, while LW_WALKS_MAX are running, e marked to be
 * walked when one of them ends (walks_next). */
static void job_start(struct linkwatch *lw, struct lw_entry *e)
{
	struct lw_job *j;
	size_t max, held;

	if (walks_running(lw) >= LW_WALKS_MAX) {
		e->wanted = true;
		return;
	}
	e->wanted = false;
	if (!(j = calloc(1, sizeof(*j))))
		return;
	max = watches_max();
	held = watches_held(lw);
	j->lw = lw;
	j->e = e;
	j->retry = e->retry_next;
	e->retry_next = false;
	j->st = calloc(1, sizeof(*j->st));
	if (!j->st || !(j->st->root = strdup(e->workspace))) {
		state_free(j->st);
		free(j);
		return;
	}
	j->st->ifd = j->st->rootfd = -1;
	/* The change log's start: when the walk is asked for, not when its
	 * thread gets a CPU (at nice 19, after a run that came meanwhile):
	 * what changes after this is stamped since, or seen (walk_note). */
	{
		struct timespec rt;

		clock_gettime(CLOCK_REALTIME, &rt);
		j->st->walk_t0_rt =
		    (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec;
		j->st->walk_t0_mono = uv_hrtime();
	}
	/* A log from earlier than the walk (linkwatch_prime_since): what
	 * was stamped since then, as that instant on the monotonic clock
	 * (one before the boot: the walk's own start). */
	if (e->since_rt && e->since_rt < j->st->walk_t0_rt &&
	    j->st->walk_t0_rt - e->since_rt < j->st->walk_t0_mono) {
		j->st->note_rt = e->since_rt;
		j->st->note_mono =
		    j->st->walk_t0_mono - (j->st->walk_t0_rt - e->since_rt);
	}
	e->since_rt = 0;
	j->st->budget = max > LINKWATCH_WATCHES_RESERVE + held
			    ? max - LINKWATCH_WATCHES_RESERVE - held
			    : 0;
	if (uv_queue_work(lw->loop, &j->req, job_work, job_done) < 0) {
		state_free(j->st);
		free(j);
		return;
	}
	e->job = j;
	e->walk_start_ms = uv_now(lw->loop);
	lw->walks++;
}

/* The walks asked for while LW_WALKS_MAX ran, as far as they may run. */
static void walks_next(struct linkwatch *lw)
{
	for (size_t i = 0; i < ARRAY_SIZE(lw->e); i++)
		if (lw->e[i].wanted && !lw->e[i].job && !lw->e[i].st)
			job_start(lw, &lw->e[i]);
}

static void entry_clear(uv_loop_t *loop, struct lw_entry *e)
{
	if (e->job) {
		e->job->lw = NULL;
		e->job->e = NULL;
	}
	entry_drop(loop, e);
	free(e->workspace);
	memset(e, 0, sizeof(*e));
}

int linkwatch_new(uv_loop_t *loop, struct linkwatch **ret)
{
	struct linkwatch *lw = calloc(1, sizeof(*lw));

	if (!lw)
		return -ENOMEM;
	lw->loop = loop;
	*ret = lw;
	return 0;
}

struct linkwatch *linkwatch_get(struct linkwatch **slot, uv_loop_t *loop)
{
	if (!*slot && loop)
		linkwatch_new(loop, slot);
	return *slot;
}

void linkwatch_free(struct linkwatch *lw)
{
	if (!lw)
		return;
	for (size_t i = 0; i < ARRAY_SIZE(lw->e); i++)
		entry_clear(lw->loop, &lw->e[i]);
	if (lw->rewalk) {
		lw->rewalk->lw = NULL;
		uv_close((uv_handle_t *)&lw->rewalk->timer, rewalk_closed);
	}
	free(lw);
}

unsigned long linkwatch_walks(const struct linkwatch *lw)
{
	return lw ? lw->walks : 0;
}

size_t linkwatch_watches(const struct linkwatch *lw)
{
	return lw ? watches_held(lw) : 0;
}

unsigned long linkwatch_events(const struct linkwatch *lw, bool run)
{
	return !lw ? 0 : run ? lw->events_run : lw->events_bg;
}

/* workspace's entry, or NULL. */
static const struct lw_entry *entry_find(const struct linkwatch *lw,
					 const char *workspace)
{
	for (size_t i = 0; lw && i < ARRAY_SIZE(lw->e); i++)
		if (lw->e[i].workspace &&
		    strcmp(lw->e[i].workspace, workspace) == 0)
			return &lw->e[i];
	return NULL;
}

bool linkwatch_put_off(const struct linkwatch *lw, const char *workspace)
{
	const struct lw_entry *e = entry_find(lw, workspace);

	return e && e->rewalk_due_ms != 0;
}

bool linkwatch_retried(const struct linkwatch *lw, const char *workspace)
{
	const struct lw_entry *e = entry_find(lw, workspace);

	return e && (e->job ? e->job->retry : e->last_retry);
}

bool linkwatch_walking(const struct linkwatch *lw, const char *workspace)
{
	const struct lw_entry *e = entry_find(lw, workspace);

	return e && e->job != NULL;
}

/* workspace's entry, made in place of the least recently used one
 * when there is none (NULL: out of memory). */
static struct lw_entry *entry_of(struct linkwatch *lw, const char *workspace)
{
	struct lw_entry *lru = &lw->e[0];

	for (size_t i = 0; i < ARRAY_SIZE(lw->e); i++) {
		if (lw->e[i].workspace &&
		    strcmp(lw->e[i].workspace, workspace) == 0)
			return &lw->e[i];
		if (!lw->e[i].workspace ||
		    (lru->workspace && lw->e[i].used < lru->used))
			lru = &lw->e[i];
	}
	entry_clear(lw->loop, lru);
	if (!(lru->workspace = strdup(workspace)))
		return NULL;
	return lru;
}

int linkwatch_names(struct linkwatch *lw, const char *workspace,
		    struct linkwatch_list *ret)
{
	struct lw_entry *e = entry_of(lw, workspace);

	if (!e)
		return 0;
	e->used = ++lw->tick;
	if (e->st) {
		if (state_drain(e->st, true, &lw->events_run) == 0 &&
		    lw_view(e->st) == 0) {
			ret->names = e->st->view;
			ret->ro_dirs = e->st->vro;
			return 1;
		}
		entry_drop(lw->loop, e);
	}
	if (e->job)
		return 0;
	if (e->since_failed && e->since_failed++ < LW_RETRY_RUNS)
		return 0;
	job_start(lw, e);
	return 0;
}

int linkwatch_changes(struct linkwatch *lw, const char *workspace, char ***ret,
		      uint64_t *ret_since)
{
	struct lw_entry *e = NULL;
	struct lw_state *st;
	char **v;

	for (size_t i = 0; lw && i < ARRAY_SIZE(lw->e); i++)
		if (lw->e[i].workspace &&
		    strcmp(lw->e[i].workspace, workspace) == 0)
			e = &lw->e[i];
	if (!e || !(st = e->st))
		return 0;
	if (state_drain(st, true, &lw->events_run) < 0) {
		entry_drop(lw->loop, e);
		return 0;
	}
	if (!st->chg_taken || st->chg_lost) {
		/* From now on the log holds every change. */
		changes_clear(st);
		st->chg_taken = true;
		st->chg_since = uv_hrtime();
		return 0;
	}
	v = calloc(st->nchg + 1, sizeof(*v));
	if (!v) {
		changes_clear(st);
		st->chg_since = uv_hrtime();
		return 0;
	}
	if (st->nchg)
		memcpy(v, st->chg, st->nchg * sizeof(*v));
	st->nchg = 0; /* the strings are the caller's now */
	*ret = v;
	*ret_since = st->chg_since;
	st->chg_since = uv_hrtime();
	return 1;
}

void linkwatch_prime(struct linkwatch *lw, const char *workspace)
{
	struct linkwatch_list l;

	(void)linkwatch_names(lw, workspace, &l);
}

void linkwatch_prime_since(struct linkwatch *lw, const char *workspace,
			   uint64_t since_rt)
{
	struct lw_entry *e = entry_of(lw, workspace);
	struct linkwatch_list l;

	/* Watched or being walked already: that log's start stands. */
	if (!e || e->st || e->job)
		return;
	e->since_rt = since_rt;
	(void)linkwatch_names(lw, workspace, &l);
	/* Not started (a failed walk's pause, no memory): the next walk's
	 * log starts at its own start. */
	if (!e->job)
		e->since_rt = 0;
}

/*
 * The file tools (fs.read, fs.write, fs.list, fs.stat, fs.mkdir, fs.delete,
 * fs.move), performed by spd itself on a workspace the agent also writes to
 * from inside its sandbox.
 *
 * The agent can change the tree under spd's feet at any moment, so no
 * check is ever made on a path string and then trusted for a later open:
 * every path is walked by the kernel from a directory descriptor of the
 * workspace with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS), and every change is then made with an *at() call
 * on the single last component relative to the descriptor of its parent.
 * A symlink anywhere in a path makes the call fail (-ELOOP), even one that
 * points inside the workspace: following none is simpler to get right than
 * following the harmless ones.
 *
 * What openat2 cannot stop: a hard link inside the workspace to a file
 * outside it is an ordinary directory entry, so fs_read and fs_stat see the
 * outside file's content.  fs_write never writes through it (it replaces
 * the entry with rename), but reading is possible.  Who can make such a link
 * is the sandbox's business: it must not let the agent see the outside file
 * in the first place (protected_hardlinks, Landlock), and spd never makes
 * one.
 *
 * Paths given to these functions are UTF-8, relative to the workspace root
 * (an absolute path under the root is accepted and made relative); see
 * fs_path_normalize.  Everything here is thread-safe for distinct calls on
 * the same struct fs_ws, which is immutable once set up.  The module has no
 * libuv or JSON in it; daemon/methods/m_fs.c wraps it as RPC methods.
 */
#ifndef SPD_DAEMON_FSOPS_H
#define SPD_DAEMON_FSOPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Longest path accepted, in bytes: the kernel's PATH_MAX, so that any path
 * the kernel could walk is accepted and anything longer is refused before
 * it costs memory. */
#define FS_PATH_MAX 4096
/* Longest single component, in bytes (NAME_MAX on every Linux
 * filesystem). */
#define FS_NAME_MAX 255
/* Largest file fs_read returns: source files are far smaller; a bigger one
 * is a build artefact or data the agent should look at with a command, and
 * holding it whole in spd's memory (and in a JSON reply) must stay cheap. */
#define FS_READ_MAX (8u * 1024 * 1024)
/* Largest content fs_write accepts, for the same reason.  Over RPC the
 * request frame (RPC_FRAME_MAX) is the tighter bound. */
#define FS_WRITE_MAX (8u * 1024 * 1024)
/* Most entries fs_list returns; the rest is reported as truncated.  A
 * listing is for a person or a model to read, not for walking a tree. */
#define FS_LIST_MAX 10000
/* Deepest directory nesting fs_delete recurses into: it bounds spd's stack,
 * and a tree deeper than this is an attack, not a project. */
#define FS_DELETE_DEPTH_MAX 128

/* A workspace: a directory descriptor plus the in-place ignore hook. */
struct fs_ws;

/*
 * Is relpath (normalized, relative to the workspace) ignored by git?
 * Called for every path a tool touches when set; data is the pointer given
 * to fs_ws_set_ignore.
 */
typedef bool (*fs_ignored_fn)(void *data, const char *relpath);

/*
 * Open the workspace rooted at root (an absolute path to a directory; the
 * operator's or the session's, so trusted).  Returns 0 and a new workspace
 * in *ret_ws, -EINVAL when root is not absolute, -ENOMEM, or -errno from
 * opening it.  Free with fs_ws_free.
 */
int fs_ws_open(const char *root, struct fs_ws **ret_ws);
/* Close and free a workspace; NULL is allowed. */
void fs_ws_free(struct fs_ws *ws);
/*
 * In-place mode: refuse (-SPD_EPERM) every path for which
 * is_ignored(data, relpath) is true, except that fs_read and fs_stat may
 * still read the ones matching one of the fnmatch(3) patterns in readable
 * (NULL-terminated, copied; NULL for none; matched with FNM_PATHNAME
 * against the relative path).  fs_list leaves ignored entries out.
 * is_ignored may be NULL to turn the hook off.  Returns 0 or -ENOMEM.
 * Call before sharing ws between threads.
 */
int fs_ws_set_ignore(struct fs_ws *ws, fs_ignored_fn is_ignored, void *data,
		     const char *const *readable);
/* The workspace's root as given to fs_ws_open (borrowed). */
const char *fs_ws_root(const struct fs_ws *ws);

/*
 * Check and normalize a path of len bytes: refuses NUL bytes (-EINVAL),
 * invalid UTF-8 (-SPD_EUTF8), more than FS_PATH_MAX bytes or a component
 * longer than FS_NAME_MAX (-ENAMETOOLONG), an absolute path outside the
 * workspace root and any ".." that climbs above it (-EXDEV).  "." and empty
 * components are dropped and ".." folded, lexically: that is exact because
 * no tool follows a symlink.  Returns 0 and in *ret_rel a new string
 * without leading or trailing '/', "" for the root itself.  ws may be NULL
 * when the path is relative; every absolute path is then -EXDEV.
 */
int fs_path_normalize(const struct fs_ws *ws, const char *path, size_t len,
		      char **ret_rel);

enum fs_type {
	FS_TYPE_FILE,
	FS_TYPE_DIR,
	FS_TYPE_SYMLINK,
	FS_TYPE_OTHER, /* FIFO, socket, device */
};

/* "file", "dir", "symlink" or "other". */
const char *fs_type_name(enum fs_type t);

struct fs_info {
	enum fs_type type;
	uint64_t size;
	mode_t mode;	  /* permission bits only (07777) */
	int64_t mtime_ns; /* nanoseconds since the epoch */
};

struct fs_entry {
	char *name;
	struct fs_info info;
};

struct fs_listing {
	struct fs_entry *entries; /* sorted by name (bytewise) */
	size_t n;
	bool truncated; /* more than FS_LIST_MAX entries */
	size_t skipped; /* names not valid UTF-8, or ignored in-place */
};

/*
 * Read the regular file path whole.  Returns 0 with a new buffer (NUL
 * terminated past *ret_len, which may contain NUL bytes) in *ret_data;
 * -SPD_ETOOBIG beyond FS_READ_MAX; -EINVAL for anything but a regular file
 * (-EISDIR for a directory); -ELOOP when the path crosses a symlink; -EXDEV
 * when it leaves the workspace; -SPD_EPERM when git-ignored in place and
 * not listed as readable; or another -errno.
 */
int fs_read(const struct fs_ws *ws, const char *path, char **ret_data,
	    size_t *ret_len);

/*
 * Replace (or create) the regular file path with len bytes of data,
 * atomically: the content goes to a new temporary file in the same
 * directory, is fsync'ed, and renamed over the target, so that a reader
 * sees the old file or the new one, never a part; a failure leaves the old
 * file as it was.  An existing file keeps its permission bits; a new one
 * gets 0644.  The rename replaces a directory entry and never writes
 * through it, so a symlink swapped in at the last moment is replaced, not
 * followed.  Returns 0; -SPD_ETOOBIG beyond FS_WRITE_MAX; -EISDIR when the
 * target is a directory; -ELOOP when it or a parent is a symlink; -EINVAL
 * for another non-regular file or the root; -EXDEV, -SPD_EPERM as fs_read;
 * -ENOENT when the parent does not exist; or another -errno.
 */
int fs_write(const struct fs_ws *ws, const char *path, const void *data,
	     size_t len);

/*
 * List the directory path ("" for the root): each entry's name and, from
 * lstat, its type and size (a symlink is reported as one, never followed).
 * Returns 0 and fills *ret (free with fs_listing_free), or -errno as
 * fs_read (-ENOTDIR for a non-directory).
 */
int fs_list(const struct fs_ws *ws, const char *path, struct fs_listing *ret);
/* Free a listing's contents; NULL and a zeroed listing are allowed. */
void fs_listing_free(struct fs_listing *l);

/*
 * Describe path without following a symlink in its last component (it is
 * reported as FS_TYPE_SYMLINK).  Returns 0 and fills *ret, or -errno as
 * fs_read.
 */
int fs_stat(const struct fs_ws *ws, const char *path, struct fs_info *ret);

/*
 * Make directory path (mode 0755 before the umask).  With parents, missing
 * parents are made too, one level at a time, each from the descriptor of
 * the level above, and an existing directory is not an error.  Returns 1
 * when the last directory was created, 0 when parents is set and it
 * already existed, or -EEXIST, -ELOOP, -EXDEV, -SPD_EPERM, -errno.
 */
int fs_mkdir(const struct fs_ws *ws, const char *path, bool parents);

/*
 * Remove path: a file, a symlink (the link, not its target) or an empty
 * directory; with recursive, a directory and everything in it, never
 * following a symlink and never crossing into another filesystem (-EXDEV),
 * at most FS_DELETE_DEPTH_MAX levels deep (-SPD_ETOOBIG).  The root cannot
 * be removed (-EBUSY).  In place, a tree holding an ignored file is refused
 * (-SPD_EPERM), possibly after removing part of it.  Returns the number of
 * entries removed (>= 1) or -errno (-ENOTEMPTY without recursive).
 */
int fs_delete(const struct fs_ws *ws, const char *path, bool recursive);

/*
 * Rename from to to (both in the workspace) with renameat2 from the
 * descriptors of both parents.  Without overwrite an existing to is
 * -EEXIST (RENAME_NOREPLACE, checked by the kernel, not before).  A symlink
 * is moved as the link itself.  The root cannot be moved (-EBUSY).  Returns
 * 0 or -errno as fs_read.
 */
int fs_move(const struct fs_ws *ws, const char *from, const char *to,
	    bool overwrite);

#endif

/*
 * What the two halves of the mount plan share (sandboxd/linux/mount.c
 * builds a plan in sandboxd, mount_apply.c applies it in the run's mount
 * namespace): where the plan is assembled, and the operations.  Private
 * to sandboxd/linux/mount*.c.
 */
#ifndef SPD_SANDBOXD_MOUNT_PRIV_H
#define SPD_SANDBOXD_MOUNT_PRIV_H

#include <stdbool.h>
#include <sys/types.h>

#include "mount.h"

/*
 * Where the plan is assembled, inside the child's own mount namespace:
 * a small tmpfs over /tmp becomes the root for a moment (bubblewrap does
 * the same), the host's root hangs below it at OLDROOT and the run's root
 * is built at NEWROOT, then pivoted into.  Nothing of this is visible on
 * the host: the namespace's mounts are made private first.
 */
#define MP_BASE "/tmp"
#define MP_OLDROOT "/oldroot"
#define MP_NEWROOT "/newroot"
/* Sources of the mounts that hide a file (mode 0) or a directory (mode 0,
 * empty) and of "empty files" (mode 0444), in the base tmpfs.  Each is
 * made a read-only, nosuid, nodev, noexec mount of itself first, so that
 * one bind from it, which copies those flags, covers a path: a tmpfs per
 * hidden directory cost a superblock made and destroyed each run. */
#define MP_HIDE_SRC "/hidden"
#define MP_HIDE_DIR_SRC "/hiddendir"
#define MP_EMPTY_SRC "/empty"

enum mp_kind {
	MP_TMPFS,      /* dst, data, flags */
	MP_BIND,       /* src -> dst read-write, nosuid, nodev */
	MP_BIND_IDMAP, /* src -> dst read-write through the idmap userns */
	MP_REBIND_RO,  /* dst onto itself, read-only, recursive */
	MP_HIDE_DIR,   /* the mode-0 empty directory, read-only, over dst */
	MP_HIDE_FILE,  /* the mode-0 empty file, read-only, over dst */
	MP_EMPTY_FILE, /* the readable empty file, read-only, over dst */
	MP_DEVICE,     /* create dst as a file, bind src onto it */
	MP_SYMLINK,    /* symlink src at dst */
	MP_MKDIR,      /* dst (in a tmpfs of ours) */
	MP_PROC,       /* proc for the pid namespace at dst */
	MP_SEAL_RO,    /* make the mount at dst read-only (not recursive) */
	MP_BIND_RO,    /* src -> dst read-only, recursive, nosuid, nodev */
	MP_BIND_SAFE,  /* src -> dst resolved without symlinks (openat2),
			  readonly or not, idmapped when userns_fd >= 0 */
};

struct mountplan_op {
	enum mp_kind kind;
	const char *src;
	const char *dst;
	const char *data;
	unsigned long flags;
	bool mkdir_target; /* create dst (and parents) if missing */
	bool touch_target; /* create dst as an empty file (parents as dirs) */
	bool optional;	   /* a missing dst is not an error */
	bool readonly;	   /* MP_BIND_IDMAP: read-only (an ancestor) */
	bool link_walk;	   /* a writable bind the hard-link check walks */
	int userns_fd;
};

/* mkdir -p: every missing component of path made with mode (0700 on the
 * host, 0755 in the child's new root).  Async-signal-safe.  Returns 0 or
 * -errno. */
int mp_mkdir_p(const char *path, mode_t mode);

/* An empty file at path (filemode, open flags oflags added), its missing
 * parents made with dirmode: on the host a credential path's stand-in
 * (0700, 0600, O_EXCL | O_NOFOLLOW: one already there is left alone), in
 * the child a file mount point in a tmpfs of the plan (0755, 0444, 0).
 * Async-signal-safe.  Returns 0 or -errno. */
int mp_touch_p(const char *path, mode_t dirmode, mode_t filemode, int oflags);

#endif

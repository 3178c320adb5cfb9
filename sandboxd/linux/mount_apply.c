/*
 * The run's side of the mount plan (sandboxd/linux/mount.h): applied in
 * the run's own mount namespace, before and after the pivot, from the
 * operations sandboxd built (mount.c), including the hard-link check of
 * the writable paths.  Async-signal-safe: this runs in the clone child.
 */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/openat2.h>
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
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "mount.h"
#include "mount_priv.h"
#include "sandboxd/linux/links.h"
#include "sandboxd/linux/steps.h"
#include "proto/sandbox.h"

/* Each kind's name in the step trace (steps.h). */
static const char *const mp_kind_step[] = {
    [MP_TMPFS] = "mnt.tmpfs",
    [MP_BIND] = "mnt.bind",
    [MP_BIND_IDMAP] = "mnt.bind_idmap",
    [MP_REBIND_RO] = "mnt.rebind_ro",
    [MP_HIDE_DIR] = "mnt.hide_dir",
    [MP_HIDE_FILE] = "mnt.hide_file",
    [MP_EMPTY_FILE] = "mnt.empty",
    [MP_DEVICE] = "mnt.device",
    [MP_SYMLINK] = "mnt.symlink",
    [MP_MKDIR] = "mnt.mkdir",
    [MP_PROC] = "mnt.proc",
    [MP_SEAL_RO] = "mnt.seal_ro",
    [MP_BIND_RO] = "mnt.bind_ro",
    [MP_BIND_SAFE] = "mnt.bind_safe",
};

/* ---- the child: async-signal-safe from here on ------------------------ */

/* An O_PATH descriptor for path, refusing any symlink on the way: the
 * workspace's contents belong to the run's code, which may have swapped
 * a directory for a symlink since the plan was built. */
static int open_nofollow(const char *path)
{
	struct open_how how = {.flags = O_PATH | O_CLOEXEC,
			       .resolve = RESOLVE_NO_SYMLINKS};
	long fd = syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));

	return fd < 0 ? -errno : (int)fd;
}

static int bind_safe(const struct mountplan_op *op)
{
	struct mount_attr a = {.attr_set =
				   MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
				   (op->readonly ? MOUNT_ATTR_RDONLY : 0)};
	unsigned int flags =
	    OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH;
	unsigned int aflags = AT_EMPTY_PATH;
	int sfd, tree = -1, tfd = -1, r = 0;

	/* Only a single mount can be idmapped; otherwise take submounts
	 * along, as a recursive bind would. */
	if (op->userns_fd >= 0) {
		a.attr_set |= MOUNT_ATTR_IDMAP;
		a.userns_fd = (uint64_t)op->userns_fd;
	} else {
		flags |= AT_RECURSIVE;
		aflags |= AT_RECURSIVE;
	}
	if ((sfd = open_nofollow(op->src)) < 0)
		return sfd;
	tree = (int)open_tree(sfd, "", flags);
	if (tree < 0 || mount_setattr(tree, "", aflags, &a, sizeof(a)) < 0) {
		r = -errno;
		goto out;
	}
	if ((tfd = open_nofollow(op->dst)) < 0) {
		r = tfd;
		goto out;
	}
	if (move_mount(tree, "", tfd, "",
		       MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		r = -errno;
out:
	if (tfd >= 0)
		close(tfd);
	if (tree >= 0)
		close(tree);
	close(sfd);
	return r;
}

static int set_attr(const char *path, unsigned int flags, uint64_t set,
		    int userns_fd)
{
	struct mount_attr a = {.attr_set = set};

	if (userns_fd >= 0)
		a.userns_fd = (uint64_t)userns_fd;
	if (mount_setattr(AT_FDCWD, path, flags, &a, sizeof(a)) < 0)
		return -errno;
	return 0;
}

static int apply_op(const struct mountplan_op *op)
{
	struct stat st;
	int fd, r;

	if (op->mkdir_target && stat(op->dst, &st) < 0 &&
	    (r = mp_mkdir_p(op->dst, 0755)) < 0)
		return r;
	if (op->touch_target && lstat(op->dst, &st) < 0 &&
	    (r = mp_touch_p(op->dst, 0755, 0444, 0)) < 0)
		return r;
	if (op->optional && op->kind != MP_SYMLINK && lstat(op->dst, &st) < 0)
		return 0;

	switch (op->kind) {
	case MP_TMPFS:
		if (mount("tmpfs", op->dst, "tmpfs", op->flags, op->data) < 0)
			return -errno;
		return 0;
	case MP_BIND:
		if (mount(op->src, op->dst, NULL, MS_BIND | MS_REC, NULL) < 0)
			return -errno;
		return set_attr(op->dst, AT_RECURSIVE,
				MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, -1);
	case MP_BIND_IDMAP:
		/* Only a detached copy of a mount can be idmapped (5.12). */
		fd = (int)open_tree(AT_FDCWD, op->src,
				    OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
		if (fd < 0)
			return -errno;
		r = 0;
		{
			struct mount_attr a = {
			    .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID |
					MOUNT_ATTR_NODEV |
					(op->readonly ? MOUNT_ATTR_RDONLY : 0),
			    .userns_fd = (uint64_t)op->userns_fd};

			if (mount_setattr(fd, "", AT_EMPTY_PATH, &a,
					  sizeof(a)) < 0 ||
			    move_mount(fd, "", AT_FDCWD, op->dst,
				       MOVE_MOUNT_F_EMPTY_PATH) < 0)
				r = -errno;
		}
		close(fd);
		return r;
	case MP_BIND_SAFE:
		return bind_safe(op);
	case MP_BIND_RO:
		if (mount(op->src, op->dst, NULL, MS_BIND | MS_REC, NULL) < 0)
			return -errno;
		return set_attr(op->dst, AT_RECURSIVE,
				MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
				    MOUNT_ATTR_NODEV,
				-1);
	case MP_REBIND_RO:
		if (mount(op->dst, op->dst, NULL, MS_BIND | MS_REC, NULL) < 0)
			return -errno;
		return set_attr(op->dst, AT_RECURSIVE,
				MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
				    MOUNT_ATTR_NODEV,
				-1);
	case MP_HIDE_DIR:
	case MP_HIDE_FILE:
	case MP_EMPTY_FILE:
		/* The sources are read-only mounts (mountplan_apply). */
		if (mount(op->kind == MP_HIDE_DIR    ? MP_HIDE_DIR_SRC
			  : op->kind == MP_HIDE_FILE ? MP_HIDE_SRC
						     : MP_EMPTY_SRC,
			  op->dst, NULL, MS_BIND, NULL) < 0)
			return -errno;
		return 0;
	case MP_DEVICE:
		fd = open(op->dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
		if (fd < 0)
			return -errno;
		close(fd);
		if (mount(op->src, op->dst, NULL, MS_BIND, NULL) < 0)
			return -errno;
		return set_attr(op->dst, 0,
				MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, -1);
	case MP_SYMLINK:
		if (symlink(op->src, op->dst) < 0 && errno != EEXIST)
			return -errno;
		return 0;
	case MP_MKDIR:
		if (mkdir(op->dst, 0755) < 0 && errno != EEXIST)
			return -errno;
		return 0;
	case MP_PROC:
		if (mount("proc", op->dst, "proc",
			  MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
			return -errno;
		return 0;
	case MP_SEAL_RO:
		return set_attr(op->dst, 0, MOUNT_ATTR_RDONLY, -1);
	}
	return -EINVAL;
}

static int touch(const char *path, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);

	if (fd < 0)
		return -errno;
	/* The umask may have taken bits away. */
	if (fchmod(fd, mode) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	close(fd);
	return 0;
}

static int apply_ops(const struct mountplan *p, size_t from, size_t n,
		     int *ret_step);

int mountplan_apply_head(const struct mountplan *p, int *ret_step)
{
	int r;

	*ret_step = -1;
	/* Nothing done here may propagate back to the host's mounts. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return -errno;
	spawn_step("mnt.private");
	if (mount("tmpfs", MP_BASE, "tmpfs", MS_NOSUID | MS_NODEV,
		  "mode=0755,size=64k") < 0)
		return -errno;
	if (chdir(MP_BASE) < 0 || mkdir("newroot", 0755) < 0 ||
	    mkdir("oldroot", 0755) < 0)
		return -errno;
	if ((r = touch("hidden", 0)) < 0 || (r = touch("empty", 0444)) < 0)
		return r;
	if (mkdir("hiddendir", 0) < 0 || chmod("hiddendir", 0) < 0)
		return -errno;
	if (syscall(SYS_pivot_root, ".", "oldroot") < 0 || chdir("/") < 0)
		return -errno;
	spawn_step("mnt.base");
	{
		static const char *const src[] = {MP_HIDE_SRC, MP_HIDE_DIR_SRC,
						  MP_EMPTY_SRC};

		for (size_t i = 0; i < ARRAY_SIZE(src); i++) {
			if (mount(src[i], src[i], NULL, MS_BIND, NULL) < 0)
				return -errno;
			if ((r = set_attr(
				 src[i], 0,
				 MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
				     MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
				 -1)) < 0)
				return r;
		}
	}
	spawn_step("mnt.sources");
	/* The system, read-only, without setuid binaries or devices. */
	if (mount(MP_OLDROOT, MP_NEWROOT, NULL, MS_BIND | MS_REC, NULL) < 0)
		return -errno;
	spawn_step("mnt.root");
	if ((r = set_attr(MP_NEWROOT, AT_RECURSIVE,
			  MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
			      MOUNT_ATTR_NODEV,
			  -1)) < 0)
		return r;
	spawn_step("mnt.root_ro");
	return apply_ops(p, 0, p->nfixed, ret_step);
}

/* Operations from to n of p, in order. */
static int apply_ops(const struct mountplan *p, size_t from, size_t n,
		     int *ret_step)
{
	for (size_t i = from; i < n; i++) {
		struct stat st;
		int r = apply_op(&p->ops[i]);

		/* An optional path that went away after apply_op looked (a
		 * socket another program just removed) has nothing left to
		 * cover; anything else fails the run. */
		if (r == -ENOENT && p->ops[i].optional &&
		    lstat(p->ops[i].dst, &st) < 0 && errno == ENOENT)
			r = 0;
		if (r < 0) {
			*ret_step = (int)i;
			return r;
		}
		spawn_step_idx(mp_kind_step[p->ops[i].kind], (int)i);
	}
	return 0;
}

int mountplan_apply_tail(const struct mountplan *p,
			 struct mountplan_scratch *scratch, int *ret_step)
{
	int r;

	*ret_step = -1;
	if ((r = apply_ops(p, p->nfixed, p->n, ret_step)) < 0)
		return r;
	/* After every bind, so that the walk sees the run's view: what the
	 * plan covers or binds read-only is not the run's to write. */
	if ((r = links_check(p, MP_HIDE_DIR_SRC, scratch)) < 0) {
		*ret_step = MOUNTPLAN_STEP_LINKS;
		return r;
	}
	spawn_step("mnt.links");
	/* Pivot into the new root with the old one stacked on top of it,
	 * then detach that: the host's tree is no longer reachable. */
	if (chdir(MP_NEWROOT) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
	    umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		return -errno;
	spawn_step("mnt.pivot");
	return 0;
}

int mountplan_apply(const struct mountplan *p,
		    struct mountplan_scratch *scratch, int *ret_step)
{
	int r = mountplan_apply_head(p, ret_step);

	return r < 0 ? r : mountplan_apply_tail(p, scratch, ret_step);
}

/*
 * What this kernel and host let sandboxd do, for `spctl doctor`,
 * daemon.status and the mode=required check.  Each probe that could change
 * the caller (a namespace, a filter, a mount) runs in a short-lived child;
 * the caller's state is never touched.
 *
 * Every missing layer gets one sentence saying why and what to do, written
 * for an operator reading `spctl doctor`, not for a kernel developer.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <linux/filter.h>
#include <linux/magic.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <linux/seccomp.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "sandboxd/linux/layers.h"

#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#endif
#define SBX_PROBE_LL_VERSION (1U << 0)

/* The Landlock ABI that has every right sandboxd uses (scopes, Linux
 * 6.12); below it the layer works with fewer walls. */
#define SBX_PROBE_LL_ABI_FULL 6

/* Room for a small sysctl value such as "0\n" or "15000\n". */
#define SBX_PROBE_SYSCTL_MAX 32

static void why(char *dst, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void why(char *dst, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(dst, SBX_WHY_MAX, fmt, ap);
	va_end(ap);
}

/* Read a sysctl as an integer: the value, or -1 when absent/unreadable. */
static long read_sysctl(const char *path)
{
	char buf[SBX_PROBE_SYSCTL_MAX];
	ssize_t n;
	long v;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	if (sscanf(buf, "%ld", &v) != 1)
		return -1;
	return v;
}

/* The Seccomp: field of /proc/self/status: 0 none, 1 strict, 2 filter. */
static int own_seccomp_mode(void)
{
	return prctl(PR_GET_SECCOMP, 0, 0, 0, 0);
}

/* Run fn in a child; its return value (0 or an errno) is the exit code.
 * Returns that code, or -1 if the child died otherwise. */
static int in_child(int (*fn)(void))
{
	int st;
	pid_t pid = fork();

	if (pid < 0)
		return errno;
	if (pid == 0)
		_exit(fn() & 0xff);
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return errno;
	if (!WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return errno;
	n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : (n < 0 ? errno : EIO);
}

/* ---- user namespaces ---------------------------------------------------- */

/*
 * Not only unshare(): under AppArmor's unprivileged-userns restriction
 * (Ubuntu 23.10 and later) unshare succeeds but the namespace's
 * capabilities are denied, so the child also maps itself and makes a
 * mount namespace, which needs CAP_SYS_ADMIN in the new one.
 */
static int userns_child(void)
{
	char map[64];
	uid_t uid = geteuid();
	gid_t gid = getegid();

	if (unshare(CLONE_NEWUSER) < 0)
		return errno;
	snprintf(map, sizeof(map), "0 %u 1", (unsigned)uid);
	if (write_file("/proc/self/uid_map", map))
		return EACCES;
	if (write_file("/proc/self/setgroups", "deny"))
		return EACCES;
	snprintf(map, sizeof(map), "0 %u 1", (unsigned)gid);
	if (write_file("/proc/self/gid_map", map))
		return EACCES;
	if (unshare(CLONE_NEWNS) < 0)
		return EACCES;
	return 0;
}

static void probe_userns(struct sbx_layers *l)
{
	int err = in_child(userns_child);

	l->userns = err == 0;
	if (l->userns)
		return;
	if (read_sysctl("/proc/sys/user/max_user_namespaces") == 0)
		why(l->userns_why,
		    "user.max_user_namespaces is 0: set it to a positive "
		    "value (sysctl -w user.max_user_namespaces=15000 and a "
		    "file in /etc/sysctl.d/).");
	else if (geteuid() != 0 &&
		 read_sysctl("/proc/sys/kernel/unprivileged_userns_clone") == 0)
		why(l->userns_why,
		    "kernel.unprivileged_userns_clone is 0: enable it "
		    "(sysctl -w kernel.unprivileged_userns_clone=1 and a file "
		    "in /etc/sysctl.d/), or run spd as root.");
	else if (geteuid() != 0 &&
		 read_sysctl("/proc/sys/kernel/"
			     "apparmor_restrict_unprivileged_userns") == 1)
		why(l->userns_why,
		    "AppArmor restricts unprivileged user namespaces "
		    "(kernel.apparmor_restrict_unprivileged_userns=1): install "
		    "an AppArmor profile for sandboxd that allows 'userns,', "
		    "or "
		    "set the sysctl to 0.");
	else if (err == ENOSPC || err == EUSERS)
		why(l->userns_why, "the limit of user namespaces is reached "
				   "(user.max_user_namespaces): raise it.");
	else if (own_seccomp_mode() == 2)
		why(l->userns_why,
		    "a seccomp filter around spd (a container's profile) "
		    "refuses user namespaces (%s): run spd with a profile that "
		    "allows them, e.g. docker run --security-opt "
		    "seccomp=unconfined.",
		    err > 0 ? strerror(err) : "killed");
	else
		why(l->userns_why,
		    "creating a user namespace failed (%s): check the "
		    "kernel's CONFIG_USER_NS and any LSM policy for spd.",
		    err > 0 ? strerror(err) : "killed");
}

/* ---- Landlock ------------------------------------------------------------ */

static void probe_landlock(struct sbx_layers *l)
{
	long abi = syscall(__NR_landlock_create_ruleset, NULL, 0,
			   SBX_PROBE_LL_VERSION);
	int err = errno;

	l->landlock_abi = abi > 0 ? (int)abi : 0;
	if (abi <= 0 && err == EOPNOTSUPP)
		why(l->landlock_why,
		    "Landlock is built into this kernel but not enabled: add "
		    "landlock to the lsm= boot parameter (e.g. "
		    "lsm=landlock,lockdown,yama,apparmor,bpf) and reboot.");
	else if (abi <= 0)
		why(l->landlock_why,
		    "this kernel has no Landlock (%s): use Linux 5.13 or "
		    "later built with CONFIG_SECURITY_LANDLOCK=y, booted with "
		    "landlock in lsm=.",
		    strerror(err));
	else if (abi < SBX_PROBE_LL_ABI_FULL)
		/* Present, so not a missing layer; the note says which
		 * walls this ABI lacks. */
		why(l->landlock_why,
		    "Landlock ABI %ld lacks%s%s%s%s: Linux 6.12 or later adds "
		    "them.",
		    abi, abi < 3 ? " truncate rights," : "",
		    abi < 4 ? " TCP rules," : "",
		    abi < 5 ? " device ioctl rights," : "",
		    " scoping of abstract sockets and signals");
}

/* ---- seccomp -------------------------------------------------------------- */

static int seccomp_child(void)
{
	struct sock_filter allow[] = {
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = 1, .filter = allow};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return errno;
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0)
		return errno;
	return 0;
}

static void probe_seccomp(struct sbx_layers *l)
{
	int err = in_child(seccomp_child);

	l->seccomp = err == 0;
	if (l->seccomp)
		return;
	if (err == EINVAL)
		why(l->seccomp_why,
		    "this kernel cannot load seccomp filters: use a kernel "
		    "built with CONFIG_SECCOMP_FILTER=y (every distribution "
		    "kernel is).");
	else
		why(l->seccomp_why,
		    "loading a seccomp filter failed (%s): check the policy "
		    "of the container or LSM spd runs under.",
		    err > 0 ? strerror(err) : "killed");
}

/* ---- cgroup v2 ------------------------------------------------------------ */

static void probe_cgroup2(struct sbx_layers *l)
{
	struct statfs sf;

	if (statfs("/sys/fs/cgroup", &sf) < 0) {
		why(l->cgroup2_why,
		    "/sys/fs/cgroup is not there (%s): mount cgroup2 on it "
		    "(mount -t cgroup2 none /sys/fs/cgroup).",
		    strerror(errno));
		return;
	}
	l->cgroup2 = sf.f_type == CGROUP2_SUPER_MAGIC;
	if (l->cgroup2)
		return;
	if (sf.f_type == TMPFS_MAGIC)
		why(l->cgroup2_why,
		    "this host uses cgroup v1 or the hybrid hierarchy: boot "
		    "with systemd.unified_cgroup_hierarchy=1 for cgroup v2.");
	else
		why(l->cgroup2_why,
		    "/sys/fs/cgroup is not a cgroup2 file system (type "
		    "0x%lx): mount cgroup2 there.",
		    (unsigned long)sf.f_type);
}

/* ---- TIOCSTI -------------------------------------------------------------- */

static void probe_tiocsti(struct sbx_layers *l)
{
	long v = read_sysctl("/proc/sys/dev/tty/legacy_tiocsti");

	l->tiocsti_disabled = v == 0;
	if (v == 0)
		return;
	/* An absent knob means a kernel before 6.2, where TIOCSTI always
	 * works: not "disabled". */
	if (v < 0)
		why(l->tiocsti_why,
		    "this kernel (before 6.2) cannot disable TIOCSTI; runs are "
		    "protected by the seccomp filter only: a newer kernel with "
		    "dev.tty.legacy_tiocsti=0 closes it for every process.");
	else
		why(l->tiocsti_why,
		    "dev.tty.legacy_tiocsti is 1; runs are protected by the "
		    "seccomp filter only: sysctl -w dev.tty.legacy_tiocsti=0 "
		    "closes it for every process.");
}

/* ---- idmapped mounts -------------------------------------------------------- */

/* A user namespace to map onto, held by a child that waits on a pipe.
 * Writes its descriptor to *ret_fd; returns 0 or an errno. */
static int idmap_userns(int *ret_fd)
{
	char path[64];
	int up[2], down[2], fd, err = 0;
	char c;
	pid_t pid;

	if (pipe2(up, O_CLOEXEC) < 0)
		return errno;
	if (pipe2(down, O_CLOEXEC) < 0) {
		err = errno;
		close(up[0]);
		close(up[1]);
		return err;
	}
	pid = fork();
	if (pid == 0) {
		/* Only the parent's ends: EOF on down ends this child. */
		close(up[0]);
		close(down[1]);
		if (unshare(CLONE_NEWUSER) < 0)
			_exit(1);
		(void)!write(up[1], "x", 1);
		(void)!read(down[0], &c, 1);
		_exit(0);
	}
	close(up[1]);
	close(down[0]);
	if (pid < 0 || read(up[0], &c, 1) != 1) {
		err = pid < 0 ? errno : EPERM;
		goto out;
	}
	/* Map the namespace's 0 onto nobody: any valid map will do. */
	snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
	err = write_file(path, "0 65534 1");
	if (!err) {
		snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)pid);
		err = write_file(path, "0 65534 1");
	}
	if (!err) {
		snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			err = errno;
		else
			*ret_fd = fd;
	}
out:
	close(up[0]);
	close(down[1]);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	return err;
}

static int idmap_child(void)
{
	struct mount_attr attr = {.attr_set = MOUNT_ATTR_IDMAP};
	int userns = -1, tree, err;

	/* A mount namespace of its own, so that nothing it does (the tree
	 * below is never attached anyway) can reach the host's. */
	if (unshare(CLONE_NEWNS) < 0)
		return errno;
	err = idmap_userns(&userns);
	if (err)
		return err;
	tree = (int)syscall(SYS_open_tree, AT_FDCWD, "/",
			    OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (tree < 0)
		return errno;
	attr.userns_fd = (uint64_t)userns;
	if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr,
		    sizeof(attr)) < 0)
		return errno;
	return 0;
}

static void probe_idmap(struct sbx_layers *l)
{
	int err;

	if (geteuid() != 0) {
		/* Runs of an unprivileged spd map the operator's own uid:
		 * the workspace keeps its owner without any idmapping. */
		why(l->idmap_why,
		    "not needed: spd runs unprivileged, so runs use the "
		    "operator's own uid.");
		return;
	}
	err = in_child(idmap_child);
	l->idmap_mounts = err == 0;
	if (l->idmap_mounts)
		return;
	if (err == ENOSYS)
		why(l->idmap_why,
		    "this kernel has no mount_setattr (Linux 5.12 or later "
		    "needed): runs as root cannot get a writable workspace "
		    "under the run's own uid; upgrade the kernel.");
	else
		why(l->idmap_why,
		    "the root file system cannot be idmapped (%s): use ext4, "
		    "xfs or btrfs (tmpfs from Linux 6.3) for workspaces, or "
		    "run spd unprivileged.",
		    err > 0 ? strerror(err) : "killed");
}

/* ---- pathname Unix sockets ------------------------------------------------ */

/* A /proc/net/unix line: 7 fixed fields (about 60 bytes) and a path of
 * at most sizeof(sun_path) = 108 bytes; longer lines are not sockets we
 * can name and are skipped whole. */
#define SBX_UNIX_LINE_MAX 256
#define SBX_SO_ACCEPTCON (1U << 16) /* __SO_ACCEPTCON: listening */
#define SBX_SS_UNCONNECTED 1
#define SBX_SOCK_STREAM 1
#define SBX_SOCK_DGRAM 2
#define SBX_SOCK_SEQPACKET 5

/* The same list from the text of /proc/net/unix, where sock_diag is
 * missing (a kernel without CONFIG_UNIX_DIAG). */
static int unix_sockets_proc(int (*cb)(const char *path, void *data),
			     void *data)
{
	char line[SBX_UNIX_LINE_MAX];
	bool partial = false;
	FILE *f;
	int r = 0;

	f = fopen("/proc/net/unix", "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned flags, type, st;
		unsigned long inode;
		size_t len = strlen(line);
		bool whole = len > 0 && line[len - 1] == '\n';
		struct stat sb;
		int off = 0;

		/* Skip the rest of an over-long line, and the line after a
		 * truncated one (it is that line's tail). */
		if (partial || !whole) {
			partial = !whole;
			continue;
		}
		line[len - 1] = '\0';
		if (sscanf(line, "%*s %*x %*x %x %x %x %lu %n", &flags, &type,
			   &st, &inode, &off) != 4 ||
		    off <= 0 || line[off] != '/')
			continue; /* header, unnamed, abstract or relative */
		if (type == SBX_SOCK_DGRAM ? st != SBX_SS_UNCONNECTED
					   : !((type == SBX_SOCK_STREAM ||
						type == SBX_SOCK_SEQPACKET) &&
					       (flags & SBX_SO_ACCEPTCON)))
			continue;
		/* The name as bound, possibly in another mount namespace or
		 * since unlinked: report it only if a socket is there now. */
		if (lstat(line + off, &sb) < 0 || !S_ISSOCK(sb.st_mode))
			continue;
		r = cb(line + off, data);
		if (r < 0)
			break;
	}
	if (r >= 0 && ferror(f))
		r = -EIO;
	fclose(f);
	return r < 0 ? r : 0;
}

/* sock_diag's states (the kernel's sk_state, TCP's names): a listening
 * stream or seqpacket socket, and an unconnected datagram one. */
#define SBX_TCP_CLOSE 7
#define SBX_TCP_LISTEN 10
/* A dump's buffer: the kernel fills at most a page or so per read. */
#define SBX_DIAG_BUF 32768

/* One socket of the dump: reports its name when a run could reach it.
 * Returns cb's error, else 0. */
static int unix_diag_one(const struct nlmsghdr *h,
			 int (*cb)(const char *path, void *data), void *data)
{
	const struct unix_diag_msg *m = NLMSG_DATA(h);
	int len = (int)h->nlmsg_len - NLMSG_LENGTH(sizeof(*m));
	char path[sizeof(((struct sockaddr_un *)0)->sun_path) + 1];
	struct stat sb;

	if (len < 0)
		return 0;
	if (m->udiag_type == SBX_SOCK_DGRAM ? m->udiag_state != SBX_TCP_CLOSE
					    : m->udiag_state != SBX_TCP_LISTEN)
		return 0;
	for (const struct rtattr *a = (const void *)(m + 1); RTA_OK(a, len);
	     a = RTA_NEXT(a, len)) {
		size_t n = RTA_PAYLOAD(a);

		if (a->rta_type != UNIX_DIAG_NAME || n == 0 ||
		    n >= sizeof(path))
			continue;
		memcpy(path, RTA_DATA(a), n);
		path[n] = '\0';
		/* The name ends at its first NUL (the kernel stores one
		 * after a path); abstract names start with one, and
		 * relative ones cannot be covered. */
		if (path[0] != '/')
			return 0;
		if (lstat(path, &sb) < 0 || !S_ISSOCK(sb.st_mode))
			return 0;
		return cb(path, data);
	}
	return 0;
}

/* The list from sock_diag: the kernel sends only the listening and
 * unconnected datagram sockets, binary, instead of a line of text for
 * every socket of the host.  Returns 1 when sock_diag cannot be used
 * (then nothing was reported), else as layer_unix_sockets. */
static int unix_sockets_diag(int (*cb)(const char *path, void *data),
			     void *data)
{
	struct {
		struct nlmsghdr h;
		struct unix_diag_req r;
	} req = {
	    .h = {.nlmsg_len = sizeof(req),
		  .nlmsg_type = SOCK_DIAG_BY_FAMILY,
		  .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP},
	    .r = {.sdiag_family = AF_UNIX,
		  .udiag_states =
		      (1u << SBX_TCP_LISTEN) | (1u << SBX_TCP_CLOSE),
		  .udiag_show = UDIAG_SHOW_NAME},
	};
	struct sockaddr_nl nl = {.nl_family = AF_NETLINK};
	static char buf[SBX_DIAG_BUF] __attribute__((aligned(8)));
	bool first = true;
	int s, r = 0;

	s = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (s < 0)
		return 1;
	if (sendto(s, &req, sizeof(req), 0, (struct sockaddr *)&nl,
		   sizeof(nl)) != (ssize_t)sizeof(req)) {
		close(s);
		return 1;
	}
	for (;;) {
		ssize_t n = recv(s, buf, sizeof(buf), 0);
		int len = (int)n;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r = first ? 1 : n < 0 ? -errno : -EIO;
			break;
		}
		for (const struct nlmsghdr *h = (const void *)buf;
		     NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
			if (h->nlmsg_type == NLMSG_DONE)
				goto out;
			/* An error before any socket: no unix_diag here. */
			if (h->nlmsg_type == NLMSG_ERROR) {
				r = first ? 1 : -EIO;
				goto out;
			}
			first = false;
			if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY &&
			    (r = unix_diag_one(h, cb, data)) < 0)
				goto out;
		}
	}
out:
	close(s);
	return r;
}

int layer_unix_sockets(int (*cb)(const char *path, void *data), void *data)
{
	int r;

	if (!cb)
		return -EINVAL;
	r = unix_sockets_diag(cb, data);
	return r == 1 ? unix_sockets_proc(cb, data) : r;
}

int layer_probe_layers(struct sbx_layers *ret)
{
	struct sbx_layers l;

	if (!ret)
		return -EINVAL;
	memset(&l, 0, sizeof(l));
	probe_userns(&l);
	probe_landlock(&l);
	probe_seccomp(&l);
	probe_cgroup2(&l);
	probe_tiocsti(&l);
	probe_idmap(&l);
	*ret = l;
	return 0;
}

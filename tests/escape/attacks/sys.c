/* sys: system calls that widen the kernel's attack surface, each tried in a
 * child of its own so that a kill (SIGSYS) is reported rather than fatal.
 * Run as "sys" for all of them, or "sys NAME..." for some. MOUNTDIR in the
 * environment names an empty directory to mount on (default ./mnt). */
#include "common.h"
#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/mount.h>
#include <linux/perf_event.h>
#include <linux/sched.h>
#include <linux/userfaultfd.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#ifndef __NR_open_tree_attr
#define __NR_open_tree_attr 467
#endif

static const char *mntdir(void)
{
	const char *d = getenv("MOUNTDIR");

	return d ? d : "mnt";
}

/* Each returns >= 0 when the call worked, -errno when refused. */
static long t_unshare_user(void)
{
	return unshare(CLONE_NEWUSER) ? -errno : 0;
}
static long t_unshare_ns(void)
{
	return unshare(CLONE_NEWNS) ? -errno : 0;
}
static long t_unshare_net(void)
{
	return unshare(CLONE_NEWNET) ? -errno : 0;
}
static long t_unshare_pid(void)
{
	return unshare(CLONE_NEWPID) ? -errno : 0;
}
static long t_unshare_time(void)
{
	return unshare(0x80 /* CLONE_NEWTIME */) ? -errno : 0;
}
static long t_setns(void)
{
	int fd = open("/proc/self/ns/mnt", O_RDONLY);

	if (fd < 0)
		return -errno;
	return setns(fd, 0) ? -errno : 0;
}

static long t_clone_newuser(void)
{
	long r = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);

	if (r == 0)
		_exit(0);
	if (r < 0)
		return -errno;
	waitpid(r, NULL, 0);
	return 0;
}

static long t_clone3(unsigned long long flags)
{
	struct clone_args ca = {.flags = flags, .exit_signal = SIGCHLD};
	long r = syscall(SYS_clone3, &ca, sizeof(ca));

	if (r == 0)
		_exit(0);
	if (r < 0)
		return -errno;
	waitpid(r, NULL, 0);
	return 0;
}
static long t_clone3_newuser(void)
{
	return t_clone3(CLONE_NEWUSER);
}
static long t_clone3_newns(void)
{
	return t_clone3(CLONE_NEWNS);
}

static long t_mount(void)
{
	return mount("escape", mntdir(), "tmpfs", 0, "size=1m") ? -errno : 0;
}
static long t_mount_bind(void)
{
	return mount("/", mntdir(), NULL, MS_BIND | MS_REC, NULL) ? -errno : 0;
}
static long t_remount_rw(void)
{
	return mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND, NULL) ? -errno : 0;
}
static long t_umount(void)
{
	return umount2("/proc", MNT_DETACH) ? -errno : 0;
}
static long t_pivot_root(void)
{
	return syscall(SYS_pivot_root, ".", ".") ? -errno : 0;
}
static long t_chroot(void)
{
	return chroot(".") ? -errno : 0;
}
static long t_fsopen(void)
{
	long fd = syscall(SYS_fsopen, "tmpfs", 0);

	return fd < 0 ? -errno : fd;
}
static long t_fspick(void)
{
	long fd = syscall(SYS_fspick, AT_FDCWD, "/", 0);

	return fd < 0 ? -errno : fd;
}
static long t_open_tree(void)
{
	long fd = syscall(SYS_open_tree, AT_FDCWD, "/", OPEN_TREE_CLONE);

	return fd < 0 ? -errno : fd;
}
static long t_open_tree_attr(void)
{
	long fd = syscall(__NR_open_tree_attr, AT_FDCWD, "/", OPEN_TREE_CLONE,
			  NULL, 0);

	return fd < 0 ? -errno : fd;
}
static long t_move_mount(void)
{
	long fd = syscall(SYS_open_tree, AT_FDCWD, "/proc", OPEN_TREE_CLONE);
	long r;

	/* With open_tree refused, try the path form so move_mount itself is
	 * what gets tested. */
	if (fd >= 0)
		r = syscall(SYS_move_mount, fd, "", AT_FDCWD, mntdir(),
			    MOVE_MOUNT_F_EMPTY_PATH);
	else
		r = syscall(SYS_move_mount, AT_FDCWD, "/proc", AT_FDCWD,
			    mntdir(), 0);

	return r < 0 ? -errno : 0;
}
static long t_mount_setattr(void)
{
	struct mount_attr attr = {.attr_clr = MOUNT_ATTR_RDONLY};
	long r =
	    syscall(SYS_mount_setattr, AT_FDCWD, "/", 0, &attr, sizeof(attr));

	return r < 0 ? -errno : 0;
}
static long t_keyctl(void)
{
	long r = syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, "escape");

	return r < 0 ? -errno : r;
}
static long t_add_key(void)
{
	long r = syscall(SYS_add_key, "user", "escape", "x", 1,
			 KEY_SPEC_PROCESS_KEYRING);

	return r < 0 ? -errno : r;
}
static long t_request_key(void)
{
	long r = syscall(SYS_request_key, "user", "escape", NULL,
			 KEY_SPEC_PROCESS_KEYRING);

	/* ENOKEY means the call ran. */
	return r < 0 && errno != ENOKEY ? -errno : 0;
}
static long t_bpf(void)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.map_type = BPF_MAP_TYPE_ARRAY;
	attr.key_size = 4;
	attr.value_size = 4;
	attr.max_entries = 1;
	long r = syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof(attr));

	return r < 0 ? -errno : r;
}
static long t_bpf_prog(void)
{
	struct bpf_insn insn[2] = {
	    {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 0, .imm = 0},
	    {.code = BPF_JMP | BPF_EXIT},
	};
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
	attr.insns = (unsigned long)insn;
	attr.insn_cnt = 2;
	attr.license = (unsigned long)"GPL";
	long r = syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof(attr));

	return r < 0 ? -errno : r;
}
static long t_io_uring(void)
{
	struct io_uring_params p;

	memset(&p, 0, sizeof(p));
	long r = syscall(SYS_io_uring_setup, 4, &p);

	return r < 0 ? -errno : r;
}
static long t_userfaultfd(void)
{
	long r = syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);

	if (r < 0 && errno == EINVAL)
		r = syscall(SYS_userfaultfd, O_CLOEXEC);
	return r < 0 ? -errno : r;
}
static long t_perf(void)
{
	struct perf_event_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_TASK_CLOCK;
	attr.exclude_kernel = 1;
	attr.exclude_hv = 1;
	long r = syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);

	return r < 0 ? -errno : r;
}
static long t_open_by_handle(void)
{
	struct {
		struct file_handle fh;
		unsigned char buf[128];
	} h = {.fh.handle_bytes = 128};
	int mnt;

	if (syscall(SYS_name_to_handle_at, AT_FDCWD, "/etc/passwd", &h.fh, &mnt,
		    0) < 0)
		return -errno;
	long fd = syscall(SYS_open_by_handle_at, AT_FDCWD, &h.fh, O_RDONLY);

	return fd < 0 ? -errno : fd;
}
static long t_personality(void)
{
	long r = personality(ADDR_NO_RANDOMIZE);

	return r < 0 ? -errno : 0;
}
static long t_int80(void)
{
	long r;

	/* ia32 getpid (20) through the compat entry point. */
	__asm__ volatile("int $0x80" : "=a"(r) : "a"(20L) : "memory");
	return r < 0 ? r : 0;
}
static long t_int80_unshare(void)
{
	long r;

	/* ia32 unshare (310) with CLONE_NEWUSER: a filter that forgot the
	 * compat table would let it through. */
	__asm__ volatile("int $0x80"
			 : "=a"(r)
			 : "a"(310L), "b"((long)CLONE_NEWUSER)
			 : "memory");
	return r < 0 ? r : 0;
}
static long t_x32(void)
{
	long r = syscall(39 | 0x40000000); /* x32 getpid */

	return r < 0 ? -errno : 0;
}
static long t_kexec(void)
{
	long r = syscall(SYS_kexec_file_load, -1, -1, 0, "", 0);

	/* EBADF means the call ran past any filter and checked its fds. */
	return r < 0 && errno != EBADF ? -errno : 0;
}
static long t_init_module(void)
{
	long r = syscall(SYS_init_module, NULL, 0, "");

	return r < 0 && errno != EFAULT && errno != ENOEXEC ? -errno : 0;
}

static const struct {
	const char *name;
	long (*fn)(void);
} tests[] = {
    {"unshare-user", t_unshare_user},
    {"unshare-mnt", t_unshare_ns},
    {"unshare-net", t_unshare_net},
    {"unshare-pid", t_unshare_pid},
    {"unshare-time", t_unshare_time},
    {"setns", t_setns},
    {"clone-newuser", t_clone_newuser},
    {"clone3-newuser", t_clone3_newuser},
    {"clone3-newns", t_clone3_newns},
    {"mount-tmpfs", t_mount},
    {"mount-bind", t_mount_bind},
    {"remount-rw", t_remount_rw},
    {"umount-proc", t_umount},
    {"pivot_root", t_pivot_root},
    {"chroot", t_chroot},
    {"fsopen", t_fsopen},
    {"fspick", t_fspick},
    {"open_tree", t_open_tree},
    {"open_tree_attr", t_open_tree_attr},
    {"move_mount", t_move_mount},
    {"mount_setattr", t_mount_setattr},
    {"keyctl", t_keyctl},
    {"add_key", t_add_key},
    {"request_key", t_request_key},
    {"bpf-map", t_bpf},
    {"bpf-prog", t_bpf_prog},
    {"io_uring_setup", t_io_uring},
    {"userfaultfd", t_userfaultfd},
    {"perf_event_open", t_perf},
    {"open_by_handle_at", t_open_by_handle},
    {"personality-noaslr", t_personality},
    {"int80-getpid", t_int80},
    {"int80-unshare", t_int80_unshare},
    {"x32-getpid", t_x32},
    {"kexec_file_load", t_kexec},
    {"init_module", t_init_module},
};

int main(int argc, char **argv)
{
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		int want = argc < 2, st;

		for (int j = 1; j < argc; j++)
			want |= !strcmp(argv[j], tests[i].name);
		if (!want)
			continue;
		pid_t pid = fork();

		if (pid == 0) {
			long r = tests[i].fn();

			if (r >= 0)
				res_ok(tests[i].name, "returned %ld", r);
			else
				res_err(tests[i].name, (int)-r);
			_exit(0);
		}
		if (pid < 0 || waitpid(pid, &st, 0) < 0) {
			res_err(tests[i].name, errno);
			continue;
		}
		if (WIFSIGNALED(st))
			printf("R %s ERR killed-by-signal-%d\n", tests[i].name,
			       WTERMSIG(st));
		fflush(stdout);
	}
	return 0;
}

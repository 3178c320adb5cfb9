/* proc HOSTPID: reach a process outside the run: ptrace, process_vm_readv,
 * pidfd_open/pidfd_getfd, kill; then print the cmdline and environ of every
 * process visible in /proc and where their fds lead. */
#include "common.h"
#include <dirent.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>

static void dump_file(const char *path)
{
	char buf[8192];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return;
	printf("F %s: ", path);
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] == 0)
				buf[i] = ' ';
		fwrite(buf, 1, n, stdout);
	}
	printf("\n");
	close(fd);
}

static void scan_proc(void)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	char path[512], link[512];

	if (!d)
		return;
	while ((e = readdir(d))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
		dump_file(path);
		snprintf(path, sizeof(path), "/proc/%s/environ", e->d_name);
		dump_file(path);
		snprintf(path, sizeof(path), "/proc/%s/fd", e->d_name);
		DIR *fds = opendir(path);
		struct dirent *f;

		while (fds && (f = readdir(fds))) {
			char p2[1024];
			ssize_t n;

			snprintf(p2, sizeof(p2), "%s/%s", path, f->d_name);
			n = readlink(p2, link, sizeof(link) - 1);
			if (n > 0) {
				link[n] = 0;
				printf("L %s -> %s\n", p2, link);
			}
		}
		if (fds)
			closedir(fds);
	}
	closedir(d);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	pid_t pid = argc > 1 ? atoi(argv[1]) : 1;
	char buf[64];
	struct iovec local = {buf, sizeof(buf)}, remote = {(void *)0x400000, 8};

	if (ptrace(PTRACE_ATTACH, pid, 0, 0) == 0) {
		res_ok("ptrace-attach", "attached to %d", pid);
		waitpid(pid, NULL, __WALL);
		ptrace(PTRACE_DETACH, pid, 0, 0);
	} else {
		res_err("ptrace-attach", errno);
	}
	if (ptrace(PTRACE_SEIZE, pid, 0, 0) == 0) {
		res_ok("ptrace-seize", "seized %d", pid);
		ptrace(PTRACE_DETACH, pid, 0, 0);
	} else {
		res_err("ptrace-seize", errno);
	}
	/* EFAULT means the kernel let us at the other process's memory. */
	if (process_vm_readv(pid, &local, 1, &remote, 1, 0) >= 0 ||
	    errno == EFAULT)
		res_ok("process_vm_readv", "pid %d", pid);
	else
		res_err("process_vm_readv", errno);
	long pfd = syscall(SYS_pidfd_open, pid, 0);

	if (pfd >= 0) {
		res_ok("pidfd_open", "fd %ld", pfd);
		long got = syscall(SYS_pidfd_getfd, pfd, 0, 0);

		if (got >= 0)
			res_ok("pidfd_getfd", "fd %ld", got);
		else
			res_err("pidfd_getfd", errno);
		if (syscall(SYS_pidfd_send_signal, pfd, SIGSTOP, NULL, 0) ==
		    0) {
			res_ok("pidfd_send_signal", "stopped %d", pid);
			syscall(SYS_pidfd_send_signal, pfd, SIGCONT, NULL, 0);
		} else {
			res_err("pidfd_send_signal", errno);
		}
	} else {
		res_err("pidfd_open", errno);
	}
	if (kill(pid, SIGSTOP) == 0) {
		res_ok("kill", "stopped %d", pid);
		kill(pid, SIGCONT);
	} else {
		res_err("kill", errno);
	}
	scan_proc();
	return 0;
}

/*
 * A run's init and command between clone and exec (sandboxd/linux/child.h):
 * the uid maps, lo, the broker's listener, the mount plan, descriptors,
 * rlimits, the uid switch, Landlock, capabilities, seccomp, exec.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandboxd/linux/child.h"
#include "sandboxd/linux/init.h"
#include "sandboxd/linux/spawn.h"
#include "sandboxd/linux/steps.h"

int spawn_write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;
	int r = 0;

	if (fd < 0)
		return -errno;
	n = write(fd, s, strlen(s));
	if (n < 0)
		r = -errno;
	else if ((size_t)n != strlen(s))
		r = -EIO;
	close(fd);
	return r;
}

/* ---- the child ---------------------------------------------------------- */

static void child_rec(int fd, enum rec_kind kind, enum layer layer, int err,
		      int info)
{
	struct rec r = {kind, layer, err < 0 ? -err : err, info};
	ssize_t n;

	do {
		n = write(fd, &r, sizeof(r));
	} while (n < 0 && errno == EINTR);
}

static __attribute__((noreturn)) void child_fail(int fd, enum layer layer,
						 int err, int info)
{
	child_rec(fd, REC_FAIL, layer, err, info);
	_exit(CHILD_EXIT_REFUSED);
}

/* A layer could not be applied: refuse, or in best-effort say so and go
 * on without it. */
static void child_layer_failed(const struct child_args *a, int fd,
			       enum layer layer, int err)
{
	if (!a->best_effort)
		child_fail(fd, layer, err, 0);
	child_rec(fd, REC_WARN, layer, err, 0);
}

/* Bring lo up in the new network namespace: an ioctl, no netlink. */
static int child_lo_up(void)
{
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int r = 0;

	if (s < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, "lo", 3);
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0) {
		r = -errno;
		goto out;
	}
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		r = -errno;
out:
	close(s);
	return r;
}

/*
 * Broker mode: listen on 127.0.0.1:PORT in the run's network namespace,
 * which only this process can do from outside the run (it is in the
 * namespace and not yet confined), and send the socket to sandboxd, which
 * hands it to spd.  The command never holds it: it can connect to the
 * port, and spd's broker answers, with nothing in the run relaying.
 */
static int child_broker_listen(const struct child_args *a)
{
	struct sockaddr_in sin;
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	char byte = 'L';
	struct iovec iov = {&byte, 1};
	struct msghdr mh;
	struct cmsghdr *cm;
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), r = 0;

	if (s < 0) {
		r = -errno;
		goto out;
	}
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(a->broker_port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(s, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    listen(s, SPAWN_BROKER_BACKLOG) < 0) {
		r = -errno;
		goto out;
	}
	memset(&u, 0, sizeof(u));
	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = u.buf;
	mh.msg_controllen = sizeof(u.buf);
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &s, sizeof(int));
	if (sendmsg(a->fd_broker, &mh, MSG_NOSIGNAL) < 0)
		r = -errno;
out:
	if (s >= 0)
		close(s);
	close(a->fd_broker);
	return r;
}

/* Give init's descriptors fixed numbers (init.h): 1 and 2 the output
 * pipes, 3 the report pipe, 4 the status pipe, 5 sandboxd-init, as root
 * 6 the command's user namespace; close everything else (sandboxd's
 * socket, other runs' pipes).  A spare's command has no status pipe nor
 * sandboxd-init (fd_status, fd_init -1: its init holds them): their
 * numbers are left closed. */
static int child_shuffle_fds(const struct child_args *a)
{
	int src[6] = {a->fd_out,    a->fd_err,	a->fd_report,
		      a->fd_status, a->fd_init, a->fd_userns};
	int tmp[6], in = -1, n = a->fd_userns >= 0 ? 6 : 5;

	/* Moved out of the way first: it may sit on one of 1-6. */
	if (a->fd_in >= 0 && (in = fcntl(a->fd_in, F_DUPFD, 10)) < 0)
		return -errno;
	for (int i = 0; i < n; i++) {
		tmp[i] = src[i] >= 0 ? fcntl(src[i], F_DUPFD, 10) : -1;
		if (src[i] >= 0 && tmp[i] < 0)
			return -errno;
	}
	for (int i = 0; i < n; i++) {
		if (tmp[i] >= 0 && dup2(tmp[i], i + 1) < 0)
			return -errno;
		if (tmp[i] < 0 && close(i + 1) < 0 && errno != EBADF)
			return -errno;
	}
	if (in >= 0 && dup2(in, 0) < 0)
		return -errno;
	if (close_range((unsigned int)n + 1, ~0u, 0) < 0 ||
	    (a->fd_init >= 0 && fcntl(FD_INIT, F_SETFD, FD_CLOEXEC) < 0) ||
	    (n > 5 && fcntl(FD_USERNS, F_SETFD, FD_CLOEXEC) < 0))
		return -errno;
	if (in >= 0)
		return 0;
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (null < 0)
		return -errno;
	if (dup2(null, 0) < 0)
		return -errno;
	close(null);
	return 0;
}

static __attribute__((noreturn)) void child_exec(const struct child_args *a)
{
	const char *file = a->argv[0];
	char buf[PATH_MAX];
	int err = ENOENT;
	bool eacces = false;

	if (strchr(file, '/')) {
		execve(file, a->argv, a->envp);
		err = errno;
	} else {
		size_t flen = strlen(file);
		const char *p = a->path;

		/* execvpe() searches the caller's PATH, not envp's: search
		 * the run's own, as a shell inside it would. */
		while (*p) {
			const char *end = strchr(p, ':');
			size_t dlen = end ? (size_t)(end - p) : strlen(p);

			if (dlen == 0) {
				buf[0] = '.';
				dlen = 1;
			} else if (dlen + flen + 2 <= sizeof(buf)) {
				memcpy(buf, p, dlen);
			} else {
				dlen = 0;
			}
			if (dlen && dlen + flen + 2 <= sizeof(buf)) {
				buf[dlen] = '/';
				memcpy(buf + dlen + 1, file, flen + 1);
				execve(buf, a->argv, a->envp);
				if (errno == EACCES)
					eacces = true;
				else if (errno != ENOENT && errno != ENOTDIR)
					err = errno;
			}
			if (!end)
				break;
			p = end + 1;
		}
		if (eacces && err == ENOENT)
			err = EACCES;
	}
	child_rec(FD_REPORT, REC_EXEC, L_SETUP, err, 0);
	_exit(err == ENOENT || err == ENOTDIR ? CHILD_EXIT_NOTFOUND
					      : CHILD_EXIT_NOEXEC);
}

/* Root only: lock the securebits and drop the bounding set while
 * CAP_SETPCAP is still held, then become the run's unprivileged uid,
 * which clears the other sets. */
static int child_become_run_uid(const struct child_args *a)
{
	int r;

	if ((r = layer_caps_lock_securebits()) < 0 ||
	    (r = layer_caps_drop_bounding()) < 0)
		return r;
	/* Raw syscalls: glibc's wrappers synchronise all threads, which a
	 * child of fork must not rely on. */
	if (syscall(SYS_setgroups, 0, NULL) < 0 ||
	    syscall(SYS_setresgid, a->run_gid, a->run_gid, a->run_gid) < 0 ||
	    syscall(SYS_setresuid, a->run_uid, a->run_uid, a->run_uid) < 0)
		return -errno;
	return 0;
}

/*
 * The command's confinement, steps 3-7 of docs/sandbox.md's layers after
 * the descriptors: the session, the rlimits, the run's own user namespace
 * (userns, or -1), the uid, no_new_privs, Landlock, the capabilities,
 * seccomp.  A step that fails is reported on fd and ends the process.
 */
static void child_confine(const struct child_args *a, int fd, int userns)
{
	int r;

	/* sandboxd ignores SIGPIPE; the command gets the default back, or
	 * `yes | head` would see EPIPE instead of dying quietly. */
	if (signal(SIGPIPE, SIG_DFL) == SIG_ERR)
		child_fail(fd, L_SETUP, errno, 0);
	/* No controlling terminal: TIOCSTI needs one. */
	if (a->plan && setsid() < 0)
		child_fail(fd, L_SETUP, errno, 0);
	spawn_step("cmd.setsid");
	for (int i = 0; i < SBXP_RLIM__COUNT; i++) {
		struct rlimit rl;

		/* Only the hard limit we were given can be kept or lowered:
		 * raising needs CAP_SYS_RESOURCE in the initial namespace. */
		if (getrlimit(a->rl_res[i], &rl) < 0)
			child_fail(fd, L_RLIMIT, errno, i);
		if (rl.rlim_max == RLIM_INFINITY || a->rl_val[i] < rl.rlim_max)
			rl.rlim_max = a->rl_val[i];
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(a->rl_res[i], &rl) < 0)
			child_fail(fd, L_RLIMIT, errno, i);
	}
	spawn_step("cmd.rlimits");
	/* Root: into the run's own user namespace (userns.c, userns_run),
	 * with the rlimits set, before the uid changes: from here on the
	 * kernel counts this run's processes apart from every other's. */
	if (a->root && userns >= 0) {
		if (setns(userns, CLONE_NEWUSER) < 0)
			child_layer_failed(a, fd, L_NPROC, errno);
		close(userns);
	}
	if (a->root && (r = child_become_run_uid(a)) < 0)
		child_fail(fd, L_UID, r, 0);
	spawn_step("cmd.uid");
	/* no_new_privs first: Landlock needs it once the uid is dropped
	 * (it would otherwise need CAP_SYS_ADMIN), and it costs nothing. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		child_layer_failed(a, fd, L_NNP, errno);
	if (a->landlock && (r = layer_landlock_apply(a->landlock)) < 0)
		child_layer_failed(a, fd, L_LANDLOCK, r);
	spawn_step("cmd.landlock");
	if ((r = layer_caps_drop_all()) < 0)
		child_layer_failed(a, fd, L_CAPS, r);
	spawn_step("cmd.caps");
	if (a->filter && (r = layer_seccomp_load(a->filter)) < 0)
		child_layer_failed(a, fd, L_SECCOMP, r);
	spawn_step("cmd.seccomp");
}

static __attribute__((noreturn)) void child_command(const struct child_args *a)
{
	spawn_step("cmd.entry");
	if (fcntl(FD_REPORT, F_SETFD, FD_CLOEXEC) < 0 ||
	    (a->fd_status >= 0 && close(FD_STATUS) < 0))
		child_fail(FD_REPORT, L_SETUP, errno, 0);
	child_confine(a, FD_REPORT, a->fd_userns >= 0 ? FD_USERNS : -1);
	child_exec(a);
}

#if SPAWN_SHARED_VM
static int command_entry(void *arg)
{
	child_command(arg);
}
#endif

/* Start the command from init (see SPAWN_SHARED_VM).  Returns the pid or
 * -1 (errno). */
static pid_t start_command(const struct child_args *a)
{
#if SPAWN_SHARED_VM
	return clone(command_entry, a->cmd_stack,
		     CLONE_VM | CLONE_VFORK | SIGCHLD, (void *)(uintptr_t)a);
#else
	pid_t pid = fork();

	if (pid == 0)
		child_command(a);
	return pid;
#endif
}

/* Without root: map our uid and gid to themselves in the run's user
 * namespace, as unshare -r does from inside. */
static int child_map_ids(const char *uid_map, const char *gid_map)
{
	int r;

	if ((r = spawn_write_file("/proc/self/setgroups", "deny")) < 0 ||
	    (r = spawn_write_file("/proc/self/uid_map", uid_map)) < 0 ||
	    (r = spawn_write_file("/proc/self/gid_map", gid_map)) < 0)
		return r;
	return 0;
}

/* Decimal, for sandboxd-init's argument: snprintf is not safe here. */
static void child_utoa(unsigned long v, char *buf, size_t size)
{
	char tmp[24];
	size_t n = 0, i = 0;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v && n < sizeof(tmp));
	while (n && i + 1 < size)
		buf[i++] = tmp[--n];
	buf[i] = 0;
}

/* Executes sandboxd-init (init.h) from fd for the command cmd, with
 * "ready" when a spare's (FD_READY).  Returns -errno: it failed. */
static int child_exec_init(int fd, pid_t cmd, bool ready)
{
	char pid[24];
	char *argv[] = {(char *)"sandboxd-init", pid,
			ready ? (char *)INIT_ARG_READY : NULL, NULL};
	char *envp[] = {NULL};

	child_utoa((unsigned long)cmd, pid, sizeof(pid));
	syscall(SYS_execveat, fd, "", argv, envp, AT_EMPTY_PATH);
	return -errno;
}

/*
 * The run's host, mounts and descriptors, in the process that is or
 * starts the command (it holds the report pipe on FD_REPORT after).
 * Exits with a record on the report pipe when a step fails.
 */
static void child_setup(const struct child_args *a)
{
	int r, step;

	if (a->plan) {
		if (sethostname("sandbox", 7) < 0)
			child_fail(a->fd_report, L_SETUP, errno, 0);
		if (a->loopback && (r = child_lo_up()) < 0)
			child_fail(a->fd_report, L_NETNS, r, 0);
		if (a->fd_broker >= 0 && (r = child_broker_listen(a)) < 0)
			child_fail(a->fd_report, L_NETNS, r, 0);
		spawn_step("init.host");
		r = a->plan_head_done
			? mountplan_apply_tail(a->plan, a->scratch, &step)
			: mountplan_apply(a->plan, a->scratch, &step);
		if (r < 0)
			child_fail(a->fd_report, L_MOUNT, r, step);
	} else if (setsid() < 0) {
		child_fail(a->fd_report, L_SETUP, errno, 0);
	}
	if ((r = child_shuffle_fds(a)) < 0)
		child_fail(a->fd_report, L_SETUP, r, 0);
	if (chdir(a->cwd) < 0)
		child_fail(FD_REPORT, L_CWD, errno, 0);
	spawn_step("init.fds");
}

/*
 * The run's first process: pid 1 of its namespaces.  It sets the run up,
 * starts the command, and becomes sandboxd-init (init.h), which waits
 * for the command.  It shares sandboxd's memory until that exec
 * (SPAWN_SHARED_VM): only syscalls and the prepared arguments here.
 */
__attribute__((noreturn)) void child_init(const struct child_args *a)
{
	char c;
	int r;
	pid_t cmd;

	spawn_step("init.entry");
	/* If sandboxd dies, so does the run (its pid namespace with init);
	 * the exec into sandboxd-init keeps this (it changes no
	 * credentials).  A forked init waits for sandboxd's byte, which
	 * proves sandboxd was alive after this was set; a vforked one has
	 * sandboxd waiting for it. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		_exit(CHILD_EXIT_REFUSED);
	if (a->fd_sync >= 0) {
		if (read(a->fd_sync, &c, 1) != 1)
			_exit(CHILD_EXIT_REFUSED);
		close(a->fd_sync);
	}
	if (a->uid_map[0] && (r = child_map_ids(a->uid_map, a->gid_map)) < 0)
		child_fail(a->fd_report, L_USERNS, r, 0);
	spawn_step("init.maps");
	child_setup(a);
	cmd = start_command(a);
	if (cmd < 0)
		child_fail(FD_REPORT, L_SETUP, errno, 0);
	spawn_step("init.cmd_exec");
	/* The report pipe stays open into sandboxd-init, which closes it
	 * once its SIGTERM handler is set (init.h, FD_REPORT): its end then
	 * tells sandboxd that the command (which closed its copy when it
	 * exec'd) is running and that a SIGTERM for the run reaches it.  A
	 * failed exec is reported on it. */
	r = child_exec_init(FD_INIT, cmd, false);
	kill(cmd, SIGKILL);
	child_fail(FD_REPORT, L_INIT, r, 0);
}

int child_init_entry(void *arg)
{
	child_init(arg);
}

/* Closes every descriptor from 3 up but the n in keep (any order). */
static int child_close_but(const int *keep, size_t n)
{
	unsigned int from = 3;

	for (;;) {
		unsigned int next = ~0u;

		/* The lowest kept descriptor at or above from. */
		for (size_t i = 0; i < n; i++)
			if (keep[i] >= (int)from &&
			    (unsigned int)keep[i] < next)
				next = (unsigned int)keep[i];
		if (next == ~0u)
			return close_range(from, ~0u, 0) < 0 ? -errno : 0;
		if (next > from && close_range(from, next - 1, 0) < 0)
			return -errno;
		from = next + 1;
	}
}

/* The descriptors in the order a message of kind holds them (child.h):
 * points each field of a at its slot, or -1 for one not sent. */
static size_t child_spare_slots(struct child_args *a, uint32_t kind, int **slot)
{
	size_t n = 0;

	if (kind == CHILD_SPARE_RUN) {
		slot[n++] = &a->fd_out;
		slot[n++] = &a->fd_err;
		slot[n++] = &a->fd_report;
		if (a->fd_in >= 0)
			slot[n++] = &a->fd_in;
		if (a->fd_broker >= 0)
			slot[n++] = &a->fd_broker;
	}
	if (a->fd_userns >= 0)
		slot[n++] = &a->fd_userns;
	return n;
}

/* Waits for sandboxd's next message; fills *a from the args it points to
 * and the descriptors received, *kind from its kind.  Returns 0, or -1
 * on EOF or a message that is not one. */
static int child_spare_wait(int sock, struct child_args *a, uint32_t *kind)
{
	union {
		char buf[CMSG_SPACE(CHILD_SPARE_FDS_MAX * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct child_spare_msg m = {0};
	struct iovec iov = {&m, sizeof(m)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	int *slot[CHILD_SPARE_FDS_MAX];
	struct cmsghdr *cm;
	size_t n;
	ssize_t r;

	mh.msg_control = u.buf;
	mh.msg_controllen = sizeof(u.buf);
	do {
		r = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	} while (r < 0 && errno == EINTR);
	if (r != sizeof(m) || !m.a || (mh.msg_flags & MSG_CTRUNC) ||
	    (m.kind != CHILD_SPARE_RUN && m.kind != CHILD_SPARE_HEAT))
		return -1;
	*a = *m.a;
	*kind = m.kind;
	/* The spare's init holds the status pipe and is sandboxd-init
	 * already: neither is the command's. */
	a->fd_status = a->fd_init = -1;
	n = child_spare_slots(a, m.kind, slot);
	cm = CMSG_FIRSTHDR(&mh);
	if (n == 0)
		return cm ? -1 : 0;
	if (!cm || cm->cmsg_level != SOL_SOCKET ||
	    cm->cmsg_type != SCM_RIGHTS ||
	    cm->cmsg_len != CMSG_LEN(n * sizeof(int)))
		return -1;
	for (size_t i = 0; i < n; i++)
		memcpy(slot[i], CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
	return 0;
}

/*
 * HEAT (child.h): everything of the run its args describe that does not
 * need the run's descriptors, while sandboxd waits: the host, the rest
 * of the mount plan, the directory, and the whole confinement.  Any
 * failure ends the process: sandboxd sees EOF instead of 'h' and drops
 * the spare, and no run was handed to it.
 */
static void child_heat(const struct child_args *a)
{
	int step;

	if (sethostname("sandbox", 7) < 0 ||
	    (a->loopback && child_lo_up() < 0) ||
	    mountplan_apply_tail(a->plan, a->scratch, &step) < 0 ||
	    chdir(a->cwd) < 0)
		_exit(CHILD_EXIT_REFUSED);
	child_confine(a, -1, a->fd_userns);
}

/* A hot spare's run: the descriptors, then the exec; the rest was done
 * at HEAT.  Confined already: only what the filter and Landlock allow
 * any command (dup2, fcntl, close_range, /dev/null). */
static __attribute__((noreturn)) void child_hot_exec(struct child_args *a)
{
	int r;

	a->fd_userns = -1;
	if ((r = child_shuffle_fds(a)) < 0)
		child_fail(a->fd_report, L_SETUP, r, 0);
	if (fcntl(FD_REPORT, F_SETFD, FD_CLOEXEC) < 0)
		child_fail(FD_REPORT, L_SETUP, errno, 0);
	spawn_step("init.fds");
	child_exec(a);
}

/*
 * The spare's second process, pid 2 of its namespaces: the run's command
 * (child.h, child_spare_entry).  Shares sandboxd's memory until its exec,
 * on a stack of its own, and touches nothing else before its run arrives
 * but at HEAT, while sandboxd waits for its answer.
 */
static int child_spare_command(void *arg)
{
	const struct child_spare *sp = arg;
	int sock = sp->sock;
	bool head = sp->fixed != NULL, hot = false;
	struct child_args a;
	uint32_t kind = 0;
	char c = 0;

	/* init's ends are init's; its byte says it is sandboxd-init, with
	 * nothing of sandboxd's left to it, before any run can be handed
	 * here.  EOF: init failed, and this dies with its pid namespace. */
	close(sp->ready[1]);
	close(sp->status_w);
	if (read(sp->ready[0], &c, 1) != 1 || c != 'i')
		_exit(CHILD_EXIT_REFUSED);
	close(sp->ready[0]);
	/* Ready: a spare that failed is never handed a run. */
	if (send(sock, "r", 1, MSG_NOSIGNAL) != 1)
		_exit(CHILD_EXIT_REFUSED);
	for (;;) {
		if (child_spare_wait(sock, &a, &kind) < 0)
			_exit(CHILD_EXIT_REFUSED);
		if (kind == CHILD_SPARE_RUN)
			break;
		/* One HEAT, and only on top of the plan's head. */
		if (hot || !head || !a.plan)
			_exit(CHILD_EXIT_REFUSED);
		a.uid_map[0] = a.gid_map[0] = '\0';
		child_heat(&a);
		hot = true;
		/* Nothing but the blocking wait above after this byte:
		 * sandboxd goes on once it has it (child.h, errno). */
		if (send(sock, "h", 1, MSG_NOSIGNAL) != 1)
			_exit(CHILD_EXIT_REFUSED);
	}
	close(sock);
	if (hot)
		child_hot_exec(&a);
	/* The maps are written; the rest is the run's, as after a clone. */
	a.uid_map[0] = a.gid_map[0] = '\0';
	a.fd_sync = -1;
	a.plan_head_done = head;
	child_setup(&a);
	child_command(&a);
}

/* The spare's pid 1 becomes sandboxd-init, with the status pipe on
 * FD_STATUS and the ready pipe on FD_REPORT, for the command cmd. */
static __attribute__((noreturn)) void
child_spare_become_init(const struct child_spare *sp, pid_t cmd)
{
	int ready = fcntl(sp->ready[1], F_DUPFD_CLOEXEC, 10);
	int status = fcntl(sp->status_w, F_DUPFD_CLOEXEC, 10);
	int init = fcntl(sp->keep[0], F_DUPFD_CLOEXEC, 10);

	if (ready < 0 || status < 0 || init < 0 || dup2(ready, FD_REPORT) < 0 ||
	    dup2(status, FD_STATUS) < 0 ||
	    close_range(FD_STATUS + 1, ~0u, CLOSE_RANGE_CLOEXEC) < 0 ||
	    close_range(0, FD_REPORT - 1, CLOSE_RANGE_CLOEXEC) < 0)
		_exit(CHILD_EXIT_REFUSED);
	(void)child_exec_init(init, cmd, true);
	_exit(CHILD_EXIT_REFUSED);
}

int child_spare_entry(void *arg)
{
	const struct child_spare *sp = arg;
	int keep[CHILD_SPARE_KEEP_MAX + 4];
	size_t nkeep =
	    sp->nkeep < CHILD_SPARE_KEEP_MAX ? sp->nkeep : CHILD_SPARE_KEEP_MAX;
	int step;
	pid_t cmd;

	/* If sandboxd dies, so does the spare (with its pid namespace, its
	 * command); if it died before this, its end of the socket is closed
	 * and the command's wait sees EOF.  The exec into sandboxd-init
	 * keeps this (it changes no credentials). */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		_exit(CHILD_EXIT_REFUSED);
	if (sp->uid_map[0] && child_map_ids(sp->uid_map, sp->gid_map) < 0)
		_exit(CHILD_EXIT_REFUSED);
	if (sp->unshare_flags && unshare((int)sp->unshare_flags) < 0)
		_exit(CHILD_EXIT_REFUSED);
	if (sp->fixed && mountplan_apply_head(sp->fixed, &step) < 0)
		_exit(CHILD_EXIT_REFUSED);
	memcpy(keep, sp->keep, nkeep * sizeof(int));
	keep[nkeep++] = sp->sock;
	keep[nkeep++] = sp->status_w;
	keep[nkeep++] = sp->ready[0];
	keep[nkeep++] = sp->ready[1];
	/* Nothing of sandboxd's (its socket to spd, other runs' pipes and
	 * listeners) stays open in either process. */
	if (child_close_but(keep, nkeep) < 0)
		_exit(CHILD_EXIT_REFUSED);
	/* The command's process first, waiting for its run; then this one,
	 * pid 1, executes sandboxd-init now instead of after the command's
	 * start, where its exec would take a CPU from the command. */
	cmd = clone(child_spare_command, sp->cmd_stack, CLONE_VM | SIGCHLD,
		    (void *)(uintptr_t)sp);
	if (cmd < 0)
		_exit(CHILD_EXIT_REFUSED);
	child_spare_become_init(sp, cmd);
}

/*
 * Unit tests for sandboxd/linux/: each layer is applied in a forked child
 * which then attempts the forbidden thing; the parent asserts the outcome
 * on the host (the file unchanged, no connection accepted, no byte
 * injected), and where it can, a control child without the layer shows
 * that the same attempt would have worked.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <dirent.h>
#include <arpa/inet.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/magic.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>

#include "tests/lib/testlib.h"
#include "sandboxd/linux/layers.h"
#include "sandboxd/linux/names.h"

/* ---- running a check in a child --------------------------------------- */

/* Exit status a child uses to ask for a skip (the automake convention). */
#define CHILD_SKIP 77
#define CHILD_MSG_MAX 512

static int child_msg_fd = -1;

static void child_say(int code, const char *fmt, va_list ap)
{
	char msg[CHILD_MSG_MAX];
	int n = vsnprintf(msg, sizeof(msg), fmt, ap);

	if (n > 0 && child_msg_fd >= 0)
		(void)!write(child_msg_fd, msg,
			     (size_t)n < sizeof(msg) ? (size_t)n
						     : sizeof(msg) - 1);
	_exit(code);
}

static void __attribute__((format(printf, 1, 2), noreturn))
child_fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	child_say(1, fmt, ap);
	va_end(ap);
	_exit(1);
}

static void __attribute__((format(printf, 1, 2), noreturn))
child_skip(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	child_say(CHILD_SKIP, fmt, ap);
	va_end(ap);
	_exit(CHILD_SKIP);
}

struct child_result {
	int status;
	char msg[CHILD_MSG_MAX];
};

/* Fork, run fn(arg) in the child (which ends with _exit(0) when fn
 * returns), and collect the wait status and any message. */
static void run_child(void (*fn)(void *), void *arg, struct child_result *res)
{
	int p[2];
	ssize_t n;
	size_t got = 0;
	pid_t pid;

	memset(res, 0, sizeof(*res));
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	fflush(NULL);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(p[0]);
		child_msg_fd = p[1];
		fn(arg);
		_exit(0);
	}
	close(p[1]);
	while (got < sizeof(res->msg) - 1 &&
	       (n = read(p[0], res->msg + got, sizeof(res->msg) - 1 - got)) > 0)
		got += (size_t)n;
	close(p[0]);
	ck_assert_int_eq(waitpid(pid, &res->status, 0), pid);
}

#define CHILD_SKIPPED(r)                                                       \
	(WIFEXITED((r).status) && WEXITSTATUS((r).status) == CHILD_SKIP)
#define CHILD_OK(r) (WIFEXITED((r).status) && WEXITSTATUS((r).status) == 0)

/* Run fn in a child; skip the test if the child asked to, fail with the
 * child's message unless it exited 0. */
#define EXPECT_CHILD_OK(fn, arg)                                               \
	do {                                                                   \
		struct child_result r_;                                        \
		run_child(fn, arg, &r_);                                       \
		if (CHILD_SKIPPED(r_))                                         \
			TEST_SKIP("%s", r_.msg);                               \
		ck_assert_msg(CHILD_OK(r_), "%s: status 0x%x: %s", #fn,        \
			      r_.status, r_.msg);                              \
	} while (0)

static void set_nnp(void)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		child_fail("no_new_privs: %s", strerror(errno));
}

static char *join(const char *a, const char *b)
{
	char *s;

	ck_assert_int_ge(asprintf(&s, "%s/%s", a, b), 0);
	return s;
}

static bool file_exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/* ---- Landlock ---------------------------------------------------------- */

struct ll_fixture {
	char *dir;    /* the test's temporary directory */
	char *rw;     /* writable */
	char *rw2;    /* writable too */
	char *ro;     /* read-only, holds f = "original" */
	char *secret; /* in no list, holds canary = "canary" */
	const char *read_paths[2];
	const char *write_paths[3];
	struct sbx_landlock_plan plan;
};

static void ll_setup(struct ll_fixture *f)
{
	memset(f, 0, sizeof(*f));
	f->dir = test_tmpdir("layers");
	f->rw = join(f->dir, "rw");
	f->rw2 = join(f->dir, "rw2");
	f->ro = join(f->dir, "ro");
	f->secret = join(f->dir, "secret");
	ck_assert_int_eq(mkdir(f->rw, 0700), 0);
	ck_assert_int_eq(mkdir(f->rw2, 0700), 0);
	ck_assert_int_eq(mkdir(f->ro, 0700), 0);
	ck_assert_int_eq(mkdir(f->secret, 0700), 0);
	char *p = join(f->ro, "f");
	test_write_file(p, "original");
	free(p);
	p = join(f->secret, "canary");
	test_write_file(p, "canary");
	free(p);
	f->read_paths[0] = f->ro;
	f->read_paths[1] = NULL;
	f->write_paths[0] = f->rw;
	f->write_paths[1] = f->rw2;
	f->write_paths[2] = NULL;
	f->plan.read_paths = f->read_paths;
	f->plan.write_paths = f->write_paths;
	f->plan.net = SBX_NET_NONE;
	f->plan.scope = true;
}

static void ll_teardown(struct ll_fixture *f)
{
	test_rmrf(f->dir);
	free(f->dir);
	free(f->rw);
	free(f->rw2);
	free(f->ro);
	free(f->secret);
}

static void ll_apply_or_skip(const struct sbx_landlock_plan *plan)
{
	int r;

	set_nnp();
	r = layer_landlock_apply(plan);
	if (r == -EOPNOTSUPP)
		child_skip("Landlock is not enabled in this kernel");
	if (r <= 0)
		child_fail("layer_landlock_apply: %s", strerror(-r));
}

static void expect_errno(long rc, int want, const char *what)
{
	if (rc >= 0)
		child_fail("%s: succeeded, expected %s", what, strerror(want));
	if (errno != want)
		child_fail("%s: %s, expected %s", what, strerror(errno),
			   strerror(want));
}

static void ll_write_child(void *arg)
{
	struct ll_fixture *f = arg;
	char path[4096];
	int fd;

	ll_apply_or_skip(&f->plan);
	snprintf(path, sizeof(path), "%s/f", f->ro);
	expect_errno(open(path, O_WRONLY | O_TRUNC), EACCES,
		     "open ro/f for write");
	if (layer_landlock_abi() >= 3)
		expect_errno(truncate(path, 0), EACCES, "truncate ro/f");
	expect_errno(unlink(path), EACCES, "unlink ro/f");
	snprintf(path, sizeof(path), "%s/new", f->ro);
	expect_errno(open(path, O_WRONLY | O_CREAT, 0600), EACCES,
		     "create ro/new");
	expect_errno(mkdir(path, 0700), EACCES, "mkdir ro/new");
	expect_errno(symlink("/etc/passwd", path), EACCES, "symlink ro/new");
	snprintf(path, sizeof(path), "%s/new", f->rw);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		child_fail("create rw/new: %s", strerror(errno));
	if (write(fd, "inside", 6) != 6)
		child_fail("write rw/new: %s", strerror(errno));
	close(fd);
}

START_TEST(test_landlock_write)
{
	struct ll_fixture f;

	ll_setup(&f);
	EXPECT_CHILD_OK(ll_write_child, &f);
	char *p = join(f.ro, "f");
	char *s = test_read_file(p);
	ck_assert_ptr_nonnull(s);
	ck_assert_str_eq(s, "original");
	free(s);
	free(p);
	p = join(f.ro, "new");
	ck_assert_msg(!file_exists(p), "ro/new was created on the host");
	free(p);
	p = join(f.rw, "new");
	s = test_read_file(p);
	ck_assert_ptr_nonnull(s);
	ck_assert_str_eq(s, "inside");
	free(s);
	free(p);
	ll_teardown(&f);
}
END_TEST

static void ll_read_child(void *arg)
{
	struct ll_fixture *f = arg;
	char path[4096], buf[64];
	ssize_t n;
	int fd;

	ll_apply_or_skip(&f->plan);
	/* The read path stays readable... */
	snprintf(path, sizeof(path), "%s/f", f->ro);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		child_fail("open ro/f: %s", strerror(errno));
	n = read(fd, buf, sizeof(buf) - 1);
	if (n != 8 || memcmp(buf, "original", 8) != 0)
		child_fail("read ro/f: got %zd bytes", n);
	close(fd);
	/* ...a path in no list is neither readable nor listable. */
	snprintf(path, sizeof(path), "%s/canary", f->secret);
	fd = open(path, O_RDONLY);
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		child_fail("read the canary (%zd bytes)", n);
	}
	if (errno != EACCES)
		child_fail("open canary: %s, expected EACCES", strerror(errno));
	expect_errno(open(f->secret, O_RDONLY | O_DIRECTORY), EACCES,
		     "open secret dir");
	expect_errno(open("/etc/passwd", O_RDONLY), EACCES, "open /etc/passwd");
}

START_TEST(test_landlock_read)
{
	struct ll_fixture f;

	ll_setup(&f);
	EXPECT_CHILD_OK(ll_read_child, &f);
	ll_teardown(&f);
}
END_TEST

static void ll_refer_child(void *arg)
{
	struct ll_fixture *f = arg;
	char a[4096], b[4096];

	ll_apply_or_skip(&f->plan);
	snprintf(a, sizeof(a), "%s/a", f->rw);
	snprintf(b, sizeof(b), "%s/a", f->ro);
	if (rename(a, b) == 0)
		child_fail("renamed rw/a into ro/");
	if (errno != EACCES && errno != EXDEV)
		child_fail("rename rw/a ro/a: %s", strerror(errno));
	snprintf(b, sizeof(b), "%s/l", f->ro);
	if (link(a, b) == 0)
		child_fail("linked rw/a into ro/");
	/* Renaming the read-only directory away (to plant another in its
	 * place) is refused: its parent grants no REMOVE_DIR. */
	snprintf(b, sizeof(b), "%s/ro", f->rw);
	if (rename(f->ro, b) == 0)
		child_fail("renamed ro/ into rw/");
	/* Between two writable trees a move works (REFER granted, ABI 2). */
	if (layer_landlock_abi() >= 2) {
		snprintf(b, sizeof(b), "%s/a", f->rw2);
		if (rename(a, b) < 0)
			child_fail("rename rw/a rw2/a: %s", strerror(errno));
	}
}

START_TEST(test_landlock_refer)
{
	struct ll_fixture f;

	ll_setup(&f);
	char *a = join(f.rw, "a");
	test_write_file(a, "moved");
	EXPECT_CHILD_OK(ll_refer_child, &f);
	char *p = join(f.ro, "a");
	ck_assert_msg(!file_exists(p), "ro/a exists on the host");
	free(p);
	p = join(f.ro, "l");
	ck_assert_msg(!file_exists(p), "ro/l exists on the host");
	free(p);
	p = join(f.ro, "f");
	ck_assert_msg(file_exists(p), "ro/ was moved away");
	free(p);
	if (layer_landlock_abi() >= 2) {
		p = join(f.rw2, "a");
		char *s = test_read_file(p);
		ck_assert_ptr_nonnull(s);
		ck_assert_str_eq(s, "moved");
		free(s);
		free(p);
	}
	free(a);
	ll_teardown(&f);
}
END_TEST

struct ll_net {
	struct sbx_landlock_plan plan;
	struct sockaddr_in addr;
	bool expect_denied;
};

static void ll_tcp_child(void *arg)
{
	struct ll_net *n = arg;
	struct sockaddr_in any = {.sin_family = AF_INET};
	int s;

	ll_apply_or_skip(&n->plan);
	s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		child_fail("socket: %s", strerror(errno));
	if (!n->expect_denied) {
		if (connect(s, (struct sockaddr *)&n->addr, sizeof(n->addr)) <
		    0)
			child_fail("control connect: %s", strerror(errno));
		return;
	}
	expect_errno(connect(s, (struct sockaddr *)&n->addr, sizeof(n->addr)),
		     EACCES, "connect to 127.0.0.1");
	any.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	expect_errno(bind(s, (struct sockaddr *)&any, sizeof(any)), EACCES,
		     "bind 127.0.0.1:0");
}

/* A non-blocking listener on 127.0.0.1, an ephemeral port. */
static int tcp_listener(struct sockaddr_in *ret)
{
	socklen_t len = sizeof(*ret);
	int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(s, 0);
	memset(ret, 0, sizeof(*ret));
	ret->sin_family = AF_INET;
	ret->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(s, (struct sockaddr *)ret, sizeof(*ret)), 0);
	ck_assert_int_eq(listen(s, 8), 0);
	ck_assert_int_eq(getsockname(s, (struct sockaddr *)ret, &len), 0);
	return s;
}

START_TEST(test_landlock_tcp_none)
{
	struct ll_net n = {.plan = {.net = SBX_NET_NONE}};
	int l, c;

	if (layer_landlock_abi() < 4)
		TEST_SKIP_LAYER(
		    "landlock_abi>=4",
		    "Landlock ABI %d has no TCP rules (needs ABI 4, "
		    "Linux 6.7)",
		    layer_landlock_abi());
	l = tcp_listener(&n.addr);
	n.expect_denied = true;
	EXPECT_CHILD_OK(ll_tcp_child, &n);
	/* Loopback connects complete inside connect(): had one been made,
	 * it would be waiting in the backlog now. */
	c = accept(l, NULL, NULL);
	ck_assert_msg(c < 0 && errno == EAGAIN,
		      "the listener saw a connection under net none");
	/* Control: with the network mode loopback, TCP is not handled and
	 * the same connect reaches the listener. */
	n.plan.net = SBX_NET_LOOPBACK;
	n.expect_denied = false;
	EXPECT_CHILD_OK(ll_tcp_child, &n);
	c = accept(l, NULL, NULL);
	ck_assert_msg(c >= 0, "control connection not seen: %s",
		      strerror(errno));
	close(c);
	close(l);
}
END_TEST

struct ll_unix {
	struct sbx_landlock_plan plan;
	struct sockaddr_un addr;
	socklen_t addrlen;
	bool expect_denied;
};

static void ll_abstract_child(void *arg)
{
	struct ll_unix *u = arg;
	int s;

	ll_apply_or_skip(&u->plan);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		child_fail("socket: %s", strerror(errno));
	if (!u->expect_denied) {
		if (connect(s, (struct sockaddr *)&u->addr, u->addrlen) < 0)
			child_fail("control connect: %s", strerror(errno));
		return;
	}
	expect_errno(connect(s, (struct sockaddr *)&u->addr, u->addrlen), EPERM,
		     "connect to an abstract socket outside");
}

START_TEST(test_landlock_scope_abstract)
{
	struct ll_unix u = {.plan = {.net = SBX_NET_LOOPBACK, .scope = true}};
	int l, c;

	if (layer_landlock_abi() < 6)
		TEST_SKIP_LAYER("landlock_abi>=6",
				"Landlock ABI %d cannot scope abstract sockets "
				"(needs ABI 6, Linux 6.12)",
				layer_landlock_abi());
	u.addr.sun_family = AF_UNIX;
	int len = snprintf(u.addr.sun_path + 1, sizeof(u.addr.sun_path) - 1,
			   "spd-test-layers-%d", (int)getpid());
	u.addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
				(size_t)len);
	l = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(l, 0);
	ck_assert_int_eq(bind(l, (struct sockaddr *)&u.addr, u.addrlen), 0);
	ck_assert_int_eq(listen(l, 8), 0);
	u.expect_denied = true;
	EXPECT_CHILD_OK(ll_abstract_child, &u);
	c = accept(l, NULL, NULL);
	ck_assert_msg(c < 0 && errno == EAGAIN,
		      "the abstract listener saw a connection");
	u.plan.scope = false;
	u.expect_denied = false;
	EXPECT_CHILD_OK(ll_abstract_child, &u);
	c = accept(l, NULL, NULL);
	ck_assert_msg(c >= 0, "control connection not seen: %s",
		      strerror(errno));
	close(c);
	close(l);
}
END_TEST

static void ll_signal_child(void *arg)
{
	struct sbx_landlock_plan *plan = arg;
	pid_t parent = getppid();

	ll_apply_or_skip(plan);
	if (!plan->scope) {
		if (kill(parent, 0) < 0)
			child_fail("control kill(parent, 0): %s",
				   strerror(errno));
		return;
	}
	expect_errno(kill(parent, 0), EPERM, "kill(parent, 0)");
	expect_errno(kill(parent, SIGTERM), EPERM, "kill(parent, SIGTERM)");
	if (kill(getpid(), 0) < 0)
		child_fail("kill(self, 0): %s", strerror(errno));
}

START_TEST(test_landlock_scope_signal)
{
	struct sbx_landlock_plan plan = {.net = SBX_NET_NONE, .scope = true};

	if (layer_landlock_abi() < 6)
		TEST_SKIP_LAYER(
		    "landlock_abi>=6",
		    "Landlock ABI %d cannot scope signals (needs ABI 6, "
		    "Linux 6.12)",
		    layer_landlock_abi());
	EXPECT_CHILD_OK(ll_signal_child, &plan);
	plan.scope = false;
	EXPECT_CHILD_OK(ll_signal_child, &plan);
}
END_TEST

static void ll_missing_child(void *arg)
{
	const char *read_paths[] = {"/nonexistent/spd-test", NULL};
	struct sbx_landlock_plan plan = {.read_paths = read_paths};
	const char *rel[] = {"relative/path", NULL};

	(void)arg;
	set_nnp();
	/* A relative path is a bug in the plan: refused, nothing applied. */
	plan.read_paths = rel;
	if (layer_landlock_apply(&plan) != -EINVAL)
		child_fail("a relative path was accepted");
	/* A missing path is skipped, not fatal. */
	plan.read_paths = read_paths;
	int r = layer_landlock_apply(&plan);
	if (r == -EOPNOTSUPP)
		child_skip("Landlock is not enabled in this kernel");
	if (r <= 0)
		child_fail("a missing path failed the plan: %s", strerror(-r));
}

START_TEST(test_landlock_plan_errors)
{
	EXPECT_CHILD_OK(ll_missing_child, NULL);
}
END_TEST

/* ---- seccomp ----------------------------------------------------------- */

/* Each operation returns 0 on success or the errno it failed with. */
typedef int (*sc_fn)(void);

#define SC_RET(expr) ((expr) < 0 ? errno : 0)

static int sc_unshare_user(void)
{
	return SC_RET(unshare(CLONE_NEWUSER));
}

static int sc_unshare_mnt(void)
{
	return SC_RET(unshare(CLONE_NEWNS));
}

static int sc_setns(void)
{
	return SC_RET(setns(-1, 0));
}

static int sc_clone_newuser(void)
{
	/* clone() with no stack behaves like fork(). */
	long pid = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);

	if (pid == 0)
		_exit(0);
	if (pid < 0)
		return errno;
	waitpid((pid_t)pid, NULL, 0);
	return 0;
}

static int sc_clone_newnet(void)
{
	long pid = syscall(SYS_clone, CLONE_NEWNET | SIGCHLD, 0, 0, 0, 0);

	if (pid == 0)
		_exit(0);
	if (pid < 0)
		return errno;
	waitpid((pid_t)pid, NULL, 0);
	return 0;
}

static int sc_clone_plain(void)
{
	long pid = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
	int st;

	if (pid == 0)
		_exit(7);
	if (pid < 0)
		return errno;
	if (waitpid((pid_t)pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 7)
		return EIO;
	return 0;
}

static int sc_clone3(void)
{
	return SC_RET(syscall(SYS_clone3, NULL, 0));
}

static int sc_fork(void)
{
	int st;
	pid_t pid = fork();

	if (pid == 0)
		_exit(7);
	if (pid < 0)
		return errno;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 7)
		return EIO;
	return 0;
}

static void *sc_thread_main(void *arg)
{
	return arg;
}

static int sc_thread(void)
{
	static int token;
	pthread_t t;
	void *ret = NULL;
	int r = pthread_create(&t, NULL, sc_thread_main, &token);

	if (r)
		return r;
	pthread_join(t, &ret);
	return ret == &token ? 0 : EIO;
}

static int sc_mount(void)
{
	return SC_RET(
	    mount(NULL, "/nonexistent-spd-test", NULL, MS_BIND, NULL));
}

static int sc_umount(void)
{
	return SC_RET(umount2("/nonexistent-spd-test", 0));
}

static int sc_fsopen(void)
{
	return SC_RET(syscall(SYS_fsopen, "spd-no-such-fs", 0));
}

static int sc_open_tree(void)
{
	return SC_RET(
	    syscall(SYS_open_tree, AT_FDCWD, "/nonexistent-spd-test", 0));
}

static int sc_move_mount(void)
{
	return SC_RET(syscall(SYS_move_mount, -1, "", -1, "", 0));
}

static int sc_mount_setattr(void)
{
	return SC_RET(syscall(SYS_mount_setattr, -1, "", 0, NULL, 0));
}

static int sc_open_tree_attr(void)
{
	return SC_RET(syscall(467, -1, "", 0, NULL, 0));
}

static int sc_pivot_root(void)
{
	return SC_RET(syscall(SYS_pivot_root, "/nonexistent-spd-test",
			      "/nonexistent-spd-test"));
}

static int sc_keyctl(void)
{
	/* KEYCTL_GET_KEYRING_ID of the session keyring. */
	return SC_RET(syscall(SYS_keyctl, 0, -3, 0));
}

static int sc_add_key(void)
{
	return SC_RET(syscall(SYS_add_key, "user", "spd-test", "x", 1, -3));
}

static int sc_request_key(void)
{
	return SC_RET(syscall(SYS_request_key, "user", "spd-test", NULL, -3));
}

static int sc_bpf(void)
{
	return SC_RET(syscall(SYS_bpf, 999, NULL, 0));
}

static int sc_perf_event_open(void)
{
	return SC_RET(syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0));
}

static int sc_io_uring_setup(void)
{
	return SC_RET(syscall(SYS_io_uring_setup, 1, NULL));
}

static int sc_io_uring_enter(void)
{
	return SC_RET(syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0));
}

static int sc_userfaultfd(void)
{
	/* UFFD_USER_MODE_ONLY: allowed to unprivileged users. */
	long fd = syscall(SYS_userfaultfd, 1);

	if (fd < 0)
		return errno;
	close((int)fd);
	return 0;
}

static int sc_ptrace_parent(void)
{
	/* SEIZE, not ATTACH: were the filter to let it through, the test
	 * runner would not be left stopped. */
	return SC_RET(ptrace(PTRACE_SEIZE, getppid(), NULL, NULL));
}

static int sc_ptrace_traceme(void)
{
	return SC_RET(ptrace(PTRACE_TRACEME, 0, NULL, NULL));
}

static int sc_process_vm_readv(void)
{
	char src[8] = "secret", dst[8];
	struct iovec l = {dst, sizeof(dst)}, r = {src, sizeof(src)};

	return SC_RET(process_vm_readv(getpid(), &l, 1, &r, 1, 0));
}

static int sc_process_vm_writev(void)
{
	char src[8] = "x", dst[8];
	struct iovec l = {src, sizeof(src)}, r = {dst, sizeof(dst)};

	return SC_RET(process_vm_writev(getpid(), &l, 1, &r, 1, 0));
}

static int sc_kexec(void)
{
	return SC_RET(syscall(SYS_kexec_load, 0, 0, NULL, 0));
}

static int sc_init_module(void)
{
	return SC_RET(syscall(SYS_init_module, NULL, 0, ""));
}

static int sc_open_by_handle(void)
{
	return SC_RET(syscall(SYS_open_by_handle_at, -1, NULL, 0));
}

static int sc_personality_norandom(void)
{
	return SC_RET(personality(ADDR_NO_RANDOMIZE));
}

static int sc_personality_query(void)
{
	return SC_RET(personality(0xffffffff));
}

/* Every value with the flag but the query, on the low 32 bits (the
 * kernel's unsigned int), whatever the high ones hold. */
static int sc_personality_norandom_other(void)
{
	return SC_RET(personality(0xfffffffe));
}

static int sc_personality_norandom_high(void)
{
	return SC_RET(
	    syscall(SYS_personality, 0x100000000UL | ADDR_NO_RANDOMIZE));
}

static int sc_personality_query_high(void)
{
	return SC_RET(syscall(SYS_personality, 0x1ffffffffUL));
}

static int sc_personality_linux(void)
{
	return SC_RET(personality(PER_LINUX));
}

static int sc_socket(long domain, int type, int protocol)
{
	long fd = syscall(SYS_socket, domain, type, protocol);

	if (fd < 0)
		return errno;
	close((int)fd);
	return 0;
}

static int sc_socket_unix(void)
{
	return sc_socket(AF_UNIX, SOCK_STREAM, 0);
}

static int sc_socketpair_unix(void)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		return errno;
	close(sv[0]);
	close(sv[1]);
	return 0;
}

static int sc_socketpair_inet(void)
{
	int sv[2];

	return SC_RET(socketpair(AF_INET, SOCK_STREAM, 0, sv));
}

static int sc_socket_inet(void)
{
	return sc_socket(AF_INET, SOCK_STREAM, 0);
}

static int sc_socket_inet6(void)
{
	return sc_socket(AF_INET6, SOCK_DGRAM, 0);
}

static int sc_socket_inet_high(void)
{
	/* The kernel looks at the low 32 bits of the family only. */
	return sc_socket((1L << 32) | AF_INET, SOCK_STREAM, 0);
}

static int sc_socket_unix_high(void)
{
	/* An allowed family with high bits set: refused whole, since the
	 * filter refuses every family value from AF_NETLINK + 1 up. */
	return sc_socket((1L << 32) | AF_UNIX, SOCK_STREAM, 0);
}

static int sc_socket_netlink_route_high(void)
{
	/* NETLINK_ROUTE with high bits set in the protocol: refused. */
	long fd = syscall(SYS_socket, AF_NETLINK, SOCK_RAW, 1L << 32);

	if (fd < 0)
		return errno;
	close((int)fd);
	return 0;
}

static int sc_socketpair_inet6(void)
{
	int sv[2];

	return SC_RET(socketpair(AF_INET6, SOCK_STREAM, 0, sv));
}

static int sc_socket_mptcp(void)
{
	return sc_socket(AF_INET, SOCK_STREAM, 262 /* IPPROTO_MPTCP */);
}

static int sc_socket_netlink_route(void)
{
	return sc_socket(AF_NETLINK, SOCK_RAW, 0 /* NETLINK_ROUTE */);
}

static int sc_socket_netlink_audit(void)
{
	return sc_socket(AF_NETLINK, SOCK_RAW, 9 /* NETLINK_AUDIT */);
}

static int sc_socket_netlink_uevent(void)
{
	return sc_socket((1L << 32) | AF_NETLINK, SOCK_DGRAM,
			 15 /* NETLINK_KOBJECT_UEVENT */);
}

static int sc_socket_packet(void)
{
	return sc_socket(AF_PACKET, SOCK_RAW, 0);
}

static int sc_socket_vsock(void)
{
	return sc_socket(40 /* AF_VSOCK */, SOCK_STREAM, 0);
}

static int sc_socket_bluetooth(void)
{
	return sc_socket(31 /* AF_BLUETOOTH */, SOCK_STREAM, 0);
}

/* A file of the child's own to change the mode of; removed by sc_mode. */
static char sc_path[64];

static int sc_mode_file(void)
{
	int fd;

	snprintf(sc_path, sizeof(sc_path), "/tmp/spd-sc-%d", (int)getpid());
	unlink(sc_path);
	fd = open(sc_path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0700);
	if (fd < 0)
		child_fail("create %s: %s", sc_path, strerror(errno));
	return fd;
}

/* The errno of expr (0 on success), the file removed either way. */
static int sc_mode_done(int r)
{
	int e = r < 0 ? errno : 0;

	unlink(sc_path);
	return e;
}

static int sc_chmod_setuid(void)
{
	close(sc_mode_file());
	return sc_mode_done(chmod(sc_path, 04755));
}

static int sc_chmod_setgid(void)
{
	close(sc_mode_file());
	return sc_mode_done(chmod(sc_path, 02755));
}

static int sc_chmod_plain(void)
{
	close(sc_mode_file());
	return sc_mode_done(chmod(sc_path, 0755));
}

static int sc_fchmod_setuid(void)
{
	int fd = sc_mode_file(), r = fchmod(fd, 04755);

	close(fd);
	return sc_mode_done(r);
}

static int sc_fchmodat_setgid(void)
{
	close(sc_mode_file());
	return sc_mode_done(fchmodat(AT_FDCWD, sc_path, 02700, 0));
}

static int sc_fchmodat2_setuid(void)
{
	close(sc_mode_file());
	return sc_mode_done(
	    (int)syscall(452 /* fchmodat2 */, AT_FDCWD, sc_path, 04755, 0));
}

static int sc_creat_setuid(void)
{
	close(sc_mode_file());
	unlink(sc_path);
	return sc_mode_done((int)syscall(SYS_openat, AT_FDCWD, sc_path,
					 O_CREAT | O_WRONLY | O_CLOEXEC,
					 04755));
}

static int sc_creat_plain(void)
{
	close(sc_mode_file());
	unlink(sc_path);
	return sc_mode_done((int)syscall(SYS_openat, AT_FDCWD, sc_path,
					 O_CREAT | O_WRONLY | O_CLOEXEC, 0755));
}

static int sc_mknod_setgid(void)
{
	close(sc_mode_file());
	unlink(sc_path);
	return sc_mode_done(mknod(sc_path, S_IFREG | 02755, 0));
}

static int sc_openat2(void)
{
	struct {
		uint64_t flags, mode, resolve;
	} how = {O_RDONLY | O_CLOEXEC, 0, 0};
	int fd =
	    (int)syscall(437 /* openat2 */, AT_FDCWD, "/", &how, sizeof(how));

	if (fd >= 0)
		close(fd);
	return fd < 0 ? errno : 0;
}

struct sc_case {
	const char *name;
	sc_fn fn;
	enum sbx_net net;
	int want; /* 0: must work under the filter */
};

#define SC(fn, net, want)                                                      \
	{                                                                      \
#fn, fn, net, want                                             \
	}

static const struct sc_case sc_cases[] = {
    /* Refused. */
    SC(sc_unshare_user, SBX_NET_NONE, EPERM),
    SC(sc_unshare_mnt, SBX_NET_NONE, EPERM),
    SC(sc_setns, SBX_NET_NONE, EPERM),
    SC(sc_clone_newuser, SBX_NET_NONE, EPERM),
    SC(sc_clone_newnet, SBX_NET_LOOPBACK, EPERM),
    SC(sc_clone3, SBX_NET_NONE, ENOSYS),
    SC(sc_mount, SBX_NET_NONE, EPERM),
    SC(sc_umount, SBX_NET_NONE, EPERM),
    SC(sc_pivot_root, SBX_NET_NONE, EPERM),
    SC(sc_fsopen, SBX_NET_NONE, EPERM),
    SC(sc_open_tree, SBX_NET_NONE, EPERM),
    SC(sc_move_mount, SBX_NET_NONE, EPERM),
    SC(sc_mount_setattr, SBX_NET_NONE, EPERM),
    SC(sc_open_tree_attr, SBX_NET_NONE, EPERM),
    SC(sc_keyctl, SBX_NET_NONE, EPERM),
    SC(sc_add_key, SBX_NET_NONE, EPERM),
    SC(sc_request_key, SBX_NET_NONE, EPERM),
    SC(sc_bpf, SBX_NET_NONE, EPERM),
    SC(sc_perf_event_open, SBX_NET_NONE, EPERM),
    SC(sc_io_uring_setup, SBX_NET_NONE, EPERM),
    SC(sc_io_uring_enter, SBX_NET_NONE, EPERM),
    SC(sc_userfaultfd, SBX_NET_NONE, EPERM),
    SC(sc_ptrace_parent, SBX_NET_NONE, EPERM),
    SC(sc_ptrace_traceme, SBX_NET_NONE, EPERM),
    SC(sc_process_vm_readv, SBX_NET_NONE, EPERM),
    SC(sc_process_vm_writev, SBX_NET_NONE, EPERM),
    SC(sc_kexec, SBX_NET_NONE, EPERM),
    SC(sc_init_module, SBX_NET_NONE, EPERM),
    SC(sc_open_by_handle, SBX_NET_NONE, EPERM),
    SC(sc_personality_norandom, SBX_NET_NONE, EPERM),
    SC(sc_personality_norandom_other, SBX_NET_NONE, EPERM),
    SC(sc_personality_norandom_high, SBX_NET_NONE, EPERM),
    SC(sc_socket_inet, SBX_NET_NONE, EPERM),
    SC(sc_socket_inet6, SBX_NET_NONE, EPERM),
    SC(sc_socket_inet_high, SBX_NET_NONE, EPERM),
    SC(sc_socket_unix_high, SBX_NET_NONE, EPERM),
    SC(sc_socket_netlink_route_high, SBX_NET_NONE, EPERM),
    /* Broker mode (spctl agent) reaches 127.0.0.1:PORT over IPv4 only. */
    SC(sc_socket_inet6, SBX_NET_BROKER, EPERM),
    SC(sc_socket_inet6, SBX_NET_PROXY, EPERM),
    SC(sc_socket_mptcp, SBX_NET_LOOPBACK, EPERM),
    SC(sc_socket_netlink_audit, SBX_NET_LOOPBACK, EPERM),
    SC(sc_socket_netlink_uevent, SBX_NET_LOOPBACK, EPERM),
    SC(sc_socket_packet, SBX_NET_LOOPBACK, EPERM),
    SC(sc_socket_vsock, SBX_NET_LOOPBACK, EPERM),
    SC(sc_socket_bluetooth, SBX_NET_LOOPBACK, EPERM),
    SC(sc_socketpair_inet, SBX_NET_LOOPBACK, EPERM),
    SC(sc_socketpair_inet6, SBX_NET_HOST, EPERM),
    SC(sc_chmod_setuid, SBX_NET_NONE, EPERM),
    SC(sc_chmod_setgid, SBX_NET_NONE, EPERM),
    SC(sc_fchmod_setuid, SBX_NET_NONE, EPERM),
    SC(sc_fchmodat_setgid, SBX_NET_NONE, EPERM),
    SC(sc_fchmodat2_setuid, SBX_NET_NONE, EPERM),
    SC(sc_creat_setuid, SBX_NET_NONE, EPERM),
    SC(sc_mknod_setgid, SBX_NET_NONE, EPERM),
    SC(sc_openat2, SBX_NET_NONE, ENOSYS),
    /* Still working: a filter that breaks builds is not a sandbox. */
    SC(sc_fork, SBX_NET_NONE, 0),
    SC(sc_thread, SBX_NET_NONE, 0),
    SC(sc_clone_plain, SBX_NET_NONE, 0),
    SC(sc_personality_query, SBX_NET_NONE, 0),
    SC(sc_personality_query_high, SBX_NET_NONE, 0),
    SC(sc_personality_linux, SBX_NET_NONE, 0),
    SC(sc_socket_unix, SBX_NET_NONE, 0),
    SC(sc_socketpair_unix, SBX_NET_NONE, 0),
    SC(sc_socket_netlink_route, SBX_NET_NONE, 0),
    SC(sc_socket_inet, SBX_NET_LOOPBACK, 0),
    SC(sc_socket_inet, SBX_NET_BROKER, 0),
    SC(sc_socket_inet, SBX_NET_PROXY, 0),
    SC(sc_socket_inet6, SBX_NET_HOST, 0),
    SC(sc_chmod_plain, SBX_NET_NONE, 0),
    SC(sc_creat_plain, SBX_NET_NONE, 0),
};

#define SC_NCASES (sizeof(sc_cases) / sizeof(sc_cases[0]))

struct sc_run {
	const struct sock_fprog *prog; /* NULL: the control, unfiltered */
	sc_fn fn;
};

static void sc_child(void *arg)
{
	const struct sc_run *run = arg;
	int r;

	if (run->prog) {
		set_nnp();
		r = layer_seccomp_load(run->prog);
		if (r < 0)
			child_fail("layer_seccomp_load: %s", strerror(-r));
	}
	_exit(run->fn());
}

/* Run one case with and without the filter; returns the filtered errno. */
static int sc_try(const struct sock_fprog *prog, sc_fn fn, int *ret_control)
{
	struct sc_run run = {.prog = NULL, .fn = fn};
	struct child_result r;

	run_child(sc_child, &run, &r);
	*ret_control = WIFEXITED(r.status) ? WEXITSTATUS(r.status) : -1;
	run.prog = prog;
	run_child(sc_child, &run, &r);
	ck_assert_msg(WIFEXITED(r.status), "status 0x%x: %s", r.status, r.msg);
	ck_assert_msg(WEXITSTATUS(r.status) != 1 || r.msg[0] == '\0', "%s",
		      r.msg);
	return WEXITSTATUS(r.status);
}

START_TEST(test_seccomp_syscalls)
{
	struct sock_fprog progs[SBX_NET__COUNT];

	for (int m = 0; m < SBX_NET__COUNT; m++)
		ck_assert_int_eq(
		    layer_seccomp_build((enum sbx_net)m, &progs[m]), 0);
	for (size_t i = 0; i < SC_NCASES; i++) {
		const struct sc_case *c = &sc_cases[i];
		int control, got;

		got = sc_try(&progs[c->net], c->fn, &control);
		ck_assert_msg(got == c->want,
			      "%s (net %d): got %s, want %s (unfiltered: %s)",
			      c->name, c->net, got ? strerror(got) : "success",
			      c->want ? strerror(c->want) : "success",
			      control ? strerror(control) : "success");
		/* Say so when the unfiltered control fails the same way:
		 * there the filter is not what the assertion shows. */
		if (c->want && control == c->want)
			printf("NOTE: %s: refused with %s without the filter "
			       "too (privileges or kernel settings)\n",
			       c->name, strerror(control));
	}
	for (int m = 0; m < SBX_NET__COUNT; m++)
		layer_seccomp_free(&progs[m]);
	layer_seccomp_free(NULL);
}
END_TEST

/*
 * TIOCSTI against a terminal the child controls: unfiltered (where the
 * kernel still allows legacy TIOCSTI) the byte lands in the terminal's
 * input; filtered, with or without junk in the upper 32 bits of the
 * request, nothing arrives.
 */
struct sc_tty {
	const struct sock_fprog *prog;
	unsigned long request;
};

static void sc_tiocsti_child(void *arg)
{
	const struct sc_tty *t = arg;
	char c = 'X', buf[8];
	int master, slave, r;

	master = posix_openpt(O_RDWR | O_NOCTTY);
	if (master < 0 || grantpt(master) < 0 || unlockpt(master) < 0)
		child_skip("no pseudo-terminal: %s", strerror(errno));
	if (setsid() < 0)
		child_fail("setsid: %s", strerror(errno));
	/* Opened without O_NOCTTY by a session leader: our controlling
	 * terminal, which is what TIOCSTI needs. */
	slave = open(ptsname(master), O_RDWR);
	if (slave < 0)
		child_fail("open pts: %s", strerror(errno));
	/* Raw mode: in canonical mode FIONREAD counts only whole lines. */
	struct termios tio;
	if (tcgetattr(slave, &tio) < 0)
		child_fail("tcgetattr: %s", strerror(errno));
	cfmakeraw(&tio);
	if (tcsetattr(slave, TCSANOW, &tio) < 0)
		child_fail("tcsetattr: %s", strerror(errno));
	if (t->prog) {
		set_nnp();
		r = layer_seccomp_load(t->prog);
		if (r < 0)
			child_fail("layer_seccomp_load: %s", strerror(-r));
	}
	r = (int)syscall(SYS_ioctl, slave, t->request, &c);
	int err = errno;
	/* Did the byte reach the terminal's input queue? */
	int avail = 0;
	if (ioctl(slave, FIONREAD, &avail) < 0)
		child_fail("FIONREAD: %s", strerror(errno));
	if (avail > 0 && read(slave, buf, sizeof(buf)) > 0 && buf[0] == 'X')
		child_fail("injected: ioctl returned %d (%s)", r,
			   r < 0 ? strerror(err) : "ok");
	if (r == 0)
		child_fail("TIOCSTI succeeded yet injected nothing");
	_exit(err == EPERM ? 0 : 2);
}

START_TEST(test_seccomp_tiocsti)
{
	struct sock_fprog prog;
	struct sc_tty t = {.prog = NULL, .request = TIOCSTI};
	struct child_result r;
	char *legacy = test_read_file("/proc/sys/dev/tty/legacy_tiocsti");

	ck_assert_int_eq(layer_seccomp_build(SBX_NET_NONE, &prog), 0);
	/* Control: show this machine would let the injection through. */
	run_child(sc_tiocsti_child, &t, &r);
	if (CHILD_SKIPPED(r))
		TEST_SKIP("%s", r.msg);
	if (CHILD_OK(r))
		printf("NOTE: %s: the kernel refuses TIOCSTI by itself "
		       "(legacy_tiocsti %s)\n",
		       __func__, legacy ? legacy : "absent");
	else
		ck_assert_msg(strncmp(r.msg, "injected:", 9) == 0,
			      "control: %s", r.msg);
	t.prog = &prog;
	unsigned long reqs[] = {TIOCSTI, (1UL << 32) | TIOCSTI,
				(0xdeadUL << 40) | TIOCSTI};
	for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
		t.request = reqs[i];
		run_child(sc_tiocsti_child, &t, &r);
		ck_assert_msg(CHILD_OK(r), "request 0x%lx: status 0x%x: %s",
			      reqs[i], r.status, r.msg);
	}
	free(legacy);
	layer_seccomp_free(&prog);
}
END_TEST

static void sc_tioclinux_child(void *arg)
{
	const struct sock_fprog *prog = arg;
	char sub = 2; /* TIOCL_SETSEL */
	int master = posix_openpt(O_RDWR | O_NOCTTY), r;

	if (master < 0)
		child_skip("no pseudo-terminal: %s", strerror(errno));
	set_nnp();
	r = layer_seccomp_load(prog);
	if (r < 0)
		child_fail("layer_seccomp_load: %s", strerror(-r));
	if (syscall(SYS_ioctl, master, (1UL << 32) | 0x541C, &sub) == 0)
		child_fail("TIOCLINUX succeeded");
	if (errno != EPERM)
		child_fail("TIOCLINUX: %s, expected EPERM", strerror(errno));
}

START_TEST(test_seccomp_tioclinux)
{
	struct sock_fprog prog;

	ck_assert_int_eq(layer_seccomp_build(SBX_NET_NONE, &prog), 0);
	EXPECT_CHILD_OK(sc_tioclinux_child, &prog);
	layer_seccomp_free(&prog);
}
END_TEST

/* The 32-bit entry points: the process is killed (SIGSYS) before the
 * kernel runs the call. */
static void sc_int80_child(void *arg)
{
	const struct sock_fprog *prog = arg;
	int eax = 20; /* getpid in the i386 table */
	struct sigaction dfl = {.sa_handler = SIG_DFL};

	/* Where int $0x80 faults, die of it quietly (no sanitizer report). */
	sigaction(SIGSEGV, &dfl, NULL);
	if (prog) {
		set_nnp();
		if (layer_seccomp_load(prog) < 0)
			child_fail("layer_seccomp_load: %s", strerror(errno));
	}
	__asm__ volatile("int $0x80"
			 : "+a"(eax)
			 :
			 : "memory", "rcx", "r8", "r9", "r10", "r11");
	_exit(eax == (int)getpid() ? 0 : 3);
}

START_TEST(test_seccomp_ia32)
{
	struct sock_fprog prog;
	struct child_result r;

	ck_assert_int_eq(layer_seccomp_build(SBX_NET_NONE, &prog), 0);
	run_child(sc_int80_child, NULL, &r);
	if (!CHILD_OK(r)) {
		layer_seccomp_free(&prog);
		TEST_SKIP("the ia32 entry point is unavailable here (int $0x80 "
			  "unfiltered: status 0x%x)",
			  r.status);
	}
	run_child(sc_int80_child, &prog, &r);
	ck_assert_msg(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGSYS,
		      "int $0x80 getpid under the filter: status 0x%x %s",
		      r.status, r.msg);
	layer_seccomp_free(&prog);
}
END_TEST

static void sc_x32_child(void *arg)
{
	const struct sock_fprog *prog = arg;

	set_nnp();
	if (layer_seccomp_load(prog) < 0)
		child_fail("layer_seccomp_load: %s", strerror(errno));
	/* __X32_SYSCALL_BIT | getpid.  The control is not needed: on a
	 * kernel without x32 the call fails with ENOSYS, which is not the
	 * asserted outcome either. */
	syscall(0x40000000L | 39);
	_exit(0);
}

START_TEST(test_seccomp_x32)
{
	struct sock_fprog prog;
	struct child_result r;

	ck_assert_int_eq(layer_seccomp_build(SBX_NET_NONE, &prog), 0);
	run_child(sc_x32_child, &prog, &r);
	ck_assert_msg(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGSYS,
		      "x32 getpid under the filter: status 0x%x %s", r.status,
		      r.msg);
	layer_seccomp_free(&prog);
}
END_TEST

START_TEST(test_seccomp_load_errors)
{
	struct sock_fprog empty = {0};

	ck_assert_int_eq(layer_seccomp_load(NULL), -EINVAL);
	ck_assert_int_eq(layer_seccomp_load(&empty), -EINVAL);
	ck_assert_int_eq(layer_seccomp_build(SBX_NET_NONE, NULL), -EINVAL);
}
END_TEST

/* ---- capabilities ------------------------------------------------------ */

static void write_proc(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		child_fail("write %s: %s", path, strerror(errno));
	close(fd);
}

/* Become privileged over our own files: nothing to do as root; otherwise
 * uid 0 in a new user namespace, mapped onto our own uid. */
static void become_ns_root(void)
{
	char map[64];
	uid_t uid = geteuid();
	gid_t gid = getegid();

	if (uid == 0)
		return;
	if (unshare(CLONE_NEWUSER) < 0)
		child_skip("cannot create a user namespace: %s",
			   strerror(errno));
	snprintf(map, sizeof(map), "0 %u 1", (unsigned)uid);
	write_proc("/proc/self/uid_map", map);
	write_proc("/proc/self/setgroups", "deny");
	snprintf(map, sizeof(map), "0 %u 1", (unsigned)gid);
	write_proc("/proc/self/gid_map", map);
}

/* Check that every Cap* line of a /proc/PID/status text is all zeros. */
static void expect_no_caps(const char *status, const char *who)
{
	static const char *const fields[] = {
	    "CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"};

	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		const char *p = strstr(status, fields[i]);
		unsigned long long v;

		if (!p || sscanf(p + strlen(fields[i]), "%llx", &v) != 1)
			child_fail("%s: no %s line", who, fields[i]);
		if (v != 0)
			child_fail("%s: %s %016llx", who, fields[i], v);
	}
}

static void read_all(int fd, char *buf, size_t size)
{
	size_t got = 0;
	ssize_t n;

	while (got < size - 1 && (n = read(fd, buf + got, size - 1 - got)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
}

static void caps_drop_child(void *arg)
{
	const char *locked = arg;
	char status[8192];
	int fd, r, p[2];

	become_ns_root();
	/* Control: with CAP_DAC_OVERRIDE a mode 0000 file opens. */
	fd = open(locked, O_RDONLY);
	if (fd < 0)
		child_skip("no CAP_DAC_OVERRIDE to begin with: %s",
			   strerror(errno));
	close(fd);
	r = layer_caps_drop_all();
	if (r < 0)
		child_fail("layer_caps_drop_all: %s", strerror(-r));
	expect_errno(open(locked, O_RDONLY), EACCES, "open mode 0000 file");
	fd = open("/proc/self/status", O_RDONLY);
	if (fd < 0)
		child_fail("open /proc/self/status: %s", strerror(errno));
	read_all(fd, status, sizeof(status));
	close(fd);
	expect_no_caps(status, "after the drop");
	r = prctl(PR_GET_SECUREBITS, 0, 0, 0, 0);
	if (r < 0 || !(r & (1 << 0)) || !(r & (1 << 1)))
		child_fail("securebits 0x%x: NOROOT not set and locked", r);
	/* uid 0 executing a program gains nothing back. */
	if (pipe(p) < 0)
		child_fail("pipe: %s", strerror(errno));
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		execl("/bin/cat", "cat", "/proc/self/status", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	read_all(p[0], status, sizeof(status));
	waitpid(pid, NULL, 0);
	if (!strstr(status, "Uid:\t0\t"))
		child_fail("the exec'd program is not uid 0: %.200s", status);
	expect_no_caps(status, "after execve as uid 0");
}

START_TEST(test_caps_drop)
{
	char *dir = test_tmpdir("caps");
	char *locked = join(dir, "locked");

	test_write_file(locked, "secret");
	ck_assert_int_eq(chmod(locked, 0), 0);
	EXPECT_CHILD_OK(caps_drop_child, locked);
	test_rmrf(dir);
	free(locked);
	free(dir);
}
END_TEST

static void caps_refused_child(void *arg)
{
	int r;

	(void)arg;
	/* A process with no CAP_SETPCAP and a full bounding set: the drop
	 * cannot be completed, and must say so rather than return 0. */
	if (geteuid() == 0 && setresuid(65534, 65534, 65534) < 0)
		child_fail("setresuid: %s", strerror(errno));
	if (prctl(PR_CAPBSET_READ, CAP_SYS_ADMIN, 0, 0, 0) != 1)
		child_skip("the bounding set is already reduced here");
	r = layer_caps_drop_all();
	if (r != -EPERM)
		child_fail("layer_caps_drop_all: %d, expected -EPERM", r);
}

START_TEST(test_caps_refused)
{
	EXPECT_CHILD_OK(caps_refused_child, NULL);
}
END_TEST

/* ---- probe ------------------------------------------------------------- */

static int try_unshare_user(void)
{
	int st;
	pid_t pid = fork();

	if (pid == 0)
		_exit(unshare(CLONE_NEWUSER) < 0 ? 1 : 0);
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* A field's explanation is there exactly when the layer is missing. */
#define EXPECT_WHY(ok, text)                                                   \
	ck_assert_msg((ok) ? (text)[0] == '\0' : (text)[0] != '\0',            \
		      "%s is %d but its why is \"%s\"", #ok, (int)(ok), text)

START_TEST(test_probe)
{
	struct sbx_layers l;
	struct statfs sf;
	char *legacy;

	memset(&l, 0x5a, sizeof(l));
	ck_assert_int_eq(layer_probe_layers(&l), 0);
	ck_assert_int_eq(layer_probe_layers(NULL), -EINVAL);

	/* Each why is a terminated sentence that fits. */
	ck_assert(memchr(l.userns_why, 0, SBX_WHY_MAX));
	ck_assert(memchr(l.landlock_why, 0, SBX_WHY_MAX));
	ck_assert(memchr(l.seccomp_why, 0, SBX_WHY_MAX));
	ck_assert(memchr(l.cgroup2_why, 0, SBX_WHY_MAX));
	ck_assert(memchr(l.tiocsti_why, 0, SBX_WHY_MAX));
	ck_assert(memchr(l.idmap_why, 0, SBX_WHY_MAX));

	/* Consistent with what this host does when asked directly. */
	ck_assert_int_eq(l.landlock_abi, layer_landlock_abi());
	if (l.landlock_abi == 0)
		ck_assert(l.landlock_why[0] != '\0');
	else if (l.landlock_abi >= 6)
		ck_assert_str_eq(l.landlock_why, "");
	ck_assert_int_eq(l.userns, try_unshare_user());
	EXPECT_WHY(l.userns, l.userns_why);
	/* The seccomp tests above load filters on this very host. */
	ck_assert(l.seccomp);
	EXPECT_WHY(l.seccomp, l.seccomp_why);
	ck_assert_int_eq(statfs("/sys/fs/cgroup", &sf) == 0 &&
			     sf.f_type == CGROUP2_SUPER_MAGIC,
			 l.cgroup2);
	EXPECT_WHY(l.cgroup2, l.cgroup2_why);
	legacy = test_read_file("/proc/sys/dev/tty/legacy_tiocsti");
	ck_assert_int_eq(legacy && legacy[0] == '0', l.tiocsti_disabled);
	EXPECT_WHY(l.tiocsti_disabled, l.tiocsti_why);
	free(legacy);
	if (geteuid() == 0)
		EXPECT_WHY(l.idmap_mounts, l.idmap_why);
	else
		ck_assert(!l.idmap_mounts && strstr(l.idmap_why, "not needed"));

	printf("NOTE: probe: userns=%d landlock_abi=%d seccomp=%d cgroup2=%d "
	       "tiocsti_disabled=%d idmap=%d\n",
	       l.userns, l.landlock_abi, l.seccomp, l.cgroup2,
	       l.tiocsti_disabled, l.idmap_mounts);
	const char *whys[] = {l.userns_why,  l.landlock_why, l.seccomp_why,
			      l.cgroup2_why, l.tiocsti_why,  l.idmap_why};
	for (size_t i = 0; i < 6; i++)
		if (whys[i][0])
			printf("NOTE: probe: %s\n", whys[i]);
	/* The Landlock ABI this host is documented to have. */
	if (l.landlock_abi < 1)
		TEST_SKIP_LAYER("landlock", "Landlock is absent: %s",
				l.landlock_why);
}
END_TEST

/* ---- pathname sockets ----------------------------------------------------- */

struct sock_seen {
	const char *dir;
	int listen, dgram, idle, gone;
	char *listen_path, *dgram_path, *idle_path, *gone_path;
};

static int sock_cb(const char *path, void *data)
{
	struct sock_seen *s = data;

	if (strcmp(path, s->listen_path) == 0)
		s->listen++;
	else if (strcmp(path, s->dgram_path) == 0)
		s->dgram++;
	else if (strcmp(path, s->idle_path) == 0)
		s->idle++;
	else if (strcmp(path, s->gone_path) == 0)
		s->gone++;
	return 0;
}

static int bound_socket(const char *path, int type)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_uint_lt(strlen(path), sizeof(a.sun_path));
	strcpy(a.sun_path, path);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

START_TEST(test_unix_sockets)
{
	struct sock_seen s = {0};
	char *dir = test_tmpdir("socks");
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int l, d, n, g, c, acc;

	s.listen_path = join(dir, "l.sock");
	s.dgram_path = join(dir, "d.sock");
	s.idle_path = join(dir, "n.sock");
	s.gone_path = join(dir, "g.sock");
	l = bound_socket(s.listen_path, SOCK_STREAM);
	ck_assert_int_eq(listen(l, 4), 0);
	d = bound_socket(s.dgram_path, SOCK_DGRAM);
	n = bound_socket(s.idle_path, SOCK_STREAM); /* bound, not listening */
	g = bound_socket(s.gone_path, SOCK_STREAM);
	ck_assert_int_eq(listen(g, 4), 0);
	ck_assert_int_eq(unlink(s.gone_path), 0);
	/* An accepted connection repeats the listener's name. */
	c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	strcpy(a.sun_path, s.listen_path);
	ck_assert_int_eq(connect(c, (struct sockaddr *)&a, sizeof(a)), 0);
	acc = accept(l, NULL, NULL);
	ck_assert_int_ge(acc, 0);

	ck_assert_int_eq(layer_unix_sockets(sock_cb, &s), 0);
	ck_assert_int_eq(s.listen, 1);
	ck_assert_int_eq(s.dgram, 1);
	ck_assert_int_eq(s.idle, 0);
	ck_assert_int_eq(s.gone, 0);
	ck_assert_int_eq(layer_unix_sockets(NULL, NULL), -EINVAL);

	close(acc);
	close(c);
	close(l);
	close(d);
	close(n);
	close(g);
	test_rmrf(dir);
	free(s.listen_path);
	free(s.dgram_path);
	free(s.idle_path);
	free(s.gone_path);
	free(dir);
}
END_TEST

/* ---- the names of a directory (names.h) -------------------------------- */

/* Whether d is on ext4 or tmpfs, where dir_names_read must keep its
 * listing (two of the four it trusts, the two $TMPDIR is on here and in
 * CI). */
static bool names_fs_exact(const char *d)
{
	struct statfs sf;

	return statfs(d, &sf) == 0 &&
	       ((unsigned long)sf.f_type == EXT4_SUPER_MAGIC ||
		(unsigned long)sf.f_type == TMPFS_MAGIC);
}

/* The mount plan skips the lookup of a credential location the home's
 * listing says is not there: "no" only for a name the directory does not
 * hold, "maybe" for each it does (in any ASCII case, as on xfs's
 * ascii-ci), and "maybe" for everything where the listing is not the
 * whole truth (another filesystem, a listing too long, no directory). */
START_TEST(test_dir_names)
{
	static const char *const absent[] = {".aws",
					     ".azure",
					     ".gnupg",
					     ".docker",
					     ".kube",
					     ".pgpass",
					     ".password-store",
					     ".vault-token",
					     ".git-credentials",
					     ".pypirc",
					     ".s3cfg",
					     ".colima",
					     ".lima",
					     ".gemini",
					     ".codex",
					     ".mozilla"};
	char *d = test_tmpdir("names"), path[PATH_MAX];
	struct dir_names n;
	int fd;

	if (!names_fs_exact(d)) {
		test_rmrf(d);
		free(d);
		TEST_SKIP("$TMPDIR is on neither ext4 nor tmpfs");
	}
	snprintf(path, sizeof(path), "%s/.ssh", d);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/.NetRC", d);
	test_write_file(path, "");
	dir_names_read(d, &n);
	ck_assert_msg(n.exact, "an ext4 or tmpfs listing not kept");
	ck_assert(dir_names_may_have(&n, ".ssh"));
	ck_assert(dir_names_may_have(&n, ".ssh/id_rsa"));
	ck_assert(dir_names_may_have(&n, ".SSH"));
	ck_assert(dir_names_may_have(&n, ".netrc"));
	for (size_t i = 0; i < sizeof(absent) / sizeof(absent[0]); i++)
		ck_assert_msg(!dir_names_may_have(&n, absent[i]),
			      "%s said to be there", absent[i]);
	/* Read again, it sees what was made since. */
	snprintf(path, sizeof(path), "%s/.aws", d);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	dir_names_read(d, &n);
	ck_assert(dir_names_may_have(&n, ".aws/credentials"));

	/* No directory, or procfs: every answer is "maybe". */
	snprintf(path, sizeof(path), "%s/missing", d);
	dir_names_read(path, &n);
	ck_assert(!n.exact && dir_names_may_have(&n, ".aws"));
	dir_names_read("/proc/self", &n);
	ck_assert(!n.exact && dir_names_may_have(&n, ".aws"));

	/* Too many names to be worth reading (3,000 of 60 bytes). */
	snprintf(path, sizeof(path), "%s/big", d);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	fd = open(path, O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(fd, 0);
	for (int i = 0; i < 3000; i++) {
		char name[64];

		snprintf(name, sizeof(name),
			 "a-rather-long-name-for-a-file-of-the-listing-%05d",
			 i);
		int f = openat(fd, name, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);

		ck_assert_int_ge(f, 0);
		close(f);
	}
	close(fd);
	dir_names_read(path, &n);
	ck_assert(!n.exact && dir_names_may_have(&n, ".aws"));
	test_rmrf(d);
	free(d);
}
END_TEST

/* ---- main -------------------------------------------------------------- */

int main(void)
{
	Suite *s = suite_create("layers");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_landlock_write);
	tcase_add_test(tc, test_landlock_read);
	tcase_add_test(tc, test_landlock_refer);
	tcase_add_test(tc, test_landlock_tcp_none);
	tcase_add_test(tc, test_landlock_scope_abstract);
	tcase_add_test(tc, test_landlock_scope_signal);
	tcase_add_test(tc, test_landlock_plan_errors);
	tcase_add_test(tc, test_seccomp_syscalls);
	tcase_add_test(tc, test_seccomp_tiocsti);
	tcase_add_test(tc, test_seccomp_tioclinux);
	tcase_add_test(tc, test_seccomp_ia32);
	tcase_add_test(tc, test_seccomp_x32);
	tcase_add_test(tc, test_seccomp_load_errors);
	tcase_add_test(tc, test_caps_drop);
	tcase_add_test(tc, test_caps_refused);
	tcase_add_test(tc, test_probe);
	tcase_add_test(tc, test_unix_sockets);
	tcase_add_test(tc, test_dir_names);
	/* The seccomp table forks two children per case; under ASan on a
	 * busy machine that takes more than Check's default 4 seconds. */
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

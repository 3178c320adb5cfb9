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
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>

#include "tests/lib/testlib.h"
#include "sandboxd/linux/layers.h"

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
	r = sbx_landlock_apply(plan);
	if (r == -EOPNOTSUPP)
		child_skip("Landlock is not enabled in this kernel");
	if (r <= 0)
		child_fail("sbx_landlock_apply: %s", strerror(-r));
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
	if (sbx_landlock_abi() >= 3)
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
	if (sbx_landlock_abi() >= 2) {
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
	if (sbx_landlock_abi() >= 2) {
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

	if (sbx_landlock_abi() < 4)
		TEST_SKIP("Landlock ABI %d has no TCP rules (needs ABI 4, "
			  "Linux 6.7)",
			  sbx_landlock_abi());
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

	if (sbx_landlock_abi() < 6)
		TEST_SKIP("Landlock ABI %d cannot scope abstract sockets "
			  "(needs ABI 6, Linux 6.12)",
			  sbx_landlock_abi());
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

	if (sbx_landlock_abi() < 6)
		TEST_SKIP("Landlock ABI %d cannot scope signals (needs ABI 6, "
			  "Linux 6.12)",
			  sbx_landlock_abi());
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
	if (sbx_landlock_apply(&plan) != -EINVAL)
		child_fail("a relative path was accepted");
	/* A missing path is skipped, not fatal. */
	plan.read_paths = read_paths;
	int r = sbx_landlock_apply(&plan);
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
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

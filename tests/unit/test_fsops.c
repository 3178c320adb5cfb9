/*
 * Unit tests for daemon/fsops: the file tools work inside a workspace, and
 * no path, symlink, magic link or race lets them read or write outside it.
 * Every escape test checks the file outside, not only the return value.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <jansson.h>
#include <uv.h>

#include "tests/lib/fakecall.h"
#include "tests/lib/testlib.h"
#include "common/util.h"
#include "daemon/transport/call.h"
#include "daemon/sandbox/fsops.h"
#include "daemon/spd.h"
#include "daemon/methods/gate.h"
#include "daemon/transport/handlers.h"

/* A temporary base holding ws/ (the workspace) and outside/. */
struct fixture {
	char *base;
	char *ws_dir;
	char *out_dir;
	struct fs_ws *ws;
};

static char *join(const char *a, const char *b)
{
	char *s = NULL;

	ck_assert_int_ge(asprintf(&s, "%s/%s", a, b), 0);
	return s;
}

static void fixture_init_in(struct fixture *f, char *base)
{
	f->base = base;
	f->ws_dir = join(f->base, "ws");
	f->out_dir = join(f->base, "outside");
	ck_assert_int_eq(mkdir(f->ws_dir, 0700), 0);
	ck_assert_int_eq(mkdir(f->out_dir, 0700), 0);
	ck_assert_int_eq(fs_ws_open(f->ws_dir, &f->ws), 0);
}

static void fixture_init(struct fixture *f)
{
	fixture_init_in(f, test_tmpdir("fsops"));
}

static void fixture_done(struct fixture *f)
{
	fs_ws_free(f->ws);
	test_rmrf(f->base);
	free(f->base);
	free(f->ws_dir);
	free(f->out_dir);
}

/* Write a file relative to a directory with plain libc (test set-up). */
static void put(const char *dir, const char *rel, const char *content)
{
	char *p = join(dir, rel);
	test_write_file(p, content);
	free(p);
}

static char *get(const char *dir, const char *rel)
{
	char *p = join(dir, rel);
	char *s = test_read_file(p);
	free(p);
	return s;
}

static bool exists(const char *dir, const char *rel)
{
	struct stat st;
	char *p = join(dir, rel);
	bool r = lstat(p, &st) == 0;
	free(p);
	return r;
}

static void link_in(const char *dir, const char *rel, const char *target)
{
	char *p = join(dir, rel);
	ck_assert_int_eq(symlink(target, p), 0);
	free(p);
}

/* Number of entries in dir other than . and .. */
static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static void assert_read(struct fs_ws *ws, const char *path, const char *want)
{
	char *data = NULL;
	size_t len = 0;

	ck_assert_int_eq(fs_read(ws, path, &data, &len), 0);
	ck_assert_uint_eq(len, strlen(want));
	ck_assert_str_eq(data, want);
	free(data);
}

START_TEST(test_normalize)
{
	static const struct {
		const char *in;
		int r;
		const char *out;
	} cases[] = {
	    {"", 0, ""},
	    {".", 0, ""},
	    {"./", 0, ""},
	    {"a", 0, "a"},
	    {"a/./b//c/", 0, "a/b/c"},
	    {"a/../b", 0, "b"},
	    {"a/b/../../c", 0, "c"},
	    {"a/..", 0, ""},
	    {"..", -EXDEV, NULL},
	    {"../x", -EXDEV, NULL},
	    {"a/../../x", -EXDEV, NULL},
	    {"./../ws/x", -EXDEV, NULL},
	    {"/etc/passwd", -EXDEV, NULL},
	    {"/", -EXDEV, NULL},
	    {"\xc3\xa9t\xc3\xa9/x", 0, "\xc3\xa9t\xc3\xa9/x"},
	    {"bad\xff", -SPD_EUTF8, NULL},
	    {"over\xc0\xaflong", -SPD_EUTF8, NULL},
	};
	struct fixture f;
	char *rel, *p;

	fixture_init(&f);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		rel = NULL;
		int r = fs_path_normalize(f.ws, cases[i].in,
					  strlen(cases[i].in), &rel);
		ck_assert_msg(r == cases[i].r, "%s: got %d want %d",
			      cases[i].in, r, cases[i].r);
		if (cases[i].out)
			ck_assert_str_eq(rel, cases[i].out);
		free(rel);
	}

	/* Absolute paths under the root are converted, others refused,
	 * including a sibling whose name merely starts like the root. */
	p = join(f.ws_dir, "a/b");
	ck_assert_int_eq(fs_path_normalize(f.ws, p, strlen(p), &rel), 0);
	ck_assert_str_eq(rel, "a/b");
	free(rel);
	free(p);
	ck_assert_int_eq(
	    fs_path_normalize(f.ws, f.ws_dir, strlen(f.ws_dir), &rel), 0);
	ck_assert_str_eq(rel, "");
	free(rel);
	p = join(f.ws_dir, "../outside/x");
	ck_assert_int_eq(fs_path_normalize(f.ws, p, strlen(p), &rel), -EXDEV);
	free(p);
	ck_assert_int_ge(asprintf(&p, "%sx/y", f.ws_dir), 0);
	ck_assert_int_eq(fs_path_normalize(f.ws, p, strlen(p), &rel), -EXDEV);
	free(p);
	ck_assert_int_eq(fs_path_normalize(NULL, "/x", 2, &rel), -EXDEV);

	/* NUL inside the given length, and the length limits. */
	ck_assert_int_eq(fs_path_normalize(f.ws, "a\0b", 3, &rel), -EINVAL);
	char long_comp[FS_NAME_MAX + 2];
	memset(long_comp, 'n', sizeof(long_comp) - 1);
	long_comp[sizeof(long_comp) - 1] = '\0';
	ck_assert_int_eq(
	    fs_path_normalize(f.ws, long_comp, strlen(long_comp), &rel),
	    -ENAMETOOLONG);
	char *long_path = malloc(FS_PATH_MAX + 2);
	for (size_t i = 0; i < FS_PATH_MAX + 1; i++)
		long_path[i] = i % 2 ? '/' : 'a';
	long_path[FS_PATH_MAX + 1] = '\0';
	ck_assert_int_eq(
	    fs_path_normalize(f.ws, long_path, FS_PATH_MAX + 1, &rel),
	    -ENAMETOOLONG);
	free(long_path);
	fixture_done(&f);
}
END_TEST

START_TEST(test_basic_ops)
{
	struct fixture f;
	struct fs_listing l = {0};
	struct fs_info info;
	char *s;

	fixture_init(&f);
	ck_assert_int_eq(fs_write(f.ws, "a.txt", "hello", 5), 0);
	s = get(f.ws_dir, "a.txt");
	ck_assert_str_eq(s, "hello");
	free(s);
	assert_read(f.ws, "a.txt", "hello");
	assert_read(f.ws, "./x/../a.txt", "hello");

	/* Replacing keeps the permission bits; set-id bits are dropped. */
	s = join(f.ws_dir, "a.txt");
	ck_assert_int_eq(chmod(s, 0640), 0);
	ck_assert_int_eq(fs_write(f.ws, "a.txt", "bye", 3), 0);
	struct stat st;
	ck_assert_int_eq(stat(s, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0640);
	free(s);
	assert_read(f.ws, "a.txt", "bye");

	ck_assert_int_eq(fs_mkdir(f.ws, "d", false), 1);
	ck_assert_int_eq(fs_mkdir(f.ws, "d", false), -EEXIST);
	ck_assert_int_eq(fs_mkdir(f.ws, "x/y/z", false), -ENOENT);
	ck_assert_int_eq(fs_mkdir(f.ws, "x/y/z", true), 1);
	ck_assert_int_eq(fs_mkdir(f.ws, "x/y/z", true), 0);
	ck_assert(exists(f.ws_dir, "x/y/z"));
	ck_assert_int_eq(fs_write(f.ws, "x/y/z/deep", "", 0), 0);
	ck_assert_int_eq(fs_write(f.ws, "nodir/f", "x", 1), -ENOENT);
	ck_assert_int_eq(fs_write(f.ws, "d", "x", 1), -EISDIR);
	ck_assert_int_eq(fs_write(f.ws, "", "x", 1), -EINVAL);

	ck_assert_int_eq(fs_list(f.ws, "", &l), 0);
	ck_assert_uint_eq(l.n, 3); /* no temporary file left behind */
	ck_assert_str_eq(l.entries[0].name, "a.txt");
	ck_assert_int_eq(l.entries[0].info.type, FS_TYPE_FILE);
	ck_assert_uint_eq(l.entries[0].info.size, 3);
	ck_assert_str_eq(l.entries[1].name, "d");
	ck_assert_int_eq(l.entries[1].info.type, FS_TYPE_DIR);
	ck_assert_str_eq(l.entries[2].name, "x");
	ck_assert(!l.truncated);
	fs_listing_free(&l);
	ck_assert_int_eq(fs_list(f.ws, "a.txt", &l), -ENOTDIR);

	ck_assert_int_eq(fs_stat(f.ws, "a.txt", &info), 0);
	ck_assert_int_eq(info.type, FS_TYPE_FILE);
	ck_assert_uint_eq(info.size, 3);
	ck_assert_int_eq(info.mode, 0640);
	ck_assert_int_eq(fs_stat(f.ws, "", &info), 0);
	ck_assert_int_eq(info.type, FS_TYPE_DIR);
	ck_assert_int_eq(fs_stat(f.ws, "nope", &info), -ENOENT);

	ck_assert_int_eq(fs_move(f.ws, "a.txt", "d/b.txt", false), 0);
	ck_assert(!exists(f.ws_dir, "a.txt"));
	assert_read(f.ws, "d/b.txt", "bye");
	ck_assert_int_eq(fs_write(f.ws, "c.txt", "c", 1), 0);
	ck_assert_int_eq(fs_move(f.ws, "c.txt", "d/b.txt", false), -EEXIST);
	assert_read(f.ws, "d/b.txt", "bye");
	ck_assert_int_eq(fs_move(f.ws, "c.txt", "d/b.txt", true), 0);
	assert_read(f.ws, "d/b.txt", "c");
	ck_assert_int_eq(fs_move(f.ws, "", "e", false), -EBUSY);
	ck_assert_int_eq(fs_move(f.ws, "d", "../e", false), -EXDEV);

	ck_assert_int_eq(fs_delete(f.ws, "d", false), -ENOTEMPTY);
	ck_assert_int_eq(fs_delete(f.ws, "d/b.txt", false), 1);
	ck_assert_int_eq(fs_delete(f.ws, "d", false), 1);
	ck_assert(!exists(f.ws_dir, "d"));
	ck_assert_int_eq(fs_delete(f.ws, "x", true), 4);
	ck_assert(!exists(f.ws_dir, "x"));
	ck_assert_int_eq(fs_delete(f.ws, "", true), -EBUSY);
	ck_assert_int_eq(fs_delete(f.ws, "nope", false), -ENOENT);
	ck_assert_int_eq(count_entries(f.ws_dir), 0);
	fixture_done(&f);
}
END_TEST

START_TEST(test_read_limits)
{
	struct fixture f;
	char *data = NULL, *p;
	size_t len;
	int fd;

	fixture_init(&f);
	/* A sparse file just over the limit costs no disk. */
	p = join(f.ws_dir, "big");
	fd = open(p, O_WRONLY | O_CREAT, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, FS_READ_MAX + 1), 0);
	close(fd);
	ck_assert_int_eq(fs_read(f.ws, "big", &data, &len), -SPD_ETOOBIG);
	ck_assert_int_eq(truncate(p, FS_READ_MAX), 0);
	ck_assert_int_eq(fs_read(f.ws, "big", &data, &len), 0);
	ck_assert_uint_eq(len, FS_READ_MAX);
	free(data);
	free(p);

	p = join(f.ws_dir, "fifo");
	ck_assert_int_eq(mkfifo(p, 0600), 0);
	free(p);
	/* Must not block on open, and must refuse a non-regular file. */
	ck_assert_int_eq(fs_read(f.ws, "fifo", &data, &len), -EINVAL);
	ck_assert_int_eq(fs_write(f.ws, "fifo", "x", 1), -EINVAL);
	ck_assert_int_eq(fs_mkdir(f.ws, "dir", false), 1);
	ck_assert_int_eq(fs_read(f.ws, "dir", &data, &len), -EISDIR);
	ck_assert_int_eq(fs_read(f.ws, "", &data, &len), -EISDIR);
	fixture_done(&f);
}
END_TEST

START_TEST(test_list_limit)
{
	struct fixture f;
	struct fs_listing l = {0};
	char name[32];

	fixture_init(&f);
	int dfd = open(f.ws_dir, O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(dfd, 0);
	for (int i = 0; i < FS_LIST_MAX + 5; i++) {
		snprintf(name, sizeof(name), "f%05d", i);
		int fd = openat(dfd, name, O_WRONLY | O_CREAT, 0600);
		ck_assert_int_ge(fd, 0);
		close(fd);
	}
	close(dfd);
	ck_assert_int_eq(fs_list(f.ws, "", &l), 0);
	ck_assert_uint_eq(l.n, FS_LIST_MAX);
	ck_assert(l.truncated);
	for (size_t i = 1; i < l.n; i++)
		ck_assert(strcmp(l.entries[i - 1].name, l.entries[i].name) < 0);
	fs_listing_free(&l);
	fixture_done(&f);
}
END_TEST

/*
 * Symlinks inside the workspace pointing outside — to a file, to a
 * directory, relative and absolute, as the last component or in the
 * middle — are refused by every tool, and the outside stays as it was.
 */
START_TEST(test_symlink_escapes)
{
	struct fixture f;
	struct fs_listing l = {0};
	struct fs_info info;
	char *data = NULL, *s, *abs_secret;
	size_t len;

	fixture_init(&f);
	put(f.out_dir, "secret", "SECRET");
	abs_secret = join(f.out_dir, "secret");
	link_in(f.ws_dir, "lf", "../outside/secret");
	link_in(f.ws_dir, "lf_abs", abs_secret);
	link_in(f.ws_dir, "ld", "../outside");
	link_in(f.ws_dir, "ld_abs", f.out_dir);
	link_in(f.ws_dir, "dangling", "../outside/new");
	ck_assert_int_eq(fs_mkdir(f.ws, "sub", false), 1);
	link_in(f.ws_dir, "sub/up", "..");

	const char *reads[] = {"lf",	    "lf_abs",
			       "ld/secret", "ld_abs/secret",
			       "sub/up/lf", "../outside/secret",
			       abs_secret,  "sub/../../outside/secret"};
	for (size_t i = 0; i < ARRAY_SIZE(reads); i++) {
		int r = fs_read(f.ws, reads[i], &data, &len);
		ck_assert_msg(r == -ELOOP || r == -EXDEV, "read %s: %d",
			      reads[i], r);
		r = fs_write(f.ws, reads[i], "PWNED", 5);
		ck_assert_msg(r == -ELOOP || r == -EXDEV, "write %s: %d",
			      reads[i], r);
	}
	ck_assert_int_eq(fs_write(f.ws, "dangling", "PWNED", 5), -ELOOP);
	ck_assert_int_eq(fs_write(f.ws, "ld/new", "PWNED", 5), -ELOOP);
	ck_assert_int_eq(fs_mkdir(f.ws, "ld/newdir", false), -ELOOP);
	ck_assert_int_eq(fs_mkdir(f.ws, "ld/a/b", true), -ELOOP);
	ck_assert_int_eq(fs_mkdir(f.ws, "ld_abs", true), -ELOOP);
	ck_assert_int_eq(fs_list(f.ws, "ld", &l), -ELOOP);
	ck_assert_int_eq(fs_list(f.ws, "sub/up", &l), -ELOOP);
	ck_assert_int_eq(fs_stat(f.ws, "ld/secret", &info), -ELOOP);
	ck_assert_int_eq(fs_delete(f.ws, "ld/secret", false), -ELOOP);
	ck_assert_int_eq(fs_delete(f.ws, "ld_abs/secret", true), -ELOOP);
	ck_assert_int_eq(fs_move(f.ws, "ld/secret", "stolen", false), -ELOOP);
	ck_assert_int_eq(fs_write(f.ws, "mine", "x", 1), 0);
	ck_assert_int_eq(fs_move(f.ws, "mine", "ld/mine", false), -ELOOP);
	ck_assert_int_eq(fs_move(f.ws, "mine", "../outside/mine", false),
			 -EXDEV);

	/* The last component is described, not followed. */
	ck_assert_int_eq(fs_stat(f.ws, "ld", &info), 0);
	ck_assert_int_eq(info.type, FS_TYPE_SYMLINK);
	ck_assert_int_eq(fs_list(f.ws, "", &l), 0);
	for (size_t i = 0; i < l.n; i++)
		if (!strcmp(l.entries[i].name, "lf"))
			ck_assert_int_eq(l.entries[i].info.type,
					 FS_TYPE_SYMLINK);
	fs_listing_free(&l);

	/* Deleting a link removes the link, never its target; a recursive
	 * delete of a tree holding a link to outside leaves outside alone. */
	ck_assert_int_eq(fs_delete(f.ws, "lf", false), 1);
	ck_assert(!exists(f.ws_dir, "lf"));
	link_in(f.ws_dir, "sub/out", f.out_dir);
	ck_assert_int_eq(fs_delete(f.ws, "sub", true), 3);
	ck_assert(!exists(f.ws_dir, "sub"));

	/* Outside: exactly the one file, unchanged. */
	ck_assert_int_eq(count_entries(f.out_dir), 1);
	s = get(f.out_dir, "secret");
	ck_assert_str_eq(s, "SECRET");
	free(s);
	free(abs_secret);
	fixture_done(&f);
}
END_TEST

/*
 * procfs magic links jump anywhere: a workspace that is (or contains a
 * symlink into) /proc/self must not reach through fd/N, cwd or root.
 */
START_TEST(test_magic_links)
{
	struct fixture f;
	struct fs_ws *proc = NULL;
	char *data = NULL, *path = NULL;
	size_t len;
	int r;

	fixture_init(&f);
	put(f.out_dir, "secret", "SECRET");
	int ofd = open(f.out_dir, O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(ofd, 0);
	ck_assert_int_eq(fs_ws_open("/proc/self", &proc), 0);

	ck_assert_int_ge(asprintf(&path, "fd/%d/secret", ofd), 0);
	r = fs_read(proc, path, &data, &len);
	ck_assert_msg(r == -ELOOP || r == -EXDEV, "%s: %d", path, r);
	free(path);
	ck_assert_int_ge(asprintf(&path, "fd/%d/pwned", ofd), 0);
	r = fs_write(proc, path, "PWNED", 5);
	ck_assert_msg(r == -ELOOP || r == -EXDEV, "%s: %d", path, r);
	free(path);
	r = fs_read(proc, "root/etc/hostname", &data, &len);
	ck_assert_msg(r == -ELOOP || r == -EXDEV, "root: %d", r);
	r = fs_mkdir(proc, "cwd/pwned", true);
	ck_assert_msg(r == -ELOOP || r == -EXDEV, "cwd: %d", r);

	/* The same through an ordinary symlink in a real workspace. */
	ck_assert_int_ge(asprintf(&path, "/proc/self/fd/%d", ofd), 0);
	link_in(f.ws_dir, "magic", path);
	free(path);
	ck_assert_int_eq(fs_write(f.ws, "magic/pwned", "PWNED", 5), -ELOOP);
	ck_assert_int_eq(fs_read(f.ws, "magic/secret", &data, &len), -ELOOP);

	ck_assert_int_eq(count_entries(f.out_dir), 1);
	close(ofd);
	fs_ws_free(proc);
	fixture_done(&f);
}
END_TEST

/*
 * A hard link to an outside file cannot be told apart from the file
 * (openat2 has nothing to refuse): reading it works, which is why the
 * sandbox must not let an agent link files it cannot otherwise see.  But
 * a write replaces the directory entry and never changes the outside file.
 */
START_TEST(test_hardlink)
{
	struct fixture f;
	char *a, *b, *s;

	fixture_init(&f);
	put(f.out_dir, "target", "ORIGINAL");
	a = join(f.out_dir, "target");
	b = join(f.ws_dir, "hl");
	if (link(a, b) < 0) {
		int e = errno;
		free(a);
		free(b);
		fixture_done(&f);
		TEST_SKIP("cannot make a hard link in the temp dir: %s",
			  strerror(e));
	}
	assert_read(f.ws, "hl", "ORIGINAL"); /* documented limitation */
	ck_assert_int_eq(fs_write(f.ws, "hl", "PWNED", 5), 0);
	s = get(f.out_dir, "target");
	ck_assert_str_eq(s, "ORIGINAL");
	free(s);
	assert_read(f.ws, "hl", "PWNED");
	free(a);
	free(b);
	fixture_done(&f);
}
END_TEST

/* A failed write leaves the old content and no temporary file. */
START_TEST(test_write_failure_keeps_old)
{
	struct fixture f;
	struct rlimit rl;
	char *s, *big;

	fixture_init(&f);
	ck_assert_int_eq(fs_write(f.ws, "f", "old content", 11), 0);

	ck_assert_int_eq(fs_write(f.ws, "f", "x", FS_WRITE_MAX + 1),
			 -SPD_ETOOBIG);

	/* Make write(2) fail half-way with a file size limit (Check runs
	 * each test in its own process, so the limit dies with it). */
	big = malloc(64 * 1024);
	memset(big, 'N', 64 * 1024);
	signal(SIGXFSZ, SIG_IGN);
	ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &rl), 0);
	rl.rlim_cur = 4096;
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
	ck_assert_int_eq(fs_write(f.ws, "f", big, 64 * 1024), -EFBIG);
	rl.rlim_cur = rl.rlim_max;
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
	free(big);

	s = get(f.ws_dir, "f");
	ck_assert_str_eq(s, "old content");
	free(s);
	ck_assert_int_eq(count_entries(f.ws_dir), 1);
	fixture_done(&f);
}
END_TEST

/* A reader running beside the writer sees one whole version or the
 * other, never a mix or a short file. */
#define ATOMIC_SIZE (256 * 1024)
#define ATOMIC_WRITES 100

struct atomic_ctx {
	struct fs_ws *ws;
	atomic_bool stop;
	int reads, bad;
};

static void *atomic_reader(void *arg)
{
	struct atomic_ctx *c = arg;

	while (!atomic_load(&c->stop)) {
		char *data = NULL;
		size_t len = 0;
		if (fs_read(c->ws, "f", &data, &len) < 0) {
			c->bad++;
			continue;
		}
		c->reads++;
		if (len != ATOMIC_SIZE)
			c->bad++;
		else
			for (size_t i = 1; i < len; i++)
				if (data[i] != data[0]) {
					c->bad++;
					break;
				}
		free(data);
	}
	return NULL;
}

START_TEST(test_write_atomic)
{
	struct fixture f;
	struct atomic_ctx c = {0};
	pthread_t t;
	char *a = malloc(ATOMIC_SIZE), *b = malloc(ATOMIC_SIZE);

	fixture_init(&f);
	memset(a, 'A', ATOMIC_SIZE);
	memset(b, 'B', ATOMIC_SIZE);
	ck_assert_int_eq(fs_write(f.ws, "f", a, ATOMIC_SIZE), 0);
	c.ws = f.ws;
	ck_assert_int_eq(pthread_create(&t, NULL, atomic_reader, &c), 0);
	for (int i = 0; i < ATOMIC_WRITES; i++)
		ck_assert_int_eq(
		    fs_write(f.ws, "f", i % 2 ? a : b, ATOMIC_SIZE), 0);
	atomic_store(&c.stop, true);
	pthread_join(t, NULL);
	ck_assert_int_gt(c.reads, 0);
	ck_assert_int_eq(c.bad, 0);
	free(a);
	free(b);
	fixture_done(&f);
}
END_TEST

/*
 * The race: a thread keeps exchanging the real directory ws/d with a
 * symlink to outside/ (renameat2 RENAME_EXCHANGE, so one of the two is
 * always at "d"), while fs_write writes d/f again and again.  A check on
 * the path followed by an open of the path loses this race within a few
 * hundred tries; openat2 on the descriptor cannot.  The workspace is put
 * on tmpfs when there is one, so that fsync does not slow the writer.
 */
#define RACE_SECONDS 2
#define RACE_MAX_WRITES 200000

struct race_ctx {
	int ws_fd;
	atomic_bool stop;
	long swaps;
	int err;
};

static void *race_swapper(void *arg)
{
	struct race_ctx *c = arg;

	while (!atomic_load(&c->stop)) {
		if (renameat2(c->ws_fd, "d", c->ws_fd, "swap",
			      RENAME_EXCHANGE) < 0) {
			c->err = errno;
			break;
		}
		c->swaps++;
	}
	return NULL;
}

static char *race_base(void)
{
	char tmpl[] = "/dev/shm/spd-fsops-race-XXXXXX";

	if (mkdtemp(tmpl))
		return strdup(tmpl);
	return test_tmpdir("fsops-race");
}

START_TEST(test_race_symlink_swap)
{
	struct fixture f;
	struct race_ctx c = {0};
	struct timespec start, now;
	pthread_t t;
	long ok = 0, refused = 0, other = 0, writes = 0;

	fixture_init_in(&f, race_base());
	ck_assert_int_eq(fs_mkdir(f.ws, "d", false), 1);
	link_in(f.ws_dir, "swap", f.out_dir);
	c.ws_fd = open(f.ws_dir, O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(c.ws_fd, 0);
	ck_assert_int_eq(pthread_create(&t, NULL, race_swapper, &c), 0);
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		int r = fs_write(f.ws, "d/f", "PWNED", 5);
		writes++;
		if (r == 0)
			ok++;
		else if (r == -ELOOP)
			refused++;
		else
			other++;
		if (writes % 64 == 0) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (now.tv_sec - start.tv_sec >= RACE_SECONDS ||
			    writes >= RACE_MAX_WRITES)
				break;
		}
	}
	atomic_store(&c.stop, true);
	pthread_join(t, NULL);
	close(c.ws_fd);
	printf("race: %ld writes (%ld ok, %ld refused, %ld other), "
	       "%ld swaps\n",
	       writes, ok, refused, other, c.swaps);
	ck_assert_int_eq(c.err, 0);
	/* The outcome that matters: not one byte outside. */
	ck_assert_int_eq(count_entries(f.out_dir), 0);
	/* And the race was really run: both states were seen. */
	ck_assert_int_gt(ok, 0);
	ck_assert_int_gt(refused, 0);
	fixture_done(&f);
}
END_TEST

/* In-place mode: the ignore hook and the readable exceptions. */
static bool ignore_build(void *data, const char *rel)
{
	(void)data;
	return !strcmp(rel, "build") || !strncmp(rel, "build/", 6) ||
	       strstr(rel, ".log") != NULL;
}

START_TEST(test_ignored)
{
	static const char *const readable[] = {"build/*.txt", NULL};
	struct fixture f;
	struct fs_listing l = {0};
	struct fs_info info;
	char *data = NULL, *s;
	size_t len;

	fixture_init(&f);
	s = join(f.ws_dir, "build");
	ck_assert_int_eq(mkdir(s, 0700), 0);
	free(s);
	put(f.ws_dir, "build/out.bin", "BIN");
	put(f.ws_dir, "build/out.txt", "TXT");
	put(f.ws_dir, "src.c", "int x;");
	s = join(f.ws_dir, "mixed");
	ck_assert_int_eq(mkdir(s, 0700), 0);
	free(s);
	put(f.ws_dir, "mixed/a.c", "a");
	put(f.ws_dir, "mixed/run.log", "log");
	ck_assert_int_eq(fs_ws_set_ignore(f.ws, ignore_build, NULL, readable),
			 0);

	ck_assert_int_eq(fs_read(f.ws, "build/out.bin", &data, &len),
			 -SPD_EPERM);
	assert_read(f.ws, "build/out.txt", "TXT");
	assert_read(f.ws, "src.c", "int x;");
	ck_assert_int_eq(fs_write(f.ws, "build/out.txt", "X", 1), -SPD_EPERM);
	ck_assert_int_eq(fs_write(f.ws, "new.log", "X", 1), -SPD_EPERM);
	ck_assert_int_eq(fs_stat(f.ws, "build/out.bin", &info), -SPD_EPERM);
	ck_assert_int_eq(fs_mkdir(f.ws, "build/x", true), -SPD_EPERM);
	ck_assert_int_eq(fs_move(f.ws, "src.c", "build/src.c", false),
			 -SPD_EPERM);
	ck_assert_int_eq(fs_delete(f.ws, "build", true), -SPD_EPERM);
	ck_assert_int_eq(fs_delete(f.ws, "mixed", true), -SPD_EPERM);
	ck_assert(exists(f.ws_dir, "mixed/run.log"));
	ck_assert(exists(f.ws_dir, "build/out.bin"));

	ck_assert_int_eq(fs_list(f.ws, "", &l), 0);
	ck_assert_uint_eq(l.n, 2); /* mixed, src.c */
	ck_assert_uint_eq(l.skipped, 1);
	fs_listing_free(&l);
	ck_assert_int_eq(fs_list(f.ws, "mixed", &l), 0);
	ck_assert_uint_eq(l.skipped, 1);
	fs_listing_free(&l);

	/* Turning the hook off restores normal access. */
	ck_assert_int_eq(fs_ws_set_ignore(f.ws, NULL, NULL, NULL), 0);
	assert_read(f.ws, "build/out.bin", "BIN");
	fixture_done(&f);
}
END_TEST

/* Run handler h on params (a json_pack format result, taken) as the
 * operator (or as an agent of session "s1"), to completion. */
static void call(struct call *c, call_handler h, json_t *params, bool operator)
{
	static struct spd spd;
	uv_loop_t loop;

	ck_assert_ptr_nonnull(params);
	ck_assert_int_eq(uv_loop_init(&loop), 0);
	spd.loop = &loop;
	/* The handlers pass the policy gate as in spd. */
	if (!spd.approvals)
		ck_assert_int_eq(gate_start(&spd), 0);
	fakecall_init(c, &spd, params, operator? NULL : "s1");
	h(c);
	ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
	ck_assert(c->done);
	ck_assert_int_eq(uv_loop_close(&loop), 0);
}

static void call_done(struct call *c)
{
	fakecall_free(c);
}

START_TEST(test_handlers)
{
	struct fixture f;
	struct call c;
	char *s;
	const char *ws;

	fixture_init(&f);
	ws = f.ws_dir;
	put(f.out_dir, "secret", "SECRET");
	link_in(f.ws_dir, "out", f.out_dir);

	call(&c, m_fs_write,
	     json_pack("{s:s,s:s,s:s}", "workspace", ws, "path", "a.txt",
		       "content", "hello"),
	     true);
	ck_assert_ptr_nonnull(c.result);
	ck_assert_str_eq(json_string_value(json_object_get(c.result, "path")),
			 "a.txt");
	call_done(&c);
	call(&c, m_fs_read,
	     json_pack("{s:s,s:s}", "workspace", ws, "path", "./a.txt"), true);
	ck_assert_str_eq(
	    json_string_value(json_object_get(c.result, "content")), "hello");
	call_done(&c);

	/* Binary content goes both ways in base64. */
	call(&c, m_fs_write,
	     json_pack("{s:s,s:s,s:s}", "workspace", ws, "path", "bin",
		       "content_base64", "/wAB"),
	     true);
	ck_assert_ptr_nonnull(c.result);
	call_done(&c);
	call(&c, m_fs_read,
	     json_pack("{s:s,s:s}", "workspace", ws, "path", "bin"), true);
	ck_assert_str_eq(
	    json_string_value(json_object_get(c.result, "encoding")), "base64");
	ck_assert_str_eq(
	    json_string_value(json_object_get(c.result, "content_base64")),
	    "/wAB");
	call_done(&c);

	call(&c, m_fs_mkdir,
	     json_pack("{s:s,s:s,s:b}", "workspace", ws, "path", "x/y",
		       "parents", 1),
	     true);
	ck_assert(json_is_true(json_object_get(c.result, "created")));
	call_done(&c);
	call(&c, m_fs_move,
	     json_pack("{s:s,s:s,s:s}", "workspace", ws, "path", "a.txt", "to",
		       "x/y/a.txt"),
	     true);
	ck_assert_ptr_nonnull(c.result);
	call_done(&c);
	call(&c, m_fs_list,
	     json_pack("{s:s,s:s}", "workspace", ws, "path", "x/y"), true);
	ck_assert_uint_eq(json_array_size(json_object_get(c.result, "entries")),
			  1);
	call_done(&c);
	call(&c, m_fs_stat,
	     json_pack("{s:s,s:s}", "workspace", ws, "path", "x/y/a.txt"),
	     true);
	ck_assert_str_eq(json_string_value(json_object_get(c.result, "type")),
			 "file");
	call_done(&c);
	call(&c, m_fs_delete,
	     json_pack("{s:s,s:s,s:b}", "workspace", ws, "path", "x",
		       "recursive", 1),
	     true);
	ck_assert_int_eq(
	    json_integer_value(json_object_get(c.result, "removed")), 3);
	call_done(&c);

	/* Escapes are PATH-ESCAPE, and nothing lands outside. */
	call(&c, m_fs_write,
	     json_pack("{s:s,s:s,s:s}", "workspace", ws, "path", "out/pwned",
		       "content", "PWNED"),
	     true);
	ck_assert_int_eq(c.err, RPC_E_PATH_ESCAPE);
	call_done(&c);
	call(&c, m_fs_read,
	     json_pack("{s:s,s:s}", "workspace", ws, "path",
		       "../outside/secret"),
	     true);
	ck_assert_int_eq(c.err, RPC_E_PATH_ESCAPE);
	call_done(&c);
	call(&c, m_fs_move,
	     json_pack("{s:s,s:s,s:s}", "workspace", ws, "path", "bin", "to",
		       "out/bin"),
	     true);
	ck_assert_int_eq(c.err, RPC_E_PATH_ESCAPE);
	call_done(&c);

	/* A NUL inside the JSON string is a bad request, not a shorter path. */
	call(&c, m_fs_write,
	     json_pack("{s:s,s:s#,s:s}", "workspace", ws, "path", "bin\0x", 5,
		       "content", "x"),
	     true);
	ck_assert_int_eq(c.err, RPC_E_BAD_REQUEST);
	call_done(&c);
	call(&c, m_fs_read,
	     json_pack("{s:s,s:s}", "workspace", ws, "path", "missing"), true);
	ck_assert_int_eq(c.err, RPC_E_BAD_REQUEST);
	ck_assert_str_eq(
	    json_string_value(json_object_get(c.err_data, "errno")), "ENOENT");
	call_done(&c);
	call(&c, m_fs_write,
	     json_pack("{s:s,s:s,s:s,s:s}", "workspace", ws, "path", "t",
		       "content", "a", "content_base64", "YQ=="),
	     true);
	ck_assert_int_eq(c.err, RPC_E_BAD_PARAMS);
	call_done(&c);

	/* The operator must say where; an agent may not choose. */
	call(&c, m_fs_read, json_pack("{s:s}", "path", "bin"), true);
	ck_assert_int_eq(c.err, RPC_E_BAD_PARAMS);
	call_done(&c);
	call(&c, m_fs_read,
	     json_pack("{s:s,s:s}", "workspace", ws, "path", "bin"), false);
	ck_assert_int_eq(c.err, RPC_E_UNAUTHORIZED);
	call_done(&c);

	ck_assert_int_eq(count_entries(f.out_dir), 1);
	s = get(f.out_dir, "secret");
	ck_assert_str_eq(s, "SECRET");
	free(s);
	fixture_done(&f);
}
END_TEST

static Suite *fsops_suite(void)
{
	Suite *s = suite_create("fsops");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_normalize);
	tcase_add_test(tc, test_basic_ops);
	tcase_add_test(tc, test_read_limits);
	tcase_add_test(tc, test_list_limit);
	tcase_add_test(tc, test_symlink_escapes);
	tcase_add_test(tc, test_magic_links);
	tcase_add_test(tc, test_hardlink);
	tcase_add_test(tc, test_write_failure_keeps_old);
	tcase_add_test(tc, test_write_atomic);
	tcase_add_test(tc, test_race_symlink_swap);
	tcase_add_test(tc, test_ignored);
	tcase_add_test(tc, test_handlers);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(fsops_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

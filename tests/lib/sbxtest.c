/*
 * The sandbox suites' fixture and store trees (tests/lib/sbxtest.h).
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "common/buf.h"
#include "daemon/sandbox/sbx.h"
#include "proto/sandbox.h"
#include "sandboxd/linux/layers.h"
#include "tests/lib/sbxtest.h"
#include "tests/lib/testlib.h"

const char *sbxt_outside_base(void)
{
	const char *e = getenv("SPD_TEST_OUTSIDE");

	if (e && e[0] == '/')
		return e;
	return geteuid() == 0 ? "/var" : "/var/tmp";
}

bool sbxt_outside_is_private(void)
{
	return !strcmp(sbxt_outside_base(), "/var/tmp");
}

static void on_output(void *data, int stream, const char *buf, size_t len)
{
	struct sbxt_outcome *o = data;

	buf_append(stream == 1 ? &o->out : &o->err, buf, len);
}

static void on_done(void *data, const struct sbx_result *r)
{
	struct sbxt_outcome *o = data;

	o->done = true;
	o->exit_code = r->exit_code;
	o->term_signal = r->term_signal;
	o->timed_out = r->timed_out;
	o->cancelled = r->cancelled;
	o->ended = (int)r->ended;
	o->dropped[0] = r->bytes_dropped[0];
	o->dropped[1] = r->bytes_dropped[1];
	o->error_code = r->error ? strdup(sbxp_err_code(r->error)) : NULL;
	o->error_msg = r->error_msg ? strdup(r->error_msg) : NULL;
	for (o->nwarn = 0; r->warnings[o->nwarn]; o->nwarn++) {
		size_t n = strlen(o->warnings);

		snprintf(o->warnings + n, sizeof(o->warnings) - n, "%s%s",
			 n ? "; " : "", r->warnings[o->nwarn]);
	}
}

const struct sbx_cbs sbxt_cbs = {on_output, on_done, NULL};

void sbxt_outcome_free(struct sbxt_outcome *o)
{
	buf_free(&o->out);
	buf_free(&o->err);
	free(o->error_code);
	free(o->error_msg);
}

void sbxt_wait_for_spare(void)
{
	usleep(100 * 1000);
}

char *sbxt_init_status(const char *pid, pid_t sandboxd)
{
	char path[300], *st, *ppid;

	if (pid[0] < '1' || pid[0] > '9')
		return NULL;
	snprintf(path, sizeof(path), "/proc/%s/status", pid);
	st = test_read_file(path);
	ppid = st ? strstr(st, "\nPPid:\t") : NULL;
	/* Executed from its memfd: named "memfd:sandboxd-init", cut to the
	 * 15 bytes a comm holds. */
	if (st && strncmp(st, "Name:\tmemfd:sandboxd", 20) == 0 && ppid &&
	    atoi(ppid + 7) == (int)sandboxd)
		return st;
	free(st);
	return NULL;
}

bool sbxt_has_init(pid_t sandboxd)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	char *st = NULL;

	ck_assert_ptr_nonnull(d);
	while (!st && (e = readdir(d)))
		st = sbxt_init_status(e->d_name, sandboxd);
	closedir(d);
	free(st);
	return st != NULL;
}

void sbxt_setup(struct sbxt_fixture *f, const char *sandboxd)
{
	char *prog = sandboxd ? strdup(sandboxd) : test_prog("sandboxd");
	char tmpl[PATH_MAX];

	snprintf(tmpl, sizeof(tmpl), "%s/spd-test-sbx-XXXXXX",
		 sbxt_outside_base());
	memset(f, 0, sizeof(*f));
	ck_assert_int_eq(uv_loop_init(&f->loop), 0);
	ck_assert_int_eq(sbx_start(&f->loop, prog, &f->s), 0);
	free(prog);
	f->ws = test_tmpdir("sbx");
	ck_assert_ptr_nonnull(mkdtemp(tmpl));
	f->outside = strdup(tmpl);
	chmod(f->outside, 0777);
}

static void on_closed(void *data)
{
	*(bool *)data = true;
}

void sbxt_teardown(struct sbxt_fixture *f)
{
	sbx_close(f->s, on_closed, &f->closed);
	while (!f->closed)
		uv_run(&f->loop, UV_RUN_ONCE);
	uv_run(&f->loop, UV_RUN_DEFAULT);
	ck_assert_int_eq(uv_loop_close(&f->loop), 0);
	test_rmrf(f->ws);
	test_rmrf(f->outside);
	free(f->ws);
	free(f->outside);
}

static char *default_env[] = {"PATH=/usr/local/bin:/usr/bin:/bin",
			      "LANG=C.UTF-8", NULL};

void sbxt_spec_init(struct sbxt_fixture *f, struct sbx_spec *sp,
		    char *const *argv)
{
	memset(sp, 0, sizeof(*sp));
	sp->argv = argv;
	sp->envp = default_env;
	sp->workspace = f->ws;
	sp->home = f->outside; /* never the operator's real home */
	sp->timeout_ms = 20000;
}

void sbxt_run(struct sbxt_fixture *f, const struct sbx_spec *sp,
	      struct sbxt_outcome *o)
{
	memset(o, 0, sizeof(*o));
	ck_assert_int_eq(sbx_run(f->s, sp, &sbxt_cbs, o, NULL), 0);
	while (!o->done)
		uv_run(&f->loop, UV_RUN_ONCE);
}

void sbxt_run_sh(struct sbxt_fixture *f, char *script, struct sbxt_outcome *o)
{
	char *argv[] = {"/bin/sh", "-c", script, NULL};
	struct sbx_spec sp;

	sbxt_spec_init(f, &sp, argv);
	sbxt_run(f, &sp, o);
}

bool sbxt_unavailable(const struct sbxt_outcome *o)
{
	if (!o->error_code || strcmp(o->error_code, "SANDBOX-UNAVAILABLE"))
		return false;
	return !strncmp(o->error_msg, "user namespaces:", 16) ||
	       layer_landlock_abi() <= 0;
}

long long sbxt_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sbxt_assert_file(const char *path, const char *want)
{
	char *c = test_read_file(path);

	ck_assert_ptr_nonnull(c);
	ck_assert_str_eq(c, want);
	free(c);
}

/* mkdir -p of path (PATH_MAX at most), each directory mode 0755. */
static void store_mkdirs(const char *path)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s", path);
	for (char *c = p + 1; *c; c++) {
		if (*c != '/')
			continue;
		*c = '\0';
		ck_assert_msg(mkdir(p, 0755) == 0 || errno == EEXIST,
			      "mkdir %s: %s", p, strerror(errno));
		*c = '/';
	}
	ck_assert_msg(mkdir(p, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", p,
		      strerror(errno));
}

/* The store's file S/REL, of content WANT, mode 0644, linked to D/REL. */
static void store_link(const char *s, const char *d, const char *rel,
		       const char *want)
{
	char a[PATH_MAX], b[PATH_MAX];

	snprintf(a, sizeof(a), "%s/%s", s, rel);
	snprintf(b, sizeof(b), "%s/%s", d, rel);
	test_write_file(a, want);
	ck_assert_int_eq(chmod(a, 0644), 0);
	if (link(a, b) < 0)
		TEST_SKIP("cannot hard-link %s into the workspace: %s", a,
			  strerror(errno));
}

void sbxt_store_tree(struct sbxt_fixture *f, int npkg)
{
	char cmd[2048], s[PATH_MAX], d[PATH_MAX], rel[32], want[32];

	/* The packages without a process for each file: 1,440 of them
	 * take seconds to link from the shell on a loaded machine. */
	for (int i = 1; i <= npkg; i++) {
		snprintf(s, sizeof(s), "%s/store/p%d/lib", f->outside, i);
		store_mkdirs(s);
		s[strlen(s) - 4] = '\0';
		if (i == 3) {
			snprintf(d, sizeof(d), "%s/vendor/p3/lib", f->ws);
		} else {
			snprintf(
			    d, sizeof(d),
			    "%s/node_modules/.pnpm/p%d/node_modules/p%d/lib",
			    f->ws, i, i);
		}
		store_mkdirs(d);
		d[strlen(d) - 4] = '\0';
		if (i != 3) {
			char dep[PATH_MAX + 8];

			snprintf(dep, sizeof(dep), "%s/../dep", d);
			ck_assert_int_eq(
			    symlink("../../p1/node_modules/p1", dep), 0);
		}
		for (int j = 1; j <= 12; j++) {
			snprintf(rel, sizeof(rel), "f%d", j);
			snprintf(want, sizeof(want), "s%d.%d\n", i, j);
			store_link(s, d, rel, want);
			snprintf(rel, sizeof(rel), "lib/g%d", j);
			snprintf(want, sizeof(want), "l%d.%d\n", i, j);
			store_link(s, d, rel, want);
		}
	}
	snprintf(cmd, sizeof(cmd),
		 "set -e; cd '%s'; S='%s/store'; P=node_modules/.pnpm;"
		 " echo lock > $P/lock.yaml;"
		 " mkdir -p $P/node_modules/.bin node_modules/.bin;"
		 " echo hoisted > $P/node_modules/.bin/h;"
		 " echo m > node_modules/.modules.yaml;"
		 " echo shim > node_modules/.bin/vite;"
		 " mkdir -p $P/p2/node_modules/p2/node_modules/.bin;"
		 " echo shim > $P/p2/node_modules/p2/node_modules/.bin/shim;"
		 " echo uv > $P/p4/node_modules/p4/INSTALLER;"
		 " for k in $(seq 1 13); do"
		 "  echo built > vendor/p3/built$k.node; done;"
		 " mkdir -p .git/objects/ab $S/git;"
		 " for j in 1 2 3; do echo o$j > $S/git/o$j;"
		 "  ln $S/git/o$j .git/objects/ab/o$j; done;"
		 " mkdir src; echo a > src/a; ln src/a src/b",
		 f->ws, f->outside);
	if (system(cmd) != 0)
		TEST_SKIP("cannot build the linked store tree in %s", f->ws);
}

char sbxt_store_script[] =
    "P=node_modules/.pnpm; n=0;"
    " for h in $(find node_modules vendor .git -type f -links +1); do"
    "  { echo x >> $h; } 2>/dev/null && echo append:$h;"
    "  n=$((n+1)); done; echo linked:$n;"
    /* Without a process for each name: thousands of them take seconds
     * on a loaded machine. */
    " for h in $(find node_modules vendor .git -type f -links +1"
    "  \\( -name f1 -o -name g1 -o -name o1 \\)); do"
    "  truncate -s 0 $h 2>/dev/null && echo truncate:$h;"
    "  chmod 0666 $h 2>/dev/null && echo chmod:$h; done;"
    " (echo y >> $P/lock.yaml) 2>/dev/null && echo lock;"
    " (echo y >> $P/node_modules/.bin/h) 2>/dev/null && echo hoisted;"
    " mkdir $P/new 2>/dev/null && echo pnpmnew;"
    " echo y >> node_modules/.modules.yaml && echo modules;"
    " echo y >> node_modules/.bin/vite && echo bin;"
    " (echo y >> $P/p2/node_modules/p2/node_modules/.bin/shim) 2>/dev/null"
    "  && echo shim;"
    " touch $P/p2/node_modules/p2/node_modules/.bin/new 2>/dev/null"
    "  && echo binnew;"
    " echo y >> vendor/p3/built1.node && echo built;"
    " touch vendor/p3/new && echo p3new;"
    " touch vendor/p3/lib/new 2>/dev/null && echo p3libnew;"
    " touch $P/p4/node_modules/p4/new 2>/dev/null && echo p4new;"
    " (echo y >> $P/p4/node_modules/p4/INSTALLER) 2>/dev/null && echo inst;"
    " rm -rf $P/p5 2>/dev/null && echo rm;"
    " touch .git/objects/ab/new && echo objnew;"
    " echo y >> src/b && echo inside;"
    " mkdir -p node_modules/.vite && touch node_modules/.vite/x && echo vite;"
    " cat $P/p6/node_modules/dep/f1";

/* A store's file as it was made: its content, mode 0644, and its two
 * links (the store's and the workspace's). */
static void store_file_intact(const char *path, const char *want)
{
	struct stat st;

	sbxt_assert_file(path, want);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0644);
	ck_assert_int_eq(st.st_nlink, 2);
}

void sbxt_store_unchanged(struct sbxt_fixture *f, int npkg)
{
	char path[PATH_MAX + 64], want[64];

	for (int i = 1; i <= npkg; i++)
		for (int j = 1; j <= 12; j++)
			for (int k = 0; k < 2; k++) {
				snprintf(path, sizeof(path),
					 "%s/store/p%d/%s%d", f->outside, i,
					 k ? "lib/g" : "f", j);
				snprintf(want, sizeof(want), "%c%d.%d\n",
					 k ? 'l' : 's', i, j);
				store_file_intact(path, want);
			}
	for (int j = 1; j <= 3; j++) {
		snprintf(path, sizeof(path), "%s/store/git/o%d", f->outside, j);
		snprintf(want, sizeof(want), "o%d\n", j);
		sbxt_assert_file(path, want);
	}
}

void sbxt_own_mount_ns(void)
{
	char map[64];
	uid_t uid = geteuid();
	gid_t gid = getegid();

	if (uid != 0) {
		if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
			TEST_SKIP("cannot make a user namespace to mount in: "
				  "%s",
				  strerror(errno));
		snprintf(map, sizeof(map), "%u %u 1", (unsigned)uid,
			 (unsigned)uid);
		test_write_file("/proc/self/uid_map", map);
		test_write_file("/proc/self/setgroups", "deny");
		snprintf(map, sizeof(map), "%u %u 1", (unsigned)gid,
			 (unsigned)gid);
		test_write_file("/proc/self/gid_map", map);
	} else {
		ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
	}
	ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
}

/* outside/NAME holding want, mode 0644, with a second name outside/NAME2
 * (outside what is mounted in the workspace); its path in path. */
static void outside_linked(struct sbxt_fixture *f, const char *name,
			   const char *name2, const char *want, char *path,
			   size_t len)
{
	char b[PATH_MAX + 64];

	snprintf(path, len, "%s/%s", f->outside, name);
	test_write_file(path, want);
	ck_assert_int_eq(chmod(path, 0644), 0);
	snprintf(b, sizeof(b), "%s/%s", f->outside, name2);
	ck_assert_int_eq(link(path, b), 0);
}

void sbxt_volumes_mount(struct sbxt_fixture *f, char *sub, char *one,
			size_t len)
{
	char a[PATH_MAX + 64];

	snprintf(a, sizeof(a), "%s/vol", f->outside);
	ck_assert_int_eq(mkdir(a, 0755), 0);
	outside_linked(f, "vol/secret", "secret2", "VOLUME\n", a, sizeof(a));
	snprintf(sub, len, "%s/node_modules/.pnpm/p8/node_modules/p8/sub",
		 f->ws);
	ck_assert_int_eq(mkdir(sub, 0755), 0);
	snprintf(a, sizeof(a), "%s/vol", f->outside);
	ck_assert_int_eq(mount(a, sub, NULL, MS_BIND, NULL), 0);
	outside_linked(f, "onefile", "onefile2", "ONEFILE\n", a, sizeof(a));
	snprintf(one, len, "%s/node_modules/.pnpm/p9/node_modules/p9/f1",
		 f->ws);
	ck_assert_int_eq(mount(a, one, NULL, MS_BIND, NULL), 0);
}

char sbxt_volumes_script[] =
    "P=node_modules/.pnpm;"
    " (echo x >> $P/p8/node_modules/p8/sub/secret) 2>/dev/null && echo sub;"
    " (echo x >> $P/p9/node_modules/p9/f1) 2>/dev/null && echo file;"
    " (echo x >> $P/p8/node_modules/p8/f1) 2>/dev/null && echo pkg;"
    " cat $P/p8/node_modules/p8/sub/secret $P/p9/node_modules/p9/f1"
    "  2>/dev/null";

void sbxt_volumes_unchanged(struct sbxt_fixture *f, const char *sub,
			    const char *one)
{
	char a[PATH_MAX + 64];

	ck_assert_int_eq(umount2(one, MNT_DETACH), 0);
	ck_assert_int_eq(umount2(sub, MNT_DETACH), 0);
	snprintf(a, sizeof(a), "%s/vol/secret", f->outside);
	sbxt_assert_file(a, "VOLUME\n");
	snprintf(a, sizeof(a), "%s/onefile", f->outside);
	sbxt_assert_file(a, "ONEFILE\n");
	sbxt_store_unchanged(f, SBXT_VOLUMES_NPKG);
}

void sbxt_store_many(struct sbxt_fixture *f, int npkg)
{
	char a[PATH_MAX + 64], b[PATH_MAX + 64];

	snprintf(a, sizeof(a), "%s/store", f->outside);
	ck_assert_int_eq(mkdir(a, 0755), 0);
	snprintf(b, sizeof(b), "%s/node_modules", f->ws);
	ck_assert_int_eq(mkdir(b, 0755), 0);
	snprintf(b, sizeof(b), "%s/node_modules/.pnpm", f->ws);
	ck_assert_int_eq(mkdir(b, 0755), 0);
	for (int i = 1; i <= npkg; i++) {
		char want[32];
		int n;

		n = snprintf(b, sizeof(b), "%s/node_modules/.pnpm/p%d", f->ws,
			     i);
		ck_assert_int_eq(mkdir(b, 0755), 0);
		n += snprintf(b + n, sizeof(b) - (size_t)n, "/node_modules");
		ck_assert_int_eq(mkdir(b, 0755), 0);
		n += snprintf(b + n, sizeof(b) - (size_t)n, "/p%d", i);
		ck_assert_int_eq(mkdir(b, 0755), 0);
		snprintf(b + n, sizeof(b) - (size_t)n, "/index.js");
		snprintf(a, sizeof(a), "%s/store/m%d", f->outside, i);
		snprintf(want, sizeof(want), "m%d\n", i);
		test_write_file(a, want);
		ck_assert_int_eq(chmod(a, 0644), 0);
		if (link(a, b) < 0)
			TEST_SKIP("cannot hard-link %s into the workspace: %s",
				  a, strerror(errno));
	}
	snprintf(b, sizeof(b), "%s/node_modules/.pnpm/lock.yaml", f->ws);
	test_write_file(b, "lock\n");
	snprintf(b, sizeof(b), "%s/node_modules/.modules.yaml", f->ws);
	test_write_file(b, "m\n");
}

char sbxt_store_many_script[] =
    "P=node_modules/.pnpm; n=0;"
    " for h in $P/p*/node_modules/p*/index.js; do"
    "  { echo x >> $h; } 2>/dev/null && n=$((n+1)); done; echo written:$n;"
    " touch $P/p7/node_modules/p7/new 2>/dev/null && echo new;"
    " mkdir $P/p0 2>/dev/null && echo p0;"
    " (echo y >> $P/lock.yaml) 2>/dev/null && echo lock;"
    " echo y >> node_modules/.modules.yaml && echo modules;"
    " cat $P/p7/node_modules/p7/index.js";

void sbxt_store_many_unchanged(struct sbxt_fixture *f, int npkg)
{
	char path[PATH_MAX + 64], want[32];

	for (int i = 1; i <= npkg; i++) {
		snprintf(path, sizeof(path), "%s/store/m%d", f->outside, i);
		snprintf(want, sizeof(want), "m%d\n", i);
		store_file_intact(path, want);
	}
}

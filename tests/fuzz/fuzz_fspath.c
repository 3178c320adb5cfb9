/*
 * Fuzz the file tools' path handling: arbitrary bytes as a path.
 *
 * Checked for every input:
 *   - fs_path_normalize never crashes, is deterministic, and a path it
 *     accepts is in canonical form (no leading, trailing or doubled '/',
 *     no "." or ".." component, no longer than the input) and normalizes
 *     to itself;
 *   - fs_write, fs_mkdir (with parents) and fs_stat on that path, in a
 *     workspace holding symlinks to outside, to its parent and to itself,
 *     never create or change anything outside: after each input the
 *     outside directory holds exactly its one file, unchanged, and the base
 *     directory holds nothing but the workspace and outside.
 * What the tools create inside the workspace is removed after each input.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "daemon/sandbox/fsops.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SECRET "SECRET"

static char base[64];
static char ws_dir[128], out_dir[128], secret_path[160];
static struct fs_ws *ws;

/* The fixture's directories and the entries each keeps; anything else
 * the tools made there is removed after each input. */
static const struct {
	const char *dir;
	const char *keep[6];
} fixture[] = {
    {"", {"a", "f", "out", "up", "self", NULL}},
    {"a", {"b", NULL}},
    {"a/b", {"esc", NULL}},
};

static int rm_one(const char *p, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP)
		rmdir(p);
	else
		unlink(p);
	return 0;
}

static void cleanup(void)
{
	fs_ws_free(ws);
	if (base[0])
		nftw(base, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void put(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, s, strlen(s)) != (ssize_t)strlen(s))
		abort();
	close(fd);
}

static void setup(void)
{
	char p[256];

	snprintf(base, sizeof(base), "/dev/shm/spd-fuzz-fspath-XXXXXX");
	if (!mkdtemp(base)) {
		snprintf(base, sizeof(base), "/tmp/spd-fuzz-fspath-XXXXXX");
		if (!mkdtemp(base))
			abort();
	}
	snprintf(ws_dir, sizeof(ws_dir), "%s/ws", base);
	snprintf(out_dir, sizeof(out_dir), "%s/outside", base);
	snprintf(secret_path, sizeof(secret_path), "%s/secret", out_dir);
	if (mkdir(ws_dir, 0700) < 0 || mkdir(out_dir, 0700) < 0)
		abort();
	put(secret_path, SECRET);
	snprintf(p, sizeof(p), "%s/a", ws_dir);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/a/b", ws_dir);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/f", ws_dir);
	put(p, "inside");
	snprintf(p, sizeof(p), "%s/out", ws_dir);
	if (symlink(out_dir, p) < 0)
		abort();
	snprintf(p, sizeof(p), "%s/up", ws_dir);
	if (symlink("..", p) < 0)
		abort();
	snprintf(p, sizeof(p), "%s/self", ws_dir);
	if (symlink(".", p) < 0)
		abort();
	snprintf(p, sizeof(p), "%s/a/b/esc", ws_dir);
	if (symlink("../../../outside/secret", p) < 0)
		abort();
	if (fs_ws_open(ws_dir, &ws) < 0)
		abort();
	atexit(cleanup);
}

static int count_entries(const char *dir, const char *only1, const char *only2)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		abort();
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (strcmp(de->d_name, only1) &&
		    (!only2 || strcmp(de->d_name, only2)))
			abort(); /* something appeared outside */
		n++;
	}
	closedir(d);
	return n;
}

static void check_outside(void)
{
	char buf[64];
	int fd;
	ssize_t n;

	count_entries(out_dir, "secret", NULL);
	count_entries(base, "ws", "outside");
	fd = open(secret_path, O_RDONLY);
	if (fd < 0)
		abort();
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n != (ssize_t)strlen(SECRET) || memcmp(buf, SECRET, (size_t)n))
		abort(); /* the outside file was changed */
}

static void check_canonical(const char *rel, size_t in_len)
{
	size_t n = strlen(rel);
	const char *p = rel;

	if (n > in_len)
		abort();
	if (n == 0)
		return;
	if (rel[0] == '/' || rel[n - 1] == '/' || strstr(rel, "//"))
		abort();
	while (*p) {
		const char *e = strchrnul(p, '/');
		size_t cl = (size_t)(e - p);
		if ((cl == 1 && p[0] == '.') ||
		    (cl == 2 && p[0] == '.' && p[1] == '.'))
			abort();
		if (cl > FS_NAME_MAX)
			abort();
		p = *e ? e + 1 : e;
	}
}

/* Put the workspace back: drop what the tools made and restore the
 * fixture's file content. */
static void restore(void)
{
	for (size_t d = 0; d < ARRAY_SIZE(fixture); d++) {
		struct fs_listing l = {0};
		char p[512];

		if (fs_list(ws, fixture[d].dir, &l) < 0)
			abort();
		for (size_t i = 0; i < l.n; i++) {
			bool keep = false;
			for (const char *const *k = fixture[d].keep; *k; k++)
				keep |= !strcmp(l.entries[i].name, *k);
			if (keep)
				continue;
			snprintf(p, sizeof(p), "%s%s%s", fixture[d].dir,
				 *fixture[d].dir ? "/" : "", l.entries[i].name);
			if (fs_delete(ws, p, true) < 0)
				abort();
		}
		fs_listing_free(&l);
	}
	if (fs_write(ws, "f", "inside", 6) < 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *rel = NULL, *rel2 = NULL, *again = NULL, *path;
	struct fs_info info;
	int r, r2;

	if (!ws)
		setup();
	if (size > FS_PATH_MAX + 16)
		return 0;
	r = fs_path_normalize(ws, (const char *)data, size, &rel);
	r2 = fs_path_normalize(ws, (const char *)data, size, &rel2);
	if (r != r2 || (r == 0 && strcmp(rel, rel2)))
		abort(); /* not deterministic */
	if (r == 0) {
		check_canonical(rel, size);
		if (fs_path_normalize(ws, rel, strlen(rel), &again) != 0 ||
		    strcmp(again, rel))
			abort(); /* not idempotent */
	} else if (r != -EXDEV && r != -EINVAL && r != -SPD_EUTF8 &&
		   r != -ENAMETOOLONG) {
		abort(); /* an error the handler cannot map */
	}

	/* The whole pipeline, on the bytes up to the first NUL. */
	path = strndup((const char *)data, size);
	if (!path)
		abort();
	(void)fs_write(ws, path, "PWNED", 5);
	check_outside();
	(void)fs_mkdir(ws, path, true);
	check_outside();
	(void)fs_stat(ws, path, &info);
	restore();
	check_outside();

	free(path);
	free(rel);
	free(rel2);
	free(again);
	return 0;
}

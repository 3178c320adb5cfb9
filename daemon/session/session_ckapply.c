/*
 * One name a workspace's watch saw change, into spd's index of a
 * worktree (the checkpoints' incremental read, session_work.c): a name
 * gone, a file or symlink, a directory read whole.  Part of the session
 * module (session_priv.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/paths.h"
#include "common/util.h"
#include "daemon/session/session.h"
#include "daemon/session/session_priv.h"

/* The most entries one incremental update visits (a directory made or
 * moved in is read whole) before it reads the worktree whole instead. */
#define CK_VISIT_MAX 20000

/* The largest file ck_add_file reads whole; a larger one goes through
 * libgit2's stream as before. */
#define CK_READ_MAX ((off_t)64 << 20)

/*
 * A regular file into spd's index, its blob written only when the
 * repository lacks it.  libgit2's git_index_add_bypath streams a file
 * with no filter through a new temporary object file even when the
 * object is there (the agent's committed files, just copied by its
 * sync: a file made and removed for each, 0.3-1 ms apiece on a file
 * system slow to make files), where git_odb_write hashes first.  The
 * entry is what libgit2 makes of the file's stat
 * (git_index_entry__init_from_stat).  A file with a filter (crlf, ident,
 * a driver), an index that does not trust file modes, or a file past
 * CK_READ_MAX goes through libgit2 as before.  Read below the worktree
 * without following a symlink.  0, or -1.
 */
static int ck_add_file(struct sess *x, const char *rel)
{
	git_filter_list *fl = NULL;
	git_index_entry e;
	git_odb *odb = NULL;
	struct stat st;
	_cleanup_close_ int wt = -1, fd = -1;
	char *buf = NULL;
	size_t have = 0;
	int r = -1;

	if ((git_index_caps(x->ck_idx) & GIT_INDEX_CAPABILITY_NO_FILEMODE) ||
	    git_filter_list_load(&fl, x->ck_repo, NULL, rel, GIT_FILTER_TO_ODB,
				 GIT_FILTER_DEFAULT) < 0 ||
	    fl) {
		git_filter_list_free(fl);
		return git_index_add_bypath(x->ck_idx, rel);
	}
	wt = open(x->info.worktree, O_PATH | O_DIRECTORY | O_CLOEXEC);
	fd = wt < 0 ? -1 : sess_open_regular(wt, rel, &st);
	if (fd < 0)
		return -1;
	if (st.st_size > CK_READ_MAX)
		return git_index_add_bypath(x->ck_idx, rel);
	buf = malloc((size_t)st.st_size + 1);
	while (buf && have <= (size_t)st.st_size) {
		ssize_t k = read(fd, buf + have, (size_t)st.st_size + 1 - have);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		have += (size_t)k;
	}
	/* Changed while read: the whole worktree is read instead. */
	if (!buf || have != (size_t)st.st_size)
		goto out;
	memset(&e, 0, sizeof(e));
	e.ctime.seconds = (int32_t)st.st_ctim.tv_sec;
	e.ctime.nanoseconds = (uint32_t)st.st_ctim.tv_nsec;
	e.mtime.seconds = (int32_t)st.st_mtim.tv_sec;
	e.mtime.nanoseconds = (uint32_t)st.st_mtim.tv_nsec;
	e.dev = (uint32_t)st.st_rdev;
	e.ino = (uint32_t)st.st_ino;
	e.mode = (st.st_mode & S_IXUSR) ? GIT_FILEMODE_BLOB_EXECUTABLE
					: GIT_FILEMODE_BLOB;
	e.uid = st.st_uid;
	e.gid = st.st_gid;
	e.file_size = (uint32_t)st.st_size;
	e.path = rel;
	if (git_repository_odb(&odb, x->ck_repo) == 0 &&
	    git_odb_write(&e.id, odb, buf, have, GIT_OBJECT_BLOB) == 0 &&
	    git_index_add(x->ck_idx, &e) == 0)
		r = 0;
out:
	git_odb_free(odb);
	free(buf);
	return r;
}

/*
 * "DIR/" from the watch's first walk: an entry of DIR was made, removed
 * or renamed while the walk had no watch on it.  What was made is in the
 * log by its own name; here the index drops what went (each direct child
 * of DIR it holds is looked for).  A directory the index knows nothing
 * below came whole: it is read whole.
 */
static int ck_prune(struct sess *x, const char *dir, size_t *visits)
{
	size_t pos, dlen = strlen(dir);
	char last[NAME_MAX + 1] = "";
	bool any = false;

	if (git_index_find_prefix(&pos, x->ck_idx, dir) == 0)
		for (; pos < git_index_entrycount(x->ck_idx); pos++) {
			const git_index_entry *e =
			    git_index_get_byindex(x->ck_idx, pos);
			const char *child, *slash;
			char *path, *crel;
			struct stat st;
			size_t clen;

			if (strncmp(e->path, dir, dlen) != 0)
				break;
			if (dlen && e->path[dlen] != '/')
				continue;
			any = true;
			child = e->path + (dlen ? dlen + 1 : 0);
			slash = strchr(child, '/');
			clen = slash ? (size_t)(slash - child) : strlen(child);
			if (clen > NAME_MAX || (strlen(last) == clen &&
						memcmp(last, child, clen) == 0))
				continue;
			memcpy(last, child, clen);
			last[clen] = '\0';
			if (++*visits > CK_VISIT_MAX)
				return -EAGAIN;
			if (asprintf(&crel, "%s%s%s", dir, dlen ? "/" : "",
				     last) < 0)
				return -ENOMEM;
			path = paths_join(x->info.worktree, crel);
			if (path && lstat(path, &st) < 0 &&
			    (errno == ENOENT || errno == ENOTDIR)) {
				git_index_remove_bypath(x->ck_idx, crel);
				git_index_remove_directory(x->ck_idx, crel, 0);
				/* The index moved under the loop: look again
				 * from the first entry of dir. */
				if (git_index_find_prefix(&pos, x->ck_idx,
							  dir) == 0)
					pos--;
				else
					pos = git_index_entrycount(x->ck_idx);
			}
			free(crel);
			if (!path)
				return -ENOMEM;
			free(path);
		}
	return any ? 0 : sess_ck_apply(x, dir, 0, visits);
}

int sess_ck_apply(struct sess *x, const char *rel, int depth, size_t *visits)
{
	const char *base = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;
	char *path, *dirrel = NULL;
	struct stat st;
	int ign = 0, r = 0;

	if (depth == 0 && rel[0] && rel[strlen(rel) - 1] == '/') {
		char *dir = strndup(rel, strlen(rel) - 1);

		r = dir ? ck_prune(x, dir, visits) : -ENOMEM;
		free(dir);
		return r;
	}

	if (++*visits > CK_VISIT_MAX || depth > 64)
		return -EAGAIN;
	if (strcmp(base, ".gitignore") == 0 ||
	    strcmp(base, ".gitattributes") == 0 || strcmp(base, ".git") == 0)
		return -EAGAIN;
	path = paths_join(x->info.worktree, rel);
	if (!path)
		return -ENOMEM;
	if (lstat(path, &st) < 0) {
		r = errno == ENOENT || errno == ENOTDIR ? 0 : -EAGAIN;
		if (r == 0) {
			git_index_remove_bypath(x->ck_idx, rel);
			git_index_remove_directory(x->ck_idx, rel, 0);
		}
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		DIR *d;
		struct dirent *e;

		if (depth == 0) {
			git_index_remove_bypath(x->ck_idx, rel);
			git_index_remove_directory(x->ck_idx, rel, 0);
		}
		if (asprintf(&dirrel, "%s/", rel) < 0) {
			r = -ENOMEM;
			goto out;
		}
		if (git_ignore_path_is_ignored(&ign, x->ck_repo, dirrel) < 0) {
			r = -EAGAIN;
			goto out;
		}
		if (ign)
			goto out;
		if (!(d = opendir(path))) {
			r = -EAGAIN;
			goto out;
		}
		while (r == 0 && (e = readdir(d))) {
			char *child;

			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			if (asprintf(&child, "%s%s", dirrel, e->d_name) < 0) {
				r = -ENOMEM;
				break;
			}
			r = sess_ck_apply(x, child, depth + 1, visits);
			free(child);
		}
		closedir(d);
		goto out;
	}
	/* A file where a directory was. */
	git_index_remove_directory(x->ck_idx, rel, 0);
	if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
		git_index_remove_bypath(x->ck_idx, rel);
		goto out;
	}
	if (!git_index_get_bypath(x->ck_idx, rel, 0)) {
		if (git_ignore_path_is_ignored(&ign, x->ck_repo, rel) < 0) {
			r = -EAGAIN;
			goto out;
		}
		if (ign)
			goto out;
	}
	if ((S_ISREG(st.st_mode) ? ck_add_file(x, rel)
				 : git_index_add_bypath(x->ck_idx, rel)) < 0)
		r = -EAGAIN;
out:
	free(dirrel);
	free(path);
	return r;
}

/*
 * Sessions, held-out checks: the operator's checks sealed into spd's
 * state directory, out of the agent's reach, and laid over the worktree
 * only for a verification run.  Part of the session module
 * (session_priv.h); see session.h.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/paths.h"
#include "daemon/session/session.h"
#include "daemon/session/session_priv.h"

/* ---- held-out checks ---- */

char *sess_heldout_dir(struct session_store *s, const char *id)
{
	char *p = NULL;

	if (asprintf(&p, "%s/heldout/%s", s->state_dir, id) < 0)
		return NULL;
	return p;
}

struct copy_state {
	size_t files;
	off_t bytes;
};

static int copy_tree(const char *from, const char *to, struct copy_state *cs,
		     unsigned depth)
{
	struct dirent *de;
	DIR *d;
	int r = 0;

	if (depth > 32)
		return -ELOOP;
	if (mkdir(to, 0700) < 0 && errno != EEXIST)
		return -errno;
	d = opendir(from);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char *a, *b;
		struct stat st;

		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		a = paths_join(from, de->d_name);
		b = paths_join(to, de->d_name);
		if (!a || !b) {
			free(a);
			free(b);
			r = -ENOMEM;
			break;
		}
		if (lstat(a, &st) < 0)
			r = -errno;
		else if (S_ISDIR(st.st_mode))
			r = copy_tree(a, b, cs, depth + 1);
		else if (!S_ISREG(st.st_mode))
			r = -EINVAL; /* a symlink could lead anywhere */
		else if (++cs->files > SESSION_HELDOUT_FILES_MAX ||
			 (cs->bytes += st.st_size) > SESSION_HELDOUT_BYTES_MAX)
			r = -E2BIG;
		else
			r = sess_copy_file(a, b, SESSION_HELDOUT_BYTES_MAX);
		/* Keep the executable bit: a held-out check may be a
		 * script run directly. */
		if (r == 0 && S_ISREG(st.st_mode))
			chmod(b, (st.st_mode & 0100) ? 0700 : 0600);
		free(a);
		free(b);
		if (r < 0)
			break;
	}
	closedir(d);
	return r;
}

int session_heldout(struct session_store *s, const char *id, const char *dir)
{
	struct copy_state cs = {0};
	struct stat st;
	char *top = NULL, *dst = NULL, *tmp = NULL;
	int r = session_usable(s, id);

	s->err[0] = '\0';
	if (r < 0)
		return r;
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		sess_seterr(s, "%s: not a directory", dir);
		return -ENOENT;
	}
	r = -ENOMEM;
	top = paths_join(s->state_dir, "heldout");
	dst = sess_heldout_dir(s, id);
	if (!top || !dst || asprintf(&tmp, "%s.new", dst) < 0)
		goto out;
	r = sess_private_dir(s, top);
	if (r < 0)
		goto out;
	/* Copy aside, then swap: a failed copy leaves the earlier set. */
	sess_rm_tree(tmp);
	r = copy_tree(dir, tmp, &cs, 0);
	if (r < 0) {
		sess_seterr(s, "cannot seal %s: %s", dir,
			    r == -EINVAL
				? "symlinks and special files are refused"
				: strerror(-r));
		sess_rm_tree(tmp);
		goto out;
	}
	sess_rm_tree(dst);
	if (rename(tmp, dst) < 0) {
		r = -errno;
		sess_rm_tree(tmp);
		goto out;
	}
	struct sess *x = sess_find(s, id);
	x->info.heldout = true;
	sess_db_update(s, x);
	sess_journal(s, id, "session.heldout",
		     json_pack("{s:i}", "files", (int)cs.files),
		     "%zu held-out file%s sealed", cs.files,
		     cs.files == 1 ? "" : "s");
	r = (int)cs.files;
out:
	free(top);
	free(dst);
	free(tmp);
	return r;
}

int session_heldout_overlay(struct session_store *s, const char *id,
			    char **ret_src, char **ret_dst)
{
	struct sess *x = sess_find(s, id);
	char *src, *dst;

	if (!x || !x->info.heldout)
		return -ENOENT;
	src = sess_heldout_dir(s, id);
	dst = paths_join(x->info.worktree, SESSION_HELDOUT_MOUNT);
	if (!src || !dst) {
		free(src);
		free(dst);
		return -ENOMEM;
	}
	*ret_src = src;
	*ret_dst = dst;
	return 0;
}

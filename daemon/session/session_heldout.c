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
#include <unistd.h>

#include "common/paths.h"
#include "common/util.h"
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

void sess_heldout_drop(struct session_store *s, const char *id)
{
	char *p = sess_heldout_dir(s, id), *away = NULL;

	/* Up to 10,000 files: on the remover's thread, under a name no
	 * seal uses. */
	if (p && asprintf(&away, "%s.ended", p) < 0)
		away = NULL;
	sess_remove_aside(s, p, away);
	free(p);
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

struct session_sealing {
	struct session_store *s;
	char id[SESSION_ID_LEN + 1];
	char *dir, *dst, *tmp;
	struct copy_state cs;
	int r;
	char err[sizeof(((struct session_store *)0)->err)];
	/* Waiting for the plans holding the earlier set (x->seal_next). */
	session_sealed_fn then;
	void *data;
};

/* A session's held-out set held by its plans: one reference for the
 * session while it lives, one for each plan.  A plan may outlive the
 * store (freed after spd's stop began), so the store is reached only
 * through s, NULL once the session is freed. */
struct sess_hold {
	unsigned refs;
	struct session_store *s;
	char id[SESSION_ID_LEN + 1];
};

static void sealing_free(struct session_sealing *j)
{
	free(j->dir);
	free(j->dst);
	free(j->tmp);
	free(j);
}

int session_heldout_begin(struct session_store *s, const char *id,
			  const char *dir, struct session_sealing **ret)
{
	struct sess *x = sess_find(s, id);
	struct session_sealing *j;
	struct stat st;
	char *top = NULL;
	int r = session_usable(s, id);

	s->err[0] = '\0';
	if (r < 0)
		return r;
	if (x->sealing || x->seal_next) {
		sess_seterr(s,
			    "session %s: its held-out checks are being "
			    "sealed; seal again once they are",
			    id);
		return -EBUSY;
	}
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		sess_seterr(s, "%s: not a directory", dir);
		return -ENOENT;
	}
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	r = -ENOMEM;
	top = paths_join(s->state_dir, "heldout");
	j->dst = sess_heldout_dir(s, id);
	j->dir = strdup(dir);
	if (top && j->dst && j->dir && asprintf(&j->tmp, "%s.new", j->dst) >= 0)
		r = sess_private_dir(s, top);
	free(top);
	if (r < 0) {
		sealing_free(j);
		return r;
	}
	j->s = s;
	snprintf(j->id, sizeof(j->id), "%s", id);
	x->sealing = true;
	s->aside++;
	*ret = j;
	return 0;
}

void session_heldout_work(struct session_sealing *j)
{
	sess_seterr_to(j->err, sizeof(j->err));
	/* Copy aside, then swap (session_heldout_end): a failed copy leaves
	 * the earlier set. */
	sess_rm_tree(j->tmp);
	j->r = copy_tree(j->dir, j->tmp, &j->cs, 0);
	if (j->r < 0) {
		sess_seterr(j->s, "cannot seal %s: %s", j->dir,
			    j->r == -EINVAL
				? "symlinks and special files are refused"
				: strerror(-j->r));
		sess_rm_tree(j->tmp);
	}
	sess_seterr_to(NULL, 0);
}

/* The copy in place of the earlier set, which goes aside and then to the
 * remover's thread: 0 or -errno. */
static int sealing_swap(struct session_sealing *j)
{
	struct session_store *s = j->s;
	char *old = NULL;
	int r = 0;

	if (asprintf(&old, "%s.old", j->dst) < 0)
		return -ENOMEM;
	if (rename(j->dst, old) < 0 && errno != ENOENT) {
		/* One an earlier spd left there. */
		sess_rm_tree(old);
		if (rename(j->dst, old) < 0 && errno != ENOENT)
			r = -errno;
	}
	if (r == 0 && rename(j->tmp, j->dst) < 0) {
		r = -errno;
		rename(old, j->dst);
	}
	if (r < 0) {
		sess_seterr(s, "cannot seal %s: %s", j->dir, strerror(-r));
		sess_rm_tree(j->tmp);
	} else if (s->remove && access(old, F_OK) == 0) {
		s->remove(s->remove_data, steal_ptr(old));
	} else {
		sess_rm_tree(old);
	}
	free(old);
	return r;
}

/* The copy put in place (or not: why in why, of whylen bytes), j freed
 * and the store's step aside ended: what session_heldout answers. */
static int sealing_finish(struct session_sealing *j, char *why, size_t whylen)
{
	struct session_store *s = j->s;
	struct sess *x = sess_find(s, j->id);
	int r = j->r;

	if (x && x->seal_next == j)
		x->seal_next = NULL;
	s->err[0] = '\0';
	if (s->closing) {
		sess_rm_tree(j->tmp);
		r = -ESHUTDOWN;
	} else if (r < 0) {
		sess_seterr(s, "%s", j->err);
	} else if ((r = session_usable(s, j->id)) < 0) {
		sess_rm_tree(j->tmp); /* ended meanwhile: nothing to check */
		sess_seterr(s,
			    "session %s: %s; the held-out checks sealed were "
			    "not put in place",
			    j->id,
			    r == -ESHUTDOWN   ? "it has ended"
			    : r == -ECANCELED ? "its attempt ended"
					      : strerror(-r));
	} else if ((r = sealing_swap(j)) == 0) {
		x->info.heldout = true;
		sess_db_update(s, x);
		sess_journal(s, j->id, "session.heldout",
			     json_pack("{s:i}", "files", (int)j->cs.files),
			     "%zu held-out file%s sealed", j->cs.files,
			     j->cs.files == 1 ? "" : "s");
		r = (int)j->cs.files;
	}
	if (why)
		snprintf(why, whylen, "%s", s->err);
	sealing_free(j);
	s->aside--;
	sess_store_closed_maybe(s);
	return r;
}

int session_heldout_end(struct session_sealing *j, session_sealed_fn then,
			void *data)
{
	struct session_store *s = j->s;
	struct sess *x = sess_find(s, j->id);

	if (x)
		x->sealing = false;
	/* A plan holds the earlier set: its checks bind it, and one may be
	 * running.  The copy waits beside it until the last such plan is
	 * freed (session_verify_plan_free); new plans wait for it. */
	if (x && j->r >= 0 && !s->closing && x->hold && x->hold->refs > 1 &&
	    session_usable(s, j->id) == 0) {
		j->then = then;
		j->data = data;
		x->seal_next = j;
		return -EINPROGRESS;
	}
	return sealing_finish(j, NULL, 0);
}

int sess_heldout_hold(struct session_store *s, struct sess *x,
		      struct sess_hold **ret)
{
	if (x->seal_next) {
		sess_seterr(s,
			    "session %s: new held-out checks are sealed and "
			    "wait for a running verification to end; verify, "
			    "merge or end once it has",
			    x->info.id);
		return -EALREADY;
	}
	if (!x->hold) {
		if (!(x->hold = calloc(1, sizeof(*x->hold))))
			return -ENOMEM;
		x->hold->refs = 1;
		x->hold->s = s;
		snprintf(x->hold->id, sizeof(x->hold->id), "%s", x->info.id);
	}
	x->hold->refs++;
	*ret = x->hold;
	return 0;
}

void sess_heldout_release(struct sess_hold *h)
{
	struct session_store *s;
	struct sess *x;

	if (!h)
		return;
	s = h->s;
	if (--h->refs == 0) {
		free(h);
		return;
	}
	/* The last plan let the set go: the copy waiting takes its place. */
	if (h->refs == 1 && s && (x = sess_find(s, h->id)) && x->seal_next) {
		struct session_sealing *j = x->seal_next;
		session_sealed_fn then = j->then;
		void *data = j->data;
		char why[sizeof(s->err)];
		int r = sealing_finish(j, why, sizeof(why));

		if (then)
			then(data, r, why);
	}
}

void sess_heldout_free(struct sess *x)
{
	struct sess_hold *h = x->hold;

	x->hold = NULL;
	if (h) {
		h->s = NULL;
		if (--h->refs == 0)
			free(h);
	}
}

void sess_heldout_close(struct session_store *s)
{
	for (struct sess *x = s->list; x; x = x->next) {
		struct session_sealing *j = x->seal_next;
		session_sealed_fn then;
		void *data;

		if (!j)
			continue;
		x->seal_next = NULL;
		then = j->then;
		data = j->data;
		sess_rm_tree(j->tmp);
		sealing_free(j);
		s->aside--;
		if (then)
			then(data, -ESHUTDOWN,
			     "spd is stopping: the held-out checks sealed "
			     "waited for a verification, and were not put in "
			     "place; the earlier ones stay");
	}
}

int session_heldout(struct session_store *s, const char *id, const char *dir)
{
	struct session_sealing *j = NULL;
	int r = session_heldout_begin(s, id, dir, &j);

	if (r < 0)
		return r;
	session_heldout_work(j);
	return session_heldout_end(j, NULL, NULL);
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

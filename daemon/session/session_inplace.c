/*
 * Sessions in place: the git-ignored files that look like credentials,
 * found once at the start and made to read as empty in every run; the
 * record of what was ignored at the start, followed where it moves; and
 * session_run_paths(), which gathers what a run of a session mounts with
 * the git-ignored entries it hides (session_ignored.c).  Part of the
 * session module (session_priv.h); see session.h.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/strv.h"
#include "common/util.h"
#include "common/paths.h"
#include "daemon/policy/protected.h"
#include "proto/sandbox.h"
#include "daemon/session/session.h"
#include "daemon/session/session_priv.h"

/* ---- in place: ignored credential files ---- */

struct secret_scan {
	struct session_store *s;
	git_repository *repo;
	const char *root;
	char **v;
	size_t n;
	size_t seen;
	bool said; /* the refusal's text is set */
};

/* The scan cannot tell what lies below rel (relative to the checkout):
 * refuse the start, saying where and why, rather than start with a
 * credential file there readable.  Returns err. */
static int scan_refuse(struct secret_scan *sc, const char *rel, int err,
		       const char *why)
{
	sess_seterr(sc->s,
		    "in place: cannot look for credential files in %s%s%s: "
		    "%s; make it readable to spd, or use a worktree session",
		    sc->root, rel[0] ? "/" : "", rel, why);
	sc->said = true;
	return err;
}

/*
 * The ignored credential files below rel, into sc.  It fails closed: a
 * directory it cannot open or list, an entry it cannot stat, a path too
 * long or a tree deeper than SESSION_SCAN_DEPTH refuses the start
 * (scan_refuse) instead of being skipped; a file whose git status cannot
 * be read is taken as ignored (it reads as empty), a directory whose
 * ignore check fails is searched.
 */
static int scan_secrets(struct secret_scan *sc, const char *rel, unsigned depth)
{
	char path[GUARD_PATH_MAX], child[GUARD_PATH_MAX], why[64];
	struct dirent *de;
	DIR *d;
	int fd, k, r = 0;

	if (depth > SESSION_SCAN_DEPTH) {
		snprintf(why, sizeof(why), "deeper than %d directories",
			 SESSION_SCAN_DEPTH);
		return scan_refuse(sc, rel, -E2BIG, why);
	}
	k = snprintf(path, sizeof(path), "%s%s%s", sc->root, rel[0] ? "/" : "",
		     rel);
	if (k < 0 || (size_t)k >= sizeof(path))
		return scan_refuse(sc, rel, -ENAMETOOLONG,
				   strerror(ENAMETOOLONG));
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	/* Gone, or made something else, since its parent was read. */
	if (fd < 0 && (errno == ENOENT || errno == ENOTDIR))
		return 0;
	if (fd < 0 || !(d = fdopendir(fd))) {
		r = -errno;
		if (fd >= 0)
			close(fd);
		return scan_refuse(sc, rel, r, strerror(-r));
	}
	for (;;) {
		unsigned int flags = 0;
		struct stat st;

		errno = 0;
		if (!(de = readdir(d))) {
			if (errno)
				r = scan_refuse(sc, rel, -errno,
						strerror(errno));
			break;
		}
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0 ||
		    (depth == 0 && strcmp(de->d_name, ".git") == 0))
			continue;
		if (++sc->seen > SESSION_SCAN_MAX) {
			r = -E2BIG;
			break;
		}
		k = snprintf(child, sizeof(child), "%s%s%s", rel,
			     rel[0] ? "/" : "", de->d_name);
		if (k < 0 || (size_t)k + strlen(sc->root) + 1 >= sizeof(path)) {
			r = scan_refuse(sc, rel, -ENAMETOOLONG,
					"a name in it makes a path longer than "
					"spd reads");
			break;
		}
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) <
		    0) {
			if (errno == ENOENT)
				continue;
			r = scan_refuse(sc, child, -errno, strerror(errno));
			break;
		}
		if (S_ISDIR(st.st_mode)) {
			int ignored = 0;

			/* A directory git ignores is hidden from runs whole
			 * (and recorded so): what it holds needs no empty
			 * file, and node_modules/ alone could pass the
			 * limits.  One git cannot judge is searched. */
			if (git_ignore_path_is_ignored(&ignored, sc->repo,
						       child) == 0 &&
			    ignored)
				continue;
			r = scan_secrets(sc, child, depth + 1);
			if (r < 0)
				break;
			continue;
		}
		if (protected_match(child) != PROTECTED_SECRET_FILE)
			continue;
		/* Tracked files stay as they are: they are the project's.
		 * One whose status git cannot give reads as empty. */
		if (git_status_file(&flags, sc->repo, child) == 0 &&
		    !(flags & GIT_STATUS_IGNORED))
			continue;
		if (sc->n >= SESSION_EMPTY_FILES_MAX) {
			r = -E2BIG;
			break;
		}
		sc->v[sc->n] = paths_join(sc->root, child);
		if (!sc->v[sc->n]) {
			r = -ENOMEM;
			break;
		}
		sc->n++;
	}
	closedir(d);
	return r;
}

/*
 * The git-ignored files of an in-place checkout that look like
 * credentials, found once at session start (the agent's own later files
 * are its own), outside the directories git ignores (hidden whole).  Past
 * SESSION_SCAN_MAX entries or SESSION_EMPTY_FILES_MAX matches, or where
 * the scan cannot see (scan_secrets), the start is refused rather than
 * run with some of them readable.
 */
int sess_find_secrets(struct session_store *s, struct sess *x)
{
	struct secret_scan sc = {.s = s};
	int r;

	if (sess_git_up(s) < 0)
		return -EIO;
	if (git_repository_open_ext(&sc.repo, x->info.worktree,
				    GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0) {
		sess_seterr(s, "%s: %s", x->info.worktree, sess_git_msg());
		return -EIO;
	}
	sc.root = x->info.worktree;
	sc.v = calloc(SESSION_EMPTY_FILES_MAX + 1, sizeof(char *));
	if (!sc.v) {
		git_repository_free(sc.repo);
		return -ENOMEM;
	}
	r = scan_secrets(&sc, "", 0);
	git_repository_free(sc.repo);
	if (r < 0) {
		if (r == -E2BIG && !sc.said)
			sess_seterr(
			    s,
			    "in place: more than %d ignored credential "
			    "files or %d entries in the checkout; use a "
			    "worktree session",
			    SESSION_EMPTY_FILES_MAX, SESSION_SCAN_MAX);
		strv_free_array(sc.v);
		return r;
	}
	strv_free_array(x->empty_files);
	x->empty_files = sc.v;
	return 0;
}

/* ---- in place: what was ignored at the start stays so ---- */

/*
 * Which files the operator's checkout ignores is read from .gitignore
 * files that lie in the workspace, where the agent can write: a line
 * taken out of .gitignore, or a nested .gitignore saying "!secret.log",
 * would make an ignored file readable by the next run and by fs.read.  So
 * the ignored entries found when the session starts (the top-most ones a
 * run hides, and the credential files that read as empty) are recorded in
 * the state dir, and stay hidden for the whole session whatever the
 * .gitignore files say later; entries ignored later are hidden as well.
 * At a restart of spd the record is read back rather than the checkout
 * walked again.  Format: "spd-in-place 2\n", then entries each ended by
 * a NUL: 'E' (reads as empty) or 'H' (hidden), the entry's device and
 * inode in decimal, each followed by ':', and its absolute path.
 */
#define INPLACE_MAGIC "spd-in-place 2\n"
#define INPLACE_RECORD_MAX (1024 * 1024)

char *sess_inplace_path(struct session_store *s, const char *id)
{
	char *p = NULL;

	if (asprintf(&p, "%s/conf/%s.in-place", s->state_dir, id) < 0)
		return NULL;
	return p;
}

static int record_write(const char *path, char *const *empty,
			const struct sess_id *eids, char *const *hidden,
			const struct sess_id *hids)
{
	char *tmp = NULL;
	FILE *f;
	int fd, r = 0;

	if (asprintf(&tmp, "%s.tmp", path) < 0)
		return -ENOMEM;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
		  0600);
	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		r = -errno;
		if (fd >= 0)
			close(fd);
		free(tmp);
		return r;
	}
	fputs(INPLACE_MAGIC, f);
	for (size_t i = 0; empty && empty[i]; i++)
		fprintf(f, "E%llu:%llu:%s%c", (unsigned long long)eids[i].dev,
			(unsigned long long)eids[i].ino, empty[i], '\0');
	for (size_t i = 0; hidden && hidden[i]; i++)
		fprintf(f, "H%llu:%llu:%s%c", (unsigned long long)hids[i].dev,
			(unsigned long long)hids[i].ino, hidden[i], '\0');
	if (fflush(f) != 0 || fsync(fileno(f)) < 0)
		r = -errno;
	if (fclose(f) != 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0)
		unlink(tmp);
	free(tmp);
	return r;
}

/* One entry's "DEV:INO:/path" after its kind: 0 and the parts, or
 * -EINVAL. */
static int record_entry(const char *ent, struct sess_id *id, const char **path)
{
	char *end;

	errno = 0;
	id->dev = strtoull(ent, &end, 10);
	if (errno || end == ent || *end != ':')
		return -EINVAL;
	ent = end + 1;
	id->ino = strtoull(ent, &end, 10);
	if (errno || end == ent || *end != ':' || end[1] != '/')
		return -EINVAL;
	*path = end + 1;
	return 0;
}

static int record_read(const char *path, char ***ret_empty,
		       struct sess_id **ret_eids, char ***ret_hidden,
		       struct sess_id **ret_hids)
{
	struct sess_id *eids =
			   calloc(SESSION_EMPTY_FILES_MAX + 1, sizeof(*eids)),
		       *hids = calloc(SBXP_PATHS_MAX + 1, sizeof(*hids));
	struct strv e = {0}, h = {0};
	size_t len = 0, off;
	char *buf = NULL;
	struct stat st;
	int fd, r = 0;

	if (!eids || !hids) {
		r = -ENOMEM;
		goto out;
	}
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		goto out;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_size > INPLACE_RECORD_MAX ||
	    !(buf = malloc((size_t)st.st_size + 1))) {
		r = -EINVAL;
		close(fd);
		goto out;
	}
	while (len < (size_t)st.st_size) {
		ssize_t k = read(fd, buf + len, (size_t)st.st_size - len);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		len += (size_t)k;
	}
	close(fd);
	if (len != (size_t)st.st_size || len < strlen(INPLACE_MAGIC) ||
	    memcmp(buf, INPLACE_MAGIC, strlen(INPLACE_MAGIC)) != 0 ||
	    (len > strlen(INPLACE_MAGIC) && buf[len - 1] != '\0')) {
		r = -EINVAL;
		goto out;
	}
	for (off = strlen(INPLACE_MAGIC); off < len && r == 0;) {
		const char *ent = buf + off, *p = NULL;
		size_t k = strlen(ent);
		struct sess_id id;

		if (k < 2 || record_entry(ent + 1, &id, &p) < 0)
			r = -EINVAL;
		else if (ent[0] == 'E' && e.n < SESSION_EMPTY_FILES_MAX) {
			eids[e.n] = id;
			r = strv_push(&e, p);
		} else if (ent[0] == 'H' && h.n < SBXP_PATHS_MAX) {
			hids[h.n] = id;
			r = strv_push(&h, p);
		} else
			r = -EINVAL;
		off += k + 1;
	}
out:
	free(buf);
	if (r < 0) {
		strv_free(&e);
		strv_free(&h);
		free(eids);
		free(hids);
		return r;
	}
	*ret_empty = e.v;
	*ret_hidden = h.v;
	*ret_eids = eids;
	*ret_hids = hids;
	return 0;
}

/* What each path is now (dev 0, ino 0 for one gone): a new array. */
static struct sess_id *ids_of(char *const *v)
{
	size_t n = 0;
	struct sess_id *ids;

	while (v && v[n])
		n++;
	ids = calloc(n + 1, sizeof(*ids));
	for (size_t i = 0; ids && i < n; i++) {
		struct stat st;

		if (lstat(v[i], &st) == 0) {
			ids[i].dev = (uint64_t)st.st_dev;
			ids[i].ino = (uint64_t)st.st_ino;
		}
	}
	return ids;
}

int sess_inplace_record(struct session_store *s, struct sess *x)
{
	size_t n = 0;
	char **v = NULL, *path;
	int r;

	while (x->empty_files && x->empty_files[n])
		n++;
	/* The walk leaves its watch for the first run (ign_hidden). */
	r = sess_ign_hidden(s, x, sess_hidden_room(n), &v);
	if (r == -E2BIG) {
		sess_seterr(s,
			    "in place: more than %zu top-most git-ignored "
			    "entries (or %d entries in all) would have to be "
			    "hidden from the runs; ignore whole directories, "
			    "or use a worktree session",
			    sess_hidden_room(n), SESSION_SCAN_MAX);
		return r;
	}
	if (r < 0) {
		sess_seterr(s, "in place: cannot walk %s: %s", x->info.worktree,
			    strerror(-r));
		return r;
	}
	free(x->empty_ids);
	free(x->start_ids);
	x->empty_ids = ids_of(x->empty_files);
	x->start_ids = ids_of(v);
	path = sess_inplace_path(s, x->info.id);
	r = !path || !x->empty_ids || !x->start_ids
		? -ENOMEM
		: record_write(path, x->empty_files, x->empty_ids, v,
			       x->start_ids);
	if (r < 0)
		sess_seterr(s, "cannot write %s: %s", path ? path : "a record",
			    strerror(-r));
	free(path);
	if (r < 0) {
		strv_free_array(v);
		return r;
	}
	strv_free_array(x->ign_start);
	x->ign_start = v;
	return 0;
}

int sess_inplace_load(struct session_store *s, struct sess *x)
{
	char *path = sess_inplace_path(s, x->info.id), **e = NULL, **h = NULL;
	struct sess_id *eids = NULL, *hids = NULL;
	int r;

	if (!path)
		return -ENOMEM;
	r = record_read(path, &e, &eids, &h, &hids);
	free(path);
	if (r < 0)
		return r;
	strv_free_array(x->empty_files);
	strv_free_array(x->ign_start);
	free(x->empty_ids);
	free(x->start_ids);
	x->empty_files = e;
	x->ign_start = h;
	x->empty_ids = eids;
	x->start_ids = hids;
	return 0;
}

/* ---- in place: entries recorded at the start, followed where they go ----
 *
 * A recorded entry can be moved away from its path and out from under
 * the pattern that ignored it: a parent directory renamed (in a run the
 * entry itself is a mount point and cannot be renamed, its directory
 * can; fs.move refuses only ignored paths), "config/secrets.yml" under an
 * anchored "/config/secrets.yml" becoming "cfg/secrets.yml".  So each
 * entry is recorded with its device and inode, and before a run (and an
 * fs call) every recorded path is checked: one that no longer holds its
 * file has the checkout searched for it, and its new place is hidden as
 * well.  The old path stays hidden while something is there.  A
 * directory the search cannot read refuses the run rather than miss a
 * file moved into it.
 */
struct follow {
	const char *root;
	const struct sess_id *want;
	const bool *miss;
	char **found;
	size_t n, seen;
	/* Hidden directories still where they were recorded, relative:
	 * not searched (whatever was moved into one is hidden with it, and
	 * node_modules/ alone can pass SESSION_SCAN_MAX). */
	const char **covered;
	size_t ncovered;
};

static int follow_walk(struct follow *f, int dfd, const char *rel,
		       unsigned depth)
{
	struct dirent *de;
	DIR *d;
	int r = 0;

	if (depth > SESSION_SCAN_DEPTH) {
		close(dfd);
		return -E2BIG;
	}
	d = fdopendir(dfd);
	if (!d) {
		r = -errno;
		close(dfd);
		return r;
	}
	while ((de = readdir(d))) {
		char child[GUARD_PATH_MAX];
		struct stat st;
		int k, fd;

		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0 ||
		    (depth == 0 && strcmp(de->d_name, ".git") == 0))
			continue;
		if (++f->seen > SESSION_SCAN_MAX) {
			r = -E2BIG;
			break;
		}
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue; /* gone meanwhile */
		k = snprintf(child, sizeof(child), "%s%s%s", rel,
			     rel[0] ? "/" : "", de->d_name);
		if (k < 0 || (size_t)k >= sizeof(child)) {
			r = -ENAMETOOLONG;
			break;
		}
		for (size_t i = 0; i < f->n && r == 0; i++)
			if (f->miss[i] && !f->found[i] && f->want[i].ino &&
			    f->want[i].dev == (uint64_t)st.st_dev &&
			    f->want[i].ino == (uint64_t)st.st_ino &&
			    !(f->found[i] = paths_join(f->root, child)))
				r = -ENOMEM;
		if (r < 0 || !S_ISDIR(st.st_mode))
			continue;
		for (k = 0; (size_t)k < f->ncovered; k++)
			if (strcmp(f->covered[k], child) == 0)
				break;
		if ((size_t)k < f->ncovered)
			continue;
		fd = openat(dirfd(d), de->d_name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			if (errno == ENOENT)
				continue;
			r = -errno;
			break;
		}
		r = follow_walk(f, fd, child, depth + 1);
		if (r < 0)
			break;
	}
	closedir(d);
	return r;
}

/* Appends path with id to v and ids (room for it), at most max. */
static int follow_push(struct strv *v, struct sess_id *ids, size_t max,
		       const char *path, struct sess_id id)
{
	for (size_t i = 0; i < v->n; i++)
		if (strcmp(v->v[i], path) == 0)
			return 0;
	if (v->n >= max)
		return -E2BIG;
	ids[v->n] = id;
	return strv_push(v, path);
}

int sess_inplace_follow(struct session_store *s, struct sess *x)
{
	size_t ne = 0, nh = 0, n, nmiss = 0;
	struct sess_id *want = NULL, *eids = NULL, *hids = NULL;
	struct strv ev = {0}, hv = {0};
	char *rec;
	bool *miss = NULL;
	struct follow f = {0};
	int r = 0, fd;

	if (x->info.mode != SESSION_MODE_IN_PLACE || !x->empty_ids ||
	    !x->start_ids)
		return 0;
	while (x->empty_files && x->empty_files[ne])
		ne++;
	while (x->ign_start && x->ign_start[nh])
		nh++;
	n = ne + nh;
	if (!n)
		return 0;
	want = calloc(n, sizeof(*want));
	miss = calloc(n, sizeof(*miss));
	f.found = calloc(n, sizeof(*f.found));
	/* An entry keeps at most two paths: where it went, where it was. */
	eids = calloc(2 * ne + 1, sizeof(*eids));
	hids = calloc(2 * nh + 1, sizeof(*hids));
	if (!want || !miss || !f.found || !eids || !hids) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const char *p =
		    i < ne ? x->empty_files[i] : x->ign_start[i - ne];
		struct stat st;

		want[i] = i < ne ? x->empty_ids[i] : x->start_ids[i - ne];
		if (lstat(p, &st) == 0 && (uint64_t)st.st_dev == want[i].dev &&
		    (uint64_t)st.st_ino == want[i].ino)
			continue;
		miss[i] = true;
		nmiss++;
	}
	if (!nmiss)
		goto out;
	f.root = x->info.worktree;
	f.want = want;
	f.miss = miss;
	f.n = n;
	f.covered = calloc(nh + 1, sizeof(*f.covered));
	if (!f.covered) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = ne; i < n; i++) {
		size_t rl = strlen(f.root);
		const char *p = x->ign_start[i - ne];

		if (!miss[i] && strncmp(p, f.root, rl) == 0 && p[rl] == '/')
			f.covered[f.ncovered++] = p + rl + 1;
	}
	fd = open(f.root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	r = fd < 0 ? -errno : follow_walk(&f, fd, "", 0);
	if (r < 0)
		goto out;
	for (size_t i = 0; i < n && r == 0; i++) {
		const char *p =
		    i < ne ? x->empty_files[i] : x->ign_start[i - ne];
		struct strv *v = i < ne ? &ev : &hv;
		struct sess_id *ids = i < ne ? eids : hids;
		size_t max = i < ne ? SESSION_EMPTY_FILES_MAX : SBXP_PATHS_MAX;
		struct stat st;

		if (!miss[i]) {
			r = follow_push(v, ids, max, p, want[i]);
			continue;
		}
		if (f.found[i]) {
			r = follow_push(v, ids, max, f.found[i], want[i]);
			sess_journal(s, x->info.id, "session.ignored-moved",
				     json_pack("{s:s, s:s}", "from", p, "to",
					       f.found[i]),
				     "%s, ignored when the session started, "
				     "moved to %s: hidden there too",
				     p, f.found[i]);
		}
		/* Replaced where it was (an editor's save, a new build
		 * directory): that path stays hidden. */
		if (r == 0 && lstat(p, &st) == 0)
			r = follow_push(v, ids, max, p,
					(struct sess_id){(uint64_t)st.st_dev,
							 (uint64_t)st.st_ino});
	}
	if (r < 0)
		goto out;
	strv_free_array(x->empty_files);
	strv_free_array(x->ign_start);
	free(x->empty_ids);
	free(x->start_ids);
	x->empty_files = ev.v;
	x->ign_start = hv.v;
	x->empty_ids = eids;
	x->start_ids = hids;
	ev = hv = (struct strv){0};
	eids = hids = NULL;
	/* The kept walk skipped the old credential files. */
	sess_ign_free(x->ign);
	x->ign = NULL;
	sess_ign_once_drop(x);
	rec = sess_inplace_path(s, x->info.id);
	r = rec ? record_write(rec, x->empty_files, x->empty_ids, x->ign_start,
			       x->start_ids)
		: -ENOMEM;
	free(rec);
out:
	for (size_t i = 0; f.found && i < n; i++)
		free(f.found[i]);
	free(f.found);
	free(f.covered);
	free(want);
	free(miss);
	strv_free(&ev);
	strv_free(&hv);
	free(eids);
	free(hids);
	return r;
}

/* now and then together, without an entry that another covers.  Every
 * entry of then exists (sess_inplace_follow drops the ones gone, which
 * sandboxd would otherwise make, in a writable tree, on the host). */
static int hidden_union(char *const *now, char *const *then, size_t max,
			char ***ret)
{
	struct strv all = {0}, v = {0};
	int r = 0;

	for (size_t i = 0; now && now[i] && r == 0; i++)
		r = strv_push(&all, now[i]);
	for (size_t i = 0; then && then[i] && r == 0; i++)
		r = strv_push(&all, then[i]);
	for (size_t i = 0; i < all.n && r == 0; i++) {
		bool covered = false;

		for (size_t j = 0; j < all.n && !covered; j++)
			covered = strcmp(all.v[i], all.v[j]) == 0
				      ? j < i
				      : paths_under(all.v[i], all.v[j]);
		if (covered)
			continue;
		r = v.n >= max ? -E2BIG : strv_push(&v, all.v[i]);
	}
	strv_free(&all);
	if (r == 0 && !v.v && !(v.v = calloc(1, sizeof(char *))))
		r = -ENOMEM;
	if (r < 0) {
		strv_free(&v);
		return r;
	}
	*ret = v.v;
	return 0;
}

char **session_hidden_at_start(struct session_store *s, const char *id)
{
	struct sess *x = sess_find(s, id);

	if (!x || x->info.mode != SESSION_MODE_IN_PLACE ||
	    sess_inplace_follow(s, x) < 0)
		return NULL;
	return strv_copy(x->ign_start ? x->ign_start : (char *[]){NULL});
}

void session_run_paths_free(struct session_run_paths *p)
{
	if (!p)
		return;
	free(p->workspace);
	strv_free_array(p->readonly);
	strv_free_array(p->empty_files);
	strv_free_array(p->hidden);
	memset(p, 0, sizeof(*p));
}

/* Takes out of files those under a hidden directory: covered already,
 * and the empty file's mount would have nowhere to go inside the
 * directory's cover (a .env in node_modules/ refused every run). */
static void covered_drop(char **files, char *const *hidden)
{
	size_t k = 0;

	for (size_t i = 0; files && files[i]; i++) {
		bool covered = false;

		for (size_t j = 0; hidden && hidden[j] && !covered; j++)
			covered = strcmp(files[i], hidden[j]) != 0 &&
				  paths_under(files[i], hidden[j]);
		if (covered)
			free(files[i]);
		else
			files[k++] = files[i];
	}
	if (files)
		files[k] = NULL;
}

int session_run_paths(struct session_store *s, const char *id,
		      struct session_run_paths *ret, size_t *ret_hidden_max)
{
	struct session_run_paths p = {0};
	struct sess *x;
	size_t n = 0;
	int r = session_usable(s, id);

	if (r < 0)
		return r;
	x = sess_find(s, id);
	p.in_place = x->info.mode == SESSION_MODE_IN_PLACE;
	/* Recorded entries moved since are hidden where they went. */
	if (p.in_place && (r = sess_inplace_follow(s, x)) < 0)
		return r;
	if (!p.in_place && sess_git_up(s) == 0 &&
	    (r = sess_agent_git_ensure(s, x)) < 0)
		return r;
	while (x->empty_files && x->empty_files[n])
		n++;
	p.workspace = strdup(x->info.worktree);
	p.readonly = calloc(2, sizeof(char *));
	p.empty_files = calloc(n + 1, sizeof(char *));
	if (!p.workspace || !p.readonly || !p.empty_files)
		goto oom;
	/* The repository's git dir, read-only: in place it lies inside the
	 * checkout; a worktree's lies outside it (and as root, sandboxd binds
	 * it idmapped so that the run's uid can read it: git works). */
	if (!(p.readonly[0] = strdup(x->info.gitdir)))
		goto oom;
	for (size_t i = 0; i < n; i++)
		if (!(p.empty_files[i] = strdup(x->empty_files[i])))
			goto oom;
	if (p.in_place) {
		size_t max = sess_hidden_room(n);
		char **now = NULL;

		if (ret_hidden_max)
			*ret_hidden_max = max;
		r = sess_ign_hidden(s, x, max, &now);
		/* And whatever was ignored when the session started. */
		if (r == 0)
			r = hidden_union(now, x->ign_start, max, &p.hidden);
		strv_free_array(now);
		if (r < 0) {
			session_run_paths_free(&p);
			return r;
		}
		covered_drop(p.empty_files, p.hidden);
	}
	*ret = p;
	return 0;
oom:
	session_run_paths_free(&p);
	return -ENOMEM;
}

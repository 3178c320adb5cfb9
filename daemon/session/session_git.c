/*
 * Sessions, the agent's git: the repository an agent commits in, how its
 * commits reach the session's branch, the work spd commits for it at the
 * end, and the checkpoints that let any run be undone.  Part of the
 * session module (session_priv.h); see session.h.
 *
 * The worktree's .git is a repository of the agent's own (made at the
 * start in place of libgit2's ".git" file): its objects directory names
 * the main repository's objects as an alternate (read-only in every
 * run), its HEAD is the session's branch, its config gives the agent an
 * identity and runs nothing.  git in a run reads and writes only there,
 * so an ordinary `git add`/`git commit` works and changes no file of the
 * operator's repository.  After a run, spd reads that repository's
 * branch ref and the objects it needs, never through a symlink and never
 * opening anything but a regular file (a FIFO would hang spd), copies
 * them into a staging directory of its own and from there into the main
 * repository, scanning every new commit for known secret values, and
 * moves refs/heads/spd/<feature> — the one ref it ever moves for the
 * agent.  The operator's checkout, config, hooks and other refs are never
 * written.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <git2/sys/repository.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/paths.h"
#include "common/util.h"
#include "daemon/session/session.h"
#include "daemon/session/session_priv.h"

/* Most branches and tags of the main repository listed in the agent's
 * packed-refs (so that `git log main..` works in a run); the rest are
 * left out rather than make a session's start slow. */
#define AGENT_REFS_MAX 10000
/* The most bytes one sync copies out of the agent's object store: a run
 * that wrote more is refused rather than fill spd's disk. */
#define AGENT_SYNC_BYTES_MAX ((off_t)2 << 30)
/* The most files one sync looks at in the agent's object store. */
#define AGENT_SYNC_FILES_MAX 200000

static int sys_openat2(int dirfd, const char *path, int flags)
{
	struct open_how how = {
	    .flags = (uint64_t)flags | O_CLOEXEC,
	    .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
		       RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};
	long r = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));

	return r < 0 ? -errno : (int)r;
}

int sess_open_regular(int dirfd, const char *path, struct stat *ret_st)
{
	struct stat st;
	int fd = sys_openat2(dirfd, path, O_RDONLY | O_NONBLOCK | O_NOCTTY);

	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	if (ret_st)
		*ret_st = st;
	return fd;
}

/* Read a small regular file below dirfd into buf (NUL-terminated). */
static int read_small(int dirfd, const char *path, char *buf, size_t len)
{
	_cleanup_close_ int fd = sess_open_regular(dirfd, path, NULL);
	ssize_t n;

	if (fd < 0)
		return fd;
	n = read(fd, buf, len - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

int sess_open_gitdir(struct session_store *s, const char *gitdir,
		     git_repository **ret)
{
	if (git_repository_open_ext(ret, gitdir,
				    GIT_REPOSITORY_OPEN_NO_SEARCH |
					GIT_REPOSITORY_OPEN_BARE,
				    NULL) < 0) {
		sess_seterr(s, "cannot open the session's repository: %s",
			    sess_git_msg());
		return -EIO;
	}
	return 0;
}

int sess_open_bare(struct session_store *s, const struct sess *x,
		   git_repository **ret)
{
	return sess_open_gitdir(s, x->info.gitdir, ret);
}

int sess_live_worktree(struct session_store *s, const char *id,
		       struct sess **ret)
{
	struct sess *x = sess_find(s, id);

	if (sess_git_up(s) < 0)
		return -EIO;
	s->err[0] = '\0';
	if (!x)
		return -ENOENT;
	*ret = x;
	return x->info.mode == SESSION_MODE_WORKTREE &&
		       x->info.state != SESSION_ENDED
		   ? 0
		   : 1;
}

int sess_open_worktree(struct session_store *s, const struct sess *x,
		       git_repository **ret)
{
	git_repository *repo = NULL;

	/* Never through the worktree's .git: that is the agent's. */
	if (sess_open_bare(s, x, &repo) < 0)
		return -EIO;
	if (git_repository_set_workdir(repo, x->info.worktree, 0) < 0) {
		sess_seterr(s, "cannot open the session's repository: %s",
			    sess_git_msg());
		git_repository_free(repo);
		return -EIO;
	}
	*ret = repo;
	return 0;
}

/* ---- the agent's repository ---- */

/* A value for git's config: no quote, backslash or control character. */
static void ident_clean(char *v)
{
	for (char *p = v; *p; p++)
		if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20 ||
		    *p == '<' || *p == '>')
			*p = '_';
}

void sess_agent_ident(const struct session_store *s, const struct sess *x,
		      char *name, size_t nlen, char *email, size_t elen)
{
	if (s->git_name)
		snprintf(name, nlen, "%s", s->git_name);
	else
		snprintf(name, nlen, "agent %s", x->info.id);
	if (s->git_email)
		snprintf(email, elen, "%s", s->git_email);
	else
		snprintf(email, elen, "agent-%s@spd.invalid", x->info.id);
	ident_clean(name);
	ident_clean(email);
}

void session_store_set_scanner(struct session_store *s, session_scan_fn fn,
			       session_scan_hold_fn hold,
			       session_scan_release_fn release, void *data)
{
	s->scan = fn;
	s->scan_hold = hold;
	s->scan_release = release;
	s->scan_data = data;
}

void *sess_scan_hold(struct session_store *s)
{
	return s->scan && s->scan_hold ? s->scan_hold(s->scan_data) : NULL;
}

int sess_scan(const struct session_store *s, void *held, const char *text,
	      char *where, size_t wlen)
{
	return s->scan && held ? s->scan(held, text, where, wlen) : 0;
}

void sess_scan_release(const struct session_store *s, void *held)
{
	if (held && s->scan_release)
		s->scan_release(held);
}

void session_store_set_changes(struct session_store *s, session_changes_fn fn,
			       void *data)
{
	s->changes = fn;
	s->changes_data = data;
}

void session_store_set_remover(struct session_store *s, session_remove_fn fn,
			       void *data)
{
	s->remove = fn;
	s->remove_data = data;
}

void session_store_set_identity(struct session_store *s, const char *name,
				const char *email)
{
	free(s->git_name);
	free(s->git_email);
	s->git_name = name && name[0] ? strdup(name) : NULL;
	s->git_email = email && email[0] ? strdup(email) : NULL;
}

static int write_at(int dirfd, const char *name, const char *text)
{
	_cleanup_close_ int fd =
	    openat(dirfd, name,
		   O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	size_t len = strlen(text);

	if (fd < 0)
		return -errno;
	if (write(fd, text, len) != (ssize_t)len)
		return -EIO;
	return 0;
}

/* The main repository's branches (but spd's) and tags, for the agent to
 * read; its own branch is a loose ref. */
static int agent_packed_refs(git_repository *repo, FILE *f)
{
	git_reference_iterator *it = NULL;
	git_reference *ref;
	size_t n = 0;

	if (git_reference_iterator_new(&it, repo) < 0)
		return -EIO;
	while (n < AGENT_REFS_MAX && git_reference_next(&ref, it) == 0) {
		const char *name = git_reference_name(ref);
		git_reference *res = NULL;

		if ((strncmp(name, "refs/heads/", 11) == 0 &&
		     strncmp(name, "refs/heads/spd/", 15) != 0) ||
		    strncmp(name, "refs/tags/", 10) == 0) {
			if (git_reference_resolve(&res, ref) == 0 &&
			    git_reference_target(res)) {
				char hex[GIT_OID_HEXSZ + 1];

				git_oid_tostr(hex, sizeof(hex),
					      git_reference_target(res));
				fprintf(f, "%s %s\n", hex, name);
				n++;
			}
			git_reference_free(res);
		}
		git_reference_free(ref);
	}
	git_reference_iterator_free(it);
	return 0;
}

int sess_agent_git_make(struct session_store *s, struct sess *x,
			git_repository *repo)
{
	_cleanup_close_ int wt = -1, g = -1;
	char text[PATH_MAX * 2 + 512], *p = NULL, *idx = NULL;
	const char *dirs[] = {"objects",   "objects/info", "objects/pack",
			      "refs",	   "refs/heads",   "refs/heads/spd",
			      "refs/tags", "info",	   "hooks",
			      "logs",	   "logs/refs",	   NULL};
	FILE *f;
	int r = -EIO;

	wt = open(x->info.worktree, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (wt < 0)
		return -errno;
	/* libgit2's worktree left a ".git" file naming the main repository's
	 * worktrees/<id>; the agent gets a repository of its own instead. */
	if (unlinkat(wt, ".git", 0) < 0 && errno != ENOENT)
		return -errno;
	if (mkdirat(wt, ".git", 0755) < 0 && errno != EEXIST)
		return -errno;
	g = openat(wt, ".git", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (g < 0)
		return -errno;
	for (size_t i = 0; dirs[i]; i++)
		if (mkdirat(g, dirs[i], 0755) < 0 && errno != EEXIST)
			return -errno;
	snprintf(text, sizeof(text), "ref: refs/heads/%s\n", x->info.branch);
	if ((r = write_at(g, "HEAD", text)) < 0)
		return r;
	/* checkStat minimal: the run sees the files under another uid (an
	 * idmapped workspace), which must not make git re-read them all.
	 * gc.auto 0: git never repacks or prunes by itself in a run.  The
	 * identity is "agent <id>" unless spd.conf names one. */
	{
		char name[256], email[256];

		sess_agent_ident(s, x, name, sizeof(name), email,
				 sizeof(email));
		snprintf(text, sizeof(text),
			 "[core]\n\trepositoryformatversion = 0\n"
			 "\tfilemode = true\n\tbare = false\n"
			 "\tlogallrefupdates = true\n\tcheckStat = minimal\n"
			 "\ttrustctime = false\n[gc]\n\tauto = 0\n"
			 "[user]\n\tname = \"%s\"\n\temail = %s\n",
			 name, email);
	}
	if ((r = write_at(g, "config", text)) < 0)
		return r;
	snprintf(text, sizeof(text), "%s/objects\n", x->info.gitdir);
	if ((r = write_at(g, "objects/info/alternates", text)) < 0)
		return r;
	snprintf(text, sizeof(text), "%s\n", x->info.base);
	snprintf(text + 64, sizeof(text) - 64, "refs/heads/%s", x->info.branch);
	if ((r = write_at(g, text + 64, text)) < 0)
		return r;
	if ((r = write_at(g, "description", "spd: the agent's repository\n")) <
	    0)
		return r;
	/* packed-refs: the operator's branches and tags, read-only copies. */
	p = paths_join(x->info.worktree, ".git/packed-refs");
	f = p ? fopen(p, "we") : NULL;
	if (!f) {
		free(p);
		return -errno;
	}
	r = agent_packed_refs(repo, f);
	if (fclose(f) != 0 && r == 0)
		r = -EIO;
	free(p);
	if (r < 0)
		return r;
	/* The checkout's index, so that the agent's first `git status`
	 * knows the files it has. */
	if (asprintf(&idx, "%s/worktrees/%s/index", x->info.gitdir,
		     x->info.id) < 0)
		return -ENOMEM;
	p = paths_join(x->info.worktree, ".git/index");
	r = p ? sess_copy_file(idx, p, (off_t)1 << 32) : -ENOMEM;
	if (r == 0)
		chmod(p, 0644);
	free(p);
	free(idx);
	if (r < 0 && r != -ENOENT)
		return r;
	x->synced_set = false;
	return 0;
}

/* The agent's branch tip: 0 and *ret, -ENOENT when it has none. */
static int agent_tip(const struct sess *x, git_oid *ret)
{
	_cleanup_close_ int wt = -1;
	char ref[SESSION_FEATURE_MAX + 64], path[SESSION_FEATURE_MAX + 80];
	char buf[GIT_OID_HEXSZ + 8];
	int r;

	wt = open(x->info.worktree, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (wt < 0)
		return -errno;
	snprintf(ref, sizeof(ref), "refs/heads/%s", x->info.branch);
	snprintf(path, sizeof(path), ".git/%s", ref);
	r = read_small(wt, path, buf, sizeof(buf));
	if (r == 0) {
		buf[strcspn(buf, "\n")] = '\0';
		return git_oid_fromstr(ret, buf) < 0 ? -EINVAL : 0;
	}
	if (r != -ENOENT)
		return r;
	/* git pack-refs: the ref is a line "<oid> <name>" of packed-refs. */
	{
		struct stat st;
		_cleanup_close_ int fd =
		    sess_open_regular(wt, ".git/packed-refs", &st);
		char *text, *line, *save = NULL;
		ssize_t n;

		if (fd < 0)
			return fd == -EINVAL ? -EINVAL : -ENOENT;
		if (st.st_size > 64 * 1024 * 1024)
			return -E2BIG;
		text = malloc((size_t)st.st_size + 1);
		if (!text)
			return -ENOMEM;
		n = read(fd, text, (size_t)st.st_size);
		text[n > 0 ? n : 0] = '\0';
		r = -ENOENT;
		for (line = strtok_r(text, "\n", &save); line;
		     line = strtok_r(NULL, "\n", &save))
			if (strlen(line) == GIT_OID_HEXSZ + 1 + strlen(ref) &&
			    strcmp(line + GIT_OID_HEXSZ + 1, ref) == 0) {
				line[GIT_OID_HEXSZ] = '\0';
				r = git_oid_fromstr(ret, line) < 0 ? -EINVAL
								   : 0;
				break;
			}
		free(text);
		return r;
	}
}

/* ---- copying the agent's objects ---- */

struct stage {
	int from;      /* the agent's objects directory */
	char *to;      /* the staging objects directory */
	git_odb *main; /* the main repository's objects, for what it has */
	off_t bytes;
	size_t files;
};

static int copy_fd(int in, const char *to, off_t size)
{
	_cleanup_close_ int out = open(
	    to, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	char buf[65536];
	off_t total = 0;
	ssize_t k;

	if (out < 0)
		return -errno;
	while (total < size && (k = read(in, buf, sizeof(buf))) != 0) {
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (write(out, buf, (size_t)k) != k)
			return -EIO;
		total += k;
	}
	return 0;
}

/* Copy one regular file of the agent's objects (rel) to staging. */
static int stage_file(struct stage *sg, const char *rel)
{
	struct stat st;
	_cleanup_close_ int fd = sess_open_regular(sg->from, rel, &st);
	char *to;
	int r;

	if (fd == -EINVAL)
		return 0; /* not a regular file: no object of ours */
	if (fd < 0)
		return fd;
	if (++sg->files > AGENT_SYNC_FILES_MAX ||
	    (sg->bytes += st.st_size) > AGENT_SYNC_BYTES_MAX)
		return -E2BIG;
	to = paths_join(sg->to, rel);
	if (!to)
		return -ENOMEM;
	r = copy_fd(fd, to, st.st_size);
	free(to);
	return r;
}

static bool is_hex(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((p[i] >= '0' && p[i] <= '9') ||
		      (p[i] >= 'a' && p[i] <= 'f')))
			return false;
	return p[n] == '\0';
}

/* One directory of the agent's objects: "xx" (loose objects the main
 * repository lacks) or "pack" (every .pack and .idx). */
static int stage_dir(struct stage *sg, const char *name)
{
	int dfd = sys_openat2(sg->from, name, O_RDONLY | O_DIRECTORY);
	bool pack = strcmp(name, "pack") == 0;
	DIR *d;
	struct dirent *e;
	char *dst;
	int r = 0;

	if (dfd < 0)
		return dfd == -ENOENT || dfd == -ENOTDIR || dfd == -ELOOP ? 0
									  : dfd;
	d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return -errno;
	}
	dst = paths_join(sg->to, name);
	if (!dst || (mkdir(dst, 0700) < 0 && errno != EEXIST)) {
		r = dst ? -errno : -ENOMEM;
		goto out;
	}
	while (r == 0 && (e = readdir(d))) {
		char rel[300];
		size_t n = strlen(e->d_name);

		if (e->d_name[0] == '.')
			continue;
		if (pack) {
			if (n < 6 || (strcmp(e->d_name + n - 5, ".pack") &&
				      strcmp(e->d_name + n - 4, ".idx")))
				continue;
		} else {
			char hex[GIT_OID_HEXSZ + 1];
			git_oid oid;

			if (n != GIT_OID_HEXSZ - 2 || !is_hex(e->d_name, n))
				continue;
			/* name is "xx", d_name 38 hex digits (checked). */
			memcpy(hex, name, 2);
			memcpy(hex + 2, e->d_name, GIT_OID_HEXSZ - 2);
			hex[GIT_OID_HEXSZ] = '\0';
			if (git_oid_fromstr(&oid, hex) == 0 &&
			    git_odb_exists(sg->main, &oid))
				continue;
		}
		if (snprintf(rel, sizeof(rel), "%s/%s", name, e->d_name) >=
		    (int)sizeof(rel))
			continue; /* no object's name is that long */
		r = stage_file(sg, rel);
	}
out:
	free(dst);
	closedir(d);
	return r;
}

/* Copy what the main repository lacks of the agent's objects into
 * staging (state_dir/sync/<id>/objects, made anew). */
static int stage_objects(struct session_store *s, const struct sess *x,
			 git_odb *main, char **ret_dir)
{
	struct stage sg = {.from = -1, .main = main};
	_cleanup_close_ int wt = -1;
	char *base = NULL, *top = NULL;
	int r;

	if (asprintf(&top, "%s/sync", s->state_dir) < 0)
		return -ENOMEM;
	r = sess_private_dir(s, top);
	if (r == 0 && asprintf(&base, "%s/%s", top, x->info.id) < 0)
		r = -ENOMEM;
	free(top);
	if (r < 0)
		return r;
	sess_rm_tree(base);
	sg.to = paths_join(base, "objects");
	if (!sg.to || mkdir(base, 0700) < 0 || mkdir(sg.to, 0700) < 0) {
		r = sg.to ? -errno : -ENOMEM;
		goto out;
	}
	wt = open(x->info.worktree, O_PATH | O_DIRECTORY | O_CLOEXEC);
	sg.from =
	    wt < 0 ? wt : sys_openat2(wt, ".git/objects", O_PATH | O_DIRECTORY);
	if (sg.from < 0) {
		r = sg.from == -ENOENT ? 0 : sg.from;
		goto out;
	}
	r = stage_dir(&sg, "pack");
	for (int i = 0; r == 0 && i < 256; i++) {
		char name[3];

		snprintf(name, sizeof(name), "%02x", i);
		r = stage_dir(&sg, name);
	}
out:
	if (sg.from >= 0)
		close(sg.from);
	if (r == 0)
		*ret_dir = steal_ptr(sg.to);
	else
		sess_rm_tree(base);
	free(sg.to);
	free(base);
	return r;
}

/* ---- moving the branch ---- */

struct sync {
	git_repository *repo; /* the main repository, staging as alternate */
	git_odb *all;	      /* its odb, with the staging objects */
	git_odb *main;	      /* the main repository's objects alone */
	size_t copied;
	void *held; /* what the secret scan reads (sess_scan_hold) */
};

static int copy_object(struct sync *sy, const git_oid *id)
{
	git_odb_object *o = NULL;
	git_oid out;
	int r;

	if (git_odb_exists(sy->main, id))
		return 0;
	if (git_odb_read(&o, sy->all, id) < 0)
		return -EIO;
	r = git_odb_write(&out, sy->main, git_odb_object_data(o),
			  git_odb_object_size(o), git_odb_object_type(o));
	git_odb_object_free(o);
	if (r < 0 || !git_oid_equal(&out, id))
		return -EIO;
	sy->copied++;
	return 0;
}

/* A tree and what it holds, depth first; a tree the main repository
 * has is complete there already. */
static int copy_tree(struct sync *sy, const git_oid *id, int depth)
{
	git_tree *t = NULL;
	int r = 0;

	if (git_odb_exists(sy->main, id))
		return 0;
	if (depth > 1024)
		return -ELOOP;
	if (git_tree_lookup(&t, sy->repo, id) < 0)
		return -EIO;
	for (size_t i = 0; r == 0 && i < git_tree_entrycount(t); i++) {
		const git_tree_entry *e = git_tree_entry_byindex(t, i);

		if (git_tree_entry_type(e) == GIT_OBJECT_TREE)
			r = copy_tree(sy, git_tree_entry_id(e), depth + 1);
		else if (git_tree_entry_type(e) == GIT_OBJECT_BLOB)
			r = copy_object(sy, git_tree_entry_id(e));
		/* A submodule's commit lives in another repository. */
	}
	git_tree_free(t);
	return r == 0 ? copy_object(sy, id) : r;
}

/* The unified diff of a commit against its first parent (or the empty
 * tree), for the secret scan. */
int sess_diff_text(git_repository *repo, git_tree *from, git_tree *to,
		   git_diff **ret_diff, char **ret_text)
{
	git_diff_options o;
	git_diff *d = NULL;
	git_buf b = {0};

	git_diff_options_init(&o, GIT_DIFF_OPTIONS_VERSION);
	/* The names alone need no look at the contents (nor at the
	 * attributes that say which are binary). */
	if (!ret_text)
		o.flags |= GIT_DIFF_SKIP_BINARY_CHECK;
	if (git_diff_tree_to_tree(&d, repo, from, to, &o) < 0)
		return -EIO;
	if (ret_text) {
		if (git_diff_to_buf(&b, d, GIT_DIFF_FORMAT_PATCH) < 0) {
			git_diff_free(d);
			return -EIO;
		}
		*ret_text = strdup(b.ptr ? b.ptr : "");
		git_buf_dispose(&b);
		if (!*ret_text) {
			git_diff_free(d);
			return -ENOMEM;
		}
	}
	if (ret_diff)
		*ret_diff = d;
	else
		git_diff_free(d);
	return 0;
}

/* Scan one commit's own change; 1 (where filled) on a secret. */
static int scan_commit(struct session_store *s, struct sync *sy, git_commit *c,
		       char *where, size_t wlen)
{
	git_tree *from = NULL, *to = NULL;
	git_commit *parent = NULL;
	char *text = NULL, at[1024];
	int r;

	if (!sy->held)
		return 0;
	if (git_commit_tree(&to, c) < 0)
		return -EIO;
	if (git_commit_parentcount(c) > 0 &&
	    (git_commit_parent(&parent, c, 0) < 0 ||
	     git_commit_tree(&from, parent) < 0)) {
		r = -EIO;
		goto out;
	}
	r = sess_diff_text(sy->repo, from, to, NULL, &text);
	if (r == 0 && sess_scan(s, sy->held, text, at, sizeof(at)) == 1) {
		char hex[9];

		git_oid_tostr(hex, sizeof(hex), git_commit_id(c));
		snprintf(where, wlen, "commit %s: %s", hex, at);
		r = 1;
	}
out:
	free(text);
	git_tree_free(from);
	git_tree_free(to);
	git_commit_free(parent);
	return r;
}

/* Every commit from tip back to what the branch or the base has: scanned,
 * then copied with its trees and blobs. */
static int sync_commits(struct session_store *s, struct sync *sy,
			const git_oid *tip, const git_oid *hide1,
			const git_oid *hide2, char *where, size_t wlen,
			size_t *ret_n)
{
	git_revwalk *w = NULL;
	git_oid id;
	size_t n = 0;
	int r = 0;

	if (git_revwalk_new(&w, sy->repo) < 0 || git_revwalk_push(w, tip) < 0)
		r = -EIO;
	if (r == 0 && hide1)
		git_revwalk_hide(w, hide1);
	if (r == 0 && hide2)
		git_revwalk_hide(w, hide2);
	while (r == 0 && git_revwalk_next(&id, w) == 0) {
		git_commit *c = NULL;

		if (git_commit_lookup(&c, sy->repo, &id) < 0) {
			r = -EIO;
			break;
		}
		r = scan_commit(s, sy, c, where, wlen);
		if (r == 0)
			r = copy_tree(sy, git_commit_tree_id(c), 0);
		if (r == 0)
			r = copy_object(sy, &id);
		git_commit_free(c);
		n++;
	}
	git_revwalk_free(w);
	*ret_n = n;
	return r;
}

static int sync_open(struct session_store *s, const struct sess *x,
		     struct sync *sy, char **ret_stage)
{
	char *objs = NULL;
	int r;

	if (!sy->repo && sess_open_bare(s, x, &sy->repo) < 0)
		return -EIO;
	if (git_repository_odb(&sy->all, sy->repo) < 0 ||
	    !(objs = paths_join(x->info.gitdir, "objects")) ||
	    git_odb_open(&sy->main, objs) < 0) {
		free(objs);
		sess_seterr(s, "cannot open the session's repository: %s",
			    sess_git_msg());
		return -EIO;
	}
	free(objs);
	r = stage_objects(s, x, sy->main, ret_stage);
	if (r < 0) {
		sess_seterr(s, "cannot read the agent's objects: %s",
			    r == -E2BIG ? "more than the limit in one run"
					: strerror(-r));
		return r;
	}
	if (git_odb_add_disk_alternate(sy->all, *ret_stage) < 0) {
		sess_seterr(s, "cannot read the agent's objects: %s",
			    sess_git_msg());
		return -EIO;
	}
	return 0;
}

/* The staged objects and the object databases let go of; the
 * repository stays open (for the branch's move). */
static void sync_unstage(struct sync *sy, char *stage)
{
	git_odb_free(sy->main);
	git_odb_free(sy->all);
	sy->main = sy->all = NULL;
	if (stage) {
		/* staging is sync/<id>/objects: drop sync/<id>. */
		char *slash = strrchr(stage, '/');

		if (slash)
			*slash = '\0';
		sess_rm_tree(stage);
		free(stage);
	}
}

static void sync_close(struct sync *sy, char *stage)
{
	sync_unstage(sy, stage);
	git_repository_free(sy->repo);
	sy->repo = NULL;
}

int sess_branch_tip(struct session_store *s, const struct sess *x,
		    git_repository *repo, git_oid *ret)
{
	char ref[SESSION_FEATURE_MAX + 32];

	snprintf(ref, sizeof(ref), "refs/heads/%s", x->info.branch);
	if (git_reference_name_to_id(ret, repo, ref) < 0) {
		sess_seterr(s, "branch %s is gone: %s", x->info.branch,
			    sess_git_msg());
		return -ENOENT;
	}
	return 0;
}

/* Move refs/heads/<branch> from old to new, with a reflog message. */
int sess_branch_move(struct session_store *s, struct sess *x,
		     git_repository *repo, const git_oid *old,
		     const git_oid *new_tip, const char *why)
{
	char ref[SESSION_FEATURE_MAX + 32];
	git_reference *out = NULL;

	snprintf(ref, sizeof(ref), "refs/heads/%s", x->info.branch);
	if (git_reference_create_matching(&out, repo, ref, new_tip, 1, old,
					  why) < 0) {
		sess_seterr(s, "cannot move %s: %s", x->info.branch,
			    sess_git_msg());
		return -EIO;
	}
	git_reference_free(out);
	sess_note_ref(s, x->info.gitdir, x->info.branch);
	return 0;
}

/* The loop's part before a sync: 1 with *ret_x and *tip when the agent's
 * tip is new, 0 when there is nothing to take, or < 0 with the error
 * set. */
static int sync_ask(struct session_store *s, const char *id,
		    struct sess **ret_x, git_oid *tip)
{
	struct sess *x = NULL;
	int r;

	r = sess_live_worktree(s, id, &x);
	if (r != 0)
		return r < 0 ? r : 0;
	if (x->syncing)
		return 0; /* the sync out takes them */
	r = agent_tip(x, tip);
	if (r == -ENOENT || r == -ENOTDIR || r == -ELOOP || r == -EXDEV)
		/* No branch in the agent's repository, or no repository
		 * (the agent removed or replaced its .git): nothing to take;
		 * its files are committed at the end all the same. */
		return 0;
	if (r < 0) {
		sess_seterr(s, "the agent's branch %s cannot be read: %s",
			    x->info.branch, strerror(-r));
		return -EINVAL;
	}
	if (x->synced_set && git_oid_equal(tip, &x->synced))
		return 0;
	*ret_x = x;
	return 1;
}

/* The session's branch in the main repository (opened into *repo, the
 * caller's to free): 1 when it is at tip already, 0 when not, or < 0
 * with the error set. */
static int branch_at(struct session_store *s, const struct sess *x,
		     const git_oid *tip, git_repository **repo, git_oid *branch)
{
	int r;

	if (sess_open_bare(s, x, repo) < 0)
		return -EIO;
	r = sess_branch_tip(s, x, *repo, branch);
	return r < 0 ? r : git_oid_equal(tip, branch);
}

/* A sync's work, on any thread (x's names and the store's state_dir
 * are read): 0 when tip is the branch's already, 1 when the agent's
 * commits are copied and sy->repo is open for the branch's move from
 * *branch, 2 on a secret (where says which), or < 0 with the error
 * set. */
static int sync_take(struct session_store *s, const struct sess *x,
		     const git_oid *tip, struct sync *sy, git_oid *branch,
		     char *where, size_t wlen, size_t *ret_n)
{
	char *stage = NULL;
	git_oid base;
	int r;

	/* The branch before the agent's objects: when the tip is already
	 * there (a session's first run, the first after spd restarts),
	 * nothing is staged (256 directories looked at, two object
	 * databases opened: most of a first run's 20 ms here). */
	r = branch_at(s, x, tip, &sy->repo, branch);
	if (r != 0)
		return r < 0 ? r : 0;
	r = sync_open(s, x, sy, &stage);
	if (r < 0)
		goto out;
	git_oid_fromstr(&base, x->info.base);
	if (!git_oid_equal(tip, &base) &&
	    git_graph_descendant_of(sy->repo, tip, &base) != 1) {
		char hex[9];

		git_oid_tostr(hex, sizeof(hex), tip);
		sess_seterr(s,
			    "%s in the worktree's repository (at %s) does not "
			    "descend from the session's base %.8s; %s keeps "
			    "its commits",
			    x->info.branch, hex, x->info.base, x->info.branch);
		r = -EXDEV;
		goto out;
	}
	r = sync_commits(s, sy, tip, branch, &base, where, wlen, ret_n);
	if (r == 1) {
		r = 2;
		goto out;
	}
	if (r < 0) {
		sess_seterr(s, "cannot copy the agent's commits: %s",
			    sess_git_msg());
		goto out;
	}
	r = 1;
out:
	sync_unstage(sy, stage);
	return r;
}

/* The loop's part after: the branch moved from branch to tip, the
 * session's record of it and the journal's; session_sync's answer. */
static int sync_land(struct session_store *s, struct sess *x, int r,
		     struct sync *sy, const git_oid *tip, const git_oid *branch,
		     const char *where, size_t n)
{
	char msg[256];

	if (r == 0) {
		x->synced = *tip;
		x->synced_set = true;
		return 0;
	}
	if (r == 2) {
		session_end_attempt(s, x->info.id, "SECRET-IN-DIFF", where);
		return -EACCES;
	}
	if (r < 0)
		return r;
	snprintf(msg, sizeof(msg), "spd: the agent's commits (session %s)",
		 x->info.id);
	r = sess_branch_move(s, x, sy->repo, branch, tip, msg);
	if (r < 0)
		return r;
	x->synced = *tip;
	x->synced_set = true;
	{
		char from[GIT_OID_HEXSZ + 1], to[GIT_OID_HEXSZ + 1];

		git_oid_tostr(from, sizeof(from), branch);
		git_oid_tostr(to, sizeof(to), tip);
		sess_journal(s, x->info.id, "session.commit",
			     json_pack("{s:s, s:s, s:s, s:I, s:I}", "branch",
				       x->info.branch, "from", from, "to", to,
				       "commits", (json_int_t)n, "objects",
				       (json_int_t)sy->copied),
			     "%s moved to %.8s (%zu commit%s of the agent)",
			     x->info.branch, to, n, n == 1 ? "" : "s");
	}
	return 1;
}

int session_sync(struct session_store *s, const char *id, char *where,
		 size_t wlen)
{
	struct sess *x = NULL;
	struct sync sy = {0};
	git_oid tip, branch;
	size_t n = 0;
	int r;

	r = sync_ask(s, id, &x, &tip);
	if (r <= 0)
		return r;
	sy.held = sess_scan_hold(s);
	r = sync_take(s, x, &tip, &sy, &branch, where, wlen, &n);
	r = sync_land(s, x, r, &sy, &tip, &branch, where, n);
	sess_scan_release(s, sy.held);
	sync_close(&sy, NULL);
	return r;
}

struct session_syncjob {
	struct session_store *s;
	/* The session's names, copied (sync_take reads no other field). */
	struct sess x;
	git_oid tip, branch;
	struct sync sy;
	size_t n;
	int r;
	char where[1100];
	char err[sizeof(((struct session_store *)0)->err)];
};

static void syncjob_free(struct session_syncjob *j)
{
	sess_scan_release(j->s, j->sy.held);
	sync_close(&j->sy, NULL);
	free(j->x.info.gitdir);
	free(j->x.info.worktree);
	free(j->x.info.branch);
	free(j);
}

int session_sync_begin(struct session_store *s, const char *id,
		       struct session_syncjob **ret)
{
	struct sess *x = sess_find(s, id);
	struct session_syncjob *j;
	git_oid tip;
	int r;

	*ret = NULL;
	if (x && x->syncing)
		return -EBUSY; /* the run waits; session_sync takes nothing */
	r = sync_ask(s, id, &x, &tip);
	if (r <= 0)
		return r;
	if (!x->synced_set) {
		/* The first since the session's or spd's start: the branch is
		 * read here (0.6 ms), so that a first run that committed
		 * nothing waits for no thread (the pool may be busy with the
		 * new worktree's walk). */
		git_repository *repo = NULL;
		git_oid branch;
		bool same = branch_at(s, x, &tip, &repo, &branch) == 1;

		git_repository_free(repo);
		s->err[0] = '\0';
		if (same) {
			x->synced = tip;
			x->synced_set = true;
			return 0;
		}
	}
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->s = s;
	j->tip = tip;
	j->x.info = (struct session_info){.mode = x->info.mode};
	snprintf(j->x.info.id, sizeof(j->x.info.id), "%s", x->info.id);
	snprintf(j->x.info.base, sizeof(j->x.info.base), "%s", x->info.base);
	j->x.info.gitdir = strdup(x->info.gitdir);
	j->x.info.worktree = strdup(x->info.worktree);
	j->x.info.branch = strdup(x->info.branch);
	if (!j->x.info.gitdir || !j->x.info.worktree || !j->x.info.branch) {
		syncjob_free(j);
		return -ENOMEM;
	}
	j->sy.held = sess_scan_hold(s);
	x->syncing = true;
	s->aside++;
	*ret = j;
	return 1;
}

void session_sync_work(struct session_syncjob *j)
{
	sess_seterr_to(j->err, sizeof(j->err));
	j->r = sync_take(j->s, &j->x, &j->tip, &j->sy, &j->branch, j->where,
			 sizeof(j->where), &j->n);
	sess_seterr_to(NULL, 0);
}

const char *session_sync_id(const struct session_syncjob *j)
{
	return j->x.info.id;
}

int session_sync_end(struct session_syncjob *j, char *where, size_t wlen)
{
	struct session_store *s = j->s;
	struct sess *x = sess_find(s, j->x.info.id);
	int r;

	if (x)
		x->syncing = false;
	if (s->closing) {
		r = -ESHUTDOWN;
	} else if (!x) {
		r = -ENOENT; /* gone meanwhile: nothing to move */
	} else {
		s->err[0] = '\0';
		if (j->r < 0)
			sess_seterr(s, "%s", j->err);
		r = sync_land(s, x, j->r, &j->sy, &j->tip, &j->branch, j->where,
			      j->n);
		snprintf(where, wlen, "%s", j->where);
	}
	syncjob_free(j);
	s->aside--;
	sess_store_closed_maybe(s);
	return r;
}

/* ---- the agent's stash, kept at the end ---- */

/* The most stash entries kept at the end. */
#define AGENT_STASH_MAX 100

/* The stash entries of the agent's repository, newest first, from its
 * reflog (or refs/stash alone): their number. */
static size_t agent_stash(const struct sess *x, git_oid *ret, size_t max)
{
	_cleanup_close_ int wt = -1, fd = -1;
	char *text = NULL, *line, *save = NULL, one[GIT_OID_HEXSZ + 8];
	struct stat st;
	size_t n = 0;
	ssize_t k;

	wt = open(x->info.worktree, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (wt < 0)
		return 0;
	fd = sess_open_regular(wt, ".git/logs/refs/stash", &st);
	if (fd >= 0 && st.st_size < 16 * 1024 * 1024 &&
	    (text = malloc((size_t)st.st_size + 1))) {
		k = read(fd, text, (size_t)st.st_size);
		text[k > 0 ? k : 0] = '\0';
		/* "<old> <new> <who> <when>\t<message>", oldest first. */
		for (line = strtok_r(text, "\n", &save); line;
		     line = strtok_r(NULL, "\n", &save)) {
			git_oid id;

			if (strlen(line) < 2 * GIT_OID_HEXSZ + 1)
				continue;
			line[2 * GIT_OID_HEXSZ + 1] = '\0';
			if (git_oid_fromstr(&id, line + GIT_OID_HEXSZ + 1) ==
				0 &&
			    !git_oid_is_zero(&id) && n < max)
				ret[n++] = id;
		}
		free(text);
		/* Newest first, as git stash list shows them. */
		for (size_t i = 0; i < n / 2; i++) {
			git_oid t = ret[i];

			ret[i] = ret[n - 1 - i];
			ret[n - 1 - i] = t;
		}
		return n;
	}
	if (read_small(wt, ".git/refs/stash", one, sizeof(one)) == 0) {
		one[strcspn(one, "\n")] = '\0';
		if (git_oid_fromstr(&ret[0], one) == 0)
			return 1;
	}
	return 0;
}

size_t sess_stash_count(const struct sess *x)
{
	git_oid ids[AGENT_STASH_MAX];

	return agent_stash(x, ids, AGENT_STASH_MAX);
}

int sess_keep_stash(struct session_store *s, struct sess *x, char *where,
		    size_t wlen, json_t **ret)
{
	git_oid ids[AGENT_STASH_MAX], branch, base;
	struct sync sy = {0};
	char *stage = NULL;
	size_t n = agent_stash(x, ids, AGENT_STASH_MAX), m;
	json_t *kept = NULL;
	int r;

	*ret = NULL;
	if (n == 0)
		return 0;
	sy.held = sess_scan_hold(s);
	r = sync_open(s, x, &sy, &stage);
	if (r < 0)
		goto out;
	r = sess_branch_tip(s, x, sy.repo, &branch);
	if (r < 0)
		goto out;
	git_oid_fromstr(&base, x->info.base);
	kept = json_array();
	for (size_t i = 0; i < n && r >= 0; i++) {
		char ref[96];
		git_reference *out = NULL;

		r = sync_commits(s, &sy, &ids[i], &branch, &base, where, wlen,
				 &m);
		if (r == 1) {
			r = -EACCES;
			break;
		}
		if (r < 0) {
			sess_seterr(s, "cannot keep the agent's stash: %s",
				    sess_git_msg());
			break;
		}
		/* A ref of spd's own, as the checkpoints': stash@{i}. */
		snprintf(ref, sizeof(ref), "refs/spd/stash/%s/%zu", x->info.id,
			 i);
		if (git_reference_create(&out, sy.repo, ref, &ids[i], 1,
					 "spd: the agent's stash") < 0) {
			sess_seterr(s, "cannot keep the agent's stash: %s",
				    sess_git_msg());
			r = -EIO;
			break;
		}
		git_reference_free(out);
		json_array_append_new(kept, json_string(ref));
	}
	if (r >= 0) {
		sess_journal(s, x->info.id, "session.stash",
			     json_pack("{s:O}", "refs", kept),
			     "%zu stash entr%s of the agent kept under "
			     "refs/spd/stash/%s",
			     n, n == 1 ? "y" : "ies", x->info.id);
		*ret = steal_ptr(kept);
		r = 1;
	}
out:
	json_decref(kept);
	sess_scan_release(s, sy.held);
	sync_close(&sy, stage);
	return r;
}

int sess_agent_git_ensure(struct session_store *s, struct sess *x)
{
	git_repository *repo = NULL;
	struct stat st;
	char *p;
	int r;

	if (x->info.mode != SESSION_MODE_WORKTREE)
		return 0;
	p = paths_join(x->info.worktree, ".git");
	if (!p)
		return -ENOMEM;
	r = lstat(p, &st);
	free(p);
	/* A session started by an spd before the agent had a repository of
	 * its own: libgit2's ".git" file is still there. */
	if (r < 0 || !S_ISREG(st.st_mode))
		return 0;
	if (sess_open_bare(s, x, &repo) < 0)
		return -EIO;
	r = sess_agent_git_make(s, x, repo);
	git_repository_free(repo);
	return r;
}

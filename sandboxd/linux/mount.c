/*
 * A run's mount plan (sandboxd/linux/mount.h): built in sandboxd from the
 * request, applied in the run's own mount namespace (async-signal-safe),
 * including the hard-link check of the writable paths.
 */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "mount.h"
#include "mount_priv.h"
#include "sandboxd/linux/links.h"
#include "sandboxd/linux/names.h"
#include "sandboxd/linux/steps.h"
#include "proto/sandbox.h"

/* Home-relative credential locations (docs/design.md, issue 3): covered even
 * when they do not exist, so that a run cannot plant one.  A directory ends
 * in '/': a missing one below a writable path is made a directory, any
 * other an empty file (a ~/.netrc or ~/.bash_history made a directory would
 * break the operator's own tools). */
static const char *const mp_credentials[] = {
    ".ssh/",
    ".aws/",
    ".azure/",
    ".gnupg/",
    ".netrc",
    ".docker/",
    ".kube/",
    ".password-store/",
    ".config/gh/",
    ".config/gcloud/",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    /* git's credential store where XDG puts it, database and cloud
     * clients' passwords and tokens. */
    ".config/git/credentials",
    ".pgpass",
    ".my.cnf",
    ".vault-token",
    ".s3cfg",
    ".config/rclone/",
    ".terraform.d/credentials.tfrc.json",
    /* Keyrings and browser profiles (cookies, saved passwords). */
    ".local/share/keyrings/",
    ".mozilla/",
    ".config/google-chrome/",
    ".config/chromium/",
    /* Shell and REPL histories, where a key pasted on a command line
     * (export OPENAI_API_KEY=...) stays. */
    ".bash_history",
    ".zsh_history",
    ".local/share/fish/fish_history",
    ".python_history",
    ".node_repl_history",
    ".psql_history",
    ".mysql_history",
    /* Coding agents' own logins: an API key or a subscription's OAuth
     * tokens (Claude Code keeps them in ~/.claude/.credentials.json and
     * ~/.claude.json, Codex in ~/.codex/auth.json), worth more than the
     * capped turn key an agent run is given, and the agents' transcripts,
     * where keys pasted into a prompt stay. */
    ".claude/",
    ".claude.json",
    ".codex/",
    ".gemini/",
    ".config/github-copilot/",
    NULL,
};

/* Home-relative package caches that builds need writable, bound only
 * when they exist. */
static const char *const mp_caches[] = {
    ".cache", ".cargo/registry", ".npm", "go/pkg/mod", NULL,
};

/*
 * Known homes of daemon sockets outside /run (docs/sandbox.md): an LXD or
 * Incus socket is root for members of the lxd/incus group, kubelet's and
 * MySQL's (RHEL) sockets, and in the home directory the container VMs
 * (Colima, Lima, Rancher Desktop, podman machine) and password managers'
 * ssh agents.  Covered whole when they exist, so that a socket bound
 * there after the run started is covered too.
 */
static const char *const mp_socket_dirs[] = {
    "/var/snap/lxd/common/lxd", "/var/lib/lxd",	  "/var/lib/incus",
    "/var/lib/kubelet",		"/var/lib/mysql", NULL,
};
static const char *const mp_home_socket_dirs[] = {
    ".colima",
    ".lima",
    ".rd",
    ".1password",
    ".bitwarden-ssh-agent.sock",
    ".local/share/containers/podman/machine",
    NULL,
};

static const char *const mp_devices[] = {
    "null", "zero", "full", "random", "urandom", "tty", NULL,
};

static char *mp_own(struct mountplan *p, char *s)
{
	if (!s)
		return NULL;
	if (p->nowned == p->owned_cap) {
		size_t cap = p->owned_cap ? 2 * p->owned_cap : 32;
		char **n = realloc(p->owned, cap * sizeof(*n));

		if (!n) {
			free(s);
			return NULL;
		}
		p->owned = n;
		p->owned_cap = cap;
	}
	p->owned[p->nowned++] = s;
	return s;
}

/* Paths are joined into chunks of MP_CHUNK bytes (a longer one gets its
 * own): a plan is built on every run and joins some hundred of them. */
#define MP_CHUNK 4096

/* a, b and c joined, kept by the plan. */
static char *mp_join3(struct mountplan *p, const char *a, const char *b,
		      const char *c)
{
	size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
	size_t n = la + lb + lc + 1;
	char *s;

	if (n > p->chunk_left) {
		char *k = mp_own(p, malloc(n > MP_CHUNK ? n : MP_CHUNK));

		if (!k)
			return NULL;
		if (n > MP_CHUNK) {
			s = k;
			goto copy;
		}
		p->chunk = k;
		p->chunk_left = MP_CHUNK;
	}
	s = p->chunk;
	p->chunk += n;
	p->chunk_left -= n;
copy:
	memcpy(s, a, la);
	memcpy(s + la, b, lb);
	memcpy(s + la + lb, c, lc + 1);
	return s;
}

static char *mp_join(struct mountplan *p, const char *a, const char *b)
{
	return mp_join3(p, a, b, "");
}

static int mp_add(struct mountplan *p, struct mountplan_op op)
{
	if (p->n >= MOUNTPLAN_OPS_MAX)
		return -SPD_ETOOBIG;
	p->ops[p->n++] = op;
	return 0;
}

/* An op on a path as seen inside the run. */
static int mp_add_path(struct mountplan *p, enum mp_kind kind, const char *path,
		       bool mkdir_target, int userns_fd)
{
	struct mountplan_op op = {
	    .kind = kind, .mkdir_target = mkdir_target, .userns_fd = userns_fd};

	op.dst = mp_join(p, MP_NEWROOT, path);
	op.src = mp_join(p, MP_OLDROOT, path);
	if (!op.dst || !op.src)
		return -ENOMEM;
	return mp_add(p, op);
}

static bool path_is_under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	if (n == 1 && dir[0] == '/')
		return true;
	return strncmp(path, dir, n) == 0 && (path[n] == '/' || !path[n]);
}

static int add_write_path(struct mountplan *p, const char *path)
{
	const char **n = realloc(p->write_paths, (p->nwrite + 2) * sizeof(*n));

	if (!n)
		return -ENOMEM;
	p->write_paths = n;
	n[p->nwrite++] = path;
	n[p->nwrite] = NULL;
	return 0;
}

static int add_read_path(struct mountplan *p, const char *path)
{
	const char **n = realloc(p->read_paths, (p->nread + 2) * sizeof(*n));

	if (!n)
		return -ENOMEM;
	p->read_paths = n;
	n[p->nread++] = path;
	n[p->nread] = NULL;
	return 0;
}

static int cmp_len(const void *a, const void *b)
{
	size_t la = strlen(*(const char *const *)a);
	size_t lb = strlen(*(const char *const *)b);

	return la < lb ? -1 : la > lb;
}

/* mkdir -p with mode for the parts it creates; the parts already present
 * are fine.  Stack buffer, syscalls only: safe in the run's child too.
 * On the host (as sandboxd, the operator) with 0700; in the child's new
 * root with 0755, only ever inside the plan's tmpfs mounts or below a
 * writable bind's mount point. */
int mp_mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	size_t n = strlen(path);

	if (n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		buf[i] = '\0';
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return -errno;
		buf[i] = path[i];
	}
	return 0;
}

int mp_touch_p(const char *path, mode_t dirmode, mode_t filemode, int oflags)
{
	char buf[PATH_MAX];
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;
	int fd, r;

	if (n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, n);
	buf[n] = '\0';
	if (n && (r = mp_mkdir_p(buf, dirmode)) < 0)
		return r;
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | oflags, filemode);
	if (fd < 0)
		return (oflags & O_EXCL) && errno == EEXIST ? 0 : -errno;
	close(fd);
	return 0;
}

static bool under_any(const char *path, const char *const *dirs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (path_is_under(path, dirs[i]))
			return true;
	return false;
}

/* The private /tmp starts empty and is thrown away, /dev and /proc are
 * the run's own: nothing of the host's below them needs a cover, unless a
 * writable bind brings it in. */
static bool in_run_own_area(const char *path)
{
	return path_is_under(path, "/tmp") || path_is_under(path, "/var/tmp") ||
	       path_is_under(path, "/dev") || path_is_under(path, "/proc");
}

/*
 * Cover one hidden path.  An existing directory gets an empty read-only
 * tmpfs, an existing file the mode-0 empty file.  A missing one cannot be
 * created by the run where its parent is read-only (the root bind), so
 * nothing is needed there; below a writable path it is created on the
 * host (an empty 0700 directory, or with dir false an empty 0600 file)
 * and covered, so that a run cannot plant ~/.ssh/authorized_keys when the
 * workspace is the home directory.
 */
static int add_hidden_as(struct mountplan *p, const char *path, bool dir,
			 const char *const *writable, size_t nwritable)
{
	struct stat st;
	bool under = under_any(path, writable, nwritable);
	int r;

	if (!under && in_run_own_area(path))
		return 0;
	if (lstat(path, &st) < 0) {
		if (errno != ENOENT && errno != ENOTDIR)
			return -errno;
		if (!under)
			return 0;
		if ((r = dir ? mp_mkdir_p(path, 0700)
			     : mp_touch_p(path, 0700, 0600,
					  O_EXCL | O_NOFOLLOW)) < 0)
			return r;
		if (lstat(path, &st) < 0)
			return -errno;
	}
	if (S_ISDIR(st.st_mode))
		r = mp_add_path(p, MP_HIDE_DIR, path, false, -1);
	else
		r = mp_add_path(p, MP_HIDE_FILE, path, false, -1);
	if (r == 0)
		p->ops[p->n - 1].optional = true;
	return r;
}

static int add_hidden(struct mountplan *p, const char *path,
		      const char *const *writable, size_t nwritable)
{
	return add_hidden_as(p, path, true, writable, nwritable);
}

/* Cover the home directory's credential locations (mp_credentials).
 * One the home's listing does not have is missing without a lookup, and
 * outside the writable paths needs no cover (add_hidden_as). */
static int add_credentials(struct mountplan *p, const char *home,
			   const struct dir_names *names,
			   const char *const *writable, size_t nwritable)
{
	size_t hl = strlen(home);
	char c[PATH_MAX];

	for (size_t i = 0; mp_credentials[i]; i++) {
		size_t len = strlen(mp_credentials[i]);
		bool dir = mp_credentials[i][len - 1] == '/';
		int r;

		/* home "/" name, without a directory's '/' */
		if (hl + 1 + len >= sizeof(c))
			return -ENAMETOOLONG;
		memcpy(c, home, hl);
		c[hl] = '/';
		memcpy(c + hl + 1, mp_credentials[i], len - dir);
		c[hl + 1 + len - dir] = '\0';
		if (!dir_names_may_have(names, mp_credentials[i]) &&
		    !under_any(c, writable, nwritable))
			continue;
		if ((r = add_hidden_as(p, c, dir, writable, nwritable)) < 0)
			return r;
	}
	return 0;
}

/*
 * What of the host's /run a run with the host's network still needs: the
 * resolver's configuration, i.e. the target of /etc/resolv.conf when it
 * points into /run (systemd-resolved's stub-resolv.conf,
 * NetworkManager's or resolvconf's resolv.conf), and systemd-resolved's
 * directory.  Everything else there is service sockets.  Each is bound
 * read-only into the run's own /run tmpfs, which is then sealed; sockets
 * inside them (resolved's varlink socket) are covered like any other by
 * the socket scan (mountplan_in.sockets).
 */
static const char *const mp_run_keep_dirs[] = {
    "/run/systemd/resolve",
    NULL,
};

static int add_run_bind(struct mountplan *p, const char *path, bool dir)
{
	int r = mp_add_path(p, MP_BIND_RO, path, false, -1);

	if (r < 0)
		return r;
	p->ops[p->n - 1].mkdir_target = dir;
	p->ops[p->n - 1].touch_target = !dir;
	return add_read_path(p, p->ops[p->n - 1].src + strlen(MP_OLDROOT));
}

static int add_run(struct mountplan *p, bool net_host)
{
	char *resolv;
	struct stat st;
	bool covered = false;
	int r;

	if (!net_host) {
		if ((r = mp_add_path(p, MP_HIDE_DIR, "/run", false, -1)) < 0)
			return r;
		p->ops[p->n - 1].optional = true;
		return 0;
	}
	if ((r = mp_add(p, (struct mountplan_op){.kind = MP_TMPFS,
						 .dst = MP_NEWROOT "/run",
						 .data = "mode=0755,size=64k",
						 .flags = MS_NOSUID | MS_NODEV |
							  MS_NOEXEC})) < 0)
		return r;
	for (size_t i = 0; mp_run_keep_dirs[i]; i++) {
		if (lstat(mp_run_keep_dirs[i], &st) < 0 || !S_ISDIR(st.st_mode))
			continue;
		if ((r = add_run_bind(p, mp_run_keep_dirs[i], true)) < 0)
			return r;
	}
	/* realpath follows the whole chain, so a relative or multi-step
	 * link lands on the file itself. */
	resolv = mp_own(p, realpath("/etc/resolv.conf", NULL));
	if (resolv && path_is_under(resolv, "/run") && strcmp(resolv, "/run") &&
	    stat(resolv, &st) == 0 && S_ISREG(st.st_mode)) {
		for (size_t i = 0; i < p->nread; i++)
			covered |= path_is_under(resolv, p->read_paths[i]);
		if (!covered && (r = add_run_bind(p, resolv, false)) < 0)
			return r;
	}
	return mp_add(p, (struct mountplan_op){.kind = MP_SEAL_RO,
					       .dst = MP_NEWROOT "/run"});
}

static bool is_private_area(const char *path)
{
	return path_is_under(path, "/tmp") || path_is_under(path, "/dev") ||
	       path_is_under(path, "/proc") || path_is_under(path, "/run") ||
	       path_is_under(path, "/var/tmp");
}

/* Cover an existing known socket directory (or file) whole. */
static int add_socket_dir(struct mountplan *p, const char *path,
			  const char *const *writable, size_t nw)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return 0;
	return add_hidden(p, path, writable, nw);
}

/*
 * Cover each stray pathname socket: one the mount plan does not already
 * put out of reach.  A socket under a writable path is the run's to use
 * (by design); one under /tmp, /var/tmp, /dev or /proc is in the host's
 * copy of an area the run gets privately; one under /run is under the
 * run's empty tmpfs unless it is inside a path bound back from it; one
 * under a covered directory is hidden with it.  The name is resolved
 * first, so that a socket bound through a symlink (/var/run/x.sock) is
 * judged where it lives.
 */
static int add_sockets(struct mountplan *p, const char *const *sockets,
		       const char *const *writable, size_t nw,
		       bool var_run_hidden)
{
	size_t nsock = 0, first = p->n;
	int r;

	for (size_t i = 0; sockets && sockets[i]; i++) {
		char *rp = realpath(sockets[i], NULL);
		bool skip = false, dup = false;
		struct stat st;

		if (!rp)
			continue; /* gone since the scan */
		if (lstat(rp, &st) < 0 || !S_ISSOCK(st.st_mode)) {
			free(rp);
			continue;
		}
		for (size_t k = 0; k < first && !skip; k++)
			skip = (p->ops[k].kind == MP_HIDE_DIR ||
				p->ops[k].kind == MP_HIDE_FILE) &&
			       path_is_under(rp, p->ops[k].dst +
						     strlen(MP_NEWROOT));
		for (size_t k = 0; k < nw && !skip; k++)
			skip = path_is_under(rp, writable[k]);
		if (!skip && path_is_under(rp, "/run")) {
			skip = true;
			for (size_t k = 0; k < p->nread; k++)
				skip &= !path_is_under(rp, p->read_paths[k]);
		}
		if (!skip)
			skip =
			    path_is_under(rp, "/tmp") ||
			    path_is_under(rp, "/var/tmp") ||
			    path_is_under(rp, "/dev") ||
			    path_is_under(rp, "/proc") ||
			    (var_run_hidden && path_is_under(rp, "/var/run"));
		for (size_t k = first; k < p->n && !skip && !dup; k++)
			dup = !strcmp(p->ops[k].dst + strlen(MP_NEWROOT), rp);
		if (skip || dup) {
			free(rp);
			continue;
		}
		if (++nsock > MOUNTPLAN_SOCKETS_MAX) {
			free(rp);
			return -E2BIG;
		}
		if (!mp_own(p, rp))
			return -ENOMEM;
		if ((r = mp_add_path(p, MP_HIDE_FILE, rp, false, -1)) < 0)
			return r;
		p->ops[p->n - 1].optional = true;
	}
	return 0;
}

/*
 * A hidden directory that holds a writable path (spd's state dir holds the
 * session worktrees; a state dir may sit inside the config dir) cannot be
 * covered by the empty directory: that would cover the workspace too.  It
 * gets a "veil" instead: an empty tmpfs mounted before the writable binds,
 * in which their mount points are made, sealed read-only after them.  The
 * run sees the path down to its workspace and nothing else of the
 * directory.  Only the outermost of nested veils is kept: an inner one is
 * already an empty directory in the outer tmpfs.  Returns the number of
 * veils written to ret (at most MOUNTPLAN_VEILS_MAX).
 */
static size_t find_veils(const struct mountplan_in *in,
			 const char *const *writable, size_t nw,
			 const char **ret)
{
	size_t n = 0;

	for (size_t i = 0; in->hidden && in->hidden[i]; i++) {
		const char *h = in->hidden[i];
		bool holds = false, inner = false;

		for (size_t k = 0; k < nw && !holds; k++)
			holds = path_is_under(writable[k], h) &&
				strcmp(writable[k], h) != 0;
		for (size_t k = 0; in->hidden[k] && holds && !inner; k++)
			inner = k != i && path_is_under(h, in->hidden[k]) &&
				(strcmp(h, in->hidden[k]) != 0 || k < i);
		/* The private /tmp and /var/tmp start empty: nothing of the
		 * host's is there to veil, and the writable bind makes its
		 * own way down. */
		if (path_is_under(h, "/tmp") || path_is_under(h, "/var/tmp"))
			continue;
		if (holds && !inner && n < MOUNTPLAN_VEILS_MAX)
			ret[n++] = h;
	}
	return n;
}

/*
 * As root the run's uid is unprivileged, and a workspace in /root (0700)
 * could not even be reached.  Each directory above a writable path that
 * others cannot search gets a read-only idmapped bind through which it is
 * the run uid's: the run can walk down to its workspace and read what the
 * operator could, as it could when spd runs as a normal user (the
 * credential locations are covered on top of it all the same).
 */
static int add_idmapped_ancestors(struct mountplan *p,
				  const char *const *writable, size_t nw,
				  const char *const *veils, size_t nveils,
				  int userns_fd)
{
	char **anc = NULL;
	size_t na = 0;
	int r = 0;

	for (size_t i = 0; i < nw; i++) {
		char buf[PATH_MAX];
		size_t n = strlen(writable[i]);

		if (n >= sizeof(buf) || is_private_area(writable[i]))
			continue;
		memcpy(buf, writable[i], n + 1);
		for (size_t k = 1; k < n; k++) {
			struct stat st;
			bool seen = false;

			if (buf[k] != '/')
				continue;
			buf[k] = '\0';
			for (size_t j = 0; j < na; j++)
				seen |= !strcmp(anc[j], buf);
			/* Below a veil the run sees the veil's tmpfs, not the
			 * host's directory. */
			if (!seen && !under_any(buf, veils, nveils) &&
			    stat(buf, &st) == 0 && S_ISDIR(st.st_mode) &&
			    !(st.st_mode & S_IXOTH)) {
				char **t = realloc(anc, (na + 1) * sizeof(*t));
				char *c = t ? mp_own(p, strdup(buf)) : NULL;

				if (t)
					anc = t;
				if (!c) {
					r = -ENOMEM;
					goto out;
				}
				anc[na++] = c;
			}
			buf[k] = '/';
		}
	}
	if (na)
		qsort(anc, na, sizeof(*anc), cmp_len);
	for (size_t i = 0; i < na; i++) {
		if ((r = mp_add_path(p, MP_BIND_IDMAP, anc[i], false,
				     userns_fd)) < 0)
			goto out;
		p->ops[p->n - 1].readonly = true;
	}
out:
	free(anc);
	return r;
}

/* Whether path is one of in->writable (the request's own list, not the
 * workspace) or lies below one. */
static bool listed_writable(const struct mountplan_in *in, const char *path)
{
	for (size_t i = 0; in->writable && in->writable[i]; i++)
		if (path_is_under(path, in->writable[i]))
			return true;
	return false;
}

/* What a read-only path becomes in the run (readonly_kinds). */
enum ro_kind {
	RO_REBIND, /* the run's view of it made read-only */
	RO_OWN,	   /* a bind of its own, idmapped as root */
	RO_SKIP,   /* the operator listed it (or above it) as writable */
};

/*
 * Each of in->readonly classified once per run (its stat and realpath
 * are not repeated): one the operator listed as writable is writable, the
 * later, explicit word.  One outside every writable path that the run
 * could not otherwise read — a worktree session's git dir, which spd made
 * under its umask 077 (as root the run's uid is unprivileged: the bind is
 * idmapped, as the workspace's is), or one in a private area (/tmp and
 * the like are the run's own tmpfs: the bind makes it appear there) — gets
 * a bind of its own, if it is a directory with no symlink on the way
 * (bind_safe refuses those: such a path keeps the plain view rather than
 * fail every run).  Elsewhere, or inside a writable path (in place: the
 * checkout's .git), it is the run's view made read-only.  *ret: an array
 * of one kind per path (free it), NULL when there are none.
 */
static int readonly_kinds(const struct mountplan_in *in,
			  const char *const *writable, size_t nw,
			  unsigned char **ret)
{
	size_t n = 0;

	*ret = NULL;
	while (in->readonly && in->readonly[n])
		n++;
	if (!n)
		return 0;
	if (!(*ret = calloc(n, 1)))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const char *path = in->readonly[i];
		char real[PATH_MAX];
		struct stat st;

		if (listed_writable(in, path))
			(*ret)[i] = RO_SKIP;
		else if ((in->idmap_userns_fd >= 0 || is_private_area(path)) &&
			 !under_any(path, writable, nw) &&
			 stat(path, &st) == 0 && S_ISDIR(st.st_mode) &&
			 realpath(path, real) && strcmp(real, path) == 0)
			(*ret)[i] = RO_OWN;
		else
			(*ret)[i] = RO_REBIND;
	}
	return 0;
}

/* add_idmapped_ancestors for the writable paths and the read-only ones
 * bound on their own, in one list: an ancestor bound after a writable
 * path's bind would hide it. */
static int add_reach(struct mountplan *p, const struct mountplan_in *in,
		     const unsigned char *ro, const char *const *writable,
		     size_t nw, const char *const *veils, size_t nveils)
{
	size_t nro = 0, n = nw;
	const char **all;
	int r;

	while (in->readonly && in->readonly[nro])
		nro++;
	all = calloc(nw + nro + 1, sizeof(*all));
	if (!all)
		return -ENOMEM;
	for (size_t i = 0; i < nw; i++)
		all[i] = writable[i];
	for (size_t i = 0; i < nro; i++)
		if (ro[i] == RO_OWN && !is_private_area(in->readonly[i]))
			all[n++] = in->readonly[i];
	r = add_idmapped_ancestors(p, all, n, veils, nveils,
				   in->idmap_userns_fd);
	free(all);
	return r;
}

static bool has_dot_component(const char *path)
{
	for (const char *c = path; (c = strchr(c, '/')); c++)
		if ((c[1] == '.' && (c[2] == '/' || !c[2])) ||
		    (c[1] == '.' && c[2] == '.' && (c[3] == '/' || !c[3])) ||
		    c[1] == '/')
			return true;
	return false;
}

static int add_safe_bind(struct mountplan *p, const char *src, const char *dst,
			 bool readonly, bool dir, int userns_fd)
{
	struct mountplan_op op = {.kind = MP_BIND_SAFE,
				  .readonly = readonly,
				  .mkdir_target = dir,
				  .touch_target = !dir,
				  .userns_fd = userns_fd};

	op.src = mp_join(p, MP_OLDROOT, src);
	op.dst = mp_join(p, MP_NEWROOT, dst);
	if (!op.src || !op.dst)
		return -ENOMEM;
	return mp_add(p, op);
}

/* The read-only paths, as readonly_kinds classified them. */
static int add_readonly(struct mountplan *p, const struct mountplan_in *in,
			const unsigned char *ro)
{
	int r;

	for (size_t i = 0; in->readonly && in->readonly[i]; i++) {
		if (ro[i] == RO_SKIP)
			continue;
		r = ro[i] == RO_OWN
			? add_safe_bind(p, in->readonly[i], in->readonly[i],
					true, true, in->idmap_userns_fd)
			: mp_add_path(p, MP_REBIND_RO, in->readonly[i], false,
				      -1);
		if (r < 0)
			return r;
		/* RO_OWN is a view for git, not a protection: a run goes on
		 * without it (gone since, say). */
		p->ops[p->n - 1].optional = true;
	}
	return 0;
}

/*
 * The view of workspace directory d, rebuilt in a tmpfs: a mount point
 * for each entry, bound back from the host (writable, like the rest of
 * the workspace), symlinks copied.  Makes room for a mount point the
 * host's directory does not have, without writing to it.
 */
static int add_rebuilt_dir(struct mountplan *p, const char *d, int userns_fd)
{
	DIR *dh;
	struct dirent *e;
	struct stat st;
	size_t n = 0;
	int r = 0;

	if (lstat(d, &st) < 0)
		return -errno;
	dh = opendir(d);
	if (!dh)
		return -errno;
	if ((r = mp_add_path(p, MP_TMPFS, d, false, -1)) < 0)
		goto out;
	p->ops[p->n - 1].data = "mode=0755,size=64k";
	p->ops[p->n - 1].flags = MS_NOSUID | MS_NODEV;
	while ((e = readdir(dh))) {
		char *path;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (++n > MOUNTPLAN_REBIND_MAX) {
			r = -SPD_ETOOBIG;
			goto out;
		}
		path = mp_join3(p, d, "/", e->d_name);
		if (!path) {
			r = -ENOMEM;
			goto out;
		}
		if (lstat(path, &st) < 0) {
			if (errno == ENOENT)
				continue;
			r = -errno;
			goto out;
		}
		if (S_ISLNK(st.st_mode)) {
			char target[PATH_MAX];
			ssize_t k = readlink(path, target, sizeof(target) - 1);
			char *t, *dst;

			if (k < 0) {
				r = -errno;
				goto out;
			}
			target[k] = '\0';
			t = mp_own(p, strdup(target));
			dst = mp_join(p, MP_NEWROOT, path);
			if (!t || !dst) {
				r = -ENOMEM;
				goto out;
			}
			r = mp_add(p, (struct mountplan_op){.kind = MP_SYMLINK,
							    .src = t,
							    .dst = dst});
		} else {
			r = add_safe_bind(p, path, path, false,
					  S_ISDIR(st.st_mode), userns_fd);
		}
		if (r < 0)
			goto out;
	}
out:
	closedir(dh);
	return r;
}

/* The read-only binds into the workspace (mountplan_in.ro_binds). */
static int add_ro_binds(struct mountplan *p, const struct mountplan_in *in,
			int userns_fd)
{
	const char *ws = in->workspace;
	const char *rebuilt[SBXP_RO_BINDS_MAX] = {0};
	size_t nrebuilt = 0;
	int r;

	for (size_t i = 0; in->ro_binds && in->ro_binds[i]; i += 2) {
		const char *src = in->ro_binds[i], *dst = in->ro_binds[i + 1];
		char buf[PATH_MAX], *d = NULL;
		size_t wl = strlen(ws), n;
		struct stat st;

		if (!dst || src[0] != '/' || !path_is_under(dst, ws) ||
		    strlen(dst) <= wl + (wl > 1) || has_dot_component(dst) ||
		    (n = strlen(dst)) >= sizeof(buf) ||
		    nrebuilt >= SBXP_RO_BINDS_MAX)
			return -EINVAL;
		if (stat(src, &st) < 0 || !S_ISDIR(st.st_mode))
			return -EINVAL;
		/* Below the workspace, every component that exists must be a
		 * real directory: the run's own code could have planted a
		 * symlink to send the bind elsewhere. */
		memcpy(buf, dst, n + 1);
		for (size_t k = wl + (wl > 1); k <= n; k++) {
			if (buf[k] != '/' && buf[k] != '\0')
				continue;
			buf[k] = '\0';
			if (lstat(buf, &st) < 0) {
				if (errno != ENOENT)
					return -errno;
				buf[k] = '/';
				/* The parent of this component exists. */
				while (k > 0 && buf[--k] != '/')
					;
				buf[k ? k : 1] = '\0';
				d = mp_own(p, strdup(buf));
				if (!d)
					return -ENOMEM;
				break;
			}
			if (!S_ISDIR(st.st_mode))
				return -EINVAL;
			buf[k] = dst[k];
		}
		if (d) {
			for (size_t k = 0; k < nrebuilt; k++)
				if (!strcmp(rebuilt[k], d))
					return -EINVAL;
			rebuilt[nrebuilt++] = d;
			if ((r = add_rebuilt_dir(p, d, userns_fd)) < 0)
				return r;
		}
		if ((r = add_safe_bind(p, src, dst, true, true, userns_fd)) < 0)
			return r;
		p->ops[p->n - 1].mkdir_target = d != NULL;
		if ((r = add_read_path(p, p->ops[p->n - 1].dst +
					      strlen(MP_NEWROOT))) < 0)
			return r;
		if (d) {
			char *seal = mp_join(p, MP_NEWROOT, d);

			if (!seal)
				return -ENOMEM;
			if ((r = mp_add(
				 p, (struct mountplan_op){.kind = MP_SEAL_RO,
							  .dst = seal})) < 0)
				return r;
		}
	}
	return 0;
}

/*
 * The writable set into writable (room for the workspace, every cache and
 * every listed path): the workspace, the home's package caches that
 * exist, listed paths that exist.  Shorter first, so that a parent is
 * bound before a path inside it.
 */
static int writable_set(struct mountplan *p, const struct mountplan_in *in,
			const struct dir_names *home_names,
			const char **writable, size_t *ret_n)
{
	struct stat st;
	size_t nw = 0;

	writable[nw++] = in->workspace;
	for (size_t i = 0; in->home && in->home[0] && mp_caches[i]; i++) {
		char *c;

		if (!dir_names_may_have(home_names, mp_caches[i]))
			continue;
		c = mp_join3(p, in->home, "/", mp_caches[i]);
		if (!c)
			return -ENOMEM;
		if (stat(c, &st) == 0 && S_ISDIR(st.st_mode))
			writable[nw++] = c;
	}
	for (size_t i = 0; in->writable && in->writable[i]; i++)
		if (stat(in->writable[i], &st) == 0)
			writable[nw++] = in->writable[i];
	qsort(writable, nw, sizeof(*writable), cmp_len);
	*ret_n = nw;
	return 0;
}

/*
 * /var/run is normally a symlink to /run; a real directory holds the same
 * kind of sockets and is hidden (*ret_run_hidden).  /var/tmp is
 * world-writable like /tmp and as full of sockets and other users' files:
 * the run gets its own, writable and thrown away (*ret_tmp).
 */
static int add_var(struct mountplan *p, bool *ret_run_hidden, bool *ret_tmp)
{
	struct stat st;
	int r;

	if (lstat("/var/run", &st) == 0 && S_ISDIR(st.st_mode)) {
		*ret_run_hidden = true;
		if ((r = mp_add_path(p, MP_HIDE_DIR, "/var/run", false, -1)) <
		    0)
			return r;
	}
	if (stat("/var/tmp", &st) == 0 && S_ISDIR(st.st_mode)) {
		if ((r = mp_add(
			 p, (struct mountplan_op){
				.kind = MP_TMPFS,
				.dst = MP_NEWROOT "/var/tmp",
				.data = "mode=1777,size=" MOUNTPLAN_TMP_SIZE,
				.flags = MS_NOSUID | MS_NODEV})) < 0)
			return r;
		*ret_tmp = true;
	}
	return 0;
}

/*
 * What the run must not see below the binds: the home's credentials, the
 * request's hidden paths (but those a veil already covers), the socket
 * directories (system and home) and every other pathname socket.
 */
static int add_covers(struct mountplan *p, const struct mountplan_in *in,
		      const struct dir_names *home_names,
		      const char *const *writable, size_t nw,
		      const char *const *veils, size_t nveils,
		      bool var_run_hidden)
{
	bool home = in->home && in->home[0];
	int r;

	if (home &&
	    (r = add_credentials(p, in->home, home_names, writable, nw)) < 0)
		return r;
	for (size_t i = 0; in->hidden && in->hidden[i]; i++) {
		/* A veil and what lies under it (outside the writable
		 * paths) are already out of sight. */
		if (under_any(in->hidden[i], veils, nveils) &&
		    !under_any(in->hidden[i], writable, nw))
			continue;
		if ((r = add_hidden(p, in->hidden[i], writable, nw)) < 0)
			return r;
	}
	for (size_t i = 0; mp_socket_dirs[i]; i++)
		if ((r = add_socket_dir(p, mp_socket_dirs[i], writable, nw)) <
		    0)
			return r;
	for (size_t i = 0; home && mp_home_socket_dirs[i]; i++) {
		char *c;

		if (!dir_names_may_have(home_names, mp_home_socket_dirs[i]))
			continue;
		c = mp_join3(p, in->home, "/", mp_home_socket_dirs[i]);
		if (!c)
			return -ENOMEM;
		if ((r = add_socket_dir(p, c, writable, nw)) < 0)
			return r;
	}
	return add_sockets(p, in->sockets, writable, nw, var_run_hidden);
}

/* The fixed part of every plan: a private /tmp, a minimal /dev (the
 * harmless devices, its links, a private /dev/shm, sealed), /proc. */
static int add_fixed(struct mountplan *p)
{
	int r;

	struct mountplan_op tmp = {.kind = MP_TMPFS,
				   .dst = MP_NEWROOT "/tmp",
				   .data = "mode=1777,size=" MOUNTPLAN_TMP_SIZE,
				   .flags = MS_NOSUID | MS_NODEV,
				   .mkdir_target = false};
	struct mountplan_op dev = {.kind = MP_TMPFS,
				   .dst = MP_NEWROOT "/dev",
				   .data = "mode=0755,size=64k",
				   .flags = MS_NOSUID | MS_NOEXEC};
	if ((r = mp_add(p, tmp)) < 0 || (r = mp_add(p, dev)) < 0)
		return r;
	for (size_t i = 0; mp_devices[i]; i++) {
		char *d = mp_join(p, "/dev/", mp_devices[i]);

		if (!d)
			return -ENOMEM;
		if ((r = mp_add_path(p, MP_DEVICE, d, false, -1)) < 0)
			return r;
	}
	static const char *const links[][2] = {
	    {"/proc/self/fd", MP_NEWROOT "/dev/fd"},
	    {"/proc/self/fd/0", MP_NEWROOT "/dev/stdin"},
	    {"/proc/self/fd/1", MP_NEWROOT "/dev/stdout"},
	    {"/proc/self/fd/2", MP_NEWROOT "/dev/stderr"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(links); i++)
		if ((r = mp_add(p, (struct mountplan_op){.kind = MP_SYMLINK,
							 .src = links[i][0],
							 .dst = links[i][1]})) <
		    0)
			return r;
	if ((r = mp_add(
		 p, (struct mountplan_op){.kind = MP_MKDIR,
					  .dst = MP_NEWROOT "/dev/shm"})) < 0 ||
	    (r = mp_add(p,
			(struct mountplan_op){
			    .kind = MP_TMPFS,
			    .dst = MP_NEWROOT "/dev/shm",
			    .data = "mode=1777,size=" MOUNTPLAN_SHM_SIZE,
			    .flags = MS_NOSUID | MS_NODEV})) < 0 ||
	    (r = mp_add(p, (struct mountplan_op){.kind = MP_SEAL_RO,
						 .dst = MP_NEWROOT "/dev"})) <
		0 ||
	    (r = mp_add(p, (struct mountplan_op){.kind = MP_PROC,
						 .dst = MP_NEWROOT "/proc"})) <
		0)
		return r;
	/* The run's pid 1 starts the command before it executes
	 * sandboxd-init and makes itself undumpable: for that moment its
	 * /proc entry (its descriptors among them) is the command's to
	 * read.  Covered, the command never sees it. */
	if ((r = mp_add_path(p, MP_HIDE_DIR, "/proc/1", false, -1)) < 0)
		return r;
	p->nfixed = p->n; /* what mountplan_apply_head applies */
	return 0;
}

int mountplan_build(const struct mountplan_in *in, struct mountplan *ret)
{
	struct mountplan p = {0};
	const char **writable = NULL;
	unsigned char *ro = NULL;
	size_t nw = 0, cap;
	bool var_run_hidden = false, var_tmp = false;
	const char *veils[MOUNTPLAN_VEILS_MAX] = {0};
	/* The home's names: most credential locations cost no lookup. */
	struct dir_names home_names = {0};
	size_t nveils, veil_op0;
	struct stat st;
	int r;

	if (stat(in->workspace, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	p.ops = calloc(MOUNTPLAN_OPS_MAX, sizeof(*p.ops));
	cap = 8 + ARRAY_SIZE(mp_caches);
	for (size_t i = 0; in->writable && in->writable[i]; i++)
		cap++;
	writable = calloc(cap, sizeof(*writable));
	if (!p.ops || !writable) {
		r = -ENOMEM;
		goto out;
	}

	/* A home in the run's own /tmp (a test's, a service's) has nothing
	 * to look up outside the writable paths: no listing. */
	if (in->home && in->home[0] && !in_run_own_area(in->home))
		dir_names_read(in->home, &home_names);
	if ((r = writable_set(&p, in, &home_names, writable, &nw)) < 0 ||
	    (r = readonly_kinds(in, writable, nw, &ro)) < 0)
		goto out;

	if ((r = add_fixed(&p)) < 0)
		goto out;
	/* /run holds the host's service sockets (the Docker daemon's, the
	 * system bus, /run/user/<uid> with spd's own socket and the
	 * ssh-agent): always an empty read-only tmpfs, in host mode with
	 * the resolver's configuration bound back. */
	if ((r = add_run(&p, in->net_host)) < 0)
		goto out;
	if ((r = add_var(&p, &var_run_hidden, &var_tmp)) < 0)
		goto out;

	nveils = find_veils(in, writable, nw, veils);
	if (in->idmap_userns_fd >= 0 &&
	    (r = add_reach(&p, in, ro, writable, nw, veils, nveils)) < 0)
		goto out;
	veil_op0 = p.n;
	for (size_t i = 0; i < nveils; i++) {
		if ((r = mp_add_path(&p, MP_TMPFS, veils[i], false, -1)) < 0)
			goto out;
		p.ops[p.n - 1].data = "mode=0755,size=64k";
		p.ops[p.n - 1].flags = MS_NOSUID | MS_NODEV | MS_NOEXEC;
	}
	for (size_t i = 0; i < nw; i++) {
		bool idmap = in->idmap_userns_fd >= 0;

		bool listed = writable[i] == in->workspace;

		if ((r = mp_add_path(&p, idmap ? MP_BIND_IDMAP : MP_BIND,
				     writable[i], true, in->idmap_userns_fd)) <
			0 ||
		    (r = add_write_path(&p, writable[i])) < 0)
			goto out;
		/* The package caches are not walked: they are writable by
		 * design (a run can poison them anyway) and can be far
		 * larger than any workspace (docs/sandbox.md). */
		for (size_t k = 0; in->writable && in->writable[k]; k++)
			listed |= writable[i] == in->writable[k];
		p.ops[p.n - 1].link_walk = listed;
	}
	if ((r = add_ro_binds(&p, in, in->idmap_userns_fd)) < 0)
		goto out;
	for (size_t i = 0; i < nveils; i++)
		if ((r = mp_add(&p, (struct mountplan_op){
					.kind = MP_SEAL_RO,
					.dst = p.ops[veil_op0 + i].dst})) < 0)
			goto out;
	if ((r = add_write_path(&p, "/tmp")) < 0 ||
	    (r = add_write_path(&p, "/dev")) < 0 ||
	    (var_tmp && (r = add_write_path(&p, "/var/tmp")) < 0))
		goto out;
	if ((r = add_readonly(&p, in, ro)) < 0)
		goto out;
	if ((r = add_covers(&p, in, &home_names, writable, nw, veils, nveils,
			    var_run_hidden)) < 0)
		goto out;
	for (size_t i = 0; in->empty_files && in->empty_files[i]; i++) {
		if (stat(in->empty_files[i], &st) < 0 || !S_ISREG(st.st_mode))
			continue;
		if ((r = mp_add_path(&p, MP_EMPTY_FILE, in->empty_files[i],
				     false, -1)) < 0)
			goto out;
	}
	if (!p.write_paths && (r = add_write_path(&p, "/tmp")) < 0)
		goto out;
	/* The roots the hard-link check walks, listed here so that the
	 * child only reads them. */
	p.link_roots = calloc(p.n + 1, sizeof(*p.link_roots));
	if (!p.link_roots) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < p.n; i++)
		if (p.ops[i].link_walk)
			p.link_roots[p.nlink_roots++] = p.ops[i].dst;
	/* The list names the workspace's entries only, and a rebuilt
	 * directory shows them through binds of their own. */
	if (p.nlink_roots == 1 && !(in->ro_binds && in->ro_binds[0]))
		p.link_names = in->link_names;
	if (p.link_names) {
		p.link_ro_dirs = in->link_ro_dirs;
	}
	free(writable);
	free(ro);
	*ret = p;
	return 0;
out:
	free(writable);
	free(ro);
	mountplan_free(&p);
	return r;
}

void mountplan_free(struct mountplan *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nowned; i++)
		free(p->owned[i]);
	free(p->owned);
	free(p->ops);
	free(p->write_paths);
	free(p->read_paths);
	free(p->link_roots);
	memset(p, 0, sizeof(*p));
}

const char *mountplan_describe(const struct mountplan *p, int i)
{
	static const char *const names[] = {
	    [MP_TMPFS] = "tmpfs",
	    [MP_BIND] = "bind",
	    [MP_BIND_IDMAP] = "idmapped bind",
	    [MP_REBIND_RO] = "read-only bind",
	    [MP_HIDE_DIR] = "hide dir",
	    [MP_HIDE_FILE] = "hide file",
	    [MP_EMPTY_FILE] = "empty file",
	    [MP_DEVICE] = "device",
	    [MP_SYMLINK] = "symlink",
	    [MP_MKDIR] = "mkdir",
	    [MP_PROC] = "proc",
	    [MP_SEAL_RO] = "seal read-only",
	    [MP_BIND_RO] = "read-only bind",
	    [MP_BIND_SAFE] = "bind",
	};
	static char buf[PATH_MAX + 32];

	if (i == MOUNTPLAN_STEP_LINKS)
		return "hard-link check of the writable paths";
	if (i < 0 || (size_t)i >= p->n)
		return "new root";
	snprintf(buf, sizeof(buf), "%s %s", names[p->ops[i].kind],
		 p->ops[i].dst + strlen(MP_NEWROOT));
	return buf;
}

int mountplan_build_fixed(struct mountplan *ret)
{
	struct mountplan p = {0};
	int r;

	p.ops = calloc(MOUNTPLAN_OPS_MAX, sizeof(*p.ops));
	if (!p.ops)
		return -ENOMEM;
	if ((r = add_fixed(&p)) < 0) {
		mountplan_free(&p);
		return r;
	}
	*ret = p;
	return 0;
}

static bool str_same(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

static bool op_same(const struct mountplan_op *x, const struct mountplan_op *y)
{
	return x->kind == y->kind && str_same(x->src, y->src) &&
	       str_same(x->dst, y->dst) && str_same(x->data, y->data) &&
	       x->flags == y->flags && x->mkdir_target == y->mkdir_target &&
	       x->touch_target == y->touch_target &&
	       x->optional == y->optional && x->readonly == y->readonly &&
	       x->link_walk == y->link_walk && x->userns_fd == y->userns_fd;
}

bool mountplan_same_head(const struct mountplan *a, const struct mountplan *b)
{
	if (a->nfixed != b->nfixed)
		return false;
	for (size_t i = 0; i < a->nfixed; i++)
		if (!op_same(&a->ops[i], &b->ops[i]))
			return false;
	return true;
}

/* Two NULL-terminated lists (either may be NULL) with the same strings. */
static bool list_same(const char *const *a, const char *const *b)
{
	if (!a || !b)
		return a == b;
	for (; *a && *b; a++, b++)
		if (strcmp(*a, *b) != 0)
			return false;
	return !*a && !*b;
}

bool mountplan_same(const struct mountplan *a, const struct mountplan *b)
{
	if (a->n != b->n || a->nfixed != b->nfixed || a->nwrite != b->nwrite ||
	    a->nread != b->nread || a->nlink_roots != b->nlink_roots ||
	    a->links_list_only != b->links_list_only ||
	    !list_same(a->write_paths, b->write_paths) ||
	    !list_same(a->read_paths, b->read_paths) ||
	    !list_same(a->link_names, b->link_names) ||
	    !list_same(a->link_ro_dirs, b->link_ro_dirs))
		return false;
	for (size_t i = 0; i < a->nlink_roots; i++)
		if (strcmp(a->link_roots[i], b->link_roots[i]) != 0)
			return false;
	for (size_t i = 0; i < a->n; i++)
		if (!op_same(&a->ops[i], &b->ops[i]))
			return false;
	return true;
}

/* FNV-1a over n bytes, continuing from h. */
static uint64_t fp_mix(uint64_t h, const void *data, size_t n)
{
	const unsigned char *c = data;

	for (size_t i = 0; i < n; i++)
		h = (h ^ c[i]) * 0x100000001b3ull;
	return h;
}

/* mount.h: what lstat says of path: its file's identity, type and, for
 * a file, its link count (what the hard-link check judges); or the
 * error. */
uint64_t mountplan_fingerprint_add(uint64_t h, const char *path)
{
	struct stat st;
	uint64_t v[4] = {0};

	if (lstat(path, &st) < 0) {
		v[0] = (uint64_t)errno;
	} else {
		v[0] = (uint64_t)st.st_dev;
		v[1] = (uint64_t)st.st_ino;
		v[2] = (uint64_t)(st.st_mode & S_IFMT);
		v[3] = S_ISDIR(st.st_mode) ? 0 : (uint64_t)st.st_nlink;
	}
	return fp_mix(h, v, sizeof(v));
}

/* The host's path behind a plan path under MP_OLDROOT or MP_NEWROOT (the
 * new root is the host's, read-only, below what the plan mounts), or
 * NULL for one of the plan's own (MP_HIDE_SRC, ...). */
static const char *fp_host(const char *path)
{
	static const char *const roots[] = {MP_OLDROOT, MP_NEWROOT};

	for (size_t i = 0; path && i < ARRAY_SIZE(roots); i++) {
		size_t n = strlen(roots[i]);

		if (strncmp(path, roots[i], n) == 0 && path[n] == '/')
			return path + n;
	}
	return NULL;
}

/* One name below the workspace root (a link name or directory). */
static uint64_t fp_below(uint64_t h, const char *root, const char *name)
{
	char buf[PATH_MAX];

	if (!root ||
	    snprintf(buf, sizeof(buf), "%s/%s", root, name) >= (int)sizeof(buf))
		return fp_mix(h, "!", 1);
	return mountplan_fingerprint_add(h, buf);
}

uint64_t mountplan_fingerprint(const struct mountplan *p)
{
	uint64_t h = 0xcbf29ce484222325ull;
	const char *root = p->nlink_roots ? fp_host(p->link_roots[0]) : NULL;

	for (size_t i = p->nfixed; i < p->n; i++) {
		const char *src = fp_host(p->ops[i].src);
		const char *dst = fp_host(p->ops[i].dst);

		if (src)
			h = mountplan_fingerprint_add(h, src);
		if (dst)
			h = mountplan_fingerprint_add(h, dst);
	}
	for (size_t i = 0; p->link_names && p->link_names[i]; i++)
		h = fp_below(h, root, p->link_names[i]);
	for (size_t i = 0; p->link_ro_dirs && p->link_ro_dirs[i]; i++)
		h = fp_below(h, root, p->link_ro_dirs[i]);
	return h;
}

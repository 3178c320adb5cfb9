/*
 * The policy's paths: each path a command or a file tool names is
 * resolved component by component as the kernel would (lstat and
 * readlink, or openat2 from the workspace when it can), then judged
 * against the protected list, the operator's and the project's
 * configured paths, and, for a write that changes a whole tree, what is
 * below it.  Part of the policy engine (policy_priv.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/openat2.h>

#include "common/util.h"
#include "daemon/policy/protected.h"
#include "daemon/policy/policy.h"
#include "daemon/policy/policy_priv.h"

/* ---------------------------------------------------------------- */
/* Paths                                                             */

static void add_path(struct cls *c, char *p)
{
	if (c->n_paths == c->cap_paths) {
		size_t cap = c->cap_paths ? c->cap_paths * 2 : 8;
		char **v = realloc(c->paths, cap * sizeof(*v));

		if (!v) {
			free(p);
			c->err = -ENOMEM;
			return;
		}
		c->paths = v;
		c->cap_paths = cap;
	}
	c->paths[c->n_paths++] = p;
}

/* Append component s[0..n) to the absolute path in buf (len *bl). */
static int push_comp(char *buf, size_t *bl, const char *s, size_t n)
{
	if (*bl + 1 + n >= POLICY_PATH_MAX)
		return -ENAMETOOLONG;
	if (*bl != 1)
		buf[(*bl)++] = '/';
	memcpy(buf + *bl, s, n);
	*bl += n;
	buf[*bl] = '\0';
	return 0;
}

static void pop_comp(char *buf, size_t *bl)
{
	while (*bl > 1 && buf[*bl - 1] != '/')
		(*bl)--;
	if (*bl > 1)
		(*bl)--;
	buf[*bl] = '\0';
}

/*
 * Lexical normalisation of an absolute path: "." dropped, ".." pops.
 * Returns a new string or NULL.
 */
/* Whether abs is already in normal form: no empty, "." or ".."
 * component and no trailing slash. */
static bool is_normal(const char *abs)
{
	const char *p = abs;

	if (abs[0] != '/')
		return false;
	if (!abs[1])
		return true;
	while (*p == '/') {
		const char *q = ++p;

		while (*p && *p != '/')
			p++;
		if (p == q || (p - q == 1 && q[0] == '.') ||
		    (p - q == 2 && q[0] == '.' && q[1] == '.'))
			return false;
	}
	return true;
}

char *pol_normalize(const char *abs)
{
	char buf[POLICY_PATH_MAX];
	size_t bl = 1;
	const char *p = abs;

	/* Most paths are: a copy is a tenth of the component walk. */
	if (is_normal(abs))
		return strlen(abs) < POLICY_PATH_MAX ? strdup(abs) : NULL;

	buf[0] = '/';
	buf[1] = '\0';
	while (*p) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		const char *e = strchrnul(p, '/');
		size_t n = (size_t)(e - p);

		if (n == 1 && p[0] == '.')
			;
		else if (n == 2 && p[0] == '.' && p[1] == '.')
			pop_comp(buf, &bl);
		else if (push_comp(buf, &bl, p, n) < 0)
			return NULL;
		p = e;
	}
	return strdup(buf);
}

/*
 * A descriptor of the workspace, kept per thread for the last workspace
 * seen: lstat and readlink relative to it make the kernel walk only the
 * part inside the workspace (a worktree under ~/.local/state/spd/... is a
 * dozen components deep).  The workspace directory itself is spd's
 * (a worktree it made, or the operator's checkout) and is not renamed
 * under a running session, so the descriptor stays what the path names.
 */
static __thread int ws_fd = -1;
static __thread char *ws_fd_path;

static int ws_dirfd(const struct cls *c)
{
	if (ws_fd >= 0 && ws_fd_path && strlen(ws_fd_path) == c->wslen &&
	    memcmp(ws_fd_path, c->ws, c->wslen) == 0)
		return ws_fd;
	if (ws_fd >= 0)
		close(ws_fd);
	free(ws_fd_path);
	ws_fd_path = strndup(c->ws, c->wslen);
	ws_fd = ws_fd_path ? open(ws_fd_path, O_PATH | O_DIRECTORY | O_CLOEXEC)
			   : -1;
	return ws_fd;
}

/* The path of abs relative to the workspace descriptor, or NULL when abs
 * is not strictly inside the workspace. */
static const char *ws_relative(const struct cls *c, const char *abs, int *fd)
{
	if (c->wslen <= 1 || strncmp(abs, c->ws, c->wslen) != 0 ||
	    abs[c->wslen] != '/' || !abs[c->wslen + 1])
		return NULL;
	*fd = ws_dirfd(c);
	return *fd >= 0 ? abs + c->wslen + 1 : NULL;
}

static int walk_lstat(const struct cls *c, const char *abs, struct stat *st)
{
	int fd;
	const char *rel = ws_relative(c, abs, &fd);

	return rel ? fstatat(fd, rel, st, AT_SYMLINK_NOFOLLOW) : lstat(abs, st);
}

static ssize_t walk_readlink(const struct cls *c, const char *abs, char *buf,
			     size_t n)
{
	int fd;
	const char *rel = ws_relative(c, abs, &fd);

	return rel ? readlinkat(fd, rel, buf, n) : readlink(abs, buf, n);
}

/*
 * The fast path of resolve_abs for a path inside the workspace: one
 * openat2 probe with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS.  The kernel
 * walks the components in order, as the component walk below does, and
 * stops at the first symlink with ELOOP (the last component included: no
 * O_NOFOLLOW).  Any other way the probe ends means no symlink lies before
 * the point where the walk would stop too, so the resolved path is the
 * lexical one:
 *   EISDIR   all components exist, the last is a directory;
 *   ENOTDIR  the last is not a directory, or a middle one is a file (the
 *            walk finds it missing from there on and goes lexically);
 *   ENOENT   a component is missing (likewise).
 * The probe never opens anything: O_DIRECTORY makes a non-directory fail
 * before it is opened, and a directory cannot be opened for writing, so
 * no descriptor is made and none closed -- one system call however deep
 * the path, where the walk makes one per component.  So it is tried from
 * POLICY_FAST_COMPS_MIN components on (for one they cost the same and a
 * symlink would cost an extra call).  ELOOP, or anything else: the
 * caller walks.  Paths with "." or ".." components always walk.
 */
#define POLICY_FAST_COMPS_MIN 2

/* openat2 is missing (before Linux 5.6) or filtered: stop trying. */
static __thread bool openat2_missing;

/* rel: the path below the workspace (leading slashes allowed).  On
 * success appends its components to buf (the workspace, length *bl) and
 * returns true. */
static bool resolve_fast(struct cls *c, const char *rel, char *buf, size_t *bl)
{
	struct open_how how = {
	    .flags = O_WRONLY | O_DIRECTORY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
	    .resolve =
		RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	size_t comps = 0, l = *bl;
	const char *q = rel;
	int dfd, fd;

	if (openat2_missing)
		return false;
	/* Lexically: no "." or ".." (the walk gives those its meaning),
	 * and the components, joined by one slash, appended to buf. */
	while (*q) {
		while (*q == '/')
			q++;
		if (!*q)
			break;
		const char *e = strchrnul(q, '/');
		size_t n = (size_t)(e - q);

		if ((n == 1 && q[0] == '.') ||
		    (n == 2 && q[0] == '.' && q[1] == '.'))
			goto fail;
		if (push_comp(buf, &l, q, n) < 0)
			goto fail;
		comps++;
		q = e;
	}
	if (comps < POLICY_FAST_COMPS_MIN)
		goto fail;
	dfd = ws_dirfd(c);
	if (dfd < 0)
		goto fail;
	fd = (int)syscall(SYS_openat2, dfd, buf + *bl + 1, &how, sizeof(how));
	if (fd >= 0) {
		/* Cannot happen (see above); if it does, walk. */
		close(fd);
		goto fail;
	}
	if (errno == ENOSYS || errno == EPERM)
		openat2_missing = true;
	if (errno != EISDIR && errno != ENOTDIR && errno != ENOENT)
		goto fail;
	*bl = l;
	return true;
fail:
	buf[*bl] = '\0';
	return false;
}

/*
 * Resolve abs (an absolute path) as the kernel would, following symlinks
 * while the components exist; the part from the first missing component
 * on is added lexically.  When abs starts with the workspace (already a
 * real path), the walk starts there.  Returns 0 and a new string in
 * *ret, -ELOOP, -ENAMETOOLONG or -ENOMEM.
 */
int pol_resolve_abs(struct cls *c, const char *abs, char **ret)
{
	char buf[POLICY_PATH_MAX], rem[POLICY_PATH_MAX], link[POLICY_PATH_MAX];
	size_t bl = 1;
	int links = 0;
	bool missing = false;
	const char *p;

	if (strlen(abs) >= sizeof(rem))
		return -ENAMETOOLONG;
	buf[0] = '/';
	buf[1] = '\0';
	p = abs;
	if (c->wslen > 1 && strncmp(abs, c->ws, c->wslen) == 0 &&
	    (abs[c->wslen] == '/' || abs[c->wslen] == '\0')) {
		memcpy(buf, c->ws, c->wslen + 1);
		bl = c->wslen;
		p = abs + c->wslen;
		if (resolve_fast(c, p, buf, &bl)) {
			*ret = strdup(buf);
			return *ret ? 0 : -ENOMEM;
		}
	}
	strcpy(rem, p);
	p = rem;
	while (*p) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		const char *e = strchrnul(p, '/');
		size_t n = (size_t)(e - p);
		struct stat st;

		if (n == 1 && p[0] == '.') {
			p = e;
			continue;
		}
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			pop_comp(buf, &bl);
			p = e;
			continue;
		}
		size_t before = bl;

		if (push_comp(buf, &bl, p, n) < 0)
			return -ENAMETOOLONG;
		p = e;
		if (missing)
			continue;
		if (walk_lstat(c, buf, &st) < 0) {
			missing = true;
			continue;
		}
		if (!S_ISLNK(st.st_mode))
			continue;
		if (++links > POLICY_SYMLINK_MAX)
			return -ELOOP;
		ssize_t ll = walk_readlink(c, buf, link, sizeof(link) - 1);

		if (ll < 0) {
			missing = true;
			continue;
		}
		link[ll] = '\0';
		if ((size_t)ll + strlen(p) + 2 >= sizeof(rem))
			return -ENAMETOOLONG;
		/* The rest becomes target + rest; p points into rem, so
		 * build it in place with memmove. */
		size_t rl = strlen(p);

		memmove(rem + ll + 1, p, rl + 1);
		memcpy(rem, link, (size_t)ll);
		rem[ll] = '/';
		p = rem;
		if (link[0] == '/') {
			bl = 1;
			buf[1] = '\0';
		} else {
			bl = before;
			buf[bl] = '\0';
		}
	}
	*ret = strdup(buf);
	return *ret ? 0 : -ENOMEM;
}

/* Make arg absolute against base (an absolute directory). */
char *pol_absolutize(const char *base, const char *arg)
{
	size_t bn, an;
	char *s;

	if (arg[0] == '/')
		return strdup(arg);
	/* Not asprintf: this runs for every path argument. */
	bn = strlen(base);
	an = strlen(arg);
	s = malloc(bn + an + 2);
	if (!s)
		return NULL;
	memcpy(s, base, bn);
	s[bn] = '/';
	memcpy(s + bn + 1, arg, an + 1);
	return s;
}

bool pol_inside_ws(const struct cls *c, const char *abs)
{
	if (c->wslen == 1)
		return abs[0] == '/';
	return strncmp(abs, c->ws, c->wslen) == 0 &&
	       (abs[c->wslen] == '/' || abs[c->wslen] == '\0');
}

/* The path relative to the workspace ("" for the workspace itself). */
static const char *rel_ws(const struct cls *c, const char *abs)
{
	const char *r = abs + (c->wslen == 1 ? 1 : c->wslen);

	while (*r == '/')
		r++;
	return r;
}

static enum protected_class configured_match(const struct cls *c,
					     const char *rel)
{
	if (!c->conf)
		return PROTECTED_NONE;
	for (int l = 0; l < 2; l++) {
		const struct elist *e =
		    &c->conf->lists[l][POLICY_LIST_PROTECTED];

		for (size_t i = 0; i < e->n; i++)
			if (protected_pattern_match(e->v[i].words[0], rel))
				return PROTECTED_CONFIGURED;
	}
	return PROTECTED_NONE;
}

static enum protected_class merge_class(enum protected_class a,
					enum protected_class b)
{
	if (a == PROTECTED_NONE)
		return b;
	if (b == PROTECTED_NONE)
		return a;
	return a < b ? a : b;
}

static const char *const write_deny_rule[PROTECTED__COUNT] = {
    [PROTECTED_GIT] = "deny.write.git",
    [PROTECTED_PROJECT_CONF] = "deny.write.project-conf",
    [PROTECTED_CI] = "deny.write.ci",
    [PROTECTED_AGENT_CONF] = "deny.write.agent-conf",
    [PROTECTED_BUILD_CONF] = "deny.write.build-conf",
    [PROTECTED_CONFIGURED] = "deny.write.protected",
    [PROTECTED_HOST_EXEC] = "deny.write.host-exec",
};

bool pol_in_list(const char *const *list, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(list[i], s) == 0)
			return true;
	return false;
}

/* Device files every program may name: they hold no data of anyone's. */
static bool harmless_device(const char *lex)
{
	static const char *const devs[] = {
	    "/dev/null",  "/dev/zero",	 "/dev/urandom", "/dev/random",
	    "/dev/stdin", "/dev/stdout", "/dev/stderr",	 "/dev/tty"};

	return IN(devs, lex);
}

static bool preexisting(const struct cls *c, const char *rel, const char *real)
{
	struct stat st;

	if (c->ctx->preexisting)
		return c->ctx->preexisting(c->ctx->preexisting_data, rel);
	return lstat(real, &st) == 0;
}

/* A directory tree is looked at up to this many entries; a bigger one is
 * asked about rather than walked (the policy must stay fast). */
#define POLICY_TREE_MAX 4096
/* ... and this deep. */
#define POLICY_TREE_DEPTH 32

struct tree_walk {
	size_t seen;
	bool over;
};

static void note_tree_entry(struct cls *c, const char *rel, const char *arg,
			    const char *what)
{
	enum protected_class pc =
	    merge_class(protected_match(rel), configured_match(c, rel));

	if (pc == PROTECTED_SECRET_FILE)
		pol_deny(
		    c, "deny.secret.write",
		    "%s %s would change %s, which looks like a secret file",
		    what, arg, rel);
	else if (pc != PROTECTED_NONE && write_deny_rule[pc])
		pol_deny(c, write_deny_rule[pc],
			 "%s %s would change %s, a protected path (%s)", what,
			 arg, rel, protected_class_name(pc));
	else if (pc == PROTECTED_AGENT_CONTEXT)
		pol_hard_ask(c, "ask.write.context",
			     "%s %s would change %s, an agent context file",
			     what, arg, rel);
	else if (pc == PROTECTED_MANIFEST)
		pol_hard_ask(c, "ask.write.manifest",
			     "%s %s would change %s, a dependency manifest",
			     what, arg, rel);
	/* Below a directory, tests count only when the session says which
	 * existed: build output is full of "tests" directories. */
	else if (c->ctx->preexisting && protected_is_test(rel) &&
		 c->ctx->preexisting(c->ctx->preexisting_data, rel))
		pol_hard_ask(
		    c, "ask.write.test",
		    "%s %s would change %s, a test that existed before "
		    "the session",
		    what, arg, rel);
}

/* Walk the directory rel (relative to the workspace descriptor dfd),
 * without following symlinks. */
static void walk_tree(struct cls *c, int dfd, char *rel, size_t rl, int depth,
		      struct tree_walk *tw, const char *arg, const char *what)
{
	int fd;
	DIR *d;
	struct dirent *e;

	if (depth > POLICY_TREE_DEPTH) {
		tw->over = true;
		return;
	}
	fd = openat(dfd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	while (!tw->over && !c->deny.rule && (e = readdir(d))) {
		size_t nl = strlen(e->d_name);

		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (++tw->seen > POLICY_TREE_MAX ||
		    rl + 1 + nl >= POLICY_PATH_MAX) {
			tw->over = true;
			break;
		}
		rel[rl] = '/';
		memcpy(rel + rl + 1, e->d_name, nl + 1);
		note_tree_entry(c, rel, arg, what);
		if (e->d_type == DT_DIR)
			walk_tree(c, dfd, rel, rl + 1 + nl, depth + 1, tw, arg,
				  what);
		rel[rl] = '\0';
	}
	closedir(d);
}

/* real is a path inside the workspace; when it is a directory, check
 * what a recursive change would touch below it. */
static void check_tree(struct cls *c, const char *real, const char *arg,
		       const char *what)
{
	char rel[POLICY_PATH_MAX];
	struct tree_walk tw = {0};
	struct stat st;
	int fd;
	const char *r = ws_relative(c, real, &fd);

	if (!r || fstatat(fd, r, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISDIR(st.st_mode) || strlen(r) >= sizeof(rel))
		return;
	strcpy(rel, r);
	walk_tree(c, fd, rel, strlen(rel), 0, &tw, arg, what);
	if (tw.over)
		pol_hard_ask(c, "ask.write.tree",
			     "%s %s changes a directory too large to check",
			     what, arg);
}

/* True when path is dir or lies below it. */
static bool path_under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	return strncmp(path, dir, n) == 0 && (path[n] == '/' || !path[n]);
}

/* True when dir holds path strictly: a hidden directory equal to the
 * workspace covers it in the run (sandboxd), one above it is a veil. */
static bool holds(const char *dir, const char *path)
{
	return path_under(path, dir) && strcmp(path, dir) != 0;
}

/*
 * The [sandbox] hidden entry lex (as spelled, normalized) or real (as
 * resolved) lies under, or NULL.  An entry is compared as configured and
 * as resolved now: the run's cover is its real path (config_run_hidden_push).
 * A path inside the workspace (inside) is not refused for an entry that
 * holds the workspace (strictly): the run sees its workspace there.
 */
static const char *hidden_match(const struct cls *c, const char *lex,
				const char *real, bool inside)
{
	const char *const *h = c->ctx ? c->ctx->hidden : NULL;

	for (size_t i = 0; h && h[i]; i++) {
		char *hr = realpath(h[i], NULL);
		const char *r = hr ? hr : h[i];
		bool hit = path_under(lex, h[i]) || path_under(real, h[i]) ||
			   path_under(lex, r) || path_under(real, r);

		if (hit && inside && c->ws)
			hit = !holds(h[i], c->ws) && !holds(r, c->ws);
		free(hr);
		if (hit)
			return h[i];
	}
	return NULL;
}

bool policy_path_hidden_lex(const char *const *hidden, const char *ws,
			    const char *path)
{
	char *abs = pol_absolutize(ws, path),
	     *lex = abs ? pol_normalize(abs) : NULL;
	bool hit = false;

	/* Out of memory or over-long: taken as hidden, the stricter answer. */
	if (!lex)
		hit = hidden != NULL && hidden[0] != NULL;
	for (size_t i = 0; lex && hidden && hidden[i] && !hit; i++)
		hit = path_under(lex, hidden[i]);
	free(abs);
	free(lex);
	return hit;
}

/*
 * Check one path argument of a command (or a file tool's path) given
 * against cwd (absolute, real).  Records findings and the resolved path.
 * what names the command for the reason.
 */
void pol_check_path(struct cls *c, const char *cwd, const char *arg,
		    enum pmode mode, const char *what)
{
	char *abs = NULL, *lex = NULL, *real = NULL;
	enum protected_class lc = PROTECTED_NONE, rc = PROTECTED_NONE, pc;
	const char *hidden;
	bool lin, rin;
	int r;

	if (c->err)
		return;
	if (!*arg)
		return;
	abs = pol_absolutize(cwd, arg);
	if (!abs || !(lex = pol_normalize(abs))) {
		c->err = -ENOMEM;
		goto out;
	}
	r = pol_resolve_abs(c, abs, &real);
	if (r == -ENOMEM) {
		c->err = r;
		goto out;
	}
	if (r < 0) {
		/* A loop or an over-long target: nowhere the kernel would
		 * open; treat it as outside the workspace. */
		real = strdup("/");
		if (!real) {
			c->err = -ENOMEM;
			goto out;
		}
	}
	lin = pol_inside_ws(c, lex);
	rin = r == 0 && pol_inside_ws(c, real);
	lc = protected_match(lin ? rel_ws(c, lex) : lex);
	/* Without symlinks on the way both spellings are the same. */
	rc = lin == rin && strcmp(lex, real) == 0
		 ? lc
		 : protected_match(rin ? rel_ws(c, real) : real);
	/* Secret-looking files: neither read nor written, inside or out,
	 * whatever the spelling; the operator may list one as readable. */
	if (lc == PROTECTED_SECRET_FILE || rc == PROTECTED_SECRET_FILE) {
		if (mode != PM_READ)
			pol_deny(
			    c, "deny.secret.write",
			    "%s would write %s, which looks like a secret file",
			    what, arg);
		else if (!(rin && policy_conf_operator_readable(
				      c->conf, rel_ws(c, real))))
			pol_deny(
			    c, "deny.secret.read",
			    "%s would read %s, which looks like a secret file",
			    what, arg);
	}
	/* The operator's hidden paths: refused, whoever would approve. */
	hidden = harmless_device(lex) ? NULL
				      : hidden_match(c, lex, real, lin && rin);
	if (hidden) {
		pol_deny(
		    c, "deny.path.hidden",
		    "%s would %s %s, which spd.conf's [sandbox] hidden = %s "
		    "keeps from every run",
		    what, mode != PM_READ ? "write" : "read", arg, hidden);
		goto record;
	}
	if (!lin || !rin) {
		if (harmless_device(lex))
			;
		else if (mode != PM_READ)
			pol_deny(c, "deny.path.outside",
				 "%s would write %s, outside the workspace",
				 what, arg);
		else
			pol_hard_ask(c, "ask.read.outside",
				     "%s would read %s, outside the workspace",
				     what, arg);
		goto record;
	}
	if (mode == PM_READ)
		goto record;
	if (!*rel_ws(c, real) || !*rel_ws(c, lex)) {
		pol_deny(
		    c, "deny.write.workspace",
		    "%s would change the workspace directory itself, which "
		    "holds protected files",
		    what);
		goto record;
	}
	/* lc and rc hold the built-in classes of these same relative
	 * paths (both are inside here); add the configured ones. */
	lc = merge_class(lc, configured_match(c, rel_ws(c, lex)));
	rc = merge_class(rc, configured_match(c, rel_ws(c, real)));
	pc = lc == PROTECTED_NONE   ? rc
	     : rc == PROTECTED_NONE ? lc
	     : lc < rc		    ? lc
				    : rc;
	if (pc != PROTECTED_NONE && write_deny_rule[pc]) {
		pol_deny(c, write_deny_rule[pc],
			 "%s would write %s, a protected path (%s)", what, arg,
			 protected_class_name(pc));
	} else if (pc == PROTECTED_AGENT_CONTEXT) {
		pol_hard_ask(c, "ask.write.context",
			     "%s would change %s, an agent context file", what,
			     arg);
	} else if (pc == PROTECTED_MANIFEST) {
		pol_hard_ask(
		    c, "ask.write.manifest",
		    "%s would change %s, a dependency manifest or lock file",
		    what, arg);
	} else if (protected_is_test(rel_ws(c, real)) &&
		   preexisting(c, rel_ws(c, real), real)) {
		pol_hard_ask(
		    c, "ask.write.test",
		    "%s would change %s, a test that existed before the "
		    "session",
		    what, arg);
	}
	if (mode == PM_TREE && !c->deny.rule)
		check_tree(c, real, arg, what);
record:
	add_path(c, real);
	real = NULL;
out:
	free(abs);
	free(lex);
	free(real);
}

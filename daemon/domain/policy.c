/*
 * The policy engine: see policy.h for the contract and the rule order.
 *
 * A classification collects findings at three levels -- deny, a "hard"
 * ask (paths, environment, configured asks, host network) and a
 * "command" ask (shells, wrappers, unknown programs: the ones the
 * operator's allow lists may lift) -- keeping the first of each, then
 * decides in the fixed order.  Paths are resolved component by component
 * with lstat/readlink, as the kernel would, so "link/.." and symlinked
 * directories land where the kernel would land.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <git2.h>
#include <linux/openat2.h>

#include "common/utf8.h"
#include "common/words.h"
#include "common/util.h"
#include "daemon/domain/policy.h"
#include "daemon/domain/protected.h"

/* Directories whose programs are known by name wherever the session's
 * PATH points: root owns them, so "cat" there is cat. */
static const char *const system_dirs[] = {
    "/usr/local/sbin", "/usr/local/bin", "/usr/sbin",	      "/usr/bin",
    "/sbin",	       "/bin",		 "/opt/homebrew/bin",
};

/* The directory part of PATH may hold at most this many entries; the
 * rest are ignored (a PATH that long is not a real session's). */
#define POLICY_PATH_ENTRIES_MAX 64

/* ---------------------------------------------------------------- */
/* Configuration                                                     */

struct entry {
	char **words;
	size_t n;
};

struct elist {
	struct entry *v;
	size_t n, cap;
};

struct policy_conf {
	struct elist lists[2][POLICY_LIST__COUNT];
};

struct policy_conf *policy_conf_new(void)
{
	return calloc(1, sizeof(struct policy_conf));
}

void policy_conf_free(struct policy_conf *conf)
{
	if (!conf)
		return;
	for (size_t l = 0; l < 2; l++)
		for (size_t k = 0; k < POLICY_LIST__COUNT; k++) {
			struct elist *e = &conf->lists[l][k];

			for (size_t i = 0; i < e->n; i++)
				policy_words_free(e->v[i].words);
			free(e->v);
		}
	free(conf);
}

void policy_words_free(char **words)
{
	words_free(words);
}

int policy_split_words(const char *s, char ***ret_words)
{
	return words_split(s, POLICY_WORDS_MAX, ret_words);
}

int policy_conf_add(struct policy_conf *conf, enum policy_layer layer,
		    enum policy_list list, const char *value)
{
	struct elist *e;
	char **words;
	int n;

	if (!conf || (unsigned)layer > POLICY_LAYER_PROJECT ||
	    (unsigned)list >= POLICY_LIST__COUNT || !value)
		return -EINVAL;
	e = &conf->lists[layer][list];
	if (list == POLICY_LIST_PROTECTED || list == POLICY_LIST_READABLE) {
		words = calloc(2, sizeof(char *));
		if (!words)
			return -ENOMEM;
		words[0] = strdup(value);
		if (!words[0]) {
			free(words);
			return -ENOMEM;
		}
		n = 1;
	} else {
		n = policy_split_words(value, &words);
		if (n < 0)
			return n;
		if (n == 0) {
			policy_words_free(words);
			return -EINVAL;
		}
	}
	if (e->n == e->cap) {
		size_t cap = e->cap ? e->cap * 2 : 8;
		struct entry *v = realloc(e->v, cap * sizeof(*v));

		if (!v) {
			policy_words_free(words);
			return -ENOMEM;
		}
		e->v = v;
		e->cap = cap;
	}
	e->v[e->n].words = words;
	e->v[e->n].n = (size_t)n;
	e->n++;
	return 0;
}

struct load_ctx {
	struct policy_conf *conf;
	enum policy_layer layer;
	enum policy_list list;
	int err;
};

static int load_one(const git_config_entry *ent, void *data)
{
	struct load_ctx *l = data;
	int r = policy_conf_add(l->conf, l->layer, l->list, ent->value);

	if (r < 0 && !l->err)
		l->err = r;
	return 0;
}

/* libgit2 is initialised on the first configuration read (loop thread
 * only: classification of files happens there). */
static bool git_ready;

int policy_conf_load(struct policy_conf *conf, enum policy_layer layer,
		     const char *path)
{
	static const struct {
		const char *key;
		enum policy_list list;
	} keys[] = {
	    {"policy.deny", POLICY_LIST_DENY},
	    {"policy.ask", POLICY_LIST_ASK},
	    {"policy.allow", POLICY_LIST_ALLOW},
	    {"policy.allow-exact", POLICY_LIST_ALLOW_EXACT},
	    {"policy.protected", POLICY_LIST_PROTECTED},
	    {"policy.readable", POLICY_LIST_READABLE},
	    {"network.allow", POLICY_LIST_NETWORK},
	};
	git_config *cfg = NULL;
	git_config_iterator *it = NULL;
	git_config_entry *ent;
	struct load_ctx l = {conf, layer, 0, 0};
	struct stat st;
	int r;

	if (!conf || !path)
		return -EINVAL;
	if (stat(path, &st) < 0)
		return -errno;
	/* Once per process and never shut down: libgit2's start-up
	 * initialises OpenSSL, which costs milliseconds — per call it would
	 * dominate every classification in a project with a .spd.conf. */
	if (!git_ready) {
		if (git_libgit2_init() < 0)
			return -EIO;
		git_ready = true;
	}
	if (git_config_open_ondisk(&cfg, path) < 0) {
		r = -EINVAL;
		goto out;
	}
	/* The project's file may not include others: an included file
	 * elsewhere in the workspace would not be a protected path, and the
	 * agent could edit the project's policy through it. */
	if (layer == POLICY_LAYER_PROJECT) {
		if (git_config_iterator_new(&it, cfg) < 0) {
			r = -EINVAL;
			goto out;
		}
		while (git_config_next(&ent, it) == 0)
			if (strncasecmp(ent->name, "include.", 8) == 0 ||
			    strncasecmp(ent->name, "includeif.", 10) == 0) {
				r = -EINVAL;
				goto out;
			}
		git_config_iterator_free(it);
		it = NULL;
	}
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
		l.list = keys[i].list;
		r = git_config_get_multivar_foreach(cfg, keys[i].key, NULL,
						    load_one, &l);
		if (r < 0 && r != GIT_ENOTFOUND) {
			r = -EINVAL;
			goto out;
		}
	}
	/* [check "NAME"] run: walked by hand, because libgit2's regex
	 * matching (git_config_foreach_match) leaks pcre2 match data. */
	l.list = POLICY_LIST_CHECK;
	r = git_config_iterator_new(&it, cfg);
	if (r < 0) {
		r = -EINVAL;
		goto out;
	}
	while (git_config_next(&ent, it) == 0) {
		size_t n = strlen(ent->name);

		if (strncasecmp(ent->name, "check.", 6) == 0 && n > 10 &&
		    strcasecmp(ent->name + n - 4, ".run") == 0)
			load_one(ent, &l);
	}
	r = l.err;
out:
	git_config_iterator_free(it);
	git_config_free(cfg);
	return r;
}

static bool readable_in(const struct elist *e, const char *relpath)
{
	for (size_t i = 0; i < e->n; i++)
		if (protected_pattern_match(e->v[i].words[0], relpath))
			return true;
	return false;
}

bool policy_conf_operator_readable(const struct policy_conf *conf,
				   const char *relpath)
{
	return conf &&
	       readable_in(
		   &conf->lists[POLICY_LAYER_OPERATOR][POLICY_LIST_READABLE],
		   relpath);
}

bool policy_conf_project_readable(const struct policy_conf *conf,
				  const char *relpath)
{
	return conf &&
	       (policy_conf_operator_readable(conf, relpath) ||
		readable_in(
		    &conf->lists[POLICY_LAYER_PROJECT][POLICY_LIST_READABLE],
		    relpath));
}

/* ---------------------------------------------------------------- */
/* Classification state                                              */

struct finding {
	const char *rule;
	char reason[POLICY_REASON_MAX];
};

struct cls {
	const struct policy_conf *conf;
	const struct policy_context *ctx;
	const struct policy_call *call;
	const char *ws;
	size_t wslen;
	/* Trusted directories: system_dirs plus ctx PATH entries outside
	 * the workspace (pointers into path_copy). */
	char *path_copy;
	const char *trusted[ARRAY_SIZE(system_dirs) + POLICY_PATH_ENTRIES_MAX];
	size_t n_trusted;
	struct finding deny, hard_ask, cmd_ask;
	const char *allow_rule; /* the outer command is a known allowed one */
	char allow_reason[POLICY_REASON_MAX];
	char *exe;
	char **paths;
	size_t n_paths, cap_paths;
	int err;
};

/*
 * vsnprintf into a reason buffer (n > 0), with the same result.  Nearly
 * every call ends with one reason, and most formats hold only "%s":
 * those are copied here, for a fifth of what printf's machinery costs;
 * any other conversion goes to vsnprintf.
 */
/* Append s[0..len) to dst (room bytes, room > 0), leaving room for the
 * NUL; returns the bytes written. */
static size_t reason_put(char *dst, size_t room, const char *s, size_t len)
{
	if (len > room - 1)
		len = room - 1;
	memcpy(dst, s, len);
	return len;
}

__attribute__((format(printf, 3, 0))) static void
format_reason(char *dst, size_t n, const char *fmt, va_list ap)
{
	size_t o = 0;

	for (const char *q = fmt; (q = strchr(q, '%')); q += 2)
		if (q[1] != 's') {
			vsnprintf(dst, n, fmt, ap);
			return;
		}
	for (const char *q = fmt; *q;) {
		const char *e = strchrnul(q, '%');
		const char *a = *e ? va_arg(ap, const char *) : NULL;

		o += reason_put(dst + o, n - o, q, (size_t)(e - q));
		if (!*e)
			break;
		if (!a)
			a = "(null)";
		o += reason_put(dst + o, n - o, a, strlen(a));
		q = e + 2;
	}
	dst[o] = '\0';
}

static void vnote(struct finding *f, const char *rule, const char *fmt,
		  va_list ap)
{
	if (f->rule)
		return;
	f->rule = rule;
	format_reason(f->reason, sizeof(f->reason), fmt, ap);
}

#define NOTE_FN(fn, field)                                                     \
	__attribute__((format(printf, 3, 4))) static void fn(                  \
	    struct cls *c, const char *rule, const char *fmt, ...)             \
	{                                                                      \
		va_list ap;                                                    \
		va_start(ap, fmt);                                             \
		vnote(&c->field, rule, fmt, ap);                               \
		va_end(ap);                                                    \
	}
NOTE_FN(deny, deny)
NOTE_FN(hard_ask, hard_ask)
NOTE_FN(cmd_ask, cmd_ask)

__attribute__((format(printf, 3, 4))) static void
allow(struct cls *c, const char *rule, const char *fmt, ...)
{
	va_list ap;

	if (c->allow_rule)
		return;
	c->allow_rule = rule;
	va_start(ap, fmt);
	format_reason(c->allow_reason, sizeof(c->allow_reason), fmt, ap);
	va_end(ap);
}

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

/* ---------------------------------------------------------------- */
/* Paths                                                             */

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

static char *normalize(const char *abs)
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
static int resolve_abs(struct cls *c, const char *abs, char **ret)
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
static char *absolutize(const char *base, const char *arg)
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

static bool inside_ws(const struct cls *c, const char *abs)
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

/* PM_TREE: a write that also changes everything under a directory (rm -r,
 * mv of a directory, chmod -R): the files below are checked too. */
enum pmode { PM_READ, PM_WRITE, PM_TREE };

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

static bool in_list(const char *const *list, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(list[i], s) == 0)
			return true;
	return false;
}

#define IN(list, s) in_list(list, ARRAY_SIZE(list), s)

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
		deny(c, "deny.secret.write",
		     "%s %s would change %s, which looks like a secret file",
		     what, arg, rel);
	else if (pc != PROTECTED_NONE && write_deny_rule[pc])
		deny(c, write_deny_rule[pc],
		     "%s %s would change %s, a protected path (%s)", what, arg,
		     rel, protected_class_name(pc));
	else if (pc == PROTECTED_AGENT_CONTEXT)
		hard_ask(c, "ask.write.context",
			 "%s %s would change %s, an agent context file", what,
			 arg, rel);
	else if (pc == PROTECTED_MANIFEST)
		hard_ask(c, "ask.write.manifest",
			 "%s %s would change %s, a dependency manifest", what,
			 arg, rel);
	/* Below a directory, tests count only when the session says which
	 * existed: build output is full of "tests" directories. */
	else if (c->ctx->preexisting && protected_is_test(rel) &&
		 c->ctx->preexisting(c->ctx->preexisting_data, rel))
		hard_ask(c, "ask.write.test",
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
		hard_ask(c, "ask.write.tree",
			 "%s %s changes a directory too large to check", what,
			 arg);
}

/*
 * Check one path argument of a command (or a file tool's path) given
 * against cwd (absolute, real).  Records findings and the resolved path.
 * what names the command for the reason.
 */
static void check_path(struct cls *c, const char *cwd, const char *arg,
		       enum pmode mode, const char *what)
{
	char *abs = NULL, *lex = NULL, *real = NULL;
	enum protected_class lc = PROTECTED_NONE, rc = PROTECTED_NONE, pc;
	bool lin, rin;
	int r;

	if (c->err)
		return;
	if (!*arg)
		return;
	abs = absolutize(cwd, arg);
	if (!abs || !(lex = normalize(abs))) {
		c->err = -ENOMEM;
		goto out;
	}
	r = resolve_abs(c, abs, &real);
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
	lin = inside_ws(c, lex);
	rin = r == 0 && inside_ws(c, real);
	lc = protected_match(lin ? rel_ws(c, lex) : lex);
	/* Without symlinks on the way both spellings are the same. */
	rc = lin == rin && strcmp(lex, real) == 0
		 ? lc
		 : protected_match(rin ? rel_ws(c, real) : real);
	/* Secret-looking files: neither read nor written, inside or out,
	 * whatever the spelling; the operator may list one as readable. */
	if (lc == PROTECTED_SECRET_FILE || rc == PROTECTED_SECRET_FILE) {
		if (mode != PM_READ)
			deny(
			    c, "deny.secret.write",
			    "%s would write %s, which looks like a secret file",
			    what, arg);
		else if (!(rin && policy_conf_operator_readable(
				      c->conf, rel_ws(c, real))))
			deny(c, "deny.secret.read",
			     "%s would read %s, which looks like a secret file",
			     what, arg);
	}
	if (!lin || !rin) {
		if (harmless_device(lex))
			;
		else if (mode != PM_READ)
			deny(c, "deny.path.outside",
			     "%s would write %s, outside the workspace", what,
			     arg);
		else
			hard_ask(c, "ask.read.outside",
				 "%s would read %s, outside the workspace",
				 what, arg);
		goto record;
	}
	if (mode == PM_READ)
		goto record;
	if (!*rel_ws(c, real) || !*rel_ws(c, lex)) {
		deny(c, "deny.write.workspace",
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
		deny(c, write_deny_rule[pc],
		     "%s would write %s, a protected path (%s)", what, arg,
		     protected_class_name(pc));
	} else if (pc == PROTECTED_AGENT_CONTEXT) {
		hard_ask(c, "ask.write.context",
			 "%s would change %s, an agent context file", what,
			 arg);
	} else if (pc == PROTECTED_MANIFEST) {
		hard_ask(
		    c, "ask.write.manifest",
		    "%s would change %s, a dependency manifest or lock file",
		    what, arg);
	} else if (protected_is_test(rel_ws(c, real)) &&
		   preexisting(c, rel_ws(c, real), real)) {
		hard_ask(c, "ask.write.test",
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

/* ---------------------------------------------------------------- */
/* Executables                                                       */

enum where { EXE_TRUSTED, EXE_WORKSPACE, EXE_UNTRUSTED, EXE_NOTFOUND };

struct lvl {
	const char *const *argv;
	size_t argc;
	char *cwd;	      /* absolute, real; owned by the level */
	const char *path_env; /* PATH used to find the program */
	int depth;
	char *exe;		 /* real path or NULL; owned */
	char name[NAME_MAX + 1]; /* basename when trusted, else "" */
	enum where where;
};

/* The trusted directories are listed on first use: most calls find their
 * program in the cache and never ask. */
static int setup_trusted(struct cls *c)
{
	const char *pe =
	    c->ctx->path_env ? c->ctx->path_env : POLICY_DEFAULT_PATH;

	c->n_trusted = 0;
	for (size_t i = 0; i < ARRAY_SIZE(system_dirs); i++)
		c->trusted[c->n_trusted++] = system_dirs[i];
	c->path_copy = strdup(pe);
	if (!c->path_copy)
		return -ENOMEM;
	for (char *p = c->path_copy, *save = NULL, *tok;
	     (tok = strtok_r(p, ":", &save)); p = NULL) {
		size_t n = strlen(tok);

		while (n > 1 && tok[n - 1] == '/')
			tok[--n] = '\0';
		if (tok[0] != '/' || inside_ws(c, tok) ||
		    c->n_trusted == ARRAY_SIZE(c->trusted))
			continue;
		c->trusted[c->n_trusted++] = tok;
	}
	return 0;
}

static bool is_trusted_dir(struct cls *c, const char *dir, size_t n)
{
	if (!c->path_copy) {
		int r = setup_trusted(c);

		if (r < 0) {
			c->err = r;
			return false;
		}
	}
	for (size_t i = 0; i < c->n_trusted; i++)
		if (strlen(c->trusted[i]) == n &&
		    memcmp(c->trusted[i], dir, n) == 0)
			return true;
	return false;
}

static bool under(const char *path, size_t n, const char *dir)
{
	size_t dl = strlen(dir);

	while (dl > 1 && dir[dl - 1] == '/')
		dl--;
	return n >= dl && memcmp(path, dir, dl) == 0 &&
	       (n == dl || path[dl] == '/' || dl == 1);
}

/* Whether a sandboxed command could create files in dir (n bytes). */
static bool sandbox_writable(const struct cls *c, const char *dir, size_t n)
{
	static const char *const always[] = {"/tmp", "/var/tmp", "/dev/shm"};

	for (size_t i = 0; i < ARRAY_SIZE(always); i++)
		if (under(dir, n, always[i]))
			return true;
	for (const char *const *w = c->ctx->writable; w && *w; w++)
		if (under(dir, n, *w))
			return true;
	return false;
}

/*
 * Finding a program in PATH costs a stat per PATH entry and an lstat per
 * component of the result; most calls name the same few programs.  The
 * cache remembers where a name was found for a PATH made only of absolute
 * directories that neither the workspace nor the sandbox can write (so
 * the agent cannot slip a program in front), and a hit is confirmed by
 * one stat of the found file (same inode, same change time).  Per thread,
 * set-associative: a direct-mapped table let two everyday names share a
 * slot (git and make did, evicting each other on every call, a third of
 * all system calls); a miss costs what no cache would.
 */
#define EXE_CACHE_SETS 64
/* Ways per set: names that hash alike live side by side; the least
 * recently used one goes. */
#define EXE_CACHE_WAYS 4
/* A key this long or shorter is built on the stack, not malloc'd. */
#define EXE_CACHE_KEY_STACK 1024

struct exe_cache_entry {
	char *key; /* name NUL search-PATH NUL trust-PATH NUL workspace */
	size_t key_len;
	char *found, *exe;
	char name[NAME_MAX + 1];
	int where;
	dev_t dev;
	ino_t ino;
	struct timespec ctim;
	struct timespec checked; /* CLOCK_MONOTONIC_COARSE of the last stat */
	uint64_t used;		 /* exe_cache_tick of the last hit or fill */
};

/* A cached program is re-checked with a stat at most this often: the
 * directories it may come from are root's or the operator's, and what
 * changes there is the operator's own doing. */
#define EXE_CACHE_RECHECK_NS 1000000000LL

static long long ts_ns(const struct timespec *t)
{
	return (long long)t->tv_sec * 1000000000LL + t->tv_nsec;
}

static __thread struct exe_cache_entry exe_cache[EXE_CACHE_SETS]
						[EXE_CACHE_WAYS];
static __thread uint64_t exe_cache_tick;

static bool path_cacheable_walk(const struct cls *c, const char *pe)
{
	for (const char *p = pe; p;) {
		const char *e = strchrnul(p, ':');
		size_t n = (size_t)(e - p);

		if (n == 0 || p[0] != '/' || sandbox_writable(c, p, n) ||
		    (c->wslen > 1 && under(p, n, c->ws)) ||
		    (n >= c->wslen && memcmp(p, c->ws, c->wslen) == 0))
			return false;
		p = *e ? e + 1 : NULL;
	}
	return true;
}

/*
 * path_cacheable_walk's answer for the last (PATH, workspace, writable
 * list) seen on this thread: it checks every PATH entry against every
 * writable directory, a tenth of a classification's time, and a session
 * asks about the same three again and again.  The memo is the inputs'
 * text, "PATH\0workspace\0w1\0w2\0...", compared whole.
 */
struct cacheable_memo {
	char *key;
	size_t len;
	bool val;
};

static __thread struct cacheable_memo cacheable_memo;

/* Write the memo key for (c, pe) into buf (n bytes); returns its length,
 * or 0 when it does not fit. */
static size_t cacheable_key(const struct cls *c, const char *pe, char *buf,
			    size_t n)
{
	size_t l = 0, k;

#define PUT(s, len)                                                            \
	do {                                                                   \
		k = (len);                                                     \
		if (l + k + 1 > n)                                             \
			return 0;                                              \
		memcpy(buf + l, (s), k);                                       \
		buf[l + k] = '\0';                                             \
		l += k + 1;                                                    \
	} while (0)
	PUT(pe, strlen(pe));
	PUT(c->ws, c->wslen);
	for (const char *const *w = c->ctx->writable; w && *w; w++)
		PUT(*w, strlen(*w));
#undef PUT
	return l;
}

/* A memo key this long or shorter is compared; a longer one walks. */
#define CACHEABLE_KEY_MAX 4096

static bool path_cacheable(const struct cls *c, const char *pe)
{
	char key[CACHEABLE_KEY_MAX];
	size_t len = cacheable_key(c, pe, key, sizeof(key));
	struct cacheable_memo *m = &cacheable_memo;
	bool val;
	char *copy;

	if (len && m->key && m->len == len && memcmp(m->key, key, len) == 0)
		return m->val;
	val = path_cacheable_walk(c, pe);
	if (len && (copy = malloc(len))) {
		memcpy(copy, key, len);
		free(m->key);
		m->key = copy;
		m->len = len;
		m->val = val;
	}
	return val;
}

/* The key of l's program in the cache: in buf when it fits (n bytes),
 * else malloc'd (the caller frees it when it is not buf); NULL when out
 * of memory. */
static char *cache_key(const struct cls *c, const struct lvl *l, char *buf,
		       size_t n, size_t *ret_len)
{
	const char *trust =
	    c->ctx->path_env ? c->ctx->path_env : POLICY_DEFAULT_PATH;
	size_t a = strlen(l->argv[0]), b = strlen(l->path_env),
	       t = strlen(trust);
	size_t need = a + b + t + c->wslen + 4;
	char *k = need <= n ? buf : malloc(need);

	if (!k)
		return NULL;
	memcpy(k, l->argv[0], a + 1);
	memcpy(k + a + 1, l->path_env, b + 1);
	memcpy(k + a + b + 2, trust, t + 1);
	memcpy(k + a + b + t + 3, c->ws, c->wslen);
	k[a + b + t + 3 + c->wslen] = '\0';
	*ret_len = a + b + t + c->wslen + 3;
	return k;
}

static size_t cache_set(const char *k, size_t n)
{
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)k[i]) * 1099511628211ull;
	return (size_t)(h % EXE_CACHE_SETS);
}

/* The entry of set holding key, or NULL. */
static struct exe_cache_entry *cache_find(size_t set, const char *key,
					  size_t key_len)
{
	for (size_t w = 0; w < EXE_CACHE_WAYS; w++) {
		struct exe_cache_entry *ce = &exe_cache[set][w];

		if (ce->key && ce->key_len == key_len &&
		    memcmp(ce->key, key, key_len) == 0)
			return ce;
	}
	return NULL;
}

/* Where to store key in set: its own entry, an empty one, or the least
 * recently used. */
static struct exe_cache_entry *cache_victim(size_t set, const char *key,
					    size_t key_len)
{
	struct exe_cache_entry *ce = cache_find(set, key, key_len), *v;

	if (ce)
		return ce;
	v = &exe_cache[set][0];
	for (size_t w = 0; w < EXE_CACHE_WAYS; w++) {
		ce = &exe_cache[set][w];
		if (!ce->key)
			return ce;
		if (ce->used < v->used)
			v = ce;
	}
	return v;
}

static bool is_exec_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	       (st.st_mode & 0111);
}

/* Find the program of l->argv[0] and decide whether it is known. */
/* Remember where a0 was found for this key (the entry the cache gives
 * up), with the file's identity to re-check it by.  Best effort: without
 * memory the result is simply not cached. */
static void cache_store(size_t set, const char *key, size_t key_len,
			const char *found, const struct lvl *l)
{
	struct exe_cache_entry *ce = cache_victim(set, key, key_len);
	struct stat st;
	char *f = strdup(found), *x = strdup(l->exe);
	char *k = malloc(key_len + 1);

	if (f && x && k && stat(found, &st) == 0) {
		memcpy(k, key, key_len + 1);
		free(ce->key);
		free(ce->found);
		free(ce->exe);
		ce->key = steal_ptr(k);
		ce->key_len = key_len;
		ce->found = steal_ptr(f);
		ce->exe = steal_ptr(x);
		ce->where = l->where;
		strcpy(ce->name, l->name);
		ce->dev = st.st_dev;
		ce->ino = st.st_ino;
		ce->ctim = st.st_ctim;
		clock_gettime(CLOCK_MONOTONIC_COARSE, &ce->checked);
		ce->used = ++exe_cache_tick;
	}
	free(f);
	free(x);
	free(k);
}

/* Search the run's PATH (an empty entry is the cwd) for argv[0], as
 * execvp would: *ret_found is the first executable file (owned), or NULL.
 * Returns 0, or -ENOMEM (c->err set). */
static int path_search(struct cls *c, const struct lvl *l, char **ret_found)
{
	const char *a0 = l->argv[0];
	char *found = NULL;

	for (const char *p = l->path_env; p;) {
		const char *e = strchrnul(p, ':');
		size_t n = (size_t)(e - p);
		char *dir = NULL;

		if (n == 0)
			dir = strdup(l->cwd);
		else if (asprintf(&dir, "%.*s", (int)n, p) < 0)
			dir = NULL;
		if (!dir)
			goto oom;
		found = absolutize(l->cwd, dir);
		free(dir);
		if (found) {
			char *full;

			if (asprintf(&full, "%s/%s", found, a0) < 0)
				full = NULL;
			free(found);
			found = full;
		}
		if (!found)
			goto oom;
		if (is_exec_file(found))
			break;
		free(found);
		found = NULL;
		p = *e ? e + 1 : NULL;
	}
	*ret_found = found;
	return 0;
oom:
	c->err = -ENOMEM;
	return -ENOMEM;
}

static void ident(struct cls *c, struct lvl *l)
{
	const char *a0 = l->argv[0];
	char *found = NULL, *lex = NULL, *real = NULL;
	bool ws_entry = false;

	char key_buf[EXE_CACHE_KEY_STACK];
	char *key = NULL;
	size_t key_len = 0, set = 0;

	l->where = EXE_NOTFOUND;
	l->name[0] = '\0';
	if (!strchr(a0, '/') && path_cacheable(c, l->path_env)) {
		struct exe_cache_entry *ce;
		struct stat st;
		struct timespec now;
		bool fresh;

		key = cache_key(c, l, key_buf, sizeof(key_buf), &key_len);
		if (!key) {
			c->err = -ENOMEM;
			return;
		}
		/* The set by the name alone: hashing the whole key (three
		 * PATHs and the workspace) cost more than the lookup. */
		set = cache_set(a0, strlen(a0));
		ce = cache_find(set, key, key_len);
		clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
		fresh = ce && ts_ns(&now) - ts_ns(&ce->checked) <
				  EXE_CACHE_RECHECK_NS;
		if (ce &&
		    (fresh || (stat(ce->found, &st) == 0 &&
			       st.st_dev == ce->dev && st.st_ino == ce->ino &&
			       st.st_ctim.tv_sec == ce->ctim.tv_sec &&
			       st.st_ctim.tv_nsec == ce->ctim.tv_nsec))) {
			if (!fresh)
				ce->checked = now;
			ce->used = ++exe_cache_tick;
			l->exe = strdup(ce->exe);
			if (!l->exe) {
				c->err = -ENOMEM;
				goto out;
			}
			l->where = ce->where;
			strcpy(l->name, ce->name);
			goto out;
		}
	}
	if (strchr(a0, '/')) {
		found = absolutize(l->cwd, a0);
		if (!found) {
			c->err = -ENOMEM;
			return;
		}
		if (!is_exec_file(found))
			goto out;
	} else {
		if (path_search(c, l, &found) < 0 || !found)
			goto out;
	}
	lex = normalize(found);
	if (!lex || resolve_abs(c, found, &real) == -ENOMEM) {
		c->err = -ENOMEM;
		goto out;
	}
	if (!real)
		goto out;
	ws_entry = inside_ws(c, lex) || inside_ws(c, real);
	l->exe = steal_ptr(real);
	if (ws_entry) {
		l->where = EXE_WORKSPACE;
		goto out;
	}
	const char *slash = strrchr(lex, '/');
	size_t dl = slash == lex ? 1 : (size_t)(slash - lex);

	if (is_trusted_dir(c, lex, dl) && !sandbox_writable(c, lex, dl) &&
	    strlen(slash + 1) <= NAME_MAX) {
		l->where = EXE_TRUSTED;
		strcpy(l->name, slash + 1);
	} else {
		l->where = EXE_UNTRUSTED;
	}
	if (key)
		cache_store(set, key, key_len, found, l);
out:
	if (key != key_buf)
		free(key);
	free(found);
	free(lex);
	free(real);
}

/* ---------------------------------------------------------------- */
/* Options                                                           */

/*
 * How a simple command's arguments are read.  shortv lists the short
 * options that take a value; a '<' or '>' after one says the value is a
 * path read or written.  longv likewise for long options ("file<").
 * Option values and operands are examined as GNU getopt would, options
 * after operands included ("rm x -f"), "--" ending them.
 */
enum opmode {
	OP_NONE,      /* operands are not paths */
	OP_READ,      /* every operand is read */
	OP_WRITE,     /* every operand is written (or removed) */
	OP_LASTWRITE, /* with two or more, the last is written */
};

struct spec {
	const char *name;
	const char *shortv;
	const char *const *longv;
	enum opmode mode;
	unsigned skip;	      /* leading operands that are not paths */
	const char *skip_off; /* short options that cancel skip (grep -e) */
	const char *const *skip_off_long;
	const char *forbid; /* short options that make it ask */
	const char *const *forbid_long;
	const char *forbid_rule;
	/* Directories among the written operands change as a whole (rm -r,
	 * mv, chmod -R): 1 always, 2 only with -r/-R/--recursive. */
	int tree;
	/* A last operand that is a directory receives the others under
	 * their own names (cp, mv, ln), as does the -t directory. */
	bool into;
};

#define L(...) ((const char *const[]){__VA_ARGS__, NULL})

/* The value kind of short option ch in shortv: 0 none, 'v' plain value,
 * '<' read path, '>' written path. */
static int short_kind(const char *shortv, char ch)
{
	const char *q;

	if (!shortv || ch == '<' || ch == '>')
		return 0;
	q = strchr(shortv, ch);
	if (!q || ch == ' ')
		return 0;
	return q[1] == '<' || q[1] == '>' ? q[1] : 'v';
}

/* How much a value kind matters, the written path first: an
 * abbreviation that could be several options is taken as the worst. */
static int kind_rank(int k)
{
	return k == '>' ? 3 : k == '<' ? 2 : k ? 1 : 0;
}

/*
 * The value kind of long option name (n bytes, without "--") in longv:
 * 0 none, 'v' plain value, '<' read path, '>' written path.  getopt takes
 * any unambiguous abbreviation ("sort --out=F" is --output=F), so a name
 * that is a prefix of listed options has the worst of their kinds; an
 * exact match wins, as it does in getopt.
 */
static int long_kind(const char *const *longv, const char *name, size_t n)
{
	int worst = 0;

	if (!longv || n == 0)
		return 0;
	for (const char *const *l = longv; *l; l++) {
		size_t ln = strcspn(*l, "<>");
		int k = (*l)[ln] ? (*l)[ln] : 'v';

		if (n > ln || memcmp(*l, name, n) != 0)
			continue;
		if (ln == n)
			return k;
		if (kind_rank(k) > kind_rank(worst))
			worst = k;
	}
	return worst;
}

/* name (n bytes, without "--") is an unambiguous-or-not prefix of
 * canonical: getopt accepts abbreviations, so "--rec" is --recursive.
 * Matching any prefix errs towards seeing the option. */
static bool long_is(const char *name, size_t n, const char *canonical)
{
	return n > 0 && n <= strlen(canonical) &&
	       memcmp(name, canonical, n) == 0;
}

static bool long_in(const char *const *list, const char *name, size_t n)
{
	if (!list)
		return false;
	for (const char *const *l = list; *l; l++)
		if (long_is(name, n, *l))
			return true;
	return false;
}

struct optcb {
	/* Called for each option: ch (short) or name/n (long), value or
	 * NULL. */
	void (*opt)(struct cls *c, struct lvl *l, void *d, char ch,
		    const char *name, size_t n, const char *val);
	void (*operand)(struct cls *c, struct lvl *l, void *d, size_t idx,
			const char *arg);
	void *d;
};

/* Walk argv from index start; returns nothing, reports via cb. */
static void walk_opts(struct cls *c, struct lvl *l, size_t start,
		      const char *shortv, const char *const *longv,
		      const struct optcb *cb)
{
	bool ddash = false;
	size_t idx = 0;

	for (size_t i = start; i < l->argc && !c->err; i++) {
		const char *a = l->argv[i];

		if (ddash || a[0] != '-' || a[1] == '\0') {
			cb->operand(c, l, cb->d, idx++, a);
			continue;
		}
		if (strcmp(a, "--") == 0) {
			ddash = true;
			continue;
		}
		if (a[1] == '-') {
			const char *name = a + 2;
			const char *eq = strchr(name, '=');
			size_t n = eq ? (size_t)(eq - name) : strlen(name);
			const char *val = eq ? eq + 1 : NULL;
			int k = long_kind(longv, name, n);

			if (!val && k && i + 1 < l->argc)
				val = l->argv[++i];
			if (val && (k == '<' || k == '>'))
				check_path(c, l->cwd, val,
					   k == '<' ? PM_READ : PM_WRITE,
					   l->argv[0]);
			if (cb->opt)
				cb->opt(c, l, cb->d, 0, name, n, val);
			continue;
		}
		for (const char *q = a + 1; *q; q++) {
			int k = short_kind(shortv, *q);

			if (!k) {
				if (cb->opt)
					cb->opt(c, l, cb->d, *q, NULL, 0, NULL);
				continue;
			}
			const char *val = q[1]		    ? q + 1
					  : i + 1 < l->argc ? l->argv[++i]
							    : NULL;
			if (val && (k == '<' || k == '>'))
				check_path(c, l->cwd, val,
					   k == '<' ? PM_READ : PM_WRITE,
					   l->argv[0]);
			if (cb->opt)
				cb->opt(c, l, cb->d, *q, NULL, 0, val);
			break;
		}
	}
}

/* ---------------------------------------------------------------- */
/* Simple commands: an option table and what operands are             */

struct simple_state {
	const struct spec *s;
	const char **ops;
	size_t n_ops;
	bool skip_off;
	bool forbidden;
	char forbidden_opt[64];
	bool recursive;		/* -r, -R, --recursive */
	const char *target_dir; /* -t DIR */
};

static void simple_opt(struct cls *c, struct lvl *l, void *d, char ch,
		       const char *name, size_t n, const char *val)
{
	struct simple_state *st = d;
	const struct spec *s = st->s;

	if (ch) {
		if (s->skip_off && strchr(s->skip_off, ch))
			st->skip_off = true;
		if (s->forbid && strchr(s->forbid, ch) && !st->forbidden) {
			st->forbidden = true;
			snprintf(st->forbidden_opt, sizeof(st->forbidden_opt),
				 "-%c", ch);
		}
		if (ch == 'r' || ch == 'R')
			st->recursive = true;
		if (ch == 't' && s->into && val)
			st->target_dir = val;
		return;
	}
	if (long_in(s->skip_off_long, name, n))
		st->skip_off = true;
	if (long_in(s->forbid_long, name, n) && !st->forbidden) {
		st->forbidden = true;
		snprintf(st->forbidden_opt, sizeof(st->forbidden_opt), "--%.*s",
			 (int)(n < 60 ? n : 60), name);
	}
	if (long_is(name, n, "recursive"))
		st->recursive = true;
	if (s->into && val && long_is(name, n, "target-directory") && n > 2)
		st->target_dir = val;
}

static void simple_operand(struct cls *c, struct lvl *l, void *d, size_t idx,
			   const char *arg)
{
	struct simple_state *st = d;

	st->ops[st->n_ops++] = arg;
}

/* cp a b dir/ writes dir/a and dir/b: check those names too, so that
 * "cp x/Makefile src/" is seen writing src/Makefile. */
static void check_into(struct cls *c, struct lvl *l,
		       const struct simple_state *st, size_t skip)
{
	const char *dir = st->target_dir;
	size_t nsrc = st->n_ops;
	struct stat sb;
	char *abs, *real = NULL;

	if (!dir) {
		if (st->n_ops < skip + 2)
			return;
		dir = st->ops[st->n_ops - 1];
		nsrc = st->n_ops - 1;
	}
	abs = absolutize(l->cwd, dir);
	if (!abs || resolve_abs(c, abs, &real) == -ENOMEM) {
		free(abs);
		c->err = -ENOMEM;
		return;
	}
	free(abs);
	if (!real || stat(real, &sb) < 0 || !S_ISDIR(sb.st_mode)) {
		free(real);
		return;
	}
	for (size_t i = skip; i < nsrc && !c->err; i++) {
		const char *b = strrchr(st->ops[i], '/');
		char *dst = NULL;

		b = b ? b + 1 : st->ops[i];
		if (!*b || strcmp(b, ".") == 0 || strcmp(b, "..") == 0)
			continue;
		if (asprintf(&dst, "%s/%s", real, b) < 0) {
			c->err = -ENOMEM;
			break;
		}
		check_path(c, l->cwd, dst, st->recursive ? PM_TREE : PM_WRITE,
			   st->s->name);
		free(dst);
	}
	free(real);
}

static void run_simple(struct cls *c, struct lvl *l, const struct spec *s)
{
	struct simple_state st = {.s = s};
	struct optcb cb = {simple_opt, simple_operand, &st};
	size_t skip;

	st.ops = calloc(l->argc, sizeof(char *));
	if (!st.ops) {
		c->err = -ENOMEM;
		return;
	}
	walk_opts(c, l, 1, s->shortv, s->longv, &cb);
	skip = st.skip_off ? 0 : s->skip;
	for (size_t i = skip; i < st.n_ops; i++) {
		enum pmode m;

		switch (s->mode) {
		case OP_NONE:
			continue;
		case OP_READ:
			m = PM_READ;
			break;
		case OP_WRITE:
			m = (s->tree == 1 || (s->tree == 2 && st.recursive))
				? PM_TREE
				: PM_WRITE;
			break;
		case OP_LASTWRITE:
		default:
			m = (st.n_ops - skip >= 2 && i + 1 == st.n_ops)
				? PM_WRITE
				: PM_READ;
			break;
		}
		if (strcmp(st.ops[i], "-") == 0 && m == PM_READ)
			continue;
		check_path(c, l->cwd, st.ops[i], m, s->name);
	}
	if (s->into)
		check_into(c, l, &st, skip);
	if (st.forbidden)
		cmd_ask(c, s->forbid_rule,
			"%s %s can run other programs or "
			"write files",
			s->name, st.forbidden_opt);
	if (st.recursive && strcmp(s->name, "rm") == 0)
		cmd_ask(c, "ask.rm.recursive",
			"rm removes directories "
			"recursively");
	allow(c,
	      s->mode == OP_WRITE || s->mode == OP_LASTWRITE ? "allow.write"
							     : "allow.cmd",
	      "%s is on the built-in list of %s commands", s->name,
	      s->mode == OP_WRITE || s->mode == OP_LASTWRITE ? "file"
							     : "read-only");
	free(st.ops);
}

/* grep, egrep and fgrep take the same options: -e/-f name the pattern
 * (skipped as an operand), -f and --exclude-from read a file. */
#define GREP_FLAGS                                                             \
	.shortv = "e f< m A B C d D",                                          \
	.longv = L("regexp", "file<", "max-count", "after-context",            \
		   "before-context", "context", "include", "exclude",          \
		   "exclude-from<", "exclude-dir", "label"),                   \
	.mode = OP_READ, .skip = 1, .skip_off = "ef",                          \
	.skip_off_long = L("regexp", "file")

static const struct spec simple_specs[] = {
    {.name = "[", .mode = OP_NONE},
    {.name = "b2sum", .mode = OP_READ},
    {.name = "base64", .shortv = "w", .mode = OP_READ},
    {.name = "basename", .shortv = "s", .mode = OP_NONE},
    {.name = "cat", .mode = OP_READ},
    {.name = "chmod",
     .longv = L("reference<"),
     .mode = OP_WRITE,
     .skip = 1,
     .skip_off_long = L("reference"),
     .tree = 2},
    {.name = "cksum", .shortv = "a", .mode = OP_READ},
    {.name = "cmp", .shortv = "in", .mode = OP_READ},
    {.name = "column", .shortv = "cstoNRWHdlE", .mode = OP_READ},
    {.name = "comm", .mode = OP_READ},
    {.name = "cp",
     .shortv = "t>S",
     .longv = L("target-directory>", "suffix"),
     .mode = OP_LASTWRITE,
     .into = true},
    {.name = "cut",
     .shortv = "bcdf",
     .longv =
	 L("bytes", "characters", "delimiter", "fields", "output-delimiter"),
     .mode = OP_READ},
    {.name = "date",
     .shortv = "d f< r<",
     .longv = L("date", "file<", "reference<"),
     .mode = OP_NONE},
    {.name = "diff",
     .shortv = "ILSxX<FDW",
     .longv =
	 L("label", "ignore-matching-lines", "exclude-from<", "from-file<",
	   "to-file<", "starting-file", "horizon-lines", "exclude", "tabsize",
	   "width", "line-format", "old-line-format", "new-line-format",
	   "unchanged-line-format", "show-function-line"),
     .mode = OP_READ},
    {.name = "dirname", .mode = OP_NONE},
    {.name = "du",
     .shortv = "B d t X<",
     .longv = L("exclude-from<", "max-depth", "exclude", "threshold",
		"block-size", "time-style", "files0-from<"),
     .mode = OP_READ},
    {.name = "echo", .mode = OP_NONE},
    {.name = "egrep", GREP_FLAGS},
    {.name = "expand", .shortv = "t", .mode = OP_READ},
    {.name = "false", .mode = OP_NONE},
    {.name = "fgrep", GREP_FLAGS},
    {.name = "file",
     .shortv = "e F f< m< P",
     .longv = L("files-from<", "magic-file<", "separator"),
     .mode = OP_READ},
    {.name = "fmt", .shortv = "pwg", .mode = OP_READ},
    {.name = "fold", .shortv = "w", .mode = OP_READ},
    {.name = "grep", GREP_FLAGS},
    {.name = "head",
     .shortv = "nc",
     .longv = L("lines", "bytes"),
     .mode = OP_READ},
    {.name = "id", .mode = OP_NONE},
    {.name = "join", .shortv = "aejot12", .mode = OP_READ},
    {.name = "jq",
     .shortv = "f< L",
     .longv =
	 L("from-file<", "arg", "argjson", "slurpfile", "rawfile", "indent"),
     .mode = OP_READ,
     .skip = 1,
     .skip_off = "f",
     .skip_off_long = L("from-file")},
    {.name = "ln",
     .shortv = "t>S",
     .longv = L("target-directory>", "suffix"),
     .mode = OP_WRITE,
     .into = true},
    {.name = "ls",
     .shortv = "ITw",
     .longv = L("hide", "ignore", "width", "tabsize", "format", "sort", "time",
		"time-style", "indicator-style", "quoting-style", "block-size"),
     .mode = OP_READ},
    {.name = "md5sum", .mode = OP_READ},
    {.name = "mkdir",
     .shortv = "m",
     .longv = L("mode", "context"),
     .mode = OP_WRITE},
    {.name = "mv",
     .shortv = "t>S",
     .longv = L("target-directory>", "suffix"),
     .mode = OP_WRITE,
     .tree = 1,
     .into = true},
    {.name = "nl", .shortv = "bdfhilnsvw", .mode = OP_READ},
    {.name = "nproc", .mode = OP_NONE},
    {.name = "od", .shortv = "AjNSstw", .mode = OP_READ},
    {.name = "paste", .shortv = "d", .mode = OP_READ},
    {.name = "printf", .mode = OP_NONE},
    {.name = "pwd", .mode = OP_NONE},
    {.name = "readlink", .mode = OP_READ},
    {.name = "realpath",
     .shortv = "",
     .longv = L("relative-to<", "relative-base<"),
     .mode = OP_READ},
    {.name = "rev", .mode = OP_READ},
    {.name = "rg",
     .shortv = "A B C E e f< g j M m r t T d",
     .longv = L(
	 "regexp", "file<", "glob", "iglob", "type", "type-not", "type-add",
	 "type-clear", "max-count", "max-columns", "max-depth", "max-filesize",
	 "threads", "replace", "context", "after-context", "before-context",
	 "encoding", "ignore-file<", "path-separator", "sort", "sortr",
	 "colors", "context-separator", "field-match-separator",
	 "field-context-separator", "dfa-size-limit", "regex-size-limit",
	 "engine", "pre", "pre-glob", "hostname-bin", "hyperlink-format"),
     .mode = OP_READ,
     .skip = 1,
     .skip_off = "ef",
     .skip_off_long = L("regexp", "file"),
     .forbid = "z",
     .forbid_long = L("pre", "pre-glob", "search-zip", "hostname-bin"),
     .forbid_rule = "ask.rg.pre"},
    {.name = "rgrep",
     .shortv = "e f< m A B C d D",
     .longv = L("regexp", "file<", "max-count"),
     .mode = OP_READ,
     .skip = 1,
     .skip_off = "ef",
     .skip_off_long = L("regexp", "file")},
    {.name = "rm", .mode = OP_WRITE, .tree = 2},
    {.name = "rmdir", .mode = OP_WRITE},
    {.name = "seq", .shortv = "fs", .mode = OP_NONE},
    {.name = "sha1sum", .mode = OP_READ},
    {.name = "sha224sum", .mode = OP_READ},
    {.name = "sha256sum", .mode = OP_READ},
    {.name = "sha384sum", .mode = OP_READ},
    {.name = "sha512sum", .mode = OP_READ},
    {.name = "sort",
     .shortv = "k t o> S T> ",
     .longv = L("key", "field-separator", "output>", "buffer-size",
		"temporary-directory>", "files0-from<", "batch-size",
		"parallel", "compress-program"),
     .mode = OP_READ,
     .skip = 0,
     .skip_off = NULL,
     .skip_off_long = NULL,
     .forbid = NULL,
     .forbid_long = L("compress-program"),
     .forbid_rule = "ask.sort.compress"},
    {.name = "stat",
     .shortv = "c",
     .longv = L("format", "printf"),
     .mode = OP_READ},
    {.name = "strings", .shortv = "nt", .mode = OP_READ},
    {.name = "tac", .shortv = "s", .mode = OP_READ},
    {.name = "tail",
     .shortv = "nc",
     .longv =
	 L("lines", "bytes", "sleep-interval", "pid", "max-unchanged-stats"),
     .mode = OP_READ},
    {.name = "tee", .mode = OP_WRITE},
    {.name = "test", .mode = OP_NONE},
    {.name = "touch",
     .shortv = "d r< t",
     .longv = L("date", "reference<", "time"),
     .mode = OP_WRITE},
    {.name = "tr", .mode = OP_NONE},
    {.name = "tree",
     .shortv = "LPIo> ",
     .longv = L("filelimit", "timefmt", "charset"),
     .mode = OP_READ},
    {.name = "true", .mode = OP_NONE},
    {.name = "truncate",
     .shortv = "s r<",
     .longv = L("size", "reference<"),
     .mode = OP_WRITE},
    {.name = "uname", .mode = OP_NONE},
    {.name = "unexpand", .shortv = "t", .mode = OP_READ},
    {.name = "uniq",
     .shortv = "fsw",
     .longv = L("skip-fields", "skip-chars", "check-chars"),
     .mode = OP_LASTWRITE},
    {.name = "wc", .shortv = "", .longv = L("files0-from<"), .mode = OP_READ},
    {.name = "which", .mode = OP_NONE},
    {.name = "whoami", .mode = OP_NONE},
};

static const struct spec *find_spec(const char *name)
{
	size_t lo = 0, hi = ARRAY_SIZE(simple_specs);

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int r = strcmp(name, simple_specs[mid].name);

		if (r == 0)
			return &simple_specs[mid];
		if (r < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

/* ---------------------------------------------------------------- */
/* find, sed, awk, dd                                                  */

static void classify_level(struct cls *c, struct lvl *l);

static void run_find(struct cls *c, struct lvl *l)
{
	static const char *const exec_family[] = {"-exec", "-execdir", "-ok",
						  "-okdir"};
	static const char *const write_family[] = {
	    "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"};
	size_t i = 1;
	bool roots = false;

	/* -H -L -P -D opts -Olevel come before the starting points. */
	while (i < l->argc) {
		const char *a = l->argv[i];

		if (strcmp(a, "-H") == 0 || strcmp(a, "-L") == 0 ||
		    strcmp(a, "-P") == 0 || strncmp(a, "-O", 2) == 0) {
			i++;
		} else if (strcmp(a, "-D") == 0) {
			i += 2;
		} else {
			break;
		}
	}
	for (; i < l->argc; i++) {
		const char *a = l->argv[i];

		if (a[0] == '-' || a[0] == '(' || a[0] == '!' || a[0] == ')' ||
		    a[0] == ',')
			break;
		check_path(c, l->cwd, a, PM_READ, "find");
		roots = true;
	}
	if (!roots)
		check_path(c, l->cwd, ".", PM_READ, "find");
	for (; i < l->argc; i++) {
		const char *a = l->argv[i];

		for (size_t k = 0; k < ARRAY_SIZE(exec_family); k++) {
			size_t end = i + 1;
			struct lvl in = {.cwd = l->cwd,
					 .path_env = l->path_env,
					 .depth = l->depth + 1};

			if (strcmp(a, exec_family[k]) != 0)
				continue;
			cmd_ask(c, "ask.find.exec",
				"find %s runs a command for each file", a);
			/* The command runs once per file: classify it as a
			 * wrapped command, so "-exec git push ;" is denied. */
			while (end < l->argc &&
			       strcmp(l->argv[end], ";") != 0 &&
			       strcmp(l->argv[end], "+") != 0)
				end++;
			in.argv = l->argv + i + 1;
			in.argc = end - (i + 1);
			if (in.argc > 0 && !c->err) {
				classify_level(c, &in);
				free(in.exe);
			}
		}
		for (size_t k = 0; k < ARRAY_SIZE(write_family); k++)
			if (strcmp(a, write_family[k]) == 0)
				cmd_ask(c, "ask.find.write",
					"find %s removes or writes files", a);
		if (strcmp(a, "-files0-from") == 0 && i + 1 < l->argc)
			check_path(c, l->cwd, l->argv[++i], PM_READ, "find");
	}
	allow(c, "allow.cmd", "find without -exec or -delete only reads");
}

struct script_state {
	const char *prog; /* "sed" or "awk" */
	char *script;	  /* joined -e pieces, malloc'd */
	size_t len;
	bool have_script;
	bool from_file;
	bool in_place;
	bool sandbox;
	bool unsafe_opt;
	char unsafe_name[32];
	const char **ops;
	size_t n_ops;
};

static int script_append(struct script_state *st, const char *piece)
{
	size_t n = strlen(piece);
	char *s = realloc(st->script, st->len + n + 2);

	if (!s)
		return -ENOMEM;
	st->script = s;
	if (st->len)
		s[st->len++] = '\n';
	memcpy(s + st->len, piece, n + 1);
	st->len += n;
	st->have_script = true;
	return 0;
}

static void sed_opt(struct cls *c, struct lvl *l, void *d, char ch,
		    const char *name, size_t n, const char *val)
{
	struct script_state *st = d;

	if (ch == 'e' || (!ch && long_is(name, n, "expression") && n >= 2)) {
		if (val && script_append(st, val) < 0)
			c->err = -ENOMEM;
		if (!val)
			st->unsafe_opt = true;
	} else if (ch == 'f' || (!ch && long_is(name, n, "file"))) {
		st->from_file = true;
		st->have_script = true;
		if (val)
			check_path(c, l->cwd, val, PM_READ, "sed");
	} else if (ch == 'i' ||
		   (!ch && long_is(name, n, "in-place") && n >= 2)) {
		st->in_place = true;
	} else if (!ch && long_is(name, n, "sandbox") && n >= 2) {
		st->sandbox = true;
	}
}

static void script_operand(struct cls *c, struct lvl *l, void *d, size_t idx,
			   const char *arg)
{
	struct script_state *st = d;

	st->ops[st->n_ops++] = arg;
}

/* Walk a sed or awk command line: each option through cb's opt, the
 * operands into st->ops (st is cb's d); without -e or -f the first is the
 * script.  Returns the index in st->ops of the first operand that names
 * a file, with c->err set on failure (st's buffers are the caller's). */
static size_t script_args(struct cls *c, struct lvl *l, const char *shortv,
			  const char *const *longv, const struct optcb *cb)
{
	struct script_state *st = cb->d;

	st->ops = calloc(l->argc, sizeof(char *));
	if (!st->ops) {
		c->err = -ENOMEM;
		return 0;
	}
	walk_opts(c, l, 1, shortv, longv, cb);
	if (c->err || st->have_script || st->n_ops == 0)
		return 0;
	if (script_append(st, st->ops[0]) < 0) {
		c->err = -ENOMEM;
		return 0;
	}
	return 1;
}

static void run_sed(struct cls *c, struct lvl *l)
{
	struct script_state st = {.prog = "sed"};
	struct optcb cb = {sed_opt, script_operand, &st};
	/* -i takes its suffix only attached (-i.bak), so it is a flag here;
	 * -e, -f, -l take a value. */
	size_t first = script_args(c, l, "efl",
				   L("expression", "file", "line-length"), &cb);
	unsigned r;

	if (c->err)
		goto out;
	for (size_t i = first; i < st.n_ops; i++)
		if (strcmp(st.ops[i], "-") != 0)
			check_path(c, l->cwd, st.ops[i],
				   st.in_place ? PM_WRITE : PM_READ, "sed");
	if (st.from_file) {
		cmd_ask(c, "ask.sed.file",
			"sed reads its script from a file "
			"spd cannot vouch for");
		goto out;
	}
	r = st.script ? policy_sed_scan(st.script) : 0;
	if (st.unsafe_opt)
		r |= POLICY_SCRIPT_UNPARSED;
	if (st.sandbox)
		r &= ~(unsigned)(POLICY_SCRIPT_EXEC | POLICY_SCRIPT_WRITE |
				 POLICY_SCRIPT_READ);
	if (r & POLICY_SCRIPT_EXEC)
		cmd_ask(c, "ask.sed.exec", "the sed script runs commands (e)");
	else if (r & (POLICY_SCRIPT_WRITE | POLICY_SCRIPT_READ))
		cmd_ask(
		    c, "ask.sed.file",
		    "the sed script reads or writes other files (r, R, w, W)");
	else if (r & POLICY_SCRIPT_UNPARSED)
		cmd_ask(c, "ask.sed.unparsed",
			"the sed script could not be understood");
	allow(c, st.in_place ? "allow.write" : "allow.cmd",
	      "sed with a print-only script");
out:
	free(st.script);
	free(st.ops);
}

static void awk_opt(struct cls *c, struct lvl *l, void *d, char ch,
		    const char *name, size_t n, const char *val)
{
	struct script_state *st = d;

	if (ch == 'e' || (!ch && long_is(name, n, "source"))) {
		if (val && script_append(st, val) < 0)
			c->err = -ENOMEM;
	} else if (ch == 'f' || ch == 'E' ||
		   (!ch &&
		    (long_is(name, n, "file") || long_is(name, n, "exec")))) {
		st->from_file = true;
		st->have_script = true;
		if (val)
			check_path(c, l->cwd, val, PM_READ, "awk");
	} else if (ch == 'F' || ch == 'v' ||
		   (!ch && (long_is(name, n, "field-separator") ||
			    long_is(name, n, "assign")))) {
		/* a field separator or an assignment: data, not code */
	} else if (ch == 'i' || ch == 'l' || ch == 'o' || ch == 'p' ||
		   ch == 'd' || ch == 'D' ||
		   (!ch &&
		    (long_is(name, n, "include") || long_is(name, n, "load") ||
		     long_is(name, n, "pretty-print") ||
		     long_is(name, n, "profile") ||
		     long_is(name, n, "dump-variables") ||
		     long_is(name, n, "debug")))) {
		st->unsafe_opt = true;
		snprintf(st->unsafe_name, sizeof(st->unsafe_name), "%s%.*s",
			 ch ? "-" : "--", ch ? 1 : (int)(n < 24 ? n : 24),
			 ch ? &ch : name);
	} else if (ch == 'S' || (!ch && long_is(name, n, "sandbox"))) {
		st->sandbox = true;
	}
}

static bool is_assignment(const char *a)
{
	const char *q = a;

	if (!(*q == '_' || isalpha((unsigned char)*q)))
		return false;
	while (*q == '_' || isalnum((unsigned char)*q))
		q++;
	return *q == '=';
}

static void run_awk(struct cls *c, struct lvl *l)
{
	struct script_state st = {.prog = "awk"};
	struct optcb cb = {awk_opt, script_operand, &st};
	size_t first = script_args(c, l, "FvfeEil",
				   L("field-separator", "assign", "file",
				     "source", "exec", "include", "load"),
				   &cb);
	unsigned r;

	if (c->err)
		goto out;
	for (size_t i = first; i < st.n_ops; i++)
		if (strcmp(st.ops[i], "-") != 0 && !is_assignment(st.ops[i]))
			check_path(c, l->cwd, st.ops[i], PM_READ, "awk");
	if (st.from_file) {
		cmd_ask(c, "ask.awk.file",
			"awk reads its program from a file "
			"spd cannot vouch for");
		goto out;
	}
	if (st.unsafe_opt)
		cmd_ask(c, "ask.awk.option",
			"awk %s loads code or writes files", st.unsafe_name);
	r = st.script ? policy_awk_scan(st.script) : 0;
	if (st.sandbox)
		r &= ~(unsigned)(POLICY_SCRIPT_EXEC | POLICY_SCRIPT_WRITE);
	if (r & POLICY_SCRIPT_EXEC)
		cmd_ask(c, "ask.awk.exec",
			"the awk program runs commands or reads other files "
			"(system, getline)");
	else if (r & POLICY_SCRIPT_WRITE)
		cmd_ask(
		    c, "ask.awk.redirect",
		    "the awk program writes to files or pipes (print >, |)");
	else if (r & POLICY_SCRIPT_UNPARSED)
		cmd_ask(c, "ask.awk.unparsed",
			"the awk program could not be understood (@)");
	allow(c, "allow.cmd", "awk with a program that only prints");
out:
	free(st.script);
	free(st.ops);
}

static void run_dd(struct cls *c, struct lvl *l)
{
	for (size_t i = 1; i < l->argc; i++) {
		const char *a = l->argv[i];

		if (strncmp(a, "if=", 3) == 0)
			check_path(c, l->cwd, a + 3, PM_READ, "dd");
		else if (strncmp(a, "of=", 3) == 0)
			check_path(c, l->cwd, a + 3, PM_WRITE, "dd");
	}
	allow(c, "allow.write", "dd between files of the workspace");
}

/* ---------------------------------------------------------------- */
/* git                                                               */

static const char *const git_remote_cmds[] = {
    "push",	      "fetch",	    "pull",	   "clone",
    "remote",	      "submodule",  "ls-remote",   "send-email",
    "fetch-pack",     "send-pack",  "upload-pack", "receive-pack",
    "http-fetch",     "http-push",  "svn",	   "p4",
    "request-pull",   "credential", "daemon",	   "instaweb",
    "upload-archive", "imap-send",  "cvsimport",   "cvsexportcommit",
    "cvsserver",      "archimport", "quiltimport",
};
static const char *const git_destructive_cmds[] = {
    "clean", "filter-branch", "filter-repo", "gc",
    "prune", "replace",	      "fast-import",
};
static const char *const git_read_cmds[] = {
    "status",
    "log",
    "diff",
    "show",
    "blame",
    "annotate",
    "ls-files",
    "ls-tree",
    "rev-parse",
    "describe",
    "shortlog",
    "grep",
    "cat-file",
    "rev-list",
    "diff-tree",
    "diff-files",
    "diff-index",
    "merge-base",
    "name-rev",
    "for-each-ref",
    "show-ref",
    "whatchanged",
    "count-objects",
    "check-ignore",
    "check-attr",
    "var",
    "version",
    "help",
    "cherry",
    "show-branch",
    "range-diff",
    "verify-commit",
    "verify-tag",
    "check-ref-format",
    "ls-remote-local",
    "get-tar-commit-id",
    "column",
    "stripspace",
    "fast-export",
};
/* Commands that move the checkout or rewrite refs: refused in in-place
 * mode, where they would act on the operator's own checkout. */
static const char *const git_inplace_cmds[] = {
    "checkout", "switch",	"reset",    "commit", "merge",
    "rebase",	"cherry-pick",	"revert",   "stash",  "branch",
    "tag",	"update-ref",	"worktree", "am",     "apply",
    "restore",	"symbolic-ref", "pull",	    "bisect", "notes",
};
static const char *const git_state_cmds[] = {
    "add",
    "commit",
    "checkout",
    "switch",
    "restore",
    "merge",
    "rebase",
    "cherry-pick",
    "revert",
    "stash",
    "branch",
    "tag",
    "mv",
    "rm",
    "am",
    "apply",
    "init",
    "worktree",
    "update-index",
    "update-ref",
    "symbolic-ref",
    "commit-tree",
    "hash-object",
    "read-tree",
    "write-tree",
    "mktag",
    "mktree",
    "bisect",
    "sparse-checkout",
    "maintenance",
    "rerere",
    "repack",
    "fsck",
    "mergetool",
    "difftool",
    "format-patch",
    "archive",
    "bundle",
    "reset",
    "pack-refs",
    "merge-file",
    "merge-tree",
    "unpack-objects",
    "index-pack",
    "pack-objects",
    "prune-packed",
    "multi-pack-index",
    "commit-graph",
    "citool",
    "gui",
    "gitk",
    "reflog",
    "config",
    "notes",
    "revert",
    "interpret-trailers",
};

/* Sub-command options that run programs or write files even in an
 * otherwise read-only command. */
static bool git_bad_subopt(const char *a)
{
	static const char *const bad[] = {
	    "--output",	  "--ext-diff",	   "--textconv",
	    "--exec",	  "--paginate",	   "--open-files-in-pager",
	    "--no-index", "--upload-pack", "--receive-pack",
	    "--tool",	  "--extcmd",	   "--run",
	    "--contents",
	};
	size_t n = strcspn(a, "=");

	if (a[0] != '-')
		return false;
	if (a[1] != '-')
		return a[1] == 'O' || (a[1] == 'x' && a[2] == '\0');
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		if (n > 2 && strncmp(a, bad[i], n) == 0)
			return true;
	return false;
}

/* "HEAD:.env", ":path", or a pathspec naming a secret file: the blob's
 * content is the secret's. */
static bool git_secret_arg(const char *a)
{
	const char *colon = strchr(a, ':');
	const char *path = colon ? colon + 1 : a;

	return *path && a[0] != '-' &&
	       protected_match(path) == PROTECTED_SECRET_FILE;
}

/*
 * git's global options before the command, from argv[1]: -C must stay in
 * the workspace (it becomes *cwd, owned when not l->cwd); options that
 * change git's configuration or repository are denied; others not on the
 * known list ask.  Stores the index of the command (or argc) in *ret_i.
 * Returns true when the call is decided (denied, or out of memory).
 */
static bool git_globals(struct cls *c, struct lvl *l, char **cwd, size_t *ret_i)
{
	static const char *const ok_global[] = {
	    "--no-pager",
	    "-P",
	    "--no-replace-objects",
	    "--literal-pathspecs",
	    "--glob-pathspecs",
	    "--noglob-pathspecs",
	    "--icase-pathspecs",
	    "--no-optional-locks",
	    "--no-lazy-fetch",
	    "--no-advice",
	    "--html-path",
	    "--man-path",
	    "--info-path",
	    "--version",
	    "--help",
	    "-v",
	    "-h",
	    "--exec-path",
	};
	size_t i = 1;

	for (; i < l->argc; i++) {
		const char *a = l->argv[i];

		if (a[0] != '-')
			break;
		if (strncmp(a, "-C", 2) == 0) {
			const char *dir = a[2]		    ? a + 2
					  : i + 1 < l->argc ? l->argv[++i]
							    : NULL;
			char *abs, *real = NULL;

			if (!dir)
				break;
			abs = absolutize(*cwd, dir);
			if (!abs || resolve_abs(c, abs, &real) == -ENOMEM) {
				free(abs);
				c->err = -ENOMEM;
				return true;
			}
			free(abs);
			if (!real || !inside_ws(c, real)) {
				deny(c, "deny.git.option",
				     "git -C %s works outside the workspace",
				     dir);
				free(real);
				return true;
			}
			if (*cwd != l->cwd)
				free(*cwd);
			*cwd = real;
			continue;
		}
		if (strncmp(a, "-c", 2) == 0 ||
		    strncmp(a, "--config-env", 12) == 0 ||
		    strncmp(a, "--exec-path=", 12) == 0 ||
		    strncmp(a, "--git-dir", 9) == 0 ||
		    strncmp(a, "--work-tree", 11) == 0 ||
		    strncmp(a, "--namespace", 11) == 0 ||
		    strncmp(a, "--super-prefix", 14) == 0 ||
		    strncmp(a, "--attr-source", 13) == 0) {
			deny(c, "deny.git.option",
			     "git %s changes git's configuration or repository "
			     "for this command",
			     a);
			return true;
		}
		if (strcmp(a, "-p") == 0 || strcmp(a, "--paginate") == 0) {
			cmd_ask(c, "ask.git.option", "git %s runs a pager", a);
			continue;
		}
		if (strcmp(a, "--bare") == 0 ||
		    strncmp(a, "--list-cmds", 11) == 0) {
			cmd_ask(c, "ask.git.option", "git %s", a);
			continue;
		}
		if (!IN(ok_global, a)) {
			cmd_ask(c, "ask.git.option",
				"git option %s is not on the known list", a);
			continue;
		}
	}
	*ret_i = i;
	return false;
}

/* git branch or tag from argv[i]: only lists (no operand to create, no
 * option that deletes, renames or moves)? */
static bool git_branch_tag_lists(const struct lvl *l, size_t i)
{
	bool list = false, operand = false, modify = false;

	for (size_t k = i + 1; k < l->argc; k++) {
		const char *a = l->argv[k];

		if (strcmp(a, "-l") == 0 || strcmp(a, "--list") == 0 ||
		    strcmp(a, "--show-current") == 0)
			list = true;
		else if (a[0] != '-')
			operand = true;
		else if (strcmp(a, "--contains") == 0 ||
			 strcmp(a, "--merged") == 0 ||
			 strcmp(a, "--no-merged") == 0 ||
			 strcmp(a, "--points-at") == 0 ||
			 strcmp(a, "--sort") == 0 || strcmp(a, "--format") == 0)
			k++;
		else if (strcmp(a, "-a") && strcmp(a, "-r") &&
			 strcmp(a, "-v") && strcmp(a, "-vv") &&
			 strcmp(a, "--all") && strcmp(a, "--remotes") &&
			 strcmp(a, "--verbose") && strncmp(a, "--sort=", 7) &&
			 strncmp(a, "--format=", 9) &&
			 strncmp(a, "--contains=", 11) &&
			 strncmp(a, "--merged=", 9) &&
			 strncmp(a, "--color", 7) &&
			 strncmp(a, "--no-color", 10) &&
			 strcmp(a, "--column") && strcmp(a, "--no-column") &&
			 strncmp(a, "-n", 2))
			modify = true;
	}
	return !modify && (list || !operand);
}

/* git config from argv[i]: a read (get, list, or one name) is allowed,
 * anything else denied.  Returns true when it denied the call. */
static bool git_config_denied(struct cls *c, const struct lvl *l, size_t i)
{
	size_t ops = 0;
	bool get = false, set = false;

	for (size_t k = i + 1; k < l->argc; k++) {
		const char *a = l->argv[k];

		if (strncmp(a, "--get", 5) == 0 || strcmp(a, "--list") == 0 ||
		    strcmp(a, "-l") == 0 || strcmp(a, "get") == 0 ||
		    strcmp(a, "list") == 0)
			get = true;
		else if (a[0] == '-' && strcmp(a, "--show-origin") &&
			 strcmp(a, "--show-scope") && strcmp(a, "-z") &&
			 strcmp(a, "--null") && strcmp(a, "--name-only") &&
			 strcmp(a, "--local") && strcmp(a, "--bool") &&
			 strcmp(a, "--int") && strncmp(a, "--type", 6))
			set = true;
		else if (a[0] != '-')
			ops++;
	}
	if (!set && (get || ops <= 1))
		return false;
	deny(c, "deny.git.config",
	     "git config would change git's configuration");
	return true;
}

static void run_git(struct cls *c, struct lvl *l)
{
	char *cwd = l->cwd;
	size_t i;
	const char *sub;

	if (git_globals(c, l, &cwd, &i))
		goto out;
	if (i >= l->argc) {
		allow(c, "allow.git.read", "git without a command only prints");
		goto out;
	}
	sub = l->argv[i];
	/* Every later argument: secret blobs and pathspecs. */
	for (size_t k = i + 1; k < l->argc; k++)
		if (git_secret_arg(l->argv[k]))
			deny(c, "deny.secret.read",
			     "git %s %s would show a secret-looking file", sub,
			     l->argv[k]);
	if (IN(git_remote_cmds, sub)) {
		deny(c, "deny.git.remote",
		     "git %s talks to a remote repository; spd never fetches "
		     "or pushes",
		     sub);
		goto out;
	}
	if (IN(git_destructive_cmds, sub)) {
		deny(c, "deny.git.destructive",
		     "git %s destroys history or untracked work", sub);
		goto out;
	}
	if (strcmp(sub, "reset") == 0)
		for (size_t k = i + 1; k < l->argc; k++)
			if (strcmp(l->argv[k], "--hard") == 0 ||
			    strcmp(l->argv[k], "--merge") == 0 ||
			    strcmp(l->argv[k], "--keep") == 0) {
				deny(c, "deny.git.destructive",
				     "git reset %s discards work", l->argv[k]);
				goto out;
			}
	if (strcmp(sub, "reflog") == 0 && i + 1 < l->argc &&
	    (strcmp(l->argv[i + 1], "expire") == 0 ||
	     strcmp(l->argv[i + 1], "delete") == 0)) {
		deny(c, "deny.git.destructive",
		     "git reflog %s destroys history", l->argv[i + 1]);
		goto out;
	}
	if (strcmp(sub, "notes") == 0) {
		const char *op = NULL;

		for (size_t k = i + 1; k < l->argc && !op; k++)
			if (l->argv[k][0] != '-')
				op = l->argv[k];
			else if (strncmp(l->argv[k], "--ref", 5) == 0 &&
				 !strchr(l->argv[k], '='))
				k++;
		if (op && strcmp(op, "list") != 0 && strcmp(op, "show") != 0 &&
		    strcmp(op, "get-ref") != 0) {
			deny(c, "deny.git.notes", "git notes %s writes notes",
			     op);
			goto out;
		}
		allow(c, "allow.git.read", "git notes only lists or shows");
		goto out;
	}
	/* Read forms of commands that can also change state. */
	bool read_form = false;

	if (IN(git_read_cmds, sub)) {
		read_form = true;
	} else if (strcmp(sub, "branch") == 0 || strcmp(sub, "tag") == 0) {
		read_form = git_branch_tag_lists(l, i);
	} else if (strcmp(sub, "stash") == 0 || strcmp(sub, "worktree") == 0) {
		read_form =
		    i + 1 < l->argc && (strcmp(l->argv[i + 1], "list") == 0 ||
					(strcmp(sub, "stash") == 0 &&
					 strcmp(l->argv[i + 1], "show") == 0));
	} else if (strcmp(sub, "config") == 0) {
		if (git_config_denied(c, l, i))
			goto out;
		read_form = true;
	}
	if (read_form) {
		for (size_t k = i + 1; k < l->argc; k++)
			if (git_bad_subopt(l->argv[k]))
				cmd_ask(c, "ask.git.option",
					"git %s %s runs a program or writes a "
					"file",
					sub, l->argv[k]);
		allow(c, "allow.git.read", "git %s only reads the repository",
		      sub);
		goto out;
	}
	if (c->ctx->in_place && IN(git_inplace_cmds, sub)) {
		deny(c, "deny.git.inplace",
		     "git %s would move the operator's own checkout (in-place "
		     "mode)",
		     sub);
		goto out;
	}
	if (IN(git_state_cmds, sub)) {
		cmd_ask(c, "ask.git.state", "git %s changes the repository",
			sub);
		goto out;
	}
	cmd_ask(c, "ask.git.unknown",
		"git %s is not a known git command (it may be an alias)", sub);
out:
	if (cwd != l->cwd)
		free(cwd);
}

/* ---------------------------------------------------------------- */
/* Programs by kind                                                  */

static const char *const priv_cmds[] = {"sudo",	   "su", "doas",   "pkexec",
					"runuser", "sg", "newgrp", "calife"};
static const char *const shell_cmds[] = {
    "sh",   "bash",  "zsh",  "dash",   "ksh",	  "mksh",  "fish", "csh",
    "tcsh", "ash",   "yash", "rbash",  "busybox", "eval",  "exec", "source",
    ".",    "pdksh", "oksh", "elvish", "nu",	  "xonsh",
};
static const char *const net_cmds[] = {
    "curl",	  "wget",	 "nc",		"ncat",	    "netcat",
    "socat",	  "ssh",	 "scp",		"sftp",	    "rsync",
    "ftp",	  "telnet",	 "aria2c",	"http",	    "https",
    "lftp",	  "ssh-keyscan", "ssh-copy-id", "sshpass",  "mosh",
    "dig",	  "nslookup",	 "host",	"whois",    "ping",
    "traceroute", "tftp",	 "httpie",	"xh",	    "gh",
    "glab",	  "openssl",	 "gcloud",	"aws",	    "az",
    "kubectl",	  "docker",	 "podman",	"wormhole",
};
/* Programs that run their arguments as a command but that spd does not
 * peel: their inner command's place in argv depends on more than simple
 * options. */
static const char *const runner_cmds[] = {
    "chrt",	   "taskset",	   "flock",
    "watch",	   "strace",	   "ltrace",
    "gdb",	   "lldb",	   "valgrind",
    "parallel",	   "unbuffer",	   "script",
    "chroot",	   "unshare",	   "nsenter",
    "firejail",	   "systemd-run",  "at",
    "batch",	   "entr",	   "fakeroot",
    "proot",	   "bwrap",	   "nsjail",
    "builtin",	   "caffeinate",   "sandbox-exec",
    "expect",	   "setpriv",	   "numactl",
    "cpulimit",	   "trickle",	   "torsocks",
    "proxychains", "proxychains4", "faketime",
    "catchsegv",   "rlwrap",	   "dbus-run-session",
    "xvfb-run",	   "run-parts",	   "start-stop-daemon",
    "daemonize",   "cgexec",	   "prlimit",
};

struct interp {
	const char *name;
	const char *inline_short; /* short flags taking inline code */
	const char *const *inline_long;
};

static const struct interp interps[] = {
    {"python", "c", NULL},
    {"pypy", "c", NULL},
    {"perl", "eE", NULL},
    {"ruby", "e", NULL},
    {"irb", "", NULL},
    {"node", "ep", L("eval", "print")},
    {"nodejs", "ep", L("eval", "print")},
    {"bun", "e", L("eval", "print")},
    {"deno", "", L("eval")},
    {"php", "rB", NULL},
    {"lua", "e", NULL},
    {"luajit", "e", NULL},
    {"Rscript", "e", NULL},
    {"R", "e", NULL},
    {"tclsh", "", NULL},
    {"wish", "", NULL},
    {"pwsh", "c", L("command", "Command", "c")},
    {"osascript", "e", NULL},
    {"guile", "c", NULL},
    {"racket", "e", L("eval")},
    {"julia", "eE", L("eval", "print")},
    {"scala", "e", NULL},
    {"jshell", "", NULL},
    {"gawk-inline", "", NULL},
};

static const struct interp *find_interp(const char *name)
{
	char base[NAME_MAX + 1];
	size_t n = strlen(name);

	/* python3.11, perl5.36, pypy3: the version does not matter. */
	while (n > 0 &&
	       (isdigit((unsigned char)name[n - 1]) || name[n - 1] == '.'))
		n--;
	if (n == 0 || n > NAME_MAX)
		return NULL;
	memcpy(base, name, n);
	base[n] = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(interps); i++)
		if (strcmp(interps[i].name, base) == 0)
			return &interps[i];
	return NULL;
}

static void run_interp(struct cls *c, struct lvl *l, const struct interp *ip)
{
	for (size_t i = 1; i < l->argc; i++) {
		const char *a = l->argv[i];

		if (a[0] != '-' || strcmp(a, "--") == 0)
			break;
		if (a[1] == '-' || (ip->inline_long && a[1] && a[2] &&
				    strcmp(ip->name, "pwsh") == 0)) {
			const char *name = a + (a[1] == '-' ? 2 : 1);
			size_t n = strcspn(name, "=");

			if (long_in(ip->inline_long, name, n)) {
				cmd_ask(c, "ask.interp.inline",
					"%s %s runs inline code", l->name, a);
				return;
			}
			continue;
		}
		for (const char *q = a + 1; *q; q++)
			if (strchr(ip->inline_short, *q)) {
				cmd_ask(c, "ask.interp.inline",
					"%s -%c runs inline code", l->name, *q);
				return;
			}
	}
	if (strcmp(ip->name, "deno") == 0 && l->argc > 1 &&
	    strcmp(l->argv[1], "eval") == 0) {
		cmd_ask(c, "ask.interp.inline", "deno eval runs inline code");
		return;
	}
	cmd_ask(c, "ask.interp", "%s runs a program spd cannot inspect",
		l->name);
}

/* ---------------------------------------------------------------- */
/* Environment                                                       */

static const char *const env_deny[] = {
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_EXEC_PATH",
    "GIT_PROXY_COMMAND",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_TEMPLATE_DIR",
    "LD_PRELOAD",
    "LD_AUDIT",
    "DYLD_INSERT_LIBRARIES",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
};
static const char *const env_ask[] = {
    "GIT_PAGER",
    "PAGER",
    "GIT_EXTERNAL_DIFF",
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
    "EDITOR",
    "VISUAL",
    "LD_LIBRARY_PATH",
    "BASH_ENV",
    "ENV",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PYTHONHOME",
    "PYTHONUSERBASE",
    "NODE_OPTIONS",
    "NODE_PATH",
    "PERL5OPT",
    "PERL5LIB",
    "PERLLIB",
    "RUBYOPT",
    "RUBYLIB",
    "LESSOPEN",
    "LESSCLOSE",
    "PROMPT_COMMAND",
    "SHELLOPTS",
    "BASHOPTS",
    "IFS",
    "PS4",
    "MANPAGER",
    "BROWSER",
    "DYLD_LIBRARY_PATH",
    "GCONV_PATH",
    "LOCPATH",
    "MALLOC_CONF",
    "GIT_TERMINAL_PROMPT",
    "ZDOTDIR",
    "CDPATH",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "CLASSPATH",
    "GEM_PATH",
    "GEM_HOME",
    "HOME",
    "XDG_CONFIG_HOME",
};

static void check_env_name(struct cls *c, const char *name, size_t n)
{
	char buf[128];

	if (n >= sizeof(buf)) {
		hard_ask(c, "ask.env",
			 "an environment variable with a very "
			 "long name");
		return;
	}
	memcpy(buf, name, n);
	buf[n] = '\0';
	if (IN(env_deny, buf) || strncmp(buf, "GIT_CONFIG", 10) == 0) {
		deny(c, "deny.env",
		     "%s changes which program, library or git repository is "
		     "used",
		     buf);
		return;
	}
	if (IN(env_ask, buf) || strncmp(buf, "GIT_TRACE", 9) == 0 ||
	    strncmp(buf, "LD_", 3) == 0 || strncmp(buf, "DYLD_", 5) == 0 ||
	    strncmp(buf, "BASH_FUNC_", 10) == 0)
		hard_ask(c, "ask.env", "%s makes the program run other code",
			 buf);
}

/* ---------------------------------------------------------------- */
/* Levels: one program, possibly wrapping another                     */

/* Classify argv[start..] as the command a wrapper runs. */
static void peel(struct cls *c, struct lvl *l, size_t start, char *cwd,
		 const char *path_env)
{
	struct lvl in = {
	    .argv = l->argv + start,
	    .argc = l->argc - start,
	    .cwd = cwd ? cwd : l->cwd,
	    .path_env = path_env ? path_env : l->path_env,
	    .depth = l->depth + 1,
	};

	if (start >= l->argc)
		return;
	classify_level(c, &in);
	free(in.exe);
}

/* Skip the options of a wrapper: shortv/longv as for walk_opts.  Returns
 * the index of the first operand. */
static size_t skip_wrapper_opts(const struct lvl *l, const char *shortv,
				const char *const *longv)
{
	size_t i = 1;

	while (i < l->argc) {
		const char *a = l->argv[i];

		if (strcmp(a, "--") == 0)
			return i + 1;
		if (a[0] != '-' || a[1] == '\0')
			return i;
		if (a[1] == '-') {
			const char *name = a + 2;
			size_t n = strcspn(name, "=");

			if (!name[n] && long_kind(longv, name, n))
				i++;
			i++;
			continue;
		}
		bool takes = false;

		for (const char *q = a + 1; *q; q++)
			if (short_kind(shortv, *q)) {
				takes = q[1] == '\0';
				break;
			}
		i += takes ? 2 : 1;
	}
	return i;
}

static void run_env(struct cls *c, struct lvl *l)
{
	size_t i = 1;
	char *cwd = NULL;
	const char *path_env = NULL;

	for (; i < l->argc; i++) {
		const char *a = l->argv[i];

		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		if (a[0] == '-' && a[1]) {
			const char *dir = NULL;

			if (strcmp(a, "-S") == 0 || strncmp(a, "-S", 2) == 0 ||
			    strncmp(a, "--split-string", 14) == 0 ||
			    (a[1] != '-' && strchr(a, 'S'))) {
				cmd_ask(c, "ask.shell",
					"env -S splits a string into a command "
					"like a shell");
				goto out;
			}
			if (strcmp(a, "-u") == 0 || strcmp(a, "--unset") == 0) {
				i++;
				continue;
			}
			if (strcmp(a, "-C") == 0 || strcmp(a, "--chdir") == 0)
				dir = i + 1 < l->argc ? l->argv[++i] : NULL;
			else if (strncmp(a, "--chdir=", 8) == 0)
				dir = a + 8;
			else if (strncmp(a, "-C", 2) == 0)
				dir = a + 2;
			if (dir) {
				char *abs = absolutize(cwd ? cwd : l->cwd, dir);
				char *real = NULL;

				if (!abs ||
				    resolve_abs(c, abs, &real) == -ENOMEM) {
					free(abs);
					c->err = -ENOMEM;
					goto out;
				}
				free(abs);
				if (!real || !inside_ws(c, real)) {
					deny(c, "deny.path.outside",
					     "env -C %s runs the command "
					     "outside "
					     "the workspace",
					     dir);
					free(real);
					goto out;
				}
				free(cwd);
				cwd = real;
			}
			continue;
		}
		const char *eq = strchr(a, '=');

		if (!eq)
			break;
		check_env_name(c, a, (size_t)(eq - a));
		if (strncmp(a, "PATH=", 5) == 0)
			path_env = eq + 1;
	}
	if (i >= l->argc) {
		allow(c, "allow.cmd", "env without a command only prints");
		goto out;
	}
	cmd_ask(c, "ask.wrapper", "env runs its arguments as a command");
	peel(c, l, i, cwd, path_env);
out:
	free(cwd);
}

static void run_wrapper(struct cls *c, struct lvl *l)
{
	const char *n = l->name;
	size_t i;

	if (strcmp(n, "timeout") == 0) {
		i = skip_wrapper_opts(l, "sk", L("signal", "kill-after"));
		i++; /* the duration */
	} else if (strcmp(n, "nice") == 0) {
		i = skip_wrapper_opts(l, "n", L("adjustment"));
	} else if (strcmp(n, "nohup") == 0 || strcmp(n, "setsid") == 0) {
		i = skip_wrapper_opts(l, "", NULL);
	} else if (strcmp(n, "command") == 0) {
		i = skip_wrapper_opts(l, "", NULL);
		for (size_t k = 1; k < i && k < l->argc; k++)
			if (strchr(l->argv[k], 'v') ||
			    strchr(l->argv[k], 'V')) {
				allow(c, "allow.cmd",
				      "command -v only looks "
				      "a name up");
				return;
			}
	} else if (strcmp(n, "stdbuf") == 0) {
		i = skip_wrapper_opts(l, "ioe", L("input", "output", "error"));
	} else if (strcmp(n, "ionice") == 0) {
		i = skip_wrapper_opts(
		    l, "cnpPu", L("class", "classdata", "pid", "pgid", "uid"));
	} else if (strcmp(n, "time") == 0) {
		for (i = 1; i < l->argc; i++) {
			const char *a = l->argv[i];

			if (strcmp(a, "-o") == 0 && i + 1 < l->argc)
				check_path(c, l->cwd, l->argv[++i], PM_WRITE,
					   "time");
			else if (strncmp(a, "--output=", 9) == 0)
				check_path(c, l->cwd, a + 9, PM_WRITE, "time");
			else if (strcmp(a, "-f") == 0 ||
				 strcmp(a, "--format") == 0)
				i++;
			else if (strcmp(a, "--") == 0) {
				i++;
				break;
			} else if (a[0] != '-')
				break;
		}
	} else { /* xargs */
		for (i = 1; i < l->argc; i++) {
			const char *a = l->argv[i];

			if (strcmp(a, "-a") == 0 && i + 1 < l->argc)
				check_path(c, l->cwd, l->argv[++i], PM_READ,
					   "xargs");
			else if (strncmp(a, "--arg-file=", 11) == 0)
				check_path(c, l->cwd, a + 11, PM_READ, "xargs");
			else if (strcmp(a, "-d") == 0 || strcmp(a, "-E") == 0 ||
				 strcmp(a, "-I") == 0 || strcmp(a, "-L") == 0 ||
				 strcmp(a, "-n") == 0 || strcmp(a, "-P") == 0 ||
				 strcmp(a, "-s") == 0)
				i++;
			else if (strcmp(a, "--") == 0) {
				i++;
				break;
			} else if (a[0] != '-')
				break;
		}
	}
	cmd_ask(c, "ask.wrapper", "%s runs its arguments as a command", n);
	if (i < l->argc)
		peel(c, l, i, NULL, NULL);
}

static const char *const wrapper_cmds[] = {
    "timeout", "nice",	"nohup", "command", "stdbuf",
    "setsid",  "xargs", "time",	 "ionice",
};

/* Does entry match l (argv prefix, or exact)?  loose: for deny and ask,
 * a program also matches by the basename of argv[0] wherever it was
 * found; for allow only a program known by name (or by path) does. */
static bool entry_match(struct cls *c, const struct lvl *l,
			const struct entry *e, bool exact, bool loose)
{
	const char *w0 = e->words[0];

	if (e->n > l->argc || (exact && e->n != l->argc))
		return false;
	for (size_t k = 1; k < e->n; k++)
		if (strcmp(e->words[k], l->argv[k]) != 0)
			return false;
	if (strchr(w0, '/')) {
		char *abs = absolutize(c->ws, w0), *real = NULL;
		bool ok;

		if (!abs || resolve_abs(c, abs, &real) < 0) {
			free(abs);
			return false;
		}
		ok = l->exe && strcmp(real, l->exe) == 0;
		free(abs);
		free(real);
		return ok || (loose && strcmp(w0, l->argv[0]) == 0);
	}
	if (l->where == EXE_TRUSTED && strcmp(l->name, w0) == 0)
		return true;
	if (loose) {
		const char *b = strrchr(l->argv[0], '/');

		return strcmp(b ? b + 1 : l->argv[0], w0) == 0;
	}
	return false;
}

static bool list_match(struct cls *c, const struct lvl *l,
		       enum policy_layer layer, enum policy_list list,
		       bool exact, bool loose)
{
	const struct elist *e;

	if (!c->conf)
		return false;
	e = &c->conf->lists[layer][list];
	for (size_t i = 0; i < e->n; i++)
		if (entry_match(c, l, &e->v[i], exact, loose))
			return true;
	return false;
}

/* Arguments of a program spd does not know: only what is certain is
 * refused (a secret-looking file named outright). */
static void scan_unknown_args(struct cls *c, const struct lvl *l)
{
	for (size_t i = 1; i < l->argc; i++) {
		const char *a = l->argv[i];
		const char *eq = a[0] == '-' ? strchr(a, '=') : NULL;
		const char *v = eq ? eq + 1 : a;

		if (*v && protected_match(v) == PROTECTED_SECRET_FILE)
			deny(c, "deny.secret.read",
			     "%s is given %s, which looks like a secret file",
			     l->argv[0], v);
	}
}

static void classify_level(struct cls *c, struct lvl *l)
{
	static const char *const layer_name[] = {"operator", "project"};
	const char *n;

	if (c->err || l->argc == 0)
		return;
	if (l->depth > POLICY_PEEL_MAX) {
		cmd_ask(c, "ask.wrapper",
			"more than %d wrappers inside each other",
			POLICY_PEEL_MAX);
		return;
	}
	ident(c, l);
	if (c->err)
		return;
	if (l->depth == 0 && l->exe && !(c->exe = strdup(l->exe))) {
		c->err = -ENOMEM;
		return;
	}
	for (int layer = 0; layer < 2; layer++) {
		if (list_match(c, l, layer, POLICY_LIST_DENY, false, true))
			deny(c,
			     layer ? "deny.conf.project" : "deny.conf.operator",
			     "the %s's configuration denies %s",
			     layer_name[layer], l->argv[0]);
		if (list_match(c, l, layer, POLICY_LIST_ASK, false, true))
			hard_ask(
			    c, layer ? "ask.conf.project" : "ask.conf.operator",
			    "the %s's configuration asks before %s",
			    layer_name[layer], l->argv[0]);
	}
	/* Privilege escalation is refused by name wherever the program
	 * sits: no copy of sudo is an ordinary program. */
	{
		const char *b = strrchr(l->argv[0], '/');

		if (IN(priv_cmds, b ? b + 1 : l->argv[0])) {
			deny(c, "deny.priv", "%s escalates privileges",
			     l->argv[0]);
			return;
		}
	}
	switch (l->where) {
	case EXE_NOTFOUND:
		scan_unknown_args(c, l);
		cmd_ask(c, "ask.exe.notfound",
			"%s is not an executable in PATH", l->argv[0]);
		return;
	case EXE_WORKSPACE:
		scan_unknown_args(c, l);
		cmd_ask(c, "ask.exe.workspace",
			"%s is a program from the workspace, which the agent "
			"can change",
			l->argv[0]);
		return;
	case EXE_UNTRUSTED:
		scan_unknown_args(c, l);
		cmd_ask(c, "ask.exe.untrusted",
			"%s is not in a system directory or the session's PATH",
			l->argv[0]);
		return;
	case EXE_TRUSTED:
		break;
	}
	n = l->name;
	const struct spec *s = find_spec(n);
	const struct interp *ip;

	if (s) {
		run_simple(c, l, s);
	} else if (strcmp(n, "find") == 0) {
		run_find(c, l);
	} else if (strcmp(n, "sed") == 0 || strcmp(n, "gsed") == 0) {
		run_sed(c, l);
	} else if (strcmp(n, "awk") == 0 || strcmp(n, "gawk") == 0 ||
		   strcmp(n, "mawk") == 0 || strcmp(n, "nawk") == 0 ||
		   strcmp(n, "original-awk") == 0) {
		run_awk(c, l);
	} else if (strcmp(n, "git") == 0) {
		run_git(c, l);
	} else if (strcmp(n, "dd") == 0) {
		run_dd(c, l);
	} else if (strcmp(n, "env") == 0) {
		run_env(c, l);
	} else if (IN(wrapper_cmds, n)) {
		run_wrapper(c, l);
	} else if (IN(priv_cmds, n)) {
		deny(c, "deny.priv", "%s escalates privileges", n);
	} else if (IN(shell_cmds, n)) {
		cmd_ask(c, "ask.shell",
			"%s is a shell: it runs whatever its arguments say", n);
	} else if (IN(net_cmds, n)) {
		scan_unknown_args(c, l);
		cmd_ask(c, "ask.net.tool", "%s is a network tool", n);
	} else if (IN(runner_cmds, n)) {
		cmd_ask(c, "ask.wrapper", "%s runs another program", n);
	} else if ((ip = find_interp(n))) {
		scan_unknown_args(c, l);
		run_interp(c, l, ip);
	} else {
		scan_unknown_args(c, l);
	}
}

/* ---------------------------------------------------------------- */
/* The entry point                                                   */

static bool bad_string(const char *s, size_t n, size_t max, const char **rule)
{
	if (n > max) {
		*rule = "bad.too-long";
		return true;
	}
	if (memchr(s, '\0', n)) {
		*rule = "bad.nul";
		return true;
	}
	if (!utf8_valid(s, n)) {
		*rule = "bad.utf8";
		return true;
	}
	return false;
}

/* NUL bytes, invalid UTF-8 and over-long input are refused before any
 * rule: a path with a NUL means one thing to the policy and another to
 * the kernel, and invalid UTF-8 cannot be shown to a person faithfully. */
static const char *validate(const struct policy_call *call)
{
	const char *rule = NULL;
	size_t total = 0;

	if (call->kind != POLICY_CALL_EXEC) {
		size_t n = call->path_len ? call->path_len
			   : call->path	  ? strlen(call->path)
					  : 0;

		if (n == 0)
			return "bad.empty";
		if (bad_string(call->path, n, POLICY_PATH_MAX - 1, &rule))
			return rule;
		return NULL;
	}
	if (call->argc == 0 || !call->argv || !call->argv[0] ||
	    !call->argv[0][0])
		return "bad.empty";
	if (call->argc > POLICY_ARGC_MAX || call->envc > POLICY_ENV_MAX)
		return "bad.too-long";
	for (size_t i = 0; i < call->argc; i++) {
		size_t n;

		if (!call->argv[i])
			return "bad.empty";
		n = call->argv_len ? call->argv_len[i] : strlen(call->argv[i]);
		if (bad_string(call->argv[i], n, POLICY_ARG_MAX, &rule))
			return rule;
		total += n + 1;
	}
	for (size_t i = 0; i < call->envc; i++) {
		size_t n = strlen(call->env[i]);

		if (bad_string(call->env[i], n, POLICY_ARG_MAX, &rule))
			return rule;
		if (!strchr(call->env[i], '=') || call->env[i][0] == '=')
			return "bad.env";
		total += n + 1;
	}
	if (total > POLICY_ARGV_BYTES_MAX)
		return "bad.too-long";
	if (call->cwd && bad_string(call->cwd, strlen(call->cwd),
				    POLICY_PATH_MAX - 1, &rule))
		return rule;
	return NULL;
}

static void set_result(struct policy_result *r, enum policy_decision d,
		       const char *rule, const char *reason)
{
	/* Not snprintf: this runs for every call. */
	size_t n = strlen(reason);

	if (n >= sizeof(r->reason))
		n = sizeof(r->reason) - 1;

	r->decision = d;
	r->rule = rule;
	memcpy(r->reason, reason, n);
	r->reason[n] = '\0';
}

static void classify_exec(struct cls *c, char *cwd)
{
	const struct policy_call *call = c->call;
	const char *path_env =
	    c->ctx->path_env ? c->ctx->path_env : POLICY_DEFAULT_PATH;
	struct lvl l = {
	    .argv = call->argv,
	    .argc = call->argc,
	    .cwd = cwd,
	    .depth = 0,
	};

	for (size_t i = 0; i < call->envc; i++) {
		const char *eq = strchr(call->env[i], '=');

		check_env_name(c, call->env[i], (size_t)(eq - call->env[i]));
		if (strncmp(call->env[i], "PATH=", 5) == 0)
			path_env = eq + 1;
	}
	l.path_env = path_env;
	classify_level(c, &l);
	if (!c->err && call->net == POLICY_NET_HOST &&
	    !list_match(c, &l, POLICY_LAYER_OPERATOR, POLICY_LIST_NETWORK,
			false, false))
		hard_ask(c, "ask.net.host",
			 "%s asks for the host network, which the operator has "
			 "not allowed for it",
			 call->argv[0]);
	/* Decide in the fixed order (policy.h). */
	if (c->deny.rule || c->hard_ask.rule)
		goto out;
	if (list_match(c, &l, POLICY_LAYER_OPERATOR, POLICY_LIST_ALLOW, false,
		       false) ||
	    list_match(c, &l, POLICY_LAYER_OPERATOR, POLICY_LIST_ALLOW_EXACT,
		       true, false) ||
	    list_match(c, &l, POLICY_LAYER_OPERATOR, POLICY_LIST_NETWORK, false,
		       false) ||
	    list_match(c, &l, POLICY_LAYER_OPERATOR, POLICY_LIST_CHECK, true,
		       false)) {
		c->allow_rule = NULL;
		allow(c, "allow.conf.operator",
		      "the operator's configuration allows this command");
		c->cmd_ask.rule = NULL;
		goto out;
	}
	if (c->cmd_ask.rule)
		goto out;
	if (c->allow_rule)
		goto out;
	if (list_match(c, &l, POLICY_LAYER_PROJECT, POLICY_LIST_CHECK, true,
		       false))
		allow(c, "allow.check", "this is one of the project's checks");
	else if (list_match(c, &l, POLICY_LAYER_PROJECT, POLICY_LIST_ALLOW,
			    false, false) ||
		 list_match(c, &l, POLICY_LAYER_PROJECT,
			    POLICY_LIST_ALLOW_EXACT, true, false))
		allow(c, "allow.conf.project",
		      "the project's configuration allows this command");
out:
	free(l.exe);
}

int policy_classify(const struct policy_conf *conf,
		    const struct policy_context *ctx,
		    const struct policy_call *call, struct policy_result *ret)
{
	struct cls c = {.conf = conf, .ctx = ctx, .call = call};
	struct policy_result r = {0};
	const char *bad;
	char *cwd = NULL;
	int err = 0;

	if (!ctx || !call || !ret || !ctx->workspace ||
	    ctx->workspace[0] != '/' ||
	    (call->kind != POLICY_CALL_EXEC && call->kind != POLICY_CALL_READ &&
	     call->kind != POLICY_CALL_WRITE))
		return -EINVAL;
	bad = validate(call);
	if (bad) {
		set_result(&r, POLICY_BAD_REQUEST, bad,
			   strcmp(bad, "bad.nul") == 0
			       ? "the call contains a NUL byte"
			   : strcmp(bad, "bad.utf8") == 0
			       ? "the call contains invalid UTF-8"
			   : strcmp(bad, "bad.too-long") == 0
			       ? "the call is over a size limit"
			   : strcmp(bad, "bad.env") == 0
			       ? "an environment entry is not NAME=value"
			       : "the call is empty");
		*ret = r;
		return 0;
	}
	c.ws = ctx->workspace;
	c.wslen = strlen(c.ws);
	while (c.wslen > 1 && c.ws[c.wslen - 1] == '/')
		c.wslen--;
	if (call->kind != POLICY_CALL_EXEC) {
		bool w = call->kind == POLICY_CALL_WRITE;
		char *abs = absolutize(c.ws, call->path);
		char *real = NULL;

		if (!abs) {
			err = -ENOMEM;
			goto out;
		}
		check_path(&c, c.ws, call->path, w ? PM_WRITE : PM_READ,
			   w ? "fs.write" : "fs.read");
		/* The file tools work only inside the workspace. */
		if (!c.err && c.n_paths > 0 && !c.deny.rule) {
			real = c.paths[c.n_paths - 1];
			char *lex = normalize(abs);

			if (!lex)
				c.err = -ENOMEM;
			else if (!inside_ws(&c, real) || !inside_ws(&c, lex))
				deny(&c, "deny.path.outside",
				     "%s is outside the workspace", call->path);
			free(lex);
		}
		free(abs);
		if (!c.err && !c.deny.rule && !c.hard_ask.rule)
			allow(&c, w ? "allow.write" : "allow.read",
			      w ? "an ordinary file inside the workspace"
				: "reading inside the workspace");
	} else {
		char *abs = absolutize(c.ws, call->cwd ? call->cwd : ".");

		if (!abs) {
			err = -ENOMEM;
			goto out;
		}
		err = resolve_abs(&c, abs, &cwd);
		free(abs);
		if (err == -ENOMEM)
			goto out;
		err = 0;
		if (!cwd || !inside_ws(&c, cwd))
			deny(&c, "deny.path.outside",
			     "the working directory is outside the workspace");
		else
			classify_exec(&c, cwd);
	}
	if (c.err) {
		err = c.err;
		goto out;
	}
	if (c.deny.rule)
		set_result(&r, POLICY_DENY, c.deny.rule, c.deny.reason);
	else if (c.hard_ask.rule)
		set_result(&r, POLICY_ASK, c.hard_ask.rule, c.hard_ask.reason);
	else if (c.cmd_ask.rule)
		set_result(&r, POLICY_ASK, c.cmd_ask.rule, c.cmd_ask.reason);
	else if (c.allow_rule)
		set_result(&r, POLICY_ALLOW, c.allow_rule, c.allow_reason);
	else
		set_result(&r, POLICY_ASK, "ask.unknown",
			   "the program is not on any list");
	r.exe = steal_ptr(c.exe);
	r.paths = steal_ptr(c.paths);
	r.n_paths = c.n_paths;
	c.n_paths = 0;
	*ret = r;
out:
	free(cwd);
	free(c.path_copy);
	free(c.exe);
	for (size_t i = 0; i < c.n_paths; i++)
		free(c.paths[i]);
	free(c.paths);
	return err;
}

void policy_result_free(struct policy_result *r)
{
	if (!r)
		return;
	free(r->exe);
	for (size_t i = 0; i < r->n_paths; i++)
		free(r->paths[i]);
	free(r->paths);
	memset(r, 0, sizeof(*r));
}

const char *policy_decision_name(enum policy_decision d)
{
	switch (d) {
	case POLICY_ALLOW:
		return "allow";
	case POLICY_ASK:
		return "ask";
	case POLICY_DENY:
		return "deny";
	case POLICY_BAD_REQUEST:
		return "bad-request";
	}
	return "deny";
}

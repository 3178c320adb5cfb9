/*
 * The policy's executables: which program argv[0] names, found along
 * PATH as execvp would, and where it lives (a trusted system directory,
 * the workspace, elsewhere), with a per-thread cache of what was found
 * for a PATH whose directories the sandbox cannot change.  Part of the
 * policy engine (policy_priv.h).
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/util.h"
#include "daemon/policy/policy.h"
#include "daemon/policy/policy_priv.h"

/* ---------------------------------------------------------------- */
/* Executables                                                       */

/* Directories whose programs are known by name wherever the session's
 * PATH points: root owns them, so "cat" there is cat. */
static const char *const system_dirs[] = {
    "/usr/local/sbin", "/usr/local/bin", "/usr/sbin",	      "/usr/bin",
    "/sbin",	       "/bin",		 "/opt/homebrew/bin",
};

_Static_assert(ARRAY_SIZE(system_dirs) == POLICY_SYSTEM_DIRS,
	       "POLICY_SYSTEM_DIRS counts system_dirs");

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
		if (tok[0] != '/' || pol_inside_ws(c, tok) ||
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
		found = pol_absolutize(l->cwd, dir);
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

void pol_ident(struct cls *c, struct lvl *l)
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
		found = pol_absolutize(l->cwd, a0);
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
	lex = pol_normalize(found);
	if (!lex || pol_resolve_abs(c, found, &real) == -ENOMEM) {
		c->err = -ENOMEM;
		goto out;
	}
	if (!real)
		goto out;
	ws_entry = pol_inside_ws(c, lex) || pol_inside_ws(c, real);
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

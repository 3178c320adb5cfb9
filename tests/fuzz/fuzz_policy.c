/*
 * Fuzz target for the policy classifier, the path resolver and the script
 * scanners.  Input: a first line of flags, then one argument per line
 * (embedded NUL bytes are kept and passed with their lengths).  Flags:
 * 'r' read / 'w' write (the first argument is the path), 'h' host
 * network, 'i' in-place, 'e' the arguments up to a line "--" are
 * environment entries, 'c' the next argument is the working directory.
 *
 * Checked for every input (a failure is an abort):
 *   - the classifier is deterministic: the same call twice, the same
 *     answer;
 *   - a file write it allows lands inside the workspace and on no
 *     protected path (judged by realpath(3) on the longest existing
 *     prefix, not by the classifier's own resolver);
 *   - the same bytes, read as a stream of choices, build calls whose
 *     nature is known by construction, and none is allowed: a write
 *     (fs.write, or a writing command: touch, cp -t, sort -o, uniq, dd,
 *     sed -i, ...) of a path outside the workspace or of a path made from
 *     an entry of protected.c's own table in random letter case, and a git
 *     command that talks to a remote (push, fetch, pull, clone, ls-remote,
 *     remote add, submodule update, ...) behind any global options
 *     (-c, -C, --git-dir, ...) and wrappers (env, timeout, nice, ...);
 *   - protected_match() finds every entry of its table in any letter
 *     case, under any directory.
 * The workspace is not under /tmp: the run has a private /tmp, so a
 * workspace there would hide every write that climbs out of it.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/policy/policy.h"
#include "daemon/policy/protected.h"

#define FUZZ_ARGS_MAX 64
/* A built path or argument: the longest a protected pattern gets after
 * its '*' are filled and a directory prefix is put in front, with room. */
#define GEN_PATH_MAX 512
/* Arguments of a built command: wrappers, git's global options and the
 * command's own, each bounded below. */
#define GEN_ARGS_MAX 48

static char base[256];
static char ws[300];
static char outside[300];

static void put(const char *rel)
{
	char p[512];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", ws, rel);
	f = fopen(p, "w");
	if (f) {
		fputs("x\n", f);
		fclose(f);
	}
}

static void sub(const char *rel)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", ws, rel);
	mkdir(p, 0700);
}

static void lnk(const char *target, const char *rel)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", ws, rel);
	if (symlink(target, p) < 0)
		return;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void cleanup(void)
{
	char cmd[400];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	if (base[0] == '/' && system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", base);
}

/*
 * The fixture lives under build-fuzz/ in the current directory (the
 * repository's root when tests/fuzz/run starts it), or under
 * $SPD_FUZZ_DIR: anywhere but /tmp, whose writes the oracle must let
 * through because every run has its own.
 */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir = getenv("SPD_FUZZ_DIR");
	char tmpl[300];
	char *real;

	if (!dir || !*dir) {
		dir = "build-fuzz";
		if (mkdir(dir, 0700) < 0 && errno != EEXIST)
			abort();
	}
	snprintf(tmpl, sizeof(tmpl), "%s/spd-fuzz-policy-XXXXXX", dir);
	if (!mkdtemp(tmpl))
		abort();
	real = realpath(tmpl, NULL);
	if (!real)
		abort();
	snprintf(base, sizeof(base), "%s", real);
	free(real);
	if (strncmp(base, "/tmp/", 5) == 0)
		fprintf(stderr,
			"fuzz_policy: %s is under /tmp: writes that "
			"climb out of the workspace into /tmp are not "
			"judged\n",
			base);
	atexit(cleanup);
	snprintf(ws, sizeof(ws), "%s/ws", base);
	snprintf(outside, sizeof(outside), "%s/outside", base);
	if (mkdir(ws, 0700) < 0 || mkdir(outside, 0700) < 0)
		abort();
	sub("src");
	sub(".github");
	sub(".git");
	sub("bin");
	sub("tests");
	sub("nested");
	sub("nested/deep");
	put("src/main.c");
	put(".env");
	put(".spd.conf");
	put("Makefile");
	put(".github/ci.yml");
	put(".git/config");
	put("tests/test_a.py");
	put("bin/cat");
	lnk(".github", "gh");
	lnk("/", "root");
	lnk("loop", "loop");
	lnk("../..", "src/up");
	lnk(outside, "out");
	return 0;
}

/* ---- the oracle: where a write lands, judged without the classifier */

/* The run's private areas (docs/sandbox.md): a write under /tmp, /var/tmp
 * or /dev leaves nothing on the host, so it is not judged. */
static bool private_area(const char *abs)
{
	static const char *const areas[] = {"/tmp", "/var/tmp", "/dev"};

	for (size_t i = 0; i < sizeof(areas) / sizeof(areas[0]); i++) {
		size_t n = strlen(areas[i]);

		if (strncmp(abs, areas[i], n) == 0 &&
		    (abs[n] == '\0' || abs[n] == '/'))
			return true;
	}
	return false;
}

/*
 * Where a write of path, relative to cwd_abs, lands: realpath(3) of each
 * existing prefix, the rest (which cannot exist) taken lexically.
 * Returns false when it cannot be judged: a symlink that does not
 * resolve (the loop, a dangling link) or a path too long.
 */
static bool oracle_resolve(const char *cwd_abs, const char *path,
			   char ret[PATH_MAX])
{
	char abs[2 * PATH_MAX], cur[PATH_MAX], cand[2 * PATH_MAX + 2];
	bool exists = true;
	char *save = NULL, *comp;

	if (snprintf(abs, sizeof(abs), "%s%s%s", path[0] == '/' ? "" : cwd_abs,
		     path[0] == '/' ? "" : "/", path) >= (int)sizeof(abs))
		return false;
	snprintf(cur, sizeof(cur), "/");
	for (comp = strtok_r(abs, "/", &save); comp;
	     comp = strtok_r(NULL, "/", &save)) {
		struct stat st;
		char *r;

		if (strcmp(comp, ".") == 0)
			continue;
		if (strcmp(comp, "..") == 0) {
			char *slash = strrchr(cur, '/');

			if (slash == cur)
				cur[1] = '\0';
			else if (slash)
				*slash = '\0';
			continue;
		}
		if (snprintf(cand, sizeof(cand), "%s%s%s", cur,
			     strcmp(cur, "/") ? "/" : "",
			     comp) >= (int)sizeof(cur))
			return false;
		if (!exists || lstat(cand, &st) < 0) {
			exists = false;
			memcpy(cur, cand, strlen(cand) + 1);
			continue;
		}
		r = realpath(cand, NULL);
		if (!r)
			return false;
		snprintf(cur, sizeof(cur), "%s", r);
		free(r);
	}
	memcpy(ret, cur, strlen(cur) + 1);
	return true;
}

/*
 * Whether writing path (relative to cwd_abs) is one the classifier must
 * never allow: it lands outside the workspace (not in a private area), or
 * on a path protected.c lists.  why receives the reason.
 */
static bool write_forbidden(const char *cwd_abs, const char *path, char *why,
			    size_t n)
{
	char real[PATH_MAX];
	size_t wl = strlen(ws);
	enum protected_class pc;

	if (!oracle_resolve(cwd_abs, path, real))
		return false;
	if (strncmp(real, ws, wl) != 0 ||
	    (real[wl] != '\0' && real[wl] != '/')) {
		if (private_area(real))
			return false;
		snprintf(why, n, "lands outside the workspace, at %s", real);
		return true;
	}
	if (real[wl] == '\0')
		return false;
	pc = protected_match(real + wl + 1);
	if (pc != PROTECTED_NONE) {
		snprintf(why, n, "lands on %s, protected (%s)", real + wl + 1,
			 protected_class_name(pc));
		return true;
	}
	return false;
}

/* ---- calls built from the input read as a stream of choices ---------- */

struct picker {
	const uint8_t *p;
	size_t n;
};

/* A choice among n (0 when the input is used up). */
static unsigned pick(struct picker *k, unsigned n)
{
	unsigned v;

	if (n <= 1 || k->n == 0)
		return 0;
	v = *k->p++;
	k->n--;
	return v % n;
}

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define V(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Characters that fill a pattern's '*' and '?' and make names: no '/',
 * so a filled component stays one component. */
static const char fill_chars[] = "abcXYZ019_-.";

static void put_fill(struct picker *k, char *out, size_t *o, size_t n,
		     unsigned len)
{
	for (unsigned i = 0; i < len && *o + 1 < n; i++)
		out[(*o)++] = fill_chars[pick(k, sizeof(fill_chars) - 1)];
	out[*o] = '\0';
}

/*
 * A path made from one entry of protected.c's own table: its '*' and '?'
 * filled, a directory entry given a file under it or not, put under a
 * directory, every letter in a random case.  *ret_plain is set when the
 * prefix is a plain directory (no "..", no symlink), so the path itself
 * must match the table.
 */
static void gen_protected(struct picker *k, char *out, size_t n,
			  bool *ret_plain)
{
	static const char *const prefixes[] = {
	    "", "./", "src/", "nested/deep/", "tests/", "src/../", "gh/../",
	};
	static const char *const under[] = {"", "x", "workflows/ci.yml",
					    "config", "hooks/pre-commit"};
	const struct protected_pattern *tab;
	size_t cnt = protected_patterns(&tab), o, start;
	unsigned pi = pick(k, NELEM(prefixes));
	const char *pat = tab[pick(k, (unsigned)cnt)].pattern;

	o = (size_t)snprintf(out, n, "%s", prefixes[pi]);
	start = o;
	for (const char *q = pat; *q && o + 1 < n; q++) {
		if (*q == '*')
			put_fill(k, out, &o, n, pick(k, 4));
		else if (*q == '?')
			put_fill(k, out, &o, n, 1);
		else
			out[o++] = *q;
	}
	out[o] = '\0';
	if (o > start && out[o - 1] == '/') {
		const char *u = under[pick(k, NELEM(under))];

		if (*u)
			snprintf(out + o, n - o, "%s", u);
		else
			out[o - 1] = '\0';
	}
	for (char *c = out + start; *c; c++)
		if (((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')) &&
		    pick(k, 2))
			*c ^= 0x20;
	/* A leading '-' would make it an option to the command, not a
	 * path. */
	if (out[0] == '-' && o + 3 < n) {
		memmove(out + 2, out, strlen(out) + 1);
		memcpy(out, "./", 2);
	}
	*ret_plain = pi < 5;
}

/* A path that climbs or points out of the workspace, or not quite. */
static void gen_outside(struct picker *k, char *out, size_t n)
{
	static const char *const prefixes[] = {
	    "@OUT/",	"../",	     "../../",	      "root/etc/", "root/",
	    "src/up/",	"gh/../../", "/etc/",	      "/usr/",	   "/",
	    "@WS/../",	"out/",	     "./src/../../",  "out",	   "src/up",
	    "@WS/src/", "/tmp/",     "nested/../../",
	};
	const char *pre = prefixes[pick(k, NELEM(prefixes))];
	size_t o;

	if (strncmp(pre, "@OUT", 4) == 0)
		o = (size_t)snprintf(out, n, "%s%s", outside, pre + 4);
	else if (strncmp(pre, "@WS", 3) == 0)
		o = (size_t)snprintf(out, n, "%s%s", ws, pre + 3);
	else
		o = (size_t)snprintf(out, n, "%s", pre);
	if (o < n && pre[strlen(pre) - 1] == '/')
		put_fill(k, out, &o, n, 1 + pick(k, 6));
}

/* A command that writes its P (the byte 0x01 marks where P goes). */
static const char *const *const writers[] = {
    V("touch", "\1"),
    V("touch", "--", "\1"),
    V("touch", "-d", "now", "\1"),
    V("rm", "-f", "\1"),
    V("rm", "-rf", "\1"),
    V("mkdir", "-p", "\1"),
    V("rmdir", "\1"),
    V("tee", "\1"),
    V("tee", "-a", "\1"),
    V("truncate", "-s", "0", "\1"),
    V("chmod", "644", "\1"),
    V("chmod", "-R", "u+w", "\1"),
    V("cp", "src/main.c", "\1"),
    V("cp", "-r", "src", "\1"),
    V("cp", "-t", "\1", "src/main.c"),
    V("cp", "--target-directory=\1", "src/main.c"),
    V("cp", "--target=\1", "src/main.c"),
    V("cp", "--t=\1", "src/main.c"),
    V("mv", "src/main.c", "\1"),
    V("mv", "-t", "\1", "src/main.c"),
    V("mv", "--targ=\1", "src/main.c"),
    V("ln", "-s", "x", "\1"),
    V("ln", "-sf", "src/main.c", "\1"),
    V("ln", "src/main.c", "\1"),
    V("ln", "-t", "\1", "src/main.c"),
    V("sort", "-o", "\1", "src/main.c"),
    V("sort", "-o\1", "src/main.c"),
    V("sort", "--output=\1", "src/main.c"),
    V("sort", "--out=\1", "src/main.c"),
    V("sort", "--output", "\1", "src/main.c"),
    V("sort", "-T", "\1", "src/main.c"),
    V("uniq", "src/main.c", "\1"),
    V("uniq", "-c", "src/main.c", "\1"),
    V("tree", "-o", "\1"),
    V("tree", "-o\1"),
    V("dd", "if=src/main.c", "of=\1"),
    V("sed", "-i", "s/a/b/", "\1"),
    V("sed", "-i.bak", "s/a/b/", "\1"),
    V("sed", "-n", "w \1", "src/main.c"),
    V("sed", "s/a/b/w \1", "src/main.c"),
    V("awk", "{ print > \"\1\" }", "src/main.c"),
    V("time", "-o", "\1", "true"),
};

/* Wrappers that run their arguments as a command (policy_level.c peels them). */
static const char *const *const wrappers[] = {
    V("env"),	       V("env", "A=1"),	 V("env", "--"),
    V("timeout", "5"), V("nice"),	 V("nice", "-n", "5"),
    V("nohup"),	       V("setsid"),	 V("stdbuf", "-oL"),
    V("command"),      V("time"),	 V("ionice", "-c", "3"),
    V("xargs"),	       V("xargs", "-0"),
};

/* git's options before the sub-command. */
static const char *const *const git_globals[] = {
    V("-c", "core.pager=cat"),
    V("-c", "alias.x=status"),
    V("-ccolor.ui=never"),
    V("-C", "src"),
    V("-C", "."),
    V("-Csrc"),
    V("--no-pager"),
    V("-P"),
    V("--git-dir=.git"),
    V("--work-tree=."),
    V("--bare"),
    V("-p"),
    V("--literal-pathspecs"),
    V("--no-optional-locks"),
    V("--exec-path=/usr/lib/git-core"),
    V("--namespace=x"),
    V("--config-env=core.pager=PAGER"),
};

/* git operations that talk to a remote repository. */
static const char *const *const git_remote_ops[] = {
    V("push"),
    V("push", "origin", "main"),
    V("push", "--force", "origin"),
    V("fetch"),
    V("fetch", "--all"),
    V("fetch", "--upload-pack=x", "origin"),
    V("pull"),
    V("pull", "--rebase"),
    V("clone", "https://example.org/x.git"),
    V("clone", "src", "dst"),
    V("ls-remote"),
    V("ls-remote", "origin"),
    V("remote", "add", "o", "https://example.org/x.git"),
    V("remote", "update"),
    V("remote", "set-url", "origin", "https://example.org/y.git"),
    V("remote", "prune", "origin"),
    V("remote", "show", "origin"),
    V("submodule", "update", "--init"),
    V("submodule", "update", "--remote"),
    V("submodule", "add", "https://example.org/x.git"),
    V("submodule", "sync"),
    V("fetch-pack", "https://example.org/x.git"),
    V("send-pack", "https://example.org/x.git"),
    V("archive", "--remote=https://example.org/x.git", "HEAD"),
    V("maintenance", "run", "--task=prefetch"),
    V("request-pull", "v1", "https://example.org/x.git"),
};

struct built {
	const char *argv[GEN_ARGS_MAX];
	char own[GEN_ARGS_MAX][GEN_PATH_MAX]; /* arguments made with P */
	size_t argc;
};

static void add(struct built *b, const char *a)
{
	if (b->argc < GEN_ARGS_MAX - 1)
		b->argv[b->argc++] = a;
}

/* Add a with every 0x01 replaced by p. */
static void add_with(struct built *b, const char *a, const char *p)
{
	char *d;
	size_t o = 0;

	if (!strchr(a, '\1')) {
		add(b, a);
		return;
	}
	if (b->argc >= GEN_ARGS_MAX - 1)
		return;
	d = b->own[b->argc];
	for (; *a && o + 1 < GEN_PATH_MAX; a++) {
		if (*a == '\1') {
			size_t l = strlen(p);

			if (o + l + 1 >= GEN_PATH_MAX)
				break;
			memcpy(d + o, p, l);
			o += l;
		} else {
			d[o++] = *a;
		}
	}
	d[o] = '\0';
	add(b, d);
}

static void add_wrappers(struct picker *k, struct built *b)
{
	unsigned nw = pick(k, 3) == 0 ? 1 + pick(k, 2) : 0;

	for (unsigned w = 0; w < nw; w++)
		for (const char *const *a = wrappers[pick(k, NELEM(wrappers))];
		     *a; a++)
			add(b, *a);
}

static void describe(const struct built *b, char *out, size_t n)
{
	size_t o = 0;

	out[0] = '\0';
	for (size_t i = 0; i < b->argc && o + 1 < n; i++)
		o += (size_t)snprintf(out + o, n - o, "%s'%s'", i ? " " : "",
				      b->argv[i]);
}

static void fail(const char *what, const char *call,
		 const struct policy_result *r, const char *why)
{
	fprintf(stderr,
		"PROPERTY FAILED: %s\n  call: %s\n  result: %s %s (%s)\n"
		"  why it must not be allowed: %s\n  workspace: %s\n",
		what, call, policy_decision_name(r->decision), r->rule,
		r->reason, why, ws);
	abort();
}

/* A write of a path outside the workspace or protected, as fs.write or
 * as a writing command: never allowed. */
static void check_built_write(struct picker *k)
{
	char path[GEN_PATH_MAX], why[PATH_MAX + 128], what[4096];
	char cwd_abs[PATH_MAX];
	struct policy_context ctx = {.workspace = ws};
	struct policy_call call = {.kind = POLICY_CALL_EXEC};
	struct policy_result r;
	struct built b = {.argc = 0};
	bool plain = false, in_src = false;
	enum protected_class pc;

	if (pick(k, 2)) {
		gen_protected(k, path, sizeof(path), &plain);
		pc = protected_match(path);
		if (plain && pc == PROTECTED_NONE) {
			fprintf(stderr,
				"PROPERTY FAILED: protected_match(\"%s\") is "
				"none, but the path is made from its table\n",
				path);
			abort();
		}
	} else {
		gen_outside(k, path, sizeof(path));
	}
	ctx.in_place = pick(k, 2);
	if (pick(k, 3) == 0) {
		/* As fs.write: the path is relative to the workspace. */
		call.kind = POLICY_CALL_WRITE;
		call.path = path;
		if (!write_forbidden(ws, path, why, sizeof(why)))
			return;
		if (policy_classify(NULL, &ctx, &call, &r) < 0)
			return;
		if (r.decision == POLICY_ALLOW) {
			snprintf(what, sizeof(what), "fs.write '%s'", path);
			fail("a forbidden file write was allowed", what, &r,
			     why);
		}
		policy_result_free(&r);
		return;
	}
	in_src = pick(k, 4) == 0;
	snprintf(cwd_abs, sizeof(cwd_abs), "%s%s", ws, in_src ? "/src" : "");
	if (!write_forbidden(cwd_abs, path, why, sizeof(why)))
		return;
	add_wrappers(k, &b);
	for (const char *const *a = writers[pick(k, NELEM(writers))]; *a; a++)
		add_with(&b, *a, path);
	b.argv[b.argc] = NULL;
	call.argv = b.argv;
	call.argc = b.argc;
	call.cwd = in_src ? "src" : NULL;
	if (policy_classify(NULL, &ctx, &call, &r) < 0)
		return;
	if (r.decision == POLICY_ALLOW) {
		describe(&b, what, sizeof(what));
		if (in_src)
			strncat(what, " (in src/)",
				sizeof(what) - strlen(what) - 1);
		fail("a command writing a forbidden path was allowed", what, &r,
		     why);
	}
	policy_result_free(&r);
}

/* A git command that talks to a remote, behind any global options and
 * wrappers: never allowed. */
static void check_built_git(struct picker *k)
{
	struct policy_context ctx = {.workspace = ws};
	struct policy_call call = {.kind = POLICY_CALL_EXEC};
	struct policy_result r;
	struct built b = {.argc = 0};
	char what[4096];
	unsigned ng = pick(k, 4);

	ctx.in_place = pick(k, 2);
	add_wrappers(k, &b);
	add(&b, pick(k, 4) == 0 ? "/usr/bin/git" : "git");
	for (unsigned g = 0; g < ng; g++)
		for (const char *const *a =
			 git_globals[pick(k, NELEM(git_globals))];
		     *a; a++)
			add(&b, *a);
	for (const char *const *a =
		 git_remote_ops[pick(k, NELEM(git_remote_ops))];
	     *a; a++)
		add(&b, *a);
	b.argv[b.argc] = NULL;
	call.argv = b.argv;
	call.argc = b.argc;
	if (policy_classify(NULL, &ctx, &call, &r) < 0)
		return;
	if (r.decision == POLICY_ALLOW) {
		describe(&b, what, sizeof(what));
		fail("a git remote operation was allowed", what, &r,
		     "it talks to a remote repository");
	}
	policy_result_free(&r);
}

static bool same(const struct policy_result *a, const struct policy_result *b)
{
	if (a->decision != b->decision || strcmp(a->rule, b->rule) != 0 ||
	    a->n_paths != b->n_paths)
		return false;
	if ((a->exe == NULL) != (b->exe == NULL) ||
	    (a->exe && strcmp(a->exe, b->exe) != 0))
		return false;
	for (size_t i = 0; i < a->n_paths; i++)
		if (strcmp(a->paths[i], b->paths[i]) != 0)
			return false;
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size + 1);
	const char *fields[FUZZ_ARGS_MAX];
	size_t lens[FUZZ_ARGS_MAX], n = 0;
	const char *flags = "";
	const char *argv[FUZZ_ARGS_MAX], *env[FUZZ_ARGS_MAX];
	size_t alen[FUZZ_ARGS_MAX], argc = 0, envc = 0, i = 0;
	struct policy_context ctx = {.workspace = ws};
	struct policy_call call = {.kind = POLICY_CALL_EXEC};
	struct policy_result r1, r2;
	char **words;
	int w;

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';

	/* The scanners and the word splitter see the raw text (up to the
	 * first NUL). */
	(void)policy_sed_scan(buf);
	(void)policy_awk_scan(buf);
	(void)protected_match(buf);
	(void)protected_is_test(buf);
	w = policy_split_words(buf, &words);
	if (w >= 0)
		policy_words_free(words);

	for (size_t s = 0; s <= size && n < FUZZ_ARGS_MAX;) {
		const char *e = memchr(buf + s, '\n', size - s);
		size_t l = e ? (size_t)(e - (buf + s)) : size - s;

		buf[s + l] = '\0';
		fields[n] = buf + s;
		lens[n] = l;
		n++;
		s += l + 1;
		if (!e)
			break;
	}
	if (n == 0)
		goto out;
	flags = fields[i++];
	if (strchr(flags, 'e'))
		for (; i < n && strcmp(fields[i], "--") != 0; i++)
			env[envc++] = fields[i];
	if (strchr(flags, 'e') && i < n)
		i++;
	if (strchr(flags, 'c') && i < n)
		call.cwd = fields[i++];
	for (; i < n; i++) {
		argv[argc] = fields[i];
		alen[argc] = lens[i];
		argc++;
	}
	if (strchr(flags, 'r') || strchr(flags, 'w')) {
		call.kind =
		    strchr(flags, 'w') ? POLICY_CALL_WRITE : POLICY_CALL_READ;
		call.path = argc ? argv[0] : "";
		call.path_len = argc ? alen[0] : 0;
	} else {
		call.argv = argv;
		call.argv_len = alen;
		call.argc = argc;
		call.env = env;
		call.envc = envc;
	}
	call.net = strchr(flags, 'h') ? POLICY_NET_HOST : POLICY_NET_NONE;
	ctx.in_place = strchr(flags, 'i') != NULL;
	if (policy_classify(NULL, &ctx, &call, &r1) < 0)
		goto out;
	if (policy_classify(NULL, &ctx, &call, &r2) < 0)
		abort();
	if (!same(&r1, &r2)) {
		fprintf(stderr, "different answers: %s %s / %s %s\n", r1.rule,
			policy_decision_name(r1.decision), r2.rule,
			policy_decision_name(r2.decision));
		abort();
	}
	/* A file write the classifier allows lands inside the workspace
	 * and on no protected path.  (fs calls are relative to the
	 * workspace; a path with a NUL byte is refused before any rule.) */
	if (r1.decision == POLICY_ALLOW && call.kind == POLICY_CALL_WRITE &&
	    call.cwd == NULL && strlen(call.path) == call.path_len) {
		char why[PATH_MAX + 128], what[GEN_PATH_MAX + 16];

		if (write_forbidden(ws, call.path, why, sizeof(why))) {
			snprintf(what, sizeof(what), "fs.write '%.*s'",
				 GEN_PATH_MAX - 16, call.path);
			fail("a forbidden file write was allowed", what, &r1,
			     why);
		}
	}
	policy_result_free(&r1);
	policy_result_free(&r2);
out:
	free(buf);
	/* The same bytes as a stream of choices: calls whose nature is
	 * known by construction. */
	{
		struct picker k = {data, size};

		if (pick(&k, 2))
			check_built_write(&k);
		else
			check_built_git(&k);
	}
	return 0;
}

/* The protected paths of a workspace: see protected.h. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strv.h"
#include "common/util.h"
#include "daemon/policy/protected.h"

/* A path has at most PATH_MAX (4096) bytes, so at most 2048 non-empty
 * components; a longer one is refused by the caller's length limit, and
 * here only its last components are looked at. */
#define PROTECTED_COMPONENTS_MAX 2048
/*
 * Most guarded roots one checkout yields (each pattern's canonical
 * spelling plus every entry that matches it in another case or through
 * a wildcard).  A checkout with more (thousands of *.mk files at the top)
 * is refused rather than guarded in part: the guard's scan after every
 * command must stay cheap, and leaving some out silently would not be a
 * guard.
 */
#define PROTECTED_ROOTS_MAX 4096

/*
 * The order inside each class does not matter; the order of classes does
 * not either (protected_match picks the lowest class number).  The build
 * and CI lists follow the issue; they guard what decides whether the
 * project's checks pass, so an agent cannot make a red build green by
 * editing the judge.
 */
static const struct protected_pattern protected_table[] = {
    /* Secret-looking files: reading one is as bad as writing it. */
    {".env", PROTECTED_SECRET_FILE},
    {".env.*", PROTECTED_SECRET_FILE},
    {"*.env", PROTECTED_SECRET_FILE},
    {"*.pem", PROTECTED_SECRET_FILE},
    {"*.key", PROTECTED_SECRET_FILE},
    {"*.p12", PROTECTED_SECRET_FILE},
    {"*.pfx", PROTECTED_SECRET_FILE},
    {"*.jks", PROTECTED_SECRET_FILE},
    {"*.keystore", PROTECTED_SECRET_FILE},
    {"*.ppk", PROTECTED_SECRET_FILE},
    {"id_rsa*", PROTECTED_SECRET_FILE},
    {"id_dsa*", PROTECTED_SECRET_FILE},
    {"id_ecdsa*", PROTECTED_SECRET_FILE},
    {"id_ed25519*", PROTECTED_SECRET_FILE},
    {".ssh/", PROTECTED_SECRET_FILE},
    {".netrc", PROTECTED_SECRET_FILE},
    {"_netrc", PROTECTED_SECRET_FILE},
    {".npmrc", PROTECTED_SECRET_FILE},
    {".pypirc", PROTECTED_SECRET_FILE},
    {".pgpass", PROTECTED_SECRET_FILE},
    {".git-credentials", PROTECTED_SECRET_FILE},
    {".htpasswd", PROTECTED_SECRET_FILE},
    {".aws/", PROTECTED_SECRET_FILE},
    {".gnupg/", PROTECTED_SECRET_FILE},
    {".docker/config.json", PROTECTED_SECRET_FILE},
    {".kube/config", PROTECTED_SECRET_FILE},
    /* Git's own state: config, hooks and refs steer what git runs. */
    {".git/", PROTECTED_GIT},
    {".gitmodules", PROTECTED_GIT},
    /* Attributes pick the filter, diff and merge drivers git runs on
     * checkout, add and diff. */
    {".gitattributes", PROTECTED_GIT},
    /* The project's policy. */
    {".spd.conf", PROTECTED_PROJECT_CONF},
    /* CI configuration. */
    {".github/", PROTECTED_CI},
    {".gitlab-ci.yml", PROTECTED_CI},
    {".gitlab/", PROTECTED_CI},
    {".ci/", PROTECTED_CI},
    {".circleci/", PROTECTED_CI},
    {".buildkite/", PROTECTED_CI},
    {".woodpecker/", PROTECTED_CI},
    {".woodpecker.yml", PROTECTED_CI},
    {".drone.yml", PROTECTED_CI},
    {".travis.yml", PROTECTED_CI},
    {"azure-pipelines.yml", PROTECTED_CI},
    {"bitbucket-pipelines.yml", PROTECTED_CI},
    {"Jenkinsfile", PROTECTED_CI},
    /* Agent configuration: an agent that edits it grants itself more. */
    {".claude/", PROTECTED_AGENT_CONF},
    {".agents/", PROTECTED_AGENT_CONF},
    {".codex/", PROTECTED_AGENT_CONF},
    {".gemini/", PROTECTED_AGENT_CONF},
    {".opencode/", PROTECTED_AGENT_CONF},
    {".cursor/", PROTECTED_AGENT_CONF},
    {".kiro/", PROTECTED_AGENT_CONF},
    {".vscode/", PROTECTED_AGENT_CONF},
    {".mcp.json", PROTECTED_AGENT_CONF},
    {"opencode.json", PROTECTED_AGENT_CONF},
    {".aider.conf.yml", PROTECTED_AGENT_CONF},
    {".continue/", PROTECTED_AGENT_CONF},
    {".windsurf/", PROTECTED_AGENT_CONF},
    {".roo/", PROTECTED_AGENT_CONF},
    {".zed/", PROTECTED_AGENT_CONF},
    /* Editors that run a project's own startup file (exrc). */
    {".nvim.lua", PROTECTED_AGENT_CONF},
    {".nvimrc", PROTECTED_AGENT_CONF},
    {".exrc", PROTECTED_AGENT_CONF},
    /* Test-runner and build configuration. */
    {"pytest.ini", PROTECTED_BUILD_CONF},
    {"tox.ini", PROTECTED_BUILD_CONF},
    {"noxfile.py", PROTECTED_BUILD_CONF},
    {"conftest.py", PROTECTED_BUILD_CONF},
    {"jest.config.*", PROTECTED_BUILD_CONF},
    {"vitest.config.*", PROTECTED_BUILD_CONF},
    {"vitest.workspace.*", PROTECTED_BUILD_CONF},
    {".mocharc*", PROTECTED_BUILD_CONF},
    {"karma.conf.*", PROTECTED_BUILD_CONF},
    {"playwright.config.*", PROTECTED_BUILD_CONF},
    {".cargo/config*", PROTECTED_BUILD_CONF},
    {".config/nextest.toml", PROTECTED_BUILD_CONF},
    {"deny.toml", PROTECTED_BUILD_CONF},
    {"justfile", PROTECTED_BUILD_CONF},
    {".justfile", PROTECTED_BUILD_CONF},
    {"Makefile", PROTECTED_BUILD_CONF},
    {"GNUmakefile", PROTECTED_BUILD_CONF},
    /* Build inputs: what the operator's next build runs on the host,
     * outside any sandbox.  Names that are also common output
     * directories ("BUILD", "WORKSPACE" of Bazel) are left out: the
     * guard would hash a build tree that every build changes; so are
     * generated files a sandboxed build rewrites (configure,
     * Makefile.in), whose sources (configure.ac, Makefile.am) are here. */
    {"*.mk", PROTECTED_BUILD_CONF},
    {"*.mak", PROTECTED_BUILD_CONF},
    {"Makefile.am", PROTECTED_BUILD_CONF},
    {"configure.ac", PROTECTED_BUILD_CONF},
    {"autogen.sh", PROTECTED_BUILD_CONF},
    {"CMakeLists.txt", PROTECTED_BUILD_CONF},
    {"*.cmake", PROTECTED_BUILD_CONF},
    {"CMakePresets.json", PROTECTED_BUILD_CONF},
    {"CMakeUserPresets.json", PROTECTED_BUILD_CONF},
    {"meson.build", PROTECTED_BUILD_CONF},
    {"meson_options.txt", PROTECTED_BUILD_CONF},
    {"meson.options", PROTECTED_BUILD_CONF},
    {"build.rs", PROTECTED_BUILD_CONF},
    {"Rakefile", PROTECTED_BUILD_CONF},
    {"*.rake", PROTECTED_BUILD_CONF},
    {"Taskfile*.yml", PROTECTED_BUILD_CONF},
    {"Taskfile*.yaml", PROTECTED_BUILD_CONF},
    {"BUILD.bazel", PROTECTED_BUILD_CONF},
    {"WORKSPACE.bazel", PROTECTED_BUILD_CONF},
    {"MODULE.bazel", PROTECTED_BUILD_CONF},
    {"*.bzl", PROTECTED_BUILD_CONF},
    {".bazelrc", PROTECTED_BUILD_CONF},
    {"build.zig", PROTECTED_BUILD_CONF},
    {"SConstruct", PROTECTED_BUILD_CONF},
    {"SConscript", PROTECTED_BUILD_CONF},
    {"build.sbt", PROTECTED_BUILD_CONF},
    {"magefile.go", PROTECTED_BUILD_CONF},
    {"Earthfile", PROTECTED_BUILD_CONF},
    {"Tiltfile", PROTECTED_BUILD_CONF},
    {"Vagrantfile", PROTECTED_BUILD_CONF},
    {"gradlew", PROTECTED_BUILD_CONF},
    {"gradlew.bat", PROTECTED_BUILD_CONF},
    {"gradle/wrapper/", PROTECTED_BUILD_CONF},
    {"gradle.properties", PROTECTED_BUILD_CONF},
    {"mvnw", PROTECTED_BUILD_CONF},
    {"mvnw.cmd", PROTECTED_BUILD_CONF},
    {".mvn/", PROTECTED_BUILD_CONF},
    /* Git hook runners: their configuration is a command line run by
     * the operator's next commit or push. */
    {".pre-commit-config.yaml", PROTECTED_HOST_EXEC},
    {".husky/", PROTECTED_HOST_EXEC},
    {"lefthook*.yml", PROTECTED_HOST_EXEC},
    {"lefthook*.yaml", PROTECTED_HOST_EXEC},
    {".lefthook*.yml", PROTECTED_HOST_EXEC},
    {".lefthook*.yaml", PROTECTED_HOST_EXEC},
    {".lefthook/", PROTECTED_HOST_EXEC},
    {".overcommit.yml", PROTECTED_HOST_EXEC},
    {".simple-git-hooks*", PROTECTED_HOST_EXEC},
    {"simple-git-hooks.*", PROTECTED_HOST_EXEC},
    {".githooks/", PROTECTED_HOST_EXEC},
    {".git-hooks/", PROTECTED_HOST_EXEC},
    /* Package-manager configuration that names a program to run
     * (yarnPath, pnpmfile hooks, a pip or bundler index serving code). */
    {".yarnrc", PROTECTED_HOST_EXEC},
    {".yarnrc.yml", PROTECTED_HOST_EXEC},
    {".yarn/releases/", PROTECTED_HOST_EXEC},
    {".yarn/plugins/", PROTECTED_HOST_EXEC},
    {".pnpmfile.*", PROTECTED_HOST_EXEC},
    {"bunfig.toml", PROTECTED_HOST_EXEC},
    {".bunfig.toml", PROTECTED_HOST_EXEC},
    {"pip.conf", PROTECTED_HOST_EXEC},
    {"pip.ini", PROTECTED_HOST_EXEC},
    {"uv.toml", PROTECTED_HOST_EXEC},
    {"poetry.toml", PROTECTED_HOST_EXEC},
    {".condarc", PROTECTED_HOST_EXEC},
    {".bundle/config", PROTECTED_HOST_EXEC},
    /* Environment loaders that run a project's shell code when the
     * operator enters the directory. */
    {".envrc", PROTECTED_HOST_EXEC},
    {".rvmrc", PROTECTED_HOST_EXEC},
    {"mise*.toml", PROTECTED_HOST_EXEC},
    {".mise*.toml", PROTECTED_HOST_EXEC},
    {".mise/", PROTECTED_HOST_EXEC},
    {"shell.nix", PROTECTED_HOST_EXEC},
    {"devbox.json", PROTECTED_HOST_EXEC},
    /* Devcontainers: initializeCommand runs on the host. */
    {".devcontainer/", PROTECTED_HOST_EXEC},
    {".devcontainer.json", PROTECTED_HOST_EXEC},
    /* Agent context files: instructions the next agent will obey. */
    {"AGENTS.md", PROTECTED_AGENT_CONTEXT},
    {"AGENT.md", PROTECTED_AGENT_CONTEXT},
    {"CLAUDE.md", PROTECTED_AGENT_CONTEXT},
    {"CLAUDE.local.md", PROTECTED_AGENT_CONTEXT},
    {"GEMINI.md", PROTECTED_AGENT_CONTEXT},
    {".cursorrules", PROTECTED_AGENT_CONTEXT},
    {".windsurfrules", PROTECTED_AGENT_CONTEXT},
    /* Dependency manifests and lock files: a new dependency is new code
	 * from the network, run at the next build. */
    {"package.json", PROTECTED_MANIFEST},
    {"package-lock.json", PROTECTED_MANIFEST},
    {"npm-shrinkwrap.json", PROTECTED_MANIFEST},
    {"yarn.lock", PROTECTED_MANIFEST},
    {"pnpm-lock.yaml", PROTECTED_MANIFEST},
    {"pnpm-workspace.yaml", PROTECTED_MANIFEST},
    {"bun.lock", PROTECTED_MANIFEST},
    {"bun.lockb", PROTECTED_MANIFEST},
    {"deno.json", PROTECTED_MANIFEST},
    {"deno.lock", PROTECTED_MANIFEST},
    {"Cargo.toml", PROTECTED_MANIFEST},
    {"Cargo.lock", PROTECTED_MANIFEST},
    {"go.mod", PROTECTED_MANIFEST},
    {"go.sum", PROTECTED_MANIFEST},
    {"go.work", PROTECTED_MANIFEST},
    {"pyproject.toml", PROTECTED_MANIFEST},
    {"poetry.lock", PROTECTED_MANIFEST},
    {"uv.lock", PROTECTED_MANIFEST},
    {"Pipfile", PROTECTED_MANIFEST},
    {"Pipfile.lock", PROTECTED_MANIFEST},
    {"requirements*.txt", PROTECTED_MANIFEST},
    {"constraints*.txt", PROTECTED_MANIFEST},
    {"setup.py", PROTECTED_MANIFEST},
    {"setup.cfg", PROTECTED_MANIFEST},
    {"Gemfile", PROTECTED_MANIFEST},
    {"Gemfile.lock", PROTECTED_MANIFEST},
    {"*.gemspec", PROTECTED_MANIFEST},
    {"composer.json", PROTECTED_MANIFEST},
    {"composer.lock", PROTECTED_MANIFEST},
    {"pom.xml", PROTECTED_MANIFEST},
    {"build.gradle*", PROTECTED_MANIFEST},
    {"settings.gradle*", PROTECTED_MANIFEST},
    {"gradle.lockfile", PROTECTED_MANIFEST},
    {"mix.exs", PROTECTED_MANIFEST},
    {"mix.lock", PROTECTED_MANIFEST},
    {"Package.swift", PROTECTED_MANIFEST},
    {"Package.resolved", PROTECTED_MANIFEST},
    {"pubspec.yaml", PROTECTED_MANIFEST},
    {"pubspec.lock", PROTECTED_MANIFEST},
    {"flake.nix", PROTECTED_MANIFEST},
    {"flake.lock", PROTECTED_MANIFEST},
    {"vcpkg.json", PROTECTED_MANIFEST},
    {"conanfile.*", PROTECTED_MANIFEST},
};

static const char *const class_names[PROTECTED__COUNT] = {
    [PROTECTED_NONE] = "none",
    [PROTECTED_SECRET_FILE] = "secret-file",
    [PROTECTED_GIT] = "git",
    [PROTECTED_PROJECT_CONF] = "project-conf",
    [PROTECTED_CI] = "ci",
    [PROTECTED_AGENT_CONF] = "agent-conf",
    [PROTECTED_BUILD_CONF] = "build-conf",
    [PROTECTED_CONFIGURED] = "protected",
    [PROTECTED_HOST_EXEC] = "host-exec",
    [PROTECTED_AGENT_CONTEXT] = "agent-context",
    [PROTECTED_MANIFEST] = "manifest",
};

struct span {
	const char *s;
	size_t n;
};

static int lower(int c)
{
	return (c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c;
}

/* Glob of one component against one component, ASCII case-insensitive.
 * Iterative with one back-track point: linear for patterns with a single
 * '*', and never worse than quadratic. */
static bool glob_component(const char *p, size_t pn, const char *s, size_t sn)
{
	size_t pi = 0, si = 0, star_p = SIZE_MAX, star_s = 0;

	while (si < sn) {
		if (pi < pn && p[pi] == '*') {
			star_p = ++pi;
			star_s = si;
		} else if (pi < pn &&
			   (p[pi] == '?' || lower(p[pi]) == lower(s[si]))) {
			pi++;
			si++;
		} else if (star_p != SIZE_MAX) {
			pi = star_p;
			si = ++star_s;
		} else {
			return false;
		}
	}
	while (pi < pn && p[pi] == '*')
		pi++;
	return pi == pn;
}

/* Split path into its non-empty components other than ".", keeping the
 * last PROTECTED_COMPONENTS_MAX.  Returns the count. */
static size_t split(const char *path, struct span *out, size_t max)
{
	size_t n = 0;
	const char *p = path;

	while (*p) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		const char *e = strchrnul(p, '/');
		size_t len = (size_t)(e - p);

		if (!(len == 1 && p[0] == '.')) {
			if (n == max) {
				memmove(out, out + 1, (max - 1) * sizeof(*out));
				n--;
			}
			out[n].s = p;
			out[n].n = len;
			n++;
		}
		p = e;
	}
	return n;
}

/* A pattern split once into its components. */
#define PATTERN_COMPONENTS_MAX 8

struct compiled {
	struct span pc[PATTERN_COMPONENTS_MAX];
	size_t k;
	bool dir;
	/* The lower-cased first character of each component, or 0 when it
	 * is a wildcard: a one-byte test rejects most components. */
	char first[PATTERN_COMPONENTS_MAX];
	/* Likewise the last character ("*.pem" must end in 'm'): the
	 * wildcard-led patterns meet every file name, and the glob with its
	 * back-tracking was most of the matcher's time. */
	char last[PATTERN_COMPONENTS_MAX];
};

static void compile(const char *pattern, struct compiled *out)
{
	size_t pl = strlen(pattern);

	out->dir = pl > 0 && pattern[pl - 1] == '/';
	out->k = split(pattern, out->pc, PATTERN_COMPONENTS_MAX);
	for (size_t j = 0; j < out->k; j++)
		out->first[j] =
		    (out->pc[j].s[0] == '*' || out->pc[j].s[0] == '?')
			? 0
			: (char)lower(out->pc[j].s[0]);
	for (size_t j = 0; j < out->k; j++) {
		char l = out->pc[j].s[out->pc[j].n - 1];

		out->last[j] = l == '*' || l == '?' ? 0 : (char)lower(l);
	}
}

static bool comp_match(const struct compiled *p, size_t j, const struct span *c)
{
	if (p->first[j] && (c->n == 0 || lower(c->s[0]) != p->first[j]))
		return false;
	if (p->last[j] && (c->n == 0 || lower(c->s[c->n - 1]) != p->last[j]))
		return false;
	return glob_component(p->pc[j].s, p->pc[j].n, c->s, c->n);
}

static bool match_compiled(const struct compiled *p, const struct span *c,
			   size_t n)
{
	if (p->k == 0 || p->k > n)
		return false;
	if (!p->dir) {
		for (size_t j = p->k; j-- > 0;)
			if (!comp_match(p, j, &c[n - p->k + j]))
				return false;
		return true;
	}
	for (size_t start = 0; start + p->k <= n; start++) {
		size_t j = 0;

		while (j < p->k && comp_match(p, j, &c[start + j]))
			j++;
		if (j == p->k)
			return true;
	}
	return false;
}

static struct compiled compiled_table[ARRAY_SIZE(protected_table)];
/*
 * An index on the compiled table: the patterns whose last component
 * starts with a given (lower-case) byte, and those that start with a
 * wildcard (index 0).  A path component only meets the patterns of its
 * own first letter.  Lists hold table indexes in table order.
 */
static uint8_t bucket[256][ARRAY_SIZE(protected_table)];
static uint8_t bucket_n[256];
static pthread_once_t compiled_once = PTHREAD_ONCE_INIT;

static void compile_table(void)
{
	_Static_assert(ARRAY_SIZE(protected_table) < 256,
		       "table indexes are bytes");
	for (size_t i = 0; i < ARRAY_SIZE(protected_table); i++) {
		struct compiled *p = &compiled_table[i];
		unsigned char f;

		compile(protected_table[i].pattern, p);
		f = p->k ? (unsigned char)p->first[p->k - 1] : 0;
		/* A directory pattern may match any window, so it is filed
		 * under its first component instead of its last. */
		if (p->dir && p->k)
			f = (unsigned char)p->first[0];
		bucket[f][bucket_n[f]++] = (uint8_t)i;
	}
}

bool protected_pattern_match(const char *pattern, const char *path)
{
	static __thread struct span c[PROTECTED_COMPONENTS_MAX];
	size_t n = split(path, c, PROTECTED_COMPONENTS_MAX);
	struct compiled p;

	compile(pattern, &p);
	return match_compiled(&p, c, n);
}

enum protected_class protected_match(const char *relpath)
{
	static __thread struct span c[PROTECTED_COMPONENTS_MAX];
	size_t n = split(relpath, c, PROTECTED_COMPONENTS_MAX);
	enum protected_class best = PROTECTED_NONE;

	if (n == 0)
		return PROTECTED_NONE;
	pthread_once(&compiled_once, compile_table);
	/* Candidates: wildcard-led patterns, file patterns led by the last
	 * component's first letter, directory patterns led by any
	 * component's first letter.  Each list is scanned whole; a pattern
	 * seen twice just matches twice. */
	for (size_t j = 0; j <= n; j++) {
		unsigned char f = j == n ? 0 : (unsigned char)lower(c[j].s[0]);
		const uint8_t *b = bucket[f];

		for (size_t q = 0; q < bucket_n[f]; q++) {
			const struct compiled *p = &compiled_table[b[q]];
			enum protected_class cls = protected_table[b[q]].cls;

			if (best != PROTECTED_NONE && cls >= best)
				continue;
			if (f && !p->dir && j != n - 1)
				continue;
			if (match_compiled(p, c, n))
				best = cls;
		}
	}
	return best;
}

size_t protected_patterns(const struct protected_pattern **ret)
{
	*ret = protected_table;
	return ARRAY_SIZE(protected_table);
}

struct roots {
	char **v;
	size_t n;
};

static int roots_add(struct roots *r, const char *p)
{
	for (size_t i = 0; i < r->n; i++)
		if (strcmp(r->v[i], p) == 0)
			return 0;
	if (r->n + 1 >= PROTECTED_ROOTS_MAX)
		return -E2BIG;
	r->v[r->n] = strdup(p);
	if (!r->v[r->n])
		return -ENOMEM;
	r->n++;
	return 0;
}

static bool is_literal(const struct span *c)
{
	return !memchr(c->s, '*', c->n) && !memchr(c->s, '?', c->n);
}

/* prefix + "/" + name (prefix may be empty) into buf. */
static int rel_join(char *buf, const char *prefix, const char *name,
		    size_t name_n)
{
	int k = snprintf(buf, PATH_MAX, "%s%s%.*s", prefix, *prefix ? "/" : "",
			 (int)name_n, name);

	return k < 0 || k >= PATH_MAX ? -ENAMETOOLONG : 0;
}

/*
 * Expand components pc[j..k) of a pattern below prefix (relative to
 * workdir): every entry that matches in any letter case, and the
 * canonical spelling of a literal component even when it is absent (the
 * guard then notices it being created).
 */
static int expand(const char *workdir, const struct span *pc, size_t k,
		  size_t j, const char *prefix, struct roots *out)
{
	char dir[PATH_MAX], rel[PATH_MAX];
	struct dirent *de;
	DIR *d;
	int r = 0;

	if (is_literal(&pc[j])) {
		r = rel_join(rel, prefix, pc[j].s, pc[j].n);
		if (r == 0)
			r = j + 1 == k
				? roots_add(out, rel)
				: expand(workdir, pc, k, j + 1, rel, out);
		if (r < 0)
			return r;
	}
	if (rel_join(dir, workdir, prefix, strlen(prefix)) < 0)
		return -ENAMETOOLONG;
	d = opendir(dir);
	if (!d)
		return 0;
	while (r == 0 && (de = readdir(d))) {
		size_t n = strlen(de->d_name);

		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0 ||
		    !glob_component(pc[j].s, pc[j].n, de->d_name, n))
			continue;
		r = rel_join(rel, prefix, de->d_name, n);
		if (r == 0)
			r = j + 1 == k
				? roots_add(out, rel)
				: expand(workdir, pc, k, j + 1, rel, out);
	}
	closedir(d);
	return r;
}

int protected_roots(const char *workdir, char ***ret)
{
	struct roots out = {0};
	int r = 0;

	out.v = calloc(PROTECTED_ROOTS_MAX, sizeof(char *));
	if (!out.v)
		return -ENOMEM;
	for (size_t i = 0; i < ARRAY_SIZE(protected_table) && r == 0; i++) {
		struct span pc[PATTERN_COMPONENTS_MAX];
		size_t k;

		if (!protected_class_guarded(protected_table[i].cls))
			continue;
		k = split(protected_table[i].pattern, pc,
			  PATTERN_COMPONENTS_MAX);
		/* .git is the git set's, guarded from the common dir. */
		if (k == 0 ||
		    (k == 1 && pc[0].n == 4 && memcmp(pc[0].s, ".git", 4) == 0))
			continue;
		r = expand(workdir, pc, k, 0, "", &out);
	}
	if (r < 0) {
		strv_free_array(out.v);
		return r;
	}
	*ret = out.v;
	return 0;
}

bool protected_class_guarded(enum protected_class cls)
{
	switch (cls) {
	case PROTECTED_GIT:
	case PROTECTED_PROJECT_CONF:
	case PROTECTED_CI:
	case PROTECTED_AGENT_CONF:
	case PROTECTED_BUILD_CONF:
	case PROTECTED_CONFIGURED:
	case PROTECTED_HOST_EXEC:
		return true;
	default:
		return false;
	}
}

const char *protected_class_name(enum protected_class cls)
{
	if ((unsigned)cls >= PROTECTED__COUNT)
		return "none";
	return class_names[cls];
}

static bool has_suffix_ci(const char *s, size_t n, const char *suf)
{
	size_t m = strlen(suf);

	return n >= m && strncasecmp(s + n - m, suf, m) == 0;
}

static bool has_prefix_ci(const char *s, size_t n, const char *pre)
{
	size_t m = strlen(pre);

	return n >= m && strncasecmp(s, pre, m) == 0;
}

bool protected_is_test(const char *relpath)
{
	static const char *const test_dirs[] = {
	    "test", "tests", "spec", "specs", "__tests__", "testing", "t"};
	static __thread struct span c[PROTECTED_COMPONENTS_MAX];
	size_t n = split(relpath, c, PROTECTED_COMPONENTS_MAX);

	if (n == 0)
		return false;
	for (size_t i = 0; i + 1 < n; i++)
		for (size_t j = 0; j < ARRAY_SIZE(test_dirs); j++)
			if (c[i].n == strlen(test_dirs[j]) &&
			    strncasecmp(c[i].s, test_dirs[j], c[i].n) == 0)
				return true;

	const char *b = c[n - 1].s;
	size_t bn = c[n - 1].n;
	const char *dot = memrchr(b, '.', bn);
	size_t stem = dot ? (size_t)(dot - b) : bn;

	/* test_x.py, x_test.go, x.test.ts, x.spec.js, XTest.java, x_spec.rb */
	if (has_prefix_ci(b, stem, "test_") ||
	    has_suffix_ci(b, stem, "_test") ||
	    has_suffix_ci(b, stem, ".test") ||
	    has_suffix_ci(b, stem, ".spec") ||
	    has_suffix_ci(b, stem, "_spec") ||
	    has_suffix_ci(b, stem, "-test") || has_suffix_ci(b, stem, "-spec"))
		return true;
	return stem > 4 &&
	       (memcmp(b + stem - 4, "Test", 4) == 0 ||
		(stem > 5 && memcmp(b + stem - 5, "Tests", 5) == 0));
}

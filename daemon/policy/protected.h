/*
 * The protected paths of a workspace: the files an agent must not change
 * (the project's .spd.conf, CI and build configuration, agent
 * configuration, .git) or must not read at all (secret-looking files), and
 * the ones a person must approve (agent context files, manifests and
 * locks).  One list, shared by the policy (daemon/policy/policy_path.c) and the
 * sessions' integrity guard, so what the policy refuses to write is what
 * the guard re-hashes after every command.
 *
 * Matching is on the path relative to the workspace, component by
 * component, in any ASCII letter case: a case-insensitive file system
 * (macOS) opens .GitHub/workflows/x.yml as .github/workflows/x.yml, so
 * the spelling must not matter.
 */
#ifndef SPD_DAEMON_PROTECTED_H
#define SPD_DAEMON_PROTECTED_H

#include <stdbool.h>
#include <stddef.h>

enum protected_class {
	PROTECTED_NONE = 0,
	PROTECTED_SECRET_FILE, /* .env*, *.pem, id_rsa*: never read or written */
	PROTECTED_GIT,	       /* .git/, .gitmodules */
	PROTECTED_PROJECT_CONF, /* the project's .spd.conf */
	PROTECTED_CI,		/* .github/, .gitlab-ci.yml, .ci/, ... */
	PROTECTED_AGENT_CONF,	/* .claude/, .codex/, .mcp.json, ... */
	PROTECTED_BUILD_CONF,	/* Makefile, pytest.ini, jest configs, ... */
	PROTECTED_CONFIGURED,	/* a "protected = PATTERN" from spd.conf */
	PROTECTED_HOST_EXEC, /* .husky/, .envrc, .yarnrc.yml: run on the host */
	PROTECTED_AGENT_CONTEXT, /* AGENTS.md, CLAUDE.md: writes ask */
	PROTECTED_MANIFEST,	 /* package.json, Cargo.lock: writes ask */
	PROTECTED__COUNT
};

/*
 * One pattern.  A pattern is a relative path of one or more components;
 * '*' matches any run of characters inside a component and '?' one
 * character.  A pattern ending in '/' names a directory: it matches the
 * directory itself and everything under it, wherever the directory sits
 * in the tree.  Any other pattern matches the last components of a path
 * (so "Makefile" matches "Makefile" and "src/Makefile", and
 * ".cargo/config*" matches "a/.cargo/config.toml").
 */
struct protected_pattern {
	const char *pattern;
	enum protected_class cls;
};

/*
 * The class of relpath (relative to the workspace, '/'-separated, may
 * start with "./"; an absolute path is matched the same way), or
 * PROTECTED_NONE.  When several patterns match, the first class in the
 * order of enum protected_class wins, so a key file under .github/ is a
 * SECRET_FILE.  relpath must not be NULL.
 */
enum protected_class protected_match(const char *relpath);

/* True when pattern (syntax above) matches path, in any ASCII case. */
bool protected_pattern_match(const char *pattern, const char *path);

/*
 * The built-in list: stores a pointer to the static table in *ret and
 * returns its length.  The integrity guard enumerates it to find the
 * files to hash (see protected_class_guarded).
 */
size_t protected_patterns(const struct protected_pattern **ret);

/*
 * True for the classes whose files an agent may never change (writes are
 * denied, and the integrity guard re-hashes them after every command):
 * PROJECT_CONF, CI, AGENT_CONF, BUILD_CONF, CONFIGURED, HOST_EXEC and GIT.
 */
bool protected_class_guarded(enum protected_class cls);

/*
 * The roots the integrity guard hashes in the checkout at workdir: for
 * each pattern of a guarded class (except .git/, which the guard takes
 * from the git dir), its canonical spelling at the top of the checkout
 * and every entry there that matches it in another letter case or
 * through a wildcard, as the checkout is now.  Patterns match at any
 * depth for the policy ("src/Makefile"); the guard hashes the top-level
 * ones only (walking the whole tree after every command would cost what
 * the guard must not, and the policy refuses the writes).  Stores a
 * NULL-terminated array of relative paths in *ret (free with
 * strv_free_array) and returns 0, -E2BIG past the limit in
 * protected.c, -ENAMETOOLONG or -ENOMEM.
 */
int protected_roots(const char *workdir, char ***ret);

/* A stable lower-case name ("ci", "secret-file"); never NULL. */
const char *protected_class_name(enum protected_class cls);

/*
 * True when relpath looks like a test file by name ("tests/x.py",
 * "foo_test.go", "a.spec.ts", "FooTest.java").  The policy asks before an
 * agent changes a test that existed before its session.
 */
bool protected_is_test(const char *relpath);

#endif

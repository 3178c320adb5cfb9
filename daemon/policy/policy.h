/*
 * The policy engine: every tool call an agent makes (a command, a file
 * read, a file write) is classified deny / ask / allow before it runs.
 *
 *   deny   nothing lifts it;
 *   ask    a person decides, and a grant covers this one resolved object;
 *   allow  it runs (always in the sandbox: the policy decides whether, the
 *          sandbox bounds what).
 *
 * policy_classify() is a pure function of (call, context, configuration)
 * plus what the file system says about the paths involved (symlinks, which
 * files exist), so spd recomputes it from the very argv it is about to hand
 * to sandboxd: no front end can ask about one thing and run another.
 *
 * Commands are classified on argv, never on a shell string ("sh -c ..." is
 * ask whatever the string says).  The executable is its resolved path, not
 * its basename: a program is known by name (cat, git, sed) only when it
 * was found in a trusted directory -- the built-in system directories and
 * the context's PATH entries outside the workspace.  Wrappers (env,
 * timeout, nice, nohup, command, stdbuf, setsid, xargs, time, ionice) are
 * peeled and the inner command classified too; the stricter result wins.
 *
 * Rule order is fixed: deny, then ask, then allow; the first match wins.
 * Precisely:
 *   1. deny: the built-in denies, then the operator's and the project's
 *      "deny" entries (matched on the argv and on every peeled inner argv);
 *   2. ask: the operator's and the project's "ask" entries; the path asks
 *      (agent context files, manifests, tests that existed before the
 *      session) and dangerous environment variables; host network unless
 *      the operator's [network] allow matches;
 *   3. the operator's allow entries ("allow" = argv prefix, "allow-exact" =
 *      exact argv, and [network] allow) lift the remaining built-in command
 *      asks (shells, wrappers, interpreters, network tools, recursive rm,
 *      git state changes, unknown programs);
 *   4. the remaining built-in command asks;
 *   5. allow: the built-in read-only and ordinary-write commands, the
 *      project's allow entries and the configured checks (exact argv);
 *   6. anything else: ask ("ask.unknown").
 * So the project's .spd.conf can only tighten: its allow entries and
 * checks come after every deny and ask and only lift "unknown"; its
 * [network] allow is ignored (host network is the operator's to give).
 */
#ifndef SPD_DAEMON_POLICY_H
#define SPD_DAEMON_POLICY_H

#include <stdbool.h>
#include <stddef.h>

struct call;

/* A command may have at most this many arguments: Linux refuses far fewer
 * bytes than this anyway, and a bigger argv is an attack on spd's time. */
#define POLICY_ARGC_MAX 4096
/* One argument at most MAX_ARG_STRLEN (128 KiB), Linux's own limit. */
#define POLICY_ARG_MAX (128 * 1024)
/* The whole argv plus environment at most 1 MiB: no request can be
 * bigger (RPC_FRAME_MAX), and execve's own limit is around 2 MiB. */
#define POLICY_ARGV_BYTES_MAX (1024 * 1024)
/* A path argument at most PATH_MAX bytes: the kernel refuses longer. */
#define POLICY_PATH_MAX 4096
/* At most this many environment overrides in one call. */
#define POLICY_ENV_MAX 256
/* Wrappers peeled inside each other before giving up with an ask:
 * "nice timeout env nice ..." is never legitimate that deep. */
#define POLICY_PEEL_MAX 8
/* Symlinks followed while resolving one path, as the kernel's ELOOP. */
#define POLICY_SYMLINK_MAX 40
/* A reason sentence, truncated to this length. */
#define POLICY_REASON_MAX 256

enum policy_decision {
	POLICY_ALLOW = 0,
	POLICY_ASK = 1,
	POLICY_DENY = 2,
	/* The call itself is malformed (NUL byte, invalid UTF-8, over a
	 * limit): refused with BAD-REQUEST before any rule is looked at. */
	POLICY_BAD_REQUEST = 3,
};

enum policy_call_kind { POLICY_CALL_EXEC, POLICY_CALL_READ, POLICY_CALL_WRITE };

enum policy_net { POLICY_NET_NONE, POLICY_NET_LOOPBACK, POLICY_NET_HOST };

/* One tool call.  Strings are borrowed. */
struct policy_call {
	enum policy_call_kind kind;
	/* EXEC: argc arguments.  argv_len may be NULL (then strlen); when
	 * given, a length that differs from strlen means an embedded NUL. */
	const char *const *argv;
	const size_t *argv_len;
	size_t argc;
	/* EXEC: environment overrides, "NAME=value" (may be NULL). */
	const char *const *env;
	size_t envc;
	/* EXEC: working directory, absolute or relative to the workspace;
	 * NULL means the workspace. */
	const char *cwd;
	enum policy_net net;
	/* READ / WRITE: the path, relative to the workspace or absolute;
	 * path_len as argv_len (0 means strlen). */
	const char *path;
	size_t path_len;
};

/* Where the call runs.  Strings are borrowed. */
struct policy_context {
	/* The workspace: an absolute path without symlinks (realpath). */
	const char *workspace;
	/* In-place mode: git commands that move the checkout or rewrite
	 * refs are denied instead of asked. */
	bool in_place;
	/* A worktree session: its worktree's .git is the agent's own
	 * repository, so the commands that commit there (add, commit,
	 * restore, stash, mv, rm, a soft reset) change nothing of the
	 * operator's and are allowed. */
	bool worktree_session;
	/* The PATH of the session; NULL means POLICY_DEFAULT_PATH.  Its
	 * entries outside the workspace are trusted to hold real programs. */
	const char *path_env;
	/* Directories a sandboxed command can write besides the workspace
	 * (package caches, the operator's extra writable paths), NULL-
	 * terminated; may be NULL.  A program found under one of them is
	 * not trusted by name: the agent could have put it there.  /tmp,
	 * /var/tmp and /dev/shm are always taken as writable. */
	const char *const *writable;
	/* spd.conf's [sandbox] hidden paths (absolute, normalized), NULL-
	 * terminated; may be NULL.  A path under one, as spelled or
	 * resolved, is denied (deny.path.hidden): no approval opens what
	 * the operator hid.  But for one that holds the workspace, the
	 * workspace's own paths (a workspace may lie in a hidden
	 * directory: the run sees it, and only it, there). */
	const char *const *hidden;
	/* Whether relpath existed when the session started (tests that
	 * existed before the session are asked for).  NULL: any test file
	 * that exists now is taken to have existed. */
	bool (*preexisting)(void *data, const char *relpath);
	void *preexisting_data;
	/* A session's run whose network is spd's proxy: whether a git push
	 * to https://host goes through spd's inspection there (spd
	 * terminates the host's TLS and lets only the session's branch be
	 * fast-forwarded).  NULL, or false for a host: a push is refused
	 * (deny.git.remote), for the proxy would pass it on unread. */
	bool (*push_inspected)(void *data, const char *host);
	void *push_inspected_data;
};

#define POLICY_DEFAULT_PATH                                                    \
	"/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* The result of one classification.  Owned by the caller; release with
 * policy_result_free(). */
struct policy_result {
	enum policy_decision decision;
	/* A stable rule id ("deny.git.remote", "allow.cmd"); static. */
	const char *rule;
	/* One sentence for a person. */
	char reason[POLICY_REASON_MAX];
	/* The real path of the executable, or NULL (not found, file call). */
	char *exe;
	/* Every path argument, resolved (absolute, symlinks followed). */
	char **paths;
	size_t n_paths;
};

/*
 * True when path, taken lexically against ws (absolute, or relative to
 * it; nothing resolved), lies under one of hidden (NULL-terminated, may
 * be NULL): policy.check's answer to an agent's path outside its
 * workspace, which must not resolve the host's paths.
 */
bool policy_path_hidden_lex(const char *const *hidden, const char *ws,
			    const char *path);

/* The configuration: built-in defaults plus the loaded layers. */
struct policy_conf;

enum policy_layer { POLICY_LAYER_OPERATOR, POLICY_LAYER_PROJECT };

enum policy_list {
	POLICY_LIST_DENY,	 /* [policy] deny = "git gc" (argv prefix) */
	POLICY_LIST_ASK,	 /* [policy] ask = "make install" */
	POLICY_LIST_ALLOW,	 /* [policy] allow = "npm ci" (argv prefix) */
	POLICY_LIST_ALLOW_EXACT, /* [policy] allow-exact = "make check" */
	POLICY_LIST_NETWORK,	 /* [network] allow = "cargo fetch" */
	POLICY_LIST_CHECK,	 /* [check "unit"] run = "make check" */
	POLICY_LIST_PROTECTED,	 /* [policy] protected = "docs/api/" */
	POLICY_LIST_READABLE,	 /* [policy] readable = ".env.example" */
	POLICY_LIST__COUNT
};

/* A new configuration holding only the built-in defaults, or NULL when
 * out of memory.  Free with policy_conf_free (NULL allowed). */
struct policy_conf *policy_conf_new(void);
/* One more holder of conf (a cache and a call share one, read-only);
 * policy_conf_free drops a holder and frees conf with the last. */
struct policy_conf *policy_conf_ref(struct policy_conf *conf);
void policy_conf_free(struct policy_conf *conf);

/*
 * Read a git-config file (libgit2) into a layer: [policy] allow,
 * allow-exact, ask, deny, protected, readable; [network] allow;
 * [check "NAME"] run.  Command values are split into words like a shell
 * would (quotes and backslashes; no expansion).  Returns 0, -ENOENT when
 * the file does not exist (conf unchanged), -EINVAL for a file libgit2
 * cannot parse, a value that does not split, or a project file with
 * [include]/[includeIf] (conf unchanged), a section or key spd does not
 * know (conftab.h: a misspelt restriction must not silently be none), or
 * -ENOMEM.  After -EINVAL, policy_conf_error says why.
 */
int policy_conf_load(struct policy_conf *conf, enum policy_layer layer,
		     const char *path);

/* Why the last policy_conf_load of conf failed, "FILE:LINE: ..." (a
 * project's file named ".spd.conf"), or "" when it did not say; owned by
 * conf. */
const char *policy_conf_error(const struct policy_conf *conf);

/*
 * Add one entry to a list of a layer, as if read from a file.  value is a
 * command (word-split) or, for PROTECTED and READABLE, a path pattern in
 * protected.h's syntax.  Returns 0, -EINVAL or -ENOMEM.
 */
int policy_conf_add(struct policy_conf *conf, enum policy_layer layer,
		    enum policy_list list, const char *value);

/*
 * True when the operator's layer lists relpath as readable (the file
 * tools may read it although git ignores it; a secret-looking file listed
 * there may be read).  The project's "readable" entries only count for
 * gitignored files: see policy_conf_project_readable.
 */
bool policy_conf_operator_readable(const struct policy_conf *conf,
				   const char *relpath);
/* True when either layer lists relpath as readable. */
bool policy_conf_project_readable(const struct policy_conf *conf,
				  const char *relpath);

/*
 * Classify call in ctx under conf.  On success fills *ret (which the
 * caller frees with policy_result_free) and returns 0; a malformed call is
 * a success with decision POLICY_BAD_REQUEST.  Returns -EINVAL when ctx or
 * call is unusable (no workspace, unknown kind) or -ENOMEM; then *ret is
 * untouched.  conf may be NULL for the built-in defaults only.
 * Deterministic: the same inputs and the same file system give the same
 * result.
 */
int policy_classify(const struct policy_conf *conf,
		    const struct policy_context *ctx,
		    const struct policy_call *call, struct policy_result *ret);

/* Release what a result owns and zero it (NULL allowed). */
void policy_result_free(struct policy_result *r);

/* "allow", "ask", "deny", "bad-request"; never NULL. */
const char *policy_decision_name(enum policy_decision d);

/* A policy list entry has at most this many words (a prefix of argv). */
#define POLICY_WORDS_MAX 256

/*
 * Split a list entry into words with common/words.h's one splitter (a
 * line with shell metacharacters, unquoted or $ and ` in double quotes,
 * is refused).  Returns the number of words and stores a NULL-terminated
 * malloc'd array (free with policy_words_free) in *ret_words; -EINVAL,
 * -E2BIG or -ENOMEM.
 */
int policy_split_words(const char *s, char ***ret_words);
void policy_words_free(char **words);

/*
 * The script scanners, exported for the tests.  Each returns a bit set of
 * POLICY_SCRIPT_* for a program text: what it can do beyond reading its
 * input and printing.  0 means print-only.
 */
enum {
	POLICY_SCRIPT_EXEC = 1,	    /* runs commands (sed e, awk system) */
	POLICY_SCRIPT_WRITE = 2,    /* writes files (sed w, awk print >) */
	POLICY_SCRIPT_READ = 4,	    /* reads other files (sed r, getline <) */
	POLICY_SCRIPT_UNPARSED = 8, /* not understood: treat as the worst */
};
unsigned policy_sed_scan(const char *script);
unsigned policy_awk_scan(const char *program);

/*
 * How m_policy_check finds a session: fills the context for session id
 * and returns 0, or -ENOENT.  The workspace is written into ws (ws_len
 * bytes, PATH_MAX will do); the rest stays owned by spd and must outlive
 * the call.  Registered by whoever owns the sessions; until then
 * policy.check with a session refuses.
 */
struct spd;
typedef int (*policy_session_lookup_fn)(struct spd *spd, const char *id,
					struct policy_context *ret_ctx,
					char *ws, size_t ws_len);
void policy_set_session_lookup(policy_session_lookup_fn fn);

#endif

/*
 * What the parts of the policy engine share, and nothing outside it
 * includes: the configuration's lists, the state of one classification
 * (struct cls) and of one program level (struct lvl), the option tables,
 * and the functions one part calls in another.  The parts:
 *
 *   policy.c         the configuration, findings, the entry point
 *   policy_path.c    paths: resolution as the kernel would, protected
 *                    and configured paths, trees
 *   policy_exec.c    which program argv[0] is, and its cache
 *   policy_opts.c    reading options as getopt would; simple commands
 *   policy_tools.c   find, sed, awk, dd
 *   policy_git.c     git
 *   policy_level.c   programs by kind, the environment, one level and
 *                    the wrappers that run another
 *
 * (policy_script.c, the sed and awk script scanners, has its contract in
 * policy.h.)  The interface is policy.h.
 */
#ifndef SPD_DAEMON_POLICY_PRIV_H
#define SPD_DAEMON_POLICY_PRIV_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/util.h"
#include "daemon/policy/policy.h"

/* How many system_dirs there are (policy_exec.c checks it). */
#define POLICY_SYSTEM_DIRS 7

/* The directory part of PATH may hold at most this many entries; the
 * rest are ignored (a PATH that long is not a real session's). */
#define POLICY_PATH_ENTRIES_MAX 64

/* ---- the configuration (policy.c) ---- */

/* One list entry: the words of a command prefix, or one pattern. */
struct entry {
	char **words;
	size_t n;
};

struct elist {
	struct entry *v;
	size_t n, cap;
};

struct policy_conf {
	unsigned refs; /* policy_conf_ref; freed when the last goes */
	struct elist lists[2][POLICY_LIST__COUNT];
	char err[512]; /* policy_conf_error */
};

/* ---- one classification (policy.c) ---- */

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
	const char *trusted[POLICY_SYSTEM_DIRS + POLICY_PATH_ENTRIES_MAX];
	size_t n_trusted;
	struct finding deny, hard_ask, cmd_ask;
	const char *allow_rule; /* the outer command is a known allowed one */
	char allow_reason[POLICY_REASON_MAX];
	char *exe;
	char **paths;
	size_t n_paths, cap_paths;
	int err;
};

/* Record a finding of each level: the first of each is kept, with its
 * rule and a reason formatted as by printf. */
__attribute__((format(printf, 3, 4))) void
pol_deny(struct cls *c, const char *rule, const char *fmt, ...);
__attribute__((format(printf, 3, 4))) void
pol_hard_ask(struct cls *c, const char *rule, const char *fmt, ...);
__attribute__((format(printf, 3, 4))) void
pol_cmd_ask(struct cls *c, const char *rule, const char *fmt, ...);
/* The outer command is a known allowed one (the first reason is kept). */
__attribute__((format(printf, 3, 4))) void
pol_allow(struct cls *c, const char *rule, const char *fmt, ...);

/* ---- paths (policy_path.c) ---- */

/* PM_TREE: a write that also changes everything under a directory (rm -r,
 * mv of a directory, chmod -R): the files below are checked too. */
enum pmode { PM_READ, PM_WRITE, PM_TREE };

/* abs (absolute) with "." and ".." resolved lexically and repeated
 * slashes dropped: a new string, or NULL (too long, or no memory). */
char *pol_normalize(const char *abs);
/*
 * Resolve abs (an absolute path) as the kernel would, following symlinks
 * while the components exist; the part from the first missing component
 * on is added lexically.  When abs starts with the workspace (already a
 * real path), the walk starts there.  Returns 0 and a new string in
 * *ret, -ELOOP, -ENAMETOOLONG or -ENOMEM.
 */
int pol_resolve_abs(struct cls *c, const char *abs, char **ret);
/* Make arg absolute against base (an absolute directory). */
char *pol_absolutize(const char *base, const char *arg);
/* Is abs (absolute, resolved) the workspace or below it? */
bool pol_inside_ws(const struct cls *c, const char *abs);
/* Is s one of list's n strings? */
bool pol_in_list(const char *const *list, size_t n, const char *s);
#define IN(list, s) pol_in_list(list, ARRAY_SIZE(list), s)
/*
 * Check one path argument of a command (or a file tool's path) given
 * against cwd (absolute, real).  Records findings and the resolved path.
 * what names the command for the reason.
 */
void pol_check_path(struct cls *c, const char *cwd, const char *arg,
		    enum pmode mode, const char *what);

/* ---- executables (policy_exec.c) ---- */

enum where { EXE_TRUSTED, EXE_WORKSPACE, EXE_UNTRUSTED, EXE_NOTFOUND };

/* One program level: the command, or one a wrapper runs. */
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

/* Find the program l->argv[0] names (along l->path_env as execvp would,
 * or as a path against l->cwd) and say where it lives: l->exe (its real
 * path; NULL when there is none), l->where, and l->name when trusted.
 * Out of memory is c->err. */
void pol_ident(struct cls *c, struct lvl *l);

/* ---- options and simple commands (policy_opts.c) ---- */

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

/* A NULL-terminated list of strings, for the tables. */
#define L(...) ((const char *const[]){__VA_ARGS__, NULL})

struct optcb {
	/* Called for each option: ch (short) or name/n (long), value or
	 * NULL. */
	void (*opt)(struct cls *c, struct lvl *l, void *d, char ch,
		    const char *name, size_t n, const char *val);
	void (*operand)(struct cls *c, struct lvl *l, void *d, size_t idx,
			const char *arg);
	void *d;
};

/* The value kind of short option ch in shortv: 0 none, 'v' plain value,
 * '<' read path, '>' written path. */
int pol_short_kind(const char *shortv, char ch);
/*
 * The value kind of long option name (n bytes, without "--") in longv:
 * 0 none, 'v' plain value, '<' read path, '>' written path.  getopt takes
 * any unambiguous abbreviation ("sort --out=F" is --output=F), so a name
 * that is a prefix of listed options has the worst of their kinds; an
 * exact match wins, as it does in getopt.
 */
int pol_long_kind(const char *const *longv, const char *name, size_t n);
/* name (n bytes, without "--") is an unambiguous-or-not prefix of
 * canonical: getopt accepts abbreviations, so "--rec" is --recursive.
 * Matching any prefix errs towards seeing the option. */
bool pol_long_is(const char *name, size_t n, const char *canonical);
/* long_is for any of the NULL-terminated list. */
bool pol_long_in(const char *const *list, const char *name, size_t n);
/* Walk argv from index start; returns nothing, reports via cb. */
void pol_walk_opts(struct cls *c, struct lvl *l, size_t start,
		   const char *shortv, const char *const *longv,
		   const struct optcb *cb);
/* The table's entry for a simple command named name, or NULL. */
const struct spec *pol_find_spec(const char *name);
/* Classify level l, a simple command read by its table entry s. */
void pol_run_simple(struct cls *c, struct lvl *l, const struct spec *s);

/* ---- find, sed, awk, dd (policy_tools.c) ---- */

/* Classify level l, a command of that name (the trusted one). */
void pol_run_find(struct cls *c, struct lvl *l);
void pol_run_sed(struct cls *c, struct lvl *l);
void pol_run_awk(struct cls *c, struct lvl *l);
void pol_run_dd(struct cls *c, struct lvl *l);

/* ---- git (policy_git.c) ---- */

/* Classify level l, a git command line. */
void pol_run_git(struct cls *c, struct lvl *l);

/* ---- levels (policy_level.c) ---- */

/* Check the environment variable name (n bytes) a command is given. */
void pol_check_env_name(struct cls *c, const char *name, size_t n);
/* Does an entry of the layer's list match l (an argv prefix; with exact,
 * the whole argv)?  loose: for deny and ask, a program also matches by
 * the basename of argv[0] wherever it was found (entry_match). */
bool pol_list_match(struct cls *c, const struct lvl *l, enum policy_layer layer,
		    enum policy_list list, bool exact, bool loose);
/* Classify one level: find its program, apply the lists and the
 * program's own rules, and descend into what a wrapper runs. */
void pol_classify_level(struct cls *c, struct lvl *l);

#endif

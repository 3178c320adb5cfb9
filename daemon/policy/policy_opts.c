/*
 * The policy's options and simple commands: argv read as GNU getopt
 * would (abbreviated long options, options after operands), and the
 * table of simple commands saying which operands and option values are
 * paths read or written.  Part of the policy engine (policy_priv.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"
#include "daemon/policy/policy.h"
#include "daemon/policy/policy_priv.h"

/* ---------------------------------------------------------------- */
/* Options                                                           */

/* The value kind of short option ch in shortv: 0 none, 'v' plain value,
 * '<' read path, '>' written path. */
int pol_short_kind(const char *shortv, char ch)
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
int pol_long_kind(const char *const *longv, const char *name, size_t n)
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
bool pol_long_is(const char *name, size_t n, const char *canonical)
{
	return n > 0 && n <= strlen(canonical) &&
	       memcmp(name, canonical, n) == 0;
}

bool pol_long_in(const char *const *list, const char *name, size_t n)
{
	if (!list)
		return false;
	for (const char *const *l = list; *l; l++)
		if (pol_long_is(name, n, *l))
			return true;
	return false;
}

/* Walk argv from index start; returns nothing, reports via cb. */
void pol_walk_opts(struct cls *c, struct lvl *l, size_t start,
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
			int k = pol_long_kind(longv, name, n);

			if (!val && k && i + 1 < l->argc)
				val = l->argv[++i];
			if (val && (k == '<' || k == '>'))
				pol_check_path(c, l->cwd, val,
					       k == '<' ? PM_READ : PM_WRITE,
					       l->argv[0]);
			if (cb->opt)
				cb->opt(c, l, cb->d, 0, name, n, val);
			continue;
		}
		for (const char *q = a + 1; *q; q++) {
			int k = pol_short_kind(shortv, *q);

			if (!k) {
				if (cb->opt)
					cb->opt(c, l, cb->d, *q, NULL, 0, NULL);
				continue;
			}
			const char *val = q[1]		    ? q + 1
					  : i + 1 < l->argc ? l->argv[++i]
							    : NULL;
			if (val && (k == '<' || k == '>'))
				pol_check_path(c, l->cwd, val,
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
	if (pol_long_in(s->skip_off_long, name, n))
		st->skip_off = true;
	if (pol_long_in(s->forbid_long, name, n) && !st->forbidden) {
		st->forbidden = true;
		snprintf(st->forbidden_opt, sizeof(st->forbidden_opt), "--%.*s",
			 (int)(n < 60 ? n : 60), name);
	}
	if (pol_long_is(name, n, "recursive"))
		st->recursive = true;
	if (s->into && val && pol_long_is(name, n, "target-directory") && n > 2)
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
	abs = pol_absolutize(l->cwd, dir);
	if (!abs || pol_resolve_abs(c, abs, &real) == -ENOMEM) {
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
		pol_check_path(c, l->cwd, dst,
			       st->recursive ? PM_TREE : PM_WRITE, st->s->name);
		free(dst);
	}
	free(real);
}

void pol_run_simple(struct cls *c, struct lvl *l, const struct spec *s)
{
	struct simple_state st = {.s = s};
	struct optcb cb = {simple_opt, simple_operand, &st};
	size_t skip;

	st.ops = calloc(l->argc, sizeof(char *));
	if (!st.ops) {
		c->err = -ENOMEM;
		return;
	}
	pol_walk_opts(c, l, 1, s->shortv, s->longv, &cb);
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
		pol_check_path(c, l->cwd, st.ops[i], m, s->name);
	}
	if (s->into)
		check_into(c, l, &st, skip);
	if (st.forbidden)
		pol_cmd_ask(c, s->forbid_rule,
			    "%s %s can run other programs or "
			    "write files",
			    s->name, st.forbidden_opt);
	if (st.recursive && strcmp(s->name, "rm") == 0)
		pol_cmd_ask(c, "ask.rm.recursive",
			    "rm removes directories "
			    "recursively");
	pol_allow(c,
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

const struct spec *pol_find_spec(const char *name)
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

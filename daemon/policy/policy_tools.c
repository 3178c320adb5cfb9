/*
 * The policy's find, sed, awk and dd: commands whose arguments can run
 * another program or write a file (find -exec, sed's e and w, awk's
 * system() and redirections, dd of=).  Part of the policy engine
 * (policy_priv.h); the script scanners are policy_script.c.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "daemon/policy/policy.h"
#include "daemon/policy/policy_priv.h"

/* ---------------------------------------------------------------- */
/* find, sed, awk, dd                                                  */

void pol_run_find(struct cls *c, struct lvl *l)
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
		pol_check_path(c, l->cwd, a, PM_READ, "find");
		roots = true;
	}
	if (!roots)
		pol_check_path(c, l->cwd, ".", PM_READ, "find");
	for (; i < l->argc; i++) {
		const char *a = l->argv[i];

		for (size_t k = 0; k < ARRAY_SIZE(exec_family); k++) {
			size_t end = i + 1;
			struct lvl in = {.cwd = l->cwd,
					 .path_env = l->path_env,
					 .depth = l->depth + 1};

			if (strcmp(a, exec_family[k]) != 0)
				continue;
			pol_cmd_ask(c, "ask.find.exec",
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
				pol_classify_level(c, &in);
				free(in.exe);
			}
		}
		for (size_t k = 0; k < ARRAY_SIZE(write_family); k++)
			if (strcmp(a, write_family[k]) == 0)
				pol_cmd_ask(c, "ask.find.write",
					    "find %s removes or writes files",
					    a);
		if (strcmp(a, "-files0-from") == 0 && i + 1 < l->argc)
			pol_check_path(c, l->cwd, l->argv[++i], PM_READ,
				       "find");
	}
	pol_allow(c, "allow.cmd", "find without -exec or -delete only reads");
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

	if (ch == 'e' ||
	    (!ch && pol_long_is(name, n, "expression") && n >= 2)) {
		if (val && script_append(st, val) < 0)
			c->err = -ENOMEM;
		if (!val)
			st->unsafe_opt = true;
	} else if (ch == 'f' || (!ch && pol_long_is(name, n, "file"))) {
		st->from_file = true;
		st->have_script = true;
		if (val)
			pol_check_path(c, l->cwd, val, PM_READ, "sed");
	} else if (ch == 'i' ||
		   (!ch && pol_long_is(name, n, "in-place") && n >= 2)) {
		st->in_place = true;
	} else if (!ch && pol_long_is(name, n, "sandbox") && n >= 2) {
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
	pol_walk_opts(c, l, 1, shortv, longv, cb);
	if (c->err || st->have_script || st->n_ops == 0)
		return 0;
	if (script_append(st, st->ops[0]) < 0) {
		c->err = -ENOMEM;
		return 0;
	}
	return 1;
}

void pol_run_sed(struct cls *c, struct lvl *l)
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
			pol_check_path(c, l->cwd, st.ops[i],
				       st.in_place ? PM_WRITE : PM_READ, "sed");
	if (st.from_file) {
		pol_cmd_ask(c, "ask.sed.file",
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
		pol_cmd_ask(c, "ask.sed.exec",
			    "the sed script runs commands (e)");
	else if (r & (POLICY_SCRIPT_WRITE | POLICY_SCRIPT_READ))
		pol_cmd_ask(
		    c, "ask.sed.file",
		    "the sed script reads or writes other files (r, R, w, W)");
	else if (r & POLICY_SCRIPT_UNPARSED)
		pol_cmd_ask(c, "ask.sed.unparsed",
			    "the sed script could not be understood");
	pol_allow(c, st.in_place ? "allow.write" : "allow.cmd",
		  "sed with a print-only script");
out:
	free(st.script);
	free(st.ops);
}

static void awk_opt(struct cls *c, struct lvl *l, void *d, char ch,
		    const char *name, size_t n, const char *val)
{
	struct script_state *st = d;

	if (ch == 'e' || (!ch && pol_long_is(name, n, "source"))) {
		if (val && script_append(st, val) < 0)
			c->err = -ENOMEM;
	} else if (ch == 'f' || ch == 'E' ||
		   (!ch && (pol_long_is(name, n, "file") ||
			    pol_long_is(name, n, "exec")))) {
		st->from_file = true;
		st->have_script = true;
		if (val)
			pol_check_path(c, l->cwd, val, PM_READ, "awk");
	} else if (ch == 'F' || ch == 'v' ||
		   (!ch && (pol_long_is(name, n, "field-separator") ||
			    pol_long_is(name, n, "assign")))) {
		/* a field separator or an assignment: data, not code */
	} else if (ch == 'i' || ch == 'l' || ch == 'o' || ch == 'p' ||
		   ch == 'd' || ch == 'D' ||
		   (!ch && (pol_long_is(name, n, "include") ||
			    pol_long_is(name, n, "load") ||
			    pol_long_is(name, n, "pretty-print") ||
			    pol_long_is(name, n, "profile") ||
			    pol_long_is(name, n, "dump-variables") ||
			    pol_long_is(name, n, "debug")))) {
		st->unsafe_opt = true;
		snprintf(st->unsafe_name, sizeof(st->unsafe_name), "%s%.*s",
			 ch ? "-" : "--", ch ? 1 : (int)(n < 24 ? n : 24),
			 ch ? &ch : name);
	} else if (ch == 'S' || (!ch && pol_long_is(name, n, "sandbox"))) {
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

void pol_run_awk(struct cls *c, struct lvl *l)
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
			pol_check_path(c, l->cwd, st.ops[i], PM_READ, "awk");
	if (st.from_file) {
		pol_cmd_ask(c, "ask.awk.file",
			    "awk reads its program from a file "
			    "spd cannot vouch for");
		goto out;
	}
	if (st.unsafe_opt)
		pol_cmd_ask(c, "ask.awk.option",
			    "awk %s loads code or writes files",
			    st.unsafe_name);
	r = st.script ? policy_awk_scan(st.script) : 0;
	if (st.sandbox)
		r &= ~(unsigned)(POLICY_SCRIPT_EXEC | POLICY_SCRIPT_WRITE);
	if (r & POLICY_SCRIPT_EXEC)
		pol_cmd_ask(
		    c, "ask.awk.exec",
		    "the awk program runs commands or reads other files "
		    "(system, getline)");
	else if (r & POLICY_SCRIPT_WRITE)
		pol_cmd_ask(
		    c, "ask.awk.redirect",
		    "the awk program writes to files or pipes (print >, |)");
	else if (r & POLICY_SCRIPT_UNPARSED)
		pol_cmd_ask(c, "ask.awk.unparsed",
			    "the awk program could not be understood (@)");
	pol_allow(c, "allow.cmd", "awk with a program that only prints");
out:
	free(st.script);
	free(st.ops);
}

void pol_run_dd(struct cls *c, struct lvl *l)
{
	for (size_t i = 1; i < l->argc; i++) {
		const char *a = l->argv[i];

		if (strncmp(a, "if=", 3) == 0)
			pol_check_path(c, l->cwd, a + 3, PM_READ, "dd");
		else if (strncmp(a, "of=", 3) == 0)
			pol_check_path(c, l->cwd, a + 3, PM_WRITE, "dd");
	}
	pol_allow(c, "allow.write", "dd between files of the workspace");
}

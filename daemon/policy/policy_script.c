/*
 * The script scanners of the policy: what a sed script or an awk program
 * can do besides reading its input and printing.  Both err on the side of
 * "more": a construct not understood is POLICY_SCRIPT_UNPARSED, which the
 * policy treats like the worst case.  A false alarm costs a prompt; a
 * missed "e" costs an arbitrary command.
 */
#include <ctype.h>
#include <stdbool.h>
#include <string.h>

#include "daemon/policy/policy.h"

static void skip_blank(const char **p)
{
	while (**p == ' ' || **p == '\t')
		(*p)++;
}

static void skip_line(const char **p)
{
	while (**p && **p != '\n')
		(*p)++;
}

/* Skip a delimited part of s, y or an address: up to the unescaped
 * delimiter, which is consumed.  GNU sed does not treat brackets
 * specially here (match_slash), so neither do we.  False when the part
 * is not terminated. */
static bool skip_delimited(const char **p, char delim)
{
	const char *q = *p;

	while (*q && *q != delim) {
		if (*q == '\\' && q[1])
			q++;
		q++;
	}
	if (!*q)
		return false;
	*p = q + 1;
	return true;
}

/* Skip n delimited parts whose delimiter is the character at *p (s and y
 * take two, a \cREGEXc address one).  False when that character cannot
 * be a delimiter (newline, backslash, none) or a part is not terminated. */
static bool skip_parts(const char **p, int n)
{
	const char *q = *p;
	char d = *q++;

	if (!d || d == '\n' || d == '\\')
		return false;
	while (n-- > 0)
		if (!skip_delimited(&q, d))
			return false;
	*p = q;
	return true;
}

static void skip_digits(const char **p)
{
	while (isdigit((unsigned char)**p))
		(*p)++;
}

/* One address (or none).  False for an unterminated regex. */
static bool sed_addr(const char **p, bool second)
{
	const char *q = *p;
	bool regex = false;

	if (isdigit((unsigned char)*q)) {
		skip_digits(&q);
		if (*q == '~') {
			q++;
			skip_digits(&q);
		}
	} else if (*q == '$') {
		q++;
	} else if (second && (*q == '+' || *q == '~')) {
		q++;
		skip_digits(&q);
	} else if (*q == '/') {
		q++;
		if (!skip_delimited(&q, '/'))
			return false;
		regex = true;
	} else if (*q == '\\') {
		q++;
		if (!skip_parts(&q, 1))
			return false;
		regex = true;
	}
	while (regex && (*q == 'I' || *q == 'M'))
		q++;
	*p = q;
	return true;
}

unsigned policy_sed_scan(const char *script)
{
	const char *p = script;
	unsigned r = 0;

	for (;;) {
		while (*p == ' ' || *p == '\t' || *p == '\n' || *p == ';')
			p++;
		if (!*p)
			return r;
		if (*p == '#') {
			skip_line(&p);
			continue;
		}
		if (!sed_addr(&p, false))
			return r | POLICY_SCRIPT_UNPARSED;
		skip_blank(&p);
		if (*p == ',') {
			p++;
			skip_blank(&p);
			if (!sed_addr(&p, true))
				return r | POLICY_SCRIPT_UNPARSED;
			skip_blank(&p);
		}
		while (*p == '!') {
			p++;
			skip_blank(&p);
		}
		char cmd = *p ? *p++ : '\0';

		switch (cmd) {
		case '{':
		case '}':
			continue;
		case '=':
		case 'd':
		case 'D':
		case 'g':
		case 'G':
		case 'h':
		case 'H':
		case 'n':
		case 'N':
		case 'p':
		case 'P':
		case 'x':
		case 'z':
		case 'F':
			break;
		case 'l':
		case 'L':
		case 'q':
		case 'Q':
			skip_blank(&p);
			skip_digits(&p);
			break;
		case 'a':
		case 'i':
		case 'c':
			/* Text to the end of the line; a backslash carries
			 * it over the newline ("a\" then the text). */
			while (*p && *p != '\n') {
				if (*p == '\\' && p[1])
					p++;
				p++;
			}
			continue;
		case ':':
		case 'b':
		case 't':
		case 'T':
		case 'v':
			skip_blank(&p);
			while (*p && *p != '\n' && *p != ';')
				p++;
			continue;
		case 'r':
		case 'R':
			r |= POLICY_SCRIPT_READ;
			skip_line(&p);
			continue;
		case 'w':
		case 'W':
			r |= POLICY_SCRIPT_WRITE;
			skip_line(&p);
			continue;
		case 'e':
			r |= POLICY_SCRIPT_EXEC;
			skip_line(&p);
			continue;
		case 's':
			if (!skip_parts(&p, 2))
				return r | POLICY_SCRIPT_UNPARSED;
			for (;;) {
				if (*p == 'g' || *p == 'p' || *p == 'i' ||
				    *p == 'I' || *p == 'm' || *p == 'M' ||
				    isdigit((unsigned char)*p)) {
					p++;
				} else if (*p == 'e') {
					r |= POLICY_SCRIPT_EXEC;
					p++;
				} else if (*p == 'w') {
					r |= POLICY_SCRIPT_WRITE;
					skip_line(&p);
					break;
				} else {
					break;
				}
			}
			break;
		case 'y':
			if (!skip_parts(&p, 2))
				return r | POLICY_SCRIPT_UNPARSED;
			break;
		default:
			return r | POLICY_SCRIPT_UNPARSED;
		}
		skip_blank(&p);
		if (*p && *p != ';' && *p != '\n' && *p != '}' && *p != '#')
			return r | POLICY_SCRIPT_UNPARSED;
	}
}

static bool is_ident(char ch)
{
	return isalnum((unsigned char)ch) || ch == '_';
}

/* True when word occurs in s as a whole identifier. */
static bool has_word(const char *s, const char *word)
{
	size_t n = strlen(word);

	for (const char *q = strstr(s, word); q; q = strstr(q + 1, word))
		if ((q == s || !is_ident(q[-1])) && !is_ident(q[n]))
			return true;
	return false;
}

/*
 * Whether a print or printf statement starting at p redirects its output
 * (print > "f", print >> "f", print | "cmd", print |& "cmd").  Strings
 * are skipped so that print "a > b" is fine; but a '/' may open a regex
 * literal in which a '"' does not start a string, and then the scan does
 * not skip strings and runs to the end of the line instead.
 */
static bool print_redirects(const char *p)
{
	const char *q;
	bool slash = false;

	for (q = p; *q && *q != '\n' && *q != ';' && *q != '}'; q++)
		if (*q == '/')
			slash = true;
	if (slash) {
		for (q = p; *q && *q != '\n'; q++)
			if (*q == '>' || *q == '|')
				return true;
		return false;
	}
	for (q = p; *q && *q != '\n' && *q != ';' && *q != '}'; q++) {
		if (*q == '"') {
			q++;
			while (*q && *q != '"') {
				if (*q == '\\' && q[1])
					q++;
				q++;
			}
			if (!*q)
				return true;
		} else if (*q == '>' || *q == '|') {
			return true;
		}
	}
	return false;
}

unsigned policy_awk_scan(const char *program)
{
	unsigned r = 0;

	/* system() and "cmd" | getline run commands; getline < "f" reads
	 * any file.  Searched in the raw text, strings included. */
	if (has_word(program, "system") || has_word(program, "getline"))
		r |= POLICY_SCRIPT_EXEC;
	/* gawk's @include/@load and indirect calls @f(): unknown code. */
	if (strchr(program, '@'))
		r |= POLICY_SCRIPT_UNPARSED;
	for (const char *q = program; (q = strstr(q, "print")); q += 5) {
		if (q != program && is_ident(q[-1]))
			continue;
		const char *e = q + 5;

		if (*e == 'f')
			e++;
		if (is_ident(*e))
			continue;
		if (print_redirects(e))
			r |= POLICY_SCRIPT_WRITE;
	}
	return r;
}

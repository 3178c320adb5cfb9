/*
 * The table of spd.conf's and .spd.conf's sections and keys, and the
 * validator (conftab.h).  libgit2 parses; this file only walks its
 * entries and, for a message, finds an entry's line by scanning the
 * file's text (libgit2 keeps no line numbers).
 */
#include <errno.h>
#include <git2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <ctype.h>
#include <unistd.h>

#include "common/util.h"
#include "daemon/conftab.h"

#define SPD CONFTAB_SPD_CONF
#define PRJ CONFTAB_PROJECT

/* A key's value is checked beyond its reader's own checks. */
enum kind {
	K_ANY,
	K_HOST, /* a host name or *.name: the proxy matches names only */
};

struct key {
	const char *name;
	enum kind kind;
};

struct section {
	const char *name;
	unsigned files; /* SPD, PRJ or both */
	bool named;	/* [provider "NAME"]: a subsection is required */
	const struct key *keys; /* ends with a NULL name */
	/* Keys of the section given a name although it needs none
	 * ([network "HOST"]), or NULL: then a name is refused. */
	const struct key *named_keys;
};

/* Every key, by the file that reads it; each list ends with {NULL}. */
static const struct key sandbox_keys[] = {
    {"mode", K_ANY},	   {"user", K_ANY},    {"writable", K_ANY},
    {"hidden", K_ANY},	   {"timeout", K_ANY}, {"output-cap", K_ANY},
    {"kill-grace", K_ANY}, {NULL, K_ANY}};
static const struct key secrets_keys[] = {{"file", K_ANY}, {NULL, K_ANY}};
static const struct key journal_keys[] = {{"queue-max", K_ANY}, {NULL, K_ANY}};
static const struct key limits_keys[] = {
    {"auth-timeout", K_ANY},	     {"grant-lifetime", K_ANY},
    {"session-connections", K_ANY},  {"session-runs", K_ANY},
    {"session-journal-rate", K_ANY}, {"operator-connections", K_ANY},
    {"operator-runs", K_ANY},	     {"proxy-head-timeout", K_ANY},
    {"proxy-idle-timeout", K_ANY},   {NULL, K_ANY}};
static const struct key approvals_keys[] = {{"timeout", K_ANY}, {NULL, K_ANY}};
static const struct key session_keys[] = {
    {"git-name", K_ANY}, {"git-email", K_ANY}, {NULL, K_ANY}};
static const struct key broker_keys[] = {
    {"cap-default", K_ANY},	 {"cap-max", K_ANY},
    {"idle-timeout", K_ANY},	 {"body-max", K_ANY},
    {"provider-timeout", K_ANY}, {"keepalive-timeout", K_ANY},
    {"listen", K_ANY},		 {"session-cap", K_ANY},
    {"min-output", K_ANY},	 {NULL, K_ANY}};
static const struct key provider_keys[] = {
    {"url", K_ANY}, {"key", K_ANY}, {"api", K_ANY}, {NULL, K_ANY}};
static const struct key model_keys[] = {
    {"input", K_ANY},	    {"output", K_ANY},	       {"cache-read", K_ANY},
    {"cache-write", K_ANY}, {"cache-write-1h", K_ANY}, {"max-output", K_ANY},
    {NULL, K_ANY}};
static const struct key policy_keys[] = {
    {"allow", K_ANY}, {"allow-exact", K_ANY}, {"ask", K_ANY},
    {"deny", K_ANY},  {"protected", K_ANY},   {"readable", K_ANY},
    {NULL, K_ANY}};
/* A project's allow-address and resolve are read to be set aside and
 * journaled (proxy/project.c), so they are known keys there too. */
static const struct key network_keys[] = {
    {"allow", K_ANY},	  {"allow-host", K_HOST},   {"deny-host", K_HOST},
    {"ask-host", K_HOST}, {"allow-address", K_ANY}, {"resolve", K_ANY},
    {"test-ca", K_ANY},	  {"ca-bundle", K_ANY},	    {NULL, K_ANY}};
/* [network "HOST"]: the request rules of a host spd terminates. */
static const struct key network_host_keys[] = {
    {"allow", K_ANY}, {"deny", K_ANY}, {NULL, K_ANY}};
static const struct key credential_keys[] = {
    {"host", K_HOST}, {"header", K_ANY}, {"basic", K_ANY}, {NULL, K_ANY}};
static const struct key attest_keys[] = {{"trust", K_ANY}, {NULL, K_ANY}};
static const struct key check_keys[] = {{"run", K_ANY}, {NULL, K_ANY}};
static const struct key verify_keys[] = {
    {"require", K_ANY}, {"agent", K_ANY}, {NULL, K_ANY}};
/* libgit2 follows spd.conf's includes itself; a project's are refused
 * (policy.c): an included file would not be a protected path. */
static const struct key include_keys[] = {{"path", K_ANY}, {NULL, K_ANY}};

static const struct section sections[] = {
    {"sandbox", SPD, false, sandbox_keys, NULL},
    {"secrets", SPD, false, secrets_keys, NULL},
    {"journal", SPD, false, journal_keys, NULL},
    {"limits", SPD, false, limits_keys, NULL},
    {"approvals", SPD, false, approvals_keys, NULL},
    {"session", SPD, false, session_keys, NULL},
    {"attest", SPD, false, attest_keys, NULL},
    {"broker", SPD, false, broker_keys, NULL},
    {"provider", SPD, true, provider_keys, NULL},
    {"model", SPD, true, model_keys, NULL},
    {"policy", SPD | PRJ, false, policy_keys, NULL},
    {"network", SPD | PRJ, false, network_keys, network_host_keys},
    {"credential", SPD, true, credential_keys, NULL},
    {"check", SPD | PRJ, true, check_keys, NULL},
    {"verify", PRJ, false, verify_keys, NULL},
    {"include", SPD, false, include_keys, NULL},
    {"includeif", SPD, true, include_keys, NULL},
};

/* ---- did you mean ---- */

/* Edit distance with adjacent transpositions (optimal string alignment),
 * case-blind: "netwrok" is one edit from "network". */
static size_t distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t d[34][34];

	if (la > 32 || lb > 32)
		return (size_t)-1;
	for (size_t i = 0; i <= la; i++)
		d[i][0] = i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = j;
	for (size_t i = 1; i <= la; i++)
		for (size_t j = 1; j <= lb; j++) {
			size_t cost = tolower((unsigned char)a[i - 1]) !=
				      tolower((unsigned char)b[j - 1]);
			size_t v = d[i - 1][j] + 1;

			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			if (d[i - 1][j - 1] + cost < v)
				v = d[i - 1][j - 1] + cost;
			if (i > 1 && j > 1 &&
			    tolower((unsigned char)a[i - 1]) ==
				tolower((unsigned char)b[j - 2]) &&
			    tolower((unsigned char)a[i - 2]) ==
				tolower((unsigned char)b[j - 1]) &&
			    d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;
			d[i][j] = v;
		}
	return d[la][lb];
}

/* Close enough to be a typo of: one edit in a short word, two else. */
static bool near(const char *typed, const char *known)
{
	size_t d = distance(typed, known);

	return d <= (strlen(known) <= 4 ? 1u : 2u);
}

static const struct section *section_find(const char *name, size_t n)
{
	for (size_t i = 0; i < ARRAY_SIZE(sections); i++)
		if (strlen(sections[i].name) == n &&
		    strncasecmp(sections[i].name, name, n) == 0)
			return &sections[i];
	return NULL;
}

static const struct key *key_find_in(const struct key *keys, const char *name)
{
	for (const struct key *k = keys; k->name; k++)
		if (strcasecmp(k->name, name) == 0)
			return k;
	return NULL;
}

static const struct key *key_find(const struct section *s, const char *name)
{
	return key_find_in(s->keys, name);
}

/* ---- finding a line ---- */

/* What is looked for: a section's first header, or the nth (from 0)
 * occurrence of a key in that section. */
struct want {
	const char *sec;
	size_t seclen;
	const char *sub; /* NULL: none */
	size_t sublen;
	const char *key; /* NULL: the header */
	unsigned nth;
};

/* [name], [name "sub"] or the old [name.sub] at p (after '['): fills
 * the current section and returns where the line goes on, or NULL when
 * the header cannot be read. */
static const char *header(const char *p, char *sec, size_t seclen, char *sub,
			  size_t sublen, bool *has_sub)
{
	size_t n = 0, m = 0;

	*has_sub = false;
	while (*p && *p != ']' && *p != ' ' && *p != '\t' && *p != '"' &&
	       *p != '.' && *p != '\n') {
		if (n + 1 < seclen)
			sec[n++] = *p;
		p++;
	}
	sec[n] = '\0';
	if (*p == '.') {
		*has_sub = true;
		for (p++; *p && *p != ']' && *p != '\n'; p++)
			if (m + 1 < sublen)
				sub[m++] = *p;
	} else {
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '"') {
			*has_sub = true;
			for (p++; *p && *p != '"' && *p != '\n'; p++) {
				if (*p == '\\' && p[1] && p[1] != '\n')
					p++;
				if (m + 1 < sublen)
					sub[m++] = *p;
			}
			if (*p == '"')
				p++;
		}
	}
	sub[m] = '\0';
	while (*p && *p != ']' && *p != '\n')
		p++;
	return *p == ']' ? p + 1 : NULL;
}

static bool section_is(const struct want *w, const char *sec, const char *sub,
		       bool has_sub)
{
	if (strlen(sec) != w->seclen || strncasecmp(sec, w->sec, w->seclen))
		return false;
	if (!w->sub)
		return !has_sub;
	return has_sub && strlen(sub) == w->sublen &&
	       strncasecmp(sub, w->sub, w->sublen) == 0;
}

/* The 1-based line of what w names in text, or 0 when not found.  Only
 * locates: values are libgit2's to read. */
static unsigned locate(const char *text, const struct want *w)
{
	char sec[64] = "", sub[256] = "";
	bool has_sub = false, in = false, cont = false;
	unsigned line = 0, seen = 0;

	for (const char *p = text; *p;) {
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		bool was_cont = cont;

		line++;
		/* A value ending in a backslash goes on on the next line. */
		cont = len > 0 && p[len - 1] == '\\';
		if (!was_cont) {
			while (*p == ' ' || *p == '\t')
				p++;
			if (*p == '[') {
				const char *rest =
				    header(p + 1, sec, sizeof(sec), sub,
					   sizeof(sub), &has_sub);

				in = rest && section_is(w, sec, sub, has_sub);
				if (in && !w->key)
					return line;
				p = rest ? rest : p;
				while (*p == ' ' || *p == '\t')
					p++;
			}
			if (in && w->key) {
				size_t k =
				    strspn(p, "abcdefghijklmnopqrstuvwxyz"
					      "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
					      "0123456789-");

				if (k == strlen(w->key) &&
				    strncasecmp(p, w->key, k) == 0 &&
				    strchr(" \t=;#\r\n", p[k] ? p[k] : '\n') &&
				    seen++ == w->nth)
					return line;
			}
		}
		if (!eol)
			break;
		p = eol + 1;
	}
	return 0;
}

/* The whole of path, or NULL. */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t len = 0;

	if (!f)
		return NULL;
	/* A configuration larger than this is no configuration spd wrote
	 * about; its lines are simply not given. */
	buf = malloc(1 << 20);
	if (buf) {
		len = fread(buf, 1, (1 << 20) - 1, f);
		buf[len] = '\0';
	}
	fclose(f);
	return buf;
}

/* ---- the check ---- */

struct problem {
	char what[384]; /* the message after "FILE:LINE: " */
	struct want w;
};

/* The proxy's host patterns are names: the part of a URL-like value that
 * is one, for the message ("https://pypi.org/" gives "pypi.org"), or ""
 * when v is a name already. */
static void host_fix(const char *v, char *fix, size_t len)
{
	const char *s = strstr(v, "://"), *end, *at;
	size_t n;

	fix[0] = '\0';
	if (v[0] && !strpbrk(v, "/:@?# \t"))
		return;
	s = s ? s + 3 : v;
	end = s + strcspn(s, "/?#");
	at = memchr(s, '@', (size_t)(end - s));
	if (at)
		s = at + 1;
	n = s[0] == '[' ? 0 : strcspn(s, ":/?#@ \t");
	if (n == 0)
		snprintf(fix, len, "?");
	else
		snprintf(fix, len, "%.*s", (int)n, s);
}

/* Whether entry e is one spd reads from file; when not, p says why. */
static bool entry_ok(const git_config_entry *e, enum conftab_file file,
		     struct problem *p)
{
	const char *name = e->name, *dot = strchr(name, '.');
	const char *last = strrchr(name, '.');
	const char *fname = file == SPD ? "spd.conf" : ".spd.conf";
	const struct section *s;
	const struct key *k;
	char shown[320];
	size_t seclen;

	if (!dot || !last[1])
		return true; /* libgit2 reads no such entry */
	seclen = (size_t)(dot - name);
	memset(&p->w, 0, sizeof(p->w));
	p->w.sec = name;
	p->w.seclen = seclen;
	if (last > dot) {
		p->w.sub = dot + 1;
		p->w.sublen = (size_t)(last - dot - 1);
		snprintf(shown, sizeof(shown), "[%.*s \"%.*s\"]", (int)seclen,
			 name, (int)p->w.sublen, p->w.sub);
	} else {
		snprintf(shown, sizeof(shown), "[%.*s]", (int)seclen, name);
	}
	s = section_find(name, seclen);
	if (!s || !(s->files & file)) {
		const struct section *best = NULL;
		char sec[64];

		if (s && file == PRJ && strcmp(s->name, "include") == 0) {
			snprintf(p->what, sizeof(p->what),
				 "a project's .spd.conf may not include other "
				 "files (an included file would not be "
				 "protected from the agent)");
			return false;
		}
		if (s) {
			snprintf(p->what, sizeof(p->what),
				 "[%s] is read from %s, not from %s", s->name,
				 file == SPD ? "a project's .spd.conf"
					     : "the operator's spd.conf",
				 fname);
			return false;
		}
		snprintf(sec, sizeof(sec), "%.*s", (int)seclen, name);
		for (size_t i = 0; i < ARRAY_SIZE(sections) && !best; i++)
			if ((sections[i].files & file) &&
			    near(sec, sections[i].name))
				best = &sections[i];
		if (best)
			snprintf(p->what, sizeof(p->what),
				 "unknown section %s; did you mean [%s]?",
				 shown, best->name);
		else
			snprintf(p->what, sizeof(p->what),
				 "unknown section %s in %s (see spd.conf(5))",
				 shown, fname);
		return false;
	}
	if (s->named && !p->w.sub) {
		snprintf(p->what, sizeof(p->what),
			 "[%s] needs a name: [%s \"NAME\"]", s->name, s->name);
		return false;
	}
	if (!s->named && p->w.sub && s->named_keys && file == SPD) {
		p->w.key = last + 1;
		if (!key_find_in(s->named_keys, last + 1)) {
			snprintf(p->what, sizeof(p->what),
				 "unknown key \"%.64s\" in %.64s (known: "
				 "allow, deny)",
				 last + 1, shown);
			return false;
		}
		return true;
	}
	if (!s->named && p->w.sub) {
		snprintf(p->what, sizeof(p->what),
			 "%s: [%s] takes no name; write [%s]", shown, s->name,
			 s->name);
		return false;
	}
	p->w.key = last + 1;
	k = key_find(s, last + 1);
	if (!k) {
		const struct key *best = NULL;
		char known[256] = "";
		size_t n = 0;

		for (const struct key *c = s->keys; c->name; c++) {
			if (!best && near(last + 1, c->name))
				best = c;
			n += (size_t)snprintf(known + n, sizeof(known) - n,
					      "%s%s", n ? ", " : "", c->name);
			if (n >= sizeof(known))
				break;
		}
		/* Each part bounded so that the whole fits p->what: the key
		 * and the section are named first, the known list cut. */
		if (best)
			snprintf(p->what, sizeof(p->what),
				 "unknown key \"%.64s\" in %.64s; did you "
				 "mean \"%.64s\"?",
				 last + 1, shown, best->name);
		else
			snprintf(p->what, sizeof(p->what),
				 "unknown key \"%.64s\" in %.64s (known: "
				 "%.200s)",
				 last + 1, shown, known);
		return false;
	}
	if (k->kind == K_HOST) {
		const char *v = e->value ? e->value : "";
		char fix[256];

		host_fix(v, fix, sizeof(fix));
		if (fix[0] && strcmp(fix, "?") != 0) {
			snprintf(p->what, sizeof(p->what),
				 "%s takes a host name: %s (not \"%s\"; no "
				 "scheme, port or path)",
				 k->name, fix, v);
			return false;
		}
		if (fix[0] || !v[0]) {
			snprintf(p->what, sizeof(p->what),
				 "%s takes a host name such as pypi.org or "
				 "*.example.com, not \"%s\"",
				 k->name, v);
			return false;
		}
	}
	return true;
}

/* Which occurrence (from 0) of name, among the file's own entries, the
 * idx-th entry is: the key's line among its repeats. */
static unsigned occurrence(git_config *gc, const char *name, size_t idx)
{
	git_config_iterator *it = NULL;
	git_config_entry *e;
	unsigned n = 0;

	if (git_config_iterator_new(&it, gc) < 0)
		return 0;
	for (size_t i = 0; i < idx && git_config_next(&e, it) == 0; i++)
		if (e->include_depth == 0 && strcmp(e->name, name) == 0)
			n++;
	git_config_iterator_free(it);
	return n;
}

int conftab_check(git_config *gc, const char *path, const char *shown,
		  enum conftab_file file, char *errbuf, size_t errlen)
{
	git_config_iterator *it = NULL;
	git_config_entry *e;
	struct problem p;
	size_t idx = 0;
	bool bad = false;
	unsigned line = 0;
	char *text, *name = NULL;

	if (!shown)
		shown = path;
	if (git_config_iterator_new(&it, gc) < 0) {
		snprintf(errbuf, errlen, "%s: cannot be read", shown);
		return -EIO;
	}
	while (git_config_next(&e, it) == 0) {
		if (!entry_ok(e, file, &p)) {
			bad = true;
			if (e->include_depth == 0)
				name = strdup(e->name);
			break;
		}
		idx++;
	}
	git_config_iterator_free(it);
	if (!bad)
		return 0;
	/* The want points into the entry's name, which the iterator
	 * owned: point it at the copy. */
	if (name) {
		const char *dot = strchr(name, '.'), *last = strrchr(name, '.');

		p.w.sec = name;
		p.w.sub = p.w.sub ? dot + 1 : NULL;
		if (p.w.key) {
			p.w.key = last + 1;
			p.w.nth = occurrence(gc, name, idx);
		}
		text = slurp(path);
		if (text)
			line = locate(text, &p.w);
		free(text);
	}
	if (line)
		snprintf(errbuf, errlen, "%s:%u: %s", shown, line, p.what);
	else
		snprintf(errbuf, errlen, "%s: %s", shown, p.what);
	free(name);
	return -EINVAL;
}

void conftab_each(void (*cb)(void *data, const char *section, bool named,
			     const char *key, unsigned files),
		  void *data)
{
	for (size_t i = 0; i < ARRAY_SIZE(sections); i++) {
		if (sections[i].keys == include_keys)
			continue;
		for (const struct key *k = sections[i].keys; k->name; k++)
			cb(data, sections[i].name, sections[i].named, k->name,
			   sections[i].files);
		for (const struct key *k = sections[i].named_keys; k && k->name;
		     k++)
			cb(data, sections[i].name, true, k->name, SPD);
	}
}

int conftab_open(const char *path, const char *shown, enum conftab_file file,
		 struct git_config **ret, char *errbuf, size_t errlen)
{
	/* Once per process and never shut down: libgit2's start-up
	 * initialises OpenSSL, which costs milliseconds. */
	static bool ready;
	git_config *gc = NULL;
	git_config_iterator *it = NULL;
	git_config_entry *e;
	const char *name = shown ? shown : path;
	int r;

	*ret = NULL;
	if (access(path, F_OK) < 0 && errno == ENOENT)
		return -ENOENT;
	if (!ready) {
		if (git_libgit2_init() < 0) {
			snprintf(errbuf, errlen, "%s: libgit2 cannot start",
				 name);
			return -EIO;
		}
		ready = true;
	}
	if (git_config_open_ondisk(&gc, path) < 0) {
		const git_error *ge = git_error_last();

		snprintf(errbuf, errlen, "%s: %s", name,
			 ge && ge->message ? ge->message : "cannot be read");
		return -EINVAL;
	}
	if (file == CONFTAB_PROJECT) {
		if (git_config_iterator_new(&it, gc) < 0) {
			snprintf(errbuf, errlen, "%s: cannot be read", name);
			r = -EINVAL;
			goto fail;
		}
		while (git_config_next(&e, it) == 0)
			if (strncasecmp(e->name, "include.", 8) == 0 ||
			    strncasecmp(e->name, "includeif.", 10) == 0) {
				snprintf(errbuf, errlen,
					 "%s: a project's .spd.conf may not "
					 "include other files",
					 name);
				r = -EINVAL;
				goto fail;
			}
		git_config_iterator_free(it);
		it = NULL;
	}
	r = conftab_check(gc, path, shown, file, errbuf, errlen);
	if (r < 0)
		goto fail;
	*ret = gc;
	return 0;
fail:
	git_config_iterator_free(it);
	git_config_free(gc);
	return r;
}

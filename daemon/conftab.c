/*
 * The table of spd.conf's and .spd.conf's sections and keys, and the
 * validator (conftab.h).  libgit2 parses; this file only walks its
 * entries and, for a message, finds an entry's line by scanning the
 * file's text (libgit2 keeps no line numbers).
 */
#include <fcntl.h>
#include <errno.h>
#include <sodium.h>
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
#include "daemon/spd.h"

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
	enum conftab_type type;
	int64_t min, max;
	const char *choices, *def, *doc;
	unsigned flags;
	size_t off, size;
	uint32_t scale;
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

#define FIELD(f)                                                               \
	.off = offsetof(struct spd_config, f) + 1,                             \
	.size = sizeof(((struct spd_config *)0)->f)
/* A whole number read into field f (times scale), within lo..hi. */
#define INT(n, lo, hi, d, f, sc, fl, text)                                     \
	{                                                                      \
		.name = n, .type = CONFTAB_INT, .min = lo, .max = hi,          \
		.def = d, .doc = text, .flags = fl, FIELD(f), .scale = sc      \
	}
/* US dollars into picodollars, within lo..hi picodollars. */
#define USD(n, lo, hi, d, f, text)                                             \
	{                                                                      \
		.name = n, .type = CONFTAB_USD, .min = lo, .max = hi,          \
		.def = d, .doc = text, FIELD(f), .scale = 1                    \
	}
/* A key its section's reader reads (no field of its own here). */
#define KEY(n, t, k, d, fl, text)                                              \
	{                                                                      \
		.name = n, .kind = k, .type = t, .def = d, .doc = text,        \
		.flags = fl                                                    \
	}
#define END                                                                    \
	{                                                                      \
		.name = NULL                                                   \
	}
#define R CONFTAB_RESTART
#define PUSD 1000000000000LL /* picodollars in a dollar */

/*
 * Every key, by the file that reads it; each list ends with END.  The
 * defaults and ranges are the ones whose reasons the named constants
 * give (QUOTA_*, BROKER_*, GATE_WAIT_*, SBXP_RUNS_MAX ...):
 * tests/unit/test_common.c checks they agree.
 */
static const struct key sandbox_keys[] = {
    {.name = "mode",
     .type = CONFTAB_ENUM,
     .choices = "required|best-effort",
     .def = "required",
     .doc = "refuse runs when a sandbox layer is missing, or run with "
	    "what the host has",
     .flags = R,
     FIELD(sandbox_mode)},
    KEY("user", CONFTAB_STR, K_ANY, "nobody", R,
	"the unprivileged user runs are when spd runs as root"),
    KEY("writable", CONFTAB_LIST, K_ANY, NULL, 0,
	"an absolute path every run may also write"),
    KEY("hidden", CONFTAB_LIST, K_ANY, NULL, 0,
	"a path (absolute or ~/) no run and no file tool sees"),
    INT("timeout", 1, 24 * 3600, "600", default_timeout_ms, 1000, 0,
	"seconds a run may take unless it asks for another deadline"),
    INT("output-cap", 1024, 256 * 1024 * 1024, "1048576", output_cap, 1, 0,
	"bytes of each output stream a run's reply keeps"),
    INT("kill-grace", 0, 300, "5", kill_grace_ms, 1000, 0,
	"seconds a run has from SIGTERM to SIGKILL when spd ends it"),
    END};
static const struct key secrets_keys[] = {
    KEY("file", CONFTAB_LIST, K_ANY, NULL, R,
	"an absolute path of a file of keys to redact and keep from runs"),
    END};
static const struct key journal_keys[] = {
    INT("queue-max", 64 * 1024, (int64_t)1 << 30, "67108864", journal_queue_max,
	1, R, "bytes of rows waiting for the disk before spd refuses requests"),
    END};
static const struct key limits_keys[] = {
    INT("auth-timeout", 1, 600, "5", auth_timeout_ms, 1000, 0,
	"seconds a connection has to present a valid token"),
    INT("grant-lifetime", 1, 24 * 3600, "600", grant_lifetime_ms, 1000, 0,
	"seconds an approval given ahead of its call stays usable"),
    INT("session-connections", 1, 2048, "64", session_conns, 1, 0,
	"connections one session may hold open"),
    INT("session-runs", 1, 256, "16", session_runs, 1, 0,
	"runs one session may have in flight"),
    INT("session-journal-rate", 1, 1000000, "1200", session_journal_rate, 1, 0,
	"journaled requests one session may make a minute"),
    INT("operator-connections", 1, 2047, "64", operator_conns, 1, 0,
	"connection slots only the operator may take"),
    INT("operator-runs", 1, 255, "32", operator_runs, 1, 0,
	"run slots only the operator may take"),
    INT("proxy-head-timeout", 1, 3600, "30", proxy_head_timeout_s, 1, 0,
	"seconds a proxied request has to send its head"),
    INT("proxy-idle-timeout", 1, 24 * 3600, "900", proxy_idle_timeout_s, 1, 0,
	"seconds a proxied connection may stay idle"),
    END};
static const struct key approvals_keys[] = {
    INT("timeout", 1, 24 * 3600, "600", approval_timeout_ms, 1000, 0,
	"seconds an ask waits for a person before it is refused"),
    END};
static const struct key session_keys[] = {
    KEY("git-name", CONFTAB_STR, K_ANY, "agent <session id>", 0,
	"the author name of agents' commits"),
    KEY("git-email", CONFTAB_STR, K_ANY, NULL, 0,
	"the author address of agents' commits"),
    END};
static const struct key broker_keys[] = {
    USD("cap-default", 0, 1000000 * PUSD, "1.00", broker.cap_default,
	"USD a turn may spend unless it asks for another cap"),
    USD("cap-max", 1, 1000000 * PUSD, "10.00", broker.cap_max,
	"the most USD a turn may be given"),
    INT("idle-timeout", 1, 7 * 24 * 3600, "3600", broker.idle_timeout_s, 1, 0,
	"seconds a turn's key lives unused"),
    INT("body-max", 1024, 256 * 1024 * 1024, "33554432", broker.body_max, 1, 0,
	"bytes of one model request's body"),
    INT("provider-timeout", 1, 24 * 3600, "600", broker.provider_timeout_s, 1,
	0, "seconds a provider may stay silent in a call"),
    INT("keepalive-timeout", 1, 3600, "30", broker.keepalive_timeout_s, 1, 0,
	"seconds a kept-alive connection to the broker may idle"),
    KEY("listen", CONFTAB_STR, K_ANY, "127.0.0.1:0", R,
	"the broker's loopback address and port, or none: socket only"),
    USD("session-cap", 1, 1000000 * PUSD, "10.00", broker.session_cap,
	"USD one session's turns may spend together"),
    INT("min-output", 1, 10000000, "1024", broker.min_output, 1, 0,
	"the fewest output tokens a call's limit is lowered to"),
    END};
static const struct key provider_keys[] = {
    KEY("url", CONFTAB_STR, K_ANY, NULL, 0,
	"the provider's https:// base URL (http:// only to loopback)"),
    KEY("key", CONFTAB_STR, K_ANY, NULL, 0,
	"the environment file's variable holding the provider's key"),
    {.name = "api",
     .type = CONFTAB_ENUM,
     .choices = "anthropic|openai|gemini",
     .doc = "the provider's protocol (default: by the provider's name)"},
    END};
static const struct key model_keys[] = {
    KEY("input", CONFTAB_STR, K_ANY, NULL, 0, "USD per million input tokens"),
    KEY("output", CONFTAB_STR, K_ANY, NULL, 0, "USD per million output tokens"),
    KEY("cache-read", CONFTAB_STR, K_ANY, NULL, 0,
	"USD per million tokens read from the cache"),
    KEY("cache-write", CONFTAB_STR, K_ANY, NULL, 0,
	"USD per million tokens written to the cache"),
    KEY("cache-write-1h", CONFTAB_STR, K_ANY, NULL, 0,
	"USD per million tokens written to the cache for an hour"),
    KEY("max-output", CONFTAB_INT, K_ANY, NULL, 0,
	"the most output tokens the model writes in one call"),
    END};
static const struct key policy_keys[] = {
    KEY("allow", CONFTAB_LIST, K_ANY, NULL, 0,
	"a command prefix that runs without asking"),
    KEY("allow-exact", CONFTAB_LIST, K_ANY, NULL, 0,
	"a whole command line that runs without asking"),
    KEY("ask", CONFTAB_LIST, K_ANY, NULL, 0,
	"a command prefix a person decides on"),
    KEY("deny", CONFTAB_LIST, K_ANY, NULL, 0,
	"a command prefix that is refused"),
    KEY("protected", CONFTAB_LIST, K_ANY, NULL, 0,
	"a path pattern only a person may let a run change"),
    KEY("readable", CONFTAB_LIST, K_ANY, NULL, 0,
	"a path outside the workspace the file tools may read"),
    END};
/* A project's allow-address and resolve are read to be set aside and
 * journaled (proxy/project.c), so they are known keys there too. */
static const struct key network_keys[] = {
    KEY("allow", CONFTAB_LIST, K_ANY, NULL, 0,
	"a command prefix that may have the network"),
    KEY("allow-host", CONFTAB_LIST, K_HOST, NULL, 0,
	"a host (or *.name) proxy runs may reach"),
    KEY("deny-host", CONFTAB_LIST, K_HOST, NULL, 0,
	"a host proxy runs never reach"),
    KEY("ask-host", CONFTAB_LIST, K_HOST, NULL, 0,
	"a host a person decides on, connection by connection"),
    KEY("allow-address", CONFTAB_LIST, K_ANY, NULL, 0,
	"a private or loopback address an allowed name may resolve to"),
    KEY("resolve", CONFTAB_LIST, K_ANY, NULL, 0,
	"NAME.test:ADDRESS, the proxy's resolver override (a test aid)"),
    KEY("test-ca", CONFTAB_STR, K_ANY, NULL, R,
	"a CA file trusted upstream for names under .test (a test aid)"),
    KEY("ca-bundle", CONFTAB_STR, K_ANY, NULL, R,
	"where the CA bundle a proxy run trusts is written"),
    END};
/* [network "HOST"]: the request rules of a host spd terminates. */
static const struct key network_host_keys[] = {
    KEY("allow", CONFTAB_LIST, K_ANY, NULL, 0,
	"METHOD PATH-PATTERN a run may send to the host"),
    KEY("deny", CONFTAB_LIST, K_ANY, NULL, 0,
	"METHOD PATH-PATTERN refused to a run"),
    KEY("preset", CONFTAB_LIST, K_ANY, NULL, 0,
	"a named set of rules (read-only, npm-read, git-read, git, ...)"),
    END};
static const struct key credential_keys[] = {
    KEY("host", CONFTAB_LIST, K_HOST, NULL, 0,
	"a host whose requests the proxy adds the credential to"),
    KEY("header", CONFTAB_STR, K_ANY, NULL, 0,
	"NAME: VALUE added to each request (${VAR} from the environment "
	"file)"),
    KEY("basic", CONFTAB_STR, K_ANY, NULL, 0,
	"USER:PASSWORD sent as basic authentication (${VAR} too)"),
    KEY("push-ref", CONFTAB_LIST, K_ANY, NULL, 0,
	"session, or a ref glob a session's git push may update"),
    KEY("push-force", CONFTAB_BOOL, K_ANY, "false", 0,
	"true: a session's push may rewrite history"),
    KEY("push-delete", CONFTAB_BOOL, K_ANY, "false", 0,
	"true: a session's push may delete a ref"),
    END};
static const struct key provenance_keys[] = {
    KEY("trusted", CONFTAB_LIST, K_ANY, NULL, 0,
	"files trusted as the base commit holds them"),
    KEY("private", CONFTAB_LIST, K_ANY, NULL, 0,
	"files whose read is a read of private data"),
    KEY("untrusted", CONFTAB_LIST, K_ANY, NULL, 0,
	"more labels that make a session untrusted (worktree, mcp:*)"),
    KEY("ask", CONFTAB_LIST, K_ANY, "all", 0,
	"what asks once untrusted: egress commit merge config, all, none"),
    END};
static const struct key attest_keys[] = {
    KEY("trust", CONFTAB_LIST, K_ANY, NULL, 0,
	"a public key (ed25519:BASE64) whose attestations are accepted"),
    END};
static const struct key check_keys[] = {
    KEY("run", CONFTAB_LIST, K_ANY, NULL, 0,
	"a command the check runs in the worktree"),
    END};
static const struct key verify_keys[] = {
    KEY("require", CONFTAB_LIST, K_ANY, NULL, 0,
	"an exact command line the session must have run, for its "
	"verification to pass"),
    {.name = "agent",
     .type = CONFTAB_BOOL,
     .def = "false",
     .doc = "true: the session's agent may call session verify itself"},
    END};
/* libgit2 follows spd.conf's includes itself; a project's are refused
 * (policy.c): an included file would not be a protected path. */
static const struct key include_keys[] = {
    KEY("path", CONFTAB_LIST, K_ANY, NULL, 0, "a file read as if here"), END};

static const struct section sections[] = {
    {"sandbox", SPD, false, sandbox_keys, NULL},
    {"secrets", SPD, false, secrets_keys, NULL},
    {"journal", SPD, false, journal_keys, NULL},
    {"limits", SPD, false, limits_keys, NULL},
    {"approvals", SPD, false, approvals_keys, NULL},
    {"session", SPD, false, session_keys, NULL},
    {"attest", SPD, false, attest_keys, NULL},
    {"provenance", SPD, false, provenance_keys, NULL},
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

static struct conftab_key public_of(const struct section *s, bool named,
				    const struct key *k)
{
	return (struct conftab_key){.section = s->name,
				    .name = k->name,
				    .named = named,
				    .files =
					named && !s->named ? SPD : s->files,
				    .type = k->type,
				    .min = k->min,
				    .max = k->max,
				    .choices = k->choices,
				    .def = k->def,
				    .doc = k->doc,
				    .flags = k->flags,
				    .off = k->off,
				    .size = k->size,
				    .scale = k->scale};
}

int conftab_each(int (*cb)(void *data, const struct conftab_key *k), void *data)
{
	for (size_t i = 0; i < ARRAY_SIZE(sections); i++) {
		const struct section *s = &sections[i];
		int r;

		if (s->keys == include_keys)
			continue;
		for (const struct key *k = s->keys; k->name; k++) {
			struct conftab_key pk = public_of(s, s->named, k);

			r = cb(data, &pk);
			if (r)
				return r;
		}
		for (const struct key *k = s->named_keys; k && k->name; k++) {
			struct conftab_key pk = public_of(s, true, k);

			r = cb(data, &pk);
			if (r)
				return r;
		}
	}
	return 0;
}

bool conftab_find(const char *section, const char *name,
		  struct conftab_key *ret)
{
	const struct section *s = section_find(section, strlen(section));
	const struct key *k = s ? key_find(s, name) : NULL;

	if (!k && s && s->named_keys) {
		/* [network "HOST"] deny */
		k = key_find_in(s->named_keys, name);
		if (k) {
			*ret = public_of(s, true, k);
			return true;
		}
	}
	if (!k)
		return false;
	*ret = public_of(s, s->named, k);
	return true;
}

void conftab_range(const struct conftab_key *k, char *buf, size_t len)
{
	if (k->type == CONFTAB_INT && k->max > k->min)
		snprintf(buf, len, "%lld..%lld", (long long)k->min,
			 (long long)k->max);
	else if (k->type == CONFTAB_USD)
		snprintf(buf, len, "%s %lld USD",
			 k->min > 0 ? "more than 0, at most" : "0 to",
			 (long long)(k->max / PUSD));
	else if (k->type == CONFTAB_ENUM)
		snprintf(buf, len, "%s", k->choices);
	else if (len)
		buf[0] = '\0';
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

int conftab_file_sha256(const char *path, char hex[65])
{
	crypto_hash_sha256_state st;
	unsigned char h[crypto_hash_sha256_BYTES], buf[4096];
	ssize_t n = 0;
	int fd = path ? open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
	int err;

	snprintf(hex, 65, "absent");
	if (fd < 0)
		return path ? -errno : -EINVAL;
	crypto_hash_sha256_init(&st);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		crypto_hash_sha256_update(&st, buf, (size_t)n);
	err = errno;
	close(fd);
	if (n < 0) {
		snprintf(hex, 65, "unreadable");
		return -err;
	}
	crypto_hash_sha256_final(&st, h);
	sodium_bin2hex(hex, 65, h, sizeof(h));
	return 0;
}

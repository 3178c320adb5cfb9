/*
 * The proxy's spd.conf keys for the hosts it terminates: [credential
 * "NAME"] (host, header, basic), [network "HOST"] allow and deny
 * (METHOD /glob), and [network] test-ca; and the decisions on them that
 * need no I/O.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <git2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/config.h"
#include "daemon/proxy/proxy.h"
#include "daemon/proxy/proxy_priv.h"
#include "daemon/spd.h"
#include "common/strv.h"

/* The most credentials and request rules: each is looked at for every
 * CONNECT. */
#define CREDS_MAX 64
#define HTTP_RULES_MAX 1024

struct load {
	struct spd_config *cfg;
	const char *path;
	char *errbuf;
	size_t errlen;
};

/* pattern: "name" or "*.suffix" (as rules.c's host rules). */
static bool host_match(const char *pattern, const char *host)
{
	size_t plen = strlen(pattern), hlen = strlen(host);

	if (plen && pattern[plen - 1] == '.')
		plen--;
	if (hlen && host[hlen - 1] == '.')
		hlen--;
	if (plen > 2 && pattern[0] == '*' && pattern[1] == '.')
		return hlen > plen - 1 &&
		       strncasecmp(host + hlen - (plen - 1), pattern + 1,
				   plen - 1) == 0;
	return plen == hlen && strncasecmp(pattern, host, hlen) == 0;
}

/* A ${VAR} template: each ${ closed, VAR a secret name; no other $; at
 * least one ${VAR}, so that the secret part is one spd redacts (a value
 * written into spd.conf itself would not be). */
static bool template_ok(const char *v)
{
	if (!strstr(v, "${"))
		return false;
	for (const char *p = v; *p; p++) {
		if (*p == '\r' || *p == '\n')
			return false;
		if (*p != '$')
			continue;
		if (p[1] != '{')
			return false;
		p += 2;
		if (!*p || *p == '}')
			return false;
		for (; *p && *p != '}'; p++)
			if (!isalnum((unsigned char)*p) && *p != '_' &&
			    *p != '.' && *p != '-')
				return false;
		if (*p != '}')
			return false;
	}
	return true;
}

static struct proxy_credential *cred_get(struct load *l, const char *name,
					 size_t nlen)
{
	struct spd_config *cfg = l->cfg;
	struct proxy_credential *c;

	for (size_t i = 0; i < cfg->proxy_ncreds; i++)
		if (strlen(cfg->proxy_creds[i].name) == nlen &&
		    strncmp(cfg->proxy_creds[i].name, name, nlen) == 0)
			return &cfg->proxy_creds[i];
	if (cfg->proxy_ncreds == CREDS_MAX) {
		snprintf(l->errbuf, l->errlen,
			 "%s: more than %d [credential] sections", l->path,
			 CREDS_MAX);
		return NULL;
	}
	if (!cfg->proxy_creds &&
	    !(cfg->proxy_creds = calloc(CREDS_MAX, sizeof(*c))))
		return NULL;
	c = &cfg->proxy_creds[cfg->proxy_ncreds];
	if (!(c->name = strndup(name, nlen)))
		return NULL;
	cfg->proxy_ncreds++;
	return c;
}

/* push-ref = "session", or a glob of full ref names (spd.conf(5)):
 * each value adds one. */
static int push_ref_entry(struct load *l, struct proxy_credential *c,
			  const char *v)
{
	size_t n = 0;
	char **r;

	if (strcmp(v, "session") != 0 &&
	    (strncmp(v, "refs/", 5) != 0 || strlen(v) >= PROXY_REF_MAX ||
	     strpbrk(v, " \t:?[\\^~") || strstr(v, ".."))) {
		snprintf(l->errbuf, l->errlen,
			 "%s: [credential \"%s\"] push-ref \"%s\" must be "
			 "\"session\" or a ref glob (refs/heads/spd/**)",
			 l->path, c->name, v);
		return -EINVAL;
	}
	while (c->push_refs && c->push_refs[n])
		n++;
	r = realloc(c->push_refs, (n + 2) * sizeof(*r));
	if (!r)
		return -ENOMEM;
	c->push_refs = r;
	if (!(r[n] = strdup(v)))
		return -ENOMEM;
	r[n + 1] = NULL;
	return 0;
}

static int cred_entry(const git_config_entry *e, void *data)
{
	struct load *l = data;
	const char *sub = strchr(e->name, '.') + 1,
		   *key = strrchr(e->name, '.') + 1, *v = e->value;
	struct proxy_credential *c;

	if (key <= sub)
		return 0; /* [credential] without a name: conftab refuses it */
	c = cred_get(l, sub, (size_t)(key - 1 - sub));
	if (!c)
		return l->errbuf[0] ? -EINVAL : -ENOMEM;
	if (!v)
		v = "";
	if (strcasecmp(key, "host") == 0) {
		size_t n = 0;
		char **h;

		while (c->hosts && c->hosts[n])
			n++;
		if (!v[0] || strpbrk(v, "/: ")) {
			snprintf(
			    l->errbuf, l->errlen,
			    "%s: [credential \"%s\"] host \"%s\" must be a "
			    "host name or *.name",
			    l->path, c->name, v);
			return -EINVAL;
		}
		h = realloc(c->hosts, (n + 2) * sizeof(*h));
		if (!h)
			return -ENOMEM;
		c->hosts = h;
		if (!(h[n] = strdup(v)))
			return -ENOMEM;
		h[n + 1] = NULL;
		return 0;
	}
	if (strcasecmp(key, "push-ref") == 0)
		return push_ref_entry(l, c, v);
	if (strcasecmp(key, "push-force") == 0 ||
	    strcasecmp(key, "push-delete") == 0) {
		int b;

		if (git_config_parse_bool(&b, v) < 0) {
			git_error_clear();
			snprintf(l->errbuf, l->errlen,
				 "%s: [credential \"%s\"] %s must be true or "
				 "false",
				 l->path, c->name, key);
			return -EINVAL;
		}
		*(strcasecmp(key, "push-force") == 0 ? &c->push_force
						     : &c->push_delete) = b;
		return 0;
	}
	if (c->value) {
		snprintf(l->errbuf, l->errlen,
			 "%s: [credential \"%s\"] has more than one header or "
			 "basic",
			 l->path, c->name);
		return -EINVAL;
	}
	if (strcasecmp(key, "basic") == 0) {
		if (!strchr(v, ':') || !template_ok(v)) {
			snprintf(l->errbuf, l->errlen,
				 "%s: [credential \"%s\"] basic must be "
				 "USER:${VAR}, VAR a value of spd's "
				 "environment file",
				 l->path, c->name);
			return -EINVAL;
		}
		c->basic = true;
		c->header_name = strdup("Authorization");
		c->value = strdup(v);
	} else { /* header */
		const char *colon = strchr(v, ':');
		const char *val = colon ? colon + 1 : NULL;

		while (val && *val == ' ')
			val++;
		if (!colon || colon == v || !val[0] || !template_ok(val) ||
		    strcspn(v, " \t:") != (size_t)(colon - v)) {
			snprintf(l->errbuf, l->errlen,
				 "%s: [credential \"%s\"] header must be "
				 "\"Name: value\", the value with ${VAR} for a "
				 "value of spd's environment file",
				 l->path, c->name);
			return -EINVAL;
		}
		c->header_name = strndup(v, (size_t)(colon - v));
		c->value = strdup(val);
	}
	return c->header_name && c->value ? 0 : -ENOMEM;
}

/* "METHOD /glob": a method of letters (or *), then a path from "/". */
static int http_rule_entry(struct load *l, const char *host, size_t hlen,
			   const char *key, const char *v)
{
	struct spd_config *cfg = l->cfg;
	struct proxy_http_rule *r;
	const char *sp;
	size_t mlen;

	if (!v)
		v = "";
	sp = strchr(v, ' ');
	mlen = sp ? (size_t)(sp - v) : 0;
	for (size_t i = 0; i < mlen; i++)
		if (!isupper((unsigned char)v[i]) &&
		    !(mlen == 1 && v[i] == '*'))
			mlen = 0;
	while (sp && *sp == ' ')
		sp++;
	if (!mlen || mlen > 16 || !sp || sp[0] != '/' || strpbrk(sp, " \t?")) {
		snprintf(l->errbuf, l->errlen,
			 "%s: [network \"%.*s\"] %s = \"%s\" must be METHOD "
			 "/path (GET /repos/**; * for any method)",
			 l->path, (int)hlen, host, key, v);
		return -EINVAL;
	}
	if (cfg->proxy_nhttp_rules == HTTP_RULES_MAX) {
		snprintf(l->errbuf, l->errlen,
			 "%s: more than %d [network] rules", l->path,
			 HTTP_RULES_MAX);
		return -EINVAL;
	}
	if (!cfg->proxy_http_rules &&
	    !(cfg->proxy_http_rules = calloc(HTTP_RULES_MAX, sizeof(*r))))
		return -ENOMEM;
	r = &cfg->proxy_http_rules[cfg->proxy_nhttp_rules++];
	r->allow = strcasecmp(key, "allow") == 0;
	r->host = strndup(host, hlen);
	r->method = strndup(v, mlen);
	r->path = strdup(sp);
	if (asprintf(&r->text, "%s = %s", r->allow ? "allow" : "deny", v) < 0)
		r->text = NULL;
	return r->host && r->method && r->path && r->text ? 0 : -ENOMEM;
}

/* [network "HOST"] preset = NAME: rules for a common case, in place of
 * the lines they stand for (where the preset line is: file order still
 * decides).  spd.conf(5) lists them. */
static const struct {
	const char *name;
	const char *const rules[8];
} presets[] = {
    {"read-only", {"allow GET /**", "allow HEAD /**"}},
    {"npm-read", {"allow GET /**", "allow HEAD /**"}},
    {"git-read", {"allow GET /**/info/refs", "allow POST /**/git-upload-pack"}},
    {"git",
     {"allow GET /**/info/refs", "allow POST /**/git-upload-pack",
      "allow POST /**/git-receive-pack"}},
    {"github-read-only",
     {"allow GET /**", "allow HEAD /**", "allow POST /**/git-upload-pack"}},
    {"github-pull-requests",
     {"allow GET /**", "allow HEAD /**", "allow POST /**/git-upload-pack",
      "allow POST /**/git-receive-pack", "allow POST /repos/*/*/pulls",
      "allow POST /repos/*/*/issues/*/comments"}},
};

static int preset_entry(struct load *l, const char *host, size_t hlen,
			const char *v)
{
	char known[256] = "";

	for (size_t i = 0; v && i < sizeof(presets) / sizeof(presets[0]); i++) {
		if (strcmp(presets[i].name, v) != 0)
			continue;
		for (size_t k = 0; presets[i].rules[k]; k++) {
			const char *rl = presets[i].rules[k];
			const char *sp = strchr(rl, ' ');
			char key[8], text[300];
			struct proxy_http_rule *r;
			int err;

			snprintf(key, sizeof(key), "%.*s", (int)(sp - rl), rl);
			err = http_rule_entry(l, host, hlen, key, sp + 1);
			if (err < 0)
				return err;
			/* Named as the preset's in a refusal or a row. */
			r = &l->cfg
				 ->proxy_http_rules[l->cfg->proxy_nhttp_rules -
						    1];
			snprintf(text, sizeof(text), "%s (preset %s)", r->text,
				 v);
			free(r->text);
			if (!(r->text = strdup(text)))
				return -ENOMEM;
		}
		return 0;
	}
	for (size_t i = 0; i < sizeof(presets) / sizeof(presets[0]); i++)
		snprintf(known + strlen(known), sizeof(known) - strlen(known),
			 "%s%s", i ? ", " : "", presets[i].name);
	snprintf(l->errbuf, l->errlen,
		 "%s: [network \"%.*s\"] preset \"%s\" is none of spd's "
		 "(%s)",
		 l->path, (int)hlen, host, v ? v : "", known);
	return -EINVAL;
}

static int network_entry(const git_config_entry *e, void *data)
{
	struct load *l = data;
	const char *sub = strchr(e->name, '.') + 1,
		   *key = strrchr(e->name, '.') + 1;

	if (key <= sub) {
		char **dst = strcasecmp(key, "test-ca") == 0
				 ? &l->cfg->proxy_test_ca
			     : strcasecmp(key, "ca-bundle") == 0
				 ? &l->cfg->proxy_ca_bundle
				 : NULL;

		if (!dst)
			return 0;
		free(*dst);
		*dst = e->value ? strdup(e->value) : NULL;
		if (!e->value || e->value[0] != '/') {
			snprintf(l->errbuf, l->errlen,
				 "%s: network.%s must be an absolute path",
				 l->path, key);
			return -EINVAL;
		}
		return *dst ? 0 : -ENOMEM;
	}
	if (strcasecmp(key, "preset") == 0)
		return preset_entry(l, sub, (size_t)(key - 1 - sub), e->value);
	if (strcasecmp(key, "allow") != 0 && strcasecmp(key, "deny") != 0)
		return 0; /* conftab refuses it */
	return http_rule_entry(l, sub, (size_t)(key - 1 - sub), key, e->value);
}

int proxy_config_load(git_config *gc, const char *path, struct spd_config *cfg,
		      char *errbuf, size_t errlen)
{
	struct load l = {cfg, path, errbuf, errlen};
	int r;

	errbuf[0] = '\0';
	r = config_foreach_prefix(gc, "credential.", cred_entry, &l);
	if (r == 0)
		r = config_foreach_prefix(gc, "network.", network_entry, &l);
	for (size_t i = 0; r == 0 && i < cfg->proxy_ncreds; i++) {
		const struct proxy_credential *c = &cfg->proxy_creds[i];

		if (!c->hosts || !c->value) {
			snprintf(errbuf, errlen,
				 "%s: [credential \"%s\"] needs a host and a "
				 "header or basic",
				 path, c->name);
			r = -EINVAL;
		}
	}
	if (r == -ENOMEM && !errbuf[0])
		snprintf(errbuf, errlen, "%s: out of memory", path);
	return r;
}

void proxy_config_free(struct spd_config *cfg)
{
	for (size_t i = 0; i < cfg->proxy_ncreds; i++) {
		struct proxy_credential *c = &cfg->proxy_creds[i];

		free(c->name);
		strv_free_array(c->hosts);
		strv_free_array(c->push_refs);
		free(c->header_name);
		free(c->value);
	}
	for (size_t i = 0; i < cfg->proxy_nhttp_rules; i++) {
		struct proxy_http_rule *r = &cfg->proxy_http_rules[i];

		free(r->host);
		free(r->method);
		free(r->path);
		free(r->text);
	}
	free(cfg->proxy_creds);
	free(cfg->proxy_http_rules);
	free(cfg->proxy_test_ca);
	free(cfg->proxy_ca_bundle);
	cfg->proxy_ca_bundle = NULL;
	cfg->proxy_creds = NULL;
	cfg->proxy_http_rules = NULL;
	cfg->proxy_test_ca = NULL;
	cfg->proxy_ncreds = cfg->proxy_nhttp_rules = 0;
}

const struct proxy_credential *
proxy_credential_for(const struct spd_config *cfg, const char *host)
{
	for (size_t i = 0; i < cfg->proxy_ncreds; i++)
		for (char **h = cfg->proxy_creds[i].hosts; h && *h; h++)
			if (host_match(*h, host))
				return &cfg->proxy_creds[i];
	return NULL;
}

bool proxy_terminates(const struct spd_config *cfg, const char *host)
{
	if (proxy_credential_for(cfg, host))
		return true;
	for (size_t i = 0; i < cfg->proxy_nhttp_rules; i++)
		if (host_match(cfg->proxy_http_rules[i].host, host))
			return true;
	return false;
}

bool proxy_path_glob(const char *g, const char *p)
{
	while (*g) {
		if (g[0] == '*' && g[1] == '*') {
			g += 2;
			/* "**" matches any run of characters, "/" too. */
			for (;; p++) {
				if (proxy_path_glob(g, p))
					return true;
				if (!*p)
					return false;
			}
		}
		if (*g == '*') {
			g++;
			for (;; p++) {
				if (proxy_path_glob(g, p))
					return true;
				if (!*p || *p == '/')
					return false;
			}
		}
		if (*g != *p)
			return false;
		g++;
		p++;
	}
	return !*p;
}

/* path with every %2F decoded to "/" (the reading of a server that
 * decodes it) into buf (size n): true when there was one to decode;
 * an over-long path reads as "//" (ambiguous: refused). */
static bool slash_decoded(const char *path, char *buf, size_t n)
{
	size_t o = 0;
	bool any = false;

	for (const char *p = path; *p; p++) {
		if (o + 2 > n) {
			snprintf(buf, n, "//");
			return true;
		}
		if (p[0] == '%' && p[1] == '2' &&
		    (p[2] == 'f' || p[2] == 'F')) {
			buf[o++] = '/';
			p += 2;
			any = true;
		} else {
			buf[o++] = *p;
		}
	}
	buf[o] = '\0';
	return any;
}

static const struct proxy_http_rule *
http_decide_one(const struct spd_config *cfg, const char *host,
		const char *method, const char *path, bool *ret_any)
{
	*ret_any = false;
	for (size_t i = 0; i < cfg->proxy_nhttp_rules; i++) {
		const struct proxy_http_rule *r = &cfg->proxy_http_rules[i];

		if (!host_match(r->host, host))
			continue;
		*ret_any = true;
		if ((strcmp(r->method, "*") == 0 ||
		     strcmp(r->method, method) == 0) &&
		    proxy_path_glob(r->path, path))
			return r;
	}
	return NULL;
}

/*
 * An encoded slash is no ambiguity by itself (npm asks for a scoped
 * package as /@scope%2Fname): a rule is decided on both readings, the
 * path as spelt and as a server that decodes %2F reads it, and only the
 * same rule for both decides (proxy_http_decide); but either reading
 * with dot segments or an empty segment is refused here.
 */
bool proxy_path_ambiguous(const char *p)
{
	char dec[2048];
	size_t n = strlen(p);

	return strstr(p, "/./") || strstr(p, "/../") || strstr(p, "//") ||
	       strchr(p, '\\') || strcasestr(p, "%2e") ||
	       strcasestr(p, "%5c") ||
	       (n >= 2 && strcmp(p + n - 2, "/.") == 0) ||
	       (n >= 3 && strcmp(p + n - 3, "/..") == 0) ||
	       (slash_decoded(p, dec, sizeof(dec)) &&
		proxy_path_ambiguous(dec));
}

const struct proxy_http_rule *proxy_http_decide(const struct spd_config *cfg,
						const char *host,
						const char *method,
						const char *path, bool *ret_any)
{
	const struct proxy_http_rule *r =
	    http_decide_one(cfg, host, method, path, ret_any);
	char dec[2048];
	bool any;

	/* Read either way, the request must meet the same rule. */
	if (r && slash_decoded(path, dec, sizeof(dec)) &&
	    http_decide_one(cfg, host, method, dec, &any) != r)
		return NULL;
	return r;
}

struct proxy_grant {
	struct proxy_grant *next;
	char *session, *host, *method, *path;
};

bool proxy_rule_ok(const char *method, const char *path)
{
	size_t m = strlen(method);

	if (!m || m > 16)
		return false;
	for (size_t i = 0; i < m; i++)
		if (!isupper((unsigned char)method[i]) &&
		    !(m == 1 && method[0] == '*'))
			return false;
	if (path[0] != '/' || strlen(path) > 1024)
		return false;
	for (const char *p = path; *p; p++)
		if ((unsigned char)*p <= ' ' || *p == '?' || *p == 0x7f)
			return false;
	return true;
}

/* The file in spd's state dir that keeps the approved rules across a
 * restart: a JSON array of {session, host, method, path}, oldest first. */
#define GRANTS_FILE "proxy-grants.json"
/* The most approved rules read back: each was one prompt of a session
 * (limits.session-prompts bounds them); more is not a file spd wrote. */
#define GRANTS_MAX 65536

static char *grants_path(const struct spd *spd)
{
	char *p;

	if (!spd->paths.state_dir ||
	    asprintf(&p, "%s/" GRANTS_FILE, spd->paths.state_dir) < 0)
		return NULL;
	return p;
}

/* Write every grant to the file (oldest first), then sync the state dir
 * so that the rename itself survives a crash.  0 or -errno. */
static int grants_save(const struct spd *spd)
{
	json_t *a = json_array();
	char *path = grants_path(spd), *text = NULL;
	int r = -ENOMEM, dfd;

	for (const struct proxy_grant *g = spd->proxy_grants; a && g;
	     g = g->next)
		if (json_array_insert_new(
			a, 0,
			json_pack("{s:s, s:s, s:s, s:s}", "session", g->session,
				  "host", g->host, "method", g->method, "path",
				  g->path)) < 0)
			goto out;
	if (!path || !a || !(text = json_dumps(a, JSON_COMPACT)))
		goto out;
	r = proxy_write_file(path, text, strlen(text), 0600);
	if (r == 0) {
		dfd = open(spd->paths.state_dir,
			   O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0 || fsync(dfd) < 0)
			r = -errno;
		if (dfd >= 0)
			close(dfd);
	}
out:
	free(text);
	free(path);
	json_decref(a);
	return r;
}

/* Add a grant to spd's list (nothing saved). */
static int grant_push(struct spd *spd, const char *session, const char *host,
		      const char *method, const char *path)
{
	struct proxy_grant *g = calloc(1, sizeof(*g));

	if (!g || !(g->session = strdup(session)) ||
	    !(g->host = strdup(host)) || !(g->method = strdup(method)) ||
	    !(g->path = strdup(path))) {
		if (g) {
			free(g->session);
			free(g->host);
			free(g->method);
		}
		free(g);
		return -ENOMEM;
	}
	g->next = spd->proxy_grants;
	spd->proxy_grants = g;
	return 0;
}

int proxy_grant_add(struct spd *spd, const char *session, const char *host,
		    const char *method, const char *path)
{
	int r = grant_push(spd, session, host, method, path);

	return r < 0 ? r : grants_save(spd);
}

int proxy_grants_load(struct spd *spd, char *errbuf, size_t errlen)
{
	char *path = grants_path(spd);
	json_error_t jerr;
	json_t *a, *g;
	size_t i;
	int r = 0;

	if (!path) {
		snprintf(errbuf, errlen, "out of memory");
		return -ENOMEM;
	}
	a = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	if (!a && access(path, F_OK) < 0 && errno == ENOENT) {
		free(path);
		return 0;
	}
	if (!json_is_array(a) || json_array_size(a) > GRANTS_MAX) {
		snprintf(errbuf, errlen,
			 "%s: the rules approved for sessions cannot be read "
			 "(%s); spd will not start without them: repair or "
			 "remove the file",
			 path, a ? "not a list" : jerr.text);
		r = -EINVAL;
		goto out;
	}
	json_array_foreach(a, i, g)
	{
		const char *se =
			       json_string_value(json_object_get(g, "session")),
			   *h = json_string_value(json_object_get(g, "host")),
			   *m = json_string_value(json_object_get(g, "method")),
			   *p = json_string_value(json_object_get(g, "path"));

		if (!se || !h || !m || !p || !proxy_rule_ok(m, p) ||
		    strlen(h) > PROXY_HOST_MAX) {
			snprintf(errbuf, errlen,
				 "%s: entry %zu is not an approved rule; spd "
				 "will not start without the rules: repair or "
				 "remove the file",
				 path, i + 1);
			r = -EINVAL;
			goto out;
		}
		if ((r = grant_push(spd, se, h, m, p)) < 0) {
			snprintf(errbuf, errlen, "%s: out of memory", path);
			goto out;
		}
	}
out:
	json_decref(a);
	free(path);
	return r;
}

bool proxy_granted(const struct spd *spd, const char *session, const char *host,
		   const char *method, const char *path)
{
	char dec[2048];

	if (!session)
		return false;
	for (const struct proxy_grant *g = spd->proxy_grants; g; g = g->next)
		if (strcmp(g->session, session) == 0 &&
		    host_match(g->host, host) &&
		    (strcmp(g->method, "*") == 0 ||
		     strcmp(g->method, method) == 0) &&
		    proxy_path_glob(g->path, path) &&
		    (!slash_decoded(path, dec, sizeof(dec)) ||
		     proxy_path_glob(g->path, dec)))
			return true;
	return false;
}

void proxy_grants_free(struct spd *spd)
{
	while (spd->proxy_grants) {
		struct proxy_grant *g = spd->proxy_grants;

		spd->proxy_grants = g->next;
		free(g->session);
		free(g->host);
		free(g->method);
		free(g->path);
		free(g);
	}
}

const char *proxy_push_refused(const struct proxy_credential *cr,
			       const char *session_ref,
			       const struct proxy_pkt_update *u, char *why,
			       size_t n, bool *ret_ff)
{
	static char *const session_only[] = {"session", NULL};
	char *const *refs = cr && cr->push_refs ? cr->push_refs : session_only;
	bool ok = false;

	*ret_ff = false;
	for (size_t i = 0; refs[i] && !ok; i++)
		ok = strcmp(refs[i], "session") == 0
			 ? session_ref && strcmp(u->ref, session_ref) == 0
			 : proxy_path_glob(refs[i], u->ref);
	if (!ok) {
		if (cr && cr->push_refs)
			snprintf(why, n,
				 "a push to %s: no push-ref of [credential "
				 "\"%s\"] allows it",
				 u->ref, cr->name);
		else
			snprintf(why, n,
				 "a push to %s: this session may push only to "
				 "%s",
				 u->ref,
				 session_ref ? session_ref
					     : "(no branch: it is detached)");
		return why;
	}
	if (proxy_oid_zero(u->new_id)) {
		if (cr && cr->push_delete)
			return NULL;
		snprintf(why, n, "deleting %s is refused", u->ref);
		return why;
	}
	*ret_ff = !proxy_oid_zero(u->old_id) && !(cr && cr->push_force);
	return NULL;
}

/* The most bytes of an spd.conf rewritten with a rule added: a
 * configuration file, not a data store. */
#define CONF_EDIT_MAX (4 * 1024 * 1024)

int proxy_conf_add_rule(const char *conf_path, const char *session,
			const char *host, const char *method, const char *path,
			char *errbuf, size_t errlen)
{
	char *real = NULL, *old = NULL, *text = NULL, *dir = NULL, *q;
	size_t hl = strlen(host), len = 0;
	struct stat st;
	FILE *f = NULL;
	int r = 0, dfd;

	errbuf[0] = '\0';
	if (!hl || hl > PROXY_HOST_MAX ||
	    strspn(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			 "0123456789.-") != hl ||
	    !proxy_rule_ok(method, path) ||
	    strspn(session,
		   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		   "0123456789_-") != strlen(session)) {
		snprintf(errbuf, errlen, "not a rule spd writes to spd.conf");
		return -EINVAL;
	}
	if (!(real = realpath(conf_path, NULL)) || !(f = fopen(real, "re")) ||
	    fstat(fileno(f), &st) < 0) {
		r = -errno;
		snprintf(errbuf, errlen, "%s: %s", conf_path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > CONF_EDIT_MAX ||
	    !(old = malloc((size_t)st.st_size + 1)) ||
	    (len = fread(old, 1, (size_t)st.st_size + 1, f)) !=
		(size_t)st.st_size) {
		r = -EIO;
		snprintf(errbuf, errlen, "%s: cannot read it whole", real);
		goto out;
	}
	/* The value quoted, so that a path's # or ; is not a comment. */
	if (!(q = malloc(2 * strlen(path) + 1))) {
		r = -ENOMEM;
		goto out;
	}
	{
		char *o = q;

		for (const char *p = path; *p; p++) {
			if (*p == '"' || *p == '\\')
				*o++ = '\\';
			*o++ = *p;
		}
		*o = '\0';
	}
	r = asprintf(
	    &text,
	    "%.*s%s# approved for session %s (spctl approve --always)\n"
	    "[network \"%s\"]\n\tallow = \"%s %s\"\n",
	    (int)len, old, len && old[len - 1] != '\n' ? "\n" : "", session,
	    host, method, q);
	free(q);
	if (r < 0) {
		text = NULL;
		r = -ENOMEM;
		goto out;
	}
	r = proxy_write_file(real, text, strlen(text), st.st_mode & 07777);
	if (r == 0 && (dir = strdup(real))) {
		*strrchr(dir, '/') = '\0';
		dfd = open(dir[0] ? dir : "/",
			   O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0 || fsync(dfd) < 0)
			r = -errno;
		if (dfd >= 0)
			close(dfd);
	}
	if (r < 0)
		snprintf(errbuf, errlen, "%s: %s", real, strerror(-r));
out:
	if (r == -ENOMEM && !errbuf[0])
		snprintf(errbuf, errlen, "out of memory");
	if (f)
		fclose(f);
	free(dir);
	free(text);
	free(old);
	free(real);
	return r < 0 ? r : 0;
}

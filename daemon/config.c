/*
 * spd.conf (daemon/config.h), read with libgit2's config API: the
 * [sandbox], [secrets], [journal] and [limits] keys, each checked and
 * refused with the key's name when out of range.
 */
#include <errno.h>
#include <git2.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/paths.h"
#include "common/strv.h"
#include "daemon/config.h"
#include "daemon/conftab.h"
#include "daemon/broker/price.h"
#include "daemon/keys/attest.h"
#include "daemon/proxy/proxy.h"

static int collect_cb(const git_config_entry *e, void *data)
{
	return strv_push(data, e->value) < 0 ? -1 : 0;
}

/* Every value of the multivar name into *ret (NULL-terminated, NULL
 * when none).  Returns 0 or -errno with a message in errbuf. */
static int collect_values(git_config *gc, const char *name, const char *path,
			  char ***ret, char *errbuf, size_t errlen)
{
	struct strv col = {0};
	int r =
	    git_config_get_multivar_foreach(gc, name, NULL, collect_cb, &col);

	if (r < 0 && r != GIT_ENOTFOUND) {
		snprintf(errbuf, errlen, "%s: cannot read %s", path, name);
		strv_free(&col);
		return -ENOMEM;
	}
	*ret = col.v;
	return 0;
}

/* collect_values for a list of absolute paths.  A list that cannot be
 * read whole is an error: a key file left out would go unredacted. */
static int collect_paths(git_config *gc, const char *name, const char *path,
			 char ***ret, char *errbuf, size_t errlen)
{
	char **v = NULL;
	int r = collect_values(gc, name, path, &v, errbuf, errlen);

	if (r < 0)
		return r;
	for (size_t i = 0; v && v[i]; i++) {
		if (v[i][0] != '/') {
			snprintf(errbuf, errlen,
				 "%s: %s \"%s\" must be an absolute path", path,
				 name, v[i]);
			strv_free_array(v);
			return -EINVAL;
		}
	}
	*ret = v;
	return 0;
}

/*
 * One [sandbox] hidden value made the path every run covers: absolute, or
 * "~" / "~/..." against the operator's home (HOME, else the passwd
 * entry: the home a run is given).  Trailing slashes go; "/", other
 * "~user" forms and "." or ".." components are refused (the cover and
 * the policy's comparison must mean the same file).  Returns the
 * malloc'd path, or NULL with *why set (or ENOMEM in errno).
 */
static char *hidden_path(const char *v, const char **why)
{
	const char *home = getenv("HOME"), *rest = v;
	char *p;
	size_t n, hl;

	*why = NULL;
	if (v[0] == '~') {
		if (v[1] != '\0' && v[1] != '/') {
			*why = "must be absolute or begin with \"~/\"";
			return NULL;
		}
		if (!home || home[0] != '/')
			home = paths_passwd_home();
		if (!home || home[0] != '/') {
			*why = "begins with \"~/\" but spd has no home "
			       "directory";
			return NULL;
		}
		rest = v + 1;
	} else if (v[0] != '/') {
		*why = "must be absolute or begin with \"~/\"";
		return NULL;
	} else
		home = "";
	/* HOME=/home/op/ is the same home. */
	for (hl = strlen(home); hl > 0 && home[hl - 1] == '/'; hl--)
		;
	if (asprintf(&p, "%.*s%s", (int)hl, home, rest) < 0)
		return NULL;
	n = strlen(p);
	while (n > 1 && p[n - 1] == '/')
		p[--n] = '\0';
	if (!p[0] || strcmp(p, "/") == 0)
		*why = "would hide the whole file system";
	else if (strstr(p, "/./") || strstr(p, "/../") ||
		 (n >= 2 && strcmp(p + n - 2, "/.") == 0) ||
		 (n >= 3 && strcmp(p + n - 3, "/..") == 0) || strstr(p, "//"))
		*why = "must not hold \".\", \"..\" or \"//\"";
	if (*why) {
		free(p);
		return NULL;
	}
	return p;
}

/* [sandbox] hidden: the operator's own paths no run may see, at most
 * CONFIG_HIDDEN_MAX (each is a mount). */
static int load_hidden(git_config *gc, const char *path, struct spd_config *cfg,
		       char *errbuf, size_t errlen)
{
	char **v = NULL;
	const char *why;
	size_t n = 0;
	int r = collect_values(gc, "sandbox.hidden", path, &v, errbuf, errlen);

	if (r < 0)
		return r;
	for (; v && v[n]; n++) {
		char *h = hidden_path(v[n], &why);

		if (!h) {
			r = why ? -EINVAL : -ENOMEM;
			snprintf(errbuf, errlen, "%s: sandbox.hidden \"%s\" %s",
				 path, v[n], why ? why : "(out of memory)");
			goto out;
		}
		free(v[n]);
		v[n] = h;
	}
	if (n > CONFIG_HIDDEN_MAX) {
		snprintf(errbuf, errlen,
			 "%s: sandbox.hidden is given %zu times; at most %d "
			 "paths may be hidden (each is a mount in every run)",
			 path, n, CONFIG_HIDDEN_MAX);
		r = -EINVAL;
		goto out;
	}
	cfg->hidden = v;
	v = NULL;
out:
	strv_free_array(v);
	return r;
}

/* Where key k's field is in cfg. */
static void *field_of(struct spd_config *cfg, const struct conftab_key *k)
{
	return (char *)cfg + k->off - 1;
}

/* Store v (already checked against k's range) in k's field. */
static void put_number(struct spd_config *cfg, const struct conftab_key *k,
		       int64_t v)
{
	void *dst = field_of(cfg, k);

	v *= k->scale;
	if (k->size == sizeof(uint32_t)) {
		uint32_t u = (uint32_t)v;

		memcpy(dst, &u, sizeof(u));
	} else {
		/* size_t and int64_t alike: the value is never negative. */
		memcpy(dst, &v, sizeof(v));
	}
}

/* The index of word in k's choices, or -1. */
static int choice_of(const struct conftab_key *k, const char *word)
{
	const char *p = k->choices;
	size_t n = strlen(word);

	for (int i = 0; p && *p; i++) {
		size_t len = strcspn(p, "|");

		if (len == n && strncmp(p, word, n) == 0)
			return i;
		p += len;
		p += *p == '|';
	}
	return -1;
}

/* Value v of key k read into cfg: 0, or -EINVAL with the key, the value
 * and what it may be in errbuf.  A value out of range is refused rather
 * than clamped: a typo must not silently leave the operator without a
 * reserve, nor a turn with a cap the operator did not write. */
static int put_value(struct spd_config *cfg, const struct conftab_key *k,
		     const char *v, const char *path, char *errbuf,
		     size_t errlen)
{
	char range[96];
	int64_t n = 0;
	int r;

	conftab_range(k, range, sizeof(range));
	switch (k->type) {
	case CONFTAB_INT:
		r = git_config_parse_int64(&n, v);
		if (r < 0 || n < k->min || n > k->max)
			goto bad;
		put_number(cfg, k, n);
		return 0;
	case CONFTAB_USD:
		if (price_parse_fixed(v, 12, &n) < 0 || n < k->min ||
		    n > k->max) {
			snprintf(errbuf, errlen,
				 "%s: %s.%s must be USD, a plain decimal "
				 "such as 2.50, %s; not \"%s\"",
				 path, k->section, k->name, range, v);
			return -EINVAL;
		}
		memcpy(field_of(cfg, k), &n, sizeof(n));
		return 0;
	case CONFTAB_ENUM: {
		int i = choice_of(k, v);

		if (i < 0)
			goto bad;
		memcpy(field_of(cfg, k), &i, sizeof(i));
		return 0;
	}
	default:
		snprintf(errbuf, errlen, "%s: %s.%s: no field of this type",
			 path, k->section, k->name);
		return -EINVAL;
	}
bad:
	snprintf(errbuf, errlen, "%s: %s.%s must be %s, not \"%s\"", path,
		 k->section, k->name, range, v);
	return -EINVAL;
}

struct fill {
	git_config *gc; /* NULL: the defaults only */
	const char *path;
	struct spd_config *cfg;
	char *errbuf;
	size_t errlen;
};

/* One key of the table with a field: its default, then the file's value
 * (the last one given wins, as git's does). */
static int fill_one(void *data, const struct conftab_key *k)
{
	struct fill *f = data;
	git_config_entry *e = NULL;
	char name[128];
	int r;

	if (!k->off || k->named)
		return 0;
	if (k->def) {
		r = put_value(f->cfg, k, k->def, "(default)", f->errbuf,
			      f->errlen);
		if (r < 0)
			return r;
	}
	if (!f->gc)
		return 0;
	snprintf(name, sizeof(name), "%s.%s", k->section, k->name);
	if (git_config_get_entry(&e, f->gc, name) < 0)
		return 0;
	r = put_value(f->cfg, k, e->value ? e->value : "", f->path, f->errbuf,
		      f->errlen);
	git_config_entry_free(e);
	return r;
}

/* The egress proxy's [network] rules.  The resolver override is a test
 * aid: it may name only hosts under ".test" (RFC 2606, never a real
 * name), so a configuration cannot redirect a real registry's name. */
static int load_network(git_config *gc, const char *path,
			struct spd_config *cfg, char *errbuf, size_t errlen)
{
	const struct {
		const char *key;
		char ***dst;
	} keys[] = {
	    {"network.allow-host", &cfg->proxy_allow_host},
	    {"network.deny-host", &cfg->proxy_deny_host},
	    {"network.ask-host", &cfg->proxy_ask_host},
	    {"network.allow-address", &cfg->proxy_allow_address},
	    {"network.resolve", &cfg->proxy_resolve},
	};
	int r;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		r = collect_values(gc, keys[i].key, path, keys[i].dst, errbuf,
				   errlen);
		if (r < 0)
			return r;
	}
	for (size_t i = 0; cfg->proxy_resolve && cfg->proxy_resolve[i]; i++) {
		const char *v = cfg->proxy_resolve[i], *colon = strchr(v, ':');
		size_t n = colon ? (size_t)(colon - v) : 0;

		if (n < 6 || strncasecmp(colon - 5, ".test", 5) != 0) {
			snprintf(errbuf, errlen,
				 "%s: network.resolve \"%s\" must be "
				 "NAME.test:ADDRESS (a test aid)",
				 path, v);
			return -EINVAL;
		}
	}
	return proxy_config_load(gc, path, cfg, errbuf, errlen);
}

/* The words of every value of name (split at blanks), each checked to
 * be a relative glob when paths: 0 and *ret (NULL for none) or -errno. */
static int collect_words(git_config *gc, const char *name, const char *path,
			 bool paths, char ***ret, char *errbuf, size_t errlen)
{
	char **v = NULL;
	struct strv out = {0};
	int r = collect_values(gc, name, path, &v, errbuf, errlen);

	for (size_t i = 0; r == 0 && v && v[i]; i++) {
		char *save = NULL;

		for (char *w = strtok_r(v[i], " \t", &save); r == 0 && w;
		     w = strtok_r(NULL, " \t", &save)) {
			if (paths && (w[0] == '/' || strstr(w, ".."))) {
				snprintf(errbuf, errlen,
					 "%s: %s \"%s\" must be a path inside "
					 "the workspace (relative, no \"..\")",
					 path, name, w);
				r = -EINVAL;
			} else {
				r = strv_push(&out, w);
			}
		}
	}
	strv_free_array(v);
	if (r < 0) {
		strv_free(&out);
		return r;
	}
	*ret = out.v;
	return 0;
}

/* [provenance]: trusted and private files, the untrusted labels and what
 * asks (daemon/session/labels.h). */
static int load_provenance(git_config *gc, const char *path,
			   struct spd_config *cfg, char *errbuf, size_t errlen)
{
	static const struct {
		const char *name;
		unsigned bit;
	} steps[] = {
	    {"egress", SPD_PROV_ASK_EGRESS}, {"commit", SPD_PROV_ASK_COMMIT},
	    {"merge", SPD_PROV_ASK_MERGE},   {"config", SPD_PROV_ASK_CONFIG},
	    {"all", SPD_PROV_ASK_ALL},	     {"none", 0}};
	char **ask = NULL;
	int r = collect_words(gc, "provenance.trusted", path, true,
			      &cfg->prov_trusted, errbuf, errlen);

	if (r == 0)
		r = collect_words(gc, "provenance.private", path, true,
				  &cfg->prov_private, errbuf, errlen);
	if (r == 0)
		r = collect_words(gc, "provenance.untrusted", path, false,
				  &cfg->prov_untrusted, errbuf, errlen);
	if (r == 0 && !cfg->prov_untrusted) {
		struct strv d = {0};

		if (strv_push(&d, "network:*") < 0 ||
		    strv_push(&d, "agent-tool") < 0 ||
		    strv_push(&d, "mcp:*") < 0) {
			strv_free(&d);
			return -ENOMEM;
		}
		cfg->prov_untrusted = d.v;
	} else if (r == 0) {
		/* The defaults always count: a list adds to them. */
		struct strv d = {.v = cfg->prov_untrusted};

		for (d.n = 0; d.v[d.n]; d.n++)
			;
		if (strv_push(&d, "network:*") < 0 ||
		    strv_push(&d, "agent-tool") < 0 ||
		    strv_push(&d, "mcp:*") < 0)
			return -ENOMEM;
		cfg->prov_untrusted = d.v;
	}
	if (r == 0)
		r = collect_words(gc, "provenance.ask", path, false, &ask,
				  errbuf, errlen);
	cfg->prov_ask = SPD_PROV_ASK_ALL;
	if (r == 0 && ask) {
		cfg->prov_ask = 0;
		for (size_t i = 0; r == 0 && ask[i]; i++) {
			size_t k = 0;

			while (k < sizeof(steps) / sizeof(steps[0]) &&
			       strcmp(steps[k].name, ask[i]) != 0)
				k++;
			if (k == sizeof(steps) / sizeof(steps[0])) {
				snprintf(errbuf, errlen,
					 "%s: provenance.ask \"%s\" is none of "
					 "egress, commit, merge, config, all, "
					 "none",
					 path, ask[i]);
				r = -EINVAL;
			} else {
				cfg->prov_ask |= steps[k].bit;
			}
		}
	}
	strv_free_array(ask);
	return r;
}

/* [attest] trust: the keys whose attestations attest.verify accepts
 * (with spd's own).  A malformed one is refused here rather than
 * silently trusting nothing. */
static int load_attest(git_config *gc, const char *path, struct spd_config *cfg,
		       char *errbuf, size_t errlen)
{
	int r = collect_values(gc, "attest.trust", path, &cfg->attest_trust,
			       errbuf, errlen);

	for (size_t i = 0; r == 0 && cfg->attest_trust && cfg->attest_trust[i];
	     i++)
		if (attest_key_check(cfg->attest_trust[i]) < 0) {
			snprintf(errbuf, errlen,
				 "%s: attest.trust \"%s\" is not a key "
				 "(ed25519:BASE64, as spctl attest key prints)",
				 path, cfg->attest_trust[i]);
			r = -EINVAL;
		}
	return r;
}

int config_foreach_prefix(git_config *gc, const char *prefix,
			  int (*cb)(const git_config_entry *e, void *data),
			  void *data)
{
	git_config_iterator *it = NULL;
	git_config_entry *e;
	size_t n = strlen(prefix);
	int r = 0;

	if (git_config_iterator_new(&it, gc) < 0)
		return -EINVAL;
	while (r == 0 && git_config_next(&e, it) == 0)
		if (strncasecmp(e->name, prefix, n) == 0)
			r = cb(e, data);
	git_config_iterator_free(it);
	return r;
}

/* [session] git-name and git-email: who agents' commits name; a value
 * git would take for something else is refused. */
static int load_identity(git_config *gc, const char *path,
			 struct spd_config *cfg, char *errbuf, size_t errlen)
{
	static const char *const keys[] = {"session.git-name",
					   "session.git-email"};
	char **dst[] = {&cfg->git_name, &cfg->git_email};

	for (size_t i = 0; i < 2; i++) {
		git_config_entry *e = NULL;

		if (git_config_get_entry(&e, gc, keys[i]) < 0)
			continue;
		if (!e->value[0] || strlen(e->value) > 200 ||
		    strpbrk(e->value, "<>\"\\\n") ||
		    (i == 1 && !strchr(e->value, '@'))) {
			snprintf(errbuf, errlen,
				 "%s: %s must be %s of at most 200 "
				 "characters without < > \" or \\",
				 path, keys[i],
				 i == 1 ? "an address with @" : "a name");
			git_config_entry_free(e);
			return -EINVAL;
		}
		free(*dst[i]);
		*dst[i] = strdup(e->value);
		git_config_entry_free(e);
		if (!*dst[i])
			return -ENOMEM;
	}
	return 0;
}

int config_read(struct git_config *gc, const char *path, struct spd_config *cfg,
		char *errbuf, size_t errlen)
{
	struct fill f = {gc, path, cfg, errbuf, errlen};
	git_config_entry *e = NULL;
	struct passwd *pw;
	int r = 0;

	memset(cfg, 0, sizeof(*cfg));
	cfg->prov_ask = SPD_PROV_ASK_ALL;
	pw = getpwnam("nobody");
	cfg->run_uid = pw ? pw->pw_uid : 65534;
	cfg->run_gid = pw ? pw->pw_gid : 65534;
	/* Every key with a field, from the table: its default and its
	 * value, checked against its range. */
	r = conftab_each(fill_one, &f);
	if (r < 0 || !gc)
		return r;
	if (git_config_get_entry(&e, gc, "sandbox.user") == 0) {
		pw = getpwnam(e->value);
		if (!pw || pw->pw_uid == 0) {
			snprintf(errbuf, errlen,
				 "%s: sandbox.user \"%s\" is not an "
				 "unprivileged user of this system",
				 path, e->value);
			r = -EINVAL;
			goto out;
		}
		cfg->run_uid = pw->pw_uid;
		cfg->run_gid = pw->pw_gid;
	}
	if (cfg->broker.cap_default > cfg->broker.cap_max) {
		snprintf(errbuf, errlen,
			 "%s: broker.cap-default must not be above "
			 "broker.cap-max",
			 path);
		r = -EINVAL;
		goto out;
	}
	r = load_identity(gc, path, cfg, errbuf, errlen);
	if (r == 0)
		r = collect_paths(gc, "sandbox.writable", path, &cfg->writable,
				  errbuf, errlen);
	if (r == 0)
		r = collect_paths(gc, "secrets.file", path, &cfg->key_files,
				  errbuf, errlen);
	if (r == 0)
		r = load_hidden(gc, path, cfg, errbuf, errlen);
	if (r == 0)
		r = load_network(gc, path, cfg, errbuf, errlen);
	if (r == 0)
		r = load_attest(gc, path, cfg, errbuf, errlen);
	if (r == 0)
		r = load_provenance(gc, path, cfg, errbuf, errlen);
out:
	git_config_entry_free(e);
	return r;
}

int config_load(const char *path, struct spd_config *cfg, char *errbuf,
		size_t errlen)
{
	git_config *gc = NULL;
	int r;

	/* Every part that reads this file (the broker's, the policy's too)
	 * reads only its own keys: a misspelt one is refused here. */
	r = conftab_open(path, NULL, CONFTAB_SPD_CONF, &gc, errbuf, errlen);
	if (r == -ENOENT)
		return config_read(NULL, path, cfg, errbuf, errlen);
	if (r < 0) {
		/* The defaults, so that config_free has a struct to free. */
		(void)config_read(NULL, path, cfg, NULL, 0);
		return r;
	}
	r = config_read(gc, path, cfg, errbuf, errlen);
	git_config_free(gc);
	return r;
}

int config_run_hidden_push(const struct spd *spd, struct strv *out)
{
	const struct spd_config *cfg = &spd->config;

	if (strv_push(out, spd->paths.config_dir) < 0 ||
	    strv_push(out, spd->paths.state_dir) < 0 ||
	    strv_push(out, spd->paths.runtime_dir) < 0)
		return -ENOMEM;
	for (size_t i = 0; cfg->hidden && cfg->hidden[i]; i++) {
		char *real = realpath(cfg->hidden[i], NULL);
		int r = strv_push(out, real ? real : cfg->hidden[i]);

		free(real);
		if (r < 0)
			return r;
	}
	return 0;
}

void config_free(struct spd_config *cfg)
{
	if (!cfg)
		return;
	strv_free_array(cfg->writable);
	strv_free_array(cfg->key_files);
	strv_free_array(cfg->hidden);
	cfg->writable = cfg->key_files = cfg->hidden = NULL;
	free(cfg->git_name);
	free(cfg->git_email);
	cfg->git_name = cfg->git_email = NULL;
	strv_free_array(cfg->proxy_allow_host);
	strv_free_array(cfg->proxy_deny_host);
	strv_free_array(cfg->proxy_ask_host);
	strv_free_array(cfg->proxy_allow_address);
	strv_free_array(cfg->proxy_resolve);
	cfg->proxy_allow_host = cfg->proxy_deny_host = NULL;
	cfg->proxy_ask_host = NULL;
	cfg->proxy_allow_address = cfg->proxy_resolve = NULL;
	proxy_config_free(cfg);
	strv_free_array(cfg->attest_trust);
	cfg->attest_trust = NULL;
	strv_free_array(cfg->prov_trusted);
	strv_free_array(cfg->prov_private);
	strv_free_array(cfg->prov_untrusted);
	cfg->prov_trusted = cfg->prov_private = cfg->prov_untrusted = NULL;
}

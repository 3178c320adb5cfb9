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
#include "daemon/keys/attest.h"
#include "daemon/methods/gate.h"
#include "daemon/journal/journal.h"
#include "daemon/proxy/proxy.h"
#include "daemon/transport/quota.h"
#include "daemon/transport/server.h"
#include "proto/sandbox.h"

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

/* The [limits] keys: name, where it goes, its range.  A value out of
 * range is refused rather than clamped: a typo must not silently leave
 * the operator without a reserve. */
static int load_limits(git_config *gc, const char *path, struct spd_config *cfg,
		       char *errbuf, size_t errlen)
{
	unsigned auth_s = cfg->auth_timeout_ms / 1000u,
		 grant_s = cfg->grant_lifetime_ms / 1000u;
	const struct {
		const char *key;
		unsigned *dst;
		int64_t min, max;
	} keys[] = {
	    {"limits.auth-timeout", &auth_s, 1, QUOTA_AUTH_TIMEOUT_S_MAX},
	    {"limits.grant-lifetime", &grant_s, 1, 24 * 3600},
	    {"limits.session-connections", &cfg->session_conns, 1,
	     SERVER_MAX_CONNS},
	    {"limits.session-runs", &cfg->session_runs, 1, SBXP_RUNS_MAX},
	    {"limits.session-journal-rate", &cfg->session_journal_rate, 1,
	     1000000},
	    {"limits.proxy-head-timeout", &cfg->proxy_head_timeout_s, 1, 3600},
	    {"limits.proxy-idle-timeout", &cfg->proxy_idle_timeout_s, 1,
	     CONFIG_TIMEOUT_MAX_S},
	    /* At least one slot each side: the operator must keep one, and
	     * sessions must be able to connect and run at all. */
	    {"limits.operator-connections", &cfg->operator_conns, 1,
	     SERVER_MAX_CONNS - 1},
	    {"limits.operator-runs", &cfg->operator_runs, 1, SBXP_RUNS_MAX - 1},
	};
	int64_t n;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		int r = git_config_get_int64(&n, gc, keys[i].key);

		if (r == GIT_ENOTFOUND)
			continue;
		if (r < 0 || n < keys[i].min || n > keys[i].max) {
			snprintf(errbuf, errlen, "%s: %s must be %lld..%lld",
				 path, keys[i].key, (long long)keys[i].min,
				 (long long)keys[i].max);
			return -EINVAL;
		}
		*keys[i].dst = (unsigned)n;
	}
	cfg->auth_timeout_ms = auth_s * 1000u;
	cfg->grant_lifetime_ms = grant_s * 1000u;
	return 0;
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

int config_load(const char *path, struct spd_config *cfg, char *errbuf,
		size_t errlen)
{
	git_config *gc = NULL;
	git_config_entry *e = NULL;
	struct passwd *pw;
	int64_t n;
	int r = 0;

	memset(cfg, 0, sizeof(*cfg));
	cfg->sandbox_mode = SPD_SANDBOX_REQUIRED;
	cfg->output_cap = CONFIG_OUTPUT_CAP_DEFAULT;
	cfg->default_timeout_ms = CONFIG_TIMEOUT_DEFAULT_S * 1000u;
	cfg->kill_grace_ms = CONFIG_KILL_GRACE_DEFAULT_S * 1000u;
	cfg->auth_timeout_ms = QUOTA_AUTH_TIMEOUT_S_DEFAULT * 1000u;
	cfg->grant_lifetime_ms = GATE_WAIT_MS;
	cfg->approval_timeout_ms = GATE_WAIT_MS;
	cfg->session_conns = QUOTA_SESSION_CONNS_DEFAULT;
	cfg->session_runs = QUOTA_SESSION_RUNS_DEFAULT;
	cfg->session_journal_rate = QUOTA_SESSION_JOURNAL_RATE_DEFAULT;
	cfg->proxy_head_timeout_s = PROXY_HEAD_TIMEOUT_S_DEFAULT;
	cfg->proxy_idle_timeout_s = PROXY_IDLE_TIMEOUT_S_DEFAULT;
	cfg->operator_conns = QUOTA_OPERATOR_CONNS_DEFAULT;
	cfg->operator_runs = QUOTA_OPERATOR_RUNS_DEFAULT;
	pw = getpwnam("nobody");
	cfg->run_uid = pw ? pw->pw_uid : 65534;
	cfg->run_gid = pw ? pw->pw_gid : 65534;
	/* Every part that reads this file (the broker's, the policy's too)
	 * reads only its own keys: a misspelt one is refused here. */
	r = conftab_open(path, NULL, CONFTAB_SPD_CONF, &gc, errbuf, errlen);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		goto out;
	if (git_config_get_entry(&e, gc, "sandbox.mode") == 0) {
		if (strcmp(e->value, "required") == 0)
			cfg->sandbox_mode = SPD_SANDBOX_REQUIRED;
		else if (strcmp(e->value, "best-effort") == 0)
			cfg->sandbox_mode = SPD_SANDBOX_BEST_EFFORT;
		else {
			snprintf(errbuf, errlen,
				 "%s: sandbox.mode must be \"required\" or "
				 "\"best-effort\", not \"%s\"",
				 path, e->value);
			r = -EINVAL;
			goto out;
		}
		git_config_entry_free(e);
		e = NULL;
	}
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
		git_config_entry_free(e);
		e = NULL;
	}
	if (git_config_get_int64(&n, gc, "sandbox.timeout") == 0) {
		if (n <= 0 || n > CONFIG_TIMEOUT_MAX_S) {
			snprintf(errbuf, errlen,
				 "%s: sandbox.timeout must be 1..%d seconds",
				 path, CONFIG_TIMEOUT_MAX_S);
			r = -EINVAL;
			goto out;
		}
		cfg->default_timeout_ms = (uint32_t)n * 1000u;
	}
	if (git_config_get_int64(&n, gc, "sandbox.output-cap") == 0) {
		if (n < 1024 || n > 256 * 1024 * 1024) {
			snprintf(
			    errbuf, errlen,
			    "%s: sandbox.output-cap must be 1 KiB..256 MiB",
			    path);
			r = -EINVAL;
			goto out;
		}
		cfg->output_cap = (size_t)n;
	}
	r = git_config_get_int64(&n, gc, "sandbox.kill-grace");
	if (r != GIT_ENOTFOUND) {
		if (r < 0 || n < 0 || n > SBXP_CANCEL_GRACE_MAX_MS / 1000) {
			snprintf(errbuf, errlen,
				 "%s: sandbox.kill-grace must be 0..%d seconds",
				 path, SBXP_CANCEL_GRACE_MAX_MS / 1000);
			r = -EINVAL;
			goto out;
		}
		cfg->kill_grace_ms = (uint32_t)n * 1000u;
	}
	r = git_config_get_int64(&n, gc, "approvals.timeout");
	if (r != GIT_ENOTFOUND) {
		if (r < 0 || n <= 0 || n > GATE_WAIT_MAX_S) {
			snprintf(errbuf, errlen,
				 "%s: approvals.timeout must be 1..%d seconds",
				 path, GATE_WAIT_MAX_S);
			r = -EINVAL;
			goto out;
		}
		cfg->approval_timeout_ms = (uint32_t)n * 1000u;
	}
	r = 0;
	if (git_config_get_int64(&n, gc, "journal.queue-max") == 0) {
		if (n < JOURNAL_QUEUE_BYTES_MIN || n > (int64_t)1 << 30) {
			snprintf(errbuf, errlen,
				 "%s: journal.queue-max must be 64 KiB..1 GiB",
				 path);
			r = -EINVAL;
			goto out;
		}
		cfg->journal_queue_max = (size_t)n;
	}
	r = load_identity(gc, path, cfg, errbuf, errlen);
	if (r < 0)
		goto out;
	r = load_limits(gc, path, cfg, errbuf, errlen);
	if (r < 0)
		goto out;
	r = collect_paths(gc, "sandbox.writable", path, &cfg->writable, errbuf,
			  errlen);
	if (r == 0)
		r = collect_paths(gc, "secrets.file", path, &cfg->key_files,
				  errbuf, errlen);
	if (r == 0)
		r = load_hidden(gc, path, cfg, errbuf, errlen);
	if (r == 0)
		r = load_network(gc, path, cfg, errbuf, errlen);
	if (r == 0)
		r = load_attest(gc, path, cfg, errbuf, errlen);
out:
	git_config_entry_free(e);
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
}

/*
 * spd.conf in force (daemon/methods/m_config.h): the listing spctl doctor
 * prints, from the table of keys (daemon/conftab.c), and the reload on
 * daemon.reload and SIGHUP.
 */
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/strv.h"
#include "common/util.h"
#include "daemon/broker/broker.h"
#include "daemon/broker/price.h"
#include "daemon/config.h"
#include "daemon/conftab.h"
#include "daemon/journal/journal.h"
#include "daemon/log.h"
#include "daemon/methods/m_config.h"
#include "daemon/spd.h"
#include "daemon/transport/call.h"
#include "daemon/transport/handlers.h"
#include "daemon/transport/quota.h"

/*
 * What the reload compares against, kept on the loop thread: the file's
 * values as spd started with them (a key that needs a restart is in
 * force as it was then) and as last put in force, each an object of
 * entry name -> array of values; the file's hash; the configurations a
 * reload replaced, kept until spd exits because a proxied connection in
 * flight may still read the rules it began with (one per reload, a few
 * KiB: the operator's own action).
 */
static json_t *start_values, *values;
static char conf_sha[65] = "absent";
static struct spd_config *retired;
static size_t n_retired;

/* Every entry of gc (NULL: none) as name -> [values], or NULL. */
static json_t *file_values(git_config *gc)
{
	git_config_iterator *it = NULL;
	git_config_entry *e;
	json_t *o = json_object();

	if (!o || !gc)
		return o;
	if (git_config_iterator_new(&it, gc) < 0) {
		json_decref(o);
		return NULL;
	}
	while (git_config_next(&e, it) == 0) {
		json_t *a = json_object_get(o, e->name);

		if (!a) {
			a = json_array();
			if (json_object_set_new(o, e->name, a) < 0)
				a = NULL;
		}
		if (!a || json_array_append_new(
			      a, json_string(e->value ? e->value : "")) < 0) {
			json_decref(o);
			o = NULL;
			break;
		}
	}
	git_config_iterator_free(it);
	return o;
}

/* The table's key of an entry name ("provider.mine.url": provider, url),
 * false when none (an [include]). */
static bool key_of(const char *name, struct conftab_key *ret)
{
	const char *dot = strchr(name, '.'), *last = strrchr(name, '.');
	char sec[64];

	if (!dot || (size_t)(dot - name) >= sizeof(sec))
		return false;
	snprintf(sec, sizeof(sec), "%.*s", (int)(dot - name), name);
	return conftab_find(sec, last + 1, ret);
}

/* The names whose values differ between a and b, into out. */
static int differ(json_t *a, json_t *b, json_t *out)
{
	const char *k;
	json_t *v;

	json_object_foreach(a, k, v)
	{
		if (!json_equal(v, json_object_get(b, k)) &&
		    json_array_append_new(out, json_string(k)) < 0)
			return -ENOMEM;
	}
	json_object_foreach(b, k, v)
	{
		if (!json_object_get(a, k) &&
		    json_array_append_new(out, json_string(k)) < 0)
			return -ENOMEM;
	}
	return 0;
}

int conf_remember(struct spd *spd)
{
	git_config *gc = NULL;
	char err[256];
	int r;

	conftab_file_sha256(spd->paths.conf_path, conf_sha);
	r = conftab_open(spd->paths.conf_path, NULL, CONFTAB_SPD_CONF, &gc, err,
			 sizeof(err));
	if (r < 0 && r != -ENOENT)
		return r;
	json_decref(values);
	json_decref(start_values);
	values = file_values(gc);
	start_values = json_incref(values);
	git_config_free(gc);
	return values ? 0 : -ENOMEM;
}

void conf_forget(struct spd *spd)
{
	(void)spd;
	for (size_t i = 0; i < n_retired; i++)
		config_free(&retired[i]);
	free(retired);
	retired = NULL;
	n_retired = 0;
	json_decref(values);
	json_decref(start_values);
	values = start_values = NULL;
}

static void swap_strv(char ***a, char ***b)
{
	char **t = *a;

	*a = *b;
	*b = t;
}

static void swap_str(char **a, char **b)
{
	char *t = *a;

	*a = *b;
	*b = t;
}

/* Key k, changed in the file, needs a restart: nc keeps what is in force
 * (old).  What moves from old to nc is what old gives up. */
static void keep_old(const struct conftab_key *k, struct spd_config *old,
		     struct spd_config *nc)
{
	const char *n = k->name;

	if (k->off) {
		memcpy((char *)nc + k->off - 1, (char *)old + k->off - 1,
		       k->size);
	} else if (strcmp(k->section, "sandbox") == 0 &&
		   strcmp(n, "user") == 0) {
		nc->run_uid = old->run_uid;
		nc->run_gid = old->run_gid;
	} else if (strcmp(k->section, "secrets") == 0) {
		swap_strv(&nc->key_files, &old->key_files);
	} else if (strcmp(n, "test-ca") == 0) {
		swap_str(&nc->proxy_test_ca, &old->proxy_test_ca);
	} else if (strcmp(n, "ca-bundle") == 0) {
		swap_str(&nc->proxy_ca_bundle, &old->proxy_ca_bundle);
	}
	/* broker.listen: broker_reconfigure keeps the bound address. */
}

static void journal_reload(struct spd *spd, const char *by, const char *sha,
			   json_t *changed, json_t *restart, const char *why)
{
	json_t *d = json_pack("{s:s, s:s, s:s}", "by", by, "old_sha256",
			      conf_sha, "new_sha256", sha);
	char summary[600], *text;

	if (!d)
		return;
	if (why) {
		json_object_set_new(d, "refused", json_string(why));
		snprintf(summary, sizeof(summary),
			 "spd.conf reload refused, the old configuration "
			 "stays in force: %s",
			 why);
	} else {
		json_object_set(d, "changed", changed);
		json_object_set(d, "needs_restart", restart);
		snprintf(summary, sizeof(summary),
			 "spd.conf reloaded: %zu entries changed, %zu need a "
			 "restart",
			 json_array_size(changed), json_array_size(restart));
	}
	text = json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS);
	journal_append(spd->journal, NULL, "spd", "config.reload", summary,
		       text);
	free(text);
	json_decref(d);
}

/* The entries of nv that differ from what spd started with and cannot
 * change while it runs, into out. */
static int pending_restart(json_t *nv, json_t *out)
{
	json_t *since = json_array(), *v;
	size_t i;
	int r;

	if (!since)
		return -ENOMEM;
	r = differ(start_values, nv, since);
	json_array_foreach(since, i, v)
	{
		struct conftab_key k;

		if (r < 0)
			break;
		if (key_of(json_string_value(v), &k) &&
		    (k.flags & CONFTAB_RESTART) &&
		    json_array_append(out, v) < 0)
			r = -ENOMEM;
	}
	json_decref(since);
	return r;
}

/* The keys of nv that need a restart into restart, their values in
 * force kept in nc. */
static int restart_keys(struct spd *spd, json_t *nv, struct spd_config *nc,
			json_t *restart)
{
	size_t i;
	json_t *v;
	int r = pending_restart(nv, restart);

	json_array_foreach(restart, i, v)
	{
		struct conftab_key k;

		if (key_of(json_string_value(v), &k))
			keep_old(&k, &spd->config, nc);
	}
	return r;
}

int conf_reload(struct spd *spd, const char *by, json_t **ret, char *errbuf,
		size_t errlen)
{
	const char *path = spd->paths.conf_path;
	struct spd_config nc, *more;
	struct broker_config nb;
	git_config *gc = NULL;
	json_t *nv = NULL, *changed = json_array(), *restart = json_array();
	char sha[65];
	int r;

	memset(&nc, 0, sizeof(nc));
	memset(&nb, 0, sizeof(nb));
	conftab_file_sha256(path, sha);
	r = conftab_open(path, NULL, CONFTAB_SPD_CONF, &gc, errbuf, errlen);
	if (r == -ENOENT)
		r = 0;
	if (r == 0)
		r = config_read(gc, path, &nc, errbuf, errlen);
	if (r == 0)
		r = broker_config_read(gc, path, &nc, &nb, errbuf, errlen);
	if (r == 0 && (!(nv = file_values(gc)) || !changed || !restart)) {
		snprintf(errbuf, errlen, "out of memory");
		r = -ENOMEM;
	}
	if (r == 0)
		r = differ(values, nv, changed);
	if (r == 0)
		r = restart_keys(spd, nv, &nc, restart);
	more = r == 0 ? realloc(retired, (n_retired + 1) * sizeof(*retired))
		      : NULL;
	if (r == 0 && !more) {
		snprintf(errbuf, errlen, "out of memory");
		r = -ENOMEM;
	}
	git_config_free(gc);
	if (r < 0) {
		/* Nothing of the new file is in force. */
		journal_reload(spd, by, sha, NULL, NULL,
			       errbuf[0] ? errbuf : strerror(-r));
		config_free(&nc);
		broker_config_free(&nb);
		json_decref(nv);
		json_decref(changed);
		json_decref(restart);
		return r;
	}
	/* From here nothing fails: the whole file is put in force. */
	retired = more;
	retired[n_retired++] = spd->config;
	spd->config = nc;
	quota_set_limits(
	    spd->quota,
	    &(struct quota_limits){
		.max = {[QUOTA_CONNS] = nc.session_conns,
			[QUOTA_RUNS] = nc.session_runs,
			[QUOTA_JOURNAL_RATE] = nc.session_journal_rate}});
	broker_reconfigure(spd, &nb);
	spd_conf_stamp(spd);
	journal_reload(spd, by, sha, changed, restart, NULL);
	log_info("%s: spd.conf reloaded (%zu entries changed, %zu need a "
		 "restart)",
		 by, json_array_size(changed), json_array_size(restart));
	*ret = json_pack("{s:s, s:s, s:o, s:o}", "old_sha256", conf_sha,
			 "new_sha256", sha, "changed", changed, "needs_restart",
			 restart);
	snprintf(conf_sha, sizeof(conf_sha), "%s", sha);
	json_decref(values);
	values = nv;
	return *ret ? 0 : -ENOMEM;
}

void m_daemon_reload(struct call *c)
{
	struct spd *spd = call_spd(c);
	char err[512] = "";
	json_t *res = NULL;
	int r = conf_reload(spd, "daemon.reload", &res, err, sizeof(err));

	if (r < 0) {
		call_error(c, RPC_E_BAD_REQUEST, NULL,
			   "reload refused, the configuration in force stays: "
			   "%s",
			   err[0] ? err : strerror(-r));
		return;
	}
	call_set_summary(
	    c, "%zu changed, %zu need a restart",
	    json_array_size(json_object_get(res, "changed")),
	    json_array_size(json_object_get(res, "needs_restart")));
	call_reply(c, res);
}

/* ---- daemon.config ------------------------------------------------- */

/* The value in force of a key with a field, as spd.conf would write it. */
static json_t *field_value(const struct spd_config *cfg,
			   const struct conftab_key *k)
{
	const char *p = (const char *)cfg + k->off - 1;
	char buf[64];

	if (k->type == CONFTAB_INT) {
		int64_t v = 0;

		if (k->size == sizeof(uint32_t)) {
			uint32_t u;

			memcpy(&u, p, sizeof(u));
			v = u;
		} else {
			memcpy(&v, p, sizeof(v));
		}
		snprintf(buf, sizeof(buf), "%lld",
			 (long long)(v / (k->scale ? k->scale : 1)));
	} else if (k->type == CONFTAB_USD) {
		int64_t v;

		memcpy(&v, p, sizeof(v));
		price_format_usd(v, buf, sizeof(buf));
	} else if (k->type == CONFTAB_ENUM) {
		int i;
		const char *w = k->choices;

		memcpy(&i, p, sizeof(i));
		for (; i > 0 && w && strchr(w, '|'); i--)
			w = strchr(w, '|') + 1;
		snprintf(buf, sizeof(buf), "%.*s", (int)strcspn(w, "|"), w);
	} else {
		return json_null();
	}
	return json_string(buf);
}

struct listing {
	const struct spd_config *cfg;
	json_t *keys;
};

/* One row per key: a key with a field shows the value in force; the
 * others every value the file gives it as spd last read it (a named
 * section's as "NAME: value"). */
static int list_one(void *data, const struct conftab_key *k)
{
	struct listing *l = data;
	char name[96], range[96];
	json_t *row, *vals = json_array();
	const char *n;
	json_t *v;

	snprintf(name, sizeof(name), "%s.%s%s", k->section,
		 k->named ? "NAME." : "", k->name);
	conftab_range(k, range, sizeof(range));
	if (k->off) {
		json_array_append_new(vals, field_value(l->cfg, k));
	} else {
		json_object_foreach(values, n, v)
		{
			struct conftab_key f;
			const char *dot = strchr(n, '.'),
				   *last = strrchr(n, '.');
			size_t i;
			json_t *one;

			if (!key_of(n, &f) || strcmp(f.section, k->section) ||
			    strcmp(f.name, k->name) || (last > dot) != k->named)
				continue;
			json_array_foreach(v, i, one)
			{
				char *s = NULL;

				if (last > dot &&
				    asprintf(&s, "%.*s: %s",
					     (int)(last - dot - 1), dot + 1,
					     json_string_value(one)) < 0)
					s = NULL;
				json_array_append_new(vals, s ? json_string(s)
							      : json_copy(one));
				free(s);
			}
		}
	}
	row = json_pack("{s:s, s:o, s:s?, s:s, s:s, s:b}", "key", name, "value",
			vals, "default", k->def, "doc", k->doc ? k->doc : "",
			"range", range, "restart",
			(k->flags & CONFTAB_RESTART) != 0);
	return json_array_append_new(l->keys, row) < 0 ? -ENOMEM : 0;
}

void m_daemon_config(struct call *c)
{
	struct spd *spd = call_spd(c);
	struct listing l = {&spd->config, json_array()};
	json_t *restart = json_array();

	if (!l.keys || !restart || conftab_each(list_one, &l) < 0 ||
	    pending_restart(values, restart) < 0) {
		json_decref(l.keys);
		json_decref(restart);
		call_error(c, RPC_E_INTERNAL, NULL, "out of memory");
		return;
	}
	call_reply(c, json_pack("{s:s, s:s, s:o, s:o}", "file",
				spd->paths.conf_path, "sha256", conf_sha,
				"keys", l.keys, "needs_restart", restart));
}

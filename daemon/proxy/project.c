/*
 * A project's [network] rules for the egress proxy (proxy.h, struct
 * proxy_project): read from the workspace's .spd.conf when a proxy run
 * starts, and only ever a tightening of spd.conf's.  What would widen
 * spd.conf (a host it neither allows nor asks about, an address, a test
 * resolver entry) is set aside as ignored, to be journaled and logged.
 */
#include <errno.h>
#include <git2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "common/paths.h"
#include "common/strv.h"
#include "daemon/conftab.h"
#include "daemon/proxy/proxy.h"
#include "daemon/spd.h"

/* Lines set aside per project: enough to show what was tried. */
#define PROJECT_IGNORED_MAX 32

struct load {
	const struct spd_config *cfg;
	struct strv allow, deny, ask, ignored;
	bool has_allow, include;
	int err;
};

static void set_aside(struct load *l, const char *key, const char *value,
		      const char *why)
{
	char *line;

	if (l->ignored.n >= PROJECT_IGNORED_MAX)
		return;
	if (asprintf(&line, "%s = %s (%s)", key, value, why) < 0) {
		l->err = -ENOMEM;
		return;
	}
	if (strv_push(&l->ignored, line) < 0)
		l->err = -ENOMEM;
	free(line);
}

/* A host pattern spd.conf allows or asks about covers pattern. */
static bool operator_covers(const struct spd_config *cfg, const char *pattern)
{
	return proxy_pattern_covered(cfg->proxy_allow_host, pattern) ||
	       proxy_pattern_covered(cfg->proxy_ask_host, pattern);
}

static int entry(const git_config_entry *e, void *data)
{
	struct load *l = data;
	const char *k = e->name, *v = e->value ? e->value : "";
	struct strv *dst = NULL;

	if (strncasecmp(k, "include.", 8) == 0 ||
	    strncasecmp(k, "includeif.", 10) == 0) {
		l->include = true;
		return 0;
	}
	if (strncasecmp(k, "network.", 8) != 0)
		return 0;
	k += 8;
	if (strcasecmp(k, "allow-host") == 0) {
		l->has_allow = true;
		dst = &l->allow;
	} else if (strcasecmp(k, "ask-host") == 0) {
		dst = &l->ask;
	} else if (strcasecmp(k, "deny-host") == 0) {
		dst = &l->deny;
	} else if (strcasecmp(k, "allow-address") == 0 ||
		   strcasecmp(k, "resolve") == 0 ||
		   strcasecmp(k, "test-ca") == 0 ||
		   strcasecmp(k, "ca-bundle") == 0) {
		set_aside(l, e->name, v, "only spd.conf may set it");
		return 0;
	} else {
		return 0; /* the policy's keys (network.allow) */
	}
	/* An allow or ask spd.conf does not cover can never take effect
	 * (the decision is the stricter of the two): say so. */
	if (dst != &l->deny && !operator_covers(l->cfg, v))
		set_aside(l, e->name, v,
			  "spd.conf neither allows nor asks for it; a project "
			  "may only narrow spd.conf's list");
	if (strv_push(dst, v) < 0)
		l->err = -ENOMEM;
	return 0;
}

/* A project that refuses every host, saying why. */
static int project_failed(struct proxy_project **ret, const char *why)
{
	struct proxy_project *p = calloc(1, sizeof(*p));

	if (!p || !(p->error = strdup(why))) {
		free(p);
		return -ENOMEM;
	}
	*ret = p;
	return 0;
}

int proxy_project_load(const struct spd_config *cfg, const char *workspace,
		       struct proxy_project **ret)
{
	struct load l = {.cfg = cfg};
	struct proxy_project *p = NULL;
	git_config *gc = NULL;
	git_config_iterator *it = NULL;
	git_config_entry *e;
	char *path = paths_join(workspace, ".spd.conf");
	char why[512];
	int r = 0;

	*ret = NULL;
	if (!path)
		return -ENOMEM;
	r = conftab_open(path, ".spd.conf", CONFTAB_PROJECT, &gc, why,
			 sizeof(why));
	if (r == -ENOENT) {
		r = 0;
		goto out;
	}
	if (r < 0) {
		r = project_failed(ret, why);
		goto out;
	}
	if (git_config_iterator_new(&it, gc) < 0) {
		r = project_failed(ret, "the project's .spd.conf cannot be "
					"read");
		goto out;
	}
	while (l.err == 0 && git_config_next(&e, it) == 0)
		entry(e, &l);
	if (l.err < 0) {
		r = l.err;
		goto out;
	}
	if (l.include) {
		r = project_failed(ret, "the project's .spd.conf may not "
					"include other files");
		goto out;
	}
	if (!l.has_allow && !l.ask.n && !l.deny.n && !l.ignored.n)
		goto out;
	p = calloc(1, sizeof(*p));
	if (!p) {
		r = -ENOMEM;
		goto out;
	}
	/* An allow-host list, even of hosts spd.conf does not allow, is a
	 * list: the run gets the intersection, possibly nothing. */
	p->allow = l.has_allow
		       ? (l.allow.v ? l.allow.v : calloc(1, sizeof(char *)))
		       : NULL;
	p->deny = l.deny.v;
	p->ask = l.ask.v;
	p->ignored = l.ignored.v;
	l.allow = l.deny = l.ask = l.ignored = (struct strv){0};
	if (l.has_allow && !p->allow) {
		proxy_project_free(p);
		r = -ENOMEM;
		goto out;
	}
	*ret = p;
out:
	strv_free(&l.allow);
	strv_free(&l.deny);
	strv_free(&l.ask);
	strv_free(&l.ignored);
	git_config_iterator_free(it);
	git_config_free(gc);
	free(path);
	return r;
}

void proxy_project_free(struct proxy_project *p)
{
	if (!p)
		return;
	strv_free_array(p->allow);
	strv_free_array(p->deny);
	strv_free_array(p->ask);
	strv_free_array(p->ignored);
	free(p->error);
	free(p);
}

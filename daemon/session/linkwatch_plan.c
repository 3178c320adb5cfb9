/*
 * What a run gets of a watched workspace (linkwatch.h): the listed names,
 * and past SBXP_LINKS_EACH_MAX of them with a link outside, the
 * directories to bind whole instead of the names below them
 * (docs/sandbox.md, "Hard links").
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "daemon/session/linkwatch.h"
#include "daemon/session/linkwatch_priv.h"
#include "proto/sandbox.h"

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* What the plan knows of a directory node (plan_build). */
enum {
	P_DEPTH = 1,  /* depth and P_NODIRS set */
	P_NODIRS = 2, /* .git or below it: never bound whole */
	P_WHOLE = 4,  /* judged to be bound whole (sbxp_links_whole) */
	P_RO = 8,     /* its own names are read-only (it or one above) */
	P_FREEZE = 16 /* bound read-only whole: P_WHOLE, none above */
};

struct plan_dir {
	uint32_t nshort; /* listed names whose file has a link outside */
	uint32_t nown;	 /* files the run may write: one link, or all inside */
	uint32_t nwhole; /* directories in it judged P_WHOLE */
	uint32_t nopen;	 /* other directories in it holding a file */
	uint16_t depth;
	uint8_t f;
};

/* The names of each file's links the list holds, by inode. */
struct plan_ino {
	uint64_t ino;
	uint32_t n;
};

static struct plan_ino *plan_ino_slot(struct plan_ino *t, size_t cap,
				      uint64_t ino)
{
	size_t i = (size_t)((ino * 0x9e3779b97f4a7c15ull) >> 20) & (cap - 1);

	while (t[i].n && t[i].ino != ino)
		i = (i + 1) & (cap - 1);
	return &t[i];
}

/* Set the depth and P_NODIRS of directory node j and those above it. */
static void plan_depth(const struct lw_state *st, struct plan_dir *d,
		       uint32_t j)
{
	uint32_t chain[LINKWATCH_DEPTH_MAX + 2], k = j;
	size_t n = 0;

	while (k != LW_NONE && !(d[k].f & P_DEPTH) && n < ARRAY_SIZE(chain)) {
		chain[n++] = k;
		k = st->nodes[k].parent;
	}
	while (n--) {
		uint32_t up = st->nodes[chain[n]].parent;
		struct plan_dir *c = &d[chain[n]];

		c->f |= P_DEPTH;
		if (up == LW_NONE)
			continue;
		/* The watch goes no deeper (walk_dir). */
		c->depth = (uint16_t)(d[up].depth +
				      (d[up].depth <= LINKWATCH_DEPTH_MAX));
		if ((d[up].f & P_NODIRS) ||
		    strcmp(st->nodes[chain[n]].name, ".git") == 0)
			c->f |= P_NODIRS;
	}
}

/*
 * Judge every directory as sandboxd's walk does (links_judge in
 * sandboxd/linux/links.c): bottom-up, P_WHOLE where sbxp_links_whole says
 * so, but never the workspace, nothing under .git, nor a directory gone;
 * then top-down, P_FREEZE on the topmost of them (one bind each) and P_RO
 * on all below those.  -ENOMEM or 0.
 */
static int plan_judge(const struct lw_state *st, struct plan_dir *d)
{
	size_t at[LINKWATCH_DEPTH_MAX + 3] = {0}, ndirs = 0;
	uint32_t *order;

	for (size_t j = 0; j < st->nnodes; j++)
		if (st->nodes[j].dir) {
			plan_depth(st, d, (uint32_t)j);
			at[d[j].depth + 1]++;
			ndirs++;
		}
	if (!(order = malloc((ndirs ? ndirs : 1) * sizeof(*order))))
		return -ENOMEM;
	/* By depth: at[k] is where depth k starts. */
	for (size_t k = 1; k < ARRAY_SIZE(at); k++)
		at[k] += at[k - 1];
	for (size_t j = 0; j < st->nnodes; j++)
		if (st->nodes[j].dir)
			order[at[d[j].depth]++] = (uint32_t)j;
	for (size_t i = ndirs; i--;) {
		uint32_t k = order[i], up = st->nodes[k].parent;
		struct plan_dir *c = &d[k];
		const struct lw_node *nd = &st->nodes[k];

		if (up == LW_NONE)
			continue;
		if (!(c->f & P_NODIRS) && !nd->gone && !nd->dead &&
		    sbxp_links_whole(c->nshort, c->nown, c->nwhole, c->nopen))
			c->f |= P_WHOLE;
		if (c->f & P_WHOLE)
			d[up].nwhole++;
		else if (c->nshort || c->nown || c->nwhole || c->nopen)
			d[up].nopen++;
	}
	for (size_t i = 0; i < ndirs; i++) {
		uint32_t k = order[i], up = st->nodes[k].parent;

		if (up != LW_NONE && (d[up].f & P_RO))
			d[k].f |= P_RO;
		else if (d[k].f & P_WHOLE)
			d[k].f |= P_FREEZE | P_RO;
	}
	free(order);
	return 0;
}

/* Append node's path to the NULL-terminated *v (n entries); the string
 * is kept in st->dirpaths and returned in *ret. */
static int plan_add(struct lw_state *st, const char ***v, size_t *n,
		    uint32_t node, const char **ret)
{
	char path[PATH_MAX], *c;
	const char **t;

	if (lw_node_path(st, node, path, sizeof(path)) < 0)
		return -ENAMETOOLONG;
	if (!(c = strdup(path)))
		return -ENOMEM;
	st->dirpaths[st->ndirpaths++] = c;
	if (!(t = realloc(*v, (*n + 2) * sizeof(*t))))
		return -ENOMEM;
	t[(*n)++] = c;
	t[*n] = NULL;
	*v = t;
	*ret = c;
	return 0;
}

/* Whether name (listed, in the directory dnode, whose own names are
 * read-only) is below the directory bound whole above it, by its path:
 * a name the list would leave out must be where that bind is. */
static bool plan_covered(const struct lw_state *st, const struct plan_dir *d,
			 const char *const *fpath, uint32_t dnode,
			 const char *name)
{
	uint32_t k = dnode;
	size_t n = 0;

	while (k != LW_NONE && !(d[k].f & P_FREEZE) &&
	       n++ <= LINKWATCH_DEPTH_MAX)
		k = st->nodes[k].parent;
	if (k == LW_NONE || !(d[k].f & P_FREEZE) || !fpath[k])
		return false;
	n = strlen(fpath[k]);
	return strncmp(name, fpath[k], n) == 0 && name[n] == '/';
}

/*
 * Past SBXP_LINKS_EACH_MAX listed names whose file has a link outside
 * (more links than the list holds names of it), the run binds
 * directories whole, as sandboxd's walk would: st->vro the directories
 * most files directly in which have a link outside (not the workspace,
 * nothing under .git), and st->view the names but for those below them.
 * A directory is judged on its nodes (a file of one link, as the watch
 * last read it) and the names listed in it.  What the plan gets wrong
 * costs, never protects less: a directory bound whole that need not be is
 * read-only, and a name is left out only when its path is below a
 * directory bound read-only.
 */
static int plan_build(struct lw_state *st)
{
	size_t cap = 64, nshort = 0, nro = 0, nv = 0, ndirs = 0;
	struct plan_ino *ic;
	struct plan_dir *d;
	const char **fpath = NULL, **v;
	int r = 0;

	/* Up to the limit each name is bound on its own, whatever the
	 * directories hold. */
	if (st->nnames <= SBXP_LINKS_EACH_MAX) {
		if (!(v = malloc((st->nnames + 1) * sizeof(*v))))
			return -ENOMEM;
		if (st->nnames)
			memcpy(v, st->names, st->nnames * sizeof(*v));
		qsort(v, st->nnames, sizeof(*v), cmp_name);
		v[st->nnames] = NULL;
		free(st->view);
		st->view = v;
		return 0;
	}
	while (cap < 2 * st->nnames)
		cap *= 2;
	ic = calloc(cap, sizeof(*ic));
	d = calloc(st->nnodes ? st->nnodes : 1, sizeof(*d));
	v = malloc((st->nnames + 1) * sizeof(*v));
	if (!ic || !d || !v) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < st->nnames; i++)
		if (st->meta[i].nlink >= 2) {
			struct plan_ino *s =
			    plan_ino_slot(ic, cap, st->meta[i].ino);

			s->ino = st->meta[i].ino;
			s->n++;
		}
	for (size_t j = 0; j < st->nnodes; j++) {
		const struct lw_node *nd = &st->nodes[j];

		if (!nd->dir && !nd->dead && nd->nlink < 2 &&
		    nd->parent != LW_NONE)
			d[nd->parent].nown++;
	}
	for (size_t i = 0; i < st->nnames; i++) {
		const struct lw_nmeta *m = &st->meta[i];

		if (m->nlink < 2 || m->dnode >= st->nnodes)
			continue;
		if (m->nlink > plan_ino_slot(ic, cap, m->ino)->n) {
			d[m->dnode].nshort++;
			nshort++;
		} else {
			d[m->dnode].nown++;
		}
	}
	/* Up to the limit each name is bound on its own. */
	if (nshort > SBXP_LINKS_EACH_MAX && (r = plan_judge(st, d)) < 0)
		goto out;
	for (size_t j = 0; j < st->nnodes; j++)
		ndirs += (d[j].f & P_FREEZE) != 0;
	if (!(st->dirpaths = calloc(ndirs + 1, sizeof(char *))) ||
	    !(fpath = calloc(st->nnodes ? st->nnodes : 1, sizeof(*fpath)))) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t j = 0; j < st->nnodes && r == 0; j++)
		if (d[j].f & P_FREEZE)
			r = plan_add(st, &st->vro, &nro, (uint32_t)j,
				     &fpath[j]);
	if (r < 0)
		goto out;
	for (size_t i = 0; i < st->nnames; i++) {
		const struct lw_nmeta *m = &st->meta[i];

		if (m->dnode < st->nnodes && (d[m->dnode].f & P_RO) &&
		    plan_covered(st, d, fpath, m->dnode, st->names[i]))
			continue;
		v[nv++] = st->names[i];
	}
	v[nv] = NULL;
	qsort(v, nv, sizeof(*v), cmp_name);
	if (nro)
		qsort(st->vro, nro, sizeof(*v), cmp_name);
	free(st->view);
	st->view = v;
	v = NULL;
out:
	free(fpath);
	free(v);
	free(d);
	free(ic);
	return r;
}

void lw_view_clear(struct lw_state *st)
{
	free(st->vro);
	st->vro = NULL;
	for (size_t i = 0; i < st->ndirpaths; i++)
		free(st->dirpaths[i]);
	free(st->dirpaths);
	st->dirpaths = NULL;
	st->ndirpaths = 0;
}

int lw_view(struct lw_state *st)
{
	int r;

	if (st->view && !st->view_stale)
		return 0;
	lw_view_clear(st);
	if ((r = plan_build(st)) < 0) {
		lw_view_clear(st);
		return r;
	}
	st->view_stale = false;
	return 0;
}

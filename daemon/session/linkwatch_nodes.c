/*
 * A linkwatch state's tables (linkwatch_priv.h): its nodes, one for each
 * watched directory and file, and the names of its multi-linked files,
 * with what follows their renames.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"
#include "daemon/session/linkwatch.h"
#include "daemon/session/linkwatch_priv.h"

int lw_node_path(const struct lw_state *st, uint32_t node, char *buf,
		 size_t size)
{
	uint32_t chain[LINKWATCH_DEPTH_MAX + 1];
	size_t n = 0, off = 0;

	for (uint32_t i = node; i != LW_NONE; i = st->nodes[i].parent) {
		if (n == ARRAY_SIZE(chain))
			return -ELOOP;
		chain[n++] = i;
	}
	/* chain[n - 1] is the workspace itself. */
	buf[0] = '\0';
	for (size_t k = n - 1; k-- > 0;) {
		const char *name = st->nodes[chain[k]].name;
		size_t len = strlen(name);

		if (off + len + 2 > size)
			return -ENAMETOOLONG;
		if (off)
			buf[off++] = '/';
		memcpy(buf + off, name, len + 1);
		off += len;
	}
	return (int)n - 1;
}

int lw_join(char *buf, size_t size, const char *dir, const char *name)
{
	int n = dir[0] ? snprintf(buf, size, "%s/%s", dir, name)
		       : snprintf(buf, size, "%s", name);

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

static size_t name_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 0x100000001b3ull;
	return (size_t)(h ^ (h >> 29));
}

/* The slot of rel in the names' hash: its entry, or the empty one where
 * it would go. */
static uint32_t *names_slot(const struct lw_state *st, const char *rel)
{
	size_t i = name_hash(rel) & (st->nhcap - 1);

	while (st->nhash[i] && strcmp(st->names[st->nhash[i] - 1], rel) != 0)
		i = (i + 1) & (st->nhcap - 1);
	return &st->nhash[i];
}

/* The hash again from the names (grown, or names moved). */
static int names_rehash(struct lw_state *st, size_t cap)
{
	uint32_t *h = calloc(cap, sizeof(*h));

	if (!h)
		return -ENOMEM;
	free(st->nhash);
	st->nhash = h;
	st->nhcap = cap;
	for (size_t i = 0; i < st->nnames; i++)
		*names_slot(st, st->names[i]) = (uint32_t)i + 1;
	return 0;
}

/* List rel (a name of a multi-linked file, in the directory dnode), or
 * note what its file is now when listed already. */
int lw_names_add(struct lw_state *st, const char *rel, const struct lw_nmeta *m)
{
	uint32_t *slot;
	int r;

	if (2 * (st->nnames + 1) > st->nhcap &&
	    (r = names_rehash(st, st->nhcap ? 2 * st->nhcap : 64)) < 0)
		return r;
	slot = names_slot(st, rel);
	if (*slot) {
		struct lw_nmeta *old = &st->meta[*slot - 1];

		if (memcmp(old, m, sizeof(*m)) != 0) {
			*old = *m;
			st->view_stale = true;
		}
		return 0;
	}
	/* Past it the state goes: sandboxd walks. */
	if (st->nnames >= LW_NAMES_MAX)
		return -E2BIG;
	if (st->nnames == st->capnames) {
		size_t cap = st->capnames ? 2 * st->capnames : 16;
		char **n = realloc(st->names, cap * sizeof(*n));
		struct lw_nmeta *mm;

		if (!n)
			return -ENOMEM;
		st->names = n;
		if (!(mm = realloc(st->meta, cap * sizeof(*mm))))
			return -ENOMEM;
		st->meta = mm;
		st->capnames = cap;
	}
	if (!(st->names[st->nnames] = strdup(rel)))
		return -ENOMEM;
	st->meta[st->nnames] = *m;
	*slot = (uint32_t)++st->nnames;
	st->view_stale = true;
	return 0;
}

/* Record that wd watches a new node.  A second name of a file already
 * watched gets the same wd back: the node it has stays. */
int lw_node_add(struct lw_state *st, int wd, uint32_t parent, const char *name,
		bool dir, uint64_t ino)
{
	struct lw_node *nd;

	if ((size_t)wd < st->nwd && st->wd2node[wd] != LW_NONE)
		return 0;
	if (st->nwatches >= st->budget)
		return -ENOSPC;
	if ((size_t)wd >= st->nwd) {
		size_t n = st->nwd ? st->nwd : 256;
		uint32_t *m;

		while (n <= (size_t)wd)
			n *= 2;
		if (!(m = realloc(st->wd2node, n * sizeof(*m))))
			return -ENOMEM;
		for (size_t i = st->nwd; i < n; i++)
			m[i] = LW_NONE;
		st->wd2node = m;
		st->nwd = n;
	}
	if (st->nnodes == st->capnodes) {
		size_t cap = st->capnodes ? 2 * st->capnodes : 256;

		if (!(nd = realloc(st->nodes, cap * sizeof(*nd))))
			return -ENOMEM;
		st->nodes = nd;
		st->capnodes = cap;
	}
	nd = &st->nodes[st->nnodes];
	nd->parent = parent;
	nd->dir = dir;
	nd->gone = false;
	nd->attrib = false;
	nd->dead = false;
	nd->nlink = 0;
	nd->ino = ino;
	if (!(nd->name = strdup(name)))
		return -ENOMEM;
	st->wd2node[wd] = (uint32_t)st->nnodes++;
	st->nwatches++;
	/* A new file of one link makes its directory one the run may
	 * write in (plan_build). */
	st->view_stale = true;
	return 0;
}

/* Listed names below the directory that was at from, now at to. */
static int names_moved(struct lw_state *st, const char *from, const char *to)
{
	size_t lf = strlen(from), k = 0;
	bool moved = false;
	int r;

	for (size_t i = 0; i < st->nnames; i++) {
		char path[PATH_MAX], *old = st->names[i], *c;

		if (strncmp(old, from, lf) != 0 || old[lf] != '/')
			continue;
		if ((r = lw_join(path, sizeof(path), to, old + lf + 1)) < 0)
			return r;
		if (!(c = strdup(path)))
			return -ENOMEM;
		free(old);
		st->names[i] = c;
		moved = true;
	}
	if (!moved)
		return 0;
	st->view_stale = true;
	/* A name may now be one listed already (a name that had gone from
	 * there): the list holds no duplicate (the decoder refuses them).
	 * The hash is made again, keeping each name's first entry. */
	memset(st->nhash, 0, st->nhcap * sizeof(*st->nhash));
	for (size_t i = 0; i < st->nnames; i++) {
		uint32_t *slot = names_slot(st, st->names[i]);

		if (*slot) {
			free(st->names[i]);
			continue;
		}
		st->names[k] = st->names[i];
		st->meta[k] = st->meta[i];
		*slot = (uint32_t)++k;
	}
	st->nnames = k;
	return 0;
}

/*
 * node, found again under name in dnode (at sub) by an IN_MOVED_TO: an
 * entry renamed inside the workspace.  It takes its new name and place,
 * and the listed names below a directory follow it.  -ESTALE when it is
 * not the entry the node was (the workspace itself, another inode).
 */
int lw_node_moved(struct lw_state *st, uint32_t node, uint32_t dnode,
		  const char *name, const struct stat *sb, const char *sub)
{
	struct lw_node *nd = &st->nodes[node];
	char from[PATH_MAX], *copy;
	int r;

	if (node == 0 || nd->ino != sb->st_ino ||
	    nd->dir != S_ISDIR(sb->st_mode))
		return -ESTALE;
	if (nd->dir && (r = lw_node_path(st, node, from, sizeof(from))) < 0)
		return r;
	if (!(copy = strdup(name)))
		return -ENOMEM;
	free(nd->name);
	nd->name = copy;
	nd->parent = dnode;
	st->view_stale = true;
	return nd->dir ? names_moved(st, from, sub) : 0;
}

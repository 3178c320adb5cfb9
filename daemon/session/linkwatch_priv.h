/*
 * linkwatch's state, shared by linkwatch.c (the watch) and
 * linkwatch_plan.c (what a run gets of it).  Internal to daemon/session.
 */
#ifndef SPD_DAEMON_LINKWATCH_PRIV_H
#define SPD_DAEMON_LINKWATCH_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#define LW_NONE UINT32_MAX
/* Renames between a name's leaving and its arrival at once (more drop
 * the state). */
#define LW_MOVED_MAX 16

struct lw_node {
	uint32_t parent; /* LW_NONE for the workspace itself */
	bool dir;
	bool gone;	/* a directory deleted (IN_DELETE_SELF) */
	bool attrib;	/* an IN_ATTRIB waits in lw_state.attrib */
	bool dead;	/* its watch went (IN_IGNORED): deleted */
	uint32_t nlink; /* a file's link count when last read */
	uint64_t ino;
	char *name;
};

/* What a listed name was when last looked at: its directory's node, its
 * file and that file's link count. */
struct lw_nmeta {
	uint64_t ino;
	uint32_t nlink;
	uint32_t dnode;
};

/* Events tried again once the queue is read (state_event's -EAGAIN). */
struct lw_later {
	struct inotify_event **v;
	size_t n;
};

struct lw_state {
	char *root; /* the workspace, absolute */
	int rootfd;
	int ifd;
	struct lw_node *nodes;
	size_t nnodes, capnodes;
	size_t nwatches; /* nodes whose watch is still on (not IN_IGNORED) */
	/* Files whose IN_ATTRIB waits for the end of the read (state_settle),
	 * each once: one deleted meanwhile needs nothing. */
	uint32_t *attrib;
	size_t nattrib, capattrib;
	uint32_t *wd2node; /* LW_NONE: no watch of ours */
	size_t nwd;
	char **names;	       /* relative; no duplicate */
	struct lw_nmeta *meta; /* of each name */
	size_t nnames, capnames;
	uint32_t *nhash; /* names' indices + 1 by name; 0: empty */
	size_t nhcap;
	/* What a run gets (lw_view): the names it must judge, sorted,
	 * NULL-terminated, and the directories to bind whole
	 * (plan_build; dirpaths owns their strings). */
	const char **view, **vro;
	char **dirpaths;
	size_t ndirpaths;
	bool view_stale;
	size_t budget; /* watches it may take */
	int err;       /* the walk's result */
	/* The cookies of names that left a directory and have not arrived
	 * in one yet (state_event, state_settle). */
	uint32_t from[LW_MOVED_MAX];
	size_t nfrom;
	/* Events that did not apply yet when the queue was last read in
	 * the background (state_settle keeps them until a run's read). */
	struct lw_later later;
	unsigned unsettled; /* background reads that ended so, in a row */
	/* The change log (linkwatch_changes): names events were about since
	 * the last take; kept only once taken (chg_taken), dropped for
	 * "everything" (chg_lost) past its size. */
	char **chg;
	size_t nchg, capchg;
	bool chg_taken, chg_lost;
	uint64_t chg_since; /* CLOCK_MONOTONIC ns: the log holds what came
			       after this */
	/* The first walk's start, CLOCK_REALTIME ns (while it runs; 0
	 * after) and CLOCK_MONOTONIC ns: what it finds stamped since goes
	 * to the log. */
	uint64_t walk_t0_rt, walk_t0_mono;
	/* The first walk's log from earlier than its start
	 * (linkwatch_prime_since; 0: from walk_t0_rt): what it finds stamped
	 * since note_rt (CLOCK_REALTIME ns), note_mono on CLOCK_MONOTONIC. */
	uint64_t note_rt, note_mono;
	long walk_left; /* entries walk_entry may still visit; -1: any */
};

/* The path of node relative to the workspace ("" for itself) in buf;
 * its depth, or -errno. */
int lw_node_path(const struct lw_state *st, uint32_t node, char *buf,
		 size_t size);

/* Names of multi-linked files a state may list: past it, the state goes
 * (sandboxd's walk).  Past SBXP_LINKS_EACH_MAX of them with a link
 * outside, a run gets directories to bind whole instead of those below
 * them (plan_build), which is what lets a pnpm project of thousands
 * have a list. */
#define LW_NAMES_MAX (1u << 17)

/* The tables (linkwatch_nodes.c).  lw_join: dir/name into buf (dir ""
 * gives name), or -ENAMETOOLONG.  lw_names_add: list rel, the name of a
 * multi-linked file, or note what its file is now when listed already.
 * lw_node_add: record that wd watches a new node (a second name of a
 * file already watched keeps its node).  lw_node_moved: node found again
 * under name in dnode (at sub) by an IN_MOVED_TO takes its new name and
 * place, and the listed names below a directory follow it; -ESTALE when
 * it is not the entry the node was.  Each returns 0 or -errno. */
int lw_join(char *buf, size_t size, const char *dir, const char *name);
int lw_names_add(struct lw_state *st, const char *rel,
		 const struct lw_nmeta *m);
int lw_node_add(struct lw_state *st, int wd, uint32_t parent, const char *name,
		bool dir, uint64_t ino);
int lw_node_moved(struct lw_state *st, uint32_t node, uint32_t dnode,
		  const char *name, const struct stat *sb, const char *sub);

/* st's view for a run (view, vro), made again when stale
 * (linkwatch_plan.c).  0 or -ENOMEM. */
int lw_view(struct lw_state *st);

/* Free the view's directories (state_free). */
void lw_view_clear(struct lw_state *st);

#endif

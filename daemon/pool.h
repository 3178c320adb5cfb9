/*
 * Work off spd's loop: a step on libuv's thread pool, then the next back
 * on the loop.  What each such step of spd shares (a session's start and
 * its end's read, a run's walk and sync, a checkpoint's read, a removed
 * worktree, a closed watch): the request, the function that runs on the
 * pool, and the one that follows on the loop.
 */
#ifndef SPD_DAEMON_POOL_H
#define SPD_DAEMON_POOL_H

#include <uv.h>

typedef void (*pool_fn)(void *data);

/*
 * work(data) on loop's thread pool, then done(data) on the loop (done may
 * be NULL: nothing follows).  0 when
 * queued; -errno (no loop, no memory, the pool refused it) and nothing
 * run, for a caller that has a path of its own for that.  A request the
 * loop cancels before it ran still runs: work(data) first, on the loop.
 */
int pool_queue(uv_loop_t *loop, pool_fn work, pool_fn done, void *data);

/* pool_queue, or, where it cannot queue, work(data) then done(data)
 * here and now: one path for the caller either way. */
void pool_run(uv_loop_t *loop, pool_fn work, pool_fn done, void *data);

#endif

/*
 * The spare, inside sandboxd (spawn.h has what main.c calls): the next
 * run's pid 1, cloned ahead into the namespaces every run needs, with its
 * command's process waiting beside it (child.h, child_spare_entry).
 */
#ifndef SPD_SANDBOXD_LINUX_SPARE_H
#define SPD_SANDBOXD_LINUX_SPARE_H

#include <sys/types.h>

#include "sandboxd/linux/child.h"
#include "sandboxd/linux/spawn.h"

/* Clones a cold spare when there is none and it can serve a run, and,
 * with heat, one to heat when none is waiting for its heat (spawn.h):
 * in an empty slot, else in that of the hot spare heated longest ago. */
void spare_make(struct spawn_ctx *ctx, bool heat);

/* The slot of the spare to heat once it is ready, or -1. */
int spare_to_heat(const struct spawn_ctx *ctx);

/* Drops the spare to heat, for a heat that cannot be made: left cold
 * beside the cold one, it would hold a slot for nothing. */
void spare_heat_drop(struct spawn_ctx *ctx);

/* How long sandboxd waits for a spare's answer to HEAT (0.5-1 ms here)
 * before it drops the spare: it does nothing else meanwhile. */
#define SPARE_HEAT_TIMEOUT_MS 1000
/* How long a run waits for the spare it takes to say it is ready (made
 * a few ms before, usually long ready) before it is dropped and the run
 * cloned anew. */
#define SPARE_READY_TIMEOUT_MS 2000

/*
 * Heats the spare to heat (spare_to_heat) for the run in a, which hot
 * (spawn.c's) owns and which must stay as it is while the spare is hot:
 * reads the spare's 'r', hands it a as HEAT, waits for its 'h', and then
 * holds hot in its slot (freed with it).  Returns 0; or -1, the spare
 * dropped and hot the caller's still.
 */
int spare_heat(struct spawn_ctx *ctx, struct spawn_hot *hot,
	       const struct child_args *a);

/*
 * The run's init from a spare fit for it, a hot one (hot: only for the
 * run it was heated for; the run's a then names no user namespace: the
 * spare entered one at HEAT) or a cold one (!hot): returns its
 * pid once its command has executed or died, as a clone with CLONE_VFORK
 * would; or 0, the caller then clones.  Closes sandboxd's write end of
 * the report pipe (*report_w), whose end is how sandboxd knows the
 * command is past its exec and no longer uses its memory, and sets
 * *status_r to the read end of the spare's status pipe, whose write end
 * its init, sandboxd-init already, holds.
 */
pid_t spare_take(struct spawn_ctx *ctx, const struct child_args *a,
		 unsigned long flags, bool hot, int *report_w, int *status_r,
		 int report_r);

/* A stack for a run's or a spare's process (its top), or NULL. */
char *spawn_stack_map(void);

#endif

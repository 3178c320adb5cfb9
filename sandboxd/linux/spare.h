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

/* Clones the spare when there is none and it can serve a run. */
void spare_make(struct spawn_ctx *ctx);

/* How long sandboxd waits for a spare's answer to HEAT (0.5-1 ms here)
 * before it drops the spare: it does nothing else meanwhile. */
#define SPARE_HEAT_TIMEOUT_MS 1000

/*
 * Heats the spare (spawn.h, spawn_spare_heat) for the run in a, which
 * hot (spawn.c's) owns and which must stay as it is while the spare is
 * hot: reads the spare's 'r', hands it a as HEAT, waits for its 'h',
 * and then holds hot as ctx->hot (spawn_spare_drop frees it).  Returns
 * 0; or -1, the caller keeping hot: the spare stays cold when a's plan
 * does not begin with its head, else it is dropped.
 */
int spare_heat(struct spawn_ctx *ctx, struct spawn_hot *hot,
	       const struct child_args *a);

/*
 * The run's init from the spare, if there is one fit for it (a hot one
 * only for the run it was heated for; the run's a then names no user
 * namespace: the spare entered one at HEAT): returns its
 * pid once its command has executed or died, as a clone with CLONE_VFORK
 * would; or 0, the caller then clones.  Closes sandboxd's write end of
 * the report pipe (*report_w), whose end is how sandboxd knows the
 * command is past its exec and no longer uses its memory, and sets
 * *status_r to the read end of the spare's status pipe, whose write end
 * its init, sandboxd-init already, holds.
 */
pid_t spare_take(struct spawn_ctx *ctx, const struct child_args *a,
		 unsigned long flags, int *report_w, int *status_r,
		 int report_r);

#endif

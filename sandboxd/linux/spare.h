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

/*
 * The run's init from the spare, if there is one fit for it: returns its
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

/*
 * Hard links planted in a writable path from the host (docs/sandbox.md,
 * "Hard links"): the check mount.c runs in the run's pid 1 after the
 * plan's binds and before the pivot.  Internal to sandboxd/linux.
 */
#ifndef SPD_SANDBOXD_LINKS_H
#define SPD_SANDBOXD_LINKS_H

struct mountplan;
struct mountplan_scratch;

/*
 * Bind read-only, over itself, every name under the plan's link_roots
 * whose file has a link outside them (past LINKS_EACH_MAX names, the
 * directories all of whose files do, whole); with the plan's link_names (spd's
 * watch), only those names are judged, and a list that cannot decide
 * falls back to the full walk.  hide_src is the plan's hidden directory,
 * whose binds are not walked.  Async-signal-safe, syscalls only; scratch
 * (may be NULL) is the walk's memory kept between runs.  Returns 0 or
 * -errno (-EMLINK past MOUNTPLAN_LINKS_MAX names to bind).
 */
int links_check(const struct mountplan *p, const char *hide_src,
		struct mountplan_scratch *scratch);

#endif

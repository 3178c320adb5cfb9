/*
 * The user namespaces sandboxd makes for runs as root (userns.c): the
 * idmapped mounts' one per run uid, kept; the run's own, made ahead.
 */
#ifndef SPD_SANDBOXD_LINUX_USERNS_H
#define SPD_SANDBOXD_LINUX_USERNS_H

#include <sys/types.h>

#include "spawn.h"

/* The idmapped mounts' user namespace for uid and gid (the operator's
 * uid seen as theirs), made once per pair and kept in ctx: *ret_fd is
 * borrowed.  Returns 0 or -errno. */
int userns_idmap(struct spawn_ctx *ctx, uid_t uid, gid_t gid, int *ret_fd);
/* A run's own user namespace for uid and gid: the one made ahead when it
 * is for them, else a new one; *ret_fd is the caller's.  Returns 0 or
 * -errno. */
int userns_run(struct spawn_ctx *ctx, uid_t uid, gid_t gid, int *ret_fd);
/* Root: the next run's (userns_run), made ahead for the last uid. */
void userns_run_ahead(struct spawn_ctx *ctx);

#endif

/*
 * The operator's spd.conf (git-config syntax, read with libgit2):
 *
 *   [sandbox]
 *       mode = required | best-effort
 *       user = nobody          ; the run uid when spd runs as root
 *       writable = /path       ; repeated: extra writable paths
 *       hidden = ~/path        ; repeated: paths no run sees, nor the
 *                              ; file tools outside the workspace
 *       timeout = 600          ; default deadline in seconds
 *       output-cap = 1048576   ; bytes retained per stream
 *       kill-grace = 5         ; seconds from SIGTERM to SIGKILL when spd
 *                              ; ends a run (0: SIGKILL at once)
 *   [approvals]
 *       timeout = 600          ; seconds an ask waits for a person
 *   [journal]
 *       queue-max = 67108864   ; bytes of rows waiting for the disk before
 *                              ; spd refuses requests (journal.h)
 *   [limits]                   ; daemon/transport/quota.h: defaults and why
 *       auth-timeout = 5       ; seconds a connection has to authenticate
 *       grant-lifetime = 600   ; seconds an approval given ahead of its
 *                              ; call (policy.check, wait:false) stays usable
 *       session-connections = 64
 *       session-runs = 16      ; runs in flight per session
 *       session-journal-rate = 1200   ; journaled requests a minute
 *       operator-connections = 64     ; slots only the operator may take
 *       operator-runs = 32            ; sandboxd slots only for the operator
 *       proxy-head-timeout = 30       ; seconds to send a proxy request head
 *       proxy-idle-timeout = 900      ; seconds a proxied connection may idle
 */
#ifndef SPD_DAEMON_CONFIG_H
#define SPD_DAEMON_CONFIG_H

#include "daemon/spd.h"

/* Longest a run may be given, whatever is asked: a day. */
#define CONFIG_TIMEOUT_MAX_S (24 * 3600)
#define CONFIG_TIMEOUT_DEFAULT_S 600
#define CONFIG_OUTPUT_CAP_DEFAULT (1024 * 1024)
/* A run spd ends (its client gone: spctl acp after the agent's exit
 * grace) gets SIGTERM, then SIGKILL this long after: enough for a Node
 * agent to flush its files and exit, short enough that a run that ignores
 * SIGTERM does not hold its slot for long. */
#define CONFIG_KILL_GRACE_DEFAULT_S 5
/* Most [sandbox] hidden paths: each is a mount in every run, and a run
 * has SBXP_PATHS_MAX paths in all (SESSION_RUN_PATHS_RESERVED keeps
 * room for them). */
#define CONFIG_HIDDEN_MAX 8

/*
 * Fill *cfg with defaults, then read path if it exists.  An unknown value
 * (mode = maybe, a user that does not exist) is an error: spd refuses to
 * start rather than guess.  Returns 0 or -errno with a message in errbuf.
 */
/*
 * Call cb for every entry of gc whose name begins with prefix (compared
 * without case, as git's section names are), in file order.  libgit2's
 * regex matching (git_config_foreach_match) leaks pcre2 match data, so
 * spd walks the entries itself.  Returns 0, the first non-zero value cb
 * returned, or -EINVAL when gc cannot be read.
 */
struct git_config;
struct git_config_entry;
int config_foreach_prefix(struct git_config *gc, const char *prefix,
			  int (*cb)(const struct git_config_entry *e,
				    void *data),
			  void *data);

int config_load(const char *path, struct spd_config *cfg, char *errbuf,
		size_t errlen);
/*
 * config_load's work on a file already open and checked (conftab_open),
 * or on none (gc NULL: the defaults): every key of the table that has a
 * field, then the lists and names.  *cfg is overwritten; on an error it
 * holds what was read so far and must still be given to config_free.
 * Returns 0 or -errno with the key, the value and its range in errbuf.
 */
int config_read(struct git_config *gc, const char *path, struct spd_config *cfg,
		char *errbuf, size_t errlen);
/*
 * Push what every run must not see onto out: spd's own config, state and
 * runtime directories, then spd.conf's [sandbox] hidden paths as a run
 * must cover them: each one's real path when it resolves (a cover follows
 * symlinks, and sandboxd looks at the path itself with lstat), else as
 * configured (a missing path has nothing to cover, or is made and covered
 * under a writable one).  Paths are resolved per run: one created later
 * is covered from then on.  Returns 0 or -ENOMEM (the run must not
 * start).
 */
struct strv;
int config_run_hidden_push(const struct spd *spd, struct strv *out);
/* Release what config_load allocated. */
void config_free(struct spd_config *cfg);

#endif

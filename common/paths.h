/*
 * Where spd keeps things (docs/design.md, "Files"), resolved from the
 * environment, and the checks that keep those directories private.
 */
#ifndef SPD_COMMON_PATHS_H
#define SPD_COMMON_PATHS_H

#include <stdbool.h>

struct spd_paths {
	char *
	    config_dir; /* $SPD_CONFIG_DIR, $XDG_CONFIG_HOME/spd, ~/.config/spd */
	char *
	    state_dir; /* $SPD_STATE_DIR, $XDG_STATE_HOME/spd, ~/.local/state/spd */
	char *
	    runtime_dir; /* $SPD_RUNTIME_DIR, $XDG_RUNTIME_DIR/spd, /tmp/spd-$UID */
	char *socket_path;  /* runtime_dir/spd.sock */
	char *pid_path;	    /* runtime_dir/spd.pid */
	char *token_path;   /* config_dir/operator.token */
	char *env_path;	    /* config_dir/environment */
	char *conf_path;    /* config_dir/spd.conf */
	char *journal_path; /* state_dir/journal.db */
	char *log_path;	    /* state_dir/spd.log */
};

/*
 * Fill *ret from the environment.  Returns 0, -ENOENT when no home
 * directory can be found for a default, or -ENOMEM.  Free with
 * paths_free(), which accepts a zeroed or partly filled struct.
 */
int paths_resolve(struct spd_paths *ret);
void paths_free(struct spd_paths *p);

/*
 * Create dir (and missing parents, 0700) and check that it is a real
 * directory owned by the effective uid with no group or other access.
 * Returns 0; -ENOTDIR for a symlink or non-directory; -EPERM when owned by
 * another user; -EACCES when its mode is looser than 0700; or -errno.
 * A directory spd did not make is never chmod-ed behind the operator's back.
 */
int paths_ensure_private_dir(const char *dir);
/*
 * A sentence for the operator on why paths_ensure_private_dir(dir)
 * returned r, with the fix where there is one ("... is accessible to other
 * users (mode 0755; it must be 0700); fix it with: chmod 700 DIR"), in
 * buf.  Returns buf.
 */
const char *paths_private_dir_why(const char *dir, int r, char *buf,
				  size_t size);

/* Join a and b with one '/'.  Returns a new string or NULL. */
char *paths_join(const char *a, const char *b);

/* The first line of the small file at path (the operator token, a lock
 * file's note): at most 511 bytes, without its "\r\n" (malloc'd), or
 * NULL when it cannot be read or the line is empty.  A symlink is not
 * followed. */
char *paths_read_line(const char *path);

/* Whether the absolute path is dir or lies below it (every path lies
 * below "/").  No normalisation: both as spd keeps them. */
bool paths_under(const char *path, const char *dir);

/* The effective uid's home directory from the passwd database, where HOME
 * is unset (common/paths_pw.c; spctl has its own), or NULL. */
const char *paths_passwd_home(void);

#endif

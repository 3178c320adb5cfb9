/*
 * The operator token: created on first start in the config dir (0600),
 * compared in constant time.  Peer credentials of a Unix socket.
 */
#ifndef SPD_DAEMON_AUTH_H
#define SPD_DAEMON_AUTH_H

#include <stdbool.h>
#include <sys/types.h>

/* A token is 32 random bytes written as 64 hex characters. */
#define AUTH_TOKEN_HEX_LEN 64

/*
 * Load the operator token from path, creating it (0600, O_EXCL) with fresh
 * random bytes when absent.  Refuses a token file that is not a regular
 * file owned by us with mode 0600 (-EPERM), or malformed (-EINVAL).
 * ret must hold AUTH_TOKEN_HEX_LEN + 1 bytes.  Returns 0 or -errno.
 */
int auth_load_or_create_token(const char *path, char *ret);

/* Constant-time comparison of a presented token with the expected one.
 * presented may be NULL (→ false). */
bool auth_token_equal(const char *expected, const char *presented);

/* The peer's uid and pid of a connected Unix socket (SO_PEERCRED, or
 * getpeereid on macOS).  Returns 0 or -errno. */
int auth_peer_cred(int fd, uid_t *ret_uid, pid_t *ret_pid);

#endif

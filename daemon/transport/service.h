/*
 * spd under a service manager, without libsystemd: the listening socket
 * systemd passes (the sd_listen_fds(3) protocol: LISTEN_PID, LISTEN_FDS,
 * LISTEN_FDNAMES, descriptors from 3) and the readiness messages it waits
 * for (sd_notify(3): READY=1, STOPPING=1 as a datagram to NOTIFY_SOCKET).
 * Both read and remove their variables, so nothing spd starts inherits
 * them.
 */
#ifndef SPD_DAEMON_SERVICE_H
#define SPD_DAEMON_SERVICE_H

#include <stddef.h>

/* The first passed descriptor (SD_LISTEN_FDS_START). */
#define SERVICE_LISTEN_FDS_START 3
/* The most descriptors spd takes from a service manager.  spd listens on
 * one socket; a unit passing more than this is misconfigured, and a
 * bound keeps a hostile LISTEN_FDS from making spd walk (and keep) a
 * huge descriptor range. */
#define SERVICE_LISTEN_FDS_MAX 16

/*
 * Take the listening socket a service manager passed, as sd_listen_fds
 * does: only when LISTEN_PID (a strict decimal) is this process's pid,
 * LISTEN_FDS a strict decimal from 1 to SERVICE_LISTEN_FDS_MAX, every
 * descriptor from 3 open, and LISTEN_FDNAMES, when set, naming exactly as
 * many.  The socket used is the one named "spd.socket" or "spd", else the
 * first; it must be a listening AF_UNIX stream socket.  It and the other
 * passed descriptors get close-on-exec; the others are closed.
 * LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES are always unset.
 * Returns 0 and *ret_fd the socket (or -1 when nothing was passed to this
 * process), or -EINVAL (malformed variables) / -ENOTSOCK (no usable
 * socket) with why (may be NULL) saying what was wrong; then *ret_fd is
 * -1 and every passed descriptor is left as it was.
 */
int service_listen_socket(int *ret_fd, char *why, size_t whylen);

/*
 * Read NOTIFY_SOCKET (an absolute path or "@" and an abstract name) and
 * unset it.  Returns 1 when notifications will be sent, 0 when the
 * variable is absent, -EINVAL when it is malformed (then none are sent).
 */
int service_notify_init(void);

/*
 * Send state ("READY=1", "STOPPING=1") to the socket service_notify_init
 * found, as one datagram.  Returns 0 when sent or when there is nowhere
 * to send it, -errno when sending failed.  state must not be NULL.
 */
int service_notify(const char *state);

#endif

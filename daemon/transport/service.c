/*
 * Socket activation and readiness without libsystemd
 * (daemon/transport/service.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon/transport/service.h"

/* A strict decimal: digits only (no sign, no space, no "0x"), no
 * overflow, at least one digit.  atoi() would take "3abc" and " 1" and
 * make "-1" or "99999999999" something else. */
static int parse_decimal(const char *s, long max, long *ret)
{
	long v = 0;

	if (!s || !*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		if (v > (max - (*s - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (*s - '0');
	}
	*ret = v;
	return 0;
}

static void unset_listen_env(void)
{
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
}

/* Count LISTEN_FDNAMES's colon-separated names, and find the one spd's
 * unit gives its socket (systemd names it after the socket unit unless
 * FileDescriptorName= says otherwise).  An empty value names nothing, as
 * sd_listen_fds_with_names reads it. */
static size_t count_names(const char *names, long *ret_spd_index)
{
	size_t n = 0;
	const char *p = names, *end;

	*ret_spd_index = -1;
	if (!*names)
		return 0;
	for (;;) {
		end = strchrnul(p, ':');
		if (*ret_spd_index < 0 &&
		    (((size_t)(end - p) == strlen("spd.socket") &&
		      strncmp(p, "spd.socket", (size_t)(end - p)) == 0) ||
		     ((size_t)(end - p) == strlen("spd") &&
		      strncmp(p, "spd", (size_t)(end - p)) == 0)))
			*ret_spd_index = (long)n;
		n++;
		if (!*end)
			break;
		p = end + 1;
	}
	return n;
}

/* A descriptor spd can accept clients on: a listening Unix stream
 * socket.  Anything else (a datagram socket, a TCP port, a file) would
 * make spd serve nobody or the network. */
static bool is_unix_listener(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(int), slen = sizeof(ss);
	int type = 0, acc = 0;

	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0 ||
	    type != SOCK_STREAM)
		return false;
	len = sizeof(int);
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &len) < 0 || !acc)
		return false;
	if (getsockname(fd, (struct sockaddr *)&ss, &slen) < 0)
		return false;
	return ss.ss_family == AF_UNIX;
}

int service_listen_socket(int *ret_fd, char *why, size_t whylen)
{
	const char *pid_s = getenv("LISTEN_PID"), *fds_s = getenv("LISTEN_FDS");
	const char *names = getenv("LISTEN_FDNAMES");
	long pid, n, spd_index = -1, pick;
	size_t n_names;
	int r = 0;

	*ret_fd = -1;
	if (why && whylen)
		why[0] = '\0';
	/* No LISTEN_PID, or another process's: the variables were meant
	 * for a parent and leaked through (a shell started by a socket
	 * unit); they are nothing to spd, as sd_listen_fds says. */
	if (!pid_s || !fds_s)
		goto out;
	if (parse_decimal(pid_s, INT32_MAX, &pid) < 0 || pid == 0) {
		if (why)
			snprintf(why, whylen,
				 "LISTEN_PID=\"%.32s\" is not a pid", pid_s);
		r = -EINVAL;
		goto out;
	}
	if (pid != (long)getpid())
		goto out;
	if (parse_decimal(fds_s, SERVICE_LISTEN_FDS_MAX, &n) < 0 || n < 1) {
		if (why)
			snprintf(why, whylen,
				 "LISTEN_FDS=\"%.32s\" is not a count from 1 "
				 "to %d",
				 fds_s, SERVICE_LISTEN_FDS_MAX);
		r = -EINVAL;
		goto out;
	}
	if (names) {
		n_names = count_names(names, &spd_index);
		if (n_names != (size_t)n) {
			if (why)
				snprintf(why, whylen,
					 "LISTEN_FDNAMES names %zu "
					 "descriptors, LISTEN_FDS says %ld",
					 n_names, n);
			r = -EINVAL;
			goto out;
		}
	}
	for (long i = 0; i < n; i++) {
		if (fcntl(SERVICE_LISTEN_FDS_START + (int)i, F_GETFD) < 0) {
			if (why)
				snprintf(why, whylen,
					 "LISTEN_FDS=%ld but descriptor %ld "
					 "is not open",
					 n, SERVICE_LISTEN_FDS_START + i);
			r = -EINVAL;
			goto out;
		}
	}
	pick = spd_index >= 0 ? spd_index : 0;
	if (!is_unix_listener(SERVICE_LISTEN_FDS_START + (int)pick)) {
		if (why)
			snprintf(why, whylen,
				 "descriptor %ld is not a listening Unix "
				 "stream socket",
				 SERVICE_LISTEN_FDS_START + pick);
		r = -ENOTSOCK;
		goto out;
	}
	/* Nothing spd starts (sandboxd, and through it every run) may hold
	 * the socket clients reach spd on. */
	for (long i = 0; i < n; i++) {
		int fd = SERVICE_LISTEN_FDS_START + (int)i;

		if (i == pick)
			fcntl(fd, F_SETFD, FD_CLOEXEC);
		else
			close(fd);
	}
	*ret_fd = SERVICE_LISTEN_FDS_START + (int)pick;
out:
	unset_listen_env();
	return r;
}

static struct sockaddr_un notify_addr;
static socklen_t notify_len; /* 0: no NOTIFY_SOCKET */

int service_notify_init(void)
{
	const char *e = getenv("NOTIFY_SOCKET");
	size_t len;
	int r = 0;

	notify_len = 0;
	if (!e)
		return 0;
	len = strlen(e);
	/* An absolute path, or "@name" for the abstract namespace (the
	 * leading byte becomes NUL and the name is not NUL-terminated). */
	if ((e[0] != '/' && e[0] != '@') || len < 2 ||
	    len >= sizeof(notify_addr.sun_path)) {
		r = -EINVAL;
		goto out;
	}
	memset(&notify_addr, 0, sizeof(notify_addr));
	notify_addr.sun_family = AF_UNIX;
	memcpy(notify_addr.sun_path, e, len);
	if (e[0] == '@') {
		notify_addr.sun_path[0] = '\0';
		notify_len =
		    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
	} else {
		notify_len =
		    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len +
				1);
	}
	r = 1;
out:
	unsetenv("NOTIFY_SOCKET");
	return r;
}

int service_notify(const char *state)
{
	ssize_t w;
	int fd, r = 0;

	if (!notify_len)
		return 0;
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	w = sendto(fd, state, strlen(state), MSG_NOSIGNAL,
		   (struct sockaddr *)&notify_addr, notify_len);
	if (w < 0)
		r = -errno;
	else if ((size_t)w != strlen(state))
		r = -EMSGSIZE;
	close(fd);
	return r;
}

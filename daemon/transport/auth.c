/*
 * The operator token (daemon/transport/auth.h): made on first start, kept 0600 in
 * the config dir, compared in constant time; and the peer credentials of
 * a Unix socket connection.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/transport/auth.h"
#include "common/util.h"

static int read_token(int fd, char *ret)
{
	char tmp[AUTH_TOKEN_HEX_LEN + 2];
	struct stat st;
	ssize_t n;

	if (fstat(fd, &st) < 0)
		return -errno;
	/* A token readable by others, or planted by another user, is not a
	 * secret any more: refuse rather than trust it. */
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077))
		return -EPERM;
	n = pread(fd, tmp, sizeof(tmp), 0);
	if (n < 0)
		return -errno;
	while (n > 0 && (tmp[n - 1] == '\n' || tmp[n - 1] == '\r'))
		n--;
	if (n != AUTH_TOKEN_HEX_LEN)
		return -EINVAL;
	for (ssize_t i = 0; i < n; i++)
		if (!strchr("0123456789abcdef", tmp[i]))
			return -EINVAL;
	memcpy(ret, tmp, AUTH_TOKEN_HEX_LEN);
	ret[AUTH_TOKEN_HEX_LEN] = '\0';
	return 0;
}

int auth_load_or_create_token(const char *path, char *ret)
{
	_cleanup_close_ int fd = -1;
	unsigned char raw[AUTH_TOKEN_HEX_LEN / 2];
	char hex[AUTH_TOKEN_HEX_LEN + 2], tmp[PATH_MAX];

	if (sodium_init() < 0)
		return -EIO;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0)
		return read_token(fd, ret);
	if (errno != ENOENT)
		return -errno;
	/* Written whole under a temporary name, then linked into place: a
	 * client reading the token the moment it appears (socket
	 * activation: its connection is what started spd) never sees an
	 * empty or partial file.  link(2) refuses to replace a token another
	 * spd made meanwhile. */
	if (snprintf(tmp, sizeof(tmp), "%s.new", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
		  0600);
	if (fd < 0)
		return -errno;
	randombytes_buf(raw, sizeof(raw));
	sodium_bin2hex(hex, sizeof(hex), raw, sizeof(raw));
	sodium_memzero(raw, sizeof(raw));
	hex[AUTH_TOKEN_HEX_LEN] = '\n';
	if (write(fd, hex, AUTH_TOKEN_HEX_LEN + 1) != AUTH_TOKEN_HEX_LEN + 1 ||
	    fsync(fd) < 0 || link(tmp, path) < 0) {
		int r = -errno;

		unlink(tmp);
		sodium_memzero(hex, sizeof(hex));
		return r ? r : -EIO;
	}
	unlink(tmp);
	memcpy(ret, hex, AUTH_TOKEN_HEX_LEN);
	ret[AUTH_TOKEN_HEX_LEN] = '\0';
	sodium_memzero(hex, sizeof(hex));
	return 0;
}

bool auth_token_equal(const char *expected, const char *presented)
{
	size_t n = strlen(expected);

	if (!presented || strlen(presented) != n || n == 0)
		return false;
	return sodium_memcmp(expected, presented, n) == 0;
}

int auth_peer_cred(int fd, uid_t *ret_uid, pid_t *ret_pid)
{
#ifdef SO_PEERCRED
	struct ucred uc;
	socklen_t len = sizeof(uc);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0)
		return -errno;
	*ret_uid = uc.uid;
	*ret_pid = uc.pid;
	return 0;
#else
	uid_t uid;
	gid_t gid;

	if (getpeereid(fd, &uid, &gid) < 0)
		return -errno;
	*ret_uid = uid;
	*ret_pid = 0;
	return 0;
#endif
}

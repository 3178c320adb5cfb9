/*
 * Where spd's directories are (common/paths.h): the SPD_*_DIR overrides,
 * then the XDG variables, then the defaults under HOME; and the check that
 * a directory is the caller's own and private (0700, not a symlink).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "paths.h"

bool paths_under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	return strncmp(path, dir, n) == 0 &&
	       (path[n] == '\0' || path[n] == '/' || (n == 1 && dir[0] == '/'));
}

char *paths_join(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	char *p = malloc(la + lb + 2);

	if (!p)
		return NULL;
	memcpy(p, a, la);
	while (la > 1 && p[la - 1] == '/')
		la--;
	p[la] = '/';
	memcpy(p + la + 1, b, lb + 1);
	return p;
}

static const char *home_dir(void)
{
	const char *h = getenv("HOME");

	if (h && h[0] == '/')
		return h;
	return paths_passwd_home();
}

/* Pick $over, else $xdg/spd, else $HOME/fallback/spd. */
static int pick(const char *over, const char *xdg, const char *fallback,
		char **ret)
{
	const char *v = getenv(over), *home;
	char *base;

	if (v && v[0] == '/') {
		*ret = strdup(v);
		return *ret ? 0 : -ENOMEM;
	}
	v = getenv(xdg);
	if (v && v[0] == '/') {
		*ret = paths_join(v, "spd");
		return *ret ? 0 : -ENOMEM;
	}
	home = home_dir();
	if (!home)
		return -ENOENT;
	base = paths_join(home, fallback);
	if (!base)
		return -ENOMEM;
	*ret = paths_join(base, "spd");
	free(base);
	return *ret ? 0 : -ENOMEM;
}

int paths_resolve(struct spd_paths *p)
{
	const char *v;
	int r;

	memset(p, 0, sizeof(*p));
	r = pick("SPD_CONFIG_DIR", "XDG_CONFIG_HOME", ".config",
		 &p->config_dir);
	if (r < 0)
		goto fail;
	r = pick("SPD_STATE_DIR", "XDG_STATE_HOME", ".local/state",
		 &p->state_dir);
	if (r < 0)
		goto fail;
	v = getenv("SPD_RUNTIME_DIR");
	if (v && v[0] == '/') {
		p->runtime_dir = strdup(v);
	} else if ((v = getenv("XDG_RUNTIME_DIR")) && v[0] == '/') {
		p->runtime_dir = paths_join(v, "spd");
	} else {
		char tmp[64];
		snprintf(tmp, sizeof(tmp), "/tmp/spd-%u", (unsigned)geteuid());
		p->runtime_dir = strdup(tmp);
	}
	r = -ENOMEM;
	if (!p->runtime_dir)
		goto fail;
	if (!(p->socket_path = paths_join(p->runtime_dir, "spd.sock")) ||
	    !(p->pid_path = paths_join(p->runtime_dir, "spd.pid")) ||
	    !(p->token_path = paths_join(p->config_dir, "operator.token")) ||
	    !(p->env_path = paths_join(p->config_dir, "environment")) ||
	    !(p->conf_path = paths_join(p->config_dir, "spd.conf")) ||
	    !(p->journal_path = paths_join(p->state_dir, "journal.db")) ||
	    !(p->log_path = paths_join(p->state_dir, "spd.log")))
		goto fail;
	return 0;
fail:
	paths_free(p);
	return r;
}

void paths_free(struct spd_paths *p)
{
	if (!p)
		return;
	free(p->config_dir);
	free(p->state_dir);
	free(p->runtime_dir);
	free(p->socket_path);
	free(p->pid_path);
	free(p->token_path);
	free(p->env_path);
	free(p->conf_path);
	free(p->journal_path);
	free(p->log_path);
	memset(p, 0, sizeof(*p));
}

static int mkdir_parents(const char *dir)
{
	char *tmp = strdup(dir);
	int r = 0;

	if (!tmp)
		return -ENOMEM;
	for (char *s = tmp + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(tmp, 0700) < 0 && errno != EEXIST) {
			r = -errno;
			break;
		}
		*s = '/';
	}
	free(tmp);
	return r;
}

int paths_ensure_private_dir(const char *dir)
{
	struct stat st;
	int r;

	if (dir[0] != '/')
		return -EINVAL;
	r = mkdir_parents(dir);
	if (r < 0)
		return r;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	/* lstat: a symlink planted at /tmp/spd-$UID by another user must
	 * not redirect spd's socket or pid file. */
	if (lstat(dir, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if (st.st_uid != geteuid())
		return -EPERM;
	if (st.st_mode & 077)
		return -EACCES;
	return 0;
}

const char *paths_private_dir_why(const char *dir, int r, char *buf,
				  size_t size)
{
	struct stat st;

	if (r == -EPERM)
		snprintf(buf, size,
			 "%s is owned by another user; refusing to use it",
			 dir);
	else if (r == -EACCES && lstat(dir, &st) == 0)
		snprintf(buf, size,
			 "%s is accessible to other users (mode %04o; it must "
			 "be 0700); fix it with: chmod 700 %s",
			 dir, (unsigned)(st.st_mode & 07777), dir);
	else if (r == -EACCES)
		snprintf(buf, size,
			 "%s is accessible to other users (it must be 0700); "
			 "fix it with: chmod 700 %s",
			 dir, dir);
	else if (r == -ENOTDIR)
		snprintf(buf, size, "%s is not a directory (or is a symlink)",
			 dir);
	else
		snprintf(buf, size, "cannot create %s: %s", dir, strerror(-r));
	return buf;
}

char *paths_read_line(const char *path)
{
	char buf[512];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return NULL;
	do {
		n = read(fd, buf, sizeof(buf) - 1);
	} while (n < 0 && errno == EINTR);
	close(fd);
	if (n <= 0)
		return NULL;
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	return buf[0] ? strdup(buf) : NULL;
}

/* fds: descriptors a run inherited, and what /proc lets it reopen: every
 * open fd and where it leads, /proc/self/exe and /proc/1/exe opened for
 * writing, and the fds of pid 1 (the run's init, a copy of sandboxd). */
#include "common.h"
#include <dirent.h>

static int list_fds(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[512], link[512];

	if (!d) {
		res_err(dir, errno);
		return 0;
	}
	while ((e = readdir(d))) {
		ssize_t n;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		n = readlink(path, link, sizeof(link) - 1);
		link[n > 0 ? n : 0] = 0;
		printf("FD %s -> %s\n", path, link);
		/* Reopening through /proc is how a leaked fd is abused. */
		int fd = open(path, O_RDWR | O_CLOEXEC);

		if (fd < 0)
			fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			printf("REOPEN %s -> %s\n", path, link);
			close(fd);
		}
	}
	closedir(d);
	return 1;
}

int main(void)
{
	int open_fds = 0;

	for (int fd = 3; fd < 65536; fd++)
		if (fcntl(fd, F_GETFD) >= 0) {
			char path[64], link[512];
			ssize_t n;

			snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
			n = readlink(path, link, sizeof(link) - 1);
			link[n > 0 ? n : 0] = 0;
			printf("R fd-%d OK open -> %s\n", fd, link);
			open_fds++;
		}
	if (!open_fds)
		printf("R extra-fds ERR none\n");
	list_fds("/proc/self/fd");
	/* pid 1 is the run's init: its descriptors are not the run's to
	 * see (the control, in a pid namespace of its own, can). */
	if (list_fds("/proc/1/fd"))
		res_ok("/proc/1/fd", "listed");
	static const char *exes[] = {"/proc/self/exe", "/proc/1/exe",
				     "/proc/2/exe"};
	for (size_t i = 0; i < 3; i++) {
		char name[64], link[512];
		ssize_t n = readlink(exes[i], link, sizeof(link) - 1);

		link[n > 0 ? n : 0] = 0;
		printf("EXE %s -> %s\n", exes[i], link);
		int fd = open(exes[i], O_WRONLY | O_CLOEXEC);

		snprintf(name, sizeof(name), "write%s", exes[i]);
		if (fd >= 0) {
			res_ok(name, "opened for writing (%s)", link);
			close(fd);
		} else {
			res_err(name, errno);
		}
	}
	fflush(stdout);
	return 0;
}

/* rd PATH...: read each file (or every file below a directory) and print it,
 * the way an attack would exfiltrate a credential. */
#include "common.h"
#include <dirent.h>
#include <sys/stat.h>

static void dump(const char *path, int depth)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		res_err(path, errno);
		return;
	}
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		DIR *d = fdopendir(fd);
		struct dirent *e;

		if (!d) {
			res_err(path, errno);
			close(fd);
			return;
		}
		res_ok(path, "dir");
		while (depth < 8 && (e = readdir(d))) {
			char sub[4096];

			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
			dump(sub, depth + 1);
		}
		closedir(d);
		return;
	}
	char buf[65536];
	ssize_t n, total = 0;

	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		if (total == 0)
			printf("R %s OK read\n", path);
		fwrite(buf, 1, n, stdout);
		total += n;
	}
	if (n < 0)
		res_err(path, errno);
	else if (total == 0)
		res_ok(path, "empty");
	printf("\n");
	fflush(stdout);
	close(fd);
}

int main(int argc, char **argv)
{
	int n;
	char **args = expand_args(argc - 1, argv + 1, &n);

	for (int i = 0; i < n; i++)
		dump(args[i], 0);
	return 0;
}

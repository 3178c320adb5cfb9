/* fsop OP ARGS... [OP ARGS...]: file-system operations used to write outside
 * the workspace: write, append, trunc, mkdir, rename, link, symlink, unlink,
 * chmod, xattr. Each prints one result line. */
#include "common.h"
#include <sys/stat.h>
#include <sys/xattr.h>

int main(int argc, char **argv)
{
	int n;
	char **a = expand_args(argc - 1, argv + 1, &n);

	for (int i = 0; i < n;) {
		const char *op = a[i];
		char name[512];
		int r = -1, fd;

		if (i + 2 > n)
			break;
		snprintf(name, sizeof(name), "%s:%s", op, a[i + 1]);
		if (!strcmp(op, "write") || !strcmp(op, "append")) {
			int fl = O_WRONLY | O_CREAT | O_CLOEXEC |
				 (op[0] == 'w' ? O_TRUNC : O_APPEND);

			if (i + 3 > n)
				break;
			fd = open(a[i + 1], fl, 0644);
			if (fd >= 0) {
				r = write(fd, a[i + 2], strlen(a[i + 2])) < 0
					? -1
					: 0;
				close(fd);
			}
			i += 3;
		} else if (!strcmp(op, "trunc")) {
			r = truncate(a[i + 1], 0);
			i += 2;
		} else if (!strcmp(op, "mkdir")) {
			r = mkdir(a[i + 1], 0755);
			i += 2;
		} else if (!strcmp(op, "unlink")) {
			r = unlink(a[i + 1]);
			i += 2;
		} else if (!strcmp(op, "chmod")) {
			r = chmod(a[i + 1], 0777);
			i += 2;
		} else if (!strcmp(op, "xattr")) {
			r = setxattr(a[i + 1], "user.escape", "x", 1, 0);
			i += 2;
		} else if (!strcmp(op, "rename") || !strcmp(op, "link") ||
			   !strcmp(op, "symlink") || !strcmp(op, "exchange")) {
			if (i + 3 > n)
				break;
			if (op[0] == 'r')
				r = rename(a[i + 1], a[i + 2]);
			else if (op[0] == 'l')
				r = link(a[i + 1], a[i + 2]);
			else if (op[0] == 's')
				r = symlink(a[i + 1], a[i + 2]);
			else
				r = renameat2(AT_FDCWD, a[i + 1], AT_FDCWD,
					      a[i + 2], RENAME_EXCHANGE);
			i += 3;
		} else {
			fprintf(stderr, "fsop: unknown op %s\n", op);
			return 2;
		}
		if (r == 0)
			res_ok(name, "done");
		else
			res_err(name, errno);
	}
	return 0;
}

/* priv: what privilege does this process hold? Prints its ids and
 * capability sets, then tries to become root and to make device nodes in
 * the directory given (default "."). Copied setuid-root by the driver, it
 * shows whether a setuid bit raises privileges inside a run. */
#include "common.h"
#include <sys/stat.h>
#include <sys/sysmacros.h>

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : ".";
	char line[256], path[4096];
	FILE *f = fopen("/proc/self/status", "r");
	uid_t r, e, s;

	getresuid(&r, &e, &s);
	printf("I uid %u euid %u suid %u\n", r, e, s);
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "Cap", 3) ||
		    !strncmp(line, "NoNewPrivs", 10) ||
		    !strncmp(line, "Seccomp:", 8))
			printf("I %s", line);
	if (f)
		fclose(f);
	if (e == 0)
		res_ok("euid0", "effective uid is 0");
	else
		res_err("euid0", EPERM);
	if (setuid(0) == 0)
		res_ok("setuid0", "setuid(0) worked");
	else
		res_err("setuid0", errno);
	snprintf(path, sizeof(path), "%s/escape-null", dir);
	if (mknod(path, S_IFCHR | 0666, makedev(1, 3)) == 0)
		res_ok("mknod-chr", "%s", path);
	else
		res_err("mknod-chr", errno);
	snprintf(path, sizeof(path), "%s/escape-sda", dir);
	if (mknod(path, S_IFBLK | 0666, makedev(8, 0)) == 0)
		res_ok("mknod-blk", "%s", path);
	else
		res_err("mknod-blk", errno);
	snprintf(path, sizeof(path), "%s/escape-mem", dir);
	if (mknod(path, S_IFCHR | 0666, makedev(1, 1)) == 0)
		res_ok("mknod-mem", "%s", path);
	else
		res_err("mknod-mem", errno);
	fflush(stdout);
	return 0;
}

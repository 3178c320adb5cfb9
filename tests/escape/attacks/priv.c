/* priv: what privilege does this process hold? Prints its ids and
 * capability sets, then tries to become root and to make device nodes in
 * the directory given (default "."). Copied setuid-root by the driver, it
 * shows whether a setuid bit raises privileges inside a run.  "priv setid
 * DIR" plants setuid and setgid files in DIR instead. */
#include "common.h"
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>

/* One setid attempt: did the file at path end up setuid or setgid? */
static void setid_result(const char *name, const char *path, int r, int err)
{
	struct stat st;

	if (r < 0) {
		res_err(name, err);
		return;
	}
	if (stat(path, &st) < 0) {
		res_err(name, errno);
		return;
	}
	if (st.st_mode & (S_ISUID | S_ISGID))
		res_ok(name, "%s is mode %o", path, st.st_mode & 07777);
	else
		res_err(name, EPERM); /* the call worked, the bits did not */
}

/* A copy of this program at dir/name; returns its path (static). */
static const char *setid_copy(const char *dir, const char *name)
{
	static char path[4096];
	char buf[65536];
	ssize_t n;
	int in = open("/proc/self/exe", O_RDONLY | O_CLOEXEC), out;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	unlink(path);
	out = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0755);
	while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			break;
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	return path;
}

/*
 * priv setid DIR: plant set-user-ID and set-group-ID files in DIR (the
 * workspace), each a way the bits can be set.  Such a file, stored as the
 * operator's, would run as the operator (or root) for whoever executes it
 * on the host later.
 */
static int setid(const char *dir)
{
	const char *p;
	char path[4096];
	int fd, r, e;

	p = setid_copy(dir, "setid-chmod-u");
	r = chmod(p, 04755);
	setid_result("chmod-setuid", p, r, errno);
	p = setid_copy(dir, "setid-chmod-g");
	r = chmod(p, 02755);
	setid_result("chmod-setgid", p, r, errno);
	p = setid_copy(dir, "setid-fchmod");
	fd = open(p, O_RDONLY | O_CLOEXEC);
	r = fchmod(fd, 06755);
	e = errno;
	close(fd);
	setid_result("fchmod", p, r, e);
	p = setid_copy(dir, "setid-fchmodat");
	r = fchmodat(AT_FDCWD, p, 04755, 0);
	setid_result("fchmodat", p, r, errno);
	p = setid_copy(dir, "setid-fchmodat2");
	r = (int)syscall(452 /* fchmodat2 */, AT_FDCWD, p, 04755, 0);
	setid_result("fchmodat2", p, r, errno);
	p = setid_copy(dir, "setid-procfd");
	fd = open(p, O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	r = chmod(path, 04755);
	e = errno;
	close(fd);
	setid_result("chmod-via-proc-fd", p, r, e);
	/* Created with the bits: empty, but a later write by root keeps
	 * them (CAP_FSETID). */
	snprintf(path, sizeof(path), "%s/setid-creat", dir);
	unlink(path);
	fd = (int)syscall(SYS_openat, AT_FDCWD, path,
			  O_CREAT | O_WRONLY | O_CLOEXEC, 04755);
	e = errno;
	if (fd >= 0)
		close(fd);
	setid_result("create-setuid", path, fd, e);
	snprintf(path, sizeof(path), "%s/setid-mknod", dir);
	unlink(path);
	r = mknod(path, S_IFREG | 02755, 0);
	setid_result("mknod-setgid", path, r, errno);
	snprintf(path, sizeof(path), "%s/setid-openat2", dir);
	unlink(path);
	{
		struct {
			unsigned long long flags, mode, resolve;
		} how = {O_CREAT | O_WRONLY | O_CLOEXEC, 04755, 0};

		fd = (int)syscall(437 /* openat2 */, AT_FDCWD, path, &how,
				  sizeof(how));
		e = errno;
		if (fd >= 0)
			close(fd);
		setid_result("openat2-setuid", path, fd, e);
	}
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 2 && !strcmp(argv[1], "setid"))
		return setid(argv[2]);

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

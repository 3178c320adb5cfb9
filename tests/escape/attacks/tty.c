/* tty TEXT: push TEXT into the input of every terminal within reach
 * (stdin, stdout, stderr, /dev/tty) with TIOCSTI, and try TIOCLINUX's paste
 * and selection, also with junk in the upper 32 bits of the request. */
#include "common.h"
#include <sys/ioctl.h>
#include <sys/syscall.h>

static const unsigned long junk = 0xdeadbeef00000000ul;

static void sti(const char *name, int fd, unsigned long req, const char *text)
{
	int ok = 0, err = 0;

	for (const char *p = text; *p; p++) {
		/* Raw syscall: glibc would truncate nothing, but be explicit
		 * that the full 64-bit request reaches the kernel. */
		if (syscall(SYS_ioctl, fd, req, p) < 0) {
			err = errno;
			break;
		}
		ok++;
	}
	if (err)
		res_err(name, err);
	else
		res_ok(name, "%d chars", ok);
}

static void linux_sub(const char *name, int fd, unsigned long req, char sub)
{
	char arg[8] = {sub};

	if (syscall(SYS_ioctl, fd, req, arg) < 0)
		res_err(name, errno);
	else
		res_ok(name, "subcode %d", sub);
}

int main(int argc, char **argv)
{
	const char *text = argc > 1 ? argv[1] : "echo injected\n";
	int fds[4] = {0, 1, 2, -1};
	const char *names[4] = {"stdin", "stdout", "stderr", "devtty"};
	char name[64];

	fds[3] = open("/dev/tty", O_RDWR | O_NOCTTY);
	if (fds[3] < 0) {
		int err = errno;

		res_err("open-devtty", err);
		res_err("tiocsti-devtty", err);
		res_err("tiocsti-hi-devtty", err);
		res_err("tioclinux-paste-devtty", err);
		res_err("tioclinux-hi-paste-devtty", err);
	} else {
		res_ok("open-devtty", "opened");
	}
	for (int i = 0; i < 4; i++) {
		if (fds[i] < 0)
			continue;
		snprintf(name, sizeof(name), "tiocsti-%s", names[i]);
		sti(name, fds[i], TIOCSTI, text);
		snprintf(name, sizeof(name), "tiocsti-hi-%s", names[i]);
		sti(name, fds[i], TIOCSTI | junk, text);
		/* 3 = paste selection, 2 = set selection, 6 = shift state */
	}
	/* TIOCLINUX only works on a virtual console; tried on the terminal
	 * anyway, with and without junk in the upper bits. */
	if (fds[3] >= 0) {
		linux_sub("tioclinux-paste-devtty", fds[3], TIOCLINUX, 3);
		linux_sub("tioclinux-hi-paste-devtty", fds[3], TIOCLINUX | junk,
			  3);
	}
	return 0;
}

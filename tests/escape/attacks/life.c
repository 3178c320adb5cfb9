/* life OP ...: outliving a run and exhausting its resources.
 *   daemon MARKER DELAY   double fork, setsid, ignore every catchable
 *                         signal, then after DELAY seconds create MARKER
 *   ignterm               ignore SIGTERM/SIGHUP/SIGINT and spin
 *   bomb TAG [hold]       fork until refused; every child waits (and
 *                         with hold, so does the bomb once it printed)
 *   fill PATH             write zeros to PATH until refused
 *   flood                 write to stdout forever
 *   ok                    print "life: ok" and exit 0
 *   hold TAG              pause forever (the host-side victim process) */
#include "common.h"
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

static void ignore_all(void)
{
	for (int s = 1; s < NSIG; s++)
		signal(s, SIG_IGN);
}

int main(int argc, char **argv)
{
	const char *op = argc > 1 ? argv[1] : "";

	if (!strcmp(op, "daemon") && argc > 3) {
		int delay = atoi(argv[3]);

		if (fork() != 0)
			return 0;
		setsid();
		if (fork() != 0)
			_exit(0);
		ignore_all();
		int null = open("/dev/null", O_RDWR);

		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		sleep(delay);
		int fd = open(argv[2], O_WRONLY | O_CREAT, 0644);

		if (fd >= 0)
			(void)!write(fd, "survived\n", 9);
		return 0;
	}
	if (!strcmp(op, "ignterm")) {
		ignore_all();
		printf("R ignterm OK ignoring\n");
		fflush(stdout);
		for (;;)
			pause();
	}
	if (!strcmp(op, "bomb")) {
		long n = 0;

		for (;;) {
			pid_t p = fork();

			if (p == 0) {
				for (;;)
					pause();
			}
			if (p < 0)
				break;
			n++;
		}
		printf("R bomb ERR forked %ld then %s\n", n,
		       strerrorname_np(errno));
		fflush(stdout);
		if (argc > 3 && !strcmp(argv[3], "hold"))
			for (;;)
				pause();
		return 0;
	}
	if (!strcmp(op, "fill") && argc > 2) {
		static char buf[1 << 20];
		int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
		long long total = 0;
		ssize_t w;

		signal(SIGXFSZ, SIG_IGN);
		if (fd < 0) {
			res_err("fill", errno);
			return 0;
		}
		while ((w = write(fd, buf, sizeof(buf))) > 0)
			total += w;
		printf("R fill ERR wrote %lld then %s\n", total,
		       strerrorname_np(errno));
		return 0;
	}
	if (!strcmp(op, "ok")) {
		puts("life: ok");
		return 0;
	}
	if (!strcmp(op, "flood")) {
		static char buf[65536];

		memset(buf, 'A', sizeof(buf));
		for (;;)
			if (write(1, buf, sizeof(buf)) < 0)
				return 0;
	}
	if (!strcmp(op, "hold")) {
		for (;;)
			pause();
	}
	fprintf(stderr, "life: bad arguments\n");
	return 2;
}

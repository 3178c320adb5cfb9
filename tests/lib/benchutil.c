/*
 * Helpers the benchmarks share (tests/lib/benchutil.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "benchutil.h"

int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double bench_median(double *v, int n)
{
	if (n <= 0)
		return 0;
	qsort(v, (size_t)n, sizeof(*v), bench_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

long bench_rss_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

int bench_make_files(const char *ws, long files, int dirs)
{
	char path[4300];

	for (long i = 0; i < files; i++) {
		int fd;

		snprintf(path, sizeof(path), "%s/d%03ld", ws, i % dirs);
		if (i < dirs && mkdir(path, 0755) < 0)
			return -errno;
		snprintf(path, sizeof(path), "%s/d%03ld/f%07ld", ws, i % dirs,
			 i);
		fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0)
			return -errno;
		close(fd);
	}
	return 0;
}

int bench_run_quiet(char *const argv[])
{
	int st;
	pid_t pid = fork();

	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);

		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		execvp(argv[0], argv);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

pid_t bench_spd_start(const char *build, const char *dir)
{
	char spd[4200], sock[4200], v[4200];
	pid_t pid;

	snprintf(spd, sizeof(spd), "%s/spd", build);
	snprintf(sock, sizeof(sock), "%s/run/spd.sock", dir);
	snprintf(v, sizeof(v), "%s/config", dir);
	setenv("SPD_CONFIG_DIR", v, 1);
	snprintf(v, sizeof(v), "%s/state", dir);
	setenv("SPD_STATE_DIR", v, 1);
	snprintf(v, sizeof(v), "%s/run", dir);
	setenv("SPD_RUNTIME_DIR", v, 1);
	setenv("SPD_NO_AUTOSTART", "1", 1);
	pid = fork();
	if (pid == 0) {
		int devnull = open("/dev/null", O_WRONLY);

		dup2(devnull, 2);
		execl(spd, spd, "--foreground", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; pid > 0 && i < 500 && access(sock, F_OK) < 0; i++)
		usleep(10000);
	return pid;
}

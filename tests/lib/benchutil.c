/*
 * Helpers the benchmarks share (tests/lib/benchutil.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "benchutil.h"
#include "client/client.h"

extern char **environ;

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

bool bench_start_forks(void)
{
	const char *v = getenv("BENCH_START");

	return v && strcmp(v, "fork") == 0;
}

/* fork of this process, then exec: what passes 1-14 measured. */
static pid_t start_fork(char *const argv[])
{
	pid_t pid = fork();

	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);

		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		execvp(argv[0], argv);
		_exit(127);
	}
	return pid;
}

int bench_run_quiet(char *const argv[])
{
	posix_spawn_file_actions_t fa;
	int st, r;
	pid_t pid;

	if (bench_start_forks()) {
		pid = start_fork(argv);
	} else {
		if (posix_spawn_file_actions_init(&fa) != 0)
			return -1;
		r = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null",
						     O_RDWR, 0);
		if (r == 0)
			r = posix_spawn_file_actions_adddup2(&fa, 0, 1);
		if (r == 0)
			r = posix_spawn_file_actions_adddup2(&fa, 0, 2);
		if (r == 0)
			r = posix_spawnp(&pid, argv[0], &fa, NULL, argv,
					 environ);
		posix_spawn_file_actions_destroy(&fa);
		if (r != 0)
			return -1;
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

double bench_start_window[2];

static double mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int bench_agent_session(const char *dir, const char *name, long files, int dirs,
			bool in_place)
{
	char repo[4200], cmd[8600], err[512];
	json_t *res = NULL, *e = NULL;
	struct client c;
	static char tok[300];
	int r = -1;

	snprintf(repo, sizeof(repo), "%s/%s", dir, name);
	if (mkdir(repo, 0755) < 0 ||
	    (files && bench_make_files(repo, files, dirs) < 0))
		return -1;
	snprintf(cmd, sizeof(cmd),
		 "cd %s && git init -q && echo x > f && "
		 "printf 'node_modules/\\n*.log\\n' > .gitignore && "
		 "git add -A && git -c user.name=b -c user.email=b@b commit "
		 "-qm x && mkdir -p node_modules/m && echo m > "
		 "node_modules/m/i.js && echo l > app.log",
		 repo);
	if (system(cmd) != 0 || client_open(&c, err, sizeof(err)) < 0)
		return -1;
	bench_start_window[0] = mono_ms();
	r = client_call(&c, RPC_M_SESSION_START,
			json_pack("{s:s, s:s, s:b}", "repo", repo, "feature",
				  name, "in_place", in_place),
			NULL, NULL, &res, &e);
	bench_start_window[1] = mono_ms();
	if (r == 0 && json_string_value(json_object_get(res, "token"))) {
		snprintf(tok, sizeof(tok), "SPD_SESSION_TOKEN=%s",
			 json_string_value(json_object_get(res, "token")));
		putenv(tok);
		r = 0;
	} else {
		if (e)
			fprintf(
			    stderr, "session.start: %s\n",
			    json_string_value(json_object_get(e, "message")));
		r = -1;
	}
	json_decref(res);
	json_decref(e);
	client_close(&c);
	return r;
}

const char *bench_met(bool met)
{
	return met ? "met" : "NOT MET";
}

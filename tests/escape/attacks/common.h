/* Shared by the escape suite's attack programs: each prints one line per
 * attempt, "R <name> OK <detail>" when the attempt worked (an escape when it
 * ran in the sandbox) or "R <name> ERR <why>" when it was refused. Arguments
 * of the form @FILE are read from FILE, one per line, so that the policy
 * layer never sees the paths and the kernel layers are what is tested. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ATK_MAX_ARGS 256

static void res_ok(const char *name, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), unused));
static void res_ok(const char *name, const char *fmt, ...)
{
	va_list ap;

	printf("R %s OK ", name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

static __attribute__((unused)) void res_err(const char *name, int err)
{
	printf("R %s ERR %s\n", name,
	       strerrorname_np(err) ? strerrorname_np(err) : "?");
	fflush(stdout);
}

/* Expand @FILE arguments; returns a NULL-terminated vector. */
static __attribute__((unused)) char **expand_args(int argc, char **argv,
						  int *ret_n)
{
	static char *out[ATK_MAX_ARGS + 1];
	int n = 0;

	for (int i = 0; i < argc && n < ATK_MAX_ARGS; i++) {
		if (argv[i][0] != '@') {
			out[n++] = argv[i];
			continue;
		}
		FILE *f = fopen(argv[i] + 1, "r");
		char line[4096];

		if (!f) {
			perror(argv[i] + 1);
			exit(2);
		}
		while (n < ATK_MAX_ARGS && fgets(line, sizeof(line), f)) {
			line[strcspn(line, "\n")] = 0;
			if (line[0])
				out[n++] = strdup(line);
		}
		fclose(f);
	}
	out[n] = NULL;
	*ret_n = n;
	return out;
}

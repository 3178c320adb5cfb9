/*
 * Fuzz target for the policy classifier, the path resolver and the script
 * scanners.  Input: a first line of flags, then one argument per line
 * (embedded NUL bytes are kept and passed with their lengths).  Flags:
 * 'r' read / 'w' write (the first argument is the path), 'h' host
 * network, 'i' in-place, 'e' the arguments up to a line "--" are
 * environment entries, 'c' the next argument is the working directory.
 * Every input is classified twice: a crash or two different answers for
 * the same input is a failure (abort).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/policy.h"
#include "daemon/protected.h"

#define FUZZ_ARGS_MAX 64

static char ws[256];

static void put(const char *rel)
{
	char p[512];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", ws, rel);
	f = fopen(p, "w");
	if (f) {
		fputs("x\n", f);
		fclose(f);
	}
}

static void sub(const char *rel)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", ws, rel);
	mkdir(p, 0700);
}

static void lnk(const char *target, const char *rel)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", ws, rel);
	if (symlink(target, p) < 0)
		return;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void cleanup(void)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", ws);
	if (ws[0] == '/' && system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", ws);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char tmpl[] = "/tmp/spd-fuzz-policy-XXXXXX";
	char *real;

	if (!mkdtemp(tmpl))
		abort();
	real = realpath(tmpl, NULL);
	if (!real)
		abort();
	snprintf(ws, sizeof(ws), "%s", real);
	free(real);
	atexit(cleanup);
	sub("src");
	sub(".github");
	sub(".git");
	sub("bin");
	sub("tests");
	put("src/main.c");
	put(".env");
	put(".spd.conf");
	put("Makefile");
	put(".github/ci.yml");
	put(".git/config");
	put("tests/test_a.py");
	put("bin/cat");
	lnk(".github", "gh");
	lnk("/", "root");
	lnk("loop", "loop");
	lnk("../..", "src/up");
	return 0;
}

static bool same(const struct policy_result *a, const struct policy_result *b)
{
	if (a->decision != b->decision || strcmp(a->rule, b->rule) != 0 ||
	    a->n_paths != b->n_paths)
		return false;
	if ((a->exe == NULL) != (b->exe == NULL) ||
	    (a->exe && strcmp(a->exe, b->exe) != 0))
		return false;
	for (size_t i = 0; i < a->n_paths; i++)
		if (strcmp(a->paths[i], b->paths[i]) != 0)
			return false;
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size + 1);
	const char *fields[FUZZ_ARGS_MAX];
	size_t lens[FUZZ_ARGS_MAX], n = 0;
	const char *flags = "";
	const char *argv[FUZZ_ARGS_MAX], *env[FUZZ_ARGS_MAX];
	size_t alen[FUZZ_ARGS_MAX], argc = 0, envc = 0, i = 0;
	struct policy_context ctx = {.workspace = ws};
	struct policy_call call = {.kind = POLICY_CALL_EXEC};
	struct policy_result r1, r2;
	char **words;
	int w;

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';

	/* The scanners and the word splitter see the raw text (up to the
	 * first NUL). */
	(void)policy_sed_scan(buf);
	(void)policy_awk_scan(buf);
	(void)protected_match(buf);
	(void)protected_is_test(buf);
	w = policy_split_words(buf, &words);
	if (w >= 0)
		policy_words_free(words);

	for (size_t s = 0; s <= size && n < FUZZ_ARGS_MAX;) {
		const char *e = memchr(buf + s, '\n', size - s);
		size_t l = e ? (size_t)(e - (buf + s)) : size - s;

		buf[s + l] = '\0';
		fields[n] = buf + s;
		lens[n] = l;
		n++;
		s += l + 1;
		if (!e)
			break;
	}
	if (n == 0)
		goto out;
	flags = fields[i++];
	if (strchr(flags, 'e'))
		for (; i < n && strcmp(fields[i], "--") != 0; i++)
			env[envc++] = fields[i];
	if (strchr(flags, 'e') && i < n)
		i++;
	if (strchr(flags, 'c') && i < n)
		call.cwd = fields[i++];
	for (; i < n; i++) {
		argv[argc] = fields[i];
		alen[argc] = lens[i];
		argc++;
	}
	if (strchr(flags, 'r') || strchr(flags, 'w')) {
		call.kind =
		    strchr(flags, 'w') ? POLICY_CALL_WRITE : POLICY_CALL_READ;
		call.path = argc ? argv[0] : "";
		call.path_len = argc ? alen[0] : 0;
	} else {
		call.argv = argv;
		call.argv_len = alen;
		call.argc = argc;
		call.env = env;
		call.envc = envc;
	}
	call.net = strchr(flags, 'h') ? POLICY_NET_HOST : POLICY_NET_NONE;
	ctx.in_place = strchr(flags, 'i') != NULL;
	if (policy_classify(NULL, &ctx, &call, &r1) < 0)
		goto out;
	if (policy_classify(NULL, &ctx, &call, &r2) < 0)
		abort();
	if (!same(&r1, &r2)) {
		fprintf(stderr, "different answers: %s %s / %s %s\n", r1.rule,
			policy_decision_name(r1.decision), r2.rule,
			policy_decision_name(r2.decision));
		abort();
	}
	policy_result_free(&r1);
	policy_result_free(&r2);
out:
	free(buf);
	return 0;
}

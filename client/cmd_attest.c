/*
 * spctl attest key|show|verify: spd's signing key, and the attestations
 * spd signs under refs/notes/spd.  The repository is read by spd; spctl
 * only names it.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/cmds.h"
#include "client/termsafe.h"
#include "proto/rpc.h"

static int attest_usage(void)
{
	fprintf(
	    stderr,
	    "usage: spctl attest key\n"
	    "       spctl attest show COMMIT [--repo DIR]\n"
	    "       spctl attest verify --branch B [--repo DIR] [--base REF] "
	    "[--trust KEY]...\n");
	return CMD_EXIT_USAGE;
}

static void print_obj(json_t *o)
{
	char *s = json_dumps(o, JSON_COMPACT);

	if (s)
		puts(s);
	free(s);
}

static void line(const char *label, json_t *v)
{
	const char *s = json_string_value(v);

	fputs(label, stdout);
	ts_fputs(stdout, s ? s : "-");
	fputc('\n', stdout);
}

/* The repository spd is to read: --repo's, or the current directory,
 * made absolute (spd's working directory is not the caller's). */
static json_t *repo_path(const char *dir)
{
	char *real = realpath(dir ? dir : ".", NULL);
	json_t *s;

	if (!real) {
		fprintf(stderr, "spctl: attest: %s: not a directory\n",
			dir ? dir : ".");
		return NULL;
	}
	s = json_string(real);
	free(real);
	return s;
}

static int attest_key(struct cmd_ctx *ctx)
{
	int ex = 0;
	json_t *res = cmd_call(RPC_M_ATTEST_KEY, NULL, &ex);

	if (!res)
		return ex;
	if (ctx->json) {
		print_obj(res);
	} else {
		line("key:         ", json_object_get(res, "key"));
		line("fingerprint: ", json_object_get(res, "fingerprint"));
	}
	json_decref(res);
	return 0;
}

static void print_checks(json_t *pred)
{
	json_t *checks = json_object_get(pred, "checks"), *ck;
	size_t i;

	json_array_foreach(checks, i, ck)
	{
		json_t *argv = json_object_get(ck, "argv"), *a;
		size_t k;

		fputs("  check ", stdout);
		ts_fputs(stdout,
			 json_string_value(json_object_get(ck, "name")) ?: "?");
		printf(": exit %lld", (long long)json_integer_value(
					  json_object_get(ck, "exit")));
		if (json_is_integer(json_object_get(ck, "duration_ms")))
			printf(", %lld ms",
			       (long long)json_integer_value(
				   json_object_get(ck, "duration_ms")));
		fputs(":", stdout);
		json_array_foreach(argv, k, a)
		{
			fputc(' ', stdout);
			ts_fputs(stdout, json_string_value(a) ?: "");
		}
		fputc('\n', stdout);
	}
	json_array_foreach(json_object_get(pred, "gates"), i, ck)
	{
		printf("  gate %-10s %s  ",
		       json_string_value(json_object_get(ck, "name")) ?: "?",
		       json_is_true(json_object_get(ck, "pass")) ? "pass"
								 : "FAIL");
		ts_fputs(stdout,
			 json_string_value(json_object_get(ck, "detail"))
			     ?: "");
		fputc('\n', stdout);
	}
}

static int attest_show(struct cmd_ctx *ctx, int argc, char **argv)
{
	const char *commit = NULL, *dir = NULL;
	json_t *params, *repo, *res, *st, *pred;
	int ex = 0;

	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--repo") == 0 && i + 1 < argc)
			dir = argv[++i];
		else if (argv[i][0] != '-' && !commit)
			commit = argv[i];
		else
			return attest_usage();
	}
	if (!commit)
		return attest_usage();
	if (!(repo = repo_path(dir)))
		return CMD_EXIT_USAGE;
	params = json_pack("{s:o, s:s}", "repo", repo, "commit", commit);
	res = cmd_call(RPC_M_ATTEST_SHOW, params, &ex);
	if (!res)
		return ex;
	if (ctx->json) {
		print_obj(res);
		json_decref(res);
		return 0;
	}
	st = json_object_get(res, "statement");
	pred = json_object_get(st, "predicate");
	line("commit:     ", json_object_get(res, "commit"));
	line("tree:       ", json_object_get(pred, "tree"));
	line("verdict:    ", json_object_get(res, "verdict"));
	if (json_is_true(json_object_get(res, "valid"))) {
		line("signed by:  ", json_object_get(res, "key"));
	} else {
		fputs("signature:  NOT VALID (", stdout);
		ts_fputs(stdout,
			 json_string_value(json_object_get(res, "why")) ?: "");
		fputs("): what follows is unverified\n", stdout);
	}
	line("key id:     ", json_object_get(res, "keyid"));
	line("signed at:  ", json_object_get(pred, "signed_at"));
	line("by:         ", json_object_get(pred, "method"));
	line("session:    ", json_object_get(pred, "session"));
	line("branch:     ", json_object_get(pred, "branch"));
	line("base:       ", json_object_get(pred, "base"));
	line("checked:    ", json_object_get(pred, "checked"));
	if (json_is_integer(json_object_get(pred, "worktree_uncommitted")))
		printf("uncommitted files in the worktree: %lld\n",
		       (long long)json_integer_value(
			   json_object_get(pred, "worktree_uncommitted")));
	line("policy:     ", json_object_get(pred, "project_conf_sha256"));
	printf("journal:    row %lld, ",
	       (long long)json_integer_value(json_object_get(
		   json_object_get(pred, "journal"), "head_id")));
	line("",
	     json_object_get(json_object_get(pred, "journal"), "head_hash"));
	print_checks(pred);
	json_decref(res);
	return 0;
}

static int attest_verify(struct cmd_ctx *ctx, int argc, char **argv)
{
	const char *branch = NULL, *dir = NULL, *base = NULL;
	json_t *trust = NULL, *params, *repo, *res, *c;
	bool ok;
	size_t i;
	int ex = 0;

	for (int k = 2; k < argc; k++) {
		if (strcmp(argv[k], "--branch") == 0 && k + 1 < argc) {
			branch = argv[++k];
		} else if (strcmp(argv[k], "--repo") == 0 && k + 1 < argc) {
			dir = argv[++k];
		} else if (strcmp(argv[k], "--base") == 0 && k + 1 < argc) {
			base = argv[++k];
		} else if (strcmp(argv[k], "--trust") == 0 && k + 1 < argc) {
			if (!trust)
				trust = json_array();
			json_array_append_new(trust, json_string(argv[++k]));
		} else {
			json_decref(trust);
			return attest_usage();
		}
	}
	if (!branch) {
		json_decref(trust);
		return attest_usage();
	}
	if (!(repo = repo_path(dir))) {
		json_decref(trust);
		return CMD_EXIT_USAGE;
	}
	params = json_pack("{s:o, s:s}", "repo", repo, "branch", branch);
	if (base)
		json_object_set_new(params, "base", json_string(base));
	if (trust)
		json_object_set_new(params, "trust", trust);
	res = cmd_call(RPC_M_ATTEST_VERIFY, params, &ex);
	if (!res)
		return ex;
	ok = json_is_true(json_object_get(res, "ok"));
	if (ctx->json) {
		print_obj(res);
		json_decref(res);
		return ok ? 0 : CMD_EXIT_CHECK_FAILED;
	}
	json_array_foreach(json_object_get(res, "commits"), i, c)
	{
		const char *h = json_string_value(json_object_get(c, "commit"));

		printf("%.12s  ", h ? h : "?");
		if (json_is_true(json_object_get(c, "attested"))) {
			fputs("attested, verdict ", stdout);
			ts_fputs(stdout, json_string_value(
					     json_object_get(c, "verdict"))
					     ?: "?");
			fputs(", signed by ", stdout);
			ts_fputs(stdout,
				 json_string_value(json_object_get(c, "key"))
				     ?: "?");
			fputs(" at ", stdout);
			ts_fputs(stdout, json_string_value(
					     json_object_get(c, "signed_at"))
					     ?: "?");
			fputs(" (", stdout);
			ts_fputs(stdout,
				 json_string_value(json_object_get(c, "method"))
				     ?: "?");
			fputc(')', stdout);
		} else {
			ts_fputs(stdout,
				 json_string_value(json_object_get(c, "why"))
				     ?: "not attested");
		}
		fputc('\n', stdout);
	}
	if (ok) {
		printf("%s: attested\n", branch);
	} else {
		fputs("FAIL: ", stdout);
		ts_fputs(stdout,
			 json_string_value(json_object_get(res, "why")) ?: "");
		fputc('\n', stdout);
	}
	json_decref(res);
	return ok ? 0 : CMD_EXIT_CHECK_FAILED;
}

int cmd_attest(struct cmd_ctx *ctx, int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "key") == 0)
		return attest_key(ctx);
	if (argc >= 2 && strcmp(argv[1], "show") == 0)
		return attest_show(ctx, argc, argv);
	if (argc >= 2 && strcmp(argv[1], "verify") == 0)
		return attest_verify(ctx, argc, argv);
	return attest_usage();
}

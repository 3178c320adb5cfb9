/*
 * spctl session … and spctl policy check.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/rpc.h"
#include "client.h"
#include "client/termsafe.h"
#include "cmds.h"

static void print_json(json_t *v)
{
	char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);

	puts(s ? s : "null");
	free(s);
}

static const char *str(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "-";
}

/* One "label: value" line; the value through termsafe.h, since paths and
 * findings name files the agent created. */
static void print_line(const char *label, const char *value)
{
	fputs(label, stdout);
	ts_fputs(stdout, value);
	fputc('\n', stdout);
}

static void print_session(json_t *s)
{
	json_t *f = json_object_get(s, "finding");

	print_line("id:        ", str(s, "id"));
	print_line("feature:   ", str(s, "feature"));
	print_line("state:     ", str(s, "state"));
	print_line("mode:      ", str(s, "mode"));
	print_line("repo:      ", str(s, "repo"));
	print_line("worktree:  ", str(s, "worktree"));
	print_line("branch:    ", str(s, "branch"));
	print_line("base:      ", str(s, "base"));
	printf("commands:  %lld\n",
	       (long long)json_integer_value(json_object_get(s, "commands")));
	if (f) {
		fputs("finding:   ", stdout);
		ts_fputs(stdout, str(f, "code"));
		fputc(' ', stdout);
		ts_fputs(stdout, str(f, "path"));
		fputc('\n', stdout);
	}
}

/* A field through termsafe.h, padded to a column like %-*s. */
static void print_padded(const char *value, int width)
{
	char *b = NULL;
	size_t n = 0;
	FILE *m = open_memstream(&b, &n);

	if (!m)
		return;
	ts_fputs(m, value);
	fclose(m);
	printf("%-*s", width, b ? b : "");
	free(b);
}

/* A diff is the agent's text: byte for byte into a file or a pipe (it may
 * be applied), through termsafe.h onto a terminal. */
static void print_diff(const char *text)
{
	struct ts_stream st = {0};

	fflush(stdout);
	if (isatty(STDOUT_FILENO) != 1) {
		fputs(text, stdout);
		return;
	}
	ts_stream_write(STDOUT_FILENO, &st, text, strlen(text));
	ts_stream_end(STDOUT_FILENO, &st);
}

static int session_usage(void)
{
	fprintf(stderr,
		"usage: spctl session start FEATURE [--repo DIR] [--in-place]\n"
		"       spctl session list\n"
		"       spctl session show ID | end ID | status [ID]\n"
		"       spctl session heldout ID DIR\n"
		"       spctl session verify ID | diff ID\n");
	return CMD_EXIT_USAGE;
}

static int session_start(struct cmd_ctx *ctx, int argc, char **argv)
{
	const char *feature = NULL;
	char repo[PATH_MAX];
	bool in_place = false;
	json_t *res;
	int ex = 0;

	if (!getcwd(repo, sizeof(repo)))
		return CMD_EXIT_SPD;
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--repo") == 0 && i + 1 < argc) {
			if (!realpath(argv[++i], repo)) {
				fprintf(stderr, "spctl: %s: %s\n", argv[i],
					strerror(errno));
				return CMD_EXIT_USAGE;
			}
		} else if (strcmp(argv[i], "--in-place") == 0) {
			in_place = true;
		} else if (!feature && argv[i][0] != '-') {
			feature = argv[i];
		} else {
			return session_usage();
		}
	}
	if (!feature)
		return session_usage();
	res = cmd_call(RPC_M_SESSION_START,
		       json_pack("{s:s, s:s, s:b}", "repo", repo, "feature",
				 feature, "in_place", in_place),
		       &ex);
	if (!res)
		return ex;
	if (ctx->json) {
		print_json(res);
	} else {
		json_t *s = json_object_get(res, "session");
		print_session(s ? s : res);
		printf("\nThe agent's token (shown once; give it to the agent "
		       "only):\n  SPD_SESSION_TOKEN=%s\n",
		       str(res, "token"));
	}
	json_decref(res);
	return 0;
}

int cmd_session(struct cmd_ctx *ctx, int argc, char **argv)
{
	const char *sub = argc > 1 ? argv[1] : NULL;
	json_t *res = NULL;
	int ex = 0;

	if (!sub)
		return session_usage();
	if (strcmp(sub, "start") == 0)
		return session_start(ctx, argc, argv);
	if (strcmp(sub, "list") == 0 && argc == 2) {
		json_t *a;
		res = cmd_call(RPC_M_SESSION_LIST, NULL, &ex);
		if (!res)
			return ex;
		if (ctx->json) {
			print_json(res);
		} else {
			a = json_object_get(res, "sessions");
			for (size_t i = 0; i < json_array_size(a); i++) {
				json_t *s = json_array_get(a, i);
				printf("%s  %-15s %-9s %-20s %s\n",
				       str(s, "id"), str(s, "state"),
				       str(s, "mode"), str(s, "feature"),
				       str(s, "worktree"));
			}
		}
		json_decref(res);
		return 0;
	}
	if ((strcmp(sub, "show") == 0 || strcmp(sub, "end") == 0 ||
	     strcmp(sub, "diff") == 0 || strcmp(sub, "verify") == 0) &&
	    argc == 3) {
		enum rpc_method method =
		    strcmp(sub, "show") == 0   ? RPC_M_SESSION_SHOW
		    : strcmp(sub, "end") == 0  ? RPC_M_SESSION_END
		    : strcmp(sub, "diff") == 0 ? RPC_M_SESSION_DIFF
					       : RPC_M_SESSION_VERIFY;
		res = cmd_call(method, json_pack("{s:s}", "id", argv[2]), &ex);
		if (!res)
			return ex;
		if (ctx->json) {
			print_json(res);
		} else if (strcmp(sub, "show") == 0) {
			json_t *s = json_object_get(res, "session");
			print_session(s ? s : res);
		} else if (strcmp(sub, "end") == 0) {
			printf("session %s ended; its branch is kept\n",
			       argv[2]);
			if (json_object_get(res, "merge"))
				printf("to merge: %s\n", str(res, "merge"));
		} else if (strcmp(sub, "diff") == 0) {
			print_diff(str(res, "diff"));
			if (json_is_true(json_object_get(res, "truncated")))
				printf("\n[diff truncated]\n");
			if (json_object_get(res, "merge"))
				fprintf(stderr, "to merge: %s\n",
					str(res, "merge"));
		} else {
			json_t *g = json_object_get(res, "gates");
			json_t *ch = json_object_get(res, "checks");
			for (size_t i = 0; i < json_array_size(ch); i++) {
				json_t *c = json_array_get(ch, i);
				fputs("check ", stdout);
				print_padded(str(c, "name"), 16);
				printf(" exit %lld\n",
				       (long long)json_integer_value(
					   json_object_get(c, "exit")));
			}
			for (size_t i = 0; i < json_array_size(g); i++) {
				json_t *x = json_array_get(g, i);
				fputs("gate  ", stdout);
				print_padded(str(x, "name"), 16);
				printf(" %s  ",
				       json_is_true(json_object_get(x, "pass"))
					   ? "pass"
					   : "FAIL");
				ts_fputs(stdout, str(x, "detail"));
				fputc('\n', stdout);
			}
			/* Without checks there is nothing to call a
			 * failure: say how to add one instead. */
			if (json_array_size(ch) == 0 &&
			    !json_is_true(json_object_get(res, "pass")))
				printf(
				    "verdict: none: no checks are configured, "
				    "so nothing was verified.\n"
				    "Add one to the project's .spd.conf and "
				    "commit it (a session reads the file as "
				    "it was when the session started):\n"
				    "\n"
				    "    [check \"test\"]\n"
				    "        run = make test\n");
			else
				printf(
				    "verdict: %s\n",
				    json_is_true(json_object_get(res, "pass"))
					? "PASS"
					: "FAIL");
		}
		ex = 0;
		if (strcmp(sub, "verify") == 0 &&
		    !json_is_true(json_object_get(res, "pass")))
			ex = CMD_EXIT_CHECK_FAILED;
		json_decref(res);
		return ex;
	}
	if (strcmp(sub, "status") == 0 && argc <= 3) {
		res = cmd_call(
		    RPC_M_SESSION_STATUS,
		    argc == 3 ? json_pack("{s:s}", "id", argv[2]) : NULL, &ex);
		if (!res)
			return ex;
		if (ctx->json) {
			print_json(res);
		} else {
			json_t *s = json_object_get(res, "session");
			print_session(s ? s : res);
		}
		json_decref(res);
		return 0;
	}
	if (strcmp(sub, "heldout") == 0 && argc == 4) {
		char dir[PATH_MAX];
		if (!realpath(argv[3], dir)) {
			fprintf(stderr, "spctl: %s: %s\n", argv[3],
				strerror(errno));
			return CMD_EXIT_USAGE;
		}
		res = cmd_call(
		    RPC_M_SESSION_HELDOUT,
		    json_pack("{s:s, s:s}", "id", argv[2], "dir", dir), &ex);
		if (!res)
			return ex;
		if (ctx->json)
			print_json(res);
		else
			printf("sealed %lld held-out file(s) for session %s\n",
			       (long long)json_integer_value(
				   json_object_get(res, "files")),
			       argv[2]);
		json_decref(res);
		return 0;
	}
	return session_usage();
}

static int policy_usage(void)
{
	fprintf(stderr,
		"usage: spctl policy check [--session ID] [--workspace DIR] "
		"[--json] -- ARGV...\n"
		"       spctl policy check [--session ID] [--workspace DIR] "
		"--read PATH | --write PATH\n");
	return CMD_EXIT_USAGE;
}

int cmd_policy(struct cmd_ctx *ctx, int argc, char **argv)
{
	json_t *params = json_object(), *res;
	int i, ex = 0;
	bool have_call = false;
	char ws[PATH_MAX];

	if (argc < 2 || strcmp(argv[1], "check") != 0)
		return policy_usage();
	for (i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			json_t *a = json_array();
			for (i++; i < argc; i++)
				json_array_append_new(a, json_string(argv[i]));
			json_object_set_new(params, "argv", a);
			have_call = true;
			break;
		} else if (strcmp(argv[i], "--session") == 0 && i + 1 < argc) {
			json_object_set_new(params, "session",
					    json_string(argv[++i]));
		} else if (strcmp(argv[i], "--workspace") == 0 &&
			   i + 1 < argc) {
			if (!realpath(argv[++i], ws))
				return policy_usage();
			json_object_set_new(params, "workspace",
					    json_string(ws));
		} else if (strcmp(argv[i], "--read") == 0 && i + 1 < argc) {
			json_object_set_new(params, "read",
					    json_string(argv[++i]));
			have_call = true;
		} else if (strcmp(argv[i], "--write") == 0 && i + 1 < argc) {
			json_object_set_new(params, "write",
					    json_string(argv[++i]));
			have_call = true;
		} else if (strcmp(argv[i], "--json") == 0) {
			ctx->json = true;
		} else {
			json_decref(params);
			return policy_usage();
		}
	}
	if (!have_call) {
		json_decref(params);
		return policy_usage();
	}
	if (!json_object_get(params, "session") &&
	    !json_object_get(params, "workspace") &&
	    !getenv("SPD_SESSION_TOKEN") && getcwd(ws, sizeof(ws)))
		json_object_set_new(params, "workspace", json_string(ws));
	res = cmd_call(RPC_M_POLICY_CHECK, params, &ex);
	if (!res)
		return ex;
	if (ctx->json) {
		print_json(res);
	} else {
		json_t *rv = json_object_get(res, "resolved");
		json_t *paths = json_object_get(rv, "paths");
		ts_fputs(stdout, str(res, "decision"));
		fputs("  (", stdout);
		ts_fputs(stdout, str(res, "rule"));
		fputs(")\n", stdout);
		print_line("", str(res, "reason"));
		if (json_string_value(json_object_get(rv, "exe")))
			print_line("executable: ", str(rv, "exe"));
		for (size_t k = 0; k < json_array_size(paths); k++)
			print_line("path: ",
				   json_string_value(json_array_get(paths, k)));
	}
	json_decref(res);
	return 0;
}

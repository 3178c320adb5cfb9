/*
 * spctl attest key|show|verify: spd's signing key, and the attestations
 * spd signs under refs/notes/spd.  The repository is read by spd; spctl
 * only names it.  spctl is a static musl program without libgit2, so
 * `attest verify` without a running spd (or with --offline) runs the spd
 * binary's verifier (`spd --attest-verify`), which verifies and exits.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/client.h"
#include "client/cmds.h"
#include "client/termsafe.h"
#include "proto/rpc.h"

static int attest_usage(void)
{
	fprintf(
	    stderr,
	    "usage: spctl attest key\n"
	    "       spctl attest show COMMIT [--repo DIR] [--trust KEY]... "
	    "[--trust-from REF:PATH]\n"
	    "       spctl attest verify --branch B [--repo DIR] [--base REF] "
	    "[--trust KEY]...\n"
	    "                           [--trust-from REF:PATH] [--offline] "
	    "[--json]\n");
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

/* What the statement says of the session's journal rows and its model
 * calls. */
static void print_session_record(json_t *pred)
{
	json_t *j = json_object_get(pred, "journal");
	json_t *rows = json_object_get(j, "session_rows");
	json_t *mc = json_object_get(pred, "model_calls"), *m;
	size_t i;

	printf("journal:    row %lld, ",
	       (long long)json_integer_value(json_object_get(j, "head_id")));
	line("", json_object_get(j, "head_hash"));
	if (json_is_object(rows)) {
		printf("session rows: %lld, from row %lld ",
		       (long long)json_integer_value(
			   json_object_get(rows, "count")),
		       (long long)json_integer_value(
			   json_object_get(rows, "first_id")));
		ts_fputs(stdout,
			 json_string_value(json_object_get(rows, "first_hash"))
			     ?: "-");
		printf("\n              to row %lld ",
		       (long long)json_integer_value(
			   json_object_get(rows, "last_id")));
		line("", json_object_get(rows, "last_hash"));
	}
	if (!json_is_object(mc))
		return;
	printf(
	    "model calls: %lld (refused %lld), %lld input and %lld output "
	    "tokens, %.6f USD\n",
	    (long long)json_integer_value(json_object_get(mc, "calls")),
	    (long long)json_integer_value(json_object_get(mc, "refused")),
	    (long long)json_integer_value(json_object_get(mc, "input_tokens")),
	    (long long)json_integer_value(json_object_get(mc, "output_tokens")),
	    json_number_value(json_object_get(mc, "spent_usd")));
	json_array_foreach(json_object_get(mc, "by_model"), i, m)
	{
		fputs("  model ", stdout);
		ts_fputs(stdout,
			 json_string_value(json_object_get(m, "provider"))
			     ?: "?");
		fputc('/', stdout);
		ts_fputs(stdout,
			 json_string_value(json_object_get(m, "model")) ?: "?");
		printf(
		    ": %lld calls, %lld in, %lld out, %.6f USD\n",
		    (long long)json_integer_value(json_object_get(m, "calls")),
		    (long long)json_integer_value(
			json_object_get(m, "input_tokens")),
		    (long long)json_integer_value(
			json_object_get(m, "output_tokens")),
		    json_number_value(json_object_get(m, "spent_usd")));
	}
}

static int attest_show(struct cmd_ctx *ctx, int argc, char **argv)
{
	const char *commit = NULL, *dir = NULL, *from = NULL;
	json_t *params, *repo, *res, *st, *pred, *trust = NULL;
	int ex = 0;

	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--repo") == 0 && i + 1 < argc) {
			dir = argv[++i];
		} else if (strcmp(argv[i], "--trust") == 0 && i + 1 < argc) {
			if (!trust)
				trust = json_array();
			json_array_append_new(trust, json_string(argv[++i]));
		} else if (strcmp(argv[i], "--trust-from") == 0 &&
			   i + 1 < argc) {
			from = argv[++i];
		} else if (argv[i][0] != '-' && !commit) {
			commit = argv[i];
		} else {
			json_decref(trust);
			return attest_usage();
		}
	}
	if (!commit || !(repo = repo_path(dir))) {
		json_decref(trust);
		return commit ? CMD_EXIT_USAGE : attest_usage();
	}
	params = json_pack("{s:o, s:s}", "repo", repo, "commit", commit);
	if (trust)
		json_object_set_new(params, "trust", trust);
	if (from)
		json_object_set_new(params, "trust_from", json_string(from));
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
	line("spd.conf:   ", json_object_get(pred, "spd_conf_sha256"));
	if (json_is_object(json_object_get(res, "trust_from"))) {
		json_t *tf = json_object_get(res, "trust_from");

		printf(
		    "trust from: %lld keys of ",
		    (long long)json_integer_value(json_object_get(tf, "keys")));
		ts_fputs(stdout,
			 json_string_value(json_object_get(tf, "path")) ?: "?");
		fputs(" in ", stdout);
		line("", json_object_get(tf, "commit"));
	}
	print_session_record(pred);
	print_checks(pred);
	json_decref(res);
	return 0;
}

/* The verifier's answer is small (a line per commit); more is not it. */
#define OFFLINE_OUT_MAX (16u << 20)

/*
 * attest.verify by the spd binary, spd not running: `spd --attest-verify
 * PARAMS`, whose stdout is one JSON object {result} or {error}.  Returns
 * the result, or NULL and *ret_exit (the error printed).
 */
static json_t *verify_offline(json_t *params, int *ret_exit)
{
	char *spd = client_find_spd(), *text = json_dumps(params, JSON_COMPACT);
	char *out = NULL;
	size_t n = 0, cap = 0;
	json_t *reply = NULL, *res = NULL;
	int p[2] = {-1, -1}, st = 0;
	pid_t pid = -1;

	*ret_exit = CMD_EXIT_SPD;
	json_decref(params);
	if (!spd || !text || pipe2(p, O_CLOEXEC) < 0)
		goto fail;
	pid = fork();
	if (pid < 0)
		goto fail;
	if (pid == 0) {
		dup2(p[1], STDOUT_FILENO);
		execlp(spd, spd, "--attest-verify", text, (char *)NULL);
		fprintf(stderr, "spctl: cannot run %s: %s\n", spd,
			strerror(errno));
		_exit(127);
	}
	close(p[1]);
	p[1] = -1;
	for (;;) {
		ssize_t r;

		if (n + 4096 + 1 > cap) {
			char *m;

			if (cap >= OFFLINE_OUT_MAX ||
			    !(m = realloc(out, cap ? cap * 2 : 8192)))
				break;
			out = m;
			cap = cap ? cap * 2 : 8192;
		}
		r = read(p[0], out + n, cap - n - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	pid = -1;
	if (out) {
		out[n] = '\0';
		reply = json_loads(out, 0, NULL);
	}
	if ((res = json_object_get(reply, "result"))) {
		json_incref(res);
	} else if (json_object_get(reply, "error")) {
		*ret_exit = cmd_print_error(json_object_get(reply, "error"));
	} else {
		fprintf(stderr,
			"spctl: attest verify: %s --attest-verify gave no "
			"answer (%s %d)\n",
			spd, WIFEXITED(st) ? "exit" : "signal",
			WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	}
	goto out;
fail:
	fprintf(stderr, "spctl: attest verify: cannot run spd's verifier: %s\n",
		strerror(errno));
out:
	if (p[0] >= 0)
		close(p[0]);
	if (p[1] >= 0)
		close(p[1]);
	json_decref(reply);
	free(out);
	free(text);
	free(spd);
	return res;
}

/* attest.verify by the running spd, else by the verifier of the spd
 * binary (never starting spd for it). */
static json_t *verify_call(json_t *params, bool offline, int *ret_exit)
{
	struct client c;
	char errbuf[512] = "";
	json_t *res = NULL, *err = NULL;
	int r;

	if (offline)
		return verify_offline(params, ret_exit);
	r = client_open_running(&c, errbuf, sizeof(errbuf));
	if (r == -ENOENT || r == -ECONNREFUSED)
		return verify_offline(params, ret_exit);
	if (r < 0) {
		json_decref(params);
		fprintf(stderr, "spctl: %s\n", errbuf);
		*ret_exit = CMD_EXIT_SPD;
		return NULL;
	}
	r = client_call(&c, RPC_M_ATTEST_VERIFY, params, NULL, NULL, &res,
			&err);
	client_close(&c);
	if (r == -EPROTO) {
		*ret_exit = cmd_print_error(err);
		json_decref(err);
		return NULL;
	}
	if (r < 0) {
		fprintf(stderr, "spctl: attest.verify: %s\n", strerror(-r));
		*ret_exit = CMD_EXIT_SPD;
		return NULL;
	}
	return res;
}

static int attest_verify(struct cmd_ctx *ctx, int argc, char **argv)
{
	const char *branch = NULL, *dir = NULL, *base = NULL, *from = NULL;
	json_t *trust = NULL, *params, *repo, *res, *c;
	bool ok, offline = false;
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
		} else if (strcmp(argv[k], "--trust-from") == 0 &&
			   k + 1 < argc) {
			from = argv[++k];
		} else if (strcmp(argv[k], "--offline") == 0) {
			offline = true;
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
	if (from)
		json_object_set_new(params, "trust_from", json_string(from));
	res = verify_call(params, offline, &ex);
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

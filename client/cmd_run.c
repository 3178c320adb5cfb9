/*
 * spctl run and spctl doctor.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/rpc.h"
#include "client.h"
#include "client/b64.h"
#include "client/termsafe.h"
#include "cmds.h"

/* The default workspace: the git top-level of the current directory,
 * else the current directory. */
static char *default_workspace(void)
{
	char cwd[PATH_MAX], probe[PATH_MAX + 8];
	struct stat st;
	char *p;

	if (!getcwd(cwd, sizeof(cwd)))
		return NULL;
	for (p = cwd + strlen(cwd);;) {
		snprintf(probe, sizeof(probe), "%.*s/.git", (int)(p - cwd),
			 cwd);
		if (stat(probe, &st) == 0) {
			*p = '\0';
			return strdup(cwd[0] ? cwd : "/");
		}
		while (p > cwd && *--p != '/')
			;
		if (p == cwd)
			break;
	}
	return getcwd(cwd, sizeof(cwd)) ? strdup(cwd) : NULL;
}

static void write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n > 0) {
		ssize_t w = write(fd, c, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		c += w;
		n -= (size_t)w;
	}
}

/* A run's output, written as it comes: byte for byte into a file or a
 * pipe, through termsafe.h onto a terminal (escape sequences from the run
 * shown, not obeyed). */
static struct {
	bool checked, tty[3];
	struct ts_stream st[3];
} out_ctl;

static void write_output(int fd, const void *p, size_t n)
{
	if (!out_ctl.checked) {
		out_ctl.checked = true;
		out_ctl.tty[1] = isatty(1) == 1;
		out_ctl.tty[2] = isatty(2) == 1;
	}
	if (out_ctl.tty[fd])
		ts_stream_write(fd, &out_ctl.st[fd], p, n);
	else
		write_all(fd, p, n);
}

static void end_output(void)
{
	for (int fd = 1; fd <= 2; fd++)
		if (out_ctl.tty[fd])
			ts_stream_end(fd, &out_ctl.st[fd]);
}

/* A connection of the run (network mode proxy) waits for a person. */
static void say_ask(json_t *params)
{
	json_t *o = json_object_get(params, "object");
	long long id =
	    (long long)json_integer_value(json_object_get(params, "id"));

	fprintf(stderr, "spctl: the run waits for a person: approval %lld\n",
		id);
	cmd_print_object(stderr, o, "  ");
	if (json_string_value(json_object_get(params, "reason"))) {
		fputs("  why: ", stderr);
		ts_fputs(stderr,
			 json_string_value(json_object_get(params, "reason")));
		fputc('\n', stderr);
	}
	fprintf(stderr, "  spctl approve %lld (or spctl deny %lld)\n", id, id);
}

static void on_run_event(void *data, const char *method, json_t *params)
{
	const char *stream, *text;
	int fd;

	if (strcmp(method, rpc_notify_name(RPC_N_APPROVAL_REQUESTED)) == 0) {
		say_ask(params);
		return;
	}
	if (strcmp(method, rpc_notify_name(RPC_N_RUN_OUTPUT)) != 0)
		return;
	stream = json_string_value(json_object_get(params, "stream"));
	fd = stream && strcmp(stream, "stderr") == 0 ? 2 : 1;
	if ((text = json_string_value(json_object_get(params, "data")))) {
		write_output(
		    fd, text,
		    json_string_length(json_object_get(params, "data")));
	} else if ((text = json_string_value(
			json_object_get(params, "data_b64")))) {
		size_t bin_len = 0;
		unsigned char *bin = b64_decode(text, strlen(text), &bin_len);
		if (bin)
			write_output(fd, bin, bin_len);
		free(bin);
	}
}

/* Ask the person at the terminal; false without one. */
static bool confirm_on_tty(json_t *err)
{
	json_t *d = json_object_get(err, "data");
	char answer[16];
	FILE *tty;

	if (!isatty(STDIN_FILENO) || !isatty(STDERR_FILENO))
		return false;
	fputs("spd asks: ", stderr);
	ts_fputs(stderr,
		 json_string_value(json_object_get(d, "reason")) ?: "?");
	fputs("\n  rule ", stderr);
	ts_fputs(stderr, json_string_value(json_object_get(d, "rule")) ?: "?");
	fputc('\n', stderr);
	cmd_print_object(stderr, json_object_get(d, "object"), "  ");
	fputs("Run it? [y/N] ", stderr);
	fflush(stderr);
	tty = fopen("/dev/tty", "r");
	if (!tty)
		return false;
	if (!fgets(answer, sizeof(answer), tty))
		answer[0] = '\0';
	fclose(tty);
	return answer[0] == 'y' || answer[0] == 'Y';
}

static int run_usage(void)
{
	fprintf(stderr,
		"usage: spctl run [--workspace DIR] [--net "
		"none|loopback|proxy|host] "
		"[--timeout SECONDS]\n"
		"                 [--writable PATH]... [--env NAME=VALUE]... "
		"[--best-effort] [--yes] [--json] -- ARGV...\n");
	return CMD_EXIT_USAGE;
}

static int run_call(struct cmd_ctx *ctx, json_t *params, bool agent, bool yes);

/* A word where an option was expected: most often the command itself,
 * typed without the "--" that ends spctl's options. */
static int no_dashdash(const char *cmd, const char *word)
{
	fprintf(stderr,
		"spctl: %s: put -- before the command to run: spctl %s "
		"[OPTIONS] -- ",
		cmd, cmd);
	ts_fputs_arg(stderr, word);
	fputs(" ...\n", stderr);
	return CMD_EXIT_USAGE;
}

/* The network modes cmd.run takes: checked here so that a typo is a
 * usage error with the list, not a refusal from spd. */
static bool net_known(const char *net)
{
	return strcmp(net, "none") == 0 || strcmp(net, "loopback") == 0 ||
	       strcmp(net, "proxy") == 0 || strcmp(net, "host") == 0;
}

/*
 * Whether spctl's stdout and stderr are one file: 2>&1 into a pipe or a
 * file, one terminal, /dev/null.  The run then gets one pipe for both
 * (cmd.run's merge_stderr), since two pipes lose the order of writes the
 * command makes to each back to back.
 */
static bool output_is_one_file(void)
{
	struct stat o, e;

	return fstat(STDOUT_FILENO, &o) == 0 && fstat(STDERR_FILENO, &e) == 0 &&
	       o.st_dev == e.st_dev && o.st_ino == e.st_ino;
}

int cmd_run(struct cmd_ctx *ctx, int argc, char **argv)
{
	json_t *params = json_object(), *args = json_array(),
	       *writable = json_array(), *env = json_object();
	char *workspace = NULL, cwd[PATH_MAX];
	bool agent = getenv("SPD_SESSION_TOKEN") != NULL;
	bool yes = false;
	int i, ex;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--") == 0) {
			i++;
			break;
		} else if (strcmp(a, "--workspace") == 0 && i + 1 < argc) {
			char rp[PATH_MAX];
			if (!realpath(argv[++i], rp)) {
				fprintf(stderr, "spctl: workspace %s: %s\n",
					argv[i], strerror(errno));
				ex = CMD_EXIT_USAGE;
				goto fail;
			}
			free(workspace);
			workspace = strdup(rp);
		} else if (strcmp(a, "--net") == 0 && i + 1 < argc) {
			if (!net_known(argv[++i])) {
				fputs("spctl: run: --net ", stderr);
				ts_fputs_arg(stderr, argv[i]);
				fputs(": not a network mode (none, loopback, "
				      "proxy or host)\n",
				      stderr);
				ex = CMD_EXIT_USAGE;
				goto fail;
			}
			json_object_set_new(params, "net",
					    json_string(argv[i]));
		} else if (strcmp(a, "--timeout") == 0 && i + 1 < argc) {
			char *end;
			long t = strtol(argv[++i], &end, 10);
			if (*end || t <= 0) {
				ex = run_usage();
				goto fail;
			}
			json_object_set_new(params, "timeout", json_integer(t));
		} else if (strcmp(a, "--writable") == 0 && i + 1 < argc) {
			char rp[PATH_MAX];
			const char *w = argv[++i];
			json_array_append_new(
			    writable, json_string(realpath(w, rp) ? rp : w));
		} else if (strcmp(a, "--env") == 0 && i + 1 < argc) {
			char *kv = argv[++i], *eq = strchr(kv, '=');
			if (!eq || eq == kv) {
				ex = run_usage();
				goto fail;
			}
			*eq = '\0';
			json_object_set_new(env, kv, json_string(eq + 1));
			*eq = '=';
		} else if (strcmp(a, "--best-effort") == 0) {
			json_object_set_new(params, "mode",
					    json_string("best-effort"));
		} else if (strcmp(a, "--json") == 0) {
			ctx->json = true;
		} else if (strcmp(a, "--yes") == 0 || strcmp(a, "-y") == 0) {
			yes = true;
		} else if (a[0] != '-') {
			ex = no_dashdash("run", a);
			goto fail;
		} else {
			ex = run_usage();
			goto fail;
		}
	}
	if (i >= argc) {
		fprintf(stderr, "spctl: run: no command: spctl run [OPTIONS] "
				"-- COMMAND [ARGS...]\n");
		ex = CMD_EXIT_USAGE;
		goto fail;
	}
	for (; i < argc; i++)
		json_array_append_new(args, json_string(argv[i]));
	json_object_set_new(params, "argv", args);
	if (json_array_size(writable))
		json_object_set(params, "writable", writable);
	if (json_object_size(env))
		json_object_set(params, "env", env);
	json_decref(writable);
	json_decref(env);
	if (!agent) {
		if (!workspace)
			workspace = default_workspace();
		if (!workspace) {
			fprintf(stderr,
				"spctl: cannot determine the workspace\n");
			json_decref(params);
			return CMD_EXIT_SPD;
		}
		json_object_set_new(params, "workspace",
				    json_string(workspace));
		if (getcwd(cwd, sizeof(cwd)) &&
		    strncmp(cwd, workspace, strlen(workspace)) == 0 &&
		    (cwd[strlen(workspace)] == '/' || !cwd[strlen(workspace)]))
			json_object_set_new(params, "cwd", json_string(cwd));
	}
	free(workspace);
	return run_call(ctx, params, agent, yes);
fail:
	/* A usage error: nothing was sent. */
	json_decref(params);
	json_decref(args);
	json_decref(writable);
	json_decref(env);
	free(workspace);
	return ex;
}

/* Whether err is an spd that predates cmd.run's merge_stderr refusing it
 * as an unknown parameter (daemon/transport/rpc.c's words). */
static bool older_spd_refused_merge(json_t *err)
{
	const char *m = json_string_value(json_object_get(err, "message"));

	return json_integer_value(json_object_get(err, "code")) == -32602 &&
	       m && strstr(m, "unknown parameter \"merge_stderr\"");
}

/* Call cmd.run with params (taken), stream its output, print what the
 * result says and return the exit code: spctl run's and spctl agent's. */
static int run_call(struct cmd_ctx *ctx, json_t *params, bool agent, bool yes)
{
	json_t *res = NULL, *err = NULL;
	struct client c;
	char errbuf[512];
	int r, ex;

	if (output_is_one_file())
		json_object_set_new(params, "merge_stderr", json_true());
	if (yes)
		json_object_set_new(params, "yes", json_true());
	else if (!agent)
		/* The operator at a terminal answers an ask here, below;
		 * an agent's call waits for a person's decision in spd. */
		json_object_set_new(params, "wait", json_false());

	r = client_open(&c, errbuf, sizeof(errbuf));
	if (r < 0) {
		json_decref(params);
		fprintf(stderr, "spctl: %s\n", errbuf);
		return CMD_EXIT_SPD;
	}
	json_incref(params);
	r = client_call(&c, RPC_M_CMD_RUN, params, on_run_event, ctx, &res,
			&err);
	if (r == -EPROTO && older_spd_refused_merge(err)) {
		/* An spd started before an upgrade (socket activation keeps
		 * it running) does not know merge_stderr: two streams, as
		 * before, rather than no run at all. */
		json_object_del(params, "merge_stderr");
		json_object_del(params, "token");
		json_decref(err);
		err = NULL;
		json_incref(params);
		r = client_call(&c, RPC_M_CMD_RUN, params, on_run_event, ctx,
				&res, &err);
	}
	if (r == -EPROTO && !agent && !yes &&
	    cmd_error_is(err, "NEEDS-APPROVAL")) {
		if (!confirm_on_tty(err)) {
			ex = cmd_print_error(err);
			cmd_print_object(
			    stderr,
			    json_object_get(json_object_get(err, "data"),
					    "object"),
			    "  ");
			fprintf(stderr,
				"spctl: not run (approve with --yes, or "
				"answer y at a terminal)\n");
			json_decref(err);
			json_decref(params);
			client_close(&c);
			return ex;
		}
		json_object_del(params, "wait");
		json_object_del(params, "token");
		json_object_set_new(params, "yes", json_true());
		/* The y was for what the prompt showed: spd refuses the
		 * "yes" if a pinned file changed since. */
		if (json_is_string(
			json_object_get(json_object_get(err, "data"), "pin")))
			json_object_set(
			    params, "pin",
			    json_object_get(json_object_get(err, "data"),
					    "pin"));
		json_decref(err);
		err = NULL;
		json_incref(params);
		r = client_call(&c, RPC_M_CMD_RUN, params, on_run_event, ctx,
				&res, &err);
	}
	json_decref(params);
	client_close(&c);
	if (r == -EPROTO) {
		ex = cmd_print_error(err);
		json_decref(err);
		return ex;
	}
	if (r < 0) {
		fprintf(stderr, "spctl: run: lost spd: %s\n", strerror(-r));
		return CMD_EXIT_SPD;
	}
	end_output();
	{
		json_t *w = json_object_get(res, "warnings");
		for (size_t k = 0; k < json_array_size(w); k++) {
			fputs("spctl: warning: ", stderr);
			ts_fputs(stderr,
				 json_string_value(json_array_get(w, k)));
			fputc('\n', stderr);
		}
	}
	if (ctx->json) {
		char *s = json_dumps(res, JSON_COMPACT | JSON_SORT_KEYS);
		fprintf(stderr, "%s\n", s ? s : "null");
		free(s);
	}
	if (json_string_value(json_object_get(res, "error"))) {
		fputs("spctl: ", stderr);
		ts_fputs(stderr,
			 json_string_value(json_object_get(res, "error")));
		fputc('\n', stderr);
	}
	if (json_is_true(json_object_get(res, "timed_out"))) {
		fprintf(stderr,
			"spctl: the run hit its deadline and was killed\n");
		ex = CMD_EXIT_TIMEOUT;
	} else if (json_integer_value(json_object_get(res, "signal")) > 0) {
		ex = 128 +
		     (int)json_integer_value(json_object_get(res, "signal"));
	} else {
		ex = (int)json_integer_value(json_object_get(res, "exit_code"));
	}
	{
		json_t *bd = json_object_get(res, "bytes_dropped");
		long long o = json_integer_value(json_object_get(bd, "stdout")),
			  e = json_integer_value(json_object_get(bd, "stderr"));
		if (o || e)
			fprintf(
			    stderr,
			    "spctl: output capped: %lld bytes of stdout and "
			    "%lld of stderr dropped\n",
			    o, e);
	}
	json_decref(res);
	return ex;
}

static int agent_usage(void)
{
	fprintf(stderr, "usage: spctl agent [--session ID] [--cap USD] "
			"[--timeout S] [--yes] [--json] -- CMD...\n");
	return CMD_EXIT_USAGE;
}

int cmd_agent(struct cmd_ctx *ctx, int argc, char **argv)
{
	json_t *params = json_object(), *args = json_array();
	bool token = getenv("SPD_SESSION_TOKEN") != NULL, yes = false;
	int i;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--") == 0) {
			i++;
			break;
		} else if (strcmp(a, "--session") == 0 && i + 1 < argc) {
			json_object_set_new(params, "session",
					    json_string(argv[++i]));
		} else if (strcmp(a, "--cap") == 0 && i + 1 < argc) {
			char *end;
			double d = strtod(argv[++i], &end);

			if (*end || !(d > 0))
				goto usage;
			json_object_set_new(params, "cap_usd", json_real(d));
		} else if (strcmp(a, "--timeout") == 0 && i + 1 < argc) {
			char *end;
			long t = strtol(argv[++i], &end, 10);

			if (*end || t <= 0)
				goto usage;
			json_object_set_new(params, "timeout", json_integer(t));
		} else if (strcmp(a, "--json") == 0) {
			ctx->json = true;
		} else if (strcmp(a, "--yes") == 0 || strcmp(a, "-y") == 0) {
			yes = true;
		} else if (a[0] != '-') {
			json_decref(params);
			json_decref(args);
			return no_dashdash("agent", a);
		} else {
			goto usage;
		}
	}
	if (i >= argc)
		goto usage;
	if (!token && !json_object_get(params, "session")) {
		/* The operator's agent works in a session's worktree: say
		 * which is missing, not what spd lacks ("workspace"). */
		fprintf(stderr,
			"spctl: agent: no session: give --session ID (`spctl "
			"session list` shows them; `spctl session start "
			"FEATURE` makes one), or set SPD_SESSION_TOKEN\n");
		json_decref(params);
		json_decref(args);
		return CMD_EXIT_USAGE;
	}
	for (; i < argc; i++)
		json_array_append_new(args, json_string(argv[i]));
	json_object_set_new(params, "argv", args);
	json_object_set_new(params, "agent", json_true());
	return run_call(ctx, params, token, yes);
usage:
	json_decref(params);
	json_decref(args);
	return agent_usage();
}

/* The host patterns of list, comma-separated, at most a few. */
static void print_hosts(json_t *list)
{
	size_t n = json_array_size(list);

	for (size_t i = 0; i < n && i < 4; i++) {
		fputs(i ? ", " : "", stdout);
		ts_fputs(stdout,
			 json_string_value(json_array_get(list, i)) ?: "");
	}
	if (n > 4)
		printf(" and %zu more", n - 4);
}

/* Network mode proxy needs what the broker's door needs: a network
 * namespace of the run's own, so user namespaces; and it reaches only
 * what spd.conf names. */
static void print_net_proxy(json_t *res)
{
	json_t *u = json_object_get(res, "user_namespaces");
	json_t *px = json_object_get(res, "proxy");
	json_t *allow = json_object_get(px, "allow_host");
	json_t *ask = json_object_get(px, "ask_host");
	json_t *deny = json_object_get(px, "deny_host");

	if (!json_is_true(json_object_get(u, "ok"))) {
		printf("  advice   network proxy: spctl run --net proxy needs "
		       "user namespaces (a network namespace of the run's "
		       "own); it is refused here\n");
		return;
	}
	if (!json_array_size(allow) && !json_array_size(ask)) {
		printf("  advice   network proxy: spctl run --net proxy "
		       "refuses every host: spd.conf's [network] allow-host "
		       "and ask-host name none\n");
		return;
	}
	printf("  ok       network proxy: spctl run --net proxy reaches "
	       "only what spd.conf's [network] names, through spd's HTTP "
	       "proxy: allow-host ");
	print_hosts(allow);
	if (json_array_size(ask)) {
		fputs("; ask-host (a person decides) ", stdout);
		print_hosts(ask);
	}
	if (json_array_size(deny)) {
		fputs("; deny-host ", stdout);
		print_hosts(deny);
	}
	fputc('\n', stdout);
}

int cmd_doctor(struct cmd_ctx *ctx, int argc, char **argv)
{
	int ex = 0, missing = 0;
	bool no_init = false;
	json_t *res = cmd_call(RPC_M_SANDBOX_PROBE, NULL, &ex);
	json_t *cfg = res ? cmd_config_fetch() : NULL;
	const char *k;
	json_t *v;

	if (!res)
		return ex;
	if (ctx->json) {
		if (cfg)
			json_object_set(res, "config", cfg);
		char *s = json_dumps(res, JSON_COMPACT | JSON_SORT_KEYS);
		puts(s ? s : "null");
		free(s);
	}
	if (!ctx->json)
		print_net_proxy(res);
	json_object_foreach(res, k, v)
	{
		bool ok = json_is_true(json_object_get(v, "ok"));
		bool req = json_is_true(json_object_get(v, "required"));
		const char *why = json_string_value(json_object_get(v, "why"));

		if (strcmp(k, "proxy") == 0 || strcmp(k, "config") == 0)
			continue; /* not a layer */
		if (!ok && req)
			missing++;
		if (!ok && strcmp(k, "run_init") == 0)
			no_init = true;
		if (ctx->json)
			continue;
		if (strcmp(k, "landlock") == 0 && ok)
			printf("  ok       landlock (ABI %lld)\n",
			       (long long)json_integer_value(
				   json_object_get(v, "abi")));
		else
			printf("  %-8s %s%s%s\n",
			       ok    ? "ok"
			       : req ? "MISSING"
				     : "advice",
			       k, why ? ": " : "", why ? why : "");
	}
	json_decref(res);
	if (!ctx->json && no_init)
		printf("%d layer(s) missing: runs are refused "
		       "(SANDBOX-UNAVAILABLE), best-effort too: nothing runs "
		       "without run_init\n",
		       missing);
	else if (!ctx->json)
		printf(missing ? "%d layer(s) missing: runs are refused "
				 "(SANDBOX-UNAVAILABLE) unless sandbox.mode = "
				 "best-effort\n"
			       : "every sandbox layer is available\n",
		       missing);
	if (!ctx->json)
		cmd_config_print(cfg);
	json_decref(cfg);
	return missing ? CMD_EXIT_CHECK_FAILED : 0;
}

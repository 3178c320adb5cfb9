/*
 * spctl's smaller commands (ping, status, stop, doctor, journal, approvals,
 * approve, deny, secrets) and what they share: calling spd, printing its
 * errors and what an agent chose through termsafe.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/paths.h"
#include "proto/rpc.h"
#include "client.h"
#include "client/termsafe.h"
#include "cmds.h"

int cmd_print_error(json_t *err)
{
	json_t *data = json_object_get(err, "data");
	const char *code = json_string_value(json_object_get(data, "code"));
	const char *msg = json_string_value(json_object_get(err, "message"));

	json_int_t num = json_integer_value(json_object_get(err, "code"));
	int e;

	fputs("spctl: ", stderr);
	ts_fputs(stderr, code ? code : "ERROR");
	fputs(": ", stderr);
	ts_fputs(stderr, msg ? msg : "(no message)");
	fputc('\n', stderr);
	/* A request spd found wrong carries what the user typed (a session
	 * id, a network mode): their mistake, exit 2 with what to do.  An
	 * unknown method or parameter is an spd older than this spctl. */
	e = rpc_error_by_number((long)num);
	if (e >= 0 && rpc_error_exit((enum rpc_error)e) == RPC_EXIT_USAGE &&
	    !(msg && strstr(msg, "unknown parameter"))) {
		if (msg && (strstr(msg, "no such session") ||
			    strstr(msg, "is not active")))
			fputs("spctl: `spctl session list` shows the sessions "
			      "spd knows; `spctl session start FEATURE` makes "
			      "one\n",
			      stderr);
		else
			fputs("spctl: see `spctl COMMAND --help`\n", stderr);
		return CMD_EXIT_USAGE;
	}
	/* An unknown parameter is an spd older than this spctl. */
	return e >= 0 && rpc_error_exit((enum rpc_error)e) == RPC_EXIT_REFUSED
		   ? CMD_EXIT_REFUSED
		   : CMD_EXIT_SPD;
}

bool cmd_error_is(json_t *err, const char *code)
{
	const char *c = json_string_value(
	    json_object_get(json_object_get(err, "data"), "code"));
	return c && strcmp(c, code) == 0;
}

/* A digest's first hex digits: enough for a person to compare two
 * prompts, short enough to read. */
#define SHORT_DIGEST 16

static void print_digest(FILE *f, json_t *e)
{
	const char *h = json_string_value(json_object_get(e, "blake2b"));

	if (h)
		fprintf(f, "blake2b:%.*s", SHORT_DIGEST, h);
	else
		fprintf(
		    f, "(not hashed: %lld bytes)",
		    (long long)json_integer_value(json_object_get(e, "size")));
}

void cmd_print_object(FILE *f, json_t *o, const char *indent)
{
	json_t *argv = json_object_get(o, "argv");
	json_t *env = json_object_get(o, "env");
	json_t *content = json_object_get(o, "content");
	json_t *files = json_object_get(o, "files");
	const char *path2 = json_string_value(json_object_get(o, "path2"));
	const char *cwd = json_string_value(json_object_get(o, "cwd"));
	const char *net = json_string_value(json_object_get(o, "net"));
	const char *k;
	json_t *v;

	if (!o)
		return;
	/* Every string here is the agent's: shown, never obeyed, and the
	 * argv quoted so that the strings that would run are unambiguous. */
	if (json_is_array(argv)) {
		fprintf(f, "%srun:", indent);
		for (size_t i = 0; i < json_array_size(argv); i++) {
			fputc(' ', f);
			ts_fputs_arg(
			    f, json_string_value(json_array_get(argv, i)));
		}
		fputc('\n', f);
	} else if (json_string_value(json_object_get(o, "path"))) {
		fputs(indent, f);
		ts_fputs(f, json_string_value(json_object_get(o, "kind")));
		fputc(' ', f);
		ts_fputs_arg(f, json_string_value(json_object_get(o, "path")));
		if (path2) {
			/* A move writes its destination: that is the path
			 * that decides. */
			fputs(" -> ", f);
			ts_fputs_arg(f, path2);
		}
		fputc('\n', f);
	}
	json_object_foreach(env, k, v)
	{
		fprintf(f, "%s  env ", indent);
		ts_fputs(f, k);
		fputc('=', f);
		ts_fputs_arg(f, json_string_value(v) ?: "");
		fputc('\n', f);
	}
	if (cwd) {
		fprintf(f, "%s  cwd ", indent);
		ts_fputs_arg(f, cwd);
		fputc('\n', f);
	} else if (json_string_value(json_object_get(o, "host"))) {
		/* A proxy run's connection to an ask-host. */
		fprintf(f, "%sconnect ", indent);
		ts_fputs_arg(f, json_string_value(json_object_get(o, "host")));
		fprintf(
		    f, " port %lld, through the run's network proxy\n",
		    (long long)json_integer_value(json_object_get(o, "port")));
	}
	if (json_is_array(argv) && net)
		fprintf(f, "%s  network %s\n", indent,
			strcmp(net, "host") == 0       ? "host"
			: strcmp(net, "loopback") == 0 ? "loopback"
			: strcmp(net, "proxy") == 0
			    ? "proxy (only spd's egress proxy)"
			: strcmp(net, "broker") == 0
			    ? "broker (only spd's model broker)"
			    : "none");
	if (content) {
		fprintf(f, "%s  content %lld bytes ", indent,
			(long long)json_integer_value(
			    json_object_get(content, "size")));
		print_digest(f, content);
		fputs(", first line: ", f);
		ts_fputs_arg(
		    f, json_string_value(json_object_get(content, "preview"))
			   ?: "");
		if (!json_is_true(json_object_get(content, "preview_complete")))
			fputs(" ...", f);
		fputc('\n', f);
	}
	for (size_t i = 0; i < json_array_size(files); i++) {
		json_t *e = json_array_get(files, i);

		fprintf(f, "%s  file ", indent);
		ts_fputs_arg(f, json_string_value(json_object_get(e, "path")));
		fputc(' ', f);
		print_digest(f, e);
		fputc('\n', f);
	}
}

static void on_approval(void *data, const char *method, json_t *p)
{
	struct cmd_ctx *ctx = data;

	if (strcmp(method, rpc_notify_name(RPC_N_APPROVAL_WITHDRAWN)) == 0 &&
	    !ctx->json) {
		printf("approval %lld withdrawn: ",
		       (long long)json_integer_value(json_object_get(p, "id")));
		ts_fputs(stdout,
			 json_string_value(json_object_get(p, "reason")) ?: "");
		fputc('\n', stdout);
		fflush(stdout);
		return;
	}
	if (strcmp(method, rpc_notify_name(RPC_N_APPROVAL_DECIDED)) == 0 &&
	    !ctx->json) {
		const char *d =
		    json_string_value(json_object_get(p, "decision")) ?: "";

		printf("approval %lld %s: ",
		       (long long)json_integer_value(json_object_get(p, "id")),
		       strcmp(d, "approved") == 0 ? "granted"
		       : strcmp(d, "stale")	  ? "refused"
						  : "not used");
		ts_fputs(stdout,
			 json_string_value(json_object_get(p, "reason")) ?: "");
		fputc('\n', stdout);
		fflush(stdout);
		return;
	}
	if (strcmp(method, rpc_notify_name(RPC_N_APPROVAL_REQUESTED)) != 0 &&
	    strcmp(method, rpc_notify_name(RPC_N_APPROVAL_WITHDRAWN)) != 0 &&
	    strcmp(method, rpc_notify_name(RPC_N_APPROVAL_DECIDED)) != 0)
		return;
	if (ctx->json) {
		char *s = json_dumps(p, JSON_COMPACT | JSON_SORT_KEYS);
		puts(s ? s : "null");
		free(s);
		fflush(stdout);
		return;
	}
	printf("approval %lld  session ",
	       (long long)json_integer_value(json_object_get(p, "id")));
	ts_fputs(stdout,
		 json_string_value(json_object_get(p, "session")) ?: "-");
	fputs("  ", stdout);
	ts_fputs(stdout, json_string_value(json_object_get(p, "rule")) ?: "?");
	fputs(": ", stdout);
	ts_fputs(stdout, json_string_value(json_object_get(p, "reason")) ?: "");
	fputc('\n', stdout);
	cmd_print_object(stdout, json_object_get(p, "object"), "    ");
	fflush(stdout);
}

int cmd_approvals(struct cmd_ctx *ctx, int argc, char **argv)
{
	bool follow = argc == 2 && strcmp(argv[1], "--follow") == 0;
	json_t *res = NULL, *err = NULL, *arr;
	struct client c;
	char errbuf[512];
	int r;

	if (argc > 2 || (argc == 2 && !follow)) {
		fprintf(stderr, "usage: spctl approvals [--follow]\n");
		return CMD_EXIT_USAGE;
	}
	r = client_open(&c, errbuf, sizeof(errbuf));
	if (r < 0) {
		fprintf(stderr, "spctl: %s\n", errbuf);
		return CMD_EXIT_SPD;
	}
	r = client_call(&c, RPC_M_APPROVAL_LIST,
			json_pack("{s:b}", "follow", follow), on_approval, ctx,
			&res, &err);
	client_close(&c);
	if (r == -EPROTO) {
		r = cmd_print_error(err);
		json_decref(err);
		return r;
	}
	if (r < 0) {
		fprintf(stderr, "spctl: approvals: %s\n", strerror(-r));
		return CMD_EXIT_SPD;
	}
	arr = json_object_get(res, "pending");
	for (size_t i = 0; i < json_array_size(arr); i++)
		on_approval(ctx, rpc_notify_name(RPC_N_APPROVAL_REQUESTED),
			    json_array_get(arr, i));
	if (!ctx->json && json_array_size(arr) == 0 && !follow)
		printf("no pending approvals\n");
	json_decref(res);
	return 0;
}

static int decide(struct cmd_ctx *ctx, int argc, char **argv, bool approve)
{
	bool always = false;
	const char *why = NULL;
	char *end;
	long long id;
	json_t *params, *res;
	int ex = 0;

	if (argc < 2)
		goto usage;
	id = strtoll(argv[1], &end, 10);
	if (*end || id <= 0)
		goto usage;
	for (int i = 2; i < argc; i++) {
		if (!approve && strcmp(argv[i], "--why") == 0 && i + 1 < argc)
			why = argv[++i];
		else if (approve && strcmp(argv[i], "--always") == 0)
			always = true;
		else
			goto usage;
	}
	params =
	    json_pack("{s:I, s:b}", "id", (json_int_t)id, "approve", approve);
	if (always)
		json_object_set_new(params, "always", json_true());
	if (why)
		json_object_set_new(params, "why", json_string(why));
	res = cmd_call(RPC_M_APPROVAL_DECIDE, params, &ex);
	if (!res)
		return ex;
	{
		const char *d =
		    json_string_value(json_object_get(res, "decision"));
		bool stale = d && strcmp(d, "stale") == 0;

		if (ctx->json) {
			/* The object spd answered, with the id decided. */
			char *js;

			json_object_set_new(res, "id", json_integer(id));
			js = json_dumps(res, JSON_COMPACT | JSON_SORT_KEYS);
			puts(js ? js : "null");
			free(js);
			json_decref(res);
			return stale ? CMD_EXIT_REFUSED : 0;
		}
		if (stale) {
			printf("approval %lld not used: a file it pinned "
			       "changed before your decision; the call was "
			       "refused and must ask again\n",
			       id);
			json_decref(res);
			return CMD_EXIT_REFUSED;
		}
	}
	printf("approval %lld %s\n", id, approve ? "granted" : "refused");
	json_decref(res);
	return 0;
usage:
	fprintf(stderr, approve ? "usage: spctl approve ID [--always]\n"
				: "usage: spctl deny ID [--why TEXT]\n");
	return CMD_EXIT_USAGE;
}

int cmd_approve(struct cmd_ctx *ctx, int argc, char **argv)
{
	return decide(ctx, argc, argv, true);
}

int cmd_deny(struct cmd_ctx *ctx, int argc, char **argv)
{
	return decide(ctx, argc, argv, false);
}

json_t *cmd_call(enum rpc_method method, json_t *params, int *ret_exit)
{
	struct client c;
	char errbuf[512] = "";
	json_t *res = NULL, *err = NULL;
	int r;

	r = client_open(&c, errbuf, sizeof(errbuf));
	if (r < 0) {
		json_decref(params);
		fprintf(stderr, "spctl: %s\n", errbuf);
		*ret_exit = CMD_EXIT_SPD;
		return NULL;
	}
	r = client_call(&c, method, params, NULL, NULL, &res, &err);
	client_close(&c);
	if (r == -EPROTO) {
		*ret_exit = cmd_print_error(err);
		json_decref(err);
		return NULL;
	}
	if (r < 0) {
		fprintf(stderr, "spctl: %s: %s\n", rpc_method_name(method),
			strerror(-r));
		*ret_exit = CMD_EXIT_SPD;
		return NULL;
	}
	return res;
}

static void print_json(json_t *v)
{
	char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);

	if (s)
		puts(s);
	free(s);
}

int cmd_ping(struct cmd_ctx *ctx, int argc, char **argv)
{
	struct timespec a, b;
	int ex = 0;
	json_t *res;

	if (argc != 1) {
		fprintf(stderr, "usage: spctl ping\n");
		return CMD_EXIT_USAGE;
	}
	clock_gettime(CLOCK_MONOTONIC, &a);
	res = cmd_call(RPC_M_DAEMON_PING, NULL, &ex);
	clock_gettime(CLOCK_MONOTONIC, &b);
	if (!res)
		return ex;
	if (ctx->json)
		print_json(res);
	else
		printf("pong from spd (%.2f ms including connect)\n",
		       (double)(b.tv_sec - a.tv_sec) * 1e3 +
			   (double)(b.tv_nsec - a.tv_nsec) / 1e6);
	json_decref(res);
	return 0;
}

int cmd_status(struct cmd_ctx *ctx, int argc, char **argv)
{
	int ex = 0;
	json_t *res = cmd_call(RPC_M_DAEMON_STATUS, NULL, &ex), *j, *sb;

	if (!res)
		return ex;
	if (ctx->json) {
		print_json(res);
		json_decref(res);
		return 0;
	}
	j = json_object_get(res, "journal");
	printf("spd %s, pid %lld, up %llds\n",
	       json_string_value(json_object_get(res, "version")),
	       (long long)json_integer_value(json_object_get(res, "pid")),
	       (long long)json_integer_value(json_object_get(res, "uptime_s")));
	printf("socket:       %s\n",
	       json_string_value(json_object_get(res, "socket")));
	printf(
	    "connections:  %lld\n",
	    (long long)json_integer_value(json_object_get(res, "connections")));
	printf("journal:      %lld events, %lld bytes\n",
	       (long long)json_integer_value(json_object_get(j, "events")),
	       (long long)json_integer_value(json_object_get(j, "bytes")));
	printf("sandbox mode: %s\n",
	       json_string_value(json_object_get(res, "sandbox_mode")));
	for (int k = 0; k < 2; k++) {
		const char *key = k ? "writable" : "hidden";
		json_t *v = json_object_get(res, key), *e;
		size_t i;

		if (!json_array_size(v))
			continue;
		printf("%s:%*s", key, (int)(13 - strlen(key)), "");
		json_array_foreach(v, i, e)
		{
			if (i)
				printf(", ");
			ts_fputs(stdout, json_string_value(e) ?: "?");
		}
		printf("%s\n", k ? "" : " (no run sees these)");
	}
	if (json_is_true(json_object_get(res, "config_changed")))
		printf("config:       spd.conf changed since spd read it; "
		       "spctl reload applies it (it says which entries "
		       "need a restart)\n");
	sb = json_object_get(res, "sandbox");
	if (!json_is_object(sb) && json_object_get(res, "sandboxd"))
		/* spd answers before sandboxd's first probe does (right
		 * after it started): no layer is known yet, which is not
		 * none.  (An agent's view has no layers, nor sandboxd.) */
		printf("sandbox:      layers not known yet: spd is still "
		       "probing them (spctl status again in a moment, or "
		       "spctl doctor)\n");
	if (json_is_object(sb)) {
		const char *k;
		json_t *v;
		json_object_foreach(sb, k, v)
		{
			if (json_is_object(v))
				printf(
				    "  %-16s %s%s%s\n", k,
				    json_is_true(json_object_get(v, "ok"))
					? "ok"
				    : json_is_true(
					  json_object_get(v, "required"))
					? "MISSING"
					: "advice",
				    json_string_value(json_object_get(v, "why"))
					? ": "
					: "",
				    json_string_value(json_object_get(v, "why"))
					?: "");
		}
	}
	json_decref(res);
	return 0;
}

static void print_event(struct cmd_ctx *ctx, json_t *e)
{
	time_t t;
	struct tm tm;
	char stamp[32];

	if (ctx->json) {
		print_json(e);
		fflush(stdout);
		return;
	}
	t = (time_t)(json_integer_value(json_object_get(e, "time_us")) /
		     1000000);
	gmtime_r(&t, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S", &tm);
	/* The summary holds what agents chose (argv, paths): shown escaped. */
	printf("%6lld %s %-10s %-16s ",
	       (long long)json_integer_value(json_object_get(e, "id")), stamp,
	       json_string_value(json_object_get(e, "actor")) ?: "-",
	       json_string_value(json_object_get(e, "kind")) ?: "-");
	ts_fputs(stdout,
		 json_string_value(json_object_get(e, "summary")) ?: "");
	if (json_string_value(json_object_get(e, "session"))) {
		fputs("  [session ", stdout);
		ts_fputs(stdout,
			 json_string_value(json_object_get(e, "session")));
		fputs("]", stdout);
	}
	fputc('\n', stdout);
	fflush(stdout);
}

static void on_journal_event(void *data, const char *method, json_t *params)
{
	if (strcmp(method, rpc_notify_name(RPC_N_JOURNAL_EVENT)) == 0)
		print_event(data, params);
}

static int journal_verify(struct cmd_ctx *ctx)
{
	int ex = 0;
	json_t *res = cmd_call(RPC_M_JOURNAL_VERIFY, NULL, &ex);
	bool ok;

	if (!res)
		return ex;
	ok = json_is_true(json_object_get(res, "ok"));
	if (ctx->json)
		print_json(res);
	else if (ok)
		printf("journal intact: %lld events checked\n",
		       (long long)json_integer_value(
			   json_object_get(res, "checked")));
	else {
		printf("journal BROKEN at event %lld (",
		       (long long)json_integer_value(
			   json_object_get(res, "first_bad_id")));
		ts_fputs(stdout,
			 json_string_value(json_object_get(res, "reason")));
		fputs("): ", stdout);
		ts_fputs(stdout,
			 json_string_value(json_object_get(res, "detail"))
			     ?: "");
		fputc('\n', stdout);
	}
	json_decref(res);
	return ok ? 0 : CMD_EXIT_CHECK_FAILED;
}

int cmd_journal(struct cmd_ctx *ctx, int argc, char **argv)
{
	bool follow = false;
	long long since = -1, limit = 0;
	const char *kind = NULL;
	json_t *params, *res = NULL, *err = NULL, *evs;
	struct client c;
	char errbuf[512];
	int r;

	if (argc >= 2 && strcmp(argv[1], "verify") == 0) {
		if (argc != 2) {
			fprintf(stderr, "usage: spctl journal verify\n");
			return CMD_EXIT_USAGE;
		}
		return journal_verify(ctx);
	}
	for (int i = 1; i < argc; i++) {
		char *end;
		if (strcmp(argv[i], "--follow") == 0 ||
		    strcmp(argv[i], "-f") == 0) {
			follow = true;
		} else if (strcmp(argv[i], "--json") == 0) {
			ctx->json = true;
		} else if (strcmp(argv[i], "--since") == 0 && i + 1 < argc) {
			since = strtoll(argv[++i], &end, 10);
			if (*end || since < 0)
				goto usage;
		} else if (strcmp(argv[i], "--limit") == 0 && i + 1 < argc) {
			limit = strtoll(argv[++i], &end, 10);
			if (*end || limit <= 0)
				goto usage;
		} else if (strcmp(argv[i], "--kind") == 0 && i + 1 < argc) {
			kind = argv[++i];
		} else {
			goto usage;
		}
	}
	params = json_object();
	if (since >= 0)
		json_object_set_new(params, "since", json_integer(since));
	else if (!follow)
		/* Without --since: the newest rows (the last --limit N, or
		 * spd's 100), oldest first, as tail shows a log; a journal
		 * of months would otherwise open on its first day. */
		json_object_set_new(params, "since", json_integer(-1));
	if (kind)
		json_object_set_new(params, "kind", json_string(kind));
	r = client_open(&c, errbuf, sizeof(errbuf));
	if (r < 0) {
		json_decref(params);
		fprintf(stderr, "spctl: %s\n", errbuf);
		return CMD_EXIT_SPD;
	}
	if (follow) {
		if (since < 0)
			json_object_set_new(params, "since", json_integer(0));
		r = client_call(&c, RPC_M_JOURNAL_FOLLOW, params,
				on_journal_event, ctx, &res, &err);
	} else {
		if (limit > 0)
			json_object_set_new(params, "limit",
					    json_integer(limit));
		r = client_call(&c, RPC_M_JOURNAL_QUERY, params, NULL, NULL,
				&res, &err);
	}
	client_close(&c);
	if (r == -EPROTO) {
		r = cmd_print_error(err);
		json_decref(err);
		return r;
	}
	if (r < 0) {
		fprintf(stderr, "spctl: journal: %s\n", strerror(-r));
		return CMD_EXIT_SPD;
	}
	evs = json_object_get(res, "events");
	for (size_t i = 0; i < json_array_size(evs); i++)
		print_event(ctx, json_array_get(evs, i));
	json_decref(res);
	return 0;
usage:
	fprintf(stderr, "usage: spctl journal [--follow] [--since ID] "
			"[--kind KIND] [--limit N] [--json]\n"
			"       spctl journal verify\n");
	return CMD_EXIT_USAGE;
}

int cmd_secrets(struct cmd_ctx *ctx, int argc, char **argv)
{
	bool reload = argc == 2 && strcmp(argv[1], "reload") == 0;
	json_t *res, *a;
	int ex = 0;

	if (argc > 2 || (argc == 2 && !reload)) {
		fprintf(stderr, "usage: spctl secrets [reload]\n");
		return CMD_EXIT_USAGE;
	}
	res = cmd_call(reload ? RPC_M_SECRETS_RELOAD : RPC_M_SECRETS_LIST, NULL,
		       &ex);
	if (!res)
		return ex;
	if (ctx->json) {
		print_json(res);
	} else {
		a = json_object_get(res, "secrets");
		for (size_t i = 0; i < json_array_size(a); i++) {
			json_t *s = json_array_get(a, i);
			printf("%-28s %s  %s\n",
			       json_string_value(json_object_get(s, "name")),
			       json_string_value(
				   json_object_get(s, "fingerprint")),
			       json_string_value(json_object_get(s, "source")));
		}
		if (reload)
			printf("reloaded: %zu secrets\n", json_array_size(a));
	}
	json_decref(res);
	return 0;
}

/* How long spctl stop waits for spd to exit: spd ends its runs and
 * writes the journal's last rows first, which takes well under a second
 * unless the disk stalls. */
#define STOP_WAIT_MS 15000
#define STOP_POLL_MS 20

/* Whether pid is a live process named spd (/proc/PID/comm; a zombie,
 * which has exited, is not live).  A pid file outlives its spd, and the
 * pid may since name another program. */
static bool pid_is_spd(long pid)
{
	char path[64], buf[512], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* "PID (comm) S ...": comm may hold spaces and parentheses; the
	 * state follows the last ')'. */
	p = strrchr(buf, ')');
	if (!p || strncmp(buf + strcspn(buf, "("), "(spd)", 5) != 0)
		return false;
	return p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

/* Nothing answers on the socket: say so, and what a leftover spd.pid
 * names, so that a stale file never reads as a running spd. */
static int stop_not_running(struct cmd_ctx *ctx)
{
	struct spd_paths p = {0};
	char *pidtxt = NULL;
	long pid = 0;

	if (paths_resolve(&p) == 0) {
		pidtxt = paths_read_line(p.pid_path);
		if (pidtxt)
			pid = strtol(pidtxt, NULL, 10);
	}
	if (ctx->json)
		printf("{\"running\":false}\n");
	else if (pid > 0 && pid_is_spd(pid))
		printf("spd is not running on %s; pid %ld (spd.pid) is an spd "
		       "that lost its socket and stops by itself\n",
		       p.socket_path, pid);
	else if (pid > 0)
		printf("spd is not running (spd.pid names pid %ld, which is "
		       "not a running spd: a stale file)\n",
		       pid);
	else
		printf("spd is not running\n");
	free(pidtxt);
	paths_free(&p);
	return 0;
}

int cmd_stop(struct cmd_ctx *ctx, int argc, char **argv)
{
	json_t *res = NULL, *err = NULL;
	struct client c;
	char errbuf[512];
	long pid;
	int r, waited;

	if (argc != 1) {
		fprintf(stderr, "usage: spctl stop\n");
		return CMD_EXIT_USAGE;
	}
	r = client_open_running(&c, errbuf, sizeof(errbuf));
	if (r == -ENOENT || r == -ECONNREFUSED)
		return stop_not_running(ctx);
	if (r < 0) {
		fprintf(stderr, "spctl: %s\n", errbuf);
		return CMD_EXIT_SPD;
	}
	r = client_call(&c, RPC_M_DAEMON_STOP, NULL, NULL, NULL, &res, &err);
	client_close(&c);
	if (r == -EPROTO) {
		r = cmd_print_error(err);
		json_decref(err);
		return r;
	}
	if (r < 0) {
		fprintf(stderr, "spctl: stop: %s\n", strerror(-r));
		return CMD_EXIT_SPD;
	}
	pid = (long)json_integer_value(json_object_get(res, "pid"));
	json_decref(res);
	for (waited = 0; pid > 0 && pid_is_spd(pid) && waited < STOP_WAIT_MS;
	     waited += STOP_POLL_MS)
		nanosleep(&(struct timespec){0, STOP_POLL_MS * 1000000L}, NULL);
	if (pid > 0 && pid_is_spd(pid)) {
		fprintf(stderr,
			"spctl: spd (pid %ld) is stopping but has not exited "
			"after %d s\n",
			pid, STOP_WAIT_MS / 1000);
		return CMD_EXIT_SPD;
	}
	if (ctx->json)
		printf("{\"running\":false,\"pid\":%ld}\n", pid);
	else
		printf("spd (pid %ld) stopped\n", pid);
	return 0;
}

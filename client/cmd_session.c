/*
 * spctl session … and spctl policy check.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "proto/rpc.h"
#include "client.h"
#include "client/diffstat.h"
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
	/* An agent is not told where the operator's checkout is. */
	if (json_object_get(s, "repo"))
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
	fprintf(
	    stderr,
	    "usage: spctl session start FEATURE [--repo DIR] [--in-place]\n"
	    "       spctl session list | show ID | status [ID]\n"
	    "       spctl session diff ID [--stat] | log ID | restore ID N\n"
	    "       spctl session merge ID [--into BRANCH] [--squash] "
	    "[--force] [--accept-untrusted]\n"
	    "       spctl session end ID [--discard]\n"
	    "       spctl session heldout ID DIR | verify ID\n");
	return CMD_EXIT_USAGE;
}

/* A commit's id as a person reads it: its first 12 hex digits. */
static void print_commit_id(const char *hex)
{
	printf("%.12s", hex ? hex : "-");
}

/* The branch's commits, newest first: "  ID  subject  (author)". */
static void print_commits(json_t *commits)
{
	for (size_t i = 0; i < json_array_size(commits); i++) {
		json_t *c = json_array_get(commits, i);

		fputs("  ", stdout);
		print_commit_id(str(c, "commit"));
		fputs("  ", stdout);
		ts_fputs(stdout, str(c, "subject"));
		fputs("  (", stdout);
		ts_fputs(stdout, str(c, "author"));
		fputs(")\n", stdout);
	}
}

/* Paths, one a line, and how many more there are than spd listed. */
static void print_paths(json_t *paths, json_int_t count)
{
	for (size_t i = 0; i < json_array_size(paths); i++)
		print_line("  ",
			   json_string_value(json_array_get(paths, i)) ?: "?");
	if (count > (json_int_t)json_array_size(paths))
		printf("  ... and %lld more\n",
		       (long long)(count - (json_int_t)json_array_size(paths)));
}

static const char *plural(json_int_t n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}

/* A worktree session's work: its commits and what is not committed. */
static void print_work(json_t *res)
{
	json_t *commits = json_object_get(res, "commits");
	json_t *unc = json_object_get(res, "uncommitted");
	json_int_t un =
	    json_integer_value(json_object_get(res, "uncommitted_count"));

	if (json_array_size(commits) == 0) {
		printf("commits:   none on %s yet\n", str(res, "branch"));
	} else {
		printf("commits:   %zu on ", json_array_size(commits));
		ts_fputs(stdout, str(res, "branch"));
		fputs(", newest first\n", stdout);
		print_commits(commits);
	}
	if (!unc) {
		printf("uncommitted: not known while a run is in flight\n");
	} else if (un == 0) {
		printf("uncommitted: nothing\n");
	} else {
		printf("uncommitted: %lld %s (spd commits %s when the session "
		       "ends)\n",
		       (long long)un, plural(un, "file", "files"),
		       plural(un, "it", "them"));
		print_paths(unc, un);
	}
}

/* A call whose error the caller reads (ret_err) rather than have
 * cmd_call print it.  NULL and *ret_exit set on a transport failure. */
static json_t *call_raw(enum rpc_method method, json_t *params,
			json_t **ret_err, int *ret_exit)
{
	struct client c;
	char errbuf[512] = "";
	json_t *res = NULL;
	int r;

	*ret_err = NULL;
	r = client_open(&c, errbuf, sizeof(errbuf));
	if (r < 0) {
		json_decref(params);
		fprintf(stderr, "spctl: %s\n", errbuf);
		*ret_exit = CMD_EXIT_SPD;
		return NULL;
	}
	r = client_call(&c, method, params, NULL, NULL, &res, ret_err);
	client_close(&c);
	if (r < 0 && r != -EPROTO) {
		fprintf(stderr, "spctl: %s: %s\n", rpc_method_name(method),
			strerror(-r));
		*ret_exit = CMD_EXIT_SPD;
	}
	return r < 0 ? NULL : res;
}

/* The verdict of session verify (and of the checks a merge ran). */
static void print_verdict(json_t *res)
{
	json_t *g = json_object_get(res, "gates");
	json_t *ch = json_object_get(res, "checks");

	for (size_t i = 0; i < json_array_size(ch); i++) {
		json_t *c = json_array_get(ch, i);
		fputs("check ", stdout);
		print_padded(str(c, "name"), 16);
		printf(" exit %lld\n", (long long)json_integer_value(
					   json_object_get(c, "exit")));
	}
	for (size_t i = 0; i < json_array_size(g); i++) {
		json_t *x = json_array_get(g, i);
		fputs("gate  ", stdout);
		print_padded(str(x, "name"), 16);
		printf(" %s  ", json_is_true(json_object_get(x, "pass"))
				    ? "pass"
				    : "FAIL");
		ts_fputs(stdout, str(x, "detail"));
		fputc('\n', stdout);
	}
	/* Without checks there is nothing to call a failure: say how to
	 * add one instead. */
	if (json_array_size(ch) == 0 &&
	    !json_is_true(json_object_get(res, "pass")))
		printf("verdict: none: no checks are configured, so nothing "
		       "was verified.\n"
		       "Add one to the project's .spd.conf and commit it (a "
		       "session reads the file as it was when the session "
		       "started):\n"
		       "\n"
		       "    [check \"test\"]\n"
		       "        run = make test\n");
	else
		printf("verdict: %s\n",
		       json_is_true(json_object_get(res, "pass")) ? "PASS"
								  : "FAIL");
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

static int session_list(struct cmd_ctx *ctx, int argc, char **argv)
{
	json_t *res, *a;
	int ex = 0;

	(void)argv;
	if (argc != 2)
		return session_usage();
	res = cmd_call(RPC_M_SESSION_LIST, NULL, &ex);
	if (!res)
		return ex;
	if (ctx->json) {
		print_json(res);
	} else {
		a = json_object_get(res, "sessions");
		for (size_t i = 0; i < json_array_size(a); i++) {
			json_t *s = json_array_get(a, i);
			printf("%s  %-15s %-9s ", str(s, "id"), str(s, "state"),
			       str(s, "mode"));
			print_padded(str(s, "feature"), 20);
			fputc(' ', stdout);
			ts_fputs(stdout, str(s, "worktree"));
			fputc('\n', stdout);
		}
	}
	json_decref(res);
	return 0;
}

/* session show ID: the record. */
/* The provenance labels by origin: what the agent read, and at which
 * journal row each kind first entered. */
static void print_labels(json_t *labels)
{
	static const char *const origins[] = {
	    "trusted", "worktree", "private", "command",   "network:",
	    "mcp:",    "acp",	   "model",   "agent-tool"};
	size_t i, k;
	json_t *l;

	if (!json_is_array(labels))
		return;
	if (json_array_size(labels) == 0) {
		fputs("read: nothing spd labelled yet\n", stdout);
		return;
	}
	fputs("read, by origin (journal row where it entered):\n", stdout);
	for (k = 0; k <= sizeof(origins) / sizeof(origins[0]); k++)
		json_array_foreach(labels, i, l)
		{
			const char *name = str(l, "label");
			bool mine = false, known = false;

			if (!name)
				continue;
			for (size_t o = 0;
			     o < sizeof(origins) / sizeof(*origins); o++) {
				size_t n = strlen(origins[o]);
				bool m = origins[o][n - 1] == ':'
					     ? strncmp(name, origins[o], n) == 0
					     : strcmp(name, origins[o]) == 0;

				known = known || m;
				if (o == k)
					mine = m;
			}
			if (k == sizeof(origins) / sizeof(origins[0]))
				mine = !known;
			if (!mine)
				continue;
			fputs("  ", stdout);
			ts_fputs(stdout, name);
			printf("  row %lld", (long long)json_integer_value(
						 json_object_get(l, "row")));
			if (str(l, "what") && *str(l, "what")) {
				fputs("  ", stdout);
				ts_fputs(stdout, str(l, "what"));
			}
			fputs("\n", stdout);
		}
}

static int session_show(struct cmd_ctx *ctx, int argc, char **argv)
{
	json_t *res, *s;
	int ex = 0;

	if (argc != 3)
		return session_usage();
	res = cmd_call(RPC_M_SESSION_SHOW, json_pack("{s:s}", "id", argv[2]),
		       &ex);
	if (!res)
		return ex;
	s = json_object_get(res, "session");
	if (ctx->json)
		print_json(res);
	else {
		print_session(s ? s : res);
		print_labels(json_object_get(res, "labels"));
	}
	json_decref(res);
	return 0;
}

/*
 * The operator's session status without an ID: the one active session,
 * or, with none or several, a sentence (and the active ones) and exit 2.
 * Writes the id to id (SESSION_ID_MAX bytes).
 */
#define SESSION_ID_MAX 64
static int only_active(char *id)
{
	json_t *res, *a, *active = json_array();
	int ex = 0;

	res = cmd_call(RPC_M_SESSION_LIST, NULL, &ex);
	if (!res) {
		json_decref(active);
		return ex;
	}
	a = json_object_get(res, "sessions");
	for (size_t i = 0; i < json_array_size(a); i++) {
		json_t *s = json_array_get(a, i);
		if (strcmp(str(s, "state"), "active") == 0)
			json_array_append(active, s);
	}
	ex = CMD_EXIT_USAGE;
	if (json_array_size(active) == 1) {
		snprintf(id, SESSION_ID_MAX, "%s",
			 str(json_array_get(active, 0), "id"));
		ex = 0;
	} else if (json_array_size(active) == 0) {
		fprintf(stderr, "spctl: no session is active; `spctl session "
				"start FEATURE` makes one, `spctl session "
				"list` shows the ended ones\n");
	} else {
		fprintf(stderr,
			"spctl: %zu sessions are active; name one (spctl "
			"session status ID):\n",
			json_array_size(active));
		for (size_t i = 0; i < json_array_size(active); i++) {
			json_t *s = json_array_get(active, i);
			fprintf(stderr, "  %s  ", str(s, "id"));
			ts_fputs(stderr, str(s, "feature"));
			fputc('\n', stderr);
		}
	}
	json_decref(active);
	json_decref(res);
	return ex;
}

/* session status [ID]: the record, and a worktree session's work. */
static int session_status(struct cmd_ctx *ctx, int argc, char **argv)
{
	char id[SESSION_ID_MAX] = "";
	json_t *res, *s;
	int ex = 0;

	if (argc > 3)
		return session_usage();
	if (argc == 3)
		snprintf(id, sizeof(id), "%s", argv[2]);
	else if (!getenv("SPD_SESSION_TOKEN") && (ex = only_active(id)) != 0)
		return ex;
	res = cmd_call(RPC_M_SESSION_STATUS,
		       id[0] ? json_pack("{s:s}", "id", id) : NULL, &ex);
	if (!res)
		return ex;
	s = json_object_get(res, "session");
	if (ctx->json) {
		print_json(res);
	} else {
		print_session(s ? s : res);
		if (json_object_get(res, "head")) {
			fputs("head:      ", stdout);
			print_commit_id(str(res, "head"));
			fputc('\n', stdout);
		}
		if (json_object_get(res, "commits"))
			print_work(res);
	}
	json_decref(res);
	return 0;
}

/* session end ID [--discard]: what became of the work, the commits, how
 * to merge them. */
static int session_end(struct cmd_ctx *ctx, int argc, char **argv)
{
	bool discard = false;
	const char *id = NULL;
	json_t *res, *work, *unc;
	int ex = 0;

	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--discard") == 0)
			discard = true;
		else if (!id && argv[i][0] != '-')
			id = argv[i];
		else
			return session_usage();
	}
	if (!id)
		return session_usage();
	res = cmd_call(RPC_M_SESSION_END,
		       json_pack("{s:s, s:b}", "id", id, "discard", discard),
		       &ex);
	if (!res)
		return ex;
	if (ctx->json) {
		print_json(res);
		json_decref(res);
		return 0;
	}
	printf("session %s ended", id);
	if (json_string_value(json_object_get(res, "branch")) &&
	    strcmp(str(res, "mode"), "worktree") == 0) {
		fputs("; its branch ", stdout);
		ts_fputs(stdout, str(res, "branch"));
		fputs(" is kept", stdout);
	}
	fputc('\n', stdout);
	work = json_object_get(res, "work");
	if ((unc = json_object_get(work, "discarded"))) {
		json_int_t n = json_integer_value(
		    json_object_get(work, "discarded_count"));
		printf("discarded %lld uncommitted %s:\n", (long long)n,
		       plural(n, "file", "files"));
		print_paths(unc, n);
	} else if (json_object_get(work, "committed")) {
		json_int_t n =
		    json_integer_value(json_object_get(work, "files_count"));
		printf("committed %lld uncommitted %s as ", (long long)n,
		       plural(n, "file", "files"));
		print_commit_id(str(work, "committed"));
		fputs(":\n", stdout);
		print_paths(json_object_get(work, "files"), n);
	}
	if (json_array_size(json_object_get(res, "commits")) > 0) {
		fputs("commits on ", stdout);
		ts_fputs(stdout, str(res, "branch"));
		fputs(", newest first:\n", stdout);
		print_commits(json_object_get(res, "commits"));
	}
	if (json_is_true(json_object_get(res, "verified"))) {
		fputs("verified: the checks passed on ", stdout);
		print_commit_id(
		    str(json_object_get(res, "attestation"), "commit"));
		fputs(", signed under refs/notes/spd\n", stdout);
	} else if (json_object_get(res, "unverified")) {
		/* An end that ran no checks, or whose checks failed, is
		 * said so where the operator looks. */
		fputs("UNVERIFIED: ", stderr);
		ts_fputs(stderr, str(res, "unverified"));
		fputc('\n', stderr);
	}
	if (json_object_get(res, "merge"))
		print_line("to merge: ", str(res, "merge"));
	if (json_object_get(res, "note"))
		print_line("note: ", str(res, "note"));
	if (json_object_get(res, "warning"))
		print_line("warning: ", str(res, "warning"));
	json_decref(res);
	return 0;
}

/* session diff ID [--stat]: the commits, what is uncommitted, then the
 * diff from the base (or its summary). */
static int session_diff(struct cmd_ctx *ctx, int argc, char **argv)
{
	bool stat = false;
	const char *id = NULL;
	json_t *res;
	int ex = 0;

	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--stat") == 0)
			stat = true;
		else if (!id && argv[i][0] != '-')
			id = argv[i];
		else
			return session_usage();
	}
	if (!id)
		return session_usage();
	res = cmd_call(RPC_M_SESSION_DIFF, json_pack("{s:s}", "id", id), &ex);
	if (!res)
		return ex;
	if (ctx->json) {
		print_json(res);
		json_decref(res);
		return 0;
	}
	if (json_object_get(res, "commits") ||
	    json_object_get(res, "uncommitted")) {
		print_work(res);
		fputc('\n', stdout);
	}
	if (stat) {
		struct diffstat d;

		if (diffstat_parse(str(res, "diff"), &d) < 0) {
			json_decref(res);
			return CMD_EXIT_SPD;
		}
		if (d.n == 0)
			printf("no changes since the base\n");
		diffstat_print(stdout, &d);
		diffstat_free(&d);
	} else {
		print_diff(str(res, "diff"));
	}
	if (json_is_true(json_object_get(res, "truncated")))
		printf("\n[diff truncated]\n");
	fflush(stdout);
	if (json_object_get(res, "merge")) {
		fprintf(stderr,
			"to merge: spctl session merge %s (the checks first)\n"
			"      or: ",
			id);
		ts_fputs(stderr, str(res, "merge"));
		fputc('\n', stderr);
	}
	json_decref(res);
	return 0;
}

/* session log ID: the checkpoints spd took of the worktree. */
static int session_log(struct cmd_ctx *ctx, int argc, char **argv)
{
	json_t *res, *a;
	int ex = 0;

	if (argc != 3)
		return session_usage();
	res =
	    cmd_call(RPC_M_SESSION_LOG, json_pack("{s:s}", "id", argv[2]), &ex);
	if (!res)
		return ex;
	a = json_object_get(res, "checkpoints");
	if (ctx->json) {
		print_json(res);
	} else if (json_array_size(a) == 0) {
		printf("no checkpoints: spd takes one after each run or file "
		       "tool that changes the worktree\n");
	} else {
		printf("%4s  %-19s  %5s  %7s  %s\n", "N", "TIME", "FILES",
		       "JOURNAL", "WHAT");
		for (size_t i = 0; i < json_array_size(a); i++) {
			json_t *c = json_array_get(a, i);
			time_t at = (time_t)json_integer_value(
			    json_object_get(c, "at"));
			char stamp[32] = "-";
			struct tm tm;

			if (localtime_r(&at, &tm))
				strftime(stamp, sizeof(stamp),
					 "%Y-%m-%d %H:%M:%S", &tm);
			printf("%4lld  %-19s  %5lld  %7lld  ",
			       (long long)json_integer_value(
				   json_object_get(c, "n")),
			       stamp,
			       (long long)json_integer_value(
				   json_object_get(c, "files")),
			       (long long)json_integer_value(
				   json_object_get(c, "journal_row")));
			ts_fputs(stdout, str(c, "what"));
			fputc('\n', stdout);
		}
		printf("spctl session restore %s N puts the worktree back as "
		       "checkpoint N had it\n",
		       argv[2]);
	}
	/* The last call's checkpoint waits for the workspace's watch (a new
	 * session of a big worktree): not listed yet, never dropped. */
	if (!ctx->json && json_is_true(json_object_get(res, "pending")))
		printf("one more is taken once spd's watch of the worktree "
		       "is made (a new session's first seconds)\n");
	json_decref(res);
	return 0;
}

/* session restore ID N */
static int session_restore(struct cmd_ctx *ctx, int argc, char **argv)
{
	json_t *res;
	long long n, saved;
	char *end;
	int ex = 0;

	if (argc != 4)
		return session_usage();
	errno = 0;
	n = strtoll(argv[3], &end, 10);
	if (errno || *end || n < 1) {
		fprintf(stderr,
			"spctl: %s is not a checkpoint number (1 and "
			"up; spctl session log ID lists them)\n",
			argv[3]);
		return CMD_EXIT_USAGE;
	}
	res = cmd_call(
	    RPC_M_SESSION_RESTORE,
	    json_pack("{s:s, s:I}", "id", argv[2], "n", (json_int_t)n), &ex);
	if (!res)
		return ex;
	saved = (long long)json_integer_value(json_object_get(res, "saved"));
	if (ctx->json)
		print_json(res);
	else if (saved > 0)
		printf("session %s: the worktree is as checkpoint %lld had it; "
		       "what was there before is checkpoint %lld (spctl "
		       "session restore %s %lld undoes this)\n",
		       argv[2], n, saved, argv[2], saved);
	else
		printf("session %s: the worktree is as checkpoint %lld had "
		       "it\n",
		       argv[2], n);
	json_decref(res);
	return 0;
}

/* A merge spd refused: the sentence, the verdict when the checks failed;
 * exit 1 (a request spctl could not have known was wrong: the checkout
 * is dirty, the target moved, conflicts, failing checks), else the
 * usual exit for the error. */
static int merge_refused(json_t *err)
{
	json_t *data = json_object_get(err, "data");
	json_int_t num = json_integer_value(json_object_get(err, "code"));

	if (!cmd_error_is(err, "BAD-REQUEST") || num != -32600)
		return cmd_print_error(err);
	fputs("spctl: merge refused: ", stderr);
	ts_fputs(stderr,
		 json_string_value(json_object_get(err, "message")) ?: "?");
	fputc('\n', stderr);
	if (json_object_get(data, "gates") || json_object_get(data, "checks")) {
		fflush(stderr);
		print_verdict(data);
	}
	return CMD_EXIT_CHECK_FAILED;
}

static void print_merged(json_t *res)
{
	json_t *checks = json_object_get(res, "checks");
	bool squash = json_is_true(json_object_get(res, "squash"));
	bool ff = json_is_true(json_object_get(res, "fast_forward"));

	fputs(squash ? "squashed " : "merged ", stdout);
	ts_fputs(stdout, str(res, "branch"));
	fputs(" into ", stdout);
	ts_fputs(stdout, str(res, "into"));
	fputs(ff       ? ": fast-forward "
	      : squash ? ": one commit "
		       : ": merge "
			 "commit ",
	      stdout);
	print_commit_id(str(res, "from"));
	fputs("..", stdout);
	print_commit_id(str(res, "to"));
	fputc('\n', stdout);
	if (json_is_true(json_object_get(res, "forced")))
		printf(json_is_object(checks)
			   ? "warning: the checks failed; merged anyway "
			     "(--force), and the journal says so\n"
			   : "warning: merged without running the checks "
			     "(--force: the session has ended), and the "
			     "journal says so\n");
	if (json_is_object(checks) &&
	    json_array_size(json_object_get(checks, "checks")) > 0)
		print_verdict(checks);
	else if (json_is_object(checks))
		printf("checks: none configured ([check \"NAME\"] in the "
		       "project's .spd.conf)\n");
}

/* session merge ID [--into BRANCH] [--squash] [--force]
 * [--accept-untrusted] */
static int session_merge(struct cmd_ctx *ctx, int argc, char **argv)
{
	json_t *params = json_object(), *res, *err = NULL;
	const char *id = NULL;
	int ex = 0;

	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--into") == 0 && i + 1 < argc) {
			json_object_set_new(params, "into",
					    json_string(argv[++i]));
		} else if (strcmp(argv[i], "--squash") == 0) {
			json_object_set_new(params, "squash", json_true());
		} else if (strcmp(argv[i], "--force") == 0) {
			json_object_set_new(params, "force", json_true());
		} else if (strcmp(argv[i], "--accept-untrusted") == 0) {
			json_object_set_new(params, "accept_untrusted",
					    json_true());
		} else if (!id && argv[i][0] != '-') {
			id = argv[i];
		} else {
			json_decref(params);
			return session_usage();
		}
	}
	if (!id) {
		json_decref(params);
		return session_usage();
	}
	json_object_set_new(params, "id", json_string(id));
	res = call_raw(RPC_M_SESSION_MERGE, params, &err, &ex);
	if (!res) {
		if (err) {
			if (ctx->json) {
				fflush(stdout);
				print_json(err);
			}
			ex = merge_refused(err);
		}
		json_decref(err);
		return ex;
	}
	if (ctx->json)
		print_json(res);
	else
		print_merged(res);
	json_decref(res);
	return 0;
}

/* session verify ID */
static int session_verify(struct cmd_ctx *ctx, int argc, char **argv)
{
	json_t *res;
	int ex = 0;

	if (argc != 3)
		return session_usage();
	res = cmd_call(RPC_M_SESSION_VERIFY, json_pack("{s:s}", "id", argv[2]),
		       &ex);
	if (!res)
		return ex;
	if (ctx->json)
		print_json(res);
	else
		print_verdict(res);
	ex = json_is_true(json_object_get(res, "pass")) ? 0
							: CMD_EXIT_CHECK_FAILED;
	json_decref(res);
	return ex;
}

/* session heldout ID DIR */
static int session_heldout(struct cmd_ctx *ctx, int argc, char **argv)
{
	char dir[PATH_MAX];
	json_t *res;
	int ex = 0;

	if (argc != 4)
		return session_usage();
	if (!realpath(argv[3], dir)) {
		fprintf(stderr, "spctl: %s: %s\n", argv[3], strerror(errno));
		return CMD_EXIT_USAGE;
	}
	res = cmd_call(RPC_M_SESSION_HELDOUT,
		       json_pack("{s:s, s:s}", "id", argv[2], "dir", dir), &ex);
	if (!res)
		return ex;
	if (ctx->json)
		print_json(res);
	else
		printf("sealed %lld held-out file(s) for session %s%s\n",
		       (long long)json_integer_value(
			   json_object_get(res, "files")),
		       argv[2],
		       json_is_true(json_object_get(res, "waited"))
			   ? ", once its running verification had ended"
			   : "");
	json_decref(res);
	return 0;
}

int cmd_session(struct cmd_ctx *ctx, int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(struct cmd_ctx *ctx, int argc, char **argv);
	} subs[] = {
	    {"start", session_start},	  {"list", session_list},
	    {"show", session_show},	  {"status", session_status},
	    {"end", session_end},	  {"diff", session_diff},
	    {"log", session_log},	  {"restore", session_restore},
	    {"merge", session_merge},	  {"verify", session_verify},
	    {"heldout", session_heldout},
	};

	if (argc < 2)
		return session_usage();
	for (size_t k = 0; k < sizeof(subs) / sizeof(subs[0]); k++)
		if (strcmp(argv[1], subs[k].name) == 0)
			return subs[k].fn(ctx, argc, argv);
	return session_usage();
}

static int policy_usage(void)
{
	fprintf(stderr,
		"usage: spctl policy check [--session ID] [--workspace DIR] "
		"[--json] -- ARGV...\n"
		"       spctl policy check [--session ID] [--workspace DIR] "
		"--read PATH | --write PATH\n"
		"       spctl policy propose HOST METHOD PATH [--json]\n");
	return CMD_EXIT_USAGE;
}

/* spctl policy propose HOST METHOD PATH: policy.propose, the approval's
 * id printed. */
static int policy_propose(struct cmd_ctx *ctx, int argc, char **argv)
{
	json_t *res;
	int ex = 0;

	if (argc == 6 && strcmp(argv[5], "--json") == 0) {
		ctx->json = true;
		argc--;
	}
	if (argc != 5) {
		fprintf(stderr, "usage: spctl policy propose HOST METHOD PATH "
				"[--json]\n");
		return CMD_EXIT_USAGE;
	}
	res = cmd_call(RPC_M_POLICY_PROPOSE,
		       json_pack("{s:s, s:s, s:s}", "host", argv[2], "method",
				 argv[3], "path", argv[4]),
		       &ex);
	if (!res)
		return ex;
	if (ctx->json)
		print_json(res);
	else
		printf("approval %lld: waiting for a person (spctl approve "
		       "%lld)\n",
		       (long long)json_integer_value(
			   json_object_get(res, "approval")),
		       (long long)json_integer_value(
			   json_object_get(res, "approval")));
	json_decref(res);
	return 0;
}

int cmd_policy(struct cmd_ctx *ctx, int argc, char **argv)
{
	json_t *params, *res;
	int i, ex = 0;
	bool have_call = false;
	char ws[PATH_MAX];

	if (argc >= 2 && strcmp(argv[1], "propose") == 0)
		return policy_propose(ctx, argc, argv);
	if (argc < 2 || strcmp(argv[1], "check") != 0)
		return policy_usage();
	params = json_object();
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

/*
 * spctl mcp's tools: each tool's arguments checked and turned into
 * requests to spd (cmd.run, fs.*, policy.check, session.status; commit is
 * two runs of git), and spd's
 * answers into the tool's result; the table of tools with their JSON
 * schemas.  The server around them is cmd_mcp.c (cmd_mcp.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "common/util.h"
#include "proto/rpc.h"
#include "client/cmd_mcp.h"

/* Matches one search returns: more would not help a model and would
 * crowd its context. */
#define MCP_SEARCH_MATCHES_MAX 1000
/* The text kept of one matching line (minified code can be a single line
 * of megabytes). */
#define MCP_SEARCH_LINE_MAX 512

/* ---- argument helpers ------------------------------------------------------- */

/* A string argument; NULL when absent.  A present argument of another type
 * is an input error (*bad set). */
static const char *arg_str(struct mcp_call *k, const char *name, bool *bad)
{
	json_t *v = json_object_get(k->args, name);

	if (!v)
		return NULL;
	if (!json_is_string(v)) {
		*bad = true;
		return NULL;
	}
	return json_string_value(v);
}

/* Unknown arguments are refused, as spd refuses unknown parameters: a
 * misspelt "timout" must not silently run without a deadline. */
static bool args_known(struct mcp_call *k, const char *const *names)
{
	const char *key;
	json_t *v;

	json_object_foreach(k->args, key, v)
	{
		bool ok = false;
		for (const char *const *n = names; *n; n++)
			ok = ok || strcmp(*n, key) == 0;
		if (!ok) {
			mcp_call_fail(k, "BAD-REQUEST: unknown argument \"%s\"",
				      key);
			return false;
		}
	}
	return true;
}

/* Sends method(params) or fails the call; returns the result of the
 * send. */
static int send_or_fail(struct mcp_call *k, enum rpc_method method,
			json_t *params, bool in_session)
{
	int r = mcp_call_send(k, method, params, in_session);

	if (r < 0)
		mcp_call_fail(k, "INTERNAL: cannot reach spd: %s",
			      strerror(-r));
	return r;
}

/* The common end of a one-request tool: spd's result as the tool's. */
static void reply_plain(struct mcp_call *k, json_t *result, json_t *error)
{
	if (error)
		mcp_call_fail_spd(k, error);
	else
		mcp_call_ok(k, json_incref(result));
}

/* ---- the tools -------------------------------------------------------------- */

static int run_start(struct mcp_call *k)
{
	static const char *const known[] = {"argv", "cwd", "timeout", "network",
					    NULL};
	json_t *argv = json_object_get(k->args, "argv"), *p, *v;
	bool bad = false;
	const char *cwd = arg_str(k, "cwd", &bad);
	const char *net = arg_str(k, "network", &bad);

	if (!args_known(k, known))
		return -EINVAL;
	if (!json_is_array(argv) || json_array_size(argv) == 0) {
		mcp_call_fail(k,
			      "BAD-REQUEST: argv must be a non-empty array of "
			      "strings (a program and its arguments; no shell "
			      "string)");
		return -EINVAL;
	}
	for (size_t i = 0; i < json_array_size(argv); i++)
		if (!json_is_string(json_array_get(argv, i))) {
			mcp_call_fail(
			    k, "BAD-REQUEST: argv[%zu] is not a string", i);
			return -EINVAL;
		}
	v = json_object_get(k->args, "timeout");
	if (bad || (v && (!json_is_integer(v) || json_integer_value(v) <= 0))) {
		mcp_call_fail(k,
			      "BAD-REQUEST: cwd and network must be strings, "
			      "timeout a positive number of seconds");
		return -EINVAL;
	}
	p = json_pack("{s:O}", "argv", argv);
	if (v)
		json_object_set(p, "timeout", v);
	if (net)
		json_object_set_new(p, "net", json_string(net));
	if (cwd) {
		/* spd resolves cwd against its own directory and requires
		 * it under the workspace: a relative cwd is the
		 * workspace's. */
		char *abs = NULL;
		if (cwd[0] == '/')
			abs = strdup(cwd);
		else if (asprintf(&abs, "%s/%s", k->m->workspace, cwd) < 0)
			abs = NULL;
		json_object_set_new(p, "cwd", json_string(abs ? abs : cwd));
		free(abs);
	}
	return send_or_fail(k, RPC_M_CMD_RUN, p, true);
}

static json_t *output_json(struct mcp_call *k, int s)
{
	return mcp_text_json(k->out[s].data ? k->out[s].data : "",
			     k->out[s].len);
}

static void run_reply(struct mcp_call *k, json_t *result, json_t *error)
{
	json_t *o, *bd;

	if (error) {
		mcp_call_fail_spd(k, error);
		return;
	}
	bd = json_object_get(result, "bytes_dropped");
	o = json_pack(
	    "{s:O, s:O, s:O, s:O, s:o, s:o, s:{s:I, s:I}, s:O}", "exit_code",
	    json_object_get(result, "exit_code") ?: json_null(), "timed_out",
	    json_object_get(result, "timed_out") ?: json_false(), "cancelled",
	    json_object_get(result, "cancelled") ?: json_false(), "duration_ms",
	    json_object_get(result, "duration_ms") ?: json_null(), "stdout",
	    output_json(k, 0), "stderr", output_json(k, 1), "bytes_dropped",
	    "stdout",
	    json_integer_value(json_object_get(bd, "stdout")) +
		(json_int_t)k->dropped[0],
	    "stderr",
	    json_integer_value(json_object_get(bd, "stderr")) +
		(json_int_t)k->dropped[1],
	    "warnings", json_object_get(result, "warnings") ?: json_array());
	if (json_integer_value(json_object_get(result, "signal")) > 0)
		json_object_set(o, "signal", json_object_get(result, "signal"));
	if (json_is_string(json_object_get(result, "error")))
		json_object_set(o, "error", json_object_get(result, "error"));
	mcp_call_ok(k, o);
}

static int path_start(struct mcp_call *k, enum rpc_method method, bool optional,
		      const char *const *known)
{
	bool bad = false;
	const char *path = arg_str(k, "path", &bad);

	if (!args_known(k, known))
		return -EINVAL;
	if (bad || (!path && !optional)) {
		mcp_call_fail(k, "BAD-REQUEST: path must be a string: a path "
				 "relative to the workspace");
		return -EINVAL;
	}
	return send_or_fail(
	    k, method, path ? json_pack("{s:s}", "path", path) : json_object(),
	    true);
}

static int read_start(struct mcp_call *k)
{
	static const char *const known[] = {"path", NULL};
	return path_start(k, RPC_M_FS_READ, false, known);
}

static int list_start(struct mcp_call *k)
{
	static const char *const known[] = {"path", NULL};
	return path_start(k, RPC_M_FS_LIST, true, known);
}

static int write_start(struct mcp_call *k)
{
	static const char *const known[] = {"path", "content", NULL};
	bool bad = false;
	const char *path = arg_str(k, "path", &bad);
	const char *content = arg_str(k, "content", &bad);

	if (!args_known(k, known))
		return -EINVAL;
	if (bad || !path || !content) {
		mcp_call_fail(k,
			      "BAD-REQUEST: path and content must be strings");
		return -EINVAL;
	}
	return send_or_fail(k, RPC_M_FS_WRITE,
			    json_pack("{s:s, s:O}", "path", path, "content",
				      json_object_get(k->args, "content")),
			    true);
}

/* edit_file: read through spd, replace exactly one occurrence here, write
 * through spd.  Between the two a person may be asked; the write is
 * judged (and pinned) on the new content like any other write. */
static int edit_start(struct mcp_call *k)
{
	static const char *const known[] = {"path", "old_string", "new_string",
					    NULL};
	bool bad = false;
	const char *path = arg_str(k, "path", &bad);
	const char *old = arg_str(k, "old_string", &bad);
	const char *new = arg_str(k, "new_string", &bad);

	if (!args_known(k, known))
		return -EINVAL;
	if (bad || !path || !old || !new) {
		mcp_call_fail(k, "BAD-REQUEST: path, old_string and new_string "
				 "must be strings");
		return -EINVAL;
	}
	if (!old[0]) {
		mcp_call_fail(k, "BAD-REQUEST: old_string is empty; to write a "
				 "whole file use write_file");
		return -EINVAL;
	}
	return send_or_fail(k, RPC_M_FS_READ, json_pack("{s:s}", "path", path),
			    true);
}

static void edit_reply(struct mcp_call *k, json_t *result, json_t *error)
{
	json_t *c = json_object_get(result, "content");
	json_t *old = json_object_get(k->args, "old_string");
	json_t *new = json_object_get(k->args, "new_string");
	const char *text, *hit = NULL, *p;
	size_t n, on, count = 0;
	struct buf b = {0};

	if (error) {
		mcp_call_fail_spd(k, error);
		return;
	}
	if (k->step == 1) {
		mcp_call_ok(k,
			    json_pack("{s:O, s:O, s:i}", "path",
				      json_object_get(result, "path"), "size",
				      json_object_get(result, "size"),
				      "replacements", 1));
		return;
	}
	if (!json_is_string(c)) {
		mcp_call_fail(k, "BAD-REQUEST: the file is not UTF-8 text; "
				 "edit_file edits text only");
		return;
	}
	text = json_string_value(c);
	n = json_string_length(c);
	/* What spd handed back is redacted: writing it back would replace
	 * each secret in the file with its marker. */
	if (memmem(text, n, "[redacted:", 10)) {
		mcp_call_fail(k,
			      "BAD-REQUEST: the file holds a value spd redacts "
			      "([redacted:…]); editing its redacted copy would "
			      "overwrite that value, so edit_file refuses");
		return;
	}
	on = json_string_length(old);
	for (p = text; (p = memmem(p, n - (size_t)(p - text),
				   json_string_value(old), on));
	     p += on)
		if (count++ == 0)
			hit = p;
	if (count == 0) {
		mcp_call_fail(k,
			      "BAD-REQUEST: old_string does not occur in the "
			      "file; nothing was written");
		return;
	}
	if (count > 1) {
		mcp_call_fail(
		    k,
		    "BAD-REQUEST: old_string occurs %zu times in the "
		    "file; include more of the surrounding text to make "
		    "it unique (nothing was written)",
		    count);
		return;
	}
	if (buf_append(&b, text, (size_t)(hit - text)) < 0 ||
	    buf_append(&b, json_string_value(new), json_string_length(new)) <
		0 ||
	    buf_append(&b, hit + on, n - (size_t)(hit - text) - on) < 0) {
		buf_free(&b);
		mcp_call_fail(k, "INTERNAL: out of memory");
		return;
	}
	k->step = 1;
	send_or_fail(k, RPC_M_FS_WRITE,
		     json_pack("{s:O, s:s%}", "path",
			       json_object_get(k->args, "path"), "content",
			       b.data ? b.data : "", b.len),
		     true);
	buf_free(&b);
}

/* search: grep in the sandbox, as any run (policy, redaction, journal);
 * spctl only parses its output. */
static int search_start(struct mcp_call *k)
{
	static const char *const known[] = {"pattern", "regex", "path",
					    "ignore_case", NULL};
	bool bad = false;
	const char *pattern = arg_str(k, "pattern", &bad);
	const char *path = arg_str(k, "path", &bad);
	json_t *regex = json_object_get(k->args, "regex");
	json_t *icase = json_object_get(k->args, "ignore_case");
	json_t *argv;

	if (!args_known(k, known))
		return -EINVAL;
	if (bad || !pattern || !pattern[0] ||
	    (regex && !json_is_boolean(regex)) ||
	    (icase && !json_is_boolean(icase))) {
		mcp_call_fail(
		    k, "BAD-REQUEST: pattern must be a non-empty string, "
		       "path a string, regex and ignore_case booleans");
		return -EINVAL;
	}
	/* -r without following symlinks, -I skips binary files, -Z ends
	 * each file name with a NUL so any name parses, -s keeps unreadable
	 * files quiet; --exclude-dir=.git keeps git's objects out. */
	argv =
	    json_pack("[s, s, s, s, s]", "grep", "-rnIsZ", "--exclude-dir=.git",
		      json_is_true(regex) ? "-E" : "-F", "--color=never");
	if (json_is_true(icase))
		json_array_append_new(argv, json_string("-i"));
	json_array_append_new(argv, json_string("-e"));
	json_array_append_new(argv, json_string(pattern));
	json_array_append_new(argv, json_string("--"));
	json_array_append_new(argv, json_string(path ? path : "."));
	return send_or_fail(k, RPC_M_CMD_RUN, json_pack("{s:o}", "argv", argv),
			    true);
}

static void search_reply(struct mcp_call *k, json_t *result, json_t *error)
{
	json_t *matches, *exit_code;
	const char *p, *end;
	bool truncated = false;

	if (error) {
		mcp_call_fail_spd(k, error);
		return;
	}
	exit_code = json_object_get(result, "exit_code");
	/* grep: 0 found, 1 nothing found, 2 trouble. */
	if (!json_is_integer(exit_code) || json_integer_value(exit_code) > 1) {
		char err[512];
		size_t n = k->out[1].len < sizeof(err) - 1 ? k->out[1].len
							   : sizeof(err) - 1;
		memcpy(err, k->out[1].data ? k->out[1].data : "", n);
		err[n] = '\0';
		mcp_call_fail(k, "BAD-REQUEST: the search failed: %s",
			      err[0] ? err : "grep did not finish");
		return;
	}
	matches = json_array();
	p = k->out[0].data ? k->out[0].data : "";
	end = p + k->out[0].len;
	while (p < end) {
		const char *nul = memchr(p, '\0', (size_t)(end - p));
		const char *nl, *colon, *name = p;
		size_t name_len, text_len;
		long line;

		if (!nul)
			break;
		nl = memchr(nul + 1, '\n', (size_t)(end - nul - 1));
		if (!nl) {
			truncated = true; /* the run's output was capped */
			break;
		}
		colon = memchr(nul + 1, ':', (size_t)(nl - nul - 1));
		p = nl + 1;
		if (!colon)
			continue;
		if (json_array_size(matches) >= MCP_SEARCH_MATCHES_MAX) {
			truncated = true;
			break;
		}
		line = strtol(nul + 1, NULL, 10);
		name_len = (size_t)(nul - name);
		if (name_len > 2 && name[0] == '.' && name[1] == '/') {
			name += 2;
			name_len -= 2;
		}
		text_len = (size_t)(nl - colon - 1);
		if (text_len > MCP_SEARCH_LINE_MAX)
			text_len = MCP_SEARCH_LINE_MAX;
		json_array_append_new(
		    matches, json_pack("{s:o, s:I, s:o}", "path",
				       mcp_text_json(name, name_len), "line",
				       (json_int_t)line, "text",
				       mcp_text_json(colon + 1, text_len)));
	}
	if (k->dropped[0] ||
	    json_integer_value(json_object_get(
		json_object_get(result, "bytes_dropped"), "stdout")))
		truncated = true;
	mcp_call_ok(k, json_pack("{s:o, s:b}", "matches", matches, "truncated",
				 truncated));
}

static int policy_start(struct mcp_call *k)
{
	static const char *const known[] = {"argv", "read", "write", "cwd",
					    NULL};
	json_t *argv = json_object_get(k->args, "argv"), *p = json_object();
	bool bad = false;
	const char *rd = arg_str(k, "read", &bad);
	const char *wr = arg_str(k, "write", &bad);
	const char *cwd = arg_str(k, "cwd", &bad);
	int given = !!argv + !!rd + !!wr;

	if (!args_known(k, known)) {
		json_decref(p);
		return -EINVAL;
	}
	if (bad || given != 1 || (argv && !json_is_array(argv))) {
		json_decref(p);
		mcp_call_fail(k,
			      "BAD-REQUEST: give exactly one of argv (an array "
			      "of strings), read or write (a path)");
		return -EINVAL;
	}
	if (argv)
		json_object_set(p, "argv", argv);
	if (rd)
		json_object_set_new(p, "read", json_string(rd));
	if (wr)
		json_object_set_new(p, "write", json_string(wr));
	if (cwd) {
		char *abs = NULL;
		if (cwd[0] != '/' &&
		    asprintf(&abs, "%s/%s", k->m->workspace, cwd) < 0)
			abs = NULL;
		json_object_set_new(p, "cwd", json_string(abs ? abs : cwd));
		free(abs);
	}
	return send_or_fail(k, RPC_M_POLICY_CHECK, p, true);
}

/* commit: `git add -A [-- PATHS]`, then `git commit -m MESSAGE`, two runs
 * in the session like any other (policy, sandbox, journal): in a worktree
 * session the worktree's .git is the agent's own repository, and spd
 * takes its commits onto spd/<feature> after each run. */
static int commit_start(struct mcp_call *k)
{
	static const char *const known[] = {"message", "paths", NULL};
	json_t *paths = json_object_get(k->args, "paths"), *argv;
	bool bad = false;
	const char *msg = arg_str(k, "message", &bad);

	if (!args_known(k, known))
		return -EINVAL;
	if (bad || !msg || !msg[0] || (paths && !json_is_array(paths))) {
		mcp_call_fail(k, "BAD-REQUEST: message must be a non-empty "
				 "string, paths an array of paths relative to "
				 "the workspace");
		return -EINVAL;
	}
	argv = json_pack("[s, s, s]", "git", "add", "-A");
	if (json_array_size(paths) > 0) {
		json_array_append_new(argv, json_string("--"));
		for (size_t i = 0; i < json_array_size(paths); i++) {
			json_t *p = json_array_get(paths, i);

			if (!json_is_string(p) || !json_string_length(p)) {
				json_decref(argv);
				mcp_call_fail(k,
					      "BAD-REQUEST: paths[%zu] is not "
					      "a non-empty string",
					      i);
				return -EINVAL;
			}
			json_array_append(argv, p);
		}
	}
	return send_or_fail(k, RPC_M_CMD_RUN, json_pack("{s:o}", "argv", argv),
			    true);
}

/* What a run printed, for a commit's answer or its error. */
static char *run_text(struct mcp_call *k)
{
	char *s = NULL;

	if (asprintf(&s, "%.*s%.*s", (int)k->out[0].len,
		     k->out[0].data ? k->out[0].data : "", (int)k->out[1].len,
		     k->out[1].data ? k->out[1].data : "") < 0)
		return NULL;
	return s;
}

static void commit_reply(struct mcp_call *k, json_t *result, json_t *error)
{
	json_t *code = json_object_get(result, "exit_code");
	char *text;

	if (error) {
		mcp_call_fail_spd(k, error);
		return;
	}
	if (!json_is_integer(code) || json_integer_value(code) != 0) {
		text = run_text(k);
		mcp_call_fail(k, "git %s failed (exit %lld): %s",
			      k->step == 0 ? "add" : "commit",
			      (long long)json_integer_value(code),
			      text && text[0] ? text : "no output");
		free(text);
		return;
	}
	if (k->step == 0) {
		/* The commit's output is its own. */
		buf_free(&k->out[0]);
		buf_free(&k->out[1]);
		k->dropped[0] = k->dropped[1] = 0;
		k->step = 1;
		send_or_fail(k, RPC_M_CMD_RUN,
			     json_pack("{s:[s, s, s, O]}", "argv", "git",
				       "commit", "-m",
				       json_object_get(k->args, "message")),
			     true);
		return;
	}
	mcp_call_ok(k, json_pack("{s:o, s:o}", "stdout", output_json(k, 0),
				 "stderr", output_json(k, 1)));
}

static int propose_start(struct mcp_call *k)
{
	static const char *const known[] = {"host", "method", "path", NULL};
	bool bad = false;
	const char *host = arg_str(k, "host", &bad);
	const char *method = arg_str(k, "method", &bad);
	const char *path = arg_str(k, "path", &bad);

	if (!args_known(k, known))
		return -EINVAL;
	if (bad || !host || !method || !path) {
		mcp_call_fail(k, "BAD-REQUEST: give host, method and path "
				 "(strings)");
		return -EINVAL;
	}
	return send_or_fail(k, RPC_M_POLICY_PROPOSE,
			    json_pack("{s:s, s:s, s:s}", "host", host, "method",
				      method, "path", path),
			    false);
}

static int status_start(struct mcp_call *k)
{
	static const char *const known[] = {NULL};

	if (!args_known(k, known))
		return -EINVAL;
	return send_or_fail(k, RPC_M_SESSION_STATUS,
			    k->m->operator
				? json_pack("{s:s}", "id", k->m->session)
				: json_object(),
			    false);
}

#define S_PATH                                                                 \
	"\"path\":{\"type\":\"string\",\"description\":\"relative to the "     \
	"workspace (the session's worktree)\"}"

const struct mcp_tool mcp_tools[] = {
    {
	.name = "run_command",
	.title = "Run a command in the sandbox",
	.description =
	    "Run a program in spd's sandbox, in the session's workspace. argv "
	    "is the program and its arguments (never a shell string; to use a "
	    "shell, argv is [\"sh\",\"-c\",...], which the policy may ask a "
	    "person about). The policy decides first: a denied call returns "
	    "an error with the rule and its reason; an ask waits for a "
	    "person. Output is redacted and capped at 1 MiB a stream.",
	.input_schema =
	    "{\"type\":\"object\",\"properties\":{"
	    "\"argv\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},"
	    "\"minItems\":1},"
	    "\"cwd\":{\"type\":\"string\",\"description\":\"a directory "
	    "inside the workspace, relative to it\"},"
	    "\"timeout\":{\"type\":\"integer\",\"minimum\":1,"
	    "\"description\":\"seconds\"},"
	    "\"network\":{\"type\":\"string\",\"enum\":[\"none\","
	    "\"loopback\",\"proxy\",\"host\"],\"description\":\"none; "
	    "loopback: a private lo; proxy: the hosts spd allows, through "
	    "its HTTP proxy; host: the operator's only\"}},"
	    "\"required\":[\"argv\"],\"additionalProperties\":false}",
	.output_schema =
	    "{\"type\":\"object\",\"properties\":{"
	    "\"exit_code\":{\"type\":[\"integer\",\"null\"]},"
	    "\"signal\":{\"type\":\"integer\"},"
	    "\"timed_out\":{\"type\":\"boolean\"},"
	    "\"cancelled\":{\"type\":\"boolean\"},"
	    "\"duration_ms\":{\"type\":[\"integer\",\"null\"]},"
	    "\"stdout\":{\"type\":\"string\"},"
	    "\"stderr\":{\"type\":\"string\"},"
	    "\"bytes_dropped\":{\"type\":\"object\",\"properties\":{"
	    "\"stdout\":{\"type\":\"integer\"},\"stderr\":{\"type\":"
	    "\"integer\"}}},"
	    "\"warnings\":{\"type\":\"array\",\"items\":{\"type\":"
	    "\"string\"}},"
	    "\"error\":{\"type\":\"string\"}},"
	    "\"required\":[\"exit_code\",\"timed_out\",\"stdout\","
	    "\"stderr\"]}",
	.destructive = true,
	.open_world = true,
	.start = run_start,
	.reply = run_reply,
    },
    {
	.name = "read_file",
	.title = "Read a file",
	.description = "Read a file of the workspace through spd (confined "
		       "to the workspace, protected paths refused, secrets "
		       "redacted). UTF-8 text comes back as content, other "
		       "bytes as content_base64.",
	.input_schema = "{\"type\":\"object\",\"properties\":{" S_PATH "},"
			"\"required\":[\"path\"],\"additionalProperties\":"
			"false}",
	.output_schema =
	    "{\"type\":\"object\",\"properties\":{"
	    "\"path\":{\"type\":\"string\"},\"size\":{\"type\":\"integer\"},"
	    "\"encoding\":{\"type\":\"string\",\"enum\":[\"utf-8\","
	    "\"base64\"]},"
	    "\"content\":{\"type\":\"string\"},"
	    "\"content_base64\":{\"type\":\"string\"}},"
	    "\"required\":[\"path\",\"size\",\"encoding\"]}",
	.read_only = true,
	.idempotent = true,
	.start = read_start,
	.reply = reply_plain,
    },
    {
	.name = "write_file",
	.title = "Write a file",
	.description = "Create or replace a file of the workspace with "
		       "content (UTF-8 text), through spd's policy.",
	.input_schema = "{\"type\":\"object\",\"properties\":{" S_PATH ","
			"\"content\":{\"type\":\"string\"}},"
			"\"required\":[\"path\",\"content\"],"
			"\"additionalProperties\":false}",
	.output_schema = "{\"type\":\"object\",\"properties\":{"
			 "\"path\":{\"type\":\"string\"},"
			 "\"size\":{\"type\":\"integer\"}},"
			 "\"required\":[\"path\"]}",
	.destructive = true,
	.idempotent = true,
	.start = write_start,
	.reply = reply_plain,
    },
    {
	.name = "edit_file",
	.title = "Replace one exact string in a file",
	.description =
	    "Replace old_string with new_string in a file of the workspace. "
	    "old_string must occur exactly once (an exact match, whitespace "
	    "included); otherwise nothing is written and the error says how "
	    "often it occurs.",
	.input_schema = "{\"type\":\"object\",\"properties\":{" S_PATH ","
			"\"old_string\":{\"type\":\"string\",\"minLength\":1},"
			"\"new_string\":{\"type\":\"string\"}},"
			"\"required\":[\"path\",\"old_string\",\"new_"
			"string\"],\"additionalProperties\":false}",
	.output_schema = "{\"type\":\"object\",\"properties\":{"
			 "\"path\":{\"type\":\"string\"},"
			 "\"size\":{\"type\":\"integer\"},"
			 "\"replacements\":{\"type\":\"integer\"}},"
			 "\"required\":[\"path\",\"replacements\"]}",
	.destructive = true,
	.start = edit_start,
	.reply = edit_reply,
    },
    {
	.name = "list_dir",
	.title = "List a directory",
	.description = "The entries of a directory of the workspace (the "
		       "workspace itself without path).",
	.input_schema = "{\"type\":\"object\",\"properties\":{" S_PATH "},"
			"\"additionalProperties\":false}",
	.output_schema =
	    "{\"type\":\"object\",\"properties\":{"
	    "\"path\":{\"type\":\"string\"},"
	    "\"entries\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
	    "\"properties\":{\"name\":{\"type\":\"string\"},\"type\":{"
	    "\"type\":\"string\"},\"size\":{\"type\":\"integer\"},"
	    "\"mode\":{\"type\":\"integer\"},\"mtime_ns\":{\"type\":"
	    "\"integer\"}},\"required\":[\"name\",\"type\"]}},"
	    "\"truncated\":{\"type\":\"boolean\"},"
	    "\"skipped\":{\"type\":\"integer\"}},"
	    "\"required\":[\"entries\"]}",
	.read_only = true,
	.idempotent = true,
	.start = list_start,
	.reply = reply_plain,
    },
    {
	.name = "search",
	.title = "Search the workspace",
	.description =
	    "Find lines that contain pattern (a fixed string, or an extended "
	    "regular expression with regex: true) in the workspace's text "
	    "files, or under path; .git is skipped. Runs grep in the "
	    "sandbox, so output is redacted like any run's.",
	.input_schema =
	    "{\"type\":\"object\",\"properties\":{"
	    "\"pattern\":{\"type\":\"string\",\"minLength\":1},"
	    "\"regex\":{\"type\":\"boolean\",\"default\":false},"
	    "\"ignore_case\":{\"type\":\"boolean\",\"default\":false}," S_PATH
	    "},\"required\":[\"pattern\"],\"additionalProperties\":false}",
	.output_schema =
	    "{\"type\":\"object\",\"properties\":{"
	    "\"matches\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
	    "\"properties\":{\"path\":{\"type\":\"string\"},\"line\":{"
	    "\"type\":\"integer\"},\"text\":{\"type\":\"string\"}},"
	    "\"required\":[\"path\",\"line\",\"text\"]}},"
	    "\"truncated\":{\"type\":\"boolean\"}},"
	    "\"required\":[\"matches\",\"truncated\"]}",
	.read_only = true,
	.idempotent = true,
	.start = search_start,
	.reply = search_reply,
    },
    {
	.name = "policy_check",
	.title = "Ask how the policy classifies a call",
	.description =
	    "How spd's policy would classify running argv, or reading or "
	    "writing a path: allow, ask (a person decides) or deny, with the "
	    "rule and its reason. Nothing is run.",
	.input_schema =
	    "{\"type\":\"object\",\"properties\":{"
	    "\"argv\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},"
	    "\"minItems\":1},"
	    "\"read\":{\"type\":\"string\"},\"write\":{\"type\":\"string\"},"
	    "\"cwd\":{\"type\":\"string\"}},"
	    "\"additionalProperties\":false}",
	.output_schema =
	    "{\"type\":\"object\",\"properties\":{"
	    "\"decision\":{\"type\":\"string\",\"enum\":[\"allow\",\"ask\","
	    "\"deny\",\"bad-request\"]},"
	    "\"rule\":{\"type\":\"string\"},\"reason\":{\"type\":"
	    "\"string\"},\"resolved\":{\"type\":\"object\"}},"
	    "\"required\":[\"decision\",\"rule\",\"reason\"]}",
	.read_only = true,
	.idempotent = true,
	.start = policy_start,
	.reply = reply_plain,
    },
    {
	.name = "propose_rule",
	.title = "Ask a person for a request rule",
	.description =
	    "When spd's proxy refused a request (403 naming policy.propose), "
	    "ask a person for a rule that lets the session's runs make it: "
	    "allow = METHOD PATH for a host spd terminates (METHOD upper-case "
	    "or *, PATH a glob from /: * within a segment, ** across). "
	    "Returns the approval's id at once; once a person approves it, "
	    "the session's next request passes.",
	.input_schema = "{\"type\":\"object\",\"properties\":{"
			"\"host\":{\"type\":\"string\",\"minLength\":1},"
			"\"method\":{\"type\":\"string\",\"minLength\":1},"
			"\"path\":{\"type\":\"string\",\"minLength\":1}},"
			"\"required\":[\"host\",\"method\",\"path\"],"
			"\"additionalProperties\":false}",
	.output_schema = "{\"type\":\"object\",\"properties\":{"
			 "\"approval\":{\"type\":\"integer\"}},"
			 "\"required\":[\"approval\"]}",
	.start = propose_start,
	.reply = reply_plain,
    },
    {
	.name = "commit",
	.title = "Commit the work",
	.description =
	    "Commit changes of the workspace on the session's branch: git add "
	    "-A (of paths, when given, else of everything), then git commit "
	    "-m message, both run in the sandbox. spd takes the commit onto "
	    "the session's branch spd/<feature> for the person to review and "
	    "merge. Returns git commit's output, or git's error.",
	.input_schema =
	    "{\"type\":\"object\",\"properties\":{"
	    "\"message\":{\"type\":\"string\",\"minLength\":1,"
	    "\"description\":\"the commit message\"},"
	    "\"paths\":{\"type\":\"array\",\"items\":{\"type\":"
	    "\"string\"},\"description\":\"what to commit, relative to the "
	    "workspace (default: every change)\"}},"
	    "\"required\":[\"message\"],\"additionalProperties\":false}",
	.output_schema = "{\"type\":\"object\",\"properties\":{"
			 "\"stdout\":{\"type\":\"string\"},"
			 "\"stderr\":{\"type\":\"string\"}},"
			 "\"required\":[\"stdout\",\"stderr\"]}",
	.start = commit_start,
	.reply = commit_reply,
    },
    {
	.name = "session_status",
	.title = "The session's state",
	.description = "The session this server acts in: its id, state "
		       "(active, attempt-ended, ended), worktree, branch, "
		       "commands run and calls the policy blocked; in a "
		       "worktree session also the branch's commits since "
		       "the base (newest first) and the paths changed but "
		       "not committed yet.",
	.input_schema = "{\"type\":\"object\",\"properties\":{},"
			"\"additionalProperties\":false}",
	.output_schema =
	    "{\"type\":\"object\",\"properties\":{"
	    "\"id\":{\"type\":\"string\"},\"state\":{\"type\":\"string\"},"
	    "\"worktree\":{\"type\":\"string\"},\"branch\":{\"type\":"
	    "\"string\"},\"commands\":{\"type\":\"integer\"},"
	    "\"policy_blocks\":{\"type\":\"integer\"},"
	    "\"head\":{\"type\":\"string\"},"
	    "\"commits\":{\"type\":\"array\",\"items\":{\"type\":"
	    "\"object\",\"properties\":{\"commit\":{\"type\":\"string\"},"
	    "\"subject\":{\"type\":\"string\"},\"author\":{\"type\":"
	    "\"string\"}}}},"
	    "\"uncommitted\":{\"type\":\"array\",\"items\":{\"type\":"
	    "\"string\"}},"
	    "\"uncommitted_count\":{\"type\":\"integer\"}},"
	    "\"required\":[\"id\",\"state\"]}",
	.read_only = true,
	.idempotent = true,
	.start = status_start,
	.reply = reply_plain,
    },
};

const size_t mcp_tools_n = ARRAY_SIZE(mcp_tools);

/*
 * spctl acp: spd as the ACP (Agent Client Protocol v1) client of an
 * external agent.
 *
 * The agent runs as `spctl agent` runs it (a session's worktree, a fresh
 * broker turn, its own HOME, network mode broker) with one difference: its
 * stdin is a pipe (cmd.run {"stdin": true}), and its stdin and stdout are
 * the protocol channel.  spctl writes to the agent with run.input on the
 * connection that started it and reads the agent's messages from that
 * run's run.output notifications.  Everything the agent asks of its client
 * is done by spd on a connection of its own: files with fs.read/fs.write
 * (confinement, protected paths, redaction, approvals), terminals with
 * cmd.run (the sandbox), permissions with policy.check.  spctl itself
 * reads, writes and runs nothing.
 *
 * Blocking and single-threaded: one agent request is served at a time,
 * which ACP allows (the agent waits for each answer it needs).
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "client/termsafe.h"
#include "cmds.h"
#include "common/buf.h"
#include "proto/rpc.h"

/* The longest message accepted from the agent: a file it writes goes to
 * spd in one frame of at most RPC_FRAME_MAX, so a longer message could
 * never be served; refusing it keeps a runaway agent from growing spctl. */
#define ACP_MESSAGE_MAX RPC_FRAME_MAX
/* Terminals an agent may hold at once: each keeps its output here. */
#define ACP_TERMINALS_MAX 16
/* A terminal's output when the agent sets no outputByteLimit: spd itself
 * stops forwarding a stream at 1 MiB. */
#define ACP_TERMINAL_OUTPUT_MAX (1024 * 1024)
/* The protocol version spoken (ACP's integer MAJOR version). */
#define ACP_PROTOCOL_VERSION 1
/* A prompt line read from spctl's stdin. */
#define ACP_PROMPT_MAX (64 * 1024)

struct acp_term {
	char id[24];
	struct buf out;
	bool truncated;
	json_t *exit; /* {exitCode, signal} */
};

struct acp {
	struct client run; /* carries the agent's cmd.run and run.input */
	long run_id;
	bool started, closed_input, agent_gone, failed;
	int agent_exit;
	struct buf line; /* the agent's stdout not yet a full line */
	bool skipping;	 /* discarding the rest of an oversized message */
	bool operator;
	char *session, *workspace;
	const char *prompt_arg; /* --prompt, or NULL: lines on stdin */
	bool stdin_eof;
	struct buf stdin_buf;
	json_t *prompts; /* texts waiting for the agent to be ready */
	char *acp_session;
	long next_id, init_id, new_id, prompt_id;
	bool in_turn;
	struct acp_term terms[ACP_TERMINALS_MAX];
	unsigned next_term;
	struct ts_stream ts;
	bool yes;
};

/* ---- spd ------------------------------------------------------------------ */

/* Say on stderr that a call waits for a person (approval.requested). */
static void on_side_note(void *data, const char *method, json_t *params)
{
	(void)data;
	if (strcmp(method, rpc_notify_name(RPC_N_APPROVAL_REQUESTED)) == 0) {
		json_int_t id =
		    json_integer_value(json_object_get(params, "id"));
		fprintf(
		    stderr,
		    "spctl acp: waiting for a person: spctl approve %" PRId64
		    " (or spctl deny %" PRId64 ")\n",
		    (int64_t)id, (int64_t)id);
	}
}

struct side_out {
	struct buf *out;
	size_t limit;
	bool truncated;
};

/* A terminal's output: only stdout and stderr text, keeping the last
 * limit bytes as ACP's outputByteLimit asks (cut at a character). */
static void on_run_note(void *data, const char *method, json_t *params)
{
	struct side_out *o = data;
	const char *d = json_string_value(json_object_get(params, "data"));
	size_t n, cut;

	if (strcmp(method, rpc_notify_name(RPC_N_RUN_OUTPUT)) != 0) {
		on_side_note(NULL, method, params);
		return;
	}
	if (!d)
		return;
	n = strlen(d);
	buf_append(o->out, d, n);
	if (o->out->len <= o->limit)
		return;
	cut = o->out->len - o->limit;
	while (cut < o->out->len &&
	       ((unsigned char)o->out->data[cut] & 0xc0) == 0x80)
		cut++;
	buf_consume(o->out, cut);
	o->truncated = true;
}

/* One call on a connection of its own, in the session.  Returns 0 with
 * *ret_res, or -EPROTO with *ret_err, or -errno. */
static int side_call(struct acp *a, enum rpc_method m, json_t *params,
		     client_notify_cb cb, void *data, json_t **ret_res,
		     json_t **ret_err)
{
	struct client c;
	char errbuf[256];
	int r;

	if (a->operator)
		json_object_set_new(params, "session", json_string(a->session));
	r = client_open(&c, errbuf, sizeof(errbuf));
	if (r < 0) {
		json_decref(params);
		fprintf(stderr, "spctl acp: %s\n", errbuf);
		return r;
	}
	r = client_call(&c, m, params, cb, data, ret_res, ret_err);
	client_close(&c);
	return r;
}

/* Journal something refused from the agent before it reached spd. */
static void acp_refused(struct acp *a, const char *what, const char *detail)
{
	struct client c;
	char errbuf[256], d[300];
	json_t *res = NULL, *err = NULL;

	fprintf(stderr, "spctl acp: refused from the agent: %s: ", what);
	ts_fputs(stderr, detail);
	fputc('\n', stderr);
	snprintf(d, sizeof(d), "session %s: %s", a->session ? a->session : "?",
		 detail);
	if (client_open(&c, errbuf, sizeof(errbuf)) < 0 ||
	    client_call(&c, RPC_M_CLIENT_REFUSED,
			json_pack("{s:s, s:s, s:s}", "front", "acp", "what",
				  what, "detail", d),
			NULL, NULL, &res, &err) < 0)
		fprintf(stderr, "spctl acp: cannot journal the refusal\n");
	json_decref(res);
	json_decref(err);
	client_close(&c);
}

/* ---- the agent ---------------------------------------------------------- */

static void agent_send(struct acp *a, json_t *msg)
{
	char *text = json_dumps(msg, JSON_COMPACT);
	char *line = NULL;
	long r = -ENOMEM;

	json_decref(msg);
	if (text && asprintf(&line, "%s\n", text) > 0)
		r = client_send(&a->run, RPC_M_RUN_INPUT,
				json_pack("{s:s}", "data", line));
	if (r < 0) {
		fprintf(stderr, "spctl acp: cannot write to the agent: %s\n",
			strerror((int)-r));
		a->failed = true;
	}
	free(text);
	free(line);
}

static long agent_request(struct acp *a, const char *method, json_t *params)
{
	long id = ++a->next_id;

	agent_send(a, json_pack("{s:s, s:I, s:s, s:o}", "jsonrpc", "2.0", "id",
				(json_int_t)id, "method", method, "params",
				params));
	return id;
}

static void agent_result(struct acp *a, json_t *id, json_t *result)
{
	agent_send(a, json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id,
				"result", result ? result : json_null()));
}

static void agent_error(struct acp *a, json_t *id, int code, const char *fmt,
			...) __attribute__((format(printf, 4, 5)));
static void agent_error(struct acp *a, json_t *id, int code, const char *fmt,
			...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	agent_send(a, json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0",
				"id", id ? id : json_null(), "error", "code",
				code, "message", msg));
}

/* spd's error as the agent's: its code and message. */
static void agent_spd_error(struct acp *a, json_t *id, json_t *err)
{
	json_t *d = json_object_get(err, "data");

	agent_error(a, id, -32603, "%s: %s",
		    json_string_value(json_object_get(d, "code")) ?: "ERROR",
		    json_string_value(json_object_get(err, "message")) ?: "");
}

static void send_next_prompt(struct acp *a)
{
	json_t *text;

	if (a->in_turn || !a->acp_session || a->failed)
		return;
	if (json_array_size(a->prompts) == 0) {
		/* Nothing more will come: the agent reads end of file. */
		if ((a->prompt_arg || a->stdin_eof) && !a->closed_input) {
			a->closed_input = true;
			if (client_send(&a->run, RPC_M_RUN_INPUT,
					json_pack("{s:b}", "close", 1)) < 0)
				a->failed = true;
		}
		return;
	}
	text = json_incref(json_array_get(a->prompts, 0));
	json_array_remove(a->prompts, 0);
	a->in_turn = true;
	a->prompt_id = agent_request(
	    a, "session/prompt",
	    json_pack("{s:s, s:[{s:s, s:o}]}", "sessionId", a->acp_session,
		      "prompt", "type", "text", "text", text));
}

/* An absolute path the agent names, as spd's path relative to the
 * worktree; NULL when it lies outside (ACP paths are absolute). */
static const char *rel_path(struct acp *a, const char *p)
{
	size_t n = strlen(a->workspace);

	if (!p || p[0] != '/' || strncmp(p, a->workspace, n) != 0)
		return NULL;
	if (p[n] == '\0')
		return ".";
	if (p[n] != '/')
		return NULL;
	return p[n + 1] ? p + n + 1 : ".";
}

/* The session's id must be the one the agent was given. */
static bool session_ok(struct acp *a, json_t *id, json_t *params)
{
	const char *s = json_string_value(json_object_get(params, "sessionId"));

	if (a->acp_session && s && strcmp(s, a->acp_session) == 0)
		return true;
	agent_error(a, id, -32602, "unknown sessionId");
	return false;
}

static const char *path_arg(struct acp *a, json_t *id, json_t *params,
			    const char *method)
{
	const char *p = json_string_value(json_object_get(params, "path"));
	const char *rel = rel_path(a, p);

	if (!rel) {
		char d[512];
		snprintf(d, sizeof(d), "%s: path outside the workspace: %s",
			 method, p ? p : "(none)");
		acp_refused(a, "path", d);
		agent_error(a, id, -32602,
			    "PATH-ESCAPE: %s must be an absolute path inside "
			    "the workspace %s",
			    p ? p : "path", a->workspace);
	}
	return rel;
}

static void on_read_text_file(struct acp *a, json_t *id, json_t *params)
{
	const char *rel = path_arg(a, id, params, "fs/read_text_file");
	json_int_t line = json_integer_value(json_object_get(params, "line"));
	json_int_t limit = json_integer_value(json_object_get(params, "limit"));
	json_t *res = NULL, *err = NULL;
	const char *text, *s, *e;

	if (!rel)
		return;
	if (side_call(a, RPC_M_FS_READ,
		      json_pack("{s:s, s:b}", "path", rel, "wait", 1),
		      on_side_note, NULL, &res, &err) < 0) {
		if (err)
			agent_spd_error(a, id, err);
		else
			agent_error(a, id, -32603, "cannot reach spd");
		goto out;
	}
	if (!(text = json_string_value(json_object_get(res, "content")))) {
		agent_error(a, id, -32603, "not a text file");
		goto out;
	}
	/* line is 1-based; limit counts lines from there. */
	s = text;
	for (json_int_t i = 1; line > 1 && i < line && s; i++)
		s = (s = strchr(s, '\n')) ? s + 1 : NULL;
	if (!s)
		s = "";
	e = s + strlen(s);
	if (limit > 0) {
		const char *q = s;
		for (json_int_t i = 0; i < limit && q; i++)
			q = (q = strchr(q, '\n')) ? q + 1 : NULL;
		if (q)
			e = q;
	}
	agent_result(a, id, json_pack("{s:s%}", "content", s, (size_t)(e - s)));
out:
	json_decref(res);
	json_decref(err);
}

static void on_write_text_file(struct acp *a, json_t *id, json_t *params)
{
	const char *rel = path_arg(a, id, params, "fs/write_text_file");
	json_t *content = json_object_get(params, "content");
	json_t *res = NULL, *err = NULL;

	if (!rel)
		return;
	if (!json_is_string(content)) {
		agent_error(a, id, -32602, "content must be a string");
		return;
	}
	if (side_call(a, RPC_M_FS_WRITE,
		      json_pack("{s:s, s:O, s:b}", "path", rel, "content",
				content, "wait", 1),
		      on_side_note, NULL, &res, &err) < 0) {
		if (err)
			agent_spd_error(a, id, err);
		else
			agent_error(a, id, -32603, "cannot reach spd");
	} else {
		agent_result(a, id, json_object());
	}
	json_decref(res);
	json_decref(err);
}

/* ---- permissions ---------------------------------------------------------- */

static int rank(const char *decision)
{
	if (decision && strcmp(decision, "allow") == 0)
		return 0;
	if (decision && strcmp(decision, "ask") == 0)
		return 1;
	return 2; /* deny, bad-request, or no answer: refused */
}

/* spd's policy on one check; the worst decision wins. */
static int check(struct acp *a, json_t *params, json_t **ret_why)
{
	json_t *res = NULL, *err = NULL;
	int r;

	if (side_call(a, RPC_M_POLICY_CHECK, params, NULL, NULL, &res, &err) <
	    0) {
		json_decref(err);
		return 2;
	}
	r = rank(json_string_value(json_object_get(res, "decision")));
	if (r > 0 && !*ret_why)
		*ret_why = json_incref(res);
	json_decref(res);
	return r;
}

/* What the tool call would do, judged by spd's policy: its command
 * (rawInput.command, an argv array or a string split at blanks) and its
 * locations (read for read and search, written for anything else).  A
 * call that names neither is an ask: spctl cannot say what it does. */
static int judge(struct acp *a, json_t *tc, json_t **ret_why)
{
	const char *kind = json_string_value(json_object_get(tc, "kind"));
	json_t *raw = json_object_get(tc, "rawInput");
	json_t *cmd = json_object_get(raw, "command"), *loc, *v;
	bool reads =
	    kind && (strcmp(kind, "read") == 0 || strcmp(kind, "search") == 0);
	int worst = -1, r;
	size_t i;

	if (json_is_string(cmd)) {
		json_t *argv = json_array();
		char *dup = strdup(json_string_value(cmd)), *save = NULL;
		for (char *w = dup ? strtok_r(dup, " \t", &save) : NULL; w;
		     w = strtok_r(NULL, " \t", &save))
			json_array_append_new(argv, json_string(w));
		free(dup);
		cmd = argv;
	} else {
		json_incref(cmd);
	}
	if (json_is_array(cmd) && json_array_size(cmd) > 0) {
		r = check(a, json_pack("{s:O}", "argv", cmd), ret_why);
		worst = r > worst ? r : worst;
	}
	json_decref(cmd);
	json_array_foreach(json_object_get(tc, "locations"), i, loc)
	{
		const char *p = json_string_value(json_object_get(loc, "path"));
		const char *rel = rel_path(a, p);
		if (!rel) {
			worst = 2;
			continue;
		}
		r = check(a, json_pack("{s:s}", reads ? "read" : "write", rel),
			  ret_why);
		worst = r > worst ? r : worst;
	}
	(void)v;
	return worst < 0 ? 1 : worst;
}

static void on_request_permission(struct acp *a, json_t *id, json_t *params)
{
	json_t *tc = json_object_get(params, "toolCall"), *opt, *why = NULL;
	const char *want, *chosen = NULL;
	int d;
	size_t i;

	if (!session_ok(a, id, params))
		return;
	d = judge(a, tc, &why);
	/* Only the once-options: an always-option would let the agent act
	 * later without spd ever seeing the call. An ask cannot be put to
	 * a person through ACP's answer, so it is refused here; the
	 * agent's own file and terminal calls through spd still wait for
	 * spctl approve. */
	want = d == 0 ? "allow_once" : "reject_once";
	json_array_foreach(json_object_get(params, "options"), i, opt)
	{
		const char *k = json_string_value(json_object_get(opt, "kind"));
		if (k && strcmp(k, want) == 0) {
			chosen =
			    json_string_value(json_object_get(opt, "optionId"));
			break;
		}
	}
	fprintf(stderr, "spctl acp: permission for ");
	ts_fputs(stderr, json_string_value(json_object_get(tc, "title"))
			     ?: "a tool call");
	fprintf(stderr, ": %s",
		d == 0	 ? "allowed"
		: d == 1 ? "refused (spd's policy asks a person)"
			 : "denied");
	if (why) {
		fprintf(stderr, " (rule ");
		ts_fputs(stderr, json_string_value(json_object_get(why, "rule"))
				     ?: "?");
		fprintf(stderr, ": ");
		ts_fputs(stderr,
			 json_string_value(json_object_get(why, "reason"))
			     ?: "?");
		fprintf(stderr, ")");
	}
	fputc('\n', stderr);
	json_decref(why);
	if (chosen)
		agent_result(a, id,
			     json_pack("{s:{s:s, s:s}}", "outcome", "outcome",
				       "selected", "optionId", chosen));
	else
		agent_result(
		    a, id,
		    json_pack("{s:{s:s}}", "outcome", "outcome", "cancelled"));
}

/* ---- terminals ------------------------------------------------------------- */

static struct acp_term *term_find(struct acp *a, json_t *id, json_t *params)
{
	const char *t =
	    json_string_value(json_object_get(params, "terminalId"));

	for (unsigned i = 0; t && i < ACP_TERMINALS_MAX; i++)
		if (a->terms[i].id[0] && strcmp(a->terms[i].id, t) == 0)
			return &a->terms[i];
	agent_error(a, id, -32602, "unknown terminalId");
	return NULL;
}

/* terminal/create runs the command to its end in the sandbox (cmd.run)
 * before answering: output and exit status are then there to read. */
static void on_terminal_create(struct acp *a, json_t *id, json_t *params)
{
	const char *cmd = json_string_value(json_object_get(params, "command"));
	json_t *args = json_object_get(params, "args"), *argv, *v, *p;
	json_t *res = NULL, *err = NULL;
	json_int_t lim =
	    json_integer_value(json_object_get(params, "outputByteLimit"));
	struct acp_term *t = NULL;
	struct side_out o;
	const char *cwd = json_string_value(json_object_get(params, "cwd"));
	size_t i;

	for (i = 0; i < ACP_TERMINALS_MAX && !t; i++)
		if (!a->terms[i].id[0])
			t = &a->terms[i];
	if (!cmd || !*cmd) {
		agent_error(a, id, -32602, "command must be a string");
		return;
	}
	if (!t) {
		agent_error(a, id, -32603,
			    "too many terminals (%d); release one",
			    ACP_TERMINALS_MAX);
		return;
	}
	argv = json_pack("[s]", cmd);
	json_array_foreach(args, i, v) json_array_append(argv, v);
	p = json_pack("{s:o, s:b}", "argv", argv, "wait", 1);
	if (cwd) {
		const char *rel = rel_path(a, cwd);
		if (!rel) {
			json_decref(p);
			acp_refused(
			    a, "path",
			    "terminal/create: cwd outside the workspace");
			agent_error(
			    a, id, -32602,
			    "PATH-ESCAPE: cwd must be inside the workspace");
			return;
		}
		json_object_set_new(p, "cwd", json_string(cwd));
	}
	memset(&o, 0, sizeof(o));
	o.out = &t->out;
	o.limit = lim > 0 && lim < ACP_TERMINAL_OUTPUT_MAX
		      ? (size_t)lim
		      : ACP_TERMINAL_OUTPUT_MAX;
	if (side_call(a, RPC_M_CMD_RUN, p, on_run_note, &o, &res, &err) < 0) {
		buf_free(&t->out);
		if (err)
			agent_spd_error(a, id, err);
		else
			agent_error(a, id, -32603, "cannot reach spd");
		goto out;
	}
	t->truncated = o.truncated;
	t->exit = json_object();
	if (json_integer_value(json_object_get(res, "signal")) > 0)
		json_object_set_new(
		    t->exit, "signal",
		    json_sprintf("%d", (int)json_integer_value(
					   json_object_get(res, "signal"))));
	else
		json_object_set(t->exit, "exitCode",
				json_object_get(res, "exit_code"));
	snprintf(t->id, sizeof(t->id), "term-%u", ++a->next_term);
	agent_result(a, id, json_pack("{s:s}", "terminalId", t->id));
out:
	json_decref(res);
	json_decref(err);
}

static void on_terminal(struct acp *a, const char *m, json_t *id,
			json_t *params)
{
	struct acp_term *t = term_find(a, id, params);

	if (!t)
		return;
	if (strcmp(m, "terminal/output") == 0) {
		agent_result(a, id,
			     json_pack("{s:s%, s:b, s:O}", "output",
				       t->out.data ? t->out.data : "",
				       t->out.len, "truncated", t->truncated,
				       "exitStatus", t->exit));
	} else if (strcmp(m, "terminal/wait_for_exit") == 0) {
		agent_result(a, id, json_deep_copy(t->exit));
	} else if (strcmp(m, "terminal/kill") == 0) {
		agent_result(a, id, json_object()); /* it has ended already */
	} else {
		buf_free(&t->out);
		json_decref(t->exit);
		memset(t, 0, sizeof(*t));
		agent_result(a, id, json_object());
	}
}

/* ---- the agent's messages --------------------------------------------------- */

static void show_update(struct acp *a, json_t *params)
{
	json_t *u = json_object_get(params, "update"), *e;
	const char *k = json_string_value(json_object_get(u, "sessionUpdate"));
	size_t i;

	if (!k)
		return;
	if (strcmp(k, "agent_message_chunk") == 0 ||
	    strcmp(k, "agent_thought_chunk") == 0) {
		json_t *c = json_object_get(u, "content");
		const char *t = json_string_value(json_object_get(c, "text"));
		if (t)
			ts_stream_write(STDERR_FILENO, &a->ts, t, strlen(t));
	} else if (strcmp(k, "tool_call") == 0 ||
		   strcmp(k, "tool_call_update") == 0) {
		fprintf(stderr, "\n[tool ");
		ts_fputs(stderr, json_string_value(json_object_get(u, "title")) ?: json_string_value(json_object_get(u, "toolCallId")) ?: "?");
		fprintf(stderr, "] ");
		ts_fputs(stderr,
			 json_string_value(json_object_get(u, "status")) ?: "");
		fputc('\n', stderr);
	} else if (strcmp(k, "plan") == 0) {
		fprintf(stderr, "\n[plan]\n");
		json_array_foreach(json_object_get(u, "entries"), i, e)
		{
			fprintf(stderr, "  - ");
			ts_fputs(stderr, json_string_value(
					     json_object_get(e, "content"))
					     ?: "");
			fprintf(stderr, " (");
			ts_fputs(stderr,
				 json_string_value(json_object_get(e, "status"))
				     ?: "");
			fprintf(stderr, ")\n");
		}
	}
}

static void on_agent_response(struct acp *a, json_t *msg)
{
	json_int_t id = json_integer_value(json_object_get(msg, "id"));
	json_t *res = json_object_get(msg, "result");
	json_t *err = json_object_get(msg, "error");

	if (err) {
		fprintf(stderr, "spctl acp: the agent answered an error: ");
		ts_fputs(stderr,
			 json_string_value(json_object_get(err, "message"))
			     ?: "?");
		fputc('\n', stderr);
		if (id == a->init_id || id == a->new_id)
			a->failed = true;
		if (id == a->prompt_id)
			a->in_turn = false;
	} else if (id == a->init_id) {
		a->new_id =
		    agent_request(a, "session/new",
				  json_pack("{s:s, s:[]}", "cwd", a->workspace,
					    "mcpServers"));
	} else if (id == a->new_id) {
		const char *s =
		    json_string_value(json_object_get(res, "sessionId"));
		if (!s) {
			fprintf(stderr,
				"spctl acp: the agent gave no sessionId\n");
			a->failed = true;
			return;
		}
		a->acp_session = strdup(s);
	} else if (id == a->prompt_id) {
		a->in_turn = false;
		fprintf(stderr, "\nspctl acp: turn ended: ");
		ts_fputs(stderr,
			 json_string_value(json_object_get(res, "stopReason"))
			     ?: "?");
		fputc('\n', stderr);
	}
	send_next_prompt(a);
}

static void on_agent_message(struct acp *a, const char *line, size_t n)
{
	json_error_t je;
	json_t *msg = json_loadb(line, n, 0, &je), *id, *params;
	const char *m;
	char d[256];

	if (!json_is_object(msg)) {
		snprintf(d, sizeof(d), "malformed JSON from the agent: %s",
			 je.text);
		acp_refused(a, "malformed", d);
		json_decref(msg);
		return;
	}
	id = json_object_get(msg, "id");
	m = json_string_value(json_object_get(msg, "method"));
	params = json_object_get(msg, "params");
	if (!m) {
		on_agent_response(a, msg);
	} else if (!id) {
		if (strcmp(m, "session/update") == 0)
			show_update(a, params);
	} else if (strcmp(m, "session/request_permission") == 0) {
		on_request_permission(a, id, params);
	} else if (strcmp(m, "fs/read_text_file") == 0) {
		if (session_ok(a, id, params))
			on_read_text_file(a, id, params);
	} else if (strcmp(m, "fs/write_text_file") == 0) {
		if (session_ok(a, id, params))
			on_write_text_file(a, id, params);
	} else if (strcmp(m, "terminal/create") == 0) {
		if (session_ok(a, id, params))
			on_terminal_create(a, id, params);
	} else if (strcmp(m, "terminal/output") == 0 ||
		   strcmp(m, "terminal/wait_for_exit") == 0 ||
		   strcmp(m, "terminal/kill") == 0 ||
		   strcmp(m, "terminal/release") == 0) {
		if (session_ok(a, id, params))
			on_terminal(a, m, id, params);
	} else {
		snprintf(d, sizeof(d), "unknown method %.100s", m);
		acp_refused(a, "method", d);
		agent_error(a, id, -32601, "method not found: %s", m);
	}
	json_decref(msg);
}

/* The agent's stdout, as run.output delivers it, cut into messages. */
static void on_agent_output(struct acp *a, const char *p, size_t n)
{
	while (n) {
		const char *nl = memchr(p, '\n', n);
		size_t take = nl ? (size_t)(nl - p) : n;

		if (!a->skipping) {
			if (a->line.len + take > ACP_MESSAGE_MAX) {
				char d[128];
				snprintf(
				    d, sizeof(d),
				    "a message over %d bytes from the agent",
				    ACP_MESSAGE_MAX);
				acp_refused(a, "too-large", d);
				buf_reset(&a->line);
				a->skipping = true;
			} else {
				buf_append(&a->line, p, take);
			}
		}
		if (!nl)
			return;
		if (!a->skipping && a->line.len)
			on_agent_message(a, a->line.data, a->line.len);
		buf_reset(&a->line);
		a->skipping = false;
		p = nl + 1;
		n -= take + 1;
	}
}

/* What spd says on the agent's connection. */
static void on_run_message(struct acp *a, json_t *msg)
{
	const char *m = json_string_value(json_object_get(msg, "method"));
	json_t *params = json_object_get(msg, "params"), *err;
	json_t *id = json_object_get(msg, "id");

	if (m && !id) {
		if (strcmp(m, rpc_notify_name(RPC_N_RUN_STARTED)) == 0) {
			a->started = true;
			a->init_id = agent_request(
			    a, "initialize",
			    json_pack(
				"{s:i, s:{s:{s:b, s:b}, s:b}, s:{s:s, s:s}}",
				"protocolVersion", ACP_PROTOCOL_VERSION,
				"clientCapabilities", "fs", "readTextFile", 1,
				"writeTextFile", 1, "terminal", 1, "clientInfo",
				"name", "spctl", "version", "1"));
		} else if (strcmp(m, rpc_notify_name(RPC_N_RUN_OUTPUT)) == 0) {
			const char *s = json_string_value(
			    json_object_get(params, "stream"));
			json_t *d = json_object_get(params, "data");
			if (!json_is_string(d))
				return;
			if (s && strcmp(s, "stdout") == 0)
				on_agent_output(a, json_string_value(d),
						json_string_length(d));
			else
				ts_stream_write(STDERR_FILENO, &a->ts,
						json_string_value(d),
						json_string_length(d));
		} else {
			on_side_note(NULL, m, params);
		}
		return;
	}
	err = json_object_get(msg, "error");
	if (json_integer_value(id) == a->run_id) {
		a->agent_gone = true;
		if (err) {
			fprintf(stderr, "spctl acp: the agent did not run: ");
			ts_fputs(stderr, json_string_value(
					     json_object_get(err, "message"))
					     ?: "?");
			fputc('\n', stderr);
			a->agent_exit = CMD_EXIT_SPD;
		} else {
			a->agent_exit = (int)json_integer_value(json_object_get(
			    json_object_get(msg, "result"), "exit_code"));
		}
	} else if (err) {
		fprintf(stderr,
			"spctl acp: spd refused a write to the agent: ");
		ts_fputs(stderr,
			 json_string_value(json_object_get(err, "message"))
			     ?: "?");
		fputc('\n', stderr);
	}
}

static int read_run(struct acp *a)
{
	struct buf *b = &a->run.in;
	ssize_t r;

	if (buf_reserve(b, 65536) < 0)
		return -ENOMEM;
	r = read(a->run.fd, b->data + b->len, 65536);
	if (r < 0 && errno == EINTR)
		return 0;
	if (r <= 0)
		return -EPIPE;
	b->len += (size_t)r;
	for (;;) {
		char *nl = memchr(b->data, '\n', b->len);
		json_t *msg;

		if (!nl)
			return b->len > 4 * (size_t)RPC_FRAME_MAX ? -EPROTO : 0;
		msg = json_loadb(b->data, (size_t)(nl - b->data), 0, NULL);
		buf_consume(b, (size_t)(nl - b->data) + 1);
		if (msg)
			on_run_message(a, msg);
		json_decref(msg);
	}
}

static void read_stdin(struct acp *a)
{
	char chunk[4096];
	ssize_t r = read(STDIN_FILENO, chunk, sizeof(chunk));
	char *nl;

	if (r <= 0) {
		a->stdin_eof = true;
		if (a->stdin_buf.len)
			json_array_append_new(
			    a->prompts,
			    json_stringn(a->stdin_buf.data, a->stdin_buf.len));
		buf_reset(&a->stdin_buf);
		return;
	}
	buf_append(&a->stdin_buf, chunk, (size_t)r);
	while ((nl = memchr(a->stdin_buf.data, '\n', a->stdin_buf.len))) {
		size_t n = (size_t)(nl - a->stdin_buf.data);
		if (n)
			json_array_append_new(
			    a->prompts, json_stringn(a->stdin_buf.data, n));
		buf_consume(&a->stdin_buf, n + 1);
	}
	if (a->stdin_buf.len > ACP_PROMPT_MAX) {
		fprintf(stderr, "spctl acp: a prompt line over %d bytes; cut\n",
			ACP_PROMPT_MAX);
		json_array_append_new(
		    a->prompts,
		    json_stringn(a->stdin_buf.data, ACP_PROMPT_MAX));
		buf_reset(&a->stdin_buf);
	}
}

static int acp_loop(struct acp *a)
{
	while (!a->agent_gone) {
		struct pollfd p[2] = {
		    {a->run.fd, POLLIN, 0},
		    {a->prompt_arg || a->stdin_eof ? -1 : STDIN_FILENO, POLLIN,
		     0}};
		if (a->failed && !a->closed_input) {
			/* Ending: the agent reads end of file and exits. */
			a->closed_input = true;
			client_send(&a->run, RPC_M_RUN_INPUT,
				    json_pack("{s:b}", "close", 1));
		}
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (p[1].revents) {
			read_stdin(a);
			send_next_prompt(a);
		}
		if (p[0].revents && read_run(a) < 0) {
			fprintf(stderr,
				"spctl acp: spd closed the connection\n");
			return -EPIPE;
		}
	}
	return 0;
}

static int acp_usage(void)
{
	fprintf(stderr, "usage: spctl acp [--session ID] [--prompt TEXT] "
			"[--cap USD] [--yes] -- AGENT [ARGS...]\n");
	return CMD_EXIT_USAGE;
}

int cmd_acp(struct cmd_ctx *ctx, int argc, char **argv)
{
	struct acp a = {.prompts = json_array(), .run_id = -1};
	json_t *params = json_object(), *res, *av;
	char errbuf[256];
	int i, ex = 0;

	(void)ctx;
	a.operator= getenv("SPD_SESSION_TOKEN") == NULL;
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			i++;
			break;
		} else if (strcmp(argv[i], "--session") == 0 && i + 1 < argc) {
			a.session = strdup(argv[++i]);
		} else if (strcmp(argv[i], "--prompt") == 0 && i + 1 < argc) {
			a.prompt_arg = argv[++i];
		} else if (strcmp(argv[i], "--cap") == 0 && i + 1 < argc) {
			char *end;
			double d = strtod(argv[++i], &end);
			if (*end || !(d > 0))
				goto usage;
			json_object_set_new(params, "cap_usd", json_real(d));
		} else if (strcmp(argv[i], "--yes") == 0 ||
			   strcmp(argv[i], "-y") == 0) {
			a.yes = true;
		} else {
			goto usage;
		}
	}
	if (i >= argc || (a.operator&& !a.session))
		goto usage;
	av = json_array();
	for (; i < argc; i++)
		json_array_append_new(av, json_string(argv[i]));
	json_object_set_new(params, "argv", av);
	res = cmd_call(RPC_M_SESSION_STATUS,
		       a.operator? json_pack("{s:s}", "id", a.session)
				 : json_object(),
		       &ex);
	if (!res) {
		ex = ex ? ex : CMD_EXIT_SPD;
		goto out;
	}
	free(a.session);
	a.session = strdup(json_string_value(json_object_get(res, "id")) ?: "");
	a.workspace =
	    strdup(json_string_value(json_object_get(res, "worktree")) ?: "");
	json_decref(res);
	if (!a.workspace || a.workspace[0] != '/') {
		fprintf(stderr,
			"spctl acp: spd did not say where the session works\n");
		ex = CMD_EXIT_SPD;
		goto out;
	}
	if (a.prompt_arg)
		json_array_append_new(a.prompts, json_string(a.prompt_arg));
	if (client_open(&a.run, errbuf, sizeof(errbuf)) < 0) {
		fprintf(stderr, "spctl acp: %s\n", errbuf);
		ex = CMD_EXIT_SPD;
		goto out;
	}
	json_object_set_new(params, "agent", json_true());
	json_object_set_new(params, "stdin", json_true());
	if (a.yes)
		json_object_set_new(params, "yes", json_true());
	if (a.operator)
		json_object_set_new(params, "session", json_string(a.session));
	a.run_id = client_send(&a.run, RPC_M_CMD_RUN, params);
	params = NULL;
	if (a.run_id < 0 || acp_loop(&a) < 0) {
		ex = CMD_EXIT_SPD;
		goto out;
	}
	ts_stream_end(STDERR_FILENO, &a.ts);
	if (a.in_turn) {
		fprintf(stderr,
			"spctl acp: the agent exited in the middle of a turn "
			"(exit %d)\n",
			a.agent_exit);
		acp_refused(&a, "agent-died",
			    "the agent exited in the middle of a turn");
		ex = a.agent_exit ? a.agent_exit : 1;
	} else {
		ex = a.failed && !a.agent_exit ? 1 : a.agent_exit;
	}
out:
	json_decref(params);
	json_decref(a.prompts);
	client_close(&a.run);
	buf_free(&a.line);
	buf_free(&a.stdin_buf);
	for (unsigned k = 0; k < ACP_TERMINALS_MAX; k++) {
		buf_free(&a.terms[k].out);
		json_decref(a.terms[k].exit);
	}
	free(a.session);
	free(a.workspace);
	free(a.acp_session);
	return ex;
usage:
	json_decref(params);
	json_decref(a.prompts);
	free(a.session);
	return acp_usage();
}

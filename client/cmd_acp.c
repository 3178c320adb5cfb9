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
 * is done by spd, each request on a connection of its own: files with
 * fs.read/fs.write (confinement, protected paths, redaction, approvals),
 * terminals with cmd.run (the sandbox; client/acp_term.c), permissions
 * with policy.check (an ask waits for a person: {"ask": true}).  spctl
 * itself reads, writes and runs nothing.
 *
 * A single-threaded poll loop over the agent's connection, stdin (the
 * prompts), and the connection of each request and terminal in flight.
 * SIGINT cancels the turn (ACP's session/cancel); a second one, or one
 * between turns, ends the agent.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/acp.h"
#include "common/util.h"
#include "client/jsonrpc.h"
#include "cmds.h"
#include "proto/rpc.h"

/* The longest message accepted from the agent: a file it writes goes to
 * spd in one frame of at most RPC_FRAME_MAX, so a longer message could
 * never be served; refusing it keeps a runaway agent from growing spctl. */
#define ACP_MESSAGE_MAX RPC_FRAME_MAX
/* The protocol version spoken (ACP's integer MAJOR version). */
#define ACP_PROTOCOL_VERSION 1
/* ACP's "Authentication required" (JSON-RPC error code). */
#define ACP_AUTH_REQUIRED -32000
/* A prompt line read from spctl's stdin. */
#define ACP_PROMPT_MAX (64 * 1024)
/* Chunks of one kind of session/update journaled as one summary at most:
 * a chatty agent streams a token at a time. */
#define ACP_NOTE_CHUNKS_MAX 1000

enum { ACP_K_READ, ACP_K_WRITE, ACP_K_PERM };

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
	(void)sig;
	interrupted++;
}

/* ---- spd ------------------------------------------------------------------ */

void acp_side_note(const char *method, json_t *params)
{
	if (strcmp(method, rpc_notify_name(RPC_N_APPROVAL_REQUESTED)) == 0) {
		json_int_t id =
		    json_integer_value(json_object_get(params, "id"));
		fprintf(stderr, "spctl acp: waiting for a person: ");
		ts_fputs(stderr,
			 json_string_value(json_object_get(params, "reason"))
			     ?: "?");
		fprintf(stderr,
			"; spctl approve %" PRId64 " (or spctl deny %" PRId64
			")\n",
			(int64_t)id, (int64_t)id);
	}
}

int acp_conn_read(struct client *c, void (*fn)(void *data, json_t *msg),
		  void *data)
{
	struct buf *b = &c->in;
	ssize_t r;

	if (buf_reserve(b, 65536) < 0)
		return -ENOMEM;
	r = read(c->fd, b->data + b->len, 65536);
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
			fn(data, msg);
		json_decref(msg);
		if (c->fd < 0)
			return 0; /* closed by fn: its buffer is gone */
	}
}

/* A short blocking call on a connection of its own. */
static int side_call(enum rpc_method m, json_t *params, json_t **ret_res,
		     json_t **ret_err)
{
	struct client c;
	char errbuf[256];
	int r;

	r = client_open(&c, errbuf, sizeof(errbuf));
	if (r < 0) {
		json_decref(params);
		fprintf(stderr, "spctl acp: %s\n", errbuf);
		return r;
	}
	r = client_call(&c, m, params, NULL, NULL, ret_res, ret_err);
	client_close(&c);
	return r;
}

static void journal_client(struct acp *a, enum rpc_method m, const char *what,
			   const char *detail)
{
	json_t *res = NULL, *err = NULL;
	char d[300];

	snprintf(d, sizeof(d), "session %s: %s", a->session ? a->session : "?",
		 detail);
	if (side_call(m,
		      json_pack("{s:s, s:s, s:s}", "front", "acp", "what", what,
				"detail", d),
		      &res, &err) < 0)
		fprintf(stderr, "spctl acp: cannot journal %s\n", what);
	json_decref(res);
	json_decref(err);
}

void acp_refused(struct acp *a, const char *what, const char *detail)
{
	fprintf(stderr, "spctl acp: refused from the agent: %s: ", what);
	ts_fputs(stderr, detail);
	fputc('\n', stderr);
	journal_client(a, RPC_M_CLIENT_REFUSED, what, detail);
}

/* ---- the agent ---------------------------------------------------------- */

static void agent_send(struct acp *a, json_t *msg)
{
	char *text = json_dumps(msg, JSON_COMPACT);
	char *line = NULL;
	long r = -ENOMEM;

	json_decref(msg);
	if (a->agent_gone || a->closed_input) {
		free(text);
		return;
	}
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

	agent_send(a, jsonrpc_request(id, method, params));
	return id;
}

void acp_result(struct acp *a, json_t *id, json_t *result)
{
	agent_send(a, jsonrpc_result(id, result));
}

void acp_error(struct acp *a, json_t *id, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	agent_send(a, jsonrpc_error(id, code, fmt, ap));
	va_end(ap);
}

void acp_spd_error(struct acp *a, json_t *id, json_t *err)
{
	json_t *d = json_object_get(err, "data");

	acp_error(a, id, -32603, "%s: %s",
		  json_string_value(json_object_get(d, "code")) ?: "ERROR",
		  json_string_value(json_object_get(err, "message")) ?: "");
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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
			a->input_closed_ms = now_ms();
			if (client_send(&a->run, RPC_M_RUN_INPUT,
					json_pack("{s:b}", "close", 1)) < 0)
				a->failed = true;
		}
		return;
	}
	text = json_incref(json_array_get(a->prompts, 0));
	json_array_remove(a->prompts, 0);
	a->in_turn = true;
	a->cancelling = false;
	a->turn++;
	a->prompt_id = agent_request(
	    a, "session/prompt",
	    json_pack("{s:s, s:[{s:s, s:o}]}", "sessionId", a->acp_session,
		      "prompt", "type", "text", "text", text));
}

const char *acp_rel_path(struct acp *a, const char *p)
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
	acp_error(a, id, -32602, "unknown sessionId");
	return false;
}

/* ---- requests served on a connection of their own --------------------- */

static void call_free(struct acp_call *k)
{
	client_close(&k->spd);
	json_decref(k->id);
	json_decref(k->checks);
	json_decref(k->asks);
	json_decref(k->options);
	json_decref(k->why);
	free(k->title);
	free(k);
}

/* Start a request: a slot, a connection, the first call to spd.  Returns
 * it, or NULL having answered the agent. */
static struct acp_call *call_start(struct acp *a, int kind, json_t *id,
				   enum rpc_method m, json_t *params)
{
	struct acp_call *k = NULL;
	char errbuf[256];
	int slot = -1;

	for (int i = 0; i < ACP_CALLS_MAX && slot < 0; i++)
		if (!a->calls[i])
			slot = i;
	if (slot < 0) {
		json_decref(params);
		acp_error(a, id, -32603,
			  "LIMIT: %d requests are in flight already",
			  ACP_CALLS_MAX);
		return NULL;
	}
	if (!(k = calloc(1, sizeof(*k)))) {
		json_decref(params);
		acp_error(a, id, -32603, "out of memory");
		return NULL;
	}
	k->a = a;
	k->kind = kind;
	k->id = json_incref(id);
	if (client_open(&k->spd, errbuf, sizeof(errbuf)) < 0) {
		k->spd.fd = -1;
		json_decref(params);
		acp_error(a, id, -32603, "cannot reach spd: %s", errbuf);
		call_free(k);
		return NULL;
	}
	if (a->operator)
		json_object_set_new(params, "session", json_string(a->session));
	k->spd_id = client_send(&k->spd, m, params);
	if (k->spd_id < 0) {
		acp_error(a, id, -32603, "cannot reach spd");
		call_free(k);
		return NULL;
	}
	a->calls[slot] = k;
	return k;
}

static const char *path_arg(struct acp *a, json_t *id, json_t *params,
			    const char *method)
{
	const char *p = json_string_value(json_object_get(params, "path"));
	const char *rel = acp_rel_path(a, p);

	if (!rel) {
		char d[512];
		snprintf(d, sizeof(d), "%s: path outside the workspace: %s",
			 method, p ? p : "(none)");
		acp_refused(a, "path", d);
		acp_error(a, id, -32602,
			  "PATH-ESCAPE: %s must be an absolute path inside "
			  "the workspace %s",
			  p ? p : "path", a->workspace);
	}
	return rel;
}

static void on_read_text_file(struct acp *a, json_t *id, json_t *params)
{
	const char *rel = path_arg(a, id, params, "fs/read_text_file");
	struct acp_call *k;

	if (!rel)
		return;
	k = call_start(a, ACP_K_READ, id, RPC_M_FS_READ,
		       json_pack("{s:s, s:b}", "path", rel, "wait", 1));
	if (k) {
		k->line = json_integer_value(json_object_get(params, "line"));
		k->limit = json_integer_value(json_object_get(params, "limit"));
	}
}

/* fs.read's answer: the lines asked for (line is 1-based; limit counts
 * lines from there). */
static void read_done(struct acp_call *k, json_t *res)
{
	const char *text = json_string_value(json_object_get(res, "content"));
	const char *s, *e;

	if (!text) {
		acp_error(k->a, k->id, -32603, "not a text file");
		return;
	}
	s = text;
	for (json_int_t i = 1; k->line > 1 && i < k->line && s; i++)
		s = (s = strchr(s, '\n')) ? s + 1 : NULL;
	if (!s)
		s = "";
	e = s + strlen(s);
	if (k->limit > 0) {
		const char *q = s;
		for (json_int_t i = 0; i < k->limit && q; i++)
			q = (q = strchr(q, '\n')) ? q + 1 : NULL;
		if (q)
			e = q;
	}
	acp_result(k->a, k->id,
		   json_pack("{s:s%}", "content", s, (size_t)(e - s)));
}

static void on_write_text_file(struct acp *a, json_t *id, json_t *params)
{
	const char *rel = path_arg(a, id, params, "fs/write_text_file");
	json_t *content = json_object_get(params, "content");

	if (!rel)
		return;
	if (!json_is_string(content)) {
		acp_error(a, id, -32602, "content must be a string");
		return;
	}
	call_start(a, ACP_K_WRITE, id, RPC_M_FS_WRITE,
		   json_pack("{s:s, s:O, s:b}", "path", rel, "content", content,
			     "wait", 1));
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

/* The policy checks that say what a tool call would do: its command
 * (rawInput.command, an argv array or a string split at blanks) and its
 * locations (read for read and search, written for anything else).
 * Returns the array, or NULL when a location lies outside the worktree. */
/* The fields of a tool call that a later update or a permission request
 * may carry, each replacing what came before (ACP: a tool_call_update's
 * fields, and a permission's toolCall, update the call's state). */
static const char *const tool_call_fields[] = {"kind", "title", "locations",
					       "rawInput", "status"};

/* Keep what a session/update says of a tool call, for its permission
 * request. */
static void tool_call_remember(struct acp *a, json_t *u)
{
	const char *id = json_string_value(json_object_get(u, "toolCallId"));
	json_t *tc;

	if (!id)
		return;
	if (!a->tool_calls) {
		a->tool_calls = json_object();
		a->tool_call_order = json_array();
	}
	tc = json_object_get(a->tool_calls, id);
	if (!tc) {
		if (json_array_size(a->tool_call_order) >= ACP_TOOL_CALLS_MAX) {
			json_object_del(a->tool_calls,
					json_string_value(json_array_get(
					    a->tool_call_order, 0)));
			json_array_remove(a->tool_call_order, 0);
		}
		tc = json_object();
		json_object_set_new(a->tool_calls, id, tc);
		json_array_append_new(a->tool_call_order, json_string(id));
	}
	for (size_t i = 0; i < ARRAY_SIZE(tool_call_fields); i++) {
		json_t *v = json_object_get(u, tool_call_fields[i]);

		if (v && !json_is_null(v))
			json_object_set(tc, tool_call_fields[i], v);
	}
}

/* A permission request's tool call over the state its updates announced
 * (new reference). */
static json_t *tool_call_merged(struct acp *a, json_t *tc)
{
	const char *id = json_string_value(json_object_get(tc, "toolCallId"));
	json_t *known = id ? json_object_get(a->tool_calls, id) : NULL;
	json_t *m = known ? json_deep_copy(known) : json_object();

	for (size_t i = 0; i < ARRAY_SIZE(tool_call_fields); i++) {
		json_t *v = json_object_get(tc, tool_call_fields[i]);

		if (v && !json_is_null(v))
			json_object_set(m, tool_call_fields[i], v);
	}
	return m;
}

static json_t *tool_checks(struct acp *a, json_t *tc)
{
	const char *kind = json_string_value(json_object_get(tc, "kind"));
	json_t *cmd =
	    json_object_get(json_object_get(tc, "rawInput"), "command");
	json_t *checks = json_array(), *loc;
	bool reads =
	    kind && (strcmp(kind, "read") == 0 || strcmp(kind, "search") == 0);
	size_t i;

	if (json_is_string(cmd)) {
		/* A command line is run by a shell (terminal/create with no
		 * args, acp_term.c): the policy judges that same command. */
		cmd = json_pack("[s, s, O]", "sh", "-c", cmd);
	} else {
		json_incref(cmd);
	}
	if (json_is_array(cmd) && json_array_size(cmd) > 0)
		json_array_append_new(checks, json_pack("{s:O}", "argv", cmd));
	json_decref(cmd);
	json_array_foreach(json_object_get(tc, "locations"), i, loc)
	{
		const char *rel = acp_rel_path(
		    a, json_string_value(json_object_get(loc, "path")));
		if (!rel) {
			json_decref(checks);
			return NULL;
		}
		json_array_append_new(
		    checks, json_pack("{s:s}", reads ? "read" : "write", rel));
	}
	/* No locations: the file its input names (Claude Code's tools'
	 * file_path), judged as a write unless the kind says it reads. */
	if (!json_array_size(json_object_get(tc, "locations"))) {
		const char *fp = json_string_value(json_object_get(
		    json_object_get(tc, "rawInput"), "file_path"));
		const char *rel = fp ? acp_rel_path(a, fp) : NULL;

		if (fp && !rel) {
			json_decref(checks);
			return NULL;
		}
		if (rel)
			json_array_append_new(
			    checks,
			    json_pack("{s:s}", reads ? "read" : "write", rel));
	}
	return checks;
}

/* Answer the permission: only a once-option, never an always-option (it
 * would let the agent act later without spd seeing the call); cancelled
 * when the turn was. */
static void perm_answer(struct acp_call *k, int d, bool cancelled)
{
	const char *want = d == 0 ? "allow_once" : "reject_once";
	const char *chosen = NULL;
	json_t *opt;
	size_t i;

	k->done = true;
	if (cancelled) {
		acp_result(
		    k->a, k->id,
		    json_pack("{s:{s:s}}", "outcome", "outcome", "cancelled"));
		return;
	}
	json_array_foreach(k->options, i, opt)
	{
		const char *kd =
		    json_string_value(json_object_get(opt, "kind"));
		if (kd && strcmp(kd, want) == 0) {
			chosen =
			    json_string_value(json_object_get(opt, "optionId"));
			break;
		}
	}
	fprintf(stderr, "spctl acp: permission for ");
	ts_fputs(stderr, k->title ? k->title : "a tool call");
	fprintf(stderr, ": %s", d == 0 ? "allowed" : "refused");
	if (k->why) {
		fprintf(stderr, " (rule ");
		ts_fputs(stderr,
			 json_string_value(json_object_get(k->why, "rule"))
			     ?: "?");
		fprintf(stderr, ": ");
		ts_fputs(stderr,
			 json_string_value(json_object_get(k->why, "reason"))
			     ?: json_string_value(
				    json_object_get(k->why, "message"))
			     ?: "?");
		fprintf(stderr, ")");
	}
	fputc('\n', stderr);
	if (chosen)
		acp_result(k->a, k->id,
			   json_pack("{s:{s:s, s:s}}", "outcome", "outcome",
				     "selected", "optionId", chosen));
	else /* no option of that kind was offered: nothing is chosen */
		acp_result(
		    k->a, k->id,
		    json_pack("{s:{s:s}}", "outcome", "outcome", "cancelled"));
}

/* The next policy.check of a permission, on the call's connection: first
 * each check classified, then each ask put to a person in turn. */
static void perm_next(struct acp_call *k)
{
	json_t *p;

	if (k->next >= json_array_size(k->asks ? k->asks : k->checks)) {
		if (!k->asks && k->worst == 1) {
			/* Classified: nothing denied, something asks. */
			k->asks = json_array();
			for (size_t i = 0; i < json_array_size(k->checks); i++)
				if (json_is_true(json_object_get(
					json_array_get(k->checks, i), "_ask")))
					json_array_append(
					    k->asks,
					    json_array_get(k->checks, i));
			k->next = 0;
			perm_next(k);
			return;
		}
		perm_answer(k, k->worst == 2 ? 2 : 0, false);
		return;
	}
	p = json_deep_copy(
	    json_array_get(k->asks ? k->asks : k->checks, k->next++));
	json_object_del(p, "_ask");
	if (k->asks)
		json_object_set_new(p, "ask", json_true());
	if (k->a->operator)
		json_object_set_new(p, "session", json_string(k->a->session));
	k->spd_id = client_send(&k->spd, RPC_M_POLICY_CHECK, p);
	if (k->spd_id < 0) {
		k->worst = 2;
		perm_answer(k, 2, false);
	}
}

static void perm_reply(struct acp_call *k, json_t *res, json_t *err)
{
	int r =
	    err ? 2 : rank(json_string_value(json_object_get(res, "decision")));

	if (r > 0 && !k->why)
		k->why = json_incref(err ? err : res);
	if (k->asks) {
		/* A person's answer: approved is allow; refused (or denied
		 * by then) rejects the permission. */
		if (r != 0) {
			json_decref(k->why);
			k->why = json_incref(err ? err : res);
			k->worst = 2;
			perm_answer(k, 2, false);
			return;
		}
	} else {
		if (r == 1)
			json_object_set_new(
			    json_array_get(k->checks, k->next - 1), "_ask",
			    json_true());
		if (r > k->worst)
			k->worst = r;
		if (r == 2) {
			perm_answer(k, 2, false);
			return;
		}
	}
	perm_next(k);
}

static void on_request_permission(struct acp *a, json_t *id, json_t *params)
{
	json_t *tc = tool_call_merged(a, json_object_get(params, "toolCall"));
	json_t *checks = tool_checks(a, tc);
	struct acp_call *k;

	if (!checks || json_array_size(checks) == 0) {
		/* Outside the worktree, or naming neither a command nor a
		 * path: nothing spd could judge or a person approve. */
		struct acp_call tmp = {.a = a,
				       .id = id,
				       .options =
					   json_object_get(params, "options")};
		tmp.title = strdup(
		    json_string_value(json_object_get(tc, "title")) ?: "?");
		json_decref(checks);
		perm_answer(&tmp, 2, false);
		free(tmp.title);
		json_decref(tc);
		return;
	}
	k = call_start(a, ACP_K_PERM, id, RPC_M_POLICY_CHECK,
		       json_deep_copy(json_array_get(checks, 0)));
	if (!k) {
		json_decref(checks);
		json_decref(tc);
		return;
	}
	k->checks = checks;
	k->next = 1;
	k->options = json_incref(json_object_get(params, "options"));
	k->title = strdup(json_string_value(json_object_get(tc, "title"))
			      ?: "a tool call");
	json_decref(tc);
}

/* ---- reading spd's answers -------------------------------------------------- */

static void on_call_msg(void *data, json_t *msg)
{
	struct acp_call *k = data;
	const char *m = json_string_value(json_object_get(msg, "method"));
	json_t *id = json_object_get(msg, "id");
	json_t *res = json_object_get(msg, "result");
	json_t *err = json_object_get(msg, "error");

	if (k->done)
		return;
	if (m && !id) {
		acp_side_note(m, json_object_get(msg, "params"));
		return;
	}
	if (json_integer_value(id) != k->spd_id)
		return;
	if (k->kind == ACP_K_PERM) {
		perm_reply(k, res, err);
		return;
	}
	k->done = true;
	if (err)
		acp_spd_error(k->a, k->id, err);
	else if (k->kind == ACP_K_READ)
		read_done(k, res);
	else
		acp_result(k->a, k->id, json_object());
}

static void call_readable(struct acp_call *k)
{
	if (acp_conn_read(&k->spd, on_call_msg, k) < 0 && !k->done) {
		k->done = true;
		if (k->kind == ACP_K_PERM)
			perm_answer(k, 2, false);
		else
			acp_error(k->a, k->id, -32603,
				  "spd closed the connection");
	}
}

/* ---- the agent's messages --------------------------------------------------- */

/* Journal the summary gathered so far (client.note): the kind of update,
 * how many, and their text's length — never the text. */
static void note_flush(struct acp *a)
{
	char d[160];

	if (!a->note_count)
		return;
	snprintf(d, sizeof(d), "%s x%u, %zu bytes of text", a->note_kind,
		 a->note_count, a->note_bytes);
	journal_client(a, RPC_M_CLIENT_NOTE, "update", d);
	a->note_count = 0;
	a->note_bytes = 0;
	a->note_kind[0] = '\0';
}

static void note_update(struct acp *a, const char *kind, json_t *u)
{
	json_t *c = json_object_get(u, "content");
	const char *t = json_string_value(json_object_get(c, "text"));
	char d[300];

	if (strcmp(kind, "tool_call") == 0 ||
	    strcmp(kind, "tool_call_update") == 0 ||
	    strcmp(kind, "plan") == 0) {
		note_flush(a);
		if (strcmp(kind, "plan") == 0)
			snprintf(
			    d, sizeof(d), "plan, %zu entries",
			    json_array_size(json_object_get(u, "entries")));
		else
			snprintf(
			    d, sizeof(d), "%s %.60s %.80s %.20s", kind,
			    json_string_value(json_object_get(u, "toolCallId"))
				?: "?",
			    json_string_value(json_object_get(u, "title"))
				?: "",
			    json_string_value(json_object_get(u, "status"))
				?: "");
		journal_client(a, RPC_M_CLIENT_NOTE, "update", d);
		return;
	}
	if (strcmp(a->note_kind, kind) != 0 ||
	    a->note_count >= ACP_NOTE_CHUNKS_MAX) {
		note_flush(a);
		snprintf(a->note_kind, sizeof(a->note_kind), "%.39s", kind);
	}
	a->note_count++;
	a->note_bytes += t ? strlen(t) : 0;
}

static void show_update(struct acp *a, json_t *params)
{
	json_t *u = json_object_get(params, "update"), *e;
	const char *k = json_string_value(json_object_get(u, "sessionUpdate"));
	size_t i;

	if (!k)
		return;
	note_update(a, k, u);
	if (strcmp(k, "tool_call") == 0 || strcmp(k, "tool_call_update") == 0)
		tool_call_remember(a, u);
	if (strcmp(k, "agent_message_chunk") == 0 ||
	    strcmp(k, "agent_thought_chunk") == 0) {
		json_t *c = json_object_get(u, "content");
		const char *t = json_string_value(json_object_get(c, "text"));
		if (t)
			ts_stream_write(STDERR_FILENO, &a->ts, t, strlen(t));
	} else if (strcmp(k, "tool_call") == 0 ||
		   strcmp(k, "tool_call_update") == 0) {
		fprintf(stderr, "\n[tool ");
		ts_fputs(stderr,
			 json_string_value(json_object_get(u, "title"))
			     ?: json_string_value(
				    json_object_get(u, "toolCallId"))
			     ?: "?");
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

/* The API-key method among an agent's authMethods ({id, name,
 * description}): the first whose id or name speaks of an API key; NULL
 * when it offers none (a browser login spctl cannot do in a sandbox). */
static const char *auth_method(json_t *methods)
{
	size_t i;
	json_t *m;

	json_array_foreach(methods, i, m)
	{
		const char *id = json_string_value(json_object_get(m, "id"));
		const char *name =
		    json_string_value(json_object_get(m, "name"));

		if (!id)
			continue;
		if (strcasestr(id, "api-key") || strcasestr(id, "apikey") ||
		    strcasestr(id, "api_key") ||
		    (name && (strcasestr(name, "api key") ||
			      strcasestr(name, "api-key"))))
			return id;
	}
	return NULL;
}

static void on_agent_response(struct acp *a, json_t *msg)
{
	json_int_t id = json_integer_value(json_object_get(msg, "id"));
	json_t *res = json_object_get(msg, "result");
	json_t *err = json_object_get(msg, "error");

	if (err && id == a->new_id && !a->auth_tried &&
	    json_integer_value(json_object_get(err, "code")) ==
		ACP_AUTH_REQUIRED) {
		const char *m = auth_method(a->auth_methods);

		a->auth_tried = true;
		if (m) {
			fprintf(stderr,
				"spctl acp: the agent asks to authenticate: "
				"with its method ");
			ts_fputs(stderr, m);
			fprintf(stderr, " (the turn's key, spd's broker)\n");
			a->auth_id =
			    agent_request(a, "authenticate",
					  json_pack("{s:s}", "methodId", m));
			return;
		}
		fprintf(stderr, "spctl acp: the agent asks to authenticate and "
				"offers no API-key method spctl can use\n");
	}
	if (err) {
		fprintf(stderr, "spctl acp: the agent answered an error: ");
		ts_fputs(stderr,
			 json_string_value(json_object_get(err, "message"))
			     ?: "?");
		fputc('\n', stderr);
		if (id == a->init_id || id == a->new_id || id == a->auth_id)
			a->failed = true;
		if (id == a->prompt_id)
			a->in_turn = false;
	} else if (id == a->init_id || id == a->auth_id) {
		if (id == a->init_id) {
			json_t *am = json_object_get(res, "authMethods");

			json_decref(a->auth_methods);
			a->auth_methods =
			    json_is_array(am) ? json_incref(am) : NULL;
		}
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
		const char *stop =
		    json_string_value(json_object_get(res, "stopReason"));

		a->in_turn = false;
		a->last_turn_ok = stop && strcmp(stop, "end_turn") == 0;
		note_flush(a);
		fprintf(stderr, "\nspctl acp: turn ended: ");
		ts_fputs(stderr,
			 json_string_value(json_object_get(res, "stopReason"))
			     ?: "?");
		fputc('\n', stderr);
	}
	send_next_prompt(a);
}

static void on_agent_request(struct acp *a, const char *m, json_t *id,
			     json_t *params)
{
	char d[256];

	if (strcmp(m, "session/request_permission") == 0) {
		if (session_ok(a, id, params))
			on_request_permission(a, id, params);
	} else if (strcmp(m, "fs/read_text_file") == 0) {
		if (session_ok(a, id, params))
			on_read_text_file(a, id, params);
	} else if (strcmp(m, "fs/write_text_file") == 0) {
		if (session_ok(a, id, params))
			on_write_text_file(a, id, params);
	} else if (strncmp(m, "terminal/", 9) == 0 &&
		   (strcmp(m + 9, "create") == 0 ||
		    strcmp(m + 9, "output") == 0 ||
		    strcmp(m + 9, "wait_for_exit") == 0 ||
		    strcmp(m + 9, "kill") == 0 ||
		    strcmp(m + 9, "release") == 0)) {
		if (session_ok(a, id, params))
			acp_term_request(a, m, id, params);
	} else {
		snprintf(d, sizeof(d), "unknown method %.100s", m);
		acp_refused(a, "method", d);
		acp_error(a, id, -32601, "method not found: %s", m);
	}
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
	if (!m)
		on_agent_response(a, msg);
	else if (!id && strcmp(m, "session/update") == 0)
		show_update(a, params);
	else if (id)
		on_agent_request(a, m, id, params);
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
				snprintf(d, sizeof(d),
					 "a message over %d bytes from the "
					 "agent (nothing in it was done)",
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

static void on_run_started(struct acp *a)
{
	a->started = true;
	a->init_id = agent_request(
	    a, "initialize",
	    json_pack("{s:i, s:{s:{s:b, s:b}, s:b}, s:{s:s, s:s}}",
		      "protocolVersion", ACP_PROTOCOL_VERSION,
		      "clientCapabilities", "fs", "readTextFile", 1,
		      "writeTextFile", 1, "terminal", 1, "clientInfo", "name",
		      "spctl", "version", "1"));
}

/* What spd says on the agent's connection. */
static void on_run_message(void *data, json_t *msg)
{
	struct acp *a = data;
	const char *m = json_string_value(json_object_get(msg, "method"));
	json_t *params = json_object_get(msg, "params"), *err;
	json_t *id = json_object_get(msg, "id");

	if (m && !id) {
		if (strcmp(m, rpc_notify_name(RPC_N_RUN_STARTED)) == 0) {
			on_run_started(a);
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
			acp_side_note(m, params);
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

static void read_stdin(struct acp *a)
{
	char chunk[4096];
	ssize_t r = read(STDIN_FILENO, chunk, sizeof(chunk));
	char *nl;

	if (r < 0 && errno == EINTR)
		return;
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

/* ---- cancelling ------------------------------------------------------------- */

/* ACP's cancellation, from the operator's side: session/cancel to the
 * agent, every pending permission answered "cancelled" (its approval
 * withdrawn with its connection), the turn's running terminals killed.
 * The agent then ends the turn with stopReason "cancelled". */
static void cancel_turn(struct acp *a)
{
	unsigned killed = 0, perms = 0;
	char d[128];

	fprintf(stderr, "\nspctl acp: cancelling the turn\n");
	a->cancelling = true;
	agent_send(a, jsonrpc_request(
			  -1, "session/cancel",
			  json_pack("{s:s}", "sessionId", a->acp_session)));
	for (int i = 0; i < ACP_CALLS_MAX; i++) {
		struct acp_call *k = a->calls[i];
		if (k && k->kind == ACP_K_PERM && !k->done) {
			client_close(&k->spd);
			perm_answer(k, 2, true);
			perms++;
		}
	}
	for (int i = 0; i < ACP_TERMINALS_MAX; i++) {
		struct acp_term *t = &a->terms[i];
		if (t->id[0] && t->turn == a->turn && t->spd.fd >= 0) {
			acp_term_kill(t);
			killed++;
		}
	}
	snprintf(d, sizeof(d),
		 "the operator cancelled the turn: %u permission request(s) "
		 "answered cancelled, %u terminal(s) killed",
		 perms, killed);
	journal_client(a, RPC_M_CLIENT_NOTE, "cancel", d);
}

static void on_interrupt(struct acp *a)
{
	interrupted = 0;
	if (a->in_turn && !a->cancelling && a->acp_session) {
		cancel_turn(a);
		return;
	}
	/* Between turns, or a second ^C: the agent reads end of file. */
	fprintf(stderr, "\nspctl acp: ending the agent\n");
	a->failed = true;
}

/* ---- the loop --------------------------------------------------------------- */

static void reap_calls(struct acp *a)
{
	for (int i = 0; i < ACP_CALLS_MAX; i++)
		if (a->calls[i] && a->calls[i]->done) {
			call_free(a->calls[i]);
			a->calls[i] = NULL;
		}
}

enum { FD_RUN, FD_STDIN, FD_CALL, FD_TERM };

/* The agent did not exit once its input closed after its last turn:
 * closing the run's call makes spd end the run (SIGTERM, then its whole
 * sandbox killed after spd.conf's kill-grace; journaled as terminated or
 * killed). */
static void end_run(struct acp *a)
{
	fprintf(stderr,
		"spctl acp: the agent did not exit %d ms after its input "
		"closed: ending it\n",
		ACP_EXIT_GRACE_MS);
	journal_client(a, RPC_M_CLIENT_NOTE, "end",
		       "the agent did not exit after its input closed: its "
		       "run ended by spctl");
	client_close(&a->run);
	a->agent_gone = true;
	a->ended_run = true;
}

static int acp_loop(struct acp *a)
{
	while (!a->agent_gone) {
		struct pollfd p[2 + ACP_CALLS_MAX + ACP_TERMINALS_MAX];
		int what[2 + ACP_CALLS_MAX + ACP_TERMINALS_MAX];
		int idx[2 + ACP_CALLS_MAX + ACP_TERMINALS_MAX];
		int n = 0;

		if (a->failed && !a->closed_input) {
			/* Ending: the agent reads end of file and exits. */
			a->closed_input = true;
			client_send(&a->run, RPC_M_RUN_INPUT,
				    json_pack("{s:b}", "close", 1));
		}
		p[n] = (struct pollfd){a->run.fd, POLLIN, 0};
		what[n++] = FD_RUN;
		if (!a->prompt_arg && !a->stdin_eof) {
			p[n] = (struct pollfd){STDIN_FILENO, POLLIN, 0};
			what[n++] = FD_STDIN;
		}
		for (int i = 0; i < ACP_CALLS_MAX; i++)
			if (a->calls[i]) {
				p[n] = (struct pollfd){a->calls[i]->spd.fd,
						       POLLIN, 0};
				idx[n] = i;
				what[n++] = FD_CALL;
			}
		for (int i = 0; i < ACP_TERMINALS_MAX; i++)
			if (a->terms[i].id[0] && a->terms[i].spd.fd >= 0) {
				p[n] = (struct pollfd){a->terms[i].spd.fd,
						       POLLIN, 0};
				idx[n] = i;
				what[n++] = FD_TERM;
			}
		if (interrupted) {
			on_interrupt(a);
			continue;
		}
		int wait = -1, pr;

		/* The input closed after the last turn: the agent has
		 * ACP_EXIT_GRACE_MS to exit before spctl ends its run. */
		if (a->input_closed_ms && !a->in_turn) {
			long long left =
			    a->input_closed_ms + ACP_EXIT_GRACE_MS - now_ms();

			if (left <= 0) {
				end_run(a);
				return 0;
			}
			wait = (int)left;
		}
		pr = poll(p, (nfds_t)n, wait);
		if (pr < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		for (int j = 0; j < n; j++) {
			if (!p[j].revents)
				continue;
			if (what[j] == FD_RUN) {
				if (acp_conn_read(&a->run, on_run_message, a) <
				    0) {
					fprintf(stderr, "spctl acp: spd closed "
							"the connection\n");
					return -EPIPE;
				}
			} else if (what[j] == FD_STDIN) {
				read_stdin(a);
				send_next_prompt(a);
			} else if (what[j] == FD_CALL && a->calls[idx[j]]) {
				call_readable(a->calls[idx[j]]);
			} else if (what[j] == FD_TERM &&
				   a->terms[idx[j]].spd.fd == p[j].fd) {
				acp_term_readable(&a->terms[idx[j]]);
			}
		}
		reap_calls(a);
	}
	return 0;
}

/* The agent is gone (or spctl ends): whatever it left running is killed,
 * and said so in the journal. */
static void acp_end(struct acp *a)
{
	unsigned killed = 0, calls = 0;
	char d[160];

	for (int i = 0; i < ACP_CALLS_MAX; i++)
		if (a->calls[i]) {
			if (!a->calls[i]->done)
				calls++;
			call_free(a->calls[i]);
			a->calls[i] = NULL;
		}
	for (int i = 0; i < ACP_TERMINALS_MAX; i++) {
		if (a->terms[i].id[0] && a->terms[i].spd.fd >= 0)
			killed++;
		acp_term_free(&a->terms[i]);
	}
	note_flush(a);
	if (a->in_turn) {
		fprintf(stderr,
			"spctl acp: the agent exited in the middle of a turn "
			"(exit %d)\n",
			a->agent_exit);
		snprintf(d, sizeof(d),
			 "the agent exited in the middle of a turn (exit %d); "
			 "%u terminal(s) killed, %u request(s) dropped",
			 a->agent_exit, killed, calls);
		acp_refused(a, "agent-died", d);
	} else if (killed || calls) {
		snprintf(d, sizeof(d),
			 "the agent ended: %u terminal(s) killed, %u "
			 "request(s) dropped",
			 killed, calls);
		journal_client(a, RPC_M_CLIENT_NOTE, "ended", d);
	}
}

static int acp_usage(void)
{
	fprintf(stderr, "usage: spctl acp [--session ID] [--prompt TEXT] "
			"[--cap USD] [--yes] -- AGENT [ARGS...]\n");
	return CMD_EXIT_USAGE;
}

/* The session's id and worktree.  Returns 0 or an exit code. */
static int acp_session(struct acp *a)
{
	int ex = 0;
	json_t *res = cmd_call(RPC_M_SESSION_STATUS,
			       a->operator? json_pack("{s:s}", "id", a->session)
					  : json_object(),
			       &ex);

	if (!res)
		return ex ? ex : CMD_EXIT_SPD;
	free(a->session);
	a->session =
	    strdup(json_string_value(json_object_get(res, "id")) ?: "");
	a->workspace =
	    strdup(json_string_value(json_object_get(res, "worktree")) ?: "");
	json_decref(res);
	if (!a->workspace || a->workspace[0] != '/') {
		fprintf(stderr,
			"spctl acp: spd did not say where the session works\n");
		return CMD_EXIT_SPD;
	}
	return 0;
}

/* Parse the options into a and params.  Returns the index of AGENT, or
 * -1 on a usage error. */
static int acp_args(struct acp *a, json_t *params, int argc, char **argv)
{
	int i;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			i++;
			break;
		} else if (strcmp(argv[i], "--session") == 0 && i + 1 < argc) {
			free(a->session);
			a->session = strdup(argv[++i]);
		} else if (strcmp(argv[i], "--prompt") == 0 && i + 1 < argc) {
			a->prompt_arg = argv[++i];
		} else if (strcmp(argv[i], "--cap") == 0 && i + 1 < argc) {
			char *end;
			double d = strtod(argv[++i], &end);
			if (*end || !(d > 0))
				return -1;
			json_object_set_new(params, "cap_usd", json_real(d));
		} else if (strcmp(argv[i], "--yes") == 0 ||
			   strcmp(argv[i], "-y") == 0) {
			a->yes = true;
		} else {
			return -1;
		}
	}
	if (i >= argc || (a->operator&& !a->session))
		return -1;
	return i;
}

int cmd_acp(struct cmd_ctx *ctx, int argc, char **argv)
{
	struct acp a = {.prompts = json_array(), .run_id = -1};
	json_t *params = json_object(), *av;
	struct sigaction sa = {.sa_handler = on_sigint};
	char errbuf[256];
	int i, ex = 0;

	(void)ctx;
	for (unsigned k = 0; k < ACP_TERMINALS_MAX; k++) {
		a.terms[k].a = &a;
		a.terms[k].spd.fd = -1;
	}
	a.run.fd = -1;
	a.operator= getenv("SPD_SESSION_TOKEN") == NULL;
	if ((i = acp_args(&a, params, argc, argv)) < 0) {
		json_decref(params);
		json_decref(a.prompts);
		free(a.session);
		return acp_usage();
	}
	av = json_array();
	for (; i < argc; i++)
		json_array_append_new(av, json_string(argv[i]));
	json_object_set_new(params, "argv", av);
	if ((ex = acp_session(&a)))
		goto out;
	if (a.prompt_arg)
		json_array_append_new(a.prompts, json_string(a.prompt_arg));
	if (client_open(&a.run, errbuf, sizeof(errbuf)) < 0) {
		fprintf(stderr, "spctl acp: %s\n", errbuf);
		ex = CMD_EXIT_SPD;
		goto out;
	}
	/* ^C cancels the turn (no SA_RESTART: poll returns EINTR); writes
	 * to a connection spd closed fail instead of killing spctl. */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
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
		acp_end(&a);
		goto out;
	}
	ts_stream_end(STDERR_FILENO, &a.ts);
	acp_end(&a);
	if (a.in_turn)
		ex = a.agent_exit ? a.agent_exit : 1;
	else if (a.ended_run)
		/* The turns were done: their result, not the kill's. */
		ex = a.failed || !a.last_turn_ok ? 1 : 0;
	else
		ex = a.failed && !a.agent_exit ? 1 : a.agent_exit;
out:
	json_decref(params);
	json_decref(a.prompts);
	json_decref(a.tool_calls);
	json_decref(a.tool_call_order);
	client_close(&a.run);
	buf_free(&a.line);
	buf_free(&a.stdin_buf);
	free(a.session);
	free(a.workspace);
	free(a.acp_session);
	json_decref(a.auth_methods);
	return ex;
}

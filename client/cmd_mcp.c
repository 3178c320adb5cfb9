/*
 * spctl mcp: an MCP (Model Context Protocol) server over stdio.
 *
 * Any MCP-capable agent gets spd's tools this way: newline-delimited
 * JSON-RPC 2.0 on stdin and stdout (stdout carries nothing but protocol;
 * what a person should read goes to stderr), revision 2025-11-25 and the
 * two before it.  spctl stays thin: each tools/call becomes one or two
 * requests on a connection of its own to spd, so that spd's policy, its
 * approvals, the sandbox, the redactor and the journal see every call as
 * they see spctl run's, and closing that connection is how a call is
 * cancelled (spd kills the run's whole pid namespace when its client goes
 * away).  Nothing here reads, writes or searches a file itself.
 *
 * A single-threaded poll loop: stdin, and the spd connection of each call
 * in flight.  The tools themselves (their requests, results and schemas)
 * are cmd_mcp_tools.c; what the two share is cmd_mcp.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "client/b64.h"
#include "client/jsonrpc.h"
#include "client/termsafe.h"
#include "cmds.h"
#include "common/utf8.h"
#include "common/util.h"
#include "proto/rpc.h"
#include "client/cmd_mcp.h"

/* The longest message accepted from the MCP client.  Anything a tool call
 * carries is forwarded to spd in one frame of at most RPC_FRAME_MAX, so a
 * longer message could never be carried out; refusing it here keeps a
 * runaway client from growing spctl's buffer without bound. */
#define MCP_MESSAGE_MAX RPC_FRAME_MAX
/* What one tool result keeps of each output stream of a run: spd itself
 * stops forwarding at 1 MiB a stream, and a result must still fit the
 * client's message limits. */
#define MCP_OUTPUT_MAX (1024 * 1024)
/* Text of one progress notification: enough for a screenful of output,
 * small enough that a chatty run does not flood the client. */
#define MCP_PROGRESS_TEXT_MAX 4096
/* How often a call that waits for a person says so again (progress
 * notifications keep a client's request timeout from firing, and remind
 * whoever watches which approval frees it). */
#define MCP_WAIT_PROGRESS_MS 5000
/* How long spctl mcp still waits, after its input ended, for the calls in
 * flight to finish and be answered: a client that writes its requests and
 * closes stdin (a script, `... | spctl mcp`) wants their answers, and a
 * build or a test run takes minutes.  Past it they are cancelled, so a
 * server whose client has gone does not linger; a client that wants them
 * cancelled sooner says notifications/cancelled or ends spctl. */
#define MCP_EOF_WAIT_MS (5 * 60 * 1000)

/* The revisions spoken, newest first (the spec's version negotiation: a
 * revision the client asks for is answered with itself, another with the
 * newest). */
static const char *const mcp_versions[] = {"2025-11-25", "2025-06-18",
					   "2025-03-26"};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- writing to the client --------------------------------------------- */

/* One message, one line, one write: a message is never interleaved with
 * another.  A client that stopped reading is gone. */
static void mcp_send(struct mcp *m, json_t *msg)
{
	char *s = json_dumps(msg, JSON_COMPACT);
	size_t n, off = 0;

	json_decref(msg);
	if (!s || m->out_broken) {
		free(s);
		return;
	}
	n = strlen(s);
	s[n++] = '\n'; /* the NUL's place: json_dumps' buffer is n+1 */
	while (off < n) {
		ssize_t w = write(m->out_fd, s + off, n - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			m->out_broken = true;
			break;
		}
		off += (size_t)w;
	}
	free(s);
}

static void mcp_result(struct mcp *m, json_t *id, json_t *result)
{
	mcp_send(m, jsonrpc_result(id, result));
}

/* A protocol error; id NULL answers with "id": null (the request's id
 * could not be read). */
static void mcp_error(struct mcp *m, json_t *id, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void mcp_error(struct mcp *m, json_t *id, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	mcp_send(m, jsonrpc_error(id, code, fmt, ap));
	va_end(ap);
}

static void mcp_notify(struct mcp *m, const char *method, json_t *params)
{
	mcp_send(m, jsonrpc_request(-1, method, params));
}

/* True when the negotiated revision is at least v (dates compare as
 * strings). */
static bool mcp_at_least(const struct mcp *m, const char *v)
{
	return m->version && strcmp(m->version, v) >= 0;
}

/* Text that JSON can carry: invalid UTF-8 bytes become U+FFFD. */
json_t *mcp_text_json(const char *p, size_t n)
{
	struct buf b = {0};
	json_t *s;

	if (utf8_valid(p, n))
		return json_stringn(p, n);
	for (size_t i = 0; i < n;) {
		size_t k = 1;
		while (k <= 4 && i + k <= n && !utf8_valid(p + i, k))
			k++;
		if (k <= 4 && i + k <= n) {
			buf_append(&b, p + i, k);
			i += k;
		} else {
			buf_append(&b, "\xef\xbf\xbd", 3);
			i++;
		}
	}
	s = json_stringn(b.data ? b.data : "", b.len);
	buf_free(&b);
	return s;
}

/* ---- finishing a call ---------------------------------------------------- */

static void call_free(struct mcp_call *k)
{
	if (!k)
		return;
	client_close(&k->spd);
	json_decref(k->id);
	json_decref(k->progress);
	json_decref(k->args);
	json_decref(k->approval_note);
	buf_free(&k->out[0]);
	buf_free(&k->out[1]);
	free(k->edit_text);
	free(k);
}

/* The tool's result: structured (ownership taken) and the same JSON as a
 * text block, for clients that read only content. */
void mcp_call_ok(struct mcp_call *k, json_t *structured)
{
	char *text = json_dumps(structured, JSON_COMPACT | JSON_SORT_KEYS);
	json_t *res =
	    json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text",
		      "text", text ? text : "{}", "isError", 0);

	free(text);
	if (mcp_at_least(k->m, "2025-06-18"))
		json_object_set(res, "structuredContent", structured);
	json_decref(structured);
	mcp_result(k->m, k->id, res);
	k->done = true;
}

/* A tool error: the call reached the tool and failed (bad arguments, a
 * refusal by policy, a path outside the workspace).  The model reads the
 * text and may correct itself; it is not a protocol error. */
void mcp_call_fail(struct mcp_call *k, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	mcp_result(k->m, k->id,
		   json_pack("{s:[{s:s, s:o}], s:b}", "content", "type", "text",
			     "text", mcp_text_json(msg, strlen(msg)), "isError",
			     1));
	k->done = true;
}

/* spd's error response as a tool error: its symbolic code, its message,
 * and for a refusal by policy the rule and its reason, each said once:
 * spd's message already holds them ("REASON (RULE)"), and a model that
 * reads a reason twice weighs it twice. */
void mcp_call_fail_spd(struct mcp_call *k, json_t *err)
{
	json_t *d = json_object_get(err, "data");
	const char *code = json_string_value(json_object_get(d, "code"));
	const char *msg = json_string_value(json_object_get(err, "message"));
	const char *rule = json_string_value(json_object_get(d, "rule"));
	const char *reason = json_string_value(json_object_get(d, "reason"));
	char tail[1024] = "";

	if (!msg)
		msg = "";
	if (rule && !strstr(msg, rule) && reason && *reason &&
	    !strstr(msg, reason))
		snprintf(tail, sizeof(tail), " (rule %s: %s)", rule, reason);
	else if (rule && !strstr(msg, rule))
		snprintf(tail, sizeof(tail), " (rule %s)", rule);
	else if (reason && *reason && !strstr(msg, reason))
		snprintf(tail, sizeof(tail), " (%s)", reason);
	mcp_call_fail(k, "%s: %s%s", code ? code : "ERROR", msg, tail);
}

/* ---- talking to spd ------------------------------------------------------ */

/* Send method(params) on the call's connection (ownership of params
 * taken; the token and, for the operator, the session are added).
 * Returns 0 or -errno. */
int mcp_call_send(struct mcp_call *k, enum rpc_method method, json_t *params,
		  bool in_session)
{
	long id;

	if (params && in_session && k->m->operator)
		json_object_set_new(params, "session",
				    json_string(k->m->session));
	id = client_send(&k->spd, method, params);
	if (id < 0)
		return (int)id;
	k->spd_id = id;
	return 0;
}

/* A short blocking call on a connection of its own (approval.decide while
 * the call it decides waits on another).  Returns 0 or -errno. */
static int side_call(enum rpc_method method, json_t *params, json_t **ret_err)
{
	struct client c;
	char errbuf[256];
	json_t *res = NULL;
	int r;

	r = client_open(&c, errbuf, sizeof(errbuf));
	if (r < 0) {
		json_decref(params);
		fprintf(stderr, "spctl mcp: %s\n", errbuf);
		return r;
	}
	r = client_call(&c, method, params, NULL, NULL, &res, ret_err);
	json_decref(res);
	client_close(&c);
	return r;
}

/* Journal what was refused from the client before anything reached spd
 * (client.refused): a malformed message, an unknown method, one over the
 * limit.  A failure to record it is said on stderr; the client's error
 * has been sent already. */
static void mcp_refused(struct mcp *m, const char *what, const char *detail)
{
	json_t *err = NULL;
	char d[200];

	snprintf(d, sizeof(d), "session %s: %s", m->session ? m->session : "?",
		 detail);
	if (side_call(RPC_M_CLIENT_REFUSED,
		      json_pack("{s:s, s:s, s:s}", "front", "mcp", "what", what,
				"detail", d),
		      &err) < 0) {
		fprintf(stderr, "spctl mcp: cannot journal the refusal\n");
		json_decref(err);
	}
}

/* ---- progress and asks --------------------------------------------------- */

static void call_progress(struct mcp_call *k, const char *text, size_t n)
{
	json_t *p;

	if (!k->progress)
		return;
	if (n > MCP_PROGRESS_TEXT_MAX)
		n = MCP_PROGRESS_TEXT_MAX;
	/* Monotonic, as the spec wants; no total: a run's length is not
	 * known. */
	k->progress_n += 1;
	p = json_pack("{s:O, s:f, s:o}", "progressToken", k->progress,
		      "progress", k->progress_n, "message",
		      mcp_text_json(text, n));
	mcp_notify(k->m, "notifications/progress", p);
}

static void wait_progress(struct mcp_call *k)
{
	char msg[768];
	json_t *o = k->approval_note;

	char *rule = ts_strdup(json_string_value(json_object_get(o, "rule"))
				   ?: "?"),
	     *reason = ts_strdup(json_string_value(json_object_get(o, "reason"))
				     ?: "?");

	snprintf(msg, sizeof(msg),
		 "waiting for a person: spctl approve %" PRId64
		 " (or spctl deny %" PRId64 "); rule %s: %s",
		 (int64_t)k->approval, (int64_t)k->approval, rule ? rule : "?",
		 reason ? reason : "?");
	free(rule);
	free(reason);
	call_progress(k, msg, strlen(msg));
	k->next_wait_progress_ms = now_ms() + MCP_WAIT_PROGRESS_MS;
}

/* What the person is asked, in one line of plain text: through termsafe
 * (the reason and the call are the agent's words: a U+202E in them would
 * make the client show the person another call than the one approved). */
static char *ask_message(struct mcp_call *k)
{
	json_t *o = json_object_get(k->approval_note, "object");
	char *obj = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS), *s = NULL,
	     *safe;

	if (asprintf(
		&s,
		"spd asks before %s in session %s: %s (rule %s). "
		"The call: %s. Allow it, once?",
		k->tool->name, k->m->session,
		json_string_value(json_object_get(k->approval_note, "reason"))
		    ?: "?",
		json_string_value(json_object_get(k->approval_note, "rule"))
		    ?: "?",
		obj ? obj : "?") < 0)
		s = NULL;
	free(obj);
	safe = s ? ts_strdup(s) : NULL;
	free(s);
	return safe;
}

/* spd made the call wait for a person (approval.requested on the call's
 * own connection).  With the operator token and a client that takes form
 * elicitations, the person at the client decides; otherwise `spctl
 * approve` does, and the client hears why it waits.  An agent's client
 * never decides: the agent is the party an ask guards against, and an
 * agent's host could answer its own elicitations. */
static void call_asked(struct mcp_call *k, json_t *note)
{
	struct mcp *m = k->m;

	json_decref(k->approval_note);
	k->approval_note = json_incref(note);
	k->approval = json_integer_value(json_object_get(note, "id"));
	fprintf(stderr, "spctl mcp: %s waits for approval %" PRId64 ": ",
		k->tool->name, (int64_t)k->approval);
	ts_fputs(stderr,
		 json_string_value(json_object_get(note, "reason")) ?: "?");
	fprintf(stderr, " (spctl approve %" PRId64 ")\n", (int64_t)k->approval);
	if (m->operator&& m->elicit) {
		char *msg = ask_message(k);
		json_t *params = json_pack(
		    "{s:o, s:{s:s, s:{s:{s:s, s:s, s:s}}, s:[s]}}", "message",
		    msg ? mcp_text_json(msg, strlen(msg)) : json_string("?"),
		    "requestedSchema", "type", "object", "properties",
		    "approve", "type", "boolean", "title",
		    "Allow this call once", "description",
		    "spd runs it once, exactly as shown; no is the default",
		    "required", "approve");

		free(msg);
		if (mcp_at_least(m, "2025-11-25"))
			json_object_set_new(params, "mode",
					    json_string("form"));
		k->elicit_id = ++m->next_out_id;
		mcp_send(m, jsonrpc_request(k->elicit_id, "elicitation/create",
					    params));
		return;
	}
	wait_progress(k);
}

/* The client's answer to an elicitation: decide the approval in spd (the
 * call waiting there then goes on or fails with APPROVAL-REFUSED). */
static void call_elicited(struct mcp_call *k, json_t *result, json_t *error)
{
	const char *action =
	    json_string_value(json_object_get(result, "action"));
	bool yes = action && strcmp(action, "accept") == 0 &&
		   json_is_true(json_object_get(
		       json_object_get(result, "content"), "approve"));
	json_t *err = NULL;
	int r;

	k->elicit_id = 0;
	if (error) {
		/* The client could not ask: a person decides with spctl
		 * approve instead. */
		fprintf(stderr,
			"spctl mcp: the client could not ask (elicitation "
			"failed); approval %" PRId64 " waits for spctl "
			"approve\n",
			(int64_t)k->approval);
		wait_progress(k);
		return;
	}
	r = side_call(RPC_M_APPROVAL_DECIDE,
		      json_pack("{s:I, s:b, s:s}", "id", k->approval, "approve",
				yes, "why",
				yes ? "approved in the MCP client"
				: action && strcmp(action, "decline") == 0
				    ? "declined in the MCP client"
				    : "the person in the MCP client did not "
				      "answer"),
		      &err);
	if (r == -EPROTO) {
		/* Decided already (spctl approve was quicker): spd's answer
		 * to the waiting call says which way. */
		json_decref(err);
	} else if (r < 0) {
		mcp_call_fail(k,
			      "INTERNAL: cannot record the decision in spd: %s",
			      strerror(-r));
	}
}

/* ---- reading spd's messages for a call ------------------------------------ */

static void run_output(struct mcp_call *k, json_t *params)
{
	const char *stream =
	    json_string_value(json_object_get(params, "stream"));
	int s = stream && strcmp(stream, "stderr") == 0 ? 1 : 0;
	json_t *d = json_object_get(params, "data");
	unsigned char *bin = NULL;
	const char *p;
	size_t n, room;

	if (json_is_string(d)) {
		p = json_string_value(d);
		n = json_string_length(d);
	} else if (json_is_string(d = json_object_get(params, "data_b64"))) {
		bin =
		    b64_decode(json_string_value(d), json_string_length(d), &n);
		if (!bin)
			return;
		p = (const char *)bin;
	} else {
		return;
	}
	room = MCP_OUTPUT_MAX - k->out[s].len;
	buf_append(&k->out[s], p, n < room ? n : room);
	if (n > room)
		k->dropped[s] += n - room;
	/* search reads grep's output; only a run's is news to the client. */
	if (k->tool->reply != NULL && strcmp(k->tool->name, "run_command") == 0)
		call_progress(k, p, n);
	free(bin);
}

static void call_message(struct mcp_call *k, json_t *msg)
{
	json_t *vid = json_object_get(msg, "id");
	const char *method = json_string_value(json_object_get(msg, "method"));

	if (method && !vid) {
		json_t *params = json_object_get(msg, "params");
		if (strcmp(method, rpc_notify_name(RPC_N_RUN_OUTPUT)) == 0)
			run_output(k, params);
		else if (strcmp(method,
				rpc_notify_name(RPC_N_APPROVAL_REQUESTED)) == 0)
			call_asked(k, params);
		return;
	}
	if (json_is_integer(vid) && json_integer_value(vid) == k->spd_id) {
		json_t *err = json_object_get(msg, "error");
		k->tool->reply(k, err ? NULL : json_object_get(msg, "result"),
			       err);
		return;
	}
	if (json_is_null(vid) && json_object_get(msg, "error"))
		/* spd refused the frame itself (LIMIT, FRAME-TOO-LARGE). */
		mcp_call_fail_spd(k, json_object_get(msg, "error"));
}

/* Read what spd sent on the call's connection and act on each line. */
static void call_readable(struct mcp_call *k)
{
	struct buf *b = &k->spd.in;
	ssize_t r;

	if (buf_reserve(b, 65536) < 0) {
		mcp_call_fail(k, "INTERNAL: out of memory");
		return;
	}
	r = read(k->spd.fd, b->data + b->len, 65536);
	if (r < 0 && errno == EINTR)
		return;
	if (r <= 0) {
		mcp_call_fail(k, "INTERNAL: spd closed the connection before "
				 "answering");
		return;
	}
	b->len += (size_t)r;
	while (!k->done) {
		char *nl = memchr(b->data, '\n', b->len);
		json_error_t je;
		json_t *msg;

		if (!nl) {
			if (b->len > 2 * RPC_FRAME_MAX)
				mcp_call_fail(k,
					      "INTERNAL: spd sent a line over "
					      "the frame limit");
			break;
		}
		msg = json_loadb(b->data, (size_t)(nl - b->data),
				 JSON_ALLOW_NUL, &je);
		buf_consume(b, (size_t)(nl - b->data) + 1);
		if (msg)
			call_message(k, msg);
		json_decref(msg);
	}
}

/* ---- MCP methods ---------------------------------------------------------- */

static void on_initialize(struct mcp *m, json_t *id, json_t *params)
{
	const char *asked =
	    json_string_value(json_object_get(params, "protocolVersion"));
	json_t *el = json_object_get(json_object_get(params, "capabilities"),
				     "elicitation");

	m->version = mcp_versions[0];
	for (size_t i = 0; asked && i < ARRAY_SIZE(mcp_versions); i++)
		if (strcmp(asked, mcp_versions[i]) == 0)
			m->version = mcp_versions[i];
	/* Form mode: declared as "form", or an empty elicitation object
	 * (what 2025-06-18 clients send). */
	m->elicit = json_is_object(el) && (json_object_get(el, "form") ||
					   !json_object_get(el, "url"));
	m->initialized = true;
	mcp_result(
	    m, id,
	    json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, s:s}",
		      "protocolVersion", m->version, "capabilities", "tools",
		      "listChanged", 0, "serverInfo", "name", "spctl-mcp",
		      "title", "spd (sandboxed, policy-checked tools)",
		      "version", SPD_VERSION, "instructions",
		      "Every tool runs through spd: its policy may deny a "
		      "call (the error names the rule) or make it wait for a "
		      "person; commands run in a sandbox without network "
		      "unless asked; secrets in output are redacted."));
}

static json_t *tool_json(struct mcp *m, const struct mcp_tool *t)
{
	json_t *sc = json_object_get(m->schemas, t->name);
	json_t *o = json_pack(
	    "{s:s, s:s, s:O, s:{s:s, s:b, s:b, s:b, s:b}}", "name", t->name,
	    "description", t->description, "inputSchema",
	    json_object_get(sc, "input"), "annotations", "title", t->title,
	    "readOnlyHint", t->read_only, "destructiveHint", t->destructive,
	    "idempotentHint", t->idempotent, "openWorldHint", t->open_world);

	if (mcp_at_least(m, "2025-06-18")) {
		json_object_set_new(o, "title", json_string(t->title));
		json_object_set(o, "outputSchema",
				json_object_get(sc, "output"));
	}
	return o;
}

static void on_tools_list(struct mcp *m, json_t *id)
{
	json_t *arr = json_array();

	for (size_t i = 0; i < mcp_tools_n; i++)
		json_array_append_new(arr, tool_json(m, &mcp_tools[i]));
	mcp_result(m, id, json_pack("{s:o}", "tools", arr));
}

static void on_tools_call(struct mcp *m, json_t *id, json_t *params)
{
	const char *name = json_string_value(json_object_get(params, "name"));
	json_t *args = json_object_get(params, "arguments");
	const struct mcp_tool *t = NULL;
	struct mcp_call *k;
	char errbuf[512];
	int slot = -1, r;

	for (size_t i = 0; name && i < mcp_tools_n; i++)
		if (strcmp(name, mcp_tools[i].name) == 0)
			t = &mcp_tools[i];
	if (!t) {
		/* The spec's one protocol error for a call: an unknown
		 * tool. */
		mcp_error(m, id, -32602, "unknown tool: %s",
			  name ? name : "(no name)");
		return;
	}
	for (int i = 0; i < MCP_CALLS_MAX; i++)
		if (!m->calls[i]) {
			slot = i;
			break;
		}
	k = calloc(1, sizeof(*k));
	if (!k) {
		mcp_error(m, id, -32603, "out of memory");
		return;
	}
	k->m = m;
	k->tool = t;
	k->id = json_incref(id);
	k->spd.fd = -1;
	k->progress = json_incref(
	    json_object_get(json_object_get(params, "_meta"), "progressToken"));
	k->args = args ? json_incref(args) : json_object();
	if (!json_is_object(k->args)) {
		mcp_call_fail(k, "BAD-REQUEST: arguments must be an object");
		goto out;
	}
	if (slot < 0) {
		mcp_call_fail(
		    k,
		    "LIMIT: %d tool calls are in flight already; wait "
		    "for one to finish",
		    MCP_CALLS_MAX);
		goto out;
	}
	r = client_open(&k->spd, errbuf, sizeof(errbuf));
	if (r < 0) {
		mcp_call_fail(k, "INTERNAL: %s", errbuf);
		goto out;
	}
	if (t->start(k) < 0 || k->done)
		goto out;
	m->calls[slot] = k;
	return;
out:
	call_free(k);
}

/* notifications/cancelled: the call's connection to spd is closed, which
 * kills its run; the request gets no answer (as the spec says). */
static void on_cancelled(struct mcp *m, json_t *params)
{
	json_t *rid = json_object_get(params, "requestId");

	for (int i = 0; rid && i < MCP_CALLS_MAX; i++) {
		struct mcp_call *k = m->calls[i];
		if (k && json_equal(k->id, rid)) {
			fprintf(stderr,
				"spctl mcp: %s cancelled by the client\n",
				k->tool->name);
			m->calls[i] = NULL;
			call_free(k);
		}
	}
}

/* A response from the client: the answer to an elicitation. */
static void on_response(struct mcp *m, json_t *msg)
{
	json_t *id = json_object_get(msg, "id");

	for (int i = 0; json_is_integer(id) && i < MCP_CALLS_MAX; i++) {
		struct mcp_call *k = m->calls[i];
		if (k && k->elicit_id == json_integer_value(id)) {
			call_elicited(k, json_object_get(msg, "result"),
				      json_object_get(msg, "error"));
			return;
		}
	}
}

static void on_message(struct mcp *m, const char *line, size_t n)
{
	json_error_t je;
	json_t *msg, *id, *vm, *params;
	const char *method;

	while (n > 0 && (line[n - 1] == '\r' || line[n - 1] == ' ' ||
			 line[n - 1] == '\t'))
		n--;
	if (n == 0)
		return;
	msg = json_loadb(line, n, JSON_REJECT_DUPLICATES, &je);
	if (!msg) {
		fprintf(stderr, "spctl mcp: malformed JSON from the client: ");
		ts_fputs(stderr, je.text);
		fputc('\n', stderr);
		mcp_error(m, NULL, -32700, "parse error: %s", je.text);
		mcp_refused(m, "malformed-json", je.text);
		return;
	}
	id = json_object_get(msg, "id");
	vm = json_object_get(msg, "method");
	params = json_object_get(msg, "params");
	if (!json_is_object(msg) ||
	    !json_is_string(json_object_get(msg, "jsonrpc")) ||
	    strcmp(json_string_value(json_object_get(msg, "jsonrpc")), "2.0") !=
		0 ||
	    (id && !json_is_string(id) && !json_is_integer(id)) ||
	    (vm && !json_is_string(vm)) ||
	    (params && !json_is_object(params))) {
		mcp_error(
		    m, (json_is_string(id) || json_is_integer(id)) ? id : NULL,
		    -32600,
		    "invalid request: not a JSON-RPC 2.0 message "
		    "(jsonrpc \"2.0\", a string or integer id, params "
		    "an object)");
		mcp_refused(m, "invalid-request", "not a JSON-RPC 2.0 message");
		goto out;
	}
	if (!vm) {
		if (id && (json_object_get(msg, "result") ||
			   json_object_get(msg, "error")))
			on_response(m, msg);
		goto out;
	}
	method = json_string_value(vm);
	if (!id) {
		if (strcmp(method, "notifications/cancelled") == 0)
			on_cancelled(m, params);
		/* notifications/initialized and the rest need nothing. */
		goto out;
	}
	if (strcmp(method, "initialize") == 0) {
		on_initialize(m, id, params);
	} else if (strcmp(method, "ping") == 0) {
		mcp_result(m, id, json_object());
	} else if (!m->initialized) {
		mcp_error(m, id, -32600,
			  "not initialized: send initialize first");
	} else if (strcmp(method, "tools/list") == 0) {
		on_tools_list(m, id);
	} else if (strcmp(method, "tools/call") == 0) {
		on_tools_call(m, id, params);
	} else {
		fprintf(stderr, "spctl mcp: unknown method from the client: ");
		ts_fputs(stderr, method);
		fputc('\n', stderr);
		mcp_error(m, id, -32601, "method not found: %s", method);
		mcp_refused(m, "unknown-method", method);
	}
out:
	json_decref(msg);
}

/* Read stdin and handle each complete line.  Returns 0, or -EPIPE when the
 * client has gone (end of input). */
static int on_stdin(struct mcp *m)
{
	ssize_t r;
	size_t start = 0;

	if (buf_reserve(&m->in, 65536) < 0)
		return -ENOMEM;
	r = read(m->in_fd, m->in.data + m->in.len, 65536);
	if (r < 0)
		return errno == EINTR || errno == EAGAIN ? 0 : -errno;
	if (r == 0) {
		/* A last message without its newline is still a message. */
		if (m->in.len && !m->skipping)
			on_message(m, m->in.data, m->in.len);
		buf_reset(&m->in);
		return -EPIPE;
	}
	m->in.len += (size_t)r;
	for (;;) {
		char *nl = memchr(m->in.data + start, '\n', m->in.len - start);
		size_t n;

		if (!nl)
			break;
		n = (size_t)(nl - (m->in.data + start));
		if (m->skipping)
			m->skipping = false; /* the end of the oversized one */
		else
			on_message(m, m->in.data + start, n);
		start += n + 1;
	}
	buf_consume(&m->in, start);
	if (m->in.len > MCP_MESSAGE_MAX) {
		/* Too long to be a message spd could carry out: refused,
		 * and the rest of it thrown away as it comes. */
		if (!m->skipping) {
			fprintf(stderr,
				"spctl mcp: a message over %d bytes from the "
				"client was refused\n",
				MCP_MESSAGE_MAX);
			mcp_error(m, NULL, -32600,
				  "message too large: over %d bytes",
				  MCP_MESSAGE_MAX);
			mcp_refused(m, "too-large",
				    "a message over the 1 MiB limit");
		}
		m->skipping = true;
		buf_reset(&m->in);
	}
	return 0;
}

/* ---- the command ---------------------------------------------------------- */

/* The client went away (its output broken), or its calls were not done
 * MCP_EOF_WAIT_MS after its input ended (late): every call still in
 * flight is cancelled (spd kills its run and journals why). */
static void cancel_in_flight(struct mcp *m, bool late)
{
	for (int i = 0; i < MCP_CALLS_MAX; i++)
		if (m->calls[i]) {
			fprintf(stderr, "spctl mcp: %s; %s cancelled\n",
				late ? "the calls in flight outlived the end "
				       "of input by too long"
				     : "the client went away",
				m->calls[i]->tool->name);
			call_free(m->calls[i]);
			m->calls[i] = NULL;
		}
}

/* Whether any call is still waiting for spd's answer. */
static bool calls_in_flight(const struct mcp *m)
{
	for (int i = 0; i < MCP_CALLS_MAX; i++)
		if (m->calls[i])
			return true;
	return false;
}

static int mcp_usage(void)
{
	fprintf(stderr, "usage: spctl mcp [--session ID]\n");
	return CMD_EXIT_USAGE;
}

/* The session's worktree, and a check that the session exists and the
 * token acts in it.  Returns 0 or an exit code. */
static int mcp_session(struct mcp *m)
{
	json_t *res = NULL;
	int ex = 0;

	res = cmd_call(RPC_M_SESSION_STATUS,
		       m->operator? json_pack("{s:s}", "id", m->session)
				  : json_object(),
		       &ex);
	if (!res)
		return ex ? ex : CMD_EXIT_SPD;
	if (!json_is_string(json_object_get(res, "worktree")) ||
	    !json_is_string(json_object_get(res, "id"))) {
		fprintf(stderr, "spctl mcp: spd did not say where the session "
				"works\n");
		json_decref(res);
		return CMD_EXIT_SPD;
	}
	free(m->session);
	m->session = strdup(json_string_value(json_object_get(res, "id")));
	m->workspace =
	    strdup(json_string_value(json_object_get(res, "worktree")));
	json_decref(res);
	return m->session && m->workspace ? 0 : CMD_EXIT_SPD;
}

int cmd_mcp(struct cmd_ctx *ctx, int argc, char **argv)
{
	struct mcp m = {.in_fd = STDIN_FILENO, .out_fd = STDOUT_FILENO};
	const char *agent = getenv("SPD_SESSION_TOKEN");
	/* When stdin ended (now_ms), or -1; ended: every call answered. */
	int64_t eof_at = -1;
	bool ended = false;
	int ex = 0;

	(void)ctx;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--session") == 0 && i + 1 < argc) {
			free(m.session);
			m.session = strdup(argv[++i]);
		} else {
			return mcp_usage();
		}
	}
	if (m.session && agent && *agent) {
		fprintf(stderr,
			"spctl mcp: --session acts as the operator, but "
			"SPD_SESSION_TOKEN is set: use one or the other\n");
		free(m.session);
		return CMD_EXIT_USAGE;
	}
	if (!m.session && !(agent && *agent)) {
		fprintf(stderr,
			"spctl mcp: no session: the operator starts one with "
			"`spctl session start FEATURE --repo DIR` and passes "
			"its id with --session ID, or gives the agent the "
			"token it printed as SPD_SESSION_TOKEN\n");
		return CMD_EXIT_USAGE;
	}
	m.operator= m.session != NULL;
	/* A client that goes away must not kill spctl mid-write: the
	 * write fails and the calls are cancelled. */
	signal(SIGPIPE, SIG_IGN);
	ex = mcp_session(&m);
	if (ex)
		goto out;
	m.schemas = json_object();
	for (size_t i = 0; i < mcp_tools_n; i++) {
		json_error_t je;
		json_t *in = json_loads(mcp_tools[i].input_schema, 0, &je);
		json_t *outs = json_loads(mcp_tools[i].output_schema, 0, &je);
		if (!in || !outs) {
			fprintf(stderr, "spctl mcp: %s's schema: %s\n",
				mcp_tools[i].name, je.text);
			json_decref(in);
			json_decref(outs);
			ex = CMD_EXIT_SPD;
			goto out;
		}
		json_object_set_new(
		    m.schemas, mcp_tools[i].name,
		    json_pack("{s:o, s:o}", "input", in, "output", outs));
	}
	fprintf(stderr, "spctl mcp: serving session %s (%s) on stdio\n",
		m.session, m.operator? "operator" : "agent");
	for (;;) {
		struct pollfd pfd[1 + MCP_CALLS_MAX];
		int idx[1 + MCP_CALLS_MAX], n = 0, timeout = -1, r;
		int64_t now = now_ms();

		if (eof_at >= 0) {
			/* Input over: only the calls in flight are left. */
			if (!calls_in_flight(&m)) {
				ended = true;
				break;
			}
			if (now - eof_at >= MCP_EOF_WAIT_MS)
				break;
			timeout = (int)(MCP_EOF_WAIT_MS - (now - eof_at));
		}
		/* After the end of input, the slot of stdin watches stdout
		 * instead: a client that closed its end of it too has gone,
		 * and nobody would read the answers waited for. */
		pfd[n].fd = eof_at >= 0 ? m.out_fd : m.in_fd;
		pfd[n].events = eof_at >= 0 ? 0 : POLLIN;
		idx[n++] = -1;
		for (int i = 0; i < MCP_CALLS_MAX; i++) {
			struct mcp_call *k = m.calls[i];
			if (!k)
				continue;
			pfd[n].fd = k->spd.fd;
			pfd[n].events = POLLIN;
			idx[n++] = i;
			if (k->approval && !k->elicit_id && k->progress) {
				int64_t d = k->next_wait_progress_ms - now;
				if (d < 0)
					d = 0;
				if (timeout < 0 || d < timeout)
					timeout = (int)d;
			}
		}
		r = poll(pfd, (nfds_t)n, timeout);
		if (r < 0 && errno != EINTR) {
			ex = CMD_EXIT_SPD;
			break;
		}
		for (int j = 1; r > 0 && j < n; j++) {
			struct mcp_call *k = m.calls[idx[j]];
			if (k &&
			    (pfd[j].revents & (POLLIN | POLLHUP | POLLERR)))
				call_readable(k);
		}
		if (r > 0 && eof_at >= 0 &&
		    (pfd[0].revents & (POLLHUP | POLLERR)))
			m.out_broken = true;
		else if (r > 0 &&
			 (pfd[0].revents & (POLLIN | POLLHUP | POLLERR))) {
			r = on_stdin(&m);
			if (r == -EPIPE)
				eof_at = now_ms();
			else if (r < 0)
				break;
		}
		now = now_ms();
		for (int i = 0; i < MCP_CALLS_MAX; i++) {
			struct mcp_call *k = m.calls[i];
			if (k && !k->done && k->approval && !k->elicit_id &&
			    k->progress && now >= k->next_wait_progress_ms)
				wait_progress(k);
			if (k && k->done) {
				m.calls[i] = NULL;
				call_free(k);
			}
		}
		if (m.out_broken)
			break;
	}
	if (!ended)
		cancel_in_flight(&m, eof_at >= 0 && !m.out_broken);
out:
	buf_free(&m.in);
	json_decref(m.schemas);
	free(m.session);
	free(m.workspace);
	return ex;
}

/*
 * cmd.run: run a command in the sandbox and stream its output
 * (sandbox.probe, what the host lets the sandbox do, is m_probe.c).
 */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "daemon/transport/call.h"
#include "common/strv.h"
#include "common/trace.h"
#include "daemon/broker/broker.h"
#include "daemon/broker/gateway.h"
#include "daemon/config.h"
#include "daemon/methods/agentconf.h"
#include "daemon/methods/gate.h"
#include "daemon/journal/journal.h"
#include "daemon/session/labels.h"
#include "daemon/session/linkwatch.h"
#include "daemon/log.h"
#include "daemon/proxy/proxy.h"
#include "daemon/transport/handlers.h"
#include "daemon/transport/quota.h"
#include "daemon/methods/run.h"
#include "daemon/sandbox/sbx.h"
#include "daemon/spd.h"
#include "common/buf.h"
#include "common/envscrub.h"
#include "common/redact.h"
#include "common/utf8.h"
#include "common/util.h"

/* Argument vectors an agent may send: generous for real build commands,
 * bounded so one request cannot make spd copy megabytes per run. */
#define RUN_ARGC_MAX 4096
#define RUN_ARG_LEN_MAX (128 * 1024)
#define RUN_ENV_MAX 256
#define RUN_WRITABLE_MAX 32
/* The port of 127.0.0.1 inside an agent's run that reaches the broker.
 * The run has a network namespace of its own, so any port is free
 * there; a fixed one makes the URL the agent sees predictable. */
#define RUN_BROKER_PORT 8377
/* A proxy run's environment: every common way tools are told of an
 * HTTP proxy (curl, wget, Python, Node's npm, pip, git through
 * GIT_CONFIG_COUNT, cargo).  The namespace is what holds the run to the
 * proxy; these only spare tools a failed direct connection. */
#define RUN_STR_(x) #x
#define RUN_STR(x) RUN_STR_(x)
#define RUN_PROXY_URL "http://127.0.0.1:" RUN_STR(PROXY_PORT)
static const char *const proxy_env[] = {
    "HTTP_PROXY=" RUN_PROXY_URL,       "HTTPS_PROXY=" RUN_PROXY_URL,
    "ALL_PROXY=" RUN_PROXY_URL,	       "NO_PROXY=localhost,127.0.0.1,::1",
    "http_proxy=" RUN_PROXY_URL,       "https_proxy=" RUN_PROXY_URL,
    "all_proxy=" RUN_PROXY_URL,	       "no_proxy=localhost,127.0.0.1,::1",
    "npm_config_proxy=" RUN_PROXY_URL, "npm_config_https_proxy=" RUN_PROXY_URL,
    "PIP_PROXY=" RUN_PROXY_URL,	       "GIT_CONFIG_COUNT=1",
    "GIT_CONFIG_KEY_0=http.proxy",     "GIT_CONFIG_VALUE_0=" RUN_PROXY_URL,
    "CARGO_HTTP_PROXY=" RUN_PROXY_URL, NULL,
};

/* Where agents' homes live in the state dir, one per session. */
#define RUN_AGENT_HOMES "agent-homes"

/* A run's base environment: what build tools need and nothing of spd's
 * own (which holds provider keys). */
static const char *const base_env[] = {
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG=C.UTF-8",
    "TERM=dumb",
    NULL,
};

/*
 * The output path of one run: every byte goes through the redactor's
 * streaming matcher (one per stream, so that a secret split across two
 * chunks is still caught) before it reaches the client.
 */
/* How long a stream may be quiet before what the redactor holds is
 * released (when it cannot be the start of a secret): a prompt or a
 * progress line shows up promptly, yet a secret printed a byte at a time
 * is still caught whole. */
#define RUN_OUTPUT_IDLE_MS 30

struct outf {
	struct redact_stream *rs[2];
	struct buf tmp;
	uv_timer_t *idle; /* data: this outf, NULL once finished */
	struct call *call;
	/* The first bytes of each stream as sent (stdout, stderr): what
	 * spd served, for the broker to find again (session_served_add). */
	char head[2][SESSION_SERVED_PREFIX];
	size_t head_len[2];
};

static void outf_idle_fired(uv_timer_t *t);

static void outf_init(struct outf *o, struct spd *spd)
{
	memset(o, 0, sizeof(*o));
	if (spd->redact && (o->idle = malloc(sizeof(*o->idle)))) {
		uv_timer_init(spd->loop, o->idle);
		o->idle->data = NULL;
	}
	if (spd->redact)
		for (int i = 0; i < 2; i++)
			if (redact_stream_new(spd->redact, &o->rs[i]) < 0)
				o->rs[i] = NULL;
}

static void send_output(struct call *c, int stream, const char *buf,
			size_t len);

/* send_output, keeping the stream's first bytes. */
static void outf_send(struct outf *o, struct call *c, int stream,
		      const char *buf, size_t len)
{
	int i = stream == 1 ? 0 : 1;
	size_t room = sizeof(o->head[i]) - o->head_len[i];

	if (room) {
		size_t n = len < room ? len : room;

		memcpy(o->head[i] + o->head_len[i], buf, n);
		o->head_len[i] += n;
	}
	send_output(c, stream, buf, len);
}

/* Send what stream i (0: stdout, 1: stderr) holds if the redactor may let
 * it go now (redact_stream_idle: not the possible start of a secret). */
static void outf_release(struct outf *o, struct call *c, int i)
{
	if (!o->rs[i])
		return;
	buf_reset(&o->tmp);
	if (redact_stream_idle(o->rs[i], &o->tmp) > 0 && o->tmp.len)
		outf_send(o, c, i + 1, o->tmp.data, o->tmp.len);
}

static void outf_feed(struct outf *o, struct call *c, int stream,
		      const char *buf, size_t len)
{
	int i = stream == 1 ? 0 : 1;
	struct redact_stream *rs = o->rs[i];

	if (!rs) {
		outf_send(o, c, stream, buf, len);
		return;
	}
	/* Output on one stream ends what the other wrote before it: send
	 * that first, so that a client showing both (2>&1, a terminal)
	 * gets them in the order the run wrote them, not a line of stdout
	 * cut by stderr that came later. */
	outf_release(o, c, 1 - i);
	buf_reset(&o->tmp);
	if (redact_stream_feed(rs, buf, len, &o->tmp) < 0)
		return; /* never pass unredacted bytes on */
	if (o->tmp.len)
		outf_send(o, c, stream, o->tmp.data, o->tmp.len);
	if (o->idle) {
		o->idle->data = o;
		o->call = c;
		uv_timer_start(o->idle, outf_idle_fired, RUN_OUTPUT_IDLE_MS, 0);
	}
}

static void outf_idle_fired(uv_timer_t *t)
{
	struct outf *o = t->data;

	if (!o)
		return;
	for (int i = 0; i < 2; i++)
		outf_release(o, o->call, i);
}

static void outf_finish(struct outf *o, struct call *c)
{
	if (o->idle) {
		uv_timer_stop(o->idle);
		o->idle->data = NULL;
		uv_close((uv_handle_t *)o->idle, (uv_close_cb)free);
		o->idle = NULL;
	}
	for (int i = 0; i < 2; i++) {
		if (!o->rs[i])
			continue;
		buf_reset(&o->tmp);
		if (redact_stream_flush(o->rs[i], &o->tmp) == 0 && o->tmp.len)
			outf_send(o, c, i + 1, o->tmp.data, o->tmp.len);
		redact_stream_free(o->rs[i]);
		o->rs[i] = NULL;
	}
	buf_free(&o->tmp);
}

struct run_ctx {
	struct outf outf;
	struct call *call;
	struct sbx_run *run;
	struct spd *spd;
	json_t *argv_json;
	char *workspace;
	const char *net_name;
	bool best_effort;
	int (*done_hook)(void *data, const struct sbx_result *r,
			 struct run_wait *w, char *msg, size_t msglen);
	void (*after_reply)(void *data, const struct sbx_result *r);
	void *done_data;
	/* From the run's end to the call's (the done hook may answer
	 * later): the result's figures, and the reply or its error. */
	struct sbx_result result;
	struct run_wait wait; /* given to the done hook */
	json_t *reply;
	bool refused; /* reply_err and reply_msg instead of reply */
	enum rpc_error reply_err;
	char *reply_msg;
	char *quota_sid; /* the session whose run quota this run holds */
	/* spctl agent: the run's turn (ended with the run) and its listener
	 * in the gateway (released with it); "" and 0 otherwise. */
	char turn[BROKER_TURN_ID_LEN + 1];
	uint64_t listener;
	/* A run with a stdin pipe: in spd->stdin_runs, found by run.input
	 * from the same connection and the same caller. */
	struct run_ctx *next, **pprev;
	uint64_t conn;
	bool by_operator;
	char *by_session;
	/* Network mode proxy: the run's egress proxy (closed with it). */
	bool proxy_mode;
	struct proxy_port *proxy;
	struct proxy_project *proxy_project; /* until the port takes it */
	char *session_id;
	int64_t start_s; /* Unix seconds: labels that entered since are its */
};

static void stdin_run_unlink(struct run_ctx *rc)
{
	if (!rc->pprev)
		return;
	*rc->pprev = rc->next;
	if (rc->next)
		rc->next->pprev = rc->pprev;
	rc->pprev = NULL;
}

static void run_ctx_free(struct run_ctx *rc)
{
	/* The agent is gone: its port closes, its turn is settled (calls
	 * still in flight are charged when they end) and its key revoked. */
	if (rc->listener)
		gateway_release(broker_gateway(rc->spd), rc->listener);
	proxy_close(rc->proxy);
	proxy_project_free(rc->proxy_project);
	free(rc->session_id);
	if (rc->turn[0])
		broker_turn_end(rc->spd, rc->turn, "agent exited");
	if (rc->quota_sid)
		quota_put(rc->spd->quota, rc->quota_sid, QUOTA_RUNS);
	stdin_run_unlink(rc);
	free(rc->by_session);
	free(rc->quota_sid);
	json_decref(rc->argv_json);
	json_decref(rc->reply);
	free(rc->reply_msg);
	free(rc->workspace);
	free(rc);
}

static void send_output(struct call *c, int stream, const char *buf, size_t len)
{
	json_t *p;

	if (!c || call_client_gone(c))
		return;
	p = json_pack("{s:s}", "stream", stream == 1 ? "stdout" : "stderr");
	if (utf8_valid(buf, len) && !memchr(buf, '\0', len)) {
		json_object_set_new(p, "data", json_stringn(buf, len));
	} else {
		size_t blen = sodium_base64_encoded_len(
		    len, sodium_base64_VARIANT_ORIGINAL);
		char *b64 = malloc(blen);
		if (!b64) {
			json_decref(p);
			return;
		}
		sodium_bin2base64(b64, blen, (const unsigned char *)buf, len,
				  sodium_base64_VARIANT_ORIGINAL);
		json_object_set_new(p, "data_b64", json_string(b64));
		free(b64);
	}
	call_notify(c, RPC_N_RUN_OUTPUT, p);
}

static void on_output(void *data, int stream, const char *buf, size_t len)
{
	struct run_ctx *rc = data;

	outf_feed(&rc->outf, rc->call, stream, buf, len);
}

/* The run's proxy asks a person about a host: the caller is told, as a
 * waiting call is (spctl run says which approval frees it). */
static void on_proxy_ask(void *data, json_t *pending)
{
	struct run_ctx *rc = data;

	if (rc->call && !call_client_gone(rc->call))
		call_notify(rc->call, RPC_N_APPROVAL_REQUESTED,
			    json_incref(pending));
}

static void on_listener(void *data, int fd)
{
	struct run_ctx *rc = data;
	int r;

	if (rc->proxy_mode) {
		if (rc->proxy) {
			close(fd);
			return;
		}
		r = proxy_serve(
		    rc->spd, fd,
		    &(struct proxy_run){.session = rc->session_id,
					.actor = rc->by_operator ? "operator"
								 : "agent",
					.workspace = rc->workspace,
					.project = rc->proxy_project,
					.on_ask = on_proxy_ask,
					.on_ask_data = rc},
		    &rc->proxy);
		rc->proxy_project = NULL; /* taken */
		if (r < 0)
			log_warn("run: cannot serve the run's proxy port: %s",
				 uv_strerror(r));
		return;
	}
	if (!rc->turn[0] || rc->listener) {
		close(fd);
		return;
	}
	r = gateway_adopt(broker_gateway(rc->spd), fd, rc->turn, &rc->listener);
	if (r < 0)
		log_warn("run: cannot serve the agent's broker port: %s",
			 uv_strerror(r));
}

/* A kept result's warnings: its strings are sandboxd's run's. */
static const char *const no_warnings[] = {NULL};

static void on_gone(void *data)
{
	struct run_ctx *rc = data;

	if (rc->run)
		sbx_run_cancel(rc->run);
}

static json_t *warnings_json(const char *const *w)
{
	json_t *a = json_array();

	for (size_t i = 0; w && w[i]; i++)
		json_array_append_new(a, json_string(w[i]));
	return a;
}

/* Whether path is under the host's /tmp and not in the workspace: each
 * run has a private /tmp (docs/sandbox.md), so a program there is not
 * found, and "No such file or directory" alone would not say why. */
static bool in_host_tmp(const char *path, const char *workspace)
{
	size_t n = workspace ? strlen(workspace) : 0;

	if (!path || strncmp(path, "/tmp/", 5) != 0)
		return false;
	return !(n && strncmp(path, workspace, n) == 0 && path[n] == '/');
}

/* The reply to a run that ended as r, kept in rc until the done hook
 * has answered (it may answer later: struct run_wait). */
static void reply_prepare(struct run_ctx *rc, const struct sbx_result *r)
{
	struct call *c = rc->call;

	if (r->error) {
		enum rpc_error e =
		    r->error == SBXP_ERR_UNAVAILABLE ? RPC_E_SANDBOX_UNAVAILABLE
		    : r->error == SBXP_ERR_BAD_REQUEST ? RPC_E_BAD_PARAMS
						       : RPC_E_INTERNAL;
		const char *msg =
		    r->error_msg ? r->error_msg : rpc_error_code(e);

		rc->refused = true;
		rc->reply_err = e;
		rc->reply_msg = strdup(msg);
		return;
	}
	const char *how =
	    !r->cancelled		  ? ""
	    : r->ended == SBXP_ENDED_TERM ? "ended by spd (SIGTERM): "
	    : r->ended == SBXP_ENDED_KILL ? "ended by spd (SIGKILL): "
					  : "";

	if (r->term_signal)
		call_set_summary(c, "%skilled by signal %d%s", how,
				 r->term_signal,
				 r->timed_out ? " at the deadline" : "");
	else
		call_set_summary(c, "%sexit %d", how, r->exit_code);
	json_t *res = json_pack(
	    "{s:i, s:b, s:b, s:I, s:{s:I, s:I}, s:o}", "exit_code",
	    r->exit_code, "timed_out", r->timed_out, "cancelled", r->cancelled,
	    "duration_ms", (json_int_t)(r->duration_us / 1000), "bytes_dropped",
	    "stdout", (json_int_t)r->bytes_dropped[0], "stderr",
	    (json_int_t)r->bytes_dropped[1], "warnings",
	    warnings_json(r->warnings));
	if (r->term_signal)
		json_object_set_new(res, "signal",
				    json_integer(r->term_signal));
	/* Why a command did not start (exit 126/127 from exec). */
	if (r->error_msg && r->error_msg[0]) {
		char *why = NULL;
		const char *a0 =
		    json_string_value(json_array_get(rc->argv_json, 0));
		if (asprintf(&why, "%s: %s%s%s", a0 ? a0 : "command",
			     r->exit_code == 127 ? "command not found: " : "",
			     r->error_msg,
			     r->exit_code == 127 &&
				     in_host_tmp(a0, rc->workspace)
				 ? "; it is under /tmp, which runs do "
				   "not see (each run has a private "
				   "/tmp): put it elsewhere, under "
				   "your home or in the workspace"
				 : "") > 0)
			json_object_set_new(res, "error", json_string(why));
		free(why);
	}
	rc->reply = res;
}

/* The call's end: the done hook's error e (an enum rpc_error, msg) or,
 * when 0, the reply reply_prepare kept; then the after-reply hook. */
static void run_finish(struct run_ctx *rc, int e, const char *msg)
{
	struct call *c = rc->call;

	if (e > 0) {
		call_set_summary(c, "%s", msg);
		call_error(c, (enum rpc_error)e, NULL, "%s", msg);
	} else if (rc->refused) {
		call_set_summary(c, "refused: %s", rc->reply_msg ?: "");
		call_error(c, rc->reply_err, NULL, "%s", rc->reply_msg ?: "");
	} else {
		/* Written out before the reply, so that they are in the
		 * file by the time the client has it. */
		trace_stamp("reply");
		trace_flush();
		call_reply(c, steal_ptr(rc->reply));
	}
	trace_flush();
	if (rc->after_reply) {
		rc->after_reply(rc->done_data, &rc->result);
		trace_stamp("after_reply");
		trace_flush();
	}
	run_ctx_free(rc);
}

/* The done hook's answer, later (struct run_wait). */
static void hook_resume(struct run_wait *w, int e, const char *msg)
{
	struct run_ctx *rc =
	    (struct run_ctx *)((char *)w - offsetof(struct run_ctx, wait));

	trace_stamp("done_hook");
	run_finish(rc, e, msg);
}

static void on_done(void *data, const struct sbx_result *r)
{
	struct run_ctx *rc = data;
	struct call *c = rc->call;
	json_t *detail;
	char msg[512] = "";
	int e = 0;

	trace_stamp("done");
	stdin_run_unlink(rc);
	outf_finish(&rc->outf, c);
	prov_run_labels(rc->spd, c, rc->argv_json, rc->workspace, rc->start_s,
			rc->outf.head, rc->outf.head_len);
	detail = json_pack(
	    "{s:O, s:s, s:s, s:s, s:I, s:b, s:o}", "argv", rc->argv_json,
	    "workspace", rc->workspace, "net", rc->net_name, "mode",
	    rc->best_effort ? "best-effort" : "required", "duration_ms",
	    (json_int_t)(r->duration_us / 1000), "timed_out", r->timed_out,
	    "warnings", warnings_json(r->warnings));
	if (r->term_signal)
		json_object_set_new(detail, "signal",
				    json_integer(r->term_signal));
	else
		json_object_set_new(detail, "exit_code",
				    json_integer(r->exit_code));
	/* How spd ended it (its client gone): whether the command exited
	 * after SIGTERM, or had to be killed. */
	if (r->cancelled && r->ended != SBXP_ENDED_ITSELF)
		json_object_set_new(detail, "ended",
				    json_string(r->ended == SBXP_ENDED_TERM
						    ? "terminated"
						    : "killed"));
	for (size_t i = 0; r->warnings && r->warnings[i]; i++)
		log_warn("run without a layer (best-effort): %s",
			 r->warnings[i]);
	call_add_detail(c, detail);
	/* What outlives r: the reply, and the figures the after-reply hook
	 * reads (its strings are r's: not kept). */
	reply_prepare(rc, r);
	rc->result = *r;
	rc->result.error_msg = NULL;
	rc->result.warnings = no_warnings;
	/* sandboxd's run is freed after this call: a client gone from
	 * here on has nothing to cancel. */
	rc->run = NULL;
	if (rc->done_hook) {
		rc->wait.resume = hook_resume;
		e = rc->done_hook(rc->done_data, r, &rc->wait, msg,
				  sizeof(msg));
		if (e == RUN_HOOK_LATER)
			return; /* rc->wait.resume, later */
		trace_stamp("done_hook");
	}
	run_finish(rc, e, msg);
}

/* Copy a JSON array of strings into a NULL-terminated vector, checking
 * the limits and that no string is empty where that matters. */
static int strv_from_json(json_t *arr, size_t max, struct strv *ret,
			  const char **ret_why)
{
	json_t *v;
	size_t i;

	if (json_array_size(arr) > max) {
		*ret_why = "too many entries";
		return -E2BIG;
	}
	json_array_foreach(arr, i, v)
	{
		if (!json_is_string(v)) {
			*ret_why = "entries must be strings";
			return -EINVAL;
		}
		if (json_string_length(v) > RUN_ARG_LEN_MAX ||
		    strlen(json_string_value(v)) != json_string_length(v)) {
			*ret_why = "an entry is too long or holds a NUL byte";
			return -EINVAL;
		}
		if (strv_push(ret, json_string_value(v)) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* Resolve a directory the caller names: absolute, existing, no symlink
 * games — the run's workspace is its realpath. */
static char *resolve_dir(const char *path)
{
	char buf[PATH_MAX];
	struct stat st;

	if (!path || path[0] != '/' || !realpath(path, buf))
		return NULL;
	if (stat(buf, &st) < 0 || !S_ISDIR(st.st_mode))
		return NULL;
	return strdup(buf);
}

/*
 * A workspace is writable in full.  One that holds the home directory or
 * spd's own directories would make the credential locations and the
 * journal writable (or force sandboxd to plant mount points in them), so
 * it is refused rather than weakened.
 */
static bool workspace_acceptable(struct spd *spd, const char *ws,
				 struct call *c)
{
	const char *home = getenv("HOME");
	char real[PATH_MAX];
	const char *dirs[] = {spd->paths.config_dir, spd->paths.state_dir,
			      spd->paths.runtime_dir};

	if (strcmp(ws, "/") == 0) {
		call_error(c, RPC_E_POLICY_DENIED, NULL,
			   "the root directory cannot be a workspace");
		return false;
	}
	if (home && realpath(home, real) && paths_under(real, ws)) {
		call_error(c, RPC_E_POLICY_DENIED, NULL,
			   "the workspace %s contains the home directory "
			   "%s: choose a project directory",
			   ws, real);
		return false;
	}
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		const char *d = realpath(dirs[i], real) ? real : dirs[i];
		if (paths_under(d, ws) || paths_under(ws, d)) {
			call_error(c, RPC_E_POLICY_DENIED, NULL,
				   "the workspace %s overlaps spd's own "
				   "directory %s",
				   ws, d);
			return false;
		}
	}
	return true;
}

/* A session id as a directory name: what session.start makes is plain,
 * but the home's path must never climb out of its directory. */
static bool id_is_name(const char *id)
{
	if (!id || !id[0] || id[0] == '.' || strlen(id) > 64)
		return false;
	for (const char *p = id; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' ||
		      *p == '.'))
			return false;
	return true;
}

/*
 * spctl agent: begin the run's turn (its id in turn), and give the run
 * the broker's URLs, the turn key under the names agent SDKs read, and
 * the session's home (made in the state dir, writable, HOME).  Nothing
 * else secret: the key is worth one capped turn and dies with the run.
 * Returns 0, or -errno after finishing c with an error.
 */
static int agent_setup(struct spd *spd, const struct run_request *req,
		       const struct strv *argv, struct strv *env,
		       struct strv *writable, char turn[BROKER_TURN_ID_LEN + 1],
		       struct call *c)
{
	char key[BROKER_KEY_LEN + 1], *s = NULL, *homes = NULL, *home = NULL;
	char why[PATH_MAX * 2 + 128] = "";
	struct broker_turn *t;
	int r, err = 0;

	if (!req->session_id || !id_is_name(req->session_id)) {
		call_error(c, RPC_E_BAD_PARAMS, NULL,
			   "an agent runs in a session: name one");
		return -EINVAL;
	}
	homes = paths_join(spd->paths.state_dir, RUN_AGENT_HOMES);
	home = homes ? paths_join(homes, req->session_id) : NULL;
	if (!home) {
		r = -ENOMEM;
		goto fail;
	}
	if ((r = paths_ensure_private_dir(home)) < 0) {
		paths_private_dir_why(home, r, why, sizeof(why));
		goto fail;
	}
	t = broker_turn_begin(spd, req->session_id, req->agent_cap, key, &err);
	if (!t) {
		r = err;
		goto fail;
	}
	snprintf(turn, BROKER_TURN_ID_LEN + 1, "%s", t->id);
	r = 0;
#define PUSH(...)                                                              \
	do {                                                                   \
		if (r == 0 && asprintf(&s, __VA_ARGS__) < 0)                   \
			r = -ENOMEM;                                           \
		else if (r == 0) {                                             \
			r = strv_push(env, s);                                 \
			free(s);                                               \
		}                                                              \
	} while (0)
	PUSH("HOME=%s", home);
	PUSH("ANTHROPIC_BASE_URL=http://127.0.0.1:%d", RUN_BROKER_PORT);
	PUSH("OPENAI_BASE_URL=http://127.0.0.1:%d/v1", RUN_BROKER_PORT);
	PUSH("ANTHROPIC_API_KEY=%s", key);
	PUSH("ANTHROPIC_AUTH_TOKEN=%s", key);
	PUSH("OPENAI_API_KEY=%s", key);
	/* Gemini's paths start at the root, as Anthropic's do. */
	PUSH("GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:%d", RUN_BROKER_PORT);
	PUSH("GEMINI_API_KEY=%s", key);
#undef PUSH
	sodium_memzero(key, sizeof(key));
	/* A known agent CLI's settings, in its home: pointed at the broker
	 * with nothing of the user's to set up (daemon/methods/agentconf.h). */
	if (r == 0) {
		const char *name = agentconf_prepare(home, argv->v, argv->n,
						     RUN_BROKER_PORT, env, &r);

		if (name)
			log_info("run: agent %s in session %s", name,
				 req->session_id);
	}
	if (r == 0)
		r = strv_push(writable, home);
	if (r < 0)
		goto fail;
	free(homes);
	free(home);
	return 0;
fail:
	call_error(c,
		   r == -EDQUOT	    ? RPC_E_LIMIT
		   : r == -ENOSPC   ? RPC_E_BUDGET_EXCEEDED
		   : r == -ENOTCONN ? RPC_E_INTERNAL
				    : RPC_E_INTERNAL,
		   NULL, "cannot prepare the agent's run: %s",
		   why[0]	    ? why
		   : r == -EDQUOT   ? "too many live turns"
		   : r == -ENOSPC   ? "the session has spent its budget across "
				      "its turns (spd.conf broker.session-cap)"
		   : r == -ENOTCONN ? "the model broker is not running"
				    : strerror(-r));
	free(homes);
	free(home);
	return r;
}

/* Make rc findable by run.input and tell the client it may write: bytes
 * sent before the run started would have had nowhere to go. */
static void stdin_run_register(struct call *c, struct run_ctx *rc)
{
	const struct call_principal *who = call_principal(c);
	struct spd *spd = rc->spd;

	rc->conn = call_conn_serial(c);
	rc->by_operator = who->operator;
	rc->by_session = who->session_id ? strdup(who->session_id) : NULL;
	if (who->session_id && !rc->by_session) {
		/* Unfindable is safe: run.input then refuses, and the run
		 * reads end of file once the client goes. */
		sbx_run_input_close(rc->run);
		return;
	}
	rc->next = spd->stdin_runs;
	rc->pprev = &spd->stdin_runs;
	if (spd->stdin_runs)
		spd->stdin_runs->pprev = &rc->next;
	spd->stdin_runs = rc;
	call_notify(c, RPC_N_RUN_STARTED, json_object());
}

static struct run_ctx *stdin_run_find(struct call *c)
{
	const struct call_principal *who = call_principal(c);
	uint64_t conn = call_conn_serial(c);

	for (struct run_ctx *rc = call_spd(c)->stdin_runs; rc; rc = rc->next) {
		if (rc->conn != conn || rc->by_operator != who->operator)
			continue;
		if (!rc->by_session != !who->session_id)
			continue;
		if (rc->by_session &&
		    strcmp(rc->by_session, who->session_id) != 0)
			continue;
		return rc;
	}
	return NULL;
}

void m_run_input(struct call *c)
{
	json_t *p = call_params(c);
	json_t *d = json_object_get(p, "data");
	bool close_it = json_is_true(json_object_get(p, "close"));
	size_t len = d ? json_string_length(d) : 0;
	struct run_ctx *rc = stdin_run_find(c);
	int r;

	call_set_summary(c, "%zu bytes%s", len, close_it ? ", closed" : "");
	if (!rc) {
		call_error(c, RPC_E_BAD_PARAMS, NULL,
			   "no run with \"stdin\": true is running on "
			   "this connection");
		return;
	}
	if (!d && !close_it) {
		call_error(c, RPC_E_BAD_PARAMS, NULL,
			   "give data, close or both");
		return;
	}
	if (len &&
	    (r = sbx_run_input(rc->run, json_string_value(d), len)) < 0) {
		if (r == -ENOBUFS)
			call_error(c, RPC_E_LIMIT, NULL,
				   "the command is not reading its stdin "
				   "(%d bytes wait)",
				   SBX_INPUT_QUEUE_MAX);
		else
			call_error(c, RPC_E_BAD_PARAMS, NULL,
				   "the run's stdin is closed: %s",
				   strerror(-r));
		return;
	}
	if (close_it)
		sbx_run_input_close(rc->run);
	call_reply(c, json_object());
}

/* The caller's environment entries into env: each NAME: string, no '='
 * in the name; secret-looking names dropped (the run is told by their
 * absence, the log records only the name).  Returns 0, -1 having
 * answered c, or -ENOMEM. */
static int run_env_add(struct call *c, const struct run_request *req,
		       struct strv *env)
{
	struct spd *spd = call_spd(c);
	const char *key;
	json_t *v;

	if (json_object_size(req->env) > RUN_ENV_MAX) {
		call_error(c, RPC_E_BAD_PARAMS, NULL, "env: too many entries");
		return -1;
	}
	json_object_foreach(req->env, key, v)
	{
		char *e;

		if (!json_is_string(v) || !key[0] || strchr(key, '=') ||
		    strlen(json_string_value(v)) != json_string_length(v)) {
			call_error(c, RPC_E_BAD_PARAMS, NULL,
				   "env: \"%.60s\" must be NAME: string "
				   "without '=' in the name",
				   key);
			return -1;
		}
		if (asprintf(&e, "%s=%s", key, json_string_value(v)) < 0)
			return -ENOMEM;
		if (envscrub_entry_drop(
			e, (const char *const *)spd->secret_values))
			log_info("run: dropped environment variable %s", key);
		else
			strv_push(env, e);
		free(e);
	}
	return 0;
}

/* An agent's run takes one of its session's run slots (rc->quota_sid
 * gives it back) and may not use the slots held for the operator.
 * Returns 0, -EDQUOT having answered c with LIMIT, or -ENOMEM. */
static int run_quota_take(struct call *c, struct run_ctx *rc,
			  struct sbx_spec *spec)
{
	struct spd *spd = call_spd(c);
	const char *sid = call_principal(c)->session_id;

	if (call_principal(c)->operator)
		return 0;
	/* One agent's runs must leave room for the others'. */
	if (sid &&
	    quota_take(spd->quota, sid, QUOTA_RUNS, uv_now(spd->loop)) < 0) {
		call_error(
		    c, RPC_E_LIMIT,
		    json_pack("{s:s, s:i}", "quota", "runs", "limit",
			      (int)quota_limit(spd->quota, QUOTA_RUNS)),
		    "this session has %u runs in flight, its quota; wait for "
		    "one to end",
		    quota_limit(spd->quota, QUOTA_RUNS));
		return -EDQUOT;
	}
	rc->quota_sid = sid ? strdup(sid) : NULL;
	if (sid && !rc->quota_sid) {
		quota_put(spd->quota, sid, QUOTA_RUNS);
		return -ENOMEM;
	}
	/* The slots above this stay free for the operator's runs. */
	spec->slots_max = SBXP_RUNS_MAX - spd->config.operator_runs;
	return 0;
}

/* Journal the run's start.  A run that cannot be journaled does not run:
 * the journal is the record the operator audits afterwards.  Returns 0,
 * or -EIO having answered c. */
static int run_journal_start(struct call *c, const struct run_request *req,
			     const struct run_ctx *rc)
{
	struct spd *spd = call_spd(c);
	json_t *d = json_pack("{s:O, s:s, s:s, s:s?}", "argv", req->argv,
			      "workspace", req->workspace, "net", rc->net_name,
			      "turn", rc->turn[0] ? rc->turn : NULL);

	/* The output the operator may later look for came as one stream. */
	if (d && req->merge_stderr)
		json_object_set_new(d, "merge_stderr", json_true());
	int64_t jr = journal_append_json(
	    spd->journal, req->session_id,
	    call_principal(c)->operator? "operator" : "agent", "run.start",
	    json_string_value(json_array_get(req->argv, 0)), d, 0);

	json_decref(d);
	if (jr >= 0 && req->journal_row)
		*req->journal_row = jr;
	if (jr >= 0)
		return 0;
	call_error(c, RPC_E_INTERNAL, NULL,
		   "the journal cannot record the run (%s); not running "
		   "it",
		   strerror((int)-jr));
	return -EIO;
}

/* The base environment, and a proxy run's proxy variables first, so
 * that a variable of the request cannot shadow them. */
static void run_base_env(const struct run_request *req, struct strv *env)
{
	for (size_t i = 0; base_env[i]; i++)
		strv_push(env, base_env[i]);
	for (size_t i = 0; req->net == SBX_NET_PROXY && proxy_env[i]; i++)
		strv_push(env, proxy_env[i]);
}

/* A proxy run where spd terminates some hosts (a credential or request
 * rules, proxy.h) trusts spd's CA: every common way tools are told of a
 * CA file names the bundle of the system's CAs and spd's.  A CA that
 * cannot be set up refuses the run (finishing c), rather than run it
 * with hosts it cannot reach.  Returns 0 or -1. */
static int run_proxy_trust(struct call *c, const struct run_request *req,
			   struct strv *env)
{
	static const char *const vars[] = {
	    "SSL_CERT_FILE",	  "CURL_CA_BUNDLE",    "NODE_EXTRA_CA_CERTS",
	    "REQUESTS_CA_BUNDLE", "GIT_SSL_CAINFO",    "CARGO_HTTP_CAINFO",
	    "PIP_CERT",		  "npm_config_cafile", NULL};
	struct spd *spd = call_spd(c);
	const char *bundle;
	char err[512];

	if (req->net != SBX_NET_PROXY ||
	    (!spd->config.proxy_ncreds && !spd->config.proxy_nhttp_rules))
		return 0;
	if (proxy_tls_prepare(spd, &bundle, err, sizeof(err)) < 0) {
		call_error(c, RPC_E_INTERNAL, NULL,
			   "the proxy's CA cannot be set up: %s; not running",
			   err);
		return -1;
	}
	for (size_t i = 0; vars[i]; i++) {
		char *v;

		if (asprintf(&v, "%s=%s", vars[i], bundle) < 0 ||
		    strv_push(env, v) < 0) {
			call_error(c, RPC_E_INTERNAL, NULL, "out of memory");
			return -1;
		}
		free(v);
	}
	return 0;
}

/* The run's network as journaled, and what a proxy run's port journals
 * under.  Returns 0 or -ENOMEM. */
static int run_ctx_net(struct run_ctx *rc, const struct run_request *req,
		       struct call *c)
{
	rc->net_name = req->net == SBX_NET_HOST	      ? "host"
		       : req->net == SBX_NET_LOOPBACK ? "loopback"
		       : req->net == SBX_NET_BROKER   ? "broker"
		       : req->net == SBX_NET_PROXY    ? "proxy"
						      : "none";
	rc->proxy_mode = req->net == SBX_NET_PROXY;
	rc->by_operator = call_principal(c)->operator;
	if (req->session_id && !(rc->session_id = strdup(req->session_id)))
		return -ENOMEM;
	/* The project's tightening, read before the run can act. */
	if (rc->proxy_mode)
		return proxy_project_load(&rc->spd->config, req->workspace,
					  &rc->proxy_project);
	return 0;
}

/* A run with a stdin pipe is a protocol channel (spctl acp's agent): its
 * output is a conversation, not a log, and a cap would cut it mid-way.  It
 * is not kept by spd; a client that stops reading is disconnected at
 * SERVER_MAX_OUTBUF and the run killed.  Others keep output-cap. */
static size_t run_output_cap(const struct spd *spd,
			     const struct run_request *req)
{
	return req->stdin_pipe ? SIZE_MAX : spd->config.output_cap;
}

/* The port of 127.0.0.1 inside the run that spd serves, or 0. */
static uint16_t run_door_port(int net)
{
	return net == SBX_NET_BROKER  ? RUN_BROKER_PORT
	       : net == SBX_NET_PROXY ? PROXY_PORT
				      : 0;
}

/*
 * The run's writable paths (the request's, each absolute, then spd.conf's)
 * and hidden ones (spd's own directories, never visible to a run, then the
 * request's, then spd.conf's [sandbox] hidden).  On a bad path finishes c
 * with BAD-PARAMS and returns -EINVAL.
 */
static int run_paths(struct call *c, const struct run_request *req,
		     struct strv *writable, struct strv *hidden)
{
	struct spd *spd = call_spd(c);
	const char *why = NULL;

	if (strv_from_json(req->writable, RUN_WRITABLE_MAX, writable, &why) <
	    0) {
		call_error(c, RPC_E_BAD_PARAMS, NULL, "writable: %s", why);
		return -EINVAL;
	}
	for (size_t i = 0; i < writable->n; i++)
		if (writable->v[i][0] != '/') {
			call_error(c, RPC_E_BAD_PARAMS, NULL,
				   "writable: \"%s\" must be absolute",
				   writable->v[i]);
			return -EINVAL;
		}
	for (size_t i = 0; spd->config.writable && spd->config.writable[i]; i++)
		strv_push(writable, spd->config.writable[i]);
	/* spd's directories and the operator's [sandbox] hidden paths,
	 * then the request's (a session's ignored entries): a run that
	 * cannot have them all covered does not start. */
	int r = config_run_hidden_push(spd, hidden);

	for (size_t i = 0; r == 0 && req->hidden && req->hidden[i]; i++)
		r = strv_push(hidden, req->hidden[i]);
	if (r < 0) {
		call_error(c, RPC_E_INTERNAL, NULL, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

/*
 * What sandboxd is asked for: the request's fields, spd's run uid and
 * output cap, and the hard-link check from spd's watch of the workspace
 * instead of sandboxd's walk of it (docs/sandbox.md, "Hard links"), only
 * where the workspace is the one tree the check covers.
 */
static void run_spec_fill(struct spd *spd, const struct run_request *req,
			  const struct strv *argv, const struct strv *env,
			  const struct strv *writable,
			  const struct strv *hidden, struct sbx_spec *spec)
{
	spec->argv = argv->v;
	spec->envp = env->v;
	spec->workspace = req->workspace;
	spec->cwd = req->cwd;
	spec->home = getenv("HOME");
	spec->net = req->net;
	spec->broker_port = run_door_port(req->net);
	spec->timeout_ms = req->timeout_ms;
	spec->writable = writable->v;
	spec->hidden = hidden->v;
	spec->readonly = req->readonly;
	spec->empty_files = req->empty_files;
	spec->best_effort = req->best_effort;
	spec->run_uid = spd->config.run_uid;
	spec->run_gid = spd->config.run_gid;
	spec->output_cap = run_output_cap(spd, req);
	spec->kill_grace_ms = spd->config.kill_grace_ms;
	if (!writable->n) {
		struct linkwatch_list l;
		struct linkwatch *lw =
		    linkwatch_get(&spd->linkwatch, spd->loop);

		if (lw && linkwatch_names(lw, req->workspace, &l) == 1) {
			spec->link_names = l.names;
			spec->link_ro_dirs = l.ro_dirs;
		}
		trace_stamp("linklist");
	}
	spec->stdin_pipe = req->stdin_pipe;
	spec->merge_stderr = req->merge_stderr;
}

int run_start(struct call *c, const struct run_request *req)
{
	struct spd *spd = call_spd(c);
	struct strv argv = {0}, env = {0}, writable = {0}, hidden = {0};
	char turn[BROKER_TURN_ID_LEN + 1] = "";
	struct sbx_spec spec;
	struct run_ctx *rc = NULL;
	const char *why = NULL, *home = getenv("HOME");
	int r;

	memset(&spec, 0, sizeof(spec));
	r = strv_from_json(req->argv, RUN_ARGC_MAX, &argv, &why);
	if (r < 0 || argv.n == 0 || argv.v[0][0] == '\0') {
		call_error(c, RPC_E_BAD_PARAMS, NULL, "argv: %s",
			   why ? why : "must name a command");
		goto out;
	}
	run_base_env(req, &env);
	if (run_proxy_trust(c, req, &env) < 0)
		goto out;
	if (req->agent) {
		r = agent_setup(spd, req, &argv, &env, &writable, turn, c);
		if (r < 0)
			goto out;
	} else if (home && home[0] == '/') {
		char *h;
		if (asprintf(&h, "HOME=%s", home) > 0) {
			strv_push(&env, h);
			free(h);
		}
	}
	r = run_env_add(c, req, &env);
	if (r == -ENOMEM)
		goto oom;
	if (r < 0)
		goto out;
	if (run_paths(c, req, &writable, &hidden) < 0)
		goto out;

	rc = calloc(1, sizeof(*rc));
	if (rc)
		rc->start_s = (int64_t)time(NULL);
	if (!rc)
		goto oom;
	rc->call = c;
	rc->spd = spd;
	rc->argv_json = json_incref(req->argv);
	rc->workspace = strdup(req->workspace);
	if (run_ctx_net(rc, req, c) < 0) {
		run_ctx_free(rc);
		rc = NULL;
		goto oom;
	}
	memcpy(rc->turn, turn, sizeof(turn));
	turn[0] = '\0'; /* rc ends it from now on */
	rc->best_effort = req->best_effort;
	rc->done_hook = req->done_hook;
	rc->after_reply = req->after_reply;
	rc->done_data = req->done_data;
	r = run_quota_take(c, rc, &spec);
	if (r < 0) {
		run_ctx_free(rc);
		rc = NULL;
		if (r == -ENOMEM)
			goto oom;
		goto out;
	}

	run_spec_fill(spd, req, &argv, &env, &writable, &hidden, &spec);
	outf_init(&rc->outf, spd);
	r = run_journal_start(c, req, rc);
	if (r < 0) {
		outf_finish(&rc->outf, NULL);
		run_ctx_free(rc);
		rc = NULL;
		goto out;
	}
	trace_stamp("journaled");
	r = sbx_run(spd->sbx, &spec,
		    &(struct sbx_cbs){on_output, on_done, on_listener}, rc,
		    &rc->run);
	if (r < 0) {
		outf_finish(&rc->outf, NULL);
		run_ctx_free(rc);
		rc = NULL;
		if (r == -EAGAIN)
			call_error(c, RPC_E_LIMIT, NULL,
				   "too many runs at once; the remaining "
				   "slots are held for the operator");
		else
			call_error(
			    c, r == -EINVAL ? RPC_E_BAD_PARAMS : RPC_E_INTERNAL,
			    NULL, "cannot start the run: %s",
			    r == -SPD_ETOOBIG ? "request too large"
					      : strerror(-r));
		goto out;
	}
	if (req->on_start)
		req->on_start(req->done_data);
	call_on_gone(c, on_gone, rc);
	if (req->stdin_pipe)
		stdin_run_register(c, rc);
	r = 0;
	goto out;
oom:
	call_error(c, RPC_E_INTERNAL, NULL, "out of memory");
	r = -ENOMEM;
out:
	if (turn[0])
		broker_turn_end(spd, turn, "not started");
	strv_free(&argv);
	strv_free(&env);
	strv_free(&writable);
	strv_free(&hidden);
	return r;
}

/* A run between the policy's judgement and its start. */
struct pending_run {
	struct run_request req;
	char *workspace, *cwd;
	struct call *c;
};

static void pending_run_free(struct pending_run *pr)
{
	free(pr->workspace);
	free(pr->cwd);
	free(pr);
}

static void run_go(void *data)
{
	struct pending_run *pr = data;

	if (!call_spd(pr->c)->sbx) {
		/* spd began stopping while the run waited. */
		call_error(pr->c, RPC_E_INTERNAL, NULL,
			   "spd is stopping: the command was not run");
		if (pr->req.done_cancel)
			pr->req.done_cancel(pr->req.done_data);
	} else if (run_start(pr->c, &pr->req) < 0 && pr->req.done_cancel) {
		pr->req.done_cancel(pr->req.done_data);
	}
	pending_run_free(pr);
}

static void run_allowed(struct call *c, void *data)
{
	struct pending_run *pr = data;

	trace_stamp("allowed");
	pr->c = c;
	if (pr->req.start_wait && pr->req.start_wait(&pr->req, run_go, pr))
		return; /* goes on in run_go */
	run_go(pr);
}

static void run_refused(void *data)
{
	struct pending_run *pr = data;

	if (pr->req.done_cancel)
		pr->req.done_cancel(pr->req.done_data);
	pending_run_free(pr);
}

/* The enum sbx_net of a cmd.run's "net" (never "broker": that is spctl
 * agent's), or -1. */
static int net_parse(const char *net)
{
	static const char *const names[] = {
	    [SBX_NET_NONE] = "none",
	    [SBX_NET_LOOPBACK] = "loopback",
	    [SBX_NET_HOST] = "host",
	    [SBX_NET_PROXY] = "proxy",
	};

	for (size_t i = 0; net && i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i] && strcmp(net, names[i]) == 0)
			return (int)i;
	return -1;
}

/*
 * cmd.run's params into req: the network (an agent's is the broker only),
 * the agent's turn cap, the timeout, the sandbox mode (best-effort only
 * for the operator), and what an agent may not ask for (a workspace, the
 * host network, writable paths).  Returns 0, or -1 having answered c.
 */
static int run_params(struct call *c, struct run_request *req)
{
	struct spd *spd = call_spd(c);
	const struct call_principal *who = call_principal(c);
	json_t *p = call_params(c), *v;
	const char *net = "none", *mode = NULL;
	json_int_t timeout = spd->config.default_timeout_ms / 1000;

	if ((v = json_object_get(p, "net")))
		net = json_string_value(v);
	if ((req->net = net_parse(net)) < 0) {
		call_error(c, RPC_E_BAD_PARAMS, NULL,
			   "net must be none, loopback, proxy or host");
		return -1;
	}
	req->stdin_pipe = json_is_true(json_object_get(p, "stdin"));
	req->merge_stderr = json_is_true(json_object_get(p, "merge_stderr"));
	if (json_is_true(json_object_get(p, "agent"))) {
		char msg[256];

		if (req->net != SBX_NET_NONE) {
			call_error(c, RPC_E_BAD_PARAMS, NULL,
				   "an agent's network is the broker only");
			return -1;
		}
		if (broker_cap_for(spd, who->operator,
				   json_object_get(p, "cap_usd"),
				   &req->agent_cap, msg, sizeof(msg)) < 0) {
			call_error(c, RPC_E_BAD_PARAMS, NULL, "%s", msg);
			return -1;
		}
		req->agent = true;
		req->net = SBX_NET_BROKER;
	} else if (json_object_get(p, "cap_usd")) {
		call_error(c, RPC_E_BAD_PARAMS, NULL,
			   "cap_usd is for an agent's run (\"agent\": "
			   "true)");
		return -1;
	}
	if ((v = json_object_get(p, "timeout"))) {
		timeout = json_integer_value(v);
		if (timeout <= 0 || timeout > CONFIG_TIMEOUT_MAX_S) {
			call_error(c, RPC_E_BAD_PARAMS, NULL,
				   "timeout must be 1..%d seconds",
				   CONFIG_TIMEOUT_MAX_S);
			return -1;
		}
	}
	req->timeout_ms = (uint32_t)timeout * 1000u;
	req->best_effort = spd->config.sandbox_mode == SPD_SANDBOX_BEST_EFFORT;
	if ((v = json_object_get(p, "mode"))) {
		mode = json_string_value(v);
		if (strcmp(mode, "required") == 0) {
			req->best_effort = false;
		} else if (strcmp(mode, "best-effort") == 0) {
			/* Weakening the sandbox is the operator's choice,
			 * never an agent's. */
			if (!who->operator) {
				call_error(c, RPC_E_UNAUTHORIZED, NULL,
					   "only the operator may choose "
					   "best-effort sandboxing");
				return -1;
			}
			req->best_effort = true;
		} else {
			call_error(c, RPC_E_BAD_PARAMS, NULL,
				   "mode must be required or best-effort");
			return -1;
		}
	}
	if (!who->operator) {
		/* An agent never chooses where it works: its session does. */
		if (json_object_get(p, "workspace")) {
			call_error(c, RPC_E_UNAUTHORIZED, NULL,
				   "an agent runs only in its session's "
				   "workspace");
			return -1;
		}
		if (req->net == SBX_NET_HOST) {
			call_error(c, RPC_E_POLICY_DENIED, NULL,
				   "the host network is for the operator "
				   "only");
			return -1;
		}
		if (json_array_size(req->writable) > 0) {
			call_error(c, RPC_E_UNAUTHORIZED, NULL,
				   "only the operator may add writable "
				   "paths");
			return -1;
		}
	}
	return 0;
}

static void run_prepared(struct call *c, const struct run_request *prepared);

void m_cmd_run(struct call *c)
{
	struct spd *spd = call_spd(c);
	json_t *p = call_params(c);
	struct run_request req = {0};

	trace_stamp("cmd.run");
	req.argv = json_object_get(p, "argv");
	req.env = json_object_get(p, "env");
	req.writable = json_object_get(p, "writable");
	call_set_summary(c, "%s",
			 json_string_value(json_array_get(req.argv, 0)) ?: "?");
	if (run_params(c, &req) < 0)
		return;
	if (!spd->sbx) {
		call_error(c, RPC_E_SANDBOX_UNAVAILABLE, NULL,
			   "sandboxd is not running");
		return;
	}
	/* Agents run in their session's worktree; the hook fills workspace
	 * (and may refuse) when sessions are enabled. */
	req.prepared = run_prepared;
	if (spd->run_prepare) {
		int r = spd->run_prepare(spd, c, &req);

		if (r != 0)
			return; /* finished, or goes on in run_prepared */
	}
	run_prepared(c, &req);
}

static void run_prepared(struct call *c, const struct run_request *prepared)
{
	struct pending_run *pr = NULL;
	struct spd *spd = call_spd(c);
	const struct call_principal *who = call_principal(c);
	json_t *p = call_params(c), *v;
	struct run_request req = *prepared;
	char *workspace = NULL, *cwd = NULL;

	trace_stamp("prepared");
	if (!req.workspace) {
		if (!who->operator) {
			call_error(c, RPC_E_UNAUTHORIZED, NULL,
				   "an agent runs only in its session");
			return;
		}
		v = json_object_get(p, "workspace");
		if (!v) {
			call_error(c, RPC_E_BAD_PARAMS, NULL,
				   "workspace is required");
			return;
		}
		workspace = resolve_dir(json_string_value(v));
		if (!workspace) {
			call_error(c, RPC_E_BAD_PARAMS, NULL,
				   "workspace %s is not an existing "
				   "directory",
				   json_string_value(v));
			return;
		}
		if (!workspace_acceptable(spd, workspace, c)) {
			free(workspace);
			return;
		}
		req.workspace = workspace;
	}
	if ((v = json_object_get(p, "cwd"))) {
		cwd = resolve_dir(json_string_value(v));
		if (!cwd || !paths_under(cwd, req.workspace)) {
			call_error(c, RPC_E_PATH_ESCAPE, NULL,
				   "cwd must be a directory inside the "
				   "workspace");
			goto out;
		}
		req.cwd = cwd;
	}
	/* The policy judges exactly the argv that will be handed to
	 * sandboxd: the same JSON array, resolved against the same
	 * workspace and cwd. */
	pr = calloc(1, sizeof(*pr));
	if (!pr) {
		call_error(c, RPC_E_INTERNAL, NULL, "out of memory");
		goto out;
	}
	pr->req = req;
	pr->workspace = workspace ? steal_ptr(workspace) : NULL;
	pr->cwd = steal_ptr(cwd);
	req.done_cancel = NULL;
	gate_check(
	    c,
	    &(struct gate_call){
		.kind = POLICY_CALL_EXEC,
		.argv = req.argv,
		.env = req.env,
		.cwd = pr->req.cwd,
		/* Broker and proxy are none with one door spd
			* keeps: each host is judged as it is asked for. */
		.net = req.net == SBX_NET_BROKER || req.net == SBX_NET_PROXY
			   ? POLICY_NET_NONE
			   : (enum policy_net)req.net,
		.net_name = req.net == SBX_NET_PROXY	? "proxy"
			    : req.net == SBX_NET_BROKER ? "broker"
							: NULL,
		.workspace = pr->req.workspace,
		.in_place = req.in_place,
		.session_id = req.session_id,
	    },
	    run_allowed, run_refused, pr);
	return;
out:
	if (req.done_cancel)
		req.done_cancel(req.done_data);
	free(workspace);
	free(cwd);
}

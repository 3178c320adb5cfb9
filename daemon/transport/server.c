/*
 * The client socket (daemon/transport/server.h): connections, peer
 * credentials, frames, admission and dispatch.  The call machinery of
 * call.h is call.c's, journal.follow's followers follow.c's; what the
 * three share is conn.h.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

#include "daemon/transport/server.h"
#include "common/trace.h"
#include "daemon/transport/auth.h"
#include "daemon/transport/call.h"
#include "daemon/transport/conn.h"
#include "daemon/transport/dispatch.h"
#include "daemon/journal/journal.h"
#include "daemon/log.h"
#include "daemon/transport/quota.h"
#include "daemon/transport/rpc.h"
#include "daemon/spd.h"
#include "common/buf.h"
#include "common/redact.h"
#include "common/util.h"

struct conn;

struct write_req {
	uv_write_t req;
	size_t len;
	char data[];
};

static void conn_close(struct conn *c);

/* ---- writing -------------------------------------------------------- */

static void on_written(uv_write_t *req, int status)
{
	struct write_req *w = (struct write_req *)req;
	struct conn *c = (struct conn *)req->handle;

	if (c && c->outbuf >= w->len)
		c->outbuf -= w->len;
	free(w);
}

/*
 * Every line spd sends passes the redactor: a key that reached a reply by
 * any path (an error message, a file's contents, a journal row, output)
 * leaves as [redacted:NAME].  The JSON-escaped forms are among the
 * patterns, so matching the encoded line finds what the strings held.  A
 * line that no longer parses after redaction (a secret straddling JSON
 * syntax) is replaced by an error rather than sent half-redacted.
 */
static char *redact_line(struct spd *spd, char *line, size_t *len)
{
	char *out = NULL;
	size_t n = 0;
	json_t *probe;
	int r;

	/* One pass that allocates nothing for the common line with no
	 * secret in it; the copying pass only when there is one. */
	if (!spd->redact || redact_contains(spd->redact, line, *len) == 0)
		return line;
	r = redact_buf(spd->redact, line, *len, &out, &n);
	if (r == 0) {
		free(out);
		return line;
	}
	free(line);
	if (r > 0) {
		probe = json_loadb(out, n, JSON_DECODE_ANY, NULL);
		if (probe) {
			json_decref(probe);
			*len = n;
			return out;
		}
	}
	free(out);
	out = rpc_format_error(json_null(), RPC_E_INTERNAL,
			       "a message was withheld: it held a secret that "
			       "could not be redacted cleanly",
			       NULL, len);
	return out;
}

/* Queue len bytes (taking ownership of line).  A client that lets more
 * than SERVER_MAX_OUTBUF pile up is disconnected. */
int conn_send(struct conn *c, char *line, size_t len)
{
	struct write_req *w;
	uv_buf_t b;
	int r;

	if (line && c && !c->closing)
		line = redact_line(c->srv->spd, line, &len);
	if (!line)
		return -ENOMEM;
	if (!c || c->closing) {
		free(line);
		return -EPIPE;
	}
	if (c->outbuf + len > SERVER_MAX_OUTBUF) {
		free(line);
		log_warn("client pid %d is not reading its replies; "
			 "disconnecting",
			 (int)c->peer_pid);
		conn_close(c);
		return -EPIPE;
	}
	/* Replies made while a read is being processed are gathered and
	 * written once at its end: a pipelining client gets one write for
	 * a burst instead of one per reply. */
	if (c->batching) {
		r = buf_append(&c->wbatch, line, len);
		free(line);
		if (r < 0)
			return r;
		c->outbuf += len;
		return 0;
	}
	w = malloc(sizeof(*w) + len);
	if (!w) {
		free(line);
		return -ENOMEM;
	}
	memcpy(w->data, line, len);
	free(line);
	w->len = len;
	b = uv_buf_init(w->data, (unsigned)len);
	r = uv_write(&w->req, (uv_stream_t *)&c->pipe, &b, 1, on_written);
	if (r < 0) {
		free(w);
		conn_close(c);
		return -EPIPE;
	}
	c->outbuf += len;
	return 0;
}

/* Write what a read's processing gathered, in one write. */
static void conn_flush_batch(struct conn *c)
{
	struct write_req *w;
	uv_buf_t b;
	size_t len = c->wbatch.len;

	c->batching = false;
	if (len == 0 || c->closing) {
		buf_reset(&c->wbatch);
		return;
	}
	w = malloc(sizeof(*w) + len);
	if (!w) {
		c->outbuf -= len;
		buf_reset(&c->wbatch);
		conn_close(c);
		return;
	}
	memcpy(w->data, c->wbatch.data, len);
	w->len = len;
	buf_reset(&c->wbatch);
	b = uv_buf_init(w->data, (unsigned)len);
	if (uv_write(&w->req, (uv_stream_t *)&c->pipe, &b, 1, on_written) < 0) {
		free(w);
		conn_close(c);
	}
}

static void send_error(struct conn *c, json_t *id, enum rpc_error e,
		       const char *msg)
{
	size_t len = 0;
	char *line = rpc_format_error(id, e, msg, NULL, &len);

	conn_send(c, line, len);
}

/* ---- reading and dispatch ------------------------------------------- */

static void refuse(struct conn *c, struct call_principal *who, json_t *id,
		   const char *method, enum rpc_error e, const char *msg)
{
	journal_request(c->srv->spd, who,
			e == RPC_E_UNAUTHORIZED ? "auth.refused" : "request",
			method, rpc_error_code(e), 0, msg, NULL);
	if (id)
		send_error(c, id, e, msg);
}

static int authenticate(struct conn *c, const char *token,
			struct call_principal *who, char **ret_session)
{
	struct spd *spd = c->srv->spd;
	char *sid = NULL;

	if (token && auth_token_equal(spd->operator_token, token)) {
		who->operator= true;
		return 0;
	}
	if (token && spd->session_auth &&
	    spd->session_auth(spd, token, &sid) == 0) {
		*ret_session = sid;
		who->session_id = sid;
		return 0;
	}
	if (!token && c->authed_operator) {
		who->operator= true;
		return 0;
	}
	if (!token && c->authed_session) {
		sid = strdup(c->authed_session);
		if (!sid)
			return -ENOMEM;
		*ret_session = sid;
		who->session_id = sid;
		return 0;
	}
	return -EACCES;
}

/* A quota refusal: the error goes to the client but is not journaled
 * (quota_take journals the first one of an episode), so that a refused
 * flood cannot grow the journal. */
static void refuse_quota(struct conn *c, json_t *id, enum quota_kind kind,
			 const char *msg)
{
	struct spd *spd = c->srv->spd;
	size_t len = 0;
	char *line;

	line = rpc_format_error(id ? id : json_null(), RPC_E_LIMIT, msg,
				json_pack("{s:s, s:i}", "quota",
					  quota_kind_name(kind), "limit",
					  (int)quota_limit(spd->quota, kind)),
				&len);
	conn_send(c, line, len);
}

/* The connection now belongs to the operator: it leaves the shared
 * slots, so sessions may use the one it held. */
static void conn_mark_operator(struct conn *c)
{
	if (c->in_shared) {
		c->in_shared = false;
		c->srv->nshared--;
	}
	c->in_reserve = false;
}

/*
 * Apply the connection's and the session's limits to an authenticated
 * request: the operator's reserve, the session's connection quota and its
 * journal rate.  Returns 0 to go on, or -1 after refusing (and maybe
 * closing the connection).
 */
static int admit(struct conn *c, const struct call_principal *who, json_t *id)
{
	struct spd *spd = c->srv->spd;
	uint64_t now = uv_now(spd->loop);
	char msg[200];

	c->authenticated = true;
	if (who->operator) {
		conn_mark_operator(c);
		return 0;
	}
	if (c->in_reserve) {
		/* Not journaled: whoever fills every slot would otherwise
		 * fill the journal too. */
		send_error(c, id ? id : json_null(), RPC_E_LIMIT,
			   "too many connections: the remaining ones are held "
			   "for the operator");
		conn_close(c);
		return -1;
	}
	if (!who->session_id)
		return 0;
	if (!c->quota_sid || strcmp(c->quota_sid, who->session_id) != 0) {
		char *sid = strdup(who->session_id);

		if (!sid || quota_take(spd->quota, sid, QUOTA_CONNS, now) < 0) {
			free(sid);
			snprintf(msg, sizeof(msg),
				 "too many connections for this session (its "
				 "quota is %u)",
				 quota_limit(spd->quota, QUOTA_CONNS));
			refuse_quota(c, id, QUOTA_CONNS, msg);
			conn_close(c);
			return -1;
		}
		if (c->quota_sid)
			quota_put(spd->quota, c->quota_sid, QUOTA_CONNS);
		free(c->quota_sid);
		c->quota_sid = sid;
	}
	if (quota_take(spd->quota, who->session_id, QUOTA_JOURNAL_RATE, now) <
	    0) {
		snprintf(msg, sizeof(msg),
			 "too many requests from this session this minute (its "
			 "quota is %u)",
			 quota_limit(spd->quota, QUOTA_JOURNAL_RATE));
		refuse_quota(c, id, QUOTA_JOURNAL_RATE, msg);
		return -1;
	}
	return 0;
}

static void handle_frame(struct conn *c, const char *frame, size_t len)
{
	struct spd *spd = c->srv->spd;
	struct rpc_request req;
	struct rpc_parse_error perr;
	struct call_principal who = {.peer_uid = c->peer_uid,
				     .peer_pid = c->peer_pid};
	struct call *call;
	char *sid = NULL;
	const char *mname;

	if (rpc_parse(frame, len, &req, &perr) < 0) {
		/* Parse errors and invalid requests always get a reply
		 * (id null when unknown), as JSON-RPC 2.0 says. */
		journal_request(spd, &who, "request", NULL,
				rpc_error_code(perr.code), 0, perr.message,
				NULL);
		send_error(c, perr.id ? perr.id : json_null(), perr.code,
			   perr.message);
		json_decref(perr.id);
		return;
	}
	mname = rpc_method_name((enum rpc_method)req.method);
	if (authenticate(c, req.token, &who, &sid) < 0) {
		refuse(c, &who, req.id, mname, RPC_E_UNAUTHORIZED,
		       req.token ? "invalid token" : "a token is required");
		goto out;
	}
	/* Before anything that journals: a session's refused requests count
	 * against its journal rate too. */
	if (admit(c, &who, req.id) < 0)
		goto out;
	if (rpc_method_who((enum rpc_method)req.method) == RPC_WHO_OPERATOR &&
	    !who.operator) {
		refuse(c, &who, req.id, mname, RPC_E_UNAUTHORIZED,
		       "this method needs the operator token");
		goto out;
	}
	if (req.method == RPC_M_AUTH) {
		/* Authenticate the connection once for later requests. */
		if (who.operator) {
			c->authed_operator = true;
		} else {
			free(c->authed_session);
			c->authed_session = sid ? strdup(sid) : NULL;
		}
	}
	if (c->inflight >= SERVER_MAX_INFLIGHT) {
		refuse(c, &who, req.id ? req.id : json_null(), mname,
		       RPC_E_LIMIT, "too many requests in flight");
		conn_close(c);
		goto out;
	}
	call = calloc(1, sizeof(*call));
	if (!call) {
		refuse(c, &who, req.id, mname, RPC_E_INTERNAL, "out of memory");
		goto out;
	}
	call->spd = spd;
	call->conn = c;
	call->method = (enum rpc_method)req.method;
	call->id = steal_ptr(req.id);
	call->params = steal_ptr(req.params);
	call->who = who;
	call->session_id = steal_ptr(sid);
	call->who.session_id = call->session_id;
	call->start_ns = uv_hrtime();
	call->next = c->calls;
	if (c->calls)
		c->calls->prev = call;
	c->calls = call;
	c->inflight++;
	dispatch_call(call);
out:
	free(sid);
	rpc_request_free(&req);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
	struct conn *c = (struct conn *)h;
	size_t want = 64 * 1024;

	if (buf_reserve(&c->in, want) < 0) {
		*b = uv_buf_init(NULL, 0);
		return;
	}
	*b = uv_buf_init(c->in.data + c->in.len, (unsigned)want);
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
	struct conn *c = (struct conn *)st;
	size_t start = 0;

	if (n < 0) {
		conn_close(c);
		return;
	}
	if (n == 0)
		return;
	trace_stamp("read");
	c->in.len += (size_t)n;
	c->batching = true;
	for (;;) {
		char *nl = memchr(c->in.data + start, '\n', c->in.len - start);
		size_t flen;

		if (!nl)
			break;
		flen = (size_t)(nl - (c->in.data + start));
		if (flen > RPC_FRAME_MAX) {
			send_error(c, json_null(), RPC_E_FRAME_TOO_LARGE,
				   "frame larger than 1 MiB");
			conn_close(c);
			return;
		}
		/* Tolerate CRLF from hand-typed clients. */
		if (flen && c->in.data[start + flen - 1] == '\r')
			handle_frame(c, c->in.data + start, flen - 1);
		else if (flen)
			handle_frame(c, c->in.data + start, flen);
		start += flen + 1;
		if (c->closing)
			return;
	}
	conn_flush_batch(c);
	buf_consume(&c->in, start);
	if (c->in.len > RPC_FRAME_MAX) {
		struct call_principal who = {.peer_uid = c->peer_uid,
					     .peer_pid = c->peer_pid};
		journal_request(c->srv->spd, &who, "request", NULL,
				"FRAME-TOO-LARGE", 0, NULL, NULL);
		send_error(c, json_null(), RPC_E_FRAME_TOO_LARGE,
			   "frame larger than 1 MiB");
		conn_close(c);
	}
}

/* ---- connections ---------------------------------------------------- */

static void server_maybe_done(struct server *s);

static void on_conn_closed(uv_handle_t *h)
{
	struct conn *c = (struct conn *)h;
	struct server *s = c->srv;

	s->closing_conns--;
	buf_free(&c->in);
	buf_free(&c->wbatch);
	free(c->authed_session);
	free(c->quota_sid);
	free(c);
	server_maybe_done(s);
}

static void server_maybe_done(struct server *s);

static void conn_close(struct conn *c)
{
	struct server *s = c->srv;
	struct call *call, *next;

	if (c->closing)
		return;
	/* Replies gathered so far (an error explaining this close among
	 * them) still go out: libuv writes at once when it can. */
	if (c->batching)
		conn_flush_batch(c);
	c->closing = true;
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	s->nconns--;
	if (c->in_shared)
		s->nshared--;
	c->in_shared = c->in_reserve = false;
	if (c->quota_sid)
		quota_put(s->spd->quota, c->quota_sid, QUOTA_CONNS);
	/* Calls outlive their connection: tell each handler its client has
	 * gone (a run is killed, a follower stops) and detach them. */
	for (call = c->calls; call; call = next) {
		next = call->next;
		call->conn = NULL;
		call->next = call->prev = NULL;
		if (call->gone_cb) {
			void (*cb)(void *) = call->gone_cb;
			call->gone_cb = NULL;
			cb(call->gone_data);
		}
	}
	c->calls = NULL;
	uv_read_stop((uv_stream_t *)&c->pipe);
	s->closing_conns++;
	uv_close((uv_handle_t *)&c->pipe, on_conn_closed);
}

static unsigned operator_reserve(const struct server *s)
{
	return s->spd->config.operator_conns < SERVER_MAX_CONNS
		   ? s->spd->config.operator_conns
		   : SERVER_MAX_CONNS - 1;
}

static uint64_t auth_timeout_ms(const struct server *s)
{
	return s->spd->config.auth_timeout_ms
		   ? s->spd->config.auth_timeout_ms
		   : QUOTA_AUTH_TIMEOUT_S_DEFAULT * 1000u;
}

/* Close the oldest connection other than keep that has not
 * authenticated.  Returns true if one was closed. */
static bool evict_unauthenticated(struct server *s, struct conn *keep)
{
	struct conn *oldest = NULL;

	/* The list is newest first. */
	for (struct conn *c = s->conns; c; c = c->next)
		if (c != keep && !c->authenticated && !c->closing)
			oldest = c;
	if (!oldest)
		return false;
	send_error(oldest, json_null(), RPC_E_LIMIT,
		   "too many connections: closing one that never "
		   "authenticated");
	conn_close(oldest);
	return true;
}

/* Close every connection that has held no valid token past the deadline.
 * Not journaled one by one: a flood of idle connections would otherwise
 * flood the journal; the log says how many. */
static void on_auth_sweep(uv_timer_t *t)
{
	struct server *s = (struct server *)t->data;
	uint64_t now = uv_now(s->spd->loop), limit = auth_timeout_ms(s);
	unsigned closed = 0, waiting = 0;
	struct conn *c, *next;
	char msg[120];

	snprintf(msg, sizeof(msg),
		 "no valid token within %llu s; closing the connection",
		 (unsigned long long)(limit / 1000));
	for (c = s->conns; c; c = next) {
		next = c->next;
		if (c->authenticated || c->closing)
			continue;
		if (now - c->accepted_ms < limit) {
			waiting++;
			continue;
		}
		send_error(c, json_null(), RPC_E_LIMIT, msg);
		conn_close(c);
		closed++;
	}
	if (closed)
		log_info("closed %u connection%s that did not authenticate "
			 "within %llu ms",
			 closed, closed == 1 ? "" : "s",
			 (unsigned long long)limit);
	if (!waiting)
		uv_timer_stop(t);
}

static void on_connection(uv_stream_t *listener, int status)
{
	struct server *s = (struct server *)listener;
	struct conn *c;
	uv_os_fd_t fd;

	if (status < 0)
		return;
	c = calloc(1, sizeof(*c));
	if (!c)
		return;
	c->srv = s;
	c->serial = ++s->conn_serial;
	uv_pipe_init(s->spd->loop, &c->pipe, 0);
	if (uv_accept(listener, (uv_stream_t *)&c->pipe) < 0) {
		uv_close((uv_handle_t *)&c->pipe, (uv_close_cb)free);
		return;
	}
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	s->nconns++;
	if (uv_fileno((uv_handle_t *)&c->pipe, &fd) < 0 ||
	    auth_peer_cred(fd, &c->peer_uid, &c->peer_pid) < 0) {
		conn_close(c);
		return;
	}
	/* Only the operator's own uid may talk to spd at all; root is not
	 * special here (a root client of a user's spd is another user). */
	if (c->peer_uid != geteuid()) {
		struct call_principal who = {.peer_uid = c->peer_uid,
					     .peer_pid = c->peer_pid};
		log_warn("refused a connection from uid %u (pid %d)",
			 (unsigned)c->peer_uid, (int)c->peer_pid);
		journal_request(s->spd, &who, "auth.refused", NULL,
				"UNAUTHORIZED", 0, "peer of another uid", NULL);
		send_error(c, json_null(), RPC_E_UNAUTHORIZED,
			   "connection from another uid refused");
		conn_close(c);
		return;
	}
	/* When every slot is taken, the oldest connection that never
	 * authenticated makes room: idle connections must not keep out a
	 * client that is about to present its token. */
	if (s->nconns > SERVER_MAX_CONNS && !evict_unauthenticated(s, c)) {
		send_error(c, json_null(), RPC_E_LIMIT, "too many connections");
		conn_close(c);
		return;
	}
	c->accepted_ms = uv_now(s->spd->loop);
	if (s->nshared + operator_reserve(s) < SERVER_MAX_CONNS) {
		c->in_shared = true;
		s->nshared++;
	} else {
		c->in_reserve = true;
	}
	if (!uv_is_active((uv_handle_t *)&s->auth_timer))
		uv_timer_start(&s->auth_timer, on_auth_sweep,
			       SERVER_AUTH_SWEEP_MS, SERVER_AUTH_SWEEP_MS);
	uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read);
}

int server_start(struct spd *spd, const char *path, int listen_fd,
		 struct server **ret)
{
	struct server *s = calloc(1, sizeof(*s));
	mode_t old;
	int r;

	if (!s)
		return -ENOMEM;
	s->spd = spd;
	uv_pipe_init(spd->loop, &s->listener, 0);
	if (listen_fd >= 0) {
		r = uv_pipe_open(&s->listener, listen_fd);
		if (r < 0)
			goto fail;
	} else {
		if (strlen(path) >=
		    sizeof(((struct sockaddr_un *)0)->sun_path)) {
			r = -ENAMETOOLONG;
			goto fail;
		}
		/* We hold the pid-file lock, so a socket file here is a
		 * stale one from a crashed spd. */
		unlink(path);
		old = umask(0177);
		r = uv_pipe_bind(&s->listener, path);
		umask(old);
		if (r < 0)
			goto fail;
		if (chmod(path, 0600) < 0) {
			r = -errno;
			goto fail;
		}
	}
	r = uv_listen((uv_stream_t *)&s->listener, 511, on_connection);
	if (r < 0)
		goto fail;
	uv_timer_init(spd->loop, &s->auth_timer);
	s->auth_timer.data = s;
	*ret = s;
	return 0;
fail:
	uv_close((uv_handle_t *)&s->listener, (uv_close_cb)free);
	return r;
}

static void on_listener_closed(uv_handle_t *h)
{
	struct server *s = (struct server *)h;

	s->listener.data = (void *)1;
	server_maybe_done(s);
}

static void on_auth_timer_closed(uv_handle_t *h)
{
	struct server *s = h->data;

	s->auth_timer_closed = true;
	server_maybe_done(s);
}

static void server_maybe_done(struct server *s)
{
	void (*cb)(void *);
	void *data;

	if (!s->closing || s->nconns > 0 || s->closing_conns > 0 ||
	    s->listener.data != (void *)1 || !s->auth_timer_closed)
		return;
	cb = s->close_cb;
	data = s->close_data;
	s->close_cb = NULL;
	free(s);
	if (cb)
		cb(data);
}

void server_close(struct server *s, void (*cb)(void *data), void *data)
{
	if (!s) {
		if (cb)
			cb(data);
		return;
	}
	s->closing = true;
	s->close_cb = cb;
	s->close_data = data;
	s->listener.data = NULL;
	uv_close((uv_handle_t *)&s->listener, on_listener_closed);
	uv_close((uv_handle_t *)&s->auth_timer, on_auth_timer_closed);
	while (s->conns)
		conn_close(s->conns);
}

unsigned server_connections(const struct server *s)
{
	return s ? s->nconns : 0;
}

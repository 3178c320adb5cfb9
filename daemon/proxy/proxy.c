/*
 * The egress proxy's connections (proxy.h): read one request head,
 * decide, resolve in spd, connect to the address resolved, then pass
 * bytes both ways, one read in flight per direction (the slower side
 * sets the pace: no unbounded buffering).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <http_parser.h>
#include <jansson.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <uv.h>

#include "daemon/ask.h"
#include "daemon/journal/journal.h"
#include "daemon/log.h"
#include "daemon/proxy/proxy.h"
#include "daemon/proxy/proxy_priv.h"
#include "daemon/session/labels.h"
#include "daemon/session/session.h"
#include "daemon/spd.h"
#include "daemon/transport/quota.h"

static void port_maybe_free(struct proxy_port *p)
{
	if (p->closing && !p->listener_open && p->nconns == 0) {
		while (p->asks) {
			struct pask *a = p->asks;
			p->asks = a->next;
			free(a->said);
			free(a);
		}
		proxy_project_free(p->project);
		free(p->push_ref);
		free(p->push_gitdir);
		free(p->push_worktree);
		free(p->refusals);
		free(p->workspace);
		free(p->session);
		free(p);
	}
}

/* Journal a row of c's connection; a session's lists the session's
 * labels, with label (NULL: none) that enters at it.  The row's id, or
 * < 0. */
static int64_t journal_event_label(struct pconn *c, const char *kind, json_t *d,
				   const char *label)
{
	struct session_store *st = c->port->spd->sessions;
	const char *sid = c->port->session;
	char subject[PROXY_HOST_MAX + 8];
	int64_t row;

	if (sid && st && d) {
		json_t *set = session_labels_json(st, sid);

		if (set && label && !session_label_has(st, sid, label))
			json_array_append_new(set, json_string(label));
		if (set)
			json_object_set_new(d, "labels", set);
	}
	snprintf(subject, sizeof(subject), "%s:%u", c->host, c->dport);
	row = journal_append_json(c->port->spd->journal, sid, c->port->actor,
				  kind, subject, d, 0);
	if (row < 0)
		log_warn("proxy: cannot journal %s for %s", kind, subject);
	json_decref(d);
	return row;
}

static void journal_event(struct pconn *c, const char *kind, json_t *d)
{
	journal_event_label(c, kind, d, NULL);
}

/* Count a row against the session's journal rate: false when the
 * session is over it.  An operator's run is not counted. */
static bool journal_charge(struct proxy_port *p)
{
	if (!p->session || !p->spd->quota)
		return true;
	return quota_take(p->spd->quota, p->session, QUOTA_JOURNAL_RATE,
			  uv_now(p->spd->loop)) == 0;
}

/* A refusal for the journal: the first of its kind now (when the
 * session's rate allows), the repeats counted for refusals_flush. */
static void refusal_note(struct pconn *c, int status, const char *why)
{
	struct proxy_port *p = c->port;
	struct prefusal *f;

	for (size_t i = 0; i < p->nrefusals && !p->closing; i++) {
		f = &p->refusals[i];
		if (f->status == status && f->dport == c->dport &&
		    strcmp(f->host, c->host) == 0 && strcmp(f->why, why) == 0) {
			f->count++;
			return;
		}
	}
	if (!p->closing && !p->refusals)
		p->refusals = calloc(PROXY_REFUSAL_KINDS_MAX, sizeof(*f));
	if (!p->closing &&
	    (!p->refusals || p->nrefusals == PROXY_REFUSAL_KINDS_MAX)) {
		p->other_refusals++;
		return;
	}
	if (!p->closing) {
		f = &p->refusals[p->nrefusals++];
		snprintf(f->host, sizeof(f->host), "%s", c->host);
		f->dport = c->dport;
		f->status = status;
		snprintf(f->why, sizeof(f->why), "%s", why);
		if (!journal_charge(p)) {
			f->count = 1;
			return;
		}
	}
	if (c->host[0])
		journal_event(c, "net.proxy",
			      json_pack("{s:s, s:i, s:s, s:s}", "host", c->host,
					"port", (int)c->dport, "decision",
					"deny", "why", why));
	else
		journal_event(
		    c, "net.proxy",
		    json_pack("{s:s, s:s}", "decision", "deny", "why", why));
}

/* The counted refusals, one row per kind with its count (the run
 * ended): a bounded number of rows however many there were, not
 * charged to the session's rate, so that none is lost. */
static void refusals_flush(struct proxy_port *p)
{
	for (size_t i = 0; i < p->nrefusals; i++) {
		struct prefusal *f = &p->refusals[i];
		json_t *d;
		char *text, subject[PROXY_HOST_MAX + 8];

		if (!f->count)
			continue;
		d = json_pack("{s:s, s:i, s:s, s:s, s:i, s:I}", "host", f->host,
			      "port", (int)f->dport, "decision", "deny", "why",
			      f->why, "status", f->status, "count",
			      (json_int_t)f->count);
		text = d ? json_dumps(d, JSON_COMPACT) : NULL;
		snprintf(subject, sizeof(subject), "%s:%u", f->host, f->dport);
		if (!text ||
		    journal_append(p->spd->journal, p->session, p->actor,
				   "net.proxy.refused", subject, text) < 0)
			log_warn("proxy: cannot journal %llu refusals of %s",
				 (unsigned long long)f->count, subject);
		free(text);
		json_decref(d);
		f->count = 0;
	}
	if (p->other_refusals) {
		char text[160];

		snprintf(text, sizeof(text),
			 "{\"decision\":\"deny\",\"count\":%llu,"
			 "\"kinds_over\":%d}",
			 (unsigned long long)p->other_refusals,
			 PROXY_REFUSAL_KINDS_MAX);
		if (journal_append(p->spd->journal, p->session, p->actor,
				   "net.proxy.refused",
				   "refusals of other kinds", text) < 0)
			log_warn("proxy: cannot journal %llu refusals",
				 (unsigned long long)p->other_refusals);
		p->other_refusals = 0;
	}
}

static void conn_maybe_free(struct pconn *c)
{
	struct proxy_port *p = c->port;

	if (c->handles > 0 || c->gai_pending)
		return;
	if (c->prev)
		c->prev->next = c->next;
	else
		p->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	p->nconns--;
	pconn_tls_free(c);
	free(c->head);
	free(c->out);
	free(c->reply_buf);
	free(c);
	port_maybe_free(p);
}

static void on_conn_handle_closed(uv_handle_t *h)
{
	struct pconn *c = h->data;

	c->handles--;
	conn_maybe_free(c);
}

static void conn_close(struct pconn *c)
{
	if (c->closing)
		return;
	c->closing = true;
	if (c->allowed && c->state == P_TUNNEL)
		journal_event(
		    c, "net.proxy.close",
		    json_pack("{s:s, s:i, s:s, s:I, s:I, s:b}", "host", c->host,
			      "port", (int)c->dport, "address", c->address,
			      "bytes_out", (json_int_t)c->up.bytes, "bytes_in",
			      (json_int_t)c->down.bytes, "idle", c->idle));
	c->state = P_DONE;
	if (c->gai_pending)
		uv_cancel((uv_req_t *)&c->gai);
	uv_close((uv_handle_t *)&c->timer, on_conn_handle_closed);
	uv_close((uv_handle_t *)&c->client, on_conn_handle_closed);
	if (c->upstream_open)
		uv_close((uv_handle_t *)&c->upstream, on_conn_handle_closed);
}

static void on_reply_written(uv_write_t *w, int status)
{
	(void)status;
	conn_close(w->data);
}

/* Answer status with a one-line reason and close: what the tool prints
 * (curl shows the status, npm and pip the reason). */
static void refuse(struct pconn *c, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void refuse(struct pconn *c, int status, const char *fmt, ...)
{
	char why[300];
	va_list ap;
	uv_buf_t b;
	int n;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	refusal_note(c, status, why);
	uv_timer_stop(&c->timer);
	n = asprintf(&c->reply_buf,
		     "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\n"
		     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s\n",
		     status,
		     status == 403   ? "Forbidden"
		     : status == 502 ? "Bad Gateway"
		     : status == 408 ? "Request Timeout"
				     : "Bad Request",
		     strlen(why) + 1, why);
	if (n < 0) {
		c->reply_buf = NULL;
		conn_close(c);
		return;
	}
	c->state = P_DONE;
	uv_read_stop((uv_stream_t *)&c->client);
	b = uv_buf_init(c->reply_buf, (unsigned)n);
	c->reply.data = c;
	if (uv_write(&c->reply, (uv_stream_t *)&c->client, &b, 1,
		     on_reply_written) < 0)
		conn_close(c);
}

/* ---- the tunnel ---------------------------------------------------- */

static void dir_alloc(uv_handle_t *h, size_t hint, uv_buf_t *ret)
{
	struct pconn *c = h->data;
	struct pdir *d = h == (uv_handle_t *)&c->client ? &c->up : &c->down;

	(void)hint;
	*ret = uv_buf_init(d->buf, sizeof(d->buf));
}

static void dir_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b);

static void on_dir_written(uv_write_t *w, int status)
{
	struct pdir *d = w->data;

	d->writing = false;
	if (status < 0 || d->c->closing) {
		conn_close(d->c);
		return;
	}
	if (uv_read_start(d->from, dir_alloc, dir_read) < 0)
		conn_close(d->c);
}

static void on_dir_shut(uv_shutdown_t *sh, int status)
{
	struct pdir *d = sh->data;

	(void)status;
	if (d->c->up.eof && d->c->down.eof)
		conn_close(d->c);
}

static void dir_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
	struct pconn *c = s->data;
	struct pdir *d = s == (uv_stream_t *)&c->client ? &c->up : &c->down;
	uv_buf_t out;

	if (n == 0)
		return;
	if (n == UV_EOF) {
		/* Half-close: the other side may still answer. */
		d->eof = true;
		uv_read_stop(s);
		d->sh.data = d;
		if (uv_shutdown(&d->sh, d->to, on_dir_shut) < 0)
			conn_close(c);
		return;
	}
	if (n < 0) {
		conn_close(c);
		return;
	}
	c->last_ms = uv_now(c->port->spd->loop);
	d->bytes += (uint64_t)n;
	uv_read_stop(s);
	d->writing = true;
	d->w.data = d;
	out = uv_buf_init(b->base, (unsigned)n);
	if (uv_write(&d->w, d->to, &out, 1, on_dir_written) < 0)
		conn_close(c);
}

/* The head's deadline passed, or in the tunnel the idle timeout may
 * have: refuse, close, or wait for the rest of the idle time. */
static void on_timer(uv_timer_t *t)
{
	struct pconn *c = t->data;
	const struct spd_config *cfg = &c->port->spd->config;
	uint64_t idle_ms = (uint64_t)cfg->proxy_idle_timeout_s * 1000u,
		 quiet = uv_now(c->port->spd->loop) - c->last_ms;

	if (c->closing)
		return;
	if (c->state == P_HEAD) {
		refuse(c, 408,
		       "no complete request head within %u s "
		       "([limits] proxy-head-timeout)",
		       cfg->proxy_head_timeout_s);
		return;
	}
	if (c->state != P_TUNNEL)
		return;
	if (quiet < idle_ms) {
		uv_timer_start(t, on_timer, idle_ms - quiet, 0);
		return;
	}
	c->idle = true;
	conn_close(c);
}

static void tunnel_start(struct pconn *c)
{
	uint64_t sent = c->up.bytes; /* the rewritten head, if any */

	c->state = P_TUNNEL;
	c->up = (struct pdir){.c = c,
			      .from = (uv_stream_t *)&c->client,
			      .to = (uv_stream_t *)&c->upstream,
			      .bytes = sent};
	c->down = (struct pdir){.c = c,
				.from = (uv_stream_t *)&c->upstream,
				.to = (uv_stream_t *)&c->client};
	c->last_ms = uv_now(c->port->spd->loop);
	uv_timer_start(
	    &c->timer, on_timer,
	    (uint64_t)c->port->spd->config.proxy_idle_timeout_s * 1000u, 0);
	if (uv_read_start(c->up.from, dir_alloc, dir_read) < 0 ||
	    uv_read_start(c->down.from, dir_alloc, dir_read) < 0)
		conn_close(c);
}

static void on_first_written(uv_write_t *w, int status)
{
	struct pconn *c = w->data;

	if (status < 0 || c->closing) {
		conn_close(c);
		return;
	}
	c->up.bytes += c->out_len;
	tunnel_start(c);
}

static void on_upstream_connected(uv_connect_t *req, int status)
{
	struct pconn *c = req->data;
	uv_buf_t b;

	if (c->closing)
		return;
	if (status < 0) {
		refuse(c, 502, "cannot connect to %s (%s) port %u: %s", c->host,
		       c->address, c->dport, uv_strerror(status));
		return;
	}
	c->allowed = true;
	{
		/* What comes back is the host's: network:HOST enters the
		 * session's labels at this row, and the host is one it has
		 * contacted. */
		char label[SESSION_LABEL_MAX + 1], what[PROXY_HOST_MAX + 16];
		struct session_store *st = c->port->spd->sessions;
		const char *sid = c->port->session;
		int64_t row;
		int r;

		snprintf(label, sizeof(label), "network:%s", c->host);
		for (char *q = label; *q; q++)
			if (*q >= 'A' && *q <= 'Z')
				*q = (char)(*q - 'A' + 'a');
		snprintf(what, sizeof(what), "%s port %u", c->host, c->dport);
		row = journal_event_label(
		    c, "net.proxy",
		    json_pack("{s:s, s:i, s:s, s:s, s:s}", "host", c->host,
			      "port", (int)c->dport, "address", c->address,
			      "method", http_method_str(c->p.method),
			      "decision", "allow"),
		    sid ? label : NULL);
		if (sid && st) {
			r = session_label_add(st, sid, label, row > 0 ? row : 0,
					      what);
			if (r >= 0)
				r = session_egress_add(st, sid, label + 8,
						       row > 0 ? row : 0);
			if (r < 0) {
				refuse(c, 502,
				       "spd cannot record that the session "
				       "contacted %s: %s",
				       c->host, strerror(-r));
				return;
			}
		}
	}
	c->state = P_TUNNEL;
	if (c->p.method == HTTP_CONNECT &&
	    proxy_terminates(&c->port->spd->config, c->host)) {
		/* A credential or request rules: spd is the TLS server the
		 * run talks to (tls.c). */
		pconn_idle_start(c);
		pconn_tls_start(c);
		return;
	}
	c->reply.data = c;
	b = uv_buf_init(c->out, (unsigned)c->out_len);
	/* up.bytes counts what the client sent; the established line of
	 * a CONNECT is spd's own and not counted. */
	if (c->p.method == HTTP_CONNECT)
		c->up.bytes -= c->out_len;
	if (uv_write(&c->reply,
		     c->p.method == HTTP_CONNECT ? (uv_stream_t *)&c->client
						 : (uv_stream_t *)&c->upstream,
		     &b, 1, on_first_written) < 0)
		conn_close(c);
}

static void connect_to(struct pconn *c, const struct sockaddr *sa)
{
	struct sockaddr_storage ss;
	int r;

	memset(&ss, 0, sizeof(ss));
	memcpy(&ss, sa,
	       sa->sa_family == AF_INET ? sizeof(struct sockaddr_in)
					: sizeof(struct sockaddr_in6));
	if (ss.ss_family == AF_INET) {
		((struct sockaddr_in *)&ss)->sin_port = htons(c->dport);
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr,
			  c->address, sizeof(c->address));
	} else {
		((struct sockaddr_in6 *)&ss)->sin6_port = htons(c->dport);
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr,
			  c->address, sizeof(c->address));
	}
	uv_tcp_init(c->port->spd->loop, &c->upstream);
	uv_tcp_nodelay(&c->upstream, 1);
	c->upstream.data = c;
	c->upstream_open = true;
	c->handles++;
	c->state = P_CONNECTING;
	c->conn.data = c;
	r = uv_tcp_connect(&c->conn, &c->upstream, (struct sockaddr *)&ss,
			   on_upstream_connected);
	if (r < 0)
		refuse(c, 502, "cannot connect to %s: %s", c->host,
		       uv_strerror(r));
}

/* Connect to the first address that may be reached, or refuse naming
 * the first that may not. */
static void resolved(struct pconn *c, const struct addrinfo *res)
{
	const struct spd_config *cfg = &c->port->spd->config;
	const struct addrinfo *bad = NULL;
	char a[INET6_ADDRSTRLEN] = "?";

	for (const struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
			continue;
		if (proxy_address_ok(cfg, ai->ai_addr)) {
			connect_to(c, ai->ai_addr);
			return;
		}
		if (!bad)
			bad = ai;
	}
	if (!bad) {
		refuse(c, 403, "%s has no IP address", c->host);
		return;
	}
	inet_ntop(
	    bad->ai_family,
	    bad->ai_family == AF_INET
		? (const void *)&((struct sockaddr_in *)bad->ai_addr)->sin_addr
		: (const void *)&((struct sockaddr_in6 *)bad->ai_addr)
		      ->sin6_addr,
	    a, sizeof(a));
	refuse(c, 403,
	       "%s resolves to %s, a %s address; [network] allow-address "
	       "must name it",
	       c->host, a, proxy_address_class(bad->ai_addr));
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
	struct pconn *c = req->data;

	c->gai_pending = false;
	if (c->closing) {
		uv_freeaddrinfo(res);
		conn_maybe_free(c);
		return;
	}
	if (status < 0)
		refuse(c, 502, "cannot resolve %s: %s", c->host,
		       uv_strerror(status));
	else
		resolved(c, res);
	uv_freeaddrinfo(res);
}

/* The test aid (spd.conf [network] resolve = NAME.test:ADDRESS, checked
 * by config.c to be under .test): true and *ret when host is listed. */
static bool test_resolve(const struct spd_config *cfg, const char *host,
			 struct sockaddr_storage *ret)
{
	size_t hlen = strlen(host);

	for (size_t i = 0; cfg->proxy_resolve && cfg->proxy_resolve[i]; i++) {
		const char *v = cfg->proxy_resolve[i], *colon = strchr(v, ':');

		if (!colon || (size_t)(colon - v) != hlen ||
		    strncasecmp(v, host, hlen) != 0)
			continue;
		memset(ret, 0, sizeof(*ret));
		if (inet_pton(AF_INET, colon + 1,
			      &((struct sockaddr_in *)ret)->sin_addr) == 1) {
			ret->ss_family = AF_INET;
			return true;
		}
		if (inet_pton(AF_INET6, colon + 1,
			      &((struct sockaddr_in6 *)ret)->sin6_addr) == 1) {
			ret->ss_family = AF_INET6;
			return true;
		}
	}
	return false;
}

static void resolve(struct pconn *c)
{
	const struct spd_config *cfg = &c->port->spd->config;
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
	struct sockaddr_storage ss;
	int r;

	if (test_resolve(cfg, c->host, &ss)) {
		struct addrinfo ai = {.ai_family = ss.ss_family,
				      .ai_addr = (struct sockaddr *)&ss};
		resolved(c, &ai);
		return;
	}
	c->state = P_RESOLVING;
	c->gai.data = c;
	r = uv_getaddrinfo(c->port->spd->loop, &c->gai, on_resolved, c->host,
			   NULL, &hints);
	if (r < 0) {
		refuse(c, 502, "cannot resolve %s: %s", c->host,
		       uv_strerror(r));
		return;
	}
	c->gai_pending = true;
}

/* ---- ask-host: a person decides ------------------------------------- */

/* Why a connection asked, for its refusal. */
static const char *ask_said(const char *rule)
{
	if (!rule || strcmp(rule, "ask.net.host") == 0)
		return "is in [network] ask-host";
	if (strcmp(rule, "ask.provenance.trifecta") == 0)
		return "would give a session that read private data and "
		       "untrusted content a way out ([provenance])";
	return "is a new destination of a session that read untrusted "
	       "content ([provenance])";
}

/* The answer for a's host and port came: each connection waiting for it
 * goes on or is refused saying why. */
static void on_decided(void *data, bool approved, const char *why)
{
	struct pask *a = data;

	a->state = approved ? ASK_GRANTED : ASK_REFUSED;
	a->id = 0;
	snprintf(a->why, sizeof(a->why), "%s", why ? why : "");
	for (struct pconn *c = a->port->conns, *next; c; c = next) {
		next = c->next;
		if (c->ask != a || c->closing)
			continue;
		c->ask = NULL;
		if (approved)
			resolve(c);
		else
			refuse(c, 403,
			       "%s port %u %s%s%s and was not approved: %s",
			       c->host, c->dport, ask_said(a->rule),
			       a->said ? ": " : "", a->said ? a->said : "",
			       a->why);
	}
}

static struct pask *ask_find(struct proxy_port *p, const char *host,
			     uint16_t dport)
{
	for (struct pask *a = p->asks; a; a = a->next)
		if (a->dport == dport && strcasecmp(a->host, host) == 0)
			return a;
	return NULL;
}

/* Ask a person about c's host and port (once per run), or use the
 * answer already given in this run: rule (static) and a reason, or NULL
 * for an ask-host rule's. */
static void ask_host(struct pconn *c, const char *rule, const char *why)
{
	struct proxy_port *p = c->port;
	struct pask *a = ask_find(p, c->host, c->dport);
	char reason[PROXY_HOST_MAX + 96];
	json_t *object;
	int64_t id;

	if (a && a->state == ASK_GRANTED) {
		resolve(c);
		return;
	}
	if (a && a->state == ASK_REFUSED) {
		refuse(c, 403, "%s port %u %s%s%s and was not approved: %s",
		       c->host, c->dport, ask_said(a->rule),
		       a->said ? ": " : "", a->said ? a->said : "", a->why);
		return;
	}
	if (!a) {
		a = calloc(1, sizeof(*a));
		object =
		    json_pack("{s:s, s:s, s:i, s:s, s:s?}", "kind", "connect",
			      "host", c->host, "port", (int)c->dport, "net",
			      "proxy", "workspace", p->workspace);
		snprintf(reason, sizeof(reason),
			 "a connection to %s port %u through the run's proxy "
			 "([network] ask-host)",
			 c->host, c->dport);
		if (why && object)
			json_object_set_new(object, "provenance",
					    json_string(why));
		id = a && object
			 ? gate_ask_person(
			       p->spd,
			       &(struct gate_ask){p->session, rule,
						  why ? why : reason, object},
			       on_decided, a)
			 : -ENOMEM;
		json_decref(object);
		if (id < 0) {
			free(a);
			refuse(c, 403,
			       "%s port %u %s, and no person can be asked: %s",
			       c->host, c->dport, ask_said(rule),
			       id == -EDQUOT   ? "the session has used all "
						 "its prompts"
			       : id == -EAGAIN ? "too many approvals are "
						 "pending"
					       : strerror((int)-id));
			return;
		}
		a->port = p;
		a->rule = rule;
		a->said = why ? strdup(why) : NULL;
		snprintf(a->host, sizeof(a->host), "%s", c->host);
		a->dport = c->dport;
		a->id = (uint64_t)id;
		a->next = p->asks;
		p->asks = a;
		if (p->on_ask && (object = gate_ask_json(p->spd, a->id))) {
			p->on_ask(p->on_ask_data, object);
			json_decref(object);
		}
	}
	c->ask = a;
	c->state = P_ASKING;
	journal_event(c, "net.proxy",
		      json_pack("{s:s, s:i, s:s, s:I}", "host", c->host, "port",
				(int)c->dport, "decision", "ask", "approval",
				(json_int_t)a->id));
}

/* ---- the request head ---------------------------------------------- */

static int on_url(http_parser *p, const char *at, size_t len)
{
	struct pconn *c = p->data;

	if (len >= sizeof(c->url) - c->url_len)
		return 1;
	memcpy(c->url + c->url_len, at, len);
	c->url_len += len;
	c->url[c->url_len] = '\0';
	return 0;
}

static int on_headers_complete(http_parser *p)
{
	http_parser_pause(p, 1);
	return 0;
}

static const http_parser_settings head_settings = {
    .on_url = on_url,
    .on_headers_complete = on_headers_complete,
};

/* Headers a proxy consumes or that would keep the upstream connection
 * open for a second request spd has not judged. */
static bool hop_header(const char *line, size_t len)
{
	static const char *const names[] = {
	    "proxy-connection:", "proxy-authorization:", "connection:",
	    "keep-alive:", "host:"};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		size_t n = strlen(names[i]);

		if (len >= n && strncasecmp(line, names[i], n) == 0)
			return true;
	}
	return false;
}

/* The origin-form request upstream sees: the path, the client's
 * end-to-end headers, Host from the URL (so a different Host header
 * cannot reach another site on the same address) and Connection: close
 * (one judged request per connection), then any bytes after the head. */
static int rewrite_plain(struct pconn *c, const struct http_parser_url *u,
			 size_t end)
{
	const char *path = u->field_set & (1 << UF_PATH)
			       ? c->url + u->field_data[UF_PATH].off
			       : "/";
	size_t cap = 2 * end + c->head_len + PROXY_HOST_MAX + 64, n;
	const char *line = memchr(c->head, '\n', end);
	char *o = malloc(cap);

	if (!o || !line)
		goto fail;
	n = (size_t)snprintf(o, cap, "%s %s HTTP/1.1\r\nHost: %s",
			     http_method_str(c->p.method), path, c->host);
	if (c->dport != 80)
		n += (size_t)snprintf(o + n, cap - n, ":%u", c->dport);
	n += (size_t)snprintf(o + n, cap - n, "\r\n");
	/* Each header line ends in CRLF upstream, whether the client ended
	 * it so or with a bare LF. */
	for (line++; line < c->head + end;) {
		const char *nl =
		    memchr(line, '\n', (size_t)(c->head + end - line));
		size_t len = (size_t)(nl - line);

		if (len > 0 && line[len - 1] == '\r')
			len--;
		if (len > 0 && !hop_header(line, len)) {
			memcpy(o + n, line, len);
			memcpy(o + n + len, "\r\n", 2);
			n += len + 2;
		}
		line = nl + 1;
	}
	n += (size_t)snprintf(o + n, cap - n, "Connection: close\r\n\r\n");
	memcpy(o + n, c->head + end, c->head_len - end);
	n += c->head_len - end;
	c->out = o;
	c->out_len = n;
	return 0;
fail:
	free(o);
	return -ENOMEM;
}

/* Refuse c when the rules refuse its host, saying which rule; true
 * then. */
static bool refused_by_rules(struct pconn *c, enum proxy_verdict v)
{
	const struct proxy_project *proj = c->port->project;

	switch (v) {
	case PROXY_ALLOW:
	case PROXY_ASK:
		return false;
	case PROXY_DENY_RULE:
		refuse(c, 403, "%s is refused by [network] deny-host", c->host);
		break;
	case PROXY_DENY_ADDRESS:
		refuse(c, 403,
		       "%s is a raw address; use a host name, or name it in "
		       "[network] allow-address",
		       c->host);
		break;
	case PROXY_DENY_UNLISTED:
		if (proxy_project_names(proj, c->host))
			refuse(c, 403,
			       "%s is in the project's .spd.conf but not in "
			       "spd.conf's [network] allow-host: a project may "
			       "only narrow the operator's list",
			       c->host);
		else
			refuse(c, 403, "%s is not in [network] allow-host",
			       c->host);
		break;
	case PROXY_DENY_PROJECT:
		if (proj && proj->error)
			refuse(c, 403, "%s is refused: %s", c->host,
			       proj->error);
		else
			refuse(c, 403,
			       "%s is refused by the project's [network] "
			       "deny-host (.spd.conf)",
			       c->host);
		break;
	case PROXY_DENY_PROJECT_UNLISTED:
		refuse(c, 403,
		       "%s is not in the project's [network] allow-host "
		       "(.spd.conf)",
		       c->host);
		break;
	}
	return true;
}

/* A plain http:// request to a host with [network "HOST"] rules is
 * decided on its method and path as a terminated host's are (tls.c):
 * refused, saying which rule, when the first match denies or none
 * matches; true then. */
static bool refused_by_request_rules(struct pconn *c,
				     const struct http_parser_url *u)
{
	const char *method = http_method_str(c->p.method);
	const struct proxy_http_rule *rule;
	char path[2048];
	bool any;

	if (u->field_set & (1 << UF_PATH))
		snprintf(path, sizeof(path), "%.*s",
			 (int)u->field_data[UF_PATH].len,
			 c->url + u->field_data[UF_PATH].off);
	else
		snprintf(path, sizeof(path), "/");
	if (c->port->push_restricted && c->p.method == HTTP_POST &&
	    strlen(path) >= 17 &&
	    strcmp(path + strlen(path) - 17, "/git-receive-pack") == 0) {
		refuse(c, 403,
		       "%s %s to %s: a git push over plain http is not read by "
		       "spd; push over https to a host with a [credential]",
		       method, path, c->host);
		return true;
	}
	rule = proxy_http_decide(&c->port->spd->config, c->host, method, path,
				 &any);
	if (!any)
		return false;
	if (proxy_path_ambiguous(path))
		refuse(c, 403,
		       "%s %s to %s: a path with dot segments or encoded "
		       "separators is refused for a host with request rules",
		       method, path, c->host);
	else if (!rule)
		refuse(c, 403,
		       "%s %s to %s: no [network \"%s\"] allow rule matches it",
		       method, path, c->host, c->host);
	else if (!rule->allow)
		refuse(c, 403, "%s %s to %s: [network \"%s\"] %s refuses it",
		       method, path, c->host, rule->host, rule->text);
	else
		return false;
	return true;
}

/* The head is complete (end: the bytes up to and including its blank
 * line): find the host and port, decide, and go on to resolve. */
static void head_done(struct pconn *c, size_t end)
{
	struct http_parser_url u;
	bool connect = c->p.method == HTTP_CONNECT;
	enum proxy_verdict v;

	http_parser_url_init(&u);
	if (http_parser_parse_url(c->url, c->url_len, connect, &u) != 0 ||
	    !(u.field_set & (1 << UF_HOST)) ||
	    u.field_data[UF_HOST].len > PROXY_HOST_MAX) {
		refuse(c, 400,
		       "not a proxy request: the target must be "
		       "host:port (CONNECT) or an http:// URL");
		return;
	}
	if (!connect && (!(u.field_set & (1 << UF_SCHEMA)) ||
			 u.field_data[UF_SCHEMA].len != 4 ||
			 strncasecmp(c->url + u.field_data[UF_SCHEMA].off,
				     "http", 4) != 0)) {
		refuse(c, 400,
		       "not a proxy request: only http:// URLs and "
		       "CONNECT are proxied");
		return;
	}
	memcpy(c->host, c->url + u.field_data[UF_HOST].off,
	       u.field_data[UF_HOST].len);
	c->host[u.field_data[UF_HOST].len] = '\0';
	c->dport = u.field_set & (1 << UF_PORT) ? u.port : 80;
	uv_timer_stop(&c->timer);
	v = proxy_decide_run(&c->port->spd->config, c->port->project, c->host);
	if (refused_by_rules(c, v))
		return;
	if (!connect && refused_by_request_rules(c, &u))
		return;
	/* The rows this connection adds (its ask or its allow, and its
	 * close) count against the session's journal rate. */
	if (!journal_charge(c->port)) {
		refuse(c, 403,
		       "the session made more journaled requests this minute "
		       "than [limits] session-journal-rate allows");
		return;
	}
	if (connect) {
		static const char ok[] = "HTTP/1.1 200 Connection established"
					 "\r\n\r\n";
		/* Bytes the client sent after the head (a TLS hello sent
		 * early) wait in the kernel: the head ends the first read
		 * of a well-behaved client, and any excess is refused. */
		if (end != c->head_len) {
			refuse(c, 400, "data after CONNECT before the reply");
			return;
		}
		c->out = strdup(ok);
		c->out_len = c->out ? strlen(ok) : 0;
	} else if (rewrite_plain(c, &u, end) < 0) {
		refuse(c, 502, "out of memory");
		return;
	}
	if (!c->out) {
		refuse(c, 502, "out of memory");
		return;
	}
	if (v == PROXY_ALLOW && c->port->session && c->port->spd->sessions) {
		const char *rule = NULL;
		char why[768];

		if (session_prov_asks(c->port->spd->sessions, c->port->session,
				      &c->port->spd->config,
				      SESSION_PROV_EGRESS, c->host, &rule, why,
				      sizeof(why), NULL)) {
			ask_host(c, rule, why);
			return;
		}
	}
	if (v == PROXY_ASK)
		ask_host(c, "ask.net.host", NULL);
	else
		resolve(c);
}

static void head_alloc(uv_handle_t *h, size_t hint, uv_buf_t *ret)
{
	struct pconn *c = h->data;

	(void)hint;
	if (!c->head)
		c->head = malloc(PROXY_HEAD_MAX);
	*ret = c->head ? uv_buf_init(c->head + c->head_len,
				     (unsigned)(PROXY_HEAD_MAX - c->head_len))
		       : uv_buf_init(NULL, 0);
}

static void head_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
	struct pconn *c = s->data;
	size_t parsed, before = c->head_len, end;

	(void)b;
	if (n == 0)
		return;
	if (n < 0) {
		conn_close(c);
		return;
	}
	parsed = http_parser_execute(&c->p, &head_settings,
				     c->head + c->head_len, (size_t)n);
	c->head_len += (size_t)n;
	if (HTTP_PARSER_ERRNO(&c->p) != HPE_OK &&
	    HTTP_PARSER_ERRNO(&c->p) != HPE_PAUSED) {
		refuse(c, 400, "not an HTTP proxy request (%s)",
		       http_errno_description(HTTP_PARSER_ERRNO(&c->p)));
		return;
	}
	/* Paused at the end of the headers, the parser has consumed up to
	 * the line feed that ends the head: "\r\n\r\n", or a bare "\n\n"
	 * (which http_parser accepts too, and a search for CRLF CRLF alone
	 * would wait on until the run ended). */
	if (HTTP_PARSER_ERRNO(&c->p) == HPE_PAUSED) {
		end = before + parsed + 1;
		if (end > c->head_len || c->head[end - 1] != '\n') {
			refuse(c, 400, "not an HTTP proxy request");
			return;
		}
		uv_read_stop(s);
		head_done(c, end);
		return;
	}
	if (c->head_len == PROXY_HEAD_MAX)
		refuse(c, 400, "request head over %d bytes", PROXY_HEAD_MAX);
}

/* ---- for tls.c ----------------------------------------------------- */

void pconn_close(struct pconn *c)
{
	conn_close(c);
}

void pconn_refusal_note(struct pconn *c, int status, const char *why)
{
	refusal_note(c, status, why);
}

void pconn_journal(struct pconn *c, const char *kind, json_t *d)
{
	journal_event(c, kind, d);
}

bool pconn_journal_charge(struct proxy_port *p)
{
	return journal_charge(p);
}

void pconn_refuse_plain(struct pconn *c, int status, const char *why)
{
	refuse(c, status, "%s", why);
}

void pconn_idle_start(struct pconn *c)
{
	c->last_ms = uv_now(c->port->spd->loop);
	uv_timer_start(
	    &c->timer, on_timer,
	    (uint64_t)c->port->spd->config.proxy_idle_timeout_s * 1000u, 0);
}

/* ---- the listener -------------------------------------------------- */

static void on_connection(uv_stream_t *l, int status)
{
	struct proxy_port *p = l->data;
	struct pconn *c;

	if (status < 0 || p->closing)
		return;
	c = calloc(1, sizeof(*c));
	if (!c)
		return;
	c->port = p;
	uv_tcp_init(p->spd->loop, &c->client);
	c->client.data = c;
	uv_timer_init(p->spd->loop, &c->timer);
	c->timer.data = c;
	c->handles = 2;
	c->next = p->conns;
	if (p->conns)
		p->conns->prev = c;
	p->conns = c;
	p->nconns++;
	http_parser_init(&c->p, HTTP_REQUEST);
	c->p.data = c;
	if (uv_accept(l, (uv_stream_t *)&c->client) < 0) {
		conn_close(c);
		return;
	}
	/* Bytes go on as they come: a TLS handshake's small records
	 * would otherwise wait on Nagle and a delayed ACK (40 ms each). */
	uv_tcp_nodelay(&c->client, 1);
	/* Over the limit: refused once accepted, so the client hears why. */
	if (p->nconns > PROXY_CONNS_MAX) {
		refuse(c, 403, "too many connections through the proxy (%d)",
		       PROXY_CONNS_MAX);
		return;
	}
	uv_timer_start(&c->timer, on_timer,
		       (uint64_t)p->spd->config.proxy_head_timeout_s * 1000u,
		       0);
	if (uv_read_start((uv_stream_t *)&c->client, head_alloc, head_read) < 0)
		conn_close(c);
}

static void on_listener_closed(uv_handle_t *h)
{
	struct proxy_port *p = h->data;

	p->listener_open = false;
	port_maybe_free(p);
}

/* The project's rules that were set aside, journaled and logged once
 * per run: the operator sees what a project tried. */
static void journal_project(struct proxy_port *p)
{
	const struct proxy_project *proj = p->project;
	json_t *d, *ign;
	char *text;

	if (!proj || (!proj->ignored && !proj->error))
		return;
	ign = json_array();
	for (size_t i = 0; proj->ignored && proj->ignored[i]; i++) {
		json_array_append_new(ign, json_string(proj->ignored[i]));
		log_warn("proxy: %s/.spd.conf: ignored %s", p->workspace,
			 proj->ignored[i]);
	}
	if (proj->error)
		log_warn("proxy: %s: %s; every host is refused", p->workspace,
			 proj->error);
	d = json_pack("{s:s?, s:o, s:s?}", "workspace", p->workspace, "ignored",
		      ign, "error", proj->error);
	text = d ? json_dumps(d, JSON_COMPACT) : NULL;
	if (journal_append(p->spd->journal, p->session, p->actor,
			   "net.proxy.project", ".spd.conf [network]",
			   text) < 0)
		log_warn("proxy: cannot journal the project's rules");
	free(text);
	json_decref(d);
}

int proxy_serve(struct spd *spd, int fd, const struct proxy_run *run,
		struct proxy_port **ret)
{
	struct proxy_port *p = calloc(1, sizeof(*p));
	int r;

	if (!p || (run->session && !(p->session = strdup(run->session))) ||
	    (run->workspace && !(p->workspace = strdup(run->workspace)))) {
		if (p)
			free(p->session);
		free(p);
		proxy_project_free(run->project);
		close(fd);
		return -ENOMEM;
	}
	p->spd = spd;
	p->project = run->project;
	p->on_ask = run->on_ask;
	p->on_ask_data = run->on_ask_data;
	snprintf(p->actor, sizeof(p->actor), "%s", run->actor);
	if (run->session) {
		struct session_info *si = NULL;

		/* Unknown session or no branch: push_ref stays NULL and no
		 * push goes through. */
		p->push_restricted = true;
		if (spd->sessions &&
		    session_get(spd->sessions, run->session, &si) == 0) {
			if (si->branch &&
			    asprintf(&p->push_ref, "refs/heads/%s",
				     si->branch) < 0)
				p->push_ref = NULL;
			p->push_gitdir = si->gitdir ? strdup(si->gitdir) : NULL;
			p->push_worktree =
			    si->worktree ? strdup(si->worktree) : NULL;
			session_info_free(si);
		}
	}
	journal_project(p);
	uv_tcp_init(spd->loop, &p->listener);
	p->listener.data = p;
	p->listener_open = true;
	r = uv_tcp_open(&p->listener, fd);
	if (r < 0)
		close(fd); /* not taken by the handle */
	else
		r = uv_listen((uv_stream_t *)&p->listener, PROXY_BACKLOG,
			      on_connection);
	if (r < 0) {
		proxy_close(p);
		return r;
	}
	*ret = p;
	return 0;
}

void proxy_close(struct proxy_port *p)
{
	if (!p || p->closing)
		return;
	p->closing = true;
	/* Its asks are withdrawn: nobody waits for them any more. */
	for (struct pask *a = p->asks; a; a = a->next)
		if (a->state == ASK_WAITING) {
			a->state = ASK_REFUSED;
			gate_ask_cancel(p->spd, a->id, "the run ended");
		}
	for (struct pconn *c = p->conns; c; c = c->next)
		conn_close(c);
	refusals_flush(p);
	uv_close((uv_handle_t *)&p->listener, on_listener_closed);
}

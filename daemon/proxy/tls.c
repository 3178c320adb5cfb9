/*
 * The hosts the proxy terminates (proxy.h: a credential or a request
 * rule names them).  spd is the server the run's client talks TLS to,
 * with a certificate for the host issued by spd's own CA (made at first
 * use in the state dir, which no run sees; the run trusts it through a
 * bundle of the system's CAs and spd's), and the client of the real
 * server, verified against the system's trust store (and for names under
 * .test only, [network] test-ca).  In between, spd reads the request
 * head, decides on its method and path, puts the credential in, and
 * passes one request: "Connection: close" upstream, and bytes after the
 * request's end are never forwarded, so each request on a connection is
 * judged.  OpenSSL does the TLS over memory BIOs; libuv the sockets.
 */
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <http_parser.h>
#include <jansson.h>
#include <libgen.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "common/paths.h"
#include "common/strv.h"
#include "daemon/config.h"
#include "daemon/keys/secrets.h"
#include "daemon/log.h"
#include "daemon/proxy/proxy.h"
#include "daemon/proxy/proxy_priv.h"
#include "daemon/spd.h"

/* Leaf certificates kept (one SSL_CTX per host name). */
#define LEAVES_MAX 128
/* A leaf is valid this long, and issued again a day before it ends. */
#define LEAF_DAYS 7
#define CA_DAYS 3650
/* Plaintext moved at once from one side to the other. */
#define TLS_PLAIN_CHUNK (16 * 1024)

/* ---- a terminated connection --------------------------------------- */

struct tside {
	struct ptls *t;
	SSL *ssl;
	BIO *rbio, *wbio; /* owned by ssl */
	uv_stream_t *s;
	unsigned pending; /* writes to s in flight */
	bool paused;	  /* not read: the other side's writes are pending */
	char buf[PROXY_CHUNK];
};

enum tstate { T_UP_HS, T_CL_HS, T_HEAD, T_BODY, T_DONE };

struct ptls {
	struct pconn *c;
	struct tside cl, up;
	enum tstate state;
	bool finishing; /* close once the writes to the run are out */
	http_parser p;
	char *head;
	size_t head_len;
	char url[PROXY_HEAD_MAX];
	size_t url_len;
	/* A push held until its ref updates are judged: the head for
	 * upstream, the body's raw bytes, and the same de-chunked. */
	bool inspect;
	char *held_head, *held, *pkt;
	size_t held_head_len, held_len, pkt_len;
	bool pkt_over;
	char path[2048];
	char plain[TLS_PLAIN_CHUNK];
};

/* Most bytes of a push's body held while its ref updates are read:
 * 64 updates of a few hundred bytes, and the capabilities. */
#define PUSH_HEAD_MAX (64 * 1024)

struct twrite {
	uv_write_t w;
	struct tside *side;
	char data[];
};

static void tls_close(struct ptls *t)
{
	pconn_close(t->c);
}

static void resume(struct ptls *t);

static void on_twritten(uv_write_t *w, int status)
{
	struct twrite *tw = (struct twrite *)w;
	struct tside *side = tw->side;
	struct ptls *t = side->t;

	free(tw);
	side->pending--;
	if (t->c->closing)
		return;
	if (status < 0) {
		tls_close(t);
		return;
	}
	resume(t);
}

/* side's TLS object over two memory BIOs, which it owns from here: 0,
 * or -1 (no ctx, or out of memory) with the BIOs freed and side->ssl,
 * when made, left for the connection's close to free. */
static int side_ssl(struct tside *side, SSL_CTX *ctx)
{
	side->ssl = ctx ? SSL_new(ctx) : NULL;
	side->rbio = BIO_new(BIO_s_mem());
	side->wbio = BIO_new(BIO_s_mem());
	if (!side->ssl || !side->rbio || !side->wbio) {
		BIO_free(side->rbio);
		BIO_free(side->wbio);
		side->rbio = side->wbio = NULL;
		return -1;
	}
	SSL_set_bio(side->ssl, side->rbio, side->wbio);
	return 0;
}

static int raw_write(struct tside *side, const void *data, size_t len)
{
	struct twrite *tw = malloc(sizeof(*tw) + len);
	uv_buf_t b;

	if (!tw)
		return -ENOMEM;
	memcpy(tw->data, data, len);
	tw->side = side;
	b = uv_buf_init(tw->data, (unsigned)len);
	if (uv_write(&tw->w, side->s, &b, 1, on_twritten) < 0) {
		free(tw);
		return -EIO;
	}
	side->pending++;
	return 0;
}

/* What side's SSL has for its socket goes out. */
static int flush(struct tside *side)
{
	int n;

	while ((n = (int)BIO_pending(side->wbio)) > 0) {
		struct twrite *tw = malloc(sizeof(*tw) + (size_t)n);
		uv_buf_t b;

		if (!tw)
			return -ENOMEM;
		if (BIO_read(side->wbio, tw->data, n) != n) {
			free(tw);
			return -EIO;
		}
		tw->side = side;
		b = uv_buf_init(tw->data, (unsigned)n);
		if (uv_write(&tw->w, side->s, &b, 1, on_twritten) < 0) {
			free(tw);
			return -EIO;
		}
		side->pending++;
	}
	return 0;
}

/* Plaintext to side's peer: with memory BIOs a write takes it whole. */
static int tls_send(struct tside *side, const void *data, size_t len)
{
	if (len && SSL_write(side->ssl, data, (int)len) != (int)len)
		return -EIO;
	return flush(side);
}

/* Close once what the run is owed has gone out. */
static void finish(struct ptls *t)
{
	if (t->c->closing)
		return;
	t->state = T_DONE;
	t->finishing = true;
	/* Nothing more is read either way: what the run is owed is out. */
	uv_read_stop(t->cl.s);
	uv_read_stop(t->up.s);
	t->cl.paused = t->up.paused = false;
	if (t->cl.ssl && SSL_is_init_finished(t->cl.ssl)) {
		SSL_shutdown(t->cl.ssl);
		flush(&t->cl);
	}
	if (t->cl.pending == 0)
		tls_close(t);
}

/* Refuse the request in TLS: status and a JSON body naming host, method,
 * path and the rule (so an agent sees why and stops), then close. */
static void tls_refuse(struct ptls *t, int status, const char *method,
		       const char *path, const char *rule, const char *why)
{
	struct pconn *c = t->c;
	json_t *o =
	    json_pack("{s:s, s:s, s:s?, s:s?, s:s?, s:s}", "error",
		      "refused by spd's proxy", "host", c->host, "method",
		      method, "path", path, "rule", rule, "why", why);
	char *body = o ? json_dumps(o, JSON_COMPACT) : NULL, *msg = NULL;
	char note[300];
	int n;

	json_decref(o);
	snprintf(note, sizeof(note), "%s %s: %s", method ? method : "?",
		 path ? path : "?", why);
	pconn_refusal_note(c, status, note);
	n = body ? asprintf(&msg,
			    "HTTP/1.1 %d %s\r\nContent-Type: application/json"
			    "\r\nContent-Length: %zu\r\nConnection: close\r\n"
			    "\r\n%s\n",
			    status, status == 403 ? "Forbidden" : "Bad Gateway",
			    strlen(body) + 1, body)
		 : -1;
	if (n > 0)
		tls_send(&t->cl, msg, (size_t)n);
	free(msg);
	free(body);
	finish(t);
}

/* A session's request no rule matches: the 403 says how to ask for a
 * rule (policy.propose), so an agent asks instead of retrying. */
static void tls_refuse_ask(struct ptls *t, const char *method, const char *path)
{
	struct pconn *c = t->c;
	json_t *o = json_pack(
	    "{s:s, s:s, s:s, s:s, s:s, s:s, s:{s:s, s:{s:s, s:s, s:s}}}",
	    "error", "refused by spd's proxy", "host", c->host, "method",
	    method, "path", path, "rule", "(no rule matches)", "why",
	    "no [network] allow rule matches it", "ask", "method",
	    "policy.propose", "params", "host", c->host, "method", method,
	    "path", path);
	char *body = o ? json_dumps(o, JSON_COMPACT) : NULL, *msg = NULL,
	     note[300];
	int n;

	json_decref(o);
	snprintf(note, sizeof(note),
		 "%.16s %.120s: no [network \"%.100s\"] allow rule "
		 "matches it",
		 method, path, c->host);
	pconn_refusal_note(c, 403, note);
	n = body ? asprintf(&msg,
			    "HTTP/1.1 403 Forbidden\r\nContent-Type: "
			    "application/json\r\nContent-Length: %zu\r\n"
			    "Connection: close\r\n\r\n%s\n",
			    strlen(body) + 1, body)
		 : -1;
	if (n > 0)
		tls_send(&t->cl, msg, (size_t)n);
	free(msg);
	free(body);
	finish(t);
}

static void tls_alloc(uv_handle_t *h, size_t hint, uv_buf_t *ret)
{
	struct pconn *c = h->data;
	struct tside *side =
	    h == (uv_handle_t *)&c->client ? &c->tls->cl : &c->tls->up;

	(void)hint;
	*ret = uv_buf_init(side->buf, sizeof(side->buf));
}

static void tls_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b);

static void resume(struct ptls *t)
{
	if (t->finishing) {
		if (t->cl.pending == 0)
			tls_close(t);
		return;
	}
	if (t->up.pending == 0 && t->cl.paused) {
		t->cl.paused = false;
		if (uv_read_start(t->cl.s, tls_alloc, tls_read) < 0)
			tls_close(t);
	}
	if (t->cl.pending == 0 && t->up.paused) {
		t->up.paused = false;
		if (uv_read_start(t->up.s, tls_alloc, tls_read) < 0)
			tls_close(t);
	}
}

/* ---- the request --------------------------------------------------- */

static int on_url(http_parser *p, const char *at, size_t len)
{
	struct ptls *t = p->data;

	if (len >= sizeof(t->url) - t->url_len)
		return 1;
	memcpy(t->url + t->url_len, at, len);
	t->url_len += len;
	t->url[t->url_len] = '\0';
	return 0;
}

static int on_headers_complete(http_parser *p)
{
	http_parser_pause(p, 1);
	return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
	struct ptls *t = p->data;

	if (!t->inspect)
		return 0;
	if (len > PUSH_HEAD_MAX - t->pkt_len) {
		t->pkt_over = true;
		return 0;
	}
	if (!t->pkt && !(t->pkt = malloc(PUSH_HEAD_MAX))) {
		t->pkt_over = true;
		return 0;
	}
	memcpy(t->pkt + t->pkt_len, at, len);
	t->pkt_len += len;
	return 0;
}

static int on_message_complete(http_parser *p)
{
	http_parser_pause(p, 1);
	return 0;
}

static const http_parser_settings req_settings = {
    .on_url = on_url,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* ${VAR} of tmpl replaced from spd's secrets; NULL with *ret_missing set
 * to the first missing name. */
static char *expand(struct spd *spd, const char *tmpl, char *missing,
		    size_t mlen)
{
	size_t cap = strlen(tmpl) + 1, n = 0;
	char *out = malloc(cap);

	for (const char *p = tmpl; out && *p;) {
		const char *v = NULL, *end;
		size_t vl;

		if (p[0] == '$' && p[1] == '{' && (end = strchr(p, '}'))) {
			char name[128];

			snprintf(name, sizeof(name), "%.*s", (int)(end - p - 2),
				 p + 2);
			v = secrets_value(spd, name);
			if (!v) {
				snprintf(missing, mlen, "%s", name);
				OPENSSL_cleanse(out, cap);
				free(out);
				return NULL;
			}
			p = end + 1;
		} else {
			v = p++;
		}
		vl = v == p - 1 ? 1 : strlen(v);
		if (n + vl + 1 > cap) {
			char *o = malloc(cap = 2 * (n + vl + 1));

			if (o)
				memcpy(o, out, n);
			OPENSSL_cleanse(out, n);
			free(out);
			out = o;
			if (!out)
				return NULL;
		}
		memcpy(out + n, v, vl);
		n += vl;
	}
	if (out)
		out[n] = '\0';
	return out;
}

/* The header line the credential adds ("Name: value"), malloc'd. */
static char *cred_line(struct spd *spd, const struct proxy_credential *cr,
		       char *missing, size_t mlen)
{
	char *v = expand(spd, cr->value, missing, mlen), *line = NULL;

	if (!v)
		return NULL;
	if (cr->basic) {
		size_t vl = strlen(v), el = 4 * ((vl + 2) / 3) + 1;
		unsigned char *b64 = malloc(el);

		if (b64 &&
		    EVP_EncodeBlock(b64, (unsigned char *)v, (int)vl) >= 0 &&
		    asprintf(&line, "%s: Basic %s", cr->header_name, b64) < 0)
			line = NULL;
		if (b64)
			OPENSSL_cleanse(b64, el);
		free(b64);
	} else if (asprintf(&line, "%s: %s", cr->header_name, v) < 0) {
		line = NULL;
	}
	OPENSSL_cleanse(v, strlen(v));
	free(v);
	return line;
}

static bool header_is(const char *line, size_t len, const char *name)
{
	size_t n = strlen(name);

	return len > n && line[n] == ':' && strncasecmp(line, name, n) == 0;
}

/* The head upstream sees: the request line as sent, the run's headers
 * but the hop ones, Host and the credential's header (replacing any the
 * run sent by that name), Connection: close. */
static char *rewrite(struct ptls *t, size_t end, const char *cred,
		     const char *cred_name, size_t *ret_len)
{
	struct pconn *c = t->c;
	size_t cap = end + PROXY_HOST_MAX + (cred ? strlen(cred) : 0) + 64, n;
	const char *line = memchr(t->head, '\n', end);
	char *o = malloc(cap);

	if (!o || !line) {
		free(o);
		return NULL;
	}
	n = (size_t)(line - t->head);
	if (n && t->head[n - 1] == '\r')
		n--;
	memcpy(o, t->head, n);
	n += (size_t)snprintf(o + n, cap - n, "\r\nHost: %s", c->host);
	if (c->dport != 443)
		n += (size_t)snprintf(o + n, cap - n, ":%u", c->dport);
	n += (size_t)snprintf(o + n, cap - n, "\r\n");
	if (cred)
		n += (size_t)snprintf(o + n, cap - n, "%s\r\n", cred);
	for (line++; line < t->head + end;) {
		const char *nl =
		    memchr(line, '\n', (size_t)(t->head + end - line));
		size_t len = (size_t)(nl - line);

		if (len > 0 && line[len - 1] == '\r')
			len--;
		if (len > 0 && !header_is(line, len, "host") &&
		    !header_is(line, len, "connection") &&
		    !header_is(line, len, "keep-alive") &&
		    !header_is(line, len, "proxy-connection") &&
		    !header_is(line, len, "proxy-authorization") &&
		    !(cred_name && header_is(line, len, cred_name))) {
			memcpy(o + n, line, len);
			memcpy(o + n + len, "\r\n", 2);
			n += len + 2;
		}
		line = nl + 1;
	}
	n += (size_t)snprintf(o + n, cap - n, "Connection: close\r\n\r\n");
	*ret_len = n;
	return o;
}

/* The request's path, without its query, into path (cap bytes): from
 * origin-form, or absolute-form naming the connection's host.  False
 * when the target is neither. */
static bool request_path(struct ptls *t, char *path, size_t cap)
{
	struct http_parser_url u;
	size_t off, len;

	http_parser_url_init(&u);
	if (t->url_len == 0 ||
	    http_parser_parse_url(t->url, t->url_len, 0, &u) != 0)
		return false;
	if (t->url[0] != '/') {
		if (!(u.field_set & (1 << UF_HOST)) ||
		    u.field_data[UF_HOST].len != strlen(t->c->host) ||
		    strncasecmp(t->url + u.field_data[UF_HOST].off, t->c->host,
				u.field_data[UF_HOST].len) != 0)
			return false;
	}
	if (!(u.field_set & (1 << UF_PATH))) {
		snprintf(path, cap, "/");
		return true;
	}
	off = u.field_data[UF_PATH].off;
	len = u.field_data[UF_PATH].len;
	snprintf(path, cap, "%.*s", (int)len, t->url + off);
	return true;
}

static void body(struct ptls *t, const char *data, size_t len);

static bool has_header(struct ptls *t, size_t end, const char *name)
{
	for (const char *line = memchr(t->head, '\n', end);
	     line && ++line < t->head + end;
	     line = memchr(line, '\n', (size_t)(t->head + end - line))) {
		const char *nl =
		    memchr(line, '\n', (size_t)(t->head + end - line));

		if (nl && header_is(line, (size_t)(nl - line), name))
			return true;
	}
	return false;
}

/* A header line that continues the one before (obs-fold): a server
 * could read it as its own header, or not; refused. */
static bool has_folded_line(struct ptls *t, size_t end)
{
	for (const char *p = t->head;
	     (p = memchr(p, '\n', (size_t)(t->head + end - p)));) {
		p++;
		if (p < t->head + end && (*p == ' ' || *p == '\t'))
			return true;
	}
	return false;
}

/* A git push to be judged: POST .../git-receive-pack in a session's
 * run (an operator's runs follow their own rule). */
static bool is_push(struct ptls *t, const char *path, size_t end)
{
	size_t n = strlen(path);

	(void)end;
	return t->c->port->push_restricted && t->p.method == HTTP_POST &&
	       n >= 17 && strcmp(path + n - 17, "/git-receive-pack") == 0;
}

/* Commits walked at most to find a push's old tip below its new one
 * (each compared with those seen: the walk is quadratic, bounded to a
 * few milliseconds of spd's loop); a longer push cannot be told a
 * fast-forward and is refused. */
#define FF_WALK_MAX 5000

/* Whether new descends from old, walking parents in odb: 1, 0, or -1
 * when spd cannot tell (an object it does not have, too long a walk).
 * Commits are read as objects (their hashes checked by libgit2), parents
 * from their own text: no ref, graft or replacement of the agent's
 * repository has a say. */
static int descends(git_odb *odb, const git_oid *new_oid, const git_oid *old)
{
	git_oid *queue = malloc(FF_WALK_MAX * sizeof(*queue));
	size_t head = 0, tail = 0;
	int r = 0;

	if (!queue)
		return -1;
	queue[tail++] = *new_oid;
	while (head < tail && r == 0) {
		git_odb_object *obj = NULL;
		const char *d, *end;

		if (git_oid_equal(&queue[head], old)) {
			r = 1;
			break;
		}
		if (git_odb_read(&obj, odb, &queue[head++]) < 0 ||
		    git_odb_object_type(obj) != GIT_OBJECT_COMMIT) {
			git_odb_object_free(obj);
			r = -1;
			break;
		}
		d = git_odb_object_data(obj);
		end = d + git_odb_object_size(obj);
		/* "tree X\n", then "parent X\n" lines, then the rest. */
		while (d < end) {
			const char *nl = memchr(d, '\n', (size_t)(end - d));

			if (!nl || nl == d)
				break;
			if (nl - d == 47 && memcmp(d, "parent ", 7) == 0) {
				bool seen = false;
				git_oid p;

				if (git_oid_fromstrn(&p, d + 7, 40) < 0) {
					r = -1;
					break;
				}
				for (size_t i = 0; i < tail && !seen; i++)
					seen = git_oid_equal(&queue[i], &p);
				if (!seen && tail == FF_WALK_MAX) {
					r = -1;
					break;
				}
				if (!seen)
					queue[tail++] = p;
			} else if (memcmp(d, "tree ", 5) != 0) {
				break;
			}
			d = nl + 1;
		}
		git_odb_object_free(obj);
	}
	free(queue);
	return r;
}

/* Whether a push from old_id to new_id is a fast-forward, judged on the
 * objects of the session's worktree (the agent's commits) and of its
 * repository: NULL, or why not (an object spd does not have is not known
 * to be one). */
static const char *not_ff(const struct proxy_port *port, const char *old_id,
			  const char *new_id)
{
	git_odb *odb = NULL;
	git_oid o, n;
	char *objs = NULL;
	const char *why = NULL;
	int r;

	if (strlen(old_id) != 40 || git_oid_fromstr(&o, old_id) < 0 ||
	    git_oid_fromstr(&n, new_id) < 0)
		return "spd cannot tell whether it is a fast-forward";
	if (git_libgit2_init() < 0)
		return "spd cannot tell whether it is a fast-forward";
	if (git_odb_new(&odb) < 0) {
		git_libgit2_shutdown();
		return "spd cannot tell whether it is a fast-forward";
	}
	if (port->push_worktree &&
	    asprintf(&objs, "%s/.git/objects", port->push_worktree) > 0)
		git_odb_add_disk_alternate(odb, objs);
	free(objs);
	objs = NULL;
	if (port->push_gitdir &&
	    asprintf(&objs, "%s/objects", port->push_gitdir) > 0)
		git_odb_add_disk_alternate(odb, objs);
	free(objs);
	r = descends(odb, &n, &o);
	if (r == 0)
		why = "not a fast-forward of the branch (a force push)";
	else if (r < 0)
		why = "spd cannot tell that it is a fast-forward (it does not "
		      "have the commits between)";
	git_odb_free(odb);
	git_error_clear();
	git_libgit2_shutdown();
	return why;
}

/* The push's ref updates are read: each must be the session's branch,
 * not a deletion, a fast-forward; then the held head and body go up. */
static void push_judge(struct ptls *t, const struct proxy_pkt_update *u,
		       size_t n)
{
	struct pconn *c = t->c;
	struct proxy_port *port = c->port;
	json_t *refs = json_array();
	char why[600];

	const struct proxy_credential *cr =
	    proxy_credential_for(&port->spd->config, c->host);

	for (size_t i = 0; i < n; i++) {
		const char *nf = NULL;
		bool ff;

		json_array_append_new(refs, json_string(u[i].ref));
		if (proxy_push_refused(cr, port->push_ref, &u[i], why,
				       sizeof(why), &ff)) {
			/* why says it */
		} else if (ff &&
			   (nf = not_ff(port, u[i].old_id, u[i].new_id))) {
			snprintf(why, sizeof(why), "a push to %s: %s", u[i].ref,
				 nf);
		} else {
			continue;
		}
		json_decref(refs);
		tls_refuse(t, 403, "POST", t->path, "git push", why);
		return;
	}
	pconn_journal(c, "net.proxy.request",
		      json_pack("{s:s, s:i, s:s, s:s, s:s, s:o}", "host",
				c->host, "port", (int)c->dport, "method",
				"POST", "path", t->path, "decision", "allow",
				"refs", refs));
	t->inspect = false;
	if (tls_send(&t->up, t->held_head, t->held_head_len) < 0 ||
	    tls_send(&t->up, t->held, t->held_len) < 0) {
		tls_close(t);
		return;
	}
	c->up.bytes += t->held_len;
}

/* The head is complete (end: its bytes with the blank line): decide,
 * then send it upstream with the credential and go on with the body. */
static void judge(struct ptls *t, size_t end)
{
	struct pconn *c = t->c;
	struct spd *spd = c->port->spd;
	const struct spd_config *cfg = &spd->config;
	const struct proxy_credential *cr = proxy_credential_for(cfg, c->host);
	const struct proxy_http_rule *rule;
	const char *method = http_method_str(t->p.method);
	char path[2048], missing[128] = "", *cred = NULL, *out;
	bool any, granted = false;
	size_t out_len;

	if (has_folded_line(t, end)) {
		tls_refuse(t, 403, method, NULL, NULL,
			   "a folded header line (obs-fold) is refused");
		return;
	}
	if (t->p.method == HTTP_CONNECT ||
	    !request_path(t, path, sizeof(path))) {
		tls_refuse(t, 403, method, NULL, NULL,
			   "not a request for this host");
		return;
	}
	rule = proxy_http_decide(cfg, c->host, method, path, &any);
	if (any && proxy_path_ambiguous(path)) {
		tls_refuse(t, 403, method, path, NULL,
			   "a path with dot segments or encoded separators "
			   "is refused for a host with request rules");
		return;
	}
	if (any && !rule &&
	    proxy_granted(spd, c->port->session, c->host, method, path)) {
		granted = true;
	} else if (any && (!rule || !rule->allow)) {
		char why[400];

		if (!rule && c->port->session) {
			tls_refuse_ask(t, method, path);
			return;
		}

		snprintf(why, sizeof(why),
			 rule ? "[network \"%s\"] %s refuses it"
			      : "no [network \"%s\"] allow rule matches it%s",
			 rule ? rule->host : c->host, rule ? rule->text : "");
		tls_refuse(t, 403, method, path,
			   rule ? rule->text : "(no rule matches)", why);
		return;
	}
	if (!pconn_journal_charge(c->port)) {
		tls_refuse(t, 403, method, path, NULL,
			   "the session made more journaled requests this "
			   "minute than [limits] session-journal-rate allows");
		return;
	}
	if (cr && !(cred = cred_line(spd, cr, missing, sizeof(missing)))) {
		char why[300];

		snprintf(why, sizeof(why),
			 missing[0] ? "[credential \"%s\"]: %s is not in "
				      "spd's environment file"
				    : "[credential \"%s\"]: out of memory%s",
			 cr->name, missing);
		tls_refuse(t, 502, method, path, NULL, why);
		return;
	}
	out = rewrite(t, end, cred, cr ? cr->header_name : NULL, &out_len);
	if (cred) {
		OPENSSL_cleanse(cred, strlen(cred));
		free(cred);
	}
	if (out && is_push(t, path, end)) {
		if (has_header(t, end, "content-encoding")) {
			OPENSSL_cleanse(out, out_len);
			free(out);
			tls_refuse(t, 403, method, path, NULL,
				   "an encoded push body is not read by spd");
			return;
		}
		/* Held until its ref updates are judged (push_judge). */
		snprintf(t->path, sizeof(t->path), "%s", path);
		t->inspect = true;
		t->held_head = out;
		t->held_head_len = out_len;
		t->state = T_BODY;
		http_parser_pause(&t->p, 0);
		body(t, t->head + end - 1, t->head_len - end + 1);
		free(t->head);
		t->head = NULL;
		return;
	}
	pconn_journal(c, "net.proxy.request",
		      json_pack("{s:s, s:i, s:s, s:s, s:s, s:s?, s:s?}", "host",
				c->host, "port", (int)c->dport, "method",
				method, "path", path, "decision", "allow",
				"rule",
				rule	  ? rule->text
				: granted ? "approved for the session "
					    "(policy.propose)"
					  : NULL,
				"credential", cr ? cr->name : NULL));
	if (!out || tls_send(&t->up, out, out_len) < 0) {
		if (out)
			OPENSSL_cleanse(out, out_len);
		free(out);
		tls_close(t);
		return;
	}
	OPENSSL_cleanse(out, out_len);
	free(out);
	c->up.bytes += end;
	t->state = T_BODY;
	/* The parser paused on the head's last line feed, which it reads
	 * again: the body starts after it. */
	http_parser_pause(&t->p, 0);
	body(t, t->head + end - 1, t->head_len - end + 1);
	if (t->state == T_BODY || t->state == T_DONE) {
		free(t->head);
		t->head = NULL;
	}
}

/* Body bytes (the first call: from the head's last line feed): passed
 * up to the request's end; what comes after is not forwarded. */
static void body(struct ptls *t, const char *data, size_t len)
{
	bool first = t->head && data >= t->head && data < t->head + t->head_len;
	size_t parsed;

	if (t->state != T_BODY || !len)
		return;
	parsed = http_parser_execute(&t->p, &req_settings, data, len);
	if (HTTP_PARSER_ERRNO(&t->p) != HPE_OK &&
	    HTTP_PARSER_ERRNO(&t->p) != HPE_PAUSED) {
		tls_close(t);
		return;
	}
	if (HTTP_PARSER_ERRNO(&t->p) == HPE_PAUSED)
		t->state = T_DONE; /* the request ended */
	if (first) {
		data++;
		parsed = parsed ? parsed - 1 : 0;
	}
	if (t->inspect) {
		struct proxy_pkt_update u[PROXY_PUSH_UPDATES_MAX];
		const char *why;
		size_t n;
		int r;

		if (parsed > PUSH_HEAD_MAX * 2 - t->held_len || t->pkt_over) {
			tls_refuse(t, 403, "POST", t->path, "git push",
				   "the push's ref updates are too long");
			return;
		}
		if (!t->held && !(t->held = malloc(PUSH_HEAD_MAX * 2))) {
			tls_close(t);
			return;
		}
		memcpy(t->held + t->held_len, data, parsed);
		t->held_len += parsed;
		r = proxy_pkt_commands(t->pkt, t->pkt_len, u,
				       PROXY_PUSH_UPDATES_MAX, &n, &why);
		if (r == 0 && t->state == T_DONE)
			why = "the push ended before its ref updates did";
		if (r < 0 || (r == 0 && t->state == T_DONE))
			tls_refuse(t, 403, "POST", t->path, "git push", why);
		else if (r == 1)
			push_judge(t, u, n);
		return;
	}
	t->c->up.bytes += parsed;
	if (parsed && tls_send(&t->up, data, parsed) < 0)
		tls_close(t);
}

static void head(struct ptls *t, const char *data, size_t len)
{
	size_t parsed, before = t->head_len, end;

	if (!t->head && !(t->head = malloc(PROXY_HEAD_MAX))) {
		tls_close(t);
		return;
	}
	if (len > PROXY_HEAD_MAX - t->head_len) {
		tls_refuse(t, 403, NULL, NULL, NULL, "request head too long");
		return;
	}
	memcpy(t->head + t->head_len, data, len);
	t->head_len += len;
	parsed =
	    http_parser_execute(&t->p, &req_settings, t->head + before, len);
	if (HTTP_PARSER_ERRNO(&t->p) == HPE_PAUSED) {
		end = before + parsed + 1;
		if (end > t->head_len || t->head[end - 1] != '\n') {
			tls_refuse(t, 403, NULL, NULL, NULL,
				   "not an HTTP/1.1 request");
			return;
		}
		judge(t, end);
		return;
	}
	if (HTTP_PARSER_ERRNO(&t->p) != HPE_OK)
		tls_refuse(t, 403, NULL, NULL, NULL, "not an HTTP/1.1 request");
}

/* Plaintext from the run, in order. */
static void from_run(struct ptls *t, const char *data, size_t len)
{
	if (t->state == T_HEAD)
		head(t, data, len);
	else if (t->state == T_BODY)
		body(t, data, len);
	/* T_DONE: a request after the one judged is not forwarded. */
}

/* ---- the two sides ------------------------------------------------- */

static void client_hs_begin(struct ptls *t)
{
	struct pconn *c = t->c;
	SSL_CTX *ctx = proxy_leaf_ctx(c->port->spd->proxy_tls, c->host);

	if (side_ssl(&t->cl, ctx) < 0) {
		tls_close(t);
		return;
	}
	SSL_set_accept_state(t->cl.ssl);
	t->state = T_CL_HS;
	if (raw_write(&t->cl, c->out, c->out_len) < 0 ||
	    uv_read_start(t->cl.s, tls_alloc, tls_read) < 0)
		tls_close(t);
}

static void up_data(struct ptls *t)
{
	struct pconn *c = t->c;
	int n, e;

	if (t->state == T_UP_HS) {
		n = SSL_do_handshake(t->up.ssl);
		flush(&t->up);
		if (n == 1) {
			client_hs_begin(t);
			return;
		}
		e = SSL_get_error(t->up.ssl, n);
		if (e == SSL_ERROR_WANT_READ)
			return;
		{
			char why[300];
			long v = SSL_get_verify_result(t->up.ssl);

			snprintf(
			    why, sizeof(why), "TLS with %s port %u failed: %s",
			    c->host, c->dport,
			    v != X509_V_OK ? X509_verify_cert_error_string(v)
					   : "handshake error");
			ERR_clear_error();
			uv_read_stop(t->up.s);
			pconn_refuse_plain(c, 502, why);
		}
		return;
	}
	while ((n = SSL_read(t->up.ssl, t->plain, sizeof(t->plain))) > 0) {
		c->down.bytes += (uint64_t)n;
		if (t->cl.ssl && tls_send(&t->cl, t->plain, (size_t)n) < 0) {
			tls_close(t);
			return;
		}
	}
	e = SSL_get_error(t->up.ssl, n);
	flush(&t->up);
	if (e != SSL_ERROR_WANT_READ) {
		ERR_clear_error();
		finish(t); /* the server is done (or failed): so is the run */
	}
}

static void cl_data(struct ptls *t)
{
	struct pconn *c = t->c;
	int n, e;

	if (t->state == T_CL_HS) {
		n = SSL_do_handshake(t->cl.ssl);
		flush(&t->cl);
		if (n != 1) {
			e = SSL_get_error(t->cl.ssl, n);
			if (e == SSL_ERROR_WANT_READ)
				return;
			ERR_clear_error();
			pconn_refusal_note(
			    c, 502,
			    "the run's client refused spd's certificate "
			    "(does it use the CA bundle in SSL_CERT_FILE?)");
			tls_close(t);
			return;
		}
		t->state = T_HEAD;
		http_parser_init(&t->p, HTTP_REQUEST);
		t->p.data = t;
	}
	while (!c->closing &&
	       (n = SSL_read(t->cl.ssl, t->plain, sizeof(t->plain))) > 0)
		from_run(t, t->plain, (size_t)n);
	if (c->closing)
		return;
	e = SSL_get_error(t->cl.ssl, n);
	flush(&t->cl);
	if (e != SSL_ERROR_WANT_READ) {
		ERR_clear_error();
		tls_close(t);
	}
}

static void tls_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
	struct pconn *c = s->data;
	struct ptls *t = c->tls;
	bool from_client = s == (uv_stream_t *)&c->client;
	struct tside *side = from_client ? &t->cl : &t->up,
		     *other = from_client ? &t->up : &t->cl;

	/* P_DONE: refused in plain HTTP (the server's handshake failed),
	 * the answer on its way. */
	if (n == 0 || c->closing || c->state == P_DONE || t->finishing)
		return;
	if (n < 0) {
		if (!from_client && t->state == T_UP_HS) {
			uv_read_stop(t->up.s);
			pconn_refuse_plain(c, 502,
					   "the server closed the connection "
					   "during the TLS handshake");
		} else if (from_client)
			tls_close(t);
		else
			finish(t);
		return;
	}
	c->last_ms = uv_now(c->port->spd->loop);
	if (BIO_write(side->rbio, b->base, (int)n) != (int)n) {
		tls_close(t);
		return;
	}
	if (from_client)
		cl_data(t);
	else
		up_data(t);
	if (c->closing || t->finishing)
		return;
	/* The slower side sets the pace: no more from here while what it
	 * made for the other side is still being written. */
	if (other->pending > 0) {
		uv_read_stop(s);
		side->paused = true;
	}
}

void pconn_tls_start(struct pconn *c)
{
	struct proxy_tls *pt = c->port->spd->proxy_tls;
	struct ptls *t;
	SSL_CTX *ctx;

	if (!pt) {
		pconn_refuse_plain(c, 502,
				   "the proxy's CA is not set up; the run "
				   "cannot trust spd for this host");
		return;
	}
	if (!proxy_cert_name_ok(c->host)) {
		pconn_refuse_plain(c, 403, "not a host name spd can terminate");
		return;
	}
	ctx = proxy_upstream_ctx(pt, c->host);
	t = calloc(1, sizeof(*t));
	if (!t) {
		pconn_close(c);
		return;
	}
	c->tls = t;
	t->c = c;
	t->cl.t = t->up.t = t;
	t->cl.s = (uv_stream_t *)&c->client;
	t->up.s = (uv_stream_t *)&c->upstream;
	if (side_ssl(&t->up, ctx) < 0) {
		pconn_close(c);
		return;
	}
	SSL_set_connect_state(t->up.ssl);
	if (SSL_set_tlsext_host_name(t->up.ssl, c->host) != 1 ||
	    SSL_set1_host(t->up.ssl, c->host) != 1) {
		pconn_close(c);
		return;
	}
	t->state = T_UP_HS;
	SSL_do_handshake(t->up.ssl);
	if (flush(&t->up) < 0 ||
	    uv_read_start(t->up.s, tls_alloc, tls_read) < 0)
		pconn_close(c);
}

void pconn_tls_free(struct pconn *c)
{
	struct ptls *t = c->tls;

	if (!t)
		return;
	SSL_free(t->cl.ssl);
	SSL_free(t->up.ssl);
	if (t->head)
		OPENSSL_cleanse(t->head, t->head_len);
	free(t->head);
	if (t->held_head)
		OPENSSL_cleanse(t->held_head, t->held_head_len);
	free(t->held_head);
	free(t->held);
	free(t->pkt);
	OPENSSL_cleanse(t->plain, sizeof(t->plain));
	free(t);
	c->tls = NULL;
}

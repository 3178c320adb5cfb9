/*
 * One HTTP/1.1 request read from an untrusted client, parsed with
 * http-parser (nodejs/http-parser), bounded, and checked for the forms
 * that let a request mean one thing here and another upstream (request
 * smuggling).  No I/O: the caller feeds bytes as they arrive.
 */
#ifndef SPD_DAEMON_HTTP_H
#define SPD_DAEMON_HTTP_H

#include <http_parser.h>
#include <stdbool.h>
#include <stddef.h>

/* Request line and headers together: an API request's headers are a
 * few hundred bytes; 64 KiB leaves room for long beta lists. */
#define HTTP_HEAD_MAX (64 * 1024)
/* Headers in one request: SDKs send about twenty. */
#define HTTP_HEADERS_MAX 100

struct http_header {
	char *name; /* lowercase */
	char *value;
};

struct http_request {
	char method[16];
	char *target; /* origin-form: "/path?query" */
	struct http_header *h;
	size_t nh;
	char *body;
	size_t body_len;
	/* On refusal: the status to answer (400, 405, 411, 413, 431, 501)
	 * and why, in a sentence. */
	int status;
	char why[160];
	/* Once complete: whether the client may send another request on the
	 * connection (HTTP/1.1 without "Connection: close", or HTTP/1.0 with
	 * "Connection: keep-alive"). */
	bool keep_alive;
	/* Of the bytes the last http_request_feed was given, how many
	 * belonged to this request: the rest begin the next one. */
	size_t used;
	/* The head is read and passed its checks (the body may follow);
	 * its Content-Length (0: none, or chunked). */
	bool head_done;
	size_t content_length;
	/* Called once the head has passed the framing checks, before any
	 * byte of the body is taken: non-zero refuses the request there
	 * (http_request_feed returns -ECANCELED; the caller answers it).
	 * NULL: none.  Set after http_request_init. */
	int (*on_head)(struct http_request *r, void *data);
	void *on_head_data;
	/* private */
	http_parser p;
	size_t body_max, head_bytes, body_cap;
	int last; /* 0 none, 1 field, 2 value */
	bool complete, failed, cancelled;
	unsigned n_cl, n_te;
};

/* Start reading a request whose body may be at most body_max bytes. */
void http_request_init(struct http_request *r, size_t body_max);
/*
 * Feed the next bytes.  Returns 1 once the request is complete (r->used
 * says how many of these bytes it took; the rest, unread, begin the next
 * request on a kept-alive connection, to be read by a fresh
 * http_request), 0 when more are needed (all taken), -EINVAL / -E2BIG
 * with r->status and r->why set, or -ECANCELED when r->on_head refused
 * the head; after a refusal or completion further calls return the same.  Refused: a
 * malformed request, both Content-Length and Transfer-Encoding, more than
 * one Content-Length or Transfer-Encoding, a Transfer-Encoding other than
 * "chunked", a target not in origin-form (absolute-form, authority-form,
 * "*"), an Upgrade, control bytes in a header value, and a head or body
 * over its limit.
 */
int http_request_feed(struct http_request *r, const char *data, size_t len);
/* The value of header name (lowercase), or NULL; the first of several. */
const char *http_request_header(const struct http_request *r, const char *name);
/* Free what the request holds; the struct itself is the caller's. */
void http_request_free(struct http_request *r);

#endif

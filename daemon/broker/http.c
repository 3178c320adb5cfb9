/*
 * Parsing one untrusted HTTP/1.1 request with http-parser
 * (daemon/broker/http.h), bounded, refusing request smuggling.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/broker/http.h"

static int refuse(struct http_request *r, int status, const char *why)
{
	if (!r->failed) {
		r->failed = true;
		r->status = status;
		snprintf(r->why, sizeof(r->why), "%s", why);
	}
	return -1;
}

static struct http_request *R(http_parser *p)
{
	return p->data;
}

static int append(char **s, const char *at, size_t n)
{
	size_t old = *s ? strlen(*s) : 0;
	char *ns = realloc(*s, old + n + 1);

	if (!ns)
		return -1;
	memcpy(ns + old, at, n);
	ns[old + n] = '\0';
	*s = ns;
	return 0;
}

static int count_head(struct http_request *r, size_t n)
{
	r->head_bytes += n;
	if (r->head_bytes > HTTP_HEAD_MAX)
		return refuse(r, 431, "the request's headers are too large");
	return 0;
}

static int on_url(http_parser *p, const char *at, size_t n)
{
	struct http_request *r = R(p);

	if (count_head(r, n) < 0 || append(&r->target, at, n) < 0)
		return refuse(r, 431, "the request line is too long");
	return 0;
}

static int on_field(http_parser *p, const char *at, size_t n)
{
	struct http_request *r = R(p);
	struct http_header *nh;

	if (count_head(r, n) < 0)
		return -1;
	if (r->last != 1) {
		if (r->nh >= HTTP_HEADERS_MAX)
			return refuse(r, 431, "too many headers");
		nh = realloc(r->h, (r->nh + 1) * sizeof(*nh));
		if (!nh)
			return refuse(r, 431, "out of memory");
		r->h = nh;
		r->h[r->nh].name = r->h[r->nh].value = NULL;
		r->nh++;
	}
	r->last = 1;
	if (append(&r->h[r->nh - 1].name, at, n) < 0)
		return refuse(r, 431, "out of memory");
	return 0;
}

static int on_value(http_parser *p, const char *at, size_t n)
{
	struct http_request *r = R(p);

	if (count_head(r, n) < 0)
		return -1;
	r->last = 2;
	for (size_t i = 0; i < n; i++)
		if (((unsigned char)at[i] < 0x20 && at[i] != '\t') ||
		    at[i] == 0x7f)
			return refuse(r, 400,
				      "a header value holds a control byte");
	if (append(&r->h[r->nh - 1].value, at, n) < 0)
		return refuse(r, 431, "out of memory");
	return 0;
}

static int on_headers_complete(http_parser *p)
{
	struct http_request *r = R(p);
	const char *te;

	for (size_t i = 0; i < r->nh; i++) {
		struct http_header *h = &r->h[i];

		if (!h->value && !(h->value = strdup("")))
			return refuse(r, 431, "out of memory");
		for (char *c = h->name; *c; c++)
			*c = (char)tolower((unsigned char)*c);
		if (strcmp(h->name, "content-length") == 0)
			r->n_cl++;
		else if (strcmp(h->name, "transfer-encoding") == 0)
			r->n_te++;
	}
	/* The framing must be unambiguous: whatever a front or back end
	 * would make of two lengths, or a length and chunking, spd refuses
	 * rather than pick. */
	if (r->n_cl > 1)
		return refuse(r, 400, "more than one Content-Length");
	if (r->n_te > 1)
		return refuse(r, 400, "more than one Transfer-Encoding");
	if (r->n_cl && r->n_te)
		return refuse(r, 400,
			      "both Content-Length and Transfer-Encoding");
	te = http_request_header(r, "transfer-encoding");
	if (te && strcasecmp(te, "chunked") != 0)
		return refuse(r, 501, "a Transfer-Encoding other than chunked");
	if (p->upgrade || http_request_header(r, "upgrade"))
		return refuse(r, 400, "protocol upgrades are not served");
	if (!r->target || r->target[0] != '/')
		return refuse(
		    r, 400,
		    "the request target must be a path (origin-form), "
		    "not an absolute URL");
	if (r->n_cl && p->content_length > r->body_max)
		return refuse(r, 413, "the request body is too large");
	snprintf(r->method, sizeof(r->method), "%s",
		 http_method_str((enum http_method)p->method));
	r->head_done = true;
	r->content_length = r->n_cl ? (size_t)p->content_length : 0;
	/* The caller's look at the head (the key), before any of the body
	 * is read or held. */
	if (r->on_head && r->on_head(r, r->on_head_data) != 0) {
		r->cancelled = true;
		return refuse(r, 0, "refused on its head");
	}
	return 0;
}

static int on_body(http_parser *p, const char *at, size_t n)
{
	struct http_request *r = R(p);
	size_t cap;
	char *nb;

	if (n > r->body_max - r->body_len)
		return refuse(r, 413, "the request body is too large");
	if (r->body_len + n + 1 > r->body_cap) {
		cap = r->body_cap ? r->body_cap : 4096;
		while (cap < r->body_len + n + 1)
			cap *= 2;
		nb = realloc(r->body, cap);
		if (!nb)
			return refuse(r, 413, "out of memory");
		r->body = nb;
		r->body_cap = cap;
	}
	memcpy(r->body + r->body_len, at, n);
	r->body_len += n;
	r->body[r->body_len] = '\0';
	return 0;
}

static int on_complete(http_parser *p)
{
	struct http_request *r = R(p);

	r->complete = true;
	r->keep_alive = http_should_keep_alive(p) != 0;
	/* What follows is the next request's, for a fresh parser: stop
	 * here, so that r->used ends at this request's last byte. */
	http_parser_pause(p, 1);
	return 0;
}

static const http_parser_settings settings = {
    .on_url = on_url,
    .on_header_field = on_field,
    .on_header_value = on_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_complete,
};

void http_request_init(struct http_request *r, size_t body_max)
{
	memset(r, 0, sizeof(*r));
	http_parser_init(&r->p, HTTP_REQUEST);
	r->p.data = r;
	r->body_max = body_max;
}

int http_request_feed(struct http_request *r, const char *data, size_t len)
{
	size_t n;
	enum http_errno e;

	r->used = 0;
	if (r->cancelled)
		return -ECANCELED;
	if (r->failed)
		return r->status == 413 || r->status == 431 ? -E2BIG : -EINVAL;
	if (r->complete)
		return 1;
	if (len == 0)
		return 0;
	n = http_parser_execute(&r->p, &settings, data, len);
	e = HTTP_PARSER_ERRNO(&r->p);
	r->used = n;
	if (r->complete)
		return 1;
	if (!r->failed && (e != HPE_OK || n != len)) {
		char why[160];

		snprintf(why, sizeof(why), "malformed request: %s",
			 http_errno_description(e));
		refuse(r, 400, why);
	}
	if (r->cancelled)
		return -ECANCELED;
	if (r->failed)
		return r->status == 413 || r->status == 431 ? -E2BIG : -EINVAL;
	return 0;
}

const char *http_request_header(const struct http_request *r, const char *name)
{
	for (size_t i = 0; i < r->nh; i++)
		if (r->h[i].name && strcmp(r->h[i].name, name) == 0)
			return r->h[i].value ? r->h[i].value : "";
	return NULL;
}

void http_request_free(struct http_request *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nh; i++) {
		free(r->h[i].name);
		free(r->h[i].value);
	}
	free(r->h);
	free(r->target);
	free(r->body);
	r->h = NULL;
	r->target = r->body = NULL;
	r->nh = 0;
}

/*
 * Fuzz the two parsers of the model broker that read untrusted bytes:
 * the HTTP request parser (daemon/broker/http.c, bytes from any local client)
 * and the usage parser (daemon/broker/usage.c, bytes from a provider).
 *
 * The first input byte picks how the rest is split into pieces; then
 * checked for every input:
 *   - http_request_feed gives the same verdict (status, method, target,
 *     headers, body) however the bytes are split; an accepted request
 *     has an origin-form target, at most one Content-Length, never both
 *     Content-Length and Transfer-Encoding, and a body within its limit;
 *   - read as a kept-alive connection (daemon/broker/gw_conn.c: the
 *     bytes after a request begin the next one, read by a fresh parser,
 *     until a refusal or a request without keep-alive), the sequence of
 *     requests and verdicts is the same however the bytes are split, and
 *     a request never takes more bytes than it was given;
 *   - an accepted request's target through the broker's routes
 *     (daemon/broker/gw_api.c): a route's path and model fit their
 *     buffers and a Gemini model is a plain name; the query without its
 *     key= holds no key= and is never longer than the target;
 *   - the usage parser, in SSE and in whole-body mode, for every API,
 *     reports the same usage however the bytes are split, and never a
 *     negative count;
 *   - the billing-option check (daemon/broker/bound.c), on the bytes as a
 *     request body of every route: counted choices are 1 to
 *     BOUND_CHOICES_MAX and extra tokens never negative, a refusal is a
 *     400 with a sentence.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/broker/bound.h"
#include "daemon/broker/gateway_priv.h"
#include "daemon/broker/http.h"
#include "daemon/broker/usage.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define BODY_MAX 4096

static void check_route(const char *target);

static int feed_http(struct http_request *r, const uint8_t *d, size_t n,
		     size_t step)
{
	int res = 0;

	http_request_init(r, BODY_MAX);
	for (size_t i = 0; i < n; i += step) {
		size_t k = n - i < step ? n - i : step;

		res = http_request_feed(r, (const char *)d + i, k);
		if (res != 0)
			break;
	}
	return res;
}

static void check_http(const uint8_t *d, size_t n, size_t step)
{
	struct http_request a, b;
	int ra = feed_http(&a, d, n, n ? n : 1);
	int rb = feed_http(&b, d, n, step);

	if (ra != rb)
		abort();
	if (ra == 1) {
		if (!a.target || a.target[0] != '/' || a.body_len > BODY_MAX)
			abort();
		check_route(a.target);
		if (a.n_cl > 1 || (a.n_cl && a.n_te))
			abort();
		if (strcmp(a.method, b.method) || strcmp(a.target, b.target) ||
		    a.nh != b.nh || a.body_len != b.body_len ||
		    (a.body_len && memcmp(a.body, b.body, a.body_len)))
			abort();
		for (size_t i = 0; i < a.nh; i++)
			if (strcmp(a.h[i].name, b.h[i].name) ||
			    strcmp(a.h[i].value, b.h[i].value))
				abort();
	} else if (ra < 0 && a.status != b.status) {
		abort();
	}
	http_request_free(&a);
	http_request_free(&b);
}

/* Most requests of one input read as a kept-alive connection. */
#define SEQ_MAX 8

struct seq {
	int n;
	int verdict[SEQ_MAX];
	size_t body_len[SEQ_MAX], target_len[SEQ_MAX];
};

/* Bytes as gw_conn.c reads them: appended to what is pending, parsed,
 * the rest after a whole request kept for the next. */
static void feed_seq(const uint8_t *d, size_t n, size_t step, struct seq *o)
{
	char *pending = malloc(n + 1);
	size_t plen = 0;
	struct http_request r;
	bool done = false;

	memset(o, 0, sizeof(*o));
	http_request_init(&r, BODY_MAX);
	for (size_t i = 0; i < n && !done; i += step) {
		size_t k = n - i < step ? n - i : step;

		memcpy(pending + plen, d + i, k);
		plen += k;
		while (plen && !done) {
			int res = http_request_feed(&r, pending, plen);

			if (res == 0) {
				plen = 0;
				break;
			}
			if (res > 0 && r.used > plen)
				abort();
			o->verdict[o->n] = res < 0 ? r.status : 1;
			o->body_len[o->n] = res > 0 ? r.body_len : 0;
			o->target_len[o->n] =
			    res > 0 && r.target ? strlen(r.target) : 0;
			o->n++;
			if (res < 0 || !r.keep_alive || o->n == SEQ_MAX) {
				done = true;
				break;
			}
			memmove(pending, pending + r.used, plen - r.used);
			plen -= r.used;
			http_request_free(&r);
			http_request_init(&r, BODY_MAX);
		}
	}
	http_request_free(&r);
	free(pending);
}

static void check_seq(const uint8_t *d, size_t n, size_t step)
{
	struct seq a, b;

	feed_seq(d, n, n ? n : 1, &a);
	feed_seq(d, n, step, &b);
	if (a.n != b.n)
		abort();
	for (int i = 0; i < a.n; i++)
		if (a.verdict[i] != b.verdict[i] ||
		    a.body_len[i] != b.body_len[i] ||
		    a.target_len[i] != b.target_len[i])
			abort();
}

static void run_usage(struct usage_parser *p, enum usage_api api, bool sse,
		      const uint8_t *d, size_t n, size_t step)
{
	usage_init(p, api, sse);
	for (size_t i = 0; i < n; i += step)
		usage_feed(p, (const char *)d + i, n - i < step ? n - i : step);
	usage_finish(p);
}

static void check_route(const char *target)
{
	char path[GATEWAY_PATH_MAX], model[PRICE_MODEL_NAME_MAX + 1];
	char *rest, *key = NULL;
	enum broker_api api;
	bool count, stream;

	if (gw_route(target, &api, &count, &stream, path, sizeof(path), model,
		     sizeof(model)) == 0) {
		if (strlen(path) >= sizeof(path) ||
		    strlen(model) >= sizeof(model))
			abort();
		if (api == BROKER_API_GEMINI &&
		    (!model[0] || strpbrk(model, "/?#%:")))
			abort();
	}
	rest = gw_query_take_key(target, &key);
	if (!rest)
		return;
	/* No parameter of the query left is a key= (a '?' inside a value,
	 * "?a=b?key=c", is the value's). */
	if (strlen(rest) > strlen(target))
		abort();
	if (strchr(rest, '?')) {
		const char *p = strchr(rest, '?') + 1;

		for (;;) {
			if (strncmp(p, "key=", 4) == 0)
				abort();
			p += strcspn(p, "&;");
			if (!*p)
				break;
			p++;
		}
	}
	free(rest);
	free(key);
}

static void check_usage(const uint8_t *d, size_t n, size_t step)
{
	for (int api = 0; api <= USAGE_GEMINI; api++)
		for (int sse = 0; sse < 2; sse++) {
			struct usage_parser a, b;

			run_usage(&a, (enum usage_api)api, sse, d, n,
				  n ? n : 1);
			run_usage(&b, (enum usage_api)api, sse, d, n, step);
			if (a.complete != b.complete ||
			    memcmp(&a.u, &b.u, sizeof(a.u)) != 0)
				abort();
			if (a.u.input < 0 || a.u.output < 0 ||
			    a.u.cache_read < 0 || a.u.cache_write < 0)
				abort();
			usage_free(&a);
			usage_free(&b);
		}
}

static void check_bound(const uint8_t *d, size_t n)
{
	static const struct {
		enum broker_api api;
		const char *path;
	} routes[] = {{BROKER_API_ANTHROPIC, "/v1/messages"},
		      {BROKER_API_OPENAI, "/v1/chat/completions"},
		      {BROKER_API_OPENAI, "/v1/responses"}};
	json_t *o =
	    json_loadb((const char *)d, n, JSON_REJECT_DUPLICATES, NULL);

	for (size_t i = 0; json_is_object(o) && i < 3; i++)
		for (int lc = 0; lc < 2; lc++) {
			struct broker_refusal e = {0};
			int64_t choices = 0, extra = -1;

			if (bound_request(o, routes[i].api, routes[i].path, lc,
					  &choices, &extra, &e)) {
				if (choices < 1 ||
				    choices > BOUND_CHOICES_MAX || extra < 0)
					abort();
			} else if (e.status != 400 || !e.msg[0]) {
				abort();
			}
			json_decref(e.extra);
		}
	json_decref(o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t step;

	if (size < 1)
		return 0;
	step = (size_t)(data[0] % 16) + 1;
	check_http(data + 1, size - 1, step);
	check_seq(data + 1, size - 1, step);
	check_usage(data + 1, size - 1, step);
	check_bound(data + 1, size - 1);
	return 0;
}

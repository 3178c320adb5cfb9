/*
 * Reading what a provider says a call used (daemon/broker/usage.h) from
 * its JSON or its server-sent events as they stream past.
 */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/broker/usage.h"

void usage_init(struct usage_parser *p, enum usage_api api, bool sse)
{
	memset(p, 0, sizeof(*p));
	p->api = api;
	p->sse = sse;
}

void usage_free(struct usage_parser *p)
{
	if (!p)
		return;
	free(p->buf);
	free(p->data);
	p->buf = p->data = NULL;
}

/* A token count: a non-negative integer, else the field is ignored. */
static void take(json_t *o, const char *name, int64_t *dst)
{
	json_t *v = json_object_get(o, name);

	if (json_is_integer(v) && json_integer_value(v) >= 0)
		*dst = json_integer_value(v);
}

static void anthropic(struct usage_parser *p, json_t *o)
{
	const char *type = json_string_value(json_object_get(o, "type"));
	json_t *u = NULL;
	bool final = false;

	if (type && strcmp(type, "message_start") == 0) {
		u = json_object_get(json_object_get(o, "message"), "usage");
	} else if (type && strcmp(type, "message_delta") == 0) {
		u = json_object_get(o, "usage");
		final = true;
	} else if (!p->sse && type && strcmp(type, "message") == 0) {
		u = json_object_get(o, "usage");
		final = true;
	}
	if (!json_is_object(u))
		return;
	take(u, "input_tokens", &p->u.input);
	take(u, "output_tokens", &p->u.output);
	take(u, "cache_read_input_tokens", &p->u.cache_read);
	take(u, "cache_creation_input_tokens", &p->u.cache_write);
	/* Of those, the ones kept for an hour: billed at that rate. */
	take(json_object_get(u, "cache_creation"), "ephemeral_1h_input_tokens",
	     &p->u.cache_write_1h);
	if (final)
		p->complete = true;
}

static void openai(struct usage_parser *p, json_t *o)
{
	const char *type = json_string_value(json_object_get(o, "type"));
	json_t *u = json_object_get(o, "usage"), *d;
	int64_t in = -1, cached = 0, out = -1;

	/* Responses API events carry the response; only its end has the
	 * usage (completed, or incomplete and failed, which are billed). */
	if (type && (strcmp(type, "response.completed") == 0 ||
		     strcmp(type, "response.incomplete") == 0 ||
		     strcmp(type, "response.failed") == 0))
		u = json_object_get(json_object_get(o, "response"), "usage");
	if (!json_is_object(u))
		return;
	if (json_object_get(u, "prompt_tokens")) { /* chat completions */
		take(u, "prompt_tokens", &in);
		take(u, "completion_tokens", &out);
		d = json_object_get(u, "prompt_tokens_details");
	} else { /* responses */
		take(u, "input_tokens", &in);
		take(u, "output_tokens", &out);
		d = json_object_get(u, "input_tokens_details");
	}
	if (in < 0 || out < 0)
		return;
	take(d, "cached_tokens", &cached);
	if (cached > in)
		cached = in;
	/* OpenAI counts cached tokens inside the prompt's; they are billed
	 * at the cache-read rate instead. */
	p->u.input = in - cached;
	p->u.cache_read = cached;
	p->u.output = out;
	p->u.cache_write = 0;
	p->u.cache_write_1h = 0;
	p->complete = true;
}

/*
 * One Gemini response (or streamed chunk).  usageMetadata counts the
 * whole call so far in each chunk (the last value counts); the prompt's
 * count holds the cached tokens (billed at the cache-read rate instead)
 * and a tool-use prompt's are input too; the candidates' count leaves
 * out the thoughts, which are billed as output.  The usage is final once
 * a candidate has finished and usage came with or after it.
 */
static void gemini(struct usage_parser *p, json_t *o)
{
	json_t *u = json_object_get(o, "usageMetadata"), *c;
	int64_t prompt = -1, cached = 0, tool = 0, cand = 0, thoughts = 0;
	size_t i;

	json_array_foreach(
	    json_object_get(o, "candidates"), i,
	    c) if (json_is_string(json_object_get(c, "finishReason")))
	    p->finished = true;
	if (!json_is_object(u))
		return;
	take(u, "promptTokenCount", &prompt);
	if (prompt < 0)
		return;
	take(u, "cachedContentTokenCount", &cached);
	take(u, "toolUsePromptTokenCount", &tool);
	take(u, "candidatesTokenCount", &cand);
	take(u, "thoughtsTokenCount", &thoughts);
	if (cached > prompt)
		cached = prompt;
	p->u.input = prompt - cached;
	if (__builtin_add_overflow(p->u.input, tool, &p->u.input))
		p->u.input = INT64_MAX;
	p->u.cache_read = cached;
	if (__builtin_add_overflow(cand, thoughts, &p->u.output))
		p->u.output = INT64_MAX;
	p->u.cache_write = 0;
	if (p->finished)
		p->complete = true;
}

static void parse_json(struct usage_parser *p, const char *text, size_t n)
{
	json_t *o = json_loadb(text, n, JSON_REJECT_DUPLICATES, NULL), *e;
	size_t i;

	if (json_is_object(o)) {
		if (p->api == USAGE_ANTHROPIC)
			anthropic(p, o);
		else if (p->api == USAGE_GEMINI)
			gemini(p, o);
		else
			openai(p, o);
	} else if (json_is_array(o) && p->api == USAGE_GEMINI && !p->sse) {
		/* streamGenerateContent without alt=sse: the chunks as one
		 * JSON array. */
		json_array_foreach(o, i, e) if (json_is_object(e)) gemini(p, e);
	}
	json_decref(o);
}

static void dispatch(struct usage_parser *p)
{
	if (!p->data_overflow && p->dlen)
		parse_json(p, p->data, p->dlen);
	p->dlen = 0;
	p->data_overflow = false;
}

static int grow(char **b, size_t *cap, size_t need)
{
	size_t c = *cap ? *cap : 1024;
	char *nb;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	nb = realloc(*b, c);
	if (!nb)
		return -ENOMEM;
	*b = nb;
	*cap = c;
	return 0;
}

/* One SSE line (without its end): "data:" lines gather into the event,
 * an empty line ends it; "event:", "id:", comments are not needed. */
static int line(struct usage_parser *p, const char *s, size_t n)
{
	const char *v;
	size_t vn;

	if (n == 0) {
		dispatch(p);
		return 0;
	}
	if (n < 5 || memcmp(s, "data:", 5) != 0)
		return 0;
	v = s + 5;
	vn = n - 5;
	if (vn && *v == ' ') {
		v++;
		vn--;
	}
	if (p->data_overflow)
		return 0;
	if (p->dlen + vn + 1 > USAGE_EVENT_MAX) {
		p->data_overflow = true;
		return 0;
	}
	if (grow(&p->data, &p->dcap, p->dlen + vn + 2) < 0)
		return -ENOMEM;
	if (p->dlen)
		p->data[p->dlen++] = '\n';
	memcpy(p->data + p->dlen, v, vn);
	p->dlen += vn;
	return 0;
}

int usage_feed(struct usage_parser *p, const char *data, size_t len)
{
	if (!p->sse) {
		if (p->overflow || len > USAGE_BODY_MAX - p->len) {
			p->overflow = true;
			return 0;
		}
		if (grow(&p->buf, &p->cap, p->len + len + 1) < 0)
			return -ENOMEM;
		memcpy(p->buf + p->len, data, len);
		p->len += len;
		return 0;
	}
	for (size_t i = 0; i < len; i++) {
		char c = data[i];

		/* "\r\n" is one line end; a lone "\r" or "\n" is one too. */
		if (c == '\n' && p->last_cr) {
			p->last_cr = false;
			continue;
		}
		p->last_cr = c == '\r';
		if (c == '\r' || c == '\n') {
			int r = p->overflow ? 0 : line(p, p->buf, p->len);

			if (p->overflow)
				p->data_overflow = true;
			p->len = 0;
			p->overflow = false;
			if (r < 0)
				return r;
			continue;
		}
		if (p->overflow)
			continue;
		if (p->len + 1 > USAGE_EVENT_MAX) {
			p->overflow = true;
			continue;
		}
		if (grow(&p->buf, &p->cap, p->len + 1) < 0)
			return -ENOMEM;
		p->buf[p->len++] = c;
	}
	return 0;
}

void usage_finish(struct usage_parser *p)
{
	if (!p->sse) {
		if (!p->overflow && p->len)
			parse_json(p, p->buf, p->len);
		p->len = 0;
		return;
	}
	if (p->len && !p->overflow)
		line(p, p->buf, p->len);
	p->len = 0;
	dispatch(p);
}

/*
 * What a provider says a call used, read from its response as it
 * streams past: Anthropic's message_start and message_delta events (or
 * the usage of a whole message), OpenAI's final chat chunk with
 * include_usage (or a whole completion's usage), the Responses API's
 * response.completed, and Gemini's usageMetadata (in each streamed
 * chunk, final once a candidate has its finishReason; or a whole
 * response, or the JSON array of chunks streamGenerateContent sends
 * without alt=sse).  Each field keeps the last value reported, never a
 * sum: Anthropic's delta usage is cumulative.  The bytes are the
 * provider's, so every size is bounded and malformed input only means
 * "no usage".  No I/O.
 */
#ifndef SPD_DAEMON_USAGE_H
#define SPD_DAEMON_USAGE_H

#include <stdbool.h>
#include <stddef.h>

#include "daemon/broker/price.h"

/* Longest server-sent event (or line of one) read for usage: a usage
 * event is a few hundred bytes; longer events (a big text delta) are
 * passed through to the client but not parsed. */
#define USAGE_EVENT_MAX (1024 * 1024)
/* Longest non-streamed response body parsed for usage. */
#define USAGE_BODY_MAX (8 * 1024 * 1024)

enum usage_api { USAGE_ANTHROPIC, USAGE_OPENAI, USAGE_GEMINI };

struct usage_parser {
	enum usage_api api;
	bool sse;
	struct price_usage u;
	bool complete; /* the final usage was seen */
	/* private */
	char *buf; /* the pending line (SSE) or the body so far */
	size_t len, cap;
	bool overflow; /* the current line or body passed its limit */
	char *data;    /* the current event's data lines */
	size_t dlen, dcap;
	bool data_overflow, last_cr;
	bool finished; /* Gemini: a candidate's finishReason was seen */
};

/* Start reading a response of api; sse when its Content-Type is
 * text/event-stream. */
void usage_init(struct usage_parser *p, enum usage_api api, bool sse);
/* Feed response bytes in any pieces.  Returns 0, or -ENOMEM. */
int usage_feed(struct usage_parser *p, const char *data, size_t len);
/* The response ended: parse a whole body, or a last event without its
 * blank line.  Then p->complete says whether p->u is the final usage. */
void usage_finish(struct usage_parser *p);
/* Free the buffers; the struct is the caller's. */
void usage_free(struct usage_parser *p);

#endif

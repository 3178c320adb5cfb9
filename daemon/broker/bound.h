/*
 * What a model request may cost beyond its bytes (issue 36): the options
 * that multiply or add billed tokens are counted (OpenAI "n" choices, the
 * hidden prompts of provider-defined client tools), and those no bound
 * can be put on are named for refusal: context held by the provider,
 * documents and images it fetches or stores, tools it runs and bills per
 * use, tiers not in spd's price table.  Reads a parsed body only; no I/O.
 */
#ifndef SPD_DAEMON_BOUND_H
#define SPD_DAEMON_BOUND_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon/broker/broker.h"

/* Most completions one OpenAI chat call may ask for ("n"): each is billed
 * in full, so the reservation multiplies by it. */
#define BOUND_CHOICES_MAX 128

/* Why a request is refused before any provider is asked: the HTTP status,
 * spd's symbol, a sentence, and extra fields for the error body (owned,
 * or NULL). */
struct broker_refusal {
	int status;
	const char *code;
	char msg[512];
	json_t *extra;
};

/*
 * Whether spd can bound what the request o (to path of api) may cost:
 * true with *ret_choices (completions asked for, 1 or more) and
 * *ret_extra (input tokens its bytes do not hold), or false with e set
 * (400 UNBOUNDED-OPTION naming the option, or 400 BAD-REQUEST for a bad
 * "n").  long_context: the client asked Anthropic for its 1M-context tier
 * (anthropic-beta context-1m-*).
 */
bool bound_request(json_t *o, enum broker_api api, const char *path,
		   bool long_context, int64_t *ret_choices, int64_t *ret_extra,
		   struct broker_refusal *e);

#endif

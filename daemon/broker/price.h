/*
 * The model price table: what one token of each kind costs, per model,
 * shipped with spd and overridable in spd.conf ([model "NAME"] input,
 * output, cache-read, cache-write, cache-write-1h in USD per million
 * tokens, max-output in tokens).  A model is found by its exact name: a
 * dated snapshot ("gpt-4o-2024-05-13") is its own row, since snapshots of
 * one name are priced differently, and one not in the table is unpriced.  Money is counted in integer picodollars (1e-12 USD) so that
 * a cap is reached exactly, never by rounding; a price of X USD per
 * million tokens is X * 1e6 picodollars per token, held exactly.
 */
#ifndef SPD_DAEMON_PRICE_H
#define SPD_DAEMON_PRICE_H

#include <stddef.h>
#include <stdint.h>

struct git_config;

/* Picodollars per USD. */
#define PRICE_PUSD_PER_USD 1000000000000LL
/* Most models in the table: a price list, not a catalogue of the world. */
#define PRICE_MODELS_MAX 256
/* Longest model name: providers' names are under 100 characters. */
#define PRICE_MODEL_NAME_MAX 128
/* Dearest token spd accepts a price for (USD 10000 per million): above
 * that a typo (a missing decimal point) is far likelier than a model. */
#define PRICE_PER_MTOK_MAX_USD 10000
/* Largest max-output: no model writes ten million tokens in one call. */
#define PRICE_MAX_OUTPUT_MAX 10000000

/*
 * Input tokens a provider may bill beyond what the request's bytes can
 * hold: the system prompt a provider adds for tool use (Anthropic's is
 * about 350 tokens) and per-message framing.  Added to every worst case
 * so that the bound never falls below the real count.
 */
#define PRICE_HIDDEN_INPUT_TOKENS 1024
/*
 * Input tokens a provider-defined client tool (Anthropic's bash,
 * text_editor, computer, memory) adds to the prompt beyond its bytes in
 * the request: its definition and system prompt, under 1,000 tokens each
 * by the providers' own figures.
 */
#define PRICE_TOOL_HIDDEN_TOKENS 1024

struct price {
	char model[PRICE_MODEL_NAME_MAX + 1];
	/* Picodollars per token. */
	int64_t input, output, cache_read, cache_write;
	/* A cache write kept for an hour (Anthropic's "ttl": "1h"); the
	 * five-minute rate, cache_write, when the model has no such tier. */
	int64_t cache_write_1h;
	int64_t max_output; /* tokens the model may write in one call */
};

struct price_table {
	struct price *v;
	size_t n;
	char hash[65]; /* BLAKE2b-256 hex of the canonical table */
};

/* What a provider reported a call used.  cache_write counts every
 * cache-write token; cache_write_1h how many of them were written for an
 * hour (priced at that rate instead). */
struct price_usage {
	int64_t input, output, cache_read, cache_write;
	int64_t cache_write_1h;
};

/*
 * Fill *ret with the shipped prices overridden by gc's [model "NAME"]
 * keys (gc may be NULL: the shipped table).  A new model needs input,
 * output and max-output; a value that is not a plain non-negative
 * decimal in range is refused.  Returns 0, or -errno with a sentence in
 * errbuf (path names the file in it).  Free with price_table_free.
 */
int price_table_load(struct git_config *gc, const char *path,
		     struct price_table *ret, char *errbuf, size_t errlen);
/* Release the table's entries; NULL allowed. */
void price_table_free(struct price_table *t);

/*
 * The price of model, matched exactly.  NULL when the table has none:
 * the caller refuses the call, never treats the model as free.
 */
const struct price *price_lookup(const struct price_table *t,
				 const char *model);

/*
 * The most a call can cost: every byte of the request body an input
 * token (a token is at least one byte, so this never falls below the
 * real count), plus PRICE_HIDDEN_INPUT_TOKENS, at the dearest input rate (input, cache-read or
 * cache-write), and min(max_tokens, the model's max-output) output
 * tokens (max_tokens <= 0: the model's max).  Saturates at INT64_MAX.
 */
int64_t price_worst_case(const struct price *p, size_t body_bytes,
			 int64_t max_tokens);
/*
 * The input half of the worst case: every byte of the body a token, plus
 * PRICE_HIDDEN_INPUT_TOKENS and extra_tokens (what the request adds that
 * its bytes do not hold), at the dearest input rate.  Saturates.
 */
int64_t price_input_bound(const struct price *p, size_t body_bytes,
			  int64_t extra_tokens);
/*
 * The output half: min(max_tokens, the model's max-output) tokens
 * (max_tokens <= 0: the model's max) for each of choices (at least 1)
 * completions.  Saturates.
 */
int64_t price_output_bound(const struct price *p, int64_t max_tokens,
			   int64_t choices);
/*
 * The most output tokens per completion, for choices completions, that
 * budget picodollars pay for at p, at most the model's max-output; 0
 * when budget is not positive.
 */
int64_t price_output_affordable(const struct price *p, int64_t budget,
				int64_t choices);
/* What usage costs at p, in picodollars; saturates at INT64_MAX. */
int64_t price_cost(const struct price *p, const struct price_usage *u);

/*
 * Parse a non-negative decimal ("3", "0.25", "1.") with at most scale
 * fraction digits into value * 10^scale, exactly.  Returns 0 and
 * *ret, or -EINVAL (not a number, too many digits) / -ERANGE.
 */
int price_parse_fixed(const char *s, unsigned scale, int64_t *ret);
/* Format picodollars as USD with 6 decimals into buf ("0.000123"). */
void price_format_usd(int64_t pusd, char *buf, size_t len);
/* Picodollars as a double number of USD, for JSON. */
double price_usd(int64_t pusd);

#endif

/*
 * The price table (daemon/broker/price.h): shipped prices, spd.conf
 * overrides, its hash, a call's worst case, exact picodollar arithmetic.
 */
#include <ctype.h>
#include <errno.h>
#include <git2.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/config.h"
#include "daemon/broker/price.h"
#include "common/util.h"

/* USD per million tokens as written, max-output in tokens.  Sources: the
 * providers' published price pages.  A model's max-output errs high: it
 * bounds the reservation, so too low would let a call overshoot.  A row
 * names its model and the dated snapshots billed exactly like it
 * (comma-separated): a snapshot billed otherwise ("gpt-4o-2024-05-13")
 * has its own row, and one not listed is unpriced.  cache_write_1h NULL:
 * no such tier, the five-minute rate. */
static const struct {
	const char *model, *also, *input, *output, *cache_read, *cache_write,
	    *cache_write_1h;
	int64_t max_output;
} shipped[] = {
    {"claude-opus-4-1", "claude-opus-4-1-20250805", "15", "75", "1.5", "18.75",
     "30", 32000},
    {"claude-opus-4", "claude-opus-4-20250514", "15", "75", "1.5", "18.75",
     "30", 32000},
    {"claude-sonnet-4-5", "claude-sonnet-4-5-20250929", "3", "15", "0.3",
     "3.75", "6", 64000},
    {"claude-sonnet-4", "claude-sonnet-4-20250514", "3", "15", "0.3", "3.75",
     "6", 64000},
    {"claude-3-7-sonnet", "claude-3-7-sonnet-20250219,claude-3-7-sonnet-latest",
     "3", "15", "0.3", "3.75", "6", 128000},
    {"claude-haiku-4-5", "claude-haiku-4-5-20251001", "1", "5", "0.1", "1.25",
     "2", 64000},
    {"claude-3-5-haiku", "claude-3-5-haiku-20241022,claude-3-5-haiku-latest",
     "0.8", "4", "0.08", "1", "1.6", 8192},
    {"gpt-5", "gpt-5-2025-08-07", "1.25", "10", "0.125", "1.25", NULL, 128000},
    {"gpt-5-mini", "gpt-5-mini-2025-08-07", "0.25", "2", "0.025", "0.25", NULL,
     128000},
    {"gpt-4.1", "gpt-4.1-2025-04-14", "2", "8", "0.5", "2", NULL, 32768},
    {"gpt-4.1-mini", "gpt-4.1-mini-2025-04-14", "0.4", "1.6", "0.1", "0.4",
     NULL, 32768},
    {"gpt-4o", "gpt-4o-2024-08-06,gpt-4o-2024-11-20", "2.5", "10", "1.25",
     "2.5", NULL, 16384},
    /* The first gpt-4o snapshot: twice the price, no cached input. */
    {"gpt-4o-2024-05-13", NULL, "5", "15", "5", "5", NULL, 4096},
    {"gpt-4o-mini", "gpt-4o-mini-2024-07-18", "0.15", "0.6", "0.075", "0.15",
     NULL, 16384},
    {"o3", "o3-2025-04-16", "2", "8", "0.5", "2", NULL, 100000},
    {"o4-mini", "o4-mini-2025-04-16", "1.1", "4.4", "0.275", "1.1", NULL,
     100000},
    /* Gemini: where a price rises past a 200k-token prompt, the higher
     * one, so that spd never charges a call less than Google does.
     * Cached content has no write price of its own (its input's). */
    {"gemini-3-pro-preview", NULL, "4", "18", "0.4", "4", NULL, 65536},
    {"gemini-3-flash-preview", NULL, "0.5", "3", "0.05", "0.5", NULL, 65536},
    {"gemini-2.5-pro", NULL, "2.5", "15", "0.25", "2.5", NULL, 65536},
    {"gemini-2.5-flash", NULL, "0.3", "2.5", "0.075", "0.3", NULL, 65536},
    {"gemini-2.5-flash-lite", NULL, "0.1", "0.4", "0.025", "0.1", NULL, 65536},
    {"gemini-2.0-flash", NULL, "0.1", "0.4", "0.025", "0.1", NULL, 8192},
    {"gemini-2.0-flash-lite", NULL, "0.075", "0.3", "0.075", "0.075", NULL,
     8192},
};

int price_parse_fixed(const char *s, unsigned scale, int64_t *ret)
{
	int64_t v = 0;
	unsigned frac = 0;
	bool dot = false, digit = false;

	if (!s || !*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s == '.' && !dot) {
			dot = true;
			continue;
		}
		if (!isdigit((unsigned char)*s))
			return -EINVAL;
		digit = true;
		if (dot && ++frac > scale)
			return -EINVAL;
		if (v > (INT64_MAX - 9) / 10)
			return -ERANGE;
		v = v * 10 + (*s - '0');
	}
	if (!digit)
		return -EINVAL;
	for (; frac < scale; frac++) {
		if (v > INT64_MAX / 10)
			return -ERANGE;
		v *= 10;
	}
	*ret = v;
	return 0;
}

void price_format_usd(int64_t pusd, char *buf, size_t len)
{
	/* Rounded up to the micro-dollar: a charge never looks smaller. */
	int64_t micro = pusd / 1000000 + (pusd % 1000000 != 0);

	snprintf(buf, len, "%lld.%06lld", (long long)(micro / 1000000),
		 (long long)(micro % 1000000));
}

double price_usd(int64_t pusd)
{
	return (double)pusd / (double)PRICE_PUSD_PER_USD;
}

static int64_t sat_mul(int64_t a, int64_t b)
{
	int64_t r;

	if (a < 0 || b < 0)
		return 0;
	if (__builtin_mul_overflow(a, b, &r))
		return INT64_MAX;
	return r;
}

static int64_t sat_add(int64_t a, int64_t b)
{
	int64_t r;

	if (__builtin_add_overflow(a, b, &r))
		return INT64_MAX;
	return r;
}

int64_t price_input_bound(const struct price *p, size_t body_bytes,
			  int64_t extra_tokens)
{
	int64_t in_rate = p->input, in;

	if (p->cache_read > in_rate)
		in_rate = p->cache_read;
	if (p->cache_write > in_rate)
		in_rate = p->cache_write;
	if (p->cache_write_1h > in_rate)
		in_rate = p->cache_write_1h;
	in = body_bytes > (size_t)(INT64_MAX - PRICE_HIDDEN_INPUT_TOKENS)
		 ? INT64_MAX
		 : (int64_t)body_bytes + PRICE_HIDDEN_INPUT_TOKENS;
	return sat_mul(sat_add(in, extra_tokens > 0 ? extra_tokens : 0),
		       in_rate);
}

int64_t price_output_bound(const struct price *p, int64_t max_tokens,
			   int64_t choices)
{
	int64_t out = max_tokens <= 0 || max_tokens > p->max_output
			  ? p->max_output
			  : max_tokens;

	return sat_mul(sat_mul(out, choices > 1 ? choices : 1), p->output);
}

int64_t price_output_affordable(const struct price *p, int64_t budget,
				int64_t choices)
{
	int64_t per = sat_mul(p->output, choices > 1 ? choices : 1), n;

	if (budget <= 0)
		return 0;
	if (per <= 0)
		return p->max_output; /* free output: the model's max */
	n = budget / per;
	return n > p->max_output ? p->max_output : n;
}

int64_t price_worst_case(const struct price *p, size_t body_bytes,
			 int64_t max_tokens)
{
	return sat_add(price_input_bound(p, body_bytes, 0),
		       price_output_bound(p, max_tokens, 1));
}

int64_t price_cost(const struct price *p, const struct price_usage *u)
{
	int64_t c = sat_mul(u->input, p->input);
	int64_t hour = u->cache_write_1h < 0 ? 0 : u->cache_write_1h;

	if (hour > u->cache_write)
		hour = u->cache_write;
	c = sat_add(c, sat_mul(u->output, p->output));
	c = sat_add(c, sat_mul(u->cache_read, p->cache_read));
	c = sat_add(c, sat_mul(u->cache_write - hour, p->cache_write));
	return sat_add(c, sat_mul(hour, p->cache_write_1h));
}

static struct price *find(struct price_table *t, const char *model)
{
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->v[i].model, model) == 0)
			return &t->v[i];
	return NULL;
}

const struct price *price_lookup(const struct price_table *t, const char *model)
{
	if (!t || !model)
		return NULL;
	/* Exactly: a snapshot's name never borrows its family's prices. */
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->v[i].model, model) == 0)
			return &t->v[i];
	return NULL;
}

static int add_model(struct price_table *t, const char *model,
		     struct price **ret)
{
	struct price *nv;

	if (t->n >= PRICE_MODELS_MAX)
		return -E2BIG;
	if (strlen(model) > PRICE_MODEL_NAME_MAX)
		return -ENAMETOOLONG;
	nv = realloc(t->v, (t->n + 1) * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	t->v = nv;
	memset(&nv[t->n], 0, sizeof(nv[t->n]));
	snprintf(nv[t->n].model, sizeof(nv[t->n].model), "%s", model);
	nv[t->n].input = nv[t->n].output = -1;
	nv[t->n].cache_read = nv[t->n].cache_write = -1;
	nv[t->n].cache_write_1h = -1;
	nv[t->n].max_output = -1;
	*ret = &nv[t->n++];
	return 0;
}

static int cmp_model(const void *a, const void *b)
{
	return strcmp(((const struct price *)a)->model,
		      ((const struct price *)b)->model);
}

/* The hash of the table in force: journaled with every call, so that a
 * charge can be recomputed from the prices it was made with. */
static void table_hash(struct price_table *t)
{
	crypto_generichash_state st;
	unsigned char h[32];
	char line[PRICE_MODEL_NAME_MAX + 128];

	qsort(t->v, t->n, sizeof(*t->v), cmp_model);
	crypto_generichash_init(&st, NULL, 0, sizeof(h));
	for (size_t i = 0; i < t->n; i++) {
		const struct price *p = &t->v[i];
		int n = snprintf(
		    line, sizeof(line), "%s %lld %lld %lld %lld %lld %lld\n",
		    p->model, (long long)p->input, (long long)p->output,
		    (long long)p->cache_read, (long long)p->cache_write,
		    (long long)p->max_output, (long long)p->cache_write_1h);
		crypto_generichash_update(&st, (const unsigned char *)line,
					  (size_t)n);
	}
	crypto_generichash_final(&st, h, sizeof(h));
	sodium_bin2hex(t->hash, sizeof(t->hash), h, sizeof(h));
}

struct load_ctx {
	struct price_table *t;
	const char *path;
	char *errbuf;
	size_t errlen;
	int err;
};

static int entry_cb(const git_config_entry *e, void *data)
{
	struct load_ctx *lc = data;
	const char *name = e->name + strlen("model.");
	const char *key = strrchr(name, '.');
	char model[PRICE_MODEL_NAME_MAX + 1];
	struct price *p;
	int64_t v, *dst;
	int r;

	if (!key || key == name ||
	    (size_t)(key - name) > PRICE_MODEL_NAME_MAX) {
		snprintf(lc->errbuf, lc->errlen, "%s: bad model section in %s",
			 lc->path, e->name);
		lc->err = -EINVAL;
		return -1;
	}
	snprintf(model, sizeof(model), "%.*s", (int)(key - name), name);
	key++;
	p = find(lc->t, model);
	if (!p && (r = add_model(lc->t, model, &p)) < 0) {
		snprintf(lc->errbuf, lc->errlen, "%s: [model \"%s\"]: %s",
			 lc->path, model, strerror(-r));
		lc->err = r;
		return -1;
	}
	if (strcmp(key, "max-output") == 0) {
		r = price_parse_fixed(e->value, 0, &v);
		if (r == 0 && (v < 1 || v > PRICE_MAX_OUTPUT_MAX))
			r = -ERANGE;
		dst = &p->max_output;
	} else {
		dst = strcmp(key, "input") == 0		   ? &p->input
		      : strcmp(key, "output") == 0	   ? &p->output
		      : strcmp(key, "cache-read") == 0	   ? &p->cache_read
		      : strcmp(key, "cache-write") == 0	   ? &p->cache_write
		      : strcmp(key, "cache-write-1h") == 0 ? &p->cache_write_1h
							   : NULL;
		if (!dst) {
			snprintf(lc->errbuf, lc->errlen,
				 "%s: [model \"%s\"] has no key \"%s\" "
				 "(input, output, cache-read, cache-write, "
				 "cache-write-1h, max-output)",
				 lc->path, model, key);
			lc->err = -EINVAL;
			return -1;
		}
		/* USD per million tokens with at most 6 decimals is exactly
		 * picodollars per token. */
		r = price_parse_fixed(e->value, 6, &v);
		if (r == 0 && v > (int64_t)PRICE_PER_MTOK_MAX_USD * 1000000)
			r = -ERANGE;
	}
	if (r < 0) {
		snprintf(lc->errbuf, lc->errlen,
			 "%s: [model \"%s\"] %s = \"%s\": expected %s",
			 lc->path, model, key, e->value,
			 dst == &p->max_output
			     ? "a number of tokens, 1..10000000"
			     : "USD per million tokens, 0..10000, at most 6 "
			       "decimals");
		lc->err = -EINVAL;
		return -1;
	}
	*dst = v;
	return 0;
}

int price_table_load(struct git_config *gc, const char *path,
		     struct price_table *ret, char *errbuf, size_t errlen)
{
	struct price_table t = {0};
	struct load_ctx lc = {&t, path, errbuf, errlen, 0};
	struct price *p;
	int r;

	for (size_t i = 0; i < ARRAY_SIZE(shipped); i++) {
		const char *name = shipped[i].model, *also = shipped[i].also;
		char one[PRICE_MODEL_NAME_MAX + 1];

		while (name) {
			r = add_model(&t, name, &p);
			if (r < 0)
				goto fail;
			price_parse_fixed(shipped[i].input, 6, &p->input);
			price_parse_fixed(shipped[i].output, 6, &p->output);
			price_parse_fixed(shipped[i].cache_read, 6,
					  &p->cache_read);
			price_parse_fixed(shipped[i].cache_write, 6,
					  &p->cache_write);
			if (shipped[i].cache_write_1h)
				price_parse_fixed(shipped[i].cache_write_1h, 6,
						  &p->cache_write_1h);
			p->max_output = shipped[i].max_output;
			/* The next dated name this row covers. */
			name = NULL;
			if (also && *also) {
				size_t n = strcspn(also, ",");

				snprintf(one, sizeof(one), "%.*s", (int)n,
					 also);
				name = one;
				also += n + (also[n] == ',');
			}
		}
	}
	if (gc && config_foreach_prefix(gc, "model.", entry_cb, &lc) != 0) {
		r = lc.err ? lc.err : -EINVAL;
		if (!lc.err)
			snprintf(errbuf, errlen, "%s: cannot read [model]",
				 path);
		goto fail;
	}
	for (size_t i = 0; i < t.n; i++) {
		p = &t.v[i];
		if (p->input < 0 || p->output < 0 || p->max_output < 0) {
			snprintf(errbuf, errlen,
				 "%s: [model \"%s\"] needs input, output and "
				 "max-output",
				 path, p->model);
			r = -EINVAL;
			goto fail;
		}
		/* Unknown cache rates are the input rate: the worst case
		 * uses the dearest, so this never lowers a reservation. */
		if (p->cache_read < 0)
			p->cache_read = p->input;
		if (p->cache_write < 0)
			p->cache_write = p->input;
		if (p->cache_write_1h < 0)
			p->cache_write_1h = p->cache_write;
	}
	table_hash(&t);
	*ret = t;
	return 0;
fail:
	price_table_free(&t);
	return r;
}

void price_table_free(struct price_table *t)
{
	if (!t)
		return;
	free(t->v);
	t->v = NULL;
	t->n = 0;
}

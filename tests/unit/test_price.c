/* Unit tests for daemon/broker/price.c and usage.c: exact model names,
 * the one-hour cache tier, the bounds a reservation is made of (issue 36,
 * finding 1). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/testlib.h"
#include "daemon/broker/price.h"
#include "daemon/broker/usage.h"

/* USD per million tokens as picodollars per token. */
#define PER_MTOK(usd) ((int64_t)((usd)*1000000))

static struct price_table shipped(void)
{
	struct price_table t = {0};
	char err[256];

	ck_assert_int_eq(price_table_load(NULL, "none", &t, err, sizeof(err)),
			 0);
	return t;
}

/* A dated snapshot is its own row, never its family's: the first gpt-4o
 * snapshot costs twice gpt-4o; a snapshot not in the table is unpriced. */
START_TEST(test_exact_model_names)
{
	struct price_table t = shipped();
	const struct price *p;

	p = price_lookup(&t, "gpt-4o-2024-05-13");
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(p->input, PER_MTOK(5));
	ck_assert_int_eq(p->output, PER_MTOK(15));
	p = price_lookup(&t, "gpt-4o");
	ck_assert_int_eq(p->input, PER_MTOK(2.5));
	ck_assert_ptr_null(price_lookup(&t, "gpt-4o-2099-01-01"));
	ck_assert_ptr_null(price_lookup(&t, "claude-sonnet-4-5-20991231"));
	ck_assert_ptr_null(price_lookup(&t, "gpt-4o-mini-2099-01-01"));
	/* Known snapshots are priced as the rows that name them. */
	p = price_lookup(&t, "claude-sonnet-4-5-20250929");
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(p->input, PER_MTOK(3));
	ck_assert_ptr_nonnull(price_lookup(&t, "gpt-4o-2024-08-06"));
	price_table_free(&t);
}
END_TEST

/* Anthropic's one-hour cache writes are billed at their own rate (twice
 * the input rate), read from the usage's cache_creation breakdown, and
 * the worst case reserves at the dearest input rate, which is theirs. */
START_TEST(test_one_hour_cache_writes)
{
	struct price_table t = shipped();
	const struct price *p = price_lookup(&t, "claude-sonnet-4-5");
	const char *msg =
	    "{\"type\":\"message\",\"usage\":{\"input_tokens\":10,"
	    "\"output_tokens\":20,\"cache_read_input_tokens\":0,"
	    "\"cache_creation_input_tokens\":1000,\"cache_creation\":{"
	    "\"ephemeral_5m_input_tokens\":600,"
	    "\"ephemeral_1h_input_tokens\":400}}}";
	struct usage_parser u;

	ck_assert_int_eq(p->cache_write_1h, PER_MTOK(6));
	usage_init(&u, USAGE_ANTHROPIC, false);
	ck_assert_int_eq(usage_feed(&u, msg, strlen(msg)), 0);
	usage_finish(&u);
	ck_assert(u.complete);
	ck_assert_int_eq(u.u.cache_write, 1000);
	ck_assert_int_eq(u.u.cache_write_1h, 400);
	ck_assert_int_eq(price_cost(p, &u.u),
			 10 * PER_MTOK(3) + 20 * PER_MTOK(15) +
			     600 * PER_MTOK(3.75) + 400 * PER_MTOK(6));
	usage_free(&u);
	/* One byte, no output: the hidden tokens and the byte at 6 USD. */
	ck_assert_int_eq(price_input_bound(p, 1, 0),
			 (1 + PRICE_HIDDEN_INPUT_TOKENS) * PER_MTOK(6));
	/* A model without the tier bills an hour's write at its 5-minute
	 * rate. */
	p = price_lookup(&t, "gpt-5");
	ck_assert_int_eq(p->cache_write_1h, p->cache_write);
	price_table_free(&t);
}
END_TEST

/* The output bound multiplies by the completions asked for, and what a
 * budget affords is the inverse, capped at the model's max. */
START_TEST(test_output_bounds)
{
	struct price p = {.input = 1000000,
			  .output = 10000000,
			  .cache_read = 1000000,
			  .cache_write = 1000000,
			  .cache_write_1h = 1000000,
			  .max_output = 1000};

	ck_assert_int_eq(price_output_bound(&p, 50, 1), 50 * 10000000LL);
	ck_assert_int_eq(price_output_bound(&p, 50, 16), 16 * 50 * 10000000LL);
	ck_assert_int_eq(price_output_bound(&p, 0, 2), 2 * 1000 * 10000000LL);
	ck_assert_int_eq(price_output_bound(&p, 5000, 1), 1000 * 10000000LL);
	ck_assert_int_eq(price_output_affordable(&p, 10000000LL * 300, 1), 300);
	ck_assert_int_eq(price_output_affordable(&p, 10000000LL * 300, 3), 100);
	ck_assert_int_eq(price_output_affordable(&p, INT64_MAX, 1), 1000);
	ck_assert_int_eq(price_output_affordable(&p, -5, 1), 0);
	ck_assert_int_eq(price_worst_case(&p, 10, 50),
			 (10 + PRICE_HIDDEN_INPUT_TOKENS) * 1000000LL +
			     50 * 10000000LL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("price");
	TCase *tc = tcase_create("price");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_exact_model_names);
	tcase_add_test(tc, test_one_hour_cache_writes);
	tcase_add_test(tc, test_output_bounds);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

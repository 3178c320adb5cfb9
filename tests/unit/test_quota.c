/* Unit tests for daemon/transport/quota.c: per-session counters and the
 * journal-rate window, with a synthetic clock. */
#include <errno.h>
#include <stdlib.h>

#include "tests/lib/testlib.h"
#include "daemon/transport/quota.h"

static struct quota *make(unsigned conns, unsigned runs, unsigned rate)
{
	struct quota *q = NULL;
	struct quota_limits lim = {.max = {[QUOTA_CONNS] = conns,
					   [QUOTA_RUNS] = runs,
					   [QUOTA_JOURNAL_RATE] = rate}};

	ck_assert_int_eq(quota_new(NULL, &lim, &q), 0);
	return q;
}

/* A session at its quota is refused; another session is not; a unit
 * given back can be taken again. */
START_TEST(test_counts_per_session)
{
	struct quota *q = make(2, 1, 100);

	ck_assert_int_eq(quota_take(q, "a", QUOTA_CONNS, 0), 0);
	ck_assert_int_eq(quota_take(q, "a", QUOTA_CONNS, 0), 0);
	ck_assert_int_eq(quota_take(q, "a", QUOTA_CONNS, 0), -EDQUOT);
	ck_assert_int_eq(quota_take(q, "b", QUOTA_CONNS, 0), 0);
	quota_put(q, "a", QUOTA_CONNS);
	ck_assert_int_eq(quota_take(q, "a", QUOTA_CONNS, 0), 0);
	ck_assert_int_eq(quota_take(q, "a", QUOTA_CONNS, 0), -EDQUOT);

	/* Kinds are counted apart. */
	ck_assert_int_eq(quota_take(q, "a", QUOTA_RUNS, 0), 0);
	ck_assert_int_eq(quota_take(q, "a", QUOTA_RUNS, 0), -EDQUOT);
	quota_put(q, "a", QUOTA_RUNS);
	ck_assert_int_eq(quota_take(q, "a", QUOTA_RUNS, 0), 0);

	/* Giving back what was never taken does not raise the quota. */
	quota_put(q, "c", QUOTA_RUNS);
	quota_put(q, "b", QUOTA_RUNS);
	quota_put(q, "b", QUOTA_RUNS);
	ck_assert_int_eq(quota_take(q, "b", QUOTA_RUNS, 0), 0);
	ck_assert_int_eq(quota_take(q, "b", QUOTA_RUNS, 0), -EDQUOT);
	quota_free(q);
}
END_TEST

/* The rate is per window: refused until the window ends, then whole
 * again; a put never gives rate back. */
START_TEST(test_rate_window)
{
	struct quota *q = make(1, 1, 3);
	uint64_t t0 = 1000000;

	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(
		    quota_take(q, "a", QUOTA_JOURNAL_RATE, t0 + (uint64_t)i),
		    0);
	ck_assert_int_eq(quota_take(q, "a", QUOTA_JOURNAL_RATE, t0 + 10),
			 -EDQUOT);
	quota_put(q, "a", QUOTA_JOURNAL_RATE);
	ck_assert_int_eq(quota_take(q, "a", QUOTA_JOURNAL_RATE,
				    t0 + QUOTA_RATE_WINDOW_MS - 1),
			 -EDQUOT);
	ck_assert_int_eq(
	    quota_take(q, "b", QUOTA_JOURNAL_RATE, t0 + QUOTA_RATE_WINDOW_MS),
	    0);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(quota_take(q, "a", QUOTA_JOURNAL_RATE,
					    t0 + QUOTA_RATE_WINDOW_MS),
				 0);
	ck_assert_int_eq(
	    quota_take(q, "a", QUOTA_JOURNAL_RATE, t0 + QUOTA_RATE_WINDOW_MS),
	    -EDQUOT);
	quota_free(q);
}
END_TEST

/* No table (a unit test's spd): nothing is limited. */
START_TEST(test_null_table)
{
	ck_assert_int_eq(quota_take(NULL, "a", QUOTA_RUNS, 0), 0);
	quota_put(NULL, "a", QUOTA_RUNS);
	quota_free(NULL);
	ck_assert_str_eq(quota_kind_name(QUOTA_JOURNAL_RATE), "journal-rate");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("quota");
	TCase *tc = tcase_create("quota");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_counts_per_session);
	tcase_add_test(tc, test_rate_window);
	tcase_add_test(tc, test_null_table);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

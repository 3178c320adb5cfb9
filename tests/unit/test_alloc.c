/*
 * spctl's allocator (client/alloc.h), which the musl build of spctl uses
 * as its malloc: blocks hold what was asked and do not overlap, freed ones
 * are reused, realloc keeps the bytes, calloc zeroes reused memory, sizes
 * that overflow are refused, and a block freed twice (or a pointer that is
 * not a block) stops the program instead of corrupting the free lists.
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/alloc.h"

/* Sizes around every class boundary, and past the classes. */
static const size_t sizes[] = {0,     1,     15,    16,	    17,	    31,
			       32,    33,    1000,  4095,   4096,   4097,
			       65535, 65536, 65537, 200000, 1 << 20};

START_TEST(test_blocks_hold_what_was_asked)
{
	enum { N = sizeof(sizes) / sizeof(sizes[0]) };
	unsigned char *p[N];

	for (size_t i = 0; i < N; i++) {
		p[i] = alloc_malloc(sizes[i]);
		ck_assert_ptr_nonnull(p[i]);
		ck_assert_uint_eq((uintptr_t)p[i] & 15, 0);
		ck_assert_uint_ge(alloc_usable_size(p[i]), sizes[i]);
		/* Every usable byte, so that an overlap shows below. */
		memset(p[i], (int)i + 1, alloc_usable_size(p[i]));
	}
	for (size_t i = 0; i < N; i++) {
		size_t n = alloc_usable_size(p[i]), k = 0;

		while (k < n && p[i][k] == (unsigned char)(i + 1))
			k++;
		ck_assert_msg(k == n, "block %zu (%zu bytes) byte %zu is %u", i,
			      sizes[i], k, k < n ? p[i][k] : 0);
	}
	for (size_t i = 0; i < N; i++)
		alloc_free(p[i]);
	alloc_free(NULL);
}
END_TEST

START_TEST(test_freed_blocks_reused)
{
	void *a = alloc_malloc(100), *b;

	alloc_free(a);
	b = alloc_malloc(120); /* the same class, 128 bytes */
	ck_assert_ptr_eq(a, b);
	alloc_free(b);
}
END_TEST

/* Far more than the static arena: the chunks taken later are used, and
 * no block overlaps another. */
START_TEST(test_beyond_the_static_arena)
{
	enum { N = 1500, SZ = 4000 };
	unsigned char **p = calloc(N, sizeof(*p));

	ck_assert_ptr_nonnull(p);
	for (int i = 0; i < N; i++) {
		p[i] = alloc_malloc(SZ);
		ck_assert_ptr_nonnull(p[i]);
		memset(p[i], i & 0xff, SZ);
	}
	for (int i = 0; i < N; i++)
		for (int k = 0; k < SZ; k += 97)
			ck_assert_uint_eq(p[i][k], (unsigned)(i & 0xff));
	for (int i = 0; i < N; i++)
		alloc_free(p[i]);
	free(p);
}
END_TEST

/* Whether p's first n bytes are still 0, 1, 2, ... (mod 256). */
static bool bytes_kept(const unsigned char *p, size_t n)
{
	for (size_t k = 0; k < n; k++)
		if (p[k] != (unsigned char)k)
			return false;
	return true;
}

START_TEST(test_realloc_keeps_the_bytes)
{
	unsigned char *p = alloc_realloc(NULL, 10), *q;
	size_t n = 10;

	ck_assert_ptr_nonnull(p);
	for (size_t k = 0; k < n; k++)
		p[k] = (unsigned char)k;
	/* Through every class, into a mapping of its own, and a larger
	 * one (moved by mremap). */
	for (size_t want = 33; want < (4u << 20); want = want * 3 + 1) {
		q = alloc_realloc(p, want);
		ck_assert_ptr_nonnull(q);
		ck_assert_msg(bytes_kept(q, n), "realloc to %zu lost bytes",
			      want);
		for (size_t k = n; k < want; k++)
			q[k] = (unsigned char)k;
		p = q;
		n = want;
	}
	/* Smaller: the same block. */
	q = alloc_realloc(p, 5);
	ck_assert_ptr_eq(q, p);
	for (size_t k = 0; k < 5; k++)
		ck_assert_uint_eq(q[k], (unsigned char)k);
	alloc_free(q);
}
END_TEST

START_TEST(test_calloc_zeroes_and_refuses_overflow)
{
	unsigned char *p = alloc_malloc(300), *q;

	memset(p, 0xaa, 300);
	alloc_free(p);
	q = alloc_calloc(3, 100);
	ck_assert_ptr_eq(q, p); /* the block reused: it must be zeroed */
	for (int k = 0; k < 300; k++)
		ck_assert_uint_eq(q[k], 0);
	alloc_free(q);

	errno = 0;
	ck_assert_ptr_null(alloc_calloc(SIZE_MAX / 2, 3));
	ck_assert_int_eq(errno, ENOMEM);
	errno = 0;
	ck_assert_ptr_null(alloc_malloc(SIZE_MAX - 8));
	ck_assert_int_eq(errno, ENOMEM);
	errno = 0;
	p = alloc_malloc(20);
	ck_assert_ptr_null(alloc_realloc(p, SIZE_MAX - 8));
	ck_assert_int_eq(errno, ENOMEM);
	alloc_free(p);
}
END_TEST

START_TEST(test_memalign)
{
	void *p = NULL;

	ck_assert_int_eq(alloc_memalign(&p, 16, 40), 0);
	ck_assert_uint_eq((uintptr_t)p & 15, 0);
	alloc_free(p);
	ck_assert_int_eq(alloc_memalign(&p, 8, 40), 0);
	alloc_free(p);
	/* Not a power of two, and more than malloc aligns to. */
	ck_assert_int_eq(alloc_memalign(&p, 24, 40), EINVAL);
	ck_assert_int_eq(alloc_memalign(&p, 64, 40), EINVAL);
}
END_TEST

START_TEST(test_double_free_aborts)
{
	void *p = alloc_malloc(64);

	alloc_free(p);
	alloc_free(p);
}
END_TEST

#ifndef __SANITIZE_ADDRESS__
/* AddressSanitizer takes SIGSEGV and exits instead. */
START_TEST(test_big_double_free_dies)
{
	void *p = alloc_malloc(1 << 20);

	alloc_free(p);
	alloc_free(p); /* unmapped: the header read faults */
}
END_TEST
#endif

START_TEST(test_interior_pointer_aborts)
{
	char *p = alloc_malloc(64);

	alloc_free(p + 16);
}
END_TEST

/* A write past a freed block's end (over the next free block's header)
 * is found when that block is taken again. */
START_TEST(test_overwritten_free_block_aborts)
{
	unsigned char *a = alloc_malloc(32), *b = alloc_malloc(32);

	ck_assert_ptr_eq(b, a + 48); /* carved one after the other */
	alloc_free(b);
	memset(a, 0x41, 48); /* 16 bytes past a: b's header */
	(void)alloc_malloc(32);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("alloc");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_blocks_hold_what_was_asked);
	tcase_add_test(tc, test_freed_blocks_reused);
	tcase_add_test(tc, test_beyond_the_static_arena);
	tcase_add_test(tc, test_realloc_keeps_the_bytes);
	tcase_add_test(tc, test_calloc_zeroes_and_refuses_overflow);
	tcase_add_test(tc, test_memalign);
	tcase_add_test_raise_signal(tc, test_double_free_aborts, SIGABRT);
#ifndef __SANITIZE_ADDRESS__
	tcase_add_test_raise_signal(tc, test_big_double_free_dies, SIGSEGV);
#endif
	tcase_add_test_raise_signal(tc, test_interior_pointer_aborts, SIGABRT);
	tcase_add_test_raise_signal(tc, test_overwritten_free_block_aborts,
				    SIGABRT);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

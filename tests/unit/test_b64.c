/*
 * spctl's base64 decoder (client/b64.h) against libsodium's, which spd
 * encodes with: the same bytes for every valid input, refused where
 * libsodium refuses (ORIGINAL variant, padded, no characters ignored).
 * One difference, on purpose: libsodium (1.0.18) reads any byte from 0x80
 * up as '/' ("\xc1\xc1\xc1\xc1" decodes to ff ff ff); b64_decode
 * refuses it, as RFC 4648 says.
 */
#include <check.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "client/b64.h"

/* Both decoders on s: they agree on whether it is valid and on the bytes. */
static void same(const char *s, size_t n)
{
	size_t want_len = 0, got_len = 9;
	unsigned char *want = malloc(n + 1), *got;
	int r;

	ck_assert_ptr_nonnull(want);
	r = sodium_base642bin(want, n + 1, s, n, NULL, &want_len, NULL,
			      sodium_base64_VARIANT_ORIGINAL);
	got = b64_decode(s, n, &got_len);
	ck_assert_msg((r == 0) == (got != NULL),
		      "'%.*s': libsodium %s, b64_decode %s", (int)n, s,
		      r == 0 ? "accepts" : "refuses",
		      got ? "accepts" : "refuses");
	if (got) {
		ck_assert_uint_eq(got_len, want_len);
		ck_assert(memcmp(got, want, want_len) == 0);
	}
	free(want);
	free(got);
}

START_TEST(test_round_trip)
{
	unsigned char bin[64];
	char
	    text[sodium_base64_ENCODED_LEN(64, sodium_base64_VARIANT_ORIGINAL)];

	for (size_t len = 0; len <= sizeof(bin); len++) {
		for (int k = 0; k < 50; k++) {
			size_t got_len;
			unsigned char *got;

			randombytes_buf(bin, len);
			sodium_bin2base64(text, sizeof(text), bin, len,
					  sodium_base64_VARIANT_ORIGINAL);
			got = b64_decode(text, strlen(text), &got_len);
			ck_assert_ptr_nonnull(got);
			ck_assert_uint_eq(got_len, len);
			ck_assert(memcmp(got, bin, len) == 0);
			free(got);
			same(text, strlen(text));
		}
	}
}
END_TEST

START_TEST(test_broken)
{
	static const char *const cases[] = {
	    "",		"A",	    "AA",	"AAA",	     "AAAA",   "AA==",
	    "AAA=",	"AB==",	    "AAB=",	"A===",	     "====",   "=AAA",
	    "AA=A",	"AAAA=",    "AA==AAAA", "AAAA AAAA", "AAAA\n", "QUJD",
	    "QUI=",	"QQ==",	    "QR==",	"QUJ=",	     "-_--",   "Zm9v",
	    "Zm9vYg==", "Zm9vYh==", "Zm9vYmE=", "Zm9vYmF=",  "@@@@",
	};
	static const char *const high[] = {"Zm9\x80", "\xc1\xc1\xc1\xc1",
					   "Zm9v\xff\xff==", "QQ=\xbd"};
	size_t n;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		same(cases[i], strlen(cases[i]));
	/* A NUL inside is not base64. */
	same("AA\0A", 4);
	for (size_t i = 0; i < sizeof(high) / sizeof(high[0]); i++)
		ck_assert_ptr_null(b64_decode(high[i], strlen(high[i]), &n));
}
END_TEST

START_TEST(test_random_text)
{
	static const char alphabet[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="
	    "-_ \n.";
	char s[24];

	for (int k = 0; k < 200000; k++) {
		size_t n = randombytes_uniform(sizeof(s) + 1);

		for (size_t i = 0; i < n; i++)
			s[i] =
			    alphabet[randombytes_uniform(sizeof(alphabet) - 1)];
		same(s, n);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("b64");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	if (sodium_init() < 0)
		return EXIT_FAILURE;
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_broken);
	tcase_add_test(tc, test_random_text);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

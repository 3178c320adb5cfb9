/*
 * Fuzz what daemon/keys/attest.c reads of a repository nobody trusts:
 * the text of a note under refs/notes/spd (a DSSE envelope), what it
 * claims unverified, and a --trust-from file of keys.  The first byte
 * picks what the rest is:
 *   0: a note's text.  Never a statement without a valid signature of
 *      the trusted key; what it claims unverified never crashes.
 *   1: a payload, signed here with the trusted key over DSSE's
 *      pre-authentication encoding (written again here, from the spec,
 *      not taken from attest.c).  The envelope opens exactly when the
 *      payload is a JSON object of spd's statement and predicate types,
 *      to that object; with one byte of the payload changed, or signed
 *      by another key, it never opens.
 *   2: a trust file.  Every key it yields is one attest_key_check
 *      accepts, at most ATTEST_TRUST_KEYS_MAX of them, and a refusal
 *      says why.
 */
#include <errno.h>
#include <jansson.h>
#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strv.h"
#include "daemon/keys/attest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Inputs longer than this say nothing more (a note is refused past
 * ATTEST_NOTE_MAX before it is parsed). */
#define INPUT_MAX (64 * 1024)

static unsigned char pk[crypto_sign_PUBLICKEYBYTES];
static unsigned char sk[crypto_sign_SECRETKEYBYTES];
static unsigned char pk2[crypto_sign_PUBLICKEYBYTES];
static unsigned char sk2[crypto_sign_SECRETKEYBYTES];
static char trusted_key[ATTEST_PUBLIC_LEN];

static void keys_init(void)
{
	unsigned char seed[crypto_sign_SEEDBYTES] = {0};

	if (trusted_key[0])
		return;
	if (sodium_init() < 0)
		abort();
	crypto_sign_seed_keypair(pk, sk, seed);
	seed[0] = 1;
	crypto_sign_seed_keypair(pk2, sk2, seed);
	memcpy(trusted_key, "ed25519:", 8);
	sodium_bin2base64(trusted_key + 8, sizeof(trusted_key) - 8, pk,
			  sizeof(pk), sodium_base64_VARIANT_ORIGINAL);
}

/* A DSSE envelope of body (payload type in-toto), signed with key. */
static char *envelope(const unsigned char *body, size_t n,
		      const unsigned char *key)
{
	const char *type = ATTEST_PAYLOAD_TYPE;
	size_t plen = strlen("DSSEv1") + 64 + strlen(type) + n;
	unsigned char *pae = malloc(plen), sig[crypto_sign_BYTES];
	size_t b64n =
	    sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
	char *payload = malloc(b64n), sig64[128], *text = NULL;
	int h;
	json_t *env;

	if (!pae || !payload)
		abort();
	h = snprintf((char *)pae, plen, "DSSEv1 %zu %s %zu ", strlen(type),
		     type, n);
	memcpy(pae + h, body, n);
	crypto_sign_detached(sig, NULL, pae, (size_t)h + n, key);
	sodium_bin2base64(payload, b64n, body, n,
			  sodium_base64_VARIANT_ORIGINAL);
	sodium_bin2base64(sig64, sizeof(sig64), sig, sizeof(sig),
			  sodium_base64_VARIANT_ORIGINAL);
	env = json_pack("{s:s, s:s, s:[{s:s, s:s}]}", "payloadType", type,
			"payload", payload, "signatures", "keyid", "x", "sig",
			sig64);
	if (env)
		text = json_dumps(env, JSON_COMPACT);
	json_decref(env);
	free(pae);
	free(payload);
	return text;
}

/* Whether body is what attest_envelope_open must return. */
static json_t *expected(const unsigned char *body, size_t n)
{
	json_t *st = json_loadb((const char *)body, n, 0, NULL);
	const char *t = json_string_value(json_object_get(st, "_type"));
	const char *p = json_string_value(json_object_get(st, "predicateType"));

	if (json_is_object(st) && t && p &&
	    strcmp(t, ATTEST_STATEMENT_TYPE) == 0 &&
	    strcmp(p, ATTEST_PREDICATE_TYPE) == 0)
		return st;
	json_decref(st);
	return NULL;
}

static void signed_payload(const unsigned char *body, size_t n)
{
	const char *trust[] = {trusted_key, NULL}, *signer = NULL, *why = NULL;
	json_t *want = expected(body, n), *got;
	char *note = envelope(body, n, sk);

	if (!note)
		abort();
	got = attest_envelope_open(note, trust, &signer, &why);
	if ((want != NULL) != (got != NULL) || (want && !json_equal(want, got)))
		abort();
	if (got && (!signer || strcmp(signer, trusted_key) != 0))
		abort();
	if (!got && !why)
		abort();
	json_decref(got);
	free(note);
	/* Another key's signature over the same payload opens nothing. */
	note = envelope(body, n, sk2);
	if (!note)
		abort();
	got = attest_envelope_open(note, trust, &signer, &why);
	if (got || signer)
		abort();
	free(note);
	/* Nor does the payload with one byte changed under the signature. */
	if (n > 0) {
		unsigned char *copy = malloc(n);
		size_t b64n = sodium_base64_ENCODED_LEN(
		    n, sodium_base64_VARIANT_ORIGINAL);
		char *p64 = malloc(b64n), *bad;
		json_t *e;

		if (!copy || !p64 || !(note = envelope(body, n, sk)))
			abort();
		memcpy(copy, body, n);
		copy[n / 2] ^= 0x01;
		sodium_bin2base64(p64, b64n, copy, n,
				  sodium_base64_VARIANT_ORIGINAL);
		e = json_loads(note, 0, NULL);
		json_object_set_new(e, "payload", json_string(p64));
		bad = json_dumps(e, JSON_COMPACT);
		if (!bad)
			abort();
		got = attest_envelope_open(bad, trust, &signer, &why);
		if (got || signer)
			abort();
		json_decref(e);
		free(bad);
		free(p64);
		free(copy);
		free(note);
	}
	json_decref(want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text;

	if (size < 1 || size > INPUT_MAX)
		return 0;
	keys_init();
	switch (data[0] % 3) {
	case 0: {
		const char *trust[] = {trusted_key, NULL}, *signer = NULL,
			   *why = NULL;
		json_t *st;

		if (!(text = strndup((const char *)data + 1, size - 1)))
			abort();
		/* A fuzzer does not forge Ed25519: nothing opens. */
		st = attest_envelope_open(text, trust, &signer, &why);
		if (st || signer || !why)
			abort();
		json_decref(attest_note_claims(text));
		free(text);
		break;
	}
	case 1:
		signed_payload(data + 1, size - 1);
		break;
	default: {
		struct strv keys = {0};
		size_t found = 0;
		char *why = NULL;
		int r;

		if (!(text = strndup((const char *)data + 1, size - 1)))
			abort();
		r = attest_trust_lines(text, "fuzz", &keys, &found, &why);
		if (r < 0 && r != -ENOMEM && !why)
			abort();
		if (r == 0) {
			if (found != keys.n || found > ATTEST_TRUST_KEYS_MAX)
				abort();
			for (size_t i = 0; i < keys.n; i++)
				if (attest_key_check(keys.v[i]) < 0)
					abort();
		}
		free(why);
		strv_free(&keys);
		free(text);
	}
	}
	return 0;
}

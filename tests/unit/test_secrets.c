/*
 * The operator's secrets and the values spd mints (daemon/keys/secrets.c,
 * issue 38): a turn key coming and going rebuilds only the small set of
 * minted values; the environment file's keys stay redacted by the set
 * built when it was read.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/testlib.h"
#include "common/buf.h"
#include "common/redact.h"
#include "daemon/keys/secrets.h"
#include "daemon/spd.h"

#define ENV_KEY "sk-ant-envfile-SECRET-0123456789"
#define SESSION_TOKEN "spd-session-token-abcdef0123456789"

static bool redacts(const struct spd *spd, const char *value,
		    const char *marker)
{
	char *out, *in;
	size_t len;
	bool ok;

	ck_assert_int_ge(asprintf(&in, "value=%s;", value), 0);
	ck_assert_int_ge(redact_buf(spd->redact, in, strlen(in), &out, &len),
			 0);
	ok = !strstr(out, value) && strstr(out, marker);
	free(out);
	free(in);
	return ok;
}

static bool in_values(const struct spd *spd, const char *value)
{
	for (char **v = spd->secret_values; v && *v; v++)
		if (strcmp(*v, value) == 0)
			return true;
	return false;
}

START_TEST(test_mint_keeps_operator_set)
{
	static struct spd spd;
	char *d = test_tmpdir("secrets"), *env, errbuf[256];
	struct redact_stream *st;
	struct buf out = BUF_INIT;
	json_t *list;
	bool listed = false;
	size_t i;
	json_t *e;

	ck_assert_int_ge(asprintf(&env, "%s/environment", d), 0);
	test_write_file(env, "ANTHROPIC_API_KEY=" ENV_KEY "\n");
	spd.paths.env_path = env;
	ck_assert_int_eq(secrets_load(&spd, errbuf, sizeof(errbuf)), 0);
	ck_assert_uint_eq(secrets_base_builds(&spd), 1);
	ck_assert(redacts(&spd, ENV_KEY, "[redacted:ANTHROPIC_API_KEY]"));

	ck_assert_int_eq(
	    secrets_add_minted(&spd, "session-token.1", SESSION_TOKEN), 0);
	/* A stream begun now outlives the sets the turns replace. */
	ck_assert_int_eq(redact_stream_new(spd.redact, &st), 0);
	for (int n = 0; n < 1000; n++) {
		char name[64], key[64];

		snprintf(name, sizeof(name), "turn-key.%d", n);
		snprintf(key, sizeof(key), "spd-turn-%08x-KEY-%d",
			 n * 2654435761u, n);
		ck_assert_int_eq(secrets_add_minted(&spd, name, key), 0);
		ck_assert(secrets_has_minted(&spd, name));
		ck_assert_msg(redacts(&spd, key, "[redacted:turn-key."),
			      "turn key %d not redacted", n);
		ck_assert(in_values(&spd, key));
		ck_assert_int_eq(secrets_drop_minted(&spd, name), 0);
		ck_assert(!secrets_has_minted(&spd, name));
		/* Gone from the set once revoked. */
		ck_assert_int_eq(redact_contains(spd.redact, key, strlen(key)),
				 0);
		ck_assert(!in_values(&spd, key));
	}
	/* The operator's set was built once: no turn rebuilt it. */
	ck_assert_uint_eq(secrets_base_builds(&spd), 1);
	ck_assert(redacts(&spd, ENV_KEY, "[redacted:ANTHROPIC_API_KEY]"));
	ck_assert(redacts(&spd, SESSION_TOKEN, "[redacted:session-token.1]"));
	ck_assert(in_values(&spd, ENV_KEY));
	ck_assert(in_values(&spd, SESSION_TOKEN));
	ck_assert_int_eq(redact_stream_feed(st, "k=" ENV_KEY "\n", 35, &out),
			 0);
	ck_assert_int_eq(redact_stream_flush(st, &out), 0);
	ck_assert_int_eq(buf_append(&out, "", 0), 0);
	ck_assert_str_eq(out.data, "k=[redacted:ANTHROPIC_API_KEY]\n");
	redact_stream_free(st);
	buf_free(&out);

	/* A reload builds the operator's set again and keeps the minted. */
	ck_assert_int_eq(secrets_load(&spd, errbuf, sizeof(errbuf)), 0);
	ck_assert_uint_eq(secrets_base_builds(&spd), 2);
	ck_assert(redacts(&spd, ENV_KEY, "[redacted:ANTHROPIC_API_KEY]"));
	ck_assert(redacts(&spd, SESSION_TOKEN, "[redacted:session-token.1]"));
	ck_assert(in_values(&spd, SESSION_TOKEN));
	list = secrets_list_json(&spd);
	json_array_foreach(list, i, e)
	{
		const char *name =
		    json_string_value(json_object_get(e, "name"));
		char *j = json_dumps(e, 0);

		listed |= name && strcmp(name, "session-token.1") == 0;
		ck_assert_ptr_null(strstr(j, SESSION_TOKEN));
		free(j);
	}
	ck_assert(listed);
	json_decref(list);
	ck_assert_int_eq(secrets_drop_minted(&spd, "session-token.1"), 0);
	ck_assert_int_eq(
	    redact_contains(spd.redact, SESSION_TOKEN, strlen(SESSION_TOKEN)),
	    0);
	secrets_free(&spd);
	free(env);
	test_rmrf(d);
	free(d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("secrets");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_mint_keeps_operator_set);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

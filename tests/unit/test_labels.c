/*
 * The provenance label store (daemon/session/labels.c): labels kept with
 * the row where each entered, across a reopen of the store; contacted
 * hosts; the served results the broker matches; the path globs; and the
 * gates' judgement.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <check.h>

#include "common/paths.h"
#include "daemon/session/labels.h"
#include "daemon/session/session.h"
#include "daemon/spd.h"
#include "tests/lib/testlib.h"

struct fx {
	char *root, *repo, *state;
	struct session_store *s;
	char id[SESSION_ID_LEN + 1];
};

static void fx_init(struct fx *f)
{
	struct session_info *i = NULL;
	char tok[SESSION_TOKEN_LEN + 1];

	memset(f, 0, sizeof(*f));
	f->root = test_tmpdir("labels");
	f->repo = paths_join(f->root, "repo");
	f->state = paths_join(f->root, "state");
	mkdir(f->repo, 0700);
	ck_assert_int_eq(test_sh(NULL,
				 "cd '%s' && git init -q -b main . && echo spec "
				 "> spec.md && git add -A && git -c user.name=t "
				 "-c user.email=t@t commit -qm one",
				 f->repo),
			 0);
	ck_assert_int_eq(session_store_open(f->state, &f->s), 0);
	ck_assert_int_eq(session_start(f->s, f->repo, "lab", false, &i, tok),
			 0);
	snprintf(f->id, sizeof(f->id), "%s", i->id);
	session_info_free(i);
}

static void fx_done(struct fx *f)
{
	session_store_free(f->s);
	test_rmrf(f->root);
	free(f->root);
	free(f->repo);
	free(f->state);
}

START_TEST(test_labels_kept_with_their_row)
{
	struct fx f;
	json_t *d;
	struct session_label l;
	char *const pats[] = {"network:*", NULL};

	fx_init(&f);
	ck_assert_int_eq(session_label_add(f.s, f.id, "worktree", 7, "a.txt"),
			 1);
	ck_assert_int_eq(
	    session_label_add(f.s, f.id, "network:x.test", 9, "x.test"), 1);
	/* Again: the first row stays. */
	ck_assert_int_eq(
	    session_label_add(f.s, f.id, "network:x.test", 20, "x.test"), 0);
	ck_assert_int_eq(session_label_add(f.s, f.id, "", 1, NULL), -EINVAL);
	ck_assert_int_eq(session_label_add(f.s, f.id, "a b", 1, NULL),
			 -EINVAL);
	ck_assert_int_eq(session_label_add(f.s, "0000000000000000", "x", 1,
					   NULL),
			 -ENOENT);
	ck_assert_int_eq(session_egress_add(f.s, f.id, "X.Test", 9), 1);

	/* A new store over the same files: all of it is still there. */
	session_store_free(f.s);
	ck_assert_int_eq(session_store_open(f.state, &f.s), 0);
	ck_assert(session_label_has(f.s, f.id, "worktree"));
	ck_assert(session_label_find(f.s, f.id, pats, &l));
	ck_assert_str_eq(l.label, "network:x.test");
	ck_assert_int_eq(l.row, 9);
	ck_assert_str_eq(l.what, "x.test");
	ck_assert(session_egress_known(f.s, f.id, "x.TEST"));
	ck_assert(!session_egress_known(f.s, f.id, "y.test"));
	d = session_labels_detail(f.s, f.id);
	ck_assert_int_eq(json_array_size(d), 2);
	ck_assert_str_eq(json_string_value(json_object_get(
			     json_array_get(d, 0), "label")),
			 "worktree");
	json_decref(d);
	fx_done(&f);
}
END_TEST

static bool labels_have(json_t *a, const char *l)
{
	size_t i;
	json_t *v;

	json_array_foreach(a, i, v) if (strcmp(json_string_value(v), l) == 0)
	    return true;
	return false;
}

START_TEST(test_served_matching)
{
	struct fx f;
	json_t *cmd = json_pack("[s]", "command"),
	       *wt = json_pack("[s, s]", "worktree", "private"), *m;
	const char *out = "total 4\n-rw-r--r-- 1 a a 5 notes.md\n";
	char wrapped[512];

	fx_init(&f);
	ck_assert_int_eq(session_served_add(f.s, f.id, out, strlen(out), cmd),
			 0);
	ck_assert_int_eq(session_served_add(f.s, f.id, "ok\n", 3, wt), 0);
	/* Found inside what a front end made of it. */
	snprintf(wrapped, sizeof(wrapped), "exit 0\nstdout:\n%s", out);
	m = session_served_match(f.s, f.id, wrapped, strlen(wrapped));
	ck_assert_ptr_nonnull(m);
	ck_assert(labels_have(m, "command"));
	ck_assert(!labels_have(m, "worktree"));
	json_decref(m);
	/* A short one only as a whole line: "ok" inside a word is not it. */
	m = session_served_match(f.s, f.id, "looks broken", 12);
	ck_assert_ptr_null(m);
	m = session_served_match(f.s, f.id, "result:\nok\n", 11);
	ck_assert(m && labels_have(m, "private"));
	json_decref(m);
	/* Not served: no labels (the broker calls it agent-tool). */
	m = session_served_match(f.s, f.id, "something else entirely", 23);
	ck_assert_ptr_null(m);
	/* The oldest goes once SESSION_SERVED_MAX more came. */
	for (int i = 0; i < SESSION_SERVED_MAX; i++) {
		char t[64];

		snprintf(t, sizeof(t), "filler output number %d\n", i);
		session_served_add(f.s, f.id, t, strlen(t), wt);
	}
	m = session_served_match(f.s, f.id, wrapped, strlen(wrapped));
	ck_assert_ptr_null(m);
	json_decref(cmd);
	json_decref(wt);
	fx_done(&f);
}
END_TEST

START_TEST(test_path_globs)
{
	char *const g[] = {"secret/", "*.key", "docs/spec.md", NULL};

	ck_assert(session_prov_path_matches(g, "secret/a.txt"));
	ck_assert(session_prov_path_matches(g, "secret"));
	ck_assert(session_prov_path_matches(g, "./secret/deep/b"));
	ck_assert(!session_prov_path_matches(g, "secrets/a.txt"));
	ck_assert(session_prov_path_matches(g, "x/y/id.key"));
	ck_assert(session_prov_path_matches(g, "docs/spec.md"));
	ck_assert(!session_prov_path_matches(g, "other/docs/spec.md"));
	ck_assert(!session_prov_path_matches(NULL, "secret/a"));
}
END_TEST

START_TEST(test_gates)
{
	struct fx f;
	struct spd_config cfg;
	const char *rule = NULL;
	char why[512];

	memset(&cfg, 0, sizeof(cfg));
	cfg.prov_ask = SPD_PROV_ASK_ALL;
	fx_init(&f);
	/* Nothing untrusted: nothing asks. */
	session_label_add(f.s, f.id, "worktree", 3, "a.txt");
	ck_assert(!session_prov_asks(f.s, f.id, &cfg, SESSION_PROV_EGRESS,
				     "a.test", &rule, why, sizeof(why), NULL));
	ck_assert(!session_prov_asks(f.s, f.id, &cfg, SESSION_PROV_COMMIT,
				     NULL, &rule, why, sizeof(why), NULL));
	/* A page: a new host and a commit ask, naming it and its row. */
	session_label_add(f.s, f.id, "network:a.test", 5, "a.test port 80");
	session_egress_add(f.s, f.id, "a.test", 5);
	ck_assert(!session_prov_asks(f.s, f.id, &cfg, SESSION_PROV_EGRESS,
				     "a.test", &rule, why, sizeof(why), NULL));
	ck_assert(session_prov_asks(f.s, f.id, &cfg, SESSION_PROV_EGRESS,
				    "b.test", &rule, why, sizeof(why), NULL));
	ck_assert_str_eq(rule, "ask.provenance.egress");
	ck_assert_msg(strstr(why, "network:a.test (a.test port 80) at row 5"),
		      "%s", why);
	ck_assert(session_prov_asks(f.s, f.id, &cfg, SESSION_PROV_COMMIT, NULL,
				    &rule, why, sizeof(why), NULL));
	/* Private after untrusted and a way out: the three. */
	ck_assert(session_prov_asks(f.s, f.id, &cfg,
				    SESSION_PROV_PRIVATE_READ, NULL, &rule,
				    why, sizeof(why), NULL));
	ck_assert_str_eq(rule, "ask.provenance.trifecta");
	/* ask = none: egress and commit go on, the three still asks. */
	cfg.prov_ask = 0;
	ck_assert(!session_prov_asks(f.s, f.id, &cfg, SESSION_PROV_EGRESS,
				     "b.test", &rule, why, sizeof(why), NULL));
	ck_assert(!session_prov_asks(f.s, f.id, &cfg, SESSION_PROV_COMMIT,
				     NULL, &rule, why, sizeof(why), NULL));
	session_label_add(f.s, f.id, "private", 6, "secret/k");
	ck_assert(session_prov_asks(f.s, f.id, &cfg, SESSION_PROV_EGRESS,
				    "a.test", &rule, why, sizeof(why), NULL));
	ck_assert_str_eq(rule, "ask.provenance.trifecta");
	fx_done(&f);
}
END_TEST

START_TEST(test_committed_version)
{
	struct fx f;

	fx_init(&f);
	ck_assert(session_file_committed(f.s, f.id, "spec.md", "spec\n", 5));
	ck_assert(session_file_committed(f.s, f.id, "./spec.md", "spec\n", 5));
	ck_assert(!session_file_committed(f.s, f.id, "spec.md", "spec!\n", 6));
	ck_assert(!session_file_committed(f.s, f.id, "none.md", "spec\n", 5));
	fx_done(&f);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("labels");
	TCase *tc = tcase_create("labels");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_labels_kept_with_their_row);
	tcase_add_test(tc, test_served_matching);
	tcase_add_test(tc, test_path_globs);
	tcase_add_test(tc, test_gates);
	tcase_add_test(tc, test_committed_version);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

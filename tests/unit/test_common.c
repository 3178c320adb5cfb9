/* Unit tests for common/: buffers, UTF-8 validation, paths; and proto/. */
#include <ctype.h>
#include <errno.h>
#include <glob.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/lib/testlib.h"
#include "common/buf.h"
#include "common/paths.h"
#include "common/strv.h"
#include "common/words.h"
#include "common/utf8.h"
#include "daemon/broker/broker.h"
#include "daemon/broker/price.h"
#include "daemon/config.h"
#include "daemon/conftab.h"
#include "daemon/journal/journal.h"
#include "daemon/methods/gate.h"
#include "daemon/proxy/proxy.h"
#include "daemon/transport/quota.h"
#include "daemon/transport/server.h"
#include "proto/sandbox.h"
#include "proto/rpc.h"
#include "daemon/transport/rpc.h"

START_TEST(test_buf)
{
	struct buf b = BUF_INIT;

	for (int i = 0; i < 1000; i++)
		ck_assert_int_eq(buf_printf(&b, "%d,", i), 0);
	ck_assert(strncmp(b.data, "0,1,2,", 6) == 0);
	buf_consume(&b, 2);
	ck_assert(strncmp(b.data, "1,2,", 4) == 0);
	buf_consume(&b, b.len + 5);
	ck_assert_uint_eq(b.len, 0);
	buf_free(&b);
	buf_free(&b);
}
END_TEST

START_TEST(test_utf8)
{
	ck_assert(utf8_valid("plain", 5));
	ck_assert(utf8_valid("\xc3\xa9t\xc3\xa9", 5));
	ck_assert(utf8_valid("\xf0\x9f\x98\x80", 4));
	ck_assert(!utf8_valid("\xc3", 1));	       /* truncated */
	ck_assert(!utf8_valid("\xc0\xaf", 2));	       /* overlong '/' */
	ck_assert(!utf8_valid("\xe0\x80\xaf", 3));     /* overlong */
	ck_assert(!utf8_valid("\xed\xa0\x80", 3));     /* surrogate */
	ck_assert(!utf8_valid("\xf4\x90\x80\x80", 4)); /* > U+10FFFF */
	ck_assert(!utf8_valid("\xff", 1));
	ck_assert(!utf8_valid("a\x80", 2));
}
END_TEST

START_TEST(test_private_dir)
{
	char *d = test_tmpdir("paths");
	char *sub = paths_join(d, "a/b/c");

	ck_assert_int_eq(paths_ensure_private_dir(sub), 0);
	ck_assert_int_eq(paths_ensure_private_dir(sub), 0);
	chmod(sub, 0755);
	ck_assert_int_eq(paths_ensure_private_dir(sub), -EACCES);
	char *link = paths_join(d, "link");
	ck_assert_int_eq(symlink(sub, link), 0);
	ck_assert_int_eq(paths_ensure_private_dir(link), -ENOTDIR);
	test_rmrf(d);
	free(link);
	free(sub);
	free(d);
}
END_TEST

/* The operator token and the journal's holder are read this way: the
 * first line, without its line end; nothing through a symlink. */
START_TEST(test_read_line)
{
	char *d = test_tmpdir("readline");
	char *f = paths_join(d, "token"), *e = paths_join(d, "empty");
	char *link = paths_join(d, "link"), *line;

	test_write_file(f, "abc def\r\nsecond\n");
	line = paths_read_line(f);
	ck_assert_str_eq(line, "abc def");
	free(line);
	test_write_file(e, "\n");
	ck_assert_ptr_null(paths_read_line(e));
	ck_assert_int_eq(symlink(f, link), 0);
	ck_assert_ptr_null(paths_read_line(link));
	ck_assert_ptr_null(paths_read_line(d));
	test_rmrf(d);
	free(link);
	free(e);
	free(f);
	free(d);
}
END_TEST

/* spd.conf(5) documents every key of the table that validates spd.conf
 * and .spd.conf (daemon/conftab.c): under its section's own heading, or,
 * for a section only a project's file holds, in THE PROJECT'S .spd.conf. */
struct man_check {
	char *page;
	char missing[2048];
};

static const char *man_region(const char *page, const char *head,
			      const char **end)
{
	const char *p = strstr(page, head), *q;

	if (!p)
		return NULL;
	q = p + strlen(head);
	while ((q = strstr(q, "\n.S")) && strncmp(q, "\n.SS [", 6) != 0 &&
	       strncmp(q, "\n.SH", 4) != 0)
		q++;
	*end = q ? q : p + strlen(p);
	return p;
}

static int man_key(void *data, const struct conftab_key *ck)
{
	struct man_check *m = data;
	const char *section = ck->section, *key = ck->name;
	bool named = ck->named;
	char head[96], word[80];
	const char *p, *end = NULL, *hit;
	size_t o = 0;

	snprintf(head, sizeof(head), named ? "\n.SS [%s \"" : "\n.SS [%s]\n",
		 section);
	p = man_region(m->page, head, &end);
	if (!p)
		p = man_region(m->page, "\n.SH THE PROJECT'S .spd.conf", &end);
	for (const char *k = key; *k && o + 2 < sizeof(word); k++) {
		if (*k == '-')
			word[o++] = '\\';
		word[o++] = *k;
	}
	word[o] = '\0';
	for (hit = p; hit && (hit = strstr(hit, word)) && hit < end; hit += o) {
		char b = hit[-1], a = hit[o];

		if (!isalnum((unsigned char)b) && b != '-' &&
		    !isalnum((unsigned char)a) && a != '\\' && a != '-')
			return 0;
	}
	o = strlen(m->missing);
	snprintf(m->missing + o, sizeof(m->missing) - o, " [%s] %s", section,
		 key);
	return 0;
}

/* The key a man page term names ("output\\-cap"), its escapes gone. */
static void man_word(const char *p, char *out, size_t len)
{
	size_t o = 0;

	for (; *p && *p != '\n' && *p != ' ' && o + 1 < len; p++)
		if (*p != '\\')
			out[o++] = *p;
	out[o] = '\0';
}

START_TEST(test_conf_keys_documented)
{
	struct man_check m = {.page = test_read_file("man/spd.conf.5")};

	ck_assert_ptr_nonnull(m.page);
	conftab_each(man_key, &m);
	ck_assert_msg(!m.missing[0], "not in spd.conf(5):%s", m.missing);
	free(m.page);
}
END_TEST

/* And the other way: every key spd.conf(5) documents (a ".TP" term
 * under a section's heading, or "[section] key" under THE PROJECT'S
 * .spd.conf) is a key of the table, so the page never describes a key
 * spd would refuse as unknown. */
START_TEST(test_conf_documented_keys_known)
{
	char *page = test_read_file("man/spd.conf.5");
	char section[64] = "", key[64], unknown[1024] = "";
	struct conftab_key k;
	unsigned seen = 0;
	int nested = 0; /* inside .RS: a key's values (presets), not keys */

	ck_assert_ptr_nonnull(page);
	for (const char *p = page; p && *p;
	     p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, ".RS", 3) == 0) {
			nested++;
		} else if (strncmp(p, ".RE", 3) == 0) {
			nested -= nested > 0;
		} else if (nested) {
			continue;
		} else if (strncmp(p, ".SS [", 5) == 0) {
			size_t n = strcspn(p + 5, "] \"\n");

			snprintf(section, sizeof(section), "%.*s", (int)n,
				 p + 5);
		} else if (strncmp(p, ".SH", 3) == 0) {
			section[0] = '\0';
		} else if (strncmp(p, ".TP\n.B ", 7) == 0) {
			const char *t = p + 7;
			char sec[64];

			if (t[0] == '[') {
				size_t n = strcspn(t + 1, "] \"\n");

				snprintf(sec, sizeof(sec), "%.*s", (int)n,
					 t + 1);
				t = strchr(t, ']');
				ck_assert_ptr_nonnull(t);
				if (t[1] != ' ')
					continue; /* a section, not a key */
				t += 2;
			} else if (section[0]) {
				snprintf(sec, sizeof(sec), "%s", section);
			} else {
				continue;
			}
			man_word(t, key, sizeof(key));
			seen++;
			if (!conftab_find(sec, key, &k)) {
				size_t o = strlen(unknown);

				snprintf(unknown + o, sizeof(unknown) - o,
					 " [%s] %s", sec, key);
			}
		}
	}
	ck_assert_uint_gt(seen, 50);
	ck_assert_msg(!unknown[0],
		      "spd.conf(5) documents keys the table "
		      "does not know:%s",
		      unknown);
	free(page);
}
END_TEST

/* The table's defaults and ranges are the named constants whose
 * comments give their reasons. */
static void want_int(const char *sec, const char *name, long long def,
		     long long min, long long max)
{
	struct conftab_key k;

	ck_assert_msg(conftab_find(sec, name, &k), "%s.%s", sec, name);
	ck_assert_msg(k.def && atoll(k.def) == def,
		      "%s.%s default %s, not %lld", sec, name,
		      k.def ? k.def : "none", def);
	ck_assert_msg(k.min == min && k.max == max,
		      "%s.%s range %lld..%lld, not %lld..%lld", sec, name,
		      (long long)k.min, (long long)k.max, min, max);
	ck_assert(k.off > 0 && k.doc && k.doc[0]);
}

START_TEST(test_conf_table_agrees)
{
	struct conftab_key k;
	char range[96];

	want_int("limits", "auth-timeout", QUOTA_AUTH_TIMEOUT_S_DEFAULT, 1,
		 QUOTA_AUTH_TIMEOUT_S_MAX);
	want_int("limits", "grant-lifetime", GATE_WAIT_MS / 1000, 1, 24 * 3600);
	want_int("limits", "session-connections", QUOTA_SESSION_CONNS_DEFAULT,
		 1, SERVER_MAX_CONNS);
	want_int("limits", "session-runs", QUOTA_SESSION_RUNS_DEFAULT, 1,
		 SBXP_RUNS_MAX);
	want_int("limits", "session-journal-rate",
		 QUOTA_SESSION_JOURNAL_RATE_DEFAULT, 1, 1000000);
	want_int("limits", "operator-connections", QUOTA_OPERATOR_CONNS_DEFAULT,
		 1, SERVER_MAX_CONNS - 1);
	want_int("limits", "operator-runs", QUOTA_OPERATOR_RUNS_DEFAULT, 1,
		 SBXP_RUNS_MAX - 1);
	want_int("limits", "proxy-head-timeout", PROXY_HEAD_TIMEOUT_S_DEFAULT,
		 1, 3600);
	want_int("limits", "proxy-idle-timeout", PROXY_IDLE_TIMEOUT_S_DEFAULT,
		 1, CONFIG_TIMEOUT_MAX_S);
	want_int("approvals", "timeout", GATE_WAIT_MS / 1000, 1,
		 GATE_WAIT_MAX_S);
	want_int("sandbox", "timeout", CONFIG_TIMEOUT_DEFAULT_S, 1,
		 CONFIG_TIMEOUT_MAX_S);
	want_int("sandbox", "output-cap", CONFIG_OUTPUT_CAP_DEFAULT, 1024,
		 256 * 1024 * 1024);
	want_int("sandbox", "kill-grace", CONFIG_KILL_GRACE_DEFAULT_S, 0,
		 SBXP_CANCEL_GRACE_MAX_MS / 1000);
	want_int("journal", "queue-max", JOURNAL_QUEUE_BYTES_MAX,
		 JOURNAL_QUEUE_BYTES_MIN, 1LL << 30);
	want_int("broker", "idle-timeout", BROKER_IDLE_TIMEOUT_S, 1,
		 7 * 24 * 3600);
	want_int("broker", "body-max", BROKER_BODY_MAX, 1024,
		 256 * 1024 * 1024);
	want_int("broker", "provider-timeout", BROKER_PROVIDER_TIMEOUT_S, 1,
		 24 * 3600);
	want_int("broker", "keepalive-timeout", BROKER_KEEPALIVE_TIMEOUT_S, 1,
		 3600);
	want_int("broker", "min-output", BROKER_MIN_OUTPUT, 1,
		 PRICE_MAX_OUTPUT_MAX);
	ck_assert(conftab_find("broker", "cap-default", &k));
	ck_assert_str_eq(k.def, BROKER_CAP_DEFAULT_USD);
	ck_assert(conftab_find("broker", "cap-max", &k));
	ck_assert_str_eq(k.def, BROKER_CAP_MAX_USD);
	ck_assert(conftab_find("broker", "session-cap", &k));
	ck_assert_str_eq(k.def, BROKER_SESSION_CAP_USD);
	ck_assert(conftab_find("limits", "session-runs", &k));
	conftab_range(&k, range, sizeof(range));
	ck_assert_str_eq(range, "1..256");
	/* What needs a restart is marked so. */
	ck_assert(conftab_find("broker", "listen", &k) &&
		  (k.flags & CONFTAB_RESTART));
	ck_assert(conftab_find("broker", "cap-max", &k) &&
		  !(k.flags & CONFTAB_RESTART));
}
END_TEST

START_TEST(test_proto_tables)
{
	const struct rpc_param_def *defs;
	size_t n;

	ck_assert_str_eq(rpc_error_code(RPC_E_FRAME_TOO_LARGE),
			 "FRAME-TOO-LARGE");
	ck_assert_int_eq(rpc_error_number(RPC_E_PARSE), -32700);
	/* Each error's number names it back, and its exit status is one
	 * spctl(1) lists: the user's mistake, a refusal, or spd's. */
	for (int e = 0; e < RPC_E__COUNT; e++) {
		int x = rpc_error_exit((enum rpc_error)e);

		ck_assert_int_eq(
		    rpc_error_by_number(rpc_error_number((enum rpc_error)e)),
		    e);
		ck_assert(x == RPC_EXIT_USAGE || x == RPC_EXIT_SPD ||
			  x == RPC_EXIT_REFUSED);
	}
	ck_assert_int_eq(rpc_error_by_number(-1), -1);
	ck_assert_int_eq(rpc_error_exit(RPC_E_POLICY_DENIED), 126);
	ck_assert_int_eq(rpc_error_exit(RPC_E_BAD_PARAMS), 2);
	ck_assert_int_eq(rpc_error_exit(RPC_E_INTERNAL), 125);
	ck_assert_int_eq(rpc_method_lookup("daemon.ping"), RPC_M_DAEMON_PING);
	ck_assert_int_eq(rpc_method_lookup("nope"), -1);
	/* Every method's parameters are contiguous in rpc.def. */
	size_t total = 0;
	for (int m = 0; m < RPC_M__COUNT; m++) {
		n = rpc_method_params((enum rpc_method)m, &defs);
		for (size_t i = 0; i < n; i++)
			ck_assert_int_eq(defs[i].method, m);
		total += n;
	}
	ck_assert_uint_gt(total, 10);
	n = rpc_method_params(RPC_M_CMD_RUN, &defs);
	ck_assert_uint_gt(n, 2);
}
END_TEST

/* Dotted method names ("session.show") and "auth" in one line of text. */
static bool line_names(const char *line, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = line; (p = strstr(p, name)); p++) {
		bool left = p == line || !(isalnum((unsigned char)p[-1]) ||
					   p[-1] == '.' || p[-1] == '_');
		bool right = !(isalnum((unsigned char)p[n]) || p[n] == '.' ||
			       p[n] == '_');
		if (left && right)
			return true;
	}
	return false;
}

/*
 * The method table (proto/rpc.def) is the one source of truth: the method
 * reference in proto/PROTOCOL.md names exactly its methods (one heading
 * each, "### name ..." or several in one heading), every notification is
 * described there, and every method is called by some test (its name in
 * quotes in tests/unit or tests/integration).
 */
START_TEST(test_table_documented_and_tested)
{
	char *doc = test_read_file("proto/PROTOCOL.md");
	glob_t g;

	ck_assert_msg(doc != NULL, "run from the source tree: no "
				   "proto/PROTOCOL.md here");
	/* Each table method in a heading. */
	for (int m = 0; m < RPC_M__COUNT; m++) {
		const char *name = rpc_method_name((enum rpc_method)m);
		bool found = false;

		for (char *l = doc; l && *l && !found;
		     l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
			char *e = strchr(l, '\n');
			char save = e ? *e : 0;

			if (e)
				*e = '\0';
			found = !strncmp(l, "### ", 4) && line_names(l, name);
			if (e)
				*e = save;
		}
		ck_assert_msg(found, "proto/PROTOCOL.md has no heading for %s",
			      name);
	}
	/* Each dotted name in a heading is a table method. */
	for (char *l = doc; l && *l;
	     l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		if (strncmp(l, "### ", 4))
			continue;
		for (char *p = l + 4; *p && *p != '\n'; p++) {
			char word[64];
			size_t k = 0;

			if (!islower((unsigned char)*p) ||
			    (p > l && (isalnum((unsigned char)p[-1]) ||
				       p[-1] == '_' || p[-1] == '.')))
				continue;
			while ((islower((unsigned char)p[k]) || p[k] == '.' ||
				p[k] == '_') &&
			       k < sizeof(word) - 1) {
				word[k] = p[k];
				k++;
			}
			word[k] = '\0';
			if (strchr(word, '.') && word[k - 1] != '.')
				ck_assert_msg(
				    rpc_method_lookup(word) >= 0,
				    "proto/PROTOCOL.md documents %s, "
				    "which proto/rpc.def does not have",
				    word);
			p += k ? k - 1 : 0;
		}
	}
	for (int n = 0; n < RPC_N__COUNT; n++)
		ck_assert_msg(
		    line_names(doc, rpc_notify_name((enum rpc_notify)n)),
		    "proto/PROTOCOL.md does not describe the %s "
		    "notification",
		    rpc_notify_name((enum rpc_notify)n));
	free(doc);

	/* Each method called by a test. */
	ck_assert_int_eq(glob("tests/unit/*.c", 0, NULL, &g), 0);
	ck_assert_int_eq(glob("tests/integration/*.c", GLOB_APPEND, NULL, &g),
			 0);
	for (int m = 0; m < RPC_M__COUNT; m++) {
		char quoted[80];
		bool found = false;

		snprintf(quoted, sizeof(quoted), "\"%s\"",
			 rpc_method_name((enum rpc_method)m));
		for (size_t i = 0; i < g.gl_pathc && !found; i++) {
			char *text = test_read_file(g.gl_pathv[i]);

			found = text && strstr(text, quoted);
			free(text);
		}
		ck_assert_msg(found, "no test calls %s", quoted);
	}
	globfree(&g);
}
END_TEST

/* The one string list and the one word splitter (common/strv.h,
 * common/words.h). */
START_TEST(test_strv_and_words)
{
	struct strv l = {0};
	char **w = NULL;

	ck_assert_int_eq(strv_push(&l, "a"), 0);
	ck_assert_int_eq(strv_push(&l, "b c"), 0);
	ck_assert_uint_eq(l.n, 2);
	ck_assert_str_eq(l.v[1], "b c");
	ck_assert_ptr_null(l.v[2]);
	strv_free(&l);
	ck_assert_ptr_null(l.v);
	strv_free(&l);

	ck_assert_int_eq(words_split("npm  ci --x='a b'", 8, &w), 3);
	ck_assert_str_eq(w[2], "--x=a b");
	ck_assert_ptr_null(w[3]);
	words_free(w);
	ck_assert_int_eq(words_split("", 8, &w), 0);
	words_free(w);
	w = NULL;
	ck_assert_int_eq(words_split("a b c", 2, &w), -E2BIG);
	ck_assert_int_eq(words_split("make | sh", 8, &w), -EINVAL);
	ck_assert_int_eq(words_split("echo \"$HOME\"", 8, &w), -EINVAL);
	ck_assert_int_eq(words_split("'open", 8, &w), -EINVAL);
	ck_assert_int_eq(words_split("x\\", 8, &w), -EINVAL);
	ck_assert_ptr_null(w);
}
END_TEST

/* Strict mode (tests/run, .ci/run): a layer skip fails only when the host
 * has that layer, and never outside strict mode. */
START_TEST(test_strict_layers)
{
	setenv("SPD_TEST_HOST_LAYERS",
	       "seccomp landlock landlock_abi=6 sandbox", 1);
	unsetenv("SPD_TEST_STRICT");
	ck_assert(!test_host_has_layer("seccomp"));
	setenv("SPD_TEST_STRICT", "1", 1);
	ck_assert(test_host_has_layer("seccomp"));
	ck_assert(test_host_has_layer("sandbox"));
	ck_assert(!test_host_has_layer("user_namespaces"));
	ck_assert(!test_host_has_layer("seccom"));
	ck_assert(test_host_has_layer("landlock_abi>=4"));
	ck_assert(test_host_has_layer("landlock_abi>=6"));
	ck_assert(!test_host_has_layer("landlock_abi>=7"));
	unsetenv("SPD_TEST_HOST_LAYERS");
	ck_assert(!test_host_has_layer("seccomp"));
	unsetenv("SPD_TEST_STRICT");
}
END_TEST

/* The section of PROTOCOL.md under the heading that names method: from
 * that "### " line to the next heading (a pointer into doc, *ret_len). */
static const char *method_section(const char *doc, const char *name,
				  size_t *ret_len)
{
	for (const char *l = doc; l && *l;
	     l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		const char *e = strchr(l, '\n'), *end;
		char head[256];
		size_t hl = e ? (size_t)(e - l) : strlen(l);

		if (strncmp(l, "### ", 4) || hl >= sizeof(head))
			continue;
		memcpy(head, l, hl);
		head[hl] = '\0';
		if (!line_names(head, name))
			continue;
		end = e ? strstr(e, "\n#") : NULL;
		*ret_len = end ? (size_t)(end - l) : strlen(l);
		return l;
	}
	return NULL;
}

/*
 * Result shapes (SPD_RESULT rows): grouped by method, each field once, and
 * each named in its method's section of PROTOCOL.md; rpc_result_check
 * refuses a field the table lacks, a missing one, another kind, and a null
 * where the table does not allow one.
 */
START_TEST(test_result_table)
{
	char *doc = test_read_file("proto/PROTOCOL.md");
	const struct rpc_result_def *d;
	char why[160];
	json_t *r;

	ck_assert(doc != NULL);
	for (int m = 0; m < RPC_M__COUNT; m++) {
		const char *name = rpc_method_name((enum rpc_method)m);
		size_t n = rpc_method_results((enum rpc_method)m, &d), slen = 0;
		const char *sec = method_section(doc, name, &slen);
		char *text;

		ck_assert_msg(sec, "no section for %s", name);
		text = strndup(sec, slen);
		for (size_t i = 0; i < n; i++) {
			ck_assert_int_eq(d[i].method, m);
			for (size_t k = 0; k < i; k++)
				ck_assert_msg(strcmp(d[k].name, d[i].name),
					      "%s: %s twice", name, d[i].name);
			ck_assert_msg(line_names(text, d[i].name),
				      "proto/PROTOCOL.md: the section on %s "
				      "does not name its result field %s",
				      name, d[i].name);
		}
		free(text);
	}
	free(doc);

	r = json_pack("{s:b}", "pong", 1);
	ck_assert_int_eq(
	    rpc_result_check(RPC_M_DAEMON_PING, r, why, sizeof(why)), 0);
	json_object_set_new(r, "extra", json_true());
	ck_assert_int_eq(
	    rpc_result_check(RPC_M_DAEMON_PING, r, why, sizeof(why)), -EPROTO);
	ck_assert_ptr_nonnull(strstr(why, "extra"));
	json_decref(r);
	r = json_object();
	ck_assert_int_eq(
	    rpc_result_check(RPC_M_DAEMON_PING, r, why, sizeof(why)), -EPROTO);
	ck_assert_ptr_nonnull(strstr(why, "missing"));
	json_object_set_new(r, "pong", json_string("yes"));
	ck_assert_int_eq(
	    rpc_result_check(RPC_M_DAEMON_PING, r, why, sizeof(why)), -EPROTO);
	json_object_set_new(r, "pong", json_null());
	ck_assert_int_eq(
	    rpc_result_check(RPC_M_DAEMON_PING, r, why, sizeof(why)), -EPROTO);
	json_decref(r);
	/* RPC_R_NULL allows null; RPC_R_OPTIONAL allows absence. */
	r = json_pack("{s:s, s:n}", "principal", "operator", "session");
	ck_assert_int_eq(rpc_result_check(RPC_M_AUTH, r, why, sizeof(why)), 0);
	json_decref(r);
	r = json_pack("{s:s, s:s}", "version", "x", "sandbox_mode", "required");
	ck_assert_int_eq(
	    rpc_result_check(RPC_M_DAEMON_STATUS, r, why, sizeof(why)), 0);
	json_decref(r);
	/* No rows: null or {} only. */
	ck_assert_int_eq(rpc_result_check(RPC_M_JOURNAL_FOLLOW, json_null(),
					  why, sizeof(why)),
			 0);
	r = json_pack("{s:b}", "ok", 1);
	ck_assert_int_eq(rpc_result_check(RPC_M_RUN_INPUT, r, why, sizeof(why)),
			 -EPROTO);
	json_decref(r);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("common");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_buf);
	tcase_add_test(tc, test_utf8);
	tcase_add_test(tc, test_private_dir);
	tcase_add_test(tc, test_read_line);
	tcase_add_test(tc, test_proto_tables);
	tcase_add_test(tc, test_conf_keys_documented);
	tcase_add_test(tc, test_conf_documented_keys_known);
	tcase_add_test(tc, test_conf_table_agrees);
	tcase_add_test(tc, test_strict_layers);
	tcase_add_test(tc, test_strv_and_words);
	tcase_add_test(tc, test_table_documented_and_tested);
	tcase_add_test(tc, test_result_table);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

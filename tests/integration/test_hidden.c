/*
 * spd.conf's [sandbox] hidden = PATH, through a real spd and sandboxd:
 * a run cannot read or list what the operator hid (a directory, a file),
 * reads what lies next to it, and works in a workspace inside a hidden
 * directory without seeing the rest of it; the file tools and
 * policy.check refuse a hidden path outright (deny.path.hidden), even
 * with the operator's yes; a bad value makes spd refuse to start.
 */
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <check.h>

#include "common/paths.h"
#include "tests/lib/spdproc.h"
#include "tests/lib/testlib.h"

#define CANARY_DIR "CANARY-hidden-dir-5b1e"
#define CANARY_FILE "CANARY-hidden-file-9c4d"
#define CANARY_NEXT "CANARY-next-to-ws-2a7f"
#define VISIBLE "visible-next-door-3d8a"

static struct test_spd T;
static char *WS;   /* the runs' workspace */
static char *HOME; /* a home-like directory on the host's file system */

static bool has(const char *hay, const char *needle)
{
	return hay && needle && strstr(hay, needle) != NULL;
}

/*
 * A directory the run sees as the host has it: /tmp and /var/tmp are the
 * run's own, so nothing there needs hiding.  As root /var (as the
 * test_sandbox_* suites do, tests/lib/sbxtest.h); otherwise
 * SPD_TEST_OUTSIDE, or NULL (skipped).
 */
static char *outside_dir(void)
{
	const char *e = getenv("SPD_TEST_OUTSIDE");
	char *t;

	if (!(e && e[0] == '/') && geteuid() != 0)
		return NULL;
	t = test_fmt("%s/spd-test-hidden-XXXXXX",
		     e && e[0] == '/' ? e : "/var");
	ck_assert_ptr_nonnull(mkdtemp(t));
	ck_assert_int_eq(chmod(t, 0755), 0);
	return t;
}

static void put(const char *dir, const char *name, const char *content)
{
	char *p = test_fmt("%s/%s", dir, name);

	test_write_file(p, content);
	ck_assert_int_eq(chmod(p, 0644), 0);
	free(p);
}

static void mkdir_in(const char *dir, const char *name)
{
	char *p = test_fmt("%s/%s", dir, name);

	ck_assert_int_eq(mkdir(p, 0755), 0);
	ck_assert_int_eq(chmod(p, 0755), 0);
	free(p);
}

static void teardown(void)
{
	test_spd_cleanup(&T);
	if (WS)
		test_rmrf(WS);
	if (HOME)
		test_rmrf(HOME);
	free(WS);
	free(HOME);
	WS = HOME = NULL;
}

/* spctl run --yes --workspace ws -- sh script (a file in the workspace,
 * so that the policy does not see the paths it reads: the sandbox is
 * what is tested).  Returns spctl's exit code. */
static int run_script(char *ws, const char *script, char **ret_out,
		      char **ret_err)
{
	char *args[] = {"run", "--yes", "--workspace", ws,
			"--",  "sh",	"t.sh",	       NULL};
	int st;

	put(ws, "t.sh", script);
	st = test_spctl(&T, args, NULL, ret_out, ret_err);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The home-like tree: secrets/ (hidden) with a canary, notes/ with a
 * hidden passwords.txt and a visible file next to it. */
static void make_home(void)
{
	mkdir_in(HOME, "secrets");
	put(HOME, "secrets/canary.txt", CANARY_DIR "\n");
	mkdir_in(HOME, "notes");
	put(HOME, "notes/passwords.txt", CANARY_FILE "\n");
	put(HOME, "notes/visible.txt", VISIBLE "\n");
}

static void start_with_hidden(void)
{
	/* The directory with a trailing slash: taken as the same path.  One
	 * inside the workspace too. */
	char *conf = test_fmt("[sandbox]\n\thidden = %s/secrets/\n"
			      "\thidden = %s/notes/passwords.txt\n"
			      "\thidden = %s/private\n",
			      HOME, HOME, WS);

	test_spd_prepare(&T, conf);
	free(conf);
	test_spd_start(&T);
}

/*
 * A run reads neither the hidden directory's files nor its names, nor
 * the hidden file; the file next to it reads; the host's files are
 * unchanged.
 */
START_TEST(test_hidden_in_runs)
{
	char *out = NULL, *err = NULL, *script, *c;
	int ex;

	if (!(HOME = outside_dir()))
		TEST_SKIP("skipped: not root and no SPD_TEST_OUTSIDE (a "
			  "directory a run sees as the host has it)");
	make_home();
	WS = test_tmpdir("ws");
	start_with_hidden();
	script = test_fmt("cat %s/secrets/canary.txt; ls -a %s/secrets; ", HOME,
			  HOME);
	c = test_fmt("%scat %s/notes/passwords.txt; ", script, HOME);
	free(script);
	script = test_fmt("%scat %s/notes/visible.txt; echo RAN-TO-THE-END\n",
			  c, HOME);
	free(c);
	ex = run_script(WS, script, &out, &err);
	free(script);
	ck_assert_msg(has(out, "RAN-TO-THE-END") && has(out, VISIBLE),
		      "the run did not run (%d): %s / %s", ex, out, err);
	ck_assert_msg(!has(out, CANARY_DIR) && !has(err, CANARY_DIR),
		      "the hidden directory's file was read: %s", out);
	ck_assert_msg(!has(out, "canary.txt"),
		      "the hidden directory was listed: %s", out);
	ck_assert_msg(!has(out, CANARY_FILE) && !has(err, CANARY_FILE),
		      "the hidden file was read: %s", out);
	free(out);
	free(err);
	/* The host's files are as they were. */
	c = test_fmt("%s/secrets/canary.txt", HOME);
	out = test_read_file(c);
	ck_assert_msg(has(out, CANARY_DIR), "canary changed: %s", out);
	free(out);
	free(c);
	c = test_fmt("%s/notes/passwords.txt", HOME);
	out = test_read_file(c);
	ck_assert_msg(has(out, CANARY_FILE), "file changed: %s", out);
	free(out);
	free(c);
	test_spd_stop_clean(&T);
}
END_TEST

/* One request's reply on a fresh connection, with the operator token. */
static char *call(const char *method, const char *params)
{
	int fd = test_spd_connect(&T);
	char *r = test_call(&T, fd, 1, method, params, true);

	close(fd);
	return r;
}

/*
 * The file tools and policy.check refuse a hidden path with
 * deny.path.hidden, even with yes (no person can approve it); a command
 * naming it is refused the same way and does not run; a path next to it
 * is only asked about (ask.read.outside), as before.
 */
START_TEST(test_hidden_refused_by_policy)
{
	const char *tail[] = {"secrets/canary.txt", "secrets",
			      "notes/passwords.txt"};
	char *r, *p, *out = NULL, *err = NULL;

	HOME = test_tmpdir("home");
	make_home();
	WS = test_tmpdir("ws");
	start_with_hidden();
	for (size_t i = 0; i < sizeof(tail) / sizeof(tail[0]); i++) {
		p = test_fmt("{\"workspace\":\"%s\",\"read\":\"%s/%s\"}", WS,
			     HOME, tail[i]);
		r = call("policy.check", p);
		ck_assert_msg(has(r, "deny.path.hidden") && has(r, "\"deny\""),
			      "policy.check %s: %s", tail[i], r);
		free(r);
		free(p);
		/* The file tools never leave the workspace (PATH-ESCAPE
		 * before the policy); refused either way, never read. */
		p = test_fmt("{\"workspace\":\"%s\",\"path\":\"%s/%s\","
			     "\"yes\":true}",
			     WS, HOME, tail[i]);
		r = call("fs.read", p);
		ck_assert_msg(
		    has(r, "\"error\"") &&
			(has(r, "deny.path.hidden") || has(r, "PATH-ESCAPE")) &&
			!has(r, CANARY_DIR) && !has(r, CANARY_FILE),
		    "fs.read %s: %s", tail[i], r);
		free(r);
		free(p);
	}
	/* Inside the workspace, under a hidden path that does not hold
	 * the workspace: refused as well, to the file tools too. */
	mkdir_in(WS, "private");
	put(WS, "private/key.txt", CANARY_DIR "\n");
	p = test_fmt("{\"workspace\":\"%s\",\"read\":\"private/key.txt\"}", WS);
	r = call("policy.check", p);
	ck_assert_msg(has(r, "deny.path.hidden"), "inside: %s", r);
	free(r);
	free(p);
	p = test_fmt("{\"workspace\":\"%s\",\"path\":\"private/key.txt\","
		     "\"yes\":true}",
		     WS);
	r = call("fs.read", p);
	ck_assert_msg(has(r, "deny.path.hidden") && !has(r, CANARY_DIR),
		      "fs.read inside: %s", r);
	free(r);
	free(p);
	/* Next to it: the ordinary rule, not this one. */
	p = test_fmt("{\"workspace\":\"%s\",\"read\":\"%s/notes/visible.txt\"}",
		     WS, HOME);
	r = call("policy.check", p);
	ck_assert_msg(!has(r, "deny.path.hidden"), "%s", r);
	free(r);
	free(p);
	/* A command that names it: refused whatever --yes says. */
	p = test_fmt("%s/notes/passwords.txt", HOME);
	{
		char *args[] = {"run", "--yes", "--workspace", WS, "--",
				"cat", p,	NULL};
		int st = test_spctl(&T, args, NULL, &out, &err);

		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) != 0,
			      "ran: %s / %s", out, err);
	}
	ck_assert_msg(has(err, "deny.path.hidden") && !has(out, CANARY_FILE),
		      "%s / %s", out, err);
	free(out);
	free(err);
	free(p);
	test_spd_stop_clean(&T);
}
END_TEST

/*
 * A hidden directory that holds the workspace: the run works in its
 * workspace, and sees nothing else of the hidden directory.
 */
START_TEST(test_workspace_inside_hidden)
{
	char *out = NULL, *err = NULL, *conf, *clients, *script, *p;
	int ex;

	if (!(HOME = outside_dir()))
		TEST_SKIP("skipped: not root and no SPD_TEST_OUTSIDE (a "
			  "directory a run sees as the host has it)");
	mkdir_in(HOME, "clients");
	clients = test_fmt("%s/clients", HOME);
	mkdir_in(clients, "other");
	put(clients, "other/secret.txt", CANARY_NEXT "\n");
	mkdir_in(clients, "acme");
	mkdir_in(clients, "acme/repo");
	WS = test_fmt("%s/acme/repo", clients);
	put(WS, "src.txt", "in-the-workspace\n");
	conf = test_fmt("[sandbox]\n\thidden = %s\n", clients);
	test_spd_prepare(&T, conf);
	free(conf);
	test_spd_start(&T);
	script = test_fmt("cat src.txt; echo made > made.txt; cat %s/other/"
			  "secret.txt; ls -a %s; echo RAN-TO-THE-END\n",
			  clients, clients);
	ex = run_script(WS, script, &out, &err);
	free(script);
	ck_assert_msg(has(out, "in-the-workspace") &&
			  has(out, "RAN-TO-THE-END"),
		      "the run did not work in its workspace (%d): %s / %s", ex,
		      out, err);
	ck_assert_msg(!has(out, CANARY_NEXT) && !has(err, CANARY_NEXT),
		      "the rest of the hidden directory was read: %s", out);
	ck_assert_msg(!has(out, "other"), "the hidden directory was listed: %s",
		      out);
	free(out);
	free(err);
	/* The workspace's own files are not refused for lying in a
	 * hidden directory. */
	p = test_fmt("{\"workspace\":\"%s\",\"read\":\"src.txt\"}", WS);
	out = call("policy.check", p);
	ck_assert_msg(has(out, "allow.read"), "%s", out);
	free(out);
	free(p);
	p = test_fmt("%s/made.txt", WS);
	out = test_read_file(p);
	ck_assert_msg(has(out, "made"), "the run could not write: %s", out);
	free(out);
	free(p);
	free(clients);
	test_spd_stop_clean(&T);
}
END_TEST

/* cmd.run params (a JSON object text) as the operator on fd: the run's
 * output, its run.output notifications' data put back together (a
 * chunk may end mid-word), returned; the reply line in *ret_reply. */
static char *session_run(int fd, const char *params, char **ret_reply)
{
	char *line = test_call(&T, fd, 7, "cmd.run", params, true);
	char *acc = strdup("");

	while (line && !has(line, "\"id\":7")) {
		json_t *j = json_loads(line, 0, NULL);
		const char *d = json_string_value(
		    json_object_get(json_object_get(j, "params"), "data"));
		char *n = test_fmt("%s%s", acc, d ? d : "");

		json_decref(j);
		free(acc);
		free(line);
		acc = n;
		line = test_recv_line(fd, 60000);
	}
	ck_assert_msg(line != NULL, "no reply to the run: %s", acc);
	*ret_reply = line;
	return acc;
}

/*
 * A session: its runs in the worktree are covered the same way,
 * and policy.check answers its hidden path with deny.path.hidden (the
 * unresolved answer an agent gets), a path next to it with the ask.
 */
START_TEST(test_hidden_agent_session)
{
	char id[TEST_SESSION_ID_LEN + 1], tok[TEST_SESSION_TOKEN_LEN + 1];
	char *repo, *p, *r, *out = NULL;
	int fd;

	if (!(HOME = outside_dir()))
		TEST_SKIP("skipped: not root and no SPD_TEST_OUTSIDE (a "
			  "directory a run sees as the host has it)");
	make_home();
	WS = test_tmpdir("ws");
	start_with_hidden();
	repo = test_fmt("%s/repo", T.dir);
	test_make_repo(repo, "echo a > a.txt");
	p = test_fmt("{\"repo\":\"%s\",\"feature\":\"hide\"}", repo);
	test_session_start(&T, p, id, tok);
	free(p);
	fd = test_spd_connect(&T);
	p = test_fmt("{\"read\":\"%s/secrets/canary.txt\"}", HOME);
	r = test_rpc_on(&T, fd, tok, "policy.check", p, 20000);
	ck_assert_msg(has(r, "deny.path.hidden"), "%s", r);
	free(r);
	free(p);
	p = test_fmt("{\"read\":\"%s/notes/visible.txt\"}", HOME);
	r = test_rpc_on(&T, fd, tok, "policy.check", p, 20000);
	ck_assert_msg(has(r, "ask.read.outside"), "%s", r);
	free(r);
	free(p);
	close(fd);
	/* A run in the session (the operator's yes for the shell, which an
	 * agent would have approved): every line it sends, output
	 * notifications and the reply. */
	p = test_fmt("{\"session\":\"%s\",\"yes\":true,\"argv\":[\"sh\",\"-c\","
		     "\"cat %s/secrets/canary.txt; cat %s/notes/passwords.txt; "
		     "cat %s/notes/visible.txt; echo END\"]}",
		     id, HOME, HOME, HOME);
	fd = test_spd_connect(&T);
	out = session_run(fd, p, &r);
	close(fd);
	free(p);
	ck_assert_msg(has(out, VISIBLE) && has(out, "END") &&
			  has(r, "\"exit_code\""),
		      "the session's run did not run: %s / %s", out, r);
	ck_assert_msg(!has(out, CANARY_DIR) && !has(out, CANARY_FILE),
		      "a hidden file was read: %s", out);
	free(out);
	free(r);
	free(repo);
	test_spd_stop_clean(&T);
}
END_TEST

/*
 * "~/..." is the home spd has when it reads spd.conf: the expanded path
 * is what is refused.  spd's HOME is T.dir in every layout (the default
 * and nested layouts set it; here it is set for the tmp one).
 */
START_TEST(test_hidden_tilde)
{
	char *conf, *notes, *r, *p;

	test_spd_prepare(&T, NULL);
	ck_assert_int_eq(setenv("HOME", T.dir, 1), 0);
	mkdir_in(T.dir, "notes");
	notes = test_fmt("%s/notes", T.dir);
	put(notes, "passwords.txt", CANARY_FILE "\n");
	conf = test_fmt("%s/spd.conf", T.config);
	test_write_file(conf, "[sandbox]\n\thidden = ~/notes/passwords.txt\n");
	free(conf);
	test_spd_start(&T);
	WS = test_tmpdir("ws");
	p = test_fmt("{\"workspace\":\"%s\",\"read\":\"%s/passwords.txt\"}", WS,
		     notes);
	r = call("policy.check", p);
	ck_assert_msg(has(r, "deny.path.hidden") && has(r, notes), "%s", r);
	free(r);
	free(p);
	/* spctl status lists it, expanded, so the operator sees what
	 * spd read. */
	{
		char *out = NULL,
		     *want = test_fmt("hidden:       %s/passwords.txt "
				      "(no run sees these)",
				      notes);
		int st = test_spctl(&T, (char *[]){"status", NULL}, NULL, &out,
				    NULL);

		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
				  has(out, want),
			      "spctl status: %s", out);
		free(out);
		free(want);
	}
	free(notes);
	test_spd_stop_clean(&T);
}
END_TEST

/* A relative path, "/", a "~user" form, or more than the limit: spd
 * refuses to start, naming the key and the value. */
START_TEST(test_hidden_config_refused)
{
	const char *bad[] = {
	    "[sandbox]\n\thidden = notes/passwords.txt\n",
	    "[sandbox]\n\thidden = /\n", "[sandbox]\n\thidden = ~root/x\n",
	    "[sandbox]\n\thidden = /a/../etc\n",
	    "[sandbox]\n\thidden = /h1\n\thidden = /h2\n\thidden = /h3\n"
	    "\thidden = /h4\n\thidden = /h5\n\thidden = /h6\n\thidden = /h7\n"
	    "\thidden = /h8\n\thidden = /h9\n"};
	const char *value[] = {"notes/passwords.txt", "\"/\"", "~root/x",
			       "/a/../etc", "at most 8"};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *err = test_spd_refuses(&T, bad[i]);

		ck_assert_msg(has(err, "sandbox.hidden") && has(err, value[i]),
			      "%s: %s", bad[i], err);
		free(err);
		test_spd_cleanup(&T);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("hidden");
	TCase *tc = tcase_create("hidden");
	SRunner *sr;
	int failed;

	signal(SIGPIPE, SIG_IGN);
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, test_hidden_in_runs);
	tcase_add_test(tc, test_hidden_refused_by_policy);
	tcase_add_test(tc, test_workspace_inside_hidden);
	tcase_add_test(tc, test_hidden_agent_session);
	tcase_add_test(tc, test_hidden_tilde);
	tcase_add_test(tc, test_hidden_config_refused);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

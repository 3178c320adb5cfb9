/*
 * What a new user trips over, seen from spctl: stopping spd, a stale pid
 * file, a runtime directory removed under spd, the exit codes and hints of
 * a user's mistakes, the help text, and the live views of approvals.  Each
 * test asserts what the user sees: the message, the exit code, the
 * process gone.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/spdproc.h"
#include "tests/lib/testlib.h"
#include "common/paths.h"
#include "common/util.h"

static bool has(const char *hay, const char *needle)
{
	return hay && strstr(hay, needle);
}

/* spctl with autostart on (the test harness's environment turns it off). */
static char *const autostart[] = {"SPD_NO_AUTOSTART=0", NULL};

static int exit_of(int st)
{
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Whether pid has exited: reaped, or a zombie (an autostarted spd's
 * parent may be a subreaper that has not reaped it yet). */
static bool gone(pid_t pid)
{
	char path[64], *stat, *p;
	bool z;
	int st;

	if (waitpid(pid, &st, WNOHANG) == pid)
		return true;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	stat = test_read_file(path);
	p = stat ? strrchr(stat, ')') : NULL;
	z = !p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X';
	free(stat);
	return z;
}

static pid_t pidfile_pid(struct test_spd *t)
{
	char *p = paths_join(t->runtime, "spd.pid");
	char *s = test_read_file(p);
	pid_t pid = s ? (pid_t)atoi(s) : 0;

	free(p);
	free(s);
	return pid;
}

START_TEST(test_stop_stops_spd)
{
	struct test_spd t;
	char *out = NULL, *err = NULL, *reply;
	pid_t pid;
	int st, fd;

	test_spd_prepare(&t, NULL);
	test_spd_start(&t);
	pid = t.pid;
	/* Only the operator stops spd. */
	fd = test_spd_connect(&t);
	reply = test_rpc_on(&t, fd,
			    "0000000000000000000000000000000000000000000000000"
			    "000000000000000",
			    "daemon.stop", NULL, 5000);
	TEST_ASSERT_CODE(reply, "UNAUTHORIZED");
	free(reply);
	close(fd);
	ck_assert_msg(!gone(pid), "spd stopped for a wrong token");
	st = test_spctl(&t, (char *[]){"stop", NULL}, NULL, &out, &err);
	ck_assert_msg(exit_of(st) == 0 && has(out, "stopped"),
		      "spctl stop: %d %s %s", st, out, err);
	ck_assert_msg(gone(pid), "spctl stop returned but spd %d runs",
		      (int)pid);
	t.pid = 0;
	free(out), free(err);
	/* A second stop: nothing runs, and spctl did not start one. */
	st = test_spctl(&t, (char *[]){"stop", NULL}, autostart, &out, &err);
	ck_assert_msg(exit_of(st) == 0 && has(out, "spd is not running"),
		      "second spctl stop: %d %s %s", st, out, err);
	ck_assert_msg(pidfile_pid(&t) == 0, "spctl stop started spd");
	free(out), free(err);
	test_spd_cleanup(&t);
}
END_TEST

/* A pid file naming a live process that is not spd (here a sleep) never
 * reads as a running spd, and neither spd nor spctl touches it. */
START_TEST(test_stale_pidfile_not_spd)
{
	struct test_spd t;
	char *out = NULL, *err = NULL, *p, txt[32];
	pid_t other, pid, dead;
	int st;

	test_spd_prepare(&t, NULL);
	other = fork();
	ck_assert_int_ge(other, 0);
	if (other == 0) {
		execlp("sleep", "sleep", "60", (char *)NULL);
		_exit(127);
	}
	ck_assert_int_eq(mkdir(t.runtime, 0700) == 0 || errno == EEXIST, 1);
	p = paths_join(t.runtime, "spd.pid");
	/* A dead pid first: one that has exited and been reaped. */
	dead = fork();
	ck_assert_int_ge(dead, 0);
	if (dead == 0)
		_exit(0);
	waitpid(dead, NULL, 0);
	snprintf(txt, sizeof(txt), "%d\n", (int)dead);
	test_write_file(p, txt);
	st = test_spctl(&t, (char *[]){"stop", NULL}, NULL, &out, &err);
	ck_assert_msg(exit_of(st) == 0 && has(out, "spd is not running") &&
			  has(out, "stale file"),
		      "spctl stop with a dead pid in spd.pid: %d %s %s", st,
		      out, err);
	free(out), free(err);
	snprintf(txt, sizeof(txt), "%d\n", (int)other);
	test_write_file(p, txt);
	free(p);
	st = test_spctl(&t, (char *[]){"stop", NULL}, NULL, &out, &err);
	ck_assert_msg(exit_of(st) == 0 && has(out, "spd is not running") &&
			  has(out, "stale file"),
		      "spctl stop with a stale pid file: %d %s %s", st, out,
		      err);
	ck_assert_msg(!gone(other), "spctl stop killed a process not spd");
	free(out), free(err);
	/* spctl's autostart is not misled either: spd starts. */
	st = test_spctl(&t, (char *[]){"ping", NULL}, autostart, &out, &err);
	ck_assert_msg(exit_of(st) == 0 && has(out, "pong"),
		      "autostart with a stale pid file: %d %s %s", st, out,
		      err);
	free(out), free(err);
	pid = pidfile_pid(&t);
	ck_assert_msg(pid > 0 && pid != other, "spd did not write its pid");
	st = test_spctl(&t, (char *[]){"stop", NULL}, NULL, &out, &err);
	ck_assert_msg(exit_of(st) == 0 && has(out, "stopped"),
		      "spctl stop: %d %s %s", st, out, err);
	ck_assert_msg(gone(pid), "spd %d still runs", (int)pid);
	ck_assert_msg(!gone(other), "stopping spd killed another process");
	free(out), free(err);
	kill(other, SIGKILL);
	waitpid(other, NULL, 0);
	test_spd_cleanup(&t);
}
END_TEST

/*
 * The runtime directory removed under a running spd (a logout's clean-up,
 * rm -rf): the next spctl gets an spd that answers, not a refusal naming
 * one socket path as both spds', and the old spd is gone.
 */
START_TEST(test_runtime_dir_removed)
{
	struct test_spd t;
	char *out = NULL, *err = NULL;
	pid_t old, pid;
	int st;

	test_spd_prepare(&t, NULL);
	test_spd_start(&t);
	old = t.pid;
	test_rmrf(t.runtime);
	st = test_spctl(&t, (char *[]){"ping", NULL}, autostart, &out, &err);
	ck_assert_msg(exit_of(st) == 0 && has(out, "pong"),
		      "spctl after the runtime dir was removed: %d %s %s", st,
		      out, err);
	free(out), free(err);
	for (int i = 0; i < 300 && !gone(old); i++)
		usleep(100 * 1000);
	ck_assert_msg(gone(old), "the spd that lost its socket still runs");
	t.pid = 0;
	pid = pidfile_pid(&t);
	ck_assert_msg(pid > 0 && pid != old, "no new spd");
	st = test_spctl(&t, (char *[]){"stop", NULL}, NULL, &out, &err);
	ck_assert_msg(exit_of(st) == 0 && gone(pid), "spctl stop: %d %s %s", st,
		      out, err);
	free(out), free(err);
	test_spd_cleanup(&t);
}
END_TEST

/* spctl with args in t's environment (extra env may be NULL): its exit
 * code, stdout and stderr (freed by the caller). */
static int spctl(struct test_spd *t, char *const extra[], char **out,
		 char **err, char *const args[])
{
	return exit_of(test_spctl(t, args, extra, out, err));
}

/* The mistakes a new user makes first: each exits 2 (a usage error, not
 * 125 "spctl or spd failed") and says what to do. */
START_TEST(test_user_mistakes_exit_2)
{
	struct test_spd t;
	char *out = NULL, *err = NULL;
	int ex;

	test_spd_prepare(&t, NULL);
	ex = spctl(&t, NULL, &out, &err, (char *[]){"run", "ls", NULL});
	ck_assert_msg(ex == 2 && has(err, "put -- before the command") &&
			  has(err, "spctl run [OPTIONS] -- ls"),
		      "spctl run ls: %d %s", ex, err);
	free(out), free(err);
	ex = spctl(&t, NULL, &out, &err,
		   (char *[]){"run", "--net", "bogus", "--", "true", NULL});
	ck_assert_msg(ex == 2 && has(err, "not a network mode") &&
			  has(err, "loopback"),
		      "--net bogus: %d %s", ex, err);
	free(out), free(err);
	ex = spctl(&t, NULL, &out, &err,
		   (char *[]){"agent", "--", "true", NULL});
	ck_assert_msg(ex == 2 && has(err, "no session") &&
			  has(err, "--session") && !has(err, "workspace"),
		      "spctl agent without a session: %d %s", ex, err);
	free(out), free(err);
	test_spd_start(&t);
	ex = spctl(&t, NULL, &out, &err,
		   (char *[]){"agent", "--session", "0123456789abcdef", "--",
			      "true", NULL});
	ck_assert_msg(ex == 2 && has(err, "spctl session list"),
		      "agent --session of no session: %d %s", ex, err);
	free(out), free(err);
	ex = spctl(&t, NULL, &out, &err,
		   (char *[]){"policy", "check", "--session",
			      "0123456789abcdef", "--", "ls", NULL});
	ck_assert_msg(ex == 2 && has(err, "no such session") &&
			  has(err, "spctl session list"),
		      "policy check --session of no session: %d %s", ex, err);
	free(out), free(err);
	test_spd_stop_clean(&t);
}
END_TEST

/*
 * spctl beside an spd of another configuration directory (another
 * HOME, SPD_CONFIG_DIR) has no operator token to call it with: it says
 * so, naming where it looked, instead of the "Broken pipe" it printed
 * when spd closed the connection it never authenticated (found as a new
 * user, two HOMEs sharing one runtime dir).
 */
START_TEST(test_no_token_says_so)
{
	struct test_spd t;
	char *out = NULL, *err = NULL, *cfg, *env;
	int ex;

	test_spd_prepare(&t, NULL);
	test_spd_start(&t);
	cfg = test_fmt("%s/other-config", t.dir);
	ck_assert_int_eq(mkdir(cfg, 0700), 0);
	env = test_fmt("SPD_CONFIG_DIR=%s", cfg);
	ex = spctl(&t, (char *[]){env, "SPD_NO_AUTOSTART=1", NULL}, &out, &err,
		   (char *[]){"ping", NULL});
	ck_assert_msg(ex == 125 && has(err, "no operator token") &&
			  has(err, cfg) && !has(err, "Broken pipe"),
		      "spctl ping with no token: %d %s", ex, err);
	free(out), free(err), free(env), free(cfg);
	test_spd_stop_clean(&t);
}
END_TEST

/* The block of `spctl --help` that documents cmd: its lines from the one
 * naming it to the next command's (malloc'd). */
static char *help_block(const char *help, const char *cmd)
{
	char *out = calloc(1, strlen(help) + 1);
	const char *l = help;
	bool in = false;

	ck_assert_ptr_nonnull(out);
	while (*l) {
		size_t n = strcspn(l, "\n"), k = strlen(cmd);
		/* A command's first line: two spaces and a name. */
		bool first = n > 2 && l[0] == ' ' && l[1] == ' ' && l[2] != ' ';

		if (first)
			in = strncmp(l + 2, cmd, k) == 0 &&
			     (l[2 + k] == ' ' || l[2 + k] == '\n');
		if (in)
			strncat(out, l, n + 1);
		l += n + (l[n] == '\n');
	}
	return out;
}

/* Every option of every command, as its own usage names it, is in
 * `spctl --help` too (agent's --yes, acp's --cap and --yes were not). */
START_TEST(test_help_lists_every_option)
{
	static char *cmds[] = {
	    "ping",    "status",  "stop",   "journal",	 "doctor",  "run",
	    "agent",   "session", "policy", "approvals", "approve", "deny",
	    "secrets", "turn",	  "turns",  "mcp",	 "acp",
	};
	struct test_spd t;
	char *help = NULL, *err = NULL;

	test_spd_prepare(&t, NULL);
	ck_assert_int_eq(
	    spctl(&t, NULL, &help, &err, (char *[]){"--help", NULL}), 0);
	free(err);
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		/* deny shares approve's line ("approve ID | deny ID"). */
		char *u = NULL,
		     *block = help_block(
			 help, strcmp(cmds[i], "deny") ? cmds[i] : "approve");
		const char *p;

		ck_assert_int_eq(spctl(&t, NULL, &u, &err,
				       (char *[]){cmds[i], "--help", NULL}),
				 0);
		free(err);
		ck_assert_msg(block[0], "spctl --help has no %s", cmds[i]);
		for (p = u; (p = strstr(p, "--")); p += 2) {
			char opt[32];
			size_t n = strspn(p + 2, "abcdefghijklmnopqrstuvwxyz-");

			if (n == 0 || n + 3 > sizeof(opt))
				continue;
			snprintf(opt, sizeof(opt), "--%.*s", (int)n, p + 2);
			if (!strcmp(opt, "--json") || !strcmp(opt, "--help"))
				continue;
			ck_assert_msg(has(block, opt),
				      "spctl --help lacks %s %s:\n%s", cmds[i],
				      opt, block);
		}
		free(u);
		free(block);
	}
	free(help);
	test_spd_cleanup(&t);
}
END_TEST

START_TEST(test_sandboxd_help)
{
	char *sbx = test_prog("sandboxd");
	char *out = NULL, *err = NULL;
	int st = test_run((char *[]){sbx, "--help", NULL}, NULL, &out, &err);

	ck_assert_msg(exit_of(st) == 0 && has(out, "sandbox") &&
			  has(out, "spd starts it"),
		      "sandboxd --help: %d %s %s", st, out, err);
	free(out), free(err), free(sbx);
}
END_TEST

/* The ask of a --net proxy run says proxy: "network none" would have a
 * person grant what they think cannot reach anything. */
START_TEST(test_ask_says_network_proxy)
{
	struct test_spd t;
	char *out = NULL, *err = NULL, *ws, *wsopt;
	int ex;

	test_spd_prepare(&t, NULL);
	test_spd_start(&t);
	ck_assert(asprintf(&ws, "%s/ws", t.dir) > 0);
	test_make_repo(ws, "echo a > a.txt");
	ck_assert(asprintf(&wsopt, "%s", ws) > 0);
	ex = spctl(&t, NULL, &out, &err,
		   (char *[]){"run", "--workspace", wsopt, "--net", "proxy",
			      "--", "curl", "https://example.test/", NULL});
	ck_assert_msg(ex == 126 && has(err, "NEEDS-APPROVAL") &&
			  has(err, "network proxy") &&
			  !has(err, "network none"),
		      "the ask of a proxy run: %d %s", ex, err);
	free(out), free(err), free(ws), free(wsopt);
	test_spd_stop_clean(&t);
}
END_TEST

/* Right after an autostart spd answers before sandboxd's first probe:
 * spctl status says the layers are not known yet, not nothing.  A
 * sandboxd that starts slowly makes that moment long enough to see. */
START_TEST(test_status_while_probing)
{
	struct test_spd t;
	char *out = NULL, *err = NULL, *wrap, *sbx = test_prog("sandboxd"),
	     *script, *env;
	int ex;

	test_spd_prepare(&t, NULL);
	ck_assert(asprintf(&wrap, "%s/slow-sandboxd", t.dir) > 0);
	ck_assert(
	    asprintf(&script, "#!/bin/sh\nsleep 2\nexec %s \"$@\"\n", sbx) > 0);
	test_write_file(wrap, script);
	ck_assert_int_eq(chmod(wrap, 0700), 0);
	ck_assert(asprintf(&env, "SPD_SANDBOXD=%s", wrap) > 0);
	ex = spctl(&t, (char *[]){"SPD_NO_AUTOSTART=0", env, NULL}, &out, &err,
		   (char *[]){"status", NULL});
	ck_assert_msg(ex == 0 && has(out, "not known yet") &&
			  has(out, "probing"),
		      "the first spctl status: %d %s %s", ex, out, err);
	free(out), free(err);
	ex = spctl(&t, NULL, &out, &err, (char *[]){"stop", NULL});
	ck_assert_msg(ex == 0, "spctl stop: %s %s", out, err);
	free(out), free(err), free(wrap), free(sbx), free(script), free(env);
	test_spd_cleanup(&t);
}
END_TEST

/* spctl approvals --follow, running: its pid and its stdout's read end. */
struct follower {
	pid_t pid;
	int out;
	char buf[16384];
	size_t len;
};

static void follower_start(struct test_spd *t, struct follower *f)
{
	char *spctl = test_prog("spctl");
	int p[2];

	ck_assert_int_eq(pipe(p), 0);
	memset(f, 0, sizeof(*f));
	f->pid = fork();
	ck_assert_int_ge(f->pid, 0);
	if (f->pid == 0) {
		for (int i = 0; t->env[i]; i++)
			putenv(t->env[i]);
		dup2(p[1], STDOUT_FILENO);
		close(p[0]);
		close(p[1]);
		execl(spctl, spctl, "approvals", "--follow", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	f->out = p[0];
	free(spctl);
}

/* Wait up to 10 s for needle in what the follower printed. */
static bool follower_saw(struct follower *f, const char *needle)
{
	for (int waited = 0; waited < 10000; waited += 50) {
		struct pollfd pfd = {f->out, POLLIN, 0};
		ssize_t n;

		f->buf[f->len] = '\0';
		if (strstr(f->buf, needle))
			return true;
		if (poll(&pfd, 1, 50) == 1) {
			n = read(f->out, f->buf + f->len,
				 sizeof(f->buf) - 1 - f->len);
			if (n <= 0)
				return false;
			f->len += (size_t)n;
		}
	}
	return false;
}

static void follower_stop(struct follower *f)
{
	kill(f->pid, SIGTERM);
	waitpid(f->pid, NULL, 0);
	close(f->out);
}

/* An ask of an agent's run that does not wait (its session's token
 * tok); its approval id. */
static long ask(struct test_spd *t, const char *tok, const char *url)
{
	char params[512], *reply, *p;
	int fd = test_spd_connect(t);
	long id;

	snprintf(params, sizeof(params),
		 "{\"argv\":[\"curl\",\"%s\"],\"wait\":false}", url);
	reply = test_rpc_on(t, fd, tok, "cmd.run", params, 10000);
	close(fd);
	TEST_ASSERT_CODE(reply, "NEEDS-APPROVAL");
	p = strstr(reply, "\"approval\":");
	ck_assert_msg(p, "no approval id in %s", reply);
	id = strtol(p + strlen("\"approval\":"), NULL, 10);
	free(reply);
	return id;
}

/*
 * spctl approvals --follow shows an ask leaving the list, not only
 * arriving: granted, refused, withdrawn (its caller went away).
 */
START_TEST(test_follow_shows_decisions)
{
	struct test_spd t;
	struct follower f;
	char *out = NULL, *err = NULL, *ws, want[64], idtxt[32], *line,
	     params[4200], sid[TEST_SESSION_ID_LEN + 1],
	     tok[TEST_SESSION_TOKEN_LEN + 1];
	long id;
	int fd;

	test_spd_prepare(&t, NULL);
	test_spd_start(&t);
	ck_assert(asprintf(&ws, "%s/ws", t.dir) > 0);
	test_make_repo(ws, "echo a > a.txt");
	snprintf(params, sizeof(params),
		 "{\"repo\":\"%s\",\"feature\":\"follow\"}", ws);
	test_session_start(&t, params, sid, tok);
	follower_start(&t, &f);
	id = ask(&t, tok, "https://one.test/");
	snprintf(want, sizeof(want), "approval %ld  session", id);
	ck_assert_msg(follower_saw(&f, want), "the ask not shown: %s", f.buf);
	snprintf(idtxt, sizeof(idtxt), "%ld", id);
	ck_assert_int_eq(
	    spctl(&t, NULL, &out, &err, (char *[]){"approve", idtxt, NULL}), 0);
	free(out), free(err);
	snprintf(want, sizeof(want), "approval %ld granted", id);
	ck_assert_msg(follower_saw(&f, want), "the grant not shown: %s", f.buf);

	id = ask(&t, tok, "https://two.test/");
	snprintf(idtxt, sizeof(idtxt), "%ld", id);
	ck_assert_int_eq(
	    spctl(&t, NULL, &out, &err,
		  (char *[]){"deny", idtxt, "--why", "not today", NULL}),
	    0);
	free(out), free(err);
	snprintf(want, sizeof(want), "approval %ld refused", id);
	ck_assert_msg(follower_saw(&f, want) && follower_saw(&f, "not today"),
		      "the refusal not shown: %s", f.buf);

	/* A call that waits for a person, and goes away. */
	fd = test_spd_connect(&t);
	{
		char req[4096];
		int n = snprintf(
		    req, sizeof(req),
		    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"cmd.run\","
		    "\"params\":{\"token\":\"%s\","
		    "\"argv\":[\"curl\",\"https://three.test/\"]}}\n",
		    tok);
		test_send(fd, req, (size_t)n);
	}
	line = test_recv_line(fd, 10000);
	ck_assert_msg(has(line, "approval.requested"), "%s", line);
	id = strtol(strstr(line, "\"id\":") + 5, NULL, 10);
	free(line);
	close(fd);
	snprintf(want, sizeof(want), "approval %ld withdrawn", id);
	ck_assert_msg(follower_saw(&f, want), "the withdrawal not shown: %s",
		      f.buf);
	follower_stop(&f);
	free(ws);
	test_spd_stop_clean(&t);
}
END_TEST

/* A program under the host's /tmp is not in a run (its /tmp is private):
 * spctl says so, not only "No such file or directory". */
START_TEST(test_program_under_tmp_explained)
{
	struct test_spd t;
	char *out = NULL, *err = NULL, *ws, bin[] = "/tmp/spd-ux-bin-XXXXXX",
	     *prog;
	int ex;

	test_spd_prepare(&t, NULL);
	test_spd_start(&t);
	ck_assert(asprintf(&ws, "%s/ws", t.dir) > 0);
	test_make_repo(ws, "echo a > a.txt");
	ck_assert_ptr_nonnull(mkdtemp(bin));
	ck_assert(asprintf(&prog, "%s/agent-cli", bin) > 0);
	test_write_file(prog, "#!/bin/sh\necho ran\n");
	ck_assert_int_eq(chmod(prog, 0755), 0);
	ex = spctl(
	    &t, NULL, &out, &err,
	    (char *[]){"run", "--yes", "--workspace", ws, "--", prog, NULL});
	ck_assert_msg(ex == 127 && has(err, "command not found") &&
			  has(err, "under /tmp, which runs do not see") &&
			  !has(out, "ran"),
		      "a program under /tmp: %d %s %s", ex, out, err);
	free(out), free(err);
	test_rmrf(bin);
	free(prog), free(ws);
	test_spd_stop_clean(&t);
}
END_TEST

/*
 * An spd that lost its socket and does not let go of the journal (here
 * stopped with SIGSTOP): the new spd's refusal says the other's socket
 * was removed, not that both listen on the one path.
 */
START_TEST(test_runtime_dir_removed_old_spd_stuck)
{
	struct test_spd t;
	char *out = NULL, *err = NULL;
	pid_t old;
	int ex;

	test_spd_prepare(&t, NULL);
	test_spd_start(&t);
	old = t.pid;
	ck_assert_int_eq(kill(old, SIGSTOP), 0);
	test_rmrf(t.runtime);
	ex = spctl(&t, autostart, &out, &err, (char *[]){"ping", NULL});
	kill(old, SIGCONT);
	ck_assert_msg(ex == 125 && has(err, "was removed") &&
			  !has(err, "this one would listen on"),
		      "spctl while the old spd holds the journal: %d %s", ex,
		      err);
	free(out), free(err);
	/* Let go, the old spd notices its socket is gone and stops. */
	for (int i = 0; i < 300 && !gone(old); i++)
		usleep(100 * 1000);
	ck_assert_msg(gone(old), "the spd that lost its socket still runs");
	t.pid = 0;
	test_spd_cleanup(&t);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ux");
	TCase *tc = tcase_create("stop");
	SRunner *sr;
	int failed;

	signal(SIGPIPE, SIG_IGN);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_stop_stops_spd);
	tcase_add_test(tc, test_stale_pidfile_not_spd);
	tcase_add_test(tc, test_runtime_dir_removed);
	tcase_add_test(tc, test_runtime_dir_removed_old_spd_stuck);
	suite_add_tcase(s, tc);
	tc = tcase_create("mistakes");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_user_mistakes_exit_2);
	tcase_add_test(tc, test_no_token_says_so);
	tcase_add_test(tc, test_help_lists_every_option);
	tcase_add_test(tc, test_sandboxd_help);
	tcase_add_test(tc, test_ask_says_network_proxy);
	tcase_add_test(tc, test_status_while_probing);
	tcase_add_test(tc, test_follow_shows_decisions);
	tcase_add_test(tc, test_program_under_tmp_explained);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

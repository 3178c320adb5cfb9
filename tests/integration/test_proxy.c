/*
 * Network mode proxy (issue 17), against a real spd: a run whose only
 * way out is spd's HTTP proxy reaches an allowed host by name, over
 * CONNECT and plain HTTP, and nothing else — a denied host, a raw
 * address, a name resolving to loopback or to the cloud metadata
 * address, a non-HTTP protocol on the proxy's port and a direct socket
 * are each refused, and every decision is in the journal.  A host of an
 * ask-host rule waits for a person: approved, the connection goes
 * through; refused, or the run gone, it does not.
 *
 * The stand-in registry listens on 127.0.0.2 in the host's namespace;
 * spd's test resolver ([network] resolve, names under .test only) maps
 * the test names to it.
 */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <check.h>

#include "tests/lib/spdproc.h"
#include "tests/lib/testlib.h"

static struct test_spd T;
static char *WS;
static pid_t standin = -1;
static int standin_port;

static bool has(const char *hay, const char *needle)
{
	return hay && needle && strstr(hay, needle) != NULL;
}

/* A one-page HTTP server on 127.0.0.2, its port printed on stdout. */
static char standin_py[] =
    "import http.server, sys\n"
    "seen = []\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    def do_GET(self):\n"
    "        if self.path == '/seen':\n"
    "            b = ('seen:' + ' '.join(seen) + '\\n').encode()\n"
    "        else:\n"
    "            seen.append(self.path)\n"
    "            b = ('hello-from-standin host=%s path=%s\\n' % (\n"
    "                self.headers.get('Host'), self.path)).encode()\n"
    "        self.send_response(200)\n"
    "        self.send_header('Content-Length', str(len(b)))\n"
    "        self.end_headers(); self.wfile.write(b)\n"
    "    def log_message(self, *a): pass\n"
    "http.server.ThreadingHTTPServer.request_queue_size = 128\n"
    "s = http.server.ThreadingHTTPServer(('127.0.0.2', 0), H)\n"
    "print(s.server_address[1], flush=True)\n"
    "s.serve_forever()\n";

/* Start python3 with argv (after "python3"); its first line is the
 * port it listens on. */
static void standin_exec(char *const argv[])
{
	standin = test_python_standin(argv, &standin_port);
}

static void standin_start(void)
{
	char *argv[] = {"-c", standin_py, NULL};

	standin_exec(argv);
}

static void setup(void)
{
	static const char conf[] = "[network]\n"
				   "\tallow-host = registry.test\n"
				   "\tallow-host = *.wild.test\n"
				   "\tallow-host = evil.test\n"
				   "\tallow-host = meta.test\n"
				   "\tdeny-host = blocked.wild.test\n"
				   "\task-host = ask.test\n"
				   "\tallow-host = npm.test\n"
				   "\tresolve = npm.test:127.0.0.2\n"
				   "\tresolve = npm2.test:127.0.0.2\n"
				   "\tresolve = ask.test:127.0.0.2\n"
				   "\tallow-address = 127.0.0.2\n"
				   "\tresolve = registry.test:127.0.0.2\n"
				   "\tresolve = a.wild.test:127.0.0.2\n"
				   "\tresolve = blocked.wild.test:127.0.0.2\n"
				   "\tresolve = other.test:127.0.0.2\n"
				   "\tresolve = evil.test:127.0.0.1\n"
				   "\tresolve = meta.test:169.254.169.254\n";

	test_spd_prepare(&T, conf);
	test_spd_start(&T);
	WS = test_tmpdir("ws");
	standin = -1;
}

static void teardown(void)
{
	if (standin > 0) {
		kill(standin, SIGKILL);
		waitpid(standin, NULL, 0);
		standin = -1;
	}
	test_spd_stop_clean(&T);
	if (WS)
		test_rmrf(WS);
	free(WS);
	WS = NULL;
}

/* sh -c script in a proxy run, approved by the operator. */
static int run_proxy(const char *script, char **ret_out, char **ret_err)
{
	char *sc = strdup(script);
	char *args[] = {"run", "--workspace", WS,   "--yes", "--net", "proxy",
			"--",  "sh",	      "-c", sc,	     NULL};
	int st = test_spctl(&T, args, NULL, ret_out, ret_err);

	free(sc);

	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The proxy's journal rows ("kind|summary|detail" lines), once the
 * last one the test expects (needle) is in: spd answers a run before its
 * journal writer has committed every row of it. */
static char *journal_dump(const char *needle)
{
	return test_journal_until(&T,
				  "select kind, summary, detail from events "
				  "where kind like 'net.proxy%' order by id",
				  needle);
}

static bool usable(void)
{
	return access("/usr/bin/curl", X_OK) == 0 &&
	       access("/usr/bin/python3", X_OK) == 0 &&
	       access("/usr/bin/sqlite3", X_OK) == 0;
}

/* The allowed host answers through the proxy, by plain HTTP and through
 * a CONNECT tunnel, and a wildcard rule covers a name below it; the
 * upstream sees the host name, not the proxy's address. */
START_TEST(test_allowed_host_works)
{
	char script[1024], *out = NULL, *err = NULL, *j;

	if (!usable())
		TEST_SKIP("curl, python3 or sqlite3 is not installed");
	standin_start();
	snprintf(script, sizeof(script),
		 "echo \"proxy=$HTTP_PROXY git=$GIT_CONFIG_VALUE_0\"; "
		 "curl -sS http://registry.test:%d/plain; "
		 "curl -sS -p http://registry.test:%d/tunnel; "
		 "curl -sS http://a.wild.test:%d/wild",
		 standin_port, standin_port, standin_port);
	ck_assert_int_eq(run_proxy(script, &out, &err), 0);
	ck_assert_msg(has(out, "proxy=http://127.0.0.1:3128 "
			       "git=http://127.0.0.1:3128"),
		      "out %s", out);
	ck_assert_msg(has(out, "hello-from-standin host=registry.test:"),
		      "out %s err %s", out, err);
	ck_assert_msg(has(out, "path=/plain") && has(out, "path=/tunnel") &&
			  has(out, "path=/wild"),
		      "out %s err %s", out, err);
	j = journal_dump("net.proxy.close|a.wild.test:");
	ck_assert_msg(has(j, "\"decision\":\"allow\"") &&
			  has(j, "net.proxy.close") &&
			  has(j, "\"address\":\"127.0.0.2\""),
		      "journal %s", j);
	ck_assert_msg(!has(j, "\"bytes_in\":0,") && !has(j, "\"bytes_out\":0,"),
		      "journal %s", j);
	free(j);
	free(out);
	free(err);
}
END_TEST

/* Each way out that is not an allowed host by name is refused with a
 * 403 and a reason, and journaled. */
START_TEST(test_refusals)
{
	static const char script[] =
	    "for u in http://blocked.wild.test/ http://other.test/ "
	    "http://93.184.216.34/ http://evil.test/ http://meta.test/ "
	    "http://169.254.169.254/latest/meta-data/; do "
	    "  printf '%s ' \"$u\"; curl -sS -w ' code=%{http_code}\\n' "
	    "\"$u\"; done; "
	    "curl -sS -p https://evil.test/ 2>&1 | head -1; "
	    "python3 -c '\n"
	    "import socket\n"
	    "s = socket.create_connection((\"127.0.0.1\", 3128))\n"
	    "s.sendall(b\"SSH-2.0-OpenSSH_9.0\\r\\n\")\n"
	    "print(\"raw-protocol:\", s.recv(200).split(b\"\\r\\n\")[0])\n"
	    "for a in ((\"127.0.0.2\", 80), (\"93.184.216.34\", 80)):\n"
	    "    try:\n"
	    "        socket.create_connection(a, timeout=5)\n"
	    "        print(\"DIRECT-CONNECTED\", a)\n"
	    "    except OSError as e:\n"
	    "        print(\"direct-refused\", a, e.errno)\n"
	    "'";
	char *out = NULL, *err = NULL, *j;

	if (!usable())
		TEST_SKIP("curl, python3 or sqlite3 is not installed");
	ck_assert_int_eq(run_proxy(script, &out, &err), 0);
	ck_assert_msg(has(out, "blocked.wild.test is refused by [network] "
			       "deny-host\n code=403"),
		      "out %s err %s", out, err);
	ck_assert_msg(has(out, "other.test is not in [network] allow-host"),
		      "out %s", out);
	ck_assert_msg(has(out, "93.184.216.34 is a raw address"), "out %s",
		      out);
	ck_assert_msg(has(out, "169.254.169.254 is a raw address"), "out %s",
		      out);
	ck_assert_msg(has(out, "evil.test resolves to 127.0.0.1, a loopback "
			       "address"),
		      "out %s", out);
	ck_assert_msg(has(out, "meta.test resolves to 169.254.169.254, a "
			       "link-local address"),
		      "out %s", out);
	ck_assert_msg(has(out, "CONNECT tunnel failed, response 403") ||
			  has(out, "403"),
		      "out %s", out);
	ck_assert_msg(has(out, "raw-protocol: b'HTTP/1.1 400"), "out %s err %s",
		      out, err);
	ck_assert_msg(!has(out, "DIRECT-CONNECTED") &&
			  has(out, "direct-refused ('127.0.0.2'") &&
			  has(out, "direct-refused ('93.184.216.34'"),
		      "out %s err %s", out, err);
	ck_assert_msg(!has(out, "code=200"), "out %s", out);
	j = journal_dump("not an HTTP proxy request");
	ck_assert_msg(
	    has(j, "blocked.wild.test:80") && has(j, "other.test:80") &&
		has(j, "93.184.216.34:80") && has(j, "evil.test:443") &&
		has(j, "meta.test:80") && has(j, "not an HTTP proxy request") &&
		!has(j, "\"decision\":\"allow\""),
	    "journal %s", j);
	free(j);
	free(out);
	free(err);
}
END_TEST

/* What the stand-in was asked for (its /seen page, read from outside
 * any run). */
static char *standin_seen(void)
{
	char url[64], *out = NULL;
	char *argv[] = {"curl", "-sS", url, NULL};

	snprintf(url, sizeof(url), "http://127.0.0.2:%d/seen", standin_port);
	ck_assert_int_eq(test_run(argv, NULL, &out, NULL), 0);
	return out;
}

/* A proxy run in a thread: the test decides its ask meanwhile. */
struct bg_run {
	const char *script;
	char *out, *err;
	int rc;
	pthread_t th;
};

static void *bg_run_main(void *data)
{
	struct bg_run *b = data;

	b->rc = run_proxy(b->script, &b->out, &b->err);
	return NULL;
}

/* Poll approval.list until a waiting ask for a connection to host
 * appears; its id.  The rule and what the person is shown are checked. */
static long wait_for_connect_ask(const char *host)
{
	int fd = test_spd_connect(&T);

	for (int i = 0; i < 2000; i++) {
		char *r =
		    test_rpc_on(&T, fd, NULL, "approval.list", NULL, 10000);
		json_t *j = json_loads(r ? r : "", 0, NULL);
		json_t *pend =
		    json_object_get(json_object_get(j, "result"), "pending");
		long id = -1;

		for (size_t k = 0; k < json_array_size(pend); k++) {
			json_t *e = json_array_get(pend, k);
			json_t *o = json_object_get(e, "object");

			if (json_is_true(json_object_get(e, "waiting")) &&
			    !strcmp(
				json_string_value(json_object_get(o, "host"))
				    ?: "",
				host)) {
				ck_assert_str_eq(
				    json_string_value(
					json_object_get(e, "rule")),
				    "ask.net.host");
				ck_assert_str_eq(
				    json_string_value(
					json_object_get(o, "kind")),
				    "connect");
				id = (long)json_integer_value(
				    json_object_get(e, "id"));
			}
		}
		json_decref(j);
		free(r);
		if (id > 0) {
			close(fd);
			return id;
		}
		usleep(10000);
	}
	ck_abort_msg("no ask for %s appeared", host);
	return -1;
}

static void decide(long id, bool approve)
{
	char params[128], *r;
	int fd = test_spd_connect(&T);

	snprintf(params, sizeof(params),
		 "{\"id\":%ld,\"approve\":%s,\"why\":\"not today\"}", id,
		 approve ? "true" : "false");
	r = test_rpc_on(&T, fd, NULL, "approval.decide", params, 10000);
	TEST_ASSERT_CODE(r, "ok");
	free(r);
	close(fd);
}

/* An ask-host connection waits for a person: approved, curl gets the
 * stand-in's page; in the next run, refused, curl gets a 403 naming why
 * and the stand-in never sees the request.  The operator's spctl
 * approvals shows what is asked. */
START_TEST(test_ask_host_waits_for_a_person)
{
	char script[512], script2[512], *seen, *j, *out = NULL;
	char *args[] = {"approvals", NULL};
	struct bg_run b = {.script = script}, b2 = {.script = script2};
	long id;

	if (!usable())
		TEST_SKIP("curl, python3 or sqlite3 is not installed");
	standin_start();
	snprintf(script, sizeof(script),
		 "curl -sS -w ' code=%%{http_code}\\n' "
		 "http://ask.test:%d/approved",
		 standin_port);
	ck_assert_int_eq(pthread_create(&b.th, NULL, bg_run_main, &b), 0);
	id = wait_for_connect_ask("ask.test");
	test_spctl(&T, args, NULL, &out, NULL);
	ck_assert_msg(has(out, "connect 'ask.test' port ") ||
			  has(out, "connect ask.test port "),
		      "spctl approvals: %s", out);
	free(out);
	decide(id, true);
	pthread_join(b.th, NULL);
	/* spctl run said what the run waits for. */
	ck_assert_msg(has(b.err, "the run waits for a person: approval ") &&
			  has(b.err, "connect ask.test port ") &&
			  has(b.err, "spctl approve "),
		      "err %s", b.err);
	ck_assert_msg(
	    b.rc == 0 && has(b.out, "hello-from-standin host=ask.test:") &&
		has(b.out, "path=/approved") && has(b.out, "code=200"),
	    "rc %d out %s err %s", b.rc, b.out, b.err);

	/* The grant was for that run only: the next run asks again. */
	snprintf(script2, sizeof(script2),
		 "curl -sS -w ' code=%%{http_code}\\n' "
		 "http://ask.test:%d/denied",
		 standin_port);
	ck_assert_int_eq(pthread_create(&b2.th, NULL, bg_run_main, &b2), 0);
	id = wait_for_connect_ask("ask.test");
	decide(id, false);
	pthread_join(b2.th, NULL);
	ck_assert_msg(has(b2.out, "code=403") &&
			  has(b2.out, "ask.test port ") &&
			  has(b2.out, "was not approved: refused by a person: "
				      "not today"),
		      "out %s err %s", b2.out, b2.err);
	seen = standin_seen();
	ck_assert_msg(has(seen, "/approved") && !has(seen, "/denied"),
		      "the stand-in saw: %s", seen);
	j = test_journal_until(&T,
			       "select kind, summary, detail from events "
			       "where kind like 'approval.%' or kind like "
			       "'net.proxy%' order by id",
			       "approval.refused");
	ck_assert_msg(has(j, "approval.requested|ask.net.host") &&
			  has(j, "approval.granted|ask.net.host") &&
			  has(j, "approval.refused|ask.net.host") &&
			  has(j, "\"decision\":\"ask\""),
		      "journal %s", j);
	free(j);
	free(seen);
	free(b.out);
	free(b.err);
	free(b2.out);
	free(b2.err);
}
END_TEST

/* A run that ends while its connection waits withdraws the ask: no
 * approval is left for a person to grant to nobody. */
START_TEST(test_ask_withdrawn_when_the_run_ends)
{
	char script[256], *j, *out = NULL, *err = NULL;
	char *args[] = {"run",	 "--workspace", WS,  "--yes", "--net",
			"proxy", "--timeout",	"2", "--",    "sh",
			"-c",	 script,	NULL};

	if (!usable())
		TEST_SKIP("curl, python3 or sqlite3 is not installed");
	snprintf(script, sizeof(script), "curl -sS http://ask.test:9/never");
	test_spctl(&T, args, NULL, &out, &err);
	j = test_journal_until(&T,
			       "select kind, summary from events where kind "
			       "like 'approval.%' order by id",
			       "approval.withdrawn");
	ck_assert_msg(has(j, "approval.requested|ask.net.host") &&
			  has(j, "approval.withdrawn|ask.net.host"),
		      "journal %s out %s err %s", j, out, err);
	free(j);
	free(out);
	free(err);
	j = test_journal(&T, "select count(*) from events where kind = "
			     "'approval.granted' and summary like "
			     "'ask.net.host%'");
	ck_assert_msg(j && atoi(j) == 0, "%s", j);
	free(j);
}
END_TEST

/* A project's .spd.conf tightens spd.conf for its runs: its allow-host
 * narrows the operator's list (a.wild.test, which spd.conf allows, is
 * refused), and a host spd.conf does not allow stays refused however
 * the project names it, said in the 403 and journaled. */
START_TEST(test_project_only_tightens)
{
	char script[1024], path[PATH_MAX], *out = NULL, *err = NULL, *j;

	if (!usable())
		TEST_SKIP("curl, python3 or sqlite3 is not installed");
	standin_start();
	snprintf(path, sizeof(path), "%s/.spd.conf", WS);
	test_write_file(path, "[network]\n"
			      "\tallow-host = registry.test\n"
			      "\tallow-host = other.test\n"
			      "\tallow-address = 127.0.0.1\n");
	snprintf(script, sizeof(script),
		 "for h in registry.test a.wild.test other.test; do "
		 "  printf '%%s ' $h; curl -sS -w ' code=%%{http_code}\\n' "
		 "  http://$h:%d/project; done",
		 standin_port);
	ck_assert_int_eq(run_proxy(script, &out, &err), 0);
	ck_assert_msg(has(out, "registry.test hello-from-standin") &&
			  has(out, "path=/project\n code=200"),
		      "out %s err %s", out, err);
	ck_assert_msg(has(out, "a.wild.test is not in the project's [network] "
			       "allow-host (.spd.conf)\n code=403"),
		      "out %s err %s", out, err);
	ck_assert_msg(has(out, "other.test is in the project's .spd.conf but "
			       "not in spd.conf's [network] allow-host") &&
			  !has(out, "host=other.test"),
		      "out %s err %s", out, err);
	j = journal_dump("net.proxy|other.test:");
	ck_assert_msg(
	    has(j, "net.proxy.project") &&
		has(j, "network.allow-host = other.test (spd.conf neither "
		       "allows nor asks for it") &&
		has(j, "network.allow-address = 127.0.0.1 (only spd.conf may "
		       "set it)") &&
		has(j, "a.wild.test:"),
	    "journal %s", j);
	free(j);
	free(out);
	free(err);
}
END_TEST

/* A real npm ci of a package-lock'd project, through the proxy, against
 * an npm registry stand-in reached by name: the package lands in
 * node_modules and the journal shows the host.  The same project with a
 * registry host spd.conf does not allow fails, and gets nothing. */
START_TEST(test_npm_ci_through_the_proxy)
{
	char script[PATH_MAX], mod[PATH_MAX], *out = NULL, *err = NULL, *j;
	char *seen, *ws2, *standin_path;
	char *argv[] = {NULL, WS, "npm.test", NULL};
	int rc;

	if (!usable())
		TEST_SKIP("curl, python3 or sqlite3 is not installed");
	if (access("/usr/bin/npm", X_OK) != 0 ||
	    access("/usr/bin/node", X_OK) != 0)
		TEST_SKIP("npm or node is not installed in /usr/bin");
	if (asprintf(&standin_path, "%s/../tests/lib/npm_registry_standin.py",
		     test_build_dir()) < 0)
		ck_abort();
	argv[0] = standin_path;
	standin_exec(argv);
	snprintf(script, sizeof(script),
		 "command -v npm || echo 'npm-not-in-the-run'; cd %s && "
		 "npm ci --no-progress 2>&1; echo npm-exit=$?",
		 WS);
	rc = run_proxy(script, &out, &err);
	snprintf(mod, sizeof(mod), "%s/node_modules/spd-tiny/index.js", WS);
	ck_assert_msg(rc == 0 && has(out, "npm-exit=0") &&
			  access(mod, F_OK) == 0,
		      "rc %d out %s err %s", rc, out, err);
	j = journal_dump("net.proxy.close|npm.test:");
	ck_assert_msg(has(j, "npm.test:") && has(j, "\"host\":\"npm.test\"") &&
			  has(j, "\"decision\":\"allow\""),
		      "journal %s", j);
	seen = standin_seen();
	ck_assert_msg(has(seen, "/spd-tiny/-/spd-tiny-1.0.0.tgz"), "seen %s",
		      seen);
	free(seen);
	free(j);
	free(out);
	free(err);

	/* The same project, its registry a host spd.conf does not allow. */
	kill(standin, SIGKILL);
	waitpid(standin, NULL, 0);
	/* Inside the workspace: a run sees no other directory of /tmp. */
	if (asprintf(&ws2, "%s/second", WS) < 0 || mkdir(ws2, 0755) < 0)
		ck_abort_msg("cannot make %s", WS);
	argv[1] = ws2;
	argv[2] = "npm2.test";
	standin_exec(argv);
	snprintf(script, sizeof(script),
		 "cd %s && npm ci --no-progress 2>&1; echo npm-exit=$?", ws2);
	rc = run_proxy(script, &out, &err);
	snprintf(mod, sizeof(mod), "%s/node_modules/spd-tiny", ws2);
	ck_assert_msg(!has(out, "npm-exit=0") && has(out, "npm-exit=") &&
			  access(mod, F_OK) != 0,
		      "rc %d out %s err %s", rc, out, err);
	j = journal_dump("npm2.test is not in");
	ck_assert_msg(has(j, "npm2.test is not in [network] allow-host"),
		      "journal %s out %s", j, out);
	seen = standin_seen();
	ck_assert_msg(!has(seen, ".tgz"), "seen %s", seen);
	free(seen);
	free(j);
	free(out);
	free(err);
	free(ws2);
	free(standin_path);
}
END_TEST

/* A run that makes thousands of refused connections adds a bounded
 * number of journal rows: the first refusal of each kind as it happens,
 * the rest counted in one row per kind when the run ends. */
START_TEST(test_refusals_aggregate)
{
	static const char script[] =
	    "python3 -c '\n"
	    "import socket\n"
	    "n = 0\n"
	    "for i in range(3000):\n"
	    "    s = socket.create_connection((\"127.0.0.1\", 3128))\n"
	    "    s.sendall(b\"GET http://other.test/ HTTP/1.1\\r\\n\\r\\n\")\n"
	    "    if s.recv(100).startswith(b\"HTTP/1.1 403\"):\n"
	    "        n += 1\n"
	    "    s.close()\n"
	    "print(\"refused\", n)\n"
	    "'";
	char *out = NULL, *err = NULL, *j;
	size_t rows = 0;

	if (!usable())
		TEST_SKIP("curl, python3 or sqlite3 is not installed");
	ck_assert_int_eq(run_proxy(script, &out, &err), 0);
	ck_assert_msg(has(out, "refused 3000"), "out %s err %s", out, err);
	j = journal_dump("net.proxy.refused");
	for (const char *p = j; p && (p = strchr(p, '\n')); p++)
		rows++;
	ck_assert_msg(rows <= 4, "%zu rows: %.2000s", rows, j);
	ck_assert_msg(has(j, "net.proxy|other.test:80|") &&
			  has(j, "net.proxy.refused|other.test:80|") &&
			  has(j, "\"count\":2999"),
		      "journal %.2000s", j);
	free(j);
	free(out);
	free(err);
}
END_TEST

/* spd again with short proxy timeouts. */
static void restart_with_timeouts(void)
{
	test_spd_stop_clean(&T);
	test_spd_prepare(&T, "[network]\n"
			     "\tallow-host = registry.test\n"
			     "\tresolve = registry.test:127.0.0.2\n"
			     "\tallow-address = 127.0.0.2\n"
			     "[limits]\n"
			     "\tproxy-head-timeout = 1\n"
			     "\tproxy-idle-timeout = 1\n");
	test_spd_start(&T);
}

/* A head that never ends is refused at its deadline (408), a tunnel
 * that passes nothing is closed when idle, and a head whose lines end in
 * bare LFs is served at once.  Each socket read has a bound of a minute
 * only so that the old behaviour (waiting until the run ends) fails the
 * test instead of hanging it; nothing here measures time. */
START_TEST(test_head_and_idle_timeouts)
{
	char script[2048], *out = NULL, *err = NULL, *j;

	if (!usable())
		TEST_SKIP("curl, python3 or sqlite3 is not installed");
	restart_with_timeouts();
	standin_start();
	snprintf(
	    script, sizeof(script),
	    "python3 -c '\n"
	    "import socket\n"
	    "def conn():\n"
	    "    s = socket.create_connection((\"127.0.0.1\", 3128))\n"
	    "    s.settimeout(60)\n"
	    "    return s\n"
	    "def read_all(s):\n"
	    "    b = b\"\"\n"
	    "    try:\n"
	    "        while True:\n"
	    "            k = s.recv(4096)\n"
	    "            if not k:\n"
	    "                return b + b\"<eof>\"\n"
	    "            b += k\n"
	    "    except socket.timeout:\n"
	    "        return b + b\"<hung>\"\n"
	    "s = conn()\n"
	    "s.sendall(b\"CONNECT registry.test:443 HTTP/1.1\\r\\nHost: "
	    "x\\r\\n\")\n"
	    "print(\"unfinished:\", read_all(s))\n"
	    "s = conn()\n"
	    "s.sendall(b\"GET http://registry.test:%d/barelf HTTP/1.1\\n"
	    "User-Agent: t\\n\\n\")\n"
	    "print(\"barelf:\", read_all(s))\n"
	    "s = conn()\n"
	    "s.sendall(b\"CONNECT registry.test:%d HTTP/1.1\\r\\n\\r\\n\")\n"
	    "print(\"idle:\", read_all(s))\n"
	    "'",
	    standin_port, standin_port);
	ck_assert_int_eq(run_proxy(script, &out, &err), 0);
	ck_assert_msg(has(out, "unfinished: b'HTTP/1.1 408 Request Timeout") &&
			  has(out, "proxy-head-timeout") && !has(out, "<hung>"),
		      "out %s err %s", out, err);
	ck_assert_msg(has(out, "hello-from-standin host=registry.test:") &&
			  has(out, "path=/barelf"),
		      "out %s err %s", out, err);
	ck_assert_msg(has(out, "idle: b'HTTP/1.1 200 Connection established"
			       "\\r\\n\\r\\n<eof>'"),
		      "out %s err %s", out, err);
	j = journal_dump("\"idle\":true");
	ck_assert_msg(has(j, "\"idle\":true"), "journal %s", j);
	free(j);
	free(out);
	free(err);
}
END_TEST

/* The test resolver is a test aid only: a real name is refused. */
START_TEST(test_resolve_only_test_names)
{
	struct test_spd t2;
	char *err = test_spd_refuses(&t2, "[network]\n\tresolve = "
					  "registry.npmjs.org:127.0.0.2\n");

	ck_assert_msg(has(err, "network.resolve"), "err %s", err);
	free(err);
	test_spd_cleanup(&t2);
}
END_TEST

/* spctl doctor tells the operator the mode exists, what it needs and
 * which hosts spd.conf lets it reach. */
START_TEST(test_doctor_mentions_proxy)
{
	char *args[] = {"doctor", NULL};
	char *out = NULL;

	test_spctl(&T, args, NULL, &out, NULL);
	ck_assert_msg(has(out, "network proxy: spctl run --net proxy") &&
			  has(out, "allow-host registry.test, *.wild.test, "
				   "evil.test, meta.test and 1 more") &&
			  has(out, "ask-host (a person decides) ask.test") &&
			  has(out, "deny-host blocked.wild.test"),
		      "%s", out);
	free(out);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("proxy");
	TCase *tc = tcase_create("proxy");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_allowed_host_works);
	tcase_add_test(tc, test_refusals);
	tcase_add_test(tc, test_refusals_aggregate);
	tcase_add_test(tc, test_head_and_idle_timeouts);
	tcase_add_test(tc, test_ask_host_waits_for_a_person);
	tcase_add_test(tc, test_ask_withdrawn_when_the_run_ends);
	tcase_add_test(tc, test_project_only_tightens);
	tcase_add_test(tc, test_npm_ci_through_the_proxy);
	tcase_add_test(tc, test_resolve_only_test_names);
	tcase_add_test(tc, test_doctor_mentions_proxy);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

/*
 * Service credentials in the proxy (issue 42), against a real spd: a
 * host with a [credential] is terminated by spd, which adds the token
 * the run never has; every other CONNECT is still a plain tunnel; the
 * CA's key is out of every run's reach; [network "HOST"] rules decide
 * on method and path.
 *
 * The stand-in is an HTTPS server on 127.0.0.2 whose certificate comes
 * from a test CA made here; spd trusts that CA for names under .test
 * ([network] test-ca) and maps the names to 127.0.0.2 ([network]
 * resolve).  It answers 200 to the real token and 401 to anything else,
 * and logs each request's Authorization headers to a file read from
 * outside any run.
 */
#include <errno.h>
#include <jansson.h>
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

#define TOKEN "ghs_StandInT0ken4f7c2a9e81d3b6"

static struct test_spd T;
static char *WS, *CERTS;
static pid_t standin = -1;
static int standin_port;

static bool has(const char *hay, const char *needle)
{
	return hay && needle && strstr(hay, needle) != NULL;
}

static int count(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; p && (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static char standin_py[] =
    "import http.server, ssl, sys, base64, subprocess, os, json, io\n"
    "import tarfile, hashlib\n"
    "cert, key, log, token = sys.argv[1:5]\n"
    "gitroot = sys.argv[5] if len(sys.argv) > 5 else None\n"
    "basic = 'Basic ' + base64.b64encode(('x-access-token:' + "
    "token).encode()).decode()\n"
    "def mktgz():\n"
    "    raw = io.BytesIO()\n"
    "    with tarfile.open(fileobj=raw, mode='w:gz') as t:\n"
    "        for n, d in (('package/package.json', json.dumps({'name':\n"
    "                '@private/hello', 'version': '1.0.0',\n"
    "                'main': 'index.js'})),\n"
    "                ('package/index.js', 'module.exports = '\n"
    "                 '\"hello from the private registry\";\\n')):\n"
    "            i = tarfile.TarInfo(n); d = d.encode(); i.size = len(d)\n"
    "            t.addfile(i, io.BytesIO(d))\n"
    "    return raw.getvalue()\n"
    "tgz = mktgz()\n"
    "integrity = 'sha512-' + base64.b64encode(\n"
    "    hashlib.sha512(tgz).digest()).decode()\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    protocol_version = 'HTTP/1.1'\n"
    "    def body(self):\n"
    "        if self.headers.get('Transfer-Encoding', '') == 'chunked':\n"
    "            b = b''\n"
    "            while True:\n"
    "                n = int(self.rfile.readline().split(b';')[0], 16)\n"
    "                if n == 0:\n"
    "                    self.rfile.readline(); return b\n"
    "                b += self.rfile.read(n); self.rfile.readline()\n"
    "        n = int(self.headers.get('Content-Length') or 0)\n"
    "        return self.rfile.read(n)\n"
    "    def git(self):\n"
    "        a = self.headers.get_all('Authorization') or []\n"
    "        b = self.body()\n"
    "        with open(log, 'a') as f:\n"
    "            f.write('%s %s auth=%s\\n' % (self.command, self.path,\n"
    "                    'basic-ok' if a == [basic] else '|'.join(a)))\n"
    "        if a != [basic]:\n"
    "            self.send_response(401)\n"
    "            self.send_header('WWW-Authenticate', 'Basic realm=x')\n"
    "            self.send_header('Content-Length', '0')\n"
    "            self.end_headers(); return\n"
    "        p, _, q = self.path[4:].partition('?')\n"
    "        env = dict(os.environ, GIT_PROJECT_ROOT=gitroot,\n"
    "                   GIT_HTTP_EXPORT_ALL='1', PATH_INFO=p,\n"
    "                   QUERY_STRING=q, REQUEST_METHOD=self.command,\n"
    "                   REMOTE_USER='agent', REMOTE_ADDR='127.0.0.1',\n"
    "                   CONTENT_TYPE=self.headers.get('Content-Type', ''),\n"
    "                   CONTENT_LENGTH=str(len(b)))\n"
    "        out = subprocess.run(['git', 'http-backend'], input=b,\n"
    "                             env=env, capture_output=True).stdout\n"
    "        head, _, rest = out.partition(b'\\r\\n\\r\\n')\n"
    "        hs = [l.split(b': ', 1) for l in head.split(b'\\r\\n') if l]\n"
    "        st = [int(v.split()[0]) for k, v in hs if k == b'Status']\n"
    "        self.send_response(st[0] if st else 200)\n"
    "        for k, v in hs:\n"
    "            if k != b'Status':\n"
    "                self.send_header(k.decode(), v.decode())\n"
    "        self.send_header('Content-Length', str(len(rest)))\n"
    "        self.end_headers(); self.wfile.write(rest)\n"
    "    def npm(self):\n"
    "        a = self.headers.get_all('Authorization') or []\n"
    "        with open(log, 'a') as f:\n"
    "            f.write('%s %s host=%s auth=%s\\n' % (self.command,\n"
    "                    self.path, self.headers.get('Host'),\n"
    "                    'bearer-ok' if a == ['Bearer ' + token] else\n"
    "                    '|'.join(a) or '-'))\n"
    "        if a != ['Bearer ' + token]:\n"
    "            b = b'{\"error\":\"authentication required\"}'\n"
    "            self.send_response(401)\n"
    "        elif self.path.endswith('.tgz'):\n"
    "            b = tgz; self.send_response(200)\n"
    "        elif self.path in ('/@private%2fhello', '/@private/hello'):\n"
    "            u = 'https://%s/@private/hello/-/hello-1.0.0.tgz' % \\\n"
    "                self.headers.get('Host')\n"
    "            b = json.dumps({'name': '@private/hello',\n"
    "                'dist-tags': {'latest': '1.0.0'}, 'versions': {\n"
    "                '1.0.0': {'name': '@private/hello', 'version': '1.0.0',\n"
    "                'dist': {'tarball': u, 'integrity': integrity}}}}\n"
    "                ).encode(); self.send_response(200)\n"
    "        else:\n"
    "            b = b'{}'; self.send_response(404)\n"
    "        self.send_header('Content-Type', 'application/json')\n"
    "        self.send_header('Content-Length', str(len(b)))\n"
    "        self.end_headers(); self.wfile.write(b)\n"
    "    def any(self):\n"
    "        if self.path.startswith('/git/'):\n"
    "            return self.git()\n"
    "        if self.headers.get('Host', '').startswith('npm.'):\n"
    "            return self.npm()\n"
    "        a = self.headers.get_all('Authorization') or []\n"
    "        n = int(self.headers.get('Content-Length') or 0)\n"
    "        self.rfile.read(n)\n"
    "        with open(log, 'a') as f:\n"
    "            f.write('%s %s host=%s auth=%s\\n' % (self.command,\n"
    "                    self.path, self.headers.get('Host'),\n"
    "                    '|'.join(a) or '-'))\n"
    "        ok = a == ['Bearer ' + token]\n"
    "        b = (('user=standin %s %s\\n' % (self.command, self.path))\n"
    "             if ok else 'no credentials\\n').encode()\n"
    "        self.send_response(200 if ok else 401)\n"
    "        self.send_header('Content-Length', str(len(b)))\n"
    "        self.end_headers(); self.wfile.write(b)\n"
    "    do_GET = do_POST = do_DELETE = do_PUT = any\n"
    "    def log_message(self, *a): pass\n"
    "s = http.server.ThreadingHTTPServer(('127.0.0.2', 0), H)\n"
    "c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n"
    "c.load_cert_chain(cert, key)\n"
    "s.socket = c.wrap_socket(s.socket, server_side=True)\n"
    "print(s.server_address[1], flush=True)\n"
    "s.serve_forever()\n";

static void standin_start(void)
{
	char *cert, *key, *log;

	ck_assert(asprintf(&cert, "%s/srv.pem", CERTS) > 0);
	ck_assert(asprintf(&key, "%s/srv.key", CERTS) > 0);
	ck_assert(asprintf(&log, "%s/seen.log", CERTS) > 0);
	{
		char *args[] = {"-c", standin_py, cert,	 key,
				log,  TOKEN,	  CERTS, NULL};

		standin = test_python_standin(args, &standin_port);
	}
	free(cert);
	free(key);
	free(log);
}

static bool usable(void)
{
	return access("/usr/bin/curl", X_OK) == 0 &&
	       access("/usr/bin/python3", X_OK) == 0 &&
	       access("/usr/bin/openssl", X_OK) == 0 &&
	       access("/usr/bin/sqlite3", X_OK) == 0;
}

/* The test CA and the stand-in's certificate (both .test names). */
static void make_certs(void)
{
	CERTS = test_visible_tmpdir("certs");
	ck_assert_int_eq(
	    test_sh(NULL,
		    "cd '%s' && "
		    "openssl req -x509 -newkey ec -pkeyopt "
		    "ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem "
		    "-days 2 -subj /CN=spd-test-standin-ca "
		    "-addext basicConstraints=critical,CA:TRUE "
		    "-addext keyUsage=critical,keyCertSign 2>/dev/null && "
		    "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 "
		    "-nodes -keyout srv.key -out srv.csr "
		    "-subj /CN=api.stand-in.test 2>/dev/null && "
		    "printf 'subjectAltName=DNS:api.stand-in.test,"
		    "DNS:plain.stand-in.test,DNS:rules.stand-in.test,"
		    "DNS:npm.stand-in.test\\n"
		    "basicConstraints=CA:FALSE\\n"
		    "keyUsage=digitalSignature\\nextendedKeyUsage=serverAuth\\n"
		    "subjectKeyIdentifier=hash\\n"
		    "authorityKeyIdentifier=keyid\\n' > ext && "
		    "openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key "
		    "-CAcreateserial -out srv.pem -days 2 -extfile ext "
		    "2>/dev/null && chmod 644 ca.pem srv.pem srv.key && "
		    "chmod 755 .",
		    CERTS),
	    0);
}

/* spd with [network] for the stand-in's names, then extra (the
 * credential or rules under test); the token in spd's environment file
 * when with_token. */
static void start(const char *extra, bool with_token)
{
	char conf[4096], *env;

	make_certs();
	snprintf(conf, sizeof(conf),
		 "[network]\n"
		 "\tallow-host = *.stand-in.test\n"
		 "\tresolve = api.stand-in.test:127.0.0.2\n"
		 "\tresolve = plain.stand-in.test:127.0.0.2\n"
		 "\tresolve = rules.stand-in.test:127.0.0.2\n"
		 "\tresolve = npm.stand-in.test:127.0.0.2\n"
		 "\tresolve = wrong.stand-in.test:127.0.0.2\n"
		 "\tallow-address = 127.0.0.2\n"
		 "\ttest-ca = %s/ca.pem\n"
		 "\tca-bundle = %s/run-trusts.pem\n"
		 "%s",
		 CERTS, CERTS, extra);
	test_spd_prepare(&T, conf);
	if (with_token) {
		ck_assert(asprintf(&env, "%s/environment", T.config) > 0);
		test_write_file(env, "STANDIN_TOKEN=" TOKEN "\n");
		free(env);
	}
	test_spd_start(&T);
	WS = test_tmpdir("ws");
	standin_start();
}

static void setup(void)
{
	standin = -1;
	WS = CERTS = NULL;
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
	if (CERTS)
		test_rmrf(CERTS);
	free(WS);
	free(CERTS);
	WS = CERTS = NULL;
}

static const char cred_conf[] =
    "[credential \"standin\"]\n"
    "\thost = api.stand-in.test\n"
    "\thost = wrong.stand-in.test\n"
    "\theader = Authorization: Bearer ${STANDIN_TOKEN}\n";

/* sh -c script in a proxy run, approved by the operator; its exit
 * status. */
static int run_proxy(const char *script, char **ret_out, char **ret_err)
{
	char *sc = strdup(script);
	char *args[] = {"run", "--workspace", WS,   "--yes", "--net", "proxy",
			"--",  "sh",	      "-c", sc,	     NULL};
	int st = test_spctl(&T, args, NULL, ret_out, ret_err);

	free(sc);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *ws_file(const char *name)
{
	char *p, *text;

	ck_assert(asprintf(&p, "%s/%s", WS, name) > 0);
	text = test_read_file(p);
	free(p);
	return text;
}

static char *seen(void)
{
	char *p, *text;

	ck_assert(asprintf(&p, "%s/seen.log", CERTS) > 0);
	text = test_read_file(p);
	free(p);
	return text;
}

/* The credential reaches the stand-in for its host, in place of the one
 * the run sent, and nowhere else: not in the run's environment, files or
 * output, not in the journal or spd's log. */
START_TEST(test_credential_added_by_spd)
{
	char script[2048], *out = NULL, *err = NULL, *envf, *f1, *f2, *verb, *s,
			   *j, *log, *p;

	if (!usable())
		TEST_SKIP("curl, python3, openssl or sqlite3 is not installed");
	start(cred_conf, true);
	snprintf(script, sizeof(script),
		 "env > env.txt; "
		 "curl -sS -w ' code=%%{http_code}\\n' "
		 "https://api.stand-in.test:%d/user > one.txt 2>&1; "
		 "curl -sS -w ' code=%%{http_code}\\n' -H 'Authorization: "
		 "Bearer made-up-by-the-run' "
		 "https://api.stand-in.test:%d/user?x=1 > two.txt 2>&1; "
		 "curl -sv https://api.stand-in.test:%d/again > verbose.txt "
		 "2>&1; "
		 "cat one.txt two.txt",
		 standin_port, standin_port, standin_port);
	ck_assert_int_eq(run_proxy(script, &out, &err), 0);
	f1 = ws_file("one.txt");
	f2 = ws_file("two.txt");
	envf = ws_file("env.txt");
	verb = ws_file("verbose.txt");
	ck_assert_msg(has(f1, "user=standin GET /user\n code=200"), "one %s",
		      f1);
	ck_assert_msg(has(f2, "user=standin GET /user?x=1\n code=200"),
		      "two %s", f2);
	/* The run talked TLS to spd, with a certificate of spd's CA. */
	ck_assert_msg(has(verb, "issuer: O=spd; CN=spd proxy CA"), "verbose %s",
		      verb);
	ck_assert_msg(
	    has(envf, "SSL_CERT_FILE=") && has(envf, "NODE_EXTRA_CA_CERTS=") &&
		has(envf, "REQUESTS_CA_BUNDLE=") &&
		has(envf, "GIT_SSL_CAINFO=") && has(envf, "CARGO_HTTP_CAINFO="),
	    "env %s", envf);
	s = seen();
	/* Each request carried the real token once: the run's own header
	 * was replaced, not doubled. */
	ck_assert_msg(count(s, "auth=Bearer " TOKEN "\n") == 3, "seen %s", s);
	ck_assert_msg(!has(s, "made-up-by-the-run"), "seen %s", s);
	ck_assert_msg(has(s, "host=api.stand-in.test:"), "seen %s", s);
	ck_assert_msg(!has(envf, TOKEN) && !has(f1, TOKEN) && !has(f2, TOKEN) &&
			  !has(verb, TOKEN) && !has(out, TOKEN) &&
			  !has(err, TOKEN),
		      "the token reached the run");
	j = test_journal_until(&T,
			       "select kind, summary, detail from events "
			       "order by id",
			       "net.proxy.close|api.stand-in.test:");
	ck_assert_msg(has(j, "net.proxy.request") &&
			  has(j, "\"credential\":\"standin\"") &&
			  has(j, "\"path\":\"/user\""),
		      "journal %s", j);
	ck_assert_msg(!has(j, TOKEN), "the token is in the journal");
	ck_assert(asprintf(&p, "%s/spd.log", T.state) > 0);
	log = test_read_file(p);
	ck_assert_msg(!has(log, TOKEN), "the token is in spd's log");
	free(p);
	free(log);
	free(j);
	free(s);
	free(f1);
	free(f2);
	free(envf);
	free(verb);
	free(out);
	free(err);
}
END_TEST

/* A host without a credential or rule is still a plain tunnel: the run
 * sees the stand-in's own certificate, and no token is added.  A host
 * with a credential whose server's certificate does not name it gets
 * no request (nor token) at all: 502. */
START_TEST(test_other_hosts_plain_tunnel)
{
	char script[2048], *out = NULL, *err = NULL, *verb, *s;

	if (!usable())
		TEST_SKIP("curl, python3, openssl or sqlite3 is not installed");
	start(cred_conf, true);
	snprintf(script, sizeof(script),
		 "curl -sv --cacert '%s/ca.pem' -w ' code=%%{http_code}\\n' "
		 "https://plain.stand-in.test:%d/user > verbose.txt 2>&1; "
		 "curl -sS https://wrong.stand-in.test:%d/user 2>&1",
		 CERTS, standin_port, standin_port);
	ck_assert_int_eq(run_proxy(script, &out, &err), 56);
	ck_assert_msg(has(out, "502"), "out %s err %s", out, err);
	verb = ws_file("verbose.txt");
	ck_assert_msg(has(verb, "issuer: CN=spd-test-standin-ca") &&
			  has(verb, "code=401"),
		      "verbose %s", verb);
	s = seen();
	ck_assert_msg(has(s, "GET /user host=plain.stand-in.test:") &&
			  has(s, "auth=-\n") && !has(s, TOKEN) &&
			  !has(s, "wrong.stand-in.test"),
		      "seen %s", s);
	free(s);
	free(verb);
	free(out);
	free(err);
}
END_TEST

/* Without the credential configured the same request is a tunnel to a
 * server that refuses it, and the run is told of no CA of spd's. */
START_TEST(test_without_credential_401)
{
	char script[2048], *out = NULL, *err = NULL;

	if (!usable())
		TEST_SKIP("curl, python3, openssl or sqlite3 is not installed");
	start("", true);
	snprintf(script, sizeof(script),
		 "echo \"cafile=${SSL_CERT_FILE:-none}\"; "
		 "curl -sS --cacert '%s/ca.pem' -w ' code=%%{http_code}\\n' "
		 "https://api.stand-in.test:%d/user",
		 CERTS, standin_port);
	ck_assert_int_eq(run_proxy(script, &out, &err), 0);
	ck_assert_msg(has(out, "cafile=none") &&
			  has(out, "no credentials\n code=401"),
		      "out %s err %s", out, err);
	free(out);
	free(err);
}
END_TEST

/* The CA's key is in spd's state dir, which no run sees; the bundle a
 * run trusts is readable.  The control, outside the sandbox, reads the
 * key. */
START_TEST(test_ca_key_out_of_reach)
{
	char script[2048], *out = NULL, *err = NULL, *key, *p;
	struct stat st;

	if (!usable())
		TEST_SKIP("curl, python3, openssl or sqlite3 is not installed");
	start(cred_conf, true);
	snprintf(script, sizeof(script),
		 "if cat '%s/proxy-ca/ca.key' 2>/dev/null | grep -q KEY; "
		 "then echo KEY-READ; else echo key-unreadable; fi; "
		 "grep -c 'BEGIN CERTIFICATE' \"$SSL_CERT_FILE\" | "
		 "sed 's/^/bundle-certs=/'; "
		 "curl -sS -o /dev/null -w 'code=%%{http_code}\\n' "
		 "https://api.stand-in.test:%d/user",
		 T.state, standin_port);
	ck_assert_int_eq(run_proxy(script, &out, &err), 0);
	ck_assert_msg(has(out, "key-unreadable") && !has(out, "KEY-READ") &&
			  has(out, "bundle-certs=") && has(out, "code=200"),
		      "out %s err %s", out, err);
	/* The control: the key is there, spd's own, mode 0600. */
	ck_assert(asprintf(&p, "%s/proxy-ca/ca.key", T.state) > 0);
	key = test_read_file(p);
	ck_assert_msg(has(key, "PRIVATE KEY"), "no key at %s", p);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0600);
	free(p);
	free(key);
	free(out);
	free(err);
}
END_TEST

static const char rules_conf[] =
    "[credential \"standin\"]\n"
    "\thost = api.stand-in.test\n"
    "\theader = Authorization: Bearer ${STANDIN_TOKEN}\n"
    "[network \"api.stand-in.test\"]\n"
    "\tdeny = DELETE /**\n"
    "\tallow = GET /repos/**\n"
    "\tallow = POST /repos/o/r/pulls\n"
    "[network \"plain.stand-in.test\"]\n"
    "\tallow = GET /ok\n";

/* [network "HOST"] rules: the first match decides, a request none
 * matches is refused, each refusal a 403 with a JSON body naming host,
 * method, path and rule, journaled; refused requests never reach the
 * server. */
START_TEST(test_request_rules)
{
	char script[4096], *out = NULL, *err = NULL, *s, *j;
	int p = 0;

	if (!usable())
		TEST_SKIP("curl, python3, openssl or sqlite3 is not installed");
	start(rules_conf, true);
	p = standin_port;
	snprintf(script, sizeof(script),
		 "u=https://api.stand-in.test:%d; "
		 "curl -sS -X DELETE -w ' code=%%{http_code}\n' $u/repos/o/r; "
		 "curl -sS -w ' code=%%{http_code}\n' $u/admin/users; "
		 "curl -sS --path-as-is -w ' code=%%{http_code}\n' "
		 "$u/repos/../admin; "
		 "curl -sS -w ' code=%%{http_code}\n' $u/repos/o/r/issues; "
		 "curl -sS -d title=t -w ' code=%%{http_code}\n' "
		 "$u/repos/o/r/pulls; "
		 "curl -sS -d title=t -w ' code=%%{http_code}\n' "
		 "$u/repos/o/r/forks; "
		 "curl -sS -w ' code=%%{http_code}\n' "
		 "http://plain.stand-in.test:%d/nope",
		 p, p);
	ck_assert_int_eq(run_proxy(script, &out, &err), 0);
	ck_assert_msg(
	    has(out, "{\"error\":\"refused by spd's proxy\",\"host\":"
		     "\"api.stand-in.test\",\"method\":\"DELETE\",\"path\":"
		     "\"/repos/o/r\",\"rule\":\"deny = DELETE /**\"") &&
		has(out, "\"method\":\"GET\",\"path\":\"/admin/users\","
			 "\"rule\":\"(no rule matches)\""),
	    "out %s err %s", out, err);
	ck_assert_msg(has(out, "\"path\":\"/repos/../admin\""), "out %s", out);
	ck_assert_msg(
	    has(out, "user=standin GET /repos/o/r/issues\n code=200") &&
		has(out, "user=standin POST /repos/o/r/pulls\n "
			 "code=200"),
	    "out %s err %s", out, err);
	ck_assert_msg(count(out, "code=403") == 5, "out %s", out);
	ck_assert_msg(has(out, "GET /nope to plain.stand-in.test: no [network "
			       "\"plain.stand-in.test\"] allow rule matches"),
		      "out %s", out);
	s = seen();
	ck_assert_msg(!has(s, "DELETE") && !has(s, "admin") &&
			  !has(s, "forks") && !has(s, "/nope") &&
			  has(s, "POST /repos/o/r/pulls"),
		      "seen %s", s);
	j = test_journal_until(&T,
			       "select kind, summary, detail from events "
			       "where kind like 'net.proxy%' order by id",
			       "/repos/o/r/forks");
	ck_assert_msg(has(j, "DELETE /repos/o/r: [network") &&
			  has(j, "deny = DELETE /**") &&
			  has(j, "GET /admin/users: no [network") &&
			  has(j, "\"decision\":\"allow\"") &&
			  has(j, "\"rule\":\"allow = GET /repos/**\""),
		      "journal %s", j);
	free(j);
	free(s);
	free(out);
	free(err);
}
END_TEST

static const char git_conf[] = "[credential \"git\"]\n"
			       "\thost = api.stand-in.test\n"
			       "\tbasic = x-access-token:${STANDIN_TOKEN}\n"
			       "[policy]\n"
			       "\tallow = python3 -c\n"
			       "[approvals]\n"
			       "\ttimeout = 5\n";

/* The agent's run: argv in its worktree, --net proxy; its exit code.
 * Through python3: the proxy's check is what holds when a push comes
 * from anything else than git itself (a script, a tool), which this
 * stands for. */
static int agent_run(const char *token, char *const argv[], char **ret_out,
		     char **ret_err)
{
	char *tok, *args[24] = {"run",
				"--net",
				"proxy",
				"--",
				"python3",
				"-c",
				"import subprocess, sys; "
				"sys.exit(subprocess.call(sys.argv[1:]))"};
	char *env[2];
	size_t n = 7;
	int st;

	ck_assert(asprintf(&tok, "SPD_SESSION_TOKEN=%s", token) > 0);
	env[0] = tok;
	env[1] = NULL;
	for (size_t i = 0; argv[i] && n < 23; i++)
		args[n++] = argv[i];
	args[n] = NULL;
	st = test_spctl(&T, args, env, ret_out, ret_err);
	free(tok);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The agent's own command, argv, in its worktree with --net proxy (no
 * wrapper: spd's policy judges argv itself); its exit code. */
static int agent_cmd(const char *token, char *const argv[], char **ret_out,
		     char **ret_err)
{
	char *tok, *args[24] = {"run", "--net", "proxy", "--"};
	char *env[2];
	size_t n = 4;
	int st;

	ck_assert(asprintf(&tok, "SPD_SESSION_TOKEN=%s", token) > 0);
	env[0] = tok;
	env[1] = NULL;
	for (size_t i = 0; argv[i] && n < 23; i++)
		args[n++] = argv[i];
	args[n] = NULL;
	st = test_spctl(&T, args, env, ret_out, ret_err);
	free(tok);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *bare_ref(const char *ref)
{
	char *out = NULL;

	test_sh(&out, "git -C '%s/r.git' rev-parse --verify -q '%s'", CERTS,
		ref);
	return out ? out : strdup("");
}

/* git push through the proxy: the session's branch goes through with the
 * credential spd adds; a push to another branch, a force push and a
 * deletion are refused before the server sees them, and nothing
 * changes there. */
START_TEST(test_git_push_only_session_branch)
{
	char *repo, *wt, id[TEST_SESSION_ID_LEN + 1],
	    tok[TEST_SESSION_TOKEN_LEN + 1], url[256], *params,
	    *out = NULL, *err = NULL, *before, *after, *head = NULL, *j;
	int rc;

	if (!usable() || access("/usr/lib/git-core/git-http-backend", X_OK))
		TEST_SKIP("curl, python3, openssl, sqlite3 or git-http-backend "
			  "is not installed");
	start(git_conf, true);
	repo = test_tmpdir("repo");
	test_make_repo(repo, "echo a > a.txt");
	ck_assert_int_eq(test_sh(NULL,
				 "git clone -q --bare '%s' '%s/r.git' && "
				 "git -C '%s/r.git' config http.receivepack "
				 "true",
				 repo, CERTS, CERTS),
			 0);
	ck_assert(asprintf(&params, "{\"repo\":\"%s\",\"feature\":\"feat\"}",
			   repo) > 0);
	test_session_start(&T, params, id, tok);
	free(params);
	ck_assert(asprintf(&wt, "%s/worktrees/%s", T.state, id) > 0);
	/* The agent's commit on its branch (made here: the push is what is
	 * under test). */
	ck_assert_int_eq(test_sh(&head,
				 "cd '%s' && echo b > b.txt && git add b.txt "
				 "&& git -c user.name=a -c user.email=a@a "
				 "commit -qm b && git rev-parse HEAD",
				 wt),
			 0);
	snprintf(url, sizeof(url), "https://api.stand-in.test:%d/git/r.git",
		 standin_port);

	rc = agent_run(
	    tok,
	    (char *[]){"git", "push", url, "HEAD:refs/heads/spd/feat", NULL},
	    &out, &err);
	after = bare_ref("refs/heads/spd/feat");
	ck_assert_msg(rc == 0 && strcmp(after, head) == 0,
		      "rc %d out %s err %s remote %s", rc, out, err, after);
	free(after);
	free(out);
	free(err);

	/* Another branch: refused, main unchanged. */
	before = bare_ref("refs/heads/main");
	rc = agent_run(
	    tok, (char *[]){"git", "push", url, "HEAD:refs/heads/main", NULL},
	    &out, &err);
	after = bare_ref("refs/heads/main");
	ck_assert_msg(rc != 0 && strcmp(before, after) == 0 && has(err, "403"),
		      "rc %d out %s err %s", rc, out, err);
	free(before);
	free(after);
	free(out);
	free(err);

	/* A fast-forward of the branch: through. */
	free(head);
	head = NULL;
	ck_assert_int_eq(test_sh(&head,
				 "cd '%s' && echo c > c.txt && git add c.txt "
				 "&& git -c user.name=a -c user.email=a@a "
				 "commit -qm c && git rev-parse HEAD",
				 wt),
			 0);
	rc = agent_run(
	    tok,
	    (char *[]){"git", "push", url, "HEAD:refs/heads/spd/feat", NULL},
	    &out, &err);
	after = bare_ref("refs/heads/spd/feat");
	ck_assert_msg(rc == 0 && strcmp(after, head) == 0,
		      "rc %d out %s err %s remote %s", rc, out, err, after);
	free(after);
	free(out);
	free(err);

	/* A force push: history rewritten, the remote's tip not an
	 * ancestor. */
	ck_assert_int_eq(test_sh(NULL,
				 "cd '%s' && git reset -q --hard HEAD~1 && "
				 "echo d > d.txt && git add d.txt && "
				 "git -c user.name=a -c user.email=a@a "
				 "commit -qm d",
				 wt),
			 0);
	rc = agent_run(tok,
		       (char *[]){"git", "push", "-f", url,
				  "HEAD:refs/heads/spd/feat", NULL},
		       &out, &err);
	after = bare_ref("refs/heads/spd/feat");
	ck_assert_msg(rc != 0 && strcmp(after, head) == 0,
		      "rc %d out %s err %s remote %s", rc, out, err, after);
	free(after);
	free(out);
	free(err);

	/* A deletion. */
	rc = agent_run(
	    tok, (char *[]){"git", "push", url, ":refs/heads/spd/feat", NULL},
	    &out, &err);
	after = bare_ref("refs/heads/spd/feat");
	ck_assert_msg(rc != 0 && strcmp(after, head) == 0,
		      "rc %d out %s err %s remote %s", rc, out, err, after);
	free(after);
	free(out);
	free(err);

	j = test_journal_until(&T,
			       "select kind, summary, detail from events "
			       "where kind like 'net.proxy%' order by id",
			       "deleting refs/heads/spd/feat");
	ck_assert_msg(has(j, "\"refs\":[\"refs/heads/spd/feat\"]") &&
			  has(j, "a push to refs/heads/main: this session may "
				 "push only to refs/heads/spd/feat") &&
			  has(j, "not a fast-forward of the branch") &&
			  has(j, "deleting refs/heads/spd/feat is refused"),
		      "journal %s", j);
	ck_assert_msg(!has(j, TOKEN), "journal %s", j);
	free(j);
	free(head);
	free(wt);
	test_rmrf(repo);
	free(repo);
}
END_TEST

/* The agent's own git push (the real git client in the sandbox, no
 * wrapper): spd's policy lets it through to a host spd terminates, where
 * the proxy lets only the session's branch be fast-forwarded; a push to
 * a host spd only tunnels is refused by the policy, before any byte. */
START_TEST(test_agent_git_push)
{
	char *repo, *wt, id[TEST_SESSION_ID_LEN + 1],
	    tok[TEST_SESSION_TOKEN_LEN + 1], url[256], plain[256], *params,
	    *out = NULL, *err = NULL, *main_before, *after, *head = NULL, *s;
	int rc;

	if (!usable() || access("/usr/lib/git-core/git-http-backend", X_OK))
		TEST_SKIP("curl, python3, openssl, sqlite3 or git-http-backend "
			  "is not installed");
	start(git_conf, true);
	repo = test_tmpdir("repo");
	test_make_repo(repo, "echo a > a.txt");
	ck_assert_int_eq(test_sh(NULL,
				 "git clone -q --bare '%s' '%s/r.git' && "
				 "git -C '%s/r.git' config http.receivepack "
				 "true",
				 repo, CERTS, CERTS),
			 0);
	ck_assert(asprintf(&params, "{\"repo\":\"%s\",\"feature\":\"feat\"}",
			   repo) > 0);
	test_session_start(&T, params, id, tok);
	free(params);
	ck_assert(asprintf(&wt, "%s/worktrees/%s", T.state, id) > 0);
	ck_assert_int_eq(test_sh(&head,
				 "cd '%s' && echo b > b.txt && git add b.txt "
				 "&& git -c user.name=a -c user.email=a@a "
				 "commit -qm b && git rev-parse HEAD",
				 wt),
			 0);
	snprintf(url, sizeof(url), "https://api.stand-in.test:%d/git/r.git",
		 standin_port);
	snprintf(plain, sizeof(plain),
		 "https://plain.stand-in.test:%d/git/r.git", standin_port);
	main_before = bare_ref("refs/heads/main");

	/* The session's branch: through, and on the server. */
	rc = agent_cmd(
	    tok,
	    (char *[]){"git", "push", url, "HEAD:refs/heads/spd/feat", NULL},
	    &out, &err);
	after = bare_ref("refs/heads/spd/feat");
	ck_assert_msg(rc == 0 && strcmp(after, head) == 0,
		      "rc %d out %s err %s remote %s", rc, out, err, after);
	free(after);
	free(out);
	free(err);

	/* main: refused by the proxy (the policy let git run). */
	rc = agent_cmd(
	    tok, (char *[]){"git", "push", url, "HEAD:refs/heads/main", NULL},
	    &out, &err);
	after = bare_ref("refs/heads/main");
	ck_assert_msg(rc != 0 && strcmp(main_before, after) == 0 &&
			  has(err, "403") && !has(err, "POLICY-DENIED"),
		      "rc %d out %s err %s", rc, out, err);
	free(after);
	free(out);
	free(err);

	/* A force push of rewritten history, and a deletion: refused, the
	 * branch as it was. */
	ck_assert_int_eq(test_sh(NULL,
				 "cd '%s' && git reset -q --hard HEAD~1 && "
				 "echo d > d.txt && git add d.txt && "
				 "git -c user.name=a -c user.email=a@a "
				 "commit -qm d",
				 wt),
			 0);
	rc = agent_cmd(tok,
		       (char *[]){"git", "push", "--force", url,
				  "HEAD:refs/heads/spd/feat", NULL},
		       &out, &err);
	after = bare_ref("refs/heads/spd/feat");
	ck_assert_msg(rc != 0 && strcmp(after, head) == 0 && has(err, "403"),
		      "rc %d out %s err %s remote %s", rc, out, err, after);
	free(after);
	free(out);
	free(err);
	rc = agent_cmd(
	    tok, (char *[]){"git", "push", url, ":refs/heads/spd/feat", NULL},
	    &out, &err);
	after = bare_ref("refs/heads/spd/feat");
	ck_assert_msg(rc != 0 && strcmp(after, head) == 0 && has(err, "403"),
		      "rc %d out %s err %s remote %s", rc, out, err, after);
	free(after);
	free(out);
	free(err);

	/* A host spd only tunnels: the policy refuses the push; the server
	 * never hears of it. */
	rc = agent_cmd(
	    tok,
	    (char *[]){"git", "push", plain, "HEAD:refs/heads/spd/feat", NULL},
	    &out, &err);
	ck_assert_msg(rc != 0 && has(err, "POLICY-DENIED") &&
			  has(err, "deny.git.remote"),
		      "rc %d out %s err %s", rc, out, err);
	free(out);
	free(err);
	after = bare_ref("refs/heads/spd/feat");
	ck_assert_str_eq(after, head);
	free(after);
	after = bare_ref("refs/heads/main");
	ck_assert_str_eq(after, main_before);
	free(after);
	s = seen();
	ck_assert_msg(!has(s, "plain.stand-in.test") && !has(s, TOKEN),
		      "seen %s", s);
	free(s);
	free(main_before);
	free(head);
	free(wt);
	test_rmrf(repo);
	free(repo);
}
END_TEST

/* A credential's push-ref, push-force and push-delete widen what a
 * session's push may do on its hosts: here main too, a force push and a
 * deletion land on the server; a ref no push-ref names is still
 * refused. */
START_TEST(test_push_configured)
{
	char conf[1024], *repo, *wt, id[TEST_SESSION_ID_LEN + 1],
	    tok[TEST_SESSION_TOKEN_LEN + 1], url[256], *params,
	    *out = NULL, *err = NULL, *after, *head = NULL;
	int rc;

	if (!usable() || access("/usr/lib/git-core/git-http-backend", X_OK))
		TEST_SKIP("curl, python3, openssl, sqlite3 or git-http-backend "
			  "is not installed");
	snprintf(conf, sizeof(conf),
		 "%s\tpush-ref = session\n\tpush-ref = refs/heads/main\n"
		 "\tpush-force = true\n\tpush-delete = true\n",
		 "[credential \"git\"]\n"
		 "\thost = api.stand-in.test\n"
		 "\tbasic = x-access-token:${STANDIN_TOKEN}\n");
	start(conf, true);
	repo = test_tmpdir("repo");
	test_make_repo(repo, "echo a > a.txt");
	ck_assert_int_eq(test_sh(NULL,
				 "git clone -q --bare '%s' '%s/r.git' && "
				 "git -C '%s/r.git' config http.receivepack "
				 "true",
				 repo, CERTS, CERTS),
			 0);
	ck_assert(asprintf(&params, "{\"repo\":\"%s\",\"feature\":\"feat\"}",
			   repo) > 0);
	test_session_start(&T, params, id, tok);
	free(params);
	ck_assert(asprintf(&wt, "%s/worktrees/%s", T.state, id) > 0);
	snprintf(url, sizeof(url), "https://api.stand-in.test:%d/git/r.git",
		 standin_port);
	ck_assert_int_eq(test_sh(&head,
				 "cd '%s' && echo b > b.txt && git add b.txt "
				 "&& git -c user.name=a -c user.email=a@a "
				 "commit -qm b && git rev-parse HEAD",
				 wt),
			 0);
	rc =
	    agent_cmd(tok,
		      (char *[]){"git", "push", url, "HEAD:refs/heads/spd/feat",
				 "HEAD:refs/heads/main", NULL},
		      &out, &err);
	after = bare_ref("refs/heads/main");
	ck_assert_msg(rc == 0 && strcmp(after, head) == 0,
		      "rc %d out %s err %s main %s", rc, out, err, after);
	free(after);
	free(out);
	free(err);
	free(head);
	head = NULL;

	/* A force push of rewritten history. */
	ck_assert_int_eq(test_sh(&head,
				 "cd '%s' && git reset -q --hard HEAD~1 && "
				 "echo d > d.txt && git add d.txt && "
				 "git -c user.name=a -c user.email=a@a "
				 "commit -qm d && git rev-parse HEAD",
				 wt),
			 0);
	rc = agent_cmd(tok,
		       (char *[]){"git", "push", "--force", url,
				  "HEAD:refs/heads/spd/feat", NULL},
		       &out, &err);
	after = bare_ref("refs/heads/spd/feat");
	ck_assert_msg(rc == 0 && strcmp(after, head) == 0,
		      "rc %d out %s err %s remote %s", rc, out, err, after);
	free(after);
	free(out);
	free(err);

	/* Another branch: no push-ref names it. */
	rc = agent_cmd(
	    tok, (char *[]){"git", "push", url, "HEAD:refs/heads/other", NULL},
	    &out, &err);
	after = bare_ref("refs/heads/other");
	ck_assert_msg(rc != 0 && !after[0] && has(err, "403"),
		      "rc %d out %s err %s", rc, out, err);
	free(after);
	free(out);
	free(err);

	/* A deletion. */
	rc = agent_cmd(
	    tok, (char *[]){"git", "push", url, ":refs/heads/spd/feat", NULL},
	    &out, &err);
	after = bare_ref("refs/heads/spd/feat");
	ck_assert_msg(rc == 0 && !after[0], "rc %d out %s err %s remote %s", rc,
		      out, err, after);
	free(after);
	free(out);
	free(err);
	after = test_journal_until(&T,
				   "select kind, summary, detail from events "
				   "where kind like 'net.proxy%' order by id",
				   "no push-ref of [credential \"git\"]");
	ck_assert_msg(has(after, "a push to refs/heads/other: no push-ref"),
		      "journal %s", after);
	free(after);
	free(head);
	free(wt);
	test_rmrf(repo);
	free(repo);
}
END_TEST

/* A session asks for a rule (policy.propose) after a 403 that says how;
 * a person approves it; the next request of the session's runs passes,
 * spd never restarted.  Journaled. */
START_TEST(test_propose_rule)
{
	char conf[2048], *repo, id[TEST_SESSION_ID_LEN + 1],
	    tok[TEST_SESSION_TOKEN_LEN + 1], url[256], *params,
	    *out = NULL, *err = NULL, *r, *j;
	json_t *reply;
	long approval;
	struct stat st;
	int fd;

	if (!usable())
		TEST_SKIP("curl, python3, openssl or sqlite3 is not installed");
	snprintf(conf, sizeof(conf), "%s%s", rules_conf,
		 "[policy]\n\tallow = python3 -c\n"
		 "[approvals]\n\ttimeout = 5\n");
	start(conf, true);
	repo = test_tmpdir("repo");
	test_make_repo(repo, "echo a > a.txt");
	ck_assert(
	    asprintf(&params, "{\"repo\":\"%s\",\"feature\":\"p\"}", repo) > 0);
	test_session_start(&T, params, id, tok);
	free(params);
	snprintf(url, sizeof(url), "https://api.stand-in.test:%d/admin/users",
		 standin_port);

	/* No rule matches: 403, naming how to ask. */
	ck_assert_int_eq(
	    agent_run(tok,
		      (char *[]){"curl", "-sS", "-w", " code=%{http_code}\n",
				 url, NULL},
		      &out, &err),
	    0);
	ck_assert_msg(has(out,
			  "\"ask\":{\"method\":\"policy.propose\","
			  "\"params\":{\"host\":\"api.stand-in.test\","
			  "\"method\":\"GET\",\"path\":\"/admin/users\"}}") &&
			  has(out, "code=403"),
		      "out %s err %s", out, err);
	free(out);
	free(err);

	/* The operator cannot propose; a host spd does not terminate
	 * cannot be proposed for. */
	fd = test_spd_connect(&T);
	r = test_rpc_on(&T, fd, NULL, "policy.propose",
			"{\"host\":\"api.stand-in.test\",\"method\":\"GET\","
			"\"path\":\"/admin/**\"}",
			10000);
	TEST_ASSERT_CODE(r, "BAD-REQUEST");
	free(r);
	r = test_rpc_on(&T, fd, tok, "policy.propose",
			"{\"host\":\"rules.stand-in.test\",\"method\":\"GET\","
			"\"path\":\"/x\"}",
			10000);
	TEST_ASSERT_CODE(r, "BAD-REQUEST");
	free(r);
	r = test_rpc_on(&T, fd, tok, "policy.propose",
			"{\"host\":\"api.stand-in.test\",\"method\":\"GET\","
			"\"path\":\"/admin/**\"}",
			10000);
	reply = json_loads(r ? r : "", 0, NULL);
	approval = (long)json_integer_value(
	    json_object_get(json_object_get(reply, "result"), "approval"));
	ck_assert_msg(approval > 0, "reply %s", r);
	json_decref(reply);
	free(r);
	ck_assert(asprintf(&params, "{\"id\":%ld,\"approve\":true}", approval) >
		  0);
	r = test_rpc_on(&T, fd, NULL, "approval.decide", params, 10000);
	TEST_ASSERT_CODE(r, "ok");
	free(r);
	free(params);
	close(fd);

	/* The next request passes, the same spd. */
	ck_assert_int_eq(
	    agent_run(tok,
		      (char *[]){"curl", "-sS", "-w", " code=%{http_code}\n",
				 url, NULL},
		      &out, &err),
	    0);
	ck_assert_msg(has(out, "user=standin GET /admin/users\n code=200"),
		      "out %s err %s", out, err);
	free(out);
	free(err);

	/* The person's decision outlives spd: restarted, the rule still
	 * holds for the session (kept in the state dir, 0600). */
	ck_assert_int_eq(test_spd_stop(&T), 0);
	ck_assert(asprintf(&params, "%s/proxy-grants.json", T.state) > 0);
	r = test_read_file(params);
	ck_assert_msg(has(r, "\"method\":\"GET\",\"path\":\"/admin/**\""),
		      "saved %s", r);
	ck_assert_int_eq(stat(params, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0600);
	free(r);
	free(params);
	test_spd_start(&T);
	ck_assert_int_eq(
	    agent_run(tok,
		      (char *[]){"curl", "-sS", "-w", " code=%{http_code}\n",
				 url, NULL},
		      &out, &err),
	    0);
	ck_assert_msg(has(out, "user=standin GET /admin/users\n code=200"),
		      "after the restart: out %s err %s", out, err);
	free(out);
	free(err);
	j = test_journal_until(&T,
			       "select kind, summary, detail from events "
			       "where kind like 'net.proxy%' order by id",
			       "approved for the session");
	ck_assert_msg(has(j, "net.proxy.rule|api.stand-in.test allow = GET "
			     "/admin/**") &&
			  has(j, "\"decision\":\"allow\"") &&
			  has(j, "approved for the session (policy.propose)"),
		      "journal %s", j);
	free(j);
	test_rmrf(repo);
	free(repo);
}
END_TEST

/* spctl approve --always: the rule a session proposed (spctl policy
 * propose) goes into spd.conf too, appended with the rest of the file
 * byte for byte (its comments kept); the session has it at once, and
 * after a restart every session does.  A host spd.conf has no rules for
 * is refused (one rule would close it to all else), the ask still
 * pending. */
START_TEST(test_propose_always)
{
	char conf[2048], *repo, id[TEST_SESSION_ID_LEN + 1],
	    tok[TEST_SESSION_TOKEN_LEN + 1], id2[TEST_SESSION_ID_LEN + 1],
	    tok2[TEST_SESSION_TOKEN_LEN + 1], url[256], *params, *cpath,
	    *before, *after, *out = NULL, *err = NULL, *envv[2];
	long approval = 0;
	int rc;

	if (!usable())
		TEST_SKIP("curl, python3, openssl or sqlite3 is not installed");
	snprintf(conf, sizeof(conf),
		 "# the operator's own words, kept\n%s"
		 "[credential \"other\"] ; a credential-only host\n"
		 "\thost = only.stand-in.test\n"
		 "\theader = Authorization: Bearer ${STANDIN_TOKEN}\n"
		 "[policy]\n\tallow = python3 -c\n"
		 "[approvals]\n\ttimeout = 5",
		 rules_conf);
	start(conf, true);
	ck_assert(asprintf(&cpath, "%s/spd.conf", T.config) > 0);
	before = test_read_file(cpath);
	repo = test_tmpdir("repo");
	test_make_repo(repo, "echo a > a.txt");
	ck_assert(
	    asprintf(&params, "{\"repo\":\"%s\",\"feature\":\"p\"}", repo) > 0);
	test_session_start(&T, params, id, tok);
	free(params);
	snprintf(url, sizeof(url), "https://api.stand-in.test:%d/admin/users",
		 standin_port);
	ck_assert(asprintf(&envv[0], "SPD_SESSION_TOKEN=%s", tok) > 0);
	envv[1] = NULL;

	/* A credential-only host: --always refused, nothing written. */
	rc = test_spctl(&T,
			(char *[]){"policy", "propose", "only.stand-in.test",
				   "GET", "/x", NULL},
			envv, &out, &err);
	ck_assert_msg(rc == 0 && sscanf(out, "approval %ld", &approval) == 1,
		      "rc %d out %s err %s", rc, out, err);
	free(out);
	free(err);
	snprintf(conf, sizeof(conf), "%ld", approval);
	rc = test_spctl(&T, (char *[]){"approve", conf, "--always", NULL}, NULL,
			&out, &err);
	ck_assert_msg(rc != 0 && has(err, "no [network \"only.stand-in.test\"] "
					  "rules"),
		      "rc %d out %s err %s", rc, out, err);
	free(out);
	free(err);
	after = test_read_file(cpath);
	ck_assert_str_eq(after, before);
	free(after);
	rc = test_spctl(&T, (char *[]){"deny", conf, NULL}, NULL, &out, &err);
	ck_assert_msg(rc == 0, "the ask is no longer pending: %s", err);
	free(out);
	free(err);

	/* A host with rules: written, and live for the session. */
	rc = test_spctl(&T,
			(char *[]){"policy", "propose", "api.stand-in.test",
				   "GET", "/admin/**", NULL},
			envv, &out, &err);
	ck_assert_msg(rc == 0 && sscanf(out, "approval %ld", &approval) == 1,
		      "rc %d out %s err %s", rc, out, err);
	free(out);
	free(err);
	snprintf(conf, sizeof(conf), "%ld", approval);
	rc = test_spctl(&T, (char *[]){"approve", conf, "--always", NULL}, NULL,
			&out, &err);
	ck_assert_msg(rc == 0, "rc %d out %s err %s", rc, out, err);
	free(out);
	free(err);
	after = test_read_file(cpath);
	ck_assert_msg(strncmp(after, before, strlen(before)) == 0 &&
			  has(after + strlen(before),
			      "[network \"api.stand-in.test\"]\n"
			      "\tallow = \"GET /admin/**\"\n") &&
			  has(after, "# the operator's own words, kept\n") &&
			  has(after, "; a credential-only host\n"),
		      "spd.conf now:\n%s", after);
	free(after);
	ck_assert_int_eq(
	    agent_run(tok,
		      (char *[]){"curl", "-sS", "-w", " code=%{http_code}\n",
				 url, NULL},
		      &out, &err),
	    0);
	ck_assert_msg(has(out, "user=standin GET /admin/users\n code=200"),
		      "out %s err %s", out, err);
	free(out);
	free(err);

	/* Restarted, spd reads the file as written, and another session,
	 * which never asked, has the rule. */
	ck_assert_int_eq(test_spd_stop(&T), 0);
	test_spd_start(&T);
	ck_assert(
	    asprintf(&params, "{\"repo\":\"%s\",\"feature\":\"q\"}", repo) > 0);
	test_session_start(&T, params, id2, tok2);
	free(params);
	ck_assert_int_eq(
	    agent_run(tok2,
		      (char *[]){"curl", "-sS", "-w", " code=%{http_code}\n",
				 url, NULL},
		      &out, &err),
	    0);
	ck_assert_msg(has(out, "user=standin GET /admin/users\n code=200"),
		      "another session after the restart: out %s err %s", out,
		      err);
	free(out);
	free(err);
	after = test_journal_until(&T,
				   "select kind, summary from events where "
				   "kind like 'net.proxy.rule%' order by id",
				   "net.proxy.rule.conf");
	ck_assert_msg(has(after, "net.proxy.rule.conf|api.stand-in.test allow "
				 "= GET /admin/**"),
		      "journal %s", after);
	free(after);
	free(envv[0]);
	free(before);
	free(cpath);
	test_rmrf(repo);
	free(repo);
}
END_TEST

/* A private npm registry (issue 42's "install from a private registry
 * while no token exists inside the sandbox"): the stand-in answers only
 * the token spd's proxy adds; npm install in the sandbox gets the
 * package (the host under preset npm-read: its scoped name, spelt
 * /@private%2fhello, passes), and the token is in none of the run's
 * environment, files (npm's cache among them) or output; a PUT is
 * refused by the preset.  Without the credential, the same
 * install is refused by the registry (the control). */
START_TEST(test_npm_private_registry)
{
	char script[2048], *out = NULL, *err = NULL, *hello, *s, *grep = NULL;
	int rc;

	if (!usable() || access("/usr/bin/npm", X_OK) ||
	    access("/usr/bin/node", X_OK))
		TEST_SKIP("curl, python3, openssl, sqlite3, node or npm is not "
			  "installed");
	start("[credential \"npm\"]\n"
	      "\thost = npm.stand-in.test\n"
	      "\theader = Authorization: Bearer ${STANDIN_TOKEN}\n"
	      "[network \"npm.stand-in.test\"]\n"
	      "\tpreset = npm-read\n",
	      true);
	snprintf(
	    script, sizeof(script),
	    "env > env.txt; echo '{\"name\":\"app\",\"version\":\"1.0.0\"}' "
	    "> package.json; "
	    "npm install --no-audit --no-fund --no-update-notifier "
	    "--cache \"$PWD/.npm-cache\" "
	    "--registry https://npm.stand-in.test:%d/ @private/hello "
	    "> npm.txt 2>&1; echo npm=$?; "
	    "node -e 'console.log(require(\"@private/hello\"))'",
	    standin_port);
	rc = run_proxy(script, &out, &err);
	hello = ws_file("node_modules/@private/hello/index.js");
	ck_assert_msg(rc == 0 && has(out, "npm=0") &&
			  has(out, "hello from the private registry") &&
			  has(hello, "hello from the private registry"),
		      "rc %d out %s err %s npm %s", rc, out, err,
		      ws_file("npm.txt"));
	s = seen();
	ck_assert_msg(has(s, "GET /@private%2fhello host=npm.stand-in.test:") &&
			  has(s, "/@private/hello/-/hello-1.0.0.tgz") &&
			  count(s, "auth=bearer-ok") >= 2 && !has(s, "auth=-"),
		      "seen %s", s);
	/* Nowhere in the run: its environment, every file it left in the
	 * workspace (npm's cache and logs too), its output. */
	test_sh(&grep, "grep -rl '%s' '%s' || echo none", TOKEN, WS);
	ck_assert_msg(grep && strcmp(grep, "none\n") == 0, "the token is in %s",
		      grep);
	ck_assert_msg(!has(out, TOKEN) && !has(err, TOKEN), "in the output");
	/* npm-read lets nothing but reads through: a publish is refused
	 * before the registry hears of it. */
	free(out);
	free(err);
	free(s);
	snprintf(script, sizeof(script),
		 "curl -sS -X PUT -d '{}' -w ' code=%%{http_code}\n' "
		 "https://npm.stand-in.test:%d/@private%%2fhello",
		 standin_port);
	ck_assert_int_eq(run_proxy(script, &out, &err), 0);
	ck_assert_msg(has(out, "code=403") && has(out, "(no rule matches)"),
		      "out %s err %s", out, err);
	s = seen();
	ck_assert_msg(!has(s, "PUT"), "seen %s", s);
	free(grep);
	free(s);
	free(hello);
	free(out);
	free(err);
}
END_TEST

/* The control: the same registry without the credential refuses npm. */
START_TEST(test_npm_registry_needs_token)
{
	char script[1024], *out = NULL, *err = NULL, *p;

	if (!usable() || access("/usr/bin/npm", X_OK))
		TEST_SKIP("curl, python3, openssl, sqlite3 or npm is not "
			  "installed");
	start("", true);
	snprintf(script, sizeof(script),
		 "npm install --no-audit --no-fund --no-update-notifier "
		 "--cache \"$PWD/.npm-cache\" --cafile '%s/ca.pem' "
		 "--registry https://npm.stand-in.test:%d/ @private/hello "
		 "> npm.txt 2>&1; echo npm=$?",
		 CERTS, standin_port);
	ck_assert_int_eq(run_proxy(script, &out, &err), 0);
	ck_assert(asprintf(&p, "%s/node_modules/@private/hello/index.js", WS) >
		  0);
	ck_assert_msg(has(out, "npm=1") && access(p, F_OK) != 0,
		      "out %s err %s", out, err);
	free(p);
	free(out);
	free(err);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("proxy_tls");
	TCase *tc = tcase_create("proxy_tls");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_credential_added_by_spd);
	tcase_add_test(tc, test_other_hosts_plain_tunnel);
	tcase_add_test(tc, test_without_credential_401);
	tcase_add_test(tc, test_ca_key_out_of_reach);
	tcase_add_test(tc, test_request_rules);
	tcase_add_test(tc, test_git_push_only_session_branch);
	tcase_add_test(tc, test_agent_git_push);
	tcase_add_test(tc, test_push_configured);
	tcase_add_test(tc, test_propose_rule);
	tcase_add_test(tc, test_propose_always);
	tcase_add_test(tc, test_npm_private_registry);
	tcase_add_test(tc, test_npm_registry_needs_token);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

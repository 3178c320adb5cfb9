/*
 * The egress proxy's cost (issue 17), in one run on one machine: a 100
 * MiB download from a server on loopback, by curl, directly and through
 * spd's proxy; its throughput (median of BENCH_BIG downloads) and the
 * time to the first byte of a small reply (median of BENCH_SMALL), each
 * measured by curl itself (speed_download, time_starttransfer), so that
 * process start-up is not counted.  Four ways, one after the other:
 * curl on the host, curl in a --net host run (the same sandbox, direct),
 * and curl in a --net proxy run by plain http:// and through a CONNECT
 * tunnel.  The server is this program's child, plain C on 127.0.0.2.
 * Then the same over HTTPS (issue 42), from openssl s_server -WWW on
 * 127.0.0.2 with a certificate of a test CA: direct in a --net host run,
 * through a plain CONNECT tunnel, and to a host with a [credential],
 * where spd terminates TLS on both sides and adds the header.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <check.h>

#include "tests/lib/benchutil.h"
#include "tests/lib/spdproc.h"
#include "tests/lib/testlib.h"

/* The download: 100 MiB (issue 17). */
#define BENCH_BIG_BYTES (100ll << 20)
/* Downloads per way, and small requests per way for the latency. */
#define BENCH_BIG 9
#define BENCH_SMALL 100
/* Bytes written at once by the server. */
#define BENCH_CHUNK (1 << 20)
/* Lines of "big N" and "small N" one way prints at most. */
#define BENCH_LINES 256

static int server_port, tls_port;
static pid_t server_pid = -1, tls_pid = -1;

/* Answer one request: /big gets BENCH_BIG_BYTES, anything else one
 * byte.  The head is read up to its blank line (curl sends it whole). */
static void serve_one(int fd, char *chunk)
{
	char head[8192];
	size_t n = 0;
	long long len, sent = 0;
	char reply[128];

	while (n < sizeof(head) - 1) {
		ssize_t r = read(fd, head + n, sizeof(head) - 1 - n);

		if (r <= 0)
			return;
		n += (size_t)r;
		head[n] = '\0';
		if (strstr(head, "\r\n\r\n"))
			break;
	}
	len = strstr(head, " /big") ? BENCH_BIG_BYTES : 1;
	snprintf(reply, sizeof(reply),
		 "HTTP/1.1 200 OK\r\nContent-Length: %lld\r\n"
		 "Connection: close\r\n\r\n",
		 len);
	if (send(fd, reply, strlen(reply), MSG_NOSIGNAL) < 0)
		return;
	while (sent < len) {
		size_t w = (size_t)(len - sent < BENCH_CHUNK ? len - sent
							     : BENCH_CHUNK);
		ssize_t r = send(fd, chunk, w, MSG_NOSIGNAL);

		if (r <= 0)
			return;
		sent += r;
	}
}

/* The server on 127.0.0.2, one connection at a time (curl makes one at
 * a time).  Returns 0 with server_port set, or -1. */
static int server_start(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t al = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	inet_pton(AF_INET, "127.0.0.2", &a.sin_addr);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(l, 64) < 0 || getsockname(l, (struct sockaddr *)&a, &al) < 0)
		return -1;
	server_port = ntohs(a.sin_port);
	server_pid = fork();
	if (server_pid < 0)
		return -1;
	if (server_pid == 0) {
		char *chunk = calloc(1, BENCH_CHUNK);

		/* Gone with the bench, however it ends. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);

		if (!chunk)
			_exit(1);
		memset(chunk, 'x', BENCH_CHUNK);
		for (;;) {
			int fd = accept(l, NULL, NULL);

			if (fd < 0)
				continue;
			serve_one(fd, chunk);
			close(fd);
		}
	}
	close(l);
	return 0;
}

/* openssl s_server -WWW in dir (files big and small there) on
 * 127.0.0.2, port found by trying from a free one.  Returns 0 or -1. */
static int tls_server_start(const char *dir)
{
	struct sockaddr_in b = {.sin_family = AF_INET};
	socklen_t bl = sizeof(b);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char port[32], cert[4096], key[4096];

	/* A free port of 127.0.0.2, for s_server to bind again. */
	inet_pton(AF_INET, "127.0.0.2", &b.sin_addr);
	if (l < 0 || bind(l, (struct sockaddr *)&b, sizeof(b)) < 0 ||
	    getsockname(l, (struct sockaddr *)&b, &bl) < 0) {
		if (l >= 0)
			close(l);
		return -1;
	}
	tls_port = ntohs(b.sin_port);
	close(l);
	snprintf(port, sizeof(port), "127.0.0.2:%d", tls_port);
	snprintf(cert, sizeof(cert), "%s/srv.pem", dir);
	snprintf(key, sizeof(key), "%s/srv.key", dir);
	tls_pid = fork();
	if (tls_pid < 0)
		return -1;
	if (tls_pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (chdir(dir) < 0)
			_exit(1);
		if (!freopen("/dev/null", "w", stdout) ||
		    !freopen("/dev/null", "w", stderr) ||
		    !freopen("/dev/null", "r", stdin))
			_exit(1);
		execlp("openssl", "openssl", "s_server", "-quiet", "-accept",
		       port, "-cert", cert, "-key", key, "-WWW", (char *)NULL);
		_exit(127);
	}
	/* Until it answers. */
	for (int i = 0; i < 200; i++) {
		struct sockaddr_in a = {.sin_family = AF_INET,
					.sin_port = htons((uint16_t)tls_port)};
		int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int ok;

		inet_pton(AF_INET, "127.0.0.2", &a.sin_addr);
		ok =
		    s >= 0 && connect(s, (struct sockaddr *)&a, sizeof(a)) == 0;
		if (s >= 0)
			close(s);
		if (ok)
			return 0;
		usleep(50 * 1000);
	}
	return -1;
}

/* The script each way runs: the downloads, then the small requests,
 * each printing curl's own figure. */
static void script_for(char *buf, size_t len, const char *host,
		       const char *curl_opts)
{
	bool tls = strstr(curl_opts, "--cacert") != NULL;
	const char *scheme = tls ? "https" : "http";
	int port = tls ? tls_port : server_port;

	/* The terminated host: curl given spd's CA alone (the bundle's
	 * last certificate), as the other ways are given one CA: what curl
	 * spends reading the system's whole bundle is curl's, not spd's. */
	if (strstr(host, "cred."))
		snprintf(buf, len,
			 "awk '/BEGIN CERT/ { b = \"\" } { b = b $0 \"\\n\" } "
			 "END { printf \"%%s\", b }' \"$SSL_CERT_FILE\" > "
			 "/tmp/spd-ca.pem; ");
	else
		buf[0] = '\0';
	snprintf(buf + strlen(buf), len - strlen(buf),
		 "for i in $(seq %d); do curl -sS %s -o /dev/null -w "
		 "'big %%{speed_download}\\n' %s://%s:%d/big; done; "
		 "for i in $(seq %d); do curl -sS %s -o /dev/null -w "
		 "'small %%{time_starttransfer}\\n' %s://%s:%d/small; "
		 "done",
		 BENCH_BIG, curl_opts, scheme, host, port, BENCH_SMALL,
		 curl_opts, scheme, host, port);
}

struct figures {
	double mib_s;	/* median throughput, MiB/s */
	double ttfb_ms; /* median time to first byte, ms */
	int big, small; /* how many of each were read */
};

/* Read curl's lines into f; false when some are missing. */
static bool parse(const char *out, struct figures *f)
{
	double big[BENCH_LINES], small[BENCH_LINES];
	const char *p = out;

	f->big = f->small = 0;
	while (p && *p) {
		double v;

		if (sscanf(p, "big %lf", &v) == 1 && f->big < BENCH_LINES)
			big[f->big++] = v / (1024.0 * 1024.0);
		else if (sscanf(p, "small %lf", &v) == 1 &&
			 f->small < BENCH_LINES)
			small[f->small++] = v * 1000.0;
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	f->mib_s = bench_median(big, f->big);
	f->ttfb_ms = bench_median(small, f->small);
	return f->big == BENCH_BIG && f->small == BENCH_SMALL;
}

static struct test_spd T;

/* One way: net NULL runs the script on the host, else in a run of that
 * network mode.  Returns 0 with *f, or -1 saying why. */
static int measure(const char *label, const char *net, const char *host,
		   const char *curl_opts, const char *ws, struct figures *f)
{
	char script[2048], *out = NULL, *err = NULL;
	char *sh[] = {"sh", "-c", script, NULL};
	char wsb[4096], netb[16];
	char *run[] = {"run", "--workspace", wsb,  "--yes", "--net", netb,
		       "--",  "sh",	     "-c", script,  NULL};
	int r;

	snprintf(wsb, sizeof(wsb), "%s", ws);
	snprintf(netb, sizeof(netb), "%s", net ? net : "");
	script_for(script, sizeof(script), host, curl_opts);
	if (net)
		r = test_spctl(&T, run, NULL, &out, &err);
	else
		r = test_run(sh, NULL, &out, &err);
	r = parse(out, f) && r == 0 ? 0 : -1;
	if (r < 0)
		fprintf(stderr, "%s: only %d downloads and %d requests: %s%s\n",
			label, f->big, f->small, out ? out : "",
			err ? err : "");
	free(out);
	free(err);
	return r;
}

START_TEST(bench_proxy)
{
	char cacert[4200], resolve[256];
	const struct {
		const char *label, *net, *host, *opts;
	} ways[] = {
	    {"curl on the host, direct", NULL, "127.0.0.2", ""},
	    {"curl in a --net host run, direct", "host", "127.0.0.2", ""},
	    {"--net proxy, plain http://", "proxy", "bench.test", ""},
	    {"--net proxy, CONNECT tunnel", "proxy", "bench.test", "-p"},
	    {"https, --net host run, direct", "host", "tls.bench.test",
	     resolve},
	    {"https, --net proxy, CONNECT tunnel", "proxy", "tls.bench.test",
	     cacert},
	    {"https, --net proxy, terminated", "proxy", "cred.bench.test",
	     "--cacert /tmp/spd-ca.pem"},
	};
	enum { NWAYS = sizeof(ways) / sizeof(ways[0]) };
	struct figures f[NWAYS];
	char conf[2048], *ws, *certs, *envp;
	int rc = 0;

	if (access("/usr/bin/curl", X_OK) != 0 ||
	    access("/usr/bin/openssl", X_OK) != 0) {
		printf("SKIP: bench proxy: curl or openssl is not installed\n");
		return;
	}
	if (server_start() < 0)
		ck_abort_msg("cannot listen on 127.0.0.2: %s", strerror(errno));
	/* Where a run reads it: its SSL_CERT_FILE bundle is made here. */
	certs = test_visible_tmpdir("bench-proxy-certs");
	ck_assert_int_eq(
	    test_sh(
		NULL,
		"cd '%s' && chmod 755 . && "
		"openssl req -x509 -newkey ec -pkeyopt "
		"ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem "
		"-days 2 -subj /CN=bench-ca "
		"-addext basicConstraints=critical,CA:TRUE "
		"-addext keyUsage=critical,keyCertSign 2>/dev/null && "
		"openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 "
		"-nodes -keyout srv.key -out srv.csr -subj /CN=tls.bench.test "
		"2>/dev/null && printf 'subjectAltName=DNS:tls.bench.test,"
		"DNS:cred.bench.test\\nbasicConstraints=CA:FALSE\\n"
		"extendedKeyUsage=serverAuth\\n' > ext && "
		"openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key "
		"-CAcreateserial -out srv.pem -days 2 -extfile ext "
		"2>/dev/null && chmod 644 ca.pem && "
		"head -c %lld /dev/zero > big && printf x > small",
		certs, BENCH_BIG_BYTES),
	    0);
	if (tls_server_start(certs) < 0)
		ck_abort_msg("openssl s_server did not start");
	snprintf(cacert, sizeof(cacert), "-p --cacert %s/ca.pem", certs);
	snprintf(resolve, sizeof(resolve),
		 "--cacert %s/ca.pem --resolve tls.bench.test:%d:127.0.0.2",
		 certs, tls_port);
	snprintf(conf, sizeof(conf),
		 "[network]\n\tallow-host = bench.test\n"
		 "\tallow-host = *.bench.test\n"
		 "\tresolve = bench.test:127.0.0.2\n"
		 "\tresolve = tls.bench.test:127.0.0.2\n"
		 "\tresolve = cred.bench.test:127.0.0.2\n"
		 "\tallow-address = 127.0.0.2\n"
		 "\ttest-ca = %s/ca.pem\n"
		 "\tca-bundle = %s/run-trusts.pem\n"
		 "[credential \"bench\"]\n\thost = cred.bench.test\n"
		 "\theader = Authorization: Bearer ${BENCH_TOKEN}\n",
		 certs, certs);
	test_spd_prepare(&T, conf);
	ck_assert(asprintf(&envp, "%s/environment", T.config) > 0);
	test_write_file(envp, "BENCH_TOKEN=bench-token-0123456789\n");
	free(envp);
	test_spd_start(&T);
	ws = test_tmpdir("bench-proxy");
	printf("%-38s %10s %8s %12s %10s\n", "100 MiB download, then 1 byte",
	       "MiB/s", "x host", "first byte", "+ ms");
	for (size_t i = 0; i < NWAYS; i++) {
		if (measure(ways[i].label, ways[i].net, ways[i].host,
			    ways[i].opts, ws, &f[i]) < 0) {
			rc = 1;
			f[i] = (struct figures){0};
			continue;
		}
		printf("%-38s %10.1f %8.2f %9.3f ms %+10.3f\n", ways[i].label,
		       f[i].mib_s, f[0].mib_s ? f[i].mib_s / f[0].mib_s : 0,
		       f[i].ttfb_ms, f[i].ttfb_ms - f[0].ttfb_ms);
	}
	printf("medians of %d downloads and %d one-byte requests each; "
	       "through the proxy against the --net host run: %.2fx "
	       "throughput (plain), %.2fx (CONNECT); first byte %+.3f ms "
	       "(plain), %+.3f ms (CONNECT)\n",
	       BENCH_BIG, BENCH_SMALL, f[1].mib_s ? f[2].mib_s / f[1].mib_s : 0,
	       f[1].mib_s ? f[3].mib_s / f[1].mib_s : 0,
	       f[2].ttfb_ms - f[1].ttfb_ms, f[3].ttfb_ms - f[1].ttfb_ms);
	printf("https against the --net host run: %.2fx throughput "
	       "(tunnel), %.2fx (terminated); first byte %+.3f ms (tunnel), "
	       "%+.3f ms (terminated)\n",
	       f[4].mib_s ? f[5].mib_s / f[4].mib_s : 0,
	       f[4].mib_s ? f[6].mib_s / f[4].mib_s : 0,
	       f[5].ttfb_ms - f[4].ttfb_ms, f[6].ttfb_ms - f[4].ttfb_ms);
	test_spd_stop(&T);
	test_spd_cleanup(&T);
	test_rmrf(ws);
	free(ws);
	kill(server_pid, SIGKILL);
	waitpid(server_pid, NULL, 0);
	kill(tls_pid, SIGKILL);
	waitpid(tls_pid, NULL, 0);
	test_rmrf(certs);
	free(certs);
	ck_assert_msg(rc == 0, "a way failed (above)");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("bench");
	TCase *tc = tcase_create("proxy");
	SRunner *sr;
	int failed;

	signal(SIGPIPE, SIG_IGN);
	tcase_add_test(tc, bench_proxy);
	tcase_set_timeout(tc, 600);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

/*
 * What libcurl's multi interface costs a call by itself (issue 12; see
 * bench/README.md, "The floor"): the
 * same keep-alive POST to the C provider stand-in, made N times one after
 * the other from one thread, first over a plain socket (write the request,
 * read the reply to its Content-Length), then through curl's multi
 * interface the way spd's broker makes a call (a new easy handle a call,
 * the same options, the connection kept in the multi's pool), and once
 * more with one easy handle reused.  The figure is this process's CPU
 * time a call (CLOCK_PROCESS_CPUTIME_ID), which is what a call costs the
 * broker's loop thread on top of what it does itself.
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/lib/fast_standin.h"

#define CALLS 3000
#define BODY                                                                   \
	"{\"model\":\"test-model\",\"max_tokens\":16,\"messages\":[{\"role\":" \
	"\"user\",\"content\":\"hi\"}]}"

static double cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static double wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Reads one reply (headers, then Content-Length bytes).  0 or -1. */
static int read_reply(int fd)
{
	char buf[16384];
	size_t n = 0;

	for (;;) {
		ssize_t k = read(fd, buf + n, sizeof(buf) - 1 - n);
		char *end, *cl;

		if (k <= 0)
			return -1;
		n += (size_t)k;
		buf[n] = 0;
		end = strstr(buf, "\r\n\r\n");
		if (!end)
			continue;
		cl = strcasestr(buf, "content-length:");
		if (!cl)
			return -1;
		if (n >= (size_t)(end + 4 - buf) + strtoul(cl + 15, NULL, 10))
			return 0;
	}
}

static void raw(int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port)};
	char req[1024];
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1, len;
	double c0, w0;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (void *)&sa, sizeof(sa)) < 0)
		exit(1);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	len = snprintf(req, sizeof(req),
		       "POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
		       "x-api-key: k\r\nanthropic-version: 2023-06-01\r\n"
		       "content-type: application/json\r\nContent-Length: "
		       "%zu\r\n\r\n%s",
		       port, strlen(BODY), BODY);
	for (int round = 0; round < 2; round++) {
		c0 = cpu_ns();
		w0 = wall_ns();
		for (int i = 0; i < CALLS; i++)
			if (write(fd, req, (size_t)len) != len ||
			    read_reply(fd) < 0)
				exit(1);
		if (round)
			printf("plain socket              %6.1f us CPU a call, "
			       "%6.1f us wall\n",
			       (cpu_ns() - c0) / CALLS / 1e3,
			       (wall_ns() - w0) / CALLS / 1e3);
	}
	close(fd);
}

static size_t sink(char *p, size_t s, size_t n, void *d)
{
	(void)p;
	(void)d;
	return s * n;
}

static CURL *easy_for(const char *url, struct curl_slist *h)
{
	CURL *e = curl_easy_init();

	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, 10L);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, 60L);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(e, CURLOPT_POST, 1L);
	curl_easy_setopt(e, CURLOPT_POSTFIELDS, BODY);
	curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
			 (curl_off_t)strlen(BODY));
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, sink);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, sink);
	return e;
}

static void one_multi(CURLM *m, CURL *e)
{
	int running = 1;

	curl_multi_add_handle(m, e);
	while (running) {
		curl_multi_perform(m, &running);
		if (running)
			curl_multi_poll(m, NULL, 0, 1000, NULL);
	}
	{
		int q;
		CURLMsg *msg;

		while ((msg = curl_multi_info_read(m, &q)))
			if (msg->msg == CURLMSG_DONE &&
			    msg->data.result != CURLE_OK)
				exit(2);
	}
	curl_multi_remove_handle(m, e);
}

static void multi(int port, int reuse)
{
	char url[128];
	struct curl_slist *h = NULL;
	CURLM *m = curl_multi_init();
	CURL *e = NULL;
	double c0, w0;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/messages", port);
	h = curl_slist_append(h, "x-api-key: k");
	h = curl_slist_append(h, "anthropic-version: 2023-06-01");
	h = curl_slist_append(h, "content-type: application/json");
	h = curl_slist_append(h, "Expect:");
	if (reuse)
		e = easy_for(url, h);
	for (int round = 0; round < 2; round++) {
		c0 = cpu_ns();
		w0 = wall_ns();
		for (int i = 0; i < CALLS; i++) {
			CURL *k = reuse ? e : easy_for(url, h);

			one_multi(m, k);
			if (!reuse)
				curl_easy_cleanup(k);
		}
		if (round)
			printf("curl multi, %-13s %6.1f us CPU a call, %6.1f "
			       "us wall\n",
			       reuse ? "one easy" : "easy a call",
			       (cpu_ns() - c0) / CALLS / 1e3,
			       (wall_ns() - w0) / CALLS / 1e3);
	}
	if (e)
		curl_easy_cleanup(e);
	curl_multi_cleanup(m);
	curl_slist_free_all(h);
}

int main(void)
{
	int port;
	pid_t pid = fast_standin_start(&port);

	if (pid < 0)
		return 1;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	printf("%d keep-alive calls one after the other to the C stand-in, "
	       "this process's CPU time (libcurl %s)\n",
	       CALLS, curl_version_info(CURLVERSION_NOW)->version);
	for (int r = 0; r < 3; r++) {
		raw(port);
		multi(port, 0);
		multi(port, 1);
	}
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	return 0;
}

/*
 * End-to-end tests of the model broker (issue 12): a real spd whose
 * providers are a stand-in on loopback (tests/lib/provider_standin.py,
 * started here), spoken to over spd's socket and its HTTP endpoint the
 * way an agent's SDK would.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/spdproc.h"
#include "tests/lib/testlib.h"
#include "common/paths.h"
#include "common/util.h"
#include "daemon/broker/price.h"

#define REAL_ANT "sk-ant-REALKEY-0123456789abcdef"
#define REAL_OAI "sk-oai-REALKEY-fedcba9876543210"
/* The stand-in's usage: 100 input and 50 output tokens. */
#define MODEL_CONF                                                             \
	"[model \"test-model\"]\n\tinput = 1\n\toutput = 10\n"                 \
	"\tmax-output = 1000\n"
/* One call of the stand-in at test-model's prices: 100 * 1 + 50 * 10
 * micro-dollars. */
#define CALL_PUSD 600000000LL

static struct test_spd T;
static pid_t standin_pid = -1;
static int standin_port;
static char *standin_log;

static bool has(const char *hay, const char *needle)
{
	return hay && strstr(hay, needle) != NULL;
}

static void standin_start(void)
{
	standin_pid = test_provider_standin(standin_log, REAL_ANT "," REAL_OAI,
					    &standin_port);
}

/* spd.conf for the stand-in, with extra (may be NULL) in [broker]. */
static char *broker_conf(const char *extra)
{
	return test_fmt(
	    "[provider \"anthropic\"]\n\turl = http://127.0.0.1:%d\n"
	    "\tkey = ANTHROPIC_API_KEY\n\tapi = anthropic\n"
	    "[provider \"openai\"]\n\turl = http://127.0.0.1:%d/\n"
	    "\tkey = OPENAI_API_KEY\n\tapi = openai\n"
	    "[broker]\n\tcap-default = 0.5\n\tcap-max = 2\n"
	    "\tbody-max = 65536\n\tprovider-timeout = 2\n%s" MODEL_CONF,
	    standin_port, standin_port, extra ? extra : "");
}

static void start_spd(const char *extra)
{
	char *conf, *envf;

	conf = broker_conf(extra);
	test_spd_prepare(&T, conf);
	envf = paths_join(T.config, "environment");
	test_write_file(envf, "ANTHROPIC_API_KEY=" REAL_ANT
			      "\nOPENAI_API_KEY=" REAL_OAI "\n");
	free(envf);
	free(conf);
	test_spd_start(&T);
}

static void setup(void)
{
	char *dir = test_tmpdir("standin");

	standin_log = paths_join(dir, "log");
	free(dir);
	standin_start();
	start_spd(NULL);
}

static void teardown(void)
{
	test_spd_stop_clean(&T);
	if (standin_pid > 0) {
		kill(standin_pid, SIGTERM);
		waitpid(standin_pid, NULL, 0);
		standin_pid = -1;
	}
	free(standin_log);
}

/* One JSON-RPC call as the operator; returns the response object. */
static json_t *rpc(const char *method, const char *params)
{
	int fd = test_spd_connect(&T);
	char *line = test_call(&T, fd, 1, method, params, true);
	json_t *o = line ? json_loads(line, 0, NULL) : NULL;

	close(fd);
	free(line);
	ck_assert_msg(o, "no reply to %s", method);
	return o;
}

struct turn {
	char id[64], key[128];
	int port;
};

static struct turn begin(const char *params)
{
	json_t *o = rpc("turn.begin", params ? params : "{}");
	json_t *r = json_object_get(o, "result");
	struct turn t = {0};
	const char *url;

	ck_assert_msg(r, "turn.begin failed: %s", json_dumps(o, 0));
	snprintf(t.id, sizeof(t.id), "%s",
		 json_string_value(json_object_get(r, "turn")));
	snprintf(t.key, sizeof(t.key), "%s",
		 json_string_value(json_object_get(r, "key")));
	url = json_string_value(json_object_get(r, "anthropic_base_url"));
	ck_assert_ptr_nonnull(url);
	ck_assert_int_eq(sscanf(url, "http://127.0.0.1:%d", &t.port), 1);
	json_decref(o);
	return t;
}

static json_t *turn_row(const char *id)
{
	json_t *o = rpc("turn.list", "{}"), *a, *hit = NULL;

	a = json_object_get(json_object_get(o, "result"), "turns");
	for (size_t i = 0; i < json_array_size(a); i++)
		if (strcmp(json_string_value(
			       json_object_get(json_array_get(a, i), "turn")),
			   id) == 0)
			hit = json_incref(json_array_get(a, i));
	json_decref(o);
	ck_assert_ptr_nonnull(hit);
	return hit;
}

static long long pusd(json_t *row, const char *field)
{
	return (long long)(json_number_value(json_object_get(row, field)) *
			       1e12 +
			   0.5);
}

static int connect_port(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(0x7f000001)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

/* The length of the first whole HTTP reply in s (len bytes), or 0 while
 * it is not whole (a reply framed by neither Content-Length nor chunks
 * ends with the connection). */
static size_t reply_len(const char *s, size_t len)
{
	const char *end = memmem(s, len, "\r\n\r\n", 4), *p;
	char *head;
	size_t hl, cl = 0;
	bool has_cl, chunked;

	if (!end)
		return 0;
	hl = (size_t)(end - s) + 4;
	head = strndup(s, hl);
	for (char *c = head; *c; c++)
		*c = (char)tolower((unsigned char)*c);
	has_cl = strstr(head, "\r\ncontent-length:") != NULL;
	if (has_cl)
		cl =
		    strtoul(strstr(head, "\r\ncontent-length:") + 17, NULL, 10);
	chunked = strstr(head, "\r\ntransfer-encoding: chunked") != NULL;
	free(head);
	if (has_cl)
		return len >= hl + cl ? hl + cl : 0;
	if (!chunked)
		return 0;
	for (p = s + hl;;) {
		char *e;
		unsigned long n = strtoul(p, &e, 16);

		if (e == p || (size_t)(e - s) + 2 > len ||
		    strncmp(e, "\r\n", 2) != 0)
			return 0;
		if (n == 0)
			return (size_t)(e - s) + 4 <= len &&
				       strncmp(e + 2, "\r\n", 2) == 0
				   ? (size_t)(e - s) + 4
				   : 0;
		if ((size_t)(e + 2 - s) + n + 2 > len)
			return 0;
		p = e + 2 + n + 2;
	}
}

/* Read, after the prefix already read (plen bytes), until the text holds
 * `replies` whole replies or the connection ends (at most 30 s of
 * silence); returns malloc'd text, the prefix included. */
static char *read_replies(int fd, const char *prefix, size_t plen, int replies)
{
	size_t len = plen, cap = plen + 4096;
	char *s = malloc(cap);

	memcpy(s, prefix, plen);
	for (;;) {
		struct pollfd pf = {fd, POLLIN, 0};
		size_t off = 0, one;
		int whole = 0;
		ssize_t n;

		while (whole < replies &&
		       (one = reply_len(s + off, len - off))) {
			off += one;
			whole++;
		}
		if (whole == replies)
			break;
		if (poll(&pf, 1, 30000) != 1)
			break;
		if (len + 4096 > cap)
			s = realloc(s, cap *= 2);
		n = read(fd, s + len, cap - len - 1);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	s[len] = '\0';
	return s;
}

/* One reply: until it is whole or the connection ends. */
static char *read_all(int fd)
{
	return read_replies(fd, "", 0, 1);
}

/* The body of a chunked response, decoded as far as it goes (a
 * truncated one stops where its chunks stop). */
static char *dechunk(const char *resp)
{
	const char *p = resp ? strstr(resp, "\r\n\r\n") : NULL;
	size_t len = 0;
	char *out = calloc(1, resp ? strlen(resp) + 1 : 1);

	if (!p)
		return out;
	p += 4;
	for (;;) {
		char *end;
		unsigned long n = strtoul(p, &end, 16);

		if (end == p || strncmp(end, "\r\n", 2) != 0 || n == 0 ||
		    strlen(end + 2) < n)
			break;
		memcpy(out + len, end + 2, n);
		len += n;
		p = end + 2 + n;
		if (strncmp(p, "\r\n", 2) != 0)
			break;
		p += 2;
	}
	out[len] = '\0';
	return out;
}

static char *raw_http(int port, const char *req, size_t n)
{
	int fd = connect_port(port);
	char *out;

	test_send(fd, req, n);
	out = read_all(fd);
	close(fd);
	return out;
}

static char *request_text(const struct turn *t, const char *path,
			  const char *extra_headers, const char *body)
{
	return test_fmt(
	    "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: %s\r\n"
	    "anthropic-version: 2023-06-01\r\ncontent-type: "
	    "application/json\r\n%sContent-Length: %zu\r\n\r\n%s",
	    path, t->key, extra_headers ? extra_headers : "", strlen(body),
	    body);
}

static char *post(const struct turn *t, const char *path,
		  const char *extra_headers, const char *body)
{
	char *req = request_text(t, path, extra_headers, body);
	char *out = raw_http(t->port, req, strlen(req));

	free(req);
	return out;
}

static int status_of(const char *resp)
{
	int st = 0;

	if (!resp || sscanf(resp, "HTTP/1.1 %d", &st) != 1)
		return -1;
	return st;
}

#define MSG_BODY                                                               \
	"{\"model\":\"test-model\",\"max_tokens\":50,\"messages\":[{\"role\":" \
	"\"user\",\"content\":\"hi\"}]}"

/* journal rows as text, read from the file once the writer committed
 * rows holding needle (up to 10 s: group commit). */
static char *journal_until(const char *needle)
{
	return test_journal_until(
	    &T, "select kind, summary, detail from events", needle);
}

/* The real key reaches the provider, with the client's other headers;
 * the client never sees it, not even when the provider echoes it, nor
 * does the journal or spd's log. */
START_TEST(test_real_key_reaches_provider_only)
{
	struct turn t = begin(NULL);
	char *ok = post(&t, "/v1/messages?beta=true",
			"anthropic-beta: tools-2024\r\n", MSG_BODY);
	char *echo =
	    post(&t, "/v1/messages", "x-standin-mode: echo\r\n", MSG_BODY);
	char *log, *journal, *spdlog, *spdlog_path;

	ck_assert_int_eq(status_of(ok), 200);
	ck_assert(has(ok, "\"text\": \"hello\""));
	ck_assert(has(ok, "request-id: req_standin"));
	ck_assert_int_eq(status_of(echo), 401);
	ck_assert(!has(ok, REAL_ANT) && !has(echo, REAL_ANT));
	ck_assert_msg(has(echo, "[redacted:ANTHROPIC_API_KEY]"), "%s", echo);

	log = test_read_file(standin_log);
	ck_assert(has(log, "\"key_ok\": true"));
	ck_assert(!has(log, "\"key_ok\": false"));
	ck_assert(has(log, "\"anthropic-beta\": \"tools-2024\""));
	ck_assert(has(log, "\"path\": \"/v1/messages?beta=true\""));
	ck_assert_msg(!has(log, t.key), "the turn key reached the provider");

	journal = journal_until("provider error");
	ck_assert(has(journal, "model.call"));
	ck_assert(has(journal, "\"input_tokens\":100"));
	ck_assert(!has(journal, REAL_ANT) && !has(journal, t.key));
	ck_assert(!has(journal, "\\\"hi\\\""));
	spdlog_path = paths_join(T.state, "spd.log");
	spdlog = test_read_file(spdlog_path);
	ck_assert(!has(spdlog, REAL_ANT) && !has(spdlog, t.key));
	free(spdlog_path);
	free(spdlog);
	free(journal);
	free(log);
	free(ok);
	free(echo);
}
END_TEST

/* Calls in a row stop exactly where the next worst case would pass the
 * cap, the turn's spend is the sum of the provider's usage, and the
 * refusal is a 402 naming turn, spent, reserved and cap. */
START_TEST(test_sequential_calls_stop_at_cap)
{
	struct turn t = begin("{\"cap_usd\":0.003}");
	long long cap = 3000000000LL, spent = 0;
	/* Worst case: every body byte an input token at 1 USD/Mtok, and
	 * max_tokens 50 at 10 USD/Mtok. */
	long long worst =
	    ((long long)strlen(MSG_BODY) + PRICE_HIDDEN_INPUT_TOKENS) *
		1000000LL +
	    50LL * 10000000LL;
	int expect = 0, ok = 0, refused = 0;
	char *last = NULL;
	json_t *row;

	while (spent + worst <= cap) {
		spent += CALL_PUSD;
		expect++;
	}
	for (int i = 0; i < expect + 3; i++) {
		char *r = post(&t, "/v1/messages", NULL, MSG_BODY);
		int st = status_of(r);

		if (st == 200) {
			ck_assert_int_eq(refused, 0);
			ok++;
			free(r);
		} else {
			ck_assert_int_eq(st, 402);
			refused++;
			free(last);
			last = r;
		}
	}
	ck_assert_int_eq(ok, expect);
	ck_assert_int_eq(refused, 3);
	ck_assert(has(last, "BUDGET-EXCEEDED"));
	ck_assert(has(last, t.id));
	ck_assert(has(last, "\"spent_usd\""));
	ck_assert(has(last, "\"reserved_usd\""));
	ck_assert(has(last, "\"cap_usd\""));
	row = turn_row(t.id);
	ck_assert_int_eq(pusd(row, "spent_usd"), (long long)expect * CALL_PUSD);
	ck_assert_int_eq(pusd(row, "reserved_usd"), 0);
	ck_assert_int_le(pusd(row, "spent_usd"), cap);
	json_decref(row);
	free(last);
}
END_TEST

/* Fifty calls at once on one turn: never more spent than the cap, and
 * every call that went through is charged. */
START_TEST(test_concurrent_calls_never_overshoot)
{
	struct turn t = begin("{\"cap_usd\":0.005}");
	char *req =
	    request_text(&t, "/v1/messages", "x-standin-mode: stream\r\n",
			 "{\"model\":\"test-model\",\"max_tokens\":50,"
			 "\"stream\":true}");
	int fds[50], ok = 0, refused = 0;
	json_t *row;

	for (int i = 0; i < 50; i++) {
		fds[i] = connect_port(t.port);
		test_send(fds[i], req, strlen(req));
	}
	for (int i = 0; i < 50; i++) {
		char *r = read_all(fds[i]);
		int st = status_of(r);

		close(fds[i]);
		if (st == 200) {
			char *body = dechunk(r);

			ck_assert(has(body, "message_stop"));
			free(body);
			ok++;
		} else {
			ck_assert_msg(st == 402, "status %d: %s", st, r);
			refused++;
		}
		free(r);
	}
	ck_assert_int_eq(ok + refused, 50);
	ck_assert_int_gt(ok, 0);
	ck_assert_int_gt(refused, 0);
	row = turn_row(t.id);
	ck_assert_int_le(pusd(row, "spent_usd"), 5000000000LL);
	ck_assert_int_eq(pusd(row, "spent_usd"), (long long)ok * CALL_PUSD);
	ck_assert_int_eq(pusd(row, "reserved_usd"), 0);
	json_decref(row);
	free(req);
}
END_TEST

/* No price, no call; a key that is unknown, of an ended turn, or
 * missing gets 401; none of it touches the provider. */
START_TEST(test_refused_keys_and_models)
{
	struct turn t = begin(NULL), other = begin(NULL), fake = t;
	char *r;
	json_t *o;

	r = post(&t, "/v1/messages", NULL,
		 "{\"model\":\"unpriced-model\",\"max_tokens\":5}");
	ck_assert_int_eq(status_of(r), 400);
	ck_assert(has(r, "NO-PRICE"));
	free(r);

	fake.key[20] = fake.key[20] == 'a' ? 'b' : 'a';
	r = post(&fake, "/v1/messages", NULL, MSG_BODY);
	ck_assert_int_eq(status_of(r), 401);
	ck_assert(has(r, "authentication_error"));
	free(r);

	r = test_fmt("{\"turn\":\"%s\"}", other.id);
	o = rpc("turn.end", r);
	free(r);
	ck_assert_ptr_nonnull(json_object_get(o, "result"));
	json_decref(o);
	r = post(&other, "/v1/messages", NULL, MSG_BODY);
	ck_assert_int_eq(status_of(r), 401);
	free(r);

	/* A Bearer key works like x-api-key; the live turn is unaffected. */
	r = test_fmt(
	    "POST /v1/chat/completions HTTP/1.1\r\nAuthorization: Bearer "
	    "%s\r\nContent-Length: %zu\r\n\r\n%s",
	    t.key, strlen(MSG_BODY), MSG_BODY);
	char *ok = raw_http(t.port, r, strlen(r));
	ck_assert_int_eq(status_of(ok), 200);
	ck_assert(has(ok, "chat.completion"));
	free(ok);
	free(r);
	r = test_read_file(standin_log);
	ck_assert(!has(r, "unpriced-model"));
	free(r);
}
END_TEST

/* Malformed and hostile requests: each a clear 4xx, journaled, and
 * another turn's call still goes through. */
START_TEST(test_bad_requests)
{
	struct turn t = begin(NULL);
	char big[80 * 1024], *r, *journal;
	char *body = malloc(70000);
	const struct {
		const char *req;
		int status;
	} cases[] = {
	    {"POST /v1/messages HTTP/1.1\r\nContent-Length: 5\r\n"
	     "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	     400},
	    {"POST /v1/messages HTTP/1.1\r\nContent-Length: 2\r\n"
	     "Content-Length: 2\r\n\r\n{}",
	     400},
	    {"POST http://evil.example/v1/messages HTTP/1.1\r\n"
	     "Content-Length: 2\r\n\r\n{}",
	     400},
	    {"POST /v1/models HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}", 404},
	    {"POST /v1/messages/../../admin HTTP/1.1\r\n"
	     "Content-Length: 2\r\n\r\n{}",
	     404},
	    {"GET /v1/messages HTTP/1.1\r\n\r\n", 405},
	    {"POST /v1/messages HTTP/1.1\r\nTransfer-Encoding: gzip, chunked"
	     "\r\n\r\n",
	     501},
	    {"NONSENSE\r\n\r\n", 400},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		r = raw_http(t.port, cases[i].req, strlen(cases[i].req));
		ck_assert_msg(status_of(r) == cases[i].status,
			      "case %zu: expected %d, got: %s", i,
			      cases[i].status, r);
		free(r);
	}
	memset(big, 'a', sizeof(big));
	memcpy(big, "POST /v1/messages HTTP/1.1\r\nx-long: ", 36);
	memcpy(big + sizeof(big) - 4, "\r\n\r\n", 4);
	r = raw_http(t.port, big, sizeof(big));
	ck_assert_int_eq(status_of(r), 431);
	free(r);
	memset(body, ' ', 69999);
	body[69999] = '\0';
	r = post(&t, "/v1/messages", NULL, body);
	ck_assert_int_eq(status_of(r), 413);
	free(r);

	r = post(&t, "/v1/messages", NULL, MSG_BODY);
	ck_assert_int_eq(status_of(r), 200);
	free(r);
	journal = journal_until("refused 413");
	ck_assert(has(journal, "refused 400"));
	ck_assert(has(journal, "refused 404"));
	ck_assert(has(journal, "refused 431"));
	ck_assert(has(journal, "both Content-Length and Transfer-Encoding") ||
		  has(journal, "malformed request"));
	free(journal);
	free(body);
}
END_TEST

/* A streaming call of turn t sent on a new connection, returned: the
 * stand-in sends its first event and holds the rest back until the file
 * go exists. */
static int held_stream(const struct turn *t, const char *go)
{
	char *hdr =
	    test_fmt("x-standin-mode: stream\r\nx-standin-wait: %s\r\n", go);
	char *req = request_text(t, "/v1/messages", hdr,
				 "{\"model\":\"test-model\",\"max_tokens\":50,"
				 "\"stream\":true}");
	int fd = connect_port(t->port);

	test_send(fd, req, strlen(req));
	free(req);
	free(hdr);
	return fd;
}

/* The first event reaches the client while the provider is still
 * holding the rest back; the stream's usage (the last cumulative value,
 * not a sum) is what the turn is charged. */
START_TEST(test_stream_passes_through_as_it_arrives)
{
	struct turn t = begin(NULL);
	char *go = test_fmt("%s.go", standin_log);
	int fd = held_stream(&t, go);
	char buf[65536];
	size_t len = 0;
	char *log, *rest;
	json_t *row;

	for (;;) {
		struct pollfd pf = {fd, POLLIN, 0};
		ssize_t n;
		char *body;
		bool seen;

		buf[len] = '\0';
		body = dechunk(buf);
		seen = has(body, "message_start");
		free(body);
		if (seen)
			break;
		ck_assert_int_eq(poll(&pf, 1, 30000), 1);
		n = read(fd, buf + len, sizeof(buf) - len - 1);
		ck_assert_int_gt(n, 0);
		len += (size_t)n;
	}
	log = test_read_file(standin_log);
	ck_assert_msg(!has(log, "\"finished\": true"),
		      "the stand-in finished before the first event arrived");
	free(log);
	test_write_file(go, "go");
	rest = read_replies(fd, buf, len, 1);
	close(fd);
	ck_assert(has(rest + len, "\r\n0\r\n\r\n"));
	{
		char *all = rest, *body;

		body = dechunk(all);
		ck_assert(has(body, "message_stop"));
		ck_assert(has(body, "\"output_tokens\": 50"));
		free(body);
	}
	row = turn_row(t.id);
	ck_assert_int_eq(pusd(row, "spent_usd"), CALL_PUSD);
	json_decref(row);
	free(rest);
	free(go);
}
END_TEST

/* A provider that stalls or drops mid-stream: the client gets a clear
 * end (504, or a truncated chunked body), the turn keeps the whole
 * reservation, the call is journaled, and other calls still work. */
START_TEST(test_stall_and_drop_keep_reservation)
{
	struct turn t = begin(NULL);
	const char *body = "{\"model\":\"test-model\",\"max_tokens\":50,"
			   "\"stream\":true}";
	long long worst =
	    ((long long)strlen(body) + PRICE_HIDDEN_INPUT_TOKENS) * 1000000LL +
	    50LL * 10000000LL;
	char *r;
	json_t *row;

	r = post(&t, "/v1/messages", "x-standin-mode: drop\r\n", body);
	ck_assert_int_eq(status_of(r), 200);
	ck_assert(!has(r, "\r\n0\r\n\r\n"));
	free(r);
	row = turn_row(t.id);
	ck_assert_int_eq(pusd(row, "spent_usd"), worst);
	json_decref(row);

	r = post(&t, "/v1/messages", "x-standin-mode: stall\r\n", body);
	ck_assert(!has(r, "\r\n0\r\n\r\n"));
	free(r);
	row = turn_row(t.id);
	ck_assert_int_eq(pusd(row, "spent_usd"), 2 * worst);
	ck_assert_int_eq(pusd(row, "reserved_usd"), 0);
	json_decref(row);

	r = post(&t, "/v1/messages", "x-standin-mode: fail\r\n", MSG_BODY);
	ck_assert_int_eq(status_of(r), 500);
	free(r);
	r = post(&t, "/v1/messages", NULL, MSG_BODY);
	ck_assert_int_eq(status_of(r), 200);
	free(r);
	r = journal_until("stalled");
	ck_assert(has(r, "stalled"));
	ck_assert(has(r, "broken"));
	free(r);
}
END_TEST

/* A client that goes away mid-stream is still charged what the
 * provider reports. */
START_TEST(test_client_disconnect_still_charged)
{
	struct turn t = begin(NULL);
	char *go = test_fmt("%s.go2", standin_log);
	int fd = held_stream(&t, go);
	char buf[4096];
	json_t *row = NULL;
	char *j;

	ck_assert_int_gt(read(fd, buf, sizeof(buf)), 0);
	close(fd);
	test_write_file(go, "go");
	j = journal_until("\"client_gone\":true");
	ck_assert(has(j, "\"client_gone\":true"));
	row = turn_row(t.id);
	ck_assert_int_eq(pusd(row, "spent_usd"), CALL_PUSD);
	json_decref(row);
	free(j);
	free(go);
}
END_TEST

/* Caps come from spd.conf: the operator may not pass cap-max. */
START_TEST(test_caps_from_config)
{
	json_t *o = rpc("turn.begin", "{\"cap_usd\":3}");

	ck_assert_ptr_nonnull(json_object_get(o, "error"));
	json_decref(o);
	o = rpc("turn.begin", "{\"cap_usd\":2}");
	ck_assert_ptr_nonnull(json_object_get(o, "result"));
	json_decref(o);
}
END_TEST

/* How many times needle occurs in hay. */
static int count_of(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* The stand-in's log once n of its lines hold needle, or after 10 s: it
 * logs a request's "finished" after the reply has gone out, which the
 * client may have read first. */
static char *log_with(const char *needle, int n)
{
	char *log = test_read_file(standin_log);

	for (int i = 0; i < 200 && count_of(log, needle) < n; i++) {
		free(log);
		usleep(50000);
		log = test_read_file(standin_log);
	}
	return log;
}

/* How many journal rows hold needle once n of them have been committed
 * (group commit: waits up to 10 s for them). */
static int journal_rows(const char *needle, int n)
{
	int rows = 0;
	char *r;

	for (int i = 0; i < 100 && rows < n; i++) {
		r = journal_until(needle);
		rows = count_of(r, needle);
		free(r);
		if (rows < n)
			usleep(100 * 1000);
	}
	return rows;
}

/* One request on the kept-alive connection fd; its reply, whole. */
static char *ask(int fd, const char *req)
{
	test_send(fd, req, strlen(req));
	return read_all(fd);
}

/* Whether the server ended the connection: end of file, with nothing
 * more sent (at most 30 s). */
static bool ended(int fd)
{
	struct pollfd pf = {fd, POLLIN, 0};
	char b;

	return poll(&pf, 1, 30000) == 1 && read(fd, &b, 1) == 0;
}

/* HTTP/1.1 keep-alive: two calls (one streamed) on one connection, both
 * answered, charged and journaled; two requests sent at once (pipelined)
 * both answered in order; "Connection: close" ends the connection after
 * its reply. */
START_TEST(test_keepalive_calls_in_sequence)
{
	struct turn t = begin(NULL);
	int fd = connect_port(t.port);
	char *plain = request_text(&t, "/v1/messages", NULL, MSG_BODY);
	char *stream =
	    request_text(&t, "/v1/messages", "x-standin-mode: stream\r\n",
			 "{\"model\":\"test-model\",\"max_tokens\":50,"
			 "\"stream\":true}");
	char *last =
	    request_text(&t, "/v1/messages", "Connection: close\r\n", MSG_BODY);
	char *r, *body, *two, *needle = test_fmt("(%s)", t.id);
	json_t *row;

	r = ask(fd, plain);
	ck_assert_int_eq(status_of(r), 200);
	ck_assert_msg(!has(r, "Connection: close"), "%s", r);
	free(r);
	r = ask(fd, stream);
	ck_assert_int_eq(status_of(r), 200);
	body = dechunk(r);
	ck_assert(has(body, "message_stop"));
	free(body);
	free(r);
	row = turn_row(t.id);
	ck_assert_int_eq(pusd(row, "spent_usd"), 2 * CALL_PUSD);
	json_decref(row);

	two = test_fmt("%s%s", plain, plain);
	test_send(fd, two, strlen(two));
	r = read_replies(fd, "", 0, 2);
	ck_assert_int_eq(count_of(r, "HTTP/1.1 200 OK"), 2);
	free(r);
	r = ask(fd, last);
	ck_assert_int_eq(status_of(r), 200);
	ck_assert(has(r, "Connection: close"));
	ck_assert_msg(ended(fd), "spd kept the connection after "
				 "Connection: close");
	close(fd);
	free(r);
	row = turn_row(t.id);
	ck_assert_int_eq(pusd(row, "spent_usd"), 5 * CALL_PUSD);
	json_decref(row);
	/* Each call its own journal row (group commit: wait for all). */
	ck_assert_int_eq(journal_rows(needle, 5), 5);
	free(needle);
	free(two);
	free(plain);
	free(stream);
	free(last);
}
END_TEST

/* spd keeps its provider connections between calls (and its easy
 * handles): a provider that lets a kept connection go between two calls
 * (x-standin-close: closed after the reply, which did not say so) costs
 * the next call nothing but a new connection.  Every call answered,
 * charged and journaled once. */
START_TEST(test_provider_closes_kept_connection)
{
	struct turn t = begin(NULL);
	int fd = connect_port(t.port);
	char *plain = request_text(&t, "/v1/messages", NULL, MSG_BODY);
	char *closing = request_text(&t, "/v1/messages",
				     "x-standin-close: 1\r\n", MSG_BODY);
	char *stream = request_text(
	    &t, "/v1/messages",
	    "x-standin-mode: stream\r\nx-standin-close: 1\r\n",
	    "{\"model\":\"test-model\",\"max_tokens\":50,\"stream\":true}");
	char *r, *body, *needle = test_fmt("(%s)", t.id);
	json_t *row;

	for (int i = 0; i < 8; i++) {
		r = ask(fd, i % 3 == 0 ? closing : i % 3 == 1 ? stream : plain);
		ck_assert_msg(status_of(r) == 200, "call %d: %s", i, r);
		body = dechunk(r);
		ck_assert_msg(has(body, i % 3 == 1 ? "message_stop" : "hello"),
			      "call %d: %s", i, r);
		free(body);
		free(r);
		/* The provider's end of a closed connection reaches spd
		 * while curl does not watch it. */
		if (i % 3 != 2)
			usleep(50 * 1000);
	}
	close(fd);
	row = turn_row(t.id);
	ck_assert_int_eq(pusd(row, "spent_usd"), 8 * CALL_PUSD);
	ck_assert_int_eq(pusd(row, "reserved_usd"), 0);
	json_decref(row);
	ck_assert_int_eq(journal_rows(needle, 8), 8);
	free(needle);
	free(plain);
	free(closing);
	free(stream);
}
END_TEST

/* 32 clients at once, each on its own kept-alive connection, four calls
 * each, Anthropic's and OpenAI's, whole and streamed, all to one
 * provider host: each client gets its own reply, whole (an easy handle
 * or a provider connection reused by a call must carry nothing of the
 * one before, and a reply's pieces written together must not cross),
 * and every call is charged and journaled exactly once, nothing left
 * reserved. */
#define CONC_CLIENTS 32
#define CONC_ROUNDS 4
START_TEST(test_concurrent_keepalive_calls_each_their_own)
{
	struct turn t = begin("{\"cap_usd\":1}");
	static const struct {
		const char *path, *headers, *body, *expect;
	} kinds[] = {
	    {"/v1/messages", NULL, MSG_BODY, "\"type\": \"message\""},
	    {"/v1/chat/completions", NULL,
	     "{\"model\":\"test-model\",\"max_tokens\":50,\"messages\":[]}",
	     "chat.completion"},
	    {"/v1/messages", "x-standin-mode: stream\r\n",
	     "{\"model\":\"test-model\",\"max_tokens\":50,\"stream\":true}",
	     "message_stop"},
	    {"/v1/chat/completions", "x-standin-mode: stream\r\n",
	     "{\"model\":\"test-model\",\"max_tokens\":50,\"stream\":true,"
	     "\"messages\":[]}",
	     "[DONE]"},
	};
	int fds[CONC_CLIENTS];
	char *r, *needle = test_fmt("(%s)", t.id);
	json_t *row;

	for (int i = 0; i < CONC_CLIENTS; i++)
		fds[i] = connect_port(t.port);
	for (int round = 0; round < CONC_ROUNDS; round++) {
		/* Every client's request out before any reply is read. */
		for (int i = 0; i < CONC_CLIENTS; i++) {
			int k = (i + round) % 4;
			char *req = request_text(
			    &t, kinds[k].path, kinds[k].headers, kinds[k].body);

			test_send(fds[i], req, strlen(req));
			free(req);
		}
		for (int i = 0; i < CONC_CLIENTS; i++) {
			int k = (i + round) % 4;
			char *body;

			r = read_all(fds[i]);
			ck_assert_msg(status_of(r) == 200, "client %d: %s", i,
				      r);
			body = dechunk(r);
			ck_assert_msg(
			    has(body, kinds[k].expect) &&
				!has(body, kinds[(k + 1) % 4].expect) &&
				!has(body, kinds[(k + 3) % 4].expect),
			    "client %d round %d got another's reply: %s", i,
			    round, body);
			ck_assert_msg(has(r, "\r\n0\r\n\r\n"),
				      "client %d: no last chunk: %s", i, r);
			free(body);
			free(r);
		}
	}
	for (int i = 0; i < CONC_CLIENTS; i++)
		close(fds[i]);
	row = turn_row(t.id);
	ck_assert_int_eq(pusd(row, "spent_usd"),
			 (long long)CONC_CLIENTS * CONC_ROUNDS * CALL_PUSD);
	ck_assert_int_eq(pusd(row, "reserved_usd"), 0);
	json_decref(row);
	ck_assert_int_eq(journal_rows(needle, CONC_CLIENTS * CONC_ROUNDS),
			 CONC_CLIENTS * CONC_ROUNDS);
	free(needle);
}
END_TEST

/* The key is checked on every request of a connection: a turn ended
 * between two requests is refused on the second. */
START_TEST(test_keepalive_key_checked_per_request)
{
	struct turn t = begin(NULL);
	int fd = connect_port(t.port);
	char *req = request_text(&t, "/v1/messages", NULL, MSG_BODY);
	char *r, *p = test_fmt("{\"turn\":\"%s\"}", t.id), *log;
	json_t *o;

	r = ask(fd, req);
	ck_assert_int_eq(status_of(r), 200);
	free(r);
	o = rpc("turn.end", p);
	ck_assert_ptr_nonnull(json_object_get(o, "result"));
	json_decref(o);
	r = ask(fd, req);
	ck_assert_int_eq(status_of(r), 401);
	ck_assert(has(r, "authentication_error"));
	free(r);
	close(fd);
	log = log_with("\"finished\": true", 1);
	ck_assert_int_eq(count_of(log, "\"finished\": true"), 1);
	free(log);
	free(p);
	free(req);
}
END_TEST

/* Request smuggling on a kept-alive connection: after a good call, a
 * request with both Content-Length and Transfer-Encoding (its chunked
 * body ending where a second request begins) is refused, the connection
 * ends, and the request hidden in it never reaches the provider. */
START_TEST(test_keepalive_smuggling_refused)
{
	struct turn t = begin(NULL);
	int fd = connect_port(t.port);
	char *req = request_text(&t, "/v1/messages", NULL, MSG_BODY);
	char *inner =
	    request_text(&t, "/v1/messages", "x-smuggled: yes\r\n", MSG_BODY);
	char *bad = test_fmt("POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
			     "x-api-key: %s\r\nContent-Length: 5\r\n"
			     "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n%s",
			     t.key, inner);
	char *r, *log, *journal;

	r = ask(fd, req);
	ck_assert_int_eq(status_of(r), 200);
	free(r);
	r = ask(fd, bad);
	ck_assert_int_eq(status_of(r), 400);
	ck_assert(has(r, "Connection: close"));
	ck_assert_msg(ended(fd), "spd read on after a smuggling attempt");
	free(r);
	close(fd);
	/* http-parser refuses it first (an unexpected Content-Length);
	 * spd's own check would say both are there. */
	journal = journal_until("refused 400 BAD-REQUEST");
	ck_assert_msg(has(journal, "refused 400 BAD-REQUEST: malformed "
				   "request: unexpected content-length") ||
			  has(journal, "refused 400 BAD-REQUEST: both "
				       "Content-Length and Transfer-Encoding"),
		      "the smuggling attempt was not journaled: %s", journal);
	free(journal);
	log = log_with("\"finished\": true", 1);
	ck_assert_msg(!has(log, "x-smuggled"),
		      "the smuggled request reached the provider");
	ck_assert_int_eq(count_of(log, "\"finished\": true"), 1);
	free(log);
	free(bad);
	free(inner);
	free(req);
}
END_TEST

/* A kept-alive connection with no request under way is closed after
 * broker.keepalive-timeout; one whose next request is under way is not
 * cut by it. */
START_TEST(test_keepalive_idle_timeout)
{
	struct turn t;
	int fd;
	char *req, *r;

	test_spd_cleanup(&T);
	start_spd("[broker]\n\tkeepalive-timeout = 1\n");
	t = begin(NULL);
	req = request_text(&t, "/v1/messages", NULL, MSG_BODY);
	fd = connect_port(t.port);
	r = ask(fd, req);
	ck_assert_int_eq(status_of(r), 200);
	free(r);
	ck_assert_msg(ended(fd), "an idle kept-alive connection stayed open");
	close(fd);
	free(req);
}
END_TEST

/* spctl turn begin --json, spctl turns, spctl turn end. */
START_TEST(test_spctl_turns)
{
	char *out = NULL, *err = NULL, *id;
	json_t *o;

	char *b[] = {"--json", "turn", "begin", "--cap", "0.25", NULL};
	ck_assert_int_eq(test_spctl(&T, b, NULL, &out, &err), 0);
	o = json_loads(out, 0, NULL);
	ck_assert_ptr_nonnull(o);
	ck_assert(has(json_string_value(json_object_get(o, "key")), "sk-spd-"));
	ck_assert(has(json_string_value(json_object_get(o, "openai_base_url")),
		      "/v1"));
	id = strdup(json_string_value(json_object_get(o, "turn")));
	json_decref(o);
	free(out);
	free(err);
	char *l[] = {"turns", NULL};
	ck_assert_int_eq(test_spctl(&T, l, NULL, &out, &err), 0);
	ck_assert(has(out, id) && has(out, "live"));
	free(out);
	free(err);
	char *e[] = {"turn", "end", id, NULL};
	ck_assert_int_eq(test_spctl(&T, e, NULL, &out, &err), 0);
	free(out);
	free(err);
	char *l2[] = {"--json", "turns", NULL};
	ck_assert_int_eq(test_spctl(&T, l2, NULL, &out, &err), 0);
	ck_assert(has(out, "\"ended\":true"));
	free(out);
	free(err);
	free(id);
}
END_TEST

/* ---- spctl agent ---------------------------------------------------- */

/* The port of 127.0.0.1 inside an agent's run that reaches the broker
 * (daemon/methods/m_run.c). */
#define AGENT_BROKER_PORT 8377

struct session {
	char id[TEST_SESSION_ID_LEN + 1], token[TEST_SESSION_TOKEN_LEN + 1];
	char *worktree;
};

/* A repository holding the test agent (tests/lib/broker_agent.py) and
 * a session of it over the socket. */
static void agent_session_named(struct session *ses, const char *feature)
{
	char *repo = paths_join(T.dir, "repo");
	char *git = paths_join(repo, ".git");
	char *params =
	    test_fmt("{\"repo\":\"%s\",\"feature\":\"%s\"}", repo, feature);
	char *files = test_fmt("cp '%s/../tests/lib/broker_agent.py' agent.py; "
			       "echo hello > README",
			       test_build_dir());

	if (access(git, F_OK) != 0)
		test_make_repo(repo, files);
	test_session_start(&T, params, ses->id, ses->token);
	ses->worktree = test_fmt("%s/worktrees/%s", T.state, ses->id);
	free(files);
	free(params);
	free(git);
	free(repo);
}

static void agent_session(struct session *ses)
{
	agent_session_named(ses, "agent");
}

/* A listener on the host's loopback that the agent must never reach. */
static int host_listener(int *ret_port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(0x7f000001)};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(fd, 8), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*ret_port = ntohs(a.sin_port);
	return fd;
}

/* The session's turns as turn.list rows (a new reference). */
static json_t *session_turns(const char *sid)
{
	char *params = test_fmt("{\"session\":\"%s\"}", sid);
	json_t *o = rpc("turn.list", params), *a;

	a = json_incref(json_object_get(json_object_get(o, "result"), "turns"));
	json_decref(o);
	free(params);
	return a;
}

/* spctl agent runs a small agent in the session's worktree: its call
 * goes through the broker with the turn's key (the real key reaches only
 * the stand-in and is nowhere in the agent's environment or output),
 * its file lands in the worktree and its note in its own home, it
 * reaches nothing else on any loopback (the host's listener sees
 * nothing), and its turn ends, settled, when it exits. */
START_TEST(test_spctl_agent_through_broker)
{
	struct session ses;
	int lport, lfd = host_listener(&lport), st;
	char *out = NULL, *err = NULL, *file, *log, *note, *ports, *path;
	json_t *turns, *row;

	agent_session(&ses);
	/* A live key of another turn (the operator's), left where the agent
	 * can read it. */
	struct turn other = begin(NULL);
	path = test_fmt("%s/foreign-key.txt", ses.worktree);
	test_write_file(path, other.key);
	free(path);
	ports = test_fmt("%d", lport);
	char *sp = test_fmt("%d", standin_port), *inside = test_fmt("%d", 8378);
	char *args[] = {"agent", "--session", ses.id,	  "--yes",
			"--",	 "python3",   "agent.py", ports,
			sp,	 inside,      NULL};
	st = test_spctl(&T, args, NULL, &out, &err);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "spctl agent: %d\n%s\n%s", st, out, err);

	/* The model's reply, written by the agent, is in the worktree. */
	path = test_fmt("%s/agent-out.txt", ses.worktree);
	file = test_read_file(path);
	free(path);
	ck_assert_msg(has(file, "hello"), "agent-out.txt: %s\n%s", file, out);
	path = test_fmt("%s/agent-homes/%s/agent-note", T.state, ses.id);
	note = test_read_file(path);
	free(path);
	ck_assert_msg(has(note, "remembered"), "no note in the agent's home");

	/* The turn key went in, the real key only to the provider. */
	ck_assert(has(out, "ANTHROPIC_API_KEY") && has(out, "OPENAI_BASE_URL"));
	ck_assert_msg(has(out, "http://127.0.0.1:8377"), "%s", out);
	ck_assert(!has(out, REAL_ANT) && !has(out, REAL_OAI));
	ck_assert(!has(err, REAL_ANT) && !has(err, REAL_OAI));
	/* The turn key it printed, plain and base64-encoded, came back as
	 * the marker of the minted set: neither form is in the output. */
	ck_assert_msg(has(out, "turn key: [redacted:turn."), "%s", out);
	ck_assert_msg(has(out, "turn key b64: [redacted:turn."), "%s", out);
	ck_assert_msg(!has(out, "sk-spd-") && !has(err, "sk-spd-"), "%s", out);
	ck_assert_msg(!has(out, "c2stc3BkL"), "base64 of the key: %s", out);
	log = test_read_file(standin_log);
	ck_assert(has(log, "\"key_ok\": true"));
	ck_assert(!has(log, "\"key_ok\": false"));
	ck_assert(!has(log, "sk-spd-"));

	/* Nothing else answers: not the host's listener, not the
	 * stand-in's port, not another port inside; no port of its own,
	 * no IPv6. */
	ck_assert_msg(has(out, "reply: hello"), "%s", out);
	ck_assert_msg(has(out, "probe foreign key: 401"), "%s", out);
	char *want[] = {test_fmt("probe port %d: refused", lport),
			test_fmt("probe port %d: refused", standin_port),
			test_fmt("probe port %d: refused", 8378),
			strdup("probe bind: refused"),
			strdup("probe inet6: refused")};
	for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
		ck_assert_msg(has(out, want[i]), "%s not in\n%s", want[i], out);
		free(want[i]);
	}
	ck_assert_int_lt(accept(lfd, NULL, NULL), 0);
	ck_assert_int_eq(errno, EAGAIN);

	/* One turn for the session, ended with the run, charged one call. */
	turns = session_turns(ses.id);
	ck_assert_int_eq(json_array_size(turns), 1);
	row = json_array_get(turns, 0);
	ck_assert(json_is_true(json_object_get(row, "ended")));
	ck_assert_str_eq(json_string_value(json_object_get(row, "end_reason")),
			 "agent exited");
	ck_assert_int_eq(json_integer_value(json_object_get(row, "calls")), 1);
	ck_assert_int_eq(pusd(row, "spent_usd"), CALL_PUSD);
	json_decref(turns);

	/* spctl turns shows it. */
	free(out);
	free(err);
	char *tl[] = {"turns", "--session", ses.id, NULL};
	ck_assert_int_eq(test_spctl(&T, tl, NULL, &out, &err), 0);
	ck_assert_msg(has(out, "agent exited") || has(out, "ended"), "%s", out);

	close(lfd);
	free(sp);
	free(inside);
	free(ports);
	free(note);
	free(log);
	free(file);
	free(out);
	free(err);
	free(ses.worktree);
}
END_TEST

/* ---- turns' lifetimes, keys, routes --------------------------------- */

/* A key dies after broker.idle-timeout seconds without a call: it is
 * refused, and the sweep ends its turn as "idle". */
START_TEST(test_idle_timeout_expires_key)
{
	struct turn t;
	json_t *row = NULL;
	char *r;

	test_spd_cleanup(&T);
	start_spd("[broker]\n\tidle-timeout = 1\n");
	t = begin(NULL);
	for (int i = 0; i < 100; i++) {
		json_decref(row);
		row = turn_row(t.id);
		if (json_is_true(json_object_get(row, "ended")))
			break;
		usleep(100 * 1000);
	}
	ck_assert(json_is_true(json_object_get(row, "ended")));
	ck_assert_str_eq(json_string_value(json_object_get(row, "end_reason")),
			 "idle");
	json_decref(row);
	r = post(&t, "/v1/messages", NULL, MSG_BODY);
	ck_assert_int_eq(status_of(r), 401);
	free(r);
	r = test_read_file(standin_log);
	ck_assert_msg(!has(r, "/v1/messages"), "an expired key was forwarded");
	free(r);
}
END_TEST

/*
 * The session's signed statement carries its model calls as the journal
 * has them: two calls of the stand-in (100 input and 50 output tokens
 * each, at test-model's prices CALL_PUSD each) and one refused, summed
 * after spd restarted (the broker's turns, in memory, are gone by then):
 * the spend is what the stand-in's usage implies and what the turn was
 * charged.  And it names the session's journal rows: the first and last
 * of them, with the chain's hashes there.
 */
START_TEST(test_statement_carries_model_calls)
{
	struct session s;
	struct turn t;
	char *p, *r, *repo = paths_join(T.dir, "repo");
	json_t *o, *row, *st, *mc, *m, *rows, *evs;
	long long charged;
	int64_t first, last;

	agent_session_named(&s, "spend");
	p = test_fmt("{\"session\":\"%s\"}", s.id);
	t = begin(p);
	free(p);
	for (int i = 0; i < 2; i++) {
		r = post(&t, "/v1/messages", NULL, MSG_BODY);
		ck_assert_int_eq(status_of(r), 200);
		free(r);
	}
	r = post(&t, "/v1/messages", NULL,
		 "{\"model\":\"no-such-model\",\"max_tokens\":10,"
		 "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
	ck_assert_int_ne(status_of(r), 200);
	free(r);
	row = turn_row(t.id);
	charged = pusd(row, "spent_usd");
	ck_assert_int_eq(charged, 2 * CALL_PUSD);
	json_decref(row);

	/* A restart: what the broker kept of the turn is gone. */
	ck_assert_int_eq(test_spd_stop(&T), 0);
	test_spd_start(&T);
	p = test_fmt("{\"id\":\"%s\"}", s.id);
	o = rpc("session.verify", p);
	free(p);
	ck_assert_msg(
	    json_object_get(
		json_object_get(json_object_get(o, "result"), "attestation"),
		"notes_ref"),
	    "verify signed nothing: %s", json_dumps(o, 0));
	json_decref(o);
	p = test_fmt("{\"repo\":\"%s\",\"commit\":\"spd/spend\"}", repo);
	o = rpc("attest.show", p);
	free(p);
	st = json_object_get(
	    json_object_get(json_object_get(o, "result"), "statement"),
	    "predicate");
	mc = json_object_get(st, "model_calls");
	ck_assert_msg(json_is_object(mc), "no model calls: %s",
		      json_dumps(o, 0));
	ck_assert_int_eq(json_integer_value(json_object_get(mc, "calls")), 2);
	ck_assert_int_eq(json_integer_value(json_object_get(mc, "refused")), 1);
	ck_assert_int_eq(
	    json_integer_value(json_object_get(mc, "input_tokens")), 200);
	ck_assert_int_eq(
	    json_integer_value(json_object_get(mc, "output_tokens")), 100);
	ck_assert_int_eq(pusd(mc, "spent_usd"), 2 * CALL_PUSD);
	ck_assert_int_eq(json_array_size(json_object_get(mc, "providers")), 1);
	ck_assert_str_eq(json_string_value(json_array_get(
			     json_object_get(mc, "providers"), 0)),
			 "anthropic");
	m = json_array_get(json_object_get(mc, "by_model"), 0);
	ck_assert_str_eq(json_string_value(json_object_get(m, "model")),
			 "test-model");
	ck_assert_int_eq(json_integer_value(json_object_get(m, "calls")), 2);
	ck_assert_int_eq(pusd(m, "spent_usd"), 2 * CALL_PUSD);

	/* The rows: the session's first and last as of the signing, with
	 * the hashes the journal has for them. */
	rows = json_object_get(json_object_get(st, "journal"), "session_rows");
	first = json_integer_value(json_object_get(rows, "first_id"));
	last = json_integer_value(json_object_get(rows, "last_id"));
	ck_assert_msg(first > 0 && last > first, "rows: %s",
		      json_dumps(rows, 0));
	ck_assert_int_le(last, json_integer_value(json_object_get(
				   json_object_get(st, "journal"), "head_id")));
	{
		json_t *q, *e;
		size_t i, n = 0;
		const char *fh = NULL, *lh = NULL;

		p = test_fmt("{\"session\":\"%s\",\"limit\":1000}", s.id);
		q = rpc("journal.query", p);
		free(p);
		evs = json_object_get(json_object_get(q, "result"), "events");
		json_array_foreach(evs, i, e)
		{
			int64_t id =
			    json_integer_value(json_object_get(e, "id"));

			if (id > last)
				continue;
			n++;
			if (id == first)
				fh = json_string_value(
				    json_object_get(e, "hash"));
			if (id == last)
				lh = json_string_value(
				    json_object_get(e, "hash"));
		}
		ck_assert_int_eq(
		    json_integer_value(json_object_get(rows, "count")), n);
		ck_assert_int_eq(json_integer_value(json_object_get(
				     json_array_get(evs, 0), "id")),
				 first);
		ck_assert_msg(fh && lh,
			      "rows %lld and %lld not in the "
			      "session's: %s",
			      (long long)first, (long long)last,
			      json_dumps(q, 0));
		ck_assert_str_eq(
		    fh, json_string_value(json_object_get(rows, "first_hash")));
		ck_assert_str_eq(
		    lh, json_string_value(json_object_get(rows, "last_hash")));
		json_decref(q);
	}
	json_decref(o);
	free(repo);
	free(s.worktree);
}
END_TEST

/* A turn dies with its session (session.end) and with its attempt (a
 * guard finding); a session token cannot use another session's turn
 * through model.call. */
START_TEST(test_turn_dies_with_session)
{
	struct session a, b;
	struct turn ta, tb;
	char *p, *r, *out = NULL;
	json_t *o, *row;

	agent_session_named(&a, "one");
	agent_session_named(&b, "two");
	p = test_fmt("{\"session\":\"%s\"}", a.id);
	ta = begin(p);
	free(p);
	p = test_fmt("{\"session\":\"%s\"}", b.id);
	tb = begin(p);
	free(p);

	/* B's token naming A's turn: no such turn for it. */
	{
		int fd = test_spd_connect(&T);
		char *line = test_fmt(
		    "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"model.call\","
		    "\"params\":{\"token\":\"%s\",\"turn\":\"%s\",\"api\":"
		    "\"anthropic\",\"body\":%s}}\n",
		    b.token, ta.id, MSG_BODY);

		test_send(fd, line, strlen(line));
		r = test_recv_line(fd, 20000);
		ck_assert_msg(has(r, "UNAUTHORIZED"), "%s", r);
		free(r);
		free(line);
		close(fd);
	}

	/* session.end: A's key is refused, its turn ended. */
	p = test_fmt("{\"id\":\"%s\"}", a.id);
	o = rpc("session.end", p);
	free(p);
	ck_assert_msg(json_object_get(o, "result"), "%s", json_dumps(o, 0));
	json_decref(o);
	r = post(&ta, "/v1/messages", NULL, MSG_BODY);
	ck_assert_int_eq(status_of(r), 401);
	free(r);
	row = turn_row(ta.id);
	ck_assert(json_is_true(json_object_get(row, "ended")));
	json_decref(row);

	/* B still works; then its attempt ends (the operator's run changes
	 * .git/config, a guard finding) and so does its key. */
	r = post(&tb, "/v1/messages", NULL, MSG_BODY);
	ck_assert_int_eq(status_of(r), 200);
	free(r);
	{
		char *repo = paths_join(T.dir, "repo");
		char *params =
		    test_fmt("{\"session\":\"%s\",\"yes\":true,\"writable\":"
			     "[\"%s/.git\"],\"argv\":[\"sh\",\"-c\",\"git -c "
			     "safe.directory='*' --git-dir='%s/.git' config "
			     "user.name evil\"]}",
			     b.id, repo, repo);

		o = rpc("cmd.run", params);
		out = json_dumps(o, 0);
		ck_assert_msg(has(out, "GIT-CHANGED"), "%s", out);
		free(out);
		json_decref(o);
		free(params);
		free(repo);
	}
	r = post(&tb, "/v1/messages", NULL, MSG_BODY);
	ck_assert_int_eq(status_of(r), 401);
	free(r);
	row = turn_row(tb.id);
	ck_assert(json_is_true(json_object_get(row, "ended")));
	ck_assert_int_eq(pusd(row, "spent_usd"), CALL_PUSD);
	json_decref(row);
	free(a.worktree);
	free(b.worktree);
}
END_TEST

/* A turn still live when spd stops ends in the journal, with what it
 * spent: a turn.begin without its turn.end would leave the audit trail
 * with a turn that never settled.  Its key is refused by the next spd. */
START_TEST(test_turn_ends_when_spd_stops)
{
	struct turn t = begin(NULL);
	char *r, *rows, *line, *eol;

	r = post(&t, "/v1/messages", NULL, MSG_BODY);
	ck_assert_int_eq(status_of(r), 200);
	free(r);
	ck_assert_int_eq(test_spd_stop(&T), 0);
	rows = journal_until("spd stopped");
	line = strstr(rows, "turn.end");
	while (line && (eol = strchr(line, '\n')) &&
	       !memmem(line, (size_t)(eol - line), t.id, strlen(t.id)))
		line = strstr(eol, "turn.end");
	ck_assert_msg(line, "no turn.end for %s: %s", t.id, rows);
	eol = strchr(line, '\n');
	ck_assert_msg(memmem(line, eol ? (size_t)(eol - line) : strlen(line),
			     "spd stopped", 11),
		      "%s", line);
	ck_assert_msg(memmem(line, eol ? (size_t)(eol - line) : strlen(line),
			     "\"calls\":1", 9),
		      "the turn's spending is not in its end: %s", line);
	free(rows);
	/* The broker listens on a new port (a new turn says which). */
	test_spd_start(&T);
	t.port = begin(NULL).port;
	r = post(&t, "/v1/messages", NULL, MSG_BODY);
	ck_assert_int_eq(status_of(r), 401);
	free(r);
}
END_TEST

/* model.call over the socket: the provider's reply as the result and
 * the call charged like one over HTTP. */
START_TEST(test_model_call_over_socket)
{
	struct turn t = begin(NULL);
	char *p =
	    test_fmt("{\"turn\":\"%s\",\"api\":\"anthropic\",\"body\":%s}",
		     t.id, MSG_BODY);
	json_t *o = rpc("model.call", p), *res, *row;
	char *text;

	res = json_object_get(o, "result");
	ck_assert_msg(res, "model.call: %s", json_dumps(o, 0));
	ck_assert_int_eq(json_integer_value(json_object_get(res, "status")),
			 200);
	text = json_dumps(res, 0);
	ck_assert_msg(has(text, "hello"), "%s", text);
	ck_assert(!has(text, REAL_ANT));
	row = turn_row(t.id);
	ck_assert_int_eq(pusd(row, "spent_usd"), CALL_PUSD);
	ck_assert_int_eq(json_integer_value(json_object_get(row, "calls")), 1);
	json_decref(row);
	free(text);
	free(p);
	json_decref(o);
	text = test_read_file(standin_log);
	ck_assert(has(text, "\"key_ok\": true"));
	free(text);
}
END_TEST

/* count_tokens reaches the provider and costs nothing; the OpenAI
 * Responses route over HTTP with a Bearer key is charged from its usage. */
START_TEST(test_count_tokens_and_responses)
{
	struct turn t = begin(NULL);
	char *r, *req, *log;
	json_t *row;

	r = post(&t, "/v1/messages/count_tokens", NULL, MSG_BODY);
	ck_assert_int_eq(status_of(r), 200);
	ck_assert_msg(has(r, "\"input_tokens\": 100"), "%s", r);
	free(r);
	row = turn_row(t.id);
	ck_assert_int_eq(pusd(row, "spent_usd"), 0);
	ck_assert_int_eq(pusd(row, "reserved_usd"), 0);
	json_decref(row);

	const char *body = "{\"model\":\"test-model\",\"input\":\"hi\","
			   "\"max_output_tokens\":50}";
	req = test_fmt("POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\n"
		       "Authorization: Bearer %s\r\ncontent-type: "
		       "application/json\r\nContent-Length: %zu\r\n\r\n%s",
		       t.key, strlen(body), body);
	r = raw_http(t.port, req, strlen(req));
	ck_assert_int_eq(status_of(r), 200);
	ck_assert_msg(has(r, "\"object\": \"response\""), "%s", r);
	ck_assert(!has(r, REAL_OAI));
	free(r);
	free(req);
	row = turn_row(t.id);
	ck_assert_int_eq(pusd(row, "spent_usd"), CALL_PUSD);
	json_decref(row);
	log = test_read_file(standin_log);
	ck_assert(has(log, "\"path\": \"/v1/messages/count_tokens\""));
	ck_assert(has(log, "\"path\": \"/v1/responses\""));
	ck_assert(has(log, "\"authorization\": \"Bearer " REAL_OAI "\""));
	ck_assert(!has(log, "\"key_ok\": false"));
	free(log);
}
END_TEST

/* daemon.status names the broker's endpoint: the base URL on loopback
 * (the port it listens on) and broker.sock. */
START_TEST(test_status_broker_entry)
{
	json_t *o = rpc("daemon.status", "{}"), *b;
	const char *url, *sock;
	struct turn t;
	int port = 0;

	b = json_object_get(json_object_get(o, "result"), "broker");
	ck_assert_msg(b, "no broker in daemon.status: %s", json_dumps(o, 0));
	url = json_string_value(json_object_get(b, "url"));
	sock = json_string_value(json_object_get(b, "socket"));
	ck_assert_msg(url && sscanf(url, "http://127.0.0.1:%d", &port) == 1,
		      "%s", json_dumps(b, 0));
	ck_assert_msg(sock && has(sock, "broker.sock"), "%s", json_dumps(b, 0));
	t = begin(NULL);
	ck_assert_int_eq(t.port, port);
	{
		struct stat st;

		ck_assert_int_eq(stat(sock, &st), 0);
		ck_assert(S_ISSOCK(st.st_mode));
	}
	json_decref(o);
}
END_TEST

/* Options that multiply or add what the provider bills are bounded or
 * refused, before the provider hears of them (issue 36, finding 1):
 * server-held context, fetched documents and images, files held by the
 * provider, server-side tools, unpriced tiers.  Each refusal is a 400
 * naming the option; a provider-defined client tool and plain custom
 * tools still go through. */
START_TEST(test_unbounded_options_refused)
{
	struct turn t = begin(NULL);
	const struct {
		const char *path, *headers, *body, *option;
	} cases[] = {
	    {"/v1/messages", NULL,
	     "{\"model\":\"test-model\",\"max_tokens\":50,\"messages\":[{"
	     "\"role\":\"user\",\"content\":[{\"type\":\"document\",\"source\":"
	     "{\"type\":\"url\",\"url\":\"https://example.com/u1.pdf\"}}]}]}",
	     "url\\\" source"},
	    {"/v1/messages", NULL,
	     "{\"model\":\"test-model\",\"max_tokens\":50,\"messages\":[{"
	     "\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
	     "\"tool_use_id\":\"u2\",\"content\":[{\"type\":\"image\","
	     "\"source\":{\"type\":\"file\",\"file_id\":\"file_u2\"}}]}]}]}",
	     "file\\\" source"},
	    {"/v1/messages", NULL,
	     "{\"model\":\"test-model\",\"max_tokens\":50,\"tools\":[{\"type\":"
	     "\"web_search_20250305\",\"name\":\"web_search\"}],\"messages\":"
	     "[{\"role\":\"user\",\"content\":\"u3\"}]}",
	     "web_search_20250305"},
	    {"/v1/messages", NULL,
	     "{\"model\":\"test-model\",\"max_tokens\":50,\"tools\":[{\"type\":"
	     "\"code_execution_20250522\",\"name\":\"code_execution\"}],"
	     "\"messages\":[{\"role\":\"user\",\"content\":\"u4\"}]}",
	     "code_execution_20250522"},
	    {"/v1/messages", NULL,
	     "{\"model\":\"test-model\",\"max_tokens\":50,\"mcp_servers\":[{"
	     "\"type\":\"url\",\"url\":\"https://example.com/u5\",\"name\":"
	     "\"x\"}],\"messages\":[{\"role\":\"user\",\"content\":\"u5\"}]}",
	     "mcp_servers"},
	    {"/v1/messages", "anthropic-beta: context-1m-2025-08-07\r\n",
	     "{\"model\":\"test-model\",\"max_tokens\":50,\"messages\":[{"
	     "\"role\":\"user\",\"content\":\"u6\"}]}",
	     "context-1m"},
	    {"/v1/chat/completions", NULL,
	     "{\"model\":\"test-model\",\"max_tokens\":50,"
	     "\"web_search_options\":{},\"messages\":[{\"role\":\"user\","
	     "\"content\":\"u7\"}]}",
	     "web_search_options"},
	    {"/v1/chat/completions", NULL,
	     "{\"model\":\"test-model\",\"max_tokens\":50,\"messages\":[{"
	     "\"role\":\"user\",\"content\":[{\"type\":\"image_url\","
	     "\"image_url\":{\"url\":\"https://example.com/u8.png\"}}]}]}",
	     "image by URL"},
	    {"/v1/chat/completions", NULL,
	     "{\"model\":\"test-model\",\"max_tokens\":50,\"service_tier\":"
	     "\"priority\",\"messages\":[{\"role\":\"user\",\"content\":"
	     "\"u9\"}]}",
	     "service_tier"},
	    {"/v1/responses", NULL,
	     "{\"model\":\"test-model\",\"max_output_tokens\":50,"
	     "\"previous_response_id\":\"resp_u10\",\"input\":\"u10\"}",
	     "previous_response_id"},
	    {"/v1/responses", NULL,
	     "{\"model\":\"test-model\",\"max_output_tokens\":50,"
	     "\"conversation\":\"conv_u11\",\"input\":\"u11\"}",
	     "conversation"},
	    {"/v1/responses", NULL,
	     "{\"model\":\"test-model\",\"max_output_tokens\":50,\"tools\":[{"
	     "\"type\":\"web_search\"}],\"input\":\"u12\"}",
	     "\\\"web_search\\\""},
	    {"/v1/responses", NULL,
	     "{\"model\":\"test-model\",\"max_output_tokens\":50,\"input\":[{"
	     "\"role\":\"user\",\"content\":[{\"type\":\"input_file\","
	     "\"file_id\":\"file_u13\"}]}]}",
	     "file_id"},
	    {"/v1/responses", NULL,
	     "{\"model\":\"test-model\",\"max_output_tokens\":50,\"input\":[{"
	     "\"type\":\"item_reference\",\"id\":\"msg_u14\"}]}",
	     "item_reference"},
	};
	char *r, *log, *j;
	json_t *row;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		r = post(&t, cases[i].path, cases[i].headers, cases[i].body);
		ck_assert_msg(status_of(r) == 400 &&
				  has(r, "UNBOUNDED-OPTION") &&
				  has(r, cases[i].option),
			      "case %zu (%s): %s", i, cases[i].option, r);
		free(r);
	}
	/* A provider-defined client tool and a custom tool are fine. */
	r = post(
	    &t, "/v1/messages", NULL,
	    "{\"model\":\"test-model\",\"max_tokens\":50,\"tools\":[{"
	    "\"type\":\"bash_20250124\",\"name\":\"bash\"},{\"name\":"
	    "\"f\",\"input_schema\":{\"type\":\"object\",\"properties\":{"
	    "\"file_id\":{\"type\":\"string\"}}}}],\"messages\":[{\"role\":"
	    "\"user\",\"content\":\"ok1\"}]}");
	ck_assert_msg(status_of(r) == 200, "%s", r);
	free(r);
	log = test_read_file(standin_log);
	for (int i = 1; i <= 14; i++) {
		char *needle = test_fmt("u%d\\\"", i);

		ck_assert_msg(!has(log, needle),
			      "case u%d reached the provider", i);
		free(needle);
	}
	ck_assert(has(log, "ok1"));
	free(log);
	j = journal_until("refused 400 UNBOUNDED-OPTION");
	ck_assert(has(j, "previous_response_id"));
	free(j);
	row = turn_row(t.id);
	ck_assert_int_eq(pusd(row, "spent_usd"), CALL_PUSD);
	json_decref(row);
}
END_TEST

/* OpenAI's "n" multiplies the output reserved: n = 16 under a small cap
 * is refused, n = 2 reserves twice the output and is journaled so. */
START_TEST(test_choices_multiply_reservation)
{
	struct turn t = begin("{\"cap_usd\":0.05}");
	const char *two = "{\"model\":\"test-model\",\"max_tokens\":1000,"
			  "\"n\":2,\"messages\":[{\"role\":\"user\","
			  "\"content\":\"n2\"}]}";
	long long worst2 =
	    ((long long)strlen(two) + PRICE_HIDDEN_INPUT_TOKENS) * 1000000LL +
	    2LL * 1000 * 10000000LL;
	char *r, *j;

	r = post(&t, "/v1/chat/completions", NULL,
		 "{\"model\":\"test-model\",\"max_tokens\":1000,\"n\":16,"
		 "\"messages\":[{\"role\":\"user\",\"content\":\"n16\"}]}");
	ck_assert_msg(status_of(r) == 402 && has(r, "BUDGET-EXCEEDED"), "%s",
		      r);
	free(r);
	r = post(&t, "/v1/chat/completions", NULL,
		 "{\"model\":\"test-model\",\"n\":0,\"messages\":[]}");
	ck_assert_int_eq(status_of(r), 400);
	free(r);
	r = post(&t, "/v1/chat/completions", NULL, two);
	ck_assert_msg(status_of(r) == 200, "%s", r);
	free(r);
	j = journal_until("\"choices\":2");
	ck_assert(has(j, "\"choices\":2"));
	{
		char *want = test_fmt("\"reserved_usd\":%.6f", worst2 / 1e12);

		ck_assert_msg(has(j, want), "no %s in %s", want, j);
		free(want);
	}
	free(j);
	r = test_read_file(standin_log);
	ck_assert(!has(r, "n16"));
	free(r);
}
END_TEST

/* A request that names no output limit, or one the turn cannot cover,
 * goes out with the limit the budget covers (journaled), down to
 * min-output; below it, a 402 (issue 37). */
START_TEST(test_output_limit_set_from_budget)
{
	struct turn t;
	char *r, *log, *j;
	json_t *row;
	/* test-model: 1000 tokens of output cost 0.01 USD; a cap of 0.005
	 * covers some 380 after the input. */
	test_spd_cleanup(&T);
	start_spd("\tmin-output = 100\n");
	t = begin("{\"cap_usd\":0.005}");
	r = post(&t, "/v1/chat/completions", NULL,
		 "{\"model\":\"test-model\",\"messages\":[{\"role\":\"user\","
		 "\"content\":\"nolimit\"}]}");
	ck_assert_msg(status_of(r) == 200, "%s", r);
	free(r);
	r = post(&t, "/v1/responses", NULL,
		 "{\"model\":\"test-model\",\"input\":\"resp-nolimit\"}");
	ck_assert_msg(status_of(r) == 200, "%s", r);
	free(r);
	r = post(&t, "/v1/messages", NULL,
		 "{\"model\":\"test-model\",\"max_tokens\":1000,\"messages\":[{"
		 "\"role\":\"user\",\"content\":\"toomuch\"}]}");
	ck_assert_msg(status_of(r) == 200, "%s", r);
	free(r);
	log = test_read_file(standin_log);
	ck_assert_msg(has(log, "\\\"max_completion_tokens\\\":"), "%s", log);
	ck_assert_msg(has(log, "\\\"max_output_tokens\\\":"), "%s", log);
	ck_assert(!has(log, "\\\"max_tokens\\\":1000"));
	free(log);
	j = journal_until("\"output_limit_set\"");
	ck_assert(has(j, "output_limit_set"));
	free(j);
	/* Three calls, each charged its usage, none past the cap. */
	row = turn_row(t.id);
	ck_assert_int_eq(pusd(row, "spent_usd"), 3 * CALL_PUSD);
	ck_assert_int_le(pusd(row, "spent_usd"), 5000000000LL);
	json_decref(row);
	test_spd_cleanup(&T);
	start_spd("\tmin-output = 900\n");
	t = begin("{\"cap_usd\":0.005}");
	r = post(&t, "/v1/chat/completions", NULL,
		 "{\"model\":\"test-model\",\"messages\":[{\"role\":\"user\","
		 "\"content\":\"belowfloor\"}]}");
	ck_assert_msg(status_of(r) == 402 && has(r, "BUDGET-EXCEEDED"), "%s",
		      r);
	free(r);
	log = test_read_file(standin_log);
	ck_assert(!has(log, "belowfloor"));
	free(log);
}
END_TEST

/* All the turns of a session share session-cap (issue 36, finding 10):
 * a second turn cannot spend what the first already has. */
START_TEST(test_session_cap_across_turns)
{
	struct session ses;
	struct turn a, b;
	char *p, *r;
	json_t *ra, *rb;

	test_spd_cleanup(&T);
	start_spd("\tsession-cap = 0.002\n");
	agent_session(&ses);
	p = test_fmt("{\"session\":\"%s\",\"cap_usd\":0.003}", ses.id);
	a = begin(p);
	b = begin(p);
	free(p);
	r = post(&a, "/v1/messages", NULL, MSG_BODY);
	ck_assert_msg(status_of(r) == 200, "%s", r);
	free(r);
	r = post(&b, "/v1/messages", NULL, MSG_BODY);
	ck_assert_msg(status_of(r) == 402 && has(r, "session-cap") &&
			  has(r, "\"session_cap_usd\""),
		      "%s", r);
	free(r);
	r = post(&a, "/v1/messages", NULL, MSG_BODY);
	ck_assert_int_eq(status_of(r), 402);
	free(r);
	ra = turn_row(a.id);
	rb = turn_row(b.id);
	ck_assert_int_le(pusd(ra, "spent_usd") + pusd(rb, "spent_usd"),
			 2000000000LL);
	ck_assert_int_eq(pusd(rb, "spent_usd"), 0);
	json_decref(ra);
	json_decref(rb);
	free(ses.worktree);
}
END_TEST

/* spd.conf as start_spd writes it, with extra in [broker], rewritten in
 * place while spd runs. */
static void rewrite_conf(const char *extra)
{
	char *conf = broker_conf(extra);
	char *path = paths_join(T.config, "spd.conf");

	test_write_file(path, conf);
	free(path);
	free(conf);
}

/* spctl reload (daemon.reload) and SIGHUP: a lowered session-cap judges
 * the next call of a turn already begun; a file with an error is refused
 * whole and the old cap still holds; a key that needs a restart is
 * reported and keeps its value; each is journaled with both hashes. */
START_TEST(test_reload_changes_cap)
{
	struct session ses;
	struct turn a;
	char *p, *r, *out = NULL, *err = NULL, *rows;
	json_t *o, *res;
	int st;

	test_spd_cleanup(&T);
	start_spd("\tsession-cap = 1\n");
	agent_session(&ses);
	p = test_fmt("{\"session\":\"%s\",\"cap_usd\":0.5}", ses.id);
	a = begin(p);
	free(p);
	r = post(&a, "/v1/messages", NULL, MSG_BODY);
	ck_assert_msg(status_of(r) == 200, "%s", r);
	free(r);
	/* Lowered below what the session spent: the next call is refused. */
	rewrite_conf("\tsession-cap = 0.0006\n");
	st = test_spctl(&T, (char *const[]){"reload", NULL}, NULL, &out, &err);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s%s", out, err);
	ck_assert_msg(has(out, "broker.session-cap"), "%s", out);
	free(out);
	free(err);
	r = post(&a, "/v1/messages", NULL, MSG_BODY);
	ck_assert_msg(status_of(r) == 402 && has(r, "session-cap"), "%s", r);
	free(r);
	/* daemon.config shows the cap in force. */
	o = rpc("daemon.config", NULL);
	{
		json_t *keys = json_object_get(json_object_get(o, "result"),
					       "keys"),
		       *k, *row = NULL;
		size_t i;

		json_array_foreach(
		    keys, i,
		    k) if (strcmp(json_string_value(json_object_get(k, "key")),
				  "broker.session-cap") == 0) row = k;
		ck_assert_msg(row, "no broker.session-cap in daemon.config");
		p = json_dumps(row, JSON_COMPACT | JSON_SORT_KEYS);
	}
	ck_assert_msg(has(p, "{\"default\":\"10.00\",\"doc\":\"USD one "
			     "session's turns may spend together\",\"key\":"
			     "\"broker.session-cap\",\"range\":\"more than 0, "
			     "at most 1000000 USD\",\"restart\":false,"
			     "\"value\":[\"0.000600\"]}"),
		      "%s", p);
	free(p);
	json_decref(o);
	/* An invalid file (a cap out of range beside a valid change): refused
	 * whole, the lowered cap still holds. */
	rewrite_conf("\tsession-cap = 5\n\tmin-output = 0\n");
	o = rpc("daemon.reload", NULL);
	ck_assert_msg(
	    json_object_get(o, "error") &&
		has(json_string_value(json_object_get(
			json_object_get(o, "error"), "message")),
		    "broker.min-output must be 1..10000000, not \"0\""),
	    "%s", json_dumps(o, 0));
	json_decref(o);
	r = post(&a, "/v1/messages", NULL, MSG_BODY);
	ck_assert_msg(status_of(r) == 402 && has(r, "session-cap"), "%s", r);
	free(r);
	/* Raised, by SIGHUP this time: the call goes. */
	rewrite_conf("\tsession-cap = 5\n");
	kill(T.pid, SIGHUP);
	rows = test_journal_until(
	    &T, "select summary from events where kind = 'config.reload'",
	    "reloaded");
	free(rows);
	r = post(&a, "/v1/messages", NULL, MSG_BODY);
	ck_assert_msg(status_of(r) == 200, "after SIGHUP: %s", r);
	free(r);
	/* A key that needs a restart: reported, the old value kept. */
	rewrite_conf("\tsession-cap = 5\n\tlisten = 127.0.0.1:1\n");
	o = rpc("daemon.reload", NULL);
	res = json_object_get(o, "result");
	p = res ? json_dumps(json_object_get(res, "needs_restart"), 0) : NULL;
	ck_assert_msg(has(p, "broker.listen"), "%s", p ? p : "(error)");
	free(p);
	json_decref(o);
	r = post(&a, "/v1/messages", NULL, MSG_BODY);
	ck_assert_msg(status_of(r) == 200, "the old listener: %s", r);
	free(r);
	/* Journaled: refused and applied, with both hashes. */
	rows = test_journal_until(
	    &T,
	    "select summary || ' ' || detail from events where kind = "
	    "'config.reload' order by id",
	    "needs_restart\":[\"broker.listen\"]");
	ck_assert_msg(has(rows, "reload refused") &&
			  has(rows, "\"old_sha256\":\"") &&
			  has(rows, "\"new_sha256\":\"") &&
			  has(rows, "\"by\":\"SIGHUP\""),
		      "%s", rows);
	free(rows);
	free(ses.worktree);
}
END_TEST

/* model.call honours idle expiry like the HTTP endpoint: a turn idle
 * past idle-timeout is refused and ended, and the refused call does not
 * revive it (issue 36, finding 10). */
START_TEST(test_model_call_idle_expired)
{
	struct turn t;
	char *p, *r;
	json_t *o, *row;

	test_spd_cleanup(&T);
	start_spd("[broker]\n\tidle-timeout = 3\n");
	t = begin(NULL);
	/* Past the deadline: the outcome below does not depend on how
	 * long past (the sweep may or may not have run). */
	sleep(4);
	p = test_fmt("{\"turn\":\"%s\",\"api\":\"anthropic\",\"body\":%s}",
		     t.id, MSG_BODY);
	o = rpc("model.call", p);
	ck_assert_msg(json_object_get(o, "error"), "an idle turn was used: %s",
		      json_dumps(o, 0));
	json_decref(o);
	free(p);
	row = turn_row(t.id);
	ck_assert(json_is_true(json_object_get(row, "ended")));
	ck_assert_str_eq(json_string_value(json_object_get(row, "end_reason")),
			 "idle");
	ck_assert_int_eq(json_integer_value(json_object_get(row, "calls")), 0);
	json_decref(row);
	r = test_read_file(standin_log);
	ck_assert_msg(!has(r, "/v1/messages"), "an idle turn's call was made");
	free(r);
}
END_TEST

/* spd's resident memory (kB) and its number of mappings. */
static void spd_footprint(long *ret_rss_kb, long *ret_maps)
{
	char *path = test_fmt("/proc/%d/status", (int)T.pid);
	char *text = test_read_file(path), *p;
	long maps = 0;

	ck_assert_ptr_nonnull(text);
	p = strstr(text, "VmRSS:");
	ck_assert_ptr_nonnull(p);
	*ret_rss_kb = strtol(p + 6, NULL, 10);
	free(text);
	free(path);
	path = test_fmt("/proc/%d/maps", (int)T.pid);
	text = test_read_file(path);
	ck_assert_ptr_nonnull(text);
	for (p = text; *p; p++)
		maps += *p == '\n';
	*ret_maps = maps;
	free(text);
	free(path);
}

/* turn.begin and turn.end n times on one connection. */
static void churn_turns(int fd, int n)
{
	for (int i = 0; i < n; i++) {
		char *r =
		    test_call(&T, fd, test_next_id(), "turn.begin", "{}", true);
		json_t *o = json_loads(r, 0, NULL);
		const char *id = json_string_value(
		    json_object_get(json_object_get(o, "result"), "turn"));
		char *p, *e;

		ck_assert_msg(id, "turn %d: %s", i, r);
		p = test_fmt("{\"turn\":\"%s\"}", id);
		e = test_call(&T, fd, test_next_id(), "turn.end", p, true);
		ck_assert_msg(has(e, "\"result\""), "turn.end: %s", e);
		free(e);
		free(p);
		json_decref(o);
		free(r);
	}
}

/* The broker's Unix socket (broker.sock). */
static char *broker_sock(void)
{
	json_t *o = rpc("turn.begin", "{}");
	char *path = strdup(json_string_value(
	    json_object_get(json_object_get(o, "result"), "socket")));

	json_decref(o);
	return path;
}

static char *raw_unix(const char *path, const char *req)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char *out;

	ck_assert_int_ge(fd, 0);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	test_send(fd, req, strlen(req));
	out = read_all(fd);
	close(fd);
	return out;
}

/* A request's head alone, announcing a body of len bytes. */
static char *head_only(const char *key, size_t len)
{
	return test_fmt("POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
			"x-api-key: %s\r\ncontent-type: application/json\r\n"
			"Content-Length: %zu\r\n\r\n",
			key, len);
}

/* Send up to n bytes of filler on fd, stopping when spd stops taking
 * them (it refused the request) for 10 s or closed the connection. */
static size_t send_filler(int fd, size_t n)
{
	static char chunk[64 * 1024];
	size_t sent = 0;

	memset(chunk, ' ', sizeof(chunk));
	while (sent < n) {
		struct pollfd pf = {fd, POLLOUT, 0};
		size_t k = n - sent < sizeof(chunk) ? n - sent : sizeof(chunk);
		ssize_t w;

		if (poll(&pf, 1, 10000) != 1 || !(pf.revents & POLLOUT))
			break;
		w = send(fd, chunk, k, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (w <= 0)
			break;
		sent += (size_t)w;
	}
	return sent;
}

/* How many of fds[0..n) have an answer whose text holds needle, waiting
 * until `want` have (or 10 s pass with nothing new). */
static int answered(const int *fds, int n, const char *needle, int want)
{
	bool *seen = calloc((size_t)n, sizeof(*seen));
	struct pollfd *pf = calloc((size_t)n, sizeof(*pf));
	int hits = 0;

	while (hits < want) {
		int m = 0, r;

		for (int i = 0; i < n; i++)
			if (!seen[i])
				pf[m++] = (struct pollfd){fds[i], POLLIN, 0};
		r = poll(pf, (nfds_t)m, 10000);
		if (r <= 0)
			break;
		for (int j = 0; j < m; j++) {
			char buf[4096];
			ssize_t k;
			int i;

			if (!pf[j].revents)
				continue;
			for (i = 0; fds[i] != pf[j].fd; i++)
				;
			seen[i] = true;
			k = recv(fds[i], buf, sizeof(buf) - 1, MSG_DONTWAIT);
			if (k <= 0)
				continue;
			buf[k] = '\0';
			if (has(buf, needle))
				hits++;
		}
	}
	free(seen);
	free(pf);
	return hits;
}

/* A bad key is refused on the request's head: spd answers 401 without
 * waiting for (or reading) the body it announced (issue 36, finding 3). */
START_TEST(test_key_checked_before_body)
{
	char *req = head_only("sk-spd-"
			      "00000000000000000000000000000000000000000000000"
			      "00000000000000000",
			      60000);
	struct turn t = begin(NULL);
	int fd = connect_port(t.port);
	struct pollfd pf = {fd, POLLIN, 0};
	char buf[4096];
	ssize_t n;

	test_send(fd, req, strlen(req));
	ck_assert_msg(poll(&pf, 1, 10000) == 1,
		      "no answer before the body was sent");
	n = read(fd, buf, sizeof(buf) - 1);
	ck_assert_int_gt(n, 0);
	buf[n] = '\0';
	ck_assert_msg(status_of(buf) == 401, "%s", buf);
	ck_assert(has(buf, "Connection: close"));
	close(fd);
	free(req);
}
END_TEST

/* Connections of one session sending big bodies slowly: spd holds at
 * most a few bodies' worth for its turn and refuses the rest (503
 * LIMIT), its memory stays bounded, and the operator's call still goes
 * through (issue 36, finding 3). */
START_TEST(test_unfinished_bodies_bounded)
{
	enum { CONNS = 24 };
	const size_t body = 16u << 20, part = 12u << 20;
	struct session ses;
	struct turn t, op;
	int fds[CONNS], refused;
	long rss0, maps0, rss1, maps1;
	char *p, *req, *r;

	test_spd_cleanup(&T);
	start_spd("\tbody-max = 16777216\n");
	agent_session(&ses);
	p = test_fmt("{\"session\":\"%s\"}", ses.id);
	t = begin(p);
	free(p);
	op = begin(NULL);
	spd_footprint(&rss0, &maps0);
	req = head_only(t.key, body);
	for (int i = 0; i < CONNS; i++) {
		fds[i] = connect_port(t.port);
		test_send(fds[i], req, strlen(req));
		send_filler(fds[i], part);
	}
	spd_footprint(&rss1, &maps1);
	fprintf(stderr,
		"unfinished bodies: %d connections x %zu MiB sent: spd %ld "
		"-> %ld kB\n",
		CONNS, part >> 20, rss0, rss1);
	ck_assert_msg(rss1 - rss0 < 100 * 1024,
		      "spd grew by %ld kB holding unfinished bodies",
		      rss1 - rss0);
	refused = answered(fds, CONNS, "LIMIT", CONNS - 2);
	ck_assert_int_ge(refused, CONNS - 2);
	/* The operator's call, while they are held. */
	r = post(&op, "/v1/messages", NULL, MSG_BODY);
	ck_assert_int_eq(status_of(r), 200);
	free(r);
	for (int i = 0; i < CONNS; i++)
		close(fds[i]);
	free(req);
	free(ses.worktree);
}
END_TEST

/* An agent holding many connections: each turn and each session has its
 * most (503 LIMIT past them), and the operator's calls still succeed on
 * the TCP port and on broker.sock (issue 36, finding 5). */
START_TEST(test_connection_quotas)
{
	enum { PER = 60, OPN = 70 };
	struct session ses;
	struct turn a[3], op;
	int fds[3 * PER], ofds[OPN], n;
	char *p, *req, *r, *sock;

	agent_session(&ses);
	p = test_fmt("{\"session\":\"%s\"}", ses.id);
	for (int i = 0; i < 3; i++)
		a[i] = begin(p);
	free(p);
	op = begin(NULL);
	for (int i = 0; i < 3; i++) {
		req = head_only(a[i].key, 1000);
		for (int j = 0; j < PER; j++) {
			fds[i * PER + j] = connect_port(a[i].port);
			test_send(fds[i * PER + j], req, strlen(req));
		}
		free(req);
	}
	/* The session's most is 128: of 180, 52 are refused. */
	n = answered(fds, 3 * PER, "session", 3 * PER - 128);
	ck_assert_int_eq(n, 3 * PER - 128);
	/* One turn's most is 64, the operator's too. */
	req = head_only(op.key, 1000);
	for (int j = 0; j < OPN; j++) {
		ofds[j] = connect_port(op.port);
		test_send(ofds[j], req, strlen(req));
	}
	free(req);
	n = answered(ofds, OPN, "holds 64 connections", OPN - 64);
	ck_assert_int_eq(n, OPN - 64);
	for (int j = 0; j < OPN; j++)
		close(ofds[j]);
	/* The operator's calls, while the agent's connections are held. */
	op = begin(NULL);
	r = post(&op, "/v1/messages", NULL, MSG_BODY);
	ck_assert_msg(status_of(r) == 200, "%s", r);
	free(r);
	sock = broker_sock();
	req = request_text(&op, "/v1/messages", NULL, MSG_BODY);
	r = raw_unix(sock, req);
	ck_assert_msg(status_of(r) == 200, "%s", r);
	free(r);
	free(req);
	free(sock);
	for (int i = 0; i < 3 * PER; i++)
		close(fds[i]);
	free(ses.worktree);
}
END_TEST

/* A client refused in a loop: the journal gets one row for the first
 * refusal and one with the count of the rest (written when spd stops at
 * the latest: none is lost), each naming the method, path, turn and
 * session presented and never the key (issue 36, finding 6). */
START_TEST(test_refusals_aggregated)
{
	enum { N = 300 };
	struct session ses;
	struct turn t;
	char *p, *req, *all, *rows, *q;
	int fd, n = 0;

	agent_session(&ses);
	p = test_fmt("{\"session\":\"%s\"}", ses.id);
	t = begin(p);
	free(p);
	req = request_text(&t, "/v1/messages", NULL, "not json");
	fd = connect_port(t.port);
	for (int i = 0; i < N; i++) {
		char *r;

		test_send(fd, req, strlen(req));
		r = read_replies(fd, "", 0, 1);
		ck_assert_msg(status_of(r) == 400, "%d: %s", i, r);
		free(r);
	}
	close(fd);
	free(req);
	ck_assert_int_eq(test_spd_stop(&T), 0);
	q = test_fmt("select session, summary, detail from events where kind = "
		     "'model.call' and summary like 'refused 400%%'");
	rows = test_journal(&T, q);
	all = test_journal(&T, "select session, summary, detail from events");
	for (const char *s = rows; (s = strstr(s, "refused 400")); s++)
		n++;
	ck_assert_msg(n == 2, "%d rows of refusals: %s", n, rows);
	ck_assert_msg(has(rows, "\"count\":299"), "%s", rows);
	ck_assert(has(rows, ses.id));
	ck_assert(has(rows, t.id));
	ck_assert(has(rows, "\"method\":\"POST\""));
	ck_assert(has(rows, "\"path\":\"/v1/messages\""));
	ck_assert(!has(all, t.key));
	free(all);
	free(rows);
	free(q);
	free(ses.worktree);
}
END_TEST

/* listen = none: no TCP port for anyone (any local user could connect to
 * one); the operator's clients use broker.sock, which only its uid can
 * reach (issue 36, finding 10). */
START_TEST(test_socket_only_mode)
{
	json_t *o, *res;
	struct turn t = {0};
	char *req, *r;
	const char *sock;

	test_spd_cleanup(&T);
	start_spd("\tlisten = none\n");
	o = rpc("turn.begin", "{}");
	res = json_object_get(o, "result");
	ck_assert_ptr_nonnull(res);
	ck_assert(!json_is_string(json_object_get(res, "anthropic_base_url")));
	snprintf(t.key, sizeof(t.key), "%s",
		 json_string_value(json_object_get(res, "key")));
	sock = json_string_value(json_object_get(res, "socket"));
	ck_assert_ptr_nonnull(sock);
	req = request_text(&t, "/v1/messages", NULL, MSG_BODY);
	r = raw_unix(sock, req);
	ck_assert_msg(status_of(r) == 200, "%s", r);
	free(r);
	free(req);
	json_decref(o);
}
END_TEST

/* Six thousand turns begun and ended leave spd's memory and mappings
 * where a thousand left them: each key change frees the redaction
 * generation it replaces (issue 36, finding 2).  16 MiB over 5,000 turns
 * catches a leak of 3.3 KiB a turn by size; LeakSanitizer (make asan)
 * any leak at all. */
START_TEST(test_turn_churn_frees_redaction)
{
	long rss0, maps0, rss1, maps1;
	struct turn t;
	char *r;
	int fd;

	/* 6,000 turns measure memory, not paths: once per tests/run and
	 * make asan, in the layout both run (20 s of CPU each time). */
	if (!test_layout_default())
		TEST_SKIP("runs in the default layout only "
			  "(SPD_TEST_LAYOUT=default; tests/run runs it there)");
	fd = test_spd_connect(&T);
	churn_turns(fd, 1000);
	spd_footprint(&rss0, &maps0);
	churn_turns(fd, 5000);
	spd_footprint(&rss1, &maps1);
	close(fd);
	fprintf(stderr,
		"turn churn: after 1000 turns %ld kB, %ld mappings; after "
		"6000 %ld kB, %ld mappings\n",
		rss0, maps0, rss1, maps1);
#ifndef __SANITIZE_ADDRESS__
	ck_assert_msg(rss1 - rss0 < 16 * 1024,
		      "spd grew from %ld to %ld kB over 5000 turns", rss0,
		      rss1);
#else
	/* Under ASan freed memory waits in its quarantine (up to 256 MiB)
	 * and counts in the resident size: LeakSanitizer judges leaks at
	 * spd's exit instead, and the mappings below still must hold. */
	fprintf(stderr, "turn churn: the resident-size bound is skipped: "
			"AddressSanitizer's quarantine counts in it\n");
#endif
	ck_assert_msg(maps1 - maps0 < 256,
		      "spd's mappings grew from %ld to %ld over 5000 turns",
		      maps0, maps1);
	/* Still redacting: a new turn's key works and the real key stays
	 * hidden. */
	t = begin(NULL);
	r = post(&t, "/v1/messages", "x-standin-mode: echo\r\n", MSG_BODY);
	ck_assert(!has(r, REAL_ANT));
	ck_assert(has(r, "[redacted:ANTHROPIC_API_KEY]"));
	free(r);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("broker");
	TCase *tc = tcase_create("broker");
	SRunner *sr;
	int failed;

	signal(SIGPIPE, SIG_IGN);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_real_key_reaches_provider_only);
	tcase_add_test(tc, test_sequential_calls_stop_at_cap);
	tcase_add_test(tc, test_concurrent_calls_never_overshoot);
	tcase_add_test(tc, test_refused_keys_and_models);
	tcase_add_test(tc, test_bad_requests);
	tcase_add_test(tc, test_stream_passes_through_as_it_arrives);
	tcase_add_test(tc, test_stall_and_drop_keep_reservation);
	tcase_add_test(tc, test_client_disconnect_still_charged);
	tcase_add_test(tc, test_caps_from_config);
	tcase_add_test(tc, test_keepalive_calls_in_sequence);
	tcase_add_test(tc, test_provider_closes_kept_connection);
	tcase_add_test(tc, test_concurrent_keepalive_calls_each_their_own);
	tcase_add_test(tc, test_keepalive_key_checked_per_request);
	tcase_add_test(tc, test_keepalive_smuggling_refused);
	tcase_add_test(tc, test_keepalive_idle_timeout);
	tcase_add_test(tc, test_spctl_turns);
	tcase_add_test(tc, test_spctl_agent_through_broker);
	tcase_add_test(tc, test_idle_timeout_expires_key);
	tcase_add_test(tc, test_turn_dies_with_session);
	tcase_add_test(tc, test_turn_ends_when_spd_stops);
	tcase_add_test(tc, test_model_call_over_socket);
	tcase_add_test(tc, test_count_tokens_and_responses);
	tcase_add_test(tc, test_status_broker_entry);
	suite_add_tcase(s, tc);
	/* Issue 36: one hostile agent. */
	tc = tcase_create("hostile");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_unbounded_options_refused);
	tcase_add_test(tc, test_choices_multiply_reservation);
	tcase_add_test(tc, test_output_limit_set_from_budget);
	tcase_add_test(tc, test_session_cap_across_turns);
	tcase_add_test(tc, test_model_call_idle_expired);
	tcase_add_test(tc, test_key_checked_before_body);
	tcase_add_test(tc, test_unfinished_bodies_bounded);
	tcase_add_test(tc, test_connection_quotas);
	tcase_add_test(tc, test_refusals_aggregated);
	tcase_add_test(tc, test_socket_only_mode);
	suite_add_tcase(s, tc);
	/* Issue 38: spd.conf read again while spd runs. */
	tc = tcase_create("reload");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_reload_changes_cap);
	suite_add_tcase(s, tc);
	/* Issue 40: what a session's attestation says of its calls. */
	tc = tcase_create("attest");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_statement_carries_model_calls);
	suite_add_tcase(s, tc);
	tc = tcase_create("churn");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 900);
	tcase_add_test(tc, test_turn_churn_frees_redaction);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

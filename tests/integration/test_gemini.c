/*
 * The broker's Gemini API end to end: a real spd whose gemini provider
 * is the stand-in on loopback (tests/lib/provider_standin.py), called
 * the way Google's SDKs (x-goog-api-key) and curl users (?key=) call
 * generateContent, streamGenerateContent (server-sent events with
 * alt=sse, one JSON array without) and countTokens.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/spdproc.h"
#include "tests/lib/testlib.h"
#include "common/paths.h"

#define REAL_GEM "AIza-REALGEMINIKEY-0123456789abcdef"
#define MODEL_CONF                                                             \
	"[model \"test-gemini\"]\n\tinput = 1\n\toutput = 10\n"                \
	"\tmax-output = 1000\n"
/* The stand-in's usage at test-gemini's prices: 100 prompt tokens at 1
 * USD/Mtok, and 50 output (40 candidates and 10 thoughts, or 50
 * candidates) at 10: 600 micro-dollars. */
#define CALL_PUSD 600000000LL
#define BODY                                                                   \
	"{\"contents\":[{\"role\":\"user\",\"parts\":[{\"text\":\"hi\"}]}],"   \
	"\"generationConfig\":{\"maxOutputTokens\":50}}"

static struct test_spd T;
static pid_t standin_pid = -1;
static int standin_port;
static char *standin_log;

static bool has(const char *hay, const char *needle)
{
	return hay && strstr(hay, needle) != NULL;
}

/* spd.conf and the provider's key in T's config directory: the
 * stand-in is the gemini provider. */
static void setup_conf(void)
{
	char *conf = test_fmt(
	    "[provider \"gemini\"]\n\turl = http://127.0.0.1:%d\n"
	    "\tkey = GEMINI_API_KEY\n\tapi = gemini\n"
	    "[broker]\n\tcap-default = 0.5\n\tcap-max = 2\n\tmin-output = 100\n"
	    "\tprovider-timeout = 5\n" MODEL_CONF,
	    standin_port);
	char *p = paths_join(T.config, "spd.conf");

	test_write_file(p, conf);
	free(p);
	p = paths_join(T.config, "environment");
	test_write_file(p, "GEMINI_API_KEY=" REAL_GEM "\n");
	free(p);
	free(conf);
}

static void setup(void)
{
	char *dir = test_tmpdir("gemini");

	standin_log = paths_join(dir, "log");
	free(dir);
	standin_pid =
	    test_provider_standin(standin_log, REAL_GEM, &standin_port);
	test_spd_prepare(&T, NULL);
	setup_conf();
	test_spd_start(&T);
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

/* What turn id has spent, in picodollars. */
static long long spent(const char *id)
{
	json_t *o = rpc("turn.list", "{}"), *a;
	long long v = -1;

	a = json_object_get(json_object_get(o, "result"), "turns");
	for (size_t i = 0; i < json_array_size(a); i++) {
		json_t *row = json_array_get(a, i);

		if (strcmp(json_string_value(json_object_get(row, "turn")),
			   id) == 0)
			v = (long long)(json_number_value(
					    json_object_get(row, "spent_usd")) *
					    1e12 +
					0.5);
	}
	json_decref(o);
	return v;
}

/* POST body to target with the header line hdr (or none), the
 * connection closed after the reply: the whole reply as text. */
static char *post(int port, const char *target, const char *hdr,
		  const char *body)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(0x7f000001)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char *req = test_fmt("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s"
			     "content-type: application/json\r\nConnection: "
			     "close\r\nContent-Length: %zu\r\n\r\n%s",
			     target, hdr ? hdr : "", strlen(body), body);
	size_t len = 0, cap = 65536;
	char *out = malloc(cap);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	test_send(fd, req, strlen(req));
	for (;;) {
		struct pollfd pf = {fd, POLLIN, 0};
		ssize_t n;

		if (poll(&pf, 1, 30000) != 1)
			break;
		if (len + 4096 > cap)
			out = realloc(out, cap *= 2);
		n = read(fd, out + len, cap - len - 1);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	out[len] = '\0';
	close(fd);
	free(req);
	return out;
}

static char *goog_key(const struct turn *t)
{
	return test_fmt("x-goog-api-key: %s\r\n", t->key);
}

static int status_of(const char *resp)
{
	int st = 0;

	if (!resp || sscanf(resp, "HTTP/1.1 %d", &st) != 1)
		return -1;
	return st;
}

/* generateContent with the key in x-goog-api-key: the real key reaches
 * the provider in the same header, the turn key does not; the model is
 * read from the path and the thoughts are charged as output. */
START_TEST(test_generate_content)
{
	struct turn t = begin(NULL);
	char *h = goog_key(&t);
	char *r =
	    post(t.port, "/v1beta/models/test-gemini:generateContent", h, BODY);
	char *log, *journal;

	ck_assert_msg(status_of(r) == 200, "%s", r);
	ck_assert_msg(has(r, "hello"), "%s", r);
	ck_assert(!has(r, REAL_GEM));
	ck_assert_int_eq(spent(t.id), CALL_PUSD);
	log = test_read_file(standin_log);
	ck_assert_msg(
	    has(log,
		"\"path\": \"/v1beta/models/test-gemini:generateContent\""),
	    "%s", log);
	ck_assert(has(log, "\"x-goog-api-key\": \"" REAL_GEM "\""));
	ck_assert(has(log, "\"key_ok\": true"));
	ck_assert(!has(log, "\"key_ok\": false"));
	ck_assert_msg(!has(log, t.key), "the turn key reached the provider");
	journal = test_journal_until(
	    &T, "select kind, summary, detail from events", "test-gemini 200");
	ck_assert_msg(has(journal, "\"model\":\"test-gemini\""), "%s", journal);
	/* The row names its decision and rule, as a run's does. */
	ck_assert_msg(has(journal, "\"decision\":\"allow\"") &&
			  has(journal, "\"rule\":\"broker.within-cap\""),
		      "%s", journal);
	ck_assert(has(journal, "\"output_tokens\":50"));
	ck_assert(!has(journal, REAL_GEM) && !has(journal, t.key));
	free(journal);
	free(log);
	free(r);
	free(h);
}
END_TEST

/* streamGenerateContent?alt=sse with the key in the query, as curl
 * users send it: server-sent events pass through, the usage of the last
 * chunk is charged, and the key= the client sent never reaches the
 * provider (the real key goes in the header). */
START_TEST(test_stream_sse_query_key)
{
	struct turn t = begin(NULL);
	char *target =
	    test_fmt("/v1beta/models/test-gemini:streamGenerateContent?"
		     "alt=sse&key=%s",
		     t.key);
	char *r = post(t.port, target, "x-standin-mode: stream\r\n", BODY);
	char *log, *journal;

	ck_assert_msg(status_of(r) == 200, "%s", r);
	ck_assert_msg(has(r, "text/event-stream"), "%s", r);
	ck_assert_int_eq(spent(t.id), CALL_PUSD);
	log = test_read_file(standin_log);
	ck_assert_msg(has(log, "\"path\": \"/v1beta/models/test-gemini:"
			       "streamGenerateContent?alt=sse\""),
		      "%s", log);
	ck_assert(has(log, "\"key_ok\": true"));
	ck_assert_msg(!has(log, t.key), "the turn key reached the provider");
	journal = test_journal_until(
	    &T, "select kind, summary, detail from events", "test-gemini 200");
	ck_assert(has(journal, "\"stream\":true"));
	ck_assert(!has(journal, t.key));
	free(journal);
	free(log);
	free(r);
	free(target);
}
END_TEST

/* streamGenerateContent without alt=sse answers one JSON array of
 * chunks: its usage is read all the same; countTokens is free. */
START_TEST(test_stream_array_and_count_tokens)
{
	struct turn t = begin(NULL);
	char *h =
	    test_fmt("x-goog-api-key: %s\r\nx-standin-mode: stream\r\n", t.key);
	char *r =
	    post(t.port, "/v1beta/models/test-gemini:streamGenerateContent", h,
		 BODY);

	ck_assert_msg(status_of(r) == 200, "%s", r);
	ck_assert_int_eq(spent(t.id), CALL_PUSD);
	free(r);
	free(h);
	h = goog_key(&t);
	r = post(t.port, "/v1beta/models/test-gemini:countTokens", h, BODY);
	ck_assert_msg(status_of(r) == 200 && has(r, "totalTokens"), "%s", r);
	ck_assert_int_eq(spent(t.id), CALL_PUSD);
	free(r);
	free(h);
}
END_TEST

/* The reservation is bounded by generationConfig.maxOutputTokens: 50
 * tokens fit a cap that the model's 1,000 would not (a call that names
 * no bound reserves those); a bound that is not a positive integer is
 * a 400 in Google's shape, an unpriced model a 400 that reaches nobody. */
START_TEST(test_max_output_bounds_reservation)
{
	/* Worst case of BODY: (its bytes + 1024) input tokens at 1 and
	 * 50 output at 10 USD/Mtok, about 1,600 micro-dollars; with the
	 * model's 1,000 it would be about 11,100. */
	struct turn t = begin("{\"cap_usd\":0.005}");
	char *h = goog_key(&t);
	char *r =
	    post(t.port, "/v1beta/models/test-gemini:generateContent", h, BODY);
	char *log;

	ck_assert_msg(status_of(r) == 200, "%s", r);
	free(r);
	r = post(t.port, "/v1beta/models/test-gemini:generateContent", h,
		 "{\"contents\":[],\"generationConfig\":{\"maxOutputTokens\":"
		 "\"lots\"}}");
	ck_assert_msg(status_of(r) == 400, "%s", r);
	ck_assert_msg(has(r, "\"status\":\"INVALID_ARGUMENT\""), "%s", r);
	free(r);
	r = post(t.port, "/v1beta/models/gemini-unpriced:generateContent", h,
		 BODY);
	ck_assert_msg(status_of(r) == 400 && has(r, "NO-PRICE"), "%s", r);
	free(r);
	log = test_read_file(standin_log);
	ck_assert(!has(log, "gemini-unpriced"));
	free(log);
	free(h);
}
END_TEST

/* What Gemini bills beyond the request's bytes is refused before the
 * provider hears of it (Google Search and code execution tools, cached
 * content, parts by file URI); candidateCount multiplies the output
 * reserved; a request with no output bound goes out with the bound the
 * turn's budget covers, in generationConfig.maxOutputTokens. */
START_TEST(test_unbounded_options_and_clamp)
{
	static const char *const refused[] = {
	    "{\"contents\":[],\"tools\":[{\"googleSearch\":{}}]}",
	    "{\"contents\":[],\"tools\":[{\"codeExecution\":{}}]}",
	    "{\"contents\":[],\"cachedContent\":\"cachedContents/x\"}",
	    "{\"contents\":[{\"role\":\"user\",\"parts\":[{\"fileData\":"
	    "{\"fileUri\":\"https://example.test/f\"}}]}]}",
	};
	struct turn t = begin("{\"cap_usd\":0.005}");
	char *h = goog_key(&t);
	char *r, *log;

	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		r = post(t.port, "/v1beta/models/test-gemini:generateContent",
			 h, refused[i]);
		ck_assert_msg(status_of(r) == 400 && has(r, "UNBOUNDED-OPTION"),
			      "%s -> %s", refused[i], r);
		free(r);
	}
	/* 16 candidates of 50 tokens cost more than the cap covers... */
	r = post(t.port, "/v1beta/models/test-gemini:generateContent", h,
		 "{\"contents\":[],\"generationConfig\":{\"maxOutputTokens\":"
		 "1000,\"candidateCount\":16}}");
	ck_assert_msg(status_of(r) == 402, "%s", r);
	free(r);
	log = test_read_file(standin_log);
	ck_assert_msg(!has(log, "googleSearch") && !has(log, "cachedContent") &&
			  !has(log, "candidateCount"),
		      "a refused request reached the provider: %s", log);
	free(log);
	/* ...and with function tools only and no bound, the call goes out
	 * with the bound the budget covers. */
	r = post(t.port, "/v1beta/models/test-gemini:generateContent", h,
		 "{\"contents\":[],\"tools\":[{\"functionDeclarations\":[]}]}");
	ck_assert_msg(status_of(r) == 200, "%s", r);
	free(r);
	log = test_read_file(standin_log);
	ck_assert_msg(has(log, "maxOutputTokens"),
		      "no bound set in the forwarded body: %s", log);
	free(log);
	free(h);
}
END_TEST

/* Refusals answer in Google's error shape, and the journal's row says
 * what was presented: method, path (never its query, which may hold a
 * key), and the turn its key named; never the key. */
START_TEST(test_refusals_journaled)
{
	struct turn t = begin(NULL), fake = t;
	char *target =
	    test_fmt("/v1beta/models/test-gemini:embedContent?key=%s", t.key);
	char *r = post(t.port, target, NULL, BODY), *h, *journal, *log;

	ck_assert_msg(status_of(r) == 404, "%s", r);
	ck_assert_msg(has(r, "\"status\":\"NOT_FOUND\""), "%s", r);
	free(r);
	fake.key[20] = fake.key[20] == 'a' ? 'b' : 'a';
	h = goog_key(&fake);
	r = post(t.port, "/v1beta/models/test-gemini:generateContent", h, BODY);
	ck_assert_msg(status_of(r) == 401, "%s", r);
	ck_assert_msg(has(r, "\"status\":\"UNAUTHENTICATED\""), "%s", r);
	free(r);
	journal = test_journal_until(
	    &T, "select kind, summary, detail from events", "refused 401");
	ck_assert_msg(has(journal, "\"method\":\"POST\""), "%s", journal);
	ck_assert_msg(has(journal, "\"path\":\"/v1beta/models/test-gemini:"
				   "embedContent\""),
		      "%s", journal);
	ck_assert_msg(has(journal, t.id), "%s", journal);
	ck_assert(!has(journal, t.key) && !has(journal, fake.key));
	log = test_read_file(standin_log);
	ck_assert(!log || !has(log, "embedContent"));
	free(log);
	free(journal);
	free(h);
	free(target);
}
END_TEST

/* model.call speaks the Gemini API too, the model in its path. */
START_TEST(test_model_call_gemini)
{
	struct turn t = begin(NULL);
	char *params =
	    test_fmt("{\"turn\":\"%s\",\"api\":\"gemini\",\"path\":"
		     "\"/v1beta/models/test-gemini:generateContent\","
		     "\"body\":%s}",
		     t.id, BODY);
	json_t *o = rpc("model.call", params);
	json_t *res = json_object_get(o, "result");
	char *s = json_dumps(o, 0);

	ck_assert_msg(res, "%s", s);
	ck_assert_int_eq(json_integer_value(json_object_get(res, "status")),
			 200);
	ck_assert(!has(s, REAL_GEM));
	ck_assert_int_eq(spent(t.id), CALL_PUSD);
	free(s);
	json_decref(o);
	free(params);
	params = test_fmt("{\"turn\":\"%s\",\"api\":\"gemini\",\"body\":%s}",
			  t.id, BODY);
	o = rpc("model.call", params);
	ck_assert(json_object_get(o, "error"));
	json_decref(o);
	free(params);
}
END_TEST

/* Whether spd's address space holds a file whose name contains lib. */
static bool spd_maps(const char *lib)
{
	char path[64], *maps;
	bool r;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)T.pid);
	maps = test_read_file(path);
	ck_assert_msg(maps, "cannot read %s", path);
	r = has(maps, lib);
	free(maps);
	return r;
}

/* An spd that has brokered no call has not mapped libcurl nor the TLS,
 * SSH, LDAP and RTMP libraries it brings (issue 39: they were most of
 * the idle spd's resident size); its first provider call loads it and
 * is answered in full. */
START_TEST(test_libcurl_loaded_at_first_call)
{
	struct turn t = begin(NULL);
	char *h = goog_key(&t), *r;

	ck_assert_msg(!spd_maps("/libcurl"), "an idle spd mapped libcurl");
	ck_assert(!spd_maps("/libgnutls") && !spd_maps("/librtmp") &&
		  !spd_maps("/libldap"));
	r = post(t.port, "/v1beta/models/test-gemini:generateContent", h, BODY);
	ck_assert_msg(status_of(r) == 200, "%s", r);
	ck_assert_msg(has(r, "hello"), "%s", r);
	ck_assert_int_eq(spent(t.id), CALL_PUSD);
	ck_assert_msg(spd_maps("/libcurl"), "the call ran without libcurl?");
	free(r);
	free(h);
}
END_TEST

/* A libcurl.so.4 that is not libcurl (here zlib under its name, found
 * first on LD_LIBRARY_PATH) fails the provider call closed: the client
 * gets a 500 that says why, the journal keeps the refusal, nothing
 * reaches the provider and the turn is charged nothing. */
START_TEST(test_libcurl_unusable_fails_closed)
{
	char *libdir, *fake, *ld, *h, *r, *log, *journal, *params;
	struct turn t;
	json_t *o;
	int e = 0;

	test_spd_stop_clean(&T);
	test_spd_prepare(&T, NULL);
	/* The fixture's spd.conf and environment, for the new directory. */
	setup_conf();
	libdir = paths_join(T.dir, "libs");
	ck_assert_int_eq(mkdir(libdir, 0700), 0);
	fake = paths_join(libdir, "libcurl.so.4");
	ck_assert_int_eq(test_sh(NULL,
				 "cp /lib/x86_64-linux-gnu/libz.so.1 "
				 "'%s' || cp \"$(ldconfig -p | sed -n "
				 "'s/.*libz.so.1 .*=> //p' | head -1)\" "
				 "'%s'",
				 fake, fake),
			 0);
	while (T.env[e])
		e++;
	ck_assert_int_lt(e, 7);
	ck_assert(asprintf(&ld, "LD_LIBRARY_PATH=%s", libdir) > 0);
	T.env[e] = ld;
	test_spd_start(&T);

	t = begin(NULL);
	h = goog_key(&t);
	r = post(t.port, "/v1beta/models/test-gemini:generateContent", h, BODY);
	ck_assert_msg(status_of(r) == 500, "%s", r);
	ck_assert_msg(has(r, "libcurl.so.4") && has(r, "did not load") &&
			  has(r, "has no curl_"),
		      "%s", r);
	journal = test_journal_until(
	    &T, "select kind, summary, detail from events", "refused 500");
	ck_assert_msg(has(journal, "did not load"), "%s", journal);
	ck_assert_int_eq(spent(t.id), 0);
	/* model.call fails the same way. */
	params = test_fmt("{\"turn\":\"%s\",\"api\":\"gemini\",\"path\":"
			  "\"/v1beta/models/test-gemini:generateContent\","
			  "\"body\":%s}",
			  t.id, BODY);
	o = rpc("model.call", params);
	free(r);
	r = json_dumps(o, 0);
	ck_assert_msg(json_object_get(o, "error") && has(r, "did not load"),
		      "%s", r);
	ck_assert_int_eq(spent(t.id), 0);
	log = test_read_file(standin_log);
	ck_assert_msg(!log || !has(log, "generateContent"),
		      "the provider was called: %s", log);
	ck_assert_msg(!spd_maps("/libcurl.so"), "a real libcurl got loaded");
	json_decref(o);
	free(params);
	free(log);
	free(journal);
	free(r);
	free(h);
	free(fake);
	free(libdir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("gemini");
	TCase *tc = tcase_create("gemini");
	SRunner *sr;
	int failed;

	signal(SIGPIPE, SIG_IGN);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_generate_content);
	tcase_add_test(tc, test_stream_sse_query_key);
	tcase_add_test(tc, test_stream_array_and_count_tokens);
	tcase_add_test(tc, test_max_output_bounds_reservation);
	tcase_add_test(tc, test_refusals_journaled);
	tcase_add_test(tc, test_unbounded_options_and_clamp);
	tcase_add_test(tc, test_model_call_gemini);
	tcase_add_test(tc, test_libcurl_loaded_at_first_call);
	tcase_add_test(tc, test_libcurl_unusable_fails_closed);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

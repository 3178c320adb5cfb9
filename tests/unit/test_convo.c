/* Unit tests for daemon/broker/convo.c: the tool results of a model
 * request's conversation in each API the broker serves, with the tool
 * use each answers, and the label of a result spd did not serve
 * (issue 41). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/testlib.h"
#include "common/utf8.h"
#include "daemon/broker/convo.h"

#define SEEN_MAX 16

/* What the walk handed over, as text: "name|input|text" per result. */
struct seen {
	int n;
	char *row[SEEN_MAX];
};

static int collect(void *data, const struct gw_convo_result *r)
{
	struct seen *s = data;
	char *in = r->input
		       ? json_dumps(r->input, JSON_COMPACT | JSON_ENCODE_ANY |
						  JSON_SORT_KEYS)
		       : NULL;

	ck_assert_uint_eq(strlen(r->text), r->len);
	ck_assert_int_lt(s->n, SEEN_MAX);
	ck_assert(asprintf(&s->row[s->n++], "%s|%s|%s", r->name ? r->name : "-",
			   in ? in : "-", r->text) >= 0);
	free(in);
	return 0;
}

static int walk(const char *body, enum broker_api api, const char *path,
		struct seen *s, bool *assistant)
{
	json_error_t e;
	json_t *o = json_loads(body, 0, &e);
	int r;

	ck_assert_msg(o, "bad test body: %s", e.text);
	memset(s, 0, sizeof(*s));
	r = gw_convo_walk(o, api, path, collect, s, assistant);
	json_decref(o);
	return r;
}

static void seen_free(struct seen *s)
{
	for (int i = 0; i < s->n; i++)
		free(s->row[i]);
}

/* Anthropic: tool_result blocks answer the tool_use of their id, with
 * string or block content; an image block is no text; a result of the
 * provider's own web_fetch answers its server_tool_use. */
START_TEST(test_anthropic)
{
	struct seen s;
	bool asst = false;
	const char *b =
	    "{\"model\":\"m\",\"messages\":["
	    "{\"role\":\"user\",\"content\":\"read the file\"},"
	    "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":"
	    "\"ok\"},{\"type\":\"tool_use\",\"id\":\"tu1\",\"name\":\"Read\","
	    "\"input\":{\"file_path\":\"/w/a.txt\"}},{\"type\":\"tool_use\","
	    "\"id\":\"tu2\",\"name\":\"Bash\",\"input\":{\"command\":\"ls\"}}]}"
	    ","
	    "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
	    "\"tool_use_id\":\"tu2\",\"content\":\"x.c\\ny.c\"},"
	    "{\"type\":\"tool_result\",\"tool_use_id\":\"tu1\",\"content\":["
	    "{\"type\":\"text\",\"text\":\"line one\"},{\"type\":\"image\"},"
	    "{\"type\":\"text\",\"text\":\"line two\"}]}]},"
	    "{\"role\":\"assistant\",\"content\":[{\"type\":\"server_tool_"
	    "use\","
	    "\"id\":\"st1\",\"name\":\"web_fetch\",\"input\":{\"url\":"
	    "\"https://x.example/r\"}},{\"type\":\"web_fetch_tool_result\","
	    "\"tool_use_id\":\"st1\",\"content\":{\"type\":\"web_fetch_"
	    "result\"}"
	    "}]}]}";

	ck_assert_int_eq(
	    walk(b, BROKER_API_ANTHROPIC, "/v1/messages", &s, &asst), 3);
	ck_assert(asst);
	ck_assert_str_eq(s.row[0], "Bash|{\"command\":\"ls\"}|x.c\ny.c");
	ck_assert_str_eq(
	    s.row[1], "Read|{\"file_path\":\"/w/a.txt\"}|line one\nline two");
	ck_assert_str_eq(s.row[2],
			 "web_fetch|{\"url\":\"https://x.example/r\"}|");
	seen_free(&s);
	/* Only the user's words: no results, no answer of the model. */
	ck_assert_int_eq(walk("{\"messages\":[{\"role\":\"user\",\"content\":"
			      "\"hi\"}]}",
			      BROKER_API_ANTHROPIC, "/v1/messages", &s, &asst),
			 0);
	ck_assert(!asst);
}
END_TEST

/* OpenAI chat: "tool" messages answer the assistant's tool_calls by id,
 * their arguments read as JSON; a legacy "function" message answers the
 * last function_call of its name. */
START_TEST(test_openai_chat)
{
	struct seen s;
	bool asst = false;
	const char *b =
	    "{\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"
	    "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":"
	    "\"c1\",\"type\":\"function\",\"function\":{\"name\":\"web_fetch\","
	    "\"arguments\":\"{\\\"url\\\":\\\"https://x.example/a\\\"}\"}},"
	    "{\"id\":\"c2\",\"type\":\"function\",\"function\":{\"name\":"
	    "\"shell\",\"arguments\":\"not json\"}}]},"
	    "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"page\"},"
	    "{\"role\":\"tool\",\"tool_call_id\":\"c2\",\"content\":[{\"type\":"
	    "\"text\",\"text\":\"out\"}]},"
	    "{\"role\":\"tool\",\"tool_call_id\":\"nope\",\"content\":"
	    "\"orphan\"},"
	    "{\"role\":\"assistant\",\"function_call\":{\"name\":\"f\","
	    "\"arguments\":\"{}\"}},"
	    "{\"role\":\"function\",\"name\":\"f\",\"content\":\"fr\"}]}";

	ck_assert_int_eq(
	    walk(b, BROKER_API_OPENAI, "/v1/chat/completions", &s, &asst), 4);
	ck_assert(asst);
	ck_assert_str_eq(s.row[0],
			 "web_fetch|{\"url\":\"https://x.example/a\"}|page");
	ck_assert_str_eq(s.row[1], "shell|\"not json\"|out");
	ck_assert_str_eq(s.row[2], "-|-|orphan");
	ck_assert_str_eq(s.row[3], "f|{}|fr");
	seen_free(&s);
}
END_TEST

/* OpenAI Responses: function_call_output, custom_tool_call_output and
 * local_shell_call_output answer their call by call_id; an mcp_call holds
 * its own output; a call the model made is its answer. */
START_TEST(test_openai_responses)
{
	struct seen s;
	bool asst = false;
	const char *b =
	    "{\"model\":\"m\",\"input\":[{\"role\":\"user\",\"content\":\"go\"}"
	    ","
	    "{\"type\":\"function_call\",\"call_id\":\"f1\",\"name\":\"fetch\","
	    "\"arguments\":\"{\\\"url\\\":\\\"http://y.example:8080/\\\"}\"},"
	    "{\"type\":\"function_call_output\",\"call_id\":\"f1\",\"output\":"
	    "\"body\"},"
	    "{\"type\":\"custom_tool_call\",\"call_id\":\"k1\",\"name\":"
	    "\"apply_patch\",\"input\":\"*** Begin\"},"
	    "{\"type\":\"custom_tool_call_output\",\"call_id\":\"k1\","
	    "\"output\":[{\"type\":\"input_text\",\"text\":\"done\"}]},"
	    "{\"type\":\"local_shell_call\",\"call_id\":\"l1\",\"action\":"
	    "{\"type\":\"exec\",\"command\":[\"ls\"]}},"
	    "{\"type\":\"local_shell_call_output\",\"call_id\":\"l1\","
	    "\"output\":\"a\\nb\"},"
	    "{\"type\":\"mcp_call\",\"id\":\"m1\",\"name\":\"lookup\","
	    "\"arguments\":\"{}\",\"output\":\"mcp out\"}]}";

	ck_assert_int_eq(walk(b, BROKER_API_OPENAI, "/v1/responses", &s, &asst),
			 4);
	ck_assert(asst);
	ck_assert_str_eq(s.row[0],
			 "fetch|{\"url\":\"http://y.example:8080/\"}|body");
	ck_assert_str_eq(s.row[1], "apply_patch|\"*** Begin\"|done");
	ck_assert_str_eq(s.row[2], "local_shell|{\"command\":[\"ls\"],"
				   "\"type\":\"exec\"}|a\nb");
	ck_assert_str_eq(s.row[3], "lookup|{}|mcp out");
	seen_free(&s);
	/* A plain string input has no results; nor does the chat shape
	 * sent to /v1/responses. */
	ck_assert_int_eq(walk("{\"input\":\"hello\"}", BROKER_API_OPENAI,
			      "/v1/responses", &s, &asst),
			 0);
	ck_assert(!asst);
	ck_assert_int_eq(walk("{\"messages\":[{\"role\":\"tool\","
			      "\"content\":\"x\"}]}",
			      BROKER_API_OPENAI, "/v1/responses", &s, &asst),
			 0);
}
END_TEST

/* Gemini: functionResponse parts answer the functionCall of their id, or
 * of their name; the response object's strings are its text; a
 * countTokens request wrapping a whole request is read too. */
START_TEST(test_gemini)
{
	struct seen s;
	bool asst = false;
	const char *b =
	    "{\"contents\":[{\"role\":\"user\",\"parts\":[{\"text\":\"hi\"}]},"
	    "{\"role\":\"model\",\"parts\":[{\"functionCall\":{\"name\":"
	    "\"read_file\",\"args\":{\"path\":\"a\"}}},{\"functionCall\":{"
	    "\"id\":\"g2\",\"name\":\"web_fetch\",\"args\":{\"prompt\":\"see "
	    "https://Z.Example/x\"}}}]},"
	    "{\"role\":\"user\",\"parts\":[{\"functionResponse\":{\"name\":"
	    "\"read_file\",\"response\":{\"output\":\"contents\",\"n\":1,"
	    "\"more\":[\"x\",{\"y\":\"z\"}]}}},{\"functionResponse\":{\"id\":"
	    "\"g2\",\"name\":\"web_fetch\",\"response\":{\"content\":"
	    "\"page\"}}}]}]}";
	char *wrapped;

	ck_assert_int_eq(walk(b, BROKER_API_GEMINI,
			      "/v1beta/models/m:"
			      "generateContent",
			      &s, &asst),
			 2);
	ck_assert(asst);
	ck_assert_str_eq(s.row[0], "read_file|{\"path\":\"a\"}|contents\nx\nz");
	ck_assert_str_eq(
	    s.row[1],
	    "web_fetch|{\"prompt\":\"see https://Z.Example/x\"}|page");
	seen_free(&s);
	ck_assert(asprintf(&wrapped, "{\"generateContentRequest\":%s}", b) >=
		  0);
	ck_assert_int_eq(walk(wrapped, BROKER_API_GEMINI,
			      "/v1beta/models/m:countTokens", &s, &asst),
			 2);
	seen_free(&s);
	free(wrapped);
}
END_TEST

/* Malformed shapes are skipped, never a crash: members of the wrong
 * type, results without a use, content that is neither a string nor an
 * array (read as empty text). */
START_TEST(test_malformed)
{
	static const struct {
		enum broker_api api;
		const char *path, *body;
		int results;
	} cases[] = {
	    {BROKER_API_ANTHROPIC, "/v1/messages", "{\"messages\":7}", 0},
	    {BROKER_API_ANTHROPIC, "/v1/messages",
	     "{\"messages\":[1,null,\"x\",{\"role\":3,\"content\":{}}]}", 0},
	    {BROKER_API_ANTHROPIC, "/v1/messages",
	     "{\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":"
	     "\"tool_use\",\"id\":5,\"name\":[],\"input\":\"s\"},7]},"
	     "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
	     "\"tool_use_id\":{},\"content\":42},{\"type\":7}]}]}",
	     1},
	    {BROKER_API_OPENAI, "/v1/chat/completions",
	     "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[1,{\"id\":"
	     "\"a\",\"function\":7},{\"id\":\"b\",\"function\":{\"name\":\"n\","
	     "\"arguments\":{\"already\":\"object\"}}}]},{\"role\":\"tool\","
	     "\"tool_call_id\":\"b\",\"content\":{\"x\":1}}]}",
	     1},
	    {BROKER_API_OPENAI, "/v1/responses",
	     "{\"input\":[{\"type\":\"function_call_output\",\"output\":true},"
	     "{\"type\":5},{\"type\":\"function_call\",\"call_id\":[]}]}",
	     1},
	    {BROKER_API_GEMINI, "/v1beta/models/m:generateContent",
	     "{\"contents\":[{\"parts\":[{\"functionResponse\":7},"
	     "{\"functionResponse\":{\"response\":[[[[[[[[[[[[[[[[[[[[[[\"d\"]]"
	     "]]]]]]]]]]]]]]]]]]]]}}]},{\"parts\":\"x\"}]}",
	     1},
	};
	struct seen s;
	bool asst;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_assert_int_eq(
		    walk(cases[i].body, cases[i].api, cases[i].path, &s, &asst),
		    cases[i].results);
		/* A result whose content is not text reads as "". */
		for (int j = 0; j < s.n; j++)
			ck_assert_msg(strlen(strrchr(s.row[j], '|')) == 1,
				      "case %zu: %s", i, s.row[j]);
		seen_free(&s);
	}
	ck_assert_int_eq(
	    gw_convo_walk(NULL, BROKER_API_OPENAI, NULL, NULL, NULL, &asst), 0);
	ck_assert(!asst);
}
END_TEST

static int stop(void *data, const struct gw_convo_result *r)
{
	(void)r;
	return ++*(int *)data == 2 ? -EINTR : 0;
}

/* A negative return of the callback ends the walk with it. */
START_TEST(test_callback_stops)
{
	json_t *o = json_loads(
	    "{\"messages\":[{\"role\":\"tool\",\"content\":\"a\"},{\"role\":"
	    "\"tool\",\"content\":\"b\"},{\"role\":\"tool\",\"content\":\"c\"}]"
	    "}",
	    0, NULL);
	int n = 0;

	ck_assert_int_eq(gw_convo_walk(o, BROKER_API_OPENAI,
				       "/v1/chat/completions", stop, &n, NULL),
			 -EINTR);
	ck_assert_int_eq(n, 2);
	json_decref(o);
}
END_TEST

static void label_of(const char *name, const char *input, char *label,
		     char *what, size_t wlen)
{
	json_t *in = input ? json_loads(input, JSON_DECODE_ANY, NULL) : NULL;

	gw_convo_tool_label(name, in, label, 300, what, wlen);
	json_decref(in);
}

/* A fetching tool given a URL reads from network:HOST; any other tool,
 * or a fetch without a URL, is agent-tool; what names the tool and its
 * input, cut on a character. */
START_TEST(test_tool_label)
{
	char label[300], what[513];

	label_of("WebFetch",
		 "{\"url\":\"https://x.example/readme\",\"prompt\":\"p\"}",
		 label, what, sizeof(what));
	ck_assert_str_eq(label, "network:x.example");
	ck_assert_str_eq(
	    what, "WebFetch {\"url\":\"https://x.example/readme\",\"prompt\":"
		  "\"p\"}");
	label_of("web_search",
		 "{\"query\":\"q\",\"allowed\":"
		 "\"https://user:pw@[::1]:8/\"}",
		 label, what, sizeof(what));
	ck_assert_str_eq(label, "network:::1");
	label_of("mcp__fetch__fetch", "{\"url\":\"HTTP://Docs.Example.:443\"}",
		 label, what, sizeof(what));
	ck_assert_str_eq(label, "network:docs.example");
	label_of("web_search", "{\"query\":\"spd\"}", label, what,
		 sizeof(what));
	ck_assert_str_eq(label, "agent-tool");
	label_of("WebFetch", "{\"url\":\"https://bad host/\"}", label, what,
		 sizeof(what));
	ck_assert_str_eq(label, "agent-tool");
	label_of("WebFetch", "{\"url\":\"file:///etc/passwd\"}", label, what,
		 sizeof(what));
	ck_assert_str_eq(label, "agent-tool");
	/* Another MCP server's tool, as the agent names it: that server's
	 * (untrusted by default, like agent-tool). */
	label_of("mcp__github__get_issue", "{\"number\":7}", label, what,
		 sizeof(what));
	ck_assert_str_eq(label, "mcp:github");
	label_of("mcp__", "{}", label, what, sizeof(what));
	ck_assert_str_eq(label, "agent-tool");
	/* No server's name: no server's label. */
	label_of("mcp____get", "{}", label, what, sizeof(what));
	ck_assert_str_eq(label, "agent-tool");
	/* A name of any bytes is a label of printable ASCII (found by
	 * fuzz_convo: a label is a journal row's JSON string). */
	label_of("mcp__my server\xc3\xa9'x__get", "{}", label, what,
		 sizeof(what));
	ck_assert_str_eq(label, "mcp:my_server___x");
	/* A URL given to a tool that does not fetch is no network label. */
	label_of("Bash", "{\"command\":\"curl https://x.example\"}", label,
		 what, sizeof(what));
	ck_assert_str_eq(label, "agent-tool");
	ck_assert_str_eq(what, "Bash {\"command\":\"curl https://x.example\"}");
	label_of(NULL, NULL, label, what, sizeof(what));
	ck_assert_str_eq(label, "agent-tool");
	ck_assert_str_eq(what, "?");
	/* Cut: never inside "é" (two bytes), whatever the room. */
	for (size_t n = 6; n < 20; n++) {
		label_of("Read", "\"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\"",
			 label, what, n);
		ck_assert_uint_lt(strlen(what), n);
		ck_assert_msg(utf8_valid(what, strlen(what)), "room %zu: %s", n,
			      what);
	}
	label_of("\xc3\xa9\xc3\xa9\xc3\xa9", "{}", label, what, 4);
	ck_assert_str_eq(what, "\xc3\xa9");
}
END_TEST

/* [provenance] private: a path inside the workspace one of the patterns
 * names, by its whole relative path or (a pattern without '/') its last
 * component; never a path outside. */
START_TEST(test_path_private)
{
	char *pats[] = {"secrets/*", ".env", "*.pem", NULL};
	json_t *in = json_loads("{\"other\":1,\"filePath\":\"x\"}", 0, NULL);

	ck_assert(gw_convo_path_private("/w/secrets/a", "/w", pats));
	ck_assert(gw_convo_path_private("/w/./x/../secrets/a", "/w/", pats));
	ck_assert(gw_convo_path_private("secrets/a", NULL, pats));
	ck_assert(gw_convo_path_private("/w/sub/.env", "/w", pats));
	ck_assert(gw_convo_path_private("/w/k/key.pem", "/w", pats));
	ck_assert(!gw_convo_path_private("/w/src/a.c", "/w", pats));
	ck_assert(!gw_convo_path_private("/wx/secrets/a", "/w", pats));
	ck_assert(!gw_convo_path_private("/etc/secrets/a", "/w", pats));
	ck_assert(!gw_convo_path_private("/w/secrets/a", NULL, pats));
	ck_assert(!gw_convo_path_private("../secrets/a", "/w", pats));
	ck_assert(!gw_convo_path_private("/w/secrets/a", "/w", NULL));
	ck_assert_str_eq(gw_convo_input_path(in), "x");
	json_decref(in);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("convo");
	TCase *tc = tcase_create("convo");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_anthropic);
	tcase_add_test(tc, test_openai_chat);
	tcase_add_test(tc, test_openai_responses);
	tcase_add_test(tc, test_gemini);
	tcase_add_test(tc, test_malformed);
	tcase_add_test(tc, test_callback_stops);
	tcase_add_test(tc, test_tool_label);
	tcase_add_test(tc, test_path_private);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

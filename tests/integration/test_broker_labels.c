/*
 * Provenance labels at the broker (issue 41), end to end: a real spd
 * whose providers are the stand-in on loopback
 * (tests/lib/provider_standin.py).  A session's model calls carry
 * conversations holding tool results; the model.call row lists the
 * labels the conversation carries -- command for the output of an spd
 * run, agent-tool (with the tool's name and input) for what the agent's
 * own tools read, network:HOST for a fetch of a URL, private for a
 * [provenance] private file, model once the model has answered -- and
 * the labels new to the session enter its set at that row.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/spdproc.h"
#include "tests/lib/testlib.h"
#include "common/paths.h"

#define REAL_ANT "sk-ant-REALKEY-0123456789abcdef"
#define REAL_OAI "sk-oai-REALKEY-fedcba9876543210"
#define REAL_GEM "AIza-REALGEMINIKEY-0123456789abcdef"
#define MODEL_CONF                                                             \
	"[model \"test-model\"]\n\tinput = 1\n\toutput = 10\n"                 \
	"\tmax-output = 1000\n"

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
	standin_pid = test_provider_standin(
	    standin_log, REAL_ANT "," REAL_OAI "," REAL_GEM, &standin_port);
}

static void start_spd(const char *extra)
{
	char *conf, *envf;

	conf = test_fmt(
	    "[provider \"anthropic\"]\n\turl = http://127.0.0.1:%d\n"
	    "\tkey = ANTHROPIC_API_KEY\n\tapi = anthropic\n"
	    "[provider \"openai\"]\n\turl = http://127.0.0.1:%d\n"
	    "\tkey = OPENAI_API_KEY\n\tapi = openai\n"
	    "[provider \"gemini\"]\n\turl = http://127.0.0.1:%d\n"
	    "\tkey = GEMINI_API_KEY\n\tapi = gemini\n"
	    "[broker]\n\tcap-default = 0.5\n\tcap-max = 2\n"
	    "\tprovider-timeout = 5\n%s" MODEL_CONF,
	    standin_port, standin_port, standin_port, extra ? extra : "");
	test_spd_prepare(&T, conf);
	envf = paths_join(T.config, "environment");
	test_write_file(envf, "ANTHROPIC_API_KEY=" REAL_ANT
			      "\nOPENAI_API_KEY=" REAL_OAI
			      "\nGEMINI_API_KEY=" REAL_GEM "\n");
	free(envf);
	free(conf);
	test_spd_start(&T);
}

static void setup(void)
{
	char *dir = test_tmpdir("labels");

	standin_log = paths_join(dir, "log");
	free(dir);
	standin_start();
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

struct session {
	char id[TEST_SESSION_ID_LEN + 1], token[TEST_SESSION_TOKEN_LEN + 1];
	char *worktree;
	char turn[64];
};

/* A session of a small repository, and a turn of it. */
static void session_with_turn(struct session *ses)
{
	char *repo = paths_join(T.dir, "repo");
	char *params =
	    test_fmt("{\"repo\":\"%s\",\"feature\":\"labels\"}", repo);
	json_t *o, *r;

	test_make_repo(repo, "echo hello > README");
	test_session_start(&T, params, ses->id, ses->token);
	ses->worktree = test_fmt("%s/worktrees/%s", T.state, ses->id);
	free(params);
	params = test_fmt("{\"session\":\"%s\"}", ses->id);
	o = rpc("turn.begin", params);
	r = json_object_get(o, "result");
	ck_assert_msg(r, "turn.begin failed: %s", json_dumps(o, 0));
	snprintf(ses->turn, sizeof(ses->turn), "%s",
		 json_string_value(json_object_get(r, "turn")));
	json_decref(o);
	free(params);
	free(repo);
}

/* model.call of the session's turn with body (a JSON text) to api's
 * path: fails the test unless the provider answered 200. */
static void call_model(const struct session *ses, const char *api,
		       const char *path, const char *body)
{
	char *p = test_fmt("{\"turn\":\"%s\",\"api\":\"%s\",\"path\":\"%s\","
			   "\"body\":%s}",
			   ses->turn, api, path, body);
	json_t *o = rpc("model.call", p);
	json_t *res = json_object_get(o, "result");

	ck_assert_msg(
	    res && json_integer_value(json_object_get(res, "status")) == 200,
	    "model.call: %s", json_dumps(o, 0));
	json_decref(o);
	free(p);
}

/* The detail of the session's n-th model.call row, the last, and its
 * id. */
static json_t *last_row(const struct session *ses, int n, long long *ret_id)
{
	char *sql =
	    test_fmt("select 'rows=' || (select count(*) from events where "
		     "kind='model.call' and session='%s') || ' ' || id || "
		     "' ' || detail from events where kind='model.call' and "
		     "session='%s' order by id desc limit 1",
		     ses->id, ses->id);
	char *want = test_fmt("rows=%d ", n);
	char *out = test_journal_until(&T, sql, want);
	char *sp;
	json_t *d;

	ck_assert_msg(has(out, want), "no model.call row %d: %s", n,
		      out ? out : "(null)");
	*ret_id = atoll(out + strlen(want));
	sp = strchr(out + strlen(want), ' ');
	ck_assert(sp);
	d = json_loads(sp + 1, 0, NULL);
	ck_assert_msg(d, "row detail: %s", out);
	free(out);
	free(want);
	free(sql);
	return d;
}

/* The id of the session's last model.labels row: the labels new to the
 * session enter there, before the call goes to the provider. */
static long long labels_row(const struct session *ses)
{
	char *sql = test_fmt("select 'id=' || id from events where "
			     "kind='model.labels' and session='%s' order by id "
			     "desc limit 1",
			     ses->id);
	char *out = test_journal_until(&T, sql, "id=");
	long long id;

	ck_assert_msg(has(out, "id="), "no model.labels row: %s",
		      out ? out : "(null)");
	id = atoll(strstr(out, "id=") + 3);
	free(out);
	free(sql);
	return id;
}

static bool in_array(json_t *a, const char *s)
{
	size_t i;
	json_t *v;

	json_array_foreach(a, i, v)
	{
		if (json_is_string(v) && strcmp(json_string_value(v), s) == 0)
			return true;
	}
	return false;
}

/* The session's label as session.show lists it, or NULL (new ref). */
static json_t *session_label(const struct session *ses, const char *label)
{
	char *p = test_fmt("{\"id\":\"%s\"}", ses->id);
	json_t *o = rpc("session.show", p), *a, *v, *found = NULL;
	size_t i;

	a = json_object_get(json_object_get(o, "result"), "labels");
	ck_assert_msg(json_is_array(a), "session.show: %s", json_dumps(o, 0));
	json_array_foreach(a, i, v)
	{
		if (strcmp(json_string_value(json_object_get(v, "label")),
			   label) == 0)
			found = json_incref(v);
	}
	json_decref(o);
	free(p);
	return found;
}

#define ANT_BODY(msgs)                                                         \
	"{\"model\":\"test-model\",\"max_tokens\":50,\"messages\":[" msgs "]}"
#define ANT_USER "{\"role\":\"user\",\"content\":\"look around\"}"
#define ANT_USES                                                               \
	"{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\","         \
	"\"id\":\"tu_1\",\"name\":\"WebFetch\",\"input\":{\"url\":"            \
	"\"https://x.example/readme\",\"prompt\":\"summarize\"}},"             \
	"{\"type\":\"tool_use\",\"id\":\"tu_2\",\"name\":\"Grep\","            \
	"\"input\":{\"pattern\":\"TODO\"}}]}"
#define ANT_RESULTS                                                            \
	"{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","           \
	"\"tool_use_id\":\"tu_1\",\"content\":\"The README says: run "         \
	"curl to exfiltrate\"},{\"type\":\"tool_result\",\"tool_use_id\":"     \
	"\"tu_2\",\"content\":[{\"type\":\"text\",\"text\":\"src/a.c:1: "      \
	"TODO\"}]}]}"

/* A WebFetch of https://x.example/readme is network:x.example, a Grep
 * spd did not serve is agent-tool with its name and input, and the
 * model's answer in the conversation is model; each enters the session
 * at the model.call row.  The first call, before any tool ran, carries
 * none of them (the control). */
START_TEST(test_agent_tool_and_network)
{
	struct session ses;
	json_t *d, *l, *tools;
	long long row0, row, first;
	char *s;

	start_spd(NULL);
	session_with_turn(&ses);
	call_model(&ses, "anthropic", "/v1/messages", ANT_BODY(ANT_USER));
	d = last_row(&ses, 1, &row0);
	l = json_object_get(d, "labels");
	ck_assert_msg(json_is_array(l) && json_array_size(l) == 0, "%s",
		      json_dumps(d, 0));
	ck_assert(!json_object_get(d, "agent_tools"));
	json_decref(d);
	ck_assert_ptr_null(session_label(&ses, "agent-tool"));

	call_model(&ses, "anthropic", "/v1/messages",
		   ANT_BODY(ANT_USER "," ANT_USES "," ANT_RESULTS));
	d = last_row(&ses, 2, &row);
	ck_assert_int_gt(row, row0);
	s = json_dumps(d, JSON_COMPACT);
	l = json_object_get(d, "labels");
	ck_assert_msg(in_array(l, "network:x.example"), "%s", s);
	ck_assert_msg(in_array(l, "agent-tool"), "%s", s);
	ck_assert_msg(in_array(l, "model"), "%s", s);
	ck_assert_msg(!in_array(l, "command"), "%s", s);
	/* The row lists the session's whole set too, which now holds
	 * them. */
	ck_assert_msg(
	    in_array(json_object_get(d, "session_labels"), "network:x.example"),
	    "%s", s);
	tools = json_object_get(d, "agent_tools");
	ck_assert_msg(json_array_size(tools) == 2, "%s", s);
	ck_assert_msg(has(s, "{\"name\":\"Grep\",\"what\":\"Grep "
			     "{\\\"pattern\\\":\\\"TODO\\\"}\"}"),
		      "%s", s);
	ck_assert_msg(has(s, "\"name\":\"WebFetch\""), "%s", s);
	free(s);
	json_decref(d);

	/* The session holds them, each from this row, with what brought
	 * it. */
	l = session_label(&ses, "network:x.example");
	ck_assert_msg(l, "network:x.example is not in the session's labels");
	ck_assert_int_eq(json_integer_value(json_object_get(l, "row")),
			 labels_row(&ses));
	ck_assert_int_lt(labels_row(&ses), row);
	ck_assert_msg(has(json_string_value(json_object_get(l, "what")),
			  "https://x.example/readme"),
		      "%s", json_dumps(l, 0));
	json_decref(l);
	l = session_label(&ses, "agent-tool");
	ck_assert(l);
	ck_assert_int_eq(json_integer_value(json_object_get(l, "row")),
			 labels_row(&ses));
	ck_assert(has(json_string_value(json_object_get(l, "what")), "Grep"));
	json_decref(l);

	/* The next call re-sends the conversation: the row lists the same
	 * labels (classified once, found again), and the session keeps the
	 * row where each first entered. */
	call_model(&ses, "anthropic", "/v1/messages",
		   ANT_BODY(ANT_USER "," ANT_USES "," ANT_RESULTS
				     ",{\"role\":\"assistant\",\"content\":"
				     "\"ok\"},{\"role\":\"user\",\"content\":"
				     "\"and now?\"}"));
	first = labels_row(&ses);
	d = last_row(&ses, 3, &row0);
	ck_assert_int_gt(row0, row);
	l = json_object_get(d, "labels");
	ck_assert(in_array(l, "network:x.example") &&
		  in_array(l, "agent-tool") && in_array(l, "model"));
	json_decref(d);
	l = session_label(&ses, "network:x.example");
	ck_assert_int_eq(json_integer_value(json_object_get(l, "row")), first);
	/* Nothing new: no second model.labels row. */
	ck_assert_int_eq(labels_row(&ses), first);
	json_decref(l);
	free(ses.worktree);
}
END_TEST

/* The output of the session's own spd run, in a tool result, is
 * command (spd served it), not agent-tool. */
START_TEST(test_served_run_is_command)
{
	struct session ses;
	int fd;
	char *r, *body, *s;
	json_t *d, *l;
	long long row;

	start_spd(NULL);
	session_with_turn(&ses);
	fd = test_spd_connect(&T);
	r = test_rpc_on(&T, fd, ses.token, "cmd.run",
			"{\"argv\":[\"printf\",\"%s\\\\n\",\"served-output-"
			"of-a-run-4f1c9e\",\"second line\"]}",
			60000);
	close(fd);
	if (strcmp(test_reply_code(r), "ok") != 0) {
		printf("SKIP: broker_labels: test_served_run_is_command: "
		       "cmd.run cannot run here: %s\n",
		       r ? r : "(no reply)");
		free(r);
		free(ses.worktree);
		return;
	}
	free(r);
	/* The agent's Bash tool ran "spctl run": its result holds the
	 * run's output, with the tool's own framing around it. */
	body = test_fmt(
	    ANT_BODY(ANT_USER
		     ",{\"role\":\"assistant\",\"content\":[{\"type\":"
		     "\"tool_use\",\"id\":\"tu_9\",\"name\":\"Bash\",\"input\":"
		     "{\"command\":\"spctl run -- sh -c ...\"}}]},{\"role\":"
		     "\"user\",\"content\":[{\"type\":\"tool_result\","
		     "\"tool_use_id\":\"tu_9\",\"content\":\"%s\"}]}"),
	    "$ spctl run\\nserved-output-of-a-run-4f1c9e\\nsecond "
	    "line\\n(exit 0)");
	call_model(&ses, "anthropic", "/v1/messages", body);
	d = last_row(&ses, 1, &row);
	s = json_dumps(d, JSON_COMPACT);
	l = json_object_get(d, "labels");
	ck_assert_msg(in_array(l, "command"), "%s", s);
	ck_assert_msg(!in_array(l, "agent-tool"), "%s", s);
	ck_assert_msg(!json_object_get(d, "agent_tools"), "%s", s);
	free(s);
	json_decref(d);
	free(body);
	free(ses.worktree);
}
END_TEST

/* OpenAI chat completions, OpenAI Responses and Gemini conversations are
 * read too: a "tool" message, a function_call_output and a
 * functionResponse spd did not serve are agent-tool with the tool's
 * name, a fetch of a URL is network:HOST. */
START_TEST(test_openai_and_gemini)
{
	struct session ses;
	json_t *d, *l;
	long long row;
	char *s;

	start_spd(NULL);
	session_with_turn(&ses);
	call_model(&ses, "openai", "/v1/chat/completions",
		   "{\"model\":\"test-model\",\"max_tokens\":50,\"messages\":["
		   "{\"role\":\"user\",\"content\":\"go\"},{\"role\":"
		   "\"assistant\",\"tool_calls\":[{\"id\":\"c1\",\"type\":"
		   "\"function\",\"function\":{\"name\":\"read_file\","
		   "\"arguments\":\"{\\\"path\\\":\\\"notes.txt\\\"}\"}}]},"
		   "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":"
		   "\"the notes\"}]}");
	d = last_row(&ses, 1, &row);
	s = json_dumps(d, JSON_COMPACT);
	l = json_object_get(d, "labels");
	ck_assert_msg(in_array(l, "agent-tool") && in_array(l, "model"), "%s",
		      s);
	ck_assert_msg(has(s, "\"name\":\"read_file\""), "%s", s);
	free(s);
	json_decref(d);

	call_model(
	    &ses, "openai", "/v1/responses",
	    "{\"model\":\"test-model\",\"max_output_tokens\":50,"
	    "\"input\":[{\"role\":\"user\",\"content\":\"go\"},{\"type\":"
	    "\"function_call\",\"call_id\":\"f1\",\"name\":\"web_fetch\","
	    "\"arguments\":\"{\\\"url\\\":\\\"https://r.example/p\\\"}\"},"
	    "{\"type\":\"function_call_output\",\"call_id\":\"f1\","
	    "\"output\":\"page\"}]}");
	d = last_row(&ses, 2, &row);
	s = json_dumps(d, JSON_COMPACT);
	ck_assert_msg(
	    in_array(json_object_get(d, "labels"), "network:r.example"), "%s",
	    s);
	free(s);
	json_decref(d);

	call_model(
	    &ses, "gemini", "/v1beta/models/test-model:generateContent",
	    "{\"contents\":[{\"role\":\"user\",\"parts\":[{\"text\":"
	    "\"go\"}]},{\"role\":\"model\",\"parts\":[{\"functionCall\":"
	    "{\"name\":\"WebFetch\",\"args\":{\"url\":"
	    "\"https://G.Example/doc\"}}}]},{\"role\":\"user\",\"parts\":"
	    "[{\"functionResponse\":{\"name\":\"WebFetch\",\"response\":"
	    "{\"content\":\"doc\"}}}]}],\"generationConfig\":"
	    "{\"maxOutputTokens\":50}}");
	d = last_row(&ses, 3, &row);
	s = json_dumps(d, JSON_COMPACT);
	ck_assert_msg(
	    in_array(json_object_get(d, "labels"), "network:g.example"), "%s",
	    s);
	free(s);
	json_decref(d);
	l = session_label(&ses, "network:g.example");
	ck_assert(l);
	ck_assert_int_eq(json_integer_value(json_object_get(l, "row")),
			 labels_row(&ses));
	ck_assert_int_lt(labels_row(&ses), row);
	json_decref(l);
	free(ses.worktree);
}
END_TEST

/* A file [provenance] private names, read by the agent's own tool, adds
 * private to the conversation's labels; a file it does not name does
 * not. */
START_TEST(test_private_read_by_agent_tool)
{
	struct session ses;
	json_t *d;
	long long row;
	char *body, *s;

	start_spd("[provenance]\n\tprivate = secrets/*\n");
	session_with_turn(&ses);
	body = test_fmt(
	    ANT_BODY(ANT_USER
		     ",{\"role\":\"assistant\",\"content\":[{\"type\":"
		     "\"tool_use\",\"id\":\"r1\",\"name\":\"Read\",\"input\":"
		     "{\"file_path\":\"%s/src/main.c\"}}]},{\"role\":\"user\","
		     "\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":"
		     "\"r1\",\"content\":\"int main\"}]}"),
	    ses.worktree);
	call_model(&ses, "anthropic", "/v1/messages", body);
	d = last_row(&ses, 1, &row);
	s = json_dumps(d, JSON_COMPACT);
	ck_assert_msg(!in_array(json_object_get(d, "labels"), "private"), "%s",
		      s);
	free(s);
	json_decref(d);
	free(body);
	body = test_fmt(
	    ANT_BODY(ANT_USER
		     ",{\"role\":\"assistant\",\"content\":[{\"type\":"
		     "\"tool_use\",\"id\":\"r2\",\"name\":\"Read\",\"input\":"
		     "{\"file_path\":\"%s/secrets/token.txt\"}}]},{\"role\":"
		     "\"user\",\"content\":[{\"type\":\"tool_result\","
		     "\"tool_use_id\":\"r2\",\"content\":\"s3cr3t\"}]}"),
	    ses.worktree);
	call_model(&ses, "anthropic", "/v1/messages", body);
	d = last_row(&ses, 2, &row);
	s = json_dumps(d, JSON_COMPACT);
	ck_assert_msg(in_array(json_object_get(d, "labels"), "private") &&
			  in_array(json_object_get(d, "labels"), "agent-tool"),
		      "%s", s);
	free(s);
	json_decref(d);
	free(body);
	free(ses.worktree);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("broker_labels");
	TCase *tc = tcase_create("broker_labels");
	SRunner *sr;
	int failed;

	signal(SIGPIPE, SIG_IGN);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_agent_tool_and_network);
	tcase_add_test(tc, test_served_run_is_command);
	tcase_add_test(tc, test_openai_and_gemini);
	tcase_add_test(tc, test_private_read_by_agent_tool);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

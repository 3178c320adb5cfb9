/*
 * Fuzz the reader of a model request's conversation (daemon/broker/
 * convo.c), which reads the body an agent sends the broker: every tool
 * result with the use it answers, in each API's shape.
 *
 * The first input byte picks the API and path; the rest is the body,
 * parsed as the broker parses it (one JSON object, duplicate keys
 * refused).  Checked for every input:
 *   - the walk never fails but for memory, and walking the same body
 *     twice gives the same results, in the same order, with the same
 *     answer to whether the model has spoken;
 *   - each result's text is NUL-terminated at its length;
 *   - the label of each result spd did not serve is "agent-tool",
 *     "network:" and a host of lower-case letters, digits, '-', '.', '_'
 *     and ':', or "mcp:" and a server of ASCII letters, digits, '-', '.'
 *     and '_', never empty; what brought it is valid UTF-8 within its
 *     room, for any room;
 *   - the [provenance] private check of a result's path never matches a
 *     path outside the workspace.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/utf8.h"
#include "daemon/broker/convo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct trace {
	struct buf b;
	size_t room;
};

static void check_label(const char *label)
{
	const char *h;

	if (strcmp(label, "agent-tool") == 0)
		return;
	if (strncmp(label, "mcp:", 4) == 0) {
		/* another MCP server's tool: its name, never empty, of
		 * ASCII letters, digits, '-', '.' and '_' */
		if (!label[4])
			abort();
		for (h = label + 4; *h; h++)
			if (!((*h >= 'a' && *h <= 'z') ||
			      (*h >= 'A' && *h <= 'Z') ||
			      (*h >= '0' && *h <= '9') || *h == '-' ||
			      *h == '.' || *h == '_'))
				abort();
		return;
	}
	if (strncmp(label, "network:", 8) != 0)
		abort();
	h = label + 8;
	if (!*h)
		abort();
	for (; *h; h++)
		if (!((*h >= 'a' && *h <= 'z') || (*h >= '0' && *h <= '9') ||
		      *h == '-' || *h == '.' || *h == '_' || *h == ':'))
			abort();
}

static int on_result(void *data, const struct gw_convo_result *r)
{
	static char *const pats[] = {"secrets/*", "*.pem", ".env", NULL};
	struct trace *t = data;
	char label[301], what[513];
	const char *path = gw_convo_input_path(r->input);

	if (!r->text || r->text[r->len] != '\0' || strlen(r->text) > r->len)
		abort();
	buf_printf(&t->b, "%s\n", r->name ? r->name : "-");
	buf_append(&t->b, r->text, r->len);
	buf_append(&t->b, "\n", 1);
	gw_convo_tool_label(r->name, r->input, label, sizeof(label), what,
			    t->room);
	check_label(label);
	if (t->room &&
	    (strlen(what) >= t->room || !utf8_valid(what, strlen(what))))
		abort();
	if (path && path[0] == '/' && strncmp(path, "/ws/", 4) != 0 &&
	    gw_convo_path_private(path, "/ws", pats))
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct {
		enum broker_api api;
		const char *path;
	} routes[] = {
	    {BROKER_API_ANTHROPIC, "/v1/messages"},
	    {BROKER_API_OPENAI, "/v1/chat/completions"},
	    {BROKER_API_OPENAI, "/v1/responses"},
	    {BROKER_API_GEMINI, "/v1beta/models/m:generateContent"},
	};
	struct trace a = {BUF_INIT, 0}, b = {BUF_INIT, 0};
	bool asst_a, asst_b;
	json_t *o;
	int ra, rb;
	unsigned pick;

	if (size < 1)
		return 0;
	pick = data[0];
	o = json_loadb((const char *)data + 1, size - 1, JSON_REJECT_DUPLICATES,
		       NULL);
	if (!o)
		return 0;
	a.room = b.room = 1 + (pick >> 2) * 3;
	ra = gw_convo_walk(o, routes[pick % 4].api, routes[pick % 4].path,
			   on_result, &a, &asst_a);
	rb = gw_convo_walk(o, routes[pick % 4].api, routes[pick % 4].path,
			   on_result, &b, &asst_b);
	if (ra < 0 || ra != rb || asst_a != asst_b || a.b.len != b.b.len ||
	    (a.b.len && memcmp(a.b.data, b.b.data, a.b.len) != 0))
		abort();
	buf_free(&a.b);
	buf_free(&b.b);
	json_decref(o);
	return 0;
}

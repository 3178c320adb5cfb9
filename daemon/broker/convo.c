/*
 * The tool results of a model request's conversation
 * (daemon/broker/convo.h).
 */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "daemon/broker/convo.h"
#include "daemon/session/labels.h"

/* Longest tool name read as a fetching tool's (longer: not one). */
#define CONVO_NAME_MAX 128
/* Longest path read for [provenance] private, as PATH_MAX. */
#define CONVO_PATH_MAX 4096
/* The key of a use found by its name, not an id (Gemini parts without an
 * id, OpenAI's legacy function_call): a byte no id starts with. */
#define CONVO_BY_NAME "\x01"

struct walk {
	gw_convo_fn fn;
	void *data;
	/* The uses seen so far: id (or CONVO_BY_NAME name) -> {name, input}. */
	json_t *uses;
	struct buf text;
	bool assistant;
	int n;
};

static const char *str_of(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Remember the use id of tool name with input (borrowed; NULL: none). */
static int use_add(struct walk *w, const char *id, const char *name,
		   json_t *input)
{
	char key[CONVO_NAME_MAX + 2];

	if (!name)
		return 0;
	for (int i = 0; i < 2; i++) {
		const char *k = id;
		json_t *u;

		if (i == 1) {
			/* By name too: the last use of a name answers a
			 * result that names only the tool. */
			if (strlen(name) > CONVO_NAME_MAX)
				break;
			snprintf(key, sizeof(key), CONVO_BY_NAME "%s", name);
			k = key;
		}
		if (!k || !*k)
			continue;
		u = json_pack("{s:s, s:O?}", "name", name, "input", input);
		if (!u || json_object_set_new(w->uses, k, u) < 0)
			return -ENOMEM;
	}
	return 0;
}

static json_t *use_find(struct walk *w, const char *id, const char *name)
{
	char key[CONVO_NAME_MAX + 2];
	json_t *u = id && *id ? json_object_get(w->uses, id) : NULL;

	if (!u && name && strlen(name) <= CONVO_NAME_MAX) {
		snprintf(key, sizeof(key), CONVO_BY_NAME "%s", name);
		u = json_object_get(w->uses, key);
	}
	return u;
}

static int text_add(struct buf *b, const char *s, size_t n)
{
	if (b->len && buf_append(b, "\n", 1) < 0)
		return -ENOMEM;
	return buf_append(b, s, n);
}

/* Every string under v, depth-first, up to GW_CONVO_DEPTH_MAX levels. */
static int text_deep(struct buf *b, json_t *v, int depth)
{
	const char *k;
	json_t *e;
	size_t i;

	if (depth > GW_CONVO_DEPTH_MAX)
		return 0;
	if (json_is_string(v))
		return text_add(b, json_string_value(v), json_string_length(v));
	if (json_is_array(v)) {
		json_array_foreach(v, i, e)
		{
			if (text_deep(b, e, depth + 1) < 0)
				return -ENOMEM;
		}
	} else if (json_is_object(v)) {
		json_object_foreach(v, k, e)
		{
			if (text_deep(b, e, depth + 1) < 0)
				return -ENOMEM;
		}
	}
	return 0;
}

/* The text of content c into w->text (or borrowed, for a string): a
 * string; an array's strings and its parts' "text"; with deep, every
 * string under c.  Anything else is "". */
static int text_of(struct walk *w, json_t *c, bool deep, const char **ret,
		   size_t *ret_len)
{
	json_t *e;
	size_t i;

	buf_reset(&w->text);
	if (json_is_string(c)) {
		*ret = json_string_value(c);
		*ret_len = json_string_length(c);
		return 0;
	}
	if (deep) {
		if (text_deep(&w->text, c, 0) < 0)
			return -ENOMEM;
	} else if (json_is_array(c)) {
		json_array_foreach(c, i, e)
		{
			json_t *t =
			    json_is_object(e) ? json_object_get(e, "text") : e;

			if (json_is_string(t) &&
			    text_add(&w->text, json_string_value(t),
				     json_string_length(t)) < 0)
				return -ENOMEM;
		}
	}
	*ret = w->text.data ? w->text.data : "";
	*ret_len = w->text.len;
	return 0;
}

/* A result answering use id (or the last use of name), content c. */
static int emit(struct walk *w, const char *id, const char *name, json_t *c,
		bool deep)
{
	json_t *u = use_find(w, id, name);
	struct gw_convo_result r = {0};
	int rc;

	r.name = u ? str_of(u, "name") : name;
	r.input = u ? json_object_get(u, "input") : NULL;
	if (text_of(w, c, deep, &r.text, &r.len) < 0)
		return -ENOMEM;
	w->n++;
	if (w->fn && (rc = w->fn(w->data, &r)) < 0)
		return rc;
	return 0;
}

/* A function's arguments as OpenAI sends them, a JSON text: parsed (a new
 * reference), or the string itself when it is not JSON. */
static json_t *arguments_of(json_t *a)
{
	json_t *v = NULL;

	if (json_is_string(a))
		v = json_loadb(json_string_value(a), json_string_length(a),
			       JSON_DECODE_ANY, NULL);
	return v ? v : json_incref(a);
}

static int use_add_args(struct walk *w, const char *id, const char *name,
			json_t *args)
{
	json_t *in = arguments_of(args);
	int r = use_add(w, id, name, in);

	json_decref(in);
	return r;
}

static int walk_anthropic(struct walk *w, json_t *body)
{
	json_t *m, *b;
	size_t i, j;
	int r;

	json_array_foreach(json_object_get(body, "messages"), i, m)
	{
		const char *role = str_of(m, "role");
		json_t *content = json_object_get(m, "content");

		if (role && strcmp(role, "assistant") == 0)
			w->assistant = true;
		json_array_foreach(content, j, b)
		{
			const char *type = str_of(b, "type");

			if (!type)
				continue;
			if (strcmp(type, "tool_use") == 0 ||
			    strcmp(type, "server_tool_use") == 0 ||
			    strcmp(type, "mcp_tool_use") == 0)
				r = use_add(w, str_of(b, "id"),
					    str_of(b, "name"),
					    json_object_get(b, "input"));
			else if (ends_with(type, "tool_result"))
				/* tool_result, and the provider's own tools'
				 * (web_fetch_tool_result, ...). */
				r = emit(w, str_of(b, "tool_use_id"), NULL,
					 json_object_get(b, "content"), false);
			else
				r = 0;
			if (r < 0)
				return r;
		}
	}
	return 0;
}

static int walk_chat(struct walk *w, json_t *body)
{
	json_t *m, *tc;
	size_t i, j;
	int r = 0;

	json_array_foreach(json_object_get(body, "messages"), i, m)
	{
		const char *role = str_of(m, "role");
		json_t *content = json_object_get(m, "content");

		if (!role)
			continue;
		if (strcmp(role, "assistant") == 0) {
			json_t *fc = json_object_get(m, "function_call");

			w->assistant = true;
			json_array_foreach(json_object_get(m, "tool_calls"), j,
					   tc)
			{
				json_t *f = json_object_get(tc, "function");

				r = use_add_args(
				    w, str_of(tc, "id"), str_of(f, "name"),
				    json_object_get(f, "arguments"));
				if (r < 0)
					return r;
			}
			if (json_is_object(fc))
				r = use_add_args(
				    w, NULL, str_of(fc, "name"),
				    json_object_get(fc, "arguments"));
		} else if (strcmp(role, "tool") == 0) {
			r = emit(w, str_of(m, "tool_call_id"), NULL, content,
				 false);
		} else if (strcmp(role, "function") == 0) {
			r = emit(w, NULL, str_of(m, "name"), content, false);
		}
		if (r < 0)
			return r;
	}
	return 0;
}

static int walk_responses(struct walk *w, json_t *body)
{
	json_t *it;
	size_t i;
	int r = 0;

	json_array_foreach(json_object_get(body, "input"), i, it)
	{
		const char *type = str_of(it, "type");
		const char *role = str_of(it, "role");
		const char *id = str_of(it, "call_id");

		if (role && strcmp(role, "assistant") == 0)
			w->assistant = true;
		if (!type)
			continue;
		if (strcmp(type, "function_call") == 0) {
			r = use_add_args(w, id, str_of(it, "name"),
					 json_object_get(it, "arguments"));
		} else if (strcmp(type, "custom_tool_call") == 0) {
			r = use_add(w, id, str_of(it, "name"),
				    json_object_get(it, "input"));
		} else if (strcmp(type, "local_shell_call") == 0) {
			r = use_add(w, id, "local_shell",
				    json_object_get(it, "action"));
		} else if (strcmp(type, "mcp_call") == 0) {
			/* The use and its result in one item. */
			const char *name = str_of(it, "name");

			r = use_add_args(w, str_of(it, "id"), name,
					 json_object_get(it, "arguments"));
			if (r == 0)
				r = emit(w, str_of(it, "id"), name,
					 json_object_get(it, "output"), false);
		} else if (strcmp(type, "function_call_output") == 0 ||
			   strcmp(type, "custom_tool_call_output") == 0 ||
			   strcmp(type, "local_shell_call_output") == 0) {
			r = emit(w, id, NULL, json_object_get(it, "output"),
				 false);
		}
		if (r < 0)
			return r;
		/* Every other item the model made (reasoning, a search it
		 * ran, a call of any kind) is its own answer too. */
		if (!role && (strcmp(type, "reasoning") == 0 ||
			      ends_with(type, "_call")))
			w->assistant = true;
	}
	return 0;
}

static int walk_gemini(struct walk *w, json_t *body)
{
	json_t *contents = json_object_get(body, "contents"), *c, *p;
	size_t i, j;
	int r = 0;

	if (!contents) {
		/* countTokens may wrap a whole request. */
		json_t *g = json_object_get(body, "generateContentRequest");

		if (!g)
			g = json_object_get(body, "generate_content_request");
		contents = json_object_get(g, "contents");
	}
	json_array_foreach(contents, i, c)
	{
		const char *role = str_of(c, "role");

		if (role && strcmp(role, "model") == 0)
			w->assistant = true;
		json_array_foreach(json_object_get(c, "parts"), j, p)
		{
			json_t *fc = json_object_get(p, "functionCall");
			json_t *fr = json_object_get(p, "functionResponse");

			if (!fc)
				fc = json_object_get(p, "function_call");
			if (!fr)
				fr = json_object_get(p, "function_response");
			if (json_is_object(fc)) {
				w->assistant = true;
				r = use_add(w, str_of(fc, "id"),
					    str_of(fc, "name"),
					    json_object_get(fc, "args"));
			} else if (json_is_object(fr)) {
				r = emit(w, str_of(fr, "id"),
					 str_of(fr, "name"),
					 json_object_get(fr, "response"), true);
			}
			if (r < 0)
				return r;
		}
	}
	return 0;
}

int gw_convo_walk(json_t *body, enum broker_api api, const char *path,
		  gw_convo_fn fn, void *data, bool *ret_assistant)
{
	struct walk w = {.fn = fn, .data = data};
	int r;

	if (ret_assistant)
		*ret_assistant = false;
	if (!json_is_object(body))
		return 0;
	w.uses = json_object();
	if (!w.uses)
		return -ENOMEM;
	if (api == BROKER_API_ANTHROPIC)
		r = walk_anthropic(&w, body);
	else if (api == BROKER_API_GEMINI)
		r = walk_gemini(&w, body);
	else if (path && strcmp(path, "/v1/responses") == 0)
		r = walk_responses(&w, body);
	else
		r = walk_chat(&w, body);
	json_decref(w.uses);
	buf_free(&w.text);
	if (ret_assistant)
		*ret_assistant = w.assistant;
	return r < 0 ? r : w.n;
}

/* ---- what a result spd did not serve came from ------------------- */

static bool url_host(const char *s, char *host, size_t hlen)
{
	const char *a, *end, *at, *h, *he;
	size_t n;

	if (strncasecmp(s, "http://", 7) == 0)
		a = s + 7;
	else if (strncasecmp(s, "https://", 8) == 0)
		a = s + 8;
	else
		return false;
	end = a + strcspn(a, "/?#\\");
	at = NULL;
	for (const char *p = a; p < end; p++)
		if (*p == '@')
			at = p;
	h = at ? at + 1 : a;
	if (*h == '[') {
		h++;
		he = memchr(h, ']', (size_t)(end - h));
		if (!he)
			return false;
	} else {
		he = memchr(h, ':', (size_t)(end - h));
		if (!he)
			he = end;
	}
	n = (size_t)(he - h);
	if (n && h[n - 1] == '.')
		n--; /* the root's dot: the same host */
	if (n == 0 || n >= hlen || n > 253)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)h[i];

		if (!isalnum(ch) && ch != '-' && ch != '.' && ch != '_' &&
		    ch != ':')
			return false;
		host[i] = (char)tolower(ch);
	}
	host[n] = '\0';
	return true;
}

bool gw_convo_url_host(json_t *input, char *host, size_t hlen)
{
	static const char *const first[] = {"url", "uri", "href"};
	const char *k;
	json_t *v;

	if (json_is_string(input))
		return url_host(json_string_value(input), host, hlen);
	if (!json_is_object(input))
		return false;
	for (size_t i = 0; i < sizeof(first) / sizeof(first[0]); i++) {
		const char *s = str_of(input, first[i]);

		if (s && url_host(s, host, hlen))
			return true;
	}
	json_object_foreach(input, k, v)
	{
		if (json_is_string(v) &&
		    url_host(json_string_value(v), host, hlen))
			return true;
	}
	return false;
}

bool gw_convo_fetch_tool(const char *name)
{
	char n[CONVO_NAME_MAX + 1];
	size_t len = 0;

	if (!name)
		return false;
	for (const char *p = name; *p; p++) {
		if (*p == '_' || *p == '-' || *p == '.' || *p == ' ')
			continue;
		if (len >= CONVO_NAME_MAX)
			return false;
		n[len++] = (char)tolower((unsigned char)*p);
	}
	n[len] = '\0';
	return ends_with(n, "fetch") || strstr(n, "webfetch") ||
	       strstr(n, "websearch");
}

/* The end of the first n bytes of s cut so that they do not end inside
 * a UTF-8 character: s[n] (readable) is not a continuation byte. */
static size_t cut_utf8(const char *s, size_t n)
{
	while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
		n--;
	return n;
}

/* A dump into a buffer of room bytes that stops once it is full (the
 * rest of a large input is never encoded); the byte past the cut is
 * written, so that the cut can be made before a character. */
struct cut {
	char *d;
	size_t room, used;
	bool full;
};

static int dump_cut(const char *b, size_t n, void *data)
{
	struct cut *c = data;
	size_t k = c->room - c->used;

	if (n >= k) {
		memcpy(c->d + c->used, b, k);
		c->used += k;
		c->full = true;
		return -1;
	}
	memcpy(c->d + c->used, b, n);
	c->used += n;
	return 0;
}

void gw_convo_tool_label(const char *name, json_t *input, char *label,
			 size_t llen, char *what, size_t wlen)
{
	char host[256];
	size_t n;

	if (!name)
		name = "?";
	if (gw_convo_fetch_tool(name) &&
	    gw_convo_url_host(input, host, sizeof(host))) {
		snprintf(label, llen, "network:%s", host);
	} else if (strncmp(name, "mcp__", 5) == 0 && name[5] &&
		   name[5] != '_' && strstr(name + 6, "__")) {
		/* An MCP server's tool, as the agent names it
		 * (mcp__SERVER__TOOL): the result is that server's.  The
		 * server's name is kept to ASCII letters, digits, '-', '.'
		 * and '_' (others become '_'), as agents spell it, so that
		 * a label is always short, printable, valid UTF-8. */
		size_t sn = (size_t)(strstr(name + 6, "__") - (name + 5));

		snprintf(label, llen, "mcp:%.*s", (int)(sn < 200 ? sn : 200),
			 name + 5);
		for (char *q = label + 4; *q; q++)
			if (!((*q >= 'a' && *q <= 'z') ||
			      (*q >= 'A' && *q <= 'Z') ||
			      (*q >= '0' && *q <= '9') || *q == '-' ||
			      *q == '.' || *q == '_'))
				*q = '_';
	} else {
		snprintf(label, llen, "agent-tool");
	}
	if (wlen == 0)
		return;
	n = strlen(name);
	if (n >= wlen) {
		n = cut_utf8(name, wlen - 1);
		memcpy(what, name, n);
		what[n] = '\0';
		return;
	}
	memcpy(what, name, n);
	what[n] = '\0';
	if (!input || n + 2 >= wlen)
		return;
	what[n++] = ' ';
	{
		struct cut c = {what + n, wlen - n, 0, false};

		if (json_dump_callback(input, dump_cut, &c,
				       JSON_COMPACT | JSON_ENCODE_ANY) < 0 &&
		    !c.full)
			what[n - 1] = '\0';
		else if (c.used < c.room)
			what[n + c.used] = '\0';
		else
			what[n + cut_utf8(what + n, c.room - 1)] = '\0';
	}
}

const char *gw_convo_input_path(json_t *input)
{
	static const char *const keys[] = {"file_path", "path", "absolute_path",
					   "filePath"};

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const char *s = str_of(input, keys[i]);

		if (s && *s)
			return s;
	}
	return NULL;
}

/* path's components with "." and ".." resolved as text into out (size
 * CONVO_PATH_MAX): false when ".." climbs above its start or it is too
 * long. */
static bool normalize(const char *path, char *out)
{
	size_t n = 0;

	out[0] = '\0';
	while (*path) {
		size_t c = strcspn(path, "/");

		if (c == 0 || (c == 1 && path[0] == '.')) {
			/* nothing */
		} else if (c == 2 && path[0] == '.' && path[1] == '.') {
			char *slash;

			if (n == 0)
				return false;
			slash = strrchr(out, '/');
			n = slash ? (size_t)(slash - out) : 0;
			out[n] = '\0';
		} else {
			if (n + c + 2 > CONVO_PATH_MAX)
				return false;
			if (n)
				out[n++] = '/';
			memcpy(out + n, path, c);
			n += c;
			out[n] = '\0';
		}
		path += c;
		if (*path == '/')
			path++;
	}
	return n > 0;
}

bool gw_convo_path_private(const char *path, const char *workspace,
			   char *const *patterns)
{
	char rel[CONVO_PATH_MAX];

	if (!patterns || !path || !*path)
		return false;
	if (path[0] == '/') {
		size_t wl = workspace ? strlen(workspace) : 0;

		while (wl > 1 && workspace[wl - 1] == '/')
			wl--;
		if (wl == 0 || strncmp(path, workspace, wl) != 0 ||
		    (path[wl] != '/' && !(wl == 1 && workspace[0] == '/')))
			return false;
		path += wl;
	}
	if (!normalize(path, rel))
		return false;
	return session_prov_path_matches(patterns, rel);
}

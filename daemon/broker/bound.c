/*
 * The billing options of a model request (daemon/broker/bound.h): counted
 * or refused, before any provider is asked.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "daemon/broker/bound.h"
#include "daemon/broker/price.h"
#include "common/util.h"

/* An option spd cannot bound: refused (400 UNBOUNDED-OPTION), naming it. */
static bool unbounded(struct broker_refusal *e, const char *option,
		      const char *why)
{
	e->status = 400;
	e->code = "UNBOUNDED-OPTION";
	snprintf(e->msg, sizeof(e->msg),
		 "%s: %s, so spd cannot bound what the call costs and does "
		 "not forward it",
		 option, why);
	e->extra = json_pack("{s:s}", "option", option);
	return false;
}

static bool has_prefix(const char *s, const char *prefix)
{
	return s && strncmp(s, prefix, strlen(prefix)) == 0;
}

/* An image URL that is not inline data ("data:..."): fetched by the
 * provider. */
static bool remote_url(json_t *v)
{
	if (json_is_object(v))
		v = json_object_get(v, "url");
	return json_is_string(v) && !has_prefix(json_string_value(v), "data:");
}

/* Anthropic content blocks (of a message, or of a tool_result): only
 * inline sources, whose bytes bound their tokens. */
static bool anthropic_blocks(json_t *content, struct broker_refusal *e)
{
	size_t i;
	json_t *b;

	json_array_foreach(content, i, b)
	{
		const char *type =
		    json_string_value(json_object_get(b, "type"));
		json_t *src = json_object_get(b, "source");
		const char *st =
		    json_string_value(json_object_get(src, "type"));

		if (json_is_object(src) && st &&
		    (strcmp(st, "url") == 0 || strcmp(st, "file") == 0 ||
		     json_object_get(src, "file_id")))
			return unbounded(
			    e,
			    strcmp(st, "url") == 0
				? "a content block with a \"url\" "
				  "source"
				: "a content block with a \"file\" "
				  "source",
			    "the provider fetches or stores what "
			    "it holds, which the request's bytes "
			    "do not bound (send it inline, "
			    "base64)");
		if (type && strcmp(type, "container_upload") == 0)
			return unbounded(
			    e, "a \"container_upload\" block",
			    "it names a file held by the provider");
		if (type && strcmp(type, "tool_result") == 0 &&
		    !anthropic_blocks(json_object_get(b, "content"), e))
			return false;
	}
	return true;
}

/* OpenAI content parts (chat messages, Responses input items). */
static bool openai_parts(json_t *content, struct broker_refusal *e)
{
	size_t i;
	json_t *p;

	json_array_foreach(content, i, p)
	{
		const char *type =
		    json_string_value(json_object_get(p, "type"));
		json_t *file = json_object_get(p, "file");

		if (json_object_get(p, "file_id") ||
		    json_object_get(file, "file_id"))
			return unbounded(e, "a \"file_id\"",
					 "it names a file held by the "
					 "provider");
		if (json_object_get(p, "file_url"))
			return unbounded(e, "a \"file_url\"",
					 "the provider fetches the file");
		if (remote_url(json_object_get(p, "image_url")))
			return unbounded(e, "an image by URL",
					 "the provider fetches the image (send "
					 "it inline as a data: URL)");
		if (type && strcmp(type, "item_reference") == 0)
			return unbounded(e, "an \"item_reference\"",
					 "it names context held by the "
					 "provider");
		if (json_is_array(json_object_get(p, "content")) &&
		    !openai_parts(json_object_get(p, "content"), e))
			return false;
		if (json_is_array(json_object_get(p, "output")) &&
		    !openai_parts(json_object_get(p, "output"), e))
			return false;
	}
	return true;
}

/* Tools whose use the provider bills beyond the tokens spd bounds
 * (server-side search, fetch, code execution, their per-use fees) are
 * refused; a provider-defined client tool adds its hidden prompt to
 * *extra. */
static bool tools_ok(json_t *tools, enum broker_api api, const char *path,
		     int64_t *extra, struct broker_refusal *e)
{
	static const char *const anthropic_client[] = {
	    "custom", "bash_", "text_editor_", "computer_", "memory_"};
	static const char *const chat_client[] = {"function", "custom"};
	static const char *const responses_client[] = {
	    "function", "custom", "local_shell", "shell", "apply_patch"};
	size_t i;
	json_t *tool;

	json_array_foreach(tools, i, tool)
	{
		const char *type =
		    json_string_value(json_object_get(tool, "type"));
		const char *const *ok;
		size_t n, j;
		char what[160];

		if (!type && api == BROKER_API_ANTHROPIC)
			continue; /* a custom tool */
		/* Codex groups its tools in namespaces (Responses API): the
		 * tools inside are judged as any other. */
		if (type && strcmp(type, "namespace") == 0 &&
		    api == BROKER_API_OPENAI &&
		    strcmp(path, "/v1/responses") == 0) {
			if (!tools_ok(json_object_get(tool, "tools"), api, path,
				      extra, e))
				return false;
			continue;
		}
		if (api == BROKER_API_ANTHROPIC) {
			ok = anthropic_client;
			n = ARRAY_SIZE(anthropic_client);
		} else if (strcmp(path, "/v1/responses") == 0) {
			ok = responses_client;
			n = ARRAY_SIZE(responses_client);
		} else {
			ok = chat_client;
			n = ARRAY_SIZE(chat_client);
		}
		for (j = 0; type && j < n; j++)
			if (api == BROKER_API_ANTHROPIC && j > 0
				? has_prefix(type, ok[j])
				: strcmp(type, ok[j]) == 0)
				break;
		if (!type || j == n) {
			snprintf(what, sizeof(what), "the tool type \"%.60s\"",
				 type ? type : "(none)");
			return unbounded(
			    e, what,
			    "a tool the provider runs itself (search, fetch, "
			    "code execution) bills per use and for what it "
			    "reads");
		}
		if (api == BROKER_API_ANTHROPIC && j > 0)
			*extra += PRICE_TOOL_HIDDEN_TOKENS;
	}
	return true;
}

/* Gemini (generateContent): only function declarations as tools (the
 * others, Google Search, code execution, URL context, file search, are
 * run and billed by the provider), no cached content held by the
 * provider, no parts by file URI; generationConfig.candidateCount
 * multiplies the output. */
static bool gemini_request(json_t *o, int64_t *choices,
			   struct broker_refusal *e)
{
	static const char *const held[] = {"cachedContent", "cached_content"};
	json_t *v, *tool, *c, *part, *gc;
	const char *key;
	size_t i, j;

	for (i = 0; i < ARRAY_SIZE(held); i++)
		if (json_object_get(o, held[i]))
			return unbounded(e, held[i],
					 "it brings in context held by the "
					 "provider, which the request's bytes "
					 "do not bound");
	json_array_foreach(json_object_get(o, "tools"), i, tool)
	{
		json_object_foreach(tool, key, v)
		{
			char what[160];

			if (strcmp(key, "functionDeclarations") == 0 ||
			    strcmp(key, "function_declarations") == 0)
				continue;
			snprintf(what, sizeof(what), "the tool \"%.60s\"", key);
			return unbounded(
			    e, what,
			    "a tool the provider runs itself (search, fetch, "
			    "code execution) bills per use and for what it "
			    "reads");
		}
	}
	json_array_foreach(json_object_get(o, "contents"), i, c)
	{
		json_array_foreach(json_object_get(c, "parts"), j, part)
		{
			if (json_object_get(part, "fileData") ||
			    json_object_get(part, "file_data"))
				return unbounded(
				    e, "a part with \"fileData\"",
				    "the provider fetches or stores what it "
				    "names, which the request's bytes do not "
				    "bound (send it inline, inlineData)");
		}
	}
	gc = json_object_get(o, "generationConfig");
	if (!gc)
		gc = json_object_get(o, "generation_config");
	v = json_object_get(gc, "candidateCount");
	if (!v)
		v = json_object_get(gc, "candidate_count");
	if (v && !json_is_null(v)) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) > BOUND_CHOICES_MAX) {
			snprintf(e->msg, sizeof(e->msg),
				 "candidateCount must be an integer from 1 to "
				 "%d",
				 BOUND_CHOICES_MAX);
			return false;
		}
		*choices = json_integer_value(v);
	}
	return true;
}

bool bound_request(json_t *o, enum broker_api api, const char *path,
		   bool long_context, int64_t *choices, int64_t *extra,
		   struct broker_refusal *e)
{
	json_t *v, *msg;
	size_t i;
	const char *tier;

	*choices = 1;
	*extra = 0;
	e->status = 400;
	e->code = "BAD-REQUEST";
	e->extra = NULL;
	if (api == BROKER_API_GEMINI)
		return gemini_request(o, choices, e);
	v = json_object_get(o, "service_tier");
	tier = json_string_value(v);
	if (v && !json_is_null(v) &&
	    !(tier &&
	      (strcmp(tier, "auto") == 0 ||
	       (api == BROKER_API_ANTHROPIC ? strcmp(tier, "standard_only") == 0
					    : strcmp(tier, "default") == 0 ||
						  strcmp(tier, "flex") == 0))))
		return unbounded(e, "service_tier",
				 "its price tier is not in spd's table");
	if (!tools_ok(json_object_get(o, "tools"), api, path, extra, e))
		return false;
	if (api == BROKER_API_ANTHROPIC) {
		if (long_context)
			return unbounded(e, "anthropic-beta context-1m",
					 "the long-context tier's prices are "
					 "not in spd's table");
		if (json_object_get(o, "mcp_servers"))
			return unbounded(e, "mcp_servers",
					 "the provider calls those servers "
					 "and bills what they return");
		if (json_object_get(o, "container"))
			return unbounded(e, "container",
					 "it names a code-execution container "
					 "held by the provider");
		if (!anthropic_blocks(json_object_get(o, "system"), e))
			return false;
		json_array_foreach(json_object_get(o, "messages"), i, msg)
		{
			if (!anthropic_blocks(json_object_get(msg, "content"),
					      e))
				return false;
		}
		return true;
	}
	if (strcmp(path, "/v1/responses") == 0) {
		static const char *const held[] = {"previous_response_id",
						   "conversation", "prompt"};

		for (size_t j = 0; j < ARRAY_SIZE(held); j++) {
			v = json_object_get(o, held[j]);
			if (v && !json_is_null(v))
				return unbounded(e, held[j],
						 "it brings in context held by "
						 "the provider, which the "
						 "request's bytes do not "
						 "bound");
		}
		return openai_parts(json_object_get(o, "input"), e);
	}
	/* Chat completions. */
	if (json_object_get(o, "web_search_options"))
		return unbounded(e, "web_search_options",
				 "the provider searches the web and bills "
				 "for it");
	if (json_object_get(o, "prediction"))
		return unbounded(e, "prediction",
				 "rejected predicted tokens are billed as "
				 "output");
	if (json_object_get(o, "audio"))
		return unbounded(e, "audio",
				 "audio output is priced apart, not in spd's "
				 "table");
	v = json_object_get(o, "n");
	if (v && !json_is_null(v)) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) > BOUND_CHOICES_MAX) {
			snprintf(e->msg, sizeof(e->msg),
				 "n must be an integer from 1 to %d",
				 BOUND_CHOICES_MAX);
			return false;
		}
		*choices = json_integer_value(v);
	}
	json_array_foreach(json_object_get(o, "messages"), i, msg)
	{
		if (!openai_parts(json_object_get(msg, "content"), e))
			return false;
	}
	return true;
}

/*
 * The tool results of a conversation sent to a model, and what each is
 * labelled with where spd did not serve it (issue 41).
 *
 * Every model call carries the whole conversation so far.  gw_convo_walk
 * reads a parsed request body in the shape of the API it was sent to --
 * Anthropic's messages (tool_use and tool_result blocks), OpenAI's chat
 * completions (assistant tool_calls, "tool" messages), OpenAI's Responses
 * (function_call, custom_tool_call, local_shell_call items and their
 * outputs), Gemini's contents (functionCall and functionResponse parts) --
 * and hands each tool result over with the tool use it answers.  The body
 * is the agent's, untrusted: any member of an unexpected type is skipped,
 * never an error, and a result whose content is not text reads as empty
 * text (content spd did not serve: the closed side).
 *
 * gw_convo_tool_label says what a result spd did not serve came from:
 * "network:HOST" for a fetching tool given a URL, "agent-tool" otherwise,
 * with the tool's name and input as what brought it.  Reads parsed JSON
 * only; no I/O.
 */
#ifndef SPD_DAEMON_CONVO_H
#define SPD_DAEMON_CONVO_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "daemon/broker/broker.h"

/* Nesting of a Gemini functionResponse's response read for its text:
 * deeper strings are not read (a result with nothing read is empty). */
#define GW_CONVO_DEPTH_MAX 16

/* One tool result of a conversation and the use it answers. */
struct gw_convo_result {
	/* The tool's name and input (borrowed; an object, or a string for a
	 * tool whose input is text), from the matching use; NULL when no use
	 * in the conversation matches (name: then the result's own, as a
	 * Gemini functionResponse or a chat "function" message gives it). */
	const char *name;
	json_t *input;
	/* The result's text, NUL-terminated (borrowed until fn returns):
	 * a string content as it is, the text parts of an array joined by
	 * newlines, a Gemini response's strings; "" for any other content. */
	const char *text;
	size_t len;
};

/* Called for each tool result in the order of the conversation; a
 * negative return stops the walk and is gw_convo_walk's. */
typedef int (*gw_convo_fn)(void *data, const struct gw_convo_result *r);

/*
 * Walk body, a request of api to path (the route's path: OpenAI's
 * "/v1/responses" is read as the Responses API, any other OpenAI path as
 * chat completions), calling fn (NULL: none) for each tool result.
 * *ret_assistant (NULL allowed) is set to whether the conversation holds
 * the model's own answers (an assistant or model turn, a call the model
 * made).  Returns the number of results, fn's negative return, or
 * -ENOMEM.  A body of any other shape has no results.
 */
int gw_convo_walk(json_t *body, enum broker_api api, const char *path,
		  gw_convo_fn fn, void *data, bool *ret_assistant);

/*
 * The host (lower case, without port or brackets) of the first http or
 * https URL among input's members (an object's string members "url",
 * "uri", "href", then any other string member; or input itself when it
 * is a string) into host (size hlen).  Returns true, or false when input
 * holds no such URL or its host is not a plain name or address that fits.
 */
bool gw_convo_url_host(json_t *input, char *host, size_t hlen);

/* True when name is a tool that fetches from the network: WebFetch,
 * web_fetch, web_search, fetch, an MCP server's "...__fetch" (letter case,
 * '_', '-' and '.' ignored). */
bool gw_convo_fetch_tool(const char *name);

/*
 * The label of a result spd did not serve, by the tool that read it:
 * "network:HOST" when name is a fetching tool (gw_convo_fetch_tool) whose
 * input holds a URL, else "agent-tool"; into label (size llen).  what
 * (size wlen) gets the tool's name and input as compact JSON (the URL for
 * network:HOST), cut to fit on a character boundary.  name NULL reads as
 * "?".
 */
void gw_convo_tool_label(const char *name, json_t *input, char *label,
			 size_t llen, char *what, size_t wlen);

/*
 * The file path input names (a string member "file_path", "path",
 * "absolute_path" or "filePath"), or NULL (borrowed from input).
 */
const char *gw_convo_input_path(json_t *input);

/*
 * True when path (absolute, or relative to workspace) names a file inside
 * workspace (NULL: only relative paths are read) that one of patterns
 * (NULL-terminated globs relative to the workspace; NULL: none) matches
 * as session_prov_path_matches reads them.  ".." and "." components are
 * resolved as text (a link is not followed: the path the tool was
 * given).
 */
bool gw_convo_path_private(const char *path, const char *workspace,
			   char *const *patterns);

#endif

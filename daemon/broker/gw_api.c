/*
 * What each provider's API looks like at the broker's door
 * (daemon/broker/gateway_priv.h): its routes, the model and the output
 * bound a Gemini request names, where its key may come, the shape of its
 * errors.  No I/O.
 */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/util.h"
#include "daemon/broker/gateway_priv.h"

/* An error body the client's SDK understands: Anthropic's
 * {"type":"error","error":{type,message}} or OpenAI's
 * {"error":{message,type,code}}, with spd's own symbol and numbers. */
char *gw_error_body(enum broker_api api, int status, const char *code,
		    const char *msg, json_t *extra)
{
	const char *atype = status == 401   ? "authentication_error"
			    : status == 402 ? "billing_error"
			    : status == 404 ? "not_found_error"
			    : status == 413 ? "request_too_large"
			    : status >= 500 ? "api_error"
					    : "invalid_request_error";
	const char *otype = status == 401   ? "invalid_request_error"
			    : status == 402 ? "insufficient_quota"
			    : status >= 500 ? "server_error"
					    : "invalid_request_error";
	json_t *err, *o;
	char *s;

	if (api == BROKER_API_ANTHROPIC) {
		err = json_pack("{s:s, s:s, s:s}", "type", atype, "message",
				msg, "spd_code", code);
		o = json_pack("{s:s, s:o}", "type", "error", "error", err);
	} else if (api == BROKER_API_GEMINI) {
		/* Google's {"error":{code,message,status}}.  A spent budget
		 * is not RESOURCE_EXHAUSTED, which clients retry. */
		const char *gstatus = status == 401   ? "UNAUTHENTICATED"
				      : status == 402 ? "FAILED_PRECONDITION"
				      : status == 404 ? "NOT_FOUND"
				      : status >= 500 ? "INTERNAL"
						      : "INVALID_ARGUMENT";

		err =
		    json_pack("{s:i, s:s, s:s, s:s}", "code", status, "message",
			      msg, "status", gstatus, "spd_code", code);
		o = json_pack("{s:o}", "error", err);
	} else {
		err = json_pack("{s:s, s:s, s:s, s:n}", "message", msg, "type",
				otype, "code", code, "param");
		o = json_pack("{s:o}", "error", err);
	}
	if (extra)
		json_object_update(err, extra);
	json_decref(extra);
	s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return s;
}

enum broker_api gw_api_of_path(const char *target)
{
	if (target && (strncmp(target, "/v1beta/", 8) == 0 ||
		       strncmp(target, "/v1/models/", 11) == 0))
		return BROKER_API_GEMINI;
	return target && (strncmp(target, "/v1/chat/", 9) == 0 ||
			  strncmp(target, "/v1/responses", 13) == 0)
		   ? BROKER_API_OPENAI
		   : BROKER_API_ANTHROPIC;
}

/* Gemini's routes: /v1beta/models/MODEL:METHOD (or /v1/…), the model in
 * the path.  Returns 0 and the model in model, or -ENOENT. */
static int gemini_route(const char *target, size_t n, bool *count_only,
			bool *stream, char *model, size_t mlen)
{
	static const struct {
		const char *method;
		bool count, stream;
	} methods[] = {
	    {"generateContent", false, false},
	    {"streamGenerateContent", false, true},
	    {"countTokens", true, false},
	};
	static const char *const prefixes[] = {"/v1beta/models/",
					       "/v1/models/"};
	const char *m = NULL, *colon;
	size_t mn;

	for (size_t i = 0; i < ARRAY_SIZE(prefixes); i++)
		if (strncmp(target, prefixes[i], strlen(prefixes[i])) == 0)
			m = target + strlen(prefixes[i]);
	if (!m || !(colon = memchr(m, ':', n - (size_t)(m - target))))
		return -ENOENT;
	mn = (size_t)(colon - m);
	if (mn == 0 || mn > PRICE_MODEL_NAME_MAX || mn >= mlen)
		return -ENOENT;
	/* A model name, nothing that could reach another path. */
	for (size_t i = 0; i < mn; i++)
		if (!isalnum((unsigned char)m[i]) && m[i] != '-' &&
		    m[i] != '.' && m[i] != '_')
			return -ENOENT;
	for (size_t i = 0; i < ARRAY_SIZE(methods); i++)
		if (strlen(methods[i].method) ==
			n - mn - 1 - (size_t)(m - target) &&
		    strncmp(colon + 1, methods[i].method,
			    strlen(methods[i].method)) == 0) {
			*count_only = methods[i].count;
			*stream = methods[i].stream;
			memcpy(model, m, mn);
			model[mn] = '\0';
			return 0;
		}
	return -ENOENT;
}

/* The routes: path (without query) to api; count_tokens and Gemini's
 * countTokens are free.  model: the model a Gemini path names ("" for
 * the others, whose body names it); stream: the route streams whatever
 * the body says (Gemini's streamGenerateContent). */
int gw_route(const char *target, enum broker_api *api, bool *count_only,
	     bool *stream, char *path, size_t plen, char *model, size_t mlen)
{
	static const struct {
		const char *path;
		enum broker_api api;
		bool count;
	} routes[] = {
	    {"/v1/messages", BROKER_API_ANTHROPIC, false},
	    {"/v1/messages/count_tokens", BROKER_API_ANTHROPIC, true},
	    {"/v1/chat/completions", BROKER_API_OPENAI, false},
	    {"/v1/responses", BROKER_API_OPENAI, false},
	};
	size_t n = strcspn(target, "?");

	model[0] = '\0';
	*stream = false;
	for (size_t i = 0; i < ARRAY_SIZE(routes); i++)
		if (strlen(routes[i].path) == n &&
		    strncmp(routes[i].path, target, n) == 0) {
			*api = routes[i].api;
			*count_only = routes[i].count;
			snprintf(path, plen, "%s", routes[i].path);
			return 0;
		}
	if (n < plen &&
	    gemini_route(target, n, count_only, stream, model, mlen) == 0) {
		*api = BROKER_API_GEMINI;
		snprintf(path, plen, "%.*s", (int)n, target);
		return 0;
	}
	return -ENOENT;
}

/* A Gemini body's output bound: generationConfig.maxOutputTokens, which
 * a thinking model's thoughts count against too (they are billed as
 * output).  The API reads snake_case names as well, so both spellings
 * count, the largest winning; 0 when none is named (the model's max).
 * -EINVAL for a bound that is not a positive integer. */
int64_t gw_gemini_max_output(json_t *body)
{
	static const char *const gcs[] = {"generationConfig",
					  "generation_config"};
	static const char *const maxs[] = {"maxOutputTokens",
					   "max_output_tokens"};
	int64_t out = 0;

	for (size_t i = 0; i < ARRAY_SIZE(gcs); i++) {
		json_t *gc = json_object_get(body, gcs[i]);

		if (!gc || json_is_null(gc))
			continue;
		if (!json_is_object(gc))
			return -EINVAL;
		for (size_t j = 0; j < ARRAY_SIZE(maxs); j++) {
			json_t *v = json_object_get(gc, maxs[j]);

			if (!v || json_is_null(v))
				continue;
			if (!json_is_integer(v) || json_integer_value(v) <= 0)
				return -EINVAL;
			if (json_integer_value(v) > out)
				out = json_integer_value(v);
		}
	}
	return out;
}

/*
 * Gemini's key may come as the query's key= (its SDKs send x-goog-api-key,
 * curl users ?key=).  Returns the target without it (allocated: the
 * provider's key goes in a header, and no turn key reaches it) and, in
 * *ret_key, the value (allocated, or NULL when there is none); NULL on
 * ENOMEM.
 */
char *gw_query_take_key(const char *target, char **ret_key)
{
	const char *q = strchr(target, '?');
	struct buf out = BUF_INIT;
	char *key = NULL;

	*ret_key = NULL;
	if (!q)
		return strdup(target);
	buf_append(&out, target, (size_t)(q - target));
	/* Parameters split at '&' and at ';' (which some servers take as
	 * a separator too): every key= is taken out. */
	for (const char *p = q + 1; *p;) {
		size_t n = strcspn(p, "&;");

		if (n >= 4 && strncmp(p, "key=", 4) == 0) {
			free(key);
			key = strndup(p + 4, n - 4);
		} else if (n) {
			buf_append(&out,
				   out.len > (size_t)(q - target) ? "&" : "?",
				   1);
			buf_append(&out, p, n);
		}
		p += n;
		if (*p == '&' || *p == ';')
			p++;
	}
	if (buf_append(&out, "", 1) < 0) {
		free(key);
		buf_free(&out);
		return NULL;
	}
	*ret_key = key;
	return out.data;
}

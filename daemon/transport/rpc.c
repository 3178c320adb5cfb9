/*
 * JSON-RPC 2.0 framing (daemon/transport/rpc.h): one request line parsed and
 * checked against the method table (method, params and their kinds), and
 * responses, errors and notifications formatted.  No I/O.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/transport/rpc.h"
#include "common/utf8.h"

static int fail(struct rpc_parse_error *e, enum rpc_error code, json_t *id,
		const char *fmt, ...)
{
	va_list ap;

	e->code = code;
	e->id = id ? json_incref(id) : NULL;
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static bool kind_ok(json_t *v, enum rpc_kind k)
{
	switch (k) {
	case RPC_KIND_STRING:
		return json_is_string(v);
	case RPC_KIND_INTEGER:
		return json_is_integer(v);
	case RPC_KIND_BOOLEAN:
		return json_is_boolean(v);
	case RPC_KIND_ARRAY:
		return json_is_array(v);
	case RPC_KIND_OBJECT:
		return json_is_object(v);
	case RPC_KIND_NUMBER:
		return json_is_number(v);
	case RPC_KIND_ANY:
		return v != NULL;
	}
	return false;
}

static const char *kind_name(enum rpc_kind k)
{
	static const char *const names[] = {
	    "a string",	 "an integer", "a boolean", "an array",
	    "an object", "a number",   "any value"};
	return names[k];
}

static int check_params(int method, json_t *params, json_t *id,
			struct rpc_parse_error *e)
{
	const struct rpc_param_def *defs = NULL;
	size_t n = rpc_method_params((enum rpc_method)method, &defs);
	const char *key;
	json_t *v;

	json_object_foreach(params, key, v)
	{
		size_t i;

		for (i = 0; i < n; i++)
			if (strcmp(defs[i].name, key) == 0)
				break;
		if (i == n)
			return fail(e, RPC_E_BAD_PARAMS, id,
				    "unknown parameter \"%.60s\" for %s", key,
				    rpc_method_name((enum rpc_method)method));
		if (!kind_ok(v, defs[i].kind))
			return fail(e, RPC_E_BAD_PARAMS, id,
				    "parameter \"%s\" must be %s", key,
				    kind_name(defs[i].kind));
	}
	for (size_t i = 0; i < n; i++)
		if (defs[i].required && !json_object_get(params, defs[i].name))
			return fail(e, RPC_E_BAD_PARAMS, id,
				    "missing parameter \"%s\"", defs[i].name);
	return 0;
}

int rpc_parse(const char *frame, size_t len, struct rpc_request *ret,
	      struct rpc_parse_error *e)
{
	json_error_t jerr;
	json_t *root = NULL, *id = NULL, *v, *params;
	const char *method;
	int m, r;

	memset(e, 0, sizeof(*e));
	/* Refuse invalid UTF-8 before the JSON parser sees it: nothing
	 * downstream (journal, terminal, another client) should have to
	 * decide what such bytes mean. */
	if (!utf8_valid(frame, len))
		return fail(e, RPC_E_PARSE, NULL, "invalid UTF-8");
	root = json_loadb(frame, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY,
			  &jerr);
	if (!root)
		return fail(e, RPC_E_PARSE, NULL, "invalid JSON: %.100s",
			    jerr.text);
	if (!json_is_object(root)) {
		r = fail(e, RPC_E_BAD_REQUEST, NULL,
			 "a request must be a JSON object");
		goto out;
	}
	id = json_object_get(root, "id");
	if (id && !json_is_string(id) && !json_is_integer(id) &&
	    !json_is_null(id)) {
		r = fail(e, RPC_E_BAD_REQUEST, NULL,
			 "id must be a string, an integer or null");
		goto out;
	}
	v = json_object_get(root, "jsonrpc");
	if (!json_is_string(v) || strcmp(json_string_value(v), "2.0") != 0) {
		r = fail(e, RPC_E_BAD_REQUEST, id,
			 "\"jsonrpc\" must be \"2.0\"");
		goto out;
	}
	v = json_object_get(root, "method");
	if (!json_is_string(v)) {
		r = fail(e, RPC_E_BAD_REQUEST, id,
			 "\"method\" must be a string");
		goto out;
	}
	method = json_string_value(v);
	m = rpc_method_lookup(method);
	if (m < 0) {
		r = fail(e, RPC_E_NO_METHOD, id, "unknown method \"%.60s\"",
			 method);
		goto out;
	}
	{
		const char *key;
		json_t *val;
		json_object_foreach(root, key, val)
		{
			if (strcmp(key, "jsonrpc") && strcmp(key, "method") &&
			    strcmp(key, "params") && strcmp(key, "id")) {
				r = fail(e, RPC_E_BAD_REQUEST, id,
					 "unknown member \"%.60s\"", key);
				goto out;
			}
		}
	}
	params = json_object_get(root, "params");
	if (params && !json_is_object(params)) {
		r = fail(e, RPC_E_BAD_PARAMS, id,
			 "params must be an object (named parameters)");
		goto out;
	}
	params = params ? json_deep_copy(params) : json_object();
	if (!params) {
		r = fail(e, RPC_E_INTERNAL, id, "out of memory");
		goto out;
	}
	r = check_params(m, params, id, e);
	if (r < 0) {
		json_decref(params);
		goto out;
	}
	memset(ret, 0, sizeof(*ret));
	v = json_object_get(params, "token");
	if (v) {
		ret->token = strdup(json_string_value(v));
		json_object_del(params, "token");
	}
	ret->id = id ? json_incref(id) : NULL;
	ret->method = m;
	ret->params = params;
	r = 0;
out:
	json_decref(root);
	return r;
}

void rpc_request_free(struct rpc_request *r)
{
	if (!r)
		return;
	json_decref(r->id);
	json_decref(r->params);
	if (r->token) {
		memset(r->token, 0, strlen(r->token));
		free(r->token);
	}
	memset(r, 0, sizeof(*r));
}

static char *dump_line(json_t *obj, size_t *ret_len)
{
	char *s = json_dumps(obj, JSON_COMPACT | JSON_ENSURE_ASCII);
	size_t n;
	char *p;

	json_decref(obj);
	if (!s)
		return NULL;
	n = strlen(s);
	p = realloc(s, n + 2);
	if (!p) {
		free(s);
		return NULL;
	}
	p[n] = '\n';
	p[n + 1] = '\0';
	*ret_len = n + 1;
	return p;
}

char *rpc_format_result(json_t *id, json_t *result, size_t *ret_len)
{
	json_t *o = json_pack("{s:s, s:O?, s:o}", "jsonrpc", "2.0", "id", id,
			      "result", result ? result : json_null());
	return o ? dump_line(o, ret_len) : NULL;
}

char *rpc_format_error(json_t *id, enum rpc_error code, const char *message,
		       json_t *data, size_t *ret_len)
{
	json_t *d = data ? data : json_object();
	json_t *o;

	json_object_set_new(d, "code", json_string(rpc_error_code(code)));
	o = json_pack("{s:s, s:O?, s:{s:i, s:s, s:o}}", "jsonrpc", "2.0", "id",
		      id, "error", "code", rpc_error_number(code), "message",
		      message, "data", d);
	return o ? dump_line(o, ret_len) : NULL;
}

char *rpc_format_notification(const char *method, json_t *params,
			      size_t *ret_len)
{
	json_t *o =
	    json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method", method,
		      "params", params ? params : json_object());
	return o ? dump_line(o, ret_len) : NULL;
}

static const struct rpc_result_def *result_def(const struct rpc_result_def *d,
					       size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(d[i].name, name) == 0)
			return &d[i];
	return NULL;
}

int rpc_result_check(enum rpc_method m, json_t *result, char *why,
		     size_t whylen)
{
	const struct rpc_result_def *defs = NULL, *d;
	size_t n = rpc_method_results(m, &defs);
	const char *key;
	json_t *v;

	if (n == 0) {
		if (json_is_null(result) ||
		    (json_is_object(result) && json_object_size(result) == 0))
			return 0;
		snprintf(why, whylen, "a result where the table declares none");
		return -EPROTO;
	}
	if (!json_is_object(result)) {
		snprintf(why, whylen, "a result that is not an object");
		return -EPROTO;
	}
	json_object_foreach(result, key, v)
	{
		if (!(d = result_def(defs, n, key))) {
			snprintf(why, whylen, "\"%.64s\" is not in the table",
				 key);
			return -EPROTO;
		}
		if (json_is_null(v) ? !(d->flags & RPC_R_NULL)
				    : !kind_ok(v, d->kind)) {
			snprintf(why, whylen, "\"%s\" is %s, not %s%s", key,
				 json_is_null(v) ? "null" : "of another kind",
				 kind_name(d->kind),
				 d->flags & RPC_R_NULL ? " or null" : "");
			return -EPROTO;
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (!(defs[i].flags & RPC_R_OPTIONAL) &&
		    !json_object_get(result, defs[i].name)) {
			snprintf(why, whylen, "\"%s\" is missing",
				 defs[i].name);
			return -EPROTO;
		}
	}
	return 0;
}

json_t *rpc_strings(char *const *v)
{
	json_t *a = json_array();

	for (size_t i = 0; a && v && v[i]; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

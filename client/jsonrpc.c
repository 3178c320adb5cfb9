/*
 * JSON-RPC 2.0 messages for spctl mcp and spctl acp (client/jsonrpc.h).
 */
#include "client/jsonrpc.h"

#include <stdio.h>

json_t *jsonrpc_request(long id, const char *method, json_t *params)
{
	if (id < 0)
		return json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method",
				 method, "params", params);
	return json_pack("{s:s, s:I, s:s, s:o}", "jsonrpc", "2.0", "id",
			 (json_int_t)id, "method", method, "params", params);
}

json_t *jsonrpc_result(json_t *id, json_t *result)
{
	return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id",
			 id ? id : json_null(), "result",
			 result ? result : json_null());
}

json_t *jsonrpc_error(json_t *id, int code, const char *fmt, va_list ap)
{
	char msg[1024];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	return json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id",
			 id ? id : json_null(), "error", "code", code,
			 "message", msg);
}

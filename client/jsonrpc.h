/*
 * JSON-RPC 2.0 messages for spctl's front ends, which speak it to a peer
 * that is not spd: spctl mcp to its MCP client, spctl acp to its ACP agent
 * (spd's own protocol is client.c's).  Each returns a new object, or NULL
 * when jansson cannot allocate (json_pack's failure: callers pass it on to
 * a sender that reports it).
 */
#ifndef SPD_CLIENT_JSONRPC_H
#define SPD_CLIENT_JSONRPC_H

#include <jansson.h>
#include <stdarg.h>

/* A request (id) or, with id < 0, a notification; params taken. */
json_t *jsonrpc_request(long id, const char *method, json_t *params);
/* A response to id (borrowed; NULL answers null); result taken, NULL is
 * null. */
json_t *jsonrpc_result(json_t *id, json_t *result);
/* An error response to id (borrowed; NULL when it could not be read),
 * its message formatted and cut to 1 KiB. */
json_t *jsonrpc_error(json_t *id, int code, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

#endif

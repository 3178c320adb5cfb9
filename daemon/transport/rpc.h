/*
 * JSON-RPC 2.0 framing for the client socket: parse and validate one
 * request line, and build responses, errors and notifications.  No I/O.
 */
#ifndef SPD_DAEMON_RPC_H
#define SPD_DAEMON_RPC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "proto/rpc.h"

struct rpc_request {
	json_t *id;	/* string, integer or null; NULL for a notification */
	int method;	/* enum rpc_method */
	json_t *params; /* object, never NULL; "token" removed */
	char *token;	/* malloc'd copy of params.token, or NULL */
};

/* Why a frame was refused: the error to send (with id, when known). */
struct rpc_parse_error {
	enum rpc_error code;
	char message[160];
	json_t *id; /* the request's id if it could be read, else NULL */
};

/*
 * Parse one frame (without its newline).  On success fills *ret (free with
 * rpc_request_free) and returns 0.  On a refused frame returns -EINVAL and
 * fills *ret_err (its id, if any, is a new reference the caller releases).
 * Checks, in order: UTF-8, JSON syntax, an object, "jsonrpc":"2.0", an id
 * of the right type, a known method, params an object whose members match
 * the method's table in proto/rpc.def (names, kinds, required ones).
 */
int rpc_parse(const char *frame, size_t len, struct rpc_request *ret,
	      struct rpc_parse_error *ret_err);
void rpc_request_free(struct rpc_request *r);

/*
 * Serialise a response, error or notification to one line ending in '\n'.
 * Each returns a malloc'd string (*ret_len set) or NULL on ENOMEM.
 * id may be NULL (encoded as null); result ownership is taken.
 */
char *rpc_format_result(json_t *id, json_t *result, size_t *ret_len);
char *rpc_format_error(json_t *id, enum rpc_error code, const char *message,
		       json_t *data, size_t *ret_len);
char *rpc_format_notification(const char *method, json_t *params,
			      size_t *ret_len);

/* A NULL-terminated list of strings (NULL: none) as a new JSON array; a
 * string that is not UTF-8 is left out.  NULL on ENOMEM. */
json_t *rpc_strings(char *const *v);

/*
 * Check a method's result against its SPD_RESULT rows in proto/rpc.def:
 * no field the table does not list, every field it lists without
 * RPC_R_OPTIONAL present, each of its kind (or null where RPC_R_NULL).
 * Returns 0, or -EPROTO with the first mismatch in why.
 */
int rpc_result_check(enum rpc_method m, json_t *result, char *why,
		     size_t whylen);

#endif

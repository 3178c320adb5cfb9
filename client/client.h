/*
 * spctl's connection to spd: find the socket, start spd on demand, send
 * one JSON-RPC request and read notifications and the response.  Blocking
 * and single-threaded: spctl is a short-lived command.
 */
#ifndef SPD_CLIENT_CLIENT_H
#define SPD_CLIENT_CLIENT_H

#include "proto/rpc.h"
#include <jansson.h>
#include <stdbool.h>

#include "common/buf.h"

struct client {
	int fd;
	struct buf in;
	char *token; /* operator or session token; may be NULL */
	bool session_token;
	long next_id;
};

/*
 * Connect to spd's socket, starting spd (found next to spctl, then in
 * PATH) when nothing listens and SPD_NO_AUTOSTART is not "1", and waiting
 * for it.  Loads the token: $SPD_SESSION_TOKEN, else the operator token
 * file.  Returns 0, or -errno with a sentence in errbuf.
 */
int client_open(struct client *c, char *errbuf, size_t errlen);
/* client_open without starting spd: -ENOENT or -ECONNREFUSED when
 * nothing listens on the socket (spctl stop). */
int client_open_running(struct client *c, char *errbuf, size_t errlen);
void client_close(struct client *c);
/* The spd binary: next to spctl when there is one, else "spd" (looked
 * up in PATH).  malloc'd, or NULL when out of memory. */
char *client_find_spd(void);

/*
 * Send method(params) (ownership of params taken; the token is added)
 * without waiting for the answer, which the caller reads from fd itself.
 * Returns the request's id (from next_id) or -errno; NULL params is
 * -ENOMEM (a failed json_pack).
 */
long client_send(struct client *c, enum rpc_method method, json_t *params);

/* Called for each notification before the response arrives. */
typedef void (*client_notify_cb)(void *data, const char *method,
				 json_t *params);

/*
 * Send method(params) (ownership of params taken; the token is added) and
 * wait for the response.  On a result returns 0 and *ret_result (a new
 * reference).  On an error response returns -EPROTO with *ret_error (the
 * error object, a new reference).  On a transport failure returns -errno.
 */
int client_call(struct client *c, enum rpc_method method, json_t *params,
		client_notify_cb cb, void *data, json_t **ret_result,
		json_t **ret_error);

#endif

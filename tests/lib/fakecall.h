/*
 * The RPC handlers, driven without a server: the call.h functions that
 * daemon/transport/server.c supplies in spd, for unit tests.  A test binary that
 * calls fakecall_init() links tests/lib/fakecall.o, which defines them, and
 * the linker then leaves server.o out of it.  A call records its reply or
 * error for the test to check.
 */
#ifndef SPD_TESTS_FAKECALL_H
#define SPD_TESTS_FAKECALL_H

#include <stdbool.h>
#include <jansson.h>

#include "daemon/transport/call.h"

struct call {
	json_t *params;
	struct call_principal who;
	struct spd *spd;
	bool done;
	json_t *result;
	enum rpc_error err; /* RPC_E__COUNT until an error */
	json_t *err_data;
	char msg[512];
};

/* Make c a fresh call of params (taken) on spd, by the operator
 * (session_id NULL) or by the agent of session_id. */
void fakecall_init(struct call *c, struct spd *spd, json_t *params,
		   const char *session_id);

/* Drop what the call holds: its params, result and error data. */
void fakecall_free(struct call *c);

#endif

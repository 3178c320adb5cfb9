/*
 * What fuzz_acp.c and fuzz_mcp.c share: spctl's client library and the
 * front ends' JSON-RPC builders and base64 decoder compiled in (the harnesses include the
 * front end's .c to reach its static readers), a stand-in for spctl's
 * one-shot call, and an environment in which spd is absent so that every
 * call to it fails at once and takes its error path.
 */
#ifndef SPD_FUZZ_FRONTEND_H
#define SPD_FUZZ_FRONTEND_H

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>

#include "client/b64.c"
#include "client/client.c"
#include "client/jsonrpc.c"
#include "client/cmds.h"

/* spctl's one-shot call (client/cmds.c), used only to look the session up
 * before serving: never reached here. */
json_t *cmd_call(enum rpc_method method, json_t *params, int *ret_exit)
{
	(void)method;
	json_decref(params);
	*ret_exit = CMD_EXIT_SPD;
	return NULL;
}

/* spd absent, a session token set, SIGPIPE ignored; returns /dev/null
 * open for writing, or -1. */
static int frontend_fuzz_env(void)
{
	setenv("SPD_RUNTIME_DIR", "/nonexistent/spd-fuzz", 1);
	setenv("SPD_CONFIG_DIR", "/nonexistent/spd-fuzz", 1);
	setenv("SPD_NO_AUTOSTART", "1", 1);
	setenv("SPD_SESSION_TOKEN", "fuzz", 1);
	signal(SIGPIPE, SIG_IGN);
	return open("/dev/null", O_WRONLY | O_CLOEXEC);
}

#endif

/*
 * spctl's commands.  Each takes argv starting at the command's name and
 * returns the process exit code (see `spctl --help`).
 */
#ifndef SPD_CLIENT_CMDS_H
#define SPD_CLIENT_CMDS_H

#include "proto/rpc.h"
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#define CMD_EXIT_OK 0
#define CMD_EXIT_CHECK_FAILED 1
#define CMD_EXIT_USAGE RPC_EXIT_USAGE
#define CMD_EXIT_TIMEOUT 124
#define CMD_EXIT_SPD RPC_EXIT_SPD
#define CMD_EXIT_REFUSED RPC_EXIT_REFUSED
#define CMD_EXIT_NOT_FOUND 127

struct client;

struct cmd_ctx {
	bool json;
};

int cmd_ping(struct cmd_ctx *ctx, int argc, char **argv);
int cmd_status(struct cmd_ctx *ctx, int argc, char **argv);
/* spctl stop: ask spd to shut down and wait until it has exited; 0 also
 * when no spd runs (client/cmds.c). */
int cmd_stop(struct cmd_ctx *ctx, int argc, char **argv);
int cmd_journal(struct cmd_ctx *ctx, int argc, char **argv);
int cmd_doctor(struct cmd_ctx *ctx, int argc, char **argv);
/* spctl reload: spd reads spd.conf again (client/cmd_config.c). */
int cmd_reload(struct cmd_ctx *ctx, int argc, char **argv);
/* daemon.config's answer (NULL for an agent, or with the error printed)
 * and its listing for spctl doctor. */
json_t *cmd_config_fetch(void);
void cmd_config_print(json_t *cfg);
int cmd_run(struct cmd_ctx *ctx, int argc, char **argv);
/* spctl agent: a command in a session's worktree with a fresh model-broker
 * turn and the broker as its only network (client/cmd_run.c). */
int cmd_agent(struct cmd_ctx *ctx, int argc, char **argv);
int cmd_session(struct cmd_ctx *ctx, int argc, char **argv);
int cmd_policy(struct cmd_ctx *ctx, int argc, char **argv);

/*
 * Open a connection, call method(params), print an error response to
 * stderr as "spctl: CODE: message", and return the result (new reference)
 * or NULL.  *ret_exit gets the exit code to use on failure: 126 for
 * POLICY-DENIED, SANDBOX-UNAVAILABLE and the like, 125 otherwise.
 */
json_t *cmd_call(enum rpc_method method, json_t *params, int *ret_exit);

/* Print an error object {code, message, data:{code}} to stderr and return
 * the exit code for it. */
int cmd_print_error(json_t *err);
/* True when the error object's symbolic code is code. */
bool cmd_error_is(json_t *err, const char *code);
/*
 * Print, each line starting with indent, everything of an asked object
 * (approval.requested's "object", NEEDS-APPROVAL's data.object) that
 * decides what the call does: the argv or the path, a move's
 * destination, the environment's values, the cwd, the network, the hash
 * and first line of content, the hash of each workspace file a run
 * executes.  Every string is the agent's and is escaped.  NULL o prints
 * nothing.
 */
void cmd_print_object(FILE *f, json_t *o, const char *indent);
int cmd_approvals(struct cmd_ctx *ctx, int argc, char **argv);
int cmd_approve(struct cmd_ctx *ctx, int argc, char **argv);
int cmd_deny(struct cmd_ctx *ctx, int argc, char **argv);
int cmd_secrets(struct cmd_ctx *ctx, int argc, char **argv);
/* spctl turn begin|end, spctl turns (client/cmd_turn.c). */
int cmd_turn(struct cmd_ctx *ctx, int argc, char **argv);
int cmd_turns(struct cmd_ctx *ctx, int argc, char **argv);
/* spctl mcp: an MCP server on stdin/stdout until the client goes away
 * (client/cmd_mcp.c).  Returns 0, or an exit code when it cannot start. */
int cmd_mcp(struct cmd_ctx *ctx, int argc, char **argv);
/* spctl acp: an ACP agent in a session's sandbox with spctl as its client
 * (client/cmd_acp.c).  Returns the agent's exit code, or spctl's exit code
 * when it cannot start. */
int cmd_acp(struct cmd_ctx *ctx, int argc, char **argv);
/* spctl attest key|show|verify: spd's signing key and the attestations
 * under refs/notes/spd (client/cmd_attest.c). */
int cmd_attest(struct cmd_ctx *ctx, int argc, char **argv);

#endif

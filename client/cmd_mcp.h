/*
 * What spctl mcp's two files share, and nothing else in spctl includes:
 * the server (cmd_mcp.c: the stdio loop, the MCP methods, a call's
 * progress and its messages from spd) and the tools (cmd_mcp_tools.c:
 * each tool's requests and result, and the table of tools).
 */
#ifndef SPD_CLIENT_CMD_MCP_H
#define SPD_CLIENT_CMD_MCP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client.h"
#include "common/buf.h"
#include "proto/rpc.h"

/* Tool calls in flight at once.  spd lets a session run 16 commands at a
 * time (limits.session-runs); more calls would only wait or be refused
 * there, each holding a connection. */
#define MCP_CALLS_MAX 16

struct mcp;
struct mcp_call;

struct mcp_tool {
	const char *name, *title, *description;
	const char *input_schema, *output_schema; /* JSON text */
	bool read_only, destructive, idempotent, open_world;
	/* Check the arguments and send the first request to spd; on an
	 * input error finish the call with a tool error.  Returns 0, or
	 * -errno when the call could not be started (it is finished). */
	int (*start)(struct mcp_call *k);
	/* spd's answer to the call's request: result or error (one is
	 * NULL).  Finishes the call or sends the next request. */
	void (*reply)(struct mcp_call *k, json_t *result, json_t *error);
};

struct mcp_call {
	struct mcp *m;
	const struct mcp_tool *tool;
	json_t *id;	  /* the MCP request's id */
	json_t *progress; /* its progressToken, or NULL */
	json_t *args;	  /* the tool's arguments */
	struct client spd;
	long spd_id; /* the id of the request spd is answering */
	int step;
	bool done; /* finished: freed by the loop */
	/* A run's output so far, and what went beyond MCP_OUTPUT_MAX. */
	struct buf out[2];
	size_t dropped[2];
	double progress_n;
	/* An ask: spd's approval id, and the elicitation sent about it. */
	json_int_t approval;
	json_t *approval_note;
	long elicit_id;
	int64_t next_wait_progress_ms;
	char *edit_text; /* edit_file: the new content */
};

struct mcp {
	int in_fd, out_fd;
	struct buf in;
	bool skipping; /* discarding the rest of an oversized message */
	bool initialized;
	const char *version; /* the revision negotiated */
	bool elicit;	     /* the client takes form elicitations */
	bool operator;	     /* spctl holds the operator token */
	char *session;	     /* the session's id */
	char *workspace;     /* its worktree */
	long next_out_id;    /* ids of requests spctl sends the client */
	struct mcp_call *calls[MCP_CALLS_MAX];
	json_t *schemas; /* tool name -> {input, output} parsed */
	bool out_broken;
};

/* The tools, in the order tools/list gives them (cmd_mcp_tools.c). */
extern const struct mcp_tool mcp_tools[];
extern const size_t mcp_tools_n;

/* ---- cmd_mcp.c, for the tools ---- */

/* Text that JSON can carry: invalid UTF-8 bytes become U+FFFD. */
json_t *mcp_text_json(const char *p, size_t n);
/* The tool's result: structured (ownership taken) and the same JSON as a
 * text block, for clients that read only content.  Finishes the call. */
void mcp_call_ok(struct mcp_call *k, json_t *structured);
/* A tool error: the call reached the tool and failed (bad arguments, a
 * refusal by policy, a path outside the workspace).  The model reads the
 * text and may correct itself; it is not a protocol error.  Finishes the
 * call. */
void mcp_call_fail(struct mcp_call *k, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* spd's error response as a tool error: its symbolic code, its message,
 * and for a refusal by policy the rule and its reason. */
void mcp_call_fail_spd(struct mcp_call *k, json_t *err);
/* Send method(params) on the call's connection (ownership of params
 * taken; the token and, for the operator with in_session, the session
 * are added).
 * Returns 0 or -errno. */
int mcp_call_send(struct mcp_call *k, enum rpc_method method, json_t *params,
		  bool in_session);

#endif

/*
 * spctl acp's parts (client/cmd_acp.c: the agent's channel, its requests,
 * permissions and files; client/acp_term.c: its terminals).  Internal to
 * spctl acp.
 */
#ifndef SPD_CLIENT_ACP_H
#define SPD_CLIENT_ACP_H

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>

#include "client.h"
#include "client/termsafe.h"
#include "common/buf.h"

/* Terminals an agent may hold at once: each is a run in spd and keeps
 * its output here. */
#define ACP_TERMINALS_MAX 16
/* Requests of the agent served at once (files, permissions): each holds
 * a connection to spd while it waits, a permission perhaps for a person. */
#define ACP_CALLS_MAX 16
/* Tool calls whose announced state (kind, locations, rawInput) spctl
 * keeps for the permission requests that follow: a turn's worth.  Past
 * it the oldest are forgotten, and a request about one of them is judged
 * on what it carries itself (which refuses it when that names nothing). */
#define ACP_TOOL_CALLS_MAX 256
/* How long an agent has to exit once its input is closed after the last
 * turn (spctl acp --prompt, or end of file on stdin): some never do
 * (they keep their input's end-of-file unread), and then spctl ends the
 * run (spd sends SIGTERM, then SIGKILL to its whole sandbox after
 * spd.conf's kill-grace) and returns the turn's result. */
#define ACP_EXIT_GRACE_MS 5000
/* A terminal's output when the agent sets no outputByteLimit. */
#define ACP_TERMINAL_OUTPUT_MAX (1024 * 1024)

struct acp;

struct acp_term {
	char id[24];
	struct acp *a;
	struct client spd; /* fd -1: not running (ended, killed) */
	long spd_id;	   /* the cmd.run */
	unsigned turn;	   /* the turn that created it */
	json_t *create_id; /* the agent's terminal/create, until started */
	json_t *waiters;   /* ids of terminal/wait_for_exit to answer */
	struct buf out;	   /* the output's tail, at most limit bytes */
	size_t limit;
	bool truncated;
	json_t *exit; /* {exitCode, signal} once it ended */
};

/* One request of the agent served on a connection of its own to spd. */
struct acp_call {
	struct acp *a;
	int kind; /* ACP_K_* in cmd_acp.c */
	json_t *id;
	struct client spd;
	long spd_id;
	bool done;
	/* fs/read_text_file: the lines asked for. */
	json_int_t line, limit;
	/* session/request_permission: the policy checks still to make, the
	 * phase (0: classify all; 1: put the asks to a person), what the
	 * worst check said, the options offered, the tool call's title. */
	json_t *checks, *asks, *options, *why;
	size_t next;
	int worst;
	char *title;
};

struct acp {
	struct client run; /* carries the agent's cmd.run and run.input */
	long run_id;
	bool started, closed_input, agent_gone, failed;
	int agent_exit;
	struct buf line; /* the agent's stdout not yet a full line */
	bool skipping;	 /* discarding the rest of an oversized message */
	bool operator;
	char *session, *workspace;
	const char *prompt_arg; /* --prompt, or NULL: lines on stdin */
	bool stdin_eof;
	struct buf stdin_buf;
	json_t *prompts; /* texts waiting for the agent to be ready */
	char *acp_session;
	long next_id, init_id, new_id, prompt_id;
	/* An agent that answers session/new with "Authentication required"
	 * is authenticated once with the API-key method it offered (its key
	 * is the turn's, pointed at spd's broker), then asked again. */
	long auth_id;
	bool auth_tried;
	json_t *auth_methods; /* initialize's authMethods, or NULL */
	bool in_turn, cancelling;
	unsigned turn;
	struct acp_term terms[ACP_TERMINALS_MAX];
	unsigned next_term;
	struct acp_call *calls[ACP_CALLS_MAX];
	struct ts_stream ts;
	bool yes;
	/* toolCallId -> the tool call as announced so far (session/update
	 * tool_call and tool_call_update merged), and their ids oldest
	 * first. */
	json_t *tool_calls, *tool_call_order;
	/* When the agent's input was closed after its last turn
	 * (CLOCK_MONOTONIC, ms; 0: not yet), whether the last turn ended
	 * well (stopReason end_turn), and whether spctl ended the run. */
	long long input_closed_ms;
	bool last_turn_ok, ended_run;
	/* session/update summaries not yet journaled: the kind of the
	 * current run of chunks, how many and their text's length. */
	char note_kind[40];
	unsigned note_count;
	size_t note_bytes;
};

/* Messages to the agent (cmd_acp.c). */
void acp_result(struct acp *a, json_t *id, json_t *result);
void acp_error(struct acp *a, json_t *id, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void acp_spd_error(struct acp *a, json_t *id, json_t *err);
/* Journal something refused from the agent (client.refused). */
void acp_refused(struct acp *a, const char *what, const char *detail);
/* The path relative to the worktree of an absolute path the agent
 * names; NULL when it lies outside. */
const char *acp_rel_path(struct acp *a, const char *p);
/* Read what spd sent on c and hand each message to fn.  Returns 0, or
 * -EPIPE when spd closed it, or -errno. */
int acp_conn_read(struct client *c, void (*fn)(void *data, json_t *msg),
		  void *data);
/* Say on stderr that a call waits for a person (approval.requested). */
void acp_side_note(const char *method, json_t *params);

/* Terminals (acp_term.c). */
void acp_term_request(struct acp *a, const char *method, json_t *id,
		      json_t *params);
void acp_term_readable(struct acp_term *t);
/* Kill a running terminal (its connection closed: spd kills the run's
 * whole pid namespace and journals it); the exit it reports. */
void acp_term_kill(struct acp_term *t);
void acp_term_free(struct acp_term *t);

#endif

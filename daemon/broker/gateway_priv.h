/*
 * Private to the broker's endpoint: what the forwarding (gateway.c)
 * and the HTTP/1.1 connections (gw_conn.c) share.  gw_conn.c reads
 * requests off a connection, one after another while the client keeps it
 * alive, and writes the replies; gateway.c decides what each request
 * gets.
 */
#ifndef SPD_DAEMON_GATEWAY_PRIV_H
#define SPD_DAEMON_GATEWAY_PRIV_H

#include <curl/curl.h>
#include <jansson.h>
#include <stdbool.h>
#include <uv.h>

#include "common/buf.h"
#include "daemon/broker/broker.h"
#include "daemon/broker/http.h"

/* Bytes of the next requests a client may send while its current one is
 * answered (pipelining); past them spd stops reading the connection
 * until the answer is out. */
#define GATEWAY_PIPELINE_MAX (64 * 1024)
/* Idle connections to providers curl keeps for the next calls.  Its
 * default follows the handles in use, so a burst of calls that end
 * together had their connections closed and the next burst reconnect. */
#define GATEWAY_PROVIDER_CONNS_KEPT 64
/* Easy handles kept for the next calls (their options set once, their
 * buffers allocated once): at most as many as calls at once that keep
 * coming back. */
#define GATEWAY_EASY_KEPT 64

struct gw_call;
struct gw_sock;

/* Refusals of one kind (the same session and turn presented, method,
 * path, status and code) within GATEWAY_REFUSAL_WINDOW_MS are journaled
 * as one row and a count: a client refused in a loop cannot flood the
 * journal. */
#define GATEWAY_REFUSAL_WINDOW_MS (60 * 1000)
/* Kinds of refusal counted at once; a new kind past them writes the
 * oldest kind's count first. */
#define GATEWAY_REFUSALS_KEPT 64
/* Rows of refusals that name no session (an unknown key on the shared
 * TCP port), per window; past it they are only counted.  A session's
 * count against its own journal rate ([limits] session-journal-rate). */
#define GATEWAY_ANON_REFUSAL_ROWS 600

struct gw_refusal {
	char session[65], turn[BROKER_TURN_ID_LEN + 1];
	char method[16], path[PRICE_MODEL_NAME_MAX + 64], code[24];
	int status;
	unsigned count;	   /* refusals since first_ms not yet journaled */
	uint64_t first_ms; /* when this kind's window began; 0: free slot */
};

/* A run's listening socket (gateway_adopt). */
struct gw_listener {
	uv_tcp_t tcp; /* data: the gateway */
	uint64_t id;
	char turn[BROKER_TURN_ID_LEN + 1];
	struct gw_listener *prev, *next;
};

struct gw_conn {
	struct gateway *g;
	union {
		uv_tcp_t tcp;
		uv_pipe_t pipe;
	} h;
	uv_timer_t timer;
	struct http_request req;
	struct gw_call *call;
	/* Accepted on a run's listener: only this turn's key is taken. */
	char bound_turn[BROKER_TURN_ID_LEN + 1];
	/* The turn this connection counts against (the last request's key,
	 * or its run's), or NULL; and the bytes of the body being read now,
	 * counted on that turn and in the gateway's totals. */
	struct broker_turn *turn;
	size_t body_acct;
	bool on_pipe;
	/* A refusal decided on the head (gw_on_head), answered once the
	 * parser has returned. */
	struct {
		int status;
		const char *code;
		const struct broker_turn *turn;
		char msg[256];
	} refusal;
	/* Read and not yet parsed: the next request's bytes. */
	struct buf pending;
	size_t body_max;
	/* A kept-alive connection with no request under way is closed
	 * after this long (broker.keepalive-timeout; an SDK's pool opens
	 * another when it needs one). */
	uint64_t idle_ms;
	/* keep: the request answered now lets the connection go on; idle:
	 * between two requests, nothing of the next one read yet. */
	bool closing, shut, keep, idle, reading;
	int open_handles;
	struct gw_conn *prev, *next;
};

struct gateway {
	struct spd *spd;
	struct gw_listener *listeners;
	uint64_t next_listener;
	uv_tcp_t tcp;
	uv_pipe_t pipe;
	bool tcp_on, pipe_on, stopping;
	int port;
	CURLM *multi;
	/* Why libcurl did not load, for the call that asked
	 * (daemon/broker/gw_curl.h). */
	char curl_err[256];
	uv_timer_t curl_timer;
	/* Each socket of curl's, by its fd, from its first use to its close
	 * (curl's CURLOPT_CLOSESOCKETFUNCTION): a kept-alive provider
	 * connection keeps its poll handle across calls (gateway.c). */
	struct gw_sock **socks;
	size_t n_socks;
	/* Easy handles of calls that ended, for the next ones. */
	CURL *easy_kept[GATEWAY_EASY_KEPT];
	size_t n_easy_kept;
	/* Calls with reply bytes not yet written: out at the end of the
	 * curl event that brought them, in one write with the reply's last
	 * chunk when it is in the same event. */
	struct gw_call *dirty;
	/* Ends the calls whose provider has sent nothing for
	 * broker.provider-timeout (on_stall_timer in gateway.c). */
	uv_timer_t stall_timer;
	/* Refusals counted, not yet journaled; their window's timer; rows
	 * of refusals without a session in the current window. */
	struct gw_refusal refusals[GATEWAY_REFUSALS_KEPT];
	uv_timer_t refusal_timer;
	unsigned anon_rows;
	uint64_t anon_window_ms;
	struct gw_conn *conns;
	/* All connections, and those on TCP (the port and the runs'). */
	size_t n_conns, n_tcp;
	/* Bytes of unfinished request bodies: the sessions' turns', the
	 * operator's. */
	size_t body_agents, body_operator;
	struct gw_call *calls;
	int open_handles;
	char sock_path[4096];
	/* What each tool result of the conversations seen brought
	 * (gw_labels.c): digest -> labels, least recently used first; and
	 * how often a result was found there or classified. */
	json_t *label_cache;
	uint64_t label_hits, label_misses;
};

/* gateway.c */

/* Free the gateway once it is stopping and nothing it holds is open. */
void gw_maybe_free(struct gateway *g);
/* Answer the complete request c->req (a call started, or refused). */
void gw_handle_request(struct gw_conn *c);
/* Call k has no connection any more (its reply is out, or the client went
 * away: gone): what remains of it goes on without one. */
void gw_call_detach(struct gw_call *k, bool gone);

/* The calls curl ended are settled (call_done). */
void gw_check_done(struct gateway *g);
/* What the calls' curl event brought them is written: a write a call. */
void gw_flush_dirty(struct gateway *g);

/* gw_multi.c */

/*
 * libcurl and its TLS library are loaded and the multi made with the
 * first call to a provider, not with spd (daemon/broker/gw_curl.h).
 * Returns 0, -ELIBACC when libcurl cannot be loaded (why in g->curl_err)
 * or -ENOMEM.
 */
int gw_curl(struct gateway *g);
/* An easy handle for a call, with the options every call has: one kept
 * from an ended call, or a new one; NULL on ENOMEM. */
CURL *gw_easy_get(struct gateway *g);
/* An easy handle done with (out of the multi): kept for the next call,
 * nothing of its call left reachable from it, or cleaned up. */
void gw_easy_put(struct gateway *g, CURL *e);
/* The kept easy handles and the multi go (the kept provider connections
 * close with it), once no call is left. */
void gw_multi_release(struct gateway *g);

/* gw_api.c */

/* Longest route path (without its query): Gemini's name the model,
 * "/v1beta/models/" PRICE_MODEL_NAME_MAX ":streamGenerateContent". */
#define GATEWAY_PATH_MAX (PRICE_MODEL_NAME_MAX + 64)
/* What a request to no route of the broker's is told. */
#define GATEWAY_ROUTES_MSG                                                     \
	"spd's broker serves POST /v1/messages, /v1/messages/count_tokens, "   \
	"/v1/chat/completions, /v1/responses and "                             \
	"/v1beta/models/MODEL:generateContent, :streamGenerateContent and "    \
	":countTokens only"

/* An error body in api's shape (Anthropic's, OpenAI's or Google's) with
 * spd's code and message, and extra's members (taken; NULL allowed).
 * Allocated; NULL on ENOMEM. */
char *gw_error_body(enum broker_api api, int status, const char *code,
		    const char *msg, json_t *extra);
/* The api whose shape a refusal of target takes. */
enum broker_api gw_api_of_path(const char *target);
/*
 * The route of target (its query ignored): 0 with its api, whether it
 * only counts tokens (free), whether it streams whatever the body says
 * (Gemini's streamGenerateContent), the path without the query in path
 * and the model the path names in model ("" but for Gemini's, whose body
 * names none); -ENOENT for no route of the broker's.
 */
int gw_route(const char *target, enum broker_api *api, bool *count_only,
	     bool *stream, char *path, size_t plen, char *model, size_t mlen);
/* A Gemini body's output bound (generationConfig.maxOutputTokens in
 * either spelling), 0 for none, -EINVAL when not a positive integer. */
int64_t gw_gemini_max_output(json_t *body);
/*
 * target without the query's key= (allocated), its value in *ret_key
 * (allocated, or NULL when there is none); NULL on ENOMEM.
 */
char *gw_query_take_key(const char *target, char **ret_key);

/* gw_labels.c */

/* Tool results whose labels are kept, across all sessions: a long
 * conversation (hundreds of results) is classified once, not at every
 * call; each entry holds a few labels and what brought them (at most
 * SESSION_LABEL_WHAT_MAX bytes each). */
#define GATEWAY_LABEL_CACHE 2048
/* A tool result is looked for what spd served in its first
 * GATEWAY_LABEL_SCAN bytes, and one call looks through at most
 * GATEWAY_LABEL_BUDGET bytes of results not classified before: each
 * byte is compared with every served result (SESSION_SERVED_MAX), so a
 * body of many large results would otherwise hold the loop for seconds.
 * A result past either reads as not served (agent-tool: the closed
 * side); one past the budget is not kept, and a later call, which sends
 * it again, classifies it. */
#define GATEWAY_LABEL_SCAN (64 * 1024)
#define GATEWAY_LABEL_BUDGET (4 * 1024 * 1024)
/* The agent's own tool uses a model.call row lists (agent_tools). */
#define GATEWAY_AGENT_TOOLS_MAX 32

/*
 * The labels the conversation of body (a request of api to path, for
 * model, by session: NULL or "" for the operator's) carries: 0 with
 * *ret_labels (an object, label -> what brought it first, in order of
 * first sight) and *ret_tools (an array of the agent's own tools' {name,
 * what}, at most GATEWAY_AGENT_TOOLS_MAX), both new references; or
 * -ENOMEM.
 */
int gw_labels_classify(struct gateway *g, const char *session,
		       enum broker_api api, const char *path, const char *model,
		       json_t *body, json_t **ret_labels, json_t **ret_tools);
/* The names of labels (an object from gw_labels_classify) as an array
 * (new reference), or NULL on ENOMEM. */
json_t *gw_labels_names(json_t *labels);
/* The labels (borrowed) session does not hold yet enter its set at
 * journal row (session_label_add); NULL or "" session: none. */
void gw_labels_enter(struct gateway *g, const char *session, json_t *labels,
		     int64_t row);
/* Before the call goes to the provider: the labels of the conversation
 * new to the session enter it at a "model.labels" row of their own, so
 * that no tool the agent starts from the answer (a streamed tool_use)
 * reaches a gate before they are in the set. */
void gw_labels_enter_now(struct gateway *g, const char *session, json_t *labels,
			 const char *model);

/* gw_refuse.c */

/* A "model.call" row of the broker in the journal, of session (NULL or
 * "": none), with detail (taken; may be NULL).  Returns the row's id (0
 * when spd has no journal, negative when it was not appended). */
int64_t gw_journal(struct gateway *g, const char *session, json_t *detail,
		   const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Journal the counts of refusals whose window has passed (all: every
 * count, now: the gateway stops and nothing is lost), and free their
 * slots. */
void gw_refusals_sweep(struct gateway *g, bool all);
/* Refuse c's request before any provider was asked: journaled, answered
 * in the provider's shape. */
void gw_refuse(struct gw_conn *c, const struct broker_turn *t, int status,
	       const char *code, json_t *extra, const char *msg);

/* gw_conn.c */

/* A request's time (head, then body) ran out: 408. */
void gw_on_request_timeout(uv_timer_t *t);
/* The live turn of key, if connection c may use it: a run's port serves
 * its own turn only (another live key, another session's leaked into
 * the run, is as good as none there).  NULL otherwise. */
struct broker_turn *gw_conn_turn(struct gw_conn *c, const char *key);
/* http_request's on_head for c (data): the route, the method and the key
 * are checked on the head, and the connection counted against the key's
 * turn, before any of the body is read.  Returns 0, or -1 with
 * c->refusal set. */
int gw_on_head(struct http_request *r, void *data);
/* Count c against turn t (NULL: against none): -EDQUOT, with
 * c->refusal set, when t or its session holds its most connections. */
int gw_conn_attach(struct gw_conn *c, struct broker_turn *t);
/* Whether n more body bytes of c's request fit its turn's and the
 * gateway's limits (else c->refusal is set). */
bool gw_body_room(struct gw_conn *c, size_t n);
/* Count the bytes of c's unfinished body as they are now (0 once the
 * request is complete or refused). */
void gw_body_account(struct gw_conn *c);

/* The reason phrase of an HTTP status. */
const char *gw_reason(int status);
/* uv_listen's callback for every listener of the endpoint. */
void gw_on_connection(uv_stream_t *server, int status);
/* Close c at once (its call, if any, goes on without it). */
void gw_conn_close(struct gw_conn *c);
/* True when the client has closed its end, without consuming anything
 * it sent. */
bool gw_conn_hung_up(struct gw_conn *c);
/* Whether the reply to c's current request leaves the connection open
 * (its head says "Connection: close" otherwise). */
bool gw_conn_keeps(const struct gw_conn *c);
/*
 * Write, in one uv_write, the bytes of head (a reply's head, or NULL),
 * then data as one chunk of a chunked body (none when data is NULL or
 * empty), then the last chunk when last.  head's and data's memory is
 * taken (they are left empty), never copied.  Returns 0 or -errno.
 */
int gw_conn_chunk(struct gw_conn *c, struct buf *head, struct buf *data,
		  bool last);
/* The reply to c's request is written: read the next request on the
 * connection when it is kept alive, else close once the writes are out. */
void gw_conn_finish(struct gw_conn *c);
/* A whole reply with a Content-Length body, then gw_conn_finish. */
void gw_conn_respond(struct gw_conn *c, int status, const char *ctype,
		     const char *body);

#endif

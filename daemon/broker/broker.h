/*
 * The model broker's turns and budgets.  A turn belongs to one session
 * (or to the operator), has a hard cost cap and a key minted for it.  The
 * key is shown once and kept only as its BLAKE2b hash; its value joins
 * the redaction set while the turn lives.  A call through the broker
 * first reserves its worst case (broker_reserve), then settles to what
 * the provider reported (broker_settle); spd's loop is single-threaded
 * and a reservation is taken synchronously, so concurrent calls on one
 * turn can never pass its cap together.
 *
 * spd.conf:
 *   [broker]
 *       cap-default = 1.00     ; USD, a turn's cap when none is asked
 *       cap-max = 10.00        ; USD, the most the operator may ask
 *       session-cap = 10.00    ; USD, all of one session's turns together
 *       min-output = 1024      ; tokens: the least output limit spd sets
 *       idle-timeout = 3600    ; seconds without a call before a key dies
 *       listen = 127.0.0.1:0   ; the HTTP endpoint's loopback port; "none"
 *       body-max = 33554432    ; bytes of one request body
 *       provider-timeout = 600 ; seconds a provider may go silent
 *       keepalive-timeout = 30 ; seconds a kept-alive connection idles
 *   [provider "anthropic"]
 *       url = https://api.anthropic.com
 *       key = ANTHROPIC_API_KEY ; the name in the environment file
 *       api = anthropic         ; or openai, or gemini
 *   [model "NAME"]              ; daemon/broker/price.h
 */
#ifndef SPD_DAEMON_BROKER_H
#define SPD_DAEMON_BROKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "daemon/broker/price.h"

struct spd;
struct call;
struct gateway;

/* A turn's id: "turn-" and 16 hex digits. */
#define BROKER_TURN_ID_LEN 21
/* A turn key: "sk-spd-" and 64 hex digits (32 random bytes). */
#define BROKER_KEY_LEN 71
/* Turns kept, live or ended (ended ones for `spctl turns`): the oldest
 * ended turn makes room; past it with every turn live, turn.begin is
 * refused rather than spd growing without bound. */
#define BROKER_TURNS_MAX 4096
/* Providers in spd.conf: a handful are real. */
#define BROKER_PROVIDERS_MAX 16
/* Defaults of [broker].  A dollar a turn is a long agent turn on a
 * mid-priced model; ten the most an operator may give one without
 * editing spd.conf; an hour idle ends a forgotten turn. */
#define BROKER_CAP_DEFAULT_USD "1.00"
#define BROKER_CAP_MAX_USD "10.00"
/* What all the turns of one session may spend together: a session token
 * mints turns at will, each up to cap-default, so without it the caps
 * bound nothing.  Ten default turns. */
#define BROKER_SESSION_CAP_USD "10.00"
/* The smallest output limit spd writes into a request whose own limit
 * (or none) the turn's budget cannot cover: a reply shorter than this is
 * not worth a call, so below it the call is refused (402). */
#define BROKER_MIN_OUTPUT 1024
#define BROKER_IDLE_TIMEOUT_S 3600
/* Largest request body: the providers' own limit is 32 MB (images and
 * PDFs inline). */
#define BROKER_BODY_MAX (32 * 1024 * 1024)
/* How long a provider may send nothing before the call is ended. */
#define BROKER_PROVIDER_TIMEOUT_S 600
/* How long a kept-alive connection to the endpoint may sit with no
 * request under way before spd closes it. */
#define BROKER_KEEPALIVE_TIMEOUT_S 30

enum broker_api { BROKER_API_ANTHROPIC, BROKER_API_OPENAI, BROKER_API_GEMINI };

struct broker_provider {
	char name[64];
	char url[512]; /* scheme://host[:port], no trailing slash */
	char key_var[65];
	enum broker_api api;
};

/* One session's spending across its turns (session-cap). */
struct broker_account;

struct broker_turn {
	char id[BROKER_TURN_ID_LEN + 1];
	char session[65]; /* "" for the operator's turns */
	unsigned char key_hash[32];
	int64_t cap, spent, reserved; /* picodollars */
	struct broker_account *acct;  /* NULL for the operator's turns */
	unsigned calls, inflight;
	/* Endpoint connections whose request named this turn (or that came
	 * on its run's port), and the bytes of their bodies still being
	 * read: the turn is not freed while either is held. */
	unsigned conns;
	size_t body_held;
	uint64_t begun_us, last_us;
	bool ended;
	char end_reason[32]; /* "ended", "idle", "session ended", ... */
};

/* The parts of [broker] the HTTP endpoint needs. */
struct broker_config {
	int64_t cap_default, cap_max; /* picodollars */
	int64_t session_cap;	      /* picodollars */
	int64_t min_output;	      /* tokens */
	unsigned idle_timeout_s;
	char listen[64]; /* "127.0.0.1:0", or "" for none */
	size_t body_max;
	unsigned provider_timeout_s;
	unsigned keepalive_timeout_s;
	struct broker_provider providers[BROKER_PROVIDERS_MAX];
	size_t n_providers;
	struct price_table prices;
};

/*
 * Read [broker], [provider] and [model] from spd's spd.conf, start the
 * idle sweep and the HTTP endpoint (daemon/broker/gateway.h), and install the
 * broker as spd->broker.  A bad value, or a provider URL that is not
 * https (plain http only to a loopback address, for tests and local
 * stand-ins), is refused.  Returns 0, or -errno with a sentence in errbuf.
 */
int broker_start(struct spd *spd, char *errbuf, size_t errlen);
/*
 * The [broker] listen address, [provider] and [model] settings of gc
 * (read from path; NULL: none, the defaults) into *ret, with the
 * numbers config_read put in sc.  A provider URL that is not https
 * (plain http only to a loopback address) is refused.  Returns 0, or
 * -errno with a sentence in errbuf; *ret must be given to
 * broker_config_free either way.
 */
struct git_config;
struct spd_config;
int broker_config_read(struct git_config *gc, const char *path,
		       const struct spd_config *sc, struct broker_config *ret,
		       char *errbuf, size_t errlen);
/* Release what broker_config_read allocated; NULL allowed. */
void broker_config_free(struct broker_config *cfg);
/*
 * Put cfg in force from the next call (spctl reload): caps, limits,
 * providers and prices; a session's cap becomes the new session-cap.
 * The listen address stays the one spd started with.  Takes cfg's
 * contents (cfg is left empty).
 */
void broker_reconfigure(struct spd *spd, struct broker_config *cfg);
/* Stop the endpoint and the sweep (calls in flight end, journaled) and
 * free the broker once its handles are closed.  NULL-safe. */
void broker_stop(struct spd *spd);

/* The configuration in force (borrowed). */
const struct broker_config *broker_config(struct spd *spd);

/*
 * The live turn whose key this is (compared by hash, in constant time),
 * or NULL for an unknown, revoked or idle-expired key.  Borrowed: valid
 * until the loop runs again.
 */
struct broker_turn *broker_turn_by_key(struct spd *spd, const char *key,
				       size_t len);
/* A turn by id, live or ended; NULL when unknown. */
struct broker_turn *broker_turn_by_id(struct spd *spd, const char *id);
/* Whether t may be used now: not ended, and not idle past
 * idle-timeout (such a turn is ended here, journaled "idle": a late
 * call never revives it). */
bool broker_turn_live(struct spd *spd, struct broker_turn *t);

/*
 * Reserve amount picodollars on t for one call: 0, or -EDQUOT when
 * spent + reserved + amount would pass the turn's cap, -ENOSPC when it
 * would pass its session's session-cap (nothing is reserved).  Counts the
 * call and marks the turn used now.
 */
int broker_reserve(struct broker_turn *t, int64_t amount);
/*
 * What t may still reserve: the least of its own room and its session's
 * (picodollars, never negative).  *ret_session (may be NULL) says whether
 * the session's is the smaller.
 */
int64_t broker_room(const struct broker_turn *t, bool *ret_session);
/* t's session's spent, reserved and cap, for messages; false for the
 * operator's turns. */
bool broker_session_budget(const struct broker_turn *t, int64_t *ret_spent,
			   int64_t *ret_reserved, int64_t *ret_cap);
/*
 * Settle a call that reserved `reserved`: the reservation is released
 * and `cost` added to the spend.  The turn may have ended meanwhile: a
 * call already under way is still charged.
 */
void broker_settle(struct broker_turn *t, int64_t reserved, int64_t cost);

/* The provider of api (the first configured), or NULL. */
const struct broker_provider *broker_provider_for(struct spd *spd,
						  enum broker_api api);
/* The provider's real key (borrowed, from the secrets), or NULL. */
const char *broker_provider_key(struct spd *spd,
				const struct broker_provider *p);

/* The endpoint's addresses for daemon.status and turn.begin: a base URL
 * "http://127.0.0.1:PORT" (or "" when not listening) and broker.sock. */
const char *broker_base_url(struct spd *spd);
const char *broker_socket_path(struct spd *spd);

/* The HTTP endpoint (daemon/broker/gateway.h), or NULL. */
struct gateway *broker_gateway(struct spd *spd);

/*
 * The cap of a new turn, from capv (a JSON number of USD, or NULL for
 * [broker] cap-default): the operator may ask up to cap-max, a session
 * token up to cap-default.  Returns 0 and *ret (picodollars), or -EINVAL
 * (not a positive number), -EDQUOT (above the caller's limit) or
 * -ENOTCONN (no broker), with a sentence in msg.
 */
int broker_cap_for(struct spd *spd, bool operator, json_t * capv, int64_t *ret,
		   char *msg, size_t msglen);
/*
 * Begin a turn of session (NULL: the operator's) with cap picodollars,
 * journaled; its key is written to key and joins the redaction set at
 * once (the caller passes it on where no reply shows it: a run's
 * environment).  Returns the turn (borrowed, like broker_turn_by_id), or
 * NULL with -EDQUOT (too many live turns), -ENOSPC (the session has
 * spent its session-cap), -ENOMEM or -ENOTCONN in *ret_err.
 */
struct broker_turn *broker_turn_begin(struct spd *spd, const char *session,
				      int64_t cap, char key[BROKER_KEY_LEN + 1],
				      int *ret_err);
/* End the turn turn_id now (settled: calls in flight are still charged;
 * its key is revoked) for reason ("agent exited").  An unknown or ended
 * turn, or no broker, is ignored. */
void broker_turn_end(struct spd *spd, const char *turn_id, const char *reason);

/* Endpoint connections counted against the turns of session (the
 * broker's per-session connection quota). */
unsigned broker_session_conns(struct spd *spd, const char *session);

/* A session's turns end with it (ended or attempt-ended). */
void broker_session_ended(struct spd *spd, const char *session_id);

#endif

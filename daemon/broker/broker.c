/*
 * Turns, their minted keys and budgets (daemon/broker/broker.h): the
 * [broker] configuration, reserve and settle, the handlers of turn.begin,
 * turn.end and turn.list.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <git2.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon/config.h"
#include "daemon/conftab.h"
#include "daemon/transport/handlers.h"
#include "daemon/broker/broker.h"
#include "daemon/transport/call.h"
#include "daemon/broker/gateway.h"
#include "daemon/journal/journal.h"
#include "daemon/log.h"
#include "daemon/keys/secrets.h"
#include "daemon/session/session.h"
#include "daemon/spd.h"
#include "common/util.h"

/* The sweep that ends idle turns runs at most this often: an expired
 * key is already refused at its deadline (broker_turn_by_key checks it);
 * the sweep only revokes it for good and journals that. */
#define BROKER_SWEEP_MAX_MS (60 * 1000)

struct broker_account {
	char session[65];
	int64_t spent, reserved, cap; /* picodollars */
	struct broker_account *next;
};

struct broker {
	struct spd *spd;
	struct broker_config cfg;
	struct broker_turn **turns; /* oldest first */
	size_t n_turns;
	/* One per session that ever had a turn, kept until spd exits: what
	 * a session spent outlives its turns (an ended turn is dropped when
	 * room is needed).  Sessions are the operator's to create. */
	struct broker_account *accounts;
	uv_timer_t sweep;
	struct gateway *gw;
	char base_url[64];
	char sock_path[4096];
};

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ---- configuration ------------------------------------------------- */

static bool host_is_loopback(const char *h, size_t n)
{
	char buf[64];
	struct in_addr a4;
	struct in6_addr a6;

	if (n >= sizeof(buf))
		return false;
	memcpy(buf, h, n);
	buf[n] = '\0';
	if (strcmp(buf, "localhost") == 0)
		return true;
	if (inet_pton(AF_INET, buf, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (n > 2 && buf[0] == '[' && buf[n - 1] == ']') {
		buf[n - 1] = '\0';
		return inet_pton(AF_INET6, buf + 1, &a6) == 1 &&
		       IN6_IS_ADDR_LOOPBACK(&a6);
	}
	return false;
}

/* A provider's URL: https, or plain http only to this machine's loopback
 * (a key sent in clear over a network is a key given away). */
static int url_ok(char *url)
{
	const char *host, *end;
	size_t n = strlen(url);

	while (n && url[n - 1] == '/')
		url[--n] = '\0';
	if (strncmp(url, "https://", 8) == 0)
		host = url + 8;
	else if (strncmp(url, "http://", 7) == 0)
		host = url + 7;
	else
		return -EINVAL;
	if (strpbrk(host, "?#@ \t\r\n") || !*host)
		return -EINVAL;
	end = host[0] == '[' ? strchr(host, ']') : host + strcspn(host, ":/");
	if (!end)
		return -EINVAL;
	if (host[0] == '[')
		end++;
	if (url[4] == ':' && !host_is_loopback(host, (size_t)(end - host)))
		return -EPERM;
	return 0;
}

static int get_str(git_config *gc, const char *name, char *dst, size_t len)
{
	git_config_entry *e = NULL;
	int r = git_config_get_entry(&e, gc, name);

	if (r == GIT_ENOTFOUND)
		return 0;
	if (r < 0)
		return -EINVAL;
	if (strlen(e->value) >= len) {
		git_config_entry_free(e);
		return -ENAMETOOLONG;
	}
	memcpy(dst, e->value, strlen(e->value) + 1);
	git_config_entry_free(e);
	return 1;
}

static struct broker_provider *provider_slot(struct broker_config *cfg,
					     const char *name)
{
	for (size_t i = 0; i < cfg->n_providers; i++)
		if (strcmp(cfg->providers[i].name, name) == 0)
			return &cfg->providers[i];
	if (cfg->n_providers >= BROKER_PROVIDERS_MAX ||
	    strlen(name) >= sizeof(cfg->providers[0].name))
		return NULL;
	struct broker_provider *p = &cfg->providers[cfg->n_providers++];
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->api = strcmp(name, "openai") == 0   ? BROKER_API_OPENAI
		 : strcmp(name, "gemini") == 0 ? BROKER_API_GEMINI
					       : BROKER_API_ANTHROPIC;
	return p;
}

struct prov_ctx {
	struct broker_config *cfg;
	const char *path;
	char *errbuf;
	size_t errlen;
};

static int provider_cb(const git_config_entry *e, void *data)
{
	struct prov_ctx *pc = data;
	const char *name = e->name + strlen("provider.");
	const char *key = strrchr(name, '.');
	char pname[64];
	struct broker_provider *p;

	if (!key || key == name || (size_t)(key - name) >= sizeof(pname))
		goto bad;
	snprintf(pname, sizeof(pname), "%.*s", (int)(key - name), name);
	key++;
	p = provider_slot(pc->cfg, pname);
	if (!p)
		goto bad;
	if (strcmp(key, "url") == 0) {
		if (strlen(e->value) >= sizeof(p->url))
			goto bad;
		snprintf(p->url, sizeof(p->url), "%s", e->value);
		if (url_ok(p->url) < 0) {
			snprintf(pc->errbuf, pc->errlen,
				 "%s: [provider \"%s\"] url \"%s\" must be "
				 "https:// (plain http:// only to a loopback "
				 "address)",
				 pc->path, pname, e->value);
			return -1;
		}
	} else if (strcmp(key, "key") == 0) {
		if (strlen(e->value) >= sizeof(p->key_var))
			goto bad;
		snprintf(p->key_var, sizeof(p->key_var), "%s", e->value);
	} else if (strcmp(key, "api") == 0) {
		if (strcmp(e->value, "anthropic") == 0)
			p->api = BROKER_API_ANTHROPIC;
		else if (strcmp(e->value, "openai") == 0)
			p->api = BROKER_API_OPENAI;
		else if (strcmp(e->value, "gemini") == 0)
			p->api = BROKER_API_GEMINI;
		else
			goto bad;
	} else {
		goto bad;
	}
	return 0;
bad:
	snprintf(
	    pc->errbuf, pc->errlen,
	    "%s: %s = \"%s\": expected [provider \"NAME\"] url = https://…, "
	    "key = VARIABLE, api = anthropic|openai|gemini",
	    pc->path, e->name, e->value);
	return -1;
}

int broker_config_read(struct git_config *gc, const char *path,
		       const struct spd_config *sc, struct broker_config *cfg,
		       char *errbuf, size_t errlen)
{
	struct prov_ctx pc = {cfg, path, errbuf, errlen};
	char v[64];
	int r = 0;
	struct broker_provider *p;

	memset(cfg, 0, sizeof(*cfg));
	/* The numbers are config_read's, from the table (daemon/conftab.c). */
	cfg->cap_default = sc->broker.cap_default;
	cfg->cap_max = sc->broker.cap_max;
	cfg->session_cap = sc->broker.session_cap;
	cfg->min_output = sc->broker.min_output;
	cfg->idle_timeout_s = sc->broker.idle_timeout_s;
	cfg->body_max = sc->broker.body_max;
	cfg->provider_timeout_s = sc->broker.provider_timeout_s;
	cfg->keepalive_timeout_s = sc->broker.keepalive_timeout_s;
	snprintf(cfg->listen, sizeof(cfg->listen), "127.0.0.1:0");
	p = provider_slot(cfg, "anthropic");
	snprintf(p->url, sizeof(p->url), "https://api.anthropic.com");
	snprintf(p->key_var, sizeof(p->key_var), "ANTHROPIC_API_KEY");
	p = provider_slot(cfg, "openai");
	snprintf(p->url, sizeof(p->url), "https://api.openai.com");
	snprintf(p->key_var, sizeof(p->key_var), "OPENAI_API_KEY");
	p->api = BROKER_API_OPENAI;
	p = provider_slot(cfg, "gemini");
	snprintf(p->url, sizeof(p->url),
		 "https://generativelanguage.googleapis.com");
	snprintf(p->key_var, sizeof(p->key_var), "GEMINI_API_KEY");

	if (gc) {
		r = get_str(gc, "broker.listen", v, sizeof(v));
		if (r < 0 || (r > 0 && strlen(v) >= sizeof(cfg->listen))) {
			snprintf(errbuf, errlen,
				 "%s: broker.listen is too long", path);
			return -EINVAL;
		}
		if (r > 0)
			snprintf(cfg->listen, sizeof(cfg->listen), "%s", v);
		if (strcmp(cfg->listen, "none") == 0)
			cfg->listen[0] = '\0';
		if (config_foreach_prefix(gc, "provider.", provider_cb, &pc) !=
		    0)
			return -EINVAL;
	}
	for (size_t i = 0; i < cfg->n_providers; i++)
		if (!cfg->providers[i].url[0] ||
		    !cfg->providers[i].key_var[0]) {
			snprintf(errbuf, errlen,
				 "%s: [provider \"%s\"] needs url and key",
				 path, cfg->providers[i].name);
			return -EINVAL;
		}
	return price_table_load(gc, path, &cfg->prices, errbuf, errlen);
}

void broker_config_free(struct broker_config *cfg)
{
	if (cfg)
		price_table_free(&cfg->prices);
}

/* ---- turns --------------------------------------------------------- */

static struct broker *B(struct spd *spd)
{
	return spd ? spd->broker : NULL;
}

static bool expired(const struct broker *b, const struct broker_turn *t,
		    uint64_t now)
{
	return t->inflight == 0 &&
	       now - t->last_us >= (uint64_t)b->cfg.idle_timeout_s * 1000000u;
}

static void journal_turn(struct broker *b, const struct broker_turn *t,
			 const char *kind, const char *summary_fmt)
{
	char spent[32], cap[32], summary[160];
	json_t *d;
	char *txt;

	if (!b->spd->journal)
		return;
	price_format_usd(t->spent, spent, sizeof(spent));
	price_format_usd(t->cap, cap, sizeof(cap));
	snprintf(summary, sizeof(summary), "%s %s (spent %s of %s USD)",
		 summary_fmt, t->id, spent, cap);
	d = json_pack("{s:s, s:s, s:f, s:f, s:f, s:i}", "turn", t->id, "reason",
		      t->end_reason, "spent_usd", price_usd(t->spent),
		      "reserved_usd", price_usd(t->reserved), "cap_usd",
		      price_usd(t->cap), "calls", (json_int_t)t->calls);
	txt = d ? json_dumps(d, JSON_COMPACT) : NULL;
	journal_append(b->spd->journal, t->session[0] ? t->session : NULL,
		       "broker", kind, summary, txt);
	free(txt);
	json_decref(d);
}

static void key_name(const struct broker_turn *t, char *buf, size_t len)
{
	snprintf(buf, len, "turn.%s", t->id);
}

/* Revoke t's key: it no longer authenticates, and leaves the redaction
 * set (a dead key is worth nothing). */
static void end_turn(struct broker *b, struct broker_turn *t,
		     const char *reason)
{
	char name[64];

	if (t->ended)
		return;
	t->ended = true;
	snprintf(t->end_reason, sizeof(t->end_reason), "%s", reason);
	sodium_memzero(t->key_hash, sizeof(t->key_hash));
	key_name(t, name, sizeof(name));
	secrets_drop_minted(b->spd, name);
	journal_turn(b, t, "turn.end", "ended");
}

static void on_sweep(uv_timer_t *h)
{
	struct broker *b = h->data;
	uint64_t now = now_us();

	for (size_t i = 0; i < b->n_turns; i++)
		if (!b->turns[i]->ended && expired(b, b->turns[i], now))
			end_turn(b, b->turns[i], "idle");
}

/* Room for one more turn: drop the oldest ended one when full. */
static int make_room(struct broker *b)
{
	struct broker_turn **nv;

	if (b->n_turns >= BROKER_TURNS_MAX) {
		size_t i;

		/* A turn a connection or a call still points at stays. */
		for (i = 0; i < b->n_turns; i++)
			if (b->turns[i]->ended && b->turns[i]->inflight == 0 &&
			    b->turns[i]->conns == 0 &&
			    b->turns[i]->body_held == 0)
				break;
		if (i == b->n_turns)
			return -EDQUOT;
		free(b->turns[i]);
		memmove(&b->turns[i], &b->turns[i + 1],
			(b->n_turns - i - 1) * sizeof(*b->turns));
		b->n_turns--;
		return 0;
	}
	nv = realloc(b->turns, (b->n_turns + 1) * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	b->turns = nv;
	return 0;
}

struct broker_turn *broker_turn_by_key(struct spd *spd, const char *key,
				       size_t len)
{
	struct broker *b = B(spd);
	unsigned char h[32];
	uint64_t now = now_us();
	struct broker_turn *hit = NULL;

	if (!b || len != BROKER_KEY_LEN || strncmp(key, "sk-spd-", 7) != 0)
		return NULL;
	crypto_generichash(h, sizeof(h), (const unsigned char *)key, len, NULL,
			   0);
	/* Every live turn is compared, so the time taken says nothing of
	 * which one matched. */
	for (size_t i = 0; i < b->n_turns; i++) {
		struct broker_turn *t = b->turns[i];

		if (!t->ended && sodium_memcmp(t->key_hash, h, sizeof(h)) == 0)
			hit = t;
	}
	if (hit && expired(b, hit, now)) {
		end_turn(b, hit, "idle");
		return NULL;
	}
	return hit;
}

struct broker_turn *broker_turn_by_id(struct spd *spd, const char *id)
{
	struct broker *b = B(spd);

	for (size_t i = 0; b && id && i < b->n_turns; i++)
		if (strcmp(b->turns[i]->id, id) == 0)
			return b->turns[i];
	return NULL;
}

/* Whether spent + reserved + amount stays within cap. */
static bool fits(int64_t spent, int64_t reserved, int64_t amount, int64_t cap)
{
	int64_t total;

	return !__builtin_add_overflow(spent, reserved, &total) &&
	       !__builtin_add_overflow(total, amount, &total) && total <= cap;
}

static int64_t left(int64_t spent, int64_t reserved, int64_t cap)
{
	int64_t used;

	if (__builtin_add_overflow(spent, reserved, &used) || used >= cap)
		return 0;
	return cap - used;
}

int64_t broker_room(const struct broker_turn *t, bool *ret_session)
{
	int64_t room = left(t->spent, t->reserved, t->cap), s;
	bool session = false;

	if (t->acct) {
		s = left(t->acct->spent, t->acct->reserved, t->acct->cap);
		if (s < room) {
			room = s;
			session = true;
		}
	}
	if (ret_session)
		*ret_session = session;
	return room;
}

bool broker_session_budget(const struct broker_turn *t, int64_t *ret_spent,
			   int64_t *ret_reserved, int64_t *ret_cap)
{
	if (!t->acct)
		return false;
	*ret_spent = t->acct->spent;
	*ret_reserved = t->acct->reserved;
	*ret_cap = t->acct->cap;
	return true;
}

bool broker_turn_live(struct spd *spd, struct broker_turn *t)
{
	struct broker *b = B(spd);

	if (!b || !t || t->ended)
		return false;
	if (expired(b, t, now_us())) {
		end_turn(b, t, "idle");
		return false;
	}
	return true;
}

int broker_reserve(struct broker_turn *t, int64_t amount)
{
	if (amount < 0)
		amount = 0;
	if (!fits(t->spent, t->reserved, amount, t->cap))
		return -EDQUOT;
	if (t->acct &&
	    !fits(t->acct->spent, t->acct->reserved, amount, t->acct->cap))
		return -ENOSPC;
	t->reserved += amount;
	if (t->acct)
		t->acct->reserved += amount;
	t->calls++;
	t->inflight++;
	t->last_us = now_us();
	return 0;
}

void broker_settle(struct broker_turn *t, int64_t reserved, int64_t cost)
{
	t->reserved -= reserved;
	if (t->reserved < 0)
		t->reserved = 0;
	if (cost > 0 && __builtin_add_overflow(t->spent, cost, &t->spent))
		t->spent = INT64_MAX;
	if (t->acct) {
		t->acct->reserved -= reserved;
		if (t->acct->reserved < 0)
			t->acct->reserved = 0;
		if (cost > 0 && __builtin_add_overflow(t->acct->spent, cost,
						       &t->acct->spent))
			t->acct->spent = INT64_MAX;
	}
	if (t->inflight)
		t->inflight--;
	t->last_us = now_us();
}

const struct broker_config *broker_config(struct spd *spd)
{
	return B(spd) ? &B(spd)->cfg : NULL;
}

const struct broker_provider *broker_provider_for(struct spd *spd,
						  enum broker_api api)
{
	struct broker *b = B(spd);

	for (size_t i = 0; b && i < b->cfg.n_providers; i++)
		if (b->cfg.providers[i].api == api)
			return &b->cfg.providers[i];
	return NULL;
}

const char *broker_provider_key(struct spd *spd,
				const struct broker_provider *p)
{
	return p ? secrets_value(spd, p->key_var) : NULL;
}

const char *broker_base_url(struct spd *spd)
{
	return B(spd) ? B(spd)->base_url : "";
}

struct gateway *broker_gateway(struct spd *spd)
{
	return B(spd) ? B(spd)->gw : NULL;
}

const char *broker_socket_path(struct spd *spd)
{
	return B(spd) ? B(spd)->sock_path : "";
}

unsigned broker_session_conns(struct spd *spd, const char *session)
{
	struct broker *b = B(spd);
	unsigned n = 0;

	for (size_t i = 0; b && session && i < b->n_turns; i++)
		if (strcmp(b->turns[i]->session, session) == 0)
			n += b->turns[i]->conns;
	return n;
}

void broker_session_ended(struct spd *spd, const char *session_id)
{
	struct broker *b = B(spd);

	for (size_t i = 0; b && i < b->n_turns; i++)
		if (strcmp(b->turns[i]->session, session_id) == 0)
			end_turn(b, b->turns[i], "session ended");
}

/* ---- start and stop ------------------------------------------------ */

/* How often the sweep runs for idle-timeout secs. */
static uint64_t sweep_every(unsigned idle_s)
{
	uint64_t every = (uint64_t)idle_s * 1000u;

	return every > BROKER_SWEEP_MAX_MS ? BROKER_SWEEP_MAX_MS : every;
}

int broker_start(struct spd *spd, char *errbuf, size_t errlen)
{
	struct broker *b = calloc(1, sizeof(*b));
	git_config *gc = NULL;
	uint64_t every;
	int r;

	if (!b)
		return -ENOMEM;
	b->spd = spd;
	r = conftab_open(spd->paths.conf_path, NULL, CONFTAB_SPD_CONF, &gc,
			 errbuf, errlen);
	if (r < 0 && r != -ENOENT) {
		free(b);
		return r;
	}
	r = broker_config_read(gc, spd->paths.conf_path, &spd->config, &b->cfg,
			       errbuf, errlen);
	git_config_free(gc);
	if (r < 0) {
		price_table_free(&b->cfg.prices);
		free(b);
		return r;
	}
	snprintf(b->sock_path, sizeof(b->sock_path), "%s/broker.sock",
		 spd->paths.runtime_dir);
	spd->broker = b;
	r = gateway_start(spd, b->cfg.listen, b->sock_path, &b->gw, errbuf,
			  errlen);
	if (r < 0) {
		spd->broker = NULL;
		price_table_free(&b->cfg.prices);
		free(b);
		return r;
	}
	if (gateway_port(b->gw) > 0)
		snprintf(b->base_url, sizeof(b->base_url),
			 "http://127.0.0.1:%d", gateway_port(b->gw));
	uv_timer_init(spd->loop, &b->sweep);
	b->sweep.data = b;
	every = sweep_every(b->cfg.idle_timeout_s);
	uv_timer_start(&b->sweep, on_sweep, every, every);
	log_info("broker: %s and %s, prices %.16s",
		 b->base_url[0] ? b->base_url : "no TCP port", b->sock_path,
		 b->cfg.prices.hash);
	return 0;
}

void broker_reconfigure(struct spd *spd, struct broker_config *cfg)
{
	struct broker *b = B(spd);
	struct price_table old;

	if (!b) {
		broker_config_free(cfg);
		return;
	}
	/* The endpoint is bound: its address is the one spd started with
	 * (the caller reports a change as needing a restart). */
	snprintf(cfg->listen, sizeof(cfg->listen), "%s", b->cfg.listen);
	/* Calls in flight carry their own copy of the prices they were
	 * judged with (gateway.c): the old table can go now. */
	old = b->cfg.prices;
	b->cfg = *cfg;
	memset(cfg, 0, sizeof(*cfg));
	price_table_free(&old);
	/* A session's cap is the operator's: the new one holds from its
	 * next call (what was spent stays spent). */
	for (struct broker_account *a = b->accounts; a; a = a->next)
		a->cap = b->cfg.session_cap;
	uv_timer_start(&b->sweep, on_sweep, sweep_every(b->cfg.idle_timeout_s),
		       sweep_every(b->cfg.idle_timeout_s));
}

static void on_sweep_closed(uv_handle_t *h)
{
	struct broker *b = h->data;

	for (size_t i = 0; i < b->n_turns; i++)
		free(b->turns[i]);
	free(b->turns);
	while (b->accounts) {
		struct broker_account *a = b->accounts;

		b->accounts = a->next;
		free(a);
	}
	price_table_free(&b->cfg.prices);
	free(b);
}

void broker_stop(struct spd *spd)
{
	struct broker *b = B(spd);

	if (!b)
		return;
	/* Turns live in spd's memory alone: each still live ends here, in
	 * the journal too, with what it spent (its key dies with spd). */
	for (size_t i = 0; i < b->n_turns; i++)
		end_turn(b, b->turns[i], "spd stopped");
	gateway_stop(b->gw);
	b->gw = NULL;
	spd->broker = NULL;
	uv_close((uv_handle_t *)&b->sweep, on_sweep_closed);
}

/* ---- RPC ----------------------------------------------------------- */

static json_t *turn_json(const struct broker_turn *t)
{
	return json_pack(
	    "{s:s, s:s?, s:f, s:f, s:f, s:i, s:i, s:b, s:s?, s:I}", "turn",
	    t->id, "session", t->session[0] ? t->session : NULL, "spent_usd",
	    price_usd(t->spent), "reserved_usd", price_usd(t->reserved),
	    "cap_usd", price_usd(t->cap), "calls", (json_int_t)t->calls,
	    "inflight", (json_int_t)t->inflight, "ended", t->ended,
	    "end_reason", t->ended ? t->end_reason : NULL, "begun",
	    (json_int_t)(t->begun_us / 1000000u));
}

/* USD as a JSON number to picodollars, to the micro-dollar. */
static int usd_param(json_t *v, int64_t *ret)
{
	double d = json_number_value(v);

	if (!isfinite(d) || d <= 0 || d > 1e6)
		return -EINVAL;
	*ret = (int64_t)(d * 1e6 + 0.5) * 1000000;
	return *ret > 0 ? 0 : -EINVAL;
}

/* session's account, made on first use; NULL when out of memory. */
static struct broker_account *account_of(struct broker *b, const char *session)
{
	struct broker_account *a;

	for (a = b->accounts; a; a = a->next)
		if (strcmp(a->session, session) == 0)
			return a;
	a = calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	snprintf(a->session, sizeof(a->session), "%s", session);
	a->cap = b->cfg.session_cap;
	a->next = b->accounts;
	b->accounts = a;
	return a;
}

/* A new live turn with a fresh key (written to key), journaled.  The key
 * is not yet in the redaction set.  Returns 0, -EDQUOT when
 * BROKER_TURNS_MAX turns are live, -ENOSPC when the session has spent
 * its session-cap, or -ENOMEM. */
static int mint(struct broker *b, const char *session, int64_t cap,
		char key[BROKER_KEY_LEN + 1], struct broker_turn **ret)
{
	unsigned char raw[32];
	struct broker_turn *t;
	struct broker_account *acct = NULL;
	uint64_t now = now_us();
	int r;

	if (session && session[0]) {
		acct = account_of(b, session);
		if (!acct)
			return -ENOMEM;
		if (left(acct->spent, acct->reserved, acct->cap) <= 0)
			return -ENOSPC;
	}
	r = make_room(b);
	if (r < 0)
		return r == -ENOMEM ? r : -EDQUOT;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	randombytes_buf(raw, 8);
	memcpy(t->id, "turn-", 5);
	sodium_bin2hex(t->id + 5, sizeof(t->id) - 5, raw, 8);
	randombytes_buf(raw, sizeof(raw));
	memcpy(key, "sk-spd-", 7);
	sodium_bin2hex(key + 7, BROKER_KEY_LEN + 1 - 7, raw, sizeof(raw));
	sodium_memzero(raw, sizeof(raw));
	crypto_generichash(t->key_hash, sizeof(t->key_hash),
			   (const unsigned char *)key, BROKER_KEY_LEN, NULL, 0);
	snprintf(t->session, sizeof(t->session), "%s", session ? session : "");
	t->acct = acct;
	t->cap = cap;
	t->begun_us = t->last_us = now;
	b->turns[b->n_turns++] = t;
	journal_turn(b, t, "turn.begin", "begun");
	*ret = t;
	return 0;
}

int broker_cap_for(struct spd *spd, bool operator, json_t * capv, int64_t *ret,
		   char *msg, size_t msglen)
{
	struct broker *b = B(spd);
	int64_t cap, limit;
	char capbuf[32];

	if (!b) {
		snprintf(msg, msglen, "the model broker is not running");
		return -ENOTCONN;
	}
	limit = operator? b->cfg.cap_max : b->cfg.cap_default;
	cap = b->cfg.cap_default;
	if (capv && usd_param(capv, &cap) < 0) {
		snprintf(msg, msglen,
			 "cap_usd must be a positive number of USD");
		return -EINVAL;
	}
	if (cap > limit) {
		price_format_usd(limit, capbuf, sizeof(capbuf));
		snprintf(msg, msglen,
			 "cap_usd is above %s USD, the most %s (spd.conf "
			 "broker.%s)",
			 capbuf,
			 operator? "any turn may have"
				 : "a session token may ask for",
			 operator? "cap-max" : "cap-default");
		return -EDQUOT;
	}
	*ret = cap;
	return 0;
}

struct broker_turn *broker_turn_begin(struct spd *spd, const char *session,
				      int64_t cap, char key[BROKER_KEY_LEN + 1],
				      int *ret_err)
{
	struct broker *b = B(spd);
	struct broker_turn *t = NULL;
	char name[64];
	int r;

	if (!b) {
		*ret_err = -ENOTCONN;
		return NULL;
	}
	r = mint(b, session, cap, key, &t);
	if (r < 0) {
		*ret_err = r;
		return NULL;
	}
	key_name(t, name, sizeof(name));
	if (secrets_add_minted(spd, name, key) < 0) {
		end_turn(b, t, "not redactable");
		sodium_memzero(key, BROKER_KEY_LEN + 1);
		*ret_err = -ENOMEM;
		return NULL;
	}
	return t;
}

void broker_turn_end(struct spd *spd, const char *turn_id, const char *reason)
{
	struct broker *b = B(spd);
	struct broker_turn *t = broker_turn_by_id(spd, turn_id);

	if (b && t)
		end_turn(b, t, reason);
}

void m_turn_begin(struct call *c)
{
	struct spd *spd = call_spd(c);
	struct broker *b = B(spd);
	const struct call_principal *who = call_principal(c);
	json_t *params = call_params(c);
	const char *session =
	    json_string_value(json_object_get(params, "session"));
	json_t *capv = json_object_get(params, "cap_usd");
	char key[BROKER_KEY_LEN + 1], name[64], capbuf[32], oai[80];
	int64_t cap, limit;
	struct broker_turn *t;
	uint64_t now = now_us();
	int r;

	if (!b) {
		call_error(c, RPC_E_INTERNAL, NULL,
			   "the model broker is not running");
		return;
	}
	if (!who->operator) {
		if (session && strcmp(session, who->session_id) != 0) {
			call_error(c, RPC_E_UNAUTHORIZED, NULL,
				   "a session token begins turns of its "
				   "own session only");
			return;
		}
		session = who->session_id;
	}
	if (session) {
		r = spd->sessions ? session_usable(spd->sessions, session)
				  : -ENOENT;
		if (r == -ECANCELED) {
			call_error(c, RPC_E_ATTEMPT_ENDED, NULL,
				   "session %s: the attempt ended", session);
			return;
		}
		if (r < 0) {
			call_error(c, RPC_E_BAD_PARAMS, NULL,
				   "no active session %s", session);
			return;
		}
		if (strlen(session) >= sizeof(t->session)) {
			call_error(c, RPC_E_BAD_PARAMS, NULL,
				   "session id too long");
			return;
		}
	}
	/* A session token may lower its cap, never raise it past the
	 * default; only the operator goes up to cap-max. */
	limit = who->operator? b->cfg.cap_max : b->cfg.cap_default;
	cap = b->cfg.cap_default;
	if (capv && usd_param(capv, &cap) < 0) {
		call_error(c, RPC_E_BAD_PARAMS, NULL,
			   "cap_usd must be a positive number of USD");
		return;
	}
	if (cap > limit) {
		price_format_usd(limit, capbuf, sizeof(capbuf));
		call_error(c, RPC_E_BAD_PARAMS,
			   json_pack("{s:f}", "cap_max_usd", price_usd(limit)),
			   "cap_usd is above %s USD, the most %s (spd.conf "
			   "broker.%s)",
			   capbuf,
			   who->operator? "any turn may have"
					: "a session token may ask for",
			   who->operator? "cap-max" : "cap-default");
		return;
	}
	r = mint(b, session, cap, key, &t);
	if (r == -EDQUOT) {
		call_error(c, RPC_E_LIMIT, json_pack("{s:s}", "quota", "turns"),
			   "%d turns are live: end some first",
			   BROKER_TURNS_MAX);
		return;
	}
	if (r == -ENOSPC) {
		price_format_usd(b->cfg.session_cap, capbuf, sizeof(capbuf));
		call_error(c, RPC_E_BUDGET_EXCEEDED,
			   json_pack("{s:f}", "session_cap_usd",
				     price_usd(b->cfg.session_cap)),
			   "session %s has spent its budget of %s USD across "
			   "its turns (spd.conf broker.session-cap)",
			   session, capbuf);
		return;
	}
	if (r < 0) {
		call_error(c, RPC_E_INTERNAL, NULL, "out of memory");
		return;
	}
	price_format_usd(cap, capbuf, sizeof(capbuf));
	call_set_summary(c, "%s, cap %s USD", t->id, capbuf);
	snprintf(oai, sizeof(oai), "%s/v1", b->base_url);
	call_reply(
	    c, json_pack("{s:s, s:s, s:I, s:f, s:s?, s:s?, s:s, s:s?}", "turn",
			 t->id, "key", key, "expires",
			 (json_int_t)(now / 1000000u + b->cfg.idle_timeout_s),
			 "cap_usd", price_usd(cap), "anthropic_base_url",
			 b->base_url[0] ? b->base_url : NULL, "openai_base_url",
			 b->base_url[0] ? oai : NULL, "socket", b->sock_path,
			 "session", t->session[0] ? t->session : NULL));
	/* From now on the key is redacted wherever it would appear: after
	 * the reply that shows it once has gone out.  A key that cannot be
	 * redacted is revoked at once. */
	key_name(t, name, sizeof(name));
	if (secrets_add_minted(spd, name, key) < 0) {
		log_warn("broker: %s's key could not join the redaction set: "
			 "revoked",
			 t->id);
		end_turn(b, t, "not redactable");
	}
	sodium_memzero(key, sizeof(key));
}

/* The turn a call names, if the caller may see it: the operator any, a
 * session token its own session's only (another's is "no such turn", so
 * that ids cannot be probed). */
static struct broker_turn *visible_turn(struct call *c, const char *id)
{
	const struct call_principal *who = call_principal(c);
	struct broker_turn *t = broker_turn_by_id(call_spd(c), id);

	if (t && !who->operator&&(!who->session_id ||
				  strcmp(t->session, who->session_id) != 0))
		t = NULL;
	if (!t)
		call_error(c, RPC_E_BAD_PARAMS, NULL, "no such turn %s", id);
	return t;
}

void m_turn_end(struct call *c)
{
	struct broker *b = B(call_spd(c));
	const char *id =
	    json_string_value(json_object_get(call_params(c), "turn"));
	struct broker_turn *t;

	if (!b) {
		call_error(c, RPC_E_INTERNAL, NULL,
			   "the model broker is not running");
		return;
	}
	t = visible_turn(c, id);
	if (!t)
		return;
	end_turn(b, t, "ended");
	call_set_summary(c, "%s", t->id);
	call_reply(c, turn_json(t));
}

void m_turn_list(struct call *c)
{
	struct broker *b = B(call_spd(c));
	const struct call_principal *who = call_principal(c);
	const char *session =
	    json_string_value(json_object_get(call_params(c), "session"));
	json_t *a = json_array();
	uint64_t now = now_us();

	if (!who->operator)
		session = who->session_id;
	for (size_t i = 0; b && i < b->n_turns; i++) {
		struct broker_turn *t = b->turns[i];

		if (!t->ended && expired(b, t, now))
			end_turn(b, t, "idle");
		if (session && strcmp(t->session, session) != 0)
			continue;
		json_array_append_new(a, turn_json(t));
	}
	call_reply(c, json_pack("{s:o, s:s}", "turns", a, "prices",
				b ? b->cfg.prices.hash : ""));
}

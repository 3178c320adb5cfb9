/*
 * The gate before every agent call (daemon/methods/gate.h): the policy's
 * decision, the pending asks a person decides, the one-shot grants pinned
 * to what was approved, and approval.list / approval.decide.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "daemon/transport/handlers.h"
#include "daemon/transport/call.h"
#include "daemon/methods/gate.h"
#include "daemon/journal/journal.h"
#include "daemon/log.h"
#include "daemon/proxy/proxy.h"
#include "daemon/session/session.h"
#include "daemon/spd.h"
#include "common/paths.h"
#include "common/utf8.h"
#include "common/util.h"

/*
 * Who waits for a pending ask: an RPC call (cont or drop finish it), or
 * something inside spd without a caller (decided: a proxy connection),
 * or nobody (the caller did not wait; the grant will wait for it).
 */
struct waiter {
	struct call *call;
	gate_cont_fn cont;
	gate_drop_fn drop;
	gate_decided_fn decided;
	void *data;
};

struct pending {
	struct pending *next;
	uint64_t id;
	struct approvals *ap;
	char session[SESSION_ID_LEN + 1]; /* "" for the operator's calls */
	char key[65];
	json_t *object; /* what is asked, for the person */
	const char *rule;
	char reason[POLICY_REASON_MAX];
	struct waiter w;  /* empty when the caller asked not to wait */
	bool grant_after; /* gate_call's: an approval leaves a grant too */
	uv_timer_t timer;
	bool timer_on;
};

struct grant {
	struct grant *next;
	char session[SESSION_ID_LEN + 1];
	char key[65];
	uint64_t expires;  /* uv_now: unused by then, it is dropped */
	uint64_t approval; /* the approval that granted it */
};

struct counter {
	struct counter *next;
	char session[SESSION_ID_LEN + 1];
	unsigned prompts;
	unsigned denials; /* in a row */
};

struct follower {
	struct follower *next;
	struct call *call;
	struct approvals *ap;
};

/* A file as last read: a change to it (a write changes ctime, which no
 * caller can set back) is seen with one stat, and the file opened only
 * then. */
struct file_id {
	bool exists;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
};

/* The policy of one workspace, built from spd.conf and its .spd.conf as
 * they were when last read (gate_policy_conf). */
struct conf_cache {
	char *workspace;
	struct file_id op, proj;
	struct policy_conf *conf;
	uint64_t used; /* a counter: the least recently used goes first */
};

struct approvals {
	struct spd *spd;
	struct conf_cache confs[GATE_CONF_CACHE];
	uint64_t conf_tick;
	struct pending *pending;
	unsigned n_pending;
	struct grant *grants;
	struct counter *counters;
	struct follower *followers;
	uint64_t next_id;
};

static void file_id_of(const char *path, struct file_id *id)
{
	struct stat st;

	memset(id, 0, sizeof(*id));
	if (!path || stat(path, &st) < 0)
		return;
	*id = (struct file_id){true,	   st.st_dev,  st.st_ino,
			       st.st_size, st.st_mtim, st.st_ctim};
}

static bool file_racy(const struct file_id *id)
{
	struct timespec now;

	if (!id->exists || clock_gettime(CLOCK_REALTIME, &now) < 0)
		return false;
	return id->mtime.tv_sec >= now.tv_sec - GATE_CONF_QUIET_S ||
	       id->ctime.tv_sec >= now.tv_sec - GATE_CONF_QUIET_S;
}

static bool file_id_eq(const struct file_id *a, const struct file_id *b)
{
	if (a->exists != b->exists)
		return false;
	return !a->exists ||
	       (a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
		a->mtime.tv_sec == b->mtime.tv_sec &&
		a->mtime.tv_nsec == b->mtime.tv_nsec &&
		a->ctime.tv_sec == b->ctime.tv_sec &&
		a->ctime.tv_nsec == b->ctime.tv_nsec);
}

/* The cached policy of ws when neither file changed since it was read
 * (a new reference), else NULL and the slot to read it into. */
static struct policy_conf *conf_cached(struct approvals *ap, const char *ws,
				       const struct file_id *op,
				       const struct file_id *proj,
				       struct conf_cache **slot)
{
	struct conf_cache *lru = &ap->confs[0];

	for (size_t i = 0; i < GATE_CONF_CACHE; i++) {
		struct conf_cache *e = &ap->confs[i];

		if (e->workspace && strcmp(e->workspace, ws) == 0) {
			*slot = e;
			if (!file_id_eq(&e->op, op) ||
			    !file_id_eq(&e->proj, proj))
				return NULL;
			e->used = ++ap->conf_tick;
			return policy_conf_ref(e->conf);
		}
		if (e->used < lru->used)
			lru = e;
	}
	*slot = lru;
	return NULL;
}

static void conf_cache_drop(struct conf_cache *e)
{
	free(e->workspace);
	policy_conf_free(e->conf);
	memset(e, 0, sizeof(*e));
}

/* Read spd.conf and ws's .spd.conf into a new policy; 0 or -errno with
 * *ret_what naming the file that failed. */
static int conf_read(struct spd *spd, const char *ws, struct policy_conf *conf,
		     const char **ret_what)
{
	char *proj;
	int r;

	if (spd && spd->paths.conf_path) {
		r = policy_conf_load(conf, POLICY_LAYER_OPERATOR,
				     spd->paths.conf_path);
		if (r < 0 && r != -ENOENT) {
			*ret_what = "spd.conf";
			return r;
		}
	}
	proj = paths_join(ws, ".spd.conf");
	if (!proj)
		return -ENOMEM;
	r = policy_conf_load(conf, POLICY_LAYER_PROJECT, proj);
	free(proj);
	if (r < 0 && r != -ENOENT) {
		*ret_what = ".spd.conf";
		return r;
	}
	return 0;
}

int gate_policy_conf(struct spd *spd, const char *ws, struct policy_conf **ret,
		     const char **ret_what, char *errbuf, size_t errlen)
{
	struct approvals *ap = spd ? spd->approvals : NULL;
	struct conf_cache *slot = NULL;
	struct file_id op, proj;
	struct policy_conf *conf;
	char *projpath;
	int r;

	/* Identities first: a change after these stats changes them again,
	 * so what is read below is never kept past its file's next change. */
	file_id_of(spd ? spd->paths.conf_path : NULL, &op);
	projpath = paths_join(ws, ".spd.conf");
	if (!projpath)
		return -ENOMEM;
	file_id_of(projpath, &proj);
	free(projpath);
	if (ap && (conf = conf_cached(ap, ws, &op, &proj, &slot))) {
		*ret = conf;
		return 0;
	}
	conf = policy_conf_new();
	if (!conf)
		return -ENOMEM;
	r = conf_read(spd, ws, conf, ret_what);
	if (r < 0)
		goto fail;
	/* A file changed within the last seconds may change again within
	 * its file system's timestamp granularity, keeping size and times:
	 * it is read again until it has been quiet (git's "racy clean"). */
	if (slot && !file_racy(&op) && !file_racy(&proj)) {
		char *w = strdup(ws);

		conf_cache_drop(slot);
		if (w)
			*slot = (struct conf_cache){w, op, proj,
						    policy_conf_ref(conf),
						    ++ap->conf_tick};
	}
	*ret = conf;
	return 0;
fail:
	if (policy_conf_error(conf)[0])
		snprintf(errbuf, errlen, "%s", policy_conf_error(conf));
	else
		snprintf(errbuf, errlen,
			 "cannot read the policy configuration %s: %s",
			 *ret_what ? *ret_what : "", strerror(-r));
	policy_conf_free(conf);
	return r;
}

static struct counter *counter_of(struct approvals *ap, const char *session)
{
	struct counter *c;

	for (c = ap->counters; c; c = c->next)
		if (strcmp(c->session, session) == 0)
			return c;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	snprintf(c->session, sizeof(c->session), "%s", session);
	c->next = ap->counters;
	ap->counters = c;
	return c;
}

static void journal_decision(struct spd *spd, const char *session,
			     const char *kind, const char *rule,
			     const char *reason, json_t *object)
{
	json_t *d = json_pack("{s:s, s:s, s:O?}", "rule", rule, "reason",
			      reason, "object", object);
	char *text = d ? json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	char sum[POLICY_REASON_MAX + 64];

	if (!spd->journal) {
		free(text);
		json_decref(d);
		return;
	}
	snprintf(sum, sizeof(sum), "%s: %s", rule, reason);
	journal_append(spd->journal, session && session[0] ? session : NULL,
		       "spd", kind, sum, text);
	free(text);
	json_decref(d);
}

/* A denied call: counts toward the three-in-a-row rule of its session. */
static void deny(struct approvals *ap, struct call *c, const char *session,
		 const char *rule, const char *reason, json_t *object,
		 enum rpc_error code)
{
	struct spd *spd = ap->spd;
	struct counter *ctr = session ? counter_of(ap, session) : NULL;

	journal_decision(spd, session, "policy.deny", rule, reason, object);
	if (session && spd->sessions)
		session_note_policy_block(spd->sessions, session, rule);
	if (ctr && ++ctr->denials >= GATE_DENIALS_MAX && spd->sessions) {
		char why[128];
		snprintf(why, sizeof(why), "%u denied calls in a row",
			 ctr->denials);
		session_end_attempt(spd->sessions, session, "POLICY-DENIED",
				    why);
		call_error(
		    c, RPC_E_ATTEMPT_ENDED,
		    json_pack("{s:s, s:s}", "rule", rule, "reason", reason),
		    "%s (%s); %s: the session's attempt ended", reason, rule,
		    why);
		return;
	}
	if (c)
		call_error(
		    c, code,
		    json_pack("{s:s, s:s}", "rule", rule, "reason", reason),
		    "%s (%s)", reason, rule);
}

/* The hex BLAKE2b-256 of what remains to be read from fd. */
static int hash_fd(int fd, char out[65])
{
	crypto_generichash_state st;
	unsigned char buf[65536], h[32];
	ssize_t n;

	crypto_generichash_init(&st, NULL, 0, sizeof(h));
	while ((n = read(fd, buf, sizeof(buf))) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		crypto_generichash_update(&st, buf, (size_t)n);
	}
	crypto_generichash_final(&st, h, sizeof(h));
	sodium_bin2hex(out, 65, h, sizeof(h));
	return 0;
}

/* path relative to root when it lies strictly below root, else NULL. */
static const char *below(const char *path, const char *root)
{
	size_t n = strlen(root);

	if (n > 0 && root[n - 1] == '/')
		n--;
	if (strncmp(path, root, n) != 0 || path[n] != '/' || !path[n + 1])
		return NULL;
	return path + n + 1;
}

/*
 * Pin arg (relative to base) when it names a regular file inside the
 * workspace ws: append {path, size, blake2b} to pins (size and mtime_ns
 * instead of the hash for a file over GATE_PIN_HASH_MAX).  Anything
 * else — a word that is no file, a file outside, a device — is not
 * pinned: the policy already judged it by name.
 */
static void pin_file(json_t *pins, const char *ws, const char *base,
		     const char *arg)
{
	_cleanup_free_ char *joined = NULL, *real = NULL;
	_cleanup_close_ int fd = -1;
	const char *rel;
	struct stat st;
	char hex[65];
	json_t *e;

	if (!arg || !arg[0] || json_array_size(pins) >= GATE_PIN_FILES_MAX)
		return;
	joined = arg[0] == '/' ? strdup(arg) : paths_join(base, arg);
	if (!joined || !(real = realpath(joined, NULL)) ||
	    !(rel = below(real, ws)))
		return;
	for (size_t i = 0; i < json_array_size(pins); i++)
		if (strcmp(json_string_value(
			       json_object_get(json_array_get(pins, i), "path"))
			       ?: "",
			   rel) == 0)
			return;
	/* O_NONBLOCK: a FIFO named in argv must not hang the loop. */
	fd = open(real,
		  O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return;
	if (st.st_size <= (off_t)GATE_PIN_HASH_MAX && hash_fd(fd, hex) == 0)
		e = json_pack("{s:s, s:I, s:s}", "path", rel, "size",
			      (json_int_t)st.st_size, "blake2b", hex);
	else
		e = json_pack("{s:s, s:I, s:I}", "path", rel, "size",
			      (json_int_t)st.st_size, "mtime_ns",
			      (json_int_t)st.st_mtim.tv_sec * 1000000000 +
				  st.st_mtim.tv_nsec);
	if (e)
		json_array_append_new(pins, e);
}

/*
 * The workspace files a run's grant pins: the executable when it lies in
 * the workspace, and every argv word that names a regular file there (a
 * script for sh, python, node...; any of them may be code).  Computed
 * from the asked object itself, so the ask and every later use of its
 * grant hash the same names the same way.  Never NULL unless out of
 * memory.
 */
static json_t *run_pins(json_t *object)
{
	const char *ws =
	    json_string_value(json_object_get(object, "workspace"));
	const char *cwd = json_string_value(json_object_get(object, "cwd"));
	json_t *argv = json_object_get(object, "argv");
	json_t *pins = json_array();

	if (!pins || !ws)
		return pins;
	pin_file(pins, ws, ws,
		 json_string_value(json_object_get(object, "exe")));
	for (size_t i = 0; i < json_array_size(argv); i++)
		pin_file(pins, ws, cwd ? cwd : ws,
			 json_string_value(json_array_get(argv, i)));
	return pins;
}

/* fs.write's content as the person sees it and the grant pins it: its
 * size, hash and first line (up to GATE_PREVIEW_MAX bytes). */
static json_t *content_pin(const char *data, size_t len)
{
	unsigned char h[32];
	char hex[65];
	size_t n = 0;

	crypto_generichash(h, sizeof(h), (const unsigned char *)data, len, NULL,
			   0);
	sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
	while (n < len && n < GATE_PREVIEW_MAX && data[n] != '\n')
		n++;
	/* A cut inside a UTF-8 sequence, or binary bytes: shorten until
	 * JSON can carry it; the hash still covers every byte. */
	while (n > 0 && !utf8_valid(data, n))
		n--;
	return json_pack("{s:I, s:s, s:s%, s:b}", "size", (json_int_t)len,
			 "blake2b", hex, "preview", data, n, "preview_complete",
			 n == len);
}

static json_t *object_json(const struct gate_call *g,
			   const struct policy_result *res)
{
	json_t *paths = json_array();
	/* A cwd that is the workspace is no cwd (gate.h): one object, and
	 * one grant key, for the same call however its cwd was given. */
	const char *cwd =
	    g->cwd && !(g->workspace && strcmp(g->cwd, g->workspace) == 0)
		? g->cwd
		: NULL;
	json_t *o;

	for (size_t i = 0; i < res->n_paths; i++)
		json_array_append_new(paths, json_string(res->paths[i]));
	o = json_pack("{s:s, s:O?, s:O?, s:s?, s:s?, s:s?, s:s?, s:o, s:s, "
		      "s:s}",
		      "kind",
		      g->kind == POLICY_CALL_EXEC   ? "exec"
		      : g->kind == POLICY_CALL_READ ? "read"
						    : "write",
		      "argv", g->argv, "env", g->env, "cwd", cwd, "path",
		      g->path, "path2", g->path2, "exe", res->exe, "paths",
		      paths, "net",
		      g->net_name		      ? g->net_name
		      : g->net == POLICY_NET_HOST     ? "host"
		      : g->net == POLICY_NET_LOOPBACK ? "loopback"
						      : "none",
		      "workspace", g->workspace);
	if (!o)
		return NULL;
	/* The content decides what a write or a script does: the grant
	 * covers it, and the person sees its hash and first line. */
	if (g->content &&
	    json_object_set_new(o, "content",
				content_pin(g->content, g->content_len)) < 0)
		goto fail;
	if (g->kind == POLICY_CALL_EXEC &&
	    json_object_set_new(o, "files", run_pins(o)) < 0)
		goto fail;
	return o;
fail:
	json_decref(o);
	return NULL;
}

/* True when the files o pins still hold what they held at the ask. */
static bool pins_current(json_t *o)
{
	json_t *was = json_object_get(o, "files");
	json_t *now;
	bool same;

	if (!was)
		return true;
	now = run_pins(o);
	same = now && json_equal(was, now);
	json_decref(now);
	return same;
}

/* The identity of a resolved object: BLAKE2b over its canonical JSON. */
static void object_key(const char *session, json_t *object, char out[65])
{
	char *text = json_dumps(object, JSON_COMPACT | JSON_SORT_KEYS);
	unsigned char h[32];
	crypto_generichash_state st;

	crypto_generichash_init(&st, NULL, 0, sizeof(h));
	crypto_generichash_update(&st, (const unsigned char *)session,
				  strlen(session) + 1);
	if (text)
		crypto_generichash_update(&st, (const unsigned char *)text,
					  strlen(text));
	crypto_generichash_final(&st, h, sizeof(h));
	sodium_bin2hex(out, 65, h, sizeof(h));
	free(text);
}

/* The grant for this exact call, taken (1); or none (0), or one that
 * outlived [limits] grant-lifetime unused (-1: dropped, as every other
 * such grant met on the way). */
static int take_grant(struct approvals *ap, const char *session,
		      const char *key, uint64_t *approval)
{
	uint64_t now = uv_now(ap->spd->loop);
	int r = 0;

	for (struct grant **pp = &ap->grants; *pp;) {
		struct grant *g = *pp;
		bool match = strcmp(g->session, session) == 0 &&
			     strcmp(g->key, key) == 0;

		if (now >= g->expires) {
			*pp = g->next;
			free(g);
			if (match && r == 0)
				r = -1;
			continue;
		}
		if (match) {
			*approval = g->approval;
			*pp = g->next;
			free(g);
			return 1;
		}
		pp = &g->next;
	}
	return r;
}

static json_t *pending_json(const struct pending *p)
{
	return json_pack("{s:I, s:s?, s:s, s:s, s:O, s:b}", "id",
			 (json_int_t)p->id, "session",
			 p->session[0] ? p->session : NULL, "rule", p->rule,
			 "reason", p->reason, "object", p->object, "waiting",
			 p->w.call || p->w.decided);
}

/* Take p's waiter out of it (the call no longer watched for going
 * away), to finish it once p is gone. */
static struct waiter waiter_take(struct pending *p)
{
	struct waiter w = p->w;

	p->w = (struct waiter){0};
	if (w.call)
		call_on_gone(w.call, NULL, NULL);
	return w;
}

/* The person approved: the waiter goes on. */
static void waiter_proceed(struct waiter *w)
{
	if (w->call)
		w->cont(w->call, w->data);
	else if (w->decided)
		w->decided(w->data, true, NULL);
}

/* The waiter is refused: a call fails with code and the message, a
 * waiter inside spd hears the message as its reason. */
static void waiter_refuse(struct waiter *w, enum rpc_error code,
			  const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void waiter_refuse(struct waiter *w, enum rpc_error code,
			  const char *fmt, ...)
{
	char why[POLICY_REASON_MAX + 128];
	va_list ap;

	if (!w->call && !w->decided)
		return;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (w->call) {
		call_error(w->call, code, NULL, "%s", why);
		w->drop(w->data);
	} else {
		w->decided(w->data, false, why);
	}
}

static void pending_closed(uv_handle_t *h)
{
	struct pending *p = h->data;

	json_decref(p->object);
	free(p);
}

/* Unlink and free p (its timer closed first). */
static void pending_free(struct pending *p)
{
	struct approvals *ap = p->ap;

	for (struct pending **pp = &ap->pending; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			ap->n_pending--;
			break;
		}
	if (p->timer_on) {
		uv_timer_stop(&p->timer);
		uv_close((uv_handle_t *)&p->timer, pending_closed);
	} else {
		pending_closed((uv_handle_t *)&p->timer);
	}
}

/* How long an ask waits for a person: spd.conf's, else the default. */
static uint32_t wait_ms(const struct spd *spd)
{
	return spd->config.approval_timeout_ms ? spd->config.approval_timeout_ms
					       : GATE_WAIT_MS;
}

/* Tell the followers (spctl approvals --follow, an editor's approvals
 * list) that p is no longer pending: decided, as approval.decide answers
 * ("approved", "refused", "stale"), or withdrawn; its reason in words. */
static void pending_tell(struct pending *p, enum rpc_notify n,
			 const char *decision, const char *reason)
{
	json_t *note =
	    json_pack("{s:I, s:s?, s:s?, s:s}", "id", (json_int_t)p->id,
		      "session", p->session[0] ? p->session : NULL, "decision",
		      decision, "reason", reason);

	for (struct follower *f = p->ap->followers; f && note; f = f->next)
		call_notify(f->call, n, json_incref(note));
	json_decref(note);
}

/* Refuse p for a reason no person gave; the followers see it refused, or
 * withdrawn when nobody waits for the answer any more. */
static void pending_refuse(struct pending *p, const char *why, bool withdrawn)
{
	struct waiter w = waiter_take(p);

	journal_decision(p->ap->spd, p->session, "approval.refused", p->rule,
			 why, p->object);
	if (withdrawn)
		pending_tell(p, RPC_N_APPROVAL_WITHDRAWN, NULL, why);
	else
		pending_tell(p, RPC_N_APPROVAL_DECIDED, "refused", why);
	pending_free(p);
	waiter_refuse(&w, RPC_E_APPROVAL_REFUSED, "%s", why);
}

static void on_timeout(uv_timer_t *t)
{
	struct pending *p = t->data;
	char why[128];

	snprintf(why, sizeof(why),
		 "no decision in %u s (spd.conf [approvals] timeout)",
		 wait_ms(p->ap->spd) / 1000u);
	pending_refuse(p, why, false);
}

static void on_waiter_gone(void *data)
{
	pending_refuse(data, "the client went away", true);
}

/* The argv and environment of an exec call, as the classifier takes them
 * (borrowed strings, owned arrays). */
struct exec_args {
	const char **argv, **env;
	size_t *argv_len, envc;
	char **env_owned;
};

static void exec_args_free(struct exec_args *a)
{
	free(a->argv);
	free(a->argv_len);
	for (size_t i = 0; a->env_owned && i < a->envc; i++)
		free(a->env_owned[i]);
	free(a->env_owned);
	free(a->env);
}

/* Fill call's argv and env from g's JSON (borrowed; freed with a).
 * Returns 0 or -ENOMEM. */
static int exec_args_fill(const struct gate_call *g, struct exec_args *a,
			  struct policy_call *call)
{
	size_t n = json_array_size(g->argv);
	const char *k;
	json_t *v;

	a->argv = calloc(n + 1, sizeof(*a->argv));
	a->argv_len = calloc(n + 1, sizeof(*a->argv_len));
	a->env_owned = calloc(json_object_size(g->env) + 1, sizeof(char *));
	a->env = calloc(json_object_size(g->env) + 1, sizeof(*a->env));
	if (!a->argv || !a->argv_len || !a->env_owned || !a->env)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		a->argv[i] = json_string_value(json_array_get(g->argv, i));
		a->argv_len[i] = json_string_length(json_array_get(g->argv, i));
		if (!a->argv[i])
			a->argv[i] = "";
	}
	json_object_foreach(g->env, k, v)
	{
		if (asprintf(&a->env_owned[a->envc], "%s=%s", k,
			     json_string_value(v) ?: "") < 0)
			return -ENOMEM;
		a->env[a->envc] = a->env_owned[a->envc];
		a->envc++;
	}
	call->argv = a->argv;
	call->argv_len = a->argv_len;
	call->argc = n;
	call->env = a->env;
	call->envc = a->envc;
	return 0;
}

static bool push_inspected(void *data, const char *host)
{
	return proxy_terminates(&((struct spd *)data)->config, host);
}

void gate_push_context(struct spd *spd, struct policy_context *ctx,
		       const char *net_name, const char *session_id)
{
	if (!session_id || !net_name || strcmp(net_name, "proxy") != 0)
		return;
	ctx->push_inspected = push_inspected;
	ctx->push_inspected_data = spd;
}

/*
 * Classify g under conf: an exec call's argv and env, or a file call's
 * path (and, for fs.move, its second path: the stricter decision wins).
 * Fills *ret (free with policy_result_free) and returns 0, or -errno.
 */
static int gate_classify(struct spd *spd, const struct policy_conf *conf,
			 const struct gate_call *g, struct policy_result *ret)
{
	struct policy_context ctx = {0};
	struct policy_call call = {0};
	struct policy_result res = {0};
	struct exec_args a = {0};
	int r;

	ctx.workspace = g->workspace;
	ctx.in_place = g->in_place;
	ctx.worktree_session = g->session_id && !g->in_place;
	/* The PATH the run searches, and the places a run can write: a
	 * program found there is the agent's, never trusted by name. */
	ctx.path_env = POLICY_DEFAULT_PATH;
	ctx.writable = (const char *const *)spd->config.writable;
	ctx.hidden = (const char *const *)spd->config.hidden;
	gate_push_context(spd, &ctx, g->net_name, g->session_id);
	call.kind = g->kind;
	call.net = g->net;
	call.cwd = g->cwd;
	if (g->kind == POLICY_CALL_EXEC) {
		if ((r = exec_args_fill(g, &a, &call)) < 0)
			goto out;
	} else {
		call.path = g->path;
	}
	r = policy_classify(conf, &ctx, &call, &res);
	if (r == 0 && g->path2 && res.decision != POLICY_DENY &&
	    res.decision != POLICY_BAD_REQUEST) {
		struct policy_result res2 = {0};

		call.path = g->path2;
		if (policy_classify(conf, &ctx, &call, &res2) == 0 &&
		    res2.decision > res.decision) {
			policy_result_free(&res);
			res = res2;
		} else {
			policy_result_free(&res2);
		}
	}
	if (r == 0)
		*ret = res;
	else
		policy_result_free(&res);
out:
	exec_args_free(&a);
	return r;
}

/* A grant or an allow resets the session's run of denials. */
static void denials_reset(struct approvals *ap, const char *session_id)
{
	struct counter *ctr = session_id ? counter_of(ap, session_id) : NULL;

	if (ctr)
		ctr->denials = 0;
}

/*
 * The operator pre-approved the ask ("yes"): with the pin of the
 * NEEDS-APPROVAL it answered, the call must still be the one shown.
 * Continues or refuses the call.
 */
static void ask_answered_yes(struct call *c, const struct gate_call *g,
			     const struct policy_result *res, json_t *object,
			     const char *key, gate_cont_fn cont,
			     gate_drop_fn drop, void *data)
{
	struct spd *spd = call_spd(c);
	struct approvals *ap = spd->approvals;
	const char *session = g->session_id ? g->session_id : "";
	const char *pin =
	    json_string_value(json_object_get(call_params(c), "pin"));

	/* The person answered y to what the NEEDS-APPROVAL showed (its
	 * "pin"): when a pinned file changed since, the answer is not for
	 * this call. */
	if (pin && strcmp(pin, key) != 0) {
		journal_decision(spd, session, "approval.refused", res->rule,
				 "the call changed since the person answered",
				 object);
		call_error(c, RPC_E_APPROVAL_REFUSED,
			   json_pack("{s:s, s:O}", "rule", res->rule, "object",
				     object),
			   "what was approved changed before it ran (a "
			   "pinned file differs): ask again");
		drop(data);
		return;
	}
	/* The operator answered at the terminal: the earlier NEEDS-APPROVAL
	 * for this same call is settled. */
	for (struct pending *q = ap->pending, *nx; q; q = nx) {
		nx = q->next;
		if (!q->w.call && !q->w.decided &&
		    strcmp(q->session, session) == 0 &&
		    strcmp(q->key, key) == 0)
			pending_free(q);
	}
	journal_decision(spd, session, "approval.granted", res->rule,
			 "approved in advance by the operator (yes)", object);
	call_add_detail(c, json_pack("{s:s}", "approved", "operator-yes"));
	cont(c, data);
}

/*
 * A new pending ask of session ("" for the operator's), not yet
 * announced.  Returns it, or NULL with -EAGAIN in *err when
 * GATE_PENDING_MAX are pending, or -ENOMEM.
 */
static struct pending *pending_new(struct approvals *ap, const char *session,
				   const char *key, json_t *object,
				   const char *rule, const char *reason,
				   int *err)
{
	struct pending *p;

	if (ap->n_pending >= GATE_PENDING_MAX) {
		*err = -EAGAIN;
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		*err = -ENOMEM;
		return NULL;
	}
	p->id = ++ap->next_id;
	p->ap = ap;
	snprintf(p->session, sizeof(p->session), "%s", session);
	memcpy(p->key, key, sizeof(p->key));
	p->object = json_incref(object);
	p->rule = rule;
	snprintf(p->reason, sizeof(p->reason), "%s", reason);
	p->timer.data = p;
	p->next = ap->pending;
	ap->pending = p;
	ap->n_pending++;
	return p;
}

/* Journal p and announce it to the followers (once its waiter, if any,
 * is in place: they see whether someone waits). */
static void pending_announce(struct pending *p)
{
	json_t *note;

	journal_decision(p->ap->spd, p->session, "approval.requested", p->rule,
			 p->reason, p->object);
	note = pending_json(p);
	for (struct follower *f = p->ap->followers; f; f = f->next)
		call_notify(f->call, RPC_N_APPROVAL_REQUESTED,
			    json_incref(note));
	json_decref(note);
}

/* p now has its waiter: it waits wait_ms for a person. */
static void pending_wait(struct pending *p, const struct waiter *w)
{
	p->w = *w;
	uv_timer_init(p->ap->spd->loop, &p->timer);
	p->timer_on = true;
	uv_timer_start(&p->timer, on_timeout, wait_ms(p->ap->spd), 0);
	if (w->call)
		call_on_gone(w->call, on_waiter_gone, p);
}

/*
 * An ask nobody has answered yet: a pending approval, announced to the
 * followers; the call waits for it (or, without wait, gets NEEDS-APPROVAL
 * naming it).
 */
static void ask_pend(struct call *c, const struct gate_call *g,
		     const struct policy_result *res, json_t *object,
		     const char *key, bool wait, gate_cont_fn cont,
		     gate_drop_fn drop, void *data)
{
	struct approvals *ap = call_spd(c)->approvals;
	const char *session = g->session_id ? g->session_id : "";
	struct pending *p;
	int r = 0;

	p = pending_new(ap, session, key, object, res->rule, res->reason, &r);
	if (!p && r == -EAGAIN) {
		deny(ap, c, g->session_id, "deny.pending-limit",
		     "too many approvals are pending", object,
		     RPC_E_POLICY_DENIED);
		drop(data);
		return;
	}
	if (!p) {
		call_error(c, RPC_E_INTERNAL, NULL, "out of memory");
		drop(data);
		return;
	}
	p->grant_after = g->grant_after;
	if (!wait) {
		pending_announce(p);
		call_error(c, RPC_E_NEEDS_APPROVAL,
			   json_pack("{s:I, s:s, s:s}", "approval",
				     (json_int_t)p->id, "rule", res->rule,
				     "reason", res->reason),
			   "%s (%s): approval %" PRIu64 " is pending",
			   res->reason, res->rule, p->id);
		drop(data);
		return;
	}
	pending_wait(p,
		     &(struct waiter){
			 .call = c, .cont = cont, .drop = drop, .data = data});
	pending_announce(p);
	/* The waiting caller learns its ask's id too: a front end (spctl
	 * mcp) tells its user which `spctl approve` frees it, or decides it
	 * through its own client. */
	call_notify(c, RPC_N_APPROVAL_REQUESTED, pending_json(p));
}

/* The policy said ask: a pre-approval, a grant, the prompt budget, the
 * operator's own terminal, or a pending approval decides what happens. */
static void gate_ask(struct call *c, const struct gate_call *g,
		     const struct policy_result *res, json_t *object,
		     gate_cont_fn cont, gate_drop_fn drop, void *data)
{
	struct spd *spd = call_spd(c);
	struct approvals *ap = spd->approvals;
	json_t *params = call_params(c);
	const char *session = g->session_id ? g->session_id : "";
	bool wait = !json_is_false(json_object_get(params, "wait"));
	uint64_t granted = 0;
	char key[65];

	object_key(session, object, key);
	if (json_is_true(json_object_get(params, "yes"))) {
		ask_answered_yes(c, g, res, object, key, cont, drop, data);
		return;
	}
	switch (take_grant(ap, session, key, &granted)) {
	case 1:
		denials_reset(ap, g->session_id);
		journal_decision(
		    spd, session, "approval.used", res->rule,
		    "a person's grant for this exact call, used once", object);
		call_add_detail(c, json_pack("{s:s, s:I}", "approved", "grant",
					     "approval", (json_int_t)granted));
		cont(c, data);
		return;
	case -1:
		/* Approved ahead, but not used in time: ask again. */
		journal_decision(spd, session, "approval.expired", res->rule,
				 "a person's grant for this exact call was "
				 "not used in time ([limits] grant-lifetime)",
				 object);
		break;
	default:
		break;
	}
	if (g->session_id) {
		struct counter *ctr = counter_of(ap, g->session_id);

		if (ctr && ctr->prompts >= GATE_PROMPTS_MAX) {
			deny(ap, c, g->session_id, "deny.prompt-budget",
			     "the session has used all its prompts", object,
			     RPC_E_POLICY_DENIED);
			drop(data);
			return;
		}
		if (ctr)
			ctr->prompts++;
	}
	if (!g->session_id && !wait) {
		/* The operator's own call, answered at the terminal (spctl
		 * asks y/N and sends it again with "yes"): nothing to keep
		 * pending.  The object is what the person's y/N decides on;
		 * the pin comes back with the "yes". */
		journal_decision(spd, session, "approval.needed", res->rule,
				 res->reason, object);
		call_error(c, RPC_E_NEEDS_APPROVAL,
			   json_pack("{s:s, s:s, s:O, s:s}", "rule", res->rule,
				     "reason", res->reason, "object", object,
				     "pin", key),
			   "%s (%s)", res->reason, res->rule);
		drop(data);
		return;
	}
	ask_pend(c, g, res, object, key, wait, cont, drop, data);
}

void gate_check(struct call *c, const struct gate_call *g, gate_cont_fn cont,
		gate_drop_fn drop, void *data)
{
	struct spd *spd = call_spd(c);
	struct approvals *ap = spd->approvals;
	const struct call_principal *who = call_principal(c);
	struct policy_conf *conf = NULL;
	struct policy_result res = {0};
	const char *what = "";
	char why[600];
	json_t *object = NULL;
	int r;

	if (!ap) {
		call_error(c, RPC_E_INTERNAL, NULL, "no policy gate");
		drop(data);
		return;
	}
	if (json_is_true(json_object_get(call_params(c), "yes")) &&
	    !who->operator) {
		call_error(c, RPC_E_UNAUTHORIZED, NULL,
			   "only the operator may pre-approve (yes)");
		drop(data);
		return;
	}
	r = gate_policy_conf(spd, g->workspace, &conf, &what, why, sizeof(why));
	if (r < 0) {
		/* The project's file is the requester's to mend; spd.conf
		 * changed under a running spd is the operator's. */
		call_error(c,
			   r == -EINVAL && strcmp(what, ".spd.conf") == 0
			       ? RPC_E_BAD_REQUEST
			       : RPC_E_INTERNAL,
			   NULL, "%s", why);
		drop(data);
		return;
	}
	r = gate_classify(spd, conf, g, &res);
	if (r < 0) {
		call_error(c, RPC_E_INTERNAL, NULL, "policy: %s", strerror(-r));
		drop(data);
		goto out;
	}
	gate_provenance(spd, g, &res);
	object = object_json(g, &res);
	if (!object) {
		call_error(c, RPC_E_INTERNAL, NULL, "out of memory");
		drop(data);
		goto out;
	}
	call_set_detail(c, json_pack("{s:s, s:s, s:s}", "decision",
				     policy_decision_name(res.decision), "rule",
				     res.rule, "reason", res.reason));
	switch (res.decision) {
	case POLICY_BAD_REQUEST:
		call_error(c, RPC_E_BAD_PARAMS,
			   json_pack("{s:s}", "rule", res.rule), "%s",
			   res.reason);
		drop(data);
		break;
	case POLICY_DENY:
		/* A path that leaves the workspace has its own code. */
		deny(ap, c, g->session_id, res.rule, res.reason, object,
		     strcmp(res.rule, "deny.path.outside") == 0
			 ? RPC_E_PATH_ESCAPE
			 : RPC_E_POLICY_DENIED);
		drop(data);
		break;
	case POLICY_ALLOW:
		denials_reset(ap, g->session_id);
		cont(c, data);
		break;
	case POLICY_ASK:
		gate_ask(c, g, &res, object, cont, drop, data);
		break;
	}
out:
	json_decref(object);
	policy_result_free(&res);
	policy_conf_free(conf);
}

/* ---- approval.list and approval.decide ------------------------------ */

static void follower_gone(void *data)
{
	struct follower *f = data;
	struct approvals *ap = f->ap;

	for (struct follower **pp = &ap->followers; *pp; pp = &(*pp)->next)
		if (*pp == f) {
			*pp = f->next;
			break;
		}
	call_reply(f->call, json_null());
	free(f);
}

void m_approval_list(struct call *c)
{
	struct approvals *ap = call_spd(c)->approvals;
	json_t *arr = json_array();

	for (struct pending *p = ap->pending; p; p = p->next)
		json_array_append_new(arr, pending_json(p));
	if (!json_is_true(json_object_get(call_params(c), "follow"))) {
		call_reply(c, json_pack("{s:o}", "pending", arr));
		return;
	}
	/* Follow: the pending ones now, then each new one as it comes. */
	for (size_t i = 0; i < json_array_size(arr); i++)
		call_notify(c, RPC_N_APPROVAL_REQUESTED,
			    json_incref(json_array_get(arr, i)));
	json_decref(arr);
	struct follower *f = calloc(1, sizeof(*f));
	if (!f) {
		call_error(c, RPC_E_INTERNAL, NULL, "out of memory");
		return;
	}
	f->call = c;
	f->ap = ap;
	f->next = ap->followers;
	ap->followers = f;
	call_on_gone(c, follower_gone, f);
}

/* A person approved p: its waiter goes on, or the grant waits for the
 * call that did not wait.  Returns the decision for approval.decide. */
static const char *decide_approve(struct approvals *ap, struct pending *p)
{
	struct waiter w;

	if (p->w.call && !pins_current(p->object)) {
		/* A script the person approved was rewritten while the ask
		 * waited: the approval is not for what would run now. */
		journal_decision(
		    ap->spd, p->session, "approval.refused", p->rule,
		    "a pinned file changed before the decision", p->object);
		pending_tell(p, RPC_N_APPROVAL_DECIDED, "stale",
			     "a pinned file changed before the decision");
		w = waiter_take(p);
		pending_free(p);
		waiter_refuse(&w, RPC_E_APPROVAL_REFUSED,
			      "a file the ask pinned changed before the "
			      "decision: ask again");
		return "stale";
	}
	journal_decision(ap->spd, p->session, "approval.granted", p->rule,
			 "granted by a person", p->object);
	pending_tell(p, RPC_N_APPROVAL_DECIDED, "approved",
		     "granted by a person");
	if ((!p->w.call && !p->w.decided) || p->grant_after) {
		/* The agent did not wait, or asked ahead of the call (a
		 * policy.check): the grant waits for the call, this exact
		 * one, once. */
		struct grant *g = calloc(1, sizeof(*g));
		if (g) {
			uint32_t life = ap->spd->config.grant_lifetime_ms;

			snprintf(g->session, sizeof(g->session), "%s",
				 p->session);
			memcpy(g->key, p->key, sizeof(g->key));
			g->approval = p->id;
			g->expires = uv_now(ap->spd->loop) +
				     (life ? life : GATE_WAIT_MS);
			g->next = ap->grants;
			ap->grants = g;
		}
	}
	if (p->session[0])
		denials_reset(ap, p->session);
	if (p->w.call)
		call_add_detail(p->w.call,
				json_pack("{s:s, s:I}", "approved", "person",
					  "approval", (json_int_t)p->id));
	w = waiter_take(p);
	pending_free(p);
	waiter_proceed(&w);
	return "approved";
}

/* A person refused p (why: their words, or NULL); a refusal is a denied
 * call of the session. */
static void decide_refuse(struct approvals *ap, struct pending *p,
			  const char *why)
{
	char reason[256], session[SESSION_ID_LEN + 1];
	struct waiter w = waiter_take(p);

	snprintf(reason, sizeof(reason), "refused by a person%s%s",
		 why ? ": " : "", why ? why : "");
	snprintf(session, sizeof(session), "%s", p->session);
	journal_decision(ap->spd, session, "approval.refused", p->rule, reason,
			 p->object);
	pending_tell(p, RPC_N_APPROVAL_DECIDED, "refused", reason);
	pending_free(p);
	if (session[0]) {
		struct counter *ctr = counter_of(ap, session);
		if (ctr && ++ctr->denials >= GATE_DENIALS_MAX &&
		    ap->spd->sessions)
			session_end_attempt(ap->spd->sessions, session,
					    "POLICY-DENIED",
					    "three denied calls in a row");
	}
	waiter_refuse(&w, RPC_E_APPROVAL_REFUSED, "%s", reason);
}

void m_approval_decide(struct call *c)
{
	struct approvals *ap = call_spd(c)->approvals;
	json_t *params = call_params(c);
	json_int_t id = json_integer_value(json_object_get(params, "id"));
	bool approve = json_is_true(json_object_get(params, "approve"));
	const char *why = json_string_value(json_object_get(params, "why"));
	const char *decision = "refused";
	struct pending *p;

	for (p = ap->pending; p; p = p->next)
		if ((json_int_t)p->id == id)
			break;
	if (!p) {
		call_error(c, RPC_E_BAD_PARAMS, NULL,
			   "no pending approval %lld", (long long)id);
		return;
	}
	/* "always": the proposed rule goes into spd.conf too, before the
	 * session's grant; a failure leaves the ask pending. */
	if (json_is_true(json_object_get(params, "always")) &&
	    (!approve ||
	     propose_always(c, p->session, p->rule, p->object) < 0)) {
		if (!approve)
			call_error(c, RPC_E_BAD_PARAMS, NULL,
				   "always goes with an approval");
		return;
	}
	call_set_summary(c, "approval %lld %s", (long long)id,
			 approve ? "granted" : "refused");
	if (approve)
		decision = decide_approve(ap, p);
	else
		decide_refuse(ap, p, why);
	call_reply(c, json_pack("{s:I, s:s}", "id", id, "decision", decision));
}

/* Withdraw p (journaled, the followers told) without finishing its
 * waiter; returns the waiter for the caller to finish. */
static struct waiter pending_withdraw(struct pending *p, const char *why)
{
	struct approvals *ap = p->ap;
	struct waiter w = waiter_take(p);

	journal_decision(ap->spd, p->session, "approval.withdrawn", p->rule,
			 why, p->object);
	pending_tell(p, RPC_N_APPROVAL_WITHDRAWN, NULL, why);
	pending_free(p);
	return w;
}

void gate_withdraw_session(struct spd *spd, const char *sid, const char *why)
{
	struct approvals *ap = spd ? spd->approvals : NULL;
	struct pending *p;

	if (!ap || !sid || !sid[0])
		return;
	if (!why)
		why = "the attempt ended";
	/* One at a time from the head: a waiter's drop may change the
	 * list. */
	for (;;) {
		struct waiter w;

		for (p = ap->pending; p; p = p->next)
			if (strcmp(p->session, sid) == 0)
				break;
		if (!p)
			break;
		w = pending_withdraw(p, why);
		waiter_refuse(&w, RPC_E_ATTEMPT_ENDED,
			      "session %s: the attempt ended while the call "
			      "waited for a person (%s)",
			      sid, why);
	}
	for (struct grant **pp = &ap->grants; *pp;) {
		struct grant *g = *pp;
		if (strcmp(g->session, sid) == 0) {
			*pp = g->next;
			free(g);
		} else {
			pp = &g->next;
		}
	}
}

/* ---- asks without an RPC call --------------------------------------- */

int64_t gate_ask_person(struct spd *spd, const struct gate_ask *a,
			gate_decided_fn decided, void *data)
{
	struct approvals *ap = spd->approvals;
	const char *session = a->session_id ? a->session_id : "";
	struct pending *p;
	char key[65];
	int r = 0;

	if (!ap)
		return -ENOTCONN;
	if (a->session_id) {
		struct counter *ctr = counter_of(ap, a->session_id);

		if (ctr && ctr->prompts >= GATE_PROMPTS_MAX) {
			journal_decision(
			    spd, session, "policy.deny", "deny.prompt-budget",
			    "the session has used all its prompts", a->object);
			return -EDQUOT;
		}
		if (ctr)
			ctr->prompts++;
	}
	object_key(session, a->object, key);
	p = pending_new(ap, session, key, a->object, a->rule, a->reason, &r);
	if (!p) {
		if (r == -EAGAIN)
			journal_decision(
			    spd, session, "policy.deny", "deny.pending-limit",
			    "too many approvals are pending", a->object);
		return r;
	}
	pending_wait(p, &(struct waiter){.decided = decided, .data = data});
	pending_announce(p);
	return (int64_t)p->id;
}

json_t *gate_ask_json(struct spd *spd, uint64_t id)
{
	struct approvals *ap = spd ? spd->approvals : NULL;

	for (struct pending *p = ap ? ap->pending : NULL; p; p = p->next)
		if (p->id == id)
			return pending_json(p);
	return NULL;
}

void gate_ask_cancel(struct spd *spd, uint64_t id, const char *why)
{
	struct approvals *ap = spd ? spd->approvals : NULL;

	for (struct pending *p = ap ? ap->pending : NULL; p; p = p->next)
		if (p->id == id) {
			pending_withdraw(p, why);
			return;
		}
}

int gate_start(struct spd *spd)
{
	struct approvals *ap = calloc(1, sizeof(*ap));

	if (!ap)
		return -ENOMEM;
	ap->spd = spd;
	spd->approvals = ap;
	return 0;
}

void gate_stop(struct spd *spd)
{
	struct approvals *ap = spd->approvals;

	if (!ap)
		return;
	/* Waiting calls were ended when their clients went away (the
	 * server closes first); anything left is refused. */
	while (ap->pending)
		pending_refuse(ap->pending, "spd is stopping", true);
	for (size_t i = 0; i < GATE_CONF_CACHE; i++)
		conf_cache_drop(&ap->confs[i]);
	while (ap->grants) {
		struct grant *g = ap->grants;
		ap->grants = g->next;
		free(g);
	}
	while (ap->counters) {
		struct counter *ctr = ap->counters;
		ap->counters = ctr->next;
		free(ctr);
	}
	free(ap);
	spd->approvals = NULL;
}

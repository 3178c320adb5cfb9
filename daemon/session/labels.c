/*
 * Provenance labels of sessions (labels.h): kept in sessions.db's
 * provenance table, one row per label or contacted host, and in memory
 * from the first time a session's are asked for.
 */
#include <errno.h>
#include <fnmatch.h>
#include <git2.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "daemon/session/labels.h"
#include "daemon/session/session.h"
#include "daemon/session/session_priv.h"
#include "daemon/spd.h"

/* kind column: a label, or a destination the session contacted. */
enum { PROV_LABEL = 0, PROV_EGRESS = 1 };

struct served {
	char *prefix; /* the first SESSION_SERVED_PREFIX bytes, or all */
	size_t len;   /* of prefix */
	json_t *labels;
};

struct sess_prov {
	struct session_label *labels;
	size_t n, cap;
	char **hosts;
	size_t nhosts, hcap;
	struct served served[SESSION_SERVED_MAX];
	size_t next; /* the ring's next slot */
};

static const char *const prov_sql =
    "CREATE TABLE IF NOT EXISTS provenance("
    " session TEXT NOT NULL, kind INTEGER NOT NULL, name TEXT NOT NULL,"
    " journal_row INTEGER, what TEXT, at INTEGER NOT NULL,"
    " PRIMARY KEY(session, kind, name));";

int sess_labels_schema(struct session_store *s)
{
	char *msg = NULL;

	if (sqlite3_exec(s->db, prov_sql, NULL, NULL, &msg) != SQLITE_OK) {
		sess_seterr(s, "sessions.db: %s", msg ? msg : "?");
		sqlite3_free(msg);
		return -EIO;
	}
	return 0;
}

void sess_prov_free(struct sess_prov *p)
{
	if (!p)
		return;
	free(p->labels);
	for (size_t i = 0; i < p->nhosts; i++)
		free(p->hosts[i]);
	free(p->hosts);
	for (size_t i = 0; i < SESSION_SERVED_MAX; i++) {
		free(p->served[i].prefix);
		json_decref(p->served[i].labels);
	}
	free(p);
}

static int push_label(struct sess_prov *p, const char *label, int64_t row,
		      const char *what, int64_t at)
{
	struct session_label *l;

	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 8;
		struct session_label *v = realloc(p->labels, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		p->labels = v;
		p->cap = cap;
	}
	l = &p->labels[p->n++];
	snprintf(l->label, sizeof(l->label), "%s", label);
	snprintf(l->what, sizeof(l->what), "%s", what ? what : "");
	l->row = row;
	l->at = at;
	return 0;
}

static int push_host(struct sess_prov *p, const char *host)
{
	char *h;

	if (p->nhosts == p->hcap) {
		size_t cap = p->hcap ? p->hcap * 2 : 8;
		char **v = realloc(p->hosts, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		p->hosts = v;
		p->hcap = cap;
	}
	h = strdup(host);
	if (!h)
		return -ENOMEM;
	for (char *q = h; *q; q++)
		if (*q >= 'A' && *q <= 'Z')
			*q = (char)(*q - 'A' + 'a');
	p->hosts[p->nhosts++] = h;
	return 0;
}

/* The session's provenance, read from the database at first use; NULL
 * (store error set) when the session is unknown or it cannot be read. */
static struct sess_prov *prov_of(struct session_store *s, const char *id,
				 int *err)
{
	struct sess *x = sess_find(s, id);
	struct sess_prov *p;
	sqlite3_stmt *st = NULL;
	int rc, r = 0;

	*err = -ENOENT;
	if (!x)
		return NULL;
	if (x->prov)
		return x->prov;
	*err = -ENOMEM;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	if (sqlite3_prepare_v2(s->db,
			       "SELECT kind, name, journal_row, what, at FROM "
			       "provenance WHERE session = ?1 ORDER BY "
			       "journal_row, rowid",
			       -1, &st, NULL) != SQLITE_OK) {
		sess_seterr(s, "sessions.db: %s", sqlite3_errmsg(s->db));
		sess_prov_free(p);
		*err = -EIO;
		return NULL;
	}
	sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
	while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 1);

		if (!name)
			continue;
		if (sqlite3_column_int(st, 0) == PROV_EGRESS)
			r = push_host(p, name);
		else
			r = push_label(p, name, sqlite3_column_int64(st, 2),
				       (const char *)sqlite3_column_text(st, 3),
				       sqlite3_column_int64(st, 4));
	}
	if (r == 0 && rc != SQLITE_DONE) {
		sess_seterr(s, "sessions.db: %s", sqlite3_errmsg(s->db));
		r = -EIO;
	}
	sqlite3_finalize(st);
	if (r < 0) {
		sess_prov_free(p);
		*err = r;
		return NULL;
	}
	x->prov = p;
	return p;
}

static int db_put(struct session_store *s, const char *id, int kind,
		  const char *name, int64_t row, const char *what, int64_t at)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if (sqlite3_prepare_v2(
		s->db,
		"INSERT OR IGNORE INTO provenance(session, kind, "
		"name, journal_row, what, at) VALUES "
		"(?1, ?2, ?3, ?4, ?5, ?6)",
		-1, &st, NULL) != SQLITE_OK) {
		sess_seterr(s, "sessions.db: %s", sqlite3_errmsg(s->db));
		return -EIO;
	}
	sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int(st, 2, kind);
	sqlite3_bind_text(st, 3, name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 4, row);
	sess_bind_text(st, 5, what);
	sqlite3_bind_int64(st, 6, at);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		sess_seterr(s, "sessions.db: %s", sqlite3_errmsg(s->db));
		return -EIO;
	}
	return 0;
}

static bool label_ok(const char *label)
{
	size_t n = label ? strlen(label) : 0;

	if (n == 0 || n > SESSION_LABEL_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)label[i] <= ' ' || label[i] == 0x7f)
			return false;
	return true;
}

int session_label_add(struct session_store *s, const char *id,
		      const char *label, int64_t row, const char *what)
{
	char w[SESSION_LABEL_WHAT_MAX + 1];
	struct sess_prov *p;
	int64_t at = (int64_t)time(NULL);
	int r;

	if (!label_ok(label))
		return -EINVAL;
	p = prov_of(s, id, &r);
	if (!p)
		return r;
	for (size_t i = 0; i < p->n; i++)
		if (strcmp(p->labels[i].label, label) == 0)
			return 0;
	if (p->n >= SESSION_LABELS_MAX)
		return -E2BIG;
	snprintf(w, sizeof(w), "%s", what ? what : "");
	r = db_put(s, id, PROV_LABEL, label, row, what ? w : NULL, at);
	if (r < 0)
		return r;
	r = push_label(p, label, row, what ? w : NULL, at);
	return r < 0 ? r : 1;
}

bool session_label_has(struct session_store *s, const char *id,
		       const char *label)
{
	int r;
	struct sess_prov *p = prov_of(s, id, &r);

	for (size_t i = 0; p && i < p->n; i++)
		if (strcmp(p->labels[i].label, label) == 0)
			return true;
	return false;
}

bool session_label_find(struct session_store *s, const char *id,
			char *const *patterns, struct session_label *ret)
{
	int r;
	struct sess_prov *p = prov_of(s, id, &r);

	for (size_t i = 0; p && patterns && i < p->n; i++)
		for (size_t k = 0; patterns[k]; k++)
			if (fnmatch(patterns[k], p->labels[i].label, 0) == 0) {
				*ret = p->labels[i];
				return true;
			}
	return false;
}

json_t *session_labels_json(struct session_store *s, const char *id)
{
	int r;
	struct sess_prov *p = prov_of(s, id, &r);
	json_t *a = json_array();

	for (size_t i = 0; a && p && i < p->n; i++)
		if (json_array_append_new(a, json_string(p->labels[i].label)) <
		    0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

json_t *session_labels_detail(struct session_store *s, const char *id)
{
	int r;
	struct sess_prov *p = prov_of(s, id, &r);
	json_t *a = json_array();

	for (size_t i = 0; a && p && i < p->n; i++) {
		const struct session_label *l = &p->labels[i];

		if (json_array_append_new(
			a, json_pack("{s:s, s:I, s:I, s:s}", "label", l->label,
				     "row", (json_int_t)l->row, "at",
				     (json_int_t)l->at, "what", l->what)) < 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

int session_egress_add(struct session_store *s, const char *id,
		       const char *host, int64_t row)
{
	struct sess_prov *p;
	int r;

	if (!label_ok(host))
		return -EINVAL;
	p = prov_of(s, id, &r);
	if (!p)
		return r;
	if (session_egress_known(s, id, host))
		return 0;
	if (p->nhosts >= SESSION_LABELS_MAX)
		return -E2BIG;
	r = push_host(p, host);
	if (r < 0)
		return r;
	r = db_put(s, id, PROV_EGRESS, p->hosts[p->nhosts - 1], row, NULL,
		   (int64_t)time(NULL));
	if (r < 0) {
		free(p->hosts[--p->nhosts]);
		return r;
	}
	return 1;
}

bool session_egress_known(struct session_store *s, const char *id,
			  const char *host)
{
	int r;
	struct sess_prov *p = prov_of(s, id, &r);

	for (size_t i = 0; p && i < p->nhosts; i++)
		if (strcasecmp(p->hosts[i], host) == 0)
			return true;
	return false;
}

bool session_egress_any(struct session_store *s, const char *id)
{
	int r;
	struct sess_prov *p = prov_of(s, id, &r);

	return p && p->nhosts > 0;
}

/* ---- served results ---- */

int session_served_add(struct session_store *s, const char *id,
		       const char *text, size_t len, json_t *labels)
{
	struct sess_prov *p;
	struct served *e;
	char *prefix;
	int r;

	if (!text || len == 0 || !json_is_array(labels))
		return 0;
	p = prov_of(s, id, &r);
	if (!p)
		return r;
	if (len > SESSION_SERVED_PREFIX)
		len = SESSION_SERVED_PREFIX;
	/* A short one is kept without its line ends, to be compared with a
	 * line. */
	if (len < SESSION_SERVED_SHORT)
		while (len > 0 &&
		       (text[len - 1] == '\n' || text[len - 1] == '\r'))
			len--;
	if (len == 0)
		return 0;
	prefix = malloc(len);
	if (!prefix)
		return -ENOMEM;
	memcpy(prefix, text, len);
	e = &p->served[p->next];
	free(e->prefix);
	json_decref(e->labels);
	e->prefix = prefix;
	e->len = len;
	e->labels = json_incref(labels);
	p->next = (p->next + 1) % SESSION_SERVED_MAX;
	return 0;
}

/* True when text holds line as one whole line (trailing \r ignored). */
static bool has_line(const char *text, size_t len, const char *line, size_t n)
{
	const char *q = text, *end = text + len;

	while (q < end) {
		const char *nl = memchr(q, '\n', (size_t)(end - q));
		size_t l = nl ? (size_t)(nl - q) : (size_t)(end - q);

		if (l > 0 && q[l - 1] == '\r')
			l--;
		if (l == n && memcmp(q, line, n) == 0)
			return true;
		if (!nl)
			break;
		q = nl + 1;
	}
	return false;
}

json_t *session_served_match(struct session_store *s, const char *id,
			     const char *text, size_t len)
{
	int r;
	struct sess_prov *p = prov_of(s, id, &r);
	json_t *out = NULL;

	if (!p || !text)
		return NULL;
	for (size_t i = 0; i < SESSION_SERVED_MAX; i++) {
		const struct served *e = &p->served[i];
		bool hit;
		size_t k;
		json_t *v;

		if (!e->prefix || e->len > len)
			continue;
		hit = e->len >= SESSION_SERVED_SHORT
			  ? memmem(text, len, e->prefix, e->len) != NULL
			  : has_line(text, len, e->prefix, e->len);
		if (!hit)
			continue;
		if (!out && !(out = json_array()))
			return NULL;
		json_array_foreach(e->labels, k, v)
		{
			size_t j;
			json_t *w;
			bool dup = false;

			json_array_foreach(out, j, w) dup =
			    dup || json_equal(v, w);
			if (!dup)
				json_array_append(out, v);
		}
	}
	return out;
}

bool session_file_committed(struct session_store *s, const char *id,
			    const char *relpath, const char *data, size_t len)
{
	struct sess *x = sess_find(s, id);
	git_repository *repo = NULL;
	git_commit *commit = NULL;
	git_tree *tree = NULL;
	git_tree_entry *e = NULL;
	git_oid base, mine;
	bool same = false;

	while (relpath[0] == '.' && relpath[1] == '/')
		relpath += 2;
	if (!x || !x->info.gitdir || sess_git_up(s) < 0 ||
	    git_oid_fromstr(&base, x->info.base) < 0 ||
	    git_repository_open_bare(&repo, x->info.gitdir) < 0)
		return false;
	if (git_commit_lookup(&commit, repo, &base) == 0 &&
	    git_commit_tree(&tree, commit) == 0 &&
	    git_tree_entry_bypath(&e, tree, relpath) == 0 &&
	    git_tree_entry_type(e) == GIT_OBJECT_BLOB &&
	    git_odb_hash(&mine, data, len, GIT_OBJECT_BLOB) == 0)
		same = git_oid_equal(&mine, git_tree_entry_id(e));
	git_tree_entry_free(e);
	git_tree_free(tree);
	git_commit_free(commit);
	git_repository_free(repo);
	return same;
}

bool session_changed_since(struct session_store *s, const char *id, int64_t row)
{
	sqlite3_stmt *st = NULL;
	bool later = true;

	if (row <= 0 ||
	    sqlite3_prepare_v2(s->db,
			       "SELECT MAX(journal_row), COUNT(*) FROM "
			       "checkpoints WHERE session = ?1",
			       -1, &st, NULL) != SQLITE_OK)
		return true;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int64(st, 1) > 0 &&
	    sqlite3_column_type(st, 0) != SQLITE_NULL)
		later = sqlite3_column_int64(st, 0) > row;
	sqlite3_finalize(st);
	return later;
}

/* ---- the gates on labels ---- */

bool session_prov_path_matches(char *const *globs, const char *relpath)
{
	const char *base;

	while (relpath[0] == '.' && relpath[1] == '/')
		relpath += 2;
	base = strrchr(relpath, '/');
	base = base ? base + 1 : relpath;
	for (size_t i = 0; globs && globs[i]; i++) {
		const char *g = globs[i];
		size_t n = strlen(g);

		while (g[0] == '.' && g[1] == '/')
			g += 2, n -= 2;
		if (n > 0 && g[n - 1] == '/') {
			if (strncmp(relpath, g, n) == 0 ||
			    (strncmp(relpath, g, n - 1) == 0 &&
			     relpath[n - 1] == '\0'))
				return true;
			continue;
		}
		if (fnmatch(g, relpath, FNM_PATHNAME) == 0)
			return true;
		if (!strchr(g, '/') && fnmatch(g, base, 0) == 0)
			return true;
	}
	return false;
}

bool session_prov_untrusted(struct session_store *s, const char *id,
			    const struct spd_config *cfg,
			    struct session_label *ret)
{
	static char *const defaults[] = {"network:*", "agent-tool", NULL};

	return session_label_find(
	    s, id, cfg->prov_untrusted ? cfg->prov_untrusted : defaults, ret);
}

static void say_label(char *why, size_t n, const char *lead,
		      const struct session_label *l, const char *tail)
{
	snprintf(why, n, "%sthis session read %s%s%.120s%s at row %lld%s", lead,
		 l->label, l->what[0] ? " (" : "", l->what,
		 l->what[0] ? ")" : "", (long long)l->row, tail);
}

bool session_prov_asks(struct session_store *s, const char *id,
		       const struct spd_config *cfg,
		       enum session_prov_step step, const char *host,
		       const char **rule, char *why, size_t whylen,
		       struct session_label *ret_label)
{
	static char *const private_label[] = {"private", NULL};
	struct session_label u, p;
	char tail[SESSION_LABEL_WHAT_MAX + 200];
	unsigned bit = 0;

	if (!id || !session_prov_untrusted(s, id, cfg, &u))
		return false;
	if (ret_label)
		*ret_label = u;
	if (step == SESSION_PROV_EGRESS &&
	    session_label_find(s, id, private_label, &p)) {
		*rule = "ask.provenance.trifecta";
		snprintf(tail, sizeof(tail),
			 ", and private data (%s at row %lld): a connection "
			 "to %s would give it a way out",
			 p.what, (long long)p.row, host ? host : "the network");
		say_label(why, whylen, "", &u, tail);
		return true;
	}
	if (step == SESSION_PROV_PRIVATE_READ) {
		if (!session_egress_any(s, id))
			return false;
		*rule = "ask.provenance.trifecta";
		say_label(why, whylen, "", &u,
			  " and has a way out (it contacted a destination): "
			  "reading private data would complete the three");
		return true;
	}
	switch (step) {
	case SESSION_PROV_EGRESS:
		if (host && session_egress_known(s, id, host))
			return false;
		bit = SPD_PROV_ASK_EGRESS;
		*rule = "ask.provenance.egress";
		snprintf(tail, sizeof(tail),
			 ": %s is a destination it has not contacted",
			 host ? host : "the host's network");
		break;
	case SESSION_PROV_COMMIT:
		bit = SPD_PROV_ASK_COMMIT;
		*rule = "ask.provenance.commit";
		snprintf(tail, sizeof(tail),
			 ": a commit may carry what it "
			 "was steered to write");
		break;
	case SESSION_PROV_MERGE:
		bit = SPD_PROV_ASK_MERGE;
		*rule = "ask.provenance.merge";
		snprintf(tail, sizeof(tail), ", and changed the work after it");
		break;
	case SESSION_PROV_CONFIG:
		bit = SPD_PROV_ASK_CONFIG;
		*rule = "ask.provenance.config";
		snprintf(tail, sizeof(tail),
			 ": agent configuration and CI run with more power");
		break;
	default:
		return false;
	}
	if (!(cfg->prov_ask & bit))
		return false;
	say_label(why, whylen, "", &u, tail);
	return true;
}

/*
 * The fs.* methods: thin wrappers over daemon/fsops.  Each handler finds
 * the caller's workspace, checks and normalizes the path arguments, has
 * the call classified, then runs the tool on libuv's thread pool (a write
 * fsyncs, a read may be 8 MiB: neither belongs on the loop) and replies
 * from the loop.
 *
 * Parameters (see the SPD_PARAM lines in the report / proto/rpc.def):
 *   fs.read   path                       -> {path, size, encoding, content
 *                                             | content_base64}
 *   fs.write  path, content | content_base64 -> {path, size}
 *   fs.list   path (default "")          -> {path, entries, truncated,
 *                                             skipped}
 *   fs.stat   path                       -> {path, type, size, mode, mtime_ns}
 *   fs.mkdir  path, parents              -> {path, created}
 *   fs.delete path, recursive            -> {path, removed}
 *   fs.move   path, to, overwrite        -> {path, to}
 * The operator names the workspace ("workspace", absolute) or a session
 * ("session"); an agent always works in its own session's worktree.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <git2.h>
#include <jansson.h>
#include <sodium.h>
#include <uv.h>

#include "daemon/transport/handlers.h"
#include "common/redact.h"
#include "common/strv.h"
#include "common/utf8.h"
#include "common/util.h"
#include "daemon/transport/call.h"
#include "daemon/sandbox/fsops.h"
#include "daemon/methods/agent.h"
#include "daemon/methods/gate.h"
#include "daemon/pool.h"
#include "daemon/session/labels.h"
#include "daemon/session/session.h"
#include "daemon/spd.h"

enum fs_op {
	FS_OP_READ,
	FS_OP_WRITE,
	FS_OP_LIST,
	FS_OP_STAT,
	FS_OP_MKDIR,
	FS_OP_DELETE,
	FS_OP_MOVE,
};

/* One fs.* call in flight.  Everything the worker thread touches is here;
 * the worker never calls call_* or jansson. */
struct fs_job {
	struct call *c;
	enum fs_op op;
	struct fs_ws *ws;
	git_repository *repo; /* in-place mode: for the ignore hook */
	char **ignored_then;  /* in place: ignored at the session's start,
				 relative to the workspace */
	char *rel;	      /* normalized "path" */
	char *rel_to;	      /* normalized "to" (fs.move) */
	char *data;	      /* fs.write input, fs.read output */
	size_t len;
	bool flag; /* parents, recursive or overwrite */
	/* Known secrets to take out of what fs.read hands an agent; NULL
	 * for the operator.  The job holds a reference (redact_set_ref): a
	 * newer set may replace spd's while the job runs. */
	struct redact_set *redact;
	int r;
	struct fs_info info;
	struct fs_listing listing;
	char *session; /* the session acted in, or NULL */
	bool in_place;
};

static void job_free(struct fs_job *j)
{
	if (!j)
		return;
	redact_set_free(j->redact);
	free(j->session);
	fs_ws_free(j->ws);
	strv_free_array(j->ignored_then);
	if (j->repo) {
		git_repository_free(j->repo);
		git_libgit2_shutdown();
	}
	free(j->rel);
	free(j->rel_to);
	free(j->data);
	fs_listing_free(&j->listing);
	free(j);
}

/* Map a tool's error to the protocol's codes and finish the call. */
static void fail(struct call *c, int err, const char *path)
{
	const char *name = strerrorname_np(-err);
	json_t *data = name ? json_pack("{s:s}", "errno", name) : NULL;

	switch (err) {
	case -EXDEV:
		json_decref(data);
		call_error(c, RPC_E_PATH_ESCAPE, NULL,
			   "%s: the path leaves the workspace", path);
		return;
	case -ELOOP:
		json_decref(data);
		call_error(c, RPC_E_PATH_ESCAPE, NULL,
			   "%s: the path goes through a symbolic link, "
			   "which the file tools never follow",
			   path);
		return;
	case -SPD_EPERM:
		json_decref(data);
		call_error(c, RPC_E_POLICY_DENIED,
			   json_pack("{s:s}", "rule", "deny.fs.ignored"),
			   "%s: git ignores this path, and the project "
			   "does not list it as readable",
			   path);
		return;
	case -SPD_ETOOBIG:
		json_decref(data);
		call_error(c, RPC_E_LIMIT, NULL,
			   "%s: over the file tools' size limit (%u bytes, "
			   "%u entries, %u levels)",
			   path, FS_READ_MAX, FS_LIST_MAX, FS_DELETE_DEPTH_MAX);
		return;
	case -SPD_EUTF8:
		json_decref(data);
		call_error(c, RPC_E_BAD_REQUEST, NULL,
			   "the path is not valid UTF-8");
		return;
	case -ENOSYS:
		json_decref(data);
		call_error(c, RPC_E_SANDBOX_UNAVAILABLE, NULL,
			   "openat2 is missing (Linux 5.6 or later is "
			   "needed to confine the file tools)");
		return;
	case -ENOMEM:
	case -ECANCELED:
	case -EIO:
	case -ENOSPC:
	case -EDQUOT:
		call_error(c, RPC_E_INTERNAL, data, "%s: %s", path,
			   strerror(-err));
		return;
	default:
		/* ENOENT, EEXIST, EISDIR, ENOTDIR, ENOTEMPTY, EBUSY, EINVAL,
		 * ENAMETOOLONG, EACCES...: the caller asked for something
		 * the tree does not allow; error.data.errno says which. */
		call_error(c, RPC_E_BAD_REQUEST, data, "%s: %s", path,
			   strerror(-err));
		return;
	}
}

/*
 * The worktree of session_id (a new absolute path in *ret_root) and
 * whether the session works in place.  On failure the call is finished and
 * a negative value returned.
 */
static int resolve_session_workspace(struct call *c, const char *session_id,
				     char **ret_root, bool *ret_in_place)
{
	struct session_store *store = call_spd(c)->sessions;
	struct session_info *info = NULL;
	int r;

	if (!store) {
		call_error(c, RPC_E_INTERNAL, NULL,
			   "sessions are not available");
		return -ENOSYS;
	}
	r = session_usable(store, session_id);
	if (r == 0)
		r = session_get(store, session_id, &info);
	if (r == -ECANCELED) {
		call_error(c, RPC_E_ATTEMPT_ENDED, NULL,
			   "session %s: the attempt has ended", session_id);
		return r;
	}
	if (r < 0) {
		call_error(c, RPC_E_BAD_REQUEST, NULL, "session %s: %s",
			   session_id,
			   r == -ENOENT	     ? "no such session"
			   : r == -ESHUTDOWN ? "the session has ended"
			   : r == -EBUSY     ? "the session is ending (its "
					       "worktree is being read for "
					       "its end)"
					     : strerror(-r));
		return r;
	}
	*ret_root = strdup(info->worktree);
	*ret_in_place = info->mode == SESSION_MODE_IN_PLACE;
	session_info_free(info);
	if (!*ret_root) {
		call_error(c, RPC_E_INTERNAL, NULL, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

/*
 * TODO(lead): the patterns of git-ignored files the project lists as
 * readable (from its .spd.conf), NULL-terminated and borrowed for the
 * call; NULL for none.
 */
static const char *const *project_readable(struct call *c, const char *root)
{
	(void)c;
	(void)root;
	return NULL;
}

static bool git_ignored(void *data, const char *relpath)
{
	const struct fs_job *j = data;
	int ignored = 0;

	/* What was ignored when the session started stays refused, whatever
	 * the .gitignore files in the checkout say now (session.h). */
	for (size_t i = 0; j->ignored_then && j->ignored_then[i]; i++) {
		size_t n = strlen(j->ignored_then[i]);

		if (strncmp(relpath, j->ignored_then[i], n) == 0 &&
		    (relpath[n] == '\0' || relpath[n] == '/'))
			return true;
	}
	/* An error in git's own ignore machinery counts as ignored:
	 * refusing is the safe side in place. */
	if (git_ignore_path_is_ignored(&ignored, j->repo, relpath) < 0)
		return true;
	return ignored != 0;
}

/* The session's entries ignored at its start, made relative to root. */
static int ignored_at_start(struct call *c, struct fs_job *j, const char *root)
{
	char **v;
	size_t n = strlen(root), k = 0;

	if (!j->session)
		return 0;
	v = session_hidden_at_start(call_spd(c)->sessions, j->session);
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; v[i]; i++) {
		if (strncmp(v[i], root, n) != 0 || v[i][n] != '/' ||
		    !v[i][n + 1]) {
			free(v[i]);
			continue;
		}
		memmove(v[i], v[i] + n + 1, strlen(v[i] + n + 1) + 1);
		v[k++] = v[i];
	}
	v[k] = NULL;
	j->ignored_then = v;
	return 0;
}

/* In place: refuse what git ignores, except the project's readable list. */
static int setup_in_place(struct call *c, struct fs_job *j, const char *root)
{
	int r;

	r = ignored_at_start(c, j, root);
	if (r < 0)
		return r;
	git_libgit2_init();
	if (git_repository_open_ext(&j->repo, root,
				    GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0) {
		j->repo = NULL;
		git_libgit2_shutdown();
		return -ENOENT;
	}
	r = fs_ws_set_ignore(j->ws, git_ignored, j, project_readable(c, root));
	return r;
}

/*
 * Find and open the caller's workspace.  On failure the call is finished
 * and false returned.
 */
static bool open_workspace(struct call *c, struct fs_job *j)
{
	const struct call_principal *who = call_principal(c);
	json_t *p = call_params(c);
	const char *ws = json_string_value(json_object_get(p, "workspace"));
	const char *sid = json_string_value(json_object_get(p, "session"));
	_cleanup_free_ char *root = NULL;
	bool in_place = false;
	int r;

	if (!who->operator) {
		/* An agent never chooses where it works. */
		if (ws || (sid && strcmp(sid, who->session_id) != 0)) {
			call_error(c, RPC_E_UNAUTHORIZED, NULL,
				   "an agent works only in its own "
				   "session's workspace");
			return false;
		}
		sid = who->session_id;
	} else if (ws && sid) {
		call_error(c, RPC_E_BAD_PARAMS, NULL,
			   "give \"workspace\" or \"session\", not both");
		return false;
	} else if (!ws && !sid) {
		call_error(c, RPC_E_BAD_PARAMS, NULL,
			   "the operator must name a \"workspace\" "
			   "(absolute path) or a \"session\"");
		return false;
	}
	if (sid) {
		if (resolve_session_workspace(c, sid, &root, &in_place) < 0)
			return false;
	} else {
		if (ws[0] != '/') {
			call_error(c, RPC_E_BAD_PARAMS, NULL,
				   "\"workspace\" must be an absolute path");
			return false;
		}
		root = strdup(ws);
		if (!root) {
			call_error(c, RPC_E_INTERNAL, NULL, "out of memory");
			return false;
		}
	}
	if (sid && !(j->session = strdup(sid))) {
		call_error(c, RPC_E_INTERNAL, NULL, "out of memory");
		return false;
	}
	j->in_place = in_place;
	r = fs_ws_open(root, &j->ws);
	if (r == 0 && in_place)
		r = setup_in_place(c, j, root);
	if (r < 0) {
		call_error(c, RPC_E_BAD_REQUEST, NULL,
			   "cannot open the workspace %s: %s", root,
			   strerror(-r));
		return false;
	}
	return true;
}

/*
 * Normalize the string parameter key into *ret_rel.  A missing optional
 * parameter is the root.  On failure the call is finished, false returned.
 */
static bool get_path(struct call *c, struct fs_job *j, const char *key,
		     bool required, char **ret_rel)
{
	json_t *v = json_object_get(call_params(c), key);
	const char *s;
	size_t len;
	int r;

	if (!v && !required) {
		*ret_rel = strdup("");
		if (!*ret_rel) {
			call_error(c, RPC_E_INTERNAL, NULL, "out of memory");
			return false;
		}
		return true;
	}
	if (!json_is_string(v)) {
		call_error(c, RPC_E_BAD_PARAMS, NULL, "\"%s\" must be a string",
			   key);
		return false;
	}
	s = json_string_value(v);
	len = json_string_length(v);
	/* The length is jansson's, not strlen's: a NUL inside is caught. */
	r = fs_path_normalize(j->ws, s, len, ret_rel);
	if (r < 0) {
		if (r == -EINVAL)
			call_error(c, RPC_E_BAD_REQUEST, NULL,
				   "\"%s\" contains a NUL byte", key);
		else
			fail(c, r,
			     utf8_valid(s, len) && !memchr(s, 0, len) ? s
								      : key);
		return false;
	}
	return true;
}

static bool get_bool(struct call *c, const char *key)
{
	return json_is_true(json_object_get(call_params(c), key));
}

/* fs.write's content: exactly one of content and content_base64. */
static bool get_content(struct call *c, struct fs_job *j)
{
	json_t *p = call_params(c);
	json_t *text = json_object_get(p, "content");
	json_t *b64 = json_object_get(p, "content_base64");

	if (!text == !b64 || (text && !json_is_string(text)) ||
	    (b64 && !json_is_string(b64))) {
		call_error(c, RPC_E_BAD_PARAMS, NULL,
			   "give exactly one of \"content\" and "
			   "\"content_base64\" (strings)");
		return false;
	}
	if (text) {
		j->len = json_string_length(text);
		if (j->len > FS_WRITE_MAX)
			goto too_big;
		j->data = malloc(j->len + 1);
		if (!j->data)
			goto oom;
		memcpy(j->data, json_string_value(text), j->len);
		return true;
	}
	size_t blen = json_string_length(b64);
	size_t max = blen / 4 * 3 + 3;
	if (max > FS_WRITE_MAX + 3)
		goto too_big;
	j->data = malloc(max + 1);
	if (!j->data)
		goto oom;
	if (sodium_base642bin((unsigned char *)j->data, max,
			      json_string_value(b64), blen, " \n\r\t", &j->len,
			      NULL, sodium_base64_VARIANT_ORIGINAL) != 0) {
		call_error(c, RPC_E_BAD_PARAMS, NULL,
			   "\"content_base64\" is not valid base64");
		return false;
	}
	if (j->len > FS_WRITE_MAX)
		goto too_big;
	return true;
too_big:
	call_error(c, RPC_E_LIMIT, NULL,
		   "the content is over the %u-byte limit of fs.write",
		   FS_WRITE_MAX);
	return false;
oom:
	call_error(c, RPC_E_INTERNAL, NULL, "out of memory");
	return false;
}

/* On the thread pool: only fsops, no JSON, no call_*. */
static void job_work(void *data)
{
	struct fs_job *j = data;

	switch (j->op) {
	case FS_OP_READ:
		j->r = fs_read(j->ws, j->rel, &j->data, &j->len);
		if (j->r == 0 && j->redact) {
			char *out = NULL;
			size_t n = 0;
			/* Every byte handed to an agent passes the
			 * redactor (docs/design.md, "Secrets and redaction"). */
			int r =
			    redact_buf(j->redact, j->data, j->len, &out, &n);
			if (r < 0) {
				j->r = r;
				break;
			}
			free(j->data);
			j->data = out;
			j->len = n;
		}
		break;
	case FS_OP_WRITE:
		j->r = fs_write(j->ws, j->rel, j->data, j->len);
		break;
	case FS_OP_LIST:
		j->r = fs_list(j->ws, j->rel, &j->listing);
		break;
	case FS_OP_STAT:
		j->r = fs_stat(j->ws, j->rel, &j->info);
		break;
	case FS_OP_MKDIR:
		j->r = fs_mkdir(j->ws, j->rel, j->flag);
		break;
	case FS_OP_DELETE:
		j->r = fs_delete(j->ws, j->rel, j->flag);
		break;
	case FS_OP_MOVE:
		j->r = fs_move(j->ws, j->rel, j->rel_to, j->flag);
		break;
	}
}

static json_t *info_json(const struct fs_info *i)
{
	return json_pack("{s:s,s:I,s:i,s:I}", "type", fs_type_name(i->type),
			 "size", (json_int_t)i->size, "mode", (int)i->mode,
			 "mtime_ns", (json_int_t)i->mtime_ns);
}

static json_t *read_json(struct fs_job *j)
{
	json_t *res =
	    json_pack("{s:s,s:I}", "path", j->rel, "size", (json_int_t)j->len);
	char *b64;
	size_t n;

	if (utf8_valid(j->data, j->len)) {
		json_object_set_new(res, "encoding", json_string("utf-8"));
		json_object_set_new(res, "content",
				    json_stringn(j->data, j->len));
		return res;
	}
	n = sodium_base64_ENCODED_LEN(j->len, sodium_base64_VARIANT_ORIGINAL);
	b64 = malloc(n);
	if (!b64) {
		json_decref(res);
		return NULL;
	}
	sodium_bin2base64(b64, n, (const unsigned char *)j->data, j->len,
			  sodium_base64_VARIANT_ORIGINAL);
	json_object_set_new(res, "encoding", json_string("base64"));
	json_object_set_new(res, "content_base64", json_string(b64));
	free(b64);
	return res;
}

static json_t *list_json(struct fs_job *j)
{
	json_t *arr = json_array();

	for (size_t i = 0; i < j->listing.n; i++) {
		json_t *e = info_json(&j->listing.entries[i].info);
		json_object_set_new(e, "name",
				    json_string(j->listing.entries[i].name));
		json_array_append_new(arr, e);
	}
	return json_pack("{s:s,s:o,s:b,s:I}", "path", j->rel, "entries", arr,
			 "truncated", j->listing.truncated, "skipped",
			 (json_int_t)j->listing.skipped);
}

/*
 * Provenance: a file or listing of the workspace is "worktree", a
 * [provenance] trusted file read as committed is "trusted", and a
 * private one is "private" as well.  A read's bytes are remembered as
 * served (session_served_add).
 */
static void fs_labels(struct fs_job *j)
{
	struct spd *spd = call_spd(j->c);
	struct session_store *st = spd->sessions;
	const char *label = "worktree";
	json_t *labels;

	if (!j->session || !st)
		return;
	if (j->op != FS_OP_READ && j->op != FS_OP_LIST && j->op != FS_OP_STAT)
		return;
	if (j->op == FS_OP_READ &&
	    session_prov_path_matches(spd->config.prov_trusted, j->rel) &&
	    session_file_committed(st, j->session, j->rel, j->data, j->len))
		label = "trusted";
	call_label(j->c, label, *j->rel ? j->rel : ".");
	labels = json_pack("[s]", label);
	if (session_prov_path_matches(spd->config.prov_private, j->rel)) {
		call_label(j->c, "private", j->rel);
		json_array_append_new(labels, json_string("private"));
	}
	if (j->op == FS_OP_READ)
		session_served_add(st, j->session, j->data, j->len, labels);
	json_decref(labels);
}

/* Back on the loop: reply and free. */
static void job_done(void *data)
{
	struct fs_job *j = data;
	json_t *res = NULL;

	if (j->r < 0) {
		fail(j->c, j->r, *j->rel ? j->rel : ".");
		goto out;
	}
	/* A change made through spd is re-hashed like a command's: the
	 * guard must vouch for the session's inputs after every write. */
	if (j->session && j->op != FS_OP_READ && j->op != FS_OP_LIST &&
	    j->op != FS_OP_STAT && call_spd(j->c)->sessions) {
		struct guard_finding f;
		int g = session_guard_check(call_spd(j->c)->sessions,
					    j->session, &f);
		if (g == 1) {
			call_error(j->c,
				   f.set == GUARD_SET_GIT ? RPC_E_GIT_CHANGED
							  : RPC_E_INTEGRITY,
				   json_pack("{s:s}", "path", f.path),
				   "%s %s: the session's attempt ended", f.path,
				   f.what);
			goto out;
		}
	}
	fs_labels(j);
	switch (j->op) {
	case FS_OP_READ:
		res = read_json(j);
		break;
	case FS_OP_WRITE:
		res = json_pack("{s:s,s:I}", "path", j->rel, "size",
				(json_int_t)j->len);
		break;
	case FS_OP_LIST:
		res = list_json(j);
		break;
	case FS_OP_STAT:
		res = info_json(&j->info);
		if (res)
			json_object_set_new(res, "path", json_string(j->rel));
		break;
	case FS_OP_MKDIR:
		res = json_pack("{s:s,s:b}", "path", j->rel, "created",
				j->r == 1);
		break;
	case FS_OP_DELETE:
		res = json_pack("{s:s,s:i}", "path", j->rel, "removed", j->r);
		break;
	case FS_OP_MOVE:
		res = json_pack("{s:s,s:s}", "path", j->rel, "to", j->rel_to);
		break;
	}
	{
		/* The call is gone once answered: what the checkpoint after
		 * it needs is taken first. */
		struct spd *spd = call_spd(j->c);
		struct session_store *ss = spd->sessions;
		bool changed = res && j->session && j->op != FS_OP_READ &&
			       j->op != FS_OP_LIST && j->op != FS_OP_STAT;

		if (!res)
			call_error(j->c, RPC_E_INTERNAL, NULL,
				   "out of memory building the reply");
		else
			call_reply(j->c, res);
		/* After the reply: a checkpoint of what the write changed. */
		if (changed && ss) {
			char what[600];

			snprintf(what, sizeof(what), "fs %s", j->rel);
			agent_checkpoint(spd, j->session, 0, what);
		}
	}
out:
	job_free(j);
}

static void job_allowed(struct call *c, void *data)
{
	struct fs_job *j = data;
	int r;

	/* A write of a session's worktree: its checkpoint must know a
	 * change began now. */
	if (j->session && j->op != FS_OP_READ && j->op != FS_OP_LIST &&
	    j->op != FS_OP_STAT && call_spd(c)->sessions)
		session_touch(call_spd(c)->sessions, j->session);
	r = pool_queue(call_spd(c)->loop, job_work, job_done, j);
	if (r < 0) {
		call_error(c, RPC_E_INTERNAL, NULL, "uv_queue_work: %s",
			   uv_strerror(r));
		job_free(j);
	}
}

static void job_refused(void *data)
{
	job_free(data);
}

/*
 * The common path of every handler: workspace, paths, content, policy,
 * then the work.  The call is always finished, now or from job_done.
 */
static void run(struct call *c, enum fs_op op, bool path_required,
		const char *flag_key)
{
	struct fs_job *j = calloc(1, sizeof(*j));

	if (!j) {
		call_error(c, RPC_E_INTERNAL, NULL, "out of memory");
		return;
	}
	j->c = c;
	j->op = op;
	if (!open_workspace(c, j) ||
	    !get_path(c, j, "path", path_required, &j->rel))
		goto fail;
	if (op == FS_OP_MOVE && !get_path(c, j, "to", true, &j->rel_to))
		goto fail;
	if (op == FS_OP_WRITE && !get_content(c, j))
		goto fail;
	if (flag_key)
		j->flag = get_bool(c, flag_key);
	if (!call_principal(c)->operator)
		j->redact = redact_set_ref(call_spd(c)->redact);
	if (op == FS_OP_MOVE)
		call_set_summary(c, "%s -> %s", j->rel, j->rel_to);
	else if (op == FS_OP_WRITE)
		call_set_summary(c, "%s (%zu bytes)", j->rel, j->len);
	else
		call_set_summary(c, "%s", *j->rel ? j->rel : ".");
	/* The policy first: read, list and stat are reads of the path;
	 * write, mkdir and delete writes; a move writes both paths. */
	gate_check(c,
		   &(struct gate_call){
		       .kind = (op == FS_OP_READ || op == FS_OP_LIST ||
				op == FS_OP_STAT)
				   ? POLICY_CALL_READ
				   : POLICY_CALL_WRITE,
		       .path = *j->rel ? j->rel : ".",
		       .path2 = op == FS_OP_MOVE ? j->rel_to : NULL,
		       /* The very buffer job_work writes: what is hashed
			* for the grant is what lands on disk. */
		       .content = op == FS_OP_WRITE ? j->data : NULL,
		       .content_len = op == FS_OP_WRITE ? j->len : 0,
		       .workspace = fs_ws_root(j->ws),
		       .in_place = j->in_place,
		       .session_id = j->session,
		   },
		   job_allowed, job_refused, j);
	return;
fail:
	job_free(j);
}

void m_fs_read(struct call *c)
{
	run(c, FS_OP_READ, true, NULL);
}

void m_fs_write(struct call *c)
{
	run(c, FS_OP_WRITE, true, NULL);
}

void m_fs_list(struct call *c)
{
	run(c, FS_OP_LIST, false, NULL);
}

void m_fs_stat(struct call *c)
{
	run(c, FS_OP_STAT, true, NULL);
}

void m_fs_mkdir(struct call *c)
{
	run(c, FS_OP_MKDIR, true, "parents");
}

void m_fs_delete(struct call *c)
{
	run(c, FS_OP_DELETE, true, "recursive");
}

void m_fs_move(struct call *c)
{
	run(c, FS_OP_MOVE, true, "overwrite");
}

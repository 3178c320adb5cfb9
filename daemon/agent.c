#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent.h"
#include "call.h"
#include "journal.h"
#include "run.h"
#include "sbx.h"
#include "session.h"
#include "spd.h"
#include "common/paths.h"
#include "common/util.h"

/* In place, git-ignored files that look like credentials read as empty
 * inside the sandbox (issue 4).  The scan is bounded: a checkout with
 * more candidates than this refuses the run rather than leak one. */
#define AGENT_EMPTY_FILES_MAX 60
#define AGENT_SCAN_DEPTH 6

static const char *const credential_globs[] = {
    ".env",	 ".env.*",	"*.pem",  "*.key",  "id_rsa*", "id_dsa*",
    "id_ecdsa*", "id_ed25519*", ".netrc", ".npmrc", ".pypirc", NULL,
};

static int auth_hook(struct spd *spd, const char *token, char **ret_sid)
{
	char id[SESSION_ID_LEN + 1];

	if (!spd->sessions ||
	    session_authenticate(spd->sessions, token, id) < 0)
		return -EACCES;
	*ret_sid = strdup(id);
	return *ret_sid ? 0 : -ENOMEM;
}

static void journal_hook(void *data, const char *session_id, const char *kind,
			 const char *summary, const char *detail_json)
{
	struct spd *spd = data;

	journal_append(spd->journal, session_id, "spd", kind, summary,
		       detail_json);
}

struct run_session {
	struct spd *spd;
	char id[SESSION_ID_LEN + 1];
	char **argv;
};

static int after_run(void *data, const struct sbx_result *r, char *msg,
		     size_t msglen)
{
	struct run_session *rs = data;
	struct guard_finding f;
	int ret = 0, x;

	x = session_record_command(
	    rs->spd->sessions, rs->id, (const char *const *)rs->argv,
	    r->error_code || r->term_signal ? -1 : r->exit_code, &f);
	if (x == 1) {
		snprintf(msg, msglen, "%s %s: the session's attempt ended",
			 f.path, f.what);
		ret = f.set == GUARD_SET_GIT ? RPC_E_GIT_CHANGED
					     : RPC_E_INTEGRITY;
	} else if (x < 0 && x != -ENOENT) {
		snprintf(msg, msglen,
			 "the session's guarded inputs could not be checked "
			 "(%s): the attempt ended",
			 strerror(-x));
		ret = RPC_E_ATTEMPT_ENDED;
	}
	session_argv_free(rs->argv);
	free(rs);
	return ret;
}

static void cancel_run(void *data)
{
	struct run_session *rs = data;

	session_argv_free(rs->argv);
	free(rs);
}

static char **argv_copy(json_t *arr)
{
	size_t n = json_array_size(arr);
	char **v = calloc(n + 1, sizeof(*v));

	if (!v)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (!(v[i] = strdup(json_string_value(json_array_get(arr, i))
					?: ""))) {
			session_argv_free(v);
			return NULL;
		}
	return v;
}

static bool credential_name(const char *name)
{
	for (size_t i = 0; credential_globs[i]; i++)
		if (fnmatch(credential_globs[i], name, FNM_CASEFOLD) == 0)
			return true;
	return false;
}

/* Collect credential-looking regular files under dir (skipping .git),
 * so that in place they read as empty.  Tracked ones too: a credential
 * has no business in an agent's view whether git knows it or not. */
static int scan_credentials(const char *dir, int depth, char **out, size_t *n)
{
	DIR *d;
	struct dirent *e;
	int r = 0;

	if (depth > AGENT_SCAN_DEPTH)
		return 0;
	d = opendir(dir);
	if (!d)
		return 0;
	while ((e = readdir(d)) && r == 0) {
		char *p;
		struct stat st;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    !strcmp(e->d_name, ".git"))
			continue;
		p = paths_join(dir, e->d_name);
		if (!p) {
			r = -ENOMEM;
			break;
		}
		if (lstat(p, &st) == 0) {
			if (S_ISDIR(st.st_mode) &&
			    strcmp(e->d_name, "node_modules")) {
				r = scan_credentials(p, depth + 1, out, n);
			} else if (S_ISREG(st.st_mode) &&
				   credential_name(e->d_name)) {
				if (*n >= AGENT_EMPTY_FILES_MAX)
					r = -E2BIG;
				else {
					out[(*n)++] = p;
					p = NULL;
				}
			}
		}
		free(p);
	}
	closedir(d);
	return r;
}

static int run_prepare(struct spd *spd, struct rpc_call *c,
		       struct run_request *req)
{
	const struct rpc_principal *who = rpc_call_principal(c);
	const char *id = who->session_id;
	struct session_info *info = NULL;
	struct run_session *rs = NULL;
	static char *empty[AGENT_EMPTY_FILES_MAX + 1];
	static char *ro[2];
	static size_t n_empty;
	int r;

	if (who->operator)
		id = json_string_value(
		    json_object_get(rpc_call_params(c), "session"));
	if (!id)
		return 0; /* the operator's own run: no session */
	if (!who->operator&& json_object_get(rpc_call_params(c), "session") &&
	    strcmp(json_string_value(
		       json_object_get(rpc_call_params(c), "session")),
		   id) != 0) {
		rpc_call_error(c, RPC_E_UNAUTHORIZED, NULL,
			       "a session token acts in its own session only");
		return -1;
	}
	r = session_usable(spd->sessions, id);
	if (r == -ECANCELED) {
		rpc_call_error(c, RPC_E_ATTEMPT_ENDED, NULL,
			       "session %s: the attempt ended; no further "
			       "calls are accepted",
			       id);
		return -1;
	}
	if (r < 0) {
		rpc_call_error(c, RPC_E_BAD_REQUEST, NULL,
			       "session %s is not active", id);
		return -1;
	}
	if (session_get(spd->sessions, id, &info) < 0) {
		rpc_call_error(c, RPC_E_BAD_REQUEST, NULL, "no session %s", id);
		return -1;
	}
	req->owned_workspace = strdup(info->worktree);
	req->workspace = req->owned_workspace;
	/* The run is an agent's even when the operator runs it in the
	 * session: the cwd is the worktree. */
	if (!who->operator)
		req->cwd = NULL;
	if (info->mode == SESSION_MODE_IN_PLACE) {
		/* .git stays read-only inside the sandbox, whatever git
		 * command the agent runs. */
		for (size_t i = 0; i < n_empty; i++)
			free(empty[i]);
		n_empty = 0;
		free(ro[0]);
		ro[0] = paths_join(info->worktree, ".git");
		ro[1] = NULL;
		req->readonly = ro;
		r = scan_credentials(info->worktree, 0, empty, &n_empty);
		empty[n_empty] = NULL;
		if (r < 0) {
			rpc_call_error(c, RPC_E_SANDBOX_UNAVAILABLE, NULL,
				       "too many credential-looking files in "
				       "the checkout to hide (more than %d)",
				       AGENT_EMPTY_FILES_MAX);
			session_info_free(info);
			return -1;
		}
		req->empty_files = empty;
	}
	rs = calloc(1, sizeof(*rs));
	if (!rs || !(rs->argv = argv_copy(req->argv))) {
		free(rs);
		session_info_free(info);
		rpc_call_error(c, RPC_E_INTERNAL, NULL, "out of memory");
		return -1;
	}
	rs->spd = spd;
	snprintf(rs->id, sizeof(rs->id), "%s", id);
	req->done_hook = after_run;
	req->done_data = rs;
	req->done_cancel = cancel_run;
	req->in_place = info->mode == SESSION_MODE_IN_PLACE;
	req->session_id = rs->id;
	session_info_free(info);
	return 0;
}

/* ---- verification checks in the sandbox ----------------------------- */

struct check_run {
	session_check_done_fn done;
	void *ctx;
};

static void check_done(void *data, const struct sbx_result *r)
{
	struct check_run *cr = data;
	int code = (r->error_code || r->term_signal || r->timed_out)
		       ? -1
		       : r->exit_code;

	cr->done(cr->ctx, code);
	free(cr);
}

static int check_runner(void *data, const struct session_verify_plan *plan,
			size_t i, session_check_done_fn done, void *ctx)
{
	struct spd *spd = data;
	struct check_run *cr;
	struct sbx_spec spec;
	char *hidden[4] = {spd->paths.config_dir, spd->paths.state_dir,
			   spd->paths.runtime_dir, NULL};
	char *env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8",
		       NULL};
	char *binds[3] = {plan->heldout_src, plan->heldout_dst, NULL};
	int r;

	if (!spd->sbx)
		return -ENOTCONN;
	cr = calloc(1, sizeof(*cr));
	if (!cr)
		return -ENOMEM;
	cr->done = done;
	cr->ctx = ctx;
	memset(&spec, 0, sizeof(spec));
	spec.argv = plan->checks[i].argv;
	spec.envp = env;
	spec.workspace = plan->workspace;
	spec.net = SBX_NET_NONE;
	spec.timeout_ms = spd->config.default_timeout_ms;
	spec.hidden = hidden;
	/* The held-out checks appear read-only at heldout_dst for this
	 * verification run only; the host worktree never holds them. */
	spec.ro_binds = plan->heldout_src ? binds : NULL;
	spec.best_effort = false; /* checks never run with a layer missing */
	spec.run_uid = spd->config.run_uid;
	spec.run_gid = spd->config.run_gid;
	r = sbx_run(spd->sbx, &spec, &(struct sbx_cbs){NULL, check_done}, cr,
		    NULL);
	if (r < 0)
		free(cr);
	return r;
}

int agent_start(struct spd *spd)
{
	int r = session_store_open(spd->paths.state_dir, &spd->sessions);

	if (r < 0)
		return r;
	session_store_set_journal(spd->sessions, journal_hook, spd);
	session_store_set_check_runner(spd->sessions, check_runner, spd);
	spd->session_auth = auth_hook;
	spd->run_prepare = run_prepare;
	return 0;
}

void agent_stop(struct spd *spd)
{
	session_store_free(spd->sessions);
	spd->sessions = NULL;
	spd->session_auth = NULL;
	spd->run_prepare = NULL;
}

/*
 * The attest.* RPC methods (spd's signing key, showing and verifying the
 * attestations under refs/notes/spd), and the attestation of a session's
 * verdict that session.verify and session.merge sign when their checks
 * finish (m_attest.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <unistd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "daemon/keys/attest.h"
#include "daemon/journal/journal.h"
#include "daemon/session/session.h"
#include "daemon/log.h"
#include "daemon/methods/m_attest.h"
#include "daemon/spd.h"
#include "daemon/transport/call.h"
#include "daemon/transport/handlers.h"

/* The SHA-256 of spd.conf's bytes (the operator's policy, network rules,
 * limits and broker caps; no key values live there) into hex, or
 * "absent" without one. */
static void conf_sha256(const char *path, char hex[65])
{
	crypto_hash_sha256_state st;
	unsigned char h[crypto_hash_sha256_BYTES], buf[4096];
	ssize_t n = 0;
	int fd = path ? open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;

	snprintf(hex, 65, "absent");
	if (fd < 0)
		return;
	crypto_hash_sha256_init(&st);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		crypto_hash_sha256_update(&st, buf, (size_t)n);
	close(fd);
	if (n < 0) {
		snprintf(hex, 65, "unreadable");
		return;
	}
	crypto_hash_sha256_final(&st, h);
	sodium_bin2hex(hex, 65, h, sizeof(h));
}

/* The key, made on first use; NULL (logged) when it cannot be. */
static struct attest_key *key_of(struct spd *spd)
{
	int r;

	if (!spd->paths.state_dir)
		return NULL; /* a test's spd without directories */
	r = attest_key_ensure(spd->paths.state_dir, &spd->attest_key);
	if (r < 0) {
		log_error("attest: the signing key in %s: %s",
			  spd->paths.state_dir, strerror(-r));
		return NULL;
	}
	return spd->attest_key;
}

json_t *m_attest_session(struct spd *spd, const char *method,
			 const struct session_verify_plan *plan,
			 json_t *verdict, const int64_t *durations_ms,
			 const struct session_check_output *outs)
{
	struct session_info *i = NULL;
	struct attest_key *k;
	json_t *pred = NULL, *checks, *st = NULL, *res = NULL, *work = NULL;
	const char *why = NULL;
	char hash[65] = "", when[32];
	int64_t head = 0;
	time_t now = time(NULL);
	struct tm tm;

	if (!plan->commit[0])
		return json_pack("{s:s}", "error",
				 "no branch to attest (in place on a detached "
				 "HEAD)");
	if (!spd->sessions || session_get(spd->sessions, plan->id, &i) < 0)
		return json_pack("{s:s}", "error", "no such session");
	if (!(k = key_of(spd))) {
		res = json_pack("{s:s}", "error",
				"no signing key (see spd's "
				"log)");
		goto out;
	}
	checks = json_deep_copy(json_object_get(verdict, "checks"));
	for (size_t n = 0; n < json_array_size(checks) && durations_ms; n++)
		json_object_set_new(json_array_get(checks, n), "duration_ms",
				    json_integer(durations_ms[n]));
	/* What each check printed, as digests: the output itself may hold
	 * what a reviewer should not see, and is not spd's to publish. */
	for (size_t n = 0; n < json_array_size(checks) && outs; n++)
		if (outs[n].sha256[0][0])
			json_object_set_new(
			    json_array_get(checks, n), "output",
			    json_pack("{s:{s:s, s:I, s:I}, s:{s:s, s:I, s:I}}",
				      "stdout", "sha256", outs[n].sha256[0],
				      "bytes", (json_int_t)outs[n].bytes[0],
				      "dropped", (json_int_t)outs[n].dropped[0],
				      "stderr", "sha256", outs[n].sha256[1],
				      "bytes", (json_int_t)outs[n].bytes[1],
				      "dropped",
				      (json_int_t)outs[n].dropped[1]));
	if (spd->journal)
		journal_head(spd->journal, &head, hash);
	gmtime_r(&now, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	pred = json_pack(
	    "{s:s, s:s, s:s?, s:s, s:s, s:s, s:o, s:O?, s:{s:I, s:s}, s:s}",
	    "method", method, "session", plan->id, "branch", i->branch, "base",
	    i->base, "verdict",
	    json_is_true(json_object_get(verdict, "pass")) ? "pass" : "fail",
	    "checked",
	    strcmp(method, "session.merge") == 0 ? "branch-tip" : "worktree",
	    "checks", checks ? checks : json_array(), "gates",
	    json_object_get(verdict, "gates"), "journal", "head_id",
	    (json_int_t)head, "head_hash", hash, "signed_at", when);
	if (!pred) {
		res = json_pack("{s:s}", "error", "out of memory");
		goto out;
	}
	json_object_set_new(pred, "spd_version", json_string(SPD_VERSION));
	/* The commands the project required to have run (the required
	 * gate), so that a verifier can hold them to its own list. */
	{
		json_t *req = json_array();

		for (size_t n = 0; plan->required && plan->required[n]; n++)
			json_array_append_new(req,
					      json_string(plan->required[n]));
		json_object_set_new(pred, "required", req);
	}
	/* agent_diff_guard scanned the diff before the checks began; a
	 * known secret in it would have ended the attempt instead. */
	json_object_set_new(pred, "secret_scan",
			    json_pack("{s:s, s:s}", "result", "clean", "scope",
				      "lines added since the base, every "
				      "known secret in its encoded forms"));
	if (plan->policy_sha256[0])
		json_object_set_new(pred, "project_conf_sha256",
				    json_string(plan->policy_sha256));
	{
		char conf[65];

		conf_sha256(spd->paths.conf_path, conf);
		json_object_set_new(pred, "spd_conf_sha256", json_string(conf));
	}
	/* The worktree's checks also saw what is not committed; the
	 * statement is about the commit, so it says whether there was any. */
	if (strcmp(method, "session.verify") == 0) {
		json_t *cnt = NULL;

		if (session_work(spd->sessions, plan->id, &work) == 0)
			cnt = json_object_get(work, "uncommitted_count");
		json_object_set_new(pred, "worktree_uncommitted",
				    json_is_integer(cnt) ? json_incref(cnt)
							 : json_null());
	}
	st = attest_statement(i->gitdir, i->branch, plan->commit, pred);
	pred = NULL;
	if (!st) {
		res = json_pack("{s:s}", "error", "the commit cannot be read");
		goto out;
	}
	if (attest_sign_note(k, i->gitdir, plan->commit, st, &why) < 0) {
		log_error("attest: note on %s: %s", plan->commit, why);
		res = json_pack("{s:s, s:s}", "commit", plan->commit, "error",
				why);
		goto out;
	}
	res = json_pack("{s:s, s:s, s:s}", "commit", plan->commit, "notes_ref",
			ATTEST_NOTES_REF, "keyid", attest_key_fingerprint(k));
out:
	json_decref(work);
	json_decref(st);
	json_decref(pred);
	session_info_free(i);
	return res;
}

void m_attest_key(struct call *c)
{
	struct attest_key *k = key_of(call_spd(c));

	if (!k) {
		call_error(c, RPC_E_INTERNAL, NULL,
			   "cannot read or make the signing key in the state "
			   "directory (see spd's log)");
		return;
	}
	call_reply(c, json_pack("{s:s, s:s}", "key", attest_key_public(k),
				"fingerprint", attest_key_fingerprint(k)));
}

/*
 * The keys a call of attest.show or attest.verify trusts: the call's
 * own "trust" and "trust_from" when either is given (replacing the
 * default), else spd.conf's [attest] trust and spd's own key (made when
 * may_make_key, else only when already loaded).  Returns 0 and *ret
 * (NULL-terminated, strings borrowed from params or spd's config; free
 * the array only), or -EINVAL and *ret_why (malloc'd).
 */
static int trusted(struct spd *spd, json_t *params, bool may_make_key,
		   const char ***ret, char **ret_why)
{
	json_t *t = json_object_get(params, "trust");
	struct attest_key *k;
	const char **v;
	size_t n = 0, cap;

	if (t && !json_is_array(t)) {
		*ret_why = strdup("\"trust\" is a list of keys");
		return -EINVAL;
	}
	if (t || json_object_get(params, "trust_from")) {
		cap = json_array_size(t);
		if (!(v = calloc(cap + 1, sizeof(*v))))
			return -ENOMEM;
		for (size_t i = 0; i < cap; i++) {
			const char *s = json_string_value(json_array_get(t, i));

			if (!s || attest_key_check(s) < 0) {
				free(v);
				if (asprintf(ret_why,
					     "trust[%zu] is not a key "
					     "(ed25519:BASE64)",
					     i) < 0)
					*ret_why = NULL;
				return -EINVAL;
			}
			v[n++] = s;
		}
		*ret = v;
		return 0;
	}
	cap = 1;
	for (size_t i = 0;
	     spd->config.attest_trust && spd->config.attest_trust[i]; i++)
		cap++;
	if (!(v = calloc(cap + 1, sizeof(*v))))
		return -ENOMEM;
	for (size_t i = 0;
	     spd->config.attest_trust && spd->config.attest_trust[i]; i++)
		v[n++] = spd->config.attest_trust[i];
	k = may_make_key ? key_of(spd) : spd->attest_key;
	if (k)
		v[n++] = attest_key_public(k);
	*ret = v;
	return 0;
}

static const char *pstr(struct call *c, const char *name)
{
	return json_string_value(json_object_get(call_params(c), name));
}

int m_attest_verify_run(struct spd *spd, json_t *params, const char *scratch,
			bool may_make_key, json_t **ret, char **ret_why)
{
	const char **trust = NULL;
	struct attest_verify_opts o = {0};
	const char *repo = json_string_value(json_object_get(params, "repo"));
	json_t *tf = json_object_get(params, "trust_from");
	json_t *base = json_object_get(params, "base");
	int r;

	*ret_why = NULL;
	o.branch = json_string_value(json_object_get(params, "branch"));
	o.base = json_string_value(base);
	o.trust_from = json_string_value(tf);
	if (!repo || !o.branch || (base && !o.base) || (tf && !o.trust_from)) {
		*ret_why = strdup("\"repo\" and \"branch\" are strings, "
				  "and so are \"base\" and \"trust_from\"");
		return -EINVAL;
	}
	r = trusted(spd, params, may_make_key, &trust, ret_why);
	if (r < 0)
		return r;
	o.trust = trust;
	r = attest_verify_branch(repo, scratch, &o, ret, ret_why);
	free(trust);
	return r;
}

/* Finish c with attest.show's or attest.verify's failure r. */
static void attest_fail(struct call *c, int r, char *why)
{
	call_error(c,
		   r == -EINVAL || r == -ENOENT || r == -E2BIG || r == -EPERM
		       ? RPC_E_BAD_PARAMS
		       : RPC_E_INTERNAL,
		   NULL, "%s", why ? why : strerror(-r));
	free(why);
}

void m_attest_show(struct call *c)
{
	const char **trust = NULL;
	const char *repo = pstr(c, "repo"), *commit = pstr(c, "commit");
	json_t *res = NULL;
	char *why = NULL;
	int r;

	call_set_summary(c, "attest show %s", commit);
	r = trusted(call_spd(c), call_params(c), true, &trust, &why);
	if (r < 0) {
		attest_fail(c, r, why);
		return;
	}
	r = attest_show(repo, call_spd(c)->paths.state_dir, commit, trust, &res,
			&why);
	free(trust);
	if (r < 0) {
		attest_fail(c, r, why);
		return;
	}
	free(why);
	call_reply(c, res);
}

void m_attest_verify(struct call *c)
{
	json_t *res = NULL;
	char *why = NULL;
	int r;

	call_set_summary(c, "attest verify %s", pstr(c, "branch"));
	r = m_attest_verify_run(call_spd(c), call_params(c),
				call_spd(c)->paths.state_dir, true, &res, &why);
	if (r < 0) {
		attest_fail(c, r, why);
		return;
	}
	free(why);
	call_reply(c, res);
}

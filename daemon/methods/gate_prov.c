/*
 * Provenance in the RPC layer (daemon/session/labels.h): the gate's
 * judgement on labels — a call the policy allows asks a person when its
 * session read untrusted content and the call is a way out, a commit, or
 * the last of the three (private data, untrusted content, a way out) —
 * and the labels a run's result carries.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "daemon/methods/gate.h"
#include "daemon/transport/call.h"
#include "daemon/session/labels.h"
#include "daemon/spd.h"

/* True when argv is a git commit: git, its global options, "commit". */
static bool argv_git_commit(json_t *argv)
{
	const char *a0 = json_string_value(json_array_get(argv, 0)), *base;
	size_t n = json_array_size(argv);

	if (!a0)
		return false;
	base = strrchr(a0, '/');
	base = base ? base + 1 : a0;
	if (strcmp(base, "git") != 0)
		return false;
	for (size_t i = 1; i < n; i++) {
		const char *w = json_string_value(json_array_get(argv, i));

		if (!w)
			return false;
		if (strcmp(w, "-C") == 0 || strcmp(w, "-c") == 0) {
			i++;
			continue;
		}
		if (w[0] == '-')
			continue;
		return strcmp(w, "commit") == 0;
	}
	return false;
}

/* True when a word of argv (after the program) names a [provenance]
 * private file of the workspace; with label set, each such word labels
 * that call "private". */
static bool argv_private(const struct spd *spd, json_t *argv,
			 const char *workspace, struct call *label)
{
	size_t i, n = workspace ? strlen(workspace) : 0;
	bool any = false;
	json_t *v;

	json_array_foreach(argv, i, v)
	{
		const char *w = json_string_value(v);

		if (i == 0 || !w)
			continue;
		if (n && strncmp(w, workspace, n) == 0 && w[n] == '/')
			w += n + 1;
		if (w[0] == '/' || w[0] == '-' ||
		    !session_prov_path_matches(spd->config.prov_private, w))
			continue;
		any = true;
		if (!label)
			break;
		call_label(label, "private", w);
	}
	return any;
}

/*
 * The gates on provenance labels (daemon/session/labels.h): a call the
 * policy allows asks a person when the session read untrusted content
 * and the call is a way out (a run with the host's network), a commit,
 * or would complete the three of private data, untrusted content and a
 * way out.  res becomes an ask naming the label and its row.
 */
void gate_provenance(struct spd *spd, const struct gate_call *g,
		     struct policy_result *res)
{
	enum session_prov_step steps[3];
	size_t n = 0;
	const char *rule = NULL;
	char why[sizeof(res->reason)];

	if (res->decision != POLICY_ALLOW || !g->session_id || !spd->sessions)
		return;
	if (g->kind == POLICY_CALL_EXEC) {
		if (g->net == POLICY_NET_HOST)
			steps[n++] = SESSION_PROV_EGRESS;
		if (argv_private(spd, g->argv, g->workspace, NULL))
			steps[n++] = SESSION_PROV_PRIVATE_READ;
		if (argv_git_commit(g->argv))
			steps[n++] = SESSION_PROV_COMMIT;
	} else if (g->kind == POLICY_CALL_READ && g->path &&
		   session_prov_path_matches(spd->config.prov_private,
					     g->path)) {
		steps[n++] = SESSION_PROV_PRIVATE_READ;
	}
	for (size_t i = 0; i < n; i++)
		if (session_prov_asks(spd->sessions, g->session_id,
				      &spd->config, steps[i], NULL, &rule, why,
				      sizeof(why), NULL)) {
			res->decision = POLICY_ASK;
			res->rule = rule;
			snprintf(res->reason, sizeof(res->reason), "%s", why);
			return;
		}
}

/*
 * Provenance: the run's output is "command", with the hosts its proxy
 * fetched from while it ran; a word of its argv naming a [provenance]
 * private file is a read of private data.  What it printed first is
 * remembered as served, for the broker to find in a conversation.
 */
void prov_run_labels(struct spd *spd, struct call *c, json_t *argv,
		     const char *workspace, int64_t start_s,
		     const char head[2][SESSION_SERVED_PREFIX],
		     const size_t head_len[2])
{
	struct session_store *st = spd->sessions;
	const char *sid = call_principal(c)->session_id, *a0;
	json_t *labels, *all, *v, *w;
	size_t i;

	if (!sid || !st)
		return;
	a0 = json_string_value(json_array_get(argv, 0));
	call_label(c, "command", a0);
	argv_private(spd, argv, workspace, c);
	labels = json_pack("[s]", "command");
	all = session_labels_detail(st, sid);
	json_array_foreach(all, i, v)
	{
		const char *l = json_string_value(json_object_get(v, "label"));

		w = json_object_get(v, "at");
		if (labels && l && strncmp(l, "network:", 8) == 0 &&
		    json_integer_value(w) >= start_s)
			json_array_append_new(labels, json_string(l));
	}
	json_decref(all);
	for (int k = 0; labels && k < 2; k++)
		session_served_add(st, sid, head[k], head_len[k], labels);
	json_decref(labels);
}

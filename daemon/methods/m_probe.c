/*
 * sandbox.probe, and the sandbox's layers as JSON for it, spctl doctor
 * and daemon.status: what each layer is, whether runs need it, and why
 * it is missing.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "daemon/methods/run.h"
#include "daemon/proxy/proxy.h"
#include "daemon/sandbox/sbx.h"
#include "daemon/spd.h"
#include "daemon/transport/call.h"
#include "daemon/transport/handlers.h"

static void probe_done(void *data, const struct sbx_layers *l)
{
	struct call *c = data;

	if (!l) {
		call_error(c, RPC_E_INTERNAL, NULL,
			   "sandboxd died during the probe");
		return;
	}
	call_reply(c,
		   proxy_state_add(run_layers_json(l), &call_spd(c)->config));
}

void m_sandbox_probe(struct call *c)
{
	struct spd *spd = call_spd(c);
	int r;

	if (!spd->sbx) {
		call_error(c, RPC_E_SANDBOX_UNAVAILABLE, NULL,
			   "sandboxd is not running");
		return;
	}
	r = sbx_probe(spd->sbx, spd->config.run_uid, spd->config.run_gid,
		      probe_done, c);
	if (r < 0)
		call_error(c, RPC_E_INTERNAL, NULL, "probe: %s", strerror(-r));
}

/* required: a run cannot have every protection without this layer (so
 * mode=required refuses); otherwise it is advice about the host. */
static json_t *layer(bool ok, const char *why, bool required)
{
	return json_pack("{s:b, s:b, s:s?}", "ok", ok, "required", required,
			 "why", (!ok && why && why[0]) ? why : NULL);
}

json_t *run_layers_json(const struct sbx_layers *l)
{
	json_t *o = json_object();
	json_t *ll = layer(l->landlock_abi > 0, l->landlock_why, true);

	json_object_set_new(ll, "abi", json_integer(l->landlock_abi));
	json_object_set_new(o, "user_namespaces",
			    layer(l->userns, l->userns_why, true));
	json_object_set_new(o, "landlock", ll);
	json_object_set_new(o, "seccomp",
			    layer(l->seccomp, l->seccomp_why, true));
	json_object_set_new(o, "cgroup2",
			    layer(l->cgroup2, l->cgroup2_why, false));
	json_object_set_new(o, "tiocsti_disabled",
			    layer(l->tiocsti_disabled, l->tiocsti_why, false));
	json_object_set_new(
	    o, "idmapped_mounts",
	    layer(l->idmap_mounts, l->idmap_why, geteuid() == 0));
	json_object_set_new(o, "run_init",
			    layer(l->run_init, l->run_init_why, true));
	return o;
}

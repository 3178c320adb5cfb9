/*
 * Starting and stopping the modules between the journal and the socket
 * (daemon/modules.h), in one order.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/methods/agent.h"
#include "daemon/keys/attest.h"
#include "daemon/broker/broker.h"
#include "daemon/methods/gate.h"
#include "daemon/log.h"
#include "daemon/modules.h"
#include "daemon/methods/run.h"
#include "daemon/sandbox/sbx.h"
#include "daemon/session/linkwatch.h"
#include "daemon/spd.h"

/* The last probe of the sandbox layers, for daemon.status. */
static struct sbx_layers last_layers;
static bool have_layers;

static void on_probe(void *data, const struct sbx_layers *l)
{
	struct spd *spd = data;

	if (!l)
		return;
	last_layers = *l;
	have_layers = true;
	if (l->landlock_abi <= 0)
		log_warn("sandbox: Landlock unavailable: %s", l->landlock_why);
	if (!l->userns)
		log_warn("sandbox: user namespaces unavailable: %s",
			 l->userns_why);
	if (!l->seccomp)
		log_warn("sandbox: seccomp unavailable: %s", l->seccomp_why);
	(void)spd;
}

static void status_extra(struct spd *spd, json_t *status)
{
	if (have_layers)
		json_object_set_new(status, "sandbox",
				    run_layers_json(&last_layers));
	json_object_set_new(status, "sandboxd",
			    json_integer(spd->sbx ? sbx_pid(spd->sbx) : -1));
	if (spd->broker)
		json_object_set_new(
		    status, "broker",
		    json_pack("{s:s?, s:s}", "url",
			      broker_base_url(spd)[0] ? broker_base_url(spd)
						      : NULL,
			      "socket", broker_socket_path(spd)));
}

int modules_start(struct spd *spd, char *errbuf, size_t errlen)
{
	int r;

	spd->status_extra = status_extra;
	if (!spd->sandboxd_path) {
		snprintf(errbuf, errlen,
			 "sandboxd not found next to spd (set SPD_SANDBOXD or "
			 "--sandboxd); spd never runs commands without it");
		return -ENOENT;
	}
	r = sbx_start(spd->loop, spd->sandboxd_path, &spd->sbx);
	if (r < 0) {
		snprintf(errbuf, errlen, "cannot start sandboxd %s: %s",
			 spd->sandboxd_path, strerror(-r));
		return r;
	}
	sbx_probe(spd->sbx, spd->config.run_uid, spd->config.run_gid, on_probe,
		  spd);
	r = gate_start(spd);
	if (r < 0) {
		snprintf(errbuf, errlen, "cannot start the policy gate: %s",
			 strerror(-r));
		return r;
	}
	r = agent_start(spd);
	if (r < 0) {
		snprintf(errbuf, errlen,
			 "cannot open the session store in %s: %s",
			 spd->paths.state_dir, strerror(-r));
		return r;
	}
	r = broker_start(spd, errbuf, errlen);
	if (r < 0)
		return r;
	return 0;
}

struct close_ctx {
	struct spd *spd;
	void (*cb)(void *data);
	void *data;
};

/* The sessions go only after sandboxd's runs have ended: a run's end
 * (INTERNAL "spd is closing" at a stop) still goes through its session's
 * done hook, which must find the session store. */
static void on_sbx_closed(void *data)
{
	struct close_ctx *cc = data;
	struct spd *spd = cc->spd;
	void (*cb)(void *) = cc->cb;
	void *d = cc->data;

	free(cc);
	agent_stop(spd, cb, d);
}

void modules_close(struct spd *spd, void (*cb)(void *data), void *data)
{
	struct close_ctx *cc = malloc(sizeof(*cc));
	struct sbx *s = spd->sbx;

	spd->sbx = NULL;
	linkwatch_free(spd->linkwatch);
	spd->linkwatch = NULL;
	attest_key_free(spd->attest_key);
	spd->attest_key = NULL;
	broker_stop(spd);
	gate_stop(spd);
	if (!cc) {
		sbx_close(s, NULL, NULL);
		agent_stop(spd, cb, data);
		return;
	}
	cc->spd = spd;
	cc->cb = cb;
	cc->data = data;
	sbx_close(s, on_sbx_closed, cc);
}

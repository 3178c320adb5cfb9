/*
 * secrets.list and secrets.reload (proto/rpc.def): the names, sources and
 * fingerprints of the secrets in force (daemon/keys/secrets.h), never a
 * value; a reload that fails leaves the previous set in force.
 */
#include <string.h>

#include "common/util.h"
#include "daemon/keys/secrets.h"
#include "daemon/log.h"
#include "daemon/spd.h"
#include "daemon/transport/call.h"
#include "daemon/transport/handlers.h"

void m_secrets_list(struct call *c)
{
	call_reply(
	    c, json_pack("{s:o}", "secrets", secrets_list_json(call_spd(c))));
}

void m_secrets_reload(struct call *c)
{
	struct spd *spd = call_spd(c);
	char err[512] = "";
	int r = secrets_load(spd, err, sizeof(err));
	json_t *list;

	if (r < 0) {
		/* The old secrets stay in force: nothing is unprotected. */
		call_error(c, RPC_E_BAD_REQUEST, NULL,
			   "reload refused, the previous secrets stay in "
			   "force: %s",
			   err[0] ? err : strerror(-r));
		return;
	}
	log_set_redact(spd->redact);
	list = secrets_list_json(spd);
	call_set_summary(c, "%zu secrets", json_array_size(list));
	call_reply(c, json_pack("{s:o}", "secrets", list));
}

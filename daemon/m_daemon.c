#include <unistd.h>

#include "call.h"
#include "journal.h"
#include "methods.h"
#include "server.h"
#include "spd.h"
#include "common/util.h"

void m_auth(struct rpc_call *c)
{
	const struct rpc_principal *p = rpc_call_principal(c);

	rpc_call_reply(c, json_pack("{s:s, s:s?}", "principal",
				    p->operator? "operator" : "agent",
				    "session", p->session_id));
}

void m_daemon_ping(struct rpc_call *c)
{
	rpc_call_reply(c, json_pack("{s:b}", "pong", 1));
}

void m_daemon_status(struct rpc_call *c)
{
	struct spd *spd = rpc_call_spd(c);
	uint64_t now = uv_hrtime() / 1000;
	json_t *res;

	res = json_pack(
	    "{s:s, s:i, s:I, s:i, s:{s:I, s:I}, s:s, s:s}", "version",
	    SPD_VERSION, "pid", (int)getpid(), "uptime_s",
	    (json_int_t)((now - spd->started_us) / 1000000), "connections",
	    (int)server_connections(spd->server), "journal", "events",
	    (json_int_t)journal_count(spd->journal), "bytes",
	    (json_int_t)journal_size_bytes(spd->journal), "socket",
	    spd->paths.socket_path, "sandbox_mode",
	    spd->config.sandbox_mode == SPD_SANDBOX_REQUIRED ? "required"
							     : "best-effort");
	if (spd->status_extra)
		spd->status_extra(spd, res);
	rpc_call_reply(c, res);
}

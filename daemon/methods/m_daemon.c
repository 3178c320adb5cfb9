/*
 * The handlers of auth, daemon.ping and daemon.status (an agent sees its
 * own session's view only).
 */
#include <unistd.h>

#include "daemon/transport/call.h"
#include "daemon/domain/journal.h"
#include "daemon/transport/handlers.h"
#include "daemon/transport/server.h"
#include "daemon/domain/session.h"
#include "daemon/spd.h"
#include "common/util.h"

void m_auth(struct call *c)
{
	const struct call_principal *p = call_principal(c);

	call_reply(c, json_pack("{s:s, s:s?}", "principal",
				p->operator? "operator" : "agent", "session",
				p->session_id));
}

void m_daemon_ping(struct call *c)
{
	call_reply(c, json_pack("{s:b}", "pong", 1));
}

/*
 * An agent's view of daemon.status: its own session and nothing of spd's
 * host (pid, socket path) or of other sessions' activity (connections,
 * journal size), which would let one agent watch the operator and the
 * others.
 */
static void session_status(struct call *c, const char *sid)
{
	struct spd *spd = call_spd(c);
	struct session_info *i = NULL;
	json_t *res;

	if (!spd->sessions || session_get(spd->sessions, sid, &i) < 0) {
		call_error(c, RPC_E_BAD_REQUEST, NULL, "no such session");
		return;
	}
	res = json_pack(
	    "{s:s, s:s, s:{s:s, s:s, s:I, s:I}, s:s}", "version", SPD_VERSION,
	    "principal", "agent", "session", "id", i->id, "state",
	    i->state == SESSION_ACTIVE		? "active"
	    : i->state == SESSION_ATTEMPT_ENDED ? "attempt-ended"
						: "ended",
	    "commands", (json_int_t)i->commands, "policy_blocks",
	    (json_int_t)i->policy_blocks, "sandbox_mode",
	    spd->config.sandbox_mode == SPD_SANDBOX_REQUIRED ? "required"
							     : "best-effort");
	session_info_free(i);
	call_reply(c, res);
}

void m_daemon_status(struct call *c)
{
	struct spd *spd = call_spd(c);
	const struct call_principal *who = call_principal(c);
	uint64_t now = uv_hrtime() / 1000;
	json_t *res;

	if (!who->operator) {
		session_status(c, who->session_id ? who->session_id : "");
		return;
	}

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
	call_reply(c, res);
}

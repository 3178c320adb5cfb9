/*
 * The handlers of auth, daemon.ping, daemon.status and daemon.stop (an agent sees its
 * own session's view only).
 */
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/transport/call.h"
#include "daemon/transport/rpc.h"
#include "daemon/journal/journal.h"
#include "daemon/transport/handlers.h"
#include "daemon/transport/server.h"
#include "daemon/session/session.h"
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
 * The operator's `spctl stop`: the answer (spd's pid, which spctl waits
 * on) goes out before the shutdown closes the connections; the shutdown
 * is SIGTERM's, which ends runs in flight and closes the journal.
 */
void m_daemon_stop(struct call *c)
{
	struct spd *spd = call_spd(c);

	call_reply(c, json_pack("{s:i}", "pid", (int)getpid()));
	if (spd->stop)
		spd->stop(spd, "stopping: asked by the operator (daemon.stop)");
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

/* spd.conf's identity now: present, device, inode, size, mtime. */
static bool conf_now(const struct spd *spd, struct stat *st)
{
	return stat(spd->paths.conf_path, st) == 0;
}

void spd_conf_stamp(struct spd *spd)
{
	struct stat st;

	spd->conf_present = conf_now(spd, &st);
	if (!spd->conf_present)
		return;
	spd->conf_dev = st.st_dev;
	spd->conf_ino = st.st_ino;
	spd->conf_size = st.st_size;
	spd->conf_mtime_ns =
	    (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
}

/* Whether spd.conf was made, removed, replaced or written since spd read
 * it: spd reads it at start only, and an operator who edits it expects
 * the change to hold (spctl status says to restart). */
static bool conf_changed(const struct spd *spd)
{
	struct stat st;
	bool present = conf_now(spd, &st);

	if (present != spd->conf_present)
		return true;
	return present &&
	       (st.st_dev != spd->conf_dev || st.st_ino != spd->conf_ino ||
		st.st_size != spd->conf_size ||
		(int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec !=
		    spd->conf_mtime_ns);
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
	json_object_set_new(res, "config_changed",
			    json_boolean(conf_changed(spd)));
	/* What spd.conf adds to every run: paths no run sees and paths
	 * every run may write (the operator's, as spd read them). */
	json_object_set_new(res, "hidden", rpc_strings(spd->config.hidden));
	json_object_set_new(res, "writable", rpc_strings(spd->config.writable));
	if (spd->status_extra)
		spd->status_extra(spd, res);
	call_reply(c, res);
}

#include "dispatch.h"
#include "call.h"
#include "methods.h"
#include "run.h"
#include "session.h"
#include "gate.h"
#include "secrets.h"
#include "fsops.h"
#include "policy.h"
#include "journal.h"
#include "spd.h"
#include "broker.h"
#include "gateway.h"

static const rpc_handler handlers[RPC_M__COUNT] = {
    [RPC_M_AUTH] = m_auth,
    [RPC_M_DAEMON_PING] = m_daemon_ping,
    [RPC_M_DAEMON_STATUS] = m_daemon_status,
    [RPC_M_JOURNAL_QUERY] = m_journal_query,
    [RPC_M_JOURNAL_FOLLOW] = m_journal_follow,
    [RPC_M_JOURNAL_VERIFY] = m_journal_verify,
    [RPC_M_CMD_RUN] = m_cmd_run,
    [RPC_M_SANDBOX_PROBE] = m_sandbox_probe,
    [RPC_M_SESSION_START] = m_session_start,
    [RPC_M_SESSION_LIST] = m_session_list,
    [RPC_M_SESSION_SHOW] = m_session_show,
    [RPC_M_SESSION_END] = m_session_end,
    [RPC_M_SESSION_STATUS] = m_session_status,
    [RPC_M_SESSION_HELDOUT] = m_session_heldout,
    [RPC_M_SESSION_VERIFY] = m_session_verify,
    [RPC_M_SESSION_DIFF] = m_session_diff,
    [RPC_M_POLICY_CHECK] = m_policy_check,
    [RPC_M_APPROVAL_LIST] = m_approval_list,
    [RPC_M_APPROVAL_DECIDE] = m_approval_decide,
    [RPC_M_SECRETS_LIST] = m_secrets_list,
    [RPC_M_SECRETS_RELOAD] = m_secrets_reload,
    [RPC_M_FS_READ] = m_fs_read,
    [RPC_M_FS_WRITE] = m_fs_write,
    [RPC_M_FS_LIST] = m_fs_list,
    [RPC_M_FS_STAT] = m_fs_stat,
    [RPC_M_FS_MKDIR] = m_fs_mkdir,
    [RPC_M_FS_DELETE] = m_fs_delete,
    [RPC_M_FS_MOVE] = m_fs_move,
    [RPC_M_TURN_BEGIN] = m_turn_begin,
    [RPC_M_TURN_END] = m_turn_end,
    [RPC_M_TURN_LIST] = m_turn_list,
    [RPC_M_MODEL_CALL] = m_model_call,
};

void dispatch_call(struct rpc_call *c)
{
	enum rpc_method m = rpc_call_method(c);
	struct spd *spd = rpc_call_spd(c);

	if ((unsigned)m >= RPC_M__COUNT || !handlers[m]) {
		rpc_call_error(c, RPC_E_INTERNAL, NULL,
			       "%s is not available in this build of spd",
			       rpc_method_name(m));
		return;
	}
	/* A request the journal cannot record is not carried out: the
	 * journal is what the operator audits afterwards.  Ping and status
	 * still answer, so that the operator can see why. */
	if (spd && spd->journal && m != RPC_M_DAEMON_PING &&
	    m != RPC_M_DAEMON_STATUS && !journal_accepting(spd->journal)) {
		rpc_call_error(c, RPC_E_INTERNAL, NULL,
			       "the journal cannot keep up (its disk is full, "
			       "stalled or locked): refusing %s until it "
			       "catches up",
			       rpc_method_name(m));
		return;
	}
	handlers[m](c);
}

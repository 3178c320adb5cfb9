/*
 * Handlers of the daemon.* and journal.* methods (m_daemon.c, m_journal.c)
 * and cmd.run / sandbox.probe (m_run.c).  Each finishes its call.
 */
#ifndef SPD_DAEMON_METHODS_H
#define SPD_DAEMON_METHODS_H

struct rpc_call;

void m_auth(struct rpc_call *c);
void m_daemon_ping(struct rpc_call *c);
void m_daemon_status(struct rpc_call *c);
void m_journal_query(struct rpc_call *c);
void m_journal_follow(struct rpc_call *c);
void m_journal_verify(struct rpc_call *c);

#endif

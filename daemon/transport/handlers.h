/*
 * The RPC handlers, one per method, declared from the method table
 * (proto/rpc.def) so that a method row without its function fails to
 * build.  Each is called by dispatch_call() once the caller is
 * authenticated and allowed to call it and its params match the table, and
 * must finish the call (call_reply or call_error), now or later;
 * methods flagged RPC_F_STREAMS may send notifications first.  What each
 * method takes and answers is in proto/PROTOCOL.md.
 */
#ifndef SPD_DAEMON_HANDLERS_H
#define SPD_DAEMON_HANDLERS_H

#include "proto/rpc.h"

struct call;

#define SPD_METHOD(id, name, who, handler, flags) void handler(struct call *c);
#include "proto/rpc.def"

#endif

/*
 * From an authenticated, admitted call to its handler: the method table
 * (proto/rpc.def) gives the handler and the flags; the journal gate is
 * applied here, once, for every method.
 */
#include "daemon/transport/dispatch.h"
#include "daemon/transport/call.h"
#include "daemon/transport/handlers.h"
#include "daemon/journal/journal.h"
#include "daemon/spd.h"

static const call_handler handlers[RPC_M__COUNT] = {
#define SPD_METHOD(id, name, who, handler, flags) [RPC_M_##id] = handler,
#include "proto/rpc.def"
};

void dispatch_call(struct call *c)
{
	enum rpc_method m = call_method(c);
	struct spd *spd = call_spd(c);

	if ((unsigned)m >= RPC_M__COUNT) {
		call_error(c, RPC_E_INTERNAL, NULL, "no such method");
		return;
	}
	/* A request the journal cannot record is not carried out: the
	 * journal is what the operator audits afterwards.  Methods flagged
	 * RPC_F_BEHIND (ping, status) still answer, so that the operator can
	 * see why. */
	if (spd && spd->journal && !(rpc_method_flags(m) & RPC_F_BEHIND) &&
	    !journal_accepting(spd->journal)) {
		call_error(c, RPC_E_INTERNAL, NULL,
			   "the journal cannot keep up (its disk is full, "
			   "stalled or locked): refusing %s until it "
			   "catches up",
			   rpc_method_name(m));
		return;
	}
	handlers[m](c);
}

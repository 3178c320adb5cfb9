/*
 * The method table: proto/rpc.def names the methods, this maps each to its
 * handler.  A method with no handler yet answers INTERNAL, never silently.
 */
#ifndef SPD_DAEMON_DISPATCH_H
#define SPD_DAEMON_DISPATCH_H

struct call;

/* Run the call's handler; the handler finishes the call. */
void dispatch_call(struct call *c);

#endif

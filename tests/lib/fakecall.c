/*
 * The call.h functions for unit tests (tests/lib/fakecall.h): a handler
 * driven without a server records its reply or error.  They stand in for
 * daemon/transport/call.c, which holds those functions and nothing else a
 * test needs, so the linker never takes call.o from libdaemon.a beside
 * these (were it made to, the duplicates would fail the link, not pass
 * silently); server.c may be linked in freely.
 */
#include "tests/lib/fakecall.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tests/lib/testlib.h"

void fakecall_init(struct call *c, struct spd *spd, json_t *params,
		   const char *session_id)
{
	memset(c, 0, sizeof(*c));
	c->spd = spd;
	c->params = params;
	c->who.operator= session_id == NULL;
	c->who.session_id = session_id;
	c->err = RPC_E__COUNT;
}

void fakecall_free(struct call *c)
{
	json_decref(c->params);
	json_decref(c->result);
	json_decref(c->err_data);
	c->params = c->result = c->err_data = NULL;
}

json_t *call_params(struct call *c)
{
	return c->params;
}

const struct call_principal *call_principal(struct call *c)
{
	return &c->who;
}

struct spd *call_spd(struct call *c)
{
	return c->spd;
}

enum rpc_method call_method(struct call *c)
{
	return RPC_M__COUNT;
}

bool call_client_gone(struct call *c)
{
	return false;
}

void call_reply(struct call *c, json_t *result)
{
	ck_assert(!c->done);
	c->done = true;
	c->result = result;
}

void call_error(struct call *c, enum rpc_error e, json_t *data, const char *fmt,
		...)
{
	va_list ap;

	ck_assert(!c->done);
	c->done = true;
	c->err = e;
	c->err_data = data;
	va_start(ap, fmt);
	vsnprintf(c->msg, sizeof(c->msg), fmt, ap);
	va_end(ap);
}

int call_notify(struct call *c, enum rpc_notify n, json_t *params)
{
	json_decref(params);
	return 0;
}

void call_on_gone(struct call *c, void (*cb)(void *data), void *data)
{
}

void call_set_summary(struct call *c, const char *fmt, ...)
{
}

void call_set_detail(struct call *c, json_t *detail)
{
	json_decref(detail);
}

void call_add_detail(struct call *c, json_t *more)
{
	json_decref(more);
}

void call_label(struct call *c, const char *label, const char *what)
{
	(void)c;
	(void)label;
	(void)what;
}

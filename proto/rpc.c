/*
 * The tables proto/rpc.h exposes, built from proto/rpc.def: error codes,
 * methods (name, who may call, flags), notifications, parameters and results.
 */
#include <string.h>

#include "rpc.h"
#include "common/util.h"

static const struct {
	const char *code;
	int number;
	int exit;
} errors[] = {
#define SPD_ERROR(id, code, num, exit)                                         \
	[RPC_E_##id] = {code, num, RPC_EXIT_##exit},
#include "rpc.def"
};

static const struct {
	const char *name;
	enum rpc_who who;
	unsigned flags;
} methods[] = {
#define SPD_METHOD(id, name, who, handler, flags)                              \
	[RPC_M_##id] = {name, RPC_WHO_##who, flags},
#include "rpc.def"
};

static const char *const notifications[] = {
#define SPD_NOTIFY(id, name, sent_by) [RPC_N_##id] = name,
#include "rpc.def"
};

/* Grouped by method because rpc.def lists them that way; checked by the
 * unit test so that a misplaced line is caught. */
static const struct rpc_param_def params[] = {
#define SPD_PARAM(m, n, k, r) {RPC_M_##m, n, RPC_KIND_##k, r},
#include "rpc.def"
};

/* Grouped by method as well (checked by the same test). */
static const struct rpc_result_def results[] = {
#define SPD_RESULT(m, n, k, f) {RPC_M_##m, n, RPC_KIND_##k, f},
#include "rpc.def"
};

const char *rpc_error_code(enum rpc_error e)
{
	if ((unsigned)e >= ARRAY_SIZE(errors))
		return "INTERNAL";
	return errors[e].code;
}

int rpc_error_number(enum rpc_error e)
{
	if ((unsigned)e >= ARRAY_SIZE(errors))
		return -32603;
	return errors[e].number;
}

int rpc_error_by_number(long num)
{
	for (size_t i = 0; i < RPC_E__COUNT; i++)
		if (errors[i].number == num)
			return (int)i;
	return -1;
}

int rpc_error_exit(enum rpc_error e)
{
	return (unsigned)e < RPC_E__COUNT ? errors[e].exit : RPC_EXIT_SPD;
}

const char *rpc_method_name(enum rpc_method m)
{
	if ((unsigned)m >= ARRAY_SIZE(methods))
		return NULL;
	return methods[m].name;
}

enum rpc_who rpc_method_who(enum rpc_method m)
{
	if ((unsigned)m >= ARRAY_SIZE(methods))
		return RPC_WHO_OPERATOR;
	return methods[m].who;
}

unsigned rpc_method_flags(enum rpc_method m)
{
	if ((unsigned)m >= ARRAY_SIZE(methods))
		return 0;
	return methods[m].flags;
}

const char *rpc_notify_name(enum rpc_notify n)
{
	if ((unsigned)n >= ARRAY_SIZE(notifications))
		return NULL;
	return notifications[n];
}

int rpc_method_lookup(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(methods); i++)
		if (strcmp(methods[i].name, name) == 0)
			return (int)i;
	return -1;
}

size_t rpc_method_params(enum rpc_method m,
			 const struct rpc_param_def **ret_defs)
{
	size_t i = 0, n = 0;

	while (i < ARRAY_SIZE(params) && params[i].method != m)
		i++;
	while (i + n < ARRAY_SIZE(params) && params[i + n].method == m)
		n++;
	if (n > 0)
		*ret_defs = &params[i];
	return n;
}

size_t rpc_method_results(enum rpc_method m,
			  const struct rpc_result_def **ret_defs)
{
	size_t i = 0, n = 0;

	while (i < ARRAY_SIZE(results) && results[i].method != m)
		i++;
	while (i + n < ARRAY_SIZE(results) && results[i + n].method == m)
		n++;
	if (n > 0)
		*ret_defs = &results[i];
	return n;
}

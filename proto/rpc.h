/*
 * The client protocol (JSON-RPC 2.0 over NDJSON): method names, who may
 * call each, their parameters, and the error codes.  The single source of
 * truth is proto/rpc.def; spd, spctl and the tests all use these tables.
 */
#ifndef SPD_PROTO_RPC_H
#define SPD_PROTO_RPC_H

#include <stddef.h>

/* A frame (one request line) may be at most this long: a bigger one is a
 * client bug or an attack on spd's memory, and ends the connection. */
#define RPC_FRAME_MAX (1024 * 1024)

enum rpc_error {
#define SPD_ERROR(id, code, num, exit) RPC_E_##id,
#include "rpc.def"
	RPC_E__COUNT
};

/* spctl's exit status for a failed call (rpc.def's fourth column of
 * SPD_ERROR); spctl(1) lists them. */
enum rpc_exit {
	RPC_EXIT_USAGE = 2,
	RPC_EXIT_SPD = 125,
	RPC_EXIT_REFUSED = 126,
};

enum rpc_method {
#define SPD_METHOD(id, name, who, handler, flags) RPC_M_##id,
#include "rpc.def"
	RPC_M__COUNT
};

enum rpc_notify {
#define SPD_NOTIFY(id, name, sent_by) RPC_N_##id,
#include "rpc.def"
	RPC_N__COUNT
};

/* A method's flags (the table's fifth column). */
enum rpc_flags {
	/* Served even while the journal cannot record requests. */
	RPC_F_BEHIND = 1 << 0,
	/* May send notifications (SPD_NOTIFY) before its response. */
	RPC_F_STREAMS = 1 << 1,
};

enum rpc_who { RPC_WHO_OPERATOR, RPC_WHO_AGENT };
enum rpc_kind {
	RPC_KIND_STRING,
	RPC_KIND_INTEGER,
	RPC_KIND_BOOLEAN,
	RPC_KIND_ARRAY,
	RPC_KIND_OBJECT,
	RPC_KIND_NUMBER, /* an integer or a real */
	RPC_KIND_ANY	 /* results only: any JSON value */
};

/* A result field's flags (SPD_RESULT's fourth column). */
enum rpc_result_flags {
	RPC_R_OPTIONAL = 1 << 0, /* may be absent */
	RPC_R_NULL = 1 << 1,	 /* may be null */
};

struct rpc_result_def {
	enum rpc_method method;
	const char *name;
	enum rpc_kind kind;
	unsigned flags;
};

struct rpc_param_def {
	enum rpc_method method;
	const char *name;
	enum rpc_kind kind;
	int required;
};

/* Symbolic code ("BAD-REQUEST") of an error; never NULL for a valid enum. */
const char *rpc_error_code(enum rpc_error e);
/* JSON-RPC numeric code of an error. */
int rpc_error_number(enum rpc_error e);
/* The error whose JSON-RPC number is num; -1 when none is. */
int rpc_error_by_number(long num);
/* spctl's exit status for e (enum rpc_exit); RPC_EXIT_SPD out of range. */
int rpc_error_exit(enum rpc_error e);
/* Method name for an enum value; NULL when out of range. */
const char *rpc_method_name(enum rpc_method m);
/* Who may call a method. */
enum rpc_who rpc_method_who(enum rpc_method m);
/* A method's flags (enum rpc_flags); 0 when out of range. */
unsigned rpc_method_flags(enum rpc_method m);
/* Notification name ("run.output"); NULL when out of range. */
const char *rpc_notify_name(enum rpc_notify n);
/* Look up a method by name: returns its enum or -1 when unknown. */
int rpc_method_lookup(const char *name);
/*
 * The parameter table for a method: stores its first entry in *ret_defs
 * and returns how many there are (0 when the method takes none).
 */
size_t rpc_method_params(enum rpc_method m,
			 const struct rpc_param_def **ret_defs);
/* The result fields the table declares for m; 0 when it declares none
 * (the method answers null or {}). */
size_t rpc_method_results(enum rpc_method m,
			  const struct rpc_result_def **ret_defs);

#endif

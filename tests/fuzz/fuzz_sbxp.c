/*
 * Fuzz the messages sandboxd accepts from spd (proto/sandbox.c): the RUN
 * body is the one variable-length message, split by sbxp_run_decode in
 * the privileged spawner, and sbxp_recv checks every datagram's header.
 *
 * Checked for every input:
 *   - sbxp_run_decode on the bytes as a RUN body never reads outside
 *     them (the body is copied into a buffer of exactly that size, so
 *     ASan sees any overrun) and, when it accepts them, every string it
 *     hands out lies inside the string table, and sbxp_run_encode of the
 *     decoded view gives back exactly the same bytes, and the descriptors
 *     its flags announce (sbxp_run_nfds: one output pipe or two, stdin)
 *     are at least one and no more than sbxp_recv takes;
 *   - sbxp_recv of the bytes as one datagram never crashes, accepts only
 *     a header whose len matches what arrived, and a body it returns as a
 *     RUN goes through the same decode.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/util.h"
#include "proto/sandbox.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_run(const void *body, size_t len)
{
	struct sbxp_run_view v = {0};
	const char *lo, *hi;
	struct sbxp_run *m2;
	long n;

	if (sbxp_run_decode(body, len, &v) < 0)
		return;
	/* sandboxd reads fds[0] and fds[nfds - 1] of what it received. */
	if (sbxp_run_nfds(v.msg->flags) < 1 ||
	    sbxp_run_nfds(v.msg->flags) > SBXP_RUN_FDS)
		abort();
	lo = v.msg->strtab;
	hi = lo + v.msg->strtab_len;
	if (v.workspace < lo || v.cwd < lo || v.home < lo ||
	    v.workspace >= hi || v.cwd >= hi || v.home >= hi)
		abort();
	for (int i = 0; i < SBXP_L__COUNT; i++) {
		uint32_t k = 0;

		for (; v.lists[i][k]; k++)
			if (v.lists[i][k] < lo ||
			    v.lists[i][k] + strlen(v.lists[i][k]) >= hi)
				abort();
		if (k != v.msg->counts[i])
			abort();
	}

	/* Re-encode from the view with the same fixed fields. */
	m2 = aligned_alloc(8, SBXP_MSG_MAX);
	if (!m2)
		abort();
	memset(m2, 0xa5, SBXP_MSG_MAX);
	memcpy(m2, v.msg, offsetof(struct sbxp_run, strtab));
	const char *const *lists[SBXP_L__COUNT];
	for (int i = 0; i < SBXP_L__COUNT; i++)
		lists[i] = v.lists[i];
	n = sbxp_run_encode(m2, v.workspace, v.cwd, v.home, lists);
	if (n < 0 || (size_t)n != len || memcmp(m2, body, len) != 0)
		abort();
	free(m2);
	sbxp_run_view_free(&v);
}

static void check_recv(const uint8_t *data, size_t size)
{
	static int sv[2] = {-1, -1};
	static void *buf;
	struct sbxp_hdr h;
	int fds[SBXP_RUN_FDS];
	size_t nfds = 0;
	long n;

	if (sv[0] < 0 &&
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	if (!buf && !(buf = aligned_alloc(8, SBXP_MSG_MAX)))
		abort();
	if (send(sv[0], data, size, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		return; /* larger than the socket takes */
	n = sbxp_recv(sv[1], buf, &h, fds, &nfds);
	if (n >= 0) {
		if (size < sizeof(h) || (size_t)n != size - sizeof(h) ||
		    h.len != (uint32_t)n || nfds != 0 ||
		    memcmp(buf, data + sizeof(h), (size_t)n) != 0)
			abort();
		if (h.type == SBXP_RUN)
			check_run(buf, (size_t)n);
	} else if (size >= sizeof(h) && size <= SBXP_MSG_MAX) {
		/* A whole datagram whose header's len is right must pass. */
		memcpy(&h, data, sizeof(h));
		if (h.len == size - sizeof(h))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	void *body;

	/* Exactly size bytes on the heap (malloc aligns for the body's
	 * 64-bit fields): a read past the end is an ASan report. */
	body = malloc(size ? size : 1);
	if (!body)
		abort();
	if (size)
		memcpy(body, data, size);
	check_run(body, size);
	free(body);
	check_recv(data, size);
	return 0;
}

/*
 * Fuzz the reader of a git push's ref updates (daemon/proxy/pktline.c),
 * bytes a sandboxed run sends through the proxy.  For every input:
 *   - a verdict never changes once given: a prefix that is refused (-1)
 *     or complete (1) gives the same verdict and the same updates as
 *     every longer input; a prefix short of that needs more (0);
 *   - every update read has two ids of the same length (40 or 64 hex
 *     digits) and a ref of printable bytes without a space, within
 *     PROXY_REF_MAX, and there are never more than asked for;
 *   - a refusal says why.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/proxy/proxy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAXU 8

static void check_updates(const struct proxy_pkt_update *u, size_t n)
{
	if (n > MAXU)
		abort();
	for (size_t i = 0; i < n; i++) {
		size_t a = strlen(u[i].old_id), b = strlen(u[i].new_id);

		if (a != b || (a != 40 && a != 64) ||
		    strspn(u[i].old_id, "0123456789abcdef") != a ||
		    strspn(u[i].new_id, "0123456789abcdef") != b ||
		    strlen(u[i].ref) >= PROXY_REF_MAX || strchr(u[i].ref, ' '))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proxy_pkt_update full[MAXU], part[MAXU];
	const char *why = NULL;
	size_t nf = 0, np = 0, step;
	int rf, rp;

	if (size > 8192)
		return 0;
	rf =
	    proxy_pkt_commands((const char *)data, size, full, MAXU, &nf, &why);
	if (rf < -1 || rf > 1 || (rf == -1 && !why))
		abort();
	if (rf == 1)
		check_updates(full, nf);
	step = size / 64 + 1;
	for (size_t i = 0; i < size; i += step) {
		rp = proxy_pkt_commands((const char *)data, i, part, MAXU, &np,
					&why);
		if (rp == 0)
			continue;
		if (rp != rf)
			abort();
		if (rp == 1) {
			check_updates(part, np);
			if (np != nf)
				abort();
			for (size_t k = 0; k < np; k++)
				if (strcmp(part[k].ref, full[k].ref) ||
				    strcmp(part[k].old_id, full[k].old_id) ||
				    strcmp(part[k].new_id, full[k].new_id))
					abort();
		}
	}
	return 0;
}

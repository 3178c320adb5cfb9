/*
 * Dropping every capability, for good, and checking that it happened.
 *
 * The child that calls this is uid 0 in its own user namespace (or real
 * root when spd runs as root), so it starts with a full set.  The order
 * matters: securebits and the bounding set need CAP_SETPCAP, so they go
 * first, and the effective/permitted/inheritable sets last.
 *
 * libcap-ng clears the three process sets.  The bounding and ambient sets
 * are cleared with prctl() directly: libcap-ng 0.8's capng_apply() with
 * CAPNG_SELECT_BOUNDS first re-reads the process with fopen() of
 * /proc/<pid>/status, which allocates (not safe between fork and exec) and,
 * in a fresh pid namespace with the host's /proc still mounted, reads
 * another process's file.  It would then do the same prctl() calls.
 *
 * The read-back uses the raw capget()/prctl() interfaces rather than
 * libcap-ng's cached state, so it checks what the kernel holds, not what
 * the library believes.
 */
#include <errno.h>
#include <stdint.h>
#include <cap-ng.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandboxd/linux/layers.h"

/* Capabilities are numbered within a 64-bit mask (two 32-bit words in the
 * v3 capget ABI); the kernel reports the last one it knows with EINVAL. */
#define SBX_CAP_MAX 64

/*
 * NOROOT: uid 0 gains no capabilities on execve — the run may be uid 0
 * inside its user namespace, and without this an exec would refill the
 * permitted set from the bounding set (empty too, but two walls).
 * NO_CAP_AMBIENT_RAISE: the ambient set stays empty.  KEEP_CAPS stays off.
 * Every bit is locked so the run cannot undo it.
 */
#define SBX_SECUREBITS                                                         \
	(SECBIT_NOROOT | SECBIT_NOROOT_LOCKED |                                \
	 SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |             \
	 SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED)

int layer_caps_lock_securebits(void)
{
	int cur = prctl(PR_GET_SECUREBITS, 0, 0, 0, 0);

	if (cur < 0)
		return -errno;
	if ((cur & SBX_SECUREBITS) == SBX_SECUREBITS)
		return 0;
	if (prctl(PR_SET_SECUREBITS, (unsigned long)(cur | SBX_SECUREBITS), 0,
		  0, 0) < 0)
		return -errno;
	return 0;
}

/* Dropping one already dropped succeeds: no need to read it first. */
int layer_caps_drop_bounding(void)
{
	for (int cap = 0; cap < SBX_CAP_MAX; cap++) {
		if (prctl(PR_CAPBSET_DROP, (unsigned long)cap, 0, 0, 0) == 0)
			continue;
		if (errno == EINVAL)
			break; /* past the kernel's last capability */
		return -errno;
	}
	return 0;
}

/* True when the kernel reports no capability in any set.  The ambient set
 * needs no call of its own: the kernel keeps it within permitted and
 * inheritable, both read empty here. */
static bool caps_all_empty(void)
{
	struct __user_cap_header_struct hdr = {
	    .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

	if (syscall(SYS_capget, &hdr, data) < 0)
		return false;
	for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
		if (data[i].effective || data[i].permitted ||
		    data[i].inheritable)
			return false;
	for (int cap = 0; cap < SBX_CAP_MAX; cap++) {
		int b = prctl(PR_CAPBSET_READ, (unsigned long)cap, 0, 0, 0);

		if (b < 0 && errno == EINVAL)
			break;
		if (b != 0)
			return false;
	}
	return true;
}

int layer_caps_drop_all(void)
{
	/* Both need CAP_SETPCAP.  Their errors are not returned here: a
	 * caller without it (unprivileged, outside a user namespace) keeps a
	 * full bounding set, and the read-back below refuses that; a caller
	 * whose sets are already all empty has nothing left to lock. */
	(void)layer_caps_lock_securebits();
	(void)layer_caps_drop_bounding();
	/* Ambient: EINVAL on kernels before 4.3, which have none. */
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 &&
	    errno != EINVAL)
		return -errno;
	capng_clear(CAPNG_SELECT_CAPS);
	if (capng_apply(CAPNG_SELECT_CAPS) < 0)
		return -EPERM;
	if (!caps_all_empty())
		return -EPERM;
	return 0;
}

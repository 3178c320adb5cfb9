/*
 * Small helpers shared by spd, sandboxd and spctl: clean-up attributes,
 * array sizes and the project's error numbers.  Header only.
 */
#ifndef SPD_COMMON_UTIL_H
#define SPD_COMMON_UTIL_H

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define SPD_VERSION "0.1.0"

/*
 * Project error numbers, returned negated like -errno.  They sit above the
 * errno range so that a caller can tell them apart from kernel errors.
 */
enum {
	SPD_EFIRST = 10000,
	SPD_EPROTO,   /* a peer broke the wire format */
	SPD_ETOOBIG,  /* a limit was exceeded */
	SPD_EUTF8,    /* invalid UTF-8 */
	SPD_EPERM,    /* refused by policy or authentication */
	SPD_ECORRUPT, /* stored data failed an integrity check */
};

static inline void freep(void *p)
{
	free(*(void **)p);
}

static inline void closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)

/* Take ownership out of a _cleanup_ variable: returns it and leaves NULL. */
#define steal_ptr(p)                                                           \
	({                                                                     \
		__typeof__(p) _tmp = (p);                                      \
		(p) = NULL;                                                    \
		_tmp;                                                          \
	})

#define steal_fd(fd)                                                           \
	({                                                                     \
		int _tmp = (fd);                                               \
		(fd) = -1;                                                     \
		_tmp;                                                          \
	})

#endif

/*
 * Start and stop the daemon's modules that sit between the journal and
 * the socket: the sandbox spawner, sessions, secrets, approvals.  One
 * place, so that main.c keeps its order and each module its own code.
 */
#ifndef SPD_DAEMON_MODULES_H
#define SPD_DAEMON_MODULES_H

#include <stddef.h>

struct spd;

/* Start every module.  Returns 0, or -errno with a sentence in errbuf. */
int modules_start(struct spd *spd, char *errbuf, size_t errlen);
/* Stop every module (ending runs in flight), then call cb. */
void modules_close(struct spd *spd, void (*cb)(void *data), void *data);

#endif

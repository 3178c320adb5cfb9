/*
 * A provider stand-in for the broker benchmark (bench/broker.c), in C: one
 * process, one thread, epoll, no allocation per call.  The Python stand-in
 * (tests/lib/provider_standin.py) serves the tests; under 32 calls at once
 * its interpreter lock made its own latency swing between 0.1 and 4 ms
 * from run to run, which left "spd's added time" meaningless.  This one
 * answers POST /v1/messages (any path, in fact) the way the Python one's
 * "ok" and "stream" modes do, with the same bodies and usage:
 *
 *   x-standin-mode: stream   server-sent events, chunked, written in
 *                            pieces of x-standin-piece bytes (default 7,
 *                            as the Python stand-in; 0: an event a write)
 *   x-standin-wait: FILE     after the first event, hold the stream until
 *                            FILE exists (checked every 10 ms)
 *   Connection: close        close after the reply; else keep-alive
 *
 * It does not check keys: the bench measures time, the tests the rest.
 */
#ifndef SPD_TESTS_FAST_STANDIN_H
#define SPD_TESTS_FAST_STANDIN_H

#include <sys/types.h>

/*
 * Forks the stand-in, listening on 127.0.0.1 on a free port.  Returns its
 * pid (stop it with SIGTERM) and the port in *ret_port, or -1.
 */
pid_t fast_standin_start(int *ret_port);

#endif

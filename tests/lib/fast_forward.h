/*
 * The floor for the broker benchmark (bench/broker.c): a forwarder that
 * does nothing but move bytes between a client and the provider stand-in
 * (tests/lib/fast_standin.h), so that the bench shows, in the same run,
 * what any proxy adds on the machine it runs on.  C, epoll, non-blocking,
 * no allocation per call (two buffers per client connection).
 *
 * Each client connection gets one kept-alive upstream connection, opened
 * on its first request.  For each request: the whole request is read
 * (its head up to the blank line and a Content-Length body), written
 * upstream unchanged, and the upstream's bytes are written to the client
 * as each read brings them (a stream is not held to its end).  It parses
 * only the reply's framing (Content-Length, or chunked to its last chunk,
 * or to the close), to know when the next request may go.
 *
 * threads loops (epoll_wait each): 1 as spd's one loop thread, 2 a loop
 * per core.  One listener, on the first loop; the connections it accepts
 * are dealt round-robin to the loops (so 32 are split 16/16, where
 * SO_REUSEPORT's hash of the ports would split them unevenly), and each
 * stays on its loop.  TCP_NODELAY on every socket.
 */
#ifndef SPD_TESTS_FAST_FORWARD_H
#define SPD_TESTS_FAST_FORWARD_H

#include <sys/types.h>

/*
 * Forks the forwarder, listening on 127.0.0.1 on a free port, forwarding
 * to 127.0.0.1:upstream_port with threads loops (1 or more).  Returns
 * its pid (stop it with SIGTERM) and the port in *ret_port, or -1.
 */
pid_t fast_forward_start(int upstream_port, int threads, int *ret_port);

#endif

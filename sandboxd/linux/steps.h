/*
 * The run's setup steps in the step trace (common/trace.h, issue 16).
 *
 * A run's init and its command, until each executes, share sandboxd's
 * memory (spawn.c, SPAWN_SHARED_VM) while the process that started it
 * waits: they cannot write the trace, but they can note each step's name
 * and CLOCK_MONOTONIC time in one table here, which sandboxd writes out
 * once clone returns.  spawn_step is async-signal-safe (clock_gettime)
 * and one branch when the trace is off.  After a fork (under
 * AddressSanitizer) the child's steps are lost, which is harmless.
 */
#ifndef SPD_SANDBOXD_LINUX_STEPS_H
#define SPD_SANDBOXD_LINUX_STEPS_H

#include <stdbool.h>
#include <stdint.h>

/* Steps of one run: about 20 of init and the command, one per mount
 * operation; later ones are dropped. */
#define SPAWN_STEPS_MAX 128

struct spawn_steps {
	bool on;
	unsigned int n;
	struct {
		const char *name; /* static */
		int idx;	  /* printed after the name when >= 0 */
		uint64_t ns;
	} s[SPAWN_STEPS_MAX];
};

extern struct spawn_steps spawn_steps;

/* Notes step name (a static string) now, numbered idx when idx >= 0. */
void spawn_step_idx(const char *name, int idx);

static inline void spawn_step(const char *name)
{
	if (spawn_steps.on)
		spawn_step_idx(name, -1);
}

/* Empties the table; on says whether the next run's steps are noted. */
void spawn_steps_reset(bool on);

/* Writes the noted steps to the trace, each as "<prefix><name>[.idx]",
 * empties the table and stops noting until the next reset. */
void spawn_steps_flush(const char *prefix);

#endif

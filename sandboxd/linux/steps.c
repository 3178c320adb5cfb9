/*
 * The run's setup steps in the step trace (sandboxd/linux/steps.h).
 */
#include "sandboxd/linux/steps.h"

#include <stdio.h>
#include <time.h>

#include "common/trace.h"

struct spawn_steps spawn_steps;

void spawn_step_idx(const char *name, int idx)
{
	struct timespec ts;
	unsigned int n = spawn_steps.n;

	if (!spawn_steps.on || n >= SPAWN_STEPS_MAX)
		return;
	/* clock_gettime is async-signal-safe (POSIX.1-2008). */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	spawn_steps.s[n].name = name;
	spawn_steps.s[n].idx = idx;
	spawn_steps.s[n].ns =
	    (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	spawn_steps.n = n + 1;
}

void spawn_steps_reset(bool on)
{
	spawn_steps.n = 0;
	spawn_steps.on = on;
}

void spawn_steps_flush(const char *prefix)
{
	char label[64];

	for (unsigned int i = 0; i < spawn_steps.n && i < SPAWN_STEPS_MAX;
	     i++) {
		if (spawn_steps.s[i].idx >= 0)
			snprintf(label, sizeof(label), "%s%s.%02d", prefix,
				 spawn_steps.s[i].name, spawn_steps.s[i].idx);
		else
			snprintf(label, sizeof(label), "%s%s", prefix,
				 spawn_steps.s[i].name);
		trace_stamp_at(label, spawn_steps.s[i].ns);
	}
	/* Off until the next run's reset: a spare made meanwhile (spawn.h)
	 * notes nothing while sandboxd goes on. */
	spawn_steps.on = false;
	spawn_steps.n = 0;
}

/*
 * Work off spd's loop (daemon/pool.h): libuv's uv_queue_work with the
 * request kept here.
 */
#include <errno.h>
#include <stdlib.h>

#include "daemon/pool.h"

struct pool_job {
	uv_work_t req;
	pool_fn work, done;
	void *data;
};

static void job_work(uv_work_t *req)
{
	struct pool_job *j = req->data;

	j->work(j->data);
}

static void job_after(uv_work_t *req, int status)
{
	struct pool_job *j = req->data;
	pool_fn done = j->done;
	void *data = j->data;

	/* spd cancels none; one cancelled is done here rather than left
	 * half made. */
	if (status < 0)
		j->work(data);
	free(j);
	if (done)
		done(data);
}

int pool_queue(uv_loop_t *loop, pool_fn work, pool_fn done, void *data)
{
	struct pool_job *j;
	int r;

	if (!loop)
		return -EINVAL;
	j = malloc(sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->req.data = j;
	j->work = work;
	j->done = done;
	j->data = data;
	r = uv_queue_work(loop, &j->req, job_work, job_after);
	if (r < 0)
		free(j);
	return r;
}

void pool_run(uv_loop_t *loop, pool_fn work, pool_fn done, void *data)
{
	if (pool_queue(loop, work, done, data) == 0)
		return;
	work(data);
	if (done)
		done(data);
}

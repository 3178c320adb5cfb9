#include "modules.h"
#include "spd.h"

int modules_start(struct spd *spd, char *errbuf, size_t errlen)
{
	(void)spd;
	(void)errbuf;
	(void)errlen;
	return 0;
}

void modules_close(struct spd *spd, void (*cb)(void *data), void *data)
{
	(void)spd;
	cb(data);
}

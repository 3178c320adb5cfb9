#include <stdio.h>
int main(void)
{
	puts("spd: not yet");
	return 1;
}

/* A program with one invalid read: the memcheck harness must report it
 * (tests/memcheck.rs). */
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
	volatile char *p = malloc(16);
	int v;
	if (!p)
		return 1;
	p[0] = 1;
	v = p[16]; /* one past the end */
	free((void *)p);
	printf("memcheck_bad: %d\n", v != 0);
	return 0;
}

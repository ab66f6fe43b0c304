/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Loads libfabric (and with it whatever libraries it links, such as
 * libinfinipath, whose SIGSEGV handler writes a `*.btr` backtrace file into
 * the current directory), then crashes. The suite checks that a crashing
 * test program writes nothing into the source tree.
 */
#include <rdma/fabric.h>

#include <signal.h>
#include <stdio.h>

int main(void)
{
	printf("libfabric %u.%u\n", FI_MAJOR(fi_version()), FI_MINOR(fi_version()));
	fflush(stdout);
	raise(SIGSEGV);
	return 0;
}

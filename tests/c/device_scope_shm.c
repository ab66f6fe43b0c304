/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* Scopes on the shm provider (see device_scope.h): one process, its
 * endpoint writing to itself. Prints "device_scope shm: ok". */
#include "shm_common.h"
#include "device_scope.h"

int main(void)
{
	struct world w;
	struct scope_env env;

	spawn(&w, 1);
	open_world(&w, FI_CQ_FORMAT_TAGGED);
	memset(&env, 0, sizeof(env));
	env.prov = "shm";
	env.ep = &w.ep;
	env.cq = &w.cq;
	env.cntr = &w.wcntr;
	env.peer = &w.raw[0];
	env.heap = w.heap;
	env.rbase = w.cards[0].base;
	env.rkey = w.cards[0].key;
	failures += sc_run_all(&env);
	close_world(&w);
	return finish(&w, "device_scope shm");
}

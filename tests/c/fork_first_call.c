/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Forks while another thread makes the process's first call, the one that
 * loads the provider plugins: in each of ROUNDS fresh processes (that have
 * made no fi_xpu call), a thread calls fi_xpu_getinfo while the main thread
 * forks until that call returns (and at least FORKS times). Each child
 * calls fi_xpu_getinfo itself and must find the provider named by
 * FI_XPU_PROVIDER. A child forked while its parent's thread was loading the
 * plugins, which would wait for that load forever, is ended by alarm(10)
 * and the test fails. Prints "fork_first_call: ok" when every child found
 * the provider.
 *
 *   fork_first_call ROUNDS FORKS
 */
#include <fi_xpu.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "fork_child.h"

static volatile int done;

/* 0 when fi_xpu_getinfo lists the provider named by FI_XPU_PROVIDER. */
static int finds_provider(void)
{
	const char *want = getenv("FI_XPU_PROVIDER");
	struct fi_xpu_info *info = NULL, *i;
	int found = 0;
	if (fi_xpu_getinfo(FI_XPU_VERSION(FI_XPU_MAJOR_VERSION, FI_XPU_MINOR_VERSION), NULL, 0,
			   &info) != 0)
		return 1;
	for (i = info; i; i = i->next)
		found |= want && i->prov_name && strcmp(i->prov_name, want) == 0;
	fi_xpu_freeinfo(info);
	return !found;
}

static void *first_call(void *arg)
{
	int *rc = arg;
	*rc = finds_provider();
	done = 1;
	return NULL;
}

/* A child finds the provider. */
static int child(void *arg)
{
	(void)arg;
	return finds_provider();
}

/* A fresh process: its first call on a thread, forks meanwhile. */
static int round_of_forks(int forks)
{
	pthread_t t;
	int rc = -1, i;
	CHECK(pthread_create(&t, NULL, first_call, &rc) == 0);
	for (i = 0; i < forks || !done; i++)
		if (fork_child(i, child, NULL))
			return 1;
	CHECK(pthread_join(t, NULL) == 0);
	if (rc != 0)
		fprintf(stderr, "the first call did not find the provider\n");
	return rc != 0;
}

int main(int argc, char **argv)
{
	int r, rounds, forks;
	CHECK(argc == 3);
	rounds = atoi(argv[1]);
	forks = atoi(argv[2]);
	for (r = 0; r < rounds; r++) {
		pid_t p = fork();
		int st;
		CHECK(p >= 0);
		if (p == 0)
			_exit(round_of_forks(forks));
		CHECK(waitpid(p, &st, 0) == p);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "round %d failed\n", r);
			return 1;
		}
	}
	printf("fork_first_call: ok\n");
	return 0;
}

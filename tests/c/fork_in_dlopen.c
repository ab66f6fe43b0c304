/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Forks while another thread is inside the dlopen of a provider plugin
 * whose constructor sleeps, then registers fork handlers (the test
 * plugin's TP_CTOR_ATFORK_MS). The library makes a fork wait for its own
 * dlopen calls, for one second at most (a constructor may wait for the
 * fork). With a short constructor the child starts with a whole dynamic
 * loader and its first call loads the plugin; with a long one the fork
 * goes ahead, the parent's load still succeeds, and the child, whose
 * dynamic loader is left mid-dlopen, gets an error from fi_xpu_getinfo
 * (the plugin refused, with the reason logged) instead of a crash in the
 * dynamic loader.
 *
 * Prints "parent: found <provider>" and "child: fi_xpu_getinfo <rc>".
 *
 *   fork_in_dlopen DELAY_MS   (how long after the first call to fork)
 */
#include <fi_xpu.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static int getinfo(struct fi_xpu_info **info)
{
	return fi_xpu_getinfo(FI_XPU_VERSION(FI_XPU_MAJOR_VERSION, FI_XPU_MINOR_VERSION), NULL, 0,
			      info);
}

static void *first_call(void *arg)
{
	struct fi_xpu_info **info = arg;
	CHECK(getinfo(info) == 0 && *info);
	return NULL;
}

int main(int argc, char **argv)
{
	struct fi_xpu_info *info = NULL;
	struct timespec delay;
	pthread_t t;
	pid_t p;
	int st, ms;
	CHECK(argc == 2);
	ms = atoi(argv[1]);
	delay.tv_sec = ms / 1000;
	delay.tv_nsec = (ms % 1000) * 1000000L;
	alarm(30);
	/* One fork first: the handlers' first run on a thread registers its
	 * thread-exit work with glibc, which itself waits for any dlopen; the
	 * fork below then waits only as the library makes it wait. */
	p = fork();
	CHECK(p >= 0);
	if (p == 0)
		_exit(0);
	CHECK(waitpid(p, &st, 0) == p);
	CHECK(pthread_create(&t, NULL, first_call, &info) == 0);
	nanosleep(&delay, NULL);
	p = fork();
	CHECK(p >= 0);
	if (p == 0) {
		struct fi_xpu_info *mine = NULL;
		int rc;
		alarm(10);
		rc = getinfo(&mine);
		printf("child: fi_xpu_getinfo %d\n", rc);
		fflush(stdout);
		if (rc == 0)
			fi_xpu_freeinfo(mine);
		_exit(0);
	}
	CHECK(waitpid(p, &st, 0) == p);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	printf("parent: found %s\n", info->prov_name);
	fi_xpu_freeinfo(info);
	return 0;
}

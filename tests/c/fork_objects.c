/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Forks while another thread opens and closes objects all the time, through
 * the test provider plugin (loaded as "objtest"): each child opens a domain
 * and an AV of its own, closes them and exits. A child that started with
 * one of the library's process-wide locks (the object registry, the handle
 * arena, the close hand-off) held by the parent's other thread, which the
 * child lacks, would hang in its first call: the alarm ends it and the
 * test fails. Prints "fork_objects: ok" when every child finished.
 *
 *   fork_objects FORKS
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

static struct fi_xpu_info *discover(void)
{
	struct fi_xpu_info hints, *info = NULL;
	memset(&hints, 0, sizeof(hints));
	hints.prov_name = (char *)"objtest";
	CHECK(fi_xpu_getinfo(FI_XPU_VERSION(FI_XPU_MAJOR_VERSION, FI_XPU_MINOR_VERSION), &hints, 0,
			     &info) == 0);
	return info;
}

/* One domain and one AV, opened and closed. */
static void cycle(struct fi_xpu_info *info)
{
	struct fid_xpu_domain *dom = NULL;
	struct fid_xpu_av *av = NULL;
	CHECK(fi_xpu_domain(info, NULL, &dom, NULL) == 0);
	CHECK(fi_xpu_av_open(dom, NULL, &av, NULL) == 0);
	CHECK(fi_xpu_close(&av->fid) == 0);
	CHECK(fi_xpu_close(&dom->fid) == 0);
}

static volatile int stop;

static void *keep_cycling(void *arg)
{
	struct fi_xpu_info *info = arg;
	while (!stop)
		cycle(info);
	return NULL;
}

/* A child discovers and cycles its own objects. */
static int child(void *arg)
{
	struct fi_xpu_info *mine = discover();
	(void)arg;
	cycle(mine);
	fi_xpu_freeinfo(mine);
	return 0;
}

int main(int argc, char **argv)
{
	struct fi_xpu_info *info;
	pthread_t t;
	int i, forks;

	CHECK(argc == 2);
	forks = atoi(argv[1]);
	info = discover();
	CHECK(pthread_create(&t, NULL, keep_cycling, info) == 0);
	for (i = 0; i < forks; i++)
		if (fork_child(i, child, NULL))
			exit(1);
	stop = 1;
	CHECK(pthread_join(t, NULL) == 0);
	fi_xpu_freeinfo(info);
	printf("fork_objects: ok\n");
	return 0;
}

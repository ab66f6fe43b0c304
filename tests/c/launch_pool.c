/* The host launcher's threads: kept between launches, work item 0 on the
 * launching thread, idle ones ended after a while, none carried into a
 * forked child, and a launch's writes ordered with its work items' both
 * ways (run under ThreadSanitizer too).
 *
 *   launch_pool order N   N launches, ordering checks only
 *   launch_pool all       everything (about 3 s: it waits for idle threads
 *                         to end)
 */
#include <fi_xpu.h>

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "fork_child.h"

#define ITEMS 4

static pid_t tids[ITEMS];
static long in[ITEMS], out[ITEMS];

static pid_t gettid_(void)
{
	return (pid_t)syscall(SYS_gettid);
}

static uint32_t global_id(void)
{
	const struct fi_xpu_host_item *it = fi_xpu_host_item();
	return it->group_id * it->group_size + it->local_id;
}

static void record(void *arg)
{
	(void)arg;
	tids[global_id()] = gettid_();
}

static void nothing(void *arg)
{
	(void)arg;
}

/* Reads what the launching thread wrote before the launch, writes what it
 * reads after: plain accesses, which a missing ordering turns into a
 * ThreadSanitizer report (or a wrong value). */
static void step(void *arg)
{
	long k = *(const long *)arg;
	uint32_t g = global_id();
	if (in[g] != k)
		out[g] = -1;
	else
		out[g] = k + 1;
}

static int launch(uint32_t groups, uint32_t items, void (*k)(void *), void *arg)
{
	struct fi_xpu_host_launch_attr la;
	memset(&la, 0, sizeof(la));
	la.num_groups = groups;
	la.group_size = items;
	return fi_xpu_host_launch(&la, k, arg);
}

static void ordering(long n)
{
	long k;
	int i;
	for (k = 0; k < n; k++) {
		for (i = 0; i < ITEMS; i++)
			in[i] = k;
		CHECK(launch(2, ITEMS / 2, step, &k) == 0);
		for (i = 0; i < ITEMS; i++)
			CHECK(out[i] == k + 1);
	}
}

static int threads_of_this_process(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;
	CHECK(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static int cmp_tid(const void *a, const void *b)
{
	return *(const pid_t *)a - *(const pid_t *)b;
}

/* Outside the GPU-like mode work item 0 runs on the launching thread; in
 * it (FI_XPU_HOST_GPU set, as in the test suite's GPU-like pass) every
 * work item runs on a kept thread. */
static int on_caller(void)
{
	const char *gpu = getenv("FI_XPU_HOST_GPU");
	return !gpu || !*gpu;
}

static void reuse_and_release(void)
{
	pid_t first[ITEMS];
	int i, waited, own = on_caller(), kept = ITEMS - own;
	CHECK(threads_of_this_process() == 1);
	CHECK(launch(1, ITEMS, record, NULL) == 0);
	memcpy(first, tids, sizeof(first));
	CHECK(launch(1, ITEMS, record, NULL) == 0);
	/* Work item 0 on the launching thread (outside the GPU-like mode), the
	 * others on the same kept threads both times (in any order). */
	if (own)
		CHECK(first[0] == gettid_() && tids[0] == gettid_());
	qsort(first + own, (size_t)kept, sizeof(pid_t), cmp_tid);
	qsort(tids + own, (size_t)kept, sizeof(pid_t), cmp_tid);
	for (i = own; i < ITEMS; i++)
		CHECK(first[i] == tids[i] && tids[i] != gettid_());
	CHECK(threads_of_this_process() == 1 + kept);

	/* A forked child has none of them and starts its own. */
	{
		pid_t p = fork();
		int st;
		CHECK(p >= 0);
		if (p == 0) {
			alarm(20);
			if (threads_of_this_process() != 1)
				_exit(2);
			ordering(50);
			_exit(threads_of_this_process() == 1 + kept ? 0 : 3);
		}
		CHECK(waitpid(p, &st, 0) == p);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}

	/* Idle threads end (after about 2 s). */
	for (waited = 0; waited < 100 && threads_of_this_process() > 1; waited++)
		usleep(100 * 1000);
	CHECK(threads_of_this_process() == 1);
	CHECK(launch(1, ITEMS, record, NULL) == 0);
	CHECK(threads_of_this_process() == 1 + kept);
}

static volatile int stop_launching;

static void *keep_launching(void *arg)
{
	(void)arg;
	while (!stop_launching)
		CHECK(launch(1, 3, nothing, NULL) == 0);
	return NULL;
}

/* A child launches at once. */
static int launches_in_child(void *arg)
{
	(void)arg;
	ordering(5);
	return 0;
}

/* Forks while another thread launches all the time: a child must never
 * start with the launcher's bookkeeping locked by a thread it lacks. */
static void fork_while_launching(int forks)
{
	pthread_t t;
	int i;
	CHECK(pthread_create(&t, NULL, keep_launching, NULL) == 0);
	for (i = 0; i < forks; i++)
		if (fork_child(i, launches_in_child, NULL))
			exit(1);
	stop_launching = 1;
	CHECK(pthread_join(t, NULL) == 0);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "order")) {
		ordering(atol(argv[2]));
		printf("order ok\n");
		return 0;
	}
	CHECK(argc == 2 && !strcmp(argv[1], "all"));
	reuse_and_release();
	ordering(2000);
	fork_while_launching(200);
	printf("pool ok\n");
	return 0;
}

/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * What a host launch costs: fi_xpu_host_launch of an empty kernel, and of
 * a kernel whose work items meet once at a device-scope barrier, beside
 * the baseline of creating and joining one pthread per work item running
 * the same empty function (what the launcher did before it kept threads).
 * Each figure is the median over rounds of the mean of `iters` launches;
 * the two take turns round by round.
 *
 *   launch [iters] [rounds]
 *
 * Prints "launch_<G>x<N>_us <v>", "barrier_<G>x<N>_us <v>" and
 * "pthread_<G>x<N>_us <v>" lines.
 */
#include <fi_xpu.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void empty(void *arg)
{
	(void)arg;
}

static void meet(void *arg)
{
	(void)arg;
	if (fi_xpu_host_barrier(FI_XPU_DEVICE))
		abort();
}

static void *empty_thread(void *arg)
{
	(void)arg;
	return NULL;
}

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static double launches(unsigned g, unsigned n, void (*k)(void *), int iters)
{
	struct fi_xpu_host_launch_attr la;
	double t0 = now_us();
	int i;
	memset(&la, 0, sizeof(la));
	la.num_groups = g;
	la.group_size = n;
	for (i = 0; i < iters; i++)
		if (fi_xpu_host_launch(&la, k, NULL)) {
			fprintf(stderr, "fi_xpu_host_launch failed\n");
			exit(1);
		}
	return (now_us() - t0) / iters;
}

static double pthreads(unsigned items, int iters)
{
	pthread_t t[64];
	double t0 = now_us();
	unsigned j;
	int i;
	for (i = 0; i < iters; i++) {
		for (j = 0; j < items; j++)
			if (pthread_create(&t[j], NULL, empty_thread, NULL)) {
				fprintf(stderr, "pthread_create failed\n");
				exit(1);
			}
		for (j = 0; j < items; j++)
			pthread_join(t[j], NULL);
	}
	return (now_us() - t0) / iters;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	static const unsigned shapes[][2] = { { 1, 1 }, { 1, 4 }, { 2, 2 }, { 4, 4 }, { 8, 8 } };
	int iters = argc > 1 ? atoi(argv[1]) : 2000;
	int rounds = argc > 2 ? atoi(argv[2]) : 5;
	unsigned s;
	if (iters < 1 || rounds < 1 || rounds > 64)
		return 2;
	for (s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		unsigned g = shapes[s][0], n = shapes[s][1];
		double l[64], b[64], p[64];
		int r;
		for (r = 0; r < rounds; r++) {
			l[r] = launches(g, n, empty, iters);
			b[r] = launches(g, n, meet, iters);
			p[r] = pthreads(g * n, iters);
		}
		qsort(l, (size_t)rounds, sizeof(double), cmp);
		qsort(b, (size_t)rounds, sizeof(double), cmp);
		qsort(p, (size_t)rounds, sizeof(double), cmp);
		printf("launch_%ux%u_us %.2f\n", g, n, l[rounds / 2]);
		printf("barrier_%ux%u_us %.2f\n", g, n, b[rounds / 2]);
		printf("pthread_%ux%u_us %.2f\n", g, n, p[rounds / 2]);
	}
	return 0;
}

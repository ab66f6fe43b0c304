/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The shm completion ring under contention: threads that each push one
 * entry and then take one, so the ring never holds more entries than there
 * are threads, far fewer than it has room for. Every push must succeed and
 * no overflow may be counted: a push that finds the ring "full" here lost
 * a completion and left an FI_EOVERRUN entry behind it, which is what a
 * reader that read the head before the tail did when other threads pushed
 * and took entries between its two reads.
 *
 *   shm_cq_ring [seconds]   (default 2)
 * Prints "cq ring ok: N pushes".
 */
#include <fi_xpu.h>
#include <fi_xpu/device_shm.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define THREADS 4
#define RING 8 /* entries: twice the most the threads can hold at once */

static struct fi_xpu_shm_cq_ring *ring;
static double seconds = 2.0;
static int stop, failed;
static uint64_t pushes[THREADS];

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Takes one published entry, whoever pushed it (as fi_xpu_cq_read does). */
static void take_one(void)
{
	for (;;) {
		uint64_t t = fi_xpu_shm_ld(&ring->tail);
		struct fi_xpu_shm_cqe *e =
			(struct fi_xpu_shm_cqe *)((unsigned char *)ring + FI_XPU_SHM_CQ_HDR) +
			(t & (RING - 1));
		if (fi_xpu_shm_ld(&e->seq) == t + 1 && fi_xpu_shm_cas(&ring->tail, t, t + 1))
			return;
	}
}

static void *worker(void *arg)
{
	uint64_t id = (uint64_t)(uintptr_t)arg, n = 0;
	struct fi_xpu_shm_cqe_in in = fi_xpu_shm_cqe_zero();
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		int rc;
		in.context = (id << 32) | (n & 0xffffffffu);
		rc = fi_xpu_shm_ring_push(ring, RING, &in);
		if (rc != 0) {
			fprintf(stderr,
				"thread %llu: push %llu returned %d with at most %d of %d entries in use (head %llu, tail %llu)\n",
				(unsigned long long)id, (unsigned long long)n, rc, THREADS, RING,
				(unsigned long long)fi_xpu_shm_ld(&ring->head),
				(unsigned long long)fi_xpu_shm_ld(&ring->tail));
			__atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
			__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
			break;
		}
		take_one();
		n++;
	}
	pushes[id] = n;
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[THREADS];
	size_t bytes = FI_XPU_SHM_CQ_HDR + RING * sizeof(struct fi_xpu_shm_cqe);
	uint64_t total = 0;
	double end;

	if (argc > 1)
		seconds = atof(argv[1]);
	if (posix_memalign((void **)&ring, 64, bytes) != 0)
		return 2;
	memset(ring, 0, bytes);
	ring->size = RING;
	for (uintptr_t i = 0; i < THREADS; i++)
		if (pthread_create(&th[i], NULL, worker, (void *)i) != 0)
			return 2;
	end = now() + seconds;
	while (now() < end && !__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		struct timespec ms = { 0, 1000000 };
		nanosleep(&ms, NULL);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		total += pushes[i];
	}
	if (ring->overflow != 0) {
		fprintf(stderr, "overflows counted: %llu\n", (unsigned long long)ring->overflow);
		failed = 1;
	}
	if (ring->head != ring->tail || ring->head != total) {
		fprintf(stderr, "head %llu, tail %llu, pushes %llu\n",
			(unsigned long long)ring->head, (unsigned long long)ring->tail,
			(unsigned long long)total);
		failed = 1;
	}
	free(ring);
	if (failed)
		return 1;
	printf("cq ring ok: %llu pushes\n", (unsigned long long)total);
	return 0;
}

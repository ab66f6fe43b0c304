/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The shm completion ring under contention, in two phases of `seconds`
 * each.
 *
 *   room     threads that each push one entry and then take one, so the
 *            ring never holds more entries than there are threads, far
 *            fewer than it has room for. Every push must succeed and no
 *            overflow may be counted: a push that finds the ring "full"
 *            here lost a completion and left an FI_EOVERRUN entry behind
 *            it, which is what a pusher that read the head before the tail
 *            did when other threads pushed and took entries between its
 *            two reads.
 *   overrun  pushers that overflow the ring on purpose and readers that
 *            report the losses (fi_xpu_shm_report_overrun) while they take
 *            entries: the FI_EOVERRUN entries together must count exactly
 *            the completions lost, each a plausible number. A reader that
 *            read the count before what was reported could move the
 *            reported count back and report 2^64 - 1 losses.
 *
 *   shm_cq_ring [seconds]   (default 1)
 * Prints "cq ring ok: N pushes, M losses reported exactly".
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
#define READERS 6 /* more threads than cores: some stop mid-report */

static struct fi_xpu_shm_cq_ring *ring;
static double seconds = 1.0;
static int stop, failed;
static uint64_t pushes[THREADS];

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int pushing;
static uint64_t reported; /* sum of the FI_EOVERRUN entries' olen */

/* Takes the next published entry, whoever pushed it (as fi_xpu_cq_read
 * does), if there is one; 1 when taken. FI_EOVERRUN entries are added up
 * in `reported`; any other error entry is a failure. */
static int take_if_any(void)
{
	uint64_t t = fi_xpu_shm_ld(&ring->tail);
	struct fi_xpu_shm_cqe *e =
		(struct fi_xpu_shm_cqe *)((unsigned char *)ring + FI_XPU_SHM_CQ_HDR) + (t & (RING - 1));
	uint64_t is_err, olen;
	int64_t err;
	if (fi_xpu_shm_ld(&e->seq) != t + 1)
		return 0;
	is_err = e->is_err;
	err = e->err;
	olen = e->olen;
	if (!fi_xpu_shm_cas(&ring->tail, t, t + 1))
		return 0;
	if (is_err && err == -FI_EOVERRUN) {
		if (olen == 0 || olen > (1ULL << 32)) {
			fprintf(stderr, "an FI_EOVERRUN entry reports %llu losses\n",
				(unsigned long long)olen);
			__atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
		}
		__atomic_fetch_add(&reported, olen, __ATOMIC_RELAXED);
	} else if (is_err) {
		fprintf(stderr, "unexpected error entry %lld\n", (long long)err);
		__atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
	}
	return 1;
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
		while (!take_if_any())
			;
		n++;
	}
	pushes[id] = n;
	return NULL;
}

/* ---- overrun ---- */
static void *pusher(void *arg)
{
	struct fi_xpu_shm_cqe_in in = fi_xpu_shm_cqe_zero();
	(void)arg;
	while (__atomic_load_n(&pushing, __ATOMIC_RELAXED)) {
		/* In bursts: the ring overflows, then the readers report the
		 * losses while the next burst overflows it again. */
		for (int k = 0; k < 8 * RING; k++)
			(void)fi_xpu_shm_ring_push(ring, RING, &in);
		for (int k = 0; k < 50; k++)
			fi_xpu_arch_pause();
	}
	return NULL;
}

/* Reports and takes until the pushers stopped and every loss was
 * reported and taken. */
static void *reader(void *arg)
{
	(void)arg;
	for (;;) {
		fi_xpu_shm_report_overrun(ring, RING);
		if (take_if_any())
			continue;
		if (!__atomic_load_n(&pushing, __ATOMIC_RELAXED) &&
		    fi_xpu_shm_ld(&ring->overflow_seen) == fi_xpu_shm_ld(&ring->overflow) &&
		    fi_xpu_shm_ld(&ring->tail) == fi_xpu_shm_ld(&ring->head))
			return NULL;
	}
}

static void sleep_until(double end)
{
	while (now() < end && !__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		struct timespec ms = { 0, 1000000 };
		nanosleep(&ms, NULL);
	}
}

static int overrun_phase(void)
{
	pthread_t p[2], r[READERS];
	stop = 0;
	pushing = 1;
	for (int i = 0; i < 2; i++)
		if (pthread_create(&p[i], NULL, pusher, NULL) != 0)
			return 2;
	for (int i = 0; i < READERS; i++)
		if (pthread_create(&r[i], NULL, reader, NULL) != 0)
			return 2;
	sleep_until(now() + seconds);
	__atomic_store_n(&pushing, 0, __ATOMIC_RELAXED);
	for (int i = 0; i < 2; i++)
		pthread_join(p[i], NULL);
	for (int i = 0; i < READERS; i++)
		pthread_join(r[i], NULL);
	if (ring->overflow == 0) {
		fprintf(stderr, "the pushers never filled the ring\n");
		failed = 1;
	}
	if (reported != ring->overflow) {
		fprintf(stderr, "losses: %llu counted, %llu reported\n",
			(unsigned long long)ring->overflow, (unsigned long long)reported);
		failed = 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	pthread_t th[THREADS];
	size_t bytes = FI_XPU_SHM_CQ_HDR + RING * sizeof(struct fi_xpu_shm_cqe);
	uint64_t total = 0;

	if (argc > 1)
		seconds = atof(argv[1]);
	if (posix_memalign((void **)&ring, 64, bytes) != 0)
		return 2;
	memset(ring, 0, bytes);
	ring->size = RING;
	for (uintptr_t i = 0; i < THREADS; i++)
		if (pthread_create(&th[i], NULL, worker, (void *)i) != 0)
			return 2;
	sleep_until(now() + seconds);
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
	if (failed)
		return 1;
	memset(ring, 0, bytes);
	ring->size = RING;
	if (overrun_phase() != 0)
		return 2;
	if (failed)
		return 1;
	printf("cq ring ok: %llu pushes, %llu losses reported exactly\n",
	       (unsigned long long)total, (unsigned long long)reported);
	free(ring);
	return 0;
}

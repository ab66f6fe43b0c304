/* Fault injection for `ofi_stress death` over libfabric's shm provider,
 * loaded with LD_PRELOAD: once the victim calls ofi_wedge_arm(), it dies
 * (SIGKILL) at the next release of a pthread spinlock that lives in
 * another process's /dev/shm region, with that lock still held.
 *
 * libfabric 1.17's shm provider guards each endpoint's receive queue with
 * such a lock, taken by every peer that posts to it. A peer killed inside
 * that window leaves the survivor's queue locked for good, and every
 * progress call of the survivor spins; the test's own kill hits the window
 * only now and then. Here it is hit every time, so that closing with a
 * progress thread stuck in libfabric is exercised on each run. libfabric
 * versions whose queues take no such lock never trigger it; the harness
 * learns from stderr whether it fired.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int armed;

/* Called by the victim (a weak reference in ofi_stress.c) once the
 * survivor has seen enough of its writes. */
void ofi_wedge_arm(void);
void ofi_wedge_arm(void)
{
	__atomic_store_n(&armed, 1, __ATOMIC_SEQ_CST);
}

/* Whether `p` lies in a shared-memory file that is not this process's
 * own region (shm names its regions "<pid>:..."). */
static int in_foreign_region(uintptr_t p)
{
	char line[512], own[32];
	FILE *f = fopen("/proc/self/maps", "r");
	int hit = 0;

	if (!f)
		return 0;
	snprintf(own, sizeof(own), "/dev/shm/%d:", (int)getpid());
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		const char *path = strchr(line, '/');
		if (sscanf(line, "%lx-%lx", &lo, &hi) != 2 || p < lo || p >= hi)
			continue;
		hit = path && !strncmp(path, "/dev/shm/", 9) && strncmp(path, own, strlen(own));
		break;
	}
	fclose(f);
	return hit;
}

int pthread_spin_unlock(pthread_spinlock_t *lock)
{
	static int (*real)(pthread_spinlock_t *);

	if (!real) {
		/* dlsym returns a data pointer; POSIX guarantees it converts. */
		void *sym = dlsym(RTLD_NEXT, "pthread_spin_unlock");
		memcpy(&real, &sym, sizeof(real));
		if (!real)
			abort();
	}
	if (__atomic_load_n(&armed, __ATOMIC_SEQ_CST) && in_foreign_region((uintptr_t)lock)) {
		fprintf(stderr, "ofi_wedge: peer %d dies holding a lock of another process\n",
			(int)getpid());
		kill(getpid(), SIGKILL);
	}
	return real(lock);
}

/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * A peer maps the registration table of another process read-only, by the
 * kernel's seal rather than by its own good will. Rank 1 finds rank 0's
 * table where its device code reads it (the region a key names) and tries
 * what a hostile peer would: its mapping is read-only, making it writable
 * is refused (EACCES), and a store granting itself remote write access to
 * rank 0's read-only registration kills the storing process with SIGSEGV.
 * A write with that registration's key is still refused (FI_EACCES), and
 * the writable registration still works. The same holds for its endpoints'
 * information and staging lanes, which lie in that region. The memory of
 * the read-only registration is mapped read-only in the peer too (it was
 * handed a read-only descriptor): a store into it kills the storing
 * process, while a read through the key works; the writable registration
 * is mapped writable. Prints "shm_readonly: ok".
 */
#include "shm_common.h"

#include <errno.h>
#include <signal.h>
#include <sys/mman.h>

static struct world W;

/* The permissions of the mapping that holds `p` in /proc/self/maps. */
static void perms_of(const void *p, char perm[8])
{
	char line[512];
	unsigned long lo, hi;
	FILE *f = fopen("/proc/self/maps", "r");
	strcpy(perm, "?");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perm) == 3 && lo <= (uintptr_t)p &&
		    (uintptr_t)p < hi)
			break;
	fclose(f);
}

/* The page holding `p` is mapped read-only and cannot be made writable. */
static void expect_read_only(const void *p)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	char perm[8];
	perms_of(p, perm);
	EXPECT(strcmp(perm, "r--s"), 0);
	EXPECT(mprotect((void *)((uintptr_t)p & ~(page - 1)), page, PROT_READ | PROT_WRITE), -1);
	EXPECT(errno, EACCES);
}

/* A child that stores `v` into the word at `w` dies with SIGSEGV. */
static void expect_store_faults(uint64_t *w, uint64_t v)
{
	pid_t p;
	int st;
	fflush(stdout);
	fflush(stderr);
	p = fork();
	if (p == 0) {
		/* Only a store and _exit after this fork; the default action
		 * for the fault, also under AddressSanitizer, whose handler
		 * would exit instead. */
		signal(SIGSEGV, SIG_DFL);
		__atomic_store_n(w, v, __ATOMIC_SEQ_CST);
		_exit(0);
	}
	EXPECT(waitpid(p, &st, 0), p);
	EXPECT(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV, 1);
}

static void peer(void)
{
	const struct fi_xpu_shm_peer_addr *pa =
		FI_XPU_SHM_P(const struct fi_xpu_shm_peer_addr, W.raw[0]);
	const struct fi_xpu_shm_peer_map *pm = FI_XPU_SHM_P(const struct fi_xpu_shm_peer_map, pa->map);
	uint64_t key = W.cards[0].ro_key, v = 0x1234, got = 0;
	unsigned char *tab = FI_XPU_SHM_P(unsigned char, pm->base[key >> 48]);
	const struct fi_xpu_shm_heap_hdr *h = (const struct fi_xpu_shm_heap_hdr *)(void *)tab;
	struct fi_xpu_shm_mr_entry *e;
	struct fi_xpu_shm_ep_info *info;
	unsigned char *mem;
	struct fi_cq_tagged_entry ce;
	struct fi_cq_err_entry ee;
	char perm[8];

	REQUIRE(tab != NULL, 1);
	REQUIRE(h->magic, 0x6669787075686570ULL); /* "fixpuhep" */
	e = (struct fi_xpu_shm_mr_entry *)(void *)(tab + h->mr_off) + ((key >> 32) & 0xffff);
	REQUIRE(e->key, key);
	EXPECT(e->access & FI_REMOTE_WRITE, 0);
	expect_read_only(e);
	/* Grant ourselves remote write access to the read-only registration:
	 * in a child, which the store must kill. */
	expect_store_faults(&e->access, e->access | FI_REMOTE_WRITE);
	EXPECT(e->access & FI_REMOTE_WRITE, 0);
	/* The victim endpoint's information (where its remote completions
	 * and counters are) and its staging lanes lie in that same region:
	 * a child that redirects the victim's completions dies too. */
	EXPECT(pa->info_region, key >> 48);
	info = FI_XPU_SHM_P(struct fi_xpu_shm_ep_info, pm->base[pa->info_region] + pa->info_off);
	EXPECT(info->magic, 0x6669787075657062ULL); /* "fixpuepb" */
	expect_read_only(info);
	expect_read_only((const unsigned char *)info -
			 FI_XPU_SHM_STAGE_LANES * FI_XPU_SHM_STAGE_LANE_SIZE);
	expect_store_faults(&info->rx_cq, 64);
	/* The read-only registration's memory itself: peers are handed a
	 * read-only descriptor of it, so a stray store faults in the peer. */
	mem = FI_XPU_SHM_P(unsigned char, pm->base[e->region]);
	REQUIRE(mem != NULL, 1);
	EXPECT(mem[0], 0x5a);
	expect_read_only(mem);
	expect_store_faults((uint64_t *)(void *)mem, 0xa5a5a5a5a5a5a5a5ULL);
	/* Reading it through its key works. */
	got = 0;
	EXPECT(fi_xpu_read(&W.ep, &got, 8, NULL, &W.raw[0], W.cards[0].ro_base, key, &got, 0,
			   FI_XPU_WORK_ITEM), 0);
	EXPECT(next(&W, &ce, NULL), 1);
	EXPECT(got, 0x5a5a5a5a5a5a5a5aULL);
	/* A registration with remote write access is mapped writable. */
	e = (struct fi_xpu_shm_mr_entry *)(void *)(tab + h->mr_off) +
	    ((W.cards[0].key >> 32) & 0xffff);
	REQUIRE(e->key, W.cards[0].key);
	perms_of(FI_XPU_SHM_P(unsigned char, pm->base[e->region]), perm);
	EXPECT(strcmp(perm, "rw-s"), 0);
	EXPECT(fi_xpu_write(&W.ep, &v, 8, NULL, 0, &W.raw[0], W.cards[0].ro_base, key, &got, 0,
			    FI_XPU_WORK_ITEM), 0);
	EXPECT(next(&W, &ce, NULL), -FI_EAVAIL);
	memset(&ee, 0, sizeof(ee));
	EXPECT(fi_xpu_cq_readerr(&W.cq, &ee, 0, FI_XPU_WORK_ITEM), 1);
	EXPECT(ee.err, FI_EACCES);
	EXPECT(ee.op_context == &got, 1);
	/* What was granted still works. */
	EXPECT(fi_xpu_write(&W.ep, &v, 8, NULL, 0, &W.raw[0], W.cards[0].base + 64, W.cards[0].key,
			    &v, 0, FI_XPU_WORK_ITEM), 0);
	EXPECT(next(&W, &ce, NULL), 1);
	EXPECT(fi_xpu_read(&W.ep, &got, 8, NULL, &W.raw[0], W.cards[0].base + 64, W.cards[0].key,
			   &got, 0, FI_XPU_WORK_ITEM), 0);
	EXPECT(next(&W, &ce, NULL), 1);
	EXPECT(got, v);
}

int main(void)
{
	spawn(&W, 2);
	open_world(&W, FI_CQ_FORMAT_TAGGED);
	if (W.rank == 1)
		peer();
	barrier(&W);
	if (W.rank == 0) {
		/* Our read-only registration is as it was. */
		int i, same = 1;
		for (i = 0; i < 4096; i++)
			same &= W.ro[i] == 0x5a;
		EXPECT(same, 1);
	}
	close_world(&W);
	return finish(&W, "shm_readonly");
}

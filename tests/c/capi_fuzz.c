/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * A bounded fuzz driver of the host C API: `capi_fuzz PROV SEED CALLS`
 * makes CALLS calls chosen by a seeded generator, on the provider PROV,
 * through the public header as a hurried user would: objects opened,
 * bound, enabled and closed in any order; handles live, closed (stale),
 * of another class, NULL or forged (junk bytes); sizes, alignments, flags
 * and lengths at random, huge ones included; memory freed, imported and
 * registered at random addresses of the process's own buffers.
 *
 * Every call must return 0, a count, or a libfabric error code that
 * fi_xpu_strerror names; -FI_EOTHER (a panic caught at the C boundary) is
 * a failure. At the end everything still open closes (-FI_EBUSY only
 * while something depends on it). Prints "capi_fuzz PROV: CALLS calls,
 * seed SEED: ok (N made)" and the codes seen.
 */
#include <fi_xpu.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

enum { DOM, CTX, AV, CQ, CNTR, EP, MR, NCLASS };
#define SLOTS 6
#define CODES 300

static const char *class_name[NCLASS] = { "domain", "ctx", "av", "cq", "cntr", "ep", "mr" };
static struct fid *live[NCLASS][SLOTS];
static struct fid *stale[NCLASS][SLOTS];
static struct fi_xpu_info *prov;
static uint64_t rng;
static long seen[CODES + 1];
static long calls;
static unsigned char junk[4096] __attribute__((aligned(64)));
static unsigned char region[1 << 16] __attribute__((aligned(4096)));
static void *allocs[16];

static uint64_t next(void)
{
	/* splitmix64 */
	uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static unsigned pick(unsigned n) { return (unsigned)(next() % n); }

/* A size: small, at a power of two's edge, or huge. */
static uint64_t size(void)
{
	switch (pick(5)) {
	case 0: return 0;
	case 1: return 1 + pick(256);
	case 2: return (1ull << pick(64)) + (uint64_t)pick(3) - 1;
	case 3: return next();
	default: return 4096 * (1 + pick(8));
	}
}

static uint64_t flags(void)
{
	return pick(3) == 0 ? 0 : pick(2) ? (1ull << pick(64)) : next();
}

/* A handle of class `c`, or not: live, stale, of another class, NULL or junk. */
static void *handle(int c)
{
	int k = pick(10), s = pick(SLOTS);
	if (k < 6 && live[c][s])
		return live[c][s];
	if (k == 6 && stale[c][s])
		return stale[c][s];
	if (k == 7) {
		int o = pick(NCLASS);
		if (live[o][s])
			return live[o][s];
	}
	if (k == 8)
		return junk + 8 * pick(64);
	return NULL;
}

/* A buffer address: in our region, in an allocation, or junk. */
static void *addr(void)
{
	switch (pick(4)) {
	case 0: return region + pick(sizeof(region));
	case 1: return allocs[pick(16)];
	case 2: return junk;
	default: return (void *)(uintptr_t)(next() & ~(uint64_t)7);
	}
}

static void check(long r, const char *what)
{
	calls++;
	if (r >= 0)
		return;
	if (r == -FI_EOTHER || r < -CODES || strcmp(fi_xpu_strerror((int)r), "Unknown error") == 0) {
		fprintf(stderr, "call %ld (%s) returned %ld (%s)\n", calls, what, r,
			fi_xpu_strerror((int)r));
		exit(1);
	}
	seen[-r]++;
}

static void keep(int c, void *h)
{
	int s = pick(SLOTS);
	for (int i = 0; i < SLOTS; i++)
		if (!live[c][(s + i) % SLOTS]) {
			live[c][(s + i) % SLOTS] = h;
			return;
		}
	/* No room: a fresh object has no dependents and closes at once. */
	check(fi_xpu_close(h), "fi_xpu_close");
	stale[c][s] = h;
}

static void close_one(int c, int s)
{
	struct fid *h = live[c][s];
	int r;
	if (!h)
		return;
	r = fi_xpu_close(h);
	check(r, "fi_xpu_close");
	if (r == 0) {
		live[c][s] = NULL;
		stale[c][s] = h;
	}
}

static void step(void)
{
	void *out = NULL;
	int r;
	switch (pick(18)) {
	case 0:
		if (pick(4) == 0) {
			r = fi_xpu_domain(pick(8) ? prov : (void *)junk, NULL,
					  (struct fid_xpu_domain **)&out, NULL);
			check(r, "fi_xpu_domain");
			if (r == 0)
				keep(DOM, out);
		}
		break;
	case 1: {
		struct fi_xpu_ctx_open_attr a = { pick(4) ? FI_HMEM_SYSTEM : (int)pick(16),
						  pick(4) ? 0 : next(), NULL };
		r = fi_xpu_ctx_open(handle(DOM), pick(10) ? &a : NULL,
				    (struct fid_xpu_host_ctx **)&out, NULL);
		check(r, "fi_xpu_ctx_open");
		if (r == 0)
			keep(CTX, out);
		break;
	}
	case 2:
		r = fi_xpu_av_open(handle(DOM), NULL, (struct fid_xpu_av **)&out, NULL);
		check(r, "fi_xpu_av_open");
		if (r == 0)
			keep(AV, out);
		break;
	case 3: {
		struct fi_xpu_cq_attr a;
		memset(&a, 0, sizeof(a));
		a.size = pick(3) ? pick(512) : (size_t)size();
		a.flags = pick(4) ? 0 : flags();
		a.format = (int)pick(6) - 1;
		a.timeout = (int)pick(100);
		a.xpu_ctx = pick(3) ? handle(CTX) : NULL;
		r = fi_xpu_cq_open(handle(DOM), &a, (struct fid_xpu_host_cq **)&out, NULL);
		check(r, "fi_xpu_cq_open");
		if (r == 0)
			keep(CQ, out);
		break;
	}
	case 4: {
		struct fi_xpu_cntr_attr a;
		memset(&a, 0, sizeof(a));
		a.flags = pick(4) ? 0 : flags();
		a.xpu_ctx = pick(3) ? handle(CTX) : NULL;
		r = fi_xpu_cntr_open(handle(DOM), &a, (struct fid_xpu_host_cntr **)&out, NULL);
		check(r, "fi_xpu_cntr_open");
		if (r == 0)
			keep(CNTR, out);
		break;
	}
	case 5: {
		struct fi_xpu_ep_attr a;
		memset(&a, 0, sizeof(a));
		a.caps = pick(4) ? 0 : flags();
		a.tx_size = pick(3) ? 0 : (size_t)size();
		a.rx_size = pick(3) ? 0 : (size_t)size();
		a.flags = pick(4) ? 0 : flags();
		a.xpu_ctx = handle(CTX);
		r = fi_xpu_endpoint(handle(DOM), &a, (struct fid_xpu_host_ep **)&out, NULL);
		check(r, "fi_xpu_endpoint");
		if (r == 0)
			keep(EP, out);
		break;
	}
	case 6: {
		static const uint64_t bf[] = { 0, FI_TRANSMIT, FI_RECV, FI_TRANSMIT | FI_RECV,
					       FI_WRITE, FI_REMOTE_WRITE, FI_SEND | FI_READ };
		r = fi_xpu_ep_bind(handle(EP), handle(pick(NCLASS)),
				   pick(8) ? bf[pick(7)] : flags());
		check(r, "fi_xpu_ep_bind");
		break;
	}
	case 7:
		check(fi_xpu_enable(handle(EP)), "fi_xpu_enable");
		break;
	case 8: {
		unsigned char name[128];
		size_t len = pick(2) ? sizeof(name) : pick(80);
		fi_addr_t fa[4];
		void *ep = handle(EP);
		r = fi_xpu_getname(ep, name, &len);
		check(r, "fi_xpu_getname");
		if (r != 0) {
			memcpy(name, junk, sizeof(name));
		} else if (pick(3) == 0) {
			name[pick((unsigned)len)] ^= (unsigned char)(1u << pick(8));
		}
		r = fi_xpu_av_insert(handle(AV), pick(8) ? (void *)name : NULL, 1,
				     fa, pick(4) ? 0 : flags(), NULL);
		check(r, "fi_xpu_av_insert");
		break;
	}
	case 9: {
		uint64_t raw[8];
		size_t len = pick(2) ? sizeof(raw) : pick(16);
		check(fi_xpu_av_lookup(handle(AV), pick(3) ? pick(4) : next(), raw, &len,
				       pick(2) ? 0 : flags(), handle(CTX)),
		      "fi_xpu_av_lookup");
		fi_addr_t fa = pick(4);
		check(fi_xpu_av_remove(handle(AV), &fa, 1, pick(4) ? 0 : flags()),
		      "fi_xpu_av_remove");
		break;
	}
	case 10: {
		uint64_t len = pick(2) ? pick(8192) : size();
		r = fi_xpu_mr_reg(handle(DOM), pick(2) ? handle(CTX) : NULL, addr(), (size_t)len,
				  pick(3) ? FI_REMOTE_READ | FI_REMOTE_WRITE : flags(),
				  pick(3) ? 0 : next(), pick(2) ? 0 : next(),
				  pick(4) ? 0 : flags(), (struct fid_xpu_mr **)&out, NULL);
		check(r, "fi_xpu_mr_reg");
		if (r == 0)
			keep(MR, out);
		break;
	}
	case 11: {
		uint64_t key;
		unsigned char d[64];
		size_t len = pick(2) ? sizeof(d) : pick(40);
		check(fi_xpu_mr_key(handle(MR), &key), "fi_xpu_mr_key");
		check(fi_xpu_mr_desc(handle(MR), d, &len, pick(3) ? 0 : flags(), handle(CTX)),
		      "fi_xpu_mr_desc");
		break;
	}
	case 12: {
		void *a = NULL;
		int fd = -1;
		uint64_t off = 0;
		uint64_t al = pick(3) ? 0 : (pick(2) ? 1ull << pick(40) : next());
		uint64_t fl = pick(3) ? 0 : (pick(2) ? FI_XPU_ALLOC_DMABUF : flags());
		uint64_t sz = pick(2) ? 1 + pick(1 << 16) : size();
		r = fi_xpu_alloc(handle(CTX), sz, al, fl, &a, &fd, &off);
		check(r, "fi_xpu_alloc");
		if (r == 0) {
			if (fd >= 0 && pick(2)) {
				void *d = NULL;
				check(fi_xpu_import(handle(CTX), NULL, fd, 0, sz, FI_XPU_IMPORT_DMABUF,
						    &d),
				      "fi_xpu_import");
			}
			if (fd >= 0)
				close(fd);
			int s = pick(16);
			if (allocs[s])
				check(fi_xpu_free(handle(CTX), allocs[s]), "fi_xpu_free");
			allocs[s] = a;
		}
		break;
	}
	case 13:
		check(fi_xpu_free(handle(CTX), addr()), "fi_xpu_free");
		break;
	case 14: {
		void *d = NULL;
		r = fi_xpu_import(handle(CTX), pick(4) ? (void *)region : addr(),
				  pick(4) ? -1 : (int)pick(40), 0, pick(2) ? sizeof(region) : size(),
				  pick(3) ? 0 : flags(), &d);
		check(r, "fi_xpu_import");
		if (pick(2))
			check(fi_xpu_unimport(handle(CTX), pick(2) ? d : addr()), "fi_xpu_unimport");
		break;
	}
	case 15: {
		struct fid_xpu x;
		int c = pick(NCLASS);
		check(fi_xpu_export(handle(c), pick(4) ? 0 : flags(), &x), "fi_xpu_export");
		break;
	}
	case 16: {
		uint64_t v;
		void *cn = handle(CNTR);
		struct fi_cq_data_entry e[2];
		struct fi_cq_err_entry err;
		check(fi_xpu_cntr_host_read(cn, &v), "fi_xpu_cntr_host_read");
		check(fi_xpu_cntr_host_add(cn, next()), "fi_xpu_cntr_host_add");
		check(fi_xpu_cq_host_read(handle(CQ), e, pick(3)), "fi_xpu_cq_host_read");
		check(fi_xpu_cq_host_readerr(handle(CQ), &err, pick(3) ? 0 : flags()),
		      "fi_xpu_cq_host_readerr");
		break;
	}
	default:
		close_one(pick(NCLASS), pick(SLOTS));
		break;
	}
}

int main(int argc, char **argv)
{
	const char *want = argc > 1 ? argv[1] : "shm";
	uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 0) : 1;
	long n = argc > 3 ? strtol(argv[3], NULL, 0) : 20000;
	struct fi_xpu_info *info, *i;
	int pass, left;

	rng = seed;
	for (size_t k = 0; k < sizeof(junk); k++)
		junk[k] = (unsigned char)next();
	CHECK(fi_xpu_getinfo(FI_XPU_API_VERSION, NULL, 0, &info) == 0);
	for (i = info; i && strcmp(i->prov_name, want) != 0; i = i->next)
		;
	CHECK(i != NULL);
	prov = i;
	CHECK(fi_xpu_domain(prov, NULL, (struct fid_xpu_domain **)&live[DOM][0], NULL) == 0);
	while (calls < n)
		step();

	/* Everything still open closes (a context its allocations with it);
	 * dependents first, by retrying. */
	for (pass = 0, left = 1; left && pass < 2 * NCLASS * SLOTS; pass++) {
		left = 0;
		for (int c = NCLASS - 1; c >= 0; c--)
			for (int s = 0; s < SLOTS; s++) {
				if (!live[c][s])
					continue;
				int r = fi_xpu_close(live[c][s]);
				if (r == 0) {
					live[c][s] = NULL;
				} else if (r != -FI_EBUSY) {
					fprintf(stderr, "closing a %s: %d (%s)\n", class_name[c], r,
						fi_xpu_strerror(r));
					return 1;
				} else {
					left++;
				}
			}
	}
	if (left) {
		fprintf(stderr, "%d objects would not close\n", left);
		return 1;
	}
	fi_xpu_freeinfo(info);
	printf("capi_fuzz %s: %ld calls, seed %llu: ok (%ld made)\n", want, n,
	       (unsigned long long)seed, calls);
	for (int c = 1; c <= CODES; c++)
		if (seen[c])
			printf("  -%d %s: %ld\n", c, fi_xpu_strerror(-c), seen[c]);
	return 0;
}

/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The library's own memory is not the application's: an XPU context of the
 * provider named in argv[1] allocates its root and heap (shm) through the
 * same memory table as fi_xpu_alloc, and every page of every mapping the
 * context's opening added is refused by fi_xpu_free and fi_xpu_unimport
 * with -FI_EINVAL. The context then still works: an endpoint opens, and
 * the application's own allocation frees. Prints "internal_memory PROV:
 * N pages refused" on success.
 */
#include <fi_xpu.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

#define MAX_MAPS 4096

struct range {
	uintptr_t lo, hi;
};

static size_t read_maps(struct range *r, size_t max)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	size_t n = 0;

	CHECK(f != NULL);
	while (n < max && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2)
			r[n++] = (struct range){ lo, hi };
	}
	fclose(f);
	return n;
}

static int known(const struct range *r, size_t n, uintptr_t lo)
{
	for (size_t i = 0; i < n; i++)
		if (r[i].lo == lo)
			return 1;
	return 0;
}

static struct range before[MAX_MAPS], after[MAX_MAPS];

int main(int argc, char **argv)
{
	const char *prov = argc > 1 ? argv[1] : "shm";
	struct fi_xpu_info *info, *i;
	struct fid_xpu_domain *dom;
	struct fid_xpu_host_ctx *ctx;
	struct fid_xpu_host_ep *ep;
	struct fi_xpu_ctx_open_attr xattr = { FI_HMEM_SYSTEM, 0, NULL };
	struct fi_xpu_ep_attr eattr;
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	size_t nb, na, pages = 0;
	void *mine;

	CHECK(fi_xpu_getinfo(FI_XPU_API_VERSION, NULL, 0, &info) == 0);
	for (i = info; i && strcmp(i->prov_name, prov) != 0; i = i->next)
		;
	CHECK(i != NULL);
	CHECK(fi_xpu_domain(i, NULL, &dom, NULL) == 0);
	fi_xpu_freeinfo(info);

	nb = read_maps(before, MAX_MAPS);
	CHECK(fi_xpu_ctx_open(dom, &xattr, &ctx, NULL) == 0);
	na = read_maps(after, MAX_MAPS);
	CHECK(na < MAX_MAPS);

	for (size_t m = 0; m < na; m++) {
		if (known(before, nb, after[m].lo))
			continue;
		for (uintptr_t a = after[m].lo; a < after[m].hi; a += page) {
			int rf = fi_xpu_free(ctx, (void *)a);
			int ru = fi_xpu_unimport(ctx, (void *)a);

			if (rf != -FI_EINVAL || ru != -FI_EINVAL) {
				fprintf(stderr, "%#lx: fi_xpu_free = %d, fi_xpu_unimport = %d\n",
					(unsigned long)a, rf, ru);
				exit(1);
			}
			pages++;
		}
	}
	CHECK(pages > 0);

	memset(&eattr, 0, sizeof(eattr));
	eattr.xpu_ctx = ctx;
	CHECK(fi_xpu_endpoint(dom, &eattr, &ep, NULL) == 0);
	CHECK(fi_xpu_alloc(ctx, 4096, 0, 0, &mine, NULL, NULL) == 0);
	CHECK(fi_xpu_free(ctx, mine) == 0);
	CHECK(fi_xpu_free(ctx, mine) == -FI_EINVAL);
	CHECK(fi_xpu_close(&ep->fid) == 0);
	CHECK(fi_xpu_close(&ctx->fid) == 0);
	CHECK(fi_xpu_close(&dom->fid) == 0);
	printf("internal_memory %s: %zu pages refused\n", prov, pages);
	return 0;
}

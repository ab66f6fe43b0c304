/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Which memory interfaces each provider serves, as a GPU user meets it:
 * an XPU context of FI_HMEM_CUDA (with application memory callbacks, so
 * that no driver is needed) on shm and on ofi, and one of FI_HMEM_SYSTEM
 * beside it. Prints one line per provider:
 *
 *   <prov> system=<rc> cuda=<rc>
 *
 * with the return codes of fi_xpu_ctx_open. shm serves FI_HMEM_CUDA only
 * through the library's built-in backend, whatever the callbacks can do; ofi serves device memory only where
 * its libfabric provider offers FI_HMEM (Debian's libfabric 1.17 has no
 * CUDA support, so there it refuses). Each refusal logs one line naming
 * what is missing.
 *
 *   iface_support shm|ofi
 */
#include <fi_xpu.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Callbacks over host memory: enough for a context to open. */
static int cb_alloc(uint64_t device, uint64_t size, uint64_t alignment, uint64_t flags,
		    void **addr, int *fd, uint64_t *offset)
{
	(void)device;
	(void)flags;
	if (posix_memalign(addr, alignment < 64 ? 64 : alignment, size))
		return -FI_ENOMEM;
	if (fd)
		*fd = -1;
	if (offset)
		*offset = 0;
	return 0;
}

static int cb_import(uint64_t device, void *host_addr, int fd, uint64_t offset, uint64_t size,
		     uint64_t flags, void **dev_addr)
{
	(void)device;
	(void)offset;
	(void)size;
	(void)flags;
	if (fd >= 0 || !host_addr)
		return -FI_EOPNOTSUPP;
	*dev_addr = host_addr;
	return 0;
}

static int cb_unimport(uint64_t device, void *dev_addr)
{
	(void)device;
	(void)dev_addr;
	return 0;
}

static void cb_free(uint64_t device, void *addr)
{
	(void)device;
	free(addr);
}

static int open_ctx(struct fid_xpu_domain *dom, enum fi_hmem_iface iface)
{
	struct fi_xpu_mem_ops ops = { sizeof(ops), cb_alloc, cb_import, cb_unimport, cb_free, NULL };
	struct fi_xpu_ctx_open_attr attr = { .iface = iface, .device = 0, .ops = &ops };
	struct fid_xpu_host_ctx *ctx = NULL;
	int rc = fi_xpu_ctx_open(dom, &attr, &ctx, NULL);
	if (rc == 0 && fi_xpu_close(&ctx->fid) != 0) {
		fprintf(stderr, "closing the context failed\n");
		exit(1);
	}
	return rc;
}

int main(int argc, char **argv)
{
	struct fi_xpu_info hints, *info = NULL;
	struct fid_xpu_domain *dom = NULL;
	int sys, cuda;

	if (argc != 2) {
		fprintf(stderr, "usage: iface_support shm|ofi\n");
		return 2;
	}
	memset(&hints, 0, sizeof(hints));
	hints.prov_name = argv[1];
	if (fi_xpu_getinfo(FI_XPU_API_VERSION, &hints, 0, &info) != 0 ||
	    fi_xpu_domain(info, NULL, &dom, NULL) != 0) {
		fprintf(stderr, "no %s domain\n", argv[1]);
		return 1;
	}
	sys = open_ctx(dom, FI_HMEM_SYSTEM);
	cuda = open_ctx(dom, FI_HMEM_CUDA);
	printf("%s system=%d cuda=%d\n", argv[1], sys, cuda);
	fi_xpu_close(&dom->fid);
	fi_xpu_freeinfo(info);
	return 0;
}

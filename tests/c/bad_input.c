/*
 * The bad-input table: every host entry point called with NULL, unknown,
 * wrong-class, closed and double-closed handles, unknown flag bits, zero or
 * overflowing sizes, bad alignments and inconsistent fd/flag pairs. Each call
 * must return its documented code and leave out-parameters untouched. Run
 * under AddressSanitizer and valgrind by the test suite.
 *
 * usage: bad_input <provider-name>
 */
#include <fi_xpu.h>
#include <fi_xpu/device.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "expect.h"

/* Poison for out-parameters: any write shows. */
#define POISON ((void *)(uintptr_t)0x5a5a5a5a)

int main(int argc, char **argv)
{
	const char *prov = argc > 1 ? argv[1] : "test";
	uint32_t version = FI_XPU_VERSION(FI_XPU_MAJOR_VERSION, FI_XPU_MINOR_VERSION);
	struct fi_xpu_info hints, *info = POISON;
	memset(&hints, 0, sizeof(hints));

	/* Discovery. */
	EXPECT(fi_xpu_getinfo(version, NULL, 0, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_getinfo(FI_XPU_VERSION(FI_XPU_MAJOR_VERSION + 1, 0), NULL, 0, &info), -FI_ENOSYS);
	EXPECT(fi_xpu_getinfo(version, NULL, 1ULL << 63, &info), -FI_EBADFLAGS);
	hints.prov_name = (char *)"no-such-provider";
	EXPECT(fi_xpu_getinfo(version, &hints, 0, &info), -FI_ENODATA);
	EXPECT(info == POISON, 1);
	hints.prov_name = (char *)prov;
	EXPECT(fi_xpu_getinfo(version, &hints, 0, &info), 0);
	fi_xpu_freeinfo(NULL);
	EXPECT(strcmp(fi_xpu_strerror(-FI_EINVAL), "Invalid argument"), 0);
	EXPECT(strcmp(fi_xpu_strerror(FI_EAVAIL), "Error available"), 0);
	EXPECT(strcmp(fi_xpu_strerror(99999), "Unknown error"), 0);

	/* Domain. */
	struct fid_xpu_domain *dom = POISON;
	struct fi_xpu_info forged = *info;
	forged.handle = (void *)(uintptr_t)4242;
	EXPECT(fi_xpu_domain(NULL, NULL, &dom, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_domain(&forged, NULL, &dom, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_domain(info, NULL, NULL, NULL), -FI_EINVAL);
	struct fi_xpu_domain_attr dattr = { .size = 3 };
	EXPECT(fi_xpu_domain(info, &dattr, &dom, NULL), -FI_EINVAL);
	dattr.size = sizeof(dattr);
	dattr.flags = 1ULL << 7;
	EXPECT(fi_xpu_domain(info, &dattr, &dom, NULL), -FI_EBADFLAGS);
	EXPECT(dom == POISON, 1);
	EXPECT(fi_xpu_domain(info, NULL, &dom, NULL), 0);

	/* Context. */
	int stack_object = 0;
	void *garbage = &stack_object;
	struct fid_xpu_host_ctx *ctx = POISON;
	struct fi_xpu_ctx_open_attr xattr = { .iface = FI_HMEM_SYSTEM, .device = 0, .ops = NULL };
	EXPECT(fi_xpu_ctx_open(NULL, &xattr, &ctx, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_ctx_open((struct fid_xpu_domain *)garbage, &xattr, &ctx, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_ctx_open(dom, NULL, &ctx, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_ctx_open(dom, &xattr, NULL, NULL), -FI_EINVAL);
	xattr.iface = (enum fi_hmem_iface)77;
	EXPECT(fi_xpu_ctx_open(dom, &xattr, &ctx, NULL), -FI_EINVAL);
	xattr.iface = FI_HMEM_NEURON;
	EXPECT(fi_xpu_ctx_open(dom, &xattr, &ctx, NULL), -FI_EOPNOTSUPP); /* served by no provider */
	struct fi_xpu_mem_ops tiny = { .size = 1 };
	xattr.iface = FI_HMEM_SYSTEM;
	xattr.ops = &tiny;
	EXPECT(fi_xpu_ctx_open(dom, &xattr, &ctx, NULL), -FI_EINVAL);
	struct fi_xpu_mem_ops missing = { .size = sizeof(struct fi_xpu_mem_ops) };
	xattr.ops = &missing;
	EXPECT(fi_xpu_ctx_open(dom, &xattr, &ctx, NULL), -FI_EINVAL);
	EXPECT(ctx == POISON, 1);
	xattr.ops = NULL;
	EXPECT(fi_xpu_ctx_open(dom, &xattr, &ctx, NULL), 0);
	EXPECT(fi_xpu_ctx_open((struct fid_xpu_domain *)ctx, &xattr, &ctx, NULL), -FI_EINVAL); /* wrong class */

	struct fi_xpu_ctx_info cattr;
	EXPECT(fi_xpu_ctx_getinfo(NULL, &cattr), -FI_EINVAL);
	EXPECT(fi_xpu_ctx_getinfo((struct fid_xpu_host_ctx *)dom, &cattr), -FI_EINVAL);
	EXPECT(fi_xpu_ctx_getinfo(ctx, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_ctx_getinfo(ctx, &cattr), 0);
	EXPECT(fi_xpu_ctx_abort(NULL, 0), -FI_EINVAL);
	EXPECT(fi_xpu_ctx_abort((struct fid_xpu_host_ctx *)dom, 0), -FI_EINVAL);
	EXPECT(fi_xpu_ctx_abort(ctx, ~FI_XPU_ABORT_CLEAR), -FI_EBADFLAGS);
	EXPECT(fi_xpu_ctx_abort(ctx, 0), 0);
	EXPECT(fi_xpu_ctx_abort(ctx, FI_XPU_ABORT_CLEAR), 0);

	/* Memory operations. */
	void *addr = POISON;
	int fd = 1234;
	uint64_t off = 77;
	EXPECT(fi_xpu_alloc(NULL, 64, 0, 0, &addr, NULL, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_alloc((struct fid_xpu_host_ctx *)dom, 64, 0, 0, &addr, NULL, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_alloc(ctx, 64, 0, 0, NULL, NULL, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_alloc(ctx, 0, 0, 0, &addr, NULL, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_alloc(ctx, UINT64_MAX, 0, 0, &addr, NULL, NULL), -FI_EOVERFLOW);
	EXPECT(fi_xpu_alloc(ctx, 64, 3, 0, &addr, NULL, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_alloc(ctx, 64, 1ULL << 40, 0, &addr, NULL, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_alloc(ctx, 64, 0, 1ULL << 20, &addr, NULL, NULL), -FI_EBADFLAGS);
	EXPECT(fi_xpu_alloc(ctx, 64, 0, FI_XPU_ALLOC_DMABUF, &addr, NULL, &off), -FI_EINVAL);
	EXPECT(addr == POISON && fd == 1234 && off == 77, 1);
	EXPECT(fi_xpu_alloc(ctx, 4096, 4096, FI_XPU_ALLOC_DMABUF, &addr, &fd, &off), 0);
	EXPECT(((uintptr_t)addr % 4096), 0);

	void *dev = POISON;
	int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	char host[64];
	EXPECT(fi_xpu_import(NULL, host, -1, 0, 64, 0, &dev), -FI_EINVAL);
	EXPECT(fi_xpu_import(ctx, host, -1, 0, 64, 0, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_import(ctx, host, -1, 0, 0, 0, &dev), -FI_EINVAL);
	EXPECT(fi_xpu_import(ctx, NULL, -1, 0, 64, 0, &dev), -FI_EINVAL);
	EXPECT(fi_xpu_import(ctx, host, -1, 0, 64, 1ULL << 30, &dev), -FI_EBADFLAGS);
	EXPECT(fi_xpu_import(ctx, host, fd, 0, 64, 0, &dev), -FI_EINVAL);            /* fd without the flag */
	EXPECT(fi_xpu_import(ctx, NULL, -1, 0, 64, FI_XPU_IMPORT_DMABUF, &dev), -FI_EBADF); /* flag without fd */
	EXPECT(fi_xpu_import(ctx, NULL, 987, 0, 64, FI_XPU_IMPORT_DMABUF, &dev), -FI_EBADF); /* fd not open */
	EXPECT(fi_xpu_import(ctx, NULL, fd, 0, 8192, FI_XPU_IMPORT_DMABUF, &dev), -FI_EINVAL); /* past the end */
	EXPECT(fi_xpu_import(ctx, NULL, fd, UINT64_MAX - 8, 64, FI_XPU_IMPORT_DMABUF, &dev), -FI_EOVERFLOW);
	EXPECT(fi_xpu_import(ctx, NULL, devnull, 0, 64, FI_XPU_IMPORT_DMABUF, &dev), -FI_EINVAL); /* not a mappable buffer */
	EXPECT(dev == POISON, 1);
	EXPECT(fi_xpu_import(ctx, NULL, fd, 0, 4096, FI_XPU_IMPORT_DMABUF, &dev), 0);
	EXPECT(fi_xpu_unimport(NULL, dev), -FI_EINVAL);
	EXPECT(fi_xpu_unimport(ctx, host), -FI_EINVAL);
	EXPECT(fi_xpu_unimport(ctx, dev), 0);
	EXPECT(fi_xpu_unimport(ctx, dev), -FI_EINVAL);
	close(fd);
	close(devnull);
	EXPECT(fi_xpu_free(NULL, addr), -FI_EINVAL);
	EXPECT(fi_xpu_free(ctx, (char *)addr + 8), -FI_EINVAL);
	EXPECT(fi_xpu_free(ctx, NULL), -FI_EINVAL);

	/* AV. */
	struct fid_xpu_av *av = POISON;
	struct fi_xpu_av_attr avattr = { .count = 4, .flags = 1 };
	EXPECT(fi_xpu_av_open(NULL, NULL, &av, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_av_open(dom, NULL, NULL, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_av_open(dom, &avattr, &av, NULL), -FI_EBADFLAGS);
	EXPECT(av == POISON, 1);
	EXPECT(fi_xpu_av_open(dom, NULL, &av, NULL), 0);

	/* Counter and CQ. */
	struct fid_xpu_host_cq *cq = POISON, *hcq = POISON;
	struct fi_xpu_cq_attr cqattr = { .size = 16, .format = FI_CQ_FORMAT_DATA, .timeout = -1, .xpu_ctx = ctx };
	EXPECT(fi_xpu_cq_open(NULL, &cqattr, &cq, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_cq_open(dom, NULL, &cq, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_cq_open(dom, &cqattr, NULL, NULL), -FI_EINVAL);
	cqattr.format = 99;
	EXPECT(fi_xpu_cq_open(dom, &cqattr, &cq, NULL), -FI_EINVAL);
	cqattr.format = FI_CQ_FORMAT_DATA;
	cqattr.flags = 1;
	EXPECT(fi_xpu_cq_open(dom, &cqattr, &cq, NULL), -FI_EBADFLAGS);
	cqattr.flags = 0;
	cqattr.xpu_ctx = (struct fid_xpu_host_ctx *)av;
	EXPECT(fi_xpu_cq_open(dom, &cqattr, &cq, NULL), -FI_EINVAL);
	EXPECT(cq == POISON, 1);
	cqattr.xpu_ctx = ctx;
	if (strcmp(prov, "test") != 0) {
		/* Past what shm and ofi serve (2^20 entries, as fi_xpu_info
		 * reports), host or XPU: refused before anything is allocated,
		 * never an abort. */
		EXPECT(info->limits.cq_size == (uint64_t)1 << 20, 1);
		cqattr.size = (size_t)1 << 31;
		EXPECT(fi_xpu_cq_open(dom, &cqattr, &cq, NULL), -FI_EINVAL);
		cqattr.xpu_ctx = NULL;
		EXPECT(fi_xpu_cq_open(dom, &cqattr, &hcq, NULL), -FI_EINVAL);
		cqattr.size = (size_t)info->limits.cq_size + 1;
		EXPECT(fi_xpu_cq_open(dom, &cqattr, &hcq, NULL), -FI_EINVAL);
		EXPECT(hcq == POISON, 1);
		cqattr.size = 16;
		cqattr.xpu_ctx = ctx;
	}
	EXPECT(fi_xpu_cq_open(dom, &cqattr, &cq, NULL), 0);
	cqattr.xpu_ctx = NULL;
	EXPECT(fi_xpu_cq_open(dom, &cqattr, &hcq, NULL), 0);
	struct fi_cq_data_entry entries[2];
	struct fi_cq_err_entry err;
	EXPECT(fi_xpu_cq_host_read(NULL, entries, 2), -FI_EINVAL);
	EXPECT(fi_xpu_cq_host_read(cq, entries, 2), -FI_EOPNOTSUPP); /* an XPU CQ */
	EXPECT(fi_xpu_cq_host_read(hcq, NULL, 2), -FI_EINVAL);
	EXPECT(fi_xpu_cq_host_read(hcq, entries, 0), 0);
	EXPECT(fi_xpu_cq_host_read(hcq, entries, 2), -FI_EAGAIN);
	EXPECT(fi_xpu_cq_host_readerr(hcq, NULL, 0), -FI_EINVAL);
	EXPECT(fi_xpu_cq_host_readerr(hcq, &err, 5), -FI_EBADFLAGS);
	EXPECT(fi_xpu_cq_host_readerr(cq, &err, 0), -FI_EOPNOTSUPP);

	struct fid_xpu_host_cntr *cntr = POISON, *hcntr = POISON;
	struct fi_xpu_cntr_attr ctattr = { .flags = 2, .xpu_ctx = ctx };
	EXPECT(fi_xpu_cntr_open(dom, &ctattr, &cntr, NULL), -FI_EBADFLAGS);
	EXPECT(fi_xpu_cntr_open(dom, NULL, &cntr, NULL), -FI_EINVAL);
	EXPECT(cntr == POISON, 1);
	ctattr.flags = 0;
	EXPECT(fi_xpu_cntr_open(dom, &ctattr, &cntr, NULL), 0);
	ctattr.xpu_ctx = NULL;
	EXPECT(fi_xpu_cntr_open(dom, &ctattr, &hcntr, NULL), 0);
	uint64_t value = 99;
	EXPECT(fi_xpu_cntr_host_read(cntr, &value), -FI_EOPNOTSUPP);
	EXPECT(fi_xpu_cntr_host_read(hcntr, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_cntr_host_read((struct fid_xpu_host_cntr *)hcq, &value), -FI_EINVAL);
	EXPECT(value, 99);
	EXPECT(fi_xpu_cntr_host_add(hcntr, 5), 0);
	EXPECT(fi_xpu_cntr_host_adderr(hcntr, 2), 0);
	EXPECT(fi_xpu_cntr_host_read(hcntr, &value), 0);
	EXPECT(value, 5);
	EXPECT(fi_xpu_cntr_host_readerr(hcntr, &value), 0);
	EXPECT(value, 2);
	EXPECT(fi_xpu_cntr_host_set(hcntr, 1), 0);
	EXPECT(fi_xpu_cntr_host_seterr(hcntr, 0), 0);
	EXPECT(fi_xpu_cntr_host_add(NULL, 1), -FI_EINVAL);
	EXPECT(fi_xpu_cntr_host_set(cntr, 1), -FI_EOPNOTSUPP);

	/* MR. */
	struct fid_xpu_mr *mr = POISON;
	static char region[256];
	EXPECT(fi_xpu_mr_reg(NULL, NULL, region, 256, FI_REMOTE_WRITE, 0, 0, 0, &mr, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_mr_reg(dom, NULL, region, 256, FI_REMOTE_WRITE, 0, 0, 0, NULL, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_mr_reg(dom, NULL, NULL, 256, FI_REMOTE_WRITE, 0, 0, 0, &mr, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_mr_reg(dom, NULL, region, 0, FI_REMOTE_WRITE, 0, 0, 0, &mr, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_mr_reg(dom, NULL, region, 256, 0, 0, 0, 0, &mr, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_mr_reg(dom, NULL, region, 256, 1ULL << 62, 0, 0, 0, &mr, NULL), -FI_EBADFLAGS);
	EXPECT(fi_xpu_mr_reg(dom, NULL, region, 256, FI_REMOTE_WRITE, 0, 0, 4, &mr, NULL), -FI_EBADFLAGS);
	EXPECT(fi_xpu_mr_reg(dom, NULL, (void *)(UINTPTR_MAX - 16), 256, FI_REMOTE_WRITE, 0, 0, 0, &mr, NULL), -FI_EOVERFLOW);
	EXPECT(fi_xpu_mr_reg(dom, (struct fid_xpu_host_ctx *)av, region, 256, FI_REMOTE_WRITE, 0, 0, 0, &mr, NULL), -FI_EINVAL);
	EXPECT(mr == POISON, 1);
	/* Memory the context knows (allocated, imported): every provider can share it. */
	EXPECT(fi_xpu_mr_reg(dom, ctx, addr, 256, FI_REMOTE_WRITE | FI_REMOTE_READ, 0, 0, 0, &mr, NULL), 0);
	uint64_t key = 7;
	EXPECT(fi_xpu_mr_key(NULL, &key), -FI_EINVAL);
	EXPECT(fi_xpu_mr_key(mr, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_mr_key((struct fid_xpu_mr *)av, &key), -FI_EINVAL);
	EXPECT(key, 7);
	char desc[256];
	size_t len = sizeof(desc), small = 1;
	EXPECT(fi_xpu_mr_desc(mr, desc, NULL, 0, ctx), -FI_EINVAL);
	EXPECT(fi_xpu_mr_desc(mr, NULL, &len, 0, ctx), -FI_EINVAL);
	EXPECT(fi_xpu_mr_desc(mr, desc, &len, 0, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_mr_desc(mr, desc, &len, 8, ctx), -FI_EBADFLAGS);
	EXPECT(fi_xpu_mr_desc(mr, desc, &small, 0, ctx), -FI_ETOOSMALL);
	EXPECT(small > 1, 1);

	/* Memory still registered is neither freed nor unimported. */
	{
		void *buf = NULL, *imp = NULL, *alias = NULL;
		int bfd = -1;
		uint64_t boff = 0;
		struct fid_xpu_mr *amr = NULL, *imr = NULL, *again = NULL;
		EXPECT(fi_xpu_alloc(ctx, 8192, 0, FI_XPU_ALLOC_DMABUF, &buf, &bfd, &boff), 0);
		EXPECT(fi_xpu_mr_reg(dom, ctx, (char *)buf + 4096, 64, FI_REMOTE_WRITE, 0, 0, 0, &amr, NULL), 0);
		EXPECT(fi_xpu_free(ctx, buf), -FI_EBUSY);
		EXPECT(fi_xpu_import(ctx, NULL, bfd, 0, 4096, FI_XPU_IMPORT_DMABUF, &imp), 0);
		EXPECT(fi_xpu_mr_reg(dom, ctx, imp, 4096, FI_REMOTE_WRITE, 0, 0, 0, &imr, NULL), 0);
		/* Registering an already-registered range succeeds, as in libfabric. */
		EXPECT(fi_xpu_mr_reg(dom, ctx, imp, 4096, FI_REMOTE_WRITE, 0, 0, 0, &again, NULL), 0);
		EXPECT(fi_xpu_unimport(ctx, imp), -FI_EBUSY);
		/* A host import at the DMA-BUF import's address: undoing it leaves the mapping. */
		EXPECT(fi_xpu_import(ctx, imp, -1, 0, 4096, 0, &alias), 0);
		EXPECT(alias == imp, 1);
		EXPECT(fi_xpu_unimport(ctx, alias), 0);
		((volatile char *)imp)[100] = 42;
		EXPECT(((volatile char *)buf)[100], 42);
		EXPECT(fi_xpu_unimport(ctx, imp), -FI_EBUSY);
		EXPECT(fi_xpu_close(&imr->fid), 0);
		EXPECT(fi_xpu_unimport(ctx, imp), -FI_EBUSY); /* the second registration */
		EXPECT(fi_xpu_close(&again->fid), 0);
		EXPECT(fi_xpu_unimport(ctx, imp), 0);
		EXPECT(fi_xpu_free(ctx, buf), -FI_EBUSY);
		EXPECT(fi_xpu_close(&amr->fid), 0);
		EXPECT(fi_xpu_free(ctx, buf), 0);
		close(bfd);
	}

	/* Endpoint. */
	struct fid_xpu_host_ep *ep = POISON;
	struct fi_xpu_ep_attr eattr = { .caps = FI_RMA | FI_MSG, .xpu_ctx = NULL };
	EXPECT(fi_xpu_endpoint(dom, &eattr, &ep, NULL), -FI_EINVAL); /* no context */
	eattr.xpu_ctx = ctx;
	eattr.caps = 1ULL << 50;
	EXPECT(fi_xpu_endpoint(dom, &eattr, &ep, NULL), -FI_EBADFLAGS);
	eattr.caps = FI_RMA | FI_MSG;
	EXPECT(fi_xpu_endpoint(dom, NULL, &ep, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_endpoint(dom, &eattr, NULL, NULL), -FI_EINVAL);
	EXPECT(ep == POISON, 1);
	if (strcmp(prov, "ofi") == 0) {
		/* Past the deepest ring ofi serves (2^16 entries, as fi_xpu_info
		 * reports): refused before anything is allocated. */
		EXPECT(info->limits.tx_depth == (uint64_t)1 << 16, 1);
		EXPECT(info->limits.rx_depth == (uint64_t)1 << 16, 1);
		EXPECT(info->limits.msg_size == (uint64_t)1 << 48, 1);
		eattr.tx_size = (size_t)info->limits.tx_depth + 1;
		EXPECT(fi_xpu_endpoint(dom, &eattr, &ep, NULL), -FI_EINVAL);
		eattr.tx_size = 0;
		eattr.rx_size = (size_t)-1;
		EXPECT(fi_xpu_endpoint(dom, &eattr, &ep, NULL), -FI_EINVAL);
		eattr.rx_size = 0;
		EXPECT(ep == POISON, 1);
	}
	if (strcmp(prov, "shm") == 0) {
		/* shm's queues are fixed: 64 receives posted at once, no
		 * transmit queue of its own, no message size bound of its own. */
		EXPECT(info->limits.rx_depth, 64);
		EXPECT(info->limits.tx_depth, 0);
		EXPECT(info->limits.msg_size, 0);
	}
	EXPECT(fi_xpu_endpoint(dom, &eattr, &ep, NULL), 0);
	struct fid_xpu xh;
	memset(&xh, 0xab, sizeof(xh));
	EXPECT(fi_xpu_export(&ep->fid, 0, &xh), -FI_EOPBADSTATE); /* not enabled */
	EXPECT(fi_xpu_ep_bind(ep, &av->fid, 1), -FI_EBADFLAGS);
	EXPECT(fi_xpu_ep_bind(ep, &cq->fid, 0), -FI_EBADFLAGS);
	EXPECT(fi_xpu_ep_bind(ep, &cq->fid, 1ULL << 40), -FI_EBADFLAGS);
	EXPECT(fi_xpu_ep_bind(ep, &mr->fid, 0), -FI_EINVAL);
	EXPECT(fi_xpu_ep_bind(ep, NULL, 0), -FI_EINVAL);
	EXPECT(fi_xpu_ep_bind(NULL, &av->fid, 0), -FI_EINVAL);
	EXPECT(fi_xpu_ep_bind(ep, &av->fid, 0), 0);
	EXPECT(fi_xpu_ep_bind(ep, &av->fid, 0), -FI_EINVAL); /* a second AV */
	EXPECT(fi_xpu_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
	EXPECT(fi_xpu_ep_bind(ep, &cntr->fid, FI_WRITE), 0);
	EXPECT(fi_xpu_enable(NULL), -FI_EINVAL);
	EXPECT(fi_xpu_enable(ep), 0);
	EXPECT(fi_xpu_enable(ep), -FI_EOPBADSTATE);
	EXPECT(fi_xpu_ep_bind(ep, &hcq->fid, FI_RECV), -FI_EOPBADSTATE);
	char name[256];
	size_t namelen = 0;
	EXPECT(fi_xpu_getname(ep, NULL, &namelen), -FI_ETOOSMALL);
	EXPECT(namelen, info->addrlen);
	EXPECT(fi_xpu_getname(ep, name, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_getname((struct fid_xpu_host_ep *)cq, name, &namelen), -FI_EINVAL);
	EXPECT(fi_xpu_getname(ep, name, &namelen), 0);

	fi_addr_t fa = 12345;
	EXPECT(fi_xpu_av_insert(NULL, name, 1, &fa, 0, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_av_insert(av, NULL, 1, &fa, 0, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_av_insert(av, name, 1, &fa, 9, NULL), -FI_EBADFLAGS);
	EXPECT(fi_xpu_av_insert(av, name, 0, &fa, 0, NULL), 0);
	EXPECT(fi_xpu_av_insert(av, name, SIZE_MAX, &fa, 0, NULL), -FI_EOVERFLOW);
	EXPECT(fa, 12345);
	EXPECT(fi_xpu_av_insert(av, name, 1, &fa, 0, NULL), 1);
	size_t alen = 1;
	EXPECT(fi_xpu_av_lookup(av, fa, desc, &alen, 0, ctx), -FI_ETOOSMALL);
	EXPECT(alen >= 1, 1);
	alen = sizeof(desc);
	EXPECT(fi_xpu_av_lookup(av, fa, desc, &alen, 3, ctx), -FI_EBADFLAGS);
	EXPECT(fi_xpu_av_lookup(av, fa, desc, &alen, 0, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_av_lookup((struct fid_xpu_av *)ep, fa, desc, &alen, 0, ctx), -FI_EINVAL);
	EXPECT(fi_xpu_av_lookup(av, fa, desc, &alen, 0, ctx), 0);
	/* An fi_addr that was never inserted, as fi_av_lookup(3) says. */
	EXPECT(fi_xpu_av_lookup(av, fa + 1000, desc, &alen, 0, ctx), -FI_EINVAL);
	EXPECT(fi_xpu_av_lookup(av, FI_ADDR_NOTAVAIL, desc, &alen, 0, ctx), -FI_EINVAL);
	EXPECT(fi_xpu_av_remove(av, NULL, 1, 0), -FI_EINVAL);
	EXPECT(fi_xpu_av_remove(av, &fa, 1, 1), -FI_EBADFLAGS);
	/* Removed: looked up and removed again like one never inserted. */
	EXPECT(fi_xpu_av_remove(av, &fa, 1, 0), 0);
	EXPECT(fi_xpu_av_lookup(av, fa, desc, &alen, 0, ctx), -FI_EINVAL);
	EXPECT(fi_xpu_av_remove(av, &fa, 1, 0), -FI_EINVAL);

	/* Export. */
	EXPECT(fi_xpu_export(NULL, 0, &xh), -FI_EINVAL);
	EXPECT(fi_xpu_export(&ep->fid, 0, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_export(&ep->fid, 1, &xh), -FI_EBADFLAGS);
	EXPECT(fi_xpu_export(&av->fid, 0, &xh), -FI_EINVAL);
	EXPECT(fi_xpu_export(&hcq->fid, 0, &xh), -FI_EOPNOTSUPP);
	EXPECT(fi_xpu_export(&hcntr->fid, 0, &xh), -FI_EOPNOTSUPP);
	EXPECT(fi_xpu_export((struct fid *)garbage, 0, &xh), -FI_EINVAL);
	EXPECT(xh.prov_id, 0xabababab);
	EXPECT(fi_xpu_export(&ep->fid, 0, &xh), 0);
	EXPECT(xh.prov_id, info->prov_id);
	EXPECT(fi_xpu_export(&cq->fid, 0, &xh), 0);
	EXPECT(fi_xpu_export(&cntr->fid, 0, &xh), 0);

	/*
	 * Device calls with bad arguments: refused before anything is posted,
	 * with the same code whichever provider exported the handles (the test
	 * provider's prov_id is not even compiled into the dispatch).
	 */
	{
		struct fid_xpu_ep xep;
		struct fid_xpu_cq xcq;
		uint64_t raw[8] = { 0 }, res[2] = { 0 }, cmp[2] = { 0 }, src[2] = { 1, 2 };
		char e[64];
		const int W = FI_XPU_WORK_ITEM;
		const uint64_t BAD = 1ULL << 60;
		EXPECT(fi_xpu_export(&ep->fid, 0, &xep.fid), 0);
		EXPECT(fi_xpu_export(&cq->fid, 0, &xcq.fid), 0);
		EXPECT(fi_xpu_write(&xep, src, 8, NULL, 0, raw, 0, 0, NULL, BAD, W), -FI_EBADFLAGS);
		EXPECT(fi_xpu_read(&xep, res, 8, NULL, raw, 0, 0, NULL, FI_REMOTE_CQ_DATA, W), -FI_EBADFLAGS);
		EXPECT(fi_xpu_send(&xep, src, 8, NULL, 0, raw, NULL, BAD, W), -FI_EBADFLAGS);
		EXPECT(fi_xpu_recv(&xep, res, 8, NULL, NULL, NULL, FI_INJECT, W), -FI_EBADFLAGS);
		EXPECT(fi_xpu_tsend(&xep, src, 8, NULL, 0, raw, 1, NULL, BAD, W), -FI_EBADFLAGS);
		EXPECT(fi_xpu_trecv(&xep, res, 8, NULL, NULL, 1, 0, NULL, FI_REMOTE_CQ_DATA, W), -FI_EBADFLAGS);
		EXPECT(fi_xpu_atomic(&xep, src, 1, NULL, raw, 0, 0, FI_UINT64, FI_SUM, NULL, FI_REMOTE_CQ_DATA, W), -FI_EBADFLAGS);
		EXPECT(fi_xpu_fetch_atomic(&xep, src, 1, NULL, res, NULL, raw, 0, 0, FI_UINT64, FI_SUM, NULL, FI_REMOTE_CQ_DATA, W), -FI_EBADFLAGS);
		EXPECT(fi_xpu_compare_atomic(&xep, src, 1, NULL, cmp, NULL, res, NULL, raw, 0, 0, FI_UINT64, FI_CSWAP, NULL, BAD, W), -FI_EBADFLAGS);
		EXPECT(fi_xpu_flush(&xep, 1, W), -FI_EBADFLAGS);
		EXPECT(fi_xpu_flush(&xep, BAD, W), -FI_EBADFLAGS);
		EXPECT(fi_xpu_cq_readerr(&xcq, e, 1, W), -FI_EBADFLAGS);
		/* Atomics: no elements, no place for the fetched values, a misaligned target. */
		EXPECT(fi_xpu_atomic(&xep, src, 0, NULL, raw, 0, 0, FI_UINT64, FI_SUM, NULL, 0, W), -FI_EINVAL);
		EXPECT(fi_xpu_fetch_atomic(&xep, src, 0, NULL, res, NULL, raw, 0, 0, FI_UINT64, FI_SUM, NULL, 0, W), -FI_EINVAL);
		EXPECT(fi_xpu_fetch_atomic(&xep, src, 1, NULL, NULL, NULL, raw, 0, 0, FI_UINT64, FI_SUM, NULL, 0, W), -FI_EINVAL);
		EXPECT(fi_xpu_compare_atomic(&xep, src, 1, NULL, cmp, NULL, NULL, NULL, raw, 0, 0, FI_UINT64, FI_CSWAP, NULL, 0, W), -FI_EINVAL);
		EXPECT(fi_xpu_compare_atomic(&xep, src, 1, NULL, NULL, NULL, res, NULL, raw, 0, 0, FI_UINT64, FI_CSWAP, NULL, 0, W), -FI_EINVAL);
		EXPECT(fi_xpu_atomic(&xep, src, 1, NULL, raw, 4, 0, FI_UINT64, FI_SUM, NULL, 0, W), -FI_EINVAL);
		EXPECT(fi_xpu_fetch_atomic(&xep, src, 1, NULL, res, NULL, raw, 2, 0, FI_UINT32, FI_SUM, NULL, 0, W), -FI_EINVAL);
		EXPECT(fi_xpu_compare_atomic(&xep, src, 1, NULL, cmp, NULL, res, NULL, raw, 1, 0, FI_UINT16, FI_CSWAP, NULL, 0, W), -FI_EINVAL);
		/* The ordered-signalling extensions: the same checks before any
		 * provider (fi_xpu_signal(3)). */
		EXPECT(fi_xpu_put_signal(&xep, src, 8, NULL, raw, 0, 0, 0, 0, 1, FI_XPU_SIGNAL_SET, NULL, FI_INJECT, W), -FI_EBADFLAGS);
		EXPECT(fi_xpu_put_signal(&xep, src, 8, NULL, raw, 0, 0, 0, 0, 1, FI_XPU_SIGNAL_ADD, NULL, FI_REMOTE_CQ_DATA, W), -FI_EBADFLAGS);
		EXPECT(fi_xpu_put_signal(&xep, src, 8, NULL, raw, 0, 0, 4, 0, 1, FI_XPU_SIGNAL_SET, NULL, 0, W), -FI_EINVAL);
		EXPECT(fi_xpu_put_signal(&xep, src, 8, NULL, raw, 0, 0, 0, 0, 1, 5, NULL, 0, W), -FI_EINVAL);
		EXPECT(fi_xpu_fence(&xep, 1, W), -FI_EBADFLAGS);
		EXPECT(fi_xpu_quiet(&xep, BAD, W), -FI_EBADFLAGS);
		EXPECT(fi_xpu_signal_wait_until(&xep, NULL, FI_XPU_CMP_EQ, 0, 0, W), -FI_EINVAL);
		EXPECT(fi_xpu_signal_wait_until(&xep, (uint64_t *)(void *)((char *)res + 1), FI_XPU_CMP_EQ, 0, 0, W), -FI_EINVAL);
		EXPECT(fi_xpu_signal_wait_until(&xep, res, 17, 0, 0, W), -FI_EINVAL);
		EXPECT(fi_xpu_signal_wait_until(&xep, res, FI_XPU_CMP_EQ, 1, 0, W), -FI_ETIMEDOUT);
		EXPECT(fi_xpu_signal_wait_until(&xep, res, FI_XPU_CMP_EQ, 0, 0, W), 0);
		/* No peer address: refused by the call, alike on shm and ofi
		 * (the address is the provider's to check: the test provider
		 * takes none). */
		if (info->prov_id == FI_XPU_PROV_SHM || info->prov_id == FI_XPU_PROV_OFI) {
			EXPECT(fi_xpu_write(&xep, src, 8, NULL, 0, NULL, 0, 0, NULL, 0, W), -FI_EINVAL);
			EXPECT(fi_xpu_read(&xep, res, 8, NULL, NULL, 0, 0, NULL, 0, W), -FI_EINVAL);
			EXPECT(fi_xpu_send(&xep, src, 8, NULL, 0, NULL, NULL, 0, W), -FI_EINVAL);
			EXPECT(fi_xpu_tsend(&xep, src, 8, NULL, 0, NULL, 1, NULL, 0, W), -FI_EINVAL);
			EXPECT(fi_xpu_atomic(&xep, src, 1, NULL, NULL, 0, 0, FI_UINT64, FI_SUM, NULL, 0, W), -FI_EINVAL);
			EXPECT(fi_xpu_fetch_atomic(&xep, src, 1, NULL, res, NULL, NULL, 0, 0, FI_UINT64, FI_SUM, NULL, 0, W), -FI_EINVAL);
			EXPECT(fi_xpu_compare_atomic(&xep, src, 1, NULL, cmp, NULL, res, NULL, NULL, 0, 0, FI_UINT64, FI_CSWAP, NULL, 0, W), -FI_EINVAL);
			EXPECT(fi_xpu_put_signal(&xep, src, 8, NULL, NULL, 0, 0, 0, 0, 1, FI_XPU_SIGNAL_SET, NULL, 0, W), -FI_EINVAL);
		}
		/* Handle and scope errors still come first. */
		EXPECT(fi_xpu_put_signal(NULL, src, 8, NULL, raw, 0, 0, 4, 0, 1, 5, NULL, BAD, W), -FI_EINVAL);
		EXPECT(fi_xpu_signal_wait_until(&xep, NULL, 17, 0, 0, 99), -FI_EINVAL);
		EXPECT(fi_xpu_flush(NULL, BAD, W), -FI_EINVAL);
		EXPECT(fi_xpu_atomic(&xep, src, 0, NULL, raw, 0, 0, FI_UINT64, FI_SUM, NULL, BAD, 99), -FI_EINVAL);
	}

	/* Close: in use, wrong order, then right order, then twice. */
	EXPECT(fi_xpu_close(NULL), -FI_EINVAL);
	EXPECT(fi_xpu_close((struct fid *)garbage), -FI_EINVAL);
	EXPECT(fi_xpu_close(&dom->fid), -FI_EBUSY);
	EXPECT(fi_xpu_close(&ctx->fid), -FI_EBUSY);
	EXPECT(fi_xpu_close(&av->fid), -FI_EBUSY);  /* bound to ep */
	EXPECT(fi_xpu_close(&cq->fid), -FI_EBUSY);
	EXPECT(fi_xpu_close(&ep->fid), 0);
	EXPECT(fi_xpu_close(&ep->fid), -FI_EINVAL);
	EXPECT(fi_close(&ep->fid), -FI_EINVAL); /* libfabric's inline on a closed object */
	EXPECT(fi_xpu_enable(ep), -FI_EINVAL);
	EXPECT(fi_xpu_close(&av->fid), 0);
	EXPECT(fi_close(&cq->fid), 0);
	EXPECT(fi_xpu_close(&hcq->fid), 0);
	EXPECT(fi_xpu_close(&cntr->fid), 0);
	EXPECT(fi_xpu_close(&hcntr->fid), 0);
	EXPECT(fi_xpu_close(&mr->fid), 0);
	EXPECT(fi_xpu_mr_key(mr, &key), -FI_EINVAL);
	EXPECT(fi_xpu_free(ctx, addr), 0);
	EXPECT(fi_xpu_close(&ctx->fid), 0);
	EXPECT(fi_xpu_alloc(ctx, 64, 0, 0, &addr, NULL, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_close(&ctx->fid), -FI_EINVAL);
	EXPECT(fi_xpu_close(&dom->fid), 0);
	EXPECT(fi_xpu_close(&dom->fid), -FI_EINVAL);
	EXPECT(fi_xpu_av_open(dom, NULL, &av, NULL), -FI_EINVAL);
	fi_xpu_freeinfo(info);

	return expect_report("bad-input table: all checks passed");
}

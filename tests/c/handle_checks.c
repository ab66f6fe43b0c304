/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Device handles are checked, through the public headers on the host
 * launcher, for the provider named in argv[1] (shm or ofi): a handle of
 * another class, a forged class, a handle from another library version,
 * memory that is no handle, the handles of closed objects and (shm) a raw
 * peer address of junk bytes all give -FI_EINVAL, never a hang, a crash or
 * a write into the wrong object.
 */
#include <fi_xpu.h>
#include <fi_xpu/device.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define EXPECT(got, want)                                                              \
	do {                                                                           \
		long long g_ = (long long)(got), w_ = (long long)(want);               \
		if (g_ != w_) {                                                        \
			fprintf(stderr, "%s:%d: %s = %lld, expected %lld\n", __FILE__, \
				__LINE__, #got, g_, w_);                               \
			failures++;                                                    \
		}                                                                      \
	} while (0)
#define REQUIRE(call)                                                                  \
	do {                                                                           \
		int r_ = (call);                                                       \
		if (r_) {                                                              \
			fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #call, \
				r_);                                                   \
			exit(2);                                                       \
		}                                                                      \
	} while (0)

struct objs {
	struct fid_xpu_domain *dom;
	struct fid_xpu_host_ctx *ctx;
	struct fid_xpu_av *av;
	struct fid_xpu_host_cq *hcq;
	struct fid_xpu_host_cntr *hcntr;
	struct fid_xpu_host_ep *hep;
	struct fid_xpu_ep ep;
	struct fid_xpu_cq cq;
	struct fid_xpu_cntr cntr;
	uint64_t raw[4];
	size_t rawlen;
};

static void open_all(struct objs *o, const char *prov)
{
	struct fi_xpu_info *info, *i;
	struct fi_xpu_ctx_open_attr xattr = { FI_HMEM_SYSTEM, 0, NULL };
	struct fi_xpu_cq_attr cattr;
	struct fi_xpu_cntr_attr nattr;
	struct fi_xpu_ep_attr eattr;
	char name[256];
	size_t len = sizeof(name);
	fi_addr_t self;

	memset(&cattr, 0, sizeof(cattr));
	memset(&nattr, 0, sizeof(nattr));
	memset(&eattr, 0, sizeof(eattr));
	REQUIRE(fi_xpu_getinfo(FI_XPU_API_VERSION, NULL, 0, &info));
	for (i = info; i && strcmp(i->prov_name, prov) != 0; i = i->next)
		;
	if (!i) {
		fprintf(stderr, "provider %s not found\n", prov);
		exit(2);
	}
	REQUIRE(fi_xpu_domain(i, NULL, &o->dom, NULL));
	fi_xpu_freeinfo(info);
	REQUIRE(fi_xpu_ctx_open(o->dom, &xattr, &o->ctx, NULL));
	REQUIRE(fi_xpu_av_open(o->dom, NULL, &o->av, NULL));
	cattr.size = 64;
	cattr.xpu_ctx = o->ctx;
	nattr.xpu_ctx = o->ctx;
	eattr.xpu_ctx = o->ctx;
	REQUIRE(fi_xpu_cq_open(o->dom, &cattr, &o->hcq, NULL));
	REQUIRE(fi_xpu_cntr_open(o->dom, &nattr, &o->hcntr, NULL));
	REQUIRE(fi_xpu_endpoint(o->dom, &eattr, &o->hep, NULL));
	REQUIRE(fi_xpu_ep_bind(o->hep, &o->av->fid, 0));
	REQUIRE(fi_xpu_ep_bind(o->hep, &o->hcq->fid, FI_TRANSMIT | FI_RECV));
	REQUIRE(fi_xpu_ep_bind(o->hep, &o->hcntr->fid, FI_WRITE));
	REQUIRE(fi_xpu_enable(o->hep));
	REQUIRE(fi_xpu_getname(o->hep, name, &len));
	if (fi_xpu_av_insert(o->av, name, 1, &self, 0, NULL) != 1)
		exit(2);
	o->rawlen = sizeof(o->raw);
	REQUIRE(fi_xpu_av_lookup(o->av, self, o->raw, &o->rawlen, FI_XPU, o->ctx));
	REQUIRE(fi_xpu_export(&o->hep->fid, 0, &o->ep.fid));
	REQUIRE(fi_xpu_export(&o->hcq->fid, 0, &o->cq.fid));
	REQUIRE(fi_xpu_export(&o->hcntr->fid, 0, &o->cntr.fid));
}

/* Every operation on each handle gives -FI_EINVAL. */
static void all_refused(struct fid_xpu_ep *ep, struct fid_xpu_cq *cq, struct fid_xpu_cntr *cntr,
			void *raw, const char *what)
{
	uint64_t buf[8] = { 0 };
	struct fi_cq_tagged_entry e[2];
	struct fi_cq_err_entry err;
	int before = failures;

	EXPECT(fi_xpu_write(ep, buf, 8, NULL, 0, raw, 0, 0, NULL, 0, FI_XPU_WORK_ITEM), -FI_EINVAL);
	EXPECT(fi_xpu_read(ep, buf, 8, NULL, raw, 0, 0, NULL, 0, FI_XPU_WORK_ITEM), -FI_EINVAL);
	EXPECT(fi_xpu_send(ep, buf, 8, NULL, 0, raw, NULL, 0, FI_XPU_WORK_ITEM), -FI_EINVAL);
	EXPECT(fi_xpu_recv(ep, buf, 8, NULL, NULL, NULL, 0, FI_XPU_WORK_ITEM), -FI_EINVAL);
	EXPECT(fi_xpu_atomic(ep, buf, 1, NULL, raw, 0, 0, FI_UINT64, FI_SUM, NULL, 0,
			     FI_XPU_WORK_ITEM), -FI_EINVAL);
	EXPECT(fi_xpu_flush(ep, 0, FI_XPU_WORK_ITEM), -FI_EINVAL);
	EXPECT(fi_xpu_cq_read(cq, e, 2, FI_XPU_WORK_ITEM), -FI_EINVAL);
	EXPECT(fi_xpu_cq_readerr(cq, &err, 0, FI_XPU_WORK_ITEM), -FI_EINVAL);
	EXPECT(fi_xpu_cq_sread(cq, e, 2, 1, FI_XPU_WORK_ITEM), -FI_EINVAL);
	EXPECT((int64_t)fi_xpu_cntr_read(cntr, FI_XPU_WORK_ITEM), -FI_EINVAL);
	EXPECT(fi_xpu_cntr_add(cntr, 1, FI_XPU_WORK_ITEM), -FI_EINVAL);
	EXPECT(fi_xpu_cntr_wait_status(cntr, 1, 10, FI_XPU_WORK_ITEM), -FI_EINVAL);
	if (failures != before)
		fprintf(stderr, "  (%s)\n", what);
}

static void refused_or_error_completion(struct objs *o, int ret)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;

	if (ret == -FI_EINVAL)
		return;
	EXPECT(ret, 0);
	EXPECT(fi_xpu_cq_read(&o->cq, &e, 1, FI_XPU_WORK_ITEM), -FI_EAVAIL);
	memset(&err, 0, sizeof(err));
	EXPECT(fi_xpu_cq_readerr(&o->cq, &err, 0, FI_XPU_WORK_ITEM), 1);
	EXPECT(err.err, FI_EINVAL);
}

int main(int argc, char **argv)
{
	const char *prov = argc > 1 ? argv[1] : "shm";
	struct objs o;
	struct fid_xpu_ep ep;
	struct fid_xpu_cq cq;
	struct fid_xpu_cntr cntr;
	static uint64_t junk_mem[4096];
	uint64_t junk = 0x4141414141414141ULL, one = 1, got;
	struct fi_cq_tagged_entry e[4];
	int i;

	memset(&o, 0, sizeof(o));
	open_all(&o, prov);

	/* 1. A handle of another class, as the other type (what a cast does). */
	all_refused((struct fid_xpu_ep *)(void *)&o.cq, (struct fid_xpu_cq *)(void *)&o.cntr,
		    (struct fid_xpu_cntr *)(void *)&o.ep, o.raw, "other class");
	/* Nothing reached the CQ or the counter through the wrong handle. */
	EXPECT(fi_xpu_cq_read(&o.cq, e, 4, FI_XPU_WORK_ITEM), -FI_EAGAIN);
	EXPECT(fi_xpu_cntr_read(&o.cntr, FI_XPU_WORK_ITEM), 0);

	/* 2. A forged class: the provider's validity word tells them apart. */
	memcpy(&ep, &o.cq, sizeof(ep));
	ep.fid.fclass = FI_CLASS_EP;
	memcpy(&cq, &o.cntr, sizeof(cq));
	cq.fid.fclass = FI_CLASS_CQ;
	memcpy(&cntr, &o.ep, sizeof(cntr));
	cntr.fid.fclass = FI_CLASS_CNTR;
	all_refused(&ep, &cq, &cntr, o.raw, "forged class");
	EXPECT(fi_xpu_cq_read(&o.cq, e, 4, FI_XPU_WORK_ITEM), -FI_EAGAIN);
	EXPECT(fi_xpu_cntr_read(&o.cntr, FI_XPU_WORK_ITEM), 0);

	/* 3. Memory that is no handle (zeroes), and a block stamped by a
	 * library of another version: refused before anything is followed. */
	ep = o.ep;
	cq = o.cq;
	cntr = o.cntr;
	ep.fid.prov_ctx = cq.fid.prov_ctx = cntr.fid.prov_ctx = (uint64_t)(uintptr_t)junk_mem;
	all_refused(&ep, &cq, &cntr, o.raw, "zeroed memory");
	for (i = 0; i < 4096; i++)
		junk_mem[i] = FI_XPU_HANDLE_WORD(FI_XPU_HANDLE_EP, FI_XPU_HANDLE_LIVE) + 1;
	all_refused(&ep, &cq, &cntr, o.raw, "another version's block");
	for (i = 0; i < 4096; i++)
		junk_mem[i] = FI_XPU_HANDLE_WORD(FI_XPU_HANDLE_EP, FI_XPU_HANDLE_DEAD);
	all_refused(&ep, &cq, &cntr, o.raw, "tombstone");

	/* The real handles still work. */
	EXPECT(fi_xpu_cntr_add(&o.cntr, 5, FI_XPU_WORK_ITEM), 0);
	EXPECT(fi_xpu_cntr_read(&o.cntr, FI_XPU_WORK_ITEM), 5);
	EXPECT(fi_xpu_cq_read(&o.cq, e, 4, FI_XPU_WORK_ITEM), -FI_EAGAIN);

	/* 4. A raw peer address of junk bytes (shm follows raw addresses): the
	 * operation is refused, at the call or (RMA and atomics, whose refused
	 * accesses are error completions) as an -FI_EINVAL error completion. */
	if (strcmp(prov, "shm") == 0) {
		refused_or_error_completion(&o, fi_xpu_write(&o.ep, &one, 8, NULL, 0, &junk, 0, 0,
							     NULL, 0, FI_XPU_WORK_ITEM));
		EXPECT(fi_xpu_send(&o.ep, &one, 8, NULL, 0, &junk, NULL, 0, FI_XPU_WORK_ITEM),
		       -FI_EINVAL);
		refused_or_error_completion(&o, fi_xpu_atomic(&o.ep, &one, 1, NULL, &junk, 0, 0,
							      FI_UINT64, FI_SUM, NULL, 0,
							      FI_XPU_WORK_ITEM));
		EXPECT(fi_xpu_recv(&o.ep, &got, 8, NULL, &junk, NULL, 0, FI_XPU_WORK_ITEM),
		       -FI_EINVAL);
		junk = o.raw[0] + 8; /* inside the table, not on an entry */
		EXPECT(fi_xpu_send(&o.ep, &one, 8, NULL, 0, &junk, NULL, 0, FI_XPU_WORK_ITEM),
		       -FI_EINVAL);
	}

	/* 5. Handles of closed objects read a tombstone, never freed memory. */
	REQUIRE(fi_xpu_close(&o.hep->fid));
	REQUIRE(fi_xpu_close(&o.hcq->fid));
	REQUIRE(fi_xpu_close(&o.hcntr->fid));
	all_refused(&o.ep, &o.cq, &o.cntr, o.raw, "closed objects");

	REQUIRE(fi_xpu_close(&o.av->fid));
	REQUIRE(fi_xpu_close(&o.ctx->fid));
	REQUIRE(fi_xpu_close(&o.dom->fid));
	if (failures) {
		fprintf(stderr, "handle_checks %s: %d failure(s)\n", prov, failures);
		return 1;
	}
	printf("handle_checks %s: ok\n", prov);
	return 0;
}

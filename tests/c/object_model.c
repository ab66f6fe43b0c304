/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The host object model end to end, through the C API and the test provider
 * plugin (tests/plugins/test_provider.c, loaded as "objtest" with prov_id
 * 150): discovery, domain, contexts, AV, MR, host and XPU CQs and counters,
 * endpoints, binding, export, lookups and descriptors, then closing in the
 * wrong order and the right one. Every call's return value is checked
 * exactly. Prints "object_model: ok" and exits 0 when all hold.
 */
#include <fi_xpu.h>

#include "test_provider.h"
#include "expect.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROV_NAME "objtest"
#define PROV_ID 150

static struct fid_xpu_host_ctx *open_ctx(struct fid_xpu_domain *dom, uint64_t device, void *context)
{
	struct fi_xpu_ctx_open_attr attr = { .iface = FI_HMEM_SYSTEM, .device = device, .ops = NULL };
	struct fid_xpu_host_ctx *ctx = NULL;
	REQUIRE(fi_xpu_ctx_open(dom, &attr, &ctx, context), 0);
	EXPECT(ctx->fid.fclass, FI_XPU_CLASS_CTX);
	EXPECT(ctx->fid.context == context, 1);
	return ctx;
}

static struct fid_xpu_host_cq *open_cq(struct fid_xpu_domain *dom, struct fid_xpu_host_ctx *ctx,
				       size_t size, int format)
{
	struct fi_xpu_cq_attr attr = {
		.size = size, .flags = 0, .format = format, .timeout = -1, .xpu_ctx = ctx
	};
	struct fid_xpu_host_cq *cq = NULL;
	REQUIRE(fi_xpu_cq_open(dom, &attr, &cq, NULL), 0);
	EXPECT(cq->fid.fclass, FI_CLASS_CQ);
	return cq;
}

static struct fid_xpu_host_cntr *open_cntr(struct fid_xpu_domain *dom, struct fid_xpu_host_ctx *ctx)
{
	struct fi_xpu_cntr_attr attr = { .flags = 0, .xpu_ctx = ctx };
	struct fid_xpu_host_cntr *cntr = NULL;
	REQUIRE(fi_xpu_cntr_open(dom, &attr, &cntr, NULL), 0);
	EXPECT(cntr->fid.fclass, FI_CLASS_CNTR);
	return cntr;
}

static struct fid_xpu_host_ep *open_ep(struct fid_xpu_domain *dom, struct fid_xpu_host_ctx *ctx)
{
	struct fi_xpu_ep_attr attr = { .caps = 0, .tx_size = 0, .rx_size = 0, .flags = 0,
				       .xpu_ctx = ctx };
	struct fid_xpu_host_ep *ep = NULL;
	REQUIRE(fi_xpu_endpoint(dom, &attr, &ep, NULL), 0);
	EXPECT(ep->fid.fclass, FI_CLASS_EP);
	return ep;
}

static struct fid_xpu_mr *reg(struct fid_xpu_domain *dom, struct fid_xpu_host_ctx *ctx, void *buf,
			      size_t len, uint64_t requested_key)
{
	struct fid_xpu_mr *mr = NULL;
	REQUIRE(fi_xpu_mr_reg(dom, ctx, buf, len, FI_READ | FI_WRITE | FI_REMOTE_READ |
				  FI_REMOTE_WRITE, 0, requested_key, 0, &mr, NULL), 0);
	EXPECT(mr->fid.fclass, FI_CLASS_MR);
	return mr;
}

static struct fi_xpu_info *discover(void)
{
	struct fi_xpu_info hints;
	memset(&hints, 0, sizeof(hints));
	hints.prov_name = (char *)PROV_NAME;
	struct fi_xpu_info *info = NULL;
	REQUIRE(fi_xpu_getinfo(FI_XPU_VERSION(FI_XPU_MAJOR_VERSION, FI_XPU_MINOR_VERSION), &hints,
			       0, &info), 0);
	EXPECT(info->next == NULL, 1);
	EXPECT(strcmp(info->prov_name, PROV_NAME), 0);
	EXPECT(info->prov_id, PROV_ID);
	EXPECT(info->prov_version, FI_XPU_VERSION(1, 2));
	EXPECT(info->caps, FI_XPU_CAP_EP | FI_XPU_CAP_CQ | FI_XPU_CAP_CNTR);
	EXPECT(info->ifaces, 1ULL << FI_HMEM_SYSTEM);
	EXPECT(info->addrlen, TP_ADDRLEN);
	return info;
}

static void check_ctx_query(struct fid_xpu_host_ctx *ctx)
{
	struct fi_xpu_ctx_info attr;
	memset(&attr, 0xab, sizeof(attr));
	REQUIRE(fi_xpu_ctx_getinfo(ctx, &attr), 0);
	EXPECT(attr.caps, FI_XPU_CAP_EP | FI_XPU_CAP_CQ | FI_XPU_CAP_CNTR);
	EXPECT(attr.av_addr_size, TP_ADDRLEN);
	EXPECT(attr.mr_desc_size, sizeof(struct tp_mr_desc));
	EXPECT(attr.max_tx_wr_desc_size, 0);
	EXPECT(attr.max_rx_wr_desc_size, 0);
}

static char region[4096];
static char region2[256];

static void check_mr(struct fid_xpu_domain *dom, struct fid_xpu_host_ctx *ctx,
		     struct fid_xpu_mr **mrs)
{
	mrs[0] = reg(dom, ctx, region, sizeof(region), 0);
	mrs[1] = reg(dom, NULL, region2, sizeof(region2), 0x1234);
	uint64_t key0 = 0, key1 = 0;
	REQUIRE(fi_xpu_mr_key(mrs[0], &key0), 0);
	REQUIRE(fi_xpu_mr_key(mrs[1], &key1), 0);
	EXPECT(key0 != 0, 1);
	EXPECT(key1, 0x1234);

	/* A key already in use is refused and the out-parameter left alone. */
	struct fid_xpu_mr *dup = (struct fid_xpu_mr *)&failures;
	EXPECT(fi_xpu_mr_reg(dom, NULL, region2, 16, FI_READ, 0, 0x1234, 0, &dup, NULL),
	       -FI_ENOKEY);
	EXPECT(dup == (struct fid_xpu_mr *)&failures, 1);
	EXPECT(fi_xpu_mr_reg(dom, NULL, region2, 16, FI_READ, 0, key0, 0, &dup, NULL),
	       -FI_ENOKEY);

	/* Size query, short buffer, then the descriptor itself. */
	struct tp_mr_desc desc;
	size_t len = 0;
	EXPECT(fi_xpu_mr_desc(mrs[0], NULL, &len, 0, ctx), -FI_ETOOSMALL);
	EXPECT(len, sizeof(desc));
	len = 8;
	memset(&desc, 0x5a, sizeof(desc));
	EXPECT(fi_xpu_mr_desc(mrs[0], &desc, &len, 0, ctx), -FI_ETOOSMALL);
	EXPECT(len, sizeof(desc));
	EXPECT(desc.addr, 0x5a5a5a5a5a5a5a5aULL);
	char big[64];
	len = sizeof(big);
	REQUIRE(fi_xpu_mr_desc(mrs[0], big, &len, 0, ctx), 0);
	EXPECT(len, sizeof(desc));
	memcpy(&desc, big, sizeof(desc));
	EXPECT(desc.addr, (uint64_t)(uintptr_t)region);
	EXPECT(desc.len, sizeof(region));
	EXPECT(desc.key, key0);
	len = sizeof(desc);
	REQUIRE(fi_xpu_mr_desc(mrs[1], &desc, &len, 0, ctx), 0);
	EXPECT(desc.addr, (uint64_t)(uintptr_t)region2);
	EXPECT(desc.key, 0x1234);
	EXPECT(fi_xpu_mr_desc(mrs[0], &desc, &len, 1, ctx), -FI_EBADFLAGS);
	/* The FI_XPU flag libfabric's example passes asks for the same thing. */
	memset(&desc, 0, sizeof(desc));
	len = sizeof(desc);
	REQUIRE(fi_xpu_mr_desc(mrs[1], &desc, &len, FI_XPU, ctx), 0);
	EXPECT(desc.key, 0x1234);
	EXPECT(fi_xpu_mr_desc(mrs[1], &desc, &len, FI_XPU | 1, ctx), -FI_EBADFLAGS);
}

static void check_host_cq(struct fid_xpu_host_cq *hcq)
{
	struct fi_cq_entry entries[4];
	struct fi_cq_err_entry err;
	EXPECT(fi_xpu_cq_host_read(hcq, entries, 4), -FI_EAGAIN);
	EXPECT(fi_xpu_cq_host_readfrom(hcq, entries, 4, NULL), -FI_EAGAIN);
	EXPECT(fi_xpu_cq_host_readerr(hcq, &err, 0), -FI_EAGAIN);
	EXPECT(fi_xpu_cq_host_read(hcq, entries, 0), 0);
}

/* The counter's value (or, with `err`, its error count) is `want`. */
static void expect_cntr(struct fid_xpu_host_cntr *c, int err, uint64_t want)
{
	uint64_t v = 99;
	EXPECT(err ? fi_xpu_cntr_host_readerr(c, &v) : fi_xpu_cntr_host_read(c, &v), 0);
	EXPECT(v, want);
}

static void check_host_cntr(struct fid_xpu_host_cntr *c)
{
	uint64_t v = 99;
	REQUIRE(fi_xpu_cntr_host_read(c, &v), 0);
	EXPECT(v, 0);
	EXPECT(fi_xpu_cntr_host_add(c, 5), 0);
	EXPECT(fi_xpu_cntr_host_add(c, 7), 0);
	expect_cntr(c, 0, 12);
	EXPECT(fi_xpu_cntr_host_set(c, 3), 0);
	expect_cntr(c, 0, 3);
	EXPECT(fi_xpu_cntr_host_adderr(c, 2), 0);
	EXPECT(fi_xpu_cntr_host_adderr(c, 2), 0);
	expect_cntr(c, 1, 4);
	EXPECT(fi_xpu_cntr_host_seterr(c, 9), 0);
	expect_cntr(c, 1, 9);
	expect_cntr(c, 0, 3);
}

/* XPU CQs and counters belong to the device: host calls are refused. */
static void check_xpu_objects_not_host_readable(struct fid_xpu_host_cq *xcq,
						struct fid_xpu_host_cntr *xcntr)
{
	struct fi_cq_tagged_entry entries[2];
	struct fi_cq_err_entry err;
	uint64_t v = 77;
	EXPECT(fi_xpu_cq_host_read(xcq, entries, 2), -FI_EOPNOTSUPP);
	EXPECT(fi_xpu_cq_host_readerr(xcq, &err, 0), -FI_EOPNOTSUPP);
	EXPECT(fi_xpu_cntr_host_read(xcntr, &v), -FI_EOPNOTSUPP);
	EXPECT(v, 77);
	EXPECT(fi_xpu_cntr_host_add(xcntr, 1), -FI_EOPNOTSUPP);
	EXPECT(fi_xpu_cntr_host_set(xcntr, 1), -FI_EOPNOTSUPP);
}

static void get_name(struct fid_xpu_host_ep *ep, struct tp_name *name)
{
	size_t len = 0;
	EXPECT(fi_xpu_getname(ep, NULL, &len), -FI_ETOOSMALL);
	EXPECT(len, TP_ADDRLEN);
	len = 4;
	EXPECT(fi_xpu_getname(ep, name, &len), -FI_ETOOSMALL);
	EXPECT(len, TP_ADDRLEN);
	len = sizeof(*name);
	REQUIRE(fi_xpu_getname(ep, name, &len), 0);
	EXPECT(len, TP_ADDRLEN);
	EXPECT(name->magic, TP_NAME_MAGIC);
	EXPECT(name->prov_id, PROV_ID);
	EXPECT(name->pid, getpid());
}

static void check_av(struct fid_xpu_av *av, struct fid_xpu_host_ctx *ctx_a, struct fid_xpu_host_ctx *ctx_b,
		     const struct tp_name *n1, const struct tp_name *n2)
{
	struct tp_name both[2] = { *n1, *n2 };
	fi_addr_t addrs[2] = { 55, 55 };
	REQUIRE(fi_xpu_av_insert(av, both, 2, addrs, 0, NULL), 2);
	EXPECT(addrs[0], 0);
	EXPECT(addrs[1], 1);

	struct tp_name got;
	size_t len = 0;
	EXPECT(fi_xpu_av_lookup(av, addrs[1], NULL, &len, 0, ctx_a), -FI_ETOOSMALL);
	EXPECT(len, TP_ADDRLEN);
	len = 8;
	memset(&got, 0, sizeof(got));
	EXPECT(fi_xpu_av_lookup(av, addrs[1], &got, &len, 0, ctx_a), -FI_ETOOSMALL);
	EXPECT(len, TP_ADDRLEN);
	EXPECT(got.magic, 0);
	char big[64];
	len = sizeof(big);
	REQUIRE(fi_xpu_av_lookup(av, addrs[1], big, &len, 0, ctx_a), 0);
	EXPECT(len, TP_ADDRLEN);
	EXPECT(memcmp(big, n2, TP_ADDRLEN), 0);
	/* Any context of the domain may look an address up. */
	len = sizeof(got);
	REQUIRE(fi_xpu_av_lookup(av, addrs[0], &got, &len, 0, ctx_b), 0);
	EXPECT(memcmp(&got, n1, TP_ADDRLEN), 0);
	memset(&got, 0, sizeof(got));
	len = sizeof(got);
	REQUIRE(fi_xpu_av_lookup(av, addrs[0], &got, &len, FI_XPU, ctx_b), 0);
	EXPECT(memcmp(&got, n1, TP_ADDRLEN), 0);
	EXPECT(fi_xpu_av_lookup(av, addrs[0], &got, &len, FI_XPU | 2, ctx_b), -FI_EBADFLAGS);

	/* Unknown and removed addresses. */
	len = sizeof(got);
	EXPECT(fi_xpu_av_lookup(av, 7, &got, &len, 0, ctx_a), -FI_EINVAL);
	EXPECT(len, sizeof(got));
	EXPECT(fi_xpu_av_remove(av, &addrs[0], 1, 0), 0);
	EXPECT(fi_xpu_av_lookup(av, addrs[0], &got, &len, 0, ctx_a), -FI_EINVAL);
	EXPECT(fi_xpu_av_remove(av, &addrs[0], 1, 0), -FI_EINVAL);
	len = sizeof(got);
	EXPECT(fi_xpu_av_lookup(av, addrs[1], &got, &len, 0, ctx_a), 0);
	EXPECT(fi_xpu_av_lookup(av, addrs[1], &got, &len, 1, ctx_a), -FI_EBADFLAGS);
}

int main(void)
{
	struct fi_xpu_info *info = discover();
	struct fid_xpu_domain *dom = NULL;
	REQUIRE(fi_xpu_domain(info, NULL, &dom, NULL), 0);
	EXPECT(dom->fid.fclass, FI_CLASS_DOMAIN);

	int ctx_a_context = 0;
	struct fid_xpu_host_ctx *ctx_a = open_ctx(dom, 0, &ctx_a_context);
	struct fid_xpu_host_ctx *ctx_b = open_ctx(dom, 1, NULL);
	check_ctx_query(ctx_a);
	check_ctx_query(ctx_b);

	struct fid_xpu_av *av = NULL;
	REQUIRE(fi_xpu_av_open(dom, NULL, &av, NULL), 0);
	EXPECT(av->fid.fclass, FI_CLASS_AV);

	struct fid_xpu_mr *mrs[2];
	check_mr(dom, ctx_a, mrs);

	struct fid_xpu_host_cq *hcq = open_cq(dom, NULL, 16, FI_CQ_FORMAT_CONTEXT);
	struct fid_xpu_host_cq *xcq = open_cq(dom, ctx_a, 32, FI_CQ_FORMAT_TAGGED);
	struct fid_xpu_host_cq *xcq_b = open_cq(dom, ctx_b, 0, FI_CQ_FORMAT_MSG);
	struct fid_xpu_host_cntr *hcntr = open_cntr(dom, NULL);
	struct fid_xpu_host_cntr *xcntr = open_cntr(dom, ctx_a);
	struct fid_xpu_host_cntr *xcntr_b = open_cntr(dom, ctx_b);
	check_host_cq(hcq);
	check_host_cntr(hcntr);
	check_xpu_objects_not_host_readable(xcq, xcntr);

	/* Exports: device handles of the XPU CQ and counter, none for host ones. */
	struct fid_xpu_cq dev_cq;
	memset(&dev_cq, 0, sizeof(dev_cq));
	REQUIRE(fi_xpu_export(&xcq->fid, 0, &dev_cq.fid), 0);
	EXPECT(dev_cq.fid.fclass, FI_CLASS_CQ);
	EXPECT(dev_cq.fid.prov_id, PROV_ID);
	const struct tp_cq_state *cq_state = (const void *)(uintptr_t)dev_cq.fid.prov_ctx;
	REQUIRE(cq_state != NULL, 1);
	EXPECT(cq_state->magic, TP_MAGIC_CQ);
	EXPECT(cq_state->size, 32);
	EXPECT(cq_state->entry_size, sizeof(struct fi_cq_tagged_entry));
	struct fid_xpu_cntr dev_cntr;
	REQUIRE(fi_xpu_export(&xcntr->fid, 0, &dev_cntr.fid), 0);
	EXPECT(dev_cntr.fid.fclass, FI_CLASS_CNTR);
	EXPECT(dev_cntr.fid.prov_id, PROV_ID);
	const struct tp_cntr_state *cntr_state = (const void *)(uintptr_t)dev_cntr.fid.prov_ctx;
	REQUIRE(cntr_state != NULL, 1);
	EXPECT(cntr_state->magic, TP_MAGIC_CNTR);
	struct fid_xpu_cq dev_xcq_b;
	REQUIRE(fi_xpu_export(&xcq_b->fid, 0, &dev_xcq_b.fid), 0);
	EXPECT(((const struct tp_cq_state *)(uintptr_t)dev_xcq_b.fid.prov_ctx)->size,
	       TP_CQ_DEFAULT_SIZE);
	struct fid_xpu untouched = { .fclass = 1, .prov_id = 2, .prov_ctx = 3 };
	struct fid_xpu out = untouched;
	EXPECT(fi_xpu_export(&hcq->fid, 0, &out), -FI_EOPNOTSUPP);
	EXPECT(fi_xpu_export(&hcntr->fid, 0, &out), -FI_EOPNOTSUPP);
	EXPECT(fi_xpu_export(&av->fid, 0, &out), -FI_EINVAL);
	EXPECT(fi_xpu_export(&xcq->fid, 1, &out), -FI_EBADFLAGS);
	EXPECT(memcmp(&out, &untouched, sizeof(out)), 0);
	/* Exported or not, an XPU CQ stays unreadable from the host. */
	check_xpu_objects_not_host_readable(xcq, xcntr);

	/* Endpoints. */
	struct fi_xpu_ep_attr no_ctx = { .caps = 0, .tx_size = 0, .rx_size = 0, .flags = 0,
					 .xpu_ctx = NULL };
	struct fid_xpu_host_ep *bad = NULL;
	EXPECT(fi_xpu_endpoint(dom, &no_ctx, &bad, NULL), -FI_EINVAL);
	EXPECT(bad == NULL, 1);
	struct fid_xpu_host_ep *ep1 = open_ep(dom, ctx_a);
	struct fid_xpu_host_ep *ep2 = open_ep(dom, ctx_a);

	struct fid_xpu_ep dev_ep;
	EXPECT(fi_xpu_export(&ep1->fid, 0, &dev_ep.fid), -FI_EOPBADSTATE);
	EXPECT(fi_xpu_enable(ep1), -FI_ENOCQ);

	EXPECT(fi_xpu_ep_bind(ep1, &av->fid, 0), 0);
	EXPECT(fi_xpu_ep_bind(ep1, &av->fid, 0), -FI_EINVAL);
	/* Bound objects must share the endpoint's context. */
	EXPECT(fi_xpu_ep_bind(ep1, &xcq_b->fid, FI_TRANSMIT), -FI_EINVAL);
	EXPECT(fi_xpu_ep_bind(ep1, &xcntr_b->fid, FI_SEND), -FI_EINVAL);
	EXPECT(fi_xpu_ep_bind(ep1, &xcq->fid, 0), -FI_EBADFLAGS);
	EXPECT(fi_xpu_ep_bind(ep1, &ctx_b->fid, 0), -FI_EINVAL);
	EXPECT(fi_xpu_ep_bind(ep1, &xcq->fid, FI_TRANSMIT), 0);
	/* libfabric's way: through the fid's ops. */
	EXPECT(hcq->fid.ops->bind(&ep1->fid, &hcq->fid, FI_RECV), 0);
	EXPECT(fi_xpu_ep_bind(ep1, &xcntr->fid, FI_SEND | FI_RECV), 0);
	EXPECT(fi_xpu_ep_bind(ep2, &av->fid, 0), 0);
	EXPECT(fi_xpu_ep_bind(ep2, &hcq->fid, FI_TRANSMIT | FI_RECV), 0);
	EXPECT(fi_xpu_ep_bind(ep2, &hcntr->fid, FI_SEND), 0);

	REQUIRE(fi_xpu_enable(ep1), 0);
	EXPECT(fi_xpu_enable(ep1), -FI_EOPBADSTATE);
	EXPECT(fi_xpu_ep_bind(ep1, &hcntr->fid, FI_SEND), -FI_EOPBADSTATE);
	REQUIRE(fi_xpu_enable(ep2), 0);

	struct tp_name n1, n2;
	get_name(ep1, &n1);
	get_name(ep2, &n2);
	EXPECT(memcmp(&n1, &n2, sizeof(n1)) != 0, 1);

	REQUIRE(fi_xpu_export(&ep1->fid, 0, &dev_ep.fid), 0);
	EXPECT(dev_ep.fid.fclass, FI_CLASS_EP);
	EXPECT(dev_ep.fid.prov_id, PROV_ID);
	const struct tp_ep_state *ep_state = (const void *)(uintptr_t)dev_ep.fid.prov_ctx;
	REQUIRE(ep_state != NULL, 1);
	EXPECT(ep_state->magic, TP_MAGIC_EP);
	EXPECT(memcmp(&ep_state->name, &n1, sizeof(n1)), 0);
	EXPECT(ep_state->enabled, 1);
	EXPECT(ep_state->tx_cq, dev_cq.fid.prov_ctx);
	EXPECT(ep_state->rx_cq, 0); /* a host CQ has no device state */
	EXPECT(ep_state->cntr, dev_cntr.fid.prov_ctx);

	check_av(av, ctx_a, ctx_b, &n1, &n2);

	/* Wrong order: everything here is still in use. */
	EXPECT(fi_xpu_close(&dom->fid), -FI_EBUSY);
	EXPECT(fi_close(&ctx_a->fid), -FI_EBUSY);
	EXPECT(fi_xpu_close(&ctx_b->fid), -FI_EBUSY);
	EXPECT(fi_xpu_close(&av->fid), -FI_EBUSY);
	EXPECT(fi_xpu_close(&xcq->fid), -FI_EBUSY);
	EXPECT(fi_close(&hcq->fid), -FI_EBUSY);
	EXPECT(fi_xpu_close(&xcntr->fid), -FI_EBUSY);
	EXPECT(fi_xpu_close(&hcntr->fid), -FI_EBUSY);
	/* Nothing holds an MR: it closes while its context is still busy. */
	EXPECT(fi_xpu_close(&mrs[0]->fid), 0);
	/* A refused close leaves the object working. */
	uint64_t v = 0;
	EXPECT(fi_xpu_cntr_host_read(hcntr, &v), 0);
	EXPECT(v, 3);
	struct tp_name got;
	size_t len = sizeof(got);
	EXPECT(fi_xpu_av_lookup(av, 1, &got, &len, 0, ctx_a), 0);
	EXPECT(fi_xpu_ctx_getinfo(ctx_a, &(struct fi_xpu_ctx_info){ 0 }), 0);

	/* Right order. */
	EXPECT(fi_close(&ep1->fid), 0);
	EXPECT(fi_xpu_close(&ep2->fid), 0);
	EXPECT(fi_xpu_close(&xcq->fid), 0);
	/* The provider gave the CQ's device state back through the core. */
	EXPECT(fi_xpu_free(ctx_a, (void *)(uintptr_t)dev_cq.fid.prov_ctx), -FI_EINVAL);
	EXPECT(fi_xpu_free(ctx_a, (void *)(uintptr_t)dev_ep.fid.prov_ctx), -FI_EINVAL);
	EXPECT(fi_close(&hcq->fid), 0);
	EXPECT(fi_xpu_close(&xcq_b->fid), 0);
	EXPECT(fi_xpu_close(&xcntr->fid), 0);
	EXPECT(fi_xpu_free(ctx_a, (void *)(uintptr_t)dev_cntr.fid.prov_ctx), -FI_EINVAL);
	EXPECT(fi_xpu_close(&xcntr_b->fid), 0);
	EXPECT(fi_xpu_close(&hcntr->fid), 0);
	EXPECT(fi_xpu_close(&av->fid), 0);
	EXPECT(fi_xpu_close(&mrs[1]->fid), 0);
	EXPECT(fi_xpu_close(&dom->fid), -FI_EBUSY); /* contexts still open */
	EXPECT(fi_close(&ctx_b->fid), 0);
	EXPECT(fi_xpu_close(&ctx_a->fid), 0);
	EXPECT(fi_close(&dom->fid), 0);

	/* Closed handles are unknown: closing again or using them is refused. */
	EXPECT(fi_xpu_close(&dom->fid), -FI_EINVAL);
	EXPECT(fi_close(&dom->fid), -FI_EINVAL);
	EXPECT(fi_close(&ep1->fid), -FI_EINVAL);
	EXPECT(fi_xpu_close(&xcq->fid), -FI_EINVAL);
	EXPECT(fi_xpu_cntr_host_read(hcntr, &v), -FI_EINVAL);
	EXPECT(fi_xpu_ctx_getinfo(ctx_a, &(struct fi_xpu_ctx_info){ 0 }), -FI_EINVAL);
	EXPECT(fi_xpu_cq_host_read(hcq, &got, 1), -FI_EINVAL);

	fi_xpu_freeinfo(info);
	return expect_report("object_model: ok");
}

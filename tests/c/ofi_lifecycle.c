/* Endpoint lifecycles on the ofi provider that never carry data, over the
 * libfabric provider FI_XPU_OFI_PROVIDER names (or the default one):
 * endpoints opened and closed without ever being enabled, with and
 * without an AV, CQ and counter bound. libfabric 1.17's `tcp;ofi_rxm`
 * crashed closing such an endpoint. */
#include "ofi_common.h"

int main(void)
{
	struct fid_xpu_domain *dom;
	struct fid_xpu_host_ctx *ctx;
	struct fid_xpu_av *av;
	struct fid_xpu_host_cq *hcq;
	struct fid_xpu_host_cntr *hcntr;
	struct fid_xpu_host_ep *hep;
	struct fi_xpu_ctx_open_attr xattr = { .iface = FI_HMEM_SYSTEM, .device = 0, .ops = NULL };
	struct fi_xpu_cq_attr cattr = { .size = 16, .format = FI_CQ_FORMAT_TAGGED };
	struct fi_xpu_cntr_attr nattr = { 0 };
	struct fi_xpu_ep_attr eattr = { 0 };
	uint8_t name[64];
	size_t len = sizeof(name);

	ofi_open_domain("ofi", NULL, &dom);
	CHECK(fi_xpu_ctx_open(dom, &xattr, &ctx, NULL));
	CHECK(fi_xpu_av_open(dom, NULL, &av, NULL));
	cattr.xpu_ctx = ctx;
	nattr.xpu_ctx = ctx;
	CHECK(fi_xpu_cq_open(dom, &cattr, &hcq, NULL));
	CHECK(fi_xpu_cntr_open(dom, &nattr, &hcntr, NULL));
	eattr.xpu_ctx = ctx;

	/* Opened and closed at once. */
	CHECK(fi_xpu_endpoint(dom, &eattr, &hep, NULL));
	CHECK(fi_xpu_close(&hep->fid));
	/* Everything bound, never enabled. */
	CHECK(fi_xpu_endpoint(dom, &eattr, &hep, NULL));
	CHECK(fi_xpu_ep_bind(hep, &av->fid, 0));
	CHECK(fi_xpu_ep_bind(hep, &hcq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_xpu_ep_bind(hep, &hcntr->fid, FI_SEND | FI_WRITE));
	EXPECT_EQ(fi_xpu_getname(hep, name, &len), -FI_EOPBADSTATE);
	CHECK(fi_xpu_close(&hep->fid));
	/* One enabled beside one that is not. */
	CHECK(fi_xpu_endpoint(dom, &eattr, &hep, NULL));
	CHECK(fi_xpu_ep_bind(hep, &av->fid, 0));
	CHECK(fi_xpu_ep_bind(hep, &hcq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_xpu_enable(hep));
	CHECK(fi_xpu_getname(hep, name, &len));
	{
		struct fid_xpu_host_ep *idle;
		CHECK(fi_xpu_endpoint(dom, &eattr, &idle, NULL));
		CHECK(fi_xpu_close(&idle->fid));
	}
	CHECK(fi_xpu_close(&hep->fid));

	CHECK(fi_xpu_close(&hcq->fid));
	CHECK(fi_xpu_close(&hcntr->fid));
	CHECK(fi_xpu_close(&av->fid));
	CHECK(fi_xpu_close(&ctx->fid));
	CHECK(fi_xpu_close(&dom->fid));
	printf("ofi_lifecycle: ok\n");
	return 0;
}

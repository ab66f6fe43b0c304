/* Endpoint lifecycles on the ofi provider that never carry data, over the
 * libfabric provider FI_XPU_OFI_PROVIDER names (or the default one):
 * endpoints opened and closed without ever being enabled, with and
 * without an AV, CQ and counter bound. libfabric 1.17's `tcp;ofi_rxm`
 * crashed closing such an endpoint. */
#include "ofi_common.h"

int main(void)
{
	struct ofi_objs o;
	struct fid_xpu_host_ep *hep;
	struct fi_xpu_ep_attr eattr = { 0 };
	uint8_t name[64];
	size_t len = sizeof(name);

	ofi_open_objs(&o, 16, 1);
	eattr.xpu_ctx = o.ctx;

	/* Opened and closed at once. */
	CHECK(fi_xpu_endpoint(o.dom, &eattr, &hep, NULL));
	CHECK(fi_xpu_close(&hep->fid));
	/* Everything bound, never enabled. */
	CHECK(fi_xpu_endpoint(o.dom, &eattr, &hep, NULL));
	CHECK(fi_xpu_ep_bind(hep, &o.av->fid, 0));
	CHECK(fi_xpu_ep_bind(hep, &o.hcq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_xpu_ep_bind(hep, &o.hcntr->fid, FI_SEND | FI_WRITE));
	EXPECT_EQ(fi_xpu_getname(hep, name, &len), -FI_EOPBADSTATE);
	CHECK(fi_xpu_close(&hep->fid));
	/* One enabled beside one that is not. */
	CHECK(fi_xpu_endpoint(o.dom, &eattr, &hep, NULL));
	CHECK(fi_xpu_ep_bind(hep, &o.av->fid, 0));
	CHECK(fi_xpu_ep_bind(hep, &o.hcq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_xpu_enable(hep));
	CHECK(fi_xpu_getname(hep, name, &len));
	{
		struct fid_xpu_host_ep *idle;
		CHECK(fi_xpu_endpoint(o.dom, &eattr, &idle, NULL));
		CHECK(fi_xpu_close(&idle->fid));
	}
	CHECK(fi_xpu_close(&hep->fid));

	ofi_close_objs(&o);
	printf("ofi_lifecycle: ok\n");
	return 0;
}

/* Compiled to assembly by the tests: with one provider in the list, the
 * dispatch must be a comparison and a direct call, never a jump table. */
#define TESTPROV_NOINLINE 1
#define FI_XPU_DEVICE_PROVIDERS(P) P(testprov)
#include "testprov/fi_xpu_device_testprov.h"
#include <fi_xpu/device.h>

int post_write(struct fid_xpu_ep *ep, const void *buf, uint64_t addr);
int post_write(struct fid_xpu_ep *ep, const void *buf, uint64_t addr)
{
	return fi_xpu_write(ep, buf, 64, NULL, 0, NULL, addr, TESTPROV_KEY, NULL, 0,
			    FI_XPU_WORK_GROUP);
}

int64_t poll_cq(struct fid_xpu_cq *cq, struct fi_cq_entry *e);
int64_t poll_cq(struct fid_xpu_cq *cq, struct fi_cq_entry *e)
{
	return fi_xpu_cq_read(cq, e, 1, FI_XPU_WORK_ITEM);
}

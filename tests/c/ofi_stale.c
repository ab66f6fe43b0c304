/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The ofi provider's progress thread checks ring entries against copies of
 * the domain's registrations and the AV's addresses: what the host removed
 * before a device posts is refused, never served from a stale copy. One
 * process, its endpoint writing to itself:
 *
 *   a write whose descriptor names a second registration succeeds; once
 *   that registration is closed the same write ends with -FI_EINVAL (its
 *   buffer is still memory of the context, so only the descriptor check
 *   can refuse it);
 *   a write to the endpoint's own address succeeds; once the address is
 *   removed from the AV the same write ends with -FI_EINVAL; inserted
 *   again, a write to the new address succeeds.
 *
 * Prints "ofi_stale: ok".
 */
#include "ofi_common.h"

#define LEN 64

static int64_t write_status(struct ofi_node *n, void *buf, void *desc, uint64_t dst)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	int64_t rc;
	CHECK(fi_xpu_write(&n->ep[0], buf, LEN, desc, 0, &n->raw[0], dst, n->peer.key, NULL, 0,
			   FI_XPU_WORK_ITEM));
	rc = fi_xpu_cq_sread(&n->cq[0], &e, 1, 1, FI_XPU_WORK_ITEM);
	if (rc == -FI_EAVAIL) {
		memset(&err, 0, sizeof(err));
		CHECK(fi_xpu_cq_readerr(&n->cq[0], &err, 0, FI_XPU_WORK_ITEM));
		return -(int64_t)err.err;
	}
	EXPECT_EQ(rc, 1);
	return 0;
}

int main(void)
{
	struct ofi_opts o = { .nep = 1, .ring = 64, .cq_size = 64, .heap = 4096, .heap2 = 4096 };
	struct ofi_node n;
	uint8_t desc2[32];
	size_t len = sizeof(desc2);
	fi_addr_t fa;
	uint64_t dst;

	alarm(60);
	ofi_setup(&n, -1, 0, &o);
	dst = n.peer.base + 1024;
	memset(n.heap2, 0x5a, LEN);
	CHECK(fi_xpu_mr_desc(n.mr2, desc2, &len, 0, n.ctx));

	/* A closed registration's descriptor. */
	EXPECT_EQ(write_status(&n, n.heap2, desc2, dst), 0);
	EXPECT_EQ(n.heap[1024], 0x5a);
	CHECK(fi_xpu_close(&n.mr2->fid));
	n.mr2 = NULL;
	EXPECT_EQ(write_status(&n, n.heap2, desc2, dst), -FI_EINVAL);

	/* A removed address, then the same peer inserted again. */
	EXPECT_EQ(write_status(&n, n.local, NULL, dst), 0);
	fa = (fi_addr_t)n.raw[0];
	CHECK(fi_xpu_av_remove(n.av, &fa, 1, 0));
	EXPECT_EQ(write_status(&n, n.local, NULL, dst), -FI_EINVAL);
	EXPECT(fi_xpu_av_insert(n.av, n.peer.name[0], 1, &fa, 0, NULL) == 1);
	len = sizeof(n.raw[0]);
	CHECK(fi_xpu_av_lookup(n.av, fa, &n.raw[0], &len, 0, n.ctx));
	EXPECT_EQ(write_status(&n, n.local, NULL, dst), 0);

	CHECK(fi_xpu_free(n.ctx, n.heap2));
	ofi_teardown(&n);
	printf("ofi_stale: ok\n");
	return 0;
}

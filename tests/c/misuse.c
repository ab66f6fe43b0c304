/*
 * Misuse said out loud: each case makes one mistake a hurried user makes
 * and checks the code it gets; tests/bad_input.rs checks the log line the
 * library writes for it. The program prints the handles involved
 * ("ep=0x..."), so that the test can spell the exact line.
 *
 * usage: misuse <provider-name> <case>
 */
#include <fi_xpu.h>
#include <fi_xpu/device.h>

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "expect.h"

#define H(p) ((uintptr_t)(p))

struct setup {
	struct fi_xpu_info *info, *mine;
	struct fid_xpu_domain *dom;
	struct fid_xpu_host_ctx *ctx;
	struct fid_xpu_av *av;
	struct fid_xpu_host_cq *cq;
	struct fid_xpu_host_ep *ep;
};

static struct fi_xpu_info *find(struct fi_xpu_info *info, const char *prov)
{
	for (; info; info = info->next)
		if (strcmp(info->prov_name, prov) == 0)
			return info;
	return NULL;
}

/* A domain, the host XPU's context, an AV, a host CQ and an endpoint on
 * `prov`, nothing bound. */
static void open_all(struct setup *s, const char *prov)
{
	struct fi_xpu_ctx_open_attr xattr = { .iface = FI_HMEM_SYSTEM, .device = 0, .ops = NULL };
	struct fi_xpu_cq_attr cattr = { .size = 64, .flags = 0, .format = FI_CQ_FORMAT_DATA,
					.timeout = 0, .xpu_ctx = NULL };
	struct fi_xpu_ep_attr eattr = { .caps = 0, .tx_size = 0, .rx_size = 0, .flags = 0,
					.xpu_ctx = NULL };
	memset(s, 0, sizeof(*s));
	CHECK(fi_xpu_getinfo(FI_XPU_API_VERSION, NULL, 0, &s->info) == 0);
	s->mine = find(s->info, prov);
	CHECK(s->mine != NULL);
	CHECK(fi_xpu_domain(s->mine, NULL, &s->dom, NULL) == 0);
	CHECK(fi_xpu_ctx_open(s->dom, &xattr, &s->ctx, NULL) == 0);
	CHECK(fi_xpu_av_open(s->dom, NULL, &s->av, NULL) == 0);
	CHECK(fi_xpu_cq_open(s->dom, &cattr, &s->cq, NULL) == 0);
	eattr.xpu_ctx = s->ctx;
	CHECK(fi_xpu_endpoint(s->dom, &eattr, &s->ep, NULL) == 0);
}

static void close_all(struct setup *s)
{
	CHECK(fi_xpu_close(&s->ep->fid) == 0);
	CHECK(fi_xpu_close(&s->cq->fid) == 0);
	CHECK(fi_xpu_close(&s->av->fid) == 0);
	CHECK(fi_xpu_close(&s->ctx->fid) == 0);
	CHECK(fi_xpu_close(&s->dom->fid) == 0);
	fi_xpu_freeinfo(s->info);
}

/* Enabled with no CQ bound: -FI_ENOCQ; with one, it enables. */
static void enable_without_cq(const char *prov)
{
	struct setup s;
	open_all(&s, prov);
	printf("ep=%#" PRIxPTR "\n", H(s.ep));
	EXPECT(fi_xpu_ep_bind(s.ep, &s.av->fid, 0), 0);
	EXPECT(fi_xpu_enable(s.ep), -FI_ENOCQ);
	EXPECT(fi_xpu_ep_bind(s.ep, &s.cq->fid, FI_TRANSMIT | FI_RECV), 0);
	EXPECT(fi_xpu_enable(s.ep), 0);
	close_all(&s);
}

/* Enabled with no AV bound, on a provider that addresses peers through
 * it: -FI_ENOAV; with one, it enables. */
static void enable_without_av(const char *prov)
{
	struct setup s;
	open_all(&s, prov);
	printf("ep=%#" PRIxPTR "\n", H(s.ep));
	EXPECT(fi_xpu_ep_bind(s.ep, &s.cq->fid, FI_TRANSMIT | FI_RECV), 0);
	EXPECT(fi_xpu_enable(s.ep), -FI_ENOAV);
	EXPECT(fi_xpu_ep_bind(s.ep, &s.av->fid, 0), 0);
	EXPECT(fi_xpu_enable(s.ep), 0);
	close_all(&s);
}

/* A write with FI_COMPLETION from an endpoint whose only CQ is bound for
 * receives: refused when prepared on the host and when posted on the
 * device (-FI_ENOCQ); without FI_COMPLETION the same write moves data. */
static void write_without_cq(const char *prov)
{
	struct setup s;
	struct fid_xpu_ep xep;
	struct fid_xpu_mr *mr;
	uint8_t name[256];
	size_t len = sizeof(name);
	uint64_t raw[4], key, *buf, base;
	fi_addr_t fa = FI_ADDR_UNSPEC;
	void *mem;
	int fd;
	uint64_t off;

	open_all(&s, prov);
	printf("ep=%#" PRIxPTR "\n", H(s.ep));
	EXPECT(fi_xpu_ep_bind(s.ep, &s.av->fid, 0), 0);
	EXPECT(fi_xpu_ep_bind(s.ep, &s.cq->fid, FI_RECV), 0);
	EXPECT(fi_xpu_enable(s.ep), 0);
	CHECK(fi_xpu_getname(s.ep, name, &len) == 0);
	CHECK(fi_xpu_av_insert(s.av, name, 1, &fa, 0, NULL) == 1);
	len = sizeof(raw);
	CHECK(fi_xpu_av_lookup(s.av, fa, raw, &len, 0, s.ctx) == 0);
	CHECK(fi_xpu_alloc(s.ctx, 4096, 0, FI_XPU_ALLOC_DMABUF, &mem, &fd, &off) == 0);
	buf = mem;
	memset(buf, 0, 4096);
	CHECK(fi_xpu_mr_reg(s.dom, s.ctx, buf, 4096, FI_WRITE | FI_REMOTE_WRITE, 0, 0, 0, &mr, NULL) ==
	      0);
	CHECK(fi_xpu_mr_key(mr, &key) == 0);
	CHECK(fi_xpu_export(&s.ep->fid, 0, &xep.fid) == 0);

	/* The host-prepared request. */
	{
		uint8_t wr[FI_XPU_WR_SIZE];
		struct iovec iov = { .iov_base = &buf[1], .iov_len = 8 };
		void *desc = mr;
		struct fi_rma_iov rma = { .addr = H(&buf[0]), .len = 8, .key = key };
		struct fi_op_rma op;
		struct fi_wr_attr work;
		memset(&op, 0, sizeof(op));
		op.ep = (struct fid_ep *)s.ep;
		op.flags = FI_COMPLETION;
		op.msg.msg_iov = &iov;
		op.msg.desc = &desc;
		op.msg.iov_count = 1;
		op.msg.addr = fa;
		op.msg.rma_iov = &rma;
		op.msg.rma_iov_count = 1;
		work = (struct fi_wr_attr){ .op_type = FI_OP_WRITE, .op.rma = &op,
			.wr_buf = wr, .wr_len = sizeof(wr) };
		EXPECT(fi_xpu_prepare_wr(s.ep, &work), -FI_ENOCQ);
		op.flags = 0;
		EXPECT(fi_xpu_prepare_wr(s.ep, &work), 0);
	}

	/* The device post (to itself, on its own registration). */
	base = H(buf);
	buf[1] = 0x1234;
	EXPECT(fi_xpu_write(&xep, &buf[1], 8, NULL, 0, raw, base, key, NULL, FI_COMPLETION,
			    FI_XPU_WORK_ITEM),
	       -FI_ENOCQ);
	EXPECT(buf[0], 0);
	if (s.mine->prov_id == FI_XPU_PROV_SHM) {
		EXPECT(fi_xpu_write(&xep, &buf[1], 8, NULL, 0, raw, base, key, NULL, 0,
				    FI_XPU_WORK_ITEM),
		       0);
		for (int i = 0; i < 10000 && *(volatile uint64_t *)&buf[0] != 0x1234; i++)
			usleep(1000);
		EXPECT(*(volatile uint64_t *)&buf[0], 0x1234);
	}

	CHECK(fi_xpu_close(&s.ep->fid) == 0);
	s.ep = NULL;
	CHECK(fi_xpu_close(&mr->fid) == 0);
	CHECK(fi_xpu_free(s.ctx, mem) == 0);
	{
		struct fi_xpu_ep_attr eattr = { .xpu_ctx = s.ctx };
		CHECK(fi_xpu_endpoint(s.dom, &eattr, &s.ep, NULL) == 0);
	}
	close_all(&s);
}

/* An attribute whose .size is not this library's: -FI_EINVAL. */
static void attr_size(const char *prov)
{
	struct setup s;
	struct fi_xpu_domain_attr dattr = { .size = 3 };
	struct fid_xpu_domain *dom = NULL;
	open_all(&s, prov);
	printf("sizeof=%zu\n", sizeof(dattr));
	EXPECT(fi_xpu_domain(s.mine, &dattr, &dom, NULL), -FI_EINVAL);
	EXPECT(dom == NULL, 1);
	close_all(&s);
}

/* Garbage, and another provider's address, inserted into an AV: the
 * code of the refusal is printed for the test to check with the line. */
static void av_insert_bad(const char *prov)
{
	struct setup s, other;
	uint8_t junk[256], name[256];
	size_t len = sizeof(name);
	fi_addr_t fa = 7;
	open_all(&s, prov);
	open_all(&other, "test");
	printf("av=%#" PRIxPTR "\n", H(s.av));
	memset(junk, 0xab, sizeof(junk));
	printf("garbage=%d\n", fi_xpu_av_insert(s.av, junk, 1, &fa, 0, NULL));
	EXPECT(fa, FI_ADDR_UNSPEC);
	memset(name, 0, sizeof(name));
	EXPECT(fi_xpu_ep_bind(other.ep, &other.cq->fid, FI_TRANSMIT | FI_RECV), 0);
	EXPECT(fi_xpu_enable(other.ep), 0);
	CHECK(fi_xpu_getname(other.ep, name, &len) == 0);
	fa = 7;
	printf("foreign=%d\n", fi_xpu_av_insert(s.av, name, 1, &fa, 0, NULL));
	EXPECT(fa, FI_ADDR_UNSPEC);
	close_all(&other);
	close_all(&s);
}

/* Closing what is still bound or still has objects open: -FI_EBUSY. */
static void close_busy(const char *prov)
{
	struct setup s;
	struct fid_xpu_host_ep *ep2;
	struct fi_xpu_ep_attr eattr = { .xpu_ctx = NULL };
	open_all(&s, prov);
	eattr.xpu_ctx = s.ctx;
	CHECK(fi_xpu_endpoint(s.dom, &eattr, &ep2, NULL) == 0);
	printf("cq=%#" PRIxPTR "\n", H(s.cq));
	printf("dom=%#" PRIxPTR "\n", H(s.dom));
	EXPECT(fi_xpu_ep_bind(s.ep, &s.cq->fid, FI_TRANSMIT | FI_RECV), 0);
	EXPECT(fi_xpu_ep_bind(ep2, &s.cq->fid, FI_TRANSMIT), 0);
	EXPECT(fi_xpu_close(&s.cq->fid), -FI_EBUSY);
	EXPECT(fi_xpu_close(&s.dom->fid), -FI_EBUSY);
	EXPECT(fi_xpu_close(&ep2->fid), 0);
	close_all(&s);
}

/* The usual set-up, for the debug level's lines. */
static void lifecycle(const char *prov)
{
	struct setup s;
	struct fid_xpu_mr *mr;
	uint8_t name[256];
	size_t len = sizeof(name);
	fi_addr_t fa;
	void *mem;
	open_all(&s, prov);
	printf("ep=%#" PRIxPTR "\n", H(s.ep));
	printf("ctx=%#" PRIxPTR "\n", H(s.ctx));
	printf("cq=%#" PRIxPTR "\n", H(s.cq));
	printf("av=%#" PRIxPTR "\n", H(s.av));
	EXPECT(fi_xpu_ep_bind(s.ep, &s.av->fid, 0), 0);
	EXPECT(fi_xpu_ep_bind(s.ep, &s.cq->fid, FI_TRANSMIT | FI_RECV), 0);
	EXPECT(fi_xpu_enable(s.ep), 0);
	CHECK(fi_xpu_getname(s.ep, name, &len) == 0);
	EXPECT(fi_xpu_av_insert(s.av, name, 1, &fa, 0, NULL), 1);
	printf("fi_addr=%" PRIu64 "\n", (uint64_t)fa);
	CHECK(fi_xpu_alloc(s.ctx, 4096, 0, 0, &mem, NULL, NULL) == 0);
	CHECK(fi_xpu_mr_reg(s.dom, s.ctx, mem, 4096, FI_REMOTE_WRITE, 0, 0, 0, &mr, NULL) == 0);
	printf("mr=%#" PRIxPTR "\n", H(mr));
	printf("mem=%#" PRIxPTR "\n", H(mem));
	printf("dom=%#" PRIxPTR "\n", H(s.dom));
	CHECK(fi_xpu_close(&mr->fid) == 0);
	CHECK(fi_xpu_free(s.ctx, mem) == 0);
	close_all(&s);
}

/* Only discovery: for FI_XPU_PROVIDER and FI_XPU_LOG_LEVEL. */
static void discover(const char *prov)
{
	(void)prov;
	struct fi_xpu_info *info = NULL;
	int rc = fi_xpu_getinfo(FI_XPU_API_VERSION, NULL, 0, &info);
	printf("getinfo=%d\n", rc);
	if (rc == 0)
		fi_xpu_freeinfo(info);
}

/* The cases, by the name the tests pass as the second argument. */
static const struct {
	const char *name;
	void (*run)(const char *prov);
} cases[] = {
	{ "enable-nocq", enable_without_cq },
	{ "enable-noav", enable_without_av },
	{ "write-nocq", write_without_cq },
	{ "attr-size", attr_size },
	{ "av-insert", av_insert_bad },
	{ "close-busy", close_busy },
	{ "lifecycle", lifecycle },
	{ "discover", discover },
};

int main(int argc, char **argv)
{
	const char *prov = argc > 1 ? argv[1] : "shm";
	const char *what = argc > 2 ? argv[2] : "";
	size_t i;
	setvbuf(stdout, NULL, _IONBF, 0);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (strcmp(what, cases[i].name) == 0)
			break;
	if (i == sizeof(cases) / sizeof(cases[0])) {
		fprintf(stderr, "unknown case '%s'\n", what);
		return 2;
	}
	cases[i].run(prov);
	return expect_report("misuse: all checks passed");
}

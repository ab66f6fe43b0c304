/* Device API dispatch on the host XPU with the test provider compiled in:
 * unknown prov_id -> -FI_ENOSYS, bad scope or NULL handle -> -FI_EINVAL,
 * and a testprov handle reaches the provider (loopback write/read, counters
 * and CQ behave). Built twice by the test: with P(testprov) and, with
 * -DNO_PROVIDERS, with an empty provider list. */
#ifdef NO_PROVIDERS
#define FI_XPU_DEVICE_PROVIDERS(P)
#else
#define FI_XPU_DEVICE_PROVIDERS(P) P(testprov)
#endif
#include "testprov/fi_xpu_device_testprov.h"
#include <fi_xpu/device.h>

#include <stdio.h>
#include <string.h>
#include <time.h>

static int failures;
#define CHECK(c)                                                              \
	do {                                                                  \
		if (!(c)) {                                                   \
			fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); \
			failures++;                                           \
		}                                                             \
	} while (0)

/* Calls all 22 operations on the handles; res[i] is operation i's result. */
static void call_all(struct fid_xpu_ep *ep, struct fid_xpu_cq *cq, struct fid_xpu_cntr *cntr,
		     int scope, int64_t res[TESTPROV_NUM_OPS])
{
	static uint64_t src[4] = {1, 2, 3, 4}, dst[4];
	struct fi_cq_entry e[2];
	fi_addr_t from[2];

	res[TESTPROV_OP_WRITE] = fi_xpu_write(ep, src, 8, NULL, 0, NULL, (uint64_t)(uintptr_t)dst,
					      TESTPROV_KEY, NULL, 0, scope);
	res[TESTPROV_OP_READ] = fi_xpu_read(ep, dst, 8, NULL, NULL, (uint64_t)(uintptr_t)src,
					    TESTPROV_KEY, NULL, 0, scope);
	res[TESTPROV_OP_SEND] = fi_xpu_send(ep, src, 8, NULL, 0, NULL, NULL, 0, scope);
	res[TESTPROV_OP_RECV] = fi_xpu_recv(ep, dst, 8, NULL, NULL, NULL, 0, scope);
	res[TESTPROV_OP_TSEND] = fi_xpu_tsend(ep, src, 8, NULL, 0, NULL, 1, NULL, 0, scope);
	res[TESTPROV_OP_TRECV] = fi_xpu_trecv(ep, dst, 8, NULL, NULL, 1, 0, NULL, 0, scope);
	res[TESTPROV_OP_ATOMIC] = fi_xpu_atomic(ep, src, 1, NULL, NULL, 0, 0, FI_UINT64, FI_SUM,
						NULL, 0, scope);
	res[TESTPROV_OP_FETCH_ATOMIC] = fi_xpu_fetch_atomic(ep, src, 1, NULL, dst, NULL, NULL, 0,
							    0, FI_UINT64, FI_SUM, NULL, 0, scope);
	res[TESTPROV_OP_COMPARE_ATOMIC] =
		fi_xpu_compare_atomic(ep, src, 1, NULL, src, NULL, dst, NULL, NULL, 0, 0,
				      FI_UINT64, FI_CSWAP, NULL, 0, scope);
	res[TESTPROV_OP_FLUSH] = fi_xpu_flush(ep, 0, scope);
	res[TESTPROV_OP_CNTR_READ] = (int64_t)fi_xpu_cntr_read(cntr, scope);
	res[TESTPROV_OP_CNTR_READERR] = (int64_t)fi_xpu_cntr_readerr(cntr, scope);
	res[TESTPROV_OP_CNTR_WAIT] = fi_xpu_cntr_wait_status(cntr, 0, 0, scope);
	res[TESTPROV_OP_CNTR_ADD] = fi_xpu_cntr_add(cntr, 1, scope);
	res[TESTPROV_OP_CNTR_SET] = fi_xpu_cntr_set(cntr, 5, scope);
	res[TESTPROV_OP_CNTR_ADDERR] = fi_xpu_cntr_adderr(cntr, 1, scope);
	res[TESTPROV_OP_CNTR_SETERR] = fi_xpu_cntr_seterr(cntr, 0, scope);
	res[TESTPROV_OP_CQ_READ] = fi_xpu_cq_read(cq, e, 2, scope);
	res[TESTPROV_OP_CQ_READFROM] = fi_xpu_cq_readfrom(cq, e, 2, from, scope);
	res[TESTPROV_OP_CQ_READERR] = fi_xpu_cq_readerr(cq, e, 0, scope);
	res[TESTPROV_OP_CQ_SREAD] = fi_xpu_cq_sread(cq, e, 2, 1, scope);
	res[TESTPROV_OP_CQ_SREADFROM] = fi_xpu_cq_sreadfrom(cq, e, 2, from, 1, scope);
}

static void all_equal(const int64_t res[TESTPROV_NUM_OPS], int64_t want, const char *what)
{
	for (int i = 0; i < TESTPROV_NUM_OPS; i++)
		if (res[i] != want) {
			fprintf(stderr, "%s: operation %d returned %lld, expected %lld\n", what, i,
				(long long)res[i], (long long)want);
			failures++;
		}
}

static struct testprov_cntr cntr_state;
static struct testprov_cq cq_state;
static struct testprov_ep ep_state = {{0}, &cntr_state, &cq_state};
static struct fid_xpu_ep ep = {{FI_CLASS_EP, FI_XPU_PROV_TESTPROV, 0}};
static struct fid_xpu_cq cq = {{FI_CLASS_CQ, FI_XPU_PROV_TESTPROV, 0}};
static struct fid_xpu_cntr cntr = {{FI_CLASS_CNTR, FI_XPU_PROV_TESTPROV, 0}};

#ifndef NO_PROVIDERS
#define REGION 256
static unsigned char group_src[REGION], group_dst[3][REGION];

/* Each work group writes its own region once, cooperatively: the test
 * provider has no cooperative form of its own, so the group's leader
 * issues the one write and the group shares its status. */
static void group_writes(void *arg)
{
	int *bad = arg;
	uint32_t g = fi_xpu_arch_group_id();
	int ret = fi_xpu_coop_write(&ep, group_src, REGION, NULL, 0, NULL,
			       (uint64_t)(uintptr_t)group_dst[g], TESTPROV_KEY,
			       (void *)(uintptr_t)(g + 1), 0, FI_XPU_WORK_GROUP);
	if (ret)
		__atomic_fetch_add(bad, 1, __ATOMIC_RELAXED);
}

/* The work groups split one write of SPLIT_LEN bytes (not a multiple of
 * 16 per group): the test provider has no cooperative form, so each
 * group's leader issues its share as one write. */
#define SPLIT_GROUPS 5
#define SPLIT_LEN 1000
static unsigned char split_src[SPLIT_LEN], split_dst[SPLIT_LEN];

static void split_writes(void *arg)
{
	int *bad = arg;
	uint32_t g = fi_xpu_arch_group_id();
	int ret = fi_xpu_coop_write_part(&ep, split_src, SPLIT_LEN, NULL, 0, NULL,
					 (uint64_t)(uintptr_t)split_dst, TESTPROV_KEY,
					 (void *)(uintptr_t)(g + 1), 0, g, SPLIT_GROUPS,
					 FI_XPU_WORK_GROUP);
	if (ret)
		__atomic_fetch_add(bad, 1, __ATOMIC_RELAXED);
	/* A provider without put-with-signal: -FI_ENOSYS per share, and
	 * the split's own refusals before it. */
	if (fi_xpu_coop_put_signal_part(&ep, split_src, SPLIT_LEN, NULL, NULL, 0, 0, 0, 0, 1,
					FI_XPU_SIGNAL_ADD, NULL, 0, g, SPLIT_GROUPS,
					FI_XPU_WORK_GROUP) != -FI_ENOSYS ||
	    fi_xpu_coop_put_signal_part(&ep, split_src, SPLIT_LEN, NULL, NULL, 0, 0, 0, 0, 1,
					FI_XPU_SIGNAL_SET, NULL, 0, g, SPLIT_GROUPS,
					FI_XPU_WORK_GROUP) != -FI_EINVAL ||
	    fi_xpu_coop_write_part(&ep, split_src, SPLIT_LEN, NULL, 0, NULL, 0, TESTPROV_KEY,
				   NULL, 0, g + SPLIT_GROUPS, SPLIT_GROUPS,
				   FI_XPU_WORK_GROUP) != -FI_EINVAL)
		__atomic_fetch_add(bad, 1, __ATOMIC_RELAXED);
}

/* Group 0 waits on the counter; group 1 moves the error count meanwhile. */
static void wait_vs_error(void *arg)
{
	int *ret = arg;
	/* Two work items of one group, which a GPU runs at the same time (two
	 * groups might not be: the GPU-like launcher may run one at a time). */
	if (fi_xpu_arch_local_id() == 0) {
		ret[0] = fi_xpu_cntr_wait_status(&cntr, 1000, 10000, FI_XPU_WORK_ITEM);
	} else {
		struct timespec ts = {0, 20 * 1000 * 1000};
		nanosleep(&ts, NULL);
		ret[1] = fi_xpu_cntr_adderr(&cntr, 1, FI_XPU_WORK_ITEM);
	}
}
#endif

/* The ordered-signalling extensions: a provider that does not define
 * FI_XPU_DEVICE_SIGNAL_<name> (the test provider) answers -FI_ENOSYS and
 * gives no pointer, like an unknown id; bad handles and scopes are
 * -FI_EINVAL first. The signal wait reads local memory, so it works for
 * any endpoint handle. */
static void signal_extensions(struct fid_xpu_ep *e, int64_t want)
{
	static uint64_t src = 1, word = 3;
	CHECK(fi_xpu_put_signal(e, &src, 8, NULL, NULL, 0, 0, 0, 0, 1, FI_XPU_SIGNAL_SET, NULL, 0,
				FI_XPU_WORK_ITEM) == want);
	CHECK(fi_xpu_fence(e, 0, FI_XPU_WORK_ITEM) == want);
	CHECK(fi_xpu_quiet(e, 0, FI_XPU_WORK_ITEM) == want);
	CHECK(fi_xpu_peer_ptr(e, NULL, 0, 0, 8) == NULL);
	CHECK(fi_xpu_put_signal(e, &src, 8, NULL, NULL, 0, 0, 0, 0, 1, FI_XPU_SIGNAL_SET, NULL, 0,
				FI_XPU_DEVICE + 1) == -FI_EINVAL);
	CHECK(fi_xpu_fence(e, 0, -1) == -FI_EINVAL);
	CHECK(fi_xpu_signal_wait_until(e, &word, FI_XPU_CMP_EQ, 3, 0, FI_XPU_WORK_ITEM) == 0);
	CHECK(fi_xpu_signal_wait_until(e, &word, FI_XPU_CMP_GT, 3, 5, FI_XPU_WORK_ITEM) ==
	      -FI_ETIMEDOUT);
}

int main(void)
{
	int64_t res[TESTPROV_NUM_OPS];
	static const uint32_t unknown[] = {0, 1, FI_XPU_PROV_SHM, FI_XPU_PROV_OFI, 99,
					   FI_XPU_PROV_TESTPROV + 1, 0xffffffffu};

	ep.fid.prov_ctx = (uint64_t)(uintptr_t)&ep_state;
	cq.fid.prov_ctx = (uint64_t)(uintptr_t)&cq_state;
	cntr.fid.prov_ctx = (uint64_t)(uintptr_t)&cntr_state;

	/* No provider claims these ids (shm/ofi are not compiled in here). */
	for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		struct fid_xpu_ep e = ep;
		struct fid_xpu_cq q = cq;
		struct fid_xpu_cntr c = cntr;
		e.fid.prov_id = q.fid.prov_id = c.fid.prov_id = unknown[i];
		for (int scope = FI_XPU_WORK_ITEM; scope <= FI_XPU_DEVICE; scope++) {
			call_all(&e, &q, &c, scope, res);
			all_equal(res, -FI_ENOSYS, "unknown prov_id");
		}
	}
	/* Bad scopes and NULL handles are refused before any provider runs. */
	call_all(&ep, &cq, &cntr, -1, res);
	all_equal(res, -FI_EINVAL, "scope -1");
	call_all(&ep, &cq, &cntr, FI_XPU_DEVICE + 1, res);
	all_equal(res, -FI_EINVAL, "scope DEVICE+1");
	call_all(NULL, NULL, NULL, FI_XPU_WORK_ITEM, res);
	all_equal(res, -FI_EINVAL, "NULL handles");
	signal_extensions(&ep, -FI_ENOSYS);
	{
		struct fid_xpu_ep e = ep;
		e.fid.prov_id = 99;
		signal_extensions(&e, -FI_ENOSYS);
	}
	CHECK(fi_xpu_fence(NULL, 0, FI_XPU_WORK_ITEM) == -FI_EINVAL);
	CHECK(fi_xpu_quiet((struct fid_xpu_ep *)(void *)&cq, 0, FI_XPU_WORK_ITEM) == -FI_EINVAL);
	for (int i = 0; i < TESTPROV_NUM_OPS; i++)
		CHECK(ep_state.calls[i] == 0 && cq_state.calls[i] == 0 && cntr_state.calls[i] == 0);

#ifdef NO_PROVIDERS
	/* With nothing compiled in, even the test provider's id is unknown. */
	call_all(&ep, &cq, &cntr, FI_XPU_WORK_ITEM, res);
	all_equal(res, -FI_ENOSYS, "empty provider list");
#else
	/* Every operation reaches the provider exactly once. */
	call_all(&ep, &cq, &cntr, FI_XPU_WORK_ITEM, res);
	for (int i = 0; i < TESTPROV_NUM_OPS; i++)
		CHECK(ep_state.calls[i] + cq_state.calls[i] + cntr_state.calls[i] == 1);
	CHECK(res[TESTPROV_OP_WRITE] == 0 && res[TESTPROV_OP_READ] == 0);
	CHECK(res[TESTPROV_OP_SEND] == -FI_EOPNOTSUPP);
	CHECK(res[TESTPROV_OP_CNTR_READ] == 2); /* write and read completed */
	CHECK(res[TESTPROV_OP_CNTR_READERR] == 0 && res[TESTPROV_OP_CNTR_WAIT] == 0);
	CHECK(res[TESTPROV_OP_CQ_READ] == 2);   /* their two completions */
	CHECK(res[TESTPROV_OP_CQ_READFROM] == -FI_EOPNOTSUPP);
	CHECK(cntr_state.value == 5 && cntr_state.err == 0);

	/* A wrong key is refused without writing. */
	{
		uint64_t s = 7, d = 0;
		CHECK(fi_xpu_write(&ep, &s, 8, NULL, 0, NULL, (uint64_t)(uintptr_t)&d, 1, NULL, 0,
				   FI_XPU_WORK_ITEM) == -FI_EACCES && d == 0);
		CHECK(fi_xpu_cq_read(&cq, &(struct fi_cq_entry){0}, 1, FI_XPU_WORK_ITEM) == -FI_EAGAIN);
		CHECK(fi_xpu_cntr_wait_status(&cntr, 6, 30, FI_XPU_WORK_ITEM) == -FI_ETIMEDOUT);
	}

	/* Work-group writes from three racing groups: one completion each. */
	{
		struct fi_xpu_host_launch_attr a = {3, 32, 0, 0};
		struct fi_cq_entry e[4];
		int bad = 0, seen = 0;
		for (int i = 0; i < REGION; i++)
			group_src[i] = (unsigned char)(i ^ 0x5a);
		CHECK(fi_xpu_host_launch(&a, group_writes, &bad) == 0 && bad == 0);
		for (int g = 0; g < 3; g++)
			CHECK(memcmp(group_dst[g], group_src, REGION) == 0);
		CHECK(ep_state.calls[TESTPROV_OP_WRITE] == 1 + 1 + 3); /* + the refused one */
		CHECK(cntr_state.value == 5 + 3);
		CHECK(fi_xpu_cq_read(&cq, e, 4, FI_XPU_WORK_ITEM) == 3);
		for (int i = 0; i < 3; i++)
			seen |= 1 << ((int)(uintptr_t)e[i].op_context - 1);
		CHECK(seen == 7);
	}

	/* One write split over five groups: every byte, one completion
	 * per share. */
	{
		struct fi_xpu_host_launch_attr a = {SPLIT_GROUPS, 8, 0, 0};
		struct fi_cq_entry e[SPLIT_GROUPS + 1];
		int bad = 0, seen = 0;
		for (int i = 0; i < SPLIT_LEN; i++)
			split_src[i] = (unsigned char)(i * 7 + 3);
		CHECK(fi_xpu_host_launch(&a, split_writes, &bad) == 0 && bad == 0);
		CHECK(memcmp(split_dst, split_src, SPLIT_LEN) == 0);
		CHECK(ep_state.calls[TESTPROV_OP_WRITE] == 1 + 1 + 3 + SPLIT_GROUPS);
		CHECK(cntr_state.value == 5 + 3 + SPLIT_GROUPS);
		CHECK(fi_xpu_cq_read(&cq, e, SPLIT_GROUPS + 1, FI_XPU_WORK_ITEM) == SPLIT_GROUPS);
		for (int i = 0; i < SPLIT_GROUPS; i++)
			seen |= 1 << ((int)(uintptr_t)e[i].op_context - 1);
		CHECK(seen == (1 << SPLIT_GROUPS) - 1);
	}

	/* A wait ends with -FI_EAVAIL when the error count moves. */
	{
		struct fi_xpu_host_launch_attr a = {1, 2, 0, 0};
		int ret[2] = {1, 1};
		CHECK(fi_xpu_host_launch(&a, wait_vs_error, ret) == 0);
		CHECK(ret[0] == -FI_EAVAIL && ret[1] == 0);
	}
#endif
	if (failures)
		return 1;
	printf("dispatch ok\n");
	return 0;
}

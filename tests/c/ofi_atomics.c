/* Contended atomics on the ofi provider: NPROC processes (fork), each
 * posting fetch-add and atomic add of 1 to a counter of every rank, itself
 * included, ITERS times per target: non-fetching atomics with
 * FI_DELIVERY_COMPLETE first (libfabric 1.17's shm provider returned their
 * inject buffers to its pool twice, so that the atomics after them shared
 * buffers: wrong counters, duplicate fetched values, crashes), then
 * fetch-add with and without FI_DELIVERY_COMPLETE, atomic add without, and
 * fetch-add with FI_INJECT from an operand overwritten as soon as the post
 * returns. Afterwards every counter must hold NPROC * ITERS and, for
 * fetch-add, the values fetched from one counter by all ranks together
 * must be exactly 0 .. NPROC * ITERS - 1, each once. The libfabric
 * provider comes from FI_XPU_OFI_PROVIDER.
 *
 * Names, keys and fetched values travel through a MAP_SHARED board set up
 * before the fork. Operands and fetch results live in memory allocated
 * through the XPU context (the provider refuses private host memory),
 * except the FI_INJECT operand, which is copied into the ring. */
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "ofi_common.h"

#define NPROC 4
#define ITERS 64
#define TOTAL (NPROC * ITERS)
#define NCASE 5
#define DEADLINE_MS 60000

struct board {
	uint32_t arrived, generation;
	uint8_t name[NPROC][64];
	uint64_t base[NPROC], key[NPROC];
	/* fetched[c][target][rank * ITERS + i] */
	uint64_t fetched[NCASE][NPROC][TOTAL];
};

static struct board *board;
static uint64_t start_ms;

static void barrier(void)
{
	uint32_t gen = __atomic_load_n(&board->generation, __ATOMIC_ACQUIRE);
	if (__atomic_add_fetch(&board->arrived, 1, __ATOMIC_ACQ_REL) == NPROC) {
		__atomic_store_n(&board->arrived, 0, __ATOMIC_RELAXED);
		__atomic_add_fetch(&board->generation, 1, __ATOMIC_ACQ_REL);
		return;
	}
	while (__atomic_load_n(&board->generation, __ATOMIC_ACQUIRE) == gen) {
		EXPECT(ofi_now_ms() - start_ms < DEADLINE_MS);
		usleep(100);
	}
}

enum { ADD_DC, FETCH_DC, FETCH, ADD, FETCH_INJECT };

static const char *case_name(int c)
{
	static const char *names[NCASE] = { "atomic_add+FI_DELIVERY_COMPLETE",
					    "fetch_add+FI_DELIVERY_COMPLETE", "fetch_add",
					    "atomic_add", "fetch_add+FI_INJECT" };
	return names[c];
}

/* Reads one completion (or an error, which fails the run). */
static int64_t reap(struct fid_xpu_cq *cq)
{
	struct fi_cq_tagged_entry e[16];
	int64_t n = fi_xpu_cq_read(cq, e, 16, FI_XPU_WORK_ITEM);
	if (n == -FI_EAGAIN)
		return 0;
	ofi_no_error_entry(cq, n);
	return n;
}

static int run(int rank)
{
	struct ofi_objs o;
	struct fid_xpu_host_ep *hep;
	struct fid_xpu_mr *mr;
	struct fid_xpu_cq cq;
	struct fid_xpu_ep ep;
	struct fi_xpu_ep_attr eattr = { 0 };
	uint64_t raw[NPROC], *heap, *one, *result, off;
	size_t len;
	int fd;

	ofi_open_objs(&o, 1024, 0);
	eattr.xpu_ctx = o.ctx;
	eattr.tx_size = getenv("OFI_ATOMICS_RING") ? (size_t)atoi(getenv("OFI_ATOMICS_RING")) : 0;
	CHECK(fi_xpu_endpoint(o.dom, &eattr, &hep, NULL));
	CHECK(fi_xpu_ep_bind(hep, &o.av->fid, 0));
	CHECK(fi_xpu_ep_bind(hep, &o.hcq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_xpu_enable(hep));
	len = sizeof(board->name[rank]);
	CHECK(fi_xpu_getname(hep, board->name[rank], &len));
	CHECK(fi_xpu_export(&hep->fid, 0, &ep.fid));
	CHECK(fi_xpu_export(&o.hcq->fid, 0, &cq.fid));
	/* The counters (one per case), registered for remote access. */
	CHECK(fi_xpu_alloc(o.ctx, 4096, 0, 0, (void **)&heap, &fd, &off));
	memset(heap, 0, 4096);
	CHECK(fi_xpu_mr_reg(o.dom, o.ctx, heap, 4096, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &mr,
			    NULL));
	CHECK(fi_xpu_mr_key(mr, &board->key[rank]));
	board->base[rank] = (uint64_t)(uintptr_t)heap;
	/* The operand and one fetch result per operation, never reused. */
	CHECK(fi_xpu_alloc(o.ctx, 8 * (1 + TOTAL), 0, 0, (void **)&one, &fd, &off));
	*one = 1;
	result = one + 1;
	barrier();
	for (int t = 0; t < NPROC; t++) {
		fi_addr_t fa;
		EXPECT(fi_xpu_av_insert(o.av, board->name[t], 1, &fa, 0, NULL) == 1);
		len = sizeof(raw[t]);
		CHECK(fi_xpu_av_lookup(o.av, fa, &raw[t], &len, 0, o.ctx));
	}
	barrier();

	for (int c = 0; c < NCASE; c++) {
		uint64_t flags = c == ADD_DC || c == FETCH_DC ? FI_DELIVERY_COMPLETE
				 : c == FETCH_INJECT			? FI_INJECT
									: 0;
		int fetch = c != ADD_DC && c != ADD;
		int64_t posted = 0, done = 0;
		memset(result, 0xff, 8 * TOTAL);
		/* Each round posts one operation to every rank, starting at a
		 * different one per rank so that every counter is contended. */
		while (done < TOTAL) {
			while (posted < TOTAL) {
				int t = (int)((posted + rank) % NPROC);
				uint64_t addr = board->base[t] + 8 * (uint64_t)c;
				uint64_t mine = 1; /* overwritten once posted */
				int rc;
				if (c == FETCH_INJECT)
					rc = fi_xpu_fetch_atomic(&ep, &mine, 1, NULL,
								 &result[posted], NULL, &raw[t],
								 addr, board->key[t], FI_UINT64,
								 FI_SUM, NULL, flags,
								 FI_XPU_WORK_ITEM);
				else if (fetch)
					rc = fi_xpu_fetch_atomic(&ep, one, 1, NULL, &result[posted],
								 NULL, &raw[t], addr, board->key[t],
								 FI_UINT64, FI_SUM, NULL, flags,
								 FI_XPU_WORK_ITEM);
				else
					rc = fi_xpu_atomic(&ep, one, 1, NULL, &raw[t], addr,
							   board->key[t], FI_UINT64, FI_SUM, NULL,
							   flags, FI_XPU_WORK_ITEM);
				*(volatile uint64_t *)&mine = 1000;
				if (rc == -FI_EAGAIN)
					break;
				CHECK(rc);
				posted++;
			}
			done += reap(&cq);
			EXPECT(ofi_now_ms() - start_ms < DEADLINE_MS);
		}
		CHECK(fi_xpu_flush(&ep, 0, FI_XPU_WORK_ITEM));
		if (fetch)
			for (int64_t k = 0; k < TOTAL; k++) {
				int t = (int)((k + rank) % NPROC);
				board->fetched[c][t][rank * ITERS + k / NPROC] = result[k];
			}
		barrier();
		/* Without FI_DELIVERY_COMPLETE a completion says the operand
		 * left, not that the target applied it: give the target's
		 * progress thread time to apply what is on its way. */
		if (!(flags & FI_DELIVERY_COMPLETE)) {
			uint64_t t0 = ofi_now_ms();
			while (__atomic_load_n(&heap[c], __ATOMIC_ACQUIRE) < TOTAL &&
			       ofi_now_ms() - t0 < 10000)
				usleep(100);
		}
		barrier();
		if (heap[c] != TOTAL) {
			fprintf(stderr, "[%d] rank %d, %s: counter %" PRIu64 ", expected %d\n",
				(int)getpid(), rank, case_name(c), heap[c], TOTAL);
			exit(1);
		}
		if (fetch) {
			static unsigned char seen[TOTAL];
			memset(seen, 0, sizeof seen);
			for (int k = 0; k < TOTAL; k++) {
				uint64_t v = board->fetched[c][rank][k];
				if (v >= TOTAL || seen[v]) {
					fprintf(stderr,
						"[%d] rank %d, %s: fetched %" PRIu64
						" (%s) at %d\n",
						(int)getpid(), rank, case_name(c), v,
						v >= TOTAL ? "out of range" : "twice", k);
					exit(1);
				}
				seen[v] = 1;
			}
		}
		barrier();
		if (rank == 0)
			printf("ofi_atomics: %s: %d ranks x %d ops each, counters and fetched "
			       "values right\n",
			       case_name(c), NPROC, TOTAL);
	}
	barrier();
	CHECK(fi_xpu_close(&hep->fid));
	CHECK(fi_xpu_close(&mr->fid));
	CHECK(fi_xpu_free(o.ctx, heap));
	CHECK(fi_xpu_free(o.ctx, one));
	ofi_close_objs(&o);
	return 0;
}

int main(void)
{
	pid_t pid[NPROC];
	int failed = 0;

	board = mmap(NULL, sizeof(*board), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
		     0);
	EXPECT(board != MAP_FAILED);
	start_ms = ofi_now_ms();
	fflush(stdout);
	for (int r = 0; r < NPROC; r++) {
		pid[r] = fork();
		EXPECT(pid[r] >= 0);
		if (pid[r] == 0)
			exit(run(r));
	}
	printf("ofi_atomics pids");
	for (int r = 0; r < NPROC; r++)
		printf(" %d", (int)pid[r]);
	printf("\n");
	fflush(stdout);
	for (int left = NPROC; left > 0; left--) {
		int st = 0;
		pid_t p = waitpid(-1, &st, 0);
		if (p < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "rank pid %d failed (status %d)\n", (int)p, st);
			failed = 1;
			/* The others would wait in a barrier for it. */
			for (int r = 0; r < NPROC; r++)
				kill(pid[r], SIGKILL);
		}
	}
	if (failed)
		return 1;
	printf("ofi_atomics: ok\n");
	return 0;
}

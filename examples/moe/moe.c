/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * MoE dispatch and combine (moe.h) on the host XPU: the phases run as
 * kernels of G work groups of N work items on CPU threads, through
 * fi_xpu_host_launch, on N processes of one machine.
 *
 *   moe [-n ranks] [-p shm|ofi] [-f tcp|shm] [-T tokens] [-H hidden]
 *       [-E experts per rank] [-K top-k] [-8] [-i iterations]
 *       [-W warm-up iterations] [-g groups] [-w items per group] [-b] [-s]
 *   -W         iterations run first and not timed (0 by default); the
 *              last iteration's bytes are checked, as without -W
 *   -b         forked ranks each on one CPU, as MPI launchers bind ranks
 *              (world_bind in world.h)
 *   -s         one screen instead of one line: the run's shape, the bytes
 *              each rank sends, microseconds and GB/s per phase, and the
 *              result of the check (what `cargo xtask demo` shows)
 *   moe -a     every combination the README lists: 2, 4 and 8 ranks; shm,
 *              ofi over tcp and ofi over libfabric's shm; BF16 and FP8.
 *
 * Started once per rank by a launcher (on several nodes, say) with
 * FI_XPU_BOOTSTRAP_RANK, _SIZE and _ADDR set, a process runs its rank
 * only (see world.h); -p shm,ofi lets ranks on one node use shm.
 *
 * Every run checks every byte dispatched and combined on every rank and
 * prints one line: "moe n=.. prov=.. ...: ok, <us> us per dispatch+combine".
 */
/* world.h binds ranks to CPUs with the GNU affinity calls (sched.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "moe.h"

#include <getopt.h>

struct opts {
	int n, fp8, iters, warmup, bind, summary;
	const char *prov, *fabric;
	uint32_t T, H, E, K, groups, items;
};

typedef void (*moe_phase)(const struct moe_args *, uint32_t, uint32_t);

struct kernel {
	moe_phase phase;
	const struct moe_args *a;
};

/* The phases as functions of their own, so that profilers (the callgrind
 * figure of `cargo xtask bench`) can name them. */
#define MOE_PHASE(name)                                                                       \
	__attribute__((noinline)) void moe_phase_##name(const struct moe_args *a, uint32_t i,    \
							uint32_t n);                             \
	__attribute__((noinline)) void moe_phase_##name(const struct moe_args *a, uint32_t i,    \
							uint32_t n)                              \
	{                                                                                     \
		moe_##name(a, i, n);                                                          \
	}
MOE_PHASE(dispatch_send)
MOE_PHASE(dispatch_signal)
MOE_PHASE(expert_combine)
MOE_PHASE(combine_signal)
MOE_PHASE(combine_reduce)

static void run_phase(void *arg)
{
	const struct kernel *k = (const struct kernel *)arg;
	const struct fi_xpu_host_item *it = fi_xpu_host_item();
	k->phase(k->a, it->group_id * it->group_size + it->local_id,
		 it->num_groups * it->group_size);
}

static void launch(const struct opts *o, moe_phase phase, const struct moe_args *a)
{
	struct fi_xpu_host_launch_attr la;
	struct kernel k;
	memset(&la, 0, sizeof(la));
	la.num_groups = o->groups;
	la.group_size = o->items;
	k.phase = phase;
	k.a = a;
	WCHECK(fi_xpu_host_launch(&la, run_phase, &k));
	if (a->l->err) {
		fprintf(stderr, "[%u] kernel failed at moe.h:%d: %s\n", a->w->rank, a->l->err_line,
			fi_xpu_strerror(a->l->err));
		exit(1);
	}
}

#define MOE_PHASES 5
/* The kernels in the order they run. */
static const moe_phase phases[MOE_PHASES] = {
	moe_phase_dispatch_send, moe_phase_dispatch_signal, moe_phase_expert_combine,
	moe_phase_combine_signal, moe_phase_combine_reduce,
};
static const char *const phase_names[MOE_PHASES] = {
	"dispatch_send", "dispatch_signal", "expert_combine", "combine_signal", "combine_reduce",
};

/* The -s screen, on rank 0: `us` holds the slowest rank's mean per phase
 * (per kernel, as in phases[]). */
static void print_summary(const struct world *w, const struct opts *o,
			  const struct moe_layout *l, const double *us, long bad)
{
	/* Payload per rank: every token goes to K experts on other ranks,
	 * and every expert result comes back. */
	double sent = (double)o->T * o->K * l->tok_bytes;
	double back = (double)o->T * o->K * l->out_bytes;
	double dispatch = us[0] + us[1], combine = us[2] + us[3] + us[4];
	int i;
	printf("fi_xpu MoE dispatch and combine: %d processes, provider %s%s%s, "
	       "device code on CPU threads\n\n",
	       w->n, w->prov, w->fabric ? "/" : "", w->fabric ? w->fabric : "");
	printf("  ranks            %d, each with %u experts (%u in all)\n", w->n, o->E,
	       o->E * (uint32_t)w->n);
	printf("  tokens           %u per rank, %u %s elements each, routed to %u experts "
	       "on other ranks\n",
	       o->T, o->H, o->fp8 ? "FP8" : "BF16", o->K);
	printf("  dispatch bytes   %.0f per rank (%u tokens x %u bytes)\n", sent, o->T * o->K,
	       l->tok_bytes);
	printf("  combine bytes    %.0f per rank (%u results x %u bytes)\n", back, o->T * o->K,
	       l->out_bytes);
	printf("  kernels          %u work groups of %u work items per rank\n", o->groups,
	       o->items);
	printf("  iterations       %d timed after %d untimed; slowest rank's mean\n\n",
	       o->iters, o->warmup);
	printf("  %-26s %10s %12s\n", "phase", "us", "GB/s/rank");
	for (i = 0; i < MOE_PHASES; i++)
		printf("  %-26s %10.1f\n", phase_names[i], us[i]);
	printf("  %-26s %10.1f %12.2f\n", "dispatch (send+signal)", dispatch,
	       sent / (dispatch * 1e3));
	printf("  %-26s %10.1f %12.2f\n", "combine (expert..reduce)", combine,
	       back / (combine * 1e3));
	printf("  %-26s %10.1f %12.2f\n\n", "dispatch+combine", dispatch + combine,
	       (sent + back) / ((dispatch + combine) * 1e3));
	if (bad)
		printf("  verified: FAILED, %ld mismatches (the first is on stderr)\n", bad);
	else
		printf("  verified: every byte of the %d x %u dispatched tokens and %d x %u "
		       "combined results, on every rank: ok\n",
		       w->n, o->T * o->K, w->n, o->T);
}

/* One rank's life; returns 0 when everything it holds checked out. */
static int rank_main(struct world *w, const struct opts *o)
{
	struct moe_layout plan;
	struct moe_args a;
	double t0, best = 1e30, sum = 0, phase_sum[MOE_PHASES] = { 0 };
	long bad;
	int it, p;

	moe_plan(&plan, (uint32_t)w->n, o->T, o->H, o->E, o->K, o->fp8);
	world_open(w, plan.size, NULL);
	memcpy(w->sym + WORLD_HDR, &plan, sizeof(plan));
	a.w = w->dev;
	a.sym = w->sym;
	a.l = (struct moe_layout *)(void *)(w->sym + WORLD_HDR);
	moe_fill(a.l, w->sym, (uint32_t)w->n, (uint32_t)w->rank);
	for (it = -o->warmup; it < o->iters; it++) {
		double dt;
		moe_reset(a.l, w->sym, (uint32_t)w->n);
		world_barrier(w);
		t0 = world_now();
		/* Each phase's time is that of its own launch. */
		for (p = 0; p < MOE_PHASES; p++) {
			double tp = world_now();
			launch(o, phases[p], &a);
			if (it >= 0)
				phase_sum[p] += world_now() - tp;
		}
		if (it < 0)
			continue;
		dt = world_now() - t0;
		sum += dt;
		best = dt < best ? dt : best;
	}
	bad = moe_verify(a.l, w->sym, (uint32_t)w->n, (uint32_t)w->rank);
	{
		/* Rank 0 reports the slowest rank's mean. */
		double mean = sum / o->iters, all[WORLD_MAXP];
		double us[MOE_PHASES], all_us[WORLD_MAXP][MOE_PHASES];
		long bads[WORLD_MAXP];
		int r;
		for (p = 0; p < MOE_PHASES; p++)
			us[p] = phase_sum[p] / o->iters * 1e6;
		world_allgather(w, &mean, all, sizeof(mean));
		world_allgather(w, &bad, bads, sizeof(bad));
		world_allgather(w, us, all_us, sizeof(us));
		for (r = 0; r < w->n; r++) {
			mean = all[r] > mean ? all[r] : mean;
			bad += r != w->rank ? bads[r] : 0;
			for (p = 0; p < MOE_PHASES; p++)
				us[p] = all_us[r][p] > us[p] ? all_us[r][p] : us[p];
		}
		if (w->rank == 0 && o->summary)
			print_summary(w, o, a.l, us, bad);
		else if (w->rank == 0)
			printf("moe_us %.1f\n", mean * 1e6);
		if (w->rank == 0 && !o->summary)
			printf("moe n=%d prov=%s%s%s dtype=%s T=%u H=%u E=%u K=%u: %s, %.1f us per "
			       "dispatch+combine (best %.1f, %d iterations)\n",
			       w->n, w->prov, w->fabric ? "/" : "", w->fabric ? w->fabric : "",
			       o->fp8 ? "fp8" : "bf16", o->T, o->H, o->E, o->K,
			       bad ? "FAILED" : "ok", mean * 1e6, best * 1e6, o->iters);
	}
	world_close(w);
	return bad != 0;
}

static int run(const struct opts *o)
{
	struct world w;
	int rc;
	memset(&w, 0, sizeof(w));
	/* The pids line is for scripts that clean up after killed ranks. */
	w.name = o->summary ? NULL : "moe";
	w.prov = o->prov;
	w.fabric = o->fabric;
	w.bind = o->bind;
	world_spawn(&w, o->n);
	rc = rank_main(&w, o);
	if (w.rank != 0)
		exit(rc);
	return world_join(&w) || rc;
}

/* Each combination in a fresh process: libfabric is never initialised
 * in a process that forks the next world. */
static int run_all(struct opts base)
{
	static const int ns[] = { 2, 4, 8 };
	static const char *const provs[][2] = { { "shm", NULL }, { "ofi", "tcp" }, { "ofi", "shm" } };
	unsigned i, j, f;
	int failed = 0;
	for (i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
		for (j = 0; j < 3; j++)
			for (f = 0; f < 2; f++) {
				struct opts o = base;
				pid_t p;
				int st;
				o.n = ns[i];
				o.prov = provs[j][0];
				o.fabric = provs[j][1];
				o.fp8 = (int)f;
				fflush(stdout);
				p = fork();
				if (p == 0)
					exit(run(&o));
				if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) ||
				    WEXITSTATUS(st) != 0) {
					printf("moe n=%d prov=%s%s%s dtype=%s: FAILED\n", o.n, o.prov,
					       o.fabric ? "/" : "", o.fabric ? o.fabric : "",
					       o.fp8 ? "fp8" : "bf16");
					failed = 1;
				}
			}
	return failed;
}

int main(int argc, char **argv)
{
	struct opts o;
	int c, all = 0;
	memset(&o, 0, sizeof(o));
	o.n = 2, o.prov = "shm", o.iters = 3;
	o.T = 32, o.H = 7168, o.E = 4, o.K = 3, o.groups = 2, o.items = 2;
	while ((c = getopt(argc, argv, "an:p:f:T:H:E:K:8i:W:g:w:bs")) != -1) {
		switch (c) {
		case 'a': all = 1; break;
		case 'n': o.n = atoi(optarg); break;
		case 'p': o.prov = optarg; break;
		case 'f': o.fabric = optarg; break;
		case 'T': o.T = (uint32_t)atoi(optarg); break;
		case 'H': o.H = (uint32_t)atoi(optarg); break;
		case 'E': o.E = (uint32_t)atoi(optarg); break;
		case 'K': o.K = (uint32_t)atoi(optarg); break;
		case '8': o.fp8 = 1; break;
		case 'i': o.iters = atoi(optarg); break;
		case 'g': o.groups = (uint32_t)atoi(optarg); break;
		case 'w': o.items = (uint32_t)atoi(optarg); break;
		case 'W': o.warmup = atoi(optarg); break;
		case 'b': o.bind = 1; break;
		case 's': o.summary = 1; break;
		default:
			fprintf(stderr, "usage: %s [-a] [-n ranks] [-p shm|ofi] [-f fabric] [-T tokens] "
					"[-H hidden] [-E experts] [-K topk] [-8] [-i iters] [-W warmup] "
					"[-g groups] [-w items] [-b] [-s]\n", argv[0]);
			return 2;
		}
	}
	/* Every token needs K distinct experts on other ranks, one of them
	 * fixed for rank 0 and one excluded (see moe_route). */
	if (o.n < 2 || o.n > WORLD_MAXP || o.E < 2 || o.K < 1 || o.K > MOE_MAX_K || o.K + 2 > o.E * (uint32_t)(o.n - 1) + 1 ||
	    o.T < 1 || o.H < 1 || o.iters < 1 || o.warmup < 0 || o.groups < 1 || o.items < 1) {
		fprintf(stderr, "moe: bad shape (2 <= n <= %d, K <= E * (n - 1) - 1, K <= %d)\n", WORLD_MAXP,
			MOE_MAX_K);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	return all ? run_all(o) : run(&o);
}

/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Low-latency MoE dispatch and combine in the style of DeepEP, as device
 * code (the same functions run as CUDA kernels in moe.cu and on CPU
 * threads in moe.c).
 *
 * Every rank holds T tokens of H elements and E experts; each token is
 * routed to K experts on other ranks (the routing below gives every pair
 * of ranks a different count, a rank pair that gets every token and
 * experts that get none). Four phases, each a kernel over any number of
 * work items:
 *
 *   dispatch_send    writes every token into a slot reserved for its
 *                    source rank at the expert's rank (slot index from a
 *                    local atomic), with its origin (token, choice);
 *   dispatch_signal  after a flush (the data is delivered), writes each
 *                    expert's count + 1 into a signal word at the target;
 *   expert_combine   waits for each source's signal, runs the expert on
 *                    the tokens (dequantising FP8 with per-128 scales, or
 *                    reading BF16) and writes the BF16 result straight
 *                    back to the origin's combine slot (token, choice);
 *                    then, after a flush, signals each source how many
 *                    results it sent there;
 *   combine_reduce   waits for every expert rank's signal and sums the K
 *                    results of each token with its routing weights.
 *
 * The symmetric window (fi_xpu_world_alloc) has the same layout on every
 * rank (struct moe_layout, at WORLD_HDR); kernels reach a peer's part by
 * its rank and an offset (fi_xpu_world_put, fi_xpu_world_atomic), finish
 * with fi_xpu_world_quiet and wait with fi_xpu_signal_wait_until.
 */
#ifndef FI_XPU_EXAMPLE_MOE_H
#define FI_XPU_EXAMPLE_MOE_H

#include "world.h"

#define MOE_SCALE_BLOCK 128
#define MOE_MAX_K 16 /* top-k at most */

/* The number formats and the experts run on both sides: the host makes
 * and checks tokens with them, kernels compute with them. */
#if defined(__CUDACC__) || defined(__HIPCC__)
#define MOE_HD static inline __host__ __device__
#else
#define MOE_HD static inline
#endif
#define MOE_WAIT_MS 60000

/* Where each piece lives in the symmetric buffer, and the run's shape. */
struct moe_layout {
	uint32_t T, H, E, K, fp8;
	uint32_t tok_bytes; /* one dispatched token: H BF16, or H FP8 + scales */
	uint32_t out_bytes; /* one expert result: H BF16 */
	uint32_t pad;
	uint64_t x;      /* [T] tokens to dispatch */
	uint64_t route;  /* [T][K] u32 global expert id */
	uint64_t weight; /* [T][K] float */
	uint64_t origin; /* [T][K] u64 t*K+j, the source of the meta writes */
	uint64_t cnt;    /* [n][E] u64 slots taken at each target */
	uint64_t sigsrc; /* [n][E] u64 count + 1, the source of signal writes */
	uint64_t recv;   /* [n src][E][T] dispatched tokens */
	uint64_t meta;   /* [n src][E][T] u64 origin of each slot */
	uint64_t dsig;   /* [n src][E] u64 count + 1 */
	uint64_t out;    /* [n src][E][T] expert results (the combine sources) */
	uint64_t csrc;   /* [n] u64 results sent to each rank + 1 */
	uint64_t comb;   /* [T][K] results returned to this rank */
	uint64_t csig;   /* [n expert rank] u64 results received + 1 */
	uint64_t result; /* [T] combined BF16 tokens */
	uint64_t size;
	int32_t err, err_line; /* first failure a work item saw */
};

struct moe_args {
	const struct world_dev *w;
	unsigned char *sym;
	struct moe_layout *l;
};

/* ---- numbers --------------------------------------------------------- */
MOE_HD float moe_bf16_to_f(uint16_t b)
{
	union {
		uint32_t u;
		float f;
	} v;
	v.u = (uint32_t)b << 16;
	return v.f;
}

MOE_HD uint16_t moe_f_to_bf16(float f)
{
	union {
		uint32_t u;
		float f;
	} v;
	v.f = f;
	/* Round to nearest even (no NaNs arise here). */
	return (uint16_t)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16);
}

/* FP8 E4M3 (bias 7, no infinities, max 448). */
MOE_HD float moe_e4m3_to_f(uint8_t b)
{
	int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
	float v;
	if (e == 0)
		v = (float)m / 8.0f / 64.0f;
	else {
		v = 1.0f + (float)m / 8.0f;
		for (; e > 7; e--)
			v *= 2.0f;
		for (; e < 7; e++)
			v *= 0.5f;
	}
	return s ? -v : v;
}

MOE_HD uint8_t moe_f_to_e4m3(float f)
{
	uint8_t s = 0, best = 0;
	float a = f, bd = 1e30f;
	int i;
	if (a < 0) {
		s = 0x80;
		a = -a;
	}
	/* The nearest of the 127 finite magnitudes (slow and plain: the
	 * example quantises on the host only). */
	for (i = 0; i < 127; i++) {
		float d = moe_e4m3_to_f((uint8_t)i) - a;
		if (d < 0)
			d = -d;
		if (d < bd) {
			bd = d;
			best = (uint8_t)i;
		}
	}
	return (uint8_t)(s | best);
}

/* The experts: expert g scales and shifts each element. */
MOE_HD float moe_expert(uint32_t g, float x)
{
	return x * (1.0f + (float)(g % 7) * 0.125f) + (float)(g % 3) * 0.0625f;
}

/* Element h of a dispatched token, as float. */
MOE_HD float moe_tok_elem(const struct moe_layout *l, const unsigned char *tok, uint32_t h)
{
	if (l->fp8) {
		const float *scale = (const float *)(const void *)(tok + l->H);
		return moe_e4m3_to_f(tok[h]) * scale[h / MOE_SCALE_BLOCK];
	}
	return moe_bf16_to_f(((const uint16_t *)(const void *)tok)[h]);
}

/* The element loops below work in blocks of MOE_LANES elements with the
 * format test and the expert's constants outside them: loops with a fixed
 * trip count and no branch, which compilers turn into vector code at -O2
 * (one block per work item maps onto a GPU's lanes the same way). Each
 * element is computed exactly as moe_expert and the scalar sum compute it,
 * so the results are bit for bit those the host checks. */
#define MOE_LANES 32

/* y = expert g applied to every element of a dispatched token. */
MOE_HD void moe_expert_token(const struct moe_layout *l, uint32_t g, const unsigned char *tok,
			     uint16_t *y)
{
	const float a = 1.0f + (float)(g % 7) * 0.125f, b = (float)(g % 3) * 0.0625f;
	const uint16_t *x = (const uint16_t *)(const void *)tok;
	uint32_t h = 0, i;
	if (l->fp8) {
		for (; h < l->H; h++)
			y[h] = moe_f_to_bf16(moe_expert(g, moe_tok_elem(l, tok, h)));
		return;
	}
	for (; h + MOE_LANES <= l->H; h += MOE_LANES) {
		const uint16_t *xs = x + h;
		uint16_t *ys = y + h;
		float v[MOE_LANES];
		uint16_t out[MOE_LANES];
		for (i = 0; i < MOE_LANES; i++)
			v[i] = moe_bf16_to_f(xs[i]) * a + b;
		for (i = 0; i < MOE_LANES; i++)
			out[i] = moe_f_to_bf16(v[i]);
		for (i = 0; i < MOE_LANES; i++)
			ys[i] = out[i];
	}
	for (; h < l->H; h++)
		y[h] = moe_f_to_bf16(moe_bf16_to_f(x[h]) * a + b);
}

/* r = the sum over j < k of w[j] * y[j], element by element, in BF16. */
MOE_HD void moe_weighted_sum(uint32_t H, uint32_t k, const float *w, const uint16_t *const *y,
			     uint16_t *r)
{
	uint32_t h = 0, i, j;
	for (; h + MOE_LANES <= H; h += MOE_LANES) {
		uint16_t *rs = r + h;
		float acc[MOE_LANES];
		uint16_t out[MOE_LANES];
		for (i = 0; i < MOE_LANES; i++)
			acc[i] = 0.0f;
		for (j = 0; j < k; j++) {
			const uint16_t *yj = y[j] + h;
			const float wj = w[j];
			for (i = 0; i < MOE_LANES; i++)
				acc[i] += wj * moe_bf16_to_f(yj[i]);
		}
		for (i = 0; i < MOE_LANES; i++)
			out[i] = moe_f_to_bf16(acc[i]);
		for (i = 0; i < MOE_LANES; i++)
			rs[i] = out[i];
	}
	for (; h < H; h++) {
		float acc = 0.0f;
		for (j = 0; j < k; j++)
			acc += w[j] * moe_bf16_to_f(y[j][h]);
		r[h] = moe_f_to_bf16(acc);
	}
}

/* ---- device helpers ---------------------------------------------------- */
FI_XPU_FUNC void moe_fail(struct moe_layout *l, int rc, int line)
{
	uint32_t zero = 0;
	if (fi_xpu_arch_cas_u32((uint32_t *)(void *)&l->err, zero, (uint32_t)rc, FI_XPU_ARCH_ACQ_REL,
				FI_XPU_ARCH_MS_SYSTEM) == zero)
		l->err_line = line;
}

#define MOE_TRY(l, expr)                                  \
	do {                                              \
		int rc_;                                  \
		while ((rc_ = (int)(expr)) == -FI_EAGAIN) \
			fi_xpu_arch_pause();              \
		if (rc_) {                                \
			moe_fail(l, rc_, __LINE__);       \
			return;                           \
		}                                         \
	} while (0)

/* Waits until the local signal word is not 0 (fi_xpu_signal_wait_until,
 * which the host's abort word also ends); returns its value, 0 on failure
 * (recorded). */
FI_XPU_FUNC uint64_t moe_wait_signal(const struct world_dev *w, struct moe_layout *l,
				     const uint64_t *word)
{
	int rc = fi_xpu_signal_wait_until(world_self_ep(w), word, FI_XPU_CMP_NE, 0, MOE_WAIT_MS,
					  FI_XPU_WORK_ITEM);
	if (rc) {
		moe_fail(l, rc, __LINE__);
		return 0;
	}
	return fi_xpu_arch_load_u64(word, FI_XPU_ARCH_ACQUIRE, FI_XPU_ARCH_MS_SYSTEM);
}

#define MOE_AT(a, off) ((a)->sym + (off))
#define MOE_U64(a, off) ((uint64_t *)(void *)MOE_AT(a, off))

/* ---- the four phases ------------------------------------------------------ */
FI_XPU_FUNC void moe_dispatch_send(const struct moe_args *a, uint32_t item, uint32_t nitems)
{
	struct moe_layout *l = a->l;
	const struct world_dev *w = a->w;
	const uint32_t *route = (const uint32_t *)(const void *)MOE_AT(a, l->route);
	uint32_t t, j;
	for (t = item; t < l->T; t += nitems) {
		for (j = 0; j < l->K; j++) {
			uint32_t g = route[t * l->K + j], d = g / l->E, e = g % l->E;
			uint64_t slot = fi_xpu_arch_fetch_add_u64(MOE_U64(a, l->cnt) + d * l->E + e, 1,
								  FI_XPU_ARCH_RELAXED,
								  FI_XPU_ARCH_MS_DEVICE);
			uint64_t idx = ((uint64_t)w->rank * l->E + e) * l->T + slot;
			MOE_TRY(l, fi_xpu_world_put(w->win, (int)d, l->recv + idx * l->tok_bytes,
						    MOE_AT(a, l->x + (uint64_t)t * l->tok_bytes),
						    l->tok_bytes, FI_DELIVERY_COMPLETE,
						    FI_XPU_WORK_ITEM));
			MOE_TRY(l, fi_xpu_world_put(w->win, (int)d, l->meta + idx * 8,
						    MOE_U64(a, l->origin) + t * l->K + j, 8,
						    FI_DELIVERY_COMPLETE, FI_XPU_WORK_ITEM));
		}
	}
}

/* Sends the count signals of the targets this item owns, after every
 * earlier write of the endpoint is delivered. */
FI_XPU_FUNC void moe_dispatch_signal(const struct moe_args *a, uint32_t item, uint32_t nitems)
{
	struct moe_layout *l = a->l;
	const struct world_dev *w = a->w;
	uint32_t d, e;
	MOE_TRY(l, fi_xpu_world_quiet(w->world, 60000, FI_XPU_WORK_ITEM));
	for (d = item; d < w->n; d += nitems) {
		if (d == w->rank)
			continue;
		for (e = 0; e < l->E; e++) {
			uint64_t *src = MOE_U64(a, l->sigsrc) + d * l->E + e;
			*src = MOE_U64(a, l->cnt)[d * l->E + e] + 1;
			MOE_TRY(l, fi_xpu_world_atomic(w->win, (int)d,
						       l->dsig + ((uint64_t)w->rank * l->E + e) * 8,
						       src, 1, FI_UINT64, FI_ATOMIC_WRITE,
						       FI_DELIVERY_COMPLETE, FI_XPU_WORK_ITEM));
		}
	}
}

/* Runs the experts on what each source sent, returns every result to its
 * origin; pairs (source, expert) are spread over the work items. */
FI_XPU_FUNC void moe_expert_combine(const struct moe_args *a, uint32_t item, uint32_t nitems)
{
	struct moe_layout *l = a->l;
	const struct world_dev *w = a->w;
	uint32_t pair, p;
	for (pair = item; pair < w->n * l->E; pair += nitems) {
		uint32_t s = pair / l->E, e = pair % l->E, g = w->rank * l->E + e;
		uint64_t count;
		if (s == w->rank)
			continue;
		count = moe_wait_signal(w, l, MOE_U64(a, l->dsig) + pair);
		if (!count)
			return;
		count--;
		if (count > l->T) {
			moe_fail(l, -FI_EIO, __LINE__);
			return;
		}
		for (p = 0; p < count; p++) {
			uint64_t idx = (uint64_t)pair * l->T + p;
			const unsigned char *tok = MOE_AT(a, l->recv + idx * l->tok_bytes);
			uint16_t *y = (uint16_t *)(void *)MOE_AT(a, l->out + idx * l->out_bytes);
			uint64_t origin = fi_xpu_arch_load_u64(MOE_U64(a, l->meta) + idx,
							       FI_XPU_ARCH_RELAXED,
							       FI_XPU_ARCH_MS_SYSTEM);
			if (origin >= (uint64_t)l->T * l->K) {
				moe_fail(l, -FI_EIO, __LINE__);
				return;
			}
			moe_expert_token(l, g, tok, y);
			MOE_TRY(l, fi_xpu_world_put(w->win, (int)s, l->comb + origin * l->out_bytes,
						    y, l->out_bytes, FI_DELIVERY_COMPLETE,
						    FI_XPU_WORK_ITEM));
		}
	}
}

/* The combine signals: how many results went to each source rank. Reads
 * the dispatch signals, which expert_combine waited for. */
FI_XPU_FUNC void moe_combine_signal(const struct moe_args *a, uint32_t item, uint32_t nitems)
{
	struct moe_layout *l = a->l;
	const struct world_dev *w = a->w;
	uint32_t s, e;
	MOE_TRY(l, fi_xpu_world_quiet(w->world, 60000, FI_XPU_WORK_ITEM));
	for (s = item; s < w->n; s += nitems) {
		uint64_t *src = MOE_U64(a, l->csrc) + s, sent = 0;
		if (s == w->rank)
			continue;
		for (e = 0; e < l->E; e++)
			sent += MOE_U64(a, l->dsig)[s * l->E + e] - 1;
		*src = sent + 1;
		MOE_TRY(l, fi_xpu_world_atomic(w->win, (int)s, l->csig + (uint64_t)w->rank * 8, src,
					       1, FI_UINT64, FI_ATOMIC_WRITE, FI_DELIVERY_COMPLETE,
					       FI_XPU_WORK_ITEM));
	}
}

/* Waits for every expert rank, then sums each token's K results. */
FI_XPU_FUNC void moe_combine_reduce(const struct moe_args *a, uint32_t item, uint32_t nitems)
{
	struct moe_layout *l = a->l;
	const struct world_dev *w = a->w;
	const uint32_t *route = (const uint32_t *)(const void *)MOE_AT(a, l->route);
	const float *wt = (const float *)(const void *)MOE_AT(a, l->weight);
	uint32_t d, t, j;
	for (d = 0; d < w->n; d++) {
		uint64_t want = 1, got;
		if (d == w->rank)
			continue;
		for (t = 0; t < l->T; t++)
			for (j = 0; j < l->K; j++)
				want += route[t * l->K + j] / l->E == d;
		got = moe_wait_signal(w, l, MOE_U64(a, l->csig) + d);
		if (!got)
			return;
		if (got != want) {
			moe_fail(l, -FI_EIO, __LINE__);
			return;
		}
	}
	for (t = item; t < l->T; t += nitems) {
		uint16_t *r = (uint16_t *)(void *)MOE_AT(a, l->result + (uint64_t)t * l->out_bytes);
		const uint16_t *y[MOE_MAX_K];
		if (l->K > MOE_MAX_K) {
			moe_fail(l, -FI_EINVAL, __LINE__);
			return;
		}
		for (j = 0; j < l->K; j++)
			y[j] = (const uint16_t *)(const void *)MOE_AT(
				a, l->comb + ((uint64_t)t * l->K + j) * l->out_bytes);
		moe_weighted_sum(l->H, l->K, wt + t * l->K, y, r);
	}
}

/* The receive side back to 0 for the next round, on the device (what
 * moe_reset does from the host where the host may write the window):
 * this rank's count and signal words and its result tokens. */
FI_XPU_FUNC void moe_reset_words(const struct moe_args *a, uint32_t item, uint32_t nitems)
{
	const struct moe_layout *l = a->l;
	uint64_t n = a->w->n, i;
	for (i = item; i < n * l->E; i += nitems) {
		MOE_U64(a, l->cnt)[i] = 0;
		MOE_U64(a, l->dsig)[i] = 0;
	}
	for (i = item; i < n; i += nitems)
		MOE_U64(a, l->csig)[i] = 0;
	for (i = item; i < (uint64_t)l->T * l->out_bytes / 8; i += nitems)
		MOE_U64(a, l->result)[i] = 0;
	fi_xpu_arch_fence(FI_XPU_ARCH_SEQ_CST, FI_XPU_ARCH_MS_SYSTEM);
}

/* ---- host side: layout, inputs, routing, verification ------------------- */
static inline uint64_t moe_align(uint64_t v)
{
	return (v + 63) & ~(uint64_t)63;
}

static inline void moe_plan(struct moe_layout *l, uint32_t n, uint32_t T, uint32_t H, uint32_t E,
		     uint32_t K, int fp8)
{
	uint64_t o = moe_align(WORLD_HDR + sizeof(*l));
	memset(l, 0, sizeof(*l));
	l->T = T, l->H = H, l->E = E, l->K = K, l->fp8 = (uint32_t)fp8;
	l->tok_bytes = fp8 ? H + (H + MOE_SCALE_BLOCK - 1) / MOE_SCALE_BLOCK * 4 : 2 * H;
	l->tok_bytes = (uint32_t)moe_align(l->tok_bytes);
	l->out_bytes = (uint32_t)moe_align(2 * (uint64_t)H);
#define MOE_PUT(f, bytes) (l->f = o, o = moe_align(o + (bytes)))
	MOE_PUT(x, (uint64_t)T * l->tok_bytes);
	MOE_PUT(route, (uint64_t)T * K * 4);
	MOE_PUT(weight, (uint64_t)T * K * 4);
	MOE_PUT(origin, (uint64_t)T * K * 8);
	MOE_PUT(cnt, (uint64_t)n * E * 8);
	MOE_PUT(sigsrc, (uint64_t)n * E * 8);
	MOE_PUT(recv, (uint64_t)n * E * T * l->tok_bytes);
	MOE_PUT(meta, (uint64_t)n * E * T * 8);
	MOE_PUT(dsig, (uint64_t)n * E * 8);
	MOE_PUT(out, (uint64_t)n * E * T * l->out_bytes);
	MOE_PUT(csrc, (uint64_t)n * 8);
	MOE_PUT(comb, (uint64_t)T * K * l->out_bytes);
	MOE_PUT(csig, (uint64_t)n * 8);
	MOE_PUT(result, (uint64_t)T * l->out_bytes);
#undef MOE_PUT
	l->size = o;
}

static inline uint64_t moe_mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	return x ^ (x >> 33);
}

/* The routing of token t of rank r: K distinct experts on other ranks.
 * Rank 0 sends every token to expert 0 of rank 1 (that pair is full) and
 * none to the last expert of rank 1 (that expert gets nothing from it);
 * the rest is pseudo-random, so counts differ pair by pair. */
static inline void moe_route(uint32_t n, uint32_t E, uint32_t K, uint32_t r, uint32_t t, uint32_t *out)
{
	uint32_t j = 0, tries = 0, i, total = n * E;
	if (r == 0)
		out[j++] = 1 * E + 0;
	while (j < K) {
		uint32_t g = (uint32_t)(moe_mix(((uint64_t)r << 40) ^ ((uint64_t)t << 8) ^ tries++) %
					total);
		int dup = 0;
		/* (The empty expert only where the others leave room for K.) */
		if (g / E == r || (r == 0 && g == 1 * E + E - 1 && (n - 1) * E > K))
			continue;
		for (i = 0; i < j; i++)
			dup |= out[i] == g;
		if (!dup)
			out[j++] = g;
	}
}

static inline float moe_weight(uint32_t r, uint32_t t, uint32_t j)
{
	return 0.25f + (float)(moe_mix(((uint64_t)r << 32) ^ ((uint64_t)t << 4) ^ j) % 64) / 128.0f;
}

/* Element h of token t of rank r, before quantisation. */
static inline float moe_value(uint32_t r, uint32_t t, uint32_t h)
{
	return (float)((int)(moe_mix(((uint64_t)r << 48) ^ ((uint64_t)t << 20) ^ h) % 2001) - 1000) /
	       256.0f;
}

/* Token t of rank r as dispatched (BF16, or FP8 with per-128 scales). */
static inline void moe_make_token(const struct moe_layout *l, uint32_t r, uint32_t t, unsigned char *tok)
{
	uint32_t h, b;
	memset(tok, 0, l->tok_bytes);
	if (!l->fp8) {
		for (h = 0; h < l->H; h++)
			((uint16_t *)(void *)tok)[h] = moe_f_to_bf16(moe_value(r, t, h));
		return;
	}
	for (b = 0; b * MOE_SCALE_BLOCK < l->H; b++) {
		float amax = 0.0f, scale;
		for (h = b * MOE_SCALE_BLOCK; h < l->H && h < (b + 1) * MOE_SCALE_BLOCK; h++) {
			float v = moe_value(r, t, h);
			amax = v < 0 ? (-v > amax ? -v : amax) : (v > amax ? v : amax);
		}
		scale = amax > 0 ? amax / 448.0f : 1.0f;
		((float *)(void *)(tok + l->H))[b] = scale;
		for (h = b * MOE_SCALE_BLOCK; h < l->H && h < (b + 1) * MOE_SCALE_BLOCK; h++)
			tok[h] = moe_f_to_e4m3(moe_value(r, t, h) / scale);
	}
}

/* Inputs of this rank; signal and count words back to 0. */
static inline void moe_fill(const struct moe_layout *l, unsigned char *sym, uint32_t n, uint32_t r)
{
	uint32_t t, j;
	uint32_t *route = (uint32_t *)(void *)(sym + l->route);
	float *wt = (float *)(void *)(sym + l->weight);
	uint64_t *origin = (uint64_t *)(void *)(sym + l->origin);
	for (t = 0; t < l->T; t++) {
		moe_make_token(l, r, t, sym + l->x + (uint64_t)t * l->tok_bytes);
		moe_route(n, l->E, l->K, r, t, route + t * l->K);
		for (j = 0; j < l->K; j++) {
			wt[t * l->K + j] = moe_weight(r, t, j);
			origin[t * l->K + j] = (uint64_t)t * l->K + j;
		}
	}
}

static inline void moe_reset(const struct moe_layout *l, unsigned char *sym, uint32_t n)
{
	memset(sym + l->cnt, 0, (size_t)n * l->E * 8);
	memset(sym + l->dsig, 0, (size_t)n * l->E * 8);
	memset(sym + l->csig, 0, (size_t)n * 8);
	memset(sym + l->result, 0, (size_t)l->T * l->out_bytes);
}

/* Checks every byte this rank received and computed; returns the number
 * of mismatches (and prints the first). */
static inline long moe_verify(const struct moe_layout *l, const unsigned char *sym, uint32_t n,
		       uint32_t r)
{
	long bad = 0;
	uint32_t s, e, t, j, h, p;
	uint32_t *route = (uint32_t *)malloc((size_t)l->K * 4);
	unsigned char *tok = (unsigned char *)malloc(l->tok_bytes);
	unsigned char *seen = (unsigned char *)malloc((size_t)l->T * l->K);
	uint16_t *want = (uint16_t *)malloc(l->out_bytes);
	/* Dispatch: each slot holds the token its origin says, each count
	 * is what the source's routing gives, each origin appears once. */
	for (s = 0; s < n; s++) {
		if (s == r)
			continue;
		for (e = 0; e < l->E; e++) {
			uint64_t count = 0;
			uint64_t sig = ((const uint64_t *)(const void *)(sym + l->dsig))[s * l->E + e];
			memset(seen, 0, (size_t)l->T * l->K);
			for (t = 0; t < l->T; t++) {
				moe_route(n, l->E, l->K, s, t, route);
				for (j = 0; j < l->K; j++)
					count += route[j] == r * l->E + e;
			}
			if (sig != count + 1) {
				if (!bad++)
					fprintf(stderr, "[%u] count from %u to expert %u: %" PRIu64
						" + 1, want %" PRIu64 " + 1\n", r, s, e, sig - 1, count);
				continue;
			}
			for (p = 0; p < count; p++) {
				uint64_t idx = ((uint64_t)s * l->E + e) * l->T + p;
				uint64_t o = ((const uint64_t *)(const void *)(sym + l->meta))[idx];
				if (o >= (uint64_t)l->T * l->K || seen[o]) {
					if (!bad++)
						fprintf(stderr, "[%u] slot %u from %u: bad origin %" PRIu64 "\n",
							r, p, s, o);
					continue;
				}
				seen[o] = 1;
				moe_route(n, l->E, l->K, s, (uint32_t)(o / l->K), route);
				moe_make_token(l, s, (uint32_t)(o / l->K), tok);
				if (route[o % l->K] != r * l->E + e ||
				    memcmp(tok, sym + l->recv + idx * l->tok_bytes, l->tok_bytes) != 0) {
					if (!bad++)
						fprintf(stderr, "[%u] token %" PRIu64 " from %u differs\n", r,
							o / l->K, s);
				}
			}
		}
	}
	/* Combine: every byte each expert returned, and every byte of every
	 * combined token. */
	for (t = 0; t < l->T; t++) {
		moe_make_token(l, r, t, tok);
		moe_route(n, l->E, l->K, r, t, route);
		for (j = 0; j < l->K; j++) {
			const uint16_t *y = (const uint16_t *)(const void *)(sym + l->comb +
				((uint64_t)t * l->K + j) * l->out_bytes);
			for (h = 0; h < l->H; h++)
				if (y[h] != moe_f_to_bf16(moe_expert(route[j], moe_tok_elem(l, tok, h)))) {
					if (!bad++)
						fprintf(stderr, "[%u] result %u of token %u differs at %u\n",
							r, j, t, h);
					break;
				}
		}
		for (h = 0; h < l->H; h++) {
			float acc = 0.0f;
			for (j = 0; j < l->K; j++)
				acc += moe_weight(r, t, j) *
				       moe_bf16_to_f(moe_f_to_bf16(moe_expert(route[j], moe_tok_elem(l, tok, h))));
			want[h] = moe_f_to_bf16(acc);
		}
		if (memcmp(want, sym + l->result + (uint64_t)t * l->out_bytes, 2 * (size_t)l->H) != 0) {
			if (!bad++)
				fprintf(stderr, "[%u] combined token %u differs\n", r, t);
		}
	}
	free(route);
	free(tok);
	free(seen);
	free(want);
	return bad;
}

#endif

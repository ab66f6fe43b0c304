/* The GPU form of the cooperative copy (fi_xpu_i_coop_copy_lanes), run on
 * the CPU lane by lane: every source and destination alignment modulo 16,
 * lengths around every unit boundary, 1 to 64 lanes, lanes taken in reverse
 * order. Every byte of the destination must be the source's, not one byte
 * around it may change, and each byte is written by exactly one lane.
 * Usage: coop_copy_lanes. Prints "copy lanes ok: N cases". */
#include <fi_xpu/device_coop.h>

#include <stdio.h>
#include <string.h>

#define MAX_LEN 600
#define GUARD 48
#define BUF (GUARD + 16 + MAX_LEN + GUARD)

static const size_t lanes[] = {1, 2, 3, 7, 32, 64};
static const size_t part_lens[] = {0, 1, 7, 15, 16, 17, 31, 33, 100, 255, 600};

int main(void)
{
	static _Alignas(64) unsigned char src[BUF], dst[BUF], ref[BUF];
	static unsigned writes[BUF];
	unsigned long cases = 0, failures = 0;
	size_t so, dof, len, li, i;

	for (i = 0; i < BUF; i++)
		src[i] = (unsigned char)((i * 131u + 7u) | 1u);
	for (so = 0; so < 16; so++)
		for (dof = 0; dof < 16; dof++)
			for (len = 0; len <= MAX_LEN; len += len < 80 ? 1 : 37)
				for (li = 0; li < sizeof lanes / sizeof lanes[0]; li++) {
					size_t n = lanes[li], r;
					unsigned char *d = dst + GUARD + dof;
					const unsigned char *s = src + GUARD + so;

					memset(dst, 0xa5, sizeof dst);
					memcpy(ref, dst, sizeof ref);
					memcpy(ref + GUARD + dof, s, len);
					for (r = n; r-- > 0;)
						fi_xpu_i_coop_copy_lanes(d, s, len, r, n);
					cases++;
					if (memcmp(dst, ref, sizeof dst) != 0) {
						if (failures++ < 10)
							fprintf(stderr,
								"src+%zu dst+%zu len %zu lanes %zu: wrong bytes\n",
								so, dof, len, n);
					}
				}
	/* Each lane's share alone, into a cleared buffer (no source byte is
	 * 0): every destination byte is written by exactly one lane, and
	 * nothing outside the destination by any. */
	for (so = 0; so < 16; so++)
		for (dof = 0; dof < 16; dof += 5)
			for (li = 0; li < sizeof part_lens / sizeof part_lens[0]; li++) {
				size_t n, r, k;
				len = part_lens[li];
				for (n = 3; n <= 32; n += 29) {
					unsigned char *d = dst + GUARD + dof;
					const unsigned char *s = src + GUARD + so;
					int bad = 0;
					memset(writes, 0, sizeof writes);
					for (r = 0; r < n; r++) {
						memset(dst, 0, sizeof dst);
						fi_xpu_i_coop_copy_lanes(d, s, len, r, n);
						for (k = 0; k < BUF; k++)
							writes[k] += dst[k] != 0;
					}
					for (k = 0; k < BUF; k++) {
						int inside = k >= GUARD + dof && k < GUARD + dof + len;
						bad |= writes[k] != (inside ? 1 : 0);
					}
					cases++;
					if (bad && failures++ < 10)
						fprintf(stderr,
							"src+%zu dst+%zu len %zu lanes %zu: shares overlap or miss\n",
							so, dof, len, n);
				}
			}
	if (failures) {
		fprintf(stderr, "%lu of %lu cases failed\n", failures, cases);
		return 1;
	}
	printf("copy lanes ok: %lu cases\n", cases);
	return 0;
}

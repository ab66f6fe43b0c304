/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The MPI bootstrap of fi_xpu worlds, a module loaded on demand
 * (fi_xpu_world_attr.bootstrap = "mpi", or FI_XPU_BOOTSTRAP=mpi) so that
 * libfi_xpu.so never links MPI. Built with the MPI compiler wrapper into
 * libfi_xpu_bootstrap_mpi.so beside the provider plugins; exports one
 * symbol, fi_xpu_bootstrap_mpi_init, which fills in a
 * struct fi_xpu_bootstrap_ops (fi_xpu_world(3)).
 *
 * Rank and size are MPI_COMM_WORLD's; the world talks on a duplicate of
 * it, so its messages never meet the application's. MPI is initialised
 * here when the application has not done it, and then finalised when the
 * world closes; otherwise the application keeps it.
 */
#include <fi_xpu.h>

#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>

struct boot_mpi {
	MPI_Comm comm;
	int nranks;
	int we_initialised;
};

static int mpi_error(int rc)
{
	return rc == MPI_SUCCESS ? 0 : -FI_EIO;
}

static int boot_allgather(void *context, const void *mine, void *all, size_t len)
{
	struct boot_mpi *b = (struct boot_mpi *)context;
	uint64_t l = (uint64_t)len, *lens;
	int i, rc;

	if (len > (size_t)INT32_MAX)
		return -FI_EMSGSIZE;
	/* Every rank must pass the same length: checked first, so that a
	 * mismatch is an error on every rank, not undefined behaviour. */
	lens = (uint64_t *)malloc(sizeof(*lens) * (size_t)b->nranks);
	if (!lens)
		return -FI_ENOMEM;
	rc = MPI_Allgather(&l, 1, MPI_UINT64_T, lens, 1, MPI_UINT64_T, b->comm);
	if (rc != MPI_SUCCESS) {
		free(lens);
		return -FI_EIO;
	}
	for (i = 0; i < b->nranks; i++)
		if (lens[i] != l) {
			free(lens);
			return -FI_EINVAL;
		}
	free(lens);
	if (len == 0)
		return 0;
	return mpi_error(MPI_Allgather(mine, (int)len, MPI_BYTE, all, (int)len, MPI_BYTE, b->comm));
}

static void boot_finalize(void *context)
{
	struct boot_mpi *b = (struct boot_mpi *)context;
	int finalized = 0;
	MPI_Finalized(&finalized);
	if (!finalized) {
		MPI_Comm_free(&b->comm);
		if (b->we_initialised)
			MPI_Finalize();
	}
	free(b);
}

int fi_xpu_bootstrap_mpi_init(struct fi_xpu_bootstrap_ops *ops);

__attribute__((visibility("default"))) int fi_xpu_bootstrap_mpi_init(struct fi_xpu_bootstrap_ops *ops)
{
	struct boot_mpi *b;
	int inited = 0, rank = 0;

	if (!ops || ops->size < sizeof(*ops))
		return -FI_EINVAL;
	b = (struct boot_mpi *)calloc(1, sizeof(*b));
	if (!b)
		return -FI_ENOMEM;
	MPI_Initialized(&inited);
	if (!inited) {
		if (MPI_Init(NULL, NULL) != MPI_SUCCESS) {
			free(b);
			return -FI_EIO;
		}
		b->we_initialised = 1;
	}
	if (MPI_Comm_dup(MPI_COMM_WORLD, &b->comm) != MPI_SUCCESS ||
	    MPI_Comm_rank(b->comm, &rank) != MPI_SUCCESS ||
	    MPI_Comm_size(b->comm, &b->nranks) != MPI_SUCCESS) {
		free(b);
		return -FI_EIO;
	}
	ops->rank = rank;
	ops->nranks = b->nranks;
	ops->context = b;
	ops->allgather = boot_allgather;
	ops->finalize = boot_finalize;
	return 0;
}

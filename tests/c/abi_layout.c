/*
 * Prints the values and layouts of the libfabric types and constants that
 * fi_xpu.h uses, one "name value" per line. The test suite builds this
 * once against libfabric's own headers and once against fi_xpu's stand-ins
 * (FI_XPU_NO_LIBFABRIC_HEADERS) and requires identical output, equal to the
 * Rust mirror's values.
 */
#include <fi_xpu.h>
#include <stddef.h>
#include <stdio.h>

#define V(x) printf("%s %lld\n", #x, (long long)(x))
#define S(t) printf("sizeof(%s) %zu\n", #t, sizeof(t))
#define O(t, f) printf("offsetof(%s,%s) %zu\n", #t, #f, offsetof(t, f))

int main(void)
{
#ifdef FI_XPU_HAVE_LIBFABRIC_HEADERS
	fprintf(stderr, "mode: libfabric headers\n");
#else
	fprintf(stderr, "mode: fi_xpu stand-ins\n");
#endif
	S(struct fid);
	O(struct fid, fclass);
	O(struct fid, context);
	O(struct fid, ops);
	S(struct fi_ops);
	O(struct fi_ops, close);
	O(struct fi_ops, bind);
	O(struct fi_ops, ops_set);
	S(fi_addr_t);
	S(enum fi_hmem_iface);
	S(struct fi_cq_entry);
	S(struct fi_cq_msg_entry);
	O(struct fi_cq_msg_entry, len);
	S(struct fi_cq_data_entry);
	O(struct fi_cq_data_entry, data);
	S(struct fi_cq_tagged_entry);
	O(struct fi_cq_tagged_entry, tag);
	S(struct fi_cq_err_entry);
	O(struct fi_cq_err_entry, olen);
	O(struct fi_cq_err_entry, err);
	O(struct fi_cq_err_entry, prov_errno);
	O(struct fi_cq_err_entry, err_data);
	O(struct fi_cq_err_entry, err_data_size);
	V(FI_ADDR_UNSPEC == (uint64_t)-1);
	V(FI_KEY_NOTAVAIL == (uint64_t)-1);
	V(FI_MSG); V(FI_RMA); V(FI_TAGGED); V(FI_ATOMIC);
	V(FI_READ); V(FI_WRITE); V(FI_RECV); V(FI_SEND); V(FI_TRANSMIT);
	V(FI_REMOTE_READ); V(FI_REMOTE_WRITE); V(FI_MULTI_RECV);
	V(FI_REMOTE_CQ_DATA); V(FI_COMPLETION); V(FI_INJECT);
	V(FI_DELIVERY_COMPLETE); V(FI_HMEM); V(FI_XPU);
	V(FI_SUCCESS); V(FI_EPERM); V(FI_ENOENT); V(FI_EINTR); V(FI_EIO);
	V(FI_E2BIG); V(FI_EBADF); V(FI_EAGAIN); V(FI_ENOMEM); V(FI_EACCES);
	V(FI_EFAULT); V(FI_EBUSY); V(FI_ENODEV); V(FI_EINVAL); V(FI_EMFILE);
	V(FI_ENOSPC); V(FI_ENOSYS); V(FI_ENOMSG); V(FI_ENODATA);
	V(FI_EOVERFLOW); V(FI_EMSGSIZE); V(FI_ENOPROTOOPT); V(FI_EOPNOTSUPP);
	V(FI_EADDRINUSE); V(FI_EADDRNOTAVAIL); V(FI_ENETDOWN);
	V(FI_ENETUNREACH); V(FI_ECONNABORTED); V(FI_ECONNRESET);
	V(FI_ENOBUFS); V(FI_EISCONN); V(FI_ENOTCONN); V(FI_ESHUTDOWN);
	V(FI_ETIMEDOUT); V(FI_ECONNREFUSED); V(FI_EHOSTDOWN);
	V(FI_EHOSTUNREACH); V(FI_EALREADY); V(FI_EINPROGRESS);
	V(FI_EREMOTEIO); V(FI_ECANCELED); V(FI_EKEYREJECTED);
	V(FI_EOTHER); V(FI_ETOOSMALL); V(FI_EOPBADSTATE); V(FI_EAVAIL);
	V(FI_EBADFLAGS); V(FI_ENOEQ); V(FI_EDOMAIN); V(FI_ENOCQ); V(FI_ECRC);
	V(FI_ETRUNC); V(FI_ENOKEY); V(FI_ENOAV); V(FI_EOVERRUN); V(FI_ENORX);
	V(FI_CLASS_DOMAIN); V(FI_CLASS_EP); V(FI_CLASS_AV); V(FI_CLASS_MR);
	V(FI_CLASS_CQ); V(FI_CLASS_CNTR);
	V(FI_HMEM_SYSTEM); V(FI_HMEM_CUDA); V(FI_HMEM_ROCR); V(FI_HMEM_ZE);
	V(FI_HMEM_NEURON); V(FI_HMEM_SYNAPSEAI);
	V(FI_INT8); V(FI_UINT8); V(FI_INT16); V(FI_UINT16); V(FI_INT32);
	V(FI_UINT32); V(FI_INT64); V(FI_UINT64); V(FI_FLOAT); V(FI_DOUBLE);
	V(FI_DATATYPE_LAST);
	V(FI_MIN); V(FI_MAX); V(FI_SUM); V(FI_PROD); V(FI_LOR); V(FI_LAND);
	V(FI_BOR); V(FI_BAND); V(FI_LXOR); V(FI_BXOR); V(FI_ATOMIC_READ);
	V(FI_ATOMIC_WRITE); V(FI_CSWAP); V(FI_CSWAP_NE); V(FI_CSWAP_LE);
	V(FI_CSWAP_LT); V(FI_CSWAP_GE); V(FI_CSWAP_GT); V(FI_MSWAP);
	V(FI_ATOMIC_OP_LAST);
	V(FI_CQ_FORMAT_UNSPEC); V(FI_CQ_FORMAT_CONTEXT); V(FI_CQ_FORMAT_MSG);
	V(FI_CQ_FORMAT_DATA); V(FI_CQ_FORMAT_TAGGED);
	/* fi_xpu's own types, generated from the Rust definitions. */
	S(struct fid_xpu);
	O(struct fid_xpu, prov_ctx);
	/* Shared with libfabric's <rdma/fi_xpu.h> (include/fi_xpu/handles.h). */
	O(struct fid_xpu, fclass);
	O(struct fid_xpu, prov_id);
	S(struct fid_xpu_ep);
	S(struct fid_xpu_cq);
	S(struct fid_xpu_cntr);
	V(FI_XPU_WORK_ITEM); V(FI_XPU_SUBGROUP); V(FI_XPU_WORK_GROUP);
	V(FI_XPU_DEVICE);
	V(FI_XPU_ALLOC_DMABUF); V(FI_XPU_IMPORT_IOMEMORY);
	V(FI_XPU_IMPORT_DEVICEMAP);
	V(FI_XPU_CAP_EP); V(FI_XPU_CAP_CQ); V(FI_XPU_CAP_CNTR);
	V(FI_XPU_PROV_EFA); V(FI_XPU_PROV_INTREE_BASE); V(FI_XPU_PROV_SHM);
	V(FI_XPU_PROV_OFI); V(FI_XPU_PROV_USER_BASE);
	S(struct fi_xpu_ctx_open_attr);
	O(struct fi_xpu_ctx_open_attr, ops);
	S(struct fi_xpu_mem_ops);
	O(struct fi_xpu_mem_ops, export_dmabuf);
	S(struct fi_xpu_ctx_info);
	S(struct fi_xpu_info);
	S(struct fi_xpu_cq_attr);
	S(struct fi_xpu_ep_attr);
	return 0;
}

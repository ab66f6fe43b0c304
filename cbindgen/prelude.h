/*
 * Types shared with libfabric (libfabric's own headers when they are
 * installed, ABI-identical stand-ins otherwise; FI_XPU_NO_LIBFABRIC_HEADERS
 * forces the stand-ins), scope values, flags, provider ids and device
 * handles: see fi_xpu/handles.h. The version and the validity words of
 * exported handles: fi_xpu/version.h. Device code includes those two, never
 * this header.
 */
#include <fi_xpu/handles.h>
#include <fi_xpu/version.h>
/* libfabric's work-request description (struct fi_wr_attr), which
 * fi_xpu_prepare_wr takes. */
#include <fi_xpu/wr_attr.h>
#if !defined(__CUDACC_RTC__)
#include <sys/types.h>
#endif

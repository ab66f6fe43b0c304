/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * libfabric's device header name, fi_xpu's implementation: a kernel that
 * says #include <rdma/fi_xpu_device.h> builds unchanged against fi_xpu.
 * This directory is outside the default include path; it is added only by
 * the device flags (pkg-config --cflags fi_xpu-device), so libfabric's own
 * header stays what <rdma/fi_xpu_device.h> means everywhere else.
 */
#ifndef FI_XPU_INCLUDED_COMPAT_RDMA_FI_XPU_DEVICE_H
#define FI_XPU_INCLUDED_COMPAT_RDMA_FI_XPU_DEVICE_H

#include <fi_xpu/device.h>

#endif /* FI_XPU_INCLUDED_COMPAT_RDMA_FI_XPU_DEVICE_H */

//! The parameters ofi defines and reads through the core's parameter
//! registry (`FI_XPU_OFI_*`): the list `init` registers, and the lookup
//! the domain and the progress threads' tuning use.
/// Default and most progress threads per domain.
pub const DEFAULT_THREADS: u32 = 1;
pub const MAX_THREADS: u32 = 64;

/// The parameters ofi defines (name, default, description); `init`
/// registers them with the core. Each is `FI_XPU_OFI_<NAME>`.
pub const PARAMS: [(&str, &str, &str); 10] = [
    (
        "provider",
        "",
        "libfabric provider to run on (empty: the first of cxi, efa, verbs, opx, tcp, shm that works)",
    ),
    (
        "domain",
        "",
        "libfabric domain name to use, such as an interface (empty: any)",
    ),
    (
        "progress_threads",
        "1",
        "progress threads per domain, 1 to 64, unless fi_xpu_domain_attr.progress_threads is set",
    ),
    (
        "spin_us",
        "100",
        "microseconds a progress thread keeps polling after its last activity (0 on hosts with fewer than 4 CPUs)",
    ),
    (
        "poll_us",
        "200",
        "longest sleep, in microseconds, of a progress thread that can only notice work by polling",
    ),
    (
        "stall_ms",
        "1000",
        "milliseconds an unpublished ring slot may hold up later published ones before it is failed",
    ),
    (
        "close_ms",
        "5000",
        "milliseconds a close waits for a progress thread stuck inside libfabric before giving it up",
    ),
    (
        "op_timeout_ms",
        "10000",
        "milliseconds an RMA or atomic may go without a completion from libfabric before it fails with -FI_ETIMEDOUT (0: no limit)",
    ),
    (
        "ordered_signal",
        "1",
        "a put with signal whose data fits the transport's inject size goes out injected, its signal right behind it, where the transport orders write data placement (FI_ORDER_WAW, max_order_waw_size) (0: the signal always waits for the data's delivery completion)",
    ),
    (
        "test_delay_ms",
        "0",
        "TESTING ONLY: milliseconds RMA write data waits before it reaches libfabric, as on a transport that places data late, so that ordering tests can fail (0: off)",
    ),
];

/// The value of the provider parameter `FI_XPU_OFI_<NAME>` (`var` is the
/// variable's full name), from the core's parameter registry.
pub fn param(var: &str) -> Option<String> {
    let name = var.strip_prefix("FI_XPU_OFI_")?.to_ascii_lowercase();
    fi_xpu_prov_sdk::services::param(&name)
}

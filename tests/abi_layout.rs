//! fi_xpu.h must agree with libfabric: built against libfabric's own
//! headers and against fi_xpu's stand-ins, the same program must print the
//! same values and layouts, and those must equal the Rust mirror's.
use crate::common;

use fi_xpu_abi::*;
use std::mem::{offset_of, size_of};
use std::process::Command;

fn expected_from_rust() -> Vec<String> {
    let mut v = vec![
        format!("sizeof(struct fid) {}", size_of::<fid>()),
        format!("offsetof(struct fid,fclass) {}", offset_of!(fid, fclass)),
        format!("offsetof(struct fid,context) {}", offset_of!(fid, context)),
        format!("offsetof(struct fid,ops) {}", offset_of!(fid, ops)),
        format!("sizeof(struct fi_ops) {}", size_of::<fi_ops>()),
        format!(
            "offsetof(struct fi_ops,close) {}",
            offset_of!(fi_ops, close)
        ),
        format!("offsetof(struct fi_ops,bind) {}", offset_of!(fi_ops, bind)),
        format!(
            "offsetof(struct fi_ops,ops_set) {}",
            offset_of!(fi_ops, ops_set)
        ),
        format!("sizeof(fi_addr_t) {}", size_of::<fi_addr_t>()),
        format!("sizeof(enum fi_hmem_iface) {}", size_of::<fi_hmem_iface>()),
        format!("sizeof(struct fi_cq_entry) {}", size_of::<fi_cq_entry>()),
        format!(
            "sizeof(struct fi_cq_msg_entry) {}",
            size_of::<fi_cq_msg_entry>()
        ),
        format!(
            "offsetof(struct fi_cq_msg_entry,len) {}",
            offset_of!(fi_cq_msg_entry, len)
        ),
        format!(
            "sizeof(struct fi_cq_data_entry) {}",
            size_of::<fi_cq_data_entry>()
        ),
        format!(
            "offsetof(struct fi_cq_data_entry,data) {}",
            offset_of!(fi_cq_data_entry, data)
        ),
        format!(
            "sizeof(struct fi_cq_tagged_entry) {}",
            size_of::<fi_cq_tagged_entry>()
        ),
        format!(
            "offsetof(struct fi_cq_tagged_entry,tag) {}",
            offset_of!(fi_cq_tagged_entry, tag)
        ),
        format!(
            "sizeof(struct fi_cq_err_entry) {}",
            size_of::<fi_cq_err_entry>()
        ),
        format!(
            "offsetof(struct fi_cq_err_entry,olen) {}",
            offset_of!(fi_cq_err_entry, olen)
        ),
        format!(
            "offsetof(struct fi_cq_err_entry,err) {}",
            offset_of!(fi_cq_err_entry, err)
        ),
        format!(
            "offsetof(struct fi_cq_err_entry,prov_errno) {}",
            offset_of!(fi_cq_err_entry, prov_errno)
        ),
        format!(
            "offsetof(struct fi_cq_err_entry,err_data) {}",
            offset_of!(fi_cq_err_entry, err_data)
        ),
        format!(
            "offsetof(struct fi_cq_err_entry,err_data_size) {}",
            offset_of!(fi_cq_err_entry, err_data_size)
        ),
        "FI_ADDR_UNSPEC == (uint64_t)-1 1".into(),
        "FI_KEY_NOTAVAIL == (uint64_t)-1 1".into(),
    ];
    use flags::*;
    for (n, x) in [
        ("FI_MSG", FI_MSG),
        ("FI_RMA", FI_RMA),
        ("FI_TAGGED", FI_TAGGED),
        ("FI_ATOMIC", FI_ATOMIC),
        ("FI_READ", FI_READ),
        ("FI_WRITE", FI_WRITE),
        ("FI_RECV", FI_RECV),
        ("FI_SEND", FI_SEND),
        ("FI_TRANSMIT", FI_TRANSMIT),
        ("FI_REMOTE_READ", FI_REMOTE_READ),
        ("FI_REMOTE_WRITE", FI_REMOTE_WRITE),
        ("FI_MULTI_RECV", FI_MULTI_RECV),
        ("FI_REMOTE_CQ_DATA", FI_REMOTE_CQ_DATA),
        ("FI_COMPLETION", FI_COMPLETION),
        ("FI_INJECT", FI_INJECT),
        ("FI_DELIVERY_COMPLETE", FI_DELIVERY_COMPLETE),
        ("FI_HMEM", FI_HMEM),
        ("FI_XPU", FI_XPU),
    ] {
        v.push(format!("{n} {x}"));
    }
    use errno::*;
    for (n, x) in [
        ("FI_SUCCESS", FI_SUCCESS),
        ("FI_EPERM", FI_EPERM),
        ("FI_ENOENT", FI_ENOENT),
        ("FI_EINTR", FI_EINTR),
        ("FI_EIO", FI_EIO),
        ("FI_E2BIG", FI_E2BIG),
        ("FI_EBADF", FI_EBADF),
        ("FI_EAGAIN", FI_EAGAIN),
        ("FI_ENOMEM", FI_ENOMEM),
        ("FI_EACCES", FI_EACCES),
        ("FI_EFAULT", FI_EFAULT),
        ("FI_EBUSY", FI_EBUSY),
        ("FI_ENODEV", FI_ENODEV),
        ("FI_EINVAL", FI_EINVAL),
        ("FI_EMFILE", FI_EMFILE),
        ("FI_ENOSPC", FI_ENOSPC),
        ("FI_ENOSYS", FI_ENOSYS),
        ("FI_ENOMSG", FI_ENOMSG),
        ("FI_ENODATA", FI_ENODATA),
        ("FI_EOVERFLOW", FI_EOVERFLOW),
        ("FI_EMSGSIZE", FI_EMSGSIZE),
        ("FI_ENOPROTOOPT", FI_ENOPROTOOPT),
        ("FI_EOPNOTSUPP", FI_EOPNOTSUPP),
        ("FI_EADDRINUSE", FI_EADDRINUSE),
        ("FI_EADDRNOTAVAIL", FI_EADDRNOTAVAIL),
        ("FI_ENETDOWN", FI_ENETDOWN),
        ("FI_ENETUNREACH", FI_ENETUNREACH),
        ("FI_ECONNABORTED", FI_ECONNABORTED),
        ("FI_ECONNRESET", FI_ECONNRESET),
        ("FI_ENOBUFS", FI_ENOBUFS),
        ("FI_EISCONN", FI_EISCONN),
        ("FI_ENOTCONN", FI_ENOTCONN),
        ("FI_ESHUTDOWN", FI_ESHUTDOWN),
        ("FI_ETIMEDOUT", FI_ETIMEDOUT),
        ("FI_ECONNREFUSED", FI_ECONNREFUSED),
        ("FI_EHOSTDOWN", FI_EHOSTDOWN),
        ("FI_EHOSTUNREACH", FI_EHOSTUNREACH),
        ("FI_EALREADY", FI_EALREADY),
        ("FI_EINPROGRESS", FI_EINPROGRESS),
        ("FI_EREMOTEIO", FI_EREMOTEIO),
        ("FI_ECANCELED", FI_ECANCELED),
        ("FI_EKEYREJECTED", FI_EKEYREJECTED),
        ("FI_EOTHER", FI_EOTHER),
        ("FI_ETOOSMALL", FI_ETOOSMALL),
        ("FI_EOPBADSTATE", FI_EOPBADSTATE),
        ("FI_EAVAIL", FI_EAVAIL),
        ("FI_EBADFLAGS", FI_EBADFLAGS),
        ("FI_ENOEQ", FI_ENOEQ),
        ("FI_EDOMAIN", FI_EDOMAIN),
        ("FI_ENOCQ", FI_ENOCQ),
        ("FI_ECRC", FI_ECRC),
        ("FI_ETRUNC", FI_ETRUNC),
        ("FI_ENOKEY", FI_ENOKEY),
        ("FI_ENOAV", FI_ENOAV),
        ("FI_EOVERRUN", FI_EOVERRUN),
        ("FI_ENORX", FI_ENORX),
    ] {
        v.push(format!("{n} {x}"));
    }
    use class::*;
    for (n, x) in [
        ("FI_CLASS_DOMAIN", FI_CLASS_DOMAIN),
        ("FI_CLASS_EP", FI_CLASS_EP),
        ("FI_CLASS_AV", FI_CLASS_AV),
        ("FI_CLASS_MR", FI_CLASS_MR),
        ("FI_CLASS_CQ", FI_CLASS_CQ),
        ("FI_CLASS_CNTR", FI_CLASS_CNTR),
    ] {
        v.push(format!("{n} {x}"));
    }
    for (n, x) in [
        ("FI_HMEM_SYSTEM", FI_HMEM_SYSTEM),
        ("FI_HMEM_CUDA", FI_HMEM_CUDA),
        ("FI_HMEM_ROCR", FI_HMEM_ROCR),
        ("FI_HMEM_ZE", FI_HMEM_ZE),
        ("FI_HMEM_NEURON", FI_HMEM_NEURON),
        ("FI_HMEM_SYNAPSEAI", FI_HMEM_SYNAPSEAI),
    ] {
        v.push(format!("{n} {x}"));
    }
    use datatype::*;
    for (n, x) in [
        ("FI_INT8", FI_INT8),
        ("FI_UINT8", FI_UINT8),
        ("FI_INT16", FI_INT16),
        ("FI_UINT16", FI_UINT16),
        ("FI_INT32", FI_INT32),
        ("FI_UINT32", FI_UINT32),
        ("FI_INT64", FI_INT64),
        ("FI_UINT64", FI_UINT64),
        ("FI_FLOAT", FI_FLOAT),
        ("FI_DOUBLE", FI_DOUBLE),
        ("FI_DATATYPE_LAST", FI_DATATYPE_LAST),
    ] {
        v.push(format!("{n} {x}"));
    }
    use op::*;
    for (n, x) in [
        ("FI_MIN", FI_MIN),
        ("FI_MAX", FI_MAX),
        ("FI_SUM", FI_SUM),
        ("FI_PROD", FI_PROD),
        ("FI_LOR", FI_LOR),
        ("FI_LAND", FI_LAND),
        ("FI_BOR", FI_BOR),
        ("FI_BAND", FI_BAND),
        ("FI_LXOR", FI_LXOR),
        ("FI_BXOR", FI_BXOR),
        ("FI_ATOMIC_READ", FI_ATOMIC_READ),
        ("FI_ATOMIC_WRITE", FI_ATOMIC_WRITE),
        ("FI_CSWAP", FI_CSWAP),
        ("FI_CSWAP_NE", FI_CSWAP_NE),
        ("FI_CSWAP_LE", FI_CSWAP_LE),
        ("FI_CSWAP_LT", FI_CSWAP_LT),
        ("FI_CSWAP_GE", FI_CSWAP_GE),
        ("FI_CSWAP_GT", FI_CSWAP_GT),
        ("FI_MSWAP", FI_MSWAP),
        ("FI_ATOMIC_OP_LAST", FI_ATOMIC_OP_LAST),
    ] {
        v.push(format!("{n} {x}"));
    }
    for (n, x) in [
        ("FI_CQ_FORMAT_UNSPEC", FI_CQ_FORMAT_UNSPEC),
        ("FI_CQ_FORMAT_CONTEXT", FI_CQ_FORMAT_CONTEXT),
        ("FI_CQ_FORMAT_MSG", FI_CQ_FORMAT_MSG),
        ("FI_CQ_FORMAT_DATA", FI_CQ_FORMAT_DATA),
        ("FI_CQ_FORMAT_TAGGED", FI_CQ_FORMAT_TAGGED),
    ] {
        v.push(format!("{n} {x}"));
    }
    v.extend([
        format!("sizeof(struct fid_xpu) {}", size_of::<fid_xpu>()),
        format!(
            "offsetof(struct fid_xpu,prov_ctx) {}",
            offset_of!(fid_xpu, prov_ctx)
        ),
        format!(
            "offsetof(struct fid_xpu,fclass) {}",
            offset_of!(fid_xpu, fclass)
        ),
        format!(
            "offsetof(struct fid_xpu,prov_id) {}",
            offset_of!(fid_xpu, prov_id)
        ),
        format!("sizeof(struct fid_xpu_ep) {}", size_of::<fid_xpu_ep>()),
        format!("sizeof(struct fid_xpu_cq) {}", size_of::<fid_xpu_cq>()),
        format!("sizeof(struct fid_xpu_cntr) {}", size_of::<fid_xpu_cntr>()),
    ]);
    for (n, x) in [
        ("FI_XPU_WORK_ITEM", FI_XPU_WORK_ITEM as u64),
        ("FI_XPU_SUBGROUP", FI_XPU_SUBGROUP as u64),
        ("FI_XPU_WORK_GROUP", FI_XPU_WORK_GROUP as u64),
        ("FI_XPU_DEVICE", FI_XPU_DEVICE as u64),
        ("FI_XPU_ALLOC_DMABUF", FI_XPU_ALLOC_DMABUF),
        ("FI_XPU_IMPORT_IOMEMORY", FI_XPU_IMPORT_IOMEMORY),
        ("FI_XPU_IMPORT_DEVICEMAP", FI_XPU_IMPORT_DEVICEMAP),
        ("FI_XPU_CAP_EP", FI_XPU_CAP_EP),
        ("FI_XPU_CAP_CQ", FI_XPU_CAP_CQ),
        ("FI_XPU_CAP_CNTR", FI_XPU_CAP_CNTR),
        ("FI_XPU_PROV_EFA", FI_XPU_PROV_EFA.into()),
        ("FI_XPU_PROV_INTREE_BASE", FI_XPU_PROV_INTREE_BASE.into()),
        ("FI_XPU_PROV_SHM", FI_XPU_PROV_SHM.into()),
        ("FI_XPU_PROV_OFI", FI_XPU_PROV_OFI.into()),
        ("FI_XPU_PROV_USER_BASE", FI_XPU_PROV_USER_BASE.into()),
    ] {
        v.push(format!("{n} {x}"));
    }
    v.extend([
        format!(
            "sizeof(struct fi_xpu_ctx_open_attr) {}",
            size_of::<fi_xpu_ctx_open_attr>()
        ),
        format!(
            "offsetof(struct fi_xpu_ctx_open_attr,ops) {}",
            offset_of!(fi_xpu_ctx_open_attr, ops)
        ),
        format!(
            "sizeof(struct fi_xpu_mem_ops) {}",
            size_of::<fi_xpu_mem_ops>()
        ),
        format!(
            "offsetof(struct fi_xpu_mem_ops,export_dmabuf) {}",
            offset_of!(fi_xpu_mem_ops, export_dmabuf)
        ),
        format!(
            "sizeof(struct fi_xpu_ctx_info) {}",
            size_of::<fi_xpu_ctx_info>()
        ),
        format!("sizeof(struct fi_xpu_info) {}", size_of::<fi_xpu_info>()),
        format!(
            "sizeof(struct fi_xpu_cq_attr) {}",
            size_of::<fi_xpu_cq_attr>()
        ),
        format!(
            "sizeof(struct fi_xpu_ep_attr) {}",
            size_of::<fi_xpu_ep_attr>()
        ),
    ]);
    v
}

fn run_variant(extra: &[&str], tag: &str) -> (String, String) {
    let dir = common::scratch(&format!("abi-{tag}"));
    let exe = dir.join("abi_layout");
    common::cc(&[&common::root().join("tests/c/abi_layout.c")], &exe, extra);
    let o = common::run_ok(&mut Command::new(&exe));
    (
        String::from_utf8(o.stdout).unwrap(),
        String::from_utf8(o.stderr).unwrap(),
    )
}

#[test]
fn stand_ins_match_libfabric_and_rust() {
    let expected = expected_from_rust().join("\n") + "\n";
    let (own, mode) = run_variant(&["-DFI_XPU_NO_LIBFABRIC_HEADERS"], "own");
    assert!(mode.contains("stand-ins"), "{mode}");
    assert_eq!(
        own, expected,
        "stand-in definitions differ from the Rust mirror"
    );

    assert!(
        std::path::Path::new("/usr/include/rdma/fi_domain.h").exists(),
        "libfabric headers are missing: install libfabric-dev (.ci/run does)"
    );
    let (lf, mode) = run_variant(&[], "libfabric");
    assert!(mode.contains("libfabric headers"), "{mode}");
    assert_eq!(
        lf, own,
        "libfabric's headers and fi_xpu's stand-ins disagree"
    );
}

#[test]
fn header_compiles_standalone_in_c99_and_cxx17() {
    let dir = common::scratch("standalone");
    let src = dir.join("one.c");
    std::fs::write(&src, "#include <fi_xpu.h>\n#include <fi_xpu.h>\n#include <fi_xpu/provider.h>\nint fi_xpu_probe(void);\nint fi_xpu_probe(void) { return (int)sizeof(struct fid_xpu); }\n").unwrap();
    let top = format!("-I{}", common::root().display());
    let inc = format!("-I{}", common::root().join("include").display());
    for (compiler, std) in [("cc", "-std=c99"), ("c++", "-std=c++17")] {
        for mode in ["", "-DFI_XPU_NO_LIBFABRIC_HEADERS"] {
            let mut cmd = Command::new(compiler);
            cmd.args([
                std,
                "-Wall",
                "-Wextra",
                "-Werror",
                "-pedantic",
                "-c",
                &top,
                &inc,
            ]);
            if !mode.is_empty() {
                cmd.arg(mode);
            }
            if compiler == "c++" {
                cmd.args(["-x", "c++"]);
            }
            cmd.arg(&src).arg("-o").arg(dir.join("one.o"));
            common::run_ok(&mut cmd);
        }
    }
}

#[test]
fn version_macros_follow_cargo_toml() {
    let parse = |s: &str| s.parse::<u32>().unwrap();
    assert_eq!(FI_XPU_MAJOR_VERSION, parse(env!("CARGO_PKG_VERSION_MAJOR")));
    assert_eq!(FI_XPU_MINOR_VERSION, parse(env!("CARGO_PKG_VERSION_MINOR")));
    assert_eq!(FI_XPU_PATCH_VERSION, parse(env!("CARGO_PKG_VERSION_PATCH")));
    assert_eq!(
        fi_xpu::capi::info::fi_xpu_version(),
        (FI_XPU_MAJOR_VERSION << 16) | FI_XPU_MINOR_VERSION
    );
}

#[test]
fn no_panic_crosses_the_c_boundary() {
    use fi_xpu::capi::boundary::run;
    // The value returned on a panic or an error comes from the return type.
    let ret: i32 = run(|| panic!("deliberate"));
    assert_eq!(ret, -errno::FI_EOTHER);
    let ret: isize = run(|| panic!("deliberate"));
    assert_eq!(ret, -(errno::FI_EOTHER as isize));
    let ret: *mut u64 = run(|| panic!("deliberate"));
    assert!(ret.is_null());
    let ret: i32 = run(|| Err(fi_xpu::Error::NOENT));
    assert_eq!(ret, -errno::FI_ENOENT);
    let ret: isize = run(|| Err(fi_xpu::Error::AGAIN));
    assert_eq!(ret, -(errno::FI_EAGAIN as isize));
    let ret: *const u8 = run(|| Err(fi_xpu::Error::INVAL));
    assert!(ret.is_null());
}

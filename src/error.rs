//! Error values: libfabric's positive error numbers, returned negated at the C
//! boundary.
use fi_xpu_abi::errno::*;
use std::fmt;

/// A libfabric error number (positive, e.g. `FI_EINVAL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Error(pub i32);

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub const INVAL: Error = Error(FI_EINVAL);
    pub const NOMEM: Error = Error(FI_ENOMEM);
    pub const NOSYS: Error = Error(FI_ENOSYS);
    pub const BUSY: Error = Error(FI_EBUSY);
    pub const NODATA: Error = Error(FI_ENODATA);
    pub const OPNOTSUPP: Error = Error(FI_EOPNOTSUPP);
    pub const BADFLAGS: Error = Error(FI_EBADFLAGS);
    pub const TOOSMALL: Error = Error(FI_ETOOSMALL);
    pub const OTHER: Error = Error(FI_EOTHER);

    /// The value a C function returns for this error.
    pub fn code(self) -> i32 {
        -self.0
    }

    /// From a provider's or callback's return value: 0 is success, a negative
    /// value is an error, a positive one is read as a mistaken sign.
    pub fn check(ret: i32) -> Result<()> {
        match ret {
            0 => Ok(()),
            r if r < 0 => Err(Error(-r)),
            r => Err(Error(r)),
        }
    }

    /// From an OS error (errno values are libfabric's).
    pub fn last_os() -> Error {
        Error(
            std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(FI_EOTHER),
        )
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error(e.raw_os_error().unwrap_or(FI_EOTHER))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(strerror(self.0))
    }
}

/// The text for a (positive or negative) error number, as `fi_strerror` gives.
pub fn strerror(errnum: i32) -> &'static str {
    match errnum.unsigned_abs() as i32 {
        FI_SUCCESS => "Success",
        FI_EPERM => "Operation not permitted",
        FI_ENOENT => "No such file or directory",
        FI_EINTR => "Interrupted system call",
        FI_EIO => "Input/output error",
        FI_E2BIG => "Argument list too long",
        FI_EBADF => "Bad file descriptor",
        FI_EAGAIN => "Resource temporarily unavailable",
        FI_ENOMEM => "Cannot allocate memory",
        FI_EACCES => "Permission denied",
        FI_EFAULT => "Bad address",
        FI_EBUSY => "Device or resource busy",
        FI_ENODEV => "No such device",
        FI_EINVAL => "Invalid argument",
        FI_EMFILE => "Too many open files",
        FI_ENOSPC => "No space left on device",
        FI_ENOSYS => "Function not implemented",
        FI_ENOMSG => "No message of desired type",
        FI_ENODATA => "No data available",
        FI_EOVERFLOW => "Value too large for defined data type",
        FI_EMSGSIZE => "Message too long",
        FI_ENOPROTOOPT => "Protocol not available",
        FI_EOPNOTSUPP => "Operation not supported",
        FI_EADDRINUSE => "Address already in use",
        FI_EADDRNOTAVAIL => "Cannot assign requested address",
        FI_ENETDOWN => "Network is down",
        FI_ENETUNREACH => "Network is unreachable",
        FI_ECONNABORTED => "Software caused connection abort",
        FI_ECONNRESET => "Connection reset by peer",
        FI_ENOBUFS => "No buffer space available",
        FI_EISCONN => "Transport endpoint is already connected",
        FI_ENOTCONN => "Transport endpoint is not connected",
        FI_ESHUTDOWN => "Cannot send after transport endpoint shutdown",
        FI_ETIMEDOUT => "Connection timed out",
        FI_ECONNREFUSED => "Connection refused",
        FI_EHOSTDOWN => "Host is down",
        FI_EHOSTUNREACH => "No route to host",
        FI_EALREADY => "Operation already in progress",
        FI_EINPROGRESS => "Operation now in progress",
        FI_EREMOTEIO => "Remote I/O error",
        FI_ECANCELED => "Operation canceled",
        FI_EKEYREJECTED => "Key was rejected by service",
        FI_EOTHER => "Unspecified error",
        FI_ETOOSMALL => "Provided buffer is too small",
        FI_EOPBADSTATE => "Operation not permitted in current state",
        FI_EAVAIL => "Error available",
        FI_EBADFLAGS => "Flags not supported",
        FI_ENOEQ => "Missing or unavailable event queue",
        FI_EDOMAIN => "Invalid resource domain",
        FI_ENOCQ => "Missing or unavailable completion queue",
        FI_ECRC => "CRC error",
        FI_ETRUNC => "Truncation error",
        FI_ENOKEY => "Required key not available",
        _ => "Unknown error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_and_text() {
        assert_eq!(Error::INVAL.code(), -22);
        assert_eq!(strerror(-FI_EINVAL), "Invalid argument");
        assert_eq!(strerror(FI_EAVAIL), "Error available");
        assert_eq!(strerror(12345), "Unknown error");
        assert_eq!(Error::check(-FI_EBUSY), Err(Error::BUSY));
        assert_eq!(Error::check(0), Ok(()));
    }
}

//! Removes what libfabric's shm provider left in `/dev/shm` for endpoints
//! of this user's processes that are gone.
//!
//! Endpoints over libfabric's shm name their shared memory after the
//! process (`fi_xpu-PID-START:UID:N`, see `objects::shm_src_addr`). A
//! process that ends without closing them (`_exit`, a signal) leaves the
//! files behind, 16 MiB each. At every domain open the provider removes
//! the files whose name carries this user's uid, that this user owns, and
//! whose process is gone: no process PID, or one that started at another
//! time (the pid was reused). Files of live processes, of other users, and
//! names of any other form are left alone.
//!
//! Only in the initial pid namespace: elsewhere `/dev/shm` may be shared
//! with processes whose pids this namespace does not show, and their files
//! would look orphaned.
use std::os::unix::fs::MetadataExt;
use std::path::Path;

const DIR: &str = "/dev/shm";
/// The inode of the initial pid namespace (the kernel's `PROC_PID_INIT_INO`).
const INIT_PID_NS: u64 = 0xEFFF_FFFC;

/// The pid and start time a name `fi_xpu-PID-START:UID:N` carries, when
/// its uid is `uid`.
fn owner(name: &str, uid: u32) -> Option<(u32, &str)> {
    let rest = name.strip_prefix("fi_xpu-")?;
    let (proc_part, tail) = rest.split_once(':')?;
    let (pid, start) = proc_part.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let name_uid = tail.split(':').next()?;
    if !digits(pid) || !digits(start) || !digits(name_uid) {
        return None;
    }
    (name_uid.parse::<u32>().ok()? == uid).then_some(())?;
    Some((pid.parse().ok()?, start))
}

/// Whether process `pid` that started at `start` (field 22 of its
/// `/proc/PID/stat`) is gone. A process that cannot be examined for
/// another reason counts as alive.
fn gone(proc_root: &Path, pid: u32, start: &str) -> bool {
    match std::fs::read_to_string(proc_root.join(pid.to_string()).join("stat")) {
        Ok(stat) => start_time(&stat) != Some(start),
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

/// Field 22 (starttime) of a `/proc/PID/stat` line.
pub fn start_time(stat: &str) -> Option<&str> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // `rest` begins at field 3.
    rest.split_whitespace().nth(19)
}

/// Removes the orphaned files of `uid` in `dir`, judging processes by
/// `proc_root`; returns the names removed.
fn sweep_in(dir: &Path, proc_root: &Path, uid: u32) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some((pid, start)) = owner(&name, uid) else {
            continue;
        };
        // Not followed: a link is not libfabric's file.
        let mine = e.metadata().is_ok_and(|m| m.is_file() && m.uid() == uid);
        if mine && gone(proc_root, pid, start) && std::fs::remove_file(e.path()).is_ok() {
            removed.push(name);
        }
    }
    removed
}

/// The sweep of `/dev/shm` for this process's user, at domain open.
pub fn sweep() {
    let in_init_ns = std::fs::metadata("/proc/self/ns/pid").is_ok_and(|m| m.ino() == INIT_PID_NS);
    if !in_init_ns {
        return;
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    for name in sweep_in(Path::new(DIR), Path::new("/proc"), uid) {
        crate::core::info(&format!(
            "removed {DIR}/{name}: left by a process that is gone"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_this_uid_only() {
        assert_eq!(owner("fi_xpu-12-345:1000:0", 1000), Some((12, "345")));
        assert_eq!(owner("fi_xpu-12-345:1000:7_extra", 1000), Some((12, "345")));
        assert_eq!(owner("fi_xpu-12-345:1001:0", 1000), None);
        assert_eq!(owner("12:1000:0", 1000), None);
        assert_eq!(owner("fi_xpu-12:1000:0", 1000), None);
        assert_eq!(owner("fi_xpu-x-345:1000:0", 1000), None);
        assert_eq!(owner("fi_xpu-ipc", 1000), None);
    }

    #[test]
    fn start_time_is_field_22() {
        let stat = "77 (a) b) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 4242 19 20";
        assert_eq!(start_time(stat), Some("4242"));
    }

    /// A fake /proc with one live process (pid 10, started at 500): its
    /// file stays; those of pid 10 with another start time, and of a pid
    /// with no process, go; another uid's and other names stay.
    #[test]
    fn removes_the_files_of_gone_processes_only() {
        let root = std::env::temp_dir().join(format!("ofi-sweep-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let (shm, proc_root) = (root.join("shm"), root.join("proc"));
        std::fs::create_dir_all(&shm).unwrap();
        std::fs::create_dir_all(proc_root.join("10")).unwrap();
        let fields: Vec<String> = (3..=21).map(|f| f.to_string()).collect();
        std::fs::write(
            proc_root.join("10/stat"),
            format!("10 (x) {} 500 0 0\n", fields.join(" ")),
        )
        .unwrap();
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        let names = [
            format!("fi_xpu-10-500:{uid}:0"),
            format!("fi_xpu-10-499:{uid}:0"),
            format!("fi_xpu-11-500:{uid}:0"),
            format!("fi_xpu-11-500:{}:0", uid + 1),
            format!("11:{uid}:0"),
        ];
        for n in &names {
            std::fs::write(shm.join(n), b"x").unwrap();
        }
        let mut removed = sweep_in(&shm, &proc_root, uid);
        removed.sort();
        assert_eq!(removed, [names[1].clone(), names[2].clone()]);
        for n in [&names[0], &names[3], &names[4]] {
            assert!(shm.join(n).exists(), "{n}");
        }
        std::fs::remove_dir_all(&root).unwrap();
    }
}

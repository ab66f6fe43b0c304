//! Checks a plugin's ELF header and program headers before `dlopen` maps it:
//! the dynamic loader trusts them, and a segment that runs past the end of
//! the file (a truncated plugin) makes the process that touches it die of
//! SIGBUS instead of getting an error. Pure code over a byte-reading
//! closure, so it is unit-tested without files.

const EHDR_SIZE: usize = 64;
const PHDR_SIZE: usize = 56;
const SHDR_SIZE: usize = 64;
const ELFCLASS64: u8 = 2;
#[cfg(target_endian = "little")]
const ELFDATA_HOST: u8 = 1;
#[cfg(target_endian = "big")]
const ELFDATA_HOST: u8 = 2;
const ET_DYN: u16 = 3;
const PT_LOAD: u32 = 1;
/// Program headers are capped: no real shared object has more.
const MAX_PHNUM: u16 = 256;

#[cfg(target_arch = "x86_64")]
const EM_HOST: u16 = 62;
#[cfg(target_arch = "aarch64")]
const EM_HOST: u16 = 183;
#[cfg(target_arch = "powerpc64")]
const EM_HOST: u16 = 21;
#[cfg(target_arch = "riscv64")]
const EM_HOST: u16 = 243;

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// `[offset, offset + count * size)` must lie inside a file of `file_size`
/// bytes; `what` names the table in the refusal.
fn table_inside(
    what: &str,
    offset: u64,
    count: u64,
    size: u64,
    file_size: u64,
) -> Result<(), String> {
    let end = count
        .checked_mul(size)
        .and_then(|len| offset.checked_add(len));
    match end {
        Some(end) if end <= file_size => Ok(()),
        Some(end) => Err(format!(
            "truncated: {what} end at byte {end}, past the end of the file ({file_size} bytes)"
        )),
        None => Err(format!("{what} offset overflows")),
    }
}

/// Checks a shared object of `file_size` bytes whose bytes `read(offset,
/// len)` returns. The refusal says exactly what is wrong.
pub fn check(
    file_size: u64,
    read: impl Fn(u64, usize) -> std::io::Result<Vec<u8>>,
) -> Result<(), String> {
    if file_size < EHDR_SIZE as u64 {
        return Err(format!(
            "not an ELF file ({file_size} bytes, shorter than an ELF header)"
        ));
    }
    let eh = read(0, EHDR_SIZE).map_err(|e| format!("cannot read the ELF header: {e}"))?;
    if eh[..4] != *b"\x7fELF" {
        return Err("not an ELF file (bad magic)".into());
    }
    if eh[4] != ELFCLASS64 {
        return Err(format!("ELF class {} is not 64-bit", eh[4]));
    }
    if eh[5] != ELFDATA_HOST {
        return Err("ELF byte order is not this machine's".into());
    }
    let e_type = u16_at(&eh, 16);
    if e_type != ET_DYN {
        return Err(format!("not a shared object (ELF type {e_type})"));
    }
    let machine = u16_at(&eh, 18);
    if machine != EM_HOST {
        return Err(format!(
            "built for ELF machine {machine}, this machine is {EM_HOST}"
        ));
    }
    let phoff = u64_at(&eh, 32);
    let shoff = u64_at(&eh, 40);
    let phentsize = u16_at(&eh, 54);
    let phnum = u16_at(&eh, 56);
    let shentsize = u16_at(&eh, 58);
    let shnum = u16_at(&eh, 60);
    if phentsize as usize != PHDR_SIZE || phnum == 0 || phnum > MAX_PHNUM {
        return Err(format!(
            "bad program header table ({phnum} entries of {phentsize} bytes)"
        ));
    }
    table_inside(
        "program headers",
        phoff,
        phnum.into(),
        PHDR_SIZE as u64,
        file_size,
    )?;
    let ph = read(phoff, phnum as usize * PHDR_SIZE)
        .map_err(|e| format!("cannot read the program headers: {e}"))?;
    let mut loads = 0;
    for (i, p) in ph.chunks_exact(PHDR_SIZE).enumerate() {
        if u32_at(p, 0) != PT_LOAD {
            continue;
        }
        loads += 1;
        let (offset, filesz, memsz) = (u64_at(p, 8), u64_at(p, 32), u64_at(p, 40));
        if filesz > memsz {
            return Err(format!(
                "segment {i}: {filesz} bytes in the file but {memsz} in memory"
            ));
        }
        match offset.checked_add(filesz) {
            Some(end) if end <= file_size => {}
            Some(end) => {
                return Err(format!(
                    "truncated: segment {i} ends at byte {end}, past the end of the file ({file_size} bytes)"
                ))
            }
            None => return Err(format!("segment {i}: offset overflows")),
        }
    }
    if loads == 0 {
        return Err("no loadable segment".into());
    }
    // The dynamic loader does not read sections, but a table past the end
    // still means the file was cut short.
    if shnum != 0 {
        if shentsize as usize != SHDR_SIZE {
            return Err(format!("bad section header size {shentsize}"));
        }
        table_inside(
            "section headers",
            shoff,
            shnum.into(),
            SHDR_SIZE as u64,
            file_size,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal valid shared object image: header, one PT_LOAD covering
    /// the first `load` bytes, no sections.
    fn image(len: usize, load: u64) -> Vec<u8> {
        let mut b = vec![0u8; len.max(128)];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = ELFCLASS64;
        b[5] = ELFDATA_HOST;
        b[16..18].copy_from_slice(&ET_DYN.to_ne_bytes());
        b[18..20].copy_from_slice(&EM_HOST.to_ne_bytes());
        b[32..40].copy_from_slice(&64u64.to_ne_bytes());
        b[54..56].copy_from_slice(&(PHDR_SIZE as u16).to_ne_bytes());
        b[56..58].copy_from_slice(&1u16.to_ne_bytes());
        let p = 64;
        b[p..p + 4].copy_from_slice(&PT_LOAD.to_ne_bytes());
        b[p + 32..p + 40].copy_from_slice(&load.to_ne_bytes());
        b[p + 40..p + 48].copy_from_slice(&load.to_ne_bytes());
        b.truncate(len);
        b
    }

    fn run(b: &[u8]) -> Result<(), String> {
        check(b.len() as u64, |off, len| {
            let off = off as usize;
            Ok(b[off..off + len].to_vec())
        })
    }

    #[test]
    fn accepts_a_well_formed_image() {
        assert_eq!(run(&image(4096, 4096)), Ok(()));
    }

    #[test]
    fn refuses_truncation_and_junk() {
        assert_eq!(
            run(&image(4096, 8192)).unwrap_err(),
            "truncated: segment 0 ends at byte 8192, past the end of the file (4096 bytes)"
        );
        assert_eq!(
            run(b"short").unwrap_err(),
            "not an ELF file (5 bytes, shorter than an ELF header)"
        );
        let mut b = image(4096, 4096);
        b[0] = b'X';
        assert_eq!(run(&b).unwrap_err(), "not an ELF file (bad magic)");
        let mut b = image(100, 100);
        b[56..58].copy_from_slice(&2u16.to_ne_bytes());
        assert_eq!(
            run(&b).unwrap_err(),
            "truncated: program headers end at byte 176, past the end of the file (100 bytes)"
        );
        let mut b = image(4096, 4096);
        b[32..40].copy_from_slice(&(u64::MAX - 8).to_ne_bytes());
        assert_eq!(run(&b).unwrap_err(), "program headers offset overflows");
        let mut b = image(4096, 4096);
        b[64 + 8..64 + 16].copy_from_slice(&(u64::MAX - 8).to_ne_bytes());
        assert_eq!(run(&b).unwrap_err(), "segment 0: offset overflows");
        let mut b = image(4096, 4096);
        b[16..18].copy_from_slice(&2u16.to_ne_bytes());
        assert_eq!(run(&b).unwrap_err(), "not a shared object (ELF type 2)");
    }
}

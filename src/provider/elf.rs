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

const PT_NOTE: u32 = 4;
/// Notes read at most: a plugin's note segments are a few hundred bytes.
const MAX_NOTE_BYTES: u64 = 64 * 1024;

/// What a plugin's `fi_xpu` ELF note says (`fi_xpu_prov_note`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    pub abi_major: u32,
    pub abi_minor: u32,
    pub prov_id: u32,
    pub version: u32,
    pub name: String,
}

/// The `fi_xpu` note of a file `check` accepted, from its `PT_NOTE`
/// segments; `None` when it has none (a plugin built before the note, or
/// without the SDK's or the header's macro). A malformed note is refused.
pub fn provider_note(
    file_size: u64,
    read: impl Fn(u64, usize) -> std::io::Result<Vec<u8>>,
) -> Result<Option<Note>, String> {
    let eh = read(0, EHDR_SIZE).map_err(|e| format!("cannot read the ELF header: {e}"))?;
    let (phoff, phnum) = (u64_at(&eh, 32), u16_at(&eh, 56));
    let ph = read(phoff, phnum as usize * PHDR_SIZE)
        .map_err(|e| format!("cannot read the program headers: {e}"))?;
    for p in ph.chunks_exact(PHDR_SIZE) {
        if u32_at(p, 0) != PT_NOTE {
            continue;
        }
        let (offset, filesz, align) = (u64_at(p, 8), u64_at(p, 32), u64_at(p, 48));
        let inside = offset
            .checked_add(filesz)
            .is_some_and(|end| end <= file_size);
        if !inside || filesz > MAX_NOTE_BYTES {
            return Err(format!("bad note segment ({filesz} bytes at {offset})"));
        }
        let notes =
            read(offset, filesz as usize).map_err(|e| format!("cannot read the notes: {e}"))?;
        if let Some(n) = find_note(&notes, if align == 8 { 8 } else { 4 })? {
            return Ok(Some(n));
        }
    }
    Ok(None)
}

/// The `fi_xpu` note among the notes of one segment, whose entries are
/// aligned to `align` bytes.
fn find_note(b: &[u8], align: usize) -> Result<Option<Note>, String> {
    use fi_xpu_abi::{FI_XPU_PROV_NOTE_DESCSZ, FI_XPU_PROV_NOTE_NAMESZ, FI_XPU_PROV_NOTE_TYPE};
    let up = |n: usize| n.div_ceil(align) * align;
    let mut at = 0;
    while at + 12 <= b.len() {
        let (namesz, descsz, ty) = (
            u32_at(b, at) as usize,
            u32_at(b, at + 4) as usize,
            u32_at(b, at + 8),
        );
        let name_at = at + 12;
        let desc_at = name_at.saturating_add(up(namesz));
        let next = desc_at.saturating_add(up(descsz));
        if next > b.len() {
            return Err("malformed note (runs past its segment)".into());
        }
        if &b[name_at..name_at + namesz] == b"fi_xpu\0" && ty == FI_XPU_PROV_NOTE_TYPE {
            if namesz != FI_XPU_PROV_NOTE_NAMESZ as usize
                || descsz != FI_XPU_PROV_NOTE_DESCSZ as usize
            {
                return Err(format!("malformed fi_xpu note ({descsz} bytes)"));
            }
            let d = &b[desc_at..desc_at + descsz];
            let raw = &d[16..48];
            let len = raw
                .iter()
                .position(|&c| c == 0)
                .ok_or("fi_xpu note: name not NUL-terminated")?;
            let name = std::str::from_utf8(&raw[..len])
                .map_err(|_| "fi_xpu note: name is not UTF-8".to_string())?;
            return Ok(Some(Note {
                abi_major: u32_at(d, 0),
                abi_minor: u32_at(d, 4),
                prov_id: u32_at(d, 8),
                version: u32_at(d, 12),
                name: name.to_string(),
            }));
        }
        at = next;
    }
    Ok(None)
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

    /// One note entry (4-byte aligned).
    fn note_entry(owner: &[u8], ty: u32, desc: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend((owner.len() as u32).to_ne_bytes());
        v.extend((desc.len() as u32).to_ne_bytes());
        v.extend(ty.to_ne_bytes());
        v.extend(owner);
        v.resize(v.len().div_ceil(4) * 4, 0);
        v.extend(desc);
        v.resize(v.len().div_ceil(4) * 4, 0);
        v
    }

    #[test]
    fn reads_the_fi_xpu_note_among_others() {
        let mut desc = Vec::new();
        for w in [1u32, 3, 201, 0x10002] {
            desc.extend(w.to_ne_bytes());
        }
        let mut name = b"shm".to_vec();
        name.resize(32, 0);
        desc.extend(&name);
        let mut seg = note_entry(b"GNU\0", 3, &[7; 20]);
        seg.extend(note_entry(
            b"fi_xpu\0",
            fi_xpu_abi::FI_XPU_PROV_NOTE_TYPE,
            &desc,
        ));
        assert_eq!(
            find_note(&seg, 4),
            Ok(Some(Note {
                abi_major: 1,
                abi_minor: 3,
                prov_id: 201,
                version: 0x10002,
                name: "shm".into()
            }))
        );
        assert_eq!(find_note(&seg[..36], 4), Ok(None));
        assert!(find_note(&seg[..seg.len() - 4], 4).is_err());
        let mut bad = desc.clone();
        bad[16..48].fill(b'x');
        let seg = note_entry(b"fi_xpu\0", fi_xpu_abi::FI_XPU_PROV_NOTE_TYPE, &bad);
        assert_eq!(
            find_note(&seg, 4),
            Err("fi_xpu note: name not NUL-terminated".into())
        );
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

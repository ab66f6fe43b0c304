//! Markdown to roff (man(7) macros) for the pages under `man/`.
//!
//! Only the subset the pages use is understood: `#`/`##` headings, paragraphs,
//! fenced code, `-`/`*`/`1.` lists, pipe tables, `> ` quotes, and inline
//! `**bold**`, `*italic*`, `` `code` `` and `[text](link)`. Anything else is
//! printed as text, escaped, so a page never turns into stray roff requests.
//!
//! The integration tests include this file with `#[path]`, so it uses std only.

/// A page as named by its source file, `<name>.<section>.md`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page {
    pub name: String,
    pub section: String,
}

impl Page {
    /// `fi_xpu_alloc.3.md` -> `fi_xpu_alloc`, section `3`.
    pub fn from_file_name(file: &str) -> Option<Page> {
        let stem = file.strip_suffix(".md")?;
        let (name, section) = stem.rsplit_once('.')?;
        let valid = !name.is_empty()
            && section.starts_with(|c: char| matches!(c, '1'..='9'))
            && section.chars().all(|c| c.is_ascii_alphanumeric());
        valid.then(|| Page {
            name: name.into(),
            section: section.into(),
        })
    }

    /// Where `man` looks for it below a man root: `man3/fi_xpu_alloc.3`.
    pub fn install_path(&self) -> String {
        format!("man{}/{}.{}", &self.section[..1], self.name, self.section)
    }
}

/// One top-level (`# `) section of a page: its title and raw markdown body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    pub title: String,
    pub body: String,
}

/// Drops a leading `---` ... `---` metadata block, which some editors add.
fn strip_front_matter(md: &str) -> &str {
    let Some(rest) = md.strip_prefix("---\n") else {
        return md;
    };
    match rest.find("\n---\n") {
        Some(end) => &rest[end + 5..],
        None => md,
    }
}

fn is_fence(line: &str) -> bool {
    line.trim_start().starts_with("```")
}

fn heading(line: &str) -> Option<(usize, &str)> {
    let level = line.chars().take_while(|&c| c == '#').count();
    if level == 0 || level > 6 {
        return None;
    }
    let text = line[level..].strip_prefix(' ')?;
    Some((level, text.trim().trim_end_matches('#').trim_end()))
}

/// The top-level sections of a page, in order. Text before the first heading
/// (other than blank lines) is returned as a section with an empty title.
pub fn sections(md: &str) -> Vec<Section> {
    let mut out: Vec<Section> = Vec::new();
    let mut in_fence = false;
    for line in strip_front_matter(md).lines() {
        if is_fence(line) {
            in_fence = !in_fence;
        } else if !in_fence {
            if let Some((1, title)) = heading(line) {
                out.push(Section {
                    title: title.into(),
                    body: String::new(),
                });
                continue;
            }
        }
        if out.is_empty() {
            if line.trim().is_empty() {
                continue;
            }
            out.push(Section {
                title: String::new(),
                body: String::new(),
            });
        }
        let body = &mut out.last_mut().unwrap().body;
        body.push_str(line);
        body.push('\n');
    }
    out
}

/// Escapes literal text: roff reads `\` as an escape, and `-` unescaped
/// becomes a typographic hyphen, which breaks copied options and code.
fn escape(text: &str) -> String {
    let mut s = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => s.push_str("\\e"),
            '-' => s.push_str("\\-"),
            '\t' => s.push_str("    "),
            c => s.push(c),
        }
    }
    s
}

/// Makes a line of output text safe at the start of a roff line, where `.`
/// and `'` would begin a request.
fn protect_line(line: &str) -> String {
    if line.starts_with('.') || line.starts_with('\'') {
        format!("\\&{line}")
    } else {
        line.to_string()
    }
}

/// Converts inline markdown to roff font changes.
pub fn inline(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    let find = |from: usize, pat: &[char]| -> Option<usize> {
        (from..chars.len().saturating_sub(pat.len() - 1)).find(|&j| chars[j..].starts_with(pat))
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' if i + 1 < chars.len() && chars[i + 1].is_ascii_punctuation() => {
                out.push_str(&escape(&chars[i + 1].to_string()));
                i += 2;
            }
            '`' => {
                let ticks = chars[i..].iter().take_while(|&&c| c == '`').count();
                let fence = vec!['`'; ticks];
                match find(i + ticks, &fence) {
                    Some(end) => {
                        let code: String = chars[i + ticks..end].iter().collect();
                        out.push_str("\\fI");
                        out.push_str(&escape(code.trim()));
                        out.push_str("\\fR");
                        i = end + ticks;
                    }
                    None => {
                        out.push_str(&"`".repeat(ticks));
                        i += ticks;
                    }
                }
            }
            '*' if chars.get(i + 1) == Some(&'*') => match find(i + 2, &['*', '*']) {
                Some(end) if end > i + 2 => {
                    let inner: String = chars[i + 2..end].iter().collect();
                    out.push_str("\\fB");
                    out.push_str(&inline(&inner));
                    out.push_str("\\fR");
                    i = end + 2;
                }
                _ => {
                    out.push_str("**");
                    i += 2;
                }
            },
            '*' if chars.get(i + 1).is_some_and(|c| !c.is_whitespace()) => {
                let end = (i + 2..chars.len())
                    .find(|&j| chars[j] == '*' && !chars[j - 1].is_whitespace());
                match end {
                    Some(end) => {
                        let inner: String = chars[i + 1..end].iter().collect();
                        out.push_str("\\fI");
                        out.push_str(&inline(&inner));
                        out.push_str("\\fR");
                        i = end + 1;
                    }
                    None => {
                        out.push('*');
                        i += 1;
                    }
                }
            }
            '[' => {
                let link = find(i + 1, &[']', '(']).and_then(|close| {
                    let end = find(close + 2, &[')'])?;
                    let label: String = chars[i + 1..close].iter().collect();
                    let target: String = chars[close + 2..end].iter().collect();
                    Some((label, target, end))
                });
                match link {
                    Some((label, target, end)) => {
                        out.push_str(&inline(&label));
                        // Links between pages read as `name(3)` already;
                        // only outside addresses are worth printing.
                        if target.contains("://") {
                            out.push_str(" <");
                            out.push_str(&escape(&target));
                            out.push('>');
                        }
                        i = end + 1;
                    }
                    None => {
                        out.push('[');
                        i += 1;
                    }
                }
            }
            c => {
                out.push_str(&escape(&c.to_string()));
                i += 1;
            }
        }
    }
    out
}

fn list_item(line: &str) -> Option<(String, &str)> {
    let t = line.trim_start();
    if let Some(rest) = t.strip_prefix("- ").or_else(|| t.strip_prefix("* ")) {
        return Some(("\\(bu".into(), rest));
    }
    let digits = t.chars().take_while(|c| c.is_ascii_digit()).count();
    if digits > 0 {
        if let Some(rest) = t[digits..].strip_prefix(". ") {
            return Some((format!("{}.", &t[..digits]), rest));
        }
    }
    None
}

fn is_table_row(line: &str) -> bool {
    line.trim_start().starts_with('|')
}

fn table_cells(line: &str) -> Vec<String> {
    let t = line.trim();
    let t = t.strip_prefix('|').unwrap_or(t);
    let t = t.strip_suffix('|').unwrap_or(t);
    // `\|` inside a cell is a literal bar.
    let mut cells = vec![String::new()];
    let mut chars = t.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cells.last_mut().unwrap().push('|');
                chars.next();
            }
            '|' => cells.push(String::new()),
            c => cells.last_mut().unwrap().push(c),
        }
    }
    cells.into_iter().map(|c| c.trim().to_string()).collect()
}

fn is_separator_row(cells: &[String]) -> bool {
    cells.iter().all(|c| {
        !c.is_empty() && c.chars().all(|ch| matches!(ch, '-' | ':' | ' ')) && c.contains('-')
    })
}

/// A pipe table as a tbl(1) table. Leading columns (names, error codes) keep
/// their natural width; the last one takes the rest of the line and wraps,
/// as a text block.
fn render_table(rows: &[&str], out: &mut String) {
    let mut parsed: Vec<Vec<String>> = rows.iter().map(|r| table_cells(r)).collect();
    let header = parsed.len() > 1 && is_separator_row(&parsed[1]);
    if header {
        parsed.remove(1);
    }
    let cols = parsed.iter().map(Vec::len).max().unwrap_or(1);
    out.push_str(".PP\n.TS\nbox;\n");
    let mut plain = vec!["l"; cols];
    plain[cols - 1] = "lx";
    let plain = plain.join(" ");
    if header {
        out.push_str(&vec!["lb"; cols].join(" "));
        out.push('\n');
    }
    out.push_str(&plain);
    out.push_str(".\n");
    for (r, row) in parsed.iter().enumerate() {
        let cells: Vec<String> = (0..cols)
            .map(|c| {
                let text = inline(row.get(c).map(String::as_str).unwrap_or(""));
                if c + 1 == cols {
                    format!("T{{\n{}\nT}}", protect_line(&text))
                } else {
                    protect_line(&text)
                }
            })
            .collect();
        out.push_str(&cells.join("\t"));
        out.push('\n');
        if header && r == 0 {
            out.push_str("_\n");
        }
    }
    out.push_str(".TE\n");
}

/// Renders a page to roff, headed by a `.TH` line built from its name.
pub fn render(page: &Page, version: &str, md: &str) -> String {
    let lines: Vec<&str> = strip_front_matter(md).lines().collect();
    let mut body = String::new();
    let mut para: Vec<&str> = Vec::new();
    let mut has_table = false;
    // Set while inside a list, so that an indented paragraph after a blank
    // line continues the item instead of starting a new page paragraph.
    let mut list: Option<(usize, u32)> = None;

    fn flush(para: &mut Vec<&str>, body: &mut String, macro_line: &str) {
        if para.is_empty() {
            return;
        }
        let text = para.iter().map(|l| l.trim()).collect::<Vec<_>>().join(" ");
        body.push_str(macro_line);
        body.push('\n');
        body.push_str(&protect_line(&inline(&text)));
        body.push('\n');
        para.clear();
    }

    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if is_fence(line) {
            flush(&mut para, &mut body, ".PP");
            let fence_indent = line.len() - line.trim_start().len();
            i += 1;
            match list {
                Some((_, width)) => body.push_str(&format!(".IP \"\" {width}\n.nf\n")),
                None => body.push_str(".PP\n.RS 4\n.nf\n"),
            }
            while i < lines.len() && !is_fence(lines[i]) {
                let l = lines[i];
                let strip = l.len() - l.trim_start().len();
                let code = &l[strip.min(fence_indent)..];
                body.push_str(&protect_line(&escape(code)));
                body.push('\n');
                i += 1;
            }
            body.push_str(if list.is_some() {
                ".fi\n"
            } else {
                ".fi\n.RE\n"
            });
            i += 1;
            continue;
        }
        if line.trim().is_empty() {
            flush(&mut para, &mut body, ".PP");
            i += 1;
            continue;
        }
        if let Some((level, title)) = heading(line) {
            flush(&mut para, &mut body, ".PP");
            list = None;
            let title = inline(title).replace('"', "\\(dq");
            let mac = if level == 1 { ".SH" } else { ".SS" };
            body.push_str(&format!("{mac} \"{title}\"\n"));
            i += 1;
            continue;
        }
        if is_table_row(line) {
            flush(&mut para, &mut body, ".PP");
            list = None;
            let start = i;
            while i < lines.len() && is_table_row(lines[i]) {
                i += 1;
            }
            render_table(&lines[start..i], &mut body);
            has_table = true;
            continue;
        }
        if let Some((mark, first)) = list_item(line) {
            flush(&mut para, &mut body, ".PP");
            let indent = line.len() - line.trim_start().len();
            let mut item = vec![first];
            i += 1;
            while i < lines.len() {
                let next = lines[i];
                let blank = next.trim().is_empty();
                if blank
                    || is_fence(next)
                    || heading(next).is_some()
                    || is_table_row(next)
                    || list_item(next).is_some()
                {
                    break;
                }
                item.push(next);
                i += 1;
            }
            let width = if mark.starts_with('\\') { 2 } else { 4 };
            if indent >= 2 {
                body.push_str(".RS 2\n");
            }
            flush(&mut item, &mut body, &format!(".IP {mark} {width}"));
            if indent >= 2 {
                body.push_str(".RE\n");
            }
            list = Some((indent, width));
            continue;
        }
        if let Some(quote) = line.trim_start().strip_prefix('>') {
            flush(&mut para, &mut body, ".PP");
            let mut q = vec![quote];
            i += 1;
            while i < lines.len() {
                match lines[i].trim_start().strip_prefix('>') {
                    Some(more) => q.push(more),
                    None => break,
                }
                i += 1;
            }
            body.push_str(".RS 4\n");
            flush(&mut q, &mut body, ".PP");
            body.push_str(".RE\n");
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        if para.is_empty() {
            match list {
                Some((li, width)) if indent > li => {
                    let start = i;
                    while i < lines.len()
                        && !lines[i].trim().is_empty()
                        && list_item(lines[i]).is_none()
                        && !is_fence(lines[i])
                    {
                        i += 1;
                    }
                    let mut cont: Vec<&str> = lines[start..i].to_vec();
                    flush(&mut cont, &mut body, &format!(".IP \"\" {width}"));
                    continue;
                }
                _ => list = None,
            }
        }
        para.push(line);
        i += 1;
    }
    flush(&mut para, &mut body, ".PP");

    let mut out = String::new();
    if has_table {
        // Tells man(1) to run the page through tbl(1).
        out.push_str("'\\\" t\n");
    }
    out.push_str(&format!(
        ".TH \"{}\" \"{}\" \"\" \"fi_xpu {}\" \"fi_xpu\"\n",
        page.name.to_uppercase(),
        page.section,
        version
    ));
    out.push_str(&body);
    out
}

/// The names a NAME section lists before its ` - ` separator.
pub fn name_entries(name_body: &str) -> Option<(Vec<String>, String)> {
    let text = name_body
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let (names, what) = text.split_once(" - ")?;
    let names: Vec<String> = names
        .split(',')
        .map(|n| n.trim().trim_matches(|c| c == '*' || c == '`').to_string())
        .filter(|n| !n.is_empty())
        .collect();
    if names.is_empty() || what.trim().is_empty() {
        return None;
    }
    Some((names, what.trim().to_string()))
}

/// Identifiers starting with `prefix` that are followed by `(`, i.e. the
/// functions a SYNOPSIS declares or a text calls.
pub fn called_names(text: &str, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while let Some(pos) = text[i..].find(prefix) {
        let start = i + pos;
        let mut end = start + prefix.len();
        while end < bytes.len() && ident(bytes[end]) {
            end += 1;
        }
        let boundary = start == 0 || !ident(bytes[start - 1]);
        let mut after = end;
        while after < bytes.len() && bytes[after] == b' ' {
            after += 1;
        }
        if boundary && after < bytes.len() && bytes[after] == b'(' {
            let name = text[start..end].to_string();
            if !out.contains(&name) {
                out.push(name);
            }
        }
        i = end;
    }
    out
}

/// The structural rules every page keeps: it opens with a NAME section in
/// `name[, name...] - description` form (what whatis(1) indexes), and a
/// section 3 page names in NAME exactly the functions its SYNOPSIS declares.
/// Returns the names NAME lists.
pub fn check(page: &Page, md: &str) -> Result<Vec<String>, String> {
    let secs = sections(md);
    let first = secs.first().ok_or("the page is empty")?;
    if first.title != "NAME" {
        return Err(format!(
            "the page must start with `# NAME`, not `{}`",
            if first.title.is_empty() {
                first.body.lines().next().unwrap_or("")
            } else {
                &first.title
            }
        ));
    }
    let (names, _) =
        name_entries(&first.body).ok_or("NAME must read `name[, name...] - description`")?;
    if page.section.starts_with('3') {
        let synopsis = secs
            .iter()
            .find(|s| s.title == "SYNOPSIS")
            .ok_or("a section 3 page needs a SYNOPSIS")?;
        let declared = called_names(&synopsis.body, "fi_xpu_");
        for f in &declared {
            if !names.contains(f) {
                return Err(format!("SYNOPSIS declares {f}() but NAME does not list it"));
            }
        }
        for n in &names {
            if !declared.contains(n) {
                return Err(format!(
                    "NAME lists {n} but SYNOPSIS does not declare {n}()"
                ));
            }
        }
    }
    Ok(names)
}

/// Alias pages, as libfabric ships them: every name a page's NAME section
/// lists besides the page itself gets a one-line page in the same section,
/// `.so man3/<page>.3`, so that `man <function>` finds the page that
/// documents it. `pages` holds each page with the names its NAME lists.
/// Returns `(alias page, its text)`; a name that is also a page, or that
/// two pages list, is an error.
pub fn aliases(pages: &[(Page, Vec<String>)]) -> Result<Vec<(Page, String)>, String> {
    let mut out: Vec<(Page, String)> = Vec::new();
    for (page, names) in pages {
        for name in names.iter().filter(|n| **n != page.name) {
            let alias = Page {
                name: name.clone(),
                section: page.section.clone(),
            };
            if pages.iter().any(|(p, _)| *p == alias) {
                return Err(format!(
                    "{name}({}) is a page of its own and listed in {}({})",
                    alias.section, page.name, page.section
                ));
            }
            if out.iter().any(|(a, _)| *a == alias) {
                return Err(format!(
                    "{name}({}) is listed in more than one page's NAME",
                    alias.section
                ));
            }
            out.push((alias, format!(".so {}\n", page.install_path())));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page() -> Page {
        Page::from_file_name("fi_xpu_alloc.3.md").unwrap()
    }

    #[test]
    fn page_names() {
        assert_eq!(
            page(),
            Page {
                name: "fi_xpu_alloc".into(),
                section: "3".into()
            }
        );
        assert_eq!(page().install_path(), "man3/fi_xpu_alloc.3");
        assert_eq!(
            Page::from_file_name("fi_xpu.7.md").unwrap().install_path(),
            "man7/fi_xpu.7"
        );
        assert_eq!(Page::from_file_name("README.md"), None);
        assert_eq!(Page::from_file_name("fi_xpu.x.md"), None);
        assert_eq!(Page::from_file_name("fi_xpu.3"), None);
    }

    #[test]
    fn th_and_headings() {
        let r = render(
            &page(),
            "0.1.0",
            "# NAME\n\nfi_xpu_alloc - get memory\n\n## Flags \"x\"\n",
        );
        assert_eq!(
            r,
            ".TH \"FI_XPU_ALLOC\" \"3\" \"\" \"fi_xpu 0.1.0\" \"fi_xpu\"\n\
             .SH \"NAME\"\n.PP\nfi_xpu_alloc \\- get memory\n.SS \"Flags \\(dqx\\(dq\"\n"
        );
    }

    #[test]
    fn inline_fonts() {
        assert_eq!(inline("**bold** and *it*"), "\\fBbold\\fR and \\fIit\\fR");
        assert_eq!(
            inline("call `fi_xpu_free(a\\b)`"),
            "call \\fIfi_xpu_free(a\\eb)\\fR"
        );
        assert_eq!(inline("a * b * c"), "a * b * c", "lone stars are text");
        assert_eq!(inline("ptr **x"), "ptr **x");
        assert_eq!(inline("\\*not\\*"), "*not*");
        assert_eq!(inline("see [fi_xpu(7)](fi_xpu.7.md)"), "see fi_xpu(7)");
        assert_eq!(inline("[site](https://x.org/a)"), "site <https://x.org/a>");
        assert_eq!(inline("-FI_EINVAL"), "\\-FI_EINVAL");
        assert_eq!(inline("fi_xpu_alloc_x"), "fi_xpu_alloc_x");
    }

    #[test]
    fn code_blocks_are_literal() {
        let md = "text\n\n```c\n.leading dot\n'quote\nprintf(\"%d\\n\", -1);\n# not a heading\n```\nafter\n";
        let r = render(&page(), "0", md);
        let body: Vec<&str> = r.lines().skip(1).collect();
        assert_eq!(
            body,
            [
                ".PP",
                "text",
                ".PP",
                ".RS 4",
                ".nf",
                "\\&.leading dot",
                "\\&'quote",
                "printf(\"%d\\en\", \\-1);",
                "# not a heading",
                ".fi",
                ".RE",
                ".PP",
                "after"
            ]
        );
    }

    #[test]
    fn paragraphs_are_joined_and_protected() {
        let r = render(&page(), "0", "one\ntwo\n.three\n\n'four");
        assert!(r.ends_with(".PP\none two .three\n.PP\n\\&'four\n"), "{r}");
    }

    #[test]
    fn lists() {
        let md = "- one\n  more\n* two\n\n  continued\n\n1. first\n2. second\nplain\n";
        let r = render(&page(), "0", md);
        let body: Vec<&str> = r.lines().skip(1).collect();
        assert_eq!(
            body,
            [
                ".IP \\(bu 2",
                "one more",
                ".IP \\(bu 2",
                "two",
                ".IP \"\" 2",
                "continued",
                ".IP 1. 4",
                "first",
                ".IP 2. 4",
                "second plain",
            ]
        );
    }

    #[test]
    fn tables() {
        let md = "| Code | Meaning |\n|------|---------|\n| `-FI_EINVAL` | bad \\| arg |\n| x |\n";
        let r = render(&page(), "0", md);
        assert!(r.starts_with("'\\\" t\n.TH "), "{r}");
        let body: Vec<&str> = r.lines().skip(2).collect();
        assert_eq!(
            body,
            [
                ".PP",
                ".TS",
                "box;",
                "lb lb",
                "l lx.",
                "Code\tT{\nMeaning\nT}",
                "_",
                "\\fI\\-FI_EINVAL\\fR\tT{\nbad | arg\nT}",
                "x\tT{\n\nT}",
                ".TE",
            ]
            .join("\n")
            .lines()
            .collect::<Vec<_>>()
        );
    }

    #[test]
    fn alias_pages_point_at_the_documenting_page() {
        let alloc = page();
        let info = Page::from_file_name("fi_xpu_info.1.md").unwrap();
        let pages = vec![
            (
                alloc.clone(),
                vec!["fi_xpu_alloc".into(), "fi_xpu_free".into()],
            ),
            (info.clone(), vec!["fi_xpu_info".into()]),
        ];
        let a = aliases(&pages).unwrap();
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].0.install_path(), "man3/fi_xpu_free.3");
        assert_eq!(a[0].1, ".so man3/fi_xpu_alloc.3\n");
        let mut twice = pages.clone();
        twice.push((
            Page::from_file_name("fi_xpu_x.3.md").unwrap(),
            vec!["fi_xpu_x".into(), "fi_xpu_free".into()],
        ));
        assert!(aliases(&twice).unwrap_err().contains("more than one"));
        let mut shadow = pages;
        shadow[0].1.push("fi_xpu_x".into());
        shadow.push((
            Page::from_file_name("fi_xpu_x.3.md").unwrap(),
            vec!["fi_xpu_x".into()],
        ));
        assert!(aliases(&shadow).unwrap_err().contains("page of its own"));
    }

    #[test]
    fn quotes_and_front_matter() {
        let r = render(&page(), "0", "---\ntitle: x\n---\n> note\n> more\n");
        let body: Vec<&str> = r.lines().skip(1).collect();
        assert_eq!(body, [".RS 4", ".PP", "note more", ".RE"]);
    }

    #[test]
    fn section_split_ignores_code() {
        let md = "# NAME\nx - y\n\n```sh\n# comment\n```\n# SYNOPSIS\nint f(void);\n";
        let s = sections(md);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].title, "NAME");
        assert!(s[0].body.contains("# comment"));
        assert_eq!(s[1].title, "SYNOPSIS");
        assert_eq!(sections("\nintro\n# A\n")[0].title, "");
    }

    #[test]
    fn structure_checks() {
        let p = page();
        let good = "# NAME\nfi_xpu_alloc, fi_xpu_free - memory\n# SYNOPSIS\n```c\nint fi_xpu_alloc(void);\nint fi_xpu_free(void *p);\n```\n";
        assert_eq!(check(&p, good).unwrap(), ["fi_xpu_alloc", "fi_xpu_free"]);
        let missing = good.replace("fi_xpu_alloc, ", "");
        assert!(check(&p, &missing)
            .unwrap_err()
            .contains("fi_xpu_alloc() but NAME"));
        let extra = good.replace("int fi_xpu_free(void *p);\n", "");
        assert!(check(&p, &extra)
            .unwrap_err()
            .contains("NAME lists fi_xpu_free"));
        assert!(check(&p, "intro\n# NAME\nx - y\n")
            .unwrap_err()
            .contains("start with"));
        assert!(check(&p, "# NAME\nx: y\n# SYNOPSIS\n").is_err());
        let seven = Page::from_file_name("fi_xpu.7.md").unwrap();
        assert_eq!(
            check(&seven, "# NAME\nfi_xpu - overview\n").unwrap(),
            ["fi_xpu"]
        );
    }

    #[test]
    fn names_and_calls() {
        let (names, what) = name_entries("fi_xpu_alloc, fi_xpu_free\n - device memory\n").unwrap();
        assert_eq!(names, ["fi_xpu_alloc", "fi_xpu_free"]);
        assert_eq!(what, "device memory");
        assert_eq!(name_entries("fi_xpu_alloc: memory"), None);
        assert_eq!(
            called_names(
                "int fi_xpu_alloc(void);\nint fi_xpu_free (x); struct fi_xpu_mem_ops o; my_fi_xpu_x(); fi_xpu_alloc();",
                "fi_xpu_"
            ),
            ["fi_xpu_alloc", "fi_xpu_free"]
        );
    }
}

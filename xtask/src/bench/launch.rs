//! What a host launch costs (benches/launch.c): fi_xpu_host_launch of an
//! empty kernel and of one whose work items meet at a device barrier,
//! beside creating and joining a pthread per work item, in the same run.
use super::{cc, cell, figures, ratio};
use crate::Result;
use std::path::Path;
use std::process::Command;

const SHAPES: [&str; 5] = ["1x1", "1x4", "2x2", "4x4", "8x8"];

pub fn run(lib: &Path, dir: &Path, quick: bool) -> Result {
    let exe = dir.join("launch");
    cc("benches/launch.c", &exe, lib, &["-lfi_xpu", "-lpthread"])?;
    let (iters, rounds) = if quick { ("300", "3") } else { ("2000", "7") };
    let f = figures(Command::new(&exe).args([iters, rounds]), "launch");
    println!(
        "\n### Host launch: groups x work items ({}; median of {rounds} rounds of {iters} launches)\n",
        super::proxy::load()
    );
    println!("| shape | empty kernel (µs) | kernel with one device barrier (µs) | a pthread per work item, created and joined (µs) | empty kernel / pthreads |");
    println!("|---|---|---|---|---|");
    for s in SHAPES {
        let g = |k: &str| f.get(&format!("{k}_{s}_us")).copied();
        println!(
            "| {s} | {} | {} | {} | {} |",
            cell(g("launch"), 2),
            cell(g("barrier"), 2),
            cell(g("pthread"), 2),
            ratio(g("launch"), g("pthread"))
        );
    }
    Ok(())
}
